/* The work queue: client-go's workqueue contract, one test per clause.
 * Timing assertions are one-sided where they can be: a key parked for N ms
 * must never come out before N ms; the upper bounds are generous, since
 * this runs on loaded 2-core CI machines (and under TSan). */
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* cmocka.h needs these first. */
/* clang-format off */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
/* clang-format on */

#include "kcr/metrics.h"
#include "kcr/queue.h"
#include "kcr/time.h"
#include "runtime/queue-int.h"

/* ---- helpers ---- */

static double now_ms(void) { return (double)kcr_time_mono_ns() / 1e6; }

static kcr_queue *new_queue(const struct kcr_queue_opts *o)
{
  kcr_queue *q = NULL;
  assert_int_equal(KCR_OK, kcr_queue_new(o, &q, NULL));
  return q;
}

static void sleep_ms(unsigned ms)
{
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  while(nanosleep(&ts, &ts))
    ;
}

/* Gets a key (waiting at most 5 s), checks it is `want`, and returns it. */
static char *take_expect(kcr_queue *q, const char *want)
{
  char *k = NULL;
  assert_int_equal(KCR_OK, kcr_queue_take(q, 5000, &k));
  assert_non_null(k);
  assert_string_equal(want, k);
  return k;
}

static void take_done(kcr_queue *q, const char *want)
{
  char *k = take_expect(q, want);
  assert_int_equal(KCR_OK, kcr_queue_done(q, k));
  free(k);
}

/* How long until the next key comes out, in ms; checks it is `want`. */
static double ms_until_take(kcr_queue *q, double t0, const char *want)
{
  char *k = take_expect(q, want);
  double dt = now_ms() - t0;
  kcr_queue_done(q, k);
  free(k);
  return dt;
}

static kcr_err add_prio(kcr_queue *q, const char *key, int prio)
{
  return kcr_queue_add_with(q, key, &(struct kcr_queue_add_opts){.priority = prio});
}

/* Takes the next key (waiting at most 5 s), checks it is `want` with
 * priority `prio`, and finishes it. */
static void take_done_prio(kcr_queue *q, const char *want, int prio)
{
  char *k = NULL;
  int p = -1;
  assert_int_equal(KCR_OK, kcr_queue_take_with_priority(q, 5000, &k, &p));
  assert_string_equal(want, k);
  assert_int_equal(prio, p);
  assert_int_equal(KCR_OK, kcr_queue_done(q, k));
  free(k);
}

static void assert_empty(kcr_queue *q)
{
  char *k = NULL;
  assert_int_equal(KCR_ETIMEDOUT, kcr_queue_take(q, 0, &k));
  assert_null(k);
}

/* ---- the basic queue ---- */

static void adding_a_queued_key_again_is_a_no_op(void **state)
{
  kcr_queue *q = new_queue(NULL);
  assert_int_equal(KCR_OK, kcr_queue_add(q, "ns/a"));
  assert_int_equal(KCR_OK, kcr_queue_add(q, "ns/a"));
  assert_int_equal(1, kcr_queue_len(q));
  take_done(q, "ns/a");
  assert_empty(q);
  kcr_queue_free(q);
}

static void keys_come_out_in_fifo_order(void **state)
{
  kcr_queue *q = new_queue(NULL);
  kcr_queue_add(q, "ns/c");
  kcr_queue_add(q, "ns/a");
  kcr_queue_add(q, "ns/b");
  kcr_queue_add(q, "ns/a"); /* keeps its place */
  take_done(q, "ns/c");
  take_done(q, "ns/a");
  take_done(q, "ns/b");
  assert_empty(q);
  kcr_queue_free(q);
}

static void a_key_added_while_processing_waits_for_done(void **state)
{
  kcr_queue *q = new_queue(NULL);
  char *k;

  kcr_queue_add(q, "ns/a");
  kcr_queue_add(q, "ns/b");
  k = take_expect(q, "ns/a");
  kcr_queue_add(q, "ns/a"); /* dirty: not handed to a second worker */
  assert_int_equal(1, kcr_queue_len(q));
  take_done(q, "ns/b");
  assert_empty(q); /* ns/a is still being processed */
  kcr_queue_add(q, "ns/a");
  assert_int_equal(KCR_OK, kcr_queue_done(q, k));
  free(k);
  assert_int_equal(1, kcr_queue_len(q)); /* re-queued once, at the back */
  take_done(q, "ns/a");
  assert_empty(q);
  kcr_queue_free(q);
}

static void done_requeues_at_the_back(void **state)
{
  kcr_queue *q = new_queue(NULL);
  char *k;

  kcr_queue_add(q, "ns/a");
  k = take_expect(q, "ns/a");
  kcr_queue_add(q, "ns/a");
  kcr_queue_add(q, "ns/b");
  kcr_queue_done(q, k);
  free(k);
  take_done(q, "ns/b");
  take_done(q, "ns/a");
  kcr_queue_free(q);
}

static void done_of_a_key_not_processing_is_refused(void **state)
{
  kcr_queue *q = new_queue(NULL);
  assert_int_equal(KCR_EINVAL, kcr_queue_done(q, "ns/never"));
  kcr_queue_add(q, "ns/a");
  assert_int_equal(KCR_EINVAL, kcr_queue_done(q, "ns/a")); /* queued, not taken */
  assert_int_equal(1, kcr_queue_len(q));
  take_done(q, "ns/a");
  assert_int_equal(KCR_EINVAL, kcr_queue_done(q, "ns/a")); /* twice */
  assert_empty(q);
  kcr_queue_free(q);
}

static void take_moves_an_owned_copy_out(void **state)
{
  kcr_queue *q = new_queue(NULL);
  char key[] = "ns/a", *k = (char *)"sentinel";

  assert_int_equal(KCR_EINVAL, kcr_queue_add(q, NULL));
  assert_int_equal(KCR_EINVAL, kcr_queue_take(q, KCR_FOREVER, NULL));
  assert_int_equal(KCR_EINVAL, kcr_queue_take(NULL, 0, &k));
  assert_null(k); /* a failed call leaves its out-parameter NULL */
  kcr_queue_add(q, key);
  key[3] = 'z'; /* the queue copied it */
  assert_int_equal(KCR_OK, kcr_queue_take(q, KCR_FOREVER, &k));
  assert_string_equal("ns/a", k);
  assert_ptr_not_equal(key, k);
  kcr_queue_done(q, k);
  free(k);
  kcr_queue_free(q);
}

static void len_counts_only_ready_keys(void **state)
{
  kcr_queue *q = new_queue(NULL);
  char *k;

  assert_int_equal(0, kcr_queue_len(q));
  kcr_queue_add(q, "ns/a");
  kcr_queue_add(q, "ns/b");
  kcr_queue_add_after(q, "ns/parked", 60000);
  assert_int_equal(2, kcr_queue_len(q));
  k = take_expect(q, "ns/a");
  assert_int_equal(1, kcr_queue_len(q)); /* processing is not queued */
  kcr_queue_done(q, k);
  free(k);
  kcr_queue_free(q); /* frees the parked key too */
}

static void take_gives_up_after_its_timeout(void **state)
{
  kcr_queue *q = new_queue(NULL);
  char *k = (char *)"sentinel";
  double t0 = now_ms();

  assert_int_equal(KCR_ETIMEDOUT, kcr_queue_take(q, 0, &k));
  assert_null(k);
  assert_int_equal(KCR_ETIMEDOUT, kcr_queue_take(q, 50, &k));
  assert_true(now_ms() - t0 >= 50);
  assert_null(k);
  kcr_queue_free(q);
}

/* ---- options ---- */

static void new_refuses_invalid_options_naming_them(void **state)
{
  static const struct {
    struct kcr_queue_opts o;
    const char *field;
  } bad[] = {
      {{.base_delay_ms = 100, .max_delay_ms = 10}, "max_delay_ms"},
      {{.base_delay_ms = 2000000}, "max_delay_ms"}, /* above the default cap */
      {{.qps = -1}, "qps"},
      {{.qps = 1.0 / 0.0}, "qps"},
      {{.qps = 10, .burst = -1}, "burst"},
  };
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  kcr_queue *q;

  for(size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    q = (kcr_queue *)1;
    assert_int_equal(KCR_EINVAL, kcr_queue_new(&bad[i].o, &q, &ei));
    assert_null(q);
    assert_non_null(strstr(ei.message, bad[i].field));
  }
  kcr_errinfo_cleanup(&ei);
  /* Equal base and cap, and a zero burst (one token), are fine. */
  q = new_queue(
      &(struct kcr_queue_opts){.base_delay_ms = 7, .max_delay_ms = 7, .qps = 1});
  kcr_queue_free(q);
}

