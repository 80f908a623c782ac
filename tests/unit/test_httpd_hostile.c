/* The health and metrics server against hostile clients: slow clients that
 * hold connections open (slowloris) must not keep the probes out, and
 * aborted connections must not flood the log. Clients and the prober all
 * come from 127.0.0.1, as on a node where the attacker shares the kubelet's
 * address. */
#include <arpa/inet.h>
#include <curl/curl.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "kcr/buf.h"
#include "kcr/httpd.h"
#include "kcr/log.h"
#include "kcr/metrics.h"
#include "kcr/time.h"
#include "twait.h"

/* A blocking TCP connection to 127.0.0.1:port from the local address src
 * (NULL: any), reads timing out after 10 s; -1 on failure. */
static int dial_from(const char *src, int port)
{
  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  struct sockaddr_in from = {.sin_family = AF_INET};
  struct timeval tv = {10, 0};
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

  if(fd < 0)
    return -1;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  (void)setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  if((src && (inet_pton(AF_INET, src, &from.sin_addr) != 1 ||
              bind(fd, (struct sockaddr *)&from, sizeof(from)))) ||
     connect(fd, (struct sockaddr *)&sa, sizeof(sa))) {
    close(fd);
    return -1;
  }
  return fd;
}

static int dial(int port) { return dial_from(NULL, port); }

/* Opens n connections from src that each send the start of a request. */
static void open_stalled(const char *src, int port, int *fd, int n)
{
  static const char part[] = "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ";

  for(int k = 0; k < n; k++) {
    fd[k] = dial_from(src, port);
    assert_true(fd[k] >= 0);
    assert_int_equal((ssize_t)strlen(part),
                     send(fd[k], part, strlen(part), MSG_NOSIGNAL));
  }
}

/* Waits (10 s at most) until the server has closed `want` of the n
 * connections; closes those and sets them to -1. Returns how many it
 * closed. */
static int wait_closed(int *fd, int n, int want)
{
  uint64_t deadline = kcr_time_mono_ms() + 10000;
  struct pollfd pfd[512];
  int closed = 0;
  char b[64];

  assert_true(n <= 512);
  while(closed < want && kcr_time_mono_ms() < deadline) {
    for(int k = 0; k < n; k++)
      pfd[k] = (struct pollfd){.fd = fd[k], .events = POLLIN};
    if(poll(pfd, (nfds_t)n, 100) <= 0)
      continue;
    for(int k = 0; k < n; k++) {
      if(fd[k] < 0 || !pfd[k].revents)
        continue;
      ssize_t r = recv(fd[k], b, sizeof(b), MSG_DONTWAIT);
      if(r == 0 || (r < 0 && errno != EAGAIN)) {
        close(fd[k]);
        fd[k] = -1;
        closed++;
      }
    }
  }
  return closed;
}

static void close_all(int *fd, int n)
{
  for(int k = 0; k < n; k++)
    if(fd[k] >= 0)
      close(fd[k]);
}

static size_t on_data(char *p, size_t sz, size_t n, void *ud)
{
  return kcr_buf_append(ud, p, sz * n) ? 0 : sz * n;
}

/* GET path into body; the HTTP status, 0 when there was no answer within
 * 10 s (the bound: about 10x what a loaded machine needs, 45 s before the fix). */
static long get(int port, const char *path, struct kcr_buf *body)
{
  CURL *c = curl_easy_init();
  char url[128];
  long code = 0;

  assert_non_null(c);
  snprintf(url, sizeof(url), "http://127.0.0.1:%d%s", port, path);
  curl_easy_setopt(c, CURLOPT_URL, url);
  curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
  curl_easy_setopt(c, CURLOPT_TIMEOUT, 10L);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, body);
  if(curl_easy_perform(c) == CURLE_OK)
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
  curl_easy_cleanup(c);
  return code;
}

/* ---- slowloris ------------------------------------------------------------ */

#define SLOW_CONNS 100
#define TRICKLE_MS 200

/* The request the slow clients never finish: a byte every TRICKLE_MS, the
 * last header growing forever. */
