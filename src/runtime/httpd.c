/* DESIGN: the health and metrics HTTP server (/metrics, /healthz, /readyz).
 *
 * Shape: libmicrohttpd with its own listening thread and one thread per
 * connection, so a slow check or collect callback delays only its own
 * request. We open the listening socket ourselves and hand it over with
 * MHD_OPTION_LISTEN_SOCKET: that way a failed bind reports the OS reason
 * with the address ("cannot listen on 127.0.0.1:8080: Address already in
 * use"), ":port" can be dual-stack, and the ephemeral port of "...:0" is read
 * with getsockname(). MHD closes the socket in MHD_stop_daemon() (and on
 * some of its start failures: see close_if_same()).
 *
 * Requests are answered on the handler's first call (GET/HEAD have no body;
 * other methods get 405 straight away). Check lists are snapshotted under
 * checks_mu and the checks run without any lock, so a check may register
 * other checks; names are owned by the server and live until free, so the
 * snapshot's borrowed pointers stay valid.
 *
 * Invariants: daemon != NULL iff running; port is the bound port while
 * running, else 0; check lists only grow.
 *
 * Lock order: life_mu and checks_mu are never held together. life_mu is held
 * across MHD_stop_daemon() (which joins the server threads); those threads
 * take only checks_mu, so the join cannot deadlock. A server thread calling
 * kcr_httpd_stop() on its own server would join itself: a thread-local marks
 * server threads and such a call is refused. */
#include <errno.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kcr/buf.h"
#include "kcr/httpd.h"
#include "kcr/log.h"

#define REASON_MAX 512
#define TEXT_PLAIN "text/plain; charset=utf-8"

struct check {
  char *name;
  kcr_check_fn fn;
  void *ud;
};

struct checklist {
  struct check *v;
  size_t n, cap;
};

struct kcr_httpd {
  char *addr; /* as given, for messages */
  char *host; /* NULL: all interfaces */
  char port[6];
  kcr_metrics *metrics;
  pthread_mutex_t life_mu;   /* daemon start/stop */
  struct MHD_Daemon *daemon; /* under life_mu */
  atomic_int bound_port;
  pthread_mutex_t checks_mu; /* both check lists */
  struct checklist healthz, readyz;
};

/* The server whose request this thread is handling, if any. */
static _Thread_local const kcr_httpd *tl_serving;

/* ---- address ------------------------------------------------------------- */

static kcr_err parse_port(const char *s, char port[6])
{
  unsigned long v = 0;
  size_t n = strlen(s);

  if(n == 0 || n > 5)
    return KCR_ECONFIG;
  for(size_t i = 0; i < n; i++) {
    if(s[i] < '0' || s[i] > '9')
      return KCR_ECONFIG;
    v = v * 10 + (unsigned long)(s[i] - '0');
  }
  if(v > 65535)
    return KCR_ECONFIG;
  snprintf(port, 6, "%lu", v);
  return KCR_OK;
}

/* Splits "host:port", "[v6]:port" or ":port" into h->host and h->port. */
static kcr_err parse_addr(kcr_httpd *h, struct kcr_errinfo *ei)
{
  const char *a = h->addr, *colon = strrchr(a, ':');
  size_t hlen;

  if(!colon)
    return kcr_errinfo_set(ei, KCR_ECONFIG,
                           "httpd: bad address \"%s\": want host:port or :port", a);
  if(parse_port(colon + 1, h->port))
    return kcr_errinfo_set(ei, KCR_ECONFIG,
                           "httpd: bad address \"%s\": port must be 0-65535", a);
  hlen = (size_t)(colon - a);
  if(hlen && a[0] == '[') {
    if(hlen < 3 || a[hlen - 1] != ']')
      return kcr_errinfo_set(ei, KCR_ECONFIG,
                             "httpd: bad address \"%s\": unbalanced brackets", a);
    a++;
    hlen -= 2;
  } else if(memchr(a, ':', hlen)) {
    return kcr_errinfo_set(ei, KCR_ECONFIG,
                           "httpd: bad address \"%s\": write IPv6 hosts in "
                           "brackets, e.g. [::1]:8080",
                           h->addr);
  }
  if(hlen && !(h->host = strndup(a, hlen)))
    return KCR_ENOMEM;
  return KCR_OK;
}

static const char *errno_text(int e, char *buf, size_t n)
{
  return strerror_r(e, buf, n); /* the GNU form: returns the text */
}

