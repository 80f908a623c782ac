/* DESIGN: the certificate and key the HTTP server serves HTTPS with
 * (tlscert-int.h). libmicrohttpd does TLS with GnuTLS and takes both as PEM
 * text in memory; we read and check them (or make them) with OpenSSL, which
 * libkcr already links for the client, so a bad file is an error naming it
 * when the server is made, not an opaque failure when it starts. The
 * self-signed certificate is what controller-runtime's metrics server makes
 * when it has no certificate: good for encryption, not for identity
 * (scrapers then skip verification, as kubebuilder's ServiceMonitor does).
 * Keys are wiped before their memory is freed. */
#include <errno.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err-int.h"
#include "core/secret-int.h"
#include "runtime/tlscert-int.h"

#define PEM_MAX (1u << 20) /* a certificate chain or key file larger: refused */

/* The whole file at path, NUL-terminated, in *out. */
static kcr_err read_file(const char *path, const char *what, char **out,
                         struct kcr_errinfo *ei)
{
  FILE *f = fopen(path, "re");
  char *p = NULL, ebuf[128];
  size_t n = 0, cap = 0;
  kcr_err rc = KCR_OK;

  *out = NULL;
  if(!f)
    return kcr_errinfo_set(ei, KCR_EIO, "cannot read the TLS %s %s: %s", what, path,
                           kcr__errstr(errno, ebuf, sizeof(ebuf)));
  for(;;) {
    if(cap - n < 4097) {
      char *q;
      cap = cap ? cap * 2 : 8192;
      if(cap > PEM_MAX * 2 || !(q = malloc(cap))) {
        rc = cap > PEM_MAX * 2
                 ? kcr_errinfo_set(ei, KCR_ECONFIG, "the TLS %s %s is larger than 1 MiB",
                                   what, path)
                 : KCR_ENOMEM;
        break;
      }
      if(p)
        memcpy(q, p, n);
      kcr__wipe_free(p, n);
      p = q;
    }
    size_t got = fread(p + n, 1, cap - n - 1, f);
    n += got;
    if(got == 0)
      break;
  }
  if(!rc && ferror(f))
    rc = kcr_errinfo_set(ei, KCR_EIO, "cannot read the TLS %s %s", what, path);
  fclose(f);
  if(rc) {
    kcr__wipe_free(p, n);
    return rc;
  }
  p[n] = '\0';
  *out = p;
  return KCR_OK;
}

/* OpenSSL's reason for the last failure, for messages. */
static const char *ssl_reason(char *buf, size_t n)
{
  unsigned long e = ERR_get_error();
  ERR_clear_error();
  if(!e)
    return "no PEM data";
  ERR_error_string_n(e, buf, n);
  return buf;
}

kcr_err kcr__tlscert_check(const char *cert, const char *key, const char *cert_what,
                           const char *key_what, struct kcr_errinfo *ei)
{
  X509 *x = NULL;
  EVP_PKEY *pk = NULL;
  BIO *b = NULL;
  char why[256];
  kcr_err rc = KCR_OK;

  ERR_clear_error();
  if(!(b = BIO_new_mem_buf(cert, -1)) || !(x = PEM_read_bio_X509(b, NULL, NULL, NULL))) {
    rc = kcr_errinfo_set(ei, KCR_ECONFIG,
                         "the TLS certificate %s is not a PEM certificate: %s", cert_what,
                         ssl_reason(why, sizeof(why)));
    goto out;
  }
  BIO_free(b);
  if(!(b = BIO_new_mem_buf(key, -1)) ||
     !(pk = PEM_read_bio_PrivateKey(b, NULL, NULL, NULL))) {
    rc = kcr_errinfo_set(ei, KCR_ECONFIG, "the TLS key %s is not a PEM private key: %s",
                         key_what, ssl_reason(why, sizeof(why)));
    goto out;
  }
  if(X509_check_private_key(x, pk) != 1) {
    ERR_clear_error();
    rc = kcr_errinfo_set(ei, KCR_ECONFIG,
                         "the TLS key %s is not the key of the certificate %s", key_what,
                         cert_what);
    goto out;
  }
out:
  BIO_free(b);
  X509_free(x);
  EVP_PKEY_free(pk);
  return rc;
}

