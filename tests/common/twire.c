/* See twire.h. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "tfail.h"
#include "twire.h"

struct wire {
  struct wire *next;
  twire_fn fn;
  void *ud;
  bool watchlist; /* fn answers streaming lists itself (twire_watchlist) */
};

/* Every wire made (reachable, so not reported as a leak). */
static struct wire *wires;
static pthread_mutex_t wires_mu = PTHREAD_MUTEX_INITIALIZER;

static kcr_err trampoline(void *ud, const struct kcr__wire_request *req, long *code,
                          long *retry_after_s, kcr__wire_write write, void *wctx,
                          struct kcr_errinfo *ei)
{
  struct wire *w = ud;
  struct twire_call call = {req, code, retry_after_s, write, wctx, ei, false};
  kcr_err rc;
  char v[8];
  tfail_exempt(true); /* the fake's own memory is not the code under test's */
  if(req->watch && !w->watchlist && twire_query(&call, "sendInitialEvents", v, sizeof(v)))
    /* as an apiserver with the WatchList gate off: the client lists in pages */
    rc = twire_reply(&call, 422, "%s", twire_status_json(422, "Invalid"));
  else
    rc = w->fn(&call, w->ud);
  tfail_exempt(false);
  return rc;
}

static const char kubeconfig[] = "apiVersion: v1\n"
                                 "kind: Config\n"
                                 "clusters:\n"
                                 "- name: c\n"
                                 "  cluster:\n"
                                 "    server: https://twire.invalid\n"
                                 "users:\n"
                                 "- name: u\n"
                                 "  user:\n"
                                 "    token: t0ken\n"
                                 "contexts:\n"
                                 "- name: x\n"
                                 "  context:\n"
                                 "    cluster: c\n"
                                 "    user: u\n"
                                 "    namespace: default\n"
                                 "current-context: x\n";

/* One wire record per (fn, ud), shared by the clients made with them; they
 * live until the process ends (a test makes a handful), so a client
 * outliving its test stays safe, and a torture run that makes a client
 * each time leaves no new live allocation after the first. */
static struct wire *wire_new(twire_fn fn, void *ud)
{
  struct wire *w;

  pthread_mutex_lock(&wires_mu);
  for(w = wires; w && (w->fn != fn || w->ud != ud); w = w->next)
    ;
  if(!w) {
    tfail_exempt(true);
    w = calloc(1, sizeof(*w));
    tfail_exempt(false);
    if(w) {
      w->fn = fn;
      w->ud = ud;
      w->next = wires;
      wires = w;
    }
  }
  pthread_mutex_unlock(&wires_mu);
  assert_non_null(w);
  return w;
}

void twire_watchlist(twire_fn fn, void *ud, bool on)
{
  struct wire *w = wire_new(fn, ud);
  pthread_mutex_lock(&wires_mu);
  w->watchlist = on;
  pthread_mutex_unlock(&wires_mu);
}

void twire_attach(kcr_client *c, twire_fn fn, void *ud)
{
  kcr__client_set_wire(c, trampoline, wire_new(fn, ud));
}

kcr_config *twire_config(void)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  kcr_config *cfg = NULL;
  if(kcr_config_from_yaml(kubeconfig, sizeof(kubeconfig) - 1,
                          &(struct kcr_config_opts){.kubeconfig = "twire"}, &cfg, &ei))
    fail_msg("twire: cannot make a config: %s", ei.message ? ei.message : "?");
  return cfg;
}

kcr_client *twire_client_opts(twire_fn fn, void *ud, const struct kcr_client_opts *o)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  struct kcr_client_opts co = o ? *o : (struct kcr_client_opts){0};
  kcr_client *c = NULL;
  struct wire *w = wire_new(fn, ud);

  co.config = twire_config();
  if(kcr_client_new(&co, &c, &ei))
    fail_msg("twire: cannot make a client: %s", ei.message ? ei.message : "?");
  kcr_config_free(co.config); /* the client holds its own reference */
  kcr__client_set_wire(c, trampoline, w);
  return c;
}

