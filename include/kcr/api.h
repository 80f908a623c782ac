/* kcr/api.h - how libkcr marks its public API.
 *
 * libkcr is built with -fvisibility=hidden: only declarations marked KCR_API
 * are exported from libkcr.so, so internals (kcr__ names, statics) cannot
 * become part of the ABI by accident. tests/api/check-symbols compares the
 * exported symbol list with the KCR_API declarations in include/kcr/.
 *
 * Every public header wraps its declarations in extern "C" so a C++
 * program can include kcr.h (tests/api/cxx.cpp). */
#ifndef KCR_API_H
#define KCR_API_H

#if defined(__GNUC__) || defined(__clang__)
#define KCR_API __attribute__((visibility("default")))
#else
#define KCR_API
#endif

#endif
