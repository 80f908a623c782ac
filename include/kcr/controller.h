/* kcr/controller.h - turns informer events into reconcile calls.
 *
 * A controller owns a work queue and N worker threads. Event sources feed
 * the queue with keys ("ns/name"):
 *   kcr_controller_for     the object itself
 *   kcr_controller_owns    the owner named by a child's controller
 *                          ownerReference (same namespace, matching kind)
 *   kcr_controller_watches any mapping of an object to keys
 * each filtered by optional predicates. Resyncs (update with old == cur) are
 * always passed through, so a wiped status is healed on the next resync.
 *
 * Priorities. The queue hands out higher priorities first (kcr/queue.h).
 * Each source queues the keys of an event with one of three priorities:
 *                                    for        owns, watches
 *   unchanged: an add from the       LOW        LOW      (-100)
 *     informer's initial list (before it has synced), or an update that
 *     changes nothing (a resync, a relist bringing back the same
 *     resourceVersion)
 *   create                           DEFAULT    DEFAULT  (0)
 *   update, delete                   DEFAULT    HIGH     (100)
 * (KCR_QUEUE_PRIORITY_*). The first row is controller-runtime's
 * handler.WithLowPriorityWhenUnchanged: the initial list after a restart
 * does not hold up live events. The last is a lane for children: an
 * object waiting on a child (a second pass once the child reports ready)
 * is reconciled when the child changes, ahead of the first passes of the
 * objects created after it, instead of behind all of them. A child's
 * create stays at DEFAULT: it is normally the owner's own write coming
 * back, which is news to nobody, and reconciling the owner again at once
 * would race its own status write to the cache. kcr_controller_enqueue
 * queues with DEFAULT; a key requeued after an error or for
 * requeue_after keeps the priority it was taken with. Each source can set
 * all three (kcr_source_opts). The lanes are strict: while keys of a
 * higher priority are queued, no lower one is reconciled.
 *
 * The reconcile contract (controller-runtime's):
 *   KCR_OK, res->requeue_after_ms == 0  -> forget the key's backoff
 *   KCR_OK, res->requeue_after_ms > 0   -> forget, then add after the delay
 *   KCR_ETERMINAL                        -> drop the key, log, no retry
 *   any other error                      -> rate-limited requeue (5 ms .. 1000 s)
 * A key is never reconciled by two workers at once. The reconciler must be
 * idempotent and level-based: read current state, never trust the event.
 * While the informer of one of its sources is over its byte budget
 * (kcr_informer_over_budget: its cache emptied until it lists again), or
 * awaits its CRD (kcr_informer_opts.await_crd: not synced because the CRD
 * does not serve the resource, or does again but the list is not in), no
 * key is reconciled - a worker holds the key it took, the others' keys
 * wait in the queue, deduplicated - so no reconcile begun while the cache
 * is emptied reads "not found" there and acts on it (one already running
 * when it empties may: kcr_manager_get then says KCR_EBUDGET for the
 * budget; level-based reconcilers correct it on the next pass).
 *
 * Metrics (controller-runtime's names): controller_runtime_reconcile_total
 * {controller,result}, controller_runtime_reconcile_errors_total,
 * controller_runtime_terminal_reconcile_errors_total,
 * controller_runtime_reconcile_time_seconds, controller_runtime_active_workers,
 * controller_runtime_max_concurrent_reconciles, and the workqueue_* family.
 *
 * Thread safety: set up (for/owns/watches) from one thread before start;
 * start and stop from one thread; kcr_controller_enqueue, _busy, _name and
 * _queue from any thread. The reconcile function runs on worker threads,
 * concurrently for different keys, with no library lock held; predicates
 * and map functions run on the informers' threads. */
#ifndef KCR_CONTROLLER_H
#define KCR_CONTROLLER_H

#include <stdint.h>

#include "api.h"
#include "arena.h"
#include "client.h"
#include "informer.h"
#include "log.h"
#include "metrics.h"
#include "queue.h"
#include "shard.h"
#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kcr_controller kcr_controller;
typedef struct kcr_ctx kcr_ctx;

/* What to reconcile; the strings are borrowed for the reconcile call. */
struct kcr_request {
  const char *ns; /* "" for cluster-scoped */
  const char *name;
  const char *key; /* "ns/name" */
};

struct kcr_result {
  uint64_t requeue_after_ms; /* 0: wait for the next change; any other value is
                                a delay (KCR_FOREVER: never by itself) */
};

/* See the reconcile contract above. res starts zeroed. */
typedef kcr_err (*kcr_reconcile_fn)(kcr_ctx *cx, const struct kcr_request *req,
                                    struct kcr_result *res, void *ud);

