/* Leader election against the real control plane: a fresh Lease is created
 * and renewed; two electors never lead together; stopping the leader hands
 * the lease over at once; a leader whose lease is overwritten, or whose
 * renewals are refused, loses it within the renew deadline; a live foreign
 * holder is never overridden and a silent one is taken after the lease
 * duration measured on the local clock (the times written in the Lease are
 * not trusted); API errors are logged once and retried; stop is prompt.
 *
 * Timings are short (lease 2 s, renew deadline 1.5 s, retry 0.2 s) except
 * where a longer lease separates "handed over by release" from "taken after
 * expiry". Lower bounds are strict, upper bounds generous (loaded CI). */
#include <fcntl.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "itest.h"
#include "kcr/leader.h"
#include "kcr/metrics.h"

static const struct kcr_gvr leases = {"coordination.k8s.io", "v1", "leases", true};
static const struct kcr_gvr vaps = {"admissionregistration.k8s.io", "v1",
                                    "validatingadmissionpolicies", false};
static const struct kcr_gvr vapbs = {"admissionregistration.k8s.io", "v1",
                                     "validatingadmissionpolicybindings", false};

#define LEASE_MS 2000
#define RENEW_MS 1500
#define RETRY_MS 200

ITEST_CLIENT_FIXTURE

/* ---- helpers ----------------------------------------------------------- */

struct cbs {
  kcr_leader *le;
  atomic_int started, stopped;
  atomic_int leader_in_started, leader_in_stopped; /* is_leader() seen inside */
  _Atomic long long stopped_wall_ms;
};

static long long wall_ms(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void on_started(void *ud)
{
  struct cbs *c = ud;
  atomic_fetch_add(&c->started, 1);
  if(kcr_leader_is_leader(c->le))
    atomic_fetch_add(&c->leader_in_started, 1);
}

static void on_stopped(void *ud)
{
  struct cbs *c = ud;
  atomic_store(&c->stopped_wall_ms, wall_ms());
  if(kcr_leader_is_leader(c->le))
    atomic_fetch_add(&c->leader_in_stopped, 1);
  atomic_fetch_add(&c->stopped, 1);
}

static kcr_leader *elector(const char *ns, const char *name, const char *id,
                           uint64_t lease, uint64_t renew, uint64_t retry, struct cbs *c,
                           kcr_metrics *m)
{
  kcr_leader *le;
  struct kcr_leader_opts o = {.client = cl,
                              .ns = ns,
                              .name = name,
                              .identity = id,
                              .lease_duration_ms = lease,
                              .renew_deadline_ms = renew,
                              .retry_period_ms = retry,
                              .metrics = m,
                              .on_started_leading = on_started,
                              .on_stopped_leading = on_stopped,
                              .ud = c};
  assert_int_equal(KCR_OK, kcr_leader_new(&o, &le, NULL));
  c->le = le;
  return le;
}

static cJSON *get_lease(const char *ns, const char *name)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  cJSON *l = NULL;
  itest_expect(KCR_OK, kcr_get(cl, &(struct kcr_ref){&leases, ns, name}, &l, &ei), &ei);
  kcr_errinfo_cleanup(&ei);
  return l;
}

static void create_lease(const char *ns, const char *name, const char *spec_json)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  cJSON *l = itest_json("{\"apiVersion\":\"coordination.k8s.io/v1\",\"kind\":\"Lease\","
                        "\"metadata\":{\"name\":\"%s\"},\"spec\":%s}",
                        name, spec_json);
  itest_expect(KCR_OK, kcr_create(cl, &(struct kcr_ref){&leases, ns}, l, NULL, NULL, &ei),
               &ei);
  cJSON_Delete(l);
  kcr_errinfo_cleanup(&ei);
}

/* Overwrites spec fields of the lease (retrying conflicts with a renewing
 * elector). renew_time NULL: left as is. */
static void write_lease(const char *ns, const char *name, const char *holder,
                        const char *renew_time)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  kcr_err rc = KCR_ECONFLICT;
  for(int i = 0; i < 50 && rc == KCR_ECONFLICT; i++) {
    cJSON *l = get_lease(ns, name);
    assert_int_equal(KCR_OK, kcr_json_set_str(l, "/spec/holderIdentity", holder));
    if(renew_time)
      assert_int_equal(KCR_OK, kcr_json_set_str(l, "/spec/renewTime", renew_time));
    kcr_errinfo_cleanup(&ei);
    rc = kcr_update(cl, &(struct kcr_ref){&leases, ns, name}, l, NULL, NULL, &ei);
    cJSON_Delete(l);
  }
  itest_expect(KCR_OK, rc, &ei);
  kcr_errinfo_cleanup(&ei);
}

