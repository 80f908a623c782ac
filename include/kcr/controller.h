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
 * The reconcile contract (controller-runtime's):
 *   KCR_OK, res->requeue_after_ms == 0  -> forget the key's backoff
 *   KCR_OK, res->requeue_after_ms > 0   -> forget, then add after the delay
 *   KCR_ETERMINAL                        -> drop the key, log, no retry
 *   any other error                      -> rate-limited requeue (5 ms .. 1000 s)
 * A key is never reconciled by two workers at once. The reconciler must be
 * idempotent and level-based: read current state, never trust the event.
 *
 * Metrics (controller-runtime's names): controller_runtime_reconcile_total
 * {controller,result}, controller_runtime_reconcile_errors_total,
 * controller_runtime_terminal_reconcile_errors_total,
 * controller_runtime_reconcile_time_seconds, controller_runtime_active_workers,
 * controller_runtime_max_concurrent_reconciles, and the workqueue_* family.
 *
 * Thread safety: set up (for/owns/watches) before start; start/stop from one
 * thread; the reconcile function runs on worker threads concurrently for
 * different keys. */
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

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kcr_controller kcr_controller;
typedef struct kcr_ctx kcr_ctx;

struct kcr_request {
  const char *ns; /* "" for cluster-scoped */
  const char *name;
  const char *key; /* "ns/name" */
};

struct kcr_result {
  uint64_t requeue_after_ms; /* 0: wait for the next change; any other value is
                                a delay (KCR_FOREVER: never by itself) */
};

typedef kcr_err (*kcr_reconcile_fn)(kcr_ctx *cx, const struct kcr_request *req,
                                    struct kcr_result *res, void *ud);

/* Per-reconcile context, valid during one call. */
KCR_API kcr_client *kcr_ctx_client(kcr_ctx *cx);
/* Scratch memory released after the reconcile returns. */
KCR_API struct kcr_arena *kcr_ctx_arena(kcr_ctx *cx);
/* A random id naming this reconcile in every log line. */
KCR_API const char *kcr_ctx_id(kcr_ctx *cx);
KCR_API const char *kcr_ctx_controller(kcr_ctx *cx);
/* Logs with controller, reconcileID, namespace and name added. */
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

/* Predicates: return true to let the event through. NULL members pass. */
struct kcr_predicate {
  bool (*create)(kcr_obj *obj, void *ud);
  bool (*update)(kcr_obj *old, kcr_obj *cur, void *ud);
  bool (*delete_)(kcr_obj *obj, void *ud);
  void *ud;
};
/* Passes updates whose metadata.generation changed (spec changes), and
 * resyncs. */
KCR_API extern const struct kcr_predicate kcr_pred_generation_changed;

/* Maps an object to keys: call emit(ns, name, ctx) for each. */
typedef void (*kcr_map_emit)(const char *ns, const char *name, void *ctx);
typedef void (*kcr_map_fn)(kcr_obj *obj, kcr_map_emit emit, void *ctx, void *ud);

struct kcr_controller_opts {
  const char *name; /* metrics label and log field; required */
  int workers;      /* default 1 */
  kcr_reconcile_fn reconcile;
  void *ud;
  kcr_client *client;
  kcr_metrics *metrics;   /* optional */
  uint64_t base_delay_ms; /* per-key backoff; default 5 ms */
  uint64_t max_delay_ms;  /* default 1000 s */
  double qps;             /* overall requeue token bucket; 0 = off */
  int burst;
};

KCR_API kcr_err kcr_controller_new(const struct kcr_controller_opts *o,
                                   kcr_controller **out);
/* Reconcile objects of inf themselves. preds: n predicates, all must pass. */
KCR_API kcr_err kcr_controller_for(kcr_controller *c, kcr_informer *inf,
                                   const struct kcr_predicate *preds, size_t n);
/* Reconcile the controller owner (kind `owner_kind`, group `owner_group`) of
 * objects of inf. */
KCR_API kcr_err kcr_controller_owns(kcr_controller *c, kcr_informer *inf,
                                    const char *owner_group, const char *owner_kind);
KCR_API kcr_err kcr_controller_watches(kcr_controller *c, kcr_informer *inf,
                                       kcr_map_fn fn, void *ud);
/* Starts the workers. All or nothing: if a thread cannot be made, the ones
 * started are stopped and joined and KCR_ENOMEM is returned (the controller
 * is then stopped for good). KCR_EINVAL if started or stopped before. */
KCR_API kcr_err kcr_controller_start(kcr_controller *c);
/* Stops taking new keys (the queue shuts down; keys still queued are not
 * reconciled) and waits up to grace_ms (KCR_FOREVER: as long as it takes)
 * for in-flight reconciles. Returns the number still running when the grace
 * period ran out; they keep running to their end and stay joinable: they
 * are never detached. Stop before freeing the informers that feed the
 * controller's sources. Idempotent; one thread. */
KCR_API int kcr_controller_stop(kcr_controller *c, uint64_t grace_ms);
/* Reconciles still running (after a stop whose grace ran out). Any thread. */
KCR_API int kcr_controller_busy(kcr_controller *c);
/* Stops if needed and frees. Blocks until every in-flight reconcile has
 * returned - nothing a reconcile can touch (context, arena, queue, name) is
 * freed before - however long that takes: to exit promptly past a stuck
 * reconcile, exit the process instead of freeing (see the shutdown contract
 * in docs/library-guide.md). The informers its sources use must be stopped
 * first (their threads call into the controller's queue). NULL: no-op. */
KCR_API void kcr_controller_free(kcr_controller *c);
KCR_API const char *kcr_controller_name(const kcr_controller *c);
KCR_API kcr_queue *kcr_controller_queue(kcr_controller *c);
/* Adds a key by hand (e.g. from a timer). */
KCR_API kcr_err kcr_controller_enqueue(kcr_controller *c, const char *ns,
                                       const char *name);

#ifdef __cplusplus
}
#endif

#endif
