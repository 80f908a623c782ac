/* A CRD conversion webhook called by the real apiserver: a CRD of this
 * test's own group with versions v1 (spec.name) and v2 (spec.first,
 * spec.last, spec.nick; the storage version and the hub), its conversion
 * webhook served by the manager on 127.0.0.1 with certificates the library
 * makes and writes into the CRD's caBundle. Objects created in either
 * version read back in both (get and list); a nick, which v1 cannot hold,
 * survives a client reading and writing the object through v1. */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "itest.h"
#include "kcr/certs.h"
#include "kcr/manager.h"
#include "kcr/webhook.h"
#include "ttoy.h"

static const struct kcr_gvr crdres = {.group = "apiextensions.k8s.io",
                                      .version = "v1",
                                      .resource = "customresourcedefinitions"};

static kcr_client *cl;
static char *ns;
static char group[128], crdname[160];
static struct kcr_gvr toys1, toys2;

static int setup(void **state)
{
  cl = itest_client();
  ns = itest_namespace(cl, "conv");
  snprintf(group, sizeof(group), "%s.kcr.test", ns);
  snprintf(crdname, sizeof(crdname), "toys.%s", group);
  toys1 = (struct kcr_gvr){
      .group = group, .version = "v1", .resource = "toys", .namespaced = true};
  toys2 = toys1;
  toys2.version = "v2";
  return 0;
}

static int teardown(void **state)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  kcr_delete(cl, &(struct kcr_ref){.gvr = &crdres, .name = crdname}, NULL, NULL, &ei);
  kcr_errinfo_cleanup(&ei);
  itest_done(cl, ns);
  return 0;
}

/* ---- fixtures -------------------------------------------------------------- */

static void install_crd(int port)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  cJSON *crd = itest_json(
      "{\"apiVersion\":\"apiextensions.k8s.io/v1\",\"kind\":\"CustomResourceDefinition\","
      "\"metadata\":{\"name\":\"%s\"},\"spec\":{\"group\":\"%s\",\"scope\":"
      "\"Namespaced\","
      "\"names\":{\"plural\":\"toys\",\"singular\":\"toy\",\"kind\":\"Toy\",\"listKind\":"
      "\"ToyList\"},"
      "\"conversion\":{\"strategy\":\"Webhook\",\"webhook\":{"
      "\"conversionReviewVersions\":"
      "[\"v1\"],\"clientConfig\":{\"url\":\"https://127.0.0.1:%d/convert\"}}},"
      "\"versions\":["
      "{\"name\":\"v1\",\"served\":true,\"storage\":false,\"schema\":{"
      "\"openAPIV3Schema\":{"
      "\"type\":\"object\",\"properties\":{\"spec\":{\"type\":\"object\",\"properties\":{"
      "\"name\":{\"type\":\"string\"}}}}}}},"
      "{\"name\":\"v2\",\"served\":true,\"storage\":true,\"schema\":{\"openAPIV3Schema\":"
      "{"
      "\"type\":\"object\",\"properties\":{\"spec\":{\"type\":\"object\",\"properties\":{"
      "\"first\":{\"type\":\"string\"},\"last\":{\"type\":\"string\"},"
      "\"nick\":{\"type\":\"string\"}}}}}}}]}}",
      crdname, group, port);
  itest_expect(KCR_OK,
               kcr_create(cl, &(struct kcr_ref){.gvr = &crdres}, crd, NULL, NULL, &ei),
               &ei);
  cJSON_Delete(crd);
}

/* True once the CRD is established and its conversion webhook has a
 * caBundle. */
static bool crd_ready(void)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  cJSON *crd = NULL;
  bool est = false;

  itest_expect(KCR_OK,
               kcr_get(cl, &(struct kcr_ref){.gvr = &crdres, .name = crdname}, &crd, &ei),
               &ei);
  cJSON *c;
  cJSON_ArrayForEach(c, kcr_json_at(crd, "/status/conditions"))
  {
    const char *t = kcr_json_str(c, "/type"), *s = kcr_json_str(c, "/status");
    if(t && s && !strcmp(t, "Established") && !strcmp(s, "True"))
      est = true;
  }
  bool ok = est && kcr_json_str(crd, "/spec/conversion/webhook/clientConfig/caBundle");
  cJSON_Delete(crd);
  return ok;
}

static cJSON *get(const struct kcr_gvr *g, const char *name)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  cJSON *o = NULL;
  itest_expect(KCR_OK,
               kcr_get(cl, &(struct kcr_ref){.gvr = g, .ns = ns, .name = name}, &o, &ei),
               &ei);
  return o;
}

