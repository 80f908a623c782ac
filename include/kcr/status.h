/* kcr/status.h - status writes that cannot conflict, and only when needed.
 *
 * A reconciler describes the status it owns - some conditions and
 * status.observedGeneration (plus optional extra status fields) - and calls
 * kcr_status_write() with the object as it sees it (usually from the
 * cache). The writer merges that with the object's current conditions using
 * the apimachinery algorithm (kcr_cond_set: lastTransitionTime moves only
 * when a status flips), compares, and:
 *   - nothing changed      -> no request at all (KCR_WRITE_SKIPPED)
 *   - something changed    -> one write with the chosen writer (WRITTEN)
 *
 * Read your own writes: a cache shows a write only when its watch event
 * arrives, so a reconcile woken in between passes an object older than the
 * writer's own last write to it. The writer keeps, per object uid, the
 * resourceVersion and status its last write was answered with; when the
 * object passed is older (kcr_rv_compare), the desired status is compared
 * with - and merged onto - that written status instead, so the same status
 * is not sent again, and a condition that already flipped keeps the
 * lastTransitionTime written with the flip. An object at or past that
 * version (the cache caught up, or someone wrote since) is compared as it
 * is, and the record goes; so do records whose versions cannot be compared
 * (then the behaviour is as without them), records older than 30 s, and the
 * oldest beyond 4,096 per writer. An object passed without metadata.uid
 * is compared as it is.
 *
 * Writers (choose per controller; the first is the default):
 *   KCR_STATUS_APPLY        server-side apply on /status with the field
 *                           manager and force, sending only the conditions
 *                           and fields this manager owns, each unchanged
 *                           condition with its existing lastTransitionTime,
 *                           no resourceVersion. Never a 409; other managers'
 *                           conditions survive (needs the CRD's conditions
 *                           list to be x-kubernetes-list-type: map keyed by
 *                           type).
 *   KCR_STATUS_MERGE_PATCH  JSON merge patch of /status. For CRDs without the
 *                           list-map markers. Caveat: the patch carries the
 *                           whole conditions list as this writer saw it, so a
 *                           condition another writer changed in between is
 *                           reverted.
 *   KCR_STATUS_UPDATE_RETRY PUT /status with optimistic concurrency; on 409
 *                           the merge is re-applied to a FRESH copy read from
 *                           the server (never the cache), with client-go's
 *                           DefaultRetry timings (5 steps, 10 ms, jitter
 *                           0.1). Out of retries -> KCR_ECONFLICT (return it
 *                           from reconcile: the key is requeued with backoff).
 *
 * Invalid conditions (bad reason, too long message, ...) are refused with
 * KCR_EINVALID and a message naming the field before anything is sent.
 * Metric: kcr_status_writes_total{result="written|skipped|conflict_retried|failed"}.
 *
 * Ownership: every input (objects, desired status, options) is borrowed for
 * the call; writers copy what they keep.
 *
 * Thread safety: a writer may be used from any number of threads (its
 * records are under a mutex of its own); the other
 * functions may be called from any thread on trees no other thread
 * modifies. Callbacks (kcr_mutate_fn) run on the calling thread with no
 * library lock held. */
#ifndef KCR_STATUS_H
#define KCR_STATUS_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "api.h"
#include "client.h"
#include "cond.h"
#include "metrics.h"

