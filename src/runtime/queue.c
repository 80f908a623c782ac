/* DESIGN: the work queue - client-go's workqueue (queue.go, delaying_queue.go,
 * rate_limiting_queue.go, default_rate_limiters.go, metrics.go) as one object
 * under one mutex, with controller-runtime's priorities
 * (pkg/controller/priorityqueue).
 *
 * State. One record per key (struct item) in a kcr/htab.h table carries
 * everything client-go spreads over six maps and sets: dirty, processing,
 * the parked deadline (index in the heap), the rate limiter's failure count
 * and the metric timestamps, plus the priority it is queued with and the
 * one it is parked with. Parked keys (add_after) sit in a binary min-heap by
 * deadline. The overall token bucket is two numbers in the queue.
 *
 * Priorities. Ready keys sit in one FIFO per priority level, an intrusive
 * doubly linked list through the records, so a key raised to a higher
 * priority leaves its old line in O(1) and joins the back of the new one.
 * The levels are a small array sorted by priority, highest first (struct
 * level); take serves the head of the first non-empty one. A level exists
 * while some record needs it (I8): every dirty record holds a reference on
 * the level of its priority, every parked record one on the level of its
 * parked priority. So done() and promotion, which must not fail, always find
 * the level they push into; only add* create levels, and they reserve the
 * slot before anything changes. Programs use a handful of priorities, so
 * finding a level is a short scan; one priority costs what the single FIFO
 * cost before. Why not a heap keyed by (priority, sequence), as
 * controller-runtime's b-tree: O(log n) per take where a FIFO is O(1), and
 * a raised key would keep its first add's place in line - here it goes to
 * the back of its new line (a raise is news: it is served after the keys
 * that were raised or added there before it).
 *
 * No timer thread. client-go runs a goroutine that moves parked items into
 * the queue when their deadline passes. Here the move is lazy: every call
 * that reads or changes the ready FIFOs (add*, take, done, len, and the
 * metrics collect hook) first promotes the parked keys whose deadline has
 * passed, in deadline order (promote_due). Nobody can observe the
 * difference - any observer sees what the waiting loop would have produced
 * by then - and a queue costs no thread. What makes time pass when nobody
 * calls is an idle getter: one waiting getter, "the timer", sleeps on
 * timer_cv until the earliest deadline (or its own take timeout); the others
 * sleep on ready_cv without a timeout. add_after wakes the timer when it
 * parks a new earliest key. A getter leaving the timer role while keys are
 * parked hands it on by waking a ready_cv waiter.
 *
 * Deadlines are CLOCK_MONOTONIC nanoseconds (kcr_time_mono_ns); both
 * getter condvars wait on that clock, so wall-clock jumps do not matter.
 *
 * Memory: one malloc per live key (the record, key inline, two list links)
 * and one per take (the caller's copy). The bucket array and heap only grow;
 * they hold pointers, so a burst of N keys leaves ~3 pointers per key
 * behind. The level array has one entry per priority in use.
 *
 * Wakeups. Each key pushed into the FIFO wakes one getter (a ready_cv
 * waiter if there is one, else the timer). A getter that takes a key and
 * leaves others queued wakes another (chaining), so a signal that lands on
 * an already-woken getter is never lost: that getter re-checks the FIFO.
 * Shutdown broadcasts everything.
 *
 * Invariants (all under q->mu):
 *  I1 a record is in the FIFO of the level of its prio, exactly once, iff
 *     dirty && !processing; nready counts them.
 *  I2 hidx != NOT_PARKED iff the record is heap[hidx]; the heap is ordered
 *     by ready_ns.
 *  I3 a record is in the table iff dirty || processing || parked ||
 *     failures > 0; it is freed as soon as all four are false
 *     (release_if_idle), so the table never grows with dead keys.
 *  I4 hcap >= items.n: pushing into the heap never fails (capacity is
 *     reserved, with the table's, before a record is created), and the
 *     FIFOs are lists; so done() and promotion cannot fail.
 *  I5 ndirty and nprocessing count the flags; workqueue_depth = ndirty, as
 *     in client-go (dirty keys, including those waiting for done()).
 *  I6 once shutting_down, the heap is empty and no key becomes dirty.
 *  I7 timer_cv has at most one waiter, the getter that set timer_waiting;
 *     nwait counts the getters blocked on ready_cv.
 *  I8 the levels are sorted by prio, highest first, with distinct prios; a
 *     level exists iff refs > 0, where refs = dirty records with that prio
 *     + parked records with that park_prio. An empty FIFO is a level whose
 *     records are all processing or parked.
 *  I9 no call sleeps holding a metric delta (struct mdelta, below): a
 *     getter that promoted parked keys applies that before it waits.
 *     Workers wait in take with no time limit; a +1 to workqueue_depth
 *     held there would be missing for as long as the queue stays idle,
 *     while the -1 of the key's take, by another getter, was applied.
 *
 * Lock order: q->mu is a leaf. Nothing but malloc/free, the clock and the
 * condvars is called with it held; metric updates are accumulated in a
 * struct mdelta and applied after unlocking (gauge moves are +1/-1
 * increments, which commute, so applying them late cannot leave a stale
 * value once every call has applied its own - I9). The only order is
 * registry -> queue: render runs the collect hook (queue_collect) under the
 * registry's collect_mu and the hook takes q->mu; no path holds q->mu while
 * entering the registry.
 *
 * Deviations from client-go, each deliberate: done() of a key that is not
 * processing is refused (client-go would queue it twice); add* during
 * shutdown return KCR_ECANCELED instead of returning nothing, and
 * add_rate_limited then does not count a failure; the histograms' series
 * appear on their first observation rather than at queue creation. From
 * controller-runtime's priority queue: a raised key goes to the back of its
 * new line (above); parking stays independent of being queued, as in
 * client-go (there, add_after of a queued key raises the queued key's
 * priority at once; here the parked priority applies when it is due). */
