/* HTTP/1.1 answers read as they arrive (kcr__h1, src/kube/h1-int.h).
 * Input: the bytes a server sends; a hash of them seeds how they are cut
 * into reads. Checked: reading the bytes whole and in those cuts gives the
 * same result - the same outcome, status code, body, reason, Retry-After,
 * Connection: close, and (unless refused) the same number of bytes taken -
 * then the same at the connection's end; a read takes no more than it is
 * given, all of it while the answer goes on; a body framed by
 * Content-Length is exactly that long. */
#include "fuzz.h"
#include "kube/h1-int.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
  fuzz_quiet();
  return 0;
}

static bool collect(const char *p, size_t n, void *ud)
{
  FUZZ_CHECK(kcr_buf_append(ud, p, n) == KCR_OK);
  return true;
}

struct read {
  enum kcr__h1_result r;
  size_t used;
  struct kcr__h1 h;
  struct kcr_buf body;
};

/* Reads data in pieces cut by the generator seeded with seed (0: whole). */
static void read_in(const uint8_t *data, size_t size, unsigned seed, struct read *rd)
{
  size_t at = 0;
  unsigned x = seed;

  kcr__h1_init(&rd->h);
  rd->body = (struct kcr_buf)KCR_BUF_INIT;
  rd->r = KCR__H1_MORE;
  while(at < size && rd->r == KCR__H1_MORE) {
    size_t n = size - at, used = (size_t)-1;
    if(seed) {
      x = x * 1103515245u + 12345u;
      n = 1 + (x >> 16) % (n < 64 ? n : 64);
    }
    rd->r = kcr__h1_feed(&rd->h, (const char *)data + at, n, &used, collect, &rd->body);
    FUZZ_CHECK(used <= n);
    FUZZ_CHECK(rd->r != KCR__H1_MORE || used == n);
    at += used;
  }
  rd->used = at;
  FUZZ_CHECK(kcr_buf_err(&rd->body) == KCR_OK);
}

static void same(const struct read *a, const struct read *b)
{
  FUZZ_CHECK(a->r == b->r);
  FUZZ_CHECK(a->r == KCR__H1_BAD || a->used == b->used);
  FUZZ_CHECK(a->h.code == b->h.code);
  FUZZ_CHECK(a->body.len == b->body.len);
  FUZZ_CHECK(!a->body.len || !memcmp(a->body.ptr, b->body.ptr, a->body.len));
  FUZZ_CHECK((a->h.why == NULL) == (b->h.why == NULL));
  FUZZ_CHECK(!a->h.why || !strcmp(a->h.why, b->h.why));
  if(a->r == KCR__H1_DONE) {
    FUZZ_CHECK(a->h.retry_after_s == b->h.retry_after_s);
    FUZZ_CHECK(a->h.close == b->h.close);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  struct read *whole = malloc(sizeof(*whole)), *cut = malloc(sizeof(*cut));
  unsigned seed = 2166136261u; /* FNV-1a of the input; odd, never 0 */

  for(size_t i = 0; i < size; i++)
    seed = (seed ^ data[i]) * 16777619u;
  seed |= 1u;

  FUZZ_CHECK(whole && cut);
  read_in(data, size, 0, whole);
  read_in(data, size, seed, cut);
  same(whole, cut);
  if(whole->r == KCR__H1_BAD)
    FUZZ_CHECK(whole->h.why != NULL);
  if(whole->r == KCR__H1_DONE && whole->h.code != 204 && whole->h.code != 304 &&
     whole->h.has_len && !whole->h.chunked)
    FUZZ_CHECK(whole->body.len == whole->h.len);
  whole->r = kcr__h1_eof(&whole->h);
  cut->r = kcr__h1_eof(&cut->h);
  same(whole, cut);
  FUZZ_CHECK(whole->r != KCR__H1_MORE);
  kcr_buf_cleanup(&whole->body);
  kcr_buf_cleanup(&cut->body);
  free(whole);
  free(cut);
  return 0;
}
