/* ebdman's availability logic: what Installed, VFMHealthy, Ready and the
 * kstatus conditions (Reconciling, Stalled) say for each thing a reconcile
 * can observe. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ebdman.h"
#include "tfail.h"
#include "ebdman_adapt.h"

static cJSON *vfm(int64_t gen, const char *status, const char *reason, const char *msg,
                  int64_t ogen)
{
  char buf[1024];
  if(!status)
    snprintf(buf, sizeof(buf), "{\"metadata\":{\"generation\":%lld}}", (long long)gen);
  else
    snprintf(
        buf, sizeof(buf),
        "{\"metadata\":{\"generation\":%lld},\"status\":{\"conditions\":[{\"type\":"
        "\"Ready\",\"status\":\"%s\",\"reason\":\"%s\",\"message\":\"%s\","
        "\"observedGeneration\":%lld,\"lastTransitionTime\":\"2026-11-29T10:00:00Z\"}]}}",
        (long long)gen, status, reason, msg, (long long)ogen);
  return cJSON_Parse(buf);
}

static void expect(const struct kcr_cond *c, const char *type, const char *status,
                   const char *reason, const char *msg, int64_t gen)
{
  assert_string_equal(type, c->type);
  assert_string_equal(status, c->status);
  assert_string_equal(reason, c->reason);
  assert_string_equal(msg, c->message);
  assert_int_equal(gen, c->observed_generation);
  assert_int_equal(KCR_OK, kcr_cond_validate(c, NULL));
}

static void ready_vfm_makes_everything_ready(void **state)
{
  cJSON *v = vfm(2, "True", "Ready", "ok", 2);
  struct ebdman_observed ob = {.generation = 5};
  observe(&ob, v);
  struct kcr_cond c[EBDMAN_NCOND];
  ebdman_conditions(&ob, c);
  expect(&c[EBDMAN_COND_INSTALLED], "Installed", "True", "Installed",
         "configmap and vfm custom resource applied", 5);
  expect(&c[EBDMAN_COND_VFM], "VFMHealthy", "True", "Ready",
         "vfm custom resource is ready", 5);
  expect(&c[EBDMAN_COND_READY], "Ready", "True", "Ready", "ebd is ready", 5);
  cJSON_Delete(v);
}

static void missing_or_unreported_vfm_is_progressing(void **state)
{
  struct kcr_cond c[EBDMAN_NCOND];
  struct ebdman_observed ob = {.generation = 1};
  ebdman_conditions(&ob, c); /* not in the cache yet */
  expect(&c[EBDMAN_COND_VFM], "VFMHealthy", "False", "Progressing",
         "vfm custom resource is not ready", 1);
  expect(&c[EBDMAN_COND_READY], "Ready", "False", "Progressing",
         "vfm custom resource is not ready", 1);
  cJSON *v = vfm(1, NULL, NULL, NULL, 0); /* no conditions yet */
  observe(&ob, v);
  ebdman_conditions(&ob, c);
  assert_string_equal("Progressing", c[EBDMAN_COND_VFM].reason);
  cJSON_Delete(v);
  v = vfm(1, "Unknown", "Starting", "", 1);
  observe(&ob, v);
  ebdman_conditions(&ob, c);
  assert_string_equal("Progressing", c[EBDMAN_COND_VFM].reason);
  cJSON_Delete(v);
}

static void stale_ready_is_still_progressing(void **state)
{
  /* Ready=True, but for generation 1 while the VFM is at 2. */
  cJSON *v = vfm(2, "True", "Ready", "ok", 1);
  struct ebdman_observed ob = {.generation = 3};
  observe(&ob, v);
  struct kcr_cond c[EBDMAN_NCOND];
  ebdman_conditions(&ob, c);
  expect(&c[EBDMAN_COND_VFM], "VFMHealthy", "False", "Progressing",
         "vfm custom resource is not ready", 3);
  /* And right after this reconcile applied a new spec, the cached VFM is old. */
  cJSON_Delete(v);
  v = vfm(2, "True", "Ready", "ok", 2);
  observe(&ob, v);
  ob.applied_new_spec = true;
  ebdman_conditions(&ob, c);
  assert_string_equal("Progressing", c[EBDMAN_COND_VFM].reason);
  cJSON_Delete(v);
}

