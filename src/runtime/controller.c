/* DESIGN: a controller = a work queue + N workers + event sources.
 *
 * Sources register informer handlers that compute keys and add them to the
 * queue; they never block (the queue dedups). Workers take a key, reconcile
 * it with a fresh per-reconcile context (arena reset, new reconcile id) and
 * apply the result contract (see controller.h). The queue guarantees a key
 * is never processed by two workers at once.
 *
 * Priorities (the policy is in controller.h): route() picks one of the
 * source's three priorities per event - unchanged_prio for an add before
 * the informer has synced (its initial list: client-go's isInInitialList)
 * and an update with old == cur or the same non-empty resourceVersion,
 * else create_prio for an add, prio for an update or delete - and every
 * key of that event is added with it. A worker takes the key's priority
 * with the key and requeues with it, as controller-runtime's
 * reconcileHandler does.
 *
 * No key is lost: an event source whose add fails (out of memory)
 * sets `requeue_all`; any worker that takes a key checks it, and the first
 * worker also wakes every REQUEUE_CHECK_MS to check it (the others wait for
 * keys only: an idle controller wakes once a check, not once per worker),
 * then routes every cached object of every source again, as a resync
 * would, until one pass succeeds. A key that cannot be split into namespace and name
 * without memory is retried with backoff, never reconciled half-named.
 *
 * Stopping: `stopping` is set, the queue is shut down (getters wake up);
 * a worker that gets a key after that hands it back unprocessed. In-flight
 * reconciles get stop's timeout (the grace period) to finish: stop waits on
 * `done_cv` until every
 * worker has returned or the grace ran out, joins the ones that returned
 * and reports how many are still running. Those stay joinable: a worker is
 * never detached, and kcr_controller_free joins every worker before it
 * frees anything a worker can touch (the shutdown contract: nothing is
 * freed while a callback can still use it; see docs/library-guide.md).
 *
 * Locks: `mu` guards the workers' `running` and `done` flags (running is
 * written only by the thread that starts and stops) and `done_cv`; it is a leaf
 * (never held while calling out). The queue has its own lock; metrics are
 * lock-free. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/assert-int.h"
#include "kube/client-int.h"
#include "kcr/controller.h"
#include "kcr/hash.h"
#include "kcr/htab.h"
#include "kcr/time.h"
#include "runtime/controller-int.h"
#include "runtime/informer-int.h"
#include "runtime/queue-int.h"
#include "runtime/store-int.h"

#define MAX_SOURCES      16
#define REQUEUE_CHECK_MS 1000

enum source_kind { SRC_FOR, SRC_OWNS, SRC_WATCHES };

struct source {
  kcr_controller *c;
  kcr_informer *inf;
  enum source_kind kind;
  struct kcr_predicate preds[4];
  size_t npreds;
  int prio, create_prio, unchanged_prio;
  char *owner_group, *owner_kind;
  kcr_map_fn map;
  void *map_ud;
  const struct kcr_type *t; /* a typed map: tcall(tfn, view, ...) */
  kcr_typed_map_call tcall;
  kcr_fnptr tfn;
};

struct worker {
  kcr_controller *c;
  pthread_t th;
  bool running; /* created and not joined yet (stop/free's thread only) */
  bool done;    /* worker_main returned from its loop; under c->mu */
  bool busy;    /* reconciling a key of hash (sharded only); under c->mu */
  uint64_t hash;
};

struct kcr_ctx {
  kcr_controller *c;
  struct kcr_arena arena;
  struct kcr_errinfo ei; /* kcr_ctx_ei: emptied after each reconcile */
  char id[17];
  char ns[256]; /* the request's namespace, split from the key */
  const struct kcr_request *req;
  unsigned seed;
  kcr_client *client; /* sharded: the reconcile's scoped handle */
};

struct kcr_controller {
  struct kcr_controller_opts o;
  char *name;
  kcr_queue *q;
  struct source src[MAX_SOURCES];
  size_t nsrc;
  struct worker *w;
  atomic_bool stopping;
  atomic_bool requeue_all; /* an event source lost a key: route everything */
  bool started;
  pthread_mutex_t mu; /* the workers' done flags; shard_view */
  pthread_cond_t done_cv;
  kcr_metric *m_total, *m_errors, *m_terminal, *m_time, *m_active, *m_max;
  kcr_ring *ring;            /* kcr_controller_shard */
  kcr_ring_view *shard_view; /* the view the last reshard queued for */
  kcr_metric *m_not_owned, *m_objs_owned;
  bool collecting;      /* count_owned is on the registry's collect hooks */
  struct kcr_htab gone; /* under mu: struct gone, by kcr_hash_str of the key */
};

/* A sharded controller's For object deleted from its cache: the hash of
 * its uid places its key's reconcile, though the cache no longer holds it
 * (so the replica that owned it handles the delete). Until that reconcile
 * succeeds, the object is cached again, or its bucket leaves. */
struct gone {
  struct kcr_hnode hn;
  uint64_t hash;
  char key[];
};
#define MAX_GONE      100000 /* beyond: a delete is reconciled by no replica */
#define COVER_WAIT_MS 100    /* a key whose bucket's caches are listing: again after */

/* ---- context ---- */

kcr_client *kcr_ctx_client(kcr_ctx *cx)
{
  return cx->client ? cx->client : cx->c->o.client;
}
struct kcr_arena *kcr_ctx_arena(kcr_ctx *cx) { return &cx->arena; }
struct kcr_errinfo *kcr_ctx_ei(kcr_ctx *cx) { return &cx->ei; }
const char *kcr_ctx_id(kcr_ctx *cx) { return cx->id; }
const char *kcr_ctx_controller_name(kcr_ctx *cx) { return cx->c->name; }

