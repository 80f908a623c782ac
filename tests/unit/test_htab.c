/* The hash table (kcr/htab.h): links, finds and unlinks caller-owned nodes;
 * grows at load factor 1 keeping every node findable; a growth that cannot
 * allocate fails cleanly and leaves a usable table; iteration survives the
 * removal of the node it returned; nodes sharing one hash are all found;
 * reserve makes later inserts allocation-free. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/htab-int.h"
#include "kcr.h"
#include "tfail.h"

struct rec {
  int pad; /* the node is not the first member: KCR_HTAB_ENTRY must adjust */
  struct kcr_hnode hn;
  char key[24];
  bool seen;
};

static struct rec *rec_of(struct kcr_hnode *n)
{
  return n ? KCR_HTAB_ENTRY(n, struct rec, hn) : NULL;
}

static struct rec *find(const struct kcr_htab *t, uint64_t h, const char *key)
{
  for(struct kcr_hnode *n = kcr_htab_lookup(t, h); n; n = kcr_htab_lookup_next(n))
    if(!strcmp(rec_of(n)->key, key))
      return rec_of(n);
  return NULL;
}

static struct rec *recs_new(int n)
{
  struct rec *r = calloc((size_t)n, sizeof(*r));
  assert_non_null(r);
  for(int i = 0; i < n; i++)
    snprintf(r[i].key, sizeof(r[i].key), "ns/o%d", i);
  return r;
}

static uint64_t h_of(const struct rec *r) { return kcr_hash_str(r->key); }

static void insert_lookup_remove(void **state)
{
  struct kcr_htab t = KCR_HTAB_INIT;
  struct rec *r = recs_new(3);

  assert_null(kcr_htab_lookup(&t, 42)); /* empty, no array yet */
  assert_false(kcr_htab_remove(&t, &r[0].hn));
  for(int i = 0; i < 3; i++)
    assert_int_equal(KCR_OK, kcr_htab_insert(&t, &r[i].hn, h_of(&r[i])));
  assert_int_equal(3, t.n);
  for(int i = 0; i < 3; i++) {
    assert_ptr_equal(&r[i], find(&t, h_of(&r[i]), r[i].key));
    assert_true(r[i].hn.hash == h_of(&r[i])); /* insert records the hash */
  }
  assert_null(find(&t, kcr_hash_str("ns/absent"), "ns/absent"));
  assert_true(kcr_htab_remove(&t, &r[1].hn));
  assert_false(kcr_htab_remove(&t, &r[1].hn)); /* not linked any more */
  assert_int_equal(2, t.n);
  assert_null(find(&t, h_of(&r[1]), r[1].key));
  assert_ptr_equal(&r[0], find(&t, h_of(&r[0]), r[0].key));
  assert_ptr_equal(&r[2], find(&t, h_of(&r[2]), r[2].key));
  /* Moving the struct moves the table: nodes do not point back. */
  struct kcr_htab moved = t;
  memset(&t, 0, sizeof(t));
  assert_ptr_equal(&r[2], find(&moved, h_of(&r[2]), r[2].key));
  kcr_htab_cleanup(&moved);
  assert_null(moved.b);
  assert_int_equal(0, moved.nb);
  assert_int_equal(0, moved.n);
  free(r);
}

static void grows_at_load_factor_one_and_keeps_every_node(void **state)
{
  enum { N = 5000 };
  struct kcr_htab t = KCR_HTAB_INIT;
  struct rec *r = recs_new(N);
  size_t grows = 0, nb = 0;

  for(int i = 0; i < N; i++) {
    assert_int_equal(KCR_OK, kcr_htab_insert(&t, &r[i].hn, h_of(&r[i])));
    assert_true(t.n <= t.nb); /* load factor at most 1 */
    assert_true((t.nb & (t.nb - 1)) == 0);
    if(t.nb != nb) {
      grows++;
      nb = t.nb;
    }
  }
  assert_int_equal(8192, t.nb); /* the power of two >= N */
  assert_true(grows >= 10);     /* 8 -> 8192 */
  for(int i = 0; i < N; i++)    /* rehashed from stored hashes: all still there */
    assert_ptr_equal(&r[i], find(&t, h_of(&r[i]), r[i].key));
  assert_true(kcr__htab_longest_chain(&t) <= 12); /* keyed hash: short chains */
  kcr_htab_cleanup(&t);
  free(r);
}

