/* Secure metrics: the HTTP server over TLS (a given or self-signed
 * certificate) with /metrics behind TokenReview + SubjectAccessReview, the
 * reviews answered by a scripted API server (twire). Hostile Authorization
 * headers are refused without a review. The integration test
 * (tests/integration/test_metricsauth.c) does the same against a real
 * API server and real RBAC. */
#include <curl/curl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "core/secret-int.h"
#include "kcr/httpd.h"
#include "kcr/json.h"
#include "kcr/metrics.h"
#include "runtime/metricsauth-int.h"
#include "runtime/tlscert-int.h"
#include "tabort.h"
#include "tcheck.h"
#include "tfail.h"
#include "twire.h"

/* ---- the scripted API server --------------------------------------------- */

struct api {
  atomic_int tokenreviews, sars;
};

/* Tokens: "alice" and "bob" authenticate as themselves, "boom" fails the
 * TokenReview with a 500, anything else is not authenticated. Only alice
 * may get /metrics, and nothing else (no other verb, no other path). */
static kcr_err api(struct twire_call *call, void *ud)
{
  struct api *a = ud;
  cJSON *req = NULL;
  const char *tok, *user, *path, *verb;
  kcr_err rc;

  req = cJSON_ParseWithLength(call->req->body, call->req->body_len);
  if(twire_is(call, "POST", "/apis/authentication.k8s.io/v1/tokenreviews")) {
    atomic_fetch_add(&a->tokenreviews, 1);
    tok = kcr_json_str(req, "/spec/token");
    TCHECK(tok != NULL);
    if(tok && !strcmp(tok, "boom"))
      rc = twire_reply(call, 500, "%s", twire_status_json(500, "InternalError"));
    else if(tok && (!strcmp(tok, "alice") || !strcmp(tok, "bob")))
      rc = twire_reply(call, 201,
                       "{\"kind\":\"TokenReview\",\"status\":{\"authenticated\":true,"
                       "\"user\":{\"username\":\"%s\",\"uid\":\"u-%s\",\"groups\":"
                       "[\"system:authenticated\"],\"extra\":{\"k\":[\"v\"]}}}}",
                       tok, tok);
    else
      rc = twire_reply(call, 201,
                       "{\"kind\":\"TokenReview\",\"status\":{\"authenticated\":false,"
                       "\"error\":\"invalid bearer token\"}}");
  } else if(twire_is(call, "POST",
                     "/apis/authorization.k8s.io/v1/subjectaccessreviews")) {
    atomic_fetch_add(&a->sars, 1);
    user = kcr_json_str(req, "/spec/user");
    path = kcr_json_str(req, "/spec/nonResourceAttributes/path");
    verb = kcr_json_str(req, "/spec/nonResourceAttributes/verb");
    /* the user's groups, uid and extra travel with it */
    TCHECK(kcr_json_at(req, "/spec/groups") && kcr_json_str(req, "/spec/uid") &&
           kcr_json_at(req, "/spec/extra/k"));
    TCHECK(path && verb);
    rc = twire_reply(call, 201, "{\"status\":{\"allowed\":%s}}",
                     user && !strcmp(user, "alice") && path &&
                             !strcmp(path, "/metrics") && verb && !strcmp(verb, "get")
                         ? "true"
                         : "false");
  } else {
    rc = twire_reply(call, 404, "%s", twire_status_json(404, "NotFound"));
  }
  cJSON_Delete(req);
  return rc;
}

/* ---- an HTTPS client ----------------------------------------------------- */

struct reply {
  long code; /* 0: no HTTP answer */
  struct kcr_buf body;
};

static size_t on_data(char *p, size_t sz, size_t n, void *ud)
{
  return kcr_buf_append(ud, p, sz * n) ? 0 : sz * n;
}

/* method ("GET" or "HEAD") url with the header line hdr (NULL: none); ca:
 * verify against it (NULL: no verification, as a scraper of a self-signed
 * endpoint). */
