/* See tlease.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tcheck.h"
#include "tlease.h"

void tlease_cleanup(struct tlease *l)
{
  cJSON_Delete(l->obj);
  l->obj = NULL;
}

const char *tlease_holder(const cJSON *lease)
{
  const char *h = kcr_json_str(lease, "/spec/holderIdentity");
  return h ? h : "";
}

static kcr_err reply_status(struct twire_call *call, long code, const char *reason)
{
  return twire_reply(call, code, "%s", twire_status_json(code, reason));
}

static kcr_err reply_json(struct twire_call *call, long code, const cJSON *obj)
{
  char *text = cJSON_PrintUnformatted(obj);
  kcr_err rc = twire_reply(call, code, "%s", text);
  free(text);
  return rc;
}

/* Stores obj (taken) with the next resourceVersion and answers code. */
static kcr_err store(struct tlease *l, struct twire_call *call, cJSON *obj, long code)
{
  cJSON *meta = cJSON_GetObjectItemCaseSensitive(obj, "metadata");
  char rv[24];

  snprintf(rv, sizeof(rv), "%ld", ++l->rv);
  cJSON_DeleteItemFromObjectCaseSensitive(meta, "resourceVersion");
  cJSON_AddStringToObject(meta, "resourceVersion", rv);
  cJSON_Delete(l->obj);
  l->obj = obj;
  return reply_json(call, code, obj);
}

kcr_err tlease_serve(struct tlease *l, struct twire_call *call, enum tlease_done *done)
{
  bool put = twire_is(call, "PUT", TLEASE);
  const char *rv;
  char cur[24];
  cJSON *obj;

  *done = TLEASE_REFUSED;
  if(twire_is(call, "GET", TLEASE)) {
    *done = TLEASE_READ;
    return l->obj ? reply_json(call, 200, l->obj) : reply_status(call, 404, "NotFound");
  }
  if(!put && !twire_is(call, "POST", TLEASES)) {
    *done = TLEASE_OTHER;
    return KCR_OK;
  }
  if(!put && l->obj)
    return reply_status(call, 409, "AlreadyExists");
  if(put && !l->obj)
    return reply_status(call, 404, "NotFound");
  obj = cJSON_ParseWithLength(call->req->body, call->req->body_len);
  if(!TCHECK(obj != NULL))
    return reply_status(call, 400, "BadRequest");
  snprintf(cur, sizeof(cur), "%ld", l->rv);
  if(put && (!(rv = kcr_json_str(obj, "/metadata/resourceVersion")) || strcmp(rv, cur))) {
    cJSON_Delete(obj);
    *done = TLEASE_CONFLICT;
    return reply_status(call, 409, "Conflict");
  }
  *done = TLEASE_STORED;
  return store(l, call, obj, put ? 200 : 201);
}
