/* Cached objects from a watch event's text (kcr__obj_from_text): the same
 * object the tree makes (kcr__obj_from_json) - header and a text that
 * parses to the same tree - for served objects, through a keep-list, with
 * managedFields kept or not, and for every kind of text only the tree can
 * read exactly (white space, escapes in names and header strings, odd
 * generations and ownerReferences, duplicates, deep nesting, malformed
 * text), which goes through the tree. The text of a served object is kept
 * as written (numbers too), which shows no tree was made. */
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
#include "kcr/store.h"
#include "kcr/watch.h"
#include "kube/watch-int.h"
#include "runtime/projection-int.h"
#include "runtime/store-int.h"
#include "tfail.h"

/* A VFM as the apiserver writes it (compact, managedFields, an owner). */
static const char served[] =
    "{\"apiVersion\":\"ebdman.example.com/v1alpha1\",\"kind\":\"VFM\","
    "\"metadata\":{\"name\":\"a\",\"namespace\":\"ns\",\"uid\":\"u1\","
    "\"resourceVersion\":\"7\",\"generation\":2,"
    "\"creationTimestamp\":\"2024-01-01T00:00:00Z\","
    "\"ownerReferences\":[{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"name\":\"x\","
    "\"uid\":\"c0\"},{\"apiVersion\":\"ebdman.example.com/v1alpha1\","
    "\"kind\":\"EBD\",\"name\":\"a\",\"uid\":\"e1\",\"controller\":true,"
    "\"blockOwnerDeletion\":true}],"
    "\"managedFields\":[{\"manager\":\"ebdman\",\"operation\":\"Apply\"}]},"
    "\"spec\":{\"replicas\":3,\"ratio\":1.50e1,\"big\":12345678901234567},"
    "\"status\":{\"phase\":\"Running\","
    "\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"}]}}";

static struct kcr__proj *proj(void)
{
  static struct kcr__proj *p;
  if(!p)
    assert_int_equal(KCR_OK, kcr__proj_new((const char *[]){"/spec/replicas",
                                                            "/status/conditions", NULL},
                                           0, &p));
  return p;
}

static bool same_str(const char *a, const char *b)
{
  return a == b || (a && b && !strcmp(a, b));
}

/* The canonical text of an object's stored text: parsed, printed. */
static char *canon(const kcr_obj *o)
{
  cJSON *t = NULL;
  char *s;
  assert_int_equal(KCR_OK, kcr_obj_parse(o, &t));
  s = kcr_json_to_text(t);
  assert_non_null(s);
  cJSON_Delete(t);
  return s;
}

/* As the informer makes it from a watch event carrying text (checked text
 * only): the event's metadata and managedFields spans stepped over - the
 * same result as a (ra its code), byte for byte. */
static void same_from_an_event(const char *text, size_t len, unsigned flags,
                               const struct kcr__proj *p, const kcr_obj *a, kcr_err ra)
{
  static const char head[] = "{\"type\":\"MODIFIED\",\"object\":";
  struct kcr_buf line = KCR_BUF_INIT, rv = KCR_BUF_INIT;
  struct kcr_watch_event ev;
  kcr_obj *o = NULL;
  kcr_err rc;

  kcr_buf_append(&line, head, sizeof(head) - 1);
  kcr_buf_append(&line, text, len);
  kcr_buf_append(&line, "}", 1);
  assert_int_equal(KCR_OK, kcr_buf_err(&line));
  rc = kcr__watch_decode_text(line.ptr, line.len, &rv, &ev);
  if(rc == KCR_ENOTFOUND) { /* (a resourceVersion with escapes: a tree event) */
    kcr_buf_cleanup(&line);
    kcr_buf_cleanup(&rv);
    return;
  }
  assert_int_equal(KCR_OK, rc);
  assert_int_equal(len, ev.object_len);
  const struct kcr__json_want known[2] = {
      {.at = ev.metadata_text, .n = ev.metadata_len},
      {.at = ev.managed_fields_text, .n = ev.managed_fields_len}};
  assert_int_equal(ra, kcr__obj_from_text(ev.object_text, ev.object_len, flags, p, known,
                                          2, &o, NULL));
  if(!ra) {
    size_t an, on;
    const char *at = kcr_obj_json(a, &an), *ot = kcr_obj_json(o, &on);
    assert_int_equal(an, on);
    assert_memory_equal(at, ot, an);
    assert_string_equal(kcr_obj_key(a), kcr_obj_key(o));
    assert_string_equal(kcr_obj_uid(a), kcr_obj_uid(o));
    assert_string_equal(kcr_obj_rv(a), kcr_obj_rv(o));
    assert_int_equal(kcr_obj_generation(a), kcr_obj_generation(o));
    assert_int_equal(kcr_obj_deleting(a), kcr_obj_deleting(o));
    assert_true(same_str(kcr_obj_controller(a)->uid, kcr_obj_controller(o)->uid));
  }
  kcr_obj_unref(o);
  kcr_buf_cleanup(&line);
  kcr_buf_cleanup(&rv);
}

