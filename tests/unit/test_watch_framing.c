/* Watch framing: documents survive any chunking (byte by byte, random chunk
 * sizes), decoding covers every event type, bad documents are refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "kcr/json.h"
#include "kube/watch-int.h"

static const char stream[] =
    "{\"type\":\"ADDED\",\"object\":{\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"a\","
    "\"resourceVersion\":\"10\"},\"data\":{\"k\":\"line1\\nline2 {\\\"x\\\"}\"}}}\n"
    "{\"type\":\"MODIFIED\",\"object\":{\"metadata\":{\"name\":\"a\",\"resourceVersion\":"
    "\"11\"}}}\n"
    "\n"
    "{\"type\":\"BOOKMARK\",\"object\":{\"metadata\":{\"resourceVersion\":\"15\"}}}\n"
    "{\"type\":\"DELETED\",\"object\":{\"metadata\":{\"name\":\"a\",\"resourceVersion\":"
    "\"16\"}}}\n"
    "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"code\":410,\"reason\":"
    "\"Expired\"}}\n";

struct seen {
  int n;
  enum kcr_watch_type types[8];
  char rv[8][8];
};

static kcr_err collect(const char *line, size_t len, void *ud)
{
  struct seen *s = ud;
  struct kcr_watch_event ev;
  kcr_err rc;
  if(!len)
    return KCR_OK;
  rc = kcr__watch_decode(line, len, NULL, &ev, NULL);
  if(rc)
    return rc;
  assert_true(s->n < 8);
  s->types[s->n] = ev.type;
  snprintf(s->rv[s->n], sizeof(s->rv[0]), "%s",
           ev.resource_version ? ev.resource_version : "-");
  s->n++;
  cJSON_Delete(ev.object);
  return KCR_OK;
}

static void check_all(const struct seen *s)
{
  static const enum kcr_watch_type want[] = {KCR_WATCH_ADDED, KCR_WATCH_MODIFIED,
                                             KCR_WATCH_BOOKMARK, KCR_WATCH_DELETED,
                                             KCR_WATCH_ERROR};
  static const char *const rvs[] = {"10", "11", "15", "16", "-"};
  assert_int_equal(5, s->n);
  for(int i = 0; i < 5; i++) {
    assert_int_equal(want[i], s->types[i]);
    assert_string_equal(rvs[i], s->rv[i]);
  }
}

static void whole_stream_at_once(void **state)
{
  struct kcr__framer f = {0};
  struct seen s = {0};
  assert_int_equal(KCR_OK, kcr__framer_feed(&f, stream, strlen(stream), collect, &s));
  check_all(&s);
  assert_int_equal(0, kcr__framer_pending(&f));
  kcr__framer_cleanup(&f);
}

static void byte_by_byte(void **state)
{
  struct kcr__framer f = {0};
  struct seen s = {0};
  for(size_t i = 0; i < strlen(stream); i++)
    assert_int_equal(KCR_OK, kcr__framer_feed(&f, stream + i, 1, collect, &s));
  check_all(&s);
  kcr__framer_cleanup(&f);
}

static void random_chunks(void **state)
{
  unsigned seed = 12345;
  for(int round = 0; round < 500; round++) {
    struct kcr__framer f = {0};
    struct seen s = {0};
    size_t off = 0, len = strlen(stream);
    while(off < len) {
      size_t n = (size_t)(rand_r(&seed) % 97) + 1;
      if(n > len - off)
        n = len - off;
      assert_int_equal(KCR_OK, kcr__framer_feed(&f, stream + off, n, collect, &s));
      off += n;
    }
    check_all(&s);
    kcr__framer_cleanup(&f);
  }
}

static void unfinished_document_stays_pending(void **state)
{
  struct kcr__framer f = {0};
  struct seen s = {0};
  const char *part = "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"na";
  assert_int_equal(KCR_OK, kcr__framer_feed(&f, part, strlen(part), collect, &s));
  assert_int_equal(0, s.n);
  assert_int_equal(strlen(part), kcr__framer_pending(&f));
  kcr__framer_cleanup(&f);
}

static void overlong_line_is_refused(void **state)
{
  struct kcr__framer f = {.max_line = 16};
  struct seen s = {0};
  assert_int_equal(KCR_ETOOLARGE,
                   kcr__framer_feed(&f, "0123456789abcdefXYZ", 19, collect, &s));
  kcr__framer_cleanup(&f);
}

static void bad_documents_are_refused(void **state)
{
  struct kcr_watch_event ev;
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  const char *garbage = "{\"type\":\"ADDED\",\"object\":{";
  const char *notype = "{\"object\":{}}";
  const char *noobj = "{\"type\":\"ADDED\"}";
  const char *unknown = "{\"type\":\"RESYNC\",\"object\":{}}";

  assert_int_equal(KCR_EPARSE,
                   kcr__watch_decode(garbage, strlen(garbage), NULL, &ev, &ei));
  assert_non_null(strstr(ei.message, "malformed JSON"));
  assert_int_equal(KCR_EPARSE, kcr__watch_decode(notype, strlen(notype), NULL, &ev, &ei));
  assert_int_equal(KCR_EPARSE, kcr__watch_decode(noobj, strlen(noobj), NULL, &ev, &ei));
  assert_non_null(strstr(ei.message, "object"));
  assert_int_equal(KCR_EUNSUPPORTED,
                   kcr__watch_decode(unknown, strlen(unknown), NULL, &ev, &ei));
  assert_non_null(strstr(ei.message, "RESYNC"));
  assert_null(ev.object);
  kcr_errinfo_cleanup(&ei);
}

/* With a scratch buffer (kcr_watch_opts.drop_managed_fields) the object
 * comes without metadata.managedFields and is otherwise the same; a
 * document it cannot follow is decoded, or refused, as without. */
