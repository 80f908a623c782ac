/* The ring's membership (kcr/shard.h) on the real apiserver's Leases:
 * members agree on one assignment; a member that stops renewing is out one
 * lease duration after its record last changed, judged on the local clock
 * (a renewTime far in the past does not matter while the record changes);
 * a member that leaves is out at once, its Lease's holder cleared; bad
 * options are refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
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

/* Buckets owned (handed over) and assigned in r's current view. */
static void owned_assigned(kcr_ring *r, size_t *owned, size_t *assigned)
{
  kcr_ring_view *v = kcr_ring_view_get(r);
  *owned = kcr_ring_view_owned(v);
  *assigned = 0;
  for(uint64_t b = 0; b < KCR_RING_BUCKETS; b++)
    *assigned += kcr_ring_view_assigned(v, b << 56);
  kcr_ring_view_unref(v);
}

/* Waits up to ms until r owns every bucket assigned to it, and exactly
 * want of them (0: any number); returns the time it took (ms). */
static uint64_t wait_settled(kcr_ring *r, size_t want, uint64_t ms)
{
  uint64_t t0 = kcr_time_mono_ms();
  size_t owned, assigned;
  for(;;) {
    owned_assigned(r, &owned, &assigned);
    if(owned == assigned && (!want || owned == want))
      return kcr_time_mono_ms() - t0;
    if(kcr_time_mono_ms() - t0 > ms)
      fail_msg("%s owns %zu buckets of the %zu assigned (want %zu) after %llu ms",
               kcr_ring_identity(r), owned, assigned, want, (unsigned long long)ms);
    itest_sleep_ms(20);
  }
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
  for(int i = 0; i < 3; i++)
    wait_settled(r[i], 0, 5000); /* handed over */
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
  /* all the buckets are a's now (b released them as it left) */
  took = wait_settled(a, KCR_RING_BUCKETS, 2000);
  printf("and its buckets were a's %llu ms later\n", (unsigned long long)took);
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

/* A manager in ring "ctl" of ns as id (5 s leases), with an informer of
 * the ConfigMaps in ns. */
static bool ring_lead; /* ring_manager_by: with leader_elect too */

static kcr_manager *ring_manager_by(const char *ns, const char *id, kcr_informer **inf,
                                    enum kcr_shard_by by)
{
  struct kcr_config_opts co = {0};
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  struct kcr_manager_opts mo = {.name = "ringed",
                                .health_addr = "127.0.0.1:0",
                                .no_signals = true,
                                .ring = "ctl",
                                .leader_elect = ring_lead,
                                .identity = id,
                                .lease_namespace = ns,
                                .lease_duration_ms = 5000,
                                .renew_deadline_ms = 4000,
                                .retry_period_ms = 400};
  kcr_manager *m;

  itest_expect(KCR_OK, kcr_config_load(&co, &mo.config, &ei), &ei);
  itest_expect(KCR_OK, kcr_manager_new(&mo, &m, &ei), &ei);
  kcr_config_free(mo.config);
  itest_expect(
      KCR_OK,
      kcr_manager_informer(
          m,
          &(struct kcr_informer_opts){.gvr = &itest_configmaps, .ns = ns, .shard_by = by},
          inf, &ei),
      &ei);
  kcr_errinfo_cleanup(&ei);
  return m;
}

static kcr_manager *ring_manager(const char *ns, const char *id, kcr_informer **inf)
{
  return ring_manager_by(ns, id, inf, KCR_SHARD_BY_NONE);
}

static void managers_in_a_ring_share_the_reconciles(void **state)
{
  (void)state;
  char *ns = itest_namespace(cl, "ring");
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  kcr_manager *m[2];
  struct itest_run run[2];
  struct itest_seen seen[2] = {ITEST_SEEN_INIT, ITEST_SEEN_INIT};
  kcr_ring_view *v;
  int both = 0;

  for(int i = 0; i < 2; i++) {
    kcr_informer *inf;
    m[i] = ring_manager(ns, i ? "m1" : "m0", &inf);
    assert_non_null(kcr_manager_ring(m[i]));
    assert_false(kcr_manager_leading(m[i]));
    itest_seen_controller(m[i], kcr_manager_client(m[i]), "cm", inf, &seen[i]);
    itest_run_start(&run[i], m[i]);
  }
  wait_members(kcr_manager_ring(m[0]), 2, 20000);
  wait_members(kcr_manager_ring(m[1]), 2, 20000);
  wait_settled(kcr_manager_ring(m[0]), 0, 5000); /* handed over */
  wait_settled(kcr_manager_ring(m[1]), 0, 5000);
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

/* What a reconcile of a sharded cache saw: the keys it reconciled while
 * their object was gone from the cache (a delete). */
struct absent {
  kcr_store *st;
  pthread_mutex_t mu;
  int n;
  char key[NCM][64];
};

static kcr_err absent_reconcile(kcr_ctx *cx, const struct kcr_request *req,
                                struct kcr_result *res, void *ud)
{
  struct absent *a = ud;
  kcr_obj *o = kcr_store_ref(a->st, req->ns, req->name);
  (void)cx;
  (void)res;
  if(!o) {
    pthread_mutex_lock(&a->mu);
    if(a->n < NCM)
      snprintf(a->key[a->n++], 64, "%s/%s", req->ns, req->name);
    pthread_mutex_unlock(&a->mu);
  }
  kcr_obj_unref(o);
  return KCR_OK;
}

static bool absent_saw(struct absent *a, const char *key)
{
  pthread_mutex_lock(&a->mu);
  bool y = false;
  for(int i = 0; i < a->n && !y; i++)
    y = !strcmp(a->key[i], key);
  pthread_mutex_unlock(&a->mu);
  return y;
}

/* Two managers whose For caches are sharded (KCR_SHARD_BY_UID): each
 * caches the objects of its buckets alone, and the delete of one is
 * reconciled by the replica that cached it - also when the bucket of the
 * key's text is the other's (the controller remembers the deleted
 * object's uid). */
static void sharded_caches_hold_their_share_and_the_owner_sees_the_delete(void **state)
{
  (void)state;
  char *ns = itest_namespace(cl, "ringc");
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  kcr_manager *m[2];
  kcr_informer *inf[2];
  struct itest_run run[2];
  struct absent ab[2] = {{.mu = PTHREAD_MUTEX_INITIALIZER},
                         {.mu = PTHREAD_MUTEX_INITIALIZER}};
  char uid[NCM][40];
  size_t mine[2] = {0, 0};
  kcr_ring_view *v;
  int pick = -1, who = 0;

  for(int i = 0; i < 2; i++) {
    kcr_controller *ctl;
    m[i] = ring_manager_by(ns, i ? "m1" : "m0", &inf[i], KCR_SHARD_BY_UID);
    ab[i].st = kcr_informer_store(inf[i]);
    itest_expect(KCR_OK,
                 kcr_controller_new(
                     &(struct kcr_controller_opts){.name = "cm",
                                                   .reconcile = absent_reconcile,
                                                   .ud = &ab[i],
                                                   .client = kcr_manager_client(m[i])},
                     &ctl, &ei),
                 &ei);
    itest_expect(KCR_OK, kcr_controller_for(ctl, inf[i], NULL), &ei);
    itest_expect(KCR_OK, kcr_manager_add(m[i], ctl), &ei);
    itest_run_start(&run[i], m[i]);
  }
  wait_members(kcr_manager_ring(m[0]), 2, 20000);
  wait_members(kcr_manager_ring(m[1]), 2, 20000);
  wait_settled(kcr_manager_ring(m[0]), 0, 5000);
  wait_settled(kcr_manager_ring(m[1]), 0, 5000);
  for(int i = 0; i < NCM; i++) {
    cJSON *o = itest_json("{\"metadata\":{\"name\":\"cm-%02d\"}}", i), *made = NULL;
    itest_expect(
        KCR_OK,
        kcr_create(cl, &(struct kcr_ref){&itest_configmaps, ns}, o, NULL, &made, &ei),
        &ei);
    snprintf(uid[i], sizeof(uid[i]), "%s", kcr_json_str(made, "/metadata/uid"));
    cJSON_Delete(o);
    cJSON_Delete(made);
  }
  v = kcr_ring_view_get(kcr_manager_ring(m[0]));
  for(int i = 0; i < NCM; i++) {
    char key[64];
    uint64_t h = kcr_shard_hash(uid[i], strlen(uid[i]));
    int w = !strcmp(kcr_ring_view_owner(v, h), "m1");
    mine[w]++;
    snprintf(key, sizeof(key), "%s/cm-%02d", ns, i);
    /* one whose key text is placed on the other replica */
    if(pick < 0 && strcmp(kcr_ring_view_owner(v, kcr_shard_hash(key, strlen(key))),
                          kcr_ring_view_owner(v, h))) {
      pick = i;
      who = w;
    }
  }
  kcr_ring_view_unref(v);
  for(int t = 0; t < 500 && (kcr_store_len(ab[0].st) != mine[0] ||
                             kcr_store_len(ab[1].st) != mine[1]);
      t++)
    itest_sleep_ms(10);
  printf("sharded caches: m0 holds %zu, m1 %zu of %d\n", kcr_store_len(ab[0].st),
         kcr_store_len(ab[1].st), NCM);
  assert_int_equal(kcr_store_len(ab[0].st), mine[0]);
  assert_int_equal(kcr_store_len(ab[1].st), mine[1]);
  assert_true(pick >= 0); /* (24 objects: all alike has odds 2^-24) */
  char name[32], key[64];
  snprintf(name, sizeof(name), "cm-%02d", pick);
  snprintf(key, sizeof(key), "%s/%s", ns, name);
  itest_expect(
      KCR_OK,
      kcr_delete(cl, &(struct kcr_ref){&itest_configmaps, ns, name}, NULL, NULL, &ei),
      &ei);
  for(int t = 0; t < 1000 && !absent_saw(&ab[who], key); t++)
    itest_sleep_ms(10);
  assert_true(absent_saw(&ab[who], key));
  assert_false(absent_saw(&ab[!who], key));
  itest_run_stop(&run[1], 0);
  itest_run_stop(&run[0], 0);
  kcr_errinfo_cleanup(&ei);
  itest_namespace_drop(cl, ns);
}

/* A ring whose managers also elect a leader (leader_elect): the
 * controllers run on every member at once, and one member leads - for the
 * cluster's singletons (the webhook certificates); when it leaves, another
 * leads. */
static void a_ring_elects_one_leader_for_its_singletons(void **state)
{
  (void)state;
  char *ns = itest_namespace(cl, "ringl");
  kcr_manager *m[2];
  struct itest_run run[2];
  struct itest_seen seen[2] = {ITEST_SEEN_INIT, ITEST_SEEN_INIT};
  int leaders = 0, who = -1;

  ring_lead = true;
  for(int i = 0; i < 2; i++) {
    kcr_informer *inf;
    m[i] = ring_manager(ns, i ? "m1" : "m0", &inf);
    itest_seen_controller(m[i], kcr_manager_client(m[i]), "cm", inf, &seen[i]);
    itest_run_start(&run[i], m[i]);
  }
  ring_lead = false;
  wait_members(kcr_manager_ring(m[0]), 2, 20000);
  wait_members(kcr_manager_ring(m[1]), 2, 20000);
  for(int t = 0; t < 1000 && !leaders; t++) {
    leaders = kcr_manager_leading(m[0]) + kcr_manager_leading(m[1]);
    if(!leaders)
      itest_sleep_ms(10);
  }
  assert_int_equal(leaders, 1);
  who = kcr_manager_leading(m[1]);
  /* both reconcile their shares meanwhile */
  wait_settled(kcr_manager_ring(m[0]), 0, 5000);
  wait_settled(kcr_manager_ring(m[1]), 0, 5000);
  kcr_ring_view *v = kcr_ring_view_get(kcr_manager_ring(m[!who]));
  assert_true(kcr_ring_view_owned(v) > 0);
  kcr_ring_view_unref(v);
  /* the leader leaves: the other leads (its Lease released, at once) */
  itest_run_stop(&run[who], 0);
  for(int t = 0; t < 1000 && !kcr_manager_leading(m[!who]); t++)
    itest_sleep_ms(10);
  assert_true(kcr_manager_leading(m[!who]));
  itest_run_stop(&run[!who], 0);
  itest_namespace_drop(cl, ns);
}

/* The ghost's Lease, "ring-ghost" held by "ghost" for 2 s, saying it holds
 * every bucket (hold) or none, as a replica's KCR_RING_HOLDS says. */
static void ghost_holding(const char *ns, bool hold, int renewal)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  char bits[65];
  memset(bits, hold ? 'f' : '0', 64);
  bits[64] = '\0';
  cJSON *l =
      itest_json("{\"apiVersion\":\"coordination.k8s.io/v1\",\"kind\":\"Lease\","
                 "\"metadata\":{\"name\":\"ring-ghost\",\"labels\":{\"" KCR_RING_LABEL
                 "\":\"ring\"},\"annotations\":{\"" KCR_RING_HOLDS "\":\"%d:%s\"}},"
                 "\"spec\":{\"holderIdentity\":\"ghost\",\"leaseDurationSeconds\":2,"
                 "\"renewTime\":\"2000-01-01T00:00:%02d.000000Z\"}}",
                 renewal + 1, bits, renewal % 60);
  itest_expect(
      KCR_OK,
      kcr_apply(cl, &(struct kcr_ref){&leases, ns, "ring-ghost"}, l,
                &(struct kcr_apply_opts){.field_manager = "ghost", .force = true}, NULL,
                &ei),
      &ei);
  cJSON_Delete(l);
  kcr_errinfo_cleanup(&ei);
}

/* Member "a" of a ring where the ghost (renewed meanwhile, renewal counts
 * its renewals) holds every bucket: once a sees it as a member. */
static kcr_ring *member_beside_ghost(const char *ns, int *renewal)
{
  kcr_ring *a;
  ghost_holding(ns, true, (*renewal)++);
  a = member(ns, "a", 3000, NULL);
  assert_true(kcr_ring_wait_joined(a, 20000));
  for(int i = 0; i < 25 && members_now(a) != 2; i++) { /* seen renewed */
    ghost_holding(ns, true, (*renewal)++);
    itest_sleep_ms(400);
  }
  assert_int_equal(2, members_now(a));
  return a;
}

/* Hand-over: a bucket assigned to a replica becomes its own only once no
 * other live Lease says it holds it - released (the ghost publishes that it
 * holds none) or expired (the ghost stops renewing, still holding all). */
static void a_bucket_moves_only_once_its_holder_releases_it_or_expires(void **state)
{
  (void)state;
  char *ns = itest_namespace(cl, "ring");
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  kcr_ring *a;
  size_t owned, assigned;
  uint64_t t0, took;
  int renewal = 0;
  cJSON *l = NULL;

  a = member_beside_ghost(ns, &renewal);
  /* 1. held by a live ghost: assigned to a, not a's */
  for(int i = 0; i < 5; i++) {
    ghost_holding(ns, true, renewal++);
    itest_sleep_ms(400);
    owned_assigned(a, &owned, &assigned);
    assert_int_equal(0, owned);
    assert_true(assigned > 64 && assigned < 192);
  }
  /* 2. released by the ghost (still a member): a's at once */
  ghost_holding(ns, false, renewal++);
  took = wait_settled(a, assigned, 1500);
  printf("released buckets were taken over in %llu ms\n", (unsigned long long)took);
  assert_int_equal(2, members_now(a));
  /* 3. the ghost claims all again, then dies holding them: a keeps what it
   * owns (a later claim does not take a bucket from its owner) and gets
   * the rest only when the ghost's Lease expires, 2 s after its last
   * renewal */
  ghost_holding(ns, true, renewal++);
  t0 = kcr_time_mono_ms();
  itest_sleep_ms(1200);
  owned_assigned(a, &owned, &assigned);
  assert_int_equal(assigned, owned);
  assert_true(owned < KCR_RING_BUCKETS);
  took = wait_settled(a, KCR_RING_BUCKETS, 6000);
  printf("a dead holder's buckets were taken over %llu ms after its last renewal\n",
         (unsigned long long)(kcr_time_mono_ms() - t0));
  assert_true(kcr_time_mono_ms() - t0 >= 1500);
  /* a's Lease says what it holds: everything */
  itest_expect(KCR_OK, kcr_get(cl, &(struct kcr_ref){&leases, ns, "ring-a"}, &l, &ei),
               &ei);
  const char *holds = kcr_json_str(l, "/metadata/annotations/kcr.dev~1ring-holds");
  assert_non_null(holds);
  assert_non_null(strchr(holds, ':'));
  assert_string_equal("ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff",
                      strchr(holds, ':') + 1);
  cJSON_Delete(l);
  kcr_ring_free(a);
  kcr_errinfo_cleanup(&ei);
  itest_namespace_drop(cl, ns);
}

/* A Lease deleted under its holder (who may not know yet and still write)
 * keeps its buckets from the others until it would have expired. Before
 * the fix the delete freed them at once. */
static void a_deleted_lease_holds_its_buckets_until_it_would_have_expired(void **state)
{
  (void)state;
  char *ns = itest_namespace(cl, "ring");
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  kcr_ring *a;
  size_t owned, assigned;
  uint64_t t0;
  int renewal = 0;

  a = member_beside_ghost(ns, &renewal);
  ghost_holding(ns, true, renewal++);
  itest_expect(
      KCR_OK,
      kcr_delete(cl, &(struct kcr_ref){&leases, ns, "ring-ghost"}, NULL, NULL, &ei), &ei);
  t0 = kcr_time_mono_ms();
  wait_members(a, 1, 2000); /* no member now... */
  itest_sleep_ms(800);
  owned_assigned(a, &owned, &assigned);
  assert_int_equal(0, owned); /* ...but its buckets are not a's yet */
  wait_settled(a, KCR_RING_BUCKETS, 6000);
  printf(
      "a deleted Lease's buckets were taken over %llu ms after the delete (2 s lease)\n",
      (unsigned long long)(kcr_time_mono_ms() - t0));
  assert_true(kcr_time_mono_ms() - t0 >= 1500);
  kcr_ring_free(a);
  kcr_errinfo_cleanup(&ei);
  itest_namespace_drop(cl, ns);
}

/* What a listener saw when the ring stopped: the view it was called with
 * (buckets owned) and whether this replica could still write. */
struct at_stop {
  _Atomic int calls;
  _Atomic int owned_then, writable_then;
};

static void note_stop(kcr_ring *r, void *ud)
{
  struct at_stop *s = ud;
  kcr_ring_view *v = kcr_ring_view_get(r);
  if(kcr_ring_view_len(v) == 0) { /* the empty view of a stop */
    s->owned_then = (int)kcr_ring_view_owned(v);
    s->writable_then = kcr_ring_may_write(r);
    s->calls++;
  }
  kcr_ring_view_unref(v);
}

/* Leaving, a replica gives its buckets up (its listeners drain them) while
 * it still holds its Lease - before the others may take them. Before the
 * fix it released the Lease first and told no listener. */
static void a_leaving_member_gives_its_buckets_up_before_its_lease(void **state)
{
  (void)state;
  char *ns = itest_namespace(cl, "ring");
  struct at_stop st = {0};
  kcr_ring *a = member(ns, "a", 3000, NULL);

  assert_int_equal(KCR_OK, kcr_ring_add_listener(a, note_stop, &st));
  assert_true(kcr_ring_wait_joined(a, 20000));
  wait_settled(a, KCR_RING_BUCKETS, 5000);
  kcr_ring_stop(a);
  assert_int_equal(1, st.calls);
  assert_int_equal(0, st.owned_then);
  assert_int_equal(1, st.writable_then); /* the Lease was still held */
  assert_false(kcr_ring_may_write(a));
  kcr_ring_free(a);
  itest_namespace_drop(cl, ns);
}

/* Another process applying what this replica holds to its Lease (two
 * processes with one identity) makes this one stop writing: lost. Before
 * the fix both went on as one member. */
static void another_process_with_our_identity_is_noticed(void **state)
{
  (void)state;
  char *ns = itest_namespace(cl, "ring");
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  kcr_ring *a = member(ns, "a", 3000, NULL);
  cJSON *l;

  assert_true(kcr_ring_wait_joined(a, 20000));
  wait_settled(a, KCR_RING_BUCKETS, 5000);
  assert_true(kcr_ring_may_write(a));
  assert_false(kcr_ring_lost(a));
  l = itest_json("{\"apiVersion\":\"coordination.k8s.io/v1\",\"kind\":\"Lease\","
                 "\"metadata\":{\"name\":\"ring-a\",\"annotations\":{\"" KCR_RING_HOLDS
                 "\":\"7:%064d\"}}}",
                 0);
  itest_expect(KCR_OK,
               kcr_apply(cl, &(struct kcr_ref){&leases, ns, "ring-a"}, l,
                         &(struct kcr_apply_opts){.field_manager = "twin", .force = true},
                         NULL, &ei),
               &ei);
  cJSON_Delete(l);
  for(int i = 0; i < 100 && !kcr_ring_lost(a); i++)
    itest_sleep_ms(20);
  assert_true(kcr_ring_lost(a));
  assert_false(kcr_ring_may_write(a));
  kcr_ring_free(a);
  kcr_errinfo_cleanup(&ei);
  itest_namespace_drop(cl, ns);
}

/* The reconcile of one ConfigMap (target) blocks in m0 until released,
 * then writes; m1's writes at once. */
struct moving {
  char target[32];
  _Atomic int started, release;
  _Atomic int m0_rc;
  _Atomic uint64_t m0_returned_ms, m1_first_ms;
};

static char m0_detail[512]; /* the refused write's message */

/* A metric of m's registry after a render (which runs the collect hooks):
 * kcr_ring_* with the ring "ctl" (and direction dir, if given), or
 * kcr_controller_* with the controller "cm"; a histogram's count. */
static double ring_metric(kcr_manager *m, const char *name, const char *dir)
{
  kcr_metrics *reg = kcr_manager_metrics(m);
  struct kcr_buf text = KCR_BUF_INIT;
  bool ctl = !strncmp(name, "kcr_controller_", 15);
  const char *const names[] = {ctl ? "controller" : "ring", dir ? "direction" : NULL,
                               NULL};
  const char *const values[] = {ctl ? "cm" : "ctl", dir, NULL};
  kcr_metric *f = NULL;

  assert_int_equal(KCR_OK, kcr_metrics_render(reg, &text));
  kcr_buf_cleanup(&text);
  if(strstr(name, "_seconds")) {
    assert_int_equal(KCR_OK, kcr_metric_histogram(reg,
                                                  &(struct kcr_metric_opts){
                                                      .name = name,
                                                      .label_names = names,
                                                      .bounds = kcr_buckets_seconds,
                                                      .nbounds = kcr_buckets_seconds_n},
                                                  &f, NULL));
    return (double)kcr_metric_count(f, values);
  }
  if(strstr(name, "_total"))
    assert_int_equal(
        KCR_OK, kcr_metric_counter(
                    reg, &(struct kcr_metric_opts){.name = name, .label_names = names},
                    &f, NULL));
  else
    assert_int_equal(
        KCR_OK, kcr_metric_gauge(
                    reg, &(struct kcr_metric_opts){.name = name, .label_names = names},
                    &f, NULL));
  return kcr_metric_value(f, values);
}

struct moving_ctl {
  struct moving *mv;
  const char *id;
};

static kcr_err moving_reconcile(kcr_ctx *cx, const struct kcr_request *req,
                                struct kcr_result *res, void *ud)
{
  (void)res;
  struct moving_ctl *mc = ud;
  struct moving *mv = mc->mv;
  char body[128];
  kcr_err rc;

  if(strcmp(req->name, mv->target))
    return KCR_OK;
  if(!strcmp(mc->id, "m0")) {
    if(atomic_exchange(&mv->started, 1))
      return KCR_OK;
    for(int i = 0; i < 3000 && !atomic_load(&mv->release); i++)
      itest_sleep_ms(10);
  } else {
    uint64_t zero = 0;
    atomic_compare_exchange_strong(&mv->m1_first_ms, &zero, kcr_time_mono_ms());
  }
  snprintf(body, sizeof(body), "{\"metadata\":{\"annotations\":{\"written-by\":\"%s\"}}}",
           mc->id);
  rc = kcr_patch(kcr_ctx_client(cx),
                 &(struct kcr_ref){&itest_configmaps, req->ns, req->name},
                 &(struct kcr_patch_opts){KCR_PATCH_MERGE}, body, strlen(body), NULL,
                 kcr_ctx_ei(cx));
  if(!strcmp(mc->id, "m0")) {
    snprintf(m0_detail, sizeof(m0_detail), "%s",
             kcr_ctx_ei(cx)->message ? kcr_ctx_ei(cx)->message : "");
    atomic_store(&mv->m0_rc, rc);
    atomic_store(&mv->m0_returned_ms, kcr_time_mono_ms());
  }
  return rc;
}

static kcr_manager *moving_manager(const char *ns, struct moving_ctl *mc,
                                   struct itest_run *run)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  kcr_informer *inf;
  kcr_manager *m = ring_manager(ns, mc->id, &inf);
  kcr_controller *ctl;

  itest_expect(
      KCR_OK,
      kcr_controller_new(&(struct kcr_controller_opts){.name = "cm",
                                                       .reconcile = moving_reconcile,
                                                       .ud = mc,
                                                       .client = kcr_manager_client(m),
                                                       .metrics = kcr_manager_metrics(m)},
                         &ctl, &ei),
      &ei);
  itest_expect(KCR_OK, kcr_controller_for(ctl, inf, NULL), &ei);
  itest_expect(KCR_OK, kcr_manager_add(m, ctl), &ei);
  itest_run_start(run, m);
  kcr_errinfo_cleanup(&ei);
  return m;
}

