/* kcr/informer.h - keeps a local cache (kcr_store) of one resource in sync
 * with the API server and tells handlers about every change.
 *
 * State machine, on its own thread (one per namespace with
 * opts.namespaces or opts.namespace_selector, all into one store - but one
 * in all with opts.cluster_watch):
 *   EMPTY -> LISTING (a streaming list: one watch with sendInitialEvents
 *   whose initial events are applied at their end bookmark, the stream
 *   then going on as the watch; a paged LIST where the server cannot, or
 *   with opts.paged_list) -> WATCHING (from the list's resourceVersion,
 *   with bookmarks and a random 5-10 min timeout)
 *   WATCHING --server timeout--> WATCHING (re-watch from the last RV)
 *   WATCHING --410 Gone--> LISTING (relist; the store is swapped in one step
 *                          - one namespace's part of it, object by object,
 *                          with several namespaces - and deletes are
 *                          emitted for objects that vanished)
 *   any error --> backoff 0.8 s .. 30 s with jitter (reset after 2 healthy
 *                 minutes), then retry the same state.
 * Optional periodic resync calls on_update(obj, obj) for every cached
 * object, so level-based controllers re-check everything.
 *
 * Handlers run on the informer's threads (the list/watch threads - one
 * per namespace with several, concurrently - and the resync thread) and
 * must be quick and thread-safe (typically: compute a key, add it to a
 * queue). The store is updated before handlers are called, so a reconciler
 * woken by a handler reads at least that state.
 *
 * Thread safety: configure (add handlers, add indexes to the store) from
 * one thread before kcr_informer_start; from then on every function but
 * kcr_informer_free may be called from any thread. */
#ifndef KCR_INFORMER_H
#define KCR_INFORMER_H

#include <stdbool.h>
#include <stdint.h>

#include "api.h"
#include "client.h"
#include "metrics.h"
#include "shard.h"
#include "store.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kcr_informer kcr_informer;

/* Event handlers, called on the informer's threads (see above) with no
 * library lock held. The objects are borrowed for the call: take a
 * reference (kcr_obj_ref) to keep one. Any member may be NULL. */
struct kcr_informer_handlers {
  /* A new object (from a LIST or an ADDED event). */
  void (*on_add)(kcr_obj *obj, void *ud);
  /* A change, or a resync (old == cur). */
  void (*on_update)(kcr_obj *old, kcr_obj *cur, void *ud);
  /* The object is gone; obj is its last known state. */
  void (*on_delete)(kcr_obj *obj, void *ud);
  void *ud;
};

/* A function pointer of any type. kcr-gen's wrappers hand a typed callback
 * to the library as one, with a caller that converts it back to its own
 * type before calling it (C converts a function pointer to another
 * function pointer type and back unchanged; calling it through the wrong
 * type would be undefined). */
typedef void (*kcr_fnptr)(void);

/* Event handlers that get typed objects (kcr/typed.h), what kcr-gen's
 * <kind>_add_handlers registers: each object is decoded as a view of type
 * t, valid during the call only (copy what you keep), and passed to the
 * handler through call_obj or call_pair. An object that does not decode as
 * t (the schema t came from is not the server's) is logged at error level
 * with its key and the decoder's message, and its handler is not called.
 * Any handler may be NULL; the calls are those of kcr_informer_handlers. */
struct kcr_typed_handlers {
  const struct kcr_type *t; /* required */
  kcr_fnptr on_add;         /* call_obj(on_add, obj, ud) */
  kcr_fnptr on_update;      /* call_pair(on_update, old, cur, ud); a resync
                               passes one view as both */
  kcr_fnptr on_delete;      /* call_obj(on_delete, last known obj, ud) */
  void (*call_obj)(kcr_fnptr fn, const void *obj, void *ud);
  void (*call_pair)(kcr_fnptr fn, const void *old, const void *cur, void *ud);
  void *ud;
};

/* What places an object of a sharded informer in a bucket
 * (kcr_informer_opts.shard_by): the top 8 bits (kcr_shard_bucket) of the
 * FNV-1a hash (kcr_shard_hash) of a uid. */
