/* The metrics registry and the Prometheus text exposition format 0.0.4. */
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "kcr/metrics.h"
#include "tabort.h"

#define L(...)    ((const char *const[]){__VA_ARGS__, NULL})
#define OPTS(...) (&(struct kcr_metric_opts){__VA_ARGS__})

/* kcr_metric_counter, _gauge and _histogram have this one signature. */
typedef kcr_err family_fn(kcr_metrics *reg, const struct kcr_metric_opts *opts,
                          kcr_metric **out, struct kcr_errinfo *ei);

/* Registers a family that must be accepted, and returns it. */
static kcr_metric *must(family_fn *add, kcr_metrics *reg, const struct kcr_metric_opts *o)
{
  kcr_metric *m = NULL;
  assert_int_equal(KCR_OK, add(reg, o, &m, NULL));
  assert_non_null(m);
  return m;
}

/* Renders reg and compares the whole text. */
static void assert_render(kcr_metrics *reg, const char *want)
{
  struct kcr_buf out = KCR_BUF_INIT;
  assert_int_equal(KCR_OK, kcr_metrics_render(reg, &out));
  assert_string_equal(want, kcr_buf_str(&out));
  kcr_buf_cleanup(&out);
}

static void counter_with_labels_renders_exactly(void **state)
{
  kcr_metrics *reg = NULL;
  assert_int_equal(KCR_OK, kcr_metrics_new(NULL, &reg, NULL));
  kcr_metric *c = must(kcr_metric_counter, reg,
                       OPTS(.name = "workqueue_adds_total",
                            .help = "Total number of adds handled by workqueue",
                            .label_names = L("name", "controller")));
  for(int i = 0; i < 17; i++)
    kcr_metric_inc(c, L("ebd", "ebd"), 1);
  kcr_metric_inc(c, L("vfm", "sim"), 2.5);
  kcr_metric_inc(c, L("vfm", "sim"), -1); /* counters never go down */
  assert_render(reg,
                "# HELP workqueue_adds_total Total number of adds handled by workqueue\n"
                "# TYPE workqueue_adds_total counter\n"
                "workqueue_adds_total{name=\"ebd\",controller=\"ebd\"} 17\n"
                "workqueue_adds_total{name=\"vfm\",controller=\"sim\"} 2.5\n");
  assert_true(17 == kcr_metric_value(c, L("ebd", "ebd")));
  assert_true(0 == kcr_metric_value(c, L("nope", "nope")));
  kcr_metrics_free(reg);
}

static void gauge_renders_exactly(void **state)
{
  kcr_metrics *reg = NULL;
  assert_int_equal(KCR_OK, kcr_metrics_new(NULL, &reg, NULL));
  kcr_metric *g =
      must(kcr_metric_gauge, reg,
           OPTS(.name = "workqueue_depth", .help = "Current depth of workqueue",
                .label_names = L("name")));
  kcr_metric *up = must(kcr_metric_gauge, reg, OPTS(.name = "up"));
  kcr_metric *odd =
      must(kcr_metric_gauge, reg,
           OPTS(.name = "odd_values", .help = "Values", .label_names = L("k")));

  kcr_metric_set(g, L("ebd"), 3);
  kcr_metric_inc(g, L("ebd"), -1);
  kcr_metric_inc(g, L("ebd"), 0.5);
  kcr_metric_set(up, NULL, 1);
  kcr_metric_set(odd, L("big"), 1e20);
  kcr_metric_set(odd, L("tiny"), 1e-8);
  kcr_metric_set(odd, L("third"), 1.0 / 3);
  kcr_metric_set(odd, L("neg"), -42);
  kcr_metric_set(odd, L("nan"), NAN);
  kcr_metric_set(odd, L("inf"), -INFINITY);
  kcr_metric_set(odd, L("ts"), 1795946400.25);
  assert_render(reg, "# HELP workqueue_depth Current depth of workqueue\n"
                     "# TYPE workqueue_depth gauge\n"
                     "workqueue_depth{name=\"ebd\"} 2.5\n"
                     "# TYPE up gauge\n"
                     "up 1\n"
                     "# HELP odd_values Values\n"
                     "# TYPE odd_values gauge\n"
                     "odd_values{k=\"big\"} 1e+20\n"
                     "odd_values{k=\"tiny\"} 1e-08\n"
                     "odd_values{k=\"third\"} 0.3333333333333333\n"
                     "odd_values{k=\"neg\"} -42\n"
                     "odd_values{k=\"nan\"} NaN\n"
                     "odd_values{k=\"inf\"} -Inf\n"
                     "odd_values{k=\"ts\"} 1795946400.25\n");
  kcr_metrics_free(reg);
}

