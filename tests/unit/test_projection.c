/* Cache projection (runtime/projection.c): what a keep-list keeps of an
 * object - the members it names, whole, at any depth; the metadata the
 * runtime needs, always; nothing for a path that is not there or runs into
 * an array - what it refuses, and that a projected cached object has the
 * same header as the whole one. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kcr/json.h"
#include "kcr/store.h"
#include "runtime/projection-int.h"
#include "runtime/store-int.h"
#include "tfail.h"

/* A VFM as the apiserver sends it, with everything a cache may drop. */
static const char vfm[] =
    "{\"apiVersion\":\"ebdman.example.com/v1alpha1\",\"kind\":\"VFM\","
    "\"metadata\":{\"name\":\"a\",\"namespace\":\"ns\",\"uid\":\"u1\","
    "\"resourceVersion\":\"7\",\"generation\":2,"
    "\"creationTimestamp\":\"2024-01-01T00:00:00Z\","
    "\"labels\":{\"app.kubernetes.io/managed-by\":\"ebdman\"},"
    "\"annotations\":{\"vfm-sim.ebdman.example.com/delay\":\"1s\"},"
    "\"finalizers\":[\"x.example.com/f\"],"
    "\"ownerReferences\":[{\"apiVersion\":\"ebdman.example.com/v1alpha1\","
    "\"kind\":\"EBD\",\"name\":\"a\",\"uid\":\"e1\",\"controller\":true}],"
    "\"managedFields\":[{\"manager\":\"ebdman\",\"operation\":\"Apply\"}]},"
    "\"spec\":{\"image\":\"i\",\"template\":{\"metadata\":{\"labels\":{\"t\":\"1\"}},"
    "\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":\"i\"}]}},\"replicas\":3},"
    "\"status\":{\"phase\":\"Running\",\"observedGeneration\":2,"
    "\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"}]}}";

/* The metadata every projection keeps, as it prints from vfm (in its order). */
#define KEPT_META                                                                        \
  "\"apiVersion\":\"ebdman.example.com/v1alpha1\",\"kind\":\"VFM\","                     \
  "\"metadata\":{\"name\":\"a\",\"namespace\":\"ns\",\"uid\":\"u1\","                    \
  "\"resourceVersion\":\"7\",\"generation\":2,"                                          \
  "\"ownerReferences\":[{\"apiVersion\":\"ebdman.example.com/v1alpha1\","                \
  "\"kind\":\"EBD\",\"name\":\"a\",\"uid\":\"e1\",\"controller\":true}]}"

static cJSON *parse(const char *text)
{
  cJSON *t = NULL;
  assert_int_equal(KCR_OK, kcr_json_parse(text, strlen(text), &t, NULL));
  return t;
}

/* The projection of text by keep (flags as kcr__proj_new's), as text. */
static char *project(const char *text, const char *const *keep, unsigned flags)
{
  struct kcr__proj *p = NULL;
  cJSON *t = parse(text);
  char *before = cJSON_PrintUnformatted(t), *out, *after;

  assert_int_equal(KCR_OK, kcr__proj_new(keep, flags, &p));
  struct kcr_buf b = KCR_BUF_INIT, bt = KCR_BUF_INIT;
  assert_int_equal(KCR_OK, kcr__proj_print(p, t, &b));
  assert_non_null(out = kcr_buf_take(&b));
  /* From the text (compact here): the same bytes. */
  assert_int_equal(KCR_OK, kcr__proj_print_text(p, text, strlen(text), NULL, 0, &bt));
  assert_string_equal(out, kcr_buf_str(&bt));
  kcr_buf_cleanup(&bt);
  after = cJSON_PrintUnformatted(t);
  assert_string_equal(before, after); /* the tree is only read */
  free(before);
  free(after);
  cJSON_Delete(t);
  kcr__proj_free(p);
  return out;
}

static void expect(const char *text, const char *const *keep, const char *want)
{
  char *got = project(text, keep, 0);
  assert_string_equal(want, got);
  free(got);
}

static void an_empty_list_keeps_the_metadata_the_runtime_needs(void **state)
{
  /* Labels, annotations, finalizers, creationTimestamp, managedFields,
   * spec, status: all gone. */
  expect(vfm, (const char *[]){NULL}, "{" KEPT_META "}");
}

