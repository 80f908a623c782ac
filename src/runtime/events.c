/* DESIGN: the events.k8s.io/v1 Event recorder - client-go's tools/events
 * (event_broadcaster.go, event_recorder.go) plus the spam filter of
 * tools/record (events_cache.go), as one object under one mutex with a
 * pool of sender threads.
 *
 * State. Every Event the recorder has created, or is about to create, is an
 * entry in a hash table (kcr/htab.h) keyed by its isomorphic key (regarding
 * kind/namespace/name/uid, reason, type, action, note, NUL-separated: the
 * same fields kcr_event_isomorphic compares, from the same key_fields()).
 * The key's first five fields are the spam limit's key (object+reason), its
 * first six the coalescing key (object+reason+type), so each is a prefix of
 * the entry's key bytes. An entry carries the Event as first sent (name,
 * eventTime, regarding) and the series: count = occurrences seen, written =
 * count the server has. Spam buckets are a second table keyed by
 * object+reason; the new events no sender has taken yet are a third, keyed
 * by object+reason+type (an entry is linked there by a second node). All
 * hash with kcr_hash() (SipHash-2-4 under a per-process random key): the
 * keys are names and notes that whoever creates objects chooses, and an
 * unkeyed hash would let them put every key in one chain (hash flooding).
 *
 * The senders' schedule. An entry that needs a write is in exactly one of
 *   createq  FIFO of entries whose POST is due (new events, re-creations,
 *            retries whose backoff has passed), in the order they became due;
 *   patchq   FIFO of entries whose series PATCH is due;
 *   timers   a binary min-heap of entries whose next write waits for a
 *            time, keyed by due_at(): a retry's backoff (not_before_ms), and
 *            for a series also series_flush_ms after its last write (not
 *            while someone flushes).
 * so a sender never searches: it moves the timers that are due to the
 * FIFOs, takes the head of createq, else of patchq, and otherwise sleeps.
 * schedule() puts an entry where it belongs whenever that may have changed
 * (a new event, a repeat that makes a series dirty, the outcome of a
 * write), and says whom to wake: one sender when something became due and
 * the writes due outnumber the senders busy writing (each of those takes
 * the next one when done, without sleeping in between), all of them when
 * there is a new earliest timer; a repeat that joins a series already
 * waiting wakes nobody.
 *
 * Senders. opts.senders threads run the same loop: pick a job under the
 * lock, write without it, apply the outcome under it. A sender that picks
 * a job while more are due than senders are busy wakes the next one, so a
 * burst runs on all of them at once (through the client's connection
 * pool), and a trickle on as few as keep up with it: a write that finds a
 * sender busy waits for it (one write per busy sender) rather than waking
 * a sleeping one - a thread wake-up each, the dearest part of a write
 * after the write itself. The wait is one write's time, up to the request
 * timeout against a server that does not answer; a series PATCH, behind
 * the new events, may wait for more than one. Idle senders sleep
 * on one condvar; one of them (the timekeeper) sleeps with a deadline - the
 * first timer, the end of a pause or the next tick - the others until they
 * are woken, so an idle recorder wakes once a tick, not once per sender.
 *
 * Throttling. A 429 is flow control, not a failure: the whole recorder
 * pauses (paused_until) for the answer's Retry-After (retry_initial_ms
 * without one, at most retry_max_ms); no sender takes a job until then,
 * and the write is done again afterwards without spending one of its
 * max_attempts. The client's own 429/503 retries are off for the
 * recorder's requests (kcr_http_request.max_retries = -1), so it sees the
 * first 429, not the last of several that one sender slept through alone.
 *
 * Memory. A new event costs its entry's size (the struct and its strings)
 * against queue_bytes from the moment it is accepted until its first
 * create is settled (created, found, or given up); a new event that would
 * take the total past queue_bytes is dropped. A new event whose
 * object+reason+type matches one still waiting for its first send
 * (linked in the unsent table, so found in O(1)) takes its place instead
 * of a second slot: coalescing, as client-go's EventAggregator combines
 * similar events - the newest note and action win, the count covers both,
 * the note says "(combined from similar events): ". A flapping object
 * holds one slot per reason, whatever its notes.
 *
 * The spam buckets are also on a doubly linked LRU list, most recently used
 * first. At SPAM_MAX_KEYS buckets a new object+reason evicts the least
 * recently used one, as client-go's spam filter (an LRU cache of 4096
 * records) does; a bucket that has refilled is as good as none, so it may
 * be evicted or forgotten at any time without changing what is dropped.
 *
 * eventf does all the bookkeeping under the lock and never waits for I/O:
 * a repeat increments count (aggregated); a new event coalesces with an
 * unsent one, or takes a spam token, gets its name ("<regarding>.<hex ns>")
 * and joins createq; otherwise it is dropped. Metrics and log lines are
 * written after unlocking.
 *
 * A sender runs one job at a time: it builds the body under the lock,
 * marks the entry busy, unlocks, writes (POST, with series when repeats
 * came before it, or a merge PATCH of series), relocks and applies the
 * outcome (state machine in finish()). At most once a tick (GC_TICK_MS),
 * when something has expired, one of them forgets entries idle for
 * aggregate_window_ms and spam buckets that have surely refilled. Both are
 * kept in expiry order - entries on an age list in the order they were
 * last seen (one window for all: the order of last use is the order of
 * expiry), buckets on their LRU list - so gc() walks only what expired;
 * with nothing remembered nobody ticks.
 *
 * Invariants (under r->mu):
 *  I1 an entry is scheduled (where != W_NONE) iff !busy and it needs a
 *     write: state == E_QUEUED, or dirty (E_CREATED with count > written).
 *     createq holds E_QUEUED entries only, patchq dirty ones only; where
 *     names the one structure that holds it. nqueued counts the E_QUEUED
 *     entries that are not busy.
 *  I2 an entry is freed only when !busy and unscheduled (a sender may use
 *     its immutable strings without the lock while busy): by gc(), by the
 *     expiry check in kcr_recorder_event(), by finish() on its sender, or
 *     by free() - or, still unsent, by coalesce(), which puts its
 *     successor in its place on createq. Expired entries are clean, hence
 *     unscheduled.
 *  I3 ninflight counts the busy entries, at most one per sender.
 *  I4 state == E_CREATED implies written >= 1 and written <= count.
 *  I5 ndirty counts the dirty entries (busy or not); quiescent (what flush
 *     waits for) == nqueued == 0 && ninflight == 0 && ndirty == 0.
 *  I6 timers is a min-heap on due (each entry's due_at() when pushed, or
 *     earlier: a key may only be early, after a flush ended - the entry is
 *     then rescheduled when it surfaces); timers.cap >= events.t.n,
 *     reserved (with the tables' room) before an entry is added, so
 *     scheduling never allocates.
 *  I7 the LRU list holds exactly the buckets of the spam table;
 *     spam.t.n <= SPAM_MAX_KEYS.
 *  I8 an entry is in the unsent table iff it is E_QUEUED and no sender has
 *     taken it yet (!tried); it is then on createq. At most one per
 *     object+reason+type.
 *  I9 qbytes is the sum of size over the E_QUEUED entries that are not a
 *     re-creation (new events whose first create is not settled);
 *     qbytes <= budget.
 * I10 the age list holds every entry (aged) except those gc() took off:
 *     their window had passed but they were not clean, so a write is
 *     pending or under way and finish() puts them back at the oldest end.
 *     From the oldest end: those put back (expired by last_gc_ms), then
 *     the rest by last_seen_ms (the clock is monotonic), all of those
 *     expiring after last_gc_ms.
 *
 * Cost, with n entries and s spam buckets. eventf: O(1) expected and
 * amortised - one SipHash of a key per table it looks in, a chain walk of
 * expected length <= 1 (tables double at 1 key per bucket), O(1) LRU and
 * FIFO steps, the heap's array doubling now and then - plus O(log n) heap
 * steps when a repeat makes a series wait for its flush interval. A sender,
 * per write: O(1), plus O(log n) for a timer. gc(): O(1) per entry or
 * bucket it forgets (or takes off the age list), plus one per list; it
 * runs at most once a tick and only when something has expired. A flush
 * rekeys the heap: O(timers). Nothing scans a table or a list;
 * tests/unit/test_events.c checks this through the visit counters of
 * events-int.h.
 *
 * Lock order: r->mu is a leaf. With it held we call only malloc/free, the
 * writing of bodies into buffers (kcr_buf, snprintf), the clocks and the
 * condvars; the sink, metrics and the log are
 * called without it (the queued-bytes gauge is read by a metrics collect
 * callback, which takes r->mu under the registry's render: registry, then
 * r->mu, never the other way).
 *
 * Deviations from client-go, deliberate: the isomorphic key includes the
 * note and leaves out the regarding apiVersion/resourceVersion (client-go:
 * the whole ObjectReference, no note); series are written when they change
 * (at most every series_flush_ms) instead of only the first repeat at once
 * and the rest every 30 minutes or when the series ends; a 403/5xx is
 * retried (client-go retries transport errors only); the spam limit is per
 * object+reason and only new Events spend tokens; similar events are
 * combined only while the first still waits to be sent (client-go's
 * aggregator: from the 10th similar event within 10 minutes, whatever was
 * sent); writes go out in parallel (client-go: one goroutine); the default
 * reportingInstance is the host name (client-go: "<controller>-<host>"). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "core/assert-int.h"
#include "core/htab-int.h"
#include "core/json-int.h"
#include "kcr/events.h"
#include "kcr/hash.h"
#include "kcr/htab.h"
#include "kcr/json.h"
#include "kcr/log.h"
#include "kcr/path.h"
#include "kcr/time.h"
#include "runtime/events-int.h"

#define GC_TICK_MS    1000
#define SPAM_MAX_KEYS KCR__EVENTS_SPAM_MAX_KEYS
#define NKEY_FIELDS   8             /* the isomorphic key, in this order: */
#define SPAM_FIELDS   5             /* kind, namespace, name, uid, reason: the spam key */
#define UNSENT_FIELDS 6             /* ... type: the coalescing key */
#define NOTE_FIELD    7             /* ... action, note */
#define SERIES_MAX    2147483647ull /* EventSeries.count is an int32 */
#define COMBINED      "(combined from similar events): " /* client-go's */

