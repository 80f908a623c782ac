/* DESIGN: a request on a connection of our own (transport-int.h: the
 * transport kcr__transport_own) - a write, or a watch's stream
 * (kcr__own_stream, for watch.c): curl makes and keeps the connection,
 * libkcr writes the request and reads the answer on it.
 *
 * Writes: a request other than GET or HEAD to an https server (every write
 * a controller makes) is not a curl transfer, unless the server is reached
 * through a proxy (client.c, DESIGN: Proxies: then curl does it all). curl
 * connects the handle (CURLOPT_CONNECT_ONLY: TCP, TLS with every setting of
 * the handle, client certificate, tls-server-name) and keeps the
 * connection; the request is written as one message (own_request: the
 * request line, Host, User-Agent, Accept, Content-Type and Content-Length,
 * Authorization, then the body) with curl_easy_send and the answer read
 * with curl_easy_recv into the HTTP/1.1 reader of h1-int.h (framing by
 * Content-Length, chunked or close; 1xx skipped), waiting in poll() on the
 * socket until the request's deadline (timeout_ms, connecting included).
 * What this saves is curl's per-transfer machinery for a small request: the
 * request formatted a byte at a time through its printf, connection and URL
 * set-up, header parsing.
 *
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
 * event cost most (bench/README.md). After a wake-up that read nothing new
 * the wait is on the socket again, so an event after a quiet spell is read
 * at once.
 *
 * Other reads stay curl transfers: LIST pages come gzip-compressed when
 * large (a content coding the reader refuses: it never asks for one), and a
 * path with a byte a request line cannot hold (a space, a control or
 * non-ASCII byte) goes to curl, which refuses it as before.
 *
 * Connections: one is kept while its answers are whole and say nothing of
 * closing, and is not used again when it has anything to read before the
 * request goes out (one poll: the server closed it, or sent what would be
 * taken for the next answer). One that gives no answer at all after being
 * reused (the server closed it as the request went out, or restarted) is
 * dropped, and the request sent once more on a new connection when that
 * cannot make it happen twice (transport.c, DESIGN: Sent twice); any other
 * failure drops it. A connection made with an older client certificate is
 * not reused. Nothing is sent once the deadline has passed (KCR_FOREVER: no
 * deadline). An answer that comes before the request is all out (413 for a
 * body over the server's limit, after which the server stops reading and
 * resets the connection) is read and reported, as curl does, and the
 * connection dropped; a socket that becomes readable while the request
 * waits to go out is that only when a read gets data from it (a TLS 1.3
 * server's session tickets, sent after the handshake, are no data: the read
 * takes them in and the sending goes on). The message holds the bearer
 * token: it is wiped after the exchange (and freed when over 64 KiB, so the
 * pool keeps no large ones).
 *
 * TLS: nothing of a connection of our own waits in OpenSSL where poll()
 * cannot see it, and nothing in libkcr looks into OpenSSL's state on a
 * connection. Read-ahead is off (OpenSSL's default; client.c's tls_settings
 * sets it so, for every handle): for each record OpenSSL reads its 5-byte
 * header and then exactly its body, never past it. Every read
 * (curl_easy_recv: in curl 7.88 one SSL_read of at most the handle's
 * CURLOPT_BUFFERSIZE, with nothing buffered between OpenSSL and the socket)
 * asks for KCR__RECV_BUF bytes, at least a record's plaintext, so the
 * record it decrypts is handed over whole. So when a read returns, OpenSSL
 * holds no plaintext: whatever the server sent after that record is still
 * in the socket. The read loop waits in poll() only after a read found
 * nothing (CURLE_AGAIN: at most part of a record has come, and its rest
 * will wake poll); bytes in an answer's last record after the answer are
 * seen by the reader (it used less than the read got: the connection is not
 * kept); bytes in later records are seen by own_unasked before the next
 * request (the connection is not used again). What the handshake may leave,
 * session tickets, is not data: the next read processes it. curl's own
 * transfers read the same way and check SSL_pending() before they wait.
 * This rests on curl 7.88's reading: curl 8.1 added a receive buffer under
 * TLS, and reads that fill the buffer from several records - one reason the
 * exchanges run on the tested libcurl only (client.c, DESIGN: The switch).
 *
 * Thread safety: a connection is the requesting thread's from
 * kcr__conn_get_own to kcr__conn_put. */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <string.h>