#include <float.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/assert-int.h"
#include "core/htab-int.h"
#include "kcr/hash.h"
#include "kcr/htab.h"
#include "kcr/queue.h"
#include "runtime/queue-int.h"
#include "kcr/time.h"

#define NOT_PARKED SIZE_MAX
#define NS_PER_MS  1000000ull
#define NS_PER_S   1e9

struct item {
  struct kcr_hnode hn;      /* in q->items, under kcr_hash(key) */
  struct item *prev, *next; /* in its level's FIFO (I1) */
  size_t hidx;              /* index in q->heap, NOT_PARKED when not parked */
  uint64_t ready_ns;        /* deadline while parked */
  uint64_t added_ns;        /* when it became dirty (queue_duration), 0 = unknown */
  uint64_t started_ns;      /* when processing started (work_duration) */
  unsigned failures;        /* rate limiter: failures since forget */
  int prio;                 /* while dirty: the priority it is queued with */
  int park_prio;            /* while parked: the priority it will be added with */
  bool dirty, processing;
  size_t klen;
  char key[];
};

/* The FIFO of one priority (I8). */
struct level {
  int prio;
  size_t refs;
  struct item *head, *tail;
};

struct qmetrics {
  kcr_metrics *reg; /* NULL: metrics off */
  char *name;
  const char *labels[2];
  kcr_metric *depth, *adds, *latency, *work, *retries, *unfinished, *longest;
};

struct kcr_queue {
  pthread_mutex_t mu;
  pthread_cond_t ready_cv; /* getters waiting for a key */
  pthread_cond_t timer_cv; /* the one getter timing the heap (I7) */
  pthread_cond_t drain_cv; /* kcr_queue_shutdown_drain() */

  struct kcr_htab items; /* every record, by key */
  struct level *lv;      /* the FIFOs, highest priority first (I8) */
  size_t nlv, lvcap;
  size_t nready;      /* keys in the FIFOs */
  struct item **heap; /* parked keys, min-heap by ready_ns */
  size_t hlen, hcap;

  size_t ndirty, nprocessing;
  unsigned nwait;
  bool timer_waiting, shutting_down, drain;

  uint64_t base_ns, max_ns; /* per-key exponential backoff */
  double qps, burst;        /* token bucket; qps == 0: off */
  double tokens;
  uint64_t last_ns;

  struct qmetrics m;
};

/* Metric changes made under the lock, applied after it is released. */
struct mdelta {
  int depth;
  unsigned adds, retries;
  bool has_latency, has_work;
  double latency, work;
};

static uint64_t ms_to_ns(uint64_t ms)
{
  return ms > UINT64_MAX / NS_PER_MS ? UINT64_MAX : ms * NS_PER_MS;
}

/* ---- the table of records ---- */

/* Keys are object names users choose: keyed hash (kcr/hash.h). */
static uint64_t hash_key(const char *s, size_t n) { return kcr_hash(s, n); }

static struct item *item_of(struct kcr_hnode *n)
{
  return KCR_HTAB_ENTRY(n, struct item, hn);
}

static struct item *table_find(kcr_queue *q, const char *key, size_t klen, uint64_t h)
{
  for(struct kcr_hnode *n = kcr_htab_lookup(&q->items, h); n; n = kcr_htab_lookup_next(n))
    if(item_of(n)->klen == klen && !memcmp(item_of(n)->key, key, klen))
      return item_of(n);
  return NULL;
}

static struct item *find(kcr_queue *q, const char *key)
{
  size_t n = strlen(key);
  return table_find(q, key, n, hash_key(key, n));
}

static kcr_err reserve(struct item ***arr, size_t *cap, size_t need)
{
  size_t n;
  struct item **p;
  if(need <= *cap)
    return KCR_OK;
  n = *cap ? *cap * 2 : 64;
  while(n < need)
    n *= 2;
  p = realloc(*arr, n * sizeof(*p));
  if(!p)
    return KCR_ENOMEM;
  *arr = p;
  *cap = n;
  return KCR_OK;
}

/* The record for key, created (idle) if absent. Reserves the heap slot the
 * new record may need (I4) and its place in the table, so nothing fails
 * once it is allocated. */
static kcr_err lookup_or_create(kcr_queue *q, const char *key, struct item **out)
{
  size_t klen = strlen(key);
  uint64_t h = hash_key(key, klen);
  struct item *it = table_find(q, key, klen, h);
  kcr_err rc;

  if(it)
    goto out;
  rc = reserve(&q->heap, &q->hcap, q->items.n + 1);
  if(!rc)
    rc = kcr_htab_reserve(&q->items, q->items.n + 1);
  if(rc)
    return rc;
  it = calloc(1, sizeof(*it) + klen + 1);
  if(!it)
    return KCR_ENOMEM;
  memcpy(it->key, key, klen + 1);
  it->klen = klen;
  it->hidx = NOT_PARKED;
  rc = kcr_htab_insert(&q->items, &it->hn, h);
  KCR_ASSERT(rc == KCR_OK); /* reserved above */
out:
  *out = it;
  return KCR_OK;
}

