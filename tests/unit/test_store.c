/* The informer cache: immutable refcounted objects, header fields, the
 * controller-owner index, and replace-with-vanished semantics. */
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

static kcr_obj *obj(const char *ns, const char *name, const char *rv, const char *owner)
{
  char buf[1024];
  kcr_obj *o;
  snprintf(
      buf, sizeof(buf),
      "{\"metadata\":{\"namespace\":\"%s\",\"name\":\"%s\",\"uid\":\"uid-%s\","
      "\"resourceVersion\":\"%s\",\"generation\":3,"
      "\"managedFields\":[{\"manager\":\"kubectl\",\"fieldsV1\":{\"f:data\":{}}}]%s%s%s},"
      "\"data\":{\"k\":\"v\"}}",
      ns, name, name, rv,
      owner ? ",\"ownerReferences\":[{\"apiVersion\":\"v1\",\"kind\":\"A\",\"name\":"
              "\"x\",\"uid\":\"other\"},{\"apiVersion\":\"ebdman.example.com/v1alpha1\","
              "\"kind\":\"EBD\",\"name\":\"owner\",\"controller\":true,\"uid\":\""
            : "",
      owner ? owner : "", owner ? "\"}]" : "");
  cJSON *t = cJSON_Parse(buf);
  assert_non_null(t);
  assert_int_equal(KCR_OK, kcr_obj_new(t, false, &o));
  cJSON_Delete(t);
  return o;
}

static void objects_carry_a_header_and_compact_text(void **state)
{
  kcr_obj *o = obj("ns", "a", "7", "owner-uid");
  assert_string_equal("ns", kcr_obj_ns(o));
  assert_string_equal("a", kcr_obj_name(o));
  assert_string_equal("ns/a", kcr_obj_key(o));
  assert_string_equal("uid-a", kcr_obj_uid(o));
  assert_string_equal("7", kcr_obj_rv(o));
  assert_int_equal(3, kcr_obj_generation(o));
  assert_false(kcr_obj_deleting(o));
  assert_string_equal("owner-uid", kcr_obj_controller(o)->uid);
  assert_string_equal("EBD", kcr_obj_controller(o)->kind);
  assert_null(strstr(kcr_obj_json(o, NULL), "managedFields"));
  cJSON *t = kcr_obj_parse(o);
  assert_string_equal("v", kcr_json_str(t, "data.k"));
  cJSON_Delete(t);
  kcr_obj_unref(o);
  /* No name: refused. */
  cJSON *bad = cJSON_Parse("{\"metadata\":{}}");
  assert_int_equal(KCR_EINVAL, kcr_obj_new(bad, false, &o));
  assert_null(o);
  cJSON_Delete(bad);
}

static void references_outlive_removal(void **state)
{
  kcr_store *s = kcr_store_new();
  kcr_obj *old = NULL, *held;
  assert_int_equal(KCR_OK, kcr_store_put(s, obj("ns", "a", "1", NULL), &old));
  assert_null(old);
  held = kcr_store_get(s, "ns", "a");
  assert_non_null(held);
  assert_int_equal(KCR_OK, kcr_store_put(s, obj("ns", "a", "2", NULL), &old));
  assert_ptr_equal(held, old); /* the previous version comes back */
  kcr_obj_unref(old);
  assert_string_equal("1", kcr_obj_rv(held)); /* still readable: immutable */
  kcr_obj_unref(held);
  held = kcr_store_get_key(s, "ns/a");
  assert_string_equal("2", kcr_obj_rv(held));
  kcr_store_delete(s, "ns", "a", &old);
  assert_ptr_equal(held, old);
  kcr_obj_unref(old);
  assert_null(kcr_store_get(s, "ns", "a"));
  assert_int_equal(0, kcr_store_len(s));
  assert_int_equal(0, kcr_store_bytes(s));
  kcr_store_free(s);
  assert_string_equal("a", kcr_obj_name(held)); /* even past the store */
  kcr_obj_unref(held);
}

