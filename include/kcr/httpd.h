/* kcr/httpd.h - the health and metrics HTTP endpoint of a controller process.
 *
 *   struct kcr_httpd_opts o = {.addr = ":8080", .metrics = reg};
 *   kcr_httpd *h;
 *   if(kcr_httpd_new(&o, &h, &ei) || kcr_httpd_listen(h, &ei)) ... ei.message
 *   kcr_httpd_add_readyz(h, "informers", informers_synced, mgr);
 *   ...                                 (start the rest of the process)
 *   if(kcr_httpd_start(h, &ei)) ... ei.message
 *   ...
 *   kcr_httpd_free(h);                  (stops and joins the server)
 *
 * kcr_httpd_listen() binds the address at once, so a bad or busy address is
 * reported before anything else starts; kcr_httpd_start() then serves on
 * that socket (called alone, it binds first).
 *
 * Endpoints (GET or HEAD; other methods get 405 with Allow: GET, HEAD):
 *   /metrics        the registry's text exposition (404 when opts.metrics is
 *                   NULL), Content-Type KCR_METRICS_CONTENT_TYPE; with
 *                   opts.auth_client, to authorised bearer tokens only.
 *   /healthz        200 "ok" when every healthz check passes; otherwise 500
 *   /readyz         and one line per check, as controller-runtime writes it:
 *                     [+]ping ok
 *                     [-]informers failed: not synced
 *                     readyz check failed
 *                   With ?verbose a passing answer lists the checks too and
 *                   ends "healthz check passed"; a passing check with a
 *                   note shows it: "[+]informers ok: NOTE". No checks: an implicit
 *                   "ping" that always passes.
 *   /healthz/NAME   one check alone: 200 "ok", or 500 "internal server
 *   /readyz/NAME    error: REASON"; 404 for an unknown name.
 *   a handler's path  kcr_httpd_add_handler: POST only (others get 405
 *                   with Allow: POST), the body read whole first, at most
 *                   the handler's max_body (else 413, refused from its
 *                   Content-Length before reading when it has one); what
 *                   the webhooks of kcr/webhook.h are served on.
 *   anything else   404 (with opts.auth_client: everything but /metrics).
 *
 * Hostile clients: a connection costs a file descriptor, not a thread, and a
 * client that holds connections open without finishing its request cannot
 * lock a prompt client (the kubelet's probe) out: when a client address
 * holds more than 32 connections, or all addresses together more than 256,
 * the connection of that address (resp. any) that has waited longest for
 * its request is closed to make room. An idle connection is closed after
 * 10 s, one that has not delivered a complete request within 10 s is closed
 * when the next connection arrives. See the DESIGN comment in httpd.c.
 *
 * A request body that has not arrived 10 s after its head closes the
 * connection (a trickle restarts the idle timeout, not this deadline), and
 * the bodies being read hold at most opts.body_budget bytes together: a
 * body that would pass it is refused with 503 once read, so many slow
 * clients cannot make the server hold max_body each.
 * Stopping drains: no new connection is accepted, and answers being made
 * or sent are given up to opts.drain_ms to finish before the connections
 * are closed.
 *
 * Threads: the server runs on libmicrohttpd's internal pool of 4 threads,
 * each polling many connections with poll(). Checks and collect callbacks
 * run on those threads, concurrently with each other and with themselves;
 * so do handlers. They must be thread-safe and quick: one that blocks holds up the
 * connections of its pool thread (new connections go to the others).
 * Client misbehaviour (aborted requests, ...) is logged as a warning at most
 * once a minute, with a count of the rest.

 *
 * Thread safety: every function may be called from any thread, except that
 * kcr_httpd_stop()/kcr_httpd_free() must not be called from inside a check
 * (stop then logs an error and does nothing; free would be a use-after-free).
 * Ownership: opts strings are copied (the TLS files are read); opts.metrics
 * and opts.auth_client are referenced (kcr_metrics_ref, kcr_client_ref)
 * until kcr_httpd_free; check user data is borrowed and must outlive the
 * server's running time. */
#ifndef KCR_HTTPD_H
#define KCR_HTTPD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "api.h"
#include "buf.h"
#include "client.h"
#include "err.h"
#include "metrics.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kcr_httpd kcr_httpd;

/* A health or readiness check. Returns true when healthy; when not, may
 * write a one-line reason (NUL-terminated, at most n bytes including the NUL;
 * the buffer starts out empty) that the answer shows after "failed: ". A
 * passing check may write a note there too, shown after "ok: " in the
 * lines of a failing or ?verbose answer ("[+]informers ok: ...").
 * Called on a server thread, possibly concurrently with itself. */
typedef bool (*kcr_check_fn)(void *ud, char *reason, size_t n);

