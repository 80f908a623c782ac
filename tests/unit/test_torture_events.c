/* Allocation-failure torture of the event recorder (with a sink, see
 * events.h) and the leader elector (over the scripted transport, twire.h).
 *
 * Both run a thread of their own, so "the n-th allocation" differs from run
 * to run; the life-cycle tests run a sample of n (tfail_torture_try with
 * max_runs) and their verdicts hold whichever allocation failed: every
 * accepted event ends in exactly one outcome and every write that reaches
 * the server is complete; an elector that led released its lease in a
 * well-formed write, its callbacks were paired; nothing leaks or crashes.
 * The constructors are single-threaded and run with every n. */
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kcr.h"
#include "tcheck.h"
#include "tfail.h"
#include "twire.h"

static bool str_eq(const char *a, const char *b) { return a && b && !strcmp(a, b); }

/* ---- the recorder ------------------------------------------------------------ */

struct sink {
  atomic_int creates, patches;
  atomic_bool bad; /* a write that was not complete */
};

/* Every write is a whole Event (create) or a whole series update (patch). */
static bool whole_write(bool create, const char *ns, const char *name, const cJSON *body)
{
  if(create) {
    const char *note = kcr_json_str(body, "/note"),
               *n = kcr_json_str(body, "/metadata/name");
    return str_eq(ns, "ns") && str_eq(kcr_json_str(body, "/metadata/namespace"), "ns") &&
           n && !strncmp(n, "a.", 2) &&
           str_eq(kcr_json_str(body, "/regarding/name"), "a") &&
           str_eq(kcr_json_str(body, "/regarding/kind"), "ConfigMap") &&
           str_eq(kcr_json_str(body, "/regarding/uid"), "uid-a") &&
           str_eq(kcr_json_str(body, "/type"), "Warning") &&
           str_eq(kcr_json_str(body, "/reason"), "ProvisionFailed") &&
           str_eq(kcr_json_str(body, "/action"), "Provision") &&
           str_eq(kcr_json_str(body, "/reportingController"),
                  "ebdman.example.com/ebdman") &&
           str_eq(kcr_json_str(body, "/reportingInstance"), "torture-1") &&
           kcr_json_str(body, "/eventTime") &&
           (str_eq(note, "volume 1: disk full") || str_eq(note, "volume 2: disk full") ||
            str_eq(note, "(combined from similar events): volume 2: disk full"));
  }
  return str_eq(ns, "ns") && name && !strncmp(name, "a.", 2) &&
         kcr_json_int(body, "/series/count", 0) >= 2 &&
         kcr_json_str(body, "/series/lastObservedTime");
}

static void report_bad(struct sink *s, bool create, const cJSON *body)
{
  char *text;
  tfail_exempt(true);
  text = cJSON_PrintUnformatted(body);
  print_error("incomplete %s: %s\n", create ? "create" : "patch", text ? text : "?");
  free(text);
  tfail_exempt(false);
  atomic_store(&s->bad, true);
}

static kcr_err sink(void *ud, enum kcr_event_op op, const char *ns, const char *name,
                    const char *text, size_t len, struct kcr_errinfo *ei)
{
  struct sink *s = ud;
  bool create = op == KCR_EVENT_CREATE;
  cJSON *body;

  atomic_fetch_add(create ? &s->creates : &s->patches, 1);
  tfail_exempt(true); /* the check's parse, not the recorder's work */
  body = strlen(text) == len ? cJSON_ParseWithLength(text, len) : NULL;
  if(!whole_write(create, ns, name, body))
    report_bad(s, create, body);
  cJSON_Delete(body);
  tfail_exempt(false);
  return KCR_OK;
}

/* The same checks on the API server's side (the recorder's default sink). */
static kcr_err events_api(struct twire_call *call, void *ud)
{
  static const char coll[] = "/apis/events.k8s.io/v1/namespaces/ns/events";
  struct sink *s = ud;
  const struct kcr__wire_request *r = call->req;
  bool create = !strcmp(r->method, "POST");
  const char *name = create ? NULL : r->path + sizeof(coll);
  cJSON *body = r->body ? cJSON_ParseWithLength(r->body, r->body_len) : NULL;
  kcr_err rc;

  if((create ? !twire_is(call, "POST", coll) : !twire_is(call, "PATCH", coll)) ||
     !whole_write(create, "ns", name, body)) {
    report_bad(s, create, body);
    rc = twire_reply(call, 400, "%s", twire_status_json(400, "BadRequest"));
  } else {
    atomic_fetch_add(create ? &s->creates : &s->patches, 1);
    rc = twire_reply(call, create ? 201 : 200, "%.*s", (int)r->body_len, r->body);
  }
  cJSON_Delete(body);
  return rc;
}

