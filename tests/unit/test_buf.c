/* kcr_buf keeps its first error (as SQLite's sqlite3_str): after a failed
 * append every later append is a no-op returning that error, so a sequence
 * of appends is checked once, with kcr_buf_err, at its end. Failures are
 * forced with tfail (the n-th allocation fails) or with a format vsnprintf
 * refuses (a wide string the C locale cannot encode: KCR_EINVAL). */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <wchar.h>

#include <cmocka.h>

#include "core/secret-int.h"
#include "kcr/buf.h"
#include "kcr/htab.h"
#include "tabort.h"
#include "tfail.h"

/* Not encodable in the C locale the tests run in: vsnprintf fails. */
static const wchar_t euro[] = {0x20AC, 0};

/* b holds "abc" and has failed with KCR_ENOMEM: the growth to 1000 bytes
 * was refused. */
static void make_failed(struct kcr_buf *b)
{
  char big[1000];

  memset(big, 'x', sizeof(big));
  assert_int_equal(KCR_OK, kcr_buf_puts(b, "abc"));
  tfail_arm(1);
  assert_int_equal(KCR_ENOMEM, kcr_buf_append(b, big, sizeof(big)));
  assert_true(tfail_fired());
  tfail_arm(0);
}

static void a_fresh_buffer_has_no_error(void **state)
{
  struct kcr_buf b = KCR_BUF_INIT, z = {0};

  assert_int_equal(KCR_OK, kcr_buf_err(&b));
  assert_int_equal(KCR_OK, kcr_buf_err(&z));
  assert_int_equal(KCR_OK, kcr_buf_puts(&b, "hello"));
  assert_int_equal(KCR_OK, kcr_buf_printf(&b, " %d", 42));
  assert_int_equal(KCR_OK, kcr_buf_err(&b));
  assert_string_equal("hello 42", kcr_buf_str(&b));
  kcr_buf_cleanup(&b);
}

static void a_failed_allocation_sticks_and_leaves_the_text(void **state)
{
  struct kcr_buf b = KCR_BUF_INIT;

  make_failed(&b);
  assert_int_equal(KCR_ENOMEM, kcr_buf_err(&b));
  assert_int_equal(3, b.len);
  assert_string_equal("abc", kcr_buf_str(&b)); /* the text before the failure */
  kcr_buf_cleanup(&b);
}

static void later_appends_are_no_ops_returning_the_first_error(void **state)
{
  struct kcr_buf b = KCR_BUF_INIT;
  size_t cap;

  make_failed(&b);
  cap = b.cap;
  tfail_reset();
  /* Each would fit in the memory b already has: still refused. */
  assert_int_equal(KCR_ENOMEM, kcr_buf_append(&b, "d", 1));
  assert_int_equal(KCR_ENOMEM, kcr_buf_puts(&b, "def"));
  assert_int_equal(KCR_ENOMEM, kcr_buf_printf(&b, "%d", 7));
  assert_int_equal(KCR_ENOMEM, kcr_buf_printf(&b, "%ls", euro)); /* not EINVAL */
  assert_int_equal(KCR_ENOMEM, kcr_buf_urlenc(&b, "a b"));
  assert_int_equal(KCR_ENOMEM, kcr_buf_urlenc(&b, ""));
  assert_int_equal(KCR_ENOMEM, kcr_buf_reserve(&b, 0));
  assert_int_equal(KCR_ENOMEM, kcr_buf_reserve(&b, 100000));
  assert_int_equal(KCR_ENOMEM, kcr__secret_append(&b, "d", 1));
  assert_int_equal(0, tfail_count()); /* none of them allocated */
  assert_int_equal(KCR_ENOMEM, kcr_buf_err(&b));
  assert_string_equal("abc", kcr_buf_str(&b));
  assert_int_equal(cap, b.cap);
  kcr_buf_cleanup(&b);
}

static void a_refused_format_sticks_as_einval(void **state)
{
  struct kcr_buf b = KCR_BUF_INIT;

  assert_int_equal(KCR_OK, kcr_buf_puts(&b, "abc"));
  assert_int_equal(KCR_EINVAL, kcr_buf_printf(&b, "%ls", euro));
  assert_int_equal(KCR_EINVAL, kcr_buf_err(&b));
  assert_int_equal(KCR_EINVAL, kcr_buf_puts(&b, "def"));
  tfail_arm(1); /* a later allocation failure does not replace it */
  assert_int_equal(KCR_EINVAL, kcr_buf_reserve(&b, 100000));
  assert_false(tfail_fired());
  tfail_arm(0);
  assert_int_equal(KCR_EINVAL, kcr_buf_err(&b));
  assert_string_equal("abc", kcr_buf_str(&b));
  kcr_buf_cleanup(&b);
}

