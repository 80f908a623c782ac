/* Kubernetes integers (int64: generation, observedGeneration,
 * gracePeriodSeconds ...) read and written exactly: a parsed tree prints
 * every integer as it was sent, a written one as Go's encoder would, and
 * nothing that does not fit an int64 is ever turned into one. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kcr/json.h"
#include "tfail.h"

static cJSON *parse(const char *text)
{
  cJSON *o = NULL;
  assert_int_equal(KCR_OK, kcr_json_parse(text, strlen(text), &o, NULL));
  return o;
}

static void assert_prints(const char *want, const cJSON *o)
{
  char *text = kcr_json_to_text(o);
  assert_non_null(text);
  assert_string_equal(want, text);
  free(text);
}

/* ---- parse + print ---- */

static void parsed_integers_print_as_they_were_sent(void **state)
{
  static const char *const docs[] = {
      "{\"observedGeneration\":9007199254740993}",
      "{\"observedGeneration\":1000000000000000}",
      "[9223372036854775807,-9223372036854775808,999999999999999,-1000000000000001]",
      /* beyond int64: kept as text, never rounded */
      "{\"a\":123456789012345678901234567890,\"b\":-18446744073709551616}",
      /* strings that look like numbers, escaped quotes, and ordinary numbers
       * around them do not disturb which literal is which */
      "{\"k\\\"1\":\"2\\\\\",\"n\":[1e+300,12345678901234567,0.5,\"7\"],"
      "\"m\":{\"x\":-4,\"y\":9007199254740993}}",
      "9007199254740993",
      /* longer than the 63 bytes upstream cJSON 1.7.15 copies of a literal
       * (Debian's build, patched for CVE-2023-26819, reads it all) */
      "[12345678901234567890123456789012345678901234567890123456789012345678901234567890,"
      "9007199254740993]",
  };
  for(size_t i = 0; i < sizeof(docs) / sizeof(docs[0]); i++) {
    cJSON *o = parse(docs[i]);
    assert_prints(docs[i], o);
    cJSON_Delete(o);
  }
}

static void parsed_integers_survive_copies(void **state)
{
  cJSON *o = parse("{\"g\":9007199254740993}"), *copy = cJSON_Duplicate(o, 1);
  assert_prints("{\"g\":9007199254740993}", copy);
  assert_true(cJSON_Compare(o, copy, 1));
  cJSON_Delete(copy);
  cJSON_Delete(o);
}

static void numbers_that_are_not_integer_literals_stay_numbers(void **state)
{
  /* Not Kubernetes integers (Go refuses them for an int64): cJSON's
   * printing is kept. */
  cJSON *o = parse("[1e15,1000000000000000.5,-0.25]");
  assert_prints("[1e+15,1000000000000000.5,-0.25]", o);
  cJSON_Delete(o);
}

static void parse_counts_only_the_document(void **state)
{
  /* Text after the value is not part of it (cJSON stops there). */
  const char text[] = "{\"g\":9007199254740993} 42 9007199254740995";
  cJSON *o = NULL;
  assert_int_equal(KCR_OK, kcr_json_parse(text, sizeof(text) - 1, &o, NULL));
  assert_int_equal(9007199254740993LL, kcr_json_int(o, "g", 0));
  cJSON_Delete(o);
}

static void malformed_json_is_refused_with_a_position(void **state)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  cJSON *o = (cJSON *)1;
  assert_int_equal(KCR_EPARSE, kcr_json_parse("{\"a\":}", 6, &o, &ei));
  assert_null(o);
  assert_non_null(strstr(ei.message, "malformed JSON at byte"));
  kcr_errinfo_cleanup(&ei);
}

/* Everything cJSON refuses is EPARSE, never taken for out of memory: a
 * caller told ENOMEM would retry garbage forever. */
