/* The controller at unit level, on the wire seam: the shutdown lifetime (a
 * reconcile still running after stop keeps a valid context until it
 * returns, and free waits for it), the running count, and requeue delays
 * past INT64_MAX (parked, not a hot loop). */
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
#include "tcheck.h"
#include "twait.h"
#include "tfail.h"
#include "twire.h"

static const struct kcr_gvr cms = {"", "v1", "configmaps", true};

/* ---- the API: every GET answers an empty ConfigMap ---- */

static kcr_err api(struct twire_call *call, void *ud)
{
  atomic_int *requests = ud;
  atomic_fetch_add(requests, 1);
  if(twire_is(call, "GET", "/api/v1/namespaces/ns/configmaps"))
    return twire_reply(call, 200, "{\"metadata\":{\"name\":\"a\",\"namespace\":\"ns\"}}");
  return twire_reply(call, 404, "%s", twire_status_json(404, "NotFound"));
}

/* ---- shutdown lifetime ---- */

struct lifetime {
  struct tsig entered;   /* the reconcile started */
  atomic_bool freeing;   /* the freeing thread is about to call free */
  atomic_bool freed;     /* kcr_controller_free returned */
  atomic_bool returned;  /* the reconcile returned */
  bool returned_at_free; /* `returned` as seen when free returned */
  kcr_controller *c;
};

/* Keeps using everything its context gives for a while after another
 * thread entered kcr_controller_free. */
static kcr_err outlive_stop(kcr_ctx *cx, const struct kcr_request *req,
                            struct kcr_result *res, void *ud)
{
  struct lifetime *lt = ud;
  struct kcr_ref one = {&cms, "ns", "a"};
  uint64_t until;

  tsig_add(&lt->entered, 1);
  if(!TCHECK(tflag_wait(&lt->freeing, 30000)))
    goto out;
  /* free was entered (or is about to be): keep going for 300 ms. */
  until = kcr_time_mono_ms() + 300;
  do {
    char *key = kcr_arena_printf(kcr_ctx_arena(cx), "%s/%s", req->ns, req->name);
    TCHECK(key && !strcmp(key, "ns/a"));
    TCHECK(!strcmp(kcr_ctx_controller_name(cx), "outlive"));
    TCHECK(strlen(kcr_ctx_id(cx)) == 16);
    TCHECK(kcr_get(kcr_ctx_client(cx), &one, NULL, NULL) == KCR_OK);
    KCR_CLOG(cx, KCR_LOG_DEBUG, "still reconciling after stop");
    TCHECK(!atomic_load(&lt->freed));
  } while(kcr_time_mono_ms() < until);
out:
  atomic_store(&lt->returned, true);
  return KCR_OK;
}

static void *free_controller(void *p)
{
  struct lifetime *lt = p;
  atomic_store(&lt->freeing, true);
  kcr_controller_free(lt->c);
  lt->returned_at_free = atomic_load(&lt->returned);
  atomic_store(&lt->freed, true);
  return NULL;
}

static void a_reconcile_running_past_stop_keeps_its_context_until_it_returns(void **state)
{
  atomic_int requests = 0;
  kcr_client *cl = twire_client(api, &requests);
  struct lifetime lt = {0};
  pthread_t th;

  tsig_init(&lt.entered);
  atomic_init(&lt.freeing, false);
  atomic_init(&lt.freed, false);
  atomic_init(&lt.returned, false);
  assert_int_equal(
      KCR_OK, kcr_controller_new(&(struct kcr_controller_opts){.name = "outlive",
                                                               .reconcile = outlive_stop,
                                                               .ud = &lt,
                                                               .client = cl},
                                 &lt.c, NULL));
  /* The controller holds its own client reference. */
  kcr_client_free(cl);
  assert_int_equal(KCR_OK, kcr_controller_start(lt.c));
  assert_int_equal(KCR_OK, kcr_controller_enqueue(lt.c, "ns", "a"));
  assert_true(tsig_wait(&lt.entered, 1, 30000));

  /* The grace period runs out: one reconcile still running. */
  assert_int_equal(1, kcr_controller_stop(lt.c, 50));
  assert_int_equal(1, kcr_controller_busy(lt.c));
  assert_int_equal(1, kcr_controller_stop(lt.c, 0)); /* idempotent */

  /* Another thread frees the controller under the running reconcile: free
   * returns only after the reconcile did, and nothing it used was freed
   * before (ASan watches). */
  assert_int_equal(0, pthread_create(&th, NULL, free_controller, &lt));
  pthread_join(th, NULL);
  /* (Had free not waited, the reconcile would now run on into freed
   * memory: give ASan the time to see it before judging.) */
  tflag_wait(&lt.returned, 5000);
  assert_true(atomic_load(&lt.freed));
  assert_true(lt.returned_at_free);
  assert_true(atomic_load(&requests) > 0);
  tcheck_report();
  tsig_cleanup(&lt.entered);
}

