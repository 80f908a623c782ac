/* Typed objects (kcr/typed.h) through code kcr-gen generated at build time
 * from tests/data/crds/gen.kcr.test_widgets.yaml (every schema feature) and
 * ebdman's CRD: what decoding reads (presence, null, int-or-string, open
 * enums, raw text byte for byte, arrays of arrays, maps), who owns it (a
 * view borrows strings without escapes, a copy owns everything), that
 * encoding writes back the same text, the errors with their JSON Pointer,
 * and that every allocation failure ends in an error and no leak. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ebds.h"
#include "kcr.h"
#include "tfail.h"
#include "widgets.h"

/* Compact, members in the order the encoder writes them (sorted by name),
 * strings escaped as it escapes them: encoding gives these very bytes. */
static const char widget[] =
    "{\"apiVersion\":\"gen.kcr.test/v1\",\"kind\":\"Widget\","
    "\"metadata\":{\"labels\":{\"a/b\":\"c\"},\"name\":\"w\"},"
    "\"spec\":{\"FooBar\":\"F\",\"action\":\"Replace\",\"class\":\"c\",\"default\":\"d\","
    "\"enabled\":false,\"fooBar\":\"f\",\"hasSize\":true,\"label\":null,"
    "\"matrix\":[[1,2],[],[9007199254740993]],\"port\":\"80%\",\"ratio\":0.5,"
    "\"servers\":{\"a\":{\"host\":\"h\xc3\xa9\",\"weight\":-3},\"b\":{}},\"size\":0,"
    "\"tags\":[],\"values\":{\"z\":1,\"a\":[1.0,1e3,-0]},"
    "\"when\":\"2026-12-05T10:00:00.123456Z\"},"
    "\"status\":{\"conditions\":[{\"reason\":\"Line\\nBreak\",\"status\":\"Unknown\","
    "\"type\":\"Ready\"},{\"status\":\"Maybe\",\"type\":\"Other\"}],"
    "\"observedGeneration\":3}}";

static bool inside(const char *p, const char *text, size_t n)
{
  return p >= text && p < text + n;
}

static void a_view_reads_every_feature(void **state)
{
  struct kcr_arena a = KCR_ARENA_INIT;
  struct widget w;
  size_t n = strlen(widget);

  assert_int_equal(KCR_OK, widget_decode(widget, n, 0, &a, &w, NULL));
  assert_true(w.has_api_version && kcr_str_eq(w.api_version, WIDGET_API_VERSION));
  assert_true(kcr_str_eq(w.kind, "Widget"));
  /* metadata is libkcr's ObjectMeta (kcr/meta.h), whatever the CRD declares */
  assert_true(w.has_metadata && w.metadata.has_name && kcr_str_eq(w.metadata.name, "w"));
  assert_true(w.metadata.has_labels && w.metadata.labels.n == 1);
  assert_true(kcr_str_eq(w.metadata.labels.k[0], "a/b"));
  assert_true(kcr_str_eq(w.metadata.labels.v[0], "c"));
  assert_false(w.metadata.has_namespace_ || w.metadata.has_uid);
  /* presence: zero, false and empty are there */
  assert_true(w.spec.has_size && w.spec.size == 0);
  assert_true(w.spec.has_enabled && !w.spec.enabled);
  assert_true(w.spec.has_tags && w.spec.tags.n == 0 && !w.spec.null_tags);
  assert_false(w.has_status == false);
  /* null where the schema says nullable */
  assert_true(w.spec.has_label && w.spec.null_label && !w.spec.label.s);
  /* names: keywords escaped, collisions after case folding suffixed */
  assert_true(kcr_str_eq(w.spec.class_, "c") && kcr_str_eq(w.spec.default_, "d"));
  assert_true(kcr_str_eq(w.spec.foo_bar, "F")); /* "FooBar" first in byte order */
  assert_true(kcr_str_eq(w.spec.foo_bar_fa08, "f"));
  assert_true(w.spec.has_has_size_2a42 && w.spec.has_size_2a42);
  /* an enum: the listed value, case counts */
  assert_int_equal(WIDGET_SPEC_ACTION_REPLACE, w.spec.action.v);
  assert_true(kcr_str_eq(w.spec.action.text, "Replace"));
  /* int-or-string as read */
  assert_true(w.spec.port.is_str && kcr_str_eq(w.spec.port.s, "80%"));
  assert_true(w.spec.ratio == 0.5);
  /* arrays of arrays, exact int64 */
  assert_int_equal(3, w.spec.matrix.n);
  assert_int_equal(2, w.spec.matrix.v[0].n);
  assert_int_equal(0, w.spec.matrix.v[1].n);
  assert_true(w.spec.matrix.v[2].v[0] == INT64_C(9007199254740993));
  /* a map of objects; strings without escapes borrowed from the text */
  assert_int_equal(2, w.spec.servers.n);
  assert_true(kcr_str_eq(w.spec.servers.k[0], "a"));
  assert_true(kcr_str_eq(w.spec.servers.v[0].host, "h\xc3\xa9"));
  assert_true(inside(w.spec.servers.v[0].host.s, widget, n));
  assert_true(w.spec.servers.v[0].weight == -3);
  assert_false(w.spec.servers.v[1].has_host);
  /* preserve-unknown: raw text, byte for byte */
  assert_int_equal(strlen("{\"z\":1,\"a\":[1.0,1e3,-0]}"), w.spec.values.n);
  assert_memory_equal("{\"z\":1,\"a\":[1.0,1e3,-0]}", w.spec.values.s, w.spec.values.n);
  /* an escaped string is unescaped into the arena */
  struct widget_status_conditions_item *c = w.status.conditions.v;
  assert_int_equal(2, w.status.conditions.n);
  assert_true(kcr_str_eq(c[0].reason, "Line\nBreak"));
  assert_false(inside(c[0].reason.s, widget, n));
  /* "Unknown" is listed (its constant suffixed: <PREFIX>_UNKNOWN is the
   * constant for an unlisted value), "Maybe" is not and keeps its text */
  assert_int_equal(WIDGET_STATUS_CONDITIONS_ITEM_STATUS_UNKNOWN_0E59, c[0].status.v);
  assert_int_equal(WIDGET_STATUS_CONDITIONS_ITEM_STATUS_UNKNOWN, c[1].status.v);
  assert_true(kcr_str_eq(c[1].status.text, "Maybe"));
  assert_true(w.status.observed_generation == 3);
  kcr_arena_cleanup(&a);
}

