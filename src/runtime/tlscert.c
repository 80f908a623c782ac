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
#include <time.h>
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

static bool add_ext(X509V3_CTX *ctx, X509 *x, int nid, const char *value)
{
  X509_EXTENSION *e;
  bool ok;

  if(!(e = X509V3_EXT_conf_nid(NULL, ctx, nid, value)))
    return false;
  ok = X509_add_ext(x, e, -1) == 1;
  X509_EXTENSION_free(e);
  return ok;
}

/* The PEM certificate pem as an X509 (caller frees), NULL if it is none. */
static X509 *pem_x509(const char *pem)
{
  BIO *b = BIO_new_mem_buf(pem, -1);
  X509 *x = b ? PEM_read_bio_X509(b, NULL, NULL, NULL) : NULL;

  BIO_free(b);
  ERR_clear_error();
  return x;
}

static EVP_PKEY *pem_key(const char *pem)
{
  BIO *b = BIO_new_mem_buf(pem, -1);
  EVP_PKEY *k = b ? PEM_read_bio_PrivateKey(b, NULL, NULL, NULL) : NULL;

  BIO_free(b);
  ERR_clear_error();
  return k;
}

/* "DNS:a,DNS:b,IP:1.2.3.4" into buf; false when it does not fit. */
static bool san_text(const struct kcr__certspec *s, char *buf, size_t n)
{
  size_t k = 0;
  int w;

  buf[0] = '\0';
  for(int pass = 0; pass < 2; pass++) {
    const char *const *v = pass ? s->ips : s->dns;
    for(; v && *v; v++) {
      w = snprintf(buf + k, n - k, "%s%s:%s", k ? "," : "", pass ? "IP" : "DNS", *v);
      if(w < 0 || (size_t)w >= n - k)
        return false;
      k += (size_t)w;
    }
  }
  return true;
}

kcr_err kcr__tlscert_make(const struct kcr__certspec *s, const char *ca_cert,
                          const char *ca_key, char **cert, char **key,
                          struct kcr_errinfo *ei)
{
  EVP_PKEY *pk = NULL, *cak = NULL;
  X509 *x = NULL, *ca = NULL;
  X509_NAME *name;
  X509V3_CTX ctx;
  BIO *cb = NULL, *kb = NULL;
  unsigned char serial[16];
  BIGNUM *bn = NULL;
  char san[4096], cn[65];
  const char *step = "issuer";
  kcr_err rc = KCR_ENOMEM;
  bool ok;

