/* Conditions and status writes against the real kube-apiserver: the
 * lastTransitionTime and observedGeneration rules, zero writes at steady
 * state, no write again when the object passed lags behind the writer's own
 * last write (a cache that has not seen it yet), a writer storm under which no writer
 * returns a conflict to its reconciler or loses a change, the seed's retry-on-conflict
 * anti-pattern losing a change where kcr_update_retry does not, finalizers and owner
 * references. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "itest.h"
#include "kcr/status.h"
#include "tcheck.h"

ITEST_NAMESPACE_FIXTURE("status", true)

static cJSON *make_widget(const char *name)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  cJSON *w = itest_json("{\"apiVersion\":\"test.kcr.io/v1\",\"kind\":\"Widget\","
                        "\"metadata\":{\"name\":\"%s\"},\"spec\":{\"size\":1}}",
                        name),
        *out = NULL;
  itest_expect(KCR_OK,
               kcr_create(cl, &(struct kcr_ref){&itest_widgets, ns}, w, NULL, &out, &ei),
               &ei);
  cJSON_Delete(w);
  kcr_errinfo_cleanup(&ei);
  return out;
}

static cJSON *get_widget(const char *name)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  cJSON *out = NULL;
  itest_expect(KCR_OK,
               kcr_get(cl, &(struct kcr_ref){&itest_widgets, ns, name}, &out, &ei), &ei);
  kcr_errinfo_cleanup(&ei);
  return out;
}

static kcr_status_writer *writer(enum kcr_status_mode mode, const char *fm,
                                 kcr_metrics *m)
{
  kcr_status_writer *w;
  struct kcr_status_writer_opts o = {.client = cl,
                                     .gvr = &itest_widgets,
                                     .api_version = "test.kcr.io/v1",
                                     .kind = "Widget",
                                     .field_manager = fm,
                                     .mode = mode,
                                     .metrics = m};
  assert_int_equal(KCR_OK, kcr_status_writer_new(&o, &w, NULL));
  return w;
}

static const char *cond_field(const cJSON *obj, const char *type, const char *field)
{
  return kcr_json_member_str(kcr_cond_find(kcr_json_at(obj, "/status/conditions"), type),
                             field);
}

static kcr_err write1(kcr_status_writer *w, const cJSON *obj, const char *type,
                      const char *status, const char *reason, const char *msg,
                      int64_t gen, enum kcr_write_result *res, struct kcr_errinfo *ei)
{
  struct kcr_cond c = {.type = type,
                       .status = status,
                       .reason = reason,
                       .message = msg,
                       .observed_generation = gen};
  struct kcr_status_desired d = {.conds = &c, .n = 1, .observed_generation = gen};
  return kcr_status_write(w, obj, &d, res, ei);
}

static void transition_time_moves_only_on_flips(void **state)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  enum kcr_write_result res;
  kcr_status_writer *w = writer(KCR_STATUS_APPLY, "kcr-test", NULL);
  cJSON *o = make_widget("ltt"), *o2;
  char t0[32], rv[32];

  itest_expect(KCR_OK,
               write1(w, o, "Ready", "False", "Progressing", "starting", 1, &res, &ei),
               &ei);
  assert_int_equal(KCR_WRITE_WRITTEN, res);
  cJSON_Delete(o);
  o = get_widget("ltt");
  snprintf(t0, sizeof(t0), "%s", cond_field(o, "Ready", "lastTransitionTime"));
  assert_int_equal(1, kcr_json_int(o, "/status/observedGeneration", 0));

  itest_sleep_ms(1100); /* times have second precision */
  /* Same status, new reason and message: a write, not a transition. */
  itest_expect(KCR_OK,
               write1(w, o, "Ready", "False", "Waiting", "still waiting", 1, &res, &ei),
               &ei);
  assert_int_equal(KCR_WRITE_WRITTEN, res);
  o2 = get_widget("ltt");
  assert_string_equal("Waiting", cond_field(o2, "Ready", "reason"));
  assert_string_equal(t0, cond_field(o2, "Ready", "lastTransitionTime"));

  /* Nothing changed: no request, the resourceVersion stays. */
  snprintf(rv, sizeof(rv), "%s", kcr_json_str(o2, "/metadata/resourceVersion"));
  itest_expect(KCR_OK,
               write1(w, o2, "Ready", "False", "Waiting", "still waiting", 1, &res, &ei),
               &ei);
  assert_int_equal(KCR_WRITE_SKIPPED, res);
  cJSON_Delete(o);
  o = get_widget("ltt");
  assert_string_equal(rv, kcr_json_str(o, "/metadata/resourceVersion"));

  /* A flip moves the time. */
  itest_expect(KCR_OK, write1(w, o, "Ready", "True", "Ready", "ok", 1, &res, &ei), &ei);
  cJSON_Delete(o2);
  o2 = get_widget("ltt");
  assert_string_not_equal(t0, cond_field(o2, "Ready", "lastTransitionTime"));
  time_t a, b;
  assert_int_equal(KCR_OK, kcr_time_parse(t0, &a));
  assert_int_equal(KCR_OK,
                   kcr_time_parse(cond_field(o2, "Ready", "lastTransitionTime"), &b));
  assert_true(b > a);

  /* A spec change bumps generation; observedGeneration follows on write. */
  const char *sp = "{\"spec\":{\"size\":2}}";
  itest_expect(KCR_OK,
               kcr_patch(cl, &(struct kcr_ref){&itest_widgets, ns, "ltt"},
                         &(struct kcr_patch_opts){KCR_PATCH_MERGE}, sp, strlen(sp), NULL,
                         &ei),
               &ei);
  cJSON_Delete(o);
  o = get_widget("ltt");
  assert_int_equal(2, kcr_json_int(o, "/metadata/generation", 0));
  assert_int_equal(1, kcr_json_int(o, "/status/observedGeneration", 0));
  itest_expect(KCR_OK, write1(w, o, "Ready", "True", "Ready", "ok", 2, &res, &ei), &ei);
  assert_int_equal(KCR_WRITE_WRITTEN, res);
  cJSON_Delete(o2);
  o2 = get_widget("ltt");
  assert_int_equal(2, kcr_json_int(o2, "/status/observedGeneration", 0));
  assert_int_equal(
      2, kcr_json_int(kcr_cond_find(kcr_json_at(o2, "/status/conditions"), "Ready"),
                      "/observedGeneration", 0));

  /* An invalid reason is refused before anything is sent. */
  snprintf(rv, sizeof(rv), "%s", kcr_json_str(o2, "/metadata/resourceVersion"));
  itest_expect(KCR_EINVALID,
               write1(w, o2, "Ready", "False", "not ready", "", 2, &res, &ei), &ei);
  assert_non_null(strstr(ei.message, "reason"));
  assert_non_null(strstr(ei.message, "not ready"));
  assert_int_equal(KCR_WRITE_FAILED, res);
  cJSON_Delete(o);
  o = get_widget("ltt");
  assert_string_equal(rv, kcr_json_str(o, "/metadata/resourceVersion"));

  cJSON_Delete(o);
  cJSON_Delete(o2);
  kcr_status_writer_free(w);
  kcr_errinfo_cleanup(&ei);
}

