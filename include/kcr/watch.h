/* kcr/watch.h - streaming watches.
 *
 * A watch is one HTTP GET ?watch=1 whose chunked body is a stream of JSON
 * documents, one per line: {"type":"ADDED|MODIFIED|DELETED|BOOKMARK|ERROR",
 * "object":{...}}. Documents are framed incrementally (chunk boundaries mean
 * nothing), parsed, and handed to a callback one at a time, in order.
 *
 *   kcr_watch *w;
 *   kcr_watch_new(client, &(struct kcr_watch_opts){.ref = &ref,
 *                 .resource_version = rv, .allow_bookmarks = true,
 *                 .timeout_seconds = 300}, on_event, ud, &w);
 *   rc = kcr_watch_run(w, &ei);   blocks until the stream ends
 *
 * kcr_watch_run returns KCR_OK when the server ended the stream (its
 * timeout), KCR_EGONE when the resourceVersion is too old (an ERROR event
 * with code 410 / reason Expired or Gone, or a plain 410 answer: relist),
 * KCR_ECANCELED after kcr_watch_cancel(), the callback's code if it returned
 * one, KCR_EPARSE for a malformed document (logged with context; the stream
 * cannot be trusted after it, so re-watch from kcr_watch_rv()), or any
 * client error. Unknown event types are logged once and skipped.
 * kcr_watch_rv() is the last resourceVersion seen (events and bookmarks), the
 * place to re-watch from.
 *
 * Thread safety: run from one thread; kcr_watch_cancel from any thread, any
 * time, including before run (then run returns KCR_ECANCELED at once). */
#ifndef KCR_WATCH_H
#define KCR_WATCH_H

#include <cjson/cJSON.h>
#include <stdbool.h>

#include "api.h"
#include "client.h"

#ifdef __cplusplus
extern "C" {
#endif

enum kcr_watch_type {
  KCR_WATCH_ADDED,
  KCR_WATCH_MODIFIED,
  KCR_WATCH_DELETED,
  KCR_WATCH_BOOKMARK,
  KCR_WATCH_ERROR
};

struct kcr_watch_event {
  enum kcr_watch_type type;
  cJSON *object; /* owned by the watch; set to NULL in the callback to take it */
  const char *resource_version; /* object's metadata.resourceVersion or NULL */
};

/* Returning non-OK stops the watch; kcr_watch_run returns that code. */
typedef kcr_err (*kcr_watch_fn)(struct kcr_watch_event *ev, void *ud);

struct kcr_watch_opts {
  const struct kcr_ref *ref;    /* the collection (ref->name NULL) */
  const char *resource_version; /* start after this; NULL: current state first */
  const char *label_selector;
  const char *field_selector;
  long timeout_seconds; /* server-side timeout; 0 = server default */
  bool allow_bookmarks;
};

typedef struct kcr_watch kcr_watch;

KCR_API const char *kcr_watch_type_name(enum kcr_watch_type t);

/* Creates a watch (no I/O yet). opts and its strings are copied. */
KCR_API kcr_err kcr_watch_new(kcr_client *c, const struct kcr_watch_opts *opts,
                              kcr_watch_fn fn, void *ud, kcr_watch **out);
/* Runs the stream to its end; see above. May be called again to re-watch
 * from the last resourceVersion. */
KCR_API kcr_err kcr_watch_run(kcr_watch *w, struct kcr_errinfo *ei);
/* The last resourceVersion seen (borrowed; valid until the next run/free). */
KCR_API const char *kcr_watch_rv(const kcr_watch *w);
/* Stops a running watch promptly (or the next run). Any thread. */
KCR_API void kcr_watch_cancel(kcr_watch *w);
KCR_API void kcr_watch_free(kcr_watch *w);

#ifdef __cplusplus
}
#endif

#endif
