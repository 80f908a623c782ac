/* core/hash-int.h - keyed hashing of several strings at once, for libkcr's
 * own tables (the metrics registry's label values); not installed. */
#ifndef KCR_CORE_HASH_INT_H
#define KCR_CORE_HASH_INT_H

#include <stddef.h>
#include <stdint.h>

/* kcr_hash of sv[0], NUL, sv[1], NUL, ... sv[n - 1], NUL (each string with
 * its terminator) without building that buffer. sv[i] must not be NULL.
 * Thread safety: any thread. */
uint64_t kcr__hash_strv(const char *const *sv, size_t n);

/* kcr_hash of bytes given in pieces: begin, add any number of times, end;
 * the result is kcr_hash of all the pieces one after the other. A state
 * belongs to one thread at a time. */
struct kcr__hasher {
  uint64_t v[4], w; /* the SipHash state, the word being filled */
  size_t len;       /* bytes added */
};
void kcr__hash_begin(struct kcr__hasher *h);
void kcr__hash_add(struct kcr__hasher *h, const void *p, size_t n);
uint64_t kcr__hash_end(struct kcr__hasher *h);

#endif
