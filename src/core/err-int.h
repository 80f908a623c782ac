/* err-int.h - error helpers private to libkcr (err.c). */
#ifndef KCR_CORE_ERR_INT_H
#define KCR_CORE_ERR_INT_H

#include <stddef.h>

/* The text of errno value err, written into buf when it must be (the GNU and
 * XSI strerror_r differ): returns buf or a static string, never NULL.
 * Thread safety: any thread (unlike strerror). */
const char *kcr__errstr(int err, char *buf, size_t size);

#endif
