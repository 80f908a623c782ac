/* The operator's pure functions on any EBD: the children it applies
 * (ebdman_configmap_for, ebdman_vfm_for, on the EBD decoded as reconcile
 * decodes it: a typed view of its stored text), the conditions it reports
 * (ebdman_conditions, with the input also standing for the VFM observed and
 * the message of its Installed condition for the server's refusal), and
 * `ebdman status`'s table, sort and watch bookkeeping.
 * Input: JSON, the EBD (an array: a list of EBDs for the table).
 * Checked: for an EBD that decodes, with metadata.name and metadata.uid,
 * both children are built, named after it (ConfigMap "<name>-config"), in
 * its namespace, with exactly one ownerReference, the controller one, to
 * it, carrying its spec.vfmTemplate (VFM) and spec.vfmTemplate.config (ConfigMap data)
 * and no annotation without the vfm-sim prefix; what is sent reads back the same and the
 * cache can hold it; every condition computed passes kcr_cond_validate (what the status
 * write requires); a child the texts judge kept as is (ebdman_child_kept_as_is) is one
 * ebdman_child_plan keeps on the typed objects, for the child as made and for the input
 * standing for the cached child (that decodes as its kind). */
#include "ebdman.h"
#include "fuzz.h"

static FILE *devnull;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
  fuzz_quiet();
  devnull = fopen("/dev/null", "w");
  if(!devnull)
    abort();
  return 0;
}

static const struct ebdman_child_kind *const kinds[] = {&ebdman_child_configmap,
                                                        &ebdman_child_vfm};

static struct kcr_meta_v1_object_meta *meta(const struct ebdman_child_kind *k, void *o)
{
  return o ? (struct kcr_meta_v1_object_meta *)kcr_typed_meta(k->type, o) : NULL;
}

/* The child c built of e (tree: ebd) as sent: its text; checks what it says. */
static char *check_child(const struct ebdman_child_kind *k, const struct ebd *e, void *c)
{
  const struct kcr_meta_v1_object_meta *m = meta(k, c);
  struct kcr_buf b = KCR_BUF_INIT;
  size_t sl = strlen(k->suffix);
  cJSON *back = NULL;
  kcr_obj *obj = NULL;

  FUZZ_CHECK(m->name.n == e->metadata.name.n + sl &&
             !memcmp(m->name.s, e->metadata.name.s, e->metadata.name.n) &&
             !memcmp(m->name.s + e->metadata.name.n, k->suffix, sl));
  FUZZ_CHECK(m->has_namespace_ == e->metadata.has_namespace_ &&
             (!m->has_namespace_ || kcr_str_same(m->namespace_, e->metadata.namespace_)));
  FUZZ_CHECK(m->owner_references.n == 1);
  const struct kcr_meta_v1_owner_reference *r = &m->owner_references.v[0];
  FUZZ_CHECK(r->controller && kcr_str_same(r->uid, e->metadata.uid) &&
             kcr_str_same(r->name, e->metadata.name));
  for(size_t i = 0; i < m->annotations.n; i++)
    FUZZ_CHECK(m->annotations.k[i].n >= strlen(EBDMAN_VFM_ANNOTATION_PREFIX) &&
               !memcmp(m->annotations.k[i].s, EBDMAN_VFM_ANNOTATION_PREFIX,
                       strlen(EBDMAN_VFM_ANNOTATION_PREFIX)));
  /* What is sent is JSON, of the kind, and the cache can hold it. */
  FUZZ_CHECK(kcr_typed_encode(k->type, c, &b, NULL) == KCR_OK);
  FUZZ_CHECK(kcr_json_parse(b.ptr, b.len, &back, NULL) == KCR_OK);
  FUZZ_CHECK(!strcmp(kcr_json_str(back, "/kind"), k->kind));
  /* (A name that is empty as a C string: "\u0000x" is never served.) */
  if(*kcr_json_str(back, "/metadata/name")) {
    FUZZ_CHECK(kcr_obj_from_json(back, 0, &obj, NULL) == KCR_OK);
    kcr_obj_unref(obj);
  }
  cJSON_Delete(back);
  return kcr_buf_take(&b);
}