static void request(const char *method, const char *url, const char *hdr, const char *ca,
                    struct reply *r)
{
  struct curl_slist *h = hdr ? curl_slist_append(NULL, hdr) : NULL;
  CURL *c = curl_easy_init();

  r->code = 0;
  r->body = (struct kcr_buf)KCR_BUF_INIT;
  assert_non_null(c);
  curl_easy_setopt(c, CURLOPT_URL, url);
  curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
  curl_easy_setopt(c, CURLOPT_TIMEOUT, 20L);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &r->body);
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
  if(!strcmp(method, "HEAD"))
    curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
  if(ca) {
    curl_easy_setopt(c, CURLOPT_CAINFO, ca);
  } else {
    curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 0L);
    curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 0L);
  }
  if(curl_easy_perform(c) == CURLE_OK)
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r->code);
  curl_easy_cleanup(c);
  curl_slist_free_all(h);
}

static void get(const char *url, const char *hdr, const char *ca, struct reply *r)
{
  request("GET", url, hdr, ca, r);
}

static void reply_cleanup(struct reply *r) { kcr_buf_cleanup(&r->body); }

/* ---- fixtures ------------------------------------------------------------ */

struct fx {
  struct api api;
  kcr_client *client;
  kcr_metrics *reg;
  kcr_httpd *h;
  char url[128], base[64];
};

static struct fx *fx_new(const struct kcr_httpd_tls *tls)
{
  struct fx *f = calloc(1, sizeof(*f));
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  kcr_err rc;

  assert_non_null(f);
  f->client = twire_client(api, &f->api);
  assert_int_equal(KCR_OK, kcr_metrics_new(NULL, &f->reg, NULL));
  {
    kcr_metric *things = NULL;
    assert_int_equal(KCR_OK,
                     kcr_metric_counter(f->reg,
                                        &(struct kcr_metric_opts){.name = "things_total",
                                                                  .help = "Things."},
                                        &things, NULL));
  }
  rc = kcr_httpd_new(&(struct kcr_httpd_opts){.addr = "127.0.0.1:0",
                                              .metrics = f->reg,
                                              .tls = *tls,
                                              .auth_client = f->client},
                     &f->h, &ei);
  if(rc)
    fail_msg("kcr_httpd_new: %s: %s", kcr_strerror(rc), ei.message);
  kcr_client_free(f->client); /* the server holds its own reference */
  assert_int_equal(KCR_OK, kcr_httpd_start(f->h, NULL));
  snprintf(f->base, sizeof(f->base), "127.0.0.1:%d", kcr_httpd_port(f->h));
  snprintf(f->url, sizeof(f->url), "https://%s/metrics", f->base);
  return f;
}

static void fx_free(struct fx *f)
{
  kcr_httpd_free(f->h);
  kcr_metrics_free(f->reg);
  free(f);
}

/* GET /metrics with hdr; checks the code, the body's start and how many
 * reviews it cost. */
static void expect(struct fx *f, const char *hdr, long code, const char *body,
                   int tokenreviews, int sars)
{
  int tr0 = atomic_load(&f->api.tokenreviews), sar0 = atomic_load(&f->api.sars);
  struct reply r;

  get(f->url, hdr, NULL, &r);
  if(r.code != code)
    fail_msg("%s: got %ld (%s), want %ld", hdr ? hdr : "(no header)", r.code,
             r.body.ptr ? r.body.ptr : "", code);
  if(body && (!r.body.ptr || strncmp(r.body.ptr, body, strlen(body))))
    fail_msg("%s: body \"%s\", want it to start \"%s\"", hdr ? hdr : "(none)",
             r.body.ptr ? r.body.ptr : "", body);
  assert_int_equal(tokenreviews, atomic_load(&f->api.tokenreviews) - tr0);
  assert_int_equal(sars, atomic_load(&f->api.sars) - sar0);
  reply_cleanup(&r);
}

/* ---- tests --------------------------------------------------------------- */

