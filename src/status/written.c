/* DESIGN: a writer's record of its own writes (written-int.h): the status
 * writer's, and kcr_written's (kcr/status.h) for any other write.
 *
 * One record per key in a hash table, and every record also on one of two
 * lists: those not yet seen caught up in the order of the writes (a new
 * write of a key moves it to the end), and those an informer showed caught
 * up (kcr__written_seen) in the order they were seen. Each list has one
 * lifetime for all (ttl_ms, grace_ms), so expiry takes from the fronts;
 * eviction takes the first seen record, else the oldest write. Each call
 * first drops the expired ones, so a table nobody writes to any more
 * empties as it is read.
 *
 * The status writer's record stores the status as the JSON text the
 * server answered with (copied from the answer: neither parsed nor
 * printed; about a third of a tree's memory), parsed only when a caller's
 * copy is older than it - while the cache lags, which is rare and short -
 * with kcr_json_parse, so int64 fields come back exactly. kcr_written's
 * caller chooses its keys and texts; a missing copy counts as older for
 * it (kcr__written_pending with absent), since a child not yet in the
 * cache has no version to compare. */
#include <stdlib.h>
#include <string.h>

#include "kcr/hash.h"
#include "kcr/json.h"
#include "kcr/path.h"
#include "kcr/status.h"
#include "kcr/time.h"
#include "written-int.h"

struct kcr__wrec {
  struct kcr_hnode hn;           /* in by_key */
  struct kcr__wrec *prev, *next; /* oldest first, on one of the two lists */
  uint64_t at_ms;                /* written, or (seen) seen caught up */
  bool seen;
  char *text; /* len bytes, NUL-terminated */
  size_t len;
  char *rv;   /* in key[] after the key */
  char key[]; /* key NUL rv NUL */
};

void kcr__written_init(struct kcr__written *t, size_t max, uint64_t ttl_ms)
{
  memset(t, 0, sizeof(*t));
  pthread_mutex_init(&t->mu, NULL);
  t->max = max ? max : 1;
  t->ttl_ms = ttl_ms;
  t->grace_ms = ttl_ms < KCR__WRITTEN_GRACE_MS ? ttl_ms : KCR__WRITTEN_GRACE_MS;
}

/* Takes r off its list (not out of by_key). */
static void unlist(struct kcr__written *t, struct kcr__wrec *r)
{
  struct kcr__wrec **first = r->seen ? &t->seen_oldest : &t->oldest,
                   **last = r->seen ? &t->seen_newest : &t->newest;

  *(r->prev ? &r->prev->next : first) = r->next;
  *(r->next ? &r->next->prev : last) = r->prev;
  r->prev = r->next = NULL;
}

/* Puts r at the end of its list (r->seen says which). */
static void enlist(struct kcr__written *t, struct kcr__wrec *r)
{
  struct kcr__wrec **first = r->seen ? &t->seen_oldest : &t->oldest,
                   **last = r->seen ? &t->seen_newest : &t->newest;

  r->prev = *last;
  r->next = NULL;
  *(*last ? &(*last)->next : first) = r;
  *last = r;
}

static void unlink_rec(struct kcr__written *t, struct kcr__wrec *r)
{
  kcr_htab_remove(&t->by_key, &r->hn);
  unlist(t, r);
}

static void drop(struct kcr__written *t, struct kcr__wrec *r)
{
  unlink_rec(t, r);
  free(r->text);
  free(r);
}

/* Drops the records written ttl_ms or more before now_ms; with t->mu. A
 * caller's now_ms may be a little older than a record another thread has
 * just put: that record is not expired. */
static void expire(struct kcr__written *t, uint64_t now_ms)
{
  while(t->oldest && now_ms >= t->oldest->at_ms && now_ms - t->oldest->at_ms >= t->ttl_ms)
    drop(t, t->oldest);
  while(t->seen_oldest && now_ms >= t->seen_oldest->at_ms &&
        now_ms - t->seen_oldest->at_ms >= t->grace_ms)
    drop(t, t->seen_oldest);
}

