/* Allocation-failure torture of conditions and status writes (see tfail.h):
 * kcr_cond_*, kcr_status_merge, kcr_status_write in its three modes,
 * kcr_update_retry, finalizers and owner references, the writes over the
 * scripted transport (twire.h). A call under test fails with an error and
 * leaves its inputs as they were, or completes exactly; a write that
 * reaches the (fake) server is always the complete, correct one - a patch
 * that lost its `test` guard or a status missing a condition never goes out
 * - and nothing leaks. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <fcntl.h>
#include <string.h>

#include <cmocka.h>

#include "kcr.h"
#include "tfail.h"
#include "twire.h"

#define T_OLD "2026-11-01T08:00:00Z"
#define T_NOW "2026-11-29T12:00:00Z"

static const struct kcr_gvr ebds = {"ebdman.example.com", "v1alpha1", "ebds", true};

static bool str_eq(const char *a, const char *b) { return a && b && !strcmp(a, b); }

/* JSON with single quotes, parsed outside the count. */
static cJSON *sq(const char *text)
{
  char *s;
  cJSON *j;
  tfail_exempt(true);
  s = strdup(text);
  for(char *p = s; *p; p++)
    if(*p == '\'')
      *p = '"';
  j = cJSON_Parse(s);
  free(s);
  tfail_exempt(false);
  assert_non_null(j);
  return j;
}

static time_t tm(const char *s)
{
  time_t t = 0;
  assert_int_equal(KCR_OK, kcr_time_parse(s, &t));
  return t;
}

/* ---- conditions ------------------------------------------------------------ */

#define READY_OLD                                                                        \
  "{'type':'Ready','status':'False','observedGeneration':2,'lastTransitionTime':'" T_OLD \
  "','reason':'Pending','message':'waiting'}"
#define DEGRADED_OLD                                                                     \
  "{'type':'Degraded','status':'False','lastTransitionTime':'" T_OLD                     \
  "','reason':'AsExpected','message':''}"

struct set_case {
  const char *initial, *expect;
  struct kcr_cond c;
};

static bool cond_set(void *ud)
{
  const struct set_case *sc = ud;
  cJSON *conds = sq(sc->initial), *want = sq(sc->expect);
  char *before = tfail_print(conds), *after;
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  bool changed = true, ok;
  kcr_err rc = kcr_cond_set(conds, &sc->c, tm(T_NOW), &changed, &ei);

  after = tfail_print(conds);
  ok = rc ? rc == KCR_ENOMEM && !changed && str_eq(before, after)
          : changed && tfail_equal(conds, want);
  free(before);
  free(after);
  cJSON_Delete(conds);
  cJSON_Delete(want);
  kcr_errinfo_cleanup(&ei);
  return ok;
}

static void cond_set_appends_or_flips_completely_or_not_at_all(void **state)
{
  tfail_torture("kcr_cond_set (append)", cond_set,
                &(struct set_case){"[" READY_OLD "]",
                                   "[" READY_OLD ",{'type':'Degraded','status':'True',"
                                   "'observedGeneration':3,'lastTransitionTime':'" T_NOW
                                   "','reason':'DiskFull','message':'no space left'}]",
                                   {"Degraded", "True", "DiskFull", "no space left", 3}});
  tfail_torture(
      "kcr_cond_set (flip)", cond_set,
      &(struct set_case){"[" READY_OLD "," DEGRADED_OLD "]",
                         "[{'type':'Ready','status':'True','observedGeneration':3,"
                         "'lastTransitionTime':'" T_NOW
                         "','reason':'Installed','message':'all children "
                         "ready'}," DEGRADED_OLD "]",
                         {"Ready", "True", "Installed", "all children ready", 3}});
}

static bool cond_remove(void *ud)
{
  cJSON *conds = sq("[" READY_OLD "," DEGRADED_OLD "," READY_OLD "]");
  cJSON *want = sq("[" DEGRADED_OLD "]");
  bool removed = false;
  kcr_err rc = kcr_cond_remove(conds, "Ready", &removed);
  bool ok = rc == KCR_OK && removed && tfail_equal(conds, want);
  cJSON_Delete(conds);
  cJSON_Delete(want);
  return ok;
}

static void cond_remove_removes_every_duplicate(void **state)
{
  tfail_torture("kcr_cond_remove", cond_remove, NULL);
}

struct validate_case {
  const char *conds, *message; /* message NULL: valid */
};