static const struct kcr_gvr events_gvr = {
    .group = "events.k8s.io", .version = "v1", .resource = "events", .namespaced = true};

static uint64_t sat_add(uint64_t a, uint64_t b)
{
  return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

/* ---- hash tables ---- */

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

static struct knode *table_find(struct table *t, uint64_t h, const char *key, size_t klen)
{
  for(struct kcr_hnode *hn = kcr_htab_lookup(&t->t, h); hn;
      hn = kcr_htab_lookup_next(hn)) {
    struct knode *n = KCR_HTAB_ENTRY(hn, struct knode, hn);
    t->visits++;
    if(n->klen == klen && !memcmp(n->key, key, klen))
      return n;
  }
  return NULL;
}

/* ---- recorder state ---- */

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

static struct entry *entry_of(struct kcr_hnode *n)
{
  return KCR_HTAB_ENTRY(n, struct entry, h.hn);
}

static struct entry *entry_of_unsent(struct knode *n)
{
  return n ? KCR_HTAB_ENTRY(n, struct entry, u) : NULL;
}

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

/* ---- pure helpers ---- */

static bool empty(const char *s) { return !s || !*s; }
static const char *nz(const char *s) { return s ? s : ""; }

kcr_err kcr_event_validate(const char *type, const char *reason, const char *action)
{
  size_t n;
  if(!type || (strcmp(type, KCR_EVENT_NORMAL) && strcmp(type, KCR_EVENT_WARNING)))
    return KCR_EINVAL;
  n = reason ? strlen(reason) : 0;
  if(n == 0 || n > KCR_EVENT_REASON_MAX)
    return KCR_EINVAL;
  n = action ? strlen(action) : 0;
  if(n == 0 || n > KCR_EVENT_ACTION_MAX)
    return KCR_EINVAL;
  return KCR_OK;
}

size_t kcr_event_note_cut(const char *s, size_t len, size_t max)
{
  size_t cut = max;
  if(len <= max)
    return len;
  /* s[cut] is the first byte left out; a continuation byte there means the
   * sequence it belongs to started before cut: leave all of it out. */
  while(cut > 0 && ((unsigned char)s[cut] & 0xC0) == 0x80)
    cut--;
  return cut;
}

/* The fields of the isomorphic key, in key order (note not yet cut). */
static void key_fields(const struct kcr_event *ev, const char *f[NKEY_FIELDS])
{
  const struct kcr_event_ref *r = ev->regarding;
  f[0] = nz(r ? r->kind : NULL);
  f[1] = nz(r ? r->ns : NULL);
  f[2] = nz(r ? r->name : NULL);
  f[3] = nz(r ? r->uid : NULL);
  f[4] = nz(ev->reason);
  f[5] = nz(ev->type);
  f[6] = nz(ev->action);
  f[NOTE_FIELD] = nz(ev->note);
}

bool kcr_event_isomorphic(const struct kcr_event *a, const struct kcr_event *b)
{
  const char *fa[NKEY_FIELDS], *fb[NKEY_FIELDS];
  key_fields(a, fa);
  key_fields(b, fb);
  for(int i = 0; i < NKEY_FIELDS; i++) {
    size_t la = strlen(fa[i]), lb = strlen(fb[i]);
    if(i == NOTE_FIELD) { /* notes compare as sent: cut to the limit */
      la = kcr_event_note_cut(fa[i], la, KCR_EVENT_NOTE_MAX);
      lb = kcr_event_note_cut(fb[i], lb, KCR_EVENT_NOTE_MAX);
    }
    if(la != lb || memcmp(fa[i], fb[i], la))
      return false;
  }
  return true;
}

void kcr__event_bucket_init(struct kcr__event_bucket *b, int burst, uint64_t now_ms)
{
  b->tokens = burst;
  b->last_ms = now_ms;
}

static double bucket_level(const struct kcr__event_bucket *b, int burst,
                           uint64_t refill_ms, uint64_t now_ms)
{
  double t = b->tokens;
  if(now_ms > b->last_ms)
    t += refill_ms ? (double)(now_ms - b->last_ms) / (double)refill_ms : (double)burst;
  return t > burst ? burst : t;
}

bool kcr__event_bucket_spend(struct kcr__event_bucket *b, int burst, uint64_t refill_ms,
                             uint64_t now_ms)
{
  b->tokens = bucket_level(b, burst, refill_ms, now_ms);
  if(now_ms > b->last_ms)
    b->last_ms = now_ms;
  if(b->tokens < 1.0)
    return false;
  b->tokens -= 1.0;
  return true;
}

struct kcr_event_ref kcr_event_ref_from_obj(const kcr_obj *o, const char *api_version,
                                            const char *kind)
{
  struct kcr_event_ref r = {.api_version = api_version, .kind = kind};
  if(o) {
    r.ns = kcr_obj_ns(o);
    r.name = kcr_obj_name(o);
    r.uid = kcr_obj_uid(o);
    r.resource_version = kcr_obj_rv(o);
  }
  return r;
}

static bool is_alnum_lower(char c)
{
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}
static bool is_alnum(char c) { return is_alnum_lower(c) || (c >= 'A' && c <= 'Z'); }

/* RFC 1123 subdomain, as metadata.name of an Event must be. */
static bool dns_subdomain(const char *s, size_t n)
{
  size_t i = 0;
  if(n == 0 || n > 253)
    return false;
  while(i < n) { /* one label: alnum ([-a-z0-9]* alnum)? */
    size_t start = i;
    while(i < n && s[i] != '.') {
      if(!is_alnum_lower(s[i]) && s[i] != '-')
        return false;
      i++;
    }
    if(i == start || s[start] == '-' || s[i - 1] == '-')
      return false;
    if(i < n && ++i == n) /* trailing dot */
      return false;
  }
  return true;
}

/* A qualified name ([prefix/]name), as reportingController must be. */
static bool qualified_name(const char *s)
{
  const char *slash, *name;
  size_t n;
  if(empty(s))
    return false;
  slash = strchr(s, '/');
  name = slash ? slash + 1 : s;
  if(slash && (strchr(name, '/') || !dns_subdomain(s, (size_t)(slash - s))))
    return false;
  n = strlen(name);
  if(n == 0 || n > 63 || !is_alnum(name[0]) || !is_alnum(name[n - 1]))
    return false;
  for(size_t i = 0; i < n; i++)
    if(!is_alnum(name[i]) && name[i] != '-' && name[i] != '_' && name[i] != '.')
      return false;
  return true;
}

/* ---- clocks and waiting ---- */

static uint64_t default_clock(void *ud)
{
  (void)ud;
  return kcr_time_mono_ms();
}

static uint64_t now_ms(const kcr_recorder *r) { return r->clock(r->clock_ud); }

static void cond_wait_ms(pthread_cond_t *c, pthread_mutex_t *m, uint64_t ms)
{
  struct timespec ts = kcr_time_mono_after(ms);
  pthread_cond_timedwait(c, m, &ts);
}

/* ---- entries ---- */

static void uuid_name(char out[37], int64_t ns)
{
  unsigned char b[16];
  if(getrandom(b, sizeof(b), 0) != (ssize_t)sizeof(b)) { /* time and pid then */
    uint64_t x[2] = {(uint64_t)ns, (uint64_t)getpid()};
    memcpy(b, x, sizeof(b));
  }
  b[6] = (unsigned char)((b[6] & 0x0F) | 0x40); /* version 4 */
  b[8] = (unsigned char)((b[8] & 0x3F) | 0x80); /* variant 10 */
  snprintf(out, 37,
           "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
           b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12],
           b[13], b[14], b[15]);
}

/* "<regarding-name>.<hex unix ns>" (client-go's GenerateEventName), or a
 * UUID when that is not a valid name. ns is made unique per recorder. */
static void event_name(kcr_recorder *r, const char *rname, const struct timespec *wall,
                       char *out, size_t cap)
{
  int64_t ns = (int64_t)wall->tv_sec * 1000000000LL + wall->tv_nsec;
  int n;
  if(ns <= r->last_name_ns)
    ns = r->last_name_ns + 1;
  r->last_name_ns = ns;
  n = snprintf(out, cap, "%s.%llx", rname, (unsigned long long)ns);
  if(n < 0 || (size_t)n >= cap || !dns_subdomain(out, (size_t)n))
    uuid_name(out, ns);
}

/* Makes an entry for a new event: key bytes first, then the other strings.
 * Not linked anywhere yet. */
