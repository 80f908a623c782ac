/* kcr_json_to_text (kcr__json_print) writes the text cJSON_PrintUnformatted
 * writes, byte for byte, for every tree: generated ones with every kind of
 * node, every byte in strings and names, and the numbers whose printing
 * takes cJSON's slow path; and fails where cJSON fails. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/json-int.h"
#include "kcr/json.h"

static void assert_same_text(const cJSON *tree)
{
  char *want = cJSON_PrintUnformatted(tree), *got = kcr_json_to_text(tree);

  if(!want || !got) {
    assert_null(want);
    assert_null(got);
    return;
  }
  if(strcmp(want, got))
    fail_msg("cJSON: %s\nkcr:   %s", want, got);
  free(want);
  free(got);
}

static void numbers_print_as_cjson_prints_them(void **state)
{
  static const double nums[] = {0.0,
                                -0.0,
                                1,
                                -1,
                                7,
                                10,
                                123456789,
                                -987654321,
                                999999999999999,
                                -999999999999999,
                                1e15,
                                -1e15,
                                1e15 + 1,
                                9007199254740993.0,
                                1e300,
                                -1e-300,
                                0.1,
                                0.5,
                                -2.25,
                                1.0 / 3,
                                2.0 / 3,
                                123456.789,
                                1e-7,
                                4.9e-324,
                                1.7976931348623157e308,
                                NAN,
                                INFINITY,
                                -INFINITY};
  for(size_t i = 0; i < sizeof(nums) / sizeof(nums[0]); i++) {
    cJSON *n = cJSON_CreateNumber(nums[i]);
    assert_non_null(n);
    assert_same_text(n);
    cJSON_Delete(n);
  }
  for(int e = 0; e < 63; e++) { /* powers of two and their neighbours */
    for(int d = -1; d <= 1; d++) {
      cJSON *n = cJSON_CreateNumber(ldexp(1, e) + d);
      assert_same_text(n);
      cJSON_Delete(n);
      n = cJSON_CreateNumber(-ldexp(1, e) + d);
      assert_same_text(n);
      cJSON_Delete(n);
    }
  }
}

static void every_byte_prints_as_cjson_prints_it(void **state)
{
  char s[256];
  cJSON *o = cJSON_CreateObject(), *str;

  for(int i = 1; i < 256; i++)
    s[i - 1] = (char)i;
  s[255] = '\0';
  str = cJSON_CreateString(s);
  assert_non_null(str);
  cJSON_AddItemToObject(o, s, str); /* the name too */
  assert_same_text(o);
  cJSON_Delete(o);
}

static void odd_nodes_print_or_fail_as_in_cjson(void **state)
{
  cJSON *o = cJSON_CreateObject(), *raw = cJSON_CreateRaw("12345678901234567890");
  cJSON *nostr = cJSON_CreateString("x"), *a = cJSON_CreateArray();

  /* a string without text, a member without a name, a Raw node, empties */
  free(nostr->valuestring);
  nostr->valuestring = NULL;
  cJSON_AddItemToObject(o, "s", nostr);
  cJSON_AddItemToObject(o, "raw", raw);
  cJSON_AddItemToObject(o, "a", a);
  cJSON_AddItemToObject(o, "o", cJSON_CreateObject());
  cJSON_AddItemToArray(a, cJSON_CreateNull());
  cJSON_AddItemToArray(a, cJSON_CreateTrue());
  cJSON_AddItemToArray(a, cJSON_CreateFalse());
  cJSON_AddItemToArray(a, cJSON_CreateString(""));
  cJSON *nameless = cJSON_CreateNumber(1);
  cJSON_AddItemToArray(o, nameless); /* linked without a name */
  assert_same_text(o);

  /* cJSON cannot print a Raw node without text, nor a node of no type */
  free(raw->valuestring);
  raw->valuestring = NULL;
  assert_same_text(o);
  assert_null(kcr_json_to_text(o));
  cJSON_Delete(o);
  cJSON *bad = cJSON_CreateNull();
  bad->type = cJSON_Invalid;
  assert_same_text(bad);
  assert_null(kcr_json_to_text(bad));
  bad->type = cJSON_True | cJSON_Number; /* two types at once */
  assert_same_text(bad);
  cJSON_Delete(bad);
  assert_null(kcr_json_to_text(NULL));
}

