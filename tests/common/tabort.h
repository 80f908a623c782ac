/* Debug-build assertions (KCR_ASSERT, core/assert-int.h) fire when an
 * invariant a DESIGN comment states is broken. A test proves one does by
 * breaking it in a child process:
 *
 *   static void broken_len(void *ud) { ...; b.len = b.cap; kcr_buf_puts(&b, "y"); }
 *   ...
 *   TABORT_SKIP_IN_RELEASE(); // release builds compile the checks out
 *   assert_true(tabort(broken_len, NULL));
 */
#ifndef KCR_TABORT_H
#define KCR_TABORT_H

#include <stdbool.h>

/* Skips the current cmocka test in a build with NDEBUG. */
#ifdef NDEBUG
#define TABORT_SKIP_IN_RELEASE() skip()
#else
#define TABORT_SKIP_IN_RELEASE() ((void)0)
#endif

/* Runs fn(ud) in a forked child with stderr closed (the assertion's message
 * is expected); true if the child was killed by SIGABRT, false if it
 * returned from fn (then it exits 0) or ended otherwise. Call it from the
 * test's thread, while no other thread of the test holds a lock fn needs. */
bool tabort(void (*fn)(void *ud), void *ud);

#endif
