/* DESIGN: the event recorder's entries (events.c has the map of the
 * recorder's files): the hash tables, the entry of an Event, its name, and
 * forgetting what is no longer needed.
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
 * Expiry. At most once a tick (GC_TICK_MS), when something has expired, a
 * sender forgets entries idle for aggregate_window_ms and spam buckets that
 * have surely refilled. Both are kept in expiry order - entries on an age
 * list in the order they were last seen (one window for all: the order of
 * last use is the order of expiry), buckets on their LRU list - so gc()
 * walks only what expired; with nothing remembered nobody ticks.
 *
 * Invariants (under r->mu):
 *  I2 an entry is freed only when !busy and unscheduled (a sender may use
 *     its immutable strings without the lock while busy): by gc(), by the
 *     expiry check in kcr_recorder_event(), by finish() on its sender, or
 *     by free() - or, still unsent, by coalesce(), which puts its
 *     successor in its place on createq. Expired entries are clean, hence
 *     unscheduled.
 *  I4 state == E_CREATED implies written >= 1 and written <= count.
 *  I5 ndirty counts the dirty entries (busy or not); quiescent (what flush
 *     waits for) == nqueued == 0 && ninflight == 0 && ndirty == 0.
 * I10 the age list holds every entry (aged) except those gc() took off:
 *     their window had passed but they were not clean, so a write is
 *     pending or under way and finish() puts them back at the oldest end.
 *     From the oldest end: those put back (expired by last_gc_ms), then
 *     the rest by last_seen_ms (the clock is monotonic), all of those
 *     expiring after last_gc_ms. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "core/assert-int.h"
#include "kcr/events.h"
#include "kcr/htab.h"
#include "kcr/time.h"
#include "runtime/recorder-int.h"

/* ---- hash tables ---- */

struct knode *kcr__events_table_find(struct table *t, uint64_t h, const char *key,
                                     size_t klen)
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
  if(n < 0 || (size_t)n >= cap || !kcr__events_dns_subdomain(out, (size_t)n))
    uuid_name(out, ns);
}

/* Makes an entry for a new event: key bytes first, then the other strings.
 * Not linked anywhere yet. */
struct entry *kcr__events_entry_new(kcr_recorder *r, const struct kcr_event *ev,
                                    const struct kcr_buf *key, uint64_t h,
                                    const struct timespec *wall, uint64_t now)
{
  const struct kcr_event_ref *rg = ev->regarding;
  const char *ns = kcr__events_empty(rg->ns) ? "default" : rg->ns;
  const char *extra[4];
  char name[320];
  size_t len = key->len, off;
  struct entry *e;
  const char **kf[NKEY_FIELDS];

  event_name(r, rg->name, wall, name, sizeof(name));
  extra[0] = kcr__events_nz(rg->api_version);
  extra[1] = kcr__events_nz(rg->resource_version);
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
bool kcr__events_entry_expired(const kcr_recorder *r, const struct entry *e, uint64_t now)
{
  return e->state == E_CREATED && !e->busy && e->count == e->written &&
         now >= e->last_seen_ms && now - e->last_seen_ms >= r->window_ms;
}

bool kcr__events_entry_dirty(const struct entry *e)
{
  return e->state == E_CREATED && e->count > e->written;
}

/* Keeps ndirty (I5) after e's dirtiness may have changed from was. */
void kcr__events_dirty_update(kcr_recorder *r, const struct entry *e, bool was)
{
  bool is = kcr__events_entry_dirty(e);
  if(is && !was)
    r->ndirty++;
  if(!is && was) {
    KCR_ASSERT(r->ndirty > 0);
    r->ndirty--;
  }
}

/* ---- the age list (I10) ---- */

void kcr__events_age_unlink(kcr_recorder *r, struct entry *e)
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
void kcr__events_age_touch(kcr_recorder *r, struct entry *e)
{
  kcr__events_age_unlink(r, e);
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
void kcr__events_age_relink_oldest(kcr_recorder *r, struct entry *e)
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

void kcr__events_entry_remove(kcr_recorder *r, struct entry *e)
{
  KCR_ASSERT(!e->busy && e->where == W_NONE && !kcr__events_entry_dirty(e)); /* I2 */
  kcr__events_age_unlink(r, e);
  kcr_htab_remove(&r->events.t, &e->h.hn);
  free(e);
}

/* ---- expiry ---- */

/* When the oldest entry on the age list has been idle for the window;
 * UINT64_MAX if none. */
static uint64_t age_expiry(const kcr_recorder *r)
{
  return r->age_oldest ? kcr__events_sat_add(r->age_oldest->last_seen_ms, r->window_ms)
                       : UINT64_MAX;
}

/* When gc() has something to do: the first expiry, but not before a tick
 * since the last pass; UINT64_MAX when nothing is remembered - an idle
 * recorder does not tick. */
uint64_t kcr__events_gc_due(const kcr_recorder *r)
{
  uint64_t first = age_expiry(r), spam = kcr__events_spam_expiry(r);
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
void kcr__events_gc(kcr_recorder *r, uint64_t now)
{
  struct entry *e;

  while((e = r->age_oldest) && age_expiry(r) <= now) {
    r->events.visits++;
    if(kcr__events_entry_expired(r, e, now)) {
      KCR_ASSERT(e->where == W_NONE); /* I2 */
      kcr__events_entry_remove(r, e);
    } else {
      kcr__events_age_unlink(r, e);
    }
  }
  if(r->age_oldest)
    r->events.visits++; /* the one that stopped it */
  if(r->burst >= 0)
    kcr__events_spam_gc(r, now);
  r->last_gc_ms = now;
  r->gc_runs++;
}