/* ---- add_after ---- */

static void add_after_waits_for_the_deadline(void **state)
{
  kcr_queue *q = new_queue(NULL);
  double t0 = now_ms(), dt;

  assert_int_equal(KCR_OK, kcr_queue_add_after(q, "ns/a", 100));
  assert_int_equal(0, kcr_queue_len(q));
  assert_empty(q);
  dt = ms_until_take(q, t0, "ns/a");
  assert_true(dt >= 100);
  assert_true(dt < 2000);
  kcr_queue_free(q);
}

static void add_after_without_delay_adds_now(void **state)
{
  kcr_queue *q = new_queue(NULL);
  kcr_queue_add_after(q, "ns/a", 0);
  kcr_queue_add_after(q, "ns/b", 0);
  assert_int_equal(2, kcr_queue_len(q));
  take_done(q, "ns/a");
  take_done(q, "ns/b");
  kcr_queue_free(q);
}

static void parked_keys_come_out_in_deadline_order(void **state)
{
  kcr_queue *q = new_queue(NULL);
  kcr_queue_add_after(q, "ns/c", 90);
  kcr_queue_add_after(q, "ns/a", 30);
  kcr_queue_add_after(q, "ns/d", 120);
  kcr_queue_add_after(q, "ns/b", 60);
  take_done(q, "ns/a");
  take_done(q, "ns/b");
  take_done(q, "ns/c");
  take_done(q, "ns/d");
  assert_empty(q);
  kcr_queue_free(q);
}

/* Order, not elapsed time, shows which deadline was kept: a marker key
 * parked at 300 ms comes out after a deadline of 50 ms and before one of
 * 500 ms, however loaded the machine is (due keys are promoted in deadline
 * order). */
static void the_earliest_deadline_wins(void **state)
{
  kcr_queue *q = new_queue(NULL);
  char *k;

  kcr_queue_add_after(q, "ns/a", 500);
  kcr_queue_add_after(q, "ns/a", 50); /* sooner: replaces */
  kcr_queue_add_after(q, "ns/marker", 300);
  take_done(q, "ns/a");
  take_done(q, "ns/marker");
  /* The 500 ms deadline was merged, not kept as a second entry. */
  assert_int_equal(KCR_ETIMEDOUT, kcr_queue_take(q, 700, &k));

  kcr_queue_add_after(q, "ns/a", 10);
  kcr_queue_add_after(q, "ns/a", 500); /* later: ignored */
  kcr_queue_add_after(q, "ns/marker", 300);
  take_done(q, "ns/a");
  take_done(q, "ns/marker");
  assert_int_equal(KCR_ETIMEDOUT, kcr_queue_take(q, 700, &k));
  kcr_queue_free(q);
}

/* Issue 8, item 11: a delay too large for the clock used to wrap to "now"
 * (a requeue_after above INT64_MAX was cast negative), turning a "much
 * later" into a hot loop. Any delay parks the key. */
static void a_huge_delay_parks_the_key(void **state)
{
  kcr_queue *q = new_queue(NULL);
  char *k;
  assert_int_equal(KCR_OK, kcr_queue_add_after(q, "ns/a", KCR_FOREVER));
  assert_int_equal(KCR_OK, kcr_queue_add_after(q, "ns/b", (uint64_t)INT64_MAX + 1));
  assert_int_equal(KCR_OK, kcr_queue_add_after(q, "ns/c", UINT64_MAX / 1000 + 1));
  assert_int_equal(0, kcr_queue_len(q));
  assert_int_equal(KCR_ETIMEDOUT, kcr_queue_take(q, 100, &k));
  assert_null(k);
  kcr_queue_free(q);
}

static void a_due_key_is_added_as_by_add(void **state)
{
  kcr_queue *q = new_queue(NULL);
  char *k;

  kcr_queue_add(q, "ns/a");
  kcr_queue_add_after(q, "ns/a", 20);
  sleep_ms(40);
  assert_int_equal(1, kcr_queue_len(q)); /* already queued: no duplicate */
  k = take_expect(q, "ns/a");
  kcr_queue_add_after(q, "ns/a", 20);
  sleep_ms(40);
  assert_int_equal(0, kcr_queue_len(q)); /* processing: only marked dirty */
  kcr_queue_done(q, k);
  free(k);
  take_done(q, "ns/a");
  assert_empty(q);
  kcr_queue_free(q);
}

struct getter {
  kcr_queue *q;
  char *key;
  kcr_err rc;
  double at_ms;
};

static void *getter_main(void *arg)
{
  struct getter *g = arg;
  g->rc = kcr_queue_take(g->q, KCR_FOREVER, &g->key);
  g->at_ms = now_ms();
  return NULL;
}

static void a_blocked_getter_wakes_for_a_sooner_deadline(void **state)
{
  kcr_queue *q = new_queue(NULL);
  struct getter g = {q};
  pthread_t th;
  double t0;

  kcr_queue_add_after(q, "ns/late", 5000);
  assert_int_equal(0, pthread_create(&th, NULL, getter_main, &g));
  sleep_ms(30); /* the getter sleeps until the 5 s deadline... */
  t0 = now_ms();
  kcr_queue_add_after(q, "ns/soon", 30); /* ...and must re-arm for this one */
  pthread_join(th, NULL);
  assert_int_equal(KCR_OK, g.rc);
  assert_string_equal("ns/soon", g.key);
  assert_true(g.at_ms - t0 >= 30);
  assert_true(g.at_ms - t0 < 2000);
  kcr_queue_done(q, g.key);
  free(g.key);
  kcr_queue_free(q);
}

struct waiter {
  kcr_queue *q;
  uint64_t timeout_ms;
  char *key;
  kcr_err rc;
  atomic_int returned;
};

static void *waiter_main(void *arg)
{
  struct waiter *w = arg;
  w->rc = kcr_queue_take(w->q, w->timeout_ms, &w->key);
  atomic_store(&w->returned, 1);
  return NULL;
}

static void a_getter_that_gives_up_hands_the_timing_on(void **state)
{
  /* One sleeping getter times the earliest deadline (w1, first in). When it
   * gives up, the other must take over, or ns/a would never fire: the main
   * thread makes no queue call meanwhile. */
  kcr_queue *q = new_queue(NULL);
  struct waiter w1 = {q, 100}, w2 = {q, KCR_FOREVER};
  pthread_t t1, t2;

  kcr_queue_add_after(q, "ns/a", 300);
  assert_int_equal(0, pthread_create(&t1, NULL, waiter_main, &w1));
  sleep_ms(30);
  assert_int_equal(0, pthread_create(&t2, NULL, waiter_main, &w2));
  for(int i = 0; i < 3000 && !atomic_load(&w2.returned); i++)
    sleep_ms(1);
  kcr_queue_shutdown(q); /* unblocks w2 if it was left sleeping */
  pthread_join(t1, NULL);
  pthread_join(t2, NULL);
  assert_int_equal(KCR_ETIMEDOUT, w1.rc);
  assert_int_equal(KCR_OK, w2.rc);
  assert_string_equal("ns/a", w2.key);
  kcr_queue_done(q, w2.key);
  free(w2.key);
  kcr_queue_free(q);
}

/* ---- the rate limiter ---- */

static void rate_limited_delays_double_up_to_the_cap(void **state)
{
  kcr_queue *q = new_queue(&(struct kcr_queue_opts){.max_delay_ms = 40});
  static const double want[] = {5, 10, 20, 40, 40, 40, 40, 40};

  for(int i = 0; i < 8; i++) {
    double t0 = now_ms(), dt;
    assert_int_equal(i, kcr_queue_num_requeues(q, "ns/a"));
    assert_int_equal(KCR_OK, kcr_queue_add_rate_limited(q, "ns/a"));
    /* Uncapped, the 7th and 8th would be 320 and 640 ms: capped at 40 they
     * come out before a marker parked at 200 ms (order, not a time bound). */
    kcr_queue_add_after(q, "ns/marker", 200);
    dt = ms_until_take(q, t0, "ns/a");
    assert_true(dt >= want[i]);
    take_done(q, "ns/marker");
  }
  assert_int_equal(8, kcr_queue_num_requeues(q, "ns/a"));
  kcr_queue_free(q);
}

