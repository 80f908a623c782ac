/* Conditions: apimachinery's SetStatusCondition & co. and ValidateCondition,
 * as tables of vectors. JSON in the tables uses ' for " to stay readable. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h> /* after the headers it needs */

#include "kcr/cond.h"
#include "kcr/json.h"
#include "kcr/time.h"

#define T_OLD    "2026-11-29T10:00:00Z" /* lastTransitionTime already stored */
#define T_CALLER "2026-11-29T11:00:00Z" /* a time the caller passes in */
#define T_NOW    "2026-11-29T12:00:00Z" /* the clock */

/* ---- helpers ---- */

static time_t tm(const char *s)
{
  time_t t = 0;
  if(s)
    assert_int_equal(KCR_OK, kcr_time_parse(s, &t));
  return t;
}

/* Parses JSON written with ' for ". */
static cJSON *sq(const char *text)
{
  char *s = strdup(text);
  cJSON *j;
  assert_non_null(s);
  for(char *p = s; *p; p++)
    if(*p == '\'')
      *p = '"';
  if(kcr_json_parse(s, strlen(s), &j, NULL)) /* as the client parses */
    fail_msg("test vector is not JSON: %s", text);
  free(s);
  return j;
}

/* Structural equality: object key order is irrelevant, array order is not. */
static void assert_json(const char *expect, const cJSON *got, const char *what)
{
  cJSON *e = sq(expect);
  if(!cJSON_Compare(e, got, 1)) {
    char *pe = cJSON_PrintUnformatted(e), *pg = cJSON_PrintUnformatted(got);
    print_error("%s\n  expected %s\n  got      %s\n", what, pe, pg);
    free(pe);
    free(pg);
    cJSON_Delete(e);
    fail();
  }
  cJSON_Delete(e);
}

static char *repeat(char c, size_t n)
{
  char *s = malloc(n + 1);
  assert_non_null(s);
  memset(s, c, n);
  s[n] = '\0';
  return s;
}

#define COND(ty, st, re, me, og)                                                         \
  {                                                                                      \
    .type = ty, .status = st, .reason = re, .message = me, .observed_generation = og     \
  }

/* ---- kcr_cond_set: the vector table ---- */

struct set_vec {
  const char *name;
  const char *initial; /* the array before */
  struct kcr_cond in;  /* last_transition_time comes from in_ltt */
  const char *in_ltt;  /* NULL: zero (unset) */
  const char *now;
  const char *expect; /* the array after */
  bool changed;
  kcr_err rc;
};

#define READY_OLD(st, re, me)                                                            \
  "{'type':'Ready','status':'" st "','lastTransitionTime':'" T_OLD "','reason':'" re     \
  "','message':'" me "'}"
#define READY_OLD_G(st, re, me, g)                                                       \
  "{'type':'Ready','status':'" st "','observedGeneration':" g                            \
  ",'lastTransitionTime':'" T_OLD "','reason':'" re "','message':'" me "'}"

static const struct set_vec set_vecs[] = {
    {"new condition, zero time -> now", "[]", COND("Ready", "True", "Installed", "", 0),
     NULL, T_NOW,
     "[{'type':'Ready','status':'True','lastTransitionTime':'" T_NOW
     "','reason':'Installed','message':''}]",
     true},
    {"new condition, explicit time -> kept", "[]",
     COND("Ready", "False", "ChildMissing", "vfm absent", 2), T_CALLER, T_NOW,
     "[{'type':'Ready','status':'False','observedGeneration':2,'lastTransitionTime':"
     "'" T_CALLER "','reason':'ChildMissing','message':'vfm absent'}]",
     true},
    {"new condition appended after the others (order kept)",
     "[" READY_OLD("True", "Installed", "") "]",
     COND("Degraded", "False", "AsExpected", "", 1), NULL, T_NOW,
     "[" READY_OLD("True", "Installed",
                   "") ",{'type':'Degraded','status':'False',"
                       "'observedGeneration':1,'lastTransitionTime':'" T_NOW
                       "','reason':'AsExpected','message':''}]",
     true},
    {"status flip, zero time -> now", "[" READY_OLD("False", "Pending", "") "]",
     COND("Ready", "True", "Pending", "", 0), NULL, T_NOW,
     "[{'type':'Ready','status':'True','lastTransitionTime':'" T_NOW
     "','reason':'Pending','message':''}]",
     true},
    {"status flip, caller time -> caller's", "[" READY_OLD("False", "Pending", "") "]",
     COND("Ready", "True", "Pending", "", 0), T_CALLER, T_NOW,
     "[{'type':'Ready','status':'True','lastTransitionTime':'" T_CALLER
     "','reason':'Pending','message':''}]",
     true},
    {"Unknown -> True is a flip", "[" READY_OLD("Unknown", "Reconciling", "") "]",
     COND("Ready", "True", "Installed", "all good", 0), NULL, T_NOW,
     "[{'type':'Ready','status':'True','lastTransitionTime':'" T_NOW
     "','reason':'Installed','message':'all good'}]",
     true},
    {"same status, new reason -> changed, time kept",
     "[" READY_OLD("False", "Pending", "") "]",
     COND("Ready", "False", "ChildMissing", "", 0), NULL, T_NOW,
     "[" READY_OLD("False", "ChildMissing", "") "]", true},
    {"same status, new message -> changed, time kept",
     "[" READY_OLD("False", "Pending", "a") "]",
     COND("Ready", "False", "Pending", "b", 0), NULL, T_NOW,
     "[" READY_OLD("False", "Pending", "b") "]", true},
    {"same status, new observedGeneration -> changed, time kept",
     "[" READY_OLD_G("True", "Installed", "", "1") "]",
     COND("Ready", "True", "Installed", "", 2), NULL, T_NOW,
     "[" READY_OLD_G("True", "Installed", "", "2") "]", true},
    {"observedGeneration set from absent", "[" READY_OLD("True", "Installed", "") "]",
     COND("Ready", "True", "Installed", "", 7), NULL, T_NOW,
     "[" READY_OLD_G("True", "Installed", "", "7") "]", true},
    {"observedGeneration back to 0 -> member dropped (omitempty)",
     "[" READY_OLD_G("True", "Installed", "", "3") "]",
     COND("Ready", "True", "Installed", "", 0), NULL, T_NOW,
     "[" READY_OLD("True", "Installed", "") "]", true},
    {"same status, different caller time -> time KEPT, not changed",
     "[" READY_OLD("True", "Installed", "") "]",
     COND("Ready", "True", "Installed", "", 0), T_CALLER, T_NOW,
     "[" READY_OLD("True", "Installed", "") "]", false},
    {"same status, caller time and new reason -> changed, time still kept",
     "[" READY_OLD("True", "Installed", "") "]", COND("Ready", "True", "Upgraded", "", 0),
     T_CALLER, T_NOW, "[" READY_OLD("True", "Upgraded", "") "]", true},
    {"identical -> not changed", "[" READY_OLD_G("True", "Installed", "ok", "4") "]",
     COND("Ready", "True", "Installed", "ok", 4), NULL, T_NOW,
     "[" READY_OLD_G("True", "Installed", "ok", "4") "]", false},
    {"NULL message is the empty message", "[" READY_OLD("True", "Installed", "") "]",
     COND("Ready", "True", "Installed", NULL, 0), NULL, T_NOW,
     "[" READY_OLD("True", "Installed", "") "]", false},
    {"absent message reads as \"\" (Go zero value) -> not changed",
     "[{'type':'Ready','status':'True','lastTransitionTime':'" T_OLD
     "','reason':'Installed'}]",
     COND("Ready", "True", "Installed", "", 0), NULL, T_NOW,
     "[{'type':'Ready','status':'True','lastTransitionTime':'" T_OLD
     "','reason':'Installed'}]",
     false},
    {"middle of three updated in place, neighbours untouched, order kept",
     "[{'type':'A','status':'True','lastTransitionTime':'" T_OLD
     "','reason':'R','message':''},"
     "{'type':'B','status':'True','lastTransitionTime':'" T_OLD
     "','reason':'R','message':''},"
     "{'type':'C','status':'True','lastTransitionTime':'" T_OLD
     "','reason':'R','message':''}]",
     COND("B", "False", "Broken", "x", 0), NULL, T_NOW,
     "[{'type':'A','status':'True','lastTransitionTime':'" T_OLD
     "','reason':'R','message':''},"
     "{'type':'B','status':'False','lastTransitionTime':'" T_NOW
     "','reason':'Broken','message':'x'},"
     "{'type':'C','status':'True','lastTransitionTime':'" T_OLD
     "','reason':'R','message':''}]",
     true},
    {"members set does not know are kept",
     "[{'type':'Ready','status':'True','lastTransitionTime':'" T_OLD
     "','reason':'R','message':'','x-extra':{'k':1}}]",
     COND("Ready", "False", "R", "", 0), NULL, T_NOW,
     "[{'type':'Ready','status':'False','lastTransitionTime':'" T_NOW
     "','reason':'R','message':'','x-extra':{'k':1}}]",
     true},
    {"duplicate types: only the first is updated (FindStatusCondition)",
     "[" READY_OLD("True", "A", "") "," READY_OLD("True", "B", "") "]",
     COND("Ready", "True", "C", "", 0), NULL, T_NOW,
     "[" READY_OLD("True", "C", "") "," READY_OLD("True", "B", "") "]", true},
    {"items without a string type are skipped",
     "[{'status':'True'},7," READY_OLD("True", "A", "") "]",
     COND("Ready", "True", "A", "", 0), NULL, T_NOW,
     "[{'status':'True'},7," READY_OLD("True", "A", "") "]", false},
    {"invalid input refused, array untouched (empty reason)",
     "[" READY_OLD("False", "Pending", "") "]", COND("Ready", "True", "", "", 0), NULL,
     T_NOW, "[" READY_OLD("False", "Pending", "") "]", false, KCR_EINVALID},
    {"invalid input refused, nothing appended (status 'true')", "[]",
     COND("Ready", "true", "Installed", "", 0), NULL, T_NOW, "[]", false, KCR_EINVALID},
    {"invalid input refused (negative observedGeneration)", "[]",
     COND("Ready", "True", "Installed", "", -1), NULL, T_NOW, "[]", false, KCR_EINVALID},
};