static void encoding_writes_back_the_same_text(void **state)
{
  struct kcr_arena a = KCR_ARENA_INIT;
  struct kcr_buf b = KCR_BUF_INIT;
  struct widget w;

  assert_int_equal(KCR_OK, widget_decode(widget, strlen(widget), 0, &a, &w, NULL));
  assert_int_equal(KCR_OK, widget_encode(&w, &b, NULL));
  assert_string_equal(widget, kcr_buf_str(&b));
  /* a changed enum writes its listed value; an unlisted one its text */
  w.spec.action.v = WIDGET_SPEC_ACTION_A_B;
  w.spec.port = (struct kcr_intstr){.i = 8080};
  kcr_buf_reset(&b);
  assert_int_equal(KCR_OK, widget_encode(&w, &b, NULL));
  assert_non_null(strstr(kcr_buf_str(&b), "\"action\":\"a-b\""));
  assert_non_null(strstr(kcr_buf_str(&b), "\"port\":8080,"));
  assert_non_null(strstr(kcr_buf_str(&b), "\"status\":\"Maybe\""));
  kcr_buf_cleanup(&b);
  kcr_arena_cleanup(&a);
}

static void a_copy_outlives_its_text(void **state)
{
  struct kcr_arena a = KCR_ARENA_INIT;
  struct kcr_buf b = KCR_BUF_INIT;
  char *text = strdup(widget);
  size_t n = strlen(text);
  struct widget w;

  assert_int_equal(KCR_OK, widget_decode(text, n, KCR_TYPED_COPY, &a, &w, NULL));
  assert_false(inside(w.spec.servers.v[0].host.s, text, n));
  assert_false(inside(w.spec.values.s, text, n));
  assert_string_equal("gen.kcr.test/v1", w.api_version.s); /* NUL-terminated */
  memset(text, 'x', n);
  free(text);
  assert_int_equal(KCR_OK, widget_encode(&w, &b, NULL));
  assert_string_equal(widget, kcr_buf_str(&b));
  kcr_buf_cleanup(&b);
  kcr_arena_cleanup(&a);
}

static void an_object_built_in_c_writes_only_what_was_set(void **state)
{
  struct kcr_buf b = KCR_BUF_INIT;
  struct ebd e;

  ebd_init(&e);
  KCR_SET(e.spec.vfm_template, image, kcr_str_c("nginx"));
  KCR_SET(e.spec.vfm_template, replicas, 0); /* a zero that was meant */
  e.has_spec = e.spec.has_vfm_template = true;
  assert_int_equal(KCR_OK, ebd_encode(&e, &b, NULL));
  assert_string_equal("{\"apiVersion\":\"ebdman.example.com/v1beta1\",\"kind\":\"EBD\","
                      "\"spec\":{\"vfmTemplate\":{\"image\":\"nginx\",\"replicas\":0}}}",
                      kcr_buf_str(&b));
  /* metadata is typed too */
  KCR_SET(e.metadata, name, kcr_str_c("e1"));
  KCR_SET(e.metadata, namespace_, kcr_str_c("ns"));
  e.has_metadata = true;
  kcr_buf_reset(&b);
  assert_int_equal(KCR_OK, ebd_encode(&e, &b, NULL));
  assert_string_equal("{\"apiVersion\":\"ebdman.example.com/v1beta1\",\"kind\":\"EBD\","
                      "\"metadata\":{\"name\":\"e1\",\"namespace\":\"ns\"},"
                      "\"spec\":{\"vfmTemplate\":{\"image\":\"nginx\",\"replicas\":0}}}",
                      kcr_buf_str(&b));
  /* a raw member must hold one JSON value */
  struct widget w;
  memset(&w, 0, sizeof(w));
  w.has_spec = w.spec.has_values = true;
  w.spec.values = (struct kcr_raw){.s = "{\"name\":", .n = 8};
  kcr_buf_reset(&b);
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  assert_int_equal(KCR_EINVAL, widget_encode(&w, &b, &ei));
  assert_non_null(strstr(ei.message, "/spec/values"));
  kcr_errinfo_cleanup(&ei);
  kcr_buf_cleanup(&b);
}

