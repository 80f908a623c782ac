/* Kubernetes integers (int64: generation, observedGeneration,
 * gracePeriodSeconds ...) read and written exactly: a parsed tree prints
 * every integer as it was sent, a written one as Go's encoder would, and
 * nothing that does not fit an int64 is ever turned into one. Values found
 * in text without a tree (kcr__json_spans): exact spans, the last member
 * of a name, never a read past the text, nothing in malformed text. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/json-int.h"
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
  assert_int_equal(9007199254740993LL, kcr_json_int(o, "/g", 0));
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
      /* cJSON skips a byte-order mark only in a text of 5 bytes or more
       * (tests/fuzz/fuzz_json found these taken for out of memory) */
      "\xEF\xBB\xBF"
      "2",
      "\xEF\xBB\xBF"
      "\"",
      "\xEF\xBB\xBF",
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
  /* A byte-order mark before 2 bytes or more is skipped. */
  assert_int_equal(KCR_OK, kcr_json_parse("\xEF\xBB\xBF"
                                          "12",
                                          5, &o, NULL));
  assert_true(cJSON_IsNumber(o) && o->valueint == 12);
  cJSON_Delete(o);
}

/* ---- reading ---- */

static void integers_are_read_exactly(void **state)
{
  cJSON *o = parse("{\"a\":9007199254740993,\"b\":-9223372036854775808,"
                   "\"c\":9223372036854775807,\"d\":1000000000000001,\"e\":-7,"
                   "\"f\":{\"g\":12}}");
  assert_int_equal(9007199254740993LL, kcr_json_int(o, "/a", 0));
  assert_true(INT64_MIN == kcr_json_int(o, "/b", 0));
  assert_true(INT64_MAX == kcr_json_int(o, "/c", 0));
  assert_int_equal(1000000000000001LL, kcr_json_int(o, "/d", 0));
  assert_int_equal(-7, kcr_json_int(o, "/e", 0));
  assert_int_equal(12, kcr_json_int(o, "/f/g", 0));
  cJSON_Delete(o);
}

static void get_int_tells_absent_wrong_type_and_out_of_range_apart(void **state)
{
  cJSON *o = parse("{\"null\":null,\"str\":\"5\",\"half\":1.5,\"obj\":{},"
                   "\"huge\":1e300,\"inf\":1e400,\"two63\":9223372036854775808,"
                   "\"below\":-9223372036854775809,\"ok\":9007199254740993}");
  int64_t v = 42;
  assert_int_equal(KCR_ENOTFOUND, kcr_json_get_int(NULL, &v));
  assert_int_equal(KCR_ENOTFOUND, kcr_json_get_int(kcr_json_at(o, "/absent"), &v));
  assert_int_equal(KCR_ENOTFOUND, kcr_json_get_int(kcr_json_at(o, "/null"), &v));
  assert_int_equal(KCR_EPARSE, kcr_json_get_int(kcr_json_at(o, "/str"), &v));
  assert_int_equal(KCR_EPARSE, kcr_json_get_int(kcr_json_at(o, "/half"), &v));
  assert_int_equal(KCR_EPARSE, kcr_json_get_int(kcr_json_at(o, "/obj"), &v));
  assert_int_equal(KCR_ERANGE, kcr_json_get_int(kcr_json_at(o, "/huge"), &v));
  assert_int_equal(KCR_ERANGE, kcr_json_get_int(kcr_json_at(o, "/inf"), &v));
  assert_int_equal(KCR_ERANGE, kcr_json_get_int(kcr_json_at(o, "/two63"), &v));
  assert_int_equal(KCR_ERANGE, kcr_json_get_int(kcr_json_at(o, "/below"), &v));
  assert_int_equal(42, v); /* untouched on every error */
  assert_int_equal(KCR_OK, kcr_json_get_int(kcr_json_at(o, "/ok"), &v));
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
    assert_int_equal(-1, kcr_json_int(o, "/n", -1));
    cJSON_Delete(o);
  }
  cJSON *o = cJSON_CreateObject();
  cJSON_AddNumberToObject(o, "n", -9223372036854775808.0); /* INT64_MIN fits */
  assert_true(INT64_MIN == kcr_json_int(o, "/n", -1));
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
    assert_int_equal(KCR_OK, kcr_json_get_int(kcr_json_at(o, "/n"), &back));
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
  ok = n ? kcr_json_int(o, "/n", 0) == *(int64_t *)ud
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
  tfail_torture("kcr_json_set_str (replace)", set_str_all_or_nothing, "/metadata/name");
  tfail_torture("kcr_json_set_str (create)", set_str_all_or_nothing,
                "/metadata/labels/app");
  tfail_torture("kcr_json_set_str (top level)", set_str_all_or_nothing, "/kind");
}