static void assert_micro_time(const char *s)
{
  time_t t;
  assert_non_null(s);
  assert_int_equal(27, strlen(s)); /* 2026-11-29T10:00:00.123456Z */
  assert_int_equal('.', s[19]);
  assert_int_equal('Z', s[26]);
  assert_int_equal(KCR_OK, kcr_time_parse(s, &t));
  assert_true(llabs((long long)t - (long long)time(NULL)) < 300);
}

static double gauge(kcr_metrics *m, const char *name)
{
  kcr_metric *g = NULL;
  assert_int_equal(KCR_OK,
                   kcr_metric_gauge(m,
                                    &(struct kcr_metric_opts){
                                        .name = "leader_election_master_status",
                                        .label_names = (const char *[]){"name", NULL}},
                                    &g, NULL));
  return kcr_metric_value(g, (const char *[]){name});
}

/* Waits until lost() or timeout; returns the elapsed ms. */
static uint64_t wait_lost(kcr_leader *le, uint64_t timeout_ms)
{
  uint64_t t0 = kcr_time_mono_ms();
  while(!kcr_leader_lost(le) && kcr_time_mono_ms() - t0 < timeout_ms)
    itest_sleep_ms(10);
  return kcr_time_mono_ms() - t0;
}

/* Log records go to a temporary file while capturing. */
static int log_fd = -1;
static char log_path[64];

static void log_capture(void)
{
  snprintf(log_path, sizeof(log_path), "/tmp/kcr-leader-log-XXXXXX");
  log_fd = mkstemp(log_path);
  assert_true(log_fd >= 0);
  kcr_log_set_fd(log_fd);
}

/* Stops capturing; returns how many records contain needle (each record is
 * one line). Echoes the records to stderr. */
static int log_count_end(const char *needle1, int *count2, const char *needle2)
{
  char line[4096];
  int n = 0;
  FILE *f;

  kcr_log_set_fd(2);
  f = fopen(log_path, "r");
  assert_non_null(f);
  if(count2)
    *count2 = 0;
  while(fgets(line, sizeof(line), f)) {
    fputs(line, stderr);
    if(strstr(line, needle1))
      n++;
    if(count2 && strstr(line, needle2))
      (*count2)++;
  }
  fclose(f);
  close(log_fd);
  unlink(log_path);
  return n;
}

/* ---- cases --------------------------------------------------------------- */

static void new_checks_options(void **state)
{
  kcr_leader *le;
  struct kcr_leader_opts o = {.client = cl, .ns = "default", .name = "x"};

  assert_int_equal(KCR_OK, kcr_leader_new(&o, &le, NULL)); /* defaults 15/10/2 s */
  /* Default identity: "<hostname>_<16 hex>". */
  const char *id = kcr_leader_identity(le);
  char host[256] = "";
  gethostname(host, sizeof(host));
  assert_true(strlen(id) == strlen(host) + 17);
  assert_int_equal(0, strncmp(id, host, strlen(host)));
  assert_int_equal('_', id[strlen(host)]);
  assert_false(kcr_leader_is_leader(le));
  assert_false(kcr_leader_wait(le, 10));              /* not started: times out */
  kcr_leader_stop(le);                                /* before start: no-op ... */
  assert_int_equal(KCR_EINVAL, kcr_leader_start(le)); /* ... that forbids start */
  kcr_leader_free(le);
  kcr_leader_free(NULL);

  struct kcr_leader_opts bad[] = {
      {.ns = "default", .name = "x"},
      {.client = cl, .name = "x"},
      {.client = cl, .ns = "default"},
      {.client = cl,
       .ns = "default",
       .name = "x",
       .lease_duration_ms = 10000,
       .renew_deadline_ms = 10000},
      {.client = cl,
       .ns = "default",
       .name = "x",
       .lease_duration_ms = 3000,
       .renew_deadline_ms = 2400,
       .retry_period_ms = 2000},
      {.client = cl,
       .ns = "default",
       .name = "x",
       .lease_duration_ms = 900,
       .renew_deadline_ms = 500,
       .retry_period_ms = 100},
      /* 2.5 s is written as 2 s: a 2.2 s renew deadline would outlast it. */
      {.client = cl,
       .ns = "default",
       .name = "x",
       .lease_duration_ms = 2500,
       .renew_deadline_ms = 2200,
       .retry_period_ms = 200},
  };
  for(size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    le = (kcr_leader *)&o; /* must be reset */
    assert_int_equal(KCR_EINVAL, kcr_leader_new(&bad[i], &le, NULL));
    assert_null(le);
  }
}