/* From text and from its tree, with flags and p: the same result (and, for
 * checked text, from a watch event). Returns the object from text (NULL
 * when both failed), for more checks. */
static kcr_obj *same_both_ways(const char *text, size_t len, unsigned flags,
                               const struct kcr__proj *p)
{
  kcr_obj *a = NULL, *b = NULL;
  cJSON *tree = NULL;
  kcr_err ra = kcr__obj_from_text(text, len, flags, p, NULL, 0, &a, NULL), rb;

  rb = kcr_json_parse(text, len, &tree, NULL);
  if(rb == KCR_OK)
    rb = kcr__obj_from_json(tree, flags & ~KCR__OBJ_CHECKED, p, &b, NULL);
  cJSON_Delete(tree);
  assert_int_equal(rb, ra);
  if(flags & KCR__OBJ_CHECKED)
    same_from_an_event(text, len, flags, p, a, ra);
  if(ra) {
    assert_null(a);
    return NULL;
  }
  assert_string_equal(kcr_obj_key(a), kcr_obj_key(b));
  assert_string_equal(kcr_obj_ns(a), kcr_obj_ns(b));
  assert_string_equal(kcr_obj_name(a), kcr_obj_name(b));
  assert_string_equal(kcr_obj_uid(a), kcr_obj_uid(b));
  assert_string_equal(kcr_obj_rv(a), kcr_obj_rv(b));
  assert_int_equal(kcr_obj_generation(a), kcr_obj_generation(b));
  assert_int_equal(kcr_obj_deleting(a), kcr_obj_deleting(b));
  assert_true(
      same_str(kcr_obj_controller(a)->api_version, kcr_obj_controller(b)->api_version));
  assert_true(same_str(kcr_obj_controller(a)->kind, kcr_obj_controller(b)->kind));
  assert_true(same_str(kcr_obj_controller(a)->name, kcr_obj_controller(b)->name));
  assert_true(same_str(kcr_obj_controller(a)->uid, kcr_obj_controller(b)->uid));
  char *ca = canon(a), *cb = canon(b);
  assert_string_equal(cb, ca);
  free(ca);
  free(cb);
  kcr_obj_unref(b);
  return a;
}

/* Every way: flags 0 and keep managedFields, whole and projected; and for
 * text that is one compact, well-formed object, also as checked before
 * (KCR__OBJ_CHECKED: the informer's way). */
static void same_every_way(const char *text)
{
  size_t objlen;
  bool compact;

  kcr__json_scan(text, strlen(text), NULL, 0, &objlen, &compact);
  for(int i = 0; i < 8; i++) {
    unsigned flags = i & 1 ? KCR_OBJ_KEEP_MANAGED_FIELDS : 0;
    if(i & 4) {
      if(!compact || objlen != strlen(text))
        continue;
      flags |= KCR__OBJ_CHECKED;
    }
    kcr_obj_unref(same_both_ways(text, strlen(text), flags, i & 2 ? proj() : NULL));
  }
}

