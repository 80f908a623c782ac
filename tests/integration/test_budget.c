/* The informer's byte budget (kcr_informer_opts.max_bytes) on the real
 * control plane, in a manager: a ConfigMap that takes the cache of
 * ConfigMaps over its budget empties it - the process stays up, /readyz
 * names the informer, the budget and what it selects, cached reads say
 * KCR_EBUDGET rather than "not found", and the ConfigMaps' controller
 * takes no keys - while the Secrets' informer and controller keep
 * working; once the big ConfigMap is deleted the cache fits, lists again,
 * and everything that waited is reconciled. With several namespaces the
 * namespace that went over empties the whole cache, and every namespace
 * lists again. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "itest.h"
#include "kcr/manager.h"

ITEST_CLIENT_FIXTURE

#define BUDGET    (64 << 10)
#define BIG_BYTES (96 << 10)
/* (long enough that the budget's sentence in /readyz is over 256 bytes) */
#define SEL "kcr-budget=yes,!kcr-budget-a-label-no-object-has-so-the-sentence-is-long"

static const struct kcr_gvr secrets = {"", "v1", "secrets", true};

/* Creates a ConfigMap (labelled SEL) with a value of size bytes, or a
 * Secret. */
static void make(const struct kcr_gvr *gvr, const char *ns, const char *name, size_t size)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  struct kcr_ref ref = {.gvr = gvr, .ns = ns};
  char *v = malloc(size + 1);
  cJSON *o;

  assert_non_null(v);
  memset(v, 'x', size);
  v[size] = 0;
  o = itest_json("{\"apiVersion\":\"v1\",\"kind\":\"%s\",\"metadata\":{\"name\":\"%s\","
                 "\"labels\":{\"kcr-budget\":\"yes\"}},\"%s\":{\"k\":\"%s\"}}",
                 gvr == &secrets ? "Secret" : "ConfigMap", name,
                 gvr == &secrets ? "stringData" : "data", v);
  itest_expect(KCR_OK, kcr_create(cl, &ref, o, NULL, NULL, &ei), &ei);
  cJSON_Delete(o);
  free(v);
  kcr_errinfo_cleanup(&ei);
}

static void drop(const char *ns, const char *name)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  struct kcr_ref ref = {.gvr = &itest_configmaps, .ns = ns, .name = name};
  itest_expect(KCR_OK, kcr_delete(cl, &ref, NULL, NULL, &ei), &ei);
  kcr_errinfo_cleanup(&ei);
}

static bool wait_over(kcr_informer *inf, bool over, long ms)
{
  for(long t = 0; t < ms && kcr_informer_over_budget(inf) != over; t += 20)
    itest_sleep_ms(20);
  return kcr_informer_over_budget(inf) == over;
}

