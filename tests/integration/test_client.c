/* The REST client against the real kube-apiserver: CRUD of ConfigMaps and of
 * a custom resource with a status subresource, optimistic concurrency with
 * the server's exact message, merge patch and server-side apply on /status,
 * deletes with preconditions, list paging over 1,000 objects,
 * tls-server-name (requests and watches), how pooled connections are
 * set up, which requests go through a proxy, and server-side apply of a
 * typed object (kcr_typed_apply through the generated core_v1_config_map_apply). */
#include <openssl/ssl.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "itest.h"
#include "k8s.h"
#include "kube/client-int.h"
#include "tenv.h"

ITEST_NAMESPACE_FIXTURE("client", true)

static cJSON *configmap(const char *name, const char *value)
{
  return itest_json("{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":"
                    "{\"name\":\"%s\",\"labels\":{\"app\":\"kcr-test\"}},"
                    "\"data\":{\"k\":\"%s\"}}",
                    name, value);
}

static void configmap_crud(void **state)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  struct kcr_ref coll = {&itest_configmaps, ns}, one = {&itest_configmaps, ns, "cm1"};
  cJSON *obj = configmap("cm1", "v1"), *got = NULL, *upd = NULL;

  itest_expect(KCR_OK, kcr_create(cl, &coll, obj, NULL, &got, &ei), &ei);
  assert_string_equal("cm1", kcr_json_str(got, "/metadata/name"));
  assert_string_equal(ns, kcr_json_str(got, "/metadata/namespace"));
  assert_non_null(kcr_json_str(got, "/metadata/uid"));
  cJSON_Delete(got);

  /* A second create of the same name is AlreadyExists, not a conflict. */
  itest_expect(KCR_EEXIST, kcr_create(cl, &coll, obj, NULL, NULL, &ei), &ei);
  assert_int_equal(409, ei.code);
  assert_string_equal("AlreadyExists", ei.reason);

  itest_expect(KCR_OK, kcr_get(cl, &one, &got, &ei), &ei);
  assert_string_equal("v1", kcr_json_str(got, "/data/k"));

  /* Update with the current resourceVersion succeeds and moves it. */
  kcr_json_set_str(got, "/data/k", "v2");
  itest_expect(KCR_OK, kcr_update(cl, &one, got, NULL, &upd, &ei), &ei);
  assert_string_equal("v2", kcr_json_str(upd, "/data/k"));
  assert_string_not_equal(kcr_json_str(got, "/metadata/resourceVersion"),
                          kcr_json_str(upd, "/metadata/resourceVersion"));
  cJSON_Delete(upd);

  /* Merge patch on the main endpoint. */
  const char *mp = "{\"data\":{\"extra\":\"x\"}}";
  itest_expect(KCR_OK,
               kcr_patch(cl, &one, &(struct kcr_patch_opts){KCR_PATCH_MERGE}, mp,
                         strlen(mp), &upd, &ei),
               &ei);
  assert_string_equal("x", kcr_json_str(upd, "/data/extra"));
  assert_string_equal("v2", kcr_json_str(upd, "/data/k"));

  /* Delete with a stale uid precondition is refused; with the right one it
   * goes, and then the object is not found. */
  struct kcr_delete_opts bad = {.precondition_uid =
                                    "00000000-0000-0000-0000-000000000000"};
  itest_expect(KCR_ECONFLICT, kcr_delete(cl, &one, &bad, NULL, &ei), &ei);
  assert_non_null(strstr(ei.message, "the UID in the precondition "
                                     "(00000000-0000-0000-0000-000000000000) does not "
                                     "match the UID in record"));
  struct kcr_delete_opts good = {.propagation = KCR_PROPAGATE_BACKGROUND,
                                 .precondition_uid = kcr_json_str(upd, "/metadata/uid")};
  itest_expect(KCR_OK, kcr_delete(cl, &one, &good, NULL, &ei), &ei);
  itest_expect(KCR_ENOTFOUND, kcr_get(cl, &one, NULL, &ei), &ei);
  assert_int_equal(404, ei.code);
  assert_string_equal("NotFound", ei.reason);
  assert_non_null(strstr(ei.message, "configmaps \"cm1\" not found"));
  itest_expect(KCR_ENOTFOUND, kcr_delete(cl, &one, NULL, NULL, &ei), &ei);

  cJSON_Delete(upd);
  cJSON_Delete(got);
  cJSON_Delete(obj);
  kcr_errinfo_cleanup(&ei);
}

/* A typed ConfigMap applied: sent to the object its metadata names, the
 * answer decoded into the result; a second apply by the same manager
 * without a key removes it (the manager owns what it last applied); an
 * object that names no target is refused before anything is sent. */
