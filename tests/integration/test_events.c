/* The event recorder against the real kube-apiserver: what lands in
 * events.k8s.io/v1 for one event, for repeats (one Event with a series), for
 * different reasons, for refused input, under the spam limit, for a burst of
 * 2,000 objects at once, for an Event deleted under the recorder's feet, for
 * a cluster-scoped object, when the server refuses the write, and across an
 * apiserver outage. A ConfigMap per test is the regarding object. */
#include <stdlib.h>
#include <string.h>

#include "itest.h"
#include "kcr/events.h"
#include "kcr/metrics.h"

static const struct kcr_gvr events_gvr = {"events.k8s.io", "v1", "events", true};
static const char controller[] = "ebdman.example.com/ebdman";

ITEST_NAMESPACE_FIXTURE("events", false)

/* The regarding object: a fresh ConfigMap. Returns its tree (caller frees);
 * *ref borrows from it. */
static cJSON *configmap(const char *name, struct kcr_event_ref *ref)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  cJSON *obj = itest_json("{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\","
                          "\"metadata\":{\"name\":\"%s\"},\"data\":{\"k\":\"v\"}}",
                          name);
  cJSON *got = NULL;

  itest_expect(
      KCR_OK,
      kcr_create(cl, &(struct kcr_ref){&itest_configmaps, ns}, obj, NULL, &got, &ei),
      &ei);
  cJSON_Delete(obj);
  kcr_errinfo_cleanup(&ei);
  *ref = (struct kcr_event_ref){"v1",
                                "ConfigMap",
                                kcr_json_str(got, "/metadata/namespace"),
                                kcr_json_str(got, "/metadata/name"),
                                kcr_json_str(got, "/metadata/uid"),
                                kcr_json_str(got, "/metadata/resourceVersion")};
  assert_non_null(ref->uid);
  return got;
}

static kcr_recorder *recorder(struct kcr_recorder_opts o)
{
  kcr_recorder *r = NULL;
  o.client = cl;
  o.reporting_controller = controller;
  if(!o.reporting_instance)
    o.reporting_instance = "itest-instance";
  assert_int_equal(KCR_OK, kcr_recorder_new(&o, &r, NULL));
  return r;
}

/* The Events in namespace `in` about the object named `name` (NULL: any),
 * as a new array (caller frees), optionally only those with `reason`. */
static cJSON *events_about(const char *in, const char *name, const char *reason)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  cJSON *list = NULL, *out = cJSON_CreateArray(), *it;

  itest_expect(KCR_OK, kcr_list(cl, &(struct kcr_ref){&events_gvr, in}, NULL, &list, &ei),
               &ei);
  cJSON_ArrayForEach(it, kcr_json_at(list, "/items"))
  {
    const char *rn = kcr_json_str(it, "/regarding/name");
    const char *rs = kcr_json_str(it, "/reason");
    if(rn && (!name || !strcmp(rn, name)) && (!reason || (rs && !strcmp(rs, reason))))
      cJSON_AddItemToArray(out, cJSON_Duplicate(it, 1));
  }
  cJSON_Delete(list);
  kcr_errinfo_cleanup(&ei);
  return out;
}

static void expect_str(const char *want, const cJSON *o, const char *path)
{
  const char *got = kcr_json_str(o, path);
  if(!got || strcmp(want, got)) {
    fprintf(stderr, "%s: want \"%s\", got \"%s\"\n", path, want, got ? got : "(absent)");
    fail();
  }
}

