/* hello: the smallest useful controller on libkcr.
 *
 * For every ConfigMap labelled hello.kcr.io/greet=true it makes sure the
 * data key "greeting" says "Hello, <name>!" (and records which replica
 * wrote it under "greeter"), using server-side apply with its own field
 * manager. Run two replicas with --leader-elect and only one reconciles.
 *
 *   hello [--kubeconfig PATH] [--namespace NS] [--leader-elect] ... (see --help) */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kcr.h"
#include "kcr/controller.h"
#include "kcr/manager.h"

static const struct kcr_gvr configmaps = {"", "v1", "configmaps", true};

struct hello {
  kcr_informer *cms;
  const char *identity;
};

static kcr_err reconcile(kcr_ctx *cx, const struct kcr_request *req,
                         struct kcr_result *res, void *ud)
{
  struct hello *h = ud;
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  kcr_obj *o = kcr_store_ref(kcr_informer_store(h->cms), req->ns, req->name);
  char *want;
  cJSON *cur, *patch;
  kcr_err rc = KCR_OK;

  if(!o) /* deleted: nothing to do */
    return KCR_OK;
  want = kcr_arena_printf(kcr_ctx_arena(cx), "Hello, %s!", req->name);
  kcr_obj_parse(o, &cur); /* NULL: out of memory */
  kcr_obj_unref(o);
  if(!cur || !want) {
    cJSON_Delete(cur);
    return KCR_ENOMEM;
  }
  /* Level-based: write only when the observed state differs. */
  const char *have = kcr_json_str(cur, "data.greeting");
  if(!have || strcmp(have, want)) {
    patch = cJSON_CreateObject();
    cJSON_AddStringToObject(patch, "apiVersion", "v1");
    cJSON_AddStringToObject(patch, "kind", "ConfigMap");
    kcr_json_set_str(patch, "metadata.name", req->name);
    kcr_json_set_str(patch, "metadata.namespace", req->ns);
    kcr_json_set_str(patch, "data.greeting", want);
    kcr_json_set_str(patch, "data.greeter", h->identity);
    rc = kcr_apply(kcr_ctx_client(cx), &(struct kcr_ref){&configmaps, req->ns, req->name},
                   patch, "hello", true, NULL, &ei);
    cJSON_Delete(patch);
    if(rc)
      KCR_CLOG(cx, KCR_LOG_ERROR, "apply failed", KCR_S("err", kcr_err_name(rc)),
               KCR_S("detail", ei.message));
    else
      KCR_CLOG(cx, KCR_LOG_INFO, "greeted");
  }
  cJSON_Delete(cur);
  kcr_errinfo_cleanup(&ei);
  return rc == KCR_ENOTFOUND ? KCR_OK : rc;
}

static void usage(FILE *f)
{
  fprintf(
      f,
      "usage: hello [options]\n"
      "Greets every ConfigMap labelled hello.kcr.io/greet=true.\n\n"
      "  --kubeconfig PATH                  kubeconfig (default: $KUBECONFIG, "
      "~/.kube/config, in-cluster)\n"
      "  --namespace NS                     watch one namespace (default: all)\n"
      "  --workers N                        concurrent reconciles (default 2)\n"
      "  --leader-elect                     run leader election (one active replica)\n"
      "  --lease-namespace NS               namespace of the Lease (default: default)\n"
      "  --identity ID                      this replica's name in the Lease\n"
      "  --lease-duration DUR               default 15s\n"
      "  --renew-deadline DUR               default 10s\n"
      "  --retry-period DUR                 default 2s\n"
      "  --metrics-bind-address ADDR        default :8080 (\"0\" disables)\n"
      "  --health-probe-bind-address ADDR   default :8081\n"
      "  --log-level LEVEL                  debug, info, warn, error\n"
      "  -h, --help                         this help\n");
}

static int bad(const char *flag, const char *v)
{
  fprintf(stderr, "hello: invalid value \"%s\" for %s\n", v, flag);
  return 2;
}

