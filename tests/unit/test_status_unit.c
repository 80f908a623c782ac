/* The status writer, finalizers and owner references at unit level, on the
 * wire seam: what is sent, byte for byte, including int64 fields beyond what
 * a double holds; and under allocation failure, never a partial write: a
 * JSON patch always carries its test guard, a status body all it owns. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kcr.h"
#include "runtime/store-int.h"
#include "tcheck.h"
#include "tfail.h"
#include "twire.h"

static const struct kcr_gvr widgets = {"test.kcr.io", "v1", "widgets", true};

#define LTT "2026-11-29T10:00:00Z"

/* ---- a scripted API server for one object ---- */

struct api {
  const char *object; /* what GET answers */
  long write_code;    /* what PATCH/PUT answer; 0 = 200 */
  int gets, writes;
  char *method, *ctype, *body; /* the last write */
};

static kcr_err one_object(struct twire_call *call, void *ud)
{
  struct api *a = ud;
  const struct kcr__wire_request *r = call->req;
  if(!strcmp(r->method, "GET")) {
    a->gets++;
    return twire_reply(call, 200, "%s", a->object);
  }
  a->writes++;
  free(a->method);
  free(a->ctype);
  free(a->body);
  a->method = strdup(r->method);
  a->ctype = r->content_type ? strdup(r->content_type) : NULL;
  a->body = strndup(r->body ? r->body : "", r->body_len);
  if(a->write_code && a->write_code != 200)
    return twire_reply(call, a->write_code, "%s",
                       twire_status_json(a->write_code, "Invalid"));
  return twire_reply(call, 200, "%s", a->object);
}

static void api_reset(struct api *a)
{
  free(a->method);
  free(a->ctype);
  free(a->body);
  a->method = a->ctype = a->body = NULL;
  a->gets = a->writes = 0;
}

/* Parses as the client does (exact integers). */
static cJSON *json(const char *text)
{
  cJSON *o = NULL;
  if(kcr_json_parse(text, strlen(text), &o, NULL))
    fail_msg("not JSON: %s", text);
  return o;
}

/* Semantic equality, integers compared exactly ("1e+15" != 1000000000000000,
 * 9007199254740992 != 9007199254740993). Safe inside a torture run. */
static bool same_json(const char *want, const char *got)
{
  cJSON *a = NULL, *b = NULL;
  bool eq;
  tfail_exempt(true);
  eq = got && !kcr_json_parse(want, strlen(want), &a, NULL) &&
       !kcr_json_parse(got, strlen(got), &b, NULL) && cJSON_Compare(a, b, 1);
  cJSON_Delete(a);
  cJSON_Delete(b);
  tfail_exempt(false);
  return eq;
}

/* The string at path, "(absent)" when there is none. */
static const char *str_at(const cJSON *o, const char *path)
{
  const char *v = kcr_json_str(o, path);
  return v ? v : "(absent)";
}

/* ---- status writes: int64 fields exactly ---- */

#define BIG "9007199254740993" /* 2^53 + 1: no double holds it */
#define E15 "1000000000000000" /* cJSON prints 10^15 as 1e+15 */

static const char widget[] =
    "{\"apiVersion\":\"test.kcr.io/v1\",\"kind\":\"Widget\",\"metadata\":{\"name\":\"w\","
    "\"namespace\":\"ns\",\"resourceVersion\":\"7\",\"generation\":" BIG "},"
    "\"status\":{\"observedGeneration\":1,\"conditions\":[{\"type\":\"Other\","
    "\"status\":\"True\",\"observedGeneration\":" E15 ",\"lastTransitionTime\":\"" LTT
    "\",\"reason\":\"O\",\"message\":\"\"}]}}";

static const char ready[] =
    "{\"type\":\"Ready\",\"status\":\"True\",\"observedGeneration\":" BIG
    ",\"lastTransitionTime\":\"" LTT "\",\"reason\":\"R\",\"message\":\"m\"}";
static const char other[] =
    "{\"type\":\"Other\",\"status\":\"True\",\"observedGeneration\":" E15
    ",\"lastTransitionTime\":\"" LTT "\",\"reason\":\"O\",\"message\":\"\"}";

/* What each writer must send for desired() on widget. */
static char *want_body(enum kcr_status_mode mode)
{
  char *s = NULL;
  int n = -1;
  switch(mode) {
  case KCR_STATUS_APPLY:
    n = asprintf(
        &s,
        "{\"apiVersion\":\"test.kcr.io/v1\",\"kind\":\"Widget\",\"metadata\":{"
        "\"name\":\"w\",\"namespace\":\"ns\"},\"status\":{\"observedGeneration\":" BIG
        ",\"conditions\":[%s]}}",
        ready);
    break;
  case KCR_STATUS_MERGE_PATCH:
    n = asprintf(&s,
                 "{\"status\":{\"observedGeneration\":" BIG ",\"conditions\":[%s,%s]}}",
                 other, ready);
    break;
  case KCR_STATUS_UPDATE_RETRY:
    n = asprintf(&s,
                 "{\"apiVersion\":\"test.kcr.io/v1\",\"kind\":\"Widget\",\"metadata\":{"
                 "\"name\":\"w\",\"namespace\":\"ns\",\"resourceVersion\":\"7\","
                 "\"generation\":" BIG "},\"status\":{\"observedGeneration\":" BIG
                 ",\"conditions\":[%s,%s]}}",
                 other, ready);
    break;
  }
  assert_true(n > 0);
  return s;
}

static struct kcr_cond ready_cond(void)
{
  struct kcr_cond c = {"Ready", "True", "R", "m", 9007199254740993LL, 0};
  kcr_time_parse(LTT, &c.last_transition_time);
  return c;
}

static kcr_status_writer *writer_for(kcr_client *c, enum kcr_status_mode mode)
{
  kcr_status_writer *w = NULL;
  struct kcr_status_writer_opts o = {.client = c,
                                     .gvr = &widgets,
                                     .api_version = "test.kcr.io/v1",
                                     .kind = "Widget",
                                     .field_manager = "kcr-test",
                                     .mode = mode};
  assert_int_equal(KCR_OK, kcr_status_writer_new(&o, &w, NULL));
  return w;
}