static bool always(void *ud, char *reason, size_t n) { return true; }

static void authorised_tokens_get_metrics_others_401_or_403(void **state)
{
  struct fx *f = fx_new(&(struct kcr_httpd_tls){.enabled = true});

  expect(f, NULL, 401, "Unauthorized\n", 0, 0);
  expect(f, "Authorization: Bearer alice", 200, "# HELP things_total", 1, 1);
  expect(f, "Authorization: Bearer alice", 200, "# HELP", 0, 0); /* cached */
  expect(f, "Authorization: bearer alice", 200, "# HELP", 0, 0); /* any case */
  expect(f, "Authorization: Bearer bob", 403, "Authorization denied for user bob\n", 1,
         1);
  expect(f, "Authorization: Bearer bob", 403, "Authorization denied", 0, 0);
  expect(f, "Authorization: Bearer mallory", 401, "Unauthorized\n", 1, 0);
  expect(f, "Authorization: Bearer mallory", 401, "Unauthorized\n", 0, 0);
  /* a failed review is a 500 and is not cached */
  expect(f, "Authorization: Bearer boom", 500, "Authentication failed\n", 1, 0);
  expect(f, "Authorization: Bearer boom", 500, "Authentication failed\n", 1, 0);
  fx_free(f);
}

/* An authenticated metrics server serves /metrics alone, over TLS only. */
static int post_handler(void *ud, const struct kcr_httpd_request *rq, struct kcr_buf *out,
                        const char **ctype)
{
  return 200;
}

static void only_metrics_and_only_over_tls(void **state)
{
  struct fx *f = fx_new(&(struct kcr_httpd_tls){.enabled = true});
  char url[128];
  struct reply r;

  kcr_httpd_add_healthz(f->h, "x", always, NULL);
  for(const char **p = (const char *[]){"/healthz", "/readyz", "/healthz/x", NULL}; *p;
      p++) {
    snprintf(url, sizeof(url), "https://%s%s", f->base, *p);
    get(url, "Authorization: Bearer alice", NULL, &r);
    assert_int_equal(404, r.code);
    reply_cleanup(&r);
  }
  snprintf(url, sizeof(url), "http://%s/metrics", f->base); /* plain: no answer */
  get(url, "Authorization: Bearer alice", NULL, &r);
  assert_true(r.code != 200);
  reply_cleanup(&r);
  assert_int_equal(0, atomic_load(&f->api.tokenreviews));
  /* nor does it take POST handlers, which would bypass the reviews */
  assert_int_equal(KCR_EINVAL,
                   kcr_httpd_add_handler(f->h, "/hook", 0, post_handler, NULL));
  fx_free(f);
}

