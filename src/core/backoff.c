/* DESIGN: exponential backoff with jitter and a reset window; pure apart
 * from reading the monotonic clock. */
#include <stdlib.h>

#include "kcr/backoff.h"
#include "kcr/time.h"

/* d as ms, saturating at cap: a double at or past the cap (a huge factor or
 * jitter, infinity, NaN) would be undefined behaviour to convert. */
static uint64_t at_most(double d, uint64_t cap)
{
  return d < (double)cap ? (uint64_t)d : cap;
}

uint64_t kcr_backoff_next(struct kcr_backoff *b)
{
  uint64_t now = kcr_time_mono_ms(), base;
  double j;

  if(!b->seed)
    b->seed = (unsigned)(now ^ (uintptr_t)b);
  if(b->last_fail_ms && b->reset_after_ms && now - b->last_fail_ms > b->reset_after_ms)
    b->cur_ms = 0;
  base = b->cur_ms ? b->cur_ms : b->initial_ms;
  b->cur_ms = at_most((double)base * (b->factor > 1 ? b->factor : 2), b->max_ms);
  b->last_fail_ms = now;
  j = b->jitter > 0 ? b->jitter * ((double)rand_r(&b->seed) / ((double)RAND_MAX + 1)) : 0;
  return at_most((double)base * (1 + j), b->max_ms);
}

void kcr_backoff_reset(struct kcr_backoff *b)
{
  b->cur_ms = 0;
  b->last_fail_ms = 0;
}
