/* Resource quantities: kcr_quantity_scaled on any text (not NUL-terminated:
 * exactly the input's bytes, in a buffer of that size).
 * Checked: a text read at one scale reads at every other one or fails only
 * with KCR_ERANGE, never as malformed; where nano-, milli- and whole units
 * all fit, each is the one below divided by 10^6 or 10^3 with its
 * magnitude rounded up. */
#include "fuzz.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
  fuzz_quiet();
  return 0;
}

/* x / d, its magnitude rounded up. */
static int64_t up(int64_t x, int64_t d)
{
  int64_t q = x / d;
  return x % d ? (x > 0 ? q + 1 : q - 1) : q;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  char *s = malloc(size ? size : 1);
  int64_t v[3];
  kcr_err rc[3];
  const int scale[] = {-9, KCR_QUANTITY_MILLI, KCR_QUANTITY_UNITS};

  FUZZ_CHECK(s);
  if(size)
    memcpy(s, data, size);
  for(int k = 0; k < 3; k++) {
    rc[k] = kcr_quantity_scaled((struct kcr_str){s, size}, scale[k], &v[k]);
    FUZZ_CHECK(rc[k] == KCR_OK || rc[k] == KCR_EINVAL || rc[k] == KCR_ERANGE);
    FUZZ_CHECK(!rc[k] || v[k] == 0);
  }
  for(int k = 1; k < 3; k++)
    FUZZ_CHECK((rc[k] == KCR_EINVAL) == (rc[0] == KCR_EINVAL));
  if(!rc[0] && !rc[1])
    FUZZ_CHECK(v[1] == up(v[0], 1000000));
  if(!rc[1] && !rc[2])
    FUZZ_CHECK(v[2] == up(v[1], 1000));
  if(!rc[0]) /* fits in nano-units: in the larger ones too */
    FUZZ_CHECK(!rc[1] && !rc[2]);
  free(s);
  return 0;
}