static void set_follows_set_status_condition(void **state)
{
  for(size_t i = 0; i < sizeof(set_vecs) / sizeof(set_vecs[0]); i++) {
    const struct set_vec *v = &set_vecs[i];
    struct kcr_cond in = v->in;
    struct kcr_errinfo ei = KCR_ERRINFO_INIT;
    cJSON *conds = sq(v->initial);
    bool changed = !v->changed;
    kcr_err rc;

    in.last_transition_time = tm(v->in_ltt);
    rc = kcr_cond_set(conds, &in, tm(v->now), &changed, &ei);
    if(rc != v->rc || changed != v->changed) {
      print_error("vector \"%s\": rc %s (want %s), changed %d (want %d), ei %s\n",
                  v->name, kcr_err_name(rc), kcr_err_name(v->rc), changed, v->changed,
                  ei.message ? ei.message : "-");
      fail();
    }
    assert_json(v->expect, conds, v->name);
    if(v->rc)
      assert_non_null(ei.message);
    kcr_errinfo_cleanup(&ei);
    cJSON_Delete(conds);
  }
}

/* The classic bug cannot happen: reconciling the same observation again and
 * again with a moving clock never changes anything after the first write. */
static void steady_state_reconciles_do_not_write(void **state)
{
  cJSON *conds = cJSON_CreateArray();
  struct kcr_cond c = COND("Ready", "True", "Installed", "", 5);
  bool changed;

  assert_int_equal(KCR_OK, kcr_cond_set(conds, &c, tm(T_OLD), &changed, NULL));
  assert_true(changed);
  for(int i = 1; i <= 100; i++) {
    c.last_transition_time = i % 2 ? tm(T_OLD) + i : 0; /* a careless caller */
    assert_int_equal(KCR_OK, kcr_cond_set(conds, &c, tm(T_OLD) + 60 * i, &changed, NULL));
    assert_false(changed);
  }
  assert_json("[{'type':'Ready','status':'True','observedGeneration':5,"
              "'lastTransitionTime':'" T_OLD "','reason':'Installed','message':''}]",
              conds, "after 100 reconciles");
  cJSON_Delete(conds);
}

static void set_refuses_bad_arguments(void **state)
{
  struct kcr_cond c = COND("Ready", "True", "Installed", "", 0);
  cJSON *obj = cJSON_CreateObject(), *arr = cJSON_CreateArray();
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  bool changed = true;

  assert_int_equal(KCR_EINVAL, kcr_cond_set(obj, &c, tm(T_NOW), &changed, NULL));
  assert_false(changed);
  assert_int_equal(KCR_EINVAL, kcr_cond_set(NULL, &c, tm(T_NOW), NULL, NULL));
  assert_int_equal(KCR_EINVAL, kcr_cond_set(arr, NULL, tm(T_NOW), NULL, NULL));
  assert_int_equal(KCR_EINVAL, kcr_cond_set(arr, &c, 0, NULL, &ei));
  assert_non_null(ei.message);
  assert_int_equal(0, cJSON_GetArraySize(arr));
  kcr_errinfo_cleanup(&ei);
  cJSON_Delete(obj);
  cJSON_Delete(arr);
}

