/* RFC 3339 times and Go durations: kcr_time_parse, kcr_duration_parse, and
 * the formatters on any time_t.
 * Input: the text to parse. Its first 8 bytes (when there are 8) are also
 * taken as a time_t to format. Checked: a parsed time within years
 * 0001..9999 formats back to a text that parses to the same time; a parsed
 * duration printed as milliseconds parses back to the same value. */
#include <inttypes.h>

#include "fuzz.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
  fuzz_quiet();
  return 0;
}

#define YEAR_9999_END INT64_C(253402300799) /* 9999-12-31T23:59:59Z */
#define YEAR_0001     INT64_C(-62135596800) /* 0001-01-01T00:00:00Z */

static void check_time_roundtrip(time_t t)
{
  char text[KCR_RFC3339_LEN];
  time_t back;

  kcr_time_format(t, text);
  FUZZ_CHECK(strlen(text) == KCR_RFC3339_LEN - 1);
  if((int64_t)t < YEAR_0001 || (int64_t)t > YEAR_9999_END)
    return;
  FUZZ_CHECK(kcr_time_parse(text, &back) == KCR_OK);
  FUZZ_CHECK(back == t);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  char *s = fuzz_str(data, size), ms_text[32];
  time_t t = 0;
  uint64_t ms = 0, back = 0;

  if(kcr_time_parse(s, &t) == KCR_OK)
    check_time_roundtrip(t);
  if(kcr_duration_parse(s, &ms) == KCR_OK && ms <= INT64_MAX / 1000000) {
    snprintf(ms_text, sizeof(ms_text), "%" PRIu64 "ms", ms);
    FUZZ_CHECK(kcr_duration_parse(ms_text, &back) == KCR_OK);
    FUZZ_CHECK(back == ms);
  }
  if(size >= 8) {
    int64_t raw;
    struct timespec ts;
    char micro[KCR_RFC3339_MICRO_LEN], sec[KCR_RFC3339_LEN];
    memcpy(&raw, data, sizeof(raw));
    ts.tv_sec = (time_t)raw;
    ts.tv_nsec = (long)(raw & 0x3fffffff) % 1000000000L;
    kcr_time_format(ts.tv_sec, sec);
    kcr_time_format_micro(&ts, micro);
    FUZZ_CHECK(strlen(micro) == KCR_RFC3339_MICRO_LEN - 1);
    check_time_roundtrip(ts.tv_sec);
  }
  free(s);
  return 0;
}
