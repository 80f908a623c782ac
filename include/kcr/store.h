/* kcr/store.h - the informer cache: immutable, refcounted objects by
 * namespace/name, with indexes.
 *
 * An object is held as its compact JSON text (metadata.managedFields
 * stripped unless asked to keep it; only the members a keep-list names,
 * when its informer has one - kcr/informer.h) plus a small parsed header:
 * namespace, name, uid, resourceVersion, generation, deletion flag and
 * controller owner. Readers parse the text on demand (kcr_obj_parse, ~4 us
 * for a 1.7 KB object) instead of the cache holding a cJSON tree: measured in
 * bench/informer_mem on 10,000 ConfigMaps of ~2.3 KB, the store costs 1.1x
 * the text, a tree of the same text 1.8x-3.2x, a tree of the full object
 * (with managedFields) 3x-5.2x.
 *
 * Objects never change after creation: an update is a new object. Any
 * thread may read an object it holds a reference to without locks.
 *
 * The store is written by one writer (its informer) and read by any number
 * of threads. Lock: one rwlock per store (readers share it); never held
 * while calling out - index functions run before the writer takes it - so
 * an index function may read the store (it sees the state before the
 * write). Every write applies completely or not at all. */
#ifndef KCR_STORE_H
#define KCR_STORE_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "api.h"
#include "err.h"
#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kcr_obj kcr_obj;
typedef struct kcr_store kcr_store;

/* The controller owner reference (ownerReferences[] item with controller:
 * true), or all NULL. */
struct kcr_owner {
  const char *api_version, *kind, *name, *uid;
};

/* Flags of kcr_obj_from_json(). */
#define KCR_OBJ_KEEP_MANAGED_FIELDS 0x1u /* keep metadata.managedFields */

/* Makes an object from a Kubernetes object tree (borrowed for the call,
 * not modified). metadata.managedFields is dropped unless flags has
 * KCR_OBJ_KEEP_MANAGED_FIELDS. On KCR_OK *out holds one reference (release
 * with kcr_obj_unref). Errors: KCR_EINVAL (no tree or out, no
 * metadata.name, unknown flags; ei says which), KCR_ENOMEM. On error *out
 * is NULL. Thread safety: any thread. */
KCR_API kcr_err kcr_obj_from_json(const cJSON *tree, unsigned flags, kcr_obj **out,
                                  struct kcr_errinfo *ei);
/* A new reference to o (o may be NULL; returns o). Thread safety: any
 * thread. */
KCR_API kcr_obj *kcr_obj_ref(kcr_obj *o);
/* Drops a reference; the last one frees. NULL is a no-op. Thread safety:
 * any thread. */
KCR_API void kcr_obj_unref(kcr_obj *o);

/* Header accessors. The strings and the owner are borrowed from o: valid
 * while the caller holds its reference to o. Never NULL; o must not be
 * NULL. Thread safety: any thread, no lock (objects never change). */
KCR_API const char *kcr_obj_ns(const kcr_obj *o); /* "" for cluster-scoped */
KCR_API const char *kcr_obj_name(const kcr_obj *o);
KCR_API const char *kcr_obj_uid(const kcr_obj *o);    /* "" if none */
KCR_API const char *kcr_obj_rv(const kcr_obj *o);     /* "" if none */
KCR_API int64_t kcr_obj_generation(const kcr_obj *o); /* 0 if none */
KCR_API bool kcr_obj_deleting(const kcr_obj *o);      /* deletionTimestamp set */
/* The controller owner; its members are NULL when there is none. */
KCR_API const struct kcr_owner *kcr_obj_controller(const kcr_obj *o);
/* "ns/name", or "name" for cluster-scoped objects. */
KCR_API const char *kcr_obj_key(const kcr_obj *o);
/* The compact JSON text (NUL-terminated; its length in *len when len is not
 * NULL). */
KCR_API const char *kcr_obj_json(const kcr_obj *o, size_t *len);
/* A value's text inside an object's: at points into the object's text (valid
 * while the caller holds its reference), n bytes (a string with its quotes);
 * NULL and 0: not there. */
struct kcr_span {
  const char *at;
  size_t n;
};
/* Finds in one pass over o's text the value at each paths[i] (a JSON
 * Pointer of member names, "/status/conditions", as kcr_json_at reads them
 * in kcr_obj_parse's tree: the last member of a name counts, as in Go's
 * decoder; a path through anything but objects finds nothing - no array
 * index here -, and so does one that is not a pointer; a member name the
 * server wrote with JSON escapes matches nothing) into out[i], without
 * parsing or allocating - for a reconcile that reads a few values, or
 * compares a part with text of its own, at a fraction of kcr_obj_parse's
 * cost. The text is the stored one: compact JSON, as the server wrote it
 * or as cJSON printed it. Returns how many were found; n at most 16
 * (paths past that find nothing); the walk reads the whole text (a later
 * member of a name would replace an earlier one), and a text it cannot pass
 * - nesting deeper than 128 levels inside a value it steps over - finds
 * nothing at all (ask for "/metadata/name" too, to tell that from absence). Thread
 * safety: any thread. */
