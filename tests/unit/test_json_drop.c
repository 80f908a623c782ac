/* kcr__json_drop_members: a watch document's object.metadata.managedFields,
 * and every item's metadata.managedFields of a List page, left out of the
 * text before parsing. Parsing what it writes gives the tree
 * parsing the original gives minus those members, and fails where parsing
 * the original fails, unless all that was wrong lay inside a dropped
 * member; whatever it cannot follow, it leaves alone. */
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

#define PATH "/object/metadata"
#define LIST "/items/*/metadata"
#define MF   "managedFields"

static void assert_dropped_at(const char *path, const char *in, const char *want)
{
  struct kcr_buf out = KCR_BUF_INIT;

  assert_int_equal(KCR_OK, kcr__json_drop_members(in, strlen(in), path, MF, &out));
  assert_string_equal(want, kcr_buf_str(&out));
  kcr_buf_cleanup(&out);
}

static void assert_left_alone_at(const char *path, const char *in)
{
  struct kcr_buf out = KCR_BUF_INIT;

  assert_int_equal(KCR_ENOTFOUND, kcr__json_drop_members(in, strlen(in), path, MF, &out));
  assert_int_equal(0, out.len);
  kcr_buf_cleanup(&out);
}

static void assert_dropped(const char *in, const char *want)
{
  assert_dropped_at(PATH, in, want);
}

static void assert_left_alone(const char *in) { assert_left_alone_at(PATH, in); }

static void the_member_goes_wherever_it_stands(void **state)
{
  /* first, middle, last, only */
  assert_dropped(
      "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"managedFields\":[{\"a\":1}],"
      "\"name\":\"n\"},\"data\":{}}}",
      "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"n\"},\"data\":{}}}");
  assert_dropped("{\"object\":{\"metadata\":{\"a\":1,\"managedFields\":[],\"b\":2}}}",
                 "{\"object\":{\"metadata\":{\"a\":1,\"b\":2}}}");
  assert_dropped("{\"object\":{\"metadata\":{\"a\":1,\"managedFields\":{}}}}",
                 "{\"object\":{\"metadata\":{\"a\":1}}}");
  assert_dropped("{\"object\":{\"metadata\":{\"managedFields\":null}}}",
                 "{\"object\":{\"metadata\":{}}}");
  /* every one of duplicates; white space between members goes too */
  assert_dropped("{ \"object\" : { \"metadata\" : { \"managedFields\" : [ 1 ] ,\n"
                 " \"a\" : \"x\" , \"managedFields\" : 2 } } , \"z\" : 0 }",
                 "{ \"object\" : { \"metadata\" : {\"a\" : \"x\"} } , \"z\" : 0 }");
  /* what strings hold is not structure */
  assert_dropped("{\"object\":{\"metadata\":{\"managedFields\":[\"}],\\\"{\"],"
                 "\"note\":\"\\\"managedFields\\\":1\"}}}",
                 "{\"object\":{\"metadata\":{\"note\":\"\\\"managedFields\\\":1\"}}}");
  /* only object.metadata's: the others stay */
  assert_dropped("{\"managedFields\":1,\"object\":{\"managedFields\":2,\"metadata\":{"
                 "\"x\":{\"managedFields\":3},\"managedFields\":4}}}",
                 "{\"managedFields\":1,\"object\":{\"managedFields\":2,\"metadata\":{"
                 "\"x\":{\"managedFields\":3}}}}");
  /* the first "object" is followed, a later one kept as written (the tree
   * keeps the last one, whole: nothing wrong); text after the value is
   * copied unread (cJSON ignores it) */
  assert_dropped("{\"object\":{\"metadata\":{\"managedFields\":1}},\"object\":{}} tail",
                 "{\"object\":{\"metadata\":{}},\"object\":{}} tail");
}

