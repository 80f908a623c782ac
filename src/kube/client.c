/* DESIGN: the REST client's requests: the connection pool, curl's
 * transfers and the exchanges on connections of our own, retries, the
 * write gate, error mapping (kcr_client_do). The verbs built on it - get,
 * list, create, update, patch, apply, delete - are in verbs.c.
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
 * go the same way. A proxied server is curl's alone: the exchanges below
 * stay off (own_ok false).
 *
 * The switch: kcr_client_opts.transport KCR_TRANSPORT_CURL, or
 * KCR_TRANSPORT=curl in the environment (which decides over the option, so
 * that a program's users can turn the exchanges below off without a
 * rebuild; KCR_TRANSPORT=auto turns them back on), leaves own_ok false:
 * every request and watch is then a curl transfer. So does a libcurl the
 * exchanges were not tested with (kcr__own_curl_tested: 7.88.x with
 * OpenSSL - they drive curl's connections through curl_easy_send/recv and
 * rely on how it reads: see TLS), whatever was asked, with one log line.
 *
 * Transports: a request goes through one of three, chosen per request
 * (transport_for): the wire seam when a test set one; a connection of our
 * own for a write that may take one (below); else a curl transfer. Each
 * is three steps (struct transport): prepare takes or makes the
 * connection and builds the request; exchange sends it and reads the
 * answer by the request's deadline, sending it again only as Sent twice
 * allows; finish keeps or drops the connection and wipes what held
 * credentials. What they share is done once, around the steps (run): the
 * answer reset first; the request observed once prepare succeeded; an
 * answer cut short (too large, out of memory) reported and its connection
 * dropped; any other answer an error or not by its status, with its
 * Retry-After. A watch on a connection of our own (kcr__own_stream) goes
 * through the same own transport, its body handed on as it comes.
 *
 * Writes on connections of our own: a request other than GET or HEAD to an
 * https server (every write a controller makes) is not a curl transfer, unless
 * the server is reached through a proxy (see Proxies: then curl does it all).
 * curl connects the handle (CURLOPT_CONNECT_ONLY: TCP,
 * TLS with every setting above, client certificate, tls-server-name) and
 * keeps the connection; the request is written as one message (own_request:
 * the request line, Host, User-Agent, Accept, Content-Type and
 * Content-Length, Authorization, then the body) with curl_easy_send and the
 * answer read with curl_easy_recv into the HTTP/1.1 reader of h1-int.h
 * (framing by Content-Length, chunked or close; 1xx skipped), waiting in
 * poll() on the socket until the request's deadline (timeout_ms, connecting
 * included). What this saves is curl's per-transfer machinery for a small
 * request: the request formatted a byte at a time through its printf,
 * connection and URL set-up, header parsing.
 * Watches go the same way (kcr__own_stream, for watch.c): the answer's body
 * is handed to the watch as it arrives, and the wait for it also ends when
 * the watch's eventfd becomes readable (kcr_watch_cancel). A connection
 * being made notices it within about a second: curl calls its progress
 * callback (own_canceled) about once a second while connecting, and the
 * callback looks at the eventfd. Per event this saves curl's transfer
 * machinery (its multi handle, a poll(0) before every TLS record, its
 * chunked decoder and write callback). With a batch (batch_ms) the stream,
 * after handing over what it read, sleeps on the eventfd alone for that
 * long before it reads again: under a burst each wake-up of the watch's
 * thread then brings several events, where it brought one or two - the
 * thread switch, poll, recvfrom and TLS read per wake-up are what a watch
 * event cost most (bench/README.md). After a wake-up that read nothing
 * new the wait is on the socket again, so an event after a quiet spell is
 * read at once.
 * Other reads stay curl transfers: LIST pages come gzip-compressed when
 * large (a content coding the reader refuses: it never asks for one), and
 * a path with a byte a request line cannot hold (a space, a control or
 * non-ASCII byte) goes to curl, which refuses it as before. A
 * connection is kept while its answers are whole and say nothing of closing,
 * and is not used again when it has anything to read before the request
 * goes out (one poll: the server closed it, or sent what would be taken for
 * the next answer). One that gives no answer at all after being reused (the
 * server closed it as the request went out, or restarted) is dropped, and
 * the request sent once more on a new connection when that cannot make it
 * happen twice (see Sent twice); any other failure drops it. A connection
 * made with an older client certificate is not reused. Nothing is sent
 * once the deadline has passed (KCR_FOREVER: no deadline). An answer that
 * comes before the request is all out (413 for a body over the server's
 * limit, after which the server stops reading and resets the connection)
 * is read and reported, as curl does, and the connection dropped; a socket
 * that becomes readable while the request waits to go out is that only
 * when a read gets data from it (a TLS 1.3 server's session tickets, sent
 * after the handshake, are no data: the read takes them in and the sending
 * goes on). The message holds the bearer token: it is wiped after the
 * exchange (and freed when over 64 KiB, so the pool keeps no large ones).
 *
 * TLS buffers: curl (7.88) sets OpenSSL's SSL_MODE_RELEASE_BUFFERS, so a
 * connection frees its 16 KiB read and write buffers whenever they are
 * empty and allocates them again for the next record: two large mallocs
 * per request, each of which also consolidates malloc's fast bins (a cost
 * the small allocations of JSON trees then pay again). With the OpenSSL
 * backend the SSL_CTX callback (tls_settings) clears the mode - a setting
 * of the context curl makes for a handle's connections, before any
 * exists: a connection keeps its buffers (about 34 KiB) while it is open.
 *
 * TLS: nothing of a connection of our own waits in OpenSSL where poll()
 * cannot see it, and nothing in libkcr looks into OpenSSL's state on a
 * connection. Read-ahead is off (OpenSSL's default; tls_settings sets it
 * so, for every handle): for each record OpenSSL reads its 5-byte header
 * and then exactly its body, never past it. Every read (curl_easy_recv:
 * in curl 7.88 one SSL_read of at most the handle's CURLOPT_BUFFERSIZE,
 * with nothing buffered between OpenSSL and the socket) asks for
 * KCR__RECV_BUF bytes, at least a record's plaintext, so the record it
 * decrypts is handed over whole. So when a read returns, OpenSSL holds no
 * plaintext: whatever the server sent after that record is still in the
 * socket. The read loop waits in poll() only after a read found nothing
 * (CURLE_AGAIN: at most part of a record has come, and its rest will wake
 * poll); bytes in an answer's last record after the answer are seen by the
 * reader (it used less than the read got: the connection is not kept);
 * bytes in later records are seen by own_unasked before the next request
 * (the connection is not used again). What the handshake may leave,
 * session tickets, is not data: the next read processes it. curl's own
 * transfers read the same way and check SSL_pending() before they wait.
 * This rests on curl 7.88's reading: curl 8.1 added a receive buffer
 * under TLS, and reads that fill the buffer from several records - one
 * reason the exchanges run on the tested libcurl only (The switch).
 *
 * Errors: a non-2xx answer is parsed by kcr_errinfo_from_http(), so the
 * caller sees the server's Status verbatim. 429/503 are retried after
 * Retry-After (bounded); a 401 with refreshable credentials is retried once
 * after kcr_config_invalidate(). A body larger than max_response_bytes stops
 * the transfer (KCR_ETOOLARGE); error bodies keep their first 64 KiB.
 *
 * Sent twice: a request that got no byte of answer is sent again (once,
 * on a new connection, and only when the connection was reused) if no
 * byte of it left - the first send on a connection of our own hands TLS
 * one record at most, so when it fails the server can have read nothing -
 * or if it is a GET or HEAD, which does no harm twice (Go's net/http has
 * the same rule). A write of which something left may have been carried
 * out (a create with generateName would make a second object): it is not
 * sent again, and the caller gets KCR_EUNCERTAIN, as for any write that
 * got no answer after bytes of it left. curl would send any request again
 * after a reused connection gave no answer (7.88, Curl_retry_request:
 * whatever the method, whatever was sent), and calls the pre-request
 * callback before it does: there a write is stopped, and reported as
 * KCR_EUNCERTAIN, when curl sent bytes since the first call
 * (CURLINFO_REQUEST_SIZE; it counts a proxy's CONNECT too, so through a
 * tunnel a write is never sent again). A write that times out is
 * KCR_ETIMEDOUT, its outcome as unknown.
 *
 * Write gate: for a mutating request the gate is checked from curl's
 * pre-request callback, i.e. after the connection is ready and just before
 * the first byte of the request goes out, the latest point a client can
 * decide. A refused request ends with CURLE_ABORTED_BY_CALLBACK and is
 * reported as KCR_ECANCELED. On a connection of our own the gate is
 * checked at the same point: connected, nothing sent. (Every write has the
 * callback, ungated ones too: see Sent twice.)
 *
 * tls-server-name: the URL curl gets names the tls-server-name instead of
 * the server's host (so SNI and certificate verification use it), and
 * CURLOPT_CONNECT_TO sends the connection to the server URL's real host and
 * port; the Host header keeps the server URL's host, as
 * client-go's does. Set per handle in conn_setup and per request in
 * kcr__conn_prepare, so watches (watch.c uses both) behave the same.
 *
 * URL: each request's URL is given to curl twice, as text (CURLOPT_URL,
 * what curl reports) and parsed into the handle's CURLU (CURLOPT_CURLU),
 * with the flags curl itself parses a CURLOPT_URL with. With both set,
 * curl 7.88 takes the host, port, path and query from the CURLU and skips
 * its own parse of the text and the rebuilding of the whole URL from the
 * parts (curl_url_get(CURLUPART_URL), formatted a byte at a time). Never
 * followed (FOLLOWLOCATION is off), so a redirect cannot make the two
 * disagree.
 *
 * Secrets: credentials are fetched per request, as owned snapshots, and
 * wiped after it (kcr_credentials_cleanup, kcr__headers_free, the
 * "Authorization:" buffer). libcurl keeps copies out of our reach: the
 * client certificate and key blobs (CURL_BLOB_COPY, for the handle's
 * lifetime), the proxy URL (CURLOPT_PROXY: it may hold a password) and
 * the request it builds from the header list (its own buffers), freed
 * without wiping. On the wire seam
 * (tests) the credentials and the header are made exactly as for curl, so a
 * 401 re-reads them there too.
 *
 * Lifetime: an atomic reference count; the objects that keep a client hold
 * a reference each, so nothing frees it while one of them can use it.
 *
 * Lock order: client->mu only (never held during I/O). */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <openssl/ssl.h>