int main(int argc, char **argv)
{
  enum {
    O_KC = 1,
    O_NS,
    O_WORKERS,
    O_LE,
    O_LNS,
    O_ID,
    O_LD,
    O_RD,
    O_RP,
    O_MET,
    O_HEALTH,
    O_LOG
  };
  static const struct option opts[] = {
      {"kubeconfig", required_argument, NULL, O_KC},
      {"namespace", required_argument, NULL, O_NS},
      {"workers", required_argument, NULL, O_WORKERS},
      {"leader-elect", no_argument, NULL, O_LE},
      {"lease-namespace", required_argument, NULL, O_LNS},
      {"identity", required_argument, NULL, O_ID},
      {"lease-duration", required_argument, NULL, O_LD},
      {"renew-deadline", required_argument, NULL, O_RD},
      {"retry-period", required_argument, NULL, O_RP},
      {"metrics-bind-address", required_argument, NULL, O_MET},
      {"health-probe-bind-address", required_argument, NULL, O_HEALTH},
      {"log-level", required_argument, NULL, O_LOG},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0}};
  struct kcr_config_opts co = {0};
  struct kcr_manager_opts mo = {.name = "hello",
                                .metrics_addr = ":8080",
                                .health_addr = ":8081",
                                .lease_namespace = "default"};
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  struct hello h = {0};
  const char *ns = NULL;
  int workers = 2, opt, lvl;
  char *end, idbuf[128];
  kcr_manager *m;
  kcr_controller *ctl = NULL;

  while((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
    switch(opt) {
    case O_KC: co.kubeconfig = optarg; break;
    case O_NS: ns = optarg; break;
    case O_WORKERS:
      workers = (int)strtol(optarg, &end, 10);
      if(*end || workers < 1 || workers > 64)
        return bad("--workers", optarg);
      break;
    case O_LE: mo.leader_elect = true; break;
    case O_LNS: mo.lease_namespace = optarg; break;
    case O_ID: mo.identity = optarg; break;
    case O_LD:
      if(kcr_duration_parse(optarg, &mo.lease_duration_ms))
        return bad("--lease-duration", optarg);
      break;
    case O_RD:
      if(kcr_duration_parse(optarg, &mo.renew_deadline_ms))
        return bad("--renew-deadline", optarg);
      break;
    case O_RP:
      if(kcr_duration_parse(optarg, &mo.retry_period_ms))
        return bad("--retry-period", optarg);
      break;
    case O_MET: mo.metrics_addr = optarg; break;
    case O_HEALTH: mo.health_addr = optarg; break;
    case O_LOG:
      if((lvl = kcr_log_level_parse(optarg)) < 0)
        return bad("--log-level", optarg);
      kcr_log_set_level((enum kcr_log_level)lvl);
      break;
    case 'h': usage(stdout); return 0;
    default: usage(stderr); return 2;
    }
  }
  if(optind < argc) {
    fprintf(stderr, "hello: unexpected argument \"%s\"\n", argv[optind]);
    return 2;
  }
  if(!mo.identity) {
    char host[64] = "hello";
    gethostname(host, sizeof(host) - 1);
    snprintf(idbuf, sizeof(idbuf), "%s_%d", host, (int)getpid());
    mo.identity = idbuf;
  }
  h.identity = mo.identity;
  if(kcr_config_load(&co, &mo.config, &ei) || kcr_manager_new(&mo, &m, &ei)) {
    fprintf(stderr, "hello: %s\n", ei.message ? ei.message : "cannot start");
    kcr_errinfo_cleanup(&ei);
    return 2;
  }
  struct kcr_informer_opts io = {
      .gvr = &configmaps, .ns = ns, .label_selector = "hello.kcr.io/greet=true"};
  if(kcr_manager_informer(m, &io, &h.cms, &ei) ||
     kcr_controller_new(&(struct kcr_controller_opts){.name = "hello",
                                                      .workers = workers,
                                                      .reconcile = reconcile,
                                                      .ud = &h,
                                                      .client = kcr_manager_client(m),
                                                      .metrics = kcr_manager_metrics(m)},
                        &ctl, &ei) ||
     kcr_controller_for(ctl, h.cms, NULL) || kcr_manager_add(m, ctl)) {
    fprintf(stderr, "hello: setting up the controller failed%s%s\n",
            ei.message ? ": " : "", ei.message ? ei.message : "");
    kcr_errinfo_cleanup(&ei);
    kcr_controller_free(ctl); /* not the manager's: adding it failed or never came */
    kcr_manager_free(m);
    return 1;
  }
  int status = kcr_manager_run(m);
  kcr_manager_free(m);
  return status;
}
