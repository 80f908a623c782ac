/* Private to src/status (and the tests): what a writer's own writes
 * answered, per object, for as long as the caller's cache may not show them
 * yet ("read your own writes"). The status writer keeps one table; the
 * public kcr_written (kcr/status.h) is one table behind a handle, for any
 * other write (children a controller applies).
 *
 * A record holds, under a key naming one object (the status writer: its
 * uid; kcr_written: whatever its caller chose), the resourceVersion the
 * server gave the write and a text (the status writer: the status it
 * answered with, as JSON text, parsed only in the rare case it is needed).
 * kcr__written_newer() is asked with the object as the caller sees it:
 * older than the record -> the recorded text; at or past it, or not
 * comparable (kcr_rv_compare) -> NULL, and the record goes, since the cache
 * has caught up (or cannot be judged). Records also go when forgotten
 * (the object was deleted), after ttl_ms and, the oldest first, when max
 * are held: memory stays bounded, and a record that is gone only means the
 * comparison is made with what the caller has, as without records. A
 * record the caller's informer shows caught up (kcr__written_seen) goes
 * after a short grace instead of ttl_ms.
 *
 * Thread safety: every function may be called from any thread (one mutex
 * per table), except init and cleanup. */
#ifndef KCR_STATUS_WRITTEN_INT_H
#define KCR_STATUS_WRITTEN_INT_H

#include <cjson/cJSON.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kcr/buf.h"
#include "kcr/htab.h"

struct kcr__wrec;

struct kcr__written {
  pthread_mutex_t mu;
  struct kcr_htab by_key;            /* struct kcr__wrec by kcr_hash_str(key) */
  struct kcr__wrec *oldest, *newest; /* not seen caught up, by time of the write */
  struct kcr__wrec *seen_oldest, *seen_newest; /* seen caught up, by when */
  size_t max;
  uint64_t ttl_ms, grace_ms;
};

/* How long a record the cache was seen to catch up with is kept
 * (kcr__written_seen): for a reconcile that read the cache just before. */
#define KCR__WRITTEN_GRACE_MS 5000

/* An empty table keeping at most max records (at least 1), each at most
 * ttl_ms. */
void kcr__written_init(struct kcr__written *t, size_t max, uint64_t ttl_ms);
/* Frees every record and the table's own memory. */
void kcr__written_cleanup(struct kcr__written *t);
/* Remembers that a write to the object key, made at now_ms
 * (kcr_time_mono_ms), was answered with resourceVersion rv and the text
 * text[0..len) (copied; NULL: "{}", an empty status; parsed only when it
 * is asked for as a status). Replaces the record of key unless that one is
 * newer (a write answered later by a concurrent caller). Does nothing when
 * key or rv is missing, or memory runs out. */
void kcr__written_put(struct kcr__written *t, const char *key, const char *rv,
                      const char *text, size_t len, uint64_t now_ms);
/* The status last written to key (a new tree, caller frees) when rv, the
 * version the caller sees, is older than that write's; else NULL, and a
 * record of key is dropped. NULL also when memory runs out or the text is
 * not JSON (the record is kept). */
cJSON *kcr__written_newer(struct kcr__written *t, const char *key, const char *rv,
                          uint64_t now_ms);
/* As kcr__written_newer, for any text: true when rv is older than the
 * write recorded under key - or NULL and absent is set (the caller's cache
 * holds no copy of the object: older than any write) -; then out (when not
 * NULL) holds the recorded text (replaced). Else false, and a record of key
 * is dropped. false also when out cannot take the text (its error set; the
 * record is kept). */
bool kcr__written_pending(struct kcr__written *t, const char *key, const char *rv,
                          bool absent, struct kcr_buf *out, uint64_t now_ms);
/* The caller's cache now holds the object key at resourceVersion rv (from
 * an informer's add or update handler): a record rv is at or past (or
 * cannot be compared with) is kept grace_ms more - min(ttl_ms,
 * KCR__WRITTEN_GRACE_MS) - from now_ms, then dropped, so records live about
 * as long as the cache lags rather than ttl_ms. In that grace a caller that
 * read the cache before still finds it (kcr__written_pending/newer with an
 * older rv). A record rv is older than stays as it was. */
void kcr__written_seen(struct kcr__written *t, const char *key, const char *rv,
                       uint64_t now_ms);
/* Whether the record of key holds exactly resourceVersion rv: the object
 * at rv is what the recorded write answered. Changes no record. */
bool kcr__written_is(struct kcr__written *t, const char *key, const char *rv);
/* Drops the record of key, if any (the object was deleted). */
void kcr__written_forget(struct kcr__written *t, const char *key);
/* Records held (after dropping those older than ttl_ms at now_ms). */
size_t kcr__written_len(struct kcr__written *t, uint64_t now_ms);

#endif