void kcr_ctx_log_kv(kcr_ctx *cx, enum kcr_log_level lvl, const char *msg,
                    const struct kcr_kv *kv, size_t n)
{
  struct kcr_kv all[32];
  size_t k = 0;
  all[k++] = KCR_S("controller", cx->c->name);
  all[k++] = KCR_S("reconcileID", cx->id);
  if(cx->req && cx->req->ns && *cx->req->ns)
    all[k++] = KCR_S("namespace", cx->req->ns);
  if(cx->req)
    all[k++] = KCR_S("name", cx->req->name);
  for(size_t i = 0; i < n && k < sizeof(all) / sizeof(all[0]); i++)
    all[k++] = kv[i];
  kcr_log_kv(lvl, msg, all, k);
}

/* ---- construction ---- */

/* KCR_EINVAL naming the option that is wrong, or KCR_OK. */
static kcr_err check_opts(const struct kcr_controller_opts *o, struct kcr_errinfo *ei)
{
  static const char *const fn = "kcr_controller_new";
  if(!o)
    return kcr_errinfo_set(ei, KCR_EINVAL, "%s: no options", fn);
  if(!o->name || !*o->name)
    return kcr_errinfo_set(ei, KCR_EINVAL, "%s: name is required", fn);
  if(!o->reconcile)
    return kcr_errinfo_set(ei, KCR_EINVAL, "%s: reconcile is required", fn);
  if(!o->client)
    return kcr_errinfo_set(ei, KCR_EINVAL, "%s: client is required", fn);
  if(o->workers < 0)
    return kcr_errinfo_set(ei, KCR_EINVAL, "%s: workers must not be negative, not %d", fn,
                           o->workers);
  return KCR_OK;
}

/* Registers controller-runtime's families and makes c's series, so they
 * show from the start. Errors: those of kcr_metric_counter. */
static kcr_err metrics_init(kcr_controller *c, kcr_metrics *reg, struct kcr_errinfo *ei)
{
  static const char *const ctl[] = {"controller", NULL};
  const struct {
    kcr_err (*add)(kcr_metrics *, const struct kcr_metric_opts *, kcr_metric **,
                   struct kcr_errinfo *);
    kcr_metric **out;
    struct kcr_metric_opts o;
  } fams[] = {
      {kcr_metric_counter,
       &c->m_total,
       {.name = "controller_runtime_reconcile_total",
        .help = "Total number of reconciliations per controller",
        .label_names = (const char *[]){"controller", "result", NULL}}},
      {kcr_metric_counter,
       &c->m_errors,
       {.name = "controller_runtime_reconcile_errors_total",
        .help = "Total number of reconciliation errors per controller",
        .label_names = ctl}},
      {kcr_metric_counter,
       &c->m_terminal,
       {.name = "controller_runtime_terminal_reconcile_errors_total",
        .help = "Total number of terminal reconciliation errors per controller",
        .label_names = ctl}},
      {kcr_metric_histogram,
       &c->m_time,
       {.name = "controller_runtime_reconcile_time_seconds",
        .help = "Length of time per reconciliation per controller",
        .label_names = ctl,
        .bounds = kcr_buckets_seconds,
        .nbounds = kcr_buckets_seconds_n}},
      {kcr_metric_gauge,
       &c->m_active,
       {.name = "controller_runtime_active_workers",
        .help = "Number of currently used workers per controller",
        .label_names = ctl}},
      {kcr_metric_gauge,
       &c->m_max,
       {.name = "controller_runtime_max_concurrent_reconciles",
        .help = "Maximum number of concurrent reconciles per controller",
        .label_names = ctl}},
  };
  kcr_err rc = KCR_OK;

  for(size_t i = 0; !rc && i < sizeof(fams) / sizeof(fams[0]); i++)
    rc = fams[i].add(reg, &fams[i].o, fams[i].out, ei);
  if(rc)
    return rc;
  kcr_metric_set(c->m_max, (const char *[]){c->name, NULL}, c->o.workers);
  kcr_metric_set(c->m_active, (const char *[]){c->name, NULL}, 0);
  for(const char *const *r =
          (const char *const[]){"success", "error", "requeue_after", "terminal", NULL};
      *r; r++)
    kcr_metric_inc(c->m_total, (const char *[]){c->name, *r, NULL}, 0);
  kcr_metric_inc(c->m_errors, (const char *[]){c->name, NULL}, 0);
  return KCR_OK;
}

kcr_err kcr_controller_new(const struct kcr_controller_opts *o, kcr_controller **out,
                           struct kcr_errinfo *ei)
{
  kcr_controller *c;
  kcr_err rc;

  if(!out)
    return kcr_errinfo_set(ei, KCR_EINVAL, "kcr_controller_new: no out");
  *out = NULL;
  if((rc = check_opts(o, ei)))
    return rc;
  c = calloc(1, sizeof(*c));
  if(!c)
    return KCR_ENOMEM;
  c->o = *o;
  c->o.client = kcr_client_ref(o->client);
  c->o.metrics = kcr_metrics_ref(o->metrics);
  if(c->o.workers < 1)
    c->o.workers = 1;
  c->name = strdup(o->name);
  c->o.name = c->name;
  atomic_init(&c->stopping, false);
  atomic_init(&c->requeue_all, false);
  pthread_mutex_init(&c->mu, NULL);
  {
    pthread_condattr_t ca; /* grace deadlines on the monotonic clock */
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&c->done_cv, &ca);
    pthread_condattr_destroy(&ca);
  }
  rc = kcr_queue_new(&(struct kcr_queue_opts){.name = c->name,
                                              .metrics = o->metrics,
                                              .base_delay_ms = o->base_delay_ms,
                                              .max_delay_ms = o->max_delay_ms,
                                              .qps = o->qps,
                                              .burst = o->burst},
                     &c->q, ei);
  c->w = calloc((size_t)c->o.workers, sizeof(*c->w));
  if(rc || !c->name || !c->w) {
    kcr_controller_free(c);
    return rc ? rc : KCR_ENOMEM;
  }
  if(o->metrics && (rc = metrics_init(c, o->metrics, ei))) {
    kcr_controller_free(c);
    return rc;
  }
  *out = c;
  return KCR_OK;
}

