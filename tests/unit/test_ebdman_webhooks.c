/* ebdman's admission webhooks without a server (webhooks.c), answered with
 * kcr_webhook_review: how a child found in a cache is judged
 * (ebdman_child_admit); the validating webhook judging from stores filled by
 * hand; the defaulting webhook's patch applied with the reference applier,
 * then run again on its own result (idempotent: no patch), fields it does
 * not know kept. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ebdman.h"
#include "kcr/base64.h"
#include "kcr/json.h"
#include "kcr/informer.h"
#include "kcr/store.h"
#include "tjsonpatch.h"
#include "twire.h"

typedef struct kcr_meta_v1_object_meta meta;

static const meta want = {.name = {"a", 1}, .namespace_ = {"ns", 2}};

static meta owned_by(struct kcr_meta_v1_owner_reference *ref, const char *api,
                     const char *kind, const char *uid, bool controller)
{
  *ref = (struct kcr_meta_v1_owner_reference){.api_version = kcr_str_c(api),
                                              .kind = kcr_str_c(kind),
                                              .name = kcr_str_c("a"),
                                              .uid = kcr_str_c(uid),
                                              .has_controller = true,
                                              .controller = controller};
  return (meta){.name = kcr_str_c("a"),
                .owner_references = {.v = ref, .n = 1},
                .has_owner_references = true};
}

static void a_child_is_judged_by_its_controller(void **state)
{
  struct kcr_meta_v1_owner_reference ref;
  char msg[1024];
  meta have = {.name = kcr_str_c("a")};

  (void)state;
  assert_int_equal(EBDMAN_ADMIT_ALLOW, ebdman_child_admit("VFM", kcr_str_c("a"), "u1",
                                                          &want, NULL, msg, sizeof(msg)));
  assert_string_equal("", msg);
  /* no owner: someone else's */
  assert_int_equal(EBDMAN_ADMIT_DENY, ebdman_child_admit("VFM", kcr_str_c("a"), "u1",
                                                         &want, &have, msg, sizeof(msg)));
  assert_non_null(strstr(msg, "VFM ns/a exists and is not this EBD's (it has no owner"));
  assert_non_null(strstr(msg, "delete or rename that VFM, or use another EBD name"));
  /* controlled by a ConfigMap */
  have = owned_by(&ref, "v1", "ConfigMap", "c1", true);
  assert_int_equal(EBDMAN_ADMIT_DENY, ebdman_child_admit("VFM", kcr_str_c("a"), "u1",
                                                         &want, &have, msg, sizeof(msg)));
  assert_non_null(strstr(msg, "its controller is ConfigMap a (uid c1)"));
  /* an EBD that owns it without being its controller */
  have = owned_by(&ref, EBDMAN_API_VERSION, "EBD", "u0", false);
  assert_int_equal(EBDMAN_ADMIT_DENY, ebdman_child_admit("VFM", kcr_str_c("a"), "u1",
                                                         &want, &have, msg, sizeof(msg)));
  /* an EBD of another group */
  have = owned_by(&ref, "ebdman.example.org/v1alpha1", "EBD", "u0", true);
  assert_int_equal(EBDMAN_ADMIT_DENY, ebdman_child_admit("VFM", kcr_str_c("a"), "u1",
                                                         &want, &have, msg, sizeof(msg)));
  have = owned_by(&ref, "ebdman.example.com", "EBD", "u0", true);
  assert_int_equal(EBDMAN_ADMIT_DENY, ebdman_child_admit("VFM", kcr_str_c("a"), "u1",
                                                         &want, &have, msg, sizeof(msg)));
  /* a deleted EBD's (another uid, any version of the group): a warning */
  have = owned_by(&ref, "ebdman.example.com/v1beta1", "EBD", "u0", true);
  assert_int_equal(EBDMAN_ADMIT_WARN,
                   ebdman_child_admit("ConfigMap", kcr_str_c("a"), "u1", &want, &have,
                                      msg, sizeof(msg)));
  assert_non_null(
      strstr(msg, "ConfigMap ns/a belongs to an earlier EBD named a (uid u0)"));
  assert_int_equal(EBDMAN_ADMIT_WARN, ebdman_child_admit("VFM", kcr_str_c("a"), NULL,
                                                         &want, &have, msg, sizeof(msg)));
  /* an EBD of another name: it stays, so someone else's */
  ref.name = kcr_str_c("b");
  assert_int_equal(EBDMAN_ADMIT_DENY, ebdman_child_admit("VFM", kcr_str_c("a"), "u1",
                                                         &want, &have, msg, sizeof(msg)));
  assert_non_null(strstr(msg, "its controller is EBD b (uid u0)"));
  ref.name = kcr_str_c("a");
  /* the EBD's own */
  assert_int_equal(
      EBDMAN_ADMIT_ALLOW,
      ebdman_child_admit("VFM", kcr_str_c("a"), "u0", &want, &have, msg, sizeof(msg)));
  assert_string_equal("", msg);
  /* msg may be left out */
  assert_int_equal(EBDMAN_ADMIT_WARN, ebdman_child_admit("VFM", kcr_str_c("a"), "u1",
                                                         &want, &have, NULL, 0));
}

