/* ebdman's EBD conversion (operator/ebdman/convert.c) through the library's
 * ConversionReview handling (kcr_conversion_review): v1alpha1's spec.vfm is
 * v1beta1's spec.vfmTemplate, every other value kept - integers past 2^53,
 * escapes, member order, status - both ways, the round trip exact (so no
 * hub-data annotation), and a spec holding both names refused; and which
 * CRDs the storage migration acts on (ebdman_migration_needed). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ebdman.h"
#include "kcr/json.h"

#define META                                                                             \
  "\"metadata\":{\"name\":\"a\",\"namespace\":\"n\",\"uid\":\"u-a\",\"generation\":"     \
  "9007199254740993,\"resourceVersion\":\"7\",\"annotations\":{\"x\":\"caf\\u00e9\"}}"
#define SPEC_BODY                                                                        \
  "{\"image\":\"r/vfm:1\",\"replicas\":3,\"config\":{\"z\":\"1\",\"a\":\"\\\"q\\\"\"}}"
#define STATUS                                                                           \
  "\"status\":{\"observedGeneration\":9007199254740993,\"conditions\":[{\"type\":"       \
  "\"Ready\",\"status\":\"True\",\"reason\":\"Ready\",\"message\":\"\","                 \
  "\"lastTransitionTime\":\"2026-12-07T00:00:00Z\"}]}"
#define V1ALPHA1                                                                         \
  "{\"apiVersion\":\"ebdman.example.com/v1alpha1\",\"kind\":\"EBD\"," META               \
  ",\"spec\":{\"vfm\":" SPEC_BODY "}," STATUS "}"
#define V1BETA1                                                                          \
  "{\"apiVersion\":\"ebdman.example.com/v1beta1\",\"kind\":\"EBD\"," META                \
  ",\"spec\":{\"vfmTemplate\":" SPEC_BODY "}," STATUS "}"

/* The converted objects' text (the answer's response.convertedObjects),
 * after checking the result is want; NULL on Failure, with *msg the
 * message. Caller frees. */
static char *convert(const char *desired, const char *objects, const char **why)
{
  struct kcr_buf out = KCR_BUF_INIT;
  char *body, *text = NULL;
  cJSON *t = NULL;
  static char msg[512];

  assert_true(asprintf(&body,
                       "{\"apiVersion\":\"apiextensions.k8s.io/v1\",\"kind\":"
                       "\"ConversionReview\",\"request\":{\"uid\":\"r-1\","
                       "\"desiredAPIVersion\":\"%s\",\"objects\":[%s]}}",
                       desired, objects) > 0);
  assert_int_equal(KCR_OK, kcr_conversion_review(&ebdman_conversion, body, strlen(body),
                                                 "application/json", &out));
  assert_int_equal(KCR_OK, kcr_json_parse(out.ptr, out.len, &t, NULL));
  assert_string_equal("r-1", kcr_json_str(t, "/response/uid"));
  if(!strcmp("Success", kcr_json_str(t, "/response/result/status"))) {
    text = kcr_json_to_text(kcr_json_at(t, "/response/convertedObjects"));
    assert_non_null(text);
  } else {
    snprintf(msg, sizeof(msg), "%s", kcr_json_str(t, "/response/result/message"));
    *why = msg;
  }
  cJSON_Delete(t);
  kcr_buf_cleanup(&out);
  free(body);
  return text;
}

/* got holds want's values (cJSON_Compare: integers past 2^53 compare as
 * their text); the library sets apiVersion and kind itself, after the rest. */
static void assert_same_json(const char *want, const char *got)
{
  cJSON *w = NULL, *g = NULL;

  assert_int_equal(KCR_OK, kcr_json_parse(want, strlen(want), &w, NULL));
  assert_int_equal(KCR_OK, kcr_json_parse(got, strlen(got), &g, NULL));
  if(!cJSON_Compare(w, g, true))
    fail_msg("wanted %s\n   got %s", want, got);
  cJSON_Delete(w);
  cJSON_Delete(g);
}

/* The converted spec is the input's text, byte for byte, but for the one
 * member name: order, escapes and numbers as they came. */
#define SPEC_TEXT_V1BETA1  "\"spec\":{\"vfmTemplate\":" SPEC_BODY "}"
#define SPEC_TEXT_V1ALPHA1 "\"spec\":{\"vfm\":" SPEC_BODY "}"

