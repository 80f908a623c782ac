/* DESIGN: the event recorder's sender threads and their writes (events.c
 * has the map of the recorder's files).
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
 * A sender runs one job at a time: it builds the body under the lock,
 * marks the entry busy, unlocks, writes (POST, with series when repeats
 * came before it, or a merge PATCH of series), relocks and applies the
 * outcome (state machine in finish()).
 *
 * Throttling. A 429 is flow control, not a failure: the whole recorder
 * pauses (paused_until) for the answer's Retry-After (retry_initial_ms
 * without one, at most retry_max_ms); no sender takes a job until then,
 * and the write is done again afterwards without spending one of its
 * max_attempts. The client's own 429/503 retries are off for the
 * recorder's requests (kcr_http_request.max_retries = -1), so it sees the
 * first 429, not the last of several that one sender slept through alone.
 *
 * Invariant (under r->mu):
 *  I3 ninflight counts the busy entries, at most one per sender. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/assert-int.h"
#include "kcr/events.h"
#include "kcr/htab.h"
#include "kcr/log.h"
#include "kcr/path.h"
#include "kcr/time.h"
#include "runtime/recorder-int.h"

static const struct kcr_gvr events_gvr = {
    .group = "events.k8s.io", .version = "v1", .resource = "events", .namespaced = true};

static void cond_wait_ms(pthread_cond_t *c, pthread_mutex_t *m, uint64_t ms)
{
  struct timespec ts = kcr_time_mono_after(ms);
  pthread_cond_timedwait(c, m, &ts);
}

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
  kcr__events_timers_expire(r, now);
  if((e = kcr__events_fifo_pop(&r->createq))) {
    r->events.visits++;
    KCR_ASSERT(e->state == E_QUEUED && e->where == W_CREATEQ);
    e->where = W_NONE;
    r->nqueued--;
    if(!e->tried) { /* no longer open to coalescing (I8) */
      kcr_htab_remove(&r->unsent.t, &e->u.hn);
      e->tried = true;
    }
    j->op = KCR_EVENT_CREATE;
    j->body = kcr__events_event_body(r, e);
  } else {
    while((e = kcr__events_fifo_pop(&r->patchq))) {
      r->events.visits++;
      KCR_ASSERT(kcr__events_entry_dirty(e) && e->where == W_PATCHQ);
      e->where = W_NONE;
      if(kcr__events_due_at(r, e) <= now)
        break;
      kcr__events_schedule(r, e, now); /* made due by a flush that has ended: wait */
    }
    if(!e)
      return false;
    j->op = KCR_EVENT_PATCH;
    j->body = kcr__events_series_body(e);
  }
  e->busy = true;
  r->ninflight++;
  j->e = e;
  j->count = e->count;
  return true;
}

/* When there is something to do next (monotonic ms), after pick() found
 * nothing due: the end of a pause, else the first timer, or gc() if
 * sooner; UINT64_MAX for nothing. */
static uint64_t next_deadline(const kcr_recorder *r, uint64_t now)
{
  uint64_t next = kcr__events_gc_due(r);
  uint64_t first = paused(r, now) ? r->paused_until
                   : r->timers.n  ? r->timers.a[0]->due
                                  : UINT64_MAX;
  return first < next ? first : next;
}

bool kcr__events_quiescent(const kcr_recorder *r)
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
kcr_err kcr__events_api_sink(void *ud, enum kcr_event_op op, const char *ns,
                             const char *name, const char *text, size_t len,
                             struct kcr_errinfo *ei)
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
  bool was_dirty = kcr__events_entry_dirty(e);
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
    e->not_before_ms = kcr__events_sat_add(now, backoff_ms(r, e->attempts));
    break;
  case V_THROTTLED: /* the same, after the pause, for every sender */
    if(kcr__events_sat_add(now, pause) > r->paused_until)
      r->paused_until = kcr__events_sat_add(now, pause);
    break;
  case V_REPATCH:
    e->attempts++;
    e->not_before_ms = kcr__events_sat_add(now, backoff_ms(r, e->attempts));
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
    kcr__events_entry_remove(r, e);
    return;
  }
  kcr__events_dirty_update(r, e, was_dirty);
  if(e->state == E_QUEUED)
    r->nqueued++;
  kcr__events_age_relink_oldest(r, e); /* if gc() took it off while it was not clean */
  kcr__events_wake_up(r, kcr__events_schedule(r, e, now));
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
    kcr__events_count_metric(r, j->e->type, j->e->reason,
                             v == V_GIVE_UP ? "failed" : "sent");
  kcr_errinfo_cleanup(&ei);
  pthread_mutex_lock(&r->mu);
  finish(r, j, v, pause, kcr__events_now_ms(r));
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
  if(r->clock != kcr__events_default_clock && ms > GC_TICK_MS)
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

void *kcr__events_sender(void *arg)
{
  kcr_recorder *r = arg;

  pthread_mutex_lock(&r->mu);
  while(!r->stop) {
    uint64_t now = kcr__events_now_ms(r);
    struct job j;
    if(now >= kcr__events_gc_due(r))
      kcr__events_gc(r, now);
    if(pick(r, now, &j)) {
      if(kcr__events_more_due_than_busy(r)) /* more than the busy ones will take */
        pthread_cond_signal(&r->wake);
      run(r, &j);
      continue;
    }
    if(r->nflush > 0 && kcr__events_quiescent(r))
      pthread_cond_broadcast(&r->idle);
    sender_wait(r, now);
  }
  pthread_mutex_unlock(&r->mu);
  return NULL;
}