#include "client-int.h"
#include "config-int.h"
#include "core/json-int.h"
#include "core/secret-int.h"
#include "h1-int.h"
#include "kcr/json.h"
#include "kcr/log.h"
#include "kcr/time.h"
#include "kcr/version.h"
#include "limits-int.h"
#include "proxy-int.h"

struct kcr_client {
  atomic_uint refs;
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
  char *base_url;                /* the server URL, with tls-server-name as host */
  char *host_hdr;                /* "Host: <server URL's host[:port]>" or NULL */
  struct curl_slist *connect_to; /* "::<host>:<port>" or NULL */
  char *proxy;                   /* CURLOPT_PROXY (see DESIGN: Proxies), or NULL: none */
  /* Exchanges of our own (see DESIGN): for an https server; the Host
   * header line and the server URL's path (without a final '/'). */
  bool own_ok;
  char *own_host, *own_prefix;
  pthread_mutex_t mu;
  struct kcr__conn *pool[KCR__POOL_MAX];
  size_t npool;
  struct kcr__conn *opool[KCR__POOL_MAX]; /* connected for our own exchanges */
  size_t nopool;
};

_Static_assert(KCR__RECV_BUF <= CURL_MAX_READ_SIZE,
               "KCR__RECV_BUF: more than CURLOPT_BUFFERSIZE takes");

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static bool tls_openssl; /* curl's TLS backend is OpenSSL; set once */

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
    c->base_url = strdup(server);
    return c->base_url ? KCR_OK : KCR_ENOMEM;
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
  c->host_hdr = kcr_buf_take(&b);
  c->base_url = strdup(url);
  rc = c->host_hdr && c->base_url ? KCR_OK : KCR_ENOMEM;
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

/* Sets own_ok, own_host and own_prefix from the server URL (see DESIGN:
 * writes on connections of our own); an URL curl cannot take leaves
 * own_ok false (curl then reports it, as before). */
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
    if(c->host_hdr)
      kcr_buf_printf(&b, "%s\r\n", c->host_hdr);
    else
      kcr_buf_printf(&b, "Host: %s%s%s\r\n", host, given ? ":" : "", given ? given : "");
    c->own_host = kcr_buf_take(&b);
    c->own_prefix = strndup(path, n);
    if(!c->own_host || !c->own_prefix)
      uc = CURLUE_OUT_OF_MEMORY;
    c->own_ok = !uc;
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

void kcr_client_free(kcr_client *c)
{
  if(!c || atomic_fetch_sub_explicit(&c->refs, 1, memory_order_acq_rel) != 1)
    return;
  for(size_t i = 0; i < c->npool; i++)
    conn_free(c->pool[i]);
  for(size_t i = 0; i < c->nopool; i++)
    conn_free(c->opool[i]);
  pthread_mutex_destroy(&c->mu);
  pthread_cond_destroy(&c->cb_cv);
  curl_slist_free_all(c->connect_to); /* after the handles that use it */
  free(c->base_url);
  free(c->host_hdr);
  kcr__wipe_str(c->proxy);
  free(c->own_host);
  free(c->own_prefix);
  kcr_config_free(c->cfg);
  free(c->user_agent);
  free(c);
}

kcr_config *kcr_client_config(kcr_client *c) { return c->cfg; }

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
  pthread_mutex_lock(&c->mu);
  c->gate = gate;
  c->gate_ud = ud;
  cb_quiesce(c);
  pthread_mutex_unlock(&c->mu);
}

