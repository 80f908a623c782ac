/* DESIGN: RFC 3339 formatting and parsing without gmtime/timegm (not
 * thread-safe / not standard): civil-from-days and days-from-civil
 * (H. Hinnant's algorithms) convert between epoch days and dates.
 *
 * Parsers follow Go, since the other side of every time and duration here
 * is Go: kcr_time_parse accepts exactly what time.Parse(time.RFC3339, s)
 * accepts (metav1.Time), kcr_duration_parse what time.ParseDuration does,
 * with its integer arithmetic and overflow rules (no double accumulates a
 * value, so nothing is converted out of range), plus a bare number as
 * seconds. */
#include <ctype.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "kcr/time.h"

static int64_t days_from_civil(int64_t y, unsigned m, unsigned d)
{
  y -= m <= 2;
  int64_t era = (y >= 0 ? y : y - 399) / 400;
  unsigned yoe = (unsigned)(y - era * 400);
  unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + (int64_t)doe - 719468;
}

static void civil_from_days(int64_t z, int64_t *y, unsigned *m, unsigned *d)
{
  z += 719468;
  int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  unsigned doe = (unsigned)(z - era * 146097);
  unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  unsigned mp = (5 * doy + 2) / 153;
  *d = doy - (153 * mp + 2) / 5 + 1;
  *m = mp < 10 ? mp + 3 : mp - 9;
  *y = (int64_t)yoe + era * 400 + (*m <= 2);
}

static void split(time_t t, int64_t *y, unsigned *mo, unsigned *d, unsigned *h,
                  unsigned *mi, unsigned *s)
{
  int64_t days = (int64_t)t / 86400, rem = (int64_t)t % 86400;
  if(rem < 0) {
    rem += 86400;
    days--;
  }
  civil_from_days(days, y, mo, d);
  *h = (unsigned)(rem / 3600);
  *mi = (unsigned)(rem / 60 % 60);
  *s = (unsigned)(rem % 60);
}

/* Writes v (< 10^n) as n decimal digits at p; returns p + n. */
static char *put_digits(char *p, unsigned long v, int n)
{
  for(int i = n - 1; i >= 0; i--, v /= 10)
    p[i] = (char)('0' + v % 10);
  return p + n;
}

/* "YYYY-MM-DDTHH:MM:SS" at out (19 bytes, no terminator), as
 * "%04d-%02u-%02uT%02u:%02u:%02u" prints it, by hand: snprintf cost ten
 * times as much, on every condition and Event written. False for a year
 * outside 0..9999 (nothing written). */
static bool put_civil(time_t t, char out[19])
{
  int64_t y;
  unsigned mo, d, h, mi, s;
  char *p = out;

  split(t, &y, &mo, &d, &h, &mi, &s);
  if(y < 0 || y > 9999)
    return false;
  p = put_digits(p, (unsigned long)y, 4);
  *p++ = '-';
  p = put_digits(p, mo, 2);
  *p++ = '-';
  p = put_digits(p, d, 2);
  *p++ = 'T';
  p = put_digits(p, h, 2);
  *p++ = ':';
  p = put_digits(p, mi, 2);
  *p++ = ':';
  put_digits(p, s, 2);
  return true;
}

void kcr_time_format(time_t t, char out[KCR_RFC3339_LEN])
{
  int64_t y;
  unsigned mo, d, h, mi, s;
  char tmp[80];

  if(put_civil(t, out)) {
    out[19] = 'Z';
    out[KCR_RFC3339_LEN - 1] = '\0';
    return;
  }
  split(t, &y, &mo, &d, &h, &mi, &s);
  snprintf(tmp, sizeof(tmp), "%04d-%02u-%02uT%02u:%02u:%02uZ", (int)(y % 10000), mo, d, h,
           mi, s);
  memcpy(out, tmp, KCR_RFC3339_LEN - 1);
  out[KCR_RFC3339_LEN - 1] = '\0';
}

void kcr_time_format_micro(const struct timespec *t, char out[KCR_RFC3339_MICRO_LEN])
{
  unsigned long us = (unsigned long)(t->tv_nsec / 1000) % 1000000UL;
  int64_t y;
  unsigned mo, d, h, mi, s;
  char tmp[96];

  if(put_civil(t->tv_sec, out)) {
    out[19] = '.';
    put_digits(out + 20, us, 6);
    out[26] = 'Z';
    out[KCR_RFC3339_MICRO_LEN - 1] = '\0';
    return;
  }
  split(t->tv_sec, &y, &mo, &d, &h, &mi, &s);
  snprintf(tmp, sizeof(tmp), "%04d-%02u-%02uT%02u:%02u:%02u.%06luZ", (int)(y % 10000), mo,
           d, h, mi, s, us);
  memcpy(out, tmp, KCR_RFC3339_MICRO_LEN - 1);
  out[KCR_RFC3339_MICRO_LEN - 1] = '\0';
}

