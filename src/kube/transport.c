/* DESIGN: the transports that carry a request of kcr_client_do (client.c),
 * behind one interface (transport-int.h), and what they share; the tests'
 * wire seam is one of them, here.
 *
 * Transports: a request goes through one of three, chosen per request
 * (transport_for): the wire seam when a test set one; a connection of our
 * own for a write that may take one (transport_own.c); else a curl transfer
 * (transport_curl.c). Each is three steps (struct kcr__transport): prepare
 * takes or makes the connection and builds the request; exchange sends it
 * and reads the answer by the request's deadline, sending it again only as
 * Sent twice allows; finish keeps or drops the connection and wipes what
 * held credentials. What they share is done once, around the steps
 * (kcr__transport_run): the answer reset first; the request observed once
 * prepare succeeded; an answer cut short (too large, out of memory)
 * reported and its connection dropped; any other answer an error or not by
 * its status, with its Retry-After. A watch on a connection of our own
 * (kcr__own_stream) goes through the same own transport, its body handed on
 * as it comes.
 *
 * Sent twice: a request that got no byte of answer is sent again (once, on
 * a new connection, and only when the connection was reused) if no byte of
 * it left - the first send on a connection of our own hands TLS one record
 * at most, so when it fails the server can have read nothing - or if it is
 * a GET or HEAD, which does no harm twice (Go's net/http has the same
 * rule). A write of which something left may have been carried out (a
 * create with generateName would make a second object): it is not sent
 * again, and the caller gets KCR_EUNCERTAIN, as for any write that got no
 * answer after bytes of it left. curl would send any request again after a
 * reused connection gave no answer (7.88, Curl_retry_request: whatever the
 * method, whatever was sent), and calls the pre-request callback before it
 * does: there a write is stopped, and reported as KCR_EUNCERTAIN, when curl
 * sent bytes since the first call (CURLINFO_REQUEST_SIZE; it counts a
 * proxy's CONNECT too, so through a tunnel a write is never sent again). A
 * write that times out is KCR_ETIMEDOUT, its outcome as unknown.
 *
 * The wire seam (tests, client-int.h): the credentials and the
 * Authorization header are made exactly as for curl (so a 401 re-reads them
 * there too) and wiped, though the wire is not given them; the write gate
 * is asked before the wire is called.
 *
 * Thread safety: every function here works on the requesting thread's
 * request (struct kcr__xfer) and the client's thread-safe parts. */
#include <stdint.h>
#include <string.h>

#include "core/secret-int.h"
#include "kcr/time.h"
#include "limits-int.h"
#include "transport-int.h"

bool kcr__mutating(const char *method)
{
  return strcmp(method, "GET") && strcmp(method, "HEAD");
}

/* A timeout for curl, which takes a long, 0 meaning "none" for a transfer
 * but "300 s" for connecting: KCR_FOREVER, and anything a long cannot hold,
 * become "none" (transfer) or the largest value curl takes (connect). */
long kcr__curl_ms(uint64_t ms, bool transfer)
{
  if(ms == KCR_FOREVER || ms > (uint64_t)INT32_MAX)
    return transfer ? 0L : (long)INT32_MAX;
  return (long)ms;
}

/* "Authorization: Bearer <token>" into auth (empty without a token). The
 * caller releases it with kcr__auth_wipe(). */
kcr_err kcr__auth_header(const struct kcr_credentials *cr, struct kcr_buf *auth)
{
  static const char prefix[] = "Authorization: Bearer ";

  if(!cr->token)
    return KCR_OK;
  /* secret_append: a block left behind by growing is wiped, not just freed */
  kcr__secret_append(auth, prefix, sizeof(prefix) - 1);
  kcr__secret_append(auth, cr->token, strlen(cr->token));
  return kcr_buf_err(auth);
}

void kcr__auth_wipe(struct kcr_buf *auth)
{
  kcr__wipe_free(auth->ptr, auth->cap);
  *auth = (struct kcr_buf)KCR_BUF_INIT;
}

/* The client certificate of cr on conn's handle, if it has one and the
 * handle has not got it yet. */
void kcr__client_cert(struct kcr__conn *conn, const struct kcr_credentials *cr)
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

/* The error of a request the write gate did not let out. */
kcr_err kcr__gate_refused(const char *method, const char *path, struct kcr_errinfo *ei)
{
  if(kcr_write_scope(NULL)) /* a reconcile's write in a ring */
    return kcr_errinfo_set(ei, KCR_ECANCELED,
                           "%s %s: not sent: the write gate refused it (the object's "
                           "shard is not this replica's now, or this replica does not "
                           "hold its ring lease)",
                           method, path);
  return kcr_errinfo_set(ei, KCR_ECANCELED,
                         "%s %s: not sent: the write gate refused it (this replica "
                         "does not hold the leader lease)",
                         method, path);
}

/* The error of a request whose connection ended without an answer (why:
 * the transport's word, or NULL). A write of which something left
 * (sent) may have been carried out: KCR_EUNCERTAIN, never sent again (see
 * DESIGN: Sent twice); otherwise KCR_ETRANSPORT. */