static void writers_send_int64_fields_exactly(void **state)
{
  static const enum kcr_status_mode modes[] = {KCR_STATUS_APPLY, KCR_STATUS_MERGE_PATCH,
                                               KCR_STATUS_UPDATE_RETRY};
  for(size_t i = 0; i < 3; i++) {
    struct api a = {widget};
    kcr_client *c = twire_client(one_object, &a);
    kcr_status_writer *w = writer_for(c, modes[i]);
    struct kcr_cond cond = ready_cond();
    struct kcr_status_desired d = {
        .conds = &cond, .n = 1, .observed_generation = 9007199254740993LL};
    struct kcr_errinfo ei = KCR_ERRINFO_INIT;
    enum kcr_write_result res;
    cJSON *obj = json(widget);
    char *want = want_body(modes[i]);

    assert_int_equal(KCR_OK, kcr_status_write(w, obj, &d, &res, &ei));
    assert_int_equal(KCR_WRITE_WRITTEN, res);
    assert_int_equal(1, a.writes);
    if(!same_json(want, a.body))
      fail_msg("mode %d sent\n  %s\nwant\n  %s", (int)modes[i], a.body, want);
    /* Byte for byte where a double would differ. */
    assert_non_null(strstr(a.body, "\"observedGeneration\":" BIG ","));
    assert_null(strstr(a.body, "e+"));
    if(modes[i] != KCR_STATUS_APPLY)
      assert_non_null(strstr(a.body, "\"observedGeneration\":" E15 ","));
    free(want);
    cJSON_Delete(obj);
    kcr_errinfo_cleanup(&ei);
    kcr_status_writer_free(w);
    kcr_client_free(c);
    api_reset(&a);
  }
}

/* The comparison that decides "no change, no request" is exact too: 2^53
 * and 2^53 + 1 differ, 10^15 equals itself. */
static void merge_compares_generations_exactly(void **state)
{
  cJSON *obj = json("{\"status\":{\"observedGeneration\":" BIG "}}"), *conds = NULL;
  struct kcr_status_desired d = {.observed_generation = 9007199254740993LL};
  bool changed = true;

  assert_int_equal(KCR_OK, kcr_status_merge(obj, &d, 1, &conds, &changed, NULL));
  assert_false(changed);
  cJSON_Delete(conds);
  d.observed_generation = 9007199254740992LL;
  assert_int_equal(KCR_OK, kcr_status_merge(obj, &d, 1, &conds, &changed, NULL));
  assert_true(changed);
  cJSON_Delete(conds);
  cJSON_Delete(obj);

  /* Extra status fields written with kcr_json_add_int equal what is served. */
  obj = json("{\"status\":{\"replicas\":" E15 "}}");
  cJSON *extra = cJSON_CreateObject();
  assert_non_null(kcr_json_add_int(extra, "replicas", 1000000000000000LL));
  d = (struct kcr_status_desired){.extra = extra};
  assert_int_equal(KCR_OK, kcr_status_merge(obj, &d, 1, &conds, &changed, NULL));
  assert_false(changed);
  cJSON_Delete(conds);
  cJSON_Delete(extra);
  cJSON_Delete(obj);
}

/* ---- the apply, written without a tree ---- */

/* The item sent for type in body, checked against the merged one (the
 * model: kcr_status_merge's item, its six metav1.Condition fields): all
 * equal, but a lastTransitionTime the merge set to its own now, which must
 * lie in [t0, t1]. */
static void expect_item(const cJSON *body, const cJSON *merged, const char *type,
                        time_t model_now, time_t t0, time_t t1, const char *what)
{
  static const char *const fields[] = {"type",   "status",  "observedGeneration",
                                       "reason", "message", "lastTransitionTime"};
  const cJSON *got = kcr_cond_find(kcr_json_at(body, "/status/conditions"), type),
              *want = kcr_cond_find(merged, type);
  char now_text[KCR_RFC3339_LEN];

  kcr_time_format(model_now, now_text);
  if(!got || !want)
    fail_msg("%s: %s sent %d, merged %d", what, type, got != NULL, want != NULL);
  for(size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
    const cJSON *g = cJSON_GetObjectItemCaseSensitive(got, fields[i]),
                *m = cJSON_GetObjectItemCaseSensitive(want, fields[i]);
    time_t t = 0;
    if(i == 5 && cJSON_IsString(m) && !strcmp(m->valuestring, now_text)) {
      if(!cJSON_IsString(g) || kcr_time_parse(g->valuestring, &t) || t < t0 || t > t1)
        fail_msg("%s: %s.lastTransitionTime not now", what, type);
      continue;
    }
    if(!g != !m || (g && !cJSON_Compare(g, m, 1)))
      fail_msg("%s: %s.%s differs from the merge's", what, type, fields[i]);
  }
  if(cJSON_GetArraySize(got) !=
     (cJSON_GetObjectItemCaseSensitive(want, "observedGeneration") ? 6 : 5) -
         !cJSON_GetObjectItemCaseSensitive(want, "lastTransitionTime"))
    fail_msg("%s: %s sent with other fields", what, type);
}

/* Desired sets for the apply tests: each with its number of conditions.
 * The first DESIRED_FIRST are the merge comparison's; the rest add a
 * negative observedGeneration and no condition at all. */
static const struct kcr_cond desired_sets[][2] = {
    {{"Ready", "True", "R", "m", 1, 0}},
    {{"Ready", "True", "R", "m", 2, 0}},
    {{"Ready", "False", "R2", "tab\there \"q\"", 2, 1795946400}},
    {{"Ready", "True", "R", "m", 0, 0}, {"Installed", "True", "I", "", 2, 0}},
    {{"Installed", "False", "I", "", 0, 0}, {"Ready", "True", "R", "m", 2, 0}},
    {{"Ready", "True", "R", "", -1, 0}},
    {{"Ready", "True", "R", "m", 1, 0}},
};
static const size_t desired_n[] = {1, 1, 1, 2, 2, 1, 0};
#define DESIRED_FIRST 5
#define DESIRED_ALL   (sizeof(desired_n) / sizeof(desired_n[0]))

/* An apply is written from the desired status and the object's (no tree):
 * for every object and desired set below, what it sends is what
 * kcr_status_merge gives for our types - a condition that keeps its status
 * keeps its lastTransitionTime as it was (also one that is not a string,
 * or none), a new or changed one takes the desired time or now - only the
 * six fields of a condition, observedGeneration, and nothing when nothing
 * changed. */
