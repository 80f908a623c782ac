/* The answer of an exec credential plugin: kcr__exec_parse (the parser
 * kcr__exec_run hands the plugin's stdout to) on any bytes, for both
 * apiVersions a kubeconfig may name.
 * Checked: success yields a token or a certificate with its key, and the
 * result is wholly released by kcr__exec_result_cleanup (leaks are
 * reported by LeakSanitizer); failure leaves the result empty. */
#include "fuzz.h"
#include "kube/config-int.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
  fuzz_quiet();
  return 0;
}

static void parse(const char *api, const uint8_t *data, size_t size)
{
  struct kcr__exec_spec spec = {.api_version = (char *)api,
                                .command = (char *)"fuzz-plugin",
                                .where = (char *)"fuzz: users[0].user.exec"};
  struct kcr__exec_result r;
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  kcr_err rc;

  rc = kcr__exec_parse(&spec, data, size, &r, &ei);
  if(rc == KCR_OK) {
    FUZZ_CHECK(r.token || (r.cert.ptr && r.key.ptr));
    FUZZ_CHECK(!r.cert.ptr || r.cert.len == strlen((const char *)r.cert.ptr));
    FUZZ_CHECK(!r.key.ptr || r.key.len == strlen((const char *)r.key.ptr));
  } else {
    FUZZ_CHECK(rc == KCR_EPARSE || rc == KCR_ENOMEM);
    FUZZ_CHECK(!r.token && !r.cert.ptr && !r.key.ptr && !r.has_expiry);
    FUZZ_CHECK(rc == KCR_ENOMEM || ei.message);
  }
  kcr__exec_result_cleanup(&r);
  kcr_errinfo_cleanup(&ei);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  /* A copy of exactly size bytes: the parser must not read past them. */
  uint8_t *copy = malloc(size ? size : 1);
  if(!copy)
    abort();
  if(size)
    memcpy(copy, data, size);
  parse(KCR__EXEC_API_V1, copy, size);
  parse(KCR__EXEC_API_V1BETA1, copy, size);
  free(copy);
  return 0;
}