static void a_served_object_is_kept_as_written(void **state)
{
  same_every_way(served);
  kcr_obj *o = same_both_ways(served, strlen(served), 0, NULL);
  const char *mf = strstr(served, ",\"managedFields\"");
  char want[sizeof(served)];
  size_t len;

  /* the text minus managedFields, byte for byte ("1.50e1" too: no tree) */
  snprintf(want, sizeof(want), "%.*s}%s", (int)(mf - served), served,
           strstr(mf, "]},\"spec\"") + 2);
  assert_string_equal(want, kcr_obj_json(o, &len));
  assert_int_equal(strlen(want), len);
  assert_string_equal("ns/a", kcr_obj_key(o));
  assert_string_equal("u1", kcr_obj_uid(o));
  assert_string_equal("7", kcr_obj_rv(o));
  assert_int_equal(2, kcr_obj_generation(o));
  assert_false(kcr_obj_deleting(o));
  assert_string_equal("e1", kcr_obj_controller(o)->uid);
  assert_string_equal("EBD", kcr_obj_controller(o)->kind);
  assert_string_equal("ebdman.example.com/v1alpha1", kcr_obj_controller(o)->api_version);
  kcr_obj_unref(o);

  o = same_both_ways(served, strlen(served), KCR_OBJ_KEEP_MANAGED_FIELDS, NULL);
  assert_string_equal(served, kcr_obj_json(o, NULL));
  kcr_obj_unref(o);
}

/* A watch event tells where its object's metadata and managedFields are:
 * the last members of those names (the tree's), none when there is none. */
static void an_event_tells_where_metadata_and_managed_fields_are(void **state)
{
  struct kcr_buf line = KCR_BUF_INIT, rv = KCR_BUF_INIT;
  struct kcr_watch_event ev;
  const char *md = strstr(served, "\"metadata\":") + 11,
             *mf = strstr(served, "\"managedFields\":") + 16;

  kcr_buf_printf(&line, "{\"type\":\"ADDED\",\"object\":%s}", served);
  assert_int_equal(KCR_OK, kcr__watch_decode_text(line.ptr, line.len, &rv, &ev));
  assert_memory_equal(md, ev.metadata_text, ev.metadata_len);
  assert_int_equal(strstr(md, "]},\"spec\"") + 2 - md, ev.metadata_len);
  assert_int_equal(strlen("[{\"manager\":\"ebdman\",\"operation\":\"Apply\"}]"),
                   ev.managed_fields_len);
  assert_memory_equal(mf, ev.managed_fields_text, ev.managed_fields_len);
  assert_ptr_equal(ev.object_text + (md - served), ev.metadata_text);

  kcr_buf_reset(&line); /* of two metadata the last counts (as in the tree) */
  kcr_buf_printf(&line,
                 "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"managedFields\":2},"
                 "\"spec\":{\"managedFields\":1},\"metadata\":{\"name\":\"a\"}}}");
  assert_int_equal(KCR_OK, kcr__watch_decode_text(line.ptr, line.len, &rv, &ev));
  assert_int_equal(12, ev.metadata_len);
  assert_memory_equal("{\"name\":\"a\"}", ev.metadata_text, 12);
  assert_null(ev.managed_fields_text);
  assert_int_equal(0, ev.managed_fields_len);
  kcr_buf_cleanup(&line);
  kcr_buf_cleanup(&rv);
}