/* I3: frees the record once nothing refers to the key any more. */
static void release_if_idle(kcr_queue *q, struct item *it)
{
  if(it->dirty || it->processing || it->hidx != NOT_PARKED || it->failures)
    return;
  kcr_htab_remove(&q->items, &it->hn);
  free(it);
}

/* ---- the priority levels and their FIFOs ---- */

/* Where prio's level is, or would be inserted (I8: sorted, highest first). */
static size_t level_pos(const kcr_queue *q, int prio)
{
  size_t i = 0;
  while(i < q->nlv && q->lv[i].prio > prio)
    i++;
  return i;
}

/* prio's level, which must exist (I8). The pointer is valid until a level
 * is created or dropped. */
static struct level *level_of(kcr_queue *q, int prio)
{
  size_t i = level_pos(q, prio);
  KCR_ASSERT(i < q->nlv && q->lv[i].prio == prio); /* I8 */
  return &q->lv[i];
}

/* Makes room for one more level, so that the next level_ref cannot fail. */
static kcr_err level_reserve(kcr_queue *q)
{
  size_t n;
  struct level *p;

  if(q->nlv < q->lvcap)
    return KCR_OK;
  n = q->lvcap ? q->lvcap * 2 : 4;
  p = realloc(q->lv, n * sizeof(*p));
  if(!p)
    return KCR_ENOMEM;
  q->lv = p;
  q->lvcap = n;
  return KCR_OK;
}

/* Takes a reference on prio's level, creating it if needed: only add*
 * create levels, after level_reserve (the other callers hold a reference
 * on it already). Returns the level (valid as level_of's). */
static struct level *level_ref(kcr_queue *q, int prio)
{
  size_t i = level_pos(q, prio);

  if(i == q->nlv || q->lv[i].prio != prio) {
    KCR_ASSERT(q->nlv < q->lvcap); /* level_reserve */
    memmove(q->lv + i + 1, q->lv + i, (q->nlv - i) * sizeof(*q->lv));
    q->lv[i] = (struct level){.prio = prio};
    q->nlv++;
  }
  q->lv[i].refs++;
  return &q->lv[i];
}

/* Drops a reference on level l, and the level with the last one. */
static void level_drop(kcr_queue *q, struct level *l)
{
  size_t i = (size_t)(l - q->lv);

  if(--l->refs)
    return;
  KCR_ASSERT(!l->head); /* a queued record holds a reference */
  q->nlv--;
  memmove(q->lv + i, q->lv + i + 1, (q->nlv - i) * sizeof(*q->lv));
}

static void level_unref(kcr_queue *q, int prio) { level_drop(q, level_of(q, prio)); }

/* Appends it to the FIFO of its priority, l (NULL: look it up). */
static void fifo_push(kcr_queue *q, struct level *l, struct item *it)
{
  if(!l)
    l = level_of(q, it->prio);
  KCR_ASSERT(l->prio == it->prio);
  KCR_ASSERT(it->dirty && !it->processing); /* I1 */
  it->next = NULL;
  it->prev = l->tail;
  if(l->tail)
    l->tail->next = it;
  else
    l->head = it;
  l->tail = it;
  q->nready++;
}

/* Takes it out of the FIFO of its priority, l (NULL: look it up). */
static void fifo_unlink(kcr_queue *q, struct level *l, struct item *it)
{
  if(!l)
    l = level_of(q, it->prio);
  if(it->prev)
    it->prev->next = it->next;
  else
    l->head = it->next;
  if(it->next)
    it->next->prev = it->prev;
  else
    l->tail = it->prev;
  it->prev = it->next = NULL;
  q->nready--;
}

/* The level of the next key to hand out: the highest non-empty FIFO. */
static struct level *fifo_first(kcr_queue *q)
{
  for(size_t i = 0; i < q->nlv; i++)
    if(q->lv[i].head)
      return &q->lv[i];
  return NULL;
}

/* ---- the heap of parked keys ---- */

static void heap_set(kcr_queue *q, size_t i, struct item *it)
{
  q->heap[i] = it;
  it->hidx = i;
}

static void heap_up(kcr_queue *q, size_t i)
{
  struct item *it = q->heap[i];
  while(i > 0) {
    size_t parent = (i - 1) / 2;
    if(q->heap[parent]->ready_ns <= it->ready_ns)
      break;
    heap_set(q, i, q->heap[parent]);
    i = parent;
  }
  heap_set(q, i, it);
}

static void heap_down(kcr_queue *q, size_t i)
{
  struct item *it = q->heap[i];
  for(;;) {
    size_t c = 2 * i + 1;
    if(c >= q->hlen)
      break;
    if(c + 1 < q->hlen && q->heap[c + 1]->ready_ns < q->heap[c]->ready_ns)
      c++;
    if(it->ready_ns <= q->heap[c]->ready_ns)
      break;
    heap_set(q, i, q->heap[c]);
    i = c;
  }
  heap_set(q, i, it);
}

static struct item *heap_pop(kcr_queue *q)
{
  struct item *top = q->heap[0];
  q->hlen--;
  if(q->hlen) {
    heap_set(q, 0, q->heap[q->hlen]);
    heap_down(q, 0);
  }
  top->hidx = NOT_PARKED;
  return top;
}

