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

#include <pthread.h>
#include <stdatomic.h>

#include "kcr/json.h"
#include "kcr/store.h"
#include "runtime/store-int.h"
#include "tcheck.h"
#include "tfail.h"

static kcr_store *new_store(void)
{
  kcr_store *s = NULL;
  assert_int_equal(KCR_OK, kcr_store_new(NULL, &s, NULL));
  return s;
}

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
  assert_int_equal(KCR_OK, kcr_obj_from_json(t, 0, &o, NULL));
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
  cJSON *t;
  assert_int_equal(KCR_OK, kcr_obj_parse(o, &t));
  assert_string_equal("v", kcr_json_str(t, "/data/k"));
  cJSON_Delete(t);
  kcr_obj_unref(o);
  /* No name: refused. */
  cJSON *bad = cJSON_Parse("{\"metadata\":{}}");
  assert_int_equal(KCR_EINVAL, kcr_obj_from_json(bad, 0, &o, NULL));
  assert_null(o);
  cJSON_Delete(bad);
}

static void from_json_keeps_managed_fields_on_request_only(void **state)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  cJSON *t = cJSON_Parse("{\"metadata\":{\"name\":\"a\",\"managedFields\":[{}]}}");
  kcr_obj *o = (kcr_obj *)1;

  assert_int_equal(KCR_OK, kcr_obj_from_json(t, KCR_OBJ_KEEP_MANAGED_FIELDS, &o, NULL));
  assert_non_null(strstr(kcr_obj_json(o, NULL), "managedFields"));
  kcr_obj_unref(o);
  /* A flag this version does not know is refused, not ignored. */
  assert_int_equal(KCR_EINVAL, kcr_obj_from_json(t, 0x80, &o, &ei));
  assert_null(o);
  assert_non_null(strstr(ei.message, "flags"));
  assert_int_equal(KCR_EINVAL, kcr_obj_from_json(NULL, 0, &o, &ei));
  assert_non_null(strstr(ei.message, "tree"));
  cJSON_Delete(t);
  t = cJSON_Parse("{\"metadata\":{}}");
  assert_int_equal(KCR_EINVAL, kcr_obj_from_json(t, 0, &o, &ei));
  assert_non_null(strstr(ei.message, "metadata.name"));
  cJSON_Delete(t);
  kcr_errinfo_cleanup(&ei);
}

/* size_hint makes the table big enough at once: filling it to the hint
 * never rehashes. */
static void size_hint_presizes_the_table(void **state)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  kcr_store *s = NULL;
  kcr_obj *old;
  char name[32];
  size_t nb;

  assert_int_equal(KCR_OK,
                   kcr_store_new(&(struct kcr_store_opts){.size_hint = 1000}, &s, NULL));
  nb = kcr__store_buckets(s);
  assert_true(nb >= 1000); /* kcr_htab: at most one object per bucket */
  for(int i = 0; i < 1000; i++) {
    snprintf(name, sizeof(name), "o%04d", i);
    assert_int_equal(KCR_OK, kcr_store_put(s, obj("ns", name, "1", NULL), &old));
  }
  assert_int_equal(nb, kcr__store_buckets(s));
  kcr_store_free(s);
  /* Without a hint the table starts small. */
  s = new_store();
  assert_true(kcr__store_buckets(s) < nb);
  kcr_store_free(s);
  /* A hint no memory can hold: KCR_ENOMEM naming the field. */
  s = (kcr_store *)1;
  assert_int_equal(
      KCR_ENOMEM,
      kcr_store_new(&(struct kcr_store_opts){.size_hint = SIZE_MAX}, &s, &ei));
  assert_null(s);
  assert_non_null(strstr(ei.message, "size_hint"));
  kcr_errinfo_cleanup(&ei);
}

static void references_outlive_removal(void **state)
{
  kcr_store *s = new_store();
  kcr_obj *old = NULL, *held;
  assert_int_equal(KCR_OK, kcr_store_put(s, obj("ns", "a", "1", NULL), &old));
  assert_null(old);
  held = kcr_store_ref(s, "ns", "a");
  assert_non_null(held);
  assert_int_equal(KCR_OK, kcr_store_put(s, obj("ns", "a", "2", NULL), &old));
  assert_ptr_equal(held, old); /* the previous version comes back */
  kcr_obj_unref(old);
  assert_string_equal("1", kcr_obj_rv(held)); /* still readable: immutable */
  kcr_obj_unref(held);
  held = kcr_store_ref_key(s, "ns/a");
  assert_string_equal("2", kcr_obj_rv(held));
  kcr_store_delete(s, "ns", "a", &old);
  assert_ptr_equal(held, old);
  kcr_obj_unref(old);
  assert_null(kcr_store_ref(s, "ns", "a"));
  assert_int_equal(0, kcr_store_len(s));
  assert_int_equal(0, kcr_store_bytes(s));
  kcr_store_free(s);
  assert_string_equal("a", kcr_obj_name(held)); /* even past the store */
  kcr_obj_unref(held);
}