static void what_it_cannot_follow_is_left_alone(void **state)
{
  assert_left_alone("");
  assert_left_alone("[]");
  assert_left_alone("{\"object\":[]}");
  assert_left_alone("{\"object\":{\"metadata\":\"x\"}}");
  assert_left_alone("{\"object\":{\"metadata\":{\"name\":\"n\"}}}"); /* nothing to drop */
  assert_left_alone("{\"object\":{\"metadata\":{}}}");
  assert_left_alone("{\"object\":{}}");
  /* a key spelled with an escape is not compared */
  assert_left_alone("{\"object\":{\"metadata\":{\"managed\\u0046ields\":1}}}");
  /* malformed on the way, in the member or after it within metadata */
  assert_left_alone("{\"object\":{\"metadata\":{\"managedFields\":[1,}}}}");
  assert_left_alone("{\"object\":{\"metadata\":{\"managedFields\":\"abc}}}");
  assert_left_alone("{\"object\":{\"metadata\":{\"managedFields\":1\"},\"a\":\"\"}}}");
  assert_left_alone("{\"object\":{\"metadata\":{\"managedFields\":{]}}}");
  assert_left_alone("{\"object\":{\"metadata\":{\"managedFields\":1,\"a\":}}}");
  assert_left_alone("{\"object\":{\"metadata\":{\"managedFields\":1,}}}");
  assert_left_alone("{\"object\":{\"metadata\":{\"managedFields\":1");
  assert_left_alone("\xEF\xBB\xBF{\"object\":{\"metadata\":{\"managedFields\":1}}}");
}

/* A List page: every item's metadata loses the member, whatever the other
 * members of the item or the list hold. */
static void every_item_of_a_list_loses_it(void **state)
{
  assert_dropped_at(
      LIST,
      "{\"kind\":\"ConfigMapList\",\"apiVersion\":\"v1\",\"metadata\":{"
      "\"resourceVersion\":\"7\",\"managedFields\":0},\"items\":["
      "{\"metadata\":{\"name\":\"a\",\"managedFields\":[{\"manager\":\"m\","
      "\"fieldsV1\":{\"f:data\":{\"f:managedFields\":{}}}}]},"
      "\"data\":{\"managedFields\":\"\\\"managedFields\\\":[\"}},"
      "{\"data\":{\"x\":\"]}\"},\"metadata\":{\"managedFields\":[],\"name\":\"b\"}},"
      "{\"metadata\":{\"name\":\"c\\\"managedFields\\\"\"}},"
      "{\"metadata\":{\"name\":\"d\",\"managedFields\":{\"managedFields\":1}}}"
      "]}",
      "{\"kind\":\"ConfigMapList\",\"apiVersion\":\"v1\",\"metadata\":{"
      "\"resourceVersion\":\"7\",\"managedFields\":0},\"items\":["
      "{\"metadata\":{\"name\":\"a\"},"
      "\"data\":{\"managedFields\":\"\\\"managedFields\\\":[\"}},"
      "{\"data\":{\"x\":\"]}\"},\"metadata\":{\"name\":\"b\"}},"
      "{\"metadata\":{\"name\":\"c\\\"managedFields\\\"\"}},"
      "{\"metadata\":{\"name\":\"d\"}}"
      "]}");
  /* items that are not objects, or have no metadata, stay as they are;
   * white space between elements too; the text after items is unread */
  assert_dropped_at(LIST,
                    "{\"items\": [ null , {} , \"s\" , [1] , {\"metadata\":7} ,\n"
                    "{\"metadata\":{\"managedFields\":1}} ] ,\"rest\":tail",
                    "{\"items\": [ null , {} , \"s\" , [1] , {\"metadata\":7} ,\n"
                    "{\"metadata\":{}} ] ,\"rest\":tail");
  /* only the first "items" (the tree keeps the second, as written) */
  assert_dropped_at(LIST,
                    "{\"items\":[{\"metadata\":{\"managedFields\":1}}],"
                    "\"items\":[{\"metadata\":{\"managedFields\":2}}]}",
                    "{\"items\":[{\"metadata\":{}}],"
                    "\"items\":[{\"metadata\":{\"managedFields\":2}}]}");
  /* nothing to drop, or the structure broken anywhere up to the end of
   * items (a later item too): left alone */
  assert_left_alone_at(LIST, "{\"kind\":\"List\",\"items\":[]}");
  assert_left_alone_at(LIST, "{\"items\":null}");
  assert_left_alone_at(LIST, "{\"items\":[{\"metadata\":{\"name\":\"a\"}}]}");
  assert_left_alone_at(LIST, "{\"metadata\":{\"managedFields\":1},\"items\":[]}");
  assert_left_alone_at(LIST, "{\"items\":[{\"metadata\":{\"managedFields\":1}},"
                             "{\"metadata\":{\"name\":\"b}}]}");
  assert_left_alone_at(LIST, "{\"items\":[{\"metadata\":{\"managedFields\":1}},"
                             "{\"data\":{]}}]}");
  assert_left_alone_at(LIST, "{\"items\":[{\"metadata\":{\"managedFields\":1}}");
  assert_left_alone_at(LIST, "{\"items\":[{\"metadata\":{\"managedFields\":1}} {}]}");
  assert_left_alone_at(LIST, "{\"items\":[{\"metadata\":{\"managedFields\":1}},]}");
}