struct rec_case {
  kcr_client *c; /* NULL: the test sink */
  struct sink *s;
};

static bool recorder_life(void *ud)
{
  struct rec_case *rcase = ud;
  struct sink *sp = rcase->s;
  struct kcr_event_ref ref = {"v1", "ConfigMap", "ns", "a", "uid-a", "7"};
  struct kcr_recorder_stats st;
  kcr_recorder *r = NULL;
  kcr_metrics *reg;
  uint64_t accepted = 0;
  bool ok, bad_rc = false;

  tfail_exempt(true);                      /* set-up: see recorder_new_fails_cleanly */
  (void)kcr_metrics_new(NULL, &reg, NULL); /* NULL when out of memory */
  assert_int_equal(KCR_OK, kcr_recorder_new(
                               &(struct kcr_recorder_opts){
                                   .reporting_controller = "ebdman.example.com/ebdman",
                                   .reporting_instance = "torture-1",
                                   .metrics = reg,
                                   .max_attempts = 3,
                                   .retry_initial_ms = 1,
                                   .retry_max_ms = 4,
                                   .series_flush_ms = 1,
                                   .shutdown_flush_ms = 5000,
                                   .client = rcase->c,
                                   .sink = rcase->c ? NULL : sink,
                                   .sink_ud = sp},
                               &r, NULL));
  tfail_exempt(false);
  atomic_store(&sp->creates, 0);
  atomic_store(&sp->patches, 0);
  atomic_store(&sp->bad, false);
  /* Two of a kind (one Event with a series of 2) and one other - which
   * coalesces with them when they are still waiting to be sent. */
  for(int i = 0; i < 3; i++) {
    kcr_err rc =
        kcr_recorder_eventf(r, &ref, KCR_EVENT_WARNING, "ProvisionFailed", "Provision",
                            "volume %d: %s", i < 2 ? 1 : 2, "disk full");
    if(!rc)
      accepted++;
    else if(rc != KCR_ENOMEM)
      bad_rc = true;
  }
  ok = !bad_rc && kcr_recorder_flush(r, 10000) == KCR_OK;
  kcr_recorder_get_stats(r, &st);
  /* Every accepted call ends in exactly one outcome, and every write the
   * sink saw was whole. */
  ok = ok && st.sent + st.aggregated + st.dropped + st.failed == accepted &&
       st.queued == 0 && !atomic_load(&sp->bad) &&
       (uint64_t)atomic_load(&sp->creates) >= st.sent;
  if(!ok)
    print_error("recorder: accepted %llu: sent %llu aggregated %llu dropped %llu failed "
                "%llu queued %zu; sink: %d creates %d patches%s\n",
                (unsigned long long)accepted, (unsigned long long)st.sent,
                (unsigned long long)st.aggregated, (unsigned long long)st.dropped,
                (unsigned long long)st.failed, st.queued, atomic_load(&sp->creates),
                atomic_load(&sp->patches),
                atomic_load(&sp->bad) ? ", an incomplete write" : "");
  kcr_recorder_free(r);
  kcr_metrics_free(reg);
  return ok;
}

static void recorder_accounts_for_every_event_and_writes_whole_ones(void **state)
{
  struct sink s;
  assert_true(tfail_torture_try("kcr_recorder (sink: eventf, aggregate, flush, free)",
                                recorder_life, &(struct rec_case){NULL, &s}, 60));
}

static void
recorder_over_the_api_accounts_for_every_event_and_writes_whole_ones(void **state)
{
  struct sink s;
  kcr_client *c = twire_client(events_api, &s);
  bool ok = tfail_torture_try("kcr_recorder (API: eventf, aggregate, flush, free)",
                              recorder_life, &(struct rec_case){c, &s}, 60);
  kcr_client_free(c);
  assert_true(ok);
}

