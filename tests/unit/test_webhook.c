/* kcr/webhook.h without a server: AdmissionReviews answered by
 * kcr_webhook_review - what a handler sees of the request, allow and
 * deny with their Status, handler errors, warnings, the JSON Patch of a
 * mutating handler (checked by applying it with the reference applier),
 * no patch when nothing changed, removes only when asked, reviews that
 * cannot be read - and allocation failures. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kcr/base64.h"
#include "kcr/json.h"
#include "kcr/webhook.h"
#include "tfail.h"
#include "tjsonpatch.h"

#define OBJ                                                                              \
  "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"c\","          \
  "\"namespace\":\"n\",\"labels\":{\"keep\":\"1\"}},\"data\":{\"k\":\"caf\\u00e9\","     \
  "\"n\":\"9007199254740993\"}}"

/* An AdmissionReview of apiVersion api with request members req (after
 * the uid), caller frees. */
static char *review_text(const char *api, const char *req)
{
  char *s;
  assert_true(asprintf(&s,
                       "{\"apiVersion\":\"%s\",\"kind\":\"AdmissionReview\",\"request\":{"
                       "\"uid\":\"u-1\",%s}}",
                       api, req) > 0);
  return s;
}

static char *create_review(const char *obj)
{
  char *req, *s;
  assert_true(
      asprintf(&req,
               "\"kind\":{\"group\":\"\",\"version\":\"v1\",\"kind\":\"ConfigMap\"},"
               "\"resource\":{\"group\":\"\",\"version\":\"v1\",\"resource\":"
               "\"configmaps\"},\"name\":\"c\",\"namespace\":\"n\","
               "\"operation\":\"CREATE\",\"userInfo\":{\"username\":\"alice\","
               "\"uid\":\"a-1\",\"groups\":[\"system:authenticated\",\"dev\"]},"
               "\"object\":%s,\"oldObject\":null,\"dryRun\":true,"
               "\"options\":{\"kind\":\"CreateOptions\"}",
               obj) > 0);
  s = review_text("admission.k8s.io/v1", req);
  free(req);
  return s;
}

/* The answer to body from a webhook of opts, parsed; asserts it is an
 * AdmissionReview with a response. */
static cJSON *answer(const struct kcr_webhook_opts *o, const char *body,
                     const char *ctype)
{
  struct kcr_buf out = KCR_BUF_INIT;
  cJSON *t = NULL;

  assert_int_equal(KCR_OK, kcr_webhook_review(o, body, strlen(body), ctype, &out));
  assert_int_equal(KCR_OK, kcr_json_parse(out.ptr, out.len, &t, NULL));
  assert_string_equal("AdmissionReview", kcr_json_str(t, "/kind"));
  assert_non_null(kcr_json_at(t, "/response/allowed"));
  kcr_buf_cleanup(&out);
  return t;
}

/* ---- handlers ------------------------------------------------------------- */

struct seen {
  struct kcr_admission_request rq;
  char object[512], user[64], groups[128];
};

static kcr_err record(kcr_admission *adm, const struct kcr_admission_request *rq,
                      void *ud)
{
  struct seen *s = ud;
  s->rq = *rq;
  snprintf(s->object, sizeof(s->object), "%.*s", KCR_STR_ARG(rq->object));
  snprintf(s->user, sizeof(s->user), "%.*s", KCR_STR_ARG(rq->username));
  s->groups[0] = '\0';
  for(size_t i = 0; i < rq->ngroups; i++)
    snprintf(s->groups + strlen(s->groups), sizeof(s->groups) - strlen(s->groups),
             "%.*s;", KCR_STR_ARG(rq->groups[i]));
  return KCR_OK;
}