const char *kcr_controller_name(const kcr_controller *c) { return c->name; }
kcr_queue *kcr_controller_queue(kcr_controller *c) { return c->q; }

static kcr_err enqueue(kcr_controller *c, const char *ns, const char *name, int prio)
{
  char buf[512];
  int n;

  if(!name)
    return KCR_EINVAL;
  n = ns && *ns ? snprintf(buf, sizeof(buf), "%s/%s", ns, name)
                : snprintf(buf, sizeof(buf), "%s", name);
  if(n < 0 || (size_t)n >= sizeof(buf))
    return KCR_EINVAL;
  return kcr_queue_add_with(c->q, buf, &(struct kcr_queue_add_opts){.priority = prio});
}

kcr_err kcr_controller_enqueue(kcr_controller *c, const char *ns, const char *name)
{
  return enqueue(c, ns, name, KCR_QUEUE_PRIORITY_DEFAULT);
}

/* ---- event sources ---- */

static bool pass(const struct source *s, kcr_obj *old, kcr_obj *cur, int ev)
{
  for(size_t i = 0; i < s->npreds; i++) {
    const struct kcr_predicate *p = &s->preds[i];
    bool ok = true;
    if(ev == 0 && p->create)
      ok = p->create(cur, p->ud);
    else if(ev == 1 && p->update && old != cur) /* resyncs always pass */
      ok = p->update(old, cur, p->ud);
    else if(ev == 2 && p->delete_)
      ok = p->delete_(cur, p->ud);
    if(!ok)
      return false;
  }
  return true;
}

/* api_version "group/version" or "version": does its group equal g? */
static bool group_is(const char *api_version, const char *g)
{
  const char *slash = strchr(api_version, '/');
  size_t n = slash ? (size_t)(slash - api_version) : 0;
  if(!g || !*g)
    return !slash;
  return slash && strlen(g) == n && !strncmp(api_version, g, n);
}

/* Adds a key from an event source; a failure (out of memory) must not
 * lose the key: every cached object is routed again later. */
static void add_key(kcr_controller *c, kcr_err rc)
{
  if(rc == KCR_ENOMEM && !atomic_exchange(&c->requeue_all, true))
    KCR_LOG(KCR_LOG_WARN,
            "controller: out of memory queueing a key; every cached "
            "object will be queued again",
            KCR_S("controller", c->name));
}

struct emit_ctx {
  kcr_controller *c;
  int prio;
};

static void emit_key(const char *ns, const char *name, void *ctx)
{
  struct emit_ctx *e = ctx;
  add_key(e->c, enqueue(e->c, ns, name, e->prio));
}

/* An update that changes nothing: a resync (the same object), or a relist
 * bringing back the same resourceVersion. */
static bool same_version(kcr_obj *old, kcr_obj *cur)
{
  return old == cur || (*kcr_obj_rv(cur) && !strcmp(kcr_obj_rv(old), kcr_obj_rv(cur)));
}

/* The event's priority (ev: 0 add, 1 update, 2 delete). */
static int event_prio(const struct source *s, kcr_obj *old, kcr_obj *cur, int ev)
{
  if(ev == 0) /* from the initial list, or new */
    return kcr_informer_has_synced(s->inf) ? s->create_prio : s->unchanged_prio;
  if(ev == 1 && same_version(old, cur))
    return s->unchanged_prio;
  return s->prio;
}

/* Maps o with the source's map function, typed or not. A typed one gets a
 * view in an arena of the call's (route runs on informer threads and on a
 * worker's requeue_everything). */
static void map(struct source *s, kcr_obj *o, struct emit_ctx *e)
{
  struct kcr_arena a = KCR_ARENA_INIT;
  const void *v;

  if(!s->t) {
    s->map(o, emit_key, e, s->map_ud);
    return;
  }
  if((v = kcr__obj_view(s->t, o, &a, s->c->name)))
    s->tcall(s->tfn, v, &a, emit_key, e, s->map_ud);
  kcr_arena_cleanup(&a);
}

static void route(struct source *s, kcr_obj *old, kcr_obj *cur, int ev)
{
  struct emit_ctx e = {.c = s->c};

  if(!pass(s, old, cur, ev))
    return;
  e.prio = event_prio(s, old, cur, ev);
  switch(s->kind) {
  case SRC_FOR:
    add_key(s->c, kcr_queue_add_with(s->c->q, kcr_obj_key(cur),
                                     &(struct kcr_queue_add_opts){.priority = e.prio}));
    break;
  case SRC_OWNS: {
    const struct kcr_owner *ow = kcr_obj_controller(cur);
    if(ow->uid && ow->kind && !strcmp(ow->kind, s->owner_kind) &&
       group_is(ow->api_version, s->owner_group))
      emit_key(kcr_obj_ns(cur), ow->name, &e);
    /* An update that moved the child to another owner: the old one too. */
    if(old && old != cur) {
      const struct kcr_owner *oo = kcr_obj_controller(old);
      if(oo->uid && ow->uid && strcmp(oo->uid, ow->uid) &&
         !strcmp(oo->kind, s->owner_kind))
        emit_key(kcr_obj_ns(old), oo->name, &e);
    }
    break;
  }
  case SRC_WATCHES:
    /* Both objects of an update, as controller-runtime's
     * EnqueueRequestsFromMapFunc: a child relabelled away from its owner
     * must wake the former owner too. The queue folds the duplicates. */
    map(s, cur, &e);
    if(old && !same_version(old, cur))
      map(s, old, &e);
    break;
  }
}

/* After a lost key: routes every cached object of every source again (as a
 * resync, so predicates pass). Clears requeue_all first; a failure on the
 * way sets it again and the next check retries. */
static void requeue_everything(kcr_controller *c)
{
  if(!atomic_exchange(&c->requeue_all, false))
    return;
  for(size_t i = 0; i < c->nsrc; i++) {
    kcr_obj **objs;
    size_t n;
    if(kcr_store_ref_all(kcr_informer_store(c->src[i].inf), &objs, &n)) {
      atomic_store(&c->requeue_all, true);
      return;
    }
    for(size_t j = 0; j < n; j++)
      route(&c->src[i], objs[j], objs[j], 1);
    kcr_objs_unref(objs, n);
  }
  KCR_LOG(KCR_LOG_INFO, "controller: queued every cached object again after a lost key",
          KCR_S("controller", c->name));
}

