/* Integration: an informer that caches some buckets only
 * (kcr_informer_opts.shard_by, kcr_informer_set_buckets), on the real
 * apiserver - with its ShardedListAndWatch gate off (the control plane's
 * default: objects filtered here) and on (restarted with the gate: the
 * server sends the selected buckets alone). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "itest.h"
#include "kcr.h"

ITEST_NAMESPACE_FIXTURE("ishard", false)

#define N 48

struct told {
  pthread_mutex_t mu;
  int adds, deletes;
};
static struct told told = {.mu = PTHREAD_MUTEX_INITIALIZER};

static void on_add(kcr_obj *o, void *ud)
{
  (void)o;
  pthread_mutex_lock(&told.mu);
  told.adds++;
  pthread_mutex_unlock(&told.mu);
}
static char updated[8][64];
static int nupdated;
static void on_update(kcr_obj *old, kcr_obj *cur, void *ud)
{
  pthread_mutex_lock(&told.mu);
  if(nupdated < 8)
    snprintf(updated[nupdated++], 64, "%s", kcr_obj_name(cur));
  pthread_mutex_unlock(&told.mu);
}
static void on_delete(kcr_obj *o, void *ud)
{
  (void)o;
  pthread_mutex_lock(&told.mu);
  told.deletes++;
  pthread_mutex_unlock(&told.mu);
}
static void told_reset(void)
{
  pthread_mutex_lock(&told.mu);
  told.adds = told.deletes = 0;
  pthread_mutex_unlock(&told.mu);
}
static int told_adds(void)
{
  pthread_mutex_lock(&told.mu);
  int n = told.adds;
  pthread_mutex_unlock(&told.mu);
  return n;
}
static int told_deletes(void)
{
  pthread_mutex_lock(&told.mu);
  int n = told.deletes;
  pthread_mutex_unlock(&told.mu);
  return n;
}

static unsigned bucket_of(const char *uid)
{
  return kcr_shard_bucket(kcr_shard_hash(uid, strlen(uid)));
}
static bool in_set(const uint8_t set[32], unsigned b) { return set[b / 8] >> b % 8 & 1; }

/* Makes ConfigMaps "<prefix>-<i>" (i < n), with a controller owner uid
 * when owner is set; their uids into uids[i]. */
static void make_cms(const char *prefix, int n, const char *owner, const char *oname,
                     char uids[][40])
{
  struct kcr_ref coll = {.gvr = &itest_configmaps, .ns = ns};
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  for(int i = 0; i < n; i++) {
    cJSON *made = NULL;
    cJSON *cm = owner
                    ? itest_json("{\"metadata\":{\"name\":\"%s-%d\",\"labels\":{\"t\":"
                                 "\"%s\"},\"ownerReferences\":[{\"apiVersion\":\"v1\","
                                 "\"kind\":\"ConfigMap\",\"name\":\"%s\",\"uid\":\"%s\","
                                 "\"controller\":true}]}}",
                                 prefix, i, prefix, oname, owner)
                    : itest_json("{\"metadata\":{\"name\":\"%s-%d\",\"labels\":{\"t\":"
                                 "\"%s\"}}}",
                                 prefix, i, prefix);
    itest_expect(KCR_OK, kcr_create(cl, &coll, cm, NULL, &made, &ei), &ei);
    snprintf(uids[i], 40, "%s", kcr_json_str(made, "/metadata/uid"));
    cJSON_Delete(cm);
    cJSON_Delete(made);
  }
}

