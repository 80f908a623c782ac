/* secret-int.h - wiping secrets before their memory is freed (secret.c).
 * Used by the kubeconfig loader, the exec plugin runner and the client's
 * Authorization header. Thread safety: any thread, on memory it owns. */
#ifndef KCR_CORE_SECRET_INT_H
#define KCR_CORE_SECRET_INT_H

#include <stddef.h>

#include "kcr/buf.h"

/* Overwrites n bytes at p (not optimised away, unlike a memset of memory
 * about to be freed): for a secret in memory someone else frees (a cJSON
 * string, a curl or libyaml buffer). p may be NULL when n is 0. */
void kcr__wipe(void *p, size_t n);
/* Overwrites n bytes at p (not optimised away), then frees p. p may be NULL. */
void kcr__wipe_free(void *p, size_t n);
/* Frees a NUL-terminated secret string after wiping it. NULL is a no-op. */
void kcr__wipe_str(char *s);
/* kcr_buf_append for secrets: when the buffer must grow, the bytes move to a
 * new block and the old one is wiped before it is freed (realloc would free
 * it as it is). Free the buffer with kcr__wipe_free(b->ptr, b->cap).
 * Returns KCR_OK or KCR_ENOMEM (contents unchanged), and keeps the error
 * in b as every kcr_buf append does (a failed b: a no-op returning it). */
kcr_err kcr__secret_append(struct kcr_buf *b, const void *p, size_t n);

#endif
