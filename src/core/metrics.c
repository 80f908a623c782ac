/* DESIGN: the Prometheus metrics registry and its text exposition (0.0.4).
 *
 * Shape: a registry holds families (counter, gauge, histogram) in
 * registration order. A family holds its series twice: in a creation-order
 * list (for render and free) and in a hash table (kcr/htab.h) keyed by the
 * label values under the process's SipHash key (for the hot path): label
 * values can come from names users choose.
 *
 * Hot path: kcr_metric_inc/set/observe on an existing series take the
 * family's lock shared, hash the values, walk the chain comparing strings
 * and let go; the update itself is an atomic on the series, which is never
 * removed before kcr_metrics_free(), so it needs no lock. Values are
 * _Atomic uint64_t: doubles are stored as their bit patterns, set is a
 * store, add is a CAS loop; histogram buckets are plain atomic counters.
 *
 * Series creation: takes the family's lock exclusive, looks again, makes the
 * series completely and links it into the table and the list.
 *
 * Registration (kcr_metric_counter/_gauge/_histogram, one signature and
 * one struct kcr_metric_opts): names, labels and bounds are checked first
 * (KCR_EINVAL with a message naming the metric), then under reg->mu the
 * name is looked up: the same shape gives the existing family, another
 * shape KCR_EEXIST (as a taken name is for healthz checks and store
 * indexes), no family a new one, made whole before it is linked in.
 *
 * Cardinality: a family creates at most max_series series (under its
 * mutex, like every creation); past that an update is dropped and counted
 * in the registry's own kcr_metrics_series_dropped_total{metric}, a family
 * without a limit (its series are bounded by the number of families).
 *
 * Histograms keep per-bucket (not cumulative) counts, nbounds + 1 of them,
 * the last being +Inf. Render accumulates them and prints _count as the +Inf
 * total, so count and +Inf always agree even while writers run; only _sum
 * may be one observation off.
 *
 * Collect callbacks run at the start of render under collect_mu, one render
 * at a time, without reg->mu held, so they may register families, update
 * values and unregister themselves. off_collect waits on collect_mu (unless
 * called from a callback on the rendering thread, known by a thread-local),
 * so after it returns the callback's user data may be freed.
 *
 * Numbers: integers below 1e15 print as integers ("17"); other finite values
 * print as the shortest of %.15g/%.16g/%.17g that reads back exactly (what
 * Go's strconv 'g', -1 does, bar exponent thresholds); NaN, +Inf, -Inf as
 * Prometheus spells them.
 *
 * Invariants: a series in the table is fully initialised and immutable but
 * for its atomics; family->first/tail and the table only grow, under
 * family->lock held exclusive; reg->first/tail and the collector array only
 * change under reg->mu.
 *
 * Lifetime: the registry is reference-counted (kcr_metrics_ref, and
 * kcr_metrics_free drops one): every object given a registry - informer,
 * controller, queue, elector, recorder, status writer, server - holds a
 * reference until it is freed, so they may be freed in any order with the
 * code that made the registry (a manager).
 *
 * Lock order: reg->collect_mu -> reg->mu -> family->lock. Updates take
 * family->lock alone (shared; creation exclusive). */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/assert-int.h"
#include "core/hash-int.h"
#include "core/htab-int.h"
#include "core/metrics-int.h"
#include "kcr/htab.h"
#include "kcr/log.h"
#include "kcr/metrics.h"

enum kind { KIND_COUNTER, KIND_GAUGE, KIND_HISTOGRAM };
static const char *const kind_names[] = {"counter", "gauge", "histogram"};

struct series {
  struct kcr_hnode hn;      /* in family->series, under hash_values() */
  struct series *next;      /* creation order */
  _Atomic uint64_t val;     /* counter/gauge value or histogram sum (bits) */
  _Atomic uint64_t *counts; /* histogram: nbounds + 1 per-bucket counts */
  char *values[];           /* nlabels owned strings */
};

