/* Watches against the real kube-apiserver: ADDED/MODIFIED/DELETED arrive in
 * order with their resourceVersions, cancellation from another thread is
 * prompt, the server's timeout ends the stream cleanly, a watch from a
 * compacted resourceVersion ends with KCR_EGONE, drop_managed_fields
 * delivers objects without their managedFields, an idle watch sleeps, and
 * batch_ms reads events that follow each other closely together.
 * The first runs both ways a watch can go: on the client's own connection
 * and, with a proxy named, as curl's transfer. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "itest.h"

ITEST_NAMESPACE_FIXTURE("watch", false)

#define MAXEV 64
struct events {
  pthread_mutex_t mu;
  int n;
  enum kcr_watch_type type[MAXEV];
  char name[MAXEV][32];
  char value[MAXEV][16];
  char rv[MAXEV][24];
  uint64_t at[MAXEV]; /* when it reached the callback */
};

static kcr_err record(struct kcr_watch_event *ev, void *ud)
{
  struct events *e = ud;
  const char *v = kcr_json_str(ev->object, "/data/k");
  const char *n = kcr_json_str(ev->object, "/metadata/name");
  pthread_mutex_lock(&e->mu);
  if(e->n < MAXEV) {
    e->type[e->n] = ev->type;
    e->at[e->n] = kcr_time_mono_ms();
    snprintf(e->name[e->n], sizeof(e->name[0]), "%s", n ? n : "");
    snprintf(e->value[e->n], sizeof(e->value[0]), "%s", v ? v : "");
    snprintf(e->rv[e->n], sizeof(e->rv[0]), "%s",
             ev->resource_version ? ev->resource_version : "");
    e->n++;
  }
  pthread_mutex_unlock(&e->mu);
  return KCR_OK;
}

struct runner {
  kcr_watch *w;
  kcr_err rc;
  struct kcr_errinfo ei;
  pthread_t th;
};

static void *run_watch(void *p)
{
  struct runner *r = p;
  r->rc = kcr_watch_run(r->w, &r->ei);
  return NULL;
}

static int count(struct events *e)
{
  pthread_mutex_lock(&e->mu);
  int n = e->n;
  pthread_mutex_unlock(&e->mu);
  return n;
}

static void wait_for(struct events *e, int n)
{
  for(int i = 0; i < 200 && count(e) < n; i++)
    itest_sleep_ms(50);
  assert_int_equal(n, count(e));
}

/* Creates, updates and deletes ConfigMap name with client c while a watch
 * runs; checks what it saw, then cancels it. */
static void events_in_order(kcr_client *c, const char *name)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  struct kcr_ref coll = {&itest_configmaps, ns}, one = {&itest_configmaps, ns, name};
  struct events e = {PTHREAD_MUTEX_INITIALIZER};
  struct runner r = {0};
  cJSON *list = NULL, *obj, *cur = NULL;
  char rvs[3][24];

  itest_expect(KCR_OK, kcr_list(c, &coll, NULL, &list, &ei), &ei);
  struct kcr_watch_opts wo = {.client = c,
                              .ref = &coll,
                              .on_event = record,
                              .ud = &e,
                              .resource_version =
                                  kcr_json_str(list, "/metadata/resourceVersion"),
                              .allow_bookmarks = true,
                              .timeout_ms = 300000};
  assert_int_equal(KCR_OK, kcr_watch_new(&wo, &r.w, NULL));
  cJSON_Delete(list);
  pthread_create(&r.th, NULL, run_watch, &r);

  obj = itest_json("{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":"
                   "{\"name\":\"%s\"},\"data\":{\"k\":\"one\"}}",
                   name);
  itest_expect(KCR_OK, kcr_create(c, &coll, obj, NULL, &cur, &ei), &ei);
  snprintf(rvs[0], sizeof(rvs[0]), "%s", kcr_json_str(cur, "/metadata/resourceVersion"));
  kcr_json_set_str(cur, "/data/k", "two");
  cJSON *upd = NULL;
  itest_expect(KCR_OK, kcr_update(c, &one, cur, NULL, &upd, &ei), &ei);
  snprintf(rvs[1], sizeof(rvs[1]), "%s", kcr_json_str(upd, "/metadata/resourceVersion"));
  cJSON *del = NULL;
  itest_expect(KCR_OK, kcr_delete(c, &one, NULL, &del, &ei), &ei);

  wait_for(&e, 3);
  assert_int_equal(KCR_WATCH_ADDED, e.type[0]);
  assert_int_equal(KCR_WATCH_MODIFIED, e.type[1]);
  assert_int_equal(KCR_WATCH_DELETED, e.type[2]);
  assert_string_equal("one", e.value[0]);
  assert_string_equal("two", e.value[1]);
  assert_string_equal("two", e.value[2]); /* DELETED carries the last state */
  assert_string_equal(rvs[0], e.rv[0]);
  assert_string_equal(rvs[1], e.rv[1]);

  uint64_t t0 = kcr_time_mono_ms();
  kcr_watch_cancel(r.w);
  pthread_join(r.th, NULL);
  assert_int_equal(KCR_ECANCELED, r.rc);
  /* Read once the run is over: kcr_watch_rv belongs to the running thread. */
  assert_string_equal(e.rv[2], kcr_watch_rv(r.w));
  assert_true(kcr_time_mono_ms() - t0 < 1000);               /* woken, not polled */
  assert_int_equal(KCR_ECANCELED, kcr_watch_run(r.w, NULL)); /* stays canceled */

  kcr_watch_free(r.w);
  kcr_errinfo_cleanup(&r.ei);
  cJSON_Delete(obj);
  cJSON_Delete(cur);
  cJSON_Delete(upd);
  cJSON_Delete(del);
  kcr_errinfo_cleanup(&ei);
}