KCR_API size_t kcr_obj_spans(const kcr_obj *o, const char *const *paths,
                             struct kcr_span *out, size_t n);
/* kcr_status_write_text of o's text: the same results, requests and
 * errors, at less cost - the cache made the text well formed, so it is
 * followed by its structure, not checked again. (An object made with
 * kcr_obj_from_json of a tree nested deeper than the parser takes, 1000
 * levels, has a text kcr_status_write_text refuses; here what lies after
 * status is not read, and the write may go out.) Errors: KCR_EINVAL for no
 * o; else kcr_status_write's. o is borrowed for the call. Thread safety:
 * as kcr_status_write. */
KCR_API kcr_err kcr_obj_status_write(kcr_status_writer *w, const kcr_obj *o,
                                     const struct kcr_status_desired *d,
                                     enum kcr_write_result *res, struct kcr_errinfo *ei);
/* Parses the text into a new tree, *out, owned by the caller (cJSON_Delete):
 * the object as stored, so from an informer with a keep-list the projected
 * object, not the whole one.
 * Integers of 10^15 and up stay exact (kcr_json_parse). Errors: KCR_ENOMEM
 * (*out NULL). Thread safety: any thread. */
KCR_API kcr_err kcr_obj_parse(const kcr_obj *o, cJSON **out);
/* Bytes this object costs (header + text), for the store's accounting. */
KCR_API size_t kcr_obj_size(const kcr_obj *o);

/* The value of label key (metadata.labels[key]; the key as Kubernetes
 * spells it, dots and slashes and all: "app.kubernetes.io/name") in
 * *value: its span in o's text, a JSON string with its quotes (read it
 * with kcr_span_is or kcr_span_strdup). Reads o's text in place, without
 * a tree; of two members of one name the last counts, as in Go. Errors:
 * KCR_ENOTFOUND (no such label, or no labels), KCR_ENOTKEPT (o comes from
 * an informer whose keep list does not keep metadata.labels whole - one
 * that keeps some labels only counts as dropping them: whether the label
 * is there is not known - keep "/metadata/labels"), KCR_EPARSE (a text
 * nesting deeper than the walk follows - 128 levels where it steps over a
 * value, as kcr_obj_spans - which only kcr_obj_parse reads), KCR_EINVAL (no
 * o, key or value). On error *value is {NULL, 0}. Thread safety: any thread. */
KCR_API kcr_err kcr_obj_label(const kcr_obj *o, const char *key, struct kcr_span *value);
/* The same for metadata.annotations[key]. */
KCR_API kcr_err kcr_obj_annotation(const kcr_obj *o, const char *key,
                                   struct kcr_span *value);
/* A span holding a JSON string (kcr_obj_spans, kcr_obj_label) as a C
 * string, unquoted and unescaped, in *out (owned: free()). Errors:
 * KCR_EINVAL (no span or out, or the span is not a string: a number, an
 * object, nothing found), KCR_EPARSE (a broken string, or one holding
 * \u0000, which no C string can), KCR_ENOMEM. On error *out is NULL.
 * Thread safety: pure. */
KCR_API kcr_err kcr_span_strdup(const struct kcr_span *sp, char **out);
/* Whether the span holds the JSON string s (compared unescaped); false for
 * anything else, NULL included. Allocates only for a string written with
 * escapes. Thread safety: pure. */
KCR_API bool kcr_span_is(const struct kcr_span *sp, const char *s);

/* An index function: calls emit(value, ctx) for every index value of o.
 * Runs on the writer's thread without any store lock held, once per write of
 * o; the values are kept with the object, so the function is not called
 * again when o is removed. Must not write to this store. */
typedef void (*kcr_index_emit)(const char *value, void *ctx);
typedef void (*kcr_index_fn)(const kcr_obj *o, kcr_index_emit emit, void *ctx);

/* The built-in index by controller owner UID: its name and its function,
 *   kcr_store_add_index(s, KCR_INDEX_CONTROLLER, kcr_index_controller). */
#define KCR_INDEX_CONTROLLER "controller-uid"
KCR_API void kcr_index_controller(const kcr_obj *o, kcr_index_emit emit, void *ctx);

/* The built-in index by a label's value, as the name of that index: the
 * prefix and the label key,
 *   kcr_store_add_label_index(s, "app.kubernetes.io/instance");
 *   kcr_store_ref_by_index(s, KCR_INDEX_LABEL_PREFIX "app.kubernetes.io/instance",
 *                          "web", &objs, &n);
 * An object without the label (or whose label is not a string, or from an
 * informer whose keep list drops metadata.labels) has no value in it. */
#define KCR_INDEX_LABEL_PREFIX "label:"