static void errors_name_the_value(void **state)
{
  static const struct {
    const char *json, *msg;
    kcr_err rc;
  } cases[] = {
      {"{\"spec\":{\"matrix\":[[1],[2,\"x\"]]}}",
       "/spec/matrix/1/1: want an integer, got a string", KCR_EPARSE},
      {"{\"spec\":{\"size\":1.5}}", "/spec/size: want an integer, got a number",
       KCR_EPARSE},
      {"{\"spec\":{\"size\":92233720368547758070}}", "/spec/size: integer outside int64",
       KCR_ERANGE},
      {"{\"spec\":{\"servers\":{\"a~b/c\":{\"weight\":true}}}}",
       "/spec/servers/a~0b~1c/weight: want an integer, got a boolean", KCR_EPARSE},
      {"{\"spec\":[]}", "/spec: want an object, got an array", KCR_EPARSE},
      {"{\"spec\":{\"port\":{}}}",
       "/spec/port: want an integer or a string, got an object", KCR_EPARSE},
      {"[]", "(the value): want an object, got an array", KCR_EPARSE},
      {"{\"spec\":", "widget: not well-formed JSON", KCR_EPARSE},
  };
  struct kcr_arena a = KCR_ARENA_INIT;
  struct widget w;

  for(size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    struct kcr_errinfo ei = KCR_ERRINFO_INIT;
    assert_int_equal(cases[i].rc,
                     widget_decode(cases[i].json, strlen(cases[i].json), 0, &a, &w, &ei));
    assert_non_null(ei.message);
    if(!strstr(ei.message, cases[i].msg))
      fail_msg("%s: got \"%s\", want \"%s\"", cases[i].json, ei.message, cases[i].msg);
    kcr_errinfo_cleanup(&ei);
  }
  assert_int_equal(KCR_EINVAL, widget_decode("{}", 2, 0, NULL, &w, NULL));
  kcr_arena_cleanup(&a);
}

static void decoding_follows_go(void **state)
{
  struct kcr_arena a = KCR_ARENA_INIT;
  struct widget w;
  /* unknown members skipped; the last of a name counts, whole; null where
   * not nullable is absent; an escaped member name matches */
  const char *t = "{\"zzz\":[1,{\"x\":2}],\"spec\":{\"servers\":{\"a\":{\"host\":\"h\"}},"
                  "\"size\":null,\"\\u0073ervers\":{\"b\":{\"weight\":1}},\"ratio\":-0,"
                  "\"action\":\"nope\"},\"spec2\":1}";

  assert_int_equal(KCR_OK, widget_decode(t, strlen(t), 0, &a, &w, NULL));
  assert_false(w.spec.has_size);
  assert_int_equal(1, w.spec.servers.n);
  assert_true(kcr_str_eq(w.spec.servers.k[0], "b"));
  assert_false(w.spec.servers.v[0].has_host);
  assert_int_equal(WIDGET_SPEC_ACTION_UNKNOWN, w.spec.action.v);
  assert_true(kcr_str_eq(w.spec.action.text, "nope"));
  /* JSON null as the whole object decodes into nothing */
  assert_int_equal(KCR_OK, widget_decode(" null", 5, 0, &a, &w, NULL));
  assert_false(w.has_spec);
  /* a string member with \u00e9 and \n reads as its bytes */
  const char *u = "{\"spec\":{\"default\":\"caf\\u00e9\\n\"}}";
  assert_int_equal(KCR_OK, widget_decode(u, strlen(u), 0, &a, &w, NULL));
  assert_int_equal(6, w.spec.default_.n);
  assert_memory_equal("caf\xc3\xa9\n", w.spec.default_.s, 6);
  kcr_arena_cleanup(&a);
}

/* Items the schema makes nullable keep their nulls (null[i]), and encode
 * back as null; elsewhere a null item reads as the zero value, as Go reads
 * it. Regression: nulls in nullable items were read as "" and 0, so the
 * round trip of such an object lost them (tests/gen's Blob). */
static void nullable_items_keep_their_nulls(void **state)
{
  struct kcr_arena a = KCR_ARENA_INIT;
  struct kcr_buf b = KCR_BUF_INIT;
  struct widget w;
  const char *t =
      "{\"spec\":{\"notes\":[\"a\",null,\"\"],\"weights\":{\"x\":null,\"y\":0}}}";

  assert_int_equal(KCR_OK, widget_decode(t, strlen(t), 0, &a, &w, NULL));
  assert_int_equal(3, w.spec.notes.n);
  assert_false(w.spec.notes.null[0]);
  assert_true(w.spec.notes.null[1]);
  assert_false(w.spec.notes.null[2]);
  assert_true(kcr_str_eq(w.spec.notes.v[2], ""));
  assert_true(w.spec.weights.null[0] && !w.spec.weights.null[1]);
  assert_int_equal(KCR_OK, widget_encode(&w, &b, NULL));
  assert_string_equal(t, kcr_buf_str(&b));
  /* not nullable: a null item is the zero value */
  const char *u = "{\"spec\":{\"matrix\":[[1,null]]}}";
  assert_int_equal(KCR_OK, widget_decode(u, strlen(u), 0, &a, &w, NULL));
  assert_true(w.spec.matrix.v[0].n == 2 && w.spec.matrix.v[0].v[1] == 0);
  kcr_buf_cleanup(&b);
  kcr_arena_cleanup(&a);
}

/* Decoding is one pass that resumes where each value ended: trusted text
 * cut anywhere is an error inside its bytes (ASan sees the exact-size
 * copy), long arrays grow past several doublings, a repeated member whose
 * value is an array starts over, and white space sits anywhere. */
