/* DESIGN: the event recorder's senders' schedule (events.c has the map of
 * the recorder's files).
 *
 * An entry that needs a write is in exactly one of
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
 * Invariants (under r->mu):
 *  I1 an entry is scheduled (where != W_NONE) iff !busy and it needs a
 *     write: state == E_QUEUED, or dirty (E_CREATED with count > written).
 *     createq holds E_QUEUED entries only, patchq dirty ones only; where
 *     names the one structure that holds it. nqueued counts the E_QUEUED
 *     entries that are not busy.
 *  I6 timers is a min-heap on due (each entry's due_at() when pushed, or
 *     earlier: a key may only be early, after a flush ended - the entry is
 *     then rescheduled when it surfaces); timers.cap >= events.t.n,
 *     reserved (with the tables' room) before an entry is added, so
 *     scheduling never allocates. */
#include <pthread.h>
#include <stdlib.h>

#include "core/assert-int.h"
#include "runtime/recorder-int.h"

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

struct entry *kcr__events_fifo_pop(struct fifo *q)
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
void kcr__events_fifo_replace(struct fifo *q, struct entry *old, struct entry *e)
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
uint64_t kcr__events_due_at(const kcr_recorder *r, const struct entry *e)
{
  uint64_t due = e->not_before_ms, interval;
  if(e->state == E_CREATED && r->nflush == 0) {
    interval = kcr__events_sat_add(e->last_write_ms, r->flush_ms);
    if(interval > due)
      due = interval;
  }
  return due;
}

/* Room for every entry on the heap, so that schedule() never allocates. */
kcr_err kcr__events_timers_reserve(struct timers *t, size_t n)
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
void kcr__events_timers_rekey(kcr_recorder *r)
{
  for(size_t i = 0; i < r->timers.n; i++) {
    r->events.visits++;
    r->timers.a[i]->due = kcr__events_due_at(r, r->timers.a[i]);
  }
  for(size_t i = r->timers.n / 2; i-- > 0;)
    timers_down(r, i);
}

/* Whether the writes due now outnumber the senders writing: each of those
 * takes the next one when its write is done, so a sender is woken only
 * for a write none of them would get to next. */
bool kcr__events_more_due_than_busy(const kcr_recorder *r)
{
  return r->createq.n + r->patchq.n > (size_t)r->ninflight;
}

void kcr__events_wake_up(kcr_recorder *r, enum wake w)
{
  if(w == WAKE_ONE && kcr__events_more_due_than_busy(r))
    pthread_cond_signal(&r->wake);
  else if(w == WAKE_ALL)
    pthread_cond_broadcast(&r->wake);
}

/* Puts e where the senders will find it when it needs a write (I1): on
 * createq or patchq when the write is due at now, else on the timers.
 * Returns whom to wake: one sender for a write due now, all of them for a
 * new earliest timer (the timekeeper among them sleeps until a later one),
 * nobody otherwise. */
enum wake kcr__events_schedule(kcr_recorder *r, struct entry *e, uint64_t now)
{
  uint64_t due;

  if(e->busy || e->where != W_NONE ||
     (e->state != E_QUEUED && !kcr__events_entry_dirty(e)))
    return WAKE_NONE;
  due = kcr__events_due_at(r, e);
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
void kcr__events_timers_expire(kcr_recorder *r, uint64_t now)
{
  while(r->timers.n && r->timers.a[0]->due <= now)
    kcr__events_schedule(r, timers_pop(r), now);
}
