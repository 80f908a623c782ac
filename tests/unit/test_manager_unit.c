/* The manager at unit level: its client is put on the wire seam after
 * kcr_manager_new (nothing uses it before run), answered by a scripted API
 * with ConfigMaps and a Lease. Losing the lease returns from run at once,
 * without waiting for a stuck reconcile, whose writes are then refused;
 * free waits for it. A stop while informers sync returns 0; a bad or busy
 * server address fails kcr_manager_new, caches that never sync fail run. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "kcr.h"
#include "kube/client-int.h"
#include "tcheck.h"
#include "twait.h"
#include "tfail.h"
#include "tlease.h"
#include "twire.h"

#define CMS "/api/v1/namespaces/default/configmaps"
#define EVS "/apis/events.k8s.io/v1/namespaces/default/events"

static const struct kcr_gvr cms = {"", "v1", "configmaps", true};

/* ---- the API: ConfigMaps in "default" and a Lease ---- */

enum put_mode { PUT_OK, PUT_FAIL };

struct api {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  struct tlease l;
  enum put_mode mode;
  int lease_writes, releases, lists, watches, patches, gets;
  int event_posts, event_patches, event_patches_after_release;
  bool hold_list;    /* LISTs wait for release_list, then answer list_code */
  bool list_held;    /* a LIST is being held */
  bool release_list; /* let it go */
  long list_code;    /* 200: the list; else that error */
};

static void api_init(struct api *a)
{
  memset(a, 0, sizeof(*a));
  tlock_init(&a->mu, &a->cv);
  a->list_code = 200;
}

static void api_cleanup(struct api *a)
{
  tlease_cleanup(&a->l);
  pthread_cond_destroy(&a->cv);
  pthread_mutex_destroy(&a->mu);
}

static int api_get(struct api *a, const int *field)
{
  pthread_mutex_lock(&a->mu);
  int v = *field;
  pthread_mutex_unlock(&a->mu);
  return v;
}

/* Answers a request of the Lease (*rc: the answer's); false if it is not
 * one. */
static bool lease_request(struct api *a, struct twire_call *call, kcr_err *rc)
{
  enum tlease_done done;

  if(twire_is(call, "PUT", TLEASE) && a->mode == PUT_FAIL) {
    *rc = twire_reply(call, 500, "%s", twire_status_json(500, "InternalError"));
    return true;
  }
  *rc = tlease_serve(&a->l, call, &done);
  if(done == TLEASE_STORED) {
    a->lease_writes++;
    if(!*tlease_holder(a->l.obj))
      a->releases++;
  }
  return done != TLEASE_OTHER;
}

static kcr_err list_request(struct api *a, struct twire_call *call)
{
  struct timespec ts = kcr_time_mono_after(60000);
  a->lists++;
  if(a->hold_list) {
    a->list_held = true;
    pthread_cond_broadcast(&a->cv);
    while(!a->release_list && pthread_cond_timedwait(&a->cv, &a->mu, &ts) == 0)
      ;
    TCHECK(a->release_list);
    a->list_held = false;
  }
  if(a->list_code != 200)
    return twire_reply(call, a->list_code, "%s",
                       twire_status_json(a->list_code, "InternalError"));
  return twire_reply(call, 200,
                     "{\"kind\":\"ConfigMapList\",\"apiVersion\":\"v1\",\"metadata\":{"
                     "\"resourceVersion\":\"10\"},\"items\":[{\"metadata\":{\"name\":"
                     "\"a\",\"namespace\":\"default\",\"resourceVersion\":\"1\"}}]}");
}

static kcr_err api(struct twire_call *call, void *ud)
{
  struct api *a = ud;
  kcr_err rc;

  if(call->req->watch) { /* no events; until the informer stops */
    TCHECK(twire_is(call, "GET", CMS));
    pthread_mutex_lock(&a->mu);
    a->watches++;
    pthread_mutex_unlock(&a->mu);
    twire_stream(call, 200);
    twire_wait_cancel(call, 60000);
    return KCR_OK;
  }
  pthread_mutex_lock(&a->mu);
  if(lease_request(a, call, &rc)) {
    /* rc: its answer */
  } else if(twire_is(call, "GET", CMS "/a")) {
    a->gets++;
    rc = twire_reply(
        call, 200,
        "{\"metadata\":{\"name\":\"a\",\"namespace\":\"default\","
        "\"resourceVersion\":\"%d\",\"managedFields\":[{\"manager\":\"x\"}]}}",
        a->gets);
  } else if(twire_is(call, "GET", CMS "/")) {
    a->gets++;
    rc = twire_reply(call, 404, "%s", twire_status_json(404, "NotFound"));
  } else if(twire_is(call, "GET", CMS)) {
    rc = list_request(a, call);
  } else if(twire_is(call, "POST", EVS)) {
    a->event_posts++;
    rc = twire_reply(call, 201, "{}");
  } else if(twire_is(call, "PATCH", EVS "/")) {
    a->event_patches++;
    a->event_patches_after_release += a->releases > 0;
    rc = twire_reply(call, 200, "{}");
  } else if(twire_is(call, "PATCH", CMS)) {
    a->patches++;
    rc = twire_reply(call, 200,
                     "{\"metadata\":{\"name\":\"a\",\"namespace\":\"default\"}}");
  } else {
    TCHECK_FAIL("unexpected request %s %s", call->req->method, call->req->path);
    rc = twire_reply(call, 404, "%s", twire_status_json(404, "NotFound"));
  }
  pthread_cond_broadcast(&a->cv);
  pthread_mutex_unlock(&a->mu);
  return rc;
}

