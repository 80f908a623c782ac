/* The locking protocol of kube/config.c's DESIGN is checked in debug builds
 * (KCR_ASSERT): the functions that work "under mu" find it held, a
 * background refresh never starts while a run is under way, and a config is
 * not freed more often than referenced. Those functions are private, so
 * this test compiles config.c into itself to reach them (its definitions
 * are then the ones linked; libkcr's copy is not pulled in). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "kube/config.c"
#include "tabort.h"
#include "tfail.h"

/* The cached plugin answer read without mu. */
static void exec_state_unlocked(void *ud)
{
  kcr_config *cfg = config_new("test");
  if(cfg)
    exec_state(cfg, kcr_time_now());
}

/* A second plugin run started while one is under way. */
static void refresh_while_running(void *ud)
{
  kcr_config *cfg = config_new("test");
  if(!cfg)
    return;
  pthread_mutex_lock(&cfg->mu);
  cfg->ex.running = true;
  start_refresh(cfg);
}

/* A reference taken on a config whose count is already 0. */
static void ref_of_a_dead_config(void *ud)
{
  kcr_config *cfg = config_new("test");
  if(!cfg)
    return;
  atomic_store(&cfg->refs, 0);
  kcr_config_ref(cfg);
}

static void broken_invariants_abort_debug_builds(void **state)
{
  TABORT_SKIP_IN_RELEASE();
  assert_true(tabort(exec_state_unlocked, NULL));
  assert_true(tabort(refresh_while_running, NULL));
  assert_true(tabort(ref_of_a_dead_config, NULL));
}

/* The same file as libkcr's: references and the locked path work. */
static void references_and_credentials_work(void **state)
{
  static const char yaml[] =
      "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
      "clusters:\n- name: k\n  cluster:\n    server: https://h\n"
      "users:\n- name: u\n  user:\n    token: t\n"
      "contexts:\n- name: c\n  context:\n    cluster: k\n    user: u\n";
  struct kcr_credentials cr;
  kcr_config *cfg;

  assert_int_equal(KCR_OK,
                   kcr_config_from_yaml(yaml, sizeof(yaml) - 1,
                                        &(struct kcr_config_opts){0}, &cfg, NULL));
  assert_ptr_equal(cfg, kcr_config_ref(cfg));
  kcr_config_free(cfg);
  assert_int_equal(KCR_OK, kcr_config_dup_credentials(cfg, &cr, NULL));
  assert_string_equal("t", cr.token);
  kcr_credentials_cleanup(&cr);
  kcr_config_free(cfg);
}

int main(void)
{
  tfail_init();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(references_and_credentials_work),
      cmocka_unit_test(broken_invariants_abort_debug_builds),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