static void a_projection_copies_the_kept_members_as_written(void **state)
{
  kcr_obj *o = same_both_ways(served, strlen(served), 0, proj());

  assert_string_equal(
      "{\"apiVersion\":\"ebdman.example.com/v1alpha1\",\"kind\":\"VFM\","
      "\"metadata\":{\"name\":\"a\",\"namespace\":\"ns\",\"uid\":\"u1\","
      "\"resourceVersion\":\"7\",\"generation\":2,"
      "\"ownerReferences\":[{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"name\":\"x\","
      "\"uid\":\"c0\"},{\"apiVersion\":\"ebdman.example.com/v1alpha1\","
      "\"kind\":\"EBD\",\"name\":\"a\",\"uid\":\"e1\",\"controller\":true,"
      "\"blockOwnerDeletion\":true}]},"
      "\"spec\":{\"replicas\":3},"
      "\"status\":{\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"}]}}",
      kcr_obj_json(o, NULL));
  kcr_obj_unref(o);
}

/* Text only a tree reads exactly: the same object either way. */
static void what_the_text_cannot_say_exactly_goes_through_the_tree(void **state)
{
  static const char *const texts[] = {
      /* white space: the stored text is compact all the same */
      " {\"metadata\": {\"name\":\"a\", \"managedFields\":[1]}, \"spec\":{ }}",
      "{\"metadata\":{\"name\":\"a\"}\n}",
      /* escapes in member names and header strings */
      "{\"metad\\u0061ta\":{\"name\":\"x\"},\"metadata\":{\"name\":\"y\"}}",
      "{\"metadata\":{\"n\\u0061me\":\"x\",\"name\":\"y\"}}",
      "{\"metadata\":{\"name\":\"a\\u0062\",\"namespace\":\"n\\/s\",\"uid\":\"\\\"\"}}",
      "{\"metadata\":{\"name\":\"a\",\"resourceVersion\":\"1\\u0032\"}}",
      "{\"metadata\":{\"name\":\"a\",\"managedField\\u0073\":[1]}}",
      "{\"spec\":{\"r\\u0065plicas\":1},\"metadata\":{\"name\":\"a\"}}",
      /* duplicates: the last counts */
      "{\"metadata\":{\"name\":\"a\",\"managedFields\":[1]},"
      "\"metadata\":{\"name\":\"b\",\"managedFields\":[2]}}",
      "{\"metadata\":{\"name\":\"a\",\"managedFields\":[1],\"managedFields\":[2]}}",
      "{\"managedFields\":1,\"metadata\":{\"name\":\"a\"},\"managedFields\":2}",
      "{\"metadata\":{\"name\":\"a\",\"name\":\"b\"}}",
      "{\"metadata\":5,\"metadata\":{\"name\":\"a\"}}",
      "{\"metadata\":{\"name\":\"a\"},\"spec\":5,\"spec\":{\"replicas\":1}}",
      /* generations */
      "{\"metadata\":{\"name\":\"a\",\"generation\":1.0}}",
      "{\"metadata\":{\"name\":\"a\",\"generation\":-3}}",
      "{\"metadata\":{\"name\":\"a\",\"generation\":0}}",
      "{\"metadata\":{\"name\":\"a\",\"generation\":\"7\"}}",
      "{\"metadata\":{\"name\":\"a\",\"generation\":null}}",
      "{\"metadata\":{\"name\":\"a\",\"generation\":1e2}}",
      "{\"metadata\":{\"name\":\"a\",\"generation\":9223372036854775807}}",
      "{\"metadata\":{\"name\":\"a\",\"generation\":99999999999999999999}}",
      "{\"metadata\":{\"name\":\"a\",\"generation\":123456789012345678}}",
      /* deletion */
      "{\"metadata\":{\"name\":\"a\",\"deletionTimestamp\":null}}",
      "{\"metadata\":{\"name\":\"a\",\"deletionTimestamp\":5}}",
      "{\"metadata\":{\"name\":\"a\",\"deletionTimestamp\":\"2024-01-01T00:00:00Z\"}}",
      "{\"metadata\":{\"name\":\"a\",\"deletionTimestamp\":\"2024\\u0000\"}}",
      /* strings holding \u0000: no header string, a name refused */
      "{\"metadata\":{\"name\":\"a\\u0000b\"}}",
      "{\"metadata\":{\"name\":\"a\",\"uid\":\"u\\u0000\"},\"data\":{\"k\":\"\\u0000\"}}",
      "{\"metadata\":{\"name\":\"a\"},\"data\":{\"k\\u0000\":\"v\"}}",
      /* ownerReferences */
      "{\"metadata\":{\"name\":\"a\",\"ownerReferences\":{\"o\":{\"controller\":true,"
      "\"uid\":\"u\"}}}}",
      "{\"metadata\":{\"name\":\"a\",\"ownerReferences\":[1,[true],null,"
      "{\"controller\":false,\"uid\":\"f\"},{\"controller\":true,\"uid\":\"t\"},"
      "{\"controller\":true,\"uid\":\"second\"}]}}",
      "{\"metadata\":{\"name\":\"a\",\"ownerReferences\":[{\"controller\":\"true\"}]}}",
      "{\"metadata\":{\"name\":\"a\",\"ownerReferences\":[{\"controller\":false,"
      "\"controller\":true,\"uid\":\"u\"}]}}",
      "{\"metadata\":{\"name\":\"a\",\"ownerReferences\":[{\"controller\":true,"
      "\"kind\":5,\"uid\":\"u\\u0031\"}]}}",
      "{\"metadata\":{\"name\":\"a\",\"ownerReferences\":[{\"contr\\u006fller\":true}]}}",
      "{\"metadata\":{\"name\":\"a\",\"ownerReferences\":[{\"controller\":true}]}}",
      "{\"metadata\":{\"name\":\"a\",\"ownerReferences\":\"x\"}}",
      /* not an object's name, or not an object */
      "{\"metadata\":{\"name\":\"\"}}",
      "{\"metadata\":{\"name\":5}}",
      "{\"metadata\":[{\"name\":\"a\"}]}",
      "[{\"metadata\":{\"name\":\"a\"}}]",
      "\"x\"",
      /* malformed, and text after the object */
      "{\"metadata\":{\"name\":\"a\"}",
      "{\"metadata\":{\"name\":\"a\",}}",
      "{\"metadata\":{\"name\":\"a\"}} trailing",
      "\xEF\xBB\xBF{\"metadata\":{\"name\":\"a\"}}",
      "",
  };
  for(size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
    print_message("%zu: %s\n", i, texts[i]);
    same_every_way(texts[i]);
  }
}

