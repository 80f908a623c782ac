/* The health and metrics HTTP server, spoken to with libcurl on loopback.
 * Hostile clients (slowloris, aborted connections) are in
 * test_httpd_hostile.c. */
#include <arpa/inet.h>
#include <curl/curl.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "kcr/httpd.h"
#include "kcr/log.h"
#include "kcr/metrics.h"
#include "tcheck.h"
#include "tfail.h"

struct reply {
  long code; /* 0: no HTTP answer (connection refused, ...) */
  struct kcr_buf body;
  struct kcr_buf headers;
  char ctype[128];
};

static size_t on_data(char *p, size_t sz, size_t n, void *ud)
{
  return kcr_buf_append(ud, p, sz * n) ? 0 : sz * n;
}

/* method: "GET", "HEAD", "POST", ... Any thread: asserts nothing, r->code
 * stays 0 when there is no HTTP answer (or no curl handle). */
static void fetch(int port, const char *method, const char *path, struct reply *r)
{
  CURL *c = curl_easy_init();
  char url[256];
  char *ct = NULL;

  memset(r, 0, sizeof(*r));
  if(!c)
    return;
  snprintf(url, sizeof(url), "http://127.0.0.1:%d%s", port, path);
  curl_easy_setopt(c, CURLOPT_URL, url);
  curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
  curl_easy_setopt(c, CURLOPT_TIMEOUT, 10L);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &r->body);
  curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_data);
  curl_easy_setopt(c, CURLOPT_HEADERDATA, &r->headers);
  if(!strcmp(method, "HEAD"))
    curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
  else if(!strcmp(method, "POST"))
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, "x=1");
  else if(strcmp(method, "GET"))
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
  if(curl_easy_perform(c) == CURLE_OK) {
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r->code);
    if(curl_easy_getinfo(c, CURLINFO_CONTENT_TYPE, &ct) == CURLE_OK && ct)
      snprintf(r->ctype, sizeof(r->ctype), "%s", ct);
  }
  curl_easy_cleanup(c);
}

static void reply_cleanup(struct reply *r)
{
  kcr_buf_cleanup(&r->body);
  kcr_buf_cleanup(&r->headers);
}

static void expect(int port, const char *method, const char *path, long code,
                   const char *body)
{
  struct reply r;
  fetch(port, method, path, &r);
  assert_int_equal(code, r.code);
  if(body)
    assert_string_equal(body, kcr_buf_str(&r.body));
  reply_cleanup(&r);
}

static kcr_httpd *start(const char *addr, kcr_metrics *reg)
{
  struct kcr_httpd_opts o = {addr, reg};
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  kcr_httpd *h = NULL;

  assert_int_equal(KCR_OK, kcr_httpd_new(&o, &h, &ei));
  if(kcr_httpd_start(h, &ei))
    fail_msg("start %s: %s", addr, ei.message ? ei.message : "?");
  assert_true(kcr_httpd_port(h) > 0);
  kcr_errinfo_cleanup(&ei);
  return h;
}

struct flag {
  atomic_bool ok;
  const char *reason;
};

static bool check_flag(void *ud, char *reason, size_t n)
{
  struct flag *f = ud;
  if(atomic_load(&f->ok))
    return true;
  if(f->reason)
    snprintf(reason, n, "%s", f->reason);
  return false;
}

static void serves_metrics_and_probes(void **state)
{
  kcr_metrics *reg = NULL;
  assert_int_equal(KCR_OK, kcr_metrics_new(NULL, &reg, NULL));
  kcr_metric *c = NULL;
  assert_int_equal(
      KCR_OK,
      kcr_metric_counter(reg,
                         &(struct kcr_metric_opts){
                             .name = "reconcile_total",
                             .help = "Reconciliations",
                             .label_names = (const char *const[]){"controller", NULL}},
                         &c, NULL));
  struct kcr_buf want = KCR_BUF_INIT;
  struct reply r;
  kcr_httpd *h;
  int port;

  kcr_metric_inc(c, (const char *const[]){"ebd"}, 17);
  h = start("127.0.0.1:0", reg);
  port = kcr_httpd_port(h);
  fetch(port, "GET", "/metrics", &r);
  assert_int_equal(200, r.code);
  assert_string_equal("text/plain; version=0.0.4; charset=utf-8", r.ctype);
  assert_int_equal(KCR_OK, kcr_metrics_render(reg, &want));
  assert_string_equal(kcr_buf_str(&want), kcr_buf_str(&r.body));
  assert_non_null(
      strstr(kcr_buf_str(&r.body), "reconcile_total{controller=\"ebd\"} 17\n"));
  reply_cleanup(&r);
  fetch(port, "GET", "/healthz", &r);
  assert_int_equal(200, r.code);
  assert_string_equal("ok", kcr_buf_str(&r.body));
  assert_string_equal("text/plain; charset=utf-8", r.ctype);
  reply_cleanup(&r);
  expect(port, "GET", "/readyz", 200, "ok");
  expect(port, "GET", "/readyz/", 200, "ok");
  expect(port, "GET", "/readyz?verbose", 200, "[+]ping ok\nreadyz check passed\n");
  expect(port, "GET", "/healthz?verbose=1", 200, "[+]ping ok\nhealthz check passed\n");
  expect(port, "GET", "/healthz/ping", 200, "ok");
  expect(port, "HEAD", "/metrics", 200, "");
  kcr_httpd_free(h);
  kcr_buf_cleanup(&want);
  kcr_metrics_free(reg);
}

