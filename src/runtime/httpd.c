/* DESIGN: the health and metrics HTTP server (/metrics, /healthz, /readyz).
 *
 * Shape: libmicrohttpd (MHD) with an internal pool of POOL_THREADS threads,
 * each polling its connections with poll(), so an idle or slow connection
 * costs a file descriptor and a little memory, never a thread. poll, not
 * epoll: MHD 0.9.75 uses epoll edge-triggered and stops reading after a
 * short read, so an end of stream that arrives together with data (a client
 * that sends part of a request and closes) goes unnoticed until the idle
 * timeout; level-triggered poll sees it at once. Each thread polls at most
 * CONN_HARD_MAX / POOL_THREADS sockets: poll's O(n) costs nothing there.
 *
 * We open the listening socket ourselves and hand it over with
 * MHD_OPTION_LISTEN_SOCKET: that way a failed bind reports the OS reason
 * with the address ("cannot listen on 127.0.0.1:8080: Address already in
 * use"), ":port" can be dual-stack, the ephemeral port of "...:0" is read
 * with getsockname(), and kcr_httpd_listen() can bind (and fail) before the
 * process starts anything else, serving only later. MHD closes the socket in
 * MHD_stop_daemon() (and on some of its start failures: see close_if_same()).
 *
 * States: stopped (listen_fd < 0, daemon NULL), listening (listen_fd >= 0:
 * bound, connections wait in the kernel's backlog), serving (daemon != NULL;
 * the socket belongs to MHD). listen: stopped -> listening; start: stopped
 * or listening -> serving (binding first when stopped); stop: any ->
 * stopped, closing what is open. A failed start leaves the server stopped.
 *
 * Slow and idle clients (slowloris). MHD's own limits refuse the NEWEST
 * connection when full, and its idle timeout restarts with every byte: 70
 * connections trickling a byte at a time kept the liveness probe out. What
 * must hold for the probe: a client that sends its request at once is
 * admitted and answered, however many stalled connections exist. So we
 * never refuse the newcomer; we make room by closing the connection that
 * has made the least progress. Every connection is in a table (conns_mu),
 * oldest phase first: "waiting" (no complete request yet; with keep-alive,
 * also idle after an answer, though MHD 0.9.75 closes a connection whose
 * answer was queued on the handler's first call, as ours are) or "busy" (a
 * request is being answered), with the time the phase began. On each new connection
 * (MHD's STARTED notification):
 *   1. waiting connections older than REQUEST_DEADLINE_MS are closed (a
 *      trickle restarts MHD's idle timeout, not this deadline);
 *   2. if the newcomer's address holds more than CONN_PER_IP_MAX live
 *      connections, that address's oldest waiting one (else its oldest
 *      busy one) is closed, until it is within the limit;
 *   3. likewise over CONN_MAX connections in all, over every address.
 * A prompt request is read within microseconds, so its connection is
 * closed only if CONN_PER_IP_MAX newer connections from the same address
 * (or CONN_MAX in all) arrive before that: a connection flood, which no
 * per-connection policy stops. The per-address limit means an attacker
 * only ever closes its own connections unless it uses many addresses; it
 * is per full address (IPv4, or IPv6 /128), because all pods of a node
 * often share an IPv6 /64. The trade-off: a client sharing the attacker's
 * address (a test on 127.0.0.1, or an attacker in the node's network
 * namespace, where the kubelet probes from) is protected by the eviction
 * order alone, not by the per-address limit; and a legitimate client
 * still sending its request (a slow link) can be closed under attack.
 * MHD_OPTION_PER_IP_CONNECTION_LIMIT is not used: it refuses the newcomer.
 * MHD's connection limit is CONN_HARD_MAX, above ours, and only bounds
 * file descriptors while closed connections are still being torn down.
 *
 * Closing a connection that another pool thread owns: shutdown(fd) under
 * conns_mu; MHD then reads end-of-stream and closes it on its own thread.
 * The fd cannot have been closed and reused meanwhile: MHD sends the CLOSED
 * notification (which unlinks the connection under conns_mu) before it
 * closes the fd, on the same thread.
 *
 * MHD reports client misbehaviour (each aborted connection, ...) through
 * mhd_log(): the first message of a LOG_WINDOW_MS window is logged, the rest
 * are counted and summarised in one line when the window has passed and a
 * message comes, and at stop. So the log is at most two lines a minute.
 *
 * Requests are answered on the handler's first call (GET/HEAD have no body;
 * other methods get 405 straight away). Check lists are snapshotted under
 * checks_mu and the checks run without any lock, so a check may register
 * other checks; names are owned by the server and live until free, so the
 * snapshot's borrowed pointers stay valid.
 *
 * TLS. libmicrohttpd does TLS with GnuTLS; we give it the certificate
 * through its certificate callback (MHD_OPTION_HTTPS_CERT_CALLBACK) rather
 * than as fixed PEM, so a new certificate is served from the next
 * handshake on, without a restart (kcr_httpd_set_cert, and the cert files
 * looked at again - stat, then load when they changed - by the first
 * handshake reload_ms after the last look). The callback has no user
 * pointer: it finds its server in a thread-local set when the connection
 * starts (MHD's STARTED notification runs on the pool thread that then
 * does the connection's handshake, and a pool thread serves one server).
 * GnuTLS keeps using the chain and key the callback returned during the
 * handshake, and does not free them (retrieve_function2), so a replaced
 * chain stays allocated TLS_KEEP_MS (5 minutes, far longer than any
 * handshake) before it is freed, and the rest at kcr_httpd_free.
 *
 * Invariants: daemon != NULL iff serving, listen_fd >= 0 iff listening (never
 * both); bound_port is the bound port while listening or serving, else 0;
 * check lists only grow; the connection table is ordered by since_ms and
 * empty when not serving.
 *
 * Lock order: life_mu, then (held across MHD_stop_daemon(), which joins the
 * server threads) the leaves checks_mu, conns_mu, log.mu and tls_mu, which
 * server threads take one at a time and never while logging or calling
 * MHD. The one nesting: a handshake that reloads the files holds reload_mu
 * (taken with trylock, so no handshake waits for another's reload) while it
 * takes tls_mu and logs (log.mu). A server thread calling kcr_httpd_stop()
 * on its own server would join
 * itself: a thread-local marks server threads and such a call is refused. */