/* Nesting past what the text walk follows (128 levels) goes through the
 * tree; past cJSON's limit it is malformed either way. */
static void deep_nesting_goes_through_the_tree(void **state)
{
  for(int depth = 100; depth <= 1100; depth += 500) {
    size_t cap = (size_t)depth * 8 + 100, at = 0;
    char *t = malloc(cap);
    assert_non_null(t);
    at += (size_t)snprintf(t, cap, "{\"metadata\":{\"name\":\"a\"},\"spec\":");
    for(int i = 0; i < depth; i++)
      at += (size_t)snprintf(t + at, cap - at, "{\"x\":");
    at += (size_t)snprintf(t + at, cap - at, "1");
    for(int i = 0; i < depth; i++)
      t[at++] = '}';
    t[at++] = '}';
    t[at] = '\0';
    same_every_way(t);
    free(t);
  }
  /* deep inside managedFields, around the depth the walk gives up at: the
   * same from a watch event (its spans stepped over) as without them */
  for(int depth = 125; depth <= 130; depth++) {
    size_t cap = (size_t)depth * 2 + 200, at = 0;
    char *t = malloc(cap);
    assert_non_null(t);
    at += (size_t)snprintf(t, cap, "{\"metadata\":{\"name\":\"a\",\"managedFields\":");
    for(int i = 0; i < depth; i++)
      t[at++] = '[';
    for(int i = 0; i < depth; i++)
      t[at++] = ']';
    snprintf(t + at, cap - at, "},\"spec\":{\"x\":\"a\\/b\",\"y\":1.50}}");
    same_every_way(t);
    free(t);
  }
}