/* Takes it out of the heap wherever it sits. */
static void heap_remove(kcr_queue *q, struct item *it)
{
  size_t i = it->hidx;
  q->hlen--;
  if(i != q->hlen) {
    struct item *moved = q->heap[q->hlen];
    heap_set(q, i, moved);
    heap_up(q, i);
    if(moved->hidx == i)
      heap_down(q, i);
  }
  it->hidx = NOT_PARKED;
}

/* ---- state transitions ---- */

/* Wakes one getter for a key just pushed into the FIFO. */
static void wake_getter(kcr_queue *q)
{
  if(q->nwait)
    pthread_cond_signal(&q->ready_cv);
  else if(q->timer_waiting)
    pthread_cond_signal(&q->timer_cv);
}

/* client-go's Typed.Add with controller-runtime's priority, under the
 * lock, the key not shutting down. A queued key keeps its place unless
 * prio raises it: then it moves to the back of prio's FIFO. prio's level
 * must exist or be reserved (level_ref). */
static void add_locked(kcr_queue *q, struct item *it, uint64_t now, int prio,
                       struct mdelta *md)
{
  struct level *l;

  if(it->dirty) { /* queued already, or re-queued by done() */
    if(prio <= it->prio)
      return; /* never lowered */
    level_ref(q, prio);
    if(!it->processing)
      fifo_unlink(q, NULL, it);
    level_unref(q, it->prio);
    it->prio = prio;
    if(!it->processing)
      fifo_push(q, NULL, it); /* as many ready keys as before: nobody to wake */
    return;
  }
  it->dirty = true;
  q->ndirty++;
  md->adds++;
  md->depth++;
  it->added_ns = now;
  l = level_ref(q, prio);
  it->prio = prio;
  if(it->processing) /* dirty: done() queues it */
    return;
  fifo_push(q, l, it);
  wake_getter(q);
}

/* Moves the parked keys whose deadline has passed into the FIFOs, each
 * with its parked priority. */
static void promote_due(kcr_queue *q, uint64_t now, struct mdelta *md)
{
  while(q->hlen && q->heap[0]->ready_ns <= now) {
    struct item *it = heap_pop(q);
    int prio = it->park_prio;
    /* Stamped with its deadline: that is when client-go would add it. The
     * park's reference keeps prio's level until the add holds its own. */
    add_locked(q, it, it->ready_ns, prio, md); /* now dirty, so the record stays */
    level_unref(q, prio);
  }
}

/* Parks it until now + delay_ns with prio, keeping an earlier deadline and
 * a higher priority. */
static void park(kcr_queue *q, struct item *it, uint64_t now, uint64_t delay_ns, int prio)
{
  uint64_t ready = now + delay_ns < now ? UINT64_MAX : now + delay_ns;

  KCR_ASSERT(!q->shutting_down); /* I6 */
  if(it->hidx == NOT_PARKED) {
    KCR_ASSERT(q->hlen < q->hcap); /* I4 */
    level_ref(q, prio);
    it->park_prio = prio;
    it->ready_ns = ready;
    heap_set(q, q->hlen++, it);
  } else {
    if(prio > it->park_prio) { /* the higher priority wins */
      level_ref(q, prio);
      level_unref(q, it->park_prio);
      it->park_prio = prio;
    }
    if(ready >= it->ready_ns)
      return; /* the earlier deadline wins */
    it->ready_ns = ready;
  }
  heap_up(q, it->hidx);
  if(it->hidx == 0) { /* new earliest deadline: the timer must re-arm */
    if(q->timer_waiting)
      pthread_cond_signal(&q->timer_cv);
    else if(q->nwait)
      pthread_cond_signal(&q->ready_cv);
  }
}

/* client-go's delayingType.AddAfter, under the lock. */
static void add_after_locked(kcr_queue *q, struct item *it, uint64_t now,
                             uint64_t delay_ns, int prio, struct mdelta *md)
{
  md->retries++;
  if(delay_ns == 0)
    add_locked(q, it, now, prio, md);
  else
    park(q, it, now, delay_ns, prio);
}

/* Golang's rate.Limiter.Reserve().Delay(): take a token, possibly going
 * into debt; the delay is the time to pay the debt back. */
static uint64_t bucket_delay(kcr_queue *q, uint64_t now)
{
  double debt_ns;

  if(now > q->last_ns) {
    q->tokens += (double)(now - q->last_ns) / NS_PER_S * q->qps;
    if(q->tokens > q->burst)
      q->tokens = q->burst;
    q->last_ns = now;
  }
  q->tokens -= 1;
  if(q->tokens >= 0)
    return 0;
  debt_ns = -q->tokens / q->qps * NS_PER_S; /* huge or inf for a tiny qps */
  return debt_ns < 0x1p64 ? (uint64_t)debt_ns : UINT64_MAX; /* parks */
}

/* The rate limiter's When(): base * 2^failures capped at max, max'ed with
 * the token bucket; counts the failure. */
static uint64_t limiter_when(kcr_queue *q, struct item *it, uint64_t now)
{
  uint64_t d = q->base_ns;
  for(unsigned i = 0; i < it->failures && d && d < q->max_ns; i++)
    d = d > q->max_ns / 2 ? q->max_ns : d * 2;
  if(d > q->max_ns)
    d = q->max_ns;
  if(it->failures < UINT_MAX)
    it->failures++;
  if(q->qps > 0) {
    uint64_t b = bucket_delay(q, now);
    if(b > d)
      d = b;
  }
  return d;
}

