/* Informers of a custom resource whose CRD is not installed yet
 * (kcr_informer_opts.await_crd), on the real control plane: a manager
 * starts without it - the other controllers run and /readyz passes, naming
 * the missing CRD - while the controller that uses it holds its keys; once
 * the CRD is Established its objects are listed and reconciled within 5 s;
 * deleting the CRD puts the informer back to waiting (its objects told
 * deleted as the apiserver deletes them), and installing it again brings
 * it back. A version that stops being served empties the cache without
 * on_delete, and serving it again lists it again. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "itest.h"
#include "kcr/manager.h"
#include "kcr/time.h"

ITEST_CLIENT_FIXTURE

#define GROUP "gate.test.kcr.io"

static const struct kcr_gvr gadgets = {GROUP, "v1", "gadgets", true};
static const struct kcr_gvr gizmos2 = {GROUP, "v2", "gizmos", true};

/* Applies the CRD <plural>.GROUP with versions v1 (storage) and, with v2,
 * v2 too; each served as said. */
static void crd_apply(const char *plural, const char *kind, bool v1_served, bool v2,
                      bool v2_served)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  char name[128], ver2[256] = "";
  cJSON *crd;

  snprintf(name, sizeof(name), "%s." GROUP, plural);
  if(v2)
    snprintf(ver2, sizeof(ver2),
             ",{\"name\":\"v2\",\"served\":%s,\"storage\":false,\"schema\":{"
             "\"openAPIV3Schema\":{\"type\":\"object\","
             "\"x-kubernetes-preserve-unknown-fields\":true}}}",
             v2_served ? "true" : "false");
  crd = itest_json(
      "{\"apiVersion\":\"apiextensions.k8s.io/v1\",\"kind\":\"CustomResourceDefinition\","
      "\"metadata\":{\"name\":\"%s\"},\"spec\":{\"group\":\"" GROUP "\","
      "\"scope\":\"Namespaced\",\"names\":{\"plural\":\"%s\",\"kind\":\"%s\"},"
      "\"versions\":[{\"name\":\"v1\",\"served\":%s,\"storage\":true,\"schema\":{"
      "\"openAPIV3Schema\":{\"type\":\"object\","
      "\"x-kubernetes-preserve-unknown-fields\":true}}}%s]}}",
      name, plural, kind, v1_served ? "true" : "false", ver2);
  itest_expect(
      KCR_OK,
      kcr_apply(cl, &(struct kcr_ref){&itest_crds, NULL, name}, crd,
                &(struct kcr_apply_opts){.field_manager = "kcr-itest", .force = true},
                NULL, &ei),
      &ei);
  cJSON_Delete(crd);
  kcr_errinfo_cleanup(&ei);
}

/* Deletes the CRD <plural>.GROUP and waits until it is gone. */
static void crd_delete(const char *plural)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  char name[128];
  kcr_err rc;

  snprintf(name, sizeof(name), "%s." GROUP, plural);
  rc = kcr_delete(cl, &(struct kcr_ref){&itest_crds, NULL, name}, NULL, NULL, &ei);
  assert_true(rc == KCR_OK || rc == KCR_ENOTFOUND);
  kcr_errinfo_cleanup(&ei);
  for(int i = 0; i < 600; i++) {
    cJSON *o = NULL;
    rc = kcr_get(cl, &(struct kcr_ref){&itest_crds, NULL, name}, &o, &ei);
    cJSON_Delete(o);
    kcr_errinfo_cleanup(&ei);
    if(rc == KCR_ENOTFOUND)
      return;
    itest_sleep_ms(100);
  }
  fail_msg("CRD %s not gone after 60 s", name);
}

/* Waits until gvr's resource is served (a LIST answers 200); returns when
 * it was, in monotonic ms. */
static uint64_t wait_served(const struct kcr_gvr *gvr, const char *ns)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  kcr_err rc = KCR_EHTTP;
  for(int i = 0; i < 600 && rc; i++) {
    cJSON *list = NULL;
    rc = kcr_list(cl, &(struct kcr_ref){gvr, ns}, NULL, &list, &ei);
    cJSON_Delete(list);
    kcr_errinfo_cleanup(&ei);
    if(rc)
      itest_sleep_ms(50);
  }
  assert_int_equal(KCR_OK, rc);
  return kcr_time_mono_ms();
}

static void make(const struct kcr_gvr *gvr, const char *kind, const char *ns,
                 const char *name)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  cJSON *o = itest_json("{\"apiVersion\":\"" GROUP "/%s\",\"kind\":\"%s\",\"metadata\":{"
                        "\"name\":\"%s\"},\"spec\":{\"n\":1}}",
                        gvr->version, kind, name);
  itest_expect(KCR_OK, kcr_create(cl, &(struct kcr_ref){gvr, ns}, o, NULL, NULL, &ei),
               &ei);
  cJSON_Delete(o);
  kcr_errinfo_cleanup(&ei);
}