/* ---- the running count from other threads ---- */

struct busy {
  struct tsig entered, release;
  kcr_controller *c;
  atomic_bool quit; /* relaxed: tells the poller to stop without ordering */
};

static kcr_err block(kcr_ctx *cx, const struct kcr_request *req, struct kcr_result *res,
                     void *ud)
{
  struct busy *b = ud;
  tsig_add(&b->entered, 1);
  TCHECK(tsig_wait(&b->release, 1, 30000));
  return KCR_OK;
}

static void *poll_busy(void *p)
{
  struct busy *b = p;
  for(;;) {
    bool last = atomic_load_explicit(&b->quit, memory_order_relaxed);
    int n = kcr_controller_busy(b->c);
    TCHECK(n == 0 || n == 1);
    if(last)
      break;
  }
  return NULL;
}

/* kcr_controller_busy is documented "any thread": reading it while the
 * controller's own thread reaps the workers must be race-free (TSan). */
static void busy_can_be_read_from_any_thread_while_stop_reaps(void **state)
{
  atomic_int requests = 0;
  kcr_client *cl = twire_client(api, &requests);
  struct busy b = {0};
  pthread_t th;

  tsig_init(&b.entered);
  tsig_init(&b.release);
  atomic_init(&b.quit, false);
  assert_int_equal(KCR_OK,
                   kcr_controller_new(
                       &(struct kcr_controller_opts){
                           .name = "busy", .reconcile = block, .ud = &b, .client = cl},
                       &b.c, NULL));
  assert_int_equal(KCR_OK, kcr_controller_start(b.c));
  assert_int_equal(KCR_OK, kcr_controller_enqueue(b.c, "ns", "a"));
  assert_true(tsig_wait(&b.entered, 1, 30000));
  assert_int_equal(1, kcr_controller_stop(b.c, 0));

  assert_int_equal(0, pthread_create(&th, NULL, poll_busy, &b));
  tsig_add(&b.release, 1);
  assert_int_equal(0, kcr_controller_stop(b.c, KCR_FOREVER)); /* joins the worker */
  /* The poller reads once more after the reap, with nothing ordering the
   * two but the controller's own synchronisation. */
  atomic_store_explicit(&b.quit, true, memory_order_relaxed);
  pthread_join(th, NULL);
  assert_int_equal(0, kcr_controller_busy(b.c));
  kcr_controller_free(b.c);
  kcr_client_free(cl);
  tcheck_report();
  tsig_cleanup(&b.entered);
  tsig_cleanup(&b.release);
}

/* ---- requeue delays ---- */

struct requeue {
  struct tsig calls;
  uint64_t after;
};

static kcr_err requeue_after(kcr_ctx *cx, const struct kcr_request *req,
                             struct kcr_result *res, void *ud)
{
  struct requeue *r = ud;
  res->requeue_after_ms = r->after;
  tsig_add(&r->calls, 1);
  return KCR_OK;
}

/* Reconciles ns/a once with a requeue of `after`; the number of calls seen
 * within wait_ms (stopping early at `enough`). */
static int calls_with_requeue(uint64_t after, int enough, uint64_t wait_ms)
{
  atomic_int requests = 0;
  kcr_client *cl = twire_client(api, &requests);
  struct requeue r = {.after = after};
  kcr_controller *c;
  int n;

  tsig_init(&r.calls);
  assert_int_equal(
      KCR_OK, kcr_controller_new(&(struct kcr_controller_opts){.name = "requeue",
                                                               .reconcile = requeue_after,
                                                               .ud = &r,
                                                               .client = cl},
                                 &c, NULL));
  assert_int_equal(KCR_OK, kcr_controller_start(c));
  assert_int_equal(KCR_OK, kcr_controller_enqueue(c, "ns", "a"));
  assert_true(tsig_wait(&r.calls, 1, 30000));
  tsig_wait(&r.calls, enough, wait_ms);
  n = tsig_get(&r.calls);
  kcr_controller_free(c);
  kcr_client_free(cl);
  tsig_cleanup(&r.calls);
  return n;
}

