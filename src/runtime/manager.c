/* DESIGN: the manager wires the runtime together and owns the process's
 * life cycle: start order servers -> informers -> sync -> leader -> controllers,
 * stop order controllers (grace) -> recorders flushed -> lease release ->
 * informers -> servers.
 * Every start step is checked; the first that fails stops what was started
 * and run() returns 1 with one log line naming what failed.
 *
 * Stop requests come from signals (a sigwait thread, so no work happens in
 * a signal handler), from kcr_manager_stop (async-signal-safe: an atomic
 * flag and sem_post) or from losing the lease. run() sleeps on the
 * semaphore.
 *
 * The informer registry (rules in manager.h): inf[] under inf_mu, so that
 * kcr_manager_get may look from any thread while informers are registered,
 * added or removed - also while run runs: one added then is started at
 * once (under inf_mu, so run's start and stop of every informer see it or
 * start it); one removed is stopped, emptied and kept in retired[] until
 * free, so a pointer a lookup took before the removal stays valid (an
 * empty, stopped informer).
 * Each entry is (resource, namespace or "" for all, options); the options
 * string is the same for every entry of a resource, and an all-namespaces
 * entry is the only one of its resource.
 *
 * Leader election: the client's write gate is the elector's fence
 * (kcr_leader_may_write), so no write leaves this process unless the lease
 * was renewed less than renew_deadline ago - even in a reconcile that was
 * frozen with the whole process past the lease's expiry. On loss, run()
 * does not wait for in-flight reconciles (grace 0: they can no longer write)
 * and returns 1 at once; the process is expected to exit, as
 * controller-runtime's does.
 *
 * Recorders made by kcr_manager_recorder are the manager's: run flushes
 * them after the controllers stopped and before the lease is released
 * (dropping what is pending instead when the lease was lost), free frees
 * them after the controllers.
 *
 * Lifetime: kcr_manager_free frees controllers first (each joins its
 * workers), then its recorders, the elector, informers, servers and its
 * client and metrics references; nothing is freed while a reconcile can
 * still run. Objects the caller made with the manager's client or
 * registry hold references of their own (kcr_client_ref,
 * kcr_metrics_ref), so they may be freed before or after the manager.
 * One lock of its own, inf_mu, for the registry; everything else needs none:
 * setup happens before run, and run is one thread. */
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kcr/buf.h"
#include "kcr/events.h"
#include "kcr/certs.h"
#include "kcr/httpd.h"
#include "kcr/webhook.h"
#include "runtime/certs-int.h"
#include "kcr/leader.h"
#include "kcr/manager.h"
#include "kcr/time.h"
#include "runtime/controller-int.h"
#include "runtime/events-int.h"
#include "runtime/informer-int.h"
#include "runtime/store-int.h"

#define MAX_INFORMERS   32
#define MAX_CONTROLLERS 16
#define MAX_RECORDERS   8
#define MAX_UNCACHED    16

struct shared_informer {
  kcr_informer *inf;
  char *res;  /* group/version/resource */
  char *ns;   /* "" for every namespace, "a,b" for a set (sorted), "@sel"
                 for a namespace selector */
  char *opts; /* labels|fields|keep: the same for every informer of res */
  bool late;  /* added while run runs: not part of /readyz until synced */
};

struct kcr_manager {
  struct kcr_manager_opts o;
  char *name, *lease_ns, *lease_name;
  kcr_client *client;
  kcr_metrics *metrics;
  kcr_metric *m_requests, *m_latency;
  pthread_mutex_t inf_mu; /* inf and ninf: registration vs kcr_manager_get */
  struct shared_informer inf[MAX_INFORMERS];
  size_t ninf;
  bool inf_running;       /* under inf_mu: run started the informers and has
                             not stopped them; one added now starts at once */
  kcr_informer **retired; /* under inf_mu: removed, stopped, freed by free */
  size_t nretired;
  char *uncached[MAX_UNCACHED]; /* resources read through (kcr_manager_uncached) */
  size_t nuncached;             /* under inf_mu, as inf */
  kcr_controller *ctl[MAX_CONTROLLERS];
  size_t nctl;
  kcr_recorder *rec[MAX_RECORDERS];
  size_t nrec;
  kcr_httpd *srv[3]; /* metrics, health, webhooks; each may be NULL */
  kcr_certs *certs;  /* the webhook server's certificates, when the library's */
  atomic_bool webhooks_serving;
  kcr_leader *leader;
  atomic_bool leader_ready; /* m->leader may be read by other threads */
  kcr_ring *ring;           /* kcr_manager_opts.ring */
  sem_t wake;
  atomic_bool stop, lost;
  int health_port;
};

/* The write gate (see DESIGN). Before the elector exists: nothing may be
 * written yet (controllers start only once leading). */
static bool may_write(void *ud)
{
  kcr_manager *m = ud;
  kcr_leader *le = atomic_load(&m->leader_ready) ? m->leader : NULL;
  return le && kcr_leader_may_write(le);
}

/* The write gate with a ring: this replica's own ring Lease, and for a
 * write of a reconcile (its scoped client, kcr_ctx_client) the bucket of
 * its object, owned now. */
static bool ring_may_write(void *ud)
{
  kcr_manager *m = ud;
  uint64_t hash;
  return kcr_ring_may_write(m->ring) &&
         (!kcr_write_scope(&hash) || kcr_ring_owns(m->ring, hash));
}

/* The ring of kcr_manager_opts.ring, made by kcr_manager_new. */
static kcr_err open_ring(kcr_manager *m, struct kcr_errinfo *ei)
{
  char host[256];
  const char *id = m->o.identity;

  if(!id || !*id) {
    if(gethostname(host, sizeof(host)))
      return kcr_errinfo_set(
          ei, KCR_EINVAL, "kcr_manager_new: no identity for the ring, and no host name");
    host[sizeof(host) - 1] = '\0';
    id = host;
  }
  return kcr_ring_new(&(struct kcr_ring_opts){.client = m->client,
                                              .ns = m->lease_ns,
                                              .name = m->o.ring,
                                              .identity = id,
                                              .lease_duration_ms = m->o.lease_duration_ms,
                                              .renew_deadline_ms = m->o.renew_deadline_ms,
                                              .retry_period_ms = m->o.retry_period_ms,
                                              .metrics = m->metrics},
                      &m->ring, ei);
}

static kcr_err open_servers(kcr_manager *m, struct kcr_errinfo *ei);
static kcr_err open_webhook_server(kcr_manager *m, struct kcr_errinfo *ei);
static kcr_err open_certs(kcr_manager *m, struct kcr_errinfo *ei);

static void observe(const char *method, long code, double secs, void *ud)
{
  kcr_manager *m = ud;
  char c[8];
  if(code)
    snprintf(c, sizeof(c), "%ld", code);
  else
    snprintf(c, sizeof(c), "<error>");
  kcr_metric_inc(m->m_requests, (const char *[]){c, method, NULL}, 1);
  kcr_metric_observe(m->m_latency, (const char *[]){method, NULL}, secs);
}

static kcr_err open_servers(kcr_manager *m, struct kcr_errinfo *ei);

kcr_err kcr_manager_new(const struct kcr_manager_opts *o, kcr_manager **out,
                        struct kcr_errinfo *ei)
{
  static const double latency[] = {0.005, 0.025, 0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60};
  kcr_manager *m;
  struct kcr_client_opts co;
  kcr_err rc;