static void the_handler_sees_the_request(void **state)
{
  struct seen s = {0};
  char *body = create_review(OBJ);
  cJSON *t = answer(&(struct kcr_webhook_opts){.path = "/v", .admit = record, .ud = &s},
                    body, "application/json");

  assert_true(kcr_str_eq(s.rq.uid, "u-1"));
  assert_int_equal(KCR_ADMISSION_CREATE, s.rq.operation);
  assert_true(kcr_str_eq(s.rq.kind, "ConfigMap"));
  assert_true(kcr_str_eq(s.rq.version, "v1"));
  assert_true(kcr_str_eq(s.rq.resource, "configmaps"));
  assert_true(kcr_str_eq(s.rq.name, "c"));
  assert_true(kcr_str_eq(s.rq.namespace_, "n"));
  assert_true(s.rq.dry_run);
  assert_null(s.rq.old_object.s);     /* null: none */
  assert_string_equal(OBJ, s.object); /* the text as sent */
  assert_string_equal("alice", s.user);
  assert_string_equal("system:authenticated;dev;", s.groups);
  /* allowed, the uid echoed, the version answered as asked */
  assert_true(cJSON_IsTrue(kcr_json_at(t, "/response/allowed")));
  assert_string_equal("u-1", kcr_json_str(t, "/response/uid"));
  assert_string_equal("admission.k8s.io/v1", kcr_json_str(t, "/apiVersion"));
  assert_null(kcr_json_at(t, "/response/patch"));
  assert_null(kcr_json_at(t, "/response/status"));
  cJSON_Delete(t);
  free(body);
}

static kcr_err deny_422(kcr_admission *adm, const struct kcr_admission_request *rq,
                        void *ud)
{
  kcr_admission_warn(adm, "first %s", "warning");
  kcr_admission_warn(adm, "%0300d", 7); /* cut to 256 bytes */
  kcr_admission_deny(adm, 422, "spec.size: must be at most %d", 10);
  return KCR_OK;
}

static kcr_err deny_default(kcr_admission *adm, const struct kcr_admission_request *rq,
                            void *ud)
{
  kcr_admission_deny(adm, 0, "no \"quotes\" please");
  return KCR_OK;
}

static kcr_err fails(kcr_admission *adm, const struct kcr_admission_request *rq, void *ud)
{
  return kcr_errinfo_set(kcr_admission_ei(adm), KCR_EIO, "the cache is not synced");
}

static void a_denial_carries_its_status_and_warnings(void **state)
{
  char *body = create_review(OBJ);
  cJSON *t = answer(&(struct kcr_webhook_opts){.path = "/v", .admit = deny_422}, body,
                    "application/json; charset=utf-8");

  assert_true(cJSON_IsFalse(kcr_json_at(t, "/response/allowed")));
  assert_int_equal(422, kcr_json_int(t, "/response/status/code", 0));
  assert_string_equal("Invalid", kcr_json_str(t, "/response/status/reason"));
  assert_string_equal("Failure", kcr_json_str(t, "/response/status/status"));
  assert_string_equal("spec.size: must be at most 10",
                      kcr_json_str(t, "/response/status/message"));
  assert_string_equal("first warning", kcr_json_str(t, "/response/warnings/0"));
  assert_int_equal(256, strlen(kcr_json_str(t, "/response/warnings/1")));
  cJSON_Delete(t);
  /* no code: 403 Forbidden; the message escaped */
  t = answer(&(struct kcr_webhook_opts){.path = "/v", .admit = deny_default}, body,
             "application/json");
  assert_int_equal(403, kcr_json_int(t, "/response/status/code", 0));
  assert_string_equal("Forbidden", kcr_json_str(t, "/response/status/reason"));
  assert_string_equal("no \"quotes\" please",
                      kcr_json_str(t, "/response/status/message"));
  cJSON_Delete(t);
  /* an error: denied with 500 and the handler's message */
  t = answer(&(struct kcr_webhook_opts){.path = "/v", .admit = fails}, body,
             "application/json");
  assert_true(cJSON_IsFalse(kcr_json_at(t, "/response/allowed")));
  assert_int_equal(500, kcr_json_int(t, "/response/status/code", 0));
  assert_string_equal("the cache is not synced",
                      kcr_json_str(t, "/response/status/message"));
  cJSON_Delete(t);
  free(body);
}

/* A defaulter: adds a label with a '/' in its key and drops the "keep"
 * label (which the patch keeps unless remove_fields); idempotent. */
