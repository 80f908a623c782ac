/* first: a whole controller in one file, the one docs/getting-started.md
 * walks through. For every ConfigMap labelled first.kcr.io/echo=true it
 * copies data key "ping" to "pong", with server-side apply.
 *
 *   first [--kubeconfig PATH] [--leader-elect] ... (see --help) */
#include <stdio.h>

#include "k8s.h" /* typed ConfigMaps: kcr_generate_types(... KINDS v1/ConfigMap) */
#include "kcr.h"

static kcr_manager *m;

static kcr_err reconcile(kcr_ctx *cx, const struct kcr_request *req,
                         struct kcr_result *res, void *ud)
{
  struct kcr_errinfo *ei = kcr_ctx_ei(cx); /* this reconcile's, like its arena */
  struct core_v1_config_map cm;
  kcr_obj *o;
  /* A cached read as a typed view: it borrows from o until kcr_obj_unref. */
  kcr_err rc =
      core_v1_config_map_get(m, req->ns, req->name, 0, kcr_ctx_arena(cx), &cm, &o, ei);

  if(rc)
    return rc == KCR_ENOTFOUND ? KCR_OK : rc; /* not found: deleted, nothing to do */
  struct kcr_str ping = KCR_MAP_STR(cm.data, "ping"); /* s NULL: no such key */
  /* Level-based: write only when what is there differs from what should be. */
  if(ping.s && !kcr_str_same(KCR_MAP_STR(cm.data, "pong"), ping)) {
    struct kcr_str key = kcr_str_c("pong");
    struct core_v1_config_map want;
    core_v1_config_map_init(&want); /* only the fields this controller owns */
    KCR_SET(want.metadata, name, kcr_str_c(req->name));
    KCR_SET(want.metadata, namespace_, kcr_str_c(req->ns));
    KCR_SET(want, data, ((struct kcr_strmap){.k = &key, .v = &ping, .n = 1}));
    rc = core_v1_config_map_apply(kcr_ctx_client(cx), &want,
                                  &(struct kcr_apply_opts){.field_manager = "first"},
                                  NULL, NULL, ei);
    if(rc == KCR_ENOTFOUND) /* deleted meanwhile */
      rc = KCR_OK;
  }
  kcr_obj_unref(o);
  return rc; /* an error: logged with ei's message, the key retried with backoff */
}

int main(int argc, char **argv)
{
  struct kcr_config_opts co = {0};
  struct kcr_manager_opts mo = {.name = "first"};
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  kcr_informer *cms;
  kcr_controller *ctl = NULL;

  /* --kubeconfig, --leader-elect, --metrics-bind-address, -v ... */
  kcr_cli_parse_or_exit(&(struct kcr_cli){.prog = "first",
                                          .about = "Copies ping to pong in ConfigMaps.",
                                          .config = &co,
                                          .manager = &mo,
                                          .log = true},
                        argc, argv);
  kcr_err rc = kcr_config_load(&co, &mo.config, &ei);
  if(!rc)
    rc = kcr_manager_new(&mo, &m, &ei);
  kcr_config_free(mo.config); /* the manager holds its own reference */
  if(rc) {
    fprintf(stderr, "first: %s\n", ei.message ? ei.message : kcr_strerror(rc));
    return 2;
  }
  struct kcr_informer_opts io = {.gvr = &core_v1_config_map_gvr,
                                 .label_selector = "first.kcr.io/echo=true"};
  if(kcr_manager_informer(m, &io, &cms, &ei) ||
     kcr_controller_new(&(struct kcr_controller_opts){.name = "first",
                                                      .reconcile = reconcile,
                                                      .client = kcr_manager_client(m),
                                                      .metrics = kcr_manager_metrics(m)},
                        &ctl, &ei) ||
     kcr_controller_for(ctl, cms, NULL) || kcr_manager_add(m, ctl)) {
    fprintf(stderr, "first: %s\n", ei.message ? ei.message : "setting up failed");
    kcr_errinfo_cleanup(&ei);
    kcr_controller_free(ctl); /* not the manager's: adding it failed or never came */
    kcr_manager_free(m);
    return 1;
  }
  int status = kcr_manager_run(m); /* until SIGTERM or SIGINT; drains first */
  kcr_manager_free(m);
  return status;
}
