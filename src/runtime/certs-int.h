/* certs-int.h - the decision of a certificate round (certs.c), apart from
 * the Secret and the cluster, for the unit tests. */
#ifndef KCR_RUNTIME_CERTS_INT_H
#define KCR_RUNTIME_CERTS_INT_H

#include <stdbool.h>
#include <time.h>

#include "kcr/err.h"

/* What a Secret holds (PEM texts; NULL: absent) and its rotation times
 * (0: not recorded). Keys are wiped when freed. */
struct kcr__certs_state {
  char *bundle;          /* ca.crt: the CAs clients trust */
  char *ca, *ca_key;     /* the signing CA */
  char *next, *next_key; /* the next CA, during a rotation */
  char *tls, *tls_key;   /* the serving certificate */
  time_t bundled;        /* when every caBundle was seen holding next */
  time_t promoted;       /* when next became the signing CA */
};

/* What a round needs of the options. */
struct kcr__certs_cfg {
  const char *name;  /* the CA's common name is "<name>-ca" */
  char **dns, **ips; /* NULL-terminated, either NULL */
  long ca_lifetime_s, cert_lifetime_s, grace_s;
};

/* What a plan changed (bits of *changed). */
#define KCR__CERTS_NEW_CA      1u  /* no usable CA: everything made anew */
#define KCR__CERTS_ROTATING    2u  /* a next CA made (or a damaged one dropped) */
#define KCR__CERTS_PROMOTED    4u  /* the next CA signs from now on */
#define KCR__CERTS_OLD_CA_GONE 8u  /* the old CA left the bundle */
#define KCR__CERTS_BUNDLE      16u /* the bundle made again */
#define KCR__CERTS_NEW_CERT    32u /* a new serving certificate */
/* Set with the above when what was stored could not be served or trusted
 * (no usable CA, no usable serving certificate or one the CA did not sign,
 * a bundle without the signing CA): any replica may write such a plan, not
 * only the leader. Renewals that are merely due, rotation steps and new
 * names are the leader's. */
#define KCR__CERTS_REPAIR 64u

typedef struct kcr_certs kcr_certs;
/* True once a round has served a certificate from the Secret. Any thread. */
bool kcr__certs_serving(kcr_certs *c);

/* Brings st to what it should be at now (kcr/certs.h: renewal points and
 * the rotation's steps 1, 3 and 4; step 2 is the caller's). Errors:
 * KCR_ENOMEM (OpenSSL failed: ei says where); st is then valid but maybe
 * half-planned - do not write it. */
kcr_err kcr__certs_plan(const struct kcr__certs_cfg *cfg, struct kcr__certs_state *st,
                        time_t now, unsigned *changed, struct kcr_errinfo *ei);
void kcr__certs_state_free(struct kcr__certs_state *st);

#endif
