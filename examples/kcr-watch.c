/* kcr-watch: list a resource, then watch it, printing one line per change.
 * A small tour of the libkcr client: config loading, paged LIST, WATCH from
 * the list's resourceVersion, re-watch on server timeout, relist on 410. */
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kcr.h"

static kcr_watch *volatile current;
static volatile sig_atomic_t stop;
/* --label KEY: the pointer to that label ("/metadata/labels/" and the key
 * with '~' and '/' escaped: "app.kubernetes.io/name" is one member). */
static const char *label_key;
static struct kcr_buf label_path = KCR_BUF_INIT;

static void on_signal(int sig)
{
  stop = 1;
  if(current)
    kcr_watch_cancel(current);
}

static void print_line(const char *what, const cJSON *o, const char *rv)
{
  const char *ns = kcr_json_str(o, "/metadata/namespace"), *label = NULL;
  if(label_key)
    label = kcr_json_str(o, kcr_buf_str(&label_path));
  printf("%-9s %s%s%s rv=%s%s%s%s%s\n", what, ns ? ns : "", ns ? "/" : "",
         kcr_json_str(o, "/metadata/name"), rv ? rv : "", label_key ? " " : "",
         label_key ? label_key : "", label_key ? "=" : "", label ? label : "");
}

static kcr_err print_item(const cJSON *item, void *ud)
{
  print_line("LISTED", item, kcr_json_str(item, "/metadata/resourceVersion"));
  return KCR_OK;
}

static kcr_err print_event(struct kcr_watch_event *ev, void *ud)
{
  if(ev->type == KCR_WATCH_BOOKMARK)
    return KCR_OK;
  print_line(kcr_watch_type_name(ev->type), ev->object, ev->resource_version);
  fflush(stdout);
  return KCR_OK;
}

int main(int argc, char **argv)
{
  struct kcr_config_opts co = {0};
  struct kcr_gvr gvr = {
      .group = "", .version = "v1", .resource = "configmaps", .namespaced = true};
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  const char *ns = NULL;
  bool cluster_scoped = false;
  uint64_t for_ms = 0;
  kcr_config *cfg = NULL;
  kcr_client *c;
  char *rv = NULL;
  int status = 0;
  kcr_err rc;
  const struct kcr_flag flags[] = {
      {"context", KCR_FLAG_STRING, &co.context,
       "the kubeconfig context (default: current-context)", .arg = "NAME"},
      {"namespace", KCR_FLAG_STRING, &ns, "one namespace (default: all)", .arg = "NS"},
      {"group", KCR_FLAG_STRING, &gvr.group, "the API group (default: core)",
       .arg = "GROUP"},
      {"api-version", KCR_FLAG_STRING, &gvr.version, "the API version", .arg = "VERSION"},
      {"cluster-scoped", KCR_FLAG_BOOL, &cluster_scoped,
       "the resource is not namespaced"},
      {"for", KCR_FLAG_DURATION, &for_ms, "stop after this long (default: until Ctrl-C)",
       .min = 1, .max = INT64_MAX},
      {"label", KCR_FLAG_STRING, &label_key,
       "also print this label's value (kubectl get -L)", .arg = "KEY"},
  };

  kcr_cli_parse_or_exit(
      &(struct kcr_cli){.prog = "kcr-watch",
                        .about = "Lists RESOURCE (default: configmaps), then watches it "
                                 "and prints each change.",
                        .args = "[RESOURCE]",
                        .argv_out = &gvr.resource,
                        .max_args = 1,
                        .flags = flags,
                        .nflags = sizeof(flags) / sizeof(flags[0]),
                        .config = &co,
                        .log = true},
      argc, argv);
  gvr.namespaced = !cluster_scoped;
  if(label_key && (kcr_buf_puts(&label_path, "/metadata/labels") ||
                   kcr_json_ptr_append(&label_path, label_key))) {
    fputs("kcr-watch: out of memory\n", stderr);
    return 2;
  }
  rc = kcr_config_load(&co, &cfg, &ei);
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
  if(for_ms) { /* whole seconds, rounded up */
    uint64_t secs = for_ms / 1000 + (for_ms % 1000 != 0);
    alarm(secs > UINT_MAX ? UINT_MAX : (unsigned)secs);
  }
  setvbuf(stdout, NULL, _IOLBF, 0);

  struct kcr_ref ref = {.gvr = &gvr, .ns = ns};
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
  kcr_buf_cleanup(&label_path);
  kcr_errinfo_cleanup(&ei);
  kcr_client_free(c);
  return status;
}