static void a_requeue_delay_past_int64_max_is_never_a_hot_loop(void **state)
{
  /* KCR_FOREVER and every delay from INT64_MAX up are "not by itself": the
   * key is parked, not requeued at once (it used to be cast negative). */
  assert_int_equal(1, calls_with_requeue(UINT64_MAX, 2, 300));
  assert_int_equal(1, calls_with_requeue((uint64_t)INT64_MAX + 1, 2, 300));
  assert_int_equal(1, calls_with_requeue(UINT64_MAX - 1000, 2, 300));
  assert_int_equal(1, calls_with_requeue((uint64_t)INT64_MAX, 2, 300));
}

static void a_small_requeue_delay_reconciles_again(void **state)
{
  assert_true(calls_with_requeue(5, 3, 30000) >= 3);
}

/* ---- start is all or nothing (issue 8, item 9) ---- */

static atomic_int start_calls;

static kcr_err count_calls(kcr_ctx *cx, const struct kcr_request *req,
                           struct kcr_result *res, void *ud)
{
  atomic_fetch_add(&start_calls, 1);
  return KCR_OK;
}

/* The third of four worker threads cannot be made: start fails and leaves
 * no worker behind (before, the started ones were detached and kept going
 * after a failed start reported nothing about them). */
static void a_worker_thread_that_cannot_start_fails_start_and_leaves_none(void **state)
{
  atomic_int requests = 0;
  kcr_client *cl = twire_client(api, &requests);
  kcr_controller *c;

  atomic_store(&start_calls, 0);
  assert_int_equal(
      KCR_OK, kcr_controller_new(&(struct kcr_controller_opts){.name = "starts",
                                                               .workers = 4,
                                                               .reconcile = count_calls,
                                                               .client = cl},
                                 &c, NULL));
  tfail_threads_arm(3);
  assert_int_equal(KCR_ENOMEM, kcr_controller_start(c));
  tfail_threads_arm(0);
  assert_int_equal(0, kcr_controller_busy(c));
  /* Stopped for good: keys are refused, start again is refused. */
  assert_int_equal(KCR_ECANCELED, kcr_controller_enqueue(c, "ns", "a"));
  assert_int_equal(KCR_EINVAL, kcr_controller_start(c));
  assert_int_equal(0, atomic_load(&start_calls));
  kcr_controller_free(c);
  kcr_client_free(cl);
}

/* ---- options and predicates (issue 9) ---- */

static kcr_err no_op(kcr_ctx *cx, const struct kcr_request *req, struct kcr_result *res,
                     void *ud)
{
  return KCR_OK;
}

static void new_refuses_invalid_options_naming_them(void **state)
{
  atomic_int requests = 0;
  kcr_client *cl = twire_client(api, &requests);
  const struct {
    struct kcr_controller_opts o;
    const char *field;
  } bad[] = {
      {{.reconcile = no_op, .client = cl}, "name"},
      {{.name = "c", .client = cl}, "reconcile"},
      {{.name = "c", .reconcile = no_op}, "client"},
      {{.name = "c", .reconcile = no_op, .client = cl, .workers = -1}, "workers"},
      {{.name = "c",
        .reconcile = no_op,
        .client = cl,
        .base_delay_ms = 10,
        .max_delay_ms = 1},
       "max_delay_ms"}, /* from the queue */
  };
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  kcr_controller *c;

  for(size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    c = (kcr_controller *)1;
    assert_int_equal(KCR_EINVAL, kcr_controller_new(&bad[i].o, &c, &ei));
    assert_null(c);
    if(!strstr(ei.message, bad[i].field))
      fail_msg("case %zu: \"%s\" does not name %s", i, ei.message, bad[i].field);
  }
  kcr_errinfo_cleanup(&ei);
  kcr_client_free(cl);
}

/* The informer side of the predicate test: a LIST of a and b (generation
 * 1); once the test says go, a watch with a metadata-only change of a, a
 * spec change of b (generation 2) and a new object c. */
struct preds {
  atomic_bool go;
  pthread_mutex_t mu;
  int calls[26]; /* reconciles per key "ns/a".."ns/z" */
  struct tsig total;
};

#define CMG(name, rv, gen, label)                                                        \
  "{\"metadata\":{\"name\":\"" name "\",\"namespace\":\"ns\",\"resourceVersion\":\"" rv  \
  "\",\"generation\":" gen ",\"labels\":{\"l\":\"" label "\"}}}"

