/* The ring's membership (kcr/shard.h) on the real apiserver's Leases:
 * members agree on one assignment; a member that stops renewing is out one
 * lease duration after its record last changed, judged on the local clock
 * (a renewTime far in the past does not matter while the record changes);
 * a member that leaves is out at once, its Lease's holder cleared; bad
 * options are refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "itest.h"
#include "kcr/json.h"
#include "kcr/shard.h"
#include "kcr/time.h"

ITEST_CLIENT_FIXTURE

static const struct kcr_gvr leases = {.group = "coordination.k8s.io",
                                      .version = "v1",
                                      .resource = "leases",
                                      .namespaced = true};

struct changes {
  _Atomic int n;
};

static void count_change(kcr_ring *r, void *ud)
{
  (void)r;
  struct changes *c = ud;
  c->n++;
}

static kcr_ring *member(const char *ns, const char *id, uint64_t lease_ms,
                        struct changes *ch)
{
  kcr_ring *r = NULL;
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  itest_expect(KCR_OK,
               kcr_ring_new(&(struct kcr_ring_opts){.client = cl,
                                                    .ns = ns,
                                                    .name = "ring",
                                                    .identity = id,
                                                    .lease_duration_ms = lease_ms,
                                                    .renew_deadline_ms = lease_ms * 3 / 4,
                                                    .retry_period_ms = 400},
                            &r, &ei),
               &ei);
  if(ch)
    assert_int_equal(KCR_OK, kcr_ring_add_listener(r, count_change, ch));
  assert_int_equal(KCR_OK, kcr_ring_start(r));
  kcr_errinfo_cleanup(&ei);
  return r;
}

static size_t members_now(kcr_ring *r)
{
  kcr_ring_view *v = kcr_ring_view_get(r);
  size_t n = kcr_ring_view_len(v);
  kcr_ring_view_unref(v);
  return n;
}

/* Waits up to ms until r sees n members; returns the time it took (ms). */
static uint64_t wait_members(kcr_ring *r, size_t n, uint64_t ms)
{
  uint64_t t0 = kcr_time_mono_ms();
  while(members_now(r) != n) {
    if(kcr_time_mono_ms() - t0 > ms)
      fail_msg("%s sees %zu members, not %zu, after %llu ms", kcr_ring_identity(r),
               members_now(r), n, (unsigned long long)ms);
    itest_sleep_ms(20);
  }
  return kcr_time_mono_ms() - t0;
}

static void members_agree_on_one_assignment(void **state)
{
  (void)state;
  char *ns = itest_namespace(cl, "ring");
  struct changes ch = {0};
  kcr_ring *r[3] = {member(ns, "a", 5000, &ch), member(ns, "b", 5000, NULL),
                    member(ns, "c", 5000, NULL)};
  kcr_ring_view *v[3];
  size_t owned = 0;

  for(int i = 0; i < 3; i++)
    assert_true(kcr_ring_wait_joined(r[i], 20000));
  for(int i = 0; i < 3; i++)
    wait_members(r[i], 3, 10000);
  for(int i = 0; i < 3; i++) {
    v[i] = kcr_ring_view_get(r[i]);
    assert_true(kcr_ring_may_write(r[i]));
    assert_string_equal(kcr_ring_view_member(v[i], 0), "a");
    assert_string_equal(kcr_ring_view_member(v[i], 2), "c");
    assert_null(kcr_ring_view_member(v[i], 3));
    owned += kcr_ring_view_owned(v[i]);
    assert_in_range(kcr_ring_view_owned(v[i]), 85, 86);
  }
  assert_int_equal(256, owned);
  for(uint64_t b = 0; b < KCR_RING_BUCKETS; b++) {
    uint64_t h = b << 56 | 0x1234;
    int mine = 0;
    for(int i = 0; i < 3; i++)
      mine += kcr_ring_view_mine(v[i], h);
    assert_int_equal(1, mine);
    assert_string_equal(kcr_ring_view_owner(v[0], h), kcr_ring_view_owner(v[1], h));
    assert_string_equal(kcr_ring_view_owner(v[0], h), kcr_ring_view_owner(v[2], h));
  }
  /* a's listener runs for each view it publishes (1, 2 or 3 members),
   * just after the view is published */
  for(int i = 0; i < 100 && (uint64_t)ch.n != kcr_ring_view_epoch(v[0]); i++)
    itest_sleep_ms(10);
  assert_true(ch.n >= 1 && (uint64_t)ch.n == kcr_ring_view_epoch(v[0]));
  for(int i = 0; i < 3; i++) {
    kcr_ring_view_unref(v[i]);
    kcr_ring_free(r[i]);
  }
  itest_namespace_drop(cl, ns);
}

