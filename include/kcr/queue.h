/* kcr/queue.h - the work queue of a controller: client-go's rate-limiting,
 * delaying work queue (k8s.io/client-go/util/workqueue) with its contract,
 * and controller-runtime's priorities (pkg/controller/priorityqueue).
 *
 *   kcr_queue *q;
 *   kcr_queue_new(&(struct kcr_queue_opts){.name = "ebd", .metrics = reg},
 *                 &q, &ei);
 *   kcr_queue_add(q, "ns/name");                 -- from event handlers
 *
 *   char *key;                                   -- in each worker thread
 *   while(kcr_queue_take(q, KCR_FOREVER, &key) == KCR_OK) {
 *     kcr_err rc = reconcile(key);
 *     if(rc == KCR_OK || rc == KCR_ETERMINAL)
 *       kcr_queue_forget(q, key);                -- reset the backoff
 *     else
 *       kcr_queue_add_rate_limited(q, key);      -- retry after 5 ms * 2^n
 *     kcr_queue_done(q, key);
 *     free(key);
 *   }
 *
 * Keys are strings (usually "namespace/name"); the queue copies them.
 * The contract, exactly client-go's:
 *  - A key is never handed to two workers at once: between kcr_queue_take()
 *    and kcr_queue_done() it is "processing".
 *  - Adding a key that is already queued is a no-op (its place is kept).
 *    Adding a key that is processing marks it dirty: it is not queued now,
 *    but kcr_queue_done() puts it at the back of the queue.
 *  - Keys are handed out highest priority first, and in FIFO order of
 *    their (first) add within a priority. kcr_queue_add() and its siblings
 *    add with priority 0; kcr_queue_add_with() with any int.
 *  - Adding a queued key with a higher priority raises it: it moves to the
 *    back of its new priority's line. A lower or equal priority changes
 *    nothing (a key is never lowered). A key added while processing is
 *    queued by kcr_queue_done() with the highest priority it was added with
 *    meanwhile. Once taken, a key's priority is forgotten: the next add
 *    sets it afresh (kcr_queue_take_with_priority() tells the taker what
 *    it was, to requeue with it).
 *  - kcr_queue_add_after() parks the key until its deadline; a key parked
 *    twice keeps the earliest deadline and the highest priority. Parking is
 *    independent of the queued/processing state: when the deadline passes
 *    the key is added as by kcr_queue_add_with() with the priority it was
 *    parked with (rate-limited keys keep their priority too).
 *  - kcr_queue_add_rate_limited() parks the key for the rate limiter's next
 *    delay: per key base_delay * 2^failures capped at max_delay (5 ms ..
 *    1000 s by default), or the max of that and an overall token bucket when
 *    one is configured. kcr_queue_forget() resets the key's failures.
 *  - After kcr_queue_shutdown() adds are refused and parked keys dropped;
 *    kcr_queue_take() keeps handing out keys already queued, then returns
 *    KCR_ECANCELED.
 *
 * Metrics (when opts.metrics and opts.name are both set), with the label
 * name=<opts.name> and controller-runtime's names and help texts:
 * workqueue_depth, workqueue_adds_total, workqueue_queue_duration_seconds,
 * workqueue_work_duration_seconds, workqueue_retries_total,
 * workqueue_unfinished_work_seconds, workqueue_longest_running_processor_seconds
 * (the last two are computed when the registry renders). The registry must
 * outlive the queue.
 *
 * Priorities are strict: while keys of a higher priority are queued, none
 * of a lower one is handed out. Use few of them (each distinct priority in
 * use is a line of its own; the queue scans them); the controller uses the
 * three below (kcr/controller.h says when).
 *
 * Thread safety: every function may be called from any thread, concurrently,
 * except kcr_queue_free(), which must be the last call on the queue. */
#ifndef KCR_QUEUE_H
#define KCR_QUEUE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "api.h"
#include "err.h"
#include "metrics.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kcr_queue kcr_queue;

/* client-go's DefaultControllerRateLimiter: per key 5 ms .. 1000 s, combined
 * (max of) with a 10 qps / 100 burst token bucket. */
#define KCR_QUEUE_BASE_DELAY_MS    5ull
#define KCR_QUEUE_MAX_DELAY_MS     1000000ull
#define KCR_QUEUE_CONTROLLER_QPS   10.0
#define KCR_QUEUE_CONTROLLER_BURST 100

