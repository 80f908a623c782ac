/* DESIGN: the informer, an explicit state machine on one thread.
 *
 *   EMPTY/LISTING: kcr_list_each_text collects every page into new objects, then
 *     kcr_store_replace swaps them in; handlers get on_add for new keys,
 *     on_update(old, new) for keys already cached, on_delete for keys that
 *     vanished (missed deletes while we were not watching). -> WATCHING.
 *   WATCHING: one watch from `rv` with a random timeout; ADDED/MODIFIED put
 *     into the store, DELETED removes; the watch tracks rv (bookmarks too).
 *     Server timeout -> watch again from rv. 410 -> LISTING. Errors ->
 *     backoff, then watch again from rv (a too-old rv then gives 410); the
 *     backoff starts over after a watch that worked (an event, or a second
 *     of streaming) before it broke, and grows only while watches fail at
 *     once.
 *
 * A second thread runs the periodic resync when asked for.
 *
 * Listed items and watched objects become store objects in one step, from
 * their text as the server wrote it (kcr_list_each_text,
 * kcr_watch_opts.object_text, then kcr__obj_from_text: no tree unless the
 * text needs one); with a keep-list, through its compiled projection
 * (projection.c), which copies only the kept members. An event's metadata
 * and managedFields, whose extent the watch's check found, are stepped
 * over rather than walked again (kcr__json_iter.known).
 *
 * Nothing is lost on errors: a list whose objects cannot all be stored
 * leaves the store, rv and `synced` as they were and is retried after
 * backoff; an event the store cannot take fails the watch callback, so the
 * watch ends without moving past it and the next watch (from the last
 * delivered rv) brings it again.
 *
 * Stopping: `stopping` is set under mu, the current watch is canceled
 * (kcr_watch_cancel is safe from any thread) and backoff sleeps wait on a
 * condvar, so stop is prompt. Lock order: inf->mu only; it is never held
 * while calling handlers or doing I/O. `stats` is written and read under mu
 * (readers on other threads: kcr_informer_stats). */
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/assert-int.h"
#include "core/json-int.h"
#include "kcr/arena.h"
#include "kcr/backoff.h"
#include "kcr/informer.h"
#include "kcr/json.h"
#include "kcr/log.h"
#include "kcr/time.h"
#include "kcr/watch.h"
#include "runtime/projection-int.h"
#include "runtime/store-int.h"

#define MAX_HANDLERS 16

enum state { ST_LISTING, ST_WATCHING, ST_STOPPED };

struct kcr_informer {
  struct kcr_informer_opts o;
  struct kcr_gvr gvr;
  char *group, *version, *resource, *ns, *lsel, *fsel, *name;
  kcr_store *store;
  struct kcr__proj *proj; /* opts.keep compiled; NULL: keep everything */
  unsigned obj_flags;     /* for kcr__obj_from_json */
  struct kcr_informer_handlers h[MAX_HANDLERS];
  size_t nh;
  struct typed_slot { /* what h[i].ud points to for typed handlers */
    kcr_informer *inf;
    struct kcr_typed_handlers h;
  } typed[MAX_HANDLERS];
  size_t ntyped;

  pthread_mutex_t mu;
  pthread_cond_t cv; /* stop requests, sync */
  bool stopping, started, synced;
  kcr_watch *watch; /* current watch, under mu */
  pthread_t th, resync_th;
  bool has_resync_th;

  char *rv; /* where the next watch starts; informer thread */
  struct kcr_backoff backoff;
  unsigned seed;
  kcr_err last_err;                /* to log a repeated error once */
  struct kcr_informer_stats stats; /* under mu */
  kcr_metric *m_objects, *m_bytes;
};

static char *dup0(const char *s) { return s ? strdup(s) : NULL; }

