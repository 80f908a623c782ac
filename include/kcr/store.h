/* kcr/store.h - the informer cache: immutable, refcounted objects by
 * namespace/name, with indexes.
 *
 * An object is held as its compact JSON text (metadata.managedFields
 * stripped unless asked to keep it) plus a small parsed header: namespace,
 * name, uid, resourceVersion, generation, deletion flag and controller
 * owner. Readers parse the text on demand (kcr_obj_parse, ~4 us for a 1.7 KB
 * object) instead of the cache holding a cJSON tree: measured in
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

/* Makes an object from a tree (borrowed, not modified). managedFields are
 * dropped unless keep_managed_fields. KCR_EINVAL if it has no
 * metadata.name. *out holds one reference. */
KCR_API kcr_err kcr_obj_new(const cJSON *tree, bool keep_managed_fields, kcr_obj **out);
/* A new reference to o (o may be NULL). Any thread. */
KCR_API kcr_obj *kcr_obj_ref(kcr_obj *o);
/* Drops a reference; the last one frees. NULL is a no-op. Any thread. */
KCR_API void kcr_obj_unref(kcr_obj *o);

/* Header fields: borrowed, valid while the reference is held. */
KCR_API const char *kcr_obj_ns(const kcr_obj *o); /* "" for cluster-scoped */
KCR_API const char *kcr_obj_name(const kcr_obj *o);
KCR_API const char *kcr_obj_uid(const kcr_obj *o);    /* "" if none */
KCR_API const char *kcr_obj_rv(const kcr_obj *o);     /* "" if none */
KCR_API int64_t kcr_obj_generation(const kcr_obj *o); /* 0 if none */
KCR_API bool kcr_obj_deleting(const kcr_obj *o);      /* deletionTimestamp set */
KCR_API const struct kcr_owner *kcr_obj_controller(const kcr_obj *o);
/* "ns/name" or "name" for cluster-scoped. */
KCR_API const char *kcr_obj_key(const kcr_obj *o);
/* The compact JSON text, borrowed. */
KCR_API const char *kcr_obj_json(const kcr_obj *o, size_t *len);
/* A new tree parsed from the text; caller frees. NULL if out of memory. */
KCR_API cJSON *kcr_obj_parse(const kcr_obj *o);
/* Bytes this object costs (header + text), for the store's accounting. */
KCR_API size_t kcr_obj_size(const kcr_obj *o);

/* An index function: calls emit(value, ctx) for every index value of o.
 * Runs on the writer's thread without any store lock held, once per write of
 * o; the values are kept with the object, so the function is not called
 * again when o is removed. Must not write to this store. */
typedef void (*kcr_index_emit)(const char *value, void *ctx);
typedef void (*kcr_index_fn)(const kcr_obj *o, kcr_index_emit emit, void *ctx);

/* The built-in index by controller owner UID. */
#define KCR_INDEX_CONTROLLER "controller-uid"

KCR_API kcr_store *kcr_store_new(void);
/* Frees the store and drops its references (readers keep theirs). */
KCR_API void kcr_store_free(kcr_store *s);
/* Adds an index; only before the first write. fn NULL is allowed for the
 * built-in KCR_INDEX_CONTROLLER. Errors: KCR_EEXIST (name taken), KCR_EINVAL
 * (after the first write, no name, NULL fn for another name), KCR_ENOMEM. */
KCR_API kcr_err kcr_store_add_index(kcr_store *s, const char *name, kcr_index_fn fn);

/* A new reference to the object at ns/name (ns NULL or "" for cluster
 * scope), or NULL. Any thread. */
KCR_API kcr_obj *kcr_store_get(kcr_store *s, const char *ns, const char *name);
KCR_API kcr_obj *kcr_store_get_key(kcr_store *s, const char *key);
/* References to every object (or to those whose index `index` holds
 * `value` when index != NULL), in no particular order. *objs is an owned
 * array; release with kcr_objs_free(). Any thread. */
KCR_API kcr_err kcr_store_list(kcr_store *s, const char *index, const char *value,
                               kcr_obj ***objs, size_t *n);
KCR_API void kcr_objs_free(kcr_obj **objs, size_t n);
KCR_API size_t kcr_store_len(kcr_store *s);
/* Bytes held by the objects in the store. */
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
 * 511 bytes (longer than any valid Kubernetes name) when its copy fails. */
KCR_API kcr_err kcr_store_delete(kcr_store *s, const char *ns, const char *name,
                                 kcr_obj **old);
/* Replaces the whole contents with objs in one step readers never see
 * half-done. On KCR_OK the store takes over one reference of each object
 * (of duplicate keys the later wins and the earlier's reference is dropped)
 * and *gone receives references to objects that were present before and
 * are not in objs (for delete events; free with kcr_objs_free). On error
 * (KCR_ENOMEM) the store is unchanged, the caller still owns every
 * reference, *gone is NULL and *ngone 0. */
KCR_API kcr_err kcr_store_replace(kcr_store *s, kcr_obj **objs, size_t n, kcr_obj ***gone,
                                  size_t *ngone);

#ifdef __cplusplus
}
#endif

#endif
