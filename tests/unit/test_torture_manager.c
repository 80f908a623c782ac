/* Allocation-failure torture of the manager.
 *  - Its set-up (single thread): kcr_manager_new (client, metrics registry,
 *    elector, both servers bound), kcr_manager_informer, a controller handed
 *    over with kcr_manager_add, and kcr_manager_free, with every allocation
 *    failing in turn. Each call returns KCR_ENOMEM with *out NULL (the
 *    caller keeps a controller the manager did not take), or succeeds.
 *  - Its run (threads: a sample of n) against a scripted API (twire.h),
 *    without and with leader election (tlease.h): the lease is taken,
 *    informers list and watch, the controller reconciles, a stop from
 *    another thread ends it (and releases the lease). run returns 0 (stopped) or 1 (a
 * start step failed); with no allocation failed it must have reconciled. Nothing leaks or
 * crashes. */
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kcr.h"
#include "tfail.h"
#include "tlease.h"
#include "twait.h"
#include "twire.h"

static const struct kcr_gvr cms = {"", "v1", "configmaps", true};

static kcr_err reconcile(kcr_ctx *cx, const struct kcr_request *req,
                         struct kcr_result *res, void *ud)
{
  return KCR_OK;
}

static bool manager_setup(void *ud)
{
  kcr_config *cfg = ud;
  kcr_manager *m = (kcr_manager *)1;
  kcr_informer *inf = (kcr_informer *)1, *again = NULL;
  kcr_controller *c = NULL;
  kcr_err rc;
  bool ok;

  rc = kcr_manager_new(
      &(struct kcr_manager_opts){
          .config = cfg,
          .name = "t",
          .metrics_addr = "127.0.0.1:0",
          .health_addr = "127.0.0.1:0",
          .leader_elect = true,
          .lease_namespace = "default",
          .lease_name = "lock",
          .identity = "me",
          .no_signals = true,
      },
      &m, NULL);
  if(rc)
    return rc == KCR_ENOMEM && !m;
  ok = kcr_manager_health_port(m) > 0;
  rc = kcr_manager_informer(m, &(struct kcr_informer_opts){.gvr = &cms, .ns = "ns"}, &inf,
                            NULL);
  if(rc) {
    ok = ok && rc == KCR_ENOMEM && !inf;
    goto out;
  }
  /* The same options give the same informer (the lookup builds its key:
   * it may fail too, then with nothing in *out). */
  rc = kcr_manager_informer(m, &(struct kcr_informer_opts){.gvr = &cms, .ns = "ns"},
                            &again, NULL);
  ok = ok && (rc ? rc == KCR_ENOMEM && !again : again == inf);
  rc = kcr_controller_new(&(struct kcr_controller_opts){.name = "ctl",
                                                        .reconcile = reconcile,
                                                        .client = kcr_manager_client(m)},
                          &c, NULL);
  if(rc) {
    ok = ok && rc == KCR_ENOMEM && !c;
    goto out;
  }
  rc = kcr_controller_for(c, inf, NULL);
  if(!rc)
    rc = kcr_manager_add(m, c);
  if(rc) {
    ok = ok && rc == KCR_ENOMEM;
    kcr_controller_free(c); /* not taken: still ours */
  }
out:
  kcr_manager_free(m);
  return ok;
}

static void manager_setup_fails_cleanly(void **state)
{
  kcr_config *cfg = twire_config();
  bool ok = tfail_torture_warm("kcr_manager_new + informer + add + free", manager_setup,
                               cfg, 0);
  kcr_config_free(cfg);
  assert_true(ok);
}

/* ---- run ---------------------------------------------------------------- */

/* The scripted API: ConfigMaps in "ns" (a list of one, a watch without
 * events until cancelled) and, for election, the Lease (tlease.h). */
struct api {
  pthread_mutex_t mu;
  struct tlease l;
};