/* ---- read your own writes ---- */

static atomic_int requests;

static void count_request(const char *method, long code, double seconds, void *ud)
{
  atomic_fetch_add(&requests, 1);
}

/* A writer on a client of its own whose requests are counted. */
static kcr_status_writer *counted_writer(enum kcr_status_mode mode, kcr_client **c)
{
  kcr_status_writer *w;
  struct kcr_status_writer_opts o = {.gvr = &itest_widgets,
                                     .api_version = "test.kcr.io/v1",
                                     .kind = "Widget",
                                     .field_manager = "kcr-ryow",
                                     .mode = mode};
  *c = itest_client();
  kcr_client_set_observer(*c, count_request, NULL);
  o.client = *c;
  assert_int_equal(KCR_OK, kcr_status_writer_new(&o, &w, NULL));
  return w;
}

/* write1 expecting want, and exactly `reqs` requests for it. */
static void write_expect(kcr_status_writer *w, const cJSON *obj, const char *status,
                         const char *reason, const char *msg, enum kcr_write_result want,
                         int reqs, int line)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  enum kcr_write_result res;
  int before = atomic_load(&requests);

  itest_expect(KCR_OK, write1(w, obj, "Ready", status, reason, msg, 1, &res, &ei), &ei);
  if(res != want || atomic_load(&requests) - before != reqs)
    fail_msg("line %d: result %d with %d requests, want %d with %d", line, (int)res,
             atomic_load(&requests) - before, (int)want, reqs);
  kcr_errinfo_cleanup(&ei);
}

