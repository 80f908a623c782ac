/* The HTTPS server's certificate, replaced while it serves: the files
 * reloaded when they change (as a Secret volume's update replaces them),
 * a pair that does not load keeping the served one, kcr_httpd_set_cert,
 * requests in flight and handshakes going on while certificates change.
 * The served certificate is read from the handshake with libcurl's
 * CURLOPT_CERTINFO. */
#include <curl/curl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/secret-int.h"
#include "kcr/httpd.h"
#include "runtime/tlscert-int.h"
#include "tfail.h"

struct pair {
  char *cert, *key;
};

static struct pair make_pair(void)
{
  struct pair p;
  assert_int_equal(KCR_OK, kcr__tlscert_self_signed(&p.cert, &p.key, NULL));
  return p;
}

static void pair_free(struct pair *p)
{
  free(p->cert);
  kcr__wipe_str(p->key);
}

/* Writes text to path through a new file renamed over it (a new inode, as
 * the kubelet's atomic writer does). */
static void replace_file(const char *path, const char *text)
{
  char tmp[600];
  FILE *f;

  snprintf(tmp, sizeof(tmp), "%s.new", path);
  assert_non_null(f = fopen(tmp, "w"));
  assert_int_equal(strlen(text), fwrite(text, 1, strlen(text), f));
  assert_int_equal(0, fclose(f));
  assert_int_equal(0, rename(tmp, path));
}

static size_t sink(char *p, size_t sz, size_t n, void *ud) { return sz * n; }

/* The base64 body of a PEM certificate, without line breaks. */
static void pem_body(const char *pem, char *out, size_t n)
{
  const char *p = strstr(pem, "-----\n"), *end = strstr(pem, "-----END");
  size_t k = 0;

  assert_non_null(p);
  assert_non_null(end);
  for(p += 6; p < end && k + 1 < n; p++)
    if(*p != '\n' && *p != '\r')
      out[k++] = *p;
  out[k] = '\0';
}

/* GETs /healthz over a new TLS connection and returns true when the
 * certificate served is want's (HTTP 200 too). */
static bool serves(int port, const char *want)
{
  CURL *c = curl_easy_init();
  struct curl_certinfo *ci = NULL;
  char url[128], body[8192], got[8192] = "";
  long code = 0;
  bool ok = false;

  if(!c)
    return false;
  pem_body(want, body, sizeof(body));
  snprintf(url, sizeof(url), "https://127.0.0.1:%d/healthz", port);
  curl_easy_setopt(c, CURLOPT_URL, url);
  curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
  curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 0L);
  curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 0L);
  curl_easy_setopt(c, CURLOPT_CERTINFO, 1L);
  curl_easy_setopt(c, CURLOPT_TIMEOUT, 10L);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, sink);
  if(curl_easy_perform(c) == CURLE_OK &&
     curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code) == CURLE_OK && code == 200 &&
     curl_easy_getinfo(c, CURLINFO_CERTINFO, &ci) == CURLE_OK && ci && ci->num_of_certs) {
    for(struct curl_slist *s = ci->certinfo[0]; s; s = s->next)
      if(!strncmp(s->data, "Cert:", 5))
        pem_body(s->data + 5, got, sizeof(got));
    ok = !strcmp(got, body);
  }
  curl_easy_cleanup(c);
  return ok;
}

/* Waits (at most 10 s) until the server serves want. */
static bool comes_to_serve(int port, const char *want)
{
  for(int i = 0; i < 200; i++) {
    if(serves(port, want))
      return true;
    usleep(50000);
  }
  return false;
}

struct fx {
  char dir[64], cert[128], key[128];
  kcr_httpd *h;
  int port;
};

static void fx_start(struct fx *f, const struct pair *p)
{
  snprintf(f->dir, sizeof(f->dir), "/tmp/kcr-tls-XXXXXX");
  assert_non_null(mkdtemp(f->dir));
  snprintf(f->cert, sizeof(f->cert), "%s/tls.crt", f->dir);
  snprintf(f->key, sizeof(f->key), "%s/tls.key", f->dir);
  replace_file(f->cert, p->cert);
  replace_file(f->key, p->key);
  struct kcr_httpd_opts o = {
      .addr = "127.0.0.1:0",
      .tls = {
          .enabled = true, .cert_file = f->cert, .key_file = f->key, .reload_ms = 100}};
  assert_int_equal(KCR_OK, kcr_httpd_new(&o, &f->h, NULL));
  assert_int_equal(KCR_OK, kcr_httpd_start(f->h, NULL));
  f->port = kcr_httpd_port(f->h);
}

static void fx_stop(struct fx *f)
{
  char cmd[128];
  kcr_httpd_free(f->h);
  snprintf(cmd, sizeof(cmd), "rm -rf %s", f->dir);
  assert_int_equal(0, system(cmd));
}

static void changed_files_are_served_without_a_restart(void **state)
{
  struct pair a = make_pair(), b = make_pair(), c = make_pair();
  struct fx f;

  fx_start(&f, &a);
  assert_true(serves(f.port, a.cert));
  /* a new pair: served from a handshake after reload_ms */
  replace_file(f.cert, b.cert);
  replace_file(f.key, b.key);
  assert_true(comes_to_serve(f.port, b.cert));
  /* half an update (a certificate without its key): the served pair stays */
  replace_file(f.cert, c.cert);
  usleep(300000);
  assert_true(serves(f.port, b.cert));
  assert_true(serves(f.port, b.cert));
  /* the rest of the update: the new pair */
  replace_file(f.key, c.key);
  assert_true(comes_to_serve(f.port, c.cert));
  /* garbage in the files: kept */
  replace_file(f.cert, "not a certificate");
  usleep(300000);
  assert_true(serves(f.port, c.cert));
  fx_stop(&f);
  pair_free(&a);
  pair_free(&b);
  pair_free(&c);
}

