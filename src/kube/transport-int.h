/* Private to the client and its transports (client.c, transport.c,
 * transport_curl.c, transport_own.c): what carries one request of
 * kcr_client_do - the transport interface (prepare, exchange, finish; see
 * transport.c, DESIGN), the three transports, and what they share.
 * Nothing here is for watch.c or the layers above: they use client-int.h. */
#ifndef KCR_TRANSPORT_INT_H
#define KCR_TRANSPORT_INT_H

#include <curl/curl.h>
#include <stdbool.h>
#include <stdint.h>

#include "client-int.h"
#include "h1-int.h"
#include "kcr/buf.h"
#include "kcr/client.h"
#include "kcr/config.h"

/* ---- what the transports need of their client (client.c) ---- */

/* How requests reach the client's server. Set by kcr_client_new and never
 * changed after (read without a lock); owned by the client. */
struct kcr__target {
  char *base_url; /* the server URL, with tls-server-name as host */
  char *host_hdr; /* "Host: <server URL's host[:port]>" with a
                   * tls-server-name, else NULL */
  /* Exchanges of our own (transport_own.c): allowed for an https server
   * reached without a proxy unless the switch says curl (client.c,
   * DESIGN: The switch); the Host header line ("Host: ...\r\n") and the
   * server URL's path (without a final '/'). */
  bool own_ok;
  char *own_host, *own_prefix;
};

/* c's target; c's options with the defaults filled in (user_agent,
 * timeout_ms, max_response_bytes, ...). Both borrowed: valid as long as c,
 * never changed after kcr_client_new. Thread-safe. */
const struct kcr__target *kcr__client_target(const kcr_client *c);
const struct kcr_client_opts *kcr__client_opts(const kcr_client *c);

/* A handle from the pool of connections for exchanges of our own, or a
 * new one; kcr__conn_new_own: always a new one (not connected). Give it
 * back with kcr__conn_put. NULL if out of memory. Thread-safe. */
struct kcr__conn *kcr__conn_get_own(kcr_client *c);
struct kcr__conn *kcr__conn_new_own(kcr_client *c);

/* ---- one request, and the interface of a transport (transport.c) ---- */

/* Deadlines are monotonic nanoseconds; this one is "none". */
#define KCR__NO_DEADLINE UINT64_MAX

/* A body read as it streams (kcr__own_stream): its bytes go to fn, the
 * status to *code first; wake_fd readable ends the wait for it; batch_ms:
 * see kcr__own_stream. */
struct kcr__sink {
  kcr__h1_body_fn fn;
  void *ud;
  long *code;
  int wake_fd;
  uint64_t batch_ms;
};

/* Where an answer goes: its body (kcr__take_body), status and
 * Retry-After. */
struct kcr__reply {
  struct kcr_buf *body;
  long retry_after_s; /* -1 if absent */
  long *code;         /* the status, once known (wire: set before the body) */
  CURL *h;            /* curl: the transfer, asked for the status; else NULL */
  size_t max;
  bool too_large, nomem;
};

/* One request on its way through a transport: what kcr__transport_run
 * and the transport's steps share. Lives on the requesting thread's stack,
 * for one request. */
struct kcr__xfer {
  kcr_client *c;
  const struct kcr_http_request *req;
  struct kcr_http_response *resp;
  const char *ctype;            /* the Content-Type sent; NULL without a body */
  uint64_t t0;                  /* when it began (ns, monotonic) */
  uint64_t timeout_ms;          /* the request's, else the client's (KCR_FOREVER: none) */
  uint64_t deadline;            /* of the whole exchange (KCR__NO_DEADLINE: none) */
  struct kcr__reply r;          /* the answer */
  const struct kcr__sink *sink; /* own transport only: the body goes there */
  /* The transport's, from prepare to finish. */
  struct kcr__conn *conn;    /* NULL until taken */
  bool keep;                 /* finish gives conn back to the pool, else frees it */
  struct curl_slist *hdrs;   /* curl: the header list */
  struct kcr_credentials cr; /* own: the credentials */
  bool pair;                 /* own: they have a client certificate and key */
};

/* A transport: the three steps of one request, which kcr__transport_run
 * takes in turn (transport.c, DESIGN). Called on the requesting thread;
 * a step may block until x's deadline. */
