/* DESIGN: chaosproxy - a fault-injecting HTTPS proxy between Kubernetes
 * clients (ebdman, vfm-sim, tests) and the apiserver, on loopback only.
 *
 *   chaosproxy --upstream https://127.0.0.1:6443 --ca-cert pki/ca.crt \
 *              --ca-key pki/ca.key [--rules FILE] [--seed N] [--ready-file F]
 *
 * TLS on both sides. At start it mints its own serving certificate (EC
 * P-256, for 127.0.0.1 and localhost) with the control plane's CA, so a
 * kubeconfig that trusts that CA trusts the proxy: the operator under test
 * runs unmodified with `server:` pointing here. Clients get ALPN http/1.1
 * only, so libcurl and Go speak HTTP/1.1 (one request at a time per
 * connection, which is what lets the proxy act on each one). Upstream it
 * verifies the apiserver against the same CA.
 *
 * Identities (what the apiserver sees):
 *  - bearer tokens (ServiceAccount token kubeconfigs) pass through
 *    unchanged in the Authorization header;
 *  - a client certificate ends at the proxy (TLS is terminated here), so
 *    the proxy asks for one and, when the client presents one signed by the
 *    CA, mints a copy - same subject (user and groups), same validity
 *    (notBefore, notAfter: an expired certificate stays expired), a fresh
 *    key - signed by the CA, and presents it upstream. The admin kubeconfig
 *    (O=system:masters) works, and an expired client certificate is refused
 *    by the real apiserver as it would be without the proxy. A certificate
 *    the CA did not sign is not forwarded (the request goes on without one).
 *  - no credentials: anonymous, as without the proxy.
 *
 * Shape: one thread per client connection (tests open tens, not thousands),
 * each with its own upstream connection, opened on the first request and
 * kept alive as long as both sides allow. Sockets are non-blocking; every
 * wait is a poll() with a deadline, and while a response streams (a watch)
 * the client's socket is polled too, so a client that hangs up ends the
 * upstream request at once.
 *
 * Messages: requests are read whole (head and body; a chunked request body
 * is forwarded with a Content-Length), hop-by-hop headers (Connection,
 * Keep-Alive, Expect - answered here with 100 Continue - TE, Upgrade) are
 * dropped, and Accept-Encoding is dropped so bodies come back plain and a
 * garbled body is garbled JSON rather than a broken gzip stream. Responses
 * are streamed in the framing the apiserver chose (Content-Length, chunked,
 * or to the end of the connection); 1xx answers and upgrades (exec,
 * port-forward) are not supported.
 *
 * Faults: per request the rules (rules.h) choose at most one fault, drawn
 * from a generator seeded by --seed under the proxy's lock. A fault is
 * counted when it takes effect: a truncation of a body that ended first, or
 * a cut of a watch that ended first, is not counted.
 *
 * Control: SIGHUP re-reads the rules file (a bad file keeps the rules in
 * effect and is counted as result="error"); SIGTERM/SIGINT stop. The counts
 * are Prometheus metrics on --metrics-bind-address (kcr_httpd):
 *   chaosproxy_requests_total{agent,verb}     requests read from clients
 *   chaosproxy_forwarded_total{agent,verb}    requests sent to the apiserver
 *   chaosproxy_injected_total{agent,verb,fault} faults (delay, reset,
 *                                             status_<code>, truncate,
 *                                             garble, drip, cut)
 *   chaosproxy_responses_total{agent,code}    response heads written to
 *                                             clients, forwarded or injected
 *   chaosproxy_connections_total{result}      client connections: ok, or
 *                                             tls_failed (handshake refused,
 *                                             e.g. a client with another CA)
 *   chaosproxy_upstream_errors_total{agent}   apiserver unreachable: 502 sent
 *   chaosproxy_rules_loads_total{result}      rule files read: ok, error
 *   chaosproxy_rules                          rules in effect
 * agent is the product of the request's User-Agent ("ebdman").
 *
 * Locks: p->mu guards the rules and the generator, the connection list and
 * the identity cache; it is never held during I/O or while minting. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "kcr/buf.h"
#include "kcr/cli.h"
#include "kcr/httpd.h"
#include "kcr/log.h"
#include "kcr/metrics.h"
#include "kcr/time.h"
#include "rules.h"

#define HEAD_MAX      (64 << 10)
#define BODY_MAX      ((size_t)64 << 20)
#define IO_TIMEOUT_MS 60000  /* a write, a handshake, the rest of a line */
#define RESP_WAIT_MS  300000 /* the apiserver's answer to a request */
#define PARTIAL_DOC   "{\"type\":\"MODIFIED\",\"object\":{\"kind\":"

struct ident { /* a client certificate and the copy presented upstream */
  unsigned char fp[32];
  X509 *cert;
  EVP_PKEY *key;
};

struct peer {
  SSL *ssl;
  int fd;
  uint64_t rx; /* bytes read so far */
  size_t r, w; /* unread bytes: buf[r..w) */
  char buf[16384];
};

struct proxy;

struct conn {
  struct proxy *p;
  struct peer cl, up;
  const struct ident *id;   /* borrowed from p->ids, or NULL */
  long drip_bytes, drip_ms; /* while a drip fault writes */
  struct conn *prev, *next;
};

struct proxy {
  /* set up before any thread starts */
  SSL_CTX *srv, *upctx;
  X509 *ca;
  EVP_PKEY *ca_key;
  char *up_host, *up_port;
  const char *rules_path;
  kcr_metrics *reg;
  kcr_metric *m_req, *m_fwd, *m_inj, *m_resp, *m_conns, *m_uperr, *m_loads, *m_rules;
  atomic_bool stopping;
  atomic_ullong n_req, n_fwd, n_inj; /* totals for the exit summary */

  pthread_mutex_t mu;
  pthread_cond_t cv; /* nconns dropped */
  struct chaos_rules *rules;
  uint64_t rng;
  struct conn *conns;
  size_t nconns;
  struct ident *ids;
  size_t nids;
};

/* ---- small helpers ---- */

static void sleep_ms(struct proxy *p, long ms)
{
  while(ms > 0 && !atomic_load(&p->stopping)) {
    long step = ms < 100 ? ms : 100;
    struct timespec ts = {0, step * 1000000L};
    nanosleep(&ts, NULL);
    ms -= step;
  }
}

static int left_ms(uint64_t deadline)
{
  uint64_t now = kcr_time_mono_ms();
  if(deadline == UINT64_MAX)
    return -1;
  return now >= deadline ? 0 : (int)(deadline - now);
}

static uint64_t deadline_in(int ms)
{
  return ms < 0 ? UINT64_MAX : kcr_time_mono_ms() + ms;
}

/* The text for errno value err (a per-thread buffer). */
static const char *errstr(int err)
{
  static _Thread_local char b[128];
  return strerror_r(err, b, sizeof(b));
}

static const char *ossl_err(void)
{
  static _Thread_local char b[256];
  unsigned long e = ERR_get_error();
  if(!e)
    return errno ? errstr(errno) : "connection closed";
  ERR_error_string_n(e, b, sizeof(b));
  return b;
}

/* ---- TLS I/O on non-blocking sockets ---- */

/* Waits until fd is ready for what SSL asked for: 1 ready, 0 timeout, -1 error. */
static int wait_fd(int fd, int ssl_err, int timeout_ms)
{
  struct pollfd pf = {fd, ssl_err == SSL_ERROR_WANT_WRITE ? POLLOUT : POLLIN, 0};
  int n;
  do
    n = poll(&pf, 1, timeout_ms);
  while(n < 0 && errno == EINTR);
  return n < 0 ? -1 : n > 0;
}