static void acquires_fresh_lease_and_renews(void **state)
{
  char *ns = itest_namespace(cl, "leader");
  kcr_metrics *m = NULL;
  assert_int_equal(KCR_OK, kcr_metrics_new(NULL, &m, NULL));
  struct cbs c = {0};
  kcr_leader *le = elector(ns, "one", "alpha", LEASE_MS, RENEW_MS, RETRY_MS, &c, m);
  cJSON *l1, *l2, *l3;
  uint64_t t0;

  assert_int_equal(0, gauge(m, "one"));
  assert_int_equal(KCR_OK, kcr_leader_start(le));
  assert_int_equal(KCR_EINVAL, kcr_leader_start(le));
  assert_true(kcr_leader_wait(le, 10000));
  assert_true(kcr_leader_is_leader(le));
  assert_int_equal(1, atomic_load(&c.started));
  assert_int_equal(1, atomic_load(&c.leader_in_started));
  assert_int_equal(1, gauge(m, "one"));

  l1 = get_lease(ns, "one");
  assert_string_equal("alpha", kcr_json_str(l1, "/spec/holderIdentity"));
  assert_int_equal(2, kcr_json_int(l1, "/spec/leaseDurationSeconds", -1));
  assert_int_equal(0, kcr_json_int(l1, "/spec/leaseTransitions", -1));
  assert_micro_time(kcr_json_str(l1, "/spec/acquireTime"));
  assert_micro_time(kcr_json_str(l1, "/spec/renewTime"));

  /* renewTime advances every retry period; the term stays the same. */
  itest_sleep_ms(4 * RETRY_MS);
  l2 = get_lease(ns, "one");
  assert_string_equal("alpha", kcr_json_str(l2, "/spec/holderIdentity"));
  assert_micro_time(kcr_json_str(l2, "/spec/renewTime"));
  assert_true(strcmp(kcr_json_str(l2, "/spec/renewTime"),
                     kcr_json_str(l1, "/spec/renewTime")) > 0);
  assert_string_equal(kcr_json_str(l1, "/spec/acquireTime"),
                      kcr_json_str(l2, "/spec/acquireTime"));
  assert_int_equal(0, kcr_json_int(l2, "/spec/leaseTransitions", -1));
  assert_true(kcr_leader_is_leader(le));

  /* Stop: prompt, on_stopped_leading after is_leader went false, released. */
  t0 = kcr_time_mono_ms();
  kcr_leader_stop(le);
  assert_true(kcr_time_mono_ms() - t0 < 3000);
  kcr_leader_stop(le); /* idempotent */
  assert_false(kcr_leader_is_leader(le));
  assert_false(kcr_leader_lost(le));
  assert_int_equal(1, atomic_load(&c.stopped));
  assert_int_equal(0, atomic_load(&c.leader_in_stopped));
  assert_int_equal(0, gauge(m, "one"));
  l3 = get_lease(ns, "one");
  assert_string_equal("", kcr_json_str(l3, "/spec/holderIdentity"));
  assert_int_equal(1, kcr_json_int(l3, "/spec/leaseDurationSeconds", -1));
  assert_int_equal(0, kcr_json_int(l3, "/spec/leaseTransitions", -1));
  assert_micro_time(kcr_json_str(l3, "/spec/renewTime"));

  cJSON_Delete(l1);
  cJSON_Delete(l2);
  cJSON_Delete(l3);
  kcr_leader_free(le);
  kcr_metrics_free(m);
  free(ns);
}

static void two_electors_never_lead_together(void **state)
{
  char *ns = itest_namespace(cl, "leader");
  struct cbs ca = {0}, cb = {0};
  kcr_leader *a = elector(ns, "two", "a", LEASE_MS, RENEW_MS, RETRY_MS, &ca, NULL);
  kcr_leader *b = elector(ns, "two", NULL, LEASE_MS, RENEW_MS, RETRY_MS, &cb, NULL);
  int first = -1, samples = 0, led = 0;
  cJSON *l;

  assert_int_equal(KCR_OK, kcr_leader_start(a));
  assert_int_equal(KCR_OK, kcr_leader_start(b));
  for(uint64_t t0 = kcr_time_mono_ms(); kcr_time_mono_ms() - t0 < 3000; samples++) {
    bool la = kcr_leader_is_leader(a), lb = kcr_leader_is_leader(b);
    assert_false(la && lb);
    if(la || lb) {
      led++;
      if(first < 0)
        first = la ? 0 : 1;
      assert_int_equal(first, la ? 0 : 1); /* no flapping either */
    }
    itest_sleep_ms(50);
  }
  assert_true(samples > 20);
  assert_true(first >= 0);
  assert_true(led > samples / 2);
  kcr_leader *winner = first == 0 ? a : b, *loser = first == 0 ? b : a;
  assert_true(kcr_leader_is_leader(winner));
  assert_false(kcr_leader_is_leader(loser));
  assert_false(kcr_leader_lost(a));
  assert_false(kcr_leader_lost(b));
  assert_int_equal(0, atomic_load(first == 0 ? &cb.started : &ca.started));
  l = get_lease(ns, "two");
  assert_string_equal(kcr_leader_identity(winner),
                      kcr_json_str(l, "/spec/holderIdentity"));
  cJSON_Delete(l);

  kcr_leader_free(loser);
  kcr_leader_free(winner);
  free(ns);
}

