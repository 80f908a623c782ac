/* Waiting on conditions in tests, never sleeping as synchronisation: a
 * counter threads signal (tsig) and bounded polling of an atomic flag. */
#ifndef KCR_TWAIT_H
#define KCR_TWAIT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

/* Inits a mutex and a condvar that waits on the monotonic clock (as
 * kcr_time_mono_after deadlines need). Aborts the test if either fails. */
void tlock_init(pthread_mutex_t *mu, pthread_cond_t *cv);

/* A counter threads wait on (condvar on the monotonic clock). */
struct tsig {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int v;
};

void tsig_init(struct tsig *s);
void tsig_cleanup(struct tsig *s);
/* Adds d and wakes every waiter. Any thread. */
void tsig_add(struct tsig *s, int d);
int tsig_get(struct tsig *s);
/* Waits until the counter reaches at least v, or ms passed; true if it did. */
bool tsig_wait(struct tsig *s, int v, uint64_t ms);

/* Bounded polling of an atomic flag (1 ms steps); true once it is set. */
bool tflag_wait(atomic_bool *f, uint64_t ms);

#endif
