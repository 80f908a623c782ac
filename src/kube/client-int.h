/* Private to src/kube (and the tests): handle set-up shared by the client
 * and the watch, and the wire seam that lets unit tests answer requests;
 * and, for the layers above, writes that answer with text. */
#ifndef KCR_CLIENT_INT_H
#define KCR_CLIENT_INT_H

#include <curl/curl.h>
#include <stdatomic.h>

#include "h1-int.h"
#include "kcr/buf.h"
#include "kcr/client.h"

/* One pooled connection: a curl handle and the credential generation its
 * client certificate was configured with. */
struct kcr__conn {
  CURL *h;
  CURLU *url; /* the request's URL, parsed here (see transport_curl.c: URL) */
  unsigned long cred_gen;
  bool cert_set;
  bool own;           /* connected for exchanges of our own (transport_own.c) */
  curl_socket_t sock; /* own: its socket */
  struct kcr__h1 *h1; /* own: the answer's reader */
  struct kcr_buf msg; /* own: the request (wiped after each) */
  /* A write as curl's transfer: its pre-request callback's state
   * (transport_curl.c, write_prereq), set by kcr__conn_prepare. */
  kcr_client *client; /* whose write gate */
  long pre_sent;      /* CURLINFO_REQUEST_SIZE at its first call; -1 before */
  bool gated;         /* the write gate is asked */
  bool not_resent;    /* curl was about to send it again: stopped */
  char errbuf[CURL_ERROR_SIZE];
};

/* Takes a handle from the pool (or makes one); returns NULL if out of memory. */
struct kcr__conn *kcr__conn_get(kcr_client *c);
/* Returns it to the pool (or frees it when broken is true). */
void kcr__conn_put(kcr_client *c, struct kcr__conn *conn, bool broken);
/* Prepares conn for a request to path (transport_curl.c): URL, TLS,
 * credentials, headers, and for a mutating method the pre-request
 * callback: the write gate unless ungated, and no second sending
 * (transport.c, DESIGN: Sent twice). *hdrs receives the header list to
 * free (kcr__headers_free) after the transfer. */
kcr_err kcr__conn_prepare(kcr_client *c, struct kcr__conn *conn, const char *method,
                          const char *path, const char *content_type, const char *accept,
                          bool ungated, struct curl_slist **hdrs, struct kcr_errinfo *ei);
/* Frees a header list made by kcr__conn_prepare, wiping the Authorization
 * header's bytes first. */
void kcr__headers_free(struct curl_slist *hdrs);
/* Maps a curl failure to a kcr_err with a message in ei (a transfer the
 * write gate stopped -> KCR_ECANCELED; a write curl was about to send a
 * second time -> KCR_EUNCERTAIN). */
kcr_err kcr__curl_err(CURLcode cc, const struct kcr__conn *conn, const char *method,
                      const char *path, struct kcr_errinfo *ei);
void kcr__client_observe(kcr_client *c, const char *method, long code, double secs);
/* Whether c makes a GET of path (with its query) on a connection of its
 * own: https reached without a proxy (client.c, DESIGN: Proxies), no wire
 * seam, a path a request line can hold as it is. When false, the caller
 * uses curl. Thread-safe. */
bool kcr__own_streams(const kcr_client *c, const char *path);
/* A GET whose answer streams (a watch) on a connection of our own
 * (transport_own.c), its body handed to
 * fn as it arrives, *code set to the answer's status before fn's first
 * call (0 until then). fn returning false stops the reading. timeout_ms
 * bounds the whole exchange, connecting included (KCR_FOREVER: no limit;
 * 0: the client's timeout_ms); wake_fd (-1: none) readable ends a wait for
 * the answer at once, and a connection being made within about a second
 * (curl's progress callback looks at it). The connection goes back to
 * the pool only when the answer ended whole and the server keeps it.
 * batch_ms (0: none): after bytes were read and handed to fn, the next
 * read waits that long first (only wake_fd ends that wait early), so that
 * bytes arriving meanwhile are read with one wake-up of the thread; when
 * nothing came in it, the wait for bytes is as without it.
 * Only for a path kcr__own_streams() takes (else KCR_EINVAL).
 * Returns KCR_OK when the answer ended or fn stopped it (whatever *code);
 * KCR_ECANCELED (woken), KCR_ETIMEDOUT, KCR_ETRANSPORT (with ei);
 * KCR_ENOMEM; credential errors.
 * Thread-safe: a connection is the caller's for the call. */
kcr_err kcr__own_stream(kcr_client *c, const char *path, const char *accept,
                        uint64_t timeout_ms, int wake_fd, uint64_t batch_ms,
                        kcr__h1_body_fn fn, void *ud, long *code, struct kcr_errinfo *ei);