static void note_gone(kcr_controller *c, kcr_obj *o);
static void gone_drop(kcr_controller *c, const char *key);

/* Whether s is the For source of a sharded controller whose cache is
 * sharded: its deletes are remembered (see struct gone) - before the key
 * is queued, so a worker that takes it finds where it was. */
static bool notes_gone(const struct source *s)
{
  return s->kind == SRC_FOR && s->c->ring && kcr__informer_shard_by(s->inf);
}

static void h_add(kcr_obj *o, void *ud)
{
  if(notes_gone(ud)) /* cached again: placed by it */
    gone_drop(((struct source *)ud)->c, kcr_obj_key(o));
  route(ud, NULL, o, 0);
}
static void h_update(kcr_obj *old, kcr_obj *cur, void *ud) { route(ud, old, cur, 1); }
static void h_delete(kcr_obj *o, void *ud)
{
  if(notes_gone(ud))
    note_gone(((struct source *)ud)->c, o);
  route(ud, NULL, o, 2);
}

/* Registers the source tmpl with the options of opts (NULL: defaults;
 * default_prio for its updates and deletes). */
static kcr_err add_source(kcr_controller *c, kcr_informer *inf, struct source *tmpl,
                          const struct kcr_source_opts *opts, int default_prio)
{
  struct source *s;
  size_t n = opts ? opts->npreds : 0;

  if(c->started || c->nsrc == MAX_SOURCES || !inf ||
     n > sizeof(tmpl->preds) / sizeof(tmpl->preds[0]) || (n && !opts->preds))
    return KCR_EINVAL;
  for(size_t i = 0; i < n; i++)
    tmpl->preds[i] = opts->preds[i];
  tmpl->npreds = n;
  tmpl->prio = opts && opts->priority ? *opts->priority : default_prio;
  tmpl->create_prio =
      opts && opts->create_priority ? *opts->create_priority : KCR_QUEUE_PRIORITY_DEFAULT;
  tmpl->unchanged_prio = opts && opts->unchanged_priority ? *opts->unchanged_priority
                                                          : KCR_QUEUE_PRIORITY_LOW;
  s = &c->src[c->nsrc];
  *s = *tmpl;
  s->c = c;
  s->inf = inf;
  struct kcr_informer_handlers h = {
      .on_add = h_add, .on_update = h_update, .on_delete = h_delete, .ud = s};
  kcr_err rc = kcr_informer_add_handlers(inf, &h);
  if(!rc)
    c->nsrc++;
  return rc;
}

kcr_err kcr_controller_for(kcr_controller *c, kcr_informer *inf,
                           const struct kcr_source_opts *opts)
{
  struct source s = {.kind = SRC_FOR};
  return add_source(c, inf, &s, opts, KCR_QUEUE_PRIORITY_DEFAULT);
}

kcr_err kcr_controller_owns(kcr_controller *c, kcr_informer *inf, const char *owner_group,
                            const char *owner_kind, const struct kcr_source_opts *opts)
{
  struct source s = {.kind = SRC_OWNS};
  kcr_err rc;
  if(!owner_kind)
    return KCR_EINVAL;
  s.owner_group = strdup(owner_group ? owner_group : "");
  s.owner_kind = strdup(owner_kind);
  if(!s.owner_group || !s.owner_kind)
    rc = KCR_ENOMEM;
  else
    rc = add_source(c, inf, &s, opts, KCR_QUEUE_PRIORITY_HIGH);
  if(rc) {
    free(s.owner_group);
    free(s.owner_kind);
  }
  return rc;
}

kcr_err kcr_controller_watches(kcr_controller *c, kcr_informer *inf, kcr_map_fn fn,
                               void *ud, const struct kcr_source_opts *opts)
{
  struct source s = {.kind = SRC_WATCHES, .map = fn, .map_ud = ud};
  if(!fn)
    return KCR_EINVAL;
  return add_source(c, inf, &s, opts, KCR_QUEUE_PRIORITY_HIGH);
}

kcr_err kcr_controller_watches_typed(kcr_controller *c, kcr_informer *inf,
                                     const struct kcr_type *t, kcr_typed_map_call call,
                                     kcr_fnptr fn, void *ud,
                                     const struct kcr_source_opts *opts)
{
  struct source s = {.kind = SRC_WATCHES, .t = t, .tcall = call, .tfn = fn, .map_ud = ud};
  if(!t || !call || !fn)
    return KCR_EINVAL;
  return add_source(c, inf, &s, opts, KCR_QUEUE_PRIORITY_HIGH);
}

static bool gen_changed(kcr_obj *old, kcr_obj *cur, void *ud)
{
  return kcr_obj_generation(old) != kcr_obj_generation(cur);
}

const struct kcr_predicate kcr_pred_generation_changed = {.update = gen_changed};

static bool not_own_status(kcr_obj *old, kcr_obj *cur, void *ud)
{
  return !kcr_status_writer_wrote(ud, kcr_obj_uid(cur), kcr_obj_rv(cur)) ||
         !kcr__obj_same_but_status(old, cur);
}

struct kcr_predicate kcr_pred_not_own_status(kcr_status_writer *w)
{
  return (struct kcr_predicate){.update = not_own_status, .ud = w};
}

/* ---- workers ---- */

