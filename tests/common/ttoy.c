/* See ttoy.h. */
#include "ttoy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kcr/json.h"

bool ttoy_break_name;

static kcr_err emit(cJSON *t, struct kcr_buf *out)
{
  char *text = kcr_json_to_text(t);
  kcr_err rc = text ? kcr_buf_puts(out, text) : KCR_ENOMEM;
  free(text);
  cJSON_Delete(t);
  return rc;
}

/* The object's tree and its spec (made when absent); KCR_EINVAL for a spec
 * that is no object. */
static kcr_err open_obj(kcr_conversion *cv, struct kcr_str in, cJSON **t, cJSON **spec)
{
  kcr_err rc = kcr_json_parse(in.s, in.n, t, kcr_conversion_ei(cv));

  if(rc)
    return rc;
  if(!(*spec = kcr_json_obj(*t, "/spec"))) {
    cJSON_Delete(*t);
    return kcr_errinfo_set(kcr_conversion_ei(cv), KCR_EINVAL, "spec is no object");
  }
  return KCR_OK;
}

kcr_err ttoy_v1_to_hub(kcr_conversion *cv, struct kcr_str in, struct kcr_buf *out,
                       void *ud)
{
  char first[64] = "", last[64] = "";
  cJSON *t, *spec;
  kcr_err rc = open_obj(cv, in, &t, &spec);

  if(rc)
    return rc;
  const char *name = kcr_json_str(spec, "/name");
  if(name) {
    const char *sp = strchr(name, ' ');
    snprintf(first, sizeof(first), "%.*s", sp ? (int)(sp - name) : (int)strlen(name),
             name);
    snprintf(last, sizeof(last), "%s", sp ? sp + 1 : "");
  }
  cJSON_DeleteItemFromObjectCaseSensitive(spec, "name");
  cJSON_AddStringToObject(spec, "first", first);
  cJSON_AddStringToObject(spec, "last", last);
  if(ttoy_break_name)
    kcr_json_set_str(t, "/metadata/name", "other");
  return emit(t, out);
}

kcr_err ttoy_v1_from_hub(kcr_conversion *cv, struct kcr_str in, struct kcr_buf *out,
                         void *ud)
{
  char name[160];
  cJSON *t, *spec;
  kcr_err rc = open_obj(cv, in, &t, &spec);

  if(rc)
    return rc;
  const char *f = kcr_json_str(spec, "/first"), *l = kcr_json_str(spec, "/last");
  if(f && !strcmp(f, "fail")) {
    cJSON_Delete(t);
    return kcr_errinfo_set(kcr_conversion_ei(cv), KCR_EINVAL,
                           "first name 'fail' refused");
  }
  snprintf(name, sizeof(name), "%.60s%s%.60s", f ? f : "", l && *l ? " " : "",
           l ? l : "");
  cJSON_DeleteItemFromObjectCaseSensitive(spec, "first");
  cJSON_DeleteItemFromObjectCaseSensitive(spec, "last");
  cJSON_DeleteItemFromObjectCaseSensitive(spec, "nick");
  cJSON_AddStringToObject(spec, "name", name);
  cJSON_DeleteItemFromObjectCaseSensitive(kcr_json_at(t, "/metadata"), "managedFields");
  return emit(t, out);
}