/* A bound, listening, non-blocking socket for sa, or -1 with *err set. */
static int try_listen(const struct sockaddr *sa, socklen_t len, int v6only, int *err)
{
  int one = 1;
  int fd = socket(sa->sa_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);

  if(fd < 0) {
    *err = errno;
    return -1;
  }
  (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if(sa->sa_family == AF_INET6)
    (void)setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &v6only, sizeof(v6only));
  if(bind(fd, sa, len) || listen(fd, 64)) {
    *err = errno;
    close(fd);
    return -1;
  }
  return fd;
}

/* All interfaces: IPv6 dual-stack when the host has IPv6, else IPv4. */
static int listen_any(const char *port, int *err)
{
  uint16_t p = (uint16_t)strtoul(port, NULL, 10);
  struct sockaddr_in6 s6 = {0};
  struct sockaddr_in s4 = {0};
  int fd;

  s6.sin6_family = AF_INET6;
  s6.sin6_addr = in6addr_any;
  s6.sin6_port = htons(p);
  fd = try_listen((const struct sockaddr *)&s6, sizeof(s6), 0, err);
  if(fd >= 0)
    return fd;
  s4.sin_family = AF_INET;
  s4.sin_addr.s_addr = htonl(INADDR_ANY);
  s4.sin_port = htons(p);
  return try_listen((const struct sockaddr *)&s4, sizeof(s4), 0, err);
}

static kcr_err open_listener(const kcr_httpd *h, int *fdp, int *portp,
                             struct kcr_errinfo *ei)
{
  struct addrinfo hints = {0}, *res = NULL;
  struct sockaddr_storage ss;
  socklen_t sslen = sizeof(ss);
  char ebuf[128];
  int fd = -1, err = 0, gai;

  if(!h->host) {
    fd = listen_any(h->port, &err);
  } else {
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    gai = getaddrinfo(h->host, h->port, &hints, &res);
    if(gai)
      return kcr_errinfo_set(ei, KCR_ECONFIG, "httpd: cannot resolve the host of %s: %s",
                             h->addr, gai_strerror(gai));
    for(struct addrinfo *ai = res; ai && fd < 0; ai = ai->ai_next)
      fd = try_listen(ai->ai_addr, ai->ai_addrlen, 1, &err);
    freeaddrinfo(res);
  }
  if(fd < 0)
    return kcr_errinfo_set(ei, KCR_EIO, "httpd: cannot listen on %s: %s", h->addr,
                           errno_text(err, ebuf, sizeof(ebuf)));
  if(getsockname(fd, (struct sockaddr *)&ss, &sslen)) {
    err = errno;
    close(fd);
    return kcr_errinfo_set(ei, KCR_EIO, "httpd: getsockname on %s: %s", h->addr,
                           errno_text(err, ebuf, sizeof(ebuf)));
  }
  *portp = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                          : ((struct sockaddr_in *)&ss)->sin_port);
  *fdp = fd;
  return KCR_OK;
}

/* ---- checks -------------------------------------------------------------- */

static bool valid_check_name(const char *s)
{
  if(!s || !*s)
    return false;
  for(; *s; s++)
    if(!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
         (*s >= '0' && *s <= '9') || *s == '.' || *s == '_' || *s == '-'))
      return false;
  return true;
}

static kcr_err add_check(kcr_httpd *h, struct checklist *l, const char *name,
                         kcr_check_fn fn, void *ud)
{
  char *dup;
  kcr_err rc = KCR_OK;

  if(!h || !fn || !valid_check_name(name))
    return KCR_EINVAL;
  if(!(dup = strdup(name)))
    return KCR_ENOMEM;
  pthread_mutex_lock(&h->checks_mu);
  for(size_t i = 0; i < l->n; i++)
    if(!strcmp(l->v[i].name, name)) {
      rc = KCR_EEXIST;
      goto out;
    }
  if(l->n == l->cap) {
    size_t cap = l->cap ? l->cap * 2 : 4;
    struct check *v = realloc(l->v, cap * sizeof(*v));
    if(!v) {
      rc = KCR_ENOMEM;
      goto out;
    }
    l->v = v;
    l->cap = cap;
  }
  l->v[l->n++] = (struct check){dup, fn, ud};
  dup = NULL;
out:
  pthread_mutex_unlock(&h->checks_mu);
  free(dup);
  return rc;
}

kcr_err kcr_httpd_add_healthz(kcr_httpd *h, const char *name, kcr_check_fn fn, void *ud)
{
  return h ? add_check(h, &h->healthz, name, fn, ud) : KCR_EINVAL;
}

kcr_err kcr_httpd_add_readyz(kcr_httpd *h, const char *name, kcr_check_fn fn, void *ud)
{
  return h ? add_check(h, &h->readyz, name, fn, ud) : KCR_EINVAL;
}