struct kcr_metric {
  struct kcr_metric *next; /* registration order; under reg->mu */
  enum kind kind;
  char *name;
  char *help;
  size_t nlabels;
  char **labels;
  size_t nbounds;
  double *bounds;
  pthread_rwlock_t lock; /* series and the list: shared to read */
  struct kcr_htab series;
  struct series *first, **tail;
  size_t nseries, max_series; /* under lock (exclusive) */
  bool warned;                /* under lock (exclusive): the drop was logged */
  struct kcr_metric *dropped; /* the registry's drop counter, or NULL */
};

struct collector {
  kcr_metrics_collect_fn fn;
  void *ud;
};

struct kcr_metrics {
  pthread_mutex_t collect_mu; /* held while collect callbacks run */
  pthread_mutex_t mu;         /* families list, collectors */
  struct kcr_metric *first, **tail;
  size_t max_series;          /* for each new family */
  struct kcr_metric *dropped; /* kcr_metrics_series_dropped_total */
  struct collector *coll;
  size_t ncoll, capcoll;
  atomic_uint refs; /* kcr_metrics_ref / kcr_metrics_free */
};

/* The registry whose callbacks this thread is running, if any. */
static _Thread_local const kcr_metrics *tl_collecting;

const double kcr_buckets_seconds[] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                                      1,     2.5,  5,     10,   15,  30,   60};
const size_t kcr_buckets_seconds_n = sizeof(kcr_buckets_seconds) / sizeof(double);
const double kcr_buckets_workqueue[] = {1e-8, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3,
                                        1e-2, 1e-1, 1,    10,   100,  1000};
const size_t kcr_buckets_workqueue_n = sizeof(kcr_buckets_workqueue) / sizeof(double);

/* ---- doubles in atomics ------------------------------------------------ */

static double bits_to_d(uint64_t u)
{
  double d;
  memcpy(&d, &u, sizeof(d));
  return d;
}

static uint64_t d_to_bits(double d)
{
  uint64_t u;
  memcpy(&u, &d, sizeof(u));
  return u;
}

static void atomic_add_d(_Atomic uint64_t *p, double delta)
{
  uint64_t old = atomic_load_explicit(p, memory_order_relaxed), nw;

  do {
    nw = d_to_bits(bits_to_d(old) + delta);
  } while(!atomic_compare_exchange_weak_explicit(p, &old, nw, memory_order_relaxed,
                                                 memory_order_relaxed));
}

/* ---- names -------------------------------------------------------------- */

static bool valid_name(const char *s, bool colon)
{
  if(!s || !*s)
    return false;
  for(const char *p = s; *p; p++) {
    char c = *p;
    bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
                 (colon && c == ':');
    if(!alpha && !(p > s && c >= '0' && c <= '9'))
      return false;
  }
  return true;
}

/* KCR_OK and their number in *n, or KCR_EINVAL naming the bad one. */
static kcr_err check_labels(const char *metric, const char *const *names, enum kind kind,
                            size_t *n, struct kcr_errinfo *ei)
{
  size_t i, j;

  for(i = 0; names && names[i]; i++) {
    const char *why = NULL;
    if(!valid_name(names[i], false))
      why = "is not a valid label name ([a-zA-Z_][a-zA-Z0-9_]*)";
    else if(!strncmp(names[i], "__", 2))
      why = "is reserved (it starts with \"__\")";
    else if(kind == KIND_HISTOGRAM && !strcmp(names[i], "le"))
      why = "is reserved in a histogram";
    for(j = 0; !why && j < i; j++)
      if(!strcmp(names[i], names[j]))
        why = "is repeated";
    if(why)
      return kcr_errinfo_set(ei, KCR_EINVAL, "metric %s: label name \"%s\" %s", metric,
                             names[i], why);
  }
  *n = i;
  return KCR_OK;
}