  *out = NULL;
  if(!o || !o->config)
    return kcr_errinfo_set(ei, KCR_EINVAL, "manager: no config");
  m = calloc(1, sizeof(*m));
  if(!m)
    return KCR_ENOMEM;
  m->o = *o;
  if(!o->no_signals) {
    /* Block SIGTERM/SIGINT now, in the thread that makes the manager, so that
     * every thread created from here on (recorders, informers, servers)
     * inherits the mask and only run()'s sigwait thread receives them. */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
  }
  m->name = strdup(o->name ? o->name : "kcr");
  rc = kcr_metrics_new(NULL, &m->metrics, ei);
  sem_init(&m->wake, 0, 0);
  pthread_mutex_init(&m->inf_mu, NULL);
  atomic_init(&m->stop, false);
  atomic_init(&m->lost, false);
  atomic_init(&m->leader_ready, false);
  atomic_init(&m->webhooks_serving, false);
  if(rc || !m->name) {
    kcr_manager_free(m);
    return rc ? rc : KCR_ENOMEM;
  }
  {
    const char *ns =
        o->lease_namespace ? o->lease_namespace : kcr_config_namespace(o->config);
    m->lease_ns = strdup(ns ? ns : "default");
    if(o->lease_name)
      m->lease_name = strdup(o->lease_name);
    else if(asprintf(&m->lease_name, "%s-leader", m->name) < 0)
      m->lease_name = NULL;
  }
  rc = kcr_metric_counter(
      m->metrics,
      &(struct kcr_metric_opts){.name = "rest_client_requests_total",
                                .help = "Number of HTTP requests, partitioned by status "
                                        "code and method",
                                .label_names = (const char *[]){"code", "method", NULL}},
      &m->m_requests, ei);
  if(!rc)
    rc = kcr_metric_histogram(
        m->metrics,
        &(struct kcr_metric_opts){.name = "rest_client_request_duration_seconds",
                                  .help = "Request latency in seconds, by verb",
                                  .label_names = (const char *[]){"verb", NULL},
                                  .bounds = latency,
                                  .nbounds = sizeof(latency) / sizeof(latency[0])},
        &m->m_latency, ei);
  if(rc) {
    kcr_manager_free(m);
    return rc;
  }
  co = o->client;
  co.config = o->config;
  co.observe = observe;
  co.observe_ud = m;
  rc = kcr_client_new(&co, &m->client, ei); /* it holds its own config reference */
  if(rc || !m->lease_ns || !m->lease_name) {
    kcr_manager_free(m);
    return rc ? rc : KCR_ENOMEM;
  }
  rc = open_servers(m, ei);
  if(!rc)
    rc = open_webhook_server(m, ei);
  if(rc) {
    kcr_manager_free(m);
    return rc;
  }
  if(o->ring) {
    rc = open_ring(m, ei);
    if(rc) {
      kcr_manager_free(m);
      return rc;
    }
    kcr_client_set_write_gate(m->client, ring_may_write, m);
  }
  if(o->leader_elect && !o->ring) /* (in a ring the leader's Lease fences nothing) */
    kcr_client_set_write_gate(m->client, may_write, m);
  if(!m->o.sync_timeout_ms)
    m->o.sync_timeout_ms = 120000;
  if(!m->o.grace_ms)
    m->o.grace_ms = 30000;
  *out = m;
  return KCR_OK;
}

kcr_client *kcr_manager_client(kcr_manager *m) { return m->client; }
kcr_metrics *kcr_manager_metrics(kcr_manager *m) { return m->metrics; }
int kcr_manager_health_port(kcr_manager *m) { return m->health_port; }

/* A resource's name in the registry: "group/version/resource". */
#define RES_MAX 768 /* group and resource <= 253 bytes each, version short */
static void res_name(const struct kcr_gvr *g, char out[RES_MAX])
{
  snprintf(out, RES_MAX, "%s/%s/%s", g->group ? g->group : "", g->version, g->resource);
}

/* An informer's reason for not being synced (kcr_informer_why_unsynced),
 * as long as /readyz carries one. */
#define WHY_MAX 512