/* Whether text holds s; says what it holds when not. */
static bool has(struct kcr_buf *text, const char *s)
{
  if(strstr(kcr_buf_str(text), s))
    return true;
  fprintf(stderr, "wanted \"%s\" in:\n%s\n", s, kcr_buf_str(text));
  return false;
}

static bool wait_awaiting(kcr_informer *inf, bool want, long ms)
{
  for(long t = 0; t < ms && kcr_informer_awaiting_crd(inf) != want; t += 20)
    itest_sleep_ms(20);
  return kcr_informer_awaiting_crd(inf) == want;
}

static void a_missing_crd_holds_only_its_controller_until_it_is_installed(void **state)
{
  char *ns = itest_namespace(cl, "crdgate");
  struct kcr_config_opts co = {0};
  struct kcr_manager_opts mo = {.name = "crdgate", .health_addr = "127.0.0.1:0"};
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  struct itest_seen cms = ITEST_SEEN_INIT, gds = ITEST_SEEN_INIT;
  struct kcr_buf body = KCR_BUF_INIT;
  struct itest_run run;
  kcr_informer *icm, *igd;
  kcr_controller *cgd;
  kcr_manager *m;
  kcr_obj *o = NULL;
  cJSON *cm;
  uint64_t t0;
  int port;

  crd_delete("gadgets"); /* left by an earlier run */
  cm = itest_json("{\"metadata\":{\"name\":\"a\"}}");
  itest_expect(
      KCR_OK,
      kcr_create(cl, &(struct kcr_ref){&itest_configmaps, ns}, cm, NULL, NULL, &ei), &ei);
  cJSON_Delete(cm);
  itest_expect(KCR_OK, kcr_config_load(&co, &mo.config, &ei), &ei);
  mo.sync_timeout_ms = 20000; /* would fail the start if it waited for gadgets */
  itest_expect(KCR_OK, kcr_manager_new(&mo, &m, &ei), &ei);
  kcr_config_free(mo.config);
  itest_expect(
      KCR_OK,
      kcr_manager_informer(
          m, &(struct kcr_informer_opts){.gvr = &itest_configmaps, .ns = ns}, &icm, &ei),
      &ei);
  itest_expect(
      KCR_OK,
      kcr_manager_informer(
          m, &(struct kcr_informer_opts){.gvr = &gadgets, .ns = ns, .await_crd = true},
          &igd, &ei),
      &ei);
  itest_seen_controller(m, cl, "crdgate-cms", icm, &cms);
  cgd = itest_seen_controller(m, cl, "crdgate-gadgets", igd, &gds);
  port = kcr_manager_health_port(m);
  itest_run_start(&run, m);

  /* Without the CRD: the rest runs, ready, the missing CRD named. */
  assert_true(itest_wait_saw(&cms, ns, "a", 30000));
  assert_true(wait_awaiting(igd, true, 10000));
  assert_false(kcr_informer_has_synced(igd));
  assert_int_equal(200, itest_http_get(port, "/readyz?verbose", &body));
  assert_true(has(&body, "[+]informers ok: informer gadgets." GROUP " waits for its "
                         "CustomResourceDefinition gadgets." GROUP
                         " to serve version v1: it is not installed"));
  assert_int_equal(KCR_ENOTFOUND, kcr_manager_get(m, &gadgets, ns, "x", &o, &ei));
  kcr_errinfo_cleanup(&ei);
  assert_int_equal(KCR_OK, kcr_controller_enqueue(cgd, ns, "queued"));
  itest_sleep_ms(1500);
  assert_false(itest_saw(&gds, ns, "queued")); /* held: its cache is not there */

  /* Installed: listed and reconciled within 5 s of being served. */
  crd_apply("gadgets", "Gadget", true, false, false);
  t0 = wait_served(&gadgets, ns);
  make(&gadgets, "Gadget", ns, "g1");
  assert_true(itest_wait_saw(&gds, ns, "g1", 5000));
  assert_true(itest_saw(&gds, ns, "queued"));
  fprintf(stderr, "reconciled %llu ms after the CRD served\n",
          (unsigned long long)(kcr_time_mono_ms() - t0));
  assert_true(kcr_informer_has_synced(igd));
  assert_false(kcr_informer_awaiting_crd(igd));
  itest_expect(KCR_OK, kcr_manager_get(m, &gadgets, ns, "g1", &o, &ei), &ei);
  kcr_obj_unref(o);
  assert_int_equal(200, itest_http_get(port, "/readyz?verbose", &body));
  assert_true(has(&body, "[+]informers ok\n"));

  /* Removed: its objects go first (told), then the informer waits again. */
  crd_delete("gadgets");
  assert_true(wait_awaiting(igd, true, 30000));
  for(int i = 0; i < 500 && kcr_store_len(kcr_informer_store(igd)); i++)
    itest_sleep_ms(20); /* (awaiting and unsynced first, then emptied) */
  assert_int_equal(0, kcr_store_len(kcr_informer_store(igd)));
  assert_int_equal(200, itest_http_get(port, "/readyz?verbose", &body));
  assert_true(has(&body, "it is not installed"));

  /* Installed again: back within 5 s. */
  crd_apply("gadgets", "Gadget", true, false, false);
  t0 = wait_served(&gadgets, ns);
  make(&gadgets, "Gadget", ns, "g2");
  assert_true(itest_wait_saw(&gds, ns, "g2", 5000));
  fprintf(stderr, "again: reconciled %llu ms after the CRD served\n",
          (unsigned long long)(kcr_time_mono_ms() - t0));
  assert_false(kcr_informer_awaiting_crd(igd));
  itest_run_stop(&run, 0);
  kcr_buf_cleanup(&body);
  crd_delete("gadgets");
  itest_namespace_drop(cl, ns);
}

