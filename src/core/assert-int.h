/* core/assert-int.h - debug-build checks of the invariants that the DESIGN
 * comments state. Private to libkcr.
 *
 * KCR_ASSERT(cond) aborts with the condition, file, line and function when
 * cond is false, in builds without NDEBUG (the Debug, ASan and TSan builds
 * the test suite runs); in release builds it compiles to nothing and cond is
 * not evaluated, so cond must have no side effects. It is for broken
 * internal invariants only, never for input or network errors (those return
 * a kcr_err). */
#ifndef KCR_CORE_ASSERT_INT_H
#define KCR_CORE_ASSERT_INT_H

#ifdef NDEBUG
#define KCR_ASSERT(cond) ((void)0)
#else
#define KCR_ASSERT(cond)                                                                 \
  ((cond) ? (void)0 : kcr__assert_fail(#cond, __FILE__, __LINE__, __func__))
#endif

/* Writes "libkcr: assertion failed: COND (FILE:LINE FUNC)" to stderr and
 * aborts. */
_Noreturn void kcr__assert_fail(const char *cond, const char *file, int line,
                                const char *func);

#endif
