/* DESIGN: leader election on a coordination.k8s.io/v1 Lease, client-go's
 * algorithm (tools/leaderelection) on one thread per elector.
 *
 *   ACQUIRING --try ok--> LEADING --no renew for renew_deadline,
 *       |                    |       or lease seen held by another--> LOST
 *       |                    +--stop--> (on_stopped_leading, release) STOPPED
 *       +--stop--> STOPPED
 *
 * One attempt (try_once), as tryAcquireOrRenew:
 *   - leader with a cached Lease: optimistic PUT of a renewed record on the
 *     cached resourceVersion (no GET); only a 409 falls back to the slow path.
 *   - GET; 404 -> POST a record naming us (409 AlreadyExists: lost the race).
 *   - The record (the Lease's spec, as printed JSON) is compared with the
 *     last one seen; when it differs, seen_ms := local monotonic now. The
 *     lease is valid while seen_ms + leaseDurationSeconds > now. Times in the
 *     record are never compared with the local clock.
 *   - Held by another identity and valid: not acquired. Empty holder: free.
 *   - Else PUT our record on the GET's resourceVersion (409: someone else
 *     won): acquireTime/leaseTransitions kept if we already are the holder,
 *     else acquireTime = now and leaseTransitions + 1.
 *
 * Invariants:
 *   - leading is true only between a successful write naming us and the
 *     moment the thread decides leadership ended; it is cleared (and the
 *     gauge set to 0) before on_stopped_leading runs and before the lease is
 *     released, so is_leader() never overlaps a successor that took the
 *     lease through our release. announced and lost are set after the
 *     respective callback returned, so a waiter woken by them sees its
 *     effects.
 *   - last_ok_ms is the local time at which the last successful write was
 *     *started*: the server cannot have applied it earlier, so every other
 *     candidate saw the record change at or after it, and renew_deadline <
 *     lease_duration measured from it expires first on our side.
 *   - Every request has a deadline (renew_deadline at most), so stop waits at
 *     most for one bounded request.
 *
 * Deliberate differences from client-go: a record without a positive
 * leaseDurationSeconds is held for our own lease_duration (client-go: 0, it
 * is taken at once); seeing another holder while leading ends leadership at
 * once (client-go keeps retrying until the renew deadline, which cannot
 * succeed before the other's lease expires); a lost elector does not try to
 * release; release checks with a GET that we still hold the lease;
 * on_stopped_leading is only called if we led, and before the release.
 *
 * Lock order: le->mu only. It guards the flags below; it is never held
 * during I/O, callbacks or metric updates. Everything else (cached lease,
 * seen record, log memory) belongs to the elector thread. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "kcr/json.h"
#include "kcr/leader.h"
#include "kcr/log.h"
#include "kcr/path.h"
#include "kcr/time.h"

#include "core/assert-int.h"

#define JITTER_FACTOR    1.2
#define RELEASE_ATTEMPTS 5

static const struct kcr_gvr lease_gvr = {.group = "coordination.k8s.io",
                                         .version = "v1",
                                         .resource = "leases",
                                         .namespaced = true};

enum try_result {
  TRY_OK,   /* the lease names us, freshly written */
  TRY_HELD, /* another identity holds it (valid, or we were leading) */
  TRY_FAIL  /* error or lost a race: try again later */
};

enum logged { LOGGED_NONE, LOGGED_WAITING, LOGGED_EXPIRED };

struct kcr_leader {
  struct kcr_leader_opts o;
  char *ns, *name, *identity, *desc; /* desc: "ns/name" for logs */
  kcr_metric *m_status;

  pthread_mutex_t mu;
  pthread_cond_t cv; /* CLOCK_MONOTONIC; any flag change below */
  pthread_t th;
  bool started, stopping, done, joining, joined;
  bool leading;   /* is_leader(): set before on_started_leading, cleared
                     before on_stopped_leading */
  bool announced; /* on_started_leading has returned */
  bool lost;      /* set after on_stopped_leading returned */