void kcr_client_set_observer(kcr_client *c, kcr_request_observer fn, void *ud)
{
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

static bool mutating(const char *method)
{
  return strcmp(method, "GET") && strcmp(method, "HEAD");
}

/* curl's pre-request callback for a write (ud: its kcr__conn), called
 * each time curl is about to send the request. curl sends it again, on a
 * new connection and whatever the method, when a reused connection ended
 * without a byte of answer (its Curl_retry_request); a write is let go
 * again only if curl sent nothing since the first call
 * (CURLINFO_REQUEST_SIZE, what the transfer sent: also a proxy's CONNECT,
 * so that through a tunnel a write is never sent again). Then the write
 * gate, at the last moment. */
static int write_prereq(void *ud, char *primary_ip, char *local_ip, int primary_port,
                        int local_port)
{
  struct kcr__conn *conn = ud;
  long sent = 0;

  curl_easy_getinfo(conn->h, CURLINFO_REQUEST_SIZE, &sent);
  if(conn->pre_sent < 0) {
    conn->pre_sent = sent;
  } else if(sent > conn->pre_sent) {
    conn->not_resent = true;
    return CURL_PREREQFUNC_ABORT;
  }
  if(conn->gated && !kcr__client_may_write(conn->client))
    return CURL_PREREQFUNC_ABORT;
  return CURL_PREREQFUNC_OK;
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

/* A timeout for curl, which takes a long, 0 meaning "none" for a transfer
 * but "300 s" for connecting: KCR_FOREVER, and anything a long cannot hold,
 * become "none" (transfer) or the largest value curl takes (connect). */
static long curl_ms(uint64_t ms, bool transfer)
{
  if(ms == KCR_FOREVER || ms > (uint64_t)INT32_MAX)
    return transfer ? 0L : (long)INT32_MAX;
  return (long)ms;
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
                   curl_ms(c->opts.connect_timeout_ms, false));
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

/* "Authorization: Bearer <token>" into auth (empty without a token). The
 * caller releases it with auth_wipe(). */
static kcr_err auth_header(const struct kcr_credentials *cr, struct kcr_buf *auth)
{
  static const char prefix[] = "Authorization: Bearer ";

  if(!cr->token)
    return KCR_OK;
  /* secret_append: a block left behind by growing is wiped, not just freed */
  kcr__secret_append(auth, prefix, sizeof(prefix) - 1);
  kcr__secret_append(auth, cr->token, strlen(cr->token));
  return kcr_buf_err(auth);
}

static void auth_wipe(struct kcr_buf *auth)
{
  kcr__wipe_free(auth->ptr, auth->cap);
  *auth = (struct kcr_buf)KCR_BUF_INIT;
}

void kcr__headers_free(struct curl_slist *hdrs)
{
  static const char auth[] = "Authorization:";
  for(struct curl_slist *n = hdrs; n; n = n->next)
    if(n->data && !strncasecmp(n->data, auth, sizeof(auth) - 1))
      kcr__wipe(n->data, strlen(n->data)); /* curl frees it */
  curl_slist_free_all(hdrs);
}

/* The client certificate of cr on conn's handle, if it has one and the
 * handle has not got it yet. */
static void client_cert(struct kcr__conn *conn, const struct kcr_credentials *cr)
{
  if(cr->cert && cr->key && (!conn->cert_set || conn->cred_gen != cr->generation)) {
    struct curl_blob cb = {cr->cert, cr->cert_len, CURL_BLOB_COPY};
    struct curl_blob kb = {cr->key, cr->key_len, CURL_BLOB_COPY};
    curl_easy_setopt(conn->h, CURLOPT_SSLCERTTYPE, "PEM");
    curl_easy_setopt(conn->h, CURLOPT_SSLCERT_BLOB, &cb);
    curl_easy_setopt(conn->h, CURLOPT_SSLKEYTYPE, "PEM");
    curl_easy_setopt(conn->h, CURLOPT_SSLKEY_BLOB, &kb);
    conn->cert_set = true;
    conn->cred_gen = cr->generation;
  }
}

kcr_err kcr__conn_prepare(kcr_client *c, struct kcr__conn *conn, const char *method,
                          const char *path, const char *content_type, bool ungated,
                          struct curl_slist **hdrs, struct kcr_errinfo *ei)
{
  struct kcr_credentials cr = {0};
  struct kcr_buf url = KCR_BUF_INIT, auth = KCR_BUF_INIT;
  struct curl_slist *l = NULL, *n;
  CURL *h = conn->h;
  kcr_err rc;

  *hdrs = NULL;
  rc = kcr_config_dup_credentials(c->cfg, &cr, ei);
  if(rc)
    goto out;
  rc = KCR_ENOMEM;
  if(kcr_buf_puts(&url, c->base_url))
    goto out;
  while(url.len && url.ptr[url.len - 1] == '/')
    url.ptr[--url.len] = '\0';
  if(kcr_buf_puts(&url, path))
    goto out;
  /* The URL parsed as curl would (see DESIGN: URL); one it refuses is
   * left to curl, which reports it as before. */
  curl_easy_setopt(h, CURLOPT_URL, url.ptr);
  if(curl_url_set(conn->url, CURLUPART_URL, url.ptr,
                  CURLU_GUESS_SCHEME | CURLU_NON_SUPPORT_SCHEME) == CURLUE_OK)
    curl_easy_setopt(h, CURLOPT_CURLU, conn->url);
  else
    curl_easy_setopt(h, CURLOPT_CURLU, NULL);
  curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, NULL);
  curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
  if(strcmp(method, "GET"))
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
  conn->client = c;
  conn->pre_sent = -1;
  conn->gated = !ungated;
  conn->not_resent = false;
  if(mutating(method)) {
    curl_easy_setopt(h, CURLOPT_PREREQFUNCTION, write_prereq);
    curl_easy_setopt(h, CURLOPT_PREREQDATA, conn);
  } else {
    curl_easy_setopt(h, CURLOPT_PREREQFUNCTION, NULL);
  }
  client_cert(conn, &cr);
  n = curl_slist_append(l, "Accept: application/json");
  if(!n)
    goto out;
  l = n;
  if(content_type) {
    struct kcr_buf ct = KCR_BUF_INIT;
    kcr_buf_puts(&ct, "Content-Type: ");
    if(kcr_buf_puts(&ct, content_type) || !(n = curl_slist_append(l, ct.ptr))) {
      kcr_buf_cleanup(&ct);
      goto out;
    }
    kcr_buf_cleanup(&ct);
    l = n;
  }
  if(c->host_hdr) {
    if(!(n = curl_slist_append(l, c->host_hdr)))
      goto out;
    l = n;
  }
  if(auth_header(&cr, &auth))
    goto out;
  if(auth.ptr) {
    if(!(n = curl_slist_append(l, auth.ptr)))
      goto out;
    l = n;
  }
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, l);
  *hdrs = l;
  l = NULL;
  rc = KCR_OK;
out:
  auth_wipe(&auth);
  kcr_buf_cleanup(&url);
  kcr__headers_free(l);
  kcr_credentials_cleanup(&cr);
  return rc;
}

/* The error of a request the write gate did not let out. */
static kcr_err gate_refused(const char *method, const char *path, struct kcr_errinfo *ei)
{
  return kcr_errinfo_set(ei, KCR_ECANCELED,
                         "%s %s: not sent: the write gate refused it (this replica "
                         "does not hold the leader lease)",
                         method, path);
}

/* The error of a request whose connection ended without an answer (why:
 * the transport's word, or NULL). A write of which something left
 * (sent) may have been carried out: KCR_EUNCERTAIN, never sent again (see
 * DESIGN: sent twice); otherwise KCR_ETRANSPORT. */