static void an_apply_sends_what_the_merge_gives_for_our_types(void **state)
{
  static const char *const statuses[] = {
      "",
      ",\"status\":{}",
      ",\"status\":{\"conditions\":{}}",
      ",\"status\":{\"observedGeneration\":1,\"conditions\":[{\"type\":\"Ready\","
      "\"status\":\"True\",\"observedGeneration\":1,\"lastTransitionTime\":\"" LTT
      "\",\"reason\":\"R\",\"message\":\"m\"},{\"type\":\"Other\",\"status\":"
      "\"True\",\"lastTransitionTime\":\"" LTT "\",\"reason\":\"O\",\"message\":\"\"}]}",
      ",\"status\":{\"observedGeneration\":1,\"conditions\":[{\"type\":\"Ready\","
      "\"status\":\"False\",\"reason\":\"R\",\"message\":\"m\",\"extra\":1}]}",
      ",\"status\":{\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\","
      "\"lastTransitionTime\":5,\"reason\":\"Old\",\"message\":\"say \\\"x\\\"\"}]}",
      ",\"status\":{\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\","
      "\"observedGeneration\":2,\"lastTransitionTime\":\"2026-01-01T00:00:00Z\","
      "\"reason\":\"R\",\"message\":\"m\"},{\"type\":\"Installed\",\"status\":"
      "\"False\",\"lastTransitionTime\":\"" LTT "\",\"reason\":\"I\",\"message\":\"\"}]}",
  };
  const struct kcr_cond(*sets)[2] = desired_sets;
  const size_t *nconds = desired_n;
  static const int64_t gens[] = {0, 1, 2};

  for(size_t si = 0; si < sizeof(statuses) / sizeof(statuses[0]); si++)
    for(size_t di = 0; di < DESIRED_FIRST; di++)
      for(size_t gi = 0; gi < 3; gi++) {
        char text[1024], what[64];
        struct api a = {text};
        kcr_client *c = twire_client(one_object, &a);
        kcr_status_writer *w = writer_for(c, KCR_STATUS_APPLY);
        struct kcr_status_desired d = {
            .conds = sets[di], .n = nconds[di], .observed_generation = gens[gi]};
        struct kcr_errinfo ei = KCR_ERRINFO_INIT;
        enum kcr_write_result res;
        cJSON *obj, *merged = NULL, *body;
        bool changed = false;
        time_t t0, t1, model_now = 1000000000;

        snprintf(text, sizeof(text),
                 "{\"apiVersion\":\"test.kcr.io/v1\",\"kind\":\"Widget\",\"metadata\":"
                 "{\"name\":\"w\",\"namespace\":\"ns\",\"uid\":\"u\","
                 "\"resourceVersion\":\"7\"}%s}",
                 statuses[si]);
        snprintf(what, sizeof(what), "status %zu, set %zu, generation %lld", si, di,
                 (long long)gens[gi]);
        obj = json(text);
        assert_int_equal(KCR_OK,
                         kcr_status_merge(obj, &d, model_now, &merged, &changed, NULL));
        /* time() may read a coarser clock than the writer's (a tick behind) */
        t0 = time(NULL) - 1;
        assert_int_equal(KCR_OK, kcr_status_write(w, obj, &d, &res, &ei));
        t1 = time(NULL) + 1;
        if(res != (changed ? KCR_WRITE_WRITTEN : KCR_WRITE_SKIPPED) ||
           a.writes != (int)changed)
          fail_msg("%s: result %d, %d writes; the merge says changed %d", what, (int)res,
                   a.writes, changed);
        if(changed) {
          body = json(a.body);
          assert_string_equal("Widget", str_at(body, "/kind"));
          assert_string_equal("w", str_at(body, "/metadata/name"));
          assert_string_equal("ns", str_at(body, "/metadata/namespace"));
          assert_int_equal(gens[gi], kcr_json_int(body, "/status/observedGeneration", 0));
          assert_int_equal(gens[gi] ? 2 : 1,
                           cJSON_GetArraySize(kcr_json_at(body, "/status")));
          assert_int_equal(nconds[di],
                           cJSON_GetArraySize(kcr_json_at(body, "/status/conditions")));
          for(size_t i = 0; i < nconds[di]; i++)
            expect_item(body, merged, sets[di][i].type, model_now, t0, t1, what);
          cJSON_Delete(body);
        }
        cJSON_Delete(merged);
        cJSON_Delete(obj);
        kcr_errinfo_cleanup(&ei);
        kcr_status_writer_free(w);
        kcr_client_free(c);
        api_reset(&a);
      }
  (void)state;
}

/* body as sent, with every time within [t0, t1] (the writer's "now")
 * written as NOW: two writes made a second apart compare byte for byte. */
static char *now_as_word(const char *body, time_t t0, time_t t1)
{
  char *out = strdup(body), t[KCR_RFC3339_LEN], *at;

  assert_non_null(out);
  for(time_t x = t0; x <= t1; x++) {
    kcr_time_format(x, t);
    while((at = strstr(out, t)))
      memcpy(at, "NOW", 3), memmove(at + 3, at + strlen(t), strlen(at + strlen(t)) + 1);
  }
  return out;
}

/* kcr_status_write_text does what kcr_status_write does on the tree of the
 * same text - the same result, the same number of requests, the same
 * body byte for byte - over objects whose text it reads itself and objects
 * it leaves to the tree (escapes, integers that are not plain, a
 * lastTransitionTime that is not a string, items that are not objects or
 * name no type, conditions that are no list), every desired set and
 * generation, and the same from a cached object (kcr_obj_status_write);
 * a malformed text is the parser's KCR_EPARSE, nothing sent. */