static void a_typed_object_is_applied_where_its_metadata_says(void **state)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  struct kcr_arena a = KCR_ARENA_INIT;
  struct kcr_apply_opts opts = {.field_manager = "kcr-test-typed"};
  struct core_v1_config_map p, got;
  struct kcr_str k[] = {kcr_str_c("a"), kcr_str_c("b")};
  struct kcr_str v[] = {kcr_str_c("1"), kcr_str_c("2")};

  core_v1_config_map_init(&p);
  KCR_SET(p.metadata, name, kcr_str_c("typed1"));
  KCR_SET(p.metadata, namespace_, kcr_str_c(ns));
  KCR_SET(p, data, ((struct kcr_strmap){.k = k, .v = v, .n = 2}));
  itest_expect(KCR_OK, core_v1_config_map_apply(cl, &p, &opts, &a, &got, &ei), &ei);
  assert_true(kcr_str_eq(got.metadata.name, "typed1") &&
              kcr_str_eq(got.metadata.namespace_, ns));
  assert_true(got.metadata.has_uid && got.metadata.uid.n > 0);
  assert_int_equal(2, got.data.n);
  assert_true(kcr_str_eq(got.data.v[kcr_str_index(got.data.k, 2, "b")], "2"));
  assert_true(got.metadata.has_managed_fields);

  p.data.k = &k[1];
  p.data.v = &v[1];
  p.data.n = 1;
  itest_expect(KCR_OK, core_v1_config_map_apply(cl, &p, &opts, NULL, NULL, &ei), &ei);
  itest_expect(KCR_OK, core_v1_config_map_apply(cl, &p, &opts, &a, &got, &ei), &ei);
  assert_int_equal(1, got.data.n);
  assert_true(kcr_str_eq(got.data.k[0], "b"));

  /* owned by the ConfigMap read back: the apiserver takes the reference */
  struct core_v1_config_map owner = got, child;
  core_v1_config_map_init(&child);
  KCR_SET(child.metadata, name, kcr_str_c("typed1-child"));
  KCR_SET(child.metadata, namespace_, kcr_str_c(ns));
  itest_expect(KCR_OK,
               core_v1_config_map_set_controller_of(&a, &child.metadata, &owner, &ei),
               &ei);
  itest_expect(KCR_OK, core_v1_config_map_apply(cl, &child, &opts, &a, &got, &ei), &ei);
  assert_int_equal(1, got.metadata.owner_references.n);
  struct kcr_meta_v1_owner_reference *r = &got.metadata.owner_references.v[0];
  assert_true(kcr_str_eq(r->api_version, "v1") && kcr_str_eq(r->kind, "ConfigMap") &&
              kcr_str_eq(r->name, "typed1") && r->controller && r->block_owner_deletion);
  assert_true(kcr_str_same(r->uid, owner.metadata.uid));

  /* refused here, each naming what is missing */
  p.metadata.has_namespace_ = false;
  itest_expect(KCR_EINVAL, core_v1_config_map_apply(cl, &p, &opts, NULL, NULL, &ei), &ei);
  assert_non_null(strstr(ei.message, "no metadata.namespace"));
  assert_int_equal(0, ei.code);
  KCR_SET(p.metadata, namespace_, kcr_str_c(ns));
  p.metadata.name = kcr_str_c("");
  itest_expect(KCR_EINVAL, core_v1_config_map_apply(cl, &p, &opts, NULL, NULL, &ei), &ei);
  assert_non_null(strstr(ei.message, "no metadata.name"));
  p.metadata.name = (struct kcr_str){.s = "a\0b", .n = 3};
  itest_expect(KCR_EINVAL, core_v1_config_map_apply(cl, &p, &opts, NULL, NULL, &ei), &ei);
  assert_non_null(strstr(ei.message, "metadata.name holds a NUL byte"));
  p.metadata.name = kcr_str_c("typed1");
  itest_expect(
      KCR_EINVAL,
      core_v1_config_map_apply(cl, &p, &(struct kcr_apply_opts){0}, NULL, NULL, &ei),
      &ei);
  itest_expect(KCR_EINVAL, core_v1_config_map_apply(cl, &p, &opts, NULL, &got, &ei), &ei);
  assert_non_null(strstr(ei.message, "arena"));

  kcr_errinfo_cleanup(&ei);
  kcr_arena_cleanup(&a);
}

/* kcr_typed_get reads from the apiserver (managedFields included);
 * kcr_typed_apply_rv answers the resourceVersion the apply made, which the
 * next read shows. */
static void
a_typed_object_is_read_from_the_server_and_applied_for_its_version(void **state)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  struct kcr_arena a = KCR_ARENA_INIT;
  struct kcr_apply_opts opts = {.field_manager = "kcr-test-typed"};
  const struct kcr_gvr cms = {
      .version = "v1", .resource = "configmaps", .namespaced = true};
  struct kcr_ref ref = {.gvr = &cms, .ns = ns, .name = "typed2"};
  struct core_v1_config_map p, got;
  char *rv = NULL;

  core_v1_config_map_init(&p);
  KCR_SET(p.metadata, name, kcr_str_c("typed2"));
  KCR_SET(p.metadata, namespace_, kcr_str_c(ns));
  itest_expect(KCR_OK, KCR_SET_STRMAP(p, data, &a, "k", "v1"), &ei);
  itest_expect(
      KCR_OK, kcr_typed_apply_rv(cl, &core_v1_config_map_type, &cms, &p, &opts, &rv, &ei),
      &ei);
  assert_non_null(rv);
  itest_expect(KCR_OK, kcr_typed_get(cl, &core_v1_config_map_type, &ref, &a, &got, &ei),
               &ei);
  assert_true(kcr_str_eq(got.metadata.resource_version, rv));
  assert_true(kcr_str_eq(KCR_MAP_STR(got.data, "k"), "v1"));
  assert_true(got.metadata.has_managed_fields && got.metadata.managed_fields.n == 1);
  free(rv);
  rv = NULL;

  /* a changed value: a new version, read back as such */
  itest_expect(KCR_OK, KCR_SET_STRMAP(p, data, &a, "k", "v2"), &ei);
  itest_expect(
      KCR_OK, kcr_typed_apply_rv(cl, &core_v1_config_map_type, &cms, &p, &opts, &rv, &ei),
      &ei);
  itest_expect(KCR_OK, kcr_typed_get(cl, &core_v1_config_map_type, &ref, &a, &got, &ei),
               &ei);
  assert_true(kcr_str_eq(got.metadata.resource_version, rv));
  assert_true(kcr_str_eq(KCR_MAP_STR(got.data, "k"), "v2"));
  free(rv);

  /* absent: the server's 404; refused locally, nothing sent */
  ref.name = "typed2-absent";
  itest_expect(KCR_ENOTFOUND,
               kcr_typed_get(cl, &core_v1_config_map_type, &ref, &a, &got, &ei), &ei);
  itest_expect(KCR_EINVAL,
               kcr_typed_get(cl, &core_v1_config_map_type, &ref, NULL, &got, &ei), &ei);
  itest_expect(
      KCR_EINVAL,
      kcr_typed_apply_rv(cl, &core_v1_config_map_type, &cms, &p, &opts, NULL, &ei), &ei);
  p.metadata.has_name = false;
  rv = (char *)"stale";
  itest_expect(
      KCR_EINVAL,
      kcr_typed_apply_rv(cl, &core_v1_config_map_type, &cms, &p, &opts, &rv, &ei), &ei);
  assert_null(rv);
  assert_non_null(strstr(ei.message, "no metadata.name"));

  kcr_errinfo_cleanup(&ei);
  kcr_arena_cleanup(&a);
}

