/* kcr_watch with drop_managed_fields over the wire seam: every object
 * arrives without its managedFields and otherwise whole, whatever their
 * size - small, then over 1 MiB (the buffer that cut them is let go, not
 * kept at that size), then small again - and without the option they
 * arrive as sent. */
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
  const char *n = kcr_json_str(ev->object, "metadata.name"),
             *d = kcr_json_str(ev->object, "data.i");
  if(s->n < NEV) {
    snprintf(s->names[s->n], sizeof(s->names[0]), "%s", n ? n : "-");
    snprintf(s->data[s->n], sizeof(s->data[0]), "%s", d ? d : "-");
  }
  s->with_mf += kcr_json_at(ev->object, "metadata.managedFields") != NULL;
  s->n++;
  return KCR_OK;
}

static struct seen run(bool drop)
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
                                                          .drop_managed_fields = drop},
                                 &w, NULL));
  assert_int_equal(KCR_OK, kcr_watch_run(w, NULL));
  assert_string_equal("14", kcr_watch_rv(w));
  kcr_watch_free(w);
  kcr_client_free(c);
  return s;
}

static void objects_arrive_whole_without_managed_fields_at_any_size(void **state)
{
  struct seen s = run(true);
  assert_int_equal(NEV, s.n);
  assert_int_equal(0, s.with_mf);
  for(int i = 0; i < NEV; i++) {
    char want[8];
    snprintf(want, sizeof(want), "cm%d", i);
    assert_string_equal(want, s.names[i]);
    snprintf(want, sizeof(want), "%d", i);
    assert_string_equal(want, s.data[i]);
  }
}

static void without_the_option_they_arrive_as_sent(void **state)
{
  struct seen s = run(false);
  assert_int_equal(NEV, s.n);
  assert_int_equal(NEV, s.with_mf);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(objects_arrive_whole_without_managed_fields_at_any_size),
      cmocka_unit_test(without_the_option_they_arrive_as_sent),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
