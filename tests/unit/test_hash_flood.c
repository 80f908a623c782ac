/* Hash flooding (issue 8, item 15): names are chosen by whoever can create
 * objects, so the tables keyed by them must not let a chosen set of names
 * share one bucket. Here: 1,500 names that all fall into the same bucket of
 * a 4,096-bucket table under FNV-1a (found by brute force, ~6 M hashes), put
 * into the informer cache and the work queue, and as many label values that
 * shared one of the 64 buckets of the metrics registry's old FNV-1a table.
 * With the keyed hash their chains stay short; with FNV-1a every lookup
 * would walk all of them. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/metrics-int.h"
#include "kcr/json.h"
#include "kcr/metrics.h"
#include "kcr/queue.h"
#include "kcr/store.h"
#include "runtime/queue-int.h"
#include "runtime/store-int.h"

#define N     1500
#define MASK  4095u /* the bucket index of any table of up to 4,096 buckets */
#define MAXCH 16    /* a keyed hash gives chains of a few; FNV-1a gives N */

static uint64_t fnv1a(const char *s)
{
  uint64_t h = 1469598103934665603ull;
  for(; *s; s++)
    h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return h;
}

/* N keys "ns/o<i>" whose FNV-1a hashes agree in their low 12 bits (found
 * once; the counter is formatted by hand, snprintf is slow under ASan). */
static char (*colliding_keys(void))[32]
{
  static char keys[N][32];
  static int n;
  uint64_t want = 0;
  char k[32] = "ns/o";
  if(n)
    return keys;
  for(unsigned long i = 0; n < N; i++) {
    char digits[24];
    int d = 0;
    unsigned long v = i;
    do {
      digits[d++] = (char)('0' + v % 10);
      v /= 10;
    } while(v);
    for(int j = 0; j < d; j++)
      k[4 + j] = digits[d - 1 - j];
    k[4 + d] = '\0';
    if(!i)
      want = fnv1a(k) & MASK;
    if((fnv1a(k) & MASK) == want)
      memcpy(keys[n++], k, sizeof(k));
  }
  return keys;
}

static void chosen_names_do_not_flood_the_cache(void **state)
{
  char(*keys)[32] = colliding_keys();
  kcr_store *s;
  assert_int_equal(KCR_OK, kcr_store_new(NULL, &s, NULL));
  for(int i = 0; i < N; i++) {
    char text[128];
    kcr_obj *o, *old;
    snprintf(text, sizeof(text), "{\"metadata\":{\"namespace\":\"ns\",\"name\":\"%s\"}}",
             keys[i] + 3);
    cJSON *t = cJSON_Parse(text);
    assert_int_equal(KCR_OK, kcr_obj_from_json(t, 0, &o, NULL));
    cJSON_Delete(t);
    assert_int_equal(KCR_OK, kcr_store_put(s, o, &old));
  }
  assert_int_equal(N, kcr_store_len(s));
  print_message("store: longest chain %zu of %d keys\n", kcr__store_max_chain(s), N);
  assert_true(kcr__store_max_chain(s) <= MAXCH);
  kcr_store_free(s);
}

static void chosen_names_do_not_flood_the_queue(void **state)
{
  char(*keys)[32] = colliding_keys();
  kcr_queue *q;
  assert_int_equal(KCR_OK, kcr_queue_new(NULL, &q, NULL));
  for(int i = 0; i < N; i++)
    assert_int_equal(KCR_OK, kcr_queue_add(q, keys[i]));
  assert_int_equal(N, kcr_queue_len(q));
  print_message("queue: longest chain %zu of %d keys\n", kcr__queue_max_chain(q), N);
  assert_true(kcr__queue_max_chain(q) <= MAXCH);
  kcr_queue_free(q);
}

/* FNV-1a of a label value and its NUL, as the registry hashed a series of
 * one label before it was keyed. */
static uint64_t fnv1a_nul(const char *s)
{
  uint64_t h = 14695981039346656037ull;
  do
    h = (h ^ (unsigned char)*s) * 1099511628211ull;
  while(*s++);
  return h;
}

static void chosen_label_values_do_not_flood_a_metric_family(void **state)
{
  static char vals[N][32];
  kcr_metrics *reg = NULL;
  assert_int_equal(KCR_OK, kcr_metrics_new(NULL, &reg, NULL));
  kcr_metric *c = NULL;
  assert_int_equal(
      KCR_OK, kcr_metric_counter(reg,
                                 &(struct kcr_metric_opts){
                                     .name = "flood_total",
                                     .label_names = (const char *const[]){"name", NULL}},
                                 &c, NULL));
  uint64_t want = fnv1a_nul("v0") & 63; /* its 64 buckets */
  int n = 0;

  for(unsigned long i = 0; n < N; i++) {
    snprintf(vals[n], sizeof(vals[n]), "v%lu", i);
    if((fnv1a_nul(vals[n]) & 63) == want)
      n++;
  }
  for(int i = 0; i < N; i++)
    kcr_metric_inc(c, (const char *const[]){vals[i]}, i + 1);
  print_message("metrics: longest chain %zu of %d series\n", kcr__metric_max_chain(c), N);
  assert_true(kcr__metric_max_chain(c) <= MAXCH);
  for(int i = 0; i < N; i++)
    assert_true(kcr_metric_value(c, (const char *const[]){vals[i]}) == i + 1);
  kcr_metrics_free(reg);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(chosen_names_do_not_flood_the_cache),
      cmocka_unit_test(chosen_names_do_not_flood_the_queue),
      cmocka_unit_test(chosen_label_values_do_not_flood_a_metric_family),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
