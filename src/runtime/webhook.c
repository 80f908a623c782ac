/* DESIGN: admission webhooks (kcr/webhook.h) on the HTTP server's POST
 * handlers (kcr_httpd_add_handler).
 *
 * A review is read straight out of the request body with kcr/jsontext.h:
 * the strings of the request borrow the body (or are unescaped into the
 * call's arena), and the object, old object and options are the body's own
 * text, so a handler that decodes a typed view decodes from the text the
 * apiserver sent, nothing copied on the way. The answer is written into
 * the server's output buffer; a mutating handler's object is diffed
 * against the request's (kcr_json_diff) and the patch base64-encoded with
 * OpenSSL's EVP_EncodeBlock, which the library links already.
 *
 * Everything a call makes lives in its arena or its kcr_admission, on the
 * stack of the server thread: nothing is shared between calls but the
 * webhook's options and its metric families, which are set once and then
 * only read (metrics are thread-safe). */
#include <openssl/evp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err-int.h"
#include "kcr/buf.h"
#include "kcr/jsonpatch.h"
#include "kcr/log.h"
#include "kcr/time.h"
#include "kcr/webhook.h"
#include "runtime/httpd-int.h"
#include "runtime/webhook-int.h"

/* The bytes of a warning the apiserver keeps: it cuts longer ones. */
#define WARNING_MAX 256

struct webhook {
  char *path, *name;
  kcr_admission_fn admit;
  void *ud;
  bool mutating, remove_fields;
  struct kcr__whm m;
};

struct warning {
  struct warning *next;
  char *text;
};

struct kcr_admission {
  const struct webhook *wh;
  const struct kcr_admission_request *rq;
  struct kcr_arena arena;
  struct kcr_errinfo ei;
  bool denied;
  int code;
  char *message; /* the denial's, in the arena */
  struct warning *warnings, **wtail;
  const char *object; /* set_object's copy, in the arena */
  size_t object_n;
};

/* What a review came to, for metrics and logs. */
struct outcome {
  bool allowed, patched;
  int code;
};

/* ---- the handler's API ---------------------------------------------------- */

void kcr_admission_deny(kcr_admission *adm, int code, const char *fmt, ...)
{
  va_list ap;
  char *msg = NULL;

  if(!adm)
    return;
  adm->denied = true;
  adm->code = code >= 400 && code <= 599 ? code : 403;
  if(fmt) {
    va_start(ap, fmt);
    if(vasprintf(&msg, fmt, ap) < 0)
      msg = NULL;
    va_end(ap);
  }
  adm->message = msg ? kcr_arena_strdup(&adm->arena, msg) : NULL;
  free(msg);
  if(fmt && !adm->message)
    adm->message = "denied (the message could not be made: out of memory)";
}

kcr_err kcr_admission_warn(kcr_admission *adm, const char *fmt, ...)
{
  struct warning *w;
  va_list ap;
  char *text = NULL;
  int n;

  if(!adm || !fmt)
    return KCR_EINVAL;
  va_start(ap, fmt);
  n = vasprintf(&text, fmt, ap);
  va_end(ap);
  if(n < 0)
    return KCR_ENOMEM;
  if(n > WARNING_MAX) { /* at a character's start, not inside one */
    size_t cut = WARNING_MAX;
    while(cut && ((unsigned char)text[cut] & 0xC0) == 0x80)
      cut--;
    text[cut] = '\0';
  }
  w = kcr_arena_alloc(&adm->arena, sizeof(*w));
  if(w && !(w->text = kcr_arena_strdup(&adm->arena, text)))
    w = NULL;
  free(text);
  if(!w)
    return KCR_ENOMEM;
  w->next = NULL;
  *adm->wtail = w;
  adm->wtail = &w->next;
  return KCR_OK;
}