/* Runs a handshake step (SSL_accept/SSL_connect) to its end: 0 ok, -1 failed. */
static int handshake(SSL *ssl, int fd, int (*step)(SSL *))
{
  uint64_t deadline = deadline_in(IO_TIMEOUT_MS);
  for(;;) {
    int r, e;
    ERR_clear_error();
    if((r = step(ssl)) == 1)
      return 0;
    e = SSL_get_error(ssl, r);
    if((e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE) ||
       wait_fd(fd, e, left_ms(deadline)) <= 0)
      return -1;
  }
}

/* Reads what is there (at most n): > 0 bytes, 0 end of stream, -1 error,
 * -2 timeout. */
static ssize_t peer_recv(struct peer *pe, void *dst, size_t n, int timeout_ms)
{
  uint64_t deadline = deadline_in(timeout_ms);
  for(;;) {
    size_t got = 0;
    int e, w;
    ERR_clear_error();
    if(SSL_read_ex(pe->ssl, dst, n, &got))
      return (ssize_t)got;
    e = SSL_get_error(pe->ssl, 0);
    if(e == SSL_ERROR_ZERO_RETURN)
      return 0;
    if(e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE)
      return -1;
    w = wait_fd(pe->fd, e, left_ms(deadline));
    if(w <= 0)
      return w ? -1 : -2;
  }
}

static int peer_send(struct peer *pe, const void *data, size_t n)
{
  const char *p = data;
  uint64_t deadline = deadline_in(IO_TIMEOUT_MS);
  while(n) {
    size_t put = 0;
    int e;
    ERR_clear_error();
    if(SSL_write_ex(pe->ssl, p, n, &put)) {
      p += put;
      n -= put;
      continue;
    }
    e = SSL_get_error(pe->ssl, 0);
    if((e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE) ||
       wait_fd(pe->fd, e, left_ms(deadline)) <= 0)
      return -1;
  }
  return 0;
}

/* Buffers more of the stream: as peer_recv. */
static ssize_t fill(struct peer *pe, int timeout_ms)
{
  ssize_t n;
  if(pe->r == pe->w)
    pe->r = pe->w = 0;
  if(pe->w == sizeof(pe->buf)) {
    memmove(pe->buf, pe->buf + pe->r, pe->w - pe->r);
    pe->w -= pe->r;
    pe->r = 0;
  }
  n = peer_recv(pe, pe->buf + pe->w, sizeof(pe->buf) - pe->w, timeout_ms);
  if(n > 0) {
    pe->w += (size_t)n;
    pe->rx += (uint64_t)n;
  }
  return n;
}

static bool buffered(const struct peer *pe)
{
  return pe->r < pe->w || (pe->ssl && SSL_pending(pe->ssl) > 0);
}

/* Up to max bytes of the stream, pointed to in pe->buf (valid until the
 * next read): as peer_recv. */
static ssize_t take(struct peer *pe, size_t max, const char **out, int timeout_ms)
{
  size_t k;
  if(pe->r == pe->w) {
    ssize_t n = fill(pe, timeout_ms);
    if(n <= 0)
      return n;
  }
  k = pe->w - pe->r < max ? pe->w - pe->r : max;
  *out = pe->buf + pe->r;
  pe->r += k;
  return (ssize_t)k;
}

/* One line without its CRLF into line: 1 ok, 0 end of stream before any
 * byte, -1 error (also a line over max, or the stream ending in a line). */
static int read_line(struct peer *pe, struct kcr_buf *line, size_t max, int timeout_ms)
{
  uint64_t deadline = deadline_in(timeout_ms);
  kcr_buf_reset(line);
  for(;;) {
    char *nl = memchr(pe->buf + pe->r, '\n', pe->w - pe->r);
    size_t n = nl ? (size_t)(nl - (pe->buf + pe->r)) : pe->w - pe->r;
    ssize_t got;
    if(line->len + n > max || kcr_buf_append(line, pe->buf + pe->r, n))
      return -1;
    pe->r += n;
    if(nl) {
      pe->r++;
      if(line->len && line->ptr[line->len - 1] == '\r')
        line->ptr[--line->len] = '\0';
      if(!line->ptr && kcr_buf_puts(line, ""))
        return -1;
      return 1;
    }
    got = fill(pe, left_ms(deadline));
    if(got <= 0)
      return got == 0 && !line->len ? 0 : -1;
  }
}

/* ---- HTTP messages ---- */

struct head {
  struct kcr_buf raw; /* start line and the headers to send on, no blank line */
  char method[16];
  char *target;
  int code;
  long long clen; /* -1: none */
  bool chunked, close, expect100;
  char ua[256];
};

static void head_cleanup(struct head *h)
{
  kcr_buf_cleanup(&h->raw);
  free(h->target);
  memset(h, 0, sizeof(*h));
}

static bool hdr_is(const char *line, size_t nlen, const char *name)
{
  return strlen(name) == nlen && !strncasecmp(line, name, nlen);
}

static bool has_token(const char *v, const char *tok)
{
  size_t n = strlen(tok);
  for(const char *s = v; (s = strcasestr(s, tok)); s += n)
    if((s == v || s[-1] == ' ' || s[-1] == ',') && (!s[n] || s[n] == ',' || s[n] == ' '))
      return true;
  return false;
}

/* Reads a request (request=true) or response head: 1 ok, 0 the stream ended
 * before it began, -1 malformed or failed. */
static int read_head(struct peer *pe, bool request, struct head *h, int timeout_ms)
{
  struct kcr_buf line = KCR_BUF_INIT;
  size_t total = 0;
  int r, rc = -1;

  memset(h, 0, sizeof(*h));
  h->clen = -1;
  r = read_line(pe, &line, HEAD_MAX, timeout_ms);
  if(r <= 0) {
    rc = r;
    goto out;
  }
  if(request) {
    char *sp1 = strchr(line.ptr, ' '), *sp2 = sp1 ? strchr(sp1 + 1, ' ') : NULL;
    if(!sp2 || sp1 - line.ptr >= (long)sizeof(h->method) || sp1[1] != '/' ||
       strncmp(sp2 + 1, "HTTP/1.", 7))
      goto out;
    snprintf(h->method, sizeof(h->method), "%.*s", (int)(sp1 - line.ptr), line.ptr);
    if(!(h->target = strndup(sp1 + 1, (size_t)(sp2 - sp1 - 1))))
      goto out;
    h->close = !strcmp(sp2 + 1, "HTTP/1.0");
  } else {
    if(strncmp(line.ptr, "HTTP/1.", 7) || line.len < 12)
      goto out;
    h->code = (int)strtol(line.ptr + 9, NULL, 10);
    h->close = !strncmp(line.ptr, "HTTP/1.0", 8);
  }
  kcr_buf_printf(&h->raw, "%s\r\n", line.ptr);
  for(;;) {
    char *colon, *v;
    size_t nlen;
    if(read_line(pe, &line, HEAD_MAX, IO_TIMEOUT_MS) <= 0)
      goto out;
    if(!line.len)
      break;
    if((total += line.len) > HEAD_MAX || !(colon = strchr(line.ptr, ':')))
      goto out;
    nlen = (size_t)(colon - line.ptr);
    for(v = colon + 1; *v == ' ' || *v == '\t'; v++)
      ;
    if(hdr_is(line.ptr, nlen, "connection") || hdr_is(line.ptr, nlen, "keep-alive") ||
       hdr_is(line.ptr, nlen, "proxy-connection")) {
      if(has_token(v, "close"))
        h->close = true;
      continue;
    }
    if(hdr_is(line.ptr, nlen, "transfer-encoding")) {
      h->chunked = has_token(v, "chunked");
      if(request)
        continue; /* the body goes on with a Content-Length */
    } else if(hdr_is(line.ptr, nlen, "content-length")) {
      char *end;
      h->clen = strtoll(v, &end, 10);
      if(end == v || *end || h->clen < 0)
        goto out;
      if(request)
        continue;
    } else if(request &&
              (hdr_is(line.ptr, nlen, "expect") || hdr_is(line.ptr, nlen, "te") ||
               hdr_is(line.ptr, nlen, "upgrade") ||
               hdr_is(line.ptr, nlen, "accept-encoding"))) {
      h->expect100 |= hdr_is(line.ptr, nlen, "expect") && has_token(v, "100-continue");
      continue;
    } else if(hdr_is(line.ptr, nlen, "user-agent")) {
      snprintf(h->ua, sizeof(h->ua), "%s", v);
    }
    kcr_buf_printf(&h->raw, "%s\r\n", line.ptr);
  }
  if(h->chunked)
    h->clen = -1;
  rc = kcr_buf_err(&h->raw) ? -1 : 1;
out:
  kcr_buf_cleanup(&line);
  if(rc != 1)
    head_cleanup(h);
  return rc;
}