static void the_one_pass_walk_stays_in_its_text(void **state)
{
  struct kcr_arena a = KCR_ARENA_INIT;
  struct kcr_buf b = KCR_BUF_INIT, t = KCR_BUF_INIT;
  struct widget w;
  size_t n = strlen(widget);

  for(size_t cut = 1; cut < n; cut++) {
    char *p = malloc(cut);
    assert_non_null(p);
    memcpy(p, widget, cut);
    kcr_err rc = widget_decode(p, cut, KCR_TYPED_TRUSTED, &a, &w, NULL);
    if(rc != KCR_EPARSE)
      fail_msg("cut at %zu: %s", cut, kcr_strerror(rc));
    free(p);
    kcr_arena_reset(&a);
  }
  assert_int_equal(KCR_EPARSE, widget_decode("", 0, KCR_TYPED_TRUSTED, &a, &w, NULL));
  /* no text at all, as the contract allows: no arithmetic on NULL (UBSan) */
  assert_int_equal(KCR_EPARSE, widget_decode(NULL, 0, KCR_TYPED_TRUSTED, &a, &w, NULL));
  assert_int_equal(KCR_EPARSE, widget_decode(NULL, 0, 0, &a, &w, NULL));

  kcr_buf_puts(&t, "{\"spec\":{\"tags\":[\"x\"],\"tags\":[");
  for(int i = 0; i < 1000; i++)
    kcr_buf_printf(&t, "%s\"t%d\"", i ? "," : "", i);
  kcr_buf_puts(&t, "]}}");
  assert_int_equal(KCR_OK, kcr_buf_err(&t));
  assert_int_equal(KCR_OK, widget_decode(t.ptr, t.len, KCR_TYPED_TRUSTED, &a, &w, NULL));
  assert_int_equal(1000, w.spec.tags.n);
  assert_true(kcr_str_eq(w.spec.tags.v[0], "t0") &&
              kcr_str_eq(w.spec.tags.v[999], "t999"));

  const char *s = " { \"spec\" : { \"matrix\" : [ [ 1 , 2 ] , [ ] ] , \"servers\" :"
                  " { \"a\" : { \"weight\" : 4 } } } } ";
  assert_int_equal(KCR_OK, widget_decode(s, strlen(s), KCR_TYPED_TRUSTED, &a, &w, NULL));
  assert_int_equal(KCR_OK, widget_encode(&w, &b, NULL));
  assert_string_equal(
      "{\"spec\":{\"matrix\":[[1,2],[]],\"servers\":{\"a\":{\"weight\":4}}}}",
      kcr_buf_str(&b));
  kcr_buf_cleanup(&t);
  kcr_buf_cleanup(&b);
  kcr_arena_cleanup(&a);
}

/* Encoding writes an object member when something inside it is set, so
 * an object to apply is built by setting its leaves; has_ alone writes an
 * empty object, nothing set writes nothing. Regression: the objects around
 * a set member had to be marked by hand (e.has_spec = e.spec.has_vfm_template =
 * true), and forgetting one dropped the member without a word. */
static void setting_a_member_makes_its_objects_present(void **state)
{
  struct kcr_buf b = KCR_BUF_INIT;
  struct ebd e;

  ebd_init(&e);
  KCR_SET(e.metadata, name, kcr_str_c("n"));
  KCR_SET(e.spec.vfm_template, image, kcr_str_c("i"));
  assert_int_equal(KCR_OK, ebd_encode(&e, &b, NULL));
  assert_string_equal(
      "{\"apiVersion\":\"" EBD_API_VERSION "\",\"kind\":\"EBD\","
      "\"metadata\":{\"name\":\"n\"},\"spec\":{\"vfmTemplate\":{\"image\":\"i\"}}}",
      kcr_buf_str(&b));
  kcr_buf_reset(&b);
  ebd_init(&e);
  e.has_spec = true;
  e.spec.vfm_template.replicas = 3; /* without has_: not written */
  assert_int_equal(KCR_OK, ebd_encode(&e, &b, NULL));
  assert_string_equal("{\"apiVersion\":\"" EBD_API_VERSION
                      "\",\"kind\":\"EBD\",\"spec\":{}}",
                      kcr_buf_str(&b));
  /* the metadata of any kind, found by its description */
  assert_ptr_equal(&e.metadata, kcr_typed_meta(&ebd_type, &e));
  assert_null(kcr_typed_meta(&kcr_meta_v1_object_meta_type, &e.metadata));
  assert_null(kcr_typed_meta(&kcr_type_int, &e));
  assert_null(kcr_typed_meta(NULL, &e));
  kcr_buf_cleanup(&b);
}

/* Maps of strings, read by key and set from pairs (labels here; a
 * ConfigMap's data, annotations alike). */