static void controller_index_finds_children(void **state)
{
  kcr_store *s = new_store();
  kcr_obj *old, **objs;
  size_t n;
  assert_int_equal(KCR_OK,
                   kcr_store_add_index(s, KCR_INDEX_CONTROLLER, kcr_index_controller));
  assert_int_equal(KCR_EEXIST,
                   kcr_store_add_index(s, KCR_INDEX_CONTROLLER, kcr_index_controller));
  assert_int_equal(KCR_EINVAL, kcr_store_add_index(s, "no-function", NULL));
  kcr_store_put(s, obj("ns", "c1", "1", "p1"), &old);
  kcr_store_put(s, obj("ns", "c2", "1", "p1"), &old);
  kcr_store_put(s, obj("ns", "c3", "1", "p2"), &old);
  kcr_store_put(s, obj("ns", "free", "1", NULL), &old);
  assert_int_equal(KCR_OK,
                   kcr_store_ref_by_index(s, KCR_INDEX_CONTROLLER, "p1", &objs, &n));
  assert_int_equal(2, n);
  kcr_objs_unref(objs, n);
  /* Re-owning c2 moves it between index values. */
  kcr_store_put(s, obj("ns", "c2", "2", "p2"), &old);
  kcr_obj_unref(old);
  kcr_store_ref_by_index(s, KCR_INDEX_CONTROLLER, "p1", &objs, &n);
  assert_int_equal(1, n);
  assert_string_equal("c1", kcr_obj_name(objs[0]));
  kcr_objs_unref(objs, n);
  kcr_store_ref_by_index(s, KCR_INDEX_CONTROLLER, "p2", &objs, &n);
  assert_int_equal(2, n);
  kcr_objs_unref(objs, n);
  assert_int_equal(KCR_EINVAL,
                   kcr_store_ref_by_index(s, "no-such-index", "x", &objs, &n));
  assert_null(objs);
  assert_int_equal(KCR_EINVAL,
                   kcr_store_ref_by_index(s, KCR_INDEX_CONTROLLER, NULL, &objs, &n));
  assert_int_equal(KCR_OK,
                   kcr_store_ref_by_index(s, KCR_INDEX_CONTROLLER, "none", &objs, &n));
  assert_int_equal(0, n);
  kcr_objs_unref(objs, n);
  kcr_store_free(s);
}

static void replace_swaps_and_reports_vanished(void **state)
{
  kcr_store *s = new_store();
  kcr_obj *old, **gone, *fresh[3];
  size_t ngone, bytes = 0;
  kcr_store_add_index(s, KCR_INDEX_CONTROLLER, kcr_index_controller);
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
  kcr_objs_unref(gone, ngone);
  assert_int_equal(3, kcr_store_len(s));
  assert_int_equal(bytes, kcr_store_bytes(s));
  kcr_obj *k = kcr_store_ref(s, "ns", "keep");
  assert_string_equal("5", kcr_obj_rv(k));
  kcr_obj_unref(k);
  kcr_obj **objs;
  size_t n;
  kcr_store_ref_by_index(s, KCR_INDEX_CONTROLLER, "p", &objs, &n); /* index rebuilt */
  assert_int_equal(1, n);
  kcr_objs_unref(objs, n);
  kcr_store_free(s);
}

static void many_objects_grow_the_table(void **state)
{
  kcr_store *s = new_store();
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
    kcr_obj *o = kcr_store_ref(s, "ns", name);
    assert_non_null(o);
    kcr_obj_unref(o);
  }
  assert_int_equal(KCR_OK, kcr_store_ref_all(s, &objs, &n));
  assert_int_equal(5000, n);
  kcr_objs_unref(objs, n);
  kcr_store_free(s);
}

/* ---- index functions run outside the lock (issue 8, item 4) ---- */

struct reading_index {
  kcr_store *s;
  atomic_int calls;
  size_t len_seen;
};
static struct reading_index ri;