#include <arpa/inet.h>
#include <errno.h>
#include <gnutls/abstract.h>
#include <gnutls/gnutls.h>
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
#include <time.h>
#include <unistd.h>

#include "core/assert-int.h"
#include "core/err-int.h"
#include "core/secret-int.h"
#include "kcr/buf.h"
#include "kcr/httpd.h"
#include "kcr/log.h"
#include "kcr/time.h"
#include "runtime/httpd-int.h"
#include "runtime/metricsauth-int.h"
#include "runtime/tlscert-int.h"

#define REASON_MAX 512
#define TEXT_PLAIN "text/plain; charset=utf-8"

#define POOL_THREADS        4
#define CONN_MAX            256             /* live connections in all, see DESIGN */
#define CONN_PER_IP_MAX     32              /* live connections of one client address */
#define CONN_HARD_MAX       (CONN_MAX + 64) /* MHD refuses beyond: fds in teardown */
#define IDLE_TIMEOUT_S      10u             /* MHD closes a connection silent this long */
#define REQUEST_DEADLINE_MS 10000           /* waiting longer for a request: closed */
#define LOG_WINDOW_MS       60000           /* mhd_log: one message, then a summary */
/* GnuTLS priorities: TLS 1.2 and 1.3 only, as Go's (controller-runtime's)
 * default minimum. */
#define TLS_PRIORITIES "NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2"
#define TLS_CHAIN_MAX  16          /* certificates in a served chain */
#define TLS_KEEP_MS    (5 * 60000) /* a replaced certificate is freed after */
#define TLS_RELOAD_MS  10000       /* files looked at, by default */

/* One certificate chain and key as GnuTLS serves them (see DESIGN, TLS). */
struct tlsgen {
  struct tlsgen *older;
  gnutls_pcert_st pcert[TLS_CHAIN_MAX];
  unsigned n;
  gnutls_privkey_t key;
  uint64_t replaced_ms; /* when a newer one took its place; 0 while current */
};

struct check {
  char *name;
  kcr_check_fn fn;
  void *ud;
};

struct checklist {
  struct check *v;
  size_t n, cap;
};

/* A POST endpoint (kcr_httpd_add_handler). */
struct handler {
  char *path;
  size_t max_body;
  kcr_httpd_handler_fn fn;
  void *ud;
  void (*free_ud)(void *); /* NULL: ud is borrowed */
};

/* A request to a handler whose body is being read (MHD's request context). */
struct hreq {
  struct handler hd; /* a copy: the list may grow meanwhile */
  struct kcr_buf body;
  uint64_t start_ms; /* first byte of the body (the head was complete) */
  size_t held;       /* bytes of the server's body budget this body holds */
  bool too_big;      /* refused with 413 once the body is read */
  bool over_budget;  /* refused with 503: the bodies in flight fill the budget */
};

/* One client connection (MHD's socket context), in the table. */
struct conn {
  struct conn *prev, *next; /* oldest since_ms first */
  MHD_socket fd;
  unsigned char ip[16]; /* client address; IPv4 as ::ffff:a.b.c.d */
  uint64_t since_ms;    /* when the current phase began */
  bool busy;            /* a request is being answered; else waiting */
  bool closing;         /* shut down by us; MHD has yet to close it */
};

struct loglimit {
  pthread_mutex_t mu;
  bool open; /* a window runs since start_ms */
  uint64_t start_ms;
  unsigned long suppressed; /* messages counted in this window */
  char last[256];           /* the last of them */
};

struct kcr_httpd {
  char *addr; /* as given, for messages */
  char *host; /* NULL: all interfaces */
  char port[6];
  kcr_metrics *metrics;
  bool tls;                    /* HTTPS */
  pthread_mutex_t tls_mu;      /* tls_gen */
  struct tlsgen *tls_gen;      /* the served one first, then replaced ones */
  char *cert_file, *key_file;  /* NULL: certificate made or given, not reloaded */
  pthread_mutex_t reload_mu;   /* the fields below; trylock: one thread looks */
  struct stat cert_st, key_st; /* of the files last loaded */
  uint64_t reload_ms, checked_ms;
  kcr__mauth *auth;          /* NULL: /metrics is open to all */
  pthread_mutex_t life_mu;   /* listen/start/stop */
  int listen_fd;             /* under life_mu; >= 0 while listening */
  struct MHD_Daemon *daemon; /* under life_mu; set while serving */
  atomic_int bound_port;
  pthread_mutex_t checks_mu; /* both check lists and the handlers */
  struct checklist healthz, readyz;
  struct handler *hv; /* under checks_mu; only grows */
  size_t hn, hcap;
  uint64_t drain_ms;        /* kcr_httpd_stop waits this long for answers in flight */
  size_t body_budget;       /* bytes of request bodies held at once, in all */
  atomic_size_t buffered;   /* held now */
  pthread_mutex_t conns_mu; /* the connection table */
  struct conn *oldest, *newest;
  struct loglimit log;
};

/* The server whose request this thread is handling, if any. */
static _Thread_local const kcr_httpd *tl_serving;
/* The server whose connections this pool thread serves: set when a
 * connection starts (MHD's STARTED notification runs on the thread that
 * then does the connection's handshake), read by the certificate callback. */