/* The options with defaults filled in, or KCR_EINVAL naming the field. */
static kcr_err check_opts(const struct kcr_informer_opts *in, struct kcr_informer_opts *o,
                          struct kcr_errinfo *ei)
{
  static const char *const fn = "kcr_informer_new";
  if(!in)
    return kcr_errinfo_set(ei, KCR_EINVAL, "%s: no options", fn);
  *o = *in;
  if(!o->client)
    return kcr_errinfo_set(ei, KCR_EINVAL, "%s: client is required", fn);
  if(!o->gvr)
    return kcr_errinfo_set(ei, KCR_EINVAL, "%s: gvr is required", fn);
  if(!o->gvr->version || !*o->gvr->version)
    return kcr_errinfo_set(ei, KCR_EINVAL, "%s: gvr->version is required", fn);
  if(!o->gvr->resource || !*o->gvr->resource)
    return kcr_errinfo_set(ei, KCR_EINVAL, "%s: gvr->resource is required", fn);
  if(o->page_size < 0)
    return kcr_errinfo_set(ei, KCR_EINVAL, "%s: page_size must not be negative, not %ld",
                           fn, o->page_size);
  for(size_t i = 0; o->keep && o->keep[i]; i++) {
    const char *why = kcr__proj_bad_path(o->keep[i]);
    if(why)
      return kcr_errinfo_set(ei, KCR_EINVAL, "%s: keep[%zu] \"%s\" %s", fn, i, o->keep[i],
                             why);
  }
  if(!o->page_size)
    o->page_size = 500;
  if(!o->watch_timeout_min_ms)
    o->watch_timeout_min_ms = 300000;
  if(!o->watch_timeout_max_ms)
    o->watch_timeout_max_ms = o->watch_timeout_min_ms > UINT64_MAX / 2
                                  ? UINT64_MAX
                                  : o->watch_timeout_min_ms * 2;
  if(o->watch_timeout_max_ms < o->watch_timeout_min_ms)
    return kcr_errinfo_set(ei, KCR_EINVAL,
                           "%s: watch_timeout_max_ms (%llu) is below "
                           "watch_timeout_min_ms (%llu)",
                           fn, (unsigned long long)o->watch_timeout_max_ms,
                           (unsigned long long)o->watch_timeout_min_ms);
  return KCR_OK;
}

kcr_err kcr_informer_new(const struct kcr_informer_opts *opts, kcr_informer **out,
                         struct kcr_errinfo *ei)
{
  struct kcr_informer_opts o0, *o = &o0;
  kcr_informer *inf;
  kcr_err rc;
  size_t n;

  if(!out)
    return kcr_errinfo_set(ei, KCR_EINVAL, "kcr_informer_new: no out");
  *out = NULL;
  if((rc = check_opts(opts, o, ei)))
    return rc;
  inf = calloc(1, sizeof(*inf));
  if(!inf)
    return KCR_ENOMEM;
  inf->o = *o;
  inf->o.keep = NULL; /* the caller's: compiled into proj */
  inf->o.client = kcr_client_ref(o->client);
  inf->o.metrics = kcr_metrics_ref(o->metrics);
  inf->obj_flags = o->keep_managed_fields ? KCR_OBJ_KEEP_MANAGED_FIELDS : 0;
  if(o->keep) /* the paths were checked: NULL only when out of memory */
    kcr__proj_new(o->keep, inf->obj_flags, &inf->proj);
  inf->group = strdup(o->gvr->group ? o->gvr->group : "");
  inf->version = dup0(o->gvr->version);
  inf->resource = dup0(o->gvr->resource);
  inf->ns = dup0(o->ns);
  inf->lsel = dup0(o->label_selector);
  inf->fsel = dup0(o->field_selector);
  n = strlen(o->gvr->resource) + (inf->group ? strlen(inf->group) : 0) + 2;
  if(inf->group && (inf->name = malloc(n)))
    snprintf(inf->name, n, "%s%s%s", o->gvr->resource, *inf->group ? "." : "",
             inf->group);
  kcr_store_new(NULL, &inf->store, NULL); /* NULL when out of memory */
  inf->gvr = (struct kcr_gvr){.group = inf->group,
                              .version = inf->version,
                              .resource = inf->resource,
                              .namespaced = o->gvr->namespaced};
  inf->o.gvr = &inf->gvr;
  inf->backoff = (struct kcr_backoff)KCR_BACKOFF_REFLECTOR;
  inf->seed = (unsigned)kcr_time_mono_ns();
  pthread_mutex_init(&inf->mu, NULL);
  {
    pthread_condattr_t ca; /* deadlines on the monotonic clock */
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&inf->cv, &ca);
    pthread_condattr_destroy(&ca);
  }
  if(!inf->group || !inf->version || !inf->resource || !inf->name || !inf->store ||
     (o->ns && !inf->ns) || (o->label_selector && !inf->lsel) ||
     (o->field_selector && !inf->fsel) || (o->keep && !inf->proj)) {
    kcr_informer_free(inf);
    return KCR_ENOMEM;
  }
  if(o->metrics) {
    static const char *const l[] = {"informer", NULL};
    rc = kcr_metric_gauge(
        o->metrics,
        &(struct kcr_metric_opts){.name = "kcr_informer_objects",
                                  .help = "Objects held in the informer's cache",
                                  .label_names = l},
        &inf->m_objects, ei);
    if(!rc)
      rc = kcr_metric_gauge(
          o->metrics,
          &(struct kcr_metric_opts){
              .name = "kcr_informer_store_bytes",
              .help = "Bytes held by the objects in the informer's cache",
              .label_names = l},
          &inf->m_bytes, ei);
    if(rc) {
      kcr_informer_free(inf);
      return rc;
    }
  }
  *out = inf;
  return KCR_OK;
}