/* An index function that reads the store it indexes (as an index keyed by
 * something found in other cached objects would). Under the writer's lock
 * this would get EDEADLK and then unlock the writer's lock. */
static void index_reading_the_store(const kcr_obj *o, kcr_index_emit emit, void *ctx)
{
  kcr_obj **all;
  size_t n;
  atomic_fetch_add(&ri.calls, 1);
  ri.len_seen = kcr_store_len(ri.s);
  kcr_obj *self = kcr_store_ref_key(ri.s, kcr_obj_key(o));
  kcr_obj_unref(self);
  if(!kcr_store_ref_all(ri.s, &all, &n))
    kcr_objs_unref(all, n);
  emit(kcr_obj_ns(o), ctx);
}

static void *reader(void *p)
{
  kcr_store *s = p;
  for(int i = 0; i < 2000; i++) {
    kcr_obj **objs;
    size_t n;
    if(!kcr_store_ref_by_index(s, "by-ns", "ns", &objs, &n)) {
      for(size_t j = 0; j < n; j++)
        TCHECK(!strcmp(kcr_obj_ns(objs[j]), "ns"));
      kcr_objs_unref(objs, n);
    }
  }
  return NULL;
}

static void an_index_function_may_read_the_store(void **state)
{
  kcr_store *s = new_store();
  kcr_obj *old, **gone, *fresh[2];
  size_t ngone, n;
  kcr_obj **objs;
  pthread_t th;

  ri.s = s;
  assert_int_equal(KCR_OK, kcr_store_add_index(s, "by-ns", index_reading_the_store));
  pthread_create(&th, NULL, reader, s); /* readers keep reading meanwhile */
  for(int i = 0; i < 50; i++) {
    char name[16];
    snprintf(name, sizeof(name), "o%d", i);
    assert_int_equal(KCR_OK, kcr_store_put(s, obj("ns", name, "1", NULL), &old));
    assert_int_equal(i, ri.len_seen); /* it saw the store before the write */
  }
  fresh[0] = obj("ns", "a", "2", NULL);
  fresh[1] = obj("other", "b", "2", NULL);
  assert_int_equal(KCR_OK, kcr_store_replace(s, fresh, 2, &gone, &ngone));
  kcr_objs_unref(gone, ngone);
  pthread_join(th, NULL);
  tcheck_report();
  /* Replace ran the function before swapping, not again under the lock. */
  assert_int_equal(KCR_OK, kcr_store_ref_by_index(s, "by-ns", "other", &objs, &n));
  assert_int_equal(1, n);
  kcr_objs_unref(objs, n);
  /* Removal uses the values kept with the object: no further calls. */
  int calls = atomic_load(&ri.calls);
  kcr_store_delete_key(s, "other/b", &old);
  kcr_obj_unref(old);
  assert_int_equal(calls, atomic_load(&ri.calls));
  assert_int_equal(KCR_OK, kcr_store_ref_by_index(s, "by-ns", "other", &objs, &n));
  assert_int_equal(0, n);
  kcr_objs_unref(objs, n);
  kcr_store_free(s);
}

/* ---- failures leave the store as it was (issue 8, item 6) ---- */

struct fixture {
  kcr_store *s;
  kcr_obj *add[3];
};

/* A check, not the code under test: its allocations never fail. */
static size_t index_count(kcr_store *s, const char *value)
{
  kcr_obj **objs;
  size_t n = 0;
  tfail_exempt(true);
  if(kcr_store_ref_by_index(s, KCR_INDEX_CONTROLLER, value, &objs, &n))
    n = (size_t)-1;
  else
    kcr_objs_unref(objs, n);
  tfail_exempt(false);
  return n;
}

/* The set-up of the verdicts below: a store with the controller index that
 * holds f->add[0]. NULL when a failed allocation stopped it, with *ok the
 * verdict on that (a failed kcr_store_new must leave its result NULL; a
 * later failure has nothing to check). */
static kcr_store *store_holding_a(struct fixture *f, bool *ok)
{
  kcr_store *s = (kcr_store *)1;
  kcr_obj *old = NULL;
  kcr_err rc = kcr_store_new(NULL, &s, NULL);

  if(rc) {
    *ok = rc == KCR_ENOMEM && !s; /* failed before anything existed */
    return NULL;
  }
  if(kcr_store_add_index(s, KCR_INDEX_CONTROLLER, kcr_index_controller)) {
    kcr_store_free(s);
    return NULL;
  }
  if(kcr_store_put(s, kcr_obj_ref(f->add[0]), &old)) {
    kcr_obj_unref(f->add[0]);
    kcr_store_free(s);
    return NULL;
  }
  return s;
}