/* ---- the manager under test ---- */

struct mopts {
  bool elect;
  uint64_t sync_timeout_ms;
  uint64_t grace_ms; /* 0: far longer than the test */
};

static kcr_manager *manager(struct api *a, const struct mopts *mo)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  kcr_config *cfg = NULL;
  kcr_manager *m = NULL;
  kcr_err rc;

  cfg = twire_config();
  rc = kcr_manager_new(
      &(struct kcr_manager_opts){
          .config = cfg,
          .name = "t",
          .metrics_addr = "0",
          .health_addr = "0",
          .leader_elect = mo->elect,
          .lease_namespace = "default",
          .lease_name = "lock",
          .identity = "me",
          .lease_duration_ms = 2000,
          .renew_deadline_ms = 1500,
          .retry_period_ms = 300,
          .sync_timeout_ms = mo->sync_timeout_ms,
          .grace_ms = mo->grace_ms ? mo->grace_ms : 60000,
          .no_signals = true,
      },
      &m, &ei);
  kcr_config_free(cfg); /* the manager's client holds its own reference */
  if(rc)
    print_error("manager: %s\n", ei.message ? ei.message : kcr_err_name(rc));
  kcr_errinfo_cleanup(&ei);
  assert_int_equal(KCR_OK, rc);
  /* Nothing uses the client before run: put it on the wire. */
  twire_attach(kcr_manager_client(m), api, a);
  return m;
}

static kcr_controller *controller(kcr_manager *m, kcr_reconcile_fn fn, void *ud)
{
  kcr_informer *inf;
  kcr_controller *c;
  assert_int_equal(
      KCR_OK,
      kcr_manager_informer(m, &(struct kcr_informer_opts){.gvr = &cms, .ns = "default"},
                           &inf, NULL));
  assert_int_equal(
      KCR_OK,
      kcr_controller_new(
          &(struct kcr_controller_opts){
              .name = "ctl", .reconcile = fn, .ud = ud, .client = kcr_manager_client(m)},
          &c, NULL));
  assert_int_equal(KCR_OK, kcr_controller_for(c, inf, NULL));
  assert_int_equal(KCR_OK, kcr_manager_add(m, c));
  return c;
}

struct run {
  kcr_manager *m;
  pthread_t th;
  int status;
  struct tsig done;
};

static void *run_main(void *p)
{
  struct run *r = p;
  r->status = kcr_manager_run(r->m);
  tsig_add(&r->done, 1);
  return NULL;
}

static void run_start(struct run *r, kcr_manager *m)
{
  r->m = m;
  r->status = -1;
  tsig_init(&r->done);
  assert_int_equal(0, pthread_create(&r->th, NULL, run_main, r));
}

/* Joins run's thread; its exit code. */
static int run_join(struct run *r)
{
  assert_true(tsig_wait(&r->done, 1, 60000));
  pthread_join(r->th, NULL);
  tsig_cleanup(&r->done);
  return r->status;
}

/* ---- losing the lease ---- */

struct stuck {
  struct tsig entered, write, wrote, ret;
  kcr_err write_rc;
  atomic_bool returned;
};

/* Blocks until the test lets it write, writes, then blocks until it may
 * return: a reconcile stuck past the end of the manager's run. */
static kcr_err stuck_reconcile(kcr_ctx *cx, const struct kcr_request *req,
                               struct kcr_result *res, void *ud)
{
  static const char body[] = "{\"data\":{\"k\":\"v\"}}";
  struct stuck *s = ud;
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;

  TCHECK(!strcmp(req->name, "a"));
  tsig_add(&s->entered, 1);
  if(TCHECK(tsig_wait(&s->write, 1, 60000)))
    s->write_rc = kcr_patch(kcr_ctx_client(cx), &(struct kcr_ref){&cms, "default", "a"},
                            &(struct kcr_patch_opts){KCR_PATCH_MERGE}, body,
                            sizeof(body) - 1, NULL, &ei);
  kcr_errinfo_cleanup(&ei);
  tsig_add(&s->wrote, 1);
  TCHECK(tsig_wait(&s->ret, 1, 60000));
  atomic_store(&s->returned, true);
  return KCR_OK;
}