kcr_err kcr_informer_add_handlers(kcr_informer *inf,
                                  const struct kcr_informer_handlers *h)
{
  if(inf->started || inf->nh == MAX_HANDLERS)
    return KCR_EINVAL;
  inf->h[inf->nh++] = *h;
  return KCR_OK;
}

/* Typed handlers: each object decoded as a view in an arena of the call's
 * (handlers run on two threads: watch and resync). */
static void t_obj(struct typed_slot *ts, kcr_obj *o, kcr_fnptr fn)
{
  struct kcr_arena a = KCR_ARENA_INIT;
  const void *v = kcr__obj_view(ts->h.t, o, &a, ts->inf->name);
  if(v)
    ts->h.call_obj(fn, v, ts->h.ud);
  kcr_arena_cleanup(&a);
}

static void t_add(kcr_obj *o, void *ud)
{
  struct typed_slot *ts = ud;
  t_obj(ts, o, ts->h.on_add);
}

static void t_update(kcr_obj *old, kcr_obj *cur, void *ud)
{
  struct typed_slot *ts = ud;
  struct kcr_arena a = KCR_ARENA_INIT;
  const void *vc = kcr__obj_view(ts->h.t, cur, &a, ts->inf->name);
  const void *vo =
      old == cur || !vc ? vc : kcr__obj_view(ts->h.t, old, &a, ts->inf->name);
  if(vo)
    ts->h.call_pair(ts->h.on_update, vo, vc, ts->h.ud);
  kcr_arena_cleanup(&a);
}

static void t_delete(kcr_obj *o, void *ud)
{
  struct typed_slot *ts = ud;
  t_obj(ts, o, ts->h.on_delete);
}

kcr_err kcr_informer_add_typed_handlers(kcr_informer *inf,
                                        const struct kcr_typed_handlers *h)
{
  struct typed_slot *ts;
  kcr_err rc;

  if(!h || !h->t || ((h->on_add || h->on_delete) && !h->call_obj) ||
     (h->on_update && !h->call_pair) || inf->started || inf->nh == MAX_HANDLERS)
    return KCR_EINVAL; /* before the slot is taken: ntyped <= nh */
  ts = &inf->typed[inf->ntyped];
  ts->inf = inf;
  ts->h = *h;
  rc = kcr_informer_add_handlers(
      inf, &(struct kcr_informer_handlers){.on_add = h->on_add ? t_add : NULL,
                                           .on_update = h->on_update ? t_update : NULL,
                                           .on_delete = h->on_delete ? t_delete : NULL,
                                           .ud = ts});
  if(!rc)
    inf->ntyped++;
  return rc;
}

kcr_store *kcr_informer_store(kcr_informer *inf) { return inf->store; }
const char *kcr_informer_name(const kcr_informer *inf) { return inf->name; }

static void emit_add(kcr_informer *inf, kcr_obj *o)
{
  for(size_t i = 0; i < inf->nh; i++)
    if(inf->h[i].on_add)
      inf->h[i].on_add(o, inf->h[i].ud);
}

static void emit_update(kcr_informer *inf, kcr_obj *old, kcr_obj *cur)
{
  for(size_t i = 0; i < inf->nh; i++)
    if(inf->h[i].on_update)
      inf->h[i].on_update(old, cur, inf->h[i].ud);
}

static void emit_delete(kcr_informer *inf, kcr_obj *o)
{
  for(size_t i = 0; i < inf->nh; i++)
    if(inf->h[i].on_delete)
      inf->h[i].on_delete(o, inf->h[i].ud);
}

