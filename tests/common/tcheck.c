/* See tcheck.h. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "tcheck.h"

#define KEEP 8

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static char msgs[KEEP][512];
static int nfail;

static void record(const char *file, int line, const char *text)
{
  pthread_mutex_lock(&mu);
  if(nfail < KEEP)
    snprintf(msgs[nfail], sizeof(msgs[0]), "%s:%d: %s", file, line, text);
  nfail++;
  pthread_mutex_unlock(&mu);
}

bool tcheck_(bool ok, const char *what, const char *file, int line)
{
  if(!ok)
    record(file, line, what);
  return ok;
}

void tcheck_failf(const char *file, int line, const char *fmt, ...)
{
  char text[400];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(text, sizeof(text), fmt, ap);
  va_end(ap);
  record(file, line, text);
}

int tcheck_failures(void)
{
  pthread_mutex_lock(&mu);
  int n = nfail;
  pthread_mutex_unlock(&mu);
  return n;
}

void tcheck_report(void)
{
  char all[KEEP * 520] = "";
  int n;
  pthread_mutex_lock(&mu);
  n = nfail;
  for(int i = 0; i < n && i < KEEP; i++) {
    strncat(all, "\n  ", sizeof(all) - strlen(all) - 1);
    strncat(all, msgs[i], sizeof(all) - strlen(all) - 1);
  }
  nfail = 0;
  pthread_mutex_unlock(&mu);
  if(n)
    fail_msg("%d check(s) failed on other threads:%s", n, all);
}
