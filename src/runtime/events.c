/* DESIGN: the events.k8s.io/v1 Event recorder - client-go's tools/events
 * (event_broadcaster.go, event_recorder.go) plus the spam filter of
 * tools/record (events_cache.go), as one object under one mutex with a
 * pool of sender threads.
 *
 * The files. Each states the invariants it keeps in its own DESIGN comment
 * (numbered I1-I10 across them):
 *   events.c            the recorder object: options, kcr_recorder_new,
 *                       _flush, _get_stats, _free, the discard, its metrics
 *                       and clock; the pure helpers of kcr/events.h
 *   events_aggregate.c  recording (kcr_recorder_event): the isomorphic key,
 *                       repeats counted into series, coalescing of unsent
 *                       new events, the byte budget (I8, I9)
 *   events_spam.c       the spam filter: a token bucket per object+reason,
 *                       on an LRU list (I7)
 *   events_cache.c      the entries, their hash tables and names, the age
 *                       list and the once-a-tick expiry (I2, I4, I5, I10)
 *   events_sched.c      the senders' schedule: createq, patchq, the timers
 *                       heap, whom to wake (I1, I6)
 *   events_send.c       the sender threads, the writes and what their
 *                       answers mean, the pause on a 429 (I3)
 *   events_body.c       the text of an Event and of a series patch
 *   recorder-int.h      the struct and the kcr__events_* functions they
 *                       share; events-int.h is what the tests see
 *
 * One lock: r->mu, under which I1-I10 hold. Lock order: r->mu is a leaf.
 * With it held we call only malloc/free, the writing of bodies into
 * buffers (kcr_buf, snprintf), the clocks and the condvars; the sink,
 * metrics and the log are called without it (the queued-bytes gauge is
 * read by a metrics collect callback, which takes r->mu under the
 * registry's render: registry, then r->mu, never the other way).
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
#include <time.h>
#include <unistd.h>

#include "core/htab-int.h"
#include "kcr/events.h"
#include "kcr/htab.h"
#include "kcr/log.h"
#include "kcr/time.h"
#include "runtime/events-int.h"
#include "runtime/recorder-int.h"

/* ---- pure helpers ---- */

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
bool kcr__events_dns_subdomain(const char *s, size_t n)
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
  if(kcr__events_empty(s))
    return false;
  slash = strchr(s, '/');
  name = slash ? slash + 1 : s;
  if(slash && (strchr(name, '/') || !kcr__events_dns_subdomain(s, (size_t)(slash - s))))
    return false;
  n = strlen(name);
  if(n == 0 || n > 63 || !is_alnum(name[0]) || !is_alnum(name[n - 1]))
    return false;
  for(size_t i = 0; i < n; i++)
    if(!is_alnum(name[i]) && name[i] != '-' && name[i] != '_' && name[i] != '.')
      return false;
  return true;
}

/* ---- clock and metrics ---- */

uint64_t kcr__events_default_clock(void *ud)
{
  (void)ud;
  return kcr_time_mono_ms();
}

uint64_t kcr__events_now_ms(const kcr_recorder *r) { return r->clock(r->clock_ud); }

void kcr__events_count_metric(kcr_recorder *r, const char *type, const char *reason,
                              const char *result)
{
  kcr_metric_inc(r->m_total, (const char *const[]){type, reason, result}, 1);
}

/* ---- lifecycle ---- */

static struct entry *entry_of(struct kcr_hnode *n)
{
  return KCR_HTAB_ENTRY(n, struct entry, h.hn);
}

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
    kcr__events_timers_rekey(r); /* dirty series are due now */
  pthread_cond_signal(&r->wake);
  while(!kcr__events_quiescent(r)) { /* a sender broadcasts idle when it gets there */
    if(forever) {
      pthread_cond_wait(&r->idle, &r->mu);
    } else if(pthread_cond_timedwait(&r->idle, &r->mu, &until)) {
      rc = kcr__events_quiescent(r) ? KCR_OK : KCR_ETIMEDOUT;
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
      kcr__events_count_metric(r, e->type, e->reason, "dropped");
    }
    unwritten += kcr__events_entry_dirty(e);
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
                           fn, kcr__events_nz(o->reporting_controller));
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
  r->sink = o->sink ? o->sink : kcr__events_api_sink;
  r->client = o->sink ? NULL : kcr_client_ref(o->client);
  r->sink_ud = o->sink ? o->sink_ud : r->client;
  r->clock = o->clock_ms ? o->clock_ms : kcr__events_default_clock;
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
  r->last_gc_ms = kcr__events_now_ms(r);
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
    if(pthread_create(&r->threads[r->nthreads], NULL, kcr__events_sender, r)) {
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