  /* Elector thread only. */
  cJSON *lease;         /* last Lease read or written (its resourceVersion) */
  char *seen_raw;       /* the last record seen (spec as JSON) */
  uint64_t seen_ms;     /* when it was first seen in that state */
  uint64_t seen_dur_ms; /* its leaseDurationSeconds, or our default */
  char *seen_holder;    /* holder of the last record that was not ours */
  uint64_t last_ok_ms;  /* start of the last successful write */
  /* Any thread: writes are allowed while the monotonic time is below this
   * (last_ok_ms + renew_deadline while leading; 0 otherwise). */
  _Atomic uint64_t fence_ms;
  kcr_err last_err;    /* to log a repeated error once */
  char *logged_holder; /* to log "held by"/"expired" once per holder */
  enum logged logged_what;
  unsigned seed;
};

static _Thread_local const kcr_leader *tl_elector;

/* ---- options, identity ------------------------------------------------ */

static char *default_identity(unsigned *seed)
{
  char host[256], hex[17], *id = NULL;
  unsigned char rnd[8];

  if(gethostname(host, sizeof(host)) != 0 || !host[0])
    snprintf(host, sizeof(host), "unknown");
  host[sizeof(host) - 1] = '\0';
  if(getrandom(rnd, sizeof(rnd), GRND_NONBLOCK) != (ssize_t)sizeof(rnd)) {
    uint64_t x = kcr_time_mono_ns() ^ ((uint64_t)getpid() << 32);
    memcpy(rnd, &x, sizeof(rnd));
  }
  for(size_t i = 0; i < sizeof(rnd); i++)
    snprintf(hex + 2 * i, 3, "%02x", rnd[i]);
  *seed ^=
      (unsigned)rnd[0] << 24 | (unsigned)rnd[1] << 16 | (unsigned)rnd[2] << 8 | rnd[3];
  if(asprintf(&id, "%s_%s", host, hex) < 0)
    id = NULL;
  return id;
}

/* Fills in the defaults; KCR_EINVAL naming the option that is wrong. */
static kcr_err check_opts(struct kcr_leader_opts *o, struct kcr_errinfo *ei)
{
  static const char *const fn = "kcr_leader_new";
  if(!o->client)
    return kcr_errinfo_set(ei, KCR_EINVAL, "%s: client is required", fn);
  if(!o->ns || !*o->ns)
    return kcr_errinfo_set(ei, KCR_EINVAL, "%s: ns (the Lease's namespace) is required",
                           fn);
  if(!o->name || !*o->name)
    return kcr_errinfo_set(ei, KCR_EINVAL, "%s: name (the Lease's name) is required", fn);
  if(!o->lease_duration_ms)
    o->lease_duration_ms = 15000;
  if(!o->renew_deadline_ms)
    o->renew_deadline_ms = 10000;
  if(!o->retry_period_ms)
    o->retry_period_ms = 2000;
  /* client-go's rules, on the whole seconds others will read from
   * leaseDurationSeconds (> 0): a renew deadline reaching past them would let
   * a successor start while we still think we lead. */
  if(o->lease_duration_ms < 1000 || o->lease_duration_ms / 1000 > INT32_MAX)
    return kcr_errinfo_set(ei, KCR_EINVAL,
                           "%s: lease_duration_ms must be 1000 .. %llu, not %llu", fn,
                           (unsigned long long)INT32_MAX * 1000 + 999,
                           (unsigned long long)o->lease_duration_ms);
  if(o->lease_duration_ms / 1000 * 1000 <= o->renew_deadline_ms)
    return kcr_errinfo_set(ei, KCR_EINVAL,
                           "%s: renew_deadline_ms (%llu) must be below lease_duration_ms "
                           "in whole seconds (%llu ms)",
                           fn, (unsigned long long)o->renew_deadline_ms,
                           (unsigned long long)(o->lease_duration_ms / 1000 * 1000));
  if((double)o->renew_deadline_ms <= JITTER_FACTOR * (double)o->retry_period_ms)
    return kcr_errinfo_set(ei, KCR_EINVAL,
                           "%s: renew_deadline_ms (%llu) must be more than %.1f * "
                           "retry_period_ms (%llu)",
                           fn, (unsigned long long)o->renew_deadline_ms, JITTER_FACTOR,
                           (unsigned long long)o->retry_period_ms);
  return KCR_OK;
}

