/* kcr/watch.h - streaming watches.
 *
 * A watch is one HTTP GET ?watch=1 whose chunked body is a stream of JSON
 * documents, one per line: {"type":"ADDED|MODIFIED|DELETED|BOOKMARK|ERROR",
 * "object":{...}}. Documents are framed incrementally (chunk boundaries mean
 * nothing), parsed, and handed to a callback one at a time, in order.
 *
 *   kcr_watch *w;
 *   kcr_watch_new(&(struct kcr_watch_opts){.client = c, .ref = &ref,
 *                 .on_event = on_event, .ud = ud, .resource_version = rv,
 *                 .allow_bookmarks = true, .timeout_ms = 300000}, &w, &ei);
 *   rc = kcr_watch_run(w, &ei);   blocks until the stream ends
 *
 * kcr_watch_rv() is the last resourceVersion seen (events and bookmarks), the
 * place to re-watch from. An event whose callback failed is not counted as
 * seen: the next run delivers it again (at least once, in order).
 *
 * Thread safety: run from one thread; kcr_watch_cancel from any thread, any
 * time, including before run (then run returns KCR_ECANCELED at once). The
 * callback runs on the thread that called kcr_watch_run, with no library
 * lock held. */
#ifndef KCR_WATCH_H
#define KCR_WATCH_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdint.h>

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
  /* The object as a tree, owned by the watch; set to NULL in the callback
   * to take it. NULL when object_text is set. */
  cJSON *object;
  const char *resource_version; /* object's metadata.resourceVersion or NULL */
  /* With kcr_watch_opts.object_text: the object's JSON text as the server
   * sent it (object_len bytes, not NUL-terminated, managedFields included):
   * compact and well formed (checked with the whole document), part of the
   * event's document: valid during the callback only. */
  const char *object_text;
  size_t object_len;
  /* With object_text: the values of its first member named "metadata" and
   * of that one's first member named "managedFields" (names compared as
   * written), found while the document was checked - where they lie in
   * object_text and how long they are; NULL and 0 when there is none (and
   * in a document nested more than 128 levels deep). A reader can step over
   * them (managedFields is often half the bytes) without walking them
   * again. */
  const char *metadata_text, *managed_fields_text;
  size_t metadata_len, managed_fields_len;
  /* A BOOKMARK that ends the initial events of a streaming list
   * (kcr_watch_opts.send_initial_events): its object carries the
   * annotation "k8s.io/initial-events-end": "true". Its resourceVersion is
   * the one the state so far is at. False for every other event. */
  bool initial_events_end;
};

/* Called for each event, in order, on the thread in kcr_watch_run. A
 * non-OK return stops the watch; kcr_watch_run returns that code. */
typedef kcr_err (*kcr_watch_fn)(struct kcr_watch_event *ev, void *ud);

