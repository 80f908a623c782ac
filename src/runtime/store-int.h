/* runtime/store-int.h - the informer's way of making projected objects, and
 * introspection of the informer cache for tests; not installed. */
#ifndef KCR_RUNTIME_STORE_INT_H
#define KCR_RUNTIME_STORE_INT_H

#include <stdatomic.h>
#include <stddef.h>

#include "kcr/store.h"

struct kcr__json_want; /* core/json-int.h */

struct kcr__proj;

/* kcr_obj_from_json, keeping of the tree only what proj keeps
 * (runtime/projection-int.h; NULL: everything). The header is read from
 * the whole tree and proj keeps every member it is made of. Errors as
 * kcr_obj_from_json. */
kcr_err kcr__obj_from_json(const cJSON *tree, unsigned flags,
                           const struct kcr__proj *proj, kcr_obj **out,
                           struct kcr_errinfo *ei);
/* kcr__obj_from_json from the object's JSON text text[0..len) (a watch
 * event's object as the server wrote it), without a tree when the text
 * allows: the same header and a text that parses to the same tree (the
 * kept members as written, rather than as cJSON prints them). Text that is
 * not compact, or that writes with escapes a member name or a string the
 * header holds, goes through a tree (kcr_json_parse, then
 * kcr__obj_from_json). flags may add KCR__OBJ_CHECKED when text is known
 * to be exactly one compact, well-formed JSON object (kcr_list_each_text's
 * items and kcr_watch_opts.object_text's objects are): it is then not
 * checked again, only followed (text that breaks that promise makes a
 * wrong object, never a read outside text). known[0..nknown) (may be NULL,
 * 0): values whose extent that check found in text, stepped over without
 * being read (kcr__json_iter.known: a watch event's metadata and
 * managedFields); the object made is the same with or without them.
 * Errors: those of
 * kcr__obj_from_json; KCR_EPARSE (ei says where) for text that is not one
 * JSON object. Thread safety: any thread. */
#define KCR__OBJ_CHECKED (1u << 31) /* kcr__obj_from_text: see there */
kcr_err kcr__obj_from_text(const char *text, size_t len, unsigned flags,
                           const struct kcr__proj *proj,
                           const struct kcr__json_want *known, size_t nknown,
                           kcr_obj **out, struct kcr_errinfo *ei);
/* Objects made from listed items (kcr_list_each_text's fn, with ud a
 * struct kcr__obj_list): each item's text through kcr__obj_from_text with
 * flags | KCR__OBJ_CHECKED and proj (NULL: everything), appended to
 * objs[0..n) (grown as needed; release with kcr_objs_unref(objs, n)). An
 * item without a name is logged at warning level, naming who, and skipped.
 * Errors: KCR_ENOMEM, kcr__obj_from_text's. */
struct kcr__obj_list {
  const char *who; /* for the log: the informer or the reader */
  unsigned flags;
  const struct kcr__proj *proj;
  const atomic_bool *quit; /* when set and true: KCR_ECANCELED at the next item */
  kcr_obj **objs;
  size_t n, cap;
};
kcr_err kcr__obj_list_add(const char *text, size_t len, void *ud);
/* Appends o (its reference moves to the list) to l->objs. Errors:
 * KCR_ENOMEM (then the reference is still the caller's). */
kcr_err kcr__obj_list_push(struct kcr__obj_list *l, kcr_obj *o);
struct kcr_arena;
struct kcr_type;
/* A view (kcr/typed.h) of type t of o's text, in arena a (a t->size struct
 * there), for the typed callbacks of informers and controllers; o must
 * outlive it. NULL when it does not decode (o is not of type t: the schema
 * the type came from is not the server's) or memory ran out - logged at
 * error level with o's key, the decoder's message and who (the informer or
 * controller whose callback is then not called). Thread safety: any
 * thread; a is the caller's. */
void *kcr__obj_view(const struct kcr_type *t, const kcr_obj *o, struct kcr_arena *a,
                    const char *who);
/* Whether a and b have the same text but for their status (absent in
 * either, or not) and their metadata.resourceVersion - compared as the
 * stored texts, so false also when only the order of members differs, or
 * when a text has no resourceVersion or cannot be walked. Thread safety:
 * any thread. */
bool kcr__obj_same_but_status(const kcr_obj *a, const kcr_obj *b);
/* Empties the store, dropping its references to the objects (others'
 * stay valid), with no allocation: cannot fail. The writer's (one writer
 * at a time, kcr/store.h); readers wait while it runs. */
void kcr__store_clear(kcr_store *s);
/* The length of the longest hash chain of the object table (the cost of the
 * worst lookup). Takes the read lock. */
size_t kcr__store_max_chain(kcr_store *s);
/* The number of buckets of the object table. Takes the read lock. */
size_t kcr__store_buckets(kcr_store *s);

#endif
