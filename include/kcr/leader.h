/* kcr/leader.h - leader election on a coordination.k8s.io/v1 Lease, with
 * client-go's semantics (k8s.io/client-go/tools/leaderelection).
 *
 *   kcr_leader *le;
 *   struct kcr_leader_opts o = {.client = c, .ns = "kube-system",
 *                               .name = "ebdman", .metrics = reg,
 *                               .on_started_leading = start_workers,
 *                               .on_stopped_leading = stop_workers, .ud = app};
 *   if(kcr_leader_new(&o, &le, &ei) || kcr_leader_start(le)) ...
 *   kcr_leader_wait(le, KCR_FOREVER);     -- leader, or lost/stopped
 *   ...
 *   kcr_leader_stop(le);                  -- releases the lease if leading
 *   kcr_leader_free(le);
 *
 * The elector runs on its own thread: it tries to acquire the lease every
 * retry_period (with client-go's jitter, up to +120 %); once leader it renews
 * every retry_period. It only trusts its own monotonic clock: a lease held by
 * someone else is taken over only after the lease record has not changed for
 * the record's leaseDurationSeconds, measured locally from when this elector
 * first saw the record in that state (the times written in the Lease are
 * never compared with the local clock, so clock skew between machines does
 * not matter, only their rates). An empty holderIdentity means the lease is
 * free (released) and is taken at once.
 *
 * Leadership ends for good ("lost") when no renewal succeeded for
 * renew_deadline, or as soon as the Lease is seen held by another identity.
 * A lost elector does not try again: like client-go, the process is
 * expected to stop (or to make a new elector).
 *
 * Fencing: kcr_leader_may_write() is true only while the last successful
 * renewal started less than renew_deadline ago, on the local monotonic
 * clock - whether or not the elector thread has noticed anything. A
 * successor can only take over lease_duration after our last renewal, so
 * renew_deadline < lease_duration keeps the two from overlapping even when
 * the whole process was frozen (SIGSTOP, a stalled VM) and its threads all
 * wake up at once: a write checked against the fence just before it is
 * sent (kcr_client_set_write_gate; the manager does this) cannot be sent
 * after the lease could have passed to another. The monotonic clock keeps
 * running while a process is stopped; a suspended machine (CLOCK_MONOTONIC
 * does not count suspend) is not covered.
 *
 * Writes are optimistic: PUT with the lease's resourceVersion; a 409 means
 * another candidate won the race. API errors (403, 5xx, transport) are
 * logged once per distinct error and retried every retry_period.
 *
 * Metrics (when opts.metrics is set): the gauge
 * leader_election_master_status{name="<lease name>"}, 1 while leading and 0
 * otherwise, as client-go.
 *
 * Thread safety: every function may be called from any thread, except
 * kcr_leader_free(), which must be the last call on the elector and must not
 * be called from a callback. */
#ifndef KCR_LEADER_H
#define KCR_LEADER_H

#include <stdbool.h>
#include <stdint.h>

#include "api.h"
#include "client.h"
#include "err.h"
#include "metrics.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kcr_leader kcr_leader;

/* Called on the elector's thread. on_started_leading runs right after the
 * lease was acquired; on_stopped_leading when leadership ends (lost, or
 * stopped while leading: then before the lease is released, so work stopped
 * inside the callback cannot overlap a successor). Neither is called if this
 * elector never led. Both must return promptly (renewals wait for them): start
 * or signal other threads, do not do the guarded work here. They may call
 * kcr_leader_is_leader/lost/identity and kcr_leader_stop (which then does not
 * wait), never kcr_leader_free. */
typedef void (*kcr_leader_fn)(void *ud);