static void objects_read_and_write_in_both_versions(void **state)
{
  struct kcr_config_opts co = {0};
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  static const char *const ips[] = {"127.0.0.1", NULL};
  const char *const crds[] = {crdname, NULL};
  char secret[200];
  struct itest_run r = {0};
  kcr_err rc = KCR_OK;

  snprintf(secret, sizeof(secret), "%s-certs", ns);
  struct kcr_certs_opts certs = {
      .ns = ns, .secret = secret, .ip_addresses = ips, .crds = crds, .poll_ms = 500};
  struct kcr_manager_opts mo = {.name = "conversion-test",
                                .webhook_addr = "127.0.0.1:0",
                                .webhook_certs = &certs,
                                .no_signals = true};
  itest_expect(KCR_OK, kcr_config_load(&co, &mo.config, &ei), &ei);
  itest_expect(KCR_OK, kcr_manager_new(&mo, &r.m, &ei), &ei);
  kcr_config_free(mo.config);
  const struct kcr_conversion_version v1 = {"v1", ttoy_v1_to_hub, ttoy_v1_from_hub};
  itest_expect(
      KCR_OK,
      kcr_manager_add_conversion(r.m,
                                 &(struct kcr_conversion_opts){.path = "/convert",
                                                               .group = group,
                                                               .hub = "v2",
                                                               .versions = &v1,
                                                               .nversions = 1},
                                 &ei),
      &ei);
  itest_run_start(&r, r.m);
  install_crd(kcr_manager_webhook_port(r.m));
  for(int i = 0; i < 200 && !crd_ready(); i++)
    itest_sleep_ms(100);
  assert_true(crd_ready());

  /* created in v1 (stored as v2: converted on the way in); the first
   * creates may meet a CRD not served yet or a caBundle not yet in use */
  cJSON *o =
      itest_json("{\"apiVersion\":\"%s/v1\",\"kind\":\"Toy\",\"metadata\":{\"name\":"
                 "\"ada\"},\"spec\":{\"name\":\"Ada Lovelace\"}}",
                 group);
  for(int i = 0; i < 100; i++) {
    kcr_errinfo_cleanup(&ei);
    rc = kcr_create(cl, &(struct kcr_ref){.gvr = &toys1, .ns = ns}, o, NULL, NULL, &ei);
    if(!rc)
      break;
    itest_sleep_ms(200);
  }
  itest_expect(KCR_OK, rc, &ei);
  cJSON_Delete(o);
  cJSON *in2 = get(&toys2, "ada");
  assert_string_equal("Ada", kcr_json_str(in2, "/spec/first"));
  assert_string_equal("Lovelace", kcr_json_str(in2, "/spec/last"));
  cJSON_Delete(in2);
  cJSON *in1 = get(&toys1, "ada");
  assert_string_equal("Ada Lovelace", kcr_json_str(in1, "/spec/name"));
  cJSON_Delete(in1);

  /* created in v2 with a nick; read through v1 and written back through v1
   * with another name: the nick stays, the name change lands */
  o = itest_json("{\"apiVersion\":\"%s/v2\",\"kind\":\"Toy\",\"metadata\":{\"name\":"
                 "\"grace\"},\"spec\":{\"first\":\"Grace\",\"last\":\"Hopper\",\"nick\":"
                 "\"Amazing Grace\"}}",
                 group);
  itest_expect(
      KCR_OK,
      kcr_create(cl, &(struct kcr_ref){.gvr = &toys2, .ns = ns}, o, NULL, NULL, &ei),
      &ei);
  cJSON_Delete(o);
  in1 = get(&toys1, "grace");
  assert_string_equal("Grace Hopper", kcr_json_str(in1, "/spec/name"));
  assert_non_null(kcr_json_str(in1, "/metadata/annotations/conversion.kcr.io~1hub-data"));
  kcr_json_set_str(in1, "/spec/name", "Grace Murray");
  itest_expect(KCR_OK,
               kcr_update(cl, &(struct kcr_ref){.gvr = &toys1, .ns = ns, .name = "grace"},
                          in1, NULL, NULL, &ei),
               &ei);
  cJSON_Delete(in1);
  in2 = get(&toys2, "grace");
  assert_string_equal("Grace", kcr_json_str(in2, "/spec/first"));
  assert_string_equal("Murray", kcr_json_str(in2, "/spec/last"));
  assert_string_equal("Amazing Grace", kcr_json_str(in2, "/spec/nick"));
  assert_null(kcr_json_at(in2, "/metadata/annotations")); /* never seen in the hub */
  cJSON_Delete(in2);

  /* lists in both versions */
  for(int v = 1; v <= 2; v++) {
    cJSON *list = NULL;
    itest_expect(KCR_OK,
                 kcr_list(cl,
                          &(struct kcr_ref){.gvr = v == 1 ? &toys1 : &toys2, .ns = ns},
                          NULL, &list, &ei),
                 &ei);
    cJSON *items = kcr_json_at(list, "/items");
    assert_int_equal(2, cJSON_GetArraySize(items));
    cJSON *it;
    cJSON_ArrayForEach(it, items)
    {
      char want[160];
      snprintf(want, sizeof(want), "%s/v%d", group, v);
      assert_string_equal(want, kcr_json_str(it, "/apiVersion"));
      assert_non_null(kcr_json_str(it, v == 1 ? "/spec/name" : "/spec/first"));
    }
    cJSON_Delete(list);
  }
  kcr_errinfo_cleanup(&ei);
  /* the objects go before the webhook does (the namespace's deletion
   * would need it) */
  kcr_delete(cl, &(struct kcr_ref){.gvr = &crdres, .name = crdname}, NULL, NULL, &ei);
  kcr_errinfo_cleanup(&ei);
  itest_run_stop(&r, 0);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(objects_read_and_write_in_both_versions, setup,
                                      teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
