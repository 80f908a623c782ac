/* DESIGN: RFC 3339 formatting and parsing without gmtime/timegm (not
 * thread-safe / not standard): civil-from-days and days-from-civil
 * (H. Hinnant's algorithms) convert between epoch days and dates. */
#include <ctype.h>
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

void kcr_time_format(time_t t, char out[KCR_RFC3339_LEN])
{
  int64_t y;
  unsigned mo, d, h, mi, s;
  char tmp[80];
  split(t, &y, &mo, &d, &h, &mi, &s);
  /* Fields are in range, so the text is exactly KCR_RFC3339_LEN - 1 bytes. */
  snprintf(tmp, sizeof(tmp), "%04d-%02u-%02uT%02u:%02u:%02uZ", (int)(y % 10000), mo, d, h,
           mi, s);
  memcpy(out, tmp, KCR_RFC3339_LEN - 1);
  out[KCR_RFC3339_LEN - 1] = '\0';
}

void kcr_time_format_micro(const struct timespec *t, char out[KCR_RFC3339_MICRO_LEN])
{
  int64_t y;
  unsigned mo, d, h, mi, s;
  char tmp[96];
  split(t->tv_sec, &y, &mo, &d, &h, &mi, &s);
  snprintf(tmp, sizeof(tmp), "%04d-%02u-%02uT%02u:%02u:%02u.%06luZ", (int)(y % 10000), mo,
           d, h, mi, s, (unsigned long)(t->tv_nsec / 1000) % 1000000UL);
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

kcr_err kcr_time_parse(const char *s, time_t *out)
{
  unsigned y, mo, d, h, mi, sec, oh = 0, om = 0;
  int sign = 0;
  const char *p = s;
  static const unsigned mdays[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};

  if(!s || digits(&p, 4, &y) || *p++ != '-' || digits(&p, 2, &mo) || *p++ != '-' ||
     digits(&p, 2, &d) || (*p != 'T' && *p != 't' && *p != ' '))
    return KCR_EPARSE;
  p++;
  if(digits(&p, 2, &h) || *p++ != ':' || digits(&p, 2, &mi) || *p++ != ':' ||
     digits(&p, 2, &sec))
    return KCR_EPARSE;
  if(*p == '.') {
    p++;
    if(!isdigit((unsigned char)*p))
      return KCR_EPARSE;
    while(isdigit((unsigned char)*p))
      p++;
  }
  if(*p == 'Z' || *p == 'z') {
    p++;
  } else if(*p == '+' || *p == '-') {
    sign = *p++ == '+' ? 1 : -1;
    if(digits(&p, 2, &oh) || *p++ != ':' || digits(&p, 2, &om) || oh > 23 || om > 59)
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

kcr_err kcr_duration_parse(const char *s, uint64_t *ms)
{
  static const struct {
    const char *unit;
    double ms;
  } units[] = {{"ms", 1}, {"s", 1000}, {"m", 60000}, {"h", 3600000}};
  double total = 0;
  const char *p = s;

  if(!s || !*s)
    return KCR_EPARSE;
  while(*p) {
    double v = 0, scale = 1;
    int nd = 0;
    size_t i;
    while(isdigit((unsigned char)*p)) {
      v = v * 10 + (*p++ - '0');
      nd++;
    }
    if(*p == '.') {
      p++;
      while(isdigit((unsigned char)*p)) {
        scale /= 10;
        v += (*p++ - '0') * scale;
        nd++;
      }
    }
    if(!nd)
      return KCR_EPARSE;
    if(!*p && p != s && total == 0 && !isalpha((unsigned char)p[-1])) {
      total = v * 1000; /* bare number: seconds */
      break;
    }
    for(i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
      size_t n = strlen(units[i].unit);
      if(!strncmp(p, units[i].unit, n) && !isalpha((unsigned char)p[n]))
        break;
    }
    if(i == sizeof(units) / sizeof(units[0]))
      return KCR_EPARSE;
    total += v * units[i].ms;
    p += strlen(units[i].unit);
  }
  *ms = (uint64_t)(total + 0.5);
  return KCR_OK;
}