/* Options for kcr_leader_new(); zero means the default shown. */
struct kcr_leader_opts {
  kcr_client *client;               /* required; the elector holds a reference */
  const char *ns;                   /* required: the Lease's namespace (copied) */
  const char *name;                 /* required: the Lease's name (copied) */
  const char *identity;             /* copied; NULL or "": "<hostname>_<random hex>" */
  uint64_t lease_duration_ms;       /* 0: 15000; at least 1000; written to the Lease
                                       as whole seconds (truncated) */
  uint64_t renew_deadline_ms;       /* 0: 10000; must be < the lease duration's
                                       whole seconds (what others read) */
  uint64_t retry_period_ms;         /* 0: 2000; 1.2 * retry < renew_deadline */
  kcr_metrics *metrics;             /* optional; the elector holds a reference */
  kcr_leader_fn on_started_leading; /* optional */
  kcr_leader_fn on_stopped_leading; /* optional */
  void *ud;                         /* passed to both callbacks */
  bool keep_lease_on_stop;          /* false: kcr_leader_stop releases the lease
                                       so a successor takes it at once; true:
                                       it is left to expire */
};

/* Makes an elector (not started). Copies what it needs from opts; release
 * it with kcr_leader_free(). Errors: KCR_EINVAL (no opts, client, ns or
 * name; durations out of the rules above: lease (whole seconds) >
 * renew_deadline > 1.2 * retry > 0, lease >= 1000 ms; ei names the field),
 * KCR_EEXIST (opts.metrics has a leader_election_master_status of another
 * type or with other labels; ei says so), KCR_ENOMEM. On error *out is
 * NULL. Thread safety: any thread. */
KCR_API kcr_err kcr_leader_new(const struct kcr_leader_opts *opts, kcr_leader **out,
                               struct kcr_errinfo *ei);

/* Starts the elector's thread: acquire loop, then renew loop while leading.
 * Errors: KCR_EINVAL if already started or stopped, KCR_ENOMEM if no thread
 * could be made. Thread safety: any thread. */
KCR_API kcr_err kcr_leader_start(kcr_leader *le);

/* True while this elector holds the lease: from the successful write that
 * named it (before on_started_leading is called) until it decides that
 * leadership ended (before on_stopped_leading is called and before any
 * release). Thread safety: any thread. */
KCR_API bool kcr_leader_is_leader(kcr_leader *le);

/* True while writes guarded by this elector may be sent: leading, and the
 * last successful renewal started less than renew_deadline_ms ago (local
 * monotonic clock). Lock-free; meant for kcr_client_set_write_gate.
 * Thread safety: any thread, including from a signal handler. */
KCR_API bool kcr_leader_may_write(kcr_leader *le);

/* Waits up to timeout_ms (KCR_FOREVER: no limit) until this elector leads
 * and on_started_leading has returned, or has lost leadership (see
 * kcr_leader_lost), or is stopped. Returns kcr_leader_is_leader().
 * Thread safety: any thread (not from a callback: it would wait for itself). */
KCR_API bool kcr_leader_wait(kcr_leader *le, uint64_t timeout_ms);

/* True once leadership was held and then lost (renew deadline passed or the
 * lease was taken by another identity); it turns true after
 * on_stopped_leading has returned. Not set by kcr_leader_stop().
 * Thread safety: any thread. */
KCR_API bool kcr_leader_lost(kcr_leader *le);

/* The identity written to holderIdentity (borrowed; lives as long as le).
 * Thread safety: any thread. */
KCR_API const char *kcr_leader_identity(const kcr_leader *le);

/* Stops the elector and waits for its thread to end: a retry wait is cut
 * short at once; an HTTP request in flight is waited for (it is bounded by
 * renew_deadline_ms; the client's own 429/503 retries can add to that). If
 * leading, on_stopped_leading is called and then, unless
 * keep_lease_on_stop, the lease is released (holderIdentity "", leaseDurationSeconds 1)
 * so that a successor takes it at once. Idempotent; a no-op before start (the elector can
 * then no longer be started). From a callback it only asks the thread to stop and
 * returns. Thread safety: any thread. */
KCR_API void kcr_leader_stop(kcr_leader *le);

/* Stops (see kcr_leader_stop) and frees. NULL: no-op. Must be the last call
 * on le, and not made from a callback. */
KCR_API void kcr_leader_free(kcr_leader *le);

#ifdef __cplusplus
}
#endif

#endif
