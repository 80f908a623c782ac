/* runtime/projection-int.h - cache projection: the members of an object an
 * informer's store keeps (kcr_informer_opts.keep). Internal to libkcr. */
#ifndef KCR_RUNTIME_PROJECTION_INT_H
#define KCR_RUNTIME_PROJECTION_INT_H

#include <cjson/cJSON.h>
#include <stdbool.h>

#include "kcr/buf.h"
#include "kcr/err.h"

struct kcr__json_want; /* core/json-int.h */

/* A compiled keep-list: immutable once made, so any number of threads may
 * print with it at once. */
struct kcr__proj;

/* Why path cannot be a keep path ("is empty", "does not start with '/'
 * ..."), or NULL when it is a valid one: a JSON Pointer other than "" (its
 * tokens are member names; "/spec/0" names a member "0"). Pure. */
const char *kcr__proj_bad_path(const char *path);

/* Compiles keep (NULL-terminated, copied) plus the metadata every
 * projection keeps (listed in kcr/informer.h: apiVersion, kind and
 * metadata name, namespace, uid, resourceVersion, generation,
 * deletionTimestamp, ownerReferences), and /metadata/managedFields when flags
 * has KCR_OBJ_KEEP_MANAGED_FIELDS. Paths may repeat or overlap ("/spec" and
 * "/spec/x" keep all of spec). Errors: KCR_EINVAL (no keep or out, unknown
 * flags, a path kcr__proj_bad_path refuses), KCR_ENOMEM; *out NULL then. */
kcr_err kcr__proj_new(const char *const *keep, unsigned flags, struct kcr__proj **out);
/* NULL is a no-op. */
void kcr__proj_free(struct kcr__proj *p);

/* Whether p keeps the member at path (a valid keep path) whole: the path
 * itself or a prefix of it is kept. Pure. */
bool kcr__proj_keeps(const struct kcr__proj *p, const char *path);

/* The compact JSON text of the part of tree (an object; borrowed, not
 * modified) that p keeps: each member a path names, whole (arrays and
 * objects below it included), in tree's order; an object a path runs
 * through holds only the members kept below it and is left out when none
 * is there; a path that meets a non-object before its end keeps nothing
 * (paths do not index arrays). Of members with the same name, the first.
 * Allocates the text only (and, for keep-lists of more than 64 member
 * names in all, one scratch array) and appends the text to out. Returns
 * KCR_OK; KCR_EINVAL when tree is not an object; KCR_ENOMEM (out then
 * holds part of the text). Thread safety: any thread (tree as cJSON
 * allows). */
kcr_err kcr__proj_print(const struct kcr__proj *p, const cJSON *tree,
                        struct kcr_buf *out);

/* kcr__proj_print from the object's text instead of its tree: text[0..len)
 * must be one compact, well-formed JSON object (kcr__json_scan said so);
 * the kept members are copied as written, so the result parses to the tree
 * kcr__proj_print prints. Returns KCR_OK; KCR_ENOTFOUND (out as it was)
 * when a member name the keep-list looks at is written with escapes, which
 * only the tree compares unescaped, or the structure nests deeper than the
 * text walk follows: print from the tree then; KCR_EINVAL when text does
 * not start an object; KCR_ENOMEM (out then holds part of the text).
 * known[0..nknown) (may be NULL, 0): values the check found in text,
 * stepped over without being read (kcr__json_iter.known: the decoded
 * event's metadata and managedFields). Thread safety: any thread. */
kcr_err kcr__proj_print_text(const struct kcr__proj *p, const char *text, size_t len,
                             const struct kcr__json_want *known, size_t nknown,
                             struct kcr_buf *out);

#endif
