/* kcr/client.h - the Kubernetes REST client.
 *
 * One client per process is enough: it is thread-safe and keeps pools of
 * connections (each used by one thread at a time) so TCP/TLS connections
 * are reused. Each connection speaks HTTP/1.1 (HTTP/2's multiplexing would
 * go unused and cost CPU on every request). Gets and lists are libcurl
 * transfers; writes and watches to an https server (without a proxy) are
 * written and read by the client itself on connections libcurl made
 * (cheaper than a transfer; KCR_TRANSPORT=curl or kcr_client_opts.transport
 * makes every request a transfer). TLS verification is on unless the
 * config says insecure-skip-tls-verify.
 *
 * Proxies, as client-go chooses them, once, when the client is made
 * (kcr_client_new reads the environment then):
 *  1. the cluster's proxy-url in the kubeconfig (kcr_config_proxy_url), for
 *     every request, whatever the server's host (http://, https://, and
 *     socks5:// - the proxy resolves the server's name);
 *  2. else https_proxy, or HTTPS_PROXY when that is unset or empty, for an
 *     https server (http_proxy / HTTP_PROXY for an http one); a value
 *     without a scheme means http://. ALL_PROXY / all_proxy are ignored
 *     (client-go ignores them; so does the client's libcurl, which is told
 *     the decision);
 *  3. but never for localhost or a loopback address (127.0.0.0/8, ::1),
 *     nor for a server that no_proxy, or NO_PROXY when that is unset or
 *     empty, names. Its comma-separated entries: "*" (every server); a
 *     domain "example.com" (that name and every name under it);
 *     ".example.com" or "*.example.com" (names under it only); an IP
 *     address ("10.0.0.1", "::1"); a CIDR ("10.0.0.0/8", "fd00::/8");
 *     a domain or an IP address may carry a port ("example.com:6443",
 *     "[fd00::1]:443"), then only that port of the server (its URL's, else
 *     443 / 80) matches. Case does not matter; blanks around an entry are
 *     ignored; a domain never matches an IP address. As in client-go, a
 *     CIDR in NO_PROXY (taken first here) also counts when no_proxy is set.
 * A server reached through a proxy has all its requests made by libcurl
 * (through the proxy; for https a CONNECT tunnel); otherwise writes and
 * watches go on the client's own connections as above.
 *
 * Errors. A non-2xx answer maps to a code and the server's Status is copied
 * into *ei (when ei is not NULL): 400 KCR_EBADREQUEST, 401
 * KCR_EUNAUTHORIZED, 403 KCR_EFORBIDDEN, 404 KCR_ENOTFOUND, 409
 * KCR_ECONFLICT (KCR_EEXIST for reason AlreadyExists), 410 KCR_EGONE, 415
 * KCR_EUNSUPPORTED, 422 KCR_EINVALID, 429 KCR_ETOOMANY, 503
 * KCR_EUNAVAILABLE, other 5xx KCR_ESERVER, anything else KCR_EHTTP (see
 * kcr_errinfo_from_http). Without an answer: KCR_ETRANSPORT (connection,
 * TLS, a stream cut short), KCR_EUNCERTAIN (a write - any method but GET
 * and HEAD - whose connection ended without an answer after bytes of it
 * had left: the server may or may not have carried it out), KCR_ETIMEDOUT
 * (timeout_ms ran out; a write's outcome is then as uncertain),
 * KCR_ECANCELED (a write the write gate refused, before it was sent),
 * KCR_ETOOLARGE (the answer is over max_response_bytes), KCR_ENOMEM, and the
 * credential errors of kcr_config_dup_credentials (KCR_ECONFIG, KCR_EIO,
 * KCR_ETIMEDOUT, KCR_EPARSE). A 2xx answer that is not JSON where an object
 * is expected is KCR_EPARSE. Below, "the request errors" means this list.
 * 429 and 503 answers are retried after their Retry-After (bounded by
 * max_retries and max_retry_after_ms; a raw request may set its own
 * max_retries); the Retry-After of the answer that failed the call is in
 * ei->retry_after_ms. A 401 with refreshable credentials (exec plugin,
 * token file) re-reads them once and retries. A request that got no byte
 * of answer on a reused connection (the server closed it as the request
 * went out) is sent once more on a new one if no byte of it had left, or
 * if it is a GET or HEAD; a write is never sent twice by the client
 * (KCR_EUNCERTAIN): a caller that retries one reads the object again
 * first, or writes so that a second time changes nothing (an apply, an
 * update with the resourceVersion it read, a create with a fixed name,
 * whose repeat gets KCR_EEXIST).
 *
 * Ownership. Inputs are borrowed for the call. Objects are cJSON trees; an
 * *out tree is new and owned by the caller (cJSON_Delete); out may be NULL
 * to discard the answer, and is NULL after any error.
 *
 * Thread safety: every function may be called from any thread concurrently,
 * except kcr_client_free on the same reference. */
