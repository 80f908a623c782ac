/* kcr/client.h - the Kubernetes REST client.
 *
 * One client per process is enough: it is thread-safe and keeps a pool of
 * curl easy handles (each used by one thread at a time) so TCP/TLS
 * connections are reused; HTTP/2 is used when the server offers it. TLS
 * verification is on unless the config says insecure-skip-tls-verify.
 *
 * Every call returns a kcr_err; a non-2xx answer maps to a code (409 ->
 * KCR_ECONFLICT, or KCR_EEXIST for reason AlreadyExists; 404 -> KCR_ENOTFOUND;
 * 410 -> KCR_EGONE; 422 -> KCR_EINVALID; see err.h) and the server's Status
 * is copied into *ei, when ei is not NULL. 429 and 503 answers are retried
 * after their Retry-After (bounded by max_retries and max_retry_after_ms);
 * a 401 with refreshable credentials (exec plugin, token file) re-reads them
 * once and retries.
 *
 * Objects are cJSON trees. Inputs are borrowed; *out trees are new and owned
 * by the caller (cJSON_Delete); out may be NULL to discard the answer.
 *
 * Thread safety: every function may be called from any thread concurrently,
 * except kcr_client_free. */
#ifndef KCR_CLIENT_H
#define KCR_CLIENT_H

#include <cjson/cJSON.h>
#include <stdbool.h>

#include "api.h"
#include "buf.h"
#include "config.h"
#include "err.h"
#include "path.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kcr_client kcr_client;

/* Called after every HTTP exchange (for metrics): method, status code (0 on
 * transport failure), duration in seconds. Must be thread-safe. */
typedef void (*kcr_request_observer)(const char *method, long code, double seconds,
                                     void *ud);

struct kcr_client_opts {
  const char *user_agent;  /* default "kcr/<version>" */
  long timeout_ms;         /* whole request, default 30000; not for watches */
  long connect_timeout_ms; /* default 10000 */
  int max_retries;         /* 429/503 retries, default 3; -1 for none */
  long max_retry_after_ms; /* cap on one Retry-After wait, default 10000 */
  kcr_request_observer observe;
  void *observe_ud;
  /* Largest response body accepted, and largest single watch event, in
   * bytes; default KCR_CLIENT_MAX_RESPONSE (128 MiB). A bigger answer fails
   * with KCR_ETOOLARGE (the message names the request and the limit) and
   * what arrived is discarded. Error bodies (non-2xx) are kept up to
   * 64 KiB; the rest is read and dropped. */
  size_t max_response_bytes;
};
#define KCR_CLIENT_MAX_RESPONSE ((size_t)128 << 20)

/* Creates a client holding one reference. Takes ownership of cfg (freed
 * with the client, also on failure). opts may be NULL for defaults.
 * Errors: KCR_EINVAL (no cfg), KCR_ENOMEM. */
KCR_API kcr_err kcr_client_new(kcr_config *cfg, const struct kcr_client_opts *opts,
                               kcr_client **out, struct kcr_errinfo *ei);
/* Takes another reference (returns c; NULL is passed through). Every libkcr
 * object that keeps a client (informer, controller, status writer, event
 * recorder, leader elector, manager) holds one, so the order in which they
 * are freed does not matter: the client lives until the last of them is
 * gone. Any thread. */
KCR_API kcr_client *kcr_client_ref(kcr_client *c);
/* Drops the caller's reference; the last one frees the client (its pooled
 * connections and config). NULL is a no-op. Must not race with requests
 * made through this reference. */
KCR_API void kcr_client_free(kcr_client *c);

/* The write fence that keeps a replica that lost its leader lease from
 * writing. When set, gate(ud) is called for every mutating request (POST,
 * PUT, PATCH, DELETE) at the last moment before it is sent - after its
 * connection is ready, from libcurl's pre-request callback - and a request
 * for which it returns false is not sent: the call fails with
 * KCR_ECANCELED, and ei says the write was fenced. Requests marked
 * `ungated` (the lease's own) are never checked. gate runs on the calling
 * thread, must be fast and thread-safe, and must not call the client. NULL
 * removes it. Any thread, any time: when kcr_client_set_write_gate returns,
 * no call of the previous gate is still running, so its ud may be freed.
 * The manager sets it when leader election is on (see manager.h) and closes
 * it (kcr_write_gate_closed) when it is freed. */
typedef bool (*kcr_write_gate)(void *ud);
KCR_API void kcr_client_set_write_gate(kcr_client *c, kcr_write_gate gate, void *ud);
/* A gate that refuses every write. */
KCR_API bool kcr_write_gate_closed(void *ud);
/* Replaces the request observer (opts.observe at creation); NULL removes it.
 * Any thread, any time: when it returns no call of the previous observer is
 * still running, so its ud may be freed. Must not be called from an
 * observer or a gate. */
KCR_API void kcr_client_set_observer(kcr_client *c, kcr_request_observer fn, void *ud);
/* The config the client uses (borrowed). */
KCR_API kcr_config *kcr_client_config(kcr_client *c);

