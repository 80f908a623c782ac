/* vfm-sim: plays the owner of VFM custom resources, on libkcr, with its own
 * field manager ("vfm-sim"), so ebdman has something real to wait for.
 *
 * On a new VFM generation it reports Ready=False/Progressing; after a delay
 * (default 2 s, or the annotation vfm-sim.ebdman.example.com/delay: "500ms")
 * Ready=True/Ready. With vfm-sim.ebdman.example.com/fail: "<message>" it
 * reports Ready=False/Failed with that message. Conditions carry the VFM's
 * generation as observedGeneration. Delays are timers in the work queue
 * (requeue_after), never sleeps.
 *
 * Delays are capped at 24h (VFM_SIM_MAX_DELAY_MS, vfm_delay.h): a longer or
 * malformed delay annotation is reported as Ready=False/Failed, and a longer
 * --delay is refused. The annotation is anyone's to write, and the time left
 * is computed without wrapping (vfm_sim_wait_ms), so the requeue delay never
 * exceeds the cap. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kcr.h"
#include "kcr/controller.h"
#include "kcr/manager.h"
#include "kcr/status.h"
#include "vfm_delay.h"
#include "vfms.h" /* typed VFMs: kcr_generate_types(... CRDS ..._vfms.yaml) */

#define ANN_DELAY "vfm-sim.ebdman.example.com/delay"
#define ANN_FAIL  "vfm-sim.ebdman.example.com/fail"

/* When each VFM generation started progressing (in memory). */
struct start {
  struct kcr_hnode hn; /* in sim.starts, under kcr_hash_str(key) */
  char *key;
  int64_t gen;
  uint64_t at_ms;
};

struct sim {
  kcr_informer *vfms;
  kcr_status_writer *status;
  uint64_t default_delay_ms;
  pthread_mutex_t mu;     /* guards starts */
  struct kcr_htab starts; /* struct start by key */
};

/* Keys are VFM names users choose: a keyed hash (kcr/hash.h), so nobody can
 * pick names that all land in one chain. Call with s->mu held. */
static struct start *start_find(struct sim *s, const char *key, uint64_t h)
{
  for(struct kcr_hnode *n = kcr_htab_lookup(&s->starts, h); n;
      n = kcr_htab_lookup_next(n)) {
    struct start *e = KCR_HTAB_ENTRY(n, struct start, hn);
    if(!strcmp(e->key, key))
      return e;
  }
  return NULL;
}

/* Returns when generation `gen` of key started progressing, recording now if
 * it is new. */
static uint64_t started_at(struct sim *s, const char *key, int64_t gen)
{
  uint64_t h = kcr_hash_str(key), now = kcr_time_mono_ms(), at = now;
  struct start *e;
  pthread_mutex_lock(&s->mu);
  e = start_find(s, key, h);
  if(!e) {
    if((e = calloc(1, sizeof(*e))) && (e->key = strdup(key)) &&
       !kcr_htab_insert(&s->starts, &e->hn, h)) {
      e->gen = gen;
      e->at_ms = now;
    } else {
      if(e)
        free(e->key);
      free(e);
      e = NULL;
    }
  } else if(e->gen != gen) {
    e->gen = gen;
    e->at_ms = now;
  }
  if(e)
    at = e->at_ms;
  pthread_mutex_unlock(&s->mu);
  return at;
}

/* Writes Ready for the cached VFM o (its text is the comparison's base). */
static kcr_err report(kcr_ctx *cx, struct sim *s, const kcr_obj *o, const char *status,
                      const char *reason, const char *msg, int64_t gen)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  struct kcr_cond c = {.type = "Ready",
                       .status = status,
                       .reason = reason,
                       .message = msg,
                       .observed_generation = gen};
  struct kcr_status_desired d = {.conds = &c, .n = 1, .observed_generation = gen};
  enum kcr_write_result res;
  size_t len;
  const char *json = kcr_obj_json(o, &len);
  kcr_err rc = kcr_status_write_text(s->status, json, len, &d, &res, &ei);
  if(rc)
    KCR_CLOG(cx, KCR_LOG_WARN, "status write failed", KCR_S("err", kcr_err_name(rc)),
             KCR_S("detail", ei.message));
  else if(res == KCR_WRITE_WRITTEN)
    KCR_CLOG(cx, KCR_LOG_INFO, "reported", KCR_S("ready", status),
             KCR_S("reason", reason), KCR_I("generation", gen));
  kcr_errinfo_cleanup(&ei);
  return rc;
}

static kcr_err reconcile(kcr_ctx *cx, const struct kcr_request *req,
                         struct kcr_result *res, void *ud)
{
  struct sim *s = ud;
  kcr_obj *o = kcr_store_ref(kcr_informer_store(s->vfms), req->ns, req->name);
  struct vfm v;
  uint64_t delay = s->default_delay_ms, wait;
  kcr_err rc;