/* Reconciles key, taken with priority prio; requeues keep prio. */
static void process(kcr_controller *c, kcr_ctx *cx, const char *key, int prio)
{
  const char *slash = strchr(key, '/');
  char *ns = NULL;
  struct kcr_request req;
  struct kcr_result res = {0};
  const char *lv[] = {c->name, NULL};
  const char *result;
  uint64_t t0;
  kcr_err rc;

  kcr_arena_reset(&cx->arena);
  if(slash && (size_t)(slash - key) < sizeof(cx->ns)) { /* namespaces: <= 63 */
    memcpy(cx->ns, key, (size_t)(slash - key));
    cx->ns[slash - key] = '\0';
    ns = cx->ns;
  } else if(slash &&
            !(ns = kcr_arena_printf(&cx->arena, "%.*s", (int)(slash - key), key))) {
    /* Never reconcile a namespaced key as cluster-scoped: retry later. */
    kcr_queue_add_with(
        c->q, key, &(struct kcr_queue_add_opts){.priority = prio, .rate_limited = true});
    kcr_metric_inc(c->m_errors, lv, 1);
    kcr_metric_inc(c->m_total, (const char *[]){c->name, "error", NULL}, 1);
    return;
  }
  req = (struct kcr_request){
      .ns = ns ? ns : "", .name = slash ? slash + 1 : key, .key = key};
  snprintf(cx->id, sizeof(cx->id), "%08x%08x", (unsigned)rand_r(&cx->seed),
           (unsigned)rand_r(&cx->seed));
  cx->req = &req;
  kcr_metric_inc(c->m_active, lv, 1);
  t0 = kcr_time_mono_ns();
  rc = c->o.reconcile(cx, &req, &res, c->o.ud);
  kcr_metric_observe(c->m_time, lv, (double)(kcr_time_mono_ns() - t0) / 1e9);
  kcr_metric_inc(c->m_active, lv, -1);
  if(rc == KCR_OK) {
    kcr_queue_forget(c->q, key);
    if(res.requeue_after_ms) {
      /* Any value is a delay: the queue parks keys past the clock's end. */
      kcr_queue_add_with(c->q, key,
                         &(struct kcr_queue_add_opts){.priority = prio,
                                                      .after_ms = res.requeue_after_ms});
      result = "requeue_after";
    } else {
      result = "success";
    }
  } else if(rc == KCR_ETERMINAL) {
    kcr_queue_forget(c->q, key);
    kcr_metric_inc(c->m_errors, lv, 1);
    kcr_metric_inc(c->m_terminal, lv, 1);
    KCR_CLOG(cx, KCR_LOG_ERROR, "terminal reconciler error; not retrying",
             KCR_S("err", kcr_err_name(rc)),
             KCR_S("detail", cx->ei.message ? cx->ei.message : kcr_strerror(rc)));
    result = "terminal";
  } else {
    kcr_queue_add_with(
        c->q, key, &(struct kcr_queue_add_opts){.priority = prio, .rate_limited = true});
    kcr_metric_inc(c->m_errors, lv, 1);
    KCR_CLOG(cx, KCR_LOG_ERROR, "reconciler error; requeued with backoff",
             KCR_S("err", kcr_err_name(rc)),
             KCR_S("detail", cx->ei.message ? cx->ei.message : kcr_strerror(rc)),
             KCR_I("requeues", kcr_queue_num_requeues(c->q, key)));
    result = "error";
  }
  kcr_metric_inc(c->m_total, (const char *[]){c->name, result, NULL}, 1);
  kcr_errinfo_cleanup(&cx->ei);
  cx->req = NULL;
}

/* A source whose cache is not to be read now, or NULL: emptied for its
 * byte budget, or awaiting its CRD (kcr__informer_holds_keys). */
static kcr_informer *source_holding(kcr_controller *c)
{
  for(size_t i = 0; i < c->nsrc; i++)
    if(kcr__informer_holds_keys(c->src[i].inf))
      return c->src[i].inf;
  return NULL;
}

bool kcr__controller_has_source(kcr_controller *c, kcr_informer *inf)
{
  for(size_t i = 0; i < c->nsrc; i++)
    if(c->src[i].inf == inf)
      return true;
  return false;
}

/* ---- sharing the work (kcr_controller_shard) ---- */

static kcr_store *for_store(kcr_controller *c)
{
  for(size_t i = 0; i < c->nsrc; i++)
    if(c->src[i].kind == SRC_FOR)
      return kcr_informer_store(c->src[i].inf);
  return NULL;
}

/* The hash that places a key: its cached object's uid, else the key. */
static uint64_t key_hash(const char *key, const kcr_obj *o)
{
  const char *uid = o ? kcr_obj_uid(o) : "";
  return *uid ? kcr_shard_hash(uid, strlen(uid)) : kcr_shard_hash(key, strlen(key));
}

static kcr_informer *for_informer(kcr_controller *c)
{
  for(size_t i = 0; i < c->nsrc; i++)
    if(c->src[i].kind == SRC_FOR)
      return c->src[i].inf;
  return NULL;
}

/* The gone entry of key (c->mu held), or NULL. */
static struct gone *gone_find(kcr_controller *c, const char *key)
{
  for(struct kcr_hnode *n = kcr_htab_lookup(&c->gone, kcr_hash_str(key)); n;
      n = kcr_htab_lookup_next(n))
    if(!strcmp(KCR_HTAB_ENTRY(n, struct gone, hn)->key, key))
      return KCR_HTAB_ENTRY(n, struct gone, hn);
  return NULL;
}

static void gone_drop(kcr_controller *c, const char *key)
{
  pthread_mutex_lock(&c->mu);
  struct gone *g = gone_find(c, key);
  if(g)
    kcr_htab_remove(&c->gone, &g->hn);
  pthread_mutex_unlock(&c->mu);
  free(g);
}

/* A For object deleted from a sharded cache: remembers where its key was. */
static void note_gone(kcr_controller *c, kcr_obj *o)
{
  const char *key = kcr_obj_key(o), *uid = kcr_obj_uid(o);
  size_t n = strlen(key) + 1;
  struct gone *g;

  if(!*uid || !(g = malloc(sizeof(*g) + n)))
    return;
  g->hash = kcr_shard_hash(uid, strlen(uid));
  memcpy(g->key, key, n);
  pthread_mutex_lock(&c->mu);
  struct gone *old = gone_find(c, key);
  if(old)
    kcr_htab_remove(&c->gone, &old->hn);
  if(c->gone.n >= MAX_GONE || kcr_htab_insert(&c->gone, &g->hn, kcr_hash_str(key))) {
    free(g);
    g = NULL;
  }
  pthread_mutex_unlock(&c->mu);
  free(old);
}