static void failing_readiness_check_answers_500(void **state)
{
  struct flag informers = {true, "not synced"}, logs = {true, NULL};
  kcr_httpd *h = start("127.0.0.1:0", NULL);
  int port = kcr_httpd_port(h);

  assert_int_equal(KCR_OK, kcr_httpd_add_readyz(h, "log", check_flag, &logs));
  assert_int_equal(KCR_OK, kcr_httpd_add_readyz(h, "informers", check_flag, &informers));
  expect(port, "GET", "/readyz", 200, "ok");
  expect(port, "GET", "/readyz?verbose", 200,
         "[+]log ok\n[+]informers ok\nreadyz check passed\n");

  atomic_store(&informers.ok, false);
  expect(port, "GET", "/readyz", 500,
         "[+]log ok\n[-]informers failed: not synced\nreadyz check failed\n");
  expect(port, "GET", "/readyz/informers", 500, "internal server error: not synced\n");
  expect(port, "GET", "/readyz/log", 200, "ok");
  expect(port, "GET", "/healthz", 200, "ok"); /* liveness is a separate list */

  atomic_store(&logs.ok, false); /* no reason given */
  expect(port, "GET", "/readyz", 500,
         "[-]log failed\n[-]informers failed: not synced\nreadyz check failed\n");

  atomic_store(&informers.ok, true);
  atomic_store(&logs.ok, true);
  expect(port, "GET", "/readyz", 200, "ok");
  kcr_httpd_free(h);
}

static void healthz_checks_and_names(void **state)
{
  struct flag alive = {false, "deadlocked\nworker 3"};
  kcr_httpd *h = start("127.0.0.1:0", NULL);
  int port = kcr_httpd_port(h);

  assert_int_equal(KCR_OK, kcr_httpd_add_healthz(h, "workers", check_flag, &alive));
  assert_int_equal(KCR_EEXIST, kcr_httpd_add_healthz(h, "workers", check_flag, &alive));
  assert_int_equal(KCR_OK, kcr_httpd_add_readyz(h, "workers", check_flag, &alive));
  assert_int_equal(KCR_EINVAL, kcr_httpd_add_healthz(h, "", check_flag, &alive));
  assert_int_equal(KCR_EINVAL, kcr_httpd_add_healthz(h, "a/b", check_flag, &alive));
  assert_int_equal(KCR_EINVAL, kcr_httpd_add_healthz(h, "x y", check_flag, &alive));
  assert_int_equal(KCR_EINVAL, kcr_httpd_add_healthz(h, "ok", NULL, NULL));
  assert_int_equal(KCR_EINVAL, kcr_httpd_add_healthz(NULL, "ok", check_flag, NULL));
  /* A newline in a reason cannot break the one-line-per-check format. */
  expect(port, "GET", "/healthz", 500,
         "[-]workers failed: deadlocked worker 3\nhealthz check failed\n");
  kcr_httpd_free(h);
}

static void unknown_paths_and_methods(void **state)
{
  kcr_metrics *reg = NULL;
  assert_int_equal(KCR_OK, kcr_metrics_new(NULL, &reg, NULL));
  kcr_httpd *h = start("127.0.0.1:0", reg);
  int port = kcr_httpd_port(h);
  struct reply r;

  expect(port, "GET", "/", 404, "404 page not found\n");
  expect(port, "GET", "/nope", 404, "404 page not found\n");
  expect(port, "GET", "/metricsx", 404, NULL);
  expect(port, "GET", "/healthzz", 404, NULL);
  expect(port, "GET", "/readyz/unknown", 404, NULL);
  fetch(port, "POST", "/metrics", &r);
  assert_int_equal(405, r.code);
  assert_string_equal("405 method not allowed\n", kcr_buf_str(&r.body));
  assert_non_null(strstr(kcr_buf_str(&r.headers), "Allow: GET, HEAD\r\n"));
  reply_cleanup(&r);
  expect(port, "DELETE", "/healthz", 405, NULL);
  expect(port, "PUT", "/readyz", 405, NULL);
  /* The server is still fine after refusing. */
  expect(port, "GET", "/healthz", 200, "ok");
  kcr_httpd_free(h);
  kcr_metrics_free(reg);
}

