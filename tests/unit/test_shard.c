/* The ring's pure parts (kcr/shard.h): the apiserver's hash, and the
 * assignment of buckets to members - deterministic, balanced, and moving
 * about a member's share when one joins or leaves (the runs of adjacent
 * buckets a member holds, what a shardRange selector will list, are
 * printed). The figures are printed; the bounds are what kcr/shard.h says. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kcr/shard.h"

#define NMAX 16

static void the_hash_is_go_fnv1a_64(void **state)
{
  (void)state;
  /* Go: fnv.New64a() over the bytes, as sharding.HashField. */
  assert_true(kcr_shard_hash("", 0) == 0xcbf29ce484222325ull);
  assert_true(kcr_shard_hash("a", 1) == 0xaf63dc4c8601ec8cull);
  assert_true(kcr_shard_hash("foobar", 6) == 0x85944171f73967e8ull);
  assert_int_equal(0xaf, kcr_shard_bucket(0xaf63dc4c8601ec8cull));
  assert_int_equal(0, kcr_shard_bucket(0));
  assert_int_equal(255, kcr_shard_bucket(UINT64_MAX));
}

static char names[NMAX + 1][32];
static const char *ids[NMAX + 1];

static void set_names(const char *fmt)
{
  for(int i = 0; i <= NMAX; i++) {
    snprintf(names[i], sizeof(names[i]), fmt, i);
    ids[i] = names[i];
  }
}

/* The identity owning each bucket with members ids[0..n). */
static void assign(size_t n, const char *own[KCR_RING_BUCKETS])
{
  uint32_t owner[KCR_RING_BUCKETS];
  assert_int_equal(KCR_OK, kcr_ring_assign(ids, n, owner));
  for(size_t b = 0; b < KCR_RING_BUCKETS; b++) {
    assert_true(owner[b] < n);
    own[b] = ids[owner[b]];
  }
}

static void the_order_of_the_members_does_not_matter(void **state)
{
  (void)state;
  const char *a[KCR_RING_BUCKETS], *b[KCR_RING_BUCKETS];
  set_names("ebdman-%d");
  assign(7, a);
  /* reversed */
  for(int i = 0; i < 3; i++) {
    const char *t = ids[i];
    ids[i] = ids[6 - i];
    ids[6 - i] = t;
  }
  assign(7, b);
  for(size_t k = 0; k < KCR_RING_BUCKETS; k++)
    assert_string_equal(a[k], b[k]);
}

static void bad_member_lists_are_refused(void **state)
{
  (void)state;
  uint32_t owner[KCR_RING_BUCKETS];
  const char *dup[] = {"a", "b", "a"}, *null[] = {"a", NULL};
  assert_int_equal(KCR_EINVAL, kcr_ring_assign(dup, 3, owner));
  assert_int_equal(KCR_EINVAL, kcr_ring_assign(null, 2, owner));
  assert_int_equal(KCR_EINVAL, kcr_ring_assign(dup, 0, owner));
  assert_int_equal(KCR_EINVAL, kcr_ring_assign(NULL, 1, owner));
  assert_int_equal(KCR_EINVAL, kcr_ring_assign(dup, 1, NULL));
  assert_int_equal(KCR_OK, kcr_ring_assign(dup, 1, owner));
  for(size_t b = 0; b < KCR_RING_BUCKETS; b++)
    assert_int_equal(0, owner[b]);
}

/* Runs of consecutive buckets (around the circle) that id holds. */
static size_t runs(const char *own[KCR_RING_BUCKETS], const char *id)
{
  size_t r = 0;
  for(size_t b = 0; b < KCR_RING_BUCKETS; b++)
    if(own[b] == id && own[(b + KCR_RING_BUCKETS - 1) % KCR_RING_BUCKETS] != id)
      r++;
  if(r == 0 && own[0] == id) /* holds them all */
    r = 1;
  return r;
}

static void every_member_holds_its_share(void **state)
{
  (void)state;
  const char *fmts[] = {"ebdman-%d", "replica-%02d.shard", "x%d"};
  size_t worst_runs = 0;
  for(size_t f = 0; f < sizeof(fmts) / sizeof(*fmts); f++) {
    set_names(fmts[f]);
    for(size_t n = 1; n <= NMAX; n++) {
      const char *own[KCR_RING_BUCKETS];
      size_t lo = KCR_RING_BUCKETS / n, hi = (KCR_RING_BUCKETS + n - 1) / n;
      assign(n, own);
      for(size_t i = 0; i < n; i++) {
        size_t held = 0, r = runs(own, ids[i]);
        for(size_t b = 0; b < KCR_RING_BUCKETS; b++)
          held += own[b] == ids[i];
        if(held < lo || held > hi)
          fail_msg("%s of %zu members holds %zu buckets, not %zu or %zu", ids[i], n, held,
                   lo, hi);
        if(r > worst_runs)
          worst_runs = r;
      }
    }
  }
  printf("most runs of one member (1-%d members, 3 naming schemes): %zu\n", NMAX,
         worst_runs);
}