static void reset_clears_the_error_and_the_buffer_works_again(void **state)
{
  struct kcr_buf b = KCR_BUF_INIT;

  make_failed(&b);
  kcr_buf_reset(&b);
  assert_int_equal(KCR_OK, kcr_buf_err(&b));
  assert_int_equal(0, b.len);
  assert_string_equal("", kcr_buf_str(&b));
  assert_int_equal(KCR_OK, kcr_buf_puts(&b, "again"));
  assert_string_equal("again", kcr_buf_str(&b));
  kcr_buf_cleanup(&b);
}

static void cleanup_clears_the_error(void **state)
{
  struct kcr_buf b = KCR_BUF_INIT;

  make_failed(&b);
  kcr_buf_cleanup(&b);
  assert_int_equal(KCR_OK, kcr_buf_err(&b));
  assert_null(b.ptr);
  assert_int_equal(0, b.len);
  assert_int_equal(0, b.cap);
  assert_int_equal(KCR_OK, kcr_buf_puts(&b, "again"));
  assert_string_equal("again", kcr_buf_str(&b));
  kcr_buf_cleanup(&b);
}

static void take_of_a_failed_buffer_is_null_and_frees_and_resets_it(void **state)
{
  struct kcr_buf b = KCR_BUF_INIT;
  long live = tfail_live();
  char *s;

  make_failed(&b);
  assert_int_equal(live + 1, tfail_live());
  s = kcr_buf_take(&b);
  assert_null(s);
  assert_int_equal(live, tfail_live()); /* the partial text was freed */
  assert_null(b.ptr);
  assert_int_equal(0, b.len);
  assert_int_equal(0, b.cap);
  assert_int_equal(KCR_OK, kcr_buf_err(&b));
  assert_int_equal(KCR_OK, kcr_buf_puts(&b, "again"));
  s = kcr_buf_take(&b);
  assert_string_equal("again", s);
  free(s);
}

static void consume_keeps_the_error(void **state)
{
  struct kcr_buf b = KCR_BUF_INIT;

  make_failed(&b);
  kcr_buf_consume(&b, 1);
  assert_string_equal("bc", kcr_buf_str(&b));
  assert_int_equal(KCR_ENOMEM, kcr_buf_err(&b));
  kcr_buf_consume(&b, 100); /* everything: still failed */
  assert_int_equal(0, b.len);
  assert_string_equal("", kcr_buf_str(&b));
  assert_int_equal(KCR_ENOMEM, kcr_buf_err(&b));
  assert_int_equal(KCR_ENOMEM, kcr_buf_puts(&b, "x"));
  assert_int_equal(0, b.len);
  kcr_buf_cleanup(&b);
}

/* len + extra + 1 used to wrap to len for extra == SIZE_MAX, and the
 * overflow check (need < len) let it through: reserve said yes. */
static void reserve_refuses_sizes_that_overflow(void **state)
{
  struct kcr_buf e = KCR_BUF_INIT, b = KCR_BUF_INIT, c = KCR_BUF_INIT;

  assert_int_equal(KCR_ENOMEM, kcr_buf_reserve(&e, SIZE_MAX));
  assert_int_equal(KCR_ENOMEM, kcr_buf_err(&e));
  assert_null(e.ptr);
  assert_int_equal(KCR_OK, kcr_buf_puts(&b, "abc"));
  assert_int_equal(KCR_ENOMEM, kcr_buf_reserve(&b, SIZE_MAX));
  assert_string_equal("abc", kcr_buf_str(&b));
  assert_int_equal(KCR_OK, kcr_buf_puts(&c, "abc"));
  assert_int_equal(KCR_ENOMEM, kcr_buf_reserve(&c, SIZE_MAX - 3));
  assert_int_equal(KCR_ENOMEM, kcr_buf_err(&c));
  kcr_buf_cleanup(&e);
  kcr_buf_cleanup(&b);
  kcr_buf_cleanup(&c);
}

/* The same overflow in the secret variant would have copied SIZE_MAX bytes. */
static void secret_append_refuses_sizes_that_overflow_and_keeps_the_error(void **state)
{
  struct kcr_buf b = KCR_BUF_INIT;

  assert_int_equal(KCR_OK, kcr__secret_append(&b, "abc", 3));
  assert_int_equal(KCR_ENOMEM, kcr__secret_append(&b, "x", SIZE_MAX));
  assert_int_equal(KCR_ENOMEM, kcr_buf_err(&b));
  assert_int_equal(KCR_ENOMEM, kcr__secret_append(&b, "d", 1));
  assert_string_equal("abc", kcr_buf_str(&b));
  kcr__wipe_free(b.ptr, b.cap);
}

/* ---- a sequence checked once, under every allocation failure ------------- */

#define NSTEPS 7

struct seq {
  char want[NSTEPS + 1][2048]; /* want[i]: the text after i steps */
};

