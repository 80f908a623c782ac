/* A ring of replicas on Leases (kcr/shard.h).
 *
 * DESIGN: three parts, each on its own thread.
 *   - the elector (kcr/leader.h) holds this replica's Lease; the ring only
 *     makes sure, before starting it, that the Lease exists with the ring's
 *     label (a server-side apply of the label alone: the elector's PUTs keep
 *     the metadata they read);
 *   - the informer watches the ring's Leases; its handlers record, per
 *     Lease, the holder, the duration and when its spec was last seen to
 *     change (the local monotonic time: client-go's observedTime), and wake
 *     the ring's thread;
 *   - the ring's thread, once the informer has synced, computes the live
 *     members from those records, and runs the hand-over (step_locked):
 *     when the set differs from the current view it publishes a new view
 *     (kcr_ring_assign's map; the owned buckets no longer assigned left
 *     out) and calls the listeners, which drain what left; then it applies
 *     to our Lease what we hold (KCR_RING_HOLDS: held minus what is no
 *     longer assigned, plus what is assigned and no other live Lease
 *     holds), and once its own watch echoes that apply's epoch, it owns
 *     the claimed buckets nobody else holds (a new view) and withdraws
 *     those another holds too. It wakes at the next expiry, at each record
 *     change, and at least every retry period.
 *   Why no two replicas own a bucket: a replica owns b only after the
 *   state its watch shows - which follows the Leases' writes in order and
 *   is at least as new as its claim of b - has no other live claim of b;
 *   of two claims the later one's owner sees the earlier one, which stays
 *   until released (after its owner's drain) or expired (its owner's write
 *   fence closed a renew deadline after its last renewal, before that).
 * Locks: mu guards the records, the view pointer and the flags; it is held
 * while asking the informer whether it synced and the elector whether it
 * leads (their own locks come after mu), never while calling the
 * listeners, which run under lis_mu alone. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kcr/buf.h"
#include "kcr/informer.h"
#include "kcr/json.h"
#include "kcr/leader.h"
#include "kcr/log.h"
#include "kcr/path.h"
#include "kcr/shard.h"
#include "kcr/store.h"
#include "kcr/time.h"

static const struct kcr_gvr lease_gvr = {.group = "coordination.k8s.io",
                                         .version = "v1",
                                         .resource = "leases",
                                         .namespaced = true};

/* ---- hashing and the assignment (pure) ----------------------------------- */