static kcr_err defaults(kcr_admission *adm, const struct kcr_admission_request *rq,
                        void *ud)
{
  cJSON *o = NULL;
  kcr_err rc = kcr_json_parse(rq->object.s, rq->object.n, &o, kcr_admission_ei(adm));
  char *text;

  if(rc)
    return rc;
  cJSON *labels = kcr_json_obj(o, "/metadata/labels");
  cJSON_DeleteItemFromObjectCaseSensitive(labels, "keep");
  if(!kcr_json_at(o, "/metadata/labels/example.com~1defaulted"))
    kcr_json_set_str(o, "/metadata/labels/example.com~1defaulted", "true");
  text = kcr_json_to_text(o);
  rc = text ? kcr_admission_set_object(adm, text, strlen(text)) : KCR_ENOMEM;
  free(text);
  cJSON_Delete(o);
  return rc;
}

/* The patch of an answer, decoded; NULL when it has none. */
static char *patch_of(const cJSON *t)
{
  const char *b64 = kcr_json_str(t, "/response/patch");
  unsigned char *p;
  size_t n;

  if(!b64)
    return NULL;
  assert_string_equal("JSONPatch", kcr_json_str(t, "/response/patchType"));
  assert_int_equal(KCR_OK, kcr_base64_decode(b64, strlen(b64), &p, &n));
  return (char *)p;
}

static void a_mutation_is_answered_with_its_json_patch(void **state)
{
  struct kcr_webhook_opts o = {.path = "/m", .admit = defaults, .mutating = true};
  char *body = create_review(OBJ), *patch, *applied, *again;
  const char *why;
  cJSON *t = answer(&o, body, "application/json");

  assert_true(cJSON_IsTrue(kcr_json_at(t, "/response/allowed")));
  patch = patch_of(t);
  assert_non_null(patch);
  /* the label added, escaped as a pointer; "keep" not removed */
  assert_string_equal(
      "[{\"op\":\"add\",\"path\":\"/metadata/labels/example.com~1defaulted\","
      "\"value\":\"true\"}]",
      patch);
  applied = tjp_apply(OBJ, strlen(OBJ), patch, strlen(patch), &why);
  assert_non_null(applied);
  assert_non_null(strstr(applied, "\"keep\":\"1\""));
  cJSON_Delete(t);
  free(body);
  /* idempotent: run on its own result, it patches nothing at all */
  body = create_review(applied);
  t = answer(&o, body, "application/json");
  assert_true(cJSON_IsTrue(kcr_json_at(t, "/response/allowed")));
  again = patch_of(t);
  assert_null(again);
  assert_null(kcr_json_at(t, "/response/patchType"));
  cJSON_Delete(t);
  free(body);
  free(applied);
  free(patch);
  /* with remove_fields the label it dropped goes too */
  o.remove_fields = true;
  body = create_review(OBJ);
  t = answer(&o, body, "application/json");
  patch = patch_of(t);
  assert_non_null(
      strstr(patch, "{\"op\":\"remove\",\"path\":\"/metadata/labels/keep\"}"));
  free(patch);
  cJSON_Delete(t);
  free(body);
}

static kcr_err sets_on_validating(kcr_admission *adm,
                                  const struct kcr_admission_request *rq, void *ud)
{
  return kcr_admission_set_object(adm, "{}", 2);
}

static kcr_err sets_bad_json(kcr_admission *adm, const struct kcr_admission_request *rq,
                             void *ud)
{
  return kcr_admission_set_object(adm, "[1]", 3);
}

static void a_handler_mistake_is_a_denial_saying_so(void **state)
{
  char *body = create_review(OBJ);
  cJSON *t = answer(&(struct kcr_webhook_opts){.path = "/v", .admit = sets_on_validating},
                    body, "application/json");
  assert_int_equal(500, kcr_json_int(t, "/response/status/code", 0));
  assert_non_null(strstr(kcr_json_str(t, "/response/status/message"), "validating"));
  cJSON_Delete(t);
  t = answer(
      &(struct kcr_webhook_opts){.path = "/m", .admit = sets_bad_json, .mutating = true},
      body, "application/json");
  assert_non_null(
      strstr(kcr_json_str(t, "/response/status/message"), "not a JSON object"));
  cJSON_Delete(t);
  free(body);
}

