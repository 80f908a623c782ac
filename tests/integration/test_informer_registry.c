/* The manager's informer registry while run runs (manager.h, rule 5), on
 * the real control plane: an informer asked for from a reconcile is made
 * and started at once, and serves cached reads once synced; /readyz passes
 * meanwhile; removed, its store is emptied while a reference taken before
 * stays readable, reads of it say KCR_EINVAL, and a new one may be made;
 * a controller's source cannot be removed, nor one never registered. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "itest.h"
#include "kcr/manager.h"

ITEST_CLIENT_FIXTURE

static const struct kcr_gvr secrets = {"", "v1", "secrets", true};

struct want {
  kcr_manager *m;
  _Atomic(kcr_informer *) made;
  atomic_int errors;
};

/* Reconciles ConfigMaps; for "want-secrets" asks the manager for an
 * informer of the namespace's Secrets, from the worker thread. */
static kcr_err reconcile(kcr_ctx *cx, const struct kcr_request *req,
                         struct kcr_result *res, void *ud)
{
  struct want *w = ud;
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  kcr_informer *inf = NULL;
  (void)cx;
  (void)res;
  if(strcmp(req->name, "want-secrets"))
    return KCR_OK;
  if(kcr_manager_informer(
         w->m, &(struct kcr_informer_opts){.gvr = &secrets, .ns = req->ns}, &inf, &ei))
    atomic_fetch_add(&w->errors, 1);
  else
    atomic_store(&w->made, inf);
  kcr_errinfo_cleanup(&ei);
  return KCR_OK;
}

static void make(const struct kcr_gvr *gvr, const char *kind, const char *ns,
                 const char *name)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  cJSON *o = itest_json("{\"apiVersion\":\"v1\",\"kind\":\"%s\",\"metadata\":{\"name\":"
                        "\"%s\"}}",
                        kind, name);
  itest_expect(KCR_OK, kcr_create(cl, &(struct kcr_ref){gvr, ns}, o, NULL, NULL, &ei),
               &ei);
  cJSON_Delete(o);
  kcr_errinfo_cleanup(&ei);
}

static void informers_come_and_go_while_the_manager_runs(void **state)
{
  char *ns = itest_namespace(cl, "registry");
  struct kcr_config_opts co = {0};
  struct kcr_manager_opts mo = {.name = "registry", .health_addr = "127.0.0.1:0"};
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  struct want w = {0};
  struct kcr_buf body = KCR_BUF_INIT;
  struct itest_run run;
  kcr_informer *icm, *isec, *again, *other = NULL;
  kcr_controller *c;
  kcr_obj *o = NULL, *kept = NULL;
  int port;

  make(&secrets, "Secret", ns, "s1");
  itest_expect(KCR_OK, kcr_config_load(&co, &mo.config, &ei), &ei);
  itest_expect(KCR_OK, kcr_manager_new(&mo, &w.m, &ei), &ei);
  kcr_config_free(mo.config);
  itest_expect(KCR_OK,
               kcr_manager_informer(
                   w.m, &(struct kcr_informer_opts){.gvr = &itest_configmaps, .ns = ns},
                   &icm, &ei),
               &ei);
  itest_expect(KCR_OK,
               kcr_controller_new(&(struct kcr_controller_opts){.name = "registry",
                                                                .reconcile = reconcile,
                                                                .ud = &w,
                                                                .client = cl},
                                  &c, &ei),
               &ei);
  itest_expect(KCR_OK, kcr_controller_for(c, icm, NULL), &ei);
  itest_expect(KCR_OK, kcr_manager_add(w.m, c), &ei);
  port = kcr_manager_health_port(w.m);
  itest_run_start(&run, w.m);
  assert_true(kcr_informer_wait_synced(icm, 30000));
  assert_int_equal(KCR_EINVAL, kcr_manager_get(w.m, &secrets, ns, "s1", &o, &ei));
  kcr_errinfo_cleanup(&ei);

  /* Asked for from a reconcile: started at once, synced, read. */
  make(&itest_configmaps, "ConfigMap", ns, "want-secrets");
  for(int i = 0; i < 1500 && !atomic_load(&w.made); i++)
    itest_sleep_ms(20);
  isec = atomic_load(&w.made);
  assert_non_null(isec);
  assert_int_equal(0, atomic_load(&w.errors));
  assert_true(kcr_informer_wait_synced(isec, 30000));
  itest_expect(KCR_OK, kcr_manager_get(w.m, &secrets, ns, "s1", &kept, &ei), &ei);
  make(&secrets, "Secret", ns, "s2"); /* and it watches */
  for(int i = 0; i < 1500 && kcr_manager_get(w.m, &secrets, ns, "s2", &o, &ei); i++) {
    kcr_errinfo_cleanup(&ei);
    itest_sleep_ms(20);
  }
  assert_non_null(o);
  kcr_obj_unref(o);
  o = NULL;
  assert_int_equal(200, itest_http_get(port, "/readyz", &body));

  /* What cannot be removed: a controller's source, a stranger. */
  assert_int_equal(KCR_EINVAL, kcr_manager_remove_informer(w.m, icm, &ei));
  assert_non_null(strstr(ei.message, "is a source of controller registry"));
  kcr_errinfo_cleanup(&ei);
  itest_expect(
      KCR_OK,
      kcr_informer_new(&(struct kcr_informer_opts){.client = cl, .gvr = &secrets}, &other,
                       &ei),
      &ei);
  assert_int_equal(KCR_EINVAL, kcr_manager_remove_informer(w.m, other, &ei));
  assert_non_null(strstr(ei.message, "not in this manager's registry"));
  kcr_errinfo_cleanup(&ei);
  kcr_informer_free(other);

  /* Removed: emptied and out of the registry; what was read stays. */
  itest_expect(KCR_OK, kcr_manager_remove_informer(w.m, isec, &ei), &ei);
  assert_int_equal(0, kcr_store_len(kcr_informer_store(isec)));
  assert_string_equal("s1", kcr_obj_name(kept));
  kcr_obj_unref(kept);
  assert_int_equal(KCR_EINVAL, kcr_manager_get(w.m, &secrets, ns, "s1", &o, &ei));
  kcr_errinfo_cleanup(&ei);
  assert_int_equal(KCR_EINVAL, kcr_manager_remove_informer(w.m, isec, &ei));
  kcr_errinfo_cleanup(&ei);
  make(&secrets, "Secret", ns, "s3"); /* its threads stopped: nothing comes in */
  itest_sleep_ms(1000);
  assert_int_equal(0, kcr_store_len(kcr_informer_store(isec)));
  assert_int_equal(200, itest_http_get(port, "/readyz", &body));

  /* And made again, from this thread. */
  itest_expect(
      KCR_OK,
      kcr_manager_informer(w.m, &(struct kcr_informer_opts){.gvr = &secrets, .ns = ns},
                           &again, &ei),
      &ei);
  assert_ptr_not_equal(again, isec);
  assert_true(kcr_informer_wait_synced(again, 30000));
  itest_expect(KCR_OK, kcr_manager_get(w.m, &secrets, ns, "s2", &o, &ei), &ei);
  kcr_obj_unref(o);
  itest_run_stop(&run, 0);
  kcr_buf_cleanup(&body);
  itest_namespace_drop(cl, ns);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(informers_come_and_go_while_the_manager_runs),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
