/* DESIGN: the REST client: the connection pool, retries, the write gate,
 * error mapping (kcr_client_do). Each request is carried by a transport
 * (transport-int.h): a curl transfer (transport_curl.c), an exchange on a
 * connection of our own (transport_own.c) or the tests' wire seam, behind
 * one interface (transport.c). The verbs built on it - get, list, create,
 * update, patch, apply, delete - are in verbs.c.
 *
 * Shape: a pool (LIFO stack under one mutex) of curl easy handles. A thread
 * takes a handle for one request and gives it back; curl keeps each handle's
 * connection alive, so a busy controller reuses warm TLS connections without
 * sharing a handle between threads (curl's rule). Handles are configured once
 * (TLS, timeouts, HTTP/1.1); per request only the URL, method, body, headers
 * and - when an exec plugin rotated it - the client certificate change.
 *
 * HTTP/1.1, not HTTP/2: each handle has a connection of its own and one
 * request at a time on it (a watch is one long response), so HTTP/2's
 * multiplexing would never be used, while its cost would be paid on every
 * request - curl 7.88 builds the request as HTTP/1 text and converts it,
 * then nghttp2 compresses headers and frames.
 *
 * Proxies: the client decides once, at kcr_client_new, whether its server
 * is reached through a proxy and which (kcr__proxy_for, proxy.c: client-go's
 * rules - the kubeconfig's proxy-url, else https_proxy/http_proxy unless
 * no_proxy names the server, never for a loopback server, ALL_PROXY not
 * read), and gives every handle that answer: CURLOPT_PROXY (the URL, or ""
 * for none) and CURLOPT_NOPROXY "", so curl's own reading of the
 * environment never applies and curl's transfers and our own connections
 * go the same way. A proxied server is curl's alone: the exchanges on
 * connections of our own (transport_own.c) stay off (own_ok false).
 *
 * The switch: kcr_client_opts.transport KCR_TRANSPORT_CURL, or
 * KCR_TRANSPORT=curl in the environment (which decides over the option, so
 * that a program's users can turn those exchanges off without a
 * rebuild; KCR_TRANSPORT=auto turns them back on), leaves own_ok false:
 * every request and watch is then a curl transfer. So does a libcurl the
 * exchanges were not tested with (kcr__own_curl_tested: 7.88.x with
 * OpenSSL - they drive curl's connections through curl_easy_send/recv and
 * rely on how it reads: transport_own.c, DESIGN: TLS), whatever was
 * asked, with one log line.
 *
 * TLS buffers: curl (7.88) sets OpenSSL's SSL_MODE_RELEASE_BUFFERS, so a
 * connection frees its 16 KiB read and write buffers whenever they are
 * empty and allocates them again for the next record: two large mallocs
 * per request, each of which also consolidates malloc's fast bins (a cost
 * the small allocations of JSON trees then pay again). With the OpenSSL
 * backend the SSL_CTX callback (tls_settings) clears the mode - a setting
 * of the context curl makes for a handle's connections, before any
 * exists: a connection keeps its buffers (about 34 KiB) while it is open.
 * It also keeps read-ahead off, on which the exchanges of our own rely
 * (transport_own.c, DESIGN: TLS).
 *
 * OpenSSL: those two settings of the context are all libkcr does with it
 * (<openssl/ssl.h> is here for them alone; tls_openssl reads curl's
 * version string, to know the callback applies). Nothing is looked up in
 * OpenSSL on a connection: whether a connection holds unread bytes is
 * decided from its socket alone (transport_own.c, DESIGN: TLS).
 *
 * Errors: a non-2xx answer is parsed by kcr_errinfo_from_http(), so the
 * caller sees the server's Status verbatim. 429/503 are retried after
 * Retry-After (bounded); a 401 with refreshable credentials is retried once
 * after kcr_config_invalidate(). A body larger than max_response_bytes stops
 * the transfer (KCR_ETOOLARGE); error bodies keep their first 64 KiB.
 *
 * Write gate: for a mutating request each transport asks the gate
 * (kcr__client_may_write) after the connection is ready and just before
 * the first byte of the request goes out, the latest point a client can
 * decide: a curl transfer from curl's pre-request callback
 * (transport_curl.c), a connection of our own once connected, the wire
 * seam before the wire is called. A refused request is reported as
 * KCR_ECANCELED.
 *
 * tls-server-name: the URL curl gets names the tls-server-name instead of
 * the server's host (so SNI and certificate verification use it), and
 * CURLOPT_CONNECT_TO sends the connection to the server URL's real host and
 * port; the Host header keeps the server URL's host, as client-go's does.
 * Set per handle in conn_setup and per request in kcr__conn_prepare
 * (transport_curl.c), so watches (watch.c uses both) behave the same; a
 * connection of our own is made by curl with the same settings and sends
 * the same Host (own_host).
 *
 * Secrets: credentials are fetched per request, as owned snapshots, and
 * wiped after it (kcr_credentials_cleanup, kcr__headers_free, the
 * "Authorization:" buffer). libcurl keeps copies out of our reach: the
 * client certificate and key blobs (CURL_BLOB_COPY, for the handle's
 * lifetime), the proxy URL (CURLOPT_PROXY: it may hold a password) and
 * the request it builds from the header list (its own buffers), freed
 * without wiping. On the wire seam (tests) the credentials and the header
 * are made exactly as for curl, so a 401 re-reads them there too.
 *
 * Lifetime: an atomic reference count; the objects that keep a client hold
 * a reference each, so nothing frees it while one of them can use it.
 *
 * Lock order: client->mu only (never held during I/O). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/ssl.h>

#include "client-int.h"
#include "config-int.h"
#include "core/json-int.h"
#include "core/secret-int.h"
#include "h1-int.h"
#include "kcr/json.h"
#include "kcr/log.h"
#include "kcr/version.h"
#include "limits-int.h"
#include "proxy-int.h"
#include "transport-int.h"

struct kcr_client {
  atomic_uint refs;
  kcr_client *root; /* a scoped handle's (kcr_client_scoped): everything
                       but refs and scope is the root's */
  uint64_t scope;
  kcr_config *cfg;
  struct kcr_client_opts opts; /* defaults filled in; opts.config unused */
  char *user_agent;
  kcr_write_gate gate; /* under mu */
  void *gate_ud;
  kcr_request_observer observe; /* under mu (opts.observe at first) */
  void *observe_ud;
  unsigned cb_busy;     /* gate or observer calls in progress, under mu */
  pthread_cond_t cb_cv; /* cb_busy dropped to 0 */
  kcr__wire_fn wire;
  void *wire_ud;
  struct kcr__target t;          /* how requests reach the server */
  struct curl_slist *connect_to; /* "::<host>:<port>" or NULL */
  char *proxy;                   /* CURLOPT_PROXY (see DESIGN: Proxies), or NULL: none */
  pthread_mutex_t mu;
  struct kcr__conn *pool[KCR__POOL_MAX];
  size_t npool;
  struct kcr__conn *opool[KCR__POOL_MAX]; /* connected for our own exchanges */
  size_t nopool;
};

