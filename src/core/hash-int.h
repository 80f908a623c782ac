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

#endif