static struct entry *entry_new(kcr_recorder *r, const struct kcr_event *ev,
                               const struct kcr_buf *key, uint64_t h,
                               const struct timespec *wall, uint64_t now)
{
  const struct kcr_event_ref *rg = ev->regarding;
  const char *ns = empty(rg->ns) ? "default" : rg->ns;
  const char *extra[4];
  char name[320];
  size_t len = key->len, off;
  struct entry *e;
  const char **kf[NKEY_FIELDS];

  event_name(r, rg->name, wall, name, sizeof(name));
  extra[0] = nz(rg->api_version);
  extra[1] = nz(rg->resource_version);
  extra[2] = ns;
  extra[3] = name;
  for(int i = 0; i < 4; i++)
    len += strlen(extra[i]) + 1;
  e = calloc(1, sizeof(*e) + len);
  if(!e)
    return NULL;
  e->size = sizeof(*e) + len;
  memcpy(e->data, key->ptr, key->len);
  e->h.hn.hash = h;
  e->h.key = e->data;
  e->h.klen = key->len;
  kf[0] = &e->r_kind, kf[1] = &e->r_ns, kf[2] = &e->r_name, kf[3] = &e->r_uid;
  kf[4] = &e->reason, kf[5] = &e->type, kf[6] = &e->action, kf[7] = &e->note;
  off = 0;
  for(int i = 0; i < NKEY_FIELDS; i++) {
    *kf[i] = e->data + off;
    off += strlen(e->data + off) + 1;
  }
  e->u.key = e->data; /* object, reason, type: up to the action */
  e->u.klen = (size_t)(e->action - e->data);
  e->r_api = e->data + off;
  e->r_rv = e->r_api + strlen(extra[0]) + 1;
  e->ns = e->r_rv + strlen(extra[1]) + 1;
  e->name = e->ns + strlen(extra[2]) + 1;
  for(int i = 0; i < 4; i++) {
    size_t n = strlen(extra[i]) + 1;
    memcpy(e->data + off, extra[i], n);
    off += n;
  }
  kcr_time_format_micro(wall, e->event_time);
  e->count = 1;
  e->last_observed = *wall;
  e->last_seen_ms = now;
  e->state = E_QUEUED;
  return e;
}

/* An entry nobody needs any more: on the server with its count written,
 * not in use, not seen for the aggregation window. */
static bool entry_expired(const kcr_recorder *r, const struct entry *e, uint64_t now)
{
  return e->state == E_CREATED && !e->busy && e->count == e->written &&
         now >= e->last_seen_ms && now - e->last_seen_ms >= r->window_ms;
}

static bool entry_dirty(const struct entry *e)
{
  return e->state == E_CREATED && e->count > e->written;
}

/* Keeps ndirty (I5) after e's dirtiness may have changed from was. */
static void dirty_update(kcr_recorder *r, const struct entry *e, bool was)
{
  bool is = entry_dirty(e);
  if(is && !was)
    r->ndirty++;
  if(!is && was) {
    KCR_ASSERT(r->ndirty > 0);
    r->ndirty--;
  }
}

/* ---- the age list (I10) ---- */

static void age_unlink(kcr_recorder *r, struct entry *e)
{
  if(!e->aged)
    return;
  if(e->anewer)
    e->anewer->aolder = e->aolder;
  else
    r->age_newest = e->aolder;
  if(e->aolder)
    e->aolder->anewer = e->anewer;
  else
    r->age_oldest = e->anewer;
  e->anewer = e->aolder = NULL;
  e->aged = false;
}

/* e was just seen (last_seen_ms = now): it expires last. */
static void age_touch(kcr_recorder *r, struct entry *e)
{
  age_unlink(r, e);
  e->aolder = r->age_newest;
  if(r->age_newest)
    r->age_newest->anewer = e;
  else
    r->age_oldest = e;
  r->age_newest = e;
  e->aged = true;
}

/* e, off the list since gc() found its window passed, may expire now: it
 * goes first, where the next gc() looks. */
static void age_relink_oldest(kcr_recorder *r, struct entry *e)
{
  if(e->aged)
    return;
  e->anewer = r->age_oldest;
  if(r->age_oldest)
    r->age_oldest->aolder = e;
  else
    r->age_newest = e;
  r->age_oldest = e;
  e->aged = true;
}

static void entry_remove(kcr_recorder *r, struct entry *e)
{
  KCR_ASSERT(!e->busy && e->where == W_NONE && !entry_dirty(e)); /* I2 */
  age_unlink(r, e);
  kcr_htab_remove(&r->events.t, &e->h.hn);
  free(e);
}

/* ---- the senders' schedule: createq, patchq, timers ---- */

static void fifo_push(struct fifo *q, struct entry *e)
{
  e->qnext = NULL;
  e->qprev = q->tail;
  if(q->tail)
    q->tail->qnext = e;
  else
    q->head = e;
  q->tail = e;
  q->n++;
}

static struct entry *fifo_pop(struct fifo *q)
{
  struct entry *e = q->head;
  if(e) {
    q->head = e->qnext;
    if(q->head)
      q->head->qprev = NULL;
    else
      q->tail = NULL;
    e->qnext = NULL;
    q->n--;
  }
  return e;
}

/* Puts e, linked nowhere, in old's place; old leaves the queue. */
static void fifo_replace(struct fifo *q, struct entry *old, struct entry *e)
{
  e->qprev = old->qprev;
  e->qnext = old->qnext;
  if(e->qprev)
    e->qprev->qnext = e;
  else
    q->head = e;
  if(e->qnext)
    e->qnext->qprev = e;
  else
    q->tail = e;
  old->qnext = old->qprev = NULL;
}

/* When e's next write may go: a POST after its backoff; a series PATCH
 * also series_flush_ms after the last write, unless someone flushes. */
static uint64_t due_at(const kcr_recorder *r, const struct entry *e)
{
  uint64_t due = e->not_before_ms, interval;
  if(e->state == E_CREATED && r->nflush == 0) {
    interval = sat_add(e->last_write_ms, r->flush_ms);
    if(interval > due)
      due = interval;
  }
  return due;
}

/* Room for every entry on the heap, so that schedule() never allocates. */
static kcr_err timers_reserve(struct timers *t, size_t n)
{
  struct entry **a;
  size_t cap = t->cap ? t->cap : 64;

  if(n <= t->cap)
    return KCR_OK;
  while(cap < n)
    cap *= 2;
  a = realloc(t->a, cap * sizeof(*a));
  if(!a)
    return KCR_ENOMEM;
  t->a = a;
  t->cap = cap;
  return KCR_OK;
}

/* Moves a[i] up to its place; returns the slot it ends in. */
static size_t timers_up(kcr_recorder *r, size_t i)
{
  struct entry **a = r->timers.a, *e = a[i];
  while(i > 0) {
    size_t parent = (i - 1) / 2;
    r->events.visits++;
    if(a[parent]->due <= e->due)
      break;
    a[i] = a[parent];
    i = parent;
  }
  a[i] = e;
  return i;
}

/* Moves a[i] down to its place. */
static void timers_down(kcr_recorder *r, size_t i)
{
  struct entry **a = r->timers.a, *e = a[i];
  size_t n = r->timers.n;
  for(;;) {
    size_t c = 2 * i + 1;
    if(c >= n)
      break;
    if(c + 1 < n && a[c + 1]->due < a[c]->due)
      c++;
    r->events.visits++;
    if(e->due <= a[c]->due)
      break;
    a[i] = a[c];
    i = c;
  }
  a[i] = e;
}

/* Adds e, due at due; true if it is now the first timer. */
static bool timers_push(kcr_recorder *r, struct entry *e, uint64_t due)
{
  KCR_ASSERT(r->timers.n < r->timers.cap); /* I6 */
  e->due = due;
  e->where = W_TIMERS;
  r->timers.a[r->timers.n++] = e;
  return timers_up(r, r->timers.n - 1) == 0;
}

static struct entry *timers_pop(kcr_recorder *r)
{
  struct entry *e = r->timers.a[0];
  r->timers.a[0] = r->timers.a[--r->timers.n];
  if(r->timers.n)
    timers_down(r, 0);
  e->where = W_NONE;
  return e;
}

/* Recomputes every key (a flush started: series stop waiting for
 * series_flush_ms) and rebuilds the heap: O(timers), once per flush. */
static void timers_rekey(kcr_recorder *r)
{
  for(size_t i = 0; i < r->timers.n; i++) {
    r->events.visits++;
    r->timers.a[i]->due = due_at(r, r->timers.a[i]);
  }
  for(size_t i = r->timers.n / 2; i-- > 0;)
    timers_down(r, i);
}

/* Whom schedule() says to wake. */
enum wake { WAKE_NONE, WAKE_ONE, WAKE_ALL };

/* Whether the writes due now outnumber the senders writing: each of those
 * takes the next one when its write is done, so a sender is woken only
 * for a write none of them would get to next. */
static bool more_due_than_busy(const kcr_recorder *r)
{
  return r->createq.n + r->patchq.n > (size_t)r->ninflight;
}

static void wake_up(kcr_recorder *r, enum wake w)
{
  if(w == WAKE_ONE && more_due_than_busy(r))
    pthread_cond_signal(&r->wake);
  else if(w == WAKE_ALL)
    pthread_cond_broadcast(&r->wake);
}

/* Puts e where the senders will find it when it needs a write (I1): on
 * createq or patchq when the write is due at now, else on the timers.
 * Returns whom to wake: one sender for a write due now, all of them for a
 * new earliest timer (the timekeeper among them sleeps until a later one),
 * nobody otherwise. */
