/* kcr/err.h - error codes and the server's answer that comes with them.
 *
 * Every fallible kcr call returns a kcr_err. Details travel in an optional
 * struct kcr_errinfo out-parameter: for an API error it holds the server's
 * Status (HTTP code, reason, message, details) exactly as sent; for a local
 * error (bad config, transport) it holds a message naming what was wrong.
 * Nothing the server said is dropped.
 *
 * Thread safety: all functions are pure or operate on caller-owned memory. */
#ifndef KCR_ERR_H
#define KCR_ERR_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "api.h"

#ifdef __cplusplus
extern "C" {
#endif

#define KCR_ERR_MAP(XX)                                                                  \
  XX(OK, 0, "success")                                                                   \
  XX(ENOMEM, 1, "out of memory")                                                         \
  XX(EINVAL, 2, "invalid argument")                                                      \
  XX(ETRANSPORT, 3, "transport failure")                                                 \
  XX(ENOTFOUND, 4, "not found (404)")                                                    \
  XX(ECONFLICT, 5, "conflict: the object has been modified (409)")                       \
  XX(EGONE, 6, "resource version too old (410)")                                         \
  XX(EINVALID, 7, "rejected by validation (422)")                                        \
  XX(ETERMINAL, 8, "do not retry")                                                       \
  XX(EEXIST, 9, "already exists (409)")                                                  \
  XX(EUNAUTHORIZED, 10, "unauthorized (401)")                                            \
  XX(EFORBIDDEN, 11, "forbidden (403)")                                                  \
  XX(EBADREQUEST, 12, "bad request (400)")                                               \
  XX(ETOOMANY, 13, "too many requests (429)")                                            \
  XX(EUNAVAILABLE, 14, "service unavailable (503)")                                      \
  XX(ESERVER, 15, "server error (5xx)")                                                  \
  XX(EHTTP, 16, "unexpected HTTP status")                                                \
  XX(EPARSE, 17, "malformed data")                                                       \
  XX(ECONFIG, 18, "invalid configuration")                                               \
  XX(ETIMEDOUT, 19, "timed out")                                                         \
  XX(ECANCELED, 20, "canceled")                                                          \
  XX(EIO, 21, "input/output error")                                                      \
  XX(EUNSUPPORTED, 22, "unsupported media type (415)")                                   \
  XX(ETOOLARGE, 23, "response too large")                                                \
  XX(ERANGE, 24, "number out of range")                                                  \
  XX(EUNCERTAIN, 25, "outcome unknown: the request was sent but no answer came")         \
  XX(ENOTKEPT, 26, "not kept in the cache (the informer's keep list drops it)")          \
  XX(EBUDGET, 27, "over the cache's byte budget")

typedef enum kcr_err {
#define XX(name, num, msg) KCR_##name = num,
  KCR_ERR_MAP(XX)
#undef XX
} kcr_err;

/* Human text for an error code; never NULL ("unknown error" if out of range). */
KCR_API const char *kcr_strerror(kcr_err e);
/* The code's name without prefix, e.g. "ECONFLICT". Never NULL. */
KCR_API const char *kcr_err_name(kcr_err e);

/* What went wrong, in detail. Zero-initialise (KCR_ERRINFO_INIT) before use;
 * release with kcr_errinfo_cleanup(). All strings are owned by the struct. */
struct kcr_errinfo {
  int code;       /* HTTP status code, 0 for local errors */
  char *status;   /* Status.status ("Failure"), or NULL */
  char *reason;   /* Status.reason ("Conflict", "Expired", ...), or NULL */
  char *message;  /* Status.message, or a local explanation; NULL if none */
  cJSON *details; /* Status.details, owned, or NULL */
  char *body;     /* raw body when it was not a Status (truncated to 4 KiB) */
  /* The answer's Retry-After header (429, 503), in milliseconds; 0 when it
   * had none. Set by the client (kcr/client.h), not by the parsers below. */
  uint64_t retry_after_ms;
};
#define KCR_ERRINFO_INIT                                                                 \
  {                                                                                      \
    0, NULL, NULL, NULL, NULL, NULL, 0                                                   \
  }

/* Frees ei's strings and details and zeroes it (reusable); NULL: no-op. */
KCR_API void kcr_errinfo_cleanup(struct kcr_errinfo *ei);

/* Replaces ei's contents with a local error message (printf format; code
 * 0). ei may be NULL (then nothing happens). Returns rc, for tail calls, and
 * never fails itself (out of memory, ei->message is NULL):
 *   return kcr_errinfo_set(ei, KCR_ECONFIG, "%s: field %s is missing", f, k); */
KCR_API kcr_err kcr_errinfo_set(struct kcr_errinfo *ei, kcr_err rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Parses an HTTP answer (code, body) into ei and returns the matching code
 * (from the Status's code; from the HTTP code when the Status has none, or
 * one that maps to KCR_OK or KCR_EHTTP):
 * 2xx -> KCR_OK (ei untouched); 400 EBADREQUEST, 401 EUNAUTHORIZED,
 * 403 EFORBIDDEN, 404 ENOTFOUND, 409 ECONFLICT (reason AlreadyExists ->
 * EEXIST), 410 EGONE, 415 EUNSUPPORTED, 422 EINVALID, 429 ETOOMANY,
 * 503 EUNAVAILABLE, other 5xx ESERVER, anything else EHTTP.
 * A body that is not a Status is kept in ei->body and ei->message says so.
 * KCR_ENOMEM when memory ran out reading a Status body (never another
 * answer in its place; ei->code is still the HTTP code). Other copies into
 * ei that run out of memory leave that field NULL. ei may be NULL.
 * Thread safety: pure. */
KCR_API kcr_err kcr_errinfo_from_http(struct kcr_errinfo *ei, long code, const char *body,
                                      size_t len);

/* Fills ei from a parsed metav1.Status object (as found in a watch ERROR event)
 * and returns the code its "code" field maps to (see above): KCR_OK for
 * 2xx, KCR_EGONE also for code 0 with reason Expired or Gone, KCR_EHTTP
 * when there is no code. A code that is not an integer within int32 (the
 * type of Status.code) counts as no code (ei->code 0). ei may be NULL;
 * status is borrowed (copied into ei). Pure. */
KCR_API kcr_err kcr_errinfo_from_status(struct kcr_errinfo *ei, const cJSON *status);

/* Whether the server's Status in ei lists a cause (details.causes[]) of
 * this type (StatusCause.reason, e.g. "NamespaceTerminating",
 * "FieldValueInvalid") on this field (e.g. "metadata.uid"); a NULL type or
 * field matches any. client-go's apierrors.HasStatusCause, plus the field.
 * ei NULL: false. Thread safety: pure. */
KCR_API bool kcr_errinfo_has_cause(const struct kcr_errinfo *ei, const char *type,
                                   const char *field);

#ifdef __cplusplus
}
#endif

#endif
