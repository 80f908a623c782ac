/* Paths are JSON Pointers (RFC 6901) wherever the library takes one:
 * kcr_json_at finds members by their whole names, token by token (not by a
 * prefix, not past a name's end, the empty name included), with "~1" for
 * '/' and "~0" for '~'; the same paths name the same values in text
 * (kcr__json_spans, kcr__json_find), in keep lists and in kcr_obj_spans. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/json-int.h"
#include "kcr/json.h"
#include "kcr/store.h"

static void members_are_matched_by_whole_names(void **state)
{
  static const char text[] =
      "{\"metadat\":1,\"metadataX\":2,\"m\":3,\"metadata\":{\"na\":4,"
      "\"name\":\"n\",\"\":{\"x\":5}},\"\":{\"\":6}}";
  cJSON *t = NULL;

  assert_int_equal(KCR_OK, kcr_json_parse(text, strlen(text), &t, NULL));
  assert_string_equal("n", kcr_json_str(t, "/metadata/name"));
  assert_int_equal(4, kcr_json_int(t, "/metadata/na", 0));
  assert_int_equal(1, kcr_json_int(t, "/metadat", 0));
  assert_int_equal(3, kcr_json_int(t, "/m", 0));
  assert_int_equal(5, kcr_json_int(t, "/metadata//x", 0)); /* the empty name */
  assert_int_equal(6, kcr_json_int(t, "//", 0));           /* "" then "" */
  assert_null(kcr_json_at(t, "/metadata/nam"));
  assert_null(kcr_json_at(t, "/metadata/names"));
  assert_null(kcr_json_at(t, "/metadat/a"));
  cJSON_Delete(t);
}

/* Every label key can be named: "~1" is '/', "~0" is '~', a dot is a dot
 * (the dot paths before pointers could name none of these). */
static const char labels[] =
    "{\"metadata\":{\"name\":\"n\",\"labels\":{\"app.kubernetes.io/name\":\"web\","
    "\"a~b\":\"tilde\",\"~1\":\"literal\",\"app.kubernetes.io\":{\"name\":\"no\"}}},"
    "\"a/b\":{\"c\":1},\"l\":[{\"k\":\"e0\"},{\"k\":\"e1\"}]}";

static void escaped_tokens_name_slashes_tildes_and_dots(void **state)
{
  cJSON *t = NULL;

  assert_int_equal(KCR_OK, kcr_json_parse(labels, strlen(labels), &t, NULL));
  assert_string_equal("web", kcr_json_str(t, "/metadata/labels/app.kubernetes.io~1name"));
  assert_string_equal("tilde", kcr_json_str(t, "/metadata/labels/a~0b"));
  assert_string_equal("literal", kcr_json_str(t, "/metadata/labels/~01")); /* not "/" */
  assert_string_equal("no", kcr_json_str(t, "/metadata/labels/app.kubernetes.io/name"));
  assert_int_equal(1, kcr_json_int(t, "/a~1b/c", 0));
  assert_null(kcr_json_at(t, "/a/b/c"));
  assert_true(kcr_json_at(t, "") == t); /* the value itself */
  cJSON_Delete(t);
}

/* On an array a token is an index as RFC 6901 writes one. */
static void array_elements_are_indexed(void **state)
{
  cJSON *t = NULL;

  assert_int_equal(KCR_OK, kcr_json_parse(labels, strlen(labels), &t, NULL));
  assert_string_equal("e0", kcr_json_str(t, "/l/0/k"));
  assert_string_equal("e1", kcr_json_str(t, "/l/1/k"));
  assert_null(kcr_json_at(t, "/l/2"));
  assert_null(kcr_json_at(t, "/l/01")); /* no leading zero */
  assert_null(kcr_json_at(t, "/l/-"));  /* past the end: nothing there */
  assert_null(kcr_json_at(t, "/l/k"));  /* not an index */
  assert_null(kcr_json_at(t, "/l/-1"));
  assert_null(kcr_json_at(t, "/l/99999999999999999999"));
  cJSON_Delete(t);
}

/* What is not a pointer finds nothing and is refused where a caller is
 * told why: a dot path from before pointers most of all. */
static void what_is_not_a_pointer_finds_nothing(void **state)
{
  cJSON *t = NULL;

  assert_int_equal(KCR_OK, kcr_json_parse(labels, strlen(labels), &t, NULL));
  assert_null(kcr_json_at(t, "metadata.name"));
  assert_null(kcr_json_at(t, "metadata"));
  assert_null(kcr_json_at(t, "/metadata/labels/a~b")); /* '~' then 'b' */
  assert_null(kcr_json_at(t, "/metadata/labels/a~"));
  assert_null(kcr_json_at(t, NULL));
  assert_null(kcr_json_obj(t, "metadata.x"));
  assert_int_equal(KCR_EINVAL, kcr_json_set_str(t, "metadata.name", "m"));
  assert_int_equal(KCR_EINVAL, kcr_json_set_str(t, "/a~2", "m"));
  assert_int_equal(KCR_EINVAL, kcr_json_set_str(t, "", "m"));
  assert_string_equal("n", kcr_json_str(t, "/metadata/name")); /* unchanged */
  assert_string_equal("does not start with '/' (paths are JSON Pointers, RFC 6901: "
                      "\"/status/conditions\", not \"status.conditions\")",
                      kcr__ptr_bad("status.conditions"));
  assert_non_null(kcr__ptr_bad("/a~2"));
  assert_null(kcr__ptr_bad(""));
  assert_null(kcr__ptr_bad("/"));
  assert_null(kcr__ptr_bad("/~0~1"));
  cJSON_Delete(t);
}

