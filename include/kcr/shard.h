/* kcr/shard.h - a ring of replicas that share a controller's objects, its
 * membership kept on coordination.k8s.io/v1 Leases (no service of its own).
 *
 *   kcr_ring *r;
 *   struct kcr_ring_opts o = {.client = c, .ns = "ebdman-system",
 *                             .name = "ebdman", .identity = getenv("POD_NAME")};
 *   if(kcr_ring_new(&o, &r, &ei) || kcr_ring_add_listener(r, reshard, app) ||
 *      kcr_ring_start(r)) ...  -- reshard: called after each change of the view
 *   kcr_ring_wait_joined(r, 30000);
 *   kcr_ring_view *v = kcr_ring_view_get(r);
 *   if(kcr_ring_view_mine(v, kcr_shard_hash(uid, strlen(uid)))) ... reconcile it
 *   kcr_ring_view_unref(v);
 *   ...
 *   kcr_ring_stop(r);   -- leaves: the Lease's holder is cleared
 *   kcr_ring_free(r);
 *
 * Membership. Each replica holds its own Lease, "<name>-<identity>" in ns,
 * labelled kcr.dev/ring=<name>, with kcr/leader.h's elector (the same
 * renewals, renew deadline and fence); identity is best the pod name of a
 * StatefulSet, stable across restarts, so that a restarted replica takes
 * its own Lease back at once and the assignment does not move. Every
 * replica watches the ring's Leases (an informer with that label) and
 * counts as members the holders of the Leases that are live: a holder is
 * set and the Lease's record (its spec) was seen to change less than its
 * leaseDurationSeconds ago, on this process's monotonic clock - as
 * client-go judges a leader's expiry, so clocks that disagree between
 * machines do not matter (renewTime is never compared with the local
 * clock). A member that stops renewing is out one lease duration after
 * its last renewal reached this replica's watch; one that leaves
 * (kcr_ring_stop) clears its holder and is out as soon as that is seen.
 * A Lease counts only while its holder is the identity its name says
 * (a Lease "<name>-a" held by b is no member). A Lease made while this
 * replica watches counts from then; one that was there when it started
 * (a dead member's stays held) counts once it is seen renewed, and the
 * first view waits for that, or for two retry periods at most. Give
 * every replica its own identity (a StatefulSet's pod names): two
 * processes with one share one Lease; the first to see the other's
 * KCR_RING_HOLDS in it stops writing and reports kcr_ring_lost, but until
 * then both act as that member. A Lease deleted under its holder still
 * holds its buckets for the others until it would have expired (its
 * holder may not know yet); a replica whose own Lease is deleted gives up
 * its buckets (drained) and makes it again.
 *
 * Assignment. An object belongs to a bucket, the top 8 bits of the 64-bit
 * FNV-1a hash of its owner's uid (kcr_shard_hash: the apiserver's own hash
 * for shardRange(object.metadata.uid, ...) selectors,
 * k8s.io/apimachinery/pkg/sharding); the
 * KCR_RING_BUCKETS buckets are shared out by kcr_ring_assign, a function
 * of the sorted member identities alone, so every replica that sees the
 * same members computes the same map. It is rendezvous hashing with
 * bounded loads: every (bucket, member) pair has a score (a hash of
 * "<identity>#<bucket>"), and in the order of the scores each bucket goes
 * to the first member that is not full - full being floor(buckets /
 * members), or ceil for the first (buckets mod members) to get there. So
 * every member holds floor or ceil of buckets / members, and a member
 * joining or leaving moves about its share of the buckets (1.0-1.7 times
 * it in tests/unit/test_shard.c), not all of them as a modulo would. A
 * member's buckets are scattered: up to about half of them are runs of
 * one.
 *
 * Hand-over. A bucket assigned to a replica is not its own at once: it
 * may still be another's, which has not seen the change yet or is
 * finishing a reconcile. Each replica says in its Lease which buckets it
 * holds (the annotation KCR_RING_HOLDS, "<epoch>:<64 hex digits>", bucket
 * b in bit b % 8 of byte b / 8, written by server-side apply). A replica
 * that sees a bucket leave its assignment drops it from its view at once
 * (its listeners drain it: kcr_controller_shard's stop taking its keys and
 * wait up to KCR_RING_DRAIN_MS for the reconciles of them in flight), then
 * publishes that it no longer holds it - its acknowledgement. The new
 * owner claims a bucket only once no other live Lease holds it (released,
 * or that Lease expired: one lease duration after its last renewal, by
 * when its holder's write fence has long closed), and owns it once its own
 * watch has seen its claim with no other claim on it: of two replicas that
 * claim one bucket at once (their views of the members differ for a
 * moment), the later claim sees the earlier and is withdrawn, since a
 * watch delivers the ring's Leases in the order they were written (an
 * echo counts only when every Lease in the cache has been told to the
 * ring: a relist tells them one at a time). So at no time do two replicas
 * own a bucket; a hand-over costs a drain and two Lease writes seen
 * through the watch (tens of milliseconds). A reconcile still running
 * after the drain time cannot write after it (the gate), but a write it
 * sent before may arrive after the hand-over.
 *
 * The view. The current members, assignment and owned buckets are an
 * immutable, reference-counted kcr_ring_view, replaced as a whole when
 * they change; its epoch counts the changes this replica has seen (local
 * to it: the replicas' epochs are not comparable).
 *
 * Metrics (opts.metrics): kcr_ring_members{ring},
 * kcr_ring_buckets_assigned{ring} and kcr_ring_buckets_owned{ring} (owned:
 * handed over) gauges, kcr_ring_handovers_total{ring,direction="in"|"out"}
 * (buckets taken over, given up), kcr_ring_takeover_seconds{ring} (from a
 * bucket's assignment to owning it: the old owner's drain and release, or
 * its Lease's expiry), kcr_ring_changes_total{ring} (views published), and
 * the elector's leader_election_master_status{name="<lease>"}.
 *
 * RBAC on leases in ns: get, create and update (the elector), patch (the
 * label, by server-side apply), list and watch (the ring's informer).
 *
 * Thread safety: every function may be called from any thread, except
 * kcr_ring_free, which must be the last call and not from a listener. */
