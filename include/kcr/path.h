/* kcr/path.h - REST paths and query strings for Kubernetes resources.
 * Pure functions, no I/O: the request builder is tested on its own.
 *
 *   core, namespaced:      /api/v1/namespaces/{ns}/{resource}[/{name}[/{sub}]]
 *   core, cluster-scoped:  /api/v1/{resource}[/{name}[/{sub}]]
 *   named group:           /apis/{group}/{version}/... (same shapes)
 *   all namespaces:        ns == NULL on a namespaced resource -> no namespaces/ part
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

/* Appends the path for ref to out (no query string). Errors: KCR_ENOMEM
 * (out unchanged), and KCR_EINVAL (nothing appended) for a NULL ref or gvr,
 * and, since every segment is checked, for:
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

/* Appends "?key=value" or "&key=value" (value percent-encoded) depending on
 * whether out already holds a '?'. NULL or empty value: nothing appended.
 * Errors: KCR_ENOMEM (out unchanged). */
KCR_API kcr_err kcr_query_add(struct kcr_buf *out, const char *key, const char *value);
KCR_API kcr_err kcr_query_add_int(struct kcr_buf *out, const char *key, long long value);

#ifdef __cplusplus
}
#endif

#endif
