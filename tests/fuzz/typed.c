/* Typed objects: the descriptions kcr-gen generated from one CRD file (its
 * <base>_types: every kind in it), decoded from any text as a view and as
 * a copy, encoded, and decoded again. Built once per file listed in
 * tests/fuzz/typed-kinds, as fuzz_typed_<base>.
 * Input: a byte picking the kind, then JSON.
 * Checked: the view and the copy decode alike (the same result, and on
 * success the same encoding); a text kcr_json_check refuses is refused
 * (KCR_EPARSE); a text it accepts decodes alike as KCR_TYPED_TRUSTED
 * (the one-pass walk that does not check again); what encoding writes decodes again, to
 * an object that encodes to the same bytes (a fixed point); a decode that fails reports
 * it in ei; kcr_typed_validate gives the view and the copy the same verdict, a
 * refusal with its message, and what is valid is valid with KCR_VALIDATE_PARTIAL. */
#include "fuzz.h"
#include KCR_FUZZ_TYPED_HEADER

#define CAT2(a, b) a##b
#define CAT(a, b)  CAT2(a, b)
#define TYPES      CAT(KCR_FUZZ_TYPED_BASE, _types)

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
  fuzz_quiet();
  return 0;
}

/* The verdict of the last round's validation (KCR_EINVAL: invalid). */
static kcr_err verdict;

/* Decodes text as t in the form flags say, validates it (verdict) and
 * encodes it into out (empty when decoding failed); returns the decode's
 * result. */
static kcr_err round(const struct kcr_type *t, const char *text, size_t n, unsigned flags,
                     struct kcr_arena *a, struct kcr_buf *out)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  void *obj = malloc(t->size);
  kcr_err rc;

  FUZZ_CHECK(obj);
  rc = kcr_typed_decode(t, text, n, flags, a, obj, &ei);
  FUZZ_CHECK(!rc || ei.message);
  verdict = KCR_OK;
  if(!rc) {
    verdict = kcr_typed_validate(t, obj, 0, &ei);
    FUZZ_CHECK(!verdict || (verdict == KCR_EINVAL && ei.message));
    /* what is valid is valid as a part too */
    FUZZ_CHECK(verdict || !kcr_typed_validate(t, obj, KCR_VALIDATE_PARTIAL, NULL));
    FUZZ_CHECK(kcr_typed_encode(t, obj, out, NULL) == KCR_OK);
  }
  kcr_errinfo_cleanup(&ei);
  free(obj);
  return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  size_t nt = 0;
  struct kcr_arena a = KCR_ARENA_INIT;
  struct kcr_buf v = KCR_BUF_INIT, c = KCR_BUF_INIT, again = KCR_BUF_INIT;
  struct kcr_jv jv;

  while(TYPES[nt])
    nt++;
  if(!size || !nt)
    return 0;
  const struct kcr_type *t = TYPES[data[0] % nt];
  /* no text is NULL, as a caller may pass it (the contract allows it) */
  const char *text = size > 1 ? (const char *)data + 1 : NULL;
  size_t n = size - 1;
  kcr_err rv = round(t, text, n, 0, &a, &v), vv = verdict;
  kcr_err rcp = round(t, text, n, KCR_TYPED_COPY, &a, &c);

  FUZZ_CHECK(rv == rcp && vv == verdict); /* a view and a copy alike */
  bool checked = text && !kcr_json_check(text, n, &jv);
  if(!checked)
    FUZZ_CHECK(rv == KCR_EPARSE);
  if(checked || !n) { /* no text at all is refused the same, trusted or not */
    struct kcr_buf tr = KCR_BUF_INIT;
    FUZZ_CHECK(round(t, text, n, KCR_TYPED_TRUSTED, &a, &tr) == rv);
    FUZZ_CHECK(tr.len == v.len && (!v.len || !memcmp(tr.ptr, v.ptr, v.len)));
    kcr_buf_cleanup(&tr);
  }
  if(!rv) {
    FUZZ_CHECK(v.len == c.len && !memcmp(v.ptr, c.ptr, v.len));
    /* the fixed point: what was written reads back to the same text */
    FUZZ_CHECK(round(t, v.ptr, v.len, KCR_TYPED_TRUSTED, &a, &again) == KCR_OK);
    FUZZ_CHECK(again.len == v.len && !memcmp(again.ptr, v.ptr, v.len));
  }
  kcr_buf_cleanup(&v);
  kcr_buf_cleanup(&c);
  kcr_buf_cleanup(&again);
  kcr_arena_cleanup(&a);
  return 0;
}