static int cmp_str(const void *a, const void *b)
{
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The namespaces of an informer as its identity has them (see struct
 * shared_informer): owned, NULL when memory ran out. */
static char *ns_id(const struct kcr_informer_opts *io)
{
  struct kcr_buf b = KCR_BUF_INIT;
  const char **v;
  size_t n = 0;

  if(io->namespace_selector) {
    kcr_buf_printf(&b, "@%s", io->namespace_selector);
    return kcr_buf_take(&b);
  }
  if(!io->namespaces)
    return strdup(io->ns ? io->ns : "");
  while(io->namespaces[n])
    n++;
  if(!(v = malloc((n + 1) * sizeof(*v))))
    return NULL;
  memcpy(v, io->namespaces, n * sizeof(*v));
  qsort(v, n, sizeof(*v), cmp_str);
  for(size_t i = 0; i < n; i++)
    if(!i || strcmp(v[i], v[i - 1]))
      kcr_buf_printf(&b, "%s%s", i ? "," : "", v[i]);
  free(v);
  return kcr_buf_take(&b);
}

/* Whether the informer of namespaces id (as ns_id writes them) holds
 * namespace ns by name: one of its set. "" and selectors: no (they are
 * the fallback). */
static bool ns_in(const char *id, const char *ns)
{
  size_t n = strlen(ns);
  if(!*id || *id == '@')
    return false;
  for(const char *p = id; p; p = strchr(p, ','), p = p ? p + 1 : NULL)
    if(!strncmp(p, ns, n) && (p[n] == ',' || !p[n]))
      return true;
  return false;
}

/* The first namespace of set a also in set b (ns_id's sets), copied into
 * out; false when none. */
static bool ns_overlap(const char *a, const char *b, char *out, size_t outn)
{
  for(const char *p = a; p; p = strchr(p, ','), p = p ? p + 1 : NULL) {
    size_t n = strcspn(p, ",");
    if(n < outn) {
      memcpy(out, p, n);
      out[n] = 0;
      if(ns_in(b, out))
        return true;
    }
  }
  return false;
}

/* The parts of an informer's identity (see the registry rules in
 * manager.h): resource, namespace ("" for all) and the options that must
 * agree across the informers of one resource. Owned strings; false when
 * memory ran out (nothing left allocated). */
static bool informer_id(const struct kcr_informer_opts *io, struct shared_informer *id)
{
  struct kcr_buf o = KCR_BUF_INIT;
  char res[RES_MAX];

  res_name(io->gvr, res);
  /* A metadata-only cache is another cache of the resource, never the one
   * cached reads by gvr find (kcr_manager_get ...): a name of its own. */
  if(io->metadata_only)
    snprintf(res + strlen(res), RES_MAX - strlen(res), " (metadata)");
  kcr_buf_printf(&o, "labels \"%s\", fields \"%s\"",
                 io->label_selector ? io->label_selector : "",
                 io->field_selector ? io->field_selector : "");
  kcr_buf_puts(&o, io->keep_managed_fields ? ", managedFields kept" : "");
  kcr_buf_puts(&o, io->shard_by == KCR_SHARD_BY_UID     ? ", sharded by uid"
                   : io->shard_by == KCR_SHARD_BY_OWNER ? ", sharded by owner"
                                                        : "");
  kcr_buf_puts(&o, io->keep ? ", keep [" : ", no keep list");
  for(size_t i = 0; io->keep && io->keep[i]; i++)
    kcr_buf_printf(&o, "%s%s", i ? "," : "", io->keep[i]);
  if(io->keep)
    kcr_buf_puts(&o, "]");
  id->res = strdup(res);
  id->opts = kcr_buf_take(&o); /* NULL if an append failed: errors stick */
  id->ns = ns_id(io);
  if(id->res && id->opts && id->ns)
    return true;
  free(id->res);
  free(id->opts);
  free(id->ns);
  return false;
}

kcr_err kcr_manager_informer(kcr_manager *m, const struct kcr_informer_opts *io,
                             kcr_informer **out, struct kcr_errinfo *ei)
{
  struct kcr_informer_opts o;
  struct shared_informer id;
  char both[256];
  bool kept = false;
  kcr_err rc = KCR_OK;

  if(!out)
    return kcr_errinfo_set(ei, KCR_EINVAL, "kcr_manager_informer: no out");
  *out = NULL;
  if(!io || !io->gvr || !io->gvr->version || !io->gvr->resource)
    return kcr_errinfo_set(ei, KCR_EINVAL, "kcr_manager_informer: %s is required",
                           !io        ? "opts"
                           : !io->gvr ? "gvr"
                                      : "gvr->version/resource");
  if(!informer_id(io, &id))
    return KCR_ENOMEM;
  pthread_mutex_lock(&m->inf_mu);
  for(size_t i = 0; i < m->nuncached && !rc; i++)
    if(!strcmp(m->uncached[i], id.res))
      rc = kcr_errinfo_set(ei, KCR_EEXIST,
                           "kcr_manager_informer: %s: reads of it are uncached "
                           "(kcr_manager_uncached); it has no informer",
                           id.res);
  for(size_t i = 0; i < m->ninf && !rc && !*out; i++) {
    const struct shared_informer *x = &m->inf[i];
    if(strcmp(x->res, id.res))
      continue;
    if(strcmp(x->opts, id.opts))
      rc =
          kcr_errinfo_set(ei, KCR_EEXIST,
                          "kcr_manager_informer: %s: an informer with other options (%s) "
                          "is registered; the informers of one resource share their "
                          "selectors and keep list (asked: %s)",
                          id.res, x->opts, id.opts);
    else if(!strcmp(x->ns, id.ns))
      *out = x->inf;
    else if(!*x->ns || !*id.ns || *x->ns == '@' || *id.ns == '@')
      rc = kcr_errinfo_set(ei, KCR_EEXIST,
                           "kcr_manager_informer: %s: an informer of %s%s is registered; "
                           "one of every namespace, or of a namespace selector, is "
                           "the only informer of its resource (asked: %s%s)",
                           id.res, *x->ns == '@' ? "the namespaces selected by " : "",
                           !*x->ns ? "every namespace" : x->ns + (*x->ns == '@'),
                           *id.ns == '@' ? "the namespaces selected by " : "",
                           !*id.ns ? "every namespace" : id.ns + (*id.ns == '@'));
    else if(ns_overlap(x->ns, id.ns, both, sizeof(both)))
      rc = kcr_errinfo_set(ei, KCR_EEXIST,
                           "kcr_manager_informer: %s: namespace %s is in two informers "
                           "(%s and %s); an object is cached once",
                           id.res, both, x->ns, id.ns);
  }
  if(!rc && !*out && m->ninf == MAX_INFORMERS)
    rc = kcr_errinfo_set(ei, KCR_EINVAL, "kcr_manager_informer: more than %d informers",
                         MAX_INFORMERS);
  if(!rc && !*out) {
    o = *io;
    o.client = m->client;
    o.metrics = m->metrics;
    rc = kcr_informer_new(&o, &id.inf, ei);
    if(!rc && m->inf_running && (rc = kcr_informer_start(id.inf))) {
      kcr_informer_free(id.inf);
      rc = kcr_errinfo_set(ei, rc,
                           "kcr_manager_informer: %s: cannot start it (out of "
                           "threads?)",
                           id.res);
    }
    if(!rc) {
      id.late = m->inf_running;
      m->inf[m->ninf++] = id;
      *out = id.inf;
      kept = true;
    }
  }
  pthread_mutex_unlock(&m->inf_mu);
  if(!kept) {
    free(id.res);
    free(id.opts);
    free(id.ns);
  }
  return rc;
}

kcr_err kcr_manager_remove_informer(kcr_manager *m, kcr_informer *inf,
                                    struct kcr_errinfo *ei)
{
  struct shared_informer x = {0};
  kcr_informer **r;
  bool found;
  size_t i;

  if(!inf)
    return kcr_errinfo_set(ei, KCR_EINVAL, "kcr_manager_remove_informer: no informer");
  /* (controllers are added before run, from the setup thread: nctl is
   * settled while anyone can remove) */
  for(size_t c = 0; c < m->nctl; c++)
    if(kcr__controller_has_source(m->ctl[c], inf))
      return kcr_errinfo_set(ei, KCR_EINVAL,
                             "kcr_manager_remove_informer: informer %s is a source of "
                             "controller %s; a controller's sources stay while it runs",
                             kcr_informer_name(inf), kcr_controller_name(m->ctl[c]));
  pthread_mutex_lock(&m->inf_mu);
  for(i = 0; i < m->ninf && m->inf[i].inf != inf; i++)
    ;
  found = i < m->ninf;
  r = found ? realloc(m->retired, (m->nretired + 1) * sizeof(*r)) : NULL;
  if(r) {
    x = m->inf[i];
    memmove(&m->inf[i], &m->inf[i + 1], (m->ninf - i - 1) * sizeof(m->inf[0]));
    m->ninf--;
    m->retired = r;
    m->retired[m->nretired++] = inf;
  }
  pthread_mutex_unlock(&m->inf_mu);
  if(!x.inf)
    return found ? KCR_ENOMEM
                 : kcr_errinfo_set(ei, KCR_EINVAL,
                                   "kcr_manager_remove_informer: informer %s is not "
                                   "in this manager's registry (never made by it, "
                                   "or removed already)",
                                   kcr_informer_name(inf));
  kcr__informer_retire(inf); /* stopped and emptied; freed by kcr_manager_free */
  KCR_LOG(KCR_LOG_INFO, "manager: informer removed", KCR_S("informer", x.res),
          KCR_S("namespaces", *x.ns ? x.ns : "every namespace"));
  free(x.res);
  free(x.ns);
  free(x.opts);
  return KCR_OK;
}

kcr_err kcr_manager_uncached(kcr_manager *m, const struct kcr_gvr *gvr,
                             struct kcr_errinfo *ei)
{
  char res[RES_MAX], *r;
  kcr_err rc = KCR_OK;

  if(!gvr || !gvr->version || !gvr->resource)
    return kcr_errinfo_set(ei, KCR_EINVAL,
                           "kcr_manager_uncached: gvr (with version and resource) is "
                           "required");
  res_name(gvr, res);
  if(!(r = strdup(res)))
    return KCR_ENOMEM;
  pthread_mutex_lock(&m->inf_mu);
  for(size_t i = 0; i < m->ninf && !rc; i++)
    if(!strcmp(m->inf[i].res, res))
      rc = kcr_errinfo_set(ei, KCR_EEXIST,
                           "kcr_manager_uncached: %s has an informer: its reads are "
                           "cached",
                           res);
  for(size_t i = 0; i < m->nuncached && !rc && r; i++)
    if(!strcmp(m->uncached[i], res)) { /* already: fine */
      free(r);
      r = NULL;
    }
  if(!rc && r && m->nuncached == MAX_UNCACHED)
    rc = kcr_errinfo_set(ei, KCR_EINVAL, "kcr_manager_uncached: more than %d resources",
                         MAX_UNCACHED);
  if(!rc && r) {
    m->uncached[m->nuncached++] = r;
    r = NULL;
  }
  pthread_mutex_unlock(&m->inf_mu);
  free(r);
  return rc;
}

static bool is_uncached(kcr_manager *m, const char *res)
{
  bool found = false;
  pthread_mutex_lock(&m->inf_mu);
  for(size_t i = 0; i < m->nuncached && !found; i++)
    found = !strcmp(m->uncached[i], res);
  pthread_mutex_unlock(&m->inf_mu);
  return found;
}

/* kcr_manager_get of an uncached resource: a GET, made a store object
 * (managedFields dropped, as the caches drop them). */
static kcr_err get_through(kcr_manager *m, const struct kcr_gvr *gvr, const char *ns,
                           const char *name, kcr_obj **out, struct kcr_errinfo *ei)
{
  struct kcr_ref ref = {.gvr = gvr, .ns = gvr->namespaced ? ns : NULL, .name = name};
  cJSON *t = NULL;
  kcr_err rc = kcr_get(m->client, &ref, &t, ei);
  if(!rc)
    rc = kcr_obj_from_json(t, 0, out, ei);
  cJSON_Delete(t);
  return rc;
}

/* kcr_manager_list_typed's objects of an uncached resource: a LIST. */
static kcr_err list_through(kcr_manager *m, const struct kcr_gvr *gvr, const char *ns,
                            kcr_obj ***got, size_t *ngot, struct kcr_errinfo *ei)
{
  struct kcr__obj_list l = {.who = "kcr_manager_list_typed"};
  kcr_err rc = kcr_list_each_text(m->client, &(struct kcr_ref){.gvr = gvr, .ns = ns},
                                  NULL, kcr__obj_list_add, &l, NULL, ei);
  if(rc) {
    kcr_objs_unref(l.objs, l.n);
    return rc;
  }
  *got = l.objs;
  *ngot = l.n;
  return KCR_OK;
}

/* KCR_EBUDGET for a cached read of inf, over its byte budget. */
static kcr_err over_budget(kcr_informer *inf, struct kcr_errinfo *ei)
{
  char why[WHY_MAX];
  kcr_informer_why_unsynced(inf, why, sizeof(why));
  return kcr_errinfo_set(ei, KCR_EBUDGET, "%s", *why ? why : "over its byte budget");
}

kcr_err kcr_manager_get(kcr_manager *m, const struct kcr_gvr *gvr, const char *ns,
                        const char *name, kcr_obj **out, struct kcr_errinfo *ei)
{
  kcr_informer *inf = NULL, *all = NULL;
  char res[RES_MAX];

  if(!out)
    return kcr_errinfo_set(ei, KCR_EINVAL, "kcr_manager_get: no out");
  *out = NULL;
  if(!gvr || !gvr->version || !gvr->resource || !name)
    return kcr_errinfo_set(ei, KCR_EINVAL, "kcr_manager_get: %s is required",
                           !name ? "name" : "gvr");
  if(gvr->namespaced && (!ns || !*ns))
    return kcr_errinfo_set(ei, KCR_EINVAL,
                           "kcr_manager_get: %s is namespaced: a namespace is required",
                           gvr->resource);
  res_name(gvr, res);
  if(is_uncached(m, res))
    return get_through(m, gvr, ns, name, out, ei);
  pthread_mutex_lock(&m->inf_mu);
  for(size_t i = 0; i < m->ninf && !inf; i++) {
    if(strcmp(m->inf[i].res, res))
      continue;
    if(!*m->inf[i].ns || *m->inf[i].ns == '@')
      all = m->inf[i].inf;
    else if(ns && ns_in(m->inf[i].ns, ns))
      inf = m->inf[i].inf;
  }
  pthread_mutex_unlock(&m->inf_mu);
  if(!inf)
    inf = all;
  if(!inf)
    return kcr_errinfo_set(ei, KCR_EINVAL,
                           "kcr_manager_get: no informer of %s%s%s in this manager "
                           "(register one with kcr_manager_informer)",
                           res, ns ? " for namespace " : "", ns ? ns : "");
  if(kcr_informer_over_budget(inf)) /* its empty cache would say "not found" */
    return over_budget(inf, ei);
  /* The store's objects are immutable and refcounted: the reference stays
   * valid after the informer is gone. */
  *out = kcr_store_ref(kcr_informer_store(inf), gvr->namespaced ? ns : NULL, name);
  if(!*out)
    return kcr_errinfo_set(ei, KCR_ENOTFOUND, "%s %s%s%s: not in the cache", res,
                           gvr->namespaced && ns ? ns : "",
                           gvr->namespaced && ns ? "/" : "", name);
  return KCR_OK;
}

kcr_err kcr_manager_get_typed(kcr_manager *m, const struct kcr_type *t,
                              const struct kcr_gvr *gvr, const char *ns, const char *name,
                              unsigned flags, struct kcr_arena *a, void *out,
                              kcr_obj **obj, struct kcr_errinfo *ei)
{
  const char *json;
  size_t len = 0;
  kcr_obj *o;
  kcr_err rc;

  if(obj)
    *obj = NULL;
  if(!t || !a || !out || (!obj && !(flags & KCR_TYPED_COPY)))
    return kcr_errinfo_set(ei, KCR_EINVAL, "kcr_manager_get_typed: %s",
                           !t     ? "no type"
                           : !a   ? "no arena"
                           : !out ? "no out"
                                  : "a view (flags without KCR_TYPED_COPY) needs obj, "
                                    "the reference it borrows from");
  if((rc = kcr_manager_get(m, gvr, ns, name, &o, ei)))
    return rc;
  json = kcr_obj_json(o, &len); /* checked when it was stored */
  rc = kcr_typed_decode(t, json, len, flags | KCR_TYPED_TRUSTED, a, out, ei);
  if(rc || !obj)
    kcr_obj_unref(o);
  else
    *obj = o;
  return rc;
}

/* The stores kcr_manager_list_typed reads for gvr in ns (NULL: every
 * namespace): every informer of the resource, or the one whose namespaces
 * hold ns, else the one of every namespace or of a namespace selector
 * (*filter set: keep only ns's objects). 0: none. */
static size_t list_stores(kcr_manager *m, const char *res, const char *ns,
                          kcr_informer *out[MAX_INFORMERS], bool *filter)
{
  kcr_informer *all = NULL;
  size_t n = 0;

  *filter = false;
  pthread_mutex_lock(&m->inf_mu);
  for(size_t i = 0; i < m->ninf; i++) {
    if(strcmp(m->inf[i].res, res))
      continue;
    if(!ns || ns_in(m->inf[i].ns, ns)) {
      out[n++] = m->inf[i].inf;
      *filter = ns && strcmp(m->inf[i].ns, ns); /* a set of several */
    } else if(!*m->inf[i].ns || *m->inf[i].ns == '@') {
      all = m->inf[i].inf;
    }
  }
  pthread_mutex_unlock(&m->inf_mu);
  if(!n && all) {
    out[n++] = all;
    *filter = true;
  }
  return n;
}

kcr_err kcr_manager_list_typed(kcr_manager *m, const struct kcr_type *t,
                               const struct kcr_gvr *gvr, const char *ns,
                               const char *index, struct kcr_str value, unsigned flags,
                               struct kcr_arena *a, void **items, size_t *n,
                               kcr_obj ***objs, struct kcr_errinfo *ei)
{
  kcr_informer *st[MAX_INFORMERS];
  kcr_obj **got = NULL, **part;
  size_t ngot = 0, npart, nst, kept = 0;
  char res[RES_MAX], *key = NULL;
  bool filter;
  kcr_err rc = KCR_OK;

  if(objs)
    *objs = NULL;
  if(items)
    *items = NULL;
  if(n)
    *n = 0;
  if(!t || !a || !items || !n || (!objs && !(flags & KCR_TYPED_COPY)) || !gvr ||
     !gvr->version || !gvr->resource || (index && !value.s))
    return kcr_errinfo_set(ei, KCR_EINVAL, "kcr_manager_list_typed: %s",
                           !t || !a || !items || !n ? "t, a, items and n are required"
                           : !gvr || !gvr->version || !gvr->resource
                               ? "gvr (with version and resource) is required"
                           : index && !value.s
                               ? "an index needs a value"
                               : "a view (flags without KCR_TYPED_COPY) needs objs, "
                                 "the references it borrows from");
  if(!gvr->namespaced || (ns && !*ns))
    ns = NULL;
  res_name(gvr, res);
  if(is_uncached(m, res)) {
    if(index)
      return kcr_errinfo_set(ei, KCR_EINVAL,
                             "kcr_manager_list_typed: %s is uncached "
                             "(kcr_manager_uncached): it has no index \"%s\"",
                             res, index);
    nst = 0;
    filter = false;
    rc = list_through(m, gvr, ns, &got, &ngot, ei);
  } else if(!(nst = list_stores(m, res, ns, st, &filter)))
    return kcr_errinfo_set(
        ei, KCR_EINVAL,
        "kcr_manager_list_typed: no informer of %s%s%s in this manager "
        "(register one with kcr_manager_informer)",
        res, ns ? " for namespace " : "", ns ? ns : "");
  /* An index value holding a NUL matches nothing: index values are C strings. */
  if(index && !memchr(value.s, 0, value.n) && !(key = kcr_arena_alloc(a, value.n + 1)))
    return KCR_ENOMEM;
  if(index && !key)
    return KCR_OK;
  if(key) {
    memcpy(key, value.s, value.n);
    key[value.n] = 0;
  }
  for(size_t i = 0; i < nst; i++)
    if(kcr_informer_over_budget(st[i])) /* its empty cache would list nothing */
      return over_budget(st[i], ei);
  for(size_t i = 0; i < nst && !rc; i++) {
    kcr_store *sti = kcr_informer_store(st[i]);
    rc = index ? kcr_store_ref_by_index(sti, index, key, &part, &npart)
               : kcr_store_ref_all(sti, &part, &npart);
    if(rc == KCR_EINVAL)
      rc = kcr_errinfo_set(ei, KCR_EINVAL,
                           "kcr_manager_list_typed: the store of %s has no index \"%s\" "
                           "(kcr_store_add_index, kcr_store_add_label_index)",
                           res, index);
    if(rc)
      break;
    if(!got || !npart) { /* the first store's, or nothing to add */
      kcr_obj **keep = got ? got : part;
      if(keep != part)
        free(part);
      got = keep;
      ngot += npart;
      continue;
    }
    kcr_obj **g = realloc(got, (ngot + npart) * sizeof(*got));
    if(!g) {
      kcr_objs_unref(part, npart);
      rc = KCR_ENOMEM;
      break;
    }
    got = g;
    memcpy(got + ngot, part, npart * sizeof(*got));
    ngot += npart;
    free(part);
  }
  for(size_t i = 0; i < ngot; i++) /* the namespace's, from a cluster-wide store */
    if(rc || (filter && strcmp(kcr_obj_ns(got[i]), ns)))
      kcr_obj_unref(got[i]);
    else
      got[kept++] = got[i];
  char *v = rc || !kept ? NULL : kcr_arena_alloc(a, kept * t->size);
  if(!rc && kept && !v)
    rc = KCR_ENOMEM;
  for(size_t i = 0; i < kept && !rc; i++) {
    size_t len = 0;
    const char *json = kcr_obj_json(got[i], &len); /* checked when it was stored */
    rc =
        kcr_typed_decode(t, json, len, flags | KCR_TYPED_TRUSTED, a, v + i * t->size, ei);
    if(rc && ei) { /* the object's key before the decoder's message */
      char *why = ei->message;
      ei->message = NULL;
      kcr_errinfo_set(ei, rc, "kcr_manager_list_typed: %s: %s", kcr_obj_key(got[i]),
                      why ? why : kcr_strerror(rc));
      free(why);
    }
  }
  if(rc) {
    kcr_objs_unref(got, kept);
    return rc;
  }
  *items = v;
  *n = kept;
  if(objs)
    *objs = got;
  else
    kcr_objs_unref(got, kept);
  return KCR_OK;
}

kcr_err kcr_manager_recorder(kcr_manager *m, const struct kcr_recorder_opts *ro,
                             kcr_recorder **out, struct kcr_errinfo *ei)
{
  struct kcr_recorder_opts o;
  kcr_err rc;

  if(!out)
    return kcr_errinfo_set(ei, KCR_EINVAL, "kcr_manager_recorder: no out");
  *out = NULL;
  if(!ro)
    return kcr_errinfo_set(ei, KCR_EINVAL, "kcr_manager_recorder: no opts");
  if(m->nrec == MAX_RECORDERS)
    return kcr_errinfo_set(ei, KCR_EINVAL, "kcr_manager_recorder: more than %d recorders",
                           MAX_RECORDERS);
  o = *ro;
  if(!o.client && !o.sink)
    o.client = m->client;
  if(!o.metrics)
    o.metrics = m->metrics;
  if((rc = kcr_recorder_new(&o, &m->rec[m->nrec], ei)))
    return rc;
  *out = m->rec[m->nrec++];
  return KCR_OK;
}

kcr_err kcr_manager_add(kcr_manager *m, kcr_controller *c)
{
  if(!c || m->nctl == MAX_CONTROLLERS)
    return KCR_EINVAL;
  if(m->ring) {
    kcr_err rc = kcr_controller_shard(c, m->ring);
    if(rc)
      return rc;
  }
  m->ctl[m->nctl++] = c;
  return KCR_OK;
}

void kcr_manager_stop(kcr_manager *m)
{
  if(!atomic_exchange(&m->stop, true))
    sem_post(&m->wake);
}

int kcr_manager_busy(kcr_manager *m)
{
  int n = 0;
  for(size_t i = 0; i < m->nctl; i++)
    n += kcr_controller_busy(m->ctl[i]);
  return n;
}

kcr_ring *kcr_manager_ring(kcr_manager *m) { return m->ring; }

bool kcr_manager_leading(kcr_manager *m)
{
  if(m->ring && !m->o.leader_elect)
    return false;
  return !m->o.leader_elect ||
         (atomic_load(&m->leader_ready) && kcr_leader_is_leader(m->leader));
}

/* /readyz "informers": every informer synced, but for those awaiting
 * their CRD (kcr_informer_opts.await_crd) and those added while running
 * (not over their budget), which pass with a note naming them: the
 * manager runs without them, and only their controllers and readers
 * wait. */
static bool informers_synced(void *ud, char *reason, size_t n)
{
  kcr_manager *m = ud;
  struct kcr_buf note = KCR_BUF_INIT;
  char why[WHY_MAX];
  bool ok = true;

  pthread_mutex_lock(&m->inf_mu);
  for(size_t i = 0; i < m->ninf && ok; i++) {
    kcr_informer *inf = m->inf[i].inf;
    if(!kcr_informer_why_unsynced(inf, why, sizeof(why)))
      continue;
    if(kcr_informer_awaiting_crd(inf) ||
       (m->inf[i].late && !kcr_informer_over_budget(inf)))
      kcr_buf_printf(&note, "%s%s%s", note.len ? "; " : "", why,
                     m->inf[i].late ? " (added while running)" : "");
    else {
      snprintf(reason, n, "%s", why);
      ok = false;
    }
  }
  pthread_mutex_unlock(&m->inf_mu);
  if(ok && note.len)
    snprintf(reason, n, "%s", kcr_buf_str(&note));
  kcr_buf_cleanup(&note);
  return ok;
}

static bool ping(void *ud, char *reason, size_t n) { return true; }

/* /readyz "ring" (kcr_manager_opts.ring): a member whose Lease is within
 * its renew deadline; the reason tells the members and the buckets it owns
 * of those assigned to it (fewer while a hand-over is under way). */
static bool ring_ready(void *ud, char *reason, size_t n)
{
  kcr_manager *m = ud;
  kcr_ring_view *v;
  size_t assigned = 0;
  bool ok;

  if(!m->ring) {
    snprintf(reason, n, "not in the ring yet");
    return false;
  }
  v = kcr_ring_view_get(m->ring);
  for(uint64_t b = 0; b < KCR_RING_BUCKETS; b++)
    assigned += kcr_ring_view_assigned(v, b << 56);
  ok = kcr_ring_wait_joined(m->ring, 0) && kcr_ring_may_write(m->ring);
  snprintf(reason, n, "%s: %zu members, %zu of the %zu buckets assigned to it owned",
           ok ? "a member" : "not a member (yet)", kcr_ring_view_len(v),
           kcr_ring_view_owned(v), assigned);
  kcr_ring_view_unref(v);
  return ok;
}

/* Makes the metrics/health servers and binds their addresses now, so that a
 * bad or busy address fails kcr_manager_new with a message naming it,
 * before anything starts. Serving begins in run (start_servers). */
static kcr_err open_servers(kcr_manager *m, struct kcr_errinfo *ei)
{
  const char *addrs[2] = {m->o.metrics_addr, m->o.health_addr};
  bool secure = m->o.metrics_secure;
  struct kcr_buf cert = KCR_BUF_INIT, key = KCR_BUF_INIT;
  kcr_client *auth = NULL;
  kcr_err rc = KCR_OK;

  for(int i = 0; i < 2; i++)
    if(!addrs[i] || !*addrs[i] || !strcmp(addrs[i], "0"))
      addrs[i] = NULL;
  if(secure && addrs[0]) {
    /* The reviews are POSTs: a client without the manager's write gate
     * (a standby replica must answer scrapes too) and with a short timeout,
     * as controller-runtime's 10 s TokenAccessReviewTimeout. */
    struct kcr_client_opts co = m->o.client;
    co.config = m->o.config;
    co.timeout_ms = 10000;
    co.observe = observe;
    co.observe_ud = m;
    rc = kcr_client_new(&co, &auth, ei);
    if(!rc && m->o.metrics_cert_dir) {
      const char *d = m->o.metrics_cert_dir;
      kcr_buf_printf(&cert, "%s/%s", d,
                     m->o.metrics_cert_name ? m->o.metrics_cert_name : "tls.crt");
      kcr_buf_printf(&key, "%s/%s", d,
                     m->o.metrics_key_name ? m->o.metrics_key_name : "tls.key");
      rc = kcr_buf_err(&cert) ? kcr_buf_err(&cert) : kcr_buf_err(&key);
    }
  }
  for(int i = 0; i < 2 && !rc; i++) {
    const char *a = addrs[i];
    bool tls = i == 0 && secure;
    if(!a)
      continue;
    if(i == 1 && !secure && m->srv[0] && !strcmp(a, addrs[0]))
      break; /* one server for both (secure: never; the same port cannot bind) */
    rc = kcr_httpd_new(
        &(struct kcr_httpd_opts){
            .addr = a,
            /* secure: the plain health server must not serve /metrics */
            .metrics = i == 1 && secure ? NULL : m->metrics,
            .tls = {.enabled = tls,
                    .cert_file = tls && cert.len ? cert.ptr : NULL,
                    .key_file = tls && key.len ? key.ptr : NULL},
            .auth_client = tls ? auth : NULL},
        &m->srv[i], ei);
    if(!rc && !tls) /* the probes: on a plain server only */
      rc = kcr_httpd_add_healthz(m->srv[i], "ping", ping, m);
    if(!rc && !tls)
      rc = kcr_httpd_add_readyz(m->srv[i], "informers", informers_synced, m);
    if(!rc && !tls && m->o.ring)
      rc = kcr_httpd_add_readyz(m->srv[i], "ring", ring_ready, m);
    if(!rc)
      rc = kcr_httpd_listen(m->srv[i], ei);
  }
  kcr_client_free(auth); /* the server holds its own reference */
  kcr_buf_cleanup(&cert);
  kcr_buf_cleanup(&key);
  if(!rc)
    m->health_port = m->srv[1]                           ? kcr_httpd_port(m->srv[1])
                     : m->srv[0] && !m->o.metrics_secure ? kcr_httpd_port(m->srv[0])
                                                         : 0;
  return rc;
}

static bool webhooks_serving(void *ud, char *reason, size_t n)
{
  kcr_manager *m = ud;
  if(!atomic_load(&m->webhooks_serving)) {
    snprintf(reason, n, "the webhook server is not serving");
    return false;
  }
  if(m->certs && !kcr__certs_serving(m->certs)) {
    snprintf(reason, n, "no webhook certificate from the Secret yet");
    return false;
  }
  return true;
}

static bool certs_leading(void *ud) { return kcr_manager_leading(ud); }

/* The webhook server with the library's certificates (kcr/certs.h): a
 * self-signed stand-in until kcr_certs_start (run) serves the Secret's. */
static kcr_err open_certs(kcr_manager *m, struct kcr_errinfo *ei)
{
  struct kcr_certs_opts co = *m->o.webhook_certs;
  struct kcr_client_opts clo = m->o.client;
  kcr_client *c = NULL;
  kcr_err rc;

  /* Its own client: every replica may create the Secret before anyone
   * leads, so no leader-election write gate. */
  clo.config = m->o.config;
  clo.observe = observe;
  clo.observe_ud = m;
  if((rc = kcr_httpd_new(
          &(struct kcr_httpd_opts){.addr = m->o.webhook_addr, .tls = {.enabled = true}},
          &m->srv[2], ei)) ||
     (rc = kcr_client_new(&clo, &c, ei)))
    return rc;
  co.client = c;
  co.server = m->srv[2];
  if(!co.leading) {
    co.leading = certs_leading;
    co.leading_ud = m;
  }
  if(!co.ns)
    co.ns = m->lease_ns;
  rc = kcr_certs_new(&co, &m->certs, ei);
  kcr_client_free(c); /* the certs hold their own reference */
  if(!rc)
    rc = kcr_httpd_listen(m->srv[2], ei);
  for(int i = 0; !rc && i < 2; i++)
    if(m->srv[i] && (i == 1 || !m->o.metrics_secure))
      rc = kcr_httpd_add_readyz(m->srv[i], "webhooks", webhooks_serving, m);
  return rc;
}

/* The webhook server: made and bound now, served from run. Its readiness
 * check on the health server does not wait for the informers. */
static kcr_err open_webhook_server(kcr_manager *m, struct kcr_errinfo *ei)
{
  const char *a = m->o.webhook_addr;
  const char *d = m->o.webhook_cert_dir ? m->o.webhook_cert_dir
                                        : "/tmp/k8s-webhook-server/serving-certs";
  struct kcr_buf cert = KCR_BUF_INIT, key = KCR_BUF_INIT;
  kcr_err rc;

  if(!a || !*a || !strcmp(a, "0"))
    return KCR_OK;
  if(m->o.webhook_certs) {
    if(m->o.webhook_cert_dir)
      return kcr_errinfo_set(ei, KCR_EINVAL,
                             "manager %s: webhook_certs and "
                             "webhook_cert_dir exclude each other",
                             m->name);
    return open_certs(m, ei);
  }
  kcr_buf_printf(&cert, "%s/%s", d,
                 m->o.webhook_cert_name ? m->o.webhook_cert_name : "tls.crt");
  kcr_buf_printf(&key, "%s/%s", d,
                 m->o.webhook_key_name ? m->o.webhook_key_name : "tls.key");
  rc = kcr_buf_err(&cert) ? kcr_buf_err(&cert) : kcr_buf_err(&key);
  if(!rc)
    rc = kcr_httpd_new(
        &(struct kcr_httpd_opts){
            .addr = a,
            .tls = {.enabled = true, .cert_file = cert.ptr, .key_file = key.ptr}},
        &m->srv[2], ei);
  if(!rc)
    rc = kcr_httpd_listen(m->srv[2], ei);
  for(int i = 0; !rc && i < 2; i++)
    if(m->srv[i] && (i == 1 || !m->o.metrics_secure))
      rc = kcr_httpd_add_readyz(m->srv[i], "webhooks", webhooks_serving, m);
  kcr_buf_cleanup(&cert);
  kcr_buf_cleanup(&key);
  return rc;
}

/* The webhook server, or NULL with ei saying how to get one. */
static kcr_httpd *webhook_server(kcr_manager *m, const void *opts, struct kcr_errinfo *ei)
{
  if(!m || !opts) {
    kcr_errinfo_set(ei, KCR_EINVAL, "manager: no manager or no webhook options");
    return NULL;
  }
  if(!m->srv[2])
    kcr_errinfo_set(ei, KCR_EINVAL,
                    "manager %s: no webhook server (set kcr_manager_opts.webhook_addr)",
                    m->name);
  return m->srv[2];
}

kcr_err kcr_manager_add_webhook(kcr_manager *m, const struct kcr_webhook_opts *opts,
                                struct kcr_errinfo *ei)
{
  kcr_httpd *srv = webhook_server(m, opts, ei);
  struct kcr_webhook_opts o;

  if(!srv)
    return KCR_EINVAL;
  o = *opts;
  if(!o.metrics)
    o.metrics = m->metrics;
  return kcr_webhook_add(srv, &o, ei);
}

kcr_err kcr_manager_add_conversion(kcr_manager *m, const struct kcr_conversion_opts *opts,
                                   struct kcr_errinfo *ei)
{
  kcr_httpd *srv = webhook_server(m, opts, ei);
  struct kcr_conversion_opts o;

  if(!srv)
    return KCR_EINVAL;
  o = *opts;
  if(!o.metrics)
    o.metrics = m->metrics;
  return kcr_conversion_add(srv, &o, ei);
}

int kcr_manager_webhook_port(kcr_manager *m) { return m ? kcr_httpd_port(m->srv[2]) : 0; }

static kcr_err start_servers(kcr_manager *m)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  kcr_err rc = KCR_OK;

  for(int i = 0; i < 3 && !rc; i++) {
    if(!m->srv[i])
      continue;
    rc = kcr_httpd_start(m->srv[i], &ei);
    if(rc)
      KCR_LOG(KCR_LOG_ERROR,
              i == 2 ? "manager: cannot start the webhook server"
                     : "manager: cannot start the metrics/health server",
              KCR_S("address", i == 2   ? m->o.webhook_addr
                               : i == 1 ? m->o.health_addr
                                        : m->o.metrics_addr),
              KCR_S("detail", ei.message));
    else if(i == 2)
      atomic_store(&m->webhooks_serving, true);
  }
  kcr_errinfo_cleanup(&ei);
  return rc;
}

