/* Labels and annotations of a cached object (kcr_obj_label,
 * kcr_obj_annotation), read in its text: keys with dots and slashes, keys
 * and values written with escapes, the last of two members, absent versus
 * not kept by a keep list; the span helpers (kcr_span_strdup, kcr_span_is);
 * and the built-in label index. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kcr/store.h"
#include "runtime/projection-int.h"
#include "runtime/store-int.h"
#include "tfail.h"

/* An object with labels and annotations as a client could write them:
 * an escaped slash in a key, an escaped letter in a value, a key twice. */
static const char text[] =
    "{\"metadata\":{\"name\":\"a\",\"namespace\":\"ns\",\"uid\":\"u1\","
    "\"labels\":{\"app.kubernetes.io/name\":\"web\",\"tier\":\"front\","
    "\"example.com\\/team\":\"b\\u0041d\",\"tier\":\"back\",\"n\":7},"
    "\"annotations\":{\"note\":\"a \\\"quoted\\\" word\",\"nul\":\"x\\u0000y\"}},"
    "\"spec\":{\"x\":1}}";

static kcr_obj *obj_of(const char *t, const char *const *keep)
{
  struct kcr__proj *p = NULL;
  kcr_obj *o = NULL;
  if(keep)
    assert_int_equal(KCR_OK, kcr__proj_new(keep, 0, &p));
  assert_int_equal(KCR_OK, kcr__obj_from_text(t, strlen(t), 0, p, NULL, 0, &o, NULL));
  kcr__proj_free(p);
  return o;
}

static char *label_str(const kcr_obj *o, const char *key)
{
  struct kcr_span sp;
  char *s = NULL;
  if(kcr_obj_label(o, key, &sp) || kcr_span_strdup(&sp, &s))
    return NULL;
  return s;
}

static void labels_are_read_by_their_keys(void **state)
{
  kcr_obj *o = obj_of(text, NULL);
  struct kcr_span sp = {(const char *)1, 1};
  char *s;

  s = label_str(o, "app.kubernetes.io/name");
  assert_string_equal("web", s);
  free(s);
  s = label_str(o, "example.com/team"); /* the key was written "example.com\/team" */
  assert_string_equal("bAd", s);
  free(s);
  s = label_str(o, "tier"); /* the last of two, as Go's decoder */
  assert_string_equal("back", s);
  free(s);
  assert_int_equal(KCR_ENOTFOUND, kcr_obj_label(o, "absent", &sp));
  assert_null(sp.at);
  assert_int_equal(KCR_ENOTFOUND, kcr_obj_label(o, "app.kubernetes.io", &sp));
  /* a value that is no string: found, but no C string */
  assert_int_equal(KCR_OK, kcr_obj_label(o, "n", &sp));
  assert_int_equal(KCR_EINVAL, kcr_span_strdup(&sp, &s));
  assert_null(s);
  assert_false(kcr_span_is(&sp, "7"));
  assert_int_equal(KCR_EINVAL, kcr_obj_label(NULL, "tier", &sp));
  assert_int_equal(KCR_EINVAL, kcr_obj_label(o, NULL, &sp));
  kcr_obj_unref(o);
  (void)state;
}

static void annotations_unescape_and_refuse_nul(void **state)
{
  kcr_obj *o = obj_of(text, NULL);
  struct kcr_span sp;
  char *s = (char *)1;

  assert_int_equal(KCR_OK, kcr_obj_annotation(o, "note", &sp));
  assert_int_equal(KCR_OK, kcr_span_strdup(&sp, &s));
  assert_string_equal("a \"quoted\" word", s);
  free(s);
  assert_true(kcr_span_is(&sp, "a \"quoted\" word"));
  assert_false(kcr_span_is(&sp, "a "));
  assert_int_equal(KCR_OK, kcr_obj_annotation(o, "nul", &sp));
  assert_int_equal(KCR_EPARSE, kcr_span_strdup(&sp, &s)); /* "x\u0000y": no C string */
  assert_null(s);
  assert_false(kcr_span_is(&sp, "x"));
  assert_int_equal(KCR_ENOTFOUND, kcr_obj_annotation(o, "tier", &sp)); /* a label */
  kcr_obj_unref(o);
  /* a text the walk cannot pass (nesting deeper than 128 levels before
   * metadata): not "absent" */
  {
    char deep[1024];
    int n = snprintf(deep, sizeof(deep), "{\"spec\":");
    for(int i = 0; i < 200; i++)
      deep[n++] = '[';
    for(int i = 0; i < 200; i++)
      deep[n++] = ']';
    snprintf(deep + n, sizeof(deep) - (size_t)n,
             ",\"metadata\":{\"name\":\"d\",\"labels\":{\"x\":\"y\"}}}");
    o = obj_of(deep, NULL);
    assert_int_equal(KCR_EPARSE, kcr_obj_label(o, "x", &sp));
    kcr_obj_unref(o);
  }
  /* no labels at all: absent */
  o = obj_of("{\"metadata\":{\"name\":\"b\"}}", NULL);
  assert_int_equal(KCR_ENOTFOUND, kcr_obj_label(o, "tier", &sp));
  assert_int_equal(KCR_ENOTFOUND, kcr_obj_annotation(o, "note", &sp));
  kcr_obj_unref(o);
  (void)state;
}

/* Dropped by a keep list: "not kept", never "absent"; kept by a list that
 * names them or anything above them. */
