/* Webhook certificates the library makes and rotates (kcr/certs.h), with
 * the real apiserver calling the webhook the whole time: two replicas (one
 * leads) made at once share one Secret and serve the same certificate; the
 * leader writes the caBundle; with lifetimes in seconds both a CA rotation
 * and serving-certificate renewals happen while dry-run creates go on
 * through a failurePolicy Fail webhook, and none of them fails; a replica
 * started after the rotation serves the new certificate.
 *
 * Short form (CI): a 45 s CA, a 15 s serving certificate, 20 creates per
 * second for 60 s. KCR_CERTS_LONG=1: a 120 s CA, a 40 s certificate, 100
 * per second for 240 s. */
#include <curl/curl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "itest.h"
#include "kcr/certs.h"
#include "kcr/manager.h"
#include "kcr/time.h"
#include "kcr/webhook.h"
#include "runtime/tlscert-int.h"

static const struct kcr_gvr cms = {"", "v1", "configmaps", true};
static const struct kcr_gvr secrets = {"", "v1", "secrets", true};
static const struct kcr_gvr vwcs = {"admissionregistration.k8s.io", "v1",
                                    "validatingwebhookconfigurations", false};

static kcr_client *cl;
static char *ns;
static char cfgname[128];

static int setup(void **state)
{
  cl = itest_client();
  ns = itest_namespace(cl, "whcerts");
  snprintf(cfgname, sizeof(cfgname), "%s", ns);
  return 0;
}

static int teardown(void **state)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  kcr_delete(cl, &(struct kcr_ref){&vwcs, NULL, cfgname}, NULL, NULL, &ei);
  kcr_errinfo_cleanup(&ei);
  itest_done(cl, ns);
  return 0;
}

static atomic_long admitted;

static kcr_err allow(kcr_admission *adm, const struct kcr_admission_request *rq, void *ud)
{
  atomic_fetch_add(&admitted, 1);
  return KCR_OK;
}

/* ---- replicas ------------------------------------------------------------- */

struct replica {
  kcr_manager *m;
  pthread_t th;
  int status;
  bool leads;
};

static bool replica_leads(void *ud) { return ((struct replica *)ud)->leads; }

static void *run_main(void *p)
{
  struct replica *r = p;
  r->status = kcr_manager_run(r->m);
  return NULL;
}

static struct {
  long ca_s, cert_s, rate, seconds;
} mode;

static void replica_start(struct replica *r, bool leads)
{
  struct kcr_config_opts co = {0};
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  static const char *const ips[] = {"127.0.0.1", NULL};
  const char *const names[] = {cfgname, NULL};
  char secret[160];

  snprintf(secret, sizeof(secret), "%s-webhook-certs", ns);
  r->leads = leads;
  struct kcr_certs_opts certs = {.ns = ns,
                                 .secret = secret,
                                 .ip_addresses = ips,
                                 .validating_webhooks = names,
                                 .leading = replica_leads,
                                 .leading_ud = r,
                                 .ca_lifetime_ms = (uint64_t)mode.ca_s * 1000,
                                 .cert_lifetime_ms = (uint64_t)mode.cert_s * 1000,
                                 .grace_ms = 4000,
                                 .poll_ms = 1000};
  struct kcr_manager_opts mo = {.name = "webhook-certs-test",
                                .webhook_addr = "127.0.0.1:0",
                                .webhook_certs = &certs,
                                .no_signals = true};
  itest_expect(KCR_OK, kcr_config_load(&co, &mo.config, &ei), &ei);
  itest_expect(KCR_OK, kcr_manager_new(&mo, &r->m, &ei), &ei);
  kcr_config_free(mo.config);
  itest_expect(
      KCR_OK,
      kcr_manager_add_webhook(
          r->m, &(struct kcr_webhook_opts){.path = "/validate", .admit = allow}, &ei),
      &ei);
  assert_int_equal(0, pthread_create(&r->th, NULL, run_main, r));
}

static void replica_stop(struct replica *r)
{
  kcr_manager_stop(r->m);
  pthread_join(r->th, NULL);
  assert_int_equal(0, r->status);
  kcr_manager_free(r->m);
}

/* ---- what a replica serves ------------------------------------------------ */

static size_t sink(char *p, size_t sz, size_t n, void *ud) { return sz * n; }

/* The leaf certificate served on port, its base64 body (caller frees);
 * NULL when no handshake. */
