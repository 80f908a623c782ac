/* kcr/time.h - RFC 3339 time as Kubernetes writes it, and clocks.
 *
 * metav1.Time is second precision UTC: "2026-11-29T10:00:00Z".
 * metav1.MicroTime (events) is microseconds: "2026-11-29T10:00:00.123456Z".
 * Thread safety: all functions are pure or read clocks. */
#ifndef KCR_TIME_H
#define KCR_TIME_H

#include <stdint.h>
#include <time.h>

#include "api.h"
#include "err.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The one "no timeout" value of every kcr function that takes a timeout or a
 * delay in milliseconds (uint64_t): wait as long as it takes. */
#define KCR_FOREVER UINT64_MAX

#define KCR_RFC3339_LEN       21 /* "YYYY-MM-DDTHH:MM:SSZ" + NUL */
#define KCR_RFC3339_MICRO_LEN 28 /* "YYYY-MM-DDTHH:MM:SS.ffffffZ" + NUL */

/* Writes t (seconds since the epoch) as second-precision UTC into the
 * caller's buffer. */
KCR_API void kcr_time_format(time_t t, char out[KCR_RFC3339_LEN]);
/* Writes t with microseconds (MicroTime). */
KCR_API void kcr_time_format_micro(const struct timespec *t,
                                   char out[KCR_RFC3339_MICRO_LEN]);
/* Parses a date-time exactly as Go's time.Parse(time.RFC3339, s) does (what
 * metav1.Time's UnmarshalJSON runs): "2026-11-29T10:00:00Z", upper-case 'T'
 * and 'Z' only (no space, no 't'/'z'); an optional fraction after '.' or
 * ',' (dropped); "Z" or an offset "+hh:mm"/"-hh:mm" (Go takes up to +24:60).
 * Like Go it also takes a one-digit hour ("T9:00:00Z"). Month, day (leap
 * years included), hour 0..23, minute and second 0..59 are range-checked.
 * Returns KCR_OK, or KCR_EPARSE (s NULL or anything else); *out is set only
 * on KCR_OK. */
KCR_API kcr_err kcr_time_parse(const char *s, time_t *out);
/* Wall clock, seconds. */
KCR_API time_t kcr_time_now(void);
/* Monotonic clock in milliseconds / nanoseconds, for durations and deadlines. */
KCR_API uint64_t kcr_time_mono_ms(void);
KCR_API uint64_t kcr_time_mono_ns(void);
/* The CLOCK_MONOTONIC time `ms` from now, as a deadline for
 * pthread_cond_timedwait on a condvar set to CLOCK_MONOTONIC. */
KCR_API struct timespec kcr_time_mono_after(uint64_t ms);
/* The monotonic time (ms) timeout_ms from now, saturating: KCR_FOREVER and
 * anything that would overflow give KCR_FOREVER, a deadline never reached. */
KCR_API uint64_t kcr_time_deadline_ms(uint64_t timeout_ms);
/* Parses a duration as Go's time.ParseDuration does ("500ms", "2s",
 * "1m30s", "1.5h", "250us"; units ns, us, µs, μs, ms, s, m, h; an optional
 * '+'), with its integer arithmetic: at most 2^63-1 ns (about 292 years),
 * anything larger is refused, never wrapped or rounded. One extension: a
 * bare number ("10", "0.5") is seconds. The result is in milliseconds,
 * ROUNDED UP, so a delay or timeout is never shorter than asked and a
 * nonzero duration never becomes 0 ("1ns" -> 1, "1.5ms" -> 2).
 * Returns KCR_OK, or KCR_EPARSE (s NULL, empty, malformed, unknown unit,
 * too large, or negative: "-0s" is 0, "-1s" is refused); *ms is set only
 * on KCR_OK. */
KCR_API kcr_err kcr_duration_parse(const char *s, uint64_t *ms);

#ifdef __cplusplus
}
#endif

#endif