static kcr_err no_answer(const char *method, const char *path, bool sent, const char *why,
                         struct kcr_errinfo *ei)
{
  if(sent && mutating(method))
    return kcr_errinfo_set(ei, KCR_EUNCERTAIN,
                           "%s %s: the connection closed after the request went out, "
                           "without an answer%s%s%s: it may or may not have been "
                           "carried out (not sent again)",
                           method, path, why ? " (" : "", why ? why : "", why ? ")" : "");
  return kcr_errinfo_set(ei, KCR_ETRANSPORT,
                         "%s %s: the connection closed without an answer%s%s%s", method,
                         path, why ? " (" : "", why ? why : "", why ? ")" : "");
}

kcr_err kcr__curl_err(CURLcode cc, const struct kcr__conn *conn, const char *method,
                      const char *path, struct kcr_errinfo *ei)
{
  kcr_err rc = cc == CURLE_OPERATION_TIMEDOUT ? KCR_ETIMEDOUT : KCR_ETRANSPORT;
  const char *detail = conn->errbuf[0] ? conn->errbuf : curl_easy_strerror(cc);
  if(cc == CURLE_ABORTED_BY_CALLBACK && conn->not_resent)
    return no_answer(method, path, true, "curl would have sent it again", ei);
  if(cc == CURLE_ABORTED_BY_CALLBACK)
    return gate_refused(method, path, ei);
  return kcr_errinfo_set(ei, rc, "%s %s: %s", method, path, detail);
}

/* ---- the transports (see DESIGN: Transports) ---- */

/* A body read as it streams (kcr__own_stream): its bytes go to fn, the
 * status to *code first; wake_fd readable ends the wait for it; batch_ms:
 * see kcr__own_stream. */
struct sink {
  kcr__h1_body_fn fn;
  void *ud;
  long *code;
  int wake_fd;
  uint64_t batch_ms;
};

/* Where an answer goes: its body (take_body), status and Retry-After. */
struct reply {
  struct kcr_buf *body;
  long retry_after_s; /* -1 if absent */
  long *code;         /* the status, once known (wire: set before the body) */
  CURL *h;            /* curl: the transfer, asked for the status; else NULL */
  size_t max;
  bool too_large, nomem;
};

/* One request on its way through a transport: what run() and the
 * transport's steps share. */
struct xfer {
  kcr_client *c;
  const struct kcr_http_request *req;
  struct kcr_http_response *resp;
  const char *ctype;       /* the Content-Type sent; NULL without a body */
  uint64_t t0;             /* when it began (ns, monotonic) */
  uint64_t timeout_ms;     /* the request's, else the client's (KCR_FOREVER: none) */
  uint64_t deadline;       /* of the whole exchange (NO_DEADLINE: none) */
  struct reply r;          /* the answer */
  const struct sink *sink; /* own transport only: the body goes there */
  /* The transport's, from prepare to finish. */
  struct kcr__conn *conn;    /* NULL until taken */
  bool keep;                 /* finish gives conn back to the pool, else frees it */
  struct curl_slist *hdrs;   /* curl: the header list */
  struct kcr_credentials cr; /* own: the credentials */
  bool pair;                 /* own: they have a client certificate and key */
};

/* A transport: the three steps of one request, which run() takes in turn
 * (see DESIGN: Transports). */
struct transport {
  /* Takes or makes x->conn and builds the request on it. An error ends the
   * request (finish still runs); nothing was sent, nothing is observed. */
  kcr_err (*prepare)(struct xfer *x, struct kcr_errinfo *ei);
  /* Sends the request and reads the answer into x->r by x's deadline,
   * sending it again only as DESIGN: Sent twice allows; sets x->keep.
   * KCR_OK: an answer came (x->resp->code, x->r.retry_after_s), whole or
   * cut short by take_body (x->r.nomem, x->r.too_large: run reports it).
   * Else the error, with ei. */
  kcr_err (*exchange)(struct xfer *x, struct kcr_errinfo *ei);
  /* Gives x->conn back to the pool (x->keep) or frees it, and wipes what
   * held credentials. Called once, whatever came before. */
  void (*finish)(struct xfer *x);
};

/* Keeps a 2xx body up to r->max (beyond: stop, too_large) and the first
 * KCR__ERRBODY_MAX bytes of an error body (the rest is read and dropped). */
static bool take_body(const char *p, size_t n, void *ud)
{
  struct reply *r = ud;
  if(!*r->code && r->h)
    curl_easy_getinfo(r->h, CURLINFO_RESPONSE_CODE, r->code);
  if(*r->code >= 300 || *r->code < 200) {
    size_t room = r->body->len < KCR__ERRBODY_MAX ? KCR__ERRBODY_MAX - r->body->len : 0;
    if(n > room)
      n = room;
  } else if(n > r->max - r->body->len) {
    r->too_large = true;
    return false;
  }
  if(n && kcr_buf_append(r->body, p, n)) {
    r->nomem = true;
    return false;
  }
  return true;
}

static void sleep_ms(uint64_t ms)
{
  struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
  if(!ms)
    return;
  while(nanosleep(&ts, &ts))
    ;
}

static const char *ctype_of(const struct kcr_http_request *req)
{
  return req->body ? (req->content_type ? req->content_type : "application/json") : NULL;
}

/* The code for an answer; ei gets its Status and its Retry-After. */
static kcr_err answer_err(struct kcr_errinfo *ei, const struct kcr_http_response *resp,
                          long retry_after_s)
{
  kcr_err rc = kcr_errinfo_from_http(ei, resp->code, resp->body.ptr, resp->body.len);
  /* At most 15 digits are parsed: the product fits in 64 bits. */
  if(rc && ei && retry_after_s >= 0)
    ei->retry_after_ms = (uint64_t)retry_after_s * 1000;
  return rc;
}

/* ---- the wire seam (tests) ---- */

/* Credentials and the header as for curl (errors, refresh after a 401,
 * wiping), though the wire is not given them; then the write gate. */
static kcr_err wire_prepare(struct xfer *x, struct kcr_errinfo *ei)
{
  const struct kcr_http_request *req = x->req;
  struct kcr_credentials cr = {0};
  struct kcr_buf auth = KCR_BUF_INIT;
  kcr_err rc;

  rc = kcr_config_dup_credentials(x->c->cfg, &cr, ei);
  if(!rc && auth_header(&cr, &auth))
    rc = KCR_ENOMEM;
  auth_wipe(&auth);
  kcr_credentials_cleanup(&cr);
  if(rc)
    return rc;
  if(!req->ungated && mutating(req->method) && !kcr__client_may_write(x->c))
    return gate_refused(req->method, req->path, ei);
  return KCR_OK;
}

static kcr_err wire_exchange(struct xfer *x, struct kcr_errinfo *ei)
{
  const struct kcr_http_request *req = x->req;
  struct kcr__wire_request wr = {.method = req->method,
                                 .path = req->path,
                                 .content_type = x->ctype,
                                 .body = req->body,
                                 .body_len = req->body_len};
  kcr_err rc = x->c->wire(x->c->wire_ud, &wr, &x->resp->code, &x->r.retry_after_s,
                          take_body, &x->r, ei);
  return x->r.nomem || x->r.too_large ? KCR_OK : rc; /* cut short: run says why */
}