static void update_gauges(kcr_informer *inf)
{
  const char *lv[] = {inf->name, NULL};
  kcr_metric_set(inf->m_objects, lv, (double)kcr_store_len(inf->store));
  kcr_metric_set(inf->m_bytes, lv, (double)kcr_store_bytes(inf->store));
}

/* Adds one to a counter in inf->stats (under mu: read from other threads). */
static void count(kcr_informer *inf, uint64_t *field)
{
  pthread_mutex_lock(&inf->mu);
  (*field)++;
  pthread_mutex_unlock(&inf->mu);
}

static bool stopping(kcr_informer *inf)
{
  pthread_mutex_lock(&inf->mu);
  bool s = inf->stopping;
  pthread_mutex_unlock(&inf->mu);
  return s;
}

/* Sleeps ms or until stop; returns false if stopping. */
static bool sleep_unless_stopped(kcr_informer *inf, uint64_t ms)
{
  struct timespec ts = kcr_time_mono_after(ms);
  bool s;
  pthread_mutex_lock(&inf->mu);
  while(!inf->stopping && pthread_cond_timedwait(&inf->cv, &inf->mu, &ts) == 0)
    ;
  s = inf->stopping;
  pthread_mutex_unlock(&inf->mu);
  return !s;
}

/* Logs an error once per distinct code in a row, then backs off. */
static bool fail_and_wait(kcr_informer *inf, const char *what, kcr_err rc,
                          const struct kcr_errinfo *ei)
{
  uint64_t delay = kcr_backoff_next(&inf->backoff);
  count(inf, &inf->stats.errors);
  if(rc != inf->last_err && rc == KCR_EUNAUTHORIZED)
    /* The apiserver says no more than "Unauthorized": say whose
     * credentials, and what makes them fail. */
    KCR_LOG(KCR_LOG_WARN, "informer: request failed; retrying with backoff",
            KCR_S("informer", inf->name), KCR_S("op", what),
            KCR_S("err", kcr_err_name(rc)), KCR_S("detail", ei->message),
            KCR_S("kubeconfig", kcr_config_origin(kcr_client_config(inf->o.client))),
            KCR_S("hint", "the apiserver refused the user's credentials: an expired "
                          "client certificate, or a token that expired or whose "
                          "ServiceAccount was deleted"),
            KCR_I("retryInMs", delay));
  else if(rc != inf->last_err)
    KCR_LOG(KCR_LOG_WARN, "informer: request failed; retrying with backoff",
            KCR_S("informer", inf->name), KCR_S("op", what),
            KCR_S("err", kcr_err_name(rc)), KCR_S("detail", ei->message),
            KCR_I("retryInMs", delay));
  else
    KCR_LOG(KCR_LOG_DEBUG, "informer: still failing", KCR_S("informer", inf->name),
            KCR_S("op", what), KCR_S("err", kcr_err_name(rc)), KCR_I("retryInMs", delay));
  inf->last_err = rc;
  return sleep_unless_stopped(inf, delay);
}

struct collect {
  kcr_informer *inf;
  kcr_obj **objs;
  size_t n, cap;
};

static kcr_err collect_item(const char *text, size_t len, void *ud)
{
  struct collect *c = ud;
  kcr_obj *o;
  kcr_err rc;
  if(c->n == c->cap) {
    size_t ncap = c->cap ? c->cap * 2 : 256;
    kcr_obj **n = realloc(c->objs, ncap * sizeof(*n));
    if(!n)
      return KCR_ENOMEM;
    c->objs = n;
    c->cap = ncap;
  }
  rc = kcr__obj_from_text(text, len, c->inf->obj_flags | KCR__OBJ_CHECKED, c->inf->proj,
                          NULL, 0, &o, NULL);
  if(rc == KCR_EINVAL) {
    KCR_LOG(KCR_LOG_WARN, "informer: skipping listed item without a name",
            KCR_S("informer", c->inf->name));
    return KCR_OK;
  }
  if(!rc)
    c->objs[c->n++] = o;
  return rc;
}