static char *served(int port)
{
  CURL *c = curl_easy_init();
  struct curl_certinfo *ci = NULL;
  char url[128], *got = NULL;

  snprintf(url, sizeof(url), "https://127.0.0.1:%d/validate", port);
  curl_easy_setopt(c, CURLOPT_URL, url);
  curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
  curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 0L);
  curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 0L);
  curl_easy_setopt(c, CURLOPT_CERTINFO, 1L);
  curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
  curl_easy_setopt(c, CURLOPT_TIMEOUT, 10L);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, sink);
  if(curl_easy_perform(c) == CURLE_OK &&
     curl_easy_getinfo(c, CURLINFO_CERTINFO, &ci) == CURLE_OK && ci && ci->num_of_certs)
    for(struct curl_slist *s = ci->certinfo[0]; s; s = s->next)
      if(!strncmp(s->data, "Cert:", 5))
        got = strdup(s->data + 5);
  curl_easy_cleanup(c);
  return got;
}

static bool same_served(int a, int b)
{
  char *x = served(a), *y = served(b);
  bool same = x && y && !strcmp(x, y);
  free(x);
  free(y);
  return same;
}

/* The Secret's data member, decoded (caller frees). */
static char *secret_data(const char *name)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  char secret[160], path[64];
  cJSON *s = NULL;
  unsigned char *out = NULL;
  size_t n;

  snprintf(secret, sizeof(secret), "%s-webhook-certs", ns);
  itest_expect(KCR_OK, kcr_get(cl, &(struct kcr_ref){&secrets, ns, secret}, &s, &ei),
               &ei);
  snprintf(path, sizeof(path), "/data/%s", name);
  const char *b64 = kcr_json_str(s, path);
  if(b64)
    assert_int_equal(KCR_OK, kcr_base64_decode(b64, strlen(b64), &out, &n));
  cJSON_Delete(s);
  return (char *)out;
}

/* ---- load ----------------------------------------------------------------- */

struct load {
  atomic_bool stop;
  long sent, failed;
  char first_error[512];
};

static void *dry_run_creates(void *p)
{
  struct load *l = p;
  long gap_us = 1000000 / mode.rate;

  while(!atomic_load(&l->stop)) {
    struct kcr_errinfo ei = KCR_ERRINFO_INIT;
    cJSON *obj = itest_json("{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{"
                            "\"generateName\":\"dry-\",\"labels\":{\"kcr.test/webhook\":"
                            "\"yes\"}}}");
    kcr_err rc = kcr_create(cl, &(struct kcr_ref){&cms, ns}, obj,
                            &(struct kcr_write_opts){.dry_run = true}, NULL, &ei);
    cJSON_Delete(obj);
    l->sent++;
    if(rc) {
      if(!l->failed++)
        snprintf(l->first_error, sizeof(l->first_error), "%s",
                 ei.message ? ei.message : kcr_strerror(rc));
    }
    kcr_errinfo_cleanup(&ei);
    usleep((useconds_t)gap_us);
  }
  return NULL;
}

static void install_config(int port)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  cJSON *v = itest_json(
      "{\"apiVersion\":\"admissionregistration.k8s.io/v1\","
      "\"kind\":\"ValidatingWebhookConfiguration\",\"metadata\":{\"name\":\"%s\"},"
      "\"webhooks\":[{\"name\":\"certs.kcr.test\","
      "\"clientConfig\":{\"url\":\"https://127.0.0.1:%d/validate\"},"
      "\"rules\":[{\"apiGroups\":[\"\"],\"apiVersions\":[\"v1\"],"
      "\"operations\":[\"CREATE\"],\"resources\":[\"configmaps\"],\"scope\":"
      "\"Namespaced\"}],"
      "\"namespaceSelector\":{\"matchLabels\":{\"kubernetes.io/metadata.name\":\"%s\"}},"
      "\"objectSelector\":{\"matchLabels\":{\"kcr.test/webhook\":\"yes\"}},"
      "\"sideEffects\":\"None\",\"admissionReviewVersions\":[\"v1\"],"
      "\"failurePolicy\":\"Fail\",\"timeoutSeconds\":5}]}",
      cfgname, port, ns);
  itest_expect(KCR_OK, kcr_create(cl, &(struct kcr_ref){&vwcs}, v, NULL, NULL, &ei), &ei);
  cJSON_Delete(v);
}

