/* list_peak - an informer's peak RSS while it lists, against its settled
 * RSS, with a streaming list or a paged LIST (bench/README.md, section 8;
 * bench/list_peak.sh runs it).
 *
 *   list_peak NS GROUP VERSION RESOURCE [--paged] [--relist]
 *
 * In this fresh process: resets its peak RSS (/proc/self/clear_refs 5),
 * makes an informer of the resource in NS (every namespace: NS "-"),
 * starts it and waits until synced; then, a second later, prints
 *
 *   initial mode=stream|paged objects=N store_bytes=B sync_ms=T rss0_kb=R
 *           peak_kb=P settled_kb=S
 *
 * (rss0: before the informer was made; peak: VmHWM since the reset, read
 * as the list is in; settled: VmRSS a second later, after malloc_trim(0),
 * so the heap's free pages do not count). With --relist it then resets
 * the peak again, prints "ready-for-relist" and waits (up to 300 s) for the
 * informer to relist after a 410 (the caller compacts etcd and restarts the
 * apiserver) and to watch again, and prints the same figures as "relist"
 * (sync_ms: from the 410 to the watch after the relist, to 20 ms).
 * Exits 0, or 1 with a message on stderr. */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kcr.h"
#include "proc_status.h"

static void reset_peak(void)
{
  FILE *f = fopen("/proc/self/clear_refs", "w");
  if(!f || fputs("5", f) < 0) {
    fprintf(stderr, "list_peak: cannot reset the peak RSS (/proc/self/clear_refs)\n");
    exit(1);
  }
  fclose(f);
}

static void report(const char *what, kcr_informer *inf, bool paged, uint64_t ms,
                   long rss0)
{
  kcr_store *s = kcr_informer_store(inf);
  long peak = proc_status("VmHWM");
  sleep(1);
  malloc_trim(0); /* settled: what stays in use, not what the heap kept */
  printf("%s mode=%s objects=%zu store_bytes=%zu sync_ms=%llu rss0_kb=%ld peak_kb=%ld "
         "settled_kb=%ld\n",
         what, paged ? "paged" : "stream", kcr_store_len(s), kcr_store_bytes(s),
         (unsigned long long)ms, rss0, peak, proc_status("VmRSS"));
  fflush(stdout);
}

int main(int argc, char **argv)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  struct kcr_config_opts co = {0};
  struct kcr_informer_stats st0, st;
  bool paged = false, relist = false;
  kcr_config *cfg = NULL;
  kcr_client *c = NULL;
  kcr_informer *inf = NULL;
  uint64_t t0;
  long rss0;

  if(argc < 5) {
    fprintf(stderr, "usage: list_peak NS GROUP VERSION RESOURCE [--paged] [--relist]\n");
    return 1;
  }
  for(int i = 5; i < argc; i++) {
    if(!strcmp(argv[i], "--paged"))
      paged = true;
    else if(!strcmp(argv[i], "--relist"))
      relist = true;
    else {
      fprintf(stderr, "list_peak: unknown argument %s\n", argv[i]);
      return 1;
    }
  }
  struct kcr_gvr gvr = {
      .group = argv[2], .version = argv[3], .resource = argv[4], .namespaced = true};
  if(kcr_config_load(&co, &cfg, &ei) ||
     kcr_client_new(&(struct kcr_client_opts){.config = cfg}, &c, &ei)) {
    fprintf(stderr, "list_peak: %s\n", ei.message ? ei.message : "no client");
    return 1;
  }
  kcr_config_free(cfg);
  reset_peak();
  rss0 = proc_status("VmRSS");
  t0 = kcr_time_mono_ms();
  if(kcr_informer_new(
         &(struct kcr_informer_opts){.client = c,
                                     .gvr = &gvr,
                                     .ns = strcmp(argv[1], "-") ? argv[1] : NULL,
                                     .paged_list = paged},
         &inf, &ei) ||
     kcr_informer_start(inf) || !kcr_informer_wait_synced(inf, 600000)) {
    fprintf(stderr, "list_peak: the informer did not sync: %s\n",
            ei.message ? ei.message : "timeout");
    return 1;
  }
  report("initial", inf, paged, kcr_time_mono_ms() - t0, rss0);
  if(relist) {
    kcr_informer_get_stats(inf, &st0);
    reset_peak();
    rss0 = proc_status("VmRSS");
    printf("ready-for-relist\n");
    fflush(stdout);
    /* the 410, then the next watch: after the relist's list is in the store
     * (a streaming list counts as a watch once its initial events are) */
    for(int i = 0; i < 3000; i++) {
      kcr_informer_get_stats(inf, &st);
      if(st.relists_gone > st0.relists_gone)
        break;
      usleep(20000);
    }
    if(st.relists_gone == st0.relists_gone) {
      fprintf(stderr, "list_peak: no relist within 60 s\n");
      return 1;
    }
    t0 = kcr_time_mono_ms();
    st0 = st;
    for(int i = 0; i < 15000 && st.watches == st0.watches; i++) {
      usleep(20000);
      kcr_informer_get_stats(inf, &st);
    }
    if(st.watches == st0.watches) {
      fprintf(stderr, "list_peak: no watch within 300 s of the relist\n");
      return 1;
    }
    report("relist", inf, paged, kcr_time_mono_ms() - t0, rss0);
  }
  kcr_informer_free(inf);
  kcr_client_free(c);
  kcr_errinfo_cleanup(&ei);
  return 0;
}