static void one_event_creates_an_event_with_the_exact_fields(void **state)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  struct kcr_event_ref ref;
  cJSON *cm = configmap("cm-one", &ref), *evs, *ev = NULL;
  kcr_recorder *r = recorder((struct kcr_recorder_opts){0});
  const char *name, *t;
  time_t when;

  assert_int_equal(KCR_OK, kcr_recorder_eventf(r, &ref, KCR_EVENT_NORMAL, "Provisioned",
                                               "Provision", "volume %s is ready (%d GiB)",
                                               "pv-1", 10));
  assert_int_equal(KCR_OK, kcr_recorder_flush(r, 10000));
  evs = events_about(ns, "cm-one", NULL);
  assert_int_equal(1, cJSON_GetArraySize(evs));
  /* List items carry no apiVersion/kind: read the Event itself. */
  itest_expect(KCR_OK,
               kcr_get(cl,
                       &(struct kcr_ref){
                           &events_gvr, ns,
                           kcr_json_str(cJSON_GetArrayItem(evs, 0), "/metadata/name")},
                       &ev, &ei),
               &ei);
  expect_str("events.k8s.io/v1", ev, "/apiVersion");
  expect_str("Event", ev, "/kind");
  expect_str(ns, ev, "/metadata/namespace");
  name = kcr_json_str(ev, "/metadata/name");
  assert_non_null(name);
  assert_memory_equal("cm-one.", name, 7);
  assert_true(strspn(name + 7, "0123456789abcdef") == strlen(name + 7));
  t = kcr_json_str(ev, "/eventTime");
  assert_non_null(t);
  assert_int_equal(27, strlen(t)); /* MicroTime: 2026-11-29T10:00:00.123456Z */
  assert_int_equal(KCR_OK, kcr_time_parse(t, &when));
  assert_true(llabs((long long)(when - time(NULL))) < 120);
  expect_str(controller, ev, "/reportingController");
  expect_str("itest-instance", ev, "/reportingInstance");
  expect_str("Provision", ev, "/action");
  expect_str("Provisioned", ev, "/reason");
  expect_str("volume pv-1 is ready (10 GiB)", ev, "/note");
  expect_str("Normal", ev, "/type");
  expect_str("v1", ev, "/regarding/apiVersion");
  expect_str("ConfigMap", ev, "/regarding/kind");
  expect_str(ns, ev, "/regarding/namespace");
  expect_str("cm-one", ev, "/regarding/name");
  expect_str(ref.uid, ev, "/regarding/uid");
  expect_str(ref.resource_version, ev, "/regarding/resourceVersion");
  assert_null(kcr_json_at(ev, "/series"));
  cJSON_Delete(ev);
  cJSON_Delete(evs);
  kcr_errinfo_cleanup(&ei);
  kcr_recorder_free(r);
  cJSON_Delete(cm);
}

static void five_repeats_are_one_event_with_series_count_5(void **state)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  struct kcr_recorder_stats st;
  struct kcr_event_ref ref;
  cJSON *cm = configmap("cm-repeat", &ref), *evs, *ev, *again = NULL;
  kcr_recorder *r = recorder((struct kcr_recorder_opts){.series_flush_ms = 100});
  char *name;

  /* The first one is created before the repeats come: they are PATCHed in. */
  kcr_recorder_eventf(r, &ref, "Warning", "SyncFailed", "Sync", "cannot reach %s", "db");
  assert_int_equal(KCR_OK, kcr_recorder_flush(r, 10000));
  for(int i = 0; i < 4; i++)
    assert_int_equal(KCR_OK, kcr_recorder_eventf(r, &ref, "Warning", "SyncFailed", "Sync",
                                                 "cannot reach %s", "db"));
  assert_int_equal(KCR_OK, kcr_recorder_flush(r, 10000));
  evs = events_about(ns, "cm-repeat", NULL);
  assert_int_equal(1, cJSON_GetArraySize(evs));
  ev = cJSON_GetArrayItem(evs, 0);
  assert_int_equal(5, kcr_json_int(ev, "/series/count", 0));
  assert_non_null(kcr_json_str(ev, "/series/lastObservedTime"));
  assert_int_equal(27, strlen(kcr_json_str(ev, "/series/lastObservedTime")));
  expect_str("cannot reach db", ev, "/note");
  name = strdup(kcr_json_str(ev, "/metadata/name"));
  kcr_recorder_get_stats(r, &st);
  assert_int_equal(1, st.sent);
  assert_int_equal(4, st.aggregated);

  /* Gone from the server (as after the event TTL): the next repeat creates it
   * again under the same name with the whole count. */
  itest_expect(KCR_OK,
               kcr_delete(cl, &(struct kcr_ref){&events_gvr, ns, name}, NULL, NULL, &ei),
               &ei);
  kcr_recorder_eventf(r, &ref, "Warning", "SyncFailed", "Sync", "cannot reach %s", "db");
  assert_int_equal(KCR_OK, kcr_recorder_flush(r, 10000));
  itest_expect(KCR_OK, kcr_get(cl, &(struct kcr_ref){&events_gvr, ns, name}, &again, &ei),
               &ei);
  assert_int_equal(6, kcr_json_int(again, "/series/count", 0));
  cJSON_Delete(again);
  free(name);
  cJSON_Delete(evs);
  kcr_errinfo_cleanup(&ei);
  kcr_recorder_free(r);
  cJSON_Delete(cm);
}