/* Hands out the head of the highest FIFO: the caller gets its own copy of
 * the key, and its priority. */
static kcr_err take(kcr_queue *q, uint64_t now, char **key, int *prio, struct mdelta *md)
{
  struct level *l = fifo_first(q);
  struct item *it = l->head;
  char *dup = malloc(it->klen + 1);

  KCR_ASSERT(it->dirty && !it->processing); /* I1: only such keys are queued */
  if(!dup)
    return KCR_ENOMEM; /* stays queued */
  memcpy(dup, it->key, it->klen + 1);
  fifo_unlink(q, l, it);
  *prio = it->prio;
  level_drop(q, l);
  it->dirty = false;
  it->processing = true;
  q->ndirty--;
  q->nprocessing++;
  md->depth--;
  if(it->added_ns) {
    md->has_latency = true;
    md->latency = (double)(now - it->added_ns) / NS_PER_S;
    it->added_ns = 0;
  }
  it->started_ns = now;
  *key = dup;
  return KCR_OK;
}

static void abs_timespec(uint64_t ns, struct timespec *ts)
{
  ts->tv_sec = (time_t)(ns / 1000000000ull);
  ts->tv_nsec = (long)(ns % 1000000000ull);
}

/* One sleep of a getter with nothing to take (I7). until_ns == 0: no limit
 * of its own. Returns with q->mu held; the caller re-checks everything. */
static void wait_for_work(kcr_queue *q, uint64_t until_ns)
{
  struct timespec ts;

  if(q->hlen && !q->timer_waiting) {
    uint64_t t = q->heap[0]->ready_ns;
    if(until_ns && until_ns < t)
      t = until_ns;
    abs_timespec(t, &ts);
    q->timer_waiting = true;
    pthread_cond_timedwait(&q->timer_cv, &q->mu, &ts);
    q->timer_waiting = false;
  } else {
    q->nwait++;
    if(until_ns) {
      abs_timespec(until_ns, &ts);
      pthread_cond_timedwait(&q->ready_cv, &q->mu, &ts);
    } else {
      pthread_cond_wait(&q->ready_cv, &q->mu);
    }
    q->nwait--;
  }
}

/* I6: no more adds; parked keys are dropped. */
static void shutdown_locked(kcr_queue *q, bool drain)
{
  q->shutting_down = true;
  q->drain = drain;
  while(q->hlen) {
    struct item *it = heap_pop(q);
    level_unref(q, it->park_prio);
    release_if_idle(q, it);
  }
  pthread_cond_broadcast(&q->ready_cv);
  pthread_cond_broadcast(&q->timer_cv);
  if(!drain)
    pthread_cond_broadcast(&q->drain_cv);
}

/* ---- metrics ---- */

static bool md_pending(const struct mdelta *md)
{
  return md->depth || md->adds || md->retries || md->has_latency || md->has_work;
}

static void apply(kcr_queue *q, const struct mdelta *md)
{
  const char *const *l = q->m.labels;

  if(!q->m.reg)
    return;
  if(md->adds)
    kcr_metric_inc(q->m.adds, l, md->adds);
  if(md->depth)
    kcr_metric_inc(q->m.depth, l, md->depth);
  if(md->retries)
    kcr_metric_inc(q->m.retries, l, md->retries);
  if(md->has_latency)
    kcr_metric_observe(q->m.latency, l, md->latency);
  if(md->has_work)
    kcr_metric_observe(q->m.work, l, md->work);
}

/* Render-time gauges, as client-go's updateUnfinishedWork (which also skips
 * a queue that is shutting down). Also promotes due keys, so that depth is
 * current. */
static void queue_collect(void *ud)
{
  kcr_queue *q = ud;
  struct mdelta md = {0};
  double total = 0, oldest = 0;
  bool update;

  pthread_mutex_lock(&q->mu);
  update = !q->shutting_down;
  if(update) {
    uint64_t now = kcr_time_mono_ns();
    struct kcr_htab_iter hi;
    struct kcr_hnode *n;
    promote_due(q, now, &md);
    kcr_htab_iter_init(&hi, &q->items);
    while(q->nprocessing && (n = kcr_htab_iter_next(&hi))) {
      struct item *it = item_of(n);
      double age;
      if(!it->processing)
        continue;
      age = (double)(now - it->started_ns) / NS_PER_S;
      total += age;
      if(age > oldest)
        oldest = age;
    }
  }
  pthread_mutex_unlock(&q->mu);
  apply(q, &md);
  if(update) {
    kcr_metric_set(q->m.unfinished, q->m.labels, total);
    kcr_metric_set(q->m.longest, q->m.labels, oldest);
  }
}

/* Registers the families (shared by every queue of the registry) and
 * creates this queue's series, so they show from the start. Errors: those
 * of kcr_metric_counter (KCR_EEXIST: a family of that name with other
 * labels), KCR_ENOMEM. */
