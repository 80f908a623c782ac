/* Who may read /metrics (runtime/metricsauth.c): kcr__mauth_check with an
 * Authorization header and the API server's TokenReview and
 * SubjectAccessReview answers from the input, through the client's wire
 * seam (src/kube/client-int.h). The header is what anyone who can reach
 * the metrics port sends.
 *
 * Input: byte 0 picks the TokenReview's HTTP code and whether its
 * connection fails, byte 1 the same for the SubjectAccessReview; then the
 * header value up to the first '\n'; then the TokenReview's answer body up
 * to the first NUL byte; the rest is the SubjectAccessReview's.
 * Checked:
 *  - the answer is 200, 401, 403 or 500, with the message cut to the
 *    caller's buffer and NUL-terminated (a canary after it stays);
 *  - a header that is not "Bearer" (any case), one space and 1..8192
 *    visible ASCII characters is 401 with no request (a model of the
 *    rule); a well-formed one is sent, exactly, in a TokenReview;
 *  - a SubjectAccessReview is made only for a user the TokenReview
 *    authenticated, for `get` on the path, naming that user;
 *  - 200 only when the TokenReview authenticated the user and the
 *    SubjectAccessReview allowed; 403 only when it answered and did not;
 *  - asked again, an answer other than 500 is the same and comes from the
 *    cache (no request). */
#include "fuzz.h"
#include "kube/client-int.h"
#include "runtime/metricsauth-int.h"

#define TR_PATH  "/apis/authentication.k8s.io/v1/tokenreviews"
#define SAR_PATH "/apis/authorization.k8s.io/v1/subjectaccessreviews"

static kcr_client *client;

/* One review's scripted answer, and what was asked. */
struct answer {
  long code;
  bool fail;
  const char *body;
  size_t len;
  unsigned calls;
  cJSON *request; /* the last request body, parsed */
};

struct run {
  struct answer tr, sar;
};

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  kcr_config *cfg;

  fuzz_quiet();
  cfg = fuzz_config();
  if(/* no 429/503 retries: one answer per review (a Status body's code
      * counts, so any answer could be one; retries are the client's, and
      * fuzzed with its other callers) */
     kcr_client_new(&(struct kcr_client_opts){.config = cfg, .max_retries = -1}, &client,
                    &ei)) {
    fprintf(stderr, "fuzz_mauth: %s\n", ei.message ? ei.message : "set-up failed");
    abort();
  }
  kcr_config_free(cfg);
  return 0;
}

static kcr_err wire(void *ud, const struct kcr__wire_request *req, long *code,
                    long *retry_after_s, kcr__wire_write write, void *wctx,
                    struct kcr_errinfo *ei)
{
  struct run *r = ud;
  struct answer *a = NULL;

  FUZZ_CHECK(!req->watch && !strcmp(req->method, "POST"));
  if(!strcmp(req->path, TR_PATH))
    a = &r->tr;
  else if(!strcmp(req->path, SAR_PATH))
    a = &r->sar;
  FUZZ_CHECK(a != NULL);
  a->calls++;
  cJSON_Delete(a->request);
  a->request = NULL;
  FUZZ_CHECK(kcr_json_parse(req->body, req->body_len, &a->request, NULL) == KCR_OK);
  if(a->fail)
    return kcr_errinfo_set(ei, KCR_ETRANSPORT, "fuzz: connection reset");
  *code = a->code;
  if(a->len)
    write(a->body, a->len, wctx);
  return KCR_OK;
}

/* The rule of metricsauth.c, written the obvious way. */
static bool well_formed(const char *h, const char **tok)
{
  size_t n;

  if(strncasecmp(h, "Bearer ", 7))
    return false;
  *tok = h + 7;
  n = strlen(*tok);
  if(!n || n > KCR__MAUTH_TOKEN_MAX)
    return false;
  for(size_t i = 0; i < n; i++)
    if((unsigned char)(*tok)[i] <= 0x20 || (unsigned char)(*tok)[i] >= 0x7f)
      return false;
  return true;
}

static const char *or_empty(const char *s) { return s ? s : ""; }