#ifndef KCR_CLIENT_H
#define KCR_CLIENT_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdint.h>

#include "api.h"
#include "buf.h"
#include "config.h"
#include "err.h"
#include "path.h"
#include "typed.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kcr_client kcr_client;

/* Called after every HTTP exchange (for metrics): method, status code (0 on
 * transport failure), duration in seconds (Prometheus' unit). Runs on the
 * requesting thread with no client lock held; must be thread-safe and must
 * not call the client. */
typedef void (*kcr_request_observer)(const char *method, long code, double seconds,
                                     void *ud);

/* What carries the requests and watches (kcr_client_opts.transport). */
enum kcr_transport {
  /* libkcr's own HTTP/1.1 exchanges, on connections curl made, for writes
   * and watches to an https server reached without a proxy; curl transfers
   * for everything else (docs/architecture.md, "The transport"). */
  KCR_TRANSPORT_AUTO = 0,
  /* Every request and watch a curl transfer: slower, and the way to rule
   * the own exchanges out when something looks wrong with them. */
  KCR_TRANSPORT_CURL
};

struct kcr_client_opts {
  /* Required. The client takes a reference of its own (kcr_config_ref):
   * the caller keeps its reference and may free it at once. */
  kcr_config *config;
  const char *user_agent; /* default "kcr/<version>" */
  /* A whole request (not a watch): 0 means 30000, KCR_FOREVER no limit. */
  uint64_t timeout_ms;
  /* Connecting (TCP and TLS): 0 means 10000, KCR_FOREVER no limit of ours
   * (the system's TCP connect timeout still applies). */
  uint64_t connect_timeout_ms;
  int max_retries; /* 429/503 retries: 0 means 3; -1 none */
  /* Cap on one wait before such a retry (a Retry-After, or 1 s, 2 s, 4 s
   * ... without one): 0 means 10000, KCR_FOREVER no cap. */
  uint64_t max_retry_after_ms;
  kcr_request_observer observe; /* optional */
  void *observe_ud;
  /* Largest response body accepted, and largest single watch event, in
   * bytes; default KCR_CLIENT_MAX_RESPONSE (128 MiB). A bigger answer fails
   * with KCR_ETOOLARGE (the message names the request and the limit) and
   * what arrived is discarded. Error bodies (non-2xx) are kept up to
   * 64 KiB; the rest is read and dropped. */
  size_t max_response_bytes;
  /* KCR_TRANSPORT_AUTO (0) or KCR_TRANSPORT_CURL. The environment variable
   * KCR_TRANSPORT, when set, decides over it: "curl" or "auto" (anything
   * else fails kcr_client_new with KCR_ECONFIG), so that a program's users
   * can change it without a rebuild. */
  enum kcr_transport transport;
};
#define KCR_CLIENT_MAX_RESPONSE ((size_t)128 << 20)

/* Makes a client holding one reference (*out, NULL on error). No I/O.
 * Errors: KCR_EINVAL (opts or opts->config missing, an unknown transport),
 * KCR_ECONFIG (the config's server URL cannot be combined with its
 * tls-server-name; KCR_TRANSPORT in the environment is neither "curl" nor
 * "auto"), KCR_ENOMEM. */
KCR_API kcr_err kcr_client_new(const struct kcr_client_opts *opts, kcr_client **out,
                               struct kcr_errinfo *ei);
/* A new reference to c (returns c; NULL is passed through). Every libkcr
 * object that keeps a client (watch, informer, controller, status writer,
 * event recorder, leader elector, manager) holds one, so the order in which
 * they are freed does not matter: the client lives until the last of them
 * is gone. Any thread. */
KCR_API kcr_client *kcr_client_ref(kcr_client *c);
/* Drops the caller's reference; the last one frees the client (its pooled
 * connections and its config reference). NULL is a no-op. Must not race
 * with requests made through this reference. */