static void forget_resets_the_backoff(void **state)
{
  kcr_queue *q = new_queue(NULL); /* 5 ms .. 1000 s */
  double t0, dt;

  for(int i = 0; i < 8; i++) /* next delay would be 5 ms * 2^8 = 1.28 s */
    kcr_queue_add_rate_limited(q, "ns/a");
  assert_int_equal(8, kcr_queue_num_requeues(q, "ns/a"));
  take_done(q, "ns/a"); /* parked at 5 ms: earliest deadline wins */
  kcr_queue_forget(q, "ns/a");
  assert_int_equal(0, kcr_queue_num_requeues(q, "ns/a"));
  t0 = now_ms();
  kcr_queue_add_rate_limited(q, "ns/a");
  kcr_queue_add_after(q, "ns/marker", 640); /* not reset: a at 1.28 s */
  dt = ms_until_take(q, t0, "ns/a");
  assert_true(dt >= 5);
  take_done(q, "ns/marker");
  assert_int_equal(1, kcr_queue_num_requeues(q, "ns/a"));
  assert_int_equal(0, kcr_queue_num_requeues(q, "ns/other"));
  kcr_queue_free(q);
}

static void the_token_bucket_limits_overall_retries(void **state)
{
  /* 10 qps, burst 2: two retries pass at the per-key delay, the third pays
   * for a token: ~100 ms. */
  kcr_queue *q = new_queue(&(struct kcr_queue_opts){.qps = 10, .burst = 2});
  double t0 = now_ms(), dt;

  kcr_queue_add_rate_limited(q, "ns/a");
  kcr_queue_add_rate_limited(q, "ns/b");
  kcr_queue_add_rate_limited(q, "ns/c");
  take_done(q, "ns/a");
  take_done(q, "ns/b");
  dt = ms_until_take(q, t0, "ns/c");
  assert_true(dt >= 80); /* 100 ms minus what refilled meanwhile */
  assert_true(dt < 2000);
  kcr_queue_free(q);
}

/* A tiny qps makes the debt of one token longer than the clock's range (or
 * infinite): the key parks; converting that double to uint64_t was
 * undefined behaviour (UBSan float-cast-overflow in bucket_delay). */
static void a_tiny_qps_parks_instead_of_overflowing(void **state)
{
  const double tiny[] = {1e-12, 1e-300, 4.9e-324};
  char *k;

  for(size_t i = 0; i < sizeof(tiny) / sizeof(tiny[0]); i++) {
    kcr_queue *q = new_queue(&(struct kcr_queue_opts){.qps = tiny[i], .burst = 1});
    kcr_queue_add_rate_limited(q, "ns/a"); /* takes the one token */
    kcr_queue_add_rate_limited(q, "ns/b"); /* waits for the next one */
    take_done(q, "ns/a");
    assert_int_equal(KCR_ETIMEDOUT, kcr_queue_take(q, 50, &k));
    assert_null(k);
    kcr_queue_free(q);
  }
}

/* ---- priorities ---- */

static void higher_priorities_are_taken_first_fifo_within_each(void **state)
{
  kcr_queue *q = new_queue(NULL);
  assert_int_equal(KCR_OK, add_prio(q, "ns/a", 0));
  assert_int_equal(KCR_OK, add_prio(q, "ns/b", KCR_QUEUE_PRIORITY_LOW));
  assert_int_equal(KCR_OK, add_prio(q, "ns/c", KCR_QUEUE_PRIORITY_HIGH));
  assert_int_equal(KCR_OK, kcr_queue_add(q, "ns/d")); /* priority 0 */
  assert_int_equal(KCR_OK, add_prio(q, "ns/e", KCR_QUEUE_PRIORITY_HIGH));
  assert_int_equal(KCR_OK, add_prio(q, "ns/f", KCR_QUEUE_PRIORITY_LOW));
  assert_int_equal(6, kcr_queue_len(q));
  take_done_prio(q, "ns/c", 100);
  take_done_prio(q, "ns/e", 100);
  take_done_prio(q, "ns/a", 0);
  take_done_prio(q, "ns/d", 0);
  take_done_prio(q, "ns/b", -100);
  take_done_prio(q, "ns/f", -100);
  assert_empty(q);
  kcr_queue_free(q);
}

/* Levels are made and dropped as priorities come and go: many distinct
 * ones, added out of order, come out sorted, and the queue is reusable. */
static void any_int_is_a_priority(void **state)
{
  kcr_queue *q = new_queue(NULL);
  static const int prios[] = {3, INT_MIN, 7, -1, INT_MAX, 0, 5, 2, 6, -7, 4, 1};
  static const int sorted[] = {INT_MAX, 7, 6, 5, 4, 3, 2, 1, 0, -1, -7, INT_MIN};
  char key[32];

  for(int round = 0; round < 2; round++) {
    for(size_t i = 0; i < sizeof(prios) / sizeof(prios[0]); i++) {
      snprintf(key, sizeof(key), "ns/%d", prios[i]);
      assert_int_equal(KCR_OK, add_prio(q, key, prios[i]));
    }
    for(size_t i = 0; i < sizeof(sorted) / sizeof(sorted[0]); i++) {
      snprintf(key, sizeof(key), "ns/%d", sorted[i]);
      take_done_prio(q, key, sorted[i]);
    }
    assert_empty(q);
  }
  kcr_queue_free(q);
}

static void a_higher_priority_raises_a_queued_key_to_the_back_of_its_line(void **state)
{
  kcr_queue *q = new_queue(NULL);
  add_prio(q, "ns/a", 0);
  add_prio(q, "ns/b", 0);
  add_prio(q, "ns/c", 10);
  assert_int_equal(KCR_OK, add_prio(q, "ns/b", 10)); /* raised behind c */
  assert_int_equal(3, kcr_queue_len(q));             /* not queued twice */
  assert_int_equal(KCR_OK, add_prio(q, "ns/a", 5));
  take_done_prio(q, "ns/c", 10);
  take_done_prio(q, "ns/b", 10);
  take_done_prio(q, "ns/a", 5);
  assert_empty(q);
  kcr_queue_free(q);
}

static void a_lower_or_equal_priority_changes_nothing(void **state)
{
  kcr_queue *q = new_queue(NULL);
  add_prio(q, "ns/a", 10);
  add_prio(q, "ns/b", 10);
  add_prio(q, "ns/c", 0);
  assert_int_equal(KCR_OK, add_prio(q, "ns/a", 10));  /* keeps its place */
  assert_int_equal(KCR_OK, kcr_queue_add(q, "ns/a")); /* never lowered */
  assert_int_equal(KCR_OK, add_prio(q, "ns/b", KCR_QUEUE_PRIORITY_LOW));
  assert_int_equal(3, kcr_queue_len(q));
  take_done_prio(q, "ns/a", 10);
  take_done_prio(q, "ns/b", 10);
  take_done_prio(q, "ns/c", 0);
  assert_empty(q);
  kcr_queue_free(q);
}

/* The dirty rule with priorities: a key added while processing is not
 * handed out, and done() queues it with the highest priority it was
 * added with meanwhile. Once taken, that priority is forgotten. */
static void done_requeues_with_the_highest_priority_added_meanwhile(void **state)
{
  kcr_queue *q = new_queue(NULL);
  char *k = NULL;
  int p = -1;

  add_prio(q, "ns/a", 10);
  assert_int_equal(KCR_OK, kcr_queue_take_with_priority(q, 0, &k, &p));
  assert_string_equal("ns/a", k);
  assert_int_equal(10, p);
  add_prio(q, "ns/a", 0);
  add_prio(q, "ns/a", 20);
  add_prio(q, "ns/a", 5); /* not lowered while it waits for done */
  add_prio(q, "ns/b", 15);
  assert_int_equal(1, kcr_queue_len(q));
  take_done_prio(q, "ns/b", 15); /* a is processing: b, not a second a */
  assert_empty(q);
  add_prio(q, "ns/c", 15);
  assert_int_equal(KCR_OK, kcr_queue_done(q, k));
  free(k);
  take_done_prio(q, "ns/a", 20);
  take_done_prio(q, "ns/c", 15);
  kcr_queue_add(q, "ns/a"); /* taken: 20 is forgotten */
  add_prio(q, "ns/d", 1);
  take_done_prio(q, "ns/d", 1);
  take_done_prio(q, "ns/a", 0);
  assert_empty(q);
  kcr_queue_free(q);
}

