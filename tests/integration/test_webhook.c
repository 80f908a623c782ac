/* Admission webhooks called by the real apiserver: the manager's webhook
 * server on 127.0.0.1 over TLS (a self-signed certificate with the IP SAN
 * 127.0.0.1, its own CA in the caBundle), a validating webhook that denies
 * with a code and a message the client sees, and a mutating one whose JSON
 * Patch the apiserver applies; dryRun, the old object of UPDATE and
 * DELETE, the user; the webhook metrics. The webhook configurations match
 * only this test's namespace and labelled ConfigMaps, and are deleted
 * before the namespace. */
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "itest.h"
#include "kcr/manager.h"
#include "kcr/webhook.h"
#include "core/secret-int.h"
#include "runtime/tlscert-int.h"

static kcr_client *cl;
static char *ns;
static void drop_configs(void);

static int setup(void **state)
{
  cl = itest_client();
  ns = itest_namespace(cl, "webhook");
  return 0;
}

/* The configurations go first, also after a failed assertion: with
 * failurePolicy Fail and no server, deleting the namespace's ConfigMaps
 * would be refused. */
static int teardown(void **state)
{
  drop_configs();
  itest_done(cl, ns);
  return 0;
}

static const struct kcr_gvr cms = {"", "v1", "configmaps", true};
static const struct kcr_gvr vwcs = {"admissionregistration.k8s.io", "v1",
                                    "validatingwebhookconfigurations"};
static const struct kcr_gvr mwcs = {"admissionregistration.k8s.io", "v1",
                                    "mutatingwebhookconfigurations"};

/* What the handlers saw last. */
static struct {
  pthread_mutex_t mu;
  int validated, mutated;
  bool dry_run, had_old, had_object;
  enum kcr_admission_op op;
  char user[128];
} seen = {.mu = PTHREAD_MUTEX_INITIALIZER};

static kcr_err validate(kcr_admission *adm, const struct kcr_admission_request *rq,
                        void *ud)
{
  const struct kcr_str *o = rq->object.s ? &rq->object : &rq->old_object;
  cJSON *t = NULL;
  kcr_err rc = kcr_json_parse(o->s, o->n, &t, kcr_admission_ei(adm));

  if(rc)
    return rc;
  pthread_mutex_lock(&seen.mu);
  seen.validated++;
  seen.dry_run = rq->dry_run;
  seen.had_old = rq->old_object.s != NULL;
  seen.had_object = rq->object.s != NULL;
  seen.op = rq->operation;
  snprintf(seen.user, sizeof(seen.user), "%.*s", KCR_STR_ARG(rq->username));
  pthread_mutex_unlock(&seen.mu);
  if(rq->object.s && kcr_json_at(t, "/data/forbidden"))
    kcr_admission_deny(adm, 422, "data.forbidden is not allowed here");
  if(kcr_json_at(t, "/data/warn"))
    kcr_admission_warn(adm, "data.warn is deprecated");
  cJSON_Delete(t);
  return KCR_OK;
}

/* Adds the label example.com/defaulted=true (idempotent). */
static kcr_err mutate(kcr_admission *adm, const struct kcr_admission_request *rq,
                      void *ud)
{
  cJSON *t = NULL;
  char *text;
  kcr_err rc;

  if(!rq->object.s) /* DELETE: nothing to change */
    return KCR_OK;
  if((rc = kcr_json_parse(rq->object.s, rq->object.n, &t, kcr_admission_ei(adm))))
    return rc;
  pthread_mutex_lock(&seen.mu);
  seen.mutated++;
  pthread_mutex_unlock(&seen.mu);
  kcr_json_set_str(t, "/metadata/labels/example.com~1defaulted", "true");
  text = kcr_json_to_text(t);
  rc = text ? kcr_admission_set_object(adm, text, strlen(text)) : KCR_ENOMEM;
  free(text);
  cJSON_Delete(t);
  return rc;
}

/* ---- fixtures ------------------------------------------------------------- */

static void write_file(const char *path, const char *text)
{
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  assert_int_equal(strlen(text), fwrite(text, 1, strlen(text), f));
  assert_int_equal(0, fclose(f));
}