static void stale_update_is_a_conflict_with_the_servers_message(void **state)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  struct kcr_ref coll = {&itest_widgets, ns}, one = {&itest_widgets, ns, "resource01"};
  cJSON *w = itest_json("{\"apiVersion\":\"test.kcr.io/v1\",\"kind\":\"Widget\","
                        "\"metadata\":{\"name\":\"resource01\"},\"spec\":{\"size\":1}}");
  cJSON *a = NULL, *b = NULL;
  char want[512];

  itest_expect(KCR_OK, kcr_create(cl, &coll, w, NULL, &a, &ei), &ei);
  b = cJSON_Duplicate(a, 1);
  /* Writer A moves the object on; writer B still holds the old version. */
  cJSON_ReplaceItemInObject(kcr_json_at(a, "/spec"), "size", cJSON_CreateNumber(2));
  itest_expect(KCR_OK, kcr_update(cl, &one, a, NULL, NULL, &ei), &ei);
  cJSON_ReplaceItemInObject(kcr_json_at(b, "/spec"), "size", cJSON_CreateNumber(3));
  itest_expect(KCR_ECONFLICT, kcr_update(cl, &one, b, NULL, NULL, &ei), &ei);
  snprintf(want, sizeof(want),
           "Operation cannot be fulfilled on widgets.test.kcr.io \"resource01\": the "
           "object has been modified; please apply your changes to the latest version "
           "and try again");
  assert_int_equal(409, ei.code);
  assert_string_equal("Conflict", ei.reason);
  assert_string_equal("Failure", ei.status);
  assert_string_equal(want, ei.message);
  assert_string_equal("resource01", kcr_json_str(ei.details, "/name"));
  assert_string_equal("test.kcr.io", kcr_json_str(ei.details, "/group"));
  assert_string_equal("widgets", kcr_json_str(ei.details, "/kind"));

  /* A PUT without resourceVersion on a custom resource is rejected (422). */
  cJSON_DeleteItemFromObject(kcr_json_at(b, "/metadata"), "resourceVersion");
  itest_expect(KCR_EINVALID, kcr_update(cl, &one, b, NULL, NULL, &ei), &ei);
  assert_int_equal(422, ei.code);

  cJSON_Delete(a);
  cJSON_Delete(b);
  cJSON_Delete(w);
  kcr_errinfo_cleanup(&ei);
}

static const cJSON *condition(const cJSON *obj, const char *type)
{
  const cJSON *c;
  cJSON_ArrayForEach(c, kcr_json_at(obj, "/status/conditions"))
  {
    const char *t = kcr_json_str(c, "/type");
    if(t && !strcmp(t, type))
      return c;
  }
  return NULL;
}