kcr_err kcr_leader_new(const struct kcr_leader_opts *o, kcr_leader **out,
                       struct kcr_errinfo *ei)
{
  kcr_leader *le;
  pthread_condattr_t ca;
  kcr_err rc;

  if(!out)
    return kcr_errinfo_set(ei, KCR_EINVAL, "kcr_leader_new: no out");
  *out = NULL;
  if(!o)
    return kcr_errinfo_set(ei, KCR_EINVAL, "kcr_leader_new: no options");
  le = calloc(1, sizeof(*le));
  if(!le)
    return KCR_ENOMEM;
  le->o = *o;
  rc = check_opts(&le->o, ei);
  if(rc) {
    free(le);
    return rc;
  }
  le->o.client = kcr_client_ref(o->client);
  le->o.metrics = kcr_metrics_ref(o->metrics);
  le->seed = (unsigned)kcr_time_mono_ns() ^ (unsigned)getpid();
  atomic_init(&le->fence_ms, 0);
  le->ns = strdup(o->ns);
  le->name = strdup(o->name);
  le->identity =
      o->identity && *o->identity ? strdup(o->identity) : default_identity(&le->seed);
  if(le->ns && le->name && asprintf(&le->desc, "%s/%s", le->ns, le->name) < 0)
    le->desc = NULL;
  pthread_mutex_init(&le->mu, NULL);
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&le->cv, &ca);
  pthread_condattr_destroy(&ca);
  if(!le->ns || !le->name || !le->identity || !le->desc) {
    kcr_leader_free(le);
    return KCR_ENOMEM;
  }
  le->o.ns = le->ns;
  le->o.name = le->name;
  le->o.identity = le->identity;
  if(o->metrics) {
    rc = kcr_metric_gauge(
        o->metrics,
        &(struct kcr_metric_opts){
            .name = "leader_election_master_status",
            .help = "Gauge of if the reporting system is master of the relevant lease, 0 "
                    "indicates backup, 1 indicates master. 'name' is the string used to "
                    "identify the lease. Please make sure to group by name.",
            .label_names = (const char *[]){"name", NULL}},
        &le->m_status, ei);
    if(rc) {
      kcr_leader_free(le);
      return rc;
    }
    kcr_metric_set(le->m_status, (const char *[]){le->name}, 0);
  }
  *out = le;
  return KCR_OK;
}

const char *kcr_leader_identity(const kcr_leader *le) { return le->identity; }

/* ---- waiting and flags ------------------------------------------------- */

/* Sleeps ms or until stop is asked for; false if stopping. */
static bool sleep_unless_stopped(kcr_leader *le, uint64_t ms)
{
  struct timespec ts = kcr_time_mono_after(ms);
  bool stopping;
  pthread_mutex_lock(&le->mu);
  while(!le->stopping && pthread_cond_timedwait(&le->cv, &le->mu, &ts) != ETIMEDOUT)
    ;
  stopping = le->stopping;
  pthread_mutex_unlock(&le->mu);
  return !stopping;
}

static bool is_stopping(kcr_leader *le)
{
  pthread_mutex_lock(&le->mu);
  bool s = le->stopping;
  pthread_mutex_unlock(&le->mu);
  return s;
}

/* Sets one of the flags under mu and wakes waiters. */
static void set_flag(kcr_leader *le, bool *flag, bool v)
{
  pthread_mutex_lock(&le->mu);
  *flag = v;
  pthread_cond_broadcast(&le->cv);
  pthread_mutex_unlock(&le->mu);
}

static void set_leading(kcr_leader *le, bool leading)
{
  /* ACQUIRING -> LEADING -> (LOST | STOPPED), once each: only this thread
   * writes leading, so it reads it without mu. Leading starts from a
   * successful write naming us, whose deadline expires before the lease. */
  KCR_ASSERT(le->leading != leading);
  KCR_ASSERT(!leading || (!le->announced && !le->lost && le->last_ok_ms &&
                          le->o.renew_deadline_ms < le->o.lease_duration_ms));
  if(!leading) /* close the fence before anyone hears leadership ended */
    atomic_store(&le->fence_ms, 0);
  else
    atomic_store(&le->fence_ms, le->last_ok_ms + le->o.renew_deadline_ms);
  set_flag(le, &le->leading, leading);
  kcr_metric_set(le->m_status, (const char *[]){le->name}, leading ? 1 : 0);
}

