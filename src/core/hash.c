/* DESIGN: SipHash-2-4 (Aumasson and Bernstein, "SipHash: a fast short-input
 * PRF", 2012), written from the paper's description: four 64-bit words of
 * state initialised from the key and the four constants, two SipRounds per
 * 8-byte little-endian message word, the length in the top byte of the last
 * word, four finalisation rounds - sip_init, sip_word and sip_final, shared
 * by the buffer form and the string-vector form (core/hash-int.h). The
 * process key comes from getrandom(); if that fails (very old kernels,
 * seccomp) it falls back to time, pid and addresses, which still differ
 * between processes. */
#include <endian.h>
#include <pthread.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "core/hash-int.h"
#include "kcr/hash.h"

static unsigned char proc_key[16];
static pthread_once_t key_once = PTHREAD_ONCE_INIT;

static void key_init(void)
{
  if(getrandom(proc_key, sizeof(proc_key), 0) != (ssize_t)sizeof(proc_key)) {
    struct timespec ts;
    uint64_t a, b;
    clock_gettime(CLOCK_REALTIME, &ts);
    a = (uint64_t)ts.tv_sec * 1000000007ull ^ (uint64_t)ts.tv_nsec;
    b = ((uint64_t)getpid() << 32) ^ (uint64_t)(uintptr_t)&ts ^ (uint64_t)clock();
    memcpy(proc_key, &a, 8);
    memcpy(proc_key + 8, &b, 8);
  }
}

static uint64_t rotl(uint64_t x, int b) { return (x << b) | (x >> (64 - b)); }

/* One load where the compiler can (memcpy: p need not be aligned). */
static uint64_t le64(const unsigned char *p)
{
  uint64_t v;
  memcpy(&v, p, sizeof(v));
  return le64toh(v);
}

#define SIPROUND                                                                         \
  do {                                                                                   \
    v0 += v1;                                                                            \
    v1 = rotl(v1, 13);                                                                   \
    v1 ^= v0;                                                                            \
    v0 = rotl(v0, 32);                                                                   \
    v2 += v3;                                                                            \
    v3 = rotl(v3, 16);                                                                   \
    v3 ^= v2;                                                                            \
    v0 += v3;                                                                            \
    v3 = rotl(v3, 21);                                                                   \
    v3 ^= v0;                                                                            \
    v2 += v1;                                                                            \
    v1 = rotl(v1, 17);                                                                   \
    v1 ^= v2;                                                                            \
    v2 = rotl(v2, 32);                                                                   \
  } while(0)

/* The state of one SipHash-2-4 computation. */
struct sip {
  uint64_t v0, v1, v2, v3;
};

static struct sip sip_init(const unsigned char key[16])
{
  uint64_t k0 = le64(key), k1 = le64(key + 8);
  return (struct sip){k0 ^ 0x736f6d6570736575ull, k1 ^ 0x646f72616e646f6dull,
                      k0 ^ 0x6c7967656e657261ull, k1 ^ 0x7465646279746573ull};
}

/* Two SipRounds on one 8-byte message word. */
static void sip_word(struct sip *s, uint64_t w)
{
  uint64_t v0 = s->v0, v1 = s->v1, v2 = s->v2, v3 = s->v3 ^ w;
  SIPROUND;
  SIPROUND;
  *s = (struct sip){v0 ^ w, v1, v2, v3};
}

/* The last word (n, the message length, in its top byte; the tail bytes
 * below) and the four finalisation rounds. */
static uint64_t sip_final(struct sip *s, size_t n, uint64_t tail)
{
  uint64_t v0, v1, v2, v3;
  sip_word(s, ((uint64_t)n << 56) | tail);
  v0 = s->v0, v1 = s->v1, v2 = s->v2 ^ 0xff, v3 = s->v3;
  SIPROUND;
  SIPROUND;
  SIPROUND;
  SIPROUND;
  return v0 ^ v1 ^ v2 ^ v3;
}

uint64_t kcr_siphash24(const unsigned char key[16], const void *p, size_t n)
{
  const unsigned char *m = p;
  struct sip s = sip_init(key);
  uint64_t tail = 0;
  size_t i;

  for(i = 0; i + 8 <= n; i += 8)
    sip_word(&s, le64(m + i));
  for(size_t j = 0; i + j < n; j++)
    tail |= (uint64_t)m[i + j] << (8 * j);
  return sip_final(&s, n, tail);
}

uint64_t kcr_hash(const void *p, size_t n)
{
  pthread_once(&key_once, key_init);
  return kcr_siphash24(proc_key, p, n);
}

uint64_t kcr_hash_str(const char *s) { return kcr_hash(s ? s : "", s ? strlen(s) : 0); }

uint64_t kcr__hash_strv(const char *const *sv, size_t n)
{
  struct kcr__hasher h;

  kcr__hash_begin(&h);
  for(size_t i = 0; i < n; i++) /* the bytes, then the NUL */
    kcr__hash_add(&h, sv[i], strlen(sv[i]) + 1);
  return kcr__hash_end(&h);
}

void kcr__hash_begin(struct kcr__hasher *h)
{
  struct sip s;

  pthread_once(&key_once, key_init);
  s = sip_init(proc_key);
  *h = (struct kcr__hasher){.v = {s.v0, s.v1, s.v2, s.v3}};
}

void kcr__hash_add(struct kcr__hasher *h, const void *p, size_t n)
{
  const unsigned char *m = p, *end = m + n;
  struct sip s = {h->v[0], h->v[1], h->v[2], h->v[3]};
  uint64_t w = h->w;
  size_t len = h->len;

  /* Byte by byte up to a word boundary of the message, whole words while
   * they last, then the rest byte by byte. */
  for(; m < end && (len & 7); m++, len++) {
    w |= (uint64_t)*m << (8 * (len & 7));
    if(!((len + 1) & 7)) {
      sip_word(&s, w);
      w = 0;
    }
  }
  for(; end - m >= 8; m += 8, len += 8)
    sip_word(&s, le64(m));
  for(; m < end; m++, len++)
    w |= (uint64_t)*m << (8 * (len & 7));
  h->v[0] = s.v0, h->v[1] = s.v1, h->v[2] = s.v2, h->v[3] = s.v3;
  h->w = w;
  h->len = len;
}

uint64_t kcr__hash_end(struct kcr__hasher *h)
{
  struct sip s = {h->v[0], h->v[1], h->v[2], h->v[3]};
  return sip_final(&s, h->len, h->w);
}