static void what_cjson_refuses_is_malformed(void **state)
{
  static const char *const bad[] = {
      "",
      " ",
      "{",
      "[1,]",
      "{\"a\"}",
      "{\"a\":1,}",
      "[1 2]",
      "nul",
      "tru",
      "\"open",
      "\"bad escape \\x\"",
      "\"\\u12\"",
      "\"\\uDC00\"",        /* lone low surrogate */
      "\"\\uD800\"",        /* high surrogate alone */
      "\"\\uD800\\u0041\"", /* high surrogate, then not a low one */
      "[-]",
      "[01x]",
      "[.5]",
      "[1e]",
      "[+1]",
  };
  for(size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    cJSON *o = NULL;
    kcr_err rc = kcr_json_parse(bad[i], strlen(bad[i]), &o, NULL);
    if(rc != KCR_EPARSE)
      fail_msg("%s: %s, want EPARSE", bad[i], kcr_err_name(rc));
    assert_null(o);
  }
  /* Nesting deeper than cJSON's limit (1000). */
  char deep[2 * 1001 + 1];
  memset(deep, '[', 1001);
  memset(deep + 1001, ']', 1001);
  deep[2002] = '\0';
  cJSON *o = NULL;
  assert_int_equal(KCR_EPARSE, kcr_json_parse(deep, strlen(deep), &o, NULL));
  /* A surrogate pair is fine. */
  assert_int_equal(KCR_OK, kcr_json_parse("\"\\uD83D\\uDE00\"", 14, &o, NULL));
  assert_string_equal("\xF0\x9F\x98\x80", o->valuestring);
  cJSON_Delete(o);
}

/* ---- reading ---- */

static void integers_are_read_exactly(void **state)
{
  cJSON *o = parse("{\"a\":9007199254740993,\"b\":-9223372036854775808,"
                   "\"c\":9223372036854775807,\"d\":1000000000000001,\"e\":-7,"
                   "\"f\":{\"g\":12}}");
  assert_int_equal(9007199254740993LL, kcr_json_int(o, "a", 0));
  assert_true(INT64_MIN == kcr_json_int(o, "b", 0));
  assert_true(INT64_MAX == kcr_json_int(o, "c", 0));
  assert_int_equal(1000000000000001LL, kcr_json_int(o, "d", 0));
  assert_int_equal(-7, kcr_json_int(o, "e", 0));
  assert_int_equal(12, kcr_json_int(o, "f.g", 0));
  cJSON_Delete(o);
}

static void get_int_tells_absent_wrong_type_and_out_of_range_apart(void **state)
{
  cJSON *o = parse("{\"null\":null,\"str\":\"5\",\"half\":1.5,\"obj\":{},"
                   "\"huge\":1e300,\"inf\":1e400,\"two63\":9223372036854775808,"
                   "\"below\":-9223372036854775809,\"ok\":9007199254740993}");
  int64_t v = 42;
  assert_int_equal(KCR_ENOTFOUND, kcr_json_get_int(NULL, &v));
  assert_int_equal(KCR_ENOTFOUND, kcr_json_get_int(kcr_json_at(o, "absent"), &v));
  assert_int_equal(KCR_ENOTFOUND, kcr_json_get_int(kcr_json_at(o, "null"), &v));
  assert_int_equal(KCR_EPARSE, kcr_json_get_int(kcr_json_at(o, "str"), &v));
  assert_int_equal(KCR_EPARSE, kcr_json_get_int(kcr_json_at(o, "half"), &v));
  assert_int_equal(KCR_EPARSE, kcr_json_get_int(kcr_json_at(o, "obj"), &v));
  assert_int_equal(KCR_ERANGE, kcr_json_get_int(kcr_json_at(o, "huge"), &v));
  assert_int_equal(KCR_ERANGE, kcr_json_get_int(kcr_json_at(o, "inf"), &v));
  assert_int_equal(KCR_ERANGE, kcr_json_get_int(kcr_json_at(o, "two63"), &v));
  assert_int_equal(KCR_ERANGE, kcr_json_get_int(kcr_json_at(o, "below"), &v));
  assert_int_equal(42, v); /* untouched on every error */
  assert_int_equal(KCR_OK, kcr_json_get_int(kcr_json_at(o, "ok"), &v));
  assert_int_equal(9007199254740993LL, v);
  cJSON_Delete(o);
}

