/* A reference JSON Patch (RFC 6902) applier on cJSON trees, for checking
 * kcr_json_diff: the patch it writes, applied to the original, must give
 * the changed value. Written from the RFC for the tests (add, remove,
 * replace; the operations kcr_json_diff writes), independent of the code
 * under test but for kcr_json_parse, which reads numbers exactly. */
#ifndef KCR_TJSONPATCH_H
#define KCR_TJSONPATCH_H

#include <stdbool.h>
#include <stddef.h>

/* Applies patch (a JSON array of operations) to doc and returns the
 * result's text (malloc'd), or NULL with *why set (static text) when an
 * operation does not apply: a path that names nothing, an index beyond
 * the array, an unknown op. */
char *tjp_apply(const char *doc, size_t ndoc, const char *patch, size_t npatch,
                const char **why);

/* Applies patch to doc and compares the result with want as tjp_equal
 * does, on the trees (printing a tree would round its doubles to 15
 * digits). False with *why set when the patch does not apply or the
 * result differs. want NULL: only that it applies. */
bool tjp_apply_check(const char *doc, size_t ndoc, const char *patch, size_t npatch,
                     const char *want, size_t nwant, const char **why);

/* True when the JSON texts a and b hold equal values: objects compared
 * member by member whatever the order (of a repeated name the last
 * counts), numbers as kcr_json_parse reads them (integers exactly), strings
 * byte for byte after unescaping. */
bool tjp_equal(const char *a, size_t na, const char *b, size_t nb);

#endif