kcr_err kcr__tlscert_load(const char *cert_file, const char *key_file, char **cert,
                          char **key, struct kcr_errinfo *ei)
{
  kcr_err rc;

  *cert = *key = NULL;
  if(!(rc = read_file(cert_file, "certificate", cert, ei)) &&
     !(rc = read_file(key_file, "key", key, ei)))
    rc = kcr__tlscert_check(*cert, *key, cert_file, key_file, ei);
  if(rc) {
    free(*cert);
    kcr__wipe_str(*key);
    *cert = *key = NULL;
  }
  return rc;
}

/* The PEM text a BIO holds, as a new string. */
static char *bio_text(BIO *b)
{
  char *data, *s;
  long n = BIO_get_mem_data(b, &data);

  if(n <= 0 || !(s = malloc((size_t)n + 1)))
    return NULL;
  memcpy(s, data, (size_t)n);
  s[n] = '\0';
  return s;
}

static bool add_ext(X509 *x, int nid, const char *value)
{
  X509V3_CTX ctx;
  X509_EXTENSION *e;
  bool ok;

  X509V3_set_ctx(&ctx, x, x, NULL, NULL, 0);
  if(!(e = X509V3_EXT_conf_nid(NULL, &ctx, nid, value)))
    return false;
  ok = X509_add_ext(x, e, -1) == 1;
  X509_EXTENSION_free(e);
  return ok;
}

kcr_err kcr__tlscert_self_signed(char **cert, char **key, struct kcr_errinfo *ei)
{
  EVP_PKEY *pk = NULL;
  X509 *x = NULL;
  X509_NAME *name;
  BIO *cb = NULL, *kb = NULL;
  unsigned char serial[16];
  BIGNUM *bn = NULL;
  const char *step = "key";
  kcr_err rc = KCR_ENOMEM;

  *cert = *key = NULL;
  if(!(pk = EVP_EC_gen("P-256")))
    goto out;
  step = "certificate";
  if(!(x = X509_new()) || RAND_bytes(serial, sizeof(serial)) != 1)
    goto out;
  serial[0] &= 0x7f; /* positive */
  if(!(bn = BN_bin2bn(serial, sizeof(serial), NULL)) ||
     !BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(x)) || X509_set_version(x, 2) != 1 ||
     !X509_gmtime_adj(X509_getm_notBefore(x), -3600) ||
     !X509_gmtime_adj(X509_getm_notAfter(x), 365L * 24 * 3600) ||
     X509_set_pubkey(x, pk) != 1 || !(name = X509_get_subject_name(x)) ||
     X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                                (const unsigned char *)"localhost", -1, -1, 0) != 1 ||
     X509_set_issuer_name(x, name) != 1 ||
     !add_ext(x, NID_subject_alt_name, "DNS:localhost,IP:127.0.0.1") ||
     !add_ext(x, NID_basic_constraints, "critical,CA:FALSE") ||
     !add_ext(x, NID_ext_key_usage, "serverAuth") || X509_sign(x, pk, EVP_sha256()) <= 0)
    goto out;
  step = "PEM";
  if(!(cb = BIO_new(BIO_s_mem())) || !(kb = BIO_new(BIO_s_secmem())) ||
     PEM_write_bio_X509(cb, x) != 1 ||
     PEM_write_bio_PrivateKey(kb, pk, NULL, NULL, 0, NULL, NULL) != 1 ||
     !(*cert = bio_text(cb)) || !(*key = bio_text(kb)))
    goto out;
  rc = KCR_OK;
out:
  if(rc) {
    char why[256];
    kcr_errinfo_set(ei, rc, "cannot make a self-signed TLS certificate (%s): %s", step,
                    ssl_reason(why, sizeof(why)));
    free(*cert);
    kcr__wipe_str(*key);
    *cert = *key = NULL;
  }
  BIO_free(cb);
  BIO_free(kb);
  BN_free(bn);
  X509_free(x);
  EVP_PKEY_free(pk);
  return rc;
}