static bool recorder_new(void *ud)
{
  struct sink s = {0};
  kcr_recorder *r = (kcr_recorder *)1;
  kcr_metrics *reg = NULL;
  (void)kcr_metrics_new(NULL, &reg, NULL); /* NULL when out of memory */
  kcr_err rc =
      reg ? kcr_recorder_new(&(struct kcr_recorder_opts){.reporting_controller =
                                                             "ebdman.example.com/ebdman",
                                                         .metrics = reg,
                                                         .sink = sink,
                                                         .sink_ud = &s},
                             &r, NULL)
          : KCR_ENOMEM;
  bool ok = rc ? rc == KCR_ENOMEM && (!reg || !r) : r != NULL;
  kcr_recorder_free(rc ? NULL : r);
  kcr_metrics_free(reg);
  return ok;
}

static void recorder_new_fails_cleanly(void **state)
{
  tfail_torture("kcr_recorder_new + free", recorder_new, NULL);
}

/* ---- the leader elector ---------------------------------------------------------- */

/* One Lease, kept as the server would: GET, POST (create), PUT (with the
 * resourceVersion it was read at). */
struct lease_server {
  pthread_mutex_t mu;
  cJSON *lease;
  int rv;
  bool bad; /* a write that was not a whole, well-formed Lease */
  bool released;
};

static bool well_formed(const cJSON *l)
{
  const char *holder = kcr_json_str(l, "/spec/holderIdentity");
  if(!holder || !str_eq(kcr_json_str(l, "/metadata/name"), "torture") ||
     !str_eq(kcr_json_str(l, "/metadata/namespace"), "kube-system"))
    return false;
  if(!*holder) /* a release */
    return kcr_json_int(l, "/spec/leaseDurationSeconds", 0) == 1;
  return str_eq(holder, "me") && kcr_json_int(l, "/spec/leaseDurationSeconds", 0) == 2 &&
         kcr_json_str(l, "/spec/renewTime") && kcr_json_str(l, "/spec/acquireTime");
}

static kcr_err lease_api(struct twire_call *call, void *ud)
{
  static const char path[] = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases";
  struct lease_server *ls = ud;
  const struct kcr__wire_request *r = call->req;
  cJSON *body = NULL;
  char *text = NULL;
  kcr_err rc;

  pthread_mutex_lock(&ls->mu);
  if(!strcmp(r->method, "GET") && twire_is(call, "GET", path)) {
    if(!ls->lease) {
      rc = twire_reply(call, 404, "%s", twire_status_json(404, "NotFound"));
      goto out;
    }
    text = cJSON_PrintUnformatted(ls->lease);
    rc = twire_reply(call, 200, "%s", text);
    goto out;
  }
  body = r->body ? cJSON_ParseWithLength(r->body, r->body_len) : NULL;
  if(!body || !well_formed(body)) {
    ls->bad = true;
    rc = twire_reply(call, 400, "%s", twire_status_json(400, "BadRequest"));
    goto out;
  }
  if(!strcmp(r->method, "POST")) {
    if(ls->lease) {
      rc = twire_reply(call, 409, "%s", twire_status_json(409, "AlreadyExists"));
      goto out;
    }
  } else if(!ls->lease || !str_eq(kcr_json_str(body, "/metadata/resourceVersion"),
                                  kcr_json_str(ls->lease, "/metadata/resourceVersion"))) {
    rc = twire_reply(call, 409, "%s", twire_status_json(409, "Conflict"));
    goto out;
  }
  {
    char rv[16];
    snprintf(rv, sizeof(rv), "%d", ++ls->rv);
    kcr_json_set_str(body, "/metadata/resourceVersion", rv);
  }
  if(!*kcr_json_str(body, "/spec/holderIdentity"))
    ls->released = true;
  cJSON_Delete(ls->lease);
  ls->lease = body;
  body = NULL;
  text = cJSON_PrintUnformatted(ls->lease);
  rc = twire_reply(call, 200, "%s", text);
out:
  pthread_mutex_unlock(&ls->mu);
  free(text);
  cJSON_Delete(body);
  return rc;
}

struct leading {
  atomic_int started, stopped;
};

static void started(void *ud) { atomic_fetch_add(&((struct leading *)ud)->started, 1); }
static void stopped(void *ud) { atomic_fetch_add(&((struct leading *)ud)->stopped, 1); }

struct elector_case {
  kcr_client *c;
  struct lease_server *ls;
};

