/* kcr/path.h - REST paths and query strings for Kubernetes resources.
 * Pure functions, no I/O: the request builder is tested on its own.
 *
 *   core, namespaced:      /api/v1/namespaces/{ns}/{resource}[/{name}[/{sub}]]
 *   core, cluster-scoped:  /api/v1/{resource}[/{name}[/{sub}]]
 *   named group:           /apis/{group}/{version}/... (same shapes)
 *   all namespaces:        ns == NULL on a namespaced resource -> no namespaces/ part
 *
 * kcr_rv_compare() orders two resourceVersions of one resource.
 *
 * Thread safety: pure. */
#ifndef KCR_PATH_H
#define KCR_PATH_H

#include <stdbool.h>

#include "api.h"
#include "buf.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Which resource: group "" is the core group. */
struct kcr_gvr {
  const char *group;    /* "" or NULL for core, "apps", "ebdman.example.com" */
  const char *version;  /* "v1", "v1alpha1" */
  const char *resource; /* plural, lower case: "configmaps", "ebds" */
  bool namespaced;
};

/* One object (or collection when name is NULL) of a resource. */
struct kcr_ref {
  const struct kcr_gvr *gvr;
  const char *ns;   /* namespace; NULL for cluster-scoped or all namespaces */
  const char *name; /* NULL for the collection */
  const char *sub;  /* subresource ("status", "scale") or NULL */
};

/* Appends the path for ref to out (no query string). Returns KCR_OK,
 * out's error (kcr_buf_err: KCR_ENOMEM, or an earlier append's; kept in
 * out, so a path and its queries are checked once, at the end), or
 * KCR_EINVAL (nothing appended, out's error not set). Every segment is
 * checked; KCR_EINVAL is returned for:
 *   - a namespace, version, resource or subresource that is not an RFC 1123
 *     label (lower-case letters, digits, '-'; at most 63), a group that is not
 *     an RFC 1123 subdomain;
 *   - a name that is empty, "." or "..", or holds a character other than
 *     letters, digits and -._~!$&'()*+,;=:@ ('/', '%', '?', '#', spaces,
 *     control characters, non-ASCII ... are refused: segments are not
 *     percent-encoded, and the apiserver's IsValidPathSegmentName refuses
 *     '/', '%', "." and "..");
 *   - a subresource without a name, a namespace on a cluster-scoped
 *     resource, a name on a namespaced resource without a namespace. */
KCR_API kcr_err kcr_path(struct kcr_buf *out, const struct kcr_ref *ref);

/* Whether s is an RFC 1123 label (lower-case letters, digits and '-', at
 * most 63, starting and ending with a letter or digit: a namespace's name,
 * a Service's) or an RFC 1123 subdomain (such labels joined by '.', at
 * most 253: most objects' names, a Lease's, a ConfigMap's). NULL: false.
 * Thread safety: pure. */
KCR_API bool kcr_is_dns_label(const char *s);
KCR_API bool kcr_is_dns_subdomain(const char *s);

/* Appends "?key=value" or "&key=value" (value percent-encoded) depending on
 * whether out already holds a '?'. NULL or empty value: nothing appended.
 * Returns KCR_OK or out's error (kcr_buf_err: KCR_ENOMEM, or one from an
 * earlier append, which makes this a no-op). */
KCR_API kcr_err kcr_query_add(struct kcr_buf *out, const char *key, const char *value);
KCR_API kcr_err kcr_query_add_int(struct kcr_buf *out, const char *key, long long value);

/* Orders two resourceVersions of the same resource: *cmp is -1 (a is
 * older), 0 (the same version) or 1 (a is newer). Kubernetes made them
 * comparable in 1.35 (KEP-5504), with apimachinery's
 * resourceversion.CompareResourceVersion as the rule, mirrored here: each
 * must be a decimal integer without sign or leading zero ("0" is not a
 * version), of any length; the shorter is older, equal lengths compare
 * digit by digit. Versions of different resources, or of an apiserver that
 * does not use etcd revisions, say nothing about each other.
 * Errors: KCR_EINVAL when a or b is NULL or not such an integer: the two
 * are not comparable (*cmp is 0); treat it as "unknown", never as "older".
 * Thread safety: pure. */
KCR_API kcr_err kcr_rv_compare(const char *a, const char *b, int *cmp);

#ifdef __cplusplus
}
#endif

#endif
