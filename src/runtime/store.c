/* DESIGN: the informer cache.
 *
 * Objects: one malloc block each: the header struct, then the strings it
 * points to, then the compact JSON text. Immutable after kcr_obj_new; an
 * atomic refcount lets readers keep one past its removal from the store.
 *
 * Store: a chained hash table key -> obj (key "ns/name"), plus per index a
 * hash table value -> small array of keys. One rwlock guards both; lookups
 * take it shared, the single writer takes it exclusive for a few pointer
 * swaps. kcr_store_replace builds the new table outside the lock and swaps
 * it in, so readers see either the old or the new contents, never a mix.
 *
 * Invariants: every object in the table holds one reference owned by the
 * table; index entries mirror the table exactly (updated in the same
 * critical section); bytes == sum of kcr_obj_size over the table. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "kcr/json.h"
#include "kcr/store.h"

struct kcr_obj {
  atomic_uint refs;
  const char *ns, *name, *uid, *rv, *key;
  int64_t generation;
  bool deleting;
  struct kcr_owner owner;
  size_t size, json_len;
  const char *json;
  char data[]; /* strings, then the JSON text */
};

/* ---- objects ---- */

static size_t slen(const char *s) { return s ? strlen(s) + 1 : 1; }

static const char *put_str(char **cur, const char *s)
{
  char *at = *cur;
  size_t n = s ? strlen(s) : 0;
  memcpy(at, s ? s : "", n);
  at[n] = '\0';
  *cur += n + 1;
  return at;
}

static const cJSON *controller_ref(const cJSON *tree)
{
  const cJSON *r;
  cJSON_ArrayForEach(r, kcr_json_at(tree, "metadata.ownerReferences"))
  {
    if(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r, "controller")))
      return r;
  }
  return NULL;
}

kcr_err kcr_obj_new(const cJSON *tree, bool keep_managed_fields, kcr_obj **out)
{
  const char *ns = kcr_json_str(tree, "metadata.namespace");
  const char *name = kcr_json_str(tree, "metadata.name");
  const char *uid = kcr_json_str(tree, "metadata.uid");
  const char *rv = kcr_json_str(tree, "metadata.resourceVersion");
  const cJSON *ctl = controller_ref(tree);
  cJSON *meta = kcr_json_at(tree, "metadata"), *mf = NULL;
  char *text, *cur;
  size_t tlen, need;
  kcr_obj *o;

  *out = NULL;
  if(!name || !*name)
    return KCR_EINVAL;
  /* Print without managedFields: detach, print, put back (tree unchanged). */
  if(!keep_managed_fields && meta)
    mf = cJSON_DetachItemFromObjectCaseSensitive(meta, "managedFields");
  text = cJSON_PrintUnformatted(tree);
  if(mf)
    cJSON_AddItemToObject(meta, "managedFields", mf);
  if(!text)
    return KCR_ENOMEM;
  tlen = strlen(text);
  need = sizeof(*o) + slen(ns) + slen(name) + slen(uid) + slen(rv) + slen(ns) +
         slen(name) + 1 + tlen + 1;
  if(ctl)
    need += slen(kcr_json_str(ctl, "apiVersion")) + slen(kcr_json_str(ctl, "kind")) +
            slen(kcr_json_str(ctl, "name")) + slen(kcr_json_str(ctl, "uid"));
  o = malloc(need);
  if(!o) {
    free(text);
    return KCR_ENOMEM;
  }
  memset(o, 0, sizeof(*o));
  atomic_init(&o->refs, 1);
  cur = o->data;
  o->ns = put_str(&cur, ns);
  o->name = put_str(&cur, name);
  o->uid = put_str(&cur, uid);
  o->rv = put_str(&cur, rv);
  o->key = cur;
  if(ns && *ns) {
    size_t a = strlen(ns), b = strlen(name);
    memcpy(cur, ns, a);
    cur[a] = '/';
    memcpy(cur + a + 1, name, b + 1);
    cur += a + b + 2;
  } else {
    put_str(&cur, name);
  }
  if(ctl) {
    o->owner.api_version = put_str(&cur, kcr_json_str(ctl, "apiVersion"));
    o->owner.kind = put_str(&cur, kcr_json_str(ctl, "kind"));
    o->owner.name = put_str(&cur, kcr_json_str(ctl, "name"));
    o->owner.uid = put_str(&cur, kcr_json_str(ctl, "uid"));
  }
  memcpy(cur, text, tlen + 1);
  o->json = cur;
  o->json_len = tlen;
  o->generation = kcr_json_int(tree, "metadata.generation", 0);
  o->deleting = kcr_json_str(tree, "metadata.deletionTimestamp") != NULL;
  o->size = need;
  free(text);
  *out = o;
  return KCR_OK;
}