static void losing_the_lease_returns_at_once_and_fences_a_stuck_reconcile(void **state)
{
  struct api a;
  struct stuck s = {0};
  struct run r;
  kcr_manager *m;
  uint64_t t_fail, t_ret;

  api_init(&a);
  tsig_init(&s.entered);
  tsig_init(&s.write);
  tsig_init(&s.wrote);
  tsig_init(&s.ret);
  atomic_init(&s.returned, false);
  m = manager(&a, &(struct mopts){.elect = true});
  controller(m, stuck_reconcile, &s);
  run_start(&r, m);
  assert_true(tsig_wait(&s.entered, 1, 60000)); /* leading, reconciling */
  assert_true(kcr_manager_leading(m));

  /* Renewals fail from now on: the lease is lost within the renew deadline
   * (1.5 s) plus a retry period; run returns then, not after the 60 s grace
   * the stuck reconcile would need. */
  pthread_mutex_lock(&a.mu);
  a.mode = PUT_FAIL;
  pthread_mutex_unlock(&a.mu);
  t_fail = kcr_time_mono_ms();
  assert_int_equal(1, run_join(&r));
  t_ret = kcr_time_mono_ms();
  assert_true(t_ret - t_fail < 15000);
  assert_false(kcr_manager_leading(m));
  assert_int_equal(1, kcr_manager_busy(m));
  assert_int_equal(0, api_get(&a, &a.releases)); /* a lost lease is not released */

  /* The stuck reconcile writes now: refused, never sent. */
  tsig_add(&s.write, 1);
  assert_true(tsig_wait(&s.wrote, 1, 60000));
  assert_int_equal(KCR_ECANCELED, s.write_rc);
  assert_int_equal(0, api_get(&a, &a.patches));

  /* Free waits for the reconcile, which returns once let go. */
  tsig_add(&s.ret, 1);
  kcr_manager_free(m);
  assert_true(atomic_load(&s.returned));
  tcheck_report();
  tsig_cleanup(&s.entered);
  tsig_cleanup(&s.write);
  tsig_cleanup(&s.wrote);
  tsig_cleanup(&s.ret);
  api_cleanup(&a);
}

/* ---- a reconcile past the grace period ---- */

/* SIGTERM (kcr_manager_stop) while a reconcile is stuck: run gives it the
 * grace period (300 ms), then returns 0 without it and without freeing
 * anything it uses - it still reconciles through the manager's client
 * (unfenced: no election) - and kcr_manager_busy counts it, which is how a
 * program decides to exit instead of freeing (ebdman: _exit). Free waits
 * for it. Under ASan a freed client or controller would fail here. */
static void
a_reconcile_past_the_grace_period_is_left_running_and_counted_busy(void **state)
{
  struct api a;
  struct stuck s = {0};
  struct run r;
  kcr_manager *m;
  uint64_t t_stop, t_ret;

  api_init(&a);
  tsig_init(&s.entered);
  tsig_init(&s.write);
  tsig_init(&s.wrote);
  tsig_init(&s.ret);
  atomic_init(&s.returned, false);
  m = manager(&a, &(struct mopts){.grace_ms = 300});
  controller(m, stuck_reconcile, &s);
  run_start(&r, m);
  assert_true(tsig_wait(&s.entered, 1, 60000));

  t_stop = kcr_time_mono_ms();
  kcr_manager_stop(m);
  assert_int_equal(0, run_join(&r)); /* a stop request: 0 */
  t_ret = kcr_time_mono_ms();
  assert_true(t_ret - t_stop >= 300);  /* the grace period was given */
  assert_true(t_ret - t_stop < 30000); /* but not waited out for the reconcile */
  assert_int_equal(1, kcr_manager_busy(m));
  assert_false(atomic_load(&s.returned));

  /* The reconcile goes on after run returned: its client still works. */
  tsig_add(&s.write, 1);
  assert_true(tsig_wait(&s.wrote, 1, 60000));
  assert_int_equal(KCR_OK, s.write_rc);
  assert_int_equal(1, api_get(&a, &a.patches));
  assert_int_equal(1, kcr_manager_busy(m));

  /* Free waits for it, which returns once let go. */
  tsig_add(&s.ret, 1);
  kcr_manager_free(m);
  assert_true(atomic_load(&s.returned));
  tcheck_report();
  tsig_cleanup(&s.entered);
  tsig_cleanup(&s.write);
  tsig_cleanup(&s.wrote);
  tsig_cleanup(&s.ret);
  api_cleanup(&a);
}

/* ---- stopping, start failures ---- */

static kcr_err never_reconciled(kcr_ctx *cx, const struct kcr_request *req,
                                struct kcr_result *res, void *ud)
{
  TCHECK_FAIL("reconciled %s although the caches never synced", req->key);
  return KCR_OK;
}

static void stop_from_another_thread_while_informers_sync_returns_0(void **state)
{
  struct api a;
  struct run r;
  kcr_manager *m;
  struct timespec ts = kcr_time_mono_after(60000);

  api_init(&a);
  a.hold_list = true;
  a.list_code = 500;
  m = manager(&a, &(struct mopts){0});
  controller(m, never_reconciled, NULL);
  run_start(&r, m);
  pthread_mutex_lock(&a.mu);
  while(!a.list_held && pthread_cond_timedwait(&a.cv, &a.mu, &ts) == 0)
    ;
  assert_true(a.list_held);
  pthread_mutex_unlock(&a.mu);

  kcr_manager_stop(m); /* the LIST is still in flight */
  pthread_mutex_lock(&a.mu);
  a.release_list = true;
  pthread_cond_broadcast(&a.cv);
  pthread_mutex_unlock(&a.mu);
  assert_int_equal(0, run_join(&r));
  assert_int_equal(0, kcr_manager_busy(m));
  assert_int_equal(0, api_get(&a, &a.watches));
  kcr_manager_free(m);
  tcheck_report();
  api_cleanup(&a);
}

/* A manager without election on addresses metrics and health. */
static kcr_err new_manager(const char *metrics, const char *health, kcr_manager **m,
                           struct kcr_errinfo *ei)
{
  kcr_config *cfg = twire_config();
  kcr_err rc = kcr_manager_new(&(struct kcr_manager_opts){.config = cfg,
                                                          .name = "t",
                                                          .metrics_addr = metrics,
                                                          .health_addr = health,
                                                          .no_signals = true},
                               m, ei);
  kcr_config_free(cfg); /* the manager's client holds its own reference */
  return rc;
}