static bool cond_validate_json(void *ud)
{
  const struct validate_case *vc = ud;
  cJSON *conds = sq(vc->conds);
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  kcr_err rc = kcr_cond_validate_json(conds, &ei);
  /* The verdict never depends on memory; only the message may be lost. */
  bool ok = vc->message
                ? rc == KCR_EINVALID && (!ei.message || str_eq(ei.message, vc->message))
                : rc == KCR_OK;
  cJSON_Delete(conds);
  kcr_errinfo_cleanup(&ei);
  return ok;
}

static void cond_validate_json_verdict_does_not_depend_on_memory(void **state)
{
  tfail_torture("kcr_cond_validate_json (valid)", cond_validate_json,
                &(struct validate_case){"[" READY_OLD "," DEGRADED_OLD "]", NULL});
  tfail_torture(
      "kcr_cond_validate_json (duplicate)", cond_validate_json,
      &(struct validate_case){"[" READY_OLD "," DEGRADED_OLD "," READY_OLD "]",
                              "conditions[2]: condition \"Ready\": duplicate type (first "
                              "at conditions[0])"});
}

static bool cond_validate(void *ud)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  struct kcr_cond c = {"Ready", "True", "not ready", "", 1};
  kcr_err rc = kcr_cond_validate(&c, &ei);
  bool ok = rc == KCR_EINVALID && (!ei.message || strstr(ei.message, "\"not ready\""));
  kcr_errinfo_cleanup(&ei);
  return ok;
}

static void cond_validate_refuses_with_or_without_a_message(void **state)
{
  tfail_torture("kcr_cond_validate", cond_validate, NULL);
}

static bool cond_to_json(void *ud)
{
  const cJSON *want = ud;
  struct kcr_cond c = {.type = "Ready",
                       .status = "True",
                       .reason = "Installed",
                       .message = "done",
                       .observed_generation = 4,
                       .last_transition_time = tm(T_NOW)};
  cJSON *j = kcr_cond_to_json(&c);
  bool ok = !j || tfail_equal(j, want);
  cJSON_Delete(j);
  return ok;
}

static void cond_to_json_is_whole_or_null(void **state)
{
  cJSON *want =
      sq("{'type':'Ready','status':'True','observedGeneration':4,"
         "'lastTransitionTime':'" T_NOW "','reason':'Installed','message':'done'}");
  bool ok = tfail_torture_try("kcr_cond_to_json", cond_to_json, want, 0);
  cJSON_Delete(want);
  assert_true(ok);
}

static bool cond_list_equal(void *ud)
{
  cJSON *a = sq("[" READY_OLD "," DEGRADED_OLD "]"),
        *b = sq("[" DEGRADED_OLD "," READY_OLD "]");
  bool ok = kcr_cond_list_equal_ignoring_time(a, b);
  cJSON_Delete(a);
  cJSON_Delete(b);
  return ok;
}

static void cond_list_equal_answers_whatever_memory_does(void **state)
{
  tfail_torture("kcr_cond_list_equal_ignoring_time", cond_list_equal, NULL);
}

/* ---- kcr_status_merge ------------------------------------------------------- */

#define EBD                                                                              \
  "{'apiVersion':'ebdman.example.com/v1alpha1','kind':'EBD','metadata':{'name':'a',"     \
  "'namespace':'ns','uid':'u1','resourceVersion':'7','generation':3},'spec':{'size':1}," \
  "'status':{'observedGeneration':2,'phase':'Pending','conditions':[" READY_OLD          \
  "," DEGRADED_OLD "]}}"

static const struct kcr_cond desired_conds[] = {
    {"Ready", "True", "Installed", "all children ready", 3},
    {"Degraded", "False", "AsExpected", "", 0}, /* unchanged: keeps T_OLD */
    {"Progressing", "False", "Done", "", 3},
};

struct merge_case {
  struct kcr_status_desired d;
  cJSON *obj, *want;
};

static bool status_merge(void *ud)
{
  struct merge_case *mc = ud;
  char *before = tfail_print(mc->obj), *after;
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  cJSON *conds = (cJSON *)1;
  bool changed = true, ok;
  kcr_err rc = kcr_status_merge(mc->obj, &mc->d, tm(T_NOW), &conds, &changed, &ei);

  after = tfail_print(mc->obj);
  ok = str_eq(before, after) && (rc ? rc == KCR_ENOMEM && !conds && !changed
                                    : changed && tfail_equal(conds, mc->want));
  cJSON_Delete(rc ? NULL : conds);
  free(before);
  free(after);
  kcr_errinfo_cleanup(&ei);
  return ok;
}