static void listed_members_are_kept_whole_at_any_depth(void **state)
{
  expect(vfm, (const char *[]){"/spec/template/metadata", "/status/conditions", NULL},
         "{" KEPT_META
         ",\"spec\":{\"template\":{\"metadata\":{\"labels\":{\"t\":\"1\"}}}},"
         "\"status\":{\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"}]}}");
  /* metadata members on top of the always-kept ones, in the object's order */
  expect("{\"metadata\":{\"labels\":{\"l\":\"1\"},\"name\":\"a\",\"finalizers\":[\"f\"]},"
         "\"data\":{\"k\":\"v\"}}",
         (const char *[]){"/metadata/finalizers", "/data", "/metadata/labels", NULL},
         "{\"metadata\":{\"labels\":{\"l\":\"1\"},\"name\":\"a\",\"finalizers\":[\"f\"]},"
         "\"data\":{\"k\":\"v\"}}");
}

static void paths_that_are_not_there_leave_nothing_behind(void **state)
{
  /* status has no "missing"; spec.image is a string, so spec.image.x is not
   * there; "nothing" is not a member at all: no empty status or spec. */
  expect(vfm, (const char *[]){"/status/missing", "/spec/image/x", "/nothing", NULL},
         "{" KEPT_META "}");
}

static void arrays_are_kept_whole_and_never_indexed(void **state)
{
  expect(vfm, (const char *[]){"/spec/template/spec/containers", NULL},
         "{" KEPT_META ",\"spec\":{\"template\":{\"spec\":{\"containers\":"
         "[{\"name\":\"c\",\"image\":\"i\"}]}}}}");
  /* A path through an array selects nothing inside it. */
  expect(vfm,
         (const char *[]){"/status/conditions/type",
                          "/spec/template/spec/containers/name", NULL},
         "{" KEPT_META "}");
}

static void repeated_and_overlapping_paths_keep_the_widest(void **state)
{
  const char *want = "{" KEPT_META ",\"status\":{\"phase\":\"Running\","
                     "\"observedGeneration\":2,\"conditions\":[{\"type\":\"Ready\","
                     "\"status\":\"True\"}]}}";
  expect(vfm, (const char *[]){"/status/phase", "/status", "/status/phase", NULL}, want);
  expect(vfm, (const char *[]){"/status", "/status/conditions", NULL}, want);
  /* listing what is always kept changes nothing */
  expect(vfm, (const char *[]){"/metadata/name", "/kind", NULL}, "{" KEPT_META "}");
}

static void the_object_s_order_is_kept_not_the_list_s(void **state)
{
  expect(vfm, (const char *[]){"/status/phase", "/spec/replicas", NULL},
         "{" KEPT_META ",\"spec\":{\"replicas\":3},\"status\":{\"phase\":\"Running\"}}");
}

static void managed_fields_are_kept_only_when_asked(void **state)
{
  char *got = project(vfm, (const char *[]){NULL}, KCR_OBJ_KEEP_MANAGED_FIELDS);
  assert_non_null(strstr(got, "\"managedFields\":[{\"manager\":\"ebdman\""));
  free(got);
}

/* A name written twice: the parsed tree holds only the last member of it
 * (kcr_json_parse, as Go's decoder), which the projection keeps; the text
 * walk leaves such an object to the tree (KCR_ENOTFOUND, out as it was). */
static void expect_by_tree(const char *text, const char *const *keep, const char *want)
{
  struct kcr__proj *p = NULL;
  struct kcr_buf b = KCR_BUF_INIT;
  cJSON *t = parse(text);

  assert_int_equal(KCR_OK, kcr__proj_new(keep, 0, &p));
  assert_int_equal(KCR_OK, kcr__proj_print(p, t, &b));
  assert_string_equal(want, kcr_buf_str(&b));
  kcr_buf_reset(&b);
  kcr_buf_puts(&b, "x");
  assert_int_equal(KCR_ENOTFOUND,
                   kcr__proj_print_text(p, text, strlen(text), NULL, 0, &b));
  assert_string_equal("x", kcr_buf_str(&b));
  kcr_buf_cleanup(&b);
  cJSON_Delete(t);
  kcr__proj_free(p);
}

