/* The informer against the real control plane: it converges on 2,000
 * objects and stays equal to a fresh LIST under concurrent creates, updates
 * and deletes; objects deleted while it could not watch (apiserver down,
 * history compacted) are noticed through 410 -> relist with delete events;
 * an apiserver restart is recovered from without help; several namespaces
 * in one store, listed and watched each, and namespaces chosen by a label
 * selector followed as the label comes and goes; listed objects come
 * without managedFields unless asked for; a metadata-only informer holds
 * PartialObjectMetadata, listed and watched, and the server sent no data. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "itest.h"
#include "kcr/informer.h"
#include "tcheck.h"

ITEST_CLIENT_FIXTURE

struct counts {
  atomic_int adds, updates, deletes, resyncs;
  pthread_mutex_t mu;
  char deleted[64][32];
  int ndeleted;
};

static void on_add(kcr_obj *o, void *ud)
{
  atomic_fetch_add(&((struct counts *)ud)->adds, 1);
}

static void on_update(kcr_obj *old, kcr_obj *cur, void *ud)
{
  struct counts *c = ud;
  atomic_fetch_add(old == cur ? &c->resyncs : &c->updates, 1);
}

static void on_delete(kcr_obj *o, void *ud)
{
  struct counts *c = ud;
  atomic_fetch_add(&c->deletes, 1);
  pthread_mutex_lock(&c->mu);
  if(c->ndeleted < 64)
    snprintf(c->deleted[c->ndeleted++], sizeof(c->deleted[0]), "%s", kcr_obj_name(o));
  pthread_mutex_unlock(&c->mu);
}

static kcr_informer *start_informer(const char *ns, struct counts *c, uint64_t resync)
{
  kcr_informer *inf;
  struct kcr_informer_opts o = {.client = cl,
                                .gvr = &itest_configmaps,
                                .ns = ns,
                                .resync_ms = resync,
                                .page_size = 250};
  struct kcr_informer_handlers h = {on_add, on_update, on_delete, c};
  assert_int_equal(KCR_OK, kcr_informer_new(&o, &inf, NULL));
  assert_int_equal(KCR_OK, kcr_informer_add_handlers(inf, &h));
  assert_int_equal(KCR_OK, kcr_informer_start(inf));
  assert_true(kcr_informer_wait_synced(inf, 60000));
  return inf;
}

struct pair {
  char name[32], rv[24];
};

static int cmp_pair(const void *a, const void *b)
{
  return strcmp(((const struct pair *)a)->name, ((const struct pair *)b)->name);
}

struct listing {
  struct pair *p;
  size_t n, cap;
};

static kcr_err add_pair(const cJSON *item, void *ud)
{
  struct listing *l = ud;
  if(l->n == l->cap) {
    l->cap = l->cap ? l->cap * 2 : 1024;
    l->p = realloc(l->p, l->cap * sizeof(*l->p));
  }
  snprintf(l->p[l->n].name, sizeof(l->p[0].name), "%s",
           kcr_json_str(item, "/metadata/name"));
  snprintf(l->p[l->n].rv, sizeof(l->p[0].rv), "%s",
           kcr_json_str(item, "/metadata/resourceVersion"));
  l->n++;
  return KCR_OK;
}

/* True if the store holds exactly the objects (names and resourceVersions)
 * of a fresh LIST. */
static bool store_equals_list(kcr_informer *inf, const char *ns, size_t *nlist)
{
  struct listing l = {0};
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  kcr_obj **objs;
  size_t n;
  bool eq = true;

  itest_expect(KCR_OK,
               kcr_list_each(cl, &(struct kcr_ref){&itest_configmaps, ns}, NULL, add_pair,
                             &l, NULL, &ei),
               &ei);
  assert_int_equal(KCR_OK, kcr_store_ref_all(kcr_informer_store(inf), &objs, &n));
  *nlist = l.n;
  if(n != l.n) {
    eq = false;
  } else {
    struct pair *s = calloc(n ? n : 1, sizeof(*s));
    for(size_t i = 0; i < n; i++) {
      snprintf(s[i].name, sizeof(s[i].name), "%s", kcr_obj_name(objs[i]));
      snprintf(s[i].rv, sizeof(s[i].rv), "%s", kcr_obj_rv(objs[i]));
    }
    qsort(s, n, sizeof(*s), cmp_pair);
    qsort(l.p, n, sizeof(*s), cmp_pair);
    for(size_t i = 0; i < n && eq; i++)
      eq = !strcmp(s[i].name, l.p[i].name) && !strcmp(s[i].rv, l.p[i].rv);
    free(s);
  }
  kcr_objs_unref(objs, n);
  free(l.p);
  kcr_errinfo_cleanup(&ei);
  return eq;
}

static void wait_equal(kcr_informer *inf, const char *ns, size_t want)
{
  size_t n = 0;
  bool eq = false;
  for(int i = 0; i < 300 && !(eq = store_equals_list(inf, ns, &n)); i++)
    itest_sleep_ms(100);
  assert_true(eq);
  assert_int_equal(want, n);
}

struct churn {
  const char *ns;
  int first, count;
  char op; /* 'c'reate, 'u'pdate, 'd'elete */
};

