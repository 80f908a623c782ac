/* DESIGN: error codes and the details that come with them.
 * The code table is one X-macro list (include/kcr/err.h) that generates the
 * enum, kcr_strerror() and kcr_err_name(). kcr_errinfo keeps the server's
 * Status verbatim so callers can show users exactly what the API said. */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/assert-int.h"
#include "core/err-int.h"
#include "kcr/err.h"
#include "kcr/json.h"

const char *kcr_strerror(kcr_err e)
{
  switch(e) {
#define XX(name, num, msg)                                                               \
  case KCR_##name: return msg;
    KCR_ERR_MAP(XX)
#undef XX
  }
  return "unknown error";
}

const char *kcr_err_name(kcr_err e)
{
  switch(e) {
#define XX(name, num, msg)                                                               \
  case KCR_##name: return #name;
    KCR_ERR_MAP(XX)
#undef XX
  }
  return "EUNKNOWN";
}

void kcr_errinfo_cleanup(struct kcr_errinfo *ei)
{
  if(!ei)
    return;
  free(ei->status);
  free(ei->reason);
  free(ei->message);
  free(ei->body);
  cJSON_Delete(ei->details);
  memset(ei, 0, sizeof(*ei));
}

kcr_err kcr_errinfo_set(struct kcr_errinfo *ei, kcr_err rc, const char *fmt, ...)
{
  va_list ap;
  char *msg = NULL;
  int n;

  if(!ei)
    return rc;
  kcr_errinfo_cleanup(ei);
  va_start(ap, fmt);
  n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if(n >= 0 && (msg = malloc((size_t)n + 1))) {
    va_start(ap, fmt);
    vsnprintf(msg, (size_t)n + 1, fmt, ap);
    va_end(ap);
  }
  ei->message = msg;
  return rc;
}

static kcr_err code_to_err(long code, const char *reason)
{
  if(code >= 200 && code < 300)
    return KCR_OK;
  switch(code) {
  case 400: return KCR_EBADREQUEST;
  case 401: return KCR_EUNAUTHORIZED;
  case 403: return KCR_EFORBIDDEN;
  case 404: return KCR_ENOTFOUND;
  case 409:
    return reason && !strcmp(reason, "AlreadyExists") ? KCR_EEXIST : KCR_ECONFLICT;
  case 410: return KCR_EGONE;
  case 415: return KCR_EUNSUPPORTED;
  case 422: return KCR_EINVALID;
  case 429: return KCR_ETOOMANY;
  case 503: return KCR_EUNAVAILABLE;
  default: break;
  }
  return code >= 500 && code < 600 ? KCR_ESERVER : KCR_EHTTP;
}

static char *dup_str_field(const cJSON *o, const char *key)
{
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
  return cJSON_IsString(v) && v->valuestring ? strdup(v->valuestring) : NULL;
}

/* Status.code (an int32 in metav1.Status); 0 - as absent - when it is not
 * an integer that fits. */
static int status_code(const cJSON *st)
{
  int64_t v;
  if(kcr_json_get_int(cJSON_GetObjectItemCaseSensitive(st, "code"), &v) != KCR_OK ||
     v < INT32_MIN || v > INT32_MAX)
    return 0;
  return (int)v;
}

kcr_err kcr_errinfo_from_status(struct kcr_errinfo *ei, const cJSON *st)
{
  const cJSON *reason = cJSON_GetObjectItemCaseSensitive(st, "reason");
  int c = status_code(st);
  kcr_err rc = code_to_err(c, cJSON_IsString(reason) ? reason->valuestring : NULL);

  /* Watch ERROR events may carry 410 as reason Expired/Gone with code 0. */
  if(c == 0 && cJSON_IsString(reason) &&
     (!strcmp(reason->valuestring, "Expired") || !strcmp(reason->valuestring, "Gone")))
    rc = KCR_EGONE;
  if(!ei)
    return rc;
  kcr_errinfo_cleanup(ei);
  ei->code = c;
  ei->status = dup_str_field(st, "status");
  ei->reason = dup_str_field(st, "reason");
  ei->message = dup_str_field(st, "message");
  ei->details = cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(st, "details"), 1);
  return rc;
}

kcr_err kcr_errinfo_from_http(struct kcr_errinfo *ei, long code, const char *body,
                              size_t len)
{
  cJSON *st = NULL;
  const cJSON *kind;
  kcr_err rc;

  if(code >= 200 && code < 300)
    return KCR_OK;
  /* Not JSON: st stays NULL. Out of memory reading a Status is said as
   * such: classifying by the HTTP code alone would turn one answer into
   * another (409 AlreadyExists into a conflict). */
  if(body && len && kcr_json_parse(body, len, &st, NULL) == KCR_ENOMEM) {
    if(ei) {
      kcr_errinfo_set(ei, KCR_ENOMEM, "HTTP %ld: out of memory reading the answer", code);
      ei->code = (int)code;
    }
    return KCR_ENOMEM;
  }
  kind = cJSON_GetObjectItemCaseSensitive(st, "kind");
  if(cJSON_IsString(kind) && !strcmp(kind->valuestring, "Status")) {
    const cJSON *reason = cJSON_GetObjectItemCaseSensitive(st, "reason");
    rc = kcr_errinfo_from_status(ei, st);
    /* The HTTP code wins when the Status carries none. */
    if(ei && !ei->code)
      ei->code = (int)code;
    /* The reason is read from the body, never from ei: the answer must not
     * depend on whether ei was given or its copy of the reason failed. */
    if(rc == KCR_OK || rc == KCR_EHTTP)
      rc = code_to_err(code, cJSON_IsString(reason) ? reason->valuestring : NULL);
    cJSON_Delete(st);
    return rc;
  }
  cJSON_Delete(st);
  rc = code_to_err(code, NULL);
  if(ei) {
    size_t keep = len > 4096 ? 4096 : len;
    kcr_errinfo_set(ei, rc, "HTTP %ld with a body that is not a Status", code);
    ei->code = (int)code;
    if(body && (ei->body = malloc(keep + 1))) {
      memcpy(ei->body, body, keep);
      ei->body[keep] = '\0';
    }
  }
  return rc;
}

bool kcr_errinfo_has_cause(const struct kcr_errinfo *ei, const char *type,
                           const char *field)
{
  const cJSON *causes =
                  ei ? cJSON_GetObjectItemCaseSensitive(ei->details, "causes") : NULL,
              *c;

  cJSON_ArrayForEach(c, causes)
  {
    const cJSON *r = cJSON_GetObjectItemCaseSensitive(c, "reason"),
                *f = cJSON_GetObjectItemCaseSensitive(c, "field");
    if((!type || (cJSON_IsString(r) && !strcmp(r->valuestring, type))) &&
       (!field || (cJSON_IsString(f) && !strcmp(f->valuestring, field))))
      return true;
  }
  return false;
}

_Noreturn void kcr__assert_fail(const char *cond, const char *file, int line,
                                const char *func)
{
  fprintf(stderr, "libkcr: assertion failed: %s (%s:%d %s)\n", cond, file, line, func);
  abort();
}

const char *kcr__errstr(int err, char *buf, size_t size)
{
#if defined(__GLIBC__) && defined(_GNU_SOURCE)
  return strerror_r(err, buf, size);
#else
  if(strerror_r(err, buf, size))
    snprintf(buf, size, "error %d", err);
  return buf;
#endif
}
