/* chaosproxy against the real apiserver: every fault kind reaches a libkcr
 * client as the error it stands for (429 and 503 retried after Retry-After,
 * 500/504 server errors, a reset or truncated body a transport error, a
 * garbled body a parse error, a slow drip a timeout, a cut watch a
 * transport error mid-stream), rules select by verb, resource and agent,
 * a bad rules file keeps the rules in effect, the client's identity (a
 * certificate, re-signed; a token, passed on) reaches the apiserver, and
 * the proxy's counts equal what the client observed.
 *
 * Runs under tools/controlplane/start ($KUBECONFIG, $KCR_CONTROLPLANE_DIR,
 * $KCR_APISERVER_URL) with $KCR_CHAOSPROXY_BIN (tests/chaos/CMakeLists.txt). */
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "itest.h"
#include "kcr/watch.h"

extern char **environ;

static struct {
  pid_t pid;
  int port, mport;
  char dir[256], rules[320], ready[320], log[320];
  kcr_client *admin;
  char *ns;
} px;

/* Responses the test clients observed, by code (0: no answer). */
static atomic_int seen[600];

static void observe(const char *method, long code, double secs, void *ud)
{
  if(code >= 0 && code < 600)
    atomic_fetch_add(&seen[code], 1);
}

static void write_file(const char *path, const char *text)
{
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(text, f);
  assert_int_equal(0, fclose(f));
}

static size_t sink(char *p, size_t sz, size_t n, void *ud)
{
  return kcr_buf_append(ud, p, sz * n) ? 0 : sz * n;
}

/* The sum of the proxy's series of name that carry every label pair in
 * labels (space separated, e.g. "agent=\"chaostest\" fault=\"reset\""). */
static long metric(const char *name, const char *labels)
{
  struct kcr_buf url = KCR_BUF_INIT, out = KCR_BUF_INIT;
  CURL *h = curl_easy_init();
  long sum = 0;
  char *save = NULL;

  kcr_buf_printf(&url, "http://127.0.0.1:%d/metrics", px.mport);
  curl_easy_setopt(h, CURLOPT_URL, url.ptr);
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, sink);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, &out);
  assert_int_equal(CURLE_OK, curl_easy_perform(h));
  curl_easy_cleanup(h);
  assert_non_null(out.ptr);
  for(char *line = strtok_r(out.ptr, "\n", &save); line;
      line = strtok_r(NULL, "\n", &save)) {
    size_t n = strlen(name);
    char *sp = strrchr(line, ' ');
    bool all = true;
    if(line[0] == '#' || strncmp(line, name, n) || (line[n] != '{' && line[n] != ' ') ||
       !sp)
      continue;
    if(labels) {
      char want[256], *ws = NULL;
      snprintf(want, sizeof(want), "%s", labels);
      for(char *w = strtok_r(want, " ", &ws); w && all; w = strtok_r(NULL, " ", &ws))
        all = strstr(line, w) && strstr(line, w) < sp;
    }
    if(all)
      sum += strtol(sp + 1, NULL, 10);
  }
  kcr_buf_cleanup(&url);
  kcr_buf_cleanup(&out);
  return sum;
}

static long injected(const char *fault)
{
  char l[96];
  snprintf(l, sizeof(l), "agent=\"chaostest\" fault=\"%s\"", fault);
  return metric("chaosproxy_injected_total", l);
}

/* Puts rules in effect: writes the file, SIGHUP, waits for the (re)load. */
static void set_rules_expect(const char *text, const char *result)
{
  char l[48];
  snprintf(l, sizeof(l), "result=\"%s\"", result);
  long before = metric("chaosproxy_rules_loads_total", l);
  write_file(px.rules, text);
  assert_int_equal(0, kill(px.pid, SIGHUP));
  for(int i = 0; i < 100 && metric("chaosproxy_rules_loads_total", l) == before; i++)
    itest_sleep_ms(50);
  assert_int_equal(before + 1, metric("chaosproxy_rules_loads_total", l));
}

static void set_rules(const char *text) { set_rules_expect(text, "ok"); }

