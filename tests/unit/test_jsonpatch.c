/* kcr/jsonpatch.h: the JSON Patch between two JSON texts, checked against
 * the expected operations for the hand cases and, for generated pairs,
 * by applying it with a reference applier (tests/common/tjsonpatch.c):
 * the patch applied to the original must give the changed value. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kcr/jsonpatch.h"
#include "tfail.h"
#include "tjsonpatch.h"

/* The patch from a to b, as text; asserts success. */
static char *diff(const char *a, const char *b, unsigned flags, size_t *nops)
{
  struct kcr_buf p = KCR_BUF_INIT;
  size_t n = 99;

  assert_int_equal(KCR_OK,
                   kcr_json_diff(a, strlen(a), b, strlen(b), flags, &p, &n, NULL));
  if(nops)
    *nops = n;
  return kcr_buf_take(&p);
}

static void expect(const char *a, const char *b, const char *want)
{
  char *got = diff(a, b, 0, NULL);
  const char *why;
  char *applied;

  assert_string_equal(want, got);
  applied = tjp_apply(a, strlen(a), got, strlen(got), &why);
  if(!applied)
    fail_msg("patch %s does not apply to %s: %s", got, a, why);
  if(!tjp_equal(applied, strlen(applied), b, strlen(b)))
    fail_msg("patch %s on %s gives %s, not %s", got, a, applied, b);
  free(applied);
  free(got);
}

static void equal_values_give_no_operation(void **state)
{
  static const char *const same[][2] = {
      {"{}", " { } "},
      {"{\"a\":1,\"b\":[1,2]}", "{\"b\":[1,2],\"a\":1}"}, /* member order */
      {"\"caf\\u00e9\"", "\"caf\xc3\xa9\""},              /* escapes */
      {"{\"a\\/b\":1}", "{\"a/b\":1}"},                   /* in names too */
      {"1.0", "1"},                                       /* the same double */
      {"1e3", "1000"},                                    /* an exact integer */
      {"[null,true,false]", "[null,true,false]"},         /* literals */
      {"{\"a\":1,\"a\":2}", "{\"a\":2}"},                 /* the last counts */
      {"123456789012345678901234567890", "123456789012345678901234567890"},
      {"[1e400]", "[1e400]"}, /* beyond double: equal to itself (fuzz_jsonpatch) */
  };
  for(size_t i = 0; i < sizeof(same) / sizeof(same[0]); i++) {
    size_t n;
    char *p = diff(same[i][0], same[i][1], 0, &n);
    assert_string_equal("[]", p);
    assert_int_equal(0, n);
    free(p);
  }
}

static void members_are_added_removed_and_replaced(void **state)
{
  expect("{\"a\":1}", "{\"a\":1,\"b\":{\"c\":true}}",
         "[{\"op\":\"add\",\"path\":\"/b\",\"value\":{\"c\":true}}]");
  expect("{\"a\":1,\"b\":2}", "{\"b\":2}", "[{\"op\":\"remove\",\"path\":\"/a\"}]");
  expect("{\"a\":{\"x\":\"old\"}}", "{\"a\":{\"x\":\"new\"}}",
         "[{\"op\":\"replace\",\"path\":\"/a/x\",\"value\":\"new\"}]");
  /* a changed type is one replace of the whole value */
  expect("{\"a\":{\"x\":1}}", "{\"a\":[1]}",
         "[{\"op\":\"replace\",\"path\":\"/a\",\"value\":[1]}]");
  expect("[1]", "{}", "[{\"op\":\"replace\",\"path\":\"\",\"value\":{}}]");
  expect("{\"a\":null}", "{\"a\":0}",
         "[{\"op\":\"replace\",\"path\":\"/a\",\"value\":0}]");
}

static void names_are_escaped_as_json_pointers(void **state)
{
  /* a label key holds '/', RFC 6901 writes it ~1 and '~' as ~0 */
  expect("{\"metadata\":{\"labels\":{}}}",
         "{\"metadata\":{\"labels\":{\"app.kubernetes.io/name\":\"x\",\"a~b\":\"y\"}}}",
         "[{\"op\":\"add\",\"path\":\"/metadata/labels/app.kubernetes.io~1name\","
         "\"value\":\"x\"},"
         "{\"op\":\"add\",\"path\":\"/metadata/labels/a~0b\",\"value\":\"y\"}]");
  /* a name that needs JSON escaping in the path string */
  expect("{}", "{\"q\\\"\\n\":1}",
         "[{\"op\":\"add\",\"path\":\"/q\\\"\\n\",\"value\":1}]");
}

