/* kcr_watch with drop_managed_fields over the wire seam: every object
 * arrives without its managedFields and otherwise whole, whatever their
 * size - small, then over 1 MiB (the buffer that cut them is let go, not
 * kept at that size), then small again - and without the option they
 * arrive as sent. The same for kcr_list_each's items, page after page;
 * the informer's LIST keeps its items' text as written. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "twire.h"

#define NEV 5

/* A ConfigMap event whose managedFields hold mf_bytes of padding. */
static char *event(int i, size_t mf_bytes)
{
  struct kcr_buf b = KCR_BUF_INIT;
  kcr_buf_printf(&b,
                 "{\"type\":\"ADDED\",\"object\":{\"kind\":\"ConfigMap\",\"metadata\":{"
                 "\"managedFields\":[{\"manager\":\"m\",\"fieldsV1\":{\"f:pad\":\"");
  for(size_t n = 0; n < mf_bytes; n++)
    kcr_buf_append(&b, "x", 1);
  kcr_buf_printf(&b,
                 "\"}}],\"name\":\"cm%d\",\"resourceVersion\":\"%d\"},\"data\":{\"i\":"
                 "\"%d\"}}}",
                 i, 10 + i, i);
  assert_int_equal(KCR_OK, kcr_buf_err(&b));
  return kcr_buf_take(&b);
}

static const size_t sizes[NEV] = {10, 200 << 10, 20, (size_t)1 << 20, 5};

static kcr_err api(struct twire_call *call, void *ud)
{
  twire_stream(call, 200);
  for(int i = 0; i < NEV; i++) {
    char *e = event(i, sizes[i]);
    bool ok = twire_send(call, "%s", e);
    free(e);
    if(!ok)
      return KCR_OK;
  }
  return KCR_OK; /* the server ends the stream */
}

struct seen {
  int n, with_mf;
  char names[NEV][8], data[NEV][8];
};

static kcr_err on_event(struct kcr_watch_event *ev, void *ud)
{
  struct seen *s = ud;
  cJSON *t = NULL;
  if(ev->object_text) /* object_text: parse it here */
    assert_int_equal(KCR_OK, kcr_json_parse(ev->object_text, ev->object_len, &t, NULL));
  else
    t = ev->object;
  const char *n = kcr_json_str(t, "/metadata/name"), *d = kcr_json_str(t, "/data/i");
  if(s->n < NEV) {
    snprintf(s->names[s->n], sizeof(s->names[0]), "%s", n ? n : "-");
    snprintf(s->data[s->n], sizeof(s->data[0]), "%s", d ? d : "-");
  }
  s->with_mf += kcr_json_at(t, "/metadata/managedFields") != NULL;
  s->n++;
  if(t != ev->object)
    cJSON_Delete(t);
  return KCR_OK;
}

static struct seen run(bool drop, bool text)
{
  kcr_client *c = twire_client(api, NULL);
  struct kcr_gvr gvr = {"", "v1", "configmaps", true};
  struct kcr_ref ref = {&gvr, "ns"};
  struct seen s = {0};
  kcr_watch *w;

  assert_int_equal(KCR_OK,
                   kcr_watch_new(&(struct kcr_watch_opts){.client = c,
                                                          .ref = &ref,
                                                          .on_event = on_event,
                                                          .ud = &s,
                                                          .drop_managed_fields = drop,
                                                          .object_text = text},
                                 &w, NULL));
  assert_int_equal(KCR_OK, kcr_watch_run(w, NULL));
  assert_string_equal("14", kcr_watch_rv(w));
  kcr_watch_free(w);
  kcr_client_free(c);
  return s;
}

/* Every event came, in order: ConfigMap cmI with data.i I. */
static void each_in_order(const struct seen *s)
{
  assert_int_equal(NEV, s->n);
  for(int i = 0; i < NEV; i++) {
    char want[8];
    snprintf(want, sizeof(want), "cm%d", i);
    assert_string_equal(want, s->names[i]);
    snprintf(want, sizeof(want), "%d", i);
    assert_string_equal(want, s->data[i]);
  }
}

static void objects_arrive_whole_without_managed_fields_at_any_size(void **state)
{
  struct seen s = run(true, false);
  assert_int_equal(NEV, s.n);
  assert_int_equal(0, s.with_mf);
  each_in_order(&s);
}

static void without_the_option_they_arrive_as_sent(void **state)
{
  struct seen s = run(false, false);
  assert_int_equal(NEV, s.n);
  assert_int_equal(NEV, s.with_mf);
}

/* With object_text the objects come as the server's text, whole (their
 * managedFields too: the reader leaves them out), at any size. */
static void as_text_they_arrive_whole_at_any_size(void **state)
{
  struct seen s = run(true, true);
  assert_int_equal(NEV, s.n);
  assert_int_equal(NEV, s.with_mf);
  each_in_order(&s);
}

/* ---- LIST ---- */

#define LPATH "/api/v1/namespaces/ns/configmaps"

/* A ConfigMap item whose managedFields hold mf (a JSON array's text). */
#define ITEM(name, mf)                                                                   \
  "{\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"" name "\",\"namespace\":\"ns\","    \
  "\"resourceVersion\":\"3\",\"managedFields\":" mf "},\"data\":{\"k\":\"" name "\"}}"
#define MF1 "[{\"manager\":\"m\",\"operation\":\"Apply\",\"fieldsV1\":{\"f:data\":{}}}]"

