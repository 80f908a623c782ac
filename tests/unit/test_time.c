/* RFC 3339 as Kubernetes writes it; durations as Go writes them. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
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

/* The text printf gives for t (gmtime_r's fields), as the formatter wrote
 * it before it wrote digits by hand. */
static void reference(time_t t, long us, char *out, size_t n)
{
  struct tm tm;
  char tmp[96];
  assert_non_null(gmtime_r(&t, &tm));
  if(us < 0)
    snprintf(tmp, sizeof(tmp), "%04d-%02d-%02dT%02d:%02d:%02dZ", tm.tm_year + 1900,
             tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
  else
    snprintf(tmp, sizeof(tmp), "%04d-%02d-%02dT%02d:%02d:%02d.%06ldZ", tm.tm_year + 1900,
             tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, us);
  snprintf(out, n, "%s", tmp);
}

/* Every 7th second of a day at each end of the years 0..9999 and at leap
 * days, and a walk over the whole range: the same text as printf's. Past
 * the range, printf's text of the year modulo 10000, as before. */
static void formats_as_printf_does(void **state)
{
  static const time_t starts[] = {-62167219200LL, /* 0000-01-01 */
                                  -62162121600LL, /* 0000-02-29 (a leap year) */
                                  0,
                                  951782400,      /* 2000-02-29 */
                                  4107456000LL,   /* 2100-02-28 (not leap) */
                                  253402214400LL, /* 9999-12-31 */
                                  -86400};
  char got[KCR_RFC3339_MICRO_LEN], want[KCR_RFC3339_MICRO_LEN];
  struct timespec ts;

  for(size_t i = 0; i < sizeof(starts) / sizeof(starts[0]); i++)
    for(time_t t = starts[i]; t < starts[i] + 86400; t += 7) {
      kcr_time_format(t, got);
      reference(t, -1, want, KCR_RFC3339_LEN);
      if(strcmp(got, want))
        fail_msg("%lld: '%s', want '%s'", (long long)t, got, want);
    }
  for(time_t t = -62167219200LL; t < 253402300800LL; t += 86400 * 37 + 3607) {
    ts.tv_sec = t;
    ts.tv_nsec = (long)((uint64_t)t * 2654435761u % 1000000000u);
    kcr_time_format_micro(&ts, got);
    reference(t, ts.tv_nsec / 1000, want, sizeof(want));
    if(strcmp(got, want))
      fail_msg("%lld.%09ld: '%s', want '%s'", (long long)t, ts.tv_nsec, got, want);
  }
  kcr_time_format(253402300800LL, got); /* 10000-01-01 */
  assert_string_equal("0000-01-01T00:00:00Z", got);
  ts = (struct timespec){253402300800LL + 61, 5000};
  kcr_time_format_micro(&ts, got);
  assert_string_equal("0000-01-01T00:01:01.000005Z", got);
  (void)state;
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

/* What apimachinery refuses (time.Parse(time.RFC3339) behind metav1.Time),
 * kcr refuses: kcr_cond_validate_json must not call valid what the
 * apiserver would not. */
static void refuses_what_go_refuses(void **state)
{
  static const char *const bad[] = {
      "2026-11-29 10:00:00Z",      /* space instead of T */
      "2026-11-29t10:00:00Z",      /* lower-case t */
      "2026-11-29T10:00:00z",      /* lower-case z */
      "2026-11-29t10:00:00z",      /* both */
      "2026-11-29T10:00:00.5z",    /* lower-case z after a fraction */
      "2026-11-29T10:00:00 Z",     /* space before the zone */
      "2026-11-29T10:00:00+25:00", /* offset hour > 24 */
      "2026-11-29T10:00:00+23:61", /* offset minute > 60 */
      "2026-11-29T10:00:00+0200",  /* offset without colon */
      "2026-11-29T10:00:00+02",    /* offset without minutes */
      "2026-11-29T10:00:00UTC",    /* zone name */
      "2026-11-29T10:00:00.Z",     /* '.' without digits */
      "2026-11-29T10:00:00,Z",     /* ',' without digits */
      "2026-11-29T10:00Z",         /* no seconds */
      "2026-11-29T10:0:00Z",       /* one-digit minute */
      "2026-11-29T10:00:0Z",       /* one-digit second */
      "2026-1-29T10:00:00Z",       /* one-digit month */
      "2026-11-9T10:00:00Z",       /* one-digit day */
      "26-11-29T10:00:00Z",        /* two-digit year */
      "+2026-11-29T10:00:00Z",     /* signed year */
      "2026-11-29T123:00:00Z",     /* three-digit hour */
      "2026-11-29T:00:00Z",        /* no hour */
      "2026-11-29T24:00:00Z",      /* hour 24 */
      "2026-11-29T23:60:00Z",      /* minute 60 */
      "2026-11-29T23:59:60Z",      /* leap second */
      "2026-11-29T10:00:00Z ",     /* trailing space */
      " 2026-11-29T10:00:00Z",     /* leading space */
      "2026-04-31T10:00:00Z",      /* April 31 */
      "1900-02-29T10:00:00Z",      /* not a leap year */
  };
  time_t t;
  for(size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    if(kcr_time_parse(bad[i], &t) != KCR_EPARSE)
      fail_msg("accepted %s", bad[i]);
  }
}

static void accepts_what_go_accepts(void **state)
{
  static const struct {
    const char *s;
    time_t want;
  } good[] = {
      {"2026-11-29T10:00:00Z", 1795946400},
      {"2026-11-29T10:00:00.123456789Z", 1795946400},
      {"2026-11-29T10:00:00.1234567890123Z", 1795946400}, /* any length */
      {"2026-11-29T10:00:00,5Z", 1795946400},             /* comma fraction */
      {"2026-11-29T9:00:00-01:00", 1795946400},           /* one-digit hour */
      {"2026-11-29T10:00:00+00:00", 1795946400},
      {"2026-11-30T10:00:00+24:00", 1795946400}, /* Go allows 24 hours */
      {"2026-11-29T11:00:00+00:60", 1795946400}, /* ... and 60 minutes */
      {"2000-02-29T00:00:00Z", 951782400},       /* leap year */
      {"0001-01-01T00:00:00Z", -62135596800LL},  /* Go's zero time */
      {"9999-12-31T23:59:59Z", 253402300799LL},
  };
  for(size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
    time_t t = 0;
    if(kcr_time_parse(good[i].s, &t) != KCR_OK)
      fail_msg("refused %s", good[i].s);
    if(t != good[i].want)
      fail_msg("%s: %lld, want %lld", good[i].s, (long long)t, (long long)good[i].want);
  }
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

/* time.ParseDuration's grammar and limits, to the nanosecond; the result in
 * milliseconds rounded up. */
static void parses_durations_as_go_does(void **state)
{
  static const struct {
    const char *s;
    uint64_t ms;
  } good[] = {
      {"0", 0},
      {"-0", 0},
      {"+0", 0},
      {"0s", 0},
      {"-0s", 0}, /* zero is not negative */
      {"+5s", 5000},
      {"1h1h", 7200000},
      {"2h45m30.5s", 9930500},
      {".5s", 500},
      {"5.s", 5000},
      {"1ns", 1}, /* rounded up: never 0 for a nonzero duration */
      {"1000000ns", 1},
      {"1000001ns", 2},
      {"1500us", 2},
      {"1000\xc2\xb5s", 1}, /* micro sign */
      {"1000\xce\xbcs", 1}, /* Greek mu */
      {"1.000001ms", 2},
      {"1.0000001ms", 1},   /* 0.1 ns: dropped, as Go does */
      {"0.0000000001s", 0}, /* below a nanosecond: Go drops it */
      {"2562047h47m16.854775807s", 9223372036855},
      {"9223372036854775807ns", 9223372036855},
      {"9223372036854ms", 9223372036854},
      {"1.5", 1500}, /* bare number: seconds (kcr) */
  };
  static const char *const bad[] = {
      "99999999999999999999999h", /* was accepted, through a double */
      "10000000000000000s",       /* 10^16 s: past 2^63 ns */
      "9223372036854775808ns",    /* 2^63 ns */
      "2562047h47m16.854775808s", /* one ns past the maximum */
      "2562048h",
      "9223372036855ms",
      "2562047h2562047h", /* the sum overflows */
      "99999999999999999999",
      "-1ns",
      "-5s",
      "+",
      "-",
      ".",
      ".s",
      "1.2.3s",
      "1 s",
      "1sec",
      "1S",
      "1H",
      "5d",
      "1h30",
      "s5",
      "0x10s",
      "1e3s",
      "nan",
      "inf",
  };
  for(size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
    uint64_t ms = 12345;
    if(kcr_duration_parse(good[i].s, &ms) != KCR_OK)
      fail_msg("refused %s", good[i].s);
    if(ms != good[i].ms)
      fail_msg("%s: %llu ms, want %llu", good[i].s, (unsigned long long)ms,
               (unsigned long long)good[i].ms);
  }
  for(size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    uint64_t ms = 12345;
    if(kcr_duration_parse(bad[i], &ms) != KCR_EPARSE)
      fail_msg("accepted %s (%llu ms)", bad[i], (unsigned long long)ms);
    assert_int_equal(12345, ms); /* untouched */
  }
  assert_int_equal(KCR_EPARSE, kcr_duration_parse(NULL, &(uint64_t){0}));
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(formats_second_precision_utc),
      cmocka_unit_test(formats_micro_time),
      cmocka_unit_test(formats_as_printf_does),
      cmocka_unit_test(parses_and_round_trips),
      cmocka_unit_test(refuses_malformed),
      cmocka_unit_test(refuses_what_go_refuses),
      cmocka_unit_test(accepts_what_go_accepts),
      cmocka_unit_test(parses_durations),
      cmocka_unit_test(parses_durations_as_go_does),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
