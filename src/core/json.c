/* DESIGN: dot-path access over cJSON trees. Paths are short and static in
 * practice, so they are walked segment by segment without allocation. */
#include <stdlib.h>
#include <string.h>

#include "kcr/json.h"

/* Finds member name[0..n) in obj. */
static cJSON *member(const cJSON *obj, const char *name, size_t n)
{
  cJSON *it;
  if(!cJSON_IsObject(obj))
    return NULL;
  cJSON_ArrayForEach(it, obj)
  {
    if(it->string && strlen(it->string) == n && !memcmp(it->string, name, n))
      return it;
  }
  return NULL;
}

cJSON *kcr_json_at(const cJSON *obj, const char *path)
{
  const cJSON *cur = obj;
  while(cur && *path) {
    const char *dot = strchr(path, '.');
    size_t n = dot ? (size_t)(dot - path) : strlen(path);
    cur = member(cur, path, n);
    path += n + (dot ? 1 : 0);
  }
  return (cJSON *)cur;
}

const char *kcr_json_str(const cJSON *obj, const char *path)
{
  const cJSON *v = kcr_json_at(obj, path);
  return cJSON_IsString(v) ? v->valuestring : NULL;
}

const char *kcr_json_member_str(const cJSON *obj, const char *key)
{
  const cJSON *v =
      cJSON_IsObject(obj) ? cJSON_GetObjectItemCaseSensitive(obj, key) : NULL;
  return cJSON_IsString(v) ? v->valuestring : NULL;
}

int64_t kcr_json_int(const cJSON *obj, const char *path, int64_t def)
{
  const cJSON *v = kcr_json_at(obj, path);
  return cJSON_IsNumber(v) ? (int64_t)v->valuedouble : def;
}

cJSON *kcr_json_obj(cJSON *obj, const char *path)
{
  cJSON *cur = obj;
  while(cur && *path) {
    const char *dot = strchr(path, '.');
    size_t n = dot ? (size_t)(dot - path) : strlen(path);
    cJSON *next = member(cur, path, n);
    if(!next) {
      char *name = strndup(path, n);
      next = name ? cJSON_CreateObject() : NULL;
      if(!next || !cJSON_AddItemToObject(cur, name, next)) {
        cJSON_Delete(next);
        free(name);
        return NULL;
      }
      free(name);
    }
    if(!cJSON_IsObject(next))
      return NULL;
    cur = next;
    path += n + (dot ? 1 : 0);
  }
  return cur;
}

kcr_err kcr_json_set_str(cJSON *obj, const char *path, const char *value)
{
  const char *last = strrchr(path, '.');
  cJSON *parent = obj, *v;

  if(last) {
    char *head = strndup(path, (size_t)(last - path));
    if(!head)
      return KCR_ENOMEM;
    parent = kcr_json_obj(obj, head);
    free(head);
    last++;
  } else {
    last = path;
  }
  if(!parent)
    return KCR_EINVAL;
  v = cJSON_CreateString(value);
  if(!v)
    return KCR_ENOMEM;
  /* Not cJSON_ReplaceItemInObject: cJSON 1.7.15 (Debian 12) inserts a nameless
   * member when copying the key fails. Delete, then add. */
  cJSON_DeleteItemFromObjectCaseSensitive(parent, last);
  if(!cJSON_AddItemToObject(parent, last, v)) {
    cJSON_Delete(v);
    return KCR_ENOMEM;
  }
  return KCR_OK;
}

kcr_err kcr_json_parse(const char *text, size_t len, cJSON **out, struct kcr_errinfo *ei)
{
  const char *end = NULL;
  *out = cJSON_ParseWithLengthOpts(text, len, &end, 0);
  if(*out)
    return KCR_OK;
  return kcr_errinfo_set(ei, KCR_EPARSE, "malformed JSON at byte %ld of %zu",
                         end ? (long)(end - text) : -1L, len);
}

char *kcr_json_print(const cJSON *obj) { return cJSON_PrintUnformatted(obj); }