/* On one of the client's own connections (https, no proxy). */
static void events_arrive_in_order_and_cancel_is_prompt(void **state)
{
  events_in_order(cl, "w");
}

/* Through a proxy (the cluster's proxy-url: the client never takes one
 * from the environment for this loopback server) the watch is curl's
 * transfer, tunnelled by the proxy. */
static void the_same_through_curl_when_a_proxy_is_named(void **state)
{
  struct itest_proxy *px = itest_proxy_start();
  char url[64];
  kcr_client *c;

  snprintf(url, sizeof(url), "http://127.0.0.1:%d", itest_proxy_port(px));
  c = itest_client_with("proxy-url", url);
  events_in_order(c, "w-curl");
  assert_true(itest_proxy_tunnels(px) > 0);
  kcr_client_free(c);
  itest_proxy_stop(px);
}

static void server_timeout_ends_the_stream_cleanly(void **state)
{
  struct kcr_ref coll = {&itest_configmaps, ns};
  struct events e = {PTHREAD_MUTEX_INITIALIZER};
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  kcr_watch *w;
  /* No resourceVersion: the current state first (empty namespace), then the
   * server closes after timeoutSeconds. */
  struct kcr_watch_opts wo = {
      .client = cl, .ref = &coll, .on_event = record, .ud = &e, .timeout_ms = 1000};
  assert_int_equal(KCR_OK, kcr_watch_new(&wo, &w, NULL));
  uint64_t t0 = kcr_time_mono_ms();
  itest_expect(KCR_OK, kcr_watch_run(w, &ei), &ei);
  assert_true(kcr_time_mono_ms() - t0 < 10000);
  kcr_watch_free(w);
  kcr_errinfo_cleanup(&ei);
}

static void watch_from_compacted_rv_is_gone(void **state)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  struct kcr_ref coll = {&itest_configmaps, ns}, one = {&itest_configmaps, ns, "g"};
  struct events e = {PTHREAD_MUTEX_INITIALIZER};
  cJSON *cur = NULL, *obj;
  char old_rv[24];
  kcr_watch *w;

  obj = itest_json("{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":"
                   "{\"name\":\"g\"},\"data\":{\"k\":\"0\"}}");
  itest_expect(KCR_OK, kcr_create(cl, &coll, obj, NULL, &cur, &ei), &ei);
  snprintf(old_rv, sizeof(old_rv), "%s", kcr_json_str(cur, "/metadata/resourceVersion"));
  for(int i = 1; i <= 3; i++) {
    cJSON *next = NULL;
    char v[8];
    snprintf(v, sizeof(v), "%d", i);
    kcr_json_set_str(cur, "/data/k", v);
    itest_expect(KCR_OK, kcr_update(cl, &one, cur, NULL, &next, &ei), &ei);
    cJSON_Delete(cur);
    cur = next;
  }
  /* Compact etcd's history up to now: old_rv is gone from storage. The
   * apiserver's watch cache keeps a window of recent events; restart it so the
   * window starts after old_rv, as after any long-enough outage. */
  itest_etcd_compact();
  itest_controlplane("");

  struct kcr_watch_opts wo = {.client = cl,
                              .ref = &coll,
                              .on_event = record,
                              .ud = &e,
                              .resource_version = old_rv,
                              .allow_bookmarks = true,
                              .timeout_ms = 30000};
  assert_int_equal(KCR_OK, kcr_watch_new(&wo, &w, NULL));
  kcr_err rc = KCR_OK;
  for(int i = 0; i < 50; i++) { /* the apiserver may still be warming up */
    rc = kcr_watch_run(w, &ei);
    if(rc != KCR_ETRANSPORT && rc != KCR_EUNAVAILABLE && rc != KCR_ETOOMANY)
      break;
    itest_sleep_ms(200);
  }
  itest_expect(KCR_EGONE, rc, &ei);
  assert_int_equal(410, ei.code);
  assert_true(!strcmp(ei.reason, "Expired") || !strcmp(ei.reason, "Gone"));
  assert_int_equal(0, count(&e)); /* nothing was delivered */
  kcr_watch_free(w);
  cJSON_Delete(cur);
  cJSON_Delete(obj);
  kcr_errinfo_cleanup(&ei);
}