/* A pointer from find survives a set that updates the item. */
static void found_item_stays_valid_across_set(void **state)
{
  cJSON *conds = sq("[" READY_OLD("False", "Pending", "") "]");
  cJSON *p = kcr_cond_find(conds, "Ready");
  struct kcr_cond c = COND("Ready", "True", "Installed", "", 0);
  bool changed;

  assert_non_null(p);
  assert_int_equal(KCR_OK, kcr_cond_set(conds, &c, tm(T_NOW), &changed, NULL));
  assert_true(changed);
  assert_ptr_equal(p, kcr_cond_find(conds, "Ready"));
  assert_string_equal("True", cJSON_GetObjectItem(p, "status")->valuestring);
  cJSON_Delete(conds);
}

/* ---- out of memory: set is all-or-nothing ---- */

static int alloc_n, alloc_fail_at;

static void *failing_malloc(size_t n)
{
  if(++alloc_n == alloc_fail_at)
    return NULL;
  return malloc(n);
}

static void torture_one(const char *initial, const struct kcr_cond *c, const char *expect)
{
  for(alloc_fail_at = 1;; alloc_fail_at++) {
    cJSON *conds = sq(initial);
    char *before = cJSON_PrintUnformatted(conds);
    cJSON_Hooks hooks = {failing_malloc, free};
    bool changed = true;
    kcr_err rc;

    alloc_n = 0;
    cJSON_InitHooks(&hooks);
    rc = kcr_cond_set(conds, c, tm(T_NOW), &changed, NULL);
    cJSON_InitHooks(NULL);
    if(rc == KCR_ENOMEM) {
      char *after = cJSON_PrintUnformatted(conds);
      assert_string_equal(before, after); /* untouched */
      assert_false(changed);
      free(after);
    } else {
      assert_int_equal(KCR_OK, rc);
      assert_true(changed);
      assert_json(expect, conds, "torture");
    }
    free(before);
    cJSON_Delete(conds);
    if(alloc_n < alloc_fail_at)
      break; /* no allocation failed: every failure point was covered */
  }
}

static void set_is_all_or_nothing_when_allocations_fail(void **state)
{
  struct kcr_cond add = COND("Degraded", "False", "AsExpected", "fine", 3);
  struct kcr_cond flip = COND("Ready", "True", "Installed", "done", 3);

  torture_one("[" READY_OLD("True", "Installed", "") "]", &add,
              "[" READY_OLD("True", "Installed",
                            "") ",{'type':'Degraded','status':'False',"
                                "'observedGeneration':3,'lastTransitionTime':'" T_NOW
                                "','reason':'AsExpected','message':'fine'}]");
  torture_one("[" READY_OLD("False", "Pending", "") "]", &flip,
              "[{'type':'Ready','status':'True','observedGeneration':3,'"
              "lastTransitionTime':'" T_NOW "','reason':'Installed','message':'done'}]");
}

/* ---- observedGeneration is an int64, exactly ---- */

static char *print(const cJSON *j)
{
  char *t = cJSON_PrintUnformatted(j);
  assert_non_null(t);
  return t;
}

/* Beyond 2^53 a double cannot tell 2^53 from 2^53+1, and from 10^15 cJSON
 * prints "1e+15", which Go refuses for an int64. */
static void observed_generation_round_trips_exactly(void **state)
{
  cJSON *conds =
      sq("[{'type':'Ready','status':'True','observedGeneration':"
         "9007199254740993,'lastTransitionTime':'" T_OLD "','reason':'R','message':''}]");
  struct kcr_cond got;
  struct kcr_cond same = COND("Ready", "True", "R", "", 9007199254740993LL);
  struct kcr_cond lower = COND("Ready", "True", "R", "", 9007199254740992LL);
  struct kcr_cond big = COND("Big", "True", "R", "", 1000000000000000LL);
  bool changed = true;
  char *text;

  assert_int_equal(KCR_OK, kcr_cond_get(conds, "Ready", &got));
  assert_true(got.observed_generation == 9007199254740993LL);
  /* The same generation: nothing to write. */
  assert_int_equal(KCR_OK, kcr_cond_set(conds, &same, tm(T_NOW), &changed, NULL));
  assert_false(changed);
  /* One less: a change, written exactly. */
  assert_int_equal(KCR_OK, kcr_cond_set(conds, &lower, tm(T_NOW), &changed, NULL));
  assert_true(changed);
  assert_int_equal(KCR_OK, kcr_cond_get(conds, "Ready", &got));
  assert_true(got.observed_generation == 9007199254740992LL);
  /* 10^15 on a new item, and back on the existing one. */
  assert_int_equal(KCR_OK, kcr_cond_set(conds, &big, tm(T_NOW), &changed, NULL));
  big.type = "Ready";
  assert_int_equal(KCR_OK, kcr_cond_set(conds, &big, tm(T_NOW), &changed, NULL));
  assert_true(changed);
  text = print(conds);
  assert_string_equal("[{\"type\":\"Ready\",\"status\":\"True\",\"observedGeneration\":"
                      "1000000000000000,\"lastTransitionTime\":\"" T_OLD
                      "\",\"reason\":\"R\",\"message\":\"\"},{\"type\":\"Big\","
                      "\"status\":\"True\",\"observedGeneration\":1000000000000000,"
                      "\"lastTransitionTime\":\"" T_NOW
                      "\",\"reason\":\"R\",\"message\":\"\"}]",
                      text);
  free(text);
  assert_int_equal(KCR_OK, kcr_cond_validate_json(conds, NULL));
  /* kcr_cond_to_json writes it exactly too. */
  same.last_transition_time = tm(T_OLD);
  cJSON *one = kcr_cond_to_json(&same);
  text = print(one);
  assert_non_null(strstr(text, "\"observedGeneration\":9007199254740993,"));
  free(text);
  cJSON_Delete(one);
  /* Equality sees the difference a double would not. */
  cJSON *a = sq("[{'type':'A','status':'True','observedGeneration':9007199254740993,"
                "'reason':'R','message':''}]");
  cJSON *b = sq("[{'type':'A','status':'True','observedGeneration':9007199254740992,"
                "'reason':'R','message':''}]");
  assert_false(kcr_cond_list_equal_ignoring_time(a, b));
  assert_true(kcr_cond_list_equal_ignoring_time(a, a));
  cJSON_Delete(a);
  cJSON_Delete(b);
  cJSON_Delete(conds);
}

/* ---- remove, find, is_* ---- */

