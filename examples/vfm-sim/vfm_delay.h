/* vfm_delay.h - vfm-sim's delay arithmetic, as pure functions so that the
 * unit tests (tests/unit/test_ebdman_vfmsim.c) can drive them with hostile
 * annotations and clock readings.
 *
 * The delay comes from an annotation any EBD author writes (ebdman copies
 * the vfm-sim.ebdman.example.com/ annotations from the EBD to its VFM), so
 * it is capped at VFM_SIM_MAX_DELAY_MS, and the time left to wait is
 * computed without any addition that could wrap: it is never more than the
 * delay itself. A huge value such as "10000000000000000s" is refused
 * (reported as Failed) instead of becoming a requeue_after_ms above
 * INT64_MAX. */
#ifndef VFM_DELAY_H
#define VFM_DELAY_H

#include <stdint.h>

#include "kcr/err.h"
#include "kcr/time.h"

/* The longest delay vfm-sim accepts, from --delay or the annotation. */
#define VFM_SIM_MAX_DELAY_MS (24ull * 3600 * 1000)
#define VFM_SIM_MAX_DELAY    "24h"

/* Parses a delay ("500ms", "2s", ...) into *ms. KCR_EPARSE when malformed,
 * negative or above VFM_SIM_MAX_DELAY_MS (then *ms is unchanged). */
static inline kcr_err vfm_sim_delay_parse(const char *s, uint64_t *ms)
{
  uint64_t v;
  if(!s || kcr_duration_parse(s, &v) || v > VFM_SIM_MAX_DELAY_MS)
    return KCR_EPARSE;
  *ms = v;
  return KCR_OK;
}

/* Milliseconds still to wait, at monotonic time now_ms, for a generation
 * that started progressing at at_ms and becomes ready after delay_ms; 0 when
 * it is due. Never more than delay_ms, whatever the readings (a start in
 * the future counts as a start now). */
static inline uint64_t vfm_sim_wait_ms(uint64_t at_ms, uint64_t delay_ms, uint64_t now_ms)
{
  uint64_t elapsed = now_ms > at_ms ? now_ms - at_ms : 0;
  return elapsed >= delay_ms ? 0 : delay_ms - elapsed;
}

#endif