static enum wake schedule(kcr_recorder *r, struct entry *e, uint64_t now)
{
  uint64_t due;

  if(e->busy || e->where != W_NONE || (e->state != E_QUEUED && !entry_dirty(e)))
    return WAKE_NONE;
  due = due_at(r, e);
  if(due > now)
    return timers_push(r, e, due) ? WAKE_ALL : WAKE_NONE;
  if(e->state == E_QUEUED) {
    fifo_push(&r->createq, e);
    e->where = W_CREATEQ;
  } else {
    fifo_push(&r->patchq, e);
    e->where = W_PATCHQ;
  }
  return WAKE_ONE;
}

/* Moves the timers due at now to createq and patchq; a key that turns out
 * early (a flush ended since) goes back with its real one. */
static void timers_expire(kcr_recorder *r, uint64_t now)
{
  while(r->timers.n && r->timers.a[0]->due <= now)
    schedule(r, timers_pop(r), now);
}

/* ---- spam limit ---- */

static void lru_unlink(kcr_recorder *r, struct spam *s)
{
  if(s->newer)
    s->newer->older = s->older;
  else
    r->spam_newest = s->older;
  if(s->older)
    s->older->newer = s->newer;
  else
    r->spam_oldest = s->newer;
  s->newer = s->older = NULL;
}

static void lru_push_newest(kcr_recorder *r, struct spam *s)
{
  s->older = r->spam_newest;
  s->newer = NULL;
  if(r->spam_newest)
    r->spam_newest->newer = s;
  else
    r->spam_oldest = s;
  r->spam_newest = s;
}

static void spam_remove(kcr_recorder *r, struct spam *s)
{
  lru_unlink(r, s);
  kcr_htab_remove(&r->spam.t, &s->h.hn);
  free(s);
}

/* When the least recently used bucket is surely full again (spam_ttl_ms
 * after its last use, whatever tokens it had left); UINT64_MAX if none. */
static uint64_t spam_expiry(const kcr_recorder *r)
{
  return r->spam_oldest ? sat_add(r->spam_oldest->b.last_ms, r->spam_ttl_ms) : UINT64_MAX;
}

/* Once a tick: forgets the buckets that are surely full again (as good as
 * new), from the least recently used: the LRU order is the order of last
 * use (the clock is monotonic), so it stops at the first that is not, and
 * every bucket it looks at but one is forgotten. A bucket that refilled
 * sooner (it was not drained) stays until then: forgetting it later
 * changes nothing that is dropped, and SPAM_MAX_KEYS bounds them. */
static void spam_gc(kcr_recorder *r, uint64_t now)
{
  while(r->spam_oldest && spam_expiry(r) <= now) {
    r->spam.visits++;
    KCR_ASSERT(bucket_level(&r->spam_oldest->b, r->burst, r->refill_ms, now) >= r->burst);
    spam_remove(r, r->spam_oldest);
  }
  if(r->spam_oldest)
    r->spam.visits++; /* the one that stopped it */
}

/* Takes a token for (object, reason): key is klen bytes, the first
 * SPAM_FIELDS fields of the event's key. *log_start is set when this call
 * starts a run of drops. Out of memory: the event passes. O(1) expected:
 * one lookup, LRU moves, at most one eviction (the least recently used
 * bucket, as client-go's LRU cache) when SPAM_MAX_KEYS are in use. */
static bool spam_take(kcr_recorder *r, const char *key, size_t klen, uint64_t now,
                      bool *log_start)
{
  struct spam *s;
  uint64_t h;
  bool ok;

  *log_start = false;
  if(r->burst < 0)
    return true;
  h = kcr_hash(key, klen);
  s = (struct spam *)table_find(&r->spam, h, key, klen);
  if(s) {
    r->spam.visits++;
    lru_unlink(r, s);
  } else {
    /* Room first (at the cap, an eviction makes it), so the insert cannot
     * fail once a bucket has been evicted. */
    size_t room = r->spam.t.n < SPAM_MAX_KEYS ? r->spam.t.n + 1 : SPAM_MAX_KEYS;
    if(kcr_htab_reserve(&r->spam.t, room) || !(s = calloc(1, sizeof(*s) + klen)))
      return true;
    if(r->spam.t.n >= SPAM_MAX_KEYS) {
      r->spam.visits++;
      spam_remove(r, r->spam_oldest);
    }
    memcpy(s->data, key, klen);
    s->h.key = s->data;
    s->h.klen = klen;
    kcr__event_bucket_init(&s->b, r->burst, now);
    kcr_htab_insert(&r->spam.t, &s->h.hn, h); /* reserved: cannot fail */
  }
  lru_push_newest(r, s);
  KCR_ASSERT(r->spam.t.n <= SPAM_MAX_KEYS); /* I7 */
  ok = kcr__event_bucket_spend(&s->b, r->burst, r->refill_ms, now);
  if(!ok && !s->dropping)
    *log_start = true;
  s->dropping = !ok;
  return ok;
}

/* ---- recording (caller threads) ---- */

enum outcome { O_QUEUED, O_AGGREGATED, O_DROP_FULL, O_DROP_SPAM };

static void count_metric(kcr_recorder *r, const char *type, const char *reason,
                         const char *result)
{
  kcr_metric_inc(r->m_total, (const char *const[]){type, reason, result}, 1);
}

/* The isomorphic key (key_fields order, the note cut to note_len) and the
 * lengths of its two prefixes: the spam key and the coalescing key. */
static kcr_err build_key(const struct kcr_event *ev, size_t note_len, struct kcr_buf *key,
                         size_t *spam_len, size_t *unsent_len)
{
  const char *f[NKEY_FIELDS];
  key_fields(ev, f);
  for(int i = 0; i < NKEY_FIELDS; i++) {
    size_t n = i == NOTE_FIELD ? note_len : strlen(f[i]);
    if(i == SPAM_FIELDS)
      *spam_len = key->len;
    if(i == UNSENT_FIELDS)
      *unsent_len = key->len;
    kcr_buf_append(key, f[i], n);
    kcr_buf_append(key, "", 1);
  }
  return kcr_buf_err(key);
}

/* Room for one more entry in the tables and on the heap, so that linking
 * it cannot fail (I6). */
static kcr_err reserve(kcr_recorder *r)
{
  if(timers_reserve(&r->timers, r->events.t.n + 1) ||
     kcr_htab_reserve(&r->events.t, r->events.t.n + 1) ||
     kcr_htab_reserve(&r->unsent.t, r->unsent.t.n + 1))
    return KCR_ENOMEM;
  return KCR_OK;
}

/* Links a new event's entry (room reserved): the events and unsent tables,
 * createq. */
static enum wake entry_add(kcr_recorder *r, struct entry *e, uint64_t now)
{
  kcr_htab_insert(&r->events.t, &e->h.hn, e->h.hn.hash);
  kcr_htab_insert(&r->unsent.t, &e->u.hn, e->u.hn.hash);
  age_touch(r, e);
  r->nqueued++;
  r->qbytes += e->size; /* I9 */
  return schedule(r, e, now);
}

/* e, a new event's entry, takes the place of old, a new event no sender
 * has taken yet with the same object, reason and type (I8): one Event for
 * both, with e's note and action, old's eventTime, the occurrences of both
 * in its count, and a note that says so. O(1); frees old. */
static void coalesce(kcr_recorder *r, struct entry *old, struct entry *e)
{
  KCR_ASSERT(old->where == W_CREATEQ && !old->busy && !old->tried); /* I8 */
  e->count = old->count < SERIES_MAX ? old->count + 1 : SERIES_MAX;
  e->combined = true;
  memcpy(e->event_time, old->event_time, sizeof(e->event_time));
  fifo_replace(&r->createq, old, e);
  e->where = W_CREATEQ;
  kcr_htab_remove(&r->unsent.t, &old->u.hn);
  kcr_htab_remove(&r->events.t, &old->h.hn);
  age_unlink(r, old);
  age_touch(r, e);
  r->qbytes = r->qbytes - old->size + e->size;
  free(old);
  kcr_htab_insert(&r->events.t, &e->h.hn, e->h.hn.hash); /* one out, one in */
  kcr_htab_insert(&r->unsent.t, &e->u.hn, e->u.hn.hash);
}

/* A new event (no entry with its key): coalesced with an unsent one, queued,
 * or dropped. Takes e (frees it unless it is kept). */
static enum outcome add_new(kcr_recorder *r, struct entry *e, size_t spam_len,
                            uint64_t now, enum wake *wake, bool *log_spam)
{
  struct entry *old =
      entry_of_unsent(table_find(&r->unsent, e->u.hn.hash, e->h.key, e->u.klen));
  size_t held = old ? old->size : 0;

  if(r->qbytes - held + e->size > r->budget) {
    free(e);
    return O_DROP_FULL;
  }
  if(old) {
    coalesce(r, old, e);
    return O_AGGREGATED;
  }
  if(!spam_take(r, e->h.key, spam_len, now, log_spam)) {
    free(e);
    return O_DROP_SPAM;
  }
  *wake = entry_add(r, e, now);
  return O_QUEUED;
}