/* Pages one after the other through one buffer (as kcr_list_each reads
 * them): each result is that page's alone. */
static void pages_in_turn_through_one_buffer(void **state)
{
  static const char *const pages[][2] = {
      {"{\"metadata\":{\"continue\":\"t1\"},\"items\":[{\"metadata\":{\"name\":\"a\","
       "\"managedFields\":[{\"manager\":\"x\"}]}}]}",
       "{\"metadata\":{\"continue\":\"t1\"},\"items\":[{\"metadata\":{\"name\":\"a\"}}]"
       "}"},
      {"{\"metadata\":{},\"items\":[{\"metadata\":{\"name\":\"b\"}}]}", NULL},
      {"{\"items\":[{\"metadata\":{\"managedFields\":[],\"name\":\"c\"}}]}",
       "{\"items\":[{\"metadata\":{\"name\":\"c\"}}]}"},
  };
  struct kcr_buf out = KCR_BUF_INIT;

  for(size_t i = 0; i < sizeof(pages) / sizeof(pages[0]); i++) {
    const char *in = pages[i][0], *want = pages[i][1];
    cJSON *tree = NULL;
    char *text;
    assert_int_equal(want ? KCR_OK : KCR_ENOTFOUND,
                     kcr__json_drop_members(in, strlen(in), LIST, MF, &out));
    assert_string_equal(want ? want : "", kcr_buf_str(&out));
    /* and parsing through the same buffer gives the tree without them */
    assert_int_equal(
        KCR_OK, kcr__json_parse_dropping(in, strlen(in), LIST, MF, &out, &tree, NULL));
    text = kcr_json_to_text(tree);
    assert_non_null(text);
    assert_string_equal(want ? want : in, text);
    free(text);
    cJSON_Delete(tree);
  }
  kcr_buf_cleanup(&out);
}

/* Without a buffer, or with nothing to drop, it is kcr_json_parse. */
static void parse_dropping_parses_what_it_cannot_drop(void **state)
{
  static const char in[] = "{\"items\":[{\"metadata\":{\"managedFields\":1}}]}";
  struct kcr_buf scratch = KCR_BUF_INIT;
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  cJSON *tree = NULL;

  assert_int_equal(KCR_OK,
                   kcr__json_parse_dropping(in, strlen(in), LIST, MF, NULL, &tree, NULL));
  assert_non_null(kcr_json_at(cJSON_GetArrayItem(kcr_json_at(tree, "/items"), 0),
                              "/metadata/managedFields"));
  cJSON_Delete(tree);
  assert_int_equal(KCR_EPARSE, kcr__json_parse_dropping("{\"items\":[", 10, LIST, MF,
                                                        &scratch, &tree, &ei));
  assert_null(tree);
  assert_non_null(strstr(ei.message, "malformed JSON"));
  kcr_errinfo_cleanup(&ei);
  kcr_buf_cleanup(&scratch);
}

/* Tokens outside the dropped members are not checked here, but they are
 * kept, so the result is as malformed as the text. */
static void kept_garbage_stays_garbage(void **state)
{
  static const char *const bad[] = {
      "{\"type\":tru,\"object\":{\"metadata\":{\"managedFields\":1}}}",
      "{\"object\":{\"metadata\":{\"a\":nul,\"managedFields\":1}}}",
      "{\"object\":{\"metadata\":{\"managedFields\":1,\"a\":\"\\q\"}}}",
      "{\"object\":{\"metadata\":{\"managedFields\":1}},\"x\":}",
  };
  for(size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    struct kcr_buf out = KCR_BUF_INIT;
    cJSON *tree = NULL;
    assert_int_equal(KCR_OK,
                     kcr__json_drop_members(bad[i], strlen(bad[i]), PATH, MF, &out));
    assert_int_equal(KCR_EPARSE, kcr_json_parse(out.ptr, out.len, &tree, NULL));
    kcr_buf_cleanup(&out);
  }
}