static void arrays_change_by_index(void **state)
{
  expect("[1,2,3]", "[1,9,3]", "[{\"op\":\"replace\",\"path\":\"/1\",\"value\":9}]");
  expect("[1]", "[1,2,3]",
         "[{\"op\":\"add\",\"path\":\"/1\",\"value\":2},"
         "{\"op\":\"add\",\"path\":\"/2\",\"value\":3}]");
  /* removed from the last down, so each index is valid when applied */
  expect("[1,2,3,4]", "[1,2]",
         "[{\"op\":\"remove\",\"path\":\"/3\"},{\"op\":\"remove\",\"path\":\"/2\"}]");
  expect("[{\"a\":1},{\"a\":2}]", "[{\"a\":1},{\"a\":3}]",
         "[{\"op\":\"replace\",\"path\":\"/1/a\",\"value\":3}]");
}

static void integers_stay_exact_beyond_2_to_the_53(void **state)
{
  /* 2^53 + 1 and 2^53 are one double: still a change, written exactly */
  expect("{\"n\":9007199254740992}", "{\"n\":9007199254740993}",
         "[{\"op\":\"replace\",\"path\":\"/n\",\"value\":9007199254740993}]");
  expect("{\"n\":9223372036854775807}", "{\"n\":-9223372036854775808}",
         "[{\"op\":\"replace\",\"path\":\"/n\",\"value\":-9223372036854775808}]");
  /* beyond int64: only the same literal is equal */
  expect("[18446744073709551616]", "[18446744073709551617]",
         "[{\"op\":\"replace\",\"path\":\"/0\",\"value\":18446744073709551617}]");
  /* and no rounding makes an integer beyond 2^53 equal to a double (the
   * reference applier reads doubles as cJSON does: the text alone here) */
  char *p = diff("[9007199254740993]", "[9007199254740993.0]", 0, NULL);
  assert_string_equal(
      "[{\"op\":\"replace\",\"path\":\"/0\",\"value\":9007199254740993.0}]", p);
  free(p);
}

static void no_remove_keeps_what_the_new_value_lacks(void **state)
{
  size_t n;
  char *p = diff("{\"a\":1,\"b\":[1,2,3],\"c\":{\"d\":1,\"e\":2}}",
                 "{\"b\":[1],\"c\":{\"e\":3},\"f\":true}", KCR_JSON_DIFF_NO_REMOVE, &n);
  assert_string_equal("[{\"op\":\"replace\",\"path\":\"/c/e\",\"value\":3},"
                      "{\"op\":\"add\",\"path\":\"/f\",\"value\":true}]",
                      p);
  assert_int_equal(2, n);
  free(p);
}

static void bad_input_is_refused_and_the_buffer_kept(void **state)
{
  struct kcr_buf p = KCR_BUF_INIT;
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  char deep[400];
  size_t n = 7;

  kcr_buf_puts(&p, "kept");
  assert_int_equal(KCR_EPARSE, kcr_json_diff("{", 1, "{}", 2, 0, &p, &n, &ei));
  assert_non_null(strstr(ei.message, "\"from\""));
  assert_int_equal(0, n);
  kcr_errinfo_cleanup(&ei);
  assert_int_equal(KCR_EPARSE, kcr_json_diff("{}", 2, "[1,]", 4, 0, &p, &n, &ei));
  assert_non_null(strstr(ei.message, "\"to\""));
  kcr_errinfo_cleanup(&ei);
  /* 150 levels: deeper than the walker goes */
  memset(deep, '[', 150);
  memset(deep + 150, ']', 150);
  deep[300] = '\0';
  assert_int_equal(KCR_ERANGE, kcr_json_diff("[]", 2, deep, 300, 0, &p, &n, &ei));
  assert_non_null(strstr(ei.message, "128"));
  kcr_errinfo_cleanup(&ei);
  assert_int_equal(KCR_EINVAL, kcr_json_diff(NULL, 0, "{}", 2, 0, &p, &n, NULL));
  assert_string_equal("kept", kcr_buf_str(&p));
  kcr_buf_cleanup(&p);
}

/* ---- generated pairs ----------------------------------------------------- */

static uint64_t rng = 88172645463325252u;

static unsigned rnd(unsigned n)
{
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return (unsigned)(rng % n);
}