/* A kubeconfig for the proxy with the given user stanza (YAML, indented). */
static char *proxy_kubeconfig(const char *name, const char *user)
{
  char *path = NULL, *text = NULL;
  const char *pki = itest_env("KCR_CONTROLPLANE_DIR");
  assert_true(asprintf(&path, "%s/%s.kubeconfig", px.dir, name) > 0);
  assert_true(asprintf(&text,
                       "apiVersion: v1\nkind: Config\n"
                       "clusters:\n- name: p\n  cluster:\n"
                       "    server: https://127.0.0.1:%d\n"
                       "    certificate-authority: %s/pki/ca.crt\n"
                       "users:\n- name: u\n  user:\n%s\n"
                       "contexts:\n- name: p\n  context: {cluster: p, user: u}\n"
                       "current-context: p\n",
                       px.port, pki, user) > 0);
  write_file(path, text);
  free(text);
  return path;
}

/* A fresh client through the proxy (no kept connection), as the admin. */
static kcr_client *client_opts(uint64_t timeout_ms, int max_retries)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  char *user = NULL, *path;
  kcr_config *cfg = NULL;
  kcr_client *c = NULL;
  const char *dir = itest_env("KCR_CONTROLPLANE_DIR");

  assert_true(asprintf(&user,
                       "    client-certificate: %s/pki/admin.crt\n"
                       "    client-key: %s/pki/admin.key",
                       dir, dir) > 0);
  path = proxy_kubeconfig("admin", user);
  itest_expect(KCR_OK,
               kcr_config_load(&(struct kcr_config_opts){.kubeconfig = path}, &cfg, &ei),
               &ei);
  itest_expect(KCR_OK,
               kcr_client_new(&(struct kcr_client_opts){.config = cfg,
                                                        .user_agent = "chaostest/1",
                                                        .timeout_ms = timeout_ms,
                                                        .max_retries = max_retries,
                                                        .observe = observe},
                              &c, &ei),
               &ei);
  kcr_config_free(cfg);
  free(user);
  free(path);
  kcr_errinfo_cleanup(&ei);
  return c;
}

static kcr_client *client(void) { return client_opts(0, 0); }

static kcr_err get_cm(kcr_client *c, struct kcr_errinfo *ei)
{
  cJSON *obj = NULL;
  kcr_err rc = kcr_get(c, &(struct kcr_ref){&itest_configmaps, px.ns, "cm"}, &obj, ei);
  if(!rc)
    assert_string_equal("cm", kcr_json_str(obj, "/metadata/name"));
  cJSON_Delete(obj);
  return rc;
}

static void start_proxy(void)
{
  posix_spawn_file_actions_t fa;
  const char *dir = itest_env("KCR_CONTROLPLANE_DIR");
  char *ca = NULL, *key = NULL;
  char *argv[] = {(char *)itest_env("KCR_CHAOSPROXY_BIN"),
                  "--upstream",
                  (char *)itest_env("KCR_APISERVER_URL"),
                  "--ca-cert",
                  NULL,
                  "--ca-key",
                  NULL,
                  "--rules",
                  px.rules,
                  "--ready-file",
                  px.ready,
                  "--seed",
                  "7",
                  "--zap-log-level",
                  "debug",
                  NULL};
  FILE *f;

  assert_true(asprintf(&ca, "%s/pki/ca.crt", dir) > 0 &&
              asprintf(&key, "%s/pki/ca.key", dir) > 0);
  argv[4] = ca;
  argv[6] = key;
  write_file(px.rules, "");
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, px.log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  assert_int_equal(0, posix_spawn(&px.pid, argv[0], &fa, NULL, argv, environ));
  posix_spawn_file_actions_destroy(&fa);
  for(int i = 0; i < 200 && access(px.ready, R_OK); i++)
    itest_sleep_ms(50);
  f = fopen(px.ready, "r");
  assert_non_null(f);
  assert_int_equal(2, fscanf(f, "proxy_port=%d\nmetrics_port=%d", &px.port, &px.mport));
  fclose(f);
  free(ca);
  free(key);
}

