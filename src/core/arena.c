/* DESIGN: a list of blocks, newest first; allocation bumps an offset in the
 * newest block and starts a new block (at least the request's size) when it
 * is full. reset keeps one block so a steady reconcile loop stops calling
 * malloc after its first run. */
#include <stdarg.h>
#include <stdalign.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kcr/arena.h"

struct kcr_arena_block {
  struct kcr_arena_block *next;
  size_t size, used;
  alignas(max_align_t) unsigned char mem[];
};

void *kcr_arena_alloc(struct kcr_arena *a, size_t n)
{
  const size_t al = alignof(max_align_t);
  struct kcr_arena_block *b = a->head;
  size_t need = (n + al - 1) & ~(al - 1);

  if(!need)
    need = al;
  if(!b || b->size - b->used < need) {
    size_t size = a->block_size ? a->block_size : 16384;
    if(size < need)
      size = need;
    b = malloc(sizeof(*b) + size);
    if(!b)
      return NULL;
    b->size = size;
    b->used = 0;
    b->next = a->head;
    a->head = b;
  }
  b->used += need;
  return b->mem + b->used - need;
}

char *kcr_arena_strdup(struct kcr_arena *a, const char *s)
{
  size_t n = strlen(s) + 1;
  char *p = kcr_arena_alloc(a, n);
  if(p)
    memcpy(p, s, n);
  return p;
}

char *kcr_arena_printf(struct kcr_arena *a, const char *fmt, ...)
{
  va_list ap;
  char *p;
  int n;

  va_start(ap, fmt);
  n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if(n < 0 || !(p = kcr_arena_alloc(a, (size_t)n + 1)))
    return NULL;
  va_start(ap, fmt);
  vsnprintf(p, (size_t)n + 1, fmt, ap);
  va_end(ap);
  return p;
}

void kcr_arena_reset(struct kcr_arena *a)
{
  struct kcr_arena_block *b = a->head;
  if(!b)
    return;
  /* Keep the oldest block (the list's tail) - usually the only one. */
  while(b->next) {
    struct kcr_arena_block *next = b->next;
    free(b);
    b = next;
  }
  b->used = 0;
  a->head = b;
}

void kcr_arena_cleanup(struct kcr_arena *a)
{
  struct kcr_arena_block *b = a->head;
  while(b) {
    struct kcr_arena_block *next = b->next;
    free(b);
    b = next;
  }
  a->head = NULL;
}