static void a_different_reason_is_a_second_event(void **state)
{
  struct kcr_event_ref ref;
  cJSON *cm = configmap("cm-reasons", &ref), *evs;
  kcr_recorder *r = recorder((struct kcr_recorder_opts){0});

  kcr_recorder_eventf(r, &ref, "Normal", "Scaled", "Scale", "to %d", 3);
  kcr_recorder_eventf(r, &ref, "Normal", "Scaled", "Scale", "to %d", 3);
  kcr_recorder_eventf(r, &ref, "Normal", "Resized", "Scale", "to %d", 3);
  assert_int_equal(KCR_OK, kcr_recorder_flush(r, 10000));
  evs = events_about(ns, "cm-reasons", NULL);
  assert_int_equal(2, cJSON_GetArraySize(evs));
  cJSON_Delete(evs);
  evs = events_about(ns, "cm-reasons", "Scaled");
  assert_int_equal(1, cJSON_GetArraySize(evs));
  assert_int_equal(2, kcr_json_int(cJSON_GetArrayItem(evs, 0), "/series/count", 0));
  cJSON_Delete(evs);
  evs = events_about(ns, "cm-reasons", "Resized");
  assert_int_equal(1, cJSON_GetArraySize(evs));
  assert_null(kcr_json_at(cJSON_GetArrayItem(evs, 0), "/series"));
  cJSON_Delete(evs);
  kcr_recorder_free(r);
  cJSON_Delete(cm);
}

static void invalid_type_or_reason_is_refused_and_nothing_sent(void **state)
{
  struct kcr_recorder_stats st;
  struct kcr_event_ref ref;
  cJSON *cm = configmap("cm-invalid", &ref), *evs;
  kcr_recorder *r = recorder((struct kcr_recorder_opts){0});
  char reason[200];

  memset(reason, 'R', 129), reason[129] = '\0';
  assert_int_equal(KCR_EINVAL, kcr_recorder_eventf(r, &ref, "Error", "Bad", "Sync", "x"));
  assert_int_equal(KCR_EINVAL,
                   kcr_recorder_eventf(r, &ref, "normal", "Bad", "Sync", "x"));
  assert_int_equal(KCR_EINVAL, kcr_recorder_eventf(r, &ref, "Normal", "", "Sync", "x"));
  assert_int_equal(KCR_EINVAL,
                   kcr_recorder_eventf(r, &ref, "Normal", reason, "Sync", "x"));
  assert_int_equal(KCR_EINVAL, kcr_recorder_eventf(r, &ref, "Normal", NULL, "Sync", "x"));
  assert_int_equal(KCR_OK, kcr_recorder_flush(r, 10000));
  kcr_recorder_get_stats(r, &st);
  assert_int_equal(0, st.sent + st.aggregated + st.dropped + st.failed + st.queued);
  evs = events_about(ns, "cm-invalid", NULL);
  assert_int_equal(0, cJSON_GetArraySize(evs));
  cJSON_Delete(evs);
  kcr_recorder_free(r);
  cJSON_Delete(cm);
}