/* The client a handle stands for: itself, or a scoped handle's root. */
#define ROOT(c) ((c)->root ? (c)->root : (c))

kcr_client *kcr__client_root(kcr_client *c) { return c ? ROOT(c) : NULL; }

_Static_assert(KCR__RECV_BUF <= CURL_MAX_READ_SIZE,
               "KCR__RECV_BUF: more than CURLOPT_BUFFERSIZE takes");

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
/* curl's TLS backend is OpenSSL (tls_settings applies); set once */
static bool tls_openssl;

static bool curl_tested; /* kcr__own_curl_tested of the libcurl loaded; set once */

bool kcr__own_curl_tested(const curl_version_info_data *v)
{
  return v && v->version_num >= KCR__OWN_CURL_MIN && v->version_num < KCR__OWN_CURL_END &&
         v->ssl_version && !strncmp(v->ssl_version, "OpenSSL/", 8);
}

static void curl_init_once(void)
{
  const curl_version_info_data *v;
  curl_global_init(CURL_GLOBAL_DEFAULT);
  v = curl_version_info(CURLVERSION_NOW);
  tls_openssl = v && v->ssl_version && !strncmp(v->ssl_version, "OpenSSL/", 8);
  curl_tested = kcr__own_curl_tested(v);
  if(!curl_tested)
    KCR_LOG(KCR_LOG_INFO,
            "client: the exchanges of our own were not tested with this libcurl; every "
            "request is a curl transfer",
            KCR_S("libcurl", v ? v->version : "?"),
            KCR_S("tls", v && v->ssl_version ? v->ssl_version : "none"),
            KCR_S("tested", "7.88.x with OpenSSL"));
}