/* The object's resourceVersion, as a number (the test's own apiserver uses
 * etcd revisions). */
static long long rv_of(const cJSON *o)
{
  return strtoll(kcr_json_str(o, "/metadata/resourceVersion"), NULL, 10);
}

/* A cache that has not yet seen the writer's own last write hands it the
 * older object: same desired status -> no request; a changed one -> merged
 * onto what was written, so a condition that already flipped keeps the
 * lastTransitionTime written with the flip. An object someone else changed
 * since (resourceVersion past the write) is compared as it is. For each
 * writer; the UPDATE writer used to make a GET for each stale object, the
 * others a write (moving lastTransitionTime on a flip). */
static void stale_object_after_own_write(enum kcr_status_mode mode, const char *name)
{
  kcr_client *c;
  kcr_status_writer *w = counted_writer(mode, &c);
  int upd = mode == KCR_STATUS_UPDATE_RETRY; /* its writes GET first */
  cJSON *o0 = make_widget(name), *o1, *o2, *o3;
  char t_flip[32];

  /* o0: no status yet. Write Ready=False; the "cache" still holds o0. */
  write_expect(w, o0, "False", "Progressing", "starting", KCR_WRITE_WRITTEN, 1 + upd,
               __LINE__);
  o1 = get_widget(name);
  assert_true(rv_of(o1) > rv_of(o0));
  write_expect(w, o0, "False", "Progressing", "starting", KCR_WRITE_SKIPPED, 0, __LINE__);
  cJSON_Delete(get_widget(name)); /* (the server is unchanged: below) */

  /* A flip, decided from the stale o0; then the same again from o0 and from
   * o1, a second later: nothing to write, the flip's time stays. */
  itest_sleep_ms(1100); /* times have second precision */
  write_expect(w, o0, "True", "Ready", "ok", KCR_WRITE_WRITTEN, 1 + upd, __LINE__);
  o2 = get_widget(name);
  snprintf(t_flip, sizeof(t_flip), "%s", cond_field(o2, "Ready", "lastTransitionTime"));
  assert_string_not_equal(t_flip, cond_field(o1, "Ready", "lastTransitionTime"));
  itest_sleep_ms(1100);
  write_expect(w, o0, "True", "Ready", "ok", KCR_WRITE_SKIPPED, 0, __LINE__);
  write_expect(w, o1, "True", "Ready", "ok", KCR_WRITE_SKIPPED, 0, __LINE__);
  /* A new message from the stale o1: written, but not as a flip. */
  write_expect(w, o1, "True", "Ready", "still ok", KCR_WRITE_WRITTEN, 1 + upd, __LINE__);
  o3 = get_widget(name);
  assert_string_equal("still ok", cond_field(o3, "Ready", "message"));
  assert_string_equal(t_flip, cond_field(o3, "Ready", "lastTransitionTime"));
  assert_true(rv_of(o3) > rv_of(o2));
  cJSON_Delete(o3);

  /* Someone else flips it back after our write: their newer object is
   * compared as it is, and ours is written again. */
  const char *theirs = "{\"status\":{\"conditions\":[{\"type\":\"Ready\",\"status\":"
                       "\"False\",\"reason\":\"Broken\",\"message\":\"theirs\","
                       "\"lastTransitionTime\":\"2020-01-01T00:00:00Z\"}]}}";
  itest_expect(KCR_OK,
               kcr_patch(cl, &(struct kcr_ref){&itest_widgets, ns, name, "status"},
                         &(struct kcr_patch_opts){KCR_PATCH_MERGE}, theirs,
                         strlen(theirs), NULL, NULL),
               NULL);
  o3 = get_widget(name);
  assert_string_equal("Broken", cond_field(o3, "Ready", "reason"));
  write_expect(w, o3, "True", "Ready", "still ok", KCR_WRITE_WRITTEN, 1 + upd, __LINE__);
  cJSON_Delete(o3);
  o3 = get_widget(name);
  assert_string_equal("True", cond_field(o3, "Ready", "status"));
  assert_string_not_equal(t_flip, cond_field(o3, "Ready", "lastTransitionTime"));
  /* And the current object, once the "cache" has it: nothing to write. */
  write_expect(w, o3, "True", "Ready", "still ok", KCR_WRITE_SKIPPED, 0, __LINE__);

  cJSON_Delete(o0);
  cJSON_Delete(o1);
  cJSON_Delete(o2);
  cJSON_Delete(o3);
  kcr_status_writer_free(w);
  kcr_client_free(c);
}