/* The size of the next chunk (its line read): >= 0, or -1. */
static long long chunk_size(struct peer *pe, struct kcr_buf *line)
{
  char *end;
  long long n;
  if(read_line(pe, line, 1024, IO_TIMEOUT_MS) <= 0)
    return -1;
  n = strtoll(line->ptr, &end, 16);
  return end == line->ptr || n < 0 || (*end && *end != ';' && *end != ' ') ? -1 : n;
}

/* Reads exactly n bytes into b (appended). 0 ok, -1 failed. */
static int read_exact(struct peer *pe, size_t n, struct kcr_buf *b)
{
  while(n) {
    const char *p;
    ssize_t k = take(pe, n, &p, IO_TIMEOUT_MS);
    if(k <= 0 || kcr_buf_append(b, p, (size_t)k))
      return -1;
    n -= (size_t)k;
  }
  return 0;
}

/* The request body, decoded: 0 ok, -1 failed. */
static int read_body(struct peer *pe, const struct head *h, struct kcr_buf *body)
{
  struct kcr_buf line = KCR_BUF_INIT;
  int rc = -1;

  if(!h->chunked) {
    rc = h->clen > (long long)BODY_MAX
             ? -1
             : read_exact(pe, h->clen > 0 ? (size_t)h->clen : 0, body);
    goto out;
  }
  for(;;) {
    long long n = chunk_size(pe, &line);
    if(n < 0 || body->len + (size_t)n > BODY_MAX)
      goto out;
    if(!n)
      break;
    if(read_exact(pe, (size_t)n, body) || read_line(pe, &line, 2, IO_TIMEOUT_MS) <= 0 ||
       line.len)
      goto out;
  }
  do /* trailers */
    if(read_line(pe, &line, HEAD_MAX, IO_TIMEOUT_MS) <= 0)
      goto out;
  while(line.len);
  rc = 0;
out:
  kcr_buf_cleanup(&line);
  return rc;
}

/* ---- counting ---- */

static void count_injected(struct conn *c, const struct chaos_req *rq,
                           const struct chaos_action *a)
{
  char name[16];
  chaos_fault_name(a, name);
  kcr_metric_inc(c->p->m_inj,
                 (const char *[]){rq->agent, chaos_verb_name(rq->verb), name}, 1);
  atomic_fetch_add(&c->p->n_inj, 1);
  KCR_LOG(KCR_LOG_DEBUG, "chaosproxy: fault injected", KCR_S("fault", name),
          KCR_I("rule", a->line), KCR_S("agent", rq->agent),
          KCR_S("verb", chaos_verb_name(rq->verb)), KCR_S("target", rq->target));
}

static void count_response(struct conn *c, const struct chaos_req *rq, int code)
{
  char s[8];
  snprintf(s, sizeof(s), "%d", code);
  kcr_metric_inc(c->p->m_resp, (const char *[]){rq->agent, s}, 1);
}

/* ---- writing to the client ---- */

/* Writes to the client, bytes at a time while a drip fault is on. */
static int cl_send(struct conn *c, const void *data, size_t n)
{
  const char *p = data;
  if(!c->drip_bytes)
    return peer_send(&c->cl, p, n);
  while(n) {
    size_t k = n < (size_t)c->drip_bytes ? n : (size_t)c->drip_bytes;
    if(peer_send(&c->cl, p, k))
      return -1;
    p += k;
    n -= k;
    sleep_ms(c->p, c->drip_ms);
  }
  return 0;
}

static const char *reason_phrase(int code, const char **status_reason)
{
  *status_reason = NULL;
  switch(code) {
  case 429: *status_reason = "TooManyRequests"; return "Too Many Requests";
  case 500: *status_reason = "InternalError"; return "Internal Server Error";
  case 502: return "Bad Gateway";
  case 503: *status_reason = "ServiceUnavailable"; return "Service Unavailable";
  case 504: *status_reason = "Timeout"; return "Gateway Timeout";
  default: return "Error";
  }
}

/* Answers the request itself with code and a Status body. */
static int answer(struct conn *c, const struct chaos_req *rq, int code, long retry_after,
                  const char *message, bool close)
{
  struct kcr_buf body = KCR_BUF_INIT, out = KCR_BUF_INIT;
  const char *sreason, *phrase = reason_phrase(code, &sreason);
  int rc;

  kcr_buf_printf(&body,
                 "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},"
                 "\"status\":\"Failure\",\"message\":\"%s\"",
                 message);
  if(sreason)
    kcr_buf_printf(&body, ",\"reason\":\"%s\"", sreason);
  if(retry_after >= 0)
    kcr_buf_printf(&body, ",\"details\":{\"retryAfterSeconds\":%ld}", retry_after);
  kcr_buf_printf(&body, ",\"code\":%d}\n", code);
  kcr_buf_printf(&out, "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\n", code,
                 phrase);
  if(retry_after >= 0)
    kcr_buf_printf(&out, "Retry-After: %ld\r\n", retry_after);
  kcr_buf_printf(&out, "Content-Length: %zu\r\n%s\r\n", body.len,
                 close ? "Connection: close\r\n" : "");
  kcr_buf_append(&out, body.ptr, body.len);
  rc = kcr_buf_err(&out) ? -1 : cl_send(c, out.ptr, out.len);
  if(!rc)
    count_response(c, rq, code);
  kcr_buf_cleanup(&body);
  kcr_buf_cleanup(&out);
  return rc;
}

/* ---- connections: registry, upstream, identities ---- */

static void set_fd(struct conn *c, int *where, int fd)
{
  pthread_mutex_lock(&c->p->mu);
  *where = fd;
  pthread_mutex_unlock(&c->p->mu);
}

/* Closes a peer: close_notify when clean, a TCP reset when rst. */
static void peer_close(struct conn *c, struct peer *pe, bool rst)
{
  int fd = pe->fd;
  if(pe->ssl) {
    if(!rst && SSL_is_init_finished(pe->ssl)) {
      ERR_clear_error();
      SSL_shutdown(pe->ssl); /* non-blocking: one try */
    }
    SSL_free(pe->ssl);
    pe->ssl = NULL;
  }
  if(fd >= 0) {
    if(rst)
      setsockopt(fd, SOL_SOCKET, SO_LINGER, &(struct linger){1, 0},
                 sizeof(struct linger));
    set_fd(c, &pe->fd, -1);
    close(fd);
  }
  pe->r = pe->w = 0;
}

