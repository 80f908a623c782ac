/* Adapters for ebdman's unit tests (included by test_ebdman_*.c, after
 * cmocka.h, ebdman.h and tfail.h): ebdman's children and VFMs are typed
 * objects (kcr-gen's ConfigMap, VFM, EBD); the tests make their cases as
 * trees, which these turn into typed objects - decoded from the tree's
 * text, as the cache's or the apiserver's text is - before they call
 * ebdman, and turn what ebdman builds back into trees. Everything they
 * decode lives in ta, which the including test empties. */
#ifndef EBDMAN_ADAPT_H
#define EBDMAN_ADAPT_H

#include <stdlib.h>
#include <string.h>

#include "ebdman.h"
#include "tfail.h"

static struct kcr_arena ta = KCR_ARENA_INIT; /* emptied by teardown */

/* j decoded as a t (a copy in ta) into *out; NULL j: *out NULL, KCR_OK. */
static inline kcr_err typed_try(const struct kcr_type *t, const cJSON *j, void **out)
{
  char *text;
  kcr_err rc;

  *out = NULL;
  if(!j)
    return KCR_OK;
  tfail_exempt(true);
  text = cJSON_PrintUnformatted(j);
  *out = kcr_arena_alloc(&ta, t->size);
  tfail_exempt(false);
  assert_non_null(text);
  assert_non_null(*out);
  rc = kcr_typed_decode(t, text, strlen(text), KCR_TYPED_COPY, &ta, *out, NULL);
  free(text);
  if(rc)
    *out = NULL;
  return rc;
}

static inline const struct kcr_type *type_of(const char *field)
{
  return !strcmp(field, "/data") ? &core_v1_config_map_type : &vfm_type;
}

static inline struct kcr_meta_v1_object_meta *meta_of(const char *field, void *o)
{
  return o ? (struct kcr_meta_v1_object_meta *)kcr_typed_meta(type_of(field), o) : NULL;
}

static inline bool same_typed(const void *have, const void *want, const char *field)
{
  return !strcmp(field, "/data") ? ebdman_configmap_same(have, want)
                                 : ebdman_vfm_same(have, want);
}

/* ebdman_child_plan on the trees have (NULL: absent; one that does not
 * decode is absent too, as install plans it) and want. */
static inline enum ebdman_child_plan plan_of(const cJSON *have, const cJSON *want,
                                             const char *field)
{
  void *h, *w;

  typed_try(type_of(field), have, &h);
  assert_int_equal(KCR_OK, typed_try(type_of(field), want, &w));
  return ebdman_child_plan(meta_of(field, h), meta_of(field, w), same_typed(h, w, field));
}

static inline bool same_content(const cJSON *have, const cJSON *want, const char *field)
{
  void *h, *w;

  typed_try(type_of(field), have, &h);
  assert_int_equal(KCR_OK, typed_try(type_of(field), want, &w));
  return same_typed(h, w, field);
}

/* ebdman_child_precondition on the tree want (its metadata replaced by
 * what the typed one encodes to) and have. */
static inline kcr_err precondition(cJSON *want, enum ebdman_child_plan plan,
                                   const cJSON *have)
{
  const char *field = strcmp(kcr_json_str(want, "/kind"), "VFM") ? "/data" : "/spec";
  struct kcr_buf b = KCR_BUF_INIT;
  cJSON *now = NULL;
  void *h, *w;
  kcr_err rc;

  assert_int_equal(KCR_OK, typed_try(type_of(field), have, &h));
  assert_int_equal(KCR_OK, typed_try(type_of(field), want, &w));
  rc = ebdman_child_precondition(meta_of(field, w), plan, meta_of(field, h));
  assert_int_equal(KCR_OK, kcr_typed_encode(type_of(field), w, &b, NULL));
  assert_int_equal(KCR_OK, kcr_json_parse(b.ptr, b.len, &now, NULL));
  cJSON_ReplaceItemInObjectCaseSensitive(
      want, "metadata", cJSON_DetachItemFromObjectCaseSensitive(now, "metadata"));
  cJSON_Delete(now);
  kcr_buf_cleanup(&b);
  return rc;
}

static inline void conflict_msg(char *out, size_t n, const cJSON *want, const cJSON *have)
{
  const char *kind = kcr_json_str(want, "/kind"),
             *field = strcmp(kind, "VFM") ? "/data" : "/spec";
  void *h, *w;

  assert_int_equal(KCR_OK, typed_try(type_of(field), have, &h));
  assert_int_equal(KCR_OK, typed_try(type_of(field), want, &w));
  ebdman_child_conflict_msg(out, n, kind, meta_of(field, w), meta_of(field, h));
}

/* The child of the EBD tree ebd (vfm: the VFM, else the ConfigMap) as
 * ebdman builds it, as a tree: NULL when the EBD does not decode or has
 * no child. */
static inline cJSON *child_for(const cJSON *ebd, bool vfm)
{
  const struct kcr_type *t = vfm ? &vfm_type : &core_v1_config_map_type;
  struct kcr_buf b = KCR_BUF_INIT;
  cJSON *out = NULL;
  void *e, *c;
  kcr_err rc;

  tfail_exempt(true);
  c = kcr_arena_alloc(&ta, t->size);
  tfail_exempt(false);
  assert_non_null(c);
  if(typed_try(&ebd_type, ebd, &e))
    return NULL;
  rc = vfm ? ebdman_vfm_for(e, &ta, c, NULL) : ebdman_configmap_for(e, &ta, c, NULL);
  if(rc)
    return NULL;
  tfail_exempt(true);
  assert_int_equal(KCR_OK, kcr_typed_encode(t, c, &b, NULL));
  assert_int_equal(KCR_OK, kcr_json_parse(b.ptr, b.len, &out, NULL));
  kcr_buf_cleanup(&b);
  tfail_exempt(false);
  return out;
}

/* ebdman_observe_vfm on the VFM tree v (NULL: none seen), decoded into ta;
 * ob->arena, when NULL, becomes ta (where the VFM's message is copied). */
static inline void observe(struct ebdman_observed *ob, const cJSON *v)
{
  void *t;

  assert_int_equal(KCR_OK, typed_try(&vfm_type, v, &t));
  if(!ob->arena)
    ob->arena = &ta;
  ebdman_observe_vfm(ob, t);
}

#endif
