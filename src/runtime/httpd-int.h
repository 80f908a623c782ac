/* httpd-int.h - what the library's own endpoints (webhook.c) need of the
 * HTTP server beyond kcr/httpd.h. */
#ifndef KCR_RUNTIME_HTTPD_INT_H
#define KCR_RUNTIME_HTTPD_INT_H

#include "kcr/httpd.h"

/* kcr_httpd_add_handler, with ud owned by the server from a successful
 * call on: free_ud(ud) runs in kcr_httpd_free. On error ud stays the
 * caller's. */
kcr_err kcr__httpd_add_handler_owned(kcr_httpd *h, const char *path, size_t max_body,
                                     kcr_httpd_handler_fn fn, void *ud,
                                     void (*free_ud)(void *));

#endif