kcr_obj *kcr_obj_ref(kcr_obj *o)
{
  if(o)
    atomic_fetch_add_explicit(&o->refs, 1, memory_order_relaxed);
  return o;
}

void kcr_obj_unref(kcr_obj *o)
{
  if(o && atomic_fetch_sub_explicit(&o->refs, 1, memory_order_acq_rel) == 1)
    free(o);
}

const char *kcr_obj_ns(const kcr_obj *o) { return o->ns; }
const char *kcr_obj_name(const kcr_obj *o) { return o->name; }
const char *kcr_obj_uid(const kcr_obj *o) { return o->uid; }
const char *kcr_obj_rv(const kcr_obj *o) { return o->rv; }
const char *kcr_obj_key(const kcr_obj *o) { return o->key; }
int64_t kcr_obj_generation(const kcr_obj *o) { return o->generation; }
bool kcr_obj_deleting(const kcr_obj *o) { return o->deleting; }
const struct kcr_owner *kcr_obj_controller(const kcr_obj *o) { return &o->owner; }
size_t kcr_obj_size(const kcr_obj *o) { return o->size; }

const char *kcr_obj_json(const kcr_obj *o, size_t *len)
{
  if(len)
    *len = o->json_len;
  return o->json;
}

cJSON *kcr_obj_parse(const kcr_obj *o)
{
  return cJSON_ParseWithLength(o->json, o->json_len);
}

/* ---- a chained hash table of string -> pointer ---- */

struct entry {
  struct entry *next;
  uint64_t hash;
  const char *key; /* borrowed from the value (obj key) or owned (index) */
  void *val;
};

struct table {
  struct entry **b;
  size_t nb, n;
};

static uint64_t hash_str(const char *s)
{
  uint64_t h = 1469598103934665603ull; /* FNV-1a */
  for(; *s; s++)
    h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return h;
}

static struct entry *tfind(const struct table *t, const char *key, uint64_t h)
{
  if(!t->nb)
    return NULL;
  for(struct entry *e = t->b[h & (t->nb - 1)]; e; e = e->next)
    if(e->hash == h && !strcmp(e->key, key))
      return e;
  return NULL;
}

static kcr_err tgrow(struct table *t)
{
  size_t nb = t->nb ? t->nb * 2 : 64;
  struct entry **b = calloc(nb, sizeof(*b));
  if(!b)
    return KCR_ENOMEM;
  for(size_t i = 0; i < t->nb; i++) {
    struct entry *e = t->b[i], *next;
    for(; e; e = next) {
      next = e->next;
      e->next = b[e->hash & (nb - 1)];
      b[e->hash & (nb - 1)] = e;
    }
  }
  free(t->b);
  t->b = b;
  t->nb = nb;
  return KCR_OK;
}

/* Inserts key (must be absent). */
static struct entry *tinsert(struct table *t, const char *key, uint64_t h, void *val)
{
  struct entry *e;
  if((t->n + 1 > t->nb * 3 / 4) && tgrow(t))
    return NULL;
  e = malloc(sizeof(*e));
  if(!e)
    return NULL;
  e->hash = h;
  e->key = key;
  e->val = val;
  e->next = t->b[h & (t->nb - 1)];
  t->b[h & (t->nb - 1)] = e;
  t->n++;
  return e;
}

/* Unlinks and frees the entry for key; returns its value or NULL. */
static void *tremove(struct table *t, const char *key, uint64_t h, const char **okey)
{
  if(!t->nb)
    return NULL;
  for(struct entry **pp = &t->b[h & (t->nb - 1)]; *pp; pp = &(*pp)->next) {
    struct entry *e = *pp;
    if(e->hash == h && !strcmp(e->key, key)) {
      void *v = e->val;
      if(okey)
        *okey = e->key;
      *pp = e->next;
      free(e);
      t->n--;
      return v;
    }
  }
  return NULL;
}

