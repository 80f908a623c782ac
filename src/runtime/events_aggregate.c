/* DESIGN: recording an event (events.c has the map of the recorder's
 * files): kcr_recorder_event and the formatting variants, the isomorphic
 * key, repeats counted into series, similar new events coalesced, the
 * byte budget.
 *
 * eventf does all the bookkeeping under the lock and never waits for I/O:
 * a repeat increments count (aggregated); a new event coalesces with an
 * unsent one, or takes a spam token, gets its name ("<regarding>.<hex ns>")
 * and joins createq; otherwise it is dropped. Metrics and log lines are
 * written after unlocking.
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
 * Invariants (under r->mu):
 *  I8 an entry is in the unsent table iff it is E_QUEUED and no sender has
 *     taken it yet (!tried); it is then on createq. At most one per
 *     object+reason+type.
 *  I9 qbytes is the sum of size over the E_QUEUED entries that are not a
 *     re-creation (new events whose first create is not settled);
 *     qbytes <= budget. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/assert-int.h"
#include "kcr/events.h"
#include "kcr/hash.h"
#include "kcr/htab.h"
#include "kcr/log.h"
#include "runtime/recorder-int.h"

#define SERIES_MAX 2147483647ull /* EventSeries.count is an int32 */

static struct entry *entry_of_unsent(struct knode *n)
{
  return n ? KCR_HTAB_ENTRY(n, struct entry, u) : NULL;
}

/* The fields of the isomorphic key, in key order (note not yet cut). */
static void key_fields(const struct kcr_event *ev, const char *f[NKEY_FIELDS])
{
  const struct kcr_event_ref *r = ev->regarding;
  f[0] = kcr__events_nz(r ? r->kind : NULL);
  f[1] = kcr__events_nz(r ? r->ns : NULL);
  f[2] = kcr__events_nz(r ? r->name : NULL);
  f[3] = kcr__events_nz(r ? r->uid : NULL);
  f[4] = kcr__events_nz(ev->reason);
  f[5] = kcr__events_nz(ev->type);
  f[6] = kcr__events_nz(ev->action);
  f[NOTE_FIELD] = kcr__events_nz(ev->note);
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

enum outcome { O_QUEUED, O_AGGREGATED, O_DROP_FULL, O_DROP_SPAM };

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
  if(kcr__events_timers_reserve(&r->timers, r->events.t.n + 1) ||
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
  kcr__events_age_touch(r, e);
  r->nqueued++;
  r->qbytes += e->size; /* I9 */
  return kcr__events_schedule(r, e, now);
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
  kcr__events_fifo_replace(&r->createq, old, e);
  e->where = W_CREATEQ;
  kcr_htab_remove(&r->unsent.t, &old->u.hn);
  kcr_htab_remove(&r->events.t, &old->h.hn);
  kcr__events_age_unlink(r, old);
  kcr__events_age_touch(r, e);
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
  struct entry *old = entry_of_unsent(
      kcr__events_table_find(&r->unsent, e->u.hn.hash, e->h.key, e->u.klen));
  size_t held = old ? old->size : 0;

  if(r->qbytes - held + e->size > r->budget) {
    free(e);
    return O_DROP_FULL;
  }
  if(old) {
    coalesce(r, old, e);
    return O_AGGREGATED;
  }
  if(!kcr__events_spam_take(r, e->h.key, spam_len, now, log_spam)) {
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

  if(!r || !rg || kcr__events_empty(rg->kind) || kcr__events_empty(rg->name) ||
     kcr_event_validate(ev->type, ev->reason, ev->action))
    return KCR_EINVAL;
  rc = build_key(ev,
                 kcr_event_note_cut(kcr__events_nz(ev->note),
                                    strlen(kcr__events_nz(ev->note)), KCR_EVENT_NOTE_MAX),
                 &key, &spam_len, &unsent_len);
  if(rc)
    goto out;
  h = kcr_hash(key.ptr, key.len);
  clock_gettime(CLOCK_REALTIME, &wall);

  pthread_mutex_lock(&r->mu);
  now = kcr__events_now_ms(r);
  e = (struct entry *)kcr__events_table_find(&r->events, h, key.ptr, key.len);
  if(e && kcr__events_entry_expired(r, e, now)) {
    kcr__events_entry_remove(r, e);
    e = NULL;
  }
  if(e) {
    bool was_dirty = kcr__events_entry_dirty(e);
    if(e->count < SERIES_MAX)
      e->count++;
    e->last_observed = wall;
    e->last_seen_ms = now;
    kcr__events_age_touch(r, e);
    kcr__events_dirty_update(r, e, was_dirty);
    wake = kcr__events_schedule(r, e, now); /* a series that just became dirty */
    oc = O_AGGREGATED;
  } else if(reserve(r) || !(e = kcr__events_entry_new(r, ev, &key, h, &wall, now))) {
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
  kcr__events_wake_up(r, wake);
  pthread_mutex_unlock(&r->mu);

  if(rc)
    goto out;
  if(oc == O_AGGREGATED)
    kcr__events_count_metric(r, ev->type, ev->reason, "aggregated");
  else if(oc != O_QUEUED)
    kcr__events_count_metric(r, ev->type, ev->reason, "dropped");
  if(log_full)
    KCR_LOG(KCR_LOG_WARN, "event queue full: dropping new events until it drains",
            KCR_I("queueBytes", r->budget), KCR_I("queuedBytes", queued),
            KCR_S("kind", rg->kind), KCR_S("namespace", kcr__events_nz(rg->ns)),
            KCR_S("name", rg->name), KCR_S("reason", ev->reason));
  if(log_spam)
    KCR_LOG(KCR_LOG_WARN,
            "event spam limit reached: dropping events for this object "
            "and reason until tokens refill",
            KCR_S("kind", rg->kind), KCR_S("namespace", kcr__events_nz(rg->ns)),
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