/* HTTPS for kcr_httpd_opts. Zeroed: plain HTTP. */
struct kcr_httpd_tls {
  bool enabled; /* serve HTTPS (TLS 1.2 and 1.3) */
  /* PEM files, read (and checked: parsed, key matching the certificate) by
   * kcr_httpd_new; both or neither. Neither: a self-signed certificate for
   * "localhost" (ECDSA P-256, one year) is made by kcr_httpd_new, as
   * controller-runtime's metrics server makes one. The files are looked at
   * again (stat) at the first TLS handshake reload_ms after the last look,
   * and when either changed (a new inode, as a Secret volume's update
   * makes, or new contents) the pair is loaded and served from the next
   * handshake on, without a restart, as controller-runtime's certwatcher
   * does; a pair that does not load is logged (rate-limited) and the
   * served one kept. */
  const char *cert_file;
  const char *key_file;
  uint64_t reload_ms; /* 0: 10000 */
};

/* Options for kcr_httpd_new(); zero means the default shown. */
struct kcr_httpd_opts {
  /* "host:port", "[v6addr]:port", or ":port" for all interfaces (IPv6 and
   * IPv4 when the host has IPv6). Port 0 picks a free port: see
   * kcr_httpd_port(). NULL means ":8080". */
  const char *addr;
  /* Rendered on /metrics; referenced. NULL: no /metrics endpoint. */
  kcr_metrics *metrics;
  struct kcr_httpd_tls tls;
  /* Non-NULL: /metrics answers only requests whose bearer token (header
   * "Authorization: Bearer TOKEN") a TokenReview authenticates and whose
   * user a SubjectAccessReview allows the request's verb (`get`, or
   * `head` for HEAD) on the non-resource URL /metrics, both sent through
   * this client (the server takes a reference of its own; give it one
   * without a write gate: the reviews are POSTs). Otherwise 401
   * "Unauthorized" (no token, a malformed one, longer than 8 KiB, or not
   * authenticated), 403 "Authorization denied for user U", 500 when a
   * review fails. Answers are cached per token, verb and path (a keyed
   * hash, never the token) for a minute, a denial for 30 s, at most 1024
   * allowed answers and apart from them 1024 denials (so unknown tokens
   * never evict an allowed caller), as controller-runtime's
   * filters.WithAuthenticationAndAuthorization.
   * Such a server serves /metrics alone (everything else is 404): probes
   * belong on a plain server of their own. Use it with tls.enabled: a bearer
   * token must not cross the network in clear. NULL: /metrics is open. */
  kcr_client *auth_client;
  /* How long kcr_httpd_stop() waits for requests in flight; 0: 10000. */
  uint64_t drain_ms;
  /* Bytes of request bodies the server holds at once, over every
   * connection; a body that would pass it is refused with 503 once read
   * (retry later). 0: 64 MiB. Memory is about twice this at most (a
   * buffer grows by doubling). */
  size_t body_budget;
};

/* The largest request body a handler takes unless it says otherwise:
 * 7 MiB, as controller-runtime's webhook server (an AdmissionReview holds
 * the object and the old one, each up to the apiserver's 3 MiB). */
#define KCR_HTTP_BODY_MAX ((size_t)7 << 20)

/* A request to a handler (kcr_httpd_add_handler), valid during the call. */
struct kcr_httpd_request {
  const char *method;       /* "POST" */
  const char *path;         /* the path the handler was added for */
  const char *content_type; /* the Content-Type header; NULL without one */
  const char *body;         /* len bytes, NUL-terminated after them */
  size_t len;
  const void *conn_; /* private: kcr_httpd_request_arg reads the query here */
};

/* Answers a request: appends the answer's body to out (nothing: an empty
 * body), may set *ctype to its Content-Type (a string that outlives the
 * call; default "application/json"), and returns the HTTP status code.
 * A code outside 200..599, or out holding an error (kcr/buf.h), sends 500
 * "handler failed" instead. Called on a server thread, concurrently with
 * itself. */
typedef int (*kcr_httpd_handler_fn)(void *ud, const struct kcr_httpd_request *rq,
                                    struct kcr_buf *out, const char **ctype);

/* Serves POST requests on path with fn (see the endpoint list above).
 * path starts with '/', holds no white space, control byte, '?' or '#',
 * and is not /metrics, nor under /healthz or /readyz; it is copied.
 * max_body: the largest body taken, 0 for KCR_HTTP_BODY_MAX. ud is
 * borrowed for the server's life. Before or after start.
 * Errors: KCR_EINVAL (h or fn NULL, a bad path, a server with
 * opts.auth_client: it serves /metrics alone), KCR_EEXIST (path taken),
 * KCR_ENOMEM. Thread safety: any thread. */
KCR_API kcr_err kcr_httpd_add_handler(kcr_httpd *h, const char *path, size_t max_body,
                                      kcr_httpd_handler_fn fn, void *ud);

/* The query argument key of the request ("timeout" in "?timeout=10s"),
 * decoded, or NULL when absent. Valid during the handler's call. */