/* A random value, at most depth levels, with names from a small set so
 * that two values share members. */
static void gen(struct kcr_buf *b, int depth)
{
  static const char *const names[] = {"a", "b", "app.kubernetes.io/name", "x~y", "n"};
  static const char *const scalars[] = {
      "0",    "1",     "1.5",  "-2",    "9007199254740993",
      "true", "false", "null", "\"s\"", "\"caf\\u00e9\"",
      "\"\""};
  unsigned k = depth > 0 ? rnd(10) : 9;

  if(k < 3) {
    unsigned n = rnd(5);
    kcr_buf_puts(b, "{");
    for(unsigned i = 0; i < n; i++) {
      kcr_buf_printf(b, "%s\"%s\":", i ? "," : "", names[rnd(5)]);
      gen(b, depth - 1);
    }
    kcr_buf_puts(b, "}");
  } else if(k < 5) {
    unsigned n = rnd(5);
    kcr_buf_puts(b, "[");
    for(unsigned i = 0; i < n; i++) {
      if(i)
        kcr_buf_puts(b, ",");
      gen(b, depth - 1);
    }
    kcr_buf_puts(b, "]");
  } else {
    kcr_buf_puts(b, scalars[rnd(sizeof(scalars) / sizeof(scalars[0]))]);
  }
}

static void every_generated_patch_applies(void **state)
{
  for(int i = 0; i < 3000; i++) {
    struct kcr_buf a = KCR_BUF_INIT, b = KCR_BUF_INIT;
    const char *why;
    gen(&a, 4);
    gen(&b, 4);
    char *p = diff(a.ptr, b.ptr, 0, NULL);
    if(!tjp_apply_check(a.ptr, a.len, p, strlen(p), b.ptr, b.len, &why))
      fail_msg("%s patched by %s: %s (wanted %s)", a.ptr, p, why, b.ptr);
    free(p);
    /* and from the result to itself: nothing */
    p = diff(b.ptr, b.ptr, 0, NULL);
    assert_string_equal("[]", p);
    free(p);
    kcr_buf_cleanup(&a);
    kcr_buf_cleanup(&b);
  }
}

/* ---- allocation failures ------------------------------------------------- */

static const char *const T_FROM =
    "{\"metadata\":{\"name\":\"x\",\"labels\":{\"a\":\"1\",\"b\":\"2\"}},"
    "\"spec\":{\"list\":[1,2,3],\"s\":\"caf\\u00e9\"}}";
static const char *const T_TO =
    "{\"metadata\":{\"name\":\"x\",\"labels\":{\"a\":\"1\",\"c/d\":\"3\"}},"
    "\"spec\":{\"list\":[1,5],\"s\":\"caf\\u00e8\",\"n\":9007199254740993}}";

static bool diff_under_failure(void *ud)
{
  struct kcr_buf p = KCR_BUF_INIT;
  size_t n;
  kcr_err rc = kcr_json_diff(T_FROM, strlen(T_FROM), T_TO, strlen(T_TO), 0, &p, &n, NULL);
  bool ok;

  if(rc) {
    ok = rc == KCR_ENOMEM && n == 0 && p.len == 0;
  } else {
    const char *why;
    tfail_exempt(true);
    char *got = tjp_apply(T_FROM, strlen(T_FROM), p.ptr, p.len, &why);
    ok = got && tjp_equal(got, strlen(got), T_TO, strlen(T_TO)) && n == 6;
    free(got);
    tfail_exempt(false);
  }
  kcr_buf_cleanup(&p);
  return ok;
}

static void allocation_failures_leave_nothing(void **state)
{
  tfail_torture("kcr_json_diff", diff_under_failure, NULL);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(equal_values_give_no_operation),
      cmocka_unit_test(members_are_added_removed_and_replaced),
      cmocka_unit_test(names_are_escaped_as_json_pointers),
      cmocka_unit_test(arrays_change_by_index),
      cmocka_unit_test(integers_stay_exact_beyond_2_to_the_53),
      cmocka_unit_test(no_remove_keeps_what_the_new_value_lacks),
      cmocka_unit_test(bad_input_is_refused_and_the_buffer_kept),
      cmocka_unit_test(every_generated_patch_applies),
      cmocka_unit_test(allocation_failures_leave_nothing),
  };
  tfail_init();
  return cmocka_run_group_tests(tests, NULL, NULL);
}