static void custom_resource_status_subresource(void **state)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  struct kcr_ref coll = {&itest_widgets, ns}, one = {&itest_widgets, ns, "w1"},
                 st = {&itest_widgets, ns, "w1", "status"};
  cJSON *w = itest_json("{\"apiVersion\":\"test.kcr.io/v1\",\"kind\":\"Widget\","
                        "\"metadata\":{\"name\":\"w1\"},\"spec\":{\"size\":1},"
                        "\"status\":{\"phase\":\"ignored-on-create\"}}");
  cJSON *got = NULL, *out = NULL;

  itest_expect(KCR_OK, kcr_create(cl, &coll, w, NULL, &got, &ei), &ei);
  assert_int_equal(1, kcr_json_int(got, "/metadata/generation", 0));
  assert_null(kcr_json_at(got, "/status")); /* the main endpoint ignores status */

  /* Merge patch of /status sets status without touching generation; spec
   * sent there is dropped. */
  const char *mp = "{\"spec\":{\"size\":50},\"status\":{\"phase\":\"Running\","
                   "\"observedGeneration\":1}}";
  itest_expect(KCR_OK,
               kcr_patch(cl, &st, &(struct kcr_patch_opts){KCR_PATCH_MERGE}, mp,
                         strlen(mp), &out, &ei),
               &ei);
  assert_string_equal("Running", kcr_json_str(out, "/status/phase"));
  assert_int_equal(1, kcr_json_int(out, "/spec/size", 0));
  assert_int_equal(1, kcr_json_int(out, "/metadata/generation", 0));
  cJSON_Delete(out);

  /* Server-side apply on /status by two managers: each owns its condition
   * (list-map keyed by type), neither clobbers the other. */
  cJSON *a = itest_json(
      "{\"apiVersion\":\"test.kcr.io/v1\",\"kind\":\"Widget\",\"metadata\":{\"name\":"
      "\"w1\",\"namespace\":\"%s\"},\"status\":{\"conditions\":[{\"type\":\"Ready\","
      "\"status\":\"True\",\"reason\":\"Ready\",\"message\":\"ok\","
      "\"lastTransitionTime\":\"2026-11-29T10:00:00Z\"}]}}",
      ns);
  cJSON *b = itest_json(
      "{\"apiVersion\":\"test.kcr.io/v1\",\"kind\":\"Widget\",\"metadata\":{\"name\":"
      "\"w1\",\"namespace\":\"%s\"},\"status\":{\"conditions\":[{\"type\":\"Healthy\","
      "\"status\":\"False\",\"reason\":\"Probing\",\"message\":\"\","
      "\"lastTransitionTime\":\"2026-11-29T10:00:01Z\"}]}}",
      ns);
  itest_expect(
      KCR_OK,
      kcr_apply(cl, &st, a,
                &(struct kcr_apply_opts){.field_manager = "mgr-a", .force = true}, NULL,
                &ei),
      &ei);
  itest_expect(
      KCR_OK,
      kcr_apply(cl, &st, b,
                &(struct kcr_apply_opts){.field_manager = "mgr-b", .force = true}, &out,
                &ei),
      &ei);
  assert_string_equal("True", kcr_json_str(condition(out, "Ready"), "/status"));
  assert_string_equal("Probing", kcr_json_str(condition(out, "Healthy"), "/reason"));
  assert_string_equal("Running", kcr_json_str(out, "/status/phase"));
  assert_int_equal(1, kcr_json_int(out, "/metadata/generation", 0));
  cJSON_Delete(out);

  /* Apply without a fieldManager is refused before anything is sent. */
  itest_expect(KCR_EINVAL,
               kcr_apply(cl, &st, a, &(struct kcr_apply_opts){.force = true}, NULL, &ei),
               &ei);
  /* Strategic merge patch is not for custom resources: 415. */
  itest_expect(KCR_EUNSUPPORTED,
               kcr_patch(cl, &st, &(struct kcr_patch_opts){KCR_PATCH_STRATEGIC}, "{}", 2,
                         NULL, &ei),
               &ei);

  /* A spec change on the main endpoint bumps generation. */
  const char *sp = "{\"spec\":{\"size\":7}}";
  itest_expect(KCR_OK,
               kcr_patch(cl, &one, &(struct kcr_patch_opts){KCR_PATCH_MERGE}, sp,
                         strlen(sp), &out, &ei),
               &ei);
  assert_int_equal(2, kcr_json_int(out, "/metadata/generation", 0));
  /* A schema violation is a 422 with the field in the message. */
  const char *badsp = "{\"spec\":{\"size\":1000}}";
  itest_expect(KCR_EINVALID,
               kcr_patch(cl, &one, &(struct kcr_patch_opts){KCR_PATCH_MERGE}, badsp,
                         strlen(badsp), NULL, &ei),
               &ei);
  assert_non_null(strstr(ei.message, "spec.size"));
  /* JSON patch with a failing test op is refused as a whole. */
  const char *jp = "[{\"op\":\"test\",\"path\":\"/spec/size\",\"value\":99},"
                   "{\"op\":\"replace\",\"path\":\"/spec/size\",\"value\":8}]";
  kcr_err rc = kcr_patch(cl, &one, &(struct kcr_patch_opts){KCR_PATCH_JSON}, jp,
                         strlen(jp), NULL, &ei);
  assert_int_not_equal(KCR_OK, rc);
  const char *jp2 = "[{\"op\":\"test\",\"path\":\"/spec/size\",\"value\":7},"
                    "{\"op\":\"replace\",\"path\":\"/spec/size\",\"value\":8}]";
  cJSON_Delete(out);
  itest_expect(KCR_OK,
               kcr_patch(cl, &one, &(struct kcr_patch_opts){KCR_PATCH_JSON}, jp2,
                         strlen(jp2), &out, &ei),
               &ei);
  assert_int_equal(8, kcr_json_int(out, "/spec/size", 0));

  itest_expect(KCR_OK, kcr_delete(cl, &one, NULL, NULL, &ei), &ei);
  cJSON_Delete(out);
  cJSON_Delete(a);
  cJSON_Delete(b);
  cJSON_Delete(got);
  cJSON_Delete(w);
  kcr_errinfo_cleanup(&ei);
}

struct names {
  int n;
  char **v;
};

static kcr_err collect(const cJSON *item, void *ud)
{
  struct names *s = ud;
  s->v[s->n++] = strdup(kcr_json_str(item, "/metadata/name"));
  return KCR_OK;
}