kcr_err kcr_admission_set_object(kcr_admission *adm, const char *json, size_t n)
{
  struct kcr_jv v;
  char *copy;

  if(!adm || !json)
    return KCR_EINVAL;
  if(!adm->wh->mutating)
    return kcr_errinfo_set(&adm->ei, KCR_EINVAL,
                           "webhook %s: a validating webhook cannot change the object",
                           adm->wh->name);
  if(!adm->rq->object.s)
    return kcr_errinfo_set(&adm->ei, KCR_EINVAL,
                           "webhook %s: the request has no object to change",
                           adm->wh->name);
  if(kcr_json_check(json, n, &v) || kcr_jv_type(v) != KCR_JT_OBJECT)
    return kcr_errinfo_set(&adm->ei, KCR_EINVAL,
                           "webhook %s: the object set is not a JSON object",
                           adm->wh->name);
  if(!(copy = kcr_arena_alloc(&adm->arena, v.n + 1)))
    return KCR_ENOMEM;
  memcpy(copy, v.at, v.n);
  copy[v.n] = '\0';
  adm->object = copy;
  adm->object_n = v.n;
  return KCR_OK;
}

struct kcr_arena *kcr_admission_arena(kcr_admission *adm)
{
  return adm ? &adm->arena : NULL;
}

struct kcr_errinfo *kcr_admission_ei(kcr_admission *adm) { return adm ? &adm->ei : NULL; }

/* ---- reading a review ----------------------------------------------------- */

/* Reading stops at the first failure: KCR_EPARSE (a member of the wrong
 * type: the review is answered 400) or KCR_ENOMEM (500). */

/* A string member into *out; a value of another type is refused. */
static kcr_err read_str(struct kcr_jv v, struct kcr_arena *a, struct kcr_str *out)
{
  if(kcr_jv_type(v) == KCR_JT_NULL)
    return KCR_OK;
  return kcr_jv_string(v, a, 0, out);
}

/* Reads {"group":..,"version":..,KEY:..} into g, ver, k. */
static kcr_err read_gvk(struct kcr_jv v, struct kcr_arena *a, const char *key,
                        struct kcr_str *g, struct kcr_str *ver, struct kcr_str *k)
{
  struct kcr_jiter it;
  struct kcr_jv name, val;
  kcr_err rc = KCR_OK;

  if(kcr_jv_type(v) == KCR_JT_NULL)
    return KCR_OK;
  if(kcr_jv_type(v) != KCR_JT_OBJECT || !kcr_jiter_init(&it, v))
    return KCR_EPARSE;
  while(!rc && kcr_jiter_next(&it, &name, &val) == 1) {
    if(kcr_jv_str_is(name, "group", 5))
      rc = read_str(val, a, g);
    else if(kcr_jv_str_is(name, "version", 7))
      rc = read_str(val, a, ver);
    else if(kcr_jv_str_is(name, key, strlen(key)))
      rc = read_str(val, a, k);
  }
  return rc;
}

static kcr_err read_groups(struct kcr_jv v, struct kcr_arena *a,
                           struct kcr_admission_request *rq)
{
  struct kcr_jiter it;
  struct kcr_jv g;
  struct kcr_str *groups;
  size_t n = 0;
  kcr_err rc = KCR_OK;

  if(kcr_jv_type(v) == KCR_JT_NULL)
    return KCR_OK;
  if(kcr_jv_type(v) != KCR_JT_ARRAY || !kcr_jiter_init(&it, v))
    return KCR_EPARSE;
  while(kcr_jiter_next(&it, NULL, &g) == 1)
    n++;
  if(!n)
    return KCR_OK;
  if(!(groups = kcr_arena_alloc(a, n * sizeof(*groups))))
    return KCR_ENOMEM;
  memset(groups, 0, n * sizeof(*groups));
  kcr_jiter_init(&it, v);
  for(size_t i = 0; !rc && i < n && kcr_jiter_next(&it, NULL, &g) == 1; i++)
    rc = kcr_jv_string(g, a, 0, &groups[i]);
  rq->groups = groups;
  rq->ngroups = n;
  return rc;
}

