/* ebdman's children (children.c): a child is ours only when its controller
 * ownerReference names our EBD's uid; anything else holding the name is
 * someone else's and is never applied to; every apply carries the
 * precondition that keeps it from doing more than was decided; a conflict
 * is reported as Installed=False/ChildConflict naming the object and who
 * owns it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ebdman.h"
#include "ebdman_adapt.h"
#include "runtime/projection-int.h"
#include "tfail.h"

#define EBD_JSON                                                                         \
  "{\"apiVersion\":\"ebdman.example.com/v1beta1\",\"kind\":\"EBD\",\"metadata\":{"       \
  "\"name\":\"web\",\"namespace\":\"team\",\"uid\":\"ebd-uid\",\"annotations\":{"        \
  "\"vfm-sim.ebdman.example.com/delay\":\"1s\"}},\"spec\":{\"vfmTemplate\":{"            \
  "\"image\":\"img\",\"replicas\":2,\"config\":{\"k\":\"v\"}}}}"

/* The EBD's wanted ConfigMap and VFM. */
struct fix {
  cJSON *ebd, *cm, *vfm;
};

static int setup(void **state)
{
  static struct fix f;
  f.ebd = cJSON_Parse(EBD_JSON);
  f.cm = child_for(f.ebd, false);
  f.vfm = child_for(f.ebd, true);
  assert_non_null(f.cm);
  assert_non_null(f.vfm);
  *state = &f;
  return 0;
}

static int teardown(void **state)
{
  struct fix *f = *state;
  cJSON_Delete(f->ebd);
  cJSON_Delete(f->cm);
  cJSON_Delete(f->vfm);
  adapt_cleanup();
  return 0;
}

/* A stored copy of want: what the server holds after our apply (plus the
 * fields the server adds). */
static cJSON *stored(const cJSON *want)
{
  cJSON *h = cJSON_Duplicate(want, 1);
  assert_int_equal(KCR_OK, kcr_json_set_str(h, "/metadata/uid", "child-uid"));
  assert_int_equal(KCR_OK, kcr_json_set_str(h, "/metadata/resourceVersion", "4242"));
  return h;
}

/* Replaces have's ownerReferences with refs (JSON text; NULL: none). */
static void set_owners(cJSON *have, const char *refs)
{
  cJSON *meta = cJSON_GetObjectItemCaseSensitive(have, "metadata");
  cJSON_DeleteItemFromObjectCaseSensitive(meta, "ownerReferences");
  if(refs)
    cJSON_AddItemToObject(meta, "ownerReferences", cJSON_Parse(refs));
}

static void an_absent_child_is_created(void **state)
{
  struct fix *f = *state;
  assert_int_equal(EBDMAN_CHILD_CREATE, plan_of(NULL, f->cm, "/data"));
  assert_int_equal(EBDMAN_CHILD_CREATE, plan_of(NULL, f->vfm, "/spec"));
}

static void our_child_as_wanted_is_kept_and_otherwise_updated(void **state)
{
  struct fix *f = *state;
  cJSON *h = stored(f->vfm);

  assert_int_equal(EBDMAN_CHILD_KEEP, plan_of(h, f->vfm, "/spec"));
  assert_true(same_content(h, f->vfm, "/spec"));
  /* What others add (status, their labels and annotations) is no change. */
  assert_int_equal(KCR_OK, kcr_json_set_str(h, "/metadata/labels/team", "x"));
  assert_int_equal(KCR_OK, kcr_json_set_str(h, "/metadata/annotations/note", "x"));
  assert_int_equal(KCR_OK, kcr_json_set_str(h, "/status/phase", "x"));
  assert_int_equal(EBDMAN_CHILD_KEEP, plan_of(h, f->vfm, "/spec"));
  /* A propagated annotation that changed, went or came: update, content
   * the same. */
  cJSON *ann = kcr_json_at(h, "/metadata/annotations");
  cJSON_ReplaceItemInObjectCaseSensitive(ann, "vfm-sim.ebdman.example.com/delay",
                                         cJSON_CreateString("2s"));
  assert_int_equal(EBDMAN_CHILD_UPDATE, plan_of(h, f->vfm, "/spec"));
  cJSON_AddStringToObject(ann, "vfm-sim.ebdman.example.com/fail", "x");
  cJSON_DeleteItemFromObjectCaseSensitive(ann, "vfm-sim.ebdman.example.com/delay");
  assert_int_equal(EBDMAN_CHILD_UPDATE, plan_of(h, f->vfm, "/spec"));
  cJSON_DeleteItemFromObjectCaseSensitive(kcr_json_at(h, "/metadata"), "annotations");
  assert_int_equal(EBDMAN_CHILD_UPDATE, plan_of(h, f->vfm, "/spec"));
  assert_true(same_content(h, f->vfm, "/spec"));
  /* Another spec: update, content new. */
  assert_int_equal(KCR_OK, kcr_json_set_str(h, "/spec/image", "other"));
  assert_int_equal(EBDMAN_CHILD_UPDATE, plan_of(h, f->vfm, "/spec"));
  assert_false(same_content(h, f->vfm, "/spec"));
  assert_false(same_content(NULL, f->vfm, "/spec"));
  cJSON_Delete(h);
}

