/* The manager end to end, with examples/hello run as real processes against
 * the control plane: it reconciles, serves /metrics (scraped and parsed),
 * /healthz and /readyz, exits 0 on SIGTERM; with two replicas and leader
 * election exactly one reconciles, SIGKILL hands over within the lease
 * duration and SIGTERM hands over at once (the lease is released). And
 * examples/first, the controller of docs/getting-started.md, does what the
 * guide says it does. */
#include <arpa/inet.h>
#include <curl/curl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "itest.h"

ITEST_CLIENT_FIXTURE

struct proc {
  pid_t pid;
  int metrics_port;
  char id[32];
};

static int free_port(void)
{
  struct sockaddr_in a = {.sin_family = AF_INET,
                          .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof(a);
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  assert_true(fd >= 0);
  assert_int_equal(0, bind(fd, (struct sockaddr *)&a, sizeof(a)));
  assert_int_equal(0, getsockname(fd, (struct sockaddr *)&a, &len));
  close(fd);
  return ntohs(a.sin_port);
}

static void spawn(struct proc *p, const char *id, const char *ns, bool elect)
{
  char met[64], lns[128];
  const char *bin = itest_env("KCR_HELLO_BIN");
  p->metrics_port = free_port();
  snprintf(p->id, sizeof(p->id), "%s", id);
  snprintf(met, sizeof(met), "127.0.0.1:%d", p->metrics_port);
  snprintf(lns, sizeof(lns), "%s", ns);
  p->pid = fork();
  assert_true(p->pid >= 0);
  if(p->pid == 0) {
    char *argv[24];
    int n = 0;
    argv[n++] = (char *)bin;
    argv[n++] = "--namespace";
    argv[n++] = lns;
    argv[n++] = "--identity";
    argv[n++] = p->id;
    argv[n++] = "--metrics-bind-address";
    argv[n++] = met;
    argv[n++] = "--health-probe-bind-address";
    argv[n++] = met;
    if(elect) {
      argv[n++] = "--leader-elect";
      argv[n++] = "--leader-election-namespace";
      argv[n++] = lns;
      argv[n++] = "--leader-elect-lease-duration";
      argv[n++] = "4s";
      argv[n++] = "--leader-elect-renew-deadline";
      argv[n++] = "3s";
      argv[n++] = "--leader-elect-retry-period";
      argv[n++] = "500ms";
    }
    argv[n] = NULL;
    execv(bin, argv);
    _exit(127);
  }
}

/* Value of one series ("name{labels}" exactly as exposed) or -1. */
static double metric(int port, const char *series)
{
  struct kcr_buf b = KCR_BUF_INIT;
  double v = -1;
  if(itest_http_get(port, "/metrics", &b) == 200) {
    size_t n = strlen(series);
    for(const char *l = kcr_buf_str(&b); l && *l;
        l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
      if(!strncmp(l, series, n) && l[n] == ' ') {
        v = strtod(l + n + 1, NULL);
        break;
      }
    }
  }
  kcr_buf_cleanup(&b);
  return v;
}

static void wait_ready(struct proc *p)
{
  struct kcr_buf b = KCR_BUF_INIT;
  long code = 0;
  for(int i = 0;
      i < 300 && (code = itest_http_get(p->metrics_port, "/readyz", &b)) != 200; i++)
    itest_sleep_ms(100);
  kcr_buf_cleanup(&b);
  assert_int_equal(200, code);
}

static int stop(struct proc *p, int sig)
{
  int st = 0;
  kill(p->pid, sig);
  assert_int_equal(p->pid, waitpid(p->pid, &st, 0));
  p->pid = 0;
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static void greet_me(const char *ns, const char *name)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  cJSON *o = itest_json("{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":"
                        "{\"name\":\"%s\",\"labels\":{\"hello.kcr.io/greet\":\"true\"}}}",
                        name);
  itest_expect(
      KCR_OK,
      kcr_create(cl, &(struct kcr_ref){&itest_configmaps, ns}, o, NULL, NULL, &ei), &ei);
  cJSON_Delete(o);
  kcr_errinfo_cleanup(&ei);
}

/* Waits until the ConfigMap is greeted; returns the greeter (caller frees). */
static char *wait_greeted(const char *ns, const char *name, long timeout_ms)
{
  char want[128], *who = NULL;
  snprintf(want, sizeof(want), "Hello, %s!", name);
  for(long waited = 0; waited <= timeout_ms && !who; waited += 100) {
    cJSON *o = NULL;
    if(!kcr_get(cl, &(struct kcr_ref){&itest_configmaps, ns, name}, &o, NULL)) {
      const char *g = kcr_json_str(o, "/data/greeting");
      if(g && !strcmp(g, want))
        who = strdup(kcr_json_str(o, "/data/greeter"));
    }
    cJSON_Delete(o);
    if(!who)
      itest_sleep_ms(100);
  }
  return who;
}

static void reconciles_serves_metrics_and_stops_cleanly(void **state)
{
  char *ns = itest_namespace(cl, "hello");
  struct proc p;
  struct kcr_buf b = KCR_BUF_INIT;
  spawn(&p, "solo", ns, false);
  wait_ready(&p);
  assert_int_equal(200, itest_http_get(p.metrics_port, "/healthz", &b));

  greet_me(ns, "world");
  char *who = wait_greeted(ns, "world", 20000);
  assert_non_null(who);
  assert_string_equal("solo", who);
  free(who);

  /* An unlabelled ConfigMap is not the controller's business. */
  cJSON *o = itest_json("{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\","
                        "\"metadata\":{\"name\":\"quiet\"}}");
  itest_expect(
      KCR_OK,
      kcr_create(cl, &(struct kcr_ref){&itest_configmaps, ns}, o, NULL, NULL, NULL),
      NULL);
  cJSON_Delete(o);

  /* Metrics, scraped and parsed. */
  assert_true(metric(p.metrics_port,
                     "controller_runtime_reconcile_total{controller=\"hello\","
                     "result=\"success\"}") >= 1);
  assert_true(metric(p.metrics_port, "workqueue_adds_total{name=\"hello\"}") >= 1);
  /* its apply (a request counted when it ends: the caches' streaming
   * lists are watches still running) */
  assert_true(metric(p.metrics_port,
                     "rest_client_requests_total{code=\"200\",method=\"PATCH\"}") >= 1);
  assert_true(metric(p.metrics_port,
                     "controller_runtime_active_workers{controller=\"hello\"}") == 0);
  assert_true(
      metric(p.metrics_port,
             "controller_runtime_reconcile_time_seconds_count{controller=\"hello\"}") >=
      1);
  assert_true(metric(p.metrics_port, "kcr_informer_objects{informer=\"configmaps\"}") ==
              1);
  assert_int_equal(0, stop(&p, SIGTERM));
  kcr_buf_cleanup(&b);
  free(ns);
}

/* Labels ConfigMap name of ns with hello.kcr.io/name=who (created with
 * hello.kcr.io/greet=true when absent). */
static void name_me(const char *ns, const char *name, const char *who)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  char body[256];
  snprintf(body, sizeof(body),
           "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"%s\","
           "\"labels\":{\"hello.kcr.io/greet\":\"true\",\"hello.kcr.io/name\":\"%s\"}}}",
           name, who);
  itest_expect(KCR_OK,
               kcr_patch(cl, &(struct kcr_ref){&itest_configmaps, ns, name},
                         &(struct kcr_patch_opts){KCR_PATCH_APPLY,
                                                  .field_manager = "test", .force = true},
                         body, strlen(body), NULL, &ei),
               &ei);
  kcr_errinfo_cleanup(&ei);
}