static void status_merge_gives_the_whole_list_or_nothing(void **state)
{
  cJSON *extra = sq("{'phase':'Ready'}");
  struct merge_case mc = {
      {.conds = desired_conds, .n = 3, .observed_generation = 3, .extra = extra},
      sq(EBD),
      sq("[{'type':'Ready','status':'True','observedGeneration':3,'lastTransitionTime':"
         "'" T_NOW "','reason':'Installed','message':'all children ready'}," DEGRADED_OLD
         ",{'type':'Progressing','status':'False','observedGeneration':3,"
         "'lastTransitionTime':'" T_NOW "','reason':'Done','message':''}]")};
  bool ok = tfail_torture_try("kcr_status_merge", status_merge, &mc, 0);
  cJSON_Delete(mc.obj);
  cJSON_Delete(mc.want);
  cJSON_Delete(extra);
  assert_true(ok);
}

/* ---- a fake API server for one EBD ------------------------------------------ */

/* Writes are checked as trees, with every lastTransitionTime other than
 * T_OLD replaced by "NOW" (the writer stamps the wall clock). */
static void normalize_times(cJSON *t)
{
  cJSON *c;
  cJSON_ArrayForEach(c, kcr_json_at(t, "/status/conditions"))
  {
    const char *ltt = kcr_json_str(c, "/lastTransitionTime");
    if(ltt && strcmp(ltt, T_OLD))
      cJSON_ReplaceItemInObject(c, "lastTransitionTime", cJSON_CreateString("NOW"));
  }
}

struct server {
  const char *get_body; /* answer to GET of the object */
  const char *method;   /* of the one write expected */
  const char *path;     /* its path and query */
  const char *ctype;    /* its content type */
  cJSON *want;          /* its body, normalized */
  int conflicts;        /* answer this many 409s to the write first */
  /* per run */
  int writes_ok, writes_409;
  bool bad;
};

static kcr_err server(struct twire_call *call, void *ud)
{
  struct server *s = ud;
  const struct kcr__wire_request *r = call->req;
  cJSON *body;
  bool match;

  if(!strcmp(r->method, "GET") &&
     !strcmp(r->path, "/apis/ebdman.example.com/v1alpha1/namespaces/ns/ebds/a"))
    return twire_reply(call, 200, "%s", s->get_body);
  body = r->body ? cJSON_ParseWithLength(r->body, r->body_len) : NULL;
  normalize_times(body);
  match = str_eq(r->method, s->method) && str_eq(r->path, s->path) &&
          str_eq(r->content_type, s->ctype) && cJSON_Compare(body, s->want, true);
  if(!match) {
    char *text = cJSON_PrintUnformatted(body);
    if(!s->bad)
      fprintf(stderr, "unexpected request: %s %s (%s) %s\n", r->method, r->path,
              r->content_type ? r->content_type : "-", text ? text : "(no body)");
    free(text);
    s->bad = true;
    cJSON_Delete(body);
    return twire_reply(call, 400, "%s", twire_status_json(400, "BadRequest"));
  }
  cJSON_Delete(body);
  if(s->writes_409 < s->conflicts) {
    s->writes_409++;
    return twire_reply(call, 409, "%s", twire_status_json(409, "Conflict"));
  }
  s->writes_ok++;
  return twire_reply(call, 200, "%s", s->get_body);
}

/* A double-quoted copy of a single-quoted text (static per call site). */
static char *dq(const char *text)
{
  char *s = strdup(text);
  for(char *p = s; *p; p++)
    if(*p == '\'')
      *p = '"';
  return s;
}

/* ---- kcr_status_write --------------------------------------------------------- */

struct write_case {
  kcr_client *c;
  enum kcr_status_mode mode;
  struct server *s;
  cJSON *obj, *extra;
};

