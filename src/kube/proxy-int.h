/* kube/proxy-int.h - which proxy the client reaches its server through
 * (proxy.c); private to src/kube and the tests. */
#ifndef KCR_KUBE_PROXY_INT_H
#define KCR_KUBE_PROXY_INT_H

#include "kcr/err.h"

/* The environment's proxy variables, each NULL or "" when unset (the
 * caller reads them: kcr__proxy_for reads nothing). */
struct kcr__proxy_env {
  const char *https_proxy, *https_proxy_upper; /* https_proxy, HTTPS_PROXY */
  const char *http_proxy, *http_proxy_upper;   /* http_proxy, HTTP_PROXY */
  const char *no_proxy, *no_proxy_upper;       /* no_proxy, NO_PROXY */
};

/* The proxy for requests to server (an http:// or https:// URL, as
 * kcr_config_server gives it), decided as client-go decides it (the rules:
 * proxy.c's DESIGN comment and kcr/client.h): proxy_url, the cluster's
 * proxy-url (NULL or "": none), else the environment env (NULL: empty).
 * On KCR_OK *out is the proxy's URL in the form curl's CURLOPT_PROXY
 * takes (malloc'd: the caller frees it), or NULL for a direct connection.
 * Errors: KCR_ENOMEM (*out NULL). Pure: no I/O, no global state; any
 * thread. */
kcr_err kcr__proxy_for(const char *server, const char *proxy_url,
                       const struct kcr__proxy_env *env, char **out);

#endif