/* Nesting cJSON refuses inside the member is not dropped into acceptance. */
static void nesting_beyond_cjsons_limit_is_left_alone(void **state)
{
  struct kcr_buf in = KCR_BUF_INIT, out = KCR_BUF_INIT;
  cJSON *tree = NULL;

  kcr_buf_puts(&in, "{\"object\":{\"metadata\":{\"managedFields\":");
  for(int i = 0; i < CJSON_NESTING_LIMIT; i++)
    kcr_buf_puts(&in, "[");
  for(int i = 0; i < CJSON_NESTING_LIMIT; i++)
    kcr_buf_puts(&in, "]");
  kcr_buf_puts(&in, "}}}");
  assert_int_equal(KCR_OK, kcr_buf_err(&in));
  assert_int_equal(KCR_EPARSE, kcr_json_parse(in.ptr, in.len, &tree, NULL));
  assert_int_equal(KCR_ENOTFOUND, kcr__json_drop_members(in.ptr, in.len, PATH, MF, &out));
  kcr_buf_cleanup(&in);
  kcr_buf_cleanup(&out);
}

/* ---- differential: random documents and their mutations ---- */

static unsigned rnd(unsigned *s)
{
  *s = *s * 1103515245u + 12345u;
  return *s >> 16 & 0x7fff;
}

static void ws(struct kcr_buf *b, unsigned *s)
{
  static const char *const w[] = {"", "", "", " ", "\n", "\t ", "\r\n"};
  kcr_buf_puts(b, w[rnd(s) % 7]);
}

static void str(struct kcr_buf *b, unsigned *s)
{
  static const char *const parts[] = {
      "a",       "managedFields",  "}", "{", "]", "[", ",", ":", "\\\"", "\\\\", "\\n",
      "\\u00e9", "\\ud83d\\ude00", " "};
  int n = (int)(rnd(s) % 5);
  kcr_buf_puts(b, "\"");
  for(int i = 0; i < n; i++)
    kcr_buf_puts(b, parts[rnd(s) % 14]);
  kcr_buf_puts(b, "\"");
}

static void value(struct kcr_buf *b, unsigned *s, int depth)
{
  static const char *const scalars[] = {
      "0", "-1.5e3", "12345678901234567", "true", "false", "null", "1E+2"};
  unsigned k = rnd(s) % (depth > 3 ? 3 : 5);
  ws(b, s);
  if(k == 0) {
    kcr_buf_puts(b, scalars[rnd(s) % 7]);
  } else if(k == 1 || k == 2) {
    str(b, s);
  } else {
    bool obj = k == 3;
    int n = (int)(rnd(s) % 4);
    kcr_buf_puts(b, obj ? "{" : "[");
    for(int i = 0; i < n; i++) {
      if(i)
        kcr_buf_puts(b, ",");
      if(obj) {
        ws(b, s);
        str(b, s);
        ws(b, s);
        kcr_buf_puts(b, ":");
      }
      value(b, s, depth + 1);
    }
    ws(b, s);
    kcr_buf_puts(b, obj ? "}" : "]");
  }
  ws(b, s);
}

/* {"kind":"X","metadata":{.. managedFields 0-2 times ..},"data":..} */
static void object(struct kcr_buf *b, unsigned *s)
{
  int n = (int)(rnd(s) % 6);
  kcr_buf_puts(b, "{\"kind\":\"X\",\"metadata\":{");
  for(int i = 0; i < n; i++) {
    if(i)
      kcr_buf_puts(b, ",");
    ws(b, s);
    if(rnd(s) % 3 == 0)
      kcr_buf_puts(b, "\"" MF "\"");
    else
      str(b, s);
    ws(b, s);
    kcr_buf_puts(b, ":");
    value(b, s, 0);
  }
  kcr_buf_puts(b, "}");
  if(rnd(s) % 2) {
    kcr_buf_puts(b, ",\"data\":");
    value(b, s, 0);
  }
  kcr_buf_puts(b, "}");
}

/* {"type":"ADDED","object":<object>} */
static void document(struct kcr_buf *b, unsigned *s)
{
  kcr_buf_puts(b, "{\"type\":\"ADDED\",");
  ws(b, s);
  kcr_buf_puts(b, "\"object\":");
  object(b, s);
  kcr_buf_puts(b, "}");
}

/* {"kind":"XList","metadata":..,"items":[<object> or another value, 0-4]} */
static void list_page(struct kcr_buf *b, unsigned *s)
{
  int n = (int)(rnd(s) % 5);
  kcr_buf_puts(b, "{\"kind\":\"XList\",\"metadata\":");
  value(b, s, 2);
  kcr_buf_puts(b, ",\"items\":[");
  for(int i = 0; i < n; i++) {
    if(i)
      kcr_buf_puts(b, ",");
    ws(b, s);
    if(rnd(s) % 8 == 0)
      value(b, s, 2);
    else
      object(b, s);
    ws(b, s);
  }
  kcr_buf_puts(b, "]}");
}

