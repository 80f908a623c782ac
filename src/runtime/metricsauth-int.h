/* metricsauth-int.h - who may read /metrics: bearer tokens checked with a
 * TokenReview, then the verb on the non-resource URL checked with a
 * SubjectAccessReview, the answers cached briefly (metricsauth.c).
 * Used by the HTTP server (httpd.c). Thread safety: kcr__mauth_check from
 * any thread, concurrently; new and free from one. */
#ifndef KCR_RUNTIME_METRICSAUTH_INT_H
#define KCR_RUNTIME_METRICSAUTH_INT_H

#include <stddef.h>

#include "kcr/client.h"

/* The longest token reviewed; a longer one is refused (401) unreviewed.
 * Service account tokens are about 1 KiB, OIDC tokens a few. */
#define KCR__MAUTH_TOKEN_MAX 8192
/* Entries cached, each a keyed hash of (verb, path, token) and its answer:
 * up to this many allowed answers, and apart from them up to this many
 * denials (401, 403), so that denials never evict an allowed answer. When
 * one is full, an expired entry or else the one that expires first makes
 * room. */
#define KCR__MAUTH_CACHE_MAX 1024
/* How long answers are cached, as controller-runtime's
 * filters.WithAuthenticationAndAuthorization: a TokenReview's one minute
 * (authenticated or not), a denial 30 s. An allowed answer is cached for
 * the TokenReview's minute (the SubjectAccessReview's own 5 minutes would
 * outlive it). Errors are not cached. */
#define KCR__MAUTH_AUTHN_TTL_MS 60000
#define KCR__MAUTH_DENY_TTL_MS  30000

typedef struct kcr__mauth kcr__mauth;

/* A checker whose reviews go through c (a reference of its own is taken).
 * Errors: KCR_ENOMEM. */
kcr_err kcr__mauth_new(kcr_client *c, kcr__mauth **out);
void kcr__mauth_free(kcr__mauth *a);

/* Decides a request of verb (the HTTP method in lower case, as
 * controller-runtime: "get", "head") for path with Authorization header
 * value auth (NULL: none): returns the HTTP status to answer, 200
 * (allowed), 401 (no token, a malformed one, or one the TokenReview does
 * not authenticate), 403 (the SubjectAccessReview denies verb on path) or
 * 500 (a review failed, or the key could not be computed; then not
 * cached). msg (n bytes, NUL-terminated) gets the answer's body line for
 * 401, 403 and 500, as controller-runtime words it. An answer is cached
 * for its (token, verb, path) alone: a cached one makes no request; else
 * one TokenReview and, once authenticated, one SubjectAccessReview. */
int kcr__mauth_check(kcr__mauth *a, const char *verb, const char *path, const char *auth,
                     char *msg, size_t n);

#endif