static void histogram_renders_cumulative_buckets(void **state)
{
  static const double bounds[] = {0.01, 0.1, 1, 10};
  kcr_metrics *reg = NULL;
  assert_int_equal(KCR_OK, kcr_metrics_new(NULL, &reg, NULL));
  kcr_metric *h = must(
      kcr_metric_histogram, reg,
      OPTS(.name = "reconcile_time_seconds", .help = "Length of time per reconciliation",
           .label_names = L("controller"), .bounds = bounds, .nbounds = 4));
  /* Exactly representable, so the sum is exact: 104.5078125. */
  static const double obs[] = {0.0078125, 0.25, 0.25, 4, 100};
  for(size_t i = 0; i < 5; i++)
    kcr_metric_observe(h, L("ebd"), obs[i]);
  kcr_metric_observe(h, L("vfm"), 0.1); /* on a bound: counted in it */
  assert_render(reg, "# HELP reconcile_time_seconds Length of time per reconciliation\n"
                     "# TYPE reconcile_time_seconds histogram\n"
                     "reconcile_time_seconds_bucket{controller=\"ebd\",le=\"0.01\"} 1\n"
                     "reconcile_time_seconds_bucket{controller=\"ebd\",le=\"0.1\"} 1\n"
                     "reconcile_time_seconds_bucket{controller=\"ebd\",le=\"1\"} 3\n"
                     "reconcile_time_seconds_bucket{controller=\"ebd\",le=\"10\"} 4\n"
                     "reconcile_time_seconds_bucket{controller=\"ebd\",le=\"+Inf\"} 5\n"
                     "reconcile_time_seconds_sum{controller=\"ebd\"} 104.5078125\n"
                     "reconcile_time_seconds_count{controller=\"ebd\"} 5\n"
                     "reconcile_time_seconds_bucket{controller=\"vfm\",le=\"0.01\"} 0\n"
                     "reconcile_time_seconds_bucket{controller=\"vfm\",le=\"0.1\"} 1\n"
                     "reconcile_time_seconds_bucket{controller=\"vfm\",le=\"1\"} 1\n"
                     "reconcile_time_seconds_bucket{controller=\"vfm\",le=\"10\"} 1\n"
                     "reconcile_time_seconds_bucket{controller=\"vfm\",le=\"+Inf\"} 1\n"
                     "reconcile_time_seconds_sum{controller=\"vfm\"} 0.1\n"
                     "reconcile_time_seconds_count{controller=\"vfm\"} 1\n");
  assert_int_equal(5, kcr_metric_count(h, L("ebd")));
  assert_true(104.5078125 == kcr_metric_value(h, L("ebd")));
  kcr_metrics_free(reg);
}

static void histogram_without_labels_and_workqueue_buckets(void **state)
{
  kcr_metrics *reg = NULL;
  assert_int_equal(KCR_OK, kcr_metrics_new(NULL, &reg, NULL));
  kcr_metric *h =
      must(kcr_metric_histogram, reg,
           OPTS(.name = "wait_seconds", .help = "Wait", .bounds = kcr_buckets_workqueue,
                .nbounds = kcr_buckets_workqueue_n));
  kcr_metric_observe(h, NULL, 2e-8);
  assert_render(reg, "# HELP wait_seconds Wait\n"
                     "# TYPE wait_seconds histogram\n"
                     "wait_seconds_bucket{le=\"1e-08\"} 0\n"
                     "wait_seconds_bucket{le=\"1e-07\"} 1\n"
                     "wait_seconds_bucket{le=\"1e-06\"} 1\n"
                     "wait_seconds_bucket{le=\"1e-05\"} 1\n"
                     "wait_seconds_bucket{le=\"0.0001\"} 1\n"
                     "wait_seconds_bucket{le=\"0.001\"} 1\n"
                     "wait_seconds_bucket{le=\"0.01\"} 1\n"
                     "wait_seconds_bucket{le=\"0.1\"} 1\n"
                     "wait_seconds_bucket{le=\"1\"} 1\n"
                     "wait_seconds_bucket{le=\"10\"} 1\n"
                     "wait_seconds_bucket{le=\"100\"} 1\n"
                     "wait_seconds_bucket{le=\"1000\"} 1\n"
                     "wait_seconds_bucket{le=\"+Inf\"} 1\n"
                     "wait_seconds_sum 2e-08\n"
                     "wait_seconds_count 1\n");
  kcr_metrics_free(reg);
}

static void bucket_sets_match_upstream(void **state)
{
  assert_int_equal(14, kcr_buckets_seconds_n);
  assert_true(0.005 == kcr_buckets_seconds[0]);
  assert_true(2.5 == kcr_buckets_seconds[8]);
  assert_true(60 == kcr_buckets_seconds[13]);
  assert_int_equal(12, kcr_buckets_workqueue_n);
  assert_true(1e-8 == kcr_buckets_workqueue[0]);
  assert_true(1e3 == kcr_buckets_workqueue[11]);
}