/* KCR_OK with a trailing +Inf dropped from *n, or KCR_EINVAL saying why. */
static kcr_err check_bounds(const char *metric, enum kind kind, const double *b,
                            size_t *n, struct kcr_errinfo *ei)
{
  if(kind != KIND_HISTOGRAM)
    return b || *n ? kcr_errinfo_set(ei, KCR_EINVAL,
                                     "metric %s: a %s has no bounds (only histograms do)",
                                     metric, kind_names[kind])
                   : KCR_OK;
  if(*n && !b)
    return kcr_errinfo_set(ei, KCR_EINVAL, "histogram %s: nbounds is %zu but no bounds",
                           metric, *n);
  if(*n && isinf(b[*n - 1]) && b[*n - 1] > 0)
    (*n)--;
  for(size_t i = 0; i < *n; i++)
    if(isnan(b[i]) || (i && !(b[i] > b[i - 1])))
      return kcr_errinfo_set(ei, KCR_EINVAL, "histogram %s: bound %zu (%g) is %s", metric,
                             i, b[i],
                             isnan(b[i]) ? "NaN" : "not above the one before it");
  return KCR_OK;
}

/* ---- series -------------------------------------------------------------- */

/* Keyed (kcr/hash.h): the values, each with its NUL, in one SipHash. */
static uint64_t hash_values(const char *const *lv, size_t n)
{
  return kcr__hash_strv(lv, n);
}

static bool values_ok(const kcr_metric *m, const char *const *lv)
{
  if(!m->nlabels)
    return true;
  if(!lv)
    return false;
  for(size_t i = 0; i < m->nlabels; i++)
    if(!lv[i])
      return false;
  return true;
}

/* Caller holds m->lock. */
static struct series *table_find(const kcr_metric *m, uint64_t h, const char *const *lv)
{
  /* Held (shared or exclusive): a write lock cannot be had. */
  KCR_ASSERT(pthread_rwlock_trywrlock((pthread_rwlock_t *)&m->lock) == EBUSY);
  for(struct kcr_hnode *n = kcr_htab_lookup(&m->series, h); n;
      n = kcr_htab_lookup_next(n)) {
    struct series *s = KCR_HTAB_ENTRY(n, struct series, hn);
    size_t i;
    for(i = 0; i < m->nlabels && !strcmp(s->values[i], lv[i]); i++)
      ;
    if(i == m->nlabels)
      return s;
  }
  return NULL;
}

static void series_free(struct series *s, size_t nlabels)
{
  if(!s)
    return;
  for(size_t i = 0; i < nlabels; i++)
    free(s->values[i]);
  free(s->counts);
  free(s);
}

static struct series *series_new(const kcr_metric *m, const char *const *lv)
{
  struct series *s = calloc(1, sizeof(*s) + m->nlabels * sizeof(char *));

  if(!s)
    return NULL;
  atomic_init(&s->val, 0); /* the bits of 0.0 */
  if(m->kind == KIND_HISTOGRAM) {
    s->counts = calloc(m->nbounds + 1, sizeof(*s->counts));
    if(!s->counts)
      goto fail;
    for(size_t i = 0; i <= m->nbounds; i++)
      atomic_init(&s->counts[i], 0);
  }
  for(size_t i = 0; i < m->nlabels; i++)
    if(!(s->values[i] = strdup(lv[i])))
      goto fail;
  return s;
fail:
  series_free(s, m->nlabels);
  return NULL;
}

/* The series for lv, created if create is set; NULL if absent, if lv does
 * not fit the family, or when out of memory. Thread safety: any thread. */
static struct series *series_get(kcr_metric *m, const char *const *lv, bool create)
{
  struct series *s;
  bool full = false, warn = false;
  uint64_t h;

  if(!values_ok(m, lv))
    return NULL;
  h = hash_values(lv, m->nlabels);
  pthread_rwlock_rdlock(&m->lock);
  s = table_find(m, h, lv);
  pthread_rwlock_unlock(&m->lock);
  if(s || !create)
    return s;
  pthread_rwlock_wrlock(&m->lock);
  s = table_find(m, h, lv); /* made since, by another thread? */
  if(!s && m->nseries >= m->max_series) {
    full = true;
    warn = !m->warned;
    m->warned = true;
  } else if(!s && (s = series_new(m, lv))) {
    if(kcr_htab_insert(&m->series, &s->hn, h)) {
      series_free(s, m->nlabels);
      s = NULL;
    } else {
      *m->tail = s;
      m->tail = &s->next;
      m->nseries++;
    }
  }
  KCR_ASSERT(m->nseries <= m->max_series);
  pthread_rwlock_unlock(&m->lock);
  if(full) { /* no lock held: the counter is another family */
    if(warn)
      KCR_LOG(KCR_LOG_WARN,
              "metrics: family has reached its series limit; updates of new label "
              "values are dropped",
              KCR_S("metric", m->name), KCR_I("maxSeries", (long long)m->max_series));
    kcr_metric_inc(m->dropped, (const char *[]){m->name, NULL}, 1);
  }
  return s;
}