static enum state do_list(kcr_informer *inf)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  struct collect c = {.inf = inf};
  struct kcr_ref ref = {.gvr = &inf->gvr, .ns = inf->ns};
  struct kcr_list_opts lo = {.label_selector = inf->lsel,
                             .field_selector = inf->fsel,
                             .limit = inf->o.page_size,
                             .metadata_only = inf->o.metadata_only};
  kcr_obj **prev = NULL, **gone = NULL;
  size_t ngone = 0;
  char *rv = NULL;
  kcr_err rc;

  enum state next;

  count(inf, &inf->stats.lists);
  rc = kcr_list_each_text(inf->o.client, &ref, &lo, collect_item, &c, &rv, &ei);
  /* Remember what was cached to tell adds from updates. */
  if(!rc && c.n && !(prev = calloc(c.n, sizeof(*prev))))
    rc = kcr_errinfo_set(&ei, KCR_ENOMEM, "out of memory handling the list");
  for(size_t i = 0; !rc && i < c.n; i++) {
    prev[i] = kcr_store_ref_key(inf->store, kcr_obj_key(c.objs[i]));
    kcr_obj_ref(c.objs[i]); /* one for the store, one for the events below */
  }
  if(!rc && (rc = kcr_store_replace(inf->store, c.objs, c.n, &gone, &ngone))) {
    kcr_errinfo_set(&ei, rc, "out of memory replacing the store");
    for(size_t i = 0; i < c.n; i++)
      kcr_obj_unref(c.objs[i]); /* the store did not take them */
  }
  if(rc) { /* store, rv and synced stay as they were: list again later */
    kcr_objs_unref(c.objs, c.n);
    kcr_objs_unref(prev, prev ? c.n : 0);
    free(rv);
    next = fail_and_wait(inf, "list", rc, &ei) ? ST_LISTING : ST_STOPPED;
    kcr_errinfo_cleanup(&ei);
    return next;
  }
  free(inf->rv);
  inf->rv = rv;
  update_gauges(inf);
  KCR_LOG(KCR_LOG_DEBUG, "informer: listed", KCR_S("informer", inf->name),
          KCR_I("objects", c.n), KCR_I("vanished", ngone), KCR_S("resourceVersion", rv));
  for(size_t i = 0; i < c.n; i++) {
    if(prev[i])
      emit_update(inf, prev[i], c.objs[i]);
    else
      emit_add(inf, c.objs[i]);
  }
  for(size_t i = 0; i < ngone; i++)
    emit_delete(inf, gone[i]);
  kcr_objs_unref(gone, ngone);
  kcr_objs_unref(prev, c.n);
  /* Synced means the store holds the list and every handler has seen it. */
  pthread_mutex_lock(&inf->mu);
  inf->synced = true;
  pthread_cond_broadcast(&inf->cv);
  pthread_mutex_unlock(&inf->mu);
  kcr_objs_unref(c.objs, c.n);
  inf->last_err = KCR_OK;
  return ST_WATCHING;
}

static kcr_err on_event(struct kcr_watch_event *ev, void *ud)
{
  /* (ei of the watch is not reachable here: the watch ends with rc, and
   * fail_and_wait logs "store could not take an event" for ENOMEM.) */
  kcr_informer *inf = ud;
  kcr_obj *o = NULL, *old = NULL;
  /* what the watch's check found: stepped over, not walked again */
  const struct kcr__json_want known[2] = {
      {.at = ev->metadata_text, .n = ev->metadata_len},
      {.at = ev->managed_fields_text, .n = ev->managed_fields_len}};
  kcr_err rc;

  if(ev->type == KCR_WATCH_BOOKMARK)
    return KCR_OK;
  count(inf, &inf->stats.events);
  rc = ev->object ? kcr__obj_from_json(ev->object, inf->obj_flags, inf->proj, &o, NULL)
                  : kcr__obj_from_text(ev->object_text, ev->object_len,
                                       inf->obj_flags | KCR__OBJ_CHECKED, inf->proj,
                                       known, 2, &o, NULL);
  if(rc == KCR_EINVAL) {
    KCR_LOG(KCR_LOG_WARN, "informer: skipping event for an object without a name",
            KCR_S("informer", inf->name), KCR_S("type", kcr_watch_type_name(ev->type)));
    return KCR_OK;
  }
  if(rc)
    return rc;
  switch(ev->type) {
  case KCR_WATCH_ADDED:
  case KCR_WATCH_MODIFIED:
    kcr_obj_ref(o); /* one for the store */
    rc = kcr_store_put(inf->store, o, &old);
    if(rc) {
      /* Not stored: fail the callback, so the watch does not move past this
       * event and the next one delivers it again. */
      kcr_obj_unref(o);
      break;
    }
    if(old)
      emit_update(inf, old, o);
    else
      emit_add(inf, o);
    break;
  case KCR_WATCH_DELETED:
    kcr_store_delete_key(inf->store, kcr_obj_key(o), &old);
    emit_delete(inf, o);
    break;
  default: break;
  }
  kcr_obj_unref(old);
  kcr_obj_unref(o);
  update_gauges(inf);
  return rc;
}

