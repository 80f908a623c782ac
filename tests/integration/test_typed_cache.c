/* kcr-gen's typed wrappers of the cache against the real control plane: a
 * cached list (<kind>_list, kcr_manager_list_typed) by namespace and by a
 * label index, as views and as copies, with the setup mistakes told apart
 * from an empty answer; informer handlers (<kind>_add_handlers) and a map
 * function (<kind>_watches) that get typed views of each add, update and
 * delete; and an object that does not decode as the callback's type is
 * logged, never passed on. */
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "itest.h"
#include "k8s.h" /* kcr_generate_types(... KINDS v1/ConfigMap) */
#include "kcr/manager.h"
#include "tcheck.h"

ITEST_CLIENT_FIXTURE

#define SEL_KEY "kcr-typed"

struct run {
  kcr_manager *m;
  pthread_t th;
  int status;
};

static void *run_main(void *p)
{
  struct run *r = p;
  r->status = kcr_manager_run(r->m);
  return NULL;
}

/* A manager on $KUBECONFIG without servers or leader election. */
static kcr_manager *manager(void)
{
  struct kcr_config_opts co = {0};
  struct kcr_manager_opts mo = {.name = "typed-cache"};
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  kcr_manager *m;

  itest_expect(KCR_OK, kcr_config_load(&co, &mo.config, &ei), &ei);
  itest_expect(KCR_OK, kcr_manager_new(&mo, &m, &ei), &ei);
  kcr_config_free(mo.config);
  return m;
}

/* ConfigMap ns/name labelled SEL_KEY=sel and g=group (none when NULL),
 * with data k=v: created or changed by a typed apply. */
static void put(const char *ns, const char *name, const char *sel, const char *group,
                const char *v)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  struct kcr_arena a = KCR_ARENA_INIT;
  struct core_v1_config_map cm;

  core_v1_config_map_init(&cm);
  KCR_SET(cm.metadata, name, kcr_str_c(name));
  KCR_SET(cm.metadata, namespace_, kcr_str_c(ns));
  itest_expect(KCR_OK,
               group ? KCR_SET_STRMAP(cm.metadata, labels, &a, SEL_KEY, sel, "g", group)
                     : KCR_SET_STRMAP(cm.metadata, labels, &a, SEL_KEY, sel),
               NULL);
  itest_expect(KCR_OK, KCR_SET_STRMAP(cm, data, &a, "k", v), NULL);
  itest_expect(KCR_OK,
               core_v1_config_map_apply(
                   cl, &cm, &(struct kcr_apply_opts){.field_manager = "t", .force = true},
                   NULL, NULL, &ei),
               &ei);
  kcr_errinfo_cleanup(&ei);
  kcr_arena_cleanup(&a);
}

static void drop(const char *ns, const char *name)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  itest_expect(
      KCR_OK,
      kcr_delete(cl, &(struct kcr_ref){&itest_configmaps, ns, name}, NULL, NULL, &ei),
      &ei);
  kcr_errinfo_cleanup(&ei);
}

/* The names of items[0..n) (copies: C strings), sorted, joined by ','. */
static char *names(const struct core_v1_config_map *items, size_t n)
{
  static char out[256];
  const char *v[16];
  size_t len = 0;

  assert_true(n <= 16);
  for(size_t i = 0; i < n; i++) {
    size_t j = i;
    for(; j && strcmp(v[j - 1], items[i].metadata.name.s) > 0; j--)
      v[j] = v[j - 1];
    v[j] = items[i].metadata.name.s;
  }
  out[0] = '\0';
  for(size_t i = 0; i < n; i++)
    len += (size_t)snprintf(out + len, sizeof(out) - len, "%s%s", i ? "," : "", v[i]);
  return out;
}