/* Whether ConfigMap name says "Hello, <who>!" and greeted <count>. */
static bool greets(const char *ns, const char *name, const char *who, const char *count)
{
  char want[128];
  cJSON *o = NULL;
  bool ok = false;
  snprintf(want, sizeof(want), "Hello, %s!", who);
  if(!kcr_get(cl, &(struct kcr_ref){&itest_configmaps, ns, name}, &o, NULL)) {
    const char *g = kcr_json_str(o, "/data/greeting"),
               *c = kcr_json_str(o, "/data/greeted");
    ok = g && c && !strcmp(g, want) && !strcmp(c, count);
  }
  cJSON_Delete(o);
  return ok;
}

static bool wait_greets(const char *ns, const char *name, const char *who,
                        const char *count)
{
  for(long waited = 0; waited <= 20000; waited += 100) {
    if(greets(ns, name, who, count))
      return true;
    itest_sleep_ms(100);
  }
  return false;
}

/* examples/hello greets the name of its label hello.kcr.io/name (read with
 * kcr_obj_label) and counts the ConfigMaps that greet it (the label index,
 * and a watches source mapping each ConfigMap to its group). Relabelling
 * one wakes its old group too: the map function sees the old object of an
 * update (issue 28, item 2), so the one left behind counts 1 again. */