static struct kcr__wrec *find(struct kcr__written *t, const char *key, uint64_t h)
{
  for(struct kcr_hnode *n = kcr_htab_lookup(&t->by_key, h); n;
      n = kcr_htab_lookup_next(n)) {
    struct kcr__wrec *r = KCR_HTAB_ENTRY(n, struct kcr__wrec, hn);
    if(!strcmp(r->key, key))
      return r;
  }
  return NULL;
}

void kcr__written_cleanup(struct kcr__written *t)
{
  while(t->oldest)
    drop(t, t->oldest);
  while(t->seen_oldest)
    drop(t, t->seen_oldest);
  kcr_htab_cleanup(&t->by_key);
  pthread_mutex_destroy(&t->mu);
}

void kcr__written_put(struct kcr__written *t, const char *key, const char *rv,
                      const char *text, size_t len, uint64_t now_ms)
{
  size_t nk, nr;
  struct kcr__wrec *r, *old;
  uint64_t h;
  int cmp;

  if(!key || !*key || !rv || !*rv)
    return;
  nk = strlen(key) + 1;
  nr = strlen(rv) + 1;
  if(!(r = malloc(sizeof(*r) + nk + nr)))
    return;
  memset(r, 0, sizeof(*r));
  memcpy(r->key, key, nk);
  r->rv = r->key + nk;
  memcpy(r->rv, rv, nr);
  r->at_ms = now_ms;
  if(!text)
    text = "{}", len = 2;
  if(!(r->text = malloc(len + 1))) {
    free(r);
    return;
  }
  memcpy(r->text, text, len);
  r->text[len] = '\0';
  r->len = len;
  h = kcr_hash_str(key);
  pthread_mutex_lock(&t->mu);
  expire(t, now_ms);
  old = find(t, key, h);
  if(old && !kcr_rv_compare(old->rv, rv, &cmp) && cmp >= 0) {
    pthread_mutex_unlock(&t->mu); /* a later answer is already here */
    free(r->text);
    free(r);
    return;
  }
  if(old)
    drop(t, old);
  else if(t->by_key.n >= t->max) /* those seen caught up go first */
    drop(t, t->seen_oldest ? t->seen_oldest : t->oldest);
  if(kcr_htab_insert(&t->by_key, &r->hn, h)) {
    pthread_mutex_unlock(&t->mu);
    free(r->text);
    free(r);
    return;
  }
  enlist(t, r);
  pthread_mutex_unlock(&t->mu);
}

void kcr__written_seen(struct kcr__written *t, const char *key, const char *rv,
                       uint64_t now_ms)
{
  struct kcr__wrec *r;
  int cmp;

  if(!key || !*key || !rv)
    return;
  pthread_mutex_lock(&t->mu);
  expire(t, now_ms);
  if(t->by_key.n && (r = find(t, key, kcr_hash_str(key))) && !r->seen &&
     (kcr_rv_compare(rv, r->rv, &cmp) || cmp >= 0)) {
    unlist(t, r);
    r->seen = true;
    r->at_ms = now_ms;
    enlist(t, r);
  }
  pthread_mutex_unlock(&t->mu);
}

bool kcr__written_is(struct kcr__written *t, const char *key, const char *rv)
{
  struct kcr__wrec *r;
  bool is;

  if(!key || !*key || !rv || !*rv)
    return false;
  pthread_mutex_lock(&t->mu);
  is = t->by_key.n && (r = find(t, key, kcr_hash_str(key))) && !strcmp(r->rv, rv);
  pthread_mutex_unlock(&t->mu);
  return is;
}

/* The record of key when rv (or, with absent, a missing copy) is older
 * than it; else NULL, and a record of key is dropped. With t->mu held. */
static struct kcr__wrec *pending(struct kcr__written *t, const char *key, const char *rv,
                                 bool absent, uint64_t now_ms)
{
  struct kcr__wrec *r;
  int cmp;

  expire(t, now_ms);
  if(!t->by_key.n || !(r = find(t, key, kcr_hash_str(key))))
    return NULL;
  if(rv ? !kcr_rv_compare(rv, r->rv, &cmp) && cmp < 0 : absent)
    return r;
  drop(t, r); /* caught up, overtaken, or not comparable */
  return NULL;
}