/* ---- requests ------------------------------------------------------------ */

/* One request on our Lease (collection: POST target) with the time left
 * until deadline (monotonic ms) as its timeout. *out: the answer, owned. */
static kcr_err lease_do(kcr_leader *le, const char *method, bool collection,
                        const cJSON *body, uint64_t deadline, cJSON **out,
                        struct kcr_errinfo *ei)
{
  struct kcr_ref ref = {
      .gvr = &lease_gvr, .ns = le->ns, .name = collection ? NULL : le->name};
  struct kcr_buf path = KCR_BUF_INIT;
  struct kcr_http_response resp = {.body = KCR_BUF_INIT};
  struct kcr_http_request req = {.method = method, .ungated = true};
  uint64_t now = kcr_time_mono_ms();
  char *text = NULL;
  kcr_err rc;

  *out = NULL;
  if(now >= deadline) {
    rc = kcr_errinfo_set(ei, KCR_ETIMEDOUT, "no time left for %s before the deadline",
                         method);
    goto out;
  }
  rc = kcr_path(&path, &ref);
  if(rc)
    goto out;
  if(body && !(text = kcr_json_to_text(body))) {
    rc = KCR_ENOMEM;
    goto out;
  }
  req.path = path.ptr;
  req.body = text;
  req.body_len = text ? strlen(text) : 0;
  req.timeout_ms = deadline - now;
  rc = kcr_client_do(le->o.client, &req, &resp, ei);
  if(!rc)
    rc = kcr_json_parse(kcr_buf_str(&resp.body), resp.body.len, out, ei);
out:
  free(text);
  kcr_buf_cleanup(&path);
  kcr_buf_cleanup(&resp.body);
  return rc;
}

/* An int32 field of a record, or def if absent, not a number or < min. */
static int64_t spec_int(const cJSON *spec, const char *key, int64_t min, int64_t def)
{
  int64_t x;
  if(kcr_json_get_int(cJSON_GetObjectItemCaseSensitive(spec, key), &x) || x < min ||
     x > INT32_MAX)
    return def;
  return x;
}

static const char *spec_holder(const cJSON *lease)
{
  const char *h = kcr_json_str(lease, "/spec/holderIdentity");
  return h ? h : "";
}

static void now_micro(char out[KCR_RFC3339_MICRO_LEN])
{
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  kcr_time_format_micro(&ts, out);
}

/* A Lease spec: LeaderElectionRecordToLeaseSpec. NULL if out of memory. */
static cJSON *make_spec(const char *holder, int64_t secs, const char *acquire,
                        const char *renew, int64_t transitions)
{
  cJSON *s = cJSON_CreateObject();
  if(!s || !cJSON_AddStringToObject(s, "holderIdentity", holder) ||
     !cJSON_AddNumberToObject(s, "leaseDurationSeconds", (double)secs) ||
     !cJSON_AddStringToObject(s, "acquireTime", acquire) ||
     !cJSON_AddStringToObject(s, "renewTime", renew) ||
     !cJSON_AddNumberToObject(s, "leaseTransitions", (double)transitions)) {
    cJSON_Delete(s);
    return NULL;
  }
  return s;
}

/* Takes lease as the latest state; if its record differs from the last one
 * seen, notes the local time: that is what expiry is measured from. */
static kcr_err observe(kcr_leader *le, cJSON *lease)
{
  const cJSON *spec = kcr_json_at(lease, "/spec");
  char *raw = spec ? kcr_json_to_text(spec) : strdup("");

  if(!raw) {
    cJSON_Delete(lease);
    return KCR_ENOMEM;
  }
  if(!le->seen_raw || strcmp(raw, le->seen_raw)) {
    int64_t secs = spec_int(spec, "leaseDurationSeconds", 1, 0);
    free(le->seen_raw);
    le->seen_raw = raw;
    le->seen_ms = kcr_time_mono_ms();
    le->seen_dur_ms = secs > 0 ? (uint64_t)secs * 1000 : le->o.lease_duration_ms;
  } else {
    free(raw);
  }
  cJSON_Delete(le->lease);
  le->lease = lease;
  return KCR_OK;
}

