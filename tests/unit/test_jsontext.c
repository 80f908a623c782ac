/* kcr/jsontext.h: values read out of JSON text - strings borrowed when they
 * have no escape and unescaped into the arena when they do ("\u00e9",
 * "\n", surrogate pairs), integers exact across int64, numbers whatever the
 * locale - walked member by member, and values written into a buffer. */
#include <locale.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kcr/jsontext.h"

static struct kcr_jv jv(const char *s)
{
  return (struct kcr_jv){.at = s, .n = strlen(s)};
}

static void a_string_without_escapes_is_borrowed(void **state)
{
  struct kcr_arena a = KCR_ARENA_INIT;
  const char *text = "\"plain text\"";
  struct kcr_str s;

  assert_int_equal(KCR_OK, kcr_jv_string(jv(text), &a, 0, &s));
  assert_ptr_equal(text + 1, s.s); /* into the text itself */
  assert_int_equal(10, s.n);
  assert_true(kcr_str_eq(s, "plain text"));
  assert_null(a.head); /* nothing allocated */
  /* a copy goes to the arena, NUL-terminated */
  assert_int_equal(KCR_OK, kcr_jv_string(jv(text), &a, KCR_JV_COPY, &s));
  assert_ptr_not_equal(text + 1, s.s);
  assert_string_equal("plain text", s.s);
  kcr_arena_cleanup(&a);
}

static void escapes_are_unescaped_into_the_arena(void **state)
{
  static const struct {
    const char *json, *bytes;
    size_t n;
  } cases[] = {
      {"\"caf\\u00e9\"", "caf\xc3\xa9", 5},
      {"\"a\\nb\"", "a\nb", 3},
      {"\"q\\\"\\\\\\/\\b\\f\\r\\t\"", "q\"\\/\b\f\r\t", 8},
      {"\"\\ud83d\\ude00\"", "\xf0\x9f\x98\x80", 4}, /* a surrogate pair */
      {"\"x\\ud83dy\"", "x\xef\xbf\xbdy", 5},        /* lone high: U+FFFD */
      {"\"\\ude00\"", "\xef\xbf\xbd", 3},            /* lone low: U+FFFD */
      {"\"a\\u0000b\"", "a\0b", 3},                  /* NUL is a byte */
      {"\"\\u20ac\\u0041\"",
       "\xe2\x82\xac"
       "A",
       4}, /* 3 bytes, 1 byte */
  };
  struct kcr_arena a = KCR_ARENA_INIT;

  for(size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    struct kcr_str s;
    assert_int_equal(KCR_OK, kcr_jv_string(jv(cases[i].json), &a, 0, &s));
    assert_int_equal(cases[i].n, s.n);
    assert_memory_equal(cases[i].bytes, s.s, s.n);
    assert_int_equal('\0', s.s[s.n]);
    assert_true(kcr_jv_str_is(jv(cases[i].json), cases[i].bytes, cases[i].n));
    assert_false(kcr_jv_str_is(jv(cases[i].json), cases[i].bytes, cases[i].n - 1));
  }
  kcr_arena_cleanup(&a);
}

static void what_is_no_string_is_refused(void **state)
{
  struct kcr_arena a = KCR_ARENA_INIT;
  struct kcr_str s = {.s = "x", .n = 1};
  const char *bad[] = {"1", "\"open", "\"bad \\x escape\"", "\"\\u12\"", "", "null"};

  for(size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    assert_int_equal(KCR_EPARSE, kcr_jv_string(jv(bad[i]), &a, 0, &s));
    assert_null(s.s);
  }
  /* escapes need the arena */
  assert_int_equal(KCR_EINVAL, kcr_jv_string(jv("\"a\\nb\""), NULL, 0, &s));
  kcr_arena_cleanup(&a);
}

static void integers_are_exact_across_int64(void **state)
{
  int64_t v;

  assert_int_equal(KCR_OK, kcr_jv_int(jv("9007199254740993"), &v)); /* 2^53 + 1 */
  assert_true(v == INT64_C(9007199254740993));
  assert_int_equal(KCR_OK, kcr_jv_int(jv("9223372036854775807"), &v));
  assert_true(v == INT64_MAX);
  assert_int_equal(KCR_OK, kcr_jv_int(jv("-9223372036854775808"), &v));
  assert_true(v == INT64_MIN);
  assert_int_equal(KCR_OK, kcr_jv_int(jv("-0"), &v));
  assert_true(v == 0);
  assert_int_equal(KCR_ERANGE, kcr_jv_int(jv("9223372036854775808"), &v));
  assert_int_equal(KCR_ERANGE, kcr_jv_int(jv("-9223372036854775809"), &v));
  assert_int_equal(KCR_ERANGE, kcr_jv_int(jv("99999999999999999999999"), &v));
  const char *no[] = {"1.0", "1e3", "01", "-", "", "\"1\"", "true", "1 "};
  for(size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++)
    assert_int_equal(KCR_EPARSE, kcr_jv_int(jv(no[i]), &v));
}