/* Tortures fn on a fixture of ns/a (owner p1), ns/a again (owner p2) and
 * ns/b (owner p1). */
static void torture_on_fixture(const char *what, bool (*fn)(void *))
{
  struct fixture f = {
      NULL,
      {obj("ns", "a", "1", "p1"), obj("ns", "a", "2", "p2"), obj("ns", "b", "1", "p1")}};
  tfail_torture(what, fn, &f);
  for(int i = 0; i < 3; i++)
    kcr_obj_unref(f.add[i]);
}

/* put of a new key and of a replacement that moves between index values:
 * either applied completely or not at all, the caller's reference intact. */
static bool put_all_or_nothing(void *ud)
{
  struct fixture *f = ud;
  kcr_obj *old = NULL, *o;
  kcr_err rc;
  bool ok = true;
  kcr_store *s = store_holding_a(f, &ok);

  if(!s)
    return ok;
  /* A replacement of ns/a moving from owner p1 to p2. */
  o = kcr_obj_ref(f->add[1]);
  rc = kcr_store_put(s, o, &old);
  if(rc) {
    ok = ok && !old && kcr_store_len(s) == 1 && index_count(s, "p1") == 1 &&
         index_count(s, "p2") == 0;
    tfail_exempt(true);
    kcr_obj *cur = kcr_store_ref(s, "ns", "a");
    tfail_exempt(false);
    ok = ok && cur == f->add[0];
    kcr_obj_unref(cur);
    kcr_obj_unref(o); /* still ours */
  } else {
    ok = ok && old == f->add[0] && kcr_store_len(s) == 1 && index_count(s, "p1") == 0 &&
         index_count(s, "p2") == 1;
    kcr_obj_unref(old);
  }
  /* A new key. */
  o = kcr_obj_ref(f->add[2]);
  rc = kcr_store_put(s, o, &old);
  if(rc) {
    ok = ok && !old && kcr_store_len(s) == 1;
    kcr_obj_unref(o);
  } else {
    ok = ok && !old && kcr_store_len(s) == 2;
  }
  kcr_store_free(s);
  return ok;
}

static void put_applies_completely_or_not_at_all(void **state)
{
  torture_on_fixture("kcr_store_put", put_all_or_nothing);
}

static bool replace_all_or_nothing(void *ud)
{
  struct fixture *f = ud;
  kcr_obj **gone = (kcr_obj **)1, *in[3];
  size_t ngone = 99;
  kcr_err rc;
  bool ok = true;
  kcr_store *s = store_holding_a(f, &ok);

  if(!s)
    return ok;
  /* ns/a replaced by its p2 version, ns/b new, plus a duplicate of ns/b. */
  in[0] = kcr_obj_ref(f->add[1]);
  in[1] = kcr_obj_ref(f->add[2]);
  in[2] = kcr_obj_ref(f->add[2]);
  rc = kcr_store_replace(s, in, 3, &gone, &ngone);
  if(rc) {
    ok = !gone && !ngone && kcr_store_len(s) == 1 && index_count(s, "p1") == 1;
    for(int i = 0; i < 3; i++)
      kcr_obj_unref(in[i]); /* all still ours */
  } else {
    ok = ngone == 0 && kcr_store_len(s) == 2 && index_count(s, "p1") == 1 &&
         index_count(s, "p2") == 1;
    kcr_objs_unref(gone, ngone);
  }
  kcr_store_free(s);
  return ok;
}

static void replace_applies_completely_or_not_at_all(void **state)
{
  torture_on_fixture("kcr_store_replace", replace_all_or_nothing);
}

int main(void)
{
  tfail_init();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(objects_carry_a_header_and_compact_text),
      cmocka_unit_test(from_json_keeps_managed_fields_on_request_only),
      cmocka_unit_test(size_hint_presizes_the_table),
      cmocka_unit_test(references_outlive_removal),
      cmocka_unit_test(controller_index_finds_children),
      cmocka_unit_test(replace_swaps_and_reports_vanished),
      cmocka_unit_test(many_objects_grow_the_table),
      cmocka_unit_test(an_index_function_may_read_the_store),
      cmocka_unit_test(put_applies_completely_or_not_at_all),
      cmocka_unit_test(replace_applies_completely_or_not_at_all),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