static void seq_steps(struct kcr_buf *b)
{
  char big[200];

  memset(big, 'x', sizeof(big));
  kcr_buf_puts(b, "GET ");
  kcr_buf_printf(b, "/apis/%s/%s", "ebdman.example.com", "v1alpha1");
  kcr_buf_append(b, big, sizeof(big)); /* grows past the first 64 bytes */
  kcr_buf_urlenc(b, "a b/\xc3\xbc?&");
  kcr_buf_printf(b, "%0300d", 7); /* grows again */
  kcr_buf_reserve(b, 5000);
  kcr_buf_puts(b, "!");
}

static bool seq_once(void *ud)
{
  const struct seq *q = ud;
  struct kcr_buf b = KCR_BUF_INIT;
  kcr_err rc;
  char *s;
  bool ok = false;

  seq_steps(&b);
  rc = kcr_buf_err(&b);
  if(rc == KCR_OK) {
    ok = !strcmp(kcr_buf_str(&b), q->want[NSTEPS]) && b.cap > b.len + 5000 - 1;
  } else if(rc == KCR_ENOMEM) { /* the text of the steps before the failed one */
    for(int i = 0; i < NSTEPS; i++)
      ok |= b.len == strlen(q->want[i]) && !strcmp(kcr_buf_str(&b), q->want[i]);
  }
  s = kcr_buf_take(&b);
  ok = ok && (rc ? !s : s && !strcmp(s, q->want[NSTEPS])) && !b.ptr && !b.err;
  free(s);
  return ok;
}

static void a_sequence_checked_once_is_whole_or_the_steps_before_the_failure(void **state)
{
  static struct seq q;
  char big[201];
  int n = 0;

  memset(big, 'x', 200);
  big[200] = '\0';
  /* The expected text after each step, built by hand. */
  n += snprintf(q.want[1], sizeof(q.want[1]), "GET ");
  n += snprintf(q.want[2], sizeof(q.want[2]), "%s/apis/ebdman.example.com/v1alpha1",
                q.want[1]);
  n += snprintf(q.want[3], sizeof(q.want[3]), "%s%s", q.want[2], big);
  n += snprintf(q.want[4], sizeof(q.want[4]), "%sa%%20b%%2F%%C3%%BC%%3F%%26", q.want[3]);
  n += snprintf(q.want[5], sizeof(q.want[5]), "%s%0300d", q.want[4], 7);
  n += snprintf(q.want[6], sizeof(q.want[6]), "%s", q.want[5]);
  n += snprintf(q.want[7], sizeof(q.want[7]), "%s!", q.want[6]);
  assert_true(n > 0);
  tfail_torture("kcr_buf sequence + kcr_buf_err", seq_once, &q);
}

/* Debug builds check the invariants the DESIGN comments state (KCR_ASSERT):
 * a buffer or hash table whose fields contradict them aborts the next call
 * instead of writing out of bounds. Each case runs in a child process. */
static void buf_len_at_cap(void *ud)
{
  struct kcr_buf b = KCR_BUF_INIT;
  kcr_buf_puts(&b, "x");
  b.len = b.cap; /* len must stay below cap */
  kcr_buf_puts(&b, "y");
}

static void htab_nb_not_a_power_of_two(void *ud)
{
  struct kcr_htab t = KCR_HTAB_INIT;
  struct kcr_hnode n;
  kcr_htab_insert(&t, &n, 1);
  t.nb = 3; /* nb is a power of two */
  kcr_htab_lookup(&t, 1);
}

static void broken_invariants_abort_debug_builds(void **state)
{
  TABORT_SKIP_IN_RELEASE();
  assert_true(tabort(buf_len_at_cap, NULL));
  assert_true(tabort(htab_nb_not_a_power_of_two, NULL));
}

int main(void)
{
  tfail_init();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(a_fresh_buffer_has_no_error),
      cmocka_unit_test(a_failed_allocation_sticks_and_leaves_the_text),
      cmocka_unit_test(later_appends_are_no_ops_returning_the_first_error),
      cmocka_unit_test(a_refused_format_sticks_as_einval),
      cmocka_unit_test(reset_clears_the_error_and_the_buffer_works_again),
      cmocka_unit_test(cleanup_clears_the_error),
      cmocka_unit_test(take_of_a_failed_buffer_is_null_and_frees_and_resets_it),
      cmocka_unit_test(consume_keeps_the_error),
      cmocka_unit_test(reserve_refuses_sizes_that_overflow),
      cmocka_unit_test(secret_append_refuses_sizes_that_overflow_and_keeps_the_error),
      cmocka_unit_test(a_sequence_checked_once_is_whole_or_the_steps_before_the_failure),
      cmocka_unit_test(broken_invariants_abort_debug_builds),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