static void add_with_zero_or_no_options_is_add(void **state)
{
  kcr_queue *q = new_queue(NULL);
  assert_int_equal(KCR_OK, kcr_queue_add_with(q, "ns/a", NULL));
  assert_int_equal(KCR_OK,
                   kcr_queue_add_with(q, "ns/b", &(struct kcr_queue_add_opts){0}));
  assert_int_equal(2, kcr_queue_len(q)); /* queued now, not parked */
  assert_int_equal(0, kcr_queue_num_requeues(q, "ns/a"));
  take_done_prio(q, "ns/a", 0);
  take_done_prio(q, "ns/b", 0);
  assert_int_equal(KCR_EINVAL, kcr_queue_add_with(q, NULL, NULL));
  assert_int_equal(KCR_EINVAL, kcr_queue_add_with(NULL, "ns/a", NULL));
  kcr_queue_free(q);
}

static void take_with_priority_refuses_null_arguments(void **state)
{
  kcr_queue *q = new_queue(NULL);
  char *k = (char *)"x";
  int p = 7;
  kcr_queue_add(q, "ns/a");
  assert_int_equal(KCR_EINVAL, kcr_queue_take_with_priority(q, 0, &k, NULL));
  assert_null(k);
  assert_int_equal(KCR_EINVAL, kcr_queue_take_with_priority(q, 0, NULL, &p));
  assert_int_equal(0, p);
  assert_int_equal(1, kcr_queue_len(q)); /* nothing was taken */
  kcr_queue_shutdown(q);
  take_done_prio(q, "ns/a", 0);
  assert_int_equal(KCR_ECANCELED, kcr_queue_take_with_priority(q, 0, &k, &p));
  assert_null(k);
  assert_int_equal(0, p);
  kcr_queue_free(q);
}

/* A parked key keeps its priority: when due it overtakes keys of lower
 * priority queued before. */
static void add_after_keeps_the_priority(void **state)
{
  kcr_queue *q = new_queue(NULL);
  assert_int_equal(KCR_OK, kcr_queue_add_with(q, "ns/a",
                                              &(struct kcr_queue_add_opts){
                                                  .priority = 10, .after_ms = 30}));
  assert_int_equal(0, kcr_queue_len(q)); /* parked */
  kcr_queue_add(q, "ns/b");
  kcr_queue_add(q, "ns/c");
  sleep_ms(60);
  assert_int_equal(3, kcr_queue_len(q));
  take_done_prio(q, "ns/a", 10);
  take_done_prio(q, "ns/b", 0);
  take_done_prio(q, "ns/c", 0);
  assert_empty(q);
  kcr_queue_free(q);
}

static void rate_limited_keys_keep_the_priority(void **state)
{
  kcr_queue *q = new_queue(NULL); /* first delay: 5 ms */
  assert_int_equal(KCR_OK, kcr_queue_add_with(q, "ns/a",
                                              &(struct kcr_queue_add_opts){
                                                  .priority = -5, .rate_limited = true}));
  assert_int_equal(KCR_OK, kcr_queue_add_with(q, "ns/b",
                                              &(struct kcr_queue_add_opts){
                                                  .priority = 10, .rate_limited = true}));
  kcr_queue_add(q, "ns/c");
  assert_int_equal(1, kcr_queue_num_requeues(q, "ns/a"));
  assert_int_equal(1, kcr_queue_num_requeues(q, "ns/b"));
  sleep_ms(40);
  take_done_prio(q, "ns/b", 10);
  take_done_prio(q, "ns/c", 0);
  take_done_prio(q, "ns/a", -5);
  assert_empty(q);
  kcr_queue_free(q);
}

/* controller-runtime's AddOpts: with both, the sooner delay; a key parked
 * twice keeps the earliest deadline and the highest priority. */
static void parking_keeps_the_earliest_deadline_and_highest_priority(void **state)
{
  kcr_queue *q = new_queue(NULL);
  char *k;

  /* rate limiter (5 ms) sooner than after_ms (60 s) */
  kcr_queue_add_with(
      q, "ns/a", &(struct kcr_queue_add_opts){.after_ms = 60000, .rate_limited = true});
  take_done_prio(q, "ns/a", 0);
  /* the later park has the higher priority, the earlier the deadline */
  kcr_queue_add_with(q, "ns/a",
                     &(struct kcr_queue_add_opts){.priority = 0, .after_ms = 20});
  kcr_queue_add_with(q, "ns/a",
                     &(struct kcr_queue_add_opts){.priority = 9, .after_ms = 5000});
  kcr_queue_add_with(q, "ns/b",
                     &(struct kcr_queue_add_opts){.priority = 9, .after_ms = 5000});
  kcr_queue_add_with(q, "ns/b",
                     &(struct kcr_queue_add_opts){.priority = 1, .after_ms = 20});
  kcr_queue_add(q, "ns/c");
  sleep_ms(60);
  take_done_prio(q, "ns/a", 9);
  take_done_prio(q, "ns/b", 9);
  take_done_prio(q, "ns/c", 0);
  /* merged, not parked twice */
  assert_int_equal(KCR_ETIMEDOUT, kcr_queue_take(q, 200, &k));
  kcr_queue_free(q);
}

/* A due key is added with its parked priority: that raises it when it is
 * queued already, and a lower one leaves it where it is. */
static void a_due_key_raises_a_queued_one(void **state)
{
  kcr_queue *q = new_queue(NULL);
  kcr_queue_add(q, "ns/b");
  kcr_queue_add(q, "ns/a");
  kcr_queue_add(q, "ns/c");
  add_prio(q, "ns/d", 3);
  kcr_queue_add_with(q, "ns/a",
                     &(struct kcr_queue_add_opts){.priority = 5, .after_ms = 10});
  kcr_queue_add_with(q, "ns/d",
                     &(struct kcr_queue_add_opts){.priority = -5, .after_ms = 10});
  sleep_ms(40);
  assert_int_equal(4, kcr_queue_len(q));
  take_done_prio(q, "ns/a", 5);
  take_done_prio(q, "ns/d", 3);
  take_done_prio(q, "ns/b", 0);
  take_done_prio(q, "ns/c", 0);
  assert_empty(q);
  kcr_queue_free(q);
}

/* Shutdown drops parked keys of every priority; what is queued still comes
 * out by priority. */
static void shutdown_drops_parked_keys_of_any_priority(void **state)
{
  kcr_queue *q = new_queue(NULL);
  char *k;
  kcr_queue_add_with(q, "ns/p",
                     &(struct kcr_queue_add_opts){.priority = 4, .after_ms = 60000});
  kcr_queue_add_with(q, "ns/q",
                     &(struct kcr_queue_add_opts){.priority = 8, .after_ms = 60000});
  add_prio(q, "ns/a", -1);
  add_prio(q, "ns/b", 4);
  kcr_queue_shutdown(q);
  assert_int_equal(KCR_ECANCELED, add_prio(q, "ns/c", 99));
  take_done_prio(q, "ns/b", 4);
  take_done_prio(q, "ns/a", -1);
  assert_int_equal(KCR_ECANCELED, kcr_queue_take(q, 0, &k));
  kcr_queue_free(q);
}

/* ---- shutdown ---- */

static void shutdown_wakes_blocked_getters(void **state)
{
  kcr_queue *q = new_queue(NULL);
  struct getter g[3] = {{q}, {q}, {q}};
  pthread_t th[3];

  kcr_queue_add_after(q, "ns/parked", 60000); /* one of them is the timer */
  for(int i = 0; i < 3; i++)
    assert_int_equal(0, pthread_create(&th[i], NULL, getter_main, &g[i]));
  sleep_ms(50);
  assert_false(kcr_queue_shutting_down(q));
  kcr_queue_shutdown(q);
  assert_true(kcr_queue_shutting_down(q));
  for(int i = 0; i < 3; i++) {
    pthread_join(th[i], NULL);
    assert_int_equal(KCR_ECANCELED, g[i].rc);
    assert_null(g[i].key);
  }
  kcr_queue_free(q);
}