static void on_lost(void *ud)
{
  kcr_manager *m = ud;
  atomic_store(&m->lost, true);
  kcr_manager_stop(m);
}

static void *signal_thread(void *p)
{
  kcr_manager *m = p;
  sigset_t set;
  int sig;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  if(sigwait(&set, &sig) == 0 && !atomic_load(&m->stop)) {
    KCR_LOG(KCR_LOG_INFO, "manager: signal received; shutting down",
            KCR_S("signal", sig == SIGINT ? "SIGINT" : "SIGTERM"));
    kcr_manager_stop(m);
  }
  return NULL;
}

/* The first informer not synced (but for those awaiting their CRD and
 * those added while run runs: rule 5), or NULL. One removed meanwhile
 * stays valid (retired) and is stopped. */
static kcr_informer *first_unsynced(kcr_manager *m)
{
  kcr_informer *inf = NULL;
  pthread_mutex_lock(&m->inf_mu);
  for(size_t i = 0; i < m->ninf && !inf; i++)
    if(!m->inf[i].late && !kcr_informer_has_synced(m->inf[i].inf) &&
       !kcr_informer_awaiting_crd(m->inf[i].inf))
      inf = m->inf[i].inf;
  pthread_mutex_unlock(&m->inf_mu);
  return inf;
}