static void a_write_from_text_is_the_write_from_its_tree(void **state)
{
  static const char *const statuses[] = {
      "",
      ",\"status\":{}",
      ",\"status\":{\"conditions\":{}}",
      ",\"status\":{\"conditions\":\"no list\",\"observedGeneration\":\"2\"}",
      ",\"status\":\"not an object\"",
      ",\"status\":{\"observedGeneration\":1,\"conditions\":[{\"type\":\"Ready\","
      "\"status\":\"True\",\"observedGeneration\":1,\"lastTransitionTime\":\"" LTT
      "\",\"reason\":\"R\",\"message\":\"m\"},{\"type\":\"Other\",\"status\":"
      "\"True\",\"lastTransitionTime\":\"" LTT "\",\"reason\":\"O\",\"message\":\"\"}]}",
      ",\"status\":{\"observedGeneration\":2,\"conditions\":[{\"type\":\"Ready\","
      "\"status\":\"True\",\"observedGeneration\":2,\"lastTransitionTime\":\"" LTT
      "\",\"reason\":\"R\",\"message\":\"m\"},{\"type\":\"Installed\",\"status\":"
      "\"True\",\"observedGeneration\":2,\"lastTransitionTime\":\"" LTT
      "\",\"reason\":\"I\",\"message\":\"\"}]}",
      ",\"status\":{\"observedGeneration\":1,\"conditions\":[{\"type\":\"Ready\","
      "\"status\":\"False\",\"reason\":\"R\",\"message\":\"m\",\"extra\":1}]}",
      ",\"status\":{\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\","
      "\"lastTransitionTime\":5,\"reason\":\"Old\",\"message\":\"say \\\"x\\\"\"}]}",
      ",\"status\":{\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\","
      "\"lastTransitionTime\":5.0,\"reason\":\"R\",\"message\":\"m\"}]}",
      ",\"status\":{\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\","
      "\"lastTransitionTime\":\"" LTT "\",\"reason\":\"RR\",\"message\":\"m\","
      "\"observedGeneration\":1},{\"type\":\"Installed\",\"status\":\"True\","
      "\"reason\":\"I\",\"message\":\"x\",\"observedGeneration\":2}]}",
      ",\"status\":{\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\","
      "\"lastTransitionTime\":null,\"reason\":\"R\",\"message\":null,"
      "\"observedGeneration\":null}]}",
      ",\"status\":{\"observedGeneration\":1.0,\"conditions\":[{\"type\":\"Ready\","
      "\"status\":\"True\",\"observedGeneration\":1.0,\"reason\":\"R\","
      "\"message\":\"m\"}]}",
      ",\"status\":{\"observedGeneration\":1000000000000000001,\"conditions\":[{"
      "\"type\":\"Ready\",\"status\":\"True\",\"observedGeneration\":\"1\","
      "\"reason\":\"R\",\"message\":\"m\"}]}",
      ",\"status\":{\"conditions\":[7,{\"status\":\"True\"},{\"type\":null},{"
      "\"type\":\"Ready\",\"type\":\"Other\",\"status\":\"True\",\"status\":\"False\","
      "\"reason\":\"R\",\"message\":\"m\",\"observedGeneration\":2},{\"type\":"
      "\"Ready\",\"status\":\"False\"}]}",
      ",\"status\":{\"conditions\":[{\"type\":\"Re\\u0061dy\",\"status\":\"True\","
      "\"reason\":\"R\",\"message\":\"m\",\"observedGeneration\":1}]}",
      ",\"status\":{\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\","
      "\"reason\":\"R\",\"message\":\"m\",\"observedGeneration\":-1}],"
      "\"observedGeneration\":-0}",
      ",\"st\\u0061tus\":{\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\","
      "\"lastTransitionTime\":\"" LTT "\",\"reason\":\"R\",\"message\":\"m\","
      "\"observedGeneration\":1}],\"observedGeneration\":1}",
      /* names written twice: the last counts, the text's way and the tree's */
      ",\"status\":{\"conditions\":[],\"conditions\":[{\"type\":\"Ready\","
      "\"status\":\"True\",\"reason\":\"R\",\"message\":\"m\",\"observedGeneration\":1}]"
      "}",
      ",\"status\":{\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\","
      "\"reason\":\"R\",\"message\":\"m\",\"observedGeneration\":1}]},\"status\":{}",
      ",\"status\":{\"conditions\":[{\"type\":\"Ready\",\"status\":\"False\","
      "\"reason\":\"R\",\"message\":\"m\",\"observedGeneration\":1,\"status\":\"True\","
      "\"reason\":\"S\",\"lastTransitionTime\":\"" LTT "\"}],"
      "\"observedGeneration\":3,\"observedGeneration\":1}",
      /* what the parser takes and the check does not (a leading zero) */
      ",\"status\":{\"observedGeneration\":01,\"conditions\":[{\"type\":\"Ready\","
      "\"status\":\"False\",\"reason\":\"R\",\"message\":\"m\",\"observedGeneration\":2,"
      "\"lastTransitionTime\":\"" LTT "\"}]}",
  };
  static const char *const metas[] = {
      "\"name\":\"w\",\"namespace\":\"ns\",\"uid\":\"u\",\"resourceVersion\":\"7\"",
      "\"name\":\"w\"",
      "\"name\":\"w\\u0031\",\"namespace\":\"n\\\"s\",\"uid\":7",
      "\"n\\u0061me\":\"a\",\"name\":\"b\",\"namespace\":\"ns\"",
  };
  const struct kcr_cond(*sets)[2] = desired_sets;
  const size_t *nconds = desired_n;
  static const int64_t gens[] = {0, 1, 2};
  for(size_t mi = 0; mi < sizeof(metas) / sizeof(metas[0]); mi++)
    for(size_t si = 0; si < sizeof(statuses) / sizeof(statuses[0]); si++)
      for(size_t di = 0; di < DESIRED_ALL; di++)
        for(size_t gi = 0; gi < 3; gi++) {
          char text[1024], what[96];
          struct api at = {text}, ab = {text}, ao = {text};
          kcr_client *ct = twire_client(one_object, &at),
                     *cb = twire_client(one_object, &ab),
                     *co = twire_client(one_object, &ao);
          kcr_status_writer *wt = writer_for(ct, KCR_STATUS_APPLY),
                            *wb = writer_for(cb, KCR_STATUS_APPLY),
                            *wo = writer_for(co, KCR_STATUS_APPLY);
          kcr_obj *o = NULL;
          struct kcr_status_desired d = {
              .conds = sets[di], .n = nconds[di], .observed_generation = gens[gi]};
          enum kcr_write_result rt, rb;
          kcr_err et, eb;
          cJSON *obj;
          time_t t0, t1;

          snprintf(text, sizeof(text),
                   "{\"apiVersion\":\"test.kcr.io/v1\",\"kind\":\"Widget\",\"metadata\":"
                   "{%s}%s}",
                   metas[mi], statuses[si]);
          snprintf(what, sizeof(what), "meta %zu, status %zu, set %zu, generation %lld",
                   mi, si, di, (long long)gens[gi]);
          obj = json(text);
          t0 = time(NULL) - 1;
          et = kcr_status_write(wt, obj, &d, &rt, NULL);
          eb = kcr_status_write_text(wb, text, strlen(text), &d, &rb, NULL);
          t1 = time(NULL) + 1;
          if(et != eb || rt != rb || at.writes != ab.writes)
            fail_msg("%s: the tree gives %s/%d/%d writes, the text %s/%d/%d writes", what,
                     kcr_err_name(et), (int)rt, at.writes, kcr_err_name(eb), (int)rb,
                     ab.writes);
          if(at.writes) {
            char *bt = now_as_word(at.body, t0, t1), *bb = now_as_word(ab.body, t0, t1);
            if(strcmp(bt, bb))
              fail_msg("%s: the tree sends\n  %s\nthe text\n  %s", what, bt, bb);
            free(bt);
            free(bb);
          }
          /* the same text cached (a name it has): followed, not checked */
          if(!kcr__obj_from_text(text, strlen(text), 0, NULL, NULL, 0, &o, NULL)) {
            t0 = time(NULL) - 1;
            eb = kcr_obj_status_write(wo, o, &d, &rb, NULL);
            t1 = time(NULL) + 1;
            if(et != eb || rt != rb || at.writes != ao.writes)
              fail_msg("%s: the tree gives %s/%d/%d writes, the cached object "
                       "%s/%d/%d writes",
                       what, kcr_err_name(et), (int)rt, at.writes, kcr_err_name(eb),
                       (int)rb, ao.writes);
            if(at.writes) {
              char *bt = now_as_word(at.body, t0 - 2, t1),
                   *bo = now_as_word(ao.body, t0 - 2, t1);
              if(strcmp(bt, bo))
                fail_msg("%s: the tree sends\n  %s\nthe cached object\n  %s", what, bt,
                         bo);
              free(bt);
              free(bo);
            }
            kcr_obj_unref(o);
          }
          cJSON_Delete(obj);
          kcr_status_writer_free(wt);
          kcr_status_writer_free(wb);
          kcr_status_writer_free(wo);
          kcr_client_free(ct);
          kcr_client_free(cb);
          kcr_client_free(co);
          api_reset(&at);
          api_reset(&ab);
          api_reset(&ao);
        }
  /* Read as text, an unchanged status costs no allocation, and a write
   * fewer than the tree alone (the parse and kcr_status_write): none of a
   * tree. */
  for(int flip = 0; flip < 2; flip++) {
    char text[1024];
    struct api a = {text};
    kcr_client *c = twire_client(one_object, &a);
    kcr_status_writer *w = writer_for(c, KCR_STATUS_APPLY);
    const struct kcr_cond conds[] = {{"Ready", flip ? "False" : "True", "R", "m", 2, 0},
                                     {"Installed", "True", "I", "", 2, 0}};
    struct kcr_status_desired d = {.conds = conds, .n = 2, .observed_generation = 2};
    enum kcr_write_result res;
    long by_text, by_tree;
    cJSON *obj;

    snprintf(
        text, sizeof(text),
        "{\"apiVersion\":\"test.kcr.io/v1\",\"kind\":\"Widget\",\"metadata\":{%s}%s}",
        metas[0], statuses[6]); /* answered at its own version: compared as is */
    tfail_reset();
    assert_int_equal(KCR_OK,
                     kcr_status_write_text(w, text, strlen(text), &d, &res, NULL));
    assert_int_equal(flip ? KCR_WRITE_WRITTEN : KCR_WRITE_SKIPPED, res);
    by_text = tfail_count();
    tfail_reset();
    obj = json(text);
    assert_int_equal(KCR_OK, kcr_status_write(w, obj, &d, &res, NULL));
    by_tree = tfail_count();
    if(flip ? by_text >= by_tree - 30 : by_text != 0)
      fail_msg("%ld allocations from text, %ld from the tree", by_text, by_tree);
    cJSON_Delete(obj);
    kcr_status_writer_free(w);
    kcr_client_free(c);
    api_reset(&a);
  }
  /* After its own write answered at resourceVersion 7 (with each status),
   * an object at 6 (with each status) is older: text, cached object and
   * tree alike compare with what the write answered - the same result,
   * writes and body. Way 0 the tree, 1 the text, 2 the cached object. */
  for(size_t ai = 0; ai < sizeof(statuses) / sizeof(statuses[0]); ai++)
    for(size_t oi = 0; oi < sizeof(statuses) / sizeof(statuses[0]); oi++)
      for(size_t di = 0; di < 3; di++) {
        static const char first[] = "{\"metadata\":{\"name\":\"w\",\"namespace\":\"ns\","
                                    "\"uid\":\"u\",\"resourceVersion\":\"5\"}}";
        char answer[1024], text6[1024], what[96];
        struct api a[3] = {{answer}, {answer}, {answer}};
        struct kcr_status_desired d = {
            .conds = desired_sets[di], .n = desired_n[di], .observed_generation = 2};
        enum kcr_write_result r[3];
        kcr_err e[3];
        char *body[3] = {NULL};
        time_t t0, t1;

        snprintf(answer, sizeof(answer),
                 "{\"apiVersion\":\"test.kcr.io/v1\",\"kind\":\"Widget\",\"metadata\":"
                 "{%s}%s}",
                 metas[0], statuses[ai]);
        snprintf(text6, sizeof(text6),
                 "{\"apiVersion\":\"test.kcr.io/v1\",\"kind\":\"Widget\",\"metadata\":"
                 "{\"name\":\"w\",\"namespace\":\"ns\",\"uid\":\"u\","
                 "\"resourceVersion\":\"6\"}%s}",
                 statuses[oi]);
        snprintf(what, sizeof(what), "answered status %zu, object status %zu, set %zu",
                 ai, oi, di);
        t0 = time(NULL) - 1;
        for(int way = 0; way < 3; way++) {
          kcr_client *c = twire_client(one_object, &a[way]);
          kcr_status_writer *w = writer_for(c, KCR_STATUS_APPLY);
          for(int step = 0; step < 2; step++) { /* first no status, answered at 7 */
            const char *t = step ? text6 : first;
            cJSON *obj = NULL;
            kcr_obj *o = NULL;
            if(way == 0) {
              obj = json(t);
              e[way] = kcr_status_write(w, obj, &d, &r[way], NULL);
            } else if(way == 1) {
              e[way] = kcr_status_write_text(w, t, strlen(t), &d, &r[way], NULL);
            } else {
              assert_int_equal(
                  KCR_OK, kcr__obj_from_text(t, strlen(t), 0, NULL, NULL, 0, &o, NULL));
              e[way] = kcr_obj_status_write(w, o, &d, &r[way], NULL);
            }
            cJSON_Delete(obj);
            kcr_obj_unref(o);
            if(!step) {
              assert_int_equal(KCR_OK, e[way]);
              assert_int_equal(KCR_WRITE_WRITTEN, r[way]);
            }
          }
          body[way] = a[way].body ? strdup(a[way].body) : NULL;
          kcr_status_writer_free(w);
          kcr_client_free(c);
        }
        t1 = time(NULL) + 1;
        for(int way = 1; way < 3; way++) {
          if(e[0] != e[way] || r[0] != r[way] || a[0].writes != a[way].writes)
            fail_msg("%s: the tree gives %s/%d/%d writes, way %d %s/%d/%d writes", what,
                     kcr_err_name(e[0]), (int)r[0], a[0].writes, way,
                     kcr_err_name(e[way]), (int)r[way], a[way].writes);
          if(a[0].writes > 1) {
            char *bt = now_as_word(body[0], t0, t1), *bw = now_as_word(body[way], t0, t1);
            if(strcmp(bt, bw))
              fail_msg("%s: the tree sends\n  %s\nway %d\n  %s", what, bt, way, bw);
            free(bt);
            free(bw);
          }
        }
        for(int way = 0; way < 3; way++) {
          free(body[way]);
          api_reset(&a[way]);
        }
      }
  /* Malformed: the parser says so; nothing is sent. */
  {
    static const char bad[] = "{\"metadata\":{\"name\":\"w\"},\"status\":{";
    struct api a = {bad};
    kcr_client *c = twire_client(one_object, &a);
    kcr_status_writer *w = writer_for(c, KCR_STATUS_APPLY);
    struct kcr_cond cond = {"Ready", "True", "R", "m", 1, 0};
    struct kcr_status_desired d = {.conds = &cond, .n = 1};
    struct kcr_errinfo ei = KCR_ERRINFO_INIT;
    enum kcr_write_result res;

    assert_int_equal(KCR_EPARSE,
                     kcr_status_write_text(w, bad, strlen(bad), &d, &res, &ei));
    assert_int_equal(KCR_WRITE_FAILED, res);
    assert_int_equal(0, a.writes);
    assert_int_equal(KCR_EINVAL, kcr_status_write_text(w, NULL, 0, &d, &res, NULL));
    assert_int_equal(KCR_EINVAL, kcr_obj_status_write(w, NULL, &d, &res, &ei));
    assert_string_equal("kcr_obj_status_write: no object", ei.message);
    assert_int_equal(KCR_WRITE_FAILED, res);
    kcr_errinfo_cleanup(&ei);
    kcr_status_writer_free(w);
    kcr_client_free(c);
  }
  (void)state;
}