/* A growth whose allocation fails: ENOMEM, the node not linked, the table as
 * it was and usable; the next insert, with memory back, grows it. */
static void failed_growth_leaves_a_usable_table(void **state)
{
  struct kcr_htab t = KCR_HTAB_INIT;
  struct rec *r = recs_new(9);

  for(int i = 0; i < 8; i++)
    assert_int_equal(KCR_OK, kcr_htab_insert(&t, &r[i].hn, h_of(&r[i])));
  assert_int_equal(8, t.nb); /* full: the next insert must grow */
  struct kcr_hnode **before = t.b;
  tfail_arm(1);
  assert_int_equal(KCR_ENOMEM, kcr_htab_insert(&t, &r[8].hn, h_of(&r[8])));
  assert_true(tfail_fired());
  tfail_arm(1); /* only the n-th fails: arm again */
  assert_int_equal(KCR_ENOMEM, kcr_htab_reserve(&t, 100));
  tfail_arm(0);
  assert_ptr_equal(before, t.b);
  assert_int_equal(8, t.nb);
  assert_int_equal(8, t.n);
  assert_null(find(&t, h_of(&r[8]), r[8].key));
  for(int i = 0; i < 8; i++)
    assert_ptr_equal(&r[i], find(&t, h_of(&r[i]), r[i].key));
  assert_true(kcr_htab_remove(&t, &r[3].hn)); /* usable: remove, insert */
  assert_int_equal(KCR_OK, kcr_htab_insert(&t, &r[3].hn, h_of(&r[3])));
  assert_int_equal(KCR_OK, kcr_htab_insert(&t, &r[8].hn, h_of(&r[8])));
  assert_int_equal(16, t.nb);
  for(int i = 0; i < 9; i++)
    assert_ptr_equal(&r[i], find(&t, h_of(&r[i]), r[i].key));
  kcr_htab_cleanup(&t);
  free(r);
}

/* Every allocation of building a table fails in turn: the build stops with
 * ENOMEM and exactly the nodes inserted before it are linked. */
struct build {
  struct rec *r;
  int n;
};

static bool build_table(void *ud)
{
  struct build *b = ud;
  struct kcr_htab t = KCR_HTAB_INIT;
  bool ok = true;
  int i;

  for(i = 0; i < b->n; i++)
    if(kcr_htab_insert(&t, &b->r[i].hn, h_of(&b->r[i])))
      break;
  ok = t.n == (size_t)i && (i == b->n || tfail_fired());
  for(int j = 0; j < b->n; j++)
    ok = ok && (find(&t, h_of(&b->r[j]), b->r[j].key) != NULL) == (j < i);
  kcr_htab_cleanup(&t);
  return ok;
}

static void every_allocation_failure_while_building(void **state)
{
  struct build b = {recs_new(300), 300};
  for(int i = 0; i < b.n; i++)
    (void)h_of(&b.r[i]); /* the hash key is set up outside the counted runs */
  bool ok = tfail_torture_try("kcr_htab_insert", build_table, &b, 0);
  free(b.r);
  assert_true(ok);
}

static void iteration_survives_removing_the_current_node(void **state)
{
  enum { N = 1000 };
  struct kcr_htab t = KCR_HTAB_INIT;
  struct rec *r = recs_new(N);
  struct kcr_htab_iter it;
  struct kcr_hnode *n;
  int seen = 0;

  for(int i = 0; i < N; i++)
    assert_int_equal(KCR_OK, kcr_htab_insert(&t, &r[i].hn, h_of(&r[i])));
  /* Remove every node with an even number as it comes; scribble over it
   * as a free would, to show the iterator does not read it again. */
  kcr_htab_iter_init(&it, &t);
  while((n = kcr_htab_iter_next(&it))) {
    struct rec *x = rec_of(n);
    int i = (int)(x - r);
    assert_false(x->seen);
    x->seen = true;
    seen++;
    if(i % 2 == 0) {
      assert_true(kcr_htab_remove(&t, n));
      memset(n, 0xA5, sizeof(*n));
    }
  }
  assert_int_equal(N, seen);
  assert_int_equal(N / 2, t.n);
  for(int i = 0; i < N; i++)
    assert_true((find(&t, h_of(&r[i]), r[i].key) != NULL) == (i % 2 == 1));
  /* And the usual teardown: iterate, free everything, clean up. */
  struct rec **heap = calloc(N, sizeof(*heap));
  kcr_htab_cleanup(&t);
  for(int i = 0; i < N; i++) {
    heap[i] = malloc(sizeof(struct rec));
    memcpy(heap[i], &r[i], sizeof(struct rec));
    assert_int_equal(KCR_OK, kcr_htab_insert(&t, &heap[i]->hn, h_of(heap[i])));
  }
  seen = 0;
  kcr_htab_iter_init(&it, &t);
  while((n = kcr_htab_iter_next(&it))) {
    free(rec_of(n)); /* ASan: a later read of it would be use-after-free */
    seen++;
  }
  assert_int_equal(N, seen);
  kcr_htab_cleanup(&t);
  kcr_htab_iter_init(&it, &t); /* an empty table iterates to nothing */
  assert_null(kcr_htab_iter_next(&it));
  free(heap);
  free(r);
}