/* Writes a record on top of base (its metadata, resourceVersion included):
 * PUT, or POST when create. On success the answer becomes the seen state. */
static kcr_err write_record(kcr_leader *le, const cJSON *base, bool create, cJSON *spec,
                            uint64_t deadline, struct kcr_errinfo *ei)
{
  cJSON *obj = base ? cJSON_Duplicate(base, true) : cJSON_CreateObject(), *out = NULL;
  cJSON *meta;
  kcr_err rc = KCR_ENOMEM;

  if(!obj || !spec)
    goto out;
  if(create) {
    if(!cJSON_AddStringToObject(obj, "apiVersion", "coordination.k8s.io/v1") ||
       !cJSON_AddStringToObject(obj, "kind", "Lease") ||
       !(meta = cJSON_AddObjectToObject(obj, "metadata")) ||
       !cJSON_AddStringToObject(meta, "name", le->name) ||
       !cJSON_AddStringToObject(meta, "namespace", le->ns))
      goto out;
  }
  cJSON_DeleteItemFromObjectCaseSensitive(obj, "spec");
  if(!cJSON_AddItemToObject(obj, "spec", spec))
    goto out;
  spec = NULL;
  rc = lease_do(le, create ? "POST" : "PUT", create, obj, deadline, &out, ei);
  if(!rc)
    rc = observe(le, out);
out:
  cJSON_Delete(spec);
  cJSON_Delete(obj);
  return rc;
}

/* ---- logging once ------------------------------------------------------- */

static void note_error(kcr_leader *le, const char *op, kcr_err rc,
                       const struct kcr_errinfo *ei)
{
  if(rc != le->last_err)
    KCR_LOG(KCR_LOG_WARN, "leader: lease request failed; retrying",
            KCR_S("lease", le->desc), KCR_S("op", op), KCR_S("err", kcr_err_name(rc)),
            KCR_I("code", ei->code), KCR_S("detail", ei->message),
            KCR_I("retryPeriodMs", le->o.retry_period_ms));
  else
    KCR_LOG(KCR_LOG_DEBUG, "leader: lease request still failing",
            KCR_S("lease", le->desc), KCR_S("op", op), KCR_S("err", kcr_err_name(rc)));
  le->last_err = rc;
}

/* True the first time (holder, what) is reported in a row. */
static bool first_report(kcr_leader *le, const char *holder, enum logged what)
{
  if(le->logged_what == what && le->logged_holder && !strcmp(le->logged_holder, holder))
    return false;
  free(le->logged_holder);
  le->logged_holder = strdup(holder);
  le->logged_what = what;
  return true;
}

/* ---- one attempt -------------------------------------------------------- */

/* The record we write to take or keep the lease, given the current one. */
static cJSON *our_spec(kcr_leader *le, const cJSON *cur)
{
  const cJSON *spec = kcr_json_at(cur, "/spec");
  const char *acq = kcr_json_str(spec, "/acquireTime");
  int64_t trans = spec_int(spec, "leaseTransitions", 0, 0);
  char now[KCR_RFC3339_MICRO_LEN];
  time_t t;

  now_micro(now);
  if(strcmp(spec_holder(cur), le->identity)) {
    acq = now; /* a new term */
    trans = trans < INT32_MAX ? trans + 1 : trans;
  } else if(!acq || kcr_time_parse(acq, &t)) {
    acq = now;
  }
  return make_spec(le->identity, (int64_t)(le->o.lease_duration_ms / 1000), acq, now,
                   trans);
}

