/* kcr/backoff.h - exponential backoff with jitter, reset after a healthy
 * period (client-go's reflector: 800 ms -> 30 s, factor 2, jitter 1.0,
 * reset after 2 minutes without failures).
 * Thread safety: a backoff is used by one thread at a time. */
#ifndef KCR_BACKOFF_H
#define KCR_BACKOFF_H

#include <stdint.h>

#include "api.h"

#ifdef __cplusplus
extern "C" {
#endif

struct kcr_backoff {
  uint64_t initial_ms, max_ms, reset_after_ms;
  double factor, jitter; /* delay * (1 + jitter * rand[0,1)) */
  uint64_t cur_ms;       /* next base delay; 0 = initial */
  uint64_t last_fail_ms; /* monotonic time of the last next() */
  unsigned seed;
};

#define KCR_BACKOFF_REFLECTOR                                                            \
  {                                                                                      \
    800, 30000, 120000, 2.0, 1.0, 0, 0, 0                                                \
  }

/* The delay to wait now, in ms; grows the next one (by factor; 2 when
 * factor is not above 1). If the previous failure was longer than
 * reset_after_ms ago, starts again from initial_ms. Every delay is at most
 * max_ms, whatever the factor and jitter (huge, infinite or NaN ones
 * included). No errors. Thread safety: one thread at a time per b. */
KCR_API uint64_t kcr_backoff_next(struct kcr_backoff *b);
/* Forget past failures. */
KCR_API void kcr_backoff_reset(struct kcr_backoff *b);

#ifdef __cplusplus
}
#endif

#endif