struct counts {
  atomic_int adds, deletes;
};
static void on_add(kcr_obj *o, void *ud)
{
  (void)o;
  atomic_fetch_add(&((struct counts *)ud)->adds, 1);
}
static void on_delete(kcr_obj *o, void *ud)
{
  (void)o;
  atomic_fetch_add(&((struct counts *)ud)->deletes, 1);
}

/* The version the informer reads stops being served: its objects are not
 * deleted, so the cache is emptied without on_delete; served again, they
 * are listed again (on_add). */
static void a_version_no_longer_served_empties_the_cache_without_deletes(void **state)
{
  char *ns = itest_namespace(cl, "crdgate-v");
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  struct counts n = {0};
  kcr_informer *inf;
  char why[256];

  crd_delete("gizmos");
  crd_apply("gizmos", "Gizmo", true, true, true);
  wait_served(&gizmos2, ns);
  make(&gizmos2, "Gizmo", ns, "z1");
  itest_expect(KCR_OK,
               kcr_informer_new(
                   &(struct kcr_informer_opts){
                       .client = cl, .gvr = &gizmos2, .ns = ns, .await_crd = true},
                   &inf, &ei),
               &ei);
  assert_int_equal(KCR_OK,
                   kcr_informer_add_handlers(
                       inf, &(struct kcr_informer_handlers){
                                .on_add = on_add, .on_delete = on_delete, .ud = &n}));
  assert_int_equal(KCR_OK, kcr_informer_start(inf));
  assert_true(kcr_informer_wait_synced(inf, 30000));
  assert_int_equal(1, atomic_load(&n.adds));

  crd_apply("gizmos", "Gizmo", true, true, false); /* v2 no longer served */
  assert_true(wait_awaiting(inf, true, 30000));
  for(int i = 0; i < 500 && kcr_store_len(kcr_informer_store(inf)); i++)
    itest_sleep_ms(20); /* (awaiting and unsynced first, then emptied) */
  assert_int_equal(0, kcr_store_len(kcr_informer_store(inf)));
  assert_int_equal(0, atomic_load(&n.deletes));
  assert_true(kcr_informer_why_unsynced(inf, why, sizeof(why)));
  assert_string_equal(why, "informer gizmos." GROUP " waits for its "
                           "CustomResourceDefinition gizmos." GROUP
                           " to serve version v2: its version v2 is not served");

  crd_apply("gizmos", "Gizmo", true, true, true);
  assert_true(kcr_informer_wait_synced(inf, 30000));
  assert_int_equal(1, kcr_store_len(kcr_informer_store(inf)));
  assert_int_equal(2, atomic_load(&n.adds));
  assert_int_equal(0, atomic_load(&n.deletes));
  kcr_informer_free(inf);
  crd_delete("gizmos");
  itest_namespace_drop(cl, ns);
}

/* The core group has no CRDs: await_crd there is a mistake, said. */
static void await_crd_of_the_core_group_is_refused(void **state)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  kcr_informer *inf;
  assert_int_equal(KCR_EINVAL,
                   kcr_informer_new(&(struct kcr_informer_opts){.client = cl,
                                                                .gvr = &itest_configmaps,
                                                                .await_crd = true},
                                    &inf, &ei));
  assert_null(inf);
  assert_non_null(strstr(ei.message, "await_crd for configmaps, of the core group"));
  kcr_errinfo_cleanup(&ei);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(a_missing_crd_holds_only_its_controller_until_it_is_installed),
      cmocka_unit_test(a_version_no_longer_served_empties_the_cache_without_deletes),
      cmocka_unit_test(await_crd_of_the_core_group_is_refused),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