/* A Lease of the ring written by hand, with any name and holder, and a
 * duration of secs. */
static void lease_named(const char *ns, const char *name, const char *holder, int secs,
                        int renewal)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  cJSON *l = itest_json("{\"apiVersion\":\"coordination.k8s.io/v1\",\"kind\":\"Lease\","
                        "\"metadata\":{\"name\":\"%s\",\"labels\":{\"" KCR_RING_LABEL
                        "\":\"ring\"}},"
                        "\"spec\":{\"holderIdentity\":\"%s\",\"leaseDurationSeconds\":%d,"
                        "\"renewTime\":\"2000-01-01T00:00:%02d.000000Z\"}}",
                        name, holder, secs, renewal % 60);
  itest_expect(
      KCR_OK,
      kcr_apply(cl, &(struct kcr_ref){&leases, ns, name}, l,
                &(struct kcr_apply_opts){.field_manager = "ghost", .force = true}, NULL,
                &ei),
      &ei);
  cJSON_Delete(l);
  kcr_errinfo_cleanup(&ei);
}

/* A Lease of the ring written by hand: holder id, 2 s, and a renewTime of
 * the year 2000 (another machine's clock, far behind). */
static void ghost_lease(const char *ns, const char *id, int renewal)
{
  char name[64];
  snprintf(name, sizeof(name), "ring-%s", id);
  lease_named(ns, name, id, 2, renewal);
}

static void a_member_that_stops_renewing_is_out_after_its_lease_duration(void **state)
{
  (void)state;
  char *ns = itest_namespace(cl, "ring");
  kcr_ring *a = member(ns, "a", 3000, NULL);
  uint64_t t0, held;

  assert_true(kcr_ring_wait_joined(a, 20000));
  /* renewed every 0.5 s with a clock 26 years behind: a member all along */
  ghost_lease(ns, "ghost", 0);
  wait_members(a, 2, 5000);
  for(int i = 1; i <= 8; i++) {
    itest_sleep_ms(500);
    ghost_lease(ns, "ghost", i);
    assert_int_equal(2, members_now(a));
  }
  /* then no more: out 2 s after its last change reached the watch */
  t0 = kcr_time_mono_ms();
  held = wait_members(a, 1, 5000);
  printf("the ghost stayed a member %llu ms after its last renewal was written\n",
         (unsigned long long)held);
  /* the ring's clock for it started when the watch brought the last
   * renewal, which may be a little before the apply's answer (t0) */
  assert_true(kcr_time_mono_ms() - t0 >= 1500);
  kcr_ring_free(a);
  itest_namespace_drop(cl, ns);
}

/* Found held when the ring starts but never renewed since (a member that
 * died without leaving: its Lease stays held for 60 s), or held by an
 * identity other than its name's: no member. Before the first fix the
 * dead one counted for its whole lease from the start, so the starting
 * replica's map disagreed with the running ones'. */
static void leases_that_are_no_members(void **state)
{
  (void)state;
  char *ns = itest_namespace(cl, "ring");
  kcr_ring *a;

  lease_named(ns, "ring-dead", "dead", 60, 0);
  a = member(ns, "a", 5000, NULL);
  assert_true(kcr_ring_wait_joined(a, 20000));
  lease_named(ns, "ring-x", "y", 60, 0);
  for(int i = 1; i <= 6; i++) { /* 3 s: renewals of x, none of dead */
    itest_sleep_ms(500);
    lease_named(ns, "ring-x", "y", 60, i);
    kcr_ring_view *v = kcr_ring_view_get(a);
    assert_int_equal(1, kcr_ring_view_len(v));
    assert_string_equal("a", kcr_ring_view_member(v, 0));
    kcr_ring_view_unref(v);
  }
  /* once the dead one renews, it is a member */
  lease_named(ns, "ring-dead", "dead", 60, 1);
  wait_members(a, 2, 5000);
  kcr_ring_free(a);
  itest_namespace_drop(cl, ns);
}