static void a_map_of_strings_is_read_by_key_and_set_from_pairs(void **state)
{
  struct kcr_arena a = KCR_ARENA_INIT;
  struct kcr_buf b = KCR_BUF_INIT;
  struct ebd e;

  ebd_init(&e);
  assert_int_equal(KCR_OK, KCR_SET_STRMAP(e.metadata, labels, &a, "a", "1", "b", "2"));
  assert_true(e.metadata.has_labels && e.metadata.labels.n == 2);
  assert_true(kcr_str_eq(KCR_MAP_STR(e.metadata.labels, "b"), "2"));
  assert_null(KCR_MAP_STR(e.metadata.labels, "c").s);
  assert_int_equal(KCR_OK, ebd_encode(&e, &b, NULL));
  assert_non_null(
      strstr(kcr_buf_str(&b), "\"metadata\":{\"labels\":{\"a\":\"1\",\"b\":\"2\"}}"));
  /* a key without a value: refused, the map as it was */
  assert_int_equal(KCR_EINVAL, KCR_SET_STRMAP(e.metadata, labels, &a, "x", "1", "y"));
  assert_int_equal(KCR_EINVAL, KCR_SET_STRMAP(e.metadata, labels, &a, "x", (char *)NULL));
  assert_int_equal(2, e.metadata.labels.n);
  /* one type for every map of strings: labels become a spec's map as they are */
  KCR_SET(e.spec.vfm_template, config, e.metadata.labels);
  assert_true(kcr_str_eq(KCR_MAP_STR(e.spec.vfm_template.config, "a"), "1"));
  /* compared in any order; absent and empty alike */
  struct kcr_strmap x = {0}, y = {0};
  assert_true(kcr_strmap_same(&x, NULL));
  assert_int_equal(KCR_OK, kcr_strmap_put(&a, &x, "a", "1"));
  assert_int_equal(KCR_OK, kcr_strmap_put(&a, &x, "b", "2"));
  assert_true(kcr_strmap_same(&x, &e.metadata.labels));
  assert_int_equal(KCR_OK, kcr_strmap_put(&a, &y, "b", "2"));
  assert_false(kcr_strmap_same(&x, &y));
  assert_false(kcr_strmap_same(&y, &x));
  assert_int_equal(KCR_OK, kcr_strmap_put(&a, &y, "a", "9"));
  assert_false(kcr_strmap_same(&x, &y));
  /* put replaces a key's value in new arrays: x's are not written */
  const struct kcr_str *old_v = x.v;
  assert_int_equal(KCR_OK, kcr_strmap_put(&a, &x, "a", "9"));
  assert_int_equal(2, x.n);
  assert_true(kcr_str_eq(old_v[0], "1") && old_v != x.v);
  assert_true(kcr_strmap_same(&x, &y));
  assert_int_equal(KCR_EINVAL, kcr_strmap_put(&a, &x, "c", NULL));
  assert_int_equal(2, x.n);
  /* none: an empty map, present */
  ebd_init(&e);
  assert_int_equal(KCR_OK, KCR_SET_STRMAP(e.metadata, labels, &a, (char *)NULL));
  assert_true(e.metadata.has_labels && e.metadata.labels.n == 0);
  assert_null(KCR_MAP_STR(e.metadata.labels, "a").s);
  kcr_buf_cleanup(&b);
  kcr_arena_cleanup(&a);
}

/* <kind>_set_controller_of (kcr_typed_set_controller), as controller-
 * runtime's SetControllerReference: the owner's reference is added once,
 * with the kind's apiVersion and kind and copies of its name and uid; a
 * reference to the same object (group, kind, name: an owner made again
 * has a new uid) is replaced, in a new array; an owner in another
 * namespace, without a uid, or besides another controller is refused with
 * the child unchanged. */
static void an_owner_becomes_the_controller_once(void **state)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  struct kcr_arena a = KCR_ARENA_INIT;
  struct kcr_buf b = KCR_BUF_INIT;
  struct kcr_meta_v1_owner_reference refs[2];
  struct ebd owner, other, child;
  char uid[] = "u-1";

  ebd_init(&owner);
  KCR_SET(owner.metadata, name, kcr_str_c("o"));
  KCR_SET(owner.metadata, namespace_, kcr_str_c("ns"));
  KCR_SET(owner.metadata, uid, kcr_str_c(uid));
  ebd_init(&child);
  KCR_SET(child.metadata, name, kcr_str_c("c"));
  assert_int_equal(KCR_EINVAL, ebd_set_controller_of(&a, &child.metadata, &owner, &ei));
  assert_non_null(strstr(ei.message, "cannot own an object in namespace \"\""));
  assert_false(child.metadata.has_owner_references);
  KCR_SET(child.metadata, namespace_, kcr_str_c("ns"));
  assert_int_equal(KCR_OK, ebd_set_controller_of(&a, &child.metadata, &owner, &ei));
  uid[0] = 'X'; /* the child keeps a copy */
  assert_int_equal(KCR_OK, ebd_encode(&child, &b, NULL));
  assert_non_null(strstr(kcr_buf_str(&b),
                         "\"ownerReferences\":[{\"apiVersion\":\"ebdman.example.com/"
                         "v1beta1\",\"blockOwnerDeletion\":true,\"controller\":true,"
                         "\"kind\":\"EBD\",\"name\":\"o\",\"uid\":\"u-1\"}]"));
  uid[0] = 'u';
  assert_int_equal(KCR_OK, ebd_set_controller_of(&a, &child.metadata, &owner, &ei));
  assert_int_equal(1, child.metadata.owner_references.n);
  /* the owner made again under its name: the reference follows its uid */
  other = owner;
  KCR_SET(other.metadata, uid, kcr_str_c("u-2"));
  assert_int_equal(KCR_OK, ebd_set_controller_of(&a, &child.metadata, &other, &ei));
  assert_int_equal(1, child.metadata.owner_references.n);
  assert_true(kcr_str_eq(child.metadata.owner_references.v[0].uid, "u-2"));
  /* another object: refused, the child as it was */
  KCR_SET(other.metadata, name, kcr_str_c("p"));
  assert_int_equal(KCR_EINVAL, ebd_set_controller_of(&a, &child.metadata, &other, &ei));
  assert_non_null(strstr(ei.message, "already controlled by EBD o (uid u-2)"));
  assert_int_equal(1, child.metadata.owner_references.n);

  /* a plain reference to the same object, in another version of its group
   * (a cluster-scoped owner here), is replaced in a new array - the
   * child's old one, which it may share, is not written - and the others
   * stay as they were */
  memset(refs, 0, sizeof(refs));
  KCR_SET(refs[0], uid, kcr_str_c("u-3"));
  KCR_SET(refs[1], api_version, kcr_str_c("ebdman.example.com/v1"));
  KCR_SET(refs[1], kind, kcr_str_c("EBD"));
  KCR_SET(refs[1], name, kcr_str_c("p"));
  KCR_SET(refs[1], controller, false);
  child.metadata.owner_references.v = refs;
  child.metadata.owner_references.n = 2;
  other.metadata.has_namespace_ = false;
  assert_int_equal(KCR_OK, ebd_set_controller_of(&a, &child.metadata, &other, &ei));
  assert_int_equal(2, child.metadata.owner_references.n);
  assert_ptr_not_equal(refs, child.metadata.owner_references.v);
  assert_false(refs[1].controller);
  struct kcr_meta_v1_owner_reference *r = child.metadata.owner_references.v;
  assert_true(r[1].controller && r[1].block_owner_deletion &&
              kcr_str_eq(r[1].uid, "u-2") &&
              kcr_str_eq(r[1].api_version, "ebdman.example.com/v1beta1"));
  assert_true(kcr_str_eq(r[0].uid, "u-3") && !r[0].has_controller);

  /* what an owner must have */
  KCR_SET(other.metadata, uid, kcr_str_c(""));
  assert_int_equal(KCR_EINVAL, ebd_set_controller_of(&a, &child.metadata, &other, &ei));
  assert_non_null(strstr(ei.message, "metadata.uid"));
  assert_int_equal(KCR_EINVAL, ebd_set_controller_of(&a, &child.metadata, NULL, &ei));
  assert_int_equal(KCR_EINVAL, ebd_set_controller_of(NULL, &child.metadata, &owner, &ei));
  assert_int_equal(KCR_EINVAL, ebd_set_controller_of(&a, NULL, &owner, NULL));
  assert_int_equal(2, child.metadata.owner_references.n);
  kcr_errinfo_cleanup(&ei);
  kcr_buf_cleanup(&b);
  kcr_arena_cleanup(&a);
}

