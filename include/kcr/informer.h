/* kcr/informer.h - keeps a local cache (kcr_store) of one resource in sync
 * with the API server and tells handlers about every change.
 *
 * State machine, on its own thread:
 *   EMPTY -> LISTING (paged LIST) -> WATCHING (from the list's
 *   resourceVersion, with bookmarks and a random 5-10 min timeout)
 *   WATCHING --server timeout--> WATCHING (re-watch from the last RV)
 *   WATCHING --410 Gone--> LISTING (relist; the store is swapped in one step
 *                          and deletes are emitted for objects that vanished)
 *   any error --> backoff 0.8 s .. 30 s with jitter (reset after 2 healthy
 *                 minutes), then retry the same state.
 * Optional periodic resync calls on_update(obj, obj) for every cached
 * object, so level-based controllers re-check everything.
 *
 * Handlers run on the informer's threads (watch thread, resync thread) and
 * must be quick and thread-safe (typically: compute a key, add it to a
 * queue). The store is updated before handlers are called, so a reconciler
 * woken by a handler reads at least that state.
 *
 * Thread safety: configure (add handlers/indexes) before start; afterwards
 * any function from any thread. */
#ifndef KCR_INFORMER_H
#define KCR_INFORMER_H

#include <stdbool.h>
#include <stdint.h>

#include "api.h"
#include "client.h"
#include "metrics.h"
#include "store.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kcr_informer kcr_informer;

struct kcr_informer_handlers {
  /* A new object (from a LIST or an ADDED event). Borrowed reference. */
  void (*on_add)(kcr_obj *obj, void *ud);
  /* A change, or a resync (old == cur). Borrowed references. */
  void (*on_update)(kcr_obj *old, kcr_obj *cur, void *ud);
  /* The object is gone; obj is its last known state. */
  void (*on_delete)(kcr_obj *obj, void *ud);
  void *ud;
};

struct kcr_informer_opts {
  kcr_client *client;
  const struct kcr_gvr *gvr; /* copied */
  const char *ns;            /* NULL: all namespaces (or cluster-scoped) */
  const char *label_selector;
  const char *field_selector;
  uint64_t resync_ms;       /* 0: no periodic resync */
  long page_size;           /* LIST page size; default 500 */
  bool keep_managed_fields; /* default: strip them */
  long watch_timeout_min_s; /* default 300 */
  long watch_timeout_max_s; /* default 600 */
  kcr_metrics *metrics;     /* optional: kcr_informer_* gauges */
};

KCR_API kcr_err kcr_informer_new(const struct kcr_informer_opts *o, kcr_informer **out);
/* Adds handlers (up to 16); before start. */
KCR_API kcr_err kcr_informer_add_handlers(kcr_informer *inf,
                                          const struct kcr_informer_handlers *h);
/* The informer's store (borrowed; lives as long as the informer). Add
 * indexes to it before start. */
KCR_API kcr_store *kcr_informer_store(kcr_informer *inf);
/* "resource.group" (or "resource" for core), e.g. "ebds.ebdman.example.com". */
KCR_API const char *kcr_informer_name(const kcr_informer *inf);
/* Starts the threads. All or nothing: KCR_ENOMEM if a thread cannot be made
 * (then nothing runs and nothing was listed; start may be tried again),
 * KCR_EINVAL if started. */
KCR_API kcr_err kcr_informer_start(kcr_informer *inf);
/* True once the first LIST has been applied to the store and every handler
 * has been called for its objects. A LIST whose objects the store cannot
 * take (out of memory) leaves it false and is retried after backoff. */
KCR_API bool kcr_informer_has_synced(kcr_informer *inf);
/* Waits until synced, stopped, or timeout_ms passed (KCR_FOREVER: no
 * limit); true if synced. Any thread. */
KCR_API bool kcr_informer_wait_synced(kcr_informer *inf, uint64_t timeout_ms);
/* Stops the threads (cancels the watch; a LIST in flight is waited for, up
 * to the client's request timeout) and joins them. Idempotent. */
KCR_API void kcr_informer_stop(kcr_informer *inf);
/* Stops if needed and frees (the store too). */
KCR_API void kcr_informer_free(kcr_informer *inf);

/* Counters for tests and diagnostics. Any thread (read under the
 * informer's lock). */
struct kcr_informer_stats {
  uint64_t lists, watches, relists_gone, errors, events;
};
KCR_API void kcr_informer_get_stats(kcr_informer *inf, struct kcr_informer_stats *st);

#ifdef __cplusplus
}
#endif

#endif