static void wire_finish(struct xfer *x) {}

static const struct transport wire_transport = {
    .prepare = wire_prepare,
    .exchange = wire_exchange,
    .finish = wire_finish,
};

/* ---- exchanges of our own (see DESIGN) ---- */

#define NO_DEADLINE UINT64_MAX

/* The deadline (ns, monotonic) of a request of timeout ms from t0 (ns):
 * NO_DEADLINE for KCR_FOREVER or one past the clock's range. */
static uint64_t deadline_of(uint64_t t0, uint64_t ms)
{
  if(ms == KCR_FOREVER || ms > (NO_DEADLINE - t0) / 1000000)
    return NO_DEADLINE;
  return t0 + ms * 1000000;
}

/* Milliseconds until deadline; 0 when it has passed; KCR_FOREVER for none. */
static uint64_t ms_left(uint64_t deadline)
{
  uint64_t now = kcr_time_mono_ns();
  if(deadline == NO_DEADLINE)
    return KCR_FOREVER;
  return now >= deadline ? 0 : (deadline - now + 999999) / 1000000;
}

/* Waits until conn's socket is ready for events, or deadline, or wake_fd
 * (-1: none) is readable: 1 ready (*revents says for what), 0 timed out,
 * -1 failed, -2 woken. */
static int own_wait_ev(const struct kcr__conn *conn, short events, uint64_t deadline,
                       int wake_fd, short *revents)
{
  for(;;) {
    uint64_t ms = ms_left(deadline);
    struct pollfd pf[2] = {{conn->sock, events, 0}, {wake_fd, POLLIN, 0}};
    int n;
    if(!ms)
      return 0;
    n = poll(pf, wake_fd < 0 ? 1 : 2,
             ms == KCR_FOREVER ? -1
             : ms > INT_MAX    ? INT_MAX
                               : (int)ms);
    if(n > 0 && pf[1].revents)
      return -2;
    if(n > 0) {
      *revents = pf[0].revents;
      return 1;
    }
    if(n < 0 && errno != EINTR)
      return -1;
  }
}

/* own_wait_ev, whatever it was ready for. */
static int own_wait(const struct kcr__conn *conn, short events, uint64_t deadline,
                    int wake_fd)
{
  short revents;
  return own_wait_ev(conn, events, deadline, wake_fd, &revents);
}

/* A stream's wait between batches (kcr__own_stream's batch_ms, at most to
 * deadline): 1 after it, -1 failed, -2 woken. */
static int own_batch(int wake_fd, uint64_t batch_ms, uint64_t deadline)
{
  uint64_t left = ms_left(deadline);
  struct pollfd pf = {wake_fd, POLLIN, 0};
  int n;
  if(left < batch_ms)
    batch_ms = left;
  if(!batch_ms)
    return 1;
  do
    n = poll(&pf, wake_fd < 0 ? 0 : 1, batch_ms > INT_MAX ? INT_MAX : (int)batch_ms);
  while(n < 0 && errno == EINTR);
  return n < 0 ? -1 : n > 0 ? -2 : 1;
}

/* Whether a pooled connection has something to read before a request was
 * sent on it: the server closed it, or sent what nobody asked for. */
static bool own_unasked(const struct kcr__conn *conn)
{
  struct pollfd pf = {conn->sock, POLLIN, 0};
  return poll(&pf, 1, 0) != 0;
}

/* curl's progress callback while a stream's connection is being made:
 * stop once its wake fd (ud) is readable. */
static int own_canceled(void *ud, curl_off_t dltotal, curl_off_t dlnow,
                        curl_off_t ultotal, curl_off_t ulnow)
{
  struct pollfd pf = {*(const int *)ud, POLLIN, 0};
  return poll(&pf, 1, 0) > 0;
}

/* Connects conn (TCP and TLS, by curl: every setting of the handle holds)
 * for exchanges of our own; wake_fd (-1: none) readable stops it
 * (KCR_ECANCELED), noticed within about a second. */
static kcr_err own_connect(kcr_client *c, struct kcr__conn *conn,
                           const struct kcr_credentials *cr, uint64_t deadline,
                           const struct kcr_http_request *req, int wake_fd,
                           struct kcr_errinfo *ei)
{
  CURLcode cc;
  uint64_t left = ms_left(deadline);
  long ms = curl_ms(left, true); /* 0: no limit */

  if(!left) /* nothing left to connect in (curl would take 0 as no limit) */
    return kcr_errinfo_set(ei, KCR_ETIMEDOUT, "%s %s: timed out before connecting",
                           req->method, req->path);
  client_cert(conn, cr);
  conn->errbuf[0] = '\0';
  curl_easy_setopt(conn->h, CURLOPT_URL, c->base_url);
  curl_easy_setopt(conn->h, CURLOPT_CONNECT_ONLY, 1L);
  curl_easy_setopt(conn->h, CURLOPT_TIMEOUT_MS, ms);
  if(wake_fd >= 0) {
    curl_easy_setopt(conn->h, CURLOPT_XFERINFOFUNCTION, own_canceled);
    curl_easy_setopt(conn->h, CURLOPT_XFERINFODATA, &wake_fd);
    curl_easy_setopt(conn->h, CURLOPT_NOPROGRESS, 0L);
  }
  cc = curl_easy_perform(conn->h);
  if(wake_fd >= 0) {
    curl_easy_setopt(conn->h, CURLOPT_NOPROGRESS, 1L);
    curl_easy_setopt(conn->h, CURLOPT_XFERINFODATA, NULL);
    if(cc == CURLE_ABORTED_BY_CALLBACK)
      return kcr_errinfo_set(ei, KCR_ECANCELED, "%s %s: canceled while connecting",
                             req->method, req->path);
  }
  if(cc == CURLE_OK)
    cc = curl_easy_getinfo(conn->h, CURLINFO_ACTIVESOCKET, &conn->sock);
  if(cc == CURLE_OK && conn->sock == CURL_SOCKET_BAD)
    cc = CURLE_COULDNT_CONNECT;
  return cc == CURLE_OK ? KCR_OK : kcr__curl_err(cc, conn, req->method, req->path, ei);
}

/* x's request, head and body, as one message, into m. Paths are sent as
 * they are: a byte a request line cannot hold makes it curl's
 * (plain_path). */
