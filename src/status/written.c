/* DESIGN: the status writer's record of its own writes (written-int.h).
 *
 * One record per uid in a hash table, and every record also on a list in
 * the order of the writes (a new write of a uid moves it to the end), so
 * expiry and eviction take from the front: the TTL is the same for all, so
 * the first record is always the oldest. Each call first drops the expired
 * ones, so a table nobody writes to any more empties as it is read.
 *
 * A record stores the status as the JSON text the server answered with
 * (copied from the answer: neither parsed nor printed; about a third of a
 * tree's memory), parsed only when a caller's copy is older than it -
 * while the cache lags, which is rare and short - with kcr_json_parse, so
 * int64 fields come back exactly. */
#include <stdlib.h>
#include <string.h>

#include "kcr/hash.h"
#include "kcr/json.h"
#include "kcr/path.h"
#include "written-int.h"

struct kcr__wrec {
  struct kcr_hnode hn;           /* in by_uid */
  struct kcr__wrec *prev, *next; /* oldest first */
  uint64_t at_ms;
  char *status; /* JSON text, len bytes */
  size_t len;
  char *rv;   /* in key[] after the uid */
  char key[]; /* uid NUL rv NUL */
};

void kcr__written_init(struct kcr__written *t, size_t max, uint64_t ttl_ms)
{
  memset(t, 0, sizeof(*t));
  pthread_mutex_init(&t->mu, NULL);
  t->max = max ? max : 1;
  t->ttl_ms = ttl_ms;
}

static void unlink_rec(struct kcr__written *t, struct kcr__wrec *r)
{
  kcr_htab_remove(&t->by_uid, &r->hn);
  *(r->prev ? &r->prev->next : &t->oldest) = r->next;
  *(r->next ? &r->next->prev : &t->newest) = r->prev;
}

static void drop(struct kcr__written *t, struct kcr__wrec *r)
{
  unlink_rec(t, r);
  free(r->status);
  free(r);
}

/* Drops the records written ttl_ms or more before now_ms; with t->mu. A
 * caller's now_ms may be a little older than a record another thread has
 * just put: that record is not expired. */
static void expire(struct kcr__written *t, uint64_t now_ms)
{
  while(t->oldest && now_ms >= t->oldest->at_ms && now_ms - t->oldest->at_ms >= t->ttl_ms)
    drop(t, t->oldest);
}

static struct kcr__wrec *find(struct kcr__written *t, const char *uid, uint64_t h)
{
  for(struct kcr_hnode *n = kcr_htab_lookup(&t->by_uid, h); n;
      n = kcr_htab_lookup_next(n)) {
    struct kcr__wrec *r = KCR_HTAB_ENTRY(n, struct kcr__wrec, hn);
    if(!strcmp(r->key, uid))
      return r;
  }
  return NULL;
}

void kcr__written_cleanup(struct kcr__written *t)
{
  while(t->oldest)
    drop(t, t->oldest);
  kcr_htab_cleanup(&t->by_uid);
  pthread_mutex_destroy(&t->mu);
}

void kcr__written_put(struct kcr__written *t, const char *uid, const char *rv,
                      const char *status, size_t len, uint64_t now_ms)
{
  size_t nu, nr;
  struct kcr__wrec *r, *old;
  uint64_t h;
  int cmp;

  if(!uid || !*uid || !rv || !*rv)
    return;
  nu = strlen(uid) + 1;
  nr = strlen(rv) + 1;
  if(!(r = malloc(sizeof(*r) + nu + nr)))
    return;
  memset(r, 0, sizeof(*r));
  memcpy(r->key, uid, nu);
  r->rv = r->key + nu;
  memcpy(r->rv, rv, nr);
  r->at_ms = now_ms;
  if(!status)
    status = "{}", len = 2;
  if(!(r->status = malloc(len + 1))) {
    free(r);
    return;
  }
  memcpy(r->status, status, len);
  r->status[len] = '\0';
  r->len = len;
  h = kcr_hash_str(uid);
  pthread_mutex_lock(&t->mu);
  expire(t, now_ms);
  old = find(t, uid, h);
  if(old && !kcr_rv_compare(old->rv, rv, &cmp) && cmp >= 0) {
    pthread_mutex_unlock(&t->mu); /* a later answer is already here */
    free(r->status);
    free(r);
    return;
  }
  if(old)
    drop(t, old);
  else if(t->by_uid.n >= t->max)
    drop(t, t->oldest);
  if(kcr_htab_insert(&t->by_uid, &r->hn, h)) {
    pthread_mutex_unlock(&t->mu);
    free(r->status);
    free(r);
    return;
  }
  r->prev = t->newest;
  *(t->newest ? &t->newest->next : &t->oldest) = r;
  t->newest = r;
  pthread_mutex_unlock(&t->mu);
}

cJSON *kcr__written_newer(struct kcr__written *t, const char *uid, const char *rv,
                          uint64_t now_ms)
{
  struct kcr__wrec *r;
  cJSON *status = NULL;
  int cmp;

  if(!uid || !*uid)
    return NULL;
  pthread_mutex_lock(&t->mu);
  expire(t, now_ms);
  r = t->by_uid.n ? find(t, uid, kcr_hash_str(uid)) : NULL;
  if(r && !kcr_rv_compare(rv, r->rv, &cmp) && cmp < 0) {
    if(kcr_json_parse(r->status, r->len, &status, NULL))
      status = NULL; /* out of memory: compare with what the caller has */
  } else if(r) {
    drop(t, r); /* caught up, overtaken, or not comparable */
  }
  pthread_mutex_unlock(&t->mu);
  return status;
}

size_t kcr__written_len(struct kcr__written *t, uint64_t now_ms)
{
  size_t n;
  pthread_mutex_lock(&t->mu);
  expire(t, now_ms);
  n = t->by_uid.n;
  pthread_mutex_unlock(&t->mu);
  return n;
}