#define EBD_NO_IMAGE                                                                     \
  "{\"apiVersion\":\"ebdman.example.com/v1beta1\",\"kind\":\"EBD\",\"metadata\":{"       \
  "\"name\":\"a\",\"namespace\":\"ns\",\"uid\":\"u1\",\"labels\":{\"x/y\":\"1\"}},"      \
  "\"spec\":{\"vfmTemplate\":{\"replicas\":1,\"config\":{\"k\":\"v\"}},\"future\":[1,2]" \
  "},"                                                                                   \
  "\"status\":{\"observedGeneration\":0}}"
#define EBD_IMAGE                                                                        \
  "{\"apiVersion\":\"ebdman.example.com/v1beta1\",\"kind\":\"EBD\",\"metadata\":{"       \
  "\"name\":\"a\",\"namespace\":\"ns\"},\"spec\":{\"vfmTemplate\":{\"image\":\"mine:"    \
  "2\"}}}"

#define EBD_BAD_REPLICAS                                                                 \
  "{\"apiVersion\":\"ebdman.example.com/v1beta1\",\"kind\":\"EBD\",\"metadata\":{"       \
  "\"name\":\"a\",\"namespace\":\"ns\"},\"spec\":{\"vfmTemplate\":{\"replicas\":"        \
  "\"three\"}}}"

static char *review(const char *op, const char *obj)
{
  char *s;
  assert_true(
      asprintf(&s,
               "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\","
               "\"request\":{\"uid\":\"r1\",\"kind\":{\"group\":\"ebdman.example.com\","
               "\"version\":\"v1alpha1\",\"kind\":\"EBD\"},\"resource\":{\"group\":"
               "\"ebdman.example.com\",\"version\":\"v1alpha1\",\"resource\":\"ebds\"},"
               "\"name\":\"a\",\"namespace\":\"ns\",\"operation\":\"%s\","
               "\"userInfo\":{\"username\":\"alice\"},\"object\":%s,\"oldObject\":%s}}",
               op, strcmp(op, "DELETE") ? obj : "null",
               strcmp(op, "CREATE") ? obj : "null") > 0);
  return s;
}

/* The answer to a review of obj by a webhook; *patch its JSON Patch
 * (NULL: none). Asserts it was allowed. */
/* No EBDs: an empty list, then a watch with nothing to say. */
static kcr_err no_ebds(struct twire_call *call, void *ud)
{
  (void)ud;
  if(!call->req->watch)
    return twire_reply(call, 200,
                       "{\"kind\":\"EBDList\",\"metadata\":{\"resourceVersion\":\"1\"},"
                       "\"items\":[]}");
  twire_stream(call, 200);
  twire_wait_cancel(call, 30000);
  return KCR_OK;
}

static const struct kcr_gvr ebds_gvr = {"ebdman.example.com", "v1beta1", "ebds", true};

/* An EBD informer of the namespaces of opts (client and gvr filled in),
 * started and synced when sync: what the webhooks ask which namespaces
 * are ebdman's. */
static kcr_informer *ebds_informer(struct kcr_informer_opts o, bool sync)
{
  kcr_client *cl = twire_client(no_ebds, NULL);
  kcr_informer *inf;
  o.client = cl;
  o.gvr = &ebds_gvr;
  assert_int_equal(KCR_OK, kcr_informer_new(&o, &inf, NULL));
  kcr_client_free(cl); /* the informer holds its own reference */
  if(sync) {
    assert_int_equal(KCR_OK, kcr_informer_start(inf));
    assert_true(kcr_informer_wait_synced(inf, 30000));
  }
  return inf;
}

/* --namespace ns */
static kcr_informer *ebds_of(const char *ns)
{
  return ebds_informer(
      (struct kcr_informer_opts){.namespaces = (const char *[]){ns, NULL}}, true);
}

static void answer(const struct kcr_webhook_opts *o, const char *op, const char *obj,
                   char **patch, char **warning)
{
  struct kcr_buf out = KCR_BUF_INIT;
  char *body = review(op, obj);
  cJSON *t = NULL;
  const char *b64;

  assert_int_equal(KCR_OK,
                   kcr_webhook_review(o, body, strlen(body), "application/json", &out));
  assert_int_equal(KCR_OK, kcr_json_parse(out.ptr, out.len, &t, NULL));
  assert_true(cJSON_IsTrue(kcr_json_at(t, "/response/allowed")));
  *patch = NULL;
  if((b64 = kcr_json_str(t, "/response/patch"))) {
    unsigned char *p;
    size_t n;
    assert_string_equal("JSONPatch", kcr_json_str(t, "/response/patchType"));
    assert_int_equal(KCR_OK, kcr_base64_decode(b64, strlen(b64), &p, &n));
    *patch = (char *)p;
  }
  if(warning) {
    const char *w = kcr_json_str(t, "/response/warnings/0");
    *warning = w ? strdup(w) : NULL;
  }
  cJSON_Delete(t);
  kcr_buf_cleanup(&out);
  free(body);
}