static void tclear(struct table *t, void (*free_val)(void *), bool free_keys)
{
  for(size_t i = 0; i < t->nb; i++) {
    struct entry *e = t->b[i], *next;
    for(; e; e = next) {
      next = e->next;
      if(free_val)
        free_val(e->val);
      if(free_keys)
        free((char *)e->key);
      free(e);
    }
  }
  free(t->b);
  memset(t, 0, sizeof(*t));
}

/* ---- indexes: value -> array of object keys (owned copies) ---- */

struct keyset {
  char **keys;
  size_t n, cap;
};

struct index {
  char *name;
  kcr_index_fn fn;
  struct table values; /* value (owned) -> struct keyset* */
};

static void keyset_free(void *p)
{
  struct keyset *ks = p;
  for(size_t i = 0; i < ks->n; i++)
    free(ks->keys[i]);
  free(ks->keys);
  free(ks);
}

struct kcr_store {
  pthread_rwlock_t lock;
  struct table objs; /* key (borrowed from obj) -> kcr_obj* */
  struct index *idx;
  size_t nidx;
  size_t bytes;
  bool written;
};

kcr_store *kcr_store_new(void)
{
  kcr_store *s = calloc(1, sizeof(*s));
  if(s)
    pthread_rwlock_init(&s->lock, NULL);
  return s;
}

static void obj_unref_void(void *o) { kcr_obj_unref(o); }

void kcr_store_free(kcr_store *s)
{
  if(!s)
    return;
  tclear(&s->objs, obj_unref_void, false);
  for(size_t i = 0; i < s->nidx; i++) {
    tclear(&s->idx[i].values, keyset_free, true);
    free(s->idx[i].name);
  }
  free(s->idx);
  pthread_rwlock_destroy(&s->lock);
  free(s);
}

static void index_controller(const kcr_obj *o, kcr_index_emit emit, void *ctx)
{
  if(o->owner.uid && *o->owner.uid)
    emit(o->owner.uid, ctx);
}

kcr_err kcr_store_add_index(kcr_store *s, const char *name, kcr_index_fn fn)
{
  struct index *n;
  if(s->written)
    return KCR_EINVAL;
  for(size_t i = 0; i < s->nidx; i++)
    if(!strcmp(s->idx[i].name, name))
      return KCR_EEXIST;
  n = realloc(s->idx, (s->nidx + 1) * sizeof(*n));
  if(!n)
    return KCR_ENOMEM;
  s->idx = n;
  memset(&n[s->nidx], 0, sizeof(*n));
  if(!(n[s->nidx].name = strdup(name)))
    return KCR_ENOMEM;
  n[s->nidx].fn =
      fn ? fn : (!strcmp(name, KCR_INDEX_CONTROLLER) ? index_controller : NULL);
  if(!n[s->nidx].fn) {
    free(n[s->nidx].name);
    return KCR_EINVAL;
  }
  s->nidx++;
  return KCR_OK;
}

struct emit_ctx {
  struct index *ix;
  const char *key;
  bool add;
  kcr_err rc;
};

static void emit_value(const char *value, void *p)
{
  struct emit_ctx *c = p;
  uint64_t h = hash_str(value);
  struct entry *e = tfind(&c->ix->values, value, h);
  struct keyset *ks;

  if(c->add) {
    if(!e) {
      char *v = strdup(value);
      ks = calloc(1, sizeof(*ks));
      if(!v || !ks || !(e = tinsert(&c->ix->values, v, h, ks))) {
        free(v);
        free(ks);
        c->rc = KCR_ENOMEM;
        return;
      }
    }
    ks = e->val;
    for(size_t i = 0; i < ks->n; i++)
      if(!strcmp(ks->keys[i], c->key))
        return;
    if(ks->n == ks->cap) {
      size_t ncap = ks->cap ? ks->cap * 2 : 2;
      char **nk = realloc(ks->keys, ncap * sizeof(*nk));
      if(!nk) {
        c->rc = KCR_ENOMEM;
        return;
      }
      ks->keys = nk;
      ks->cap = ncap;
    }
    if(!(ks->keys[ks->n] = strdup(c->key))) {
      c->rc = KCR_ENOMEM;
      return;
    }
    ks->n++;
    return;
  }
  if(!e)
    return;
  ks = e->val;
  for(size_t i = 0; i < ks->n; i++) {
    if(!strcmp(ks->keys[i], c->key)) {
      free(ks->keys[i]);
      ks->keys[i] = ks->keys[--ks->n];
      break;
    }
  }
  if(!ks->n) {
    const char *okey = NULL;
    tremove(&c->ix->values, value, h, &okey);
    free((char *)okey);
    keyset_free(ks);
  }
}

