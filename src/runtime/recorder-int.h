/* runtime/recorder-int.h - what the event recorder's files share: the
 * recorder's struct, its entries, tables and queues, and the kcr__events_*
 * functions one of them calls in another. Private to src/runtime/events*.c;
 * not installed, not for the tests (events-int.h is theirs). Each function
 * is defined in the file named above its prototype, with its comment. The
 * invariants I1-I10 cited here are stated in the DESIGN comments of those
 * files (events.c has the map). */
#ifndef KCR_RUNTIME_RECORDER_INT_H
#define KCR_RUNTIME_RECORDER_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "kcr/buf.h"
#include "kcr/events.h"
#include "kcr/htab.h"
#include "kcr/time.h"
#include "runtime/events-int.h"

#define GC_TICK_MS    1000
#define NKEY_FIELDS   8 /* the isomorphic key, in this order: */
#define SPAM_FIELDS   5 /* kind, namespace, name, uid, reason: the spam key */
#define UNSENT_FIELDS 6 /* ... type: the coalescing key */
#define NOTE_FIELD    7 /* ... action, note */

/* A node of either table: its key is klen bytes, not NUL-terminated as a
 * whole (NUL-separated fields). */
struct knode {
  struct kcr_hnode hn; /* under kcr_hash(key, klen) */
  const char *key;
  size_t klen;
};

struct table {
  struct kcr_htab t;
  uint64_t visits; /* nodes looked at, for events-int.h */
};

enum estate { E_QUEUED, E_CREATED };

/* Where a scheduled entry waits for a sender (I1). */
enum ewhere { W_NONE, W_CREATEQ, W_PATCHQ, W_TIMERS };

struct entry {
  struct knode h;                /* first: key = data[0..klen) */
  struct knode u;                /* in the unsent table (I8): data[0..ulen) */
  struct entry *qnext, *qprev;   /* createq or patchq links */
  struct entry *anewer, *aolder; /* the age list, while aged (I10) */
  /* immutable after creation; point into data */
  const char *r_kind, *r_ns, *r_name, *r_uid, *reason, *type, *action, *note;
  const char *r_api, *r_rv, *ns, *name;
  char event_time[KCR_RFC3339_MICRO_LEN];
  size_t size;   /* bytes allocated for it: its cost against queue_bytes */
  bool combined; /* stands for similar events too (coalesce()) */
  /* under r->mu */
  uint64_t count, written;
  struct timespec last_observed;
  uint64_t last_seen_ms, last_write_ms, not_before_ms;
  uint64_t due; /* the heap key while where == W_TIMERS */
  int attempts;
  enum estate state;
  enum ewhere where;
  bool busy, recreate, tried, aged;
  char data[];
};

struct fifo {
  struct entry *head, *tail;
  size_t n;
};

struct timers {
  struct entry **a; /* a[0] is due first; children of i: 2i+1, 2i+2 */
  size_t n, cap;
};

struct spam {
  struct knode h;             /* first: key = data[0..klen) */
  struct spam *newer, *older; /* the LRU list */
  struct kcr__event_bucket b;
  bool dropping;
  char data[];
};

struct kcr_recorder {
  /* immutable after kcr_recorder_new */
  char *controller, *instance;
  kcr_metrics *metrics; /* a reference; the gauge's collect callback is on it */
  kcr_metric *m_total, *m_qbytes;
  double reported; /* what collect() last added to m_qbytes */
  int burst, max_attempts, nsenders;
  uint64_t refill_ms, flush_ms, window_ms, retry_initial_ms, retry_max_ms, shutdown_ms;
  uint64_t spam_ttl_ms; /* burst * refill_ms: any bucket is full that long after use */
  size_t budget;
  kcr_event_sink_fn sink;
  void *sink_ud;
  kcr_client *client; /* a reference, when the sink is the API */
  uint64_t (*clock)(void *);
  void *clock_ud;
  pthread_t *threads; /* nthreads of nsenders started */
  int nthreads;