/* Numbers no JSON text can hold but a tree can: never cast to an int64
 * (undefined behaviour: UBSan's float-cast-overflow stops here). */
static void numbers_that_do_not_fit_give_the_default(void **state)
{
  const double bad[] = {NAN,
                        INFINITY,
                        -INFINITY,
                        1e300,
                        -1e300,
                        9223372036854775808.0,
                        -9223372036854777856.0,
                        0.5,
                        -2.5};
  for(size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    cJSON *o = cJSON_CreateObject();
    assert_non_null(cJSON_AddNumberToObject(o, "n", bad[i]));
    assert_int_equal(-1, kcr_json_int(o, "n", -1));
    cJSON_Delete(o);
  }
  cJSON *o = cJSON_CreateObject();
  cJSON_AddNumberToObject(o, "n", -9223372036854775808.0); /* INT64_MIN fits */
  assert_true(INT64_MIN == kcr_json_int(o, "n", -1));
  cJSON_Delete(o);
}

/* ---- writing ---- */

static void integers_are_written_as_go_writes_them(void **state)
{
  static const struct {
    int64_t v;
    const char *text;
  } cases[] = {{0, "0"},
               {-1, "-1"},
               {999999999999999LL, "999999999999999"},
               {1000000000000000LL, "1000000000000000"},
               {9007199254740993LL, "9007199254740993"},
               {-1000000000000000LL, "-1000000000000000"},
               {INT64_MAX, "9223372036854775807"},
               {INT64_MIN, "-9223372036854775808"}};
  for(size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    char want[64];
    cJSON *o = cJSON_CreateObject();
    int64_t back = 0;
    assert_non_null(kcr_json_add_int(o, "n", cases[i].v));
    snprintf(want, sizeof(want), "{\"n\":%s}", cases[i].text);
    assert_prints(want, o);
    assert_int_equal(KCR_OK, kcr_json_get_int(kcr_json_at(o, "n"), &back));
    assert_true(back == cases[i].v);
    /* what is written compares equal to what the server sends back */
    cJSON *served = parse(want);
    assert_true(cJSON_Compare(o, served, 1));
    cJSON_Delete(served);
    cJSON_Delete(o);
  }
}

/* ---- allocation failures ---- */

static bool parse_all_or_nothing(void *ud)
{
  const char *text = ud;
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  cJSON *o = NULL;
  char *back = NULL;
  kcr_err rc = kcr_json_parse(text, strlen(text), &o, &ei);
  /* Out of memory is said as such: EPARSE would make the caller drop
   * well-formed data as garbage. */
  bool ok = rc ? rc == KCR_ENOMEM && o == NULL
               : (back = kcr_json_to_text(o)) == NULL || !strcmp(back, text);
  free(back);
  cJSON_Delete(o);
  kcr_errinfo_cleanup(&ei);
  return ok;
}

static void parse_never_returns_a_rounded_tree(void **state)
{
  tfail_torture("kcr_json_parse", parse_all_or_nothing,
                "{\"a\":[9007199254740993,1,1000000000000000],"
                "\"b\":{\"c\":-9223372036854775808}}");
}

static bool add_int_all_or_nothing(void *ud)
{
  cJSON *o = cJSON_CreateObject();
  cJSON *n;
  bool ok;
  if(!o)
    return true;
  n = kcr_json_add_int(o, "n", *(int64_t *)ud);
  ok = n ? kcr_json_int(o, "n", 0) == *(int64_t *)ud
         : cJSON_GetArraySize(o) == 0; /* nothing half-added */
  cJSON_Delete(o);
  return ok;
}

static void add_int_adds_all_or_nothing(void **state)
{
  int64_t big = 9007199254740993LL, small = 5;
  tfail_torture("kcr_json_add_int (raw)", add_int_all_or_nothing, &big);
  tfail_torture("kcr_json_add_int (number)", add_int_all_or_nothing, &small);
}

static const char set_base[] = "{\"metadata\":{\"name\":\"old\"}}";

/* The member is set, or the call failed with ENOMEM and the tree is
 * exactly as it was: no value lost, no empty object left on the way. */
