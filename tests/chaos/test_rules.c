/* chaosproxy's rules: the text form, request classification, choice. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "rules.h"

static struct chaos_rules *parse_ok(const char *text)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  struct chaos_rules *rs = NULL;
  kcr_err rc = chaos_rules_parse(text, &rs, &ei);
  if(rc)
    fail_msg("parse of \"%s\": %s", text, ei.message);
  kcr_errinfo_cleanup(&ei);
  return rs;
}

/* Parses text, which must be refused with a message containing want. */
static void parse_bad(const char *text, const char *want)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  struct chaos_rules *rs = (void *)1;
  assert_int_equal(KCR_EINVAL, chaos_rules_parse(text, &rs, &ei));
  assert_null(rs);
  assert_non_null(ei.message);
  if(!strstr(ei.message, want))
    fail_msg("message \"%s\" does not contain \"%s\"", ei.message, want);
  kcr_errinfo_cleanup(&ei);
}

static void classify(const char *method, const char *target, enum chaos_verb verb,
                     const char *resource, const char *sub)
{
  struct chaos_req rq;
  chaos_classify(method, target, "ebdman/0.1.0 (host; pid 1) libkcr/0.1.0", &rq);
  if(rq.verb != verb || strcmp(rq.resource, resource) || strcmp(rq.sub, sub))
    fail_msg("%s %s: got %s %s/%s, want %s %s/%s", method, target,
             chaos_verb_name(rq.verb), rq.resource, rq.sub, chaos_verb_name(verb),
             resource, sub);
  assert_string_equal("ebdman", rq.agent);
}

static void requests_are_classified_by_verb_and_resource(void **state)
{
  classify("GET", "/api/v1/namespaces/ns/configmaps?limit=500", CHAOS_LIST, "configmaps",
           "");
  classify("GET", "/api/v1/namespaces/ns/configmaps/a-config", CHAOS_GET, "configmaps",
           "");
  classify("GET", "/apis/ebdman.example.com/v1alpha1/namespaces/ns/ebds?watch=1&rv=5",
           CHAOS_WATCH, "ebds", "");
  classify("GET",
           "/apis/ebdman.example.com/v1alpha1/ebds?allowWatchBookmarks=true&watch=true",
           CHAOS_WATCH, "ebds", "");
  classify("GET", "/apis/ebdman.example.com/v1alpha1/ebds?watchx=1", CHAOS_LIST, "ebds",
           "");
  classify("PATCH",
           "/apis/ebdman.example.com/v1alpha1/namespaces/ns/ebds/a/status?fieldManager=x",
           CHAOS_PATCH, "ebds", "status");
  classify("GET", "/api/v1/namespaces", CHAOS_LIST, "namespaces", "");
  classify("GET", "/api/v1/namespaces/ns", CHAOS_GET, "namespaces", "");
  classify("DELETE", "/api/v1/namespaces/ns", CHAOS_DELETE, "namespaces", "");
  classify("POST", "/apis/events.k8s.io/v1/namespaces/ns/events", CHAOS_POST, "events",
           "");
  classify("PUT", "/apis/coordination.k8s.io/v1/namespaces/ns/leases/l", CHAOS_PUT,
           "leases", "");
  classify("GET", "/healthz", CHAOS_GET, "", "");
  classify("GET", "/apis", CHAOS_GET, "", "");
  classify("HEAD", "/api/v1/pods", CHAOS_OTHER, "pods", "");
}

static void the_agent_is_the_user_agents_product(void **state)
{
  char a[33];
  chaos_agent("vfm-sim/0.1 libkcr", a);
  assert_string_equal("vfm-sim", a);
  chaos_agent("kubectl/v1.37.0 (linux/amd64)", a);
  assert_string_equal("kubectl", a);
  chaos_agent(NULL, a);
  assert_string_equal("unknown", a);
  chaos_agent("\"{}\"/1", a);
  assert_string_equal("unknown", a);
  chaos_agent("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", a);
  assert_int_equal(32, strlen(a));
}

static void rules_parse_with_defaults(void **state)
{
  struct chaos_rules *rs =
      parse_ok("# comment\n"
               "\n"
               "status code=429 verb=PATCH,POST resource=ebds rate=0.25\n"
               "  status code=503 retry-after=2\n"
               "status code=500\n"
               "drip\n"
               "cut after-ms=100 max=3\n"
               "delay ms=20 path=/status agent=ebdman\n");
  assert_int_equal(6, rs->n);
  assert_int_equal(CHAOS_STATUS, rs->r[0].a.fault);
  assert_int_equal(429, rs->r[0].a.code);
  assert_int_equal(1, rs->r[0].a.retry_after); /* 429's default */
  assert_int_equal(3, rs->r[0].a.line);
  assert_int_equal((1u << CHAOS_PATCH) | (1u << CHAOS_POST), rs->r[0].verbs);
  assert_true(rs->r[0].rate == 0.25);
  assert_int_equal(2, rs->r[1].a.retry_after);
  assert_int_equal(-1, rs->r[2].a.retry_after); /* none for 500 */
  assert_int_equal(16, rs->r[3].a.bytes);
  assert_int_equal(50, rs->r[3].a.ms);
  assert_int_equal(1u << CHAOS_WATCH, rs->r[4].verbs); /* a cut is for watches */
  assert_int_equal(3, rs->r[4].max);
  assert_true(rs->r[5].has_path);
  assert_string_equal("ebdman", rs->r[5].agent);
  chaos_rules_free(rs);
}