static void failed_vfm_is_an_error_with_its_message(void **state)
{
  cJSON *v = vfm(1, "False", "Failed", "disk on fire", 1);
  struct ebdman_observed ob = {.generation = 1};
  observe(&ob, v);
  struct kcr_cond c[EBDMAN_NCOND];
  ebdman_conditions(&ob, c);
  expect(&c[EBDMAN_COND_VFM], "VFMHealthy", "False", "Error", "disk on fire", 1);
  expect(&c[EBDMAN_COND_READY], "Ready", "False", "Error", "disk on fire", 1);
  cJSON_Delete(v);
  /* False for another reason is just not ready yet. */
  v = vfm(1, "False", "Progressing", "pulling", 1);
  observe(&ob, v);
  ebdman_conditions(&ob, c);
  assert_string_equal("Progressing", c[EBDMAN_COND_VFM].reason);
  cJSON_Delete(v);
  /* Reading it failed. */
  observe(&ob, NULL);
  ob.vfm_read_error = "cache read failed";
  ebdman_conditions(&ob, c);
  expect(&c[EBDMAN_COND_VFM], "VFMHealthy", "False", "Error", "cache read failed", 1);
}

/* Found with tests/fuzz (fuzz_ebdman's check that every condition computed
 * passes kcr_cond_validate; corpus ebd-long-messages.json): a message over
 * KCR_COND_MESSAGE_MAX bytes - the server's refusal, or a VFM's Ready message
 * of 20000 two-byte characters, which the VFM CRD's maxLength (characters)
 * accepts - made every condition write of the EBD fail validation, so it
 * never showed why. Such messages are cut on a UTF-8 boundary and end with
 * "..." (in the arena; without one a fixed text says what happened). */
static void overlong_messages_are_cut_to_the_condition_limit(void **state)
{
  size_t n = 20000;
  char *long_msg = malloc(2 * n + 1);
  struct kcr_arena arena = KCR_ARENA_INIT;
  struct kcr_cond c[EBDMAN_NCOND];
  cJSON *v;

  assert_non_null(long_msg);
  for(size_t i = 0; i < n; i++)
    memcpy(long_msg + 2 * i, "\xc3\xa9", 2); /* e acute */
  long_msg[2 * n] = '\0';
  v = vfm(1, "False", "Failed", "x", 1);
  assert_true(cJSON_ReplaceItemInObject(
      cJSON_GetArrayItem(kcr_json_at(v, "/status/conditions"), 0), "message",
      cJSON_CreateString(long_msg)));
  for(int with_arena = 0; with_arena < 2; with_arena++) {
    struct ebdman_observed ob = {.generation = 1};
    observe(&ob, v);
    ob.arena = with_arena ? &arena : NULL;
    size_t nc = ebdman_conditions(&ob, c); /* the VFM's message */
    assert_int_equal(EBDMAN_NCOND, nc);
    for(size_t i = 0; i < nc; i++)
      assert_int_equal(KCR_OK, kcr_cond_validate(&c[i], NULL));
    ob.install_failed = true; /* the server's message */
    ob.install_error = long_msg;
    nc = ebdman_conditions(&ob, c);
    assert_int_equal(EBDMAN_NCOND, nc);
    for(size_t i = 0; i < nc; i++)
      assert_int_equal(KCR_OK, kcr_cond_validate(&c[i], NULL));
    if(with_arena) {
      const char *m = c[EBDMAN_COND_INSTALLED].message;
      size_t len = strlen(m);
      assert_true(len <= KCR_COND_MESSAGE_MAX && len > KCR_COND_MESSAGE_MAX - 8);
      assert_memory_equal(long_msg, m, len - 3);
      assert_string_equal("...", m + len - 3);
      assert_int_equal(0, (len - 3) % 2); /* whole characters */
    }
  }
  kcr_arena_cleanup(&arena);
  cJSON_Delete(v);
  free(long_msg);
}

static void install_failure_wins_the_summary(void **state)
{
  cJSON *v = vfm(1, "True", "Ready", "ok", 1);
  struct ebdman_observed ob = {.generation = 4,
                               .install_failed = true,
                               .install_error = "VFM x: spec.image: Invalid value"};
  struct kcr_cond c[EBDMAN_NCOND];
  observe(&ob, v);
  ebdman_conditions(&ob, c);
  expect(&c[EBDMAN_COND_INSTALLED], "Installed", "False", "InstallFailed",
         "VFM x: spec.image: Invalid value", 4);
  expect(&c[EBDMAN_COND_READY], "Ready", "False", "InstallFailed",
         "VFM x: spec.image: Invalid value", 4);
  cJSON_Delete(v);
}