/* Another writer's member in one of our conditions is not sent (an apply
 * with force would take it over), with extra status fields (the merged
 * list is sent) and without (written as text). */
static void an_apply_sends_only_condition_fields(void **state)
{
  static const char object[] =
      "{\"apiVersion\":\"test.kcr.io/v1\",\"kind\":\"Widget\",\"metadata\":{\"name\":"
      "\"w\",\"namespace\":\"ns\"},\"status\":{\"conditions\":[{\"type\":\"Ready\","
      "\"status\":\"True\",\"lastTransitionTime\":\"" LTT "\",\"reason\":\"Old\","
      "\"message\":\"m\",\"theirs\":{\"x\":1}}]}}";
  const struct kcr_cond c = {"Ready", "True", "R", "m", 1, 0};
  cJSON *extra = cJSON_CreateObject();

  assert_non_null(kcr_json_add_int(extra, "replicas", 3));
  for(int with_extra = 0; with_extra < 2; with_extra++) {
    struct api a = {object};
    kcr_client *cl = twire_client(one_object, &a);
    kcr_status_writer *w = writer_for(cl, KCR_STATUS_APPLY);
    struct kcr_status_desired d = {
        .conds = &c, .n = 1, .extra = with_extra ? extra : NULL};
    enum kcr_write_result res;
    cJSON *obj = json(object), *body;
    const cJSON *item;

    assert_int_equal(KCR_OK, kcr_status_write(w, obj, &d, &res, NULL));
    assert_int_equal(KCR_WRITE_WRITTEN, res);
    body = json(a.body);
    item = kcr_cond_find(kcr_json_at(body, "/status/conditions"), "Ready");
    assert_non_null(item);
    assert_null(cJSON_GetObjectItemCaseSensitive(item, "theirs"));
    assert_string_equal(LTT, str_at(item, "/lastTransitionTime")); /* status kept */
    assert_string_equal("R", str_at(item, "/reason"));
    assert_int_equal(with_extra ? 3 : -1, kcr_json_int(body, "/status/replicas", -1));
    cJSON_Delete(body);
    cJSON_Delete(obj);
    kcr_status_writer_free(w);
    kcr_client_free(cl);
    api_reset(&a);
  }
  cJSON_Delete(extra);
  (void)state;
}