static bool obj_all_or_nothing(void *ud)
{
  cJSON *o, *got;
  char *after;
  bool ok;

  tfail_exempt(true);
  o = cJSON_Parse(set_base);
  tfail_exempt(false);
  got = kcr_json_obj(o, "/spec/template/metadata");
  tfail_exempt(true);
  after = kcr_json_to_text(o);
  ok = got ? cJSON_IsObject(got) && kcr_json_at(o, "/spec/template/metadata") == got
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
  assert_int_equal(KCR_EINVAL, kcr_json_set_str(o, "/metadata/name", "n"));
  cJSON_Delete(o);
}

/* ---- strings that are not C strings, duplicate names ---- */

static void expect_span(const char *text, const char *path, const char *want);

/* cJSON cuts a string at a decoded \u0000 ("Ready\u0000x" would read
 * "Ready"): the parsed value is no string at all, but its literal as a Raw
 * node, which prints back as it came. */
static void a_string_holding_nul_is_no_c_string(void **state)
{
  static const char text[] = "{\"type\":\"Ready\\u0000x\",\"reason\":\"Ok\\u0000 bad\","
                             "\"plain\":\"a\\\\u0000b\",\"l\":[\"\\u0000\",\"z\"],"
                             "\"big\":1000000000000001,\"t\":\"x\\\"\\u0000\"}";
  cJSON *o = parse(text);
  int64_t v = 7;

  assert_null(kcr_json_str(o, "/type"));
  assert_null(kcr_json_str(o, "/reason"));
  assert_null(kcr_json_member_str(o, "type"));
  assert_null(kcr_json_str(o, "/t"));
  assert_false(cJSON_IsString(kcr_json_at(o, "/type")));
  assert_true(kcr__json_nul_string(kcr_json_at(o, "/type")));
  assert_true(kcr__json_nul_string(kcr_json_at(o, "/t")));
  assert_true(kcr__json_nul_string(cJSON_GetArrayItem(kcr_json_at(o, "/l"), 0)));
  assert_string_equal("z", cJSON_GetArrayItem(kcr_json_at(o, "/l"), 1)->valuestring);
  /* an escaped backslash before "u0000" is no NUL */
  assert_string_equal("a\\u0000b", kcr_json_str(o, "/plain"));
  assert_false(kcr__json_nul_string(kcr_json_at(o, "/plain")));
  /* a big integer's Raw node is not taken for one, nor is one read as an int */
  assert_false(kcr__json_nul_string(kcr_json_at(o, "/big")));
  assert_false(kcr__json_nul_string(NULL));
  assert_int_equal(KCR_EPARSE, kcr_json_get_int(kcr_json_at(o, "/type"), &v));
  assert_int_equal(7, v);
  assert_prints(text, o);
  cJSON_Delete(o);
  /* a document that is only such a string */
  o = parse("\"\\u0000\"");
  assert_true(kcr__json_nul_string(o));
  cJSON_Delete(o);
}

/* A name is a C string or nothing: a text with a name holding \u0000 is
 * refused, by the parser and by the validator the text paths use. */
static void a_name_holding_nul_is_refused(void **state)
{
  static const char *const docs[] = {
      "{\"type\\u0000x\":\"Ready\"}",
      "{\"a\":{\"b\":[{\"\\u0000\":1}]}}",
      "{\"type\":\"Ready\",\"type\\u0000\":\"Gone\"}",
  };
  for(size_t i = 0; i < sizeof(docs) / sizeof(docs[0]); i++) {
    struct kcr_errinfo ei = KCR_ERRINFO_INIT;
    cJSON *o = (cJSON *)1;
    size_t objlen = 1;
    assert_int_equal(KCR_EPARSE, kcr_json_parse(docs[i], strlen(docs[i]), &o, &ei));
    assert_null(o);
    assert_non_null(ei.message);
    if(!strstr(ei.message, "member name") || !strstr(ei.message, "\\u0000"))
      fail_msg("%s: %s", docs[i], ei.message);
    kcr_errinfo_cleanup(&ei);
    kcr__json_scan(docs[i], strlen(docs[i]), NULL, 0, &objlen, NULL);
    assert_int_equal(0, objlen);
  }
  /* a raw NUL byte is no JSON (cJSON alone takes it in a string, and cuts
   * the string there) */
  static const char raw[] = "{\"type\":\"Ready\0x\",\"b\":1}";
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  cJSON *o = (cJSON *)1;
  assert_int_equal(KCR_EPARSE, kcr_json_parse(raw, sizeof(raw) - 1, &o, &ei));
  assert_null(o);
  if(!strstr(ei.message, "at byte 14 of ") || !strstr(ei.message, ": a NUL byte"))
    fail_msg("%s", ei.message);
  kcr_errinfo_cleanup(&ei);
  /* a value holding it passes the validator (the parser keeps it Raw) */
  expect_span("{\"a\":\"x\\u0000\"}", "/a", "\"x\\u0000\"");
}