static int cmp(const void *a, const void *b)
{
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Header callback: the Content-Encoding's value into ud (char[32]). */
static size_t note_encoding(char *p, size_t sz, size_t n, void *ud)
{
  static const char name[] = "content-encoding:";
  size_t len = sz * n;

  if(len > sizeof(name) - 1 && !strncasecmp(p, name, sizeof(name) - 1))
    snprintf(ud, 32, "%.*s", (int)(len - (sizeof(name) - 1)), p + sizeof(name) - 1);
  return len;
}

static size_t keep_body(char *p, size_t sz, size_t n, void *ud)
{
  return kcr_buf_append(ud, p, sz * n) ? 0 : sz * n;
}

static void list_pages_over_a_thousand_objects(void **state)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  char *pns = itest_namespace(cl, "paging");
  struct kcr_ref coll = {&itest_configmaps, pns};
  struct names s = {0, calloc(1100, sizeof(char *))};
  char *rv = NULL, name[32];
  int pages = 0;

  for(int i = 0; i < 1000; i++) {
    snprintf(name, sizeof(name), "cm-%04d", i);
    cJSON *o = configmap(name, "x");
    if(i % 2)
      cJSON_ReplaceItemInObject(kcr_json_at(o, "/metadata/labels"), "app",
                                cJSON_CreateString("odd"));
    itest_expect(KCR_OK, kcr_create(cl, &coll, o, NULL, NULL, &ei), &ei);
    cJSON_Delete(o);
  }
  /* Page by page: 7 pages of at most 150. */
  struct kcr_list_opts lo = {.limit = 150};
  char *token = NULL;
  int total = 0;
  do {
    cJSON *page = NULL;
    lo.continue_token = token;
    itest_expect(KCR_OK, kcr_list(cl, &coll, &lo, &page, &ei), &ei);
    int n = cJSON_GetArraySize(kcr_json_at(page, "/items"));
    assert_true(n <= 150);
    total += n;
    pages++;
    free(token);
    const char *next = kcr_json_str(page, "/metadata/continue");
    token = next && *next ? strdup(next) : NULL;
    cJSON_Delete(page);
  } while(token);
  assert_int_equal(1000, total);
  assert_int_equal(7, pages);

  /* All pages through the iterator: every name exactly once, sorted. */
  itest_expect(KCR_OK,
               kcr_list_each(cl, &coll, &(struct kcr_list_opts){.limit = 100}, collect,
                             &s, &rv, &ei),
               &ei);
  assert_int_equal(1000, s.n);
  assert_non_null(rv);
  qsort(s.v, (size_t)s.n, sizeof(char *), cmp);
  for(int i = 0; i < 1000; i++) {
    snprintf(name, sizeof(name), "cm-%04d", i);
    assert_string_equal(name, s.v[i]);
    free(s.v[i]);
  }
  /* Label selector: half of them. */
  s.n = 0;
  itest_expect(
      KCR_OK,
      kcr_list_each(cl, &coll,
                    &(struct kcr_list_opts){.label_selector = "app=odd", .limit = 64},
                    collect, &s, NULL, &ei),
      &ei);
  assert_int_equal(500, s.n);
  for(int i = 0; i < s.n; i++)
    free(s.v[i]);
  /* Field selector: exactly one. */
  s.n = 0;
  itest_expect(
      KCR_OK,
      kcr_list_each(cl, &coll,
                    &(struct kcr_list_opts){.field_selector = "metadata.name=cm-0042"},
                    collect, &s, NULL, &ei),
      &ei);
  assert_int_equal(1, s.n);
  assert_string_equal("cm-0042", s.v[0]);
  free(s.v[0]);
  /* All at once, well over 128 KiB: the server gzips it (gzip is the one
   * encoding it compresses with and the one the client asks for), and curl
   * hands over the decoded text. */
  struct kcr__conn *conn = kcr__conn_get(cl);
  struct curl_slist *hdrs = NULL;
  struct kcr_buf body = KCR_BUF_INIT, path = KCR_BUF_INIT;
  char enc[32] = "";
  cJSON *all = NULL;
  assert_non_null(conn);
  assert_int_equal(KCR_OK, kcr_path(&path, &coll));
  itest_expect(KCR_OK,
               kcr__conn_prepare(cl, conn, "GET", path.ptr, NULL, NULL, true, &hdrs, &ei),
               &ei);
  curl_easy_setopt(conn->h, CURLOPT_WRITEFUNCTION, keep_body);
  curl_easy_setopt(conn->h, CURLOPT_WRITEDATA, &body);
  curl_easy_setopt(conn->h, CURLOPT_HEADERFUNCTION, note_encoding);
  curl_easy_setopt(conn->h, CURLOPT_HEADERDATA, enc);
  assert_int_equal(CURLE_OK, curl_easy_perform(conn->h));
  assert_non_null(strstr(enc, "gzip"));
  itest_expect(KCR_OK, kcr_json_parse(kcr_buf_str(&body), body.len, &all, &ei), &ei);
  assert_int_equal(1000, cJSON_GetArraySize(kcr_json_at(all, "/items")));
  cJSON_Delete(all);
  curl_easy_setopt(conn->h, CURLOPT_HTTPHEADER, NULL);
  kcr__headers_free(hdrs);
  kcr__conn_put(cl, conn, true); /* not pooled with our callbacks in it */
  kcr_buf_cleanup(&body);
  kcr_buf_cleanup(&path);

  free(s.v);
  free(rv);
  itest_namespace_drop(cl, pns);
  kcr_errinfo_cleanup(&ei);
}