/* A desired status naming a type twice is refused, naming it; nothing is
 * merged or sent. */
static void a_type_named_twice_is_refused(void **state)
{
  static const enum kcr_status_mode modes[] = {KCR_STATUS_APPLY, KCR_STATUS_MERGE_PATCH,
                                               KCR_STATUS_UPDATE_RETRY};
  const struct kcr_cond twice[] = {{"Ready", "True", "R", "m", 1, 0},
                                   {"Other", "True", "O", "", 1, 0},
                                   {"Ready", "False", "R", "m", 1, 0}};
  struct kcr_status_desired d = {.conds = twice, .n = 3};
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  cJSON *obj = json(widget), *conds = (cJSON *)1;
  bool changed = true;

  assert_int_equal(KCR_EINVALID, kcr_status_merge(obj, &d, 1, &conds, &changed, &ei));
  assert_null(conds);
  assert_false(changed);
  assert_non_null(strstr(ei.message, "Ready named twice (conds[0] and conds[2])"));
  kcr_errinfo_cleanup(&ei);
  for(size_t i = 0; i < 3; i++) {
    struct api a = {widget};
    kcr_client *c = twire_client(one_object, &a);
    kcr_status_writer *w = writer_for(c, modes[i]);
    enum kcr_write_result res = KCR_WRITE_SKIPPED;
    assert_int_equal(KCR_EINVALID, kcr_status_write(w, obj, &d, &res, &ei));
    assert_int_equal(KCR_WRITE_FAILED, res);
    assert_int_equal(0, a.writes + a.gets);
    assert_non_null(strstr(ei.message, "Ready named twice"));
    kcr_errinfo_cleanup(&ei);
    kcr_status_writer_free(w);
    kcr_client_free(c);
    api_reset(&a);
  }
  cJSON_Delete(obj);
  (void)state;
}

/* ---- status writes under allocation failure ---- */

struct write_case {
  struct api a;
  kcr_client *c;
  kcr_status_writer *w;
  enum kcr_status_mode mode;
  char *want;
};

/* Either an error (FAILED) or the whole status sent; never a part. */
static bool write_all_or_nothing(void *ud)
{
  struct write_case *t = ud;
  struct kcr_cond cond = ready_cond();
  struct kcr_status_desired d = {
      .conds = &cond, .n = 1, .observed_generation = 9007199254740993LL};
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  enum kcr_write_result res = KCR_WRITE_SKIPPED;
  cJSON *obj;
  kcr_err rc;
  bool ok;

  tfail_exempt(true);
  obj = json(widget);
  tfail_exempt(false);
  rc = kcr_status_write(t->w, obj, &d, &res, &ei);
  ok = (t->a.writes == 0 || same_json(t->want, t->a.body)) &&
       (rc ? res == KCR_WRITE_FAILED : res == KCR_WRITE_WRITTEN && t->a.writes == 1);
  if(!ok)
    print_error("rc %s res %d writes %d body %s\n", kcr_err_name(rc), (int)res,
                t->a.writes, t->a.body ? t->a.body : "-");
  tfail_exempt(true);
  cJSON_Delete(obj);
  api_reset(&t->a);
  tfail_exempt(false);
  kcr_errinfo_cleanup(&ei);
  return ok;
}

static void torture_write(enum kcr_status_mode mode, const char *name)
{
  struct write_case t = {{widget}};
  t.c = twire_client(one_object, &t.a);
  t.w = writer_for(t.c, mode);
  t.want = want_body(mode);
  assert_true(write_all_or_nothing(&t)); /* warm up: lazily made client state */
  tfail_torture(name, write_all_or_nothing, &t);
  free(t.want);
  kcr_status_writer_free(t.w);
  kcr_client_free(t.c);
}

