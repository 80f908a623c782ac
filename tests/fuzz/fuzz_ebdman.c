/* The operator's pure functions on any EBD: the children it applies
 * (ebdman_configmap_for, ebdman_vfm_for), the conditions it reports
 * (ebdman_conditions, with the input also standing for the VFM observed and
 * the message of its Installed condition for the server's refusal), and
 * `ebdman status`'s table, sort and watch bookkeeping.
 * Input: JSON, the EBD (an array: a list of EBDs for the table).
 * Checked: for an EBD with apiVersion, kind, metadata.name and
 * metadata.uid both children are built, named after it (ConfigMap
 * "<name>-config"), in its namespace, with exactly one ownerReference, the
 * controller one, to it, carrying its spec (VFM) and spec.vfm.config
 * (ConfigMap data) and no annotation without the vfm-sim prefix; every
 * condition computed passes kcr_cond_validate (what the status write
 * requires); a child the texts judge kept as is (ebdman_child_kept_as_is)
 * is one ebdman_child_plan keeps, for the child as made and for the input
 * standing for the cached child. */
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

static void check_child(const cJSON *ebd, const cJSON *o, const char *kind,
                        const char *want_name)
{
  const cJSON *refs = kcr_json_at(o, "/metadata/ownerReferences"), *ref, *a;
  const char *ns = kcr_json_str(ebd, "/metadata/namespace");
  kcr_obj *obj = NULL;
  char *text;
  cJSON *back = NULL;

  FUZZ_CHECK(!strcmp(kcr_json_str(o, "/kind"), kind));
  if(want_name)
    FUZZ_CHECK(!strcmp(kcr_json_str(o, "/metadata/name"), want_name));
  FUZZ_CHECK(!ns == !kcr_json_str(o, "/metadata/namespace"));
  FUZZ_CHECK(!ns || !strcmp(ns, kcr_json_str(o, "/metadata/namespace")));
  FUZZ_CHECK(cJSON_GetArraySize(refs) == 1);
  ref = cJSON_GetArrayItem(refs, 0);
  FUZZ_CHECK(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(ref, "controller")));
  FUZZ_CHECK(!strcmp(kcr_json_str(ref, "/uid"), kcr_json_str(ebd, "/metadata/uid")));
  FUZZ_CHECK(!strcmp(kcr_json_str(ref, "/name"), kcr_json_str(ebd, "/metadata/name")));
  cJSON_ArrayForEach(a, kcr_json_at(o, "/metadata/annotations"))
  {
    FUZZ_CHECK(!strncmp(a->string, EBDMAN_VFM_ANNOTATION_PREFIX,
                        strlen(EBDMAN_VFM_ANNOTATION_PREFIX)));
  }
  /* What is sent reads back the same, and the cache can hold it. */
  text = kcr_json_to_text(o);
  FUZZ_CHECK(text);
  FUZZ_CHECK(kcr_json_parse(text, strlen(text), &back, NULL) == KCR_OK);
  FUZZ_CHECK(fuzz_same_json(back, o));
  /* (A name that is empty as a C string: "\u0000x" is never served.) */
  if(*kcr_json_str(o, "/metadata/name")) {
    FUZZ_CHECK(kcr_obj_from_json(o, 0, &obj, NULL) == KCR_OK);
    kcr_obj_unref(obj);
  }
  cJSON_Delete(back);
  free(text);
}

/* The text judges a child kept as is (ebdman_child_kept_as_is) only where
 * the trees do (ebdman_child_plan KEEP), as reconcile reads them: the EBD
 * and the child from their stored texts, the child wanted built from the
 * stored EBD - for the child as made, and for the input itself standing
 * for the cached child (without a key twice in it, which the API server
 * never sends). */
