/* Error answers: kcr_errinfo_from_http on any HTTP code and body (what a
 * failed request or a non-200 watch answer hands it), and
 * kcr_errinfo_from_status on any parsed JSON (a watch ERROR event's object).
 * Input: 2 bytes of HTTP code (big-endian, mapped to 100..999), then the body.
 * Checked: 2xx is KCR_OK and leaves ei untouched; otherwise the code is a
 * known kcr_err, ei->code is set, and a body kept verbatim is at most 4 KiB. */
#include "fuzz.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
  fuzz_quiet();
  return 0;
}

static void check_err(kcr_err rc)
{
  FUZZ_CHECK(strcmp(kcr_err_name(rc), "EUNKNOWN") != 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  cJSON *tree = NULL;
  const char *body;
  size_t len;
  long code;
  kcr_err rc;

  if(size < 2)
    return 0;
  code = 100 + (long)((data[0] << 8 | data[1]) % 900);
  body = (const char *)data + 2;
  len = size - 2;

  rc = kcr_errinfo_from_http(&ei, code, body, len);
  check_err(rc);
  if(code >= 200 && code < 300) {
    FUZZ_CHECK(rc == KCR_OK);
    FUZZ_CHECK(!ei.code && !ei.message && !ei.body && !ei.reason);
  } else {
    FUZZ_CHECK(rc != KCR_OK);
    FUZZ_CHECK(ei.code != 0);
    FUZZ_CHECK(!ei.body || strlen(ei.body) <= 4096);
  }
  /* Without an errinfo: the same answer. */
  FUZZ_CHECK(kcr_errinfo_from_http(NULL, code, body, len) == rc);
  kcr_errinfo_cleanup(&ei);

  if(kcr_json_parse(body, len, &tree, NULL) == KCR_OK) {
    rc = kcr_errinfo_from_status(&ei, tree);
    check_err(rc);
    FUZZ_CHECK(kcr_errinfo_from_status(NULL, tree) == rc);
    /* Reusing a filled errinfo frees what it held. */
    check_err(kcr_errinfo_from_status(&ei, tree));
    kcr_errinfo_cleanup(&ei);
    cJSON_Delete(tree);
  }
  return 0;
}
