/* kcr/buf.h - a growable byte buffer, always NUL-terminated once non-empty.
 *
 *   struct kcr_buf b = KCR_BUF_INIT;
 *   kcr_buf_puts(&b, "/api/v1");
 *   kcr_buf_printf(&b, "/namespaces/%s", ns);
 *   kcr_buf_urlenc(&b, name);
 *   rc = kcr_buf_err(&b);            one check for the whole sequence
 *   ...
 *   kcr_buf_cleanup(&b);
 *
 * Ownership: the struct owns ptr; kcr_buf_take() moves it out.
 * Errors: an append (kcr_buf_append, _puts, _printf, _urlenc, _reserve)
 * fails with KCR_ENOMEM when memory runs out or the size would overflow,
 * kcr_buf_printf also with KCR_EINVAL for a format vsnprintf refuses. A
 * failed append leaves the contents exactly as they were (an append happens
 * completely or not at all) and the buffer keeps that first error, as
 * SQLite's sqlite3_str does: every later append is a no-op returning the
 * same error, until kcr_buf_reset(), _take() or _cleanup(). So a sequence of
 * appends needs one kcr_buf_err() check at its end; the contents are then
 * what the appends before the failed one wrote. Each append still returns
 * its kcr_err, for a single call. Functions elsewhere that append to a
 * caller's buffer (kcr_path, kcr_query_add, kcr_metrics_render) keep to the
 * same rule.
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
  char *ptr;   /* NULL until something is appended; then NUL-terminated */
  size_t len;  /* bytes, excluding the terminating NUL */
  size_t cap;  /* bytes allocated at ptr */
  kcr_err err; /* the first failed append's error, KCR_OK while none */
};
/* An empty buffer without an error; zero-initialising is the same. */
#define KCR_BUF_INIT                                                                     \
  {                                                                                      \
    NULL, 0, 0, KCR_OK                                                                   \
  }

/* Appends len bytes at data (data may be NULL when len is 0). Returns KCR_OK,
 * KCR_ENOMEM, or the buffer's earlier error (see Errors above). */
KCR_API kcr_err kcr_buf_append(struct kcr_buf *b, const void *data, size_t len);
/* Appends the C string s. Errors as kcr_buf_append. */
KCR_API kcr_err kcr_buf_puts(struct kcr_buf *b, const char *s);
/* Appends the printf-formatted text. Returns KCR_OK, KCR_ENOMEM, KCR_EINVAL
 * (vsnprintf refused the format or the text exceeds INT_MAX bytes), or the
 * buffer's earlier error. */
KCR_API kcr_err kcr_buf_printf(struct kcr_buf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Appends s percent-encoded for a URL path segment or query value (RFC 3986
 * unreserved characters pass through). Errors as kcr_buf_append. */
KCR_API kcr_err kcr_buf_urlenc(struct kcr_buf *b, const char *s);
/* Makes sure cap >= len + extra + 1, so that appending extra bytes does not
 * allocate. Errors as kcr_buf_append (KCR_ENOMEM when len + extra + 1
 * overflows). */
KCR_API kcr_err kcr_buf_reserve(struct kcr_buf *b, size_t extra);
/* The error of the first append that failed since the buffer was
 * initialised, reset, taken or cleaned up; KCR_OK if none did. */
KCR_API kcr_err kcr_buf_err(const struct kcr_buf *b);
/* Removes the first n bytes (n >= len empties the buffer). Keeps the
 * memory, and the error: a failed buffer stays failed. */
KCR_API void kcr_buf_consume(struct kcr_buf *b, size_t n);
/* Empties the buffer, keeping its memory, and clears its error. */
KCR_API void kcr_buf_reset(struct kcr_buf *b);
/* Moves the contents out as a C string the caller frees, and leaves the
 * buffer as KCR_BUF_INIT makes it. An empty buffer gives "" (allocated).
 * Returns NULL, still leaving the buffer empty and without an error, if
 * the buffer had failed (kcr_buf_err: its partial contents are freed) or
 * when out of memory making "". */
KCR_API char *kcr_buf_take(struct kcr_buf *b);
/* The contents as a C string: never NULL ("" when empty). Borrowed, valid
 * until the next call that changes the buffer. After a failure it is what
 * the appends before it wrote: check kcr_buf_err() before relying on it. */
KCR_API const char *kcr_buf_str(const struct kcr_buf *b);
/* Frees the memory and leaves the buffer as KCR_BUF_INIT makes it (no
 * error). */
KCR_API void kcr_buf_cleanup(struct kcr_buf *b);

#ifdef __cplusplus
}
#endif

#endif
