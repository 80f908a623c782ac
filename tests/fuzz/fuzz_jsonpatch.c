/* kcr_json_diff on two JSON texts: the input up to its first NUL byte is
 * "from", the rest "to" (no NUL: the input against itself). Checked, with
 * the reference applier of tests/common/tjsonpatch.c (written from RFC
 * 6902, not from the code under test): the patch is a JSON array that,
 * applied to "from", gives a value equal to "to"; a text against itself
 * gives "[]"; with KCR_JSON_DIFF_NO_REMOVE the patch still applies and
 * holds no "remove"; a failure is one of the documented codes and leaves
 * the buffer as it was. */
#include "fuzz.h"
#include "kcr/jsonpatch.h"
#include "tjsonpatch.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
  fuzz_quiet();
  return 0;
}

/* The patch from a to b; the code returned, the text in *out (NULL on
 * error). */
static kcr_err run(const char *a, size_t na, const char *b, size_t nb, unsigned flags,
                   char **out, size_t *nops)
{
  struct kcr_buf p = KCR_BUF_INIT;
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  kcr_err rc = kcr_json_diff(a, na, b, nb, flags, &p, nops, &ei);

  FUZZ_CHECK(rc == KCR_OK || rc == KCR_EPARSE || rc == KCR_ERANGE);
  FUZZ_CHECK(!rc || (p.len == 0 && *nops == 0 && ei.message));
  kcr_errinfo_cleanup(&ei);
  *out = rc ? NULL : kcr_buf_take(&p);
  kcr_buf_cleanup(&p);
  return rc;
}

static void check_applies(const char *a, size_t na, const char *b, size_t nb,
                          const char *patch, bool exact)
{
  const char *why;

  if(!tjp_apply_check(a, na, patch, strlen(patch), exact ? b : NULL, nb, &why)) {
    fprintf(stderr, "patch %s: %s\n", patch, why);
    abort();
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  const char *in = (const char *)data, *nul = memchr(in, '\0', size);
  const char *a = in, *b = nul ? nul + 1 : in;
  size_t na = nul ? (size_t)(nul - in) : size, nb = nul ? size - na - 1 : size;
  struct kcr_jv va, vb;
  cJSON *ta = NULL, *tb = NULL;
  char *p;
  size_t n;

  kcr_err rc = run(a, na, b, nb, 0, &p, &n);
  /* the reference reads what kcr_json_parse takes: both texts, not more */
  bool ref = !kcr_json_check(a, na, &va) && !kcr_json_check(b, nb, &vb) &&
             !kcr_json_parse(va.at, va.n, &ta, NULL) &&
             !kcr_json_parse(vb.at, vb.n, &tb, NULL);
  cJSON_Delete(ta);
  cJSON_Delete(tb);
  if(rc) {
    FUZZ_CHECK(rc != KCR_EPARSE || kcr_json_check(a, na, &va) ||
               kcr_json_check(b, nb, &vb));
    return 0;
  }
  FUZZ_CHECK(p[0] == '[' && (n == 0) == !strcmp(p, "[]"));
  if(ref)
    check_applies(va.at, va.n, vb.at, vb.n, p, true);
  free(p);
  /* a text against itself: nothing */
  FUZZ_CHECK(!run(b, nb, b, nb, 0, &p, &n) && n == 0 && !strcmp(p, "[]"));
  free(p);
  /* without removes: applies, and removes nothing */
  FUZZ_CHECK(!run(a, na, b, nb, KCR_JSON_DIFF_NO_REMOVE, &p, &n));
  cJSON *ops = NULL;
  FUZZ_CHECK(!kcr_json_parse(p, strlen(p), &ops, NULL) && cJSON_IsArray(ops));
  for(cJSON *o = ops->child; o; o = o->next)
    FUZZ_CHECK(strcmp(kcr_json_str(o, "/op"), "remove"));
  cJSON_Delete(ops);
  if(ref)
    check_applies(va.at, va.n, vb.at, vb.n, p, false);
  free(p);
  return 0;
}