static void set_cert_serves_a_given_pair(void **state)
{
  struct pair a = make_pair(), b = make_pair();
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  kcr_httpd *plain = NULL;
  struct fx f;

  fx_start(&f, &a);
  assert_int_equal(KCR_OK, kcr_httpd_set_cert(f.h, b.cert, b.key, &ei));
  assert_true(serves(f.port, b.cert));
  /* a key that is not the certificate's: refused, b still served */
  assert_int_equal(KCR_ECONFIG, kcr_httpd_set_cert(f.h, a.cert, b.key, &ei));
  assert_non_null(strstr(ei.message, "not the key"));
  kcr_errinfo_cleanup(&ei);
  assert_int_equal(KCR_ECONFIG, kcr_httpd_set_cert(f.h, "x", b.key, &ei));
  kcr_errinfo_cleanup(&ei);
  assert_true(serves(f.port, b.cert));
  assert_int_equal(KCR_EINVAL, kcr_httpd_set_cert(f.h, NULL, b.key, NULL));
  /* a plain server has no certificate to set */
  assert_int_equal(KCR_OK, kcr_httpd_new(&(struct kcr_httpd_opts){.addr = "127.0.0.1:0"},
                                         &plain, NULL));
  assert_int_equal(KCR_EINVAL, kcr_httpd_set_cert(plain, b.cert, b.key, &ei));
  kcr_errinfo_cleanup(&ei);
  kcr_httpd_free(plain);
  fx_stop(&f);
  pair_free(&a);
  pair_free(&b);
}

/* ---- requests go on while certificates change ----------------------------- */

static atomic_bool in_handler;

static int slow(void *ud, const struct kcr_httpd_request *rq, struct kcr_buf *out,
                const char **ctype)
{
  atomic_store(&in_handler, true);
  usleep(500000);
  kcr_buf_puts(out, "{}");
  return 200;
}

struct client {
  int port;
  long code;
  int ok; /* handshakes that succeeded */
  int n;
};

static void *post_slow(void *p)
{
  struct client *cl = p;
  CURL *c = curl_easy_init();
  char url[128];

  snprintf(url, sizeof(url), "https://127.0.0.1:%d/slow", cl->port);
  curl_easy_setopt(c, CURLOPT_URL, url);
  curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
  curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 0L);
  curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 0L);
  curl_easy_setopt(c, CURLOPT_POSTFIELDS, "{}");
  curl_easy_setopt(c, CURLOPT_TIMEOUT, 10L);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, sink);
  if(curl_easy_perform(c) == CURLE_OK)
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &cl->code);
  curl_easy_cleanup(c);
  return NULL;
}

/* n new connections, one after the other, counting the answered ones. */
static void *handshakes(void *p)
{
  struct client *cl = p;
  char url[128];

  snprintf(url, sizeof(url), "https://127.0.0.1:%d/healthz", cl->port);
  for(int i = 0; i < cl->n; i++) {
    CURL *c = curl_easy_init();
    long code = 0;
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
    curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 0L);
    curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 0L);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 10L);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, sink);
    if(curl_easy_perform(c) == CURLE_OK &&
       curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code) == CURLE_OK && code == 200)
      cl->ok++;
    curl_easy_cleanup(c);
  }
  return NULL;
}

static void requests_go_on_while_the_certificate_changes(void **state)
{
  struct pair p[4] = {make_pair(), make_pair(), make_pair(), make_pair()};
  struct client slow_cl = {0}, hs = {.n = 40};
  pthread_t t1, t2;
  struct fx f;

  fx_start(&f, &p[0]);
  assert_int_equal(KCR_OK, kcr_httpd_add_handler(f.h, "/slow", 0, slow, NULL));
  slow_cl.port = hs.port = f.port;
  assert_int_equal(0, pthread_create(&t1, NULL, post_slow, &slow_cl));
  assert_int_equal(0, pthread_create(&t2, NULL, handshakes, &hs));
  while(!atomic_load(&in_handler))
    usleep(1000);
  /* swapped while a request is being answered and handshakes go on */
  for(int i = 0; i < 200; i++)
    assert_int_equal(KCR_OK,
                     kcr_httpd_set_cert(f.h, p[1 + i % 3].cert, p[1 + i % 3].key, NULL));
  pthread_join(t1, NULL);
  pthread_join(t2, NULL);
  assert_int_equal(200, slow_cl.code);
  assert_int_equal(hs.n, hs.ok);
  assert_true(serves(f.port, p[1 + 199 % 3].cert));
  fx_stop(&f);
  for(int i = 0; i < 4; i++)
    pair_free(&p[i]);
}

static int setup(void **state) { return curl_global_init(CURL_GLOBAL_DEFAULT) ? -1 : 0; }

static int teardown(void **state)
{
  curl_global_cleanup();
  return 0;
}

int main(void)
{
  tfail_init();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(changed_files_are_served_without_a_restart),
      cmocka_unit_test(set_cert_serves_a_given_pair),
      cmocka_unit_test(requests_go_on_while_the_certificate_changes),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
