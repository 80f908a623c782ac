/* The decision of a certificate round (kcr__certs_plan, certs-int.h): a
 * fresh Secret, renewal of the serving certificate at two thirds of its
 * life or when its names change, the CA rotation's steps in order (new CA
 * in the bundle; promoted only a grace after every bundle held it; the old
 * CA gone a grace after that), and damaged or expired state made anew. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "runtime/certs-int.h"
#include "runtime/tlscert-int.h"
#include "tfail.h"

static char *dns[] = {"hook.ns.svc", NULL}, *ips[] = {"127.0.0.1", NULL};
static const struct kcr__certs_cfg cfg = {.name = "t",
                                          .dns = dns,
                                          .ips = ips,
                                          .ca_lifetime_s = 3000,
                                          .cert_lifetime_s = 600,
                                          .grace_s = 60};

static unsigned plan(struct kcr__certs_state *st, time_t now)
{
  unsigned changed = 99;
  assert_int_equal(KCR_OK, kcr__certs_plan(&cfg, st, now, &changed, NULL));
  return changed;
}

static time_t not_after(const char *pem)
{
  time_t nb, na;
  assert_int_equal(KCR_OK, kcr__tlscert_times(pem, &nb, &na));
  return na;
}

static int count(const char *bundle, const char *what)
{
  int n = 0;
  for(const char *p = bundle; (p = strstr(p, what)); p += strlen(what))
    n++;
  return n;
}

static void a_fresh_secret_gets_a_ca_and_a_serving_certificate(void **state)
{
  struct kcr__certs_state st = {0};
  time_t now = time(NULL);

  unsigned ch = plan(&st, now);
  assert_true(ch & KCR__CERTS_NEW_CA);
  assert_true(ch & KCR__CERTS_NEW_CERT);
  assert_true(kcr__tlscert_issued_by(st.tls, st.ca));
  assert_true(
      kcr__tlscert_has_names(st.tls, (const char *const *)dns, (const char *const *)ips));
  assert_false(kcr__tlscert_issued_by(st.ca, st.tls)); /* the CA is no leaf's */
  assert_string_equal(st.ca, st.bundle);
  assert_null(st.next);
  assert_int_equal(0, plan(&st, now)); /* nothing more to do */
  assert_int_equal(0, plan(&st, now + 300));
  kcr__certs_state_free(&st);
}

static void the_serving_certificate_is_renewed_at_two_thirds(void **state)
{
  struct kcr__certs_state st = {0};
  time_t now = time(NULL);
  char *old;

  plan(&st, now);
  old = strdup(st.tls);
  time_t due = not_after(st.tls) - cfg.cert_lifetime_s / 3;
  assert_int_equal(0, plan(&st, due - 1));
  assert_int_equal(KCR__CERTS_NEW_CERT, plan(&st, due));
  assert_string_not_equal(old, st.tls);
  assert_true(kcr__tlscert_issued_by(st.tls, st.ca));
  free(old);
  /* other names asked for: a new one */
  static char *other[] = {"hook2.ns.svc", NULL};
  struct kcr__certs_cfg c2 = cfg;
  c2.dns = other;
  unsigned ch = 0;
  assert_int_equal(KCR_OK, kcr__certs_plan(&c2, &st, now, &ch, NULL));
  assert_int_equal(KCR__CERTS_NEW_CERT, ch);
  assert_true(kcr__tlscert_has_names(st.tls, (const char *const *)other, NULL));
  kcr__certs_state_free(&st);
}

static void the_ca_rotates_in_order(void **state)
{
  struct kcr__certs_state st = {0};
  time_t now = time(NULL);
  char *old_ca, *old_leaf;

  plan(&st, now);
  old_ca = strdup(st.ca);
  old_leaf = strdup(st.tls);
  /* step 1 at two thirds of the CA's life: a next CA, both in the bundle;
   * the serving certificate (still from the old CA) stays */
  time_t due = not_after(st.ca) - cfg.ca_lifetime_s / 3;
  assert_true(due > now);
  st.tls = realloc(st.tls, strlen(st.tls) + 1); /* unchanged text below */
  unsigned ch = plan(&st, due);
  assert_true(ch & KCR__CERTS_ROTATING);
  assert_non_null(st.next);
  assert_string_equal(old_ca, st.ca);
  assert_int_equal(1, count(st.bundle, old_ca));
  assert_int_equal(1, count(st.bundle, st.next));
  /* not promoted while the bundles have not been seen holding it */
  assert_false(plan(&st, due + 10 * cfg.grace_s) & KCR__CERTS_PROMOTED);
  assert_string_equal(old_ca, st.ca);
  /* step 2 is the caller's: recorded; step 3 a grace later */
  st.bundled = due + 100;
  assert_false(plan(&st, st.bundled + cfg.grace_s - 1) & KCR__CERTS_PROMOTED);
  char *next = strdup(st.next);
  ch = plan(&st, st.bundled + cfg.grace_s);
  assert_true(ch & KCR__CERTS_PROMOTED);
  assert_true(ch & KCR__CERTS_NEW_CERT);
  assert_string_equal(next, st.ca);
  assert_null(st.next);
  assert_true(kcr__tlscert_issued_by(st.tls, st.ca));
  assert_int_equal(1, count(st.bundle, old_ca)); /* still trusted */
  assert_int_equal(1, count(st.bundle, st.ca));
  time_t promoted = st.promoted;
  assert_true(promoted > 0);
  /* step 4 a grace after the promotion: the old CA leaves the bundle */
  assert_false(plan(&st, promoted + cfg.grace_s - 1) & KCR__CERTS_OLD_CA_GONE);
  /* (certificates get real-clock validity: at this simulated time the
   * serving certificate is due too) */
  assert_true(plan(&st, promoted + cfg.grace_s) & KCR__CERTS_OLD_CA_GONE);
  assert_string_equal(st.ca, st.bundle);
  assert_int_equal(0, st.promoted);
  free(next);
  free(old_ca);
  free(old_leaf);
  kcr__certs_state_free(&st);
}