static void take_drains_queued_keys_before_reporting_shutdown(void **state)
{
  kcr_queue *q = new_queue(NULL);
  char *k = NULL;

  kcr_queue_add(q, "ns/a");
  kcr_queue_add(q, "ns/b");
  kcr_queue_add_after(q, "ns/parked", 10); /* dropped by shutdown */
  kcr_queue_shutdown(q);
  assert_int_equal(KCR_ECANCELED, kcr_queue_add(q, "ns/c"));
  assert_int_equal(KCR_ECANCELED, kcr_queue_add_after(q, "ns/c", 1));
  assert_int_equal(KCR_ECANCELED, kcr_queue_add_rate_limited(q, "ns/c"));
  take_done(q, "ns/a");
  take_done(q, "ns/b");
  sleep_ms(30);
  assert_int_equal(KCR_ECANCELED, kcr_queue_take(q, KCR_FOREVER, &k));
  assert_null(k);
  assert_int_equal(KCR_ECANCELED, kcr_queue_take(q, KCR_FOREVER, &k)); /* and stays so */
  kcr_queue_shutdown(q);                                               /* idempotent */
  kcr_queue_free(q);
}

static void a_key_dirty_before_shutdown_is_still_processed(void **state)
{
  kcr_queue *q = new_queue(NULL);
  char *k, *k2 = NULL;

  kcr_queue_add(q, "ns/a");
  k = take_expect(q, "ns/a");
  kcr_queue_add(q, "ns/a"); /* dirty */
  kcr_queue_shutdown(q);
  kcr_queue_done(q, k);
  free(k);
  take_done(q, "ns/a");
  assert_int_equal(KCR_ECANCELED, kcr_queue_take(q, KCR_FOREVER, &k2));
  kcr_queue_free(q);
}

struct slow_worker {
  kcr_queue *q;
  atomic_int finished;
};

static void *slow_worker_main(void *arg)
{
  struct slow_worker *w = arg;
  char *k;
  while(kcr_queue_take(w->q, KCR_FOREVER, &k) == KCR_OK) {
    sleep_ms(100);
    atomic_fetch_add(&w->finished, 1);
    kcr_queue_done(w->q, k);
    free(k);
  }
  return NULL;
}

static void shutdown_drain_waits_for_in_flight_work(void **state)
{
  struct slow_worker w = {new_queue(NULL), 0};
  pthread_t th;

  kcr_queue_add(w.q, "ns/a");
  assert_int_equal(0, pthread_create(&th, NULL, slow_worker_main, &w));
  while(kcr_queue_len(w.q)) /* until the worker took it */
    sleep_ms(1);
  kcr_queue_shutdown_drain(w.q);
  assert_int_equal(1, atomic_load(&w.finished)); /* done() came first */
  pthread_join(th, NULL);
  kcr_queue_free(w.q);
}

struct drainer {
  kcr_queue *q;
  atomic_int returned;
};

static void *drainer_main(void *arg)
{
  struct drainer *d = arg;
  kcr_queue_shutdown_drain(d->q);
  atomic_store(&d->returned, 1);
  return NULL;
}

static void shutdown_stops_a_waiting_drain(void **state)
{
  struct drainer d = {new_queue(NULL), 0};
  pthread_t th;
  char *k;

  kcr_queue_add(d.q, "ns/stuck");
  k = take_expect(d.q, "ns/stuck");
  assert_int_equal(0, pthread_create(&th, NULL, drainer_main, &d));
  sleep_ms(50);
  assert_int_equal(0, atomic_load(&d.returned)); /* ns/stuck is in flight */
  kcr_queue_shutdown(d.q);
  pthread_join(th, NULL);
  assert_int_equal(1, atomic_load(&d.returned));
  kcr_queue_done(d.q, k);
  free(k);
  kcr_queue_free(d.q);
}

/* ---- metrics ---- */

static const char *const NAME_Q[] = {"q", NULL};
static const char *const LABELS[] = {"name", NULL};

static double counter(kcr_metrics *reg, const char *name)
{
  kcr_metric *m = NULL;
  assert_int_equal(
      KCR_OK,
      kcr_metric_counter(
          reg, &(struct kcr_metric_opts){.name = name, .label_names = LABELS}, &m, NULL));
  return kcr_metric_value(m, NAME_Q);
}

static double gauge(kcr_metrics *reg, const char *name)
{
  kcr_metric *m = NULL;
  assert_int_equal(
      KCR_OK,
      kcr_metric_gauge(
          reg, &(struct kcr_metric_opts){.name = name, .label_names = LABELS}, &m, NULL));
  return kcr_metric_value(m, NAME_Q);
}

static void metrics_count_adds_depth_and_retries(void **state)
{
  kcr_metrics *reg = NULL;
  assert_int_equal(KCR_OK, kcr_metrics_new(NULL, &reg, NULL));
  kcr_queue *q = new_queue(&(struct kcr_queue_opts){.name = "q", .metrics = reg});
  char *k;

  assert_non_null(q);
  assert_true(counter(reg, "workqueue_adds_total") == 0);
  kcr_queue_add(q, "ns/a");
  kcr_queue_add(q, "ns/a"); /* deduplicated: not counted */
  kcr_queue_add(q, "ns/b");
  assert_true(counter(reg, "workqueue_adds_total") == 2);
  assert_true(gauge(reg, "workqueue_depth") == 2);
  k = take_expect(q, "ns/a");
  assert_true(gauge(reg, "workqueue_depth") == 1);
  kcr_queue_add(q, "ns/a"); /* dirty while processing: counted, as client-go */
  assert_true(counter(reg, "workqueue_adds_total") == 3);
  assert_true(gauge(reg, "workqueue_depth") == 2);
  kcr_queue_done(q, k);
  free(k);
  take_done(q, "ns/b");
  take_done(q, "ns/a");
  assert_true(gauge(reg, "workqueue_depth") == 0);

  assert_true(counter(reg, "workqueue_retries_total") == 0);
  kcr_queue_add_rate_limited(q, "ns/c");
  kcr_queue_add_after(q, "ns/d", 0); /* every add_after is a retry in client-go */
  assert_true(counter(reg, "workqueue_retries_total") == 2);
  assert_true(counter(reg, "workqueue_adds_total") == 4); /* ns/d; ns/c is parked */
  take_done(q, "ns/d");
  take_done(q, "ns/c");
  assert_true(counter(reg, "workqueue_adds_total") == 5);
  assert_true(gauge(reg, "workqueue_depth") == 0);
  kcr_queue_free(q);
  kcr_metrics_free(reg);
}

static bool starts_with_x(const char *key, void *ud)
{
  (void)ud;
  return key[0] == 'x';
}

/* What a sharded controller does with the keys of a bucket it lost: they
 * leave the line and the wait, their failures forgotten; one in process
 * finishes without coming back; the others stay as they were. */
static void remove_if_takes_matching_keys_out_of_line_and_wait(void **state)
{
  kcr_metrics *reg = NULL;
  assert_int_equal(KCR_OK, kcr_metrics_new(NULL, &reg, NULL));
  kcr_queue *q = new_queue(&(struct kcr_queue_opts){
      .name = "q", .metrics = reg, .base_delay_ms = 40, .max_delay_ms = 1000});
  char *k;

  kcr_queue_add(q, "xa");
  add_prio(q, "xb", 5);
  kcr_queue_add(q, "a");
  kcr_queue_add_after(q, "xc", 100000); /* parked */
  kcr_queue_add_after(q, "d", 50);      /* parked, stays */
  kcr_queue_add_rate_limited(q, "xe");  /* parked, one failure */
  kcr_queue_add_rate_limited(q, "xe");
  kcr_queue_add_rate_limited(q, "f"); /* parked, one failure, stays */
  kcr_queue_add(q, "xp");
  k = take_expect(q, "xb"); /* xb (prio 5) first */
  kcr_queue_add(q, "xb");   /* dirty while processing */
  assert_int_equal(2, kcr_queue_num_requeues(q, "xe"));
  assert_true(gauge(reg, "workqueue_depth") == 4); /* xa a xp, xb again */
  /* xa, xp leave the line; xc, xe the wait; xb was processing */
  assert_int_equal(4, kcr__queue_remove_if(q, starts_with_x, NULL));
  assert_int_equal(0, kcr_queue_num_requeues(q, "xe"));
  assert_int_equal(1, kcr_queue_num_requeues(q, "f"));
  assert_true(gauge(reg, "workqueue_depth") == 1); /* a */
  assert_int_equal(KCR_OK, kcr_queue_done(q, k));  /* not queued again */
  free(k);
  take_done(q, "a");
  sleep_ms(100); /* d and f are due */
  char *k1 = NULL, *k2 = NULL;
  assert_int_equal(KCR_OK, kcr_queue_take(q, 5000, &k1));
  assert_int_equal(KCR_OK, kcr_queue_take(q, 5000, &k2));
  assert_true((!strcmp(k1, "d") && !strcmp(k2, "f")) ||
              (!strcmp(k1, "f") && !strcmp(k2, "d")));
  kcr_queue_done(q, k1);
  kcr_queue_done(q, k2);
  free(k1);
  free(k2);
  assert_empty(q);
  assert_true(gauge(reg, "workqueue_depth") == 0);
  /* removed keys come back when added again */
  kcr_queue_add(q, "xa");
  take_done(q, "xa");
  assert_int_equal(0, kcr__queue_remove_if(q, starts_with_x, NULL));
  kcr_queue_free(q);
  kcr_metrics_free(reg);
}

