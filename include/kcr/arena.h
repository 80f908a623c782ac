/* kcr/arena.h - a bump allocator for per-reconcile scratch memory: allocate
 * freely during one reconcile, release everything at once afterwards.
 * Thread safety: an arena is used by one thread at a time. */
#ifndef KCR_ARENA_H
#define KCR_ARENA_H

#include <stddef.h>

#include "api.h"

#ifdef __cplusplus
extern "C" {
#endif

struct kcr_arena_block;
struct kcr_arena {
  struct kcr_arena_block *head;
  size_t block_size; /* default 16 KiB */
};
#define KCR_ARENA_INIT                                                                   \
  {                                                                                      \
    NULL, 0                                                                              \
  }

/* Memory owned by the arena, valid until kcr_arena_reset/kcr_arena_cleanup
 * (never free() it); NULL if out of memory. alloc: n bytes aligned for any
 * type, not zeroed (memset what you do not set: a typed object's has_
 * flags, for one); strdup: a copy of s; printf: formatted text. */
KCR_API void *kcr_arena_alloc(struct kcr_arena *a, size_t n);
KCR_API char *kcr_arena_strdup(struct kcr_arena *a, const char *s);
KCR_API char *kcr_arena_printf(struct kcr_arena *a, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Frees everything but the first block, which is kept for reuse. */
KCR_API void kcr_arena_reset(struct kcr_arena *a);
/* Frees every block; the arena is empty (KCR_ARENA_INIT) again. */
KCR_API void kcr_arena_cleanup(struct kcr_arena *a);

#ifdef __cplusplus
}
#endif

#endif
