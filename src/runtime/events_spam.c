/* DESIGN: the event recorder's spam filter (events.c has the map of the
 * recorder's files): a token bucket per object+reason, which only new
 * Events spend.
 *
 * The spam buckets are also on a doubly linked LRU list, most recently used
 * first. At SPAM_MAX_KEYS buckets a new object+reason evicts the least
 * recently used one, as client-go's spam filter (an LRU cache of 4096
 * records) does; a bucket that has refilled is as good as none, so it may
 * be evicted or forgotten at any time without changing what is dropped.
 *
 * Invariant (under r->mu):
 *  I7 the LRU list holds exactly the buckets of the spam table;
 *     spam.t.n <= SPAM_MAX_KEYS. */
#include <stdlib.h>
#include <string.h>

#include "core/assert-int.h"
#include "kcr/hash.h"
#include "kcr/htab.h"
#include "runtime/events-int.h"
#include "runtime/recorder-int.h"

#define SPAM_MAX_KEYS KCR__EVENTS_SPAM_MAX_KEYS

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
uint64_t kcr__events_spam_expiry(const kcr_recorder *r)
{
  return r->spam_oldest ? kcr__events_sat_add(r->spam_oldest->b.last_ms, r->spam_ttl_ms)
                        : UINT64_MAX;
}

/* Once a tick: forgets the buckets that are surely full again (as good as
 * new), from the least recently used: the LRU order is the order of last
 * use (the clock is monotonic), so it stops at the first that is not, and
 * every bucket it looks at but one is forgotten. A bucket that refilled
 * sooner (it was not drained) stays until then: forgetting it later
 * changes nothing that is dropped, and SPAM_MAX_KEYS bounds them. */
void kcr__events_spam_gc(kcr_recorder *r, uint64_t now)
{
  while(r->spam_oldest && kcr__events_spam_expiry(r) <= now) {
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
bool kcr__events_spam_take(kcr_recorder *r, const char *key, size_t klen, uint64_t now,
                           bool *log_start)
{
  struct spam *s;
  uint64_t h;
  bool ok;

  *log_start = false;
  if(r->burst < 0)
    return true;
  h = kcr_hash(key, klen);
  s = (struct spam *)kcr__events_table_find(&r->spam, h, key, klen);
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