/* A copy of the list (names borrowed); *v is NULL when empty. */
static kcr_err snapshot(kcr_httpd *h, const struct checklist *l, struct check **v,
                        size_t *n)
{
  kcr_err rc = KCR_OK;

  pthread_mutex_lock(&h->checks_mu);
  *n = l->n;
  *v = NULL;
  if(l->n && !(*v = malloc(l->n * sizeof(**v))))
    rc = KCR_ENOMEM;
  else if(l->n)
    memcpy(*v, l->v, l->n * sizeof(**v));
  pthread_mutex_unlock(&h->checks_mu);
  return rc;
}

/* Runs one check; reason gets its one-line explanation (maybe empty). */
static bool run_check(const struct check *ck, char reason[REASON_MAX])
{
  bool ok;

  reason[0] = '\0';
  ok = ck->fn(ck->ud, reason, REASON_MAX);
  reason[REASON_MAX - 1] = '\0';
  for(char *p = reason; *p; p++)
    if(*p == '\n' || *p == '\r')
      *p = ' ';
  return ok;
}

/* ---- responses ----------------------------------------------------------- */

static enum MHD_Result send_response(struct MHD_Connection *c, unsigned int code,
                                     const char *ctype, struct MHD_Response *r,
                                     bool allow)
{
  enum MHD_Result ret;

  if(!r)
    return MHD_NO;
  if(MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, ctype) != MHD_YES ||
     MHD_add_response_header(r, "X-Content-Type-Options", "nosniff") != MHD_YES ||
     (allow &&
      MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, "GET, HEAD") != MHD_YES)) {
    MHD_destroy_response(r);
    return MHD_NO;
  }
  ret = MHD_queue_response(c, code, r);
  MHD_destroy_response(r);
  return ret;
}

static enum MHD_Result reply_static(struct MHD_Connection *c, unsigned int code,
                                    const char *text, bool allow)
{
  struct MHD_Response *r = MHD_create_response_from_buffer(
      strlen(text), (void *)(uintptr_t)text, MHD_RESPMEM_PERSISTENT);
  return send_response(c, code, TEXT_PLAIN, r, allow);
}

/* Sends body (taken, whatever happens) with the given code. */
static enum MHD_Result reply_buf(struct MHD_Connection *c, unsigned int code,
                                 const char *ctype, struct kcr_buf *body)
{
  size_t len = body->len;
  char *p = kcr_buf_take(body);
  struct MHD_Response *r;

  if(!p)
    return MHD_NO;
  r = MHD_create_response_from_buffer(len, p, MHD_RESPMEM_MUST_FREE);
  if(!r)
    free(p);
  return send_response(c, code, ctype, r, false);
}

static enum MHD_Result serve_metrics(kcr_httpd *h, struct MHD_Connection *c)
{
  struct kcr_buf body = KCR_BUF_INIT;
  kcr_err rc;

  if(!h->metrics)
    return reply_static(c, MHD_HTTP_NOT_FOUND, "404 page not found\n", false);
  rc = kcr_metrics_render(h->metrics, &body);
  if(rc) {
    kcr_buf_reset(&body);
    if(kcr_buf_printf(&body, "metrics: %s\n", kcr_strerror(rc)))
      return MHD_NO;
    return reply_buf(c, MHD_HTTP_INTERNAL_SERVER_ERROR, TEXT_PLAIN, &body);
  }
  return reply_buf(c, MHD_HTTP_OK, KCR_METRICS_CONTENT_TYPE, &body);
}

/* /healthz and /readyz: every check, as controller-runtime answers. */
static enum MHD_Result serve_all(kcr_httpd *h, struct MHD_Connection *c, const char *what,
                                 const struct checklist *l)
{
  struct kcr_buf body = KCR_BUF_INIT;
  struct check *v;
  char reason[REASON_MAX];
  bool failed = false, verbose;
  size_t n;
  kcr_err rc;

  verbose = MHD_lookup_connection_value_n(c, MHD_GET_ARGUMENT_KIND, "verbose", 7, NULL,
                                          NULL) == MHD_YES;
  if(snapshot(h, l, &v, &n))
    return MHD_NO;
  rc = n ? KCR_OK : kcr_buf_puts(&body, "[+]ping ok\n");
  for(size_t i = 0; i < n && !rc; i++) {
    if(run_check(&v[i], reason)) {
      rc = kcr_buf_printf(&body, "[+]%s ok\n", v[i].name);
      continue;
    }
    failed = true;
    if(reason[0])
      rc = kcr_buf_printf(&body, "[-]%s failed: %s\n", v[i].name, reason);
    else
      rc = kcr_buf_printf(&body, "[-]%s failed\n", v[i].name);
    KCR_LOG(KCR_LOG_DEBUG, "check failed", KCR_S("endpoint", what),
            KCR_S("check", v[i].name), KCR_S("reason", reason));
  }
  free(v);
  if(!rc && !failed && !verbose) {
    kcr_buf_reset(&body);
    rc = kcr_buf_puts(&body, "ok");
  } else if(!rc) {
    rc = kcr_buf_printf(&body, "%s check %s\n", what, failed ? "failed" : "passed");
  }
  if(rc) {
    kcr_buf_cleanup(&body);
    return MHD_NO;
  }
  return reply_buf(c, failed ? MHD_HTTP_INTERNAL_SERVER_ERROR : MHD_HTTP_OK, TEXT_PLAIN,
                   &body);
}