static kcr_err own_request(const struct xfer *x, struct kcr_buf *m)
{
  const kcr_client *c = x->c;
  const struct kcr_http_request *req = x->req;
  const struct kcr_credentials *cr = &x->cr;
  const char *ct = x->ctype;

  /* at once (no copy left behind of the secret below) */
  kcr_buf_reserve(m, 512 + strlen(c->user_agent) + (cr->token ? strlen(cr->token) : 0) +
                         (req->body ? req->body_len : 0));
  /* appends, not printf: a formatted write is dearer by far */
  kcr_buf_puts(m, req->method);
  kcr_buf_puts(m, " ");
  kcr_buf_puts(m, c->own_prefix);
  kcr_buf_puts(m, req->path);
  kcr_buf_puts(m, " HTTP/1.1\r\n");
  kcr_buf_puts(m, c->own_host);
  kcr_buf_puts(m, "User-Agent: ");
  kcr_buf_puts(m, c->user_agent);
  kcr_buf_puts(m, "\r\nAccept: application/json\r\n");
  if(ct) {
    char len[24], *d = len + sizeof(len);
    size_t v = req->body_len;
    do
      *--d = (char)('0' + v % 10);
    while(v /= 10);
    kcr_buf_puts(m, "Content-Type: ");
    kcr_buf_puts(m, ct);
    kcr_buf_puts(m, "\r\nContent-Length: ");
    kcr_buf_append(m, d, (size_t)(len + sizeof(len) - d));
    kcr_buf_puts(m, "\r\n");
  }
  if(kcr_buf_err(m))
    return KCR_ENOMEM;
  if(cr->token) {
    kcr__secret_append(m, "Authorization: Bearer ", 22);
    kcr__secret_append(m, cr->token, strlen(cr->token));
    kcr__secret_append(m, "\r\n", 2);
  }
  kcr__secret_append(m, "\r\n", 2);
  if(req->body)
    kcr__secret_append(m, req->body, req->body_len);
  return kcr_buf_err(m);
}

/* Whether a path can go on a request line as it is (visible ASCII). */
static bool plain_path(const char *p)
{
  for(; *p; p++)
    if((unsigned char)*p <= ' ' || (unsigned char)*p >= 0x7f)
      return false;
  return true;
}

/* The answer's body, to take_body with the status known (or to a sink). */
struct own_reply {
  struct reply *r;
  const struct kcr__h1 *h1;
  const struct sink *sink; /* NULL: to r */
};

static bool own_body(const char *p, size_t n, void *ud)
{
  struct own_reply *o = ud;
  struct reply *r = o->r;
  *r->code = o->h1->code;
  if(o->sink) {
    *o->sink->code = o->h1->code;
    return o->sink->fn(p, n, o->sink->ud);
  }
  /* a 2xx body of a told length: room for all of it at once, up to
   * KCR__BODY_RESERVE_MAX (fails, if at all, in take_body) */
  if(!r->body->len && o->h1->has_len && !o->h1->chunked && o->h1->len > n &&
     o->h1->len <= KCR__BODY_RESERVE_MAX && o->h1->len <= r->max && *r->code >= 200 &&
     *r->code < 300)
    kcr_buf_reserve(r->body, (size_t)o->h1->len);
  return take_body(p, n, r);
}

/* How an attempt on a connection ended. */
enum own_end {
  OWN_ANSWERED, /* the answer is whole (or the body callback stopped it) */
  OWN_UNSENT,   /* the connection failed before a byte of the request left */
  OWN_SILENT,   /* the request, or part of it, left, and the connection
                 * ended without a byte of answer */
  OWN_FAILED,   /* rc and ei say why */
};

/* One attempt: sends x's request on x->conn and reads the answer into
 * x->r (or x->sink); sets x->keep. OWN_UNSENT and OWN_SILENT: *cause is
 * curl's error (CURLE_OK: the connection ended). */
static enum own_end own_attempt(struct xfer *x, CURLcode *cause, kcr_err *rc,
                                struct kcr_errinfo *ei)
{
  struct kcr__conn *conn = x->conn;
  const struct kcr_http_request *req = x->req;
  const struct sink *sink = x->sink;
  uint64_t deadline = x->deadline;
  struct kcr__h1 *h1 = conn->h1;
  struct own_reply o = {&x->r, h1, sink};
  int wake = sink ? sink->wake_fd : -1;
  const char *why = NULL, *p = conn->msg.ptr;
  size_t n = conn->msg.len, got = 0, used = 0;
  bool any = false, fed = false;
  bool out = false;        /* a byte of the request may have left */
  bool early = false;      /* buf[0..got) was read while sending (cc: how) */
  char buf[KCR__RECV_BUF]; /* every read: at least a TLS record (see DESIGN: TLS) */
  CURLcode cc = CURLE_OK, send_cc = CURLE_OK;
  enum kcr__h1_result hr = KCR__H1_MORE;
  short ev = 0;
  int w;

  x->keep = false;
  kcr__h1_init(h1);
  conn->errbuf[0] = '\0';
  if(!ms_left(deadline)) { /* not a byte out after the deadline */
    w = 0;
    goto wait_failed;
  }
  /* A server may answer before it has read the whole request - 413 for a
   * body over its limit - and then stop reading, or close: that answer is
   * read (as curl does), not lost in a send that waits or fails. */
  while(n) {
    size_t sent = 0;
    cc = curl_easy_send(conn->h, p, out || n <= KCR__FIRST_SEND ? n : KCR__FIRST_SEND,
                        &sent);
    if(cc == CURLE_AGAIN) {
      out = true; /* TLS may have sent part of it */
      if((w = own_wait_ev(conn, POLLOUT | POLLIN, deadline, wake, &ev)) <= 0)
        goto wait_failed;
      if(ev & POLLOUT)
        continue;
      /* Readable (or closed) and not writable. On a new TLS 1.3 connection
       * that may be the server's session tickets, sent after the handshake:
       * not data, and the read takes them in (CURLE_AGAIN: nothing else
       * came) - the sending goes on. Anything else ends it: an early
       * answer (read below from these bytes on), the end or an error. */
      cc = curl_easy_recv(conn->h, buf, sizeof(buf), &got);
      if(cc == CURLE_AGAIN)
        continue;
      early = true;
      break;
    }
    if(cc) {
      if(!out) {
        *cause = cc;
        return OWN_UNSENT; /* nothing went out, nothing came back */
      }
      send_cc = cc; /* part went out: the answer may be there */
      break;
    }
    out = true;
    p += sent;
    n -= sent;
  }
  /* The answer cannot be there yet: wait before the first read (a read
   * now would only find nothing, one system call for it). */
  if(!early && (w = own_wait(conn, POLLIN, deadline, wake)) <= 0)
    goto wait_failed;
  while(hr == KCR__H1_MORE) {
    if(!early)
      cc = curl_easy_recv(conn->h, buf, sizeof(buf), &got);
    early = false;
    if(cc == CURLE_AGAIN) {
      if(fed && sink->batch_ms) { /* a stream's batch: see kcr__own_stream */
        fed = false;
        if((w = own_batch(wake, sink->batch_ms, deadline)) < 0)
          goto wait_failed;
        continue;
      }
      fed = false;
      if((w = own_wait(conn, POLLIN, deadline, wake)) <= 0)
        goto wait_failed;
      continue;
    }
    if(cc || !got) {
      if(!any) {
        *cause = send_cc ? send_cc : cc;
        return out ? OWN_SILENT : OWN_UNSENT;
      }
      if(cc) {
        why = curl_easy_strerror(cc);
        break;
      }
      hr = kcr__h1_eof(h1);
      continue;
    }
    any = true;
    fed = sink != NULL;
    hr = kcr__h1_feed(h1, buf, got, &used, own_body, &o);
  }
  if(hr == KCR__H1_DONE || hr == KCR__H1_STOPPED) {
    /* not kept when the request is not all out (the server reads the rest
     * as the next request), nor with bytes after the answer in its last
     * record (see DESIGN: TLS) */
    x->keep = hr == KCR__H1_DONE && !h1->close && used == got && !n;
    return OWN_ANSWERED;
  }
  *rc = kcr_errinfo_set(ei, KCR_ETRANSPORT, "%s %s: %s", req->method, req->path,
                        why ? why : h1->why);
  return OWN_FAILED;
wait_failed:
  if(w == 0)
    *rc = kcr_errinfo_set(ei, KCR_ETIMEDOUT, "%s %s: %s within the timeout", req->method,
                          req->path, any ? "the answer did not end" : "no answer");
  else if(w == -2)
    *rc = kcr_errinfo_set(ei, KCR_ECANCELED, "%s %s: canceled", req->method, req->path);
  else
    *rc = kcr_errinfo_set(ei, KCR_ETRANSPORT, "%s %s: poll: %s", req->method, req->path,
                          strerror(errno));
  return OWN_FAILED;
}