static void label_values_and_help_are_escaped(void **state)
{
  kcr_metrics *reg = NULL;
  assert_int_equal(KCR_OK, kcr_metrics_new(NULL, &reg, NULL));
  kcr_metric *c =
      must(kcr_metric_counter, reg,
           OPTS(.name = "escapes_total", .help = "a \\ and a\nnewline \"kept\"",
                .label_names = L("v")));
  kcr_metric_inc(c, L("back\\slash \"quoted\"\nnext line"), 1);
  assert_render(reg, "# HELP escapes_total a \\\\ and a\\nnewline \"kept\"\n"
                     "# TYPE escapes_total counter\n"
                     "escapes_total{v=\"back\\\\slash \\\"quoted\\\"\\nnext line\"} 1\n");
  kcr_metrics_free(reg);
}

struct race {
  kcr_metric *c, *h;
  int id;
};

#define PER_THREAD 100000

static void *hammer(void *arg)
{
  struct race *r = arg;
  char own[16];
  snprintf(own, sizeof(own), "t%d", r->id);
  for(int i = 0; i < PER_THREAD; i++) {
    kcr_metric_inc(r->c, L("shared"), 1);
    kcr_metric_inc(r->c, L(own), 0.5);
    kcr_metric_observe(r->h, L("shared"), (i % 3) ? 0.25 : 2);
  }
  return NULL;
}

static void concurrent_increments_sum_exactly(void **state)
{
  static const double bounds[] = {1};
  kcr_metrics *reg = NULL;
  assert_int_equal(KCR_OK, kcr_metrics_new(NULL, &reg, NULL));
  struct race r[4];
  pthread_t t[4];
  struct kcr_buf out = KCR_BUF_INIT;

  for(int i = 0; i < 4; i++) {
    r[i].c = must(kcr_metric_counter, reg,
                  OPTS(.name = "hits_total", .help = "Hits", .label_names = L("who")));
    r[i].h = must(kcr_metric_histogram, reg,
                  OPTS(.name = "lat_seconds", .help = "Latency", .label_names = L("who"),
                       .bounds = bounds, .nbounds = 1));
    r[i].id = i;
    assert_int_equal(0, pthread_create(&t[i], NULL, hammer, &r[i]));
  }
  /* Render while the writers run: must not crash or race. */
  for(int i = 0; i < 20; i++) {
    assert_int_equal(KCR_OK, kcr_metrics_render(reg, &out));
    kcr_buf_reset(&out);
  }
  for(int i = 0; i < 4; i++)
    pthread_join(t[i], NULL);
  assert_true(4.0 * PER_THREAD == kcr_metric_value(r[0].c, L("shared")));
  assert_true(0.5 * PER_THREAD == kcr_metric_value(r[0].c, L("t3")));
  assert_int_equal(4 * PER_THREAD, kcr_metric_count(r[0].h, L("shared")));
  /* 1/3 of observations are 2, the rest 0.25: all exact in binary. */
  double twos = 4.0 * ((PER_THREAD + 2) / 3);
  assert_true(twos * 2 + (4.0 * PER_THREAD - twos) * 0.25 ==
              kcr_metric_value(r[0].h, L("shared")));
  kcr_buf_cleanup(&out);
  kcr_metrics_free(reg);
}

/* Threads that each make their own series (so the family's table grows
 * many times) while all of them update one shared series and render runs:
 * every update lands, nothing races (TSan). */
#define OWN_SERIES 2000

static void *grow_hammer(void *arg)
{
  struct race *r = arg;
  char own[32];
  for(int i = 0; i < OWN_SERIES; i++) {
    snprintf(own, sizeof(own), "t%d-%d", r->id, i);
    kcr_metric_inc(r->c, L(own), i);
    kcr_metric_inc(r->c, L("shared"), 1);
  }
  return NULL;
}

static void series_made_while_others_update_are_all_kept(void **state)
{
  kcr_metrics *reg = NULL;
  assert_int_equal(KCR_OK, kcr_metrics_new(NULL, &reg, NULL));
  struct race r[4];
  pthread_t t[4];
  struct kcr_buf out = KCR_BUF_INIT;
  char own[32];

  for(int i = 0; i < 4; i++) {
    r[i].c = must(kcr_metric_counter, reg,
                  OPTS(.name = "grow_total", .label_names = L("who")));
    r[i].id = i;
    assert_int_equal(0, pthread_create(&t[i], NULL, grow_hammer, &r[i]));
  }
  for(int i = 0; i < 5; i++) {
    assert_int_equal(KCR_OK, kcr_metrics_render(reg, &out));
    kcr_buf_reset(&out);
  }
  for(int i = 0; i < 4; i++)
    pthread_join(t[i], NULL);
  assert_true(4.0 * OWN_SERIES == kcr_metric_value(r[0].c, L("shared")));
  for(int id = 0; id < 4; id++)
    for(int i = 0; i < OWN_SERIES; i++) {
      snprintf(own, sizeof(own), "t%d-%d", id, i);
      assert_true((double)i == kcr_metric_value(r[0].c, L(own)));
    }
  kcr_buf_cleanup(&out);
  kcr_metrics_free(reg);
}