/* What objects arrived with and without managedFields. */
struct mf_seen {
  int with, without;
  char data[16];
};

static kcr_err note_managed_fields(struct kcr_watch_event *ev, void *ud)
{
  struct mf_seen *m = ud;
  const char *v = kcr_json_str(ev->object, "/data/k");
  if(kcr_json_at(ev->object, "/metadata/managedFields"))
    m->with++;
  else
    m->without++;
  snprintf(m->data, sizeof(m->data), "%s", v ? v : "");
  return KCR_OK;
}

static struct mf_seen watch_current_state(bool drop)
{
  struct kcr_ref coll = {&itest_configmaps, ns};
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  struct mf_seen m = {0};
  struct kcr_watch_opts wo = {.client = cl,
                              .ref = &coll,
                              .on_event = note_managed_fields,
                              .ud = &m,
                              .label_selector = "kcr-test=mf",
                              .timeout_ms = 1000,
                              .drop_managed_fields = drop};
  kcr_watch *w;
  assert_int_equal(KCR_OK, kcr_watch_new(&wo, &w, NULL));
  itest_expect(KCR_OK, kcr_watch_run(w, &ei), &ei);
  kcr_watch_free(w);
  kcr_errinfo_cleanup(&ei);
  return m;
}

/* The apiserver sends every object with its managedFields; with
 * drop_managed_fields they are left out before parsing, the rest is the
 * same. */
static void drop_managed_fields_leaves_them_out(void **state)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  struct kcr_ref coll = {&itest_configmaps, ns};
  cJSON *obj = itest_json("{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":"
                          "{\"name\":\"mf\",\"labels\":{\"kcr-test\":\"mf\"}},"
                          "\"data\":{\"k\":\"kept\"}}");
  struct mf_seen full, dropped;

  itest_expect(KCR_OK, kcr_create(cl, &coll, obj, NULL, NULL, &ei), &ei);
  full = watch_current_state(false);
  dropped = watch_current_state(true);
  assert_int_equal(1, full.with);
  assert_int_equal(0, full.without);
  assert_int_equal(0, dropped.with);
  assert_int_equal(1, dropped.without);
  assert_string_equal("kept", full.data);
  assert_string_equal("kept", dropped.data);
  cJSON_Delete(obj);
  kcr_errinfo_cleanup(&ei);
}

/* A watch of the namespace's ConfigMaps with label selector sel, recording
 * into e, reading in batches of batch_ms. */
static kcr_watch *selected_watch(struct events *e, const char *sel, uint64_t batch_ms)
{
  struct kcr_ref coll = {&itest_configmaps, ns};
  struct kcr_watch_opts wo = {.client = cl,
                              .ref = &coll,
                              .on_event = record,
                              .ud = e,
                              .label_selector = sel,
                              .timeout_ms = 300000,
                              .batch_ms = batch_ms};
  kcr_watch *w = NULL;
  assert_int_equal(KCR_OK, kcr_watch_new(&wo, &w, NULL));
  return w;
}

/* A watch run on its own thread, which says who it is. */
struct idle_runner {
  kcr_watch *w;
  kcr_err rc;
  pid_t tid;
  pthread_mutex_t mu;
};

static void *run_idle(void *p)
{
  struct idle_runner *r = p;
  pthread_mutex_lock(&r->mu);
  r->tid = (pid_t)syscall(SYS_gettid);
  pthread_mutex_unlock(&r->mu);
  r->rc = kcr_watch_run(r->w, NULL);
  return NULL;
}

/* The times a thread of this process went to sleep and was woken. */
static long wakeups(pid_t tid)
{
  char path[64], line[128];
  long n = -1;
  FILE *f;
  snprintf(path, sizeof(path), "/proc/self/task/%ld/status", (long)tid);
  f = fopen(path, "r");
  assert_non_null(f);
  while(fgets(line, sizeof(line), f))
    if(sscanf(line, "voluntary_ctxt_switches: %ld", &n) == 1)
      break;
  fclose(f);
  assert_true(n >= 0);
  return n;
}