/* Keys that all share one hash (a flood the hash could not stop) are still
 * told apart, found and removed correctly - just slowly. */
static void colliding_keys_share_a_chain_and_stay_correct(void **state)
{
  enum { N = 500 };
  struct kcr_htab t = KCR_HTAB_INIT;
  struct rec *r = recs_new(N + 1);
  const uint64_t h = 0x1234;

  for(int i = 0; i < N; i++)
    assert_int_equal(KCR_OK, kcr_htab_insert(&t, &r[i].hn, h));
  /* A different hash in the same bucket is not a candidate. */
  assert_int_equal(KCR_OK, kcr_htab_insert(&t, &r[N].hn, h + t.nb));
  assert_int_equal(N, kcr__htab_longest_chain(&t) - 1);
  int cands = 0;
  for(struct kcr_hnode *n = kcr_htab_lookup(&t, h); n; n = kcr_htab_lookup_next(n)) {
    assert_true(n->hash == h);
    cands++;
  }
  assert_int_equal(N, cands);
  assert_ptr_equal(&r[N], rec_of(kcr_htab_lookup(&t, h + t.nb)));
  for(int i = 0; i < N; i++)
    assert_ptr_equal(&r[i], find(&t, h, r[i].key));
  for(int i = 0; i < N; i += 3)
    assert_true(kcr_htab_remove(&t, &r[i].hn));
  for(int i = 0; i < N; i++)
    assert_true((find(&t, h, r[i].key) != NULL) == (i % 3 != 0));
  assert_ptr_equal(&r[N], rec_of(kcr_htab_lookup(&t, r[N].hn.hash)));
  kcr_htab_cleanup(&t);
  free(r);
}

/* reserve(n): inserts allocate nothing while fewer than n nodes are in. */
static void reserve_presizes(void **state)
{
  enum { N = 1000 };
  struct kcr_htab t = KCR_HTAB_INIT;
  struct rec *r = recs_new(N + 1);

  assert_int_equal(KCR_OK, kcr_htab_reserve(&t, N));
  assert_int_equal(1024, t.nb);
  assert_int_equal(KCR_OK, kcr_htab_reserve(&t, 10)); /* never shrinks */
  assert_int_equal(1024, t.nb);
  tfail_arm(1); /* the next allocation would fail */
  for(int i = 0; i < N; i++)
    assert_int_equal(KCR_OK, kcr_htab_insert(&t, &r[i].hn, h_of(&r[i])));
  assert_false(tfail_fired());
  assert_int_equal(0, tfail_count());
  tfail_arm(0);
  for(int i = 0; i < N; i++)
    assert_ptr_equal(&r[i], find(&t, h_of(&r[i]), r[i].key));
  /* A size no array can have: ENOMEM, nothing changed. */
  assert_int_equal(KCR_ENOMEM, kcr_htab_reserve(&t, SIZE_MAX));
  assert_int_equal(1024, t.nb);
  assert_int_equal(N, t.n);
  kcr_htab_cleanup(&t);
  free(r);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(insert_lookup_remove),
      cmocka_unit_test(grows_at_load_factor_one_and_keeps_every_node),
      cmocka_unit_test(failed_growth_leaves_a_usable_table),
      cmocka_unit_test(every_allocation_failure_while_building),
      cmocka_unit_test(iteration_survives_removing_the_current_node),
      cmocka_unit_test(colliding_keys_share_a_chain_and_stay_correct),
      cmocka_unit_test(reserve_presizes),
  };
  tfail_init();
  return cmocka_run_group_tests(tests, NULL, NULL);
}
