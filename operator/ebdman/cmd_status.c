/* ebdman status: EBDs with their conditions as an aligned table; --watch
 * redraws it on every change (a LIST, then a WATCH from its resourceVersion). */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ebdman.h"

enum { C_NS, C_NAME, C_READY, C_REASON, C_INST, C_VFM, C_GEN, C_AGE, C_MSG, NCOL };
static const char *const heads[NCOL] = {"NAMESPACE", "NAME",      "READY",
                                        "REASON",    "INSTALLED", "VFM",
                                        "GEN/OBS",   "AGE",       "MESSAGE"};

static void age(time_t created, char *out, size_t n)
{
  long s = (long)(kcr_time_now() - created);
  if(s < 0)
    s = 0;
  if(s < 120)
    snprintf(out, n, "%lds", s);
  else if(s < 7200)
    snprintf(out, n, "%ldm", s / 60);
  else if(s < 172800)
    snprintf(out, n, "%ldh", s / 3600);
  else
    snprintf(out, n, "%ldd", s / 86400);
}

static const char *cond(const cJSON *o, const char *type, const char *field)
{
  const char *v =
      kcr_json_str(kcr_cond_find(kcr_json_at(o, "status.conditions"), type), field);
  return v ? v : "-";
}

/* Prints the table of `objs` (a JSON array) to stdout. */
static void print_table(const cJSON *objs, bool all_ns)
{
  size_t n = (size_t)cJSON_GetArraySize(objs), w[NCOL] = {0};
  char(*cells)[NCOL][160] = calloc(n + 1, sizeof(*cells));
  const cJSON *o;
  size_t r = 0;

  if(!cells)
    return;
  for(int c = 0; c < NCOL; c++)
    snprintf(cells[0][c], sizeof(cells[0][c]), "%s", heads[c]);
  cJSON_ArrayForEach(o, objs)
  {
    time_t created = 0;
    r++;
    kcr_time_parse(kcr_json_str(o, "metadata.creationTimestamp"), &created);
    snprintf(cells[r][C_NS], 160, "%s", kcr_json_str(o, "metadata.namespace"));
    snprintf(cells[r][C_NAME], 160, "%s", kcr_json_str(o, "metadata.name"));
    snprintf(cells[r][C_READY], 160, "%s", cond(o, "Ready", "status"));
    snprintf(cells[r][C_REASON], 160, "%s", cond(o, "Ready", "reason"));
    snprintf(cells[r][C_INST], 160, "%s", cond(o, "Installed", "status"));
    snprintf(cells[r][C_VFM], 160, "%s", cond(o, "VFMHealthy", "status"));
    snprintf(cells[r][C_GEN], 160, "%lld/%lld",
             (long long)kcr_json_int(o, "metadata.generation", 0),
             (long long)kcr_json_int(o, "status.observedGeneration", 0));
    age(created, cells[r][C_AGE], 160);
    snprintf(cells[r][C_MSG], 160, "%s", cond(o, "Ready", "message"));
  }
  for(size_t i = 0; i <= n; i++)
    for(int c = 0; c < NCOL; c++)
      if(strlen(cells[i][c]) > w[c])
        w[c] = strlen(cells[i][c]);
  for(size_t i = 0; i <= n; i++) {
    for(int c = all_ns ? 0 : 1; c < NCOL; c++)
      if(c == NCOL - 1)
        printf("%s\n", cells[i][c]);
      else
        printf("%-*s   ", (int)w[c], cells[i][c]);
  }
  if(!n)
    printf("(no EBDs)\n");
  fflush(stdout);
  free(cells);
}

static int cmp_obj(const void *a, const void *b)
{
  const cJSON *x = *(const cJSON *const *)a, *y = *(const cJSON *const *)b;
  int c = strcmp(kcr_json_str(x, "metadata.namespace"),
                 kcr_json_str(y, "metadata.namespace"));
  return c ? c
           : strcmp(kcr_json_str(x, "metadata.name"), kcr_json_str(y, "metadata.name"));
}

/* Rebuilds `objs` sorted by namespace/name. */
static void sort_objs(cJSON *objs)
{
  int n = cJSON_GetArraySize(objs);
  cJSON **v = calloc((size_t)(n ? n : 1), sizeof(*v));
  if(!v)
    return;
  for(int i = n - 1; i >= 0; i--)
    v[i] = cJSON_DetachItemFromArray(objs, i);
  qsort(v, (size_t)n, sizeof(*v), cmp_obj);
  for(int i = 0; i < n; i++)
    cJSON_AddItemToArray(objs, v[i]);
  free(v);
}

struct view {
  cJSON *objs;
  bool all_ns, tty;
};

static kcr_err add_item(const cJSON *item, void *ud)
{
  cJSON_AddItemToArray(ud, cJSON_Duplicate(item, 1));
  return KCR_OK;
}