static kcr_err read_user(struct kcr_jv v, struct kcr_arena *a,
                         struct kcr_admission_request *rq)
{
  struct kcr_jiter it;
  struct kcr_jv name, val;
  kcr_err rc = KCR_OK;

  if(kcr_jv_type(v) == KCR_JT_NULL)
    return KCR_OK;
  if(kcr_jv_type(v) != KCR_JT_OBJECT || !kcr_jiter_init(&it, v))
    return KCR_EPARSE;
  while(!rc && kcr_jiter_next(&it, &name, &val) == 1) {
    if(kcr_jv_str_is(name, "username", 8))
      rc = read_str(val, a, &rq->username);
    else if(kcr_jv_str_is(name, "uid", 3))
      rc = read_str(val, a, &rq->user_uid);
    else if(kcr_jv_str_is(name, "groups", 6))
      rc = read_groups(val, a, rq);
  }
  return rc;
}

/* A value's text, none for null. */
static struct kcr_str raw(struct kcr_jv v)
{
  return kcr_jv_type(v) == KCR_JT_NULL ? (struct kcr_str){0}
                                       : (struct kcr_str){.s = v.at, .n = v.n};
}

static enum kcr_admission_op op_of(struct kcr_str s)
{
  static const char *const ops[] = {"CREATE", "UPDATE", "DELETE", "CONNECT"};
  for(size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++)
    if(kcr_str_eq(s, ops[i]))
      return (enum kcr_admission_op)(i + 1);
  return KCR_ADMISSION_UNKNOWN;
}

static bool is_object_or_none(struct kcr_str s)
{
  return !s.s || kcr_jv_type((struct kcr_jv){.at = s.s, .n = s.n}) == KCR_JT_OBJECT;
}

/* Reads the review's request member; *why says what was wrong. */
static kcr_err read_request(struct kcr_jv v, struct kcr_arena *a,
                            struct kcr_admission_request *rq, const char **why)
{
  struct kcr_jiter it;
  struct kcr_jv name, val;
  kcr_err rc = KCR_OK;

  *why = "request is not an object";
  if(kcr_jv_type(v) != KCR_JT_OBJECT || !kcr_jiter_init(&it, v))
    return KCR_EPARSE;
  while(!rc && kcr_jiter_next(&it, &name, &val) == 1) {
    if(kcr_jv_str_is(name, "uid", 3))
      rc = read_str(val, a, &rq->uid);
    else if(kcr_jv_str_is(name, "kind", 4))
      rc = read_gvk(val, a, "kind", &rq->group, &rq->version, &rq->kind);
    else if(kcr_jv_str_is(name, "resource", 8))
      rc = read_gvk(val, a, "resource", &rq->resource_group, &rq->resource_version,
                    &rq->resource);
    else if(kcr_jv_str_is(name, "subResource", 11))
      rc = read_str(val, a, &rq->sub_resource);
    else if(kcr_jv_str_is(name, "name", 4))
      rc = read_str(val, a, &rq->name);
    else if(kcr_jv_str_is(name, "namespace", 9))
      rc = read_str(val, a, &rq->namespace_);
    else if(kcr_jv_str_is(name, "operation", 9))
      rc = read_str(val, a, &rq->operation_text);
    else if(kcr_jv_str_is(name, "userInfo", 8))
      rc = read_user(val, a, rq);
    else if(kcr_jv_str_is(name, "object", 6))
      rq->object = raw(val);
    else if(kcr_jv_str_is(name, "oldObject", 9))
      rq->old_object = raw(val);
    else if(kcr_jv_str_is(name, "options", 7))
      rq->options = raw(val);
    else if(kcr_jv_str_is(name, "dryRun", 6) && kcr_jv_type(val) != KCR_JT_NULL)
      rc = kcr_jv_bool(val, &rq->dry_run);
  }
  *why = rc == KCR_ENOMEM ? "out of memory reading the review"
                          : "request has a member of the wrong type";
  if(rc)
    return rc;
  *why = "request has no uid";
  if(!rq->uid.n)
    return KCR_EPARSE;
  rq->operation = op_of(rq->operation_text);
  *why = "request.object or request.oldObject is not an object";
  if(!is_object_or_none(rq->object) || !is_object_or_none(rq->old_object))
    return KCR_EPARSE;
  *why = NULL;
  return KCR_OK;
}