static void what_is_no_review_is_answered_400(void **state)
{
  struct seen s = {0};
  struct kcr_webhook_opts o = {.path = "/v", .admit = record, .ud = &s};
  static const struct {
    const char *body, *ctype, *why;
  } bad[] = {
      {"{}", "text/plain", "Content-Type"},
      {"{}", NULL, "Content-Type"},
      {"", "application/json", "empty"},
      {"{\"apiVersion\":", "application/json", "not a JSON object"},
      {"{\"apiVersion\":\"admission.k8s.io/v2\",\"kind\":\"AdmissionReview\"}",
       "application/json", "admission.k8s.io/v1"},
      {"{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"Other\",\"request\":{}}",
       "application/json", "AdmissionReview"},
      {"{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\"}",
       "application/json", "no request"},
      {"{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\","
       "\"request\":{\"operation\":\"CREATE\"}}",
       "application/json", "uid"},
      {"{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\","
       "\"request\":{\"uid\":7}}",
       "application/json", "wrong type"},
      {"{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\","
       "\"request\":{\"uid\":\"u\",\"object\":[1]}}",
       "application/json", "request.object"},
  };
  for(size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    cJSON *t = answer(&o, bad[i].body, bad[i].ctype);
    const char *msg = kcr_json_str(t, "/response/status/message");
    assert_true(cJSON_IsFalse(kcr_json_at(t, "/response/allowed")));
    assert_int_equal(400, kcr_json_int(t, "/response/status/code", 0));
    if(!msg || !strstr(msg, bad[i].why))
      fail_msg("case %zu: message \"%s\" does not say \"%s\"", i, msg ? msg : "",
               bad[i].why);
    assert_string_equal("admission.k8s.io/v1", kcr_json_str(t, "/apiVersion"));
    cJSON_Delete(t);
  }
  assert_null(s.rq.uid.s); /* the handler was never called */
}

static void v1beta1_is_answered_in_v1beta1(void **state)
{
  struct seen s = {0};
  char *body =
      review_text("admission.k8s.io/v1beta1",
                  "\"operation\":\"DELETE\",\"oldObject\":{\"a\":1},\"object\":null");
  cJSON *t = answer(&(struct kcr_webhook_opts){.path = "/v", .admit = record, .ud = &s},
                    body, "application/json");
  assert_string_equal("admission.k8s.io/v1beta1", kcr_json_str(t, "/apiVersion"));
  assert_int_equal(KCR_ADMISSION_DELETE, s.rq.operation);
  assert_null(s.rq.object.s);
  assert_true(kcr_str_eq(s.rq.old_object, "{\"a\":1}"));
  cJSON_Delete(t);
  free(body);
}

/* ---- allocation failures -------------------------------------------------- */

static bool review_under_failure(void *ud)
{
  struct kcr_webhook_opts o = {
      .path = "/m", .admit = defaults, .mutating = true, .remove_fields = true};
  const char *body = ud;
  struct kcr_buf out = KCR_BUF_INIT;
  kcr_err rc = kcr_webhook_review(&o, body, strlen(body), "application/json", &out);
  bool ok;

  tfail_exempt(true);
  if(rc) {
    ok = rc == KCR_ENOMEM;
  } else {
    /* an answer, never a half one: allowed with the patch, or denied 500 */
    cJSON *t = NULL;
    ok = !kcr_json_parse(out.ptr, out.len, &t, NULL);
    if(ok && cJSON_IsTrue(kcr_json_at(t, "/response/allowed")))
      ok = kcr_json_str(t, "/response/patch") != NULL;
    else if(ok)
      ok = kcr_json_int(t, "/response/status/code", 0) == 500;
    cJSON_Delete(t);
  }
  tfail_exempt(false);
  kcr_buf_cleanup(&out);
  return ok;
}

static void allocation_failures_give_an_answer_or_an_error(void **state)
{
  char *body = create_review(OBJ);
  tfail_torture("kcr_webhook_review", review_under_failure, body);
  free(body);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(the_handler_sees_the_request),
      cmocka_unit_test(a_denial_carries_its_status_and_warnings),
      cmocka_unit_test(a_mutation_is_answered_with_its_json_patch),
      cmocka_unit_test(a_handler_mistake_is_a_denial_saying_so),
      cmocka_unit_test(what_is_no_review_is_answered_400),
      cmocka_unit_test(v1beta1_is_answered_in_v1beta1),
      cmocka_unit_test(allocation_failures_give_an_answer_or_an_error),
  };
  tfail_init();
  return cmocka_run_group_tests(tests, NULL, NULL);
}