static kcr_err metrics_init(kcr_queue *q, kcr_metrics *reg, const char *name,
                            struct kcr_errinfo *ei)
{
  static const char *const nl[] = {"name", NULL}; /* every family's labels */
  struct qmetrics *m = &q->m;
  const struct {
    kcr_err (*add)(kcr_metrics *, const struct kcr_metric_opts *, kcr_metric **,
                   struct kcr_errinfo *);
    kcr_metric **out;
    struct kcr_metric_opts o;
  } fams[] = {
      {kcr_metric_gauge,
       &m->depth,
       {.name = "workqueue_depth",
        .help = "Current depth of workqueue",
        .label_names = nl}},
      {kcr_metric_counter,
       &m->adds,
       {.name = "workqueue_adds_total",
        .help = "Total number of adds handled by workqueue",
        .label_names = nl}},
      {kcr_metric_histogram,
       &m->latency,
       {.name = "workqueue_queue_duration_seconds",
        .help = "How long in seconds an item stays in workqueue before being requested",
        .label_names = nl,
        .bounds = kcr_buckets_workqueue,
        .nbounds = kcr_buckets_workqueue_n}},
      {kcr_metric_histogram,
       &m->work,
       {.name = "workqueue_work_duration_seconds",
        .help = "How long in seconds processing an item from workqueue takes.",
        .label_names = nl,
        .bounds = kcr_buckets_workqueue,
        .nbounds = kcr_buckets_workqueue_n}},
      {kcr_metric_gauge,
       &m->unfinished,
       {.name = "workqueue_unfinished_work_seconds",
        .help = "How many seconds of work has been done that is in progress and hasn't "
                "been observed by work_duration. Large values indicate stuck threads. "
                "One can deduce the number of stuck threads by observing the rate at "
                "which this increases.",
        .label_names = nl}},
      {kcr_metric_gauge,
       &m->longest,
       {.name = "workqueue_longest_running_processor_seconds",
        .help = "How many seconds has the longest running processor for workqueue been "
                "running.",
        .label_names = nl}},
      {kcr_metric_counter,
       &m->retries,
       {.name = "workqueue_retries_total",
        .help = "Total number of retries handled by workqueue",
        .label_names = nl}},
  };
  const char *const *l;
  kcr_err rc = KCR_OK;

  m->name = strdup(name);
  if(!m->name)
    return KCR_ENOMEM;
  m->labels[0] = m->name;
  m->labels[1] = NULL;
  l = m->labels;
  for(size_t i = 0; !rc && i < sizeof(fams) / sizeof(fams[0]); i++)
    rc = fams[i].add(reg, &fams[i].o, fams[i].out, ei);
  if(rc)
    return rc;
  kcr_metric_inc(m->depth, l, 0);
  kcr_metric_inc(m->adds, l, 0);
  kcr_metric_inc(m->retries, l, 0);
  kcr_metric_set(m->unfinished, l, 0);
  kcr_metric_set(m->longest, l, 0);
  if(kcr_metrics_on_collect(reg, queue_collect, q))
    return KCR_ENOMEM;
  m->reg = kcr_metrics_ref(reg);
  return KCR_OK;
}

/* ---- public API ---- */

static kcr_err init_sync(kcr_queue *q)
{
  pthread_condattr_t ca;
  int bad;

  if(pthread_condattr_init(&ca))
    return KCR_ENOMEM;
  bad = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  if(!bad)
    bad = pthread_mutex_init(&q->mu, NULL);
  if(!bad && (bad = pthread_cond_init(&q->ready_cv, &ca)) != 0)
    pthread_mutex_destroy(&q->mu);
  if(!bad && (bad = pthread_cond_init(&q->timer_cv, &ca)) != 0) {
    pthread_cond_destroy(&q->ready_cv);
    pthread_mutex_destroy(&q->mu);
  }
  if(!bad && (bad = pthread_cond_init(&q->drain_cv, &ca)) != 0) {
    pthread_cond_destroy(&q->timer_cv);
    pthread_cond_destroy(&q->ready_cv);
    pthread_mutex_destroy(&q->mu);
  }
  pthread_condattr_destroy(&ca);
  return bad ? KCR_ENOMEM : KCR_OK;
}

/* The options with their defaults filled in, or KCR_EINVAL naming the
 * field that is wrong. */
static kcr_err check_opts(const struct kcr_queue_opts *in, struct kcr_queue_opts *o,
                          struct kcr_errinfo *ei)
{
  *o = in ? *in : (struct kcr_queue_opts){0};
  if(!o->base_delay_ms)
    o->base_delay_ms = KCR_QUEUE_BASE_DELAY_MS;
  if(!o->max_delay_ms)
    o->max_delay_ms = KCR_QUEUE_MAX_DELAY_MS;
  if(o->max_delay_ms < o->base_delay_ms)
    return kcr_errinfo_set(ei, KCR_EINVAL,
                           "kcr_queue_new: max_delay_ms (%llu) is below base_delay_ms "
                           "(%llu)",
                           (unsigned long long)o->max_delay_ms,
                           (unsigned long long)o->base_delay_ms);
  if(!(o->qps >= 0 && o->qps <= DBL_MAX)) /* NaN fails both */
    return kcr_errinfo_set(ei, KCR_EINVAL,
                           "kcr_queue_new: qps must be a finite number >= 0, not %g",
                           o->qps);
  if(o->burst < 0)
    return kcr_errinfo_set(ei, KCR_EINVAL, "kcr_queue_new: burst must be >= 0, not %d",
                           o->burst);
  return KCR_OK;
}

kcr_err kcr_queue_new(const struct kcr_queue_opts *opts, kcr_queue **out,
                      struct kcr_errinfo *ei)
{
  struct kcr_queue_opts o;
  kcr_queue *q;
  kcr_err rc;