/* Reads exactly n digits. */
static int digits(const char **p, int n, unsigned *out)
{
  unsigned v = 0;
  for(int i = 0; i < n; i++) {
    if(!isdigit((unsigned char)(*p)[i]))
      return -1;
    v = v * 10 + (unsigned)((*p)[i] - '0');
  }
  *p += n;
  *out = v;
  return 0;
}

/* Go's time.Parse(time.RFC3339, s) - what metav1.Time's UnmarshalJSON runs -
 * is its fast path (format_rfc3339.go parseRFC3339) or, when that refuses,
 * the general layout parser on "2006-01-02T15:04:05Z07:00", which accepts
 * more. The union, which is what the general parser accepts:
 *   YYYY-MM-DD 'T' H[H]:MM:SS [('.'|',') digit+] ('Z' | ('+'|'-') HH:MM)
 * with 'T' and 'Z' upper case only (no space, no 't'/'z'), a one- or
 * two-digit hour 0..23 ("15" is stdHour: getnum(value, false)), month 1..12,
 * day within the month, minute and second 0..59 (no leap second), and a
 * zone offset of up to 24 hours and 60 minutes ("some people do write
 * offsets of 24 hours or 60 minutes"). The fraction is dropped. */
kcr_err kcr_time_parse(const char *s, time_t *out)
{
  unsigned y, mo, d, h, mi, sec, oh = 0, om = 0;
  int sign = 0;
  const char *p = s;
  static const unsigned mdays[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};

  if(!s || digits(&p, 4, &y) || *p++ != '-' || digits(&p, 2, &mo) || *p++ != '-' ||
     digits(&p, 2, &d) || *p++ != 'T')
    return KCR_EPARSE;
  if(digits(&p, isdigit((unsigned char)p[0]) && isdigit((unsigned char)p[1]) ? 2 : 1,
            &h) ||
     *p++ != ':' || digits(&p, 2, &mi) || *p++ != ':' || digits(&p, 2, &sec))
    return KCR_EPARSE;
  if((*p == '.' || *p == ',') && isdigit((unsigned char)p[1])) {
    p++;
    while(isdigit((unsigned char)*p))
      p++;
  }
  if(*p == 'Z') {
    p++;
  } else if(*p == '+' || *p == '-') {
    sign = *p++ == '+' ? 1 : -1;
    if(digits(&p, 2, &oh) || *p++ != ':' || digits(&p, 2, &om) || oh > 24 || om > 60)
      return KCR_EPARSE;
  } else {
    return KCR_EPARSE;
  }
  if(*p || mo < 1 || mo > 12 || d < 1 || d > mdays[mo - 1] || h > 23 || mi > 59 ||
     sec > 59)
    return KCR_EPARSE;
  if(mo == 2 && d == 29 && !(y % 4 == 0 && (y % 100 != 0 || y % 400 == 0)))
    return KCR_EPARSE;
  int64_t t = days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60 + sec;
  t -= sign * (int64_t)(oh * 3600 + om * 60);
  *out = (time_t)t;
  return KCR_OK;
}

time_t kcr_time_now(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return ts.tv_sec;
}

uint64_t kcr_time_mono_ns(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

struct timespec kcr_time_mono_after(uint64_t ms)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  ts.tv_sec += (time_t)(ms / 1000);
  ts.tv_nsec += (long)(ms % 1000) * 1000000L;
  if(ts.tv_nsec >= 1000000000L) {
    ts.tv_sec++;
    ts.tv_nsec -= 1000000000L;
  }
  return ts;
}

uint64_t kcr_time_mono_ms(void) { return kcr_time_mono_ns() / 1000000ull; }

uint64_t kcr_time_deadline_ms(uint64_t timeout_ms)
{
  uint64_t now = kcr_time_mono_ms();
  return timeout_ms >= KCR_FOREVER - now ? KCR_FOREVER : now + timeout_ms;
}

