/* informer_mem - what an informer's cache costs per object, against a real
 * API server (KUBECONFIG), compared with holding the same objects as cJSON
 * trees.
 *
 *   informer_mem [--n N] [--threads T] [--repeat R] [--keys K] [--keep]
 *                [--project PATHS]
 *
 * 1. Creates a fresh namespace kcr-bench-mem-<pid> and N ConfigMaps in it
 *    (default 10,000) of about 2 KB each: two data keys (a ~1.7 KB
 *    properties text and a short one), three labels, two annotations,
 *    created by T threads (default 8) with fieldManager "informer-mem-bench"
 *    (so every object carries realistic managedFields for those fields).
 *    --keys K (K > 2) spreads the same text over K-1 short data values plus
 *    "mode" instead: the same size in many small fields, the shape where a
 *    tree costs most relative to its text.
 * 2. R times (default 3), in a FRESH process (this program re-executed with
 *    --measure, so nothing the creation phase allocated is in the heap):
 *      before    = RSS (/proc/self/statm) and malloc'd bytes (mallinfo2:
 *                  uordblks + hblkhd), after the client is made and
 *                  connected (one GET of the namespace), just before
 *                  kcr_informer_start;
 *      after     = the same once kcr_informer_wait_synced() returns;
 *      (a) kcr_store_bytes / N: the store's own accounting (header + compact
 *          JSON with managedFields stripped);
 *      (b) RSS growth / N and malloc growth / N over the informer's start
 *          and sync (includes the store's hash table, the LIST pages in
 *          flight, the watch thread's stack and arena, curl buffers);
 *      (c) cJSON trees: every cached object's text is parsed with
 *          cJSON_ParseWithLength and all trees are kept; malloc growth / N.
 *          The same for the full objects as the server sends them (with
 *          managedFields, as a cache that keeps whole objects would), from a
 *          separate LIST;
 *      average compact text sizes (stripped, and full).
 *    The child prints one line of figures; the parent prints a table with
 *    every run and the median.
 * 3. Deletes the ConfigMaps and the namespace (unless --keep).
 *
 * --project PATHS (comma-separated, e.g. "data,metadata.labels"): the
 * informer of step 2 has that keep-list (kcr_informer_opts.keep), so (a)
 * and (b) are what a projected cache costs.
 *
 * --measure NS N [PATHS] runs only step 2's measurement on an existing
 * namespace. */
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kcr.h"

static const struct kcr_gvr configmaps = {
    .group = "", .version = "v1", .resource = "configmaps", .namespaced = true};
static const struct kcr_gvr namespaces = {
    .group = "", .version = "v1", .resource = "namespaces", .namespaced = false};

#define FIELD_MANAGER "informer-mem-bench"

static kcr_client *make_client(void)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  kcr_config *cfg = NULL;
  kcr_client *c;
  kcr_err rc = kcr_config_load(&(struct kcr_config_opts){0}, &cfg, &ei);

  if(!rc)
    rc = kcr_client_new(&(struct kcr_client_opts){.config = cfg}, &c, &ei);
  kcr_config_free(cfg); /* the client holds its own reference */
  if(rc) {
    fprintf(stderr, "informer_mem: %s\n", ei.message ? ei.message : kcr_strerror(rc));
    exit(2);
  }
  kcr_errinfo_cleanup(&ei);
  return c;
}

static long rss_bytes(void)
{
  long size = 0, res = 0;
  FILE *f = fopen("/proc/self/statm", "r");
  if(f) {
    if(fscanf(f, "%ld %ld", &size, &res) != 2)
      res = 0;
    fclose(f);
  }
  return res * sysconf(_SC_PAGESIZE);
}

static size_t heap_bytes(void)
{
  struct mallinfo2 mi = mallinfo2();
  return mi.uordblks + mi.hblkhd;
}

/* ---- creation ---- */

struct creator {
  kcr_client *c;
  const char *ns;
  long n;
  atomic_long next, failed;
};

static int data_keys = 2; /* --keys */