static int strip_meta(cJSON *meta)
{
  int n = 0;
  if(cJSON_IsObject(meta))
    for(; cJSON_GetObjectItemCaseSensitive(meta, MF); n++)
      cJSON_DeleteItemFromObjectCaseSensitive(meta, MF);
  return n;
}

/* The tree minus every member named MF of object.metadata, or of each
 * item's metadata; returns how many it deleted. */
static int strip(cJSON *doc, const char *path)
{
  cJSON *it;
  int n = 0;

  if(strcmp(path, LIST))
    return cJSON_IsObject(kcr_json_at(doc, "/object"))
               ? strip_meta(kcr_json_at(doc, PATH))
               : 0;
  cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(doc, "items"))
  {
    if(cJSON_IsObject(it))
      n += strip_meta(cJSON_GetObjectItemCaseSensitive(it, "metadata"));
  }
  return n;
}

static void check(const char *path, const char *text, size_t len, bool must_drop,
                  bool must_be_same)
{
  struct kcr_buf out = KCR_BUF_INIT;
  cJSON *a = NULL, *b = NULL;
  kcr_err rc = kcr__json_drop_members(text, len, path, MF, &out);
  kcr_err ra, rb;

  assert_true(rc == KCR_OK || rc == KCR_ENOTFOUND);
  if(rc == KCR_ENOTFOUND) {
    assert_false(must_drop);
    assert_int_equal(0, out.len);
    kcr_buf_cleanup(&out);
    return;
  }
  ra = kcr_json_parse(text, len, &a, NULL);
  rb = kcr_json_parse(out.ptr, out.len, &b, NULL);
  /* A malformed text may become well formed only when what was wrong was
   * inside a dropped member: never for the generated (well-formed) ones,
   * and the other way round never. */
  if(ra != rb && !(!must_be_same && ra == KCR_EPARSE && rb == KCR_OK))
    fail_msg("parse %s, dropped parse %s:\n%.*s\n%s", kcr_err_name(ra), kcr_err_name(rb),
             (int)len, text, out.ptr);
  if(!ra && !rb) {
    /* compared as printed: cJSON_Compare mismatches duplicate keys */
    char *ta, *tb;
    strip(a, path);
    /* Both stripped by name as cJSON reads names: a name spelled with an
     * escape is not dropped from the text. */
    if(must_be_same)
      assert_int_equal(0, strip(b, path));
    else
      strip(b, path);
    ta = kcr_json_to_text(a);
    tb = kcr_json_to_text(b);
    assert_non_null(ta);
    assert_non_null(tb);
    if(strcmp(ta, tb))
      fail_msg("trees differ:\n%.*s\n%s", (int)len, text, out.ptr);
    free(ta);
    free(tb);
  }
  cJSON_Delete(a);
  cJSON_Delete(b);
  kcr_buf_cleanup(&out);
}

/* Random documents of one shape, each checked, then mutated: a byte
 * changed, a byte removed, cut short. */
static void differential(const char *path, void (*gen)(struct kcr_buf *, unsigned *),
                         unsigned seed)
{
  unsigned s = seed;
  size_t dropped = 0;

  for(int i = 0; i < 20000; i++) {
    struct kcr_buf b = KCR_BUF_INIT;
    cJSON *tree = NULL;
    bool has;
    gen(&b, &s);
    assert_int_equal(KCR_OK, kcr_buf_err(&b));
    assert_int_equal(KCR_OK, kcr_json_parse(b.ptr, b.len, &tree, NULL));
    has = strip(tree, path) > 0;
    cJSON_Delete(tree);
    check(path, b.ptr, b.len, has, true); /* well formed: dropped whenever present */
    dropped += has;
    for(int m = 0; m < 8; m++) {
      size_t at = rnd(&s) % b.len;
      static const char bytes[] = "{}[],:\"\\ a0-e.tn";
      char *t = malloc(b.len + 1);
      assert_non_null(t);
      memcpy(t, b.ptr, b.len + 1);
      switch(m % 3) {
      case 0:
        t[at] = bytes[rnd(&s) % (sizeof(bytes) - 1)];
        check(path, t, b.len, false, false);
        break;
      case 1:
        memmove(t + at, t + at + 1, b.len - at);
        check(path, t, b.len - 1, false, false);
        break;
      default: check(path, t, at, false, false); break;
      }
      free(t);
    }
    kcr_buf_cleanup(&b);
  }
  assert_true(dropped > 5000); /* the generator does exercise dropping */
}