static const char slow_req[] = "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ";

struct trickle {
  int fd[SLOW_CONNS]; /* -1 once the server closed it */
  pthread_mutex_t mu;
  pthread_cond_t cv; /* CLOCK_MONOTONIC */
  int rounds;        /* rounds of one byte per connection sent */
  bool stop;
};

static void *trickler(void *arg)
{
  struct trickle *t = arg;
  struct timespec next;

  pthread_mutex_lock(&t->mu);
  for(size_t i = 0; !t->stop; i++) {
    char b = i < sizeof(slow_req) - 1 ? slow_req[i] : 'a';
    pthread_mutex_unlock(&t->mu);
    for(int k = 0; k < SLOW_CONNS; k++)
      if(t->fd[k] >= 0 && send(t->fd[k], &b, 1, MSG_NOSIGNAL) != 1) {
        close(t->fd[k]);
        t->fd[k] = -1;
      }
    pthread_mutex_lock(&t->mu);
    t->rounds++;
    pthread_cond_broadcast(&t->cv);
    /* The attack's pace, not synchronisation: wake early only to stop. */
    next = kcr_time_mono_after(TRICKLE_MS);
    while(!t->stop && pthread_cond_timedwait(&t->cv, &t->mu, &next) != ETIMEDOUT)
      ;
  }
  pthread_mutex_unlock(&t->mu);
  return NULL;
}

static void probes_answer_while_slow_clients_hold_connections(void **state)
{
  kcr_metrics *reg = NULL;
  assert_int_equal(KCR_OK, kcr_metrics_new(NULL, &reg, NULL));
  struct kcr_httpd_opts o = {"127.0.0.1:0", reg};
  struct kcr_buf body = KCR_BUF_INIT;
  struct trickle t = {.rounds = 0};
  enum kcr_log_level lvl = kcr_log_get_level();
  pthread_t th;
  kcr_httpd *h = NULL;
  long code[3];
  bool said_ok;
  int port;

  kcr_log_set_level(KCR_LOG_OFF);
  assert_int_equal(KCR_OK, kcr_httpd_new(&o, &h, NULL));
  assert_int_equal(KCR_OK, kcr_httpd_start(h, NULL));
  port = kcr_httpd_port(h);
  for(int k = 0; k < SLOW_CONNS; k++)
    assert_true((t.fd[k] = dial(port)) >= 0);
  tlock_init(&t.mu, &t.cv);
  assert_int_equal(0, pthread_create(&th, NULL, trickler, &t));

  /* Every slow client has sent a few bytes of its request. */
  pthread_mutex_lock(&t.mu);
  while(t.rounds < 3)
    pthread_cond_wait(&t.cv, &t.mu);
  pthread_mutex_unlock(&t.mu);

  code[0] = get(port, "/healthz", &body);
  said_ok = !strcmp("ok", kcr_buf_str(&body));
  kcr_buf_reset(&body);
  code[1] = get(port, "/metrics", &body);
  kcr_buf_reset(&body);
  code[2] = get(port, "/readyz", &body);

  pthread_mutex_lock(&t.mu);
  t.stop = true;
  pthread_cond_broadcast(&t.cv);
  pthread_mutex_unlock(&t.mu);
  pthread_join(th, NULL);
  for(int k = 0; k < SLOW_CONNS; k++)
    if(t.fd[k] >= 0)
      close(t.fd[k]);
  kcr_httpd_free(h);
  kcr_log_set_level(lvl);
  pthread_cond_destroy(&t.cv);
  pthread_mutex_destroy(&t.mu);
  assert_int_equal(200, code[0]);
  assert_true(said_ok);
  assert_int_equal(200, code[1]);
  assert_int_equal(200, code[2]);
  kcr_buf_cleanup(&body);
  kcr_metrics_free(reg);
}

/* ---- who is closed to make room ------------------------------------------- */

#define STALLED     100
#define PER_ADDRESS 32 /* the server keeps this many connections per address */

