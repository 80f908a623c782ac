/* dryrun-load: creates EBDs with dryRun=All at a steady rate through the
 * apiserver, so that every request calls the admission webhooks while
 * nothing is stored - the load of tests/e2e/test_webhook_rotation.sh.
 *
 *   dryrun-load --namespace NS --rate 100 --duration 150s [--threads 8]
 *               [--kubeconfig K] [--image IMAGE]
 *
 * Request i (from 0) is sent at start + i / rate by one of the threads; an
 * EBD named dryrun-<i> with spec.vfmTemplate.replicas 1 and, with --image, that
 * image (without it, the defaulting webhook is called too). Prints one
 * line: "sent=N ok=N failed=N p50_ms=X p99_ms=X max_ms=X late=N", then up
 * to five failures (code and message), and exits 1 when any failed. late
 * counts requests sent more than 100 ms after their time (the generator
 * could not keep the rate). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kcr.h"

static const char *ns, *image;
static int rate = 100, threads = 8;
static uint64_t duration_ms = 10000;
static kcr_client *client;
static uint64_t t_start, total;
static atomic_uint_fast64_t next, ok, failed, late;
static double *lat_ms; /* per request; -1 when it failed */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static char errors[5][512];
static int nerrors;

static const struct kcr_gvr ebds = {.group = "ebdman.example.com",
                                    .version = "v1beta1",
                                    .resource = "ebds",
                                    .namespaced = true};

static void sleep_until_ns(uint64_t t)
{
  uint64_t now = kcr_time_mono_ns();
  if(t > now) {
    struct timespec ts = {.tv_sec = (time_t)((t - now) / 1000000000u),
                          .tv_nsec = (long)((t - now) % 1000000000u)};
    nanosleep(&ts, NULL);
  }
}

static void *worker(void *arg)
{
  (void)arg;
  for(;;) {
    uint64_t i = atomic_fetch_add(&next, 1);
    if(i >= total)
      return NULL;
    uint64_t due = t_start + i * 1000000000u / (uint64_t)rate;
    sleep_until_ns(due);
    uint64_t t0 = kcr_time_mono_ns();
    if(t0 > due + 100000000u)
      atomic_fetch_add(&late, 1);
    char name[64];
    snprintf(name, sizeof(name), "dryrun-%06llu", (unsigned long long)i);
    cJSON *o = cJSON_CreateObject(), *md, *spec, *vfm;
    cJSON_AddStringToObject(o, "apiVersion", "ebdman.example.com/v1beta1");
    cJSON_AddStringToObject(o, "kind", "EBD");
    md = cJSON_AddObjectToObject(o, "metadata");
    cJSON_AddStringToObject(md, "name", name);
    spec = cJSON_AddObjectToObject(o, "spec");
    vfm = cJSON_AddObjectToObject(spec, "vfm");
    cJSON_AddNumberToObject(vfm, "replicas", 1);
    if(image)
      cJSON_AddStringToObject(vfm, "image", image);
    struct kcr_errinfo ei = KCR_ERRINFO_INIT;
    kcr_err rc = kcr_create(client, &(struct kcr_ref){.gvr = &ebds, .ns = ns}, o,
                            &(struct kcr_write_opts){.dry_run = true}, NULL, &ei);
    double ms = (double)(kcr_time_mono_ns() - t0) / 1e6;
    cJSON_Delete(o);
    if(rc) {
      atomic_fetch_add(&failed, 1);
      lat_ms[i] = -1;
      pthread_mutex_lock(&mu);
      if(nerrors < 5)
        snprintf(errors[nerrors++], sizeof(errors[0]), "%s: %s (HTTP %d)", name,
                 ei.message ? ei.message : kcr_strerror(rc), ei.code);
      pthread_mutex_unlock(&mu);
    } else {
      atomic_fetch_add(&ok, 1);
      lat_ms[i] = ms;
    }
    kcr_errinfo_cleanup(&ei);
  }
}

static int cmp_double(const void *a, const void *b)
{
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
  struct kcr_config_opts co = {0};
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  kcr_config *cfg = NULL;
  const struct kcr_flag flags[] = {
      {"namespace", KCR_FLAG_STRING, &ns, "where the EBDs are created", .arg = "NS"},
      {"rate", KCR_FLAG_INT, &rate, "requests per second", .min = 1, .max = 10000},
      {"duration", KCR_FLAG_DURATION, &duration_ms, "how long", .min = 1,
       .max = INT64_MAX},
      {"threads", KCR_FLAG_INT, &threads, "requests in flight at most", .min = 1,
       .max = 256},
      {"image", KCR_FLAG_STRING, &image, "spec.vfmTemplate.image (default: none)",
       .arg = "IMAGE"},
  };
  kcr_cli_parse_or_exit(&(struct kcr_cli){.prog = "dryrun-load",
                                          .about = "Creates EBDs with dryRun=All at a "
                                                   "steady rate.",
                                          .flags = flags,
                                          .nflags = sizeof(flags) / sizeof(flags[0]),
                                          .config = &co},
                        argc, argv);
  if(!ns) {
    fprintf(stderr, "dryrun-load: --namespace is required\n");
    return 2;
  }
  if(kcr_config_load(&co, &cfg, &ei) ||
     kcr_client_new(&(struct kcr_client_opts){.config = cfg, .user_agent = "dryrun-load"},
                    &client, &ei)) {
    fprintf(stderr, "dryrun-load: %s\n", ei.message ? ei.message : "no client");
    return 2;
  }
  kcr_config_free(cfg);
  total = duration_ms * (uint64_t)rate / 1000;
  lat_ms = calloc(total ? total : 1, sizeof(*lat_ms));
  pthread_t th[256];
  t_start = kcr_time_mono_ns();
  for(int t = 0; t < threads; t++)
    if(pthread_create(&th[t], NULL, worker, NULL)) {
      fprintf(stderr, "dryrun-load: no thread\n");
      return 2;
    }
  for(int t = 0; t < threads; t++)
    pthread_join(th[t], NULL);
  size_t n = 0;
  for(uint64_t i = 0; i < total; i++)
    if(lat_ms[i] >= 0)
      lat_ms[n++] = lat_ms[i];
  qsort(lat_ms, n, sizeof(*lat_ms), cmp_double);
  printf("sent=%llu ok=%llu failed=%llu p50_ms=%.1f p99_ms=%.1f max_ms=%.1f late=%llu\n",
         (unsigned long long)total, (unsigned long long)atomic_load(&ok),
         (unsigned long long)atomic_load(&failed), n ? lat_ms[n / 2] : 0.0,
         n ? lat_ms[n * 99 / 100] : 0.0, n ? lat_ms[n - 1] : 0.0,
         (unsigned long long)atomic_load(&late));
  for(int i = 0; i < nerrors; i++)
    printf("failure: %s\n", errors[i]);
  free(lat_ms);
  kcr_client_free(client);
  return atomic_load(&failed) ? 1 : 0;
}