/* ---- generated trees ---- */

static unsigned rnd(unsigned *s)
{
  *s = *s * 1103515245u + 12345u;
  return *s >> 16 & 0x7fff;
}

static char *rand_text(unsigned *s)
{
  int n = (int)(rnd(s) % 12);
  char *t = malloc((size_t)n + 1);
  assert_non_null(t);
  for(int i = 0; i < n; i++) {
    unsigned k = rnd(s) % 4;
    if(k == 0)
      t[i] = (char)(1 + rnd(s) % 255);
    else if(k == 1)
      t[i] = "\"\\/\b\f\n\r\t"[rnd(s) % 8];
    else
      t[i] = (char)('a' + rnd(s) % 26);
  }
  t[n] = '\0';
  return t;
}

static double rand_number(unsigned *s)
{
  switch(rnd(s) % 6) {
  case 0: return (double)(int)(rnd(s) - 16384);
  case 1: return (double)rnd(s) * rnd(s) * rnd(s) * rnd(s); /* up to ~1e18 */
  case 2: return (double)rnd(s) / (1 + rnd(s));
  case 3: return -(double)rnd(s) / 1024;
  case 4: return ldexp((double)rnd(s), (int)(rnd(s) % 200) - 100);
  default: return 0;
  }
}

static cJSON *rand_tree(unsigned *s, int depth)
{
  unsigned k = rnd(s) % (depth > 4 ? 6 : 8);
  cJSON *n;
  char *t;

  switch(k) {
  case 0: return cJSON_CreateNull();
  case 1: return cJSON_CreateBool(rnd(s) & 1);
  case 2:
  case 3: return cJSON_CreateNumber(rand_number(s));
  case 4:
    t = rand_text(s);
    n = cJSON_CreateString(t);
    free(t);
    return n;
  case 5: /* up to 2^53 * 1000: past a double's exact integers, inside int64 */
    return kcr_json_create_int((int64_t)((((uint64_t)rnd(s) << 32) ^ rnd(s)) >> 11) *
                               1000);
  default: break;
  }
  n = k == 6 ? cJSON_CreateArray() : cJSON_CreateObject();
  for(int i = (int)(rnd(s) % 5); i > 0; i--) {
    cJSON *c = rand_tree(s, depth + 1);
    if(k == 6) {
      cJSON_AddItemToArray(n, c);
    } else {
      t = rand_text(s);
      cJSON_AddItemToObject(n, t, c); /* duplicates too */
      free(t);
    }
  }
  return n;
}

static void generated_trees_print_as_cjson_prints_them(void **state)
{
  unsigned s = 11;
  for(int i = 0; i < 20000; i++) {
    cJSON *t = rand_tree(&s, 0);
    assert_non_null(t);
    assert_same_text(t);
    cJSON_Delete(t);
  }
}

/* Into a caller's buffer: appended after what it holds. */
static void print_appends_to_the_buffer(void **state)
{
  struct kcr_buf b = KCR_BUF_INIT;
  cJSON *t = NULL;

  assert_int_equal(KCR_OK, kcr_json_parse("{\"a\":[1,-2.5,\"x\"]}", 19, &t, NULL));
  kcr_buf_puts(&b, "body=");
  assert_int_equal(KCR_OK, kcr__json_print(t, &b));
  assert_string_equal("body={\"a\":[1,-2.5,\"x\"]}", kcr_buf_str(&b));
  assert_int_equal(KCR_EINVAL, kcr__json_print(NULL, &b));
  cJSON_Delete(t);
  kcr_buf_cleanup(&b);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(numbers_print_as_cjson_prints_them),
      cmocka_unit_test(every_byte_prints_as_cjson_prints_it),
      cmocka_unit_test(odd_nodes_print_or_fail_as_in_cjson),
      cmocka_unit_test(generated_trees_print_as_cjson_prints_them),
      cmocka_unit_test(print_appends_to_the_buffer),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
