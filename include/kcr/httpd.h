/* kcr/httpd.h - the health and metrics HTTP endpoint of a controller process.
 *
 *   struct kcr_httpd_opts o = {.addr = ":8080", .metrics = reg};
 *   kcr_httpd *h;
 *   if(kcr_httpd_new(&o, &h, &ei) || kcr_httpd_start(h, &ei)) ... ei.message
 *   kcr_httpd_add_readyz(h, "informers", informers_synced, mgr);
 *   ...
 *   kcr_httpd_free(h);                  (stops and joins the server)
 *
 * Endpoints (GET or HEAD; other methods get 405 with Allow: GET, HEAD):
 *   /metrics        the registry's text exposition (404 when opts.metrics is
 *                   NULL), Content-Type KCR_METRICS_CONTENT_TYPE.
 *   /healthz        200 "ok" when every healthz check passes; otherwise 500
 *   /readyz         and one line per check, as controller-runtime writes it:
 *                     [+]ping ok
 *                     [-]informers failed: not synced
 *                     readyz check failed
 *                   With ?verbose a passing answer lists the checks too and
 *                   ends "healthz check passed". No checks: an implicit
 *                   "ping" that always passes.
 *   /healthz/NAME   one check alone: 200 "ok", or 500 "internal server
 *   /readyz/NAME    error: REASON"; 404 for an unknown name.
 *   anything else   404.
 *
 * Threads: the server runs on libmicrohttpd's internal threads (one listening
 * thread, one thread per connection), so a slow check never blocks a scrape.
 * Checks and collect callbacks run on those threads, concurrently with each
 * other and with themselves; they must be thread-safe and quick.
 *
 * Thread safety: every function may be called from any thread, except that
 * kcr_httpd_stop()/kcr_httpd_free() must not be called from inside a check
 * (stop then logs an error and does nothing; free would be a use-after-free).
 * Ownership: opts strings are copied; opts.metrics and check user data are
 * borrowed and must outlive the server's running time. */
#ifndef KCR_HTTPD_H
#define KCR_HTTPD_H

#include <stdbool.h>
#include <stddef.h>

#include "err.h"
#include "metrics.h"

typedef struct kcr_httpd kcr_httpd;

/* A health or readiness check. Returns true when healthy; when not, may
 * write a one-line reason (NUL-terminated, at most n bytes including the NUL;
 * the buffer starts out empty) that the answer shows after "failed: ".
 * Called on a server thread, possibly concurrently with itself. */
typedef bool (*kcr_check_fn)(void *ud, char *reason, size_t n);

struct kcr_httpd_opts {
  /* "host:port", "[v6addr]:port", or ":port" for all interfaces (IPv6 and
   * IPv4 when the host has IPv6). Port 0 picks a free port: see
   * kcr_httpd_port(). NULL means ":8080". */
  const char *addr;
  /* Rendered on /metrics; borrowed. NULL: no /metrics endpoint. */
  kcr_metrics *metrics;
};

/* Creates a stopped server after checking the address's syntax.
 * Errors: KCR_EINVAL (no opts/out), KCR_ECONFIG (bad address; ei->message
 * names it and says what is wrong), KCR_ENOMEM. *out is NULL on error.
 * Thread safety: any thread. */
kcr_err kcr_httpd_new(const struct kcr_httpd_opts *opts, kcr_httpd **out,
                      struct kcr_errinfo *ei);

/* Registers a check on /healthz or /readyz, before or after start. name is
 * copied; it must be non-empty and made of [A-Za-z0-9._-] (it is also a path
 * segment). Errors: KCR_EINVAL (bad name or no fn), KCR_EEXIST (name taken
 * on that endpoint), KCR_ENOMEM. Checks are shown in registration order.
 * Thread safety: any thread, also while requests are served. */
kcr_err kcr_httpd_add_healthz(kcr_httpd *h, const char *name, kcr_check_fn fn, void *ud);
kcr_err kcr_httpd_add_readyz(kcr_httpd *h, const char *name, kcr_check_fn fn, void *ud);

/* Binds the address and starts serving. Errors: KCR_EINVAL (already
 * running), KCR_ECONFIG (host does not resolve), KCR_EIO (cannot listen,
 * e.g. address in use; ei->message names the address and the OS reason),
 * KCR_ENOMEM. A stopped server may be started again.
 * Thread safety: any thread (serialised with stop). */
kcr_err kcr_httpd_start(kcr_httpd *h, struct kcr_errinfo *ei);

/* The port the server is listening on, or 0 when it is not running.
 * Thread safety: any thread. */
int kcr_httpd_port(const kcr_httpd *h);

/* Stops serving: closes the listening socket and open connections and joins
 * the server's threads; requests in flight finish first. Idempotent; NULL is
 * a no-op. Thread safety: any thread but a server thread (see above). */
void kcr_httpd_stop(kcr_httpd *h);

/* Stops (as kcr_httpd_stop) and frees. NULL is a no-op. No other call on h
 * may be running or follow. */
void kcr_httpd_free(kcr_httpd *h);

#endif
