/* DESIGN: structured log records, one line each, written with one write(2)
 * so lines from different threads never interleave. The global settings are
 * atomics: no lock is taken on the logging path. Secret-looking keys are
 * redacted here, at the single exit, so no caller can leak a token by
 * mistake. A record is written whole or not at all: if building it runs out
 * of memory, a fixed "log record dropped: out of memory" record (made
 * without allocating) is written instead of one with pieces missing. */
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

/* A record being built; its buffer keeps the first error, so the builders
 * need no checks. */
struct rec {
  struct kcr_buf b;
};

static void put(struct rec *r, const char *p, size_t n)
{
  if(n)
    kcr_buf_append(&r->b, p, n);
}

static void puts_(struct rec *r, const char *s) { put(r, s, strlen(s)); }

/* Appends s as a JSON string body (without quotes), plain runs at once. */
static void put_json_escaped(struct rec *r, const char *s)
{
  const char *run = s;
  char esc[8];

  for(; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if(c == '"' || c == '\\')
      snprintf(esc, sizeof(esc), "\\%c", c);
    else if(c == '\n')
      snprintf(esc, sizeof(esc), "\\n");
    else if(c < 0x20)
      snprintf(esc, sizeof(esc), "\\u%04x", c);
    else
      continue;
    put(r, run, (size_t)(s - run));
    puts_(r, esc);
    run = s + 1;
  }
  put(r, run, (size_t)(s - run));
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

static void put_value(struct rec *r, bool json, const struct kcr_kv *kv)
{
  const char *s = kv->s ? kv->s : "";
  char num[40];

  if(kcr_log_is_secret_key(kv->key) && kv->type == KCR_KV_STR)
    s = "[redacted]";
  switch(kv->type) {
  case KCR_KV_INT: snprintf(num, sizeof(num), "%lld", kv->i); break;
  case KCR_KV_BOOL: snprintf(num, sizeof(num), "%s", kv->i ? "true" : "false"); break;
  case KCR_KV_DBL: snprintf(num, sizeof(num), "%.6g", kv->d); break;
  default: num[0] = '\0'; break;
  }
  if(num[0]) {
    puts_(r, num);
  } else if(json || needs_quotes(s)) {
    puts_(r, "\"");
    put_json_escaped(r, s);
    puts_(r, "\"");
  } else {
    puts_(r, s);
  }
}

static void write_all(const char *p, size_t len)
{
  ssize_t off = 0, w;
  while(off < (ssize_t)len &&
        (w = write(atomic_load(&g_fd), p + off, len - (size_t)off)) > 0)
    off += w;
}

void kcr_log_kv(enum kcr_log_level lvl, const char *msg, const struct kcr_kv *kv,
                size_t n)
{
  struct rec r = {KCR_BUF_INIT};
  struct timespec ts;
  char when[KCR_RFC3339_MICRO_LEN], head[128];
  bool json = atomic_load(&g_format) == KCR_LOG_JSON;
  const char *lv = level_names[lvl < KCR_LOG_OFF ? lvl : KCR_LOG_ERROR];

  clock_gettime(CLOCK_REALTIME, &ts);
  kcr_time_format_micro(&ts, when);
  if(json) {
    snprintf(head, sizeof(head), "{\"ts\":\"%s\",\"level\":\"%s\",\"msg\":\"", when, lv);
    puts_(&r, head);
    put_json_escaped(&r, msg ? msg : "");
    puts_(&r, "\"");
  } else {
    snprintf(head, sizeof(head), "ts=%s level=%s msg=", when, lv);
    puts_(&r, head);
    put_value(&r, false, &KCR_S("msg", msg ? msg : ""));
  }
  for(size_t i = 0; i < n; i++) {
    if(!kv[i].key)
      continue;
    if(json) {
      puts_(&r, ",\"");
      put_json_escaped(&r, kv[i].key);
      puts_(&r, "\":");
    } else {
      puts_(&r, " ");
      puts_(&r, kv[i].key);
      puts_(&r, "=");
    }
    put_value(&r, json, &kv[i]);
  }
  puts_(&r, json ? "}\n" : "\n");
  if(!kcr_buf_err(&r.b)) {
    write_all(r.b.ptr, r.b.len);
  } else {
    /* Never a record with pieces missing: a fixed notice, built without
     * allocating, says one was lost. */
    int len = snprintf(head, sizeof(head),
                       json ? "{\"ts\":\"%s\",\"level\":\"%s\",\"msg\":\"%s\"}\n"
                            : "ts=%s level=%s msg=\"%s\"\n",
                       when, lv, "log record dropped: out of memory");
    if(len > 0)
      write_all(head, (size_t)len < sizeof(head) ? (size_t)len : sizeof(head) - 1);
  }
  kcr_buf_cleanup(&r.b);
}