static void a_typed_list_reads_the_cache_by_namespace_and_index(void **state)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  struct kcr_arena a = KCR_ARENA_INIT;
  char *ns1 = itest_namespace(cl, "typed-list"), *ns2 = itest_namespace(cl, "typed-list");
  char sel[128], lsel[160];
  struct core_v1_config_map *items = NULL;
  kcr_obj **objs = NULL;
  size_t n = 0;
  kcr_informer *inf;
  struct run r;

  snprintf(sel, sizeof(sel), "%s", ns1); /* unique: other tests' objects stay out */
  snprintf(lsel, sizeof(lsel), SEL_KEY "=%s", sel);
  put(ns1, "a", sel, "x", "1");
  put(ns1, "b", sel, "y", "2");
  put(ns2, "c", sel, "x", "3");
  put(ns2, "d", sel, NULL, "4");
  r.m = manager();
  itest_expect(
      KCR_OK,
      kcr_manager_informer(r.m,
                           &(struct kcr_informer_opts){.gvr = &core_v1_config_map_gvr,
                                                       .label_selector = lsel},
                           &inf, &ei),
      &ei);
  assert_int_equal(KCR_OK, kcr_store_add_label_index(kcr_informer_store(inf), "g"));
  assert_int_equal(0, pthread_create(&r.th, NULL, run_main, &r));
  assert_true(kcr_informer_wait_synced(inf, 60000));

  /* every namespace, copies: objs may be NULL */
  itest_expect(KCR_OK,
               core_v1_config_map_list(r.m, NULL, NULL, kcr_str_c(NULL), KCR_TYPED_COPY,
                                       &a, &items, &n, NULL, &ei),
               &ei);
  assert_string_equal("a,b,c,d", names(items, n));
  /* one namespace of a cluster-wide informer */
  itest_expect(KCR_OK,
               core_v1_config_map_list(r.m, ns2, NULL, kcr_str_c(NULL), KCR_TYPED_COPY,
                                       &a, &items, &n, NULL, &ei),
               &ei);
  assert_string_equal("c,d", names(items, n));
  assert_true(kcr_str_eq(KCR_MAP_STR(items[0].data, "k"), "3") ||
              kcr_str_eq(KCR_MAP_STR(items[0].data, "k"), "4"));
  /* by the label index, as views borrowing from the references in objs */
  itest_expect(KCR_OK,
               core_v1_config_map_list(r.m, NULL, KCR_INDEX_LABEL_PREFIX "g",
                                       kcr_str_c("x"), 0, &a, &items, &n, &objs, &ei),
               &ei);
  assert_int_equal(2, n);
  assert_non_null(objs);
  bool a_seen = false, c_seen = false;
  for(size_t i = 0; i < n; i++) { /* items[i] is objs[i]'s view: its text */
    size_t len;
    const char *json = kcr_obj_json(objs[i], &len);
    assert_true(items[i].metadata.name.s > json && items[i].metadata.name.s < json + len);
    assert_true(kcr_str_eq(items[i].metadata.name, kcr_obj_name(objs[i])));
    a_seen |= !strcmp(kcr_obj_name(objs[i]), "a");
    c_seen |= !strcmp(kcr_obj_name(objs[i]), "c");
  }
  assert_true(a_seen && c_seen);
  kcr_objs_unref(objs, n);
  /* both: the index within one namespace */
  itest_expect(KCR_OK,
               core_v1_config_map_list(r.m, ns2, KCR_INDEX_LABEL_PREFIX "g",
                                       kcr_str_c("x"), KCR_TYPED_COPY, &a, &items, &n,
                                       NULL, &ei),
               &ei);
  assert_string_equal("c", names(items, n));
  /* a value nothing has, and one that cannot be an index value: empty */
  itest_expect(KCR_OK,
               core_v1_config_map_list(r.m, NULL, KCR_INDEX_LABEL_PREFIX "g",
                                       kcr_str_c("z"), KCR_TYPED_COPY, &a, &items, &n,
                                       NULL, &ei),
               &ei);
  assert_int_equal(0, n);
  assert_null(items);
  itest_expect(KCR_OK,
               core_v1_config_map_list(r.m, NULL, KCR_INDEX_LABEL_PREFIX "g",
                                       (struct kcr_str){"x\0y", 3}, KCR_TYPED_COPY, &a,
                                       &items, &n, NULL, &ei),
               &ei);
  assert_int_equal(0, n);
  /* setup mistakes are errors, never an empty list */
  assert_int_equal(KCR_EINVAL,
                   core_v1_config_map_list(r.m, NULL, "label:nope", kcr_str_c("x"),
                                           KCR_TYPED_COPY, &a, &items, &n, NULL, &ei));
  assert_non_null(strstr(ei.message, "no index \"label:nope\""));
  assert_int_equal(KCR_EINVAL,
                   core_v1_config_map_list(r.m, NULL, "label:g", kcr_str_c(NULL),
                                           KCR_TYPED_COPY, &a, &items, &n, NULL, &ei));
  assert_non_null(strstr(ei.message, "needs a value"));
  objs = (kcr_obj **)&a;
  assert_int_equal(KCR_EINVAL, core_v1_config_map_list(r.m, NULL, NULL, kcr_str_c(NULL),
                                                       0, &a, &items, &n, NULL, &ei));
  assert_non_null(strstr(ei.message, "needs objs"));
  static const struct kcr_gvr secrets = {"", "v1", "secrets", true};
  assert_int_equal(KCR_EINVAL,
                   kcr_manager_list_typed(r.m, &core_v1_config_map_type, &secrets, NULL,
                                          NULL, kcr_str_c(NULL), KCR_TYPED_COPY, &a,
                                          (void **)&items, &n, NULL, &ei));
  assert_non_null(strstr(ei.message, "no informer of /v1/secrets"));
  /* a type the objects are not of: KCR_EPARSE naming the object */
  void *v;
  assert_int_equal(KCR_EPARSE,
                   kcr_manager_list_typed(r.m, &kcr_type_string, &core_v1_config_map_gvr,
                                          ns1, NULL, kcr_str_c(NULL), KCR_TYPED_COPY, &a,
                                          &v, &n, NULL, &ei));
  assert_non_null(strstr(ei.message, ns1));
  assert_int_equal(0, n);

  kcr_manager_stop(r.m);
  assert_int_equal(0, pthread_join(r.th, NULL));
  assert_int_equal(0, r.status);
  kcr_manager_free(r.m);
  kcr_errinfo_cleanup(&ei);
  kcr_arena_cleanup(&a);
  itest_namespace_drop(cl, ns1);
  itest_namespace_drop(cl, ns2);
}