  *cert = *key = NULL;
  /* A common name holds at most 64 bytes (RFC 5280's ub-common-name): cut
   * at a character's start. Clients check the subjectAltName. */
  size_t cnl = strlen(s->cn);
  if(cnl > 64)
    for(cnl = 64; cnl && ((unsigned char)s->cn[cnl] & 0xC0) == 0x80;)
      cnl--;
  snprintf(cn, sizeof(cn), "%.*s", (int)cnl, s->cn);
  if(!san_text(s, san, sizeof(san)))
    return kcr_errinfo_set(ei, KCR_EINVAL, "a certificate's names are longer than 4 KiB");
  if(ca_cert && (!(ca = pem_x509(ca_cert)) || !(cak = pem_key(ca_key)))) {
    rc = KCR_ECONFIG;
    goto out;
  }
  step = "key";
  if(!(pk = EVP_EC_gen("P-256")))
    goto out;
  step = "certificate";
  if(!(x = X509_new()) || RAND_bytes(serial, sizeof(serial)) != 1)
    goto out;
  serial[0] &= 0x7f; /* positive */
  ok = (bn = BN_bin2bn(serial, sizeof(serial), NULL)) &&
       BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(x)) && X509_set_version(x, 2) == 1 &&
       X509_gmtime_adj(X509_getm_notBefore(x), -3600) && /* clocks a little behind */
       X509_gmtime_adj(X509_getm_notAfter(x), s->lifetime_s) &&
       X509_set_pubkey(x, pk) == 1 && (name = X509_get_subject_name(x)) &&
       X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8, (const unsigned char *)cn,
                                  -1, -1, 0) == 1 &&
       X509_set_issuer_name(x, ca ? X509_get_subject_name(ca) : name) == 1;
  if(!ok)
    goto out;
  X509V3_set_ctx(&ctx, ca ? ca : x, x, NULL, NULL, 0);
  ok = (!san[0] || add_ext(&ctx, x, NID_subject_alt_name, san)) &&
       add_ext(&ctx, x, NID_subject_key_identifier, "hash") &&
       (!ca || add_ext(&ctx, x, NID_authority_key_identifier, "keyid:always")) &&
       (s->ca ? add_ext(&ctx, x, NID_basic_constraints, "critical,CA:TRUE") &&
                    add_ext(&ctx, x, NID_key_usage,
                            "critical,keyCertSign,cRLSign,"
                            "digitalSignature")
              : add_ext(&ctx, x, NID_basic_constraints, "critical,CA:FALSE") &&
                    add_ext(&ctx, x, NID_key_usage, "critical,digitalSignature") &&
                    add_ext(&ctx, x, NID_ext_key_usage, "serverAuth")) &&
       X509_sign(x, ca ? cak : pk, EVP_sha256()) > 0;
  if(!ok)
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
    if(rc == KCR_ECONFIG)
      kcr_errinfo_set(ei, rc, "the issuing CA's certificate or key is not PEM");
    else
      kcr_errinfo_set(ei, rc, "cannot make a TLS certificate (%s): %s", step,
                      ssl_reason(why, sizeof(why)));
    free(*cert);
    kcr__wipe_str(*key);
    *cert = *key = NULL;
  }
  BIO_free(cb);
  BIO_free(kb);
  BN_free(bn);
  X509_free(x);
  X509_free(ca);
  EVP_PKEY_free(pk);
  EVP_PKEY_free(cak);
  return rc;
}

kcr_err kcr__tlscert_self_signed(char **cert, char **key, struct kcr_errinfo *ei)
{
  static const char *const dns[] = {"localhost", NULL}, *const ips[] = {"127.0.0.1",
                                                                        NULL};
  struct kcr__certspec s = {
      .cn = "localhost", .dns = dns, .ips = ips, .lifetime_s = 365L * 24 * 3600};

  return kcr__tlscert_make(&s, NULL, NULL, cert, key, ei);
}

kcr_err kcr__tlscert_times(const char *pem, time_t *not_before, time_t *not_after)
{
  X509 *x = pem_x509(pem);
  struct tm nb, na;
  kcr_err rc = KCR_EPARSE;

  if(x && ASN1_TIME_to_tm(X509_get0_notBefore(x), &nb) == 1 &&
     ASN1_TIME_to_tm(X509_get0_notAfter(x), &na) == 1) {
    *not_before = timegm(&nb);
    *not_after = timegm(&na);
    rc = KCR_OK;
  }
  X509_free(x);
  return rc;
}

bool kcr__tlscert_issued_by(const char *leaf, const char *ca)
{
  X509 *l = pem_x509(leaf), *c = pem_x509(ca);
  EVP_PKEY *k = c ? X509_get0_pubkey(c) : NULL;
  bool ok = l && c && k && X509_check_issued(c, l) == X509_V_OK && X509_verify(l, k) == 1;

  X509_free(l);
  X509_free(c);
  ERR_clear_error();
  return ok;
}

bool kcr__tlscert_has_names(const char *pem, const char *const *dns,
                            const char *const *ips)
{
  X509 *x = pem_x509(pem);
  bool ok = x != NULL;

  for(; ok && dns && *dns; dns++)
    ok = X509_check_host(x, *dns, strlen(*dns), X509_CHECK_FLAG_NO_WILDCARDS, NULL) == 1;
  for(; ok && ips && *ips; ips++)
    ok = X509_check_ip_asc(x, *ips, 0) == 1;
  X509_free(x);
  ERR_clear_error();
  return ok;
}