size_t kcr__metric_max_chain(kcr_metric *m)
{
  size_t max;

  pthread_rwlock_rdlock(&m->lock);
  max = kcr__htab_longest_chain(&m->series);
  pthread_rwlock_unlock(&m->lock);
  return max;
}

/* ---- families ------------------------------------------------------------ */

static void family_free(kcr_metric *m)
{
  struct series *s, *next;

  if(!m)
    return;
  for(s = m->first; s; s = next) {
    next = s->next;
    series_free(s, m->nlabels);
  }
  kcr_htab_cleanup(&m->series);
  for(size_t i = 0; m->labels && i < m->nlabels; i++)
    free(m->labels[i]);
  free(m->labels);
  free(m->bounds);
  free(m->name);
  free(m->help);
  pthread_rwlock_destroy(&m->lock);
  free(m);
}

static kcr_metric *family_new(const kcr_metrics *reg, enum kind kind, const char *name,
                              const char *help, const char *const *labels, size_t nlabels,
                              const double *bounds, size_t nbounds)
{
  kcr_metric *m = calloc(1, sizeof(*m));

  if(!m)
    return NULL;
  pthread_rwlock_init(&m->lock, NULL);
  /* The registry's drop counter is being made when reg->dropped is NULL. */
  m->dropped = reg->dropped;
  m->max_series = reg->dropped ? reg->max_series : SIZE_MAX;
  m->kind = kind;
  m->tail = &m->first; /* m->series: an empty table */
  m->name = strdup(name);
  m->help = strdup(help ? help : "");
  m->labels = calloc(nlabels + 1, sizeof(char *));
  if(!m->name || !m->help || !m->labels)
    goto fail;
  m->nlabels = nlabels;
  for(size_t i = 0; i < nlabels; i++)
    if(!(m->labels[i] = strdup(labels[i])))
      goto fail;
  if(nbounds) {
    if(!(m->bounds = malloc(nbounds * sizeof(double))))
      goto fail;
    memcpy(m->bounds, bounds, nbounds * sizeof(double));
  }
  m->nbounds = nbounds;
  /* A family without labels has exactly one series: make it now, so it
   * renders (as 0) before the first update, like client_golang's. */
  if(!nlabels && !series_get(m, NULL, true))
    goto fail;
  return m;
fail:
  family_free(m);
  return NULL;
}

/* KCR_EEXIST saying that m has other label names, and which. */
static kcr_err labels_differ(const kcr_metric *m, struct kcr_errinfo *ei)
{
  struct kcr_buf names = KCR_BUF_INIT;
  kcr_err rc;

  if(!ei)
    return KCR_EEXIST;
  for(size_t i = 0; i < m->nlabels; i++)
    kcr_buf_printf(&names, "%s%s", i ? "," : "", m->labels[i]);
  rc = kcr_errinfo_set(ei, KCR_EEXIST,
                       "metric %s is already registered with other label names (%s)",
                       m->name, m->nlabels ? kcr_buf_str(&names) : "none");
  kcr_buf_cleanup(&names);
  return rc;
}

/* KCR_OK if m is the family kind, labels and bounds describe, KCR_EEXIST
 * saying how it differs otherwise. */
static kcr_err family_matches(const kcr_metric *m, enum kind kind,
                              const char *const *labels, size_t nlabels,
                              const double *bounds, size_t nbounds,
                              struct kcr_errinfo *ei)
{
  bool same = m->nlabels == nlabels;