/* Whether the exchanges of our own may run on libcurl v: the versions they
 * were tested with, [KCR__OWN_CURL_MIN, KCR__OWN_CURL_END), with OpenSSL.
 * Pure. */
bool kcr__own_curl_tested(const curl_version_info_data *v);
/* The client's max_response_bytes. */
size_t kcr__client_max_response(const kcr_client *c);
/* True if the write gate allows a write now (always without a gate). */
bool kcr__client_may_write(kcr_client *c);
/* The client a handle stands for: c, or a scoped handle's root
 * (kcr_client_scoped). Borrowed; NULL for NULL. */
kcr_client *kcr__client_root(kcr_client *c);
/* Sets (or clears) the scope kcr_write_scope reports for writes made on
 * the calling thread through a client itself, not a scoped handle: a
 * sharded controller's worker sets its reconcile's for the call. */
void kcr__client_thread_scope(bool set, uint64_t scope);
/* The ETOOLARGE error for a request, with a message naming it. */
kcr_err kcr__too_large(const kcr_client *c, const char *method, const char *path,
                       struct kcr_errinfo *ei);

/* kcr_list_each_text, with pfn (may be NULL) called with the byte length
 * of each page's body once it has arrived, before its items go to fn: for
 * a caller that counts the bytes it holds (the informer's byte budget). A
 * non-OK return from pfn stops the listing and is returned, as fn's.
 * Errors: as kcr_list_each_text. */
typedef kcr_err (*kcr__list_page_fn)(size_t len, void *ud);
kcr_err kcr__list_each_text_paged(kcr_client *c, const struct kcr_ref *ref,
                                  const struct kcr_list_opts *opts, kcr__list_page_fn pfn,
                                  kcr_list_text_fn fn, void *ud, char **rv,
                                  struct kcr_errinfo *ei);

/* kcr_patch and kcr_update, with the text of the server's answer in *text
 * (replaced; the caller cleans it up in every case - on error it holds
 * what kcr_client_do kept) instead of a tree: for a caller that needs only a
 * few fields of the object answered (the status writer, with
 * kcr__json_spans), which a scan finds at a fraction of the cost of a tree.
 * Errors: as kcr_patch / kcr_update. */
kcr_err kcr__patch_text(kcr_client *c, const struct kcr_ref *ref,
                        const struct kcr_patch_opts *po, const char *body, size_t len,
                        struct kcr_buf *text, struct kcr_errinfo *ei);
kcr_err kcr__update_text(kcr_client *c, const struct kcr_ref *ref, const cJSON *obj,
                         const struct kcr_write_opts *wo, struct kcr_buf *text,
                         struct kcr_errinfo *ei);

/* ---- the wire seam ----------------------------------------------------
 * With a wire set, requests and watches are answered by a function instead
 * of the network: unit tests drive the informer, controller, leader and
 * status writer through errors no healthy API server produces (truncated
 * pages, 5xx, refused writes, allocation failures). Everything above the
 * transport - retries, Retry-After, 401 refresh, the write gate, response
 * limits, error mapping, watch framing - runs as in production. Never set in
 * production code. */
struct kcr__wire_request {
  const char *method; /* "GET", "POST", ... */
  const char *path;   /* with the query string */
  const char *content_type;
  const char *accept; /* the Accept header: NULL for application/json */
  const char *body;
  size_t body_len;
  bool watch;                  /* a watch: stream events until done */
  const atomic_bool *canceled; /* watch only: set when the watch is canceled */
};
/* Hands response bytes to the client (any chunking); false means the client
 * stopped reading (limit exceeded, callback error, cancel): stop writing. */
typedef bool (*kcr__wire_write)(const char *p, size_t n, void *wctx);
/* Answers one request: set *code first (the HTTP status), and
 * *retry_after_s (seconds, -1 by default) if wanted, then write the body.
 * Return KCR_OK for an answer, or KCR_ETRANSPORT / KCR_ETIMEDOUT (with a
 * message in ei) for a connection that failed. Called on the requesting
 * thread; must be thread-safe if requests are concurrent. */
typedef kcr_err (*kcr__wire_fn)(void *ud, const struct kcr__wire_request *req, long *code,
                                long *retry_after_s, kcr__wire_write write, void *wctx,
                                struct kcr_errinfo *ei);
/* Sets the wire (NULL: the network). Before the client is used. */
void kcr__client_set_wire(kcr_client *c, kcr__wire_fn fn, void *ud);
/* The wire, or NULL. */
kcr__wire_fn kcr__client_wire(const kcr_client *c, void **ud);

#endif