/* The per-key write gate: m0 reconciles a ConfigMap whose bucket moves to
 * m1 when m1 joins; the write m0's reconcile makes after that is refused
 * (KCR_ECANCELED), and m1 reconciles the object only after m0's reconcile
 * returned (m0 drains before it hands the bucket over). */
static void a_write_from_a_reconcile_whose_key_moved_is_refused(void **state)
{
  (void)state;
  char *ns = itest_namespace(cl, "ring");
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  const char *const ids[] = {"m0", "m1"};
  uint32_t owner[KCR_RING_BUCKETS];
  struct moving mv = {.target = ""};
  struct moving_ctl mc[2] = {{&mv, "m0"}, {&mv, "m1"}};
  struct itest_run run[2];
  kcr_manager *m[2];
  cJSON *o = NULL;

  assert_int_equal(KCR_OK, kcr_ring_assign(ids, 2, owner));
  /* a ConfigMap whose bucket is m0's alone and m1's once both are members */
  int ncm = 0;
  for(int i = 0; !mv.target[0]; i++, ncm++) {
    char name[32];
    snprintf(name, sizeof(name), "cm-%02d", i);
    o = itest_json("{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\","
                   "\"metadata\":{\"name\":\"%s\"}}",
                   name);
    cJSON *got = NULL;
    itest_expect(
        KCR_OK,
        kcr_create(cl, &(struct kcr_ref){&itest_configmaps, ns}, o, NULL, &got, &ei),
        &ei);
    const char *uid = kcr_json_str(got, "/metadata/uid");
    if(owner[kcr_shard_bucket(kcr_shard_hash(uid, strlen(uid)))] == 1)
      snprintf(mv.target, sizeof(mv.target), "%s", name);
    cJSON_Delete(o);
    cJSON_Delete(got);
    assert_true(i < 40);
  }
  m[0] = moving_manager(ns, &mc[0], &run[0]);
  for(int i = 0; i < 2000 && !atomic_load(&mv.started); i++)
    itest_sleep_ms(10);
  assert_true(atomic_load(&mv.started));
  m[1] = moving_manager(ns, &mc[1], &run[1]);
  wait_members(kcr_manager_ring(m[0]), 2, 20000);
  assert_true(kcr_ring_wait_joined(kcr_manager_ring(m[1]), 20000));
  wait_members(kcr_manager_ring(m[1]), 2, 20000);
  /* m0 drains before it releases anything: m1 owns nothing meanwhile */
  itest_sleep_ms(500);
  kcr_ring_view *v = kcr_ring_view_get(kcr_manager_ring(m[1]));
  assert_int_equal(0, kcr_ring_view_owned(v));
  kcr_ring_view_unref(v);
  assert_int_equal(0, atomic_load(&mv.m1_first_ms));
  atomic_store(&mv.release, 1); /* m0's reconcile writes now */
  for(int i = 0; i < 1000 && !atomic_load(&mv.m1_first_ms); i++)
    itest_sleep_ms(10);
  assert_int_equal(KCR_ECANCELED, atomic_load(&mv.m0_rc));
  assert_non_null(strstr(m0_detail, "shard is not this replica's"));
  assert_true(atomic_load(&mv.m1_first_ms) != 0);
  assert_true(atomic_load(&mv.m1_first_ms) >= atomic_load(&mv.m0_returned_ms));
  printf("m1 began %llu ms after m0's refused write returned\n",
         (unsigned long long)(atomic_load(&mv.m1_first_ms) -
                              atomic_load(&mv.m0_returned_ms)));
  itest_sleep_ms(300);
  itest_expect(KCR_OK,
               kcr_get(cl, &(struct kcr_ref){&itest_configmaps, ns, mv.target}, &o, &ei),
               &ei);
  assert_string_equal("m1", kcr_json_str(o, "/metadata/annotations/written-by"));
  cJSON_Delete(o);
  /* what the hand-over left in the metrics */
  assert_true(ring_metric(m[1], "kcr_ring_handovers_total", "in") == 128);
  assert_true(ring_metric(m[0], "kcr_ring_handovers_total", "out") == 128);
  assert_true(ring_metric(m[1], "kcr_ring_buckets_assigned", NULL) == 128);
  assert_true(ring_metric(m[1], "kcr_ring_buckets_owned", NULL) == 128);
  assert_true(ring_metric(m[1], "kcr_ring_takeover_seconds", NULL) == 128); /* a count */
  assert_true(ring_metric(m[1], "kcr_controller_objects_owned", NULL) >= 1);
  assert_true(ring_metric(m[0], "kcr_controller_objects_owned", NULL) +
                  ring_metric(m[1], "kcr_controller_objects_owned", NULL) ==
              (double)ncm);
  itest_run_stop(&run[1], 0);
  itest_run_stop(&run[0], 0);
  kcr_errinfo_cleanup(&ei);
  itest_namespace_drop(cl, ns);
}

/* A replica whose ring Lease is taken (its holder overwritten) has lost it:
 * its writes are fenced at once and its manager stops with status 1. */
static void a_manager_that_loses_its_ring_lease_stops_with_1(void **state)
{
  (void)state;
  char *ns = itest_namespace(cl, "ring");
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  struct itest_run run;
  struct itest_seen seen = ITEST_SEEN_INIT;
  kcr_manager *m;
  kcr_informer *inf;
  kcr_err rc = KCR_ECONFLICT;

  m = ring_manager(ns, "m0", &inf);
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
      cmocka_unit_test(a_bucket_moves_only_once_its_holder_releases_it_or_expires),
      cmocka_unit_test(a_write_from_a_reconcile_whose_key_moved_is_refused),
      cmocka_unit_test(a_deleted_lease_holds_its_buckets_until_it_would_have_expired),
      cmocka_unit_test(a_leaving_member_gives_its_buckets_up_before_its_lease),
      cmocka_unit_test(another_process_with_our_identity_is_noticed),
      cmocka_unit_test(sharded_caches_hold_their_share_and_the_owner_sees_the_delete),
      cmocka_unit_test(a_ring_elects_one_leader_for_its_singletons),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