static bool status_write(void *ud)
{
  struct write_case *wc = ud;
  struct kcr_status_desired d = {
      .conds = desired_conds, .n = 3, .observed_generation = 3, .extra = wc->extra};
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  enum kcr_write_result res = KCR_WRITE_SKIPPED;
  kcr_status_writer *w = (kcr_status_writer *)1;
  kcr_metrics *reg = NULL;
  (void)kcr_metrics_new(NULL, &reg, NULL); /* NULL when out of memory */
  kcr_err rc = reg ? KCR_OK : KCR_ENOMEM;
  bool ok;

  wc->s->writes_ok = wc->s->writes_409 = 0;
  wc->s->bad = false;
  if(!rc)
    rc = kcr_status_writer_new(
        &(struct kcr_status_writer_opts){.client = wc->c,
                                         .gvr = &ebds,
                                         .api_version = "ebdman.example.com/v1alpha1",
                                         .kind = "EBD",
                                         .field_manager = "ebdman",
                                         .mode = wc->mode,
                                         .retry = {5, 1, 1.0, 0},
                                         .metrics = reg},
        &w, &ei);
  if(rc) {
    ok = rc == KCR_ENOMEM && (!reg || !w);
    goto out;
  }
  rc = kcr_status_write(w, wc->obj, &d, &res, &ei);
  /* Written exactly once and correctly, or failed: never "written" with
   * something else sent, never a malformed write. A failure after the write
   * went out (reading the answer) may leave it written: the caller retries
   * a level-based write, as after a lost connection. */
  ok = !wc->s->bad && (rc ? res == KCR_WRITE_FAILED && wc->s->writes_ok <= 1
                          : res == KCR_WRITE_WRITTEN && wc->s->writes_ok == 1);
  kcr_status_writer_free(w);
out:
  kcr_metrics_free(reg);
  kcr_errinfo_cleanup(&ei);
  return ok;
}

static void run_write(const char *name, enum kcr_status_mode mode, struct server *s)
{
  struct write_case wc = {twire_client(server, s), mode, s, sq(EBD),
                          sq("{'phase':'Ready'}")};
  bool ok = tfail_torture_try(name, status_write, &wc, 0);
  kcr_client_free(wc.c);
  cJSON_Delete(wc.obj);
  cJSON_Delete(wc.extra);
  assert_true(ok);
}

#define MERGED_CONDS                                                                     \
  "[{'type':'Ready','status':'True','observedGeneration':3,'lastTransitionTime':'NOW',"  \
  "'reason':'Installed','message':'all children ready'}," DEGRADED_OLD                   \
  ",{'type':'Progressing','status':'False','observedGeneration':3,"                      \
  "'lastTransitionTime':'NOW','reason':'Done','message':''}]"

static void status_write_apply_sends_the_whole_status_or_fails(void **state)
{
  char *get = dq(EBD);
  struct server s = {
      get, "PATCH",
      "/apis/ebdman.example.com/v1alpha1/namespaces/ns/ebds/a/status"
      "?fieldManager=ebdman&force=true",
      "application/apply-patch+yaml",
      sq("{'apiVersion':'ebdman.example.com/v1alpha1','kind':'EBD',"
         "'metadata':{'name':'a','namespace':'ns'},'status':{"
         "'observedGeneration':3,'phase':'Ready','conditions':" MERGED_CONDS "}}")};
  run_write("kcr_status_write (apply)", KCR_STATUS_APPLY, &s);
  cJSON_Delete(s.want);
  free(get);
}

static void status_write_merge_patch_sends_the_whole_status_or_fails(void **state)
{
  char *get = dq(EBD);
  struct server s = {
      get, "PATCH",
      "/apis/ebdman.example.com/v1alpha1/namespaces/ns/ebds/a/status"
      "?fieldManager=ebdman",
      "application/merge-patch+json",
      sq("{'status':{'observedGeneration':3,'phase':'Ready','conditions':" MERGED_CONDS
         "}}")};
  run_write("kcr_status_write (merge patch)", KCR_STATUS_MERGE_PATCH, &s);
  cJSON_Delete(s.want);
  free(get);
}

static void status_write_update_retry_sends_the_whole_object_or_fails(void **state)
{
  char *get = dq(EBD);
  struct server s = {
      get, "PUT",
      /* Every writer records its field manager, this one too (it did not:
       * its PUTs were attributed to the user agent's name). */
      "/apis/ebdman.example.com/v1alpha1/namespaces/ns/ebds/a/status"
      "?fieldManager=ebdman",
      "application/json",
      sq("{'apiVersion':'ebdman.example.com/v1alpha1','kind':'EBD',"
         "'metadata':{'name':'a','namespace':'ns','uid':'u1',"
         "'resourceVersion':'7','generation':3},'spec':{'size':1},"
         "'status':{'observedGeneration':3,'phase':'Ready','conditions':" MERGED_CONDS
         "}}"),
      1 /* one 409 first: the retry path too */};
  run_write("kcr_status_write (update, one conflict)", KCR_STATUS_UPDATE_RETRY, &s);
  cJSON_Delete(s.want);
  free(get);
}