static void registering_twice_returns_the_same_family(void **state)
{
  static const double b1[] = {1, 2}, inf_tail[] = {1, 2, INFINITY};
  kcr_metrics *reg = NULL;
  assert_int_equal(KCR_OK, kcr_metrics_new(NULL, &reg, NULL));
  kcr_metric *c = must(kcr_metric_counter, reg,
                       OPTS(.name = "x_total", .help = "X", .label_names = L("a")));
  kcr_metric *h =
      must(kcr_metric_histogram, reg,
           OPTS(.name = "h_seconds", .help = "H", .bounds = b1, .nbounds = 2));

  assert_ptr_equal(
      c, must(kcr_metric_counter, reg,
              OPTS(.name = "x_total", .help = "other help", .label_names = L("a"))));
  assert_ptr_equal(h, must(kcr_metric_histogram, reg,
                           OPTS(.name = "h_seconds", .bounds = b1, .nbounds = 2)));
  /* A trailing +Inf is the implicit one: the same bounds. */
  assert_ptr_equal(h, must(kcr_metric_histogram, reg,
                           OPTS(.name = "h_seconds", .bounds = inf_tail, .nbounds = 3)));
  assert_non_null(
      must(kcr_metric_gauge, reg, OPTS(.name = "ns:ok_metric", .label_names = L("_a1"))));
  assert_render(reg, "# HELP h_seconds H\n" /* the first help text wins */
                     "# TYPE h_seconds histogram\n"
                     "h_seconds_bucket{le=\"1\"} 0\n"
                     "h_seconds_bucket{le=\"2\"} 0\n"
                     "h_seconds_bucket{le=\"+Inf\"} 0\n"
                     "h_seconds_sum 0\n"
                     "h_seconds_count 0\n");
  kcr_metrics_free(reg);
}

/* add(reg, o) fails with want, leaves *out NULL and says what in
 * ei->message (which contains says). */
static void refused(family_fn *add, kcr_metrics *reg, const struct kcr_metric_opts *o,
                    kcr_err want, const char *says)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  kcr_metric *m = (kcr_metric *)&ei; /* not NULL: the call must clear it */

  assert_int_equal(want, add(reg, o, &m, &ei));
  assert_null(m);
  assert_non_null(ei.message);
  if(!strstr(ei.message, says))
    fail_msg("message \"%s\" does not say \"%s\"", ei.message, says);
  kcr_errinfo_cleanup(&ei);
  /* And without an errinfo, the same code. */
  m = (kcr_metric *)&ei;
  assert_int_equal(want, add(reg, o, &m, NULL));
  assert_null(m);
}

/* A name registered with another type, other label names or other bounds
 * is KCR_EEXIST, naming the family as it is; the registry is unchanged. */
static void a_name_taken_by_another_family_is_eexist(void **state)
{
  static const double b1[] = {1, 2}, b2[] = {1, 3};
  static const char *const before = "# HELP x_total X\n"
                                    "# TYPE x_total counter\n"
                                    "x_total{a=\"v\",b=\"w\"} 1\n"
                                    "# TYPE h_seconds histogram\n"
                                    "h_seconds_bucket{le=\"1\"} 0\n"
                                    "h_seconds_bucket{le=\"2\"} 0\n"
                                    "h_seconds_bucket{le=\"+Inf\"} 0\n"
                                    "h_seconds_sum 0\n"
                                    "h_seconds_count 0\n";
  kcr_metrics *reg = NULL;
  assert_int_equal(KCR_OK, kcr_metrics_new(NULL, &reg, NULL));
  kcr_metric_inc(must(kcr_metric_counter, reg,
                      OPTS(.name = "x_total", .help = "X", .label_names = L("a", "b"))),
                 L("v", "w"), 1);
  must(kcr_metric_histogram, reg, OPTS(.name = "h_seconds", .bounds = b1, .nbounds = 2));

  refused(kcr_metric_gauge, reg, OPTS(.name = "x_total", .label_names = L("a", "b")),
          KCR_EEXIST, "metric x_total is already registered as a counter, not a gauge");
  refused(kcr_metric_counter, reg, OPTS(.name = "x_total", .label_names = L("b", "a")),
          KCR_EEXIST,
          "metric x_total is already registered with other label names (a,b)");
  refused(kcr_metric_counter, reg, OPTS(.name = "x_total", .label_names = L("a")),
          KCR_EEXIST, "(a,b)");
  refused(kcr_metric_counter, reg, OPTS(.name = "x_total"), KCR_EEXIST, "(a,b)");
  refused(kcr_metric_histogram, reg,
          OPTS(.name = "h_seconds", .label_names = L("a"), .bounds = b1, .nbounds = 2),
          KCR_EEXIST,
          "metric h_seconds is already registered with other label names (none)");
  refused(kcr_metric_histogram, reg,
          OPTS(.name = "h_seconds", .bounds = b2, .nbounds = 2), KCR_EEXIST,
          "histogram h_seconds is already registered with other bounds");
  refused(kcr_metric_histogram, reg, OPTS(.name = "h_seconds"), KCR_EEXIST,
          "other bounds (2 of them)");
  refused(kcr_metric_histogram, reg, OPTS(.name = "x_total", .label_names = L("a", "b")),
          KCR_EEXIST, "as a counter, not a histogram");
  assert_render(reg, before);
  kcr_metrics_free(reg);
}