enum kcr_shard_by {
  KCR_SHARD_BY_NONE = 0, /* not sharded: every object */
  /* The object's own metadata.uid - what the apiserver's shardSelector
   * hashes, so where its ShardedListAndWatch gate is on only the selected
   * buckets' objects cross the wire. For the objects a controller
   * reconciles (its For source). */
  KCR_SHARD_BY_UID,
  /* The uid of the object's controller ownerReference, so that children
   * are in their owner's bucket; an object without a controller owner is
   * kept in every bucket's cache. The server cannot select by it: every
   * object crosses the wire and is filtered here (memory is shared, the
   * wire is not). For a controller's Owns sources. */
  KCR_SHARD_BY_OWNER,
};

/* Options for kcr_informer_new(); zero means the default shown. */
struct kcr_informer_opts {
  kcr_client *client;        /* required; the informer takes a reference */
  const struct kcr_gvr *gvr; /* required (version and resource); copied */
  const char *ns;            /* NULL: all namespaces (or cluster-scoped) */
  /* Several namespaces, NULL-terminated (copied): one store, and a list and
   * watch per namespace, each on its own thread (what controller-runtime's
   * cache.Options.DefaultNamespaces does). They work with a Role in each
   * namespace - no cluster-wide RBAC - and only the selected namespaces'
   * objects cross the wire. Excludes ns; the gvr must be namespaced. */
  const char *const *namespaces;
  /* The namespaces whose labels match this label selector ("team=a",
   * "env in (prod,staging)"), followed as they change: a namespace that
   * gains the labels (or is made with them) gets a list and watch of its
   * own, and one that loses them (or is deleted) has it stopped and its
   * objects taken out of the store without on_delete - they were not
   * deleted, so no cleanup logic is to run for them (a reconcile of their
   * key finds them gone from the cache, as for any key). The namespaces
   * themselves are watched metadata-only: needs cluster-wide list and
   * watch on namespaces, besides list and watch of the resource in each
   * selected namespace. Synced once the namespaces are listed and every
   * namespace selected then is; a namespace selected later is listed
   * while the informer stays synced, so a cached read there can miss
   * objects until its list is in (kcr_informer_selects_namespace says
   * whether a namespace is selected). Excludes ns and namespaces. */
  const char *namespace_selector;
  /* With namespaces or namespace_selector: one list and watch of every
   * namespace instead of one per namespace, whose objects outside the
   * selected namespaces are dropped as they arrive - never stored, never
   * told, not counted against max_bytes (nor is the page of a paged LIST
   * being read, which holds them too). Needs cluster-wide list and
   * watch of the resource. Every object of the resource in the cluster
   * then crosses the wire and is parsed, so the bytes sent follow the
   * cluster, never the selection; what it saves is a connection, a thread
   * and a list per namespace, which pays in CPU and memory once many
   * namespaces are selected (bench/README.md section 10: from about 10-25
   * of 100 equal namespaces). With namespace_selector the watch starts
   * once the namespaces are listed; a namespace that enters the selection
   * makes it list the whole resource again (unchanged objects stay the
   * cached ones and are not told again; a streaming list under way is
   * applied first, and the namespaces entering meanwhile make one relist),
   * one that leaves has its objects taken out as without it (no
   * on_delete). false (the default): a list and watch per namespace.
   * KCR_EINVAL without namespaces or namespace_selector. */
  bool cluster_watch;
  const char *label_selector;
  const char *field_selector;
  uint64_t resync_ms;            /* 0: no periodic resync */
  long page_size;                /* LIST page size; 0: 500 */
  bool keep_managed_fields;      /* false: strip metadata.managedFields (left
                                    out as each object's text is copied
                                    into the cache) */
  const char *const *keep;       /* NULL: store whole objects. Otherwise a
                                    projection (see below): the paths of the
                                    members to store, NULL-terminated;
                                    copied */
  uint64_t watch_timeout_min_ms; /* each watch asks the server to end it after */
  uint64_t watch_timeout_max_ms; /* a random time in [min, max], in whole
                                    seconds rounded up; 0: 300000 and twice
                                    the min (5-10 minutes, as client-go) */
  kcr_metrics *metrics;          /* optional: kcr_informer_* gauges; the
                                    informer holds a reference (kcr_metrics_ref) */
  uint64_t watch_batch_ms;       /* the watch's batch_ms (kcr/watch.h): events
                                   arriving within it of one another reach
                                   the cache and the handlers with one
                                   wake-up; 0: KCR_INFORMER_WATCH_BATCH_MS */
  bool watch_unbatched;          /* true: no batch, each read at once */
  /* true: a metadata-only cache. The list and the watch ask the server for
   * the objects' metadata alone (kcr_list_opts.metadata_only,
   * kcr_watch_opts.metadata_only: filtered on the server, so neither the
   * wire nor the store carries spec, status or data), and the store holds
   * meta.k8s.io/v1 PartialObjectMetadata objects - apiVersion meta.k8s.io/v1,
   * kind PartialObjectMetadata, metadata - whatever the resource: handlers
   * must not read the resource's kind from them, nor decode them as its
   * type. managedFields are dropped as for full objects, and a keep list
   * projects them as any object. For kinds a controller only needs to
   * know exist, whose owners, labels or annotations it reads (Secrets,
   * Pods of other controllers). With the manager (kcr_manager_informer) a
   * metadata-only informer and a full one of the same resource are two
   * caches, and the manager's cached reads (kcr_manager_get,
   * kcr_manager_list_typed) read the full one. */
  bool metadata_only;
  /* The list is a streaming list by default (client-go's WatchList, on by
   * default since 0.35): one watch with sendInitialEvents=true
   * (kcr_watch_opts.send_initial_events) brings every object as an event,
   * then a bookmark at which they are applied to the store as a list
   * would be - on_add, on_update, on_delete as for a list, and synced -
   * and then goes on as the watch. No page of objects is held. On a
   * relist, streaming or paged, an object that did not change (the same
   * uid and resourceVersion) is the cached one again rather than a
   * second copy, and is not told again (on_update comes for what
   * changed). A server that refuses it (the WatchList feature
   * gate off: 422; an older or aggregated apiserver: 400, 406, 501), or
   * that ignores the parameters - sends an event other than ADDED before
   * the end bookmark, no end bookmark within initial_events_wait_ms of
   * the last event (nor within 6 times that of the start), or ends the
   * stream without one - gets a paged LIST instead, counted in
   * kcr_informer_list_fallbacks_total{informer, reason} and
   * kcr_informer_stats.list_fallbacks; the next relist tries streaming
   * again. true: always a paged LIST. */
  bool paged_list;
  uint64_t initial_events_wait_ms; /* 0: KCR_INFORMER_INITIAL_EVENTS_WAIT_MS */
  /* A byte budget for the cache (0: none): the bytes of the objects in the
   * store (kcr_store_bytes) plus those in flight - a list's objects not yet
   * applied and the page of a paged LIST being read. Going over it, at any
   * point (a list, a relist, a watch event), the informer does not grow
   * on: it empties its store (without on_delete - nothing was deleted),
   * turns unsynced, stops its watches (every namespace's, with several),
   * logs an error naming the budget, the bytes and what it selects, and
   * lists again after backoff (0.8 s .. 30 s), as long as it takes to fit.
   * Meanwhile kcr_informer_over_budget is true, kcr_informer_why_unsynced
   * says why (the manager's /readyz shows it), the workers of every
   * controller with it as a source take no keys, and the manager's cached
   * reads of it fail with KCR_EBUDGET rather than answer "not found" from
   * an empty cache. Once a list fits, the store is filled again as at
   * start - on_add for every object; an object deleted meanwhile gets no
   * on_delete, as after a restart - and the informer is synced again.
   * A relist reuses unchanged objects (see paged_list), so it costs what
   * changed on top of the store, and a paged one a page more (page_size
   * objects' text).
   * Counted in kcr_informer_budget_exceeded_total{informer} and
   * kcr_informer_stats.budget_exceeded. */
  uint64_t max_bytes;
  /* The resource is a custom resource whose CustomResourceDefinition may
   * not be installed yet, or may go: the informer also watches that CRD
   * (named <resource>.<group>, by a field selector on its name; needs get,
   * list and watch on customresourcedefinitions in apiextensions.k8s.io,
   * cluster-wide) and lists and watches the resource only while the CRD is
   * Established and serves gvr->version. Until then it is not synced,
   * kcr_informer_awaiting_crd is true once the CRD is known not to serve,
   * kcr_informer_why_unsynced says which CRD and why (not installed, not
   * Established, version not served), and the workers of the controllers
   * with it as a source take no keys; a manager does not wait for it at
   * start (the other controllers run; its /readyz passes and names it).
   * The informer lists within moments of the CRD becoming Established (a
   * watch event, not a poll). When the CRD stops serving the version, or is
   * deleted (its objects are deleted first, and told with on_delete as
   * usual), the store is emptied without on_delete and the informer waits
   * again. KCR_EINVAL for a gvr of the core group (no CRD serves it). */
  bool await_crd;
  /* A cache of some buckets only (KCR_SHARD_BY_NONE: every object): what
   * a replica of a ring (kcr/shard.h) caches of a sharded controller's
   * objects. Every bucket until kcr_informer_set_buckets says which;
   * objects of the others are dropped as they arrive, never stored nor
   * told (as cluster_watch drops other namespaces'). With
   * KCR_SHARD_BY_UID each list and watch also carries the buckets as a
   * shardSelector (kcr_shard_selector) where the server applies it (see
   * kcr_informer_set_buckets). Needs one list and watch: KCR_EINVAL with
   * namespaces or namespace_selector unless cluster_watch. */
  enum kcr_shard_by shard_by;
};
/* How long a streaming list waits for its end bookmark after the last
 * event before it lists in pages instead: 10 s. */