static cJSON *make_cm(const char *ns, long i)
{
  char name[64], idx[32], props[2048];
  size_t off = 0;
  cJSON *o = cJSON_CreateObject();

  snprintf(name, sizeof(name), "bench-cm-%06ld", i);
  snprintf(idx, sizeof(idx), "%ld", i);
  /* ~1.7 KB of properties-like text, different per object. */
  for(int k = 0; off < 1700 && k < 100; k++)
    off += (size_t)snprintf(
        props + off, sizeof(props) - off,
        "service.%02d.endpoint=https://svc-%ld-%02d.bench.example.com:%d/v1\n", k, i, k,
        8000 + k);
  cJSON_AddStringToObject(o, "apiVersion", "v1");
  cJSON_AddStringToObject(o, "kind", "ConfigMap");
  kcr_json_set_str(o, "/metadata/name", name);
  kcr_json_set_str(o, "/metadata/namespace", ns);
  cJSON *labels = kcr_json_obj(o, "/metadata/labels");
  cJSON_AddStringToObject(labels, "app.kubernetes.io/name", "informer-mem-bench");
  cJSON_AddStringToObject(labels, "app.kubernetes.io/instance", name);
  cJSON_AddStringToObject(labels, "bench.kcr.example.com/index", idx);
  cJSON *ann = kcr_json_obj(o, "/metadata/annotations");
  cJSON_AddStringToObject(ann, "bench.kcr.example.com/created-by",
                          "bench/informer_mem.c");
  cJSON_AddStringToObject(ann, "bench.kcr.example.com/description",
                          "a ConfigMap of about 2 KB for the informer memory benchmark");
  cJSON *data = cJSON_AddObjectToObject(o, "data");
  if(data_keys <= 2) {
    cJSON_AddStringToObject(data, "app.properties", props);
  } else { /* the same text, one line per key (--keys K: K-1 of them) */
    char *line = props, *nl, key[32];
    for(int k = 0; k < data_keys - 1 && line && *line; k++, line = nl ? nl + 1 : NULL) {
      if((nl = strchr(line, '\n')))
        *nl = '\0';
      snprintf(key, sizeof(key), "endpoint-%02d", k);
      cJSON_AddStringToObject(data, key,
                              strchr(line, '=') ? strchr(line, '=') + 1 : line);
    }
  }
  cJSON_AddStringToObject(data, "mode", "fast");
  return o;
}

static void *create_loop(void *p)
{
  struct creator *cr = p;
  struct kcr_ref ref = {.gvr = &configmaps, .ns = cr->ns};
  long i;

  while((i = atomic_fetch_add(&cr->next, 1)) < cr->n) {
    struct kcr_errinfo ei = KCR_ERRINFO_INIT;
    cJSON *o = make_cm(cr->ns, i);
    kcr_err rc =
        kcr_create(cr->c, &ref, o,
                   &(struct kcr_write_opts){.field_manager = FIELD_MANAGER}, NULL, &ei);
    if(rc && rc != KCR_EEXIST) {
      if(atomic_fetch_add(&cr->failed, 1) < 5)
        fprintf(stderr, "informer_mem: create %ld: %s\n", i,
                ei.message ? ei.message : kcr_strerror(rc));
    }
    kcr_errinfo_cleanup(&ei);
    cJSON_Delete(o);
  }
  return NULL;
}

static int create_all(kcr_client *c, const char *ns, long n, int threads)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  struct creator cr = {c, ns, n, 0, 0};
  pthread_t th[64];
  cJSON *nso = cJSON_CreateObject();
  uint64_t t0;

  cJSON_AddStringToObject(nso, "apiVersion", "v1");
  cJSON_AddStringToObject(nso, "kind", "Namespace");
  kcr_json_set_str(nso, "/metadata/name", ns);
  if(kcr_create(c, &(struct kcr_ref){.gvr = &namespaces}, nso, NULL, NULL, &ei)) {
    fprintf(stderr, "informer_mem: creating namespace %s: %s\n", ns,
            ei.message ? ei.message : "failed");
    return -1;
  }
  cJSON_Delete(nso);
  kcr_errinfo_cleanup(&ei);
  t0 = kcr_time_mono_ns();
  if(threads > 64)
    threads = 64;
  for(int i = 0; i < threads; i++)
    pthread_create(&th[i], NULL, create_loop, &cr);
  for(int i = 0; i < threads; i++)
    pthread_join(th[i], NULL);
  double secs = (double)(kcr_time_mono_ns() - t0) / 1e9;
  fprintf(stderr,
          "informer_mem: created %ld ConfigMaps in %s with %d threads in %.1f s "
          "(%.0f/s), %ld failed\n",
          n, ns, threads, secs, (double)n / secs, (long)cr.failed);
  return cr.failed ? -1 : 0;
}

