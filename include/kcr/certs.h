/* kcr/certs.h - webhook serving certificates without cert-manager: a CA and
 * a serving certificate the library makes, keeps in a Secret so that every
 * replica serves the same one, rotates before they expire, and whose CA it
 * writes into the caBundle of the webhook configurations and CRDs that
 * call the webhooks (docs/webhooks.md, "Certificates").
 *
 *   kcr_certs_new(&(struct kcr_certs_opts){
 *       .client = c, .ns = "ebdman-system", .secret = "ebdman-webhook-certs",
 *       .dns_names = (const char *[]){"ebdman-webhook.ebdman-system.svc", NULL},
 *       .validating_webhooks = (const char *[]){"ebdman-validating", NULL},
 *       .server = srv}, &certs, &ei);
 *   kcr_certs_start(certs, &ei);   (the Secret read or made, its certificate served)
 *   ...
 *   kcr_certs_free(certs);
 *
 * The manager does all of this for its webhook server when
 * kcr_manager_opts.webhook_certs is set.
 *
 * The Secret (type kubernetes.io/tls, in opts.ns): tls.crt and tls.key,
 * the serving certificate and its key; ca.crt, the CAs clients must trust
 * (what every caBundle holds); ca-signing.crt and ca-signing.key, the CA
 * that signs serving certificates; during a CA rotation ca-next.crt and
 * ca-next.key, and the annotations certs.kcr.io/ca-next-bundled and
 * certs.kcr.io/ca-promoted (RFC 3339 times).
 *
 * Who does what. Every replica reads the Secret at start - and creates it
 * when it is absent (create, and on AlreadyExists read the winner's) - and
 * then every poll_ms, and serves its certificate (kcr_httpd_set_cert, in
 * place: answers in flight go on). The replica that leads (opts.leading)
 * renews, rotates and writes the caBundles, so two replicas never race to
 * rotate. Any replica repairs what cannot work - a Secret without a usable
 * CA or serving certificate, a caBundle without the stored signing CA - so
 * that a webhook the informers need (conversion) is trusted before anyone
 * leads. Every Secret write is conditional on its resourceVersion; after a
 * conflict the round serves and injects what was stored, never its own
 * unsaved plan, and the next round reads again.
 *
 * Lifetimes and renewal points. The serving certificate is renewed once
 * two thirds of its lifetime have passed (90 days: at 60), or when it does
 * not hold the names asked for or was not signed by the signing CA. The CA
 * is rotated once two thirds of its lifetime have passed (a year: at about
 * 243 days), in an order that never leaves a client trusting only the
 * other CA:
 *   1. a new CA is made; ca.crt holds both CAs;
 *   2. the leader writes that bundle into every caBundle it names; once it
 *      has seen every one of them hold it, it records ca-next-bundled;
 *   3. grace_ms after that, the new CA becomes the signing CA and a serving
 *      certificate from it is made (ca-promoted); replicas serve it within
 *      poll_ms; the bundle still holds both CAs;
 *   4. grace_ms after the promotion (grace_ms is at least twice poll_ms, so
 *      every replica has taken the new serving certificate), the old CA
 *      leaves ca.crt and, in the next rounds, every caBundle.
 * An object named for a caBundle that does not exist holds the rotation at
 * step 2 (logged every round): the old CA stays trusted and signing.
 *
 * Thread safety: new, start, stop and free from one thread; kcr_certs_sync
 * and kcr_certs_ca_bundle from any thread (a round at a time). */
#ifndef KCR_CERTS_H
#define KCR_CERTS_H

#include <stdbool.h>
#include <stdint.h>

#include "api.h"
#include "client.h"
#include "err.h"
#include "httpd.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kcr_certs kcr_certs;

/* Options of kcr_certs_new; zero means the default shown. Lists are
 * NULL-terminated arrays of strings, NULL for none; everything is copied. */
struct kcr_certs_opts {
  /* Required; referenced. It must be allowed to write while not leading
   * (no leader-election write gate): every replica may create the Secret. */
  kcr_client *client;
  const char *ns;     /* required: the Secret's namespace */
  const char *secret; /* required: its name */
  /* The names the serving certificate holds: the webhook Service's
   * ("<svc>.<ns>.svc") and, for clientConfig.url, its host or IP. At least
   * one of the two lists. */
  const char *const *dns_names;
  const char *const *ip_addresses;
  /* The objects whose caBundle holds ca.crt: every webhook of each
   * ValidatingWebhookConfiguration and MutatingWebhookConfiguration named,
   * and spec.conversion.webhook.clientConfig of each CRD named (when its
   * conversion strategy is Webhook). */
  const char *const *validating_webhooks;
  const char *const *mutating_webhooks;
  const char *const *crds;
  /* Where the serving certificate goes (kcr_httpd_set_cert); borrowed: it
   * must outlive the kcr_certs. NULL: none (kcr_certs_ca_bundle alone). */
  kcr_httpd *server;
  /* True while this replica may renew, rotate and write caBundles
   * (kcr_manager_leading); NULL: always. Called on the certs thread. */
  bool (*leading)(void *ud);
  void *leading_ud;
  uint64_t ca_lifetime_ms;   /* 365 days */
  uint64_t cert_lifetime_ms; /* 90 days */
  uint64_t grace_ms;         /* 300000 (5 min); raised to 2 * poll_ms */
  uint64_t poll_ms;          /* 10000: how often the Secret is read */
};

/* Checks and copies opts; nothing is read or written yet. Errors:
 * KCR_EINVAL (no client, ns or secret; no names; lifetimes under a
 * second; ei says which), KCR_ENOMEM. *out is NULL on error. */
KCR_API kcr_err kcr_certs_new(const struct kcr_certs_opts *opts, kcr_certs **out,
                              struct kcr_errinfo *ei);

/* Does a first round (kcr_certs_sync: the Secret read, or made when
 * absent, or repaired when it holds nothing usable - by any replica, leader
 * or not - and its certificate served), then starts the thread that does
 * one every poll_ms. A Secret whose certificate cannot be served yet is
 * logged, and the rounds go on. Errors: those of the first round (the
 * apiserver cannot be reached, RBAC: ei says which request), KCR_EINVAL
 * (c NULL or started), KCR_EIO (no thread). */
KCR_API kcr_err kcr_certs_start(kcr_certs *c, struct kcr_errinfo *ei);

/* One round now, as the thread does: read the Secret, serve its
 * certificate, and when leading renew, rotate and write the caBundles.
 * Errors: KCR_EINVAL (c NULL), the client's (KCR_EUNAVAILABLE,
 * KCR_EFORBIDDEN, ... for the Secret's read, creation or update; a
 * conflict is not one: the next round reads again), KCR_ENOMEM. A caBundle
 * that cannot be written is logged, not returned. */
KCR_API kcr_err kcr_certs_sync(kcr_certs *c, struct kcr_errinfo *ei);

/* *out = the CAs clients must trust now (ca.crt, PEM), a new string the
 * caller frees. Errors: KCR_EINVAL (a NULL argument), KCR_ENOTFOUND (no
 * round has read the Secret yet), KCR_ENOMEM; *out is then NULL. */
KCR_API kcr_err kcr_certs_ca_bundle(kcr_certs *c, char **out);

/* Stops the thread (a round in progress finishes). Idempotent. */
KCR_API void kcr_certs_stop(kcr_certs *c);
/* Stops and frees. NULL is a no-op. */
KCR_API void kcr_certs_free(kcr_certs *c);

#ifdef __cplusplus
}
#endif

#endif
