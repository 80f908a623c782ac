/* A certificate round (kcr_certs_sync) against a scripted apiserver
 * (twire): after a conflicting Secret write the round serves and injects
 * what was stored, never its own unsaved plan; a replica that does not lead
 * repairs a Secret with nothing usable and a caBundle without the stored
 * CA, but leaves a merely due renewal to the leader. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <openssl/evp.h>
#include <time.h>

#include "kcr/certs.h"
#include "runtime/certs-int.h"
#include "tcheck.h"
#include "tfail.h"
#include "twire.h"

#define SECRET_PATH "/api/v1/namespaces/ns/secrets/s"
#define VWC_PATH                                                                         \
  "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/cfg"

struct api {
  const char *secret; /* the stored Secret's JSON */
  long put_secret_code;
  int secret_puts, vwc_puts;
  char *last_vwc;
};

static kcr_err api(struct twire_call *call, void *ud)
{
  struct api *a = ud;

  if(twire_is(call, "GET", SECRET_PATH))
    return twire_reply(call, 200, "%s", a->secret);
  if(twire_is(call, "PUT", SECRET_PATH)) {
    a->secret_puts++;
    if(a->put_secret_code != 200)
      return twire_reply(call, a->put_secret_code, "%s",
                         twire_status_json(a->put_secret_code, "Conflict"));
    return twire_reply(call, 200, "%.*s", (int)call->req->body_len, call->req->body);
  }
  if(twire_is(call, "GET", VWC_PATH))
    return twire_reply(call, 200, "%s",
                       a->last_vwc
                           ? a->last_vwc
                           : "{\"apiVersion\":\"admissionregistration.k8s.io/v1\","
                             "\"kind\":\"ValidatingWebhookConfiguration\","
                             "\"metadata\":{\"name\":\"cfg\",\"resourceVersion\":"
                             "\"3\"},\"webhooks\":[{\"name\":\"w\",\"clientConfig\":"
                             "{\"url\":\"https://127.0.0.1:1/v\"}}]}");
  if(twire_is(call, "PUT", VWC_PATH)) {
    a->vwc_puts++;
    tfail_exempt(true);
    free(a->last_vwc);
    a->last_vwc = strndup(call->req->body, call->req->body_len);
    tfail_exempt(false);
    return twire_reply(call, 200, "%.*s", (int)call->req->body_len, call->req->body);
  }
  return twire_reply(call, 404, "%s", twire_status_json(404, "NotFound"));
}

static bool lead_yes(void *ud) { return true; }
static bool lead_no(void *ud) { return false; }

static kcr_certs *certs(kcr_client *c, bool (*leading)(void *))
{
  static const char *const ips[] = {"127.0.0.1", NULL}, *const vwcs[] = {"cfg", NULL};
  kcr_certs *k = NULL;

  assert_int_equal(KCR_OK,
                   kcr_certs_new(&(struct kcr_certs_opts){.client = c,
                                                          .ns = "ns",
                                                          .secret = "s",
                                                          .ip_addresses = ips,
                                                          .validating_webhooks = vwcs,
                                                          .leading = leading},
                                 &k, NULL));
  return k;
}

/* "stored-bundle" in base64 */
#define STORED_BUNDLE_B64 "c3RvcmVkLWJ1bmRsZQ=="
static const char *const damaged = "{\"apiVersion\":\"v1\",\"kind\":\"Secret\","
                                   "\"metadata\":{\"name\":\"s\",\"namespace\":"
                                   "\"ns\",\"resourceVersion\":\"5\"},\"type\":"
                                   "\"kubernetes.io/tls\",\"data\":{\"ca.crt\":"
                                   "\"" STORED_BUNDLE_B64 "\"}}";

static void a_conflict_serves_what_was_stored(void **state)
{
  struct api a = {.secret = damaged, .put_secret_code = 409};
  kcr_client *c = twire_client(api, &a);
  kcr_certs *k = certs(c, lead_yes);
  char *bundle = NULL;

  assert_int_equal(KCR_OK, kcr_certs_sync(k, NULL));
  assert_int_equal(1, a.secret_puts); /* the repair was tried ... */
  assert_int_equal(0, a.vwc_puts);    /* ... and, refused, injected nowhere */
  assert_int_equal(KCR_OK, kcr_certs_ca_bundle(k, &bundle));
  assert_string_equal("stored-bundle", bundle); /* not the unsaved new CA */
  free(bundle);
  kcr_certs_free(k);
  kcr_client_free(c);
  free(a.last_vwc);
}