static enum try_result try_once(kcr_leader *le, bool leading, uint64_t deadline)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  uint64_t t0 = kcr_time_mono_ms();
  enum try_result res = TRY_FAIL;
  cJSON *cur = NULL;
  const char *holder;
  kcr_err rc;

  KCR_ASSERT(leading == le->leading); /* renew() while leading, acquire() before */
  /* 1. Fast path: renew on the resourceVersion we wrote last. */
  if(leading && le->lease) {
    rc = write_record(le, le->lease, false, our_spec(le, le->lease), deadline, &ei);
    if(!rc)
      goto ok;
    if(rc != KCR_ECONFLICT) {
      note_error(le, "renew", rc, &ei);
      goto out;
    }
    KCR_LOG(KCR_LOG_DEBUG, "leader: lease changed since our last renewal; reading it",
            KCR_S("lease", le->desc));
    kcr_errinfo_cleanup(&ei);
  }
  /* 2. Read (or create) the lease. */
  rc = lease_do(le, "GET", false, NULL, deadline, &cur, &ei);
  if(rc == KCR_ENOTFOUND) {
    char now[KCR_RFC3339_MICRO_LEN];
    now_micro(now);
    kcr_errinfo_cleanup(&ei);
    rc = write_record(
        le, NULL, true,
        make_spec(le->identity, (int64_t)(le->o.lease_duration_ms / 1000), now, now, 0),
        deadline, &ei);
    if(!rc)
      goto ok;
    if(rc == KCR_EEXIST || rc == KCR_ECONFLICT)
      KCR_LOG(KCR_LOG_DEBUG, "leader: another candidate created the lease first",
              KCR_S("lease", le->desc));
    else
      note_error(le, "create", rc, &ei);
    goto out;
  }
  if(rc) {
    note_error(le, "get", rc, &ei);
    goto out;
  }
  rc = observe(le, cur);
  cur = NULL;
  if(rc) {
    note_error(le, "get", rc, &ei);
    goto out;
  }
  /* 3. Held by someone else? */
  holder = spec_holder(le->lease);
  if(*holder && strcmp(holder, le->identity)) {
    uint64_t now = kcr_time_mono_ms();
    free(le->seen_holder);
    le->seen_holder = strdup(holder);
    le->last_err = KCR_OK;
    if(leading) {
      res = TRY_HELD;
      goto out;
    }
    if(le->seen_ms + le->seen_dur_ms > now) {
      if(first_report(le, holder, LOGGED_WAITING))
        KCR_LOG(KCR_LOG_INFO, "leader: lease held by another identity; waiting",
                KCR_S("lease", le->desc), KCR_S("holder", holder),
                KCR_I("leaseDurationMs", le->seen_dur_ms));
      res = TRY_HELD;
      goto out;
    }
    if(first_report(le, holder, LOGGED_EXPIRED))
      KCR_LOG(KCR_LOG_INFO, "leader: lease expired; taking over",
              KCR_S("lease", le->desc), KCR_S("holder", holder),
              KCR_I("unchangedForMs", now - le->seen_ms));
  }
  /* 4. Take or renew it on the resourceVersion just read. */
  rc = write_record(le, le->lease, false, our_spec(le, le->lease), deadline, &ei);
  if(!rc)
    goto ok;
  if(rc == KCR_ECONFLICT)
    KCR_LOG(KCR_LOG_DEBUG, "leader: another candidate wrote the lease first",
            KCR_S("lease", le->desc));
  else
    note_error(le, "update", rc, &ei);
  goto out;
ok:
  le->last_ok_ms = t0;
  if(leading) /* extend the fence; on acquisition set_leading opens it */
    atomic_store(&le->fence_ms, t0 + le->o.renew_deadline_ms);
  le->last_err = KCR_OK;
  res = TRY_OK;
out:
  cJSON_Delete(cur);
  kcr_errinfo_cleanup(&ei);
  return res;
}

/* ---- the loops ---------------------------------------------------------- */

/* Tries every retry_period (+ jitter) until acquired (true) or stopped. */
static bool acquire(kcr_leader *le)
{
  for(;;) {
    uint64_t jitter;
    if(is_stopping(le))
      return false;
    if(try_once(le, false, kcr_time_mono_ms() + le->o.renew_deadline_ms) == TRY_OK)
      return true;
    jitter = (uint64_t)(JITTER_FACTOR * (double)le->o.retry_period_ms *
                        ((double)rand_r(&le->seed) / ((double)RAND_MAX + 1.0)));
    if(!sleep_unless_stopped(le, le->o.retry_period_ms + jitter))
      return false;
  }
}