static _Thread_local kcr_httpd *tl_tls;

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
                           kcr__errstr(err, ebuf, sizeof(ebuf)));
  if(getsockname(fd, (struct sockaddr *)&ss, &sslen)) {
    err = errno;
    close(fd);
    return kcr_errinfo_set(ei, KCR_EIO, "httpd: getsockname on %s: %s", h->addr,
                           kcr__errstr(err, ebuf, sizeof(ebuf)));
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

static bool valid_handler_path(const char *s)
{
  if(!s || s[0] != '/' || !strcmp(s, "/metrics") || !strncmp(s, "/healthz", 8) ||
     !strncmp(s, "/readyz", 7))
    return false;
  for(; *s; s++)
    if((unsigned char)*s <= ' ' || *s == '?' || *s == '#' || *s == 0x7f)
      return false;
  return true;
}

kcr_err kcr__httpd_add_handler_owned(kcr_httpd *h, const char *path, size_t max_body,
                                     kcr_httpd_handler_fn fn, void *ud,
                                     void (*free_ud)(void *))
{
  char *dup;
  kcr_err rc = KCR_OK;

  if(!h || !fn || !valid_handler_path(path) || h->auth) /* auth: /metrics alone */
    return KCR_EINVAL;
  if(!(dup = strdup(path)))
    return KCR_ENOMEM;
  pthread_mutex_lock(&h->checks_mu);
  for(size_t i = 0; i < h->hn; i++)
    if(!strcmp(h->hv[i].path, path)) {
      rc = KCR_EEXIST;
      goto out;
    }
  if(h->hn == h->hcap) {
    size_t cap = h->hcap ? h->hcap * 2 : 4;
    struct handler *v = realloc(h->hv, cap * sizeof(*v));
    if(!v) {
      rc = KCR_ENOMEM;
      goto out;
    }
    h->hv = v;
    h->hcap = cap;
  }
  h->hv[h->hn++] =
      (struct handler){dup, max_body ? max_body : KCR_HTTP_BODY_MAX, fn, ud, free_ud};
  dup = NULL;
out:
  pthread_mutex_unlock(&h->checks_mu);
  free(dup);
  return rc;
}

kcr_err kcr_httpd_add_handler(kcr_httpd *h, const char *path, size_t max_body,
                              kcr_httpd_handler_fn fn, void *ud)
{
  return kcr__httpd_add_handler_owned(h, path, max_body, fn, ud, NULL);
}

/* The handler of path, copied into *out; false when none. */
static bool find_handler(kcr_httpd *h, const char *path, struct handler *out)
{
  bool found = false;

  pthread_mutex_lock(&h->checks_mu);
  for(size_t i = 0; i < h->hn && !found; i++)
    if(!strcmp(h->hv[i].path, path)) {
      *out = h->hv[i];
      found = true;
    }
  pthread_mutex_unlock(&h->checks_mu);
  return found;
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
                                     const char *allow)
{
  enum MHD_Result ret;

  if(!r)
    return MHD_NO;
  if(MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, ctype) != MHD_YES ||
     MHD_add_response_header(r, "X-Content-Type-Options", "nosniff") != MHD_YES ||
     (allow && MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, allow) != MHD_YES)) {
    MHD_destroy_response(r);
    return MHD_NO;
  }
  ret = MHD_queue_response(c, code, r);
  MHD_destroy_response(r);
  return ret;
}

static enum MHD_Result reply_static(struct MHD_Connection *c, unsigned int code,
                                    const char *text, const char *allow)
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
  return send_response(c, code, ctype, r, NULL);
}

/* method: "GET" or "HEAD"; authorised as the verb "get" or "head", as
 * controller-runtime lower-cases it. */
static enum MHD_Result serve_metrics(kcr_httpd *h, struct MHD_Connection *c,
                                     const char *method)
{
  struct kcr_buf body = KCR_BUF_INIT;
  kcr_err rc;

  if(!h->metrics)
    return reply_static(c, MHD_HTTP_NOT_FOUND, "404 page not found\n", NULL);
  if(h->auth) {
    char msg[320];
    const char *auth =
        MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    const char *verb = strcmp(method, MHD_HTTP_METHOD_HEAD) ? "get" : "head";
    int code = kcr__mauth_check(h->auth, verb, "/metrics", auth, msg, sizeof(msg) - 1);
    if(code != MHD_HTTP_OK) {
      strcat(msg, "\n");
      if(kcr_buf_puts(&body, msg))
        return MHD_NO;
      return reply_buf(c, (unsigned int)code, TEXT_PLAIN, &body);
    }
  }
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

  verbose = MHD_lookup_connection_value_n(c, MHD_GET_ARGUMENT_KIND, "verbose", 7, NULL,
                                          NULL) == MHD_YES;
  if(snapshot(h, l, &v, &n))
    return MHD_NO;
  if(!n)
    kcr_buf_puts(&body, "[+]ping ok\n");
  for(size_t i = 0; i < n && !kcr_buf_err(&body); i++) {
    if(run_check(&v[i], reason)) {
      if(reason[0]) /* a note: passing, but worth saying */
        kcr_buf_printf(&body, "[+]%s ok: %s\n", v[i].name, reason);
      else
        kcr_buf_printf(&body, "[+]%s ok\n", v[i].name);
      continue;
    }
    failed = true;
    if(reason[0])
      kcr_buf_printf(&body, "[-]%s failed: %s\n", v[i].name, reason);
    else
      kcr_buf_printf(&body, "[-]%s failed\n", v[i].name);
    KCR_LOG(KCR_LOG_DEBUG, "check failed", KCR_S("endpoint", what),
            KCR_S("check", v[i].name), KCR_S("reason", reason));
  }
  free(v);
  if(!kcr_buf_err(&body) && !failed && !verbose) { /* reset would clear an error */
    kcr_buf_reset(&body);
    kcr_buf_puts(&body, "ok");
  } else {
    kcr_buf_printf(&body, "%s check %s\n", what, failed ? "failed" : "passed");
  }
  if(kcr_buf_err(&body)) {
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
      return reply_static(c, MHD_HTTP_OK, "ok", NULL);
    return reply_static(c, MHD_HTTP_NOT_FOUND, "404 page not found\n", NULL);
  }
  ok = run_check(ck, reason);
  free(v);
  if(ok)
    return reply_static(c, MHD_HTTP_OK, "ok", NULL);
  if(kcr_buf_printf(&body, "internal server error: %s\n",
                    reason[0] ? reason : "check failed"))
    return MHD_NO;
  return reply_buf(c, MHD_HTTP_INTERNAL_SERVER_ERROR, TEXT_PLAIN, &body);
}

static enum MHD_Result route(kcr_httpd *h, struct MHD_Connection *c, const char *method,
                             const char *url)
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
    return serve_metrics(h, c, method);
  if(h->auth) /* an authenticated metrics server serves nothing else */
    return reply_static(c, MHD_HTTP_NOT_FOUND, "404 page not found\n", NULL);
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
  return reply_static(c, MHD_HTTP_NOT_FOUND, "404 page not found\n", NULL);
}

/* ---- the connection table (see DESIGN) ---------------------------------- */

static void conn_unlink(kcr_httpd *h, struct conn *c)
{
  if(c->prev)
    c->prev->next = c->next;
  else
    h->oldest = c->next;
  if(c->next)
    c->next->prev = c->prev;
  else
    h->newest = c->prev;
  c->prev = c->next = NULL;
}