static void bad_requests_are_refused_locally(void **state)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  cJSON *o = configmap("x", "y");
  /* create on a named ref, get/delete without a name, invalid names */
  itest_expect(
      KCR_EINVAL,
      kcr_create(cl, &(struct kcr_ref){&itest_configmaps, ns, "x"}, o, NULL, NULL, &ei),
      &ei);
  itest_expect(KCR_EINVAL,
               kcr_get(cl, &(struct kcr_ref){&itest_configmaps, ns}, NULL, &ei), &ei);
  itest_expect(KCR_EINVAL,
               kcr_get(cl, &(struct kcr_ref){&itest_configmaps, ns, "a/b"}, NULL, &ei),
               &ei);
  itest_expect(KCR_EINVAL,
               kcr_delete(cl, &(struct kcr_ref){&itest_configmaps, ns}, NULL, NULL, &ei),
               &ei);
  cJSON_Delete(o);
  kcr_errinfo_cleanup(&ei);
}

/* Every request goes to its own URL on a handle that served others (the
 * client hands curl each URL parsed: client.c, DESIGN: URL), and a URL
 * curl refuses is refused as before - not sent to the handle's last URL. */
static void each_request_goes_to_its_own_url(void **state)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  struct kcr_http_response resp = {0, KCR_BUF_INIT};
  cJSON *o = configmap("url-a", "1"), *got = NULL;
  char *bad = NULL;

  itest_expect(
      KCR_OK,
      kcr_create(cl, &(struct kcr_ref){&itest_configmaps, ns}, o, NULL, NULL, &ei), &ei);
  assert_true(asprintf(&bad, "/api/v1/namespaces/%s/configmaps/url a", ns) > 0);
  for(int i = 0; i < 3; i++) {
    itest_expect(
        KCR_OK, kcr_get(cl, &(struct kcr_ref){&itest_configmaps, ns, "url-a"}, &got, &ei),
        &ei);
    assert_string_equal("url-a", kcr_json_str(got, "/metadata/name"));
    cJSON_Delete(got);
    assert_int_equal(
        KCR_ENOTFOUND,
        kcr_get(cl, &(struct kcr_ref){&itest_configmaps, ns, "url-b"}, &got, &ei));
    assert_non_null(strstr(ei.message, "url-b"));
    assert_int_equal(
        KCR_ETRANSPORT,
        kcr_client_do(cl, &(struct kcr_http_request){.method = "GET", .path = bad}, &resp,
                      &ei));
    kcr_buf_cleanup(&resp.body);
  }
  free(bad);
  cJSON_Delete(o);
  kcr_errinfo_cleanup(&ei);
}

/* A client for $KUBECONFIG (server https://127.0.0.1:PORT) whose cluster
 * also says tls-server-name: name. */
static kcr_client *client_with_server_name(const char *name)
{
  kcr_client *c = itest_client_with("tls-server-name", name);

  assert_string_equal(name, kcr_config_tls_server_name(kcr_client_config(c)));
  return c;
}

static kcr_err stop_at_first_event(struct kcr_watch_event *ev, void *ud)
{
  *(enum kcr_watch_type *)ud = ev->type;
  return KCR_ETERMINAL;
}

/* Watches ns's ConfigMap name until its ADDED event; returns the watch's
 * code (KCR_ETERMINAL once the event came). */
static kcr_err watch_one(kcr_client *c, const char *name, struct kcr_errinfo *ei)
{
  struct kcr_ref coll = {&itest_configmaps, ns};
  enum kcr_watch_type got = KCR_WATCH_ERROR;
  char sel[128];
  kcr_watch *w;
  kcr_err rc;

  snprintf(sel, sizeof(sel), "metadata.name=%s", name);

  assert_int_equal(KCR_OK,
                   kcr_watch_new(&(struct kcr_watch_opts){.client = c,
                                                          .ref = &coll,
                                                          .on_event = stop_at_first_event,
                                                          .ud = &got,
                                                          .field_selector = sel,
                                                          .timeout_ms = 30000},
                                 &w, ei));
  rc = kcr_watch_run(w, ei);
  kcr_watch_free(w);
  if(rc == KCR_ETERMINAL)
    assert_int_equal(KCR_WATCH_ADDED, got);
  return rc;
}

/* Item 22 of issue 8: tls-server-name was ignored (a warning was logged and
 * the certificate checked against the URL's host). The connection goes to
 * the server URL's 127.0.0.1:PORT; the certificate is checked against the
 * tls-server-name, which the apiserver's certificate lists among its SANs
 * (tools/controlplane/start) or does not. */
static void tls_server_name_is_what_the_certificate_is_checked_against(void **state)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  struct kcr_ref one = {&itest_configmaps, ns, "tls"};
  kcr_client *good = client_with_server_name("kubernetes.default.svc");
  kcr_client *bad = client_with_server_name("not-the-apiserver.example");
  cJSON *cm = configmap("tls", "x"), *got = NULL;

  /* A name in the certificate: requests and watches work, although the
   * name resolves nowhere. */
  itest_expect(
      KCR_OK,
      kcr_create(good, &(struct kcr_ref){&itest_configmaps, ns}, cm, NULL, NULL, &ei),
      &ei);
  itest_expect(KCR_OK, kcr_get(good, &one, &got, &ei), &ei);
  assert_string_equal("x", kcr_json_str(got, "/data/k"));
  itest_expect(KCR_ETERMINAL, watch_one(good, "tls", &ei), &ei);

  /* A name not in it: the TLS handshake fails, and says why. */
  itest_expect(KCR_ETRANSPORT, kcr_get(bad, &one, NULL, &ei), &ei);
  assert_non_null(strstr(ei.message, "GET /api/v1/namespaces/"));
  assert_non_null(strstr(ei.message, "'not-the-apiserver.example'"));
  itest_expect(KCR_ETRANSPORT, watch_one(bad, "tls", &ei), &ei);
  assert_non_null(strstr(ei.message, "'not-the-apiserver.example'"));

  cJSON_Delete(got);
  cJSON_Delete(cm);
  kcr_client_free(good);
  kcr_client_free(bad);
  kcr_errinfo_cleanup(&ei);
}