#define KCR_INFORMER_INITIAL_EVENTS_WAIT_MS 10000
/* The default watch batch: 50 ms, far below what a controller's queue and
 * writes take, enough to read a burst's events a few at a time. */
#define KCR_INFORMER_WATCH_BATCH_MS 50

/* Cache projection (opts.keep): the store holds only the members of each
 * object that the controller reads, so a cached object costs the bytes of
 * those instead of the whole object's. A path is a JSON Pointer, as
 * kcr_json_at takes them ("/spec", "/status/conditions", "/data",
 * "/metadata/labels"; '~' and '/' in a name written "~0" and "~1"); the
 * member it names is kept whole, with everything below it - arrays too: a
 * keep path does not index into an array ("/spec/0" names a member "0"),
 * and one that meets an array or a scalar before its end keeps nothing. Paths may repeat
 * or overlap. A member no path names is dropped; an object a path runs
 * through keeps only the members kept below it, and is dropped when none
 * is there. Members keep the order the server sent them in.
 *
 * Always kept, listed or not: /apiVersion, /kind, and /metadata/name,
 * namespace, uid, resourceVersion, generation, deletionTimestamp and
 * ownerReferences - what the store's header (kcr_obj_ns ...
 * kcr_obj_controller), kcr_controller_owns and kcr_owner_set_controller
 * read - plus /metadata/managedFields when keep_managed_fields is set.
 * Everything else - labels, annotations, finalizers, creationTimestamp -
 * only when listed ("/metadata/labels"); `keep = (const char *[]){NULL}`
 * keeps just the metadata above.
 *
 * kcr_obj_json and kcr_obj_parse then give the projected object, and
 * handlers see it. It is a view for reading: never send it back whole (an
 * update/PUT of it would wipe every member it lacks); apply or patch the
 * fields you own, or read the object with kcr_get first. Give
 * kcr_status_write a projected object only when it keeps "/status". */