/* The per-reconcile context. It and everything these accessors return are
 * borrowed: valid until the reconcile call returns, on its worker thread.
 * The controller's client (take kcr_client_ref to keep it longer); in a
 * sharded controller (kcr_controller_shard) a handle scoped to this
 * reconcile's key, whose writes the manager's gate refuses once the key's
 * bucket is no longer this replica's: write through it, its children's
 * writes too. */
KCR_API kcr_client *kcr_ctx_client(kcr_ctx *cx);
/* Scratch memory, reset when the reconcile returns. */
KCR_API struct kcr_arena *kcr_ctx_arena(kcr_ctx *cx);
/* An error info for this reconcile's calls, as the arena is its memory:
 * empty when the reconcile starts, emptied (kcr_errinfo_cleanup) after it
 * returns, so pass it to every call; there is nothing to free. A call that
 * fails fills it (one that succeeds may leave it as it was); when the
 * reconcile returns an error, the controller's "reconciler error" log line
 * carries its message as "detail" - the server's Status message or the
 * library's - as controller-runtime logs the error a Reconcile returns. A
 * failure the reconcile handles (a validation it reports in a condition)
 * may stay there; kcr_errinfo_cleanup(ei) empties it, if the reconcile
 * then returns another error whose log should not carry that message. */
KCR_API struct kcr_errinfo *kcr_ctx_ei(kcr_ctx *cx);
/* A random id naming this reconcile in every log line. */
KCR_API const char *kcr_ctx_id(kcr_ctx *cx);
/* The controller's name. */
KCR_API const char *kcr_ctx_controller_name(kcr_ctx *cx);
/* Logs with controller, reconcileID, namespace and name added (kv is
 * borrowed for the call). */
KCR_API void kcr_ctx_log_kv(kcr_ctx *cx, enum kcr_log_level lvl, const char *msg,
                            const struct kcr_kv *kv, size_t n);
