/* DESIGN: a request as a curl transfer (transport-int.h: the transport
 * kcr__transport_curl) - every request the other transports do not take:
 * reads but a watch on a connection of our own, and everything through a
 * proxy or with the switch on curl (client.c, DESIGN) - and the
 * per-request set-up of a pooled handle, which watch.c's transfers use too
 * (kcr__conn_prepare).
 *
 * Per request a handle gets its URL, method, headers (Accept, Content-Type,
 * Host with a tls-server-name, Authorization), the client certificate when
 * an exec plugin rotated it, and for a write the pre-request callback; the
 * answer's body and Retry-After go to the request's kcr__reply (on_body,
 * on_header). After the transfer the handle drops its references to the
 * request's memory and goes back to the pool, or is freed when the transfer
 * failed or was cut short.
 *
 * URL: each request's URL is given to curl twice, as text (CURLOPT_URL,
 * what curl reports) and parsed into the handle's CURLU (CURLOPT_CURLU),
 * with the flags curl itself parses a CURLOPT_URL with. With both set, curl
 * 7.88 takes the host, port, path and query from the CURLU and skips its
 * own parse of the text and the rebuilding of the whole URL from the parts
 * (curl_url_get(CURLUPART_URL), formatted a byte at a time). Never followed
 * (FOLLOWLOCATION is off), so a redirect cannot make the two disagree.
 *
 * The pre-request callback (write_prereq), on every write, ungated ones
 * too: curl calls it each time it is about to send the request - after the
 * connection is ready, before the first byte - so there a write curl would
 * send a second time is stopped (transport.c, DESIGN: Sent twice), and the
 * write gate is asked at the latest point a client can decide (a refused
 * request ends with CURLE_ABORTED_BY_CALLBACK, reported as KCR_ECANCELED).
 *
 * Thread safety: a handle is the requesting thread's from kcr__conn_get to
 * kcr__conn_put (curl's rule). */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/secret-int.h"
#include "transport-int.h"

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

void kcr__headers_free(struct curl_slist *hdrs)
{
  static const char auth[] = "Authorization:";
  for(struct curl_slist *n = hdrs; n; n = n->next)
    if(n->data && !strncasecmp(n->data, auth, sizeof(auth) - 1))
      kcr__wipe(n->data, strlen(n->data)); /* curl frees it */
  curl_slist_free_all(hdrs);
}

/* l with the header "name: value" appended (a new head, NULL when memory
 * ran out: l is then unchanged). */
static struct curl_slist *add_header(struct curl_slist *l, const char *name,
                                     const char *value)
{
  struct kcr_buf h = KCR_BUF_INIT;
  struct curl_slist *n = NULL;

  kcr_buf_printf(&h, "%s: %s", name, value);
  if(!kcr_buf_err(&h))
    n = curl_slist_append(l, h.ptr);
  kcr_buf_cleanup(&h);
  return n;
}

kcr_err kcr__conn_prepare(kcr_client *c, struct kcr__conn *conn, const char *method,
                          const char *path, const char *content_type, const char *accept,
                          bool ungated, struct curl_slist **hdrs, struct kcr_errinfo *ei)
{
  const struct kcr__target *t = kcr__client_target(c);
  struct kcr_credentials cr = {0};
  struct kcr_buf url = KCR_BUF_INIT, auth = KCR_BUF_INIT;
  struct curl_slist *l = NULL, *n;
  CURL *h = conn->h;
  kcr_err rc;

  *hdrs = NULL;
  rc = kcr_config_dup_credentials(kcr_client_config(c), &cr, ei);
  if(rc)
    goto out;
  rc = KCR_ENOMEM;
  if(kcr_buf_puts(&url, t->base_url))
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
  if(kcr__mutating(method)) {
    curl_easy_setopt(h, CURLOPT_PREREQFUNCTION, write_prereq);
    curl_easy_setopt(h, CURLOPT_PREREQDATA, conn);
  } else {
    curl_easy_setopt(h, CURLOPT_PREREQFUNCTION, NULL);
  }
  kcr__client_cert(conn, &cr);
  if(!(n = add_header(l, "Accept", accept ? accept : "application/json")))
    goto out;
  l = n;
  if(content_type) {
    if(!(n = add_header(l, "Content-Type", content_type)))
      goto out;
    l = n;
  }
  if(t->host_hdr) {
    if(!(n = curl_slist_append(l, t->host_hdr)))
      goto out;
    l = n;
  }
  if(kcr__auth_header(&cr, &auth))
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
  kcr__auth_wipe(&auth);
  kcr_buf_cleanup(&url);
  kcr__headers_free(l);
  kcr_credentials_cleanup(&cr);
  return rc;
}

kcr_err kcr__curl_err(CURLcode cc, const struct kcr__conn *conn, const char *method,
                      const char *path, struct kcr_errinfo *ei)
{
  kcr_err rc = cc == CURLE_OPERATION_TIMEDOUT ? KCR_ETIMEDOUT : KCR_ETRANSPORT;
  const char *detail = conn->errbuf[0] ? conn->errbuf : curl_easy_strerror(cc);
  if(cc == CURLE_ABORTED_BY_CALLBACK && conn->not_resent)
    return kcr__no_answer(method, path, true, "curl would have sent it again", ei);
  if(cc == CURLE_ABORTED_BY_CALLBACK)
    return kcr__gate_refused(method, path, ei);
  return kcr_errinfo_set(ei, rc, "%s %s: %s", method, path, detail);
}

static size_t on_body(char *p, size_t sz, size_t n, void *ud)
{
  return kcr__take_body(p, sz * n, ud) ? sz * n : 0;
}

static size_t on_header(char *p, size_t sz, size_t n, void *ud)
{
  struct kcr__reply *r = ud;
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
static kcr_err curl_prepare(struct kcr__xfer *x, struct kcr_errinfo *ei)
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
  rc = kcr__conn_prepare(x->c, x->conn, req->method, req->path, x->ctype, req->accept,
                         req->ungated, &x->hdrs, ei);
  if(rc)
    return rc;
  curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, kcr__curl_ms(x->timeout_ms, true));
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
static kcr_err curl_exchange(struct kcr__xfer *x, struct kcr_errinfo *ei)
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
    return KCR_OK; /* kcr__take_body stopped it: kcr__transport_run says why */
  rc = kcr__curl_err(cc, conn, method, path, ei);
  curl_easy_getinfo(conn->h, CURLINFO_REQUEST_SIZE, &sent);
  if(rc == KCR_ETRANSPORT && !x->resp->code && kcr__mutating(method) &&
     conn->pre_sent >= 0 && sent > conn->pre_sent)
    rc = kcr__no_answer(method, path, true,
                        conn->errbuf[0] ? conn->errbuf : curl_easy_strerror(cc), ei);
  return rc;
}

/* Drops the handle's references to the request's memory before it is
 * pooled; frees (and wipes) the header list. */
static void curl_finish(struct kcr__xfer *x)
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

const struct kcr__transport kcr__transport_curl = {
    .prepare = curl_prepare,
    .exchange = curl_exchange,
    .finish = curl_finish,
};
