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

#define L(...) ((const char *const[]){__VA_ARGS__, NULL})

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
  kcr_metric *c = kcr_metric_counter(reg, "workqueue_adds_total",
                                     "Total number of adds handled by workqueue",
                                     L("name", "controller"));
  assert_non_null(c);
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
      kcr_metric_gauge(reg, "workqueue_depth", "Current depth of workqueue", L("name"));
  kcr_metric *up = kcr_metric_gauge(reg, "up", "", NULL);
  kcr_metric *odd = kcr_metric_gauge(reg, "odd_values", "Values", L("k"));

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
  kcr_metric *h = kcr_metric_histogram(reg, "reconcile_time_seconds",
                                       "Length of time per reconciliation",
                                       L("controller"), bounds, 4);
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
  kcr_metric *h = kcr_metric_histogram(reg, "wait_seconds", "Wait", NULL,
                                       kcr_buckets_workqueue, kcr_buckets_workqueue_n);
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
      kcr_metric_counter(reg, "escapes_total", "a \\ and a\nnewline \"kept\"", L("v"));
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
    r[i].c = kcr_metric_counter(reg, "hits_total", "Hits", L("who"));
    r[i].h = kcr_metric_histogram(reg, "lat_seconds", "Latency", L("who"), bounds, 1);
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
    r[i].c = kcr_metric_counter(reg, "grow_total", "", L("who"));
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
  static const double b1[] = {1, 2}, b2[] = {1, 3};
  static const double inf_tail[] = {1, 2, INFINITY}, unsorted[] = {2, 1};
  kcr_metrics *reg = NULL;
  assert_int_equal(KCR_OK, kcr_metrics_new(NULL, &reg, NULL));
  kcr_metric *c = kcr_metric_counter(reg, "x_total", "X", L("a"));
  kcr_metric *h = kcr_metric_histogram(reg, "h_seconds", "H", NULL, b1, 2);

  assert_non_null(c);
  assert_ptr_equal(c, kcr_metric_counter(reg, "x_total", "other help", L("a")));
  assert_null(kcr_metric_gauge(reg, "x_total", "X", L("a")));   /* type */
  assert_null(kcr_metric_counter(reg, "x_total", "X", L("b"))); /* labels */
  assert_null(kcr_metric_counter(reg, "x_total", "X", NULL));
  assert_ptr_equal(h, kcr_metric_histogram(reg, "h_seconds", "H", NULL, b1, 2));
  assert_ptr_equal(h, kcr_metric_histogram(reg, "h_seconds", "H", NULL, inf_tail, 3));
  assert_null(kcr_metric_histogram(reg, "h_seconds", "H", NULL, b2, 2));
  /* Names and bounds Prometheus would refuse. */
  assert_null(kcr_metric_counter(reg, "1abc", "", NULL));
  assert_null(kcr_metric_counter(reg, "a-b", "", NULL));
  assert_null(kcr_metric_counter(reg, "", "", NULL));
  assert_null(kcr_metric_counter(reg, NULL, "", NULL));
  assert_null(kcr_metric_counter(reg, "ok_total", "", L("__reserved")));
  assert_null(kcr_metric_counter(reg, "ok_total", "", L("a:b")));
  assert_null(kcr_metric_counter(reg, "ok_total", "", L("a", "a")));
  assert_null(kcr_metric_histogram(reg, "ok_seconds", "", L("le"), b1, 2));
  assert_null(kcr_metric_histogram(reg, "ok_seconds", "", NULL, unsorted, 2));
  assert_null(kcr_metric_histogram(reg, "ok_seconds", "", NULL, NULL, 2));
  assert_non_null(kcr_metric_gauge(reg, "ns:ok_metric", "", L("_a1")));
  assert_null(kcr_metric_counter(NULL, "x_total", "X", NULL));
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
  kcr_metric_set(kcr_metric_gauge(cs->reg, "late", "Late", NULL), NULL, 7);
}

static void collect_callbacks_run_on_render(void **state)
{
  kcr_metrics *reg = NULL;
  assert_int_equal(KCR_OK, kcr_metrics_new(NULL, &reg, NULL));
  struct collect_state cs = {
      reg, kcr_metric_gauge(reg, "workqueue_depth", "Depth", L("name")), 0, 4};
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
  kcr_metric *c = kcr_metric_counter(reg, "c_total", "C", L("a", "b"));
  kcr_metric *g = kcr_metric_gauge(reg, "g", "G", NULL);
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

  kcr_metric_inc(kcr_metric_counter(reg, "n_total", "", NULL), NULL, 3);
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
  kcr_metric *c = kcr_metric_counter(reg, "k_total", "", L("a", "b"));
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
  kcr_metric *c = kcr_metric_counter(reg, "objects_total", "", L("name"));
  kcr_metric *h = kcr_metric_histogram(reg, "seconds", "", L("name"), (double[]){1}, 1);
  kcr_metric *one = kcr_metric_gauge(reg, "one", "", NULL);

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
  kcr_metric *d = kcr_metric_counter(def, "d_total", "", L("k"));
  kcr_metric *n = kcr_metric_counter(none, "n_total", "", L("k"));
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
      cmocka_unit_test(collect_callbacks_run_on_render),
      cmocka_unit_test(null_metric_and_bad_label_values_are_no_ops),
      cmocka_unit_test(render_appends_to_existing_text),
      cmocka_unit_test(many_series_stay_distinct),
      cmocka_unit_test(a_family_keeps_at_most_max_series),
      cmocka_unit_test(the_series_limit_defaults_and_can_be_lifted),
      cmocka_unit_test(broken_invariants_abort_debug_builds),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
