/* tlscert-int.h - the HTTP server's certificate and key as PEM text:
 * read from files (and checked) or made self-signed (tlscert.c).
 * Thread safety: any thread. */
#ifndef KCR_RUNTIME_TLSCERT_INT_H
#define KCR_RUNTIME_TLSCERT_INT_H

#include <stdbool.h>
#include <time.h>

#include "kcr/err.h"

/* What kcr__tlscert_make makes. */
struct kcr__certspec {
  const char *cn;         /* the subject's common name */
  const char *const *dns; /* NULL-terminated DNS names (subjectAltName), or NULL */
  const char *const *ips; /* NULL-terminated IP addresses, or NULL */
  bool ca;                /* a CA (keyCertSign) rather than a server certificate */
  long lifetime_s;        /* notAfter - now; notBefore is an hour back */
};

/* A new ECDSA P-256 key and a certificate for it as s says, signed by the
 * CA ca_cert/ca_key (PEM), or self-signed when ca_cert is NULL; PEM text
 * owned as kcr__tlscert_load's. Errors: KCR_EINVAL (names longer than 4
 * KiB), KCR_ECONFIG (the CA is not PEM), KCR_ENOMEM (OpenSSL failed: ei
 * says where). */
kcr_err kcr__tlscert_make(const struct kcr__certspec *s, const char *ca_cert,
                          const char *ca_key, char **cert, char **key,
                          struct kcr_errinfo *ei);
/* The validity of the (first) PEM certificate. Errors: KCR_EPARSE. */
kcr_err kcr__tlscert_times(const char *pem, time_t *not_before, time_t *not_after);
/* True when the PEM certificate leaf was issued and signed by the PEM CA. */
bool kcr__tlscert_issued_by(const char *leaf, const char *ca);
/* True when the PEM certificate holds every DNS name and IP address given
 * (NULL-terminated lists, either NULL). */
bool kcr__tlscert_has_names(const char *pem, const char *const *dns,
                            const char *const *ips);

/* Reads the PEM certificate (chain) at cert_file and the PEM private key
 * at key_file into *cert and *key (NUL-terminated, new: free *key with
 * kcr__wipe_str), after checking that both parse and that the key is the
 * certificate's. Errors (ei names the file and the reason): KCR_EIO
 * (cannot read), KCR_ECONFIG (not PEM, or the key does not match),
 * KCR_ENOMEM. On error both are NULL. */
kcr_err kcr__tlscert_load(const char *cert_file, const char *key_file, char **cert,
                          char **key, struct kcr_errinfo *ei);

/* Checks that the PEM texts cert (a certificate, first of a chain) and key
 * (a private key) parse and that the key is the certificate's; cert_what
 * and key_what name them in messages. Errors: KCR_ECONFIG. */
kcr_err kcr__tlscert_check(const char *cert, const char *key, const char *cert_what,
                           const char *key_what, struct kcr_errinfo *ei);

/* Makes a new ECDSA P-256 key and a self-signed certificate for it (CN and
 * DNS name "localhost", IP 127.0.0.1, valid for one year), as PEM text,
 * owned as above. Errors: KCR_ENOMEM (OpenSSL failed: ei says where). */
kcr_err kcr__tlscert_self_signed(char **cert, char **key, struct kcr_errinfo *ei);

#endif
