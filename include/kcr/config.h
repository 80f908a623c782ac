/* kcr/config.h - where the API server is and how to authenticate to it.
 *
 * Sources, in the order kcr_config_load() tries them when no path is given:
 *   1. opts->kubeconfig (an explicit path: an error in it is final);
 *   2. $KUBECONFIG (colon-separated; the first file that exists is used);
 *   3. ~/.kube/config;
 *   4. in-cluster: $KUBERNETES_SERVICE_HOST/$KUBERNETES_SERVICE_PORT with the
 *      service-account token and CA under /var/run/secrets/kubernetes.io/
 *      serviceaccount (directory overridable for tests).
 *
 * Kubeconfig support: current-context or opts->context; clusters[].cluster
 * server, certificate-authority / -data, insecure-skip-tls-verify (refused
 * together with a CA, as kubectl does), tls-server-name (the name the
 * server's certificate is verified against and sent as SNI, while the
 * connection goes to the server URL's host and port), proxy-url (http://, https:// or
 * socks5://, as client-go takes it: the proxy for every request to the server, see
 * kcr/client.h "Proxies"); users[].user client-certificate /
 * -data, client-key / -data, token, tokenFile, exec (client.authentication.k8s.io/v1 and
 * v1beta1: command, args, env, interactiveMode Never/IfAvailable; the ExecCredential
 * answer's token or clientCertificateData/clientKeyData, cached until expirationTimestamp
 * and refreshed shortly before it in the background). Relative file paths resolve against
 * the kubeconfig's directory. Inline *-data are base64-decoded and held in memory only:
 * never written to disk, never logged, wiped before they are freed. An exec plugin's
 * stderr is never logged or quoted (plugins print secrets there).
 *
 * Errors: KCR_ECONFIG with ei->message naming the file and the field, e.g.
 *   "/home/u/.kube/config: users[0].user.client-key-data: invalid base64".
 *
 * Ownership: a config is reference counted (kcr_config_ref); every client
 * made from it holds a reference, so the caller may free its own at any time.
 *
 * Thread safety: a loaded kcr_config is immutable except for its credential
 * cache, which kcr_config_dup_credentials() guards with an internal mutex;
 * any thread may call any function on a loaded config, and kcr_config_free
 * on one reference must not race with calls made through that reference. */
#ifndef KCR_CONFIG_H
#define KCR_CONFIG_H

#include <stdbool.h>
#include <stddef.h>

#include "api.h"
#include "err.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kcr_config kcr_config;

struct kcr_config_opts {
  /* kcr_config_load: an explicit kubeconfig path, or NULL to search.
   * kcr_config_from_yaml: the path the text was read from; it names the
   * text in messages and is the base of relative paths (NULL: named
   * "<kubeconfig>", paths relative to the working directory). */
  const char *kubeconfig;
  const char *context;  /* context name, or NULL for current-context */
  bool in_cluster_only; /* skip kubeconfig files (kcr_config_load only) */
  const char *sa_dir;   /* in-cluster secrets dir; NULL = default */
};

/* Loads a config from the first source that exists (see above); opts may
 * be NULL. On KCR_OK *out holds one reference (kcr_config_free); on error
 * it is NULL.
 * Errors: KCR_ECONFIG (anything wrong with the source, or no source found;
 * ei->message names the file and field), KCR_EINVAL (opts->kubeconfig
 * together with in_cluster_only), KCR_ENOMEM.
 * Thread safety: any thread (reads the environment). */
KCR_API kcr_err kcr_config_load(const struct kcr_config_opts *opts, kcr_config **out,
                                struct kcr_errinfo *ei);
/* Parses kubeconfig YAML text yaml[0..len) (borrowed for the call) with
 * opts->kubeconfig naming it and opts->context selecting the context; opts
 * may be NULL. On KCR_OK *out holds one reference; on error it is NULL.
 * Errors: KCR_ECONFIG (malformed YAML, a missing or invalid field; the
 * message names the origin and field), KCR_EINVAL (opts->in_cluster_only
 * set), KCR_ENOMEM.
 * Thread safety: any thread. */