static void bad_rules_are_refused_naming_line_and_word(void **state)
{
  parse_bad("status code=429\nstatus\n", "line 2: a status rule needs code=N");
  parse_bad("explode rate=1", "line 1: unknown fault \"explode\"");
  parse_bad("delay ms=10 rat=0.5", "unknown key \"rat\"");
  parse_bad("delay ms=10 rate=1.5", "rate \"1.5\": want a number in [0, 1]");
  parse_bad("delay", "a delay rule needs ms=N");
  parse_bad("delay ms=0", "ms \"0\": want a number from 1");
  parse_bad("status code=200", "code \"200\": want a number from 400 to 599");
  parse_bad("reset bytes=10", "a reset rule takes no bytes");
  parse_bad("reset verb=GOT", "verb \"GOT\"");
  parse_bad("reset rate", "\"rate\": want key=value");
  parse_bad("cut verb=LIST after-ms=10", "a cut rule applies to WATCH only");
  parse_bad("cut", "a cut rule needs after-ms=N or after-bytes=N");
  parse_bad("garble path=(", "path \"(\"");
  parse_bad("garble max=0", "max \"0\"");
}

static struct chaos_req req(const char *method, const char *target)
{
  struct chaos_req rq;
  chaos_classify(method, target, "ebdman/1", &rq);
  return rq;
}

static void the_first_rule_that_hits_wins(void **state)
{
  struct chaos_rules *rs = parse_ok("reset verb=DELETE\n"
                                    "status code=503 resource=ebds/status\n"
                                    "status code=429 resource=ebds agent=ebdman max=2\n"
                                    "garble path=^/api/v1/\n");
  struct chaos_action a;
  uint64_t rng = 1;
  struct chaos_req st = req("PATCH", "/apis/g/v1/namespaces/n/ebds/a/status"),
                   ebd = req("GET", "/apis/g/v1/namespaces/n/ebds/a"),
                   cm = req("GET", "/api/v1/namespaces/n/configmaps"),
                   del = req("DELETE", "/api/v1/namespaces/n/configmaps/c"),
                   other = req("GET", "/apis/g/v1/namespaces/n/vfms");

  assert_true(chaos_rules_pick(rs, &st, &rng, &a));
  assert_int_equal(503, a.code); /* the subresource rule comes first */
  assert_int_equal(2, a.line);
  assert_true(chaos_rules_pick(rs, &ebd, &rng, &a));
  assert_int_equal(429, a.code);
  assert_true(chaos_rules_pick(rs, &ebd, &rng, &a));
  assert_false(chaos_rules_pick(rs, &ebd, &rng, &a)); /* max=2 reached */
  assert_int_equal(CHAOS_NONE, a.fault);
  assert_true(chaos_rules_pick(rs, &cm, &rng, &a));
  assert_int_equal(CHAOS_GARBLE, a.fault);
  assert_true(chaos_rules_pick(rs, &del, &rng, &a));
  assert_int_equal(CHAOS_RESET, a.fault);
  assert_false(chaos_rules_pick(rs, &other, &rng, &a));
  chaos_rules_free(rs);
}

/* The draws follow the rate and, for one seed, are the same every time. */
static void rates_are_honoured_and_seeded(void **state)
{
  struct chaos_rules *rs = parse_ok("status code=500 rate=0.2\n");
  struct chaos_req rq = req("GET", "/api/v1/namespaces/n/configmaps/c");
  struct chaos_action a;
  char first[1000], again[1000];
  uint64_t rng = 42;
  int hits = 0;

  for(int i = 0; i < 1000; i++)
    hits += first[i] = chaos_rules_pick(rs, &rq, &rng, &a);
  assert_in_range(hits, 150, 250);
  rng = 42;
  for(int i = 0; i < 1000; i++)
    again[i] = chaos_rules_pick(rs, &rq, &rng, &a);
  assert_memory_equal(first, again, sizeof(first));
  chaos_rules_free(rs);
  rs = parse_ok("status code=500 rate=0\nreset rate=1\n");
  assert_true(chaos_rules_pick(rs, &rq, &rng, &a));
  assert_int_equal(CHAOS_RESET, a.fault);
  chaos_rules_free(rs);
}

static void fault_names_for_metrics(void **state)
{
  char n[16];
  chaos_fault_name(&(struct chaos_action){.fault = CHAOS_STATUS, .code = 504}, n);
  assert_string_equal("status_504", n);
  chaos_fault_name(&(struct chaos_action){.fault = CHAOS_CUT}, n);
  assert_string_equal("cut", n);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(requests_are_classified_by_verb_and_resource),
      cmocka_unit_test(the_agent_is_the_user_agents_product),
      cmocka_unit_test(rules_parse_with_defaults),
      cmocka_unit_test(bad_rules_are_refused_naming_line_and_word),
      cmocka_unit_test(the_first_rule_that_hits_wins),
      cmocka_unit_test(rates_are_honoured_and_seeded),
      cmocka_unit_test(fault_names_for_metrics),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