static cJSON *configmap(const char *name, int v)
{
  return itest_json("{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":"
                    "{\"name\":\"%s\"},\"data\":{\"v\":\"%d\",\"payload\":\"%0200d\"}}",
                    name, v, v);
}

static const char upd[] = "{\"data\":{\"v\":\"changed\"}}";

static void *churn_run(void *p)
{
  struct churn *c = p;
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  for(int i = c->first; i < c->first + c->count; i++) {
    char name[32];
    snprintf(name, sizeof(name), "cm-%05d", i);
    struct kcr_ref coll = {&itest_configmaps, c->ns},
                   one = {&itest_configmaps, c->ns, name};
    cJSON *o = configmap(name, i);
    kcr_err rc = KCR_OK;
    if(c->op == 'c')
      rc = kcr_create(cl, &coll, o, NULL, NULL, &ei);
    else if(c->op == 'u')
      rc = kcr_patch(cl, &one, &(struct kcr_patch_opts){KCR_PATCH_MERGE}, upd,
                     strlen(upd), NULL, &ei);
    else
      rc = kcr_delete(cl, &one, NULL, NULL, &ei);
    /* Not itest_expect: cmocka's asserts only work on the test's thread. */
    if(rc)
      TCHECK_FAIL("%c %s: %s: %s", c->op, name, kcr_err_name(rc),
                  ei.message ? ei.message : "");
    cJSON_Delete(o);
  }
  kcr_errinfo_cleanup(&ei);
  return NULL;
}

static void run_parallel(struct churn *jobs, int n)
{
  pthread_t th[8];
  for(int i = 0; i < n; i++)
    pthread_create(&th[i], NULL, churn_run, &jobs[i]);
  for(int i = 0; i < n; i++)
    pthread_join(th[i], NULL);
  tcheck_report();
}

static void converges_on_2000_objects_under_churn(void **state)
{
  char *ns = itest_namespace(cl, "inf");
  struct counts c = {.mu = PTHREAD_MUTEX_INITIALIZER};
  struct churn seed[4] = {
      {ns, 0, 500, 'c'}, {ns, 500, 500, 'c'}, {ns, 1000, 500, 'c'}, {ns, 1500, 500, 'c'}};
  run_parallel(seed, 4);

  kcr_informer *inf = start_informer(ns, &c, 0);
  assert_int_equal(2000, kcr_store_len(kcr_informer_store(inf)));
  assert_int_equal(2000, atomic_load(&c.adds));

  /* Concurrently: 300 creates, 300 updates, 300 deletes. */
  struct churn jobs[3] = {{ns, 2000, 300, 'c'}, {ns, 0, 300, 'u'}, {ns, 1000, 300, 'd'}};
  run_parallel(jobs, 3);
  wait_equal(inf, ns, 2000);
  assert_int_equal(2300, atomic_load(&c.adds));
  assert_int_equal(300, atomic_load(&c.deletes));
  assert_int_equal(300, atomic_load(&c.updates));
  assert_true(kcr_store_bytes(kcr_informer_store(inf)) > 2000 * 200);

  /* The cache holds compact text without managedFields. */
  kcr_obj *o = kcr_store_ref(kcr_informer_store(inf), ns, "cm-00001");
  assert_non_null(o);
  assert_null(strstr(kcr_obj_json(o, NULL), "managedFields"));
  cJSON *t;
  assert_int_equal(KCR_OK, kcr_obj_parse(o, &t));
  assert_string_equal("changed", kcr_json_str(t, "/data/v"));
  cJSON_Delete(t);
  kcr_obj_unref(o);

  kcr_informer_free(inf);
  itest_namespace_drop(cl, ns);
}

/* An informer of several namespaces (namespaces) or of those sel selects,
 * with c's handlers, started and synced. */
/* Namespace sets with one filtered cluster watch (opts.cluster_watch)
 * instead of a watch per namespace: the tests of sets run both ways. */
static bool cluster_watch;

static kcr_informer *start_multi(const char *const *namespaces, const char *sel,
                                 struct counts *c)
{
  kcr_informer *inf;
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  struct kcr_informer_opts o = {.client = cl,
                                .gvr = &itest_configmaps,
                                .namespaces = namespaces,
                                .namespace_selector = sel,
                                .cluster_watch = cluster_watch,
                                .page_size = 2};
  struct kcr_informer_handlers h = {on_add, on_update, on_delete, c};
  itest_expect(KCR_OK, kcr_informer_new(&o, &inf, &ei), &ei);
  assert_int_equal(KCR_OK, kcr_informer_add_handlers(inf, &h));
  assert_int_equal(KCR_OK, kcr_informer_start(inf));
  assert_true(kcr_informer_wait_synced(inf, 60000));
  kcr_errinfo_cleanup(&ei);
  return inf;
}

/* The store's objects of namespace ns. */
static int count_ns(kcr_informer *inf, const char *ns)
{
  kcr_obj **objs;
  size_t n;
  int k = 0;
  assert_int_equal(KCR_OK, kcr_store_ref_all(kcr_informer_store(inf), &objs, &n));
  for(size_t i = 0; i < n; i++)
    k += !strcmp(kcr_obj_ns(objs[i]), ns);
  kcr_objs_unref(objs, n);
  return k;
}

