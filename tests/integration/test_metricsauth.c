/* Secure metrics against the real kube-apiserver and its RBAC: the HTTP
 * server over HTTPS (self-signed) with /metrics behind TokenReview and
 * SubjectAccessReview. Two ServiceAccounts with TokenRequest tokens, one
 * bound to a metrics-reader ClusterRole (nonResourceURLs /metrics, get, as
 * config/rbac/metrics_reader_role.yaml): no token and a garbage token get
 * 401, the unbound account 403, the bound one 200 and the metrics; every
 * answer is cached, so repeated scrapes make no further reviews (requests
 * counted on the review client). A HEAD by the bound account is the verb
 * `head`, which the role does not grant: reviewed on its own and denied.
 * After a flood of made-up tokens the bound account is still answered from
 * the cache. */
#include <curl/curl.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "itest.h"
#include "kcr/httpd.h"
#include "kcr/metrics.h"

static const struct kcr_gvr sas = {"", "v1", "serviceaccounts", true};
static const struct kcr_gvr croles = {"rbac.authorization.k8s.io", "v1", "clusterroles",
                                      false};
static const struct kcr_gvr crbs = {"rbac.authorization.k8s.io", "v1",
                                    "clusterrolebindings", false};
static const struct kcr_gvr sars = {"authorization.k8s.io", "v1", "subjectaccessreviews",
                                    false};

static kcr_client *cl;
static char *ns;
static atomic_int posts; /* requests the review client made */

static int setup(void **state)
{
  cl = itest_client();
  ns = itest_namespace(cl, "mauth");
  return curl_global_init(CURL_GLOBAL_DEFAULT) ? -1 : 0;
}

static int teardown(void **state)
{
  itest_done(cl, ns);
  curl_global_cleanup();
  return 0;
}

static void count(const char *method, long code, double secs, void *ud)
{
  if(!strcmp(method, "POST"))
    atomic_fetch_add(&posts, 1);
}

static void create(const struct kcr_gvr *gvr, const char *ns_, const char *json)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  cJSON *obj = itest_json("%s", json);
  itest_expect(KCR_OK, kcr_create(cl, &(struct kcr_ref){gvr, ns_}, obj, NULL, NULL, &ei),
               &ei);
  cJSON_Delete(obj);
  kcr_errinfo_cleanup(&ei);
}

static void drop(const struct kcr_gvr *gvr, const char *name)
{
  (void)kcr_delete(cl, &(struct kcr_ref){gvr, NULL, name}, NULL, NULL, NULL);
}

/* A ServiceAccount and a token for it (TokenRequest); caller frees. */
static char *sa_token(const char *name)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  struct kcr_http_response resp = {0};
  char path[256], sa[256];
  const char *body = "{\"apiVersion\":\"authentication.k8s.io/v1\",\"kind\":"
                     "\"TokenRequest\",\"spec\":{\"expirationSeconds\":600}}";
  cJSON *got;
  char *tok;

  snprintf(sa, sizeof(sa), "{\"metadata\":{\"name\":\"%s\"}}", name);
  create(&sas, ns, sa);
  snprintf(path, sizeof(path), "/api/v1/namespaces/%s/serviceaccounts/%s/token", ns,
           name);
  itest_expect(KCR_OK,
               kcr_client_do(cl,
                             &(struct kcr_http_request){.method = "POST",
                                                        .path = path,
                                                        .body = body,
                                                        .body_len = strlen(body)},
                             &resp, &ei),
               &ei);
  got = cJSON_ParseWithLength(resp.body.ptr, resp.body.len);
  assert_non_null(kcr_json_str(got, "/status/token"));
  tok = strdup(kcr_json_str(got, "/status/token"));
  cJSON_Delete(got);
  kcr_buf_cleanup(&resp.body);
  kcr_errinfo_cleanup(&ei);
  return tok;
}