/* The text judges a child kept as is (ebdman_child_kept_as_is) only where
 * the typed objects do (ebdman_child_plan KEEP), as reconcile reads them:
 * the EBD and the cached child as views of their stored texts, the child
 * wanted built from the EBD - for the child as made (text), and for the
 * input itself standing for the cached child (without a key twice in it,
 * which the API server never sends). */
static void judged_by_text(const struct ebdman_child_kind *k, kcr_obj *eo,
                           const struct ebd *e, void *want, const char *text,
                           const cJSON *input, struct kcr_arena *a)
{
  const char *ep[] = {"/metadata/name", k->src, "/metadata/annotations"},
             *hp[] = {"/metadata/name", k->field, "/metadata/annotations"};
  struct kcr_span es[3], h[3];
  cJSON *made = NULL;

  (void)e;
  kcr_obj_spans(eo, ep, es, 3);
  FUZZ_CHECK(kcr_json_parse(text, strlen(text), &made, NULL) == KCR_OK);
  const cJSON *haves[] = {made, input};
  for(int i = 0; i < 2; i++) {
    kcr_obj *ho = NULL;
    size_t len;
    void *have;
    if(fuzz_has_duplicate_keys_deep(haves[i]) ||
       kcr_obj_from_json(haves[i], 0, &ho, NULL))
      continue;
    kcr_obj_spans(ho, hp, h, 3);
    if(es[0].at && h[0].at &&
       ebdman_child_kept_as_is(kcr_obj_uid(eo), &es[1], &es[2],
                               kcr_obj_controller(ho)->uid, &h[1], &h[2])) {
      const char *json = kcr_obj_json(ho, &len);
      FUZZ_CHECK((have = kcr_arena_alloc(a, k->type->size)));
      /* (a child that does not decode as its kind - labels that are no
       * map of strings ... - is one the apiserver never sends) */
      if(!kcr_typed_decode(k->type, json, len, KCR_TYPED_TRUSTED, a, have, NULL))
        FUZZ_CHECK(ebdman_child_plan(meta(k, have), meta(k, want), k->same(have, want)) ==
                   EBDMAN_CHILD_KEEP);
    }
    kcr_obj_unref(ho);
  }
  cJSON_Delete(made);
}

static void children(const cJSON *doc)
{
  struct kcr_arena a = KCR_ARENA_INIT;
  kcr_obj *eo = NULL;
  struct ebd e;

  if(kcr_obj_from_json(doc, 0, &eo, NULL))
    return;
  if(ebd_from_obj(eo, 0, &a, &e, NULL) == KCR_OK) {
    for(size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
      const struct ebdman_child_kind *k = kinds[i];
      void *c = kcr_arena_alloc(&a, k->type->size);
      FUZZ_CHECK(c);
      kcr_err rc = k->build(&e, &a, c, NULL);
      if(e.metadata.name.n && e.metadata.uid.n)
        FUZZ_CHECK(rc == KCR_OK);
      if(rc)
        continue;
      /* the content is the EBD's */
      if(i == 0)
        FUZZ_CHECK(kcr_strmap_same(&((struct core_v1_config_map *)c)->data,
                                   &e.spec.vfm_template.config));
      else {
        const struct vfm_spec *s = &((struct vfm *)c)->spec;
        FUZZ_CHECK(s->has_image == e.spec.vfm_template.has_image &&
                   kcr_str_same(s->image, e.spec.vfm_template.image) &&
                   s->has_replicas == e.spec.vfm_template.has_replicas &&
                   s->replicas == e.spec.vfm_template.replicas &&
                   s->has_config == e.spec.vfm_template.has_config &&
                   kcr_strmap_same(&s->config, &e.spec.vfm_template.config));
      }
      char *text = check_child(k, &e, c);
      judged_by_text(k, eo, &e, c, text, doc, &a);
      free(text);
    }
  }
  kcr_arena_cleanup(&a);
  kcr_obj_unref(eo);
}

