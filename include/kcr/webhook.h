/* kcr/webhook.h - admission webhooks (admission.k8s.io AdmissionReview):
 * validating handlers that allow or deny, and mutating handlers that
 * change the object and are answered with the JSON Patch the library
 * computes (kcr/jsonpatch.h), as controller-runtime's admission package.
 *
 *   static kcr_err validate(kcr_admission *adm, const struct kcr_admission_request *rq,
 *                           void *ud)
 *   {
 *     struct ebd e;   (a typed view of the object: docs/typed-objects.md)
 *     kcr_err rc = ebd_decode(rq->object.s, rq->object.n, 0, kcr_admission_arena(adm),
 *                             &e, kcr_admission_ei(adm));
 *     if(rc)
 *       return rc;                                    (denied, 500, ei's message)
 *     if(!e.spec.has_size)
 *       kcr_admission_deny(adm, 422, "spec.size is required");
 *     return KCR_OK;                                  (allowed unless denied)
 *   }
 *   kcr_manager_add_webhook(m, &(struct kcr_webhook_opts){
 *       .path = "/validate-ebd", .admit = validate}, &ei);
 *
 * The server. Webhooks are served over HTTPS by a kcr_httpd (kcr/httpd.h):
 * the manager's webhook server (kcr_manager_opts.webhook_addr and its
 * certificate files; kcr_manager_add_webhook), or one of your own
 * (kcr_webhook_add). The apiserver calls the path of clientConfig (a
 * Service's path, or the URL's) with POST.
 *
 * A review. The body must be an AdmissionReview of admission.k8s.io/v1 or
 * v1beta1 with a request and its uid, sent as application/json; the answer
 * is an AdmissionReview of the same apiVersion with the request's uid.
 * What cannot be read is answered allowed: false, code 400, with what was
 * wrong (controller-runtime's Errored(400)), never a handler call.
 *
 * The answer. A handler returns KCR_OK and the request is allowed, unless
 * it called kcr_admission_deny (allowed: false, with the code, message and
 * the reason of the code in its Status: the client sees "admission webhook
 * ... denied the request: MESSAGE"). Another return is an error: denied
 * with code 500 and the message the handler put in kcr_admission_ei (else
 * the code's kcr_strerror). Warnings (kcr_admission_warn) go with either
 * answer; kubectl prints them.
 *
 * Mutating webhooks (opts.mutating) may set the object as it should be
 * (kcr_admission_set_object, JSON text: a typed object encoded, say). The
 * answer then carries the JSON Patch from the request's object to that
 * text, base64 in "patch" with patchType JSONPatch - and no patch at all
 * when they are equal, so that the apiserver's reinvocation sees no change.
 * The patch leaves out every "remove" unless opts.remove_fields is set:
 * an object read through a type that lacks some field (a newer CRD
 * version, a field the type leaves out) would otherwise lose it
 * (controller-runtime's CustomDefaulter does the same). A mutating handler
 * must be idempotent - called again on its own result it changes nothing
 * - because the apiserver may call it twice (reinvocationPolicy
 * IfNeeded); test it so (docs/webhooks.md).
 *
 * dryRun. rq->dry_run is true when the request will not be persisted: a
 * handler with side effects must make none then (and the webhook
 * configuration must say sideEffects: None or NoneOnDryRun, or the
 * apiserver refuses dry-run requests).
 *
 * Metrics (in opts.metrics; the manager's registry with
 * kcr_manager_add_webhook), by webhook name:
 *   controller_runtime_webhook_requests_total{webhook,code}  answers, by HTTP code
 *   controller_runtime_webhook_requests_in_flight{webhook}
 *   controller_runtime_webhook_latency_seconds{webhook}      histogram, 100 us .. 10 s
 *   kcr_webhook_rejections_total{webhook,code}               denials, by Status code
 * Logs: a debug line per review (uid, operation, kind, namespace, name,
 * allowed, code, duration); an error line for a handler's error; a
 * warning when the answer came after the caller's timeout (the
 * apiserver's ?timeout= on the URL) - the apiserver has then given up and
 * applied the webhook's failurePolicy.
 *
 * Threads: handlers run on the server's threads, concurrently with
 * themselves (kcr/httpd.h); the arena, the error info and the request are
 * the call's own. Everything the request points to is valid during the
 * call only. */
#ifndef KCR_WEBHOOK_H
#define KCR_WEBHOOK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "api.h"
#include "arena.h"
#include "err.h"
#include "httpd.h"
#include "jsontext.h"
#include "metrics.h"