/* Names and bounds Prometheus would refuse are KCR_EINVAL, and the message
 * names the metric and what is wrong with it; nothing is registered. */
static void invalid_names_and_bounds_are_einval(void **state)
{
  static const double b1[] = {1, 2}, unsorted[] = {2, 1}, same[] = {1, 1};
  static const double nan_bound[] = {1, NAN};
  kcr_metrics *reg = NULL;
  kcr_metric *m = NULL;
  assert_int_equal(KCR_OK, kcr_metrics_new(NULL, &reg, NULL));

  refused(kcr_metric_counter, reg, OPTS(.name = "1abc"), KCR_EINVAL,
          "metric name \"1abc\" is not a valid Prometheus metric name");
  refused(kcr_metric_counter, reg, OPTS(.name = "a-b"), KCR_EINVAL, "\"a-b\"");
  refused(kcr_metric_counter, reg, OPTS(.name = ""), KCR_EINVAL, "metric name \"\"");
  refused(kcr_metric_counter, reg, OPTS(.help = "no name"), KCR_EINVAL,
          "kcr_metric_counter: no name");
  refused(kcr_metric_counter, reg,
          OPTS(.name = "ok_total", .label_names = L("__reserved")), KCR_EINVAL,
          "metric ok_total: label name \"__reserved\" is reserved");
  refused(kcr_metric_gauge, reg, OPTS(.name = "ok", .label_names = L("a:b")), KCR_EINVAL,
          "metric ok: label name \"a:b\" is not a valid label name");
  refused(kcr_metric_counter, reg, OPTS(.name = "ok_total", .label_names = L("a", "")),
          KCR_EINVAL, "label name \"\" is not a valid label name");
  refused(kcr_metric_counter, reg, OPTS(.name = "ok_total", .label_names = L("a", "a")),
          KCR_EINVAL, "metric ok_total: label name \"a\" is repeated");
  refused(kcr_metric_histogram, reg,
          OPTS(.name = "ok_seconds", .label_names = L("le"), .bounds = b1, .nbounds = 2),
          KCR_EINVAL, "metric ok_seconds: label name \"le\" is reserved in a histogram");
  refused(kcr_metric_histogram, reg,
          OPTS(.name = "ok_seconds", .bounds = unsorted, .nbounds = 2), KCR_EINVAL,
          "histogram ok_seconds: bound 1 (1) is not above the one before it");
  refused(kcr_metric_histogram, reg,
          OPTS(.name = "ok_seconds", .bounds = same, .nbounds = 2), KCR_EINVAL,
          "bound 1 (1) is not above");
  refused(kcr_metric_histogram, reg,
          OPTS(.name = "ok_seconds", .bounds = nan_bound, .nbounds = 2), KCR_EINVAL,
          "histogram ok_seconds: bound 1 (nan) is NaN");
  refused(kcr_metric_histogram, reg, OPTS(.name = "ok_seconds", .nbounds = 2), KCR_EINVAL,
          "histogram ok_seconds: nbounds is 2 but no bounds");
  refused(kcr_metric_counter, reg, OPTS(.name = "ok_total", .bounds = b1, .nbounds = 2),
          KCR_EINVAL, "metric ok_total: a counter has no bounds (only histograms do)");
  refused(kcr_metric_gauge, reg, OPTS(.name = "ok", .nbounds = 1), KCR_EINVAL,
          "a gauge has no bounds");
  refused(kcr_metric_counter, NULL, OPTS(.name = "x_total"), KCR_EINVAL,
          "kcr_metric_counter: no registry");
  refused(kcr_metric_gauge, reg, NULL, KCR_EINVAL, "kcr_metric_gauge: no opts");
  assert_int_equal(KCR_EINVAL,
                   kcr_metric_histogram(reg, OPTS(.name = "ok_seconds"), NULL, NULL));
  /* None of them registered anything: the names are free. */
  assert_render(reg, "");
  assert_int_equal(KCR_OK, kcr_metric_gauge(reg, OPTS(.name = "ok_seconds"), &m, NULL));
  assert_int_equal(KCR_OK, kcr_metric_counter(reg, OPTS(.name = "ok_total"), &m, NULL));
  kcr_metrics_free(reg);
}