/* lease 4 s: a hand-over by release takes ~ one retry period; one by expiry
 * would take >= 3.8 s. */
static void stop_releases_to_successor_at_once(void **state)
{
  char *ns = itest_namespace(cl, "leader");
  struct cbs ca = {0}, cb = {0};
  kcr_leader *a = elector(ns, "three", "a", 4000, 3000, RETRY_MS, &ca, NULL);
  kcr_leader *b = elector(ns, "three", "b", 4000, 3000, RETRY_MS, &cb, NULL);
  uint64_t t0, took;
  cJSON *l;

  assert_int_equal(KCR_OK, kcr_leader_start(a));
  assert_true(kcr_leader_wait(a, 10000));
  assert_int_equal(KCR_OK, kcr_leader_start(b));
  itest_sleep_ms(3 * RETRY_MS); /* b sees a's lease and waits */
  assert_false(kcr_leader_wait(b, 1));

  t0 = kcr_time_mono_ms();
  kcr_leader_stop(a);
  assert_true(kcr_leader_wait(b, 10000));
  took = kcr_time_mono_ms() - t0;
  fprintf(stderr, "successor took over %llu ms after stop\n", (unsigned long long)took);
  assert_true(took < 2500);
  assert_int_equal(1, atomic_load(&ca.stopped));
  assert_false(kcr_leader_lost(a));
  l = get_lease(ns, "three");
  assert_string_equal("b", kcr_json_str(l, "/spec/holderIdentity"));
  assert_int_equal(1, kcr_json_int(l, "/spec/leaseTransitions", -1));
  assert_int_equal(4, kcr_json_int(l, "/spec/leaseDurationSeconds", -1));
  cJSON_Delete(l);

  kcr_leader_free(b);
  kcr_leader_free(a);
  free(ns);
}

static void overwritten_leader_loses_within_renew_deadline(void **state)
{
  char *ns = itest_namespace(cl, "leader");
  kcr_metrics *m = NULL;
  assert_int_equal(KCR_OK, kcr_metrics_new(NULL, &m, NULL));
  struct cbs c = {0};
  kcr_leader *le = elector(ns, "four", "victim", LEASE_MS, RENEW_MS, RETRY_MS, &c, m);
  char now[KCR_RFC3339_MICRO_LEN];
  struct timespec ts;
  uint64_t t0, took;
  cJSON *l;

  assert_int_equal(KCR_OK, kcr_leader_start(le));
  assert_true(kcr_leader_wait(le, 10000));

  clock_gettime(CLOCK_REALTIME, &ts);
  kcr_time_format_micro(&ts, now);
  t0 = kcr_time_mono_ms();
  write_lease(ns, "four", "intruder", now);
  took = wait_lost(le, 10000);
  fprintf(stderr, "lost %llu ms after the overwrite\n", (unsigned long long)took);
  assert_true(kcr_leader_lost(le));
  assert_true(kcr_time_mono_ms() - t0 < RENEW_MS + 1500);
  assert_false(kcr_leader_is_leader(le));
  assert_false(kcr_leader_wait(le, 1));
  assert_int_equal(1, atomic_load(&c.stopped));
  assert_int_equal(0, atomic_load(&c.leader_in_stopped));
  assert_int_equal(0, gauge(m, "four"));

  /* It does not fight back, and stop does not release what is not ours. */
  itest_sleep_ms(3 * RETRY_MS);
  kcr_leader_stop(le);
  assert_int_equal(1, atomic_load(&c.stopped));
  l = get_lease(ns, "four");
  assert_string_equal("intruder", kcr_json_str(l, "/spec/holderIdentity"));
  assert_int_equal(2, kcr_json_int(l, "/spec/leaseDurationSeconds", -1));
  cJSON_Delete(l);

  kcr_leader_free(le);
  kcr_metrics_free(m);
  free(ns);
}