/* Makes an informer (not started) with an empty store. The strings and the
 * gvr of opts are copied. Release with kcr_informer_free(). Errors:
 * KCR_EINVAL (no opts, client or gvr, no gvr->version or gvr->resource, a
 * negative page_size, watch_timeout_max_ms below watch_timeout_min_ms, a
 * keep path that is not a JSON Pointer ("spec", "a~2") or is "" (the
 * object: a keep path names a member), ns with namespaces, a
 * namespace_selector with either, namespaces or namespace_selector for a
 * gvr that is not namespaced, an empty namespaces list or a name in it
 * that is "" or holds '/' or ',', a namespace_selector of "",
 * cluster_watch without namespaces or namespace_selector; ei names the
 * field, for a path its index, text and what is wrong), KCR_EEXIST (opts.metrics has a
 * kcr_informer_* family of another type or with other labels; ei names
 * it), KCR_ENOMEM. On error *out is NULL.
 * Thread safety: any thread. */
KCR_API kcr_err kcr_informer_new(const struct kcr_informer_opts *opts, kcr_informer **out,
                                 struct kcr_errinfo *ei);
/* Adds handlers (h is copied; up to 16 sets per informer) before start.
 * Errors: KCR_EINVAL (started, or 16 sets already). Thread safety: the
 * setup thread, before start. */