/* ---- kstatus (sigs.k8s.io/cli-utils pkg/kstatus/status) ----
 *
 * What kstatus makes of an EBD at status.observedGeneration == generation
 * and not being deleted (those two it decides before any condition:
 * InProgress, Terminating): checkGenericProperties's loop - the first
 * Reconciling=True gives InProgress, the first Stalled=True Failed with its
 * message - then checkReadyCondition: Ready True is Current, False or
 * Unknown InProgress. tests/e2e/test_kstatus.sh runs the library itself. */
static const char *kstatus(const struct kcr_cond *c, size_t n, const char **msg)
{
  for(size_t i = 0; i < n; i++) {
    if(!strcmp(c[i].type, "Reconciling") && !strcmp(c[i].status, "True"))
      return *msg = c[i].message, "InProgress";
    if(!strcmp(c[i].type, "Stalled") && !strcmp(c[i].status, "True"))
      return *msg = c[i].message, "Failed";
  }
  for(size_t i = 0; i < n; i++)
    if(!strcmp(c[i].type, "Ready"))
      return *msg = c[i].message, !strcmp(c[i].status, "True") ? "Current" : "InProgress";
  return *msg = "", "Current";
}

/* Flux's status checks (fluxcd/pkg runtime/conditions/check, fail.go) for
 * a finished reconcile: Ready always there (FAIL0002); an abnormal-true
 * condition only when True (apis/meta: "MUST only be present on the
 * resource if the Condition is True"), never with Ready True (FAIL0001),
 * and Ready False with it (FAIL0003, FAIL0004); never Reconciling and
 * Stalled together (FAIL0005); every condition at the EBD's generation
 * (FAIL0008, FAIL0009). */
static void expect_flux_conventions(const struct kcr_cond *c, size_t n, int64_t gen)
{
  const struct kcr_cond *ready = NULL;
  int abnormal = 0;

  assert_true(n == EBDMAN_NCOND - 1 || n == EBDMAN_NCOND);
  for(size_t i = 0; i < n; i++) {
    assert_int_equal(KCR_OK, kcr_cond_validate(&c[i], NULL));
    assert_int_equal(gen, c[i].observed_generation);
    if(!strcmp(c[i].type, "Ready"))
      ready = &c[i];
    if(!strcmp(c[i].type, "Reconciling") || !strcmp(c[i].type, "Stalled")) {
      assert_string_equal("True", c[i].status);
      abnormal++;
    }
  }
  assert_non_null(ready);
  assert_true(abnormal <= 1);
  assert_int_equal(!strcmp(ready->status, "True") ? 0 : 1, abnormal);
}

/* Installed and ready: no abnormal condition at all, kstatus Current. */
static void ready_is_current_without_abnormal_conditions(void **state)
{
  cJSON *v = vfm(2, "True", "Ready", "ok", 2);
  struct ebdman_observed ob = {.generation = 5};
  observe(&ob, v);
  struct kcr_cond c[EBDMAN_NCOND];
  const char *msg;
  size_t n = ebdman_conditions(&ob, c);
  assert_int_equal(3, n);
  expect_flux_conventions(c, n, 5);
  assert_string_equal("Current", kstatus(c, n, &msg));
  cJSON_Delete(v);
}

/* Everything that waiting resolves - the VFM not made, not reported, not
 * at its spec yet, just given a new spec, not ready for any reason but
 * Failed, or not readable from the cache - is Reconciling=True with Ready's
 * reason and message: kstatus InProgress. */
static void progressing_is_reconciling(void **state)
{
  cJSON *vs[] = {NULL,
                 vfm(1, NULL, NULL, NULL, 0),
                 vfm(1, "Unknown", "Starting", "", 1),
                 vfm(2, "True", "Ready", "ok", 1),
                 vfm(1, "True", "Ready", "ok", 1),
                 vfm(1, "False", "Progressing", "pulling", 1),
                 NULL};
  size_t nv = sizeof(vs) / sizeof(vs[0]);
  struct kcr_cond c[EBDMAN_NCOND];
  const char *msg;

  for(size_t i = 0; i < nv; i++) {
    struct ebdman_observed ob = {.generation = 7};
    observe(&ob, vs[i]);
    ob.applied_new_spec = i == 4;
    ob.vfm_read_error = i == nv - 1 ? "cache read failed" : NULL;
    size_t n = ebdman_conditions(&ob, c);
    assert_int_equal(4, n);
    expect_flux_conventions(c, n, 7);
    expect(&c[EBDMAN_COND_ABNORMAL], "Reconciling", "True", c[EBDMAN_COND_READY].reason,
           c[EBDMAN_COND_READY].message, 7);
    assert_string_equal(i == nv - 1 ? "Error" : "Progressing",
                        c[EBDMAN_COND_ABNORMAL].reason);
    assert_string_equal("InProgress", kstatus(c, n, &msg));
    assert_string_equal(c[EBDMAN_COND_READY].message, msg);
    cJSON_Delete(vs[i]);
  }
}