/* A certificate for 127.0.0.1 in dir/tls.crt and dir/tls.key; its PEM in
 * *cert (caller frees). */
static void make_cert(const char *dir, char **cert)
{
  char path[512], *key;
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;

  itest_expect(KCR_OK, kcr__tlscert_self_signed(cert, &key, &ei), &ei);
  snprintf(path, sizeof(path), "%s/tls.crt", dir);
  write_file(path, *cert);
  snprintf(path, sizeof(path), "%s/tls.key", dir);
  write_file(path, key);
  kcr__wipe_str(key);
}

static char *base64(const char *s)
{
  struct kcr_buf b = KCR_BUF_INIT;
  static const char tab[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  size_t n = strlen(s);

  for(size_t i = 0; i < n; i += 3) {
    unsigned v = (unsigned char)s[i] << 16;
    if(i + 1 < n)
      v |= (unsigned char)s[i + 1] << 8;
    if(i + 2 < n)
      v |= (unsigned char)s[i + 2];
    char q[4] = {tab[(v >> 18) & 63], tab[(v >> 12) & 63],
                 i + 1 < n ? tab[(v >> 6) & 63] : '=', i + 2 < n ? tab[v & 63] : '='};
    kcr_buf_append(&b, q, 4);
  }
  return kcr_buf_take(&b);
}

/* The two webhook configurations, named after the namespace, calling
 * https://127.0.0.1:port/validate and /mutate for labelled ConfigMaps in
 * it. */
static void install_configs(int port, const char *ca)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  char *b64 = base64(ca);
  static const char common[] =
      "\"clientConfig\":{\"url\":\"https://127.0.0.1:%d/%s\",\"caBundle\":\"%s\"},"
      "\"rules\":[{\"apiGroups\":[\"\"],\"apiVersions\":[\"v1\"],"
      "\"operations\":[\"CREATE\",\"UPDATE\",\"DELETE\"],\"resources\":[\"configmaps\"],"
      "\"scope\":\"Namespaced\"}],"
      "\"namespaceSelector\":{\"matchLabels\":{\"kubernetes.io/metadata.name\":\"%s\"}},"
      "\"objectSelector\":{\"matchLabels\":{\"kcr.test/webhook\":\"yes\"}},"
      "\"sideEffects\":\"None\",\"admissionReviewVersions\":[\"v1\"],"
      "\"failurePolicy\":\"Fail\",\"timeoutSeconds\":5";
  char fmt[2048];

  snprintf(fmt, sizeof(fmt),
           "{\"apiVersion\":\"admissionregistration.k8s.io/v1\","
           "\"kind\":\"ValidatingWebhookConfiguration\",\"metadata\":{\"name\":\"%%s\"},"
           "\"webhooks\":[{\"name\":\"validate.kcr.test\",%s}]}",
           common);
  cJSON *v = itest_json(fmt, ns, port, "validate", b64, ns);
  itest_expect(KCR_OK, kcr_create(cl, &(struct kcr_ref){&vwcs}, v, NULL, NULL, &ei), &ei);
  snprintf(
      fmt, sizeof(fmt),
      "{\"apiVersion\":\"admissionregistration.k8s.io/v1\","
      "\"kind\":\"MutatingWebhookConfiguration\",\"metadata\":{\"name\":\"%%s\"},"
      "\"webhooks\":[{\"name\":\"mutate.kcr.test\",\"reinvocationPolicy\":\"IfNeeded\","
      "%s}]}",
      common);
  cJSON *mu = itest_json(fmt, ns, port, "mutate", b64, ns);
  itest_expect(KCR_OK, kcr_create(cl, &(struct kcr_ref){&mwcs}, mu, NULL, NULL, &ei),
               &ei);
  cJSON_Delete(v);
  cJSON_Delete(mu);
  free(b64);
  kcr_errinfo_cleanup(&ei);
}