kcr_err kcr_recorder_event(kcr_recorder *r, const struct kcr_event *ev)
{
  const struct kcr_event_ref *rg = ev ? ev->regarding : NULL;
  struct kcr_buf key = KCR_BUF_INIT;
  struct timespec wall;
  struct entry *e;
  enum outcome oc = O_QUEUED;
  enum wake wake = WAKE_NONE;
  bool log_full = false, log_spam = false;
  size_t spam_len = 0, unsent_len = 0, queued = 0;
  uint64_t h, now;
  kcr_err rc;

  if(!r || !rg || empty(rg->kind) || empty(rg->name) ||
     kcr_event_validate(ev->type, ev->reason, ev->action))
    return KCR_EINVAL;
  rc = build_key(
      ev, kcr_event_note_cut(nz(ev->note), strlen(nz(ev->note)), KCR_EVENT_NOTE_MAX),
      &key, &spam_len, &unsent_len);
  if(rc)
    goto out;
  h = kcr_hash(key.ptr, key.len);
  clock_gettime(CLOCK_REALTIME, &wall);

  pthread_mutex_lock(&r->mu);
  now = now_ms(r);
  e = (struct entry *)table_find(&r->events, h, key.ptr, key.len);
  if(e && entry_expired(r, e, now)) {
    entry_remove(r, e);
    e = NULL;
  }
  if(e) {
    bool was_dirty = entry_dirty(e);
    if(e->count < SERIES_MAX)
      e->count++;
    e->last_observed = wall;
    e->last_seen_ms = now;
    age_touch(r, e);
    dirty_update(r, e, was_dirty);
    wake = schedule(r, e, now); /* a series that just became dirty */
    oc = O_AGGREGATED;
  } else if(reserve(r) || !(e = entry_new(r, ev, &key, h, &wall, now))) {
    rc = KCR_ENOMEM;
  } else {
    e->u.hn.hash = kcr_hash(key.ptr, unsent_len);
    oc = add_new(r, e, spam_len, now, &wake, &log_spam);
  }
  if(!rc && oc == O_AGGREGATED)
    r->st.aggregated++;
  if(!rc && (oc == O_DROP_FULL || oc == O_DROP_SPAM))
    r->st.dropped++;
  if(!rc && oc == O_DROP_FULL) {
    log_full = !r->full_logged;
    r->full_logged = true;
    queued = r->qbytes;
  }
  wake_up(r, wake);
  pthread_mutex_unlock(&r->mu);

  if(rc)
    goto out;
  if(oc == O_AGGREGATED)
    count_metric(r, ev->type, ev->reason, "aggregated");
  else if(oc != O_QUEUED)
    count_metric(r, ev->type, ev->reason, "dropped");
  if(log_full)
    KCR_LOG(KCR_LOG_WARN, "event queue full: dropping new events until it drains",
            KCR_I("queueBytes", r->budget), KCR_I("queuedBytes", queued),
            KCR_S("kind", rg->kind), KCR_S("namespace", nz(rg->ns)),
            KCR_S("name", rg->name), KCR_S("reason", ev->reason));
  if(log_spam)
    KCR_LOG(KCR_LOG_WARN,
            "event spam limit reached: dropping events for this object "
            "and reason until tokens refill",
            KCR_S("kind", rg->kind), KCR_S("namespace", nz(rg->ns)),
            KCR_S("name", rg->name), KCR_S("reason", ev->reason),
            KCR_I("burst", r->burst), KCR_I("refillMs", r->refill_ms));
out:
  kcr_buf_cleanup(&key);
  return rc;
}

kcr_err kcr_recorder_veventf(kcr_recorder *r, const struct kcr_event_ref *regarding,
                             const char *type, const char *reason, const char *action,
                             const char *fmt, va_list ap)
{
  char note[KCR_EVENT_NOTE_MAX + 2]; /* one byte past the limit shows a split */
  struct kcr_event ev = {.regarding = regarding,
                         .type = type,
                         .reason = reason,
                         .action = action,
                         .note = note};

  note[0] = '\0';
  if(fmt && vsnprintf(note, sizeof(note), fmt, ap) < 0)
    return KCR_EINVAL;
  return kcr_recorder_event(r, &ev); /* cuts the note */
}

kcr_err kcr_recorder_eventf(kcr_recorder *r, const struct kcr_event_ref *regarding,
                            const char *type, const char *reason, const char *action,
                            const char *fmt, ...)
{
  va_list ap;
  kcr_err rc;
  va_start(ap, fmt);
  rc = kcr_recorder_veventf(r, regarding, type, reason, action, fmt, ap);
  va_end(ap);
  return rc;
}

/* ---- bodies ----
 *
 * JSON text written directly, member by member, as kcr_json_to_text would
 * print the tree (the same members in the same order): no tree to build
 * and free for each Event. Names are constants with nothing to escape;
 * values go through kcr__json_put_string. */

/* Appends "name":"v", after a comma unless it is the object's first. */
static void put_str(struct kcr_buf *b, bool *more, const char *name, const char *v)
{
  kcr_buf_puts(b, *more ? ",\"" : "\"");
  *more = true;
  kcr_buf_puts(b, name);
  kcr_buf_puts(b, "\":");
  kcr__json_put_string(b, v);
}

/* put_str, only when v is not empty. */
static void put_opt(struct kcr_buf *b, bool *more, const char *name, const char *v)
{
  if(*v)
    put_str(b, more, name, v);
}

/* The note as sent: a combined Event's says so, cut to the limit. False
 * when it cannot be written (nothing appended). */
static bool put_note(struct kcr_buf *b, bool *more, const struct entry *e)
{
  char buf[sizeof(COMBINED) + KCR_EVENT_NOTE_MAX];
  int n;

  if(!e->combined) {
    put_opt(b, more, "note", e->note);
    return true;
  }
  n = snprintf(buf, sizeof(buf), "%s%s", COMBINED, e->note);
  if(n < 0)
    return false;
  if((size_t)n >= sizeof(buf))
    n = (int)sizeof(buf) - 1;
  buf[kcr_event_note_cut(buf, (size_t)n, KCR_EVENT_NOTE_MAX)] = '\0';
  put_str(b, more, "note", buf);
  return true;
}

/* Appends "series":{"count":N,"lastObservedTime":"..."}. */
static void put_series(struct kcr_buf *b, bool *more, const struct entry *e)
{
  char t[KCR_RFC3339_MICRO_LEN];
  bool in = false;

  kcr_time_format_micro(&e->last_observed, t);
  kcr_buf_printf(b, "%s\"series\":{\"count\":%llu", *more ? "," : "",
                 (unsigned long long)e->count);
  *more = true;
  in = true;
  put_str(b, &in, "lastObservedTime", t);
  kcr_buf_puts(b, "}");
}

/* The text of the whole Event, with its series when it has repeats
 * already; NULL when out of memory. */
static char *event_body(const kcr_recorder *r, const struct entry *e)
{
  struct kcr_buf b = KCR_BUF_INIT;
  bool more = false, in = false, ok;

  kcr_buf_reserve(&b, 512); /* an Event at once, not step by step */
  kcr_buf_puts(&b, "{");
  put_str(&b, &more, "apiVersion", "events.k8s.io/v1");
  put_str(&b, &more, "kind", "Event");
  kcr_buf_puts(&b, ",\"metadata\":{");
  put_str(&b, &in, "name", e->name);
  put_str(&b, &in, "namespace", e->ns);
  kcr_buf_puts(&b, "}");
  put_str(&b, &more, "eventTime", e->event_time);
  put_str(&b, &more, "reportingController", r->controller);
  put_str(&b, &more, "reportingInstance", r->instance);
  put_str(&b, &more, "action", e->action);
  put_str(&b, &more, "reason", e->reason);
  ok = put_note(&b, &more, e);
  put_str(&b, &more, "type", e->type);
  kcr_buf_puts(&b, ",\"regarding\":{");
  in = false;
  put_opt(&b, &in, "apiVersion", e->r_api);
  put_str(&b, &in, "kind", e->r_kind);
  put_opt(&b, &in, "namespace", e->r_ns);
  put_str(&b, &in, "name", e->r_name);
  put_opt(&b, &in, "uid", e->r_uid);
  put_opt(&b, &in, "resourceVersion", e->r_rv);
  kcr_buf_puts(&b, "}");
  if(e->count >= 2)
    put_series(&b, &more, e);
  kcr_buf_puts(&b, "}");
  if(!ok || kcr_buf_err(&b)) {
    kcr_buf_cleanup(&b);
    return NULL;
  }
  return kcr_buf_take(&b);
}

/* The text of a merge patch of the series; NULL when out of memory. */
static char *series_body(const struct entry *e)
{
  struct kcr_buf b = KCR_BUF_INIT;
  bool more = false;

  kcr_buf_puts(&b, "{");
  put_series(&b, &more, e);
  kcr_buf_puts(&b, "}");
  if(kcr_buf_err(&b)) {
    kcr_buf_cleanup(&b);
    return NULL;
  }
  return kcr_buf_take(&b);
}

/* ---- the senders ---- */

struct job {
  struct entry *e;
  enum kcr_event_op op;
  char *body;     /* its text; NULL if it could not be built */
  uint64_t count; /* the count the body carries */
};

static bool paused(const kcr_recorder *r, uint64_t now) { return now < r->paused_until; }

/* Picks the next write due at now, marks its entry busy; false if none
 * (or while paused). New events first, in the order they became due, then
 * series. */