/* A VFM that failed is Stalled=True with its message: kstatus Failed, so
 * a GitOps tool stops waiting at once instead of at its timeout. */
static void failed_vfm_is_stalled_with_its_message(void **state)
{
  cJSON *v = vfm(1, "False", "Failed", "disk on fire", 1);
  struct ebdman_observed ob = {.generation = 2};
  observe(&ob, v);
  struct kcr_cond c[EBDMAN_NCOND];
  const char *msg;
  size_t n = ebdman_conditions(&ob, c);
  assert_int_equal(4, n);
  expect_flux_conventions(c, n, 2);
  expect(&c[EBDMAN_COND_ABNORMAL], "Stalled", "True", "Error", "disk on fire", 2);
  assert_string_equal("Failed", kstatus(c, n, &msg));
  assert_string_equal("disk on fire", msg);
  cJSON_Delete(v);
}

/* A child the server refused, one someone else holds, one a terminating
 * namespace cannot take: Stalled=True with Installed's reason and message,
 * whatever the VFM says. */
static void refused_install_is_stalled_with_the_reason(void **state)
{
  static const char *const reasons[] = {NULL, EBDMAN_REASON_CHILD_CONFLICT,
                                        EBDMAN_REASON_NAMESPACE_TERMINATING};
  cJSON *v = vfm(1, "True", "Ready", "ok", 1);
  struct kcr_cond c[EBDMAN_NCOND];
  const char *msg;

  for(size_t i = 0; i < 3; i++) {
    struct ebdman_observed ob = {.generation = 3,
                                 .install_failed = true,
                                 .install_reason = reasons[i],
                                 .install_error = "VFM x: spec.image: Invalid value"};
    observe(&ob, i ? v : NULL);
    size_t n = ebdman_conditions(&ob, c);
    assert_int_equal(4, n);
    expect_flux_conventions(c, n, 3);
    expect(&c[EBDMAN_COND_ABNORMAL], "Stalled", "True",
           reasons[i] ? reasons[i] : "InstallFailed", "VFM x: spec.image: Invalid value",
           3);
    assert_string_equal("Failed", kstatus(c, n, &msg));
    assert_string_equal("VFM x: spec.image: Invalid value", msg);
  }
  cJSON_Delete(v);
}

static void children_are_owned_and_named(void **state)
{
  cJSON *ebd = cJSON_Parse(
      "{\"apiVersion\":\"ebdman.example.com/v1beta1\",\"kind\":\"EBD\",\"metadata\":{"
      "\"name\":\"a\",\"namespace\":\"ns\",\"uid\":\"u-1\",\"annotations\":{"
      "\"vfm-sim.ebdman.example.com/"
      "delay\":\"1s\",\"other\":\"x\"}},\"spec\":{\"vfmTemplate\":{"
      "\"image\":\"img\",\"replicas\":2,\"config\":{\"k\":\"v\"}}}}");
  cJSON *cm = child_for(ebd, false), *v = child_for(ebd, true);
  assert_string_equal("a-config", kcr_json_str(cm, "/metadata/name"));
  assert_string_equal("v", kcr_json_str(cm, "/data/k"));
  assert_string_equal("a", kcr_json_str(v, "/metadata/name"));
  assert_string_equal("img", kcr_json_str(v, "/spec/image"));
  assert_int_equal(2, kcr_json_int(v, "/spec/replicas", 0));
  assert_string_equal("1s", kcr_json_member_str(kcr_json_at(v, "/metadata/annotations"),
                                                "vfm-sim.ebdman.example.com/delay"));
  assert_null(kcr_json_member_str(kcr_json_at(v, "/metadata/annotations"), "other"));
  const cJSON *ref = cJSON_GetArrayItem(kcr_json_at(v, "/metadata/ownerReferences"), 0);
  assert_string_equal("u-1", kcr_json_str(ref, "/uid"));
  assert_true(cJSON_IsTrue(cJSON_GetObjectItem(ref, "controller")));
  cJSON_Delete(cm);
  cJSON_Delete(v);
  cJSON_Delete(ebd);
}

