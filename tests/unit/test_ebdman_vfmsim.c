/* vfm-sim's delay (examples/vfm-sim/vfm_delay.h): the annotation
 * vfm-sim.ebdman.example.com/delay is anyone's to write, so vfm-sim accepts
 * delays up to 24h only, and the time left to wait never exceeds the delay
 * whatever the clock readings: a huge delay can never turn into a requeue
 * delay above INT64_MAX (which the queue would take as "now": a hot loop). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "../../examples/vfm-sim/vfm_delay.h"

static void delays_up_to_a_day_are_accepted(void **state)
{
  uint64_t ms = 7;
  assert_int_equal(KCR_OK, vfm_sim_delay_parse("0s", &ms));
  assert_int_equal(0, ms);
  assert_int_equal(KCR_OK, vfm_sim_delay_parse("500ms", &ms));
  assert_int_equal(500, ms);
  assert_int_equal(KCR_OK, vfm_sim_delay_parse("24h", &ms));
  assert_int_equal(VFM_SIM_MAX_DELAY_MS, ms);
  assert_int_equal(KCR_OK, vfm_sim_delay_parse("86400000ms", &ms));
  assert_int_equal(86400000, ms);
}

static void longer_or_malformed_delays_are_refused(void **state)
{
  static const char *const bad[] = {
      "10000000000000000s", /* the hot loop of issue 8, item 11 */
      "86400001ms",         /* one millisecond over */
      "24h1ms",
      "25h",
      "9223372036854775807ms",
      "99999999999999999999999h",
      "-1s",
      "soon",
      "",
  };
  for(size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    uint64_t ms = 7;
    if(vfm_sim_delay_parse(bad[i], &ms) != KCR_EPARSE)
      fail_msg("\"%s\" accepted as %llu ms", bad[i], (unsigned long long)ms);
    assert_int_equal(7, ms); /* unchanged */
  }
  assert_int_equal(KCR_EPARSE, vfm_sim_delay_parse(NULL, &(uint64_t){0}));
}

static void time_left_counts_down_from_the_start(void **state)
{
  assert_int_equal(2000, vfm_sim_wait_ms(1000, 2000, 1000));
  assert_int_equal(1500, vfm_sim_wait_ms(1000, 2000, 1500));
  assert_int_equal(1, vfm_sim_wait_ms(1000, 2000, 2999));
  assert_int_equal(0, vfm_sim_wait_ms(1000, 2000, 3000)); /* due */
  assert_int_equal(0, vfm_sim_wait_ms(1000, 2000, 50000));
  assert_int_equal(0, vfm_sim_wait_ms(1000, 0, 1000)); /* no delay */
}

static void time_left_never_wraps_nor_exceeds_the_delay(void **state)
{
  /* The sums at + delay that wrapped or passed INT64_MAX before. */
  uint64_t big = 10000000000000000000ull; /* 10^16 s in ms: above INT64_MAX */
  assert_int_equal(big - 1000, vfm_sim_wait_ms(1000, big, 2000));
  assert_int_equal(UINT64_MAX - 1000, vfm_sim_wait_ms(1000, UINT64_MAX, 2000));
  assert_int_equal(5, vfm_sim_wait_ms(UINT64_MAX - 10, 10, UINT64_MAX - 5));
  assert_int_equal(0, vfm_sim_wait_ms(UINT64_MAX - 10, 10, UINT64_MAX));
  /* A start after now (clock readings out of order) waits the delay, no more. */
  assert_int_equal(2000, vfm_sim_wait_ms(5000, 2000, 1000));
  assert_int_equal(2000, vfm_sim_wait_ms(UINT64_MAX, 2000, 0));
  /* With any accepted delay, the requeue delay fits an int64. */
  uint64_t max;
  assert_int_equal(KCR_OK, vfm_sim_delay_parse("24h", &max));
  uint64_t readings[] = {0, 1, 1000, INT64_MAX, UINT64_MAX - 1, UINT64_MAX};
  for(size_t a = 0; a < 6; a++)
    for(size_t n = 0; n < 6; n++)
      assert_true(vfm_sim_wait_ms(readings[a], max, readings[n]) <= max);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(delays_up_to_a_day_are_accepted),
      cmocka_unit_test(longer_or_malformed_delays_are_refused),
      cmocka_unit_test(time_left_counts_down_from_the_start),
      cmocka_unit_test(time_left_never_wraps_nor_exceeds_the_delay),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
