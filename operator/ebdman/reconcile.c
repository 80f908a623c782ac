/* DESIGN: the EBD reconciler.
 *
 * reconcile(ns/name):
 *   1. read the EBD from the cache (gone or deleting: nothing to do - the
 *      garbage collector removes children through their ownerReferences);
 *   2. install without waiting: for each child (ConfigMap <name>-config, VFM
 *      <name>) compare the cached child with the desired one and server-side
 *      apply it only if it differs (deterministic names, idempotent, no
 *      request at steady state);
 *   3. observe the VFM in the cache, compute Installed / VFMHealthy / Ready
 *      (conditions.c) and write them with the SSA status writer, which sends
 *      nothing when nothing changed;
 *   4. record events for transitions (Installed, InstallFailed, BecameReady,
 *      BecameUnready).
 * Never polls: VFMs and ConfigMaps are watched and map to their owner EBD.
 *
 * Errors: a child the server refuses (422 schema, 403 RBAC, 404 missing
 * CRD) is reported as Installed=False/InstallFailed and not retried until
 * something changes; transient errors (5xx, timeouts) return the error so
 * the key is retried with backoff. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ebdman.h"
#include "kcr/events.h"

struct ebdman {
  kcr_informer *ebds, *vfms, *cms;
  kcr_status_writer *status;
  kcr_recorder *events;
};

/* Absent and {} are the same for maps the server may drop when empty. */
static bool same_map(const cJSON *a, const cJSON *b)
{
  bool ea = !a || (cJSON_IsObject(a) && !a->child), eb = !b || (cJSON_IsObject(b) && !b->child);
  if(ea || eb)
    return ea && eb;
  return cJSON_Compare(a, b, 1);
}

/* Does the cached child already look like `want` (content, annotations we
 * propagate, controller owner)? */
static bool child_up_to_date(kcr_informer *inf, const cJSON *want, const char *field)
{
  const char *ns = kcr_json_str(want, "metadata.namespace");
  const char *name = kcr_json_str(want, "metadata.name");
  kcr_obj *o = kcr_store_get(kcr_informer_store(inf), ns, name);
  cJSON *have;
  const cJSON *a, *want_refs;
  bool ok;

  if(!o)
    return false;
  have = kcr_obj_parse(o);
  want_refs = cJSON_GetArrayItem(kcr_json_at(want, "metadata.ownerReferences"), 0);
  ok = have && same_map(kcr_json_at(want, field), kcr_json_at(have, field)) &&
       kcr_obj_controller(o)->uid &&
       !strcmp(kcr_obj_controller(o)->uid, kcr_json_str(want_refs, "uid"));
  /* Propagated annotations: same set with the same values. */
  cJSON_ArrayForEach(a, kcr_json_at(want, "metadata.annotations"))
  {
    const char *v = kcr_json_member_str(kcr_json_at(have, "metadata.annotations"), a->string);
    ok = ok && v && !strcmp(v, a->valuestring);
  }
  cJSON_ArrayForEach(a, kcr_json_at(have, "metadata.annotations"))
  {
    if(!strncmp(a->string, EBDMAN_VFM_ANNOTATION_PREFIX, strlen(EBDMAN_VFM_ANNOTATION_PREFIX)))
      ok = ok && cJSON_GetObjectItemCaseSensitive(kcr_json_at(want, "metadata.annotations"),
                                                  a->string);
  }
  cJSON_Delete(have);
  kcr_obj_unref(o);
  return ok;
}

static bool permanent(kcr_err rc)
{
  return rc == KCR_EINVALID || rc == KCR_EFORBIDDEN || rc == KCR_EBADREQUEST ||
         rc == KCR_ENOTFOUND || rc == KCR_EUNAUTHORIZED || rc == KCR_EINVAL;
}

/* Applies one child if needed. Returns a transient error to retry, or OK
 * with failed and msg set for a permanent refusal. */