static kcr_informer *sharded(enum kcr_shard_by by, const char *lsel, const uint8_t *set)
{
  kcr_informer *inf = NULL;
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  itest_expect(KCR_OK,
               kcr_informer_new(&(struct kcr_informer_opts){.client = cl,
                                                            .gvr = &itest_configmaps,
                                                            .ns = ns,
                                                            .label_selector = lsel,
                                                            .shard_by = by},
                                &inf, &ei),
               &ei);
  assert_int_equal(KCR_OK, kcr_informer_add_handlers(inf, &(struct kcr_informer_handlers){
                                                              .on_add = on_add,
                                                              .on_update = on_update,
                                                              .on_delete = on_delete}));
  if(set)
    assert_int_equal(KCR_OK, kcr_informer_set_buckets(inf, set));
  told_reset();
  assert_int_equal(KCR_OK, kcr_informer_start(inf));
  assert_true(kcr_informer_wait_synced(inf, 30000));
  return inf;
}

static size_t cached(kcr_informer *inf) { return kcr_store_len(kcr_informer_store(inf)); }

static bool has(kcr_informer *inf, const char *prefix, int i)
{
  char key[300];
  snprintf(key, sizeof(key), "%s/%s-%d", ns, prefix, i);
  kcr_obj *o = kcr_store_ref_key(kcr_informer_store(inf), key);
  kcr_obj_unref(o);
  return o != NULL;
}

static void wait_covered(kcr_informer *inf, unsigned b)
{
  for(int i = 0; i < 3000 && !kcr_informer_covers(inf, (uint64_t)b << 56); i++)
    itest_sleep_ms(10);
  assert_true(kcr_informer_covers(inf, (uint64_t)b << 56));
}

static struct kcr_informer_stats stats(kcr_informer *inf)
{
  struct kcr_informer_stats st;
  kcr_informer_get_stats(inf, &st);
  return st;
}

static char uids[N][40];

/* Half the buckets, then all, then none: the cache follows, untold of what
 * left it (no on_delete), told of what entered (on_add), and covers a
 * bucket only once a list since it entered is in. */
static void a_sharded_cache_holds_its_buckets_alone(void **state)
{
  uint8_t even[32], all[32], none[32] = {0};
  size_t want = 0;
  memset(even, 0x55, sizeof(even)); /* buckets 0, 2, 4, ... */
  memset(all, 0xff, sizeof(all));
  make_cms("u", N, NULL, NULL, uids);
  for(int i = 0; i < N; i++)
    want += in_set(even, bucket_of(uids[i]));
  assert_true(want > 0 && want < N);

  kcr_informer *inf = sharded(KCR_SHARD_BY_UID, "t in (u,late)", even);
  assert_int_equal(cached(inf), want);
  for(int i = 0; i < N; i++)
    assert_int_equal(has(inf, "u", i), in_set(even, bucket_of(uids[i])));
  assert_int_equal(told_adds(), (int)want);
  assert_true(kcr_informer_covers(inf, 0));
  assert_false(kcr_informer_covers(inf, 1ull << 56));
  print_message("gate off: server shards %d; events %llu for %zu of %d cached\n",
                stats(inf).server_shards, (unsigned long long)stats(inf).events, want, N);

  told_reset();
  assert_int_equal(KCR_OK, kcr_informer_set_buckets(inf, all));
  wait_covered(inf, 1);
  assert_int_equal(cached(inf), N);
  assert_int_equal(told_adds(), N - (int)want);
  assert_int_equal(told_deletes(), 0);

  assert_int_equal(KCR_OK, kcr_informer_set_buckets(inf, none));
  assert_int_equal(cached(inf), 0);
  assert_false(kcr_informer_covers(inf, 0));
  assert_int_equal(told_deletes(), 0);
  /* a new object of no selected bucket is not cached */
  make_cms("late", 1, NULL, NULL, uids);
  itest_sleep_ms(500);
  assert_int_equal(cached(inf), 0);
  assert_int_equal(stats(inf).shard_dropped, N);
  kcr_informer_free(inf);
}

/* Children are placed by their controller owner's uid; an object without
 * one is in every replica's cache. */