static void remove_present_and_absent(void **state)
{
  cJSON *conds = sq("[{'type':'A','status':'True'},{'type':'B','status':'True'},"
                    "{'type':'C','status':'True'}]");
  bool removed = false;

  assert_int_equal(KCR_OK, kcr_cond_remove(conds, "B", &removed));
  assert_true(removed);
  assert_json("[{'type':'A','status':'True'},{'type':'C','status':'True'}]", conds,
              "remove B");
  assert_int_equal(KCR_OK, kcr_cond_remove(conds, "B", &removed));
  assert_false(removed);
  assert_json("[{'type':'A','status':'True'},{'type':'C','status':'True'}]", conds,
              "remove B again");
  assert_int_equal(KCR_OK, kcr_cond_remove(conds, "A", NULL));
  assert_int_equal(KCR_OK, kcr_cond_remove(conds, "C", &removed));
  assert_true(removed);
  assert_json("[]", conds, "all removed");
  assert_int_equal(KCR_OK, kcr_cond_remove(conds, "C", &removed));
  assert_false(removed);
  assert_int_equal(KCR_EINVAL, kcr_cond_remove(NULL, "C", &removed));
  assert_int_equal(KCR_EINVAL, kcr_cond_remove(conds, NULL, &removed));
  cJSON_Delete(conds);
}

/* RemoveStatusCondition filters the whole list: duplicates all go. */
static void remove_takes_every_duplicate(void **state)
{
  cJSON *conds = sq("[{'type':'A','reason':'x'},{'type':'B'},{'type':'A','reason':'y'}]");
  bool removed;
  assert_int_equal(KCR_OK, kcr_cond_remove(conds, "A", &removed));
  assert_true(removed);
  assert_json("[{'type':'B'}]", conds, "duplicates removed");
  cJSON_Delete(conds);
}

static void is_true_false_unknown(void **state)
{
  cJSON *conds = sq("[{'type':'T','status':'True'},{'type':'F','status':'False'},"
                    "{'type':'U','status':'Unknown'},{'type':'D','status':'True'},"
                    "{'type':'D','status':'False'}]");

  /* absent is not False (nor True, nor Unknown) */
  assert_false(kcr_cond_is_true(conds, "Absent"));
  assert_false(kcr_cond_is_false(conds, "Absent"));
  assert_false(kcr_cond_is_unknown(conds, "Absent"));
  assert_false(kcr_cond_is_true(NULL, "T"));
  assert_false(kcr_cond_is_false(conds, NULL));

  assert_true(kcr_cond_is_true(conds, "T"));
  assert_false(kcr_cond_is_false(conds, "T"));
  assert_false(kcr_cond_is_unknown(conds, "T"));
  assert_true(kcr_cond_is_false(conds, "F"));
  assert_false(kcr_cond_is_true(conds, "F"));
  assert_true(kcr_cond_is_unknown(conds, "U"));
  assert_false(kcr_cond_is_true(conds, "U"));
  assert_true(kcr_cond_is_true(conds, "D")); /* the first match decides */
  assert_false(kcr_cond_is_false(conds, "D"));
  assert_true(kcr_cond_has_status(conds, "F", "False"));
  assert_false(kcr_cond_has_status(conds, "F", "false"));
  cJSON_Delete(conds);
}

static void find_and_get_give_borrowed_views(void **state)
{
  cJSON *conds =
      sq("[{'type':'Ready','status':'False','observedGeneration':9,"
         "'lastTransitionTime':'" T_OLD "','reason':'Pending','message':'wait'},"
         "{'type':'Odd','status':3}]");
  struct kcr_cond c;

  assert_null(kcr_cond_find(conds, "Absent"));
  assert_null(kcr_cond_find(NULL, "Ready"));
  assert_ptr_equal(cJSON_GetArrayItem(conds, 0), kcr_cond_find(conds, "Ready"));
  assert_int_equal(KCR_OK, kcr_cond_get(conds, "Ready", &c));
  assert_string_equal("Ready", c.type);
  assert_string_equal("False", c.status);
  assert_string_equal("Pending", c.reason);
  assert_string_equal("wait", c.message);
  assert_int_equal(9, c.observed_generation);
  assert_int_equal(tm(T_OLD), c.last_transition_time);
  /* borrowed: points into the tree */
  assert_ptr_equal(
      cJSON_GetObjectItem(cJSON_GetArrayItem(conds, 0), "reason")->valuestring, c.reason);

  assert_int_equal(KCR_ENOTFOUND, kcr_cond_get(conds, "Absent", &c));
  assert_string_equal("", c.status);
  assert_int_equal(0, c.last_transition_time);

  assert_int_equal(KCR_EPARSE, kcr_cond_get(conds, "Odd", &c)); /* status not a string */
  assert_string_equal("Odd", c.type);
  assert_string_equal("", c.status);
  assert_string_equal("", c.message);
  assert_int_equal(KCR_EPARSE, kcr_cond_from_json(conds, &c)); /* not an object */
  cJSON_Delete(conds);
}

/* ---- to_json ---- */

static void to_json_uses_metav1_names_and_omitempty(void **state)
{
  struct kcr_cond c = COND("Ready", "True", "Installed", NULL, 0);
  c.last_transition_time = tm(T_NOW);
  cJSON *o = kcr_cond_to_json(&c);
  char *s = cJSON_PrintUnformatted(o);

  /* exact text: Go's field order; observedGeneration omitted at 0; message
   * present even when empty */
  assert_string_equal(
      "{\"type\":\"Ready\",\"status\":\"True\",\"lastTransitionTime\":\"" T_NOW
      "\",\"reason\":\"Installed\",\"message\":\"\"}",
      s);
  free(s);
  cJSON_Delete(o);

  c.observed_generation = 12;
  c.message = "child \"vfm\" ready";
  c.last_transition_time = tm(T_OLD);
  o = kcr_cond_to_json(&c);
  s = cJSON_PrintUnformatted(o);
  assert_string_equal("{\"type\":\"Ready\",\"status\":\"True\",\"observedGeneration\":12,"
                      "\"lastTransitionTime\":\"" T_OLD "\",\"reason\":\"Installed\","
                      "\"message\":\"child \\\"vfm\\\" ready\"}",
                      s);
  free(s);
  cJSON_Delete(o);

  c.last_transition_time = 0;
  assert_null(kcr_cond_to_json(&c)); /* never a null time on the wire */
  assert_null(kcr_cond_to_json(NULL));
}

/* ---- kcr_cond_validate: the vector table ---- */

struct val_vec {
  const char *name;
  struct kcr_cond c;
  size_t reason_len;  /* nonzero: reason = "A" x n */
  size_t message_len; /* nonzero: message = "m" x n */
  size_t prefix_len;  /* nonzero: type = "p" x prefix_len + "/" + "N" x name_len */
  size_t name_len;
  kcr_err rc;
  const char *msg; /* substring of ei.message (full text when it starts with '=') */
};

#define RE "^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$"

