/* Typed objects cut to the paths a controller uses (kcr_generate_types
 * PATHS, kcr-gen --path): the EBD of config/crd/bases generated with
 * /spec/vfmTemplate/image, /status/conditions and /metadata/labels only
 * (tests/CMakeLists.txt). The struct lacks every other member (a compile
 * error to use: tests/gen/paths.sh), ebd_keep is the same list, and an
 * informer with it as its keep list caches what the type has. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "ebds.h"
#include "kcr/informer.h"
#include "tcheck.h"
#include "twire.h"

#define EBD_TEXT                                                                         \
  "{\"apiVersion\":\"ebdman.example.com/v1beta1\",\"kind\":\"EBD\",\"metadata\":{"       \
  "\"name\":\"e1\",\"namespace\":\"ns\",\"uid\":\"u1\",\"resourceVersion\":\"7\","       \
  "\"labels\":{\"team\":\"a\"},\"annotations\":{\"note\":\"dropped\"}},\"spec\":{"       \
  "\"vfmTemplate\":{\"image\":\"img:1\",\"replicas\":3,\"config\":{\"k\":\"v\"}}},"      \
  "\"status\":{\"observedGeneration\":2,\"conditions\":[{\"type\":\"Ready\",\"status\":" \
  "\"True\",\"reason\":\"Up\",\"message\":\"\",\"lastTransitionTime\":"                  \
  "\"2026-12-07T00:00:00Z\"}]}}"

/* The keep list is the paths, sorted, once each. */
static void the_keep_list_is_the_paths(void **state)
{
  static const char *const want[] = {"/metadata/labels", "/spec/vfmTemplate/image",
                                     "/status/conditions"};
  size_t n = 0;
  while(ebd_keep[n])
    n++;
  assert_int_equal(3, n);
  for(size_t i = 0; i < n; i++)
    assert_string_equal(want[i], ebd_keep[i]);
}

/* A whole object decodes into the cut type (what it lacks is skipped), and
 * encodes back as what the type has. */
static void a_whole_object_decodes_into_the_cut_type(void **state)
{
  struct kcr_arena a = KCR_ARENA_INIT;
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  struct kcr_buf out = KCR_BUF_INIT;
  struct ebd e;

  assert_int_equal(KCR_OK, ebd_decode(EBD_TEXT, strlen(EBD_TEXT), 0, &a, &e, &ei));
  assert_true(e.spec.vfm_template.has_image);
  assert_true(kcr_str_eq(e.spec.vfm_template.image, "img:1"));
  assert_int_equal(1, e.status.conditions.n);
  assert_true(kcr_str_eq(e.status.conditions.v[0].reason, "Up"));
  assert_true(kcr_str_eq(e.metadata.name, "e1"));
  assert_int_equal(KCR_OK, ebd_encode(&e, &out, &ei));
  assert_null(strstr(kcr_buf_str(&out), "replicas"));
  assert_null(strstr(kcr_buf_str(&out), "observedGeneration\":2"));
  assert_non_null(strstr(kcr_buf_str(&out), "\"image\":\"img:1\""));
  kcr_buf_cleanup(&out);
  kcr_arena_cleanup(&a);
  kcr_errinfo_cleanup(&ei);
}

static kcr_err api(struct twire_call *call, void *ud)
{
  (void)ud;
  if(!twire_is(call, "GET", "/apis/ebdman.example.com/v1beta1/namespaces/ns/ebds"))
    return twire_reply(call, 404, "%s", twire_status_json(404, "NotFound"));
  if(!call->req->watch)
    return twire_reply(call, 200,
                       "{\"kind\":\"EBDList\",\"metadata\":{\"resourceVersion\":\"7\"},"
                       "\"items\":[" EBD_TEXT "]}");
  twire_stream(call, 200);
  twire_wait_cancel(call, 60000);
  return KCR_OK;
}

/* An informer with ebd_keep as its keep list holds what the type has and
 * nothing it lacks: one declaration for both. */
static void the_cache_holds_what_the_type_has(void **state)
{
  kcr_client *cl = twire_client(api, NULL);
  struct kcr_arena a = KCR_ARENA_INIT;
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  kcr_informer *inf;
  kcr_obj *o;
  struct ebd e;
  size_t len;

  assert_int_equal(KCR_OK,
                   kcr_informer_new(&(struct kcr_informer_opts){.client = cl,
                                                                .gvr = &ebd_gvr,
                                                                .ns = "ns",
                                                                .keep = ebd_keep,
                                                                .paged_list = true},
                                    &inf, &ei));
  assert_int_equal(KCR_OK, kcr_informer_start(inf));
  assert_true(kcr_informer_wait_synced(inf, 30000));
  assert_non_null(o = kcr_store_ref(kcr_informer_store(inf), "ns", "e1"));
  const char *text = kcr_obj_json(o, &len);
  assert_null(strstr(text, "replicas"));
  assert_null(strstr(text, "annotations"));
  assert_null(strstr(text, "observedGeneration"));
  assert_non_null(strstr(text, "\"team\":\"a\""));
  assert_int_equal(KCR_OK, ebd_from_obj(o, 0, &a, &e, &ei));
  assert_true(kcr_str_eq(e.spec.vfm_template.image, "img:1"));
  assert_true(kcr_str_eq(e.status.conditions.v[0].type, "Ready"));
  kcr_obj_unref(o);
  kcr_informer_free(inf);
  kcr_client_free(cl);
  kcr_arena_cleanup(&a);
  kcr_errinfo_cleanup(&ei);
  tcheck_report();
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(the_keep_list_is_the_paths),
      cmocka_unit_test(a_whole_object_decodes_into_the_cut_type),
      cmocka_unit_test(the_cache_holds_what_the_type_has),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