static void stale_object_apply(void **state)
{
  stale_object_after_own_write(KCR_STATUS_APPLY, "ryow-apply");
}
static void stale_object_merge(void **state)
{
  stale_object_after_own_write(KCR_STATUS_MERGE_PATCH, "ryow-merge");
}
static void stale_object_update(void **state)
{
  stale_object_after_own_write(KCR_STATUS_UPDATE_RETRY, "ryow-update");
}

/* The object's JSON exactly as the apiserver sends it. */
static char *widget_text(const char *name)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  struct kcr_http_response resp = {0, KCR_BUF_INIT};
  char path[256];
  snprintf(path, sizeof(path), "/apis/test.kcr.io/v1/namespaces/%s/widgets/%s", ns, name);
  itest_expect(KCR_OK,
               kcr_client_do(cl,
                             &(struct kcr_http_request){.method = "GET", .path = path},
                             &resp, &ei),
               &ei);
  char *text = strdup(kcr_buf_str(&resp.body));
  assert_non_null(text);
  kcr_buf_cleanup(&resp.body);
  kcr_errinfo_cleanup(&ei);
  return text;
}

/* observedGeneration is an int64: 2^53 + 1 (no double holds it) and 10^15
 * (cJSON prints a double of it as 1e+15) go to the apiserver and come back
 * exactly, with every writer, and an unchanged one is not written again. */
static void int64_fields_travel_exactly(void **state)
{
  static const enum kcr_status_mode modes[] = {KCR_STATUS_APPLY, KCR_STATUS_MERGE_PATCH,
                                               KCR_STATUS_UPDATE_RETRY};
  static const struct {
    int64_t gen;
    const char *text;
  } gens[] = {{9007199254740993LL, "9007199254740993"},
              {1000000000000000LL, "1000000000000000"}};
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  enum kcr_write_result res;

  for(size_t m = 0; m < 3; m++) {
    kcr_status_writer *w = writer(modes[m], "kcr-test", NULL);
    char name[32];
    snprintf(name, sizeof(name), "int64-%zu", m);
    cJSON_Delete(make_widget(name));
    for(size_t g = 0; g < 2; g++) {
      char want[64];
      cJSON *o = get_widget(name);
      itest_expect(KCR_OK,
                   write1(w, o, "Ready", "True", "Ready", "ok", gens[g].gen, &res, &ei),
                   &ei);
      assert_int_equal(KCR_WRITE_WRITTEN, res);
      cJSON_Delete(o);
      o = get_widget(name);
      assert_true(kcr_json_int(o, "/status/observedGeneration", 0) == gens[g].gen);
      assert_true(
          kcr_json_int(kcr_cond_find(kcr_json_at(o, "/status/conditions"), "Ready"),
                       "/observedGeneration", 0) == gens[g].gen);
      /* Written as Go writes an int64, so every Go client can read it. */
      char *text = widget_text(name);
      snprintf(want, sizeof(want), "\"observedGeneration\":%s", gens[g].text);
      assert_non_null(strstr(text, want));
      assert_null(strstr(text, "e+"));
      free(text);
      /* The same again: the exact comparison finds nothing to write. */
      itest_expect(KCR_OK,
                   write1(w, o, "Ready", "True", "Ready", "ok", gens[g].gen, &res, &ei),
                   &ei);
      assert_int_equal(KCR_WRITE_SKIPPED, res);
      cJSON_Delete(o);
    }
    kcr_status_writer_free(w);
  }
  kcr_errinfo_cleanup(&ei);
}

static kcr_err collect_widget(const cJSON *item, void *ud)
{
  cJSON *arr = ud;
  cJSON_AddItemToArray(arr, cJSON_Duplicate(item, 1));
  return KCR_OK;
}

static cJSON *list_widgets(const char *selector)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  cJSON *arr = cJSON_CreateArray();
  itest_expect(KCR_OK,
               kcr_list_each(cl, &(struct kcr_ref){&itest_widgets, ns},
                             &(struct kcr_list_opts){.label_selector = selector},
                             collect_widget, arr, NULL, &ei),
               &ei);
  kcr_errinfo_cleanup(&ei);
  return arr;
}