static void a_bad_or_busy_server_address_fails_kcr_manager_new(void **state)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  kcr_manager *m1 = NULL, *m2 = NULL;
  char addr[64];
  int port;

  /* Does not parse: said before anything starts, naming the address. */
  assert_int_equal(KCR_ECONFIG, new_manager(":99999", "0", &m2, &ei));
  assert_null(m2);
  assert_non_null(ei.message);
  assert_non_null(strstr(ei.message, ":99999"));
  kcr_errinfo_cleanup(&ei);
  /* In use: bound by another manager. */
  assert_int_equal(KCR_OK, new_manager("0", "127.0.0.1:0", &m1, &ei));
  port = kcr_manager_health_port(m1);
  assert_true(port > 0);
  snprintf(addr, sizeof(addr), "127.0.0.1:%d", port);
  assert_int_equal(KCR_EIO, new_manager(addr, "0", &m2, &ei));
  assert_null(m2);
  assert_non_null(ei.message);
  assert_non_null(strstr(ei.message, addr));
  kcr_errinfo_cleanup(&ei);
  kcr_manager_free(m1);
}

/* Secure metrics: a certificate directory without the files fails
 * kcr_manager_new naming the file; without a directory a self-signed
 * certificate is made; the metrics and health servers are separate even on
 * the same address (port 0: two ports). */
static void secure_metrics_certificate_errors_fail_kcr_manager_new(void **state)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  kcr_config *cfg = twire_config();
  kcr_manager *m = NULL;
  struct kcr_manager_opts o = {.config = cfg,
                               .name = "t",
                               .metrics_addr = "127.0.0.1:0",
                               .health_addr = "127.0.0.1:0",
                               .metrics_secure = true,
                               .metrics_cert_dir = "/nonexistent",
                               .metrics_cert_name = "my.crt",
                               .no_signals = true};

  assert_int_equal(KCR_EIO, kcr_manager_new(&o, &m, &ei));
  assert_null(m);
  assert_non_null(ei.message);
  assert_non_null(strstr(ei.message, "/nonexistent/my.crt"));
  kcr_errinfo_cleanup(&ei);
  o.metrics_cert_dir = NULL;
  assert_int_equal(KCR_OK, kcr_manager_new(&o, &m, &ei));
  assert_true(kcr_manager_health_port(m) > 0);
  kcr_manager_free(m);
  kcr_config_free(cfg);
}

static void caches_that_never_sync_fail_run_after_the_sync_timeout(void **state)
{
  struct api a;
  kcr_manager *m;

  api_init(&a);
  a.list_code = 500;
  m = manager(&a, &(struct mopts){.elect = true, .sync_timeout_ms = 300});
  controller(m, never_reconciled, NULL);
  assert_int_equal(1, kcr_manager_run(m));
  assert_true(api_get(&a, &a.lists) >= 1);
  assert_int_equal(0, api_get(&a, &a.lease_writes)); /* never tried to lead */
  kcr_manager_free(m);
  tcheck_report();
  api_cleanup(&a);
}

/* sync_timeout_ms = KCR_FOREVER waits for the caches as long as it takes
 * (the deadline used to overflow: run gave up at once and returned 1). */
static void a_sync_timeout_of_forever_waits_until_stopped(void **state)
{
  struct api a;
  struct run r;
  kcr_manager *m;

  api_init(&a);
  a.list_code = 500; /* never syncs */
  m = manager(&a, &(struct mopts){.sync_timeout_ms = KCR_FOREVER});
  controller(m, never_reconciled, NULL);
  run_start(&r, m);
  assert_false(tsig_wait(&r.done, 1, 500)); /* still waiting */
  assert_true(api_get(&a, &a.lists) >= 1);
  kcr_manager_stop(m);
  assert_int_equal(0, run_join(&r));
  kcr_manager_free(m);
  tcheck_report();
  api_cleanup(&a);
}

static void informer_and_add_refuse_bad_arguments(void **state)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  struct api a;
  kcr_manager *m;
  kcr_informer *inf = (kcr_informer *)1;

  api_init(&a);
  m = manager(&a, &(struct mopts){0});
  assert_int_equal(KCR_EINVAL, kcr_manager_informer(
                                   m, &(struct kcr_informer_opts){.ns = "x"}, &inf, &ei));
  assert_null(inf);
  assert_non_null(strstr(ei.message, "gvr"));
  /* The informer's own checks come through with their message. */
  assert_int_equal(
      KCR_EINVAL,
      kcr_manager_informer(m, &(struct kcr_informer_opts){.gvr = &cms, .page_size = -1},
                           &inf, &ei));
  assert_non_null(strstr(ei.message, "page_size"));
  assert_int_equal(KCR_EINVAL, kcr_manager_add(m, NULL));
  kcr_errinfo_cleanup(&ei);
  kcr_manager_free(m);
  api_cleanup(&a);
}

/* The registry's rule 1 (manager.h): informers are (resource,
 * namespace); selectors and keep list belong to the resource. The same
 * request shares the informer; another namespace makes another; other
 * options for the resource, or an every-namespace informer beside a
 * namespaced one, are refused naming both. */