static void the_image_is_defaulted_once(void **state)
{
  struct ebdman_webhooks w = {.default_image = "registry.example.com/vfm:1.0"};
  struct kcr_webhook_opts o = {.path = EBDMAN_MUTATE_PATH,
                               .admit = ebdman_default_ebd,
                               .ud = &w,
                               .mutating = true};
  static const char *const ops[] = {"CREATE", "UPDATE"};
  char *patch, *applied, *again;
  const char *why;

  (void)state;
  for(size_t i = 0; i < 2; i++) {
    answer(&o, ops[i], EBD_NO_IMAGE, &patch, NULL);
    assert_non_null(patch);
    assert_string_equal("[{\"op\":\"add\",\"path\":\"/spec/vfmTemplate/image\",\"value\":"
                        "\"registry.example.com/vfm:1.0\"}]",
                        patch);
    applied = tjp_apply(EBD_NO_IMAGE, strlen(EBD_NO_IMAGE), patch, strlen(patch), &why);
    assert_non_null(applied);
    /* what the typed EBD does not know (spec.future) is kept */
    assert_non_null(strstr(applied, "\"future\":[1,2]"));
    /* idempotent: on its own result it patches nothing */
    answer(&o, ops[i], applied, &again, NULL);
    assert_null(again);
    free(applied);
    free(patch);
  }
  /* an image given is kept; deletions are not mutated */
  answer(&o, "CREATE", EBD_IMAGE, &patch, NULL);
  assert_null(patch);
  answer(&o, "DELETE", EBD_NO_IMAGE, &patch, NULL);
  assert_null(patch);
  /* not an EBD (mutating webhooks run before the schema): left for the
   * schema to refuse, not answered with an error */
  answer(&o, "CREATE", EBD_BAD_REPLICAS, &patch, NULL);
  assert_null(patch);
  /* another namespace than the one managed: untouched - once the informer
   * knows its namespaces; before, judged (a selector's are not known yet) */
  w.ebds =
      ebds_informer((struct kcr_informer_opts){.namespace_selector = "team=x"}, false);
  answer(&o, "CREATE", EBD_NO_IMAGE, &patch, NULL);
  assert_non_null(patch);
  free(patch);
  kcr_informer_free(w.ebds);
  w.ebds = ebds_of("other");
  answer(&o, "CREATE", EBD_NO_IMAGE, &patch, NULL);
  assert_null(patch);
  kcr_informer_free(w.ebds);
  w.ebds = ebds_of("ns");
  answer(&o, "CREATE", EBD_NO_IMAGE, &patch, NULL);
  assert_non_null(patch);
  free(patch);
  kcr_informer_free(w.ebds);
  w.ebds = NULL;
  /* no default configured: nothing */
  w.default_image = NULL;
  answer(&o, "CREATE", EBD_NO_IMAGE, &patch, NULL);
  assert_null(patch);
}

/* Puts the object of JSON text json into store s. */
static void put(kcr_store *s, const char *json)
{
  cJSON *t = NULL;
  kcr_obj *o = NULL, *old = NULL;
  assert_int_equal(KCR_OK, kcr_json_parse(json, strlen(json), &t, NULL));
  assert_int_equal(KCR_OK, kcr_obj_from_json(t, 0, &o, NULL));
  assert_int_equal(KCR_OK, kcr_store_put(s, o, &old));
  assert_null(old);
  cJSON_Delete(t);
}

#define EBD_NAMED(name, uid)                                                             \
  "{\"apiVersion\":\"ebdman.example.com/v1beta1\",\"kind\":\"EBD\",\"metadata\":{"       \
  "\"name\":\"" name "\",\"namespace\":\"ns\",\"uid\":\"" uid "\"},"                     \
  "\"spec\":{\"vfmTemplate\":{\"image\":\"x:1\"}}}"
#define OWNED_BY(kind, name, uid)                                                        \
  "\"ownerReferences\":[{\"apiVersion\":\"" kind "\",\"kind\":\"" name "\","             \
  "\"name\":\"old\",\"uid\":\"" uid "\",\"controller\":true}]"

/* The answer's allowed, its Status message (or "") and first warning (or
 * ""), for a review of obj by the validating webhook of w. */