static void metrics_endpoint_absent_without_registry(void **state)
{
  kcr_httpd *h = start("127.0.0.1:0", NULL);
  expect(kcr_httpd_port(h), "GET", "/metrics", 404, NULL);
  kcr_httpd_free(h);
}

static void expect_bad_addr(const char *addr, kcr_err want, const char *says)
{
  struct kcr_httpd_opts o = {addr, NULL};
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  kcr_httpd *h = (kcr_httpd *)&o; /* must be reset to NULL */

  assert_int_equal(want, kcr_httpd_new(&o, &h, &ei));
  assert_null(h);
  assert_non_null(ei.message);
  if(!strstr(ei.message, addr) || !strstr(ei.message, says))
    fail_msg("message for %s: %s", addr, ei.message);
  kcr_errinfo_cleanup(&ei);
}

static void bad_address_is_a_clear_error(void **state)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  struct kcr_httpd_opts o = {NULL, NULL};
  char addr[64];
  kcr_httpd *h1, *h2;

  expect_bad_addr("nonsense", KCR_ECONFIG, "host:port");
  expect_bad_addr("127.0.0.1", KCR_ECONFIG, "host:port");
  expect_bad_addr("127.0.0.1:99999", KCR_ECONFIG, "port");
  expect_bad_addr("127.0.0.1:", KCR_ECONFIG, "port");
  expect_bad_addr("127.0.0.1:8o", KCR_ECONFIG, "port");
  expect_bad_addr(":-1", KCR_ECONFIG, "port");
  expect_bad_addr("::1:8080", KCR_ECONFIG, "brackets");
  expect_bad_addr("[::1:8080", KCR_ECONFIG, "brackets");
  expect_bad_addr("[]:8080", KCR_ECONFIG, "brackets");
  /* No options: every default (":8080", no /metrics); nothing bound yet. */
  assert_int_equal(KCR_OK, kcr_httpd_new(NULL, &h1, NULL));
  assert_int_equal(0, kcr_httpd_port(h1));
  kcr_httpd_free(h1);
  assert_int_equal(KCR_EINVAL, kcr_httpd_new(&o, NULL, NULL));

  /* A port in use: the error names the address and the OS reason. */
  h1 = start("127.0.0.1:0", NULL);
  snprintf(addr, sizeof(addr), "127.0.0.1:%d", kcr_httpd_port(h1));
  o.addr = addr;
  assert_int_equal(KCR_OK, kcr_httpd_new(&o, &h2, &ei));
  assert_int_equal(KCR_EIO, kcr_httpd_start(h2, &ei));
  assert_non_null(ei.message);
  if(!strstr(ei.message, addr) || !strstr(ei.message, "in use"))
    fail_msg("message: %s", ei.message);
  assert_int_equal(0, kcr_httpd_port(h2));
  /* Starting twice is refused. */
  assert_int_equal(KCR_EINVAL, kcr_httpd_start(h1, &ei));
  kcr_errinfo_cleanup(&ei);
  kcr_httpd_free(h2);
  kcr_httpd_free(h1);
}

static void *stop_in_thread(void *arg)
{
  kcr_httpd_stop(arg);
  return NULL;
}

static void stops_cleanly_from_any_thread_and_restarts(void **state)
{
  kcr_httpd *h = start("127.0.0.1:0", NULL);
  int port = kcr_httpd_port(h);
  pthread_t t;
  struct reply r;

  expect(port, "GET", "/healthz", 200, "ok");
  assert_int_equal(0, pthread_create(&t, NULL, stop_in_thread, h));
  pthread_join(t, NULL);
  assert_int_equal(0, kcr_httpd_port(h));
  fetch(port, "GET", "/healthz", &r); /* refused: nobody listens */
  assert_int_equal(0, r.code);
  reply_cleanup(&r);
  kcr_httpd_stop(h); /* idempotent */
  assert_int_equal(KCR_OK, kcr_httpd_start(h, NULL));
  expect(kcr_httpd_port(h), "GET", "/healthz", 200, "ok");
  kcr_httpd_free(h);
  kcr_httpd_stop(NULL);
  kcr_httpd_free(NULL);
  assert_int_equal(0, kcr_httpd_port(NULL));
}

static kcr_httpd *self;

static bool check_stops_own_server(void *ud, char *reason, size_t n)
{
  kcr_httpd_stop(self); /* would join itself: refused and logged */
  return true;
}

static void stop_from_a_check_is_refused(void **state)
{
  enum kcr_log_level lvl = kcr_log_get_level();

  self = start("127.0.0.1:0", NULL);
  kcr_log_set_level(KCR_LOG_OFF);
  assert_int_equal(KCR_OK,
                   kcr_httpd_add_healthz(self, "self", check_stops_own_server, NULL));
  expect(kcr_httpd_port(self), "GET", "/healthz", 200, "ok");
  expect(kcr_httpd_port(self), "GET", "/healthz", 200, "ok");
  kcr_log_set_level(lvl);
  kcr_httpd_free(self);
}