cJSON *kcr__written_newer(struct kcr__written *t, const char *key, const char *rv,
                          uint64_t now_ms)
{
  struct kcr__wrec *r;
  cJSON *status = NULL;

  if(!key || !*key)
    return NULL;
  pthread_mutex_lock(&t->mu);
  r = pending(t, key, rv, false, now_ms);
  if(r && kcr_json_parse(r->text, r->len, &status, NULL))
    status = NULL; /* out of memory, or not JSON: compare with what the
                      caller has */
  pthread_mutex_unlock(&t->mu);
  return status;
}

bool kcr__written_pending(struct kcr__written *t, const char *key, const char *rv,
                          bool absent, struct kcr_buf *out, uint64_t now_ms)
{
  struct kcr__wrec *r;
  bool yes = false;

  if(!key || !*key)
    return false;
  pthread_mutex_lock(&t->mu);
  r = pending(t, key, rv, absent, now_ms);
  if(r && out) {
    kcr_buf_reset(out);
    yes = !kcr_buf_append(out, r->text, r->len);
  } else {
    yes = r != NULL;
  }
  pthread_mutex_unlock(&t->mu);
  return yes;
}

void kcr__written_forget(struct kcr__written *t, const char *key)
{
  struct kcr__wrec *r;

  if(!key || !*key)
    return;
  pthread_mutex_lock(&t->mu);
  if(t->by_key.n && (r = find(t, key, kcr_hash_str(key))))
    drop(t, r);
  pthread_mutex_unlock(&t->mu);
}

size_t kcr__written_len(struct kcr__written *t, uint64_t now_ms)
{
  size_t n;
  pthread_mutex_lock(&t->mu);
  expire(t, now_ms);
  n = t->by_key.n;
  pthread_mutex_unlock(&t->mu);
  return n;
}

/* ---- kcr_written: one table behind a handle (kcr/status.h) ---- */

#define WRITTEN_DEFAULT_MAX    4096
#define WRITTEN_DEFAULT_TTL_MS 30000

struct kcr_written {
  struct kcr__written t;
};

kcr_err kcr_written_new(const struct kcr_written_opts *opts, kcr_written **out,
                        struct kcr_errinfo *ei)
{
  struct kcr_written_opts o = opts ? *opts : (struct kcr_written_opts){0};

  if(!out)
    return kcr_errinfo_set(ei, KCR_EINVAL, "kcr_written_new: no out");
  *out = calloc(1, sizeof(**out));
  if(!*out)
    return KCR_ENOMEM;
  kcr__written_init(&(*out)->t, o.max ? o.max : WRITTEN_DEFAULT_MAX,
                    o.ttl_ms ? o.ttl_ms : WRITTEN_DEFAULT_TTL_MS);
  return KCR_OK;
}

void kcr_written_free(kcr_written *w)
{
  if(!w)
    return;
  kcr__written_cleanup(&w->t);
  free(w);
}

void kcr_written_put(kcr_written *w, const char *key, const char *rv, const char *text,
                     size_t len)
{
  kcr__written_put(&w->t, key, rv, text ? text : "", text ? len : 0, kcr_time_mono_ms());
}

bool kcr_written_pending(kcr_written *w, const char *key, const char *cached_rv,
                         struct kcr_buf *text)
{
  return kcr__written_pending(&w->t, key, cached_rv, true, text, kcr_time_mono_ms());
}

void kcr_written_seen(kcr_written *w, const char *key, const char *cached_rv)
{
  kcr__written_seen(&w->t, key, cached_rv, kcr_time_mono_ms());
}

void kcr_written_forget(kcr_written *w, const char *key)
{
  kcr__written_forget(&w->t, key);
}

size_t kcr_written_len(kcr_written *w)
{
  return kcr__written_len(&w->t, kcr_time_mono_ms());
}