/* Go's leadingInt: [0-9]* into *x; -1 on overflow past 2^63. */
static int leading_int(const char **p, uint64_t *x)
{
  const uint64_t lim = (uint64_t)1 << 63;
  *x = 0;
  for(; **p >= '0' && **p <= '9'; (*p)++) {
    if(*x > lim / 10)
      return -1;
    *x = *x * 10 + (uint64_t)(**p - '0');
    if(*x > lim)
      return -1;
  }
  return 0;
}

/* Go's leadingFraction: [0-9]* into *x / *scale, dropping precision that
 * does not fit instead of failing. */
static void leading_fraction(const char **p, uint64_t *x, double *scale)
{
  bool overflow = false;
  *x = 0;
  *scale = 1;
  for(; **p >= '0' && **p <= '9'; (*p)++) {
    uint64_t y;
    if(overflow)
      continue;
    if(*x > (((uint64_t)1 << 63) - 1) / 10) {
      overflow = true;
      continue;
    }
    y = *x * 10 + (uint64_t)(**p - '0');
    if(y > (uint64_t)1 << 63) {
      overflow = true;
      continue;
    }
    *x = y;
    *scale *= 10;
  }
}

/* Go's unitMap, in nanoseconds. Longest first where one is a prefix. */
static const struct {
  const char *name;
  uint64_t ns;
} units[] = {{"ns", 1ull},           {"us", 1000ull},
             {"\xc2\xb5s", 1000ull}, /* U+00B5 micro sign */
             {"\xce\xbcs", 1000ull}, /* U+03BC Greek mu */
             {"ms", 1000000ull},     {"s", 1000000000ull},
             {"m", 60000000000ull},  {"h", 3600000000000ull}};

/* Go's ParseDuration, in nanoseconds, for s without its sign. Go reads the
 * unit as everything up to the next digit or '.'; a missing unit is an
 * error there, and the one kcr extension (a bare number is seconds) is
 * signalled with *bare. */
static kcr_err parse_ns(const char *s, uint64_t *out, bool *bare)
{
  const uint64_t lim = (uint64_t)1 << 63;
  uint64_t d = 0;
  const char *p = s;

  *bare = false;
  if(!strcmp(s, "0")) {
    *out = 0;
    return KCR_OK;
  }
  if(!*s)
    return KCR_EPARSE;
  while(*p) {
    uint64_t v, f = 0, unit = 0;
    double scale = 1;
    const char *start = p, *u;
    bool pre, post = false;
    size_t ulen = 0;

    if(!(*p == '.' || (*p >= '0' && *p <= '9')))
      return KCR_EPARSE;
    if(leading_int(&p, &v))
      return KCR_EPARSE;
    pre = p != start;
    if(*p == '.') {
      const char *fs = ++p;
      leading_fraction(&p, &f, &scale);
      post = p != fs;
    }
    if(!pre && !post)
      return KCR_EPARSE;
    for(u = p; *u && *u != '.' && !(*u >= '0' && *u <= '9'); u++)
      ulen++;
    if(ulen == 0) {
      if(start != s || *p) /* "1m30": Go's "missing unit" */
        return KCR_EPARSE;
      *bare = true;
      unit = 1000000000ull;
    }
    for(size_t i = 0; !unit && i < sizeof(units) / sizeof(units[0]); i++)
      if(strlen(units[i].name) == ulen && !memcmp(p, units[i].name, ulen))
        unit = units[i].ns;
    if(!unit)
      return KCR_EPARSE; /* Go: unknown unit */
    p += ulen;
    if(v > lim / unit)
      return KCR_EPARSE;
    v *= unit;
    if(f > 0) {
      /* As Go: float64 keeps fractions of hours nanosecond-accurate, and
       * the product is at most 3.6e12, so the conversion is defined. */
      v += (uint64_t)((double)f * ((double)unit / scale));
      if(v > lim)
        return KCR_EPARSE;
    }
    d += v;
    if(d > lim)
      return KCR_EPARSE;
  }
  *out = d;
  return KCR_OK;
}

kcr_err kcr_duration_parse(const char *s, uint64_t *ms)
{
  bool neg = false, bare;
  uint64_t ns;

  if(!s)
    return KCR_EPARSE;
  if(*s == '-' || *s == '+')
    neg = *s++ == '-';
  if(parse_ns(s, &ns, &bare))
    return KCR_EPARSE;
  if(ns > (uint64_t)INT64_MAX && !neg) /* Go: at most 2^63-1 ns */
    return KCR_EPARSE;
  if(neg && ns)
    return KCR_EPARSE;                        /* negative: no kcr delay or timeout is */
  *ms = ns / 1000000u + (ns % 1000000u != 0); /* rounded up */
  return KCR_OK;
}