static void listens_on_all_interfaces(void **state)
{
  kcr_httpd *h = start(":0", NULL);
  expect(kcr_httpd_port(h), "GET", "/healthz", 200, "ok");
  kcr_httpd_free(h);
}

struct scrape {
  int port;
  kcr_metric *c;
};

/* On a scraper thread: TCHECK, not cmocka's asserts (see tcheck.h). */
static void *scraper(void *arg)
{
  struct scrape *s = arg;
  for(int i = 0; i < 25; i++) {
    struct reply r;
    kcr_metric_inc(s->c, NULL, 1);
    fetch(s->port, "GET", (i & 1) ? "/metrics" : "/readyz", &r);
    if(r.code != 200)
      TCHECK_FAIL("scrape %d: HTTP %ld, want 200", i, r.code);
    reply_cleanup(&r);
  }
  return NULL;
}

static void concurrent_scrapes(void **state)
{
  kcr_metrics *reg = NULL;
  assert_int_equal(KCR_OK, kcr_metrics_new(NULL, &reg, NULL));
  struct scrape s = {0};
  assert_int_equal(KCR_OK,
                   kcr_metric_counter(reg,
                                      &(struct kcr_metric_opts){.name = "scrapes_total",
                                                                .help = "Scrapes"},
                                      &s.c, NULL));
  struct flag ready = {true, NULL};
  kcr_httpd *h = start("127.0.0.1:0", reg);
  pthread_t t[4];

  s.port = kcr_httpd_port(h);
  for(int i = 0; i < 4; i++)
    assert_int_equal(0, pthread_create(&t[i], NULL, scraper, &s));
  /* Registering while requests run is allowed. */
  assert_int_equal(KCR_OK, kcr_httpd_add_readyz(h, "late", check_flag, &ready));
  for(int i = 0; i < 4; i++)
    pthread_join(t[i], NULL);
  tcheck_report();
  assert_true(100 == kcr_metric_value(s.c, NULL));
  kcr_httpd_free(h);
  kcr_metrics_free(reg);
}

/* ---- kcr_httpd_listen: bind first, serve later ----------------------------- */

/* A blocking TCP connection to 127.0.0.1:port, reads timing out after 10 s;
 * -1 on failure. */
static int dial(int port)
{
  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  struct timeval tv = {10, 0};
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

  if(fd < 0)
    return -1;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  (void)setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  if(connect(fd, (struct sockaddr *)&sa, sizeof(sa))) {
    close(fd);
    return -1;
  }
  return fd;
}

/* Reads until the peer closes (or 10 s pass) into out. */
static void read_all(int fd, struct kcr_buf *out)
{
  char b[4096];
  ssize_t n;

  while((n = read(fd, b, sizeof(b))) > 0)
    assert_int_equal(KCR_OK, kcr_buf_append(out, b, (size_t)n));
}

static kcr_httpd *new_server(const char *addr)
{
  struct kcr_httpd_opts o = {addr, NULL};
  kcr_httpd *h = NULL;

  assert_int_equal(KCR_OK, kcr_httpd_new(&o, &h, NULL));
  return h;
}

static void listen_binds_now_and_start_serves_that_socket(void **state)
{
  static const char req[] =
      "GET /healthz HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n";
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  struct kcr_buf resp = KCR_BUF_INIT;
  kcr_httpd *h = new_server("127.0.0.1:0");
  int port, fd;

  assert_int_equal(0, kcr_httpd_port(h)); /* nothing bound by new */
  assert_int_equal(KCR_OK, kcr_httpd_listen(h, &ei));
  port = kcr_httpd_port(h);
  assert_true(port > 0);
  /* Bound and listening, not serving: the kernel takes the connection and
   * the request waits in the backlog until start. */
  fd = dial(port);
  assert_true(fd >= 0);
  assert_int_equal((ssize_t)strlen(req), write(fd, req, strlen(req)));
  assert_int_equal(KCR_OK, kcr_httpd_start(h, &ei));
  assert_int_equal(port, kcr_httpd_port(h)); /* the same socket */
  read_all(fd, &resp);
  close(fd);
  if(strncmp(kcr_buf_str(&resp), "HTTP/1.1 200 ", 13) ||
     !strstr(kcr_buf_str(&resp), "\r\n\r\nok"))
    fail_msg("answer to the early request: %s", kcr_buf_str(&resp));
  expect(port, "GET", "/readyz", 200, "ok");
  kcr_buf_cleanup(&resp);
  kcr_errinfo_cleanup(&ei);
  kcr_httpd_free(h);
}

/* listen fails with want, naming addr and saying says; start, which binds
 * itself when listen was not called, reports the same. */
