/* DESIGN: the availability logic of ebdman as a pure function from what a
 * reconcile observed to the conditions it owns, so it is unit-tested
 * without a cluster. Level-based: computed from scratch every time.
 *
 * Installed, VFMHealthy and Ready are always there (Ready for `kubectl
 * wait`). For kstatus - what Flux, kpt and cli-utils judge health by - one
 * abnormal-true condition joins them while Ready is False, as Flux's own
 * controllers do (fluxcd/pkg apis/meta): Stalled=True when waiting will not
 * help (a child refused or someone else's, the VFM reports Failed: kstatus
 * says Failed), else Reconciling=True (kstatus: InProgress). Either carries
 * Ready's reason and message. With Ready True neither is present: the
 * convention says they MUST only be present when True (a False one is read
 * the same by kstatus, but would be one more condition to keep in step),
 * and the server-side apply of the status writer removes the one ebdman
 * stops sending. Invariants (Flux's own status checks): Ready is False
 * whenever one of them is True, and never both are present. */
#include <stdio.h>
#include <string.h>

#include "ebdman.h"

const struct kcr_gvr ebdman_ebds = {
    .group = EBDMAN_GROUP, .version = "v1alpha1", .resource = "ebds", .namespaced = true};
const struct kcr_gvr ebdman_vfms = {
    .group = EBDMAN_GROUP, .version = "v1alpha1", .resource = "vfms", .namespaced = true};
const struct kcr_gvr ebdman_configmaps = {
    .group = "", .version = "v1", .resource = "configmaps", .namespaced = true};

static void set(struct kcr_cond *c, const char *type, const char *status,
                const char *reason, const char *msg, int64_t gen)
{
  *c = (struct kcr_cond){.type = type,
                         .status = status,
                         .reason = reason,
                         .message = msg ? msg : "",
                         .observed_generation = gen};
}

/* msg when a condition can hold it, else its first KCR_COND_MESSAGE_MAX - 3
 * bytes (whole UTF-8 characters) and "..." in the arena: a longer message
 * fails validation, and the status would never be written. */
static const char *fit(const struct ebdman_observed *ob, const char *msg)
{
  size_t len = msg ? strlen(msg) : 0, keep;
  char *cut;

  if(len <= KCR_COND_MESSAGE_MAX)
    return msg;
  keep = kcr_event_note_cut(msg, len, KCR_COND_MESSAGE_MAX - 3);
  cut = ob->arena ? kcr_arena_alloc(ob->arena, keep + 4) : NULL;
  if(!cut)
    return "the message is longer than a condition can hold";
  memcpy(cut, msg, keep);
  memcpy(cut + keep, "...", 4);
  return cut;
}

/* VFMHealthy from the VFM's own Ready condition, as its owner reports it.
 * Returns whether the VFM reports that it failed (its owner gave up). */
static bool vfm_health(const struct ebdman_observed *ob, struct kcr_cond *c)
{
  struct kcr_cond ready;
  int64_t vgen;

  if(ob->vfm_read_error) {
    set(c, "VFMHealthy", "False", "Error", fit(ob, ob->vfm_read_error), ob->generation);
    return false;
  }
  if(!ob->vfm_seen || ob->applied_new_spec ||
     kcr_cond_get(ob->vfm_conditions, "Ready", &ready)) {
    set(c, "VFMHealthy", "False", "Progressing", "vfm custom resource is not ready",
        ob->generation);
    return false;
  }
  vgen = ob->vfm_generation;
  if(ready.observed_generation && ready.observed_generation < vgen) {
    /* The owner has not looked at the current spec yet. */
    set(c, "VFMHealthy", "False", "Progressing", "vfm custom resource is not ready",
        ob->generation);
  } else if(!strcmp(ready.status, "True")) {
    set(c, "VFMHealthy", "True", "Ready", "vfm custom resource is ready", ob->generation);
  } else if(!strcmp(ready.status, "False") && !strcmp(ready.reason, "Failed")) {
    set(c, "VFMHealthy", "False", "Error",
        *ready.message ? fit(ob, ready.message) : "vfm custom resource failed",
        ob->generation);
    return true;
  } else {
    set(c, "VFMHealthy", "False", "Progressing", "vfm custom resource is not ready",
        ob->generation);
  }
  return false;
}

void ebdman_observe_vfm(struct ebdman_observed *ob, const cJSON *vfm)
{
  ob->vfm_seen = vfm != NULL;
  ob->vfm_conditions = kcr_json_at(vfm, "/status/conditions");
  ob->vfm_generation = kcr_json_int(vfm, "/metadata/generation", 0);
}

void ebdman_observe_vfm_obj(struct ebdman_observed *ob, const kcr_obj *vfm, cJSON **hold)
{
  static const char *const paths[] = {"/metadata/name", "/status/conditions"};
  struct kcr_span sp[2];

  *hold = NULL;
  kcr_obj_spans(vfm, paths, sp, 2);
  if(!sp[0].at) { /* a text the walk cannot pass: the whole tree */
    if(kcr_obj_parse(vfm, hold))
      ob->vfm_read_error = "reading the vfm custom resource from the cache failed";
    else
      ebdman_observe_vfm(ob, *hold);
    return;
  }
  if(sp[1].at && kcr_json_parse(sp[1].at, sp[1].n, hold, NULL)) {
    ob->vfm_read_error = "reading the vfm custom resource from the cache failed";
    return;
  }
  ob->vfm_seen = true;
  ob->vfm_conditions = *hold;
  ob->vfm_generation = kcr_obj_generation(vfm);
}