static void the_last_of_members_with_one_name_is_kept(void **state)
{
  expect_by_tree("{\"metadata\":{\"name\":\"a\"},\"spec\":{\"x\":1},\"spec\":{\"x\":2}}",
                 (const char *[]){"/spec", NULL},
                 "{\"metadata\":{\"name\":\"a\"},\"spec\":{\"x\":2}}");
  expect_by_tree("{\"metadata\":{\"name\":\"a\",\"name\":\"b\"}}", (const char *[]){NULL},
                 "{\"metadata\":{\"name\":\"b\"}}");
}

/* The last member of a name counts even when it keeps nothing: an earlier
 * one of that name is not taken instead. */
static void a_last_member_that_keeps_nothing_hides_earlier_ones(void **state)
{
  expect_by_tree("{\"metadata\":{\"name\":\"a\"},\"spec\":{\"x\":1},\"spec\":5}",
                 (const char *[]){"/spec/x", NULL}, "{\"metadata\":{\"name\":\"a\"}}");
  expect_by_tree("{\"metadata\":{\"name\":\"a\"},\"spec\":{\"x\":1},\"spec\":{\"y\":1}}",
                 (const char *[]){"/spec/x", NULL}, "{\"metadata\":{\"name\":\"a\"}}");
  expect_by_tree("{\"metadata\":{\"name\":\"a\"},\"spec\":5,\"spec\":{\"x\":1}}",
                 (const char *[]){"/spec/x", NULL},
                 "{\"metadata\":{\"name\":\"a\"},\"spec\":{\"x\":1}}");
}

static void large_integers_stay_exact(void **state)
{
  expect("{\"metadata\":{\"name\":\"a\",\"generation\":9007199254740993},"
         "\"spec\":{\"n\":12345678901234567}}",
         (const char *[]){"/spec/n", NULL},
         "{\"metadata\":{\"name\":\"a\",\"generation\":9007199254740993},"
         "\"spec\":{\"n\":12345678901234567}}");
}

/* More members than the printer's stack holds: its heap path. */
static void long_lists_work(void **state)
{
  char names[100][8], text[4096] = "{\"metadata\":{\"name\":\"a\"}";
  const char *keep[101];
  size_t at = strlen(text);

  for(int i = 0; i < 100; i++) {
    snprintf(names[i], sizeof(names[i]), "/m%d", i);
    keep[i] = names[i];
    at +=
        (size_t)snprintf(text + at, sizeof(text) - at, ",\"m%d\":%d,\"x%d\":0", i, i, i);
  }
  keep[100] = NULL;
  snprintf(text + at, sizeof(text) - at, "}");
  char *got = project(text, keep, 0);
  assert_non_null(strstr(got, ",\"m99\":99}"));
  assert_null(strstr(got, "\"x"));
  free(got);
}

