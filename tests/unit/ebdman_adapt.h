/* Adapters for ebdman's unit tests (included by test_ebdman_*.c, after
 * cmocka.h, ebdman.h and tfail.h): ebdman's children and VFMs are typed
 * objects (kcr-gen's ConfigMap, VFM, EBD); the tests make their cases as
 * trees, which these turn into typed objects - decoded from the tree's
 * text, as the cache's or the apiserver's text is - before they call
 * ebdman, and turn what ebdman builds back into trees. What they decode
 * are views, as reconcile decodes the cache's objects: they borrow from
 * objects made of the trees (kcr_obj_from_json), held - with the arena ta
 * - until the including test's teardown calls adapt_cleanup. */
#ifndef EBDMAN_ADAPT_H
#define EBDMAN_ADAPT_H

#include <stdlib.h>
#include <string.h>

#include "ebdman.h"
#include "tfail.h"

static struct kcr_arena ta = KCR_ARENA_INIT;
static kcr_obj **held; /* what the views borrow from */
static size_t nheld, capheld;

static inline void adapt_cleanup(void)
{
  kcr_objs_unref(held, nheld); /* the references and the array */
  held = NULL;
  nheld = capheld = 0;
  kcr_arena_cleanup(&ta);
}

/* j decoded as a t into *out: with view, as the cache's objects are - a
 * view of the text of an object made of j (held; the cache's copy has no
 * managedFields), or, for a tree no cache would hold (no metadata.name), a
 * copy of its printed text - else as a GET's answer is, a copy of the
 * printed text (allocating nothing that outlives the call but in ta); in
 * ta. NULL j: *out NULL, KCR_OK. */
static inline kcr_err typed_as(const struct kcr_type *t, const cJSON *j, void **out,
                               bool view)
{
  kcr_obj *o = NULL;
  const char *json;
  char *text = NULL;
  size_t len;
  kcr_err rc;

  *out = NULL;
  if(!j)
    return KCR_OK;
  tfail_exempt(true);
  if(view && kcr_obj_from_json(j, 0, &o, NULL) == KCR_OK) {
    if(nheld == capheld) {
      capheld = capheld ? 2 * capheld : 64;
      held = realloc(held, capheld * sizeof(*held));
    }
    assert_non_null(held);
    held[nheld++] = o;
    json = kcr_obj_json(o, &len);
  } else {
    text = cJSON_PrintUnformatted(j);
    assert_non_null(text);
    json = text;
    len = strlen(text);
  }
  *out = kcr_arena_alloc(&ta, t->size);
  tfail_exempt(false);
  assert_non_null(*out);
  rc = kcr_typed_decode(t, json, len, o ? KCR_TYPED_TRUSTED : KCR_TYPED_COPY, &ta, *out,
                        NULL);
  free(text);
  if(rc)
    *out = NULL;
  return rc;
}

/* typed_as, as the cache's objects are decoded (a view). */
static inline kcr_err typed_try(const struct kcr_type *t, const cJSON *j, void **out)
{
  return typed_as(t, j, out, true);
}

/* The kind of child whose content is at field ("/data", "/spec"). */
static inline const struct ebdman_child_kind *kind_of(const char *field)
{
  return !strcmp(field, ebdman_child_configmap.field) ? &ebdman_child_configmap
                                                      : &ebdman_child_vfm;
}

static inline const struct kcr_type *type_of(const char *field)
{
  return kind_of(field)->type;
}

static inline struct kcr_meta_v1_object_meta *meta_of(const char *field, void *o)
{
  return o ? (struct kcr_meta_v1_object_meta *)kcr_typed_meta(type_of(field), o) : NULL;
}

static inline bool same_typed(const void *have, const void *want, const char *field)
{
  return kind_of(field)->same(have, want);
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

  assert_int_equal(KCR_OK, typed_as(type_of(field), have, &h, false)); /* a GET's */
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
  if(typed_as(&ebd_type, ebd, &e, false)) /* (a copy: run under the torture) */
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