static const struct val_vec val_vecs[] = {
    /* accepted */
    {"baseline", COND("Ready", "True", "Installed", "", 0)},
    {"reason of one letter", COND("Ready", "True", "A", "", 0)},
    {"reason with digit and underscore", COND("Ready", "False", "Ready_1", "", 0)},
    {"reason with ',' and ':' inside", COND("Ready", "False", "a,b:c", "", 0)},
    {"reason ending with '_'", COND("Ready", "False", "Waiting_", "", 0)},
    {"reason of 1024 bytes", COND("Ready", "True", NULL, "", 0), 1024},
    {"message of 32768 bytes", COND("Ready", "True", "R", NULL, 0), 0, 32768},
    {"NULL message", COND("Ready", "True", "R", NULL, 0)},
    {"Unknown status", COND("Ready", "Unknown", "Reconciling", "", 0)},
    {"prefixed type", COND("example.com/Ready", "True", "R", "", 0)},
    {"type with '-', '_', '.'", COND("vfm.health-check_2", "True", "R", "", 0)},
    {"type of 253 + 1 + 62 = 316", COND(NULL, "True", "R", "", 0), 0, 0, 253, 62},
    {"large observedGeneration", COND("Ready", "True", "R", "", INT64_C(1) << 52)},
    /* refused: reason */
    {"empty reason", COND("Ready", "True", "", "", 0), 0, 0, 0, 0, KCR_EINVALID,
     "condition \"Ready\": reason is required"},
    {"NULL reason", COND("Ready", "True", NULL, "", 0), 0, 0, 0, 0, KCR_EINVALID,
     "reason is required"},
    {"reason with a space", COND("Ready", "False", "not ready", "", 0), 0, 0, 0, 0,
     KCR_EINVALID,
     "=condition \"Ready\": reason \"not ready\" must match " RE
     " (one CamelCase word such as \"Progressing\")"},
    {"reason starting with a digit", COND("Ready", "False", "1Ready", "", 0), 0, 0, 0, 0,
     KCR_EINVALID, "reason \"1Ready\" must match " RE},
    {"reason ending with ':'", COND("Ready", "False", "Ready:", "", 0), 0, 0, 0, 0,
     KCR_EINVALID, "reason \"Ready:\" must match"},
    {"reason ending with ','", COND("Ready", "False", "Ready,", "", 0), 0, 0, 0, 0,
     KCR_EINVALID, "reason \"Ready,\" must match"},
    {"reason starting with '_'", COND("Ready", "False", "_Ready", "", 0), 0, 0, 0, 0,
     KCR_EINVALID, "must match"},
    {"reason with '-'", COND("Ready", "False", "Not-Ready", "", 0), 0, 0, 0, 0,
     KCR_EINVALID, "must match"},
    {"reason with non-ASCII",
     COND("Ready", "False",
          "R\xc3\xa9"
          "ady",
          "", 0),
     0, 0, 0, 0, KCR_EINVALID, "must match"},
    {"reason with a newline, escaped in the message",
     COND("Ready", "False", "Ready\n", "", 0), 0, 0, 0, 0, KCR_EINVALID,
     "reason \"Ready\\x0a\" must match"},
    {"reason of 1025 bytes", COND("Ready", "True", NULL, "", 0), 1025, 0, 0, 0,
     KCR_EINVALID,
     "condition \"Ready\": reason must be no more than 1024 bytes (has 1025)"},
    /* refused: message */
    {"message of 32769 bytes", COND("Ready", "True", "R", NULL, 0), 0, 32769, 0, 0,
     KCR_EINVALID,
     "condition \"Ready\": message must be no more than 32768 bytes (has 32769)"},
    /* refused: status */
    {"status 'true' (lowercase)", COND("Ready", "true", "R", "", 0), 0, 0, 0, 0,
     KCR_EINVALID,
     "condition \"Ready\": status \"true\" must be one of \"True\", \"False\", "
     "\"Unknown\""},
    {"empty status", COND("Ready", "", "R", "", 0), 0, 0, 0, 0, KCR_EINVALID,
     "status is required"},
    {"NULL status", COND("Ready", NULL, "R", "", 0), 0, 0, 0, 0, KCR_EINVALID,
     "status is required"},
    /* refused: observedGeneration */
    {"negative observedGeneration", COND("Ready", "True", "R", "", -1), 0, 0, 0, 0,
     KCR_EINVALID,
     "condition \"Ready\": observedGeneration -1 must be greater than or equal to zero"},
    /* refused: type */
    {"empty type", COND("", "True", "R", "", 0), 0, 0, 0, 0, KCR_EINVALID,
     "condition type is required"},
    {"NULL type", COND(NULL, "True", "R", "", 0), 0, 0, 0, 0, KCR_EINVALID,
     "condition type is required"},
    {"uppercase prefix", COND("Example.com/Ready", "True", "R", "", 0), 0, 0, 0, 0,
     KCR_EINVALID, "type prefix \"Example.com\" must be a lowercase RFC 1123 subdomain"},
    {"prefix with empty label", COND("example..com/Ready", "True", "R", "", 0), 0, 0, 0,
     0, KCR_EINVALID, "type prefix \"example..com\" must be a lowercase RFC 1123"},
    {"prefix starting with '-'", COND("-x.com/Ready", "True", "R", "", 0), 0, 0, 0, 0,
     KCR_EINVALID, "type prefix \"-x.com\""},
    {"prefix with '_'", COND("my_co.com/Ready", "True", "R", "", 0), 0, 0, 0, 0,
     KCR_EINVALID, "type prefix \"my_co.com\""},
    {"empty prefix", COND("/Ready", "True", "R", "", 0), 0, 0, 0, 0, KCR_EINVALID,
     "type prefix before '/' must not be empty"},
    {"empty name", COND("example.com/", "True", "R", "", 0), 0, 0, 0, 0, KCR_EINVALID,
     "type name after '/' must not be empty"},
    {"two slashes", COND("a/b/c", "True", "R", "", 0), 0, 0, 0, 0, KCR_EINVALID,
     "type must be a qualified name"},
    {"type with a space", COND("Not Ready", "True", "R", "", 0), 0, 0, 0, 0, KCR_EINVALID,
     "condition \"Not Ready\": type name \"Not Ready\" must match"},
    {"type ending with '.'", COND("Ready.", "True", "R", "", 0), 0, 0, 0, 0, KCR_EINVALID,
     "type name \"Ready.\" must match"},
    {"prefix of 254", COND(NULL, "True", "R", "", 0), 0, 0, 254, 5, KCR_EINVALID,
     "type prefix must be no more than 253 characters (has 254)"},
    {"name of 64", COND(NULL, "True", "R", "", 0), 0, 0, 3, 64, KCR_EINVALID,
     "type name must be no more than 63 characters (has 64)"},
    {"type of 253 + 1 + 63 = 317 (CRD maxLength 316)", COND(NULL, "True", "R", "", 0), 0,
     0, 253, 63, KCR_EINVALID, "type must be no more than 316 characters (has 317"},
};