/* ---- kcr_update_retry ----------------------------------------------------------- */

static kcr_err add_label(cJSON *fresh, bool *changed, void *ud)
{
  kcr_err rc = kcr_json_set_str(fresh, "/metadata/labels/tier", "gold");
  *changed = rc == KCR_OK;
  return rc;
}

struct retry_case {
  kcr_client *c;
  struct server *s;
};

static bool update_retry(void *ud)
{
  struct retry_case *rc_ = ud;
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  enum kcr_write_result res = KCR_WRITE_SKIPPED;
  int conflicts = -1;
  kcr_err rc;
  bool ok;

  rc_->s->writes_ok = rc_->s->writes_409 = 0;
  rc_->s->bad = false;
  rc = kcr_update_retry(
      rc_->c, &(struct kcr_ref){&ebds, "ns", "a"},
      &(struct kcr_update_retry_opts){
          .retry = {.steps = 5, .base_ms = 1, .factor = 1.0, .jitter = 0}},
      add_label, NULL, &res, &conflicts, &ei);
  /* A 409 whose answer could not be read ends the call with ENOMEM
   * uncounted. */
  ok = !rc_->s->bad &&
       (conflicts == rc_->s->writes_409 || (rc && conflicts == rc_->s->writes_409 - 1)) &&
       (rc ? res == KCR_WRITE_FAILED && rc_->s->writes_ok <= 1
           : res == KCR_WRITE_WRITTEN && rc_->s->writes_ok == 1);
  kcr_errinfo_cleanup(&ei);
  return ok;
}

static void update_retry_puts_the_whole_mutation_or_fails(void **state)
{
  char *get = dq(EBD);
  struct server s = {get,
                     "PUT",
                     "/apis/ebdman.example.com/v1alpha1/namespaces/ns/ebds/a",
                     "application/json",
                     sq("{'apiVersion':'ebdman.example.com/v1alpha1','kind':'EBD',"
                        "'metadata':{'name':'a','namespace':'ns','uid':'u1',"
                        "'resourceVersion':'7','generation':3,'labels':{'tier':'gold'}},"
                        "'spec':{'size':1},'status':{'observedGeneration':2,'phase':"
                        "'Pending','conditions':[" READY_OLD "," DEGRADED_OLD "]}}"),
                     2};
  struct retry_case rc = {twire_client(server, &s), &s};
  bool ok = tfail_torture_try("kcr_update_retry (two conflicts)", update_retry, &rc, 0);
  kcr_client_free(rc.c);
  cJSON_Delete(s.want);
  free(get);
  assert_true(ok);
}

/* ---- finalizers ------------------------------------------------------------------ */

struct fin_case {
  kcr_client *c;
  struct server *s;
  bool add;
};

static bool finalizer(void *ud)
{
  struct fin_case *fc = ud;
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  struct kcr_ref ref = {&ebds, "ns", "a"};
  bool changed = true, ok;
  kcr_err rc;

  fc->s->writes_ok = fc->s->writes_409 = 0;
  fc->s->bad = false;
  rc = fc->add
           ? kcr_finalizer_add(fc->c, &ref, "ebdman.example.com/cleanup", &changed, &ei)
           : kcr_finalizer_remove(fc->c, &ref, "ebdman.example.com/cleanup", &changed,
                                  &ei);
  /* The patch sent is the guarded one, whole; "changed" means it was. */
  ok = !fc->s->bad &&
       (rc ? !changed && fc->s->writes_ok <= 1 : changed && fc->s->writes_ok == 1);
  kcr_errinfo_cleanup(&ei);
  return ok;
}

static void run_finalizer(const char *name, bool add, const char *get, const char *patch)
{
  char *g = dq(get);
  struct server s = {g, "PATCH", "/apis/ebdman.example.com/v1alpha1/namespaces/ns/ebds/a",
                     "application/json-patch+json", sq(patch)};
  struct fin_case fc = {twire_client(server, &s), &s, add};
  bool ok = tfail_torture_try(name, finalizer, &fc, 0);
  kcr_client_free(fc.c);
  cJSON_Delete(s.want);
  free(g);
  assert_true(ok);
}