/* Reads body into api (the review's apiVersion) and rq; on error *why
 * says what was wrong: KCR_EPARSE (no review: 400), KCR_ENOMEM. */
static kcr_err read_review(const char *body, size_t len, const char *ctype,
                           struct kcr_arena *a, struct kcr_str *api,
                           struct kcr_admission_request *rq, const char **why)
{
  struct kcr_jiter it;
  struct kcr_jv doc, name, val, req = {0};
  struct kcr_str kind = {0};
  kcr_err rc = KCR_OK;

  *why = "the Content-Type is not application/json";
  if(!kcr__wh_json_content(ctype))
    return KCR_EPARSE;
  *why = "the request body is empty";
  if(!len)
    return KCR_EPARSE;
  *why = "the request body is not a JSON object";
  if(kcr_json_check(body, len, &doc) || kcr_jv_type(doc) != KCR_JT_OBJECT)
    return KCR_EPARSE;
  kcr_jiter_init(&it, doc);
  while(!rc && kcr_jiter_next(&it, &name, &val) == 1) {
    if(kcr_jv_str_is(name, "apiVersion", 10))
      rc = read_str(val, a, api);
    else if(kcr_jv_str_is(name, "kind", 4))
      rc = read_str(val, a, &kind);
    else if(kcr_jv_str_is(name, "request", 7))
      req = val;
  }
  *why = "out of memory reading the review";
  if(rc == KCR_ENOMEM)
    return rc;
  *why = "not an AdmissionReview of admission.k8s.io/v1 or v1beta1";
  if(!kcr_str_eq(*api, "admission.k8s.io/v1") &&
     !kcr_str_eq(*api, "admission.k8s.io/v1beta1")) {
    *api = kcr_str_c("admission.k8s.io/v1");
    return KCR_EPARSE;
  }
  *why = "the kind is not AdmissionReview";
  if(!kcr_str_eq(kind, "AdmissionReview"))
    return KCR_EPARSE;
  *why = "the review has no request";
  if(!req.n)
    return KCR_EPARSE;
  return read_request(req, a, rq, why);
}

/* ---- answering ------------------------------------------------------------ */

static const char *reason_of(int code)
{
  switch(code) {
  case 400: return "BadRequest";
  case 401: return "Unauthorized";
  case 403: return "Forbidden";
  case 404: return "NotFound";
  case 405: return "MethodNotAllowed";
  case 409: return "Conflict";
  case 410: return "Gone";
  case 422: return "Invalid";
  case 429: return "TooManyRequests";
  case 500: return "InternalError";
  case 503: return "ServiceUnavailable";
  case 504: return "Timeout";
  default: return NULL;
  }
}