kcr_client *twire_client(twire_fn fn, void *ud)
{
  return twire_client_opts(fn, ud, NULL);
}

bool twire_is(const struct twire_call *call, const char *method, const char *prefix)
{
  size_t n = strlen(prefix);
  const char *p = call->req->path;
  if(strcmp(call->req->method, method) || strncmp(p, prefix, n))
    return false;
  return p[n] == '\0' || p[n] == '?' || p[n] == '/' || prefix[n - 1] == '/';
}

static int hexval(int c)
{
  return c >= '0' && c <= '9'   ? c - '0'
         : c >= 'a' && c <= 'f' ? c - 'a' + 10
         : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                : -1;
}

const char *twire_query(const struct twire_call *call, const char *key, char *buf,
                        size_t n)
{
  const char *q = strchr(call->req->path, '?');
  size_t klen = strlen(key);
  while(q && *q) {
    q++;
    if(!strncmp(q, key, klen) && q[klen] == '=') {
      size_t j = 0;
      for(q += klen + 1; *q && *q != '&' && j + 1 < n; q++) {
        if(*q == '%' && hexval(q[1]) >= 0 && hexval(q[2]) >= 0) {
          buf[j++] = (char)(hexval(q[1]) * 16 + hexval(q[2]));
          q += 2;
        } else {
          buf[j++] = *q == '+' ? ' ' : *q;
        }
      }
      buf[j] = '\0';
      return buf;
    }
    q = strchr(q, '&');
  }
  return NULL;
}

static bool put(struct twire_call *call, const char *p, size_t n)
{
  bool ok;
  if(call->stopped)
    return false;
  tfail_exempt(false); /* what the client does with the bytes counts */
  ok = call->write(p, n, call->wctx);
  tfail_exempt(true);
  if(!ok)
    call->stopped = true;
  return !call->stopped;
}

kcr_err twire_reply(struct twire_call *call, long code, const char *fmt, ...)
{
  va_list ap;
  char *text = NULL;
  int n;
  *call->code = code;
  va_start(ap, fmt);
  n = vasprintf(&text, fmt, ap);
  va_end(ap);
  assert_true(n >= 0);
  if(n)
    put(call, text, (size_t)n);
  free(text);
  return KCR_OK;
}

void twire_retry_after(struct twire_call *call, long seconds)
{
  *call->retry_after = seconds;
}

kcr_err twire_fail(struct twire_call *call, kcr_err rc, const char *why)
{
  kcr_err r;
  tfail_exempt(false);
  r = kcr_errinfo_set(call->ei, rc, "twire: %s", why);
  tfail_exempt(true);
  return r;
}

const char *twire_status_json(long code, const char *reason)
{
  static _Thread_local char buf[256];
  snprintf(buf, sizeof(buf),
           "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":\"Failure\","
           "\"reason\":\"%s\",\"message\":\"twire says %s\",\"code\":%ld}",
           reason, reason, code);
  return buf;
}

void twire_stream(struct twire_call *call, long code) { *call->code = code; }

bool twire_send(struct twire_call *call, const char *fmt, ...)
{
  va_list ap;
  char *text = NULL;
  int n;
  bool ok;
  va_start(ap, fmt);
  n = vasprintf(&text, fmt, ap);
  va_end(ap);
  if(n < 0)
    return false;
  ok = put(call, text, (size_t)n) && put(call, "\n", 1);
  free(text);
  return ok;
}

bool twire_write(struct twire_call *call, const char *bytes, size_t n)
{
  return put(call, bytes, n);
}

bool twire_wait_cancel(struct twire_call *call, long ms)
{
  struct timespec ts = {0, 1000000L};
  for(long i = 0; i < ms; i++) {
    if(call->req->canceled && atomic_load(call->req->canceled))
      return true;
    nanosleep(&ts, NULL);
  }
  return call->req->canceled && atomic_load(call->req->canceled);
}