static void parsing_the_result_is_parsing_the_text_then_deleting(void **state)
{
  differential(PATH, document, 20261201);
}

static void parsing_a_list_page_is_parsing_it_then_deleting(void **state)
{
  differential(LIST, list_page, 20261202);
}

/* kcr__json_find: the value at a path, by the structure only, reading each
 * object on the path to its end; the last member of a name counts (as in the
 * tree kcr_json_parse makes); escaped quotes and brackets in strings are
 * skipped as strings. */
static void assert_found(const char *text, const char *path, const char *want)
{
  const char *at = NULL;
  size_t n = 0;

  assert_int_equal(KCR_OK, kcr__json_find(text, strlen(text), path, &at, &n));
  assert_int_equal(strlen(want), n);
  assert_memory_equal(want, at, n);
}

static void find_follows_the_path_and_stops_at_the_value(void **state)
{
  const char *at = (const char *)1;
  size_t n = 1;
  const char *obj =
      "{\"kind\":\"X\",\"x\":{\"resourceVersion\":\"no\"},\"metadata\":{\"name\":"
      "\"a\\\"}{[\",\"labels\":{\"k\":\"}\"},\"resourceVersion\":\"42\",\"managedFields\""
      ":[{\"f\":{}}],\"resourceVersion\":\"7\"}}";

  assert_found(obj, "/metadata/resourceVersion", "\"7\"");
  assert_found(obj, "/metadata/labels", "{\"k\":\"}\"}");
  assert_found(obj, "/metadata/managedFields", "[{\"f\":{}}]");
  assert_found(obj, "/kind", "\"X\"");
  assert_found(" { \"a\" : { \"b\" : 12 } } ", "/a/b", "12");
  assert_found("{\"a\":{\"b\":true}}", "/a/b", "true");
  /* absent, or a path through something that is not an object */
  assert_int_equal(KCR_ENOTFOUND,
                   kcr__json_find(obj, strlen(obj), "/metadata/uid", &at, &n));
  assert_null(at);
  assert_int_equal(0, n);
  assert_int_equal(KCR_ENOTFOUND, kcr__json_find(obj, strlen(obj), "/kind/x", &at, &n));
  assert_int_equal(KCR_ENOTFOUND, kcr__json_find("[1]", 3, "/a", &at, &n));
  assert_int_equal(KCR_ENOTFOUND, kcr__json_find(obj, strlen(obj), "", &at, &n));
  assert_int_equal(KCR_ENOTFOUND, kcr__json_find(NULL, 0, "/a", &at, &n));
  /* cut off before the value ends, or the structure broken on the way */
  assert_int_equal(KCR_EPARSE,
                   kcr__json_find(obj, 40, "/metadata/resourceVersion", &at, &n));
  assert_int_equal(KCR_EPARSE, kcr__json_find("{\"a\":[}", 8, "/b", &at, &n));
  assert_int_equal(KCR_EPARSE, kcr__json_find("{\"a\":{\"b\":\"xy", 14, "/a/b", &at, &n));
  assert_int_equal(KCR_EPARSE, kcr__json_find("", 0, "/a", &at, &n));
  assert_null(at);
  /* what follows the value in its object is read (a later member of its
   * name would replace it), what follows the object is not */
  assert_int_equal(KCR_EPARSE, kcr__json_find("{\"a\":1,\"b\":[}", 13, "/a", &at, &n));
  assert_found("{\"a\":1,\"a\":{\"b\":2}} [", "/a", "{\"b\":2}");
  assert_found("{\"a\":{\"b\":2},\"c\":0} [", "/a/b", "2");
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(the_member_goes_wherever_it_stands),
      cmocka_unit_test(find_follows_the_path_and_stops_at_the_value),
      cmocka_unit_test(what_it_cannot_follow_is_left_alone),
      cmocka_unit_test(every_item_of_a_list_loses_it),
      cmocka_unit_test(pages_in_turn_through_one_buffer),
      cmocka_unit_test(parse_dropping_parses_what_it_cannot_drop),
      cmocka_unit_test(kept_garbage_stays_garbage),
      cmocka_unit_test(nesting_beyond_cjsons_limit_is_left_alone),
      cmocka_unit_test(parsing_the_result_is_parsing_the_text_then_deleting),
      cmocka_unit_test(parsing_a_list_page_is_parsing_it_then_deleting),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
