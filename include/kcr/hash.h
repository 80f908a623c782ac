/* kcr/hash.h - keyed hashing for hash tables whose keys come from users.
 *
 * Object names, label values and event notes are chosen by whoever can
 * create objects in the cluster. An unkeyed hash (FNV-1a) lets them pick
 * names that all land in one bucket and turn every lookup into a list walk
 * (hash flooding). Every table in libkcr therefore hashes with SipHash-2-4
 * under a 128-bit key drawn from getrandom() once per process, as Python,
 * Rust and Perl do: without the key, collisions cannot be computed offline.
 *
 * Thread safety: any thread; the key is set up once (pthread_once). */
#ifndef KCR_HASH_H
#define KCR_HASH_H

#include <stddef.h>
#include <stdint.h>

#include "api.h"

#ifdef __cplusplus
extern "C" {
#endif

/* SipHash-2-4 of p[0..n) under the process's random key. */
KCR_API uint64_t kcr_hash(const void *p, size_t n);
/* kcr_hash of a NUL-terminated string (without the NUL); NULL hashes as "". */
KCR_API uint64_t kcr_hash_str(const char *s);
/* SipHash-2-4 under an explicit 16-byte key (for tests and fixed vectors). */
KCR_API uint64_t kcr_siphash24(const unsigned char key[16], const void *p, size_t n);

#ifdef __cplusplus
}
#endif

#endif