/* Frees every gone entry (kcr_controller_free). */
static void gone_clear(kcr_controller *c)
{
  struct kcr_htab_iter it;
  struct kcr_hnode *n;
  kcr_htab_iter_init(&it, &c->gone);
  while((n = kcr_htab_iter_next(&it)))
    free(KCR_HTAB_ENTRY(n, struct gone, hn));
  kcr_htab_cleanup(&c->gone);
}

/* Whether key is ours now; *hash gets the hash that places it: its cached
 * object's uid; for a key the For cache does not hold, the uid it had when
 * it was deleted here; else, with a sharded For cache, none is ours (the
 * object is in another replica's share, or was never there: nothing to
 * reconcile); without, the key text's. */
static bool owned(kcr_controller *c, const char *key, uint64_t *hash)
{
  kcr_obj *o = kcr_store_ref_key(for_store(c), key);
  struct gone *g;

  *hash = key_hash(key, o);
  kcr_obj_unref(o);
  if(o)
    return kcr_ring_owns(c->ring, *hash);
  pthread_mutex_lock(&c->mu);
  if((g = gone_find(c, key)))
    *hash = g->hash;
  pthread_mutex_unlock(&c->mu);
  if(!g && kcr__informer_shard_by(for_informer(c)))
    return false;
  return kcr_ring_owns(c->ring, *hash);
}

/* Whether every sharded source's cache holds all of hash's bucket. */
static bool covered(kcr_controller *c, uint64_t hash)
{
  for(size_t i = 0; i < c->nsrc; i++)
    if(kcr__informer_shard_by(c->src[i].inf) && !kcr_informer_covers(c->src[i].inf, hash))
      return false;
  return true;
}

/* Selects in the sharded sources' caches the buckets assigned to this
 * replica in v (owned or being handed over: the cache fills before the
 * bucket is owned), and forgets the deletes of buckets no longer owned. */
static void select_buckets(kcr_controller *c, const kcr_ring_view *v)
{
  uint8_t set[KCR_RING_BUCKETS / 8] = {0};
  struct kcr_htab_iter it;
  struct kcr_hnode *n;

  for(unsigned b = 0; b < KCR_RING_BUCKETS; b++)
    if(kcr_ring_view_assigned(v, (uint64_t)b << 56))
      set[b / 8] |= (uint8_t)(1u << b % 8);
  for(size_t i = 0; i < c->nsrc; i++)
    if(kcr__informer_shard_by(c->src[i].inf))
      kcr_informer_set_buckets(c->src[i].inf, set);
  pthread_mutex_lock(&c->mu);
  kcr_htab_iter_init(&it, &c->gone);
  while((n = kcr_htab_iter_next(&it))) {
    struct gone *g = KCR_HTAB_ENTRY(n, struct gone, hn);
    if(!kcr_ring_view_mine(v, g->hash)) {
      kcr_htab_remove(&c->gone, n);
      free(g);
    }
  }
  pthread_mutex_unlock(&c->mu);
}

/* Whether a worker reconciles a key of a bucket ov owned and nv does not
 * (c->mu held). */
static bool busy_with_lost(kcr_controller *c, const kcr_ring_view *ov,
                           const kcr_ring_view *nv)
{
  for(int i = 0; i < c->o.workers; i++)
    if(c->w[i].busy && kcr_ring_view_mine(ov, c->w[i].hash) &&
       !kcr_ring_view_mine(nv, c->w[i].hash))
      return true;
  return false;
}

/* A cached object's key and the hash that places it. */
struct key_hash {
  const char *key; /* borrowed from the object */
  uint64_t hash;
};

static int cmp_key_hash(const void *a, const void *b)
{
  return strcmp(((const struct key_hash *)a)->key, ((const struct key_hash *)b)->key);
}

/* The keys of buckets that left: ov's and not nv's. */
struct lost {
  const kcr_ring_view *ov, *nv;
  const struct key_hash *kh; /* sorted by key */
  size_t n;
};

static bool lost_key(const char *key, void *ud)
{
  const struct lost *l = ud;
  struct key_hash probe = {.key = key};
  const struct key_hash *f = bsearch(&probe, l->kh, l->n, sizeof(*l->kh), cmp_key_hash);
  uint64_t h = f ? f->hash : kcr_shard_hash(key, strlen(key));
  return kcr_ring_view_mine(l->ov, h) && !kcr_ring_view_mine(l->nv, h);
}

/* The ring's listener: waits (KCR_RING_DRAIN_MS at most) for the
 * reconciles of the buckets that are no longer ours - their writes are
 * refused from now on (the manager's gate) - takes their keys out of the
 * queue (parked ones too, their failures forgotten), and queues the cached
 * objects that became ours. */
