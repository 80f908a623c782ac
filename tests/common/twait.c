/* See twait.h. */
#include <stdlib.h>
#include <time.h>

#include "kcr/time.h"
#include "twait.h"

void tlock_init(pthread_mutex_t *mu, pthread_cond_t *cv)
{
  pthread_condattr_t ca;
  if(pthread_mutex_init(mu, NULL) || pthread_condattr_init(&ca))
    abort();
  if(pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) || pthread_cond_init(cv, &ca))
    abort();
  pthread_condattr_destroy(&ca);
}

void tsig_init(struct tsig *s)
{
  tlock_init(&s->mu, &s->cv);
  s->v = 0;
}

void tsig_cleanup(struct tsig *s)
{
  pthread_cond_destroy(&s->cv);
  pthread_mutex_destroy(&s->mu);
}

void tsig_add(struct tsig *s, int d)
{
  pthread_mutex_lock(&s->mu);
  s->v += d;
  pthread_cond_broadcast(&s->cv);
  pthread_mutex_unlock(&s->mu);
}

int tsig_get(struct tsig *s)
{
  pthread_mutex_lock(&s->mu);
  int v = s->v;
  pthread_mutex_unlock(&s->mu);
  return v;
}

bool tsig_wait(struct tsig *s, int v, uint64_t ms)
{
  struct timespec ts = kcr_time_mono_after(ms);
  bool ok;
  pthread_mutex_lock(&s->mu);
  while(s->v < v && pthread_cond_timedwait(&s->cv, &s->mu, &ts) == 0)
    ;
  ok = s->v >= v;
  pthread_mutex_unlock(&s->mu);
  return ok;
}

bool tflag_wait(atomic_bool *f, uint64_t ms)
{
  struct timespec step = {0, 1000000L};
  uint64_t until = kcr_time_mono_ms() + ms;
  while(!atomic_load(f) && kcr_time_mono_ms() < until)
    nanosleep(&step, NULL);
  return atomic_load(f);
}
