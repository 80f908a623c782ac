/* Request paths: core vs named groups, namespaced vs cluster-scoped,
 * subresources, invalid segments, query encoding; resourceVersion order. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "kcr/path.h"
#include "tfail.h"

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

/* Item 22 of issue 8: segments go into the URL as they are, so a '?' or
 * '#' in a name started a query or a fragment (GET .../configmaps/a?x
 * asked for "a"), and spaces or control characters broke the request. */
static void names_with_url_syntax_or_control_characters_are_refused(void **state)
{
  static const char *const bad[] = {
      "a?b",         "a?",   "?watch=1",
      "a#b",         "#",    "a b",
      " a",          "a\n",  "a\r\nX-Evil: 1",
      "a\t",         "\x01", "a\x7f",
      "caf\xc3\xa9", "a\"b", "a\\b",
      "a<b>",        "a[0]", "a{b}",
      "a|b",         "a^b",  "a`b",
  };
  for(size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    expect_invalid(&(struct kcr_ref){&cm, "default", bad[i], NULL});
    expect_invalid(&(struct kcr_ref){&cm, bad[i], "a", NULL});
    expect_invalid(&(struct kcr_ref){&cm, "default", "a", bad[i]});
    expect_invalid(&(struct kcr_ref){&(struct kcr_gvr){bad[i], "v1", "x", false}});
    expect_invalid(&(struct kcr_ref){&(struct kcr_gvr){"g.io", bad[i], "x", false}});
    expect_invalid(&(struct kcr_ref){&(struct kcr_gvr){"g.io", "v1", bad[i], false}});
  }
}

/* Namespaces, versions, resources and subresources are RFC 1123 labels, and
 * groups RFC 1123 subdomains, as the apiserver requires. */
static void namespaces_groups_and_resources_follow_the_apiservers_rules(void **state)
{
  static const char *const bad_labels[] = {
      "Default",
      "team_a",
      "-a",
      "a-",
      "a.b",
      "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", /* 64 */
  };
  for(size_t i = 0; i < sizeof(bad_labels) / sizeof(bad_labels[0]); i++) {
    expect_invalid(&(struct kcr_ref){&cm, bad_labels[i], "a", NULL});
    expect_invalid(&(struct kcr_ref){&cm, "default", "a", bad_labels[i]});
    expect_invalid(&(struct kcr_ref){&(struct kcr_gvr){"", bad_labels[i], "x", false}});
    expect_invalid(&(struct kcr_ref){&(struct kcr_gvr){"", "v1", bad_labels[i], false}});
  }
  expect_invalid(&(struct kcr_ref){&(struct kcr_gvr){"Apps", "v1", "x", false}});
  expect_invalid(&(struct kcr_ref){&(struct kcr_gvr){"a..b", "v1", "x", false}});
  expect_invalid(&(struct kcr_ref){&(struct kcr_gvr){".a", "v1", "x", false}});
  expect_invalid(&(struct kcr_ref){&(struct kcr_gvr){"a.", "v1", "x", false}});
  /* 63-character labels and 253-character groups are fine. */
  expect_path(
      &(struct kcr_ref){&cm,
                        "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
                        NULL, NULL},
      "/api/v1/namespaces/"
      "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa/configmaps");
  expect_path(&(struct kcr_ref){&(struct kcr_gvr){"rbac.authorization.k8s.io", "v1",
                                                  "clusterroles", false}},
              "/apis/rbac.authorization.k8s.io/v1/clusterroles");
}

/* Names are DNS subdomains for most kinds, and path-segment names for some
 * (RBAC: "system:controller:job-controller"): every character that stands
 * for itself in a URL path segment is accepted. */