static void invalid_paths_are_refused(void **state)
{
  /* Not JSON Pointers (a dot path from before pointers among them), or the
   * object itself. */
  static const char *const bad[] = {"",       "spec",  "spec.x", "status/conditions",
                                    "/spec~", "/a~2b", "/a~~1",  "/metadata/labels/a~/b"};
  /* Tokens are member names: empty ones, dots, brackets and digits too. */
  static const char *const good[] = {"/spec",
                                     "/status/conditions",
                                     "/metadata/labels",
                                     "/data",
                                     "/a-b_c~1d~0e",
                                     "/spec/0",
                                     "/",
                                     "//x",
                                     "/spec[0]",
                                     "/a.b/c.d",
                                     "/*"};
  struct kcr__proj *p = (struct kcr__proj *)1;

  for(size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    if(!kcr__proj_bad_path(bad[i]))
      fail_msg("\"%s\" was accepted", bad[i]);
    p = (struct kcr__proj *)1;
    assert_int_equal(KCR_EINVAL,
                     kcr__proj_new((const char *[]){"/spec", bad[i], NULL}, 0, &p));
    assert_null(p);
  }
  for(size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
    if(kcr__proj_bad_path(good[i]))
      fail_msg("\"%s\" was refused: %s", good[i], kcr__proj_bad_path(good[i]));
  assert_int_equal(KCR_EINVAL, kcr__proj_new(NULL, 0, &p));
  assert_int_equal(KCR_EINVAL, kcr__proj_new((const char *[]){NULL}, 0x80, &p));
}

/* A cached object made through a projection: its text is the projection
 * (managedFields stripped even under a whole "metadata"), its header the
 * same as the whole object's, and it costs less. */
static void a_projected_object_has_the_whole_object_s_header(void **state)
{
  struct kcr__proj *p = NULL;
  cJSON *t = parse(vfm), *back = NULL;
  kcr_obj *whole = NULL, *o = NULL;

  assert_int_equal(KCR_OK, kcr__proj_new((const char *[]){"/metadata", NULL}, 0, &p));
  assert_int_equal(KCR_OK, kcr__obj_from_json(t, 0, p, &o, NULL));
  assert_int_equal(KCR_OK, kcr_obj_from_json(t, 0, &whole, NULL));
  assert_string_equal(kcr_obj_key(whole), kcr_obj_key(o));
  assert_string_equal("u1", kcr_obj_uid(o));
  assert_string_equal("7", kcr_obj_rv(o));
  assert_int_equal(2, kcr_obj_generation(o));
  assert_string_equal("e1", kcr_obj_controller(o)->uid);
  assert_true(kcr_obj_size(o) < kcr_obj_size(whole));
  assert_null(strstr(kcr_obj_json(o, NULL), "managedFields"));
  assert_null(strstr(kcr_obj_json(o, NULL), "\"spec\""));
  assert_non_null(strstr(kcr_obj_json(o, NULL), "\"finalizers\""));
  assert_int_equal(KCR_OK, kcr_obj_parse(o, &back));
  assert_non_null(kcr_json_at(back, "/metadata/labels"));
  assert_null(kcr_json_at(back, "/status"));
  /* no name: refused as without a projection */
  cJSON_DeleteItemFromObject(kcr_json_at(t, "/metadata"), "name");
  kcr_obj *none = (kcr_obj *)1;
  assert_int_equal(KCR_EINVAL, kcr__obj_from_json(t, 0, p, &none, NULL));
  assert_null(none);
  cJSON_Delete(back);
  cJSON_Delete(t);
  kcr_obj_unref(o);
  kcr_obj_unref(whole);
  kcr__proj_free(p);
}

/* ---- out of memory ---- */

static bool proj_new_and_print(void *ud)
{
  const cJSON *t = ud;
  struct kcr__proj *p = (struct kcr__proj *)1;
  kcr_err rc =
      kcr__proj_new((const char *[]){"/spec", "/status/conditions", NULL}, 0, &p);
  struct kcr_buf b = KCR_BUF_INIT;
  char *text;
  bool ok;

  if(rc)
    return rc == KCR_ENOMEM && !p;
  rc = kcr__proj_print(p, t, &b);
  text = rc ? NULL : kcr_buf_take(&b);
  kcr_buf_cleanup(&b);
  tfail_exempt(true);
  ok = !text || (strstr(text, "\"conditions\"") && !strstr(text, "\"phase\""));
  tfail_exempt(false);
  free(text);
  kcr__proj_free(p);
  return ok;
}

static void out_of_memory_fails_cleanly(void **state)
{
  cJSON *t = parse(vfm);
  tfail_torture("kcr__proj_new + kcr__proj_print", proj_new_and_print, t);
  cJSON_Delete(t);
}

int main(void)
{
  tfail_init();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(an_empty_list_keeps_the_metadata_the_runtime_needs),
      cmocka_unit_test(listed_members_are_kept_whole_at_any_depth),
      cmocka_unit_test(paths_that_are_not_there_leave_nothing_behind),
      cmocka_unit_test(arrays_are_kept_whole_and_never_indexed),
      cmocka_unit_test(repeated_and_overlapping_paths_keep_the_widest),
      cmocka_unit_test(the_object_s_order_is_kept_not_the_list_s),
      cmocka_unit_test(managed_fields_are_kept_only_when_asked),
      cmocka_unit_test(the_last_of_members_with_one_name_is_kept),
      cmocka_unit_test(a_last_member_that_keeps_nothing_hides_earlier_ones),
      cmocka_unit_test(large_integers_stay_exact),
      cmocka_unit_test(long_lists_work),
      cmocka_unit_test(invalid_paths_are_refused),
      cmocka_unit_test(a_projected_object_has_the_whole_object_s_header),
      cmocka_unit_test(out_of_memory_fails_cleanly),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