/* Waits up to 30 s for the store to hold want objects of ns. */
static void wait_ns(kcr_informer *inf, const char *ns, int want)
{
  for(int i = 0; i < 300 && count_ns(inf, ns) != want; i++)
    itest_sleep_ms(100);
  assert_int_equal(want, count_ns(inf, ns));
}

static void deletes_missed_while_down_are_found_by_relist(void **state)
{
  char *ns = itest_namespace(cl, "gone");
  struct counts c = {.mu = PTHREAD_MUTEX_INITIALIZER};
  struct churn seed = {ns, 0, 20, 'c'};
  struct kcr_informer_stats st;
  run_parallel(&seed, 1);
  kcr_informer *inf = start_informer(ns, &c, 0);
  assert_int_equal(20, kcr_store_len(kcr_informer_store(inf)));
  /* Beside it, an informer of ns and a second namespace in one store:
   * its relist of ns must find the same three, and keep ns2's objects. */
  char *ns2 = itest_namespace(cl, "gone2");
  struct counts c2 = {.mu = PTHREAD_MUTEX_INITIALIZER};
  struct churn seed2 = {ns2, 0, 5, 'c'};
  run_parallel(&seed2, 1);
  kcr_informer *multi = start_multi((const char *[]){ns, ns2, NULL}, NULL, &c2);
  assert_int_equal(25, kcr_store_len(kcr_informer_store(multi)));

  /* The apiserver goes away; while it is down, three objects are removed
   * behind its back (straight from etcd) and history is compacted. */
  itest_controlplane("--stop-only");
  for(int i = 0; i < 3; i++) {
    char key[128], b64[256], body[300];
    snprintf(key, sizeof(key), "/registry/configmaps/%s/cm-%05d", ns, i);
    kcr_err rc = KCR_OK;
    /* base64 with the shell's help would be cheating nothing; do it here. */
    static const char tbl[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t len = strlen(key), j = 0;
    for(size_t k = 0; k < len; k += 3) {
      unsigned v = (unsigned char)key[k] << 16;
      if(k + 1 < len)
        v |= (unsigned char)key[k + 1] << 8;
      if(k + 2 < len)
        v |= (unsigned char)key[k + 2];
      b64[j++] = tbl[(v >> 18) & 63];
      b64[j++] = tbl[(v >> 12) & 63];
      b64[j++] = k + 1 < len ? tbl[(v >> 6) & 63] : '=';
      b64[j++] = k + 2 < len ? tbl[v & 63] : '=';
    }
    b64[j] = '\0';
    snprintf(body, sizeof(body), "{\"key\":\"%s\"}", b64);
    cJSON *r = itest_etcd("/v3/kv/deleterange", body);
    assert_string_equal("1", kcr_json_str(r, "/deleted"));
    cJSON_Delete(r);
    (void)rc;
  }
  itest_etcd_compact();
  itest_controlplane("--start-only");

  /* The informer re-watches from its old resourceVersion, gets 410, lists
   * again, and emits deletes for exactly the three vanished objects. */
  wait_equal(inf, ns, 17);
  for(int i = 0; i < 100 && atomic_load(&c.deletes) < 3; i++)
    itest_sleep_ms(100);
  assert_int_equal(3, atomic_load(&c.deletes));
  pthread_mutex_lock(&c.mu);
  qsort(c.deleted, (size_t)c.ndeleted, sizeof(c.deleted[0]),
        (int (*)(const void *, const void *))strcmp);
  assert_string_equal("cm-00000", c.deleted[0]);
  assert_string_equal("cm-00001", c.deleted[1]);
  assert_string_equal("cm-00002", c.deleted[2]);
  pthread_mutex_unlock(&c.mu);
  kcr_informer_get_stats(inf, &st);
  assert_true(st.relists_gone >= 1);
  assert_true(st.lists + st.stream_lists >= 2); /* the first and the relist */
  for(int i = 0; i < 100 && (atomic_load(&c2.deletes) < 3 ||
                             kcr_store_len(kcr_informer_store(multi)) != 22);
      i++)
    itest_sleep_ms(100);
  assert_int_equal(3, atomic_load(&c2.deletes));
  assert_int_equal(22, kcr_store_len(kcr_informer_store(multi)));
  assert_int_equal(5, count_ns(multi, ns2));
  pthread_mutex_lock(&c2.mu);
  qsort(c2.deleted, (size_t)c2.ndeleted, sizeof(c2.deleted[0]),
        (int (*)(const void *, const void *))strcmp);
  assert_string_equal("cm-00002", c2.deleted[2]);
  pthread_mutex_unlock(&c2.mu);
  kcr_informer_free(multi);
  itest_namespace_drop(cl, ns2);

  /* And it keeps working: a new object arrives through the new watch. */
  struct churn more = {ns, 100, 1, 'c'};
  run_parallel(&more, 1);
  wait_equal(inf, ns, 18);

  kcr_informer_free(inf);
  itest_namespace_drop(cl, ns);
}

static void resync_replays_every_object(void **state)
{
  char *ns = itest_namespace(cl, "resync");
  struct counts c = {.mu = PTHREAD_MUTEX_INITIALIZER};
  struct churn seed = {ns, 0, 5, 'c'};
  run_parallel(&seed, 1);
  kcr_informer *inf = start_informer(ns, &c, 300);
  for(int i = 0; i < 100 && atomic_load(&c.resyncs) < 10; i++)
    itest_sleep_ms(50);
  assert_true(atomic_load(&c.resyncs) >= 10); /* two rounds of 5 */
  assert_int_equal(0, atomic_load(&c.updates));
  kcr_informer_free(inf);
  itest_namespace_drop(cl, ns);
}

/* The object at ns/name in inf's store, parsed, once its resourceVersion
 * is rv (NULL: any); fails the test after 30 s. */
static cJSON *cached_at(kcr_informer *inf, const char *ns, const char *name,
                        const char *rv)
{
  cJSON *t = NULL;
  for(int i = 0; i < 300 && !t; i++) {
    kcr_obj *o = kcr_store_ref(kcr_informer_store(inf), ns, name);
    if(o && (!rv || !strcmp(rv, kcr_obj_rv(o))))
      assert_int_equal(KCR_OK, kcr_obj_parse(o, &t));
    kcr_obj_unref(o);
    if(!t)
      itest_sleep_ms(100);
  }
  assert_non_null(t);
  return t;
}

/* An informer with a keep-list stores, for listed and watched objects
 * alike, only the members listed and the metadata the runtime needs - and
 * costs less than one that stores whole objects. */
static void a_keep_list_stores_only_those_fields(void **state)
{
  char *ns = itest_namespace(cl, "keep");
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  struct kcr_ref coll = {&itest_configmaps, ns}, a = {&itest_configmaps, ns, "a"};
  cJSON *owner = NULL, *made = NULL, *t;
  kcr_informer *proj, *whole;
  char rv[32];
  static const char patch[] =
      "{\"metadata\":{\"annotations\":{\"n\":\"2\"}},\"data\":{\"k\":\"w\"}}";

  cJSON *cm = itest_json("{\"metadata\":{\"name\":\"owner\"}}");
  itest_expect(KCR_OK, kcr_create(cl, &coll, cm, NULL, &owner, &ei), &ei);
  cJSON_Delete(cm);
  cm = itest_json(
      "{\"metadata\":{\"name\":\"a\",\"labels\":{\"l\":\"1\"},"
      "\"annotations\":{\"n\":\"1\"},\"finalizers\":[\"test.kcr.io/keep\"],"
      "\"ownerReferences\":[{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\","
      "\"name\":\"owner\",\"uid\":\"%s\",\"controller\":true}]},"
      "\"data\":{\"k\":\"v\",\"big\":\"%0500d\"},\"binaryData\":{\"b\":\"AAAA\"}}",
      kcr_json_str(owner, "/metadata/uid"), 0);
  itest_expect(KCR_OK, kcr_create(cl, &coll, cm, NULL, &made, &ei), &ei);
  cJSON_Delete(cm);
  assert_int_equal(KCR_OK,
                   kcr_informer_new(
                       &(struct kcr_informer_opts){
                           .client = cl,
                           .gvr = &itest_configmaps,
                           .ns = ns,
                           .keep = (const char *[]){"/data", "/metadata/labels", NULL}},
                       &proj, NULL));
  assert_int_equal(KCR_OK, kcr_informer_new(
                               &(struct kcr_informer_opts){
                                   .client = cl, .gvr = &itest_configmaps, .ns = ns},
                               &whole, NULL));
  assert_int_equal(KCR_OK, kcr_informer_start(proj));
  assert_int_equal(KCR_OK, kcr_informer_start(whole));
  assert_true(kcr_informer_wait_synced(proj, 60000));
  assert_true(kcr_informer_wait_synced(whole, 60000));

  /* listed */
  t = cached_at(proj, ns, "a", kcr_json_str(made, "/metadata/resourceVersion"));
  assert_string_equal("v", kcr_json_str(t, "/data/k"));
  assert_string_equal("1", kcr_json_str(t, "/metadata/labels/l"));
  assert_string_equal(kcr_json_str(made, "/metadata/uid"),
                      kcr_json_str(t, "/metadata/uid"));
  assert_non_null(kcr_json_at(t, "/metadata/ownerReferences"));
  assert_null(kcr_json_at(t, "/metadata/annotations"));
  assert_null(kcr_json_at(t, "/metadata/finalizers"));
  assert_null(kcr_json_at(t, "/metadata/creationTimestamp"));
  assert_null(kcr_json_at(t, "/metadata/managedFields"));
  assert_null(kcr_json_at(t, "/binaryData"));
  cJSON_Delete(t);
  kcr_obj *o = kcr_store_ref(kcr_informer_store(proj), ns, "a");
  assert_string_equal(kcr_json_str(owner, "/metadata/uid"), kcr_obj_controller(o)->uid);
  kcr_obj_unref(o);
  /* The owner (no labels) too, and the whole objects cost more. */
  t = cached_at(proj, ns, "owner", NULL);
  assert_null(kcr_json_at(t, "/metadata/labels"));
  cJSON_Delete(t);
  assert_int_equal(2, kcr_store_len(kcr_informer_store(proj)));
  assert_true(kcr_store_bytes(kcr_informer_store(proj)) <
              kcr_store_bytes(kcr_informer_store(whole)));

  /* watched */
  cJSON_Delete(made);
  made = NULL;
  itest_expect(KCR_OK,
               kcr_patch(cl, &a, &(struct kcr_patch_opts){KCR_PATCH_MERGE}, patch,
                         strlen(patch), &made, &ei),
               &ei);
  snprintf(rv, sizeof(rv), "%s", kcr_json_str(made, "/metadata/resourceVersion"));
  t = cached_at(proj, ns, "a", rv);
  assert_string_equal("w", kcr_json_str(t, "/data/k"));
  assert_null(kcr_json_at(t, "/metadata/annotations"));
  assert_null(kcr_json_at(t, "/binaryData"));
  cJSON_Delete(t);
  t = cached_at(whole, ns, "a", rv); /* what the other one has */
  assert_string_equal("2", kcr_json_str(t, "/metadata/annotations/n"));
  assert_non_null(kcr_json_at(t, "/binaryData"));
  cJSON_Delete(t);

  /* let it go: drop the finalizer */
  static const char unfin[] = "{\"metadata\":{\"finalizers\":null}}";
  itest_expect(KCR_OK,
               kcr_patch(cl, &a, &(struct kcr_patch_opts){KCR_PATCH_MERGE}, unfin,
                         strlen(unfin), NULL, &ei),
               &ei);
  kcr_informer_free(proj);
  kcr_informer_free(whole);
  cJSON_Delete(made);
  cJSON_Delete(owner);
  kcr_errinfo_cleanup(&ei);
  itest_namespace_drop(cl, ns);
}

/* A metadata-only informer: listed and watched objects are
 * meta.k8s.io/v1 PartialObjectMetadata, with labels, annotations and
 * owners but neither data nor managedFields; its store holds a fraction of
 * a full informer's bytes for 32 KiB ConfigMaps; deletes arrive. The same
 * through kcr_list_each (a PartialObjectMetadataList). */
static kcr_err note_partial(const cJSON *item, void *ud)
{
  int *n = ud;
  if(!strcmp("PartialObjectMetadata", kcr_json_str(item, "/kind")) &&
     !kcr_json_at(item, "/data") && kcr_json_str(item, "/metadata/labels/l"))
    (*n)++;
  return KCR_OK;
}

static void a_metadata_only_informer_holds_metadata(void **state)
{
  char *ns = itest_namespace(cl, "meta");
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  struct kcr_ref coll = {&itest_configmaps, ns}, a = {&itest_configmaps, ns, "cm-0"};
  kcr_informer *meta, *whole;
  cJSON *made = NULL, *t;
  char rv[32];
  int partial = 0;
  static const char patch[] = "{\"metadata\":{\"annotations\":{\"n\":\"2\"}},"
                              "\"data\":{\"k\":\"changed\"}}";

  for(int i = 0; i < 8; i++) {
    cJSON *cm =
        itest_json("{\"metadata\":{\"name\":\"cm-%d\",\"labels\":{\"l\":\"%d\"},"
                   "\"annotations\":{\"n\":\"1\"}},\"data\":{\"k\":\"%032768d\"}}",
                   i, i, i);
    itest_expect(KCR_OK, kcr_create(cl, &coll, cm, NULL, NULL, &ei), &ei);
    cJSON_Delete(cm);
  }
  itest_expect(KCR_OK,
               kcr_list_each(cl, &coll, &(struct kcr_list_opts){.metadata_only = true},
                             note_partial, &partial, NULL, &ei),
               &ei);
  assert_int_equal(8, partial);
  assert_int_equal(KCR_OK,
                   kcr_informer_new(&(struct kcr_informer_opts){.client = cl,
                                                                .gvr = &itest_configmaps,
                                                                .ns = ns,
                                                                .metadata_only = true},
                                    &meta, NULL));
  assert_int_equal(KCR_OK, kcr_informer_new(
                               &(struct kcr_informer_opts){
                                   .client = cl, .gvr = &itest_configmaps, .ns = ns},
                               &whole, NULL));
  assert_int_equal(KCR_OK, kcr_informer_start(meta));
  assert_int_equal(KCR_OK, kcr_informer_start(whole));
  assert_true(kcr_informer_wait_synced(meta, 60000));
  assert_true(kcr_informer_wait_synced(whole, 60000));

  /* listed */
  assert_int_equal(8, kcr_store_len(kcr_informer_store(meta)));
  t = cached_at(meta, ns, "cm-3", NULL);
  assert_string_equal("meta.k8s.io/v1", kcr_json_str(t, "/apiVersion"));
  assert_string_equal("PartialObjectMetadata", kcr_json_str(t, "/kind"));
  assert_string_equal("3", kcr_json_str(t, "/metadata/labels/l"));
  assert_string_equal("1", kcr_json_str(t, "/metadata/annotations/n"));
  assert_non_null(kcr_json_str(t, "/metadata/uid"));
  assert_null(kcr_json_at(t, "/data"));
  assert_null(kcr_json_at(t, "/metadata/managedFields"));
  cJSON_Delete(t);
  /* 8 x 32 KiB of data in the full cache, none in this one */
  assert_true(kcr_store_bytes(kcr_informer_store(meta)) * 20 <
              kcr_store_bytes(kcr_informer_store(whole)));

  /* watched: an update, then a delete */
  itest_expect(KCR_OK,
               kcr_patch(cl, &a, &(struct kcr_patch_opts){KCR_PATCH_MERGE}, patch,
                         strlen(patch), &made, &ei),
               &ei);
  snprintf(rv, sizeof(rv), "%s", kcr_json_str(made, "/metadata/resourceVersion"));
  t = cached_at(meta, ns, "cm-0", rv);
  assert_string_equal("PartialObjectMetadata", kcr_json_str(t, "/kind"));
  assert_string_equal("2", kcr_json_str(t, "/metadata/annotations/n"));
  assert_null(kcr_json_at(t, "/data"));
  cJSON_Delete(t);
  itest_expect(KCR_OK, kcr_delete(cl, &a, NULL, NULL, &ei), &ei);
  for(int i = 0; i < 300 && kcr_store_len(kcr_informer_store(meta)) != 7; i++)
    itest_sleep_ms(100);
  assert_int_equal(7, kcr_store_len(kcr_informer_store(meta)));

  kcr_informer_free(meta);
  kcr_informer_free(whole);
  cJSON_Delete(made);
  kcr_errinfo_cleanup(&ei);
  itest_namespace_drop(cl, ns);
}

static kcr_err note_mf(const cJSON *item, void *ud)
{
  *(int *)ud += kcr_json_at(item, "/metadata/managedFields") != NULL;
  return KCR_OK;
}

/* Server-side-applied objects come with managedFields. A LIST with
 * drop_managed_fields leaves them out of every item, and so does the
 * informer's (which keeps none in its store); without the option, and in
 * an informer with keep_managed_fields, they are there. */
static void listed_objects_come_without_managed_fields(void **state)
{
  char *ns = itest_namespace(cl, "listmf");
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  struct kcr_ref coll = {&itest_configmaps, ns};
  kcr_informer *dropping, *keeping;
  int with = 0, without = 0;
  cJSON *t;

  for(int i = 0; i < 3; i++) {
    char name[8];
    snprintf(name, sizeof(name), "ssa-%d", i);
    struct kcr_ref one = {&itest_configmaps, ns, name};
    cJSON *cm = itest_json("{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":"
                           "{\"name\":\"%s\",\"labels\":{\"l\":\"%d\"}},"
                           "\"data\":{\"k\":\"v%d\"}}",
                           name, i, i);
    itest_expect(KCR_OK,
                 kcr_apply(cl, &one, cm,
                           &(struct kcr_apply_opts){.field_manager = "kcr-test-listmf"},
                           NULL, &ei),
                 &ei);
    cJSON_Delete(cm);
  }
  /* kcr_list_each, two pages and a bit */
  itest_expect(KCR_OK,
               kcr_list_each(cl, &coll, &(struct kcr_list_opts){.limit = 1}, note_mf,
                             &with, NULL, &ei),
               &ei);
  itest_expect(
      KCR_OK,
      kcr_list_each(cl, &coll,
                    &(struct kcr_list_opts){.limit = 2, .drop_managed_fields = true},
                    note_mf, &without, NULL, &ei),
      &ei);
  assert_int_equal(3, with);
  assert_int_equal(0, without);
  /* the informers' lists */
  assert_int_equal(KCR_OK, kcr_informer_new(
                               &(struct kcr_informer_opts){
                                   .client = cl, .gvr = &itest_configmaps, .ns = ns},
                               &dropping, NULL));
  assert_int_equal(
      KCR_OK, kcr_informer_new(&(struct kcr_informer_opts){.client = cl,
                                                           .gvr = &itest_configmaps,
                                                           .ns = ns,
                                                           .keep_managed_fields = true},
                               &keeping, NULL));
  assert_int_equal(KCR_OK, kcr_informer_start(dropping));
  assert_int_equal(KCR_OK, kcr_informer_start(keeping));
  assert_true(kcr_informer_wait_synced(dropping, 60000));
  assert_true(kcr_informer_wait_synced(keeping, 60000));
  assert_int_equal(3, kcr_store_len(kcr_informer_store(dropping)));
  t = cached_at(dropping, ns, "ssa-1", NULL);
  assert_null(kcr_json_at(t, "/metadata/managedFields"));
  assert_string_equal("v1", kcr_json_str(t, "/data/k"));
  assert_string_equal("1", kcr_json_str(t, "/metadata/labels/l"));
  cJSON_Delete(t);
  t = cached_at(keeping, ns, "ssa-1", NULL);
  assert_string_equal(
      "kcr-test-listmf",
      kcr_json_str(cJSON_GetArrayItem(kcr_json_at(t, "/metadata/managedFields"), 0),
                   "/manager"));
  assert_string_equal("v1", kcr_json_str(t, "/data/k"));
  cJSON_Delete(t);
  kcr_informer_free(dropping);
  kcr_informer_free(keeping);
  kcr_errinfo_cleanup(&ei);
  itest_namespace_drop(cl, ns);
}

/* The lists an informer made, streamed or paged. */
static uint64_t lists_made(kcr_informer *inf)
{
  struct kcr_informer_stats st;
  kcr_informer_get_stats(inf, &st);
  return st.lists + st.stream_lists;
}

/* Its list-and-watch loops: one per namespace, or one cluster watch. (Not
 * its lists: a streaming list that falls back to a paged one, or a list
 * retried after a failure, counts twice.) */
static uint64_t feeds(kcr_informer *inf)
{
  struct kcr_informer_stats st;
  kcr_informer_get_stats(inf, &st);
  return st.feeds;
}

/* An informer of two namespaces out of three: one store with the objects
 * of both, listed and watched per namespace (or with one cluster watch,
 * filtered); nothing of the third, not even its deletes. */
static void several_namespaces(void)
{
  char *a = itest_namespace(cl, "nsa"), *b = itest_namespace(cl, "nsb"),
       *x = itest_namespace(cl, "nsx");
  struct counts c = {.mu = PTHREAD_MUTEX_INITIALIZER};
  struct churn seed[] = {{a, 0, 3, 'c'}, {b, 0, 4, 'c'}, {x, 0, 5, 'c'}};
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  kcr_informer *bad;

  run_parallel(seed, 3);
  /* a twice: one feed */
  kcr_informer *inf = start_multi((const char *[]){b, a, a, NULL}, NULL, &c);
  assert_int_equal(7, kcr_store_len(kcr_informer_store(inf)));
  assert_int_equal(3, count_ns(inf, a));
  assert_int_equal(4, count_ns(inf, b));
  assert_int_equal(7, atomic_load(&c.adds));
  assert_true(kcr_informer_selects_namespace(inf, a));
  assert_true(kcr_informer_selects_namespace(inf, b));
  assert_false(kcr_informer_selects_namespace(inf, x));
  assert_int_equal(cluster_watch ? 1 : 2, feeds(inf));

  struct churn more[] = {
      {a, 10, 2, 'c'}, {b, 0, 1, 'd'}, {x, 10, 3, 'c'}, {x, 0, 1, 'd'}};
  run_parallel(more, 4);
  wait_ns(inf, a, 5);
  wait_ns(inf, b, 3);
  assert_int_equal(0, count_ns(inf, x));
  for(int i = 0; i < 100 && atomic_load(&c.deletes) < 1; i++)
    itest_sleep_ms(100);
  assert_int_equal(1, atomic_load(&c.deletes));
  assert_int_equal(9, atomic_load(&c.adds));
  assert_int_equal(cluster_watch ? 1 : 2, feeds(inf));
  kcr_informer_free(inf);

  /* Options that do not go together, named. */
  assert_int_equal(KCR_EINVAL, kcr_informer_new(
                                   &(struct kcr_informer_opts){
                                       .client = cl,
                                       .gvr = &itest_configmaps,
                                       .ns = a,
                                       .namespaces = (const char *[]){b, NULL}},
                                   &bad, &ei));
  assert_non_null(strstr(ei.message, "ns and namespaces"));
  assert_int_equal(
      KCR_EINVAL,
      kcr_informer_new(&(struct kcr_informer_opts){.client = cl,
                                                   .gvr = &itest_configmaps,
                                                   .namespaces = (const char *[]){NULL}},
                       &bad, &ei));
  assert_non_null(strstr(ei.message, "namespaces is empty"));
  assert_int_equal(
      KCR_EINVAL,
      kcr_informer_new(&(struct kcr_informer_opts){.client = cl,
                                                   .gvr = &itest_namespaces,
                                                   .namespace_selector = "a=b"},
                       &bad, &ei));
  assert_non_null(strstr(ei.message, "not namespaced"));
  assert_int_equal(KCR_EINVAL,
                   kcr_informer_new(&(struct kcr_informer_opts){.client = cl,
                                                                .gvr = &itest_configmaps,
                                                                .ns = a,
                                                                .cluster_watch = true},
                                    &bad, &ei));
  assert_non_null(strstr(ei.message, "cluster_watch filters a set of namespaces"));
  kcr_errinfo_cleanup(&ei);
  itest_namespace_drop(cl, a);
  itest_namespace_drop(cl, b);
  itest_namespace_drop(cl, x);
}

static void several_namespaces_share_one_store(void **state)
{
  cluster_watch = false;
  several_namespaces();
}

static void several_namespaces_with_one_filtered_cluster_watch(void **state)
{
  cluster_watch = true;
  several_namespaces();
}

/* Sets or removes label kcr-sel=<v> on namespace ns. */
static void label_ns(const char *ns, const char *v)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  char body[256];
  snprintf(body, sizeof(body), "{\"metadata\":{\"labels\":{\"kcr-sel\":%s%s%s}}}",
           v ? "\"" : "", v ? v : "null", v ? "\"" : "");
  itest_expect(KCR_OK,
               kcr_patch(cl, &(struct kcr_ref){&itest_namespaces, NULL, ns},
                         &(struct kcr_patch_opts){KCR_PATCH_MERGE}, body, strlen(body),
                         NULL, &ei),
               &ei);
  kcr_errinfo_cleanup(&ei);
}