/* <kind>_validate (kcr_typed_validate) asks what the widget's schema asks,
 * as the apiserver does: required members, bounds (exclusive too),
 * lengths in code points, counts, list-type set and map uniqueness,
 * formats, enums; null and absent members are not checked further, and
 * KCR_VALIDATE_PARTIAL leaves required members to the apiserver. Each
 * failure names the value's JSON Pointer and the rule. */
static void validation_asks_what_the_schema_asks(void **state)
{
#define SPEC(x) "{\"spec\":{\"size\":1," x "}}"
  static const struct {
    const char *json;
    unsigned flags;
    const char *err; /* NULL: valid */
  } cases[] = {
      {"{\"spec\":{\"size\":1}}", 0, NULL},
      {"{}", 0, NULL}, /* no spec: nothing in it is asked for */
      {"{\"spec\":{}}", 0, "/spec/size: required, and absent"},
      {"{\"spec\":{}}", KCR_VALIDATE_PARTIAL, NULL},
      {"{\"spec\":{\"label\":null}}", KCR_VALIDATE_PARTIAL, NULL},
      {SPEC("\"ratio\":0"), 0, "/spec/ratio: 0 is not above the minimum 0"},
      {SPEC("\"ratio\":1"), 0, NULL},
      {SPEC("\"ratio\":1.5"), 0, "/spec/ratio: 1.5 is more than the maximum 1"},
      {SPEC("\"tags\":[\"a\",\"\"]"), 0,
       "/spec/tags/1: 0 characters, fewer than the 1 required"},
      {SPEC("\"tags\":[\"\xc3\xa9\xc3\xa9\xc3\xa9\"]"), 0, NULL}, /* 3 code points */
      {SPEC("\"tags\":[\"abcd\"]"), 0,
       "/spec/tags/0: 4 characters, more than the 3 allowed"},
      {SPEC("\"tags\":[\"a\",\"b\",\"c\",\"d\"]"), 0,
       "/spec/tags: 4 items, more than the 3 allowed"},
      {SPEC("\"tags\":[\"a\",\"b\",\"a\"]"), 0,
       "/spec/tags/2: the same value as item 0 (list-type set)"},
      {SPEC("\"tags\":null"), 0, NULL},
      {SPEC("\"servers\":{\"a\":{}}"), 0, "/spec/servers/a/host: required, and absent"},
      {SPEC("\"servers\":{\"a/b\":{\"host\":\"x\",\"weight\":100}}"), 0,
       "/spec/servers/a~1b/weight: 100 is not below the maximum 100"},
      {SPEC("\"servers\":{\"a\":{\"host\":\"x\",\"weight\":-6}}"), 0,
       "/spec/servers/a/weight: -6 is less than the minimum -5"},
      {SPEC("\"servers\":{\"a\":{\"host\":\"h\xc3\xa9\",\"weight\":-5}}"), 0, NULL},
      /* an invalid UTF-8 byte counts one, as Go's utf8.RuneCount */
      {SPEC("\"servers\":{\"a\":{\"host\":\"h\xff\xfe\"}}"), 0,
       "/spec/servers/a/host: 3 characters, more than the 2 allowed"},
      {SPEC("\"servers\":{\"a\":{\"host\":\"x\"},\"b\":{\"host\":\"x\"},\"c\":{\"host\":"
            "\"x\"}}"),
       0, "/spec/servers: 3 properties, more than the 2 allowed"},
      {SPEC("\"servers\":{\"a\":{\"host\":\"x\",\"secret\":\"aGk=\",\"day\":\"2024-02-"
            "29\"}}"),
       0, NULL},
      {SPEC("\"servers\":{\"a\":{\"host\":\"x\",\"secret\":\"aGk\"}}"), 0,
       "/spec/servers/a/secret: not base64 (format byte)"},
      {SPEC("\"servers\":{\"a\":{\"host\":\"x\",\"secret\":\"\"}}"), 0,
       "/spec/servers/a/secret: not base64 (format byte)"},
      {SPEC("\"servers\":{\"a\":{\"host\":\"x\",\"day\":\"2023-02-29\"}}"), 0,
       "/spec/servers/a/day: \"2023-02-29\" is not a date (RFC 3339 full-date)"},
      {SPEC("\"when\":\"2026-12-05T10:00:00Z\""), 0, NULL},
      {SPEC("\"when\":\"2026-12-05t23:59:59.5+01:00\""), 0, NULL},
      {SPEC("\"when\":\"2026-12-05T24:00:00Z\""), 0,
       "/spec/when: \"2026-12-05T24:00:00Z\" is not a date-time (RFC 3339)"},
      {SPEC("\"when\":\"2026-12-05 10:00:00Z\""), 0,
       "/spec/when: \"2026-12-05 10:00:00Z\" is not a date-time (RFC 3339)"},
      {SPEC("\"action\":\"nope\""), 0,
       "/spec/action: \"nope\" is not one of the 6 values the schema lists"},
      {"{\"status\":{\"conditions\":[{\"type\":\"A\",\"status\":\"True\"},"
       "{\"type\":\"B\",\"status\":\"True\"},{\"type\":\"A\",\"status\":\"False\"}]}}",
       0, "/status/conditions/2: the same keys as item 0 (list-type map)"},
      {"{\"status\":{\"conditions\":[{\"type\":\"A\"}]}}", 0,
       "/status/conditions/0/status: required, and absent"},
      /* numbers as the apiserver reads them: a whole one is an int64 and
       * meets the bound truncated (0 against 0.5 is fine, 2 against an
       * exclusive 2.5 is not), others are doubles */
      {SPEC("\"scale\":0"), 0, NULL},
      {SPEC("\"scale\":0.25"), 0, "/spec/scale: 0.25 is less than the minimum 0.5"},
      {SPEC("\"scale\":2.4"), 0, NULL},
      {SPEC("\"scale\":2"), 0, "/spec/scale: 2 is not below the maximum 2.5"},
      /* an enum's and an int-or-string's value meet the rules of its type */
      {SPEC("\"tier\":\"a\""), 0, NULL},
      {SPEC("\"tier\":\"bb\""), 0, "/spec/tier: 2 characters, more than the 1 allowed"},
      {SPEC("\"port\":70000"), 0, "/spec/port: 70000 is more than the maximum 65535"},
      {SPEC("\"port\":\"123456\""), 0,
       "/spec/port: 6 characters, more than the 5 allowed"},
      /* an object's properties are counted */
      {SPEC("\"limits\":{\"cpu\":\"1\"}"), 0,
       "/spec/limits: 1 properties, fewer than the 2 required"},
      {SPEC("\"limits\":{\"cpu\":\"1\",\"pods\":3}"), 0, NULL},
      /* a list-map item carries its keys, but those the schema defaults */
      {SPEC("\"ports\":[{\"port\":80},{\"port\":80,\"protocol\":\"UDP\"}]"), 0, NULL},
      {"{\"spec\":{\"ports\":[{\"port\":1}]}}", KCR_VALIDATE_PARTIAL, NULL},
      {"{\"spec\":{\"ports\":[{\"protocol\":\"UDP\"}]}}", KCR_VALIDATE_PARTIAL,
       "/spec/ports/0: no \"port\", a key of this list-type map"},
      {SPEC("\"ports\":[{\"protocol\":\"UDP\"}]"), 0,
       "/spec/ports/0/port: required, and absent"},
  };
#undef SPEC
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  struct kcr_arena a = KCR_ARENA_INIT;
  struct kcr_buf big = KCR_BUF_INIT;
  struct widget w;

  for(size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    assert_int_equal(KCR_OK,
                     widget_decode(cases[i].json, strlen(cases[i].json), 0, &a, &w, &ei));
    kcr_err rc = widget_validate(&w, cases[i].flags, &ei);
    if(!cases[i].err) {
      if(rc)
        fail_msg("%s: %s", cases[i].json, ei.message);
      continue;
    }
    assert_int_equal(KCR_EINVAL, rc);
    assert_string_equal(cases[i].err, ei.message);
  }
  /* a long list-map: its duplicate found by sorting, not pair by pair */
  kcr_buf_puts(&big, "{\"spec\":{\"size\":1,\"ports\":[");
  for(int i = 0; i < 20000; i++)
    kcr_buf_printf(&big, "{\"port\":%d,\"protocol\":\"%s\"},", i / 2,
                   i % 2 ? "UDP" : "TCP");
  kcr_buf_puts(&big, "{\"port\":7,\"protocol\":\"UDP\"}]}}");
  assert_int_equal(KCR_OK, widget_decode(big.ptr, big.len, 0, &a, &w, &ei));
  assert_int_equal(KCR_EINVAL, widget_validate(&w, 0, &ei));
  assert_string_equal("/spec/ports/20000: the same keys as item 15 (list-type map)",
                      ei.message);
  w.spec.ports.n--;
  assert_int_equal(KCR_OK, widget_validate(&w, 0, &ei));
  kcr_buf_cleanup(&big);
  /* the sample: a server without its required host, a status the enum
   * does not list */
  assert_int_equal(KCR_OK, widget_decode(widget, strlen(widget), 0, &a, &w, &ei));
  assert_int_equal(KCR_EINVAL, widget_validate(&w, 0, &ei));
  assert_string_equal("/spec/servers/b/host: required, and absent", ei.message);
  w.spec.servers.n = 1;
  assert_int_equal(KCR_EINVAL, widget_validate(&w, 0, &ei));
  assert_string_equal("/status/conditions/1/status: \"Maybe\" is not one of the 3 values "
                      "the schema lists",
                      ei.message);
  w.status.conditions.n = 1;
  assert_int_equal(KCR_OK, widget_validate(&w, 0, &ei));
  /* a listed value given as text alone (v 0) is listed */
  w.status.conditions.v[0].status = (struct kcr_enum){.text = kcr_str_c("True")};
  assert_int_equal(KCR_OK, widget_validate(&w, 0, &ei));
  assert_int_equal(KCR_EINVAL, kcr_typed_validate(NULL, &w, 0, &ei));
  assert_int_equal(KCR_EINVAL, widget_validate(NULL, 0, NULL));
  kcr_errinfo_cleanup(&ei);
  kcr_arena_cleanup(&a);
}