static void validate_vectors(void **state)
{
  for(size_t i = 0; i < sizeof(val_vecs) / sizeof(val_vecs[0]); i++) {
    const struct val_vec *v = &val_vecs[i];
    struct kcr_cond c = v->c;
    struct kcr_errinfo ei = KCR_ERRINFO_INIT;
    char *reason = NULL, *message = NULL, *type = NULL;
    kcr_err rc;

    if(v->reason_len)
      c.reason = reason = repeat('A', v->reason_len);
    if(v->message_len)
      c.message = message = repeat('m', v->message_len);
    if(v->prefix_len) {
      type = malloc(v->prefix_len + v->name_len + 2);
      assert_non_null(type);
      memset(type, 'p', v->prefix_len);
      type[v->prefix_len] = '/';
      memset(type + v->prefix_len + 1, 'N', v->name_len);
      type[v->prefix_len + 1 + v->name_len] = '\0';
      c.type = type;
    }
    rc = kcr_cond_validate(&c, &ei);
    if(rc != v->rc) {
      print_error("vector \"%s\": rc %s (want %s): %s\n", v->name, kcr_err_name(rc),
                  kcr_err_name(v->rc), ei.message ? ei.message : "-");
      fail();
    }
    if(v->msg) {
      bool whole = v->msg[0] == '=';
      const char *want = v->msg + whole;
      assert_non_null(ei.message);
      if(whole ? strcmp(ei.message, want) != 0 : !strstr(ei.message, want)) {
        print_error("vector \"%s\": message\n  %s\nwanted%s\n  %s\n", v->name, ei.message,
                    whole ? "" : " to contain", want);
        fail();
      }
    }
    kcr_errinfo_cleanup(&ei);
    free(reason);
    free(message);
    free(type);
  }
}

static void validate_checks_time_range_and_null(void **state)
{
  struct kcr_cond c = COND("Ready", "True", "R", "", 0);
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;

  c.last_transition_time = -1; /* 1969: a time like any other */
  assert_int_equal(KCR_OK, kcr_cond_validate(&c, NULL));
  c.last_transition_time = (time_t)-62135596800LL; /* Go's zero time */
  assert_int_equal(KCR_EINVALID, kcr_cond_validate(&c, &ei));
  assert_non_null(strstr(ei.message, "lastTransitionTime"));
  kcr_errinfo_cleanup(&ei);
  c.last_transition_time = (time_t)253402300800LL; /* year 10000 */
  assert_int_equal(KCR_EINVALID, kcr_cond_validate(&c, NULL));
  assert_int_equal(KCR_EINVAL, kcr_cond_validate(NULL, NULL));
}

/* ---- kcr_cond_validate_json: the vector table ---- */

struct json_vec {
  const char *name;
  const char *conds;
  kcr_err rc;
  const char *msg; /* substring of ei.message */
};

#define OK_ITEM(ty)                                                                      \
  "{'type':'" ty "','status':'True','lastTransitionTime':'" T_OLD                        \
  "','reason':'R','message':''}"