/* Sets base_url, host_hdr and connect_to from the config (see DESIGN):
 * without tls-server-name the URL is the server's and the others are NULL. */
static kcr_err route_setup(kcr_client *c, struct kcr_errinfo *ei)
{
  const char *server = kcr_config_server(c->cfg),
             *sni = kcr_config_tls_server_name(c->cfg);
  char *host = NULL, *port = NULL, *given = NULL, *url = NULL;
  struct kcr_buf b = KCR_BUF_INIT;
  struct curl_slist *l;
  CURLU *u = NULL;
  CURLUcode uc;
  kcr_err rc = KCR_ENOMEM;

  if(!sni) {
    c->t.base_url = strdup(server);
    return c->t.base_url ? KCR_OK : KCR_ENOMEM;
  }
  if(!(u = curl_url()))
    goto out;
  uc = curl_url_set(u, CURLUPART_URL, server, 0);
  if(!uc)
    uc = curl_url_get(u, CURLUPART_HOST, &host, 0);
  if(!uc)
    uc = curl_url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT);
  if(!uc && curl_url_get(u, CURLUPART_PORT, &given, 0) == CURLUE_OUT_OF_MEMORY)
    uc = CURLUE_OUT_OF_MEMORY;
  if(!uc && kcr_buf_printf(&b, strchr(sni, ':') ? "[%s]" : "%s", sni))
    uc = CURLUE_OUT_OF_MEMORY;
  if(!uc)
    uc = curl_url_set(u, CURLUPART_HOST, b.ptr, 0);
  if(!uc)
    uc = curl_url_get(u, CURLUPART_URL, &url, 0);
  if(uc == CURLUE_OUT_OF_MEMORY)
    goto out;
  if(uc) {
    rc = kcr_errinfo_set(ei, KCR_ECONFIG, "%s: server %s with tls-server-name %s: %s",
                         kcr_config_origin(c->cfg), server, sni, curl_url_strerror(uc));
    goto out;
  }
  kcr_buf_reset(&b);
  if(kcr_buf_printf(&b, "::%s:%s", host, port) || !(l = curl_slist_append(NULL, b.ptr)))
    goto out;
  c->connect_to = l;
  kcr_buf_reset(&b);
  if(kcr_buf_printf(&b, "Host: %s%s%s", host, given ? ":" : "", given ? given : ""))
    goto out;
  c->t.host_hdr = kcr_buf_take(&b);
  c->t.base_url = strdup(url);
  rc = c->t.host_hdr && c->t.base_url ? KCR_OK : KCR_ENOMEM;
out:
  curl_free(host);
  curl_free(port);
  curl_free(given);
  curl_free(url);
  curl_url_cleanup(u);
  kcr_buf_cleanup(&b);
  return rc;
}

/* Sets proxy: the server's proxy by the config and the environment (see
 * DESIGN: Proxies). */
static kcr_err proxy_setup(kcr_client *c)
{
  const struct kcr__proxy_env env = {
      .https_proxy = getenv("https_proxy"),
      .https_proxy_upper = getenv("HTTPS_PROXY"),
      .http_proxy = getenv("http_proxy"),
      .http_proxy_upper = getenv("HTTP_PROXY"),
      .no_proxy = getenv("no_proxy"),
      .no_proxy_upper = getenv("NO_PROXY"),
  };
  return kcr__proxy_for(kcr_config_server(c->cfg), kcr_config_proxy_url(c->cfg), &env,
                        &c->proxy);
}

/* The transport (see DESIGN: The switch): KCR_TRANSPORT in the
 * environment, when set, decides over opts.transport. */
