/* Leader election at unit level, on the wire seam: a scripted Lease API
 * (GET/POST/PUT with resourceVersion checks) drives the fence. The fence
 * (kcr_leader_may_write) closes at the last successful renewal plus the
 * renew deadline, even while the elector thread is stuck in a request; a
 * client gated on it then refuses writes without sending them, while the
 * lease's own requests are never refused. */
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
#include "tabort.h"
#include "tcheck.h"
#include "tfail.h"
#include "tlease.h"
#include "twait.h"
#include "twire.h"

#define CMS "/api/v1/namespaces/default/configmaps"

static const struct kcr_gvr cms = {"", "v1", "configmaps", true};

/* ---- a Lease API ---- */

enum put_mode { PUT_OK, PUT_BLOCK, PUT_FAIL };

struct lease_api {
  pthread_mutex_t mu;
  pthread_cond_t cv; /* any change below */
  struct tlease l;
  int gets, posts, puts, puts_ok, releases, conflicts, patches;
  enum put_mode mode;
  bool blocked;          /* a PUT is being held */
  bool unblock;          /* let it go */
  uint64_t t_in;         /* when the request being handled came in */
  uint64_t t_last_write; /* when the last successful write came in */
};

static void api_init(struct lease_api *a)
{
  memset(a, 0, sizeof(*a));
  tlock_init(&a->mu, &a->cv);
}

static void api_cleanup(struct lease_api *a)
{
  tlease_cleanup(&a->l);
  pthread_cond_destroy(&a->cv);
  pthread_mutex_destroy(&a->mu);
}

static void api_set_mode(struct lease_api *a, enum put_mode m)
{
  pthread_mutex_lock(&a->mu);
  a->mode = m;
  if(m != PUT_BLOCK)
    a->unblock = true;
  pthread_cond_broadcast(&a->cv);
  pthread_mutex_unlock(&a->mu);
}

/* Waits until *field (under a->mu) reaches v; true if it did. */
static bool api_wait(struct lease_api *a, const int *field, int v, uint64_t ms)
{
  struct timespec ts = kcr_time_mono_after(ms);
  bool ok;
  pthread_mutex_lock(&a->mu);
  while(*field < v && pthread_cond_timedwait(&a->cv, &a->mu, &ts) == 0)
    ;
  ok = *field >= v;
  pthread_mutex_unlock(&a->mu);
  return ok;
}

static bool api_wait_blocked(struct lease_api *a, uint64_t ms)
{
  struct timespec ts = kcr_time_mono_after(ms);
  bool ok;
  pthread_mutex_lock(&a->mu);
  while(!a->blocked && pthread_cond_timedwait(&a->cv, &a->mu, &ts) == 0)
    ;
  ok = a->blocked;
  pthread_mutex_unlock(&a->mu);
  return ok;
}

static int api_get(struct lease_api *a, const int *field)
{
  pthread_mutex_lock(&a->mu);
  int v = *field;
  pthread_mutex_unlock(&a->mu);
  return v;
}

/* A PUT of the Lease, as the mode says: it fails, is held until the mode
 * changes (a frozen elector: its request does not return), or goes on. */
static bool put_goes_on(struct lease_api *a)
{
  struct timespec ts = kcr_time_mono_after(60000);
  uint64_t t_in = a->t_in;

  a->puts++;
  if(a->mode == PUT_BLOCK) {
    a->blocked = true;
    a->unblock = false;
    pthread_cond_broadcast(&a->cv);
    while(!a->unblock && pthread_cond_timedwait(&a->cv, &a->mu, &ts) == 0)
      ;
    TCHECK(a->unblock);
    a->blocked = false;
    a->t_in = t_in; /* other requests came in meanwhile */
    pthread_cond_broadcast(&a->cv);
  }
  return a->mode != PUT_FAIL;
}

/* What a request the Lease store answered did to the counters. */
static void count_lease_request(struct lease_api *a, bool put, enum tlease_done done)
{
  a->conflicts += done == TLEASE_CONFLICT;
  if(done != TLEASE_STORED)
    return;
  a->t_last_write = a->t_in;
  if(put) {
    a->puts_ok++;
    a->releases += !*tlease_holder(a->l.obj);
  } else {
    TCHECK(!strcmp(tlease_holder(a->l.obj), "me"));
  }
}