/* kcr_obj_spans finds in the stored text exactly the values kcr_json_at
 * finds in the object's tree (parsed, a span is that node), whether the
 * text came as served or through a tree, whole or projected; past 16 paths
 * nothing; and a text the walk cannot pass (nested too deep) finds nothing
 * at all, which metadata.name tells. */
static void spans_are_the_values_the_tree_reads(void **state)
{
  static const char *const paths[] = {"/metadata/name",
                                      "/spec/replicas",
                                      "/status/conditions",
                                      "/metadata/ownerReferences",
                                      "/spec/ratio",
                                      "/spec/big",
                                      "/spec/none",
                                      "/status/phase/x",
                                      "/spec",
                                      "/metadata/uid",
                                      "/status",
                                      "/metadata",
                                      "/kind",
                                      "/status/phase",
                                      "/metadata/generation",
                                      "/spec/replicas",
                                      "/metadata/name"};
  struct kcr_span sp[17];

  for(int way = 0; way < 4; way++) {
    cJSON *tree = NULL, *st = NULL;
    kcr_obj *o = NULL;
    if(way < 2) {
      assert_int_equal(KCR_OK,
                       kcr__obj_from_text(served, strlen(served), 0, way ? proj() : NULL,
                                          NULL, 0, &o, NULL));
    } else {
      assert_int_equal(KCR_OK, kcr_json_parse(served, strlen(served), &tree, NULL));
      assert_int_equal(KCR_OK,
                       kcr__obj_from_json(tree, 0, way == 3 ? proj() : NULL, &o, NULL));
      cJSON_Delete(tree);
    }
    assert_int_equal(KCR_OK, kcr_obj_parse(o, &st));
    kcr_obj_spans(o, paths, sp, 17);
    for(size_t i = 0; i < 16; i++) {
      const cJSON *node = kcr_json_at(st, paths[i]);
      cJSON *back = NULL;
      if(!node) {
        if(sp[i].at)
          fail_msg("way %d: %s found, the tree has none", way, paths[i]);
        continue;
      }
      if(!sp[i].at)
        fail_msg("way %d: %s not found, the tree has it", way, paths[i]);
      assert_int_equal(KCR_OK, kcr_json_parse(sp[i].at, sp[i].n, &back, NULL));
      if(!cJSON_Compare(back, node, 1))
        fail_msg("way %d: %s is %.*s", way, paths[i], (int)sp[i].n, sp[i].at);
      cJSON_Delete(back);
    }
    assert_null(sp[16].at); /* the 17th */
    assert_int_equal(0, sp[16].n);
    cJSON_Delete(st);
    kcr_obj_unref(o);
  }
  /* Deeper than the walk follows: nothing, not even the name. */
  {
    size_t cap = 200 * 8 + 100, at = 0;
    char *t = malloc(cap);
    kcr_obj *o = NULL;
    assert_non_null(t);
    at += (size_t)snprintf(t, cap, "{\"metadata\":{\"name\":\"a\"},\"spec\":");
    for(int i = 0; i < 200; i++)
      at += (size_t)snprintf(t + at, cap - at, "{\"x\":");
    t[at++] = '1';
    for(int i = 0; i < 200; i++)
      t[at++] = '}';
    t[at++] = '}';
    t[at] = '\0';
    assert_int_equal(KCR_OK, kcr__obj_from_text(t, at, 0, NULL, NULL, 0, &o, NULL));
    /* (the walk has to pass the deep spec: a later metadata would replace
     * the first, as the last member of a name counts) */
    assert_int_equal(
        0, kcr_obj_spans(o, (const char *[]){"/metadata/name", "/status"}, sp, 2));
    assert_null(sp[0].at);
    assert_int_equal(0, kcr_obj_spans(o, paths, sp, 1));
    kcr_obj_unref(o);
    free(t);
  }
  (void)state;
}