/* A child's metadata.annotations that is not a map of strings (which the
 * apiserver never stores) does not decode as the child: install plans it
 * as absent, and the create-only apply then finds it (409) and reads it,
 * which fails with the error naming the member (Installed=False) - never
 * a crash on members without names (item 20: the old reconcile.c compared
 * a NULL key with strncmp). */
static void a_child_whose_annotations_are_not_a_map_does_not_decode(void **state)
{
  struct fix *f = *state;
  static const char *const shapes[] = {
      "[\"x\"]", "[{\"vfm-sim.ebdman.example.com/delay\":\"1s\"}]", "\"x\"",
      "7",       "{\"vfm-sim.ebdman.example.com/delay\":1}",
  };

  for(size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++) {
    cJSON *h = stored(f->vfm), *meta = kcr_json_at(h, "/metadata");
    void *typed;
    cJSON_ReplaceItemInObjectCaseSensitive(meta, "annotations", cJSON_Parse(shapes[i]));
    assert_int_equal(KCR_EPARSE, typed_try(&vfm_type, h, &typed));
    assert_null(typed);
    assert_int_equal(EBDMAN_CHILD_CREATE, plan_of(h, f->vfm, "/spec"));
    cJSON_Delete(h);
  }
}

/* The child as the server returns it - with what the apiserver, other
 * writers and vfm-sim add - then cut down by the cache's keep-list. */
static cJSON *cached_copy(const cJSON *want, const char *const *keep)
{
  cJSON *h = stored(want), *out = NULL;
  struct kcr__proj *p = NULL;
  char *text;

  assert_int_equal(KCR_OK, kcr_json_set_str(h, "/metadata/labels/team", "x"));
  assert_int_equal(KCR_OK, kcr_json_set_str(h, "/metadata/annotations/note", "x"));
  assert_int_equal(
      KCR_OK, kcr_json_set_str(h, "/metadata/creationTimestamp", "2024-01-01T00:00:00Z"));
  assert_non_null(kcr_json_add_int(kcr_json_at(h, "/metadata"), "generation", 3));
  assert_int_equal(KCR_OK, kcr_json_set_str(h, "/status/phase", "Running"));
  cJSON_AddItemToObject(kcr_json_at(h, "/status"), "conditions",
                        cJSON_Parse("[{\"type\":\"Ready\",\"status\":\"True\","
                                    "\"observedGeneration\":3,\"reason\":\"Ready\","
                                    "\"message\":\"\",\"lastTransitionTime\":"
                                    "\"2024-01-01T00:00:00Z\"}]"));
  assert_int_equal(KCR_OK, kcr__proj_new(keep, 0, &p));
  struct kcr_buf b = KCR_BUF_INIT;
  assert_int_equal(KCR_OK, kcr__proj_print(p, h, &b));
  assert_non_null(text = kcr_buf_take(&b));
  assert_int_equal(KCR_OK, kcr_json_parse(text, strlen(text), &out, NULL));
  free(text);
  kcr__proj_free(p);
  cJSON_Delete(h);
  return out;
}

/* The caches keep what ebdman reads of its children: a projected child as
 * wanted is kept, one that differs in what ebdman sets is updated, one
 * that is someone else's is a conflict, and the projected VFM's Ready is
 * the EBD's VFMHealthy - as for the whole objects. */
