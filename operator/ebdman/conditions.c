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
    .group = EBDMAN_GROUP, .version = "v1beta1", .resource = "ebds", .namespaced = true};
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

/* The VFM's message as a condition's: copied (the VFM's strings are not C
 * strings) and, when longer than a condition holds, cut (fit). */
static const char *fit_str(const struct ebdman_observed *ob, struct kcr_str msg,
                           const char *none)
{
  char *c;

  if(!msg.n)
    return none;
  if(!ob->arena || !(c = kcr_arena_alloc(ob->arena, msg.n + 1)))
    return none;
  memcpy(c, msg.s, msg.n);
  c[msg.n] = '\0';
  return fit(ob, c);
}

/* VFMHealthy from the VFM's own Ready condition, as its owner reports it.
 * Returns whether the VFM reports that it failed (its owner gave up). */
static bool vfm_health(const struct ebdman_observed *ob, struct kcr_cond *c)
{
  const struct vfm_status_conditions_item *ready = ob->vfm_ready;

  if(ob->vfm_read_error) {
    set(c, "VFMHealthy", "False", "Error", fit(ob, ob->vfm_read_error), ob->generation);
    return false;
  }
  if(!ob->vfm_seen || ob->applied_new_spec || !ready ||
     (ready->observed_generation && ready->observed_generation < ob->vfm_generation)) {
    /* not there yet, or its owner has not looked at the current spec */
    set(c, "VFMHealthy", "False", "Progressing", "vfm custom resource is not ready",
        ob->generation);
  } else if(ready->status.v == VFM_STATUS_CONDITIONS_ITEM_STATUS_TRUE) {
    set(c, "VFMHealthy", "True", "Ready", "vfm custom resource is ready", ob->generation);
  } else if(ready->status.v == VFM_STATUS_CONDITIONS_ITEM_STATUS_FALSE &&
            kcr_str_eq(ready->reason, "Failed")) {
    set(c, "VFMHealthy", "False", "Error",
        fit_str(ob, ready->message, "vfm custom resource failed"), ob->generation);
    return true;
  } else {
    set(c, "VFMHealthy", "False", "Progressing", "vfm custom resource is not ready",
        ob->generation);
  }
  return false;
}

void ebdman_observe_vfm(struct ebdman_observed *ob, const struct vfm *vfm)
{
  const struct vfm_status_conditions *cs = vfm ? &vfm->status.conditions : NULL;

  ob->vfm_seen = vfm != NULL;
  ob->vfm_ready = NULL;
  for(size_t i = 0; cs && i < cs->n && !ob->vfm_ready; i++)
    if(kcr_str_eq(cs->v[i].type, "Ready"))
      ob->vfm_ready = &cs->v[i];
  ob->vfm_generation = vfm ? vfm->metadata.generation : 0;
}

void ebdman_observe_vfm_obj(struct ebdman_observed *ob, const kcr_obj *vfm,
                            struct kcr_arena *a, struct vfm *hold)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;

  if(vfm_from_obj(vfm, 0, a, hold, &ei)) {
    ob->vfm_read_error = a ? kcr_arena_printf(a,
                                              "reading the vfm custom resource from "
                                              "the cache failed: %s",
                                              ei.message ? ei.message : "out of memory")
                           : NULL;
    if(!ob->vfm_read_error)
      ob->vfm_read_error = "reading the vfm custom resource from the cache failed";
  } else {
    ebdman_observe_vfm(ob, hold);
  }
  kcr_errinfo_cleanup(&ei);
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