static void status_write_sends_all_or_nothing(void **state)
{
  torture_write(KCR_STATUS_APPLY, "kcr_status_write (apply)");
  torture_write(KCR_STATUS_MERGE_PATCH, "kcr_status_write (merge patch)");
  torture_write(KCR_STATUS_UPDATE_RETRY, "kcr_status_write (update)");
}

static bool merge_all_or_nothing(void *ud)
{
  const char *want = ud;
  struct kcr_cond cond = ready_cond();
  struct kcr_status_desired d = {
      .conds = &cond, .n = 1, .observed_generation = 9007199254740993LL};
  cJSON *obj, *conds = (cJSON *)1;
  bool changed = true, ok;
  char *text = NULL;
  kcr_err rc;

  tfail_exempt(true);
  obj = json(widget);
  tfail_exempt(false);
  rc = kcr_status_merge(obj, &d, 1795946400, &conds, &changed, NULL);
  tfail_exempt(true);
  ok = rc ? conds == NULL && !changed
          : changed && (text = kcr_json_to_text(conds)) && same_json(want, text);
  free(text);
  cJSON_Delete(conds);
  cJSON_Delete(obj);
  tfail_exempt(false);
  return ok;
}

static void status_merge_is_all_or_nothing(void **state)
{
  char *want = NULL;
  assert_true(asprintf(&want, "[%s,%s]", other, ready) > 0);
  tfail_torture("kcr_status_merge", merge_all_or_nothing, want);
  free(want);
}

/* ---- finalizers: the patch never loses its guard ---- */

struct fin_case {
  struct api a;
  kcr_client *c;
  bool add;
  const char *want; /* the one patch acceptable */
};

static bool finalizer_guarded(void *ud)
{
  struct fin_case *t = ud;
  struct kcr_ref ref = {&widgets, "ns", "w"};
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  bool changed = false, ok;
  kcr_err rc = t->add ? kcr_finalizer_add(t->c, &ref, "test.kcr.io/f", &changed, &ei)
                      : kcr_finalizer_remove(t->c, &ref, "test.kcr.io/f", &changed, &ei);

  /* Anything sent is the whole patch, its test op first. */
  ok = t->a.writes == 0 || (!strcmp(t->a.method, "PATCH") &&
                            !strcmp(t->a.ctype, "application/json-patch+json") &&
                            same_json(t->want, t->a.body));
  ok = ok && (rc ? !changed : changed && t->a.writes == 1);
  if(!ok)
    print_error("rc %s changed %d writes %d patch %s\n", kcr_err_name(rc), changed,
                t->a.writes, t->a.body ? t->a.body : "-");
  tfail_exempt(true);
  api_reset(&t->a);
  tfail_exempt(false);
  kcr_errinfo_cleanup(&ei);
  return ok;
}

static void torture_finalizer(const char *name, const char *object, bool add,
                              const char *want)
{
  struct fin_case t = {{object}, NULL, add, want};
  t.c = twire_client(one_object, &t.a);
  assert_true(finalizer_guarded(&t)); /* warm up, and the plain case */
  tfail_torture(name, finalizer_guarded, &t);
  kcr_client_free(t.c);
}

static void finalizer_patches_always_carry_their_test(void **state)
{
  torture_finalizer(
      "kcr_finalizer_add (to a list)",
      "{\"metadata\":{\"name\":\"w\",\"resourceVersion\":\"7\",\"finalizers\":[\"x\"]}}",
      true,
      "[{\"op\":\"test\",\"path\":\"/metadata/finalizers\",\"value\":[\"x\"]},"
      "{\"op\":\"add\",\"path\":\"/metadata/finalizers/-\",\"value\":\"test.kcr.io/"
      "f\"}]");
  torture_finalizer(
      "kcr_finalizer_add (first)",
      "{\"metadata\":{\"name\":\"w\",\"resourceVersion\":\"7\"}}", true,
      "[{\"op\":\"test\",\"path\":\"/metadata/resourceVersion\",\"value\":\"7\"},"
      "{\"op\":\"add\",\"path\":\"/metadata/finalizers\",\"value\":[\"test.kcr.io/"
      "f\"]}]");
  torture_finalizer("kcr_finalizer_remove",
                    "{\"metadata\":{\"name\":\"w\",\"resourceVersion\":\"7\","
                    "\"finalizers\":[\"x\",\"test.kcr.io/f\",\"y\"]}}",
                    false,
                    "[{\"op\":\"test\",\"path\":\"/metadata/finalizers\",\"value\":"
                    "[\"x\",\"test.kcr.io/f\",\"y\"]},"
                    "{\"op\":\"remove\",\"path\":\"/metadata/finalizers/1\"}]");
}

/* Without a resourceVersion there is nothing to guard the first finalizer
 * with: refused, nothing sent. */
static void finalizer_without_a_guard_is_not_sent(void **state)
{
  struct api a = {"{\"metadata\":{\"name\":\"w\"}}"};
  kcr_client *c = twire_client(one_object, &a);
  struct kcr_ref ref = {&widgets, "ns", "w"};
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  bool changed = true;

  assert_int_equal(KCR_EPARSE,
                   kcr_finalizer_add(c, &ref, "test.kcr.io/f", &changed, &ei));
  assert_false(changed);
  assert_int_equal(0, a.writes);
  assert_non_null(strstr(ei.message, "resourceVersion"));
  kcr_errinfo_cleanup(&ei);
  kcr_client_free(c);
  api_reset(&a);
}

/* ---- owner references: all or nothing ---- */

struct owner_case {
  const char *child, *want;
};

#define OWNER                                                                            \
  "{\"apiVersion\":\"test.kcr.io/v1\",\"kind\":\"Widget\",\"metadata\":{\"name\":\"p\"," \
  "\"namespace\":\"ns\",\"uid\":\"u-1\"}}"
#define CTL_REF                                                                          \
  "{\"apiVersion\":\"test.kcr.io/"                                                       \
  "v1\",\"kind\":\"Widget\",\"name\":\"p\",\"uid\":\"u-1\","                             \
  "\"controller\":true,\"blockOwnerDeletion\":true}"