/* Appends the AdmissionReview answer. patch: the JSON Patch or NULL. */
static void write_answer(struct kcr_buf *out, struct kcr_str api, struct kcr_str uid,
                         const struct kcr_admission *adm, int code, const char *message,
                         const struct kcr_buf *patch)
{
  bool allowed = !code;

  kcr_buf_puts(out, "{\"apiVersion\":");
  kcr_json_put_str(out, api);
  kcr_buf_puts(out, ",\"kind\":\"AdmissionReview\",\"response\":{\"uid\":");
  kcr_json_put_str(out, uid);
  kcr_buf_puts(out, allowed ? ",\"allowed\":true" : ",\"allowed\":false");
  if(!allowed) {
    const char *reason = reason_of(code);
    kcr_buf_printf(out, ",\"status\":{\"metadata\":{},\"status\":\"Failure\",\"code\":%d",
                   code);
    if(message) {
      kcr_buf_puts(out, ",\"message\":");
      kcr_json_put_str(out, kcr_str_c(message));
    }
    if(reason)
      kcr_buf_printf(out, ",\"reason\":\"%s\"", reason);
    kcr_buf_puts(out, "}");
  }
  if(patch && patch->len) {
    size_t n = 4 * ((patch->len + 2) / 3);
    if(!kcr_buf_puts(out, ",\"patchType\":\"JSONPatch\",\"patch\":\"") &&
       !kcr_buf_reserve(out, n + 1)) {
      EVP_EncodeBlock((unsigned char *)out->ptr + out->len, (unsigned char *)patch->ptr,
                      (int)patch->len);
      out->len += n;
      out->ptr[out->len] = '\0';
    }
    kcr_buf_puts(out, "\"");
  }
  if(adm && adm->warnings) {
    kcr_buf_puts(out, ",\"warnings\":[");
    for(const struct warning *w = adm->warnings; w; w = w->next) {
      kcr_json_put_str(out, kcr_str_c(w->text));
      if(w->next)
        kcr_buf_puts(out, ",");
    }
    kcr_buf_puts(out, "]");
  }
  kcr_buf_puts(out, "}}");
}

/* Answers one review into out; *oc says how. */
static void review(const struct webhook *wh, const char *body, size_t len,
                   const char *ctype, struct kcr_buf *out, struct outcome *oc)
{
  struct kcr_admission_request rq = {0};
  kcr_admission adm = {.wh = wh, .rq = &rq, .ei = KCR_ERRINFO_INIT};
  struct kcr_buf patch = KCR_BUF_INIT;
  struct kcr_str api = {0};
  const char *why, *message = NULL;
  size_t nops = 0;
  int code = 0;
  kcr_err rc;

  adm.wtail = &adm.warnings;
  *oc = (struct outcome){0};
  rc = read_review(body, len, ctype, &adm.arena, &api, &rq, &why);
  if(!api.n)
    api = kcr_str_c("admission.k8s.io/v1");
  if(rc) {
    code = rc == KCR_ENOMEM ? 500 : 400;
    message = why;
    goto answer;
  }
  rc = wh->admit(&adm, &rq, wh->ud);
  if(rc) {
    code = 500;
    message = adm.ei.message ? adm.ei.message : kcr_strerror(rc);
    KCR_LOG(KCR_LOG_ERROR, "webhook: handler failed", KCR_S("webhook", wh->name),
            KCR_S("uid", rq.uid.s
                             ? kcr_arena_printf(&adm.arena, "%.*s", KCR_STR_ARG(rq.uid))
                             : ""),
            KCR_S("error", message));
  } else if(adm.denied) {
    code = adm.code;
    message = adm.message;
  } else if(adm.object) {
    rc = kcr_json_diff(rq.object.s, rq.object.n, adm.object, adm.object_n,
                       wh->remove_fields ? 0 : KCR_JSON_DIFF_NO_REMOVE, &patch, &nops,
                       &adm.ei);
    if(rc) {
      code = 500;
      message = adm.ei.message ? adm.ei.message : kcr_strerror(rc);
    } else if(!nops) {
      kcr_buf_reset(&patch); /* equal: no patch at all */
    }
  }
answer:
  write_answer(out, api, rq.uid, &adm, code, message, code ? NULL : &patch);
  oc->allowed = !code;
  oc->code = code;
  oc->patched = !code && nops;
  if(kcr_log_enabled(KCR_LOG_DEBUG))
    KCR_LOG(KCR_LOG_DEBUG, "webhook: reviewed", KCR_S("webhook", wh->name),
            KCR_S("uid", kcr_arena_printf(&adm.arena, "%.*s", KCR_STR_ARG(rq.uid))),
            KCR_S("operation",
                  kcr_arena_printf(&adm.arena, "%.*s", KCR_STR_ARG(rq.operation_text))),
            KCR_S("kind", kcr_arena_printf(&adm.arena, "%.*s", KCR_STR_ARG(rq.kind))),
            KCR_S("namespace",
                  kcr_arena_printf(&adm.arena, "%.*s", KCR_STR_ARG(rq.namespace_))),
            KCR_S("name", kcr_arena_printf(&adm.arena, "%.*s", KCR_STR_ARG(rq.name))),
            KCR_B("allowed", !code), KCR_I("code", code), KCR_B("patched", oc->patched),
            KCR_B("dryRun", rq.dry_run));
  kcr_buf_cleanup(&patch);
  kcr_errinfo_cleanup(&adm.ei);
  kcr_arena_cleanup(&adm.arena);
}