struct kcr__transport {
  /* Takes or makes x->conn and builds the request on it. An error ends the
   * request (finish still runs); nothing was sent, nothing is observed. */
  kcr_err (*prepare)(struct kcr__xfer *x, struct kcr_errinfo *ei);
  /* Sends the request and reads the answer into x->r by x's deadline,
   * sending it again only as transport.c's DESIGN (Sent twice) allows;
   * sets x->keep. KCR_OK: an answer came (x->resp->code,
   * x->r.retry_after_s), whole or cut short by kcr__take_body
   * (x->r.nomem, x->r.too_large: kcr__transport_run reports it). Else
   * the error, with ei. */
  kcr_err (*exchange)(struct kcr__xfer *x, struct kcr_errinfo *ei);
  /* Gives x->conn back to the pool (x->keep) or frees it, and wipes what
   * held credentials. Called once, whatever came before. */
  void (*finish)(struct kcr__xfer *x);
};

/* The transports: a curl transfer (transport_curl.c), an exchange on a
 * connection of our own (transport_own.c), the tests' wire seam
 * (transport.c). Immutable. */
extern const struct kcr__transport kcr__transport_curl;
extern const struct kcr__transport kcr__transport_own;
extern const struct kcr__transport kcr__transport_wire;

/* One request of c: req through the transport it takes (the wire seam if
 * set; a connection of our own for a write kcr__own_streams allows; else
 * curl), no retries but the transport's own (Sent twice). The answer goes
 * to resp (reset first; its body owned by the caller, as resp's);
 * *retry_after_s gets its Retry-After in seconds (-1: none). Returns
 * KCR_OK for a 2xx answer, else what kcr_client_do documents, with ei.
 * Thread-safe: a connection is the caller's for the call. */
kcr_err kcr__transport_do(kcr_client *c, const struct kcr_http_request *req,
                          struct kcr_http_response *resp, long *retry_after_s,
                          struct kcr_errinfo *ei);

/* Sets up x for req of c, its answer into resp (both the caller's, and
 * kept by x: they must outlive it). Starts the request's clock. */
void kcr__xfer_init(struct kcr__xfer *x, kcr_client *c,
                    const struct kcr_http_request *req, struct kcr_http_response *resp);

/* x through t (see kcr__transport_do, and transport.c, DESIGN): t's
 * steps, and what every transport does alike. With x->sink (a stream) the
 * answer is neither observed nor read as an error: the caller does both.
 * Returns KCR_OK or the error, with ei. */
kcr_err kcr__transport_run(const struct kcr__transport *t, struct kcr__xfer *x,
                           struct kcr_errinfo *ei);

/* ---- shared by the transports (transport.c) ---- */

/* kcr__reply's sink (ud: the kcr__reply): keeps a 2xx body up to r->max
 * (beyond: false, too_large) and the first KCR__ERRBODY_MAX bytes of an
 * error body (the rest dropped); false and nomem when out of memory. */
bool kcr__take_body(const char *p, size_t n, void *ud);

/* Whether method writes (anything but GET and HEAD). Pure. */
bool kcr__mutating(const char *method);

/* A timeout for curl, which takes a long, 0 meaning "none" for a transfer
 * but "300 s" for connecting: KCR_FOREVER, and anything a long cannot
 * hold, become "none" (transfer) or the largest value curl takes
 * (connect). Pure. */
long kcr__curl_ms(uint64_t ms, bool transfer);

/* "Authorization: Bearer <token>" of cr into auth (empty without a
 * token): KCR_OK or KCR_ENOMEM. The caller releases auth with
 * kcr__auth_wipe (which wipes it), in every case. */
kcr_err kcr__auth_header(const struct kcr_credentials *cr, struct kcr_buf *auth);
void kcr__auth_wipe(struct kcr_buf *auth);

/* Sets cr's client certificate and key on conn's handle (copied by curl),
 * if cr has them and the handle has not got them yet. The caller's conn. */
void kcr__client_cert(struct kcr__conn *conn, const struct kcr_credentials *cr);

/* The error of a request the write gate did not let out: KCR_ECANCELED,
 * with ei. */
kcr_err kcr__gate_refused(const char *method, const char *path, struct kcr_errinfo *ei);

/* The error of a request whose connection ended without an answer (why:
 * the transport's word, or NULL): KCR_EUNCERTAIN for a write of which
 * something left (sent: it may have been carried out, and is not sent
 * again), else KCR_ETRANSPORT; with ei. */
kcr_err kcr__no_answer(const char *method, const char *path, bool sent, const char *why,
                       struct kcr_errinfo *ei);

#endif