static void expect_listen_error(const char *addr, kcr_err want, const char *says)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  kcr_httpd *h = new_server(addr);

  assert_int_equal(want, kcr_httpd_listen(h, &ei));
  assert_non_null(ei.message);
  if(!strstr(ei.message, addr) || !strstr(ei.message, says))
    fail_msg("listen on %s: %s", addr, ei.message);
  assert_int_equal(0, kcr_httpd_port(h));
  kcr_errinfo_cleanup(&ei);
  assert_int_equal(want, kcr_httpd_start(h, &ei));
  if(!ei.message || !strstr(ei.message, addr) || !strstr(ei.message, says))
    fail_msg("start on %s: %s", addr, ei.message ? ei.message : "(none)");
  assert_int_equal(0, kcr_httpd_port(h));
  kcr_errinfo_cleanup(&ei);
  kcr_httpd_free(h);
}

static void listen_errors_name_the_address(void **state)
{
  char addr[64];
  kcr_httpd *h = new_server("127.0.0.1:0");

  expect_listen_error("no-such-host.invalid:8080", KCR_ECONFIG, "cannot resolve");
  /* TEST-NET-1: no interface has it. */
  expect_listen_error("192.0.2.1:0", KCR_EIO, "Cannot assign requested address");
  /* In use by a server that listens but does not serve yet. */
  assert_int_equal(KCR_OK, kcr_httpd_listen(h, NULL));
  snprintf(addr, sizeof(addr), "127.0.0.1:%d", kcr_httpd_port(h));
  expect_listen_error(addr, KCR_EIO, "Address already in use");
  kcr_httpd_free(h);
}

/* The lowest unprivileged port, or -1 if unknown. */
static int unprivileged_port_start(void)
{
  FILE *f = fopen("/proc/sys/net/ipv4/ip_unprivileged_port_start", "r");
  int v = -1;

  if(f) {
    if(fscanf(f, "%d", &v) != 1)
      v = -1;
    fclose(f);
  }
  return v;
}

/* Binding a privileged port without the privilege: in a child process that
 * drops root first when it has it (the test runs as root in containers). */
static void listen_permission_denied_names_the_address(void **state)
{
  char out[512] = "", *msg;
  int p[2], status, rc = -1;
  ssize_t n, got = 0;
  pid_t pid;

  if(unprivileged_port_start() <= 1) {
    print_message("every port is unprivileged on this host: nothing to deny\n");
    skip();
  }
  assert_int_equal(0, pipe(p));
  pid = fork();
  assert_true(pid >= 0);
  if(pid == 0) {
    struct kcr_errinfo ei = KCR_ERRINFO_INIT;
    struct kcr_httpd_opts o = {"127.0.0.1:1", NULL};
    kcr_httpd *h = NULL;
    close(p[0]);
    if(geteuid() == 0 && (setgid(65534) || setuid(65534)))
      _exit(2);
    if(kcr_httpd_new(&o, &h, &ei))
      _exit(3);
    rc = kcr_httpd_listen(h, &ei);
    dprintf(p[1], "%d %s", rc, ei.message ? ei.message : "(none)");
    _exit(0);
  }
  close(p[1]);
  while(got < (ssize_t)sizeof(out) - 1 &&
        (n = read(p[0], out + got, sizeof(out) - 1 - (size_t)got)) > 0)
    got += n;
  close(p[0]);
  assert_int_equal(pid, waitpid(pid, &status, 0));
  assert_true(WIFEXITED(status));
  assert_int_equal(0, WEXITSTATUS(status));
  rc = (int)strtol(out, &msg, 10);
  assert_int_equal(KCR_EIO, rc);
  if(!strstr(msg, "127.0.0.1:1") || !strstr(msg, "Permission denied"))
    fail_msg("message: %s", msg);
}

static void listen_start_stop_in_every_order(void **state)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  char addr[64];
  kcr_httpd *h = new_server("127.0.0.1:0"), *again;
  int port;

  /* Listening twice is refused; the first socket stays. */
  assert_int_equal(KCR_OK, kcr_httpd_listen(h, NULL));
  port = kcr_httpd_port(h);
  assert_int_equal(KCR_EINVAL, kcr_httpd_listen(h, &ei));
  assert_non_null(strstr(ei.message, "already listening"));
  assert_int_equal(port, kcr_httpd_port(h));

  /* Stop closes a socket that was never served: the port is free again. */
  kcr_httpd_stop(h);
  assert_int_equal(0, kcr_httpd_port(h));
  snprintf(addr, sizeof(addr), "127.0.0.1:%d", port);
  again = new_server(addr);
  assert_int_equal(KCR_OK, kcr_httpd_listen(again, NULL));
  kcr_httpd_free(again);

  /* Listen again after stop, then serve; listening while serving is refused. */
  assert_int_equal(KCR_OK, kcr_httpd_listen(h, NULL));
  assert_int_equal(KCR_OK, kcr_httpd_start(h, NULL));
  assert_int_equal(KCR_EINVAL, kcr_httpd_listen(h, &ei));
  assert_non_null(strstr(ei.message, "already serving"));
  expect(kcr_httpd_port(h), "GET", "/healthz", 200, "ok");
  kcr_httpd_free(h);

  /* Free without stop, while listening, also closes the socket. */
  h = new_server("127.0.0.1:0");
  assert_int_equal(KCR_OK, kcr_httpd_listen(h, NULL));
  snprintf(addr, sizeof(addr), "127.0.0.1:%d", kcr_httpd_port(h));
  kcr_httpd_free(h);
  again = new_server(addr);
  assert_int_equal(KCR_OK, kcr_httpd_listen(again, NULL));
  kcr_httpd_free(again);
  kcr_errinfo_cleanup(&ei);
}