static bool owner_all_or_nothing(void *ud)
{
  const struct owner_case *oc = ud;
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  cJSON *child, *owner, *before;
  char *text = NULL;
  kcr_err rc;
  bool ok;

  tfail_exempt(true);
  child = json(oc->child);
  before = json(oc->child);
  owner = json(OWNER);
  tfail_exempt(false);
  rc = kcr_owner_set_controller(child, owner, &ei);
  tfail_exempt(true);
  ok = rc ? rc == KCR_ENOMEM && cJSON_Compare(child, before, 1) /* untouched */
          : (text = kcr_json_to_text(child)) && same_json(oc->want, text);
  if(!ok)
    print_error("rc %s child %s\n", kcr_err_name(rc), text ? text : "-");
  free(text);
  cJSON_Delete(child);
  cJSON_Delete(before);
  cJSON_Delete(owner);
  tfail_exempt(false);
  kcr_errinfo_cleanup(&ei);
  return ok;
}

static void owner_set_controller_is_all_or_nothing(void **state)
{
  static const struct owner_case cases[] = {
      {"{\"metadata\":{\"name\":\"c\",\"namespace\":\"ns\"}}",
       "{\"metadata\":{\"name\":\"c\",\"namespace\":\"ns\",\"ownerReferences\":[" CTL_REF
       "]}}"},
      /* a non-controller reference to the same owner is upgraded in place */
      {"{\"metadata\":{\"name\":\"c\",\"namespace\":\"ns\",\"ownerReferences\":[{"
       "\"apiVersion\":\"test.kcr.io/v1\",\"kind\":\"Widget\",\"name\":\"p\",\"uid\":"
       "\"u-1\",\"controller\":false}]}}",
       "{\"metadata\":{\"name\":\"c\",\"namespace\":\"ns\",\"ownerReferences\":[" CTL_REF
       "]}}"},
      /* another owner's reference stays */
      {"{\"metadata\":{\"name\":\"c\",\"namespace\":\"ns\",\"ownerReferences\":[{"
       "\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"name\":\"o\",\"uid\":\"u-2\"}]}}",
       "{\"metadata\":{\"name\":\"c\",\"namespace\":\"ns\",\"ownerReferences\":[{"
       "\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"name\":\"o\",\"uid\":\"u-2\"}"
       "," CTL_REF "]}}"},
      /* ownerReferences of the wrong type is replaced */
      {"{\"metadata\":{\"name\":\"c\",\"namespace\":\"ns\",\"ownerReferences\":null}}",
       "{\"metadata\":{\"name\":\"c\",\"namespace\":\"ns\",\"ownerReferences\":[" CTL_REF
       "]}}"},
  };
  for(size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
    tfail_torture("kcr_owner_set_controller", owner_all_or_nothing, (void *)&cases[i]);
}

/* ---- retry timing ---- */

/* A retry policy with a NaN jitter or an absurd factor must not turn into
 * an undefined float-to-integer conversion of the sleep. */
static kcr_err conflict_once(struct twire_call *call, void *ud)
{
  int *puts = ud;
  if(!strcmp(call->req->method, "GET"))
    return twire_reply(call, 200,
                       "{\"metadata\":{\"name\":\"w\",\"resourceVersion\":\"1\"}}");
  if((*puts)++ == 0)
    return twire_reply(call, 409, "%s", twire_status_json(409, "Conflict"));
  return twire_reply(call, 200, "{\"metadata\":{\"name\":\"w\"}}");
}

static kcr_err touch(cJSON *fresh, bool *changed, void *ud)
{
  *changed = true;
  return kcr_json_set_str(fresh, "/metadata/labels/touched", "yes");
}

static void retry_timing_survives_nonsense_policies(void **state)
{
  const struct kcr_retry policies[] = {
      {2, 10, 1.0, NAN}, {2, 10, NAN, 0.1}, {2, 10, -3.0, -1.0}, {2, 0, INFINITY, 0.1}};
  for(size_t i = 0; i < sizeof(policies) / sizeof(policies[0]); i++) {
    int puts = 0;
    kcr_client *c = twire_client(conflict_once, &puts);
    struct kcr_ref ref = {&widgets, "ns", "w"};
    enum kcr_write_result res;
    int conflicts = 0;
    assert_int_equal(
        KCR_OK,
        kcr_update_retry(c, &ref, &(struct kcr_update_retry_opts){.retry = policies[i]},
                         touch, NULL, &res, &conflicts, NULL));
    assert_int_equal(KCR_WRITE_WRITTEN, res);
    assert_int_equal(1, conflicts);
    kcr_client_free(c);
  }
}

static void writer_and_retry_arguments_are_checked(void **state)
{
  int puts = 0;
  kcr_client *c = twire_client(conflict_once, &puts);
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  struct kcr_status_writer_opts o = {
      .client = c, .gvr = &widgets, .field_manager = "m", .mode = KCR_STATUS_APPLY};
  kcr_status_writer *w = (kcr_status_writer *)1;
  enum kcr_write_result res = KCR_WRITE_WRITTEN;

  assert_int_equal(KCR_EINVAL, kcr_status_writer_new(&o, &w, &ei)); /* apply: no kind */
  assert_null(w);
  assert_non_null(strstr(ei.message, "api_version and kind"));
  o.mode = (enum kcr_status_mode)7;
  assert_int_equal(KCR_EINVAL, kcr_status_writer_new(&o, &w, &ei));
  assert_non_null(strstr(ei.message, "unknown mode"));
  o.mode = KCR_STATUS_MERGE_PATCH;
  o.field_manager = "";
  assert_int_equal(KCR_EINVAL, kcr_status_writer_new(&o, &w, &ei));
  assert_int_equal(KCR_EINVAL, kcr_update_retry(c, &(struct kcr_ref){&widgets, "ns", "w"},
                                                NULL, NULL, NULL, &res, NULL, &ei));
  assert_int_equal(KCR_WRITE_FAILED, res);
  assert_int_equal(KCR_EINVAL, kcr_update_retry(c, &(struct kcr_ref){&widgets, "ns"},
                                                NULL, touch, NULL, &res, NULL, &ei));
  assert_int_equal(0, puts); /* nothing was written */
  kcr_errinfo_cleanup(&ei);
  kcr_client_free(c);
}

int main(void)
{
  tfail_init();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(writers_send_int64_fields_exactly),
      cmocka_unit_test(merge_compares_generations_exactly),
      cmocka_unit_test(an_apply_sends_what_the_merge_gives_for_our_types),
      cmocka_unit_test(a_write_from_text_is_the_write_from_its_tree),
      cmocka_unit_test(a_type_named_twice_is_refused),
      cmocka_unit_test(an_apply_sends_only_condition_fields),
      cmocka_unit_test(status_write_sends_all_or_nothing),
      cmocka_unit_test(status_merge_is_all_or_nothing),
      cmocka_unit_test(finalizer_patches_always_carry_their_test),
      cmocka_unit_test(finalizer_without_a_guard_is_not_sent),
      cmocka_unit_test(owner_set_controller_is_all_or_nothing),
      cmocka_unit_test(retry_timing_survives_nonsense_policies),
      cmocka_unit_test(writer_and_retry_arguments_are_checked),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