#define KCR_CLOG(cx, lvl, msg, ...)                                                      \
  do {                                                                                   \
    if(kcr_log_enabled(lvl)) {                                                           \
      const struct kcr_kv kcr__kv_[] = {{NULL, 0, NULL, 0, 0}, ##__VA_ARGS__};           \
      kcr_ctx_log_kv((cx), (lvl), (msg), kcr__kv_ + 1,                                   \
                     sizeof(kcr__kv_) / sizeof(kcr__kv_[0]) - 1);                        \
    }                                                                                    \
  } while(0)

/* Predicates: return true to let the event through. NULL members pass.
 * Called on the informer's thread with borrowed objects. */
struct kcr_predicate {
  bool (*create)(kcr_obj *obj, void *ud);
  bool (*update)(kcr_obj *old, kcr_obj *cur, void *ud);
  bool (*delete_)(kcr_obj *obj, void *ud);
  void *ud;
};
/* Passes updates whose metadata.generation changed (spec changes), and
 * resyncs. */
KCR_API extern const struct kcr_predicate kcr_pred_generation_changed;
/* Passes every update but the echo of w's own status write: the update
 * whose new object is what w's last status write to it answered
 * (kcr_status_writer_wrote) and differs from the old one in nothing but
 * status and metadata.resourceVersion (their texts compared). Reconciling
 * that echo would find what the reconcile that wrote it did, so for the
 * objects a controller is `for` this saves one reconcile per status write;
 * a status someone else changed, or any other change arriving with it
 * (after a relist, say), still passes. When in doubt it passes. w must
 * outlive the controller. Thread safety: any thread. */
KCR_API struct kcr_predicate kcr_pred_not_own_status(kcr_status_writer *w);

/* Maps an object to keys: call emit(ns, name, ctx) for each (the strings
 * are copied). Called on the informer's thread with a borrowed object:
 *   add     the new object;
 *   update  the new object, then the old one (as controller-runtime's
 *           EnqueueRequestsFromMapFunc maps ObjectNew and ObjectOld), so a
 *           child whose owner label was changed or removed wakes its former
 *           owner too; the queue folds keys emitted twice. A resync or a
 *           relist that brings back the same object maps it once;
 *   delete  the last object the cache knew - also when the delete was
 *           not seen but found by a relist (the object is gone from the
 *           new list; the store's copy is what is mapped).
 * Predicates run first, once per event, on the pair. */
typedef void (*kcr_map_emit)(const char *ns, const char *name, void *ctx);
typedef void (*kcr_map_fn)(kcr_obj *obj, kcr_map_emit emit, void *ctx, void *ud);

/* Options for kcr_controller_new(); zero means the default shown. */
struct kcr_controller_opts {
  const char *name;           /* required: metrics label and log field (copied) */
  int workers;                /* 0: 1 */
  kcr_reconcile_fn reconcile; /* required */
  void *ud;                   /* passed to reconcile */
  kcr_client *client;         /* required; the controller takes a reference */
  kcr_metrics *metrics;       /* optional; the controller holds a reference */
  uint64_t base_delay_ms;     /* per-key backoff base; 0: 5 ms */
  uint64_t max_delay_ms;      /* per-key backoff cap, >= the base; 0: 1000 s */
  double qps;                 /* overall requeue token bucket; 0: none */
  int burst;                  /* its size when qps > 0; 0: 1 */
};

/* Makes a controller (not started) with its work queue. Release with
 * kcr_controller_free(). Errors: KCR_EINVAL (no opts, no name, reconcile
 * or client, negative workers, and the queue's option errors - see
 * kcr_queue_new; ei names the field), KCR_EEXIST (opts.metrics has a
 * controller_runtime_* or workqueue_* family of another type or with other
 * labels; ei names it), KCR_ENOMEM. On error *out is NULL.
 * Thread safety: any thread. */
KCR_API kcr_err kcr_controller_new(const struct kcr_controller_opts *opts,
                                   kcr_controller **out, struct kcr_errinfo *ei);

/* Options of an event source (kcr_controller_for, _owns, _watches); NULL:
 * every event passes, with the priorities above. The pointers are read
 * during the call only. */
struct kcr_source_opts {
  const struct kcr_predicate *preds; /* npreds predicates (copied); an event */
  size_t npreds;                     /* is queued when all pass; at most 4 */
  const int *priority;               /* for updates and deletes (kcr/queue.h);
                                        NULL: KCR_QUEUE_PRIORITY_DEFAULT for
                                        for, KCR_QUEUE_PRIORITY_HIGH for owns
                                        and watches */
  const int *create_priority;        /* for creates; NULL:
                                        KCR_QUEUE_PRIORITY_DEFAULT */
  const int *unchanged_priority;     /* for an add from the initial list or an
                                        update that changes nothing; NULL:
                                        KCR_QUEUE_PRIORITY_LOW */
};

/* Event sources (up to 16 per controller), before start. Each registers
 * handlers on inf (kcr_informer_add_handlers, so inf must not be started
 * yet) that queue keys, with the options of opts (NULL: the defaults).
 * Errors: KCR_EINVAL (started, 16 sources already, no inf, more than 4
 * predicates or npreds without preds, the informer refuses handlers, and
 * as noted), KCR_ENOMEM. Thread safety: the setup thread.
 *
 * for: reconcile the objects of inf themselves. */
KCR_API kcr_err kcr_controller_for(kcr_controller *c, kcr_informer *inf,
                                   const struct kcr_source_opts *opts);
/* owns: reconcile the controller owner (kind owner_kind, required; group
 * owner_group, "" or NULL for the core group) of the objects of inf, in
 * their namespace. Both strings are copied. */
KCR_API kcr_err kcr_controller_owns(kcr_controller *c, kcr_informer *inf,
                                    const char *owner_group, const char *owner_kind,
                                    const struct kcr_source_opts *opts);
/* watches: reconcile the keys fn emits for each object of inf (fn
 * required; ud passed to it). */
KCR_API kcr_err kcr_controller_watches(kcr_controller *c, kcr_informer *inf,
                                       kcr_map_fn fn, void *ud,
                                       const struct kcr_source_opts *opts);
/* watches, typed: fn is a map function that gets each object as a view of
 * type t (kcr/typed.h; valid during the call) and an arena for the call's
 * scratch memory (emptied after it), called as
 * call(fn, view, arena, emit, ctx, ud). What kcr-gen's <kind>_watches
 * registers (the caller converts fn back to its type; see kcr_fnptr):
 *   static void map_group(const struct ebd *e, struct kcr_arena *a,
 *                         kcr_map_emit emit, void *ctx, void *ud)
 *   { ... emit(ns, name, ctx); }
 *   ebd_watches(ctl, ebds, map_group, &my, NULL);
 * An object that does not decode as t is logged at error level with its
 * key and the decoder's message and maps to nothing. t, call and fn are
 * required (KCR_EINVAL). */
typedef void (*kcr_typed_map_call)(kcr_fnptr fn, const void *obj, struct kcr_arena *a,
                                   kcr_map_emit emit, void *ctx, void *ud);
KCR_API kcr_err kcr_controller_watches_typed(kcr_controller *c, kcr_informer *inf,
                                             const struct kcr_type *t,
                                             kcr_typed_map_call call, kcr_fnptr fn,
                                             void *ud,
                                             const struct kcr_source_opts *opts);
/* Shares this controller's work with the other replicas of ring r
 * (kcr/shard.h): a key is reconciled here only while its bucket is this
 * replica's (kcr_ring_owns: assigned and handed over). The bucket is that of the For
 * source's cached object's uid (kcr_shard_hash); for a key that cache does not hold, the
 * uid the object had when this replica saw it deleted (remembered until that reconcile
 * succeeds); else, with a sharded For cache (below), the key is no replica's here (its
 * object is in another's share, or never was: nothing to reconcile), and without one
 * the key text's bucket. A key that is
 * not this replica's is dropped when a worker takes it: its backoff forgotten, the
 * reconciler not called, counted in kcr_controller_keys_not_owned_total{controller}. A
 * reconcile's kcr_ctx_client is a handle scoped to its key's hash (kcr_client_scoped):
 * with a manager's ring, a write through it is refused (KCR_ECANCELED) once that bucket
 * is no longer this replica's, also in a reconcile that began before (writes through
 * another client on the reconcile's thread, a status writer's, carry the key too). When a
 * bucket leaves, the ring waits until the reconciles of its keys in flight returned
 * (KCR_RING_DRAIN_MS at most) and its keys are out of the queue (parked ones too, their
 * failures forgotten) before it hands it over; when buckets
 * arrive, the For source's cached objects in them are queued. Sources
 * whose informers are sharded (kcr_informer_opts.shard_by: KCR_SHARD_BY_UID
 * for the For source, KCR_SHARD_BY_OWNER for Owns sources) cache the
 * buckets assigned to this replica alone (kcr_informer_set_buckets at
 * each change of the view, after the drain): a bucket being handed over
 * is listed before it is owned, and a key of a bucket its caches do not
 * cover yet (kcr_informer_covers) waits (100 ms at a time) rather than be
 * reconciled on a partial cache. Other sources cache every object.
 * Requires a For source; before kcr_controller_start. r must outlive the
 * controller (kcr_controller_free unregisters from it). Errors: KCR_EINVAL
 * (started, no For source, r NULL, sharded already), KCR_ERANGE (r has
 * KCR_RING_LISTENERS listeners), KCR_EEXIST (the metric exists with
 * another type or labels), KCR_ENOMEM. Thread safety: the setup thread. */
KCR_API kcr_err kcr_controller_shard(kcr_controller *c, kcr_ring *r);
/* Starts the workers. All or nothing: if a thread cannot be made, the ones
 * started are stopped and joined and KCR_ENOMEM is returned (the controller
 * is then stopped for good). KCR_EINVAL if started or stopped before. */
KCR_API kcr_err kcr_controller_start(kcr_controller *c);
/* Stops taking new keys (the queue shuts down; keys still queued are not
 * reconciled) and gives in-flight reconciles timeout_ms to return - the
 * grace period (0: do not wait; KCR_FOREVER: as long as it takes; the
 * manager passes kcr_manager_opts.grace_ms). Returns how many reconciles
 * are still running when it ran out (0: all returned and their workers
 * were joined); those keep running to their end and stay joinable: they
 * are never detached. Stop before freeing the informers that feed the
 * controller's sources. Idempotent; one thread. */
KCR_API int kcr_controller_stop(kcr_controller *c, uint64_t timeout_ms);
/* The number of reconciles running now on worker threads that a stop did
 * not join (0 before stop, and once they returned). Thread safety: any
 * thread. */
KCR_API int kcr_controller_busy(kcr_controller *c);
/* Stops if needed and frees. Blocks until every in-flight reconcile has
 * returned - nothing a reconcile can touch (context, arena, queue, name) is
 * freed before - however long that takes: to exit promptly past a stuck
 * reconcile, exit the process instead of freeing (see the shutdown contract
 * in docs/library-guide.md). The informers its sources use must be stopped
 * first (their threads call into the controller's queue). NULL: no-op. */
KCR_API void kcr_controller_free(kcr_controller *c);
/* The name (borrowed, valid until kcr_controller_free). Any thread. */
KCR_API const char *kcr_controller_name(const kcr_controller *c);
/* The work queue (borrowed, valid until kcr_controller_free; do not free
 * or shut it down yourself). Any thread. */
KCR_API kcr_queue *kcr_controller_queue(kcr_controller *c);
/* Queues the key ns/name by hand (e.g. from a timer), with priority
 * KCR_QUEUE_PRIORITY_DEFAULT; ns "" or NULL for a cluster-scoped object. Errors:
 * KCR_EINVAL (no name, or a key over 511 bytes), KCR_ECANCELED (stopped), KCR_ENOMEM.
 * Thread safety: any thread. */
KCR_API kcr_err kcr_controller_enqueue(kcr_controller *c, const char *ns,
                                       const char *name);

#ifdef __cplusplus
}
#endif

#endif
