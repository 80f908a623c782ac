/* hello: the smallest useful controller on libkcr.
 *
 * For every ConfigMap labelled hello.kcr.io/greet=true it makes sure the
 * data key "greeting" says "Hello, <name>!" - the name its label
 * hello.kcr.io/name gives, else its own - and records which replica wrote
 * it under "greeter" and how many ConfigMaps greet that name under
 * "greeted", using server-side apply with its own field manager. Run two
 * replicas with --leader-elect and only one reconciles.
 *
 *   hello [--kubeconfig PATH] [--namespace NS] [--leader-elect] ... (see --help)
 *
 * The flags are kcr/cli.h's: the manager's and the log's under
 * controller-runtime's names, plus hello's own in a table. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "k8s.h" /* typed ConfigMaps: kcr_generate_types(... KINDS v1/ConfigMap) */
#include "kcr.h"
#include "kcr/controller.h"
#include "kcr/manager.h"

struct hello {
  kcr_manager *m;
  const char *identity;
};

#define NAME_LABEL "hello.kcr.io/name"
#define BY_NAME    KCR_INDEX_LABEL_PREFIX NAME_LABEL /* the informer's label index */

/* Every ConfigMap that greets the same name as cm, found by the label
 * index: their counts change when cm comes, goes or is relabelled (the map
 * sees the old object of an update too, so the old name's group hears of
 * it). The list's copies go into the call's arena a. */
static void map_same_name(const struct core_v1_config_map *cm, struct kcr_arena *a,
                          kcr_map_emit emit, void *ctx, void *ud)
{
  struct hello *h = ud;
  struct kcr_str name = KCR_MAP_STR(cm->metadata.labels, NAME_LABEL);
  struct core_v1_config_map *same;
  size_t n;

  if(name.n && !core_v1_config_map_list(h->m, NULL, BY_NAME, name, KCR_TYPED_COPY, a,
                                        &same, &n, NULL, NULL))
    for(size_t i = 0; i < n; i++)
      emit(same[i].metadata.namespace_.s, same[i].metadata.name.s, ctx);
}

static kcr_err reconcile(kcr_ctx *cx, const struct kcr_request *req,
                         struct kcr_result *res, void *ud)
{
  struct hello *h = ud;
  struct kcr_errinfo *ei = kcr_ctx_ei(cx); /* this reconcile's, like its arena */
  struct kcr_arena *a = kcr_ctx_arena(cx);
  struct core_v1_config_map cm, *same;
  size_t nsame = 1;
  /* A cached read from the manager's informer of ConfigMaps, as a typed
   * copy in the reconcile's arena (flags 0 with a kcr_obj ** instead of
   * NULL: a view that borrows the cached text, docs/typed-objects.md). */
  kcr_err rc =
      core_v1_config_map_get(h->m, req->ns, req->name, KCR_TYPED_COPY, a, &cm, NULL, ei);