static kcr_err transport_setup(kcr_client *c, struct kcr_errinfo *ei)
{
  const char *env = getenv("KCR_TRANSPORT");

  if((unsigned)c->opts.transport > KCR_TRANSPORT_CURL)
    return kcr_errinfo_set(ei, KCR_EINVAL, "kcr_client_new: unknown transport %d",
                           (int)c->opts.transport);
  if(!curl_tested) /* whatever was asked: see curl_init_once */
    c->opts.transport = KCR_TRANSPORT_CURL;
  if(!env || !*env)
    return KCR_OK;
  if(!strcmp(env, "curl"))
    c->opts.transport = KCR_TRANSPORT_CURL;
  else if(!strcmp(env, "auto"))
    c->opts.transport = curl_tested ? KCR_TRANSPORT_AUTO : KCR_TRANSPORT_CURL;
  else
    return kcr_errinfo_set(ei, KCR_ECONFIG,
                           "the environment variable KCR_TRANSPORT is \"%.64s\": want "
                           "\"curl\" (every request a curl transfer) or \"auto\"",
                           env);
  KCR_LOG(KCR_LOG_DEBUG, "client: transport chosen by KCR_TRANSPORT",
          KCR_S("transport", env));
  return KCR_OK;
}

/* Sets own_ok, own_host and own_prefix from the server URL (see
 * transport_own.c); an URL curl cannot take leaves own_ok false (curl then
 * reports it, as before). */
static kcr_err own_setup(kcr_client *c)
{
  char *scheme = NULL, *host = NULL, *given = NULL, *path = NULL;
  struct kcr_buf b = KCR_BUF_INIT;
  CURLU *u = curl_url();
  CURLUcode uc = u ? CURLUE_OK : CURLUE_OUT_OF_MEMORY;
  size_t n;

  if(!uc)
    uc = curl_url_set(u, CURLUPART_URL, kcr_config_server(c->cfg), 0);
  if(!uc)
    uc = curl_url_get(u, CURLUPART_SCHEME, &scheme, 0);
  if(!uc)
    uc = curl_url_get(u, CURLUPART_HOST, &host, 0);
  if(!uc)
    uc = curl_url_get(u, CURLUPART_PATH, &path, 0);
  if(!uc && curl_url_get(u, CURLUPART_PORT, &given, 0) == CURLUE_OUT_OF_MEMORY)
    uc = CURLUE_OUT_OF_MEMORY;
  if(!uc && !strcmp(scheme, "https") && !c->proxy &&
     c->opts.transport != KCR_TRANSPORT_CURL) {
    n = strlen(path);
    while(n && path[n - 1] == '/')
      n--;
    if(c->t.host_hdr)
      kcr_buf_printf(&b, "%s\r\n", c->t.host_hdr);
    else
      kcr_buf_printf(&b, "Host: %s%s%s\r\n", host, given ? ":" : "", given ? given : "");
    c->t.own_host = kcr_buf_take(&b);
    c->t.own_prefix = strndup(path, n);
    if(!c->t.own_host || !c->t.own_prefix)
      uc = CURLUE_OUT_OF_MEMORY;
    c->t.own_ok = !uc;
  }
  curl_free(scheme);
  curl_free(host);
  curl_free(given);
  curl_free(path);
  curl_url_cleanup(u);
  kcr_buf_cleanup(&b);
  return uc == CURLUE_OUT_OF_MEMORY ? KCR_ENOMEM : KCR_OK;
}

kcr_err kcr_client_new(const struct kcr_client_opts *opts, kcr_client **out,
                       struct kcr_errinfo *ei)
{
  kcr_client *c;
  kcr_err rc;

