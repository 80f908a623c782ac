/* The controller at unit level, on the wire seam: the shutdown lifetime (a
 * reconcile still running after stop keeps a valid context until it
 * returns, and free waits for it), the running count, requeue delays
 * past INT64_MAX (parked, not a hot loop), predicates, and the priorities
 * of event sources. */
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

/* ---- the reconcile's error info (kcr_ctx_ei) ---- */

struct ctx_ei {
  struct tsig calls;
  atomic_int n;
};

/* First call: a GET that fails fills the context's error info, and the
 * error is returned; second: the info is empty again. */
static kcr_err fail_once(kcr_ctx *cx, const struct kcr_request *req,
                         struct kcr_result *res, void *ud)
{
  struct ctx_ei *t = ud;
  struct kcr_errinfo *ei = kcr_ctx_ei(cx);
  static const struct kcr_gvr secrets = {"", "v1", "secrets", true};
  struct kcr_ref gone = {&secrets, "ns", "gone"}; /* the API answers 404 */
  int n = atomic_fetch_add(&t->n, 1);
  kcr_err rc = KCR_OK;

  TCHECK(ei && !ei->message && !ei->code); /* empty at the start, every time */
  if(n == 0) {
    rc = kcr_get(kcr_ctx_client(cx), &gone, NULL, ei);
    TCHECK(rc == KCR_ENOTFOUND && ei->message);
  }
  tsig_add(&t->calls, 1);
  return rc;
}

/* A reconcile passes kcr_ctx_ei to its calls and never frees it: the
 * controller logs a returned error with that info's message and empties it
 * before the next reconcile (LeakSanitizer: nothing left). */
