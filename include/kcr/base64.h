/* kcr/base64.h - base64 decoding (RFC 4648 standard alphabet).
 *
 * Used for kubeconfig *-data fields and Secret data. Decoding is tolerant the
 * way those values are written by hand or by tools: padding may be omitted and
 * ASCII whitespace (newlines from line-wrapped PEM bundles, spaces from folded
 * YAML scalars) is skipped anywhere. Anything else outside the alphabet, data
 * after padding, too much padding or a dangling single character is rejected.
 * Thread safety: pure. */
#ifndef KCR_BASE64_H
#define KCR_BASE64_H

#include <stddef.h>

#include "api.h"
#include "err.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Decodes in[0..len) into a new buffer. On KCR_OK *out is owned by the caller
 * (free()), holds *out_len bytes and is followed by a NUL that is not counted
 * (so decoded text can be used as a C string); an empty input gives an empty,
 * non-NULL buffer. On error *out is NULL and *out_len 0: KCR_EPARSE for
 * malformed input, KCR_ENOMEM. */
KCR_API kcr_err kcr_base64_decode(const char *in, size_t len, unsigned char **out,
                                  size_t *out_len);

/* Upper bound of the decoded size of len input characters. Pure. */
KCR_API size_t kcr_base64_decoded_max(size_t len);

#ifdef __cplusplus
}
#endif

#endif