static void steady_state_makes_zero_writes(void **state)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  kcr_metrics *m = NULL;
  assert_int_equal(KCR_OK, kcr_metrics_new(NULL, &m, NULL));
  kcr_status_writer *w = writer(KCR_STATUS_APPLY, "kcr-test", m);
  enum kcr_write_result res;
  kcr_metric *writes;
  cJSON *it;

  for(int i = 0; i < 100; i++) {
    char name[32];
    snprintf(name, sizeof(name), "steady-%03d", i);
    cJSON *o = make_widget(name);
    const char *lbl = "{\"metadata\":{\"labels\":{\"group\":\"steady\"}}}";
    itest_expect(KCR_OK,
                 kcr_patch(cl, &(struct kcr_ref){&itest_widgets, ns, name},
                           &(struct kcr_patch_opts){KCR_PATCH_MERGE}, lbl, strlen(lbl),
                           NULL, &ei),
                 &ei);
    itest_expect(KCR_OK, write1(w, o, "Ready", "True", "Ready", "ok", 1, &res, &ei), &ei);
    assert_int_equal(KCR_WRITE_WRITTEN, res);
    cJSON_Delete(o);
  }
  cJSON *before = list_widgets("group=steady");
  assert_int_equal(100, cJSON_GetArraySize(before));
  for(int round = 0; round < 10; round++) {
    cJSON *now = list_widgets("group=steady");
    cJSON_ArrayForEach(it, now)
    {
      itest_expect(KCR_OK, write1(w, it, "Ready", "True", "Ready", "ok", 1, &res, &ei),
                   &ei);
      assert_int_equal(KCR_WRITE_SKIPPED, res);
    }
    cJSON_Delete(now);
  }
  cJSON *after = list_widgets("group=steady");
  /* Not one resourceVersion moved. */
  for(int i = 0; i < 100; i++)
    assert_string_equal(
        kcr_json_str(cJSON_GetArrayItem(before, i), "/metadata/resourceVersion"),
        kcr_json_str(cJSON_GetArrayItem(after, i), "/metadata/resourceVersion"));
  assert_int_equal(
      KCR_OK, kcr_metric_counter(m,
                                 &(struct kcr_metric_opts){
                                     .name = "kcr_status_writes_total",
                                     .label_names = (const char *[]){"result", NULL}},
                                 &writes, NULL));
  assert_true(kcr_metric_value(writes, (const char *[]){"written", NULL}) == 100);
  assert_true(kcr_metric_value(writes, (const char *[]){"skipped", NULL}) == 1000);
  assert_true(kcr_metric_value(writes, (const char *[]){"conflict_retried", NULL}) == 0);
  cJSON_Delete(before);
  cJSON_Delete(after);
  kcr_status_writer_free(w);
  kcr_metrics_free(m);
  kcr_errinfo_cleanup(&ei);
}

struct storm {
  const char *name;
  atomic_bool stop;
  atomic_int spec_writes, other_writes;
  char other_last[8];
};

/* Rewrites spec and labels as fast as it can. */
static void *spec_writer(void *p)
{
  struct storm *s = p;
  char body[128];
  for(int i = 0; !atomic_load(&s->stop); i++) {
    snprintf(body, sizeof(body),
             "{\"metadata\":{\"labels\":{\"tick\":\"t%d\"}},\"spec\":{\"size\":%d}}", i,
             1 + i % 90);
    if(!kcr_patch(cl, &(struct kcr_ref){&itest_widgets, ns, s->name},
                  &(struct kcr_patch_opts){KCR_PATCH_MERGE}, body, strlen(body), NULL,
                  NULL))
      atomic_fetch_add(&s->spec_writes, 1);
  }
  return NULL;
}

/* Another controller owning its own condition type, flipping it. Runs on
 * its own thread: TCHECK, not cmocka asserts (the test thread reports). */