KCR_API void kcr_client_free(kcr_client *c);

/* The write fence that keeps a replica that lost its leader lease from
 * writing. When set, gate(ud) is called for every mutating request (POST,
 * PUT, PATCH, DELETE) at the last moment before it is sent - after its
 * connection is ready, just before its first byte goes out - and a request
 * for which it returns false is not sent: the call fails with
 * KCR_ECANCELED, and ei says the write was fenced. Requests marked
 * `ungated` (the lease's own) are never checked. gate runs on the calling
 * thread with no client lock held, must be fast and thread-safe, and must
 * not call the client. NULL removes it. Any thread, any time: when
 * kcr_client_set_write_gate returns, no call of the previous gate is still
 * running, so its ud may be freed. The manager sets it when leader election
 * is on (see manager.h) and closes it (kcr_write_gate_closed) when it is
 * freed. */
typedef bool (*kcr_write_gate)(void *ud);
KCR_API void kcr_client_set_write_gate(kcr_client *c, kcr_write_gate gate, void *ud);
/* A gate that refuses every write. Pure. */
KCR_API bool kcr_write_gate_closed(void *ud);
/* A handle on c whose writes carry scope - a number the caller chooses, in
 * a sharded manager the kcr_shard_hash of the object a reconcile is for -
 * to the write gate, which reads it with kcr_write_scope(): so a gate can
 * allow a write for one object and refuse it for another (kcr/manager.h's
 * ring gate refuses a write for an object whose bucket this replica no
 * longer owns). The handle shares everything else with c - connections,
 * config, gate, observer (set on the handle, they are c's) - and costs one
 * small allocation. Reads and watches through it are c's own. A handle of
 * a handle has the new scope on the same root. *out has one reference,
 * released with kcr_client_free; it holds one on c. Errors: KCR_EINVAL (c
 * or out NULL), KCR_ENOMEM. Any thread. */
KCR_API kcr_err kcr_client_scoped(kcr_client *c, uint64_t scope, kcr_client **out);
/* For a write gate: true, and *scope (if not NULL) set, when the write
 * being gated was made through a scoped handle (kcr_client_scoped), or
 * through a client itself on a thread that runs a sharded controller's
 * reconcile (kcr/controller.h: then the reconcile's scope - so a status
 * writer's writes from a reconcile carry it too); false otherwise.
 * Meaningful only inside a gate call (it reads the calling thread's
 * request). Thread-safe. */
KCR_API bool kcr_write_scope(uint64_t *scope);
/* Replaces the request observer (opts.observe at creation); NULL removes it.
 * Any thread, any time: when it returns no call of the previous observer is
 * still running, so its ud may be freed. Must not be called from an
 * observer or a gate. */
KCR_API void kcr_client_set_observer(kcr_client *c, kcr_request_observer fn, void *ud);
/* The config the client uses: borrowed, valid as long as the caller's
 * reference to c (take one of your own with kcr_config_ref to keep it
 * longer). Any thread. */
KCR_API kcr_config *kcr_client_config(kcr_client *c);

/* A raw request. path starts with '/' and may carry a query string. */
struct kcr_http_request {
  const char *method; /* "GET", "POST", "PUT", "PATCH", "DELETE" */
  const char *path;
  const char *content_type; /* for a body; default application/json */
  const char *accept;       /* the Accept header; NULL: application/json */
  const char *body;
  size_t body_len;
  uint64_t timeout_ms; /* 0: the client's timeout_ms; KCR_FOREVER: no limit */
  bool ungated;        /* not subject to the write gate (leader election's own) */
  int max_retries;     /* 429/503 retries: 0 the client's max_retries, -1 none
                          (the caller backs off itself, e.g. the event
                          recorder: see ei->retry_after_ms) */
};
struct kcr_http_response {
  long code;           /* HTTP status, 0 if none was received */
  struct kcr_buf body; /* caller cleans up */
};
/* Sends one request (with the retries described above). resp is the
 * caller's: its body is replaced, and kept for error answers too (up to
 * 64 KiB); clean it up in every case. ei is written only when the call
 * fails, with what the last attempt got: a call that succeeds after
 * retries leaves ei as it was (the same holds for every call below).
 * Errors: KCR_EINVAL (req or its method missing, a path not starting with
 * '/', a control character in accept or content_type), the request errors
 * (see above). */