static void spam_limit_sends_the_burst_and_counts_the_rest(void **state)
{
  struct kcr_recorder_stats st;
  struct kcr_event_ref ref;
  cJSON *cm = configmap("cm-spam", &ref), *evs;
  kcr_metrics *reg = NULL;
  assert_int_equal(KCR_OK, kcr_metrics_new(NULL, &reg, NULL));
  kcr_metric *total;
  kcr_recorder *r = recorder((struct kcr_recorder_opts){.spam_burst = 3, .metrics = reg});

  for(int i = 0; i < 10; i++) { /* each sent before the next: none coalesces */
    assert_int_equal(KCR_OK, kcr_recorder_eventf(r, &ref, "Warning", "Flapping", "Sync",
                                                 "attempt %d failed", i));
    assert_int_equal(KCR_OK, kcr_recorder_flush(r, 10000));
  }
  evs = events_about(ns, "cm-spam", "Flapping");
  assert_int_equal(3, cJSON_GetArraySize(evs));
  cJSON_Delete(evs);
  kcr_recorder_get_stats(r, &st);
  assert_int_equal(3, st.sent);
  assert_int_equal(7, st.dropped);
  assert_int_equal(
      KCR_OK, kcr_metric_counter(
                  reg,
                  &(struct kcr_metric_opts){
                      .name = "kcr_events_total",
                      .label_names = (const char *[]){"type", "reason", "result", NULL}},
                  &total, NULL));
  assert_true(kcr_metric_value(total, (const char *[]){"Warning", "Flapping", "sent"}) ==
              3);
  assert_true(
      kcr_metric_value(total, (const char *[]){"Warning", "Flapping", "dropped"}) == 7);
  kcr_recorder_free(r);
  kcr_metrics_free(reg);
  cJSON_Delete(cm);
}

/* The benchmark's burst: objects turn Ready all at once, each with an
 * event. The senders (4 by default) write them in parallel and every one
 * lands on the server, none dropped. (Before: one write at a time, and a
 * queue of 1,000 events that overflowed.) */
static void a_burst_of_2000_events_all_reach_the_server(void **state)
{
  enum { N = 2000 };
  struct kcr_recorder_stats st;
  kcr_metrics *reg = NULL;
  kcr_recorder *r;
  char name[32], uid[32];
  struct kcr_event_ref ref = {"v1", "ConfigMap", ns, name, uid, NULL};
  static bool seen[N];
  cJSON *evs, *it;
  int found = 0;
  uint64_t t0 = kcr_time_mono_ms();

  assert_int_equal(KCR_OK, kcr_metrics_new(NULL, &reg, NULL));
  r = recorder((struct kcr_recorder_opts){.metrics = reg});
  for(int i = 0; i < N; i++) { /* distinct objects (they need not exist) */
    snprintf(name, sizeof(name), "burst-%04d", i);
    snprintf(uid, sizeof(uid), "uid-%04d", i);
    assert_int_equal(KCR_OK, kcr_recorder_eventf(r, &ref, "Normal", "BecameReady",
                                                 "Reconcile", "object %d is Ready", i));
  }
  assert_int_equal(KCR_OK, kcr_recorder_flush(r, 300000));
  kcr_recorder_get_stats(r, &st);
  print_message("%d events sent in %llu ms\n", N,
                (unsigned long long)(kcr_time_mono_ms() - t0));
  assert_int_equal(N, st.sent);
  assert_int_equal(0, st.dropped + st.failed + st.aggregated);
  evs = events_about(ns, NULL, "BecameReady");
  cJSON_ArrayForEach(it, evs)
  {
    int i = -1;
    const char *rn = kcr_json_str(it, "/regarding/name");
    if(rn && sscanf(rn, "burst-%d", &i) == 1 && i >= 0 && i < N && !seen[i]) {
      seen[i] = true;
      found++;
    }
  }
  assert_int_equal(N, cJSON_GetArraySize(evs));
  assert_int_equal(N, found); /* one Event per object */
  cJSON_Delete(evs);
  kcr_recorder_free(r);
  kcr_metrics_free(reg);
}