/* Waits until all informers synced (one awaiting its CRD is not waited
 * for: only its controllers wait); names the first that did not. */
static bool wait_synced(kcr_manager *m)
{
  uint64_t deadline = kcr_time_deadline_ms(m->o.sync_timeout_ms); /* FOREVER: never */
  kcr_informer *inf;
  while((inf = first_unsynced(m))) {
    uint64_t now = kcr_time_mono_ms();
    if(atomic_load(&m->stop))
      return false;
    if(now >= deadline) {
      char why[WHY_MAX];
      kcr_informer_why_unsynced(inf, why, sizeof(why));
      KCR_LOG(KCR_LOG_ERROR,
              "manager: timed out waiting for caches to sync; check the "
              "resource exists (CRD installed: or set await_crd to run without "
              "it until it is) and RBAC allows list and watch",
              KCR_S("informer", kcr_informer_name(inf)), KCR_S("why", why),
              KCR_I("timeoutMs", m->o.sync_timeout_ms));
      return false;
    }
    kcr_informer_wait_synced(inf, deadline - now < 200 ? deadline - now : 200);
  }
  return true;
}

/* Stops every informer (run is ending); none added from now on starts. */
static void stop_informers(kcr_manager *m)
{
  kcr_informer *v[MAX_INFORMERS];
  size_t n;
  pthread_mutex_lock(&m->inf_mu);
  m->inf_running = false;
  n = m->ninf;
  for(size_t i = 0; i < n; i++)
    v[i] = m->inf[i].inf;
  pthread_mutex_unlock(&m->inf_mu);
  for(size_t i = 0; i < n; i++)
    kcr_informer_stop(v[i]);
}