KCR_API const char *kcr_httpd_request_arg(const struct kcr_httpd_request *rq,
                                          const char *key);

/* Creates a stopped server after checking the address's syntax and
 * loading (or making) its TLS certificate; nothing is bound yet. opts may
 * be NULL (every default). Release with kcr_httpd_free(). Errors:
 * KCR_EINVAL (no out; a TLS file without tls.enabled, or one of the two
 * files alone), KCR_ECONFIG (bad address; no TLS in libmicrohttpd; a TLS file not PEM, or
 * a key that is not the certificate's; ei->message names it and says what is wrong),
 * KCR_EIO (a TLS file cannot be read), KCR_ENOMEM (also: OpenSSL could not make the
 * self-signed certificate). *out is NULL on error. Thread safety: any thread. */
KCR_API kcr_err kcr_httpd_new(const struct kcr_httpd_opts *opts, kcr_httpd **out,
                              struct kcr_errinfo *ei);

/* Registers a check on /healthz or /readyz, before or after start. name is
 * copied; it must be non-empty and made of [A-Za-z0-9._-] (it is also a path
 * segment). Errors: KCR_EINVAL (bad name or no fn), KCR_EEXIST (name taken
 * on that endpoint), KCR_ENOMEM. Checks are shown in registration order.
 * Thread safety: any thread, also while requests are served. */
KCR_API kcr_err kcr_httpd_add_healthz(kcr_httpd *h, const char *name, kcr_check_fn fn,
                                      void *ud);
KCR_API kcr_err kcr_httpd_add_readyz(kcr_httpd *h, const char *name, kcr_check_fn fn,
                                     void *ud);

/* Resolves and binds the address and listens on it now, without serving:
 * connections wait in the kernel's backlog until kcr_httpd_start(). Use it
 * to validate the address before starting anything else. kcr_httpd_port()
 * is valid from here on. The socket belongs to h: kcr_httpd_start() serves
 * on it, kcr_httpd_stop()/kcr_httpd_free() close it.
 * Errors (ei->message names the address and the reason): KCR_EINVAL (h
 * NULL, or already listening or serving), KCR_ECONFIG (the host does not
 * resolve), KCR_EIO (cannot bind or listen: address in use, permission
 * denied, address not available, ... with the OS's words). On error h is
 * left as it was (stopped, nothing bound).
 * Thread safety: any thread (serialised with start and stop). */
KCR_API kcr_err kcr_httpd_listen(kcr_httpd *h, struct kcr_errinfo *ei);

/* Starts serving on the socket kcr_httpd_listen() bound, or binds first (as
 * kcr_httpd_listen) when it was not called. Errors: KCR_EINVAL (h NULL, or
 * already serving), the errors of kcr_httpd_listen() when it binds, KCR_EIO
 * (the server's threads could not start). On any error but KCR_EINVAL the
 * server is stopped with its socket closed (also one kcr_httpd_listen()
 * bound). A stopped server may be started again (it binds anew; with port
 * 0, maybe on another port). Thread safety: any thread (serialised with
 * listen and stop). */
KCR_API kcr_err kcr_httpd_start(kcr_httpd *h, struct kcr_errinfo *ei);

/* Serves cert (a PEM certificate chain, the leaf first) with key (its PEM
 * private key) from the next TLS handshake on, in place of the current
 * ones: connections and requests in flight go on. Both are checked first
 * (parse, key matching). What a server with cert files then serves: this,
 * until the files change. Errors: KCR_EINVAL (a NULL argument, or a
 * server without TLS), KCR_ECONFIG (not PEM, a key that is not the
 * certificate's, a chain longer than 16), KCR_ENOMEM; the served
 * certificate is then unchanged. Thread safety: any thread, while serving
 * too. */
KCR_API kcr_err kcr_httpd_set_cert(kcr_httpd *h, const char *cert, const char *key,
                                   struct kcr_errinfo *ei);

/* The TCP port number (1..65535) bound by kcr_httpd_listen() or
 * kcr_httpd_start() - the one the kernel chose for port 0 - or 0 when
 * nothing is bound (stopped, or h NULL). Thread safety: any thread. */
KCR_API int kcr_httpd_port(const kcr_httpd *h);

/* Stops serving: closes the listening socket (also one bound by
 * kcr_httpd_listen() and never served) and open connections and joins the
 * server's threads; requests in flight finish first; then logs the count
 * of warnings held back, if any. Idempotent; NULL is a no-op.
 * Thread safety: any thread but a server thread (see above). */
KCR_API void kcr_httpd_stop(kcr_httpd *h);

/* Stops (as kcr_httpd_stop, in whatever state h is) and frees. NULL is a
 * no-op. No other call on h may be running or follow. */
KCR_API void kcr_httpd_free(kcr_httpd *h);

#ifdef __cplusplus
}
#endif

#endif