/* A request that is not the Lease's: the PATCH of a ConfigMap. */
static kcr_err other_request(struct lease_api *a, struct twire_call *call)
{
  if(twire_is(call, "PATCH", CMS)) {
    a->patches++;
    return twire_reply(call, 200,
                       "{\"metadata\":{\"name\":\"a\",\"namespace\":\"default\"}}");
  }
  TCHECK_FAIL("unexpected request %s %s", call->req->method, call->req->path);
  return twire_reply(call, 404, "%s", twire_status_json(404, "NotFound"));
}

static kcr_err lease_api(struct twire_call *call, void *ud)
{
  struct lease_api *a = ud;
  uint64_t t_in = kcr_time_mono_ms();
  bool put = twire_is(call, "PUT", TLEASE);
  enum tlease_done done;
  kcr_err rc;

  pthread_mutex_lock(&a->mu);
  a->t_in = t_in;
  a->gets += twire_is(call, "GET", TLEASE);
  a->posts += twire_is(call, "POST", TLEASES);
  if(put && !put_goes_on(a)) {
    rc = twire_reply(call, 500, "%s", twire_status_json(500, "InternalError"));
  } else {
    rc = tlease_serve(&a->l, call, &done);
    if(done != TLEASE_OTHER)
      count_lease_request(a, put, done);
    else
      rc = other_request(a, call);
  }
  pthread_cond_broadcast(&a->cv);
  pthread_mutex_unlock(&a->mu);
  return rc;
}

/* ---- helpers ---- */

static bool fence(void *ud) { return kcr_leader_may_write(ud); }

static kcr_err patch(kcr_client *cl)
{
  static const char body[] = "{\"data\":{\"k\":\"v\"}}";
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  kcr_err rc = kcr_patch(cl, &(struct kcr_ref){&cms, "default", "a"},
                         &(struct kcr_patch_opts){KCR_PATCH_MERGE}, body,
                         sizeof(body) - 1, NULL, &ei);
  kcr_errinfo_cleanup(&ei);
  return rc;
}

/* Bounded polling (1 ms steps) until fn(le) == want; true if it got there. */
static bool poll_until(bool (*fn)(kcr_leader *), kcr_leader *le, bool want, uint64_t ms)
{
  struct timespec step = {0, 1000000L};
  uint64_t until = kcr_time_mono_ms() + ms;
  while(fn(le) != want && kcr_time_mono_ms() < until)
    nanosleep(&step, NULL);
  return fn(le) == want;
}

struct stopped {
  kcr_leader *le;
  atomic_int calls;
};

static void on_stopped(void *ud)
{
  struct stopped *s = ud;
  /* The fence is closed before anyone hears that leadership ended. */
  TCHECK(!kcr_leader_may_write(s->le));
  atomic_fetch_add(&s->calls, 1);
}

static kcr_leader *elector(kcr_client *cl, struct stopped *s)
{
  kcr_leader *le;
  assert_int_equal(
      KCR_OK, kcr_leader_new(&(struct kcr_leader_opts){.client = cl,
                                                       .ns = "default",
                                                       .name = "lock",
                                                       .identity = "me",
                                                       .lease_duration_ms = 2000,
                                                       .renew_deadline_ms = 1500,
                                                       .retry_period_ms = 300,
                                                       .on_stopped_leading = on_stopped,
                                                       .ud = s},
                             &le, NULL));
  s->le = le;
  kcr_client_set_write_gate(cl, fence, le);
  return le;
}

/* ---- the fence ---- */