static void conn_append(kcr_httpd *h, struct conn *c)
{
  KCR_ASSERT(!h->newest || h->newest->since_ms <= c->since_ms);
  c->prev = h->newest;
  c->next = NULL;
  if(h->newest)
    h->newest->next = c;
  else
    h->oldest = c;
  h->newest = c;
}

/* The client address as 16 bytes, IPv4 mapped as a dual-stack socket shows
 * it, so one client is one key whichever socket family it came in on. */
static void client_key(const struct sockaddr *sa, unsigned char ip[16])
{
  memset(ip, 0, 16);
  if(sa && sa->sa_family == AF_INET) {
    ip[10] = ip[11] = 0xff;
    memcpy(ip + 12, &((const struct sockaddr_in *)sa)->sin_addr, 4);
  } else if(sa && sa->sa_family == AF_INET6) {
    memcpy(ip, &((const struct sockaddr_in6 *)sa)->sin6_addr, 16);
  }
}

/* The key as text: "10.0.0.7" for IPv4, else IPv6. */
static void client_text(const unsigned char ip[16], char *out, socklen_t n)
{
  static const unsigned char v4mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  bool v4 = !memcmp(ip, v4mapped, sizeof(v4mapped));

  if(!inet_ntop(v4 ? AF_INET : AF_INET6, v4 ? ip + 12 : ip, out, n))
    snprintf(out, n, "?");
}

/* Ends c: MHD reads end-of-stream and closes it on its own thread. Safe
 * under conns_mu: c is unlinked (CLOSED) before MHD closes the fd. */
static void conn_close(struct conn *c)
{
  (void)shutdown(c->fd, SHUT_RDWR);
  c->closing = true;
}

/* The connection to close to make room (of address ip, or of any when ip is
 * NULL; never keep): the one waiting longest for a request, else the one
 * whose request began longest ago. NULL if none. */
static struct conn *conn_victim(kcr_httpd *h, const unsigned char *ip,
                                const struct conn *keep)
{
  struct conn *busy = NULL;

  for(struct conn *c = h->oldest; c; c = c->next) {
    if(c == keep || c->closing || (ip && memcmp(c->ip, ip, 16)))
      continue;
    if(!c->busy)
      return c;
    if(!busy)
      busy = c;
  }
  return busy;
}

/* Adds the new connection nc and closes what must go (DESIGN, steps 1-3).
 * Returns the number of connections closed. Under conns_mu. */
static size_t conn_admit(kcr_httpd *h, struct conn *nc)
{
  size_t total = 0, same = 0, closed = 0;
  struct conn *c;

  for(c = h->oldest; c && nc->since_ms - c->since_ms >= REQUEST_DEADLINE_MS; c = c->next)
    if(!c->busy && !c->closing) {
      conn_close(c);
      closed++;
    }
  conn_append(h, nc);
  for(c = h->oldest; c; c = c->next)
    if(!c->closing) {
      total++;
      same += !memcmp(c->ip, nc->ip, 16);
    }
  while(same > CONN_PER_IP_MAX && (c = conn_victim(h, nc->ip, nc))) {
    conn_close(c);
    same--;
    total--;
    closed++;
  }
  while(total > CONN_MAX && (c = conn_victim(h, NULL, nc))) {
    conn_close(c);
    total--;
    closed++;
  }
  return closed;
}

/* Moves the connection of mc to a new phase: busy (a request is being
 * answered) or waiting (for its next request). */