  *out = NULL;
  if(!opts || !opts->config)
    return kcr_errinfo_set(ei, KCR_EINVAL, "kcr_client_new: no config");
  pthread_once(&curl_once, curl_init_once);
  c = calloc(1, sizeof(*c));
  if(!c)
    return KCR_ENOMEM;
  atomic_init(&c->refs, 1);
  c->opts = *opts;
  c->cfg = kcr_config_ref(opts->config);
  if(!c->opts.timeout_ms)
    c->opts.timeout_ms = 30000;
  if(!c->opts.connect_timeout_ms)
    c->opts.connect_timeout_ms = 10000;
  if(!c->opts.max_retries)
    c->opts.max_retries = 3;
  if(c->opts.max_retries < 0)
    c->opts.max_retries = 0;
  if(!c->opts.max_retry_after_ms)
    c->opts.max_retry_after_ms = 10000;
  if(!c->opts.max_response_bytes)
    c->opts.max_response_bytes = KCR_CLIENT_MAX_RESPONSE;
  c->user_agent = strdup(c->opts.user_agent ? c->opts.user_agent : "kcr/" KCR_VERSION);
  c->opts.user_agent = c->user_agent;
  pthread_mutex_init(&c->mu, NULL);
  pthread_cond_init(&c->cb_cv, NULL);
  c->observe = c->opts.observe;
  c->observe_ud = c->opts.observe_ud;
  rc = c->user_agent ? route_setup(c, ei) : KCR_ENOMEM;
  if(!rc)
    rc = proxy_setup(c);
  if(!rc)
    rc = transport_setup(c, ei);
  if(!rc)
    rc = own_setup(c);
  if(rc) {
    kcr_client_free(c);
    return rc;
  }
  *out = c;
  return KCR_OK;
}

static void conn_free(struct kcr__conn *conn)
{
  if(!conn)
    return;
  curl_easy_cleanup(conn->h);
  curl_url_cleanup(conn->url); /* after the handle that uses it */
  free(conn->h1);
  kcr__wipe_free(conn->msg.ptr, conn->msg.cap);
  free(conn);
}

kcr_client *kcr_client_ref(kcr_client *c)
{
  if(c)
    atomic_fetch_add_explicit(&c->refs, 1, memory_order_relaxed);
  return c;
}

/* A scoped handle's write scope travels to the gate on the calling thread
 * (the gate runs there) for the duration of one kcr_client_do. */
static _Thread_local struct {
  bool set;
  uint64_t scope;
} tl_scope;

kcr_err kcr_client_scoped(kcr_client *c, uint64_t scope, kcr_client **out)
{
  kcr_client *h;

  if(!out)
    return KCR_EINVAL;
  *out = NULL;
  if(!c)
    return KCR_EINVAL;
  if(!(h = calloc(1, sizeof(*h))))
    return KCR_ENOMEM;
  atomic_init(&h->refs, 1);
  h->root = kcr_client_ref(c->root ? c->root : c);
  h->scope = scope;
  *out = h;
  return KCR_OK;
}

/* The scope of writes made on this thread through a client itself (not a
 * scoped handle): a sharded controller's worker sets it for a reconcile,
 * so that its writes through other clients (a status writer's) carry it. */
static _Thread_local struct {
  bool set;
  uint64_t scope;
} tl_default;

void kcr__client_thread_scope(bool set, uint64_t scope)
{
  tl_default.set = set;
  tl_default.scope = set ? scope : 0;
}

bool kcr_write_scope(uint64_t *scope)
{
  bool set = tl_scope.set || tl_default.set;
  if(set && scope)
    *scope = tl_scope.set ? tl_scope.scope : tl_default.scope;
  return set;
}

void kcr_client_free(kcr_client *c)
{
  if(!c || atomic_fetch_sub_explicit(&c->refs, 1, memory_order_acq_rel) != 1)
    return;
  if(c->root) {
    kcr_client_free(c->root);
    free(c);
    return;
  }
  for(size_t i = 0; i < c->npool; i++)
    conn_free(c->pool[i]);
  for(size_t i = 0; i < c->nopool; i++)
    conn_free(c->opool[i]);
  pthread_mutex_destroy(&c->mu);
  pthread_cond_destroy(&c->cb_cv);
  curl_slist_free_all(c->connect_to); /* after the handles that use it */
  free(c->t.base_url);
  free(c->t.host_hdr);
  kcr__wipe_str(c->proxy);
  free(c->t.own_host);
  free(c->t.own_prefix);
  kcr_config_free(c->cfg);
  free(c->user_agent);
  free(c);
}

kcr_config *kcr_client_config(kcr_client *c) { return ROOT(c)->cfg; }

