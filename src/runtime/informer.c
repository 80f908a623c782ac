/* DESIGN: the informer, an explicit state machine on one thread.
 *
 *   EMPTY/LISTING: a streaming list (do_stream: a watch with
 *     sendInitialEvents whose initial events are gathered - an unchanged
 *     object as the cached one - until the end bookmark), or a paged LIST
 *     (do_list: kcr_list_each_text collects every page's items into
 *     objects, an unchanged one as the cached one)
 *     where the server refuses streaming or sends no end bookmark in time
 *     (the timer thread cancels it), or with opts.paged_list. Either way
 *     apply_list puts the list in the store (kcr_store_replace swaps it
 *     in); handlers get on_add for new keys, on_update(old, new) for keys
 *     cached with another resourceVersion (nothing for unchanged ones),
 *     on_delete for keys that vanished (missed deletes while we were not
 *     watching). -> WATCHING (the streaming list's own
 *     stream goes on as the watch).
 *   WATCHING: one watch from `rv` with a random timeout; ADDED/MODIFIED put
 *     into the store, DELETED removes; the watch tracks rv (bookmarks too).
 *     Server timeout -> watch again from rv. 410 -> LISTING. Errors ->
 *     backoff, then watch again from rv (a too-old rv then gives 410); the
 *     backoff starts over after a watch that worked (an event, or a second
 *     of streaming) before it broke, and grows only while watches fail at
 *     once.
 *
 * That loop is a feed (struct feed): one of every namespace, or of the
 * one namespace - whose list replaces the whole store - or, with
 * opts.namespaces or opts.namespace_selector, one per namespace, each on
 * its own thread with its own resourceVersion and backoff, all into the
 * one store: a namespace's list puts its objects one by one and takes out
 * those of its namespace the list lacks (the feed counts what it holds,
 * so a first list of a namespace scans nothing), leaving the other
 * namespaces' objects alone. wmu makes the feeds one store writer at a
 * time (kcr/store.h); handlers run outside it, on the feeds' threads. With
 * a selector a metadata-only informer of the namespaces adds feeds as
 * namespaces enter the selection and stops and empties them (no on_delete)
 * as they leave. With opts.cluster_watch a namespace set has one feed of
 * every namespace instead, whose objects of unselected namespaces are
 * dropped (wanted) where they are gathered, where a watch event is put
 * and where a list is applied - the last two under wmu, so that a
 * namespace that left (the namespaces' store first, then ns_left's
 * emptying under wmu) stays out and none of its objects is told gone; a
 * namespace that enters sets the feed's relist flag, which ends its watch
 * (a streaming list still gathering is applied first) for a list again.
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
 * Stopping: `stopping` is set under mu, the current watches are canceled
 * (kcr_watch_cancel is safe from any thread) and backoff sleeps wait on a
 * condvar, so stop is prompt; the namespaces' informer stops first, so no
 * feed comes or goes meanwhile. Lock order: inf->mu, then the namespaces'
 * informer's mu; wmu, then the namespaces' informer's store (wanted); wmu
 * is never held with mu; neither is held while calling handlers or doing
 * I/O. `stats` is written and read under mu
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
#include "kcr/buf.h"
#include "kcr/informer.h"
#include "kcr/json.h"
#include "kcr/log.h"
#include "kcr/time.h"
#include "kcr/path.h"
#include "kcr/shard.h"
#include "kcr/watch.h"
#include "kube/client-int.h"
#include "runtime/informer-int.h"
#include "runtime/projection-int.h"
#include "runtime/store-int.h"

#define MAX_HANDLERS 16
#define DROPPED                                                                          \
  "not applied: the cache was emptied while it was listed (over its byte budget, or "    \
  "its CustomResourceDefinition stopped serving it)"

enum state { ST_LISTING, ST_WATCHING, ST_STOPPED };

/* One list-and-watch loop of the informer, on its own thread: of every
 * namespace (ns NULL; or of the cluster-scoped resource), of the one
 * namespace, or of one namespace of a set (opts.namespaces,
 * opts.namespace_selector). */
struct feed {
  kcr_informer *inf;
  char *ns;            /* NULL: every namespace */
  bool whole;          /* the only feed: a list replaces the whole store */
  char *rv;            /* where the next watch starts; feed thread */
  kcr_watch *watch;    /* current watch, under inf->mu */
  bool stopping;       /* under inf->mu: this feed alone stops */
  bool relist;         /* under inf->mu: opts.cluster_watch, a namespace entered
                          the selection: list again (the watch is canceled) */
  atomic_bool quit;    /* stopping, or the informer is: a LIST ends at its next item */
  bool synced;         /* under inf->mu */
  bool rewatch;        /* under inf->mu: opts.shard_by, buckets left while the
                          server filters: watch again with the narrower selector */
  uint64_t listing[4]; /* under inf->mu: the buckets selected when its list began */
  uint64_t covered[4]; /* under inf->mu: the buckets its last applied list
                          brought, still selected */
  bool has_th;
  pthread_t th;
  struct kcr_backoff backoff;
  unsigned seed;
  kcr_err last_err;     /* to log a repeated error once */
  size_t held;          /* the store's objects of ns (not whole): under inf->wmu */
  unsigned gen;         /* feed thread: inf->gen when its list was begun and applied */
  size_t inflight;      /* bytes of its list not applied yet: feed thread */
  struct initial *init; /* a streaming list's, until it is applied: feed thread */
  struct feed *next;
};

/* The initial events of a streaming list (sendInitialEvents), gathered
 * until the end bookmark and then applied as a list. */
struct initial {
  struct kcr__obj_list l; /* feed thread */
  bool applying;          /* under inf->mu: at the end bookmark; the timer is off */
  bool applied;           /* under inf->mu */
  bool ended;             /* under inf->mu: the stream is over */
  bool timed_out;         /* under inf->mu: the timer canceled it */
  bool ignored;           /* feed thread: the server does not stream lists */
  uint64_t started_ms;    /* when the stream was asked for */
  uint64_t last_ms;       /* under inf->mu: when the last event came */
  unsigned gen;           /* inf->gen when the stream was asked for */
};

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
  pthread_cond_t cv; /* stop requests, sync, go */
  bool stopping, started, synced;
  bool go;             /* under mu: every thread was made; the feeds may list */
  struct feed *feeds;  /* under mu (the list; each feed's own fields as said) */
  kcr_informer *nsinf; /* opts.namespace_selector: the namespaces' informer */
  char **nsset;        /* opts.cluster_watch with opts.namespaces: sorted */
  size_t nnsset;
  pthread_mutex_t wmu;     /* one store writer at a time (kcr/store.h) */
  pthread_mutex_t stop_mu; /* one kcr_informer_stop at a time: the second
                              waits for the first (joins are not shared) */
  pthread_t resync_th, timer_th;
  bool has_resync_th, has_timer_th;

  struct kcr_informer_stats stats; /* under mu */
  kcr_metric *m_objects, *m_bytes, *m_fallbacks, *m_budget;

  /* The byte budget (opts.max_bytes). */
  atomic_size_t inflight; /* every feed's inflight */
  atomic_uint gen;        /* one more each time the store is emptied: under mu,
                             before the emptying (so a list or event that sees
                             the old one under wmu is cleared after) */
  atomic_bool over;       /* written under mu: emptied, not synced again since */
  size_t over_bytes;      /* under mu: the bytes it reached */
  char *what;             /* what it selects, for the messages */

  /* opts.await_crd: the CRD's informer, whose events set served. */
  kcr_informer *crdinf;
  atomic_bool served; /* written under mu: the feeds may list (true without
                         await_crd) */
  char crd_why[96];   /* under mu: why the CRD does not serve */

  /* opts.shard_by: the buckets selected, bucket b in bit b % 64 of sel[b
   * / 64] (all until kcr_informer_set_buckets); written under wmu and mu,
   * read anywhere. srv: whether the server applies the shard selector
   * (opts.shard_by KCR_SHARD_BY_UID): -1 not known (probed at the next
   * request), 0 no (the gate is off: filtered here alone), 1 yes. */
  _Atomic uint64_t sel[4];
  atomic_int srv;
  int srv_told; /* under mu: srv as last logged (-1: never) */
};

/* The index of the store by namespace, with several namespaces: what a
 * namespace's relist and its leaving look up. */
#define NS_INDEX "kcr.informer/namespace"
static void index_ns(const kcr_obj *o, kcr_index_emit emit, void *ctx)
{
  emit(kcr_obj_ns(o), ctx);
}

static char *dup0(const char *s) { return s ? strdup(s) : NULL; }