/* A random watch timeout in [min, max] ms, as the whole seconds the API
 * takes (rounded up, so at least 1). */
static uint64_t watch_timeout_ms(kcr_informer *inf)
{
  uint64_t ms = inf->o.watch_timeout_min_ms;
  uint64_t span = inf->o.watch_timeout_max_ms - ms;

  if(span) {
    uint64_t r = (uint64_t)rand_r(&inf->seed) << 31 ^ (uint64_t)rand_r(&inf->seed);
    ms += span == UINT64_MAX ? r : r % (span + 1);
  }
  return ms; /* the watch sends it as whole seconds, rounded up */
}

static enum state do_watch(kcr_informer *inf)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  struct kcr_ref ref = {.gvr = &inf->gvr, .ns = inf->ns};
  struct kcr_watch_opts wo = {.client = inf->o.client,
                              .ref = &ref,
                              .on_event = on_event,
                              .ud = inf,
                              .resource_version = inf->rv,
                              .label_selector = inf->lsel,
                              .field_selector = inf->fsel,
                              .timeout_ms = watch_timeout_ms(inf),
                              .allow_bookmarks = true,
                              .drop_managed_fields = !inf->o.keep_managed_fields,
                              .metadata_only = inf->o.metadata_only,
                              .object_text = true,
                              .batch_ms = inf->o.watch_unbatched ? 0
                                          : inf->o.watch_batch_ms
                                              ? inf->o.watch_batch_ms
                                              : KCR_INFORMER_WATCH_BATCH_MS};
  uint64_t t0 = kcr_time_mono_ms(), events0;
  kcr_watch *w;
  kcr_err rc;

  pthread_mutex_lock(&inf->mu);
  events0 = inf->stats.events;
  pthread_mutex_unlock(&inf->mu);
  rc = kcr_watch_new(&wo, &w, &ei);
  if(rc)
    return fail_and_wait(inf, "watch", rc, &ei) ? ST_WATCHING : ST_STOPPED;
  pthread_mutex_lock(&inf->mu);
  if(inf->stopping)
    kcr_watch_cancel(w);
  inf->watch = w;
  pthread_mutex_unlock(&inf->mu);
  count(inf, &inf->stats.watches);
  rc = kcr_watch_run(w, &ei);
  pthread_mutex_lock(&inf->mu);
  inf->watch = NULL;
  pthread_mutex_unlock(&inf->mu);
  if(kcr_watch_rv(w)) {
    char *rv = strdup(kcr_watch_rv(w));
    if(rv) {
      free(inf->rv);
      inf->rv = rv;
    }
  }
  kcr_watch_free(w);
  enum state next = ST_WATCHING;
  switch(rc) {
  case KCR_OK: /* the server's timeout: watch again from rv */
    inf->last_err = KCR_OK;
    break;
  case KCR_ECANCELED: next = ST_STOPPED; break;
  case KCR_EGONE:
    count(inf, &inf->stats.relists_gone);
    KCR_LOG(KCR_LOG_INFO, "informer: resourceVersion too old; listing again",
            KCR_S("informer", inf->name), KCR_S("resourceVersion", inf->rv));
    next = ST_LISTING;
    break;
  default:
    /* A watch that worked - delivered an event, or streamed for a second -
     * and then broke (a connection cut mid-stream): not a reason to wait
     * longer each time, or a cut every few seconds would leave the cache
     * stale for up to the backoff's 30 s. Only watches that fail at once
     * back off further (client-go's "very short watch" rule). */
    pthread_mutex_lock(&inf->mu);
    if(inf->stats.events > events0 || kcr_time_mono_ms() - t0 >= 1000)
      kcr_backoff_reset(&inf->backoff);
    pthread_mutex_unlock(&inf->mu);
    next = fail_and_wait(inf, "watch", rc, &ei) ? ST_WATCHING : ST_STOPPED;
  }
  kcr_errinfo_cleanup(&ei);
  return next;
}