static void projected_children_are_judged_as_whole_ones(void **state)
{
  struct fix *f = *state;
  cJSON *cm = cached_copy(f->cm, ebdman_configmap_keep),
        *vfm = cached_copy(f->vfm, vfm_keep);
  struct ebdman_observed ob = {.generation = 1, .arena = &ta};
  void *vt;
  assert_int_equal(KCR_OK, typed_try(&vfm_type, vfm, &vt));
  ebdman_observe_vfm(&ob, vt);
  struct kcr_cond conds[EBDMAN_NCOND];

  assert_null(kcr_json_at(vfm, "/metadata/labels")); /* it is projected */
  assert_null(kcr_json_at(vfm, "/status/phase"));
  assert_int_equal(EBDMAN_CHILD_KEEP, plan_of(cm, f->cm, "/data"));
  assert_int_equal(EBDMAN_CHILD_KEEP, plan_of(vfm, f->vfm, "/spec"));
  ebdman_conditions(&ob, conds);
  assert_string_equal("True", conds[EBDMAN_COND_VFM].status);
  /* the uid the update is pinned to is there */
  cJSON *w = cJSON_Duplicate(f->vfm, 1);
  assert_int_equal(KCR_OK, precondition(w, EBDMAN_CHILD_UPDATE, vfm));
  assert_string_equal("child-uid", kcr_json_str(w, "/metadata/uid"));
  cJSON_Delete(w);
  /* a propagated annotation and the content are compared */
  cJSON_ReplaceItemInObjectCaseSensitive(kcr_json_at(vfm, "/metadata/annotations"),
                                         "vfm-sim.ebdman.example.com/delay",
                                         cJSON_CreateString("2s"));
  assert_int_equal(EBDMAN_CHILD_UPDATE, plan_of(vfm, f->vfm, "/spec"));
  assert_int_equal(KCR_OK, kcr_json_set_str(cm, "/data/k", "other"));
  assert_int_equal(EBDMAN_CHILD_UPDATE, plan_of(cm, f->cm, "/data"));
  /* whose it is */
  set_owners(cm, "[{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"name\":\"p\","
                 "\"uid\":\"pod-uid\",\"controller\":true}]");
  assert_int_equal(EBDMAN_CHILD_CONFLICT, plan_of(cm, f->cm, "/data"));
  cJSON_Delete(cm);
  cJSON_Delete(vfm);
}

/* Each way a child-named object can be someone else's: never applied to. */
static void someone_elses_object_is_a_conflict(void **state)
{
  struct fix *f = *state;
  static const char *const owners[] = {
      NULL, /* made with kubectl: no owner at all */
      "[]",
      /* another controller */
      "[{\"apiVersion\":\"apps/v1\",\"kind\":\"Deployment\",\"name\":\"web\","
      "\"uid\":\"dep-uid\",\"controller\":true}]",
      /* our EBD, but not as controller (someone added it by hand) */
      "[{\"apiVersion\":\"ebdman.example.com/"
      "v1alpha1\",\"kind\":\"EBD\",\"name\":\"web\","
      "\"uid\":\"ebd-uid\"}]",
      "[{\"apiVersion\":\"ebdman.example.com/"
      "v1alpha1\",\"kind\":\"EBD\",\"name\":\"web\","
      "\"uid\":\"ebd-uid\",\"controller\":false}]",
      /* an EBD of the same name that was deleted: another uid */
      "[{\"apiVersion\":\"ebdman.example.com/"
      "v1alpha1\",\"kind\":\"EBD\",\"name\":\"web\","
      "\"uid\":\"old-uid\",\"controller\":true}]",
      /* our EBD as a plain owner, another controller */
      "[{\"apiVersion\":\"ebdman.example.com/"
      "v1alpha1\",\"kind\":\"EBD\",\"name\":\"web\","
      "\"uid\":\"ebd-uid\"},{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"name\":\"p\","
      "\"uid\":\"pod-uid\",\"controller\":true}]",
  };
  for(size_t i = 0; i < sizeof(owners) / sizeof(owners[0]); i++) {
    cJSON *cm = stored(f->cm), *v = stored(f->vfm);
    set_owners(cm, owners[i]);
    set_owners(v, owners[i]);
    if(plan_of(cm, f->cm, "/data") != EBDMAN_CHILD_CONFLICT ||
       plan_of(v, f->vfm, "/spec") != EBDMAN_CHILD_CONFLICT)
      fail_msg("owners %s: not a conflict", owners[i] ? owners[i] : "(none)");
    /* Even when it holds exactly what we want. */
    cJSON_Delete(cm);
    cJSON_Delete(v);
  }
  /* ownerReferences that are not an array (the apiserver stores none): the
   * child does not decode, and is planned as absent - the create-only apply
   * finds it and the GET's decoding fails, so it is never applied to. */
  cJSON *odd = stored(f->cm);
  void *t;
  set_owners(odd, "{\"uid\":\"ebd-uid\",\"controller\":true}");
  assert_int_equal(KCR_EPARSE, typed_try(&core_v1_config_map_type, odd, &t));
  cJSON_Delete(odd);
  /* A want without our controller reference (never made so) owns nothing. */
  cJSON *w = cJSON_Duplicate(f->cm, 1), *h = stored(f->cm);
  set_owners(w, NULL);
  assert_int_equal(EBDMAN_CHILD_CONFLICT, plan_of(h, w, "/data"));
  cJSON_Delete(w);
  cJSON_Delete(h);
}