static void cleanup_ns(kcr_client *c, const char *ns)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  struct kcr_buf path = {0};
  struct kcr_http_response resp = {0};

  /* Empty it first so this works without the namespace controller too. */
  kcr_path(&path, &(struct kcr_ref){.gvr = &configmaps, .ns = ns});
  kcr_client_do(c,
                &(struct kcr_http_request){
                    .method = "DELETE", .path = kcr_buf_str(&path), .timeout_ms = 120000},
                &resp, &ei);
  kcr_buf_cleanup(&resp.body);
  kcr_buf_cleanup(&path);
  kcr_errinfo_cleanup(&ei);
  if(kcr_delete(c, &(struct kcr_ref){.gvr = &namespaces, .name = ns}, NULL, NULL, &ei))
    fprintf(stderr, "informer_mem: deleting namespace %s: %s\n", ns,
            ei.message ? ei.message : "failed");
  else
    fprintf(stderr, "informer_mem: deleted the ConfigMaps and namespace %s\n", ns);
  kcr_errinfo_cleanup(&ei);
}

/* ---- measurement (fresh process) ---- */

struct full_acc {
  cJSON **trees;
  size_t n, cap;
  size_t text_bytes;
};

static kcr_err keep_full(const cJSON *item, void *ud)
{
  struct full_acc *a = ud;
  char *txt = kcr_json_to_text(item);
  if(!txt)
    return KCR_ENOMEM;
  a->text_bytes += strlen(txt);
  free(txt);
  if(a->n == a->cap) {
    a->cap = a->cap ? a->cap * 2 : 1024;
    a->trees = realloc(a->trees, a->cap * sizeof(*a->trees));
  }
  a->trees[a->n++] = cJSON_Duplicate(item, 1);
  return KCR_OK;
}

/* "a,b,c" -> {"a", "b", "c", NULL} in keep[max] (cut in place); NULL for
 * NULL. */
static const char *const *split_keep(char *paths, const char **keep, size_t max)
{
  size_t k = 0;
  char *save = NULL;

  if(!paths)
    return NULL;
  for(char *p = strtok_r(paths, ",", &save); p && k + 1 < max;
      p = strtok_r(NULL, ",", &save))
    keep[k++] = p;
  keep[k] = NULL;
  return keep;
}