/* A member's Lease deleted under it: the elector makes it again and the
 * ring labels it again, so the member stays one. */
static void a_deleted_lease_is_labelled_again(void **state)
{
  (void)state;
  char *ns = itest_namespace(cl, "ring");
  kcr_ring *a = member(ns, "a", 5000, NULL), *b = member(ns, "b", 5000, NULL);
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;

  assert_true(kcr_ring_wait_joined(a, 20000));
  assert_true(kcr_ring_wait_joined(b, 20000));
  wait_members(a, 2, 10000);
  itest_expect(KCR_OK,
               kcr_delete(cl, &(struct kcr_ref){&leases, ns, "ring-b"}, NULL, NULL, &ei),
               &ei);
  for(int i = 0; i < 100; i++) {
    cJSON *l = NULL;
    const char *label = NULL;
    if(!kcr_get(cl, &(struct kcr_ref){&leases, ns, "ring-b"}, &l, NULL))
      label = kcr_json_str(l, "/metadata/labels/kcr.dev~1ring");
    bool done = label && !strcmp(label, "ring");
    cJSON_Delete(l);
    if(done)
      break;
    itest_sleep_ms(100);
  }
  /* b is a member for a (again, or all along) */
  wait_members(a, 2, 10000);
  itest_sleep_ms(6000); /* past b's lease: still renewed and seen */
  assert_int_equal(2, members_now(a));
  kcr_errinfo_cleanup(&ei);
  kcr_ring_free(b);
  kcr_ring_free(a);
  itest_namespace_drop(cl, ns);
}

static void a_member_that_leaves_is_out_at_once(void **state)
{
  (void)state;
  char *ns = itest_namespace(cl, "ring");
  /* 10 s leases: leaving must not wait for them */
  kcr_ring *a = member(ns, "a", 10000, NULL), *b = member(ns, "b", 10000, NULL);
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  cJSON *l = NULL;
  uint64_t took;

  assert_true(kcr_ring_wait_joined(a, 20000));
  assert_true(kcr_ring_wait_joined(b, 20000));
  wait_members(a, 2, 10000);
  kcr_ring_stop(b);
  took = wait_members(a, 1, 3000);
  printf("a member that left was out of the others' view in %llu ms\n",
         (unsigned long long)took);
  assert_false(kcr_ring_may_write(b));
  assert_int_equal(0, members_now(b));
  itest_expect(KCR_OK, kcr_get(cl, &(struct kcr_ref){&leases, ns, "ring-b"}, &l, &ei),
               &ei);
  const char *holder = kcr_json_str(l, "/spec/holderIdentity");
  assert_string_equal("", holder ? holder : "");
  assert_string_equal("ring", kcr_json_str(l, "/metadata/labels/kcr.dev~1ring"));
  cJSON_Delete(l);
  kcr_errinfo_cleanup(&ei);
  /* all the buckets are a's now */
  kcr_ring_view *v = kcr_ring_view_get(a);
  assert_int_equal(256, kcr_ring_view_owned(v));
  kcr_ring_view_unref(v);
  kcr_ring_free(b);
  kcr_ring_free(a);
  itest_namespace_drop(cl, ns);
}