KCR_API kcr_err kcr_client_do(kcr_client *c, const struct kcr_http_request *req,
                              struct kcr_http_response *resp, struct kcr_errinfo *ei);

/* GET one object.
 * Errors: KCR_EINVAL (ref names no object, or an invalid segment: see
 * kcr_path), the request errors. */
KCR_API kcr_err kcr_get(kcr_client *c, const struct kcr_ref *ref, cJSON **out,
                        struct kcr_errinfo *ei);
/* kcr_get of the object's metadata alone (Accept KCR_ACCEPT_METADATA): a
 * meta.k8s.io/v1 PartialObjectMetadata (the full object from a server
 * that cannot). For what a controller reads rarely and need not cache -
 * whether a Secret exists, whose it is - without its data on the wire.
 * Errors: those of kcr_get. */
KCR_API kcr_err kcr_get_metadata(kcr_client *c, const struct kcr_ref *ref, cJSON **out,
                                 struct kcr_errinfo *ei);

struct kcr_list_opts {
  const char *label_selector;
  const char *field_selector;
  /* The apiserver's shard selector (ListOptions.shardSelector, alpha
   * feature gate ShardedListAndWatch): "shardRange(object.metadata.uid,
   * '0x0000000000000000', '0x8000000000000000')", terms joined by " || "
   * (kcr_shard_selector, kcr/shard.h, writes one). A server with the gate
   * off ignores it and sends everything; a list's metadata.shardInfo says
   * it was applied (a watch carries no such echo). */
  const char *shard_selector;
  long limit; /* page size; 0 = server default (all) */
  const char *continue_token;
  const char *resource_version;
  const char *resource_version_match; /* "NotOlderThan", "Exact" */
  /* true: each item's metadata.managedFields is left out of the page's text
   * before it is parsed, so the items have none (as
   * kcr_watch_opts.drop_managed_fields does for watch events; the informer
   * sets both unless keep_managed_fields). */
  bool drop_managed_fields;
  /* true: ask for the items' metadata alone (Accept KCR_ACCEPT_METADATA_LIST):
   * a meta.k8s.io/v1 PartialObjectMetadataList whose items are
   * PartialObjectMetadata - apiVersion meta.k8s.io/v1, kind
   * PartialObjectMetadata, metadata - whatever the resource; filtered,
   * paged and selected as a full list. A server that cannot (an aggregated
   * API without the support) answers with the full objects instead. */
  bool metadata_only;
};
/* The Accept headers of metadata-only reads (client-go's metadata client
 * sends the same, protobuf aside): one object or a watch's events, a list;
 * each falls back to plain JSON, the full objects. */
#define KCR_ACCEPT_METADATA                                                              \
  "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json"
#define KCR_ACCEPT_METADATA_LIST                                                         \
  "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"
/* GET one page of a collection (ref->name NULL); opts may be NULL. The
 * List's metadata.continue says whether more pages follow.
 * Errors: KCR_EINVAL (ref names an object, or an invalid segment), the
 * request errors. */
KCR_API kcr_err kcr_list(kcr_client *c, const struct kcr_ref *ref,
                         const struct kcr_list_opts *opts, cJSON **out,
                         struct kcr_errinfo *ei);

/* Called once per item of every page, on the calling thread; items are
 * borrowed for the call. A non-OK return stops the listing and is
 * returned. */
typedef kcr_err (*kcr_list_item_fn)(const cJSON *item, void *ud);
/* Lists all pages of a collection (opts->limit per page, default 500;
 * later pages continue the first page's snapshot) and calls fn per item,
 * in order. *rv (optional out-parameter) gets the list's resourceVersion
 * (for a following watch), owned by the caller (free).
 * A failure part-way: the items of the pages fetched before it were
 * already passed to fn (and whatever fn did with them stands); the call
 * returns the error, *rv is NULL, and the listing must be started again
 * from the beginning to get a consistent whole. A page that says more
 * follow but whose continue token cannot be kept is an error (KCR_ENOMEM),
 * never an early end.
 * Errors: KCR_EINVAL (no fn, ref names an object, an invalid segment),
 * KCR_EGONE (the continue token expired), the request errors, and any code
 * fn returns. */
KCR_API kcr_err kcr_list_each(kcr_client *c, const struct kcr_ref *ref,
                              const struct kcr_list_opts *opts, kcr_list_item_fn fn,
                              void *ud, char **rv, struct kcr_errinfo *ei);