/* Makes and starts the elector (leader_elect); false when it cannot. */
static bool start_elector(kcr_manager *m)
{
  struct kcr_leader_opts lo = {.client = m->client,
                               .ns = m->lease_ns,
                               .name = m->lease_name,
                               .identity = m->o.identity,
                               .lease_duration_ms = m->o.lease_duration_ms,
                               .renew_deadline_ms = m->o.renew_deadline_ms,
                               .retry_period_ms = m->o.retry_period_ms,
                               .metrics = m->metrics,
                               .on_stopped_leading = on_lost,
                               .ud = m};
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  kcr_err rc = kcr_leader_new(&lo, &m->leader, &ei);
  if(rc)
    KCR_LOG(KCR_LOG_ERROR, "manager: cannot start leader election",
            KCR_S("err", kcr_err_name(rc)), KCR_S("detail", ei.message));
  kcr_errinfo_cleanup(&ei);
  if(rc)
    return false;
  atomic_store(&m->leader_ready, true);
  if(kcr_leader_start(m->leader)) {
    KCR_LOG(KCR_LOG_ERROR, "manager: cannot start leader election");
    return false;
  }
  return true;
}

/* Starts the elector and waits until this instance leads (or stopped). */
static bool become_leader(kcr_manager *m)
{
  if(!start_elector(m))
    return false;
  while(!atomic_load(&m->stop))
    if(kcr_leader_wait(m->leader, 200))
      return true;
  return false;
}