  if(!o)
    return KCR_OK;
  /* A copy: its strings are NUL-terminated C strings (s NULL when absent). */
  if((rc = vfm_from_obj(o, KCR_TYPED_COPY, kcr_ctx_arena(cx), &v, NULL))) {
    kcr_obj_unref(o);
    return rc;
  }
  int64_t gen = v.metadata.generation;
  const char *fail = KCR_MAP_STR(v.metadata.annotations, ANN_FAIL).s,
             *delay_s = KCR_MAP_STR(v.metadata.annotations, ANN_DELAY).s;
  if(delay_s && vfm_sim_delay_parse(delay_s, &delay)) {
    rc = report(cx, s, o, "False", "Failed",
                "annotation " ANN_DELAY " is not a duration from 0 to " VFM_SIM_MAX_DELAY
                " such as 500ms or 2s",
                gen);
  } else if(fail) {
    rc = report(cx, s, o, "False", "Failed", fail, gen);
  } else if(!delay) {
    rc = report(cx, s, o, "True", "Ready", "vfm is available", gen);
  } else if(!(wait = vfm_sim_wait_ms(started_at(s, req->key, gen), delay,
                                     kcr_time_mono_ms()))) {
    rc = report(cx, s, o, "True", "Ready", "vfm is available", gen);
  } else {
    rc = report(cx, s, o, "False", "Progressing", "vfm is starting", gen);
    res->requeue_after_ms = wait; /* at most VFM_SIM_MAX_DELAY_MS */
  }
  kcr_obj_unref(o);
  return rc;
}

int main(int argc, char **argv)
{
  struct kcr_config_opts co = {0};
  struct kcr_manager_opts mo = {
      .name = "vfm-sim", .metrics_addr = "0", .health_addr = "0"};
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  struct sim s = {.default_delay_ms = 2000, .mu = PTHREAD_MUTEX_INITIALIZER};
  const char *ns = NULL;
  int workers = 4;
  kcr_manager *m;
  kcr_controller *ctl = NULL;
  const struct kcr_flag flags[] = {
      {"namespace", KCR_FLAG_STRING, &ns, "watch VFMs in one namespace (default: all)",
       .arg = "NS"},
      {"workers", KCR_FLAG_INT, &workers, "concurrent reconciles", .min = 1, .max = 256},
      {"delay", KCR_FLAG_DURATION, &s.default_delay_ms,
       "how long a new VFM generation stays Progressing before it is Ready",
       .max = VFM_SIM_MAX_DELAY_MS},
  };

  kcr_cli_parse_or_exit(
      &(struct kcr_cli){.prog = "vfm-sim",
                        .about =
                            "Plays the VFM's owner: Ready=False/Progressing, then "
                            "Ready=True after the delay\n(annotation " ANN_DELAY
                            " overrides it); annotation " ANN_FAIL
                            "\nmakes it report Ready=False/Failed with that message.",
                        .flags = flags,
                        .nflags = sizeof(flags) / sizeof(flags[0]),
                        .config = &co,
                        .manager = &mo,
                        .log = true},
      argc, argv);
  kcr_err rc = kcr_config_load(&co, &mo.config, &ei);
  if(!rc)
    rc = kcr_manager_new(&mo, &m, &ei);
  kcr_config_free(mo.config); /* the manager's client holds its own reference */
  if(rc) {
    fprintf(stderr, "vfm-sim: %s\n", ei.message ? ei.message : kcr_strerror(rc));
    kcr_errinfo_cleanup(&ei);
    return 2;
  }
  struct kcr_status_writer_opts so = {.client = kcr_manager_client(m),
                                      .gvr = &vfm_gvr,
                                      .api_version = "ebdman.example.com/v1alpha1",
                                      .kind = "VFM",
                                      .field_manager = "vfm-sim",
                                      .mode = KCR_STATUS_APPLY,
                                      .metrics = kcr_manager_metrics(m)};
  if(kcr_manager_informer(m, &(struct kcr_informer_opts){.gvr = &vfm_gvr, .ns = ns},
                          &s.vfms, &ei) ||
     kcr_status_writer_new(&so, &s.status, &ei) ||
     kcr_controller_new(&(struct kcr_controller_opts){.name = "vfm-sim",
                                                      .workers = workers,
                                                      .reconcile = reconcile,
                                                      .ud = &s,
                                                      .client = kcr_manager_client(m),
                                                      .metrics = kcr_manager_metrics(m)},
                        &ctl, &ei) ||
     kcr_controller_for(ctl, s.vfms, NULL) || kcr_manager_add(m, ctl)) {
    fprintf(stderr, "vfm-sim: setting up failed%s%s\n", ei.message ? ": " : "",
            ei.message ? ei.message : "");
    kcr_errinfo_cleanup(&ei);
    kcr_controller_free(ctl); /* not the manager's: adding it failed or never came */
    kcr_status_writer_free(s.status);
    kcr_manager_free(m);
    return 1;
  }
  int status = kcr_manager_run(m);
  kcr_manager_free(m);
  /* The writer holds its own references to the manager's client and
   * metrics registry: freeing it before or after the manager is the same. */
  kcr_status_writer_free(s.status);
  struct kcr_htab_iter it;
  struct kcr_hnode *n;
  kcr_htab_iter_init(&it, &s.starts);
  while((n = kcr_htab_iter_next(&it))) {
    struct start *e = KCR_HTAB_ENTRY(n, struct start, hn);
    free(e->key);
    free(e);
  }
  kcr_htab_cleanup(&s.starts);
  return status;
}