static int measure(const char *ns, long n, char *project)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  kcr_client *c = make_client();
  kcr_informer *inf;
  cJSON *tmp = NULL;
  const char *keep[32];

  /* Connect (TLS handshake, curl handle) before the baseline. */
  if(kcr_get(c, &(struct kcr_ref){.gvr = &namespaces, .name = ns}, &tmp, &ei)) {
    fprintf(stderr, "informer_mem: namespace %s: %s\n", ns,
            ei.message ? ei.message : "?");
    return 2;
  }
  cJSON_Delete(tmp);
  if(kcr_informer_new(&(struct kcr_informer_opts){.client = c,
                                                  .gvr = &configmaps,
                                                  .ns = ns,
                                                  .keep = split_keep(project, keep, 32)},
                      &inf, &ei)) {
    fprintf(stderr, "informer_mem: informer_new failed: %s\n",
            ei.message ? ei.message : "?");
    return 2;
  }
  malloc_trim(0);
  long rss0 = rss_bytes();
  size_t heap0 = heap_bytes();
  uint64_t t0 = kcr_time_mono_ns();
  kcr_informer_start(inf);
  if(!kcr_informer_wait_synced(inf, 300000)) {
    fprintf(stderr, "informer_mem: not synced in 300 s\n");
    return 2;
  }
  double sync_s = (double)(kcr_time_mono_ns() - t0) / 1e9;
  long rss1 = rss_bytes();
  size_t heap1 = heap_bytes();
  kcr_store *st = kcr_informer_store(inf);
  size_t len = kcr_store_len(st), bytes = kcr_store_bytes(st);
  if((long)len != n)
    fprintf(stderr, "informer_mem: warning: the store holds %zu objects, expected %ld\n",
            len, n);

  /* (c) cJSON trees of the cached (stripped) text. */
  kcr_obj **objs;
  size_t nobjs, text = 0;
  kcr_store_ref_all(st, &objs, &nobjs);
  cJSON **trees = malloc(nobjs * sizeof(*trees));
  size_t heap2 = heap_bytes();
  for(size_t i = 0; i < nobjs; i++) {
    size_t l;
    const char *j = kcr_obj_json(objs[i], &l);
    text += l;
    trees[i] = cJSON_ParseWithLength(j, l);
  }
  size_t heap3 = heap_bytes();
  for(size_t i = 0; i < nobjs; i++)
    cJSON_Delete(trees[i]);
  free(trees);
  kcr_objs_unref(objs, nobjs);

  /* cJSON trees of the full objects (managedFields kept). */
  struct full_acc fa = {0};
  fa.cap = (size_t)n + 16;
  fa.trees = malloc(fa.cap * sizeof(*fa.trees));
  size_t trees_only = 0;
  {
    /* Growth over the whole listing: the kept duplicates (the array is
     * allocated before; the pages and printed texts are freed by then). */
    size_t h0 = heap_bytes();
    if(kcr_list_each(c, &(struct kcr_ref){.gvr = &configmaps, .ns = ns},
                     &(struct kcr_list_opts){.limit = 500}, keep_full, &fa, NULL, &ei)) {
      fprintf(stderr, "informer_mem: list: %s\n", ei.message ? ei.message : "?");
      return 2;
    }
    size_t h1 = heap_bytes();
    trees_only = h1 - h0;
  }

  if(getenv("INFORMER_MEM_SHOW") && fa.n && nobjs) {
    kcr_obj *o = kcr_store_ref(st, ns, "bench-cm-000000");
    char *full = kcr_json_to_text(fa.trees[0]);
    if(o)
      fprintf(stderr, "cached: %s\n", kcr_obj_json(o, NULL));
    fprintf(stderr, "full (a LIST item): %s\n", full);
    free(full);
    kcr_obj_unref(o);
  }
  /* One machine-readable line for the parent. */
  printf("RESULT n=%zu store_bytes=%zu rss_growth=%ld heap_growth=%zu tree_stripped=%zu "
         "text_stripped=%zu tree_full=%zu text_full=%zu full_n=%zu sync_s=%.3f\n",
         len, bytes, rss1 - rss0, heap1 - heap0, heap3 - heap2, text, trees_only,
         fa.text_bytes, fa.n, sync_s);
  fflush(stdout);
  for(size_t i = 0; i < fa.n; i++)
    cJSON_Delete(fa.trees[i]);
  free(fa.trees);
  kcr_informer_free(inf);
  kcr_client_free(c);
  kcr_errinfo_cleanup(&ei);
  return 0;
}

/* ---- parent: run measurements in fresh processes, print the table ---- */

struct result {
  double n, store_bytes, rss_growth, heap_growth, tree_stripped, text_stripped, tree_full,
      text_full, full_n, sync_s;
};

static int parse_result(const char *line, struct result *r)
{
  return sscanf(
             line,
             "RESULT n=%lf store_bytes=%lf rss_growth=%lf heap_growth=%lf "
             "tree_stripped=%lf text_stripped=%lf tree_full=%lf text_full=%lf full_n=%lf "
             "sync_s=%lf",
             &r->n, &r->store_bytes, &r->rss_growth, &r->heap_growth, &r->tree_stripped,
             &r->text_stripped, &r->tree_full, &r->text_full, &r->full_n,
             &r->sync_s) == 10
             ? 0
             : -1;
}

static const char *project; /* --project */