size_t ebdman_conditions(const struct ebdman_observed *ob,
                         struct kcr_cond out[EBDMAN_NCOND])
{
  struct kcr_cond *inst = &out[EBDMAN_COND_INSTALLED], *vfm = &out[EBDMAN_COND_VFM],
                  *ready = &out[EBDMAN_COND_READY];
  bool vfm_failed;

  if(ob->install_failed)
    set(inst, "Installed", "False",
        ob->install_reason ? ob->install_reason : "InstallFailed",
        ob->install_error ? fit(ob, ob->install_error) : "installing the children failed",
        ob->generation);
  else
    set(inst, "Installed", "True", "Installed",
        "configmap and vfm custom resource applied", ob->generation);
  vfm_failed = vfm_health(ob, vfm);
  /* Ready summarises: True when both are, else the first that is not. */
  if(!strcmp(inst->status, "True") && !strcmp(vfm->status, "True")) {
    set(ready, "Ready", "True", "Ready", "ebd is ready", ob->generation);
    return EBDMAN_NCOND - 1;
  }
  const struct kcr_cond *first = strcmp(inst->status, "True") ? inst : vfm;
  set(ready, "Ready", "False", first->reason, first->message, ob->generation);
  /* Stalled when waiting will not help: not installed (a refusal, someone
   * else's child, a namespace being deleted) or the VFM's owner gave up. */
  set(&out[EBDMAN_COND_ABNORMAL],
      first == inst || vfm_failed ? EBDMAN_COND_STALLED : EBDMAN_COND_RECONCILING, "True",
      ready->reason, ready->message, ob->generation);
  return EBDMAN_NCOND;
}

/* A child of the EBD named `name`: apiVersion, kind, the EBD's namespace,
 * the managed-by and ebd labels, the EBD's annotations that start with
 * EBDMAN_VFM_ANNOTATION_PREFIX, and the controller ownerReference. Complete
 * or NULL (out of memory, or an EBD without a name). metadata.annotations is
 * read as the map it should be: any other JSON (an array, a string) carries
 * no annotation. */
static cJSON *child(const cJSON *ebd, const char *api_version, const char *kind,
                    const char *name)
{
  const char *ebd_name = kcr_json_str(ebd, "/metadata/name");
  const char *ns = kcr_json_str(ebd, "/metadata/namespace");
  const cJSON *anns = kcr_json_at(ebd, "/metadata/annotations"), *a;
  cJSON *o = cJSON_CreateObject(), *labels, *ann = NULL;
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  size_t plen = strlen(EBDMAN_VFM_ANNOTATION_PREFIX);
  bool ok;

  ok = o && ebd_name && name && cJSON_AddStringToObject(o, "apiVersion", api_version) &&
       cJSON_AddStringToObject(o, "kind", kind) &&
       !kcr_json_set_str(o, "/metadata/name", name) &&
       (!ns || !kcr_json_set_str(o, "/metadata/namespace", ns)) &&
       (labels = kcr_json_obj(o, "/metadata/labels")) &&
       cJSON_AddStringToObject(labels, "app.kubernetes.io/managed-by", "ebdman") &&
       cJSON_AddStringToObject(labels, "ebdman.example.com/ebd", ebd_name);
  anns = cJSON_IsObject(anns) ? anns : NULL;
  cJSON_ArrayForEach(a, anns)
  {
    if(ok && a->string && cJSON_IsString(a) &&
       !strncmp(a->string, EBDMAN_VFM_ANNOTATION_PREFIX, plen))
      ok = (ann || (ann = kcr_json_obj(o, "/metadata/annotations"))) &&
           cJSON_AddStringToObject(ann, a->string, a->valuestring);
  }
  ok = ok && !kcr_owner_set_controller(o, ebd, &ei);
  kcr_errinfo_cleanup(&ei);
  if(!ok) {
    cJSON_Delete(o);
    o = NULL;
  }
  return o;
}

cJSON *ebdman_configmap_for(const cJSON *ebd)
{
  char name[300];
  const char *ebd_name = kcr_json_str(ebd, "/metadata/name");
  const cJSON *cfg = kcr_json_at(ebd, "/spec/vfm/config");
  cJSON *o, *data;

  if(!ebd_name)
    return NULL;
  snprintf(name, sizeof(name), "%s-config", ebd_name);
  o = child(ebd, "v1", "ConfigMap", name);
  data = cJSON_IsObject(cfg) ? cJSON_Duplicate(cfg, 1) : cJSON_CreateObject();
  if(!o || !data || !cJSON_AddItemToObject(o, "data", data)) {
    cJSON_Delete(o);
    cJSON_Delete(data);
    return NULL;
  }
  return o;
}

cJSON *ebdman_vfm_for(const cJSON *ebd)
{
  const cJSON *spec = kcr_json_at(ebd, "/spec/vfm");
  cJSON *o = child(ebd, EBDMAN_API_VERSION, "VFM", kcr_json_str(ebd, "/metadata/name"));
  cJSON *s = cJSON_IsObject(spec) ? cJSON_Duplicate(spec, 1) : cJSON_CreateObject();
  if(!o || !s || !cJSON_AddItemToObject(o, "spec", s)) {
    cJSON_Delete(o);
    cJSON_Delete(s);
    return NULL;
  }
  return o;
}