struct oom {
  const char *text;
  const struct kcr__proj *p;
};

static bool whole_or_enomem(void *ud)
{
  struct oom *t = ud;
  kcr_obj *o = NULL;
  kcr_err rc = kcr__obj_from_text(t->text, strlen(t->text), 0, t->p, NULL, 0, &o, NULL);
  bool ok;

  if(rc)
    return rc == KCR_ENOMEM && !o;
  ok = !strcmp(kcr_obj_name(o), "a") && !strcmp(kcr_obj_uid(o), "u1");
  kcr_obj_unref(o);
  return ok;
}

/* Out of memory anywhere: KCR_ENOMEM and nothing, or the whole object;
 * on the text's way and on the tree's (white space). */
static void out_of_memory_fails_cleanly(void **state)
{
  static const char spaced[] = "{ \"metadata\":{\"name\":\"a\",\"uid\":\"u1\"}}";
  struct oom t[] = {{served, NULL}, {served, proj()}, {spaced, NULL}, {spaced, proj()}};

  for(size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
    tfail_torture("kcr__obj_from_text", whole_or_enomem, &t[i]);
}

/* kcr__obj_from_text of a C string. */
static kcr_obj *obj_of(const char *text)
{
  kcr_obj *o = NULL;
  assert_int_equal(KCR_OK,
                   kcr__obj_from_text(text, strlen(text), 0, NULL, NULL, 0, &o, NULL));
  return o;
}

#define EBD_HEAD "{\"apiVersion\":\"ebdman.example.com/v1alpha1\",\"kind\":\"EBD\","
#define EBD_META(rv, more)                                                               \
  "\"metadata\":{\"name\":\"a\",\"namespace\":\"ns\",\"uid\":\"u1\","                    \
  "\"resourceVersion\":\"" rv "\",\"generation\":1" more "},"
#define EBD_SPEC "\"spec\":{\"image\":\"i:1\",\"replicas\":1}"

/* kcr__obj_same_but_status (kcr_pred_not_own_status's test of an echo):
 * texts that differ only in status - present or absent, first, middle or
 * last member - and resourceVersion are the same; any other difference
 * (spec, generation, labels, deletionTimestamp, a status member of spec),
 * or a text without resourceVersion, is not. */
static void same_but_status_ignores_only_status_and_version(void **state)
{
  static const char *const same[][2] = {
      {EBD_HEAD EBD_META("7", "") EBD_SPEC "}",
       EBD_HEAD EBD_META("8", "") EBD_SPEC ",\"status\":{\"observedGeneration\":1}}"},
      {EBD_HEAD EBD_META("9", "") EBD_SPEC ",\"status\":{\"conditions\":[]}}",
       EBD_HEAD EBD_META("10", "") EBD_SPEC ",\"status\":{\"observedGeneration\":1,"
                                            "\"conditions\":[{\"type\":\"Ready\"}]}}"},
      {"{\"status\":{\"a\":1}," EBD_META("7", "") EBD_SPEC "}",
       "{" EBD_META("70", "") EBD_SPEC "}"},
      {EBD_HEAD "\"status\":{}," EBD_META("7", "") EBD_SPEC "}",
       EBD_HEAD EBD_META("7", "") EBD_SPEC "}"},
      {EBD_HEAD EBD_META("7", "") EBD_SPEC "}", EBD_HEAD EBD_META("7", "") EBD_SPEC "}"},
  };
  static const char *const differ[][2] = {
      {EBD_HEAD EBD_META("7", "") EBD_SPEC "}",
       EBD_HEAD EBD_META("8", "") "\"spec\":{\"image\":\"i:2\",\"replicas\":1},"
                                  "\"status\":{}}"},
      {EBD_HEAD EBD_META("7", "") EBD_SPEC ",\"status\":{}}", EBD_HEAD
       "\"metadata\":{\"name\":\"a\",\"namespace\":\"ns\",\"uid\":\"u1\","
       "\"resourceVersion\":\"8\",\"generation\":2}," EBD_SPEC ",\"status\":{}}"},
      {EBD_HEAD EBD_META("7", "") EBD_SPEC ",\"status\":{}}",
       EBD_HEAD EBD_META("8", ",\"labels\":{\"a\":\"b\"}") EBD_SPEC ",\"status\":{}}"},
      {EBD_HEAD EBD_META("7", "") EBD_SPEC ",\"status\":{}}",
       EBD_HEAD EBD_META("8", ",\"deletionTimestamp\":\"2026-12-03T00:00:00Z\"") EBD_SPEC
       ",\"status\":{}}"},
      {EBD_HEAD EBD_META("7", "") "\"spec\":{\"status\":1}}",
       EBD_HEAD EBD_META("8", "") "\"spec\":{}}"},
      {EBD_HEAD "\"metadata\":{\"name\":\"a\",\"uid\":\"u1\"}," EBD_SPEC "}",
       EBD_HEAD "\"metadata\":{\"name\":\"a\",\"uid\":\"u1\"}," EBD_SPEC "}"},
  };

  for(size_t i = 0; i < sizeof(same) / sizeof(same[0]); i++) {
    kcr_obj *a = obj_of(same[i][0]), *b = obj_of(same[i][1]);
    if(!kcr__obj_same_but_status(a, b) || !kcr__obj_same_but_status(b, a))
      fail_msg("same[%zu] not the same:\n  %s\n  %s", i, same[i][0], same[i][1]);
    kcr_obj_unref(a);
    kcr_obj_unref(b);
  }
  for(size_t i = 0; i < sizeof(differ) / sizeof(differ[0]); i++) {
    kcr_obj *a = obj_of(differ[i][0]), *b = obj_of(differ[i][1]);
    if(kcr__obj_same_but_status(a, b) || kcr__obj_same_but_status(b, a))
      fail_msg("differ[%zu] the same:\n  %s\n  %s", i, differ[i][0], differ[i][1]);
    kcr_obj_unref(a);
    kcr_obj_unref(b);
  }
}

/* Bad arguments are EINVAL naming the function that was called and what
 * was wrong with them (not the tree way's name for them). */
static void bad_arguments_are_named(void **state)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  kcr_obj *o = (kcr_obj *)&ei;

  assert_int_equal(KCR_EINVAL, kcr__obj_from_text(NULL, 0, 0, NULL, NULL, 0, &o, &ei));
  assert_null(o);
  assert_string_equal("kcr__obj_from_text: no text", ei.message);
  assert_int_equal(KCR_EINVAL, kcr__obj_from_text(served, strlen(served), 0x100, NULL,
                                                  NULL, 0, &o, &ei));
  assert_string_equal("kcr__obj_from_text: unknown flags 0x100", ei.message);
  assert_int_equal(KCR_EINVAL, kcr__obj_from_json(NULL, 0, NULL, &o, &ei));
  assert_string_equal("kcr_obj_from_json: no tree", ei.message);
  kcr_errinfo_cleanup(&ei);
}

int main(void)
{
  tfail_init();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(a_served_object_is_kept_as_written),
      cmocka_unit_test(an_event_tells_where_metadata_and_managed_fields_are),
      cmocka_unit_test(a_projection_copies_the_kept_members_as_written),
      cmocka_unit_test(what_the_text_cannot_say_exactly_goes_through_the_tree),
      cmocka_unit_test(deep_nesting_goes_through_the_tree),
      cmocka_unit_test(spans_are_the_values_the_tree_reads),
      cmocka_unit_test(out_of_memory_fails_cleanly),
      cmocka_unit_test(bad_arguments_are_named),
      cmocka_unit_test(same_but_status_ignores_only_status_and_version),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