static void conn_phase(kcr_httpd *h, struct MHD_Connection *mc, bool busy)
{
  const union MHD_ConnectionInfo *ci =
      MHD_get_connection_info(mc, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
  struct conn *c = ci ? ci->socket_context : NULL;

  if(!c)
    return;
  pthread_mutex_lock(&h->conns_mu);
  conn_unlink(h, c);
  c->busy = busy;
  c->since_ms = kcr_time_mono_ms();
  conn_append(h, c);
  pthread_mutex_unlock(&h->conns_mu);
}

/* ---- rate-limited warnings ----------------------------------------------- */

static void log_suppressed(const kcr_httpd *h, unsigned long n, const char *last)
{
  KCR_LOG(KCR_LOG_WARN, "http server: further messages suppressed",
          KCR_S("addr", h->addr), KCR_I("suppressed", n),
          KCR_I("windowSeconds", LOG_WINDOW_MS / 1000), KCR_S("last", last));
}

/* Logs msg as a warning unless one was logged less than LOG_WINDOW_MS ago;
 * then counts it for the summary. Any thread. */
static void log_limited(kcr_httpd *h, const char *msg)
{
  struct loglimit *l = &h->log;
  char last[sizeof(l->last)];
  unsigned long n;
  uint64_t now;

  pthread_mutex_lock(&l->mu);
  now = kcr_time_mono_ms();
  if(l->open && now - l->start_ms < LOG_WINDOW_MS) {
    l->suppressed++;
    snprintf(l->last, sizeof(l->last), "%s", msg);
    pthread_mutex_unlock(&l->mu);
    return;
  }
  n = l->suppressed;
  memcpy(last, l->last, sizeof(last));
  l->suppressed = 0;
  l->open = true;
  l->start_ms = now;
  pthread_mutex_unlock(&l->mu);
  if(n)
    log_suppressed(h, n, last);
  KCR_LOG(KCR_LOG_WARN, "http server", KCR_S("addr", h->addr), KCR_S("error", msg));
}

/* Writes the summary of the running window, if any, and ends it. */
static void log_flush(kcr_httpd *h)
{
  struct loglimit *l = &h->log;
  char last[sizeof(l->last)];
  unsigned long n;

  pthread_mutex_lock(&l->mu);
  n = l->suppressed;
  memcpy(last, l->last, sizeof(last));
  l->suppressed = 0;
  l->open = false;
  pthread_mutex_unlock(&l->mu);
  if(n)
    log_suppressed(h, n, last);
}

/* ---- MHD callbacks ------------------------------------------------------- */

/* Runs the handler on the complete body and sends its answer. */
static enum MHD_Result serve_handler(kcr_httpd *h, struct MHD_Connection *c,
                                     const char *url, struct hreq *rq)
{
  struct kcr_buf out = KCR_BUF_INIT;
  const char *ctype = NULL;
  struct kcr_httpd_request r = {.method = MHD_HTTP_METHOD_POST,
                                .path = url,
                                .content_type = MHD_lookup_connection_value(
                                    c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE),
                                .body = rq->body.ptr ? rq->body.ptr : "",
                                .len = rq->body.len,
                                .conn_ = c};
  int code;

  if(rq->too_big)
    return reply_static(c, MHD_HTTP_CONTENT_TOO_LARGE, "413 request body too large\n",
                        NULL);
  if(rq->over_budget) {
    log_limited(h, "refused a request: the bodies in flight fill the server's budget");
    return reply_static(c, MHD_HTTP_SERVICE_UNAVAILABLE,
                        "503 too many request bodies in flight; retry\n", NULL);
  }
  if(kcr_buf_err(&rq->body))
    return reply_static(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "500 out of memory\n", NULL);
  code = rq->hd.fn(rq->hd.ud, &r, &out, &ctype);
  if(code < 200 || code > 599 || kcr_buf_err(&out)) {
    kcr_buf_cleanup(&out);
    return reply_static(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "500 handler failed\n", NULL);
  }
  if(!out.ptr && kcr_buf_puts(&out, ""))
    return MHD_NO;
  return reply_buf(c, (unsigned int)code, ctype ? ctype : "application/json", &out);
}

/* A request to a handler: the head (first call), the body in parts, then
 * the answer (a call with no more body). */
static enum MHD_Result on_handler(kcr_httpd *h, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *upload_data,
                                  size_t *upload_size, void **req_cls,
                                  const struct handler *hd)
{
  struct hreq *rq = *req_cls;
  const char *cl;

  if(!rq) {
    if(strcmp(method, MHD_HTTP_METHOD_POST)) {
      conn_phase(h, c, true);
      return reply_static(c, MHD_HTTP_METHOD_NOT_ALLOWED, "405 method not allowed\n",
                          "POST");
    }
    cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    if(cl && strtoull(cl, NULL, 10) > hd->max_body) { /* refused before reading it */
      conn_phase(h, c, true);
      return reply_static(c, MHD_HTTP_CONTENT_TOO_LARGE, "413 request body too large\n",
                          NULL);
    }
    if(!(rq = calloc(1, sizeof(*rq))))
      return MHD_NO;
    /* A new phase: on a kept-alive connection the last answer's time must
     * not count against this request (its body has REQUEST_DEADLINE_MS). */
    conn_phase(h, c, false);
    rq->hd = *hd;
    rq->start_ms = kcr_time_mono_ms();
    *req_cls = rq;
    return MHD_YES;
  }
  if(*upload_size) {
    /* A body still arriving after the deadline (a trickle, which restarts
     * MHD's idle timeout with every byte) closes the connection. */
    if(kcr_time_mono_ms() - rq->start_ms > REQUEST_DEADLINE_MS) {
      log_limited(h, "closed a connection whose request body took longer than 10 s");
      return MHD_NO;
    }
    if(rq->body.len + *upload_size > rq->hd.max_body) {
      rq->too_big = true;
    } else if(!rq->too_big && !rq->over_budget) {
      /* Every body counts against the server's budget, so that many slow
       * clients cannot make it hold max_body each. */
      size_t n = *upload_size, was = atomic_fetch_add(&h->buffered, n);
      if(was + n > h->body_budget) {
        atomic_fetch_sub(&h->buffered, n);
        rq->over_budget = true;
      } else {
        rq->held += n;
        kcr_buf_append(&rq->body, upload_data, n);
      }
    }
    *upload_size = 0;
    return MHD_YES;
  }
  conn_phase(h, c, true);
  return serve_handler(h, c, url, rq);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version,
                                  const char *upload_data, size_t *upload_size,
                                  void **req_cls)
{
  kcr_httpd *h = cls;
  struct handler hd;
  enum MHD_Result ret;

  tl_serving = h;
  if(*req_cls || find_handler(h, url, &hd)) {
    ret = on_handler(h, c, url, method, upload_data, upload_size, req_cls, &hd);
  } else {
    conn_phase(h, c, true);
    if(strcmp(method, MHD_HTTP_METHOD_GET) && strcmp(method, MHD_HTTP_METHOD_HEAD))
      ret = reply_static(c, MHD_HTTP_METHOD_NOT_ALLOWED, "405 method not allowed\n",
                         "GET, HEAD");
    else
      ret = route(h, c, method, url);
  }
  tl_serving = NULL;
  return ret;
}

const char *kcr_httpd_request_arg(const struct kcr_httpd_request *rq, const char *key)
{
  if(!rq || !rq->conn_ || !key)
    return NULL;
  return MHD_lookup_connection_value((struct MHD_Connection *)rq->conn_,
                                     MHD_GET_ARGUMENT_KIND, key);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **req_cls,
                         enum MHD_RequestTerminationCode toe)
{
  struct hreq *rq = *req_cls;

  if(rq) {
    atomic_fetch_sub(&((kcr_httpd *)cls)->buffered, rq->held);
    kcr_buf_cleanup(&rq->body);
    free(rq);
    *req_cls = NULL;
  }
  conn_phase(cls, c, false);
}

static void on_connection(void *cls, struct MHD_Connection *mc, void **sctx,
                          enum MHD_ConnectionNotificationCode toe)
{
  kcr_httpd *h = cls;
  const union MHD_ConnectionInfo *fdi, *ai;
  struct conn *c = *sctx;
  char msg[224], ip[INET6_ADDRSTRLEN];
  unsigned char key[16];
  size_t closed;

  if(toe == MHD_CONNECTION_NOTIFY_CLOSED) {
    if(c) {
      pthread_mutex_lock(&h->conns_mu);
      conn_unlink(h, c);
      pthread_mutex_unlock(&h->conns_mu);
      free(c);
      *sctx = NULL;
    }
    return;
  }
  tl_tls = h; /* the handshake follows on this thread: tls_cert_cb */
  fdi = MHD_get_connection_info(mc, MHD_CONNECTION_INFO_CONNECTION_FD);
  ai = MHD_get_connection_info(mc, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
  if(!fdi)
    return;
  if(!(c = calloc(1, sizeof(*c)))) { /* cannot account for it: refuse it */
    (void)shutdown(fdi->connect_fd, SHUT_RDWR);
    return;
  }
  c->fd = fdi->connect_fd;
  client_key(ai ? ai->client_addr : NULL, c->ip);
  memcpy(key, c->ip, sizeof(key));
  pthread_mutex_lock(&h->conns_mu);
  c->since_ms = kcr_time_mono_ms();
  closed = conn_admit(h, c);
  *sctx = c;
  pthread_mutex_unlock(&h->conns_mu);
  if(closed) {
    client_text(key, ip, sizeof(ip));
    snprintf(msg, sizeof(msg),
             "closed %zu stalled connection(s) to admit one from %s (limits: %d per "
             "address, %d in all)",
             closed, ip, CONN_PER_IP_MAX, CONN_MAX);
    log_limited(h, msg);
  }
}

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
  char msg[256];
  size_t n;

  vsnprintf(msg, sizeof(msg), fmt, ap);
  n = strlen(msg);
  while(n && (msg[n - 1] == '\n' || msg[n - 1] == '\r'))
    msg[--n] = '\0';
  log_limited(cls, msg);
}

/* ---- TLS: the served certificate (see DESIGN, TLS) ------------------------ */

static void tlsgen_free(struct tlsgen *g)
{
  if(!g)
    return;
  for(unsigned i = 0; i < g->n; i++)
    gnutls_pcert_deinit(&g->pcert[i]);
  if(g->key)
    gnutls_privkey_deinit(g->key);
  free(g);
}

/* The chain cert and its key, PEM (checked already), for GnuTLS. */
static kcr_err tlsgen_new(const char *cert, const char *key, struct tlsgen **out,
                          struct kcr_errinfo *ei)
{
  gnutls_datum_t cd = {(unsigned char *)(uintptr_t)cert, (unsigned)strlen(cert)};
  gnutls_datum_t kd = {(unsigned char *)(uintptr_t)key, (unsigned)strlen(key)};
  struct tlsgen *g = calloc(1, sizeof(*g));
  int r;

  *out = NULL;
  if(!g)
    return KCR_ENOMEM;
  g->n = TLS_CHAIN_MAX;
  r = gnutls_pcert_list_import_x509_raw(g->pcert, &g->n, &cd, GNUTLS_X509_FMT_PEM, 0);
  if(r < 0) {
    g->n = 0;
    tlsgen_free(g);
    return kcr_errinfo_set(ei, r == GNUTLS_E_MEMORY_ERROR ? KCR_ENOMEM : KCR_ECONFIG,
                           "httpd: the certificate chain cannot be served (at most %d "
                           "certificates): %s",
                           TLS_CHAIN_MAX, gnutls_strerror(r));
  }
  if((r = gnutls_privkey_init(&g->key)) < 0 ||
     (r = gnutls_privkey_import_x509_raw(g->key, &kd, GNUTLS_X509_FMT_PEM, NULL, 0)) <
         0) {
    tlsgen_free(g);
    return kcr_errinfo_set(ei, r == GNUTLS_E_MEMORY_ERROR ? KCR_ENOMEM : KCR_ECONFIG,
                           "httpd: the key cannot be served: %s", gnutls_strerror(r));
  }
  *out = g;
  return KCR_OK;
}

/* Serves g from now on; replaced chains are freed TLS_KEEP_MS after they
 * were replaced (a handshake that took one may still be using it). */
static void tls_swap(kcr_httpd *h, struct tlsgen *g)
{
  uint64_t now = kcr_time_mono_ms();
  struct tlsgen **pp, *dead = NULL;

  pthread_mutex_lock(&h->tls_mu);
  if(h->tls_gen)
    h->tls_gen->replaced_ms = now;
  g->older = h->tls_gen;
  h->tls_gen = g;
  for(pp = &g->older; *pp;) {
    struct tlsgen *o = *pp;
    if(now - o->replaced_ms >= TLS_KEEP_MS) {
      *pp = o->older;
      o->older = dead;
      dead = o;
    } else {
      pp = &o->older;
    }
  }
  pthread_mutex_unlock(&h->tls_mu);
  while(dead) {
    struct tlsgen *o = dead;
    dead = o->older;
    tlsgen_free(o);
  }
}

/* Checks cert and key and serves them (both PEM text; what names them). */
static kcr_err tls_use(kcr_httpd *h, const char *cert, const char *key, const char *what,
                       struct kcr_errinfo *ei)
{
  struct tlsgen *g;
  kcr_err rc = kcr__tlscert_check(cert, key, what, what, ei);

  if(!rc && !(rc = tlsgen_new(cert, key, &g, ei)))
    tls_swap(h, g);
  return rc;
}

static bool same_file(const struct stat *a, const struct stat *b)
{
  return a->st_ino == b->st_ino && a->st_dev == b->st_dev && a->st_size == b->st_size &&
         a->st_mtim.tv_sec == b->st_mtim.tv_sec &&
         a->st_mtim.tv_nsec == b->st_mtim.tv_nsec &&
         a->st_ctim.tv_sec == b->st_ctim.tv_sec &&
         a->st_ctim.tv_nsec == b->st_ctim.tv_nsec;
}

/* Loads the files into a new chain when they changed since last loaded.
 * A pair that does not load (a half-written update, a key not yet the
 * certificate's) is logged and retried next time; the served chain stays. */
static void tls_reload(kcr_httpd *h, bool force)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  struct stat cs, ks;
  char *cert = NULL, *key = NULL;
  uint64_t now = kcr_time_mono_ms();
  kcr_err rc;

  if(!h->cert_file || pthread_mutex_trylock(&h->reload_mu))
    return; /* no files, or another thread is looking */
  if(!force && now - h->checked_ms < h->reload_ms)
    goto out;
  h->checked_ms = now;
  if(stat(h->cert_file, &cs) || stat(h->key_file, &ks) ||
     (same_file(&cs, &h->cert_st) && same_file(&ks, &h->key_st)))
    goto out;
  rc = kcr__tlscert_load(h->cert_file, h->key_file, &cert, &key, &ei);
  if(!rc)
    rc = tls_use(h, cert, key, h->cert_file, &ei);
  if(rc) {
    log_limited(h, ei.message ? ei.message : "cannot reload the TLS certificate");
  } else {
    h->cert_st = cs;
    h->key_st = ks;
    KCR_LOG(KCR_LOG_INFO, "http server: TLS certificate reloaded", KCR_S("addr", h->addr),
            KCR_S("certFile", h->cert_file));
  }
  free(cert);
  kcr__wipe_str(key);
  kcr_errinfo_cleanup(&ei);
out:
  pthread_mutex_unlock(&h->reload_mu);
}