static void expired_or_damaged_state_is_made_anew(void **state)
{
  struct kcr__certs_state st = {0};
  time_t now = time(NULL);

  plan(&st, now);
  char *ca = strdup(st.ca);
  /* the CA expired (a cluster down for longer than its life) */
  assert_true(plan(&st, not_after(st.ca) + 1) & KCR__CERTS_NEW_CA);
  assert_string_not_equal(ca, st.ca);
  free(ca);
  /* a key that is not the CA's */
  free(st.ca_key);
  st.ca_key = strdup("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n");
  assert_true(plan(&st, now) & KCR__CERTS_NEW_CA);
  /* a serving key that is not its certificate's */
  char *cert, *key;
  assert_int_equal(KCR_OK, kcr__tlscert_self_signed(&cert, &key, NULL));
  free(st.tls_key);
  st.tls_key = key;
  free(cert);
  /* (not merely due: broken, which any replica may repair) */
  assert_int_equal(KCR__CERTS_NEW_CERT | KCR__CERTS_REPAIR, plan(&st, now));
  /* a bundle that lost the signing CA */
  free(st.bundle);
  st.bundle = strdup("garbage");
  assert_int_equal(KCR__CERTS_BUNDLE | KCR__CERTS_REPAIR, plan(&st, now));
  assert_string_equal(st.ca, st.bundle);
  kcr__certs_state_free(&st);
}

static void long_names_still_get_certificates(void **state)
{
  /* kubebuilder's "<project>-webhook-service.<project>-system.svc" passes
   * 64 bytes, a common name's limit, with projects of 18 letters; so does
   * a CA named after a Secret of 62 */
  static char *longdns[] = {
      "a-rather-long-project-name-webhook-service.a-rather-long-project-name-system.svc",
      NULL};
  struct kcr__certs_cfg c = cfg;
  struct kcr__certs_state st = {0};
  unsigned changed;

  c.dns = longdns;
  c.name = "a-secret-name-of-sixty-two-characters-for-the-ca-common-name-x";
  assert_int_equal(KCR_OK, kcr__certs_plan(&c, &st, time(NULL), &changed, NULL));
  assert_true(kcr__tlscert_has_names(st.tls, (const char *const *)longdns, NULL));
  kcr__certs_state_free(&st);
}

/* Out of memory anywhere in a plan: an error and a state that frees
 * cleanly, or the whole plan. (OpenSSL's own allocations are not failed:
 * it is not linked with the wrappers.) */
static bool plan_under_failure(void *ud)
{
  struct kcr__certs_state st = {0};
  unsigned changed = 0;
  kcr_err rc = kcr__certs_plan(&cfg, &st, time(NULL), &changed, NULL);
  bool ok = rc == KCR_ENOMEM || (!rc && st.tls && st.ca && st.bundle &&
                                 kcr__tlscert_issued_by(st.tls, st.ca));

  kcr__certs_state_free(&st);
  return ok;
}

static void allocation_failures_leave_a_freeable_state(void **state)
{
  tfail_torture("kcr__certs_plan", plan_under_failure, NULL);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(a_fresh_secret_gets_a_ca_and_a_serving_certificate),
      cmocka_unit_test(the_serving_certificate_is_renewed_at_two_thirds),
      cmocka_unit_test(the_ca_rotates_in_order),
      cmocka_unit_test(expired_or_damaged_state_is_made_anew),
      cmocka_unit_test(long_names_still_get_certificates),
      cmocka_unit_test(allocation_failures_leave_a_freeable_state),
  };
  tfail_init();
  return cmocka_run_group_tests(tests, NULL, NULL);
}