  pthread_mutex_t mu;
  bool discard;        /* free does not flush first (kcr__recorder_discard) */
  pthread_cond_t wake; /* idle senders wait here */
  pthread_cond_t idle; /* flushers wait here */
  struct table events, unsent, spam;
  struct fifo createq, patchq;
  struct timers timers;
  struct spam *spam_newest, *spam_oldest; /* the LRU list's ends */
  struct entry *age_newest, *age_oldest;  /* the age list's ends (I10) */
  size_t nqueued, ndirty, qbytes;
  int ninflight, nflush;
  bool stop, full_logged, timekeeper;
  unsigned seed;
  int64_t last_name_ns;
  uint64_t last_gc_ms, paused_until, gc_runs;
  uint64_t tk_until; /* the timekeeper's deadline, while there is one */
  struct kcr_recorder_stats st;
};

/* Whom schedule() says to wake. */
enum wake { WAKE_NONE, WAKE_ONE, WAKE_ALL };

static inline uint64_t kcr__events_sat_add(uint64_t a, uint64_t b)
{
  return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}
static inline bool kcr__events_empty(const char *s) { return !s || !*s; }
static inline const char *kcr__events_nz(const char *s) { return s ? s : ""; }

/* events.c */
bool kcr__events_dns_subdomain(const char *s, size_t n);
uint64_t kcr__events_default_clock(void *ud);
uint64_t kcr__events_now_ms(const kcr_recorder *r);
void kcr__events_count_metric(kcr_recorder *r, const char *type, const char *reason,
                              const char *result);

/* events_cache.c */
struct knode *kcr__events_table_find(struct table *t, uint64_t h, const char *key,
                                     size_t klen);
struct entry *kcr__events_entry_new(kcr_recorder *r, const struct kcr_event *ev,
                                    const struct kcr_buf *key, uint64_t h,
                                    const struct timespec *wall, uint64_t now);
bool kcr__events_entry_expired(const kcr_recorder *r, const struct entry *e,
                               uint64_t now);
bool kcr__events_entry_dirty(const struct entry *e);
void kcr__events_dirty_update(kcr_recorder *r, const struct entry *e, bool was);
void kcr__events_age_unlink(kcr_recorder *r, struct entry *e);
void kcr__events_age_touch(kcr_recorder *r, struct entry *e);
void kcr__events_age_relink_oldest(kcr_recorder *r, struct entry *e);
void kcr__events_entry_remove(kcr_recorder *r, struct entry *e);
uint64_t kcr__events_gc_due(const kcr_recorder *r);
void kcr__events_gc(kcr_recorder *r, uint64_t now);

/* events_spam.c */
uint64_t kcr__events_spam_expiry(const kcr_recorder *r);
void kcr__events_spam_gc(kcr_recorder *r, uint64_t now);
bool kcr__events_spam_take(kcr_recorder *r, const char *key, size_t klen, uint64_t now,
                           bool *log_start);

/* events_sched.c */
struct entry *kcr__events_fifo_pop(struct fifo *q);
void kcr__events_fifo_replace(struct fifo *q, struct entry *old, struct entry *e);
uint64_t kcr__events_due_at(const kcr_recorder *r, const struct entry *e);
kcr_err kcr__events_timers_reserve(struct timers *t, size_t n);
void kcr__events_timers_rekey(kcr_recorder *r);
bool kcr__events_more_due_than_busy(const kcr_recorder *r);
void kcr__events_wake_up(kcr_recorder *r, enum wake w);
enum wake kcr__events_schedule(kcr_recorder *r, struct entry *e, uint64_t now);
void kcr__events_timers_expire(kcr_recorder *r, uint64_t now);

/* events_body.c */
char *kcr__events_event_body(const kcr_recorder *r, const struct entry *e);
char *kcr__events_series_body(const struct entry *e);

/* events_send.c */
bool kcr__events_quiescent(const kcr_recorder *r);
kcr_err kcr__events_api_sink(void *ud, enum kcr_event_op op, const char *ns,
                             const char *name, const char *text, size_t len,
                             struct kcr_errinfo *ei);
void *kcr__events_sender(void *arg);

#endif