static void greets_by_the_name_label_and_counts_its_group(void **state)
{
  char *ns = itest_namespace(cl, "hello-names");
  struct proc p;
  spawn(&p, "solo", ns, false);
  wait_ready(&p);
  name_me(ns, "one", "ada");
  assert_true(wait_greets(ns, "one", "ada", "1"));
  name_me(ns, "two", "ada");
  assert_true(wait_greets(ns, "two", "ada", "2"));
  assert_true(wait_greets(ns, "one", "ada", "2"));
  name_me(ns, "two", "bob");
  assert_true(wait_greets(ns, "two", "bob", "1"));
  assert_true(wait_greets(ns, "one", "ada", "1"));
  assert_int_equal(0, stop(&p, SIGTERM));
  free(ns);
}

static int leader_of(struct proc *ps, int n)
{
  int leader = -1, count = 0;
  for(int i = 0; i < n; i++) {
    if(!ps[i].pid)
      continue;
    if(metric(ps[i].metrics_port,
              "leader_election_master_status{name=\"hello-leader\"}") == 1) {
      leader = i;
      count++;
    }
  }
  assert_true(count <= 1);
  return count ? leader : -1;
}

static int wait_leader(struct proc *ps, int n, long timeout_ms, long *took_ms)
{
  uint64_t t0 = kcr_time_mono_ms();
  int l = -1;
  while((l = leader_of(ps, n)) < 0 && (long)(kcr_time_mono_ms() - t0) < timeout_ms)
    itest_sleep_ms(50);
  if(took_ms)
    *took_ms = (long)(kcr_time_mono_ms() - t0);
  return l;
}

static void one_replica_leads_and_hands_over(void **state)
{
  char *ns = itest_namespace(cl, "lease");
  struct proc ps[3] = {{0}};
  long took;

  spawn(&ps[0], "replica-a", ns, true);
  spawn(&ps[1], "replica-b", ns, true);
  wait_ready(&ps[0]);
  wait_ready(&ps[1]);
  int l = wait_leader(ps, 2, 20000, NULL);
  assert_true(l >= 0);
  int other = 1 - l;

  greet_me(ns, "first");
  char *who = wait_greeted(ns, "first", 20000);
  assert_non_null(who);
  assert_string_equal(ps[l].id, who);
  free(who);
  /* The standby reconciled nothing. */
  assert_true(metric(ps[other].metrics_port,
                     "controller_runtime_reconcile_total{controller="
                     "\"hello\",result=\"success\"}") == 0);

  /* SIGKILL: no release; the standby takes over once the lease expires
   * (4 s on its own clock, + one retry period). */
  uint64_t t0 = kcr_time_mono_ms();
  assert_int_equal(128 + SIGKILL, stop(&ps[l], SIGKILL));
  int l2 = wait_leader(ps, 2, 20000, NULL);
  took = (long)(kcr_time_mono_ms() - t0);
  assert_int_equal(other, l2);
  assert_true(took >= 1500); /* it had to wait for expiry */
  assert_true(took <= 9000); /* lease 4 s + retry 0.5 s + slack for CI */
  greet_me(ns, "second");
  who = wait_greeted(ns, "second", 20000);
  assert_non_null(who);
  assert_string_equal(ps[other].id, who);
  free(who);

  /* SIGTERM: the leader releases the lease, a fresh standby takes it at once. */
  spawn(&ps[2], "replica-c", ns, true);
  wait_ready(&ps[2]);
  assert_int_equal(other, leader_of(ps, 3));
  t0 = kcr_time_mono_ms();
  assert_int_equal(0, stop(&ps[other], SIGTERM));
  int l3 = wait_leader(ps, 3, 20000, NULL);
  took = (long)(kcr_time_mono_ms() - t0);
  assert_int_equal(2, l3);
  assert_true(took < 3000); /* well under the 4 s lease */
  assert_int_equal(0, stop(&ps[2], SIGTERM));
  free(ns);
}