/* Three pages of two items; page 2 names "managedFields" in a string. */
static kcr_err api_list(struct twire_call *call, void *ud)
{
  char buf[16];
  const char *cont = twire_query(call, "continue", buf, sizeof(buf));

  (void)ud;
  if(!twire_is(call, "GET", LPATH) || call->req->watch)
    return twire_reply(call, 404, "%s", twire_status_json(404, "NotFound"));
  if(!cont)
    return twire_reply(
        call, 200,
        "{\"kind\":\"ConfigMapList\",\"metadata\":{\"continue\":\"p2\","
        "\"resourceVersion\":\"9\"},\"items\":[" ITEM("a", MF1) "," ITEM("b", MF1) "]}");
  if(!strcmp(cont, "p2"))
    return twire_reply(
        call, 200,
        "{\"kind\":\"ConfigMapList\",\"metadata\":{\"continue\":\"p3\"},"
        "\"items\":[" ITEM("c\\\"managedFields\\\":[", "[]") "," ITEM("d", MF1) "]}");
  return twire_reply(call, 200,
                     "{\"kind\":\"ConfigMapList\",\"metadata\":{},\"items\":[" ITEM(
                         "e", MF1) "," ITEM("f", MF1) "]}");
}

struct items {
  int n, with_mf;
  char names[6][24];
};

static kcr_err on_item(const cJSON *item, void *ud)
{
  struct items *it = ud;
  const char *n = kcr_json_str(item, "/metadata/name"),
             *d = kcr_json_str(item, "/data/k");
  if(it->n < 6)
    snprintf(it->names[it->n], sizeof(it->names[0]), "%s",
             n && d && !strcmp(n, d) ? n : "-");
  it->with_mf += kcr_json_at(item, "/metadata/managedFields") != NULL;
  it->n++;
  return KCR_OK;
}

static struct items list(bool drop)
{
  kcr_client *c = twire_client(api_list, NULL);
  struct kcr_gvr gvr = {"", "v1", "configmaps", true};
  struct items it = {0};
  char *rv = NULL;

  assert_int_equal(KCR_OK, kcr_list_each(c, &(struct kcr_ref){&gvr, "ns"},
                                         &(struct kcr_list_opts){
                                             .limit = 2, .drop_managed_fields = drop},
                                         on_item, &it, &rv, NULL));
  assert_string_equal("9", rv);
  free(rv);
  kcr_client_free(c);
  return it;
}

static void listed_items_arrive_whole_without_managed_fields_on_every_page(void **state)
{
  static const char *const want[] = {"a", "b", "c\"managedFields\":[", "d", "e", "f"};
  struct items it = list(true);
  assert_int_equal(6, it.n);
  assert_int_equal(0, it.with_mf);
  for(int i = 0; i < 6; i++)
    assert_string_equal(want[i], it.names[i]);
}

static void listed_without_the_option_they_arrive_as_sent(void **state)
{
  struct items it = list(false);
  assert_int_equal(6, it.n);
  assert_int_equal(6, it.with_mf);
}

/* The informer's LIST: items become cached objects from their text as
 * written (no tree: "1.50e1" stays as it is), without managedFields unless
 * kept; the page is checked whole all the same (a flaw anywhere, even
 * inside a managedFields that would be left out, fails the list). */
static kcr_err api_informer(struct twire_call *call, void *ud)
{
  const char *mf = ud;
  if(!twire_is(call, "GET", LPATH))
    return twire_reply(call, 404, "%s", twire_status_json(404, "NotFound"));
  if(call->req->watch) {
    twire_stream(call, 200);
    twire_wait_cancel(call, 60000);
    return KCR_OK;
  }
  return twire_reply(
      call, 200,
      "{\"kind\":\"ConfigMapList\",\"metadata\":{\"resourceVersion\":"
      "\"9\"},\"items\":[{\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"a\","
      "\"namespace\":\"ns\",\"resourceVersion\":\"3\",\"managedFields\":%s},"
      "\"data\":{\"n\":1.50e1}}]}",
      mf);
}

/* The cached text of ns/a, or NULL when the informer did not sync. */
static char *informer_text(const char *mf, bool keep)
{
  kcr_client *c = twire_client(api_informer, (void *)mf);
  struct kcr_gvr gvr = {"", "v1", "configmaps", true};
  kcr_informer *inf;
  char *text = NULL;

  assert_int_equal(
      KCR_OK, kcr_informer_new(
                  &(struct kcr_informer_opts){
                      .client = c, .gvr = &gvr, .ns = "ns", .keep_managed_fields = keep},
                  &inf, NULL));
  assert_int_equal(KCR_OK, kcr_informer_start(inf));
  if(kcr_informer_wait_synced(inf, 3000)) {
    kcr_obj *o = kcr_store_ref(kcr_informer_store(inf), "ns", "a");
    assert_non_null(o);
    text = strdup(kcr_obj_json(o, NULL));
    kcr_obj_unref(o);
  }
  kcr_informer_free(inf);
  kcr_client_free(c);
  return text;
}

static void the_informers_list_keeps_items_as_written(void **state)
{
  char *t = informer_text(MF1, false);
  assert_string_equal(
      "{\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"a\",\"namespace\":"
      "\"ns\",\"resourceVersion\":\"3\"},\"data\":{\"n\":1.50e1}}",
      t);
  free(t);
  t = informer_text(MF1, true);
  assert_non_null(strstr(t, "\"managedFields\":" MF1 "},\"data\":{\"n\":1.50e1}}"));
  free(t);
  assert_null(informer_text("[tru]", false));
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(objects_arrive_whole_without_managed_fields_at_any_size),
      cmocka_unit_test(without_the_option_they_arrive_as_sent),
      cmocka_unit_test(as_text_they_arrive_whole_at_any_size),
      cmocka_unit_test(listed_items_arrive_whole_without_managed_fields_on_every_page),
      cmocka_unit_test(listed_without_the_option_they_arrive_as_sent),
      cmocka_unit_test(the_informers_list_keeps_items_as_written),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