static void one_resource_has_one_set_of_cache_options(void **state)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  struct api a;
  kcr_manager *m;
  kcr_informer *proj, *again, *other_ns, *refused = (kcr_informer *)1;
  const char *const keep[] = {"/data", NULL};

  api_init(&a);
  m = manager(&a, &(struct mopts){0});
  assert_int_equal(
      KCR_OK, kcr_manager_informer(
                  m, &(struct kcr_informer_opts){.gvr = &cms, .ns = "a", .keep = keep},
                  &proj, NULL));
  assert_int_equal(
      KCR_OK, kcr_manager_informer(
                  m,
                  &(struct kcr_informer_opts){
                      .gvr = &cms, .ns = "a", .keep = (const char *[]){"/data", NULL}},
                  &again, NULL));
  assert_ptr_equal(proj, again);
  assert_int_equal(
      KCR_OK, kcr_manager_informer(
                  m, &(struct kcr_informer_opts){.gvr = &cms, .ns = "b", .keep = keep},
                  &other_ns, NULL));
  assert_ptr_not_equal(proj, other_ns);
  /* Another keep list (none, or an empty one), another selector: refused. */
  assert_int_equal(KCR_EEXIST, kcr_manager_informer(
                                   m, &(struct kcr_informer_opts){.gvr = &cms, .ns = "a"},
                                   &refused, &ei));
  assert_null(refused);
  assert_non_null(strstr(ei.message, "keep [/data]"));
  assert_non_null(strstr(ei.message, "no keep list"));
  assert_int_equal(
      KCR_EEXIST,
      kcr_manager_informer(
          m, &(struct kcr_informer_opts){.gvr = &cms, .ns = "c", .keep = keep + 1},
          &refused, &ei));
  assert_int_equal(KCR_EEXIST,
                   kcr_manager_informer(
                       m,
                       &(struct kcr_informer_opts){
                           .gvr = &cms, .ns = "c", .keep = keep, .label_selector = "x=y"},
                       &refused, &ei));
  assert_non_null(strstr(ei.message, "x=y"));
  /* keep_managed_fields shapes the cache too */
  assert_int_equal(
      KCR_EEXIST,
      kcr_manager_informer(
          m,
          &(struct kcr_informer_opts){
              .gvr = &cms, .ns = "c", .keep = keep, .keep_managed_fields = true},
          &refused, &ei));
  assert_non_null(strstr(ei.message, "managedFields kept"));
  /* Every namespace beside namespaced ones: refused. */
  assert_int_equal(
      KCR_EEXIST,
      kcr_manager_informer(m, &(struct kcr_informer_opts){.gvr = &cms, .keep = keep},
                           &refused, &ei));
  assert_non_null(strstr(ei.message, "every namespace"));
  /* A metadata-only cache is another cache: beside the full one, with
   * options of its own, and found again as itself. */
  kcr_informer *meta, *meta_again;
  assert_int_equal(KCR_OK,
                   kcr_manager_informer(
                       m, &(struct kcr_informer_opts){.gvr = &cms, .metadata_only = true},
                       &meta, &ei));
  assert_ptr_not_equal(proj, meta);
  assert_int_equal(KCR_OK,
                   kcr_manager_informer(
                       m, &(struct kcr_informer_opts){.gvr = &cms, .metadata_only = true},
                       &meta_again, &ei));
  assert_ptr_equal(meta, meta_again);
  kcr_errinfo_cleanup(&ei);
  kcr_manager_free(m);
  api_cleanup(&a);
}

/* Namespace sets in the registry (rule 1): the same set in any order is one
 * informer; a namespace is in at most one informer of a resource; an
 * informer of a namespace selector is the only one of its resource; a read
 * of a namespace finds the informer whose set holds it. */