  if(!out)
    return kcr_errinfo_set(ei, KCR_EINVAL, "kcr_queue_new: no out");
  *out = NULL;
  if((rc = check_opts(opts, &o, ei)))
    return rc;
  q = calloc(1, sizeof(*q)); /* items: an empty table */
  if(!q)
    return KCR_ENOMEM;
  if(init_sync(q)) {
    free(q);
    return KCR_ENOMEM;
  }
  q->base_ns = ms_to_ns(o.base_delay_ms);
  q->max_ns = ms_to_ns(o.max_delay_ms);
  if(o.qps > 0) {
    q->qps = o.qps;
    q->burst = o.burst < 1 ? 1 : o.burst;
    q->tokens = q->burst; /* a new bucket starts full */
    q->last_ns = kcr_time_mono_ns();
  }
  if(o.metrics && o.name && *o.name && (rc = metrics_init(q, o.metrics, o.name, ei))) {
    kcr_queue_free(q);
    return rc;
  }
  *out = q;
  return KCR_OK;
}

void kcr_queue_free(kcr_queue *q)
{
  struct kcr_htab_iter hi;
  struct kcr_hnode *n;

  if(!q)
    return;
  if(q->m.reg)
    kcr_metrics_off_collect(q->m.reg, queue_collect, q);
  kcr_metrics_free(q->m.reg);
  kcr_htab_iter_init(&hi, &q->items);
  while((n = kcr_htab_iter_next(&hi)))
    free(item_of(n));
  kcr_htab_cleanup(&q->items);
  free(q->lv);
  free(q->heap);
  free(q->m.name);
  pthread_cond_destroy(&q->drain_cv);
  pthread_cond_destroy(&q->timer_cv);
  pthread_cond_destroy(&q->ready_cv);
  pthread_mutex_destroy(&q->mu);
  free(q);
}

/* Every add has one shape: lock, refuse when shutting down, promote, find
 * the record, transition, unlock, apply the metrics. retry: an add_after
 * (counts workqueue_retries_total, parks unless the delay is 0). */
struct add_req {
  int prio;
  uint64_t after_ms;
  bool retry, rate_limited;
};

static kcr_err add_common(kcr_queue *q, const char *key, const struct add_req *r)
{
  struct mdelta md = {0};
  struct item *it;
  uint64_t now, delay_ns;
  kcr_err rc;

  if(!q || !key)
    return KCR_EINVAL;
  pthread_mutex_lock(&q->mu);
  rc = KCR_ECANCELED;
  if(q->shutting_down)
    goto out;
  now = kcr_time_mono_ns();
  promote_due(q, now, &md);
  /* The level first: if it cannot be made, nothing has changed. */
  rc = level_reserve(q);
  if(!rc)
    rc = lookup_or_create(q, key, &it);
  if(rc)
    goto out;
  if(!r->retry) {
    add_locked(q, it, now, r->prio, &md);
    goto out;
  }
  delay_ns = ms_to_ns(r->after_ms);
  if(r->rate_limited) { /* controller-runtime: the sooner of the two */
    uint64_t rl = limiter_when(q, it, now);
    if(!r->after_ms || rl < delay_ns)
      delay_ns = rl;
  }
  add_after_locked(q, it, now, delay_ns, r->prio, &md);
out:
  pthread_mutex_unlock(&q->mu);
  apply(q, &md);
  return rc;
}

kcr_err kcr_queue_add(kcr_queue *q, const char *key)
{
  return add_common(q, key, &(struct add_req){.retry = false});
}

kcr_err kcr_queue_add_after(kcr_queue *q, const char *key, uint64_t delay_ms)
{
  return add_common(q, key, &(struct add_req){.retry = true, .after_ms = delay_ms});
}

kcr_err kcr_queue_add_rate_limited(kcr_queue *q, const char *key)
{
  return add_common(q, key, &(struct add_req){.retry = true, .rate_limited = true});
}

kcr_err kcr_queue_add_with(kcr_queue *q, const char *key,
                           const struct kcr_queue_add_opts *opts)
{
  struct kcr_queue_add_opts o = opts ? *opts : (struct kcr_queue_add_opts){0};
  return add_common(q, key,
                    &(struct add_req){.prio = o.priority,
                                      .after_ms = o.after_ms,
                                      .retry = o.after_ms || o.rate_limited,
                                      .rate_limited = o.rate_limited});
}

void kcr_queue_forget(kcr_queue *q, const char *key)
{
  struct item *it;

  if(!q || !key)
    return;
  pthread_mutex_lock(&q->mu);
  it = find(q, key);
  if(it) {
    it->failures = 0;
    release_if_idle(q, it);
  }
  pthread_mutex_unlock(&q->mu);
}

int kcr_queue_num_requeues(kcr_queue *q, const char *key)
{
  struct item *it;
  int n = 0;

  if(!q || !key)
    return 0;
  pthread_mutex_lock(&q->mu);
  it = find(q, key);
  if(it)
    n = it->failures > INT32_MAX ? INT32_MAX : (int)it->failures;
  pthread_mutex_unlock(&q->mu);
  return n;
}