/* metadata.annotations is a map of strings (the apiserver stores nothing
 * else); an EBD with anything else there does not decode, and the error
 * names the member - what the reconcile reports as Installed=False - while
 * null is no annotations: nothing to copy. */
static void an_ebd_whose_annotations_are_not_a_map_does_not_decode(void **state)
{
  static const char *const shapes[] = {
      ("[\"vfm-sim.ebdman.example.com/delay\", "
       "{\"vfm-sim.ebdman.example.com/fail\":\"x\"}]"),
      "[]",
      "\"vfm-sim.ebdman.example.com/delay\"",
      "42",
      "true",
      "null",
      "{\"vfm-sim.ebdman.example.com/delay\":5,\"vfm-sim.ebdman.example.com/fail\":[1]}",
  };
  for(size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++) {
    struct kcr_errinfo ei = KCR_ERRINFO_INIT;
    struct ebd e;
    char text[512];
    kcr_err rc;

    snprintf(text, sizeof(text),
             "{\"apiVersion\":\"ebdman.example.com/v1beta1\",\"kind\":\"EBD\","
             "\"metadata\":{\"name\":\"a\",\"namespace\":\"ns\",\"uid\":\"u-1\","
             "\"annotations\":%s},\"spec\":{\"vfmTemplate\":{\"image\":\"img\"}}}",
             shapes[i]);
    rc = ebd_decode(text, strlen(text), 0, &ta, &e, &ei);
    if(!strcmp(shapes[i], "null")) {
      cJSON *ebd = cJSON_Parse(text), *cm = child_for(ebd, false),
            *v = child_for(ebd, true);
      assert_int_equal(KCR_OK, rc);
      assert_non_null(cm);
      assert_non_null(v);
      assert_null(kcr_json_at(v, "/metadata/annotations"));
      assert_null(kcr_json_at(cm, "/metadata/annotations"));
      cJSON_Delete(cm);
      cJSON_Delete(v);
      cJSON_Delete(ebd);
    } else {
      assert_int_equal(KCR_EPARSE, rc);
      if(!strstr(ei.message, "/metadata/annotations"))
        fail_msg("annotations %s: %s", shapes[i], ei.message);
    }
    kcr_errinfo_cleanup(&ei);
  }
  (void)state;
}

/* Without a name there is nothing to name the children after. */
static void an_ebd_without_a_name_has_no_children(void **state)
{
  cJSON *ebd = cJSON_Parse("{\"apiVersion\":\"ebdman.example.com/v1beta1\",\"kind\":"
                           "\"EBD\",\"metadata\":{\"namespace\":\"ns\",\"uid\":\"u-1\"},"
                           "\"spec\":{\"vfmTemplate\":{\"image\":\"img\"}}}");
  cJSON *cm = child_for(ebd, false), *v = child_for(ebd, true);
  assert_null(cm);
  assert_null(v);
  cJSON_Delete(ebd);
}

struct building {
  const cJSON *ebd;
  cJSON *cm, *vfm; /* what they are when nothing fails */
};

/* A child is complete or NULL: never one that lost a label, an annotation
 * or its name to an allocation failure. */
static bool build_children(void *ud)
{
  struct building *b = ud;
  cJSON *cm = child_for(b->ebd, false), *v = child_for(b->ebd, true);
  bool ok = (!cm || cJSON_Compare(cm, b->cm, 1)) && (!v || cJSON_Compare(v, b->vfm, 1));
  cJSON_Delete(cm);
  cJSON_Delete(v);
  return ok;
}