struct kcr_watch_opts {
  kcr_client *client;           /* required; the watch holds a reference */
  const struct kcr_ref *ref;    /* required: the collection (ref->name NULL) */
  kcr_watch_fn on_event;        /* required */
  void *ud;                     /* passed to on_event */
  const char *resource_version; /* start after this; NULL: current state first */
  const char *label_selector;
  const char *field_selector;
  /* The apiserver's shard selector (ListOptions.shardSelector, alpha
   * feature gate ShardedListAndWatch): "shardRange(object.metadata.uid,
   * '0x0000000000000000', '0x8000000000000000')", terms joined by " || "
   * (kcr_shard_selector, kcr/shard.h, writes one). A server with the gate
   * off ignores it and sends everything; a list's metadata.shardInfo says
   * it was applied (a watch carries no such echo). */
  const char *shard_selector;
  /* The server ends the stream after this long, rounded up to whole seconds
   * (its timeoutSeconds); 0 or KCR_FOREVER: the server's default (a random
   * 30-60 minutes). The transfer itself times out 30 s after it. */
  uint64_t timeout_ms;
  bool allow_bookmarks;
  /* true: each object's metadata.managedFields is left out of the text
   * before it is parsed, so ev->object has none. They are often half of an
   * object's bytes and of no use to a cache that strips them anyway (the
   * informer sets this unless keep_managed_fields). */
  bool drop_managed_fields;
  /* true: events carry the objects' metadata alone (Accept
   * KCR_ACCEPT_METADATA, kcr/client.h): meta.k8s.io/v1 PartialObjectMetadata
   * whatever the resource (the full objects from a server that cannot). */
  bool metadata_only;
  /* true: ADDED, MODIFIED, DELETED and BOOKMARK events carry the object's
   * text (ev->object_text) instead of a tree, for a callback that reads the
   * text itself at a fraction of a tree's cost (the informer does). The
   * document is still checked whole, as a parse would. A document that is
   * not compact, or whose type or resourceVersion is written with escapes,
   * comes as a tree as before, and so do ERROR events (the watch reads
   * their Status). */
  bool object_text;
  /* After reading what had arrived (and calling on_event for each event in
   * it), wait this long before reading again, so that the events arriving
   * meanwhile are read and delivered with one wake-up of the thread, not
   * one each: fewer thread switches under a burst, for at most batch_ms
   * more latency of an event that follows another one closely. An event
   * after a quiet spell is read as soon as it arrives; kcr_watch_cancel
   * ends the wait at once. 0: every read as soon as bytes arrive. Only
   * for a stream on one of the client's own connections (https without a
   * proxy); others read as they arrive. The informer sets 50 ms. */
  uint64_t batch_ms;
  /* true: a streaming list (the apiserver's WatchList, client-go's default
   * since 0.35): each run asks for sendInitialEvents=true with
   * resourceVersionMatch=NotOlderThan, so the stream first brings every
   * object as an ADDED event (at least as new as resource_version; NULL or
   * "": as a fresh consistent list), then a BOOKMARK with
   * ev->initial_events_end (needs allow_bookmarks), then the changes. A
   * server without it (the WatchList feature gate off, an older or an
   * aggregated apiserver) refuses it (kcr_watch_run fails with ei->code 422,
   * or 400, 406, 501) or ignores it (no end bookmark ever comes); the
   * informer falls back to a paged LIST then. */
  bool send_initial_events;
};

typedef struct kcr_watch kcr_watch;

/* "ADDED", "MODIFIED", ... ("UNKNOWN" out of range): a static string. Pure. */
KCR_API const char *kcr_watch_type_name(enum kcr_watch_type t);

/* Makes a watch (no I/O yet) in *out (NULL on error). opts and its strings
 * are copied; the watch takes a reference to opts->client.
 * Errors: KCR_EINVAL (opts, client, ref, ref->gvr or on_event missing, ref
 * names an object, send_initial_events without allow_bookmarks, or an
 * invalid segment: see kcr_path), KCR_ENOMEM. */
KCR_API kcr_err kcr_watch_new(const struct kcr_watch_opts *opts, kcr_watch **out,
                              struct kcr_errinfo *ei);
/* Runs the stream to its end. May be called again to re-watch from
 * kcr_watch_rv(). Returns KCR_OK when the server ended the stream (its
 * timeout), and otherwise:
 *   KCR_EGONE       the resourceVersion is too old (an ERROR event with code
 *                   410 / reason Expired or Gone, or a plain 410 answer):
 *                   relist;
 *   KCR_ECANCELED   after kcr_watch_cancel();
 *   KCR_EPARSE      a malformed document (logged by its length, never its
 *                   content; the stream cannot be trusted after it, so
 *                   re-watch from kcr_watch_rv());
 *   KCR_ETRANSPORT  the stream ended in the middle of a document, or the
 *                   connection failed;
 *   KCR_ETOOLARGE   an event over the client's max_response_bytes;
 *   the code on_event returned, the code of an ERROR event's Status (other
 *   than 410: KCR_ESERVER when it maps to none), the request errors of
 *   client.h for an answer that is not 200, KCR_ENOMEM.
 * Unknown event types are logged once and skipped. */
KCR_API kcr_err kcr_watch_run(kcr_watch *w, struct kcr_errinfo *ei);
/* The last resourceVersion seen: borrowed, valid until the next run or
 * free; NULL before any. */
KCR_API const char *kcr_watch_rv(const kcr_watch *w);
/* Stops a running watch promptly (or the next run): at once while it waits
 * for the stream, within about a second while its connection is still
 * being made. Any thread, but it must have returned before kcr_watch_free. */
KCR_API void kcr_watch_cancel(kcr_watch *w);
/* Frees w (NULL: no-op) and drops its client reference. Not while it runs
 * or a kcr_watch_cancel of it is under way. */
KCR_API void kcr_watch_free(kcr_watch *w);

#ifdef __cplusplus
}
#endif

#endif