static bool check_true(void *ud, char *reason, size_t n) { return true; }

/* The manager's sequence, as one allocation-failure torture: every
 * allocation failing in turn gives KCR_ENOMEM, leaves nothing bound, and
 * leaks nothing. */
static bool new_listen_start(void *ud)
{
  struct kcr_httpd_opts o = {"127.0.0.1:0", NULL};
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  kcr_httpd *h = NULL;
  kcr_err rc;
  bool ok;

  rc = kcr_httpd_new(&o, &h, &ei);
  if(!rc)
    rc = kcr_httpd_add_healthz(h, "ping", check_true, NULL);
  if(!rc)
    rc = kcr_httpd_add_readyz(h, "informers", check_true, NULL);
  if(!rc)
    rc = kcr_httpd_listen(h, &ei);
  if(!rc)
    rc = kcr_httpd_start(h, &ei);
  ok = rc ? rc == KCR_ENOMEM && kcr_httpd_port(h) == 0 : kcr_httpd_port(h) > 0;
  kcr_httpd_free(h);
  kcr_errinfo_cleanup(&ei);
  return ok;
}

static void lifecycle_survives_allocation_failures(void **state)
{
  tfail_torture("kcr_httpd new/add/listen/start/free", new_listen_start, NULL);
}

static int setup(void **state) { return curl_global_init(CURL_GLOBAL_DEFAULT) ? -1 : 0; }

static int teardown(void **state)
{
  curl_global_cleanup();
  return 0;
}

/* ---- POST handlers (kcr_httpd_add_handler) -------------------------------- */

struct echo {
  atomic_int calls;
  atomic_bool entered; /* the slow handler has started */
  int sleep_ms;
};

/* Answers "LEN:ARG:CTYPE" (the body's length, the query's "timeout" and
 * the Content-Type), after sleeping sleep_ms. */
static int echo(void *ud, const struct kcr_httpd_request *rq, struct kcr_buf *out,
                const char **ctype)
{
  struct echo *e = ud;
  const char *arg = kcr_httpd_request_arg(rq, "timeout");

  atomic_fetch_add(&e->calls, 1);
  atomic_store(&e->entered, true);
  if(e->sleep_ms)
    usleep((useconds_t)e->sleep_ms * 1000);
  assert_int_equal('\0', rq->body[rq->len]);
  kcr_buf_printf(out, "%zu:%s:%s", rq->len, arg ? arg : "-",
                 rq->content_type ? rq->content_type : "-");
  *ctype = "text/plain";
  return 201;
}

/* Sends req (len bytes) on a new connection and reads the whole answer
 * into out (the server closes: Connection: close in req). */
static void exchange(int port, const char *req, size_t len, struct kcr_buf *out)
{
  int fd = dial(port);
  size_t off = 0;

  assert_true(fd >= 0);
  while(off < len) {
    ssize_t n = write(fd, req + off, len - off);
    if(n <= 0)
      break;
    off += (size_t)n;
  }
  read_all(fd, out);
  close(fd);
}

static void exchange_str(int port, const char *req, struct kcr_buf *out)
{
  exchange(port, req, strlen(req), out);
}