static const struct kcr_leader_opts elector_opts = {
    .ns = "kube-system",
    .name = "torture",
    .identity = "me",
    .lease_duration_ms = 2000,
    .renew_deadline_ms = 1000,
    .retry_period_ms = 100,
    .on_started_leading = started,
    .on_stopped_leading = stopped,
};

static bool elector_life(void *ud)
{
  struct elector_case *ec = ud;
  struct leading l = {0};
  struct kcr_leader_opts o = elector_opts;
  kcr_metrics *reg;
  kcr_leader *le = NULL;
  bool led, ok;
  kcr_err rc;

  pthread_mutex_lock(&ec->ls->mu);
  cJSON_Delete(ec->ls->lease); /* a fresh cluster per run */
  ec->ls->lease = NULL;
  ec->ls->bad = ec->ls->released = false;
  pthread_mutex_unlock(&ec->ls->mu);
  tfail_exempt(true);                      /* set-up: see leader_new_fails_cleanly */
  (void)kcr_metrics_new(NULL, &reg, NULL); /* NULL when out of memory */
  o.client = ec->c;
  o.metrics = reg;
  o.ud = &l;
  assert_int_equal(KCR_OK, kcr_leader_new(&o, &le, NULL));
  tfail_exempt(false);
  rc = kcr_leader_start(le);
  if(rc) {
    ok = rc == KCR_ENOMEM;
    goto out;
  }
  /* A failed request is retried after retry_period: it leads soon. */
  led = kcr_leader_wait(le, 10000);
  kcr_leader_stop(le);
  pthread_mutex_lock(&ec->ls->mu);
  /* Callbacks paired; writes whole; a leader that stopped released its
   * lease, unless the release itself ran out of memory (then it expires). */
  ok = led && atomic_load(&l.started) == 1 && atomic_load(&l.stopped) == 1 &&
       !ec->ls->bad && (ec->ls->released || tfail_fired());
  if(!ok)
    print_error("elector: led %d, started %d, stopped %d, bad write %d, released %d\n",
                led, atomic_load(&l.started), atomic_load(&l.stopped), ec->ls->bad,
                ec->ls->released);
  pthread_mutex_unlock(&ec->ls->mu);
out:
  kcr_leader_free(le);
  kcr_metrics_free(reg);
  pthread_mutex_lock(&ec->ls->mu);
  cJSON_Delete(ec->ls->lease); /* the server's memory is not the elector's */
  ec->ls->lease = NULL;
  pthread_mutex_unlock(&ec->ls->mu);
  return ok;
}

static void elector_leads_and_releases_with_whole_writes(void **state)
{
  struct lease_server ls = {PTHREAD_MUTEX_INITIALIZER};
  struct elector_case ec = {twire_client(lease_api, &ls), &ls};
  bool ok = tfail_torture_try("kcr_leader (start, acquire, renew, stop, release, free)",
                              elector_life, &ec, 60);
  kcr_client_free(ec.c);
  cJSON_Delete(ls.lease);
  assert_true(ok);
}

static bool leader_new(void *ud)
{
  struct kcr_leader_opts o = elector_opts;
  kcr_metrics *reg = NULL;
  (void)kcr_metrics_new(NULL, &reg, NULL); /* NULL when out of memory */
  kcr_leader *le = (kcr_leader *)1;
  kcr_err rc;
  bool ok;

  o.client = ud;
  o.metrics = reg;
  o.identity = NULL; /* the default: hostname_random */
  rc = kcr_leader_new(&o, &le, NULL);
  ok = rc ? rc == KCR_ENOMEM && !le : strchr(kcr_leader_identity(le), '_') != NULL;
  kcr_leader_free(rc ? NULL : le);
  kcr_metrics_free(reg);
  return ok;
}

static void leader_new_fails_cleanly(void **state)
{
  kcr_client *c = twire_client(lease_api, NULL);
  bool ok = tfail_torture_try("kcr_leader_new + free", leader_new, c, 0);
  kcr_client_free(c);
  assert_true(ok);
}

int main(void)
{
  tfail_init();
  kcr_log_set_fd(open("/dev/null", 1));
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(recorder_accounts_for_every_event_and_writes_whole_ones),
      cmocka_unit_test(
          recorder_over_the_api_accounts_for_every_event_and_writes_whole_ones),
      cmocka_unit_test(elector_leads_and_releases_with_whole_writes),
      cmocka_unit_test(recorder_new_fails_cleanly),
      cmocka_unit_test(leader_new_fails_cleanly),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