kcr_err kcr__no_answer(const char *method, const char *path, bool sent, const char *why,
                       struct kcr_errinfo *ei)
{
  if(sent && kcr__mutating(method))
    return kcr_errinfo_set(ei, KCR_EUNCERTAIN,
                           "%s %s: the connection closed after the request went out, "
                           "without an answer%s%s%s: it may or may not have been "
                           "carried out (not sent again)",
                           method, path, why ? " (" : "", why ? why : "", why ? ")" : "");
  return kcr_errinfo_set(ei, KCR_ETRANSPORT,
                         "%s %s: the connection closed without an answer%s%s%s", method,
                         path, why ? " (" : "", why ? why : "", why ? ")" : "");
}

/* Keeps a 2xx body up to r->max (beyond: stop, too_large) and the first
 * KCR__ERRBODY_MAX bytes of an error body (the rest is read and dropped). */
bool kcr__take_body(const char *p, size_t n, void *ud)
{
  struct kcr__reply *r = ud;
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

/* The deadline (ns, monotonic) of a request of timeout ms from t0 (ns):
 * KCR__NO_DEADLINE for KCR_FOREVER or one past the clock's range. */
static uint64_t deadline_of(uint64_t t0, uint64_t ms)
{
  if(ms == KCR_FOREVER || ms > (KCR__NO_DEADLINE - t0) / 1000000)
    return KCR__NO_DEADLINE;
  return t0 + ms * 1000000;
}

/* ---- the wire seam (tests) ---- */

/* Credentials and the header as for curl (errors, refresh after a 401,
 * wiping), though the wire is not given them; then the write gate. */
static kcr_err wire_prepare(struct kcr__xfer *x, struct kcr_errinfo *ei)
{
  const struct kcr_http_request *req = x->req;
  struct kcr_credentials cr = {0};
  struct kcr_buf auth = KCR_BUF_INIT;
  kcr_err rc;

  rc = kcr_config_dup_credentials(kcr_client_config(x->c), &cr, ei);
  if(!rc && kcr__auth_header(&cr, &auth))
    rc = KCR_ENOMEM;
  kcr__auth_wipe(&auth);
  kcr_credentials_cleanup(&cr);
  if(rc)
    return rc;
  if(!req->ungated && kcr__mutating(req->method) && !kcr__client_may_write(x->c))
    return kcr__gate_refused(req->method, req->path, ei);
  return KCR_OK;
}

static kcr_err wire_exchange(struct kcr__xfer *x, struct kcr_errinfo *ei)
{
  const struct kcr_http_request *req = x->req;
  struct kcr__wire_request wr = {.method = req->method,
                                 .path = req->path,
                                 .content_type = x->ctype,
                                 .accept = req->accept,
                                 .body = req->body,
                                 .body_len = req->body_len};
  void *wud;
  kcr__wire_fn wire = kcr__client_wire(x->c, &wud);
  kcr_err rc =
      wire(wud, &wr, &x->resp->code, &x->r.retry_after_s, kcr__take_body, &x->r, ei);
  /* cut short by kcr__take_body: kcr__transport_run says why */
  return x->r.nomem || x->r.too_large ? KCR_OK : rc;
}

static void wire_finish(struct kcr__xfer *x) {}

const struct kcr__transport kcr__transport_wire = {
    .prepare = wire_prepare,
    .exchange = wire_exchange,
    .finish = wire_finish,
};

/* x for req of c, its answer into resp. */
void kcr__xfer_init(struct kcr__xfer *x, kcr_client *c,
                    const struct kcr_http_request *req, struct kcr_http_response *resp)
{
  const struct kcr_client_opts *o = kcr__client_opts(c);
  uint64_t ms = req->timeout_ms ? req->timeout_ms : o->timeout_ms;

  *x = (struct kcr__xfer){
      .c = c,
      .req = req,
      .resp = resp,
      .ctype = ctype_of(req),
      .t0 = kcr_time_mono_ns(),
      .timeout_ms = ms,
      .r = {.body = &resp->body,
            .retry_after_s = -1,
            .code = &resp->code,
            .max = o->max_response_bytes},
  };
  x->deadline = deadline_of(x->t0, ms);
}

/* x through t, no retries but the ones t makes (DESIGN: Sent twice): its
 * steps, and what every transport does alike - the answer reset first,
 * the request observed once it was tried, an answer cut short by
 * kcr__take_body reported, any other answer read as an error or not (by its
 * status, with its Retry-After). With a sink (a stream) the answer is
 * neither observed nor read: the caller does both. */
kcr_err kcr__transport_run(const struct kcr__transport *t, struct kcr__xfer *x,
                           struct kcr_errinfo *ei)
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
static const struct kcr__transport *transport_for(const kcr_client *c,
                                                  const struct kcr_http_request *req)
{
  void *wud;

  if(kcr__client_wire(c, &wud))
    return &kcr__transport_wire;
  if(kcr__mutating(req->method) && kcr__own_streams(c, req->path))
    return &kcr__transport_own;
  return &kcr__transport_curl;
}

kcr_err kcr__transport_do(kcr_client *c, const struct kcr_http_request *req,
                          struct kcr_http_response *resp, long *retry_after_s,
                          struct kcr_errinfo *ei)
{
  struct kcr__xfer x;
  kcr_err rc;

  kcr__xfer_init(&x, c, req, resp);
  rc = kcr__transport_run(transport_for(c, req), &x, ei);
  *retry_after_s = x.r.retry_after_s;
  return rc;
}
