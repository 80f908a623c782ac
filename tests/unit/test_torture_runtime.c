/* Allocation-failure torture of the work queue and the metrics registry
 * (see tfail.h): every operation either applies completely or leaves the
 * structure as it was (a metric update that cannot make its series is
 * dropped, as documented), and nothing leaks. The store has its own
 * executable (test_torture_store.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kcr.h"
#include "tfail.h"

static bool str_eq(const char *a, const char *b) { return a && b && !strcmp(a, b); }

/* ---- kcr_queue ------------------------------------------------------------------ */

static bool queue_ops(void *ud)
{
  kcr_metrics *reg = NULL;
  kcr_queue *q = NULL;
  char *key = NULL;
  bool ok = true, raised = false, first = true;
  kcr_err rc;

  if(kcr_metrics_new(NULL, &reg, NULL))
    goto out; /* out of memory */
  rc = kcr_queue_new(
      &(struct kcr_queue_opts){
          .name = "torture", .metrics = reg, .qps = 10, .burst = 100},
      &q, NULL);
  if(rc) { /* out of memory, as documented */
    ok = rc == KCR_ENOMEM && !q;
    goto out;
  }
  /* Each add is applied or refused with ENOMEM, leaving the queue as it
   * was; count what got in. */
  {
    const char *keys[] = {"ns/a", "ns/b", "ns/a" /* dedup */, "ns/c"};
    size_t in = 0;
    for(int i = 0; i < 4; i++) {
      size_t len = kcr_queue_len(q);
      rc = kcr_queue_add(q, keys[i]);
      if(rc) {
        ok = rc == KCR_ENOMEM && kcr_queue_len(q) == len;
        goto drain;
      }
      in = kcr_queue_len(q);
    }
    ok = in == 3;
  }
  /* get: a key (FIFO), or ENOMEM with the key left queued. */
  rc = kcr_queue_take(q, 0, &key);
  if(rc) {
    ok = ok && rc == KCR_ENOMEM && !key && kcr_queue_len(q) == 3;
    goto drain;
  }
  ok = ok && str_eq(key, "ns/a") && kcr_queue_len(q) == 2;
  /* Added while processing: dirty, queued again by done. */
  rc = kcr_queue_add(q, "ns/a");
  ok = ok && (!rc || rc == KCR_ENOMEM) && kcr_queue_len(q) == 2;
  rc = kcr_queue_add_rate_limited(q, key);
  ok = ok && (!rc || rc == KCR_ENOMEM);
  ok = ok && kcr_queue_num_requeues(q, key) == (rc ? 0 : 1);
  kcr_queue_forget(q, key);
  ok = ok && kcr_queue_num_requeues(q, key) == 0;
  rc = kcr_queue_add_after(q, "ns/later", 60000);
  ok = ok && (!rc || rc == KCR_ENOMEM) && kcr_queue_len(q) == 2;
  rc = kcr_queue_add_after(q, "ns/now", 0); /* now: queued at once */
  ok = ok && (rc ? rc == KCR_ENOMEM && kcr_queue_len(q) == 2 : kcr_queue_len(q) == 3);
  ok = ok && kcr_queue_done(q, key) == KCR_OK;
  /* A new priority needs a level: raising a queued key, or parking one with
   * it, applies or fails leaving the queue as it was. */
  {
    size_t len = kcr_queue_len(q);
    rc = kcr_queue_add_with(q, "ns/c", &(struct kcr_queue_add_opts){.priority = 7});
    ok = ok && (!rc || rc == KCR_ENOMEM) && kcr_queue_len(q) == len;
    raised = !rc;
    rc = kcr_queue_add_with(
        q, "ns/soon", &(struct kcr_queue_add_opts){.priority = -3, .after_ms = 60000});
    ok = ok && (!rc || rc == KCR_ENOMEM) && kcr_queue_len(q) == len;
  }
drain:
  free(key);
  key = NULL;
  kcr_queue_shutdown(q);
  /* Everything queued comes out, then ECANCELED (ENOMEM: try again). */
  for(int i = 0; i < 100; i++) {
    rc = kcr_queue_take(q, 0, &key);
    if(rc == KCR_ECANCELED || rc == KCR_ETIMEDOUT)
      break;
    if(!rc) {
      if(first && raised) /* the raised key comes out first */
        ok = ok && str_eq(key, "ns/c");
      first = false;
      kcr_queue_done(q, key);
      free(key);
      key = NULL;
    }
  }
  kcr_queue_free(q);
out:
  kcr_metrics_free(reg);
  return ok;
}