uint64_t kcr_shard_hash(const char *s, size_t n)
{
  uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a, as Go's hash/fnv New64a */
  for(size_t i = 0; i < n; i++) {
    h ^= (unsigned char)s[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

unsigned kcr_shard_bucket(uint64_t hash) { return (unsigned)(hash >> 56); }

/* Bucket b's first hash, or 2^64 for b == KCR_RING_BUCKETS, as a range
 * literal of the shard selector: '0x' and exactly 16 lowercase hex digits
 * (the parser refuses '0x0'), 17 for 2^64. */
static kcr_err put_bound(struct kcr_buf *out, unsigned b)
{
  if(b == KCR_RING_BUCKETS)
    return kcr_buf_puts(out, "'0x10000000000000000'");
  return kcr_buf_printf(out, "'0x%016llx'", (unsigned long long)b << 56);
}

kcr_err kcr_shard_selector(const uint8_t set[KCR_RING_BUCKETS / 8], struct kcr_buf *out)
{
  unsigned b = 0, terms = 0;

  if(!set || !out)
    return KCR_EINVAL;
  while(b < KCR_RING_BUCKETS) {
    unsigned e;
    if(!(set[b / 8] & 1u << b % 8)) {
      b++;
      continue;
    }
    for(e = b + 1; e < KCR_RING_BUCKETS && set[e / 8] & 1u << e % 8; e++)
      ;
    if(terms++)
      kcr_buf_puts(out, " || ");
    kcr_buf_puts(out, "shardRange(object.metadata.uid, ");
    put_bound(out, b);
    kcr_buf_puts(out, ", ");
    put_bound(out, e);
    kcr_buf_puts(out, ")");
    b = e;
  }
  if(kcr_buf_err(out))
    return kcr_buf_err(out);
  if(!terms)
    return KCR_ENOTFOUND;
  return KCR_OK;
}

/* A bucket's score for a member: FNV-1a of "<identity>#<bucket>",
 * finished with splitmix64's mixer so that every bit depends on all. */
static uint64_t score(uint64_t member_hash, unsigned bucket)
{
  char pt[8];
  int k = snprintf(pt, sizeof(pt), "#%u", bucket);
  uint64_t h = member_hash;
  for(int j = 0; j < k; j++) {
    h ^= (unsigned char)pt[j];
    h *= 0x100000001b3ull;
  }
  h ^= h >> 30;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 27;
  h *= 0x94d049bb133111ebull;
  return h ^ (h >> 31);
}

struct pair {
  uint64_t score;
  uint32_t bucket, who; /* who: index into the sorted members */
};

static int cmp_pair(const void *a, const void *b)
{
  const struct pair *x = a, *y = b;
  if(x->score != y->score)
    return x->score > y->score ? -1 : 1; /* highest first */
  if(x->bucket != y->bucket)
    return x->bucket < y->bucket ? -1 : 1;
  return x->who < y->who ? -1 : x->who > y->who;
}

static int cmp_str(const void *a, const void *b)
{
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

kcr_err kcr_ring_assign(const char *const *members, size_t n,
                        uint32_t owner[KCR_RING_BUCKETS])
{
  const char **sorted = NULL;
  uint32_t *load = NULL;
  struct pair *pairs = NULL;
  bool taken[KCR_RING_BUCKETS] = {false};
  size_t np = n * KCR_RING_BUCKETS, lo, extra, extra_used = 0;
  kcr_err rc = KCR_ENOMEM;

  if(!members || !owner || !n || n > UINT32_MAX / KCR_RING_BUCKETS)
    return KCR_EINVAL;
  sorted = malloc(n * sizeof(*sorted));
  load = calloc(n, sizeof(*load));
  pairs = malloc(np * sizeof(*pairs));
  if(!sorted || !load || !pairs)
    goto out;
  for(size_t i = 0; i < n; i++) {
    if(!members[i]) {
      rc = KCR_EINVAL;
      goto out;
    }
    sorted[i] = members[i];
  }
  /* Work on the sorted identities, so the input order does not matter. */
  qsort(sorted, n, sizeof(*sorted), cmp_str);
  for(size_t i = 1; i < n; i++)
    if(!strcmp(sorted[i - 1], sorted[i])) {
      rc = KCR_EINVAL;
      goto out;
    }
  for(size_t i = 0; i < n; i++) {
    uint64_t mh = kcr_shard_hash(sorted[i], strlen(sorted[i]));
    for(uint32_t b = 0; b < KCR_RING_BUCKETS; b++)
      pairs[i * KCR_RING_BUCKETS + b] =
          (struct pair){.score = score(mh, b), .bucket = b, .who = (uint32_t)i};
  }
  /* Rendezvous hashing with bounded loads: every (bucket, member) pair in
   * the order of its score; a bucket goes to the first member that is not
   * full. Full is floor(buckets / n), and ceil for the first (buckets mod
   * n) members to get there: the total is exactly the buckets, and a
   * member that ends below its share was open all along, so it would have
   * taken any bucket left: every bucket is given. */
  qsort(pairs, np, sizeof(*pairs), cmp_pair);
  lo = KCR_RING_BUCKETS / n;
  extra = KCR_RING_BUCKETS % n;
  for(size_t k = 0; k < np; k++) {
    const struct pair *p = &pairs[k];
    if(taken[p->bucket])
      continue;
    if(load[p->who] == lo) {
      if(extra_used == extra)
        continue;
      extra_used++;
    } else if(load[p->who] > lo) {
      continue;
    }
    load[p->who]++;
    taken[p->bucket] = true;
    owner[p->bucket] = p->who;
  }
  /* Indexes into the caller's array. */
  for(size_t b = 0; b < KCR_RING_BUCKETS; b++) {
    const char *id = sorted[owner[b]];
    for(uint32_t i = 0; i < n; i++)
      if(members[i] == id) {
        owner[b] = i;
        break;
      }
  }
  rc = KCR_OK;
out:
  free(sorted);
  free(load);
  free(pairs);
  return rc;
}

/* ---- views --------------------------------------------------------------- */

struct kcr_ring_view {
  atomic_uint refs;
  uint64_t epoch;
  size_t n;
  char **members; /* sorted */
  long self;      /* index of this replica in members, -1: not a member */
  size_t owned;   /* buckets in active */
  uint32_t owner[KCR_RING_BUCKETS];     /* the assignment (the target) */
  uint8_t active[KCR_RING_BUCKETS / 8]; /* the buckets self owns now: assigned,
                                            and handed over (see DESIGN) */
};

#define BIT(set, b) (((set)[(b) / 8] >> ((b) % 8)) & 1u)
#define SET(set, b) ((set)[(b) / 8] |= (uint8_t)(1u << ((b) % 8)))
#define CLR(set, b) ((set)[(b) / 8] &= (uint8_t) ~(1u << ((b) % 8)))

static void view_free(kcr_ring_view *v)
{
  for(size_t i = 0; i < v->n; i++)
    free(v->members[i]);
  free(v->members);
  free(v);
}

void kcr_ring_view_unref(kcr_ring_view *v)
{
  if(v && atomic_fetch_sub(&v->refs, 1) == 1)
    view_free(v);
}

uint64_t kcr_ring_view_epoch(const kcr_ring_view *v) { return v->epoch; }
size_t kcr_ring_view_len(const kcr_ring_view *v) { return v->n; }
size_t kcr_ring_view_owned(const kcr_ring_view *v) { return v->owned; }

const char *kcr_ring_view_member(const kcr_ring_view *v, size_t i)
{
  return i < v->n ? v->members[i] : NULL;
}

const char *kcr_ring_view_owner(const kcr_ring_view *v, uint64_t hash)
{
  return v->n ? v->members[v->owner[kcr_shard_bucket(hash)]] : NULL;
}

bool kcr_ring_view_mine(const kcr_ring_view *v, uint64_t hash)
{
  return BIT(v->active, kcr_shard_bucket(hash));
}

static bool assigned_b(const kcr_ring_view *v, unsigned b)
{
  return v->self >= 0 && v->owner[b] == (uint32_t)v->self;
}

bool kcr_ring_view_assigned(const kcr_ring_view *v, uint64_t hash)
{
  return assigned_b(v, kcr_shard_bucket(hash));
}

/* A view of the sorted, distinct members (taken over: the view frees
 * them, also on error), active the buckets self owns among those assigned
 * to it (NULL: none). NULL if out of memory. */
static kcr_ring_view *view_new(uint64_t epoch, char **members, size_t n, const char *self,
                               const uint8_t *active)
{
  kcr_ring_view *v = calloc(1, sizeof(*v));

  if(!v) {
    for(size_t i = 0; i < n; i++)
      free(members[i]);
    free(members);
    return NULL;
  }
  atomic_init(&v->refs, 1);
  v->epoch = epoch;
  v->members = members;
  v->n = n;
  v->self = -1;
  if(n && kcr_ring_assign((const char *const *)members, n, v->owner)) {
    view_free(v);
    return NULL;
  }
  for(size_t i = 0; i < n; i++)
    if(!strcmp(members[i], self))
      v->self = (long)i;
  for(unsigned b = 0; active && v->self >= 0 && b < KCR_RING_BUCKETS; b++)
    if(BIT(active, b) && v->owner[b] == (uint32_t)v->self) {
      SET(v->active, b);
      v->owned++;
    }
  return v;
}

/* ---- the ring ------------------------------------------------------------ */

/* What this replica knows of one Lease of the ring. */
struct record {
  char *name;   /* the Lease's */
  char *holder; /* "" when free */
  char *spec;   /* the spec's text: a change restarts the clock */
  uint64_t seen_ms, dur_ms;
  bool confirmed;                      /* seen to change, or made, since this ring listed:
                                          a Lease of the first list may be a dead member's */
  uint64_t hold_epoch;                 /* of its KCR_RING_HOLDS annotation */
  uint8_t holds[KCR_RING_BUCKETS / 8]; /* the buckets it says it holds */
  char *rv;                            /* the resourceVersion last seen */
  bool gone; /* deleted: no member, but what it held counts until it would
                have expired (its holder may still be writing) */
};

struct listener {
  kcr_ring_fn fn;
  void *ud;
};

struct kcr_ring {
  struct kcr_ring_opts o;
  char *ns, *name, *identity, *lease_name, *selector, *desc;
  kcr_leader *le;
  kcr_informer *inf;
  kcr_metric *m_members, *m_owned, *m_changes, *m_assigned, *m_handovers, *m_takeover;

  pthread_mutex_t mu;
  pthread_cond_t cv; /* CLOCK_MONOTONIC */
  pthread_t th;
  bool started, stopping, stopped, running;
  bool dirty;         /* a record changed since the thread last looked */
  bool listed;        /* the informer synced once (the thread saw it) */
  uint64_t listed_ms; /* when */
  bool failed;        /* the thread could not start the elector */
  bool relabel;       /* our Lease was deleted: label it again */
  /* The hand-over (see DESIGN), thread only: */
  uint8_t held[KCR_RING_BUCKETS / 8]; /* what our Lease says we hold */
  bool held_dirty;                    /* held changed since last applied */
  uint64_t epoch_seq;                 /* the last epoch we applied */
  uint64_t applied_epoch;             /* of the last successful apply */
  uint64_t first_epoch;               /* the first this process applies */
  bool echoed_once;                   /* our watch echoed one of our applies */
  atomic_bool foreign;                /* another process wrote our Lease: stop writing */
  uint64_t assigned_ms[KCR_RING_BUCKETS]; /* when assigned and not owned (0:
                                             not so): kcr_ring_takeover_seconds */
  struct record *rec;
  size_t nrec, caprec;
  kcr_ring_view *view;
  struct listener lis[KCR_RING_LISTENERS];
  size_t nlis;
  pthread_mutex_t lis_mu; /* held while listeners run: removal waits */
};

static kcr_err check_opts(const struct kcr_ring_opts *o, struct kcr_errinfo *ei)
{
  static const char *const fn = "kcr_ring_new";
  if(!o)
    return kcr_errinfo_set(ei, KCR_EINVAL, "%s: no options", fn);
  if(!o->client)
    return kcr_errinfo_set(ei, KCR_EINVAL, "%s: no client", fn);
  if(!o->ns || !kcr_is_dns_label(o->ns))
    return kcr_errinfo_set(ei, KCR_EINVAL, "%s: ns '%s' is not a namespace's name", fn,
                           o->ns ? o->ns : "(null)");
  if(!o->name || !kcr_is_dns_label(o->name))
    return kcr_errinfo_set(ei, KCR_EINVAL,
                           "%s: name '%s' is not an RFC 1123 label (lower-case letters, "
                           "digits, '-', at most 63)",
                           fn, o->name ? o->name : "(null)");
  if(!o->identity || !*o->identity)
    return kcr_errinfo_set(ei, KCR_EINVAL, "%s: no identity (the pod's name)", fn);
  return KCR_OK;
}

static void record_clear(struct record *r)
{
  free(r->name);
  free(r->holder);
  free(r->spec);
  free(r->rv);
}

/* Wakes the thread (mu held). */
static void poke(kcr_ring *r)
{
  r->dirty = true;
  pthread_cond_broadcast(&r->cv);
}

/* The KCR_RING_HOLDS annotation, "<epoch>:<64 hex digits>" (the bitmap
 * of the buckets held, bucket b in bit b % 8 of byte b / 8): into *epoch
 * and holds, left zero when absent or malformed (which holds nothing). */
static void parse_holds(const char *a, uint64_t *epoch,
                        uint8_t holds[KCR_RING_BUCKETS / 8])
{
  static const char hex[] = "0123456789abcdef";
  uint8_t h[KCR_RING_BUCKETS / 8];
  uint64_t e = 0;

  if(!a || *a < '0' || *a > '9')
    return;
  for(; *a >= '0' && *a <= '9'; a++) {
    if(e > (UINT64_MAX - 9) / 10)
      return;
    e = e * 10 + (uint64_t)(*a - '0');
  }
  if(*a++ != ':' || strlen(a) != 2 * sizeof(h))
    return;
  for(size_t i = 0; i < sizeof(h); i++) {
    const char *hi = strchr(hex, a[2 * i]), *lo = strchr(hex, a[2 * i + 1]);
    if(!a[2 * i] || !a[2 * i + 1] || !hi || !lo)
      return;
    h[i] = (uint8_t)((hi - hex) << 4 | (lo - hex));
  }
  *epoch = e;
  memcpy(holds, h, sizeof(h));
}

/* Takes in the state of one Lease (add or update). */
static void lease_seen(kcr_obj *o, kcr_ring *r)
{
  cJSON *tree = NULL;
  const cJSON *spec;
  char *text = NULL, *holder = NULL;
  int64_t secs;
  struct record *rec = NULL;
  uint8_t holds[KCR_RING_BUCKETS / 8] = {0};
  uint64_t hold_epoch = 0;

  if(kcr_obj_parse(o, &tree))
    return; /* out of memory: the next change or resync brings it again */
  parse_holds(kcr_json_str(tree, "/metadata/annotations/kcr.dev~1ring-holds"),
              &hold_epoch, holds);
  spec = kcr_json_at(tree, "/spec");
  text = spec ? kcr_json_to_text(spec) : strdup("");
  holder = spec ? (char *)kcr_json_str(spec, "/holderIdentity") : NULL;
  holder = strdup(holder ? holder : "");
  secs = spec ? kcr_json_int(spec, "/leaseDurationSeconds", 0) : 0;
  cJSON_Delete(tree);
  if(!text || !holder)
    goto out;
  pthread_mutex_lock(&r->mu);
  for(size_t i = 0; i < r->nrec; i++)
    if(!strcmp(r->rec[i].name, kcr_obj_name(o)))
      rec = &r->rec[i];
  if(!rec && r->nrec == r->caprec) {
    size_t cap = r->caprec ? 2 * r->caprec : 8;
    struct record *nr = realloc(r->rec, cap * sizeof(*nr));
    if(nr) {
      r->rec = nr;
      r->caprec = cap;
    }
  }
  if(!rec && r->nrec < r->caprec && (r->rec[r->nrec].name = strdup(kcr_obj_name(o)))) {
    rec = &r->rec[r->nrec++];
    rec->holder = rec->spec = rec->rv = NULL;
    rec->gone = false;
    rec->confirmed = r->listed; /* made while we watch: by a live member */
    rec->hold_epoch = 0;
    memset(rec->holds, 0, sizeof(rec->holds));
  } else if(rec && rec->spec && strcmp(rec->spec, text)) {
    rec->confirmed = true; /* renewed (or taken) while we watch */
  }
  if(rec && (!rec->spec || strcmp(rec->spec, text))) {
    free(rec->spec);
    free(rec->holder);
    rec->spec = text;
    rec->holder = holder;
    text = holder = NULL;
    rec->seen_ms = kcr_time_mono_ms();
    /* as the elector: a Lease without a duration gets the ring's */
    rec->dur_ms = secs > 0 ? (uint64_t)secs * 1000 : r->o.lease_duration_ms;
    poke(r);
  }
  if(rec && rec->gone) { /* made again: its clock starts afresh */
    rec->gone = false;
    rec->seen_ms = kcr_time_mono_ms();
    poke(r);
  }
  if(rec && (!rec->rv || strcmp(rec->rv, kcr_obj_rv(o)))) {
    char *rv = strdup(kcr_obj_rv(o));
    if(rv) {
      free(rec->rv);
      rec->rv = rv;
      poke(r); /* (consistent_locked) */
    }
  }
  if(rec && !strcmp(rec->name, r->lease_name) && r->echoed_once && hold_epoch &&
     (hold_epoch < r->first_epoch || hold_epoch > r->epoch_seq) &&
     !atomic_load(&r->foreign)) {
    /* an epoch this process never wrote: another process has our identity */
    atomic_store(&r->foreign, true);
    r->failed = true;
    pthread_cond_broadcast(&r->cv);
    KCR_LOG(KCR_LOG_ERROR,
            "ring: another process wrote this replica's Lease (two replicas with one "
            "identity?); this one stops writing",
            KCR_S("ring", r->desc), KCR_S("lease", r->lease_name),
            KCR_I("epoch", (long long)hold_epoch));
  }
  /* What it holds is no renewal: it does not restart the clock. */
  if(rec && (rec->hold_epoch != hold_epoch || memcmp(rec->holds, holds, sizeof(holds)))) {
    rec->hold_epoch = hold_epoch;
    memcpy(rec->holds, holds, sizeof(holds));
    poke(r);
  }
  pthread_mutex_unlock(&r->mu);
out:
  free(text);
  free(holder);
}

static void on_add(kcr_obj *o, void *ud) { lease_seen(o, ud); }
static void on_update(kcr_obj *old, kcr_obj *cur, void *ud)
{
  (void)old;
  lease_seen(cur, ud);
}
/* A deleted Lease: ours is made again (relabel: the thread gives up what
 * we own first); another's stays as a tombstone whose holds count until it
 * would have expired - its holder may not know yet and still write. */
static void on_delete(kcr_obj *o, void *ud)
{
  kcr_ring *r = ud;
  bool own = !strcmp(kcr_obj_name(o), r->lease_name);
  pthread_mutex_lock(&r->mu);
  if(own)
    r->relabel = true; /* the elector makes it again, without the label */
  for(size_t i = 0; i < r->nrec; i++)
    if(!strcmp(r->rec[i].name, kcr_obj_name(o))) {
      if(!own && *r->rec[i].holder)
        r->rec[i].gone = true;
      else {
        record_clear(&r->rec[i]);
        r->rec[i] = r->rec[--r->nrec];
      }
      poke(r);
      break;
    }
  pthread_mutex_unlock(&r->mu);
}

/* The elector's callbacks: the thread looks again (joined or not). */
static void elector_changed(void *ud)
{
  kcr_ring *r = ud;
  pthread_mutex_lock(&r->mu);
  poke(r);
  pthread_mutex_unlock(&r->mu);
}

kcr_err kcr_ring_new(const struct kcr_ring_opts *opts, kcr_ring **out,
                     struct kcr_errinfo *ei)
{
  static const char *const fn = "kcr_ring_new";
  pthread_condattr_t ca;
  kcr_ring *r;
  kcr_err rc;

  if(!out)
    return kcr_errinfo_set(ei, KCR_EINVAL, "%s: no out", fn);
  *out = NULL;
  rc = check_opts(opts, ei);
  if(rc)
    return rc;
  r = calloc(1, sizeof(*r));
  if(!r)
    return KCR_ENOMEM;
  r->o = *opts;
  pthread_mutex_init(&r->mu, NULL);
  pthread_mutex_init(&r->lis_mu, NULL);
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&r->cv, &ca);
  pthread_condattr_destroy(&ca);
  r->o.client = kcr_client_ref(opts->client);
  r->o.metrics = kcr_metrics_ref(opts->metrics);
  r->ns = strdup(opts->ns);
  r->name = strdup(opts->name);
  r->identity = strdup(opts->identity);
  if(asprintf(&r->lease_name, "%s-%s", opts->name, opts->identity) < 0)
    r->lease_name = NULL;
  if(asprintf(&r->selector, KCR_RING_LABEL "=%s", opts->name) < 0)
    r->selector = NULL;
  if(asprintf(&r->desc, "%s/%s", opts->ns, opts->name) < 0)
    r->desc = NULL;
  r->view = view_new(0, NULL, 0, "", NULL);
  /* epochs of this process: above any a former one of this identity left
   * in our Lease (its echo must not pass for ours) */
  struct timespec rt;
  clock_gettime(CLOCK_REALTIME, &rt);
  r->epoch_seq = (uint64_t)rt.tv_sec * 1000000000u + (uint64_t)rt.tv_nsec;
  r->first_epoch = r->epoch_seq + 1;
  atomic_init(&r->foreign, false);
  if(!r->ns || !r->name || !r->identity || !r->lease_name || !r->selector || !r->desc ||
     !r->view) {
    rc = KCR_ENOMEM;
    goto fail;
  }
  if(!kcr_is_dns_subdomain(r->lease_name)) {
    rc = kcr_errinfo_set(
        ei, KCR_EINVAL,
        "%s: the Lease name '%s' (name-identity) is not an RFC 1123 "
        "subdomain (lower-case letters, digits, '-' and '.', at most 253)",
        fn, r->lease_name);
    goto fail;
  }
  r->o.ns = r->ns;
  r->o.name = r->name;
  r->o.identity = r->identity;
  rc = kcr_leader_new(
      &(struct kcr_leader_opts){.client = r->o.client,
                                .ns = r->ns,
                                .name = r->lease_name,
                                .identity = r->identity,
                                .lease_duration_ms = opts->lease_duration_ms,
                                .renew_deadline_ms = opts->renew_deadline_ms,
                                .retry_period_ms = opts->retry_period_ms,
                                .metrics = opts->metrics,
                                .on_started_leading = elector_changed,
                                .on_stopped_leading = elector_changed,
                                .ud = r},
      &r->le, ei);
  if(rc)
    goto fail;
  /* the elector's defaults, for Leases that state no duration */
  r->o.lease_duration_ms = opts->lease_duration_ms ? opts->lease_duration_ms : 15000;
  r->o.retry_period_ms = opts->retry_period_ms ? opts->retry_period_ms : 2000;
  rc = kcr_informer_new(&(struct kcr_informer_opts){.client = r->o.client,
                                                    .gvr = &lease_gvr,
                                                    .ns = r->ns,
                                                    .label_selector = r->selector},
                        &r->inf, ei);
  if(!rc)
    rc = kcr_informer_add_handlers(
        r->inf,
        &(struct kcr_informer_handlers){
            .on_add = on_add, .on_update = on_update, .on_delete = on_delete, .ud = r});
  if(rc)
    goto fail;
  if(opts->metrics) {
    const char *const labels[] = {"ring", NULL};
    rc = kcr_metric_gauge(
        opts->metrics,
        &(struct kcr_metric_opts){
            .name = "kcr_ring_members",
            .help = "Live members of the ring, as this replica sees them.",
            .label_names = labels},
        &r->m_members, ei);
    if(!rc)
      rc = kcr_metric_gauge(
          opts->metrics,
          &(struct kcr_metric_opts){.name = "kcr_ring_buckets_owned",
                                    .help = "Buckets of the ring this replica owns (of "
                                            "256).",
                                    .label_names = labels},
          &r->m_owned, ei);
    if(!rc)
      rc = kcr_metric_counter(
          opts->metrics,
          &(struct kcr_metric_opts){.name = "kcr_ring_changes_total",
                                    .help =
                                        "Changes of the ring's members this replica saw.",
                                    .label_names = labels},
          &r->m_changes, ei);
    if(!rc)
      rc = kcr_metric_gauge(opts->metrics,
                            &(struct kcr_metric_opts){
                                .name = "kcr_ring_buckets_assigned",
                                .help = "Buckets of the ring assigned to this replica "
                                        "(owned once handed over).",
                                .label_names = labels},
                            &r->m_assigned, ei);
    if(!rc)
      rc = kcr_metric_counter(
          opts->metrics,
          &(struct kcr_metric_opts){
              .name = "kcr_ring_handovers_total",
              .help = "Buckets this replica took over (direction=\"in\") or gave up "
                      "(\"out\").",
              .label_names = (const char *[]){"ring", "direction", NULL}},
          &r->m_handovers, ei);
    if(!rc)
      rc = kcr_metric_histogram(
          opts->metrics,
          &(struct kcr_metric_opts){
              .name = "kcr_ring_takeover_seconds",
              .help = "From a bucket's assignment to this replica to owning it (the old "
                      "owner's drain and release, or its Lease's expiry).",
              .label_names = labels,
              .bounds = kcr_buckets_seconds,
              .nbounds = kcr_buckets_seconds_n},
          &r->m_takeover, ei);
    if(rc)
      goto fail;
    kcr_metric_inc(r->m_handovers, (const char *[]){r->name, "in", NULL}, 0);
    kcr_metric_inc(r->m_handovers, (const char *[]){r->name, "out", NULL}, 0);
  }
  *out = r;
  return KCR_OK;
fail:
  kcr_ring_free(r);
  return rc;
}

const char *kcr_ring_identity(const kcr_ring *r) { return r->identity; }
bool kcr_ring_may_write(kcr_ring *r)
{
  return !atomic_load(&r->foreign) && kcr_leader_may_write(r->le);
}
bool kcr_ring_owns(kcr_ring *r, uint64_t hash)
{
  pthread_mutex_lock(&r->mu);
  bool mine = kcr_ring_view_mine(r->view, hash);
  pthread_mutex_unlock(&r->mu);
  return mine;
}

bool kcr_ring_lost(kcr_ring *r)
{
  pthread_mutex_lock(&r->mu);
  bool failed = r->failed;
  pthread_mutex_unlock(&r->mu);
  return failed || kcr_leader_lost(r->le);
}

kcr_ring_view *kcr_ring_view_get(kcr_ring *r)
{
  kcr_ring_view *v;
  pthread_mutex_lock(&r->mu);
  v = r->view;
  atomic_fetch_add(&v->refs, 1);
  pthread_mutex_unlock(&r->mu);
  return v;
}

/* Waits (mu held) until ms from now, a poke or a stop. */
static void wait_locked(kcr_ring *r, uint64_t ms)
{
  struct timespec ts = kcr_time_mono_after(ms);
  while(!r->dirty && !r->stopping &&
        pthread_cond_timedwait(&r->cv, &r->mu, &ts) != ETIMEDOUT)
    ;
}

/* One server-side apply of our Lease's label and what it holds (the
 * thread's held, as epoch): it makes the Lease if it is not there (the
 * elector reads and keeps the metadata). Ungated, as the elector's own
 * requests are (a manager's write gate opens only once the Lease is held),
 * and forced: these fields are the ring's. Logs a failure once per kind. */
static kcr_err apply_lease(kcr_ring *r, uint64_t epoch, kcr_err *last)
{
  static const char hex[] = "0123456789abcdef";
  struct kcr_ref ref = {.gvr = &lease_gvr, .ns = r->ns, .name = r->lease_name};
  struct kcr_buf path = KCR_BUF_INIT, body = KCR_BUF_INIT;
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  struct kcr_http_response resp = {.body = KCR_BUF_INIT};
  char bits[2 * KCR_RING_BUCKETS / 8 + 1];
  kcr_err rc;

  for(size_t i = 0; i < KCR_RING_BUCKETS / 8; i++) {
    bits[2 * i] = hex[r->held[i] >> 4];
    bits[2 * i + 1] = hex[r->held[i] & 15];
  }
  bits[sizeof(bits) - 1] = '\0';
  /* The names are RFC 1123 (kcr_ring_new): nothing to escape in JSON. */
  rc = kcr_path(&path, &ref);
  if(!rc)
    rc = kcr_query_add(&path, "fieldManager", "kcr-ring");
  if(!rc)
    rc = kcr_query_add(&path, "force", "true");
  if(!rc)
    rc = kcr_buf_printf(&body,
                        "{\"apiVersion\":\"coordination.k8s.io/v1\",\"kind\":\"Lease\","
                        "\"metadata\":{\"name\":\"%s\",\"namespace\":\"%s\","
                        "\"labels\":{\"" KCR_RING_LABEL "\":\"%s\"},"
                        "\"annotations\":{\"" KCR_RING_HOLDS "\":\"%llu:%s\"}}}",
                        r->lease_name, r->ns, r->name, (unsigned long long)epoch, bits);
  if(!rc)
    rc = kcr_client_do(
        r->o.client,
        &(struct kcr_http_request){.method = "PATCH",
                                   .path = path.ptr,
                                   .content_type = "application/apply-patch+yaml",
                                   .body = body.ptr,
                                   .body_len = body.len,
                                   .ungated = true},
        &resp, &ei);
  if(rc && rc != *last)
    KCR_LOG(KCR_LOG_WARN, "ring: cannot write this replica's Lease; retrying",
            KCR_S("ring", r->desc), KCR_S("lease", r->lease_name),
            KCR_S("err", kcr_err_name(rc)), KCR_S("detail", ei.message));
  *last = rc;
  kcr_errinfo_cleanup(&ei);
  kcr_buf_cleanup(&resp.body);
  kcr_buf_cleanup(&path);
  kcr_buf_cleanup(&body);
  return rc;
}

/* Applies held as a new epoch (thread only, mu held; dropped during the
 * request). False when it failed (held stays dirty: the thread tries
 * again in a retry period). */
static bool apply_held_locked(kcr_ring *r, kcr_err *last)
{
  uint64_t epoch = ++r->epoch_seq;
  kcr_err rc;

  r->held_dirty = false;
  pthread_mutex_unlock(&r->mu);
  rc = apply_lease(r, epoch, last);
  pthread_mutex_lock(&r->mu);
  if(rc) {
    r->held_dirty = true;
    return false;
  }
  r->applied_epoch = epoch;
  return true;
}

/* Makes sure our Lease exists with the ring's label and what we hold -
 * nothing at the start (what a former process of this identity held is
 * not ours: it is dead). Retries every retry period; false if stopped.
 * Thread only, mu held. */
static bool label_lease_locked(kcr_ring *r, bool clear)
{
  kcr_err last = KCR_OK;
  bool ok;

  if(clear)
    memset(r->held, 0, sizeof(r->held));
  while(!(ok = apply_held_locked(r, &last)) && !r->stopping) {
    wait_locked(r, r->o.retry_period_ms);
    r->dirty = false;
  }
  return ok;
}

/* The buckets the other live Leases of the ring hold (mu held): those of
 * every held Lease but ours not expired - confirmed or not, whatever its
 * name: a hand-over waits for them. *next: lowered to the next expiry. */
static void others_hold_locked(kcr_ring *r, uint8_t out[KCR_RING_BUCKETS / 8],
                               uint64_t now, uint64_t *next)
{
  memset(out, 0, KCR_RING_BUCKETS / 8);
  for(size_t i = 0; i < r->nrec; i++) {
    const struct record *rec = &r->rec[i];
    uint64_t until = rec->seen_ms + rec->dur_ms;
    if(!*rec->holder || until <= now || !strcmp(rec->name, r->lease_name))
      continue;
    for(size_t k = 0; k < KCR_RING_BUCKETS / 8; k++)
      out[k] |= rec->holds[k];
    if(until < *next)
      *next = until;
  }
}

/* Our own record's hold epoch (mu held); 0 when not seen. */
static uint64_t echoed_epoch_locked(const kcr_ring *r)
{
  for(size_t i = 0; i < r->nrec; i++)
    if(!strcmp(r->rec[i].name, r->lease_name))
      return r->rec[i].hold_epoch;
  return 0;
}

/* The live members (mu held): sorted, copied; *next gets the
 * monotonic time of the next expiry (or now + retry). */
static kcr_err live_locked(kcr_ring *r, char ***out, size_t *n, uint64_t *next)
{
  uint64_t now = kcr_time_mono_ms();
  char **m = calloc(r->nrec + 1, sizeof(*m));
  size_t k = 0, rn = strlen(r->name);

  *next = now + r->o.retry_period_ms;
  if(!m)
    return KCR_ENOMEM;
  for(size_t i = 0; i < r->nrec; i++) {
    const struct record *rec = &r->rec[i];
    uint64_t until = rec->seen_ms + rec->dur_ms;
    /* A member holds its own Lease, <ring>-<identity> (so no two Leases
     * name one member): another holder of it (a process with another
     * identity took it) is no member; nor is the holder of a Lease not
     * renewed since we listed (maybe dead: its confirmation wakes us). */
    if(!*rec->holder || until <= now || !rec->confirmed || rec->gone ||
       strncmp(rec->name, r->name, rn) || rec->name[rn] != '-' ||
       strcmp(rec->name + rn + 1, rec->holder))
      continue;
    if(until < *next)
      *next = until;
    if(!(m[k++] = strdup(rec->holder))) {
      while(k)
        free(m[--k]);
      free(m);
      return KCR_ENOMEM;
    }
  }
  qsort(m, k, sizeof(*m), cmp_str);
  *out = m;
  *n = k;
  return KCR_OK;
}

static bool same_members(const kcr_ring_view *v, char **m, size_t n)
{
  if(v->n != n)
    return false;
  for(size_t i = 0; i < n; i++)
    if(strcmp(v->members[i], m[i]))
      return false;
  return true;
}

static void publish(kcr_ring *r, kcr_ring_view *v)
{
  const char *const lv[] = {r->name, NULL};
  uint64_t now = kcr_time_mono_ms();
  size_t in = 0, out = 0, assigned = 0, ntook = 0;
  double took[KCR_RING_BUCKETS];
  kcr_ring_view *old;

  pthread_mutex_lock(&r->mu);
  old = r->view;
  r->view = v;
  for(unsigned b = 0; b < KCR_RING_BUCKETS; b++) {
    bool was = BIT(old->active, b), is = BIT(v->active, b);
    in += is && !was;
    out += was && !is;
    assigned += assigned_b(v, b);
    if(is && !was && r->assigned_ms[b])
      took[ntook++] = (double)(now - r->assigned_ms[b]) / 1e3;
    /* the clock of a take-over starts when the bucket is first assigned */
    if(is || !assigned_b(v, b))
      r->assigned_ms[b] = 0;
    else if(!r->assigned_ms[b])
      r->assigned_ms[b] = now;
  }
  pthread_cond_broadcast(&r->cv);
  pthread_mutex_unlock(&r->mu);
  kcr_metric_set(r->m_members, lv, (double)v->n);
  kcr_metric_set(r->m_owned, lv, (double)v->owned);
  kcr_metric_set(r->m_assigned, lv, (double)assigned);
  kcr_metric_inc(r->m_handovers, (const char *[]){r->name, "in", NULL}, (double)in);
  kcr_metric_inc(r->m_handovers, (const char *[]){r->name, "out", NULL}, (double)out);
  kcr_metric_inc(r->m_changes, lv, 1);
  for(size_t i = 0; i < ntook; i++)
    kcr_metric_observe(r->m_takeover, lv, took[i]);
  KCR_LOG(KCR_LOG_INFO, "ring: view changed", KCR_S("ring", r->desc),
          KCR_I("epoch", (long long)v->epoch), KCR_I("members", (long long)v->n),
          KCR_I("bucketsOwned", (long long)v->owned), KCR_S("identity", r->identity));
  kcr_ring_view_unref(old);
  pthread_mutex_lock(&r->lis_mu);
  for(size_t i = 0; i < r->nlis; i++)
    r->lis[i].fn(r, r->lis[i].ud);
  pthread_mutex_unlock(&r->lis_mu);
}

kcr_err kcr_ring_add_listener(kcr_ring *r, kcr_ring_fn fn, void *ud)
{
  kcr_err rc = KCR_OK;
  if(!fn)
    return KCR_EINVAL;
  pthread_mutex_lock(&r->lis_mu);
  if(r->nlis == KCR_RING_LISTENERS)
    rc = KCR_ERANGE;
  else
    r->lis[r->nlis++] = (struct listener){.fn = fn, .ud = ud};
  pthread_mutex_unlock(&r->lis_mu);
  return rc;
}

void kcr_ring_remove_listener(kcr_ring *r, kcr_ring_fn fn, void *ud)
{
  pthread_mutex_lock(&r->lis_mu);
  for(size_t i = 0; i < r->nlis; i++)
    if(r->lis[i].fn == fn && r->lis[i].ud == ud) {
      memmove(&r->lis[i], &r->lis[i + 1], (r->nlis - i - 1) * sizeof(r->lis[0]));
      r->nlis--;
      break;
    }
  pthread_mutex_unlock(&r->lis_mu);
}

/* Whether every held Lease of the ring is confirmed (mu held). */
static bool all_confirmed_locked(const kcr_ring *r)
{
  for(size_t i = 0; i < r->nrec; i++)
    if(*r->rec[i].holder && !r->rec[i].confirmed && !r->rec[i].gone)
      return false;
  return true;
}

/* A copy of v's members (for a view of the same members), NULL if out of
 * memory. */
static char **members_dup(const kcr_ring_view *v)
{
  char **m = calloc(v->n + 1, sizeof(*m));
  for(size_t i = 0; m && i < v->n; i++)
    if(!(m[i] = strdup(v->members[i]))) {
      while(i)
        free(m[--i]);
      free(m);
      return NULL;
    }
  return m;
}

/* Publishes a view of members m (taken over) with active (mu held, dropped
 * while the listeners run). False if out of memory. */
static bool publish_locked(kcr_ring *r, char **m, size_t n, const uint8_t *active)
{
  uint64_t epoch = r->view->epoch + 1;
  kcr_ring_view *v;

  pthread_mutex_unlock(&r->mu);
  v = view_new(epoch, m, n, r->identity, active);
  if(v)
    publish(r, v);
  pthread_mutex_lock(&r->mu);
  return v != NULL;
}

/* Drops the tombstones of deleted Leases that would have expired (mu held). */
static void purge_gone_locked(kcr_ring *r, uint64_t now)
{
  for(size_t i = 0; i < r->nrec;)
    if(r->rec[i].gone && r->rec[i].seen_ms + r->rec[i].dur_ms <= now) {
      record_clear(&r->rec[i]);
      r->rec[i] = r->rec[--r->nrec];
    } else {
      i++;
    }
}

/* Whether the records are the informer's cache as a whole (mu held): each
 * cached Lease recorded at its resourceVersion, and no record (but
 * tombstones) of a Lease the cache lacks. A relist swaps the cache first
 * and tells the handlers one Lease at a time: until it has told all, the
 * records mix two states, and an echo of our claim seen then proves
 * nothing about the others' claims. */
static bool consistent_locked(kcr_ring *r)
{
  kcr_obj **objs;
  size_t n, live = 0;
  bool ok = true;

  if(kcr_store_ref_all(kcr_informer_store(r->inf), &objs, &n))
    return false; /* out of memory: look again later */
  for(size_t i = 0; i < r->nrec; i++)
    live += !r->rec[i].gone;
  for(size_t i = 0; i < n && ok; i++) {
    bool found = false;
    for(size_t k = 0; k < r->nrec && !found; k++)
      found = !r->rec[k].gone && !strcmp(r->rec[k].name, kcr_obj_name(objs[i])) &&
              r->rec[k].rv && !strcmp(r->rec[k].rv, kcr_obj_rv(objs[i]));
    ok = found;
  }
  kcr_objs_unref(objs, n);
  return ok && live == n;
}

/* One round of the hand-over (thread only, mu held) with the live members
 * m (taken over); see DESIGN. *next: lowered to when to look again. */
static void step_locked(kcr_ring *r, char **m, size_t n, uint64_t *next, kcr_err *last)
{
  uint8_t others[KCR_RING_BUCKETS / 8], active[KCR_RING_BUCKETS / 8];
  uint64_t now = kcr_time_mono_ms();
  bool activated = false;

  purge_gone_locked(r, now);
  /* 1. New members: the buckets no longer assigned to us leave the view
   * at once (the listeners drain them before publish returns). */
  if(same_members(r->view, m, n)) {
    for(size_t i = 0; i < n; i++)
      free(m[i]);
    free(m);
  } else if(!publish_locked(r, m, n, r->view->active)) {
    *next = now + 100; /* out of memory: try again soon */
    return;
  }
  /* 2. Release what is no longer assigned (drained by now); 3. claim what
   * is assigned and nobody else holds. */
  others_hold_locked(r, others, now, next);
  for(unsigned b = 0; b < KCR_RING_BUCKETS; b++) {
    if(BIT(r->held, b) && !assigned_b(r->view, b)) {
      CLR(r->held, b);
      r->held_dirty = true;
    } else if(!BIT(r->held, b) && assigned_b(r->view, b) && !BIT(others, b)) {
      SET(r->held, b);
      r->held_dirty = true;
    }
  }
  if(r->held_dirty && !apply_held_locked(r, last)) {
    if(now + r->o.retry_period_ms < *next)
      *next = now + r->o.retry_period_ms;
    return;
  }
  /* 4. Once our watch has seen our last apply, a claimed bucket that no
   * other live Lease holds is ours (every claim made before ours is in
   * that state); one that another holds too is withdrawn and claimed
   * again once free (of two racing claims the later sees the earlier). */
  if(!r->applied_epoch || echoed_epoch_locked(r) != r->applied_epoch ||
     !consistent_locked(r))
    return; /* (what is missing pokes the thread) */
  r->echoed_once = true;
  now = kcr_time_mono_ms();
  others_hold_locked(r, others, now, next);
  memcpy(active, r->view->active, sizeof(active));
  for(unsigned b = 0; b < KCR_RING_BUCKETS; b++) {
    if(!BIT(r->held, b) || BIT(active, b) || !assigned_b(r->view, b))
      continue;
    if(BIT(others, b)) {
      CLR(r->held, b);
      r->held_dirty = true;
    } else {
      SET(active, b);
      activated = true;
    }
  }
  if(r->held_dirty)
    r->dirty = true; /* withdraw now */
  if(activated) {
    char **same = members_dup(r->view);
    if(!same || !publish_locked(r, same, r->view->n, active))
      *next = now + 100;
  }
}

static void *run(void *p)
{
  kcr_ring *r = p;
  kcr_err last = KCR_OK;
  bool ok;

  pthread_mutex_lock(&r->mu);
  ok = label_lease_locked(r, true);
  pthread_mutex_unlock(&r->mu);
  if(!ok)
    goto done; /* stopped */
  if(kcr_leader_start(r->le)) {
    KCR_LOG(KCR_LOG_ERROR, "ring: cannot start the elector (out of threads?)",
            KCR_S("ring", r->desc));
    pthread_mutex_lock(&r->mu);
    r->failed = true;
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
    goto done;
  }
  pthread_mutex_lock(&r->mu);
  while(!r->stopping) {
    char **m = NULL;
    size_t n = 0;
    uint64_t now = kcr_time_mono_ms(), next = now + r->o.retry_period_ms;
    r->dirty = false;
    if(r->relabel) { /* our Lease was deleted: the others may take our
                        buckets now - give them up (drained), make it again */
      char **same = members_dup(r->view);
      r->relabel = false;
      if(!same || !publish_locked(r, same, r->view->n, NULL)) {
        r->relabel = true; /* out of memory: again soon */
        wait_locked(r, 100);
        continue;
      }
      label_lease_locked(r, true);
      continue;
    }
    /* Only a synced informer tells who the others are: a partial list
     * would give this replica buckets that are someone else's. The first
     * list's Leases count once seen renewed (a dead member's Lease stays
     * held), so the first view waits until each of them was, or for two
     * renewals (retry periods) at most. */
    if(!r->listed && kcr_informer_has_synced(r->inf)) {
      r->listed = true;
      r->listed_ms = now;
    }
    if(r->listed && r->view->epoch == 0 &&
       now < r->listed_ms + 2 * r->o.retry_period_ms && !all_confirmed_locked(r))
      next = r->listed_ms + 2 * r->o.retry_period_ms;
    else if(r->listed && !live_locked(r, &m, &n, &next))
      step_locked(r, m, n, &next, &last);
    now = kcr_time_mono_ms();
    /* +1: an expiry is "until <= now" */
    wait_locked(r, next > now ? next - now + 1 : 1);
  }
  pthread_mutex_unlock(&r->mu);
done:
  return NULL;
}

kcr_err kcr_ring_start(kcr_ring *r)
{
  kcr_err rc;

  pthread_mutex_lock(&r->mu);
  if(r->started || r->stopping) {
    pthread_mutex_unlock(&r->mu);
    return KCR_EINVAL;
  }
  r->started = true;
  pthread_mutex_unlock(&r->mu);
  rc = kcr_informer_start(r->inf);
  if(rc)
    return rc;
  pthread_mutex_lock(&r->mu);
  if(pthread_create(&r->th, NULL, run, r))
    rc = KCR_ENOMEM;
  else
    r->running = true;
  pthread_mutex_unlock(&r->mu);
  return rc;
}

bool kcr_ring_wait_joined(kcr_ring *r, uint64_t timeout_ms)
{
  bool forever = timeout_ms == KCR_FOREVER, joined;
  struct timespec ts = kcr_time_mono_after(forever ? 0 : timeout_ms);

  pthread_mutex_lock(&r->mu);
  while(!(joined = r->view->self >= 0 && kcr_leader_is_leader(r->le)) && !r->stopping &&
        !r->failed) {
    if(forever)
      pthread_cond_wait(&r->cv, &r->mu);
    else if(pthread_cond_timedwait(&r->cv, &r->mu, &ts) == ETIMEDOUT)
      break;
  }
  pthread_mutex_unlock(&r->mu);
  return joined;
}

void kcr_ring_stop(kcr_ring *r)
{
  bool join, from_cb;
  kcr_ring_view *empty;

  pthread_mutex_lock(&r->mu);
  if(r->stopped) {
    pthread_mutex_unlock(&r->mu);
    return;
  }
  from_cb = r->running && pthread_equal(pthread_self(), r->th);
  r->stopping = true;
  pthread_cond_broadcast(&r->cv);
  join = r->running && !from_cb;
  if(join)
    r->running = false;
  pthread_mutex_unlock(&r->mu);
  if(from_cb)
    return; /* asked; the waiting stop comes from elsewhere */
  if(join)
    pthread_join(r->th, NULL);
  /* Own nothing (the listeners drain) before the others may take over. */
  empty = r->view ? view_new(r->view->epoch + 1, NULL, 0, "", NULL) : NULL;
  if(empty)
    publish(r, empty);
  if(r->le)
    kcr_leader_stop(r->le); /* clears the holder: the others see it leave */
  if(r->inf)
    kcr_informer_stop(r->inf);
  pthread_mutex_lock(&r->mu);
  empty = r->view && r->view->n ? view_new(r->view->epoch + 1, NULL, 0, "", NULL) : NULL;
  if(empty) { /* out of memory above */
    kcr_ring_view_unref(r->view);
    r->view = empty;
  }
  r->stopped = true;
  pthread_cond_broadcast(&r->cv);
  pthread_mutex_unlock(&r->mu);
}

void kcr_ring_free(kcr_ring *r)
{
  if(!r)
    return;
  kcr_ring_stop(r);
  kcr_leader_free(r->le);
  kcr_informer_free(r->inf);
  for(size_t i = 0; i < r->nrec; i++)
    record_clear(&r->rec[i]);
  free(r->rec);
  kcr_ring_view_unref(r->view);
  kcr_client_free(r->o.client);
  kcr_metrics_free(r->o.metrics);
  pthread_mutex_destroy(&r->mu);
  pthread_mutex_destroy(&r->lis_mu);
  pthread_cond_destroy(&r->cv);
  free(r->ns);
  free(r->name);
  free(r->identity);
  free(r->lease_name);
  free(r->selector);
  free(r->desc);
  free(r);
}