static void children_follow_their_controller_owner(void **state)
{
  char owners[8][40];
  uint8_t set[32] = {0};
  char kids[4][40];
  unsigned b0, b1;
  int j = 1;
  char pj[16];

  /* two real owners (the garbage collector deletes children of missing
   * ones) in two buckets */
  make_cms("p", 8, NULL, NULL, owners);
  b0 = bucket_of(owners[0]);
  while(j < 7 && bucket_of(owners[j]) == b0)
    j++;
  b1 = bucket_of(owners[j]);
  assert_int_not_equal(b0, b1);
  set[b0 / 8] |= (uint8_t)(1u << b0 % 8);
  make_cms("a", 4, owners[0], "p-0", kids);
  snprintf(pj, sizeof(pj), "p-%d", j);
  make_cms("b", 4, owners[j], pj, kids);
  make_cms("orphan", 2, NULL, NULL, kids);
  kcr_informer *inf = sharded(KCR_SHARD_BY_OWNER, "t in (a,b,orphan)", set);
  for(int i = 0; i < 4; i++) {
    assert_true(has(inf, "a", i));
    assert_false(has(inf, "b", i));
  }
  assert_true(has(inf, "orphan", 0) && has(inf, "orphan", 1));
  assert_false(stats(inf).server_shards); /* (it cannot: by owner) */
  kcr_informer_free(inf);
}

/* Bad input is refused, naming it. */
static void shard_options_are_checked(void **state)
{
  kcr_informer *inf = NULL;
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  uint8_t set[32] = {0};
  const char *const nss[] = {"a", "b", NULL};
  assert_int_equal(
      KCR_EINVAL,
      kcr_informer_new(&(struct kcr_informer_opts){.client = cl,
                                                   .gvr = &itest_configmaps,
                                                   .namespaces = nss,
                                                   .shard_by = KCR_SHARD_BY_UID},
                       &inf, &ei));
  assert_non_null(strstr(ei.message, "cluster_watch"));
  kcr_errinfo_cleanup(&ei);
  assert_int_equal(KCR_EINVAL,
                   kcr_informer_new(&(struct kcr_informer_opts){.client = cl,
                                                                .gvr = &itest_configmaps,
                                                                .shard_by = 7},
                                    &inf, &ei));
  assert_non_null(strstr(ei.message, "shard_by"));
  kcr_errinfo_cleanup(&ei);
  itest_expect(
      KCR_OK,
      kcr_informer_new(
          &(struct kcr_informer_opts){.client = cl, .gvr = &itest_configmaps}, &inf, &ei),
      &ei);
  assert_int_equal(KCR_EINVAL, kcr_informer_set_buckets(inf, set)); /* not sharded */
  assert_int_equal(KCR_EINVAL, kcr_informer_set_buckets(inf, NULL));
  kcr_informer_free(inf);
}

/* With the gate on the server sends the selected buckets alone: the
 * events the informer read are those it caches. The longest selector (every
 * other bucket) is taken; a narrower selection starts the watch again
 * without a list, and a change in a bucket that left crosses no wire. */