#include "config-int.h"
#include "core/secret-int.h"
#include "kcr/time.h"
#include "limits-int.h"
#include "transport-int.h"

/* Milliseconds until deadline; 0 when it has passed; KCR_FOREVER for none. */
static uint64_t ms_left(uint64_t deadline)
{
  uint64_t now = kcr_time_mono_ns();
  if(deadline == KCR__NO_DEADLINE)
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
  long ms = kcr__curl_ms(left, true); /* 0: no limit */

  if(!left) /* nothing left to connect in (curl would take 0 as no limit) */
    return kcr_errinfo_set(ei, KCR_ETIMEDOUT, "%s %s: timed out before connecting",
                           req->method, req->path);
  kcr__client_cert(conn, cr);
  conn->errbuf[0] = '\0';
  curl_easy_setopt(conn->h, CURLOPT_URL, kcr__client_target(c)->base_url);
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
static kcr_err own_request(const struct kcr__xfer *x, struct kcr_buf *m)
{
  const struct kcr__target *t = kcr__client_target(x->c);
  const char *ua = kcr__client_opts(x->c)->user_agent;
  const struct kcr_http_request *req = x->req;
  const struct kcr_credentials *cr = &x->cr;
  const char *ct = x->ctype;

  /* at once (no copy left behind of the secret below) */
  kcr_buf_reserve(m, 512 + strlen(ua) + (cr->token ? strlen(cr->token) : 0) +
                         (req->body ? req->body_len : 0));
  /* appends, not printf: a formatted write is dearer by far */
  kcr_buf_puts(m, req->method);
  kcr_buf_puts(m, " ");
  kcr_buf_puts(m, t->own_prefix);
  kcr_buf_puts(m, req->path);
  kcr_buf_puts(m, " HTTP/1.1\r\n");
  kcr_buf_puts(m, t->own_host);
  kcr_buf_puts(m, "User-Agent: ");
  kcr_buf_puts(m, ua);
  kcr_buf_puts(m, "\r\nAccept: ");
  kcr_buf_puts(m, req->accept ? req->accept : "application/json");
  kcr_buf_puts(m, "\r\n");
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

/* The answer's body, to kcr__take_body with the status known (or to a sink). */
struct own_reply {
  struct kcr__reply *r;
  const struct kcr__h1 *h1;
  const struct kcr__sink *sink; /* NULL: to r */
};

static bool own_body(const char *p, size_t n, void *ud)
{
  struct own_reply *o = ud;
  struct kcr__reply *r = o->r;
  *r->code = o->h1->code;
  if(o->sink) {
    *o->sink->code = o->h1->code;
    return o->sink->fn(p, n, o->sink->ud);
  }
  /* a 2xx body of a told length: room for all of it at once, up to
   * KCR__BODY_RESERVE_MAX (fails, if at all, in kcr__take_body) */
  if(!r->body->len && o->h1->has_len && !o->h1->chunked && o->h1->len > n &&
     o->h1->len <= KCR__BODY_RESERVE_MAX && o->h1->len <= r->max && *r->code >= 200 &&
     *r->code < 300)
    kcr_buf_reserve(r->body, (size_t)o->h1->len);
  return kcr__take_body(p, n, r);
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
static enum own_end own_attempt(struct kcr__xfer *x, CURLcode *cause, kcr_err *rc,
                                struct kcr_errinfo *ei)
{
  struct kcr__conn *conn = x->conn;
  const struct kcr_http_request *req = x->req;
  const struct kcr__sink *sink = x->sink;
  uint64_t deadline = x->deadline;
  struct kcr__h1 *h1 = conn->h1;
  struct own_reply o = {.r = &x->r, .h1 = h1, .sink = sink};
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
  struct kcr__conn *fresh = kcr__conn_new_own(c);
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
static kcr_err own_ready(struct kcr__xfer *x, struct kcr_errinfo *ei)
{
  struct kcr__conn *conn = x->conn;
  kcr_err rc;

  if(conn->sock != CURL_SOCKET_BAD &&
     ((x->pair && conn->cred_gen != x->cr.generation) || own_unasked(conn)) &&
     (rc = renew(x->c, &x->conn)))
    return rc;
  if(x->conn->sock == CURL_SOCKET_BAD && x->pair && !x->cr.cert) {
    kcr_credentials_cleanup(&x->cr);
    if((rc = kcr__config_credentials(kcr_client_config(x->c), &x->cr, true, &x->pair,
                                     ei))) {
      x->keep = true; /* not connected: nothing was sent */
      return rc;
    }
  }
  return KCR_OK;
}

/* The token (the client certificate and key only for a connection still
 * to be made: own_ready), a connection, the request as one message. */
static kcr_err own_prepare(struct kcr__xfer *x, struct kcr_errinfo *ei)
{
  kcr_err rc =
      kcr__config_credentials(kcr_client_config(x->c), &x->cr, false, &x->pair, ei);

  if(rc)
    return rc;
  if(!(x->conn = kcr__conn_get_own(x->c)) || own_request(x, &x->conn->msg))
    return KCR_ENOMEM;
  return own_ready(x, ei);
}

/* Connects when the connection is new, asks the write gate, and makes
 * the attempt; once more on a new connection when the pool's gave no
 * answer and that cannot make the request happen twice (transport.c,
 * DESIGN: Sent twice). */
static kcr_err own_exchange(struct kcr__xfer *x, struct kcr_errinfo *ei)
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
    if(!req->ungated && kcr__mutating(req->method) && !kcr__client_may_write(x->c)) {
      x->keep = true;
      return kcr__gate_refused(req->method, req->path, ei);
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
    if(fresh || (end == OWN_SILENT && kcr__mutating(req->method)))
      return kcr__no_answer(req->method, req->path, end == OWN_SILENT,
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
static void own_finish(struct kcr__xfer *x)
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

const struct kcr__transport kcr__transport_own = {
    .prepare = own_prepare,
    .exchange = own_exchange,
    .finish = own_finish,
};

bool kcr__own_streams(const kcr_client *c, const char *path)
{
  void *wud;
  return !kcr__client_wire(c, &wud) && kcr__client_target(c)->own_ok && plain_path(path);
}

kcr_err kcr__own_stream(kcr_client *c, const char *path, const char *accept,
                        uint64_t timeout_ms, int wake_fd, uint64_t batch_ms,
                        kcr__h1_body_fn fn, void *ud, long *code, struct kcr_errinfo *ei)
{
  struct kcr_http_request req = {
      .method = "GET", .path = path, .accept = accept, .timeout_ms = timeout_ms};
  struct kcr_http_response resp = {.body = KCR_BUF_INIT};
  struct kcr__sink sink = {
      .fn = fn, .ud = ud, .code = code, .wake_fd = wake_fd, .batch_ms = batch_ms};
  struct kcr__xfer x;
  kcr_err rc;

  *code = 0;
  if(!kcr__own_streams(c, path))
    return kcr_errinfo_set(ei, KCR_EINVAL, "GET %s: not for a connection of our own",
                           path);
  kcr__xfer_init(&x, c, &req, &resp);
  x.sink = &sink;
  rc = kcr__transport_run(&kcr__transport_own, &x, ei);
  if(resp.code) /* also an answer without a body */
    *code = resp.code;
  kcr_buf_cleanup(&resp.body);
  return rc;
}