static bool set_str_all_or_nothing(void *ud)
{
  const char *path = ud;
  cJSON *o;
  const char *v;
  char *after;
  kcr_err rc;
  bool ok;

  tfail_exempt(true);
  o = cJSON_Parse(set_base);
  tfail_exempt(false);
  rc = kcr_json_set_str(o, path, "new");
  tfail_exempt(true);
  after = kcr_json_to_text(o);
  v = kcr_json_str(o, path);
  ok = rc == KCR_OK ? v && !strcmp(v, "new")
                    : rc == KCR_ENOMEM && after && !strcmp(after, set_base);
  free(after);
  cJSON_Delete(o);
  tfail_exempt(false);
  return ok;
}

static void set_str_replaces_all_or_nothing(void **state)
{
  tfail_torture("kcr_json_set_str (replace)", set_str_all_or_nothing, "metadata.name");
  tfail_torture("kcr_json_set_str (create)", set_str_all_or_nothing,
                "metadata.labels.app");
  tfail_torture("kcr_json_set_str (top level)", set_str_all_or_nothing, "kind");
}

static bool obj_all_or_nothing(void *ud)
{
  cJSON *o, *got;
  char *after;
  bool ok;

  tfail_exempt(true);
  o = cJSON_Parse(set_base);
  tfail_exempt(false);
  got = kcr_json_obj(o, "spec.template.metadata");
  tfail_exempt(true);
  after = kcr_json_to_text(o);
  ok = got ? cJSON_IsObject(got) && kcr_json_at(o, "spec.template.metadata") == got
           : after && !strcmp(after, set_base);
  free(after);
  cJSON_Delete(o);
  tfail_exempt(false);
  return ok;
}

static void obj_creates_the_whole_path_or_nothing(void **state)
{
  tfail_torture("kcr_json_obj", obj_all_or_nothing, NULL);
}

static void set_str_refuses_a_path_through_a_non_object(void **state)
{
  cJSON *o = parse("{\"metadata\":\"x\"}");
  assert_int_equal(KCR_EINVAL, kcr_json_set_str(o, "metadata.name", "n"));
  cJSON_Delete(o);
}

/* A missing argument is the caller's mistake (KCR_EINVAL), not memory
 * running out (a NULL value was reported as KCR_ENOMEM). */
static void missing_arguments_are_einval(void **state)
{
  cJSON *o = parse("{}"), *out = (cJSON *)1;
  assert_int_equal(KCR_EINVAL, kcr_json_set_str(o, "metadata.name", NULL));
  assert_int_equal(KCR_EINVAL, kcr_json_set_str(o, NULL, "v"));
  assert_int_equal(KCR_EINVAL, kcr_json_set_str(NULL, "a", "v"));
  assert_int_equal(KCR_EINVAL, kcr_json_parse(NULL, 0, &out, NULL));
  assert_null(out);
  assert_null(kcr_json_to_text(NULL));
  cJSON_Delete(o);
}

int main(void)
{
  tfail_init();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(parsed_integers_print_as_they_were_sent),
      cmocka_unit_test(parsed_integers_survive_copies),
      cmocka_unit_test(numbers_that_are_not_integer_literals_stay_numbers),
      cmocka_unit_test(parse_counts_only_the_document),
      cmocka_unit_test(malformed_json_is_refused_with_a_position),
      cmocka_unit_test(what_cjson_refuses_is_malformed),
      cmocka_unit_test(integers_are_read_exactly),
      cmocka_unit_test(get_int_tells_absent_wrong_type_and_out_of_range_apart),
      cmocka_unit_test(numbers_that_do_not_fit_give_the_default),
      cmocka_unit_test(integers_are_written_as_go_writes_them),
      cmocka_unit_test(parse_never_returns_a_rounded_tree),
      cmocka_unit_test(add_int_adds_all_or_nothing),
      cmocka_unit_test(set_str_replaces_all_or_nothing),
      cmocka_unit_test(obj_creates_the_whole_path_or_nothing),
      cmocka_unit_test(set_str_refuses_a_path_through_a_non_object),
      cmocka_unit_test(missing_arguments_are_einval),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
