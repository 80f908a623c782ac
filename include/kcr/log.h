/* kcr/log.h - structured logging: one line per record, JSON or key=value.
 *
 *   KCR_LOG(KCR_LOG_INFO, "watch started", KCR_S("resource", "configmaps"),
 *           KCR_I("timeoutSeconds", 300));
 *
 * Values under keys that name secrets (token, authorization, password,
 * client-key-data, ... see kcr_log_is_secret_key) are written as
 * "[redacted]" whatever the caller passes: secrets never reach the log.
 * A record is written whole or not at all: when out of memory, a fixed record
 * with msg "log record dropped: out of memory" replaces it.
 * Thread safety: any thread; each record is written with a single write. */
#ifndef KCR_LOG_H
#define KCR_LOG_H

#include <stdbool.h>
#include <stddef.h>

#include "api.h"

#ifdef __cplusplus
extern "C" {
#endif

enum kcr_log_level {
  KCR_LOG_DEBUG = 0,
  KCR_LOG_INFO = 1,
  KCR_LOG_WARN = 2,
  KCR_LOG_ERROR = 3,
  KCR_LOG_OFF = 4
};
enum kcr_log_format { KCR_LOG_KV = 0, KCR_LOG_JSON = 1 };

enum kcr_kv_type { KCR_KV_STR = 1, KCR_KV_INT = 2, KCR_KV_BOOL = 3, KCR_KV_DBL = 4 };
struct kcr_kv {
  const char *key;
  int type;
  const char *s;
  long long i;
  double d;
};
/* One key-value pair of a log record: KCR_S string, KCR_I integer, KCR_B
 * boolean, KCR_D double. (C++ has no compound literals: it gets the same
 * value from a braced temporary.) */
#ifdef __cplusplus
#define KCR__KV_LITERAL kcr_kv
#else
#define KCR__KV_LITERAL (struct kcr_kv)
#endif
#define KCR_S(k, v) (KCR__KV_LITERAL{(k), KCR_KV_STR, (v), 0, 0})
#define KCR_I(k, v) (KCR__KV_LITERAL{(k), KCR_KV_INT, NULL, (long long)(v), 0})
#define KCR_B(k, v) (KCR__KV_LITERAL{(k), KCR_KV_BOOL, NULL, (v) ? 1 : 0, 0})
#define KCR_D(k, v) (KCR__KV_LITERAL{(k), KCR_KV_DBL, NULL, 0, (double)(v)})

/* Records at level >= the global level are written. Default INFO, KV, stderr.
 * The settings are process-wide and may be changed from any thread. */
KCR_API void kcr_log_set_level(enum kcr_log_level lvl);
KCR_API enum kcr_log_level kcr_log_get_level(void);
KCR_API void kcr_log_set_format(enum kcr_log_format fmt);
/* Parses "debug", "info", "warn" (or "warning"), "error", "off", in any
 * case, into a kcr_log_level; -1 if unknown or NULL. */
KCR_API int kcr_log_level_parse(const char *s);
/* Redirects records to fd (default 2). */
KCR_API void kcr_log_set_fd(int fd);
KCR_API bool kcr_log_enabled(enum kcr_log_level lvl);
/* True if a value under this key must never be logged. */
KCR_API bool kcr_log_is_secret_key(const char *key);

/* Writes one record: time, level, msg, then the pairs in order (kv[0..n),
 * borrowed for the call). */
KCR_API void kcr_log_kv(enum kcr_log_level lvl, const char *msg, const struct kcr_kv *kv,
                        size_t n);

#define KCR_LOG(lvl, msg, ...)                                                           \
  do {                                                                                   \
    if(kcr_log_enabled(lvl)) {                                                           \
      const struct kcr_kv kcr__kv_[] = {{NULL, 0, NULL, 0, 0}, ##__VA_ARGS__};           \
      kcr_log_kv((lvl), (msg), kcr__kv_ + 1,                                             \
                 sizeof(kcr__kv_) / sizeof(kcr__kv_[0]) - 1);                            \
    }                                                                                    \
  } while(0)

#ifdef __cplusplus
}
#endif

#endif