KCR_API kcr_err kcr_informer_add_handlers(kcr_informer *inf,
                                          const struct kcr_informer_handlers *h);
/* Adds typed handlers (h is copied; they count among the 16 sets), before
 * start. Errors: KCR_EINVAL (started, 16 sets already, no h or h->t, a
 * handler without its caller). Thread safety: the setup thread, before
 * start. */
KCR_API kcr_err kcr_informer_add_typed_handlers(kcr_informer *inf,
                                                const struct kcr_typed_handlers *h);
/* The informer's store: borrowed, valid until kcr_informer_free(). Add
 * indexes to it before start; read it from any thread. */
KCR_API kcr_store *kcr_informer_store(kcr_informer *inf);
/* "resource.group" (or "resource" for core), e.g. "ebds.ebdman.example.com".
 * Borrowed, valid until kcr_informer_free(). Thread safety: any thread. */
KCR_API const char *kcr_informer_name(const kcr_informer *inf);
/* Starts the threads. All or nothing: KCR_ENOMEM if a thread cannot be made
 * (then nothing runs and nothing was listed; start may be tried again -
 * but with namespace_selector and await_crd both, a failure after the
 * first of their informers started is final, as a stop),
 * KCR_EINVAL if already started or stopped. Thread safety: the setup
 * thread. */
KCR_API kcr_err kcr_informer_start(kcr_informer *inf);
/* True once the first LIST has been applied to the store and every handler
 * has been called for its objects. A LIST whose objects the store cannot
 * take (out of memory) leaves it false and is retried after backoff. It
 * turns false again while the cache is emptied: over opts.max_bytes, or
 * (opts.await_crd) while the resource is not served, until the next list
 * is in. Thread safety: any thread. */
KCR_API bool kcr_informer_has_synced(kcr_informer *inf);
/* Waits until synced, stopped, or timeout_ms passed (0: do not wait;
 * KCR_FOREVER: no limit); true if synced. Thread safety: any thread. */
KCR_API bool kcr_informer_wait_synced(kcr_informer *inf, uint64_t timeout_ms);
/* Whether the informer lists and watches namespace ns: true for every
 * namespace when it is of every namespace (or of a cluster-scoped
 * resource), for its ns or namespaces, and for the namespaces its
 * namespace_selector selects now; false for ns NULL. Thread safety: any
 * thread. */
KCR_API bool kcr_informer_selects_namespace(kcr_informer *inf, const char *ns);
/* True from the moment the cache went over opts.max_bytes (and was
 * emptied) until a list fits again and the informer is synced again.
 * Thread safety: any thread. */
KCR_API bool kcr_informer_over_budget(kcr_informer *inf);
/* With opts.await_crd: true while the informer's CRD is known not to
 * serve its resource - its CRD read and found missing, not Established,
 * or without gvr->version served - so the informer waits for it rather
 * than lists; false before the CRD was first read, and while it serves.
 * Always false without await_crd. Thread safety: any thread. */
KCR_API bool kcr_informer_awaiting_crd(kcr_informer *inf);
/* Why the informer is not synced now, as a sentence naming it, into buf
 * (n bytes, truncated to fit, NUL-terminated when n > 0): "informer X has
 * not synced", for one over its budget the budget, the bytes it reached
 * and what it selects, for one awaiting its CRD the CRD and why it does
 * not serve. Returns false, with buf "", when it is synced. Thread
 * safety: any thread. */
