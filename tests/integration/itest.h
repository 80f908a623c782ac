/* Helpers for integration tests against the real control plane started by
 * tools/controlplane/start ($KUBECONFIG points at its admin kubeconfig).
 * Without it the helpers fail the test loudly: integration tests never skip. */
#ifndef KCR_ITEST_H
#define KCR_ITEST_H

#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <cmocka.h>

#include "kcr.h"

extern const struct kcr_gvr itest_configmaps;
extern const struct kcr_gvr itest_namespaces;
extern const struct kcr_gvr itest_crds;
/* The test CRD: widgets.test.kcr.io/v1, namespaced, status subresource,
 * conditions as a list-map keyed by type. */
extern const struct kcr_gvr itest_widgets;

/* A client for $KUBECONFIG; aborts the test run if it cannot be made. */
kcr_client *itest_client(void);
/* A client for $KUBECONFIG with one more field in its cluster ("key:
 * value", e.g. tls-server-name, proxy-url); fails the test if it cannot be
 * made. */
kcr_client *itest_client_with(const char *key, const char *value);
/* An HTTP proxy on 127.0.0.1 that tunnels CONNECT requests (to a numeric
 * address, e.g. "CONNECT 127.0.0.1:6443") and counts them; anything else is
 * answered 400. Start and stop fail the test on error; stop ends every
 * tunnel, joins its threads and frees the proxy. */
struct itest_proxy;
struct itest_proxy *itest_proxy_start(void);
int itest_proxy_port(const struct itest_proxy *p);
/* CONNECT requests tunnelled so far. */
unsigned itest_proxy_tunnels(struct itest_proxy *p);
void itest_proxy_stop(struct itest_proxy *p);
/* Creates a fresh namespace "kcr-<prefix>-<random>"; returns its name
 * (static storage per call site is not assumed: caller frees). */
char *itest_namespace(kcr_client *c, const char *prefix);
/* Installs the widgets CRD (idempotent) and waits until it is Established
 * and served. */
void itest_install_widget_crd(kcr_client *c);
/* Deletes a namespace made by itest_namespace and frees its name. */
void itest_namespace_drop(kcr_client *c, char *ns);
/* The usual group teardown: drop the namespace, free the client. */
void itest_done(kcr_client *c, char *ns);
/* The group fixture of a test file, for cmocka_run_group_tests(tests, setup,
 * teardown): `static kcr_client *cl`, the client for $KUBECONFIG, made by
 * setup and freed by teardown. */
#define ITEST_CLIENT_FIXTURE                                                             \
  static kcr_client *cl;                                                                 \
  static int setup(void **state)                                                         \
  {                                                                                      \
    cl = itest_client();                                                                 \
    return 0;                                                                            \
  }                                                                                      \
  static int teardown(void **state)                                                      \
  {                                                                                      \
    kcr_client_free(cl);                                                                 \
    return 0;                                                                            \
  }
/* The same with `static char *ns`, a fresh namespace made by setup with
 * itest_namespace(cl, prefix) and dropped by teardown; with crd true setup
 * also installs the widgets CRD. */
#define ITEST_NAMESPACE_FIXTURE(prefix, crd)                                             \
  static kcr_client *cl;                                                                 \
  static char *ns;                                                                       \
  static int setup(void **state)                                                         \
  {                                                                                      \
    cl = itest_client();                                                                 \
    ns = itest_namespace(cl, prefix);                                                    \
    if(crd)                                                                              \
      itest_install_widget_crd(cl);                                                      \
    return 0;                                                                            \
  }                                                                                      \
  static int teardown(void **state)                                                      \
  {                                                                                      \
    itest_done(cl, ns);                                                                  \
    return 0;                                                                            \
  }
/* kcr_manager_run on a thread of its own: start, then stop (kcr_manager_stop,
 * join, its exit status checked against want, the manager freed). */
struct itest_run {
  kcr_manager *m;
  pthread_t th;
  int status;
};
void itest_run_start(struct itest_run *r, kcr_manager *m);
void itest_run_stop(struct itest_run *r, int want);

/* GET http://127.0.0.1:port/path (2 s timeout), the body into *body
 * (reset first); returns the status code, 0 when no answer came. */
long itest_http_get(int port, const char *path, struct kcr_buf *body);

/* The keys a controller reconciled, in order (the first ITEST_MAX_SEEN):
 * itest_seen_reconcile is a reconciler that notes them, with the struct
 * as its ud; initialise with ITEST_SEEN_INIT. */
#define ITEST_MAX_SEEN 64
struct itest_seen {
  pthread_mutex_t mu;
  int n;
  char key[ITEST_MAX_SEEN][128];
};
#define ITEST_SEEN_INIT                                                                  \
  {                                                                                      \
    .mu = PTHREAD_MUTEX_INITIALIZER                                                      \
  }
kcr_err itest_seen_reconcile(kcr_ctx *cx, const struct kcr_request *req,
                             struct kcr_result *res, void *ud);
/* Whether ns/name was reconciled; itest_wait_saw waits up to ms for it. */
bool itest_saw(struct itest_seen *s, const char *ns, const char *name);
bool itest_wait_saw(struct itest_seen *s, const char *ns, const char *name, long ms);
/* A controller named name on client c, For(inf), noting into s, added to
 * m (which frees it). */
kcr_controller *itest_seen_controller(kcr_manager *m, kcr_client *c, const char *name,
                                      kcr_informer *inf, struct itest_seen *s);
/* Parses JSON text (printf format) into a tree; fails the test if malformed. */
cJSON *itest_json(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Asserts rc == want, printing the error info when not. */
#define itest_expect(want, rc, ei) itest_expect_(want, rc, ei, __FILE__, __LINE__)
void itest_expect_(kcr_err want, kcr_err rc, const struct kcr_errinfo *ei,
                   const char *file, int line);
/* Environment value or a loud test failure. */
const char *itest_env(const char *name);
void itest_sleep_ms(long ms);
/* POSTs JSON to etcd's HTTP gateway ($KCR_ETCD_ENDPOINT); returns the parsed
 * answer (caller frees). */
cJSON *itest_etcd(const char *path, const char *body);
/* Compacts etcd's history up to its current revision. */
void itest_etcd_compact(void);
/* Runs tools/controlplane/restart-apiserver with args ("", "--stop-only",
 * "--start-only"); fails the test if it fails. */
void itest_controlplane(const char *args);

#endif