static void namespace_sets_are_one_informer_and_never_overlap(void **state)
{
  static const struct kcr_gvr secrets = {"", "v1", "secrets", true};
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  struct api a;
  kcr_manager *m;
  kcr_informer *ab, *ba, *cd, *refused = (kcr_informer *)1;
  kcr_obj *o = (kcr_obj *)1;

  api_init(&a);
  m = manager(&a, &(struct mopts){0});
  assert_int_equal(KCR_OK,
                   kcr_manager_informer(
                       m,
                       &(struct kcr_informer_opts){
                           .gvr = &cms, .namespaces = (const char *[]){"a", "b", NULL}},
                       &ab, &ei));
  assert_int_equal(
      KCR_OK, kcr_manager_informer(
                  m,
                  &(struct kcr_informer_opts){
                      .gvr = &cms, .namespaces = (const char *[]){"b", "a", "b", NULL}},
                  &ba, &ei));
  assert_ptr_equal(ab, ba);
  assert_int_equal(KCR_OK,
                   kcr_manager_informer(
                       m,
                       &(struct kcr_informer_opts){
                           .gvr = &cms, .namespaces = (const char *[]){"c", "d", NULL}},
                       &cd, &ei));
  assert_ptr_not_equal(ab, cd);
  assert_int_equal(KCR_EEXIST,
                   kcr_manager_informer(
                       m,
                       &(struct kcr_informer_opts){
                           .gvr = &cms, .namespaces = (const char *[]){"e", "b", NULL}},
                       &refused, &ei));
  assert_null(refused);
  assert_non_null(strstr(ei.message, "namespace b is in two informers (a,b and b,e)"));
  assert_int_equal(KCR_EEXIST, kcr_manager_informer(
                                   m, &(struct kcr_informer_opts){.gvr = &cms, .ns = "d"},
                                   &refused, &ei));
  assert_non_null(strstr(ei.message, "namespace d is in two informers"));
  assert_int_equal(
      KCR_EEXIST,
      kcr_manager_informer(
          m, &(struct kcr_informer_opts){.gvr = &cms, .namespace_selector = "t=x"},
          &refused, &ei));
  assert_non_null(strstr(ei.message, "the namespaces selected by t=x"));
  /* A selector's informer first: nothing beside it. */
  assert_int_equal(
      KCR_OK,
      kcr_manager_informer(
          m, &(struct kcr_informer_opts){.gvr = &secrets, .namespace_selector = "t=x"},
          &ab, &ei));
  assert_int_equal(
      KCR_EEXIST,
      kcr_manager_informer(m, &(struct kcr_informer_opts){.gvr = &secrets, .ns = "a"},
                           &refused, &ei));
  assert_non_null(strstr(ei.message, "of the namespaces selected by t=x is registered"));
  /* Reads: d is cd's (not cached yet: not found), e nobody's (a mistake). */
  assert_int_equal(KCR_ENOTFOUND, kcr_manager_get(m, &cms, "d", "x", &o, &ei));
  assert_int_equal(KCR_EINVAL, kcr_manager_get(m, &cms, "e", "x", &o, &ei));
  assert_non_null(strstr(ei.message, "namespace e"));
  assert_int_equal(KCR_ENOTFOUND, kcr_manager_get(m, &secrets, "any", "x", &o, &ei));
  kcr_errinfo_cleanup(&ei);
  kcr_manager_free(m);
  api_cleanup(&a);
}

/* An uncached resource (kcr_manager_uncached, controller-runtime's
 * DisableFor): each read is a GET or a LIST to the apiserver, never a
 * watch; not found is KCR_ENOTFOUND; it cannot also have an informer, and
 * an index needs one. */
static void uncached_reads_go_to_the_apiserver_each_time(void **state)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  struct kcr_arena ar = KCR_ARENA_INIT;
  struct api a;
  kcr_manager *m;
  kcr_informer *inf = (kcr_informer *)1;
  kcr_obj *o = NULL, **objs = NULL;
  void *items = NULL;
  size_t n = 0;

  api_init(&a);
  m = manager(&a, &(struct mopts){0});
  assert_int_equal(KCR_OK, kcr_manager_uncached(m, &cms, &ei));
  assert_int_equal(KCR_OK, kcr_manager_uncached(m, &cms, &ei)); /* again: nothing */
  for(int i = 1; i <= 2; i++) {
    assert_int_equal(KCR_OK, kcr_manager_get(m, &cms, "default", "a", &o, &ei));
    assert_string_equal("a", kcr_obj_name(o));
    assert_int_equal(i, atoi(kcr_obj_rv(o))); /* a fresh GET each time */
    assert_null(strstr(kcr_obj_json(o, NULL), "managedFields"));
    kcr_obj_unref(o);
  }
  assert_int_equal(KCR_ENOTFOUND, kcr_manager_get(m, &cms, "default", "b", &o, &ei));
  assert_null(o);
  assert_int_equal(3, api_get(&a, &a.gets));
  assert_int_equal(KCR_OK, kcr_manager_list_typed(m, &kcr_meta_v1_object_meta_type, &cms,
                                                  "default", NULL, (struct kcr_str){0}, 0,
                                                  &ar, &items, &n, &objs, &ei));
  assert_int_equal(1, n);
  assert_string_equal("a", kcr_obj_name(objs[0]));
  kcr_objs_unref(objs, n);
  assert_int_equal(1, api_get(&a, &a.lists));
  assert_int_equal(KCR_EINVAL,
                   kcr_manager_list_typed(m, &kcr_meta_v1_object_meta_type, &cms,
                                          "default", "idx", kcr_str_c("v"), 0, &ar,
                                          &items, &n, &objs, &ei));
  assert_non_null(strstr(ei.message, "uncached"));
  assert_int_equal(
      KCR_EEXIST,
      kcr_manager_informer(m, &(struct kcr_informer_opts){.gvr = &cms}, &inf, &ei));
  assert_null(inf);
  assert_non_null(strstr(ei.message, "uncached"));
  /* a metadata-only cache of it is another resource: allowed */
  assert_int_equal(
      KCR_OK,
      kcr_manager_informer(
          m, &(struct kcr_informer_opts){.gvr = &cms, .metadata_only = true}, &inf, &ei));
  assert_int_equal(0, api_get(&a, &a.watches));
  kcr_arena_cleanup(&ar);
  kcr_errinfo_cleanup(&ei);
  kcr_manager_free(m);
  tcheck_report();
  api_cleanup(&a);
}

/* kcr_manager_get reads the cache of the manager's informer of a resource:
 * a new reference, valid after the manager is gone; an object not in the
 * cache is KCR_ENOTFOUND, a resource or namespace without an informer
 * KCR_EINVAL - a setup mistake, told apart from absence. */
