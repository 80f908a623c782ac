/* Private to src/kube: handle set-up shared by the client and the watch. */
#ifndef KCR_CLIENT_INT_H
#define KCR_CLIENT_INT_H

#include <curl/curl.h>

#include "kcr/client.h"

/* One pooled connection: a curl handle and the credential generation its
 * client certificate was configured with. */
struct kcr__conn {
  CURL *h;
  unsigned long cred_gen;
  bool cert_set;
  char errbuf[CURL_ERROR_SIZE];
};

/* Takes a handle from the pool (or makes one); returns NULL if out of memory. */
struct kcr__conn *kcr__conn_get(kcr_client *c);
/* Returns it to the pool (or frees it when broken is true). */
void kcr__conn_put(kcr_client *c, struct kcr__conn *conn, bool broken);
/* Prepares conn for a request to path: URL, TLS, credentials, headers.
 * *hdrs receives the header list to free after the transfer. */
kcr_err kcr__conn_prepare(kcr_client *c, struct kcr__conn *conn, const char *method,
                          const char *path, const char *content_type,
                          struct curl_slist **hdrs, struct kcr_errinfo *ei);
/* Maps a curl failure to a kcr_err with a message in ei. */
kcr_err kcr__curl_err(CURLcode cc, const struct kcr__conn *conn, const char *method,
                      const char *path, struct kcr_errinfo *ei);
void kcr__client_observe(kcr_client *c, const char *method, long code, double secs);

#endif