KCR_API bool kcr_informer_why_unsynced(kcr_informer *inf, char *buf, size_t n);
/* Stops the threads (cancels the watches; a LIST in flight ends after the
 * page it is reading) and joins them; handlers are not called after it
 * returns. Idempotent, also from two threads at once (the second returns
 * when the first has stopped it). A stopped informer does not start again (start:
 * KCR_EINVAL). Thread safety: any thread but the informer's own (not from
 * a handler). */
KCR_API void kcr_informer_stop(kcr_informer *inf);
/* Stops if needed and frees, the store too (objects others hold references
 * to stay valid). NULL is a no-op. No other call on inf may be running or
 * follow. */
KCR_API void kcr_informer_free(kcr_informer *inf);

/* Sets the buckets a sharded informer (opts.shard_by) caches: bucket b in
 * bit b % 8 of set[b / 8] (copied). Any time, before start too (then the
 * first list is of them alone). Buckets that leave the selection leave the
 * store at once, without on_delete (they were not deleted; a reconcile of
 * their keys finds them gone from the cache, as for any key). Buckets that
 * enter it make the informer list again (a relist: what is cached and did
 * not change is not told again; the new buckets' objects get on_add);
 * kcr_informer_covers says when they are in. With opts.shard_by
 * KCR_SHARD_BY_UID the list and the watch carry the selected buckets as a
 * shardSelector (kcr_shard_selector): a server whose ShardedListAndWatch
 * gate is on sends those buckets' objects alone, one with it off ignores
 * it and every object crosses the wire, filtered here (either way nothing
 * outside the buckets is cached). Which one is asked at each list and
 * after a watch failed, by a LIST of one object selecting no bucket: an
 * answer with metadata.shardInfo (the server's echo) or an empty one
 * where objects exist (v1.37 echoes built-in kinds only) applied it, one
 * with an object ignored it (kcr_informer_stats.server_shards, logged when
 * it changes). Where it applies, a narrower selection makes the watch
 * start again from where it got to (no list). No bucket selected: nothing is cached.
 * Errors: KCR_EINVAL (inf or set NULL, an informer not sharded). Thread safety: any
 * thread but the informer's own (not from a handler); one at a time. */
KCR_API kcr_err kcr_informer_set_buckets(kcr_informer *inf,
                                         const uint8_t set[KCR_RING_BUCKETS / 8]);
/* Whether the cache holds every object of hash's bucket
 * (kcr_shard_bucket): synced, the bucket selected, and a list since it
 * was selected applied. For an informer not sharded: whether it is
 * synced. A controller reconciles a key of a bucket it just took over only
 * once its caches cover it (else the reconcile would read "not found").
 * Thread safety: any thread. */
KCR_API bool kcr_informer_covers(kcr_informer *inf, uint64_t hash);

/* Counters for tests and diagnostics. */
struct kcr_informer_stats {
  /* events: watch events handled, a streaming list's initial ones too -
   * with cluster_watch also those of namespaces not selected, dropped */
  uint64_t lists;   /* paged LISTs made */
  uint64_t watches; /* watches made; a streaming list counts as one once
                       its initial events are in the store */
  uint64_t relists_gone, errors, events;
  uint64_t stream_lists;    /* streaming lists begun (opts.paged_list) */
  uint64_t list_fallbacks;  /* streaming lists that became paged LISTs */
  uint64_t budget_exceeded; /* times the cache went over opts.max_bytes */
  uint64_t feeds;           /* list-and-watch loops now: one per namespace of
                               opts.namespaces or of those namespace_selector
                               selects; one with cluster_watch, ns, or none */
  uint64_t shard_changes;   /* kcr_informer_set_buckets calls that changed
                               the selection */
  uint64_t shard_dropped;   /* objects taken out as their buckets left */
  bool server_shards;       /* the server applied the last shard selector
                               asked about (opts.shard_by KCR_SHARD_BY_UID) */
};
/* Copies the counters into *st (read together under the informer's lock).
 * Thread safety: any thread. */
KCR_API void kcr_informer_get_stats(kcr_informer *inf, struct kcr_informer_stats *st);

#ifdef __cplusplus
}
#endif

#endif
