/* ns_crossover - a namespace set watched per namespace against one
 * filtered cluster watch (kcr_informer_opts.cluster_watch): what each
 * costs the controller's process as the share of selected namespaces
 * grows (bench/README.md, section 10; bench/ns_crossover.sh runs it).
 *
 *   ns_crossover setup PREFIX T N BYTES
 *       makes namespaces PREFIX000 .. PREFIX<T-1>, each with N ConfigMaps
 *       of BYTES bytes of data (an existing one is left as it is).
 *   ns_crossover watch PREFIX K per|cluster WINDOW_MS
 *       in this fresh process: an informer of the ConfigMaps of namespaces
 *       PREFIX000 .. PREFIX<K-1> (opts.namespaces), with a watch per
 *       namespace (per) or one cluster watch filtered (cluster); waits
 *       until synced and prints
 *         synced mode=M k=K objects=O sync_ms=T sync_cpu_ms=C rss_kb=R
 *                threads=H
 *       (cpu: the process's user+system time; rss: VmRSS after
 *       malloc_trim(0); threads: the process's), then 1 s later measures
 *       WINDOW_MS of the informer at work (the caller churns meanwhile)
 *       and prints
 *         window mode=M k=K ms=W cpu_ms=C events=E
 *       (events: the watch events the informer took, selected or not).
 *   ns_crossover churn PREFIX T N RATE MS
 *       patches a random ConfigMap of a random namespace of the T, RATE
 *       times a second for MS ms, from 2 threads, and prints
 *         churn patches=P ms=W
 * Connects as the kubeconfig says ($KUBECONFIG). Exits 0, or 1 with a
 * message on stderr. */
#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kcr.h"
#include "proc_status.h"

static const struct kcr_gvr configmaps = {
    .version = "v1", .resource = "configmaps", .namespaced = true};
static const struct kcr_gvr namespaces = {.version = "v1", .resource = "namespaces"};

static void die(const char *what, const struct kcr_errinfo *ei)
{
  fprintf(stderr, "ns_crossover: %s: %s\n", what,
          ei && ei->message ? ei->message : "failed");
  exit(1);
}

static kcr_client *client(void)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  kcr_config *cfg = NULL;
  kcr_client *c = NULL;
  if(kcr_config_load(&(struct kcr_config_opts){0}, &cfg, &ei) ||
     kcr_client_new(&(struct kcr_client_opts){.config = cfg}, &c, &ei))
    die("no client", &ei);
  kcr_config_free(cfg);
  return c;
}

static void ns_name(char *out, size_t n, const char *prefix, int i)
{
  snprintf(out, n, "%s%03d", prefix, i);
}

/* ---- setup ---- */

struct setup {
  const char *prefix;
  int t, n, bytes;
  atomic_int next; /* the next namespace to fill */
};

static void *fill(void *p)
{
  struct setup *s = p;
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  kcr_client *c = client();
  char *payload = malloc((size_t)s->bytes + 1);
  memset(payload, 'x', (size_t)s->bytes);
  payload[s->bytes] = 0;
  for(int i; (i = atomic_fetch_add(&s->next, 1)) < s->t;) {
    char ns[64], name[64];
    ns_name(ns, sizeof(ns), s->prefix, i);
    for(int j = 0; j < s->n; j++) {
      snprintf(name, sizeof(name), "cm-%05d", j);
      cJSON *o = cJSON_CreateObject();
      cJSON *md = cJSON_AddObjectToObject(o, "metadata");
      cJSON_AddStringToObject(o, "apiVersion", "v1");
      cJSON_AddStringToObject(o, "kind", "ConfigMap");
      cJSON_AddStringToObject(md, "name", name);
      cJSON_AddStringToObject(cJSON_AddObjectToObject(o, "data"), "payload", payload);
      kcr_err rc = kcr_create(c, &(struct kcr_ref){.gvr = &configmaps, .ns = ns}, o, NULL,
                              NULL, &ei);
      cJSON_Delete(o);
      if(rc && rc != KCR_EEXIST)
        die("creating a ConfigMap", &ei);
    }
  }
  free(payload);
  kcr_client_free(c);
  kcr_errinfo_cleanup(&ei);
  return NULL;
}

static int setup(const char *prefix, int t, int n, int bytes)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  kcr_client *c = client();
  struct setup s = {.prefix = prefix, .t = t, .n = n, .bytes = bytes};
  pthread_t th[4];

  atomic_init(&s.next, 0);
  for(int i = 0; i < t; i++) {
    char ns[64];
    ns_name(ns, sizeof(ns), prefix, i);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "apiVersion", "v1");
    cJSON_AddStringToObject(o, "kind", "Namespace");
    cJSON_AddStringToObject(cJSON_AddObjectToObject(o, "metadata"), "name", ns);
    kcr_err rc = kcr_create(c, &(struct kcr_ref){.gvr = &namespaces}, o, NULL, NULL, &ei);
    cJSON_Delete(o);
    if(rc && rc != KCR_EEXIST)
      die("creating a namespace", &ei);
  }
  for(int i = 0; i < 4; i++)
    pthread_create(&th[i], NULL, fill, &s);
  for(int i = 0; i < 4; i++)
    pthread_join(th[i], NULL);
  kcr_client_free(c);
  kcr_errinfo_cleanup(&ei);
  return 0;
}

/* ---- watch ---- */

