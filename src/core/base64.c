/* DESIGN: a base64 decoder, written here because none of the dependencies
 * exports one. One pass over the input: whitespace is skipped, each alphabet
 * character adds six bits to a 24-bit accumulator that is flushed as three
 * bytes every fourth character. Padding may only end the input: once an '='
 * has been seen, only '=' and whitespace may follow. At the end, the number of
 * data characters modulo 4 decides the tail: 0 nothing, 2 one byte, 3 two
 * bytes, 1 is impossible in valid base64 and rejected. Stray bits in the last
 * character are ignored, as Go's StdEncoding (what kubectl uses) does.
 * Invariant: out never receives more than kcr_base64_decoded_max(len) bytes. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "kcr/base64.h"

/* Value of an alphabet character, -1 for '=', -2 for whitespace, -3 else. */
static int sextet(unsigned char c)
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
  if(c == '=')
    return -1;
  if(c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f')
    return -2;
  return -3;
}

size_t kcr_base64_decoded_max(size_t len) { return len / 4 * 3 + 3; }

kcr_err kcr_base64_decode(const char *in, size_t len, unsigned char **out,
                          size_t *out_len)
{
  unsigned char *buf;
  size_t n = 0, ndata = 0, npad = 0;
  uint32_t acc = 0;

  *out = NULL;
  *out_len = 0;
  buf = malloc(kcr_base64_decoded_max(len) + 1);
  if(!buf)
    return KCR_ENOMEM;
  for(size_t i = 0; i < len; i++) {
    int v = sextet((unsigned char)in[i]);
    if(v == -2)
      continue;
    if(v == -3)
      goto bad;
    if(v == -1) {
      npad++;
      continue;
    }
    if(npad) /* data after padding */
      goto bad;
    acc = acc << 6 | (uint32_t)v;
    if(++ndata % 4 == 0) {
      buf[n++] = (unsigned char)(acc >> 16);
      buf[n++] = (unsigned char)(acc >> 8);
      buf[n++] = (unsigned char)acc;
      acc = 0;
    }
  }
  switch(ndata % 4) {
  case 1: goto bad;
  case 2: buf[n++] = (unsigned char)(acc >> 4); break;
  case 3:
    buf[n++] = (unsigned char)(acc >> 10);
    buf[n++] = (unsigned char)(acc >> 2);
    break;
  default: break;
  }
  /* Padding, when present, must complete the last quantum exactly. */
  if(npad && (npad > 2 || (ndata + npad) % 4 != 0))
    goto bad;
  buf[n] = '\0';
  *out = buf;
  *out_len = n;
  return KCR_OK;
bad:
  free(buf);
  return KCR_EPARSE;
}
