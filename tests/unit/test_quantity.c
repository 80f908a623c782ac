/* kcr_quantity_scaled against resource.Quantity: the expected figures are
 * what Value(), MilliValue() and ScaledValue(Nano) of
 * k8s.io/apimachinery v0.37.2 return for the same texts (run once, in Go;
 * where Go's int64 wraps or caps, KCR_ERANGE instead). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "kcr.h"

#define R KCR_ERANGE

static const struct {
  const char *q;
  int64_t units, milli, nano;
  kcr_err rc_units, rc_milli, rc_nano; /* 0: KCR_OK */
} cases[] = {
    {"0", 0, 0, 0},
    {"100m", 1, 100, 100000000},
    {"1.5", 2, 1500, 1500000000},
    {"1.5Gi", 1610612736, 1610612736000, 1610612736000000000},
    {"1Ki", 1024, 1024000, 1024000000000},
    {"0.5Ki", 512, 512000, 512000000000},
    {"2e3", 2000, 2000000, 2000000000000},
    {"5E-3", 1, 5, 5000000},
    {"1u", 1, 1, 1000},
    {"1n", 1, 1, 1},
    {"-100m", -1, -100, -100000000},
    {"-1.5", -2, -1500, -1500000000},
    {"1E", 1000000000000000000, 0, 0, 0, R, R},
    {"9223372036854775807", INT64_MAX, 0, 0, 0, R, R},
    {"7Ei", 8070450532247928832, 0, 0, 0, R, R},
    {"0.000000001", 1, 1, 1},
    {"1e-100", 1, 1, 1},
    {"0e100", 0, 0, 0},
    {".5", 1, 500, 500000000},
    {"1.", 1, 1000, 1000000000},
    {"1.G", 1000000000, 1000000000000, 1000000000000000000},
    {"+5", 5, 5000, 5000000000},
    {"e3", 0, 0, 0},
    {"123456789012345678901234567890m", 0, 0, 0, R, R, R},
    {"9223372036854775808", 0, 0, 0, R, R, R},
    {"8Ei", 0, 0, 0, R, R, R}, /* Go caps it at 2^63 - 1 */
    /* 2^64 - 1 milli-units and a fraction: rounding up must not wrap to 0
     * (fuzz_quantity) */
    {"18446744073709551615.2m", 18446744073709552, 0, 0, 0, R, R},
    {"1e100", 0, 0, 0, R, R, R},
    {"1K", 0, 0, 0, KCR_EINVAL, KCR_EINVAL, KCR_EINVAL},
    {"1kb", 0, 0, 0, KCR_EINVAL, KCR_EINVAL, KCR_EINVAL},
    {"1.5.5", 0, 0, 0, KCR_EINVAL, KCR_EINVAL, KCR_EINVAL},
    {"", 0, 0, 0, KCR_EINVAL, KCR_EINVAL, KCR_EINVAL},
    {"1 ", 0, 0, 0, KCR_EINVAL, KCR_EINVAL, KCR_EINVAL},
    {"1e", 0, 0, 0, KCR_EINVAL, KCR_EINVAL, KCR_EINVAL},
};

static void quantities_read_as_go_reads_them(void **state)
{
  for(size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    const int scale[] = {KCR_QUANTITY_UNITS, KCR_QUANTITY_MILLI, -9};
    const int64_t want[] = {cases[i].units, cases[i].milli, cases[i].nano};
    const kcr_err rc[] = {cases[i].rc_units, cases[i].rc_milli, cases[i].rc_nano};
    for(int k = 0; k < 3; k++) {
      int64_t got = 42;
      kcr_err r = kcr_quantity_scaled(kcr_str_c(cases[i].q), scale[k], &got);
      if(r != rc[k] || got != (rc[k] ? 0 : want[k]))
        fail_msg("\"%s\" at 10^%d: got %s %lld, want %s %lld", cases[i].q, scale[k],
                 kcr_err_name(r), (long long)got, kcr_err_name(rc[k]),
                 (long long)want[k]);
    }
  }
}

/* A quantity's text is not NUL-terminated in a typed view: only its n
 * bytes are read; scale and length limits. */
static void only_the_given_bytes_are_read(void **state)
{
  int64_t v;
  char big[300];

  assert_int_equal(KCR_OK, kcr_quantity_scaled((struct kcr_str){"250mXYZ", 4}, -3, &v));
  assert_int_equal(250, v);
  assert_int_equal(KCR_EINVAL, kcr_quantity_scaled(kcr_str_c("1"), 19, &v));
  assert_int_equal(KCR_EINVAL, kcr_quantity_scaled(kcr_str_c("1"), -10, &v));
  assert_int_equal(KCR_EINVAL, kcr_quantity_scaled(kcr_str_c("1"), 0, NULL));
  assert_int_equal(KCR_EINVAL, kcr_quantity_scaled(kcr_str_c(NULL), 0, &v));
  memset(big, '0', sizeof(big));
  big[sizeof(big) - 1] = '1';
  assert_int_equal(KCR_EINVAL, kcr_quantity_scaled((struct kcr_str){big, 300}, 0, &v));
  assert_int_equal(KCR_OK, kcr_quantity_scaled((struct kcr_str){big + 44, 256}, 0, &v));
  assert_int_equal(1, v);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(quantities_read_as_go_reads_them),
      cmocka_unit_test(only_the_given_bytes_are_read),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