static size_t moved(const char *a[KCR_RING_BUCKETS], const char *b[KCR_RING_BUCKETS])
{
  size_t m = 0;
  for(size_t k = 0; k < KCR_RING_BUCKETS; k++)
    m += strcmp(a[k], b[k]) != 0;
  return m;
}

static void a_member_joining_or_leaving_moves_about_its_share(void **state)
{
  (void)state;
  const char *fmts[] = {"ebdman-%d", "replica-%02d.shard", "x%d"};
  double worst = 0;
  for(size_t f = 0; f < sizeof(fmts) / sizeof(*fmts); f++) {
    set_names(fmts[f]);
    for(size_t n = 1; n < NMAX; n++) {
      const char *before[KCR_RING_BUCKETS], *after[KCR_RING_BUCKETS];
      size_t ideal = (KCR_RING_BUCKETS + n) / (n + 1), m;
      assign(n, before);
      assign(n + 1, after); /* ids[n] joins */
      m = moved(before, after);
      /* at least the newcomer's share moves */
      assert_true(m >= KCR_RING_BUCKETS / (n + 1));
      if((double)m / (double)ideal > worst)
        worst = (double)m / (double)ideal;
      if(n == 2 || n == 3)
        printf("%s: %zu -> %zu members moves %zu of %d buckets (its share: %zu)\n",
               fmts[f], n, n + 1, m, KCR_RING_BUCKETS, ideal);
      /* leaving is the same pair the other way round */
    }
  }
  printf("joining or leaving moves at most %.2fx the member's share\n", worst);
  /* Not all of them, as a modulo would (n/(n+1) of the buckets). */
  assert_true(worst <= 2.0);
}

static void selector_of(const uint8_t set[KCR_RING_BUCKETS / 8], struct kcr_buf *b)
{
  kcr_buf_reset(b);
  assert_int_equal(kcr_shard_selector(set, b), KCR_OK);
}

static void the_shard_selector_has_a_range_per_run_of_buckets(void **state)
{
  uint8_t set[KCR_RING_BUCKETS / 8] = {0};
  struct kcr_buf b = KCR_BUF_INIT;
  (void)state;

  assert_int_equal(kcr_shard_selector(set, &b), KCR_ENOTFOUND);
  assert_int_equal(kcr_shard_selector(NULL, &b), KCR_EINVAL);
  memset(set, 0xff, sizeof(set));
  selector_of(set, &b);
  assert_string_equal(kcr_buf_str(&b), "shardRange(object.metadata.uid, "
                                       "'0x0000000000000000', '0x10000000000000000')");
  memset(set, 0, sizeof(set));
  set[0] = 0x06;  /* buckets 1, 2 */
  set[31] = 0x80; /* 255 */
  set[16] = 0x01; /* 128 */
  selector_of(set, &b);
  assert_string_equal(kcr_buf_str(&b),
                      "shardRange(object.metadata.uid, '0x0100000000000000', "
                      "'0x0300000000000000') || "
                      "shardRange(object.metadata.uid, '0x8000000000000000', "
                      "'0x8100000000000000') || "
                      "shardRange(object.metadata.uid, '0xff00000000000000', "
                      "'0x10000000000000000')");
  /* the longest: every other bucket, the last one's end 2^64 */
  memset(set, 0xaa, sizeof(set));
  selector_of(set, &b);
  assert_int_equal(b.len, KCR_SHARD_SELECTOR_MAX);
  memset(set, 0x55, sizeof(set));
  selector_of(set, &b);
  assert_true(b.len < KCR_SHARD_SELECTOR_MAX);
  kcr_buf_cleanup(&b);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(the_hash_is_go_fnv1a_64),
      cmocka_unit_test(the_order_of_the_members_does_not_matter),
      cmocka_unit_test(bad_member_lists_are_refused),
      cmocka_unit_test(every_member_holds_its_share),
      cmocka_unit_test(a_member_joining_or_leaving_moves_about_its_share),
      cmocka_unit_test(the_shard_selector_has_a_range_per_run_of_buckets),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