static int cmp_key(const void *a, const void *b)
{
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* opts.cluster_watch: whether namespace ns is selected - one of
 * opts.namespaces, or in the namespaces' informer's store (which is updated
 * before ns_entered and ns_left are called). Always true without
 * cluster_watch: the feeds' requests select. Any thread. */
static bool ns_wanted(kcr_informer *inf, const char *ns)
{
  kcr_obj *o;
  if(!inf->o.cluster_watch)
    return true;
  if(!inf->nsinf)
    return bsearch(&ns, inf->nsset, inf->nnsset, sizeof(*inf->nsset), cmp_key);
  o = kcr_store_ref(inf->nsinf->store, NULL, ns);
  bool in = o != NULL;
  kcr_obj_unref(o);
  return in;
}

/* opts.shard_by: whether o's bucket is selected (kcr_informer_set_buckets).
 * An object without the uid its bucket comes from - no controller owner,
 * with KCR_SHARD_BY_OWNER - is kept: every replica caches it. Any thread. */
static bool in_shard(kcr_informer *inf, const kcr_obj *o)
{
  const char *uid;
  unsigned b;
  if(!inf->o.shard_by)
    return true;
  uid = inf->o.shard_by == KCR_SHARD_BY_UID ? kcr_obj_uid(o) : kcr_obj_controller(o)->uid;
  if(!uid || !*uid)
    return true;
  b = kcr_shard_bucket(kcr_shard_hash(uid, strlen(uid)));
  return atomic_load(&inf->sel[b / 64]) >> b % 64 & 1;
}

/* Whether o is to be cached: of a selected namespace (opts.cluster_watch)
 * and a selected bucket (opts.shard_by). Any thread. */
static bool wanted(kcr_informer *inf, const kcr_obj *o)
{
  return in_shard(inf, o) && ns_wanted(inf, kcr_obj_ns(o));
}

static struct feed *feed_new(kcr_informer *inf, const char *ns, bool whole);
static void feed_free(struct feed *f);
static const char *shard_sel(struct feed *f, const uint64_t bits[4], struct kcr_buf *b);
static void ns_entered(kcr_obj *o, void *ud);
static void ns_left(kcr_obj *o, void *ud);
static void ns_seen(kcr_obj *old, kcr_obj *cur, void *ud);
static bool synced_locked(kcr_informer *inf, bool nsdone);
static void crd_seen(kcr_obj *o, void *ud);
static void crd_changed(kcr_obj *old, kcr_obj *cur, void *ud);
static void crd_deleted(kcr_obj *o, void *ud);

/* Whether ns is a namespace's name (an RFC 1123 label, as kcr_path takes
 * it). */
static bool namespace_name(const struct kcr_gvr *gvr, const char *ns)
{
  struct kcr_buf b = KCR_BUF_INIT;
  kcr_err rc = kcr_path(&b, &(struct kcr_ref){.gvr = gvr, .ns = ns});
  kcr_buf_cleanup(&b);
  return rc != KCR_EINVAL;
}

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
  if(o->ns && o->namespaces)
    return kcr_errinfo_set(ei, KCR_EINVAL,
                           "%s: ns and namespaces exclude each other (one namespace: "
                           "either; several: namespaces)",
                           fn);
  if(o->namespace_selector && (o->ns || o->namespaces))
    return kcr_errinfo_set(ei, KCR_EINVAL,
                           "%s: namespace_selector excludes ns and namespaces", fn);
  if((o->namespaces || o->namespace_selector) && !o->gvr->namespaced)
    return kcr_errinfo_set(ei, KCR_EINVAL,
                           "%s: namespaces or namespace_selector given for %s, which "
                           "is not namespaced (gvr->namespaced)",
                           fn, o->gvr->resource);
  if(o->namespaces && !o->namespaces[0])
    return kcr_errinfo_set(ei, KCR_EINVAL,
                           "%s: namespaces is empty (NULL, not an empty list, means "
                           "every namespace)",
                           fn);
  for(size_t i = 0; o->namespaces && o->namespaces[i]; i++)
    if(!namespace_name(o->gvr, o->namespaces[i]))
      return kcr_errinfo_set(ei, KCR_EINVAL,
                             "%s: namespaces[%zu] \"%s\" is not a namespace name", fn, i,
                             o->namespaces[i]);
  if(o->namespace_selector && !*o->namespace_selector)
    return kcr_errinfo_set(ei, KCR_EINVAL,
                           "%s: namespace_selector is \"\" (every namespace: leave ns, "
                           "namespaces and namespace_selector NULL)",
                           fn);
  if(o->cluster_watch && !o->namespaces && !o->namespace_selector)
    return kcr_errinfo_set(
        ei, KCR_EINVAL,
        "%s: cluster_watch filters a set of namespaces: give namespaces "
        "or namespace_selector with it (without them the informer "
        "watches every namespace already)",
        fn);
  for(size_t i = 0; o->keep && o->keep[i]; i++) {
    const char *why = kcr__proj_bad_path(o->keep[i]);
    if(why)
      return kcr_errinfo_set(ei, KCR_EINVAL, "%s: keep[%zu] \"%s\" %s", fn, i, o->keep[i],
                             why);
  }
  if(o->await_crd && (!o->gvr->group || !*o->gvr->group))
    return kcr_errinfo_set(ei, KCR_EINVAL,
                           "%s: await_crd for %s, of the core group: no "
                           "CustomResourceDefinition serves it",
                           fn, o->gvr->resource);
  if(o->shard_by != KCR_SHARD_BY_NONE && o->shard_by != KCR_SHARD_BY_UID &&
     o->shard_by != KCR_SHARD_BY_OWNER)
    return kcr_errinfo_set(ei, KCR_EINVAL, "%s: shard_by %d is none of KCR_SHARD_BY_*",
                           fn, (int)o->shard_by);
  if(o->shard_by && (o->namespaces || o->namespace_selector) && !o->cluster_watch)
    return kcr_errinfo_set(ei, KCR_EINVAL,
                           "%s: shard_by needs one list and watch: with namespaces "
                           "or namespace_selector, set cluster_watch too",
                           fn);
  if(!o->page_size)
    o->page_size = 500;
  if(!o->initial_events_wait_ms)
    o->initial_events_wait_ms = KCR_INFORMER_INITIAL_EVENTS_WAIT_MS;
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

/* The feeds opts asks for, into inf->feeds (before start): one of ns or
 * every namespace, or one per namespace of opts.namespaces (duplicates
 * once), or none yet (a selector: the namespaces' informer adds them). */
/* What the informer selects, in words, for messages (malloc'd; NULL: out
 * of memory): "namespaces a,b; label selector x=y; metadata only". */
static char *describe(const struct kcr_informer_opts *o)
{
  struct kcr_buf b = KCR_BUF_INIT;
  kcr_err rc;

  if(o->namespace_selector)
    rc = kcr_buf_printf(&b, "the namespaces labelled %s", o->namespace_selector);
  else if(o->ns)
    rc = kcr_buf_printf(&b, "namespace %s", o->ns);
  else if(o->namespaces) {
    rc = kcr_buf_printf(&b, "namespaces ");
    for(size_t i = 0; !rc && o->namespaces[i]; i++)
      rc = kcr_buf_printf(&b, "%s%s", i ? "," : "", o->namespaces[i]);
  } else
    rc = kcr_buf_printf(&b, "%s", o->gvr->namespaced ? "every namespace" : "the cluster");
  if(!rc && o->label_selector)
    rc = kcr_buf_printf(&b, "; label selector %s", o->label_selector);
  if(!rc && o->field_selector)
    rc = kcr_buf_printf(&b, "; field selector %s", o->field_selector);
  if(!rc && o->metadata_only)
    rc = kcr_buf_printf(&b, "; metadata only");
  if(!rc && o->keep)
    rc = kcr_buf_printf(&b, "; a keep list");
  if(!rc && o->cluster_watch)
    rc = kcr_buf_printf(&b, "; one cluster-wide watch, filtered");
  if(rc) {
    kcr_buf_cleanup(&b);
    return NULL;
  }
  return kcr_buf_take(&b);
}

static kcr_err make_feeds(kcr_informer *inf, const struct kcr_informer_opts *o)
{
  size_t n = 0;
  if(o->cluster_watch) { /* one feed of every namespace, filtered (wanted) */
    if(!(inf->feeds = feed_new(inf, NULL, true)))
      return KCR_ENOMEM;
    if(o->namespace_selector) /* (what a namespace that leaves takes out) */
      return kcr_store_add_index(inf->store, NS_INDEX, index_ns);
    while(o->namespaces[n])
      n++;
    if(!(inf->nsset = calloc(n, sizeof(*inf->nsset))))
      return KCR_ENOMEM;
    for(inf->nnsset = 0; inf->nnsset < n; inf->nnsset++)
      if(!(inf->nsset[inf->nnsset] = strdup(o->namespaces[inf->nnsset])))
        return KCR_ENOMEM;
    qsort(inf->nsset, n, sizeof(*inf->nsset), cmp_key);
    return KCR_OK;
  }
  if(o->namespace_selector)
    return kcr_store_add_index(inf->store, NS_INDEX, index_ns);
  if(!o->namespaces)
    return (inf->feeds = feed_new(inf, inf->ns, true)) ? KCR_OK : KCR_ENOMEM;
  while(o->namespaces[n])
    n++;
  for(size_t i = 0; i < n; i++) {
    struct feed *f, **pp;
    for(pp = &inf->feeds; *pp && strcmp((*pp)->ns, o->namespaces[i]); pp = &(*pp)->next)
      ;
    if(*pp)
      continue;
    if(!(f = feed_new(inf, o->namespaces[i], false)))
      return KCR_ENOMEM;
    *pp = f;
  }
  if(!inf->feeds->next) { /* one namespace: as ns */
    inf->feeds->whole = true;
    return KCR_OK;
  }
  return kcr_store_add_index(inf->store, NS_INDEX, index_ns);
}

/* opts.namespace_selector: the namespaces' informer - metadata only, no
 * metrics of its own - whose adds and deletes start and stop feeds. */
static kcr_err make_nsinf(kcr_informer *inf, const struct kcr_informer_opts *o,
                          struct kcr_errinfo *ei)
{
  static const struct kcr_gvr namespaces = {.version = "v1", .resource = "namespaces"};
  kcr_err rc;
  if(!o->namespace_selector)
    return KCR_OK;
  rc = kcr_informer_new(
      &(struct kcr_informer_opts){.client = o->client,
                                  .gvr = &namespaces,
                                  .label_selector = o->namespace_selector,
                                  .metadata_only = true,
                                  .keep = (const char *[]){NULL},
                                  .watch_timeout_min_ms = o->watch_timeout_min_ms,
                                  .watch_timeout_max_ms = o->watch_timeout_max_ms,
                                  .watch_unbatched = true},
      &inf->nsinf, ei);
  if(!rc)
    rc = kcr_informer_add_handlers(
        inf->nsinf,
        &(struct kcr_informer_handlers){
            .on_add = ns_entered, .on_update = ns_seen, .on_delete = ns_left, .ud = inf});
  return rc;
}

/* opts.await_crd: the informer of the resource's CRD (by name: one object),
 * keeping only what tells whether it serves; its events set served. */
static kcr_err make_crdinf(kcr_informer *inf, const struct kcr_informer_opts *o,
                           struct kcr_errinfo *ei)
{
  static const struct kcr_gvr crds = {.group = "apiextensions.k8s.io",
                                      .version = "v1",
                                      .resource = "customresourcedefinitions"};
  char fsel[320];
  kcr_err rc;

  if(!o->await_crd)
    return KCR_OK;
  snprintf(inf->crd_why, sizeof(inf->crd_why), "it is not installed");
  snprintf(fsel, sizeof(fsel), "metadata.name=%s", inf->name);
  rc = kcr_informer_new(
      &(struct kcr_informer_opts){
          .client = o->client,
          .gvr = &crds,
          .field_selector = fsel,
          .keep = (const char *[]){"/spec/versions", "/status/conditions", NULL},
          .paged_list = o->paged_list,
          .watch_timeout_min_ms = o->watch_timeout_min_ms,
          .watch_timeout_max_ms = o->watch_timeout_max_ms,
          .watch_unbatched = true},
      &inf->crdinf, ei);
  if(!rc)
    rc = kcr_informer_add_handlers(
        inf->crdinf, &(struct kcr_informer_handlers){.on_add = crd_seen,
                                                     .on_update = crd_changed,
                                                     .on_delete = crd_deleted,
                                                     .ud = inf});
  return rc;
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
  atomic_init(&inf->inflight, 0);
  atomic_init(&inf->over, false);
  atomic_init(&inf->served, !o->await_crd);
  atomic_init(&inf->gen, 0);
  for(int i = 0; i < 4; i++)
    atomic_init(&inf->sel[i], UINT64_MAX); /* every bucket until set */
  atomic_init(&inf->srv, -1);
  inf->srv_told = -1;
  inf->o = *o;
  inf->o.keep = NULL;       /* the caller's: compiled into proj */
  inf->o.namespaces = NULL; /* the caller's: made into feeds */
  inf->o.namespace_selector = NULL;
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
  pthread_mutex_init(&inf->mu, NULL);
  pthread_mutex_init(&inf->wmu, NULL);
  pthread_mutex_init(&inf->stop_mu, NULL);
  {
    pthread_condattr_t ca; /* deadlines on the monotonic clock */
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&inf->cv, &ca);
    pthread_condattr_destroy(&ca);
  }
  if(!inf->group || !inf->version || !inf->resource || !inf->name || !inf->store ||
     (o->ns && !inf->ns) || (o->label_selector && !inf->lsel) ||
     (o->field_selector && !inf->fsel) || (o->keep && !inf->proj) ||
     !(inf->what = describe(o)) || make_feeds(inf, o)) {
    kcr_informer_free(inf);
    return KCR_ENOMEM;
  }
  if((rc = make_nsinf(inf, o, ei)) || (rc = make_crdinf(inf, o, ei))) {
    kcr_informer_free(inf);
    return rc;
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
    if(!rc) {
      static const char *const lr[] = {"informer", "reason", NULL};
      rc = kcr_metric_counter(
          o->metrics,
          &(struct kcr_metric_opts){
              .name = "kcr_informer_list_fallbacks_total",
              .help = "Streaming lists that became paged LISTs: the server refused "
                      "sendInitialEvents (reason refused) or sent no end bookmark "
                      "(reason no_end_bookmark)",
              .label_names = lr},
          &inf->m_fallbacks, ei);
    }
    if(!rc)
      rc = kcr_metric_counter(
          o->metrics,
          &(struct kcr_metric_opts){
              .name = "kcr_informer_budget_exceeded_total",
              .help = "Times the informer's cache went over its byte budget (max_bytes) "
                      "and was emptied to be listed again",
              .label_names = l},
          &inf->m_budget, ei);
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

static bool inf_stopping(kcr_informer *inf)
{
  pthread_mutex_lock(&inf->mu);
  bool s = inf->stopping;
  pthread_mutex_unlock(&inf->mu);
  return s;
}

/* Whether feed f is to stop: the informer stops, or f alone does (its
 * namespace left the selection). Takes mu. */
static bool stopping(struct feed *f)
{
  pthread_mutex_lock(&f->inf->mu);
  bool s = f->inf->stopping || f->stopping;
  pthread_mutex_unlock(&f->inf->mu);
  return s;
}

/* opts.cluster_watch: whether a namespace entered the selection since
 * the feed's list began (relist_begin), so it is to list again. Takes mu. */
static bool relist_due(struct feed *f)
{
  pthread_mutex_lock(&f->inf->mu);
  bool r = f->relist;
  pthread_mutex_unlock(&f->inf->mu);
  return r;
}

/* opts.shard_by: whether buckets left the selection while the server
 * filters, so the watch is to be made again with the narrower selector
 * (from where it got to: no list). Takes mu; clears it. */
static bool rewatch_due(struct feed *f)
{
  pthread_mutex_lock(&f->inf->mu);
  bool r = f->rewatch;
  f->rewatch = false;
  pthread_mutex_unlock(&f->inf->mu);
  return r;
}

/* A list begins: it sees every namespace selected from now on. */
static void relist_begin(struct feed *f)
{
  pthread_mutex_lock(&f->inf->mu);
  f->relist = false;
  f->rewatch = false;
  for(int i = 0; i < 4; i++)
    f->listing[i] = atomic_load(&f->inf->sel[i]);
  pthread_mutex_unlock(&f->inf->mu);
  atomic_store(&f->inf->srv, -1); /* (a restarted server may have another gate) */
}

/* Sleeps ms or until f (NULL: the informer) is to stop; returns false if
 * it is. */
static bool sleep_unless_stopped(kcr_informer *inf, struct feed *f, uint64_t ms)
{
  struct timespec ts = kcr_time_mono_after(ms);
  bool s;
  pthread_mutex_lock(&inf->mu);
  while(!inf->stopping && !(f && f->stopping) &&
        pthread_cond_timedwait(&inf->cv, &inf->mu, &ts) == 0)
    ;
  s = inf->stopping || (f && f->stopping);
  pthread_mutex_unlock(&inf->mu);
  return !s;
}

/* ---- the byte budget (opts.max_bytes) ----
 *
 * What counts: the store's bytes and every feed's list in flight - its
 * gathered objects (a streaming list's reused ones are the store's, not
 * counted twice) and the page being read. Going over it empties the store
 * at once (go_over) and makes every feed list again: a new generation
 * (inf->gen). A feed's part of the store is of the generation its last
 * list was begun in; a list begun in an older one is dropped (apply_list),
 * a watch event of an older one is not put (the feed lists again first),
 * and a feed is synced only if no emptying came while its list was told,
 * so nothing of before the emptying comes back half. The order that makes
 * it so (empty_cache): unsync and a new generation under mu, then the
 * clear under wmu; the feeds check the generation under wmu when they
 * write, and under mu when they mark themselves synced. */

static void hold(struct feed *f, size_t n)
{
  f->inflight += n;
  atomic_fetch_add(&f->inf->inflight, n);
}

static void release(struct feed *f, size_t n)
{
  f->inflight -= n;
  atomic_fetch_sub(&f->inf->inflight, n);
}

/* Whether the feed's part of the store was emptied since its list. */
static bool stale(struct feed *f) { return f->gen != atomic_load(&f->inf->gen); }

/* Empties the store (no on_delete: nothing was deleted) into a new
 * generation, unsynced first - with over set (used bytes) when it is for
 * the budget, in the same step, so no reader sees it synced, or not over,
 * while it is empty - and cancels every feed's watch but except's (which
 * ends by itself), so each lists again before it puts anything. Not under
 * mu or wmu. */
static void empty_cache(kcr_informer *inf, struct feed *except, bool over, size_t used)
{
  pthread_mutex_lock(&inf->mu);
  if(over) {
    atomic_store(&inf->over, true);
    inf->over_bytes = used;
    inf->stats.budget_exceeded++;
  }
  atomic_fetch_add(&inf->gen, 1);
  inf->synced = false;
  for(struct feed *g = inf->feeds; g; g = g->next)
    g->synced = false;
  pthread_mutex_unlock(&inf->mu);
  pthread_mutex_lock(&inf->wmu);
  kcr__store_clear(inf->store);
  pthread_mutex_unlock(&inf->wmu);
  pthread_mutex_lock(&inf->mu);
  for(struct feed *g = inf->feeds; g; g = g->next)
    if(g->watch && g != except)
      kcr_watch_cancel(g->watch);
  pthread_cond_broadcast(&inf->cv);
  pthread_mutex_unlock(&inf->mu);
  update_gauges(inf);
}

/* The cache reached used bytes, over its budget: empty it, so every feed
 * lists again (after backoff) into the new generation. */
static void go_over(struct feed *f, size_t used)
{
  kcr_informer *inf = f->inf;

  empty_cache(inf, f, true, used); /* (f's own watch ends with KCR_EBUDGET) */
  kcr_metric_inc(inf->m_budget, (const char *[]){inf->name, NULL}, 1);
  KCR_LOG(KCR_LOG_ERROR,
          "informer: over its byte budget; its cache is emptied and listed again with "
          "backoff until it fits",
          KCR_S("informer", inf->name), KCR_I("maxBytes", inf->o.max_bytes),
          KCR_I("bytes", used), KCR_S("selects", inf->what),
          KCR_S("hint", "raise max_bytes, or select less: namespaces, a label selector, "
                        "a keep list, metadata_only"));
}

/* ---- the CRD gate (opts.await_crd) ----
 *
 * served says whether the feeds may list: set under mu by the CRD
 * informer's handlers (on its thread), read by the feeds. Turning false
 * empties the cache as the budget does (a new generation), after served is
 * cleared, so a list applied after the emptying sees served false under
 * wmu and is dropped (apply_list). */

/* Whether the CRD object o serves the informer's version; else why, into
 * why. */
static bool crd_serves(kcr_informer *inf, const kcr_obj *o, char *why, size_t n)
{
  cJSON *t = NULL, *v;
  bool est = false, served = false, listed = false;

  if(kcr_obj_parse(o, &t)) {
    snprintf(why, n, "cannot be read (out of memory)");
    return false;
  }
  cJSON_ArrayForEach(v, kcr_json_at(t, "/status/conditions"))
  {
    const char *ty = kcr_json_str(v, "/type"), *st = kcr_json_str(v, "/status");
    if(ty && st && !strcmp(ty, "Established"))
      est = !strcmp(st, "True");
  }
  cJSON_ArrayForEach(v, kcr_json_at(t, "/spec/versions"))
  {
    const char *name = kcr_json_str(v, "/name");
    if(name && !strcmp(name, inf->version)) {
      listed = true;
      served = cJSON_IsTrue(kcr_json_at(v, "/served"));
    }
  }
  cJSON_Delete(t);
  if(!listed)
    snprintf(why, n, "it has no version %s", inf->version);
  else if(!served)
    snprintf(why, n, "its version %s is not served", inf->version);
  else if(!est)
    snprintf(why, n, "it is not Established yet");
  return listed && served && est;
}

/* The CRD is now o (NULL: deleted): the feeds list, or stop and empty the
 * cache, as it says. On the CRD informer's thread. */
static void crd_is(kcr_informer *inf, const kcr_obj *o)
{
  char why[sizeof(inf->crd_why)] = "it is not installed";
  bool now = o && crd_serves(inf, o, why, sizeof(why)), was;

  pthread_mutex_lock(&inf->mu);
  was = atomic_load(&inf->served);
  atomic_store(&inf->served, now);
  snprintf(inf->crd_why, sizeof(inf->crd_why), "%s", now ? "" : why);
  pthread_cond_broadcast(&inf->cv);
  pthread_mutex_unlock(&inf->mu);
  if(now && !was)
    KCR_LOG(KCR_LOG_INFO, "informer: its CustomResourceDefinition serves it; listing",
            KCR_S("informer", inf->name), KCR_S("version", inf->version));
  else if(!now && was) {
    empty_cache(inf, NULL, false, 0);
    KCR_LOG(KCR_LOG_WARN,
            "informer: its CustomResourceDefinition does not serve it; cache emptied, "
            "waiting for it",
            KCR_S("informer", inf->name), KCR_S("version", inf->version),
            KCR_S("why", why));
  }
}

static void crd_seen(kcr_obj *o, void *ud) { crd_is(ud, o); }
static void crd_changed(kcr_obj *old, kcr_obj *cur, void *ud)
{
  (void)old;
  crd_is(ud, cur);
}
static void crd_deleted(kcr_obj *o, void *ud)
{
  (void)o;
  crd_is(ud, NULL);
}

/* Waits while the resource is not served (opts.await_crd); false if f is
 * to stop. */
static bool wait_served(struct feed *f)
{
  kcr_informer *inf = f->inf;
  bool s;
  pthread_mutex_lock(&inf->mu);
  while(!atomic_load(&inf->served) && !inf->stopping && !f->stopping)
    pthread_cond_wait(&inf->cv, &inf->mu);
  s = inf->stopping || f->stopping;
  pthread_mutex_unlock(&inf->mu);
  return !s;
}

/* KCR_EBUDGET, having emptied the cache, if it is over its budget now. */
static kcr_err check_budget(struct feed *f)
{
  kcr_informer *inf = f->inf;
  size_t used;

  if(!inf->o.max_bytes)
    return KCR_OK;
  used = kcr_store_bytes(inf->store) + atomic_load(&inf->inflight);
  if(used <= inf->o.max_bytes)
    return KCR_OK;
  go_over(f, used);
  return KCR_EBUDGET;
}

/* Logs an error once per distinct code in a row, then backs off. */
static bool fail_and_wait(struct feed *f, const char *what, kcr_err rc,
                          const struct kcr_errinfo *ei)
{
  kcr_informer *inf = f->inf;
  uint64_t delay = kcr_backoff_next(&f->backoff);
  const char *ns = f->ns ? f->ns : "";
  count(inf, &inf->stats.errors);
  if(rc != f->last_err && rc == KCR_EUNAUTHORIZED)
    /* The apiserver says no more than "Unauthorized": say whose
     * credentials, and what makes them fail. */
    KCR_LOG(KCR_LOG_WARN, "informer: request failed; retrying with backoff",
            KCR_S("informer", inf->name), KCR_S("namespace", ns), KCR_S("op", what),
            KCR_S("err", kcr_err_name(rc)), KCR_S("detail", ei->message),
            KCR_S("kubeconfig", kcr_config_origin(kcr_client_config(inf->o.client))),
            KCR_S("hint", "the apiserver refused the user's credentials: an expired "
                          "client certificate, or a token that expired or whose "
                          "ServiceAccount was deleted"),
            KCR_I("retryInMs", delay));
  else if(rc != f->last_err && rc != KCR_EBUDGET && /* (go_over said it) */
          atomic_load(&inf->served))                /* (crd_is said it) */
    KCR_LOG(KCR_LOG_WARN, "informer: request failed; retrying with backoff",
            KCR_S("informer", inf->name), KCR_S("namespace", ns), KCR_S("op", what),
            KCR_S("err", kcr_err_name(rc)), KCR_S("detail", ei->message),
            KCR_I("retryInMs", delay));
  else
    KCR_LOG(KCR_LOG_DEBUG, "informer: still failing", KCR_S("informer", inf->name),
            KCR_S("namespace", ns), KCR_S("op", what), KCR_S("err", kcr_err_name(rc)),
            KCR_I("retryInMs", delay));
  f->last_err = rc;
  if(!atomic_load(&inf->served)) /* the CRD went: run waits for it instead */
    return !stopping(f);
  return sleep_unless_stopped(inf, f, delay);
}

/* The store's objects of namespace ns that are not in keep[0..nkeep)
 * (sorted keys; NULL, 0: all of them), taken out of the store into
 * *gone[0..*ngone). Under wmu. Errors: KCR_ENOMEM (nothing taken). */
static kcr_err take_ns(kcr_informer *inf, const char *ns, const char **keep, size_t nkeep,
                       kcr_obj ***gone, size_t *ngone)
{
  kcr_obj **all;
  size_t n, k = 0;
  kcr_err rc = kcr_store_ref_by_index(inf->store, NS_INDEX, ns, &all, &n);

  *gone = NULL;
  *ngone = 0;
  if(rc)
    return rc;
  for(size_t i = 0; i < n; i++) {
    const char *key = kcr_obj_key(all[i]);
    if(nkeep && bsearch(&key, keep, nkeep, sizeof(*keep), cmp_key)) {
      kcr_obj_unref(all[i]);
      continue;
    }
    kcr_obj *old = NULL;
    kcr_store_delete_key(inf->store, key, &old);
    kcr_obj_unref(old); /* the store's; all[i] is ours */
    all[k++] = all[i];
  }
  *gone = all;
  *ngone = k;
  return KCR_OK;
}

/* A feed of one namespace of several: the listed objects are put into
 * the store one by one, and the namespace's objects the list lacks are
 * taken out (the other namespaces' objects stay). prev[i] gets the object
 * c->objs[i] replaced (NULL: new), *gone what vanished. On error what was
 * put stays (newer objects, announced by the caller) and the list is
 * tried again. Under wmu. */
static kcr_err put_listed(struct feed *f, struct kcr__obj_list *c, kcr_obj **prev,
                          size_t *nput, kcr_obj ***gone, size_t *ngone)
{
  kcr_informer *inf = f->inf;
  const char **keys = NULL;
  kcr_err rc = KCR_OK;

  *nput = 0;
  for(size_t i = 0; i < c->n && !rc; i++) {
    kcr_obj_ref(c->objs[i]); /* one for the store */
    if((rc = kcr_store_put(inf->store, c->objs[i], &prev[i]))) {
      kcr_obj_unref(c->objs[i]);
      break;
    }
    if(!prev[i])
      f->held++;
    (*nput)++;
  }
  if(rc || f->held == c->n) /* nothing else of ns is cached */
    return rc;
  if(!(keys = malloc(c->n * sizeof(*keys) + 1)))
    return KCR_ENOMEM;
  for(size_t i = 0; i < c->n; i++)
    keys[i] = kcr_obj_key(c->objs[i]);
  qsort(keys, c->n, sizeof(*keys), cmp_key);
  rc = take_ns(inf, f->ns, keys, c->n, gone, ngone);
  if(!rc)
    f->held -= *ngone;
  free(keys);
  return rc;
}

/* Applies a whole list - c's objects (taken) at resourceVersion rv (taken)
 * - to the store: the whole store, or one namespace's part of it; tells
 * the handlers (on_update for keys cached before - but for unchanged
 * ones, the cached object itself - on_add for new ones,
 * on_delete for those that vanished) and marks the feed synced. On error
 * f->rv and synced stay as they were and the list is to be made again;
 * the whole store is left as it was, one namespace's keeps what was put
 * (newer objects, told). ei says what failed. */
/* Under wmu: why a list begun in generation gen0 is not to be applied -
 * the cache was emptied since, or the CRD stopped serving - or KCR_OK. */
static kcr_err list_dropped(kcr_informer *inf, unsigned gen0)
{
  if(atomic_load(&inf->gen) == gen0 && atomic_load(&inf->served))
    return KCR_OK;
  return atomic_load(&inf->over) ? KCR_EBUDGET : KCR_ENOTFOUND;
}

/* opts.cluster_watch: takes out of a whole list c (each object with a
 * reference for the store besides c's) and prev, kept in step, the
 * objects of namespaces that are not selected now - those of a namespace
 * that left the selection while the list was read (ns_left takes them out
 * of the store under wmu, after the namespace left: what is applied after
 * it must not bring them back). Under wmu. */
static void drop_unwanted(kcr_informer *inf, struct kcr__obj_list *c, kcr_obj **prev)
{
  size_t k = 0;
  if(!inf->o.cluster_watch && !inf->o.shard_by)
    return;
  for(size_t i = 0; i < c->n; i++) {
    if(wanted(inf, c->objs[i])) {
      c->objs[k] = c->objs[i];
      prev[k++] = prev[i];
      continue;
    }
    kcr_obj_unref(c->objs[i]); /* the store's */
    kcr_obj_unref(c->objs[i]);
    kcr_obj_unref(prev[i]);
  }
  c->n = k;
}

/* opts.cluster_watch: takes out of what a whole list found gone (gone[0..
 * *n)) the objects of namespaces not selected now, unreferenced, untold: a
 * namespace that left the selection - its ns_left, which takes its objects
 * out without on_delete, may not have run yet - not a deletion. Under wmu. */
static void drop_left(kcr_informer *inf, kcr_obj **gone, size_t *n)
{
  size_t k = 0;
  if(!inf->o.cluster_watch && !inf->o.shard_by)
    return;
  for(size_t i = 0; i < *n; i++)
    if(wanted(inf, gone[i]))
      gone[k++] = gone[i];
    else
      kcr_obj_unref(gone[i]);
  *n = k;
}

static kcr_err apply_list(struct feed *f, struct kcr__obj_list *c, char *rv,
                          unsigned gen0, struct kcr_errinfo *ei)
{
  kcr_informer *inf = f->inf;
  bool nsdone;
  kcr_obj **prev = NULL, **gone = NULL;
  size_t ngone = 0, nput = 0;
  kcr_err rc = KCR_OK;

  release(f, f->inflight); /* the store holds (or drops) them from here on */
  /* Remember what was cached to tell adds from updates. */
  if(c->n && !(prev = calloc(c->n, sizeof(*prev))))
    rc = kcr_errinfo_set(ei, KCR_ENOMEM, "out of memory handling the list");
  if(!rc && !f->whole) {
    pthread_mutex_lock(&inf->wmu);
    if(!(rc = list_dropped(inf, gen0))) {
      if(f->gen != gen0) { /* emptied since its last list: it holds nothing */
        f->held = 0;
        f->gen = gen0;
      }
      rc = put_listed(f, c, prev, &nput, &gone, &ngone);
    }
    pthread_mutex_unlock(&inf->wmu);
    if(rc)
      kcr_errinfo_set(ei, rc, "%s",
                      rc == KCR_ENOMEM ? "out of memory putting the list into the store"
                                       : DROPPED);
  }
  for(size_t i = 0; !rc && f->whole && i < c->n; i++) {
    prev[i] = kcr_store_ref_key(inf->store, kcr_obj_key(c->objs[i]));
    kcr_obj_ref(c->objs[i]); /* one for the store, one for the events below */
  }
  if(!rc && f->whole) {
    pthread_mutex_lock(&inf->wmu);
    if(!(rc = list_dropped(inf, gen0))) {
      drop_unwanted(inf, c, prev);
      if(!(rc = kcr_store_replace(inf->store, c->objs, c->n, &gone, &ngone))) {
        f->gen = gen0;
        drop_left(inf, gone, &ngone);
      }
    }
    pthread_mutex_unlock(&inf->wmu);
    if(rc) {
      kcr_errinfo_set(ei, rc, "%s",
                      rc == KCR_ENOMEM ? "out of memory replacing the store" : DROPPED);
      for(size_t i = 0; i < c->n; i++)
        kcr_obj_unref(c->objs[i]); /* the store did not take them */
    }
  }
  if(rc) {
    for(size_t i = 0; i < nput; i++) /* what one namespace's list put, told */
      if(prev[i] != c->objs[i])
        prev[i] ? emit_update(inf, prev[i], c->objs[i]) : emit_add(inf, c->objs[i]);
    kcr_objs_unref(c->objs, c->n);
    kcr_objs_unref(prev, prev ? c->n : 0);
    free(rv);
    return rc;
  }
  free(f->rv);
  f->rv = rv;
  update_gauges(inf);
  KCR_LOG(KCR_LOG_DEBUG, "informer: listed", KCR_S("informer", inf->name),
          KCR_S("namespace", f->ns ? f->ns : ""), KCR_I("objects", c->n),
          KCR_I("vanished", ngone), KCR_S("resourceVersion", rv));
  for(size_t i = 0; i < c->n; i++) {
    if(prev[i] == c->objs[i]) /* unchanged (a streaming list's): nothing to tell */
      continue;
    if(prev[i])
      emit_update(inf, prev[i], c->objs[i]);
    else
      emit_add(inf, c->objs[i]);
  }
  for(size_t i = 0; i < ngone; i++)
    emit_delete(inf, gone[i]);
  kcr_objs_unref(gone, ngone);
  kcr_objs_unref(prev, c->n);
  /* Synced means the store holds the list and every handler has seen it -
   * unless the cache was emptied meanwhile (then run lists again). The
   * informer's own synced is worked out now, not only when asked, so that
   * over clears without a reader. */
  nsdone = !inf->nsinf || kcr_informer_has_synced(inf->nsinf);
  pthread_mutex_lock(&inf->mu);
  if(atomic_load(&inf->gen) == gen0) {
    f->synced = true;
    for(int i = 0; i < 4; i++)
      f->covered[i] = f->listing[i] & atomic_load(&inf->sel[i]);
    synced_locked(inf, nsdone);
  }
  pthread_cond_broadcast(&inf->cv);
  pthread_mutex_unlock(&inf->mu);
  kcr_objs_unref(c->objs, c->n);
  f->last_err = KCR_OK;
  return KCR_OK;
}

/* A paged LIST's objects, counted as in flight with the page being read. */
struct gather {
  struct kcr__obj_list l;
  struct feed *f;
  size_t page; /* the bytes of the page being read */
};

static kcr_err gather_page(size_t len, void *ud)
{
  struct gather *g = ud;
  if(g->f->inf->o.cluster_watch) /* (other namespaces' objects: not counted) */
    return KCR_OK;
  release(g->f, g->page);
  hold(g->f, g->page = len);
  return check_budget(g->f);
}

/* A listed object o (taken) that the store holds unchanged - the same
 * uid and resourceVersion - is the stored one again, so a relist holds no
 * second copy of what did not change (and tells nothing of it). Returns
 * the object to gather, and whether it is the store's (no bytes of its
 * own). */
static kcr_obj *reuse_cached(kcr_informer *inf, kcr_obj *o, bool *reused)
{
  kcr_obj *cached = kcr_store_ref_key(inf->store, kcr_obj_key(o));
  *reused = cached && !strcmp(kcr_obj_uid(cached), kcr_obj_uid(o)) &&
            !strcmp(kcr_obj_rv(cached), kcr_obj_rv(o));
  if(!*reused) {
    kcr_obj_unref(cached);
    return o;
  }
  kcr_obj_unref(o);
  return cached;
}

static kcr_err gather_item(const char *text, size_t len, void *ud)
{
  struct gather *g = ud;
  size_t n0 = g->l.n;
  bool reused;
  kcr_err rc = kcr__obj_list_add(text, len, &g->l);
  if(rc || g->l.n == n0) /* (an item without a name is skipped) */
    return rc;
  if(!wanted(g->f->inf, g->l.objs[n0])) { /* cluster_watch, shard_by: not selected */
    kcr_obj_unref(g->l.objs[--g->l.n]);
    return KCR_OK;
  }
  g->l.objs[n0] = reuse_cached(g->f->inf, g->l.objs[n0], &reused);
  if(reused) /* the store's: no more bytes */
    return KCR_OK;
  hold(g->f, kcr_obj_size(g->l.objs[n0]));
  return check_budget(g->f);
}

/* The paged LIST. */
static enum state do_list(struct feed *f)
{
  kcr_informer *inf = f->inf;
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  struct gather g = {.l = {.who = inf->name,
                           .flags = inf->obj_flags,
                           .proj = inf->proj,
                           .quit = &f->quit},
                     .f = f};
  struct kcr__obj_list c;
  struct kcr_ref ref = {.gvr = &inf->gvr, .ns = f->ns};
  struct kcr_list_opts lo = {.label_selector = inf->lsel,
                             .field_selector = inf->fsel,
                             .limit = inf->o.page_size,
                             .metadata_only = inf->o.metadata_only};
  char *rv = NULL;
  enum state next = ST_WATCHING;
  unsigned gen0 = atomic_load(&inf->gen);
  struct kcr_buf sb = KCR_BUF_INIT;
  uint64_t bits[4];
  kcr_err rc;

  count(inf, &inf->stats.lists);
  relist_begin(f);
  pthread_mutex_lock(&inf->mu);
  memcpy(bits, f->listing, sizeof(bits));
  pthread_mutex_unlock(&inf->mu);
  lo.shard_selector = shard_sel(f, bits, &sb);
  rc = kcr__list_each_text_paged(inf->o.client, &ref, &lo, gather_page, gather_item, &g,
                                 &rv, &ei);
  kcr_buf_cleanup(&sb);
  c = g.l;
  if(rc) {
    release(f, f->inflight);
    kcr_objs_unref(c.objs, c.n);
    free(rv);
  } else {
    rc = apply_list(f, &c, rv, gen0, &ei);
  }
  if(rc == KCR_ECANCELED) /* stopped while listing */
    next = ST_STOPPED;
  else if(rc) /* list again later */
    next = fail_and_wait(f, "list", rc, &ei) ? ST_LISTING : ST_STOPPED;
  kcr_errinfo_cleanup(&ei);
  return next;
}

/* A streaming list's initial event: o (taken) joins the list. An object
 * the store holds unchanged (the same uid and resourceVersion) is the
 * stored one again, so a relist does not hold two copies of what did not
 * change. The watchdog learns that the stream is alive. */
static kcr_err initial_event(struct feed *f, const struct kcr_watch_event *ev, kcr_obj *o)
{
  kcr_informer *inf = f->inf;
  bool reused;
  kcr_err rc = KCR_OK;

  pthread_mutex_lock(&inf->mu);
  f->init->last_ms = kcr_time_mono_ms();
  pthread_mutex_unlock(&inf->mu);
  if(ev->type != KCR_WATCH_ADDED) {
    /* Before the end bookmark a streaming list sends ADDED alone: this is
     * a server that ignored sendInitialEvents and watches - list in pages. */
    kcr_obj_unref(o);
    f->init->ignored = true;
    return KCR_ECANCELED;
  }
  if(!wanted(inf, o)) { /* cluster_watch, shard_by: not selected */
    kcr_obj_unref(o);
    return KCR_OK;
  }
  o = reuse_cached(inf, o, &reused);
  if((rc = kcr__obj_list_push(&f->init->l, o))) {
    kcr_obj_unref(o); /* not gathered: the stream ends, and the list is made again */
    return rc;
  }
  if(reused) /* the store's: no more bytes */
    return KCR_OK;
  hold(f, kcr_obj_size(o));
  return check_budget(f);
}

/* The end bookmark of a streaming list: what came is applied as a list at
 * the bookmark's resourceVersion, and the stream goes on as a watch. */
static kcr_err initial_end(struct feed *f, const struct kcr_watch_event *ev)
{
  kcr_informer *inf = f->inf;
  struct kcr__obj_list l = f->init->l;
  char *rv;
  bool late;
  kcr_err rc;

  if(!ev->resource_version || !*ev->resource_version) { /* nowhere to go on from */
    f->init->ignored = true;
    return KCR_ECANCELED;
  }
  pthread_mutex_lock(&inf->mu);
  late = f->init->timed_out; /* the timer canceled the stream already */
  f->init->applying = !late;
  pthread_mutex_unlock(&inf->mu);
  if(late)
    return KCR_ECANCELED;
  if(!(rv = strdup(ev->resource_version)))
    return KCR_ENOMEM;
  f->init->l = (struct kcr__obj_list){0};
  rc = apply_list(f, &l, rv, f->init->gen, NULL);
  pthread_mutex_lock(&inf->mu);
  f->init->applying = false;
  f->init->applied = !rc;
  if(!rc) { /* from now on the stream is the feed's watch */
    inf->stats.watches++;
    f->init = NULL;
  }
  /* (cluster_watch: a namespace entered while it was gathered - end the
   * stream, and run lists again) */
  if(!rc && f->relist)
    rc = KCR_ECANCELED;
  pthread_mutex_unlock(&inf->mu);
  return rc;
}

static kcr_err on_event(struct kcr_watch_event *ev, void *ud)
{
  /* (ei of the watch is not reachable here: the watch ends with rc, and
   * fail_and_wait logs "store could not take an event" for ENOMEM.) */
  struct feed *f = ud;
  kcr_informer *inf = f->inf;
  kcr_obj *o = NULL, *old = NULL;
  bool skip; /* cluster_watch: of a namespace not selected */
  /* what the watch's check found: stepped over, not walked again */
  const struct kcr__json_want known[2] = {
      {.at = ev->metadata_text, .n = ev->metadata_len},
      {.at = ev->managed_fields_text, .n = ev->managed_fields_len}};
  kcr_err rc;

  if(f->init && ev->type == KCR_WATCH_BOOKMARK)
    return ev->initial_events_end ? initial_end(f, ev) : KCR_OK;
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
  if(f->init)
    return initial_event(f, ev, o);
  switch(ev->type) {
  case KCR_WATCH_ADDED:
  case KCR_WATCH_MODIFIED:
    kcr_obj_ref(o); /* one for the store */
    pthread_mutex_lock(&inf->wmu);
    /* (emptied for the budget since the feed's list: it lists again first;
     * cluster_watch: of a namespace not selected, under wmu so that one
     * that just left - ns_left empties it under wmu - stays empty) */
    skip = !stale(f) && !wanted(inf, o);
    rc = stale(f) ? KCR_EBUDGET : skip ? KCR_OK : kcr_store_put(inf->store, o, &old);
    if(!rc && !skip && !old)
      f->held++;
    /* (shard_by: an object whose controller owner changed to another
     * shard's leaves the cache untold, as one whose bucket left) */
    if(skip && inf->o.shard_by)
      kcr_store_delete_key(inf->store, kcr_obj_key(o), &old);
    pthread_mutex_unlock(&inf->wmu);
    if(skip) {
      kcr_obj_unref(o); /* the store's */
      break;
    }
    if(rc) {
      /* Not stored: fail the callback, so the watch does not move past this
       * event and the next one delivers it again. */
      kcr_obj_unref(o);
      break;
    }
    if((rc = check_budget(f))) /* emptied: nothing to tell */
      break;
    if(old)
      emit_update(inf, old, o);
    else
      emit_add(inf, o);
    break;
  case KCR_WATCH_DELETED:
    pthread_mutex_lock(&inf->wmu);
    skip = !stale(f) && !wanted(inf, o);
    if(stale(f))
      rc = KCR_EBUDGET;
    else if(!skip)
      kcr_store_delete_key(inf->store, kcr_obj_key(o), &old);
    if(old)
      f->held--;
    pthread_mutex_unlock(&inf->wmu);
    if(!rc && !skip)
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
static uint64_t watch_timeout_ms(struct feed *f)
{
  uint64_t ms = f->inf->o.watch_timeout_min_ms;
  uint64_t span = f->inf->o.watch_timeout_max_ms - ms;

  if(span) {
    uint64_t r = (uint64_t)rand_r(&f->seed) << 31 ^ (uint64_t)rand_r(&f->seed);
    ms += span == UINT64_MAX ? r : r % (span + 1);
  }
  return ms; /* the watch sends it as whole seconds, rounded up */
}

/* The selector of no bucket: the one hash 0 (a selector cannot select
 * nothing), whose object, if any, is dropped here. */
#define NO_BUCKET                                                                        \
  "shardRange(object.metadata.uid, '0x0000000000000000', '0x0000000000000001')"

/* A LIST of one object of f's resource (its label and field selectors)
 * with shard selector sel (NULL: none): the answer, or NULL on error. */
static cJSON *list_one(struct feed *f, const char *sel)
{
  kcr_informer *inf = f->inf;
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  struct kcr_ref ref = {.gvr = &inf->gvr, .ns = f->ns};
  struct kcr_list_opts lo = {.label_selector = inf->lsel,
                             .field_selector = inf->fsel,
                             .shard_selector = sel,
                             .limit = 1};
  cJSON *l = NULL;
  if(kcr_list(inf->o.client, &ref, &lo, &l, &ei))
    KCR_LOG(KCR_LOG_DEBUG, "informer: cannot ask whether the server filters by shard",
            KCR_S("informer", inf->name), KCR_I("code", ei.code),
            KCR_S("detail", ei.message ? ei.message : ""));
  kcr_errinfo_cleanup(&ei);
  return l;
}

/* opts.shard_by KCR_SHARD_BY_UID: whether the server applies shard
 * selectors to the resource (its ShardedListAndWatch gate): 1 yes, 0 no (a
 * server with the gate off ignores them and sends everything), -1 not
 * known. A LIST of one object selecting no bucket (NO_BUCKET) tells: an
 * answer with metadata.shardInfo, the server's echo, applied it; one with
 * an object ignored it; an empty one without the echo (v1.37 echoes
 * built-in kinds only, not custom resources) applied it if a LIST of one
 * without the selector finds an object, and tells nothing if the
 * collection is empty. Asked when not known: at each list and after a
 * watch failed (the server may have restarted with another gate). The
 * selector is sent either way - a server that ignores it costs bytes, and
 * every object is filtered here too - so the answer decides only what is
 * logged and counted (kcr_informer_stats.server_shards) and whether a
 * narrower selection starts the watch again. */
static int server_shards(struct feed *f)
{
  kcr_informer *inf = f->inf;
  cJSON *l;
  int was = atomic_load(&inf->srv), now = -1;

  if(was >= 0 || !(l = list_one(f, NO_BUCKET)))
    return was;
  if(cJSON_IsObject(kcr_json_at(l, "/metadata/shardInfo")))
    now = 1;
  else if(cJSON_GetArraySize(kcr_json_at(l, "/items")) > 0)
    now = 0;
  cJSON_Delete(l);
  if(now < 0 && (l = list_one(f, NULL))) {
    if(cJSON_GetArraySize(kcr_json_at(l, "/items")) > 0)
      now = 1;
    cJSON_Delete(l);
  }
  if(now < 0)
    return -1;
  atomic_store(&inf->srv, now);
  pthread_mutex_lock(&inf->mu);
  was = inf->srv_told;
  inf->srv_told = now;
  inf->stats.server_shards = now;
  pthread_mutex_unlock(&inf->mu);
  if(was != now)
    KCR_LOG(KCR_LOG_INFO,
            now ? "informer: the server filters by shard (shardSelector)"
                : "informer: the server ignores shardSelector (its ShardedListAndWatch "
                  "feature gate is off): every object crosses the wire and is filtered "
                  "here",
            KCR_S("informer", inf->name));
  return now;
}

/* The shard selector of a request of f for the buckets in bits[4], into
 * b (returned), or NULL for none: not sharded by uid, every bucket, out of
 * memory (the objects are filtered here anyway). Asks whether the server
 * applies it when that is not known (server_shards). */
static const char *shard_sel(struct feed *f, const uint64_t bits[4], struct kcr_buf *b)
{
  uint8_t set[KCR_RING_BUCKETS / 8] = {0};
  bool all = true;

  if(f->inf->o.shard_by != KCR_SHARD_BY_UID)
    return NULL;
  for(unsigned i = 0; i < KCR_RING_BUCKETS; i++) {
    bool in = bits[i / 64] >> i % 64 & 1;
    set[i / 8] |= (uint8_t)(in << i % 8);
    all = all && in;
  }
  if(all)
    return NULL;
  if(kcr_shard_selector(set, b) == KCR_ENOTFOUND)
    kcr_buf_puts(b, NO_BUCKET);
  if(kcr_buf_err(b))
    return NULL;
  server_shards(f);
  return kcr_buf_str(b);
}

/* The buckets selected now. */
static void sel_now(kcr_informer *inf, uint64_t bits[4])
{
  for(int i = 0; i < 4; i++)
    bits[i] = atomic_load(&inf->sel[i]);
}

/* Makes the feed's watch: from f->rv, or with initial a streaming list. */
static kcr_err new_watch(struct feed *f, bool initial, kcr_watch **w,
                         struct kcr_errinfo *ei)
{
  kcr_informer *inf = f->inf;
  struct kcr_ref ref = {.gvr = &inf->gvr, .ns = f->ns};
  struct kcr_buf sb = KCR_BUF_INIT;
  uint64_t bits[4];
  kcr_err rc;
  struct kcr_watch_opts wo = {.client = inf->o.client,
                              .ref = &ref,
                              .on_event = on_event,
                              .ud = f,
                              .resource_version = initial ? NULL : f->rv,
                              .label_selector = inf->lsel,
                              .field_selector = inf->fsel,
                              .timeout_ms = watch_timeout_ms(f),
                              .allow_bookmarks = true,
                              .send_initial_events = initial,
                              .drop_managed_fields = !inf->o.keep_managed_fields,
                              .metadata_only = inf->o.metadata_only,
                              .object_text = true,
                              .batch_ms = inf->o.watch_unbatched ? 0
                                          : inf->o.watch_batch_ms
                                              ? inf->o.watch_batch_ms
                                              : KCR_INFORMER_WATCH_BATCH_MS};
  /* (a streaming list asks for the buckets its list began with) */
  if(initial) {
    pthread_mutex_lock(&inf->mu);
    memcpy(bits, f->listing, sizeof(bits));
    pthread_mutex_unlock(&inf->mu);
  } else {
    sel_now(inf, bits);
  }
  wo.shard_selector = shard_sel(f, bits, &sb);
  rc = kcr_watch_new(&wo, w, ei);
  kcr_buf_cleanup(&sb);
  return rc;
}

/* Runs watch w as the feed's current one (kcr_informer_stop cancels it),
 * then frees it and keeps the resourceVersion it got to. */
static kcr_err run_watch(struct feed *f, kcr_watch *w, struct kcr_errinfo *ei)
{
  kcr_informer *inf = f->inf;
  kcr_err rc;

  pthread_mutex_lock(&inf->mu);
  /* (a cache emptied before now: its sweep did not see this watch) */
  if(inf->stopping || f->stopping || (f->relist && !f->init) ||
     (f->init && f->init->timed_out) || (!f->init && stale(f)))
    kcr_watch_cancel(w);
  f->watch = w;
  pthread_mutex_unlock(&inf->mu);
  rc = kcr_watch_run(w, ei);
  pthread_mutex_lock(&inf->mu);
  f->watch = NULL;
  pthread_mutex_unlock(&inf->mu);
  /* (a streaming list not applied is no place to watch from) */
  if(!f->init && kcr_watch_rv(w)) {
    char *rv = strdup(kcr_watch_rv(w));
    if(rv) {
      free(f->rv);
      f->rv = rv;
    }
  }
  kcr_watch_free(w);
  return rc;
}

/* The next state after a watch that ran (rc: how it ended; it began at t0
 * with events0 events counted). */
static enum state after_watch(struct feed *f, kcr_err rc, struct kcr_errinfo *ei,
                              uint64_t t0, uint64_t events0)
{
  kcr_informer *inf = f->inf;
  switch(rc) {
  case KCR_OK: /* the server's timeout: watch again from rv */
    f->last_err = KCR_OK;
    return ST_WATCHING;
  case KCR_ECANCELED: /* stopping, or emptied (run lists again), or else */
    if(stopping(f))
      return ST_STOPPED;
    if(stale(f) || !atomic_load(&inf->served) || relist_due(f))
      return ST_WATCHING; /* (run lists again) */
    if(rewatch_due(f))    /* (shard_by: buckets left; a narrower selector) */
      return ST_WATCHING;
    return fail_and_wait(f, "watch", rc, ei) ? ST_WATCHING : ST_STOPPED;
  case KCR_EBUDGET: /* emptied: run lists again after backoff */ return ST_WATCHING;
  case KCR_EGONE:
    count(inf, &inf->stats.relists_gone);
    KCR_LOG(KCR_LOG_INFO, "informer: resourceVersion too old; listing again",
            KCR_S("informer", inf->name), KCR_S("namespace", f->ns ? f->ns : ""),
            KCR_S("resourceVersion", f->rv));
    return ST_LISTING;
  default:
    atomic_store(&inf->srv, -1); /* (shard_by: ask the server again) */
    /* A watch that worked - delivered an event, or streamed for a second -
     * and then broke (a connection cut mid-stream): not a reason to wait
     * longer each time, or a cut every few seconds would leave the cache
     * stale for up to the backoff's 30 s. Only watches that fail at once
     * back off further (client-go's "very short watch" rule). */
    pthread_mutex_lock(&inf->mu);
    if(inf->stats.events > events0 || kcr_time_mono_ms() - t0 >= 1000)
      kcr_backoff_reset(&f->backoff);
    pthread_mutex_unlock(&inf->mu);
    return fail_and_wait(f, "watch", rc, ei) ? ST_WATCHING : ST_STOPPED;
  }
}

static uint64_t events_now(kcr_informer *inf)
{
  pthread_mutex_lock(&inf->mu);
  uint64_t n = inf->stats.events;
  pthread_mutex_unlock(&inf->mu);
  return n;
}

static enum state do_watch(struct feed *f)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  uint64_t t0 = kcr_time_mono_ms(), events0 = events_now(f->inf);
  kcr_watch *w;
  enum state next;
  kcr_err rc = new_watch(f, false, &w, &ei);

  if(rc) {
    next = fail_and_wait(f, "watch", rc, &ei) ? ST_WATCHING : ST_STOPPED;
  } else {
    count(f->inf, &f->inf->stats.watches);
    next = after_watch(f, run_watch(f, w, &ei), &ei, t0, events0);
  }
  kcr_errinfo_cleanup(&ei);
  return next;
}

/* The timer thread (with streaming lists): cancels a feed's streaming
 * list when no event has come for initial_events_wait_ms before the end
 * bookmark (a server that ignored sendInitialEvents and will never send
 * one); the feed then lists in pages. One per informer, made with the
 * others at start, so a start that can make its threads runs to the end. */
/* When a streaming list that has no end bookmark yet is given up: wait_ms
 * after its last event, and at most INITIAL_EVENTS_CAP times wait_ms after
 * it began (a server that ignores the parameters on a busy resource never
 * falls silent). Saturates. */
#define INITIAL_EVENTS_CAP 6
static uint64_t deadline(const struct initial *in, uint64_t wait_ms)
{
  uint64_t quiet = in->last_ms + wait_ms, cap;
  if(quiet < in->last_ms)
    quiet = UINT64_MAX;
  cap = wait_ms > UINT64_MAX / INITIAL_EVENTS_CAP ? UINT64_MAX
                                                  : wait_ms * INITIAL_EVENTS_CAP;
  cap = in->started_ms + cap < in->started_ms ? UINT64_MAX : in->started_ms + cap;
  return quiet < cap ? quiet : cap;
}

static void *run_timer(void *p)
{
  kcr_informer *inf = p;

  pthread_mutex_lock(&inf->mu);
  while(!inf->stopping) {
    uint64_t now = kcr_time_mono_ms(), wait = 60000;
    for(struct feed *f = inf->feeds; f; f = f->next) {
      struct initial *in = f->init;
      uint64_t due;
      if(!in || in->applying || in->applied || in->ended || in->timed_out)
        continue;
      due = deadline(in, inf->o.initial_events_wait_ms);
      if(now >= due) {
        in->timed_out = true;
        if(f->watch)
          kcr_watch_cancel(f->watch);
      } else if(due - now < wait) {
        wait = due - now;
      }
    }
    struct timespec ts = kcr_time_mono_after(wait);
    pthread_cond_timedwait(&inf->cv, &inf->mu, &ts);
  }
  pthread_mutex_unlock(&inf->mu);
  return NULL;
}

/* Whether a refused streaming list is one a paged LIST replaces: the
 * server does not do it (422: the WatchList gate is off; 400, 406, 501:
 * an older or an aggregated apiserver). */
static bool stream_refused(const struct kcr_errinfo *ei)
{
  return ei->code == 422 || ei->code == 400 || ei->code == 406 || ei->code == 501;
}

/* The streaming list (kcr_watch_opts.send_initial_events): the initial
 * events are gathered and applied at the end bookmark, and the same
 * stream goes on as the watch. A server that refuses it, or sends no end
 * bookmark, gets a paged LIST instead - this time: the next relist tries
 * streaming again. */
static enum state do_stream(struct feed *f)
{
  kcr_informer *inf = f->inf;
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  struct initial in = {
      .l = {.who = inf->name, .flags = inf->obj_flags, .proj = inf->proj},
      .started_ms = kcr_time_mono_ms(),
      .last_ms = kcr_time_mono_ms(),
      .gen = atomic_load(&inf->gen)};
  uint64_t t0 = kcr_time_mono_ms(), events0 = events_now(inf);
  const char *why = NULL;
  kcr_watch *w;
  enum state next;
  kcr_err rc;

  relist_begin(f);
  if((rc = new_watch(f, true, &w, &ei))) {
    next = fail_and_wait(f, "list", rc, &ei) ? ST_LISTING : ST_STOPPED;
    kcr_errinfo_cleanup(&ei);
    return next;
  }
  pthread_mutex_lock(&inf->mu);
  f->init = &in; /* the timer thread watches it from now on */
  inf->stats.stream_lists++;
  pthread_cond_broadcast(&inf->cv);
  pthread_mutex_unlock(&inf->mu);
  rc = run_watch(f, w, &ei);
  pthread_mutex_lock(&inf->mu);
  in.ended = true;
  f->init = NULL;
  pthread_mutex_unlock(&inf->mu);
  if(in.applied) { /* listed; then it was a watch */
    next = rc == KCR_ECANCELED && !stopping(f) ? ST_WATCHING
                                               : after_watch(f, rc, &ei, t0, events0);
    kcr_errinfo_cleanup(&ei);
    return next;
  }
  kcr_objs_unref(in.l.objs, in.l.n);
  release(f, f->inflight);
  if(stopping(f))
    why = NULL;
  else if((rc == KCR_ECANCELED && (in.timed_out || in.ignored)) || rc == KCR_OK)
    why = "no_end_bookmark"; /* (OK: the stream ended without one) */
  else if(rc != KCR_ECANCELED && stream_refused(&ei))
    why = "refused";
  if(!why) { /* stopped, or failed as any request can: stream again */
    next = stopping(f)                         ? ST_STOPPED
           : fail_and_wait(f, "list", rc, &ei) ? ST_LISTING
                                               : ST_STOPPED;
    kcr_errinfo_cleanup(&ei);
    return next;
  }
  pthread_mutex_lock(&inf->mu);
  inf->stats.list_fallbacks++;
  pthread_mutex_unlock(&inf->mu);
  kcr_metric_inc(inf->m_fallbacks, (const char *[]){inf->name, why, NULL}, 1);
  KCR_LOG(KCR_LOG_INFO, "informer: no streaming list here; listing in pages",
          KCR_S("informer", inf->name), KCR_S("namespace", f->ns ? f->ns : ""),
          KCR_S("reason", why), KCR_I("code", ei.code),
          KCR_S("detail", ei.message ? ei.message : ""));
  kcr_errinfo_cleanup(&ei);
  return do_list(f);
}

/* Whether lists are streamed (the default) or paged. */
static bool inf_streams(const kcr_informer *inf) { return !inf->o.paged_list; }

/* opts.shard_by: whether no bucket is selected. */
static bool nothing_selected(kcr_informer *inf)
{
  for(int i = 0; inf->o.shard_by && i < 4; i++)
    if(atomic_load(&inf->sel[i]))
      return false;
  return inf->o.shard_by != KCR_SHARD_BY_NONE;
}

/* opts.shard_by with no bucket selected (a replica not yet in its ring, or
 * owning nothing): the feed holds nothing and counts as synced without a
 * request until buckets enter (kcr_informer_set_buckets sets relist) or it
 * stops - what a list would cost is the whole resource where the server
 * ignores the selector. Returns false when stopping. */
static bool idle(struct feed *f)
{
  kcr_informer *inf = f->inf;
  bool nsdone = !inf->nsinf || kcr_informer_has_synced(inf->nsinf), go;

  pthread_mutex_lock(&inf->mu);
  f->relist = false;
  memset(f->listing, 0, sizeof(f->listing));
  memset(f->covered, 0, sizeof(f->covered));
  f->synced = true;
  synced_locked(inf, nsdone);
  pthread_cond_broadcast(&inf->cv);
  while(!f->relist && !inf->stopping && !f->stopping && nothing_selected(inf))
    pthread_cond_wait(&inf->cv, &inf->mu);
  go = !inf->stopping && !f->stopping;
  pthread_mutex_unlock(&inf->mu);
  return go;
}

static void *run(void *p)
{
  struct feed *f = p;
  kcr_informer *inf = f->inf;
  enum state st = ST_LISTING;

  pthread_mutex_lock(&inf->mu);
  while(!inf->go && !inf->stopping && !f->stopping)
    pthread_cond_wait(&inf->cv, &inf->mu);
  pthread_mutex_unlock(&inf->mu);
  /* cluster_watch with a selector: the first list keeps the namespaces
   * selected then, so it waits for them (each entering one would make it
   * list again) */
  while(inf->o.cluster_watch && inf->nsinf && !stopping(f) &&
        !kcr_informer_wait_synced(inf->nsinf, 1000))
    ;
  while(st != ST_STOPPED && !stopping(f)) {
    if(!atomic_load(&inf->served)) { /* opts.await_crd: wait for the CRD */
      if(!wait_served(f))
        break;
      kcr_backoff_reset(&f->backoff);
      st = ST_LISTING;
    } else if(st == ST_WATCHING && relist_due(f)) { /* a namespace entered */
      st = ST_LISTING;
    } else if(st == ST_WATCHING && stale(f)) { /* emptied: list again */
      /* after backoff when for the budget; at once for the CRD */
      if(atomic_load(&inf->over) &&
         !sleep_unless_stopped(inf, f, kcr_backoff_next(&f->backoff)))
        break;
      st = ST_LISTING;
    }
    if(atomic_load(&inf->served) && nothing_selected(inf)) {
      if(!idle(f))
        break;
      st = ST_LISTING;
      continue;
    }
    st = st == ST_WATCHING     ? do_watch(f)
         : inf_streams(f->inf) ? do_stream(f)
                               : do_list(f);
  }
  return NULL;
}

static void *run_resync(void *p)
{
  kcr_informer *inf = p;
  while(sleep_unless_stopped(inf, NULL, inf->o.resync_ms)) {
    kcr_obj **objs;
    size_t n;
    if(!kcr_informer_has_synced(inf) || kcr_store_ref_all(inf->store, &objs, &n))
      continue;
    for(size_t i = 0; i < n && !inf_stopping(inf); i++)
      emit_update(inf, objs[i], objs[i]);
    kcr_objs_unref(objs, n);
  }
  return NULL;
}

/* A feed of namespace ns (NULL: every namespace), not started. NULL when
 * out of memory. */
static struct feed *feed_new(kcr_informer *inf, const char *ns, bool whole)
{
  struct feed *f = calloc(1, sizeof(*f));
  if(!f)
    return NULL;
  f->inf = inf;
  f->whole = whole;
  atomic_init(&f->quit, false);
  f->backoff = (struct kcr_backoff)KCR_BACKOFF_REFLECTOR;
  f->seed = (unsigned)kcr_time_mono_ns() ^ (unsigned)(uintptr_t)f;
  if(ns && !(f->ns = strdup(ns))) {
    free(f);
    return NULL;
  }
  return f;
}

static void feed_free(struct feed *f)
{
  if(f) {
    free(f->ns);
    free(f->rv);
    free(f);
  }
}

/* Stops f's thread (f is out of inf->feeds, or the informer stops) and
 * joins it. Not under mu. */
static void feed_join(struct feed *f)
{
  kcr_informer *inf = f->inf;
  pthread_mutex_lock(&inf->mu);
  f->stopping = true;
  atomic_store(&f->quit, true);
  if(f->watch)
    kcr_watch_cancel(f->watch);
  pthread_cond_broadcast(&inf->cv);
  pthread_mutex_unlock(&inf->mu);
  if(f->has_th)
    pthread_join(f->th, NULL);
  f->has_th = false;
}

/* opts.namespace_selector: a namespace entered the selection. Its feed
 * starts at once when the informer runs. On the namespaces' informer's
 * thread. */
static void ns_entered(kcr_obj *o, void *ud)
{
  kcr_informer *inf = ud;
  const char *ns = kcr_obj_name(o);
  struct feed *f, **pp;
  kcr_obj **held = NULL;
  size_t nheld = 0;

  if(inf->o.cluster_watch) {
    /* The one feed dropped ns's objects until now: it lists again - its
     * watch is canceled, but not a streaming list still gathering: that
     * one is applied first (the relist follows at once), or namespaces
     * entering one after another would never let a list finish. Several
     * entering meanwhile make one relist. */
    pthread_mutex_lock(&inf->mu);
    struct feed *w = inf->feeds;
    bool listed = w->synced;
    w->relist = true;
    if(w->watch && !w->init)
      kcr_watch_cancel(w->watch);
    pthread_mutex_unlock(&inf->mu);
    KCR_LOG(KCR_LOG_INFO,
            listed ? "informer: namespace entered the selection; listing again"
                   : "informer: namespace entered the selection",
            KCR_S("informer", inf->name), KCR_S("namespace", ns));
    return;
  }
  pthread_mutex_lock(&inf->mu);
  for(pp = &inf->feeds; *pp && strcmp((*pp)->ns, ns); pp = &(*pp)->next)
    ;
  bool skip = *pp || inf->stopping;
  pthread_mutex_unlock(&inf->mu);
  if(skip)
    return;
  /* What the store holds of ns already (left behind when it left and the
   * store could not be emptied): the feed's first list must see it. Only
   * this thread adds and removes feeds, so nothing changed meanwhile. */
  if(kcr_store_ref_by_index(inf->store, NS_INDEX, ns, &held, &nheld))
    nheld = 0;
  kcr_objs_unref(held, nheld);
  pthread_mutex_lock(&inf->mu);
  for(pp = &inf->feeds; *pp; pp = &(*pp)->next)
    ;
  if((f = feed_new(inf, ns, false)))
    f->held = nheld;
  if(!f || (inf->started && pthread_create(&f->th, NULL, run, f))) {
    pthread_mutex_unlock(&inf->mu);
    /* The namespace's objects stay out of the cache until its next event
     * or the namespaces' next list (ns_seen tries again); said, not
     * hidden. */
    KCR_LOG(KCR_LOG_ERROR,
            "informer: cannot start the feed of a selected namespace (out of memory "
            "or threads); tried again at its next event",
            KCR_S("informer", inf->name), KCR_S("namespace", ns));
    feed_free(f);
    return;
  }
  f->has_th = inf->started;
  *pp = f;
  pthread_mutex_unlock(&inf->mu);
  KCR_LOG(KCR_LOG_INFO, "informer: namespace entered the selection",
          KCR_S("informer", inf->name), KCR_S("namespace", ns));
}

/* A selected namespace changed (or was listed again): still selected;
 * its feed is started if it could not be before. */
static void ns_seen(kcr_obj *old, kcr_obj *cur, void *ud)
{
  kcr_informer *inf = ud;
  (void)old;
  if(!inf->o.cluster_watch) /* (there the feed cannot be missing) */
    ns_entered(cur, ud);
}

/* opts.namespace_selector: a namespace left the selection (lost the label,
 * or was deleted). Its feed stops and its objects leave the store without
 * on_delete: they were not deleted, and no cleanup is to run for them. */
static void ns_left(kcr_obj *o, void *ud)
{
  kcr_informer *inf = ud;
  const char *ns = kcr_obj_name(o);
  struct feed *f, **pp;
  kcr_obj **gone = NULL;
  size_t ngone = 0;

  f = NULL;
  if(!inf->o.cluster_watch) { /* (with it, the one feed filters ns out now) */
    pthread_mutex_lock(&inf->mu);
    for(pp = &inf->feeds; *pp && strcmp((*pp)->ns, ns); pp = &(*pp)->next)
      ;
    f = *pp;
    if(f)
      *pp = f->next;
    pthread_mutex_unlock(&inf->mu);
    if(!f)
      return;
    feed_join(f);
  }
  pthread_mutex_lock(&inf->wmu);
  if(take_ns(inf, ns, NULL, 0, &gone, &ngone)) /* out of memory: said */
    KCR_LOG(KCR_LOG_ERROR,
            "informer: out of memory emptying the cache of a namespace that left "
            "the selection; its objects stay cached",
            KCR_S("informer", inf->name), KCR_S("namespace", ns));
  pthread_mutex_unlock(&inf->wmu);
  kcr_objs_unref(gone, ngone);
  update_gauges(inf);
  KCR_LOG(KCR_LOG_INFO,
          "informer: namespace left the selection; its objects left the cache",
          KCR_S("informer", inf->name), KCR_S("namespace", ns), KCR_I("objects", ngone));
  feed_free(f);
}

/* Stops and joins every feed thread (the informer is stopping). */
static void stop_feeds(kcr_informer *inf)
{
  pthread_mutex_lock(&inf->mu);
  for(struct feed *f = inf->feeds; f; f = f->next) {
    atomic_store(&f->quit, true);
    if(f->watch)
      kcr_watch_cancel(f->watch);
  }
  pthread_cond_broadcast(&inf->cv);
  pthread_mutex_unlock(&inf->mu);
  /* No feed comes or goes now: the namespaces' informer has stopped. */
  for(struct feed *f = inf->feeds; f; f = f->next)
    if(f->has_th) {
      pthread_join(f->th, NULL);
      f->has_th = false;
    }
}

kcr_err kcr_informer_start(kcr_informer *inf)
{
  kcr_err rc = KCR_OK;
  bool nested = false; /* a nested informer was started */

  if(inf->started || inf_stopping(inf)) /* running, or stopped for good */
    return KCR_EINVAL;
  /* All or nothing, and nothing listed on failure: every thread is made
   * before any lists (the feeds wait for go). */
  if(inf->o.resync_ms) {
    if(pthread_create(&inf->resync_th, NULL, run_resync, inf))
      rc = KCR_ENOMEM;
    else
      inf->has_resync_th = true;
  }
  if(!rc && inf_streams(inf)) {
    if(pthread_create(&inf->timer_th, NULL, run_timer, inf))
      rc = KCR_ENOMEM;
    else
      inf->has_timer_th = true;
  }
  pthread_mutex_lock(&inf->mu);
  for(struct feed *f = inf->feeds; f && !rc; f = f->next)
    if(pthread_create(&f->th, NULL, run, f))
      rc = KCR_ENOMEM;
    else
      f->has_th = true;
  inf->started = !rc; /* from now on a namespace that enters gets a thread */
  pthread_mutex_unlock(&inf->mu);
  if(!rc && inf->nsinf && !(rc = kcr_informer_start(inf->nsinf)))
    nested = true;
  if(!rc && inf->crdinf && !(rc = kcr_informer_start(inf->crdinf)))
    nested = true;
  pthread_mutex_lock(&inf->mu);
  if(rc)
    inf->stopping = true;
  else
    inf->go = true;
  pthread_cond_broadcast(&inf->cv);
  pthread_mutex_unlock(&inf->mu);
  if(rc) {
    /* The nested informers first (then no feed comes or goes); one that
     * ran cannot start again, and so neither can this one. */
    if(nested) {
      if(inf->nsinf)
        kcr_informer_stop(inf->nsinf);
      if(inf->crdinf)
        kcr_informer_stop(inf->crdinf);
    }
    pthread_mutex_lock(&inf->mu);
    inf->started = false;
    pthread_mutex_unlock(&inf->mu);
    stop_feeds(inf);
    if(inf->has_resync_th)
      pthread_join(inf->resync_th, NULL);
    if(inf->has_timer_th)
      pthread_join(inf->timer_th, NULL);
    inf->has_resync_th = inf->has_timer_th = false;
    pthread_mutex_lock(&inf->mu);
    inf->stopping = nested; /* may be tried again, unless a nested one ran */
    for(struct feed *f = inf->feeds; f; f = f->next)
      atomic_store(&f->quit, nested);
    pthread_mutex_unlock(&inf->mu);
  }
  return rc;
}

/* Under mu: every feed has listed, and with a namespace selector the
 * namespaces too (nsdone). Once true, stays true (as a single feed's
 * synced: a later relist does not unsync). */
static bool synced_locked(kcr_informer *inf, bool nsdone)
{
  if(inf->synced)
    return true;
  if(!nsdone || !atomic_load(&inf->served))
    return false;
  for(struct feed *f = inf->feeds; f; f = f->next)
    if(!f->synced)
      return false;
  atomic_store(&inf->over, false); /* listed within the budget again */
  return inf->synced = true;
}

bool kcr_informer_has_synced(kcr_informer *inf)
{
  bool nsdone = !inf->nsinf || kcr_informer_has_synced(inf->nsinf);
  pthread_mutex_lock(&inf->mu);
  bool s = synced_locked(inf, nsdone);
  pthread_mutex_unlock(&inf->mu);
  return s;
}

bool kcr_informer_wait_synced(kcr_informer *inf, uint64_t timeout_ms)
{
  uint64_t deadline = kcr_time_deadline_ms(timeout_ms); /* KCR_FOREVER: never */
  bool s;
  pthread_mutex_lock(&inf->mu);
  while(!synced_locked(inf, !inf->nsinf || kcr_informer_has_synced(inf->nsinf)) &&
        !inf->stopping && kcr_time_mono_ms() < deadline) {
    /* feeds' syncs and stop broadcast cv; the timed wait bounds the
     * deadline and sees the namespaces' informer sync */
    uint64_t left = deadline - kcr_time_mono_ms();
    uint64_t step = inf->nsinf ? 50 : 1000;
    struct timespec ts = kcr_time_mono_after(left < step ? left : step);
    pthread_cond_timedwait(&inf->cv, &inf->mu, &ts);
  }
  s = inf->synced;
  pthread_mutex_unlock(&inf->mu);
  return s;
}

bool kcr_informer_over_budget(kcr_informer *inf) { return atomic_load(&inf->over); }

bool kcr_informer_awaiting_crd(kcr_informer *inf)
{
  return inf->crdinf && !atomic_load(&inf->served) &&
         kcr_informer_has_synced(inf->crdinf);
}

bool kcr__informer_holds_keys(kcr_informer *inf)
{
  if(inf_stopping(inf)) /* stopped: it will not sync again; do not wait on it */
    return false;
  return atomic_load(&inf->over) || (inf->crdinf && !kcr_informer_has_synced(inf));
}

bool kcr_informer_why_unsynced(kcr_informer *inf, char *buf, size_t n)
{
  bool synced = kcr_informer_has_synced(inf), over, served;
  bool crd_read = inf->crdinf && kcr_informer_has_synced(inf->crdinf);
  char why[sizeof(inf->crd_why)];
  size_t used;

  if(n)
    *buf = '\0';
  if(synced)
    return false;
  pthread_mutex_lock(&inf->mu);
  over = atomic_load(&inf->over);
  used = inf->over_bytes;
  served = atomic_load(&inf->served);
  memcpy(why, inf->crd_why, sizeof(why));
  pthread_mutex_unlock(&inf->mu);
  if(!served && !crd_read)
    snprintf(buf, n, "informer %s has not read its CustomResourceDefinition %s yet",
             inf->name, inf->name);
  else if(!served)
    snprintf(buf, n,
             "informer %s waits for its CustomResourceDefinition %s to serve version "
             "%s: %s",
             inf->name, inf->name, inf->version, why);
  else if(over)
    snprintf(buf, n,
             "informer %s is over its byte budget: it reached %zu bytes, max_bytes is "
             "%llu (it selects %s); its cache is emptied and listed again with backoff "
             "until it fits",
             inf->name, used, (unsigned long long)inf->o.max_bytes, inf->what);
  else
    snprintf(buf, n, "informer %s has not synced", inf->name);
  return true;
}

bool kcr_informer_selects_namespace(kcr_informer *inf, const char *ns)
{
  bool in = false;
  if(!ns)
    return false;
  if(inf->o.cluster_watch)
    return ns_wanted(inf, ns);
  pthread_mutex_lock(&inf->mu);
  for(struct feed *f = inf->feeds; f && !in; f = f->next)
    in = !f->ns || !strcmp(f->ns, ns);
  pthread_mutex_unlock(&inf->mu);
  return in;
}

void kcr_informer_stop(kcr_informer *inf)
{
  pthread_mutex_lock(&inf->stop_mu);
  pthread_mutex_lock(&inf->mu);
  inf->stopping = true;
  pthread_cond_broadcast(&inf->cv);
  pthread_mutex_unlock(&inf->mu);
  if(inf->nsinf) /* first: then no feed comes or goes */
    kcr_informer_stop(inf->nsinf);
  if(inf->crdinf)
    kcr_informer_stop(inf->crdinf);
  stop_feeds(inf);
  if(inf->started) {
    if(inf->has_resync_th)
      pthread_join(inf->resync_th, NULL);
    if(inf->has_timer_th)
      pthread_join(inf->timer_th, NULL);
    inf->started = false;
    inf->has_resync_th = inf->has_timer_th = false;
  }
  pthread_mutex_unlock(&inf->stop_mu);
}

void kcr__informer_retire(kcr_informer *inf)
{
  kcr_informer_stop(inf);
  empty_cache(inf, NULL, false, 0);
}

void kcr_informer_free(kcr_informer *inf)
{
  if(!inf)
    return;
  kcr_informer_stop(inf);
  kcr_informer_free(inf->nsinf);
  kcr_informer_free(inf->crdinf);
  while(inf->feeds) {
    struct feed *f = inf->feeds;
    inf->feeds = f->next;
    feed_free(f);
  }
  for(size_t i = 0; i < inf->nnsset; i++)
    free(inf->nsset[i]);
  free(inf->nsset);
  kcr_store_free(inf->store);
  kcr__proj_free(inf->proj);
  pthread_mutex_destroy(&inf->mu);
  pthread_mutex_destroy(&inf->wmu);
  pthread_mutex_destroy(&inf->stop_mu);
  pthread_cond_destroy(&inf->cv);
  free(inf->group);
  free(inf->version);
  free(inf->resource);
  free(inf->ns);
  free(inf->lsel);
  free(inf->fsel);
  free(inf->name);
  free(inf->what);
  kcr_client_free(inf->o.client);
  kcr_metrics_free(inf->o.metrics);
  free(inf);
}

void kcr_informer_get_stats(kcr_informer *inf, struct kcr_informer_stats *st)
{
  pthread_mutex_lock(&inf->mu);
  *st = inf->stats;
  st->feeds = 0;
  for(struct feed *f = inf->feeds; f; f = f->next)
    st->feeds++;
  pthread_mutex_unlock(&inf->mu);
}

/* ---- sharding (opts.shard_by) ---- */

kcr_err kcr_informer_set_buckets(kcr_informer *inf,
                                 const uint8_t set[KCR_RING_BUCKETS / 8])
{
  uint64_t nw[4] = {0}, added = 0, removed = 0;
  kcr_obj **objs = NULL, **gone = NULL;
  size_t n = 0, ngone = 0, entered = 0, left = 0;

  if(!inf || !set || !inf->o.shard_by)
    return KCR_EINVAL;
  for(unsigned b = 0; b < KCR_RING_BUCKETS; b++)
    nw[b / 64] |= (uint64_t)(set[b / 8] >> b % 8 & 1) << b % 64;
  /* Under wmu, so that what a list or an event puts from now on is
   * filtered by the new selection, and what left goes (untold: it was not
   * deleted). */
  pthread_mutex_lock(&inf->wmu);
  for(int i = 0; i < 4; i++) {
    uint64_t old = atomic_load(&inf->sel[i]);
    added |= nw[i] & ~old;
    removed |= old & ~nw[i];
    for(uint64_t e = nw[i] & ~old; e; e &= e - 1)
      entered++;
    for(uint64_t e = old & ~nw[i]; e; e &= e - 1)
      left++;
    atomic_store(&inf->sel[i], nw[i]);
  }
  if(removed && !kcr_store_ref_all(inf->store, &objs, &n) &&
     (gone = malloc((n ? n : 1) * sizeof(*gone)))) {
    for(size_t i = 0; i < n; i++) {
      kcr_obj *old = NULL;
      if(in_shard(inf, objs[i]))
        continue;
      kcr_store_delete_key(inf->store, kcr_obj_key(objs[i]), &old);
      if(old)
        gone[ngone++] = old;
    }
  } else if(removed) { /* out of memory: they stay until a relist */
    added = 1;
  }
  pthread_mutex_unlock(&inf->wmu);
  kcr_objs_unref(objs, n);
  kcr_objs_unref(gone, ngone); /* (and frees the array) */
  pthread_mutex_lock(&inf->mu);
  for(struct feed *f = inf->feeds; f; f = f->next) {
    for(int i = 0; i < 4; i++)
      f->covered[i] &= nw[i];
    /* Buckets entered: list again (the objects of the new buckets were
     * dropped till now) - but a streaming list still gathering is applied
     * first, as when a namespace enters. Buckets left with the server
     * filtering: watch again with the narrower selector. */
    bool none = !(nw[0] | nw[1] | nw[2] | nw[3]); /* (the feed goes idle) */
    if(added)
      f->relist = true;
    else if(removed && (none || atomic_load(&inf->srv) == 1))
      f->rewatch = true;
    if((added || (removed && (none || atomic_load(&inf->srv) == 1))) && f->watch &&
       !f->init)
      kcr_watch_cancel(f->watch);
  }
  pthread_cond_broadcast(&inf->cv); /* (an idle feed waits for buckets) */
  if(added || removed)
    inf->stats.shard_changes++;
  inf->stats.shard_dropped += ngone;
  pthread_mutex_unlock(&inf->mu);
  update_gauges(inf);
  if(added || removed)
    KCR_LOG(KCR_LOG_INFO, "informer: the buckets selected changed",
            KCR_S("informer", inf->name), KCR_I("entered", (long long)entered),
            KCR_I("left", (long long)left), KCR_I("dropped", (long long)ngone),
            KCR_B("relist", added != 0));
  return KCR_OK;
}

bool kcr_informer_covers(kcr_informer *inf, uint64_t hash)
{
  unsigned b = kcr_shard_bucket(hash);
  bool ok;

  if(!kcr_informer_has_synced(inf))
    return false;
  if(!inf->o.shard_by)
    return true;
  pthread_mutex_lock(&inf->mu);
  ok = atomic_load(&inf->sel[b / 64]) >> b % 64 & 1;
  for(struct feed *f = inf->feeds; ok && f; f = f->next)
    ok = !f->synced || (f->covered[b / 64] >> b % 64 & 1);
  pthread_mutex_unlock(&inf->mu);
  return ok;
}

enum kcr_shard_by kcr__informer_shard_by(const kcr_informer *inf)
{
  return inf->o.shard_by;
}
