/* A scripted transport for unit tests, on the client's wire seam
 * (src/kube/client-int.h): every request a client makes - GET, LIST, PATCH,
 * WATCH ... - goes to a handler the test writes, which answers it as an API
 * server would, or as a broken one would (5xx, 429 with Retry-After, a cut
 * stream, a truncated page, a refused write). Retries, error mapping, the
 * write gate, response limits and watch framing run as in production.
 *
 *   static kcr_err api(struct twire_call *call, void *ud)
 *   {
 *     if(twire_is(call, "GET", "/api/v1/namespaces/ns/configmaps"))
 *       return twire_reply(call, 200,
 * "{\"items\":[],\"metadata\":{\"resourceVersion\":\"1\"}}"); return twire_reply(call,
 * 404, "%s", twire_status_json(404, "NotFound"));
 *   }
 *   kcr_client *c = twire_client(api, NULL);
 *
 * Handlers run on the requesting thread (informer, worker, elector): use
 * TCHECK (tcheck.h), not cmocka asserts, inside them. */
#ifndef KCR_TWIRE_H
#define KCR_TWIRE_H

#include <stdbool.h>
#include <stddef.h>

#include "kcr.h"
#include "kube/client-int.h"

struct twire_call {
  const struct kcr__wire_request *req;
  /* private */
  long *code, *retry_after;
  kcr__wire_write write;
  void *wctx;
  struct kcr_errinfo *ei;
  bool stopped;
};

typedef kcr_err (*twire_fn)(struct twire_call *call, void *ud);

/* A client for server https://twire.invalid whose requests go to fn. Free
 * with kcr_client_free. Aborts the test if it cannot be made. */
kcr_client *twire_client(twire_fn fn, void *ud);
/* The same with client options (timeouts, max_response_bytes ...). */
kcr_client *twire_client_opts(twire_fn fn, void *ud, const struct kcr_client_opts *o);

/* Streaming lists (watch with sendInitialEvents=true, kcr/watch.h): by
 * default the wire answers them itself with 422 Invalid, as an apiserver
 * with the WatchList feature gate off does, so an informer lists in pages
 * and a fake needs to serve only LIST and WATCH. twire_watchlist(fn, ud,
 * true) hands them to fn (the fake of a streaming-list test). */
void twire_watchlist(twire_fn fn, void *ud, bool on);

/* The config twire clients use (server https://twire.invalid, a token),
 * for objects that make their own client (a manager): new, caller owns. */
kcr_config *twire_config(void);

/* Puts a client made elsewhere (e.g. a manager's, before it runs) on the
 * wire: its requests go to fn from now on. */
void twire_attach(kcr_client *c, twire_fn fn, void *ud);

/* Is this request `method` on a path starting with `prefix` (query
 * ignored; prefix must end where a path segment ends)? */
bool twire_is(const struct twire_call *call, const char *method, const char *prefix);
/* The value of query parameter key (URL-decoded into buf), or NULL. */
const char *twire_query(const struct twire_call *call, const char *key, char *buf,
                        size_t n);
/* Answers with code and a body (printf format; "" for none). Returns KCR_OK
 * for the handler to return. */
kcr_err twire_reply(struct twire_call *call, long code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Sets Retry-After (seconds) for the answer. */
void twire_retry_after(struct twire_call *call, long seconds);
/* Fails the request as a broken connection would: returns rc for the
 * handler to return (KCR_ETRANSPORT or KCR_ETIMEDOUT). */
kcr_err twire_fail(struct twire_call *call, kcr_err rc, const char *why);
/* A metav1.Status body for code and reason (static buffer per thread). */
const char *twire_status_json(long code, const char *reason);

/* Watches: start the answer with twire_stream(call, 200), then send lines.
 * twire_send appends '\n'; twire_write sends raw bytes (to cut a document
 * in half). Both return false once the client stopped reading. */
void twire_stream(struct twire_call *call, long code);
bool twire_send(struct twire_call *call, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
bool twire_write(struct twire_call *call, const char *bytes, size_t n);
/* Waits until the watch is canceled (true) or ms passed (false). */
bool twire_wait_cancel(struct twire_call *call, long ms);

#endif