static void a_keep_list_that_drops_labels_says_so(void **state)
{
  struct kcr_span sp;
  kcr_obj *o = obj_of(text, (const char *[]){"/spec", NULL});
  assert_int_equal(KCR_ENOTKEPT, kcr_obj_label(o, "tier", &sp));
  assert_int_equal(KCR_ENOTKEPT, kcr_obj_label(o, "absent", &sp));
  assert_int_equal(KCR_ENOTKEPT, kcr_obj_annotation(o, "note", &sp));
  assert_string_equal("not kept in the cache (the informer's keep list drops it)",
                      kcr_strerror(KCR_ENOTKEPT));
  kcr_obj_unref(o);
  o = obj_of(text, (const char *[]){"/metadata/labels", NULL});
  assert_true(kcr_obj_label(o, "tier", &sp) == KCR_OK && kcr_span_is(&sp, "back"));
  assert_int_equal(KCR_ENOTFOUND, kcr_obj_label(o, "absent", &sp));
  assert_int_equal(KCR_ENOTKEPT, kcr_obj_annotation(o, "note", &sp));
  kcr_obj_unref(o);
  o = obj_of(text, (const char *[]){"/metadata", NULL});
  assert_int_equal(KCR_OK, kcr_obj_label(o, "tier", &sp));
  assert_int_equal(KCR_OK, kcr_obj_annotation(o, "note", &sp));
  kcr_obj_unref(o);
  (void)state;
}

static void span_helpers_refuse_what_is_no_string(void **state)
{
  struct kcr_span sp = {"\"abc\"", 5}, num = {"12", 2}, broken = {"\"ab", 3},
                  none = {NULL, 0};
  char *s = NULL;
  assert_int_equal(KCR_OK, kcr_span_strdup(&sp, &s));
  assert_string_equal("abc", s);
  free(s);
  assert_int_equal(KCR_EINVAL, kcr_span_strdup(&num, &s));
  assert_int_equal(KCR_EINVAL, kcr_span_strdup(&none, &s));
  assert_int_equal(KCR_EINVAL, kcr_span_strdup(NULL, &s));
  assert_int_equal(KCR_EINVAL, kcr_span_strdup(&sp, NULL));
  assert_int_equal(KCR_EPARSE, kcr_span_strdup(&broken, &s));
  assert_true(kcr_span_is(&sp, "abc"));
  assert_false(kcr_span_is(&sp, "ab"));
  assert_false(kcr_span_is(&none, ""));
  assert_false(kcr_span_is(&sp, NULL));
  (void)state;
}

static void a_label_index_finds_objects_by_label_value(void **state)
{
  kcr_store *s;
  kcr_obj **objs;
  size_t n;
  const char *const texts[] = {
      "{\"metadata\":{\"name\":\"a\",\"namespace\":\"ns\",\"labels\":{\"app.kubernetes."
      "io/"
      "instance\":\"web\"}}}",
      "{\"metadata\":{\"name\":\"b\",\"namespace\":\"ns\",\"labels\":{\"app.kubernetes."
      "io/"
      "instance\":\"web\"}}}",
      "{\"metadata\":{\"name\":\"c\",\"namespace\":\"ns\",\"labels\":{\"app.kubernetes."
      "io/"
      "instance\":\"db\"}}}",
      "{\"metadata\":{\"name\":\"d\",\"namespace\":\"ns\"}}",
  };
  const char *ix = KCR_INDEX_LABEL_PREFIX "app.kubernetes.io/instance";

  assert_int_equal(KCR_OK, kcr_store_new(NULL, &s, NULL));
  assert_int_equal(KCR_OK, kcr_store_add_label_index(s, "app.kubernetes.io/instance"));
  assert_int_equal(KCR_EEXIST,
                   kcr_store_add_label_index(s, "app.kubernetes.io/instance"));
  assert_int_equal(KCR_EINVAL, kcr_store_add_label_index(s, ""));
  for(size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
    kcr_obj *old = NULL;
    assert_int_equal(KCR_OK,
                     kcr_store_put(s, obj_of(texts[i], NULL), &old)); /* takes it */
    assert_null(old);
  }
  assert_int_equal(KCR_OK, kcr_store_ref_by_index(s, ix, "web", &objs, &n));
  assert_int_equal(2, n);
  kcr_objs_unref(objs, n);
  assert_int_equal(KCR_OK, kcr_store_ref_by_index(s, ix, "db", &objs, &n));
  assert_int_equal(1, n);
  assert_string_equal("c", kcr_obj_name(objs[0]));
  kcr_objs_unref(objs, n);
  /* relabelled: the index follows */
  kcr_obj *o = obj_of("{\"metadata\":{\"name\":\"c\",\"namespace\":\"ns\",\"labels\":{"
                      "\"app.kubernetes.io/instance\":\"web\"}}}",
                      NULL);
  kcr_obj *old = NULL;
  assert_int_equal(KCR_OK, kcr_store_put(s, o, &old));
  assert_non_null(old);
  kcr_obj_unref(old);
  assert_int_equal(KCR_OK, kcr_store_ref_by_index(s, ix, "web", &objs, &n));
  assert_int_equal(3, n);
  kcr_objs_unref(objs, n);
  assert_int_equal(KCR_OK, kcr_store_ref_by_index(s, ix, "db", &objs, &n));
  assert_int_equal(0, n);
  kcr_objs_unref(objs, n);
  assert_int_equal(KCR_EINVAL, kcr_store_add_label_index(s, "late")); /* after a write */
  kcr_store_free(s);
  (void)state;
}

int main(void)
{
  tfail_init();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(labels_are_read_by_their_keys),
      cmocka_unit_test(annotations_unescape_and_refuse_nul),
      cmocka_unit_test(a_keep_list_that_drops_labels_says_so),
      cmocka_unit_test(span_helpers_refuse_what_is_no_string),
      cmocka_unit_test(a_label_index_finds_objects_by_label_value),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