#ifdef __cplusplus
extern "C" {
#endif

enum kcr_admission_op {
  KCR_ADMISSION_UNKNOWN = 0, /* an operation this library does not know */
  KCR_ADMISSION_CREATE,
  KCR_ADMISSION_UPDATE,
  KCR_ADMISSION_DELETE,
  KCR_ADMISSION_CONNECT
};

/* One AdmissionReview's request. Every kcr_str is borrowed for the call
 * (no string: absent in the review). */
struct kcr_admission_request {
  struct kcr_str uid;
  enum kcr_admission_op operation;
  struct kcr_str operation_text; /* as sent: "CREATE", ... */
  /* The kind of the object (request.kind) and the resource asked for. */
  struct kcr_str group, version, kind;
  struct kcr_str resource_group, resource_version, resource, sub_resource;
  struct kcr_str name, namespace_; /* name: none on a CREATE with generateName */
  /* Who asks (request.userInfo). */
  struct kcr_str username, user_uid;
  const struct kcr_str *groups;
  size_t ngroups;
  /* JSON text of the object (CREATE, UPDATE; DELETE: none), of the object
   * as stored (UPDATE, DELETE) and of the operation's options
   * (CreateOptions, ...); no string when absent or null. */
  struct kcr_str object, old_object, options;
  bool dry_run;
};

/* The answer being made to one review: passed to the handler. */
typedef struct kcr_admission kcr_admission;

/* A handler (see above). adm, rq and what they point to are the call's. */
typedef kcr_err (*kcr_admission_fn)(kcr_admission *adm,
                                    const struct kcr_admission_request *rq, void *ud);

/* Denies the request: code is the HTTP status of the Status returned
 * (0: 403 Forbidden; 400..599), message printf-formatted. The last call
 * counts. Out of memory: the denial stands with a message saying so. */
KCR_API void kcr_admission_deny(kcr_admission *adm, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Adds a warning (printf-formatted; at most 256 bytes are kept, cut at a
 * character's start, as the apiserver truncates longer ones; keep them
 * under 120 characters, as it advises). Errors: KCR_EINVAL (adm NULL), KCR_ENOMEM. */
KCR_API kcr_err kcr_admission_warn(kcr_admission *adm, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Mutating webhooks: the object as it should be, JSON text (copied). The
 * last call counts. Errors: KCR_EINVAL (adm or json NULL; a validating
 * webhook; the request has no object; json not one JSON object: ei says
 * so), KCR_ENOMEM. */
KCR_API kcr_err kcr_admission_set_object(kcr_admission *adm, const char *json, size_t n);
/* Scratch memory for the call, freed after the answer. */
KCR_API struct kcr_arena *kcr_admission_arena(kcr_admission *adm);
/* The call's error info: its message becomes the denial's when the
 * handler returns an error. */
KCR_API struct kcr_errinfo *kcr_admission_ei(kcr_admission *adm);

/* A webhook. */
struct kcr_webhook_opts {
  const char *path;       /* required: the URL path ("/validate-ebd") */
  const char *name;       /* in metrics and logs; default the path */
  kcr_admission_fn admit; /* required */
  void *ud;               /* borrowed for the server's life */
  bool mutating;          /* the handler may set the object (above) */
  bool remove_fields;     /* mutating: keep "remove" operations in the patch */
  kcr_metrics *metrics;   /* referenced; NULL: none */
  size_t max_body;        /* 0: KCR_HTTP_BODY_MAX */
};

/* Serves the webhook on srv at opts->path (kcr_httpd_add_handler), before
 * or after the server starts. opts is read during the call (strings
 * copied). Errors: KCR_EINVAL (no srv, opts, path or admit; a path
 * kcr_httpd_add_handler refuses), KCR_EEXIST (the path is taken),
 * KCR_ENOMEM, the metric registry's errors (KCR_EEXIST: a family of the
 * same name registered otherwise); ei says which. Nothing is left
 * registered on error. Thread safety: any thread. */
KCR_API kcr_err kcr_webhook_add(kcr_httpd *srv, const struct kcr_webhook_opts *opts,
                                struct kcr_errinfo *ei);

/* The answer to one AdmissionReview body (an AdmissionReview, appended to
 * out), exactly as the server sends it with HTTP status 200, for testing
 * handlers without a server or an apiserver. content_type as the request's
 * header (NULL: none, which is refused as the server refuses it). opts as
 * for kcr_webhook_add; no metric is recorded. Errors: KCR_EINVAL (opts,
 * admit, body or out NULL), KCR_ENOMEM (out holds the error: kcr/buf.h). */
KCR_API kcr_err kcr_webhook_review(const struct kcr_webhook_opts *opts, const char *body,
                                   size_t len, const char *content_type,
                                   struct kcr_buf *out);

/* ---- CRD conversion (apiextensions.k8s.io ConversionReview) --------------
 *
 * Hub and spoke, as controller-runtime's conversion webhook: one version is
 * the hub, and every other version (a spoke) has a converter to the hub and
 * one from it; a review asking for version B of an object stored as A runs
 * A -> hub -> B (a step is skipped when A or B is the hub; an object already
 * in B is passed through unchanged). Every object of a review is converted,
 * or the whole review fails with a message naming the object and the step
 * (the apiserver then fails the request that needed it); convertedObjects
 * keep the request's order.
 *
 * A converter gets one object's JSON text and appends the converted
 * object's to out (decode a typed copy of the one version, build the
 * other, encode it). The library then sets apiVersion to the target and
 * kind to the input's, and checks metadata: the apiserver keeps every metadata field of
 * the object but labels and annotations, so a converter may change those two and no other
 * - a field it drops is put back from the input, a field it changes fails the review
 * ("changed metadata.name").
 *
 * Lossless round trips: when a spoke cannot hold everything the hub can (a
 * field added in the hub), converting hub -> spoke would lose it and a
 * client that reads the spoke and writes it back would erase it. The
 * library keeps it: after hub -> spoke it converts the result back, and
 * when that is not the hub object it started from, it stores the hub
 * object's spec and status in the spoke's annotation
 * KCR_CONVERSION_ANNOTATION (unless their text passes 128 KiB - the
 * apiserver allows 256 KiB of annotations - which is logged, and then lost
 * to a client that writes through the spoke); converting that spoke to the
 * hub, the stored
 * values of what the spoke could not hold are put back (a value the client
 * changed through the spoke wins) and the annotation is removed, so it is
 * never seen in the hub version.
 *
 * Threads, ownership: as admission handlers; text handed to a converter
 * is valid during the call. */

#define KCR_CONVERSION_ANNOTATION "conversion.kcr.io/hub-data"

/* One conversion being made: passed to converters. */
typedef struct kcr_conversion kcr_conversion;

/* Converts the object in (JSON text) and appends the result to out.
 * Errors: any kcr_err fails the review, with kcr_conversion_ei's message
 * when the converter set one. */
typedef kcr_err (*kcr_convert_fn)(kcr_conversion *cv, struct kcr_str in,
                                  struct kcr_buf *out, void *ud);

/* A spoke: its version and its two converters. */
struct kcr_conversion_version {
  const char *version;   /* "v1alpha1" */
  kcr_convert_fn to_hub; /* this version -> the hub */
  kcr_convert_fn from_hub;
};

struct kcr_conversion_opts {
  const char *path;  /* required: the URL path ("/convert") */
  const char *name;  /* in metrics and logs; default the path */
  const char *group; /* required: the CRD's group */
  const char *hub;   /* required: the hub version ("v1beta1") */
  /* required: every served version but the hub (read during the call) */
  const struct kcr_conversion_version *versions;
  size_t nversions;
  void *ud;             /* passed to every converter; borrowed */
  kcr_metrics *metrics; /* referenced; NULL: none */
  size_t max_body;      /* 0: KCR_HTTP_BODY_MAX */
};

/* The call's scratch memory and error info (as kcr_admission_arena/_ei). */
KCR_API struct kcr_arena *kcr_conversion_arena(kcr_conversion *cv);
KCR_API struct kcr_errinfo *kcr_conversion_ei(kcr_conversion *cv);

/* Serves the conversion webhook on srv at opts->path. Metrics: those of
 * admission webhooks (requests, in flight, latency) and
 * kcr_webhook_rejections_total{webhook,code="500"} for failed reviews.
 * Errors: KCR_EINVAL (a required option missing, a version listed twice or
 * equal to the hub, a converter missing, a bad path), KCR_EEXIST (the path
 * is taken), KCR_ENOMEM, the metric registry's; ei says which. Thread
 * safety: any thread. */
KCR_API kcr_err kcr_conversion_add(kcr_httpd *srv, const struct kcr_conversion_opts *opts,
                                   struct kcr_errinfo *ei);

/* The answer to one ConversionReview body (a ConversionReview of the
 * request's apiVersion, apiextensions.k8s.io/v1 or v1beta1), appended to
 * out, as the server sends it, for tests without a server. A body that is
 * no review is answered with result Failure and what was wrong.
 * Errors: KCR_EINVAL (opts invalid as for kcr_conversion_add; body or out
 * NULL), KCR_ENOMEM. */
KCR_API kcr_err kcr_conversion_review(const struct kcr_conversion_opts *opts,
                                      const char *body, size_t len,
                                      const char *content_type, struct kcr_buf *out);

#ifdef __cplusplus
}
#endif

#endif