/* Replaces *conn by a new handle, the request in its buffer moving along;
 * the old one is freed. */
static kcr_err renew(kcr_client *c, struct kcr__conn **conn)
{
  struct kcr__conn *fresh = conn_new(c, true);
  struct kcr_buf t;

  if(!fresh)
    return KCR_ENOMEM;
  t = fresh->msg;
  fresh->msg = (*conn)->msg;
  (*conn)->msg = t;
  kcr__conn_put(c, *conn, true);
  *conn = fresh;
  return KCR_OK;
}

/* Makes x->conn fit for the request: a connected one made with another
 * client certificate, or with something to read before it was asked (the
 * server closed it, or sent what would be taken for the answer), is
 * replaced by a new one; for a new one, the client certificate and key
 * are read (a request on one made with them needs the token alone). */
static kcr_err own_ready(struct xfer *x, struct kcr_errinfo *ei)
{
  struct kcr__conn *conn = x->conn;
  kcr_err rc;

  if(conn->sock != CURL_SOCKET_BAD &&
     ((x->pair && conn->cred_gen != x->cr.generation) || own_unasked(conn)) &&
     (rc = renew(x->c, &x->conn)))
    return rc;
  if(x->conn->sock == CURL_SOCKET_BAD && x->pair && !x->cr.cert) {
    kcr_credentials_cleanup(&x->cr);
    if((rc = kcr__config_credentials(x->c->cfg, &x->cr, true, &x->pair, ei))) {
      x->keep = true; /* not connected: nothing was sent */
      return rc;
    }
  }
  return KCR_OK;
}

/* The token (the client certificate and key only for a connection still
 * to be made: own_ready), a connection, the request as one message. */
static kcr_err own_prepare(struct xfer *x, struct kcr_errinfo *ei)
{
  kcr_err rc = kcr__config_credentials(x->c->cfg, &x->cr, false, &x->pair, ei);

  if(rc)
    return rc;
  if(!(x->conn = conn_get(x->c, true)) || own_request(x, &x->conn->msg))
    return KCR_ENOMEM;
  return own_ready(x, ei);
}

/* Connects when the connection is new, asks the write gate, and makes
 * the attempt; once more on a new connection when the pool's gave no
 * answer and that cannot make the request happen twice (DESIGN: Sent
 * twice). */
static kcr_err own_exchange(struct xfer *x, struct kcr_errinfo *ei)
{
  const struct kcr_http_request *req = x->req;
  CURLcode cause = CURLE_OK;
  enum own_end end;
  kcr_err rc = KCR_OK;
  bool fresh;

  for(;;) {
    fresh = x->conn->sock == CURL_SOCKET_BAD;
    x->keep = false;
    if(fresh && (rc = own_connect(x->c, x->conn, &x->cr, x->deadline, req,
                                  x->sink ? x->sink->wake_fd : -1, ei)))
      return rc;
    if(!req->ungated && mutating(req->method) && !kcr__client_may_write(x->c)) {
      x->keep = true;
      return gate_refused(req->method, req->path, ei);
    }
    end = own_attempt(x, &cause, &rc, ei);
    if(end == OWN_ANSWERED) {
      x->resp->code = x->conn->h1->code;
      x->r.retry_after_s = x->conn->h1->retry_after_s;
      return KCR_OK;
    }
    if(end == OWN_FAILED)
      return rc;
    /* The server had closed it, or closed it as the request went out: once
     * more, on a new connection (the pool's may be as old) - a write only
     * if no byte of it left. A new connection is not tried again. */
    if(fresh || (end == OWN_SILENT && mutating(req->method)))
      return no_answer(req->method, req->path, end == OWN_SILENT,
                       !cause               ? NULL
                       : x->conn->errbuf[0] ? x->conn->errbuf
                                            : curl_easy_strerror(cause),
                       ei);
    if((rc = renew(x->c, &x->conn)) || (rc = own_ready(x, ei)))
      return rc;
  }
}

/* Wipes the request (it held the token) and the credentials; the
 * connection goes back to the pool when x->keep. */
static void own_finish(struct xfer *x)
{
  struct kcr__conn *conn = x->conn;

  kcr_credentials_cleanup(&x->cr);
  if(conn && conn->msg.cap > KCR__MSG_KEEP) {
    kcr__wipe_free(conn->msg.ptr, conn->msg.cap);
    conn->msg = (struct kcr_buf)KCR_BUF_INIT;
  } else if(conn) {
    kcr__wipe(conn->msg.ptr, conn->msg.len);
    kcr_buf_reset(&conn->msg);
  }
  kcr__conn_put(x->c, conn, !x->keep);
}

static const struct transport own_transport = {
    .prepare = own_prepare,
    .exchange = own_exchange,
    .finish = own_finish,
};

/* ---- curl's transfers ---- */

static size_t on_body(char *p, size_t sz, size_t n, void *ud)
{
  return take_body(p, sz * n, ud) ? sz * n : 0;
}

static size_t on_header(char *p, size_t sz, size_t n, void *ud)
{
  struct reply *r = ud;
  size_t len = sz * n;
  static const char name[] = "retry-after:";

  if(len > sizeof(name) - 1 && !strncasecmp(p, name, sizeof(name) - 1)) {
    char num[16] = {0};
    size_t i = sizeof(name) - 1, j = 0;
    while(i < len && (p[i] == ' ' || p[i] == '\t'))
      i++;
    while(i < len && j < sizeof(num) - 1 && p[i] >= '0' && p[i] <= '9')
      num[j++] = p[i++];
    r->retry_after_s = j ? strtol(num, NULL, 10) : -1;
  }
  return len;
}

/* A handle of the pool, set up for x's request (kcr__conn_prepare: the
 * write gate and the no-second-sending rule in its pre-request callback),
 * the answer to x->r. */
static kcr_err curl_prepare(struct xfer *x, struct kcr_errinfo *ei)
{
  const struct kcr_http_request *req = x->req;
  CURL *h;
  kcr_err rc;

  if(!(x->conn = kcr__conn_get(x->c)))
    return KCR_ENOMEM;
  x->keep = true; /* until a transfer on it fails */
  h = x->r.h = x->conn->h;
  x->conn->errbuf[0] = '\0';
  /* Clear any old body first: setting POSTFIELDS switches curl to POST, and
   * kcr__conn_prepare() then sets the method (HTTPGET / CUSTOMREQUEST). */
  curl_easy_setopt(h, CURLOPT_POSTFIELDS, NULL);
  curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)-1);
  rc = kcr__conn_prepare(x->c, x->conn, req->method, req->path, x->ctype, req->ungated,
                         &x->hdrs, ei);
  if(rc)
    return rc;
  curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, curl_ms(x->timeout_ms, true));
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, &x->r);
  curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(h, CURLOPT_HEADERDATA, &x->r);
  if(req->body) {
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, req->body);
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)req->body_len);
  }
  return KCR_OK;
}