static kcr_err install(kcr_ctx *cx, kcr_informer *inf, const struct kcr_gvr *gvr,
                       cJSON *want, const char *field, bool *applied, bool *failed,
                       const char **msg)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  kcr_err rc;

  if(!want) {
    *failed = true;
    *msg = "out of memory building the children";
    return KCR_OK;
  }
  if(child_up_to_date(inf, want, field))
    return KCR_OK;
  rc = kcr_apply(kcr_ctx_client(cx),
                 &(struct kcr_ref){gvr, kcr_json_str(want, "metadata.namespace"),
                                   kcr_json_str(want, "metadata.name")},
                 want, EBDMAN_FIELD_MANAGER, true, NULL, &ei);
  if(!rc) {
    *applied = true;
    KCR_CLOG(cx, KCR_LOG_DEBUG, "applied child", KCR_S("kind", kcr_json_str(want, "kind")),
             KCR_S("child", kcr_json_str(want, "metadata.name")));
  } else if(permanent(rc)) {
    *failed = true;
    *msg = kcr_arena_printf(kcr_ctx_arena(cx), "%s %s: %s", kcr_json_str(want, "kind"),
                            kcr_json_str(want, "metadata.name"),
                            ei.message ? ei.message : kcr_strerror(rc));
    KCR_CLOG(cx, KCR_LOG_WARN, "child refused by the server",
             KCR_S("kind", kcr_json_str(want, "kind")), KCR_S("err", kcr_err_name(rc)),
             KCR_S("detail", ei.message));
    rc = KCR_OK;
  } else {
    KCR_CLOG(cx, KCR_LOG_WARN, "applying child failed; will retry",
             KCR_S("kind", kcr_json_str(want, "kind")), KCR_S("err", kcr_err_name(rc)),
             KCR_S("detail", ei.message));
  }
  kcr_errinfo_cleanup(&ei);
  return rc;
}

static void record(struct ebdman *e, const cJSON *ebd, const char *type, const char *reason,
                   const char *action, const char *note)
{
  struct kcr_event_ref ref = {EBDMAN_API_VERSION,
                              "EBD",
                              kcr_json_str(ebd, "metadata.namespace"),
                              kcr_json_str(ebd, "metadata.name"),
                              kcr_json_str(ebd, "metadata.uid"),
                              kcr_json_str(ebd, "metadata.resourceVersion")};
  if(e->events)
    kcr_recorder_eventf(e->events, &ref, type, reason, action, "%s", note);
}

/* Events for transitions between the stored and the new conditions. */
static void transitions(struct ebdman *e, kcr_ctx *cx, const cJSON *ebd,
                        const struct kcr_cond *now)
{
  const cJSON *old = kcr_json_at(ebd, "status.conditions");
  struct kcr_cond oi, orr;
  bool had_i = !kcr_cond_get(old, "Installed", &oi), had_r = !kcr_cond_get(old, "Ready", &orr);
  const struct kcr_cond *ni = &now[EBDMAN_COND_INSTALLED], *nr = &now[EBDMAN_COND_READY];

  if(!strcmp(ni->status, "True") && (!had_i || strcmp(oi.status, "True")))
    record(e, ebd, "Normal", "Installed", "Install", "configmap and vfm custom resource applied");
  if(!strcmp(ni->status, "False") &&
     (!had_i || strcmp(oi.status, "False") || strcmp(oi.message, ni->message)))
    record(e, ebd, "Warning", "InstallFailed", "Install", ni->message);
  if(!strcmp(nr->status, "True") && (!had_r || strcmp(orr.status, "True"))) {
    record(e, ebd, "Normal", "BecameReady", "Reconcile", "ebd is ready");
    KCR_CLOG(cx, KCR_LOG_INFO, "became ready");
  }
  if(had_r && !strcmp(orr.status, "True") && strcmp(nr->status, "True")) {
    char *note = kcr_arena_printf(kcr_ctx_arena(cx), "%s: %s", nr->reason, nr->message);
    record(e, ebd, "Warning", "BecameUnready", "Reconcile", note ? note : nr->reason);
    KCR_CLOG(cx, KCR_LOG_INFO, "became unready", KCR_S("reason", nr->reason));
  }
}