/* Callbacks registered on the client (gate, observer) are called outside
 * mu but counted in cb_busy, so that replacing one can wait until no call
 * of the old one runs: after that its ud may be freed, even though the
 * client itself lives on (it is reference counted). */
static void cb_done(kcr_client *c)
{
  pthread_mutex_lock(&c->mu);
  if(!--c->cb_busy)
    pthread_cond_broadcast(&c->cb_cv);
  pthread_mutex_unlock(&c->mu);
}

static void cb_quiesce(kcr_client *c) /* with mu held */
{
  while(c->cb_busy)
    pthread_cond_wait(&c->cb_cv, &c->mu);
}

void kcr_client_set_write_gate(kcr_client *c, kcr_write_gate gate, void *ud)
{
  c = ROOT(c);
  pthread_mutex_lock(&c->mu);
  c->gate = gate;
  c->gate_ud = ud;
  cb_quiesce(c);
  pthread_mutex_unlock(&c->mu);
}

void kcr_client_set_observer(kcr_client *c, kcr_request_observer fn, void *ud)
{
  c = ROOT(c);
  pthread_mutex_lock(&c->mu);
  c->observe = fn;
  c->observe_ud = ud;
  cb_quiesce(c);
  pthread_mutex_unlock(&c->mu);
}

bool kcr_write_gate_closed(void *ud) { return false; }

bool kcr__client_may_write(kcr_client *c)
{
  kcr_write_gate gate;
  void *ud;
  bool ok;

  pthread_mutex_lock(&c->mu);
  gate = c->gate;
  ud = c->gate_ud;
  if(gate)
    c->cb_busy++;
  pthread_mutex_unlock(&c->mu);
  if(!gate)
    return true;
  ok = gate(ud);
  cb_done(c);
  return ok;
}

void kcr__client_set_wire(kcr_client *c, kcr__wire_fn fn, void *ud)
{
  c->wire = fn;
  c->wire_ud = ud;
}

const struct kcr__target *kcr__client_target(const kcr_client *c) { return &ROOT(c)->t; }

const struct kcr_client_opts *kcr__client_opts(const kcr_client *c)
{
  return &ROOT(c)->opts;
}

kcr__wire_fn kcr__client_wire(const kcr_client *c, void **ud)
{
  *ud = c->wire_ud;
  return c->wire;
}

size_t kcr__client_max_response(const kcr_client *c)
{
  return c->opts.max_response_bytes;
}

kcr_err kcr__too_large(const kcr_client *c, const char *method, const char *path,
                       struct kcr_errinfo *ei)
{
  return kcr_errinfo_set(ei, KCR_ETOOLARGE,
                         "%s %s: the response is larger than the client accepts "
                         "(max_response_bytes = %zu); raise it, or list with a smaller "
                         "page size",
                         method, path, c->opts.max_response_bytes);
}

void kcr__client_observe(kcr_client *c, const char *method, long code, double secs)
{
  kcr_request_observer fn;
  void *ud;

  pthread_mutex_lock(&c->mu);
  fn = c->observe;
  ud = c->observe_ud;
  if(fn)
    c->cb_busy++;
  pthread_mutex_unlock(&c->mu);
  if(fn) {
    fn(method, code, secs, ud);
    cb_done(c);
  }
}

/* curl's SSL_CTX callback (OpenSSL backend only), two settings of the
 * context: a connection keeps its TLS buffers (see DESIGN: TLS buffers),
 * and reads no further than a record (read-ahead off, OpenSSL's default,
 * set so whatever curl did; see DESIGN: TLS). */
static CURLcode tls_settings(CURL *h, void *ssl_ctx, void *ud)
{
  SSL_CTX_clear_mode((SSL_CTX *)ssl_ctx, SSL_MODE_RELEASE_BUFFERS);
  SSL_CTX_set_read_ahead((SSL_CTX *)ssl_ctx, 0);
  return CURLE_OK;
}