static void over_the_budget_the_cache_empties_and_the_rest_keeps_working(void **state)
{
  char *ns = itest_namespace(cl, "budget");
  struct kcr_config_opts co = {0};
  struct kcr_manager_opts mo = {.name = "budget", .health_addr = "127.0.0.1:0"};
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  struct itest_seen cms = ITEST_SEEN_INIT, secs = ITEST_SEEN_INIT;
  struct kcr_informer_stats st;
  struct kcr_buf body = KCR_BUF_INIT;
  struct itest_run run;
  kcr_informer *icm, *isec;
  kcr_controller *ccm;
  kcr_manager *m;
  kcr_obj *o = NULL;
  int port;

  make(&itest_configmaps, ns, "a", 100);
  make(&secrets, ns, "s1", 100);
  itest_expect(KCR_OK, kcr_config_load(&co, &mo.config, &ei), &ei);
  itest_expect(KCR_OK, kcr_manager_new(&mo, &m, &ei), &ei);
  kcr_config_free(mo.config);
  itest_expect(KCR_OK,
               kcr_manager_informer(m,
                                    &(struct kcr_informer_opts){.gvr = &itest_configmaps,
                                                                .ns = ns,
                                                                .label_selector = SEL,
                                                                .max_bytes = BUDGET},
                                    &icm, &ei),
               &ei);
  itest_expect(KCR_OK,
               kcr_manager_informer(
                   m, &(struct kcr_informer_opts){.gvr = &secrets, .ns = ns}, &isec, &ei),
               &ei);
  ccm = itest_seen_controller(m, cl, "budget-cms", icm, &cms);
  itest_seen_controller(m, cl, "budget-secrets", isec, &secs);
  port = kcr_manager_health_port(m);
  itest_run_start(&run, m);
  assert_true(itest_wait_saw(&cms, ns, "a", 30000));
  assert_true(itest_wait_saw(&secs, ns, "s1", 30000));
  assert_int_equal(200, itest_http_get(port, "/readyz", &body));

  /* Over the budget: emptied, unsynced, and said so everywhere. */
  make(&itest_configmaps, ns, "big", BIG_BYTES);
  assert_true(wait_over(icm, true, 30000));
  for(int i = 0; i < 500 && kcr_store_len(kcr_informer_store(icm)); i++)
    itest_sleep_ms(20); /* (over and unsynced first, then emptied) */
  assert_int_equal(0, kcr_store_len(kcr_informer_store(icm)));
  assert_int_equal(500, itest_http_get(port, "/readyz", &body));
  assert_non_null(strstr(kcr_buf_str(&body), "[-]informers failed: informer configmaps "
                                             "is over its byte budget"));
  assert_non_null(strstr(kcr_buf_str(&body), "max_bytes is 65536"));
  assert_non_null(strstr(kcr_buf_str(&body), "label selector " SEL));
  assert_non_null(strstr(kcr_buf_str(&body), "listed again with backoff until it fits"));
  assert_int_equal(KCR_EBUDGET, kcr_manager_get(m, &itest_configmaps, ns, "a", &o, &ei));
  assert_null(o);
  assert_non_null(strstr(ei.message, "over its byte budget"));
  kcr_errinfo_cleanup(&ei);

  /* The other informer and its controller go on; the emptied one's
   * controller takes no keys. */
  make(&secrets, ns, "s2", 100);
  assert_true(itest_wait_saw(&secs, ns, "s2", 30000));
  make(&itest_configmaps, ns, "b", 100);
  assert_int_equal(KCR_OK, kcr_controller_enqueue(ccm, ns, "queued"));
  itest_sleep_ms(2000);
  assert_false(itest_saw(&cms, ns, "b"));
  assert_false(itest_saw(&cms, ns, "queued")); /* queued, not taken */
  assert_true(kcr_informer_over_budget(icm));  /* listed again, over again */

  /* Fits again: listed, synced, ready, and what waited is reconciled. */
  drop(ns, "big");
  assert_true(kcr_informer_wait_synced(icm, 60000));
  assert_false(kcr_informer_over_budget(icm));
  assert_true(itest_wait_saw(&cms, ns, "b", 30000));
  assert_true(itest_wait_saw(&cms, ns, "queued", 30000));
  itest_expect(KCR_OK, kcr_manager_get(m, &itest_configmaps, ns, "a", &o, &ei), &ei);
  kcr_obj_unref(o);
  assert_int_equal(200, itest_http_get(port, "/readyz", &body));
  kcr_informer_get_stats(icm, &st);
  assert_true(st.budget_exceeded >= 1);
  itest_run_stop(&run, 0);
  kcr_buf_cleanup(&body);
  itest_namespace_drop(cl, ns);
}

/* Several namespaces share one budget: the one that goes over empties the
 * whole cache, and every namespace lists again once it fits. */
static void one_namespace_over_the_budget_empties_every_namespace(void **state)
{
  char *na = itest_namespace(cl, "budget-a"), *nb = itest_namespace(cl, "budget-b");
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  kcr_informer *inf;
  kcr_obj *o;

  make(&itest_configmaps, na, "a", 100);
  make(&itest_configmaps, nb, "b", 100);
  itest_expect(
      KCR_OK,
      kcr_informer_new(
          &(struct kcr_informer_opts){.client = cl,
                                      .gvr = &itest_configmaps,
                                      .namespaces = (const char *[]){na, nb, NULL},
                                      .label_selector = SEL,
                                      .max_bytes = BUDGET},
          &inf, &ei),
      &ei);
  assert_int_equal(KCR_OK, kcr_informer_start(inf));
  assert_true(kcr_informer_wait_synced(inf, 30000));
  assert_int_equal(2, kcr_store_len(kcr_informer_store(inf)));
  make(&itest_configmaps, nb, "big", BIG_BYTES);
  assert_true(wait_over(inf, true, 30000));
  make(&itest_configmaps, na, "a2", 100); /* while over: not lost */
  drop(nb, "big");
  /* Fits again: over clears by itself, with no one asking whether it is
   * synced (no controller, no /readyz here). */
  assert_true(wait_over(inf, false, 60000));
  assert_true(kcr_informer_wait_synced(inf, 60000));
  /* both namespaces listed again, the change made meanwhile too */
  for(int i = 0; i < 250 && kcr_store_len(kcr_informer_store(inf)) != 3; i++)
    itest_sleep_ms(20);
  assert_int_equal(3, kcr_store_len(kcr_informer_store(inf)));
  assert_non_null(o = kcr_store_ref(kcr_informer_store(inf), na, "a2"));
  kcr_obj_unref(o);
  assert_non_null(o = kcr_store_ref(kcr_informer_store(inf), nb, "b"));
  kcr_obj_unref(o);
  /* and watching again: a change after is seen */
  make(&itest_configmaps, nb, "b2", 100);
  for(int i = 0; i < 1500 && !(o = kcr_store_ref(kcr_informer_store(inf), nb, "b2")); i++)
    itest_sleep_ms(20);
  assert_non_null(o);
  kcr_obj_unref(o);
  kcr_informer_free(inf);
  itest_namespace_drop(cl, na);
  itest_namespace_drop(cl, nb);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(over_the_budget_the_cache_empties_and_the_rest_keeps_working),
      cmocka_unit_test(one_namespace_over_the_budget_empties_every_namespace),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