/* Renewals refused by an admission policy: the leader keeps leading until
 * the renew deadline has passed since its last successful renewal, then
 * gives up; the failure is logged once. */
static void refused_renewals_lose_after_renew_deadline(void **state)
{
  char *ns = itest_namespace(cl, "leader");
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  struct cbs c = {0};
  kcr_leader *le = elector(ns, "frozen", "ice", LEASE_MS, RENEW_MS, RETRY_MS, &c, NULL);
  char pname[128];
  cJSON *pol, *bind, *l;
  time_t renew_s;
  long long renew_wall, lost_after;
  int failed, lost_logs;

  snprintf(pname, sizeof(pname), "kcr-itest-%s", ns);
  pol = itest_json(
      "{\"apiVersion\":\"admissionregistration.k8s.io/v1\","
      "\"kind\":\"ValidatingAdmissionPolicy\",\"metadata\":{\"name\":\"%s\"},"
      "\"spec\":{\"failurePolicy\":\"Fail\",\"matchConstraints\":{\"resourceRules\":[{"
      "\"apiGroups\":[\"coordination.k8s.io\"],\"apiVersions\":[\"v1\"],"
      "\"operations\":[\"UPDATE\"],\"resources\":[\"leases\"]}]},"
      "\"validations\":[{\"expression\":\"object.metadata.name != 'frozen'\","
      "\"message\":\"frozen by the test\",\"reason\":\"Forbidden\"}]}}",
      pname);
  bind = itest_json(
      "{\"apiVersion\":\"admissionregistration.k8s.io/v1\","
      "\"kind\":\"ValidatingAdmissionPolicyBinding\",\"metadata\":{\"name\":\"%s\"},"
      "\"spec\":{\"policyName\":\"%s\",\"validationActions\":[\"Deny\"],"
      "\"matchResources\":{\"namespaceSelector\":{\"matchLabels\":{"
      "\"kubernetes.io/metadata.name\":\"%s\"}}}}}",
      pname, pname, ns);

  assert_int_equal(KCR_OK, kcr_leader_start(le));
  assert_true(kcr_leader_wait(le, 10000));
  log_capture();
  itest_expect(KCR_OK, kcr_create(cl, &(struct kcr_ref){&vaps}, pol, NULL, NULL, &ei),
               &ei);
  itest_expect(KCR_OK, kcr_create(cl, &(struct kcr_ref){&vapbs}, bind, NULL, NULL, &ei),
               &ei);
  /* The policy takes effect within a few seconds; then renewals fail. */
  wait_lost(le, 20000);
  /* The refusal (403) is logged once however often it is retried. Under load
   * the last attempt may also time out at the deadline: another error,
   * logged once too. */
  failed = log_count_end("denied request: frozen by the test", &lost_logs,
                         "leader: lost the lease");
  assert_true(kcr_leader_lost(le));
  assert_int_equal(1, failed);
  assert_int_equal(1, lost_logs);
  assert_int_equal(1, atomic_load(&c.stopped));

  /* The last renewTime that got through is the leader's wall clock at the
   * start of its last successful attempt (give or take the GET of a slow
   * path: 100 ms); it gave up no earlier than renew deadline after it. */
  l = get_lease(ns, "frozen");
  assert_string_equal("ice", kcr_json_str(l, "/spec/holderIdentity"));
  const char *rt = kcr_json_str(l, "/spec/renewTime");
  assert_int_equal(KCR_OK, kcr_time_parse(rt, &renew_s));
  renew_wall = (long long)renew_s * 1000 + strtol(rt + 20, NULL, 10) / 1000;
  lost_after = atomic_load(&c.stopped_wall_ms) - renew_wall;
  fprintf(stderr, "gave up %lld ms after the last successful renewal\n", lost_after);
  assert_true(lost_after >= RENEW_MS - 100);
  assert_true(lost_after < RENEW_MS + 3000);
  cJSON_Delete(l);

  kcr_leader_free(le);
  itest_expect(KCR_OK,
               kcr_delete(cl, &(struct kcr_ref){&vapbs, NULL, pname}, NULL, NULL, &ei),
               &ei);
  itest_expect(KCR_OK,
               kcr_delete(cl, &(struct kcr_ref){&vaps, NULL, pname}, NULL, NULL, &ei),
               &ei);
  kcr_errinfo_cleanup(&ei);
  cJSON_Delete(pol);
  cJSON_Delete(bind);
  free(ns);
}