static void handlers_take_posts_with_their_body(void **state)
{
  struct echo e = {0};
  kcr_httpd *h = new_server("127.0.0.1:0");
  struct kcr_buf r = KCR_BUF_INIT, req = KCR_BUF_INIT;
  size_t big = 300000;

  assert_int_equal(KCR_OK, kcr_httpd_add_handler(h, "/hook", 400000, echo, &e));
  assert_int_equal(KCR_OK, kcr_httpd_start(h, NULL));
  /* a body of 300 kB, in many reads */
  kcr_buf_printf(&req,
                 "POST /hook?timeout=10s HTTP/1.1\r\nHost: x\r\nContent-Type: "
                 "application/json\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n",
                 big);
  for(size_t i = 0; i < big; i++)
    kcr_buf_append(&req, "a", 1);
  exchange(kcr_httpd_port(h), req.ptr, req.len, &r);
  assert_non_null(strstr(kcr_buf_str(&r), "HTTP/1.1 201"));
  assert_non_null(strstr(kcr_buf_str(&r), "300000:10s:application/json"));
  assert_non_null(strstr(kcr_buf_str(&r), "Content-Type: text/plain"));
  kcr_buf_reset(&r);
  /* GET on a handler's path: 405, Allow: POST */
  exchange_str(kcr_httpd_port(h),
               "GET /hook HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", &r);
  assert_non_null(strstr(kcr_buf_str(&r), "HTTP/1.1 405"));
  assert_non_null(strstr(kcr_buf_str(&r), "Allow: POST"));
  kcr_buf_reset(&r);
  /* over the limit, told by Content-Length: 413 before the body is read */
  exchange_str(kcr_httpd_port(h),
               "POST /hook HTTP/1.1\r\nHost: x\r\nContent-Length: 400001\r\n"
               "Connection: close\r\n\r\n",
               &r);
  assert_non_null(strstr(kcr_buf_str(&r), "HTTP/1.1 413"));
  kcr_buf_reset(&r);
  /* over the limit in chunks: 413 once read */
  kcr_buf_reset(&req);
  kcr_buf_puts(&req, "POST /hook HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
                     "Connection: close\r\n\r\n");
  for(int i = 0; i < 5; i++) {
    kcr_buf_printf(&req, "%x\r\n", 100000);
    for(int j = 0; j < 100000; j++)
      kcr_buf_append(&req, "b", 1);
    kcr_buf_puts(&req, "\r\n");
  }
  kcr_buf_puts(&req, "0\r\n\r\n");
  exchange(kcr_httpd_port(h), req.ptr, req.len, &r);
  assert_non_null(strstr(kcr_buf_str(&r), "HTTP/1.1 413"));
  assert_int_equal(1, atomic_load(&e.calls)); /* only the first reached it */
  kcr_buf_cleanup(&r);
  kcr_buf_cleanup(&req);
  kcr_httpd_free(h);
}