struct collect_state {
  kcr_metrics *reg;
  kcr_metric *depth;
  int calls;
  int depth_now;
};

static void collect_depth(void *ud)
{
  struct collect_state *cs = ud;
  cs->calls++;
  kcr_metric_set(cs->depth, L("ebd"), cs->depth_now);
}

static void collect_once(void *ud)
{
  struct collect_state *cs = ud;
  cs->calls++;
  kcr_metrics_off_collect(cs->reg, collect_once, ud); /* from inside: no wait */
  /* registering from a callback works too */
  kcr_metric_set(must(kcr_metric_gauge, cs->reg, OPTS(.name = "late", .help = "Late")),
                 NULL, 7);
}

static void collect_callbacks_run_on_render(void **state)
{
  kcr_metrics *reg = NULL;
  assert_int_equal(KCR_OK, kcr_metrics_new(NULL, &reg, NULL));
  struct collect_state cs = {
      reg,
      must(kcr_metric_gauge, reg,
           OPTS(.name = "workqueue_depth", .help = "Depth", .label_names = L("name"))),
      0, 4};
  struct collect_state once = {reg, NULL, 0, 0};

  assert_int_equal(KCR_OK, kcr_metrics_on_collect(reg, collect_depth, &cs));
  assert_int_equal(KCR_OK, kcr_metrics_on_collect(reg, collect_once, &once));
  assert_int_equal(KCR_EINVAL, kcr_metrics_on_collect(reg, NULL, &cs));
  assert_render(reg, "# HELP workqueue_depth Depth\n"
                     "# TYPE workqueue_depth gauge\n"
                     "workqueue_depth{name=\"ebd\"} 4\n"
                     "# HELP late Late\n"
                     "# TYPE late gauge\n"
                     "late 7\n");
  cs.depth_now = 9;
  assert_render(reg, "# HELP workqueue_depth Depth\n"
                     "# TYPE workqueue_depth gauge\n"
                     "workqueue_depth{name=\"ebd\"} 9\n"
                     "# HELP late Late\n"
                     "# TYPE late gauge\n"
                     "late 7\n");
  assert_int_equal(2, cs.calls);
  assert_int_equal(1, once.calls);
  kcr_metrics_off_collect(reg, collect_depth, &cs);
  cs.depth_now = 1;
  assert_render(reg, "# HELP workqueue_depth Depth\n"
                     "# TYPE workqueue_depth gauge\n"
                     "workqueue_depth{name=\"ebd\"} 9\n"
                     "# HELP late Late\n"
                     "# TYPE late gauge\n"
                     "late 7\n");
  assert_int_equal(2, cs.calls);
  kcr_metrics_off_collect(reg, collect_depth, &cs); /* absent: harmless */
  kcr_metrics_free(reg);
}

static void null_metric_and_bad_label_values_are_no_ops(void **state)
{
  kcr_metrics *reg = NULL;
  assert_int_equal(KCR_OK, kcr_metrics_new(NULL, &reg, NULL));
  kcr_metric *c = must(kcr_metric_counter, reg,
                       OPTS(.name = "c_total", .help = "C", .label_names = L("a", "b")));
  kcr_metric *g = must(kcr_metric_gauge, reg, OPTS(.name = "g", .help = "G"));
  struct kcr_buf out = KCR_BUF_INIT;

  kcr_metric_inc(NULL, L("x"), 1);
  kcr_metric_set(NULL, NULL, 1);
  kcr_metric_observe(NULL, NULL, 1);
  assert_true(0 == kcr_metric_value(NULL, NULL));
  assert_int_equal(0, kcr_metric_count(NULL, NULL));
  /* Missing values: nothing is created. */
  kcr_metric_inc(c, NULL, 1);
  kcr_metric_inc(c, (const char *const[]){"only-one", NULL}, 1);
  /* Calls that do not fit the type. */
  kcr_metric_observe(c, L("x", "y"), 1);
  kcr_metric_observe(g, NULL, 1);
  kcr_metric_inc(c, L("x", "y"), NAN);
  assert_render(reg, "# HELP g G\n"
                     "# TYPE g gauge\n"
                     "g 0\n");
  assert_int_equal(KCR_EINVAL, kcr_metrics_render(NULL, &out));
  assert_int_equal(KCR_EINVAL, kcr_metrics_render(reg, NULL));
  kcr_metrics_off_collect(NULL, NULL, NULL);
  kcr_metrics_free(NULL);
  kcr_metrics_free(reg);
}