static void a_create_is_create_only_and_an_update_is_pinned_to_the_uid(void **state)
{
  struct fix *f = *state;
  cJSON *w = cJSON_Duplicate(f->vfm, 1), *h = stored(f->vfm);

  assert_int_equal(KCR_OK, precondition(w, EBDMAN_CHILD_CREATE, NULL));
  assert_string_equal(EBDMAN_CREATE_ONLY_RV,
                      kcr_json_str(w, "/metadata/resourceVersion"));
  assert_null(kcr_json_at(w, "/metadata/uid"));
  /* After a refused create, the update replaces the precondition. */
  assert_int_equal(KCR_OK, precondition(w, EBDMAN_CHILD_UPDATE, h));
  assert_string_equal("child-uid", kcr_json_str(w, "/metadata/uid"));
  assert_null(kcr_json_at(w, "/metadata/resourceVersion"));
  /* And back. */
  assert_int_equal(KCR_OK, precondition(w, EBDMAN_CHILD_CREATE, h));
  assert_null(kcr_json_at(w, "/metadata/uid"));
  assert_string_equal(EBDMAN_CREATE_ONLY_RV,
                      kcr_json_str(w, "/metadata/resourceVersion"));
  /* The rest of the body is the wanted child. */
  cJSON_DeleteItemFromObjectCaseSensitive(kcr_json_at(w, "/metadata"), "resourceVersion");
  assert_true(cJSON_Compare(w, f->vfm, 1));
  /* No request without a precondition. */
  assert_int_equal(KCR_EINVAL, precondition(w, EBDMAN_CHILD_KEEP, h));
  assert_int_equal(KCR_EINVAL, precondition(w, EBDMAN_CHILD_CONFLICT, h));
  assert_int_equal(KCR_EINVAL, precondition(w, EBDMAN_CHILD_UPDATE, NULL));
  cJSON_DeleteItemFromObjectCaseSensitive(kcr_json_at(h, "/metadata"), "uid");
  assert_int_equal(KCR_EINVAL, precondition(w, EBDMAN_CHILD_UPDATE, h));
  cJSON_Delete(w);
  cJSON_Delete(h);
}