/* Does RBAC (as the authorizer sees it now) let user get /metrics? */
static bool allowed(const char *user)
{
  cJSON *req = itest_json("{\"apiVersion\":\"authorization.k8s.io/v1\",\"kind\":"
                          "\"SubjectAccessReview\",\"spec\":{\"user\":\"%s\","
                          "\"nonResourceAttributes\":{\"path\":\"/metrics\",\"verb\":"
                          "\"get\"}}}",
                          user),
        *got = NULL;
  bool ok;
  assert_int_equal(KCR_OK,
                   kcr_create(cl, &(struct kcr_ref){&sars}, req, NULL, &got, NULL));
  ok = cJSON_IsTrue(kcr_json_at(got, "/status/allowed"));
  cJSON_Delete(req);
  cJSON_Delete(got);
  return ok;
}

static size_t on_data(char *p, size_t sz, size_t n, void *ud)
{
  return kcr_buf_append(ud, p, sz * n) ? 0 : sz * n;
}

/* method ("GET" or "HEAD") /metrics as token; expects code, and that it
 * cost `reviews` POSTs. */
static void expect_method(const char *method, const char *url, const char *token,
                          long code, int reviews, const char *what)
{
  struct kcr_buf body = KCR_BUF_INIT;
  struct curl_slist *h = NULL;
  char hdr[4096];
  int before = atomic_load(&posts);
  CURL *c = curl_easy_init();
  long got = 0;

  if(token) {
    snprintf(hdr, sizeof(hdr), "Authorization: Bearer %s", token);
    h = curl_slist_append(NULL, hdr);
  }
  curl_easy_setopt(c, CURLOPT_URL, url);
  curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
  curl_easy_setopt(c, CURLOPT_TIMEOUT, 30L);
  curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 0L); /* self-signed */
  curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 0L);
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &body);
  if(!strcmp(method, "HEAD"))
    curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
  if(curl_easy_perform(c) == CURLE_OK)
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &got);
  curl_easy_cleanup(c);
  curl_slist_free_all(h);
  if(got != code)
    fail_msg("%s: HTTP %ld (%s), want %ld", what, got, body.ptr ? body.ptr : "", code);
  if(code == 200 && !strcmp(method, "GET") &&
     !(body.ptr && strstr(body.ptr, "# TYPE itest_scrapes_total counter")))
    fail_msg("%s: no metrics in the answer: %s", what, body.ptr ? body.ptr : "");
  if(atomic_load(&posts) - before != reviews)
    fail_msg("%s: %d review requests, want %d", what, atomic_load(&posts) - before,
             reviews);
  kcr_buf_cleanup(&body);
}

static void expect(const char *url, const char *token, long code, int reviews,
                   const char *what)
{
  expect_method("GET", url, token, code, reviews, what);
}

/* GETs /metrics n times, each with a new made-up token (one connection):
 * each must be 401 and cost one TokenReview. */
static void flood(const char *url, int n)
{
  struct kcr_buf sink = KCR_BUF_INIT;
  int before = atomic_load(&posts);
  CURL *c = curl_easy_init();
  char hdr[128];

  curl_easy_setopt(c, CURLOPT_URL, url);
  curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
  curl_easy_setopt(c, CURLOPT_TIMEOUT, 30L);
  curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 0L); /* self-signed */
  curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 0L);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &sink);
  for(int i = 0; i < n; i++) {
    struct curl_slist *h;
    long got = 0;
    snprintf(hdr, sizeof(hdr), "Authorization: Bearer made-up-%d-%08x", i,
             (unsigned)rand());
    h = curl_slist_append(NULL, hdr);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    if(curl_easy_perform(c) == CURLE_OK)
      curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &got);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, NULL);
    curl_slist_free_all(h);
    if(got != 401)
      fail_msg("flood token %d: HTTP %ld, want 401", i, got);
    kcr_buf_reset(&sink);
  }
  curl_easy_cleanup(c);
  kcr_buf_cleanup(&sink);
  assert_int_equal(n, atomic_load(&posts) - before);
}