static void metrics_render_in_flight_work_and_help_texts(void **state)
{
  kcr_metrics *reg = NULL;
  assert_int_equal(KCR_OK, kcr_metrics_new(NULL, &reg, NULL));
  kcr_queue *q = new_queue(&(struct kcr_queue_opts){.name = "q", .metrics = reg});
  struct kcr_buf out = KCR_BUF_INIT;
  char *k1, *k2;
  static const char *const help[] = {
      "# HELP workqueue_depth Current depth of workqueue\n",
      "# HELP workqueue_adds_total Total number of adds handled by workqueue\n",
      "# HELP workqueue_queue_duration_seconds How long in seconds an item stays in "
      "workqueue before being requested\n",
      "# HELP workqueue_work_duration_seconds How long in seconds processing an item "
      "from workqueue takes.\n",
      "# HELP workqueue_unfinished_work_seconds How many seconds of work has been done "
      "that is in progress and hasn't been observed by work_duration. Large values "
      "indicate stuck threads. One can deduce the number of stuck threads by "
      "observing the rate at which this increases.\n",
      "# HELP workqueue_longest_running_processor_seconds How many seconds has the "
      "longest running processor for workqueue been running.\n",
      "# HELP workqueue_retries_total Total number of retries handled by workqueue\n",
  };

  kcr_queue_add(q, "ns/a");
  kcr_queue_add(q, "ns/b");
  k1 = take_expect(q, "ns/a");
  sleep_ms(40);
  k2 = take_expect(q, "ns/b");
  sleep_ms(20);
  assert_int_equal(KCR_OK, kcr_metrics_render(reg, &out));
  /* ns/a has run >= 60 ms, ns/b >= 20 ms */
  assert_true(gauge(reg, "workqueue_longest_running_processor_seconds") >= 0.060);
  assert_true(gauge(reg, "workqueue_unfinished_work_seconds") >= 0.080);
  kcr_queue_done(q, k1);
  kcr_queue_done(q, k2);
  free(k1);
  free(k2);
  kcr_buf_reset(&out);
  assert_int_equal(KCR_OK, kcr_metrics_render(reg, &out));
  assert_true(gauge(reg, "workqueue_longest_running_processor_seconds") == 0);
  assert_true(gauge(reg, "workqueue_unfinished_work_seconds") == 0);
  /* All seven families, the histograms now that they have observations. */
  for(size_t i = 0; i < sizeof(help) / sizeof(help[0]); i++)
    assert_non_null(strstr(kcr_buf_str(&out), help[i]));
  assert_non_null(strstr(kcr_buf_str(&out), "workqueue_depth{name=\"q\"} 0\n"));
  kcr_buf_cleanup(&out);
  kcr_queue_free(q); /* unhooks itself: rendering afterwards is safe */
  assert_int_equal(KCR_OK, kcr_metrics_render(reg, &out));
  kcr_buf_cleanup(&out);
  kcr_metrics_free(reg);
}

/* What stress_depth_is_zero_whenever_the_queue_is_idle finds, made
 * deterministic: a getter blocked in take times the parked keys; a key that
 * comes due while it is still processing becomes dirty (depth + 1) and the
 * getter, with nothing to take, sleeps on. The +1 must show at once: were
 * it held until the getter returns, another getter taking the key after
 * done() would leave the depth at -1 for as long as this one stays blocked. */
static void metrics_depth_counts_a_key_a_blocked_getter_promoted(void **state)
{
  kcr_metrics *reg = NULL;
  assert_int_equal(KCR_OK, kcr_metrics_new(NULL, &reg, NULL));
  kcr_queue *q = new_queue(&(struct kcr_queue_opts){.name = "q", .metrics = reg});
  struct waiter w = {q, KCR_FOREVER};
  struct kcr_buf out = KCR_BUF_INIT;
  double while_blocked, after;
  pthread_t th;
  char *k;

  kcr_queue_add(q, "ns/a");
  k = take_expect(q, "ns/a");
  kcr_queue_add_after(q, "ns/a", 20); /* parked while processing */
  assert_int_equal(0, pthread_create(&th, NULL, waiter_main, &w));
  sleep_ms(200); /* no call here: the getter alone promotes ns/a, at 20 ms */
  assert_int_equal(KCR_OK, kcr_metrics_render(reg, &out));
  kcr_buf_cleanup(&out);
  while_blocked = gauge(reg, "workqueue_depth"); /* ns/a is dirty */
  kcr_queue_done(q, k);                          /* requeues ns/a: w takes it */
  free(k);
  pthread_join(th, NULL);
  assert_int_equal(KCR_OK, w.rc);
  kcr_queue_done(q, w.key);
  free(w.key);
  after = gauge(reg, "workqueue_depth");
  kcr_queue_free(q);
  kcr_metrics_free(reg);
  if(while_blocked != 1)
    fail_msg("workqueue_depth was %g with one dirty key and a getter blocked",
             while_blocked);
  assert_true(after == 0);
}

static void an_unnamed_queue_has_no_metrics(void **state)
{
  kcr_metrics *reg = NULL;
  assert_int_equal(KCR_OK, kcr_metrics_new(NULL, &reg, NULL));
  kcr_queue *q = new_queue(&(struct kcr_queue_opts){.metrics = reg});
  struct kcr_buf out = KCR_BUF_INIT;

  kcr_queue_add(q, "ns/a");
  take_done(q, "ns/a");
  assert_int_equal(KCR_OK, kcr_metrics_render(reg, &out));
  assert_null(strstr(kcr_buf_str(&out), "workqueue_adds_total{"));
  kcr_buf_cleanup(&out);
  kcr_queue_free(q);
  kcr_metrics_free(reg);
}

/* A registry whose workqueue_depth is another family (a gauge there is
 * the queue's; here a counter the caller made): the queue is not made,
 * KCR_EEXIST names the family, and the registry gets no queue families nor
 * a collect hook on a freed queue. */
static void a_registry_with_a_conflicting_family_refuses_the_queue(void **state)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  struct kcr_buf out = KCR_BUF_INIT;
  kcr_metrics *reg = NULL;
  kcr_metric *mine = NULL;
  kcr_queue *q = (kcr_queue *)&ei; /* not NULL: the call must clear it */

  assert_int_equal(KCR_OK, kcr_metrics_new(NULL, &reg, NULL));
  assert_int_equal(KCR_OK, kcr_metric_counter(
                               reg, &(struct kcr_metric_opts){.name = "workqueue_depth"},
                               &mine, NULL));
  assert_int_equal(
      KCR_EEXIST,
      kcr_queue_new(&(struct kcr_queue_opts){.name = "q", .metrics = reg}, &q, &ei));
  assert_null(q);
  assert_non_null(ei.message);
  assert_non_null(
      strstr(ei.message, "metric workqueue_depth is already registered as a counter"));
  assert_int_equal(KCR_OK, kcr_metrics_render(reg, &out)); /* runs no freed hook (ASan) */
  assert_null(strstr(kcr_buf_str(&out), "workqueue_adds_total"));
  kcr_buf_cleanup(&out);
  kcr_errinfo_cleanup(&ei);
  kcr_metrics_free(reg);
}

/* ---- concurrency ---- */

#define NKEYS      500
#define NPRODUCERS 8
#define NWORKERS   4
#define NADDS      20000

/* Per key: a version bumped by producers before each add, the version a
 * worker saw when it last started processing the key, and an in-flight
 * flag. If the queue is right, every key's last processing started after
 * its last add (an add after the start marks it dirty, so it runs again):
 * at the end, seen == version for every key. */