static const struct json_vec json_vecs[] = {
    {"empty array", "[]"},
    {"two valid items", "[" OK_ITEM("Ready") "," OK_ITEM("example.com/Degraded") "]"},
    {"observedGeneration null is absent",
     "[{'type':'A','status':'True','observedGeneration':null,'lastTransitionTime':'" T_OLD
     "','reason':'R','message':''}]"},
    {"epoch is a valid time on the wire",
     "[{'type':'A','status':'True','lastTransitionTime':'1970-01-01T00:00:00Z',"
     "'reason':'R','message':''}]"},
    {"offset and fraction accepted",
     "[{'type':'A','status':'True','lastTransitionTime':'2026-11-29T12:00:00.5+02:00',"
     "'reason':'R','message':''}]"},
    {"unknown members ignored",
     "[{'type':'A','status':'True','lastTransitionTime':'" T_OLD
     "','reason':'R','message':'','extra':1}]"},
    {"duplicate type", "[" OK_ITEM("Ready") "," OK_ITEM("B") "," OK_ITEM("Ready") "]",
     KCR_EINVALID,
     "conditions[2]: condition \"Ready\": duplicate type (first at conditions[0])"},
    {"missing lastTransitionTime",
     "[" OK_ITEM("A") ",{'type':'Ready','status':'True','reason':'R','message':''}]",
     KCR_EINVALID, "conditions[1]: condition \"Ready\": lastTransitionTime is required"},
    {"null lastTransitionTime",
     "[{'type':'Ready','status':'True','lastTransitionTime':null,'reason':'R','message':'"
     "'}]",
     KCR_EINVALID, "conditions[0]: condition \"Ready\": lastTransitionTime is required"},
    {"Go zero lastTransitionTime",
     "[{'type':'Ready','status':'True','lastTransitionTime':'0001-01-01T00:00:00Z',"
     "'reason':'R','message':''}]",
     KCR_EINVALID, "lastTransitionTime is required"},
    {"unparseable lastTransitionTime",
     "[{'type':'Ready','status':'True','lastTransitionTime':'yesterday','reason':'R',"
     "'message':''}]",
     KCR_EINVALID, "lastTransitionTime \"yesterday\" is not an RFC 3339 time"},
    {"numeric lastTransitionTime",
     "[{'type':'Ready','status':'True','lastTransitionTime':1795946400,'reason':'R',"
     "'message':''}]",
     KCR_EINVALID, "lastTransitionTime must be an RFC 3339 string"},
    {"missing message",
     "[{'type':'Ready','status':'True','lastTransitionTime':'" T_OLD "','reason':'R'}]",
     KCR_EINVALID, "condition \"Ready\": message is required (it may be \"\")"},
    {"missing reason",
     "[{'type':'Ready','status':'True','lastTransitionTime':'" T_OLD "','message':''}]",
     KCR_EINVALID, "condition \"Ready\": reason is required"},
    {"bad reason in the second item",
     "[" OK_ITEM("A") ",{'type':'B','status':'True','lastTransitionTime':'" T_OLD
                      "','reason':'no good','message':''}]",
     KCR_EINVALID, "conditions[1]: condition \"B\": reason \"no good\" must match"},
    {"negative observedGeneration",
     "[{'type':'A','status':'True','observedGeneration':-2,'lastTransitionTime':'" T_OLD
     "','reason':'R','message':''}]",
     KCR_EINVALID, "observedGeneration -2 must be greater than or equal to zero"},
    {"fractional observedGeneration",
     "[{'type':'A','status':'True','observedGeneration':1.5,'lastTransitionTime':'" T_OLD
     "','reason':'R','message':''}]",
     KCR_EINVALID, "observedGeneration must be an integer"},
    {"status of the wrong JSON type",
     "[{'type':'A','status':true,'lastTransitionTime':'" T_OLD
     "','reason':'R','message':''}]",
     KCR_EINVALID, "conditions[0]: condition \"A\": status must be a string"},
    {"type of the wrong JSON type", "[{'type':1,'status':'True'}]", KCR_EINVALID,
     "conditions[0]: type must be a string"},
    {"missing type",
     "[{'status':'True','lastTransitionTime':'" T_OLD "','reason':'R','message':''}]",
     KCR_EINVALID, "conditions[0]: condition type is required"},
    {"item not an object", "[\"Ready\"]", KCR_EINVALID,
     "conditions[0]: must be an object"},
    {"lowercase status",
     "[{'type':'A','status':'false','lastTransitionTime':'" T_OLD
     "','reason':'R','message':''}]",
     KCR_EINVALID, "status \"false\" must be one of"},
    {"not an array", "{}", KCR_EINVAL, "must be an array"},
    /* RFC 3339 as metav1.Time (Go's time.Parse(time.RFC3339)) reads it. */
    {"comma before the fraction accepted",
     "[{'type':'A','status':'True','lastTransitionTime':'2026-11-29T12:00:00,5Z',"
     "'reason':'R','message':''}]"},
    {"space between date and time",
     "[{'type':'A','status':'True','lastTransitionTime':'2026-11-29 12:00:00Z',"
     "'reason':'R','message':''}]",
     KCR_EINVALID, "lastTransitionTime \"2026-11-29 12:00:00Z\" is not an RFC 3339 time"},
    {"lower-case t",
     "[{'type':'A','status':'True','lastTransitionTime':'2026-11-29t12:00:00Z',"
     "'reason':'R','message':''}]",
     KCR_EINVALID, "is not an RFC 3339 time"},
    {"lower-case z",
     "[{'type':'A','status':'True','lastTransitionTime':'2026-11-29T12:00:00z',"
     "'reason':'R','message':''}]",
     KCR_EINVALID, "is not an RFC 3339 time"},
    /* Go takes it; the CRD schema's date-time format does not. */
    {"one-digit hour",
     "[{'type':'A','status':'True','lastTransitionTime':'2026-11-29T9:00:00Z',"
     "'reason':'R','message':''}]",
     KCR_EINVALID, "is not an RFC 3339 time"},
    /* A string holding \u0000 is no C string (kcr_json_parse keeps it Raw):
     * refused by name; cut at the NUL it would read "Ready", "Ok" ... */
    {"NUL in type",
     "[{'type':'Ready\\u0000x','status':'True','lastTransitionTime':'" T_OLD
     "','reason':'R','message':''}]",
     KCR_EINVALID, "conditions[0]: type must not hold \\u0000"},
    {"NUL in reason",
     "[{'type':'A','status':'True','lastTransitionTime':'" T_OLD
     "','reason':'Ok\\u0000 bad','message':''}]",
     KCR_EINVALID, "conditions[0]: condition \"A\": reason must not hold \\u0000"},
    {"NUL in status",
     "[{'type':'A','status':'True\\u0000','lastTransitionTime':'" T_OLD
     "','reason':'R','message':''}]",
     KCR_EINVALID, "condition \"A\": status must not hold \\u0000"},
    {"NUL in message",
     "[{'type':'A','status':'True','lastTransitionTime':'" T_OLD
     "','reason':'R','message':'ok\\u0000hidden'}]",
     KCR_EINVALID, "condition \"A\": message must not hold \\u0000"},
    {"NUL in lastTransitionTime",
     "[{'type':'A','status':'True','lastTransitionTime':'" T_OLD "\\u0000x"
     "','reason':'R','message':''}]",
     KCR_EINVALID, "lastTransitionTime must be an RFC 3339 string"},
    /* Of members of the same name the last counts, as in Go's decoder. */
    {"duplicate reason, the last one bad",
     "[{'type':'A','status':'True','lastTransitionTime':'" T_OLD
     "','reason':'Ok','message':'','reason':'not ok'}]",
     KCR_EINVALID, "condition \"A\": reason \"not ok\" must match"},
    {"duplicate reason, the last one good",
     "[{'type':'A','status':'True','lastTransitionTime':'" T_OLD
     "','reason':'not ok','message':'','reason':'Ok'}]"},
    {"duplicate type member, the last one makes the item a duplicate",
     "[" OK_ITEM("Ready") ",{'type':'Other','status':'True','lastTransitionTime':'" T_OLD
                          "','reason':'R','message':'','type':'Ready'}]",
     KCR_EINVALID, "conditions[1]: condition \"Ready\": duplicate type"},
    {"observedGeneration beyond int64",
     "[{'type':'A','status':'True','observedGeneration':9223372036854775808,"
     "'lastTransitionTime':'" T_OLD "','reason':'R','message':''}]",
     KCR_EINVALID, "observedGeneration must be an integer"},
};

static void validate_json_vectors(void **state)
{
  for(size_t i = 0; i < sizeof(json_vecs) / sizeof(json_vecs[0]); i++) {
    const struct json_vec *v = &json_vecs[i];
    struct kcr_errinfo ei = KCR_ERRINFO_INIT;
    cJSON *conds = sq(v->conds);
    kcr_err rc = kcr_cond_validate_json(conds, &ei);

    if(rc != v->rc || (v->msg && (!ei.message || !strstr(ei.message, v->msg)))) {
      print_error("vector \"%s\": rc %s (want %s), message %s (want ...%s...)\n", v->name,
                  kcr_err_name(rc), kcr_err_name(v->rc), ei.message ? ei.message : "-",
                  v->msg ? v->msg : "-");
      fail();
    }
    kcr_errinfo_cleanup(&ei);
    cJSON_Delete(conds);
  }
  assert_int_equal(KCR_OK, kcr_cond_validate_json(NULL, NULL));
}

/* The defect: a condition read from JSON (a hand-written list, one served by
 * something other than the apiserver) with "Ready\u0000x" or "Ok\u0000 bad"
 * was read, and validated, as "Ready" / "Ok". Now such a member reads as no
 * string (EPARSE, ""), so the item is refused and never matches "Ready". */