static void *other_controller(void *p)
{
  struct storm *s = p;
  struct kcr_status_writer_opts wo = {.client = cl,
                                      .gvr = &itest_widgets,
                                      .api_version = "test.kcr.io/v1",
                                      .kind = "Widget",
                                      .field_manager = "other-controller",
                                      .mode = KCR_STATUS_APPLY};
  kcr_status_writer *w = NULL;
  enum kcr_write_result res;
  if(!TCHECK(kcr_status_writer_new(&wo, &w, NULL) == KCR_OK))
    return NULL;
  for(int i = 0; !atomic_load(&s->stop); i++) {
    const char *st = i % 2 ? "True" : "False";
    cJSON *o = NULL;
    kcr_err rc = kcr_get(cl, &(struct kcr_ref){&itest_widgets, ns, s->name}, &o, NULL);
    if(!TCHECK(rc == KCR_OK))
      break;
    if(!write1(w, o, "OtherReady", st, "Other", "from the other controller", 0, &res,
               NULL)) {
      snprintf(s->other_last, sizeof(s->other_last), "%s", st);
      atomic_fetch_add(&s->other_writes, 1);
    }
    cJSON_Delete(o);
    itest_sleep_ms(5);
  }
  kcr_status_writer_free(w);
  return NULL;
}

static void storm(enum kcr_status_mode mode, const char *name)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  kcr_metrics *m = NULL;
  assert_int_equal(KCR_OK, kcr_metrics_new(NULL, &m, NULL));
  kcr_status_writer *w = writer(mode, "kcr-test", m);
  struct storm s = {.name = name};
  enum kcr_write_result res;
  pthread_t a, b;
  int requeued = 0;

  cJSON_Delete(make_widget(name));
  pthread_create(&a, NULL, spec_writer, &s);
  pthread_create(&b, NULL, other_controller, &s);
  for(int i = 0; i < 200; i++) {
    const char *st = i % 2 ? "True" : "False";
    char msg[32];
    kcr_err rc;
    snprintf(msg, sizeof(msg), "flip %d", i);
    do { /* as a controller would: a conflict is a requeue, never a loss */
      cJSON *o = get_widget(name); /* the "cache" */
      rc = write1(w, o, "Ready", st, "Flip", msg, 0, &res, &ei);
      cJSON_Delete(o);
      if(rc == KCR_ECONFLICT)
        requeued++;
    } while(rc == KCR_ECONFLICT && mode == KCR_STATUS_UPDATE_RETRY && requeued < 1000);
    itest_expect(KCR_OK, rc, &ei); /* never a conflict with apply / merge patch */
    assert_int_equal(KCR_WRITE_WRITTEN, res);
    /* The change is on the server, not lost. */
    cJSON *o = get_widget(name);
    assert_string_equal(st, cond_field(o, "Ready", "status"));
    assert_string_equal(msg, cond_field(o, "Ready", "message"));
    cJSON_Delete(o);
  }
  atomic_store(&s.stop, true);
  pthread_join(a, NULL);
  pthread_join(b, NULL);
  tcheck_report();
  assert_true(atomic_load(&s.spec_writes) > 50);
  assert_true(atomic_load(&s.other_writes) > 10);

  cJSON *o = get_widget(name);
  assert_string_equal("True", cond_field(o, "Ready", "status")); /* flip 199 */
  assert_string_equal("flip 199", cond_field(o, "Ready", "message"));
  assert_non_null(cond_field(o, "OtherReady", "status")); /* present in every mode */
  if(mode != KCR_STATUS_MERGE_PATCH) /* merge patch may revert it: the caveat */
    assert_string_equal(s.other_last, cond_field(o, "OtherReady", "status"));
  kcr_metric *writes = NULL;
  assert_int_equal(
      KCR_OK, kcr_metric_counter(m,
                                 &(struct kcr_metric_opts){
                                     .name = "kcr_status_writes_total",
                                     .label_names = (const char *[]){"result", NULL}},
                                 &writes, NULL));
  double retried = kcr_metric_value(writes, (const char *[]){"conflict_retried", NULL});
  print_message("storm %-14s: 200 flips written, %d spec writes, %d other-controller "
                "writes, %.0f conflicts retried, %d requeues\n",
                mode == KCR_STATUS_APPLY         ? "apply"
                : mode == KCR_STATUS_MERGE_PATCH ? "merge-patch"
                                                 : "update-retry",
                atomic_load(&s.spec_writes), atomic_load(&s.other_writes), retried,
                requeued);
  if(mode != KCR_STATUS_UPDATE_RETRY)
    assert_true(retried == 0);
  cJSON_Delete(o);
  kcr_status_writer_free(w);
  kcr_metrics_free(m);
  kcr_errinfo_cleanup(&ei);
}

static void storm_apply(void **state) { storm(KCR_STATUS_APPLY, "storm-apply"); }
static void storm_merge(void **state) { storm(KCR_STATUS_MERGE_PATCH, "storm-merge"); }
static void storm_update(void **state) { storm(KCR_STATUS_UPDATE_RETRY, "storm-update"); }