static void bad_options_are_refused(void **state)
{
  (void)state;
  kcr_ring *r = (kcr_ring *)1;
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  const struct kcr_ring_opts bad[] = {
      {.ns = "default", .name = "ring", .identity = "a"},
      {.client = cl, .name = "ring", .identity = "a"},
      {.client = cl, .ns = "default", .name = "Ring", .identity = "a"},
      {.client = cl, .ns = "default", .name = "ring"},
      {.client = cl, .ns = "default", .name = "ring", .identity = "Pod_1"},
      {.client = cl,
       .ns = "default",
       .name = "ring",
       .identity = "a",
       .lease_duration_ms = 1000,
       .renew_deadline_ms = 2000},
  };
  for(size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
    assert_int_equal(KCR_EINVAL, kcr_ring_new(&bad[i], &r, &ei));
    assert_null(r);
    assert_non_null(ei.message);
    kcr_errinfo_cleanup(&ei);
    r = (kcr_ring *)1;
  }
}

#define NCM 24

static bool saw(struct itest_seen *s, const char *ns, int i)
{
  char name[32];
  snprintf(name, sizeof(name), "cm-%02d", i);
  return itest_saw(s, ns, name);
}

static void managers_in_a_ring_share_the_reconciles(void **state)
{
  (void)state;
  char *ns = itest_namespace(cl, "ring");
  struct kcr_config_opts co = {0};
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  kcr_manager *m[2];
  struct itest_run run[2];
  struct itest_seen seen[2] = {ITEST_SEEN_INIT, ITEST_SEEN_INIT};
  kcr_ring_view *v;
  int both = 0;

  for(int i = 0; i < 2; i++) {
    kcr_informer *inf;
    struct kcr_manager_opts mo = {.name = "ringed",
                                  .health_addr = "127.0.0.1:0",
                                  .no_signals = true,
                                  .ring = "ctl",
                                  .identity = i ? "m1" : "m0",
                                  .lease_namespace = ns,
                                  .lease_duration_ms = 5000,
                                  .renew_deadline_ms = 4000,
                                  .retry_period_ms = 400};
    itest_expect(KCR_OK, kcr_config_load(&co, &mo.config, &ei), &ei);
    itest_expect(KCR_OK, kcr_manager_new(&mo, &m[i], &ei), &ei);
    kcr_config_free(mo.config);
    assert_non_null(kcr_manager_ring(m[i]));
    assert_false(kcr_manager_leading(m[i]));
    itest_expect(KCR_OK,
                 kcr_manager_informer(
                     m[i],
                     &(struct kcr_informer_opts){.gvr = &itest_configmaps, .ns = ns},
                     &inf, &ei),
                 &ei);
    itest_seen_controller(m[i], kcr_manager_client(m[i]), "cm", inf, &seen[i]);
    itest_run_start(&run[i], m[i]);
  }
  wait_members(kcr_manager_ring(m[0]), 2, 20000);
  wait_members(kcr_manager_ring(m[1]), 2, 20000);
  for(int i = 0; i < NCM; i++) {
    cJSON *o = itest_json("{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\","
                          "\"metadata\":{\"name\":\"cm-%02d\"}}",
                          i);
    itest_expect(
        KCR_OK,
        kcr_create(cl, &(struct kcr_ref){&itest_configmaps, ns}, o, NULL, NULL, &ei),
        &ei);
    cJSON_Delete(o);
  }
  /* each by its owner, and only by it */
  v = kcr_ring_view_get(kcr_manager_ring(m[0]));
  for(int i = 0; i < NCM; i++) {
    char name[32];
    cJSON *o = NULL;
    snprintf(name, sizeof(name), "cm-%02d", i);
    itest_expect(KCR_OK,
                 kcr_get(cl, &(struct kcr_ref){&itest_configmaps, ns, name}, &o, &ei),
                 &ei);
    const char *uid = kcr_json_str(o, "/metadata/uid");
    const char *owner = kcr_ring_view_owner(v, kcr_shard_hash(uid, strlen(uid)));
    int who = !strcmp(owner, "m1");
    cJSON_Delete(o);
    assert_true(itest_wait_saw(&seen[who], ns, name, 10000));
  }
  itest_sleep_ms(500); /* time for a wrong one to show */
  for(int i = 0; i < NCM; i++)
    both += saw(&seen[0], ns, i) && saw(&seen[1], ns, i);
  assert_int_equal(0, both);
  kcr_ring_view_unref(v);
  /* m1 leaves: m0 takes its share at once (not after the lease) */
  itest_run_stop(&run[1], 0); /* frees it */
  uint64_t took = wait_members(kcr_manager_ring(m[0]), 1, 2000);
  printf("a manager that stopped left m0's view in %llu ms\n", (unsigned long long)took);
  for(int i = 0; i < NCM; i++) {
    char name[32];
    snprintf(name, sizeof(name), "cm-%02d", i);
    assert_true(itest_wait_saw(&seen[0], ns, name, 10000));
  }
  itest_run_stop(&run[0], 0); /* frees the manager */
  kcr_errinfo_cleanup(&ei);
  itest_namespace_drop(cl, ns);
}