/* GnuTLS asks which chain to present: the served one (the files looked at
 * first when reload_ms has passed). */
static int tls_cert_cb(gnutls_session_t s, const gnutls_datum_t *req_ca_dn, int nreqs,
                       const gnutls_pk_algorithm_t *algos, int nalgos,
                       gnutls_pcert_st **pcert, unsigned int *n, gnutls_privkey_t *key)
{
  kcr_httpd *h = tl_tls;

  if(!h)
    return -1; /* cannot happen (see tl_tls); fail the handshake, not the process */
  tls_reload(h, false);
  pthread_mutex_lock(&h->tls_mu);
  *pcert = h->tls_gen->pcert;
  *n = h->tls_gen->n;
  *key = h->tls_gen->key;
  pthread_mutex_unlock(&h->tls_mu);
  return 0;
}

kcr_err kcr_httpd_set_cert(kcr_httpd *h, const char *cert, const char *key,
                           struct kcr_errinfo *ei)
{
  if(!h || !cert || !key)
    return kcr_errinfo_set(ei, KCR_EINVAL, "kcr_httpd_set_cert: a NULL argument");
  if(!h->tls)
    return kcr_errinfo_set(ei, KCR_EINVAL, "httpd %s: no TLS (tls.enabled)", h->addr);
  return tls_use(h, cert, key, "given", ei);
}