/* A raw request. path starts with '/' and may carry a query string. */
struct kcr_http_request {
  const char *method; /* "GET", "POST", "PUT", "PATCH", "DELETE" */
  const char *path;
  const char *content_type; /* for a body; default application/json */
  const char *body;
  size_t body_len;
  long timeout_ms; /* 0: client default */
  bool ungated;    /* not subject to the write gate (leader election's own) */
};
struct kcr_http_response {
  long code;           /* HTTP status, 0 if none was received */
  struct kcr_buf body; /* caller cleans up */
};
/* Sends one request. The body is kept in resp even for errors. */
KCR_API kcr_err kcr_client_do(kcr_client *c, const struct kcr_http_request *req,
                              struct kcr_http_response *resp, struct kcr_errinfo *ei);

/* GET one object. */
KCR_API kcr_err kcr_get(kcr_client *c, const struct kcr_ref *ref, cJSON **out,
                        struct kcr_errinfo *ei);

struct kcr_list_opts {
  const char *label_selector;
  const char *field_selector;
  long limit; /* page size; 0 = server default (all) */
  const char *continue_token;
  const char *resource_version;
  const char *resource_version_match; /* "NotOlderThan", "Exact" */
};
/* GET one page of a collection (ref->name NULL). The List's
 * metadata.continue says whether more pages follow. */
KCR_API kcr_err kcr_list(kcr_client *c, const struct kcr_ref *ref,
                         const struct kcr_list_opts *opts, cJSON **out,
                         struct kcr_errinfo *ei);

/* Called once per item of every page; items are borrowed for the call. A
 * non-OK return stops the listing and is returned. */
typedef kcr_err (*kcr_list_item_fn)(const cJSON *item, void *ud);
/* Lists all pages (opts->limit per page, default 500) and calls fn per item.
 * *rv (optional) gets the list's resourceVersion (for a following watch),
 * owned by the caller. */
KCR_API kcr_err kcr_list_each(kcr_client *c, const struct kcr_ref *ref,
                              const struct kcr_list_opts *opts, kcr_list_item_fn fn,
                              void *ud, char **rv, struct kcr_errinfo *ei);

struct kcr_write_opts {
  const char *field_manager;
  bool dry_run;
};
/* POST obj to the collection of ref (ref->name NULL; ns from ref). */
KCR_API kcr_err kcr_create(kcr_client *c, const struct kcr_ref *ref, const cJSON *obj,
                           const struct kcr_write_opts *wo, cJSON **out,
                           struct kcr_errinfo *ei);
/* PUT obj (it must carry metadata.resourceVersion; a stale one -> ECONFLICT). */
KCR_API kcr_err kcr_update(kcr_client *c, const struct kcr_ref *ref, const cJSON *obj,
                           const struct kcr_write_opts *wo, cJSON **out,
                           struct kcr_errinfo *ei);

enum kcr_patch_type {
  KCR_PATCH_MERGE,    /* application/merge-patch+json (RFC 7386) */
  KCR_PATCH_JSON,     /* application/json-patch+json (RFC 6902) */
  KCR_PATCH_APPLY,    /* application/apply-patch+yaml: server-side apply */
  KCR_PATCH_STRATEGIC /* built-in types only; custom resources answer 415 */
};
struct kcr_patch_opts {
  enum kcr_patch_type type;
  const char *field_manager; /* required for KCR_PATCH_APPLY */
  bool force;                /* apply: take over conflicting fields */
  bool dry_run;
};
/* PATCH ref with body (JSON text). */
KCR_API kcr_err kcr_patch(kcr_client *c, const struct kcr_ref *ref,
                          const struct kcr_patch_opts *po, const char *body, size_t len,
                          cJSON **out, struct kcr_errinfo *ei);
/* Server-side apply of obj (serialised here) with fieldManager and force. */
KCR_API kcr_err kcr_apply(kcr_client *c, const struct kcr_ref *ref, const cJSON *obj,
                          const char *field_manager, bool force, cJSON **out,
                          struct kcr_errinfo *ei);

enum kcr_propagation {
  KCR_PROPAGATE_DEFAULT = 0,
  KCR_PROPAGATE_BACKGROUND,
  KCR_PROPAGATE_FOREGROUND,
  KCR_PROPAGATE_ORPHAN
};
struct kcr_delete_opts {
  enum kcr_propagation propagation;
  const char *precondition_uid; /* delete only this incarnation */
  const char *precondition_rv;  /* delete only this version */
  long grace_period_seconds;    /* < 0 or 0 with has_grace false: default */
  bool has_grace;
  bool dry_run;
};
/* DELETE ref. A failed precondition answers 409 (KCR_ECONFLICT). */
KCR_API kcr_err kcr_delete(kcr_client *c, const struct kcr_ref *ref,
                           const struct kcr_delete_opts *o, cJSON **out,
                           struct kcr_errinfo *ei);

#ifdef __cplusplus
}
#endif

#endif