struct stress {
  kcr_queue *q;
  bool delayed, prios; /* add_after; random priorities (add_with) */
  atomic_uint version[NKEYS];
  atomic_uint seen[NKEYS];
  atomic_int in_flight[NKEYS];
  atomic_int overlaps, errors;
  atomic_long processed;
  atomic_uint seed;
};

static void key_name(char *buf, size_t n, unsigned i)
{
  snprintf(buf, n, "ns/key-%u", i);
}

static unsigned key_index(const char *k) { return (unsigned)strtoul(k + 7, NULL, 10); }

static void *producer_main(void *arg)
{
  struct stress *s = arg;
  unsigned seed = atomic_fetch_add(&s->seed, 7919);
  char key[32];

  for(int i = 0; i < (s->delayed ? NADDS / 10 : NADDS); i++) {
    unsigned k = (unsigned)rand_r(&seed) % NKEYS;
    key_name(key, sizeof(key), k);
    atomic_fetch_add(&s->version[k], 1);
    if(s->prios     ? kcr_queue_add_with(s->q, key,
                                         &(struct kcr_queue_add_opts){
                                             .priority = (int)(rand_r(&seed) % 5) - 2,
                                             .after_ms = s->delayed ? rand_r(&seed) % 4 : 0})
       : s->delayed ? kcr_queue_add_after(s->q, key, rand_r(&seed) % 4)
                    : kcr_queue_add(s->q, key))
      atomic_fetch_add(&s->errors, 1);
    if(i % 8 == 0)
      sched_yield(); /* spread the adds over the workers' gets and dones */
  }
  return NULL;
}

static void *worker_main(void *arg)
{
  struct stress *s = arg;
  char *key;

  while(kcr_queue_take(s->q, KCR_FOREVER, &key) == KCR_OK) {
    unsigned k = key_index(key);
    if(atomic_exchange(&s->in_flight[k], 1))
      atomic_fetch_add(&s->overlaps, 1);
    atomic_store(&s->seen[k], atomic_load(&s->version[k]));
    if(atomic_fetch_add(&s->processed, 1) % 64 == 0)
      sched_yield(); /* let others pile onto keys in flight */
    atomic_store(&s->in_flight[k], 0);
    if(kcr_queue_done(s->q, key))
      atomic_fetch_add(&s->errors, 1);
    free(key);
  }
  return NULL;
}

static bool all_seen(struct stress *s)
{
  for(unsigned k = 0; k < NKEYS; k++)
    if(atomic_load(&s->seen[k]) != atomic_load(&s->version[k]))
      return false;
  return true;
}

static void run_stress(bool delayed, bool prios)
{
  struct stress *s = calloc(1, sizeof(*s));
  pthread_t prod[NPRODUCERS], work[NWORKERS];
  long adds = 0;

  assert_non_null(s);
  s->q = new_queue(NULL);
  s->delayed = delayed;
  s->prios = prios;
  for(int i = 0; i < NWORKERS; i++)
    assert_int_equal(0, pthread_create(&work[i], NULL, worker_main, s));
  for(int i = 0; i < NPRODUCERS; i++)
    assert_int_equal(0, pthread_create(&prod[i], NULL, producer_main, s));
  for(int i = 0; i < NPRODUCERS; i++)
    pthread_join(prod[i], NULL);
  if(delayed) /* parked keys are dropped by shutdown: let them all fire */
    for(int i = 0; i < 30000 && !all_seen(s); i++)
      sleep_ms(1);
  kcr_queue_shutdown(s->q);
  for(int i = 0; i < NWORKERS; i++) /* they drain what is queued first */
    pthread_join(work[i], NULL);

  assert_int_equal(0, atomic_load(&s->overlaps));
  assert_int_equal(0, atomic_load(&s->errors));
  for(unsigned k = 0; k < NKEYS; k++) {
    adds += atomic_load(&s->version[k]);
    if(atomic_load(&s->version[k]))
      assert_int_equal(atomic_load(&s->version[k]), atomic_load(&s->seen[k]));
  }
  assert_int_equal(NPRODUCERS * (delayed ? NADDS / 10 : NADDS), adds);
  assert_true(atomic_load(&s->processed) <= adds);
  assert_int_equal(0, kcr_queue_len(s->q));
  kcr_queue_free(s->q);
  free(s);
}

static void stress_no_key_runs_twice_at_once_and_no_add_is_lost(void **state)
{
  run_stress(false, false);
}

static void stress_parked_keys_always_fire(void **state) { run_stress(true, false); }

/* The same guarantees with keys raised, parked and requeued at random
 * priorities. */
static void stress_with_priorities(void **state)
{
  run_stress(false, true);
  run_stress(true, true);
}

/* ---- the depth gauge under concurrency ---- */

/* workqueue_depth must equal the number of dirty keys whenever the queue is
 * idle - no key queued, processing or parked - even while getters sit
 * blocked in take: an idle controller's workers (all but one take with
 * KCR_FOREVER, as controller.c's do) do not return, so a delta a blocked
 * call held back would never be applied. Seeded: each thread's sequence of
 * calls is fixed, only the interleaving varies. */

#define GNKEYS      50
#define GNPRODUCERS 4
#define GNWORKERS   3
#define GNOPS       3000 /* per producer and round */
#define GROUNDS     10   /* each ends idle, and is checked */
#define GBASE_MS    1    /* rate limiter: 1, 2, 4, 8, 8... ms */
#define GMAX_MS     8
#define GAFTER_MS   5 /* add_after: 0-5 ms */

static const int gprios[] = {-1, 0, 1, 5};

struct gstress {
  kcr_queue *q;
  kcr_metrics *reg;
  atomic_int stop_render;
  atomic_int busy;  /* workers holding a key */
  atomic_long took; /* keys taken, ever */
  atomic_int errors;
};

struct gthread {
  struct gstress *s;
  unsigned seed;
};

static int pick_prio(unsigned *seed) { return gprios[rand_r(seed) % 4]; }

static void gstress_op(struct gstress *s, unsigned *seed, const char *key)
{
  kcr_err rc = KCR_OK;

  switch(rand_r(seed) % 8) {
  case 0:
  case 1: rc = kcr_queue_add(s->q, key); break;
  case 2: rc = kcr_queue_add_after(s->q, key, rand_r(seed) % (GAFTER_MS + 1)); break;
  case 3: rc = kcr_queue_add_rate_limited(s->q, key); break;
  case 4:
  case 5:
    rc = kcr_queue_add_with(
        s->q, key,
        &(struct kcr_queue_add_opts){
            .priority = pick_prio(seed),
            .after_ms = rand_r(seed) % 2 ? 0 : rand_r(seed) % (GAFTER_MS + 1),
            .rate_limited = rand_r(seed) % 4 == 0});
    break;
  case 6: kcr_queue_forget(s->q, key); break;
  default: kcr_queue_len(s->q); break;
  }
  if(rc)
    atomic_fetch_add(&s->errors, 1);
}

static void *gproducer_main(void *arg)
{
  struct gthread *t = arg;
  char key[32];

  for(int i = 0; i < GNOPS; i++) {
    key_name(key, sizeof(key), (unsigned)rand_r(&t->seed) % GNKEYS);
    gstress_op(t->s, &t->seed, key);
    if(i % 8 == 0)
      sched_yield();
  }
  return NULL;
}

/* Worker 0 checks with a short timeout, the others block (KCR_FOREVER) as
 * controller.c's workers do; shutdown ends them. A quarter of the keys are
 * added again before done() - parked for a rate-limited or add_after retry,
 * or now - and some "reconcile" for 1-2 ms, so that parked keys come due
 * while still processing. */
static void *gworker_main(void *arg)
{
  struct gthread *t = arg;
  struct gstress *s = t->s;
  uint64_t timeout = t->seed == 1 ? 5 : KCR_FOREVER;
  char *key;
  int prio;
  kcr_err rc;

  while((rc = kcr_queue_take_with_priority(s->q, timeout, &key, &prio)) !=
        KCR_ECANCELED) {
    if(rc == KCR_ETIMEDOUT)
      continue;
    if(rc) {
      atomic_fetch_add(&s->errors, 1);
      continue;
    }
    atomic_fetch_add(&s->busy, 1);
    atomic_fetch_add(&s->took, 1);
    switch(rand_r(&t->seed) % 8) {
    case 0: kcr_queue_add_rate_limited(s->q, key); break;
    case 1: kcr_queue_add_after(s->q, key, 1 + rand_r(&t->seed) % 2); break;
    case 2:
      kcr_queue_add_with(s->q, key, &(struct kcr_queue_add_opts){.priority = prio});
      break;
    default: break;
    }
    if(rand_r(&t->seed) % 4 == 0)
      sleep_ms(1 + rand_r(&t->seed) % 2);
    else
      kcr_queue_forget(s->q, key);
    atomic_fetch_sub(&s->busy, 1);
    if(kcr_queue_done(s->q, key))
      atomic_fetch_add(&s->errors, 1);
    free(key);
  }
  return NULL;
}