static kcr_err tls_setup(kcr_httpd *h, const struct kcr_httpd_tls *t,
                         struct kcr_errinfo *ei)
{
  char *cert = NULL, *key = NULL;
  kcr_err rc;

  if(!t->enabled) {
    if(t->cert_file || t->key_file)
      return kcr_errinfo_set(ei, KCR_EINVAL,
                             "httpd: a TLS certificate without tls.enabled");
    return KCR_OK;
  }
  if(MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES ||
     MHD_is_feature_supported(MHD_FEATURE_HTTPS_CERT_CALLBACK) != MHD_YES)
    return kcr_errinfo_set(ei, KCR_ECONFIG,
                           "httpd: HTTPS asked for, but libmicrohttpd was built "
                           "without TLS or its certificate callback (Debian's has both)");
  if(!t->cert_file != !t->key_file)
    return kcr_errinfo_set(ei, KCR_EINVAL,
                           "httpd: tls.cert_file and tls.key_file go together");
  h->tls = true;
  h->reload_ms = t->reload_ms ? t->reload_ms : TLS_RELOAD_MS;
  if(t->cert_file) {
    if(!(h->cert_file = strdup(t->cert_file)) || !(h->key_file = strdup(t->key_file)))
      return KCR_ENOMEM;
    if(stat(h->cert_file, &h->cert_st) || stat(h->key_file, &h->key_st)) {
      memset(&h->cert_st, 0, sizeof(h->cert_st)); /* load says why */
      memset(&h->key_st, 0, sizeof(h->key_st));
    }
    rc = kcr__tlscert_load(t->cert_file, t->key_file, &cert, &key, ei);
  } else {
    rc = kcr__tlscert_self_signed(&cert, &key, ei);
  }
  if(!rc)
    rc = tls_use(h, cert, key, t->cert_file ? t->cert_file : "self-signed", ei);
  free(cert);
  kcr__wipe_str(key);
  h->checked_ms = kcr_time_mono_ms();
  return rc;
}

/* ---- lifecycle ----------------------------------------------------------- */

kcr_err kcr_httpd_new(const struct kcr_httpd_opts *opts, kcr_httpd **out,
                      struct kcr_errinfo *ei)
{
  static const struct kcr_httpd_opts defaults = {0};
  kcr_httpd *h;
  kcr_err rc;

  if(!out)
    return kcr_errinfo_set(ei, KCR_EINVAL, "kcr_httpd_new: no out");
  *out = NULL;
  if(!opts)
    opts = &defaults;
  if(!(h = calloc(1, sizeof(*h))))
    return KCR_ENOMEM;
  pthread_mutex_init(&h->life_mu, NULL);
  pthread_mutex_init(&h->checks_mu, NULL);
  pthread_mutex_init(&h->conns_mu, NULL);
  pthread_mutex_init(&h->log.mu, NULL);
  pthread_mutex_init(&h->tls_mu, NULL);
  pthread_mutex_init(&h->reload_mu, NULL);
  h->listen_fd = -1;
  atomic_init(&h->bound_port, 0);
  h->metrics = kcr_metrics_ref(opts->metrics);
  h->drain_ms = opts->drain_ms ? opts->drain_ms : 10000;
  h->body_budget = opts->body_budget ? opts->body_budget : (size_t)64 << 20;
  atomic_init(&h->buffered, 0);
  if(!(h->addr = strdup(opts->addr ? opts->addr : ":8080"))) {
    rc = KCR_ENOMEM;
    goto fail;
  }
  if((rc = parse_addr(h, ei)) || (rc = tls_setup(h, &opts->tls, ei)))
    goto fail;
  if(opts->auth_client && (rc = kcr__mauth_new(opts->auth_client, &h->auth)))
    goto fail;
  *out = h;
  return KCR_OK;
fail:
  kcr_httpd_free(h);
  return rc;
}