static void controller_index_finds_children(void **state)
{
  kcr_store *s = kcr_store_new();
  kcr_obj *old, **objs;
  size_t n;
  assert_int_equal(KCR_OK, kcr_store_add_index(s, KCR_INDEX_CONTROLLER, NULL));
  assert_int_equal(KCR_EEXIST, kcr_store_add_index(s, KCR_INDEX_CONTROLLER, NULL));
  kcr_store_put(s, obj("ns", "c1", "1", "p1"), &old);
  kcr_store_put(s, obj("ns", "c2", "1", "p1"), &old);
  kcr_store_put(s, obj("ns", "c3", "1", "p2"), &old);
  kcr_store_put(s, obj("ns", "free", "1", NULL), &old);
  assert_int_equal(KCR_OK, kcr_store_list(s, KCR_INDEX_CONTROLLER, "p1", &objs, &n));
  assert_int_equal(2, n);
  kcr_objs_free(objs, n);
  /* Re-owning c2 moves it between index values. */
  kcr_store_put(s, obj("ns", "c2", "2", "p2"), &old);
  kcr_obj_unref(old);
  kcr_store_list(s, KCR_INDEX_CONTROLLER, "p1", &objs, &n);
  assert_int_equal(1, n);
  assert_string_equal("c1", kcr_obj_name(objs[0]));
  kcr_objs_free(objs, n);
  kcr_store_list(s, KCR_INDEX_CONTROLLER, "p2", &objs, &n);
  assert_int_equal(2, n);
  kcr_objs_free(objs, n);
  assert_int_equal(KCR_EINVAL, kcr_store_list(s, "no-such-index", "x", &objs, &n));
  kcr_store_free(s);
}

static void replace_swaps_and_reports_vanished(void **state)
{
  kcr_store *s = kcr_store_new();
  kcr_obj *old, **gone, *fresh[3];
  size_t ngone, bytes = 0;
  kcr_store_add_index(s, KCR_INDEX_CONTROLLER, NULL);
  kcr_store_put(s, obj("ns", "keep", "1", "p"), &old);
  kcr_store_put(s, obj("ns", "drop1", "1", "p"), &old);
  kcr_store_put(s, obj("ns", "drop2", "1", NULL), &old);
  fresh[0] = obj("ns", "keep", "5", "p");
  fresh[1] = obj("ns", "new", "5", NULL);
  fresh[2] = obj("other", "keep", "5", NULL); /* same name, other namespace */
  for(int i = 0; i < 3; i++)
    bytes += kcr_obj_size(fresh[i]);
  assert_int_equal(KCR_OK, kcr_store_replace(s, fresh, 3, &gone, &ngone));
  assert_int_equal(2, ngone);
  assert_true((!strcmp(kcr_obj_name(gone[0]), "drop1") &&
               !strcmp(kcr_obj_name(gone[1]), "drop2")) ||
              (!strcmp(kcr_obj_name(gone[0]), "drop2") &&
               !strcmp(kcr_obj_name(gone[1]), "drop1")));
  kcr_objs_free(gone, ngone);
  assert_int_equal(3, kcr_store_len(s));
  assert_int_equal(bytes, kcr_store_bytes(s));
  kcr_obj *k = kcr_store_get(s, "ns", "keep");
  assert_string_equal("5", kcr_obj_rv(k));
  kcr_obj_unref(k);
  kcr_obj **objs;
  size_t n;
  kcr_store_list(s, KCR_INDEX_CONTROLLER, "p", &objs, &n); /* index rebuilt */
  assert_int_equal(1, n);
  kcr_objs_free(objs, n);
  kcr_store_free(s);
}

static void many_objects_grow_the_table(void **state)
{
  kcr_store *s = kcr_store_new();
  kcr_obj *old, **objs;
  size_t n;
  char name[32];
  for(int i = 0; i < 5000; i++) {
    snprintf(name, sizeof(name), "o%05d", i);
    assert_int_equal(KCR_OK, kcr_store_put(s, obj("ns", name, "1", NULL), &old));
  }
  assert_int_equal(5000, kcr_store_len(s));
  for(int i = 0; i < 5000; i += 7) {
    snprintf(name, sizeof(name), "o%05d", i);
    kcr_obj *o = kcr_store_get(s, "ns", name);
    assert_non_null(o);
    kcr_obj_unref(o);
  }
  assert_int_equal(KCR_OK, kcr_store_list(s, NULL, NULL, &objs, &n));
  assert_int_equal(5000, n);
  kcr_objs_free(objs, n);
  kcr_store_free(s);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(objects_carry_a_header_and_compact_text),
      cmocka_unit_test(references_outlive_removal),
      cmocka_unit_test(controller_index_finds_children),
      cmocka_unit_test(replace_swaps_and_reports_vanished),
      cmocka_unit_test(many_objects_grow_the_table),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
