/* kcr_webhook_review on any body: the AdmissionReview reader and the
 * answer writer, with a handler the input's first byte picks (allow, deny
 * with a code from the input, warn, fail, or mutate: a label added, the
 * first data member dropped, "spec" replaced). Checked: the answer is one
 * JSON object, an AdmissionReview of a version the reader takes, with a
 * response whose uid is the request's (empty when it had none) and an
 * allowed boolean; a denial has a Status with a code in 400..599 and a
 * message; a handler was called only for a review it could read; a patch
 * comes only from a mutation and, applied to the request's object by the
 * reference applier (tests/common/tjsonpatch.c), gives the handler's
 * object. */
#include "fuzz.h"
#include "kcr/base64.h"
#include "kcr/json.h"
#include "kcr/webhook.h"
#include "tjsonpatch.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
  fuzz_quiet();
  return 0;
}

static struct {
  unsigned mode, code;
  bool called;
  char *object, *changed; /* the request's object and the handler's */
} st;

static kcr_err handler(kcr_admission *adm, const struct kcr_admission_request *rq,
                       void *ud)
{
  cJSON *t = NULL;

  st.called = true;
  FUZZ_CHECK(rq->uid.n > 0);
  switch(st.mode) {
  case 0: return KCR_OK;
  case 1: kcr_admission_deny(adm, (int)st.code, "denied %u", st.code); return KCR_OK;
  case 2: return kcr_admission_warn(adm, "warned");
  case 3: return KCR_EIO;
  default: break;
  }
  if(!rq->object.s || kcr_json_parse(rq->object.s, rq->object.n, &t, NULL))
    return KCR_OK;
  kcr_json_set_str(t, "/metadata/labels/fuzz.kcr.io~1x", "y");
  cJSON *data = cJSON_GetObjectItemCaseSensitive(t, "data");
  if(cJSON_IsObject(data) && data->child)
    cJSON_Delete(cJSON_DetachItemViaPointer(data, data->child));
  cJSON_DeleteItemFromObjectCaseSensitive(t, "spec");
  cJSON_AddItemToObject(t, "spec", cJSON_CreateString("fuzz"));
  st.changed = kcr_json_to_text(t);
  st.object = strndup(rq->object.s, rq->object.n);
  cJSON_Delete(t);
  FUZZ_CHECK(st.changed && st.object);
  return kcr_admission_set_object(adm, st.changed, strlen(st.changed));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  struct kcr_webhook_opts o = {
      .path = "/f", .admit = handler, .mutating = true, .remove_fields = true};
  struct kcr_buf out = KCR_BUF_INIT;
  cJSON *t = NULL, *in = NULL;

  if(size < 2)
    return 0;
  memset(&st, 0, sizeof(st));
  st.mode = data[0] % 5;
  st.code = 380 + data[0] * 1u;
  const char *body = (const char *)data + 1;
  size_t len = size - 1;
  FUZZ_CHECK(!kcr_webhook_review(&o, body, len, "application/json", &out));
  FUZZ_CHECK(!kcr_json_parse(out.ptr, out.len, &t, NULL));
  const char *api = kcr_json_str(t, "/apiVersion");
  FUZZ_CHECK(api && (!strcmp(api, "admission.k8s.io/v1") ||
                     !strcmp(api, "admission.k8s.io/v1beta1")));
  FUZZ_CHECK(!strcmp(kcr_json_str(t, "/kind"), "AdmissionReview"));
  cJSON *allowed = kcr_json_at(t, "/response/allowed");
  FUZZ_CHECK(cJSON_IsBool(allowed));
  cJSON *uid = kcr_json_at(t, "/response/uid");
  FUZZ_CHECK(cJSON_IsString(uid) || cJSON_IsRaw(uid)); /* Raw: holds \u0000 */
  if(st.called && !kcr_json_parse(body, len, &in, NULL)) {
    const char *sent = kcr_json_str(in, "/request/uid");
    if(sent && cJSON_IsString(uid))
      FUZZ_CHECK(!strcmp(sent, uid->valuestring));
  }
  if(!st.called)
    FUZZ_CHECK(cJSON_IsFalse(allowed) &&
               kcr_json_int(t, "/response/status/code", 0) == 400);
  if(cJSON_IsFalse(allowed)) {
    int64_t code = kcr_json_int(t, "/response/status/code", 0);
    FUZZ_CHECK(code >= 400 && code <= 599);
    FUZZ_CHECK(kcr_json_str(t, "/response/status/message"));
    FUZZ_CHECK(!kcr_json_at(t, "/response/patch"));
  }
  const char *b64 = kcr_json_str(t, "/response/patch");
  if(b64) {
    unsigned char *p;
    size_t n;
    const char *why;
    FUZZ_CHECK(st.changed && cJSON_IsTrue(allowed));
    FUZZ_CHECK(!kcr_base64_decode(b64, strlen(b64), &p, &n));
    if(!tjp_apply_check(st.object, strlen(st.object), (char *)p, n, st.changed,
                        strlen(st.changed), &why)) {
      fprintf(stderr, "patch %s: %s\n", p, why);
      abort();
    }
    free(p);
  }
  cJSON_Delete(in);
  cJSON_Delete(t);
  kcr_buf_cleanup(&out);
  free(st.object);
  free(st.changed);
  return 0;
}