static void reshard(kcr_ring *r, void *ud)
{
  kcr_controller *c = ud;
  kcr_ring_view *nv = kcr_ring_view_get(r), *ov;
  struct timespec until = kcr_time_mono_after(KCR_RING_DRAIN_MS);
  bool drained = true;
  struct key_hash *kh = NULL;
  kcr_obj **objs;
  size_t n, queued = 0, removed = 0;

  pthread_mutex_lock(&c->mu);
  ov = c->shard_view;
  c->shard_view = nv;
  while(ov && busy_with_lost(c, ov, nv))
    if(pthread_cond_timedwait(&c->done_cv, &c->mu, &until) == ETIMEDOUT) {
      drained = busy_with_lost(c, ov, nv) == false;
      break;
    }
  pthread_mutex_unlock(&c->mu);
  if(!drained)
    KCR_LOG(KCR_LOG_WARN,
            "controller: reconciles of objects no longer ours still run after the "
            "drain time; their writes are refused",
            KCR_S("controller", c->name), KCR_I("drainMs", KCR_RING_DRAIN_MS));
  if(kcr_store_ref_all(for_store(c), &objs, &n)) {
    atomic_store(&c->requeue_all, true); /* out of memory: route everything */
    select_buckets(c, nv);               /* the lost keys are dropped when taken */
    goto out;
  }
  if(ov && (kh = malloc((n ? n : 1) * sizeof(*kh)))) {
    for(size_t i = 0; i < n; i++)
      kh[i] = (struct key_hash){kcr_obj_key(objs[i]),
                                key_hash(kcr_obj_key(objs[i]), objs[i])};
    qsort(kh, n, sizeof(*kh), cmp_key_hash);
    removed = kcr__queue_remove_if(c->q, lost_key, &(struct lost){ov, nv, kh, n});
    free(kh);
  }
  kcr_objs_unref(objs, n);
  /* (the caches drop the buckets that left - drained now - and list the
   * ones that entered; the objects of those come as on_add, queued) */
  select_buckets(c, nv);
  if(kcr_store_ref_all(for_store(c), &objs, &n))
    goto out;
  for(size_t i = 0; i < n; i++) {
    uint64_t h = key_hash(kcr_obj_key(objs[i]), objs[i]);
    if(kcr_ring_view_mine(nv, h) && !(ov && kcr_ring_view_mine(ov, h))) {
      add_key(c, kcr_queue_add(c->q, kcr_obj_key(objs[i])));
      queued++;
    }
  }
  kcr_objs_unref(objs, n);
out:
  KCR_LOG(KCR_LOG_INFO, "controller: the ring changed", KCR_S("controller", c->name),
          KCR_I("epoch", (long long)kcr_ring_view_epoch(nv)),
          KCR_I("bucketsOwned", (long long)kcr_ring_view_owned(nv)),
          KCR_I("queued", (long long)queued), KCR_I("dequeued", (long long)removed));
  kcr_ring_view_unref(ov);
}

/* A collect hook: kcr_controller_objects_owned, the cached For objects
 * whose buckets this replica owns now (one pass over the cache per
 * scrape). */
static void count_owned(void *ud)
{
  kcr_controller *c = ud;
  kcr_ring_view *v = kcr_ring_view_get(c->ring);
  kcr_obj **objs;
  size_t n, mine = 0;

  if(!kcr_store_ref_all(for_store(c), &objs, &n)) {
    for(size_t i = 0; i < n; i++)
      mine += kcr_ring_view_mine(v, key_hash(kcr_obj_key(objs[i]), objs[i]));
    kcr_objs_unref(objs, n);
    kcr_metric_set(c->m_objs_owned, (const char *[]){c->name, NULL}, (double)mine);
  }
  kcr_ring_view_unref(v);
}

kcr_err kcr_controller_shard(kcr_controller *c, kcr_ring *r)
{
  const char *const labels[] = {"controller", NULL};
  kcr_err rc;

  if(!r || c->started || c->ring || !for_store(c))
    return KCR_EINVAL;
  if(c->o.metrics) {
    rc = kcr_metric_counter(
        c->o.metrics,
        &(struct kcr_metric_opts){.name = "kcr_controller_keys_not_owned_total",
                                  .help = "Keys dropped without a reconcile: another "
                                          "replica of the ring owns them.",
                                  .label_names = labels},
        &c->m_not_owned, NULL);
    if(!rc)
      rc = kcr_metric_gauge(
          c->o.metrics,
          &(struct kcr_metric_opts){.name = "kcr_controller_objects_owned",
                                    .help = "Cached objects of the For source whose ring "
                                            "bucket this replica owns.",
                                    .label_names = labels},
          &c->m_objs_owned, NULL);
    if(rc)
      return rc;
    kcr_metric_inc(c->m_not_owned, (const char *[]){c->name, NULL}, 0);
  }
  c->shard_view = kcr_ring_view_get(r);
  select_buckets(c, c->shard_view); /* (none before the ring's first view) */
  rc = kcr_ring_add_listener(r, reshard, c);
  if(!rc)
    c->ring = r;
  if(!rc && c->o.metrics && !(rc = kcr_metrics_on_collect(c->o.metrics, count_owned, c)))
    c->collecting = true;
  if(rc) {
    if(c->ring)
      kcr_ring_remove_listener(r, reshard, c);
    c->ring = NULL;
    kcr_ring_view_unref(c->shard_view);
    c->shard_view = NULL;
  }
  return rc;
}

/* A key of a sharded controller: reconciled only while ours, with a
 * client whose writes carry its hash to the manager's gate, and marked
 * busy meanwhile for reshard's drain. */
static void process_sharded(kcr_controller *c, struct worker *w, kcr_ctx *cx,
                            const char *key, int prio)
{
  uint64_t hash;

  if(!owned(c, key, &hash)) {
    kcr_queue_forget(c->q, key);
    kcr_metric_inc(c->m_not_owned, (const char *[]){c->name, NULL}, 1);
    return;
  }
  if(!covered(c, hash)) { /* a bucket taken over: its caches are listing it */
    kcr_queue_add_after(c->q, key, COVER_WAIT_MS);
    return;
  }
  if(kcr_client_scoped(c->o.client, hash, &cx->client)) {
    kcr_queue_add_with(
        c->q, key, &(struct kcr_queue_add_opts){.priority = prio, .rate_limited = true});
    return; /* out of memory: later */
  }
  pthread_mutex_lock(&c->mu);
  w->busy = true;
  w->hash = hash;
  pthread_mutex_unlock(&c->mu);
  kcr__client_thread_scope(true, hash); /* a status writer's writes too */
  process(c, cx, key, prio);
  kcr__client_thread_scope(false, 0);
  if(!kcr_queue_num_requeues(c->q, key)) /* (a delete handled: forgotten) */
    gone_drop(c, key);
  kcr_client_free(cx->client);
  cx->client = NULL;
  pthread_mutex_lock(&c->mu);
  w->busy = false;
  pthread_cond_broadcast(&c->done_cv);
  pthread_mutex_unlock(&c->mu);
}