  if(m->kind != kind)
    return kcr_errinfo_set(ei, KCR_EEXIST,
                           "metric %s is already registered as a %s, not a %s", m->name,
                           kind_names[m->kind], kind_names[kind]);
  for(size_t i = 0; same && i < nlabels; i++)
    same = !strcmp(m->labels[i], labels[i]);
  if(!same)
    return labels_differ(m, ei);
  same = m->nbounds == nbounds;
  for(size_t i = 0; same && i < nbounds; i++)
    same = m->bounds[i] == bounds[i];
  if(!same)
    return kcr_errinfo_set(
        ei, KCR_EEXIST,
        "histogram %s is already registered with other bounds (%zu of them)", m->name,
        m->nbounds);
  return KCR_OK;
}

static kcr_err family_register(kcr_metrics *reg, enum kind kind,
                               const struct kcr_metric_opts *o, kcr_metric **out,
                               struct kcr_errinfo *ei)
{
  kcr_metric *m;
  size_t nlabels = 0, nbounds;
  kcr_err rc;

  if(out)
    *out = NULL;
  if(!reg || !o || !out || !o->name)
    return kcr_errinfo_set(ei, KCR_EINVAL, "kcr_metric_%s: no %s", kind_names[kind],
                           !reg   ? "registry"
                           : !o   ? "opts"
                           : !out ? "out"
                                  : "name");
  if(!valid_name(o->name, true))
    return kcr_errinfo_set(ei, KCR_EINVAL,
                           "metric name \"%s\" is not a valid Prometheus metric name "
                           "([a-zA-Z_:][a-zA-Z0-9_:]*)",
                           o->name);
  nbounds = o->nbounds;
  if((rc = check_labels(o->name, o->label_names, kind, &nlabels, ei)) ||
     (rc = check_bounds(o->name, kind, o->bounds, &nbounds, ei)))
    return rc;
  pthread_mutex_lock(&reg->mu);
  for(m = reg->first; m; m = m->next)
    if(!strcmp(m->name, o->name))
      break;
  if(m) {
    rc = family_matches(m, kind, o->label_names, nlabels, o->bounds, nbounds, ei);
  } else if((m = family_new(reg, kind, o->name, o->help, o->label_names, nlabels,
                            o->bounds, nbounds))) {
    *reg->tail = m;
    reg->tail = &m->next;
  } else {
    rc = KCR_ENOMEM;
  }
  pthread_mutex_unlock(&reg->mu);
  if(!rc)
    *out = m;
  return rc;
}

kcr_err kcr_metric_counter(kcr_metrics *reg, const struct kcr_metric_opts *opts,
                           kcr_metric **out, struct kcr_errinfo *ei)
{
  return family_register(reg, KIND_COUNTER, opts, out, ei);
}

kcr_err kcr_metric_gauge(kcr_metrics *reg, const struct kcr_metric_opts *opts,
                         kcr_metric **out, struct kcr_errinfo *ei)
{
  return family_register(reg, KIND_GAUGE, opts, out, ei);
}

kcr_err kcr_metric_histogram(kcr_metrics *reg, const struct kcr_metric_opts *opts,
                             kcr_metric **out, struct kcr_errinfo *ei)
{
  return family_register(reg, KIND_HISTOGRAM, opts, out, ei);
}

/* ---- updates ------------------------------------------------------------- */

void kcr_metric_inc(kcr_metric *m, const char *const *label_values, double delta)
{
  struct series *s;

  if(!m || m->kind == KIND_HISTOGRAM)
    return;
  if(m->kind == KIND_COUNTER && !(delta >= 0)) /* also refuses NaN */
    return;
  if((s = series_get(m, label_values, true)))
    atomic_add_d(&s->val, delta);
}

void kcr_metric_set(kcr_metric *m, const char *const *label_values, double value)
{
  struct series *s;

  if(!m || m->kind == KIND_HISTOGRAM)
    return;
  if((s = series_get(m, label_values, true)))
    atomic_store_explicit(&s->val, d_to_bits(value), memory_order_relaxed);
}