/* Settings that never change for a handle. */
static kcr_err conn_setup(kcr_client *c, struct kcr__conn *conn)
{
  CURL *h = conn->h;
  CURLcode cc;
  size_t ca_len = 0;
  const unsigned char *ca = kcr_config_ca(c->cfg, &ca_len);

  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(h, CURLOPT_ERRORBUFFER, conn->errbuf);
  curl_easy_setopt(h, CURLOPT_USERAGENT, c->user_agent);
  curl_easy_setopt(h, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
  curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS,
                   kcr__curl_ms(c->opts.connect_timeout_ms, false));
  curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
  curl_easy_setopt(h, CURLOPT_TCP_KEEPIDLE, 30L);
  curl_easy_setopt(h, CURLOPT_TCP_KEEPINTVL, 15L);
  /* gzip only: the one encoding the API server compresses with (large
   * answers only), and what client-go asks for. "" would offer every
   * encoding this libcurl decodes, a longer header curl formats anew for
   * each request. */
  curl_easy_setopt(h, CURLOPT_ACCEPT_ENCODING, "gzip");
  curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "https,http");
  curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
  /* The client's decision, not curl's reading of the environment. A curl
   * built without proxies reads none (and cannot take one). */
  cc = curl_easy_setopt(h, CURLOPT_PROXY, c->proxy ? c->proxy : "");
  if(!cc)
    cc = curl_easy_setopt(h, CURLOPT_NOPROXY, "");
  if(cc == CURLE_OUT_OF_MEMORY)
    return KCR_ENOMEM;
  if(cc && c->proxy)
    return KCR_ETRANSPORT;
  if(tls_openssl)
    curl_easy_setopt(h, CURLOPT_SSL_CTX_FUNCTION, tls_settings);
  /* what curl_easy_recv reads at most (see DESIGN: TLS) */
  if(conn->own &&
     curl_easy_setopt(h, CURLOPT_BUFFERSIZE, (long)KCR__RECV_BUF) != CURLE_OK)
    return KCR_ETRANSPORT;
  /* The config refuses a CA together with insecure-skip-tls-verify. */
  if(kcr_config_insecure(c->cfg)) {
    curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 0L);
    curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 0L);
  } else if(ca) {
    struct curl_blob blob = {(void *)ca, ca_len, CURL_BLOB_COPY};
    if(curl_easy_setopt(h, CURLOPT_CAINFO_BLOB, &blob) != CURLE_OK)
      return KCR_ETRANSPORT;
  }
  if(c->connect_to && curl_easy_setopt(h, CURLOPT_CONNECT_TO, c->connect_to) != CURLE_OK)
    return KCR_ETRANSPORT;
  return KCR_OK;
}

static struct kcr__conn *conn_new(kcr_client *c, bool own);

/* A handle from the pool of curl's transfers or of our own exchanges
 * (own), or a new one; NULL if out of memory. */
static struct kcr__conn *conn_get(kcr_client *c, bool own)
{
  struct kcr__conn *conn = NULL;

  pthread_mutex_lock(&c->mu);
  if(own ? c->nopool : c->npool)
    conn = own ? c->opool[--c->nopool] : c->pool[--c->npool];
  pthread_mutex_unlock(&c->mu);
  return conn ? conn : conn_new(c, own);
}

/* A new handle (own: for our own exchanges); NULL if out of memory. */
static struct kcr__conn *conn_new(kcr_client *c, bool own)
{
  struct kcr__conn *conn = calloc(1, sizeof(*conn));

  if(conn)
    conn->own = own; /* before conn_setup: its TLS settings differ */
  if(!conn || !(conn->h = curl_easy_init()) || !(conn->url = curl_url()) ||
     (own && !(conn->h1 = malloc(sizeof(*conn->h1)))) || conn_setup(c, conn)) {
    conn_free(conn);
    return NULL;
  }
  conn->sock = CURL_SOCKET_BAD; /* not connected for our own exchanges */
  return conn;
}

struct kcr__conn *kcr__conn_get(kcr_client *c) { return conn_get(c, false); }

struct kcr__conn *kcr__conn_get_own(kcr_client *c) { return conn_get(c, true); }

struct kcr__conn *kcr__conn_new_own(kcr_client *c) { return conn_new(c, true); }