static int setup(void **state)
{
  cJSON *cm;
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  struct kcr_buf data = KCR_BUF_INIT;

  snprintf(px.dir, sizeof(px.dir), "%s/kcr-chaosproxy-XXXXXX",
           getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
  assert_non_null(mkdtemp(px.dir));
  snprintf(px.rules, sizeof(px.rules), "%s/rules", px.dir);
  snprintf(px.ready, sizeof(px.ready), "%s/ready", px.dir);
  snprintf(px.log, sizeof(px.log), "%s/chaosproxy.log", px.dir);
  px.admin = itest_client();
  px.ns = itest_namespace(px.admin, "chaosproxy");
  for(int i = 0; i < 64; i++)
    kcr_buf_puts(&data, "0123456789abcdef0123456789abcdef");
  cm = itest_json("{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\","
                  "\"metadata\":{\"name\":\"cm\"},\"data\":{\"k\":\"%s\"}}",
                  data.ptr);
  itest_expect(KCR_OK,
               kcr_create(px.admin, &(struct kcr_ref){&itest_configmaps, px.ns}, cm, NULL,
                          NULL, &ei),
               &ei);
  cJSON_Delete(cm);
  kcr_buf_cleanup(&data);
  start_proxy();
  return 0;
}

static int teardown(void **state)
{
  int st = -1;
  if(px.pid > 0) {
    kill(px.pid, SIGTERM);
    waitpid(px.pid, &st, 0);
  }
  if(!WIFEXITED(st) || WEXITSTATUS(st)) {
    fprintf(stderr, "chaosproxy did not exit 0 after SIGTERM (status %d); its log: %s\n",
            st, px.log);
  } else {
    char cmd[400];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", px.dir);
    if(system(cmd))
      fprintf(stderr, "cannot remove %s\n", px.dir);
  }
  itest_done(px.admin, px.ns);
  return WIFEXITED(st) && !WEXITSTATUS(st) ? 0 : -1;
}

/* ---- the tests ---- */

static void requests_pass_with_the_clients_certificate_identity(void **state)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  kcr_client *c = client();
  long fwd = metric("chaosproxy_forwarded_total", "agent=\"chaostest\"");
  cJSON *obj = itest_json("{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\","
                          "\"metadata\":{\"name\":\"through-proxy\"}}");

  set_rules("");
  itest_expect(KCR_OK, get_cm(c, &ei), &ei);
  /* A write: the apiserver saw kcr-admin (system:masters), re-signed. */
  itest_expect(
      KCR_OK,
      kcr_create(c, &(struct kcr_ref){&itest_configmaps, px.ns}, obj, NULL, NULL, &ei),
      &ei);
  assert_int_equal(fwd + 2, metric("chaosproxy_forwarded_total", "agent=\"chaostest\""));
  assert_int_equal(
      1, metric("chaosproxy_forwarded_total", "agent=\"chaostest\" verb=\"POST\""));
  cJSON_Delete(obj);
  kcr_client_free(c);
  kcr_errinfo_cleanup(&ei);
}

