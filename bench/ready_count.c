/* ready_count - counts EBDs with Ready=True from a watch (an informer), for
 * bench/ebd_bench.sh --poll watch: a cheaper and finer clock than polling
 * `kubectl get ebd -o jsonpath` (which LISTs every EBD each time).
 *
 *   ready_count NAMESPACE N T0 CSV [PER_EBD]
 *
 * T0 is the benchmark's start (seconds since the epoch, as `date +%s.%N`).
 * Every 0.5 s a line "seconds-since-T0,ready" is appended to CSV; when N
 * are Ready it prints "seconds-since-T0" of the event that made them N on
 * stdout and exits 0. Counting is by transition, from the informer's
 * handlers (one parse of the old and new object per event), so it costs
 * nothing while nothing changes. Uses KUBECONFIG.
 *
 * PER_EBD (optional): then written at the end, one line per EBD seen,
 * "name,seen_ms,ready_ms" after a header line, both in milliseconds since
 * T0: seen_ms when the informer first saw the EBD (its LIST or ADDED
 * event: within the watch's delay of the create), ready_ms when it first
 * saw it with Ready=True (empty if never). ready_ms - seen_ms is the EBD's
 * time to Ready; the ready_ms column sorted gives the readiness curve. The
 * millisecond clock is the watch's, not the objects' timestamps (those
 * have whole seconds). */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kcr.h"

static const struct kcr_gvr ebds = {.group = "ebdman.example.com",
                                    .version = "v1beta1",
                                    .resource = "ebds",
                                    .namespaced = true};

static atomic_long ready;
static atomic_llong reached_ns; /* realtime ns when ready first reached n */
static long want;

/* Per EBD, when PER_EBD is asked for: touched by the informer's thread
 * only, read by main once the informer is freed (its threads joined). */
struct seen {
  struct kcr_hnode hn;
  long long seen_ns, ready_ns; /* realtime; ready_ns 0: not yet */
  char name[];
};
static bool per_ebd;
static struct kcr_htab seen_tab = KCR_HTAB_INIT;

static long long wall_ns(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static bool is_ready(kcr_obj *o)
{
  cJSON *t;
  struct kcr_cond c;
  bool r;

  if(!o || kcr_obj_parse(o, &t))
    return false;
  r = !kcr_cond_get(kcr_json_at(t, "/status/conditions"), "Ready", &c) &&
      !strcmp(c.status, "True");
  cJSON_Delete(t);
  return r;
}

static void bump(long d)
{
  long now = atomic_fetch_add(&ready, d) + d;
  long long zero = 0;
  if(d > 0 && now >= want)
    atomic_compare_exchange_strong(&reached_ns, &zero, wall_ns());
}

/* Notes that o was seen now, and Ready now if ready (first times only).
 * Out of memory: the EBD is left out of PER_EBD. */
static void note(kcr_obj *o, bool ready_now)
{
  const char *name = kcr_obj_name(o);
  uint64_t h = kcr_hash_str(name);
  struct seen *s = NULL;
  long long t = wall_ns();

  if(!per_ebd)
    return;
  for(struct kcr_hnode *n = kcr_htab_lookup(&seen_tab, h); n && !s;
      n = kcr_htab_lookup_next(n))
    if(!strcmp(KCR_HTAB_ENTRY(n, struct seen, hn)->name, name))
      s = KCR_HTAB_ENTRY(n, struct seen, hn);
  if(!s) {
    size_t len = strlen(name) + 1;
    if(!(s = calloc(1, sizeof(*s) + len)))
      return;
    memcpy(s->name, name, len);
    s->seen_ns = t;
    if(kcr_htab_insert(&seen_tab, &s->hn, h)) {
      free(s);
      return;
    }
  }
  if(ready_now && !s->ready_ns)
    s->ready_ns = t;
}

static void on_add(kcr_obj *o, void *ud)
{
  bool r = is_ready(o);
  note(o, r);
  if(r)
    bump(1);
}

static void on_update(kcr_obj *old, kcr_obj *cur, void *ud)
{
  if(old == cur)
    return;
  bool a = is_ready(old), b = is_ready(cur);
  note(cur, b);
  if(a != b)
    bump(b ? 1 : -1);
}

/* PER_EBD's lines; frees the records. */
static int write_per_ebd(const char *path, double t0)
{
  FILE *f = fopen(path, "w");
  struct kcr_htab_iter it;
  struct kcr_hnode *n;

  if(f)
    fprintf(f, "name,seen_ms,ready_ms\n");
  kcr_htab_iter_init(&it, &seen_tab);
  while((n = kcr_htab_iter_next(&it))) {
    struct seen *s = KCR_HTAB_ENTRY(n, struct seen, hn);
    if(f) {
      fprintf(f, "%s,%.0f,", s->name, ((double)s->seen_ns / 1e9 - t0) * 1e3);
      if(s->ready_ns)
        fprintf(f, "%.0f", ((double)s->ready_ns / 1e9 - t0) * 1e3);
      fputc('\n', f);
    }
    free(s);
  }
  kcr_htab_cleanup(&seen_tab);
  if(!f || fclose(f)) {
    fprintf(stderr, "ready_count: cannot write %s\n", path);
    return 1;
  }
  return 0;
}

static void on_delete(kcr_obj *o, void *ud)
{
  if(is_ready(o))
    bump(-1);
}

int main(int argc, char **argv)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  kcr_config *cfg = NULL;
  kcr_client *c = NULL;
  kcr_informer *inf;

  if(argc != 5 && argc != 6) {
    fprintf(stderr, "usage: ready_count NAMESPACE N T0 CSV [PER_EBD]\n");
    return 2;
  }
  per_ebd = argc == 6;
  want = strtol(argv[2], NULL, 10);
  double t0 = strtod(argv[3], NULL);
  FILE *csv = fopen(argv[4], "a");
  kcr_log_set_level(KCR_LOG_WARN);
  if(csv && !kcr_config_load(&(struct kcr_config_opts){0}, &cfg, &ei))
    kcr_client_new(&(struct kcr_client_opts){.config = cfg}, &c, &ei);
  kcr_config_free(cfg); /* the client holds its own reference */
  if(!c) {
    fprintf(stderr, "ready_count: %s\n", ei.message ? ei.message : "cannot start");
    return 2;
  }
  if(kcr_informer_new(
         &(struct kcr_informer_opts){.client = c, .gvr = &ebds, .ns = argv[1]}, &inf,
         NULL) ||
     kcr_informer_add_handlers(inf,
                               &(struct kcr_informer_handlers){.on_add = on_add,
                                                               .on_update = on_update,
                                                               .on_delete = on_delete}) ||
     kcr_informer_start(inf)) {
    fprintf(stderr, "ready_count: informer failed\n");
    return 2;
  }
  for(long tick = 0;; tick++) {
    long long at = atomic_load(&reached_ns);
    if(tick % 5 == 0 || at) {
      fprintf(csv, "%.1f,%ld\n", (double)wall_ns() / 1e9 - t0, atomic_load(&ready));
      fflush(csv);
    }
    if(at) {
      printf("%.2f\n", (double)at / 1e9 - t0);
      break;
    }
    nanosleep(&(struct timespec){0, 100000000}, NULL);
  }
  fclose(csv);
  kcr_informer_free(inf);
  kcr_client_free(c);
  return per_ebd ? write_per_ebd(argv[5], t0) : 0;
}