static void finalizer_add_sends_a_guarded_patch_or_nothing(void **state)
{
  run_finalizer("kcr_finalizer_add (to a list)", true,
                "{'metadata':{'name':'a','namespace':'ns','resourceVersion':'7',"
                "'finalizers':['other/f']}}",
                "[{'op':'test','path':'/metadata/finalizers','value':['other/f']},"
                "{'op':'add','path':'/metadata/finalizers/-','value':"
                "'ebdman.example.com/cleanup'}]");
  run_finalizer("kcr_finalizer_add (first)", true,
                "{'metadata':{'name':'a','namespace':'ns','resourceVersion':'7'}}",
                "[{'op':'test','path':'/metadata/resourceVersion','value':'7'},"
                "{'op':'add','path':'/metadata/finalizers','value':"
                "['ebdman.example.com/cleanup']}]");
}

static void finalizer_remove_sends_a_guarded_patch_or_nothing(void **state)
{
  run_finalizer("kcr_finalizer_remove", false,
                "{'metadata':{'name':'a','namespace':'ns','resourceVersion':'7',"
                "'finalizers':['other/f','ebdman.example.com/cleanup']}}",
                "[{'op':'test','path':'/metadata/finalizers','value':['other/f',"
                "'ebdman.example.com/cleanup']},{'op':'remove','path':"
                "'/metadata/finalizers/1'}]");
}

/* ---- owner references --------------------------------------------------------- */

struct owner_case {
  const char *child, *expect;
};

static bool owner(void *ud)
{
  const struct owner_case *oc = ud;
  cJSON *child = sq(oc->child), *want = sq(oc->expect), *own = sq(EBD);
  char *before = tfail_print(child), *after;
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  kcr_err rc = kcr_owner_set_controller(child, own, &ei);
  bool ok;

  after = tfail_print(child);
  ok = rc ? rc == KCR_ENOMEM && str_eq(before, after) : tfail_equal(child, want);
  free(before);
  free(after);
  cJSON_Delete(child);
  cJSON_Delete(want);
  cJSON_Delete(own);
  kcr_errinfo_cleanup(&ei);
  return ok;
}

#define OWNER_REF                                                                        \
  "{'apiVersion':'ebdman.example.com/v1alpha1','kind':'EBD','name':'a','uid':'u1',"      \
  "'controller':true,'blockOwnerDeletion':true}"

static void owner_set_controller_adds_the_whole_reference_or_nothing(void **state)
{
  bool ok =
      tfail_torture_try("kcr_owner_set_controller (new)", owner,
                        &(struct owner_case){"{'metadata':{'name':'c','namespace':'ns'}}",
                                             "{'metadata':{'name':'c','namespace':'ns',"
                                             "'ownerReferences':[" OWNER_REF "]}}"},
                        0);
  ok &= tfail_torture_try(
      "kcr_owner_set_controller (upgrade)", owner,
      &(struct owner_case){
          "{'metadata':{'name':'c','namespace':'ns','ownerReferences':[{"
          "'apiVersion':'ebdman.example.com/v1alpha1','kind':'EBD','name':"
          "'a','uid':'u1'}]}}",
          "{'metadata':{'name':'c','namespace':'ns',"
          "'ownerReferences':[" OWNER_REF "]}}"},
      0);
  assert_true(ok);
}

int main(void)
{
  tfail_init();
  kcr_log_set_fd(open("/dev/null", 1));
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(cond_set_appends_or_flips_completely_or_not_at_all),
      cmocka_unit_test(cond_remove_removes_every_duplicate),
      cmocka_unit_test(cond_validate_json_verdict_does_not_depend_on_memory),
      cmocka_unit_test(cond_validate_refuses_with_or_without_a_message),
      cmocka_unit_test(cond_to_json_is_whole_or_null),
      cmocka_unit_test(cond_list_equal_answers_whatever_memory_does),
      cmocka_unit_test(status_merge_gives_the_whole_list_or_nothing),
      cmocka_unit_test(status_write_apply_sends_the_whole_status_or_fails),
      cmocka_unit_test(status_write_merge_patch_sends_the_whole_status_or_fails),
      cmocka_unit_test(status_write_update_retry_sends_the_whole_object_or_fails),
      cmocka_unit_test(update_retry_puts_the_whole_mutation_or_fails),
      cmocka_unit_test(finalizer_add_sends_a_guarded_patch_or_nothing),
      cmocka_unit_test(finalizer_remove_sends_a_guarded_patch_or_nothing),
      cmocka_unit_test(owner_set_controller_adds_the_whole_reference_or_nothing),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