static bool pick(kcr_recorder *r, uint64_t now, struct job *j)
{
  struct entry *e;

  if(paused(r, now))
    return false;
  timers_expire(r, now);
  if((e = fifo_pop(&r->createq))) {
    r->events.visits++;
    KCR_ASSERT(e->state == E_QUEUED && e->where == W_CREATEQ);
    e->where = W_NONE;
    r->nqueued--;
    if(!e->tried) { /* no longer open to coalescing (I8) */
      kcr_htab_remove(&r->unsent.t, &e->u.hn);
      e->tried = true;
    }
    j->op = KCR_EVENT_CREATE;
    j->body = event_body(r, e);
  } else {
    while((e = fifo_pop(&r->patchq))) {
      r->events.visits++;
      KCR_ASSERT(entry_dirty(e) && e->where == W_PATCHQ);
      e->where = W_NONE;
      if(due_at(r, e) <= now)
        break;
      schedule(r, e, now); /* made due by a flush that has ended: wait */
    }
    if(!e)
      return false;
    j->op = KCR_EVENT_PATCH;
    j->body = series_body(e);
  }
  e->busy = true;
  r->ninflight++;
  j->e = e;
  j->count = e->count;
  return true;
}

/* When the oldest entry on the age list has been idle for the window;
 * UINT64_MAX if none. */
static uint64_t age_expiry(const kcr_recorder *r)
{
  return r->age_oldest ? sat_add(r->age_oldest->last_seen_ms, r->window_ms) : UINT64_MAX;
}

/* When gc() has something to do: the first expiry, but not before a tick
 * since the last pass; UINT64_MAX when nothing is remembered - an idle
 * recorder does not tick. */
static uint64_t gc_due(const kcr_recorder *r)
{
  uint64_t first = age_expiry(r), spam = spam_expiry(r);
  if(spam < first)
    first = spam;
  if(first == UINT64_MAX)
    return UINT64_MAX;
  return first > r->last_gc_ms + GC_TICK_MS ? first : r->last_gc_ms + GC_TICK_MS;
}

/* At most once a tick: forgets expired entries and refilled spam buckets.
 * Both lists are in expiry order (I10, I7), so it walks only what has
 * expired, plus one: O(1) when nothing has. An entry whose window has
 * passed but that is not clean (a write pending or under way) leaves the
 * list; finish() puts it back first, to be looked at again. */
static void gc(kcr_recorder *r, uint64_t now)
{
  struct entry *e;

  while((e = r->age_oldest) && age_expiry(r) <= now) {
    r->events.visits++;
    if(entry_expired(r, e, now)) {
      KCR_ASSERT(e->where == W_NONE); /* I2 */
      entry_remove(r, e);
    } else {
      age_unlink(r, e);
    }
  }
  if(r->age_oldest)
    r->events.visits++; /* the one that stopped it */
  if(r->burst >= 0)
    spam_gc(r, now);
  r->last_gc_ms = now;
  r->gc_runs++;
}

/* When there is something to do next (monotonic ms), after pick() found
 * nothing due: the end of a pause, else the first timer, or gc() if
 * sooner; UINT64_MAX for nothing. */
static uint64_t next_deadline(const kcr_recorder *r, uint64_t now)
{
  uint64_t next = gc_due(r);
  uint64_t first = paused(r, now) ? r->paused_until
                   : r->timers.n  ? r->timers.a[0]->due
                                  : UINT64_MAX;
  return first < next ? first : next;
}

static bool quiescent(const kcr_recorder *r)
{
  return !r->nqueued && !r->ninflight && !r->ndirty; /* I5 */
}

static bool retryable(kcr_err rc)
{
  switch(rc) {
  case KCR_ENOMEM:
  case KCR_ETRANSPORT:
  case KCR_EUNCERTAIN: /* a create again finds it (V_FOUND): its name is fixed */
  case KCR_ETIMEDOUT:
  case KCR_EUNAUTHORIZED:
  case KCR_EFORBIDDEN:
  case KCR_EUNAVAILABLE:
  case KCR_ESERVER:
  case KCR_EHTTP:
  case KCR_EPARSE: return true;
  default: return false;
  }
}

/* The delay before try number attempts+1: initial * 2^(attempts-1), capped,
 * plus up to 25% jitter (client-go: wait.Jitter(10s, 0.25)). */
static uint64_t backoff_ms(kcr_recorder *r, int attempts)
{
  uint64_t d = r->retry_initial_ms;
  for(int i = 1; i < attempts && d < r->retry_max_ms; i++)
    d *= 2;
  if(d > r->retry_max_ms)
    d = r->retry_max_ms;
  return d + (uint64_t)((double)d * 0.25 * ((double)rand_r(&r->seed) / RAND_MAX));
}

/* What a write's answer means for its entry:
 *   DONE      written; the entry is (again) E_CREATED with written = count
 *   RETRY     try the same write again after a backoff
 *   RECREATE  a PATCH found no Event (its TTL ran out): POST it again, series
 *             included, under the same name
 *   REPATCH   that POST found the Event there after all: PATCH it again
 *   FOUND     a retried POST found the Event: an earlier attempt created it
 *             and its answer was lost (the connection broke after the server
 *             took it). The name is this entry's own, so the Event is ours:
 *             it is created, with at least its first occurrence; repeats go
 *             into a series PATCH as for any created Event
 *   THROTTLED a 429: pause every sender, then the same write again; not an
 *             attempt (the server said when to come back, not that it failed)
 *   GIVE_UP   drop it: a new event is forgotten (failed), a series write is
 *             abandoned until the next repeat */
enum verdict { V_DONE, V_RETRY, V_RECREATE, V_REPATCH, V_FOUND, V_THROTTLED, V_GIVE_UP };

/* A 403 because the Event's namespace is being deleted: no retry can
 * succeed, and it says nothing about RBAC (client-go drops it quietly too). */
static bool ns_terminating(kcr_err rc, const struct kcr_errinfo *ei)
{
  return rc == KCR_EFORBIDDEN && kcr_errinfo_has_cause(ei, "NamespaceTerminating", NULL);
}

static enum verdict judge(const kcr_recorder *r, const struct job *j, kcr_err rc,
                          const struct kcr_errinfo *ei)
{
  bool more = j->e->attempts + 1 < r->max_attempts;
  if(!rc)
    return V_DONE;
  if(rc == KCR_ETOOMANY)
    return V_THROTTLED;
  if(ns_terminating(rc, ei))
    return V_GIVE_UP;
  if(j->op == KCR_EVENT_PATCH && rc == KCR_ENOTFOUND) /* expired on the server */
    return V_RECREATE;
  if(j->op == KCR_EVENT_CREATE && rc == KCR_EEXIST && j->e->recreate)
    return more ? V_REPATCH : V_GIVE_UP;
  if(j->op == KCR_EVENT_CREATE && rc == KCR_EEXIST && j->e->attempts > 0)
    return V_FOUND;
  return retryable(rc) && more ? V_RETRY : V_GIVE_UP;
}

/* The default sink: the API server through the client's connection pool,
 * called by every sender at once. The client's own 429/503 retries are off:
 * the recorder pauses all its senders on a 429 (finish()) and retries a 503
 * on its own schedule, and a sender sleeping through Retry-After inside the
 * client would keep its job from everyone. */
static kcr_err api_sink(void *ud, enum kcr_event_op op, const char *ns, const char *name,
                        const char *text, size_t len, struct kcr_errinfo *ei)
{
  bool create = op == KCR_EVENT_CREATE;
  struct kcr_ref ref = {.gvr = &events_gvr, .ns = ns, .name = create ? NULL : name};
  struct kcr_buf path = KCR_BUF_INIT;
  struct kcr_http_response resp = {.body = KCR_BUF_INIT};
  kcr_err rc = kcr_path(&path, &ref);

  if(!rc)
    rc = kcr_client_do(ud,
                       &(struct kcr_http_request){
                           .method = create ? "POST" : "PATCH",
                           .path = path.ptr,
                           .content_type = create ? NULL : "application/merge-patch+json",
                           .body = text,
                           .body_len = len,
                           .max_retries = -1},
                       &resp, ei);
  kcr_buf_cleanup(&resp.body);
  kcr_buf_cleanup(&path);
  return rc;
}

static void log_verdict(const kcr_recorder *r, const struct job *j, enum verdict v,
                        kcr_err rc, const struct kcr_errinfo *ei)
{
  const struct entry *e = j->e;
  const char *msg;
  enum kcr_log_level lvl = KCR_LOG_ERROR;

  switch(v) {
  case V_DONE: return;
  case V_RECREATE:
    msg = "event expired on the server; creating it again with its series";
    lvl = KCR_LOG_DEBUG;
    break;
  case V_RETRY:
  case V_REPATCH:
    msg = "event write failed; will retry";
    lvl = KCR_LOG_DEBUG;
    break;
  case V_THROTTLED:
    msg = "event write throttled (429): every sender pauses";
    lvl = KCR_LOG_DEBUG;
    break;
  case V_FOUND:
    msg = "event already created by an earlier attempt whose answer was lost";
    lvl = KCR_LOG_DEBUG;
    break;
  default:
    msg = j->op == KCR_EVENT_PATCH ? "event series update dropped"
          : e->recreate            ? "event re-creation dropped"
                                   : "event dropped: the server refused it";
    if(ns_terminating(rc, ei)) { /* the 403's text would read as RBAC's */
      KCR_LOG(KCR_LOG_DEBUG, "event dropped: its namespace is being deleted",
              KCR_S("namespace", e->ns), KCR_S("event", e->name),
              KCR_S("kind", e->r_kind), KCR_S("name", e->r_name),
              KCR_S("reason", e->reason));
      return;
    }
  }
  KCR_LOG(lvl, msg, KCR_S("namespace", e->ns), KCR_S("event", e->name),
          KCR_S("kind", e->r_kind), KCR_S("name", e->r_name), KCR_S("reason", e->reason),
          KCR_I("count", j->count), KCR_I("attempts", e->attempts + 1),
          KCR_S("error", kcr_err_name(rc)), KCR_I("code", ei->code),
          KCR_S("message", ei->message ? ei->message : ""));
}

