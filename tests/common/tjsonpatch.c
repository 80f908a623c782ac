/* See tjsonpatch.h. */
#include "tjsonpatch.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "kcr/json.h"
#include "kcr/jsontext.h"

/* The next reference token of pointer *p (after its '/'), unescaped into
 * tok; false at the end. */
static bool next_token(const char **p, char *tok, size_t cap)
{
  const char *s = *p;
  size_t n = 0;

  if(*s != '/')
    return false;
  for(s++; *s && *s != '/'; s++) {
    char c = *s;
    if(c == '~') {
      c = s[1] == '0' ? '~' : s[1] == '1' ? '/' : 0;
      if(!c)
        return false;
      s++;
    }
    if(n + 1 >= cap)
      return false;
    tok[n++] = c;
  }
  tok[n] = '\0';
  *p = s;
  return true;
}

static bool array_index(const char *tok, int size, bool may_append, int *out)
{
  char *end;
  long v;

  if(may_append && !strcmp(tok, "-")) {
    *out = size;
    return true;
  }
  if(!*tok || (tok[0] == '0' && tok[1]) || tok[0] == '-' || tok[0] == '+')
    return false;
  v = strtol(tok, &end, 10);
  if(*end || v < 0 || v > size - (may_append ? 0 : 1))
    return false;
  *out = (int)v;
  return true;
}

/* The member of obj named tok (the last of that name). */
static cJSON *member(cJSON *obj, const char *tok)
{
  cJSON *found = NULL;
  for(cJSON *c = obj->child; c; c = c->next)
    if(c->string && !strcmp(c->string, tok))
      found = c;
  return found;
}

static const char *apply_one(cJSON **root, const char *op, const char *path, cJSON *value)
{
  char tok[65536]; /* longer than any fuzz input */
  cJSON *parent = NULL, *cur = *root;
  const char *p = path;
  int idx;

  if(!*path) { /* the whole document */
    if(strcmp(op, "replace") && strcmp(op, "add"))
      return "cannot remove the root";
    cJSON_Delete(*root);
    *root = cJSON_Duplicate(value, true);
    return NULL;
  }
  /* walk to the parent of the last token */
  for(;;) {
    const char *before = p;
    if(!next_token(&p, tok, sizeof(tok)))
      return "bad pointer";
    if(!*p) {
      p = before;
      break;
    }
    parent = cur;
    if(cJSON_IsObject(parent))
      cur = member(parent, tok);
    else if(cJSON_IsArray(parent) &&
            array_index(tok, cJSON_GetArraySize(parent), false, &idx))
      cur = cJSON_GetArrayItem(parent, idx);
    else
      cur = NULL;
    if(!cur)
      return "a path step names nothing";
  }
  parent = cur;
  next_token(&p, tok, sizeof(tok));
  if(cJSON_IsObject(parent)) {
    cJSON *m = member(parent, tok);
    if(!strcmp(op, "add") || !strcmp(op, "replace")) {
      if(!strcmp(op, "replace") && !m)
        return "replace of an absent member";
      while((m = member(parent, tok)))
        cJSON_Delete(cJSON_DetachItemViaPointer(parent, m));
      cJSON_AddItemToObject(parent, tok, cJSON_Duplicate(value, true));
      return NULL;
    }
    if(!strcmp(op, "remove")) {
      if(!m)
        return "remove of an absent member";
      while((m = member(parent, tok)))
        cJSON_Delete(cJSON_DetachItemViaPointer(parent, m));
      return NULL;
    }
    return "unknown op";
  }
  if(!cJSON_IsArray(parent))
    return "the parent is no container";
  int size = cJSON_GetArraySize(parent);
  if(!strcmp(op, "add")) {
    if(!array_index(tok, size, true, &idx))
      return "add beyond the array";
    if(idx == size)
      cJSON_AddItemToArray(parent, cJSON_Duplicate(value, true));
    else
      cJSON_InsertItemInArray(parent, idx, cJSON_Duplicate(value, true));
    return NULL;
  }
  if(!array_index(tok, size, false, &idx))
    return "index beyond the array";
  if(!strcmp(op, "remove"))
    cJSON_DeleteItemFromArray(parent, idx);
  else if(!strcmp(op, "replace"))
    cJSON_ReplaceItemInArray(parent, idx, cJSON_Duplicate(value, true));
  else
    return "unknown op";
  return NULL;
}