/* Whoever sees kcr_leader_is_leader() true also finds "acquired the lease"
 * already logged: the record is written before the flag is published. The
 * log goes to a pipe that the test fills after the first record, so the
 * record about the acquisition blocks in write(2); meanwhile the elector
 * must not report itself leader. */
static void acquired_is_logged_before_is_leader(void **state)
{
  char *ns = itest_namespace(cl, "leader");
  struct cbs c = {0};
  kcr_leader *le = elector(ns, "six", "scribe", LEASE_MS, RENEW_MS, RETRY_MS, &c, NULL);
  char buf[65536], fill[4096], path[64];
  size_t have = 0, tildes = 0;
  bool logged_first = true, led;
  int p[2], w2;
  uint64_t t;
  ssize_t r;

  assert_int_equal(0, pipe(p));
  assert_int_equal(0, fcntl(p[0], F_SETFL, O_NONBLOCK));
  kcr_log_set_fd(p[1]);
  assert_int_equal(KCR_OK, kcr_leader_start(le));
  /* Wait for the first record, then fill the pipe through a second,
   * non-blocking description of it: the logger's next write blocks. */
  for(t = kcr_time_mono_ms();
      !memchr(buf, '\n', have) && kcr_time_mono_ms() - t < 10000;) {
    r = read(p[0], buf + have, sizeof(buf) - 1 - have);
    if(r > 0)
      have += (size_t)r;
    else
      itest_sleep_ms(1);
  }
  buf[have] = '\0';
  assert_non_null(strstr(buf, "leader: attempting to acquire the lease"));
  snprintf(path, sizeof(path), "/proc/self/fd/%d", p[1]);
  w2 = open(path, O_WRONLY | O_NONBLOCK);
  assert_true(w2 >= 0);
  memset(fill, '~', sizeof(fill));
  while((r = write(w2, fill, sizeof(fill))) > 0) /* big chunks, then the rest */
    tildes += (size_t)r;
  while(write(w2, "~", 1) == 1)
    tildes++;
  close(w2);
  /* Records written before is_leader() turned true lie ahead of the last
   * filler byte (a record may land between fill chunks); one blocked
   * behind the filler comes after it. */
  for(t = kcr_time_mono_ms(); kcr_time_mono_ms() - t < 1000; itest_sleep_ms(5)) {
    if(!kcr_leader_is_leader(le))
      continue;
    for(t = kcr_time_mono_ms();
        tildes > 0 && have < sizeof(buf) - 1 && kcr_time_mono_ms() - t < 10000;) {
      if(read(p[0], buf + have, 1) != 1)
        itest_sleep_ms(1);
      else if(buf[have] == '~')
        tildes--;
      else
        have++;
    }
    buf[have] = '\0';
    logged_first = strstr(buf, "leader: acquired the lease") != NULL;
    break;
  }
  /* Drain: the logger goes on and the elector leads. */
  kcr_log_set_fd(2);
  for(t = kcr_time_mono_ms();
      !kcr_leader_is_leader(le) && kcr_time_mono_ms() - t < 10000;) {
    while(read(p[0], buf, sizeof(buf)) > 0)
      ;
    itest_sleep_ms(5);
  }
  led = kcr_leader_is_leader(le);
  kcr_leader_stop(le);
  while(read(p[0], buf, sizeof(buf)) > 0)
    ;
  assert_true(logged_first);
  assert_true(led);
  kcr_leader_free(le);
  close(p[0]);
  close(p[1]);
  free(ns);
}

