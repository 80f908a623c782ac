/* kcr_conversion_review on any body, with the toy kind of
 * tests/common/ttoy.h: hub v2 (spec.first, spec.last, spec.nick) and spoke
 * v1 (spec.name), converters written on cJSON. Checked: the answer is a ConversionReview
 * with the request's uid and a result; on Success it holds as many convertedObjects as
 * the request had objects, each of the desired apiVersion, with the metadata of its
 * object but labels and annotations (a converter may only change those); on Failure a
 * message and no objects. */
#include <float.h>
#include <math.h>

#include "fuzz.h"
#include "kcr/json.h"
#include "kcr/webhook.h"
#include "ttoy.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
  fuzz_quiet();
  return 0;
}

static const struct kcr_conversion_version v1 = {"v1", ttoy_v1_to_hub, ttoy_v1_from_hub};
static const struct kcr_conversion_opts opts = {
    .path = "/c", .group = "toy.kcr.io", .hub = "v2", .versions = &v1, .nversions = 1};

/* The metadata of o without labels and annotations; NULL for none or
 * nothing else (annotations may be added: the round-trip data). */
static cJSON *core_meta(const cJSON *o)
{
  cJSON *m = cJSON_Duplicate(kcr_json_at(o, "/metadata"), true);
  cJSON_DeleteItemFromObjectCaseSensitive(m, "labels");
  cJSON_DeleteItemFromObjectCaseSensitive(m, "annotations");
  if(m && cJSON_IsObject(m) && !m->child) {
    cJSON_Delete(m);
    m = NULL;
  }
  return m;
}

/* Equal trees, members in any order; numbers equal by their bits or
 * within a rounding of the last bit (cJSON_Compare calls inf unequal to
 * itself; the tree printer, as cJSON's, writes a fraction in 15 digits
 * when that reads back within DBL_EPSILON: noted in tests/fuzz/README.md). */
static bool same(const cJSON *a, const cJSON *b)
{
  if((a->type & 0xff) != (b->type & 0xff))
    return false;
  if(cJSON_IsNumber(a)) {
    double x = a->valuedouble, y = b->valuedouble,
           m = fabs(x) > fabs(y) ? fabs(x) : fabs(y);
    return !memcmp(&x, &y, sizeof(double)) || fabs(x - y) <= m * DBL_EPSILON;
  }
  if(cJSON_IsString(a) || cJSON_IsRaw(a))
    return !strcmp(a->valuestring, b->valuestring);
  if(cJSON_IsArray(a) || cJSON_IsObject(a)) {
    if(cJSON_GetArraySize(a) != cJSON_GetArraySize(b))
      return false;
    const cJSON *x = a->child, *y = b->child;
    for(; x; x = x->next, y = y ? y->next : NULL) {
      const cJSON *other =
          cJSON_IsObject(a) ? cJSON_GetObjectItemCaseSensitive(b, x->string) : y;
      if(!other || !same(x, other))
        return false;
    }
  }
  return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  struct kcr_buf out = KCR_BUF_INIT;
  cJSON *t = NULL, *in = NULL;

  FUZZ_CHECK(
      !kcr_conversion_review(&opts, (const char *)data, size, "application/json", &out));
  FUZZ_CHECK(!kcr_json_parse(out.ptr, out.len, &t, NULL));
  FUZZ_CHECK(!strcmp(kcr_json_str(t, "/kind"), "ConversionReview"));
  const char *status = kcr_json_str(t, "/response/result/status");
  FUZZ_CHECK(status);
  cJSON *conv = kcr_json_at(t, "/response/convertedObjects");
  if(!strcmp(status, "Failure")) {
    FUZZ_CHECK(kcr_json_str(t, "/response/result/message") && !conv);
  } else {
    FUZZ_CHECK(!strcmp(status, "Success") && cJSON_IsArray(conv));
    FUZZ_CHECK(!kcr_json_parse((const char *)data, size, &in, NULL));
    const char *uid = kcr_json_str(in, "/request/uid");
    if(uid)
      FUZZ_CHECK(!strcmp(uid, kcr_json_str(t, "/response/uid")));
    const char *want = kcr_json_str(in, "/request/desiredAPIVersion");
    cJSON *objs = kcr_json_at(in, "/request/objects");
    FUZZ_CHECK(cJSON_GetArraySize(conv) == cJSON_GetArraySize(objs));
    for(int i = 0; i < cJSON_GetArraySize(conv); i++) {
      cJSON *o = cJSON_GetArrayItem(conv, i), *src = cJSON_GetArrayItem(objs, i);
      const char *api = kcr_json_str(o, "/apiVersion");
      if(want && api)
        FUZZ_CHECK(!strcmp(api, want));
      cJSON *a = core_meta(src), *b = core_meta(o);
      FUZZ_CHECK((!a && !b) || (a && b && same(a, b)));
      cJSON_Delete(a);
      cJSON_Delete(b);
    }
  }
  cJSON_Delete(in);
  cJSON_Delete(t);
  kcr_buf_cleanup(&out);
  return 0;
}