/* How long a 429 pauses the senders: its Retry-After, else
 * retry_initial_ms; at most retry_max_ms. */
static uint64_t pause_ms(const kcr_recorder *r, const struct kcr_errinfo *ei)
{
  uint64_t ms = ei->retry_after_ms ? ei->retry_after_ms : r->retry_initial_ms;
  return ms < r->retry_max_ms ? ms : r->retry_max_ms;
}

/* Applies the outcome of a write (under r->mu) and schedules what the
 * entry needs next. May free j->e. pause: how long a V_THROTTLED pauses. */
static void finish(kcr_recorder *r, const struct job *j, enum verdict v, uint64_t pause,
                   uint64_t now)
{
  struct entry *e = j->e;
  bool was_dirty = entry_dirty(e);
  bool first = j->op == KCR_EVENT_CREATE && !e->recreate;

  e->busy = false;
  r->ninflight--;
  if(first && (v == V_DONE || v == V_FOUND || v == V_GIVE_UP)) {
    r->qbytes -= e->size; /* settled (I9) */
    if(r->qbytes <= r->budget / 2)
      r->full_logged = false; /* log again when it fills up again */
  }
  switch(v) {
  case V_DONE:
    if(first)
      r->st.sent++;
    if(j->op == KCR_EVENT_PATCH)
      r->st.series_writes++;
    e->state = E_CREATED;
    e->recreate = false;
    e->written = j->count;
    e->last_write_ms = now;
    e->attempts = 0;
    e->not_before_ms = 0;
    break;
  case V_RETRY: /* a POST stays E_QUEUED, a PATCH dirty */
    e->attempts++;
    e->not_before_ms = sat_add(now, backoff_ms(r, e->attempts));
    break;
  case V_THROTTLED: /* the same, after the pause, for every sender */
    if(sat_add(now, pause) > r->paused_until)
      r->paused_until = sat_add(now, pause);
    break;
  case V_REPATCH:
    e->attempts++;
    e->not_before_ms = sat_add(now, backoff_ms(r, e->attempts));
    e->state = E_CREATED;
    e->recreate = false;
    break;
  case V_FOUND: /* E_QUEUED -> E_CREATED, as V_DONE but with one occurrence known */
    r->st.sent++;
    e->state = E_CREATED;
    e->written = 1;
    e->last_write_ms = now;
    e->attempts = 0;
    e->not_before_ms = 0;
    break;
  case V_RECREATE:
    e->recreate = true;
    e->state = E_QUEUED;
    e->attempts = 0;
    e->not_before_ms = 0;
    break;
  case V_GIVE_UP:
    if(j->op == KCR_EVENT_PATCH) { /* keep it: the next repeat writes the total */
      e->written = j->count;
      e->attempts = 0;
      e->not_before_ms = 0;
      break;
    }
    if(first)
      r->st.failed++;
    entry_remove(r, e);
    return;
  }
  dirty_update(r, e, was_dirty);
  if(e->state == E_QUEUED)
    r->nqueued++;
  age_relink_oldest(r, e); /* if gc() took it off while it was not clean */
  wake_up(r, schedule(r, e, now));
}

/* Runs one job: called and returns with r->mu held. */
static void run(kcr_recorder *r, struct job *j)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  enum verdict v;
  uint64_t pause;
  kcr_err rc;

  pthread_mutex_unlock(&r->mu);
  /* The entry's strings are immutable and it cannot go away while busy (I2);
   * attempts and recreate are written only by the sender that holds it
   * busy. */
  rc = j->body ? r->sink(r->sink_ud, j->op, j->e->ns, j->e->name, j->body,
                         strlen(j->body), &ei)
               : KCR_ENOMEM;
  free(j->body);
  j->body = NULL;
  v = judge(r, j, rc, &ei);
  pause = pause_ms(r, &ei);
  log_verdict(r, j, v, rc, &ei);
  if(j->op == KCR_EVENT_CREATE && !j->e->recreate &&
     (v == V_DONE || v == V_FOUND || v == V_GIVE_UP))
    count_metric(r, j->e->type, j->e->reason, v == V_GIVE_UP ? "failed" : "sent");
  kcr_errinfo_cleanup(&ei);
  pthread_mutex_lock(&r->mu);
  finish(r, j, v, pause, now_ms(r));
}

/* Sleeps until woken; the timekeeper (one idle sender at a time) also
 * until the next deadline - at most a tick with a test clock, which may
 * not move while it sleeps. With no deadline nobody keeps time: whatever
 * makes one (a new event) queues a write, and the sender that runs it
 * becomes the timekeeper when it is done. A deadline earlier than the
 * timekeeper's, made while it slept without a wake-up for it (a 429's
 * pause; a series a flush made due that must wait again), is kept by the
 * sender that finds it, as well. */
static void sender_wait(kcr_recorder *r, uint64_t now)
{
  uint64_t next = next_deadline(r, now), ms;
  bool keeper;

  if(next == UINT64_MAX || (r->timekeeper && next >= r->tk_until)) {
    pthread_cond_wait(&r->wake, &r->mu);
    return;
  }
  if(next <= now)
    return;
  ms = next - now;
  if(r->clock != default_clock && ms > GC_TICK_MS)
    ms = GC_TICK_MS;
  keeper = !r->timekeeper;
  if(keeper) {
    r->timekeeper = true;
    r->tk_until = next;
  }
  cond_wait_ms(&r->wake, &r->mu, ms);
  if(keeper)
    r->timekeeper = false;
}

static void *sender(void *arg)
{
  kcr_recorder *r = arg;

  pthread_mutex_lock(&r->mu);
  while(!r->stop) {
    uint64_t now = now_ms(r);
    struct job j;
    if(now >= gc_due(r))
      gc(r, now);
    if(pick(r, now, &j)) {
      if(more_due_than_busy(r)) /* more than the busy ones will take */
        pthread_cond_signal(&r->wake);
      run(r, &j);
      continue;
    }
    if(r->nflush > 0 && quiescent(r))
      pthread_cond_broadcast(&r->idle);
    sender_wait(r, now);
  }
  pthread_mutex_unlock(&r->mu);
  return NULL;
}

/* ---- lifecycle ---- */

kcr_err kcr_recorder_flush(kcr_recorder *r, uint64_t timeout_ms)
{
  bool forever = timeout_ms == KCR_FOREVER;
  struct timespec until;
  kcr_err rc = KCR_OK;

  if(!r)
    return KCR_EINVAL;
  until = kcr_time_mono_after(forever ? 0 : timeout_ms);
  pthread_mutex_lock(&r->mu);
  if(r->nflush++ == 0)
    timers_rekey(r); /* dirty series are due now */
  pthread_cond_signal(&r->wake);
  while(!quiescent(r)) { /* a sender broadcasts idle when it gets there */
    if(forever) {
      pthread_cond_wait(&r->idle, &r->mu);
    } else if(pthread_cond_timedwait(&r->idle, &r->mu, &until)) {
      rc = quiescent(r) ? KCR_OK : KCR_ETIMEDOUT;
      break;
    }
  }
  r->nflush--;
  pthread_mutex_unlock(&r->mu);
  return rc;
}

void kcr_recorder_get_stats(kcr_recorder *r, struct kcr_recorder_stats *out)
{
  pthread_mutex_lock(&r->mu);
  *out = r->st;
  out->queued = r->nqueued;
  out->queued_bytes = r->qbytes;
  out->tracked = r->events.t.n;
  pthread_mutex_unlock(&r->mu);
}

void kcr__recorder_probe(kcr_recorder *r, struct kcr__recorder_probe *out)
{
  pthread_mutex_lock(&r->mu);
  out->spam_visits = r->spam.visits;
  out->event_visits = r->events.visits + r->unsent.visits;
  out->gc_runs = r->gc_runs;
  out->spam_keys = r->spam.t.n;
  out->events_longest_chain = kcr__htab_longest_chain(&r->events.t);
  out->spam_longest_chain = kcr__htab_longest_chain(&r->spam.t);
  pthread_mutex_unlock(&r->mu);
}

/* The queued-bytes gauge, refreshed at each render: each recorder on the
 * registry adds what changed since its last report, so the gauge is their
 * sum. Renders run one at a time: reported needs no lock. */
static void collect(void *ud)
{
  kcr_recorder *r = ud;
  double now;
  pthread_mutex_lock(&r->mu);
  now = (double)r->qbytes;
  pthread_mutex_unlock(&r->mu);
  kcr_metric_inc(r->m_qbytes, NULL, now - r->reported);
  r->reported = now;
}

/* Stops and joins the senders that were started. */
static void stop_senders(kcr_recorder *r)
{
  pthread_mutex_lock(&r->mu);
  r->stop = true;
  pthread_cond_broadcast(&r->wake);
  pthread_mutex_unlock(&r->mu);
  for(int i = 0; i < r->nthreads; i++)
    pthread_join(r->threads[i], NULL);
  r->nthreads = 0;
}