/* Index of the first bucket whose upper bound is >= v (nbounds: +Inf). */
static size_t bucket_index(const kcr_metric *m, double v)
{
  size_t lo = 0, hi = m->nbounds;

  if(isnan(v))
    return m->nbounds;
  while(lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if(v <= m->bounds[mid])
      hi = mid;
    else
      lo = mid + 1;
  }
  return lo;
}

void kcr_metric_observe(kcr_metric *m, const char *const *label_values, double value)
{
  struct series *s;

  if(!m || m->kind != KIND_HISTOGRAM)
    return;
  if(!(s = series_get(m, label_values, true)))
    return;
  size_t b = bucket_index(m, value);
  KCR_ASSERT(b <= m->nbounds); /* nbounds + 1 buckets, the last +Inf */
  atomic_fetch_add_explicit(&s->counts[b], 1, memory_order_relaxed);
  atomic_add_d(&s->val, value);
}

double kcr_metric_value(kcr_metric *m, const char *const *label_values)
{
  struct series *s = m ? series_get(m, label_values, false) : NULL;

  return s ? bits_to_d(atomic_load_explicit(&s->val, memory_order_relaxed)) : 0;
}

uint64_t kcr_metric_count(kcr_metric *m, const char *const *label_values)
{
  struct series *s;
  uint64_t n = 0;

  if(!m || m->kind != KIND_HISTOGRAM || !(s = series_get(m, label_values, false)))
    return 0;
  for(size_t i = 0; i <= m->nbounds; i++)
    n += atomic_load_explicit(&s->counts[i], memory_order_relaxed);
  return n;
}

/* ---- registry and collectors --------------------------------------------- */

kcr_err kcr_metrics_new(const struct kcr_metrics_opts *opts, kcr_metrics **out,
                        struct kcr_errinfo *ei)
{
  kcr_metrics *reg = calloc(1, sizeof(*reg));

  *out = NULL;
  if(!reg)
    return KCR_ENOMEM;
  pthread_mutex_init(&reg->collect_mu, NULL);
  pthread_mutex_init(&reg->mu, NULL);
  atomic_init(&reg->refs, 1);
  reg->tail = &reg->first;
  reg->max_series = opts && opts->max_series ? opts->max_series : KCR_METRICS_MAX_SERIES;
  if(kcr_metric_counter(reg,
                        &(struct kcr_metric_opts){
                            .name = "kcr_metrics_series_dropped_total",
                            .help = "Metric updates dropped because their family had "
                                    "reached its series limit",
                            .label_names = (const char *[]){"metric", NULL}},
                        &reg->dropped, NULL)) {
    kcr_metrics_free(reg);
    return kcr_errinfo_set(ei, KCR_ENOMEM, "out of memory making a metrics registry");
  }
  *out = reg;
  return KCR_OK;
}

kcr_metrics *kcr_metrics_ref(kcr_metrics *reg)
{
  if(reg)
    atomic_fetch_add_explicit(&reg->refs, 1, memory_order_relaxed);
  return reg;
}

void kcr_metrics_free(kcr_metrics *reg)
{
  kcr_metric *m, *next;

  if(!reg || atomic_fetch_sub_explicit(&reg->refs, 1, memory_order_acq_rel) != 1)
    return;
  /* Not from its own collect callback: the render would go on in it. */
  KCR_ASSERT(tl_collecting != reg);
  for(m = reg->first; m; m = next) {
    next = m->next;
    family_free(m);
  }
  free(reg->coll);
  pthread_mutex_destroy(&reg->mu);
  pthread_mutex_destroy(&reg->collect_mu);
  free(reg);
}