/* What a transfer on a pooled handle sees of its connection, asked from
 * curl's write callback (curl answers CURLINFO_TLS_SSL_PTR only while the
 * transfer has its connection). */
struct probe {
  CURL *h;
  int backend;
  long ssl_mode;
  bool seen;
};

static size_t probe_body(char *p, size_t sz, size_t n, void *ud)
{
  struct probe *pr = ud;
  struct curl_tlssessioninfo *ti = NULL;

  if(!pr->seen && curl_easy_getinfo(pr->h, CURLINFO_TLS_SSL_PTR, &ti) == CURLE_OK && ti &&
     ti->internals) {
    pr->seen = true;
    pr->backend = ti->backend;
    pr->ssl_mode = (long)SSL_get_mode((SSL *)ti->internals);
  }
  return sz * n;
}

/* Every connection the client opens speaks HTTP/1.1 (each has one request
 * at a time: HTTP/2 would only add work per request), and OpenSSL keeps its
 * buffers between records: curl's SSL_MODE_RELEASE_BUFFERS, which frees and
 * allocates 16 KiB twice per request, is cleared. */
static void connections_are_http1_and_keep_their_tls_buffers(void **state)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  struct kcr__conn *conn = kcr__conn_get(cl);
  struct curl_slist *hdrs = NULL;
  struct probe pr = {0};
  long version = 0;

  assert_non_null(conn);
  pr.h = conn->h;
  itest_expect(KCR_OK,
               kcr__conn_prepare(cl, conn, "GET", "/api/v1/namespaces/default", NULL,
                                 NULL, true, &hdrs, &ei),
               &ei);
  curl_easy_setopt(conn->h, CURLOPT_WRITEFUNCTION, probe_body);
  curl_easy_setopt(conn->h, CURLOPT_WRITEDATA, &pr);
  assert_int_equal(CURLE_OK, curl_easy_perform(conn->h));
  assert_true(pr.seen);
  assert_int_equal(CURLSSLBACKEND_OPENSSL, pr.backend);
  assert_int_equal(0, pr.ssl_mode & SSL_MODE_RELEASE_BUFFERS);
  assert_int_equal(CURLE_OK, curl_easy_getinfo(conn->h, CURLINFO_HTTP_VERSION, &version));
  assert_int_equal(CURL_HTTP_VERSION_1_1, version);
  curl_easy_setopt(conn->h, CURLOPT_HTTPHEADER, NULL);
  kcr__headers_free(hdrs);
  kcr__conn_put(cl, conn, true); /* not pooled with our callback in it */
  kcr_errinfo_cleanup(&ei);
}

/* No time limit (KCR_FOREVER) means none, for writes too: the client's
 * timeout_ms and a request's own. */
static void writes_with_no_time_limit_go_through(void **state)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  struct kcr_http_response resp = {0};
  cJSON *o = configmap("forever", "1");
  char *path = NULL;
  kcr_client *c = NULL;

  itest_expect(KCR_OK,
               kcr_client_new(&(struct kcr_client_opts){.config = kcr_client_config(cl),
                                                        .timeout_ms = KCR_FOREVER},
                              &c, &ei),
               &ei);
  itest_expect(
      KCR_OK, kcr_create(c, &(struct kcr_ref){&itest_configmaps, ns}, o, NULL, NULL, &ei),
      &ei);
  assert_true(asprintf(&path, "/api/v1/namespaces/%s/configmaps/forever", ns) > 0);
  itest_expect(KCR_OK,
               kcr_client_do(cl,
                             &(struct kcr_http_request){.method = "DELETE",
                                                        .path = path,
                                                        .timeout_ms = KCR_FOREVER},
                             &resp, &ei),
               &ei);
  assert_int_equal(200, resp.code);
  kcr_buf_cleanup(&resp.body);
  free(path);
  cJSON_Delete(o);
  kcr_client_free(c);
  kcr_errinfo_cleanup(&ei);
}

/* A body over the apiserver's limit (3 MiB; this one, 32 MiB, more than
 * the sockets buffer) is answered 413 before the server has read it all,
 * and the server then closes, resetting the connection while the client
 * still sends: the client reports that answer with the server's words (as
 * curl does) - not a connection closed without an answer (before: "Send
 * failure: Connection reset by peer"). The next write goes through. */