static kcr_err api(struct twire_call *call, void *ud)
{
  struct api *a = ud;
  enum tlease_done done;
  kcr_err rc;

  pthread_mutex_lock(&a->mu);
  rc = tlease_serve(&a->l, call, &done);
  pthread_mutex_unlock(&a->mu);
  if(done != TLEASE_OTHER)
    return rc;
  if(!twire_is(call, "GET", "/api/v1/namespaces/ns/configmaps"))
    return twire_reply(call, 404, "%s", twire_status_json(404, "NotFound"));
  if(!call->req->watch)
    return twire_reply(call, 200,
                       "{\"kind\":\"ConfigMapList\",\"metadata\":{\"resourceVersion\":"
                       "\"10\"},\"items\":[{\"metadata\":{\"namespace\":\"ns\",\"name\":"
                       "\"a\",\"resourceVersion\":\"5\"}}]}");
  twire_stream(call, 200);
  twire_wait_cancel(call, 30000);
  return KCR_OK;
}

static kcr_err count_reconcile(kcr_ctx *cx, const struct kcr_request *req,
                               struct kcr_result *res, void *ud)
{
  tsig_add(ud, 1);
  return KCR_OK;
}

struct run {
  kcr_manager *m;
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

struct life {
  kcr_config *cfg;
  bool elect;
  struct api api;
};

static bool manager_life(void *ud)
{
  struct life *lf = ud;
  struct run r = {NULL, -1};
  struct tsig reconciled;
  kcr_informer *inf;
  kcr_controller *c;
  pthread_t th;
  bool ok, did;

  /* Set-up is tortured on its own (manager_setup_fails_cleanly). */
  tfail_exempt(true);
  tsig_init(&reconciled);
  tsig_init(&r.done);
  assert_int_equal(KCR_OK, kcr_manager_new(
                               &(struct kcr_manager_opts){
                                   .config = lf->cfg,
                                   .name = "t",
                                   .metrics_addr = "127.0.0.1:0",
                                   .health_addr = "127.0.0.1:0",
                                   .leader_elect = lf->elect,
                                   .lease_namespace = "default",
                                   .lease_name = "lock",
                                   .identity = "me",
                                   .sync_timeout_ms = 5000,
                                   .no_signals = true,
                               },
                               &r.m, NULL));
  twire_attach(kcr_manager_client(r.m), api, &lf->api);
  assert_int_equal(
      KCR_OK, kcr_manager_informer(
                  r.m, &(struct kcr_informer_opts){.gvr = &cms, .ns = "ns"}, &inf, NULL));
  assert_int_equal(
      KCR_OK,
      kcr_controller_new(&(struct kcr_controller_opts){.name = "ctl",
                                                       .reconcile = count_reconcile,
                                                       .ud = &reconciled,
                                                       .client = kcr_manager_client(r.m)},
                         &c, NULL));
  assert_int_equal(KCR_OK, kcr_controller_for(c, inf, NULL));
  assert_int_equal(KCR_OK, kcr_manager_add(r.m, c));
  assert_int_equal(0, pthread_create(&th, NULL, run_main, &r));
  tfail_exempt(false);

  did = tsig_wait(&reconciled, 1, 300);
  if(!did && !tfail_fired()) /* nothing failed: it must reconcile */
    did = tsig_wait(&reconciled, 1, 10000);
  kcr_manager_stop(r.m);
  ok = tsig_wait(&r.done, 1, 30000);
  pthread_join(th, NULL);
  ok =
      ok && (r.status == 0 || (r.status == 1 && tfail_fired())) && (did || tfail_fired());
  kcr_manager_free(r.m);
  tsig_cleanup(&r.done);
  tsig_cleanup(&reconciled);
  return ok;
}

static void life_torture(const char *name, bool elect)
{
  struct life lf = {twire_config(), elect};
  bool ok;

  pthread_mutex_init(&lf.api.mu, NULL);
  ok = tfail_torture_warm(name, manager_life, &lf, 30);
  kcr_config_free(lf.cfg);
  tlease_cleanup(&lf.api.l);
  pthread_mutex_destroy(&lf.api.mu);
  assert_true(ok);
}

static void manager_runs_or_fails_cleanly(void **state)
{
  life_torture("kcr_manager_run (informer, controller, stop, free)", false);
}

static void manager_leads_runs_or_fails_cleanly(void **state)
{
  life_torture("kcr_manager_run with election (lease, informer, controller, release)",
               true);
}

int main(void)
{
  tfail_init();
  kcr_log_set_fd(open("/dev/null", O_WRONLY));
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(manager_setup_fails_cleanly),
      cmocka_unit_test(manager_runs_or_fails_cleanly),
      cmocka_unit_test(manager_leads_runs_or_fails_cleanly),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