static kcr_err reconcile(kcr_ctx *cx, const struct kcr_request *req, struct kcr_result *res,
                         void *ud)
{
  struct ebdman *e = ud;
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  struct ebdman_observed ob = {0};
  struct kcr_cond conds[EBDMAN_NCOND];
  enum kcr_write_result wr;
  kcr_obj *o = kcr_store_get(kcr_informer_store(e->ebds), req->ns, req->name), *vo;
  cJSON *ebd = NULL, *cm = NULL, *vfm = NULL, *vfm_seen = NULL;
  bool applied_cm = false;
  kcr_err rc = KCR_OK;

  if(!o)
    return KCR_OK; /* deleted: children go with it (ownerReferences) */
  if(kcr_obj_deleting(o))
    goto out;
  if(!(ebd = kcr_obj_parse(o))) {
    rc = KCR_ENOMEM;
    goto out;
  }
  ob.generation = kcr_obj_generation(o);
  cm = ebdman_configmap_for(ebd);
  vfm = ebdman_vfm_for(ebd);
  rc = install(cx, e->cms, &ebdman_configmaps, cm, "data", &applied_cm, &ob.install_failed,
               &ob.install_error);
  if(!rc && !ob.install_failed)
    rc = install(cx, e->vfms, &ebdman_vfms, vfm, "spec", &ob.applied_new_spec,
                 &ob.install_failed, &ob.install_error);
  if(rc)
    goto out; /* transient: retried with backoff */
  vo = kcr_store_get(kcr_informer_store(e->vfms), req->ns, req->name);
  if(vo && !(vfm_seen = kcr_obj_parse(vo)))
    ob.vfm_read_error = "reading the vfm custom resource from the cache failed";
  kcr_obj_unref(vo);
  ob.vfm = vfm_seen;
  ebdman_conditions(&ob, conds);
  struct kcr_status_desired d = {conds, EBDMAN_NCOND, true, ob.generation, NULL};
  rc = kcr_status_write(e->status, ebd, &d, &wr, &ei);
  if(rc) {
    KCR_CLOG(cx, KCR_LOG_ERROR, "status write failed", KCR_S("err", kcr_err_name(rc)),
             KCR_S("detail", ei.message));
    goto out;
  }
  if(wr == KCR_WRITE_WRITTEN) {
    KCR_CLOG(cx, KCR_LOG_DEBUG, "status written",
             KCR_S("ready", conds[EBDMAN_COND_READY].status),
             KCR_S("reason", conds[EBDMAN_COND_READY].reason),
             KCR_I("observedGeneration", ob.generation));
    transitions(e, cx, ebd, conds);
  }
out:
  (void)res;
  cJSON_Delete(vfm_seen);
  cJSON_Delete(cm);
  cJSON_Delete(vfm);
  cJSON_Delete(ebd);
  kcr_obj_unref(o);
  kcr_errinfo_cleanup(&ei);
  return rc;
}

int ebdman_run(const struct ebdman_run_opts *ro)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  struct kcr_manager_opts mo = {.name = "ebdman",
                                .metrics_addr = ro->metrics_addr,
                                .health_addr = ro->health_addr,
                                .leader_elect = ro->leader_elect,
                                .lease_namespace = ro->lease_ns,
                                .lease_name = "ebdman-leader"};
  struct ebdman e = {0};
  kcr_manager *m = NULL;
  kcr_controller *ctl = NULL;
  kcr_err rc;
  int status = 1;

  rc = kcr_config_load(&(struct kcr_config_opts){.kubeconfig = ro->kubeconfig}, &mo.config,
                       &ei);
  if(!rc)
    rc = kcr_manager_new(&mo, &m, &ei);
  if(rc) {
    fprintf(stderr, "ebdman: %s\n", ei.message ? ei.message : kcr_strerror(rc));
    kcr_errinfo_cleanup(&ei);
    return 2;
  }
  struct kcr_informer_opts ebds = {.gvr = &ebdman_ebds, .ns = ro->ns,
                                   .resync_ms = ro->resync_ms};
  struct kcr_informer_opts vfms = {.gvr = &ebdman_vfms, .ns = ro->ns};
  struct kcr_informer_opts cms = {.gvr = &ebdman_configmaps, .ns = ro->ns,
                                  .label_selector = "app.kubernetes.io/managed-by=ebdman"};
  struct kcr_status_writer_opts so = {kcr_manager_client(m), &ebdman_ebds,
                                      EBDMAN_API_VERSION, "EBD", EBDMAN_FIELD_MANAGER,
                                      KCR_STATUS_APPLY, .metrics = kcr_manager_metrics(m)};
  struct kcr_recorder_opts eo = {.client = kcr_manager_client(m),
                                 .reporting_controller = "ebdman.example.com/ebdman",
                                 .metrics = kcr_manager_metrics(m)};
  if(kcr_manager_informer(m, &ebds, &e.ebds) || kcr_manager_informer(m, &vfms, &e.vfms) ||
     kcr_manager_informer(m, &cms, &e.cms) || kcr_status_writer_new(&so, &e.status) ||
     kcr_recorder_new(&eo, &e.events) ||
     kcr_controller_new(&(struct kcr_controller_opts){.name = "ebd",
                                                     .workers = ro->workers,
                                                     .reconcile = reconcile,
                                                     .ud = &e,
                                                     .client = kcr_manager_client(m),
                                                     .metrics = kcr_manager_metrics(m)},
                        &ctl) ||
     kcr_controller_for(ctl, e.ebds, NULL, 0) ||
     kcr_controller_owns(ctl, e.vfms, EBDMAN_GROUP, "EBD") ||
     kcr_controller_owns(ctl, e.cms, EBDMAN_GROUP, "EBD") || kcr_manager_add(m, ctl)) {
    fprintf(stderr, "ebdman: setting up the controller failed\n");
    kcr_controller_free(ctl);
    goto out;
  }
  status = kcr_manager_run(m);
out:
  kcr_manager_free(m); /* stops controllers before the writer and recorder go */
  kcr_recorder_free(e.events);
  kcr_status_writer_free(e.status);
  return status;
}