/* A typed cached read refuses, before it looks, a view without the
 * reference the view borrows from (kcr_manager_get_typed). */
static void a_cached_view_needs_its_reference(void **state)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  struct kcr_arena a = KCR_ARENA_INIT;
  kcr_obj *o = (kcr_obj *)&a; /* set to NULL on every error */
  struct ebd e;

  assert_int_equal(KCR_EINVAL, ebd_get(NULL, "ns", "n", 0, &a, &e, NULL, &ei));
  assert_non_null(strstr(ei.message, "needs obj"));
  assert_int_equal(KCR_EINVAL, ebd_get(NULL, "ns", "n", 0, NULL, &e, &o, &ei));
  assert_null(o);
  assert_int_equal(KCR_EINVAL, kcr_manager_get_typed(NULL, NULL, &ebd_gvr, "ns", "n",
                                                     KCR_TYPED_COPY, &a, &e, NULL, &ei));
  kcr_errinfo_cleanup(&ei);
  kcr_arena_cleanup(&a);
}

struct torture {
  unsigned flags;
};

static bool decode_encode(void *ud)
{
  struct torture *t = ud;
  /* small blocks: nearly every allocation of the decoder takes one */
  struct kcr_arena a = {.block_size = 32};
  struct kcr_buf b = KCR_BUF_INIT;
  struct widget w;
  bool ok;
  kcr_err rc = widget_decode(widget, strlen(widget), t->flags, &a, &w, NULL);

  if(rc) {
    ok = rc == KCR_ENOMEM;
  } else {
    rc = widget_encode(&w, &b, NULL);
    ok = rc ? rc == KCR_ENOMEM : !strcmp(kcr_buf_str(&b), widget);
  }
  kcr_buf_cleanup(&b);
  kcr_arena_cleanup(&a);
  return ok;
}

