/* kcr_base64_decode on any bytes (kubeconfig *-data fields, Secret data).
 * Checked: the decoded length is within kcr_base64_decoded_max, the result
 * is NUL-terminated, and a failure leaves *out NULL and *out_len 0.
 * Decoding is also checked against a plain reference decoder of the same
 * rules (whitespace skipped, padding optional, nothing after padding). */
#include <stdbool.h>

#include "fuzz.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
  fuzz_quiet();
  return 0;
}

static int val(unsigned char c)
{
  if(c >= 'A' && c <= 'Z')
    return c - 'A';
  if(c >= 'a' && c <= 'z')
    return c - 'a' + 26;
  if(c >= '0' && c <= '9')
    return c - '0' + 52;
  if(c == '+')
    return 62;
  if(c == '/')
    return 63;
  return -1;
}

/* The rules of kcr/base64.h written the obvious way: returns the decoded
 * length, or -1 for malformed input. */
static long reference(const uint8_t *in, size_t len, uint8_t *out)
{
  unsigned long acc = 0;
  size_t n = 0, pad = 0;
  long o = 0;

  for(size_t i = 0; i < len; i++) {
    unsigned char c = in[i];
    if(c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v')
      continue;
    if(c == '=') {
      pad++;
      continue;
    }
    if(pad || val(c) < 0)
      return -1; /* data after padding, or outside the alphabet */
    acc = acc << 6 | (unsigned long)val(c);
    if(++n % 4 == 0) {
      out[o++] = (uint8_t)(acc >> 16);
      out[o++] = (uint8_t)(acc >> 8);
      out[o++] = (uint8_t)acc;
      acc = 0;
    }
  }
  switch(n % 4) {
  case 1: return -1; /* a dangling character */
  case 2:
    if(pad && pad != 2)
      return -1;
    out[o++] = (uint8_t)(acc >> 4);
    break;
  case 3:
    if(pad && pad != 1)
      return -1;
    out[o++] = (uint8_t)(acc >> 10);
    out[o++] = (uint8_t)(acc >> 2);
    break;
  default:
    if(pad)
      return -1;
  }
  return o;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  unsigned char *out = (unsigned char *)"not set";
  size_t out_len = 12345;
  uint8_t *ref = malloc(size + 1);
  long ref_len;
  kcr_err rc;

  if(!ref)
    abort();
  rc = kcr_base64_decode((const char *)data, size, &out, &out_len);
  ref_len = reference(data, size, ref);
  if(rc == KCR_OK) {
    FUZZ_CHECK(out != NULL);
    FUZZ_CHECK(out_len <= kcr_base64_decoded_max(size));
    FUZZ_CHECK(out[out_len] == '\0');
    FUZZ_CHECK(ref_len >= 0 && (size_t)ref_len == out_len);
    FUZZ_CHECK(!out_len || !memcmp(out, ref, out_len));
  } else {
    FUZZ_CHECK(rc == KCR_EPARSE);
    FUZZ_CHECK(out == NULL && out_len == 0);
  }
  free(out);
  free(ref);
  return 0;
}