static const char lost_deadline[] = "no successful renewal within the renew deadline";
static const char lost_taken[] = "the lease is held by another identity";

/* Renews every retry_period while leading. Returns NULL when stopped, or
 * why leadership was lost (lost_deadline, lost_taken). */
static const char *renew(kcr_leader *le)
{
  for(;;) {
    uint64_t deadline;
    enum try_result r;

    if(!sleep_unless_stopped(le, le->o.retry_period_ms))
      return NULL;
    deadline = le->last_ok_ms + le->o.renew_deadline_ms;
    if(kcr_time_mono_ms() >= deadline)
      return lost_deadline;
    r = try_once(le, true, deadline);
    if(r == TRY_HELD)
      return lost_taken;
    if(r != TRY_OK && kcr_time_mono_ms() >= deadline)
      return lost_deadline;
  }
}

/* Gives the lease up: holderIdentity "", leaseDurationSeconds 1, so that a
 * successor takes it at once; only if it still names us. */
static void release(kcr_leader *le)
{
  uint64_t deadline = kcr_time_mono_ms() + le->o.renew_deadline_ms;
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  cJSON *cur = NULL;
  kcr_err rc = KCR_OK;

  for(int i = 0; i < RELEASE_ATTEMPTS; i++) {
    char now[KCR_RFC3339_MICRO_LEN];
    const cJSON *spec;

    cJSON_Delete(cur);
    kcr_errinfo_cleanup(&ei);
    rc = lease_do(le, "GET", false, NULL, deadline, &cur, &ei);
    if(rc)
      break;
    if(strcmp(spec_holder(cur), le->identity)) {
      KCR_LOG(KCR_LOG_INFO, "leader: not releasing the lease: no longer ours",
              KCR_S("lease", le->desc), KCR_S("holder", spec_holder(cur)));
      goto out;
    }
    now_micro(now);
    spec = kcr_json_at(cur, "/spec");
    kcr_errinfo_cleanup(&ei);
    rc =
        write_record(le, cur, false,
                     make_spec("", 1, now, now, spec_int(spec, "leaseTransitions", 0, 0)),
                     deadline, &ei);
    if(!rc) {
      KCR_LOG(KCR_LOG_INFO, "leader: released the lease", KCR_S("lease", le->desc),
              KCR_S("identity", le->identity));
      goto out;
    }
    if(rc != KCR_ECONFLICT) /* written in between: read it again */
      break;
  }
  KCR_LOG(KCR_LOG_WARN, "leader: could not release the lease; it will expire",
          KCR_S("lease", le->desc), KCR_S("err", kcr_err_name(rc)),
          KCR_S("detail", ei.message));
out:
  cJSON_Delete(cur);
  kcr_errinfo_cleanup(&ei);
}

static void *run(void *p)
{
  kcr_leader *le = p;
  const char *why;

  tl_elector = le;
  KCR_LOG(KCR_LOG_INFO, "leader: attempting to acquire the lease",
          KCR_S("lease", le->desc), KCR_S("identity", le->identity));
  if(acquire(le)) {
    /* Logged before it is published: whoever sees is_leader() finds the
     * record (test_leader acquired_is_logged_before_is_leader). */
    KCR_LOG(KCR_LOG_INFO, "leader: acquired the lease", KCR_S("lease", le->desc),
            KCR_S("identity", le->identity),
            KCR_I("leaseTransitions",
                  spec_int(kcr_json_at(le->lease, "/spec"), "leaseTransitions", 0, 0)));
    set_leading(le, true);
    free(le->logged_holder);
    le->logged_holder = NULL;
    le->logged_what = LOGGED_NONE;
    if(le->o.on_started_leading)
      le->o.on_started_leading(le->o.ud);
    KCR_ASSERT(le->leading); /* announced only while leading */
    set_flag(le, &le->announced, true);
    why = renew(le);
    set_leading(le, false);
    if(why == lost_taken)
      KCR_LOG(KCR_LOG_WARN, "leader: lost the lease", KCR_S("lease", le->desc),
              KCR_S("identity", le->identity), KCR_S("reason", why),
              KCR_S("holder", le->seen_holder));
    else if(why)
      KCR_LOG(KCR_LOG_WARN, "leader: lost the lease", KCR_S("lease", le->desc),
              KCR_S("identity", le->identity), KCR_S("reason", why),
              KCR_S("lastErr", kcr_err_name(le->last_err)));
    if(le->o.on_stopped_leading)
      le->o.on_stopped_leading(le->o.ud);
    if(why)
      set_flag(le, &le->lost, true);
    else if(!le->o.keep_lease_on_stop)
      release(le);
  }
  pthread_mutex_lock(&le->mu);
  le->done = true;
  pthread_cond_broadcast(&le->cv);
  pthread_mutex_unlock(&le->mu);
  return NULL;
}