static void render_appends_to_existing_text(void **state)
{
  kcr_metrics *reg = NULL;
  assert_int_equal(KCR_OK, kcr_metrics_new(NULL, &reg, NULL));
  struct kcr_buf out = KCR_BUF_INIT;

  kcr_metric_inc(must(kcr_metric_counter, reg, OPTS(.name = "n_total")), NULL, 3);
  kcr_buf_puts(&out, "# head\n");
  assert_int_equal(KCR_OK, kcr_metrics_render(reg, &out));
  assert_string_equal("# head\n# TYPE n_total counter\nn_total 3\n", kcr_buf_str(&out));
  kcr_buf_cleanup(&out);
  kcr_metrics_free(reg);
}

static void many_series_stay_distinct(void **state)
{
  kcr_metrics *reg = NULL;
  assert_int_equal(KCR_OK, kcr_metrics_new(NULL, &reg, NULL));
  kcr_metric *c =
      must(kcr_metric_counter, reg, OPTS(.name = "k_total", .label_names = L("a", "b")));
  char a[16], b[16];

  for(int i = 0; i < 1000; i++) {
    snprintf(a, sizeof(a), "%d", i);
    snprintf(b, sizeof(b), "%d", i % 7);
    kcr_metric_inc(c, L(a, b), i);
  }
  /* "1","23" and "12","3" must not collide into one series. */
  kcr_metric_inc(c, L("1", "23"), 1);
  kcr_metric_inc(c, L("12", "3"), 2);
  assert_true(1 == kcr_metric_value(c, L("1", "23")));
  assert_true(2 == kcr_metric_value(c, L("12", "3")));
  for(int i = 0; i < 1000; i++) {
    snprintf(a, sizeof(a), "%d", i);
    snprintf(b, sizeof(b), "%d", i % 7);
    assert_true((double)i == kcr_metric_value(c, L(a, b)));
  }
  kcr_metrics_free(reg);
}

/* A family keeps at most max_series series: label values chosen in the
 * cluster cannot grow the registry without end. Updates of existing series
 * go on; new ones are dropped and counted per family. */
static void a_family_keeps_at_most_max_series(void **state)
{
  kcr_metrics *reg = NULL;
  assert_int_equal(
      KCR_OK, kcr_metrics_new(&(struct kcr_metrics_opts){.max_series = 2}, &reg, NULL));
  kcr_metric *c = must(kcr_metric_counter, reg,
                       OPTS(.name = "objects_total", .label_names = L("name")));
  kcr_metric *h = must(kcr_metric_histogram, reg,
                       OPTS(.name = "seconds", .label_names = L("name"),
                            .bounds = (double[]){1}, .nbounds = 1));
  kcr_metric *one = must(kcr_metric_gauge, reg, OPTS(.name = "one"));

  kcr_metric_inc(c, L("a"), 1);
  kcr_metric_inc(c, L("b"), 1);
  kcr_metric_inc(c, L("c"), 1); /* a third series: dropped */
  kcr_metric_inc(c, L("d"), 1); /* and a fourth */
  kcr_metric_inc(c, L("a"), 1); /* existing series still count */
  kcr_metric_observe(h, L("x"), 0.5);
  kcr_metric_observe(h, L("y"), 0.5);
  kcr_metric_observe(h, L("z"), 0.5);
  kcr_metric_set(one, NULL, 7);
  assert_true(2 == kcr_metric_value(c, L("a")));
  assert_true(0 == kcr_metric_value(c, L("c")));
  assert_int_equal(0, kcr_metric_count(h, L("z")));
  assert_render(reg, "# HELP kcr_metrics_series_dropped_total Metric updates dropped "
                     "because their family had reached its series limit\n"
                     "# TYPE kcr_metrics_series_dropped_total counter\n"
                     "kcr_metrics_series_dropped_total{metric=\"objects_total\"} 2\n"
                     "kcr_metrics_series_dropped_total{metric=\"seconds\"} 1\n"
                     "# TYPE objects_total counter\n"
                     "objects_total{name=\"a\"} 2\n"
                     "objects_total{name=\"b\"} 1\n"
                     "# TYPE seconds histogram\n"
                     "seconds_bucket{name=\"x\",le=\"1\"} 1\n"
                     "seconds_bucket{name=\"x\",le=\"+Inf\"} 1\n"
                     "seconds_sum{name=\"x\"} 0.5\n"
                     "seconds_count{name=\"x\"} 1\n"
                     "seconds_bucket{name=\"y\",le=\"1\"} 1\n"
                     "seconds_bucket{name=\"y\",le=\"+Inf\"} 1\n"
                     "seconds_sum{name=\"y\"} 0.5\n"
                     "seconds_count{name=\"y\"} 1\n"
                     "# TYPE one gauge\n"
                     "one 7\n");
  kcr_metrics_free(reg);
}

