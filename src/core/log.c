/* DESIGN: structured log records, one line each, written with one write(2)
 * so lines from different threads never interleave. The global settings are
 * atomics: no lock is taken on the logging path. Secret-looking keys are
 * redacted here, at the single exit, so no caller can leak a token by
 * mistake. */
#include <ctype.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "kcr/buf.h"
#include "kcr/log.h"
#include "kcr/time.h"

static _Atomic int g_level = KCR_LOG_INFO;
static _Atomic int g_format = KCR_LOG_KV;
static _Atomic int g_fd = 2;

static const char *const level_names[] = {"debug", "info", "warn", "error", "off"};

void kcr_log_set_level(enum kcr_log_level lvl) { atomic_store(&g_level, (int)lvl); }
enum kcr_log_level kcr_log_get_level(void)
{
  return (enum kcr_log_level)atomic_load(&g_level);
}
void kcr_log_set_format(enum kcr_log_format f) { atomic_store(&g_format, (int)f); }
void kcr_log_set_fd(int fd) { atomic_store(&g_fd, fd); }

bool kcr_log_enabled(enum kcr_log_level lvl)
{
  return (int)lvl >= atomic_load(&g_level) && lvl < KCR_LOG_OFF;
}

int kcr_log_level_parse(const char *s)
{
  for(int i = 0; i <= KCR_LOG_OFF; i++)
    if(s && !strcasecmp(s, level_names[i]))
      return i;
  if(s && !strcasecmp(s, "warning"))
    return KCR_LOG_WARN;
  return -1;
}

bool kcr_log_is_secret_key(const char *key)
{
  static const char *const words[] = {"token",  "authorization", "password",
                                      "secret", "key-data",      "keydata",
                                      "bearer", "credential"};
  char low[64];
  size_t i;

  if(!key)
    return false;
  for(i = 0; key[i] && i < sizeof(low) - 1; i++)
    low[i] = (char)tolower((unsigned char)key[i]);
  low[i] = '\0';
  for(i = 0; i < sizeof(words) / sizeof(words[0]); i++)
    if(strstr(low, words[i]))
      return true;
  return false;
}

/* Appends s as a JSON string body (without quotes). */
static void put_json_escaped(struct kcr_buf *b, const char *s)
{
  for(; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if(c == '"' || c == '\\')
      kcr_buf_printf(b, "\\%c", c);
    else if(c == '\n')
      kcr_buf_puts(b, "\\n");
    else if(c < 0x20)
      kcr_buf_printf(b, "\\u%04x", c);
    else
      kcr_buf_append(b, s, 1);
  }
}

static bool needs_quotes(const char *s)
{
  if(!*s)
    return true;
  for(; *s; s++)
    if(*s == ' ' || *s == '"' || *s == '=' || (unsigned char)*s < 0x20)
      return true;
  return false;
}

static void put_value(struct kcr_buf *b, bool json, const struct kcr_kv *kv)
{
  const char *s = kv->s ? kv->s : "";

  if(kcr_log_is_secret_key(kv->key) && kv->type == KCR_KV_STR)
    s = "[redacted]";
  switch(kv->type) {
  case KCR_KV_INT: kcr_buf_printf(b, "%lld", kv->i); return;
  case KCR_KV_BOOL: kcr_buf_puts(b, kv->i ? "true" : "false"); return;
  case KCR_KV_DBL: kcr_buf_printf(b, "%.6g", kv->d); return;
  default: break;
  }
  if(json || needs_quotes(s)) {
    kcr_buf_puts(b, "\"");
    put_json_escaped(b, s);
    kcr_buf_puts(b, "\"");
  } else {
    kcr_buf_puts(b, s);
  }
}

void kcr_log_kv(enum kcr_log_level lvl, const char *msg, const struct kcr_kv *kv,
                size_t n)
{
  struct kcr_buf b = KCR_BUF_INIT;
  struct timespec ts;
  char when[KCR_RFC3339_MICRO_LEN];
  bool json = atomic_load(&g_format) == KCR_LOG_JSON;
  const char *lv = level_names[lvl < KCR_LOG_OFF ? lvl : KCR_LOG_ERROR];

  clock_gettime(CLOCK_REALTIME, &ts);
  kcr_time_format_micro(&ts, when);
  if(json) {
    kcr_buf_printf(&b, "{\"ts\":\"%s\",\"level\":\"%s\",\"msg\":\"", when, lv);
    put_json_escaped(&b, msg ? msg : "");
    kcr_buf_puts(&b, "\"");
  } else {
    kcr_buf_printf(&b, "ts=%s level=%s msg=", when, lv);
    put_value(&b, false, &KCR_S("msg", msg ? msg : ""));
  }
  for(size_t i = 0; i < n; i++) {
    if(!kv[i].key)
      continue;
    if(json) {
      kcr_buf_puts(&b, ",\"");
      put_json_escaped(&b, kv[i].key);
      kcr_buf_puts(&b, "\":");
    } else {
      kcr_buf_printf(&b, " %s=", kv[i].key);
    }
    put_value(&b, json, &kv[i]);
  }
  kcr_buf_puts(&b, json ? "}\n" : "\n");
  if(b.ptr) {
    ssize_t off = 0, w;
    while(off < (ssize_t)b.len &&
          (w = write(atomic_load(&g_fd), b.ptr + off, b.len - (size_t)off)) > 0)
      off += w;
  }
  kcr_buf_cleanup(&b);
}