static void a_returned_error_is_logged_with_the_context_s_message(void **state)
{
  atomic_int requests = 0;
  kcr_client *cl = twire_client(api, &requests);
  struct ctx_ei t = {0};
  enum kcr_log_level lvl = kcr_log_get_level();
  FILE *f = tmpfile();
  char log[8192];
  kcr_controller *c;
  size_t n;

  assert_non_null(f);
  tsig_init(&t.calls);
  assert_int_equal(
      KCR_OK, kcr_controller_new(
                  &(struct kcr_controller_opts){
                      .name = "ctx-ei", .reconcile = fail_once, .ud = &t, .client = cl},
                  &c, NULL));
  kcr_client_free(cl);
  kcr_log_set_fd(fileno(f));
  kcr_log_set_level(KCR_LOG_INFO);
  assert_int_equal(KCR_OK, kcr_controller_start(c));
  assert_int_equal(KCR_OK, kcr_controller_enqueue(c, "ns", "a"));
  assert_true(tsig_wait(&t.calls, 2, 30000)); /* the retry after the error */
  kcr_controller_free(c);
  kcr_log_set_level(lvl);
  kcr_log_set_fd(2);
  rewind(f);
  n = fread(log, 1, sizeof(log) - 1, f);
  log[n] = '\0';
  fclose(f);
  assert_non_null(strstr(log, "reconciler error; requeued with backoff"));
  assert_non_null(strstr(log, "twire says NotFound"));
  tcheck_report();
  tsig_cleanup(&t.calls);
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

/* The rig of the tests below: p ready, a client on fn, an informer of
 * ConfigMaps in ns and a controller `name` counting reconciles into p. */
static void preds_rig(struct preds *p, twire_fn fn, const char *name, kcr_client **cl,
                      kcr_informer **inf, kcr_controller **c)
{
  atomic_init(&p->go, false);
  tsig_init(&p->total);
  *cl = twire_client(fn, p);
  assert_int_equal(
      KCR_OK, kcr_informer_new(
                  &(struct kcr_informer_opts){.client = *cl, .gvr = &cms, .ns = "ns"},
                  inf, NULL));
  assert_int_equal(
      KCR_OK, kcr_controller_new(
                  &(struct kcr_controller_opts){
                      .name = name, .reconcile = count_per_key, .ud = p, .client = *cl},
                  c, NULL));
}

static void for_predicates_filter_events(void **state)
{
  struct preds p = {.mu = PTHREAD_MUTEX_INITIALIZER};
  kcr_client *cl;
  kcr_informer *inf;
  kcr_controller *c;

  preds_rig(&p, api_preds, "preds", &cl, &inf, &c);
  /* More than four predicates, or a count without an array: refused. */
  assert_int_equal(KCR_EINVAL,
                   kcr_controller_for(c, inf, &(struct kcr_source_opts){.npreds = 1}));
  assert_int_equal(
      KCR_EINVAL,
      kcr_controller_for(
          c, inf,
          &(struct kcr_source_opts){.preds = &kcr_pred_generation_changed, .npreds = 5}));
  assert_int_equal(KCR_OK, kcr_controller_for(
                               c, inf,
                               &(struct kcr_source_opts){
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

/* ---- map functions see both objects of an update (issue 28, item 2) ---- */

/* A LIST of ConfigMap a labelled owner=x; once the test says go, a watch
 * event that relabels it owner=y, then its deletion. */
static kcr_err api_relabel(struct twire_call *call, void *ud)
{
  struct preds *p = ud;
  if(call->req->watch) {
    twire_stream(call, 200);
    if(TCHECK(tflag_wait(&p->go, 30000)) &&
       twire_send(call, "{\"type\":\"MODIFIED\",\"object\":%s}",
                  CMG("a", "3", "1", "y")) &&
       twire_send(call, "{\"type\":\"DELETED\",\"object\":%s}", CMG("a", "4", "1", "y")))
      twire_wait_cancel(call, 60000);
    return KCR_OK;
  }
  if(twire_is(call, "GET", "/api/v1/namespaces/ns/configmaps"))
    return twire_reply(call, 200,
                       "{\"metadata\":{\"resourceVersion\":\"2\"},\"items\":[%s]}",
                       CMG("a", "1", "1", "x"));
  return twire_reply(call, 404, "%s", twire_status_json(404, "NotFound"));
}

/* Maps a ConfigMap to the key named by its label l (one letter). */
static void map_by_label(kcr_obj *o, kcr_map_emit emit, void *ctx, void *ud)
{
  static const char *const path[] = {"/metadata/labels/l"};
  struct kcr_span sp;
  char name[2];
  if(kcr_obj_spans(o, path, &sp, 1) == 1 && sp.n == 3) { /* "x" */
    name[0] = sp.at[1];
    name[1] = '\0';
    emit("ns", name, ctx);
  }
}

/* A child relabelled from owner x to owner y wakes both: the map sees the
 * old object of an update as well as the new one (controller-runtime's
 * EnqueueRequestsFromMapFunc maps ObjectOld and ObjectNew). Before, only y
 * was reconciled and x could not restore its child. */
static void a_map_function_sees_the_old_object_of_an_update_too(void **state)
{
  struct preds p = {.mu = PTHREAD_MUTEX_INITIALIZER};
  kcr_client *cl;
  kcr_informer *inf;
  kcr_controller *c;

  preds_rig(&p, api_relabel, "relabel", &cl, &inf, &c);
  assert_int_equal(KCR_OK, kcr_controller_watches(c, inf, map_by_label, NULL, NULL));
  assert_int_equal(KCR_OK, kcr_controller_start(c));
  assert_int_equal(KCR_OK, kcr_informer_start(inf));
  assert_true(tsig_wait(&p.total, 1, 30000)); /* x, from the list */
  assert_int_equal(1, calls_of(&p, 'x'));
  atomic_store(&p.go, true);
  /* The update: x (old) and y (new); the delete: y (the last known). */
  assert_true(tsig_wait(&p.total, 3, 30000));
  assert_int_equal(KCR_OK, kcr_controller_enqueue(c, "ns", "z"));
  while(calls_of(&p, 'z') == 0)
    assert_true(tsig_wait(&p.total, tsig_get(&p.total) + 1, 30000));
  assert_int_equal(2, calls_of(&p, 'x'));
  assert_true(calls_of(&p, 'y') >= 1); /* update and delete may fold into one */
  kcr_informer_stop(inf);
  kcr_controller_free(c);
  kcr_informer_free(inf);
  kcr_client_free(cl);
  tsig_cleanup(&p.total);
  tcheck_report();
}

/* ---- priorities of event sources (issue 11) ---- */

/* The API of the priority tests: ConfigMaps (the primaries) and Secrets
 * (children, owned by ConfigMaps) in namespace ns. Each LIST answers its
 * items; each WATCH sends its scripted events, each once the test's step
 * counter reached the event's step. */
struct pev {
  int step;
  const char *json; /* a watch event line */
};

struct prio_api {
  struct tsig step;
  uint64_t base_delay_ms;              /* the controller's (0: its default) */
  const char *cm_items, *secret_items; /* the LISTs' items, "" for none */
  const struct pev *cm_events, *secret_events;
};

#define PCM(name, rv)                                                                    \
  "{\"metadata\":{\"name\":\"" name "\",\"namespace\":\"ns\",\"resourceVersion\":\"" rv  \
  "\"}}"
/* A Secret controlled by ConfigMap owner. */
#define PSEC(name, rv, owner)                                                            \
  "{\"metadata\":{\"name\":\"" name "\",\"namespace\":\"ns\",\"resourceVersion\":\"" rv  \
  "\",\"ownerReferences\":[{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"name\":"      \
  "\"" owner "\",\"uid\":\"uid-" owner "\",\"controller\":true}]}}"

static kcr_err prio_watch(struct twire_call *call, struct prio_api *p,
                          const struct pev *ev)
{
  twire_stream(call, 200);
  for(; ev && ev->json; ev++)
    if(!TCHECK(tsig_wait(&p->step, ev->step, 30000)) || !twire_send(call, "%s", ev->json))
      return KCR_OK;
  twire_wait_cancel(call, 60000);
  return KCR_OK;
}

static kcr_err api_prio(struct twire_call *call, void *ud)
{
  struct prio_api *p = ud;
  bool cm = twire_is(call, "GET", "/api/v1/namespaces/ns/configmaps");
  bool sec = twire_is(call, "GET", "/api/v1/namespaces/ns/secrets");
  if(!cm && !sec)
    return twire_reply(call, 404, "%s", twire_status_json(404, "NotFound"));
  if(call->req->watch)
    return prio_watch(call, p, cm ? p->cm_events : p->secret_events);
  return twire_reply(call, 200,
                     "{\"metadata\":{\"resourceVersion\":\"10\"},\"items\":[%s]}",
                     cm ? p->cm_items : p->secret_items);
}

/* Waits (polling, at most 30 s) until q holds n ready keys. */
static bool queue_len_reaches(kcr_queue *q, size_t n)
{
  for(int i = 0; i < 30000; i++) {
    if(kcr_queue_len(q) == n)
      return true;
    nanosleep(&(struct timespec){0, 1000000}, NULL);
  }
  return false;
}

/* The reconciler: records the order of the keys; the first reconcile
 * waits for the test's release, so that the others pile up in the queue.
 * fail_once fails its first reconcile (a retry); slow waits until the
 * queue holds 3 ready keys (kcr_queue_len promotes the due ones). */
struct order {
  pthread_mutex_t mu;
  char seen[32][16];
  int n;
  struct tsig entered, release, calls;
  const char *fail_once, *slow;
  bool failed;
  kcr_queue *q;
};

static kcr_err record_order(kcr_ctx *cx, const struct kcr_request *req,
                            struct kcr_result *res, void *ud)
{
  struct order *o = ud;
  kcr_err rc = KCR_OK;
  pthread_mutex_lock(&o->mu);
  if(o->n < 32)
    snprintf(o->seen[o->n++], sizeof(o->seen[0]), "%s", req->name);
  if(o->fail_once && !strcmp(req->name, o->fail_once) && !o->failed) {
    o->failed = true;
    rc = KCR_ETRANSPORT;
  }
  pthread_mutex_unlock(&o->mu);
  tsig_add(&o->entered, 1);
  TCHECK(tsig_wait(&o->release, 1, 30000));
  if(o->slow && !strcmp(req->name, o->slow))
    TCHECK(queue_len_reaches(o->q, 3));
  tsig_add(&o->calls, 1);
  return rc;
}

/* Runs a controller (1 worker) with For(ConfigMaps, for_opts) and
 * Owns(Secrets, owns_opts) on api p. Step 1 of the scripts must make the
 * first reconcile, which waits; then for each step i the test lets the
 * step's events through and waits until the queue holds lens[i - 1] keys
 * (so every event of the step has been routed). Then it releases the
 * reconciles and checks they came in the order of want (space-separated). */
static void run_prio_order(struct prio_api *p, const struct kcr_source_opts *for_opts,
                           const struct kcr_source_opts *owns_opts, const size_t *lens,
                           int nsteps, const char *want, const char *fail_once,
                           const char *slow)
{
  static const struct kcr_gvr secrets = {"", "v1", "secrets", true};
  kcr_client *cl = twire_client(api_prio, p);
  kcr_informer *cm_inf, *sec_inf;
  struct order o = {
      .mu = PTHREAD_MUTEX_INITIALIZER, .fail_once = fail_once, .slow = slow};
  kcr_controller *c;
  char got[512] = "";
  int nwant = 1;

  for(const char *w = want; *w; w++)
    nwant += *w == ' ';
  tsig_init(&o.entered);
  tsig_init(&o.release);
  tsig_init(&o.calls);
  assert_int_equal(
      KCR_OK,
      kcr_informer_new(&(struct kcr_informer_opts){.client = cl, .gvr = &cms, .ns = "ns"},
                       &cm_inf, NULL));
  assert_int_equal(
      KCR_OK, kcr_informer_new(
                  &(struct kcr_informer_opts){.client = cl, .gvr = &secrets, .ns = "ns"},
                  &sec_inf, NULL));
  assert_int_equal(
      KCR_OK,
      kcr_controller_new(&(struct kcr_controller_opts){.name = "prio",
                                                       .reconcile = record_order,
                                                       .ud = &o,
                                                       .client = cl,
                                                       .base_delay_ms = p->base_delay_ms},
                         &c, NULL));
  o.q = kcr_controller_queue(c);
  assert_int_equal(KCR_OK, kcr_controller_for(c, cm_inf, for_opts));
  assert_int_equal(KCR_OK, kcr_controller_owns(c, sec_inf, "", "ConfigMap", owns_opts));
  assert_int_equal(KCR_OK, kcr_controller_start(c));
  assert_int_equal(KCR_OK, kcr_informer_start(cm_inf));
  assert_true(kcr_informer_wait_synced(cm_inf, 30000));
  assert_int_equal(KCR_OK, kcr_informer_start(sec_inf));
  assert_true(kcr_informer_wait_synced(sec_inf, 30000));
  for(int i = 1; i <= nsteps; i++) {
    tsig_add(&p->step, 1);
    if(i == 1)
      assert_true(tsig_wait(&o.entered, 1, 30000));
    if(!queue_len_reaches(kcr_controller_queue(c), lens[i - 1]))
      fail_msg("step %d: %zu keys queued, not %zu", i,
               kcr_queue_len(kcr_controller_queue(c)), lens[i - 1]);
  }
  tsig_add(&o.release, 1);
  assert_true(tsig_wait(&o.calls, nwant, 30000));
  kcr_informer_stop(cm_inf);
  kcr_informer_stop(sec_inf);
  kcr_controller_free(c);
  kcr_informer_free(cm_inf);
  kcr_informer_free(sec_inf);
  kcr_client_free(cl);
  for(int i = 0; i < o.n; i++)
    snprintf(got + strlen(got), sizeof(got) - strlen(got), "%s%s", i ? " " : "",
             o.seen[i]);
  assert_string_equal(want, got);
  tsig_cleanup(&o.entered);
  tsig_cleanup(&o.release);
  tsig_cleanup(&o.calls);
  tcheck_report();
}

static void run_prio(struct prio_api *p, const struct kcr_source_opts *for_opts,
                     const struct kcr_source_opts *owns_opts, const size_t *lens,
                     int nsteps, const char *want)
{
  run_prio_order(p, for_opts, owns_opts, lens, nsteps, want, NULL, NULL);
}

/* While p0's first pass runs, p1..p5 are created; the children of p2,
 * p4, p5 and m are created (as the owners' own applies come back: no
 * hurry, but m is its owner's first key); then the children of p4, p5 and
 * m change (as a VFM reporting Ready wakes its EBD for a second pass) and
 * one of y is deleted. Before the priorities the children's owners waited
 * behind every queued create (p1 p2 p3 p4 p5 m y); now the changed ones
 * overtake them, and p2, whose child was only created, keeps its place. */
static const struct pev children_cms[] = {
    {1, "{\"type\":\"ADDED\",\"object\":" PCM("p0", "11") "}"},
    {2, "{\"type\":\"ADDED\",\"object\":" PCM("p1", "12") "}"},
    {2, "{\"type\":\"ADDED\",\"object\":" PCM("p2", "13") "}"},
    {2, "{\"type\":\"ADDED\",\"object\":" PCM("p3", "14") "}"},
    {2, "{\"type\":\"ADDED\",\"object\":" PCM("p4", "15") "}"},
    {2, "{\"type\":\"ADDED\",\"object\":" PCM("p5", "16") "}"},
    {0, NULL},
};
static const struct pev children_secrets[] = {
    {3, "{\"type\":\"ADDED\",\"object\":" PSEC("s2", "17", "p2") "}"},
    {3, "{\"type\":\"ADDED\",\"object\":" PSEC("s4", "18", "p4") "}"},
    {3, "{\"type\":\"ADDED\",\"object\":" PSEC("s5", "19", "p5") "}"},
    {3, "{\"type\":\"ADDED\",\"object\":" PSEC("sm", "20", "m") "}"},
    {4, "{\"type\":\"MODIFIED\",\"object\":" PSEC("s4", "21", "p4") "}"},
    {4, "{\"type\":\"MODIFIED\",\"object\":" PSEC("s5", "22", "p5") "}"},
    {4, "{\"type\":\"MODIFIED\",\"object\":" PSEC("sm", "23", "m") "}"},
    {4, "{\"type\":\"DELETED\",\"object\":" PSEC("sy", "24", "y") "}"},
    {0, NULL},
};
/* p0 taken; p1..p5 queued; m added; y added (the changes routed before) */
static const size_t children_lens[] = {0, 5, 6, 7};

static void changed_children_overtake_queued_creates(void **state)
{
  struct prio_api p = {.cm_items = "",
                       .secret_items = "",
                       .cm_events = children_cms,
                       .secret_events = children_secrets};
  tsig_init(&p.step);
  run_prio(&p, NULL, NULL, children_lens, 4, "p0 p4 p5 m y p1 p2 p3");
  tsig_cleanup(&p.step);
}

/* The lanes are the source's options: with the children's changes at
 * DEFAULT, first come first served; with their creates at HIGH too, p2
 * is raised by its child's create. */
static void a_source_sets_its_priorities(void **state)
{
  struct prio_api p = {.cm_items = "",
                       .secret_items = "",
                       .cm_events = children_cms,
                       .secret_events = children_secrets};
  tsig_init(&p.step);
  run_prio(&p, NULL,
           &(struct kcr_source_opts){.priority = &(int){KCR_QUEUE_PRIORITY_DEFAULT}},
           children_lens, 4, "p0 p1 p2 p3 p4 p5 m y");
  tsig_cleanup(&p.step);
  tsig_init(&p.step);
  run_prio(&p, NULL,
           &(struct kcr_source_opts){.create_priority = &(int){KCR_QUEUE_PRIORITY_HIGH}},
           children_lens, 4, "p0 p2 p4 p5 m y p1 p3");
  tsig_cleanup(&p.step);
}

/* The initial list (i1..i3) queues at LOW, so live events overtake it:
 * a create (n1), a change of i3; an update that changes nothing (i2, same
 * resourceVersion) leaves i2 at LOW. */
static const struct pev initial_cms[] = {
    {2, "{\"type\":\"ADDED\",\"object\":" PCM("n1", "11") "}"},
    {2, "{\"type\":\"MODIFIED\",\"object\":" PCM("i2", "2") "}"},
    {2, "{\"type\":\"MODIFIED\",\"object\":" PCM("i3", "12") "}"},
    {2, "{\"type\":\"ADDED\",\"object\":" PCM("n2", "13") "}"},
    {0, NULL},
};

static void the_initial_list_waits_behind_live_events(void **state)
{
  struct prio_api p = {.cm_items = PCM("i1", "1") "," PCM("i2", "2") "," PCM("i3", "3"),
                       .secret_items = "",
                       .cm_events = initial_cms};
  /* i1 taken, i2 i3 queued; n1 n2 added (i3 raised) */
  static const size_t lens[] = {2, 4};
  tsig_init(&p.step);
  run_prio(&p, NULL, NULL, lens, 2, "i1 n1 i3 n2 i2");
  tsig_cleanup(&p.step);
  /* unchanged_priority 0: first come, first served */
  tsig_init(&p.step);
  run_prio(&p, &(struct kcr_source_opts){.unchanged_priority = &(int){0}}, NULL, lens, 2,
           "i1 i2 i3 n1 n2");
  tsig_cleanup(&p.step);
}

/* A retry keeps the priority its key was taken with: x, woken by its
 * child's delete at HIGH, fails; its retry (after 500 ms, which p1 waits
 * out) comes before p2 and p3 - at 0 it would come after them. */
static const struct pev retry_secrets[] = {
    {1, "{\"type\":\"DELETED\",\"object\":" PSEC("sx", "11", "x") "}"},
    {0, NULL},
};
static const struct pev retry_cms[] = {
    {2, "{\"type\":\"ADDED\",\"object\":" PCM("p1", "12") "}"},
    {2, "{\"type\":\"ADDED\",\"object\":" PCM("p2", "13") "}"},
    {2, "{\"type\":\"ADDED\",\"object\":" PCM("p3", "14") "}"},
    {0, NULL},
};

static void a_retry_keeps_the_priority_of_its_key(void **state)
{
  struct prio_api p = {.base_delay_ms = 500,
                       .cm_items = "",
                       .secret_items = "",
                       .cm_events = retry_cms,
                       .secret_events = retry_secrets};
  static const size_t lens[] = {0, 3};
  tsig_init(&p.step);
  run_prio_order(&p, NULL, NULL, lens, 2, "x p1 x p2 p3", "x", "p1");
  tsig_cleanup(&p.step);
}

int main(void)
{
  tfail_init();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(a_reconcile_running_past_stop_keeps_its_context_until_it_returns),
      cmocka_unit_test(busy_can_be_read_from_any_thread_while_stop_reaps),
      cmocka_unit_test(a_requeue_delay_past_int64_max_is_never_a_hot_loop),
      cmocka_unit_test(a_small_requeue_delay_reconciles_again),
      cmocka_unit_test(a_returned_error_is_logged_with_the_context_s_message),
      cmocka_unit_test(a_worker_thread_that_cannot_start_fails_start_and_leaves_none),
      cmocka_unit_test(new_refuses_invalid_options_naming_them),
      cmocka_unit_test(for_predicates_filter_events),
      cmocka_unit_test(a_map_function_sees_the_old_object_of_an_update_too),
      cmocka_unit_test(changed_children_overtake_queued_creates),
      cmocka_unit_test(a_source_sets_its_priorities),
      cmocka_unit_test(the_initial_list_waits_behind_live_events),
      cmocka_unit_test(a_retry_keeps_the_priority_of_its_key),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