static void children_are_complete_or_null_when_memory_runs_out(void **state)
{
  cJSON *ebd = cJSON_Parse(
      "{\"apiVersion\":\"ebdman.example.com/v1beta1\",\"kind\":\"EBD\",\"metadata\":{"
      "\"name\":\"a\",\"namespace\":\"ns\",\"uid\":\"u-1\",\"annotations\":{"
      "\"vfm-sim.ebdman.example.com/delay\":\"1s\",\"other\":\"x\","
      "\"vfm-sim.ebdman.example.com/fail\":\"no\"}},\"spec\":{\"vfmTemplate\":{"
      "\"image\":\"img\",\"replicas\":2,\"config\":{\"k\":\"v\"}}}}");
  struct building b = {ebd, child_for(ebd, false), child_for(ebd, true)};
  assert_non_null(b.cm);
  assert_non_null(b.vfm);
  tfail_torture("ebdman_configmap_for/ebdman_vfm_for", build_children, &b);
  cJSON_Delete(b.cm);
  cJSON_Delete(b.vfm);
  cJSON_Delete(ebd);
}

/* A cached VFM is observed as its decoded text says, as the same VFM
 * decoded from its tree; one that does not decode - a spec nested deeper
 * than the typed decoder follows (KCR__JSON_SKIP_DEPTH; the apiserver
 * prunes such unknown members of a VFM) - is a read error that says why,
 * never a crash or a VFM taken as healthy. */
static void a_cached_vfm_reads_as_its_tree(void **state)
{
  for(int deep = 0; deep < 2; deep++)
    for(int ready = 0; ready < 3; ready++) {
      cJSON *v = ready == 2 ? vfm(3, NULL, NULL, NULL, 0)
                            : vfm(3, ready ? "True" : "False", ready ? "Ready" : "Failed",
                                  "m", 3),
            *spec = cJSON_CreateObject(), *at = spec;
      struct vfm hold;
      struct ebdman_observed a = {.generation = 1}, b = {.generation = 1, .arena = &ta};
      struct kcr_cond ca[EBDMAN_NCOND], cb[EBDMAN_NCOND];
      kcr_obj *o = NULL;

      for(int i = 0; deep && i < 200; i++)
        at = cJSON_AddObjectToObject(at, "x");
      cJSON_AddItemToObject(v, "spec", spec);
      assert_int_equal(KCR_OK, kcr_json_set_str(v, "/metadata/name", "v"));
      assert_int_equal(KCR_OK, kcr_obj_from_json(v, 0, &o, NULL));
      ebdman_observe_vfm_obj(&b, o, &ta, &hold);
      ebdman_conditions(&b, cb);
      if(deep) {
        assert_non_null(b.vfm_read_error);
        assert_non_null(strstr(b.vfm_read_error, "/spec"));
        assert_string_equal("False", cb[EBDMAN_COND_VFM].status);
        assert_string_equal("Error", cb[EBDMAN_COND_VFM].reason);
      } else {
        observe(&a, v);
        ebdman_conditions(&a, ca);
        assert_null(b.vfm_read_error);
        assert_true(b.vfm_seen);
        assert_int_equal(3, b.vfm_generation);
        for(int i = 0; i < EBDMAN_NCOND - 1; i++) {
          assert_string_equal(ca[i].status, cb[i].status);
          assert_string_equal(ca[i].reason, cb[i].reason);
          assert_string_equal(ca[i].message, cb[i].message);
        }
      }
      kcr_obj_unref(o);
      cJSON_Delete(v);
    }
  (void)state;
}

static int empty_ta(void **state)
{
  adapt_cleanup();
  return 0;
}

int main(void)
{
  tfail_init();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(ready_vfm_makes_everything_ready),
      cmocka_unit_test(a_cached_vfm_reads_as_its_tree),
      cmocka_unit_test(missing_or_unreported_vfm_is_progressing),
      cmocka_unit_test(stale_ready_is_still_progressing),
      cmocka_unit_test(failed_vfm_is_an_error_with_its_message),
      cmocka_unit_test(overlong_messages_are_cut_to_the_condition_limit),
      cmocka_unit_test(install_failure_wins_the_summary),
      cmocka_unit_test(ready_is_current_without_abnormal_conditions),
      cmocka_unit_test(progressing_is_reconciling),
      cmocka_unit_test(failed_vfm_is_stalled_with_its_message),
      cmocka_unit_test(refused_install_is_stalled_with_the_reason),
      cmocka_unit_test(children_are_owned_and_named),
      cmocka_unit_test(an_ebd_whose_annotations_are_not_a_map_does_not_decode),
      cmocka_unit_test(an_ebd_without_a_name_has_no_children),
      cmocka_unit_test(children_are_complete_or_null_when_memory_runs_out),
  };
  return cmocka_run_group_tests(tests, NULL, empty_ta);
}