/* True once the configuration's caBundle holds the Secret's ca.crt. */
static bool bundle_written(void)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  cJSON *v = NULL;
  char *ca = secret_data("ca.crt");
  bool ok = false;

  itest_expect(KCR_OK, kcr_get(cl, &(struct kcr_ref){&vwcs, NULL, cfgname}, &v, &ei),
               &ei);
  const char *b64 = kcr_json_str(v, "/webhooks/0/clientConfig/caBundle");
  unsigned char *got = NULL;
  size_t n;
  if(b64 && ca && !kcr_base64_decode(b64, strlen(b64), &got, &n))
    ok = !strcmp((char *)got, ca);
  free(got);
  free(ca);
  cJSON_Delete(v);
  return ok;
}

static void certificates_rotate_under_load_without_an_error(void **state)
{
  struct replica a = {0}, b = {0}, late = {0};
  struct load l = {0};
  pthread_t load_th;
  char *ca0, *ca1, *leaf0;

  bool longer = getenv("KCR_CERTS_LONG") && !strcmp(getenv("KCR_CERTS_LONG"), "1");
  mode.ca_s = longer ? 120 : 45;
  mode.cert_s = longer ? 40 : 15;
  mode.rate = longer ? 100 : 20;
  mode.seconds = longer ? 240 : 60;
  assert_int_equal(0, curl_global_init(CURL_GLOBAL_DEFAULT));
  /* two replicas at once: one Secret, the same certificate */
  replica_start(&a, true);
  replica_start(&b, false);
  int pa = 0, pb = 0;
  for(int i = 0; i < 100 && !(pa && pb && same_served(pa, pb)); i++) {
    itest_sleep_ms(100);
    pa = kcr_manager_webhook_port(a.m);
    pb = kcr_manager_webhook_port(b.m);
  }
  assert_true(same_served(pa, pb));
  ca0 = secret_data("ca-signing.crt");
  leaf0 = secret_data("tls.crt");
  assert_non_null(ca0);
  assert_true(kcr__tlscert_issued_by(leaf0, ca0));
  /* the leader writes the caBundle of the configuration */
  install_config(pa);
  for(int i = 0; i < 100 && !bundle_written(); i++)
    itest_sleep_ms(100);
  assert_true(bundle_written());
  /* the apiserver calls the webhook: wait for the first admission */
  for(int i = 0; i < 100; i++) {
    struct kcr_errinfo ei = KCR_ERRINFO_INIT;
    cJSON *obj = itest_json("{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{"
                            "\"generateName\":\"dry-\",\"labels\":{\"kcr.test/webhook\":"
                            "\"yes\"}}}");
    kcr_create(cl, &(struct kcr_ref){&cms, ns}, obj,
               &(struct kcr_write_opts){.dry_run = true}, NULL, &ei);
    cJSON_Delete(obj);
    kcr_errinfo_cleanup(&ei);
    if(atomic_load(&admitted))
      break;
    itest_sleep_ms(100);
  }
  assert_true(atomic_load(&admitted) > 0);
  /* load through a CA rotation and several renewals */
  long before = atomic_load(&admitted);
  assert_int_equal(0, pthread_create(&load_th, NULL, dry_run_creates, &l));
  itest_sleep_ms(mode.seconds * 1000);
  atomic_store(&l.stop, true);
  pthread_join(load_th, NULL);
  fprintf(stderr, "certs: %ld dry-run creates, %ld failed%s%s; %ld admitted\n", l.sent,
          l.failed, l.failed ? ": " : "", l.first_error, atomic_load(&admitted) - before);
  assert_int_equal(0, l.failed);
  assert_true(atomic_load(&admitted) - before >= l.sent);
  /* the CA rotated (the old one no longer signs nor is trusted), the
   * serving certificate was renewed, and both replicas serve the same */
  ca1 = secret_data("ca-signing.crt");
  assert_string_not_equal(ca0, ca1);
  char *bundle = secret_data("ca.crt");
  char *leaf = secret_data("tls.crt");
  assert_true(kcr__tlscert_issued_by(leaf, ca1));
  assert_string_not_equal(leaf0, leaf);
  assert_true(same_served(pa, pb));
  /* a replica started now serves the current certificate */
  replica_start(&late, false);
  int pl = 0;
  for(int i = 0; i < 100 && !(pl && same_served(pa, pl)); i++) {
    itest_sleep_ms(100);
    pl = kcr_manager_webhook_port(late.m);
  }
  assert_true(same_served(pa, pl));
  replica_stop(&late);
  replica_stop(&b);
  replica_stop(&a);
  free(bundle);
  free(leaf);
  free(leaf0);
  free(ca0);
  free(ca1);
  curl_global_cleanup();
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(certificates_rotate_under_load_without_an_error,
                                      setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
