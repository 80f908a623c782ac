/* Assertions for threads other than the test's own.
 *
 * cmocka's assert_* longjmp back into the test runner, which only works on
 * the thread running the test: fired from a worker, a reconcile callback or
 * an informer handler they crash instead of reporting. On those threads use
 * TCHECK(cond): it records the first failures (thread-safe) and returns
 * cond, and the test thread reports them with tcheck_report() after joining
 * (it fails the test with every recorded message). */
#ifndef KCR_TCHECK_H
#define KCR_TCHECK_H

#include <stdbool.h>

#define TCHECK(cond) tcheck_((cond) ? true : false, #cond, __FILE__, __LINE__)
/* Records a failure with a printf message (any thread). */
void tcheck_failf(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
#define TCHECK_FAIL(...) tcheck_failf(__FILE__, __LINE__, __VA_ARGS__)

bool tcheck_(bool ok, const char *what, const char *file, int line);
/* On the test's thread: fails the current test if anything was recorded
 * (printing it all), then forgets it. */
void tcheck_report(void);
/* Number of failures recorded so far (any thread). */
int tcheck_failures(void);

#endif