static int tcp_connect(const char *host, const char *port)
{
  struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res = NULL;
  int fd = -1;
  if(getaddrinfo(host, port, &hints, &res))
    return -1;
  for(struct addrinfo *a = res; a && fd < 0; a = a->ai_next) {
    fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if(fd >= 0 && connect(fd, a->ai_addr, a->ai_addrlen)) {
      close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(res);
  if(fd >= 0) {
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &(int){1}, sizeof(int));
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  }
  return fd;
}

/* Opens the upstream connection (with the client's identity): 0 or -1. */
static int up_open(struct conn *c)
{
  struct proxy *p = c->p;
  struct in6_addr a6;
  struct in_addr a4;
  int fd = tcp_connect(p->up_host, p->up_port);

  if(fd < 0) {
    KCR_LOG(KCR_LOG_WARN, "chaosproxy: cannot connect to the apiserver",
            KCR_S("host", p->up_host), KCR_S("port", p->up_port),
            KCR_S("error", errstr(errno)));
    return -1;
  }
  set_fd(c, &c->up.fd, fd);
  if(atomic_load(&p->stopping) || !(c->up.ssl = SSL_new(p->upctx)))
    goto fail;
  SSL_set_fd(c->up.ssl, fd);
  if(inet_pton(AF_INET, p->up_host, &a4) == 1 ||
     inet_pton(AF_INET6, p->up_host, &a6) == 1)
    X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(c->up.ssl), p->up_host);
  else if(!SSL_set1_host(c->up.ssl, p->up_host) ||
          !SSL_set_tlsext_host_name(c->up.ssl, p->up_host))
    goto fail;
  if(c->id && (SSL_use_certificate(c->up.ssl, c->id->cert) != 1 ||
               SSL_use_PrivateKey(c->up.ssl, c->id->key) != 1))
    goto fail;
  if(handshake(c->up.ssl, fd, SSL_connect)) {
    KCR_LOG(KCR_LOG_WARN, "chaosproxy: TLS handshake with the apiserver failed",
            KCR_S("error", ossl_err()));
    goto fail;
  }
  return 0;
fail:
  peer_close(c, &c->up, true);
  return -1;
}

/* A certificate for subject with the given validity, signed by the CA:
 * server (serverAuth, SANs 127.0.0.1 and localhost) or client (clientAuth). */
static int mint(struct proxy *p, const X509_NAME *subject, const ASN1_TIME *not_before,
                const ASN1_TIME *not_after, bool server, X509 **cert, EVP_PKEY **key)
{
  X509 *x = X509_new();
  EVP_PKEY *k = EVP_EC_gen("P-256");
  X509V3_CTX v3;
  uint64_t serial;
  static const char *const server_ext[][2] = {
      {"basicConstraints", "critical,CA:FALSE"},
      {"keyUsage", "critical,digitalSignature,keyEncipherment"},
      {"extendedKeyUsage", "serverAuth"},
      {"subjectAltName", "IP:127.0.0.1,DNS:localhost"}};
  static const char *const client_ext[][2] = {
      {"basicConstraints", "critical,CA:FALSE"},
      {"keyUsage", "critical,digitalSignature,keyEncipherment"},
      {"extendedKeyUsage", "clientAuth"}};
  const char *const(*ext)[2] = server ? server_ext : client_ext;
  size_t next = server ? 4 : 3;
  int rc = -1;

  if(!x || !k || RAND_bytes((unsigned char *)&serial, sizeof(serial)) != 1)
    goto out;
  serial >>= 1; /* positive */
  if(!X509_set_version(x, 2) ||
     !ASN1_INTEGER_set_uint64(X509_get_serialNumber(x), serial) ||
     !X509_set_subject_name(x, subject) ||
     !X509_set_issuer_name(x, X509_get_subject_name(p->ca)) ||
     !X509_set1_notBefore(x, not_before) || !X509_set1_notAfter(x, not_after) ||
     !X509_set_pubkey(x, k))
    goto out;
  X509V3_set_ctx(&v3, p->ca, x, NULL, NULL, 0);
  for(size_t i = 0; i < next; i++) {
    X509_EXTENSION *e = X509V3_EXT_conf(NULL, &v3, ext[i][0], ext[i][1]);
    int ok = e && X509_add_ext(x, e, -1);
    X509_EXTENSION_free(e);
    if(!ok)
      goto out;
  }
  if(!X509_sign(x, p->ca_key, EVP_sha256()))
    goto out;
  *cert = x;
  *key = k;
  x = NULL;
  k = NULL;
  rc = 0;
out:
  X509_free(x);
  EVP_PKEY_free(k);
  return rc;
}

/* The identity to present upstream for the client's certificate (see
 * DESIGN), from the cache or minted; NULL without one. */
static const struct ident *client_identity(struct proxy *p, SSL *ssl)
{
  X509 *peer = SSL_get1_peer_certificate(ssl);
  struct ident id = {{0}, NULL, NULL}, *found = NULL, *grown;
  unsigned fplen = 0;

  if(!peer)
    return NULL;
  if(X509_verify(peer, X509_get0_pubkey(p->ca)) != 1) {
    KCR_LOG(KCR_LOG_WARN, "chaosproxy: client certificate not signed by the CA; "
                          "forwarding without a client certificate");
    goto out;
  }
  X509_digest(peer, EVP_sha256(), id.fp, &fplen);
  pthread_mutex_lock(&p->mu);
  for(size_t i = 0; i < p->nids && !found; i++)
    if(!memcmp(p->ids[i].fp, id.fp, sizeof(id.fp)))
      found = &p->ids[i];
  pthread_mutex_unlock(&p->mu);
  if(found)
    goto out;
  if(mint(p, X509_get_subject_name(peer), X509_get0_notBefore(peer),
          X509_get0_notAfter(peer), false, &id.cert, &id.key)) {
    KCR_LOG(KCR_LOG_ERROR, "chaosproxy: cannot mint the upstream client certificate",
            KCR_S("error", ossl_err()));
    goto out;
  }
  /* Entries are never moved once handed out: a fixed-size table. */
  pthread_mutex_lock(&p->mu);
  for(size_t i = 0; i < p->nids && !found; i++)
    if(!memcmp(p->ids[i].fp, id.fp, sizeof(id.fp)))
      found = &p->ids[i];
  if(!found && p->nids < 256) {
    if(!p->ids && (grown = calloc(256, sizeof(*grown))))
      p->ids = grown;
    if(p->ids) {
      p->ids[p->nids] = id;
      found = &p->ids[p->nids++];
      id.cert = NULL;
      id.key = NULL;
    }
  }
  pthread_mutex_unlock(&p->mu);
  if(!found)
    KCR_LOG(KCR_LOG_ERROR, "chaosproxy: too many client identities (256)");
out:
  X509_free(id.cert);
  EVP_PKEY_free(id.key);
  X509_free(peer);
  return found;
}

/* ---- forwarding a response ---- */

enum body_mode { B_NONE, B_LENGTH, B_CHUNKED, B_EOF };

struct relay {
  struct conn *c;
  const struct chaos_req *rq;
  struct chaos_action *a; /* fault, CHAOS_NONE once counted or not applicable */
  bool chunked;
  uint64_t sent;     /* body bytes written */
  uint64_t limit;    /* truncate / cut after this many; UINT64_MAX: none */
  uint64_t deadline; /* cut at this time (mono ms); UINT64_MAX: none */
};

/* Writes body bytes to the client, applying the fault: 0 go on, 1 the
 * fault ended the response, -1 failed. */
static int emit(struct relay *rl, char *data, size_t n)
{
  size_t k = n;
  bool stop = false;

  if(rl->a->fault == CHAOS_GARBLE) {
    for(size_t i = 0; i < n && rl->sent + i < 4096; i++)
      if((rl->sent + i) % 61 == 0)
        data[i] = '~';
    if(n) {
      count_injected(rl->c, rl->rq, rl->a);
      rl->a->fault = CHAOS_NONE;
    }
  }
  if(rl->limit != UINT64_MAX && rl->sent + n >= rl->limit) {
    k = (size_t)(rl->limit - rl->sent);
    if(rl->a->fault == CHAOS_CUT && k >= n) /* mid-document: hold back the end */
      k = n - 1;
    stop = true;
  } else if(rl->a->fault == CHAOS_CUT && kcr_time_mono_ms() >= rl->deadline) {
    k = n / 2;
    stop = true;
  }
  if(k) {
    char hdr[24];
    int hn = snprintf(hdr, sizeof(hdr), "%zx\r\n", k);
    if((rl->chunked && cl_send(rl->c, hdr, (size_t)hn)) || cl_send(rl->c, data, k) ||
       (rl->chunked && cl_send(rl->c, "\r\n", 2)))
      return -1;
  }
  rl->sent += k;
  if(stop)
    count_injected(rl->c, rl->rq, rl->a);
  return stop;
}