#ifdef __cplusplus
extern "C" {
#endif

enum kcr_status_mode {
  KCR_STATUS_APPLY = 0,
  KCR_STATUS_MERGE_PATCH,
  KCR_STATUS_UPDATE_RETRY
};

enum kcr_write_result { KCR_WRITE_SKIPPED = 0, KCR_WRITE_WRITTEN, KCR_WRITE_FAILED };

/* The status this manager owns. */
struct kcr_status_desired {
  const struct kcr_cond *conds; /* conditions this manager owns, one per type */
  size_t n;
  /* status.observedGeneration; 0: not owned (left as it is). Generations
   * start at 1, so 0 is never one to report. */
  int64_t observed_generation;
  const cJSON *extra; /* optional object: other status fields owned */
};

/* client-go's wait.Backoff for retry-on-conflict. */
struct kcr_retry {
  int steps;        /* attempts, default 5 */
  uint64_t base_ms; /* default 10 */
  double factor;    /* default 1.0 */
  double jitter;    /* default 0.1 */
};
#define KCR_RETRY_DEFAULT                                                                \
  {                                                                                      \
    5, 10, 1.0, 0.1                                                                      \
  } /* client-go DefaultRetry */
#define KCR_BACKOFF_DEFAULT                                                              \
  {                                                                                      \
    4, 10, 5.0, 0.1                                                                      \
  } /* client-go DefaultBackoff */

struct kcr_status_writer_opts {
  kcr_client *client;
  const struct kcr_gvr *gvr;
  const char *api_version;   /* "ebdman.example.com/v1alpha1" (apply body) */
  const char *kind;          /* "EBD" */
  const char *field_manager; /* required */
  enum kcr_status_mode mode;
  struct kcr_retry retry; /* zero: KCR_RETRY_DEFAULT */
  kcr_metrics *metrics;   /* optional */
};

typedef struct kcr_status_writer kcr_status_writer;

/* A new writer in *out (NULL on error); it copies opts' strings and holds a
 * reference on opts->client and on opts->metrics (when set) until
 * kcr_status_writer_free. Errors: KCR_EINVAL (opts, client, gvr or field_manager missing;
 * api_version or kind missing for KCR_STATUS_APPLY; an unknown mode; the
 * message says which), KCR_EEXIST (opts->metrics has a
 * kcr_status_writes_total of another type or with other labels; the
 * message says so), KCR_ENOMEM. */
KCR_API kcr_err kcr_status_writer_new(const struct kcr_status_writer_opts *opts,
                                      kcr_status_writer **out, struct kcr_errinfo *ei);
/* Frees w (NULL: no-op) and drops its client reference. No call on w may
 * be running. */
KCR_API void kcr_status_writer_free(kcr_status_writer *w);
/* The caller's cache now holds the object with this uid at resourceVersion
 * rv (call it from the informer's on_add and on_update handlers): the
 * writer's record of its last status write to it (what lets
 * kcr_status_write read its own writes) is dropped 5 seconds after the
 * cache shows it, instead of 30 seconds after the write, so the records
 * take memory only for as long as the cache lags. Calling it is optional.
 * NULL uid or rv: nothing. Thread safety: any thread. */
KCR_API void kcr_status_writer_seen(kcr_status_writer *w, const char *uid,
                                    const char *rv);
/* Whether w's last status write to the object with this uid was answered
 * with resourceVersion rv, i.e. the object at rv is that write's result -
 * while w still holds the record (30 seconds after the write, 5 after
 * kcr_status_writer_seen; later, or for a write w did not make: false).
 * For telling the echo of one's own write in a watch from others' changes
 * (kcr_pred_not_own_status, kcr/controller.h). Changes nothing. NULL w,
 * uid or rv: false. Thread safety: any thread. */
KCR_API bool kcr_status_writer_wrote(kcr_status_writer *w, const char *uid,
                                     const char *rv);

/* Merges d into a copy of obj's status: *conds gets the full merged
 * conditions list (new, caller frees), *changed whether anything differs
 * from obj (observedGeneration and extra fields compared exactly, int64
 * included; build integer extra fields with kcr_json_create_int so they
 * compare equal to what the server sends). Pure apart from `now`.
 * Errors (then *conds is NULL, *changed false): KCR_EINVALID for an invalid
 * condition or a type named twice in d (ei says which), KCR_EINVAL (d NULL, or n
 * conditions but conds NULL, or now == 0), KCR_ENOMEM. */
KCR_API kcr_err kcr_status_merge(const cJSON *obj, const struct kcr_status_desired *d,
                                 time_t now, cJSON **conds, bool *changed,
                                 struct kcr_errinfo *ei);

/* Writes d for the object `obj` (borrowed; its namespace and name are
 * used; its status is the base for the comparison - for UPDATE_RETRY, for
 * deciding whether to write at all - unless obj is older than this
 * writer's last write to it: then what that write answered is; see "Read
 * your own writes" above).
 * *res says what happened: SKIPPED (nothing to write, no request), WRITTEN,
 * or FAILED on any error. A request, when made, carries everything d owns
 * or is not made: never a part (also when memory runs out; a write whose
 * answer cannot be recorded for want of memory is WRITTEN, only without a
 * record).
 * An apply sends, of each condition, only fields of a metav1.Condition
 * (none of another writer's making).
 * Errors: KCR_EINVAL (obj has no metadata.name, d NULL), KCR_EINVALID (an
 * invalid condition or a type named twice, before anything is sent), KCR_ENOMEM,
 * KCR_ECONFLICT (UPDATE_RETRY out of retries), and the request errors of client.h from
 * kcr_get / kcr_patch / kcr_update (the server's answer in ei). */
KCR_API kcr_err kcr_status_write(kcr_status_writer *w, const cJSON *obj,
                                 const struct kcr_status_desired *d,
                                 enum kcr_write_result *res, struct kcr_errinfo *ei);

/* kcr_status_write for the object given as its JSON text json[0..len) -
 * a cached object's (kcr_obj_json) - with the same results, requests and
 * errors as kcr_status_write on the tree kcr_json_parse makes of it (a
 * malformed text: its KCR_EPARSE, nothing sent). Without a tree where the
 * text reads exactly as one would (an apply without extra fields, the
 * metadata strings and the conditions written without escapes, plain
 * integers; an object older than this writer's own last write is compared
 * with the status that write answered, read as text too): what the
 * comparison needs is read from the text, and the apply written from it - a fraction
 * of parsing and freeing the tree. Everything else parses the text and
 * goes through kcr_status_write. json is borrowed for the call. Thread
 * safety: as kcr_status_write. */
KCR_API kcr_err kcr_status_write_text(kcr_status_writer *w, const char *json, size_t len,
                                      const struct kcr_status_desired *d,
                                      enum kcr_write_result *res, struct kcr_errinfo *ei);

/* Changes fresh (a tree of the caller's own, fresh from the server) in
 * place and sets *changed (false: nothing to write). A non-OK return stops
 * kcr_update_retry, which returns it. */
typedef kcr_err (*kcr_mutate_fn)(cJSON *fresh, bool *changed, void *ud);

struct kcr_update_retry_opts {
  struct kcr_retry retry;    /* zero steps: KCR_RETRY_DEFAULT */
  const char *field_manager; /* optional: recorded for every PUT */
};

/* The general retry-on-conflict update, done right: on every attempt GET a
 * fresh copy from the server into a NEW tree, call mutate(fresh, &changed,
 * ud), PUT it (to ref, e.g. with sub "status") unless unchanged; on 409
 * wait per opts->retry and start again (base_ms * factor^attempt plus
 * jitter; a factor that is not a positive number counts as 1, a jitter that
 * is not one as 0). opts may be NULL. *res: WRITTEN, SKIPPED (mutate
 * reported no change) or FAILED. *conflicts (optional) counts the 409s
 * absorbed.
 * A failure part-way: mutate may have run on earlier attempts, each time on
 * a copy that was then discarded (its PUT was refused with 409); only the
 * last attempt's outcome counts, so mutate must have no side effects beyond
 * the tree it is given (it runs once per attempt, up to retry.steps times).
 * Errors: KCR_EINVAL (ref or mutate missing, or the ref names no object),
 * KCR_ECONFLICT when retries ran out (ei holds the last 409), whatever
 * mutate returns, and the request errors of client.h from kcr_get /
 * kcr_update. */
KCR_API kcr_err kcr_update_retry(kcr_client *c, const struct kcr_ref *ref,
                                 const struct kcr_update_retry_opts *opts,
                                 kcr_mutate_fn mutate, void *ud,
                                 enum kcr_write_result *res, int *conflicts,
                                 struct kcr_errinfo *ei);

/* Finalizers, through the main endpoint (never /status), idempotent.
 * *changed (optional) says whether the finalizer was added/removed. Races
 * are handled with a JSON patch whose first op, a test, guards the list as
 * read (or the resourceVersion when there is no list yet); on a failed test
 * (422) or a conflict the object is re-read and the patch rebuilt, up to 5
 * times. A patch is sent whole, guard first, or not at all.
 * Errors: KCR_EINVAL (empty finalizer name; add to an object being
 * deleted; the ref names no object), KCR_EPARSE (the object has neither a
 * finalizers list nor a resourceVersion to guard with), KCR_ENOMEM,
 * KCR_EINVALID / KCR_ECONFLICT after the 5th failed attempt, and the
 * request errors of client.h from kcr_get / kcr_patch. */
KCR_API kcr_err kcr_finalizer_add(kcr_client *c, const struct kcr_ref *ref,
                                  const char *finalizer, bool *changed,
                                  struct kcr_errinfo *ei);
KCR_API kcr_err kcr_finalizer_remove(kcr_client *c, const struct kcr_ref *ref,
                                     const char *finalizer, bool *changed,
                                     struct kcr_errinfo *ei);

/* ---- read your own writes, for any write ----
 *
 * The status writer's record of its own writes (above), as a table of its
 * own for the caller's other writes - the children a controller creates
 * and applies: a reconcile woken before the cache shows the child an
 * earlier one wrote would otherwise create it again (409 AlreadyExists) or
 * apply what it already holds.
 *
 * After each successful write the caller puts, under a key naming the
 * object, the resourceVersion the server answered and a text saying what
 * was written (a digest of the body sent, say); before writing, it asks
 * kcr_written_pending with the resourceVersion of the cache's copy (NULL:
 * the cache has none) and, when the write is still pending and wrote what
 * is wanted now, sends nothing. A cache at or past the write, or changed
 * by someone since (a newer version), drops the record: the caller decides
 * from the cache as without one. Records go when forgotten - call
 * kcr_written_forget when the object, or the owner that makes it, is
 * deleted (from an informer's on_delete handler added before the handlers
 * that wake reconciles, so no reconcile sees the deletion and the record
 * together) -, after ttl_ms, and the oldest first beyond max: memory stays
 * bounded, and a record that is gone only means a write may be sent again.
 *
 * Thread safety: any thread (one mutex per table), but kcr_written_free
 * with no other call on the table running. */
typedef struct kcr_written kcr_written;

/* Options for kcr_written_new(); zero means the default shown. */
struct kcr_written_opts {
  size_t max;      /* records held at most, the oldest dropped first; 0: 4096 */
  uint64_t ttl_ms; /* how long a record is kept at most; 0: 30000 */
};

/* A new, empty table in *out (NULL on error); opts may be NULL (all
 * defaults). Free it with kcr_written_free. Errors: KCR_EINVAL (no out),
 * KCR_ENOMEM. Thread safety: any thread. */
KCR_API kcr_err kcr_written_new(const struct kcr_written_opts *opts, kcr_written **out,
                                struct kcr_errinfo *ei);
/* Frees w and its records (NULL: no-op). */
KCR_API void kcr_written_free(kcr_written *w);
/* Remembers that a write to the object named key (any text that names one
 * object for the caller: its uid, or "resource/namespace/name" for one not
 * made yet) was answered with resourceVersion rv, and the text
 * text[0..len) (copied; NULL: empty) saying what it wrote. Replaces key's
 * record unless that one holds a newer version (a concurrent write answered
 * later). Nothing is recorded when key or rv is NULL or empty, or memory
 * runs out. */
KCR_API void kcr_written_put(kcr_written *w, const char *key, const char *rv,
                             const char *text, size_t len);
/* Whether the last write recorded under key is still pending in the
 * caller's cache: true when cached_rv, the resourceVersion of the cache's
 * copy, is older than the write's (kcr_rv_compare), or NULL (the cache has
 * no copy: older than any write); text (optional) then holds the recorded
 * text (replaced). false when there is no record, or cached_rv is at or
 * past the write's (the cache caught up, or someone wrote since) or not
 * comparable - then key's record is dropped -, and when text cannot take
 * the text (its kcr_buf_err is set; the record is kept). */
KCR_API bool kcr_written_pending(kcr_written *w, const char *key, const char *cached_rv,
                                 struct kcr_buf *text);
/* The caller's cache now holds the object named key at resourceVersion
 * cached_rv (call it from the informer's on_add and on_update handlers): a
 * record cached_rv is at or past (or cannot be compared with) is dropped 5
 * seconds later (or after ttl_ms, if shorter) instead of after ttl_ms, so
 * records live about as long as the cache lags. Until then a reconcile that
 * read the cache just before still finds it. Records cached_rv is older
 * than, and NULL key or cached_rv, are left alone. */
KCR_API void kcr_written_seen(kcr_written *w, const char *key, const char *cached_rv);
/* Drops key's record, if any: the object was deleted. */
KCR_API void kcr_written_forget(kcr_written *w, const char *key);
/* Records held, after dropping those older than ttl_ms. */
KCR_API size_t kcr_written_len(kcr_written *w);

/* Makes `owner` the controller of `child` (a tree being built for
 * create/apply): ownerReferences gets {apiVersion, kind, name, uid,
 * controller: true, blockOwnerDeletion: true}; a reference to the same
 * owner uid without controller is upgraded in place. Idempotent for the
 * same owner uid. All or nothing: on any error child is unchanged.
 * Errors: KCR_EINVAL (message says why: child not an object, an owner in
 * another namespace - a namespaced owner must share the child's namespace
 * -, an owner without apiVersion, kind, name or uid, or a child that
 * already has a different controller), KCR_ENOMEM. Pure. */
KCR_API kcr_err kcr_owner_set_controller(cJSON *child, const cJSON *owner,
                                         struct kcr_errinfo *ei);

#ifdef __cplusplus
}
#endif

#endif