/* ---- typed handlers and a typed map function ---- */

struct seen {
  pthread_mutex_t mu;
  char log[2048]; /* "add a=1;update a 1>2;delete a=2;" */
  size_t len;
  atomic_int mapped_wrong, reconciled;
  char reconciled_name[64];
};
static struct seen seen = {.mu = PTHREAD_MUTEX_INITIALIZER};

static void note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void note(const char *fmt, ...)
{
  va_list ap;
  pthread_mutex_lock(&seen.mu);
  va_start(ap, fmt);
  seen.len +=
      (size_t)vsnprintf(seen.log + seen.len, sizeof(seen.log) - seen.len, fmt, ap);
  va_end(ap);
  pthread_mutex_unlock(&seen.mu);
}

static bool logged(const char *want)
{
  pthread_mutex_lock(&seen.mu);
  bool yes = strstr(seen.log, want) != NULL;
  pthread_mutex_unlock(&seen.mu);
  return yes;
}

static void t_add(const struct core_v1_config_map *cm, void *ud)
{
  struct kcr_str k = KCR_MAP_STR(cm->data, "k");
  note("add %.*s=%.*s;", KCR_STR_ARG(cm->metadata.name), KCR_STR_ARG(k));
}

static void t_update(const struct core_v1_config_map *old,
                     const struct core_v1_config_map *cur, void *ud)
{
  struct kcr_str o = KCR_MAP_STR(old->data, "k"), c = KCR_MAP_STR(cur->data, "k");
  if(old != cur) /* not a resync */
    note("update %.*s %.*s>%.*s;", KCR_STR_ARG(cur->metadata.name), KCR_STR_ARG(o),
         KCR_STR_ARG(c));
}

static void t_delete(const struct core_v1_config_map *cm, void *ud)
{
  struct kcr_str k = KCR_MAP_STR(cm->data, "k");
  note("delete %.*s=%.*s;", KCR_STR_ARG(cm->metadata.name), KCR_STR_ARG(k));
}

