/* kcr/metrics.h - Prometheus metrics: counters, gauges, histograms with
 * labels, a registry, and the text exposition format (version 0.0.4).
 *
 *   kcr_metric *adds;
 *   rc = kcr_metric_counter(reg, &(struct kcr_metric_opts){
 *            .name = "workqueue_adds_total",
 *            .help = "Total number of adds handled by workqueue",
 *            .label_names = (const char *[]){"name", NULL}}, &adds, ei);
 *   kcr_metric_inc(adds, (const char *[]){"ebd", NULL}, 1);
 *
 * A metric is a family: one name, one help text, a fixed list of label
 * names; each distinct tuple of label values is a series, created on first
 * use. Updates of an existing series take no lock (atomics); creating a
 * series takes the family's mutex. kcr_metrics_render() writes every family
 * in registration order, series in creation order.
 *
 * Cardinality is bounded: a family keeps at most max_series series (see
 * kcr_metrics_opts); an update that would make one more is dropped and
 * counted in kcr_metrics_series_dropped_total{metric="<family>"}, and a
 * warning is logged once per family. Label values that come from the
 * cluster (object names, say) therefore cannot grow the registry, or the
 * scrape, without end.
 *
 * Thread safety: every function may be called from any thread.
 * Ownership: the registry is reference-counted: kcr_metrics_new gives the
 * first reference, kcr_metrics_ref takes another, kcr_metrics_free drops
 * one and the last frees it. Every libkcr object given a registry in its
 * options (informer, controller, queue, elector, recorder, status writer,
 * server) takes its own reference and drops it when freed, so those
 * objects and the registry's maker (a manager) may be freed in any order.
 * Families belong to their registry and live as long as it does; label
 * arrays are borrowed for the call only. */
#ifndef KCR_METRICS_H
#define KCR_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "api.h"
#include "buf.h"
#include "err.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The Content-Type of what kcr_metrics_render() writes. */
#define KCR_METRICS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

typedef struct kcr_metrics kcr_metrics;
typedef struct kcr_metric kcr_metric;

struct kcr_metrics_opts {
  /* Most series one family keeps: 0 means KCR_METRICS_MAX_SERIES, SIZE_MAX
   * no limit. (kcr_metrics_series_dropped_total itself has no limit: it has
   * at most one series per family.) */
  size_t max_series;
};
#define KCR_METRICS_MAX_SERIES 10000

/* A new registry in *out (NULL on error); opts may be NULL. It holds one
 * family from the start, kcr_metrics_series_dropped_total, which renders
 * nothing until a series is dropped.
 * Errors: KCR_ENOMEM. */
KCR_API kcr_err kcr_metrics_new(const struct kcr_metrics_opts *opts, kcr_metrics **out,
                                struct kcr_errinfo *ei);
/* Takes another reference to reg and returns reg (NULL: returns NULL).
 * Thread safety: any thread. */
KCR_API kcr_metrics *kcr_metrics_ref(kcr_metrics *reg);
/* Drops a reference (NULL: no-op); the last one frees the registry and
 * every family in it: no other call on reg or its families may be running
 * then or follow. Not from one of reg's own collect callbacks. Thread
 * safety: any thread. */
KCR_API void kcr_metrics_free(kcr_metrics *reg);

/* A family: what kcr_metric_counter, _gauge and _histogram register. Read
 * during the call only (strings and bounds are copied). */
struct kcr_metric_opts {
  const char *name; /* required: a Prometheus metric name, [a-zA-Z_:][a-zA-Z0-9_:]* */
  const char *help; /* NULL: none */
  /* NULL-terminated Prometheus label names ([a-zA-Z_][a-zA-Z0-9_]*, not
   * starting with "__", no repeats, not "le" in a histogram); NULL: none */
  const char *const *label_names;
  /* Histograms only (a counter or gauge with bounds is KCR_EINVAL): nbounds
   * upper bounds, strictly ascending and not NaN; +Inf is implicit and a
   * trailing +Inf is dropped; nbounds 0: the +Inf bucket alone. */
  const double *bounds;
  size_t nbounds;
};