static void
the_fence_closes_at_the_renew_deadline_while_the_elector_is_stuck(void **state)
{
  struct lease_api api;
  struct stopped s = {0};
  kcr_client *cl;
  kcr_leader *le;
  uint64_t t_last_ok, t_closed;
  bool still_blocked;

  api_init(&api);
  atomic_init(&s.calls, 0);
  cl = twire_client(lease_api, &api);
  le = elector(cl, &s);
  assert_int_equal(KCR_OK, kcr_leader_start(le));
  assert_true(kcr_leader_wait(le, 30000));
  assert_true(kcr_leader_may_write(le)); /* just acquired */
  assert_int_equal(KCR_OK, patch(cl));
  assert_int_equal(1, api_get(&api, &api.patches));
  /* Renewals keep the fence open past acquisition + renew deadline. */
  assert_true(api_wait(&api, &api.puts_ok, 6, 30000)); /* 6 x 300 ms > 1500 ms */
  assert_true(kcr_leader_may_write(le));
  assert_int_equal(KCR_OK, patch(cl));
  assert_int_equal(2, api_get(&api, &api.patches));

  /* The next renewal hangs in the API: the elector thread is stuck. */
  api_set_mode(&api, PUT_BLOCK);
  assert_true(api_wait_blocked(&api, 30000));
  pthread_mutex_lock(&api.mu);
  t_last_ok = api.t_last_write;
  pthread_mutex_unlock(&api.mu);
  assert_true(poll_until(kcr_leader_may_write, le, false, 30000));
  t_closed = kcr_time_mono_ms();
  pthread_mutex_lock(&api.mu);
  still_blocked = api.blocked;
  pthread_mutex_unlock(&api.mu);
  /* Closed by the clock alone: the elector has not returned, and still
   * believes it leads. */
  assert_true(still_blocked);
  assert_true(kcr_leader_is_leader(le));
  /* Not before the last renewal (which started a little before the API saw
   * it) plus the renew deadline. */
  assert_true(t_closed + 300 >= t_last_ok + 1500);

  /* A gated write is refused without being sent. */
  assert_int_equal(KCR_ECANCELED, patch(cl));
  assert_int_equal(2, api_get(&api, &api.patches));

  /* The stuck renewal returns, failed: past the deadline, leadership is
   * lost. (Had it succeeded, the lease would run from when it started.) */
  api_set_mode(&api, PUT_FAIL);
  assert_true(poll_until(kcr_leader_lost, le, true, 30000));
  assert_false(kcr_leader_may_write(le));
  assert_false(kcr_leader_is_leader(le));
  assert_int_equal(KCR_ECANCELED, patch(cl));
  assert_int_equal(2, api_get(&api, &api.patches));
  assert_int_equal(1, atomic_load(&s.calls));
  kcr_leader_free(le);
  kcr_client_free(cl);
  tcheck_report();
  api_cleanup(&api);
}

static void the_lease_requests_pass_the_gate_the_fence_closes(void **state)
{
  struct lease_api api;
  struct stopped s = {0};
  kcr_client *cl;
  kcr_leader *le;

  api_init(&api);
  atomic_init(&s.calls, 0);
  cl = twire_client(lease_api, &api);
  le = elector(cl, &s);
  /* Not leading: the gate is closed for everyone else ... */
  assert_false(kcr_leader_may_write(le));
  assert_int_equal(KCR_ECANCELED, patch(cl));
  assert_int_equal(0, api_get(&api, &api.patches));
  /* ... but the lease's own create goes through it. */
  assert_int_equal(KCR_OK, kcr_leader_start(le));
  assert_true(kcr_leader_wait(le, 30000));
  assert_int_equal(1, api_get(&api, &api.posts));

  /* Stopping closes the fence first, then releases the lease: that write
   * goes through the closed gate too. */
  kcr_leader_stop(le);
  assert_false(kcr_leader_may_write(le));
  assert_int_equal(1, api_get(&api, &api.releases));
  pthread_mutex_lock(&api.mu);
  assert_string_equal("", tlease_holder(api.l.obj));
  pthread_mutex_unlock(&api.mu);
  assert_int_equal(KCR_ECANCELED, patch(cl));
  assert_int_equal(0, api_get(&api, &api.patches));
  assert_int_equal(1, atomic_load(&s.calls));
  kcr_leader_free(le);
  kcr_client_free(cl);
  tcheck_report();
  api_cleanup(&api);
}

/* ---- options (issue 9) ---- */