/* Waits for more of the upstream's body: 1 data, 0 the cut's deadline
 * passed, -1 the client hung up or an error. */
static int wait_upstream(struct relay *rl)
{
  struct conn *c = rl->c;
  for(;;) {
    struct pollfd pf[2] = {{c->up.fd, POLLIN, 0}, {c->cl.fd, POLLIN, 0}};
    int t = rl->a->fault == CHAOS_CUT ? left_ms(rl->deadline) : -1, n;
    if(buffered(&c->up))
      return 1;
    if(t == 0)
      return 0;
    n = poll(pf, 2, t);
    if(n < 0 && errno != EINTR)
      return -1;
    if(n > 0 && pf[1].revents)
      return -1; /* HTTP/1.1 clients send nothing while an answer streams */
    if(n > 0 && pf[0].revents)
      return 1;
  }
}

/* The time-based cut of a watch: the deadline passed, so emit writes half
 * of the start of a document, counts the cut and ends the response. */
static int cut_now(struct relay *rl)
{
  char doc[] = PARTIAL_DOC;
  return emit(rl, doc, sizeof(doc) - 1) < 0 ? -1 : 1;
}

/* Reads up to n body bytes from upstream (*got: how many) and emits them:
 * as emit, plus 2 for the upstream's end of stream. */
static int pass(struct relay *rl, size_t n, size_t *got)
{
  const char *p;
  ssize_t k;
  int w = wait_upstream(rl);

  *got = 0;
  if(w <= 0)
    return w < 0 ? -1 : cut_now(rl);
  k = take(&rl->c->up, n, &p, IO_TIMEOUT_MS);
  if(k == -2)
    return 0; /* a TLS record without data: wait again */
  if(k <= 0)
    return k == 0 ? 2 : -1;
  *got = (size_t)k;
  return emit(rl, (char *)p, (size_t)k);
}

/* Passes exactly n bytes: as pass, 2 (the stream ended early) being -1. */
static int pass_n(struct relay *rl, unsigned long long n)
{
  size_t cap = sizeof(rl->c->up.buf), got;
  int r = 0;
  while(n && !r) {
    r = pass(rl, n < cap ? (size_t)n : cap, &got);
    n -= got;
  }
  return r == 2 ? -1 : r;
}

/* Streams the body in its framing: 0 complete, 1 a fault ended it, -1
 * failed. */
static int relay_body(struct relay *rl, enum body_mode mode, long long clen)
{
  struct kcr_buf line = KCR_BUF_INIT;
  size_t got;
  int r = 0;

  switch(mode) {
  case B_NONE: break;
  case B_LENGTH: r = pass_n(rl, (unsigned long long)clen); break;
  case B_EOF:
    while(!(r = pass(rl, sizeof(rl->c->up.buf), &got)))
      ;
    r = r == 2 ? 0 : r;
    break;
  case B_CHUNKED:
    for(;;) {
      long long n;
      int w = wait_upstream(rl);
      if(w <= 0) {
        r = w < 0 ? -1 : cut_now(rl);
        break;
      }
      if((n = chunk_size(&rl->c->up, &line)) < 0) {
        r = -1;
        break;
      }
      if(!n) { /* trailers (dropped), then the last chunk */
        do
          r = read_line(&rl->c->up, &line, HEAD_MAX, IO_TIMEOUT_MS) <= 0 ? -1 : 0;
        while(!r && line.len);
        if(!r)
          r = cl_send(rl->c, "0\r\n\r\n", 5);
        break;
      }
      if((r = pass_n(rl, (unsigned long long)n)))
        break;
      if(read_line(&rl->c->up, &line, 2, IO_TIMEOUT_MS) <= 0 || line.len) {
        r = -1;
        break;
      }
    }
    break;
  }
  kcr_buf_cleanup(&line);
  return r;
}

/* ---- one request ---- */

static bool has_body_method(const char *m)
{
  return !strcmp(m, "POST") || !strcmp(m, "PUT") || !strcmp(m, "PATCH");
}

/* Sends the request upstream (on a new connection once more when a kept
 * one turns out closed before it answered) and streams the answer back:
 * 0 keep the client's connection, -1 close it. */
static int forward(struct conn *c, struct head *rq, const struct kcr_buf *body,
                   const struct chaos_req *cr, struct chaos_action *a)
{
  struct proxy *p = c->p;
  struct kcr_buf out = KCR_BUF_INIT, rh = KCR_BUF_INIT;
  struct head rs;
  struct relay rl = {c, cr, a, false, 0, UINT64_MAX, UINT64_MAX};
  enum body_mode mode;
  bool close_after, counted = false;
  int r, rc = -1;

  memset(&rs, 0, sizeof(rs));
  kcr_buf_append(&out, rq->raw.ptr, rq->raw.len);
  if(body->len || has_body_method(rq->method))
    kcr_buf_printf(&out, "Content-Length: %zu\r\n", body->len);
  kcr_buf_puts(&out, "\r\n");
  kcr_buf_append(&out, body->ptr, body->len);
  if(kcr_buf_err(&out))
    goto out;
  for(int attempt = 0;; attempt++) {
    bool fresh = !c->up.ssl;
    uint64_t rx = c->up.rx;
    bool sent = false;
    r = -1;
    if(!fresh || !up_open(c)) {
      sent = !peer_send(&c->up, out.ptr, out.len);
      if(sent && !counted) {
        counted = true;
        kcr_metric_inc(p->m_fwd, (const char *[]){cr->agent, chaos_verb_name(cr->verb)},
                       1);
        atomic_fetch_add(&p->n_fwd, 1);
      }
      if(sent)
        r = read_head(&c->up, false, &rs, RESP_WAIT_MS);
    }
    if(r == 1 && rs.code >= 100 && rs.code < 200) { /* not asked for: unsupported */
      head_cleanup(&rs);
      r = -1;
    }
    if(r == 1)
      break;
    bool nothing_back = c->up.rx == rx;
    peer_close(c, &c->up, true);
    if(!fresh && !attempt && nothing_back)
      continue; /* the apiserver had closed the kept-alive connection */
    kcr_metric_inc(p->m_uperr, (const char *[]){cr->agent}, 1);
    rc = answer(c, cr, 502, -1, "chaosproxy: no answer from the apiserver", rq->close) ||
                 rq->close
             ? -1
             : 0;
    goto out;
  }
  mode = !strcmp(rq->method, "HEAD") || rs.code == 204 || rs.code == 304 ? B_NONE
         : rs.chunked                                                    ? B_CHUNKED
         : rs.clen >= 0                                                  ? B_LENGTH
                                                                         : B_EOF;
  rl.chunked = mode == B_CHUNKED;
  switch(a->fault) {
  case CHAOS_TRUNCATE:
  case CHAOS_GARBLE:
    if(mode == B_NONE || (mode == B_LENGTH && !rs.clen)) {
      a->fault = CHAOS_NONE; /* no body: nothing to do */
    } else if(a->fault == CHAOS_TRUNCATE) {
      rl.limit = a->bytes           ? (uint64_t)a->bytes
                 : mode == B_LENGTH ? (uint64_t)rs.clen / 2
                                    : 16;
      if(mode == B_LENGTH && rl.limit >= (uint64_t)rs.clen)
        rl.limit = (uint64_t)rs.clen / 2;
    }
    break;
  case CHAOS_DRIP:
    c->drip_bytes = a->bytes;
    c->drip_ms = a->ms;
    count_injected(c, cr, a);
    a->fault = CHAOS_NONE;
    break;
  case CHAOS_CUT:
    if(rs.code != 200 || mode == B_NONE) {
      a->fault = CHAOS_NONE;
    } else {
      rl.limit = a->after_bytes ? (uint64_t)a->after_bytes : UINT64_MAX;
      rl.deadline = a->after_ms ? kcr_time_mono_ms() + (uint64_t)a->after_ms : UINT64_MAX;
    }
    break;
  default: break;
  }
  close_after = rq->close || rs.close || mode == B_EOF;
  kcr_buf_append(&rh, rs.raw.ptr, rs.raw.len);
  kcr_buf_puts(&rh, close_after ? "Connection: close\r\n\r\n" : "\r\n");
  if(kcr_buf_err(&rh) || cl_send(c, rh.ptr, rh.len)) {
    peer_close(c, &c->up, true);
    goto out;
  }
  count_response(c, cr, rs.code);
  r = relay_body(&rl, mode, rs.clen);
  if(r || rs.close || mode == B_EOF)
    peer_close(c, &c->up, r != 0);
  rc = r || close_after ? -1 : 0;
out:
  c->drip_bytes = 0;
  head_cleanup(&rs);
  kcr_buf_cleanup(&out);
  kcr_buf_cleanup(&rh);
  return rc;
}