static void redraw(struct view *v)
{
  char now[KCR_RFC3339_LEN];
  sort_objs(v->objs);
  if(v->tty)
    printf("\033[H\033[2J");
  kcr_time_format(kcr_time_now(), now);
  printf("--- %s\n", now);
  print_table(v->objs, v->all_ns);
}

static kcr_err on_event(struct kcr_watch_event *ev, void *ud)
{
  struct view *v = ud;
  const char *ns = kcr_json_str(ev->object, "metadata.namespace");
  const char *name = kcr_json_str(ev->object, "metadata.name");
  cJSON *it;
  int i = 0;

  if(ev->type == KCR_WATCH_BOOKMARK || !name)
    return KCR_OK;
  cJSON_ArrayForEach(it, v->objs)
  {
    if(!strcmp(kcr_json_str(it, "metadata.name"), name) &&
       !strcmp(kcr_json_str(it, "metadata.namespace"), ns ? ns : ""))
      break;
    i++;
  }
  if(it)
    cJSON_DeleteItemFromArray(v->objs, i);
  if(ev->type != KCR_WATCH_DELETED) {
    cJSON_AddItemToArray(v->objs, ev->object);
    ev->object = NULL; /* taken */
  }
  redraw(v);
  return KCR_OK;
}

static kcr_watch *volatile current;
static void on_signal(int sig)
{
  if(current)
    kcr_watch_cancel(current);
}

int cmd_status(int argc, char **argv)
{
  static const struct option opts[] = {{"kubeconfig", required_argument, NULL, 'k'},
                                       {"namespace", required_argument, NULL, 'n'},
                                       {"watch", no_argument, NULL, 'w'},
                                       {"help", no_argument, NULL, 'h'},
                                       {NULL, 0, NULL, 0}};
  struct kcr_config_opts co = {0};
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  const char *ns = NULL;
  bool watch = false;
  int opt, status = 0;
  kcr_config *cfg;
  kcr_client *c;
  char *rv = NULL;

  optind = 1;
  opterr = 0;
  while((opt = getopt_long(argc, argv, ":n:wh", opts, NULL)) != -1) {
    switch(opt) {
    case 'k': co.kubeconfig = optarg; break;
    case 'n': ns = optarg; break;
    case 'w': watch = true; break;
    case 'h':
      printf(
          "usage: ebdman status [-n NS] [--watch] [--kubeconfig PATH]\n"
          "Prints EBDs with their Ready, Installed and VFMHealthy conditions, reasons,\n"
          "generation/observedGeneration and age. --watch redraws on every change.\n");
      return 0;
    case ':':
      fprintf(stderr, "ebdman status: %s needs a value\n", argv[optind - 1]);
      return 2;
    default:
      fprintf(stderr, "ebdman status: unknown option \"%s\" (try --help)\n",
              argv[optind - 1]);
      return 2;
    }
  }
  if(optind < argc) {
    fprintf(stderr, "ebdman status: unexpected argument \"%s\"\n", argv[optind]);
    return 2;
  }
  if(kcr_config_load(&co, &cfg, &ei) || kcr_client_new(cfg, NULL, &c, &ei)) {
    fprintf(stderr, "ebdman status: %s\n", ei.message ? ei.message : "no client");
    kcr_errinfo_cleanup(&ei);
    return 2;
  }
  struct view v = {cJSON_CreateArray(), ns == NULL, isatty(1)};
  struct kcr_ref ref = {&ebdman_ebds, ns};
  kcr_err rc = kcr_list_each(c, &ref, NULL, add_item, v.objs, &rv, &ei);
  if(rc) {
    fprintf(stderr, "ebdman status: listing EBDs: %s%s%s\n", kcr_strerror(rc),
            ei.message ? ": " : "", ei.message ? ei.message : "");
    status = rc == KCR_ENOTFOUND ? 2 : 1;
  } else if(!watch) {
    sort_objs(v.objs);
    print_table(v.objs, v.all_ns);
  } else {
    kcr_watch *w = NULL;
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    redraw(&v);
    struct kcr_watch_opts wo = {&ref, rv, .allow_bookmarks = true,
                                .timeout_seconds = 300};
    if(!kcr_watch_new(c, &wo, on_event, &v, &w)) {
      current = w;
      while((rc = kcr_watch_run(w, &ei)) == KCR_OK)
        ;
      current = NULL;
      if(rc != KCR_ECANCELED) {
        fprintf(stderr, "ebdman status: watch ended: %s\n", kcr_strerror(rc));
        status = 1;
      }
      kcr_watch_free(w);
    }
  }
  free(rv);
  cJSON_Delete(v.objs);
  kcr_errinfo_cleanup(&ei);
  kcr_client_free(c);
  return status;
}