/* Namespaces chosen by a label selector and followed as the label comes
 * and goes: a namespace that gains it is listed and watched (with one
 * cluster watch: the watch lists again), one that loses it leaves the
 * cache without on_delete. */
static void namespace_selector(void)
{
  char *a = itest_namespace(cl, "sela"), *b = itest_namespace(cl, "selb");
  struct counts c = {.mu = PTHREAD_MUTEX_INITIALIZER};
  struct churn seed[] = {{a, 0, 3, 'c'}, {b, 0, 4, 'c'}};
  char sel[64], v[32];

  snprintf(v, sizeof(v), "%08x", (unsigned)rand() ^ (unsigned)getpid());
  snprintf(sel, sizeof(sel), "kcr-sel=%s", v);
  run_parallel(seed, 2);
  label_ns(a, v);
  kcr_informer *inf = start_multi(NULL, sel, &c);
  assert_int_equal(3, kcr_store_len(kcr_informer_store(inf)));
  assert_true(kcr_informer_selects_namespace(inf, a));
  assert_false(kcr_informer_selects_namespace(inf, b));
  /* (with one cluster watch: not before the namespaces are known) */
  assert_int_equal(1, feeds(inf));
  uint64_t lists0 = lists_made(inf);

  /* b gains the label: listed, then watched */
  label_ns(b, v);
  wait_ns(inf, b, 4);
  assert_true(kcr_informer_selects_namespace(inf, b));
  assert_int_equal(cluster_watch ? 1 : 2, feeds(inf));
  assert_true(lists_made(inf) >
              lists0); /* b listed (with one cluster watch: all again) */
  assert_int_equal(7, atomic_load(&c.adds)); /* a's not told again */
  struct churn more = {b, 10, 2, 'c'};
  run_parallel(&more, 1);
  wait_ns(inf, b, 6);

  /* a loses it: its objects leave, no on_delete; and nothing more of a
   * arrives */
  label_ns(a, NULL);
  wait_ns(inf, a, 0);
  assert_false(kcr_informer_selects_namespace(inf, a));
  assert_int_equal(0, atomic_load(&c.deletes));
  struct churn late = {a, 10, 2, 'c'};
  run_parallel(&late, 1);
  itest_sleep_ms(500);
  assert_int_equal(0, count_ns(inf, a));
  assert_int_equal(6, kcr_store_len(kcr_informer_store(inf)));

  /* and back */
  label_ns(a, v);
  wait_ns(inf, a, 5);
  kcr_informer_free(inf);
  itest_namespace_drop(cl, a);
  itest_namespace_drop(cl, b);
}