static void with_the_gate_on_the_server_sends_the_buckets_alone(void **state)
{
  uint8_t odd[32], one[32] = {0};
  size_t want = 0;
  unsigned keep = 0;
  struct kcr_ref coll = {.gvr = &itest_configmaps, .ns = ns};
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  static const char patch[] = "{\"data\":{\"x\":\"1\"}}";
  const struct kcr_patch_opts merge = {.type = KCR_PATCH_MERGE};

  itest_controlplane("--arg --feature-gates=ShardedListAndWatch=true");
  memset(odd, 0xaa, sizeof(odd)); /* buckets 1, 3, ..., 255: 128 ranges */
  make_cms("g", N, NULL, NULL, uids);
  for(int i = 0; i < N; i++)
    want += in_set(odd, bucket_of(uids[i]));
  kcr_informer *inf = sharded(KCR_SHARD_BY_UID, "t=g", odd);
  struct kcr_informer_stats st = stats(inf);
  print_message("gate on: server shards %d; events %llu for %zu of %d cached\n",
                st.server_shards, (unsigned long long)st.events, want, N);
  assert_true(st.server_shards);
  assert_int_equal(cached(inf), want);
  assert_int_equal(st.events, want); /* (the others never came) */

  /* narrow to one bucket of a cached object; change one that left */
  int in = -1, out = -1;
  for(int i = 0; i < N; i++) {
    if(in < 0 && in_set(odd, bucket_of(uids[i])))
      in = i;
    else if(in >= 0 && in_set(odd, bucket_of(uids[i])) &&
            bucket_of(uids[i]) != bucket_of(uids[in]))
      out = i;
  }
  assert_true(in >= 0 && out >= 0);
  keep = bucket_of(uids[in]);
  one[keep / 8] |= (uint8_t)(1u << keep % 8);
  /* (the streaming list counts as the first watch once it is applied,
   * just after the informer synced) */
  for(int i = 0; i < 300 && stats(inf).watches == 0; i++)
    itest_sleep_ms(10);
  st = stats(inf);
  assert_int_equal(st.watches, 1);
  uint64_t lists0 = st.lists + st.stream_lists;
  assert_int_equal(KCR_OK, kcr_informer_set_buckets(inf, one));
  assert_true(kcr_informer_covers(inf, (uint64_t)keep << 56));
  for(int i = 0; i < 300 && stats(inf).watches == 1; i++)
    itest_sleep_ms(10); /* the watch starts again */
  assert_int_equal(stats(inf).watches, 2);
  uint64_t events0 = stats(inf).events;
  nupdated = 0;
  char name[32];
  snprintf(name, sizeof(name), "g-%d", out);
  coll.name = name;
  itest_expect(KCR_OK, kcr_patch(cl, &coll, &merge, patch, strlen(patch), NULL, &ei),
               &ei);
  snprintf(name, sizeof(name), "g-%d", in);
  itest_expect(KCR_OK, kcr_patch(cl, &coll, &merge, patch, strlen(patch), NULL, &ei),
               &ei);
  for(int i = 0; i < 500 && stats(inf).events == events0; i++)
    itest_sleep_ms(10);
  itest_sleep_ms(300);
  st = stats(inf);
  pthread_mutex_lock(&told.mu);
  for(int i = 0; i < nupdated; i++)
    print_message("told of a change of %s (kept g-%d, left g-%d)\n", updated[i], in, out);
  pthread_mutex_unlock(&told.mu);
  assert_int_equal(st.events, events0 + 1);             /* the kept one's change alone */
  assert_int_equal(st.lists + st.stream_lists, lists0); /* no list */
  kcr_informer_free(inf);
  itest_controlplane(""); /* back to the gate off */
}

/* No bucket selected (a replica not yet in its ring): synced at once with
 * nothing, without a request; buckets entering make it list. */
static void an_informer_of_no_bucket_syncs_without_a_request(void **state)
{
  uint8_t none[32] = {0}, all[32];
  memset(all, 0xff, sizeof(all));
  kcr_informer *inf = sharded(KCR_SHARD_BY_UID, "t in (u,late)", none);
  struct kcr_informer_stats st = stats(inf);
  assert_int_equal(st.lists + st.stream_lists + st.watches, 0);
  assert_int_equal(cached(inf), 0);
  assert_int_equal(KCR_OK, kcr_informer_set_buckets(inf, all));
  wait_covered(inf, 7);
  assert_int_equal(cached(inf), N + 1); /* the u-* and late-0 of the first test */
  /* back to none: emptied untold, and idle again (its watch stopped) */
  assert_int_equal(KCR_OK, kcr_informer_set_buckets(inf, none));
  assert_int_equal(cached(inf), 0);
  assert_int_equal(told_deletes(), 0);
  kcr_informer_free(inf);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(a_sharded_cache_holds_its_buckets_alone),
      cmocka_unit_test(children_follow_their_controller_owner),
      cmocka_unit_test(shard_options_are_checked),
      cmocka_unit_test(an_informer_of_no_bucket_syncs_without_a_request),
      cmocka_unit_test(with_the_gate_on_the_server_sends_the_buckets_alone),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