/* The foreign holder writes renewTimes from 2001: only their change counts. */
static void live_foreign_holder_is_never_taken(void **state)
{
  char *ns = itest_namespace(cl, "leader");
  struct cbs c = {0};
  kcr_leader *le = elector(ns, "five", "me", LEASE_MS, RENEW_MS, RETRY_MS, &c, NULL);
  char rt[64];
  uint64_t t_last = 0, took;
  int waiting, acquired;
  cJSON *l;

  create_lease(ns, "five",
               "{\"holderIdentity\":\"foreign\",\"leaseDurationSeconds\":2,"
               "\"acquireTime\":\"2001-01-01T00:00:00.000000Z\","
               "\"renewTime\":\"2001-01-01T00:00:00.000000Z\",\"leaseTransitions\":3}");
  log_capture();
  assert_int_equal(KCR_OK, kcr_leader_start(le));
  for(int round = 1; round <= 8; round++) { /* 4 s of renewals, 2x the lease */
    for(int i = 0; i < 10; i++) {
      assert_false(kcr_leader_is_leader(le));
      itest_sleep_ms(50);
    }
    snprintf(rt, sizeof(rt), "2001-01-01T00:00:00.%06dZ", round);
    t_last = kcr_time_mono_ms();
    write_lease(ns, "five", "foreign", rt);
  }
  /* Silent from now on: taken no earlier than 2 s after the last change. */
  while(!kcr_leader_is_leader(le) && kcr_time_mono_ms() - t_last < 15000)
    itest_sleep_ms(10);
  took = kcr_time_mono_ms() - t_last;
  waiting = log_count_end("leader: lease held by another identity; waiting", &acquired,
                          "leader: acquired the lease");
  fprintf(stderr, "taken %llu ms after the last foreign renewal\n",
          (unsigned long long)took);
  assert_true(kcr_leader_is_leader(le));
  assert_true(took >= LEASE_MS);
  assert_true(took < LEASE_MS + 4000);
  assert_int_equal(1, waiting);
  assert_int_equal(1, acquired);
  l = get_lease(ns, "five");
  assert_string_equal("me", kcr_json_str(l, "/spec/holderIdentity"));
  assert_int_equal(4, kcr_json_int(l, "/spec/leaseTransitions", -1));
  assert_micro_time(kcr_json_str(l, "/spec/acquireTime"));
  cJSON_Delete(l);

  kcr_leader_free(le);
  free(ns);
}

/* Without leaseDurationSeconds (or times) the record is held for our own
 * lease duration from when we first saw it. */
static void incomplete_record_expires_after_own_lease_duration(void **state)
{
  char *ns = itest_namespace(cl, "leader");
  struct cbs c = {0};
  kcr_leader *le = elector(ns, "six", "me", LEASE_MS, RENEW_MS, RETRY_MS, &c, NULL);
  uint64_t t0, took;
  cJSON *l;

  create_lease(ns, "six", "{\"holderIdentity\":\"ghost\"}");
  t0 = kcr_time_mono_ms();
  assert_int_equal(KCR_OK, kcr_leader_start(le));
  assert_true(kcr_leader_wait(le, 15000));
  took = kcr_time_mono_ms() - t0;
  fprintf(stderr, "incomplete record taken after %llu ms\n", (unsigned long long)took);
  assert_true(took >= LEASE_MS);
  assert_true(took < LEASE_MS + 4000);
  l = get_lease(ns, "six");
  assert_string_equal("me", kcr_json_str(l, "/spec/holderIdentity"));
  assert_int_equal(1, kcr_json_int(l, "/spec/leaseTransitions", -1));
  assert_int_equal(2, kcr_json_int(l, "/spec/leaseDurationSeconds", -1));
  assert_micro_time(kcr_json_str(l, "/spec/acquireTime"));
  cJSON_Delete(l);

  kcr_leader_free(le);
  free(ns);
}

/* The lease's namespace does not exist yet: create answers 404; logged once,
 * retried every retry period, acquired once the namespace appears. */
static void api_errors_are_logged_once_and_retried(void **state)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  struct cbs c = {0};
  char ns[64];
  kcr_leader *le;
  int failed, acquired;
  cJSON *nso;

  snprintf(ns, sizeof(ns), "kcr-leader-late-%05u",
           (unsigned)(kcr_time_mono_ns() % 100000));
  le = elector(ns, "seven", "me", LEASE_MS, RENEW_MS, RETRY_MS, &c, NULL);
  log_capture();
  assert_int_equal(KCR_OK, kcr_leader_start(le));
  assert_false(kcr_leader_wait(le, 8 * RETRY_MS)); /* several failed attempts */
  nso = itest_json("{\"apiVersion\":\"v1\",\"kind\":\"Namespace\","
                   "\"metadata\":{\"name\":\"%s\"}}",
                   ns);
  itest_expect(KCR_OK,
               kcr_create(cl, &(struct kcr_ref){&itest_namespaces}, nso, NULL, NULL, &ei),
               &ei);
  assert_true(kcr_leader_wait(le, 10000));
  failed =
      log_count_end("op=create err=ENOTFOUND", &acquired, "leader: acquired the lease");
  assert_int_equal(1, failed);
  assert_int_equal(1, acquired);

  kcr_leader_free(le);
  cJSON_Delete(nso);
  kcr_errinfo_cleanup(&ei);
}