/* Malformed headers cost no review: a 401 at once. */
static void hostile_authorization_headers_are_401_unreviewed(void **state)
{
  struct fx *f = fx_new(&(struct kcr_httpd_tls){.enabled = true});
  static const char *const bad[] = {
      "Authorization:",                    /* empty */
      "Authorization: Bearer",             /* no token */
      "Authorization: Bearer ",            /* empty token */
      "Authorization: Basic YWxpY2U6cHc=", /* another scheme */
      "Authorization: Bearer  alice",      /* two spaces */
      "Authorization: Bearer alice bob",   /* two words */
      "Authorization: Bearer al\x01ice",   /* a control character */
      "Authorization: Bearer al\x7f"
      "ice",                                 /* DEL */
      "Authorization: Bearer al\xc3\xa9ice", /* not ASCII */
      "Authorization: Beareralice",          /* no space */
      "Authorization: Token alice",
  };
  char *big = malloc(KCR__MAUTH_TOKEN_MAX + 64), *huge = malloc(200000);
  size_t n;

  for(size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
    expect(f, bad[i], 401, "Unauthorized\n", 0, 0);
  /* one byte over the limit: refused unreviewed */
  n = (size_t)snprintf(big, 64, "Authorization: Bearer ");
  memset(big + n, 'a', KCR__MAUTH_TOKEN_MAX + 1);
  big[n + KCR__MAUTH_TOKEN_MAX + 1] = '\0';
  expect(f, big, 401, "Unauthorized\n", 0, 0);
  /* at the limit: reviewed (and not authenticated) */
  big[n + KCR__MAUTH_TOKEN_MAX] = '\0';
  expect(f, big, 401, "Unauthorized\n", 1, 0);
  /* larger than the server's request memory: refused by the server */
  n = (size_t)snprintf(huge, 64, "Authorization: Bearer ");
  memset(huge + n, 'a', 200000 - n - 1);
  huge[200000 - 1] = '\0';
  {
    struct reply r;
    get(f->url, huge, NULL, &r);
    assert_true(r.code != 200 && r.code != 500);
    reply_cleanup(&r);
  }
  assert_int_equal(1, atomic_load(&f->api.tokenreviews));
  /* and the server still answers */
  expect(f, "Authorization: Bearer alice", 200, "# HELP", 1, 1);
  free(big);
  free(huge);
  fx_free(f);
}

/* The denials' cache holds KCR__MAUTH_CACHE_MAX tokens: more evict the
 * entry that expires first (the oldest), never grow it. */
static void cache_is_bounded(void **state)
{
  struct api a = {0};
  kcr_client *c = twire_client(api, &a);
  kcr__mauth *m;
  char hdr[64], msg[128];

  assert_int_equal(KCR_OK, kcr__mauth_new(c, &m));
  kcr_client_free(c);
  for(int i = 0; i <= KCR__MAUTH_CACHE_MAX; i++) {
    snprintf(hdr, sizeof(hdr), "Bearer t%d", i);
    assert_int_equal(401, kcr__mauth_check(m, "get", "/metrics", hdr, msg, sizeof(msg)));
  }
  assert_int_equal(KCR__MAUTH_CACHE_MAX + 1, atomic_load(&a.tokenreviews));
  /* the newest is cached, the oldest was evicted to make room */
  snprintf(hdr, sizeof(hdr), "Bearer t%d", KCR__MAUTH_CACHE_MAX);
  assert_int_equal(401, kcr__mauth_check(m, "get", "/metrics", hdr, msg, sizeof(msg)));
  assert_int_equal(KCR__MAUTH_CACHE_MAX + 1, atomic_load(&a.tokenreviews));
  assert_int_equal(401,
                   kcr__mauth_check(m, "get", "/metrics", "Bearer t0", msg, sizeof(msg)));
  assert_int_equal(KCR__MAUTH_CACHE_MAX + 2, atomic_load(&a.tokenreviews));
  assert_string_equal("Unauthorized", msg);
  /* an allowed token still goes through both reviews once */
  assert_int_equal(
      200, kcr__mauth_check(m, "get", "/metrics", "Bearer alice", msg, sizeof(msg)));
  assert_int_equal(
      200, kcr__mauth_check(m, "get", "/metrics", "Bearer alice", msg, sizeof(msg)));
  assert_int_equal(1, atomic_load(&a.sars));
  kcr__mauth_free(m);
}

/* A flood of made-up tokens (each a 401) only evicts other denials: a
 * caller allowed before it is still answered from the cache, without a
 * TokenReview or a SubjectAccessReview. */
static void flood_of_unknown_tokens_keeps_allowed_callers_cached(void **state)
{
  enum { FLOOD = 10000 };
  struct api a = {0};
  kcr_client *c = twire_client(api, &a);
  uint64_t x = 0x9e3779b97f4a7c15ull; /* xorshift64: random, and the same each run */
  kcr__mauth *m;
  char hdr[64], msg[128];

  assert_int_equal(KCR_OK, kcr__mauth_new(c, &m));
  kcr_client_free(c);
  assert_int_equal(
      200, kcr__mauth_check(m, "get", "/metrics", "Bearer alice", msg, sizeof(msg)));
  assert_int_equal(1, atomic_load(&a.tokenreviews));
  assert_int_equal(1, atomic_load(&a.sars));
  for(int i = 0; i < FLOOD; i++) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    snprintf(hdr, sizeof(hdr), "Bearer r%016llx", (unsigned long long)x);
    assert_int_equal(401, kcr__mauth_check(m, "get", "/metrics", hdr, msg, sizeof(msg)));
  }
  assert_int_equal(1 + FLOOD, atomic_load(&a.tokenreviews));
  assert_int_equal(
      200, kcr__mauth_check(m, "get", "/metrics", "Bearer alice", msg, sizeof(msg)));
  assert_int_equal(1 + FLOOD, atomic_load(&a.tokenreviews)); /* no new review */
  assert_int_equal(1, atomic_load(&a.sars));
  kcr__mauth_free(m);
}