/* Starts the ring and waits until this replica is a member (or stopped,
 * or lost). */
static bool join_ring(kcr_manager *m)
{
  if(kcr_ring_start(m->ring)) {
    KCR_LOG(KCR_LOG_ERROR, "manager: cannot start the ring (out of threads?)");
    return false;
  }
  KCR_LOG(KCR_LOG_INFO, "manager: joining the ring",
          KCR_S("identity", kcr_ring_identity(m->ring)));
  while(!atomic_load(&m->stop) && !kcr_ring_lost(m->ring))
    if(kcr_ring_wait_joined(m->ring, 200)) {
      kcr_ring_view *v = kcr_ring_view_get(m->ring);
      KCR_LOG(KCR_LOG_INFO, "manager: joined the ring",
              KCR_I("members", (long long)kcr_ring_view_len(v)),
              KCR_I("bucketsOwned", (long long)kcr_ring_view_owned(v)));
      kcr_ring_view_unref(v);
      return true;
    }
  return false;
}

/* What is left of the time until deadline (KCR_FOREVER: no deadline). */
static uint64_t ms_until(uint64_t deadline)
{
  uint64_t now = kcr_time_mono_ms();
  return deadline == KCR_FOREVER ? KCR_FOREVER : deadline > now ? deadline - now : 0;
}