/* Go's decoder keeps the last member of a name; so does every lookup in a
 * parsed tree (cJSON's own too), in small and large objects, at any depth. */
static void the_last_member_of_a_name_wins(void **state)
{
  cJSON *o = parse("{\"type\":\"Ready\",\"reason\":\"Ok\",\"status\":\"True\","
                   "\"reason\":\"Bad\",\"n\":1,\"m\":{\"x\":1,\"x\":{\"y\":2}},"
                   "\"n\":9007199254740993,\"l\":[{\"k\":\"a\",\"k\":\"b\"}]}");
  char big[4096];
  size_t at = 0;
  int64_t v = 0;

  assert_string_equal("Bad", kcr_json_str(o, "/reason"));
  assert_string_equal("Bad", kcr_json_member_str(o, "reason"));
  assert_string_equal("Bad", cJSON_GetObjectItemCaseSensitive(o, "reason")->valuestring);
  assert_int_equal(2, kcr_json_int(o, "/m/x/y", 0));
  assert_int_equal(KCR_OK, kcr_json_get_int(kcr_json_at(o, "/n"), &v));
  assert_int_equal(9007199254740993LL, v);
  assert_string_equal(
      "b",
      cJSON_GetObjectItem(cJSON_GetArrayItem(kcr_json_at(o, "/l"), 0), "k")->valuestring);
  /* the earlier members are gone: the later ones stay where they were */
  assert_prints("{\"type\":\"Ready\",\"status\":\"True\",\"reason\":\"Bad\","
                "\"m\":{\"x\":{\"y\":2}},\"n\":9007199254740993,\"l\":[{\"k\":\"b\"}]}",
                o);
  cJSON_Delete(o);

  /* past the small-object path: 60 members, each name three times */
  at += (size_t)snprintf(big + at, sizeof(big) - at, "{");
  for(int round = 0; round < 3; round++)
    for(int i = 0; i < 20; i++)
      at += (size_t)snprintf(big + at, sizeof(big) - at, "%s\"k%d\":%d",
                             round || i ? "," : "", i, round * 100 + i);
  snprintf(big + at, sizeof(big) - at, "}");
  o = parse(big);
  assert_int_equal(20, cJSON_GetArraySize(o));
  for(int i = 0; i < 20; i++) {
    char name[8];
    snprintf(name, sizeof(name), "/k%d", i);
    assert_int_equal(200 + i, kcr_json_int(o, name, -1));
  }
  cJSON_Delete(o);
}

/* ---- spans ---- */

/* The span of each path in text, as "/path=value" lines ("/path=<none>"),
 * read from a copy of exactly len bytes with no terminator (ASan: no read
 * past it). */
static char *spans(const char *text, size_t len, const char *const *paths)
{
  struct kcr__json_want w[KCR__JSON_WANT_MAX + 2];
  char *copy = malloc(len ? len : 1), *out = NULL;
  size_t nw = 0, found, have = 0;

  memcpy(copy, text, len);
  for(; paths[nw]; nw++)
    w[nw] = (struct kcr__json_want){paths[nw], (const char *)1, 42};
  found = kcr__json_spans(copy, len, w, nw);
  for(size_t i = 0; i < nw; i++) {
    char *line = NULL, *prev = out;
    if(w[i].at) {
      assert_true(w[i].at >= copy && w[i].at + w[i].n <= copy + len);
      have++;
      assert_int_not_equal(-1, asprintf(&line, "%s%s=%.*s\n", prev ? prev : "",
                                        w[i].path ? w[i].path : "NULL", (int)w[i].n,
                                        w[i].at));
    } else {
      assert_int_equal(0, w[i].n);
      assert_int_not_equal(-1, asprintf(&line, "%s%s=<none>\n", prev ? prev : "",
                                        w[i].path ? w[i].path : "NULL"));
    }
    free(prev);
    out = line;
  }
  assert_int_equal(have, found);
  free(copy);
  return out ? out : strdup("");
}

#define PATHS(...) ((const char *const[]){__VA_ARGS__, NULL})

static void expect_spans(const char *text, const char *const *paths, const char *want)
{
  char *got = spans(text, strlen(text), paths);
  if(strcmp(got, want))
    fail_msg("spans in %s:\n%s\nwant\n%s", text, got, want);
  free(got);
}