/* Priorities (higher is taken first; any int is valid). LOW is
 * controller-runtime's handler.LowPriority: what the informer's initial
 * list and unchanged resyncs add. DEFAULT is kcr_queue_add()'s. HIGH is the
 * controller's default for updates and deletes of owned children and
 * watched objects. */
#define KCR_QUEUE_PRIORITY_LOW     (-100)
#define KCR_QUEUE_PRIORITY_DEFAULT 0
#define KCR_QUEUE_PRIORITY_HIGH    100

/* Options for kcr_queue_new(); zero means the default shown. */
struct kcr_queue_opts {
  const char *name;       /* metrics label "name" (copied); NULL or "": no metrics */
  kcr_metrics *metrics;   /* registry for the workqueue_* metrics, or NULL;
                             the queue holds a reference (kcr_metrics_ref) */
  uint64_t base_delay_ms; /* per-key backoff base; 0: 5 ms */
  uint64_t max_delay_ms;  /* per-key backoff cap, >= the base; 0: 1000 s */
  double qps;             /* 0: no overall token bucket; > 0 enables one
                             (10 in client-go's controller default) */
  int burst;              /* the bucket's size when qps > 0; 0: 1 (100 in
                             client-go's controller default) */
};

/* Creates a queue; opts may be NULL (all defaults). Release with
 * kcr_queue_free(). Errors: KCR_EINVAL (no out, max_delay_ms below
 * base_delay_ms, qps negative or not finite, burst negative; ei names the
 * field), KCR_EEXIST (opts.metrics has a workqueue_* family of another
 * type or with other labels; ei names it), KCR_ENOMEM (also when the
 * metrics registry cannot take the queue's collect hook). On error *out is
 * NULL. Thread safety: any thread. */
KCR_API kcr_err kcr_queue_new(const struct kcr_queue_opts *opts, kcr_queue **out,
                              struct kcr_errinfo *ei);

/* Releases the queue with every key it holds (queued, parked or being
 * processed) and unhooks it from the metrics registry. NULL is a no-op. No
 * other thread may be using the queue, or use it afterwards: stop the
 * workers first (kcr_queue_shutdown(), then join them). Keys taken with
 * kcr_queue_take() stay owned by their callers. */
KCR_API void kcr_queue_free(kcr_queue *q);

/* Marks key as needing processing (see the contract above). The key is
 * copied. Returns KCR_OK (also when it was a no-op), KCR_ECANCELED when the
 * queue is shutting down (the add is dropped, as client-go drops it
 * silently), KCR_ENOMEM, KCR_EINVAL for a NULL key.
 * Thread safety: any thread. */
KCR_API kcr_err kcr_queue_add(kcr_queue *q, const char *key);

/* How kcr_queue_add_with() adds; zero means the default shown - all zero
 * is kcr_queue_add(). controller-runtime's priorityqueue.AddOpts. */
struct kcr_queue_add_opts {
  int priority;      /* higher is taken first; 0: KCR_QUEUE_PRIORITY_DEFAULT */
  uint64_t after_ms; /* park the key this long first, as kcr_queue_add_after(); 0: now */
  bool rate_limited; /* park it for the rate limiter's next delay, as
                        kcr_queue_add_rate_limited() (counting a failure);
                        with after_ms too, the shorter of the two delays */
};

/* Adds key with a priority, now or later (see the contract above): as
 * kcr_queue_add() when opts is NULL or all zero; with after_ms or
 * rate_limited set, as kcr_queue_add_after() (counts one
 * workqueue_retries_total) - the key is parked with its priority and
 * added with it when due. The key is copied. Errors as for
 * kcr_queue_add(): KCR_ECANCELED (shutting down), KCR_ENOMEM (nothing
 * changed), KCR_EINVAL (NULL key). Thread safety: any thread. */
KCR_API kcr_err kcr_queue_add_with(kcr_queue *q, const char *key,
                                   const struct kcr_queue_add_opts *opts);