static void the_conflict_message_names_the_object_and_its_owners(void **state)
{
  struct fix *f = *state;
  char msg[1024];
  cJSON *h = stored(f->cm);

  set_owners(h, NULL);
  cJSON_AddItemToObject(
      kcr_json_at(h, "/metadata"), "managedFields",
      cJSON_Parse("[{\"manager\":\"kubectl-create\",\"operation\":\"Update\"},"
                  "{\"manager\":\"vfm-sim\",\"operation\":\"Apply\","
                  "\"subresource\":\"status\"},"
                  "{\"manager\":\"kubectl-edit\",\"operation\":\"Update\"},"
                  "{\"manager\":\"kubectl-create\",\"operation\":\"Apply\"}]"));
  conflict_msg(msg, sizeof(msg), f->cm, h);
  assert_string_equal(
      "ConfigMap team/web-config exists and is not this EBD's (it has no owner; written "
      "by "
      "kubectl-create, kubectl-edit): ebdman does not take over an object it did not "
      "create; delete or rename that ConfigMap, or use another EBD name",
      msg);

  set_owners(h, "[{\"apiVersion\":\"apps/v1\",\"kind\":\"Deployment\",\"name\":\"web\","
                "\"uid\":\"dep-uid\",\"controller\":true}]");
  cJSON_DeleteItemFromObjectCaseSensitive(kcr_json_at(h, "/metadata"), "managedFields");
  conflict_msg(msg, sizeof(msg), f->vfm, h);
  assert_string_equal(
      "VFM team/web exists and is not this EBD's (its controller is "
      "Deployment web (uid dep-uid)): ebdman does not take over an object "
      "it did not create; delete or rename that VFM, or use another EBD name",
      msg);

  set_owners(h,
             "[{\"kind\":\"EBD\",\"name\":\"web\",\"uid\":\"ebd-uid\"},{\"kind\":\"Pod\","
             "\"name\":\"p\",\"uid\":\"pod-uid\"}]");
  conflict_msg(msg, sizeof(msg), f->vfm, h);
  assert_non_null(strstr(msg,
                         "(it has no controller; its owners are EBD web (uid ebd-uid), "
                         "Pod p (uid pod-uid)):"));

  /* Cut, never overrun, always terminated. */
  char small[24];
  memset(small, 'x', sizeof(small));
  conflict_msg(small, 20, f->vfm, h);
  assert_string_equal("VFM team/web exists", small);
  assert_int_equal('x', small[20]);
  cJSON_Delete(h);
}

static void a_conflict_is_installed_false_child_conflict(void **state)
{
  struct ebdman_observed ob = {.generation = 3,
                               .install_failed = true,
                               .install_reason = EBDMAN_REASON_CHILD_CONFLICT,
                               .install_error =
                                   "VFM team/web exists and is not this EBD's"};
  struct kcr_cond c[EBDMAN_NCOND];

  ebdman_conditions(&ob, c);
  assert_string_equal("False", c[EBDMAN_COND_INSTALLED].status);
  assert_string_equal("ChildConflict", c[EBDMAN_COND_INSTALLED].reason);
  assert_string_equal(ob.install_error, c[EBDMAN_COND_INSTALLED].message);
  assert_string_equal("ChildConflict", c[EBDMAN_COND_READY].reason);
  assert_string_equal(ob.install_error, c[EBDMAN_COND_READY].message);
  assert_int_equal(KCR_OK, kcr_cond_validate(&c[EBDMAN_COND_INSTALLED], NULL));
  /* Without a reason, a refusal stays InstallFailed. */
  ob.install_reason = NULL;
  ebdman_conditions(&ob, c);
  assert_string_equal("InstallFailed", c[EBDMAN_COND_INSTALLED].reason);
}

/* ebdman_child_kept_as_is on the stored texts of an EBD and of a cached
 * child (have, projected as the informer keeps it); *plan gets what
 * ebdman_child_plan says of the same texts as trees. */
static bool kept_as_is(const cJSON *ebd, const cJSON *want, const cJSON *have,
                       const char *const *keep, const char *field, const char *src,
                       enum ebdman_child_plan *plan)
{
  const char *ep[] = {src, "/metadata/annotations"},
             *hp[] = {field, "/metadata/annotations"};
  struct kcr_span e[2], h[2];
  kcr_obj *eo = NULL, *ho = NULL;
  struct kcr__proj *p = NULL;
  struct kcr_buf b = KCR_BUF_INIT;
  cJSON *cached = NULL, *ht = NULL;
  bool kept;