static uint64_t cpu_ms(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static int watch(const char *prefix, int k, bool cluster, uint64_t window_ms)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  const char **nss = calloc((size_t)k + 1, sizeof(*nss));
  kcr_client *c = client();
  kcr_informer *inf = NULL;
  struct kcr_informer_stats st0, st;
  const char *mode = cluster ? "cluster" : "per";

  for(int i = 0; i < k; i++) {
    char ns[64];
    ns_name(ns, sizeof(ns), prefix, i);
    nss[i] = strdup(ns);
  }
  uint64_t t0 = kcr_time_mono_ms(), c0 = cpu_ms();
  if(kcr_informer_new(&(struct kcr_informer_opts){.client = c,
                                                  .gvr = &configmaps,
                                                  .namespaces = nss,
                                                  .cluster_watch = cluster},
                      &inf, &ei) ||
     kcr_informer_start(inf) || !kcr_informer_wait_synced(inf, 600000))
    die("the informer did not sync", &ei);
  uint64_t t1 = kcr_time_mono_ms(), c1 = cpu_ms();
  malloc_trim(0);
  printf("synced mode=%s k=%d objects=%zu sync_ms=%llu sync_cpu_ms=%llu rss_kb=%ld "
         "threads=%ld\n",
         mode, k, kcr_store_len(kcr_informer_store(inf)), (unsigned long long)(t1 - t0),
         (unsigned long long)(c1 - c0), proc_status("VmRSS"), proc_status("Threads"));
  fflush(stdout);
  sleep(1);
  kcr_informer_get_stats(inf, &st0);
  t0 = kcr_time_mono_ms();
  c0 = cpu_ms();
  usleep((useconds_t)(window_ms * 1000));
  t1 = kcr_time_mono_ms();
  c1 = cpu_ms();
  kcr_informer_get_stats(inf, &st);
  printf("window mode=%s k=%d ms=%llu cpu_ms=%llu events=%llu\n", mode, k,
         (unsigned long long)(t1 - t0), (unsigned long long)(c1 - c0),
         (unsigned long long)(st.events - st0.events));
  fflush(stdout);
  kcr_informer_free(inf);
  kcr_client_free(c);
  for(int i = 0; i < k; i++)
    free((char *)nss[i]);
  free(nss);
  kcr_errinfo_cleanup(&ei);
  return 0;
}

/* ---- churn ---- */

struct churn {
  const char *prefix;
  int t, n;
  uint64_t every_ms, end_ms; /* per thread */
  atomic_long patches;
};

static void *churn_run(void *p)
{
  struct churn *ch = p;
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  kcr_client *c = client();
  unsigned seed = (unsigned)kcr_time_mono_ns() ^ (unsigned)(uintptr_t)&ei;
  uint64_t due = kcr_time_mono_ms();
  long v = 0;

  while(kcr_time_mono_ms() < ch->end_ms) {
    char ns[64], name[64], body[96];
    ns_name(ns, sizeof(ns), ch->prefix, rand_r(&seed) % ch->t);
    snprintf(name, sizeof(name), "cm-%05d", rand_r(&seed) % ch->n);
    snprintf(body, sizeof(body), "{\"data\":{\"v\":\"%ld-%u\"}}", v++, seed);
    if(kcr_patch(c, &(struct kcr_ref){.gvr = &configmaps, .ns = ns, .name = name},
                 &(struct kcr_patch_opts){.type = KCR_PATCH_MERGE}, body, strlen(body),
                 NULL, &ei))
      die("patching a ConfigMap", &ei);
    atomic_fetch_add(&ch->patches, 1);
    due += ch->every_ms;
    uint64_t now = kcr_time_mono_ms();
    if(due > now)
      usleep((useconds_t)((due - now) * 1000));
  }
  kcr_client_free(c);
  kcr_errinfo_cleanup(&ei);
  return NULL;
}

static int churn(const char *prefix, int t, int n, int rate, uint64_t ms)
{
  struct churn ch = {.prefix = prefix,
                     .t = t,
                     .n = n,
                     .every_ms = rate > 0 ? 2000 / (uint64_t)rate : 1000,
                     .end_ms = kcr_time_mono_ms() + ms};
  pthread_t th[2];
  atomic_init(&ch.patches, 0);
  uint64_t t0 = kcr_time_mono_ms();
  for(int i = 0; i < 2; i++)
    pthread_create(&th[i], NULL, churn_run, &ch);
  for(int i = 0; i < 2; i++)
    pthread_join(th[i], NULL);
  printf("churn patches=%ld ms=%llu\n", atomic_load(&ch.patches),
         (unsigned long long)(kcr_time_mono_ms() - t0));
  return 0;
}

int main(int argc, char **argv)
{
  kcr_log_set_level(KCR_LOG_WARN);
  if(argc == 6 && !strcmp(argv[1], "setup"))
    return setup(argv[2], atoi(argv[3]), atoi(argv[4]), atoi(argv[5]));
  if(argc == 6 && !strcmp(argv[1], "watch") &&
     (!strcmp(argv[4], "per") || !strcmp(argv[4], "cluster")))
    return watch(argv[2], atoi(argv[3]), !strcmp(argv[4], "cluster"),
                 strtoull(argv[5], NULL, 10));
  if(argc == 7 && !strcmp(argv[1], "churn"))
    return churn(argv[2], atoi(argv[3]), atoi(argv[4]), atoi(argv[5]),
                 strtoull(argv[6], NULL, 10));
  fprintf(stderr, "usage: ns_crossover setup PREFIX T N BYTES\n"
                  "       ns_crossover watch PREFIX K per|cluster WINDOW_MS\n"
                  "       ns_crossover churn PREFIX T N RATE MS\n");
  return 1;
}