/* Frees everything; no sender runs. */
static void destroy(kcr_recorder *r)
{
  struct kcr_htab_iter it;
  struct kcr_hnode *n;

  if(r->m_qbytes) { /* no render runs collect() once this returns */
    kcr_metrics_off_collect(r->metrics, collect, r);
    kcr_metric_inc(r->m_qbytes, NULL, -r->reported);
  }
  kcr_metrics_free(r->metrics);
  kcr_htab_iter_init(&it, &r->events.t);
  while((n = kcr_htab_iter_next(&it)))
    free(entry_of(n));
  kcr_htab_iter_init(&it, &r->spam.t);
  while((n = kcr_htab_iter_next(&it)))
    free(KCR_HTAB_ENTRY(n, struct spam, h.hn));
  kcr_htab_cleanup(&r->events.t);
  kcr_htab_cleanup(&r->unsent.t);
  kcr_htab_cleanup(&r->spam.t);
  free(r->timers.a);
  free(r->threads);
  pthread_cond_destroy(&r->wake);
  pthread_cond_destroy(&r->idle);
  pthread_mutex_destroy(&r->mu);
  free(r->controller);
  free(r->instance);
  kcr_client_free(r->client);
  free(r);
}

size_t kcr__recorder_discard(kcr_recorder *r)
{
  size_t pending;
  pthread_mutex_lock(&r->mu);
  r->discard = true;
  /* No sender takes another job (a pause without end: pick() finds none,
   * the timekeeper waits to be woken); the writes under way finish. */
  r->paused_until = UINT64_MAX;
  pending = r->nqueued + r->ndirty; /* new events waiting, series unwritten (I5) */
  pthread_mutex_unlock(&r->mu);
  return pending;
}

void kcr_recorder_free(kcr_recorder *r)
{
  struct kcr_htab_iter it;
  struct kcr_hnode *n;
  size_t lost = 0, unwritten = 0;
  bool discard;

  if(!r)
    return;
  pthread_mutex_lock(&r->mu);
  discard = r->discard;
  pthread_mutex_unlock(&r->mu);
  if(!discard && kcr_recorder_flush(r, r->shutdown_ms))
    KCR_LOG(KCR_LOG_WARN, "event recorder: flush at shutdown timed out",
            KCR_I("timeoutMs", r->shutdown_ms));
  stop_senders(r); /* each finishes the write it is doing first */
  /* No sender runs: no entry is busy, and the lock is not needed. */
  kcr_htab_iter_init(&it, &r->events.t);
  while((n = kcr_htab_iter_next(&it))) {
    const struct entry *e = entry_of(n);
    if(e->state == E_QUEUED && !e->recreate) {
      lost++;
      count_metric(r, e->type, e->reason, "dropped");
    }
    unwritten += entry_dirty(e);
  }
  if(lost || unwritten)
    KCR_LOG(KCR_LOG_WARN, "event recorder stopped with events not written",
            KCR_I("newEventsDropped", lost), KCR_I("seriesNotUpdated", unwritten));
  destroy(r);
}

static char *default_instance(void)
{
  char host[256] = "";
  if(gethostname(host, sizeof(host) - 1) || !host[0])
    snprintf(host, sizeof(host), "unknown");
  host[KCR_EVENT_INSTANCE_MAX] = '\0';
  return strdup(host);
}

/* KCR_EINVAL naming the option that is wrong, or KCR_OK. */
static kcr_err check_opts(const struct kcr_recorder_opts *o, struct kcr_errinfo *ei)
{
  static const char *const fn = "kcr_recorder_new";
  if(!o)
    return kcr_errinfo_set(ei, KCR_EINVAL, "%s: no options", fn);
  if(!o->client && !o->sink)
    return kcr_errinfo_set(ei, KCR_EINVAL, "%s: client (or sink) is required", fn);
  if(!qualified_name(o->reporting_controller))
    return kcr_errinfo_set(ei, KCR_EINVAL,
                           "%s: reporting_controller must be a qualified name like "
                           "\"example.com/my-controller\", not \"%s\"",
                           fn, nz(o->reporting_controller));
  if(o->reporting_instance &&
     (!*o->reporting_instance || strlen(o->reporting_instance) > KCR_EVENT_INSTANCE_MAX))
    return kcr_errinfo_set(ei, KCR_EINVAL, "%s: reporting_instance must be 1..%d bytes",
                           fn, KCR_EVENT_INSTANCE_MAX);
  if(o->spam_burst < 0)
    return kcr_errinfo_set(ei, KCR_EINVAL,
                           "%s: spam_burst must not be negative, not %d (no_spam_limit "
                           "turns the limit off)",
                           fn, o->spam_burst);
  if(o->max_attempts < 0)
    return kcr_errinfo_set(ei, KCR_EINVAL,
                           "%s: max_attempts must not be negative, not %d", fn,
                           o->max_attempts);
  if(o->senders < 0)
    return kcr_errinfo_set(ei, KCR_EINVAL, "%s: senders must not be negative, not %d", fn,
                           o->senders);
  return KCR_OK;
}

static void set_defaults(kcr_recorder *r, const struct kcr_recorder_opts *o)
{
  /* burst < 0 is "no limit" inside the recorder */
  r->burst = o->no_spam_limit ? -1 : o->spam_burst ? o->spam_burst : 25;
  r->refill_ms = o->spam_refill_ms ? o->spam_refill_ms : 300000;
  r->spam_ttl_ms = r->burst <= 0 ? 0
                   : r->refill_ms > UINT64_MAX / (uint64_t)r->burst
                       ? UINT64_MAX
                       : (uint64_t)r->burst * r->refill_ms;
  r->budget = o->queue_bytes ? o->queue_bytes : KCR_EVENT_QUEUE_BYTES;
  r->nsenders = o->senders ? o->senders : 4;
  r->flush_ms = o->series_flush_ms ? o->series_flush_ms : 30000;
  r->window_ms = o->aggregate_window_ms ? o->aggregate_window_ms : 360000;
  r->max_attempts = o->max_attempts ? o->max_attempts : 5;
  r->retry_initial_ms = o->retry_initial_ms ? o->retry_initial_ms : 1000;
  r->retry_max_ms = o->retry_max_ms ? o->retry_max_ms : 30000;
  r->shutdown_ms = o->shutdown_flush_ms ? o->shutdown_flush_ms : 5000;
  r->sink = o->sink ? o->sink : api_sink;
  r->client = o->sink ? NULL : kcr_client_ref(o->client);
  r->sink_ud = o->sink ? o->sink_ud : r->client;
  r->clock = o->clock_ms ? o->clock_ms : default_clock;
  r->clock_ud = o->clock_ud;
  r->seed = (unsigned)time(NULL) ^ (unsigned)(uintptr_t)r;
}

kcr_err kcr_recorder_new(const struct kcr_recorder_opts *o, kcr_recorder **out,
                         struct kcr_errinfo *ei)
{
  pthread_condattr_t ca;
  kcr_recorder *r;
  kcr_err rc;

  if(!out)
    return kcr_errinfo_set(ei, KCR_EINVAL, "kcr_recorder_new: no out");
  *out = NULL;
  if((rc = check_opts(o, ei)))
    return rc;
  rc = KCR_ENOMEM;
  r = calloc(1, sizeof(*r));
  if(!r)
    return KCR_ENOMEM;
  pthread_mutex_init(&r->mu, NULL);
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&r->wake, &ca);
  pthread_cond_init(&r->idle, &ca);
  pthread_condattr_destroy(&ca);
  set_defaults(r, o);
  r->controller = strdup(o->reporting_controller);
  r->instance =
      o->reporting_instance ? strdup(o->reporting_instance) : default_instance();
  r->threads = calloc((size_t)r->nsenders, sizeof(*r->threads));
  if(!r->controller || !r->instance || !r->threads)
    goto out;
  r->last_gc_ms = now_ms(r);
  if(o->metrics) {
    r->metrics = kcr_metrics_ref(o->metrics);
    rc = kcr_metric_counter(
        o->metrics,
        &(struct kcr_metric_opts){
            .name = "kcr_events_total",
            .help = "Events recorded, by type, reason and outcome (sent, aggregated, "
                    "dropped, failed).",
            .label_names = (const char *[]){"type", "reason", "result", NULL}},
        &r->m_total, ei);
    if(!rc)
      rc = kcr_metric_gauge(
          o->metrics,
          &(struct kcr_metric_opts){.name = "kcr_events_queued_bytes",
                                    .help = "Bytes held for new events not yet created "
                                            "(bounded by the recorder's queue_bytes)."},
          &r->m_qbytes, ei);
    if(!rc)
      rc = kcr_metrics_on_collect(o->metrics, collect, r);
    if(rc)
      goto out;
  }
  for(; r->nthreads < r->nsenders; r->nthreads++)
    if(pthread_create(&r->threads[r->nthreads], NULL, sender, r)) {
      rc = kcr_errinfo_set(ei, KCR_ENOMEM,
                           "kcr_recorder_new: cannot start sender thread %d of %d",
                           r->nthreads + 1, r->nsenders);
      goto out;
    }
  *out = r;
  return KCR_OK;
out:
  stop_senders(r);
  destroy(r);
  return rc;
}