static void get_reads_the_informer_of_the_resource(void **state)
{
  static const struct kcr_gvr secrets = {"", "v1", "secrets", true};
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  struct api a;
  struct run r;
  kcr_manager *m;
  kcr_informer *inf;
  kcr_obj *o = (kcr_obj *)1;

  api_init(&a);
  m = manager(&a, &(struct mopts){0});
  assert_int_equal(
      KCR_OK,
      kcr_manager_informer(m, &(struct kcr_informer_opts){.gvr = &cms, .ns = "default"},
                           &inf, NULL));
  assert_int_equal(KCR_ENOTFOUND, kcr_manager_get(m, &cms, "default", "a", &o, &ei));
  assert_null(o); /* not synced yet */
  run_start(&r, m);
  assert_true(kcr_informer_wait_synced(inf, 30000));
  assert_int_equal(KCR_OK, kcr_manager_get(m, &cms, "default", "a", &o, &ei));
  assert_string_equal("a", kcr_obj_name(o));
  kcr_obj *none = (kcr_obj *)1;
  assert_int_equal(KCR_ENOTFOUND, kcr_manager_get(m, &cms, "default", "b", &none, &ei));
  assert_null(none);
  assert_non_null(strstr(ei.message, "not in the cache"));
  assert_int_equal(KCR_EINVAL, kcr_manager_get(m, &secrets, "default", "a", &none, &ei));
  assert_null(none);
  assert_non_null(strstr(ei.message, "no informer of /v1/secrets"));
  assert_int_equal(KCR_EINVAL, kcr_manager_get(m, &cms, "other", "a", &none, &ei));
  assert_non_null(strstr(ei.message, "namespace other"));
  assert_int_equal(KCR_EINVAL, kcr_manager_get(m, &cms, "default", NULL, &none, &ei));
  /* a namespaced resource without a namespace: a mistake, not an absence */
  assert_int_equal(KCR_EINVAL, kcr_manager_get(m, &cms, NULL, "a", &none, &ei));
  assert_non_null(strstr(ei.message, "namespace is required"));
  assert_int_equal(KCR_EINVAL, kcr_manager_get(m, &cms, "", "a", &none, &ei));
  kcr_manager_stop(m);
  assert_int_equal(0, run_join(&r));
  kcr_obj_unref(o);
  assert_int_equal(KCR_OK, kcr_manager_get(m, &cms, "default", "a", &o, &ei));
  kcr_manager_free(m);
  assert_string_equal("a", kcr_obj_name(o)); /* still ours */
  kcr_obj_unref(o);
  kcr_errinfo_cleanup(&ei);
  tcheck_report();
  api_cleanup(&a);
}

/* A thread that cannot be made fails run with 1 and starts nothing after it
 * (issue 8, item 9: the informer's and the controllers' start results were
 * ignored: a manager ran without its controllers, or without a cache). */
static void a_thread_that_cannot_start_fails_run(void **state)
{
  for(int which = 1; which <= 2; which++) { /* 1: the informer, 2: a worker */
    struct api a;
    kcr_manager *m;
    api_init(&a);
    m = manager(&a, &(struct mopts){.elect = false, .sync_timeout_ms = 10000});
    controller(m, never_reconciled, NULL);
    tfail_threads_arm(which);
    assert_int_equal(1, kcr_manager_run(m));
    tfail_threads_arm(0);
    if(which == 1)
      assert_int_equal(0, api_get(&a, &a.lists)); /* no cache was started */
    assert_int_equal(0, kcr_manager_busy(m));
    kcr_manager_free(m);
    tcheck_report();
    api_cleanup(&a);
  }
}

/* ---- the manager's recorders at shutdown (issue 28, item 3) ---- */

struct twice {
  struct api *a;
  kcr_recorder *rec;
  struct tsig done;
};

/* Records the same event twice, the second time once the first was
 * created: a series update, which the recorder holds back for
 * series_flush_ms (far past the test). */
static kcr_err record_twice(kcr_ctx *cx, const struct kcr_request *req,
                            struct kcr_result *res, void *ud)
{
  struct twice *t = ud;
  struct kcr_event_ref ref = {.kind = "ConfigMap", .ns = "default", .name = req->name};
  TCHECK(!kcr_recorder_eventf(t->rec, &ref, KCR_EVENT_NORMAL, "Seen", "Look", "same"));
  while(api_get(t->a, &t->a->event_posts) < 1)
    nanosleep(&(struct timespec){0, 10000000}, NULL);
  TCHECK(!kcr_recorder_eventf(t->rec, &ref, KCR_EVENT_NORMAL, "Seen", "Look", "same"));
  tsig_add(&t->done, 1);
  return KCR_OK;
}

/* Under leader election, run flushes the manager's recorder after the
 * controllers stopped and before it releases the Lease: the series count
 * goes out while the write gate still lets it. Without a flush there, the
 * repeat is refused once the Lease is released and never written. After a
 * lost lease, nothing more is written. */