/* One path: its value or "<none>". */
static void expect_span(const char *text, const char *path, const char *want)
{
  char *w = NULL;
  assert_int_not_equal(-1, asprintf(&w, "%s=%s\n", path, want));
  expect_spans(text, PATHS(path), w);
  free(w);
}

static const char answer[] =
    "{\"apiVersion\":\"v1\",\"kind\":\"EBD\",\"metadata\":{\"annotations\":"
    "{\"resourceVersion\":\"666\",\"x\":\"\\\"uid\\\":\\\"no\\\"\"},\"managedFields\":"
    "[{\"fieldsV1\":{\"f:status\":{\"k:{\\\"type\\\":\\\"Ready\\\"}\":{}}},\"manager\":"
    "\"m\"}],\"name\":\"w\",\"resourceVersion\":\"1234\",\"uid\":\"u-1\"},\"spec\":"
    "{\"status\":\"not this\"},\"status\" : { \"observedGeneration\" : 9007199254740993 ,"
    "\"conditions\":[ ] } } trailing text";

static void spans_are_found_in_one_pass(void **state)
{
  expect_spans(
      answer,
      PATHS("/metadata/uid", "/metadata/resourceVersion", "/status", "/kind",
            "/metadata/annotations/resourceVersion", "/status/observedGeneration",
            "/status/conditions", "/spec/status", "/metadata/generation"),
      "/metadata/uid=\"u-1\"\n"
      "/metadata/resourceVersion=\"1234\"\n"
      "/status={ \"observedGeneration\" : 9007199254740993 ,\"conditions\":[ ] }\n"
      "/kind=\"EBD\"\n"
      "/metadata/annotations/resourceVersion=\"666\"\n"
      "/status/observedGeneration=9007199254740993\n"
      "/status/conditions=[ ]\n"
      "/spec/status=\"not this\"\n"
      "/metadata/generation=<none>\n");
  /* Not there, or not through objects; empty and NULL paths. */
  expect_span(answer, "/meta", "<none>");
  expect_span(answer, "/metadata/uid/x", "<none>");
  expect_span(answer, "/metadata/managedFields/manager", "<none>");
  expect_spans(answer, PATHS("", "/kind"), "=<none>\n/kind=\"EBD\"\n");
  struct kcr__json_want nul = {NULL, NULL, 0};
  assert_int_equal(0, kcr__json_spans(answer, strlen(answer), &nul, 1));
  assert_int_equal(0, kcr__json_spans(NULL, 0, &nul, 1));
  assert_int_equal(0, kcr__json_spans(answer, strlen(answer), NULL, 0));
  /* The last member of a name counts, as in the tree kcr_json_parse makes
   * (and Go's decoder): a later one replaces what an earlier one held. */
  expect_span("{\"a\":1,\"a\":2}", "/a", "2");
  expect_spans("{\"a\":{\"b\":1},\"a\":{\"c\":2}}", PATHS("/a/b", "/a/c", "/a"),
               "/a/b=<none>\n/a/c=2\n/a={\"c\":2}\n");
  expect_spans("{\"a\":{\"b\":1},\"a\":3}", PATHS("/a/b", "/a"), "/a/b=<none>\n/a=3\n");
  /* Names match as written: escapes are not decoded. */
  expect_span("{\"\\u0061\":1,\"a\":2}", "/a", "2");
  expect_span("{\"ab\":1,\"a\":2}", "/a", "2");
  expect_span("{\"a\":1}", "/ab", "<none>");
  /* A value wanted whole and inside at once. */
  expect_spans("{\"a\":{\"b\":[1,{\"c\":2}]}}", PATHS("/a", "/a/b"),
               "/a={\"b\":[1,{\"c\":2}]}\n/a/b=[1,{\"c\":2}]\n");
  /* The whole object must be well-formed; what follows it is not read. */
  static const char *const bad[] = {"{\"a\":1,\"b\":",
                                    "{\"a\":1,\"x\":tru}",
                                    "{\"a\":1,\"x\":01}",
                                    "{\"x\":\"\\q\",\"a\":1}",
                                    "{\"x\":[1,],\"a\":1}",
                                    "{\"x\":{\"y\":1],\"a\":1}",
                                    "{\"x\" 1,\"a\":1}",
                                    "{\"a\":1,}",
                                    "{\"a\":\"open",
                                    "[{\"a\":1}]",
                                    "\"a\"",
                                    "",
                                    "{\"a\":1",
                                    "{\"a\":\"\x01\"}",
                                    "{\"a\":1 \"b\":2}"};
  for(size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
    expect_span(bad[i], "/a", "<none>");
  expect_span("{\"a\":1} {", "/a", "1");
  expect_span(" \n{ \"a\" :\t1 }", "/a", "1");
  expect_span("{}", "/a", "<none>");

  /* Every proper prefix of an answer is malformed: nothing found. */
  size_t len = strlen(answer) - strlen(" trailing text");
  for(size_t i = 0; i <= len; i++) {
    char *got = spans(answer, i, PATHS("/kind"));
    assert_string_equal(i == len ? "/kind=\"EBD\"\n" : "/kind=<none>\n", got);
    free(got);
  }
  /* More wants than it takes: the rest find nothing. */
  const char *many[KCR__JSON_WANT_MAX + 2];
  for(size_t i = 0; i <= KCR__JSON_WANT_MAX; i++)
    many[i] = "/kind";
  many[KCR__JSON_WANT_MAX + 1] = NULL;
  char *got = spans(answer, strlen(answer), many);
  assert_non_null(strstr(got, "/kind=<none>"));
  assert_int_equal(KCR__JSON_WANT_MAX, (int)(strstr(got, "/kind=<none>") - got) /
                                           (int)strlen("/kind=\"EBD\"\n"));
  free(got);
}

/* Nesting: values as deep as cJSON parses them; deeper is malformed (the
 * validator's limit, the outer object counted), never a stack overflow. */
static void spans_skip_deep_values_within_the_limit(void **state)
{
  size_t depth[] = {100, CJSON_NESTING_LIMIT - 2, CJSON_NESTING_LIMIT - 1, 100000};
  for(size_t k = 0; k < sizeof(depth) / sizeof(depth[0]); k++) {
    size_t d = depth[k], at = 0;
    char *t = malloc(2 * d + 32), *got;
    at += (size_t)sprintf(t, "{\"x\":");
    memset(t + at, '[', d);
    at += d;
    memset(t + at, ']', d);
    at += d;
    at += (size_t)sprintf(t + at, ",\"a\":7}");
    got = spans(t, at, PATHS("/a"));
    free(t);
    assert_string_equal(d < CJSON_NESTING_LIMIT - 1 ? "/a=7\n" : "/a=<none>\n", got);
    free(got);
  }
}

/* A missing argument is the caller's mistake (KCR_EINVAL), not memory
 * running out (a NULL value was reported as KCR_ENOMEM). */
static void missing_arguments_are_einval(void **state)
{
  cJSON *o = parse("{}"), *out = (cJSON *)1;
  assert_int_equal(KCR_EINVAL, kcr_json_set_str(o, "/metadata/name", NULL));
  assert_int_equal(KCR_EINVAL, kcr_json_set_str(o, NULL, "v"));
  assert_int_equal(KCR_EINVAL, kcr_json_set_str(NULL, "/a", "v"));
  assert_int_equal(KCR_EINVAL, kcr_json_parse(NULL, 0, &out, NULL));
  assert_null(out);
  assert_null(kcr_json_to_text(NULL));
  cJSON_Delete(o);
}

/* kcr__json_scan: where the object ends and whether it is compact. */
static void scan_tells_the_object_s_length_and_layout(void **state)
{
  static const struct {
    const char *text;
    size_t objlen;
    bool compact;
  } cases[] = {
      {"{\"a\":1} trailing", 7, true},
      {"{\"a\":\"x y\",\"b\":[1,{\"c\":null}]}", 30, true},
      {"{ \"a\":1}", 8, false},
      {"{\"a\":[1, 2]}", 12, false},
      {"{\"a\":1}\n", 7, true}, /* after the object: not looked at */
      {" {\"a\":1}", 8, false},
      {"{\"a\":1", 0, false},
      {"[1]", 0, false},
      {"", 0, false},
  };
  for(size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    struct kcr__json_want w = {.path = "/a"};
    size_t objlen = 99;
    bool compact = !cases[i].compact;
    print_message("%zu: %s\n", i, cases[i].text);
    kcr__json_scan(cases[i].text, strlen(cases[i].text), &w, 1, &objlen, &compact);
    assert_int_equal(cases[i].objlen, objlen);
    assert_int_equal(cases[i].compact, compact);
    assert_int_equal(cases[i].objlen != 0, w.at != NULL);
    objlen = 99;
    kcr__json_scan(cases[i].text, strlen(cases[i].text), NULL, 0, &objlen, NULL);
    assert_int_equal(cases[i].objlen, objlen); /* no wants: the check alone */
  }
}

/* Strings are checked 8 bytes at a time: a byte that needs a look (control,
 * quote, backslash) is found at every offset, and bytes from 0x20 up, 0x7f
 * and 0x80-0xff included, pass. */
static void strings_are_checked_at_every_offset(void **state)
{
  static const struct {
    char c;
    bool ok;
  } bytes[] = {{'\x01', false}, {'\x1f', false}, {'\n', false},  {' ', true},
               {'\x7f', true},  {'\x80', true},  {'\xff', true}, {'a', true}};
  for(int k = 0; k < 20; k++)
    for(int m = 0; m < 12; m++)
      for(size_t b = 0; b < sizeof(bytes) / sizeof(bytes[0]); b++) {
        char text[64];
        size_t objlen, n = 0;
        text[n++] = '{';
        text[n++] = '"';
        text[n++] = 'k';
        text[n++] = '"';
        text[n++] = ':';
        text[n++] = '"';
        for(int i = 0; i < k; i++)
          text[n++] = 'a';
        text[n++] = bytes[b].c;
        for(int i = 0; i < m; i++)
          text[n++] = 'b';
        text[n++] = '"';
        text[n++] = '}';
        kcr__json_scan(text, n, NULL, 0, &objlen, NULL);
        if(bytes[b].ok != (objlen == n))
          fail_msg("byte 0x%02x after %d bytes, %d before the quote: %s",
                   (unsigned char)bytes[b].c, k, m, bytes[b].ok ? "refused" : "accepted");
        /* an escape there: \" and \\ pass, \x does not */
        text[6 + k] = '\\';
        if(m) {
          text[7 + k] = '"';
          kcr__json_scan(text, n, NULL, 0, &objlen, NULL);
          assert_int_equal(n, objlen);
          text[7 + k] = 'x';
          kcr__json_scan(text, n, NULL, 0, &objlen, NULL);
          assert_int_equal(0, objlen);
        }
        /* a quote there ends the string early: the rest is not JSON */
        text[6 + k] = '"';
        kcr__json_scan(text, n, NULL, 0, &objlen, NULL);
        assert_int_equal(0, objlen);
      }
}

/* kcr__json_iter: members and elements as written, in order; 0 at the end
 * and -1 after it; -1 where the structure breaks. */
static void the_iterator_hands_out_members_and_elements(void **state)
{
  static const char obj[] = "{\"a\":1,\"b\\\"\":[1,\"]\"],\"c\":{\"d\":\"}\"}}";
  static const char *const keys[] = {"a", "b\\\"", "c"};
  static const char *const vals[] = {"1", "[1,\"]\"]", "{\"d\":\"}\"}"};
  struct kcr__json_iter it;
  const char *key, *at;
  size_t kl, n;

  assert_true(kcr__json_iter_init(&it, obj, strlen(obj)));
  for(int i = 0; i < 3; i++) {
    assert_int_equal(1, kcr__json_iter_next(&it, &key, &kl, &at, &n));
    assert_int_equal(strlen(keys[i]), kl);
    assert_memory_equal(keys[i], key, kl);
    assert_int_equal(strlen(vals[i]), n);
    assert_memory_equal(vals[i], at, n);
  }
  assert_int_equal(0, kcr__json_iter_next(&it, &key, &kl, &at, &n));
  assert_int_equal(-1, kcr__json_iter_next(&it, &key, &kl, &at, &n));

  assert_true(kcr__json_iter_init(&it, vals[1], strlen(vals[1])));
  assert_int_equal(1, kcr__json_iter_next(&it, &key, &kl, &at, &n));
  assert_null(key);
  assert_int_equal(1, n);
  assert_int_equal(1, kcr__json_iter_next(&it, &key, &kl, &at, &n));
  assert_int_equal(3, n);
  assert_int_equal(0, kcr__json_iter_next(&it, &key, &kl, &at, &n));

  assert_true(kcr__json_iter_init(&it, "{}", 2));
  assert_int_equal(0, kcr__json_iter_next(&it, &key, &kl, &at, &n));
  assert_true(kcr__json_iter_init(&it, "[ ]", 3));
  assert_int_equal(0, kcr__json_iter_next(&it, &key, &kl, &at, &n));
  assert_true(kcr__json_iter_init(&it, "{\"a\":1,}", 8));
  assert_int_equal(1, kcr__json_iter_next(&it, &key, &kl, &at, &n));
  assert_int_equal(-1, kcr__json_iter_next(&it, &key, &kl, &at, &n));
  assert_true(kcr__json_iter_init(&it, "{\"a\" 1}", 7));
  assert_int_equal(-1, kcr__json_iter_next(&it, &key, &kl, &at, &n));
  assert_true(kcr__json_iter_init(&it, "{\"a\":[}", 7));
  assert_int_equal(-1, kcr__json_iter_next(&it, &key, &kl, &at, &n));
  assert_false(kcr__json_iter_init(&it, "\"x\"", 3));
  assert_int_equal(-1, kcr__json_iter_next(&it, &key, &kl, &at, &n));
  assert_false(kcr__json_iter_init(&it, NULL, 0));
}

/* A known value is stepped over by its span alone (taken as given: here
 * one shorter than the value, to show it is not walked), and only where
 * one starts and fits in the text; init forgets them. */
static void the_iterator_steps_over_known_values(void **state)
{
  static const char obj[] = "{\"a\":[1,2],\"b\":{\"c\":[3]},\"d\":4}";
  const char *b = strstr(obj, "{\"c\""), *key, *at;
  struct kcr__json_want known[2] = {{.at = b, .n = strlen("{\"c\":[3]}")},
                                    {.at = obj + 5, .n = sizeof(obj)}};
  struct kcr__json_iter it;
  size_t kl, n;

  assert_true(kcr__json_iter_init(&it, obj, strlen(obj)));
  it.known = known;
  it.nknown = 2; /* the second does not fit: the value is walked */
  assert_int_equal(1, kcr__json_iter_next(&it, &key, &kl, &at, &n));
  assert_int_equal(5, n);
  assert_int_equal(1, kcr__json_iter_next(&it, &key, &kl, &at, &n));
  assert_ptr_equal(b, at);
  assert_int_equal(known[0].n, n);
  assert_int_equal(1, kcr__json_iter_next(&it, &key, &kl, &at, &n));
  assert_memory_equal("4", at, n);
  assert_int_equal(0, kcr__json_iter_next(&it, &key, &kl, &at, &n));

  known[0].n = strlen("{\"c\":[3"); /* not the whole value: the walk resumes there */
  assert_true(kcr__json_iter_init(&it, obj, strlen(obj)));
  it.known = known;
  it.nknown = 1;
  assert_int_equal(1, kcr__json_iter_next(&it, &key, &kl, &at, &n));
  assert_int_equal(1, kcr__json_iter_next(&it, &key, &kl, &at, &n));
  assert_int_equal(known[0].n, n);
  assert_int_equal(-1, kcr__json_iter_next(&it, &key, &kl, &at, &n));
  assert_true(kcr__json_iter_init(&it, obj, strlen(obj)));
  assert_null(it.known);
  assert_int_equal(0, it.nknown);
}

/* kcr_json_hash: equal trees hash the same (parsed or built, and whatever
 * the spacing of the text); any one difference - a value, a kind, a name,
 * the order of members, where a member sits, a number 1 against a string
 * "1" - gives another digest. */
static void a_tree_s_digest_follows_its_content(void **state)
{
  static const char base[] =
      "{\"a\":\"x\",\"b\":[1,2.5,true,null,{\"c\":\"\"}],\"d\":{\"e\":-1}}";
  static const char *const other[] = {
      "{\"a\":\"y\",\"b\":[1,2.5,true,null,{\"c\":\"\"}],\"d\":{\"e\":-1}}",
      "{\"a\":\"x\",\"b\":[1,2.5,false,null,{\"c\":\"\"}],\"d\":{\"e\":-1}}",
      "{\"a\":\"x\",\"b\":[1,2.5,true,null,{\"c\":null}],\"d\":{\"e\":-1}}",
      "{\"b\":[1,2.5,true,null,{\"c\":\"\"}],\"a\":\"x\",\"d\":{\"e\":-1}}",
      "{\"a\":\"x\",\"b\":[1,2.5,true,null,{\"c\":\"\"}],\"d\":{\"e\":-1,\"f\":0}}",
      "{\"a\":\"x\",\"b\":[1,2.5,true,null,{\"c\":\"\"},{}],\"d\":{\"e\":-1}}",
      "{\"a\":\"x\",\"b\":[1,2.5,true,null],\"c\":\"\",\"d\":{\"e\":-1}}",
      "{\"a\":\"x\",\"b\":[\"1\",2.5,true,null,{\"c\":\"\"}],\"d\":{\"e\":-1}}",
      "{\"ab\":\"x\",\"b\":[1,2.5,true,null,{\"c\":\"\"}],\"d\":{\"e\":-1}}",
      "{\"a\":\"x\",\"b\":[1,2.5,true,null,{\"c\":\"\"}],\"d\":{\"e\":1}}",
      "{\"a\":\"x\",\"b\":[1,2.5,true,null,{\"c\":\"\"}],\"d\":[-1]}",
      "{\"a\":\"x\",\"b\":{\"0\":1},\"d\":{\"e\":-1}}",
  };
  cJSON *t = tfail_parse(base),
        *spaced = tfail_parse(" { \"a\" : \"x\" , \"b\" : [ 1 , "
                              "2.5 , true , null , { \"c\" : "
                              "\"\" } ] , \"d\" : { \"e\" : -1 } } ");
  cJSON *built = cJSON_CreateObject(), *b, *o;
  uint64_t h = kcr_json_hash(t);

  /* The same tree made by hand, in the same order. */
  cJSON_AddStringToObject(built, "a", "x");
  b = cJSON_AddArrayToObject(built, "b");
  cJSON_AddItemToArray(b, cJSON_CreateNumber(1));
  cJSON_AddItemToArray(b, cJSON_CreateNumber(2.5));
  cJSON_AddItemToArray(b, cJSON_CreateTrue());
  cJSON_AddItemToArray(b, cJSON_CreateNull());
  cJSON_AddItemToArray(b, o = cJSON_CreateObject());
  cJSON_AddStringToObject(o, "c", "");
  cJSON_AddNumberToObject(cJSON_AddObjectToObject(built, "d"), "e", -1);

  assert_true(h == kcr_json_hash(t));
  assert_true(h == kcr_json_hash(spaced));
  assert_true(h == kcr_json_hash(built));
  for(size_t i = 0; i < sizeof(other) / sizeof(other[0]); i++) {
    cJSON *x = tfail_parse(other[i]);
    if(kcr_json_hash(x) == h)
      fail_msg("%s hashes as %s", other[i], base);
    cJSON_Delete(x);
  }
  assert_true(kcr_json_hash(NULL) == kcr_json_hash(cJSON_GetArrayItem(b, 3))); /* null */
  /* Trees larger than the digest's buffer, with a string larger too: the
   * same content (made twice) hashes the same, one byte at the end not. */
  {
    char big[700];
    cJSON *x = cJSON_CreateObject(), *y = cJSON_CreateObject();
    memset(big, 'x', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    for(int i = 0; i < 60; i++) {
      char name[16];
      snprintf(name, sizeof(name), "member-%d", i);
      cJSON_AddStringToObject(x, name, "a value of some length");
      cJSON_AddStringToObject(y, name, "a value of some length");
    }
    cJSON_AddStringToObject(x, "big", big);
    cJSON_AddStringToObject(y, "big", big);
    assert_true(kcr_json_hash(x) == kcr_json_hash(y));
    cJSON_AddStringToObject(y, "z", "");
    assert_true(kcr_json_hash(x) != kcr_json_hash(y));
    cJSON_AddStringToObject(x, "z", "!");
    assert_true(kcr_json_hash(x) != kcr_json_hash(y));
    cJSON_Delete(x);
    cJSON_Delete(y);
  }
  cJSON_Delete(built);
  cJSON_Delete(spaced);
  cJSON_Delete(t);
  (void)state;
}

/* kcr__json_put_int writes what printf's %lld does, the extremes too. */
static void an_int_is_written_as_printf_writes_it(void **state)
{
  static const int64_t vs[] = {0,         1,         -1,           9,
                               10,        -10,       123456789,    9007199254740993LL,
                               INT64_MAX, INT64_MIN, INT64_MIN + 1};
  for(size_t i = 0; i < sizeof(vs) / sizeof(vs[0]); i++) {
    struct kcr_buf b = KCR_BUF_INIT;
    char want[32];
    snprintf(want, sizeof(want), "x%lld", (long long)vs[i]);
    kcr_buf_puts(&b, "x");
    kcr__json_put_int(&b, vs[i]);
    assert_int_equal(KCR_OK, kcr_buf_err(&b));
    assert_string_equal(want, kcr_buf_str(&b));
    kcr_buf_cleanup(&b);
  }
  (void)state;
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
      cmocka_unit_test(a_string_holding_nul_is_no_c_string),
      cmocka_unit_test(a_name_holding_nul_is_refused),
      cmocka_unit_test(the_last_member_of_a_name_wins),
      cmocka_unit_test(spans_are_found_in_one_pass),
      cmocka_unit_test(spans_skip_deep_values_within_the_limit),
      cmocka_unit_test(scan_tells_the_object_s_length_and_layout),
      cmocka_unit_test(strings_are_checked_at_every_offset),
      cmocka_unit_test(the_iterator_hands_out_members_and_elements),
      cmocka_unit_test(the_iterator_steps_over_known_values),
      cmocka_unit_test(a_tree_s_digest_follows_its_content),
      cmocka_unit_test(an_int_is_written_as_printf_writes_it),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