static void v1alpha1_reads_as_v1beta1_and_back(void **state)
{
  const char *why = NULL;
  char *up, *down;

  (void)state;
  up = convert("ebdman.example.com/v1beta1", V1ALPHA1, &why);
  assert_non_null(up);
  assert_same_json("[" V1BETA1 "]", up);
  assert_non_null(strstr(up, SPEC_TEXT_V1BETA1));
  assert_non_null(strstr(up, "\"generation\":9007199254740993"));
  down = convert("ebdman.example.com/v1alpha1", V1BETA1, &why);
  assert_non_null(down);
  /* exact both ways: no hub-data annotation was needed */
  assert_same_json("[" V1ALPHA1 "]", down);
  assert_non_null(strstr(down, SPEC_TEXT_V1ALPHA1));
  assert_null(strstr(down, KCR_CONVERSION_ANNOTATION));
  free(up);
  free(down);
}

static void several_objects_keep_their_order(void **state)
{
  const char *why = NULL;
  char *got;
  const char *b =
      "{\"apiVersion\":\"ebdman.example.com/v1alpha1\",\"kind\":\"EBD\",\"metadata\":{"
      "\"name\":\"b\",\"namespace\":\"n\",\"uid\":\"u-b\"},\"spec\":{\"vfm\":{\"image\":"
      "\"i\"}}}";
  const char *c = /* already in the desired version: passed through */
      "{\"apiVersion\":\"ebdman.example.com/v1beta1\",\"kind\":\"EBD\",\"metadata\":{"
      "\"name\":\"c\",\"namespace\":\"n\",\"uid\":\"u-c\"},\"spec\":{\"vfmTemplate\":{"
      "\"image\":\"j\"}}}";
  char objs[4096];

  (void)state;
  snprintf(objs, sizeof(objs), "%s,%s,%s", V1ALPHA1, b, c);
  got = convert("ebdman.example.com/v1beta1", objs, &why);
  assert_non_null(got);
  snprintf(objs, sizeof(objs),
           "[" V1BETA1 ",{\"apiVersion\":\"ebdman.example.com/v1beta1\",\"kind\":\"EBD\","
           "\"metadata\":{\"name\":\"b\",\"namespace\":\"n\",\"uid\":\"u-b\"},\"spec\":{"
           "\"vfmTemplate\":{\"image\":\"i\"}}},%s]",
           c);
  assert_same_json(objs, got);
  free(got);
}

static void what_has_no_spec_or_no_vfm_converts_unchanged(void **state)
{
  const char *why = NULL;
  char *got;

  (void)state;
  got = convert("ebdman.example.com/v1beta1",
                "{\"apiVersion\":\"ebdman.example.com/v1alpha1\",\"kind\":\"EBD\","
                "\"metadata\":{\"name\":\"a\",\"uid\":\"u\"}},"
                "{\"apiVersion\":\"ebdman.example.com/v1alpha1\",\"kind\":\"EBD\","
                "\"metadata\":{\"name\":\"b\",\"uid\":\"v\"},\"spec\":{}}",
                &why);
  assert_non_null(got);
  assert_same_json("[{\"apiVersion\":\"ebdman.example.com/v1beta1\",\"kind\":\"EBD\","
                   "\"metadata\":{\"name\":\"a\",\"uid\":\"u\"}},"
                   "{\"apiVersion\":\"ebdman.example.com/v1beta1\",\"kind\":\"EBD\","
                   "\"metadata\":{\"name\":\"b\",\"uid\":\"v\"},\"spec\":{}}]",
                   got);
  free(got);
}

/* A spec that is no object (an array, null: the schema refuses them, so
 * only a hand-made review holds one) is copied unchanged, not walked as if
 * it were one (which made "{:1}" of an array); a member named vfm deeper
 * than spec (a config key) is no spec.vfm. */
