/* kube/config-int.h - what config.c and config_exec.c share; not installed.
 *
 * config.c owns kcr_config (loading, the credential cache); config_exec.c
 * runs exec credential plugins and parses their ExecCredential answer. The
 * exec code is I/O with a child process only: it never touches the cache and
 * takes no lock; config.c calls it with no lock held (see config.c's DESIGN
 * comment for the single-flight protocol around it). */
#ifndef KCR_KUBE_CONFIG_INT_H
#define KCR_KUBE_CONFIG_INT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "core/err-int.h"
#include "core/secret-int.h"
#include "kcr/buf.h"
#include "kcr/config.h"
#include "limits-int.h"

#define KCR__EXEC_API_V1      "client.authentication.k8s.io/v1"
#define KCR__EXEC_API_V1BETA1 "client.authentication.k8s.io/v1beta1"

/* Bytes owned by whoever holds the struct. */
struct kcr__blob {
  unsigned char *ptr;
  size_t len;
};

/* users[].user.exec, validated at load time. */
struct kcr__exec_spec {
  char *api_version;  /* KCR__EXEC_API_V1 or KCR__EXEC_API_V1BETA1 */
  char *command;      /* as written in the kubeconfig (for messages) */
  char *path;         /* what posix_spawnp gets: resolved against the
                         kubeconfig's directory when it contains a '/' */
  char **argv;        /* NULL-terminated; argv[0] == command */
  char **env;         /* NULL-terminated "NAME=value" entries */
  char *install_hint; /* or NULL */
  char *where;        /* "PATH: users[0].user.exec (user \"u\")", for errors */
};

/* What a successful plugin run produced; everything owned. */
struct kcr__exec_result {
  char *token;           /* or NULL */
  struct kcr__blob cert; /* PEM or {NULL, 0} */
  struct kcr__blob key;  /* PEM or {NULL, 0} */
  bool has_expiry;
  time_t expiry; /* wall clock, valid when has_expiry */
};

/* Runs the plugin once and parses its answer. Errors (all with a message that
 * starts with spec->where and never quotes the plugin's stdout or stderr):
 * KCR_ECONFIG plugin not found / not executable, KCR_EIO non-zero exit or
 * death by signal, KCR_ETIMEDOUT killed after timeout_ms, KCR_ECANCELED
 * killed because *cancel became true (checked at least once a second; cancel
 * may be NULL), KCR_EPARSE malformed, oversized or incomplete
 * ExecCredential, KCR_ENOMEM.
 * Thread safety: any thread; spec is only read. */
kcr_err kcr__exec_run(const struct kcr__exec_spec *spec, uint64_t timeout_ms,
                      const atomic_bool *cancel, struct kcr__exec_result *out,
                      struct kcr_errinfo *ei);
/* Parses a plugin's stdout text[0..len) (an ExecCredential of
 * spec->api_version) into *out, as kcr__exec_run does once the plugin exited
 * with status 0. Errors: KCR_EPARSE (message as kcr__exec_run's, never
 * quoting the text), KCR_ENOMEM; on error *out is empty. Pure. */
kcr_err kcr__exec_parse(const struct kcr__exec_spec *spec, const unsigned char *text,
                        size_t len, struct kcr__exec_result *out, struct kcr_errinfo *ei);
void kcr__exec_result_cleanup(struct kcr__exec_result *r);
void kcr__exec_spec_free(struct kcr__exec_spec *spec);

/* kcr_config_dup_credentials(), but the client certificate and key are
 * copied only when pair is true (out->cert and out->key stay NULL
 * otherwise); *has_pair (may be NULL) says whether the credentials have a
 * certificate, as out->cert would (false on error); out->generation says
 * which one. For a request on a connection already made with it, which
 * needs only the token. Errors, ownership, threads: as
 * kcr_config_dup_credentials(). */
kcr_err kcr__config_credentials(kcr_config *cfg, struct kcr_credentials *out, bool pair,
                                bool *has_pair, struct kcr_errinfo *ei);

/* Whether the credentials can change on a re-read (an exec plugin or a
 * token file): only then is a request refused with 401 worth retrying
 * after kcr_config_invalidate(). Any thread (reads what loading set). */
bool kcr__config_refreshable(const kcr_config *cfg);

/* Test hooks: shorten the exec plugin timeout (default KCR__EXEC_TIMEOUT_MS),
 * the token-file re-check interval (default 1000 ms) and change how long
 * before its expiry an exec answer is refreshed in the background (default
 * 10 s). Call before the config is shared between threads. */
void kcr__config_set_exec_timeout_ms(kcr_config *cfg, uint64_t ms);
void kcr__config_set_token_recheck_ms(kcr_config *cfg, uint64_t ms);
void kcr__config_set_exec_margin_s(kcr_config *cfg, long s);
/* Test hooks: threads blocked in kcr_config_dup_credentials() waiting for a
 * plugin run to end, and a wait until no plugin run is in flight (the
 * background refresh included). Any thread. */
int kcr__config_exec_waiters(kcr_config *cfg);
void kcr__config_exec_quiesce(kcr_config *cfg);

#endif