/* A replica whose ring Lease is taken (its holder overwritten) has lost it:
 * its writes are fenced at once and its manager stops with status 1. */
static void a_manager_that_loses_its_ring_lease_stops_with_1(void **state)
{
  (void)state;
  char *ns = itest_namespace(cl, "ring");
  struct kcr_config_opts co = {0};
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  struct kcr_manager_opts mo = {.name = "ringed",
                                .health_addr = "127.0.0.1:0",
                                .no_signals = true,
                                .ring = "ctl",
                                .identity = "m0",
                                .lease_namespace = ns,
                                .lease_duration_ms = 5000,
                                .renew_deadline_ms = 4000,
                                .retry_period_ms = 400};
  struct itest_run run;
  struct itest_seen seen = ITEST_SEEN_INIT;
  kcr_manager *m;
  kcr_informer *inf;
  kcr_err rc = KCR_ECONFLICT;

  itest_expect(KCR_OK, kcr_config_load(&co, &mo.config, &ei), &ei);
  itest_expect(KCR_OK, kcr_manager_new(&mo, &m, &ei), &ei);
  kcr_config_free(mo.config);
  itest_expect(
      KCR_OK,
      kcr_manager_informer(
          m, &(struct kcr_informer_opts){.gvr = &itest_configmaps, .ns = ns}, &inf, &ei),
      &ei);
  itest_seen_controller(m, kcr_manager_client(m), "cm", inf, &seen);
  itest_run_start(&run, m);
  assert_true(kcr_ring_wait_joined(kcr_manager_ring(m), 20000));
  assert_true(kcr_ring_may_write(kcr_manager_ring(m)));
  for(int i = 0; i < 20 && rc == KCR_ECONFLICT; i++) {
    cJSON *l = NULL;
    kcr_errinfo_cleanup(&ei);
    itest_expect(KCR_OK, kcr_get(cl, &(struct kcr_ref){&leases, ns, "ctl-m0"}, &l, &ei),
                 &ei);
    assert_int_equal(KCR_OK, kcr_json_set_str(l, "/spec/holderIdentity", "intruder"));
    rc = kcr_update(cl, &(struct kcr_ref){&leases, ns, "ctl-m0"}, l, NULL, NULL, &ei);
    cJSON_Delete(l);
  }
  itest_expect(KCR_OK, rc, &ei);
  for(int i = 0; i < 100 && !kcr_ring_lost(kcr_manager_ring(m)); i++)
    itest_sleep_ms(100);
  assert_true(kcr_ring_lost(kcr_manager_ring(m)));
  assert_false(kcr_ring_may_write(kcr_manager_ring(m)));
  itest_run_stop(&run, 1); /* had stopped by itself; frees m */
  kcr_errinfo_cleanup(&ei);
  itest_namespace_drop(cl, ns);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(bad_options_are_refused),
      cmocka_unit_test(members_agree_on_one_assignment),
      cmocka_unit_test(a_member_that_stops_renewing_is_out_after_its_lease_duration),
      cmocka_unit_test(a_member_that_leaves_is_out_at_once),
      cmocka_unit_test(leases_that_are_no_members),
      cmocka_unit_test(a_deleted_lease_is_labelled_again),
      cmocka_unit_test(managers_in_a_ring_share_the_reconciles),
      cmocka_unit_test(a_manager_that_loses_its_ring_lease_stops_with_1),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
