/* tenv - the proxy environment variables set for a test and restored after
 * it (tests of the client's choice of proxy, unit and integration alike).
 *
 *   char *saved[TENV_NPROXY];
 *   tenv_proxy_set(saved, (const char *const[TENV_NPROXY]){[0] = "http://p:3128"});
 *   ... make the client ...
 *   tenv_proxy_restore(saved);
 *
 * Not thread-safe (setenv): from the test's own thread, with no other
 * thread reading the environment. */
#ifndef TENV_H
#define TENV_H

/* The variables, in this order: https_proxy, HTTPS_PROXY, http_proxy,
 * HTTP_PROXY, all_proxy, ALL_PROXY, no_proxy, NO_PROXY. */
#define TENV_NPROXY 8
extern const char *const tenv_proxy_vars[TENV_NPROXY];

/* Saves the variables into saved (owned copies, NULL for unset), then sets
 * each to vals[i] (NULL: unset). */
void tenv_proxy_set(char *saved[TENV_NPROXY], const char *const vals[TENV_NPROXY]);
/* Puts back what tenv_proxy_set saved and frees it. */
void tenv_proxy_restore(char *saved[TENV_NPROXY]);

#endif