/* What a 2xx answer body says at path (NULL: not a 2xx answer, not JSON). */
static const cJSON *answered(const struct answer *a, cJSON **tree, const char *path)
{
  if(a->fail || a->code < 200 || a->code > 299 || !a->calls)
    return NULL;
  /* as the client parses it: of members of one name the last counts */
  if(!*tree && kcr_json_parse(a->body, a->len, tree, NULL))
    *tree = NULL;
  return kcr_json_at(*tree, path);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  static const long codes[] = {201, 201, 201, 200, 400, 401, 403, 500};
  struct run r = {{0}};
  const uint8_t *nl, *nul, *end = data + size;
  char *header, msg[48 + 1];
  const char *tok = NULL;
  cJSON *trt = NULL, *sart = NULL;
  kcr__mauth *m = NULL;
  bool wf;
  int code, again;

  if(size < 2)
    return 0;
  r.tr.code = codes[data[0] & 7];
  r.tr.fail = (data[0] & 0x38) == 0x38; /* 1 in 8 */
  r.sar.code = codes[data[1] & 7];
  r.sar.fail = (data[1] & 0x38) == 0x38;
  data += 2;
  nl = memchr(data, '\n', (size_t)(end - data));
  header = fuzz_str(data, nl ? (size_t)(nl - data) : (size_t)(end - data));
  data = nl ? nl + 1 : end;
  nul = memchr(data, '\0', (size_t)(end - data));
  r.tr.body = (const char *)data;
  r.tr.len = nul ? (size_t)(nul - data) : (size_t)(end - data);
  r.sar.body = nul ? (const char *)nul + 1 : "";
  r.sar.len = nul ? (size_t)(end - nul - 1) : 0;

  kcr__client_set_wire(client, wire, &r);
  FUZZ_CHECK(kcr__mauth_new(client, &m) == KCR_OK);
  msg[48] = 'X';
  code = kcr__mauth_check(m, "get", "/metrics", header, msg, 48);
  FUZZ_CHECK(code == 200 || code == 401 || code == 403 || code == 500);
  FUZZ_CHECK(msg[48] == 'X' && memchr(msg, '\0', 48));
  FUZZ_CHECK(code == 200 || msg[0]);

  wf = well_formed(header, &tok);
  FUZZ_CHECK(r.tr.calls == (wf ? 1u : 0u));
  if(!wf)
    FUZZ_CHECK(code == 401 && r.sar.calls == 0);
  if(r.tr.calls) {
    const char *sent = kcr_json_str(r.tr.request, "/spec/token");
    FUZZ_CHECK(sent && !strcmp(sent, tok));
  }
  {
    const cJSON *authn = answered(&r.tr, &trt, "/status/authenticated");
    const cJSON *user = answered(&r.tr, &trt, "/status/user");
    bool in = cJSON_IsTrue(authn) && user;
    FUZZ_CHECK(r.sar.calls == (in ? 1u : 0u));
    if(in) {
      const cJSON *name = kcr_json_at(user, "/username");
      const char *asked = kcr_json_str(r.sar.request, "/spec/user");
      FUZZ_CHECK(!strcmp(
          or_empty(kcr_json_str(r.sar.request, "/spec/nonResourceAttributes/path")),
          "/metrics"));
      FUZZ_CHECK(!strcmp(
          or_empty(kcr_json_str(r.sar.request, "/spec/nonResourceAttributes/verb")),
          "get"));
      if(cJSON_IsString(name))
        FUZZ_CHECK(asked && !strcmp(asked, name->valuestring));
    }
    if(code == 200)
      FUZZ_CHECK(in && cJSON_IsTrue(answered(&r.sar, &sart, "/status/allowed")));
    if(code == 403)
      FUZZ_CHECK(in && !r.sar.fail && r.sar.code >= 200 && r.sar.code <= 299 &&
                 !cJSON_IsTrue(answered(&r.sar, &sart, "/status/allowed")));
  }

  r.tr.calls = r.sar.calls = 0;
  again = kcr__mauth_check(m, "get", "/metrics", header, msg, 48);
  if(code != 500)
    FUZZ_CHECK(again == code && r.tr.calls == 0 && r.sar.calls == 0);
  FUZZ_CHECK(msg[48] == 'X');

  kcr__mauth_free(m);
  kcr__client_set_wire(client, NULL, NULL);
  cJSON_Delete(r.tr.request);
  cJSON_Delete(r.sar.request);
  cJSON_Delete(trt);
  cJSON_Delete(sart);
  free(header);
  return 0;
}