static void a_token_passes_unchanged(void **state)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  struct kcr_http_response resp = {0, KCR_BUF_INIT};
  struct kcr_buf path = KCR_BUF_INIT, user = KCR_BUF_INIT;
  const char *body =
      "{\"apiVersion\":\"authentication.k8s.io/v1\",\"kind\":\"TokenRequest\","
      "\"spec\":{\"expirationSeconds\":600}}";
  cJSON *sa = itest_json("{\"apiVersion\":\"v1\",\"kind\":\"ServiceAccount\","
                         "\"metadata\":{\"name\":\"nobody\"}}"),
        *tr = NULL;
  kcr_config *cfg = NULL;
  kcr_client *c = NULL;
  char *kc, want[256];

  set_rules("");
  itest_expect(
      KCR_OK,
      kcr_create(px.admin,
                 &(struct kcr_ref){
                     &(const struct kcr_gvr){"", "v1", "serviceaccounts", true}, px.ns},
                 sa, NULL, NULL, &ei),
      &ei);
  kcr_buf_printf(&path, "/api/v1/namespaces/%s/serviceaccounts/nobody/token", px.ns);
  itest_expect(KCR_OK,
               kcr_client_do(px.admin,
                             &(struct kcr_http_request){.method = "POST",
                                                        .path = path.ptr,
                                                        .body = body,
                                                        .body_len = strlen(body)},
                             &resp, &ei),
               &ei);
  tr = cJSON_Parse(kcr_buf_str(&resp.body));
  assert_non_null(kcr_json_str(tr, "/status/token"));
  kcr_buf_printf(&user, "    token: %s", kcr_json_str(tr, "/status/token"));
  kc = proxy_kubeconfig("nobody", user.ptr);
  itest_expect(KCR_OK,
               kcr_config_load(&(struct kcr_config_opts){.kubeconfig = kc}, &cfg, &ei),
               &ei);
  itest_expect(KCR_OK, kcr_client_new(&(struct kcr_client_opts){.config = cfg}, &c, &ei),
               &ei);
  /* No RBAC for it: refused, by name - the token reached the apiserver. */
  itest_expect(KCR_EFORBIDDEN, get_cm(c, &ei), &ei);
  snprintf(want, sizeof(want), "system:serviceaccount:%s:nobody", px.ns);
  assert_non_null(strstr(ei.message, want));
  kcr_client_free(c);
  kcr_config_free(cfg);
  free(kc);
  cJSON_Delete(sa);
  cJSON_Delete(tr);
  kcr_buf_cleanup(&resp.body);
  kcr_buf_cleanup(&path);
  kcr_buf_cleanup(&user);
  kcr_errinfo_cleanup(&ei);
}

static void status_429_is_retried_after_retry_after(void **state)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  kcr_client *c = client_opts(0, 2);
  long inj = injected("status_429");
  int s429 = atomic_load(&seen[429]), s200 = atomic_load(&seen[200]);
  uint64_t t0;

  set_rules("status code=429 retry-after=1 agent=chaostest max=1\n");
  t0 = kcr_time_mono_ms();
  itest_expect(KCR_OK, get_cm(c, &ei), &ei);
  assert_true(kcr_time_mono_ms() - t0 >= 1000); /* Retry-After: 1 */
  assert_int_equal(inj + 1, injected("status_429"));
  assert_int_equal(s429 + 1, atomic_load(&seen[429]));
  assert_int_equal(s200 + 1, atomic_load(&seen[200]));
  kcr_client_free(c);
  kcr_errinfo_cleanup(&ei);
}

static void status_503_is_retried_then_reported(void **state)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  kcr_client *c = client_opts(0, 2);
  long inj = injected("status_503");

  set_rules("status code=503 retry-after=0 agent=chaostest\n");
  itest_expect(KCR_EUNAVAILABLE, get_cm(c, &ei), &ei);
  assert_int_equal(503, ei.code);
  assert_string_equal("ServiceUnavailable", ei.reason);
  assert_non_null(strstr(ei.message, "chaosproxy: injected 503"));
  assert_int_equal(inj + 3, injected("status_503")); /* the try and 2 retries */
  kcr_client_free(c);
  kcr_errinfo_cleanup(&ei);
}

static void status_500_and_504_are_server_errors_not_retried(void **state)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  kcr_client *c = client_opts(0, 3);
  long i500 = injected("status_500"), i504 = injected("status_504");

  set_rules(
      "status code=500 agent=chaostest max=1\nstatus code=504 agent=chaostest max=1\n");
  itest_expect(KCR_ESERVER, get_cm(c, &ei), &ei);
  assert_int_equal(500, ei.code);
  assert_string_equal("InternalError", ei.reason);
  itest_expect(KCR_ESERVER, get_cm(c, &ei), &ei);
  assert_int_equal(504, ei.code);
  assert_string_equal("Timeout", ei.reason);
  itest_expect(KCR_OK, get_cm(c, &ei), &ei);
  assert_int_equal(i500 + 1, injected("status_500"));
  assert_int_equal(i504 + 1, injected("status_504"));
  kcr_client_free(c);
  kcr_errinfo_cleanup(&ei);
}