static void a_nul_in_type_or_reason_is_no_valid_condition(void **state)
{
  static const char *const items[] = {
      "{'type':'Ready\\u0000x','status':'True','reason':'Ok','message':''}",
      "{'type':'Ready','status':'True','reason':'Ok\\u0000 bad','message':''}",
      "{'type':'Ready','status':'True\\u0000','reason':'Ok','message':''}",
      "{'type':'Ready','status':'True','reason':'Ok','message':'m\\u0000'}",
  };
  for(size_t i = 0; i < sizeof(items) / sizeof(items[0]); i++) {
    cJSON *item = sq(items[i]);
    struct kcr_cond c;
    assert_int_equal(KCR_EPARSE, kcr_cond_from_json(item, &c));
    if(i < 2)
      assert_int_equal(KCR_EINVALID, kcr_cond_validate(&c, NULL));
    cJSON_Delete(item);
  }
  /* "Ready\u0000x" is not the Ready condition */
  cJSON *conds = sq("[{'type':'Ready\\u0000x','status':'True','reason':'Ok'}]");
  assert_null(kcr_cond_find(conds, "Ready"));
  assert_false(kcr_cond_is_true(conds, "Ready"));
  cJSON_Delete(conds);
  /* a served message holding it is replaced by a set, not kept */
  conds = sq("[{'type':'Ready','status':'True','lastTransitionTime':'" T_OLD
             "','reason':'Ok','message':'m\\u0000'}]");
  struct kcr_cond want = {
      .type = "Ready", .status = "True", .reason = "Ok", .message = "m"};
  bool changed = false;
  assert_int_equal(KCR_OK, kcr_cond_set(conds, &want, tm(T_NOW), &changed, NULL));
  assert_true(changed);
  assert_json("[{'type':'Ready','status':'True','lastTransitionTime':'" T_OLD
              "','reason':'Ok','message':'m'}]",
              conds, "message replaced");
  cJSON_Delete(conds);
}

/* Of two "reason" members the last counts, as Go's decoder has it. */
static void a_duplicate_member_reads_as_the_last(void **state)
{
  cJSON *item = sq("{'type':'Ready','status':'False','reason':'Bad reason',"
                   "'message':'','reason':'Ok','status':'True'}");
  struct kcr_cond c;
  assert_int_equal(KCR_OK, kcr_cond_from_json(item, &c));
  assert_string_equal("Ok", c.reason);
  assert_string_equal("True", c.status);
  assert_int_equal(KCR_OK, kcr_cond_validate(&c, NULL));
  cJSON_Delete(item);
  item = sq("{'type':'Ready','status':'True','reason':'Ok','message':'',"
            "'reason':'Bad reason'}");
  assert_int_equal(KCR_OK, kcr_cond_from_json(item, &c));
  assert_string_equal("Bad reason", c.reason);
  assert_int_equal(KCR_EINVALID, kcr_cond_validate(&c, NULL));
  cJSON_Delete(item);
}

/* Everything set produces passes the apiserver's validation. */
static void set_output_validates(void **state)
{
  cJSON *conds = cJSON_CreateArray();
  struct kcr_cond a = COND("Ready", "False", "ChildMissing", "vfm absent", 1);
  struct kcr_cond b = COND("example.com/Degraded", "Unknown", "Reconciling", NULL, 0);

  assert_int_equal(KCR_OK, kcr_cond_set(conds, &a, tm(T_NOW), NULL, NULL));
  assert_int_equal(KCR_OK, kcr_cond_set(conds, &b, tm(T_NOW), NULL, NULL));
  a.status = "True";
  assert_int_equal(KCR_OK, kcr_cond_set(conds, &a, tm(T_NOW) + 5, NULL, NULL));
  assert_int_equal(KCR_OK, kcr_cond_validate_json(conds, NULL));
  cJSON_Delete(conds);
}

/* ---- semantic equality ---- */

static void equality_ignores_time_only(void **state)
{
  struct kcr_cond a = COND("Ready", "True", "R", "", 3), b = a;

  b.last_transition_time = tm(T_NOW);
  assert_true(kcr_cond_equal_ignoring_time(&a, &b));
  b.message = NULL; /* NULL == "" */
  assert_true(kcr_cond_equal_ignoring_time(&a, &b));
  b.reason = "S";
  assert_false(kcr_cond_equal_ignoring_time(&a, &b));
  b = a;
  b.observed_generation = 4;
  assert_false(kcr_cond_equal_ignoring_time(&a, &b));
  b = a;
  b.status = "False";
  assert_false(kcr_cond_equal_ignoring_time(&a, &b));
}

static void list_equality_is_keyed_by_type(void **state)
{
  cJSON *cur = sq("[" READY_OLD(
      "True", "Installed", "") ","
                               "{'type':'B','status':'False','lastTransitionTime':'" T_OLD
                               "','reason':'X','message':'m'}]");
  cJSON *same = sq("[{'type':'B','status':'False','lastTransitionTime':'" T_NOW
                   "','reason':'X','message':'m'},"
                   "{'type':'Ready','status':'True','lastTransitionTime':'" T_NOW
                   "','reason':'Installed','message':''}]");
  cJSON *fewer = sq("[" READY_OLD("True", "Installed", "") "]");
  cJSON *other = sq("[" READY_OLD(
      "True", "Installed", "") ","
                               "{'type':'B','status':'False','lastTransitionTime':'" T_OLD
                               "','reason':'X','message':'changed'}]");
  cJSON *empty = sq("[]");

  assert_true(kcr_cond_list_equal_ignoring_time(cur, cur));
  assert_true(kcr_cond_list_equal_ignoring_time(cur, same)); /* order and time ignored */
  assert_false(kcr_cond_list_equal_ignoring_time(cur, fewer));
  assert_false(kcr_cond_list_equal_ignoring_time(fewer, cur));
  assert_false(kcr_cond_list_equal_ignoring_time(cur, other));
  assert_true(kcr_cond_list_equal_ignoring_time(NULL, empty));
  assert_false(kcr_cond_list_equal_ignoring_time(NULL, fewer));
  cJSON_Delete(cur);
  cJSON_Delete(same);
  cJSON_Delete(fewer);
  cJSON_Delete(other);
  cJSON_Delete(empty);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(set_follows_set_status_condition),
      cmocka_unit_test(steady_state_reconciles_do_not_write),
      cmocka_unit_test(set_refuses_bad_arguments),
      cmocka_unit_test(found_item_stays_valid_across_set),
      cmocka_unit_test(set_is_all_or_nothing_when_allocations_fail),
      cmocka_unit_test(observed_generation_round_trips_exactly),
      cmocka_unit_test(remove_present_and_absent),
      cmocka_unit_test(remove_takes_every_duplicate),
      cmocka_unit_test(is_true_false_unknown),
      cmocka_unit_test(find_and_get_give_borrowed_views),
      cmocka_unit_test(to_json_uses_metav1_names_and_omitempty),
      cmocka_unit_test(validate_vectors),
      cmocka_unit_test(validate_checks_time_range_and_null),
      cmocka_unit_test(validate_json_vectors),
      cmocka_unit_test(a_nul_in_type_or_reason_is_no_valid_condition),
      cmocka_unit_test(a_duplicate_member_reads_as_the_last),
      cmocka_unit_test(set_output_validates),
      cmocka_unit_test(equality_ignores_time_only),
      cmocka_unit_test(list_equality_is_keyed_by_type),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