KCR_API kcr_err kcr_config_from_yaml(const char *yaml, size_t len,
                                     const struct kcr_config_opts *opts, kcr_config **out,
                                     struct kcr_errinfo *ei);
/* A new reference to cfg (returns cfg; NULL is passed through); release it
 * with kcr_config_free. Any thread. */
KCR_API kcr_config *kcr_config_ref(kcr_config *cfg);
/* Drops a reference (NULL is a no-op); the last one frees the config,
 * wiping its secrets. If an exec plugin refresh is under way in the
 * background, the plugin is killed and waited for (at most about a second).
 * Must not race with calls made through this reference. */
KCR_API void kcr_config_free(kcr_config *cfg);

/* Borrowed views, valid as long as the caller's reference to cfg. Any
 * thread. */
KCR_API const char *kcr_config_server(const kcr_config *cfg); /* "https://h:p" */
KCR_API const char *kcr_config_origin(const kcr_config *cfg); /* file or "in-cluster" */
KCR_API const char *kcr_config_namespace(const kcr_config *cfg); /* context ns or NULL */
KCR_API bool kcr_config_insecure(const kcr_config *cfg);
KCR_API const char *kcr_config_tls_server_name(const kcr_config *cfg); /* or NULL */
/* The cluster's proxy-url as written, or NULL (in-cluster: always). It may
 * hold a user and password: do not log it. */
KCR_API const char *kcr_config_proxy_url(const kcr_config *cfg);
/* CA bundle (PEM) in memory, or NULL to use the system store. */
KCR_API const unsigned char *kcr_config_ca(const kcr_config *cfg, size_t *len);

/* Credentials for one request, an owned snapshot: release with
 * kcr_credentials_cleanup (which wipes the secrets). */
struct kcr_credentials {
  char *token;         /* bearer token or NULL */
  unsigned char *cert; /* client certificate PEM or NULL */
  size_t cert_len;
  unsigned char *key; /* client key PEM or NULL */
  size_t key_len;
  unsigned long generation; /* changes whenever cert/key change */
};
/* Copies the current credentials into *out (owned by the caller: release
 * with kcr_credentials_cleanup; zeroed on error): static ones, a token file
 * re-read when it changed on disk (service-account rotation), or an exec
 * plugin's answer.
 *
 * Exec plugins: a valid cached answer is returned at once, also during its
 * last 10 s before expirationTimestamp, when a refresh starts in the
 * background. Without a valid answer (none yet, expired, or after
 * kcr_config_invalidate()) the call runs the plugin, or waits for the run
 * already under way and shares its outcome; at most one plugin run per
 * config is under way at any time, and no lock is held while it runs.
 *
 * Errors: from the exec plugin (the message names the kubeconfig and user,
 * never the plugin's output): KCR_ECONFIG not found / not executable,
 * KCR_EIO non-zero exit or killed, KCR_ETIMEDOUT ran over 60 s, KCR_EPARSE
 * bad ExecCredential; callers that waited for a failed run get its code and
 * message. KCR_ECONFIG a token file that could never be read. KCR_ENOMEM.
 * Thread safety: any thread. */
KCR_API kcr_err kcr_config_dup_credentials(kcr_config *cfg, struct kcr_credentials *out,
                                           struct kcr_errinfo *ei);
/* Drops cached exec/token-file credentials (call after a 401): the next
 * kcr_config_dup_credentials() re-reads the token file and re-runs the
 * plugin (or takes the answer of a run already under way). Any thread. */
KCR_API void kcr_config_invalidate(kcr_config *cfg);
/* Wipes and frees c's contents and zeroes it; NULL or a zeroed struct is a
 * no-op. */
KCR_API void kcr_credentials_cleanup(struct kcr_credentials *c);

#ifdef __cplusplus
}
#endif

#endif