/* Out of memory anywhere in kcr_typed_set_controller: KCR_ENOMEM and the
 * child without the reference. */
static bool set_controller(void *ud)
{
  struct kcr_arena a = {.block_size = 32};
  struct ebd owner, child;
  bool ok;
  kcr_err rc;

  (void)ud;
  ebd_init(&owner);
  KCR_SET(owner.metadata, name, kcr_str_c("a-rather-long-name-for-a-new-block"));
  KCR_SET(owner.metadata, uid, kcr_str_c("a-uid-long-enough-for-a-new-block-too"));
  ebd_init(&child);
  rc = ebd_set_controller_of(&a, &child.metadata, &owner, NULL);
  ok = rc ? rc == KCR_ENOMEM && !child.metadata.has_owner_references
          : child.metadata.owner_references.n == 1;
  kcr_arena_cleanup(&a);
  return ok;
}

/* Out of memory while comparing list items: KCR_ENOMEM, never a verdict
 * on what was not compared. */
static bool validate_set(void *ud)
{
  static const char json[] =
      "{\"spec\":{\"size\":1,\"tags\":[\"a\",\"b\",\"b\"]},\"status\":{\"conditions\":["
      "{\"type\":\"A\",\"status\":\"True\"},{\"type\":\"A\",\"status\":\"True\"}]}}";
  struct kcr_arena a = KCR_ARENA_INIT;
  struct widget w;
  kcr_err rc;
  bool ok;

  (void)ud;
  rc = widget_decode(json, strlen(json), KCR_TYPED_COPY, &a, &w, NULL);
  if(rc) {
    ok = rc == KCR_ENOMEM;
  } else {
    rc = widget_validate(&w, 0, NULL);
    ok = rc == KCR_ENOMEM || rc == KCR_EINVAL;
    if(rc == KCR_EINVAL) { /* the verdict stands: the set, then the map */
      w.spec.tags.n = 2;
      rc = widget_validate(&w, 0, NULL);
      ok = rc == KCR_ENOMEM || rc == KCR_EINVAL;
    }
  }
  kcr_arena_cleanup(&a);
  return ok;
}

static void every_allocation_failure_is_an_error(void **state)
{
  struct torture view = {0}, copy = {.flags = KCR_TYPED_COPY};

  tfail_torture("widget view", decode_encode, &view);
  tfail_torture("widget copy", decode_encode, &copy);
  tfail_torture("set controller", set_controller, NULL);
  tfail_torture("validate", validate_set, NULL);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(a_view_reads_every_feature),
      cmocka_unit_test(encoding_writes_back_the_same_text),
      cmocka_unit_test(a_copy_outlives_its_text),
      cmocka_unit_test(an_object_built_in_c_writes_only_what_was_set),
      cmocka_unit_test(errors_name_the_value),
      cmocka_unit_test(decoding_follows_go),
      cmocka_unit_test(nullable_items_keep_their_nulls),
      cmocka_unit_test(the_one_pass_walk_stays_in_its_text),
      cmocka_unit_test(setting_a_member_makes_its_objects_present),
      cmocka_unit_test(a_cached_view_needs_its_reference),
      cmocka_unit_test(an_owner_becomes_the_controller_once),
      cmocka_unit_test(validation_asks_what_the_schema_asks),
      cmocka_unit_test(a_map_of_strings_is_read_by_key_and_set_from_pairs),
      cmocka_unit_test(every_allocation_failure_is_an_error),
  };
  tfail_init();
  return cmocka_run_group_tests(tests, NULL, NULL);
}
