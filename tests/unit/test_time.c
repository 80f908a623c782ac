/* RFC 3339 as Kubernetes writes it; durations as Go writes them. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "kcr/time.h"

static void formats_second_precision_utc(void **state)
{
  char out[KCR_RFC3339_LEN];
  kcr_time_format(0, out);
  assert_string_equal("1970-01-01T00:00:00Z", out);
  kcr_time_format(1795946400, out); /* 2026-11-29T10:00:00Z */
  assert_string_equal("2026-11-29T10:00:00Z", out);
  kcr_time_format(951782400, out); /* leap day 2000 */
  assert_string_equal("2000-02-29T00:00:00Z", out);
  kcr_time_format(-1, out);
  assert_string_equal("1969-12-31T23:59:59Z", out);
}

static void formats_micro_time(void **state)
{
  char out[KCR_RFC3339_MICRO_LEN];
  struct timespec ts = {1795946400, 123456789};
  kcr_time_format_micro(&ts, out);
  assert_string_equal("2026-11-29T10:00:00.123456Z", out);
}

static void parses_and_round_trips(void **state)
{
  time_t t;
  char out[KCR_RFC3339_LEN];
  assert_int_equal(KCR_OK, kcr_time_parse("2026-11-29T10:00:00Z", &t));
  assert_int_equal(1795946400, t);
  kcr_time_format(t, out);
  assert_string_equal("2026-11-29T10:00:00Z", out);
  assert_int_equal(KCR_OK, kcr_time_parse("2026-11-29T12:00:00+02:00", &t));
  assert_int_equal(1795946400, t);
  assert_int_equal(KCR_OK, kcr_time_parse("2026-11-29T09:30:00.999-00:30", &t));
  assert_int_equal(1795946400, t);
  assert_int_equal(KCR_OK, kcr_time_parse("2024-02-29T00:00:00Z", &t));
  for(time_t x = 0; x < 4000000000; x += 86399 * 37) {
    kcr_time_format(x, out);
    assert_int_equal(KCR_OK, kcr_time_parse(out, &t));
    assert_int_equal(x, t);
  }
}

static void refuses_malformed(void **state)
{
  static const char *const bad[] = {"",
                                    "2026-11-29",
                                    "2026-11-29T10:00:00",
                                    "2026-13-01T00:00:00Z",
                                    "2026-02-30T00:00:00Z",
                                    "2025-02-29T00:00:00Z",
                                    "2026-11-29T24:00:00Z",
                                    "2026-11-29T10:00:00.Z",
                                    "2026-11-29T10:00:00+2:00",
                                    "2026-11-29T10:00:00Zjunk",
                                    "2026-11-29T10:00:60Z",
                                    "null"};
  time_t t;
  for(size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
    assert_int_equal(KCR_EPARSE, kcr_time_parse(bad[i], &t));
  assert_int_equal(KCR_EPARSE, kcr_time_parse(NULL, &t));
}

static void parses_durations(void **state)
{
  uint64_t ms;
  assert_int_equal(KCR_OK, kcr_duration_parse("500ms", &ms));
  assert_int_equal(500, ms);
  assert_int_equal(KCR_OK, kcr_duration_parse("2s", &ms));
  assert_int_equal(2000, ms);
  assert_int_equal(KCR_OK, kcr_duration_parse("1m30s", &ms));
  assert_int_equal(90000, ms);
  assert_int_equal(KCR_OK, kcr_duration_parse("1.5h", &ms));
  assert_int_equal(5400000, ms);
  assert_int_equal(KCR_OK, kcr_duration_parse("10", &ms));
  assert_int_equal(10000, ms);
  assert_int_equal(KCR_EPARSE, kcr_duration_parse("", &ms));
  assert_int_equal(KCR_EPARSE, kcr_duration_parse("5x", &ms));
  assert_int_equal(KCR_EPARSE, kcr_duration_parse("-1s", &ms));
  assert_int_equal(KCR_EPARSE, kcr_duration_parse("1m30", &ms));
  assert_int_equal(KCR_EPARSE, kcr_duration_parse("s", &ms));
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(formats_second_precision_utc),
      cmocka_unit_test(formats_micro_time),
      cmocka_unit_test(parses_and_round_trips),
      cmocka_unit_test(refuses_malformed),
      cmocka_unit_test(parses_durations),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
