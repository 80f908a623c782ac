/* Allocation-failure injection for torture tests (as curl's and SQLite's).
 *
 * Unit test executables are linked with -Wl,--wrap= for malloc, calloc,
 * realloc, free, strdup, strndup, asprintf and vasprintf, so every
 * allocation libkcr makes goes through the wrappers here; tfail_init()
 * makes cJSON and libcurl allocate through them too. Without tfail_arm()
 * they only count.
 *
 *   static bool list_pages(void *ud) { ... return rc != KCR_OK || n == 1000; }
 *   tfail_torture("kcr_list_each", list_pages, &state);
 *
 * tfail_torture runs fn once to count the allocations it makes (K), then K
 * more times with allocation n failing (n = 1..K). Every run must return
 * true (the outcome is acceptable: an error, or the complete result, never
 * a silent partial one), must not crash (ASan watches), and must free
 * everything it allocated (the count of live allocations returns to where
 * it was). Failures are reported with the n that caused them.
 *
 * Thread safety: the counters are atomic, but "the n-th allocation" is only
 * meaningful for code that allocates on one thread at a time. */
#ifndef KCR_TFAIL_H
#define KCR_TFAIL_H

#include <stdbool.h>

/* Routes cJSON's and libcurl's allocations through the wrappers. Call once,
 * first thing in main(), before any client exists. */
void tfail_init(void);
/* From now on, the n-th allocation (1-based) fails, and only it; 0 disarms. */
void tfail_arm(long n);
/* Allocations made since the last tfail_arm / tfail_reset. */
long tfail_count(void);
/* Live allocations (made through the wrappers and not yet freed). */
long tfail_live(void);
/* Whether the armed failure happened. */
bool tfail_fired(void);
void tfail_reset(void);
/* While on (per thread, nestable), this thread's allocations are neither
 * counted nor failed: test doubles (twire) use it for their own memory. */
void tfail_exempt(bool on);

/* Secret hygiene: while a secret is set, every block freed through the
 * wrappers is searched for it first (malloc_usable_size bytes), and a hit is
 * counted: memory that held a token must be wiped before it is freed. NULL
 * stops watching. Not thread-safe against concurrent tfail_secret calls. */
void tfail_secret(const char *secret);
/* Blocks freed while still holding the secret since tfail_secret(). */
long tfail_secret_hits(void);

/* See above. Fails the current cmocka test on the first bad n. Runs at most
 * max_runs failing runs when > 0 (spread evenly over 1..K), all when 0. */
void tfail_torture(const char *name, bool (*fn)(void *ud), void *ud);
void tfail_torture_n(const char *name, bool (*fn)(void *ud), void *ud, long max_runs);

#endif
