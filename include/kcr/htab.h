/* kcr/htab.h - the hash table of libkcr: intrusive, chained, growing.
 *
 * The user embeds a struct kcr_hnode in its own struct and links that;
 * the table owns only its bucket array, so inserting allocates nothing but
 * (now and then) a bigger array, and an object can be in several tables at
 * once through several nodes (Linux's hlist, curl's hash.c).
 *
 *   struct item { struct kcr_hnode hn; char key[]; };
 *   struct kcr_htab t = KCR_HTAB_INIT;
 *
 *   uint64_t h = kcr_hash_str(key);                       (kcr/hash.h)
 *   for(struct kcr_hnode *n = kcr_htab_lookup(&t, h); n; n = kcr_htab_lookup_next(n))
 *     if(!strcmp(KCR_HTAB_ENTRY(n, struct item, hn)->key, key))
 *       return KCR_HTAB_ENTRY(n, struct item, hn);
 *   ...
 *   if(kcr_htab_insert(&t, &it->hn, h)) { free(it); return KCR_ENOMEM; }
 *
 * Keys. The table never sees them: the caller hashes its key and compares
 * keys among the nodes whose hash is equal (the candidates). Hash with
 * kcr_hash / kcr_hash_str (SipHash under the process's random key) when
 * the keys come from users, so they cannot pick keys that share a chain.
 * The table does not look for duplicates; equal keys are the caller's to
 * avoid (or to use, as a multimap).
 *
 * Growth. The bucket count is a power of two and doubles when an insert
 * would put more nodes than buckets in the table (load factor 1); the nodes
 * are relinked using the hashes they store, so no key is hashed again. It
 * never shrinks; kcr_htab_cleanup releases it.
 *
 * Ownership. Nodes belong to the caller. The table never frees, copies or
 * reads a node beyond its two fields; nodes do not point back at the table,
 * so a struct kcr_htab may be moved (assigned) while no iterator runs.
 *
 * Thread safety: none of its own. A table is used by one thread at a time,
 * or under the caller's lock; calls that only read (lookups, iteration) may
 * run concurrently with each other, e.g. under a read lock. */
#ifndef KCR_HTAB_H
#define KCR_HTAB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "api.h"
#include "err.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Embed one in each struct to be linked. The table sets both fields: read
 * hash (the value it was inserted with) but write neither. */
struct kcr_hnode {
  struct kcr_hnode *next; /* the chain */
  uint64_t hash;
};

/* The struct that holds node n as its member `member`. n must not be NULL. */
#define KCR_HTAB_ENTRY(n, type, member)                                                  \
  ((type *)(void *)((char *)(n)-offsetof(type, member)))

/* A zeroed struct (KCR_HTAB_INIT, calloc) is an empty table with no bucket
 * array yet. Read n; change nothing directly. */
struct kcr_htab {
  struct kcr_hnode **b; /* nb chain heads, or NULL */
  size_t nb;            /* 0 or a power of two */
  size_t n;             /* nodes linked */
};
#define KCR_HTAB_INIT                                                                    \
  {                                                                                      \
    NULL, 0, 0                                                                           \
  }

/* Iteration state (see kcr_htab_iter_next); its fields are private. */
struct kcr_htab_iter {
  const struct kcr_htab *t;
  size_t i;
  struct kcr_hnode *next;
};

/* Makes room for n nodes: once it has succeeded, inserts do not allocate
 * (and so cannot fail) while t holds fewer than n nodes. Use it to pre-size
 * a table, or to make a later insert infallible - reserve len + 1 first,
 * then do the rest of the work that can fail, then insert.
 * Errors: KCR_ENOMEM (t is unchanged and usable). */
KCR_API kcr_err kcr_htab_reserve(struct kcr_htab *t, size_t n);

/* Links node, which must not be linked into any table, under hash; sets
 * node->hash. Grows the bucket array first when t already holds as many
 * nodes as it has buckets.
 * Errors: KCR_ENOMEM when that growth fails: node is not linked and t is
 * unchanged and usable. */
KCR_API kcr_err kcr_htab_insert(struct kcr_htab *t, struct kcr_hnode *node,
                                uint64_t hash);

/* Unlinks node from t. O(length of its chain). Returns false, changing
 * nothing, when node is not linked into t. The caller still owns node. */
KCR_API bool kcr_htab_remove(struct kcr_htab *t, struct kcr_hnode *node);

/* The first node linked under hash, or NULL. Compare its key: nodes whose
 * keys differ may share a hash. Borrowed, valid while it is linked. */
KCR_API struct kcr_hnode *kcr_htab_lookup(const struct kcr_htab *t, uint64_t hash);

/* The next node after node (a result of kcr_htab_lookup or of this call)
 * linked under the same hash, or NULL. */
KCR_API struct kcr_hnode *kcr_htab_lookup_next(const struct kcr_hnode *node);

/* Starts an iteration over every node of t, in no particular order. */
KCR_API void kcr_htab_iter_init(struct kcr_htab_iter *it, const struct kcr_htab *t);

/* The next node, or NULL when all have been returned. Between two calls
 * the caller may remove, free or both the node the last call returned, and
 * no other: nothing else may be inserted or removed while it iterates. */
KCR_API struct kcr_hnode *kcr_htab_iter_next(struct kcr_htab_iter *it);

/* Frees the bucket array and leaves t empty (as KCR_HTAB_INIT). The nodes
 * are not touched: free them first if they are yours to free (iterate). */
KCR_API void kcr_htab_cleanup(struct kcr_htab *t);

#ifdef __cplusplus
}
#endif

#endif
