/* kcr_backoff: client-go's reflector schedule, and delays that stay within
 * max_ms whatever the factor and jitter (a double past the integer range
 * converted to uint64_t is undefined behaviour: UBSan's float-cast-overflow
 * reports it, and on x86-64 it gives 0, which restarted the schedule). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "kcr/backoff.h"
#include "kcr/time.h"

static void the_reflector_schedule_doubles_with_jitter_up_to_the_cap(void **state)
{
  (void)state;
  struct kcr_backoff b = KCR_BACKOFF_REFLECTOR;
  uint64_t base = 800;

  for(int i = 0; i < 12; i++) {
    uint64_t d = kcr_backoff_next(&b);
    assert_true(d >= base && d <= 30000);
    assert_true(d < 2 * base || d == 30000); /* jitter 1.0: [base, 2 base) */
    base = base * 2 > 30000 ? 30000 : base * 2;
  }
  kcr_backoff_reset(&b);
  assert_true(kcr_backoff_next(&b) < 1600);
}

/* No cap (KCR_FOREVER): the delays double until they reach the cap and stay
 * there; before, 2^63 * 2 was converted to uint64_t (0 on x86-64), and the
 * next delay was initial_ms again. */
static void delays_without_a_cap_saturate_instead_of_wrapping(void **state)
{
  (void)state;
  struct kcr_backoff b = {1, KCR_FOREVER, 0, 2.0, 0, 0, 0, 0};
  uint64_t prev = 0, d = 0;

  for(int i = 0; i < 70; i++) {
    d = kcr_backoff_next(&b);
    assert_true(d >= prev);
    prev = d;
  }
  assert_true(d == KCR_FOREVER);
}

/* Huge, infinite and NaN factors and jitters: every delay within max_ms. */
static void nonsense_factors_and_jitters_stay_within_max(void **state)
{
  (void)state;
  const double odd[] = {1e300, HUGE_VAL, NAN, -HUGE_VAL, 0};
  const uint64_t caps[] = {30000, UINT64_MAX / 2 + 1, KCR_FOREVER};

  for(size_t f = 0; f < sizeof(odd) / sizeof(odd[0]); f++)
    for(size_t j = 0; j < sizeof(odd) / sizeof(odd[0]); j++)
      for(size_t c = 0; c < sizeof(caps) / sizeof(caps[0]); c++) {
        struct kcr_backoff b = {800, caps[c], 0, odd[f], odd[j], 0, 0, 0};
        for(int i = 0; i < 5; i++)
          assert_true(kcr_backoff_next(&b) <= caps[c]);
      }
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(the_reflector_schedule_doubles_with_jitter_up_to_the_cap),
      cmocka_unit_test(delays_without_a_cap_saturate_instead_of_wrapping),
      cmocka_unit_test(nonsense_factors_and_jitters_stay_within_max),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