static long get_on(CURL *c, int port, const char *path)
{
  struct kcr_buf body = KCR_BUF_INIT;
  char url[128];
  long code = 0;

  snprintf(url, sizeof(url), "http://127.0.0.1:%d%s", port, path);
  curl_easy_setopt(c, CURLOPT_URL, url);
  curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
  curl_easy_setopt(c, CURLOPT_TIMEOUT, 10L);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &body);
  if(curl_easy_perform(c) == CURLE_OK)
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
  kcr_buf_cleanup(&body);
  return code;
}

static void slow_clients_only_close_their_own_connections(void **state)
{
  static const char head[] = "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n";
  enum kcr_log_level lvl = kcr_log_get_level();
  struct kcr_buf got = KCR_BUF_INIT;
  kcr_httpd *h = NULL;
  int fd[STALLED], port, closed, mine;
  char b[512];
  ssize_t n;

  kcr_log_set_level(KCR_LOG_OFF);
  assert_int_equal(
      KCR_OK, kcr_httpd_new(&(struct kcr_httpd_opts){"127.0.0.1:0", NULL}, &h, NULL));
  assert_int_equal(KCR_OK, kcr_httpd_start(h, NULL));
  port = kcr_httpd_port(h);
  /* A client at 127.0.0.1 has sent all of its request but the last line:
   * the oldest connection waiting for a request. */
  mine = dial(port);
  assert_true(mine >= 0);
  assert_int_equal((ssize_t)strlen(head), send(mine, head, strlen(head), MSG_NOSIGNAL));
  /* Another address opens connections and never finishes a request: the
   * server closes its oldest beyond PER_ADDRESS, not 127.0.0.1's. */
  open_stalled("127.0.0.2", port, fd, STALLED);
  closed = wait_closed(fd, STALLED, STALLED - PER_ADDRESS);
  if(send(mine, "\r\n", 2, MSG_NOSIGNAL) == 2)
    while(!strstr(kcr_buf_str(&got), "\r\n\r\nok") && (n = read(mine, b, sizeof(b))) > 0)
      assert_int_equal(KCR_OK, kcr_buf_append(&got, b, (size_t)n));
  close(mine);
  close_all(fd, STALLED);
  kcr_httpd_free(h);
  kcr_log_set_level(lvl);
  assert_int_equal(STALLED - PER_ADDRESS, closed);
  if(strncmp(kcr_buf_str(&got), "HTTP/1.1 200 ", 13))
    fail_msg("127.0.0.1's request: \"%s\"", kcr_buf_str(&got));
  kcr_buf_cleanup(&got);
}

struct gate {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  bool entered, open;
};

static bool check_gate(void *ud, char *reason, size_t n)
{
  struct gate *g = ud;
  pthread_mutex_lock(&g->mu);
  g->entered = true;
  pthread_cond_broadcast(&g->cv);
  while(!g->open)
    pthread_cond_wait(&g->cv, &g->mu);
  pthread_mutex_unlock(&g->mu);
  return true;
}

struct call {
  int port;
  long code;
};

static void *call_gate(void *arg)
{
  struct call *c = arg;
  CURL *h = curl_easy_init();
  if(h) {
    c->code = get_on(h, c->port, "/healthz/gate");
    curl_easy_cleanup(h);
  }
  return NULL;
}

