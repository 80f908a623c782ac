/* See tfail.h. */
#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <execinfo.h>
#include <malloc.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tfail.h"

void *__real_malloc(size_t n);
void *__real_calloc(size_t a, size_t b);
void *__real_realloc(void *p, size_t n);
void __real_free(void *p);

static atomic_long count, live, arm_at;
static atomic_bool fired;
static _Thread_local int exempt;

/* Where the armed failure happened: return addresses, symbolized only when a
 * run goes wrong. */
#define STACK_MAX 32
static void *fired_stack[STACK_MAX];
static int fired_depth;

/* The sanitizers' symbolizer (file:line), when the executable has one. */
extern void __sanitizer_symbolize_pc(void *pc, const char *fmt, char *out, size_t n)
    __attribute__((weak));
/* Called by the sanitizers before they abort (a crash under a failed
 * allocation): the report then also says which allocation failed. */
extern void __sanitizer_set_death_callback(void (*cb)(void)) __attribute__((weak));

void tfail_exempt(bool on) { exempt += on ? 1 : -1; }

/* True if this allocation is the one to fail. */
static bool fail_now(void)
{
  long n;
  if(exempt)
    return false;
  n = atomic_fetch_add(&count, 1) + 1;
  long at = atomic_load(&arm_at);
  if(at && n == at) {
    fired_depth = backtrace(fired_stack, STACK_MAX);
    atomic_store(&fired, true);
    return true;
  }
  return false;
}

void *__wrap_malloc(size_t n)
{
  void *p;
  if(fail_now()) {
    errno = ENOMEM;
    return NULL;
  }
  if((p = __real_malloc(n)))
    atomic_fetch_add(&live, 1);
  return p;
}

void *__wrap_calloc(size_t a, size_t b)
{
  void *p;
  if(fail_now()) {
    errno = ENOMEM;
    return NULL;
  }
  if((p = __real_calloc(a, b)))
    atomic_fetch_add(&live, 1);
  return p;
}

void *__wrap_realloc(void *p, size_t n)
{
  void *q;
  if(p && !n) {
    atomic_fetch_sub(&live, 1);
    return __real_realloc(p, 0);
  }
  if(fail_now()) {
    errno = ENOMEM;
    return NULL;
  }
  q = __real_realloc(p, n);
  if(q && !p)
    atomic_fetch_add(&live, 1);
  return q;
}

static char secret[256];
static size_t secret_len;
static atomic_long secret_hits;

int __real_pthread_create(pthread_t *t, const pthread_attr_t *a, void *(*fn)(void *),
                          void *arg);
static atomic_long thread_count, thread_arm_at;

int __wrap_pthread_create(pthread_t *t, const pthread_attr_t *a, void *(*fn)(void *),
                          void *arg)
{
  long n = atomic_fetch_add(&thread_count, 1) + 1, at = atomic_load(&thread_arm_at);
  if(at && n == at)
    return EAGAIN;
  return __real_pthread_create(t, a, fn, arg);
}

void tfail_threads_arm(long n)
{
  atomic_store(&thread_arm_at, 0);
  atomic_store(&thread_count, 0);
  atomic_store(&thread_arm_at, n);
}

long tfail_threads_count(void) { return atomic_load(&thread_count); }

cJSON *tfail_parse(const char *text)
{
  cJSON *t;
  tfail_exempt(true);
  t = cJSON_Parse(text);
  tfail_exempt(false);
  assert_non_null(t);
  return t;
}

char *tfail_print(const cJSON *t)
{
  char *s;
  tfail_exempt(true);
  s = t ? cJSON_PrintUnformatted(t) : NULL;
  tfail_exempt(false);
  return s;
}

bool tfail_equal(const cJSON *a, const cJSON *b)
{
  bool eq;
  tfail_exempt(true);
  eq = cJSON_Compare(a, b, true);
  tfail_exempt(false);
  return eq;
}

void tfail_secret(const char *s)
{
  secret_len = 0;
  atomic_store(&secret_hits, 0);
  if(s && strlen(s) < sizeof(secret)) {
    memcpy(secret, s, strlen(s));
    secret_len = strlen(s);
  }
}

long tfail_secret_hits(void) { return atomic_load(&secret_hits); }

void __wrap_free(void *p)
{
  if(!p) {
    __real_free(p);
    return;
  }
  atomic_fetch_sub(&live, 1);
  if(secret_len && memmem(p, malloc_usable_size(p), secret, secret_len))
    atomic_fetch_add(&secret_hits, 1);
  __real_free(p);
}

char *__wrap_strdup(const char *s)
{
  size_t n = strlen(s) + 1;
  char *d = __wrap_malloc(n);
  if(d)
    memcpy(d, s, n);
  return d;
}

char *__wrap_strndup(const char *s, size_t max)
{
  size_t n = strnlen(s, max);
  char *d = __wrap_malloc(n + 1);
  if(d) {
    memcpy(d, s, n);
    d[n] = '\0';
  }
  return d;
}

int __wrap_vasprintf(char **out, const char *fmt, va_list ap)
{
  va_list ap2;
  int n;
  va_copy(ap2, ap);
  n = vsnprintf(NULL, 0, fmt, ap2);
  va_end(ap2);
  *out = NULL;
  if(n < 0 || !(*out = __wrap_malloc((size_t)n + 1)))
    return -1;
  vsnprintf(*out, (size_t)n + 1, fmt, ap);
  return n;
}