static kcr_err index_update(kcr_store *s, const kcr_obj *o, bool add)
{
  kcr_err rc = KCR_OK;
  for(size_t i = 0; i < s->nidx; i++) {
    struct emit_ctx c = {&s->idx[i], o->key, add, KCR_OK};
    s->idx[i].fn(o, emit_value, &c);
    if(c.rc)
      rc = c.rc;
  }
  return rc;
}

kcr_obj *kcr_store_get_key(kcr_store *s, const char *key)
{
  struct entry *e;
  kcr_obj *o = NULL;
  pthread_rwlock_rdlock(&s->lock);
  e = tfind(&s->objs, key, hash_str(key));
  if(e)
    o = kcr_obj_ref(e->val);
  pthread_rwlock_unlock(&s->lock);
  return o;
}

kcr_obj *kcr_store_get(kcr_store *s, const char *ns, const char *name)
{
  char buf[512], *key = buf;
  kcr_obj *o;
  size_t a = ns ? strlen(ns) : 0, b = strlen(name);

  if(a + b + 2 > sizeof(buf) && !(key = malloc(a + b + 2)))
    return NULL;
  if(a) {
    memcpy(key, ns, a);
    key[a] = '/';
    memcpy(key + a + 1, name, b + 1);
  } else {
    memcpy(key, name, b + 1);
  }
  o = kcr_store_get_key(s, key);
  if(key != buf)
    free(key);
  return o;
}

static kcr_err grow_refs(kcr_obj ***arr, size_t *cap, size_t need)
{
  kcr_obj **n;
  if(need <= *cap)
    return KCR_OK;
  n = realloc(*arr, (need > *cap * 2 ? need : *cap * 2) * sizeof(*n));
  if(!n)
    return KCR_ENOMEM;
  *cap = need > *cap * 2 ? need : *cap * 2;
  *arr = n;
  return KCR_OK;
}

kcr_err kcr_store_list(kcr_store *s, const char *index, const char *value,
                       kcr_obj ***objs, size_t *n)
{
  kcr_obj **arr = NULL;
  size_t cnt = 0, cap = 0;
  kcr_err rc = KCR_OK;

  *objs = NULL;
  *n = 0;
  pthread_rwlock_rdlock(&s->lock);
  if(index) {
    struct index *ix = NULL;
    for(size_t i = 0; i < s->nidx; i++)
      if(!strcmp(s->idx[i].name, index))
        ix = &s->idx[i];
    struct entry *e = ix && value ? tfind(&ix->values, value, hash_str(value)) : NULL;
    struct keyset *ks = e ? e->val : NULL;
    if(!ix) {
      rc = KCR_EINVAL;
    } else if(ks && !(rc = grow_refs(&arr, &cap, ks->n))) {
      for(size_t i = 0; i < ks->n; i++) {
        struct entry *oe = tfind(&s->objs, ks->keys[i], hash_str(ks->keys[i]));
        if(oe)
          arr[cnt++] = kcr_obj_ref(oe->val);
      }
    }
  } else if(!(rc = grow_refs(&arr, &cap, s->objs.n ? s->objs.n : 1))) {
    for(size_t i = 0; i < s->objs.nb; i++)
      for(struct entry *e = s->objs.b[i]; e; e = e->next)
        arr[cnt++] = kcr_obj_ref(e->val);
  }
  pthread_rwlock_unlock(&s->lock);
  if(rc) {
    kcr_objs_free(arr, cnt);
    return rc;
  }
  *objs = arr;
  *n = cnt;
  return KCR_OK;
}

void kcr_objs_free(kcr_obj **objs, size_t n)
{
  for(size_t i = 0; i < n; i++)
    kcr_obj_unref(objs[i]);
  free(objs);
}

