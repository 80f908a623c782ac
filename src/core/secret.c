/* secret.c - memory that held a secret (a token, a private key) is
 * overwritten before it is freed, so it does not linger in freed heap blocks
 * a later bug or a core dump could show. explicit_bzero is not optimised
 * away the way a memset before free() may be. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/secret-int.h"

void kcr__wipe(void *p, size_t n)
{
  if(n)
    explicit_bzero(p, n);
}

void kcr__wipe_free(void *p, size_t n)
{
  if(!p)
    return;
  kcr__wipe(p, n);
  free(p);
}

void kcr__wipe_str(char *s)
{
  if(s)
    kcr__wipe_free(s, strlen(s));
}

kcr_err kcr__secret_append(struct kcr_buf *b, const void *p, size_t n)
{
  size_t need, cap;
  char *q;

  if(b->err)
    return b->err;
  if(n >= SIZE_MAX - b->len) /* len + n + 1 would overflow */
    return b->err = KCR_ENOMEM;
  need = b->len + n + 1;
  if(need > b->cap) {
    cap = b->cap ? b->cap : 256;
    while(cap < need)
      cap = cap * 2 > cap ? cap * 2 : need;
    q = malloc(cap);
    if(!q)
      return b->err = KCR_ENOMEM;
    if(b->len)
      memcpy(q, b->ptr, b->len);
    kcr__wipe_free(b->ptr, b->cap);
    b->ptr = q;
    b->cap = cap;
  }
  if(n)
    memcpy(b->ptr + b->len, p, n);
  b->len += n;
  b->ptr[b->len] = '\0';
  return KCR_OK;
}