static void conditions(const cJSON *doc)
{
  struct kcr_cond installed, out[EBDMAN_NCOND];
  struct kcr_arena arena = KCR_ARENA_INIT, decoded = KCR_ARENA_INIT;
  struct ebdman_observed ob = {.generation =
                                   kcr_json_int(doc, "/metadata/generation", 0)};
  bool had_installed = kcr_cond_get(kcr_json_at(doc, "/status/conditions"), "Installed",
                                    &installed) == KCR_OK;
  char *text = kcr_json_to_text(doc);
  struct vfm v;
  bool is_vfm;

  FUZZ_CHECK(text);
  is_vfm = vfm_decode(text, strlen(text), KCR_TYPED_COPY, &decoded, &v, NULL) == KCR_OK;
  if(ob.generation < 0) /* the API server never serves one */
    ob.generation = 0;
  for(int variant = 0; variant < 4; variant++) {
    ob.install_failed = variant == 1;
    ob.install_error = variant == 1 && had_installed ? installed.message : NULL;
    ob.applied_new_spec = variant == 2;
    ebdman_observe_vfm(&ob, variant == 3 || !is_vfm ? NULL : &v);
    ob.vfm_read_error = variant == 3 && had_installed ? installed.message : NULL;
    ob.arena = variant & 1 ? &arena : NULL; /* where long messages are cut */
    size_t n = ebdman_conditions(&ob, out);
    FUZZ_CHECK(n == EBDMAN_NCOND - 1 || n == EBDMAN_NCOND);
    for(size_t i = 0; i < n; i++) {
      struct kcr_errinfo ei = KCR_ERRINFO_INIT;
      kcr_err rc = kcr_cond_validate(&out[i], &ei);
      if(rc)
        fprintf(stderr, "condition %zu of variant %d: %s\n", i, variant, ei.message);
      FUZZ_CHECK(rc == KCR_OK);
      kcr_errinfo_cleanup(&ei);
    }
  }
  free(text);
  kcr_arena_cleanup(&decoded);
  kcr_arena_cleanup(&arena);
}

static void table(const cJSON *list)
{
  cJSON *objs = cJSON_Duplicate(list, 1), *view = cJSON_CreateArray(), *it;

  FUZZ_CHECK(objs && view);
  FUZZ_CHECK(ebdman_status_sort(objs) == KCR_OK);
  FUZZ_CHECK(cJSON_GetArraySize(objs) == cJSON_GetArraySize(list));
  FUZZ_CHECK(ebdman_status_table(devnull, objs, true, 1780000000) == KCR_OK);
  FUZZ_CHECK(ebdman_status_table(devnull, objs, false, 0) == KCR_OK);
  /* The same objects as watch events: added, then deleted. */
  cJSON_ArrayForEach(it, list)
  {
    struct kcr_watch_event ev = {KCR_WATCH_ADDED, cJSON_Duplicate(it, 1), NULL};
    ebdman_status_apply(view, &ev);
    cJSON_Delete(ev.object);
  }
  cJSON_ArrayForEach(it, list)
  {
    struct kcr_watch_event ev = {KCR_WATCH_DELETED, cJSON_Duplicate(it, 1), NULL};
    ebdman_status_apply(view, &ev);
    cJSON_Delete(ev.object);
  }
  FUZZ_CHECK(cJSON_GetArraySize(view) == 0);
  cJSON_Delete(view);
  cJSON_Delete(objs);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  cJSON *doc = NULL, *list;

  if(kcr_json_parse((const char *)data, size, &doc, NULL))
    return 0;
  if(cJSON_IsArray(doc)) {
    table(doc);
  } else {
    children(doc);
    conditions(doc);
    list = cJSON_CreateArray();
    FUZZ_CHECK(list && cJSON_AddItemReferenceToArray(list, doc));
    table(list);
    cJSON_Delete(list);
  }
  cJSON_Delete(doc);
  return 0;
}