static void queue_operations_apply_or_fail_without_losing_keys(void **state)
{
  tfail_torture("kcr_queue_* (new, add, take, done, add_after, rate_limited, forget, "
                "add_with)",
                queue_ops, NULL);
}

/* ---- kcr_metrics ----------------------------------------------------------------- */

static void collect_depth(void *ud) { kcr_metric_set(ud, NULL, 42); }

struct metrics_case {
  kcr_metrics *reg;
  kcr_metric *c, *g, *h, *cg;
};

/* Registers a family: KCR_OK with it, or KCR_ENOMEM with *m NULL and the
 * registry as it was (a later try makes it); false on any other outcome. */
static bool family(kcr_err (*add)(kcr_metrics *, const struct kcr_metric_opts *,
                                  kcr_metric **, struct kcr_errinfo *),
                   kcr_metrics *reg, const struct kcr_metric_opts *o, kcr_metric **m)
{
  kcr_err rc = add(reg, o, m, NULL);
  return rc ? rc == KCR_ENOMEM && !*m : *m != NULL;
}

/* Families are made or refused with KCR_ENOMEM; a series that cannot be
 * made drops the update (documented), so each series holds its full value
 * or does not exist. */
static bool metrics_build(void *ud)
{
  struct metrics_case *mc = ud;
  kcr_metrics *reg = NULL;
  (void)kcr_metrics_new(NULL, &reg, NULL); /* NULL when out of memory */
  kcr_metric *c = NULL, *g = NULL, *h = NULL, *cg = NULL, *again;
  bool ok = true;

  mc->reg = reg;
  if(!reg)
    return true;
  ok = ok && family(kcr_metric_counter, reg,
                    &(struct kcr_metric_opts){
                        .name = "reconcile_total",
                        .help = "Reconciles.\nBy result.",
                        .label_names = (const char *[]){"controller", "result", NULL}},
                    &c);
  ok = ok &&
       family(kcr_metric_gauge, reg,
              &(struct kcr_metric_opts){.name = "depth", .help = "Queue depth."}, &g);
  ok = ok && family(kcr_metric_histogram, reg,
                    &(struct kcr_metric_opts){.name = "reconcile_seconds",
                                              .help = "Time \\ spent.",
                                              .label_names =
                                                  (const char *[]){"controller", NULL},
                                              .bounds = kcr_buckets_seconds,
                                              .nbounds = kcr_buckets_seconds_n},
                    &h);
  ok = ok && family(kcr_metric_gauge, reg,
                    &(struct kcr_metric_opts){.name = "collected",
                                              .help = "Set by a collector."},
                    &cg);
  if(!ok)
    return false;
  /* The same family again: the existing one (never a second, and nothing
   * to allocate); another type or other labels: KCR_EEXIST, saying so
   * unless the message itself ran out of memory. */
  if(c) {
    struct kcr_errinfo ei = KCR_ERRINFO_INIT;
    kcr_err rc;
    ok = family(kcr_metric_counter, reg,
                &(struct kcr_metric_opts){
                    .name = "reconcile_total",
                    .help = "x",
                    .label_names = (const char *[]){"controller", "result", NULL}},
                &again) &&
         again == c;
    rc = kcr_metric_gauge(reg, &(struct kcr_metric_opts){.name = "reconcile_total"},
                          &again, &ei);
    ok = ok && rc == KCR_EEXIST && !again &&
         (tfail_fired() ||
          (ei.message && strstr(ei.message, "already registered as a counter")));
    rc = kcr_metric_counter(
        reg,
        &(struct kcr_metric_opts){.name = "reconcile_total",
                                  .label_names = (const char *[]){"controller", NULL}},
        &again, &ei);
    ok = ok && rc == KCR_EEXIST && !again &&
         (tfail_fired() || (ei.message && strstr(ei.message, "(controller,result)")));
    kcr_errinfo_cleanup(&ei);
  }
  for(int i = 0; i < 3; i++) {
    kcr_metric_inc(c, (const char *[]){"ebd", "success"}, 1);
    kcr_metric_inc(c, (const char *[]){"ebd", i == 2 ? "error" : "success"}, 1);
    kcr_metric_observe(h, (const char *[]){"ebd \"quoted\""}, 0.02 * (i + 1));
  }
  kcr_metric_set(g, NULL, 7);
  if(cg && kcr_metrics_on_collect(reg, collect_depth, cg) && !tfail_fired())
    ok = false;
  /* Values: complete or absent. */
  {
    double s = kcr_metric_value(c, (const char *[]){"ebd", "success"});
    double e = kcr_metric_value(c, (const char *[]){"ebd", "error"});
    uint64_t n = kcr_metric_count(h, (const char *[]){"ebd \"quoted\""});
    /* At most the update that would have made a series is dropped. */
    ok = ok && (!c || ((s == 5 || s == 4) && (e == 1 || e == 0)));
    ok = ok && (!h || n == 3 || n == 2) && (!g || kcr_metric_value(g, NULL) == 7);
  }
  mc->c = c;
  mc->g = g;
  mc->h = h;
  mc->cg = cg;
  return ok;
}