/* Maps ConfigMap n to the key "to-<n>", a name made in the call's arena. */
static void to_map(const struct core_v1_config_map *cm, struct kcr_arena *a,
                   kcr_map_emit emit, void *ctx, void *ud)
{
  char *to = kcr_arena_printf(a, "to-%.*s", KCR_STR_ARG(cm->metadata.name));
  TCHECK(to != NULL);
  emit(cm->metadata.namespace_.s, to, ctx);
}

/* Never called: ConfigMaps do not decode as strings. */
static void string_map(kcr_fnptr fn, const void *obj, struct kcr_arena *a,
                       kcr_map_emit emit, void *ctx, void *ud)
{
  atomic_fetch_add(&seen.mapped_wrong, 1);
}

static kcr_err record(kcr_ctx *cx, const struct kcr_request *req, struct kcr_result *res,
                      void *ud)
{
  pthread_mutex_lock(&seen.mu);
  snprintf(seen.reconciled_name, sizeof(seen.reconciled_name), "%s", req->name);
  pthread_mutex_unlock(&seen.mu);
  atomic_fetch_add(&seen.reconciled, 1);
  return KCR_OK;
}

static void wait_logged(const char *want)
{
  for(int i = 0; i < 600 && !logged(want); i++)
    itest_sleep_ms(50);
  if(!logged(want))
    fail_msg("never logged \"%s\"; log: %s", want, seen.log);
}

static void handlers_and_map_functions_get_typed_views(void **state)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  char *ns = itest_namespace(cl, "typed-events"), lsel[160];
  kcr_controller *ctl;
  kcr_informer *inf;
  struct run r;

  snprintf(lsel, sizeof(lsel), SEL_KEY "=%s", ns);
  r.m = manager();
  itest_expect(KCR_OK,
               kcr_manager_informer(
                   r.m,
                   &(struct kcr_informer_opts){
                       .gvr = &core_v1_config_map_gvr, .ns = ns, .label_selector = lsel},
                   &inf, &ei),
               &ei);
  assert_int_equal(
      KCR_OK, core_v1_config_map_add_handlers(inf, &(struct core_v1_config_map_handlers){
                                                       t_add, t_update, t_delete, NULL}));
  assert_int_equal(KCR_EINVAL, core_v1_config_map_add_handlers(inf, NULL));
  itest_expect(
      KCR_OK,
      kcr_controller_new(&(struct kcr_controller_opts){.name = "typed-map",
                                                       .reconcile = record,
                                                       .client = kcr_manager_client(r.m)},
                         &ctl, &ei),
      &ei);
  assert_int_equal(KCR_OK, core_v1_config_map_watches(ctl, inf, to_map, NULL, NULL));
  assert_int_equal(KCR_EINVAL, core_v1_config_map_watches(ctl, inf, NULL, NULL, NULL));
  assert_int_equal(KCR_OK,
                   kcr_controller_watches_typed(ctl, inf, &kcr_type_string, string_map,
                                                (kcr_fnptr)to_map, NULL, NULL));
  assert_int_equal(KCR_OK, kcr_manager_add(r.m, ctl));
  assert_int_equal(0, pthread_create(&r.th, NULL, run_main, &r));
  assert_true(kcr_informer_wait_synced(inf, 60000));

  put(ns, "a", ns, NULL, "1");
  wait_logged("add a=1;");
  put(ns, "a", ns, NULL, "2");
  wait_logged("update a 1>2;");
  for(int i = 0; i < 600 && atomic_load(&seen.reconciled) == 0; i++)
    itest_sleep_ms(50);
  pthread_mutex_lock(&seen.mu);
  assert_string_equal("to-a", seen.reconciled_name);
  pthread_mutex_unlock(&seen.mu);
  drop(ns, "a");
  wait_logged("delete a=2;");
  assert_int_equal(0, atomic_load(&seen.mapped_wrong));
  assert_false(logged("add a=2;"));

  kcr_manager_stop(r.m);
  assert_int_equal(0, pthread_join(r.th, NULL));
  assert_int_equal(0, r.status);
  kcr_manager_free(r.m);
  kcr_errinfo_cleanup(&ei);
  tcheck_report();
  itest_namespace_drop(cl, ns);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(a_typed_list_reads_the_cache_by_namespace_and_index),
      cmocka_unit_test(handlers_and_map_functions_get_typed_views),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