static void a_reset_is_a_transport_error(void **state)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  kcr_client *c = client(); /* fresh: curl retries a reset only on a kept connection */
  long inj = injected("reset"),
       fwd = metric("chaosproxy_forwarded_total", "agent=\"chaostest\"");
  int s0 = atomic_load(&seen[0]);

  set_rules("reset agent=chaostest max=1\n");
  itest_expect(KCR_ETRANSPORT, get_cm(c, &ei), &ei);
  assert_int_equal(inj + 1, injected("reset"));
  assert_int_equal(s0 + 1, atomic_load(&seen[0]));
  /* Reset before forwarding: the apiserver never saw it. */
  assert_int_equal(fwd, metric("chaosproxy_forwarded_total", "agent=\"chaostest\""));
  itest_expect(KCR_OK, get_cm(c, &ei), &ei);
  kcr_client_free(c);
  kcr_errinfo_cleanup(&ei);
}

static void a_truncated_body_is_a_transport_error(void **state)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  kcr_client *c = client();
  long inj = injected("truncate");

  set_rules("truncate bytes=100 agent=chaostest max=1\n");
  itest_expect(KCR_ETRANSPORT, get_cm(c, &ei), &ei);
  assert_int_equal(inj + 1, injected("truncate"));
  itest_expect(KCR_OK, get_cm(c, &ei), &ei);
  kcr_client_free(c);
  kcr_errinfo_cleanup(&ei);
}

static void a_garbled_body_is_a_parse_error(void **state)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  kcr_client *c = client();
  long inj = injected("garble");

  set_rules("garble agent=chaostest verb=GET max=1\n");
  itest_expect(KCR_EPARSE, get_cm(c, &ei), &ei);
  assert_int_equal(inj + 1, injected("garble"));
  itest_expect(KCR_OK, get_cm(c, &ei), &ei);
  kcr_client_free(c);
  kcr_errinfo_cleanup(&ei);
}

static void a_drip_is_slow_and_times_out_a_short_deadline(void **state)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  kcr_client *c = client();
  long inj = injected("drip");
  uint64_t t0;

  /* The answer is over 2 KiB (head and body): > 20 pieces of 128 bytes. */
  set_rules("drip bytes=128 ms=20 agent=chaostest max=1\n");
  t0 = kcr_time_mono_ms();
  itest_expect(KCR_OK, get_cm(c, &ei), &ei);
  assert_true(kcr_time_mono_ms() - t0 >= 20 * 20);
  kcr_client_free(c);
  c = client_opts(500, 0);
  set_rules("drip bytes=8 ms=100 agent=chaostest max=1\n");
  itest_expect(KCR_ETIMEDOUT, get_cm(c, &ei), &ei);
  assert_int_equal(inj + 2, injected("drip"));
  kcr_client_free(c);
  kcr_errinfo_cleanup(&ei);
}

static void a_delay_delays(void **state)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  kcr_client *c = client();
  long inj = injected("delay");
  uint64_t t0;

  set_rules("delay ms=400 agent=chaostest max=1\n");
  t0 = kcr_time_mono_ms();
  itest_expect(KCR_OK, get_cm(c, &ei), &ei);
  assert_true(kcr_time_mono_ms() - t0 >= 400);
  assert_int_equal(inj + 1, injected("delay"));
  kcr_client_free(c);
  kcr_errinfo_cleanup(&ei);
}

static kcr_err count_event(struct kcr_watch_event *ev, void *ud)
{
  (*(int *)ud)++;
  return KCR_OK;
}

/* Watches the namespace's ConfigMaps from "now" (the apiserver first sends
 * an ADDED for each existing one); returns how the stream ended. */
static kcr_err watch_cms(kcr_client *c, int *events, uint64_t *ms, struct kcr_errinfo *ei)
{
  struct kcr_ref ref = {&itest_configmaps, px.ns};
  uint64_t t0 = kcr_time_mono_ms();
  kcr_watch *w = NULL;
  kcr_err rc;

  *events = 0;
  rc = kcr_watch_new(&(struct kcr_watch_opts){.client = c,
                                              .ref = &ref,
                                              .on_event = count_event,
                                              .ud = events,
                                              .timeout_ms = 20000},
                     &w, ei);
  if(!rc)
    rc = kcr_watch_run(w, ei);
  kcr_watch_free(w);
  *ms = kcr_time_mono_ms() - t0;
  return rc;
}