static void a_body_over_the_server_s_limit_gets_its_413(void **state)
{
  enum { BIG = 32 << 20 };
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  struct kcr_http_response resp = {0};
  struct kcr_buf body = KCR_BUF_INIT, path = KCR_BUF_INIT;
  cJSON *small = configmap("after-413", "1");
  char *fill = malloc(BIG);
  kcr_err rc;

  assert_non_null(fill);
  memset(fill, 'x', BIG);
  assert_int_equal(KCR_OK,
                   kcr_buf_printf(&body, "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\","
                                         "\"metadata\":{\"name\":\"too-big\"},"
                                         "\"data\":{\"k\":\""));
  assert_int_equal(KCR_OK, kcr_buf_append(&body, fill, BIG));
  assert_int_equal(KCR_OK, kcr_buf_puts(&body, "\"}}"));
  assert_int_equal(KCR_OK, kcr_buf_printf(&path, "/api/v1/namespaces/%s/configmaps", ns));
  rc = kcr_client_do(cl,
                     &(struct kcr_http_request){.method = "POST",
                                                .path = path.ptr,
                                                .body = body.ptr,
                                                .body_len = body.len,
                                                .timeout_ms = 20000,
                                                .max_retries = -1},
                     &resp, &ei);
  if(rc == KCR_OK || resp.code != 413 || !ei.message || !strstr(ei.message, "too large"))
    fail_msg("a 32 MiB body: %s, code %ld, \"%s\"; want the server's 413",
             kcr_err_name(rc), resp.code, ei.message ? ei.message : "");
  kcr_errinfo_cleanup(&ei);
  itest_expect(
      KCR_OK,
      kcr_create(cl, &(struct kcr_ref){&itest_configmaps, ns}, small, NULL, NULL, &ei),
      &ei);
  kcr_buf_cleanup(&resp.body);
  kcr_buf_cleanup(&body);
  kcr_buf_cleanup(&path);
  free(fill);
  cJSON_Delete(small);
  kcr_errinfo_cleanup(&ei);
  (void)state;
}

/* ---- proxies ---- */

/* A write (create, delete: on the client's own connections when there is
 * no proxy), a read (get: a curl transfer) and a watch of ConfigMap name,
 * all answered. */
static void write_read_watch(kcr_client *c, const char *name)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  struct kcr_ref one = {&itest_configmaps, ns, name};
  cJSON *cm = configmap(name, "p"), *got = NULL;

  itest_expect(
      KCR_OK,
      kcr_create(c, &(struct kcr_ref){&itest_configmaps, ns}, cm, NULL, NULL, &ei), &ei);
  itest_expect(KCR_OK, kcr_get(c, &one, &got, &ei), &ei);
  assert_string_equal("p", kcr_json_str(got, "/data/k"));
  itest_expect(KCR_ETERMINAL, watch_one(c, name, &ei), &ei);
  itest_expect(KCR_OK, kcr_delete(c, &one, NULL, NULL, &ei), &ei);
  cJSON_Delete(got);
  cJSON_Delete(cm);
  kcr_errinfo_cleanup(&ei);
}

/* Defect d7: any https_proxy or all_proxy turned the client's own
 * connections off (every request a curl transfer, which took the proxy),
 * and NO_PROXY was not looked at. As client-go, the client never reaches a
 * loopback server (the apiserver here, 127.0.0.1) through a proxy from the
 * environment and ignores ALL_PROXY: with every proxy variable naming a
 * working proxy, writes and watches stay on its own connections, and
 * nothing - not curl's reads either - goes through the proxy. */
static void an_environment_proxy_is_not_used_for_a_loopback_server(void **state)
{
  struct itest_proxy *px = itest_proxy_start();
  char url[64], *saved[TENV_NPROXY];
  kcr_client *c;

  snprintf(url, sizeof(url), "http://127.0.0.1:%d", itest_proxy_port(px));
  tenv_proxy_set(saved, (const char *const[TENV_NPROXY]){url, url, url, url, url, url});
  c = itest_client();
  assert_true(kcr__own_streams(c, "/api/v1/namespaces"));
  write_read_watch(c, "env-proxy");
  tenv_proxy_restore(saved);
  assert_int_equal(0, itest_proxy_tunnels(px));
  kcr_client_free(c);
  itest_proxy_stop(px);
  (void)state;
}

/* The cluster's proxy-url (which e7442a7 ignored) carries every request, as
 * client-go's http.ProxyURL does: to a loopback server too, and whatever
 * no_proxy says. Everything is then a curl transfer through the proxy. */
static void the_kubeconfig_proxy_url_carries_every_request(void **state)
{
  struct itest_proxy *px = itest_proxy_start();
  char url[64], *saved[TENV_NPROXY];
  kcr_client *c;

  snprintf(url, sizeof(url), "http://127.0.0.1:%d", itest_proxy_port(px));
  tenv_proxy_set(saved, (const char *const[TENV_NPROXY]){[6] = "*", [7] = "*"});
  c = itest_client_with("proxy-url", url);
  assert_string_equal(url, kcr_config_proxy_url(kcr_client_config(c)));
  assert_false(kcr__own_streams(c, "/api/v1/namespaces"));
  write_read_watch(c, "kube-proxy");
  tenv_proxy_restore(saved);
  assert_true(itest_proxy_tunnels(px) > 0);
  kcr_client_free(c);
  itest_proxy_stop(px);
  (void)state;
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(configmap_crud),
      cmocka_unit_test(a_typed_object_is_applied_where_its_metadata_says),
      cmocka_unit_test(
          a_typed_object_is_read_from_the_server_and_applied_for_its_version),
      cmocka_unit_test(stale_update_is_a_conflict_with_the_servers_message),
      cmocka_unit_test(custom_resource_status_subresource),
      cmocka_unit_test(list_pages_over_a_thousand_objects),
      cmocka_unit_test(bad_requests_are_refused_locally),
      cmocka_unit_test(each_request_goes_to_its_own_url),
      cmocka_unit_test(tls_server_name_is_what_the_certificate_is_checked_against),
      cmocka_unit_test(connections_are_http1_and_keep_their_tls_buffers),
      cmocka_unit_test(writes_with_no_time_limit_go_through),
      cmocka_unit_test(a_body_over_the_server_s_limit_gets_its_413),
      cmocka_unit_test(an_environment_proxy_is_not_used_for_a_loopback_server),
      cmocka_unit_test(the_kubeconfig_proxy_url_carries_every_request),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