/* /healthz/NAME and /readyz/NAME: one check alone. */
static enum MHD_Result serve_one(kcr_httpd *h, struct MHD_Connection *c,
                                 const struct checklist *l, const char *name)
{
  struct kcr_buf body = KCR_BUF_INIT;
  struct check *v, *ck = NULL;
  char reason[REASON_MAX];
  size_t n;
  bool ok;

  if(snapshot(h, l, &v, &n))
    return MHD_NO;
  for(size_t i = 0; i < n && !ck; i++)
    if(!strcmp(v[i].name, name))
      ck = &v[i];
  if(!ck) {
    free(v);
    if(!strcmp(name, "ping")) /* the implicit check, as controller-runtime */
      return reply_static(c, MHD_HTTP_OK, "ok", false);
    return reply_static(c, MHD_HTTP_NOT_FOUND, "404 page not found\n", false);
  }
  ok = run_check(ck, reason);
  free(v);
  if(ok)
    return reply_static(c, MHD_HTTP_OK, "ok", false);
  if(kcr_buf_printf(&body, "internal server error: %s\n",
                    reason[0] ? reason : "check failed"))
    return MHD_NO;
  return reply_buf(c, MHD_HTTP_INTERNAL_SERVER_ERROR, TEXT_PLAIN, &body);
}

static enum MHD_Result route(kcr_httpd *h, struct MHD_Connection *c, const char *url)
{
  static const struct {
    const char *prefix; /* "/healthz" */
    const char *what;   /* "healthz" */
    size_t list;        /* offset of the checklist in kcr_httpd */
  } eps[] = {
      {"/healthz", "healthz", offsetof(kcr_httpd, healthz)},
      {"/readyz", "readyz", offsetof(kcr_httpd, readyz)},
  };

  if(!strcmp(url, "/metrics"))
    return serve_metrics(h, c);
  for(size_t i = 0; i < sizeof(eps) / sizeof(eps[0]); i++) {
    size_t plen = strlen(eps[i].prefix);
    const struct checklist *l = (const struct checklist *)((const char *)h + eps[i].list);
    if(strncmp(url, eps[i].prefix, plen))
      continue;
    if(!url[plen] || !strcmp(url + plen, "/"))
      return serve_all(h, c, eps[i].what, l);
    if(url[plen] == '/')
      return serve_one(h, c, l, url + plen + 1);
  }
  return reply_static(c, MHD_HTTP_NOT_FOUND, "404 page not found\n", false);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version,
                                  const char *upload_data, size_t *upload_size,
                                  void **req_cls)
{
  kcr_httpd *h = cls;
  enum MHD_Result ret;

  tl_serving = h;
  if(strcmp(method, MHD_HTTP_METHOD_GET) && strcmp(method, MHD_HTTP_METHOD_HEAD))
    ret = reply_static(c, MHD_HTTP_METHOD_NOT_ALLOWED, "405 method not allowed\n", true);
  else
    ret = route(h, c, url);
  tl_serving = NULL;
  return ret;
}

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
  const kcr_httpd *h = cls;
  char msg[512];
  size_t n;

  vsnprintf(msg, sizeof(msg), fmt, ap);
  n = strlen(msg);
  while(n && (msg[n - 1] == '\n' || msg[n - 1] == '\r'))
    msg[--n] = '\0';
  KCR_LOG(KCR_LOG_WARN, "http server", KCR_S("addr", h->addr), KCR_S("error", msg));
}

/* ---- lifecycle ----------------------------------------------------------- */

kcr_err kcr_httpd_new(const struct kcr_httpd_opts *opts, kcr_httpd **out,
                      struct kcr_errinfo *ei)
{
  kcr_httpd *h;
  kcr_err rc;