/* Reads one request from the client and handles it: 0 read the next one,
 * -1 close the connection. */
static int serve_one(struct conn *c)
{
  struct proxy *p = c->p;
  struct kcr_buf body = KCR_BUF_INIT;
  struct chaos_action a;
  struct chaos_req cr;
  struct head rq;
  char msg[96];
  int rc = -1;

  uint64_t rx = c->cl.rx;
  int r = read_head(&c->cl, true, &rq, -1);
  if(r != 1) {
    if(r < 0 || c->cl.rx != rx)
      KCR_LOG(KCR_LOG_DEBUG, "chaosproxy: unreadable request head", KCR_I("read", r),
              KCR_S("error", ossl_err()));
    return -1;
  }
  if(rq.expect100 && peer_send(&c->cl, "HTTP/1.1 100 Continue\r\n\r\n", 25))
    goto out;
  if(read_body(&c->cl, &rq, &body)) {
    KCR_LOG(KCR_LOG_DEBUG, "chaosproxy: unreadable request body",
            KCR_S("method", rq.method), KCR_S("target", rq.target));
    goto out;
  }
  chaos_classify(rq.method, rq.target, rq.ua, &cr);
  kcr_metric_inc(p->m_req, (const char *[]){cr.agent, chaos_verb_name(cr.verb)}, 1);
  atomic_fetch_add(&p->n_req, 1);
  pthread_mutex_lock(&p->mu);
  chaos_rules_pick(p->rules, &cr, &p->rng, &a);
  pthread_mutex_unlock(&p->mu);
  switch(a.fault) {
  case CHAOS_DELAY:
    count_injected(c, &cr, &a);
    sleep_ms(p, a.ms);
    a.fault = CHAOS_NONE;
    break;
  case CHAOS_RESET:
    count_injected(c, &cr, &a);
    peer_close(c, &c->cl, true);
    goto out;
  case CHAOS_STATUS:
    count_injected(c, &cr, &a);
    snprintf(msg, sizeof(msg), "chaosproxy: injected %ld (rule at line %d)", a.code,
             a.line);
    rc = answer(c, &cr, (int)a.code, a.retry_after, msg, rq.close) || rq.close ? -1 : 0;
    goto out;
  default: break;
  }
  rc = forward(c, &rq, &body, &cr, &a);
out:
  head_cleanup(&rq);
  kcr_buf_cleanup(&body);
  return rc;
}

static void *conn_main(void *arg)
{
  struct conn *c = arg;
  struct proxy *p = c->p;

  if(!(c->cl.ssl = SSL_new(p->srv)) || !SSL_set_fd(c->cl.ssl, c->cl.fd) ||
     handshake(c->cl.ssl, c->cl.fd, SSL_accept)) {
    kcr_metric_inc(p->m_conns, (const char *[]){"tls_failed"}, 1);
    KCR_LOG(KCR_LOG_DEBUG, "chaosproxy: TLS handshake with a client failed",
            KCR_S("error", ossl_err()));
    goto out;
  }
  kcr_metric_inc(p->m_conns, (const char *[]){"ok"}, 1);
  c->id = client_identity(p, c->cl.ssl);
  while(!atomic_load(&p->stopping) && !serve_one(c))
    ;
out:
  peer_close(c, &c->up, false);
  peer_close(c, &c->cl, false);
  /* The thread's OpenSSL state (its random generators) now, not in a
   * thread-exit handler that may run after main() returned: stop_all
   * waits for nconns, not for the threads' end. */
  OPENSSL_thread_stop();
  pthread_mutex_lock(&p->mu);
  if(c->prev)
    c->prev->next = c->next;
  else
    p->conns = c->next;
  if(c->next)
    c->next->prev = c->prev;
  p->nconns--;
  pthread_cond_broadcast(&p->cv);
  pthread_mutex_unlock(&p->mu);
  free(c);
  return NULL;
}

static void accept_one(struct proxy *p, int lfd)
{
  pthread_attr_t attr;
  pthread_t th;
  struct conn *c;
  int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC), err;

  if(fd < 0)
    return;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &(int){1}, sizeof(int));
  if(!(c = calloc(1, sizeof(*c)))) {
    close(fd);
    return;
  }
  c->p = p;
  c->cl.fd = fd;
  c->up.fd = -1;
  pthread_mutex_lock(&p->mu);
  c->next = p->conns;
  if(p->conns)
    p->conns->prev = c;
  p->conns = c;
  p->nconns++;
  pthread_mutex_unlock(&p->mu);
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  err = pthread_create(&th, &attr, conn_main, c);
  pthread_attr_destroy(&attr);
  if(err) {
    KCR_LOG(KCR_LOG_ERROR, "chaosproxy: cannot start a connection thread");
    pthread_mutex_lock(&p->mu);
    p->conns = c->next;
    if(c->next)
      c->next->prev = NULL;
    p->nconns--;
    pthread_mutex_unlock(&p->mu);
    close(fd);
    free(c);
  }
}

/* Ends every connection (their threads see their sockets shut down) and
 * waits up to 10 s for the threads. */
static void stop_all(struct proxy *p)
{
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  ts.tv_sec += 10;
  atomic_store(&p->stopping, true);
  pthread_mutex_lock(&p->mu);
  for(struct conn *c = p->conns; c; c = c->next) {
    if(c->cl.fd >= 0)
      shutdown(c->cl.fd, SHUT_RDWR);
    if(c->up.fd >= 0)
      shutdown(c->up.fd, SHUT_RDWR);
  }
  while(p->nconns && pthread_cond_timedwait(&p->cv, &p->mu, &ts) != ETIMEDOUT)
    ;
  if(p->nconns)
    KCR_LOG(KCR_LOG_WARN, "chaosproxy: connections still open at exit",
            KCR_I("connections", p->nconns));
  pthread_mutex_unlock(&p->mu);
}

/* ---- set-up ---- */

/* Reads the rules file and puts its rules in effect: 0, or -1 (the rules
 * in effect stay; the message is logged). */