  /* As the informer keeps it. */
  assert_int_equal(KCR_OK, kcr__proj_new(keep, 0, &p));
  assert_int_equal(KCR_OK, kcr__proj_print(p, have, &b));
  assert_int_equal(KCR_OK, kcr_json_parse(b.ptr, b.len, &cached, NULL));
  kcr_buf_cleanup(&b);
  kcr__proj_free(p);
  assert_int_equal(KCR_OK, kcr_obj_from_json(ebd, 0, &eo, NULL));
  assert_int_equal(KCR_OK, kcr_obj_from_json(cached, 0, &ho, NULL));
  kcr_obj_spans(eo, ep, e, 2);
  kcr_obj_spans(ho, hp, h, 2);
  kept = ebdman_child_kept_as_is(kcr_obj_uid(eo), &e[0], &e[1],
                                 kcr_obj_controller(ho)->uid, &h[0], &h[1]);
  assert_int_equal(KCR_OK, kcr_obj_parse(ho, &ht));
  *plan = plan_of(ht, want, field);
  cJSON_Delete(ht);
  cJSON_Delete(cached);
  kcr_obj_unref(eo);
  kcr_obj_unref(ho);
  return kept;
}

/* The text alone says KEEP only where the trees do (ebdman_child_plan), and
 * says it for a child as ebdman made it from an EBD without annotations to
 * propagate - what most reconciles find: over EBDs with and without the
 * parts the children copy and with annotations of every kind, and children
 * changed in every way the plan looks at. */
static void the_text_keeps_a_child_only_where_the_trees_do(void **state)
{
  /* As the apiserver writes them: members sorted (Go's encoding/json of a
   * map), as are the CRD's properties, which kcr-gen encodes in order. */
  static const char *const ebds[] = {
      "{}",
      "{\"vfmTemplate\":{\"config\":{\"a\":\"1\",\"b\":\"2\"},\"image\":\"i\","
      "\"replicas\":1}}",
      "{\"vfmTemplate\":{\"config\":{},\"image\":\"i\"}}",
      "{\"vfmTemplate\":{}}",
      "{\"vfmTemplate\":{\"config\":{\"k\":\"\\u2028\"},\"image\":\"caf\\u00e9 "
      "\\\"q\\\"\"}}",
  };
  static const char *const anns[] = {
      NULL,
      "{}",
      "{\"note\":\"x\"}",
      "{\"vfm-sim.ebdman.example.com/delay\":\"1s\"}",
      "{\"note\":\"vfm-sim.ebdman.example.com/x\"}",
      "{\"n\\u006fte\":\"x\"}",
  };
  /* What happens to the stored child: nothing, then one change each. */
  enum {
    AS_MADE,
    CONTENT_CHANGED,
    SAME_LENGTH_VALUE,
    CONTENT_EMPTIED,
    CONTENT_GONE,
    CONTENT_REORDERED,
    PROPAGATED_ADDED,
    OTHER_ANNOTATION,
    ANNOTATIONS_NOT_A_MAP,
    OTHER_CONTROLLER,
    NO_OWNER,
    NCHANGE
  };
  for(size_t i = 0; i < sizeof(ebds) / sizeof(ebds[0]); i++)
    for(size_t a = 0; a < sizeof(anns) / sizeof(anns[0]); a++)
      for(int kind = 0; kind < 2; kind++)
        for(int ch = 0; ch < NCHANGE; ch++) {
          cJSON *ebd = cJSON_Parse(EBD_JSON), *meta, *want, *have, *content;
          const char *field = kind ? "spec" : "data", *ptr = kind ? "/spec" : "/data";
          enum ebdman_child_plan plan;
          /* As made, and no annotation the EBD's text shows to propagate
           * (anns[4] names the prefix in a value: the text cannot tell). */
          bool kept, plain = ch == AS_MADE && a != 3 && a != 4;

          meta = cJSON_GetObjectItemCaseSensitive(ebd, "metadata");
          cJSON_DeleteItemFromObjectCaseSensitive(meta, "annotations");
          if(anns[a])
            cJSON_AddItemToObject(meta, "annotations", cJSON_Parse(anns[a]));
          cJSON_ReplaceItemInObjectCaseSensitive(ebd, "spec", cJSON_Parse(ebds[i]));
          want = child_for(ebd, kind);
          assert_non_null(want);
          have = stored(want);
          content = cJSON_GetObjectItemCaseSensitive(have, field);
          switch(ch) {
          case CONTENT_CHANGED:
            cJSON_AddItemToObject(content, "added", cJSON_CreateString("x"));
            break;
          case SAME_LENGTH_VALUE: /* one string changed, none longer */
            for(cJSON *m = content ? content->child : NULL; m; m = m->next)
              if(cJSON_IsString(m) && *m->valuestring) {
                m->valuestring[0] = m->valuestring[0] == 'x' ? 'y' : 'x';
                break;
              }
            break;
          case CONTENT_EMPTIED:
            cJSON_ReplaceItemInObjectCaseSensitive(have, field, cJSON_CreateObject());
            break;
          case CONTENT_GONE: cJSON_DeleteItemFromObjectCaseSensitive(have, field); break;
          case CONTENT_REORDERED:
            if(content->child && content->child->next) /* the last first */
              cJSON_AddItemToObject(content, "zz",
                                    cJSON_DetachItemViaPointer(content, content->child));
            break;
          case PROPAGATED_ADDED:
            cJSON_AddItemToObject(kcr_json_obj(have, "/metadata/annotations"),
                                  "vfm-sim.ebdman.example.com/x",
                                  cJSON_CreateString("y"));
            break;
          case OTHER_ANNOTATION:
            cJSON_AddItemToObject(kcr_json_obj(have, "/metadata/annotations"), "note",
                                  cJSON_CreateString("y"));
            break;
          case ANNOTATIONS_NOT_A_MAP:
            cJSON_DeleteItemFromObjectCaseSensitive(
                cJSON_GetObjectItemCaseSensitive(have, "metadata"), "annotations");
            cJSON_AddItemToObject(cJSON_GetObjectItemCaseSensitive(have, "metadata"),
                                  "annotations", cJSON_Parse("[]"));
            break;
          case OTHER_CONTROLLER:
            set_owners(have, "[{\"apiVersion\":\"ebdman.example.com/v1beta1\","
                             "\"kind\":\"EBD\",\"name\":\"web\",\"uid\":\"old-uid\","
                             "\"controller\":true}]");
            break;
          case NO_OWNER: set_owners(have, NULL); break;
          }
          kept =
              kept_as_is(ebd, want, have, kind ? vfm_keep : ebdman_configmap_keep, ptr,
                         kind ? "/spec/vfmTemplate" : "/spec/vfmTemplate/config", &plan);
          if(kept && plan != EBDMAN_CHILD_KEEP)
            fail_msg("kept as is by the text, plan %d by the trees: spec %s, "
                     "annotations %s, %s, change %d",
                     plan, ebds[i], anns[a] ? anns[a] : "none", field, ch);
          if(plain && !kept)
            fail_msg("as made and nothing to propagate, yet not kept by the text: spec "
                     "%s, annotations %s, %s",
                     ebds[i], anns[a] ? anns[a] : "none", field);
          cJSON_Delete(have);
          cJSON_Delete(want);
          cJSON_Delete(ebd);
        }
}