/* An allowed answer is for its token, verb and path: another path or verb
 * is reviewed on its own (and here denied), also through the server (a
 * HEAD is the verb "head"), and the allowed answer stays cached. */
static void allowed_get_metrics_does_not_carry_over(void **state)
{
  struct api a = {0};
  kcr_client *c = twire_client(api, &a);
  kcr__mauth *m;
  struct fx *f;
  struct reply r;
  char msg[128];
  int tr;

  assert_int_equal(KCR_OK, kcr__mauth_new(c, &m));
  kcr_client_free(c);
  assert_int_equal(
      200, kcr__mauth_check(m, "get", "/metrics", "Bearer alice", msg, sizeof(msg)));
  assert_int_equal(1, atomic_load(&a.sars));
  assert_int_equal(
      403, kcr__mauth_check(m, "get", "/debug/pprof", "Bearer alice", msg, sizeof(msg)));
  assert_string_equal("Authorization denied for user alice", msg);
  assert_int_equal(2, atomic_load(&a.sars)); /* its own review */
  assert_int_equal(
      403, kcr__mauth_check(m, "head", "/metrics", "Bearer alice", msg, sizeof(msg)));
  assert_int_equal(3, atomic_load(&a.sars));
  tr = atomic_load(&a.tokenreviews);
  /* each answer is cached for its own request */
  assert_int_equal(
      200, kcr__mauth_check(m, "get", "/metrics", "Bearer alice", msg, sizeof(msg)));
  assert_int_equal(
      403, kcr__mauth_check(m, "get", "/debug/pprof", "Bearer alice", msg, sizeof(msg)));
  assert_int_equal(tr, atomic_load(&a.tokenreviews));
  assert_int_equal(3, atomic_load(&a.sars));
  kcr__mauth_free(m);

  f = fx_new(&(struct kcr_httpd_tls){.enabled = true});
  expect(f, "Authorization: Bearer alice", 200, "# HELP", 1, 1);
  request("HEAD", f->url, "Authorization: Bearer alice", NULL, &r);
  assert_int_equal(403, r.code);
  assert_int_equal(2, atomic_load(&f->api.sars));
  reply_cleanup(&r);
  fx_free(f);
}

/* Debug builds check the checker's preconditions (KCR_ASSERT): a message
 * buffer without room for its NUL aborts instead of being written past. */
static void check_into_an_empty_buffer(void *ud)
{
  struct api a = {0};
  kcr_client *c = twire_client(api, &a);
  kcr__mauth *m;
  char msg[1];

  if(kcr__mauth_new(c, &m))
    return;
  kcr__mauth_check(m, "get", "/metrics", NULL, msg, 0);
}

static void broken_invariants_abort_debug_builds(void **state)
{
  TABORT_SKIP_IN_RELEASE();
  assert_true(tabort(check_into_an_empty_buffer, NULL));
}

static char *write_tmp(const char *text)
{
  char *path = strdup("/tmp/kcr-test-tls-XXXXXX");
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  assert_int_equal((ssize_t)strlen(text), write(fd, text, strlen(text)));
  close(fd);
  return path;
}