void kcr__conn_put(kcr_client *c, struct kcr__conn *conn, bool broken)
{
  if(!conn)
    return;
  pthread_mutex_lock(&c->mu);
  if(!broken && conn->own && c->nopool < KCR__POOL_MAX) {
    c->opool[c->nopool++] = conn;
    conn = NULL;
  } else if(!broken && !conn->own && c->npool < KCR__POOL_MAX) {
    c->pool[c->npool++] = conn;
    conn = NULL;
  }
  pthread_mutex_unlock(&c->mu);
  conn_free(conn);
}

static void sleep_ms(uint64_t ms)
{
  struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
  if(!ms)
    return;
  while(nanosleep(&ts, &ts))
    ;
}

/* A header value as it may be sent: no control byte (a CR or LF would end
 * the header and start another). NULL is fine (none). */
static bool header_value_ok(const char *v)
{
  for(; v && *v; v++)
    if((unsigned char)*v < 0x20 || *v == 0x7f)
      return false;
  return true;
}

kcr_err kcr_client_do(kcr_client *c, const struct kcr_http_request *req,
                      struct kcr_http_response *resp, struct kcr_errinfo *ei)
{
  /* Each attempt reports into its own errinfo: only the last one's, and
   * only if the call fails, reaches ei (a 429 before a success is no news
   * for the caller, nor something to free). */
  struct kcr_errinfo att = KCR_ERRINFO_INIT;
  bool reauthed = false;
  int max_retries;
  kcr_err rc;

  if(c && c->root) { /* a scoped handle: the root's request, with its scope */
    bool was = tl_scope.set;
    uint64_t old = tl_scope.scope;
    tl_scope.set = true;
    tl_scope.scope = c->scope;
    rc = kcr_client_do(c->root, req, resp, ei);
    tl_scope.set = was;
    tl_scope.scope = old;
    return rc;
  }
  if(!req || !req->method || !req->path || req->path[0] != '/')
    return kcr_errinfo_set(ei, KCR_EINVAL,
                           "kcr_client_do: a request needs a method and a path "
                           "starting with '/'");
  if(!header_value_ok(req->accept) || !header_value_ok(req->content_type))
    return kcr_errinfo_set(
        ei, KCR_EINVAL, "kcr_client_do: %s %s: a control character in the %s header",
        req->method, req->path, header_value_ok(req->accept) ? "Content-Type" : "Accept");
  max_retries = req->max_retries < 0    ? 0
                : req->max_retries == 0 ? c->opts.max_retries
                                        : req->max_retries;
  for(int attempt = 0;; attempt++) {
    long retry_after = -1;
    uint64_t wait_ms, cap = c->opts.max_retry_after_ms;
    kcr_errinfo_cleanup(&att);
    rc = kcr__transport_do(c, req, resp, &retry_after, ei ? &att : NULL);
    /* A 401 is worth one more try only if re-reading the credentials can
     * change them; a static token or certificate would be refused again. */
    if(rc == KCR_EUNAUTHORIZED && !reauthed && kcr__config_refreshable(c->cfg)) {
      reauthed = true;
      kcr_config_invalidate(c->cfg);
      continue;
    }
    if((rc != KCR_ETOOMANY && rc != KCR_EUNAVAILABLE) || attempt >= max_retries)
      break;
    /* Retry-After in seconds; without one, back off 1 s, 2 s, 4 s ... (the
     * shift stops at 2^20 s, far above any cap, so it cannot overflow). */
    if(retry_after >= 0)
      wait_ms = (uint64_t)retry_after > cap / 1000 ? cap : (uint64_t)retry_after * 1000;
    else
      wait_ms = (uint64_t)1000 << (attempt < 20 ? attempt : 20);
    if(wait_ms > cap)
      wait_ms = cap;
    KCR_LOG(KCR_LOG_DEBUG, "retrying after server asked to wait",
            KCR_S("method", req->method), KCR_S("path", req->path),
            KCR_I("code", resp->code), KCR_I("waitMs", (long long)wait_ms),
            KCR_I("attempt", attempt + 1));
    sleep_ms(wait_ms);
  }
  if(rc && ei) {
    kcr_errinfo_cleanup(ei);
    *ei = att;
  } else {
    kcr_errinfo_cleanup(&att);
  }
  return rc;
}
