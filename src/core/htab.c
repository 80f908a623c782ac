/* DESIGN: the one hash table (kcr/htab.h): intrusive singly linked chains
 * under a power-of-two array of heads, as Linux's hlist and curl's hash.c.
 *
 * Why this shape. Every table in libkcr maps a name to a record the owner
 * already allocates (a queue item, a store entry, an event, a series), so
 * embedding the link in that record costs no allocation per insert and no
 * second pointer chase per lookup. Chaining (not open addressing) keeps a
 * node's address stable, which the owners rely on: they keep pointers to
 * their records in FIFOs, heaps and LRU lists. Each node stores its hash,
 * so growth relinks without hashing a key again and a lookup skips
 * candidates without touching their keys.
 *
 * Invariants: nb == 0 iff b == NULL; nb is a power of two otherwise; every
 * linked node is in chain b[hash & (nb - 1)], exactly once; n counts them;
 * after an insert n <= nb (load factor at most 1). Growth allocates the
 * new array before touching the old one, so a failure changes nothing. */
#include <stdint.h>
#include <stdlib.h>

#include "core/assert-int.h"
#include "core/htab-int.h"
#include "kcr/htab.h"

#define MIN_BUCKETS 8

static struct kcr_hnode **head(const struct kcr_htab *t, uint64_t hash)
{
  KCR_ASSERT(t->b && t->nb && !(t->nb & (t->nb - 1))); /* nb == 0 iff b == NULL */
  return &t->b[hash & (t->nb - 1)];
}

/* Relinks every node into a new array of nb heads (nb > 0, a power of two). */
static kcr_err rehash(struct kcr_htab *t, size_t nb)
{
  struct kcr_hnode **b = calloc(nb, sizeof(*b));

  if(!b)
    return KCR_ENOMEM;
  for(size_t i = 0; i < t->nb; i++)
    for(struct kcr_hnode *x = t->b[i], *next; x; x = next) {
      next = x->next;
      x->next = b[x->hash & (nb - 1)];
      b[x->hash & (nb - 1)] = x;
    }
  free(t->b);
  t->b = b;
  t->nb = nb;
  return KCR_OK;
}

kcr_err kcr_htab_reserve(struct kcr_htab *t, size_t n)
{
  size_t nb = t->nb ? t->nb : MIN_BUCKETS;

  if(n <= t->nb)
    return KCR_OK;
  while(nb < n) {
    if(nb > SIZE_MAX / 2 / sizeof(*t->b))
      return KCR_ENOMEM;
    nb *= 2;
  }
  return rehash(t, nb);
}

kcr_err kcr_htab_insert(struct kcr_htab *t, struct kcr_hnode *node, uint64_t hash)
{
  struct kcr_hnode **h;

  if(t->n >= t->nb) {
    kcr_err rc = kcr_htab_reserve(t, t->nb ? t->nb * 2 : MIN_BUCKETS);
    if(rc)
      return rc;
  }
  h = head(t, hash);
  node->hash = hash;
  node->next = *h;
  *h = node;
  t->n++;
  KCR_ASSERT(t->n <= t->nb); /* load factor at most 1 */
  return KCR_OK;
}

bool kcr_htab_remove(struct kcr_htab *t, struct kcr_hnode *node)
{
  if(!t->nb)
    return false;
  for(struct kcr_hnode **pp = head(t, node->hash); *pp; pp = &(*pp)->next)
    if(*pp == node) {
      KCR_ASSERT(t->n > 0); /* n counts the linked nodes */
      *pp = node->next;
      node->next = NULL;
      t->n--;
      return true;
    }
  return false;
}

struct kcr_hnode *kcr_htab_lookup(const struct kcr_htab *t, uint64_t hash)
{
  struct kcr_hnode *n = t->nb ? *head(t, hash) : NULL;

  while(n && n->hash != hash)
    n = n->next;
  return n;
}

struct kcr_hnode *kcr_htab_lookup_next(const struct kcr_hnode *node)
{
  struct kcr_hnode *n = node->next;

  while(n && n->hash != node->hash)
    n = n->next;
  return n;
}

void kcr_htab_iter_init(struct kcr_htab_iter *it, const struct kcr_htab *t)
{
  it->t = t;
  it->i = 0;
  it->next = NULL;
}

struct kcr_hnode *kcr_htab_iter_next(struct kcr_htab_iter *it)
{
  struct kcr_hnode *n = it->next;

  while(!n && it->i < it->t->nb)
    n = it->t->b[it->i++];
  if(n) /* read now: the caller may unlink or free n before the next call */
    it->next = n->next;
  return n;
}

void kcr_htab_cleanup(struct kcr_htab *t)
{
  free(t->b);
  t->b = NULL;
  t->nb = 0;
  t->n = 0;
}

size_t kcr__htab_longest_chain(const struct kcr_htab *t)
{
  size_t longest = 0;

  for(size_t i = 0; i < t->nb; i++) {
    size_t len = 0;
    for(const struct kcr_hnode *n = t->b[i]; n; n = n->next)
      len++;
    if(len > longest)
      longest = len;
  }
  return longest;
}