static void a_request_being_answered_is_not_closed_for_slow_clients(void **state)
{
  struct gate g = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false, false};
  enum kcr_log_level lvl = kcr_log_get_level();
  kcr_httpd *h = NULL;
  struct call c = {0, 0};
  int fd[STALLED], closed;
  pthread_t t;

  kcr_log_set_level(KCR_LOG_OFF);
  assert_int_equal(
      KCR_OK, kcr_httpd_new(&(struct kcr_httpd_opts){"127.0.0.1:0", NULL}, &h, NULL));
  assert_int_equal(KCR_OK, kcr_httpd_add_healthz(h, "gate", check_gate, &g));
  assert_int_equal(KCR_OK, kcr_httpd_start(h, NULL));
  c.port = kcr_httpd_port(h);
  assert_int_equal(0, pthread_create(&t, NULL, call_gate, &c));
  pthread_mutex_lock(&g.mu);
  while(!g.entered)
    pthread_cond_wait(&g.cv, &g.mu);
  pthread_mutex_unlock(&g.mu);
  /* The oldest connection of 127.0.0.1 is the one being answered; making
   * room for newer stalled ones closes stalled ones only. */
  open_stalled(NULL, c.port, fd, STALLED);
  closed = wait_closed(fd, STALLED, STALLED + 1 - PER_ADDRESS);
  pthread_mutex_lock(&g.mu);
  g.open = true;
  pthread_cond_broadcast(&g.cv);
  pthread_mutex_unlock(&g.mu);
  pthread_join(t, NULL);
  close_all(fd, STALLED);
  kcr_httpd_free(h);
  kcr_log_set_level(lvl);
  assert_int_equal(STALLED + 1 - PER_ADDRESS, closed);
  assert_int_equal(200, c.code);
}

/* ---- aborted connections and the log -------------------------------------- */

#define ABORTS 100

static size_t count_lines(const char *s, const char *needle)
{
  size_t n = 0;

  for(const char *line = s; *line;) {
    const char *end = strchr(line, '\n');
    size_t len = end ? (size_t)(end - line) : strlen(line);
    const char *hit = strstr(line, needle);
    if(hit && hit < line + len)
      n++;
    line += len + (end ? 1 : 0);
  }
  return n;
}

/* One connection aborted in the middle of a request, seen by the server
 * before this returns: we send the start of a request and our end of
 * stream; the server's end of stream tells us it has noticed (and logged)
 * the abort. */
static void abort_a_request(int port)
{
  static const char part[] = "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Cut: ";
  char b[256];
  ssize_t n;
  int fd = dial(port);

  assert_true(fd >= 0);
  assert_int_equal((ssize_t)strlen(part), send(fd, part, strlen(part), MSG_NOSIGNAL));
  assert_int_equal(0, shutdown(fd, SHUT_WR));
  n = read(fd, b, sizeof(b));
  if(n != 0)
    fail_msg("read %zd (%s): the server did not close", n,
             n < 0 ? strerror(errno) : "data");
  close(fd);
}

static void aborted_connections_do_not_flood_the_log(void **state)
{
  enum kcr_log_level lvl = kcr_log_get_level();
  struct kcr_buf log = KCR_BUF_INIT;
  FILE *f = tmpfile();
  kcr_httpd *h = NULL;
  char b[256];
  size_t n, lines;
  bool ok;

  assert_non_null(f);
  kcr_log_set_fd(fileno(f));
  kcr_log_set_level(KCR_LOG_WARN);
  assert_int_equal(
      KCR_OK, kcr_httpd_new(&(struct kcr_httpd_opts){"127.0.0.1:0", NULL}, &h, NULL));
  assert_int_equal(KCR_OK, kcr_httpd_start(h, NULL));
  for(int i = 0; i < ABORTS; i++)
    abort_a_request(kcr_httpd_port(h));
  kcr_httpd_free(h); /* writes the summary of what was held back */
  kcr_log_set_fd(2);
  kcr_log_set_level(lvl);

  rewind(f);
  while((n = fread(b, 1, sizeof(b), f)) > 0)
    assert_int_equal(KCR_OK, kcr_buf_append(&log, b, n));
  fclose(f);
  /* The first occurrence, then one summary with the count. */
  lines = count_lines(kcr_buf_str(&log), "http server");
  ok = lines == 2 && strstr(kcr_buf_str(&log), "suppressed=99 ");
  if(!ok)
    print_message("%zu lines for %d aborted connections:\n%s", lines, ABORTS,
                  kcr_buf_str(&log));
  kcr_buf_cleanup(&log);
  assert_true(ok);
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
      cmocka_unit_test(probes_answer_while_slow_clients_hold_connections),
      cmocka_unit_test(slow_clients_only_close_their_own_connections),
      cmocka_unit_test(a_request_being_answered_is_not_closed_for_slow_clients),
      cmocka_unit_test(aborted_connections_do_not_flood_the_log),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
