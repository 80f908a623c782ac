/* queue_bench - throughput of the work queue: adds, gets and dones per
 * second, single-threaded and with producers and consumers on threads.
 *
 *   queue_bench [adds]      (default 1000000 per scenario)
 *
 * Method. Every scenario pushes `adds` kcr_queue_add (add_after, add_with) calls
 * through a fresh queue (no metrics, then with a metrics registry) and times
 * until every key is processed: producers share the adds equally, each over
 * its own 65536 keys in rotation (so a key is rarely still queued when it
 * comes round again, and deduplication is measured, not avoided); consumers
 * loop get -> done -> free until KCR_ECANCELED, which the main thread
 * triggers with kcr_queue_shutdown() once the producers are done (consumers
 * drain the queue first). The clock runs from before the first thread
 * starts to after the last one is joined. ops/s counts adds + gets + dones;
 * items/s counts gets. Keys are formatted before the clock starts.
 * Each scenario runs three times; the best run is reported. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kcr/metrics.h"
#include "kcr/queue.h"
#include "kcr/time.h"

#define KEYS_PER_PRODUCER 65536
#define MAX_PRODUCERS     8
#define RUNS              3

struct scenario {
  const char *name;
  int producers, consumers; /* consumers == 0: one thread does everything */
  int64_t delay_ms;         /* > 0: add_after instead of add */
  bool metrics;
  int prios; /* > 1: add_with, priorities 0 .. prios-1 in rotation */
};

struct run {
  kcr_queue *q;
  const struct scenario *sc;
  long adds_per_producer;
  char **keys; /* MAX_PRODUCERS * KEYS_PER_PRODUCER */
  long gets[64];
};

struct arg {
  struct run *r;
  int id;
};

static void *producer(void *p)
{
  struct arg *a = p;
  struct run *r = a->r;
  char **keys = r->keys + (size_t)a->id * KEYS_PER_PRODUCER;

  for(long i = 0; i < r->adds_per_producer; i++) {
    const char *k = keys[i % KEYS_PER_PRODUCER];
    if(r->sc->delay_ms > 0)
      kcr_queue_add_after(r->q, k, r->sc->delay_ms);
    else if(r->sc->prios > 1)
      kcr_queue_add_with(
          r->q, k, &(struct kcr_queue_add_opts){.priority = (int)(i % r->sc->prios)});
    else
      kcr_queue_add(r->q, k);
  }
  return NULL;
}

static void *consumer(void *p)
{
  struct arg *a = p;
  char *k;
  long n = 0;

  while(kcr_queue_take(a->r->q, KCR_FOREVER, &k) == KCR_OK) {
    kcr_queue_done(a->r->q, k);
    free(k);
    n++;
  }
  a->r->gets[a->id] = n;
  return NULL;
}

/* One thread: add a batch, then get+done it, so the queue stays shallow. */
static long single_thread(struct run *r)
{
  const long batch = 1024;
  long gets = 0;
  char *k;

  for(long i = 0; i < r->adds_per_producer; i += batch) {
    for(long j = i; j < i + batch && j < r->adds_per_producer; j++)
      kcr_queue_add(r->q, r->keys[j % KEYS_PER_PRODUCER]);
    while(kcr_queue_take(r->q, 0, &k) == KCR_OK) {
      kcr_queue_done(r->q, k);
      free(k);
      gets++;
    }
  }
  return gets;
}

