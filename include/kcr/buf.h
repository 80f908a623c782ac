/* kcr/buf.h - a growable byte buffer, always NUL-terminated once non-empty.
 *
 * struct kcr_buf b = KCR_BUF_INIT; ... kcr_buf_cleanup(&b);
 * Ownership: the struct owns ptr; kcr_buf_take() moves it out.
 * Errors: the appending functions return KCR_ENOMEM (kcr_buf_printf also
 * KCR_EINVAL for a format vsnprintf refuses) and then leave the contents
 * exactly as they were: an append happens completely or not at all.
 * Thread safety: a buffer is used by one thread at a time. */
#ifndef KCR_BUF_H
#define KCR_BUF_H

#include <stddef.h>

#include "api.h"
#include "err.h"

#ifdef __cplusplus
extern "C" {
#endif

struct kcr_buf {
  char *ptr;  /* NULL until something is appended; then NUL-terminated */
  size_t len; /* bytes, excluding the terminating NUL */
  size_t cap;
};
#define KCR_BUF_INIT                                                                     \
  {                                                                                      \
    NULL, 0, 0                                                                           \
  }

/* Append data[0..len), the string s, or printf output. Errors: KCR_ENOMEM;
 * kcr_buf_printf also KCR_EINVAL (a format vsnprintf refuses). On error b
 * is unchanged. */
KCR_API kcr_err kcr_buf_append(struct kcr_buf *b, const void *data, size_t len);
KCR_API kcr_err kcr_buf_puts(struct kcr_buf *b, const char *s);
KCR_API kcr_err kcr_buf_printf(struct kcr_buf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Appends s percent-encoded for a URL path segment or query value (RFC 3986
 * unreserved characters pass through). Errors: KCR_ENOMEM (b unchanged). */
KCR_API kcr_err kcr_buf_urlenc(struct kcr_buf *b, const char *s);
/* Makes sure cap >= len + extra + 1. Errors: KCR_ENOMEM (b unchanged). */
KCR_API kcr_err kcr_buf_reserve(struct kcr_buf *b, size_t extra);
/* Removes the first n bytes (n <= len). */
KCR_API void kcr_buf_consume(struct kcr_buf *b, size_t n);
/* Empties the buffer, keeping its memory. */
KCR_API void kcr_buf_reset(struct kcr_buf *b);
/* Returns the string (never NULL: "" for an empty buffer, caller frees) and
 * leaves the buffer empty; NULL only if out of memory. */
KCR_API char *kcr_buf_take(struct kcr_buf *b);
/* The contents as a C string: never NULL ("" when empty). Borrowed. */
KCR_API const char *kcr_buf_str(const struct kcr_buf *b);
KCR_API void kcr_buf_cleanup(struct kcr_buf *b);

#ifdef __cplusplus
}
#endif

#endif
