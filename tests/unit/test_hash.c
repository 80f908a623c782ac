/* The keyed hash: SipHash-2-4 against the paper's vectors, and a process key
 * that is really random (two processes disagree). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/hash-int.h"
#include "kcr/hash.h"

static void siphash24_matches_the_reference_vectors(void **state)
{
  unsigned char key[16], msg[64];
  for(int i = 0; i < 16; i++)
    key[i] = (unsigned char)i;
  for(int i = 0; i < 64; i++)
    msg[i] = (unsigned char)i;
  /* Appendix A of the paper: key 00..0f, message 00..0e. */
  assert_true(kcr_siphash24(key, msg, 15) == 0xa129ca6149be45e5ull);
  /* The first entries of the reference implementation's vectors.h. */
  assert_true(kcr_siphash24(key, msg, 0) == 0x726fdb47dd0e0e31ull);
  assert_true(kcr_siphash24(key, msg, 1) == 0x74f839c593dc67fdull);
  assert_true(kcr_siphash24(key, msg, 8) == 0x93f5f5799a932462ull);
}

static uint64_t hash_in_child(void)
{
  int fd[2];
  uint64_t h = 0;
  pid_t pid;
  assert_int_equal(0, pipe(fd));
  pid = fork();
  assert_true(pid >= 0);
  if(pid == 0) {
    h = kcr_hash_str("ns/name");
    _exit(write(fd[1], &h, sizeof(h)) == sizeof(h) ? 0 : 1);
  }
  close(fd[1]);
  assert_int_equal(sizeof(h), read(fd[0], &h, sizeof(h)));
  close(fd[0]);
  waitpid(pid, NULL, 0);
  return h;
}

static void the_process_key_differs_between_processes(void **state)
{
  /* Forked children have not set up their key yet (the parent never
   * hashed), so each draws its own. Two equal draws: 2^-64. */
  uint64_t a = hash_in_child(), b = hash_in_child();
  assert_true(a != b);
  /* Within one process the hash is a function. */
  assert_true(kcr_hash_str("ns/name") == kcr_hash("ns/name", 7));
  assert_true(kcr_hash_str(NULL) == kcr_hash("", 0));
}

/* kcr__hash_strv is kcr_hash of the strings joined with their NULs, for
 * every split of the bytes over the 8-byte words SipHash eats. */
static void hash_strv_is_the_hash_of_the_joined_strings(void **state)
{
  static const char *const v[] = {
      "", "a", "controller", "0123456", "01234567", "ns/name-that-is-longer-than-a-word",
      "x"};
  enum { NV = sizeof(v) / sizeof(v[0]) };
  char buf[256];

  for(size_t first = 0; first < NV; first++)
    for(size_t n = 0; first + n <= NV; n++) {
      size_t len = 0;
      for(size_t i = 0; i < n; i++) {
        size_t l = strlen(v[first + i]) + 1;
        memcpy(buf + len, v[first + i], l);
        len += l;
      }
      assert_true(kcr__hash_strv(v + first, n) == kcr_hash(buf, len));
    }
  /* The NULs separate: ("ab", "") and ("a", "b") differ. */
  assert_true(kcr__hash_strv((const char *[]){"ab", ""}, 2) !=
              kcr__hash_strv((const char *[]){"a", "b"}, 2));
}

/* Bytes added in any pieces hash as kcr_hash of them all at once: every
 * length 0..40 of a text, cut at every point. */
static void a_hash_added_in_pieces_is_the_hash_of_the_whole(void **state)
{
  static const char text[] = "the quick brown fox jumps over the lazy dog, twice";
  for(size_t n = 0; n <= 40; n++)
    for(size_t cut = 0; cut <= n; cut++) {
      struct kcr__hasher h;
      kcr__hash_begin(&h);
      kcr__hash_add(&h, text, cut);
      kcr__hash_add(&h, "", 0);
      kcr__hash_add(&h, text + cut, n - cut);
      if(kcr__hash_end(&h) != kcr_hash(text, n))
        fail_msg("length %zu cut at %zu: not kcr_hash", n, cut);
    }
  (void)state;
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(siphash24_matches_the_reference_vectors),
      cmocka_unit_test(the_process_key_differs_between_processes),
      cmocka_unit_test(hash_strv_is_the_hash_of_the_joined_strings),
      cmocka_unit_test(a_hash_added_in_pieces_is_the_hash_of_the_whole),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