static void judged_by_text(const cJSON *ebd, cJSON *(*build)(const cJSON *),
                           const char *field, const char *src)
{
  const char *ep[] = {"/metadata/name", src, "/metadata/annotations"},
             *hp[] = {"/metadata/name", field, "/metadata/annotations"};
  struct kcr_span e[3], h[3];
  kcr_obj *eo = NULL, *ho = NULL;
  cJSON *et = NULL, *want;

  if(kcr_obj_from_json(ebd, 0, &eo, NULL))
    return;
  FUZZ_CHECK(kcr_obj_parse(eo, &et) == KCR_OK);
  kcr_obj_spans(eo, ep, e, 3);
  want = build(et);
  const cJSON *haves[] = {want, ebd};
  for(int i = 0; i < 2 && want; i++) {
    cJSON *ht = NULL;
    if(kcr_obj_from_json(haves[i], 0, &ho, NULL))
      continue;
    kcr_obj_spans(ho, hp, h, 3);
    FUZZ_CHECK(kcr_obj_parse(ho, &ht) == KCR_OK);
    /* (identical content with a key twice is no match for cJSON_Compare:
     * the API server never sends one) */
    if(e[0].at && h[0].at && !fuzz_has_duplicate_keys_deep(ht) &&
       ebdman_child_kept_as_is(kcr_obj_uid(eo), &e[1], &e[2], kcr_obj_controller(ho)->uid,
                               &h[1], &h[2]))
      FUZZ_CHECK(ebdman_child_plan(ht, want, field) == EBDMAN_CHILD_KEEP);
    cJSON_Delete(ht);
    kcr_obj_unref(ho);
  }
  cJSON_Delete(want);
  cJSON_Delete(et);
  kcr_obj_unref(eo);
}

static void children(const cJSON *ebd)
{
  const char *name = kcr_json_str(ebd, "/metadata/name");
  const char *uid = kcr_json_str(ebd, "/metadata/uid");
  cJSON *cm = ebdman_configmap_for(ebd), *vfm = ebdman_vfm_for(ebd);
  const cJSON *spec = kcr_json_at(ebd, "/spec/vfm");
  const cJSON *cfg = kcr_json_at(ebd, "/spec/vfm/config");
  char cm_name[512];

  if(name && uid && *uid && kcr_json_str(ebd, "/apiVersion") &&
     kcr_json_str(ebd, "/kind")) {
    FUZZ_CHECK(cm && vfm);
  }
  if(cm) {
    snprintf(cm_name, sizeof(cm_name), "%s-config", name);
    check_child(ebd, cm, "ConfigMap", strlen(name) <= 253 ? cm_name : NULL);
    if(cJSON_IsObject(cfg))
      FUZZ_CHECK(fuzz_same_json(kcr_json_at(cm, "/data"), cfg));
    judged_by_text(ebd, ebdman_configmap_for, "/data", "/spec/vfm/config");
  }
  if(vfm) {
    check_child(ebd, vfm, "VFM", name);
    if(cJSON_IsObject(spec))
      FUZZ_CHECK(fuzz_same_json(kcr_json_at(vfm, "/spec"), spec));
    judged_by_text(ebd, ebdman_vfm_for, "/spec", "/spec/vfm");
  }
  cJSON_Delete(cm);
  cJSON_Delete(vfm);
}

static void conditions(const cJSON *ebd)
{
  struct kcr_cond installed, out[EBDMAN_NCOND];
  struct kcr_arena arena = KCR_ARENA_INIT;
  struct ebdman_observed ob = {.generation =
                                   kcr_json_int(ebd, "/metadata/generation", 0)};
  bool had_installed = kcr_cond_get(kcr_json_at(ebd, "/status/conditions"), "Installed",
                                    &installed) == KCR_OK;

  if(ob.generation < 0) /* the API server never serves one */
    ob.generation = 0;
  for(int variant = 0; variant < 4; variant++) {
    ob.install_failed = variant == 1;
    ob.install_error = variant == 1 && had_installed ? installed.message : NULL;
    ob.applied_new_spec = variant == 2;
    ebdman_observe_vfm(&ob, variant == 3 ? NULL : ebd);
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