/* A watch with nothing to deliver does not wake up to look (it used to,
 * every second): data, its deadline and kcr_watch_cancel wake it. */
static void an_idle_watch_sleeps(void **state)
{
  struct events e = {PTHREAD_MUTEX_INITIALIZER};
  struct idle_runner r = {.mu = PTHREAD_MUTEX_INITIALIZER};
  pthread_t th;
  long before, after;
  pid_t tid;

  r.w = selected_watch(&e, "kcr-test=nothing-has-this", 0);
  pthread_create(&th, NULL, run_idle, &r);
  itest_sleep_ms(1000); /* connected and waiting */
  pthread_mutex_lock(&r.mu);
  tid = r.tid;
  pthread_mutex_unlock(&r.mu);
  before = wakeups(tid);
  itest_sleep_ms(3500);
  after = wakeups(tid);
  uint64_t t0 = kcr_time_mono_ms();
  kcr_watch_cancel(r.w);
  pthread_join(th, NULL);
  assert_int_equal(KCR_ECANCELED, r.rc);
  assert_true(kcr_time_mono_ms() - t0 < 1000);
  if(after - before > 1)
    fail_msg("an idle watch woke %ld times in 3.5 s", after - before);
  assert_int_equal(0, count(&e));
  kcr_watch_free(r.w);
}

static void create_labeled(const char *name)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  struct kcr_ref coll = {&itest_configmaps, ns};
  cJSON *obj = itest_json("{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":"
                          "{\"name\":\"%s\",\"labels\":{\"kcr-test\":\"batch\"}}}",
                          name),
        *out = NULL;
  itest_expect(KCR_OK, kcr_create(cl, &coll, obj, NULL, &out, &ei), &ei);
  cJSON_Delete(obj);
  cJSON_Delete(out);
}

/* batch_ms: an event after a quiet spell is read at once; one that follows
 * it closely waits for the batch (the thread reads again batch_ms after its
 * last read, not as each event arrives); kcr_watch_cancel ends that wait at
 * once; nothing is lost or reordered. */
static void a_batch_reads_close_events_together(void **state)
{
  struct events t = {PTHREAD_MUTEX_INITIALIZER};
  struct runner r = {0};
  uint64_t t0;

  r.w = selected_watch(&t, "kcr-test=batch", 2000);
  pthread_create(&r.th, NULL, run_watch, &r);
  itest_sleep_ms(2500); /* connected, past any batch, waiting */
  t0 = kcr_time_mono_ms();
  create_labeled("b1");
  for(int i = 0; i < 300 && count(&t) < 1; i++)
    itest_sleep_ms(10);
  assert_int_equal(1, count(&t));
  if(t.at[0] - t0 >= 1500)
    fail_msg("the first event after a quiet spell took %llu ms",
             (unsigned long long)(t.at[0] - t0));
  create_labeled("b2");
  for(int i = 0; i < 600 && count(&t) < 2; i++)
    itest_sleep_ms(10);
  assert_int_equal(2, count(&t));
  if(t.at[1] - t.at[0] < 1900)
    fail_msg("an event right after another came %llu ms after it, not after the batch",
             (unsigned long long)(t.at[1] - t.at[0]));
  assert_string_equal("b1", t.name[0]);
  assert_string_equal("b2", t.name[1]);
  /* now in the batch after b2's read */
  t0 = kcr_time_mono_ms();
  kcr_watch_cancel(r.w);
  pthread_join(r.th, NULL);
  assert_int_equal(KCR_ECANCELED, r.rc);
  if(kcr_time_mono_ms() - t0 >= 1000)
    fail_msg("a cancel in a batch took %llu ms",
             (unsigned long long)(kcr_time_mono_ms() - t0));
  assert_int_equal(2, count(&t));
  kcr_watch_free(r.w);
  kcr_errinfo_cleanup(&r.ei);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(events_arrive_in_order_and_cancel_is_prompt),
      cmocka_unit_test(the_same_through_curl_when_a_proxy_is_named),
      cmocka_unit_test(server_timeout_ends_the_stream_cleanly),
      cmocka_unit_test(watch_from_compacted_rv_is_gone),
      cmocka_unit_test(drop_managed_fields_leaves_them_out),
      cmocka_unit_test(an_idle_watch_sleeps),
      cmocka_unit_test(a_batch_reads_close_events_together),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