static void managed_fields_are_left_out_on_request(void **state)
{
  static const char line[] =
      "{\"type\":\"MODIFIED\",\"object\":{\"metadata\":{\"managedFields\":[{"
      "\"manager\":\"m\",\"fieldsV1\":{\"f:data\":{\"f:k\":{}}}}],\"name\":\"a\","
      "\"resourceVersion\":\"7\"},\"data\":{\"k\":\"v\"}}}";
  static const char garbage[] =
      "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"managedFields\":[}}}";
  struct kcr_buf scratch = KCR_BUF_INIT;
  struct kcr_watch_event ev, full;
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;

  assert_int_equal(KCR_OK, kcr__watch_decode(line, strlen(line), &scratch, &ev, &ei));
  assert_int_equal(KCR_OK, kcr__watch_decode(line, strlen(line), NULL, &full, &ei));
  assert_int_equal(KCR_WATCH_MODIFIED, ev.type);
  assert_string_equal("7", ev.resource_version);
  assert_null(kcr_json_at(ev.object, "/metadata/managedFields"));
  assert_non_null(kcr_json_at(full.object, "/metadata/managedFields"));
  cJSON_DeleteItemFromObjectCaseSensitive(kcr_json_at(full.object, "/metadata"),
                                          "managedFields");
  assert_true(cJSON_Compare(full.object, ev.object, true));
  cJSON_Delete(ev.object);
  cJSON_Delete(full.object);
  assert_int_equal(KCR_EPARSE,
                   kcr__watch_decode(garbage, strlen(garbage), &scratch, &ev, &ei));
  assert_null(ev.object);
  kcr_buf_cleanup(&scratch);
  kcr_errinfo_cleanup(&ei);
}

/* kcr_watch_opts.object_text: each event of the stream decodes to its
 * object's text (exactly the bytes of the object), type and
 * resourceVersion, no tree; an ERROR event, and whatever the tree must
 * read (an escaped type or resourceVersion, an unknown type, malformed or
 * incomplete documents), is left to kcr__watch_decode. */
static void events_decode_to_their_object_s_text(void **state)
{
  static const enum kcr_watch_type want[] = {KCR_WATCH_ADDED, KCR_WATCH_MODIFIED,
                                             KCR_WATCH_BOOKMARK, KCR_WATCH_DELETED};
  static const char *const rvs[] = {"10", "11", "15", "16"};
  static const char *const tree_only[] = {
      "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"code\":410}}",
      "{\"type\":\"ADD\\u0045D\",\"object\":{\"metadata\":{\"name\":\"a\"}}}",
      "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"resourceVersion\":\"1\\u0030\"}}}",
      "{\"type\":\"RESYNC\",\"object\":{}}",
      "{\"type\":\"ADDED\",\"object\":{",
      "{\"type\":\"ADDED\",\"object\":{}",
      "{\"type\":\"ADDED\",\"object\":[]}",
      "{\"type\":\"ADDED\",\"object\":{},\"x\":[}",
      "{\"type\":5,\"object\":{}}",
      "{\"object\":{}}",
      "",
  };
  struct kcr_buf rvbuf = KCR_BUF_INIT;
  const char *line = stream;
  int i = 0;

  for(const char *nl; (nl = strchr(line, '\n')); line = nl + 1) {
    struct kcr_watch_event ev;
    const char *obj;
    if(nl == line)
      continue;
    if(i == 4) { /* the ERROR event */
      assert_int_equal(KCR_ENOTFOUND,
                       kcr__watch_decode_text(line, (size_t)(nl - line), &rvbuf, &ev));
      break;
    }
    assert_int_equal(KCR_OK,
                     kcr__watch_decode_text(line, (size_t)(nl - line), &rvbuf, &ev));
    assert_int_equal(want[i], ev.type);
    assert_null(ev.object);
    assert_string_equal(rvs[i], ev.resource_version);
    obj = strstr(line, "\"object\":") + 9;
    assert_ptr_equal(obj, ev.object_text);
    assert_int_equal((size_t)(nl - 1 - obj), ev.object_len); /* up to the event's '}' */
    i++;
  }
  assert_int_equal(4, i);
  for(size_t k = 0; k < sizeof(tree_only) / sizeof(tree_only[0]); k++) {
    struct kcr_watch_event ev;
    print_message("%zu: %s\n", k, tree_only[k]);
    assert_int_equal(KCR_ENOTFOUND, kcr__watch_decode_text(
                                        tree_only[k], strlen(tree_only[k]), &rvbuf, &ev));
    assert_null(ev.object);
    assert_null(ev.object_text);
  }
  kcr_buf_cleanup(&rvbuf);
}