/* Members made from a path get the names its tokens stand for. */
static void made_members_are_named_unescaped(void **state)
{
  cJSON *t = cJSON_CreateObject();
  char *text;

  assert_int_equal(
      KCR_OK, kcr_json_set_str(t, "/metadata/labels/app.kubernetes.io~1name", "web"));
  assert_int_equal(KCR_OK, kcr_json_set_str(t, "/metadata/labels/a~0b", "x"));
  assert_int_equal(KCR_OK,
                   kcr_json_set_str(t, "/metadata/labels/a~0b", "y")); /* replaced */
  assert_non_null(kcr_json_obj(t, "/spec/a~1b~1c"));
  assert_true(kcr_json_obj(t, "") == t);
  text = kcr_json_to_text(t);
  assert_string_equal("{\"metadata\":{\"labels\":{\"app.kubernetes.io/name\":\"web\","
                      "\"a~b\":\"y\"}},\"spec\":{\"a/b/c\":{}}}",
                      text);
  free(text);
  cJSON_Delete(t);
}

/* kcr_json_ptr_append writes what kcr_json_at reads. */
static void appended_names_read_back(void **state)
{
  static const char *const names[] = {"app.kubernetes.io/name", "a~b", "~1", "", "/~/~"};
  struct kcr_buf b = KCR_BUF_INIT;
  cJSON *t = cJSON_CreateObject();

  for(size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
    cJSON_AddNumberToObject(t, names[i], (double)i);
  for(size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
    kcr_buf_reset(&b);
    assert_int_equal(KCR_OK, kcr_json_ptr_append(&b, names[i]));
    assert_null(kcr__ptr_bad(kcr_buf_str(&b)));
    assert_int_equal((int64_t)i, kcr_json_int(t, kcr_buf_str(&b), -1));
  }
  kcr_buf_reset(&b);
  assert_int_equal(KCR_OK, kcr_json_ptr_append(&b, "metadata"));
  assert_int_equal(KCR_OK, kcr_json_ptr_append(&b, "a/b~"));
  assert_string_equal("/metadata/a~1b~0", kcr_buf_str(&b));
  assert_int_equal(KCR_EINVAL, kcr_json_ptr_append(&b, NULL));
  assert_int_equal(KCR_EINVAL, kcr_json_ptr_append(NULL, "x"));
  kcr_buf_cleanup(&b);
  cJSON_Delete(t);
}

/* The text readers take the same pointers and find what the tree does. */
static void text_readers_take_the_same_pointers(void **state)
{
  struct kcr__json_want w[3] = {{.path = "/metadata/labels/app.kubernetes.io~1name"},
                                {.path = "/metadata/labels/a~0b"},
                                {.path = "/a~1b/c"}};
  const char *at;
  size_t n;

  assert_int_equal(3, kcr__json_spans(labels, strlen(labels), w, 3));
  assert_memory_equal("\"web\"", w[0].at, w[0].n);
  assert_memory_equal("\"tilde\"", w[1].at, w[1].n);
  assert_memory_equal("1", w[2].at, w[2].n);
  assert_int_equal(KCR_OK,
                   kcr__json_find(labels, strlen(labels),
                                  "/metadata/labels/app.kubernetes.io~1name", &at, &n));
  assert_memory_equal("\"web\"", at, n);
  assert_int_equal(KCR_ENOTFOUND,
                   kcr__json_find(labels, strlen(labels), "metadata.name", &at, &n));
  assert_int_equal(KCR_OK,
                   kcr__json_find(labels, strlen(labels), "/metadata/name", &at, &n));
}

/* kcr_obj_spans on a cached object takes pointers too. */
static void object_spans_take_pointers(void **state)
{
  static const char *const paths[] = {"/metadata/labels/app.kubernetes.io~1name",
                                      "metadata.name", "/metadata/name"};
  struct kcr_span sp[3];
  cJSON *t = NULL;
  kcr_obj *o = NULL;

  assert_int_equal(KCR_OK, kcr_json_parse(labels, strlen(labels), &t, NULL));
  assert_int_equal(KCR_OK, kcr_obj_from_json(t, 0, &o, NULL));
  assert_int_equal(2, kcr_obj_spans(o, paths, sp, 3));
  assert_true(kcr_span_is(&sp[0], "web"));
  assert_null(sp[1].at);
  assert_true(kcr_span_is(&sp[2], "n"));
  kcr_obj_unref(o);
  cJSON_Delete(t);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(members_are_matched_by_whole_names),
      cmocka_unit_test(escaped_tokens_name_slashes_tildes_and_dots),
      cmocka_unit_test(array_elements_are_indexed),
      cmocka_unit_test(what_is_not_a_pointer_finds_nothing),
      cmocka_unit_test(made_members_are_named_unescaped),
      cmocka_unit_test(appended_names_read_back),
      cmocka_unit_test(text_readers_take_the_same_pointers),
      cmocka_unit_test(object_spans_take_pointers),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