static int load_rules(struct proxy *p)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  struct kcr_buf text = KCR_BUF_INIT;
  struct chaos_rules *rs = NULL, *old;
  char chunk[4096];
  size_t n;
  FILE *f;
  int rc = -1;

  if(!p->rules_path) {
    rc = chaos_rules_parse("", &rs, &ei) ? -1 : 0;
  } else if(!(f = fopen(p->rules_path, "r"))) {
    KCR_LOG(KCR_LOG_ERROR, "chaosproxy: cannot read the rules file",
            KCR_S("path", p->rules_path), KCR_S("error", errstr(errno)));
  } else {
    while((n = fread(chunk, 1, sizeof(chunk), f)) > 0 && text.len < (1 << 20))
      kcr_buf_append(&text, chunk, n);
    fclose(f);
    if(kcr_buf_err(&text) || chaos_rules_parse(kcr_buf_str(&text), &rs, &ei))
      KCR_LOG(KCR_LOG_ERROR, "chaosproxy: bad rules file; the rules in effect stay",
              KCR_S("path", p->rules_path),
              KCR_S("error", ei.message ? ei.message : "out of memory"));
    else
      rc = 0;
  }
  if(!rc) {
    pthread_mutex_lock(&p->mu);
    old = p->rules;
    p->rules = rs;
    pthread_mutex_unlock(&p->mu);
    chaos_rules_free(old);
    kcr_metric_set(p->m_rules, NULL, (double)rs->n);
    KCR_LOG(KCR_LOG_INFO, "chaosproxy: rules loaded",
            KCR_S("path", p->rules_path ? p->rules_path : "(none)"),
            KCR_I("rules", rs->n));
  }
  kcr_metric_inc(p->m_loads, (const char *[]){rc ? "error" : "ok"}, 1);
  kcr_buf_cleanup(&text);
  kcr_errinfo_cleanup(&ei);
  return rc;
}

static int alpn_select(SSL *ssl, const unsigned char **out, unsigned char *outlen,
                       const unsigned char *in, unsigned inlen, void *ud)
{
  static const unsigned char h11[] = "\x08http/1.1";
  if(SSL_select_next_proto((unsigned char **)out, outlen, h11, sizeof(h11) - 1, in,
                           inlen) == OPENSSL_NPN_NEGOTIATED)
    return SSL_TLSEXT_ERR_OK;
  return SSL_TLSEXT_ERR_NOACK; /* no h2: the client falls back to HTTP/1.1 */
}

/* The client certificate is checked in client_identity, not here: an
 * expired one must still reach the apiserver (as its copy). */
static int accept_any(int ok, X509_STORE_CTX *x) { return 1; }

static int tls_setup(struct proxy *p, const char *ca_cert, const char *ca_key)
{
  FILE *f;
  X509 *cert = NULL;
  EVP_PKEY *key = NULL;
  X509_NAME *name = X509_NAME_new();
  ASN1_TIME *nb = X509_gmtime_adj(NULL, -3600), *na = X509_gmtime_adj(NULL, 7 * 86400);
  STACK_OF(X509_NAME) *cas = sk_X509_NAME_new_null();
  int rc = -1;

  if((f = fopen(ca_cert, "r"))) {
    p->ca = PEM_read_X509(f, NULL, NULL, NULL);
    fclose(f);
  }
  if((f = fopen(ca_key, "r"))) {
    p->ca_key = PEM_read_PrivateKey(f, NULL, NULL, NULL);
    fclose(f);
  }
  if(!p->ca || !p->ca_key || X509_check_private_key(p->ca, p->ca_key) != 1) {
    fprintf(stderr, "chaosproxy: cannot use the CA %s with key %s: %s\n", ca_cert, ca_key,
            !p->ca       ? "no PEM certificate there"
            : !p->ca_key ? "no PEM private key there"
                         : "the key does not match the certificate");
    goto out;
  }
  if(!name || !nb || !na || !cas ||
     !X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                                 (const unsigned char *)"chaosproxy", -1, -1, 0) ||
     mint(p, name, nb, na, true, &cert, &key))
    goto fail;
  p->srv = SSL_CTX_new(TLS_server_method());
  p->upctx = SSL_CTX_new(TLS_client_method());
  if(!p->srv || !p->upctx || !SSL_CTX_set_min_proto_version(p->srv, TLS1_2_VERSION) ||
     SSL_CTX_use_certificate(p->srv, cert) != 1 ||
     SSL_CTX_use_PrivateKey(p->srv, key) != 1 ||
     !sk_X509_NAME_push(cas, X509_NAME_dup(X509_get_subject_name(p->ca))))
    goto fail;
  SSL_CTX_set_client_CA_list(p->srv, cas);
  cas = NULL;
  SSL_CTX_set_verify(p->srv, SSL_VERIFY_PEER, accept_any);
  SSL_CTX_set_alpn_select_cb(p->srv, alpn_select, NULL);
  SSL_CTX_set_options(p->srv, SSL_OP_IGNORE_UNEXPECTED_EOF | SSL_OP_NO_TICKET);
  SSL_CTX_set_session_cache_mode(p->srv, SSL_SESS_CACHE_OFF);
  SSL_CTX_set_num_tickets(p->srv, 0);
  if(X509_STORE_add_cert(SSL_CTX_get_cert_store(p->upctx), p->ca) != 1 ||
     SSL_CTX_set_alpn_protos(p->upctx, (const unsigned char *)"\x08http/1.1", 9))
    goto fail;
  SSL_CTX_set_verify(p->upctx, SSL_VERIFY_PEER, NULL);
  SSL_CTX_set_options(p->upctx, SSL_OP_IGNORE_UNEXPECTED_EOF);
  rc = 0;
  goto out;
fail:
  fprintf(stderr, "chaosproxy: TLS set-up failed: %s\n", ossl_err());
out:
  sk_X509_NAME_pop_free(cas, X509_NAME_free);
  X509_NAME_free(name);
  ASN1_TIME_free(nb);
  ASN1_TIME_free(na);
  X509_free(cert);
  EVP_PKEY_free(key);
  return rc;
}

/* "HOST:PORT" or "[V6]:PORT" into host and port (owned). */
static int split_hostport(const char *s, char **host, char **port)
{
  const char *colon;
  if(*s == '[') {
    const char *end = strchr(s, ']');
    if(!end || end[1] != ':')
      return -1;
    *host = strndup(s + 1, (size_t)(end - s - 1));
    *port = strdup(end + 2);
  } else {
    if(!(colon = strrchr(s, ':')))
      return -1;
    *host = strndup(s, (size_t)(colon - s));
    *port = strdup(colon + 1);
  }
  return *host && *port && **host && **port ? 0 : -1;
}

static bool loopback(const char *host)
{
  struct in_addr a4;
  return !strcmp(host, "localhost") || !strcmp(host, "::1") ||
         (inet_pton(AF_INET, host, &a4) == 1 && (ntohl(a4.s_addr) >> 24) == 127);
}

static int listen_on(const char *host, const char *port, int *bound)
{
  struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE},
                  *res = NULL;
  struct sockaddr_storage ss;
  socklen_t sl = sizeof(ss);
  int fd = -1;

  if(getaddrinfo(host, port, &hints, &res))
    return -1;
  fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if(fd >= 0) {
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &(int){1}, sizeof(int));
    if(bind(fd, res->ai_addr, res->ai_addrlen) || listen(fd, 128) ||
       getsockname(fd, (struct sockaddr *)&ss, &sl)) {
      close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(res);
  if(fd >= 0)
    *bound = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                            : ((struct sockaddr_in *)&ss)->sin_port);
  return fd;
}

static kcr_err metrics_setup(struct proxy *p, struct kcr_errinfo *ei)
{
  static const char *const av[] = {"agent", "verb", NULL},
                           *const af[] = {"agent", "verb", "fault", NULL},
                           *const ac[] = {"agent", "code", NULL},
                           *const a[] = {"agent", NULL}, *const res[] = {"result", NULL};
  const struct {
    kcr_metric **out;
    struct kcr_metric_opts o;
  } counters[] = {
      {&p->m_req,
       {.name = "chaosproxy_requests_total",
        .help = "Requests read from clients",
        .label_names = av}},
      {&p->m_fwd,
       {.name = "chaosproxy_forwarded_total",
        .help = "Requests sent on to the apiserver",
        .label_names = av}},
      {&p->m_inj,
       {.name = "chaosproxy_injected_total",
        .help = "Faults injected",
        .label_names = af}},
      {&p->m_resp,
       {.name = "chaosproxy_responses_total",
        .help = "Response heads written to clients (forwarded or injected)",
        .label_names = ac}},
      {&p->m_conns,
       {.name = "chaosproxy_connections_total",
        .help = "Client connections by TLS handshake result",
        .label_names = res}},
      {&p->m_uperr,
       {.name = "chaosproxy_upstream_errors_total",
        .help = "Requests the apiserver did not answer (502 sent)",
        .label_names = a}},
      {&p->m_loads,
       {.name = "chaosproxy_rules_loads_total",
        .help = "Rules files read, by result",
        .label_names = res}},
  };
  kcr_err rc = KCR_OK;

  for(size_t i = 0; !rc && i < sizeof(counters) / sizeof(counters[0]); i++)
    rc = kcr_metric_counter(p->reg, &counters[i].o, counters[i].out, ei);
  if(!rc)
    rc = kcr_metric_gauge(
        p->reg,
        &(struct kcr_metric_opts){.name = "chaosproxy_rules", .help = "Rules in effect"},
        &p->m_rules, ei);
  return rc;
}