static void numbers_read_whatever_the_locale(void **state)
{
  double d;

  assert_int_equal(KCR_OK, kcr_jv_number(jv("1.5e-7"), &d));
  assert_true(d == 1.5e-7);
  assert_int_equal(KCR_OK, kcr_jv_number(jv("-0"), &d));
  assert_true(d == 0 && signbit(d));
  assert_int_equal(KCR_ERANGE, kcr_jv_number(jv("1e999"), &d));
  assert_int_equal(KCR_EPARSE, kcr_jv_number(jv("\"1\""), &d));
  assert_int_equal(KCR_EPARSE, kcr_jv_number(jv("1x"), &d));
  /* a locale whose decimal point is a comma (if the machine has one) */
  if(setlocale(LC_NUMERIC, "de_DE.UTF-8") || setlocale(LC_NUMERIC, "fr_FR.UTF-8")) {
    struct kcr_buf b = KCR_BUF_INIT;
    assert_int_equal(KCR_OK, kcr_jv_number(jv("2.25"), &d));
    assert_true(d == 2.25);
    assert_int_equal(KCR_OK, kcr_json_put_number(&b, 2.25));
    assert_string_equal("2.25", kcr_buf_str(&b));
    kcr_buf_cleanup(&b);
    setlocale(LC_NUMERIC, "C");
  }
}

static void booleans_and_types(void **state)
{
  bool b;

  assert_int_equal(KCR_OK, kcr_jv_bool(jv("true"), &b));
  assert_true(b);
  assert_int_equal(KCR_OK, kcr_jv_bool(jv("false"), &b));
  assert_false(b);
  assert_int_equal(KCR_EPARSE, kcr_jv_bool(jv("null"), &b));
  assert_int_equal(KCR_EPARSE, kcr_jv_bool(jv("truex"), &b));
  assert_int_equal(KCR_JT_NULL, kcr_jv_type(jv("null")));
  assert_int_equal(KCR_JT_NUMBER, kcr_jv_type(jv("-1")));
  assert_int_equal(KCR_JT_STRING, kcr_jv_type(jv("\"\"")));
  assert_int_equal(KCR_JT_OBJECT, kcr_jv_type(jv("{}")));
  assert_int_equal(KCR_JT_ARRAY, kcr_jv_type(jv("[]")));
  assert_int_equal(KCR_JT_NONE, kcr_jv_type(jv("")));
  assert_int_equal(KCR_JT_NONE, kcr_jv_type(jv("x")));
}

static void a_checked_text_is_walked_member_by_member(void **state)
{
  const char *text =
      "  {\"a\": [1, {\"b\":2}], \"c\\u0064\" : \"x\", \"a\":null} trailing";
  struct kcr_jv v, nm, val;
  struct kcr_jiter it;
  int n = 0;

  assert_int_equal(KCR_OK, kcr_json_check(text, strlen(text), &v));
  assert_ptr_equal(text + 2, v.at);
  assert_int_equal('}', v.at[v.n - 1]);
  assert_true(kcr_jiter_init(&it, v));
  while(kcr_jiter_next(&it, &nm, &val) > 0) {
    if(n == 0) {
      assert_true(kcr_jv_str_is(nm, "a", 1));
      assert_int_equal(KCR_JT_ARRAY, kcr_jv_type(val));
      assert_int_equal(12, val.n);
    } else if(n == 1) {
      assert_true(kcr_jv_str_is(nm, "cd", 2)); /* the name unescaped */
      assert_true(kcr_jv_str_is(val, "x", 1));
    } else {
      assert_true(kcr_jv_str_is(nm, "a", 1)); /* duplicates are handed out */
      assert_int_equal(KCR_JT_NULL, kcr_jv_type(val));
    }
    n++;
  }
  assert_int_equal(3, n);
  assert_int_equal(-1, kcr_jiter_next(&it, &nm, &val)); /* after the end */
  /* an array's elements have no name */
  assert_int_equal(KCR_OK, kcr_json_check("[1,\"2\"]", 7, &v));
  assert_true(kcr_jiter_init(&it, v));
  assert_int_equal(1, kcr_jiter_next(&it, &nm, &val));
  assert_int_equal(0, nm.n);
  assert_false(kcr_jiter_init(&it, jv("\"s\"")));
}