/* Renders over and over, so the collect hook (which promotes due keys)
 * runs alongside the others. */
static void *grender_main(void *arg)
{
  struct gstress *s = arg;
  struct kcr_buf out = KCR_BUF_INIT;

  while(!atomic_load(&s->stop_render)) {
    if(kcr_metrics_render(s->reg, &out))
      atomic_fetch_add(&s->errors, 1);
    kcr_buf_reset(&out);
    sched_yield();
  }
  kcr_buf_cleanup(&out);
  return NULL;
}

/* Waits until nothing is queued, processing or parked: no key was taken
 * for longer than any delay, with none queued and none held before and
 * after. False if that never happens within ~5 s. */
static bool wait_idle(struct gstress *s)
{
  for(int i = 0; i < 200; i++) {
    long took = atomic_load(&s->took);
    if(kcr_queue_len(s->q) || atomic_load(&s->busy)) {
      sleep_ms(1);
      continue;
    }
    sleep_ms(3 * GMAX_MS);
    if(!kcr_queue_len(s->q) && !atomic_load(&s->busy) && atomic_load(&s->took) == took)
      return true;
  }
  return false;
}

/* One round: the producers and the renderer run, then the queue is left
 * to go idle, with the workers waiting in take. *depth: what a scrape sees
 * then. False if the queue never went idle. */
static bool gstress_round(struct gstress *s, unsigned round, double *depth)
{
  pthread_t prod[GNPRODUCERS], render;
  struct gthread pt[GNPRODUCERS];
  struct kcr_buf out = KCR_BUF_INIT;
  bool idle;

  atomic_store(&s->stop_render, 0);
  assert_int_equal(0, pthread_create(&render, NULL, grender_main, s));
  for(unsigned i = 0; i < GNPRODUCERS; i++) {
    pt[i] = (struct gthread){s, 1000 + 7919 * i + 104729 * round};
    assert_int_equal(0, pthread_create(&prod[i], NULL, gproducer_main, &pt[i]));
  }
  for(int i = 0; i < GNPRODUCERS; i++)
    pthread_join(prod[i], NULL);
  atomic_store(&s->stop_render, 1);
  pthread_join(render, NULL);
  idle = wait_idle(s);
  if(kcr_metrics_render(s->reg, &out)) /* runs the collect hook, as a scrape */
    atomic_fetch_add(&s->errors, 1);
  kcr_buf_cleanup(&out);
  *depth = gauge(s->reg, "workqueue_depth");
  return idle;
}

static void stress_depth_is_zero_whenever_the_queue_is_idle(void **state)
{
  struct gstress s = {0};
  pthread_t work[GNWORKERS];
  struct gthread wt[GNWORKERS];
  double depth = 0, after;
  size_t len;
  unsigned round;
  bool idle = true;

  assert_int_equal(KCR_OK, kcr_metrics_new(NULL, &s.reg, NULL));
  s.q = new_queue(&(struct kcr_queue_opts){
      .name = "q", .metrics = s.reg, .base_delay_ms = GBASE_MS, .max_delay_ms = GMAX_MS});
  for(unsigned i = 0; i < GNWORKERS; i++) {
    wt[i] = (struct gthread){&s, 1 + i};
    assert_int_equal(0, pthread_create(&work[i], NULL, gworker_main, &wt[i]));
  }
  for(round = 0; round < GROUNDS; round++) {
    idle = gstress_round(&s, round, &depth);
    if(!idle || depth != 0)
      break;
  }
  /* Checked once the workers are joined and the queue freed: a failed
   * assert leaves this frame. */
  kcr_queue_shutdown(s.q);
  for(int i = 0; i < GNWORKERS; i++)
    pthread_join(work[i], NULL);
  len = kcr_queue_len(s.q);
  after = gauge(s.reg, "workqueue_depth"); /* every call has returned */
  kcr_queue_free(s.q);
  kcr_metrics_free(s.reg);
  assert_true(idle);
  assert_int_equal(0, atomic_load(&s.errors));
  if(depth != 0)
    fail_msg("round %u: workqueue_depth was %g with the queue idle and the workers "
             "waiting",
             round, depth);
  assert_int_equal(0, len);
  assert_true(after == 0);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(new_refuses_invalid_options_naming_them),
      cmocka_unit_test(adding_a_queued_key_again_is_a_no_op),
      cmocka_unit_test(keys_come_out_in_fifo_order),
      cmocka_unit_test(a_key_added_while_processing_waits_for_done),
      cmocka_unit_test(done_requeues_at_the_back),
      cmocka_unit_test(done_of_a_key_not_processing_is_refused),
      cmocka_unit_test(take_moves_an_owned_copy_out),
      cmocka_unit_test(len_counts_only_ready_keys),
      cmocka_unit_test(take_gives_up_after_its_timeout),
      cmocka_unit_test(add_after_waits_for_the_deadline),
      cmocka_unit_test(add_after_without_delay_adds_now),
      cmocka_unit_test(parked_keys_come_out_in_deadline_order),
      cmocka_unit_test(the_earliest_deadline_wins),
      cmocka_unit_test(a_huge_delay_parks_the_key),
      cmocka_unit_test(a_due_key_is_added_as_by_add),
      cmocka_unit_test(a_blocked_getter_wakes_for_a_sooner_deadline),
      cmocka_unit_test(a_getter_that_gives_up_hands_the_timing_on),
      cmocka_unit_test(rate_limited_delays_double_up_to_the_cap),
      cmocka_unit_test(forget_resets_the_backoff),
      cmocka_unit_test(the_token_bucket_limits_overall_retries),
      cmocka_unit_test(a_tiny_qps_parks_instead_of_overflowing),
      cmocka_unit_test(higher_priorities_are_taken_first_fifo_within_each),
      cmocka_unit_test(any_int_is_a_priority),
      cmocka_unit_test(a_higher_priority_raises_a_queued_key_to_the_back_of_its_line),
      cmocka_unit_test(a_lower_or_equal_priority_changes_nothing),
      cmocka_unit_test(done_requeues_with_the_highest_priority_added_meanwhile),
      cmocka_unit_test(add_with_zero_or_no_options_is_add),
      cmocka_unit_test(take_with_priority_refuses_null_arguments),
      cmocka_unit_test(add_after_keeps_the_priority),
      cmocka_unit_test(rate_limited_keys_keep_the_priority),
      cmocka_unit_test(parking_keeps_the_earliest_deadline_and_highest_priority),
      cmocka_unit_test(a_due_key_raises_a_queued_one),
      cmocka_unit_test(shutdown_drops_parked_keys_of_any_priority),
      cmocka_unit_test(shutdown_wakes_blocked_getters),
      cmocka_unit_test(take_drains_queued_keys_before_reporting_shutdown),
      cmocka_unit_test(a_key_dirty_before_shutdown_is_still_processed),
      cmocka_unit_test(shutdown_drain_waits_for_in_flight_work),
      cmocka_unit_test(shutdown_stops_a_waiting_drain),
      cmocka_unit_test(metrics_count_adds_depth_and_retries),
      cmocka_unit_test(metrics_render_in_flight_work_and_help_texts),
      cmocka_unit_test(metrics_depth_counts_a_key_a_blocked_getter_promoted),
      cmocka_unit_test(an_unnamed_queue_has_no_metrics),
      cmocka_unit_test(a_registry_with_a_conflicting_family_refuses_the_queue),
      cmocka_unit_test(stress_no_key_runs_twice_at_once_and_no_add_is_lost),
      cmocka_unit_test(stress_parked_keys_always_fire),
      cmocka_unit_test(stress_with_priorities),
      cmocka_unit_test(remove_if_takes_matching_keys_out_of_line_and_wait),
      cmocka_unit_test(stress_depth_is_zero_whenever_the_queue_is_idle),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