/* The default limit is KCR_METRICS_MAX_SERIES; SIZE_MAX lifts it. */
static void the_series_limit_defaults_and_can_be_lifted(void **state)
{
  kcr_metrics *def = NULL, *none = NULL;
  char v[16];

  assert_int_equal(KCR_OK, kcr_metrics_new(NULL, &def, NULL));
  assert_int_equal(
      KCR_OK,
      kcr_metrics_new(&(struct kcr_metrics_opts){.max_series = SIZE_MAX}, &none, NULL));
  kcr_metric *d =
      must(kcr_metric_counter, def, OPTS(.name = "d_total", .label_names = L("k")));
  kcr_metric *n =
      must(kcr_metric_counter, none, OPTS(.name = "n_total", .label_names = L("k")));
  for(int i = 0; i <= KCR_METRICS_MAX_SERIES; i++) {
    snprintf(v, sizeof(v), "%d", i);
    kcr_metric_inc(d, L(v), 1);
    kcr_metric_inc(n, L(v), 1);
  }
  snprintf(v, sizeof(v), "%d", KCR_METRICS_MAX_SERIES - 1);
  assert_true(1 == kcr_metric_value(d, L(v)));
  snprintf(v, sizeof(v), "%d", KCR_METRICS_MAX_SERIES);
  assert_true(0 == kcr_metric_value(d, L(v)));
  assert_true(1 == kcr_metric_value(n, L(v)));
  kcr_metrics_free(def);
  kcr_metrics_free(none);
}

/* Debug builds check the registry's lifetime rule (KCR_ASSERT): a registry
 * freed from its own collect callback, which the render is still running,
 * aborts instead of being used after it was freed. */
static void free_from_collect(void *ud) { kcr_metrics_free(ud); }

static void registry_freed_from_its_collect_callback(void *ud)
{
  struct kcr_buf out = KCR_BUF_INIT;
  kcr_metrics *reg;

  if(kcr_metrics_new(NULL, &reg, NULL) ||
     kcr_metrics_on_collect(reg, free_from_collect, reg))
    return;
  kcr_metrics_render(reg, &out);
}

static void broken_invariants_abort_debug_builds(void **state)
{
  TABORT_SKIP_IN_RELEASE();
  assert_true(tabort(registry_freed_from_its_collect_callback, NULL));
}

/* The registry is reference-counted: the families live until the last
 * reference is dropped, whoever made the registry. */
static void the_last_reference_frees_the_registry(void **state)
{
  kcr_metrics *reg, *again;
  kcr_metric *c;
  struct kcr_buf out = KCR_BUF_INIT;

  assert_int_equal(KCR_OK, kcr_metrics_new(NULL, &reg, NULL));
  assert_null(kcr_metrics_ref(NULL));
  again = kcr_metrics_ref(reg);
  assert_ptr_equal(reg, again);
  assert_int_equal(
      KCR_OK,
      kcr_metric_counter(reg, &(struct kcr_metric_opts){.name = "kept_total"}, &c, NULL));
  kcr_metrics_free(reg); /* the maker's reference */
  kcr_metric_inc(c, NULL, 2);
  assert_int_equal(KCR_OK, kcr_metrics_render(again, &out));
  assert_non_null(strstr(out.ptr, "kept_total 2\n"));
  kcr_buf_cleanup(&out);
  kcr_metrics_free(again); /* the last: frees (ASan/LSan see a leak otherwise) */
  kcr_metrics_free(NULL);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(counter_with_labels_renders_exactly),
      cmocka_unit_test(gauge_renders_exactly),
      cmocka_unit_test(histogram_renders_cumulative_buckets),
      cmocka_unit_test(histogram_without_labels_and_workqueue_buckets),
      cmocka_unit_test(bucket_sets_match_upstream),
      cmocka_unit_test(label_values_and_help_are_escaped),
      cmocka_unit_test(concurrent_increments_sum_exactly),
      cmocka_unit_test(series_made_while_others_update_are_all_kept),
      cmocka_unit_test(registering_twice_returns_the_same_family),
      cmocka_unit_test(a_name_taken_by_another_family_is_eexist),
      cmocka_unit_test(invalid_names_and_bounds_are_einval),
      cmocka_unit_test(collect_callbacks_run_on_render),
      cmocka_unit_test(null_metric_and_bad_label_values_are_no_ops),
      cmocka_unit_test(render_appends_to_existing_text),
      cmocka_unit_test(many_series_stay_distinct),
      cmocka_unit_test(a_family_keeps_at_most_max_series),
      cmocka_unit_test(the_series_limit_defaults_and_can_be_lifted),
      cmocka_unit_test(broken_invariants_abort_debug_builds),
      cmocka_unit_test(the_last_reference_frees_the_registry),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