size_t kcr_store_len(kcr_store *s)
{
  size_t n;
  pthread_rwlock_rdlock(&s->lock);
  n = s->objs.n;
  pthread_rwlock_unlock(&s->lock);
  return n;
}

size_t kcr_store_bytes(kcr_store *s)
{
  size_t n;
  pthread_rwlock_rdlock(&s->lock);
  n = s->bytes;
  pthread_rwlock_unlock(&s->lock);
  return n;
}

kcr_err kcr_store_put(kcr_store *s, kcr_obj *o, kcr_obj **old)
{
  uint64_t h = hash_str(o->key);
  struct entry *e;
  kcr_err rc = KCR_OK;

  *old = NULL;
  pthread_rwlock_wrlock(&s->lock);
  s->written = true;
  e = tfind(&s->objs, o->key, h);
  if(e) {
    kcr_obj *prev = e->val;
    index_update(s, prev, false);
    s->bytes -= prev->size;
    e->val = o;
    e->key = o->key;
    *old = prev;
  } else if(!tinsert(&s->objs, o->key, h, o)) {
    rc = KCR_ENOMEM;
  }
  if(!rc) {
    s->bytes += o->size;
    rc = index_update(s, o, true);
  }
  pthread_rwlock_unlock(&s->lock);
  return rc;
}

void kcr_store_delete(kcr_store *s, const char *ns, const char *name, kcr_obj **old)
{
  kcr_obj *probe = kcr_store_get(s, ns, name), *prev = NULL;

  *old = NULL;
  if(!probe)
    return;
  pthread_rwlock_wrlock(&s->lock);
  prev = tremove(&s->objs, probe->key, hash_str(probe->key), NULL);
  if(prev) {
    index_update(s, prev, false);
    s->bytes -= prev->size;
  }
  pthread_rwlock_unlock(&s->lock);
  kcr_obj_unref(probe);
  *old = prev;
}

kcr_err kcr_store_replace(kcr_store *s, kcr_obj **objs, size_t n, kcr_obj ***gone,
                          size_t *ngone)
{
  struct table fresh = {0}, stale;
  kcr_obj **dead = NULL;
  size_t ndead = 0, cap = 0, bytes = 0;
  kcr_err rc = KCR_OK;

  *gone = NULL;
  *ngone = 0;
  for(size_t i = 0; i < n && !rc; i++) {
    uint64_t h = hash_str(objs[i]->key);
    struct entry *e = tfind(&fresh, objs[i]->key, h);
    if(e) { /* a duplicate in the input: the later one wins */
      bytes -= ((kcr_obj *)e->val)->size;
      kcr_obj_unref(e->val);
      e->val = objs[i];
      e->key = objs[i]->key;
    } else if(!tinsert(&fresh, objs[i]->key, h, objs[i])) {
      rc = KCR_ENOMEM;
      break;
    }
    bytes += objs[i]->size;
  }
  if(rc) {
    tclear(&fresh, NULL, false);
    return rc;
  }
  pthread_rwlock_wrlock(&s->lock);
  s->written = true;
  stale = s->objs;
  s->objs = fresh;
  s->bytes = bytes;
  for(size_t i = 0; i < s->nidx; i++)
    tclear(&s->idx[i].values, keyset_free, true);
  for(size_t i = 0; i < s->objs.nb; i++)
    for(struct entry *e = s->objs.b[i]; e; e = e->next)
      index_update(s, e->val, true);
  pthread_rwlock_unlock(&s->lock);
  /* Outside the lock: objects that vanished, then drop the old table. */
  for(size_t i = 0; i < stale.nb; i++) {
    for(struct entry *e = stale.b[i]; e; e = e->next) {
      kcr_obj *o = e->val;
      if(tfind(&fresh, o->key, e->hash)) {
        kcr_obj_unref(o);
      } else if(!grow_refs(&dead, &cap, ndead + 1)) {
        dead[ndead++] = o; /* the table's reference moves to *gone */
      } else {
        kcr_obj_unref(o);
        rc = KCR_ENOMEM;
      }
    }
  }
  tclear(&stale, NULL, false);
  *gone = dead;
  *ngone = ndead;
  return rc;
}