static void handler_paths_are_checked(void **state)
{
  struct echo e = {0};
  kcr_httpd *h = new_server("127.0.0.1:0");
  static const char *const bad[] = {"hook", "/metrics", "/healthz/x", "/readyz",
                                    "/a b", "/a?b",     "/a#b",       ""};

  for(size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
    assert_int_equal(KCR_EINVAL, kcr_httpd_add_handler(h, bad[i], 0, echo, &e));
  assert_int_equal(KCR_EINVAL, kcr_httpd_add_handler(h, "/x", 0, NULL, &e));
  assert_int_equal(KCR_OK, kcr_httpd_add_handler(h, "/x", 0, echo, &e));
  assert_int_equal(KCR_EEXIST, kcr_httpd_add_handler(h, "/x", 0, echo, &e));
  kcr_httpd_free(h);
}

struct post_arg {
  int port;
  struct kcr_buf answer;
};

static void *post_once(void *p)
{
  struct post_arg *a = p;
  static const char req[] = "POST /slow HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n"
                            "Connection: close\r\n\r\n{}";
  exchange(a->port, req, sizeof(req) - 1, &a->answer);
  return NULL;
}

static void stop_lets_answers_in_flight_finish(void **state)
{
  struct echo e = {.sleep_ms = 700};
  kcr_httpd *h = new_server("127.0.0.1:0");
  struct post_arg a = {0};
  pthread_t th;

  assert_int_equal(KCR_OK, kcr_httpd_add_handler(h, "/slow", 0, echo, &e));
  assert_int_equal(KCR_OK, kcr_httpd_start(h, NULL));
  a.port = kcr_httpd_port(h);
  assert_int_equal(0, pthread_create(&th, NULL, post_once, &a));
  while(!atomic_load(&e.entered))
    usleep(1000);
  kcr_httpd_stop(h); /* while the handler sleeps */
  pthread_join(th, NULL);
  assert_non_null(strstr(kcr_buf_str(&a.answer), "HTTP/1.1 201"));
  assert_non_null(strstr(kcr_buf_str(&a.answer), "2:-:-"));
  /* and nothing new is accepted once stopped */
  assert_true(dial(a.port) < 0);
  kcr_buf_cleanup(&a.answer);
  kcr_httpd_free(h);
}

/* Bodies count against one budget for the whole server: while one client
 * holds part of it with a slow body, another body that would pass it is
 * refused (503) once read, and the first still gets its answer. */
static void bodies_in_flight_share_one_budget(void **state)
{
  struct echo e = {0};
  kcr_httpd *h = NULL;
  struct kcr_buf r = KCR_BUF_INIT, big = KCR_BUF_INIT;
  char body[701];
  int slow;

  assert_int_equal(KCR_OK, kcr_httpd_new(&(struct kcr_httpd_opts){.addr = "127.0.0.1:0",
                                                                  .body_budget = 1000},
                                         &h, NULL));
  assert_int_equal(KCR_OK, kcr_httpd_add_handler(h, "/b", 0, echo, &e));
  assert_int_equal(KCR_OK, kcr_httpd_start(h, NULL));
  memset(body, 'x', 700);
  body[700] = '\0';
  /* 600 of 700 bytes held by a slow client */
  assert_true((slow = dial(kcr_httpd_port(h))) >= 0);
  kcr_buf_printf(&big,
                 "POST /b HTTP/1.1\r\nHost: x\r\nContent-Length: 700\r\n"
                 "Connection: close\r\n\r\n%.600s",
                 body);
  assert_int_equal((ssize_t)big.len, write(slow, big.ptr, big.len));
  usleep(300000);
  /* another 700: over the budget of 1000 */
  kcr_buf_reset(&big);
  kcr_buf_printf(&big,
                 "POST /b HTTP/1.1\r\nHost: x\r\nContent-Length: 700\r\n"
                 "Connection: close\r\n\r\n%s",
                 body);
  exchange(kcr_httpd_port(h), big.ptr, big.len, &r);
  assert_non_null(strstr(kcr_buf_str(&r), "HTTP/1.1 503"));
  /* the slow one finishes and is answered */
  kcr_buf_reset(&r);
  assert_int_equal(100, write(slow, body, 100));
  read_all(slow, &r);
  assert_non_null(strstr(kcr_buf_str(&r), "HTTP/1.1 201"));
  assert_non_null(strstr(kcr_buf_str(&r), "700:"));
  close(slow);
  /* and the budget is free again */
  kcr_buf_reset(&r);
  exchange(kcr_httpd_port(h), big.ptr, big.len, &r);
  assert_non_null(strstr(kcr_buf_str(&r), "HTTP/1.1 201"));
  kcr_buf_cleanup(&r);
  kcr_buf_cleanup(&big);
  kcr_httpd_free(h);
}

/* A POST on a connection kept alive past most of REQUEST_DEADLINE_MS: its
 * body arriving while a new connection makes the server sweep slow ones
 * must not count the idle time before it (the sweep closed it). */
static void a_kept_alive_post_is_not_swept_for_its_idle_time(void **state)
{
  struct echo e = {0};
  kcr_httpd *h = new_server("127.0.0.1:0");
  static const char first[] =
      "POST /k HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}";
  static const char head[] = "POST /k HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n"
                             "Connection: close\r\n\r\n{}";
  struct kcr_buf r = KCR_BUF_INIT;
  char b[4096];
  ssize_t n;
  int fd, other;

  assert_int_equal(KCR_OK, kcr_httpd_add_handler(h, "/k", 0, echo, &e));
  assert_int_equal(KCR_OK, kcr_httpd_start(h, NULL));
  assert_true((fd = dial(kcr_httpd_port(h))) >= 0);
  assert_int_equal(sizeof(first) - 1, write(fd, first, sizeof(first) - 1));
  n = read(fd, b, sizeof(b)); /* the first answer; the connection stays */
  assert_true(n > 0);
  usleep(9300000); /* idle, under MHD's 10 s idle timeout */
  assert_int_equal(sizeof(head) - 1, write(fd, head, sizeof(head) - 1));
  usleep(1200000); /* half the body sent; 10.5 s since the last answer */
  assert_true((other = dial(kcr_httpd_port(h))) >= 0); /* the sweep runs */
  usleep(200000);
  assert_int_equal(2, write(fd, "{}", 2));
  read_all(fd, &r);
  assert_non_null(strstr(kcr_buf_str(&r), "HTTP/1.1 201"));
  close(other);
  close(fd);
  kcr_buf_cleanup(&r);
  kcr_httpd_free(h);
}

int main(void)
{
  tfail_init(); /* first: the torture test fails allocations in turn */
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(serves_metrics_and_probes),
      cmocka_unit_test(failing_readiness_check_answers_500),
      cmocka_unit_test(healthz_checks_and_names),
      cmocka_unit_test(unknown_paths_and_methods),
      cmocka_unit_test(metrics_endpoint_absent_without_registry),
      cmocka_unit_test(bad_address_is_a_clear_error),
      cmocka_unit_test(stops_cleanly_from_any_thread_and_restarts),
      cmocka_unit_test(stop_from_a_check_is_refused),
      cmocka_unit_test(listens_on_all_interfaces),
      cmocka_unit_test(concurrent_scrapes),
      cmocka_unit_test(listen_binds_now_and_start_serves_that_socket),
      cmocka_unit_test(listen_errors_name_the_address),
      cmocka_unit_test(listen_permission_denied_names_the_address),
      cmocka_unit_test(listen_start_stop_in_every_order),
      cmocka_unit_test(lifecycle_survives_allocation_failures),
      cmocka_unit_test(handlers_take_posts_with_their_body),
      cmocka_unit_test(handler_paths_are_checked),
      cmocka_unit_test(stop_lets_answers_in_flight_finish),
      cmocka_unit_test(a_kept_alive_post_is_not_swept_for_its_idle_time),
      cmocka_unit_test(bodies_in_flight_share_one_budget),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
