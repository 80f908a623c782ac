/* Resource quantities as numbers (kcr/quantity.h).
 *
 * DESIGN. The text is read as a string of decimal digits D and a power:
 * value = D * 10^t (or D * 2^e * 10^t for a binary suffix), t counting the
 * fraction's digits, the decimal suffix and the wanted scale. Doubling and
 * shifting a decimal digit array keeps it exact whatever the number of
 * digits (a 256-byte quantity has at most 256 of them, and 2^60 adds 19),
 * so rounding up is decided on the exact digits that fall off - no
 * floating point, no overflow before the one check at the end. */
#include <stdbool.h>
#include <string.h>

#include "kcr/quantity.h"

#define QMAX   256                  /* bytes of text */
#define DIGITS (QMAX + 20 + 18 + 9) /* D, 2^60, and t >= 0 up to 27 */

static kcr_err fail(int64_t *out, kcr_err rc)
{
  if(out)
    *out = 0;
  return rc;
}

/* The power of a suffix s[0..n): base 10 or 2, its exponent; false when s
 * is no suffix ParseQuantity knows. */
static bool suffix(const char *s, size_t n, int *base, long *exp)
{
  static const struct {
    const char *s;
    int base, exp;
  } known[] = {{"", 10, 0},   {"n", 10, -9}, {"u", 10, -6}, {"m", 10, -3},
               {"k", 10, 3},  {"M", 10, 6},  {"G", 10, 9},  {"T", 10, 12},
               {"P", 10, 15}, {"E", 10, 18}, {"Ki", 2, 10}, {"Mi", 2, 20},
               {"Gi", 2, 30}, {"Ti", 2, 40}, {"Pi", 2, 50}, {"Ei", 2, 60}};
  size_t i = 1;
  bool neg = false;
  long e = 0;

  for(size_t k = 0; k < sizeof(known) / sizeof(known[0]); k++)
    if(strlen(known[k].s) == n && !memcmp(known[k].s, s, n)) {
      *base = known[k].base;
      *exp = known[k].exp;
      return true;
    }
  if(n < 2 || (s[0] != 'e' && s[0] != 'E'))
    return false;
  if(s[1] == '+' || s[1] == '-')
    neg = s[i++] == '-';
  if(i == n)
    return false;
  for(; i < n; i++) {
    if(s[i] < '0' || s[i] > '9')
      return false;
    if(e < 100000) /* far beyond any result that fits: ERANGE or 0 later */
      e = e * 10 + (s[i] - '0');
  }
  *base = 10;
  *exp = neg ? -e : e;
  return true;
}

kcr_err kcr_quantity_scaled(struct kcr_str q, int scale, int64_t *out)
{
  unsigned char d[DIGITS]; /* most significant first, values 0..9 */
  size_t nd = 0, i = 0, nfrac = 0;
  const char *s = q.s;
  bool neg = false;
  int base;
  long exp, t;

  if(!out || scale < -9 || scale > 18 || !s || !q.n || q.n > QMAX)
    return fail(out, KCR_EINVAL);
  if(s[0] == '+' || s[0] == '-')
    neg = s[i++] == '-';
  for(; i < q.n && s[i] >= '0' && s[i] <= '9'; i++)
    if(nd || s[i] != '0') /* no leading zeros */
      d[nd++] = (unsigned char)(s[i] - '0');
  if(i < q.n && s[i] == '.')
    for(i++; i < q.n && s[i] >= '0' && s[i] <= '9'; i++, nfrac++)
      if(nd || s[i] != '0')
        d[nd++] = (unsigned char)(s[i] - '0');
  if(!suffix(s + i, q.n - i, &base, &exp)) /* no digits: 0, as in Go */
    return fail(out, KCR_EINVAL);
  *out = 0;
  if(!nd)
    return KCR_OK; /* zero, with any sign and suffix */
  if(base == 2) {  /* D * 2^exp, exp 10 .. 60: double it in place */
    for(long k = 0; k < exp; k++) {
      int carry = 0;
      for(size_t j = nd; j-- > 0;) {
        int v = d[j] * 2 + carry;
        d[j] = (unsigned char)(v % 10);
        carry = v / 10;
      }
      if(carry) {
        memmove(d + 1, d, nd++);
        d[0] = (unsigned char)carry;
      }
    }
    exp = 0;
  }
  t = exp - (long)nfrac - scale; /* value in units = D * 10^t */
  bool up = false;
  if(t < 0) { /* digits that fall off: any non-zero one rounds up */
    size_t drop = (size_t)-t < nd ? (size_t)-t : nd;
    for(size_t j = nd - drop; j < nd && !up; j++)
      up = d[j] != 0;
    nd -= drop;
  } else if(nd + (size_t)t > 19) {
    return fail(out, KCR_ERANGE);
  }
  uint64_t v = 0;
  for(size_t j = 0; j < nd; j++) {
    if(v > (UINT64_MAX - d[j]) / 10)
      return fail(out, KCR_ERANGE);
    v = v * 10 + d[j];
  }
  for(long k = 0; t > 0 && k < t; k++)
    v *= 10;                                   /* nd + t <= 19: fits */
  if(v > INT64_MAX || (up && ++v > INT64_MAX)) /* (checked first: v++ could wrap) */
    return fail(out, KCR_ERANGE);
  *out = neg ? -(int64_t)v : (int64_t)v;
  return KCR_OK;
}
