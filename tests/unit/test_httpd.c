/* The health and metrics HTTP server, spoken to with libcurl on loopback. */
#include <curl/curl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "kcr/httpd.h"
#include "kcr/log.h"
#include "kcr/metrics.h"

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

/* method: "GET", "HEAD", "POST", ... */
static void fetch(int port, const char *method, const char *path, struct reply *r)
{
  CURL *c = curl_easy_init();
  char url[256];
  char *ct = NULL;

  memset(r, 0, sizeof(*r));
  assert_non_null(c);
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
  kcr_metrics *reg = kcr_metrics_new();
  kcr_metric *c = kcr_metric_counter(reg, "reconcile_total", "Reconciliations",
                                     (const char *const[]){"controller", NULL});
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
  kcr_metrics *reg = kcr_metrics_new();
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
  assert_int_equal(KCR_EINVAL, kcr_httpd_new(NULL, &h1, NULL));

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

static void *scraper(void *arg)
{
  struct scrape *s = arg;
  for(int i = 0; i < 25; i++) {
    struct reply r;
    kcr_metric_inc(s->c, NULL, 1);
    fetch(s->port, "GET", (i & 1) ? "/metrics" : "/readyz", &r);
    if(r.code != 200)
      return (void *)1;
    reply_cleanup(&r);
  }
  return NULL;
}

static void concurrent_scrapes(void **state)
{
  kcr_metrics *reg = kcr_metrics_new();
  struct scrape s = {0, kcr_metric_counter(reg, "scrapes_total", "Scrapes", NULL)};
  struct flag ready = {true, NULL};
  kcr_httpd *h = start("127.0.0.1:0", reg);
  pthread_t t[4];
  void *ret;

  s.port = kcr_httpd_port(h);
  for(int i = 0; i < 4; i++)
    assert_int_equal(0, pthread_create(&t[i], NULL, scraper, &s));
  /* Registering while requests run is allowed. */
  assert_int_equal(KCR_OK, kcr_httpd_add_readyz(h, "late", check_flag, &ready));
  for(int i = 0; i < 4; i++) {
    pthread_join(t[i], &ret);
    assert_null(ret);
  }
  assert_true(100 == kcr_metric_value(s.c, NULL));
  kcr_httpd_free(h);
  kcr_metrics_free(reg);
}

static int setup(void **state) { return curl_global_init(CURL_GLOBAL_DEFAULT) ? -1 : 0; }

static int teardown(void **state)
{
  curl_global_cleanup();
  return 0;
}

int main(void)
{
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
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