static void set_ready(cJSON *obj)
{
  cJSON *st = kcr_json_obj(obj, "/status"), *conds;
  bool changed;
  if(!(conds = kcr_json_at(st, "/conditions")))
    conds = cJSON_AddArrayToObject(st, "conditions");
  struct kcr_cond c = {"Ready", "True", "Ready", "it is ready", 0, 0};
  assert_int_equal(KCR_OK, kcr_cond_set(conds, &c, kcr_time_now(), &changed, NULL));
}

static void someone_else_writes(const char *name, const char *v)
{
  char body[96];
  snprintf(body, sizeof(body), "{\"metadata\":{\"labels\":{\"touched\":\"%s\"}}}", v);
  assert_int_equal(KCR_OK, kcr_patch(cl, &(struct kcr_ref){&itest_widgets, ns, name},
                                     &(struct kcr_patch_opts){KCR_PATCH_MERGE}, body,
                                     strlen(body), NULL, NULL));
}

struct race {
  const char *name;
  int attempts;
};

static kcr_err mutate_with_race(cJSON *fresh, bool *changed, void *ud)
{
  struct race *r = ud;
  if(r->attempts++ == 0)
    someone_else_writes(r->name, "during-our-update"); /* the same interleaving */
  set_ready(fresh);
  *changed = true;
  return KCR_OK;
}

static void seed_anti_pattern_loses_the_change(void **state)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  struct kcr_ref st = {&itest_widgets, ns, "seed", "status"};
  cJSON *obj;

  cJSON_Delete(make_widget("seed"));
  /* The seed's code: obj := Get; set the condition on obj; Status().Update. */
  obj = get_widget("seed");
  set_ready(obj);
  someone_else_writes("seed", "meanwhile"); /* anyone: a user, another controller */
  itest_expect(KCR_ECONFLICT, kcr_update(cl, &st, obj, NULL, NULL, &ei), &ei);
  assert_non_null(strstr(ei.message, "the object has been modified"));
  /* The advice it got: on conflict, re-Get INTO THE SAME VARIABLE and retry. */
  cJSON_Delete(obj);
  obj = get_widget("seed"); /* overwrites the modified conditions */
  itest_expect(KCR_OK, kcr_update(cl, &st, obj, NULL, NULL, &ei), &ei); /* "succeeds" */
  cJSON_Delete(obj);
  obj = get_widget("seed");
  assert_null(
      cond_field(obj, "Ready", "status")); /* ...and the change is silently lost */
  cJSON_Delete(obj);

  /* kcr_update_retry under the same interleaving re-applies the change to a
   * fresh server copy, so it lands. */
  struct race r = {"seed", 0};
  enum kcr_write_result res;
  int conflicts = 0;
  itest_expect(
      KCR_OK,
      kcr_update_retry(cl, &st, NULL, mutate_with_race, &r, &res, &conflicts, &ei), &ei);
  assert_int_equal(KCR_WRITE_WRITTEN, res);
  assert_int_equal(1, conflicts);
  assert_int_equal(2, r.attempts);
  obj = get_widget("seed");
  assert_string_equal("True", cond_field(obj, "Ready", "status"));
  assert_string_equal("during-our-update", kcr_json_str(obj, "/metadata/labels/touched"));
  cJSON_Delete(obj);
  kcr_errinfo_cleanup(&ei);
}