/* Waiting 5-11 s between attempts; stop cuts the wait short. */
static void stop_is_prompt_during_retry_wait(void **state)
{
  char *ns = itest_namespace(cl, "leader");
  struct cbs c = {0};
  kcr_leader *le = elector(ns, "eight", "me", 15000, 10000, 5000, &c, NULL);
  uint64_t t0, took;

  create_lease(ns, "eight",
               "{\"holderIdentity\":\"foreign\",\"leaseDurationSeconds\":60}");
  assert_int_equal(KCR_OK, kcr_leader_start(le));
  itest_sleep_ms(500);
  t0 = kcr_time_mono_ms();
  kcr_leader_stop(le);
  took = kcr_time_mono_ms() - t0;
  fprintf(stderr, "stop took %llu ms\n", (unsigned long long)took);
  assert_true(took < 1000);
  assert_false(kcr_leader_wait(le, UINT64_MAX)); /* stopped: returns at once */
  assert_int_equal(0, atomic_load(&c.started));
  assert_int_equal(0, atomic_load(&c.stopped));
  kcr_leader_free(le);
  free(ns);
}

/* keep_lease_on_stop: stop leaves the lease to expire. */
static void keep_on_stop_leaves_lease_to_expire(void **state)
{
  char *ns = itest_namespace(cl, "leader");
  struct cbs c = {0};
  kcr_leader *le;
  struct kcr_leader_opts o = {.client = cl,
                              .ns = ns,
                              .name = "nine",
                              .identity = "keeper",
                              .lease_duration_ms = LEASE_MS,
                              .renew_deadline_ms = RENEW_MS,
                              .retry_period_ms = RETRY_MS,
                              .on_stopped_leading = on_stopped,
                              .ud = &c,
                              .keep_lease_on_stop = true};
  cJSON *l;

  assert_int_equal(KCR_OK, kcr_leader_new(&o, &le, NULL));
  c.le = le;
  assert_int_equal(KCR_OK, kcr_leader_start(le));
  assert_true(kcr_leader_wait(le, 10000));
  kcr_leader_stop(le);
  assert_int_equal(1, atomic_load(&c.stopped));
  l = get_lease(ns, "nine");
  assert_string_equal("keeper", kcr_json_str(l, "/spec/holderIdentity"));
  assert_int_equal(2, kcr_json_int(l, "/spec/leaseDurationSeconds", -1));
  cJSON_Delete(l);
  kcr_leader_free(le);
  free(ns);
}

static void stop_in_started(void *ud)
{
  on_started(ud);
  kcr_leader_stop(((struct cbs *)ud)->le); /* asks, does not wait for itself */
}

/* kcr_leader_stop from on_started_leading: the elector steps down and
 * releases on its own thread. */
static void stop_from_a_callback(void **state)
{
  char *ns = itest_namespace(cl, "leader");
  struct cbs c = {0};
  struct kcr_leader_opts o = {.client = cl,
                              .ns = ns,
                              .name = "ten",
                              .identity = "quitter",
                              .lease_duration_ms = LEASE_MS,
                              .renew_deadline_ms = RENEW_MS,
                              .retry_period_ms = RETRY_MS,
                              .on_started_leading = stop_in_started,
                              .on_stopped_leading = on_stopped,
                              .ud = &c};
  kcr_leader *le;
  cJSON *l;

  assert_int_equal(KCR_OK, kcr_leader_new(&o, &le, NULL));
  c.le = le;
  assert_int_equal(KCR_OK, kcr_leader_start(le));
  for(int i = 0; i < 500 && atomic_load(&c.stopped) == 0; i++)
    itest_sleep_ms(20);
  kcr_leader_stop(le); /* joins: the release is done */
  assert_int_equal(1, atomic_load(&c.started));
  assert_int_equal(1, atomic_load(&c.stopped));
  assert_false(kcr_leader_is_leader(le));
  assert_false(kcr_leader_lost(le));
  l = get_lease(ns, "ten");
  assert_string_equal("", kcr_json_str(l, "/spec/holderIdentity"));
  cJSON_Delete(l);
  kcr_leader_free(le);
  free(ns);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(new_checks_options),
      cmocka_unit_test(acquires_fresh_lease_and_renews),
      cmocka_unit_test(two_electors_never_lead_together),
      cmocka_unit_test(stop_releases_to_successor_at_once),
      cmocka_unit_test(overwritten_leader_loses_within_renew_deadline),
      cmocka_unit_test(refused_renewals_lose_after_renew_deadline),
      cmocka_unit_test(live_foreign_holder_is_never_taken),
      cmocka_unit_test(acquired_is_logged_before_is_leader),
      cmocka_unit_test(incomplete_record_expires_after_own_lease_duration),
      cmocka_unit_test(api_errors_are_logged_once_and_retried),
      cmocka_unit_test(stop_is_prompt_during_retry_wait),
      cmocka_unit_test(keep_on_stop_leaves_lease_to_expire),
      cmocka_unit_test(stop_from_a_callback),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