static void *worker_main(void *p)
{
  struct worker *w = p;
  kcr_controller *c = w->c;
  kcr_ctx cx = {.c = c, .arena = KCR_ARENA_INIT, .ei = KCR_ERRINFO_INIT};
  uint64_t timeout = w == c->w ? REQUEUE_CHECK_MS : KCR_FOREVER; /* one checks */
  char *key;
  int prio;

  cx.seed = (unsigned)(kcr_time_mono_ns() ^ (uintptr_t)w);
  for(;;) {
    kcr_informer *held;
    kcr_err rc = kcr_queue_take_with_priority(c->q, timeout, &key, &prio);
    if(atomic_load(&c->requeue_all) && !atomic_load(&c->stopping))
      requeue_everything(c);
    if(rc == KCR_ETIMEDOUT || rc == KCR_ENOMEM)
      continue;
    if(rc)
      break; /* shut down */
    /* Not while a source's cache is emptied or its CRD missing: the
     * reconcile would read "not found" there. The key waits (no other
     * worker takes it). */
    while((held = source_holding(c)) && !atomic_load(&c->stopping))
      kcr_informer_wait_synced(held, 100);
    if(atomic_load(&c->stopping))
      ;
    else if(!c->ring)
      process(c, &cx, key, prio);
    else
      process_sharded(c, w, &cx, key, prio);
    kcr_queue_done(c->q, key);
    free(key);
  }
  kcr_arena_cleanup(&cx.arena);
  pthread_mutex_lock(&c->mu);
  w->done = true;
  pthread_cond_broadcast(&c->done_cv);
  pthread_mutex_unlock(&c->mu);
  return NULL;
}

kcr_err kcr_controller_start(kcr_controller *c)
{
  if(c->started || atomic_load(&c->stopping))
    return KCR_EINVAL;
  c->started = true;
  for(int i = 0; i < c->o.workers; i++) {
    c->w[i].c = c;
    c->w[i].done = false;
    if(pthread_create(&c->w[i].th, NULL, worker_main, &c->w[i])) {
      KCR_LOG(KCR_LOG_ERROR, "controller: cannot start a worker thread",
              KCR_S("controller", c->name), KCR_I("started", i),
              KCR_I("workers", c->o.workers));
      kcr_controller_stop(c, KCR_FOREVER); /* all or nothing */
      return KCR_ENOMEM;
    }
    pthread_mutex_lock(&c->mu);
    c->w[i].running = true;
    pthread_mutex_unlock(&c->mu);
  }
  KCR_LOG(KCR_LOG_INFO, "controller: started", KCR_S("controller", c->name),
          KCR_I("workers", c->o.workers));
  return KCR_OK;
}

/* Joins the workers that have returned; the number still running. */
static int reap(kcr_controller *c)
{
  int left = 0;
  for(int i = 0; i < c->o.workers; i++) {
    bool done;
    if(!c->w[i].running)
      continue;
    pthread_mutex_lock(&c->mu);
    done = c->w[i].done;
    pthread_mutex_unlock(&c->mu);
    if(done) {
      pthread_join(c->w[i].th, NULL);
      pthread_mutex_lock(&c->mu); /* kcr_controller_busy reads it */
      c->w[i].running = false;
      pthread_mutex_unlock(&c->mu);
    } else {
      left++;
    }
  }
  return left;
}

int kcr_controller_stop(kcr_controller *c, uint64_t timeout_ms)
{
  uint64_t deadline = kcr_time_deadline_ms(timeout_ms); /* the grace period */
  bool was_started = c->started;
  int left;

  atomic_store(&c->stopping, true);
  kcr_queue_shutdown(c->q);
  pthread_mutex_lock(&c->mu);
  for(;;) {
    int running = 0;
    uint64_t now = kcr_time_mono_ms();
    for(int i = 0; i < c->o.workers; i++)
      running += c->w[i].running && !c->w[i].done;
    if(!running || now >= deadline)
      break;
    if(deadline == KCR_FOREVER) {
      pthread_cond_wait(&c->done_cv, &c->mu);
    } else {
      struct timespec ts = kcr_time_mono_after(deadline - now);
      pthread_cond_timedwait(&c->done_cv, &c->mu, &ts);
    }
  }
  pthread_mutex_unlock(&c->mu);
  left = reap(c);
  if(was_started)
    KCR_LOG(left ? KCR_LOG_WARN : KCR_LOG_INFO, "controller: stopped",
            KCR_S("controller", c->name), KCR_I("reconcilesStillRunning", left));
  c->started = false;
  return left;
}

int kcr_controller_busy(kcr_controller *c)
{
  int n = 0;
  pthread_mutex_lock(&c->mu);
  for(int i = 0; i < c->o.workers; i++)
    n += c->w[i].running && !c->w[i].done;
  pthread_mutex_unlock(&c->mu);
  return n;
}

void kcr_controller_free(kcr_controller *c)
{
  if(!c)
    return;
  /* Joins every worker, however long its reconcile takes: nothing below may
   * be freed while one can still touch it. */
  if(c->q && c->w) {
    int left = kcr_controller_stop(c, KCR_FOREVER);
    KCR_ASSERT(left == 0);
    (void)left;
  }
  if(c->collecting)
    kcr_metrics_off_collect(c->o.metrics, count_owned, c);
  if(c->ring)
    kcr_ring_remove_listener(c->ring, reshard, c);
  kcr_ring_view_unref(c->shard_view);
  gone_clear(c);
  kcr_queue_free(c->q);
  for(size_t i = 0; i < c->nsrc; i++) {
    free(c->src[i].owner_group);
    free(c->src[i].owner_kind);
  }
  free(c->w);
  free(c->name);
  pthread_cond_destroy(&c->done_cv);
  pthread_mutex_destroy(&c->mu);
  kcr_client_free(c->o.client);
  kcr_metrics_free(c->o.metrics);
  free(c);
}