static void drop_configs(void)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  kcr_err rc = kcr_delete(cl, &(struct kcr_ref){&vwcs, NULL, ns}, NULL, NULL, &ei);
  if(rc != KCR_ENOTFOUND)
    itest_expect(KCR_OK, rc, &ei);
  rc = kcr_delete(cl, &(struct kcr_ref){&mwcs, NULL, ns}, NULL, NULL, &ei);
  if(rc != KCR_ENOTFOUND)
    itest_expect(KCR_OK, rc, &ei);
  kcr_errinfo_cleanup(&ei);
}

static cJSON *configmap(const char *name, const char *data)
{
  return itest_json("{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{"
                    "\"name\":\"%s\",\"labels\":{\"kcr.test/webhook\":\"yes\"}},"
                    "\"data\":%s}",
                    name, data);
}

/* ---- the test ------------------------------------------------------------- */

static void the_apiserver_calls_validating_and_mutating_webhooks(void **state)
{
  struct kcr_config_opts co = {0};
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  char dir[] = "/tmp/kcr-webhook-XXXXXX", *ca, *metrics;
  struct itest_run r = {0};
  cJSON *obj, *out = NULL;
  struct kcr_buf text = KCR_BUF_INIT;
  kcr_err rc;

  assert_non_null(mkdtemp(dir));
  make_cert(dir, &ca);
  struct kcr_manager_opts mo = {.name = "webhook-test",
                                .webhook_addr = "127.0.0.1:0",
                                .webhook_cert_dir = dir,
                                .no_signals = true};
  itest_expect(KCR_OK, kcr_config_load(&co, &mo.config, &ei), &ei);
  itest_expect(KCR_OK, kcr_manager_new(&mo, &r.m, &ei), &ei);
  kcr_config_free(mo.config);
  assert_true(kcr_manager_webhook_port(r.m) > 0);
  itest_expect(
      KCR_OK,
      kcr_manager_add_webhook(
          r.m, &(struct kcr_webhook_opts){.path = "/validate", .admit = validate}, &ei),
      &ei);
  itest_expect(KCR_OK,
               kcr_manager_add_webhook(r.m,
                                       &(struct kcr_webhook_opts){.path = "/mutate",
                                                                  .name = "defaulter",
                                                                  .admit = mutate,
                                                                  .mutating = true},
                                       &ei),
               &ei);
  /* the same path twice is refused */
  assert_int_equal(
      KCR_EEXIST,
      kcr_manager_add_webhook(
          r.m, &(struct kcr_webhook_opts){.path = "/validate", .admit = validate}, &ei));
  kcr_errinfo_cleanup(&ei);
  itest_run_start(&r, r.m);
  install_configs(kcr_manager_webhook_port(r.m), ca);

  /* The configurations reach the apiserver's admission chain within a
   * moment: create until the mutation shows. */
  const char *label = NULL;
  for(int i = 0; i < 100 && !label; i++) {
    obj = configmap("allowed", "{\"k\":\"v\"}");
    rc = kcr_create(cl, &(struct kcr_ref){&cms, ns}, obj, NULL, &out, &ei);
    cJSON_Delete(obj);
    itest_expect(KCR_OK, rc, &ei);
    label = kcr_json_str(out, "/metadata/labels/example.com~1defaulted");
    if(!label) {
      cJSON_Delete(out);
      out = NULL;
      itest_expect(
          KCR_OK, kcr_delete(cl, &(struct kcr_ref){&cms, ns, "allowed"}, NULL, NULL, &ei),
          &ei);
      itest_sleep_ms(100);
    }
  }
  assert_non_null(label); /* the patch applied by the apiserver */
  assert_string_equal("true", label);
  assert_string_equal("yes", kcr_json_str(out, "/metadata/labels/kcr.test~1webhook"));
  cJSON_Delete(out);
  pthread_mutex_lock(&seen.mu);
  assert_int_equal(KCR_ADMISSION_CREATE, seen.op);
  assert_false(seen.dry_run);
  assert_false(seen.had_old);
  assert_true(strlen(seen.user) > 0); /* the test's user, as the apiserver knows it */
  pthread_mutex_unlock(&seen.mu);

  /* denied: the client sees the code (422: KCR_EINVALID) and the message */
  obj = configmap("denied", "{\"forbidden\":\"x\"}");
  rc = kcr_create(cl, &(struct kcr_ref){&cms, ns}, obj, NULL, NULL, &ei);
  cJSON_Delete(obj);
  assert_int_equal(KCR_EINVALID, rc);
  assert_non_null(ei.message);
  assert_non_null(strstr(ei.message, "data.forbidden is not allowed here"));
  assert_non_null(strstr(ei.message, "validate.kcr.test"));
  kcr_errinfo_cleanup(&ei);
  assert_int_equal(KCR_ENOTFOUND,
                   kcr_get(cl, &(struct kcr_ref){&cms, ns, "denied"}, NULL, &ei));
  kcr_errinfo_cleanup(&ei);

  /* dryRun: the webhook is told, nothing is stored */
  obj = configmap("dry", "{\"k\":\"v\"}");
  itest_expect(KCR_OK,
               kcr_create(cl, &(struct kcr_ref){&cms, ns}, obj,
                          &(struct kcr_write_opts){.dry_run = true}, &out, &ei),
               &ei);
  cJSON_Delete(obj);
  assert_string_equal("true",
                      kcr_json_str(out, "/metadata/labels/example.com~1defaulted"));
  cJSON_Delete(out);
  pthread_mutex_lock(&seen.mu);
  assert_true(seen.dry_run);
  pthread_mutex_unlock(&seen.mu);
  assert_int_equal(KCR_ENOTFOUND,
                   kcr_get(cl, &(struct kcr_ref){&cms, ns, "dry"}, NULL, &ei));
  kcr_errinfo_cleanup(&ei);

  /* UPDATE: the old object comes along; the mutation holds (no patch:
   * the label is there already) */
  itest_expect(KCR_OK, kcr_get(cl, &(struct kcr_ref){&cms, ns, "allowed"}, &out, &ei),
               &ei);
  kcr_json_set_str(out, "/data/k", "v2");
  cJSON *upd = NULL;
  itest_expect(
      KCR_OK,
      kcr_update(cl, &(struct kcr_ref){&cms, ns, "allowed"}, out, NULL, &upd, &ei), &ei);
  cJSON_Delete(out);
  assert_string_equal("v2", kcr_json_str(upd, "/data/k"));
  assert_string_equal("true",
                      kcr_json_str(upd, "/metadata/labels/example.com~1defaulted"));
  cJSON_Delete(upd);
  pthread_mutex_lock(&seen.mu);
  assert_int_equal(KCR_ADMISSION_UPDATE, seen.op);
  assert_true(seen.had_old);
  assert_true(seen.had_object);
  pthread_mutex_unlock(&seen.mu);

  /* DELETE: no object, the old one */
  itest_expect(KCR_OK,
               kcr_delete(cl, &(struct kcr_ref){&cms, ns, "allowed"}, NULL, NULL, &ei),
               &ei);
  pthread_mutex_lock(&seen.mu);
  assert_int_equal(KCR_ADMISSION_DELETE, seen.op);
  assert_true(seen.had_old);
  assert_false(seen.had_object);
  pthread_mutex_unlock(&seen.mu);

  /* the metrics: answers by webhook, one rejection of code 422 */
  assert_int_equal(KCR_OK, kcr_metrics_render(kcr_manager_metrics(r.m), &text));
  metrics = text.ptr;
  assert_non_null(
      strstr(metrics, "controller_runtime_webhook_requests_total{webhook=\"/validate\","
                      "code=\"200\"}"));
  assert_non_null(
      strstr(metrics, "controller_runtime_webhook_requests_total{webhook=\"defaulter\","
                      "code=\"200\"}"));
  assert_non_null(strstr(
      metrics, "kcr_webhook_rejections_total{webhook=\"/validate\",code=\"422\"} 1"));
  assert_non_null(strstr(metrics, "controller_runtime_webhook_latency_seconds_bucket{"
                                  "webhook=\"defaulter\",le=\"0.0001\"}"));
  kcr_buf_cleanup(&text);

  itest_run_stop(&r, 0);
  free(ca);
  char cmd[600];
  snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
  assert_int_equal(0, system(cmd));
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(
          the_apiserver_calls_validating_and_mutating_webhooks, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
