/* kcr-watch: list a resource, then watch it, printing one line per change.
 * A small tour of the libkcr client: config loading, paged LIST, WATCH from
 * the list's resourceVersion, re-watch on server timeout, relist on 410. */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kcr.h"

static kcr_watch *volatile current;
static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
  stop = 1;
  if(current)
    kcr_watch_cancel(current);
}

static void usage(FILE *f)
{
  fprintf(f,
          "usage: kcr-watch [options] [RESOURCE]\n"
          "List RESOURCE (default: configmaps), then watch it and print each change.\n\n"
          "  --kubeconfig PATH   kubeconfig file (default: $KUBECONFIG, ~/.kube/config,\n"
          "                      then in-cluster)\n"
          "  --context NAME      kubeconfig context (default: current-context)\n"
          "  -n, --namespace NS  one namespace (default: all)\n"
          "  --group G           API group (default: core)\n"
          "  --api-version V     API version (default: v1)\n"
          "  --cluster-scoped    the resource is not namespaced\n"
          "  --for SECONDS       stop after this long (default: until Ctrl-C)\n"
          "  -h, --help          this help\n");
}

static kcr_err print_item(const cJSON *item, void *ud)
{
  const char *ns = kcr_json_str(item, "metadata.namespace");
  printf("%-9s %s%s%s rv=%s\n", "LISTED", ns ? ns : "", ns ? "/" : "",
         kcr_json_str(item, "metadata.name"),
         kcr_json_str(item, "metadata.resourceVersion"));
  return KCR_OK;
}

static kcr_err print_event(struct kcr_watch_event *ev, void *ud)
{
  const char *ns = kcr_json_str(ev->object, "metadata.namespace");
  if(ev->type == KCR_WATCH_BOOKMARK)
    return KCR_OK;
  printf("%-9s %s%s%s rv=%s\n", kcr_watch_type_name(ev->type), ns ? ns : "",
         ns ? "/" : "", kcr_json_str(ev->object, "metadata.name"),
         ev->resource_version ? ev->resource_version : "");
  fflush(stdout);
  return KCR_OK;
}

int main(int argc, char **argv)
{
  static const struct option opts[] = {{"kubeconfig", required_argument, NULL, 'k'},
                                       {"context", required_argument, NULL, 'c'},
                                       {"namespace", required_argument, NULL, 'n'},
                                       {"group", required_argument, NULL, 'g'},
                                       {"api-version", required_argument, NULL, 'v'},
                                       {"cluster-scoped", no_argument, NULL, 's'},
                                       {"for", required_argument, NULL, 'f'},
                                       {"help", no_argument, NULL, 'h'},
                                       {NULL, 0, NULL, 0}};
  struct kcr_config_opts co = {0};
  struct kcr_gvr gvr = {"", "v1", "configmaps", true};
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  const char *ns = NULL;
  long seconds = 0;
  kcr_config *cfg = NULL;
  kcr_client *c;
  char *rv = NULL;
  int opt, status = 0;

  while((opt = getopt_long(argc, argv, "n:h", opts, NULL)) != -1) {
    switch(opt) {
    case 'k': co.kubeconfig = optarg; break;
    case 'c': co.context = optarg; break;
    case 'n': ns = optarg; break;
    case 'g': gvr.group = optarg; break;
    case 'v': gvr.version = optarg; break;
    case 's': gvr.namespaced = false; break;
    case 'f': {
      char *end;
      seconds = strtol(optarg, &end, 10);
      if(*end || seconds <= 0) {
        fprintf(stderr,
                "kcr-watch: --for needs a positive number of seconds, got "
                "\"%s\"\n",
                optarg);
        return 2;
      }
      break;
    }
    case 'h': usage(stdout); return 0;
    default: usage(stderr); return 2;
    }
  }
  if(optind < argc)
    gvr.resource = argv[optind++];
  if(optind < argc) {
    fprintf(stderr, "kcr-watch: unexpected argument \"%s\"\n", argv[optind]);
    return 2;
  }
  kcr_err rc = kcr_config_load(&co, &cfg, &ei);
  if(!rc)
    rc = kcr_client_new(&(struct kcr_client_opts){.config = cfg}, &c, &ei);
  kcr_config_free(cfg); /* the client holds its own reference */
  if(rc) {
    fprintf(stderr, "kcr-watch: %s\n", ei.message ? ei.message : kcr_strerror(rc));
    kcr_errinfo_cleanup(&ei);
    return 2;
  }
  signal(SIGINT, on_signal);
  signal(SIGTERM, on_signal);
  signal(SIGALRM, on_signal);
  if(seconds)
    alarm((unsigned)seconds);
  setvbuf(stdout, NULL, _IOLBF, 0);

  struct kcr_ref ref = {&gvr, ns};
  while(!stop) {
    kcr_watch *w;
    rc = kcr_list_each(c, &ref, NULL, print_item, NULL, &rv, &ei);
    if(rc) {
      fprintf(stderr, "kcr-watch: list %s: %s: %s\n", gvr.resource, kcr_strerror(rc),
              ei.message ? ei.message : "");
      status = 1;
      break;
    }
    struct kcr_watch_opts wo = {.client = c,
                                .ref = &ref,
                                .on_event = print_event,
                                .resource_version = rv,
                                .allow_bookmarks = true,
                                .timeout_ms = 60000};
    if((rc = kcr_watch_new(&wo, &w, &ei))) {
      fprintf(stderr, "kcr-watch: %s\n", ei.message ? ei.message : kcr_strerror(rc));
      status = 1;
      break;
    }
    current = w;
    if(stop)
      kcr_watch_cancel(w);
    do /* re-watch from the last resourceVersion after each server timeout */
      rc = kcr_watch_run(w, &ei);
    while(rc == KCR_OK && !stop);
    current = NULL;
    kcr_watch_free(w);
    if(rc == KCR_EGONE) {
      printf("(history compacted: listing again)\n");
      continue;
    }
    if(rc != KCR_ECANCELED) {
      fprintf(stderr, "kcr-watch: watch: %s: %s\n", kcr_strerror(rc),
              ei.message ? ei.message : "");
      status = 1;
    }
    break;
  }
  free(rv);
  kcr_errinfo_cleanup(&ei);
  kcr_client_free(c);
  return status;
}