static void names_with_path_safe_punctuation_are_accepted(void **state)
{
  static const struct kcr_gvr cr = {"rbac.authorization.k8s.io", "v1", "clusterroles",
                                    false};
  expect_path(&(struct kcr_ref){&cr, NULL, "system:controller:job-controller"},
              "/apis/rbac.authorization.k8s.io/v1/clusterroles/"
              "system:controller:job-controller");
  expect_path(&(struct kcr_ref){&cr, NULL, "Admin_Role-1.x~y@z+w=v,u;t!s$r&q'p(o)n*m"},
              "/apis/rbac.authorization.k8s.io/v1/clusterroles/"
              "Admin_Role-1.x~y@z+w=v,u;t!s$r&q'p(o)n*m");
  expect_path(&(struct kcr_ref){&cm, "kube-system", "..."},
              "/api/v1/namespaces/kube-system/configmaps/...");
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

/* kcr_path and kcr_query_add append as the kcr_buf functions do: on a
 * failed buffer they are no-ops returning its error, so a path and its
 * queries are checked once; kcr_path's KCR_EINVAL is not kept. */
static void appends_to_a_failed_buffer_are_no_ops(void **state)
{
  struct kcr_buf b = KCR_BUF_INIT;

  assert_int_equal(KCR_EINVAL, kcr_path(&b, &(struct kcr_ref){&cm, NULL, "a", NULL}));
  assert_int_equal(KCR_OK, kcr_buf_err(&b));
  assert_int_equal(KCR_OK, kcr_buf_puts(&b, "x"));
  tfail_arm(1);
  assert_int_equal(KCR_ENOMEM, kcr_buf_reserve(&b, 1000));
  tfail_arm(0);
  assert_int_equal(KCR_ENOMEM,
                   kcr_path(&b, &(struct kcr_ref){&cm, "default", NULL, NULL}));
  assert_int_equal(KCR_ENOMEM, kcr_query_add(&b, "k", "v"));
  assert_int_equal(KCR_ENOMEM, kcr_query_add(&b, "k", NULL));
  assert_int_equal(KCR_ENOMEM, kcr_query_add_int(&b, "limit", 5));
  assert_string_equal("x", kcr_buf_str(&b));
  kcr_buf_cleanup(&b);
}

/* apimachinery's resourceversion_test.go cases, and what lies between. */
static void resource_versions_compare_as_apimachinery_does(void **state)
{
  static const struct {
    const char *a, *b;
    int want; /* -1, 0, 1; 2: not comparable */
  } cases[] = {
      {"100", "200", -1},
      {"200", "100", 1},
      {"1", "1", 0},
      {"100", "100", 0},
      {"99", "100", -1}, /* by length first, */
      {"100", "99", 1},
      {"19", "2", 1}, /* never as text alone */
      {"99999999999999999999999999999999999999999999999999",
       "100000000000000000000000000000000000000000000000000", -1}, /* any length */
      {"18446744073709551616", "18446744073709551615", 1},         /* past uint64 */
      {"0", "1", 2}, /* zero is no version */
      {"1", "0", 2},
      {"0", "0", 2},
      {"0100", "100", 2}, /* leading zero */
      {"100", "0100", 2},
      {"", "100", 2},
      {"100", "", 2},
      {"100a", "100", 2},
      {"100", "100a", 2},
      {"-1", "1", 2},
      {"+1", "1", 2},
      {" 1", "1", 2},
      {"1 ", "1", 2},
      {NULL, "1", 2},
      {"1", NULL, 2},
      {NULL, NULL, 2},
  };
  for(size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    int cmp = 42;
    kcr_err rc = kcr_rv_compare(cases[i].a, cases[i].b, &cmp);
    if(cases[i].want == 2 ? rc != KCR_EINVAL || cmp != 0
                          : rc != KCR_OK || cmp != cases[i].want)
      fail_msg("kcr_rv_compare(%s, %s): rc %d cmp %d, want %d",
               cases[i].a ? cases[i].a : "NULL", cases[i].b ? cases[i].b : "NULL",
               (int)rc, cmp, cases[i].want);
  }
}

int main(void)
{
  tfail_init();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(core_namespaced_paths),
      cmocka_unit_test(core_cluster_scoped_paths),
      cmocka_unit_test(named_group_paths),
      cmocka_unit_test(invalid_refs_are_refused),
      cmocka_unit_test(names_with_url_syntax_or_control_characters_are_refused),
      cmocka_unit_test(namespaces_groups_and_resources_follow_the_apiservers_rules),
      cmocka_unit_test(names_with_path_safe_punctuation_are_accepted),
      cmocka_unit_test(query_is_encoded_and_joined),
      cmocka_unit_test(appends_to_a_failed_buffer_are_no_ops),
      cmocka_unit_test(resource_versions_compare_as_apimachinery_does),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