/* The transfer. A write that got no answer after bytes of it left (since
 * write_prereq let it go) is KCR_EUNCERTAIN, as on our own connections. */
static kcr_err curl_exchange(struct xfer *x, struct kcr_errinfo *ei)
{
  struct kcr__conn *conn = x->conn;
  const char *method = x->req->method, *path = x->req->path;
  CURLcode cc = curl_easy_perform(conn->h);
  long sent = 0;
  kcr_err rc;

  curl_easy_getinfo(conn->h, CURLINFO_RESPONSE_CODE, &x->resp->code);
  if(cc == CURLE_OK)
    return KCR_OK;
  x->keep = false;
  if(x->r.nomem || x->r.too_large)
    return KCR_OK; /* take_body stopped it: run says why */
  rc = kcr__curl_err(cc, conn, method, path, ei);
  curl_easy_getinfo(conn->h, CURLINFO_REQUEST_SIZE, &sent);
  if(rc == KCR_ETRANSPORT && !x->resp->code && mutating(method) && conn->pre_sent >= 0 &&
     sent > conn->pre_sent)
    rc = no_answer(method, path, true,
                   conn->errbuf[0] ? conn->errbuf : curl_easy_strerror(cc), ei);
  return rc;
}

/* Drops the handle's references to the request's memory before it is
 * pooled; frees (and wipes) the header list. */
static void curl_finish(struct xfer *x)
{
  struct kcr__conn *conn = x->conn;

  if(!conn)
    return;
  curl_easy_setopt(conn->h, CURLOPT_HTTPHEADER, NULL);
  curl_easy_setopt(conn->h, CURLOPT_POSTFIELDS, NULL);
  curl_easy_setopt(conn->h, CURLOPT_HTTPGET, 1L);
  kcr__headers_free(x->hdrs);
  kcr__conn_put(x->c, conn, !x->keep);
}

static const struct transport curl_transport = {
    .prepare = curl_prepare,
    .exchange = curl_exchange,
    .finish = curl_finish,
};

/* ---- one request through a transport ---- */

/* x for req of c, its answer into resp. */
static void xfer_init(struct xfer *x, kcr_client *c, const struct kcr_http_request *req,
                      struct kcr_http_response *resp)
{
  uint64_t ms = req->timeout_ms ? req->timeout_ms : c->opts.timeout_ms;

  *x = (struct xfer){
      .c = c,
      .req = req,
      .resp = resp,
      .ctype = ctype_of(req),
      .t0 = kcr_time_mono_ns(),
      .timeout_ms = ms,
      .r = {.body = &resp->body,
            .retry_after_s = -1,
            .code = &resp->code,
            .max = c->opts.max_response_bytes},
  };
  x->deadline = deadline_of(x->t0, ms);
}

/* x through t, no retries but the ones t makes (DESIGN: Sent twice): its
 * steps, and what every transport does alike - the answer reset first,
 * the request observed once it was tried, an answer cut short by
 * take_body reported, any other answer read as an error or not (by its
 * status, with its Retry-After). With a sink (a stream) the answer is
 * neither observed nor read: the caller does both. */
static kcr_err run(const struct transport *t, struct xfer *x, struct kcr_errinfo *ei)
{
  struct kcr_http_response *resp = x->resp;
  const struct kcr_http_request *req = x->req;
  kcr_err rc;
  bool cut;

  kcr_buf_reset(&resp->body);
  resp->code = 0;
  rc = t->prepare(x, ei);
  if(!rc) {
    rc = t->exchange(x, ei);
    cut = x->r.nomem || x->r.too_large;
    if(!x->sink)
      kcr__client_observe(x->c, req->method, rc || cut ? 0 : resp->code,
                          (double)(kcr_time_mono_ns() - x->t0) / 1e9);
    if(cut) {
      x->keep = false; /* the answer was cut short */
      kcr_buf_reset(&resp->body);
      rc = x->r.nomem ? KCR_ENOMEM : kcr__too_large(x->c, req->method, req->path, ei);
    } else if(!rc && !x->sink) {
      rc = answer_err(ei, resp, x->r.retry_after_s);
    }
  }
  t->finish(x);
  return rc;
}

/* The transport for req (see DESIGN: Transports). */
static const struct transport *transport_for(const kcr_client *c,
                                             const struct kcr_http_request *req)
{
  if(c->wire)
    return &wire_transport;
  if(mutating(req->method) && kcr__own_streams(c, req->path))
    return &own_transport;
  return &curl_transport;
}

/* One HTTP exchange, no retries (but a transport's: see run). */
static kcr_err do_once(kcr_client *c, const struct kcr_http_request *req,
                       struct kcr_http_response *resp, long *retry_after_s,
                       struct kcr_errinfo *ei)
{
  struct xfer x;
  kcr_err rc;

  xfer_init(&x, c, req, resp);
  rc = run(transport_for(c, req), &x, ei);
  *retry_after_s = x.r.retry_after_s;
  return rc;
}

bool kcr__own_streams(const kcr_client *c, const char *path)
{
  return !c->wire && c->own_ok && plain_path(path);
}

kcr_err kcr__own_stream(kcr_client *c, const char *path, uint64_t timeout_ms, int wake_fd,
                        uint64_t batch_ms, kcr__h1_body_fn fn, void *ud, long *code,
                        struct kcr_errinfo *ei)
{
  struct kcr_http_request req = {.method = "GET", .path = path, .timeout_ms = timeout_ms};
  struct kcr_http_response resp = {.body = KCR_BUF_INIT};
  struct sink sink = {fn, ud, code, wake_fd, batch_ms};
  struct xfer x;
  kcr_err rc;

  *code = 0;
  if(!kcr__own_streams(c, path))
    return kcr_errinfo_set(ei, KCR_EINVAL, "GET %s: not for a connection of our own",
                           path);
  xfer_init(&x, c, &req, &resp);
  x.sink = &sink;
  rc = run(&own_transport, &x, ei);
  if(resp.code) /* also an answer without a body */
    *code = resp.code;
  kcr_buf_cleanup(&resp.body);
  return rc;
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

  if(!req || !req->method || !req->path || req->path[0] != '/')
    return kcr_errinfo_set(ei, KCR_EINVAL,
                           "kcr_client_do: a request needs a method and a path "
                           "starting with '/'");
  max_retries = req->max_retries < 0    ? 0
                : req->max_retries == 0 ? c->opts.max_retries
                                        : req->max_retries;
  for(int attempt = 0;; attempt++) {
    long retry_after = -1;
    uint64_t wait_ms, cap = c->opts.max_retry_after_ms;
    kcr_errinfo_cleanup(&att);
    rc = do_once(c, req, resp, &retry_after, ei ? &att : NULL);
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
