/* The invariants of a compiled keep-list (runtime/projection.c's DESIGN) are
 * checked in debug builds (KCR_ASSERT): a trie whose fields contradict them
 * aborts the print instead of reading outside it. The trie is private to
 * projection.c, so this test compiles that file into itself to reach it
 * (its definitions are then the ones linked; libkcr's copy is not pulled
 * in). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "runtime/projection.c"
#include "tabort.h"
#include "tfail.h"

static const char *const keep[] = {"/spec/replicas", NULL};

/* Prints {"spec":{"replicas":1}} with p after break_it changed it. */
static void print_broken(void (*break_it)(struct kcr__proj *p))
{
  struct kcr_buf out = KCR_BUF_INIT;
  struct kcr__proj *p;
  cJSON *tree = cJSON_Parse("{\"spec\":{\"replicas\":1}}");

  if(!tree || kcr__proj_new(keep, 0, &p))
    return;
  break_it(p);
  kcr__proj_print(p, tree, &out);
}

static void object_kept_whole(struct kcr__proj *p) { p->node[0].whole = true; }
static void more_nodes_than_room(struct kcr__proj *p) { p->n = p->cap + 1; }
static void child_out_of_range(struct kcr__proj *p) { p->node[0].child = p->n; }

static void root_whole(void *ud) { print_broken(object_kept_whole); }
static void overfull(void *ud) { print_broken(more_nodes_than_room); }
static void bad_child(void *ud) { print_broken(child_out_of_range); }

static void broken_invariants_abort_debug_builds(void **state)
{
  TABORT_SKIP_IN_RELEASE();
  assert_true(tabort(root_whole, NULL));
  assert_true(tabort(overfull, NULL));
  assert_true(tabort(bad_child, NULL));
}

/* The same file as libkcr's: an intact keep-list prints as it should. */
static void an_intact_keep_list_prints(void **state)
{
  struct kcr_buf out = KCR_BUF_INIT;
  struct kcr__proj *p;
  cJSON *tree = cJSON_Parse("{\"kind\":\"X\",\"spec\":{\"replicas\":1,\"image\":\"i\"}}");

  assert_non_null(tree);
  assert_int_equal(KCR_OK, kcr__proj_new(keep, 0, &p));
  assert_int_equal(KCR_OK, kcr__proj_print(p, tree, &out));
  assert_string_equal("{\"kind\":\"X\",\"spec\":{\"replicas\":1}}", kcr_buf_str(&out));
  kcr_buf_cleanup(&out);
  kcr__proj_free(p);
  cJSON_Delete(tree);
}

int main(void)
{
  tfail_init();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(an_intact_keep_list_prints),
      cmocka_unit_test(broken_invariants_abort_debug_builds),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