kcr_err kcr_metrics_on_collect(kcr_metrics *reg, kcr_metrics_collect_fn fn, void *ud)
{
  kcr_err rc = KCR_OK;

  if(!reg || !fn)
    return KCR_EINVAL;
  pthread_mutex_lock(&reg->mu);
  if(reg->ncoll == reg->capcoll) {
    size_t cap = reg->capcoll ? reg->capcoll * 2 : 8;
    struct collector *c = realloc(reg->coll, cap * sizeof(*c));
    if(!c) {
      rc = KCR_ENOMEM;
      goto out;
    }
    reg->coll = c;
    reg->capcoll = cap;
  }
  KCR_ASSERT(reg->ncoll < reg->capcoll);
  reg->coll[reg->ncoll++] = (struct collector){fn, ud};
out:
  pthread_mutex_unlock(&reg->mu);
  return rc;
}

/* Index of (fn, ud) in reg->coll, or -1. Caller holds reg->mu. */
static long collector_find(const kcr_metrics *reg, kcr_metrics_collect_fn fn, void *ud)
{
  KCR_ASSERT(pthread_mutex_trylock((pthread_mutex_t *)&reg->mu) == EBUSY);
  for(size_t i = 0; i < reg->ncoll; i++)
    if(reg->coll[i].fn == fn && reg->coll[i].ud == ud)
      return (long)i;
  return -1;
}

void kcr_metrics_off_collect(kcr_metrics *reg, kcr_metrics_collect_fn fn, void *ud)
{
  long i;

  if(!reg)
    return;
  pthread_mutex_lock(&reg->mu);
  if((i = collector_find(reg, fn, ud)) >= 0) {
    memmove(reg->coll + i, reg->coll + i + 1,
            (reg->ncoll - (size_t)i - 1) * sizeof(*reg->coll));
    reg->ncoll--;
  }
  pthread_mutex_unlock(&reg->mu);
  if(tl_collecting != reg) { /* wait for a render's callbacks to finish */
    pthread_mutex_lock(&reg->collect_mu);
    pthread_mutex_unlock(&reg->collect_mu);
  }
}

static kcr_err run_collectors(kcr_metrics *reg)
{
  struct collector *snap = NULL;
  size_t n;
  kcr_err rc = KCR_OK;

  pthread_mutex_lock(&reg->collect_mu);
  pthread_mutex_lock(&reg->mu);
  n = reg->ncoll;
  if(n && (snap = malloc(n * sizeof(*snap))))
    memcpy(snap, reg->coll, n * sizeof(*snap));
  pthread_mutex_unlock(&reg->mu);
  if(n && !snap) {
    rc = KCR_ENOMEM;
    goto out;
  }
  tl_collecting = reg;
  for(size_t i = 0; i < n; i++) {
    bool live;
    /* A callback may have unregistered a later one: skip it then. */
    pthread_mutex_lock(&reg->mu);
    live = collector_find(reg, snap[i].fn, snap[i].ud) >= 0;
    pthread_mutex_unlock(&reg->mu);
    if(live)
      snap[i].fn(snap[i].ud);
  }
  tl_collecting = NULL;
out:
  pthread_mutex_unlock(&reg->collect_mu);
  free(snap);
  return rc;
}

/* ---- exposition ----------------------------------------------------------- */

/* Formats v as Prometheus (and Go) read it; out has room for 32 bytes. */
static void format_double(char *out, size_t n, double v)
{
  if(isnan(v)) {
    snprintf(out, n, "NaN");
  } else if(isinf(v)) {
    snprintf(out, n, v > 0 ? "+Inf" : "-Inf");
  } else if(v == 0) {
    snprintf(out, n, "0"); /* also -0 */
  } else if(v == trunc(v) && fabs(v) < 1e15) {
    snprintf(out, n, "%.0f", v);
  } else {
    for(int prec = 15; prec <= 17; prec++) {
      snprintf(out, n, "%.*g", prec, v);
      if(strtod(out, NULL) == v)
        break;
    }
    for(char *p = out; *p; p++) /* a locale's decimal comma */
      if(*p == ',')
        *p = '.';
  }
}

static void put_double(struct kcr_buf *out, double v)
{
  char num[40];

  format_double(num, sizeof(num), v);
  kcr_buf_puts(out, num);
}