static void a_replica_that_does_not_lead_repairs_but_does_not_renew(void **state)
{
  struct api a = {.secret = damaged, .put_secret_code = 200};
  kcr_client *c = twire_client(api, &a);
  kcr_certs *k = certs(c, lead_no);
  char *bundle = NULL;

  /* nothing usable stored: repaired, and the caBundle (which lacks the CA)
   * written */
  assert_int_equal(KCR_OK, kcr_certs_sync(k, NULL));
  assert_int_equal(1, a.secret_puts);
  assert_int_equal(1, a.vwc_puts);
  assert_int_equal(KCR_OK, kcr_certs_ca_bundle(k, &bundle));
  assert_non_null(strstr(bundle, "BEGIN CERTIFICATE"));
  assert_non_null(strstr(a.last_vwc, "\"caBundle\""));
  free(bundle);
  kcr_certs_free(k);
  kcr_client_free(c);
  free(a.last_vwc);
}

/* A Secret holding st, as JSON (caller frees). */
static char *secret_of(const struct kcr__certs_state *st)
{
  const char *names[] = {"ca.crt", "ca-signing.crt", "ca-signing.key", "tls.crt",
                         "tls.key"};
  const char *vals[] = {st->bundle, st->ca, st->ca_key, st->tls, st->tls_key};
  struct kcr_buf b = KCR_BUF_INIT;

  kcr_buf_puts(&b, "{\"apiVersion\":\"v1\",\"kind\":\"Secret\",\"metadata\":{\"name\":"
                   "\"s\",\"namespace\":\"ns\",\"resourceVersion\":\"5\"},\"data\":{");
  for(int i = 0; i < 5; i++) {
    size_t n = strlen(vals[i]);
    char *enc = malloc(4 * ((n + 2) / 3) + 1);
    EVP_EncodeBlock((unsigned char *)enc, (const unsigned char *)vals[i], (int)n);
    kcr_buf_printf(&b, "%s\"%s\":\"%s\"", i ? "," : "", names[i], enc);
    free(enc);
  }
  kcr_buf_puts(&b, "}}");
  return kcr_buf_take(&b);
}

static void a_due_renewal_waits_for_the_leader(void **state)
{
  static char *ips[] = {"127.0.0.1", NULL};
  /* a serving certificate of 30 s: with the default 90 days asked for, it
   * is due (less than a third of 90 days left) but still good */
  struct kcr__certs_cfg cfg = {.name = "s",
                               .ips = ips,
                               .ca_lifetime_s = 86400 * 365,
                               .cert_lifetime_s = 30,
                               .grace_s = 60};
  struct kcr__certs_state st = {0};
  unsigned changed;
  assert_int_equal(KCR_OK, kcr__certs_plan(&cfg, &st, time(NULL), &changed, NULL));
  char *secret = secret_of(&st);
  struct api a = {.secret = secret, .put_secret_code = 200};
  kcr_client *c = twire_client(api, &a);
  kcr_certs *k = certs(c, lead_no);

  assert_int_equal(KCR_OK, kcr_certs_sync(k, NULL));
  assert_int_equal(0, a.secret_puts); /* not ours to renew */
  kcr_certs_free(k);
  /* the leader renews it */
  k = certs(c, lead_yes);
  assert_int_equal(KCR_OK, kcr_certs_sync(k, NULL));
  assert_int_equal(1, a.secret_puts);
  kcr_certs_free(k);
  kcr_client_free(c);
  free(a.last_vwc);
  free(secret);
  kcr__certs_state_free(&st);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(a_conflict_serves_what_was_stored),
      cmocka_unit_test(a_replica_that_does_not_lead_repairs_but_does_not_renew),
      cmocka_unit_test(a_due_renewal_waits_for_the_leader),
  };
  tfail_init();
  return cmocka_run_group_tests(tests, NULL, NULL);
}