/* Called once per item with its JSON text: compact and well formed, the
 * item as the server wrote it (managedFields included), or as cJSON prints
 * it when the page was not compact; len bytes, not NUL-terminated,
 * borrowed for the call. A non-OK return stops the listing and is
 * returned. */
typedef kcr_err (*kcr_list_text_fn)(const char *text, size_t len, void *ud);
/* kcr_list_each, handing fn each item's text instead of a tree: a page is
 * checked whole in one scan and its items are not parsed (the informer
 * makes its cached objects from the text; kcr_json_parse makes a tree of
 * one when needed). opts->drop_managed_fields does not apply. Same paging,
 * *rv and failure contract as kcr_list_each. Errors: KCR_EINVAL (no fn,
 * ref names an object, an invalid segment), KCR_EGONE (the continue token
 * expired), KCR_EPARSE (a page that is not JSON), the request errors,
 * KCR_ENOMEM, and any code fn returns. */
KCR_API kcr_err kcr_list_each_text(kcr_client *c, const struct kcr_ref *ref,
                                   const struct kcr_list_opts *opts, kcr_list_text_fn fn,
                                   void *ud, char **rv, struct kcr_errinfo *ei);

struct kcr_write_opts {
  const char *field_manager; /* optional: recorded in managedFields */
  bool dry_run;              /* validate and answer, persist nothing */
};
/* POST obj to the collection of ref (ref->name NULL; ns from ref); wo may
 * be NULL.
 * Errors: KCR_EINVAL (ref names an object, an invalid segment, obj NULL),
 * the request errors (KCR_EEXIST when the name is taken). */
KCR_API kcr_err kcr_create(kcr_client *c, const struct kcr_ref *ref, const cJSON *obj,
                           const struct kcr_write_opts *wo, cJSON **out,
                           struct kcr_errinfo *ei);
/* PUT obj to ref (it must carry metadata.resourceVersion: a stale one is
 * KCR_ECONFLICT); wo may be NULL.
 * Errors: KCR_EINVAL (ref names no object, an invalid segment, obj NULL),
 * the request errors. */
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
/* PATCH ref with body[0..len) (JSON text).
 * Errors: KCR_EINVAL (po or body missing, an unknown type, APPLY without a
 * field_manager, ref names no object, an invalid segment), the request
 * errors (KCR_EINVALID for a JSON patch whose test failed; KCR_ECONFLICT
 * for an apply conflict without force). */
KCR_API kcr_err kcr_patch(kcr_client *c, const struct kcr_ref *ref,
                          const struct kcr_patch_opts *po, const char *body, size_t len,
                          cJSON **out, struct kcr_errinfo *ei);

struct kcr_apply_opts {
  const char *field_manager; /* required */
  bool force;                /* take over fields another manager owns */
  bool dry_run;
};
/* Server-side apply of obj (serialised here) to ref:
 *   kcr_apply(c, &ref, obj, &(struct kcr_apply_opts){.field_manager = "hello",
 *             .force = true}, NULL, &ei);
 * Errors: KCR_EINVAL (opts or its field_manager missing, obj NULL, ref
 * names no object, an invalid segment), KCR_ENOMEM, the request errors
 * (KCR_ECONFLICT: fields another manager owns, without force). */
KCR_API kcr_err kcr_apply(kcr_client *c, const struct kcr_ref *ref, const cJSON *obj,
                          const struct kcr_apply_opts *opts, cJSON **out,
                          struct kcr_errinfo *ei);

/* kcr_apply for a caller that needs nothing of the answer but the applied
 * object's new metadata.resourceVersion (to know its own write when an
 * informer shows it): the answer - a whole object, managed fields
 * included - is not parsed into a tree; that one string is found in its
 * text, reading it only up to there (a small fraction of the cost of a
 * tree). *rv gets it, owned by the caller (free); NULL when the answer has
 * no metadata.resourceVersion string (still KCR_OK: the apply was made).
 * Errors: those of kcr_apply (*rv NULL; KCR_EINVAL also for rv NULL), and
 * KCR_EPARSE when the answer's text breaks off before the value. */
KCR_API kcr_err kcr_apply_rv(kcr_client *c, const struct kcr_ref *ref, const cJSON *obj,
                             const struct kcr_apply_opts *opts, char **rv,
                             struct kcr_errinfo *ei);

