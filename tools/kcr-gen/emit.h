/* kcr-gen/emit.h - C text of the model. */
#ifndef KCR_GEN_EMIT_H
#define KCR_GEN_EMIT_H

#include "kcr/buf.h"
#include "model.h"

/* Appends to h and c the header and source of kinds[0..n) read from the
 * file whose base name is base (the files' names: base.h, base.c); input
 * is the name the comment gives, sha its SHA-256 (hex). With types
 * (nt > 0, no kinds): libkcr's kcr/<base>.h, those types exported with
 * KCR_API, and no kcr-gen version in the comment (the library's version
 * moves without the types changing). */
void emit(const char *base, const char *input, const char *sha, const struct kind *kinds,
          size_t n, struct schema **types, size_t nt, struct kcr_buf *h,
          struct kcr_buf *c);

#endif