static void only_specs_own_vfm_is_renamed(void **state)
{
  const char *why = NULL;
  char *got;

  (void)state;
  got = convert("ebdman.example.com/v1beta1",
                "{\"apiVersion\":\"ebdman.example.com/v1alpha1\",\"kind\":\"EBD\","
                "\"metadata\":{\"name\":\"a\",\"uid\":\"u\"},\"spec\":[1,{\"vfm\":2}]},"
                "{\"apiVersion\":\"ebdman.example.com/v1alpha1\",\"kind\":\"EBD\","
                "\"metadata\":{\"name\":\"b\",\"uid\":\"v\"},\"spec\":null},"
                "{\"apiVersion\":\"ebdman.example.com/v1alpha1\",\"kind\":\"EBD\","
                "\"metadata\":{\"name\":\"c\",\"uid\":\"w\"},\"spec\":{\"vfm\":{"
                "\"config\":{\"vfm\":\"x\"}}}}",
                &why);
  if(!got)
    fail_msg("the review failed: %s", why);
  assert_same_json(
      "[{\"apiVersion\":\"ebdman.example.com/v1beta1\",\"kind\":\"EBD\","
      "\"metadata\":{\"name\":\"a\",\"uid\":\"u\"},\"spec\":[1,{\"vfm\":2}]},"
      "{\"apiVersion\":\"ebdman.example.com/v1beta1\",\"kind\":\"EBD\","
      "\"metadata\":{\"name\":\"b\",\"uid\":\"v\"},\"spec\":null},"
      "{\"apiVersion\":\"ebdman.example.com/v1beta1\",\"kind\":\"EBD\","
      "\"metadata\":{\"name\":\"c\",\"uid\":\"w\"},\"spec\":{\"vfmTemplate\":{"
      "\"config\":{\"vfm\":\"x\"}}}}]",
      got);
  free(got);
}

/* A spec with both names cannot come from a pruned object; converting it
 * would drop one of the two, so the review fails, naming the object. */
static void a_spec_with_both_names_fails_the_review(void **state)
{
  const char *why = NULL;

  (void)state;
  assert_null(
      convert("ebdman.example.com/v1beta1",
              "{\"apiVersion\":\"ebdman.example.com/v1alpha1\",\"kind\":\"EBD\","
              "\"metadata\":{\"name\":\"both\",\"uid\":\"u\"},\"spec\":{\"vfm\":{},"
              "\"vfmTemplate\":{}}}",
              &why));
  assert_non_null(why);
  assert_non_null(strstr(why, "both"));
  assert_non_null(strstr(why, "already holds vfmTemplate"));
  /* and the other way */
  why = NULL;
  assert_null(convert("ebdman.example.com/v1alpha1",
                      "{\"apiVersion\":\"ebdman.example.com/v1beta1\",\"kind\":\"EBD\","
                      "\"metadata\":{\"name\":\"both\",\"uid\":\"u\"},\"spec\":{"
                      "\"vfmTemplate\":{},\"vfm\":{}}}",
                      &why));
  assert_non_null(why);
  assert_non_null(strstr(why, "already holds vfm"));
}

static cJSON *crd(const char *versions, const char *stored)
{
  char text[1024];
  cJSON *t = NULL;

  snprintf(text, sizeof(text), "{\"spec\":{\"versions\":[%s]},\"status\":{%s}}", versions,
           stored);
  assert_int_equal(KCR_OK, kcr_json_parse(text, strlen(text), &t, NULL));
  return t;
}

static void migration_is_needed_while_another_version_is_stored(void **state)
{
  static const char both[] = "{\"name\":\"v1alpha1\",\"storage\":false},"
                             "{\"name\":\"v1beta1\",\"storage\":true}";
  static const struct {
    const char *versions, *stored;
    bool needed;
    const char *storage;
  } cases[] = {
      {both, "\"storedVersions\":[\"v1alpha1\",\"v1beta1\"]", true, "v1beta1"},
      {both, "\"storedVersions\":[\"v1alpha1\"]", true, "v1beta1"},
      {both, "\"storedVersions\":[\"v1beta1\"]", false, "v1beta1"},
      {both, "", false, "v1beta1"}, /* nothing stored yet */
      {"{\"name\":\"v1alpha1\",\"storage\":true}", "\"storedVersions\":[\"v1alpha1\"]",
       false, "v1alpha1"},
      {"{\"name\":\"v1alpha1\"}", "\"storedVersions\":[\"v1alpha1\"]", false, NULL},
  };

  (void)state;
  for(size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    cJSON *c = crd(cases[i].versions, cases[i].stored);
    const char *s = "unset";
    assert_int_equal(cases[i].needed, ebdman_migration_needed(c, &s));
    if(cases[i].storage)
      assert_string_equal(cases[i].storage, s);
    else
      assert_null(s);
    cJSON_Delete(c);
  }
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(v1alpha1_reads_as_v1beta1_and_back),
      cmocka_unit_test(several_objects_keep_their_order),
      cmocka_unit_test(what_has_no_spec_or_no_vfm_converts_unchanged),
      cmocka_unit_test(only_specs_own_vfm_is_renamed),
      cmocka_unit_test(a_spec_with_both_names_fails_the_review),
      cmocka_unit_test(migration_is_needed_while_another_version_is_stored),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