/* The data value of key k of ConfigMap ns/name (caller frees), or NULL. */
static char *data_of(const char *ns, const char *name, const char *k)
{
  cJSON *o = NULL;
  char *v = NULL;
  if(!kcr_get(cl, &(struct kcr_ref){&itest_configmaps, ns, name}, &o, NULL)) {
    const char *s = kcr_json_member_str(kcr_json_at(o, "/data"), k);
    v = s ? strdup(s) : NULL;
  }
  cJSON_Delete(o);
  return v;
}

static bool wait_data(const char *ns, const char *name, const char *k, const char *want)
{
  for(int i = 0; i < 300; i++) {
    char *v = data_of(ns, name, k);
    bool same = v && !strcmp(v, want);
    free(v);
    if(same)
      return true;
    itest_sleep_ms(100);
  }
  return false;
}

static void the_getting_started_controller_copies_ping_to_pong(void **state)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  char *ns = itest_namespace(cl, "first");
  const char *bin = itest_env("KCR_FIRST_BIN");
  cJSON *o = itest_json("{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":"
                        "{\"name\":\"echo\",\"labels\":{\"first.kcr.io/echo\":\"true\"}},"
                        "\"data\":{\"ping\":\"one\"}}");
  const char *mp = "{\"data\":{\"ping\":\"two\"}}";
  struct proc p = {0};

  itest_expect(
      KCR_OK,
      kcr_create(cl, &(struct kcr_ref){&itest_configmaps, ns}, o, NULL, NULL, &ei), &ei);
  p.pid = fork();
  assert_true(p.pid >= 0);
  if(p.pid == 0) {
    execl(bin, bin, (char *)NULL);
    _exit(127);
  }
  assert_true(wait_data(ns, "echo", "pong", "one"));
  itest_expect(KCR_OK,
               kcr_patch(cl, &(struct kcr_ref){&itest_configmaps, ns, "echo"},
                         &(struct kcr_patch_opts){KCR_PATCH_MERGE}, mp, strlen(mp), NULL,
                         &ei),
               &ei);
  assert_true(wait_data(ns, "echo", "pong", "two"));
  /* Deleted: the reconcile of its key finds nothing in the cache, which
   * must cost nothing (regression: the read's error message leaked, and
   * LeakSanitizer made the sanitized build exit non-zero). */
  itest_expect(
      KCR_OK,
      kcr_delete(cl, &(struct kcr_ref){&itest_configmaps, ns, "echo"}, NULL, NULL, &ei),
      &ei);
  itest_sleep_ms(1000);
  assert_int_equal(0, stop(&p, SIGTERM));
  cJSON_Delete(o);
  kcr_errinfo_cleanup(&ei);
  itest_namespace_drop(cl, ns);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(reconciles_serves_metrics_and_stops_cleanly),
      cmocka_unit_test(greets_by_the_name_label_and_counts_its_group),
      cmocka_unit_test(one_replica_leads_and_hands_over),
      cmocka_unit_test(the_getting_started_controller_copies_ping_to_pong),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