/* Server-side apply of a typed object (kcr/typed.h, docs/typed-objects.md):
 * *in, of type t, encoded by kcr_typed_encode (the members that are set),
 * sent to the object its metadata names - metadata.name, and
 * metadata.namespace for a namespaced gvr - of resource gvr. What kcr-gen's
 * <kind>_apply calls with the kind's description and resource:
 *   ebd_apply(c, &e, &(struct kcr_apply_opts){.field_manager = "me"},
 *             NULL, NULL, &ei);
 * With result (not NULL), the object as the apiserver answers it (after
 * the apply; managed fields included) is decoded into *result, a t->size
 * struct, as a copy (KCR_TYPED_COPY) in arena a.
 * Errors: KCR_EINVAL (t, gvr, in or opts missing, no field_manager, t has
 * no ObjectMeta metadata, metadata.name unset or empty, metadata.namespace
 * unset or empty for a namespaced gvr, either holding a NUL byte, result
 * without a - ei names which, and nothing is sent), those of
 * kcr_typed_encode (nothing sent), KCR_ENOMEM, the request errors as
 * kcr_apply, and decoding the answer's (the apply was made; *result
 * partly written). Thread safety: as kcr_apply; in is only read. */
KCR_API kcr_err kcr_typed_apply(kcr_client *c, const struct kcr_type *t,
                                const struct kcr_gvr *gvr, const void *in,
                                const struct kcr_apply_opts *opts, struct kcr_arena *a,
                                void *result, struct kcr_errinfo *ei);

/* kcr_typed_apply for a caller that needs nothing of the answer but the
 * applied object's metadata.resourceVersion (to know when its cache holds
 * its own write - kcr_written, kcr/status.h - as kcr_apply_rv does for a
 * tree): the answer is not decoded. *rv is a new string (free it), or NULL
 * when the answer carries no plain-string resourceVersion (still KCR_OK:
 * the apply was made).
 * Errors: those of kcr_typed_apply (*rv NULL; KCR_EINVAL also for rv NULL),
 * and KCR_EPARSE when the answer's text breaks off before the value.
 * Thread safety: as kcr_apply; in is only read. */
KCR_API kcr_err kcr_typed_apply_rv(kcr_client *c, const struct kcr_type *t,
                                   const struct kcr_gvr *gvr, const void *in,
                                   const struct kcr_apply_opts *opts, char **rv,
                                   struct kcr_errinfo *ei);

/* GET one object from the apiserver (not a cache: what kcr_get reads,
 * managedFields included) into *out, a t->size struct of the caller's, as
 * a copy (KCR_TYPED_COPY) in arena a - the answer's text is not kept. For
 * the reads a cache cannot answer: an object no informer holds, or the
 * whole story of one a write found other than the cache said:
 *   struct core_v1_config_map cm;
 *   rc = kcr_typed_get(c, &core_v1_config_map_type,
 *                      &(struct kcr_ref){.gvr = &gvr, .ns = ns, .name = name},
 *                      a, &cm, &ei);
 * Errors: KCR_EINVAL (t, a or out NULL; ref names no object, or an invalid
 * segment), the request errors as kcr_get (KCR_ENOTFOUND: no such
 * object), and those of kcr_typed_decode (an answer of another shape than
 * t: KCR_EPARSE with the JSON Pointer). On error *out may be partly
 * written. Thread safety: as kcr_get; a is the caller's. */
KCR_API kcr_err kcr_typed_get(kcr_client *c, const struct kcr_type *t,
                              const struct kcr_ref *ref, struct kcr_arena *a, void *out,
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
  /* DeleteOptions.gracePeriodSeconds, in the API's unit (it is *int64 in
   * the API too): NULL for the object's default, else the seconds, 0
   * meaning at once: .grace_period_seconds = &(int64_t){0}. */
  const int64_t *grace_period_seconds;
  bool dry_run;
};
/* DELETE ref; o may be NULL (no DeleteOptions body).
 * Errors: KCR_EINVAL (ref names no object, an invalid segment, an unknown
 * propagation), KCR_ENOMEM, the request errors (a failed precondition is
 * KCR_ECONFLICT). */
KCR_API kcr_err kcr_delete(kcr_client *c, const struct kcr_ref *ref,
                           const struct kcr_delete_opts *o, cJSON **out,
                           struct kcr_errinfo *ei);

#ifdef __cplusplus
}
#endif

#endif