static int write_ready(const char *path, int port, int mport)
{
  char tmp[4096];
  FILE *f;
  snprintf(tmp, sizeof(tmp), "%s.tmp", path);
  if(!(f = fopen(tmp, "w")))
    return -1;
  fprintf(f, "proxy_port=%d\nmetrics_port=%d\npid=%ld\n", port, mport, (long)getpid());
  if(fclose(f) || rename(tmp, path))
    return -1;
  return 0;
}

int main(int argc, char **argv)
{
  static struct proxy p;
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  const char *listen_addr = "127.0.0.1:0", *upstream = NULL, *ca_cert = NULL,
             *ca_key = NULL, *metrics_addr = "127.0.0.1:0", *ready = NULL;
  char *lhost = NULL, *lport = NULL;
  int seed = 1, lfd = -1, sfd = -1, port = 0, status = 2;
  kcr_httpd *httpd = NULL;
  sigset_t set;
  const struct kcr_flag flags[] = {
      {"upstream", KCR_FLAG_STRING, &upstream, "the apiserver, https://HOST:PORT",
       .arg = "URL"},
      {"ca-cert", KCR_FLAG_STRING, &ca_cert,
       "the CA that signs the proxy's certificates and verifies the apiserver",
       .arg = "FILE"},
      {"ca-key", KCR_FLAG_STRING, &ca_key, "the CA's private key", .arg = "FILE"},
      {"listen", KCR_FLAG_STRING, &listen_addr, "where to listen (loopback only)",
       .arg = "HOST:PORT"},
      {"rules", KCR_FLAG_STRING, &p.rules_path,
       "fault rules (tests/chaos/rules.h); re-read on SIGHUP", .arg = "FILE"},
      {"seed", KCR_FLAG_INT, &seed, "seed of the fault draws", .min = 0,
       .max = INT32_MAX},
      {"metrics-bind-address", KCR_FLAG_STRING, &metrics_addr,
       "where /metrics (the counts) is served", .arg = "HOST:PORT"},
      {"ready-file", KCR_FLAG_STRING, &ready,
       "written once serving: proxy_port=N, metrics_port=N, pid=N (shell syntax)",
       .arg = "FILE"},
  };

  kcr_cli_parse_or_exit(
      &(struct kcr_cli){.prog = "chaosproxy",
                        .about = "A fault-injecting HTTPS proxy in front of a Kubernetes "
                                 "apiserver, for tests (loopback only).",
                        .flags = flags,
                        .nflags = sizeof(flags) / sizeof(flags[0]),
                        .log = true},
      argc, argv);
  if(!upstream || !ca_cert || !ca_key) {
    fprintf(stderr, "chaosproxy: --%s is required\n",
            !upstream  ? "upstream"
            : !ca_cert ? "ca-cert"
                       : "ca-key");
    return 2;
  }
  if(strncmp(upstream, "https://", 8) ||
     split_hostport(upstream + 8, &p.up_host, &p.up_port)) {
    fprintf(stderr,
            "chaosproxy: --upstream: \"%s\" is not valid: want https://HOST:PORT\n",
            upstream);
    goto out;
  }
  p.up_port[strcspn(p.up_port, "/")] = '\0';
  if(split_hostport(listen_addr, &lhost, &lport) || !loopback(lhost)) {
    fprintf(stderr,
            "chaosproxy: --listen: \"%s\" is not valid: want a loopback HOST:PORT\n",
            listen_addr);
    goto out;
  }
  signal(SIGPIPE, SIG_IGN);
  sigemptyset(&set);
  sigaddset(&set, SIGHUP);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, NULL); /* before any thread: they inherit it */
  pthread_mutex_init(&p.mu, NULL);
  pthread_cond_init(&p.cv, NULL);
  p.rng = (uint64_t)seed;
  if(tls_setup(&p, ca_cert, ca_key))
    goto out;
  if(kcr_metrics_new(NULL, &p.reg, &ei) || metrics_setup(&p, &ei)) {
    fprintf(stderr, "chaosproxy: cannot make the metrics: %s\n",
            ei.message ? ei.message : "out of memory");
    goto out;
  }
  if(load_rules(&p)) {
    fprintf(stderr, "chaosproxy: --rules %s: see the log line above\n", p.rules_path);
    goto out;
  }
  if(kcr_httpd_new(&(struct kcr_httpd_opts){.addr = metrics_addr, .metrics = p.reg},
                   &httpd, &ei) ||
     kcr_httpd_start(httpd, &ei)) {
    fprintf(stderr, "chaosproxy: cannot start the metrics/health server: %s\n",
            ei.message);
    goto out;
  }
  if((lfd = listen_on(lhost, lport, &port)) < 0 ||
     (sfd = signalfd(-1, &set, SFD_CLOEXEC)) < 0) {
    fprintf(stderr, "chaosproxy: cannot listen on %s: %s\n", listen_addr, errstr(errno));
    goto out;
  }
  if(ready && write_ready(ready, port, kcr_httpd_port(httpd))) {
    fprintf(stderr, "chaosproxy: --ready-file %s: %s\n", ready, errstr(errno));
    goto out;
  }
  KCR_LOG(KCR_LOG_INFO, "chaosproxy: serving", KCR_S("listen", lhost),
          KCR_I("port", port), KCR_I("metricsPort", kcr_httpd_port(httpd)),
          KCR_S("upstream", upstream), KCR_I("seed", seed));
  for(;;) {
    struct pollfd pf[2] = {{lfd, POLLIN, 0}, {sfd, POLLIN, 0}};
    struct signalfd_siginfo si;
    if(poll(pf, 2, -1) < 0 && errno != EINTR)
      break;
    if(pf[0].revents & POLLIN)
      accept_one(&p, lfd);
    if(!(pf[1].revents & POLLIN) || read(sfd, &si, sizeof(si)) != sizeof(si))
      continue;
    if(si.ssi_signo != SIGHUP)
      break;
    load_rules(&p);
  }
  close(lfd);
  lfd = -1;
  stop_all(&p);
  KCR_LOG(KCR_LOG_INFO, "chaosproxy: stopped", KCR_I("requests", atomic_load(&p.n_req)),
          KCR_I("forwarded", atomic_load(&p.n_fwd)),
          KCR_I("injected", atomic_load(&p.n_inj)));
  status = p.nconns ? 1 : 0;
out:
  kcr_httpd_free(httpd);
  if(lfd >= 0)
    close(lfd);
  if(sfd >= 0)
    close(sfd);
  if(!p.nconns) { /* threads still running would use these */
    for(size_t i = 0; i < p.nids; i++) {
      X509_free(p.ids[i].cert);
      EVP_PKEY_free(p.ids[i].key);
    }
    free(p.ids);
    chaos_rules_free(p.rules);
    SSL_CTX_free(p.srv);
    SSL_CTX_free(p.upctx);
    X509_free(p.ca);
    EVP_PKEY_free(p.ca_key);
    kcr_metrics_free(p.reg);
  }
  free(p.up_host);
  free(p.up_port);
  free(lhost);
  free(lport);
  kcr_errinfo_cleanup(&ei);
  return status;
}
