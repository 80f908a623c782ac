/* kcr/jsonpatch.h - the JSON Patch (RFC 6902) that turns one JSON text
 * into another: what a mutating admission webhook answers
 * (kcr/webhook.h), as controller-runtime's PatchResponseFromRaw computes
 * it from the object before and after the handler.
 *
 *   struct kcr_buf patch = KCR_BUF_INIT;
 *   size_t nops;
 *   if(!kcr_json_diff(before, nbefore, after, nafter, 0, &patch, &nops, &ei))
 *     ... nops == 0: the two are equal, send no patch at all
 *
 * What the patch holds:
 *   - objects are compared member by member, by name (escapes as written
 *     do not matter: "caf\u00e9" is "café"; of a name given twice the last
 *     counts, as Go's decoder and kcr_json_parse take it): a member only
 *     in `to` is an "add", one only in `from` a "remove", one in both is
 *     compared in turn;
 *   - arrays element by element at the same index; extra elements of `to`
 *     are "add"s at their index, in ascending order, extra elements of
 *     `from` "remove"s from the last one down;
 *   - any other difference (a changed scalar, a changed type) is one
 *     "replace" of the whole value; the root replaced is the path "".
 * Values are written as the `to` text has them, byte for byte (integers
 * beyond 2^53 stay exact). Numbers are equal when both are integer
 * literals of the same int64 value, or, when either has a fraction or
 * exponent, the same double ("1.0" is "1") - an integer literal there only
 * when it is within 2^53, where doubles are exact; an integer literal
 * beyond int64, or a number beyond the range of double, equals only the
 * same literal. Strings are equal when they stand
 * for the same bytes. Paths are JSON Pointers (RFC 6901): a member name
 * is written with "~" as "~0" and "/" as "~1" (a label key such as
 * "app.kubernetes.io/name" becomes "app.kubernetes.io~1name"). Each
 * operation object is {"op":...,"path":...[,"value":...]}, in the order
 * they apply; applied in order to `from` they give a JSON value equal to
 * `to`.
 *
 * Thread safety: a pure function over the caller's memory. */
#ifndef KCR_JSONPATCH_H
#define KCR_JSONPATCH_H

#include <stddef.h>

#include "api.h"
#include "buf.h"
#include "err.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Flags of kcr_json_diff. */
/* Leave out every "remove": members of `from` that `to` lacks stay as
 * they are. A mutating webhook whose handler sees the object through a
 * type that does not hold every field uses it so that what the type cannot
 * hold is not deleted (controller-runtime's default for CustomDefaulter). */
#define KCR_JSON_DIFF_NO_REMOVE 1u

/* Appends to patch the JSON Patch (a JSON array, "[]" when the two are
 * equal) that turns the JSON text from[0..from_n) into to[0..to_n), and
 * sets *nops (may be NULL) to its number of operations. White space
 * around either value is allowed; text after it is not looked at.
 * Errors: KCR_EINVAL (a NULL argument but nops or ei), KCR_EPARSE (a text
 * is not well-formed JSON; ei says which, "from" or "to"), KCR_ERANGE (a
 * value nests deeper than 128 levels), KCR_ENOMEM. On error patch has its
 * length back (an error it held or met stays in it: kcr/buf.h) and *nops is 0.
 * Nothing is allocated but patch's growth and scratch memory freed before
 * the return. */
KCR_API kcr_err kcr_json_diff(const char *from, size_t from_n, const char *to,
                              size_t to_n, unsigned flags, struct kcr_buf *patch,
                              size_t *nops, struct kcr_errinfo *ei);

#ifdef __cplusplus
}
#endif

#endif
