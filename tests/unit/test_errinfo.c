/* Non-2xx answers become a kcr_err plus the server's Status, verbatim (errinfo). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "kcr/err.h"
#include "kcr/json.h"
#include "tfail.h"

static const char conflict[] =
    "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\","
    "\"message\":\"Operation cannot be fulfilled on ebds.ebdman.example.com "
    "\\\"resource01\\\": the object has been modified; please apply your changes to "
    "the latest version and try again\",\"reason\":\"Conflict\",\"details\":{\"name\":"
    "\"resource01\",\"group\":\"ebdman.example.com\",\"kind\":\"ebds\"},\"code\":409}";

static void conflict_status_is_kept_verbatim(void **state)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  assert_int_equal(KCR_ECONFLICT,
                   kcr_errinfo_from_http(&ei, 409, conflict, strlen(conflict)));
  assert_int_equal(409, ei.code);
  assert_string_equal("Failure", ei.status);
  assert_string_equal("Conflict", ei.reason);
  assert_string_equal("Operation cannot be fulfilled on ebds.ebdman.example.com "
                      "\"resource01\": the object has been modified; please apply "
                      "your changes to the latest version and try again",
                      ei.message);
  assert_string_equal("resource01", kcr_json_str(ei.details, "/name"));
  assert_string_equal("ebds", kcr_json_str(ei.details, "/kind"));
  kcr_errinfo_cleanup(&ei);
  assert_null(ei.message);
}

static void already_exists_is_not_a_conflict(void **state)
{
  const char *b = "{\"kind\":\"Status\",\"status\":\"Failure\",\"reason\":"
                  "\"AlreadyExists\",\"message\":\"configmaps \\\"a\\\" already "
                  "exists\",\"code\":409}";
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  assert_int_equal(KCR_EEXIST, kcr_errinfo_from_http(&ei, 409, b, strlen(b)));
  assert_string_equal("AlreadyExists", ei.reason);
  kcr_errinfo_cleanup(&ei);
}

/* Found by tests/fuzz (fuzz_status, corpus 409-code-as-string.bin): a Status
 * without a numeric code is classified by the HTTP code and its reason, and
 * that reason must come from the body, not from ei: without ei (or with an
 * ei whose copy of the reason failed) a 409 AlreadyExists came back as a
 * conflict. */
static void answer_without_status_code_does_not_depend_on_ei(void **state)
{
  const char *b = "{\"kind\":\"Status\",\"status\":\"Failure\",\"reason\":"
                  "\"AlreadyExists\",\"code\":\"409\"}";
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  assert_int_equal(KCR_EEXIST, kcr_errinfo_from_http(&ei, 409, b, strlen(b)));
  assert_int_equal(409, ei.code);
  kcr_errinfo_cleanup(&ei);
  assert_int_equal(KCR_EEXIST, kcr_errinfo_from_http(NULL, 409, b, strlen(b)));
}

static void codes_map_to_errors(void **state)
{
  static const struct {
    long code;
    kcr_err want;
  } cases[] = {{200, KCR_OK},           {201, KCR_OK},
               {400, KCR_EBADREQUEST},  {401, KCR_EUNAUTHORIZED},
               {403, KCR_EFORBIDDEN},   {404, KCR_ENOTFOUND},
               {409, KCR_ECONFLICT},    {410, KCR_EGONE},
               {415, KCR_EUNSUPPORTED}, {422, KCR_EINVALID},
               {429, KCR_ETOOMANY},     {500, KCR_ESERVER},
               {503, KCR_EUNAVAILABLE}, {504, KCR_ESERVER},
               {302, KCR_EHTTP},        {418, KCR_EHTTP}};
  for(size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    char body[128];
    struct kcr_errinfo ei = KCR_ERRINFO_INIT;
    snprintf(body, sizeof(body), "{\"kind\":\"Status\",\"code\":%ld}", cases[i].code);
    assert_int_equal(cases[i].want,
                     kcr_errinfo_from_http(&ei, cases[i].code, body, strlen(body)));
    kcr_errinfo_cleanup(&ei);
  }
}

static void non_status_body_is_kept(void **state)
{
  const char *b = "<html>bad gateway</html>";
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  assert_int_equal(KCR_ESERVER, kcr_errinfo_from_http(&ei, 502, b, strlen(b)));
  assert_int_equal(502, ei.code);
  assert_string_equal(b, ei.body);
  assert_non_null(strstr(ei.message, "HTTP 502"));
  kcr_errinfo_cleanup(&ei);
}

static void watch_error_expired_is_gone(void **state)
{
  cJSON *st = cJSON_Parse("{\"kind\":\"Status\",\"status\":\"Failure\",\"message\":"
                          "\"too old resource version: 1 (500)\",\"reason\":\"Expired\","
                          "\"code\":410}");
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  assert_int_equal(KCR_EGONE, kcr_errinfo_from_status(&ei, st));
  assert_string_equal("Expired", ei.reason);
  assert_int_equal(410, ei.code);
  kcr_errinfo_cleanup(&ei);
  cJSON_Delete(st);
  st = cJSON_Parse("{\"kind\":\"Status\",\"reason\":\"Gone\"}"); /* no code */
  assert_int_equal(KCR_EGONE, kcr_errinfo_from_status(NULL, st));
  cJSON_Delete(st);
}

/* metav1.Status.code is an int32. A code that is not one (too large, a
 * fraction, 1e300: undefined behaviour as a C cast) counts as absent, so the
 * HTTP code decides; 2^32 + 409 must not pass for a 409 conflict. */