static void a_cluster_scoped_object_gets_its_events_in_default(void **state)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  cJSON *nsobj = NULL, *evs;
  struct kcr_event_ref ref;
  kcr_recorder *r = recorder((struct kcr_recorder_opts){0});

  itest_expect(KCR_OK,
               kcr_get(cl, &(struct kcr_ref){&itest_namespaces, NULL, ns}, &nsobj, &ei),
               &ei);
  ref = (struct kcr_event_ref){
      "v1", "Namespace", NULL, ns, kcr_json_str(nsobj, "/metadata/uid"), NULL};
  kcr_recorder_eventf(r, &ref, "Normal", "Adopted", "Adopt", "namespace %s", ns);
  assert_int_equal(KCR_OK, kcr_recorder_flush(r, 10000));
  evs = events_about("default", ns, "Adopted");
  assert_int_equal(1, cJSON_GetArraySize(evs));
  assert_null(kcr_json_at(cJSON_GetArrayItem(evs, 0), "/regarding/namespace"));
  kcr_delete(
      cl,
      &(struct kcr_ref){&events_gvr, "default",
                        kcr_json_str(cJSON_GetArrayItem(evs, 0), "/metadata/name")},
      NULL, NULL, NULL);
  cJSON_Delete(evs);
  cJSON_Delete(nsobj);
  kcr_errinfo_cleanup(&ei);
  kcr_recorder_free(r);
}

static void a_write_the_server_refuses_is_dropped_not_retried_forever(void **state)
{
  struct kcr_recorder_stats st;
  struct kcr_event_ref ref = {"v1", "ConfigMap", "kcr-no-such-namespace",
                              "cm", "u",         NULL};
  kcr_recorder *r = recorder((struct kcr_recorder_opts){.retry_initial_ms = 10});

  /* The namespace does not exist: 404 on create, which no retry can fix. */
  assert_int_equal(KCR_OK, kcr_recorder_eventf(r, &ref, "Normal", "Lost", "Sync", NULL));
  assert_int_equal(KCR_OK, kcr_recorder_flush(r, 10000));
  kcr_recorder_get_stats(r, &st);
  assert_int_equal(0, st.sent);
  assert_int_equal(1, st.failed);
  assert_int_equal(0, st.tracked);
  kcr_recorder_free(r);
}

static void events_survive_an_apiserver_outage(void **state)
{
  struct kcr_recorder_stats st;
  struct kcr_event_ref ref;
  cJSON *cm = configmap("cm-outage", &ref), *evs;
  kcr_recorder *r = recorder((struct kcr_recorder_opts){
      .retry_initial_ms = 300, .retry_max_ms = 2000, .max_attempts = 40});
  uint64_t t0;

  itest_controlplane("--stop-only");
  t0 = kcr_time_mono_ms();
  assert_int_equal(KCR_OK, kcr_recorder_eventf(r, &ref, "Warning", "Unreachable", "Sync",
                                               "written while the apiserver was down"));
  assert_true(kcr_time_mono_ms() - t0 < 500); /* never waits for the network */
  itest_sleep_ms(1500);                       /* a few failed tries */
  kcr_recorder_get_stats(r, &st);
  assert_int_equal(0, st.sent);
  assert_int_equal(0, st.failed);
  itest_controlplane("--start-only");
  assert_int_equal(KCR_OK, kcr_recorder_flush(r, 30000));
  kcr_recorder_get_stats(r, &st);
  assert_int_equal(1, st.sent);
  evs = events_about(ns, "cm-outage", "Unreachable");
  assert_int_equal(1, cJSON_GetArraySize(evs));
  cJSON_Delete(evs);
  kcr_recorder_free(r);
  cJSON_Delete(cm);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(one_event_creates_an_event_with_the_exact_fields),
      cmocka_unit_test(five_repeats_are_one_event_with_series_count_5),
      cmocka_unit_test(a_different_reason_is_a_second_event),
      cmocka_unit_test(invalid_type_or_reason_is_refused_and_nothing_sent),
      cmocka_unit_test(spam_limit_sends_the_burst_and_counts_the_rest),
      cmocka_unit_test(a_burst_of_2000_events_all_reach_the_server),
      cmocka_unit_test(a_cluster_scoped_object_gets_its_events_in_default),
      cmocka_unit_test(a_write_the_server_refuses_is_dropped_not_retried_forever),
      cmocka_unit_test(events_survive_an_apiserver_outage),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
