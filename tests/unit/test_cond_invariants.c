/* The invariants status/cond.c's DESIGN states are checked in debug builds
 * (KCR_ASSERT). Its helpers are private, so this test compiles that file
 * into itself to reach them (its definitions are then the ones linked;
 * libkcr's copy is not pulled in). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "status/cond.c"
#include "tabort.h"
#include "tfail.h"

/* put() swaps in a fresh node: one that already has a name (or sits in a
 * list) would have that name leaked, or its list corrupted. */
static void put_a_named_node(void *ud)
{
  cJSON *o = cJSON_Parse("{\"status\":\"True\",\"reason\":\"R\"}");
  if(!o)
    return;
  put(o, "status", cJSON_DetachItemFromObject(o, "reason"));
}

static void put_a_node_in_a_list(void *ud)
{
  cJSON *a = cJSON_Parse("[\"x\",\"y\"]"), *o = cJSON_CreateObject();
  if(!a || !o || !cJSON_AddStringToObject(o, "status", "True"))
    return;
  put(o, "status", cJSON_GetArrayItem(a, 0));
}

static void broken_invariants_abort_debug_builds(void **state)
{
  TABORT_SKIP_IN_RELEASE();
  assert_true(tabort(put_a_named_node, NULL));
  assert_true(tabort(put_a_node_in_a_list, NULL));
}

/* The same file as libkcr's: a set still works. */
static void a_set_keeps_the_item_its_type_finds(void **state)
{
  cJSON *conds = cJSON_CreateArray(), *item;
  struct kcr_cond c = {.type = "Ready", .status = "True", .reason = "Up", .message = ""};
  bool changed;

  assert_int_equal(KCR_OK, kcr_cond_set(conds, &c, 1000, &changed, NULL));
  item = kcr_cond_find(conds, "Ready");
  c.status = "False";
  assert_int_equal(KCR_OK, kcr_cond_set(conds, &c, 2000, &changed, NULL));
  assert_true(changed);
  assert_ptr_equal(item, kcr_cond_find(conds, "Ready"));
  assert_true(kcr_cond_is_false(conds, "Ready"));
  cJSON_Delete(conds);
}

int main(void)
{
  tfail_init();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(a_set_keeps_the_item_its_type_finds),
      cmocka_unit_test(broken_invariants_abort_debug_builds),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