static void a_namespace_selector_follows_labels(void **state)
{
  cluster_watch = false;
  namespace_selector();
}

static void a_namespace_selector_with_one_filtered_cluster_watch(void **state)
{
  cluster_watch = true;
  namespace_selector();
}

/* Lists are streamed by default (sendInitialEvents, the apiserver's
 * WatchList): no LIST is made. Where the gate is off (the apiserver
 * restarted with --feature-gates=WatchList=false), the streaming list is
 * refused with 422 and the informer lists in pages, counts the fallback,
 * and syncs all the same; an informer made before keeps working across
 * the restart; with the gate back on, streaming again. */
static void lists_are_streamed_and_paged_where_the_server_cannot(void **state)
{
  char *ns = itest_namespace(cl, "wlist");
  struct counts c = {.mu = PTHREAD_MUTEX_INITIALIZER};
  struct churn seed = {ns, 0, 6, 'c'};
  struct kcr_informer_stats st;
  kcr_informer *streamed, *paged, *again;

  run_parallel(&seed, 1);
  streamed = start_informer(ns, &c, 0);
  assert_int_equal(6, kcr_store_len(kcr_informer_store(streamed)));
  kcr_informer_get_stats(streamed, &st);
  assert_int_equal(1, st.stream_lists);
  assert_int_equal(0, st.lists);
  assert_int_equal(0, st.list_fallbacks);

  itest_controlplane("--arg --feature-gates=WatchList=false");
  paged = start_informer(ns, &c, 0);
  assert_int_equal(6, kcr_store_len(kcr_informer_store(paged)));
  kcr_informer_get_stats(paged, &st);
  assert_int_equal(1, st.stream_lists);
  assert_int_equal(1, st.list_fallbacks);
  assert_int_equal(1, st.lists);
  struct churn more = {ns, 10, 2, 'c'};
  run_parallel(&more, 1);
  wait_equal(streamed, ns, 8); /* across the restart */
  wait_equal(paged, ns, 8);

  itest_controlplane(""); /* the gate back on */
  again = start_informer(ns, &c, 0);
  kcr_informer_get_stats(again, &st);
  assert_int_equal(0, st.list_fallbacks);
  assert_int_equal(0, st.lists);
  assert_int_equal(8, kcr_store_len(kcr_informer_store(again)));
  kcr_informer_free(streamed);
  kcr_informer_free(paged);
  kcr_informer_free(again);
  itest_namespace_drop(cl, ns);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(converges_on_2000_objects_under_churn),
      cmocka_unit_test(deletes_missed_while_down_are_found_by_relist),
      cmocka_unit_test(resync_replays_every_object),
      cmocka_unit_test(a_keep_list_stores_only_those_fields),
      cmocka_unit_test(listed_objects_come_without_managed_fields),
      cmocka_unit_test(a_metadata_only_informer_holds_metadata),
      cmocka_unit_test(several_namespaces_share_one_store),
      cmocka_unit_test(several_namespaces_with_one_filtered_cluster_watch),
      cmocka_unit_test(a_namespace_selector_follows_labels),
      cmocka_unit_test(a_namespace_selector_with_one_filtered_cluster_watch),
      cmocka_unit_test(lists_are_streamed_and_paged_where_the_server_cannot),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