  if(!out)
    return KCR_EINVAL;
  *out = NULL;
  if(!opts)
    return kcr_errinfo_set(ei, KCR_EINVAL, "kcr_httpd_new: no options");
  if(!(h = calloc(1, sizeof(*h))))
    return KCR_ENOMEM;
  pthread_mutex_init(&h->life_mu, NULL);
  pthread_mutex_init(&h->checks_mu, NULL);
  atomic_init(&h->bound_port, 0);
  h->metrics = opts->metrics;
  if(!(h->addr = strdup(opts->addr ? opts->addr : ":8080"))) {
    rc = KCR_ENOMEM;
    goto fail;
  }
  if((rc = parse_addr(h, ei)))
    goto fail;
  *out = h;
  return KCR_OK;
fail:
  kcr_httpd_free(h);
  return rc;
}

/* After a failed MHD_start_daemon(): libmicrohttpd closes a passed socket on
 * some failure paths (thread creation) and not on others (option checks).
 * Close fd only if it is still our socket: same inode, so a number reused by
 * another thread in the meantime is left alone. */
static void close_if_same(int fd, const struct stat *was)
{
  struct stat now;

  if(!fstat(fd, &now) && was->st_ino && now.st_ino == was->st_ino &&
     now.st_dev == was->st_dev)
    close(fd);
}

kcr_err kcr_httpd_start(kcr_httpd *h, struct kcr_errinfo *ei)
{
  struct MHD_Daemon *d;
  struct stat st;
  int fd = -1, port = 0;
  kcr_err rc;

  if(!h)
    return KCR_EINVAL;
  pthread_mutex_lock(&h->life_mu);
  if(h->daemon) {
    rc = kcr_errinfo_set(ei, KCR_EINVAL, "httpd: already serving on %s", h->addr);
    goto out;
  }
  if((rc = open_listener(h, &fd, &port, ei)))
    goto out;
  if(fstat(fd, &st)) /* identity of our socket, see close_if_same() */
    memset(&st, 0, sizeof(st));
  /* One option pair per line. */
  /* clang-format off */
  d = MHD_start_daemon(MHD_USE_AUTO_INTERNAL_THREAD | MHD_USE_THREAD_PER_CONNECTION |
                         MHD_USE_ERROR_LOG,
                       0 /* port: the passed socket's */, NULL, NULL, on_request, h,
                       MHD_OPTION_EXTERNAL_LOGGER, mhd_log, h, /* first, as MHD asks */
                       MHD_OPTION_LISTEN_SOCKET, (MHD_socket)fd,
                       MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)30,
                       MHD_OPTION_CONNECTION_LIMIT, (unsigned int)64,
                       MHD_OPTION_END);
  /* clang-format on */
  if(!d) {
    close_if_same(fd, &st);
    rc = kcr_errinfo_set(ei, KCR_EIO, "httpd: cannot start the server on %s", h->addr);
    goto out;
  }
  h->daemon = d;
  atomic_store(&h->bound_port, port);
  KCR_LOG(KCR_LOG_INFO, "serving metrics and health probes", KCR_S("addr", h->addr),
          KCR_I("port", port));
out:
  pthread_mutex_unlock(&h->life_mu);
  return rc;
}

int kcr_httpd_port(const kcr_httpd *h) { return h ? atomic_load(&h->bound_port) : 0; }

void kcr_httpd_stop(kcr_httpd *h)
{
  struct MHD_Daemon *d;

  if(!h)
    return;
  if(tl_serving == h) {
    KCR_LOG(KCR_LOG_ERROR, "kcr_httpd_stop called from a server thread: ignored",
            KCR_S("addr", h->addr));
    return;
  }
  pthread_mutex_lock(&h->life_mu);
  d = h->daemon;
  h->daemon = NULL;
  atomic_store(&h->bound_port, 0);
  if(d)
    MHD_stop_daemon(d); /* joins the server threads, closes the socket */
  pthread_mutex_unlock(&h->life_mu);
}

static void checklist_cleanup(struct checklist *l)
{
  for(size_t i = 0; i < l->n; i++)
    free(l->v[i].name);
  free(l->v);
}

void kcr_httpd_free(kcr_httpd *h)
{
  if(!h)
    return;
  kcr_httpd_stop(h);
  checklist_cleanup(&h->healthz);
  checklist_cleanup(&h->readyz);
  pthread_mutex_destroy(&h->checks_mu);
  pthread_mutex_destroy(&h->life_mu);
  free(h->addr);
  free(h->host);
  free(h);
}