static int run_child(const char *ns, long n, struct result *r)
{
  char nbuf[32], line[1024];
  int fd[2];
  pid_t pid;
  int status, rc = -1;

  snprintf(nbuf, sizeof(nbuf), "%ld", n);
  if(pipe(fd))
    return -1;
  if((pid = fork()) == 0) {
    dup2(fd[1], 1);
    close(fd[0]);
    close(fd[1]);
    execl("/proc/self/exe", "informer_mem", "--measure", ns, nbuf, project, (char *)NULL);
    _exit(127);
  }
  close(fd[1]);
  FILE *f = fdopen(fd[0], "r");
  while(fgets(line, sizeof(line), f))
    if(!strncmp(line, "RESULT ", 7) && !parse_result(line, r))
      rc = 0;
  fclose(f);
  waitpid(pid, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? rc : -1;
}

static int cmp_dbl(const void *a, const void *b)
{
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
  qsort(v, (size_t)n, sizeof(*v), cmp_dbl);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int main(int argc, char **argv)
{
  long n = 10000;
  int threads = 8, repeat = 3;
  bool keep = false;
  char ns[64];

  kcr_log_set_level(KCR_LOG_WARN);
  if((argc == 4 || argc == 5) && !strcmp(argv[1], "--measure"))
    return measure(argv[2], strtol(argv[3], NULL, 10), argc == 5 ? argv[4] : NULL);
  for(int i = 1; i < argc; i++) {
    if(!strcmp(argv[i], "--n") && i + 1 < argc)
      n = strtol(argv[++i], NULL, 10);
    else if(!strcmp(argv[i], "--threads") && i + 1 < argc)
      threads = atoi(argv[++i]);
    else if(!strcmp(argv[i], "--repeat") && i + 1 < argc)
      repeat = atoi(argv[++i]);
    else if(!strcmp(argv[i], "--keys") && i + 1 < argc)
      data_keys = atoi(argv[++i]);
    else if(!strcmp(argv[i], "--keep"))
      keep = true;
    else if(!strcmp(argv[i], "--project") && i + 1 < argc)
      project = argv[++i];
    else {
      fprintf(
          stderr,
          "usage: informer_mem [--n N] [--threads T] [--repeat R] [--keys K] [--keep]\n"
          "                    [--project PATHS]\n"
          "       informer_mem --measure NAMESPACE N [PATHS]\n"
          "Needs KUBECONFIG pointing at a cluster it may create namespaces in.\n");
      return 2;
    }
  }
  if(n <= 0 || threads <= 0 || repeat <= 0 || repeat > 32)
    return 2;

  kcr_client *c = make_client();
  snprintf(ns, sizeof(ns), "kcr-bench-mem-%ld", (long)getpid());
  int status = 1;
  struct result r[32];
  int ok = 0;

  if(create_all(c, ns, n, threads) == 0) {
    for(int i = 0; i < repeat; i++) {
      if(run_child(ns, n, &r[ok]) == 0)
        ok++;
      else
        fprintf(stderr, "informer_mem: measurement %d failed\n", i + 1);
    }
  }
  if(!keep)
    cleanup_ns(c, ns);
  kcr_client_free(c);
  if(!ok)
    return 1;

  double load[3] = {0};
  getloadavg(load, 3);
  printf("informer_mem: N=%ld ConfigMaps, %d fresh-process runs (load average %.2f %.2f "
         "%.2f)%s%s\n\n",
         n, ok, load[0], load[1], load[2], project ? ", cache projected to " : "",
         project ? project : "");
  printf("%-52s", "per object, bytes");
  for(int i = 0; i < ok; i++)
    printf(" %8s%-2d", "run ", i + 1);
  printf(" %10s\n", "median");
  struct {
    const char *name;
    size_t off;
    bool per_full;
  } rows[] = {
      {"(a) kcr_store_bytes / N (header + compact JSON)",
       offsetof(struct result, store_bytes), 0},
      {"(b) RSS growth over start..synced / N", offsetof(struct result, rss_growth), 0},
      {"    malloc growth over start..synced / N", offsetof(struct result, heap_growth),
       0},
      {"(c) cJSON trees of the cached text / N", offsetof(struct result, tree_stripped),
       0},
      {"    cJSON trees of full objects (managedFields) / N",
       offsetof(struct result, tree_full), 1},
      {"compact text, managedFields stripped / N", offsetof(struct result, text_stripped),
       0},
      {"compact text, full object / N", offsetof(struct result, text_full), 1},
  };
  for(size_t k = 0; k < sizeof(rows) / sizeof(rows[0]); k++) {
    double v[32];
    printf("%-52s", rows[k].name);
    for(int i = 0; i < ok; i++) {
      double num = *(double *)((char *)&r[i] + rows[k].off);
      double den = rows[k].per_full ? r[i].full_n : r[i].n;
      v[i] = den > 0 ? num / den : 0;
      printf(" %10.0f", v[i]);
    }
    printf(" %10.0f\n", median(v, ok));
  }
  {
    double v[32];
    printf("%-52s", "LIST + sync time, s");
    for(int i = 0; i < ok; i++)
      printf(" %10.2f", v[i] = r[i].sync_s);
    printf(" %10.2f\n", median(v, ok));
  }
  status = 0;
  return status;
}