/* ---- serving -------------------------------------------------------------- */

static int serve(void *ud, const struct kcr_httpd_request *r, struct kcr_buf *out,
                 const char **ctype)
{
  const struct webhook *wh = ud;
  struct kcr__whcall call;
  struct outcome oc;

  kcr__whm_begin(&wh->m, wh->name, &call);
  review(wh, r->body, r->len, r->content_type, out, &oc);
  kcr__whm_end(&wh->m, &call, r, oc.allowed ? 0 : oc.code);
  *ctype = "application/json";
  return 200;
}

static void webhook_free(void *p)
{
  struct webhook *wh = p;

  if(!wh)
    return;
  kcr__whm_cleanup(&wh->m);
  free(wh->path);
  free(wh->name);
  free(wh);
}

/* ---- shared with conversion.c (webhook-int.h) ----------------------------- */

static const double latency_buckets[] = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005,
                                         0.01,   0.025,   0.05,   0.1,   0.25,   0.5,
                                         1,      2.5,     5,      10};

kcr_err kcr__whm_init(struct kcr__whm *m, kcr_metrics *reg, const char *name,
                      struct kcr_errinfo *ei)
{
  static const char *const by_name[] = {"webhook", NULL};
  static const char *const by_code[] = {"webhook", "code", NULL};
  kcr_err rc;

  memset(m, 0, sizeof(*m));
  if(!(m->reg = kcr_metrics_ref(reg)))
    return KCR_OK;
  if((rc = kcr_metric_counter(
          reg,
          &(struct kcr_metric_opts){.name = "controller_runtime_webhook_requests_total",
                                    .help = "Total number of admission requests by HTTP "
                                            "status code.",
                                    .label_names = by_code},
          &m->req, ei)) ||
     (rc = kcr_metric_gauge(reg,
                            &(struct kcr_metric_opts){
                                .name = "controller_runtime_webhook_requests_in_flight",
                                .help = "Current number of admission requests being "
                                        "served.",
                                .label_names = by_name},
                            &m->inflight, ei)) ||
     (rc = kcr_metric_histogram(
          reg,
          &(struct kcr_metric_opts){
              .name = "controller_runtime_webhook_latency_seconds",
              .help = "Histogram of the latency of processing admission requests",
              .label_names = by_name,
              .bounds = latency_buckets,
              .nbounds = sizeof(latency_buckets) / sizeof(latency_buckets[0])},
          &m->lat, ei)) ||
     (rc = kcr_metric_counter(reg,
                              &(struct kcr_metric_opts){
                                  .name = "kcr_webhook_rejections_total",
                                  .help = "Admission requests denied, by the code of the "
                                          "Status returned.",
                                  .label_names = by_code},
                              &m->rej, ei)))
    return rc;
  kcr_metric_set(m->inflight, (const char *[]){name, NULL}, 0);
  return KCR_OK;
}

void kcr__whm_cleanup(struct kcr__whm *m)
{
  kcr_metrics_free(m->reg);
  memset(m, 0, sizeof(*m));
}

void kcr__whm_begin(const struct kcr__whm *m, const char *name, struct kcr__whcall *c)
{
  c->name = name;
  c->t0 = kcr_time_mono_ns();
  kcr_metric_inc(m->inflight, (const char *[]){name, NULL}, 1);
}