static bool validated(struct ebdman_webhooks *w, const char *op, const char *obj,
                      const char *ns, char *msg, size_t n, char *warning, size_t nw)
{
  struct kcr_webhook_opts o = {
      .path = EBDMAN_VALIDATE_PATH, .admit = ebdman_validate_ebd, .ud = w};
  struct kcr_buf out = KCR_BUF_INIT, body = KCR_BUF_INIT;
  cJSON *t = NULL;
  const char *s;
  bool allowed;

  kcr_buf_printf(&body,
                 "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\","
                 "\"request\":{\"uid\":\"r1\",\"kind\":{\"group\":\"ebdman.example.com\","
                 "\"version\":\"v1alpha1\",\"kind\":\"EBD\"},\"namespace\":\"%s\","
                 "\"operation\":\"%s\",\"userInfo\":{\"username\":\"alice\"},"
                 "\"object\":%s}}",
                 ns, op, obj);
  assert_int_equal(KCR_OK,
                   kcr_webhook_review(&o, body.ptr, body.len, "application/json", &out));
  assert_int_equal(KCR_OK, kcr_json_parse(out.ptr, out.len, &t, NULL));
  allowed = cJSON_IsTrue(kcr_json_at(t, "/response/allowed"));
  s = kcr_json_str(t, "/response/status/message");
  snprintf(msg, n, "%s", s ? s : "");
  s = kcr_json_str(t, "/response/warnings/0");
  snprintf(warning, nw, "%s", s ? s : "");
  if(!allowed)
    assert_int_equal(403,
                     (int)cJSON_GetNumberValue(kcr_json_at(t, "/response/status/code")));
  cJSON_Delete(t);
  kcr_buf_cleanup(&out);
  kcr_buf_cleanup(&body);
  return allowed;
}

static void a_taken_child_name_is_refused_from_the_caches(void **state)
{
  struct ebdman_webhooks w = {0};
  char msg[1024], warning[512];

  (void)state;
  assert_int_equal(KCR_OK, kcr_store_new(NULL, &w.vfms, NULL));
  assert_int_equal(KCR_OK, kcr_store_new(NULL, &w.cms, NULL));
  /* without caches, everything passes */
  assert_true(validated(&w, "CREATE", EBD_NAMED("taken", "u1"), "ns", msg, sizeof(msg),
                        warning, sizeof(warning)));
  put(w.vfms,
      "{\"kind\":\"VFM\",\"metadata\":{\"name\":\"taken\",\"namespace\":\"ns\"}}");
  put(w.cms, "{\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"cm-config\",\"namespace\":"
             "\"ns\"," OWNED_BY("v1", "ConfigMap", "c1") "}}");
  put(w.vfms,
      "{\"kind\":\"VFM\",\"metadata\":{\"name\":\"old\",\"namespace\":\"ns\"," OWNED_BY(
          "ebdman.example.com/v1beta1", "EBD", "u0") "}}");
  /* someone else's VFM, someone else's ConfigMap: refused with the message */
  assert_false(validated(&w, "CREATE", EBD_NAMED("taken", "u1"), "ns", msg, sizeof(msg),
                         warning, sizeof(warning)));
  assert_non_null(
      strstr(msg, "VFM ns/taken exists and is not this EBD's (it has no owner)"));
  assert_false(validated(&w, "CREATE", EBD_NAMED("cm", "u1"), "ns", msg, sizeof(msg),
                         warning, sizeof(warning)));
  assert_non_null(strstr(msg, "ConfigMap ns/cm-config exists and is not this EBD's (its "
                              "controller is ConfigMap old (uid c1)"));
  /* an earlier EBD's of the same name: a warning */
  assert_true(validated(&w, "CREATE", EBD_NAMED("old", "u1"), "ns", msg, sizeof(msg),
                        warning, sizeof(warning)));
  assert_non_null(
      strstr(warning, "VFM ns/old belongs to an earlier EBD named old (uid u0)"));
  /* free names; updates; namespaces ebdman does not manage */
  assert_true(validated(&w, "CREATE", EBD_NAMED("free", "u1"), "ns", msg, sizeof(msg),
                        warning, sizeof(warning)));
  assert_string_equal("", warning);
  assert_true(validated(&w, "UPDATE", EBD_NAMED("taken", "u1"), "ns", msg, sizeof(msg),
                        warning, sizeof(warning)));
  w.ebds = ebds_of("elsewhere");
  assert_true(validated(&w, "CREATE", EBD_NAMED("taken", "u1"), "ns", msg, sizeof(msg),
                        warning, sizeof(warning)));
  kcr_informer_free(w.ebds);
  kcr_store_free(w.vfms);
  kcr_store_free(w.cms);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(a_child_is_judged_by_its_controller),
      cmocka_unit_test(the_image_is_defaulted_once),
      cmocka_unit_test(a_taken_child_name_is_refused_from_the_caches),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