  if(rc)
    return rc == KCR_ENOTFOUND ? KCR_OK : rc; /* not found: deleted, nothing to do */
  /* The label index finds the ConfigMaps that greet the same name. */
  struct kcr_str name = KCR_MAP_STR(cm.metadata.labels, NAME_LABEL);
  if(name.n)
    rc = core_v1_config_map_list(h->m, NULL, BY_NAME, name, KCR_TYPED_COPY, a, &same,
                                 &nsame, NULL, ei);
  else
    name = kcr_str_c(req->name);
  char *want = kcr_arena_printf(a, "Hello, %.*s!", KCR_STR_ARG(name));
  char *count = kcr_arena_printf(a, "%zu", nsame);
  if(!rc && (!want || !count))
    rc = KCR_ENOMEM;
  /* Level-based: write only when the observed state differs. */
  if(!rc && (!kcr_str_eq(KCR_MAP_STR(cm.data, "greeting"), want) ||
             !kcr_str_eq(KCR_MAP_STR(cm.data, "greeted"), count))) {
    /* What hello owns, and nothing else: server-side apply. */
    struct core_v1_config_map p;
    core_v1_config_map_init(&p);
    KCR_SET(p.metadata, name, kcr_str_c(req->name));
    KCR_SET(p.metadata, namespace_, kcr_str_c(req->ns));
    rc = KCR_SET_STRMAP(p, data, a, "greeted", count, "greeter", h->identity, "greeting",
                        want);
    if(!rc)
      rc = core_v1_config_map_apply(
          kcr_ctx_client(cx), &p,
          &(struct kcr_apply_opts){.field_manager = "hello", .force = true}, NULL, NULL,
          ei);
    /* The returned code is the kind of error (apierrors.IsNotFound & co.),
     * ei the server's Status: see docs/library-guide.md, "Handling API
     * errors". */
    if(rc == KCR_ENOTFOUND) { /* deleted meanwhile: nothing left to greet */
      rc = KCR_OK;
    } else if(rc == KCR_EFORBIDDEN &&
              kcr_errinfo_has_cause(ei, "NamespaceTerminating", NULL)) {
      rc = KCR_OK; /* the namespace is being deleted, and the ConfigMap with it */
    } else if(rc == KCR_EINVALID) { /* the same write would fail the same way */
      KCR_CLOG(cx, KCR_LOG_ERROR, "greeting refused by validation; not retrying",
               KCR_S("detail", ei->message));
      rc = KCR_ETERMINAL;
    } else if(!rc) { /* an error (a conflict, 429, 5xx ...): logged with ei's */
      KCR_CLOG(cx, KCR_LOG_INFO, "greeted"); /* message by the controller, retried */
    }
  }
  return rc;
}

int main(int argc, char **argv)
{
  struct kcr_config_opts co = {0};
  struct kcr_manager_opts mo = {
      .name = "hello", .metrics_addr = ":8080", .health_addr = ":8081"};
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  struct hello h = {0};
  const char *ns = NULL;
  int workers = 2;
  char idbuf[128];
  kcr_manager *m;
  kcr_controller *ctl = NULL;
  const struct kcr_flag flags[] = {
      {"namespace", KCR_FLAG_STRING, &ns, "watch one namespace (default: all)",
       .arg = "NS"},
      {"workers", KCR_FLAG_INT, &workers, "concurrent reconciles", .min = 1, .max = 64},
      {"identity", KCR_FLAG_STRING, &mo.identity,
       "this replica's name, in the Lease and the greeting (default: HOST_PID)",
       .arg = "ID"},
  };

  kcr_cli_parse_or_exit(
      &(struct kcr_cli){.prog = "hello",
                        .about =
                            "Greets every ConfigMap labelled hello.kcr.io/greet=true.",
                        .flags = flags,
                        .nflags = sizeof(flags) / sizeof(flags[0]),
                        .config = &co,
                        .manager = &mo,
                        .log = true},
      argc, argv);
  if(!mo.identity) {
    char host[64] = "hello";
    gethostname(host, sizeof(host) - 1);
    snprintf(idbuf, sizeof(idbuf), "%s_%d", host, (int)getpid());
    mo.identity = idbuf;
  }
  h.identity = mo.identity;
  kcr_err rc = kcr_config_load(&co, &mo.config, &ei);
  if(!rc)
    rc = kcr_manager_new(&mo, &m, &ei);
  kcr_config_free(mo.config); /* the manager's client holds its own reference */
  if(rc) {
    fprintf(stderr, "hello: %s\n", ei.message ? ei.message : kcr_strerror(rc));
    kcr_errinfo_cleanup(&ei);
    return 2;
  }
  struct kcr_informer_opts io = {.gvr = &core_v1_config_map_gvr,
                                 .ns = ns,
                                 .label_selector = "hello.kcr.io/greet=true"};
  kcr_informer *cms;
  h.m = m;
  if(kcr_manager_informer(m, &io, &cms, &ei) ||
     kcr_store_add_label_index(kcr_informer_store(cms), NAME_LABEL) ||
     kcr_controller_new(&(struct kcr_controller_opts){.name = "hello",
                                                      .workers = workers,
                                                      .reconcile = reconcile,
                                                      .ud = &h,
                                                      .client = kcr_manager_client(m),
                                                      .metrics = kcr_manager_metrics(m)},
                        &ctl, &ei) ||
     kcr_controller_for(ctl, cms, NULL) ||
     core_v1_config_map_watches(ctl, cms, map_same_name, &h, NULL) ||
     kcr_manager_add(m, ctl)) {
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