static bool metrics_families(void *ud)
{
  struct metrics_case mc = {0};
  bool ok = metrics_build(&mc);
  kcr_metrics_free(mc.reg);
  return ok;
}

static void metric_families_and_series_are_whole_or_absent(void **state)
{
  tfail_torture("kcr_metrics_new + kcr_metric_* (families, series, collect)",
                metrics_families, NULL);
}

/* Render: the exposition of the registry as it is, or ENOMEM with the
 * output buffer unchanged. */
static bool metrics_render(void *ud)
{
  struct metrics_case *mc = ud;
  struct kcr_buf want = KCR_BUF_INIT, out = KCR_BUF_INIT;
  kcr_err rc;
  bool ok;

  tfail_exempt(true);
  kcr_buf_puts(&out, "# previous content\n");
  assert_int_equal(KCR_OK, kcr_metrics_render(mc->reg, &want));
  tfail_exempt(false);
  rc = kcr_metrics_render(mc->reg, &out);
  ok = rc ? rc == KCR_ENOMEM && str_eq(kcr_buf_str(&out), "# previous content\n")
          : !strncmp(kcr_buf_str(&out), "# previous content\n", 19) &&
                str_eq(kcr_buf_str(&out) + 19, kcr_buf_str(&want));
  kcr_buf_cleanup(&want);
  kcr_buf_cleanup(&out);
  return ok;
}

static void metrics_render_is_whole_or_leaves_the_buffer_alone(void **state)
{
  struct metrics_case mc = {0};
  struct kcr_buf out = KCR_BUF_INIT;
  bool ok;

  assert_true(metrics_build(&mc));
  assert_non_null(mc.c);
  assert_non_null(mc.h);
  ok = tfail_torture_try("kcr_metrics_render", metrics_render, &mc, 0);
  /* And the text itself, once. */
  assert_int_equal(KCR_OK, kcr_metrics_render(mc.reg, &out));
  kcr_metrics_free(mc.reg);
  assert_non_null(strstr(kcr_buf_str(&out),
                         "reconcile_total{controller=\"ebd\",result=\"success\"} 5\n"));
  assert_non_null(
      strstr(kcr_buf_str(&out), "# HELP reconcile_total Reconciles.\\nBy result."));
  assert_non_null(
      strstr(kcr_buf_str(&out),
             "reconcile_seconds_count{controller=\"ebd \\\"quoted\\\"\"} 3\n"));
  assert_non_null(strstr(kcr_buf_str(&out), "collected 42\n"));
  kcr_buf_cleanup(&out);
  assert_true(ok);
}

int main(void)
{
  tfail_init();
  kcr_log_set_fd(open("/dev/null", 1));
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(queue_operations_apply_or_fail_without_losing_keys),
      cmocka_unit_test(metric_families_and_series_are_whole_or_absent),
      cmocka_unit_test(metrics_render_is_whole_or_leaves_the_buffer_alone),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
