/* runtime/events-int.h - what the tests may see of the event recorder's
 * internals (src/runtime/events*.c). Private to libkcr and its tests; not
 * installed, not part of the API.
 *
 * The visit counters make the cost of the bookkeeping observable without
 * timing: every node the recorder looks at - a hash table candidate (a
 * node under the key's hash) compared, a bucket moved on or evicted from
 * the spam LRU list, a heap step of the senders' timers, an entry taken off
 * a ready queue, a node of the once-a-tick sweep - adds one. */
#ifndef KCR_RUNTIME_EVENTS_INT_H
#define KCR_RUNTIME_EVENTS_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kcr/events.h"

/* The most spam buckets (object+reason keys) a recorder remembers; past it
 * a new key evicts the least recently used one. client-go's
 * maxLruCacheEntries. */
#define KCR__EVENTS_SPAM_MAX_KEYS 4096

/* The spam limit's token bucket. Starts full (kcr__event_bucket_init);
 * kcr__event_bucket_spend first adds (now - last) / refill_ms tokens,
 * capped at burst, then spends one if at least one is there (true).
 * Times are monotonic milliseconds. Thread safety: a bucket is used by one
 * thread at a time. */
struct kcr__event_bucket {
  double tokens;
  uint64_t last_ms;
};
void kcr__event_bucket_init(struct kcr__event_bucket *b, int burst, uint64_t now_ms);
bool kcr__event_bucket_spend(struct kcr__event_bucket *b, int burst, uint64_t refill_ms,
                             uint64_t now_ms);

struct kcr__recorder_probe {
  uint64_t spam_visits;        /* spam buckets looked at, since creation */
  uint64_t event_visits;       /* entries looked at (table, queues, timers) */
  uint64_t gc_runs;            /* once-a-tick expiry passes run, since creation */
  size_t spam_keys;            /* spam buckets now */
  size_t events_longest_chain; /* the longest hash chain of each table now */
  size_t spam_longest_chain;
};

/* Reads the counters and measures the chains, under the recorder's lock
 * (O(table size)). Thread safety: any thread. */
void kcr__recorder_probe(kcr_recorder *r, struct kcr__recorder_probe *out);

/* Drops what is still unsent (the manager, when leadership was lost: the
 * writes would be refused): no sender starts another write from now on
 * (those under way finish), and kcr_recorder_free does not flush first.
 * Returns the writes pending now: new events not yet created plus series
 * not yet written. Thread safety: any thread. */
size_t kcr__recorder_discard(kcr_recorder *r);

#endif