/* Appends s escaped: backslash and newline always, '"' when quoted. */
static void put_escaped(struct kcr_buf *out, const char *s, bool quoted)
{
  const char *run = s;

  for(; *s; s++) {
    const char *esc = *s == '\\'            ? "\\\\"
                      : *s == '\n'          ? "\\n"
                      : *s == '"' && quoted ? "\\\""
                                            : NULL;
    if(!esc)
      continue;
    kcr_buf_append(out, run, (size_t)(s - run));
    kcr_buf_puts(out, esc);
    run = s + 1;
  }
  kcr_buf_puts(out, run);
}

/* Writes {a="x",b="y"} (with le="..." last if le is set), or nothing. */
static void put_labels(struct kcr_buf *out, const kcr_metric *m, const struct series *s,
                       const char *le)
{
  if(!m->nlabels && !le)
    return;
  kcr_buf_puts(out, "{");
  for(size_t i = 0; i < m->nlabels; i++) {
    kcr_buf_printf(out, "%s%s=\"", i ? "," : "", m->labels[i]);
    put_escaped(out, s->values[i], true);
    kcr_buf_puts(out, "\"");
  }
  if(le)
    kcr_buf_printf(out, "%sle=\"%s\"", m->nlabels ? "," : "", le);
  kcr_buf_puts(out, "}");
}

static void put_histogram(struct kcr_buf *out, const kcr_metric *m,
                          const struct series *s)
{
  uint64_t cum = 0;
  char le[40];

  for(size_t i = 0; i <= m->nbounds && !kcr_buf_err(out); i++) {
    cum += atomic_load_explicit(&s->counts[i], memory_order_relaxed);
    format_double(le, sizeof(le), i < m->nbounds ? m->bounds[i] : INFINITY);
    kcr_buf_printf(out, "%s_bucket", m->name);
    put_labels(out, m, s, le);
    kcr_buf_printf(out, " %llu\n", (unsigned long long)cum);
  }
  kcr_buf_printf(out, "%s_sum", m->name);
  put_labels(out, m, s, NULL);
  kcr_buf_puts(out, " ");
  put_double(out, bits_to_d(atomic_load_explicit(&s->val, memory_order_relaxed)));
  kcr_buf_printf(out, "\n%s_count", m->name);
  put_labels(out, m, s, NULL);
  kcr_buf_printf(out, " %llu\n", (unsigned long long)cum);
}

static void put_simple(struct kcr_buf *out, const kcr_metric *m, const struct series *s)
{
  kcr_buf_puts(out, m->name);
  put_labels(out, m, s, NULL);
  kcr_buf_puts(out, " ");
  put_double(out, bits_to_d(atomic_load_explicit(&s->val, memory_order_relaxed)));
  kcr_buf_puts(out, "\n");
}

static void put_family(struct kcr_buf *out, kcr_metric *m)
{
  pthread_rwlock_rdlock(&m->lock);
  if(!m->first) /* no series yet: client_golang leaves such families out */
    goto out;
  if(*m->help) {
    kcr_buf_printf(out, "# HELP %s ", m->name);
    put_escaped(out, m->help, false);
    kcr_buf_puts(out, "\n");
  }
  kcr_buf_printf(out, "# TYPE %s %s\n", m->name, kind_names[m->kind]);
  for(struct series *s = m->first; s && !kcr_buf_err(out); s = s->next) {
    if(m->kind == KIND_HISTOGRAM)
      put_histogram(out, m, s);
    else
      put_simple(out, m, s);
  }
out:
  pthread_rwlock_unlock(&m->lock);
}

kcr_err kcr_metrics_render(kcr_metrics *reg, struct kcr_buf *out)
{
  size_t start;
  kcr_err rc;

  if(!reg || !out)
    return KCR_EINVAL;
  start = out->len;
  rc = run_collectors(reg);
  if(rc)
    return rc;
  pthread_mutex_lock(&reg->mu);
  for(kcr_metric *m = reg->first; m && !kcr_buf_err(out); m = m->next)
    put_family(out, m);
  pthread_mutex_unlock(&reg->mu);
  rc = kcr_buf_err(out);
  if(rc && out->ptr) {
    out->len = start;
    out->ptr[start] = '\0';
  }
  return rc;
}