static void a_status_code_that_is_not_an_int32_counts_as_absent(void **state)
{
  static const char *const codes[] = {
      "4294967705", "1e300", "-1e300", "409.5", "\"409\"", "null", "9223372036854775808"};
  for(size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++) {
    char body[256];
    struct kcr_errinfo ei = KCR_ERRINFO_INIT;
    snprintf(body, sizeof(body),
             "{\"kind\":\"Status\",\"status\":\"Failure\",\"reason\":"
             "\"InternalError\",\"code\":%s}",
             codes[i]);
    assert_int_equal(KCR_ESERVER, kcr_errinfo_from_http(&ei, 500, body, strlen(body)));
    assert_int_equal(500, ei.code);
    assert_string_equal("InternalError", ei.reason);
    kcr_errinfo_cleanup(&ei);
  }
  /* Directly, without an HTTP code: no code at all. */
  cJSON *st = cJSON_Parse("{\"kind\":\"Status\",\"code\":1e300}");
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  assert_int_equal(KCR_EHTTP, kcr_errinfo_from_status(&ei, st));
  assert_int_equal(0, ei.code);
  kcr_errinfo_cleanup(&ei);
  cJSON_Delete(st);
}

/* Out of memory may lose details or make the answer KCR_ENOMEM, but never
 * turns one answer into another: a 409 AlreadyExists whose Status could not
 * be read is not a plain conflict. */
static bool already_exists_or_enomem(void *ud)
{
  const char *b = ud;
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  kcr_err rc = kcr_errinfo_from_http(&ei, 409, b, strlen(b));
  bool ok = (rc == KCR_EEXIST || rc == KCR_ENOMEM) && ei.code == 409 &&
            (!ei.reason || !strcmp(ei.reason, "AlreadyExists"));
  kcr_errinfo_cleanup(&ei);
  return ok;
}

static void out_of_memory_never_changes_the_answer(void **state)
{
  tfail_torture("kcr_errinfo_from_http (409 AlreadyExists)", already_exists_or_enomem,
                "{\"kind\":\"Status\",\"status\":\"Failure\",\"reason\":"
                "\"AlreadyExists\",\"message\":\"configmaps \\\"a\\\" already "
                "exists\",\"details\":{\"name\":\"a\"},\"code\":409}");
}

static void causes_are_found_by_type_and_field(void **state)
{
  const char *b =
      "{\"kind\":\"Status\",\"status\":\"Failure\",\"reason\":\"Invalid\",\"details\":{"
      "\"causes\":[{\"reason\":\"FieldValueInvalid\",\"message\":\"x\",\"field\":"
      "\"spec.image\"},{\"reason\":\"FieldValueInvalid\",\"field\":\"metadata.uid\"},"
      "{\"reason\":7},{\"field\":null},\"junk\"]},\"code\":422}";
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;

  assert_int_equal(KCR_EINVALID, kcr_errinfo_from_http(&ei, 422, b, strlen(b)));
  assert_true(kcr_errinfo_has_cause(&ei, "FieldValueInvalid", NULL));
  assert_true(kcr_errinfo_has_cause(&ei, NULL, "metadata.uid"));
  assert_true(kcr_errinfo_has_cause(&ei, "FieldValueInvalid", "metadata.uid"));
  assert_true(kcr_errinfo_has_cause(&ei, NULL, NULL));
  assert_false(kcr_errinfo_has_cause(&ei, "NamespaceTerminating", NULL));
  assert_false(kcr_errinfo_has_cause(&ei, "FieldValueRequired", "metadata.uid"));
  assert_false(kcr_errinfo_has_cause(&ei, NULL, "metadata.name"));
  kcr_errinfo_cleanup(&ei);
  /* No Status, no details, no causes, causes not an array: none. */
  assert_false(kcr_errinfo_has_cause(NULL, NULL, NULL));
  assert_false(kcr_errinfo_has_cause(&ei, NULL, NULL));
  b = "{\"kind\":\"Status\",\"details\":{\"causes\":{\"reason\":\"X\"}},\"code\":422}";
  kcr_errinfo_from_http(&ei, 422, b, strlen(b));
  assert_false(kcr_errinfo_has_cause(&ei, "X", NULL));
  kcr_errinfo_cleanup(&ei);
}

static void strerror_and_names_cover_the_table(void **state)
{
  assert_string_equal("ECONFLICT", kcr_err_name(KCR_ECONFLICT));
  assert_string_equal("success", kcr_strerror(KCR_OK));
  assert_string_equal("unknown error", kcr_strerror((kcr_err)999));
  assert_string_equal("EUNKNOWN", kcr_err_name((kcr_err)999));
  assert_string_equal("ERANGE", kcr_err_name(KCR_ERANGE));
  assert_string_equal("EUNCERTAIN", kcr_err_name(KCR_EUNCERTAIN));
  assert_string_equal("outcome unknown: the request was sent but no answer came",
                      kcr_strerror(KCR_EUNCERTAIN));
}

int main(void)
{
  tfail_init();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(conflict_status_is_kept_verbatim),
      cmocka_unit_test(already_exists_is_not_a_conflict),
      cmocka_unit_test(codes_map_to_errors),
      cmocka_unit_test(answer_without_status_code_does_not_depend_on_ei),
      cmocka_unit_test(non_status_body_is_kept),
      cmocka_unit_test(watch_error_expired_is_gone),
      cmocka_unit_test(a_status_code_that_is_not_an_int32_counts_as_absent),
      cmocka_unit_test(out_of_memory_never_changes_the_answer),
      cmocka_unit_test(causes_are_found_by_type_and_field),
      cmocka_unit_test(strerror_and_names_cover_the_table),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