kcr_err kcr_queue_take_with_priority(kcr_queue *q, uint64_t timeout_ms, char **key,
                                     int *priority)
{
  struct mdelta md = {0};
  uint64_t now, until = 0;
  kcr_err rc;

  if(key)
    *key = NULL;
  if(priority)
    *priority = 0;
  if(!q || !key || !priority)
    return KCR_EINVAL;
  pthread_mutex_lock(&q->mu);
  now = kcr_time_mono_ns();
  if(timeout_ms != KCR_FOREVER) { /* saturating: now + timeout */
    uint64_t t = ms_to_ns(timeout_ms);
    until = t > UINT64_MAX - now ? UINT64_MAX : now + t;
  }
  for(;;) {
    promote_due(q, now, &md);
    if(q->nready) {
      rc = take(q, now, key, priority, &md);
      break;
    }
    rc = KCR_ECANCELED;
    if(q->shutting_down)
      break;
    rc = KCR_ETIMEDOUT;
    if(timeout_ms != KCR_FOREVER && now >= until)
      break;
    if(md_pending(&md)) { /* I9: apply what promote_due did before sleeping */
      pthread_mutex_unlock(&q->mu);
      apply(q, &md);
      md = (struct mdelta){0};
      pthread_mutex_lock(&q->mu);
    } else {
      wait_for_work(q, until);
    }
    now = kcr_time_mono_ns();
  }
  if(q->nready) /* chain: more keys wait, wake another getter */
    wake_getter(q);
  if(q->hlen && !q->timer_waiting && q->nwait) /* hand the timer role on */
    pthread_cond_signal(&q->ready_cv);
  pthread_mutex_unlock(&q->mu);
  apply(q, &md);
  return rc;
}

kcr_err kcr_queue_take(kcr_queue *q, uint64_t timeout_ms, char **key)
{
  int priority;
  return kcr_queue_take_with_priority(q, timeout_ms, key, &priority);
}

kcr_err kcr_queue_done(kcr_queue *q, const char *key)
{
  struct mdelta md = {0};
  struct item *it;
  uint64_t now;
  kcr_err rc = KCR_EINVAL;

  if(!q || !key)
    return KCR_EINVAL;
  pthread_mutex_lock(&q->mu);
  it = find(q, key);
  if(!it || !it->processing)
    goto out;
  now = kcr_time_mono_ns();
  if(!q->shutting_down)
    promote_due(q, now, &md);
  it->processing = false;
  q->nprocessing--;
  md.has_work = true;
  md.work = (double)(now - it->started_ns) / NS_PER_S;
  if(it->dirty) {
    fifo_push(q, NULL, it); /* at the priority it was added with meanwhile */
    wake_getter(q);
  } else {
    release_if_idle(q, it);
  }
  if(!q->nprocessing && q->drain)
    pthread_cond_broadcast(&q->drain_cv);
  rc = KCR_OK;
out:
  pthread_mutex_unlock(&q->mu);
  apply(q, &md);
  return rc;
}

size_t kcr_queue_len(kcr_queue *q)
{
  struct mdelta md = {0};
  size_t n;

  if(!q)
    return 0;
  pthread_mutex_lock(&q->mu);
  if(q->hlen && !q->shutting_down)
    promote_due(q, kcr_time_mono_ns(), &md);
  n = q->nready;
  pthread_mutex_unlock(&q->mu);
  apply(q, &md);
  return n;
}

void kcr_queue_shutdown(kcr_queue *q)
{
  if(!q)
    return;
  pthread_mutex_lock(&q->mu);
  shutdown_locked(q, false);
  pthread_mutex_unlock(&q->mu);
}

void kcr_queue_shutdown_drain(kcr_queue *q)
{
  if(!q)
    return;
  pthread_mutex_lock(&q->mu);
  shutdown_locked(q, true);
  while(q->nprocessing && q->drain)
    pthread_cond_wait(&q->drain_cv, &q->mu);
  pthread_mutex_unlock(&q->mu);
}

bool kcr_queue_shutting_down(kcr_queue *q)
{
  bool s;

  if(!q)
    return true;
  pthread_mutex_lock(&q->mu);
  s = q->shutting_down;
  pthread_mutex_unlock(&q->mu);
  return s;
}

size_t kcr__queue_remove_if(kcr_queue *q, bool (*match)(const char *key, void *ud),
                            void *ud)
{
  struct mdelta md = {0};
  struct kcr_htab_iter hi;
  struct kcr_hnode *n;
  size_t removed = 0;

  pthread_mutex_lock(&q->mu);
  kcr_htab_iter_init(&hi, &q->items);
  while((n = kcr_htab_iter_next(&hi))) {
    struct item *it = item_of(n);
    bool left = false;
    if(!match(it->key, ud))
      continue;
    if(it->hidx != NOT_PARKED) {
      heap_remove(q, it);
      level_unref(q, it->park_prio);
      left = true;
    }
    if(it->dirty) { /* queued, or to be queued again by done() */
      if(!it->processing) {
        fifo_unlink(q, NULL, it);
        left = true;
      }
      level_unref(q, it->prio);
      it->dirty = false;
      q->ndirty--;
      md.depth--;
    }
    it->failures = 0;
    removed += left;
    release_if_idle(q, it); /* the node the iteration returned last */
  }
  pthread_mutex_unlock(&q->mu);
  apply(q, &md);
  return removed;
}

size_t kcr__queue_max_chain(kcr_queue *q)
{
  size_t max;
  pthread_mutex_lock(&q->mu);
  max = kcr__htab_longest_chain(&q->items);
  pthread_mutex_unlock(&q->mu);
  return max;
}
