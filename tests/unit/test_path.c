/* Request paths: core vs named groups, namespaced vs cluster-scoped,
 * subresources, invalid segments, query encoding. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "kcr/path.h"

static const struct kcr_gvr cm = {"", "v1", "configmaps", true};
static const struct kcr_gvr ns = {NULL, "v1", "namespaces", false};
static const struct kcr_gvr ebd = {"ebdman.example.com", "v1alpha1", "ebds", true};
static const struct kcr_gvr crd = {"apiextensions.k8s.io", "v1",
                                   "customresourcedefinitions", false};

static void expect_path(const struct kcr_ref *ref, const char *want)
{
  struct kcr_buf b = KCR_BUF_INIT;
  assert_int_equal(KCR_OK, kcr_path(&b, ref));
  assert_string_equal(want, kcr_buf_str(&b));
  kcr_buf_cleanup(&b);
}

static void expect_invalid(const struct kcr_ref *ref)
{
  struct kcr_buf b = KCR_BUF_INIT;
  assert_int_equal(KCR_EINVAL, kcr_path(&b, ref));
  kcr_buf_cleanup(&b);
}

static void core_namespaced_paths(void **state)
{
  expect_path(&(struct kcr_ref){&cm, "default", NULL, NULL},
              "/api/v1/namespaces/default/configmaps");
  expect_path(&(struct kcr_ref){&cm, "default", "a", NULL},
              "/api/v1/namespaces/default/configmaps/a");
  expect_path(&(struct kcr_ref){&cm, NULL, NULL, NULL}, "/api/v1/configmaps");
}

static void core_cluster_scoped_paths(void **state)
{
  expect_path(&(struct kcr_ref){&ns, NULL, NULL, NULL}, "/api/v1/namespaces");
  expect_path(&(struct kcr_ref){&ns, NULL, "kube-system", NULL},
              "/api/v1/namespaces/kube-system");
  expect_path(&(struct kcr_ref){&ns, NULL, "kube-system", "status"},
              "/api/v1/namespaces/kube-system/status");
}

static void named_group_paths(void **state)
{
  expect_path(
      &(struct kcr_ref){&ebd, "team-a", "resource01", "status"},
      "/apis/ebdman.example.com/v1alpha1/namespaces/team-a/ebds/resource01/status");
  expect_path(&(struct kcr_ref){&ebd, NULL, NULL, NULL},
              "/apis/ebdman.example.com/v1alpha1/ebds");
  expect_path(&(struct kcr_ref){&crd, NULL, "ebds.ebdman.example.com", NULL},
              "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/"
              "ebds.ebdman.example.com");
}

static void invalid_refs_are_refused(void **state)
{
  expect_invalid(NULL);
  expect_invalid(&(struct kcr_ref){&cm, "default", "a/b", NULL});
  expect_invalid(&(struct kcr_ref){&cm, "default", "..", NULL});
  expect_invalid(&(struct kcr_ref){&cm, "default", ".", NULL});
  expect_invalid(&(struct kcr_ref){&cm, "default", "", NULL});
  expect_invalid(&(struct kcr_ref){&cm, "default", "a%2f", NULL});
  expect_invalid(&(struct kcr_ref){&cm, "default", NULL, "status"}); /* sub w/o name */
  expect_invalid(&(struct kcr_ref){&cm, NULL, "a", NULL});      /* namespaced w/o ns */
  expect_invalid(&(struct kcr_ref){&ns, "default", "x", NULL}); /* cluster + ns */
  expect_invalid(
      &(struct kcr_ref){&(struct kcr_gvr){"", "", "x", false}, NULL, NULL, NULL});
}

static void query_is_encoded_and_joined(void **state)
{
  struct kcr_buf b = KCR_BUF_INIT;
  kcr_buf_puts(&b, "/api/v1/configmaps");
  assert_int_equal(KCR_OK, kcr_query_add(&b, "labelSelector", "app in (a,b),!x"));
  assert_int_equal(KCR_OK, kcr_query_add(&b, "continue", NULL)); /* skipped */
  assert_int_equal(KCR_OK, kcr_query_add_int(&b, "limit", 500));
  assert_int_equal(KCR_OK, kcr_query_add(&b, "fieldSelector", "metadata.name=a b"));
  assert_string_equal("/api/v1/configmaps?labelSelector=app%20in%20%28a%2Cb%29%2C%21x"
                      "&limit=500&fieldSelector=metadata.name%3Da%20b",
                      kcr_buf_str(&b));
  kcr_buf_cleanup(&b);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(core_namespaced_paths),
      cmocka_unit_test(core_cluster_scoped_paths),
      cmocka_unit_test(named_group_paths),
      cmocka_unit_test(invalid_refs_are_refused),
      cmocka_unit_test(query_is_encoded_and_joined),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