/* Adds key once delay_ms has passed; 0 adds it now. Any delay is valid: a
 * deadline past the end of the monotonic clock (KCR_FOREVER) parks the key
 * until shutdown. If key is already parked, the earlier of the two
 * deadlines is kept. Counts one workqueue_retries_total (as client-go's
 * AddAfter does). Errors as for kcr_queue_add(): KCR_ECANCELED, KCR_ENOMEM,
 * KCR_EINVAL. Thread safety: any thread. */
KCR_API kcr_err kcr_queue_add_after(kcr_queue *q, const char *key, uint64_t delay_ms);

/* kcr_queue_add_after() with the rate limiter's next delay for key, and
 * counts one more failure for it: base * 2^n capped at max (n = failures so
 * far), max'ed with the token bucket's delay when configured. Errors as for
 * kcr_queue_add(): KCR_ECANCELED, KCR_ENOMEM, KCR_EINVAL. Thread safety: any
 * thread. */
KCR_API kcr_err kcr_queue_add_rate_limited(kcr_queue *q, const char *key);

/* Stops tracking key's failures: its next rate-limited delay is the base
 * delay again. Does not dequeue or finish the key. key is borrowed; NULL
 * is a no-op. Thread safety: any thread. */
KCR_API void kcr_queue_forget(kcr_queue *q, const char *key);

/* How many times key was rate-limited since the last kcr_queue_forget()
 * (0 for an unknown key; capped at INT32_MAX). Thread safety: any thread. */
KCR_API int kcr_queue_num_requeues(kcr_queue *q, const char *key);

/* Takes the next ready key out of the queue, waiting up to timeout_ms for
 * one (0: do not wait; KCR_FOREVER: as long as it takes). The key moves to
 * the caller: *key is the caller's copy (free() it), and the key is
 * "processing" until the caller passes it to kcr_queue_done().
 * Returns KCR_OK; KCR_ETIMEDOUT when no key came within timeout_ms;
 * KCR_ECANCELED once the queue is shut down and no queued key is left;
 * KCR_ENOMEM (the key stays queued); KCR_EINVAL for NULL arguments. On
 * any error *key is NULL. Thread safety: any thread. */
KCR_API kcr_err kcr_queue_take(kcr_queue *q, uint64_t timeout_ms, char **key);

/* kcr_queue_take(), also telling the priority the key was queued with in
 * *priority (0 on error), so that the taker can requeue it with the same
 * (controller-runtime's GetWithPriority). Errors as for kcr_queue_take():
 * KCR_ETIMEDOUT, KCR_ECANCELED, KCR_ENOMEM, KCR_EINVAL (also for a NULL
 * priority). Thread safety: any thread. */
KCR_API kcr_err kcr_queue_take_with_priority(kcr_queue *q, uint64_t timeout_ms,
                                             char **key, int *priority);

/* Marks the processing of key finished. If key was added while it was
 * processing, it is queued again now (even when shutting down: the add came
 * before the shutdown). Returns KCR_OK, or KCR_EINVAL if key is not being
 * processed (client-go would corrupt its queue; here nothing changes).
 * key is borrowed (the caller still frees the copy kcr_queue_take() gave
 * it). Thread safety: any thread. */
KCR_API kcr_err kcr_queue_done(kcr_queue *q, const char *key);

/* Number of keys queued and ready: not processing, not parked. For
 * information only (it may change before the caller looks at it).
 * Thread safety: any thread. */
KCR_API size_t kcr_queue_len(kcr_queue *q);

/* Refuses further adds, drops parked keys and wakes every waiting
 * kcr_queue_take(); takers still receive the keys already queued, then
 * KCR_ECANCELED.
 * Does not wait. Also makes a pending kcr_queue_shutdown_drain() return.
 * Idempotent. Thread safety: any thread. */
KCR_API void kcr_queue_shutdown(kcr_queue *q);

/* kcr_queue_shutdown(), then waits until no key is processing (every
 * kcr_queue_take() matched by its kcr_queue_done()) - client-go's
 * ShutDownWithDrain. Keys still queued are not waited for; workers get
 * them before KCR_ECANCELED. Never call it from a worker holding a key.
 * Thread safety: any thread. */
KCR_API void kcr_queue_shutdown_drain(kcr_queue *q);

/* True once kcr_queue_shutdown*() was called. Thread safety: any thread. */
KCR_API bool kcr_queue_shutting_down(kcr_queue *q);

#ifdef __cplusplus
}
#endif

#endif
