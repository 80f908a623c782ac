/* Private to src/status (and the tests): what a status writer's own writes
 * answered, per object, for as long as the caller's cache may not show them
 * yet ("read your own writes").
 *
 * A record holds, under the object's uid, the resourceVersion the server
 * gave the write and the status it answered with (its JSON text: parsed
 * only in the rare case it is needed). kcr__written_newer() is asked
 * with the object as the caller sees it: older than the record -> the
 * recorded status, to compare with instead; at or past it, or not
 * comparable (kcr_rv_compare) -> NULL, and the record goes, since the cache
 * has caught up (or cannot be judged). Records also go after ttl_ms and,
 * the oldest first, when max are held: memory stays bounded, and a record
 * that is gone only means the comparison is made with what the caller has,
 * as without records.
 *
 * Thread safety: every function may be called from any thread (one mutex
 * per table), except init and cleanup. */
#ifndef KCR_STATUS_WRITTEN_INT_H
#define KCR_STATUS_WRITTEN_INT_H

#include <cjson/cJSON.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "kcr/htab.h"

struct kcr__wrec;

struct kcr__written {
  pthread_mutex_t mu;
  struct kcr_htab by_uid;            /* struct kcr__wrec by kcr_hash_str(uid) */
  struct kcr__wrec *oldest, *newest; /* by time of the write */
  size_t max;
  uint64_t ttl_ms;
};

/* An empty table keeping at most max records (at least 1), each at most
 * ttl_ms. */
void kcr__written_init(struct kcr__written *t, size_t max, uint64_t ttl_ms);
/* Frees every record and the table's own memory. */
void kcr__written_cleanup(struct kcr__written *t);
/* Remembers that a write to the object uid, made at now_ms
 * (kcr_time_mono_ms), was answered with resourceVersion rv and the status
 * whose JSON text is status[0..len) (copied; NULL: an empty status; parsed
 * only when it is asked for). Replaces the record of uid unless that one is
 * newer (a write answered later by a concurrent caller). Does nothing when
 * uid or rv is missing, or memory runs out. */
void kcr__written_put(struct kcr__written *t, const char *uid, const char *rv,
                      const char *status, size_t len, uint64_t now_ms);
/* The status last written to uid (a new tree, caller frees) when rv, the
 * version the caller sees, is older than that write's; else NULL, and a
 * record of uid is dropped. NULL also when memory runs out (the record is
 * kept). */
cJSON *kcr__written_newer(struct kcr__written *t, const char *uid, const char *rv,
                          uint64_t now_ms);
/* Records held (after dropping those older than ttl_ms at now_ms). */
size_t kcr__written_len(struct kcr__written *t, uint64_t now_ms);

#endif
