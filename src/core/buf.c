/* DESIGN: a growable byte buffer that keeps its first error (as SQLite's
 * sqlite3_str), so a sequence of appends is checked once, at its end.
 * Invariants: ptr == NULL && len == 0 && cap == 0, or ptr[len] == '\0' and
 * len < cap; once err is set, no append changes ptr, len or cap until
 * kcr_buf_reset, kcr_buf_take or kcr_buf_cleanup clears it. Growth doubles,
 * so appends are amortised O(1). Every append is all or nothing: a failed
 * one leaves the contents as they were (the torture tests hold each to it). */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/assert-int.h"
#include "kcr/buf.h"

/* The invariant above, after every change of the contents. */
#define BUF_OK(b)                                                                        \
  KCR_ASSERT((b)->ptr ? (b)->len < (b)->cap && !(b)->ptr[(b)->len]                       \
                      : !(b)->len && !(b)->cap)

/* Records rc as the buffer's error (the first one is kept by the callers,
 * which return early once err is set). */
static kcr_err fail(struct kcr_buf *b, kcr_err rc)
{
  b->err = rc;
  return rc;
}

kcr_err kcr_buf_reserve(struct kcr_buf *b, size_t extra)
{
  size_t need, ncap;
  char *p;

  if(b->err)
    return b->err;
  if(extra >= SIZE_MAX - b->len) /* len + extra + 1 would overflow */
    return fail(b, KCR_ENOMEM);
  need = b->len + extra + 1;
  /* Not the NUL: a caller may be writing into the room it reserved. */
  KCR_ASSERT(b->ptr ? b->len < b->cap : !b->len && !b->cap);
  if(need <= b->cap)
    return KCR_OK;
  ncap = b->cap ? b->cap : 64;
  while(ncap < need)
    ncap = ncap * 2 > ncap ? ncap * 2 : need;
  p = realloc(b->ptr, ncap);
  if(!p)
    return fail(b, KCR_ENOMEM);
  b->ptr = p;
  b->cap = ncap;
  return KCR_OK;
}

kcr_err kcr_buf_append(struct kcr_buf *b, const void *data, size_t len)
{
  kcr_err rc = kcr_buf_reserve(b, len);

  if(rc)
    return rc;
  if(len)
    memcpy(b->ptr + b->len, data, len);
  b->len += len;
  b->ptr[b->len] = '\0';
  BUF_OK(b);
  return KCR_OK;
}

kcr_err kcr_buf_puts(struct kcr_buf *b, const char *s)
{
  return kcr_buf_append(b, s, strlen(s));
}

kcr_err kcr_buf_printf(struct kcr_buf *b, const char *fmt, ...)
{
  va_list ap;
  kcr_err rc;
  int n;

  if(b->err)
    return b->err;
  va_start(ap, fmt);
  n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if(n < 0)
    return fail(b, KCR_EINVAL);
  rc = kcr_buf_reserve(b, (size_t)n);
  if(rc)
    return rc;
  va_start(ap, fmt);
  vsnprintf(b->ptr + b->len, (size_t)n + 1, fmt, ap);
  va_end(ap);
  b->len += (size_t)n;
  BUF_OK(b);
  return KCR_OK;
}

kcr_err kcr_buf_urlenc(struct kcr_buf *b, const char *s)
{
  static const char hex[] = "0123456789ABCDEF";
  size_t start = b->len;

  for(; *s; s++) {
    unsigned char c = (unsigned char)*s;
    char enc[3];
    kcr_err rc;
    if((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
       c == '-' || c == '.' || c == '_' || c == '~') {
      rc = kcr_buf_append(b, s, 1);
    } else {
      enc[0] = '%';
      enc[1] = hex[c >> 4];
      enc[2] = hex[c & 15];
      rc = kcr_buf_append(b, enc, 3);
    }
    if(rc) { /* all or nothing: drop what this call appended */
      b->len = start;
      if(b->ptr)
        b->ptr[start] = '\0';
      return rc;
    }
  }
  return kcr_buf_reserve(b, 0);
}

kcr_err kcr_buf_err(const struct kcr_buf *b) { return b->err; }

/* Drops the contents, keeping the memory and the error. */
static void empty(struct kcr_buf *b)
{
  b->len = 0;
  if(b->ptr)
    b->ptr[0] = '\0';
}

void kcr_buf_consume(struct kcr_buf *b, size_t n)
{
  if(n >= b->len) {
    empty(b); /* not kcr_buf_reset: that would forget the error */
    return;
  }
  memmove(b->ptr, b->ptr + n, b->len - n);
  b->len -= n;
  b->ptr[b->len] = '\0';
}

void kcr_buf_reset(struct kcr_buf *b)
{
  empty(b);
  b->err = KCR_OK;
}

char *kcr_buf_take(struct kcr_buf *b)
{
  char *p = b->ptr;

  if(b->err) {
    free(p);
    p = NULL;
  } else if(!p) {
    p = strdup("");
  }
  *b = (struct kcr_buf)KCR_BUF_INIT;
  return p;
}

const char *kcr_buf_str(const struct kcr_buf *b) { return b->ptr ? b->ptr : ""; }

void kcr_buf_cleanup(struct kcr_buf *b)
{
  free(b->ptr);
  *b = (struct kcr_buf)KCR_BUF_INIT;
}