kcr_err kcr_httpd_listen(kcr_httpd *h, struct kcr_errinfo *ei)
{
  int fd = -1, port = 0;
  kcr_err rc;

  if(!h)
    return KCR_EINVAL;
  pthread_mutex_lock(&h->life_mu);
  if(h->daemon || h->listen_fd >= 0) {
    rc = kcr_errinfo_set(ei, KCR_EINVAL, "httpd: already %s on %s",
                         h->daemon ? "serving" : "listening", h->addr);
    goto out;
  }
  if((rc = open_listener(h, &fd, &port, ei)))
    goto out;
  h->listen_fd = fd;
  atomic_store(&h->bound_port, port);
out:
  pthread_mutex_unlock(&h->life_mu);
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

/* Serves on fd (taken, whatever happens). Under life_mu. */
static kcr_err serve(kcr_httpd *h, int fd, struct kcr_errinfo *ei)
{
  struct MHD_Daemon *d;
  struct stat st;

  if(fstat(fd, &st)) /* identity of our socket, see close_if_same() */
    memset(&st, 0, sizeof(st));
  /* One option pair per line. */
  /* clang-format off */
  d = MHD_start_daemon(MHD_USE_POLL_INTERNAL_THREAD | MHD_USE_ERROR_LOG | MHD_USE_ITC |
                       (h->tls ? MHD_USE_TLS : 0),
                       0 /* port: the passed socket's */, NULL, NULL, on_request, h,
                       MHD_OPTION_EXTERNAL_LOGGER, mhd_log, h, /* first, as MHD asks */
                       MHD_OPTION_LISTEN_SOCKET, (MHD_socket)fd,
                       MHD_OPTION_THREAD_POOL_SIZE, (unsigned int)POOL_THREADS,
                       MHD_OPTION_CONNECTION_LIMIT, (unsigned int)CONN_HARD_MAX,
                       MHD_OPTION_CONNECTION_TIMEOUT, IDLE_TIMEOUT_S,
                       MHD_OPTION_NOTIFY_CONNECTION, on_connection, h,
                       MHD_OPTION_NOTIFY_COMPLETED, on_completed, h,
                       /* TLS last: without it, the list ends here */
                       h->tls ? MHD_OPTION_HTTPS_CERT_CALLBACK : MHD_OPTION_END, tls_cert_cb,
                       MHD_OPTION_HTTPS_PRIORITIES, TLS_PRIORITIES,
                       MHD_OPTION_END);
  /* clang-format on */
  if(!d) {
    close_if_same(fd, &st);
    return kcr_errinfo_set(ei, KCR_EIO, "httpd: cannot start the server on %s", h->addr);
  }
  h->daemon = d;
  return KCR_OK;
}

kcr_err kcr_httpd_start(kcr_httpd *h, struct kcr_errinfo *ei)
{
  int fd = -1, port = 0;
  kcr_err rc;

  if(!h)
    return KCR_EINVAL;
  pthread_mutex_lock(&h->life_mu);
  if(h->daemon) {
    rc = kcr_errinfo_set(ei, KCR_EINVAL, "httpd: already serving on %s", h->addr);
    goto out;
  }
  if(h->listen_fd >= 0) { /* bound by kcr_httpd_listen() */
    fd = h->listen_fd;
    port = atomic_load(&h->bound_port);
    h->listen_fd = -1;
  } else if((rc = open_listener(h, &fd, &port, ei))) {
    goto out;
  }
  if((rc = serve(h, fd, ei))) {
    atomic_store(&h->bound_port, 0);
    goto out;
  }
  atomic_store(&h->bound_port, port);
  KCR_LOG(KCR_LOG_INFO, "serving metrics and health probes", KCR_S("addr", h->addr),
          KCR_I("port", port), KCR_S("scheme", h->tls ? "https" : "http"),
          KCR_S("metricsAuth", h->auth ? "TokenReview+SubjectAccessReview" : "none"));
out:
  pthread_mutex_unlock(&h->life_mu);
  return rc;
}

int kcr_httpd_port(const kcr_httpd *h) { return h ? atomic_load(&h->bound_port) : 0; }

/* Waits, at most drain_ms, until no connection has a request being
 * answered (busy: from the complete request to the answer sent). */
static void drain(kcr_httpd *h)
{
  uint64_t end = kcr_time_mono_ms() + h->drain_ms;
  size_t busy;

  for(;;) {
    busy = 0;
    pthread_mutex_lock(&h->conns_mu);
    for(struct conn *c = h->oldest; c; c = c->next)
      busy += c->busy && !c->closing;
    pthread_mutex_unlock(&h->conns_mu);
    if(!busy || kcr_time_mono_ms() >= end)
      break;
    nanosleep(&(struct timespec){0, 5000000}, NULL);
  }
  if(busy)
    KCR_LOG(KCR_LOG_WARN, "http server: stopping with requests still in flight",
            KCR_S("addr", h->addr), KCR_I("requests", busy),
            KCR_I("drainMs", h->drain_ms));
}

void kcr_httpd_stop(kcr_httpd *h)
{
  struct MHD_Daemon *d;
  int fd;

  if(!h)
    return;
  if(tl_serving == h) {
    KCR_LOG(KCR_LOG_ERROR, "kcr_httpd_stop called from a server thread: ignored",
            KCR_S("addr", h->addr));
    return;
  }
  pthread_mutex_lock(&h->life_mu);
  d = h->daemon;
  fd = h->listen_fd;
  h->daemon = NULL;
  h->listen_fd = -1;
  atomic_store(&h->bound_port, 0);
  if(d) {
    /* Accept nothing new, let the answers in flight go out, then stop. */
    MHD_socket lfd = MHD_quiesce_daemon(d);
    if(lfd != MHD_INVALID_SOCKET)
      close(lfd);
    drain(h);
    MHD_stop_daemon(d); /* joins the server threads, closes the connections */
  }
  if(fd >= 0)
    close(fd); /* listening, never served */
  pthread_mutex_lock(&h->conns_mu);
  KCR_ASSERT(!h->oldest && !h->newest); /* MHD notified every close */
  pthread_mutex_unlock(&h->conns_mu);
  pthread_mutex_unlock(&h->life_mu);
  log_flush(h);
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
  for(size_t i = 0; i < h->hn; i++) {
    free(h->hv[i].path);
    if(h->hv[i].free_ud)
      h->hv[i].free_ud(h->hv[i].ud);
  }
  free(h->hv);
  pthread_mutex_destroy(&h->log.mu);
  pthread_mutex_destroy(&h->conns_mu);
  pthread_mutex_destroy(&h->checks_mu);
  pthread_mutex_destroy(&h->life_mu);
  kcr__mauth_free(h->auth);
  kcr_metrics_free(h->metrics);
  while(h->tls_gen) {
    struct tlsgen *g = h->tls_gen;
    h->tls_gen = g->older;
    tlsgen_free(g);
  }
  free(h->cert_file);
  free(h->key_file);
  pthread_mutex_destroy(&h->tls_mu);
  pthread_mutex_destroy(&h->reload_mu);
  free(h->addr);
  free(h->host);
  free(h);
}