/* A certificate from files: served, and verifiable with it as the CA. */
static void serves_a_given_certificate(void **state)
{
  char *cert, *key, *cert2, *key2, *cf, *kf, *kf2, *junk;
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  struct reply r;
  kcr_httpd *h = NULL;
  struct fx *f;

  assert_int_equal(KCR_OK, kcr__tlscert_self_signed(&cert, &key, NULL));
  assert_int_equal(KCR_OK, kcr__tlscert_self_signed(&cert2, &key2, NULL));
  cf = write_tmp(cert);
  kf = write_tmp(key);
  kf2 = write_tmp(key2);
  junk = write_tmp("not PEM\n");
  f = fx_new(&(struct kcr_httpd_tls){.enabled = true, .cert_file = cf, .key_file = kf});
  get(f->url, "Authorization: Bearer alice", cf, &r); /* verified */
  assert_int_equal(200, r.code);
  reply_cleanup(&r);
  fx_free(f);

  /* errors name the file */
#define BAD(want, ...)                                                                   \
  do {                                                                                   \
    kcr_err rc_ = kcr_httpd_new(                                                         \
        &(struct kcr_httpd_opts){.addr = "127.0.0.1:0", .tls = {__VA_ARGS__}}, &h, &ei); \
    assert_int_equal(want, rc_);                                                         \
    assert_null(h);                                                                      \
    assert_non_null(ei.message);                                                         \
    kcr_errinfo_cleanup(&ei);                                                            \
  } while(0)
  BAD(KCR_EINVAL, .enabled = true, .cert_file = cf);
  BAD(KCR_EINVAL, .cert_file = cf, .key_file = kf);
  BAD(KCR_EIO, .enabled = true, .cert_file = "/nonexistent/tls.crt", .key_file = kf);
  BAD(KCR_ECONFIG, .enabled = true, .cert_file = junk, .key_file = kf);
  BAD(KCR_ECONFIG, .enabled = true, .cert_file = cf, .key_file = junk);
  BAD(KCR_ECONFIG, .enabled = true, .cert_file = cf, .key_file = kf2); /* not its key */
  assert_int_equal(KCR_ECONFIG,
                   kcr_httpd_new(
                       &(struct kcr_httpd_opts){
                           .addr = "127.0.0.1:0",
                           .tls = {.enabled = true, .cert_file = cf, .key_file = kf2}},
                       &h, &ei));
  assert_non_null(strstr(ei.message, kf2));
  kcr_errinfo_cleanup(&ei);
#undef BAD
  for(char **p = (char *[]){cf, kf, kf2, junk, NULL}; *p; p++) {
    unlink(*p);
    free(*p);
  }
  free(cert);
  free(cert2);
  kcr__wipe_str(key);
  kcr__wipe_str(key2);
}

static bool new_tls_server(void *ud)
{
  kcr_httpd *h = NULL;
  kcr_err rc = kcr_httpd_new(
      &(struct kcr_httpd_opts){.addr = "127.0.0.1:0", .tls = {.enabled = true}}, &h,
      NULL);
  bool ok = rc ? !h && (rc == KCR_ENOMEM) : h != NULL;
  kcr_httpd_free(h);
  return ok;
}

static void tls_setup_survives_allocation_failures(void **state)
{
  tfail_torture("kcr_httpd_new with TLS", new_tls_server, NULL);
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
      cmocka_unit_test(authorised_tokens_get_metrics_others_401_or_403),
      cmocka_unit_test(only_metrics_and_only_over_tls),
      cmocka_unit_test(hostile_authorization_headers_are_401_unreviewed),
      cmocka_unit_test(cache_is_bounded),
      cmocka_unit_test(flood_of_unknown_tokens_keeps_allowed_callers_cached),
      cmocka_unit_test(allowed_get_metrics_does_not_carry_over),
      cmocka_unit_test(broken_invariants_abort_debug_builds),
      cmocka_unit_test(serves_a_given_certificate),
      cmocka_unit_test(tls_setup_survives_allocation_failures),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