static void malformed_text_is_refused_by_the_check(void **state)
{
  const char *bad[] = {"{",         "{\"a\":}", "[1,]",        "\"\x01\"",
                       "{\"a\" 1}", "",         "\"\\ud800\"", "nul"};
  struct kcr_jv v;

  for(size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    assert_int_equal(KCR_EPARSE, kcr_json_check(bad[i], strlen(bad[i]), &v));
    assert_int_equal(0, v.n);
  }
  assert_int_equal(KCR_EINVAL, kcr_json_check(NULL, 0, &v));
  /* the first value counts; what follows it is not looked at */
  assert_int_equal(KCR_OK, kcr_json_check("01", 2, &v));
  assert_int_equal(1, v.n);
  /* a walk over unchecked text stays inside it */
  struct kcr_jiter it;
  struct kcr_jv nm, val;
  const char *cut = "{\"a\":[1,2";
  assert_true(kcr_jiter_init(&it, (struct kcr_jv){.at = cut, .n = strlen(cut)}));
  assert_int_equal(-1, kcr_jiter_next(&it, &nm, &val));
}

static void values_are_written_as_go_writes_them(void **state)
{
  struct kcr_buf b = KCR_BUF_INIT;

  kcr_json_put_str(&b, (struct kcr_str){.s = "a\"b\n\0c", .n = 6});
  kcr_buf_puts(&b, ",");
  kcr_json_put_str(&b, (struct kcr_str){0});
  kcr_buf_puts(&b, ",");
  kcr_json_put_int(&b, INT64_MIN);
  kcr_buf_puts(&b, ",");
  kcr_json_put_int(&b, INT64_C(1000000000000000));
  kcr_buf_puts(&b, ",");
  kcr_json_put_number(&b, 1.0);
  kcr_buf_puts(&b, ",");
  kcr_json_put_number(&b, 0.1);
  assert_int_equal(KCR_OK, kcr_buf_err(&b));
  assert_string_equal(
      "\"a\\\"b\\n\\u0000c\",\"\",-9223372036854775808,1000000000000000,1,0.1",
      kcr_buf_str(&b));
  assert_int_equal(KCR_EINVAL, kcr_json_put_number(&b, NAN));
  assert_int_equal(KCR_EINVAL, kcr_json_put_number(&b, INFINITY));
  assert_int_equal(KCR_OK, kcr_buf_err(&b)); /* nothing appended, no error kept */
  kcr_buf_cleanup(&b);
}

static void a_kcr_str_compares_and_copies(void **state)
{
  char *c = NULL;

  assert_true(kcr_str_eq(kcr_str_c("abc"), "abc"));
  assert_false(kcr_str_eq(kcr_str_c("abc"), "ab"));
  assert_true(kcr_str_eq(kcr_str_c(NULL), NULL));
  assert_false(kcr_str_eq(kcr_str_c(""), NULL)); /* empty is not absent */
  assert_true(kcr_str_same(kcr_str_c(""), (struct kcr_str){.s = "x", .n = 0}));
  assert_false(kcr_str_same(kcr_str_c(""), kcr_str_c(NULL)));
  assert_int_equal(KCR_OK, kcr_str_dup((struct kcr_str){.s = "abcdef", .n = 3}, &c));
  assert_string_equal("abc", c);
  free(c);
  assert_int_equal(KCR_EINVAL, kcr_str_dup((struct kcr_str){.s = "a\0b", .n = 3}, &c));
  assert_null(c);
  assert_int_equal(KCR_OK, kcr_str_dup(kcr_str_c(NULL), &c));
  assert_string_equal("", c);
  free(c);
}

static void a_key_is_found_among_keys(void **state)
{
  const struct kcr_str k[] = {kcr_str_c("a"), kcr_str_c("b"), kcr_str_c("a"),
                              kcr_str_c("")};

  assert_int_equal(1, kcr_str_index(k, 4, "b"));
  assert_int_equal(2, kcr_str_index(k, 4, "a")); /* the last, as decoding keeps it */
  assert_int_equal(3, kcr_str_index(k, 4, ""));
  assert_int_equal(4, kcr_str_index(k, 4, "c")); /* absent: n */
  assert_int_equal(1, kcr_str_index(k, 1, "b")); /* only keys[0..n) */
  assert_int_equal(0, kcr_str_index(NULL, 0, "a"));
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(a_string_without_escapes_is_borrowed),
      cmocka_unit_test(escapes_are_unescaped_into_the_arena),
      cmocka_unit_test(what_is_no_string_is_refused),
      cmocka_unit_test(integers_are_exact_across_int64),
      cmocka_unit_test(numbers_read_whatever_the_locale),
      cmocka_unit_test(booleans_and_types),
      cmocka_unit_test(a_checked_text_is_walked_member_by_member),
      cmocka_unit_test(malformed_text_is_refused_by_the_check),
      cmocka_unit_test(values_are_written_as_go_writes_them),
      cmocka_unit_test(a_kcr_str_compares_and_copies),
      cmocka_unit_test(a_key_is_found_among_keys),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