/* The recorders' pending events go out now, while the lease is still
 * held and renewed (the write gate closes renew_deadline after the last
 * renewal, so a flush after the elector stops would be refused), within
 * what is left of the grace period. After a lost lease they are dropped:
 * no write of this replica would be let out. */
static void flush_recorders(kcr_manager *m, uint64_t grace_end)
{
  size_t dropped = 0;

  if(!atomic_load(&m->lost)) {
    for(size_t i = 0; i < m->nrec; i++)
      if(kcr_recorder_flush(m->rec[i], ms_until(grace_end)))
        KCR_LOG(KCR_LOG_WARN, "manager: events not flushed within the grace period",
                KCR_I("graceMs", m->o.grace_ms));
    return;
  }
  for(size_t i = 0; i < m->nrec; i++)
    dropped += kcr__recorder_discard(m->rec[i]);
  if(m->nrec)
    KCR_LOG(KCR_LOG_WARN,
            "manager: leader election lost; the recorders' pending event "
            "writes are dropped, not sent",
            KCR_I("pendingWrites", dropped));
}

int kcr_manager_run(kcr_manager *m)
{
  pthread_t sig_th;
  bool have_sig_th = false;
  int status = 0;
  size_t started = 0;
  uint64_t grace_end;

  if(!m->o.no_signals) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, NULL); /* inherited by every thread below */
    have_sig_th = !pthread_create(&sig_th, NULL, signal_thread, m);
  }
  if(m->certs) { /* the certificate first: the server serves it from the start */
    struct kcr_errinfo ei = KCR_ERRINFO_INIT;
    if(kcr_certs_start(m->certs, &ei)) {
      KCR_LOG(KCR_LOG_ERROR, "manager: cannot read or make the webhook certificates",
              KCR_S("detail", ei.message ? ei.message : "?"));
      kcr_errinfo_cleanup(&ei);
      status = 2;
      goto out;
    }
  }
  if(start_servers(m)) {
    status = 2;
    goto out;
  }
  pthread_mutex_lock(&m->inf_mu);
  m->inf_running = true; /* from now on an informer added starts at once */
  for(size_t i = 0; i < m->ninf && !status; i++) {
    if(kcr_informer_start(m->inf[i].inf)) {
      KCR_LOG(KCR_LOG_ERROR, "manager: cannot start an informer (out of threads?)",
              KCR_S("informer", kcr_informer_name(m->inf[i].inf)));
      status = 1;
    }
  }
  pthread_mutex_unlock(&m->inf_mu);
  if(status)
    goto out;
  if(!wait_synced(m)) {
    status = atomic_load(&m->stop) ? 0 : 1;
    goto out;
  }
  pthread_mutex_lock(&m->inf_mu);
  size_t ninf = m->ninf;
  pthread_mutex_unlock(&m->inf_mu);
  KCR_LOG(KCR_LOG_INFO, "manager: caches synced", KCR_I("informers", ninf));
  /* In a ring the leader's Lease is for the cluster's singletons alone (the
   * webhook certificates): the controllers do not wait for it. */
  if(m->o.leader_elect && m->ring && !start_elector(m)) {
    status = 1;
    goto out;
  }
  if(m->o.leader_elect && !m->ring && !become_leader(m)) {
    status = atomic_load(&m->lost) ? 1 : 0;
    goto out;
  }
  if(m->ring && !join_ring(m)) {
    status = atomic_load(&m->stop) ? 0 : 1;
    goto out;
  }
  for(; started < m->nctl; started++) {
    if(kcr_controller_start(m->ctl[started])) {
      KCR_LOG(KCR_LOG_ERROR, "manager: cannot start a controller (out of threads?)",
              KCR_S("controller", kcr_controller_name(m->ctl[started])));
      status = 1;
      goto out;
    }
  }
  while(!atomic_load(&m->stop)) {
    if(!m->ring) {
      sem_wait(&m->wake);
      continue;
    }
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += 200 * 1000000L;
    if(ts.tv_nsec >= 1000000000L) {
      ts.tv_sec++;
      ts.tv_nsec -= 1000000000L;
    }
    sem_timedwait(&m->wake, &ts);
    if(kcr_ring_lost(m->ring) && !atomic_exchange(&m->lost, true))
      atomic_store(&m->stop, true);
  }
  if(atomic_load(&m->lost)) {
    KCR_LOG(KCR_LOG_ERROR, m->ring ? "manager: ring Lease lost; stopping without waiting "
                                     "for reconciles (their writes are fenced)"
                                   : "manager: leader election lost; stopping without "
                                     "waiting for reconciles (their writes are fenced)");
    status = 1;
  }
out:
  atomic_store(&m->stop, true); /* the signal thread below must not report one */
  grace_end = kcr_time_deadline_ms(m->o.grace_ms);
  for(size_t i = 0; i < m->nctl; i++) {
    int left =
        kcr_controller_stop(m->ctl[i], atomic_load(&m->lost) ? 0 : ms_until(grace_end));
    if(left)
      KCR_LOG(KCR_LOG_WARN,
              "manager: reconciles still running after the grace period; "
              "kcr_manager_free would wait for them, exiting the process does not",
              KCR_S("controller", kcr_controller_name(m->ctl[i])),
              KCR_I("running", left));
  }
  flush_recorders(m, grace_end);
  if(m->leader)
    kcr_leader_stop(m->leader); /* releases the lease if we hold it */
  if(m->ring)
    kcr_ring_stop(m->ring); /* leaves: the others take its share at once */
  stop_informers(m);
  kcr_certs_stop(m->certs);
  for(int i = 0; i < 3; i++)
    if(m->srv[i])
      kcr_httpd_stop(m->srv[i]);
  atomic_store(&m->webhooks_serving, false);
  if(have_sig_th) {
    pthread_kill(sig_th, SIGTERM);
    pthread_join(sig_th, NULL);
  }
  KCR_LOG(KCR_LOG_INFO, "manager: stopped", KCR_I("exitCode", status));
  return status;
}

void kcr_manager_free(kcr_manager *m)
{
  if(!m)
    return;
  for(size_t i = 0; i < m->nctl; i++)
    kcr_controller_free(m->ctl[i]);
  /* No reconcile runs: nothing records events any more. Before the gate
   * changes, so that what they flush is judged by this manager's fence. */
  for(size_t i = 0; i < m->nrec; i++)
    kcr_recorder_free(m->rec[i]);
  /* Objects that outlive the manager may hold the client (a recorder): the
   * gate must no longer reach m or its elector, and the lease is no longer
   * ours to write under. Returns once no call of the old gate runs. */
  if(m->client && (m->o.leader_elect || m->ring))
    kcr_client_set_write_gate(m->client, kcr_write_gate_closed, NULL);
  if(m->client) /* the observer writes into m's metrics */
    kcr_client_set_observer(m->client, NULL, NULL);
  kcr_leader_free(m->leader);
  kcr_ring_free(m->ring);
  for(size_t i = 0; i < m->ninf; i++) {
    kcr_informer_free(m->inf[i].inf);
    free(m->inf[i].res);
    free(m->inf[i].ns);
    free(m->inf[i].opts);
  }
  for(size_t i = 0; i < m->nretired; i++)
    kcr_informer_free(m->retired[i]);
  free(m->retired);
  kcr_certs_free(m->certs); /* before the server it hands certificates to */
  for(int i = 0; i < 3; i++)
    kcr_httpd_free(m->srv[i]);
  kcr_client_free(m->client);
  kcr_metrics_free(m->metrics);
  sem_destroy(&m->wake);
  pthread_mutex_destroy(&m->inf_mu);
  free(m->name);
  for(size_t i = 0; i < m->nuncached; i++)
    free(m->uncached[i]);
  free(m->lease_ns);
  free(m->lease_name);
  free(m);
}
