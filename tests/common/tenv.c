/* tenv.h: the proxy environment of a test. */
#include "tenv.h"

#include <stdlib.h>
#include <string.h>

const char *const tenv_proxy_vars[TENV_NPROXY] = {
    "https_proxy", "HTTPS_PROXY", "http_proxy", "HTTP_PROXY",
    "all_proxy",   "ALL_PROXY",   "no_proxy",   "NO_PROXY"};

void tenv_proxy_set(char *saved[TENV_NPROXY], const char *const vals[TENV_NPROXY])
{
  for(size_t i = 0; i < TENV_NPROXY; i++) {
    const char *v = getenv(tenv_proxy_vars[i]);
    saved[i] = v ? strdup(v) : NULL;
    if(vals[i])
      setenv(tenv_proxy_vars[i], vals[i], 1);
    else
      unsetenv(tenv_proxy_vars[i]);
  }
}

void tenv_proxy_restore(char *saved[TENV_NPROXY])
{
  for(size_t i = 0; i < TENV_NPROXY; i++) {
    if(saved[i])
      setenv(tenv_proxy_vars[i], saved[i], 1);
    else
      unsetenv(tenv_proxy_vars[i]);
    free(saved[i]);
  }
}
