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
 * it was). Failures are reported with the n that caused them and the call
 * stack of the allocation that failed (file:line in sanitizer builds; a
 * sanitizer that aborts the process prints it too).
 *
 * Writing a verdict (tests/unit/test_torture_*.c are the examples):
 *  - Work done by the test itself inside fn - parsing the expected tree,
 *    printing a snapshot, a test double's memory - goes between
 *    tfail_exempt(true) and tfail_exempt(false): neither counted nor
 *    failed, so it never fails the test for the wrong reason. twire's
 *    handlers run exempt already; what the client does with their bytes
 *    counts.
 *  - Exempt memory still counts as live: free it before fn returns.
 *  - Check the outputs the contract promises on error (NULL, 0, unchanged),
 *    and on success the whole result, not just the return code.
 *
 * What is not seen: libyaml, glibc and the kernel allocate outside the
 * wrappers (they are not linked with them), so failures are injected only
 * into libkcr's, cJSON's and libcurl's allocations.
 *
 * Baselines: memory that lives for the rest of the process from its first
 * use is not a leak. libcurl's global state is made by tfail_init();
 * libkcr's hash key (pthread_once) allocates nothing. Objects that keep
 * memory across calls by design (a config's credential cache) need a
 * warm-up run: tfail_torture_warm().
 *
 * Threads: the counters are atomic, but "the n-th allocation" is only
 * meaningful for code that allocates on one thread at a time. For objects
 * that run threads (informer, controller, recorder, elector) torture their
 * single-threaded set-up with every n, and their life with a sample of n
 * (max_runs) and a verdict that holds whichever allocation failed.
 *
 * Environment, for investigating: TFAIL_KEEP_GOING (report every bad n,
 * not just the first), TFAIL_ALL_RUNS (ignore max_runs), TFAIL_FROM=n
 * (start at n, e.g. past a crash). */
#ifndef KCR_TFAIL_H
#define KCR_TFAIL_H

#include <cjson/cJSON.h>
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
/* Prints (cmocka's print_message) the call stack of the allocation the last
 * armed run failed, symbolized with file:line in sanitizer builds.
 * tfail_torture does it by itself for a run that goes wrong. */
void tfail_print_stack(void);
/* While on (per thread, nestable), this thread's allocations are neither
 * counted nor failed: test doubles (twire) use it for their own memory. */
void tfail_exempt(bool on);

/* Thread creation failures: the n-th pthread_create made by libkcr from now
 * on (1-based) fails with EAGAIN, and only it; 0 disarms. Threads made
 * inside shared libraries (libmicrohttpd's) are not counted. */
void tfail_threads_arm(long n);
/* pthread_create calls counted since the last tfail_threads_arm. */
long tfail_threads_count(void);

/* Checks, not code under test: cJSON calls exempt from counting and failing
 * (see tfail_exempt). tfail_parse fails the test on malformed text;
 * tfail_print(NULL) is NULL; the caller frees what tfail_print returns. */
cJSON *tfail_parse(const char *text);
char *tfail_print(const cJSON *t);
bool tfail_equal(const cJSON *a, const cJSON *b);

/* Secret hygiene: while a secret is set, every block freed through the
 * wrappers is searched for it first (malloc_usable_size bytes), and a hit is
 * counted: memory that held a token must be wiped before it is freed. NULL
 * stops watching. Not thread-safe against concurrent tfail_secret calls. */
void tfail_secret(const char *secret);
/* Blocks freed while still holding the secret since tfail_secret(). */
long tfail_secret_hits(void);

/* See above. Fails the current cmocka test on the first bad n. Runs at most
 * max_runs failing runs when > 0 (spread evenly over 1..K), all when 0.
 * Sampling suits code that runs on threads (and so has no stable n) or is
 * slow per run; torture the single-threaded set-up of such objects on its
 * own with every n. */
void tfail_torture(const char *name, bool (*fn)(void *ud), void *ud);
void tfail_torture_n(const char *name, bool (*fn)(void *ud), void *ud, long max_runs);
/* The same, but reports the first bad n (message and the failed
 * allocation's stack) and returns false instead of failing the test, so the
 * test can free its fixtures first and then assert_true() the result: the
 * leak checker at exit then shows only what the code under test leaked. */
bool tfail_torture_try(const char *name, bool (*fn)(void *ud), void *ud, long max_runs);
/* tfail_torture_try after one unarmed warm-up run of fn, for code that
 * keeps memory across calls by design - a cache filled on first use (the
 * exec plugin's answer in a kcr_config), a lazily made pool - which would
 * otherwise count as a leak of the first run. Memory that lives in the
 * process from its first use on (libcurl's global state: tfail_init makes
 * it; libkcr's hash key: no allocation) needs nothing. */
bool tfail_torture_warm(const char *name, bool (*fn)(void *ud), void *ud, long max_runs);
/* All of them stop at the first bad n, unless TFAIL_KEEP_GOING is set (see
 * the top of this file). */

#endif