static void *run(void *p)
{
  kcr_informer *inf = p;
  enum state st = ST_LISTING;
  while(st != ST_STOPPED && !stopping(inf))
    st = st == ST_LISTING ? do_list(inf) : do_watch(inf);
  return NULL;
}

static void *run_resync(void *p)
{
  kcr_informer *inf = p;
  while(sleep_unless_stopped(inf, inf->o.resync_ms)) {
    kcr_obj **objs;
    size_t n;
    if(!kcr_informer_has_synced(inf) || kcr_store_ref_all(inf->store, &objs, &n))
      continue;
    for(size_t i = 0; i < n && !stopping(inf); i++)
      emit_update(inf, objs[i], objs[i]);
    kcr_objs_unref(objs, n);
  }
  return NULL;
}

kcr_err kcr_informer_start(kcr_informer *inf)
{
  if(inf->started)
    return KCR_EINVAL;
  /* All or nothing, and nothing listed on failure: the resync thread (which
   * only sleeps at first) before the list/watch thread. */
  if(inf->o.resync_ms) {
    if(pthread_create(&inf->resync_th, NULL, run_resync, inf))
      return KCR_ENOMEM;
    inf->has_resync_th = true;
  }
  if(pthread_create(&inf->th, NULL, run, inf)) {
    if(inf->has_resync_th) {
      pthread_mutex_lock(&inf->mu);
      inf->stopping = true;
      pthread_cond_broadcast(&inf->cv);
      pthread_mutex_unlock(&inf->mu);
      pthread_join(inf->resync_th, NULL);
      inf->has_resync_th = false;
      pthread_mutex_lock(&inf->mu);
      inf->stopping = false;
      pthread_mutex_unlock(&inf->mu);
    }
    return KCR_ENOMEM;
  }
  inf->started = true;
  return KCR_OK;
}

bool kcr_informer_has_synced(kcr_informer *inf)
{
  pthread_mutex_lock(&inf->mu);
  bool s = inf->synced;
  pthread_mutex_unlock(&inf->mu);
  return s;
}

bool kcr_informer_wait_synced(kcr_informer *inf, uint64_t timeout_ms)
{
  uint64_t deadline = kcr_time_deadline_ms(timeout_ms); /* KCR_FOREVER: never */
  bool s;
  pthread_mutex_lock(&inf->mu);
  while(!inf->synced && !inf->stopping && kcr_time_mono_ms() < deadline) {
    /* sync and stop broadcast cv; the timed wait only bounds the deadline */
    uint64_t left = deadline - kcr_time_mono_ms();
    struct timespec ts = kcr_time_mono_after(left < 1000 ? left : 1000);
    pthread_cond_timedwait(&inf->cv, &inf->mu, &ts);
  }
  s = inf->synced;
  pthread_mutex_unlock(&inf->mu);
  return s;
}

void kcr_informer_stop(kcr_informer *inf)
{
  pthread_mutex_lock(&inf->mu);
  inf->stopping = true;
  if(inf->watch)
    kcr_watch_cancel(inf->watch);
  pthread_cond_broadcast(&inf->cv);
  pthread_mutex_unlock(&inf->mu);
  if(inf->started) {
    pthread_join(inf->th, NULL);
    if(inf->has_resync_th)
      pthread_join(inf->resync_th, NULL);
    inf->started = false;
    inf->has_resync_th = false;
  }
}

void kcr_informer_free(kcr_informer *inf)
{
  if(!inf)
    return;
  kcr_informer_stop(inf);
  kcr_store_free(inf->store);
  kcr__proj_free(inf->proj);
  pthread_mutex_destroy(&inf->mu);
  pthread_cond_destroy(&inf->cv);
  free(inf->group);
  free(inf->version);
  free(inf->resource);
  free(inf->ns);
  free(inf->lsel);
  free(inf->fsel);
  free(inf->name);
  free(inf->rv);
  kcr_client_free(inf->o.client);
  kcr_metrics_free(inf->o.metrics);
  free(inf);
}

void kcr_informer_get_stats(kcr_informer *inf, struct kcr_informer_stats *st)
{
  pthread_mutex_lock(&inf->mu);
  *st = inf->stats;
  pthread_mutex_unlock(&inf->mu);
}