static void keep_lease_on_stop_leaves_the_lease_held(void **state)
{
  struct lease_api api;
  kcr_client *cl;
  kcr_leader *le;

  api_init(&api);
  cl = twire_client(lease_api, &api);
  assert_int_equal(KCR_OK,
                   kcr_leader_new(&(struct kcr_leader_opts){.client = cl,
                                                            .ns = "default",
                                                            .name = "lock",
                                                            .identity = "me",
                                                            .keep_lease_on_stop = true},
                                  &le, NULL));
  assert_int_equal(KCR_OK, kcr_leader_start(le));
  assert_true(kcr_leader_wait(le, 30000));
  kcr_leader_stop(le);
  assert_int_equal(0, api_get(&api, &api.releases));
  pthread_mutex_lock(&api.mu);
  assert_string_equal("me", tlease_holder(api.l.obj));
  pthread_mutex_unlock(&api.mu);
  kcr_leader_free(le);
  kcr_client_free(cl);
  tcheck_report();
  api_cleanup(&api);
}

static void new_refuses_invalid_options_naming_them(void **state)
{
  kcr_client *cl = twire_client(lease_api, NULL);
  const struct {
    struct kcr_leader_opts o;
    const char *field;
  } bad[] = {
      {{.ns = "d", .name = "n"}, "client"},
      {{.client = cl, .name = "n"}, "ns"},
      {{.client = cl, .ns = "d", .name = ""}, "name"},
      {{.client = cl, .ns = "d", .name = "n", .lease_duration_ms = 999},
       "lease_duration_ms"},
      {{.client = cl,
        .ns = "d",
        .name = "n",
        .lease_duration_ms = 2500,
        .renew_deadline_ms = 2200},
       "renew_deadline_ms"},
      {{.client = cl,
        .ns = "d",
        .name = "n",
        .renew_deadline_ms = 2000,
        .retry_period_ms = 2000},
       "retry_period_ms"},
  };
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  kcr_leader *le;

  for(size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    le = (kcr_leader *)1;
    assert_int_equal(KCR_EINVAL, kcr_leader_new(&bad[i].o, &le, &ei));
    assert_null(le);
    if(!strstr(ei.message, bad[i].field))
      fail_msg("case %zu: \"%s\" does not name %s", i, ei.message, bad[i].field);
  }
  assert_int_equal(KCR_EINVAL, kcr_leader_new(NULL, &le, &ei));
  kcr_errinfo_cleanup(&ei);
  kcr_client_free(cl);
}

/* ---- debug-build assertions ---- */

struct self_free {
  kcr_leader *le;
  struct tsig freed;
};

static void free_me(void *ud)
{
  struct self_free *f = ud;
  kcr_leader_free(f->le); /* aborts: the elector's own thread */
  tsig_add(&f->freed, 1);
}

/* The elector freed from its on_started_leading callback: stop cannot join
 * the calling thread, so free would pull the elector out from under it. */
static void elector_freed_from_its_callback(void *ud)
{
  struct lease_api api;
  struct self_free f;
  kcr_client *cl;

  api_init(&api);
  tsig_init(&f.freed);
  cl = twire_client(lease_api, &api);
  if(kcr_leader_new(&(struct kcr_leader_opts){.client = cl,
                                              .ns = "default",
                                              .name = "lock",
                                              .identity = "me",
                                              .on_started_leading = free_me,
                                              .ud = &f},
                    &f.le, NULL) ||
     kcr_leader_start(f.le))
    return;
  tsig_wait(&f.freed, 1, 30000); /* returns (fails the test) if free did */
}

static void broken_invariants_abort_debug_builds(void **state)
{
  TABORT_SKIP_IN_RELEASE();
  assert_true(tabort(elector_freed_from_its_callback, NULL));
}

int main(void)
{
  tfail_init();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(the_fence_closes_at_the_renew_deadline_while_the_elector_is_stuck),
      cmocka_unit_test(the_lease_requests_pass_the_gate_the_fence_closes),
      cmocka_unit_test(keep_lease_on_stop_leaves_the_lease_held),
      cmocka_unit_test(new_refuses_invalid_options_naming_them),
      cmocka_unit_test(broken_invariants_abort_debug_builds),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