int __wrap_asprintf(char **out, const char *fmt, ...)
{
  va_list ap;
  int n;
  va_start(ap, fmt);
  n = __wrap_vasprintf(out, fmt, ap);
  va_end(ap);
  return n;
}

void tfail_print_stack(void)
{
  char line[512];

  if(!fired_depth) {
    print_message("  (no allocation failed)\n");
    return;
  }
  print_message("  the failed allocation was made at:\n");
  for(int i = 3; i < fired_depth; i++) { /* 0-2: backtrace, fail_now, the wrapper */
    if(__sanitizer_symbolize_pc) {
      /* A return address points after the call: step back into it. */
      __sanitizer_symbolize_pc((char *)fired_stack[i] - 1, "%F %S", line, sizeof(line));
      print_message("    #%d %s\n", i - 3, line);
      if(strstr(line, "tfail_torture_")) /* the rest is the test runner */
        break;
    } else {
      fflush(stdout);
      backtrace_symbols_fd(fired_stack + i, 1, 1);
    }
  }
  fflush(stdout);
}

static void on_death(void)
{
  if(!atomic_load(&arm_at) || !fired_depth)
    return;
  print_message("tfail: crashed in run %ld of a torture test\n", atomic_load(&arm_at));
  tfail_print_stack();
}

void tfail_init(void)
{
  static cJSON_Hooks hooks = {__wrap_malloc, __wrap_free};
  void *warm[2];

  /* backtrace() loads the unwinder (and allocates) on its first use: do it
   * now, not inside the first failing allocation. */
  (void)backtrace(warm, 2);
  if(__sanitizer_set_death_callback)
    __sanitizer_set_death_callback(on_death);
  cJSON_InitHooks(&hooks);
  curl_global_init_mem(CURL_GLOBAL_DEFAULT, __wrap_malloc, __wrap_free, __wrap_realloc,
                       __wrap_strdup, __wrap_calloc);
}

void tfail_arm(long n)
{
  /* Disarm first: another thread allocating between the count reset and the
   * new arm_at must not see the old arm_at with a fresh count. */
  atomic_store(&arm_at, 0);
  atomic_store(&count, 0);
  atomic_store(&fired, false);
  if(n) /* keep the last failure's stack after disarming, for reports */
    fired_depth = 0;
  atomic_store(&arm_at, n);
}

long tfail_count(void) { return atomic_load(&count); }
long tfail_live(void) { return atomic_load(&live); }
bool tfail_fired(void) { return atomic_load(&fired); }
void tfail_reset(void) { tfail_arm(0); }

bool tfail_torture_try(const char *name, bool (*fn)(void *ud), void *ud, long max_runs)
{
  long base = tfail_live(), k, step = 1, runs = 0, leaked, bad = 0, from = 1;
  bool ok, keep_going = getenv("TFAIL_KEEP_GOING") != NULL;

  if(getenv("TFAIL_ALL_RUNS"))
    max_runs = 0;
  if(getenv("TFAIL_FROM"))
    from = strtol(getenv("TFAIL_FROM"), NULL, 10);
  tfail_arm(0);
  ok = fn(ud);
  k = tfail_count();
  if(!ok) {
    print_error("%s: unacceptable outcome without any failure\n", name);
    return false;
  }
  if((leaked = tfail_live() - base)) {
    print_error("%s: %ld allocation(s) leaked without any failure\n", name, leaked);
    return false;
  }
  if(max_runs > 0 && k > max_runs) /* a sample spread evenly over 1..K */
    step = (k + max_runs - 1) / max_runs;
  for(long n = from > 1 ? from : 1; n <= k; n += step) {
    tfail_arm(n);
    ok = fn(ud);
    tfail_arm(0);
    runs++;
    leaked = tfail_live() - base;
    if(ok && !leaked)
      continue;
    if(!ok)
      print_error("%s: unacceptable outcome when allocation %ld of %ld failed\n", name, n,
                  k);
    else
      print_error("%s: %ld allocation(s) leaked when allocation %ld of %ld failed\n",
                  name, leaked, n, k);
    tfail_print_stack();
    bad++;
    if(!keep_going)
      return false;
    base += leaked; /* report the next leak on its own */
  }
  if(bad) {
    print_error("%s: %ld of %ld failing runs went wrong\n", name, bad, runs);
    return false;
  }
  print_message("torture %s: %ld allocations, %ld failing runs, all clean\n", name, k,
                runs);
  return true;
}

bool tfail_torture_warm(const char *name, bool (*fn)(void *ud), void *ud, long max_runs)
{
  tfail_arm(0);
  if(!fn(ud)) {
    print_error("%s: unacceptable outcome in the warm-up run\n", name);
    return false;
  }
  return tfail_torture_try(name, fn, ud, max_runs);
}

void tfail_torture_n(const char *name, bool (*fn)(void *ud), void *ud, long max_runs)
{
  if(!tfail_torture_try(name, fn, ud, max_runs))
    fail_msg("%s: see above", name);
}

void tfail_torture(const char *name, bool (*fn)(void *ud), void *ud)
{
  tfail_torture_n(name, fn, ud, 0);
}