/* doc patched, as a tree (caller frees); NULL with *why set. */
static cJSON *apply_tree(const char *doc, size_t ndoc, const char *patch, size_t npatch,
                         const char **why)
{
  cJSON *root = NULL, *ops = NULL;

  *why = NULL;
  if(kcr_json_parse(doc, ndoc, &root, NULL) ||
     kcr_json_parse(patch, npatch, &ops, NULL) || !cJSON_IsArray(ops)) {
    *why = "document or patch not JSON";
    goto done;
  }
  for(cJSON *o = ops->child; o && !*why; o = o->next) {
    const char *op = kcr_json_str(o, "/op"), *path = kcr_json_str(o, "/path");
    cJSON *value = cJSON_GetObjectItemCaseSensitive(o, "value");
    if(!op || !path)
      *why = "an operation without op or path";
    else if(strcmp(op, "remove") && !value)
      *why = "an add or replace without value";
    else
      *why = apply_one(&root, op, path, value);
  }
done:
  cJSON_Delete(ops);
  if(*why) {
    cJSON_Delete(root);
    return NULL;
  }
  return root;
}

char *tjp_apply(const char *doc, size_t ndoc, const char *patch, size_t npatch,
                const char **why)
{
  cJSON *root = apply_tree(doc, ndoc, patch, npatch, why);
  char *out = root ? kcr_json_to_text(root) : NULL;

  if(root && !out)
    *why = "out of memory";
  cJSON_Delete(root);
  return out;
}

static bool is_num(const cJSON *n)
{
  return cJSON_IsNumber(n) || (cJSON_IsRaw(n) && n->valuestring[0] != '"');
}

static double num(const cJSON *n)
{
  return cJSON_IsRaw(n) ? strtod(n->valuestring, NULL) : n->valuedouble;
}

/* A string node's bytes: a Raw node holds the literal of a string with
 * \u0000 (see kcr_json_parse), unescaped here. */
static struct kcr_str str(const cJSON *n, struct kcr_arena *a)
{
  struct kcr_str s = {0};
  if(cJSON_IsRaw(n))
    kcr_jv_string((struct kcr_jv){n->valuestring, strlen(n->valuestring)}, a, 0, &s);
  else
    s = kcr_str_c(n->valuestring);
  return s;
}

static bool same(const cJSON *x, const cJSON *y, struct kcr_arena *a)
{
  if(is_num(x) || is_num(y)) {
    if(!is_num(x) || !is_num(y))
      return false;
    if(cJSON_IsRaw(x) && cJSON_IsRaw(y))
      return !strcmp(x->valuestring, y->valuestring);
    return num(x) == num(y);
  }
  if(cJSON_IsString(x) || cJSON_IsRaw(x) || cJSON_IsString(y) || cJSON_IsRaw(y))
    return (cJSON_IsString(x) || cJSON_IsRaw(x)) &&
           (cJSON_IsString(y) || cJSON_IsRaw(y)) && kcr_str_same(str(x, a), str(y, a));
  if((x->type & 0xff) != (y->type & 0xff))
    return false;
  if(cJSON_IsObject(x)) {
    if(cJSON_GetArraySize(x) != cJSON_GetArraySize(y))
      return false;
    for(cJSON *c = x->child; c; c = c->next) {
      cJSON *d = member((cJSON *)y, c->string);
      if(!d || !same(c, d, a))
        return false;
    }
    return true;
  }
  if(cJSON_IsArray(x)) {
    cJSON *c = x->child, *d = y->child;
    for(; c && d; c = c->next, d = d->next)
      if(!same(c, d, a))
        return false;
    return !c && !d;
  }
  return true; /* null, true, false: the type says it all */
}

bool tjp_equal(const char *a, size_t na, const char *b, size_t nb)
{
  struct kcr_arena ar = KCR_ARENA_INIT;
  cJSON *x = NULL, *y = NULL;
  bool eq = false;

  if(!kcr_json_parse(a, na, &x, NULL) && !kcr_json_parse(b, nb, &y, NULL))
    eq = same(x, y, &ar);
  kcr_arena_cleanup(&ar);
  cJSON_Delete(x);
  cJSON_Delete(y);
  return eq;
}

bool tjp_apply_check(const char *doc, size_t ndoc, const char *patch, size_t npatch,
                     const char *want, size_t nwant, const char **why)
{
  struct kcr_arena ar = KCR_ARENA_INIT;
  cJSON *got = apply_tree(doc, ndoc, patch, npatch, why), *w = NULL;
  bool eq = false;

  if(got && !want)
    eq = true; /* it applies: all that was asked */
  else if(got && kcr_json_parse(want, nwant, &w, NULL))
    *why = "the wanted text is not JSON";
  else if(got && !(eq = same(got, w, &ar)))
    *why = "the patched value differs from the wanted one";
  kcr_arena_cleanup(&ar);
  cJSON_Delete(got);
  cJSON_Delete(w);
  return eq;
}