#ifndef KCR_SHARD_H
#define KCR_SHARD_H

#include <stddef.h>
#include <stdint.h>

#include "api.h"
#include "buf.h"
#include "client.h"
#include "err.h"
#include "metrics.h"

#ifdef __cplusplus
extern "C" {
#endif

#define KCR_RING_BUCKETS   256u /* buckets: the hash's top 8 bits */
#define KCR_RING_LABEL     "kcr.dev/ring"
#define KCR_RING_LISTENERS 32                   /* kcr_ring_add_listener */
#define KCR_RING_HOLDS     "kcr.dev/ring-holds" /* the Lease annotation */
#define KCR_RING_DRAIN_MS                                                                \
  5000u /* kcr_controller_shard's wait for in-flight                                     \
           reconciles of a bucket it gives up */

typedef struct kcr_ring kcr_ring;
typedef struct kcr_ring_view kcr_ring_view;

/* A listener (kcr_ring_add_listener): called on the ring's thread after
 * the view changed (kcr_ring_view_get returns the new one). The buckets
 * that left the view are released once every listener returned: a
 * listener may wait there for work on them to end, for a bounded time
 * (KCR_RING_DRAIN_MS at most; the ring waits meanwhile). Must not call
 * kcr_ring_free, kcr_ring_wait_joined, kcr_ring_add_listener or
 * kcr_ring_remove_listener (kcr_ring_stop only asks the ring to stop
 * from there). */
typedef void (*kcr_ring_fn)(kcr_ring *r, void *ud);

/* Options for kcr_ring_new(); zero means the default shown. */
struct kcr_ring_opts {
  kcr_client *client;         /* required; the ring holds a reference */
  const char *ns;             /* required: the Leases' namespace (copied) */
  const char *name;           /* required: the ring's name, an RFC 1123
                                 label (copied) */
  const char *identity;       /* required: this replica's (copied); with
                                 name, "<name>-<identity>" must be an RFC
                                 1123 subdomain of at most 253 characters */
  uint64_t lease_duration_ms; /* 0: 15000 (kcr/leader.h's rules) */
  uint64_t renew_deadline_ms; /* 0: 10000 */
  uint64_t retry_period_ms;   /* 0: 2000 */
  kcr_metrics *metrics;       /* optional; the ring holds a reference */
};

/* Makes a ring member (not started). Errors: KCR_EINVAL (a required
 * option missing, a name that is no RFC 1123 label, a Lease name that is
 * no RFC 1123 subdomain, durations against kcr/leader.h's rules; ei names
 * which), KCR_EEXIST (opts.metrics has one of the ring's metrics with
 * another type or labels), KCR_ENOMEM. On error *out is NULL. */
KCR_API kcr_err kcr_ring_new(const struct kcr_ring_opts *opts, kcr_ring **out,
                             struct kcr_errinfo *ei);

/* Starts the ring's informer and its thread, which labels this replica's
 * Lease (a server-side apply, retried until it succeeds) and starts the
 * elector, which creates the Lease (or takes it back) and renews it; the
 * informer follows the others. An elector that cannot start (no thread)
 * is logged and makes kcr_ring_lost true. Errors: KCR_EINVAL (started or
 * stopped before), KCR_ENOMEM (no thread), the informer's start errors. */
KCR_API kcr_err kcr_ring_start(kcr_ring *r);

/* Waits up to timeout_ms (KCR_FOREVER: no limit) until this replica holds
 * its Lease and is a member of the current view. Returns whether it is.
 * Not from a listener. */
KCR_API bool kcr_ring_wait_joined(kcr_ring *r, uint64_t timeout_ms);

/* True while this replica may write as a member: it holds its Lease and
 * its last renewal started less than renew_deadline_ms ago (the elector's
 * fence, kcr_leader_may_write). Lock-free. */
KCR_API bool kcr_ring_may_write(kcr_ring *r);

/* Whether hash's bucket is this replica's in the current view
 * (kcr_ring_view_mine of kcr_ring_view_get, without a reference): with
 * kcr_ring_may_write, what a write for an object must pass (the manager's
 * write gate). Takes the ring's lock briefly; any thread. */
KCR_API bool kcr_ring_owns(kcr_ring *r, uint64_t hash);

/* True once this replica held its Lease and then lost it (no renewal in
 * the renew deadline, or taken by another holder), or its elector could
 * not start: like a lost leader, the replica should stop and start
 * again. */
KCR_API bool kcr_ring_lost(kcr_ring *r);

/* This replica's identity (borrowed; lives as long as r). */
KCR_API const char *kcr_ring_identity(const kcr_ring *r);

/* The current view, with a reference the caller releases with
 * kcr_ring_view_unref. Never NULL: before the ring has seen its Leases the
 * view has no member (epoch 0). */
KCR_API kcr_ring_view *kcr_ring_view_get(kcr_ring *r);

/* Releases a reference. NULL: no-op. */
KCR_API void kcr_ring_view_unref(kcr_ring_view *v);

/* The view's epoch: 0 before the first, then one more per change seen. */
KCR_API uint64_t kcr_ring_view_epoch(const kcr_ring_view *v);

/* The number of members, and member i's identity in byte order (borrowed
 * from v; NULL when i is out of range). */
KCR_API size_t kcr_ring_view_len(const kcr_ring_view *v);
KCR_API const char *kcr_ring_view_member(const kcr_ring_view *v, size_t i);

/* The identity of the member hash's bucket is assigned to (borrowed from
 * v), NULL when the view has no member. During a hand-over that member
 * may not own it yet. */
KCR_API const char *kcr_ring_view_owner(const kcr_ring_view *v, uint64_t hash);

/* Whether hash's bucket is this replica's in v: assigned to it and handed
 * over (see Hand-over above) - what it may reconcile and write. */
KCR_API bool kcr_ring_view_mine(const kcr_ring_view *v, uint64_t hash);

/* Whether hash's bucket is assigned to this replica in v, handed over yet
 * or not. */
KCR_API bool kcr_ring_view_assigned(const kcr_ring_view *v, uint64_t hash);

/* The number of buckets this replica owns (kcr_ring_view_mine) in v. */
KCR_API size_t kcr_ring_view_owned(const kcr_ring_view *v);

/* Adds fn (with ud) to what is called after the view changed, in the
 * order added: how a controller (kcr_controller_shard) learns of a
 * change. At most KCR_RING_LISTENERS; any time, also while running (a
 * listener added runs from the next change on). Errors: KCR_EINVAL (fn
 * NULL), KCR_ERANGE (full). */
KCR_API kcr_err kcr_ring_add_listener(kcr_ring *r, kcr_ring_fn fn, void *ud);

/* Removes the first listener added with this fn and ud; once it returns
 * the listener is not running and will not run (not from a listener). */
KCR_API void kcr_ring_remove_listener(kcr_ring *r, kcr_ring_fn fn, void *ud);

/* Leaves the ring: first publishes a view with no member (the listeners
 * drain what this replica owned) while it still holds its Lease, then
 * stops the elector (which clears the Lease's holder so the others take
 * over at once), the informer and the thread. Idempotent, but not from two threads at
 * once. From a listener it only asks. */
KCR_API void kcr_ring_stop(kcr_ring *r);

/* Stops (kcr_ring_stop) and frees. NULL: no-op. Views still referenced
 * stay valid until released. */
KCR_API void kcr_ring_free(kcr_ring *r);

/* The 64-bit FNV-1a hash of s[0..n), the apiserver's sharding.HashField:
 * the hash shardRange(object.metadata.uid, ...) compares. */
KCR_API uint64_t kcr_shard_hash(const char *s, size_t n);

/* The bucket of a hash: its top 8 bits. */
KCR_API unsigned kcr_shard_bucket(uint64_t hash);

/* The longest selector kcr_shard_selector writes: 128 terms (every other
 * bucket), in bytes without the NUL. */
#define KCR_SHARD_SELECTOR_MAX 10109u

/* Appends to out the apiserver's shard selector (kcr_list_opts and
 * kcr_watch_opts .shard_selector) of the buckets set in set (bucket b in
 * bit b % 8 of byte b / 8): one
 * shardRange(object.metadata.uid, '0x<16 hex>', '0x<16 hex>') per run of
 * consecutive buckets, joined by " || "; the end of the last bucket is
 * '0x10000000000000000'. At most 128 terms (KCR_SHARD_SELECTOR_MAX
 * bytes). Errors: KCR_EINVAL (set or out NULL), KCR_ENOTFOUND (no bucket
 * set: a selector cannot select nothing), KCR_ENOMEM (out is then in
 * error). Pure; any thread. */
KCR_API kcr_err kcr_shard_selector(const uint8_t set[KCR_RING_BUCKETS / 8],
                                   struct kcr_buf *out);

/* Shares the KCR_RING_BUCKETS buckets out among n members: owner[b] gets
 * the index in members of bucket b's owner. Depends only on the set of
 * identities (not on their order in members). Errors: KCR_EINVAL (n == 0,
 * a NULL or repeated identity, members or owner NULL), KCR_ENOMEM.
 * Pure; any thread. */
KCR_API kcr_err kcr_ring_assign(const char *const *members, size_t n,
                                uint32_t owner[KCR_RING_BUCKETS]);

#ifdef __cplusplus
}
#endif

#endif