static double run_once(const struct scenario *sc, char **keys, long adds, long *gets)
{
  struct run r = {0};
  kcr_metrics *reg = NULL;
  pthread_t th[64];
  struct arg args[64];
  int np = sc->producers, nc = sc->consumers, n = 0;
  uint64_t t0, t1;

  if(sc->metrics && kcr_metrics_new(NULL, &reg, NULL)) {
    fprintf(stderr, "queue_bench: out of memory\n");
    exit(1);
  }
  if(kcr_queue_new(&(struct kcr_queue_opts){.name = "bench", .metrics = reg}, &r.q,
                   NULL)) {
    fprintf(stderr, "queue_bench: cannot make the queue\n");
    exit(1);
  }
  r.sc = sc;
  r.keys = keys;
  r.adds_per_producer = adds / np;
  t0 = kcr_time_mono_ns();
  if(nc == 0) {
    *gets = single_thread(&r);
  } else {
    for(int i = 0; i < nc; i++, n++) {
      args[n] = (struct arg){&r, i};
      pthread_create(&th[n], NULL, consumer, &args[n]);
    }
    for(int i = 0; i < np; i++, n++) {
      args[n] = (struct arg){&r, i};
      pthread_create(&th[n], NULL, producer, &args[n]);
    }
    for(int i = nc; i < n; i++)
      pthread_join(th[i], NULL);
    if(sc->delay_ms > 0) { /* shutdown drops parked keys: let them fire */
      uint64_t until = kcr_time_mono_ns() + (uint64_t)sc->delay_ms * 2000000ull;
      while(kcr_time_mono_ns() < until || kcr_queue_len(r.q))
        nanosleep(&(struct timespec){0, 100000}, NULL);
    }
    kcr_queue_shutdown(r.q);
    for(int i = 0; i < nc; i++)
      pthread_join(th[i], NULL);
    *gets = 0;
    for(int i = 0; i < nc; i++)
      *gets += r.gets[i];
  }
  t1 = kcr_time_mono_ns();
  kcr_queue_free(r.q);
  kcr_metrics_free(reg);
  return (double)(t1 - t0) / 1e9;
}

int main(int argc, char **argv)
{
  static const struct scenario scenarios[] = {
      {"1 thread: add, get, done in turn", 1, 0, 0, false},
      {"1 thread, with metrics", 1, 0, 0, true},
      {"1 producer + 1 consumer", 1, 1, 0, false},
      {"4 producers + 4 consumers", 4, 4, 0, false},
      {"4 producers + 4 consumers, with metrics", 4, 4, 0, true},
      {"8 producers + 8 consumers", 8, 8, 0, false},
      {"4 producers + 4 consumers, add_after 1 ms", 4, 4, 1, false},
      {"4 producers + 4 consumers, 3 priorities", 4, 4, 0, false, 3},
  };
  long adds = argc > 1 ? strtol(argv[1], NULL, 10) : 1000000;
  size_t nkeys = (size_t)MAX_PRODUCERS * KEYS_PER_PRODUCER;
  char **keys = malloc(nkeys * sizeof(*keys));

  if(adds <= 0 || !keys) {
    fprintf(stderr, "usage: queue_bench [adds > 0]\n");
    return 2;
  }
  for(size_t i = 0; i < nkeys; i++) {
    char buf[48];
    snprintf(buf, sizeof(buf), "namespace-%zu/object-%zu", i / KEYS_PER_PRODUCER,
             i % KEYS_PER_PRODUCER);
    keys[i] = strdup(buf);
  }
  printf("%-44s %9s %9s %8s %12s %12s\n", "scenario", "adds", "gets", "seconds", "ops/s",
         "items/s");
  for(size_t s = 0; s < sizeof(scenarios) / sizeof(scenarios[0]); s++) {
    const struct scenario *sc = &scenarios[s];
    double best = 0;
    long best_gets = 0, done_adds = adds / sc->producers * sc->producers;
    for(int i = 0; i < RUNS; i++) {
      long gets;
      double secs = run_once(sc, keys, adds, &gets);
      if(i == 0 || secs < best) {
        best = secs;
        best_gets = gets;
      }
    }
    printf("%-44s %9ld %9ld %8.3f %12.0f %12.0f\n", sc->name, done_adds, best_gets, best,
           (double)(done_adds + 2 * best_gets) / best, (double)best_gets / best);
  }
  for(size_t i = 0; i < nkeys; i++)
    free(keys[i]);
  free(keys);
  return 0;
}