static kcr_err stop_at_second(const char *line, size_t len, void *ud)
{
  int *n = ud;
  return ++*n == 2 ? KCR_ECANCELED : KCR_OK;
}

/* The BOOKMARK that ends a streaming list's initial events (annotation
 * k8s.io/initial-events-end: "true") is marked, from the text and from a
 * tree alike; other bookmarks and an ADDED object with that annotation are
 * not. */
static void the_initial_events_end_bookmark_is_marked(void **state)
{
  static const struct {
    const char *line;
    bool end;
  } cases[] = {
      {"{\"type\":\"BOOKMARK\",\"object\":{\"kind\":\"ConfigMap\",\"apiVersion\":\"v1\","
       "\"metadata\":{\"resourceVersion\":\"42\",\"creationTimestamp\":null,"
       "\"annotations\":{\"k8s.io/initial-events-end\":\"true\"}}}}",
       true},
      {"{\"type\":\"BOOKMARK\",\"object\":{\"kind\":\"ConfigMap\",\"apiVersion\":\"v1\","
       "\"metadata\":{\"resourceVersion\":\"43\",\"creationTimestamp\":null}}}",
       false},
      {"{\"type\":\"BOOKMARK\",\"object\":{\"metadata\":{\"resourceVersion\":\"44\","
       "\"annotations\":{\"k8s.io/initial-events-end\":\"false\"}}}}",
       false},
      {"{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"a\",\"resourceVersion\":"
       "\"45\","
       "\"annotations\":{\"k8s.io/initial-events-end\":\"true\"}}}}",
       false},
  };
  struct kcr_buf rvbuf = KCR_BUF_INIT;
  struct kcr_watch_event ev;

  for(size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    const char *l = cases[i].line;
    assert_int_equal(KCR_OK, kcr__watch_decode_text(l, strlen(l), &rvbuf, &ev));
    if(ev.initial_events_end != cases[i].end)
      fail_msg("text, case %zu: initial_events_end %d", i, ev.initial_events_end);
    assert_int_equal(KCR_OK, kcr__watch_decode(l, strlen(l), NULL, &ev, NULL));
    if(ev.initial_events_end != cases[i].end)
      fail_msg("tree, case %zu: initial_events_end %d", i, ev.initial_events_end);
    cJSON_Delete(ev.object);
  }
  kcr_buf_cleanup(&rvbuf);
}

static void callback_error_stops_feeding(void **state)
{
  struct kcr__framer f = {0};
  int n = 0;
  assert_int_equal(KCR_ECANCELED,
                   kcr__framer_feed(&f, "a\nb\nc\n", 6, stop_at_second, &n));
  assert_int_equal(2, n);
  kcr__framer_cleanup(&f);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(whole_stream_at_once),
      cmocka_unit_test(byte_by_byte),
      cmocka_unit_test(random_chunks),
      cmocka_unit_test(unfinished_document_stays_pending),
      cmocka_unit_test(overlong_line_is_refused),
      cmocka_unit_test(bad_documents_are_refused),
      cmocka_unit_test(managed_fields_are_left_out_on_request),
      cmocka_unit_test(events_decode_to_their_object_s_text),
      cmocka_unit_test(the_initial_events_end_bookmark_is_marked),
      cmocka_unit_test(callback_error_stops_feeding),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