/* ---- public ------------------------------------------------------------- */

kcr_err kcr_leader_start(kcr_leader *le)
{
  kcr_err rc = KCR_OK;
  pthread_mutex_lock(&le->mu);
  if(le->started || le->stopping)
    rc = KCR_EINVAL;
  else if(pthread_create(&le->th, NULL, run, le)) /* under mu: stop waits for th */
    rc = KCR_ENOMEM;
  else
    le->started = true;
  pthread_mutex_unlock(&le->mu);
  return rc;
}

bool kcr_leader_is_leader(kcr_leader *le)
{
  pthread_mutex_lock(&le->mu);
  bool l = le->leading;
  pthread_mutex_unlock(&le->mu);
  return l;
}

bool kcr_leader_may_write(kcr_leader *le)
{
  return kcr_time_mono_ms() < atomic_load(&le->fence_ms);
}

bool kcr_leader_lost(kcr_leader *le)
{
  pthread_mutex_lock(&le->mu);
  bool l = le->lost;
  pthread_mutex_unlock(&le->mu);
  return l;
}

bool kcr_leader_wait(kcr_leader *le, uint64_t timeout_ms)
{
  bool forever = timeout_ms == KCR_FOREVER;
  struct timespec ts = kcr_time_mono_after(forever ? 0 : timeout_ms);
  bool l;

  pthread_mutex_lock(&le->mu);
  while(!(le->leading && le->announced) && !le->lost && !le->stopping && !le->done) {
    if(forever)
      pthread_cond_wait(&le->cv, &le->mu);
    else if(pthread_cond_timedwait(&le->cv, &le->mu, &ts) == ETIMEDOUT)
      break;
  }
  l = le->leading;
  pthread_mutex_unlock(&le->mu);
  return l;
}

void kcr_leader_stop(kcr_leader *le)
{
  pthread_mutex_lock(&le->mu);
  le->stopping = true;
  pthread_cond_broadcast(&le->cv);
  if(!le->started || tl_elector == le) {
    pthread_mutex_unlock(&le->mu);
    return;
  }
  if(!le->joining) {
    le->joining = true;
    pthread_mutex_unlock(&le->mu);
    pthread_join(le->th, NULL);
    pthread_mutex_lock(&le->mu);
    le->joined = true;
    pthread_cond_broadcast(&le->cv);
  }
  while(!le->joined)
    pthread_cond_wait(&le->cv, &le->mu);
  pthread_mutex_unlock(&le->mu);
}

void kcr_leader_free(kcr_leader *le)
{
  if(!le)
    return;
  /* Not from the elector's own callbacks: its thread would run on in
   * freed memory (stop cannot join the calling thread). */
  KCR_ASSERT(tl_elector != le);
  kcr_leader_stop(le);
  KCR_ASSERT(!le->started || le->joined); /* nothing left that touches le */
  pthread_cond_destroy(&le->cv);
  pthread_mutex_destroy(&le->mu);
  cJSON_Delete(le->lease);
  free(le->seen_raw);
  free(le->seen_holder);
  free(le->logged_holder);
  free(le->ns);
  free(le->name);
  free(le->identity);
  free(le->desc);
  kcr_client_free(le->o.client);
  kcr_metrics_free(le->o.metrics);
  free(le);
}