/* Registers the family opts names in reg and puts it in *out, borrowed: it
 * belongs to reg and lives until kcr_metrics_free(). A name registered
 * before gives the existing family if its type and label names (and, for a
 * histogram, its bounds) are the same; the first help text wins. A family
 * without labels has its one series from the start, so it renders as 0
 * before any update; a family with labels renders nothing until its first
 * series exists.
 * Errors: KCR_EINVAL (no reg, opts or out; an invalid metric or label name
 * or invalid bounds, see kcr_metric_opts; ei->message names the metric and
 * what is wrong), KCR_EEXIST (the name is registered with another type,
 * other label names or other bounds; ei->message says which), KCR_ENOMEM.
 * On error *out is NULL (when out is set) and reg is unchanged.
 * Thread safety: any thread. */
KCR_API kcr_err kcr_metric_counter(kcr_metrics *reg, const struct kcr_metric_opts *opts,
                                   kcr_metric **out, struct kcr_errinfo *ei);
KCR_API kcr_err kcr_metric_gauge(kcr_metrics *reg, const struct kcr_metric_opts *opts,
                                 kcr_metric **out, struct kcr_errinfo *ei);
KCR_API kcr_err kcr_metric_histogram(kcr_metrics *reg, const struct kcr_metric_opts *opts,
                                     kcr_metric **out, struct kcr_errinfo *ei);

/* label_values: as many as the family's label names (NULL for none); exactly
 * that many are read, so a trailing NULL is allowed but not needed. A NULL
 * array (when labels are expected) or a NULL value makes the call a no-op.
 * Calls with a NULL metric are no-ops, so optional metrics need no checks.
 * inc: counters and gauges; a counter ignores a negative or NaN delta.
 * set: gauges, and counters that mirror a count kept elsewhere (collect).
 * observe: histograms only. A mismatching call is a no-op. If a new series
 * cannot be allocated, or the family is at its max_series, the update is
 * dropped. */
KCR_API void kcr_metric_inc(kcr_metric *m, const char *const *label_values, double delta);
KCR_API void kcr_metric_set(kcr_metric *m, const char *const *label_values, double value);
KCR_API void kcr_metric_observe(kcr_metric *m, const char *const *label_values,
                                double value);
/* Current value of a counter/gauge series, or the sum of a histogram series
 * (0 if absent; never creates the series); for tests. */
KCR_API double kcr_metric_value(kcr_metric *m, const char *const *label_values);
/* Number of observations of a histogram series (0 if absent or not a
 * histogram); for tests. */
KCR_API uint64_t kcr_metric_count(kcr_metric *m, const char *const *label_values);

/* Called at the start of every render, to refresh gauges computed on demand
 * (queue depth, store bytes). Callbacks run one render at a time, in
 * registration order, on the rendering thread; they may update and register
 * metrics and call kcr_metrics_off_collect(), but must not render.
 * on_collect: KCR_EINVAL without reg or fn, KCR_ENOMEM.
 * off_collect removes the first matching (fn, ud) pair; once it returns, fn
 * is not running and will not be called for ud again (it waits for a render
 * in progress, except when called from inside a callback), so ud may be
 * freed. */
typedef void (*kcr_metrics_collect_fn)(void *ud);
KCR_API kcr_err kcr_metrics_on_collect(kcr_metrics *reg, kcr_metrics_collect_fn fn,
                                       void *ud);
KCR_API void kcr_metrics_off_collect(kcr_metrics *reg, kcr_metrics_collect_fn fn,
                                     void *ud);

/* Runs the collect callbacks, then appends the text exposition of every
 * family to out. Returns KCR_OK, KCR_EINVAL without reg or out, KCR_ENOMEM,
 * or out's earlier error (kcr_buf_err). On error the contents of out are
 * left as they were; an append failure stays recorded in out, as for every
 * append (kcr/buf.h). Values are read without stopping writers: a histogram's
 * _count always equals its +Inf bucket, its _sum may be one observation
 * ahead or behind. */
KCR_API kcr_err kcr_metrics_render(kcr_metrics *reg, struct kcr_buf *out);

/* Common bucket sets. */
KCR_API extern const double kcr_buckets_seconds[]; /* 0.005 .. 60 s */
KCR_API extern const size_t kcr_buckets_seconds_n;
KCR_API extern const double
    kcr_buckets_workqueue[]; /* 1e-8 .. 1e3 s, x10 (as client-go) */
KCR_API extern const size_t kcr_buckets_workqueue_n;

#ifdef __cplusplus
}
#endif

#endif