/* A part of the EBD its child copies that is there but no object (which the
 * CRD's schema refuses) does not decode: the text never keeps such a child,
 * so the reconcile decodes the EBD and reports why it cannot build it. */
static void a_part_that_is_no_object_is_never_kept_by_the_text(void **state)
{
  static const char *const parts[] = {"\"x\"", "[]", "7", "null"};
  struct kcr_span none = {0}, empty = {.at = "{}", .n = 2};

  for(size_t i = 0; i < sizeof(parts) / sizeof(parts[0]); i++) {
    struct kcr_span src = {.at = parts[i], .n = strlen(parts[i])};
    assert_false(ebdman_child_kept_as_is("u", &src, &none, "u", &none, &none));
    assert_false(ebdman_child_kept_as_is("u", &src, &none, "u", &empty, &none));
  }
  (void)state;
}

int main(void)
{
  tfail_init();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(an_absent_child_is_created),
      cmocka_unit_test(our_child_as_wanted_is_kept_and_otherwise_updated),
      cmocka_unit_test(a_child_whose_annotations_are_not_a_map_does_not_decode),
      cmocka_unit_test(projected_children_are_judged_as_whole_ones),
      cmocka_unit_test(the_text_keeps_a_child_only_where_the_trees_do),
      cmocka_unit_test(a_part_that_is_no_object_is_never_kept_by_the_text),
      cmocka_unit_test(someone_elses_object_is_a_conflict),
      cmocka_unit_test(a_create_is_create_only_and_an_update_is_pinned_to_the_uid),
      cmocka_unit_test(the_conflict_message_names_the_object_and_its_owners),
      cmocka_unit_test(a_conflict_is_installed_false_child_conflict),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