static kcr_err api_preds(struct twire_call *call, void *ud)
{
  struct preds *p = ud;
  if(call->req->watch) {
    twire_stream(call, 200);
    if(TCHECK(tflag_wait(&p->go, 30000)) &&
       twire_send(call, "{\"type\":\"MODIFIED\",\"object\":%s}",
                  CMG("a", "3", "1", "y")) &&
       twire_send(call, "{\"type\":\"MODIFIED\",\"object\":%s}",
                  CMG("b", "4", "2", "x")) &&
       twire_send(call, "{\"type\":\"ADDED\",\"object\":%s}", CMG("c", "5", "1", "x")))
      twire_wait_cancel(call, 60000);
    return KCR_OK;
  }
  if(twire_is(call, "GET", "/api/v1/namespaces/ns/configmaps"))
    return twire_reply(call, 200,
                       "{\"metadata\":{\"resourceVersion\":\"2\"},\"items\":[%s,%s]}",
                       CMG("a", "1", "1", "x"), CMG("b", "2", "1", "x"));
  return twire_reply(call, 404, "%s", twire_status_json(404, "NotFound"));
}

static int calls_of(struct preds *p, char k)
{
  pthread_mutex_lock(&p->mu);
  int n = p->calls[k - 'a'];
  pthread_mutex_unlock(&p->mu);
  return n;
}

static kcr_err count_per_key(kcr_ctx *cx, const struct kcr_request *req,
                             struct kcr_result *res, void *ud)
{
  struct preds *p = ud;
  if(TCHECK(strlen(req->name) == 1 && req->name[0] >= 'a' && req->name[0] <= 'z')) {
    pthread_mutex_lock(&p->mu);
    p->calls[req->name[0] - 'a']++;
    pthread_mutex_unlock(&p->mu);
  }
  tsig_add(&p->total, 1);
  return KCR_OK;
}

static void for_predicates_filter_events(void **state)
{
  struct preds p = {.mu = PTHREAD_MUTEX_INITIALIZER};
  kcr_client *cl = twire_client(api_preds, &p);
  kcr_informer *inf;
  kcr_controller *c;

  atomic_init(&p.go, false);
  tsig_init(&p.total);
  assert_int_equal(
      KCR_OK,
      kcr_informer_new(&(struct kcr_informer_opts){.client = cl, .gvr = &cms, .ns = "ns"},
                       &inf, NULL));
  assert_int_equal(
      KCR_OK, kcr_controller_new(&(struct kcr_controller_opts){.name = "preds",
                                                               .reconcile = count_per_key,
                                                               .ud = &p,
                                                               .client = cl},
                                 &c, NULL));
  /* More than four predicates, or a count without an array: refused. */
  assert_int_equal(KCR_EINVAL,
                   kcr_controller_for(c, inf, &(struct kcr_for_opts){.npreds = 1}));
  assert_int_equal(
      KCR_EINVAL,
      kcr_controller_for(
          c, inf,
          &(struct kcr_for_opts){.preds = &kcr_pred_generation_changed, .npreds = 5}));
  assert_int_equal(KCR_OK, kcr_controller_for(
                               c, inf,
                               &(struct kcr_for_opts){
                                   .preds = &kcr_pred_generation_changed, .npreds = 1}));
  assert_int_equal(KCR_OK, kcr_controller_start(c));
  assert_int_equal(KCR_OK, kcr_informer_start(inf));
  assert_true(tsig_wait(&p.total, 2, 30000)); /* a and b from the list */
  atomic_store(&p.go, true);
  assert_true(tsig_wait(&p.total, 4, 30000)); /* b's spec change and c */
  /* Everything queued before z has been reconciled once z has. */
  assert_int_equal(KCR_OK, kcr_controller_enqueue(c, "ns", "z"));
  assert_true(tsig_wait(&p.total, 5, 30000));
  while(calls_of(&p, 'z') == 0)
    assert_true(tsig_wait(&p.total, tsig_get(&p.total) + 1, 30000));
  assert_int_equal(1, calls_of(&p, 'a')); /* metadata only: filtered */
  assert_int_equal(2, calls_of(&p, 'b'));
  assert_int_equal(1, calls_of(&p, 'c'));
  kcr_informer_stop(inf);
  kcr_controller_free(c);
  kcr_informer_free(inf);
  kcr_client_free(cl);
  tsig_cleanup(&p.total);
  tcheck_report();
}

int main(void)
{
  tfail_init();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(a_reconcile_running_past_stop_keeps_its_context_until_it_returns),
      cmocka_unit_test(busy_can_be_read_from_any_thread_while_stop_reaps),
      cmocka_unit_test(a_requeue_delay_past_int64_max_is_never_a_hot_loop),
      cmocka_unit_test(a_small_requeue_delay_reconciles_again),
      cmocka_unit_test(a_worker_thread_that_cannot_start_fails_start_and_leaves_none),
      cmocka_unit_test(new_refuses_invalid_options_naming_them),
      cmocka_unit_test(for_predicates_filter_events),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