/* Options for kcr_store_new(); zero means the default shown. */
struct kcr_store_opts {
  size_t size_hint; /* 0: start small. The number of objects expected: the
                       table is made big enough for them at once, so filling
                       it does not rehash (kcr_store_replace sizes its new
                       table for its input by itself) */
};

/* Makes an empty store; opts may be NULL (defaults). Release with
 * kcr_store_free(). Errors: KCR_EINVAL (no out), KCR_ENOMEM (also when the
 * table for size_hint cannot be had; ei says so). On error *out is NULL.
 * Thread safety: any thread. */
KCR_API kcr_err kcr_store_new(const struct kcr_store_opts *opts, kcr_store **out,
                              struct kcr_errinfo *ei);
/* Frees the store and drops its references (readers keep theirs). NULL is
 * a no-op. No other call on s may be running or follow. */
KCR_API void kcr_store_free(kcr_store *s);
/* Adds an index named name (copied) computed by fn; only before the first
 * write. Errors: KCR_EEXIST (name taken), KCR_EINVAL (after the first
 * write, no name, no fn), KCR_ENOMEM. Thread safety: the writer's thread,
 * before anything else uses the store. */
KCR_API kcr_err kcr_store_add_index(kcr_store *s, const char *name, kcr_index_fn fn);
/* Adds the label index of key (copied), named KCR_INDEX_LABEL_PREFIX key;
 * only before the first write. Errors: KCR_EEXIST (that index exists),
 * KCR_EINVAL (after the first write, no or empty key), KCR_ENOMEM. Thread
 * safety: as kcr_store_add_index. */
KCR_API kcr_err kcr_store_add_label_index(kcr_store *s, const char *key);

/* Reader side: any thread, concurrently with each other and the writer.
 *
 * ref: a new reference to the object at ns/name (ns NULL or "" for cluster
 * scope), or NULL if there is none. Release it with kcr_obj_unref. */
KCR_API kcr_obj *kcr_store_ref(kcr_store *s, const char *ns, const char *name);
/* The same by key ("ns/name", or "name" for cluster-scoped objects). */
KCR_API kcr_obj *kcr_store_ref_key(kcr_store *s, const char *key);
/* New references to every object, in no particular order: *objs is an
 * owned array of *n references; release both with kcr_objs_unref(). Errors:
 * KCR_ENOMEM. On error *objs is NULL and *n 0. */
KCR_API kcr_err kcr_store_ref_all(kcr_store *s, kcr_obj ***objs, size_t *n);
/* The same for the objects whose index `index` holds `value` (none: KCR_OK
 * with *n 0). Errors: KCR_EINVAL (no index of that name, or no value),
 * KCR_ENOMEM. */
KCR_API kcr_err kcr_store_ref_by_index(kcr_store *s, const char *index, const char *value,
                                       kcr_obj ***objs, size_t *n);
/* Drops the n references in objs and frees the array (as the reader calls
 * and kcr_store_replace return them). NULL is a no-op. */
KCR_API void kcr_objs_unref(kcr_obj **objs, size_t n);
/* The number of objects / bytes held by them (kcr_obj_size) now. */
KCR_API size_t kcr_store_len(kcr_store *s);
KCR_API size_t kcr_store_bytes(kcr_store *s);

/* Writer side (one writer thread at a time).
 *
 * put: inserts or replaces. On KCR_OK the store takes over the caller's
 * reference to o and *old gets the previous object (a reference the caller
 * must drop) or NULL. On error (KCR_ENOMEM) nothing changed: the caller
 * still owns its reference to o and *old is NULL. */
KCR_API kcr_err kcr_store_put(kcr_store *s, kcr_obj *o, kcr_obj **old);
/* Removes the object at key ("ns/name"); *old gets the store's reference to
 * it (the caller drops it), or NULL if it was absent. Never fails. */
KCR_API void kcr_store_delete_key(kcr_store *s, const char *key, kcr_obj **old);
/* The same by namespace and name. KCR_ENOMEM only for a key longer than
 * 511 bytes (longer than any valid Kubernetes name) when its copy fails;
 * KCR_OK otherwise, also when nothing was there (*old NULL). */
KCR_API kcr_err kcr_store_delete(kcr_store *s, const char *ns, const char *name,
                                 kcr_obj **old);
/* Replaces the whole contents with objs in one step readers never see
 * half-done. On KCR_OK the store takes over one reference of each object
 * (of duplicate keys the later wins and the earlier's reference is dropped)
 * and *gone receives references to objects that were present before and
 * are not in objs (for delete events; release with kcr_objs_unref). On
 * error (KCR_ENOMEM) the store is unchanged, the caller still owns every
 * reference, *gone is NULL and *ngone 0. objs itself stays the caller's. */
KCR_API kcr_err kcr_store_replace(kcr_store *s, kcr_obj **objs, size_t n, kcr_obj ***gone,
                                  size_t *ngone);

#ifdef __cplusplus
}
#endif

#endif