static void finalizers_and_owner_references(void **state)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  struct kcr_ref ref = {&itest_widgets, ns, "fin"};
  bool changed;
  cJSON *owner = make_widget("fin"), *o;

  itest_expect(KCR_OK, kcr_finalizer_add(cl, &ref, "test.kcr.io/cleanup", &changed, &ei),
               &ei);
  assert_true(changed);
  itest_expect(KCR_OK, kcr_finalizer_add(cl, &ref, "test.kcr.io/cleanup", &changed, &ei),
               &ei);
  assert_false(changed); /* idempotent: no request */
  itest_expect(KCR_OK, kcr_finalizer_add(cl, &ref, "test.kcr.io/other", &changed, &ei),
               &ei);
  o = get_widget("fin");
  assert_int_equal(2, cJSON_GetArraySize(kcr_json_at(o, "/metadata/finalizers")));
  cJSON_Delete(o);
  /* Deleting: the object stays (finalizers), and no new finalizer may come. */
  itest_expect(KCR_OK, kcr_delete(cl, &ref, NULL, NULL, &ei), &ei);
  itest_expect(KCR_EINVAL, kcr_finalizer_add(cl, &ref, "test.kcr.io/late", &changed, &ei),
               &ei);
  assert_non_null(strstr(ei.message, "being deleted"));
  itest_expect(KCR_OK,
               kcr_finalizer_remove(cl, &ref, "test.kcr.io/cleanup", &changed, &ei), &ei);
  assert_true(changed);
  itest_expect(KCR_OK,
               kcr_finalizer_remove(cl, &ref, "test.kcr.io/cleanup", &changed, &ei), &ei);
  assert_false(changed);
  itest_expect(KCR_OK, kcr_finalizer_remove(cl, &ref, "test.kcr.io/other", &changed, &ei),
               &ei);
  for(int i = 0; i < 50 && kcr_get(cl, &ref, NULL, NULL) == KCR_OK; i++)
    itest_sleep_ms(100);
  itest_expect(KCR_ENOTFOUND, kcr_get(cl, &ref, NULL, &ei),
               &ei); /* gone with the last one */

  /* Owner references. */
  cJSON *parent = make_widget("parent");
  cJSON *child = itest_json("{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":"
                            "{\"name\":\"child\",\"namespace\":\"%s\"}}",
                            ns);
  itest_expect(KCR_OK, kcr_owner_set_controller(child, parent, &ei), &ei);
  itest_expect(KCR_OK, kcr_owner_set_controller(child, parent, &ei),
               &ei); /* idempotent */
  assert_int_equal(1,
                   cJSON_GetArraySize(kcr_json_at(child, "/metadata/ownerReferences")));
  const cJSON *r0 =
      cJSON_GetArrayItem(kcr_json_at(child, "/metadata/ownerReferences"), 0);
  assert_true(cJSON_IsTrue(cJSON_GetObjectItem(r0, "controller")));
  assert_true(cJSON_IsTrue(cJSON_GetObjectItem(r0, "blockOwnerDeletion")));
  assert_string_equal(kcr_json_str(parent, "/metadata/uid"), kcr_json_str(r0, "/uid"));
  itest_expect(
      KCR_OK,
      kcr_create(cl, &(struct kcr_ref){&itest_configmaps, ns}, child, NULL, NULL, &ei),
      &ei);
  cJSON *other = itest_json("{\"apiVersion\":\"test.kcr.io/v1\",\"kind\":\"Widget\","
                            "\"metadata\":{\"name\":\"x\",\"namespace\":\"%s\",\"uid\":"
                            "\"11111111-2222-3333-4444-555555555555\"}}",
                            ns);
  itest_expect(KCR_EINVAL, kcr_owner_set_controller(child, other, &ei), &ei);
  assert_non_null(strstr(ei.message, "only one controller reference"));
  cJSON *far =
      itest_json("{\"apiVersion\":\"test.kcr.io/v1\",\"kind\":\"Widget\","
                 "\"metadata\":{\"name\":\"y\",\"namespace\":\"elsewhere\",\"uid\":"
                 "\"11111111-2222-3333-4444-555555555556\"}}");
  cJSON *child2 = itest_json("{\"metadata\":{\"name\":\"c2\",\"namespace\":\"%s\"}}", ns);
  itest_expect(KCR_EINVAL, kcr_owner_set_controller(child2, far, &ei), &ei);
  assert_non_null(strstr(ei.message, "cross-namespace"));

  cJSON_Delete(child2);
  cJSON_Delete(far);
  cJSON_Delete(other);
  cJSON_Delete(child);
  cJSON_Delete(parent);
  cJSON_Delete(owner);
  kcr_errinfo_cleanup(&ei);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(transition_time_moves_only_on_flips),
      cmocka_unit_test(stale_object_apply),
      cmocka_unit_test(stale_object_merge),
      cmocka_unit_test(stale_object_update),
      cmocka_unit_test(int64_fields_travel_exactly),
      cmocka_unit_test(steady_state_makes_zero_writes),
      cmocka_unit_test(storm_apply),
      cmocka_unit_test(storm_merge),
      cmocka_unit_test(storm_update),
      cmocka_unit_test(seed_anti_pattern_loses_the_change),
      cmocka_unit_test(finalizers_and_owner_references),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