static void a_watch_cut_mid_document_is_a_transport_error(void **state)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  kcr_client *c = client();
  long inj = injected("cut");
  int events;
  uint64_t ms;

  /* After 40 bytes: inside the first event, which is never delivered. */
  set_rules("cut after-bytes=40 agent=chaostest max=1\n");
  itest_expect(KCR_ETRANSPORT, watch_cms(c, &events, &ms, &ei), &ei);
  assert_int_equal(0, events);
  /* After 700 ms: the existing ConfigMaps came, then half a document. */
  set_rules("cut after-ms=700 agent=chaostest max=1\n");
  itest_expect(KCR_ETRANSPORT, watch_cms(c, &events, &ms, &ei), &ei);
  assert_true(events >= 1);
  assert_true(ms >= 700 && ms < 15000);
  assert_int_equal(inj + 2, injected("cut"));
  kcr_client_free(c);
  kcr_errinfo_cleanup(&ei);
}

static void rules_select_by_verb_resource_and_agent(void **state)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  kcr_client *c = client();
  cJSON *list = NULL;

  set_rules("status code=500 resource=secrets\n"
            "status code=500 agent=someone-else\n"
            "status code=500 verb=LIST resource=configmaps agent=chaostest\n");
  itest_expect(KCR_OK, get_cm(c, &ei), &ei); /* a GET: no rule for it */
  itest_expect(KCR_ESERVER,
               kcr_list(c, &(struct kcr_ref){&itest_configmaps, px.ns}, NULL, &list, &ei),
               &ei);
  assert_null(list);
  kcr_client_free(c);
  kcr_errinfo_cleanup(&ei);
}

static void a_bad_rules_file_keeps_the_rules_in_effect(void **state)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  kcr_client *c = client();

  set_rules("status code=500 agent=chaostest\n");
  set_rules_expect("status code=500 agent=chaostest\nstatus\n", "error");
  itest_expect(KCR_ESERVER, get_cm(c, &ei), &ei);
  set_rules("");
  itest_expect(KCR_OK, get_cm(c, &ei), &ei);
  kcr_client_free(c);
  kcr_errinfo_cleanup(&ei);
}

/* Every error answer the proxy wrote to the test's clients is one the
 * clients observed, and the other way round. (Not so for 200: a client
 * that gets a truncated body or times out during a drip observes no code,
 * though the proxy wrote a 200 head.) */
static void the_proxys_counts_equal_the_clients(void **state)
{
  static const int codes[] = {201, 429, 500, 503, 504};
  for(size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++) {
    char l[64];
    snprintf(l, sizeof(l), "agent=\"chaostest\" code=\"%d\"", codes[i]);
    long proxy = metric("chaosproxy_responses_total", l);
    if(proxy != atomic_load(&seen[codes[i]]))
      fail_msg("code %d: the proxy wrote %ld answers, the clients observed %d", codes[i],
               proxy, atomic_load(&seen[codes[i]]));
  }
  assert_true(atomic_load(&seen[429]) >= 1 && atomic_load(&seen[503]) >= 3);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(requests_pass_with_the_clients_certificate_identity),
      cmocka_unit_test(a_token_passes_unchanged),
      cmocka_unit_test(status_429_is_retried_after_retry_after),
      cmocka_unit_test(status_503_is_retried_then_reported),
      cmocka_unit_test(status_500_and_504_are_server_errors_not_retried),
      cmocka_unit_test(a_reset_is_a_transport_error),
      cmocka_unit_test(a_truncated_body_is_a_transport_error),
      cmocka_unit_test(a_garbled_body_is_a_parse_error),
      cmocka_unit_test(a_drip_is_slow_and_times_out_a_short_deadline),
      cmocka_unit_test(a_delay_delays),
      cmocka_unit_test(a_watch_cut_mid_document_is_a_transport_error),
      cmocka_unit_test(rules_select_by_verb_resource_and_agent),
      cmocka_unit_test(a_bad_rules_file_keeps_the_rules_in_effect),
      cmocka_unit_test(the_proxys_counts_equal_the_clients),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
