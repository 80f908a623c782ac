/* DESIGN: a growable byte buffer. Invariant: ptr == NULL && len == 0 && cap
 * == 0, or ptr[len] == '\0' and len < cap. Growth doubles, so appends are
 * amortised O(1). Every append is all or nothing: a failed one leaves the
 * contents as they were (the torture tests hold each to it). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kcr/buf.h"

kcr_err kcr_buf_reserve(struct kcr_buf *b, size_t extra)
{
  size_t need = b->len + extra + 1, ncap;
  char *p;

  if(need < b->len) /* overflow */
    return KCR_ENOMEM;
  if(need <= b->cap)
    return KCR_OK;
  ncap = b->cap ? b->cap : 64;
  while(ncap < need)
    ncap = ncap * 2 > ncap ? ncap * 2 : need;
  p = realloc(b->ptr, ncap);
  if(!p)
    return KCR_ENOMEM;
  b->ptr = p;
  b->cap = ncap;
  return KCR_OK;
}

kcr_err kcr_buf_append(struct kcr_buf *b, const void *data, size_t len)
{
  if(kcr_buf_reserve(b, len))
    return KCR_ENOMEM;
  if(len)
    memcpy(b->ptr + b->len, data, len);
  b->len += len;
  b->ptr[b->len] = '\0';
  return KCR_OK;
}

kcr_err kcr_buf_puts(struct kcr_buf *b, const char *s)
{
  return kcr_buf_append(b, s, strlen(s));
}

kcr_err kcr_buf_printf(struct kcr_buf *b, const char *fmt, ...)
{
  va_list ap;
  int n;

  va_start(ap, fmt);
  n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if(n < 0)
    return KCR_EINVAL;
  if(kcr_buf_reserve(b, (size_t)n))
    return KCR_ENOMEM;
  va_start(ap, fmt);
  vsnprintf(b->ptr + b->len, (size_t)n + 1, fmt, ap);
  va_end(ap);
  b->len += (size_t)n;
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

void kcr_buf_consume(struct kcr_buf *b, size_t n)
{
  if(n >= b->len) {
    kcr_buf_reset(b);
    return;
  }
  memmove(b->ptr, b->ptr + n, b->len - n);
  b->len -= n;
  b->ptr[b->len] = '\0';
}

void kcr_buf_reset(struct kcr_buf *b)
{
  b->len = 0;
  if(b->ptr)
    b->ptr[0] = '\0';
}

char *kcr_buf_take(struct kcr_buf *b)
{
  char *p = b->ptr;
  if(!p)
    p = strdup("");
  b->ptr = NULL;
  b->len = b->cap = 0;
  return p;
}

const char *kcr_buf_str(const struct kcr_buf *b) { return b->ptr ? b->ptr : ""; }

void kcr_buf_cleanup(struct kcr_buf *b)
{
  free(b->ptr);
  b->ptr = NULL;
  b->len = b->cap = 0;
}