static void the_manager_flushes_its_recorders_before_releasing_the_lease(void **state)
{
  for(int lose = 0; lose <= 1; lose++) {
    struct api a;
    struct twice t;
    struct run r;
    kcr_manager *m;
    int posts;

    api_init(&a);
    t.a = &a;
    tsig_init(&t.done);
    m = manager(&a, &(struct mopts){.elect = true});
    assert_int_equal(KCR_OK,
                     kcr_manager_recorder(m,
                                          &(struct kcr_recorder_opts){
                                              .reporting_controller = "example.com/t",
                                              .series_flush_ms = 3600000,
                                              .retry_initial_ms = 50,
                                              .shutdown_flush_ms = 2000,
                                          },
                                          &t.rec, NULL));
    controller(m, record_twice, &t);
    run_start(&r, m);
    assert_true(tsig_wait(&t.done, 1, 60000));
    if(lose) {
      pthread_mutex_lock(&a.mu);
      a.mode = PUT_FAIL; /* renewals fail: the lease is lost */
      pthread_mutex_unlock(&a.mu);
      assert_int_equal(1, run_join(&r));
    } else {
      kcr_manager_stop(m);
      assert_int_equal(0, run_join(&r));
    }
    posts = api_get(&a, &a.event_posts);
    assert_int_equal(lose ? 0 : 1, api_get(&a, &a.event_patches));
    assert_int_equal(0, api_get(&a, &a.event_patches_after_release));
    if(!lose)
      assert_int_equal(1, api_get(&a, &a.releases));
    kcr_manager_free(m); /* frees the recorder: no flush after a loss */
    assert_int_equal(posts, api_get(&a, &a.event_posts));
    assert_int_equal(lose ? 0 : 1, api_get(&a, &a.event_patches));
    tcheck_report();
    tsig_cleanup(&t.done);
    api_cleanup(&a);
  }
}

/* ---- objects freed after their manager (issue 28, item 1) ---- */

/* The sink of the recorder below: every write refused, as the write gate
 * of a stopped manager refuses them. */
static kcr_err refuse_all(void *ud, enum kcr_event_op op, const char *ns,
                          const char *name, const char *body, size_t len,
                          struct kcr_errinfo *ei)
{
  atomic_fetch_add((atomic_int *)ud, 1);
  return kcr_errinfo_set(ei, KCR_ECANCELED, "refused");
}

/* A recorder and a status writer made with the manager's metrics registry
 * (and client) and freed after kcr_manager_free: each holds references of
 * its own, so freeing them later touches nothing freed (before: the
 * recorder unhooked its collect callback from the freed registry - a
 * use-after-free ASan reports, an abort on SIGTERM in production). The
 * reverse order is the other test's everyday one. */
static void a_recorder_and_a_status_writer_may_outlive_their_manager(void **state)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  struct api a;
  kcr_manager *m;
  kcr_recorder *rec;
  kcr_status_writer *w;
  atomic_int writes;
  struct kcr_event_ref ref = {.kind = "ConfigMap", .ns = "default", .name = "a"};

  atomic_init(&writes, 0);
  api_init(&a);
  m = manager(&a, &(struct mopts){0});
  assert_int_equal(KCR_OK, kcr_recorder_new(
                               &(struct kcr_recorder_opts){
                                   .sink = refuse_all,
                                   .sink_ud = &writes,
                                   .reporting_controller = "example.com/t",
                                   .metrics = kcr_manager_metrics(m),
                                   .max_attempts = 1,
                               },
                               &rec, &ei));
  assert_int_equal(
      KCR_OK, kcr_status_writer_new(
                  &(struct kcr_status_writer_opts){.client = kcr_manager_client(m),
                                                   .gvr = &cms,
                                                   .field_manager = "t",
                                                   .mode = KCR_STATUS_MERGE_PATCH,
                                                   .metrics = kcr_manager_metrics(m)},
                  &w, &ei));
  assert_int_equal(
      KCR_OK, kcr_recorder_eventf(rec, &ref, KCR_EVENT_NORMAL, "Seen", "Look", "once"));
  assert_int_equal(
      KCR_OK, kcr_recorder_eventf(rec, &ref, KCR_EVENT_NORMAL, "Seen", "Look", "once"));
  kcr_manager_free(m);
  kcr_recorder_free(rec);
  kcr_status_writer_free(w);
  assert_true(atomic_load(&writes) >= 1);
  kcr_errinfo_cleanup(&ei);
  tcheck_report();
  api_cleanup(&a);
}

int main(void)
{
  tfail_init();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(losing_the_lease_returns_at_once_and_fences_a_stuck_reconcile),
      cmocka_unit_test(
          a_reconcile_past_the_grace_period_is_left_running_and_counted_busy),
      cmocka_unit_test(stop_from_another_thread_while_informers_sync_returns_0),
      cmocka_unit_test(a_bad_or_busy_server_address_fails_kcr_manager_new),
      cmocka_unit_test(secure_metrics_certificate_errors_fail_kcr_manager_new),
      cmocka_unit_test(caches_that_never_sync_fail_run_after_the_sync_timeout),
      cmocka_unit_test(a_thread_that_cannot_start_fails_run),
      cmocka_unit_test(a_sync_timeout_of_forever_waits_until_stopped),
      cmocka_unit_test(informer_and_add_refuse_bad_arguments),
      cmocka_unit_test(one_resource_has_one_set_of_cache_options),
      cmocka_unit_test(get_reads_the_informer_of_the_resource),
      cmocka_unit_test(namespace_sets_are_one_informer_and_never_overlap),
      cmocka_unit_test(uncached_reads_go_to_the_apiserver_each_time),
      cmocka_unit_test(a_recorder_and_a_status_writer_may_outlive_their_manager),
      cmocka_unit_test(the_manager_flushes_its_recorders_before_releasing_the_lease),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
