/* Private to src/kube (and the unit tests): the line framer and event
 * decoder behind kcr_watch, I/O-free so they can be fed byte by byte. */
#ifndef KCR_WATCH_INT_H
#define KCR_WATCH_INT_H

#include "kcr/buf.h"
#include "kcr/watch.h"

/* Called with each complete line (without the '\n'; may be empty). */
typedef kcr_err (*kcr__line_fn)(const char *line, size_t len, void *ud);

struct kcr__framer {
  struct kcr_buf pending; /* bytes of an incomplete line */
  size_t max_line;        /* a longer line is KCR_ETOOLARGE (default 64 MiB) */
};

/* Feeds bytes; calls fn for each line completed by them. A non-OK return
 * from fn stops and is returned; bytes after that line stay unconsumed. */
kcr_err kcr__framer_feed(struct kcr__framer *f, const char *data, size_t len,
                         kcr__line_fn fn, void *ud);
/* Bytes of an unfinished line (a stream that ended mid-document). */
size_t kcr__framer_pending(const struct kcr__framer *f);
void kcr__framer_cleanup(struct kcr__framer *f);

/* Decodes one watch document. On success ev->object is a new tree (caller
 * frees) and ev->resource_version points into it. Unknown "type" ->
 * KCR_EPARSE with ei naming the type; kind of the error in ei->message.
 * With scratch (a buffer of the caller's, reused between calls) the
 * object's metadata.managedFields is left out before parsing
 * (kcr_watch_opts.drop_managed_fields). */
kcr_err kcr__watch_decode(const char *line, size_t len, struct kcr_buf *scratch,
                          struct kcr_watch_event *ev, struct kcr_errinfo *ei);

/* Decodes one watch document for kcr_watch_opts.object_text: ev->object
 * NULL, ev->object_text its object's text within line (and the spans of
 * its metadata and managedFields in it), and
 * ev->resource_version a copy in rvbuf (a buffer of the caller's, reused
 * between calls). Returns KCR_OK; KCR_ENOTFOUND when the document must go
 * through kcr__watch_decode (malformed or not compact, an ERROR event, an
 * unknown type, a type or resourceVersion written with escapes);
 * KCR_ENOMEM. */
kcr_err kcr__watch_decode_text(const char *line, size_t len, struct kcr_buf *rvbuf,
                               struct kcr_watch_event *ev);

#endif