static void only_authorised_service_accounts_read_metrics(void **state)
{
  char role[128], binding[512], reader_user[256], url[128];
  char *reader, *stranger;
  kcr_client *rc_client = NULL;
  kcr_metrics *reg = NULL;
  kcr_httpd *h = NULL;
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;

  snprintf(role, sizeof(role), "%s-metrics-reader", ns);
  {
    char json[512];
    snprintf(json, sizeof(json),
             "{\"metadata\":{\"name\":\"%s\"},\"rules\":[{\"nonResourceURLs\":"
             "[\"/metrics\"],\"verbs\":[\"get\"]}]}",
             role);
    create(&croles, NULL, json);
  }
  reader = sa_token("reader");
  stranger = sa_token("stranger");
  snprintf(binding, sizeof(binding),
           "{\"metadata\":{\"name\":\"%s\"},\"roleRef\":{\"apiGroup\":"
           "\"rbac.authorization.k8s.io\",\"kind\":\"ClusterRole\",\"name\":\"%s\"},"
           "\"subjects\":[{\"kind\":\"ServiceAccount\",\"name\":\"reader\","
           "\"namespace\":\"%s\"}]}",
           role, role, ns);
  create(&crbs, NULL, binding);
  /* RBAC reaches the authorizer through its informer: wait for it, so the
   * server's first review sees the binding (a denial would be cached). */
  snprintf(reader_user, sizeof(reader_user), "system:serviceaccount:%s:reader", ns);
  for(int i = 0; i < 100 && !allowed(reader_user); i++)
    itest_sleep_ms(100);
  assert_true(allowed(reader_user));

  itest_expect(KCR_OK,
               kcr_client_new(&(struct kcr_client_opts){.config = kcr_client_config(cl),
                                                        .observe = count},
                              &rc_client, &ei),
               &ei);
  assert_int_equal(KCR_OK, kcr_metrics_new(NULL, &reg, NULL));
  {
    kcr_metric *scrapes = NULL;
    itest_expect(
        KCR_OK,
        kcr_metric_counter(
            reg,
            &(struct kcr_metric_opts){.name = "itest_scrapes_total", .help = "Scrapes."},
            &scrapes, &ei),
        &ei);
  }
  itest_expect(KCR_OK,
               kcr_httpd_new(&(struct kcr_httpd_opts){.addr = "127.0.0.1:0",
                                                      .metrics = reg,
                                                      .tls = {.enabled = true},
                                                      .auth_client = rc_client},
                             &h, &ei),
               &ei);
  kcr_client_free(rc_client);
  itest_expect(KCR_OK, kcr_httpd_start(h, &ei), &ei);
  snprintf(url, sizeof(url), "https://127.0.0.1:%d/metrics", kcr_httpd_port(h));

  expect(url, NULL, 401, 0, "no token");
  expect(url, "garbage", 401, 1, "a garbage token");
  expect(url, "garbage", 401, 0, "the garbage token again (cached)");
  expect(url, stranger, 403, 2, "the unbound ServiceAccount");
  expect(url, stranger, 403, 0, "the unbound ServiceAccount again (cached)");
  expect(url, reader, 200, 2, "the bound ServiceAccount");
  for(int i = 0; i < 5; i++)
    expect(url, reader, 200, 0, "the bound ServiceAccount again (cached)");
  expect_method("HEAD", url, reader, 403, 2, "HEAD as the bound ServiceAccount");
  expect_method("HEAD", url, reader, 403, 0, "HEAD again (cached)");
  expect(url, reader, 200, 0, "the bound ServiceAccount after a HEAD (cached)");
  /* twice as many made-up tokens as the cache holds denials */
  flood(url, 2048);
  expect(url, reader, 200, 0, "the bound ServiceAccount after a flood (cached)");

  kcr_httpd_free(h);
  kcr_metrics_free(reg);
  drop(&crbs, role);
  drop(&croles, role);
  free(reader);
  free(stranger);
  kcr_errinfo_cleanup(&ei);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(only_authorised_service_accounts_read_metrics),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