void kcr__whm_end(const struct kcr__whm *m, const struct kcr__whcall *c,
                  const struct kcr_httpd_request *r, int rejected_code)
{
  const char *const who[] = {c->name, NULL};
  const char *timeout = kcr_httpd_request_arg(r, "timeout");
  uint64_t ns = kcr_time_mono_ns() - c->t0, limit_ms;
  char code[16];

  kcr_metric_inc(m->inflight, who, -1);
  kcr_metric_observe(m->lat, who, (double)ns / 1e9);
  kcr_metric_inc(m->req, (const char *[]){c->name, "200"}, 1);
  if(rejected_code) {
    snprintf(code, sizeof(code), "%d", rejected_code);
    kcr_metric_inc(m->rej, (const char *[]){c->name, code}, 1);
  }
  if(timeout && !kcr_duration_parse(timeout, &limit_ms) && ns / 1000000 > limit_ms)
    KCR_LOG(KCR_LOG_WARN,
            "webhook: answered after the caller's timeout (its failurePolicy applied)",
            KCR_S("webhook", c->name), KCR_I("tookMs", ns / 1000000),
            KCR_S("timeout", timeout));
}

bool kcr__wh_json_content(const char *ct)
{
  size_t n = strlen("application/json");
  return ct && !strncasecmp(ct, "application/json", n) &&
         (!ct[n] || ct[n] == ';' || ct[n] == ' ');
}

/* A webhook from opts, without metric families. */
static kcr_err webhook_new(const struct kcr_webhook_opts *o, struct webhook **out,
                           struct kcr_errinfo *ei)
{
  struct webhook *wh;

  *out = NULL;
  if(!o || !o->path || !o->admit)
    return kcr_errinfo_set(ei, KCR_EINVAL,
                           "webhook: a path and an admit function are "
                           "required");
  if(!(wh = calloc(1, sizeof(*wh))) || !(wh->path = strdup(o->path)) ||
     !(wh->name = strdup(o->name && *o->name ? o->name : o->path))) {
    webhook_free(wh);
    return KCR_ENOMEM;
  }
  wh->admit = o->admit;
  wh->ud = o->ud;
  wh->mutating = o->mutating;
  wh->remove_fields = o->remove_fields;
  *out = wh;
  return KCR_OK;
}

kcr_err kcr_webhook_add(kcr_httpd *srv, const struct kcr_webhook_opts *opts,
                        struct kcr_errinfo *ei)
{
  struct webhook *wh;
  kcr_err rc;

  if(!srv)
    return kcr_errinfo_set(ei, KCR_EINVAL, "webhook: no server");
  if((rc = webhook_new(opts, &wh, ei)))
    return rc;
  if((rc = kcr__whm_init(&wh->m, opts->metrics, wh->name, ei)))
    goto fail;
  rc = kcr__httpd_add_handler_owned(srv, wh->path, opts->max_body, serve, wh,
                                    webhook_free);
  if(rc == KCR_EINVAL)
    kcr_errinfo_set(ei, rc,
                    "webhook %s: bad path (want /..., no space, '?' or '#', "
                    "not /metrics, /healthz or /readyz)",
                    opts->path);
  else if(rc == KCR_EEXIST)
    kcr_errinfo_set(ei, rc, "webhook %s: the path is served already", opts->path);
  if(rc)
    goto fail;
  KCR_LOG(KCR_LOG_INFO, "webhook: registered", KCR_S("webhook", wh->name),
          KCR_S("path", wh->path), KCR_B("mutating", wh->mutating));
  return KCR_OK;
fail:
  webhook_free(wh);
  return rc;
}

kcr_err kcr_webhook_review(const struct kcr_webhook_opts *opts, const char *body,
                           size_t len, const char *content_type, struct kcr_buf *out)
{
  struct webhook *wh;
  struct outcome oc;
  kcr_err rc;

  if(!body || !out)
    return KCR_EINVAL;
  if((rc = webhook_new(opts, &wh, NULL)))
    return rc;
  review(wh, body, len, content_type, out, &oc);
  webhook_free(wh);
  return kcr_buf_err(out);
}
