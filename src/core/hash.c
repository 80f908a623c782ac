/* DESIGN: SipHash-2-4 (Aumasson and Bernstein, "SipHash: a fast short-input
 * PRF", 2012), written from the paper's description: four 64-bit words of
 * state initialised from the key and the four constants, two SipRounds per
 * 8-byte little-endian message word, the length in the top byte of the last
 * word, four finalisation rounds. The process key comes from getrandom();
 * if that fails (very old kernels, seccomp) it falls back to time, pid and
 * addresses, which still differ between processes. */
#include <pthread.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

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

static uint64_t le64(const unsigned char *p)
{
  uint64_t v = 0;
  for(int i = 7; i >= 0; i--)
    v = (v << 8) | p[i];
  return v;
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

uint64_t kcr_siphash24(const unsigned char key[16], const void *p, size_t n)
{
  const unsigned char *m = p;
  uint64_t k0 = le64(key), k1 = le64(key + 8);
  uint64_t v0 = k0 ^ 0x736f6d6570736575ull, v1 = k1 ^ 0x646f72616e646f6dull;
  uint64_t v2 = k0 ^ 0x6c7967656e657261ull, v3 = k1 ^ 0x7465646279746573ull;
  uint64_t last = (uint64_t)n << 56;
  size_t i, tail = n & 7;

  for(i = 0; i + 8 <= n; i += 8) {
    uint64_t w = le64(m + i);
    v3 ^= w;
    SIPROUND;
    SIPROUND;
    v0 ^= w;
  }
  for(size_t j = 0; j < tail; j++)
    last |= (uint64_t)m[i + j] << (8 * j);
  v3 ^= last;
  SIPROUND;
  SIPROUND;
  v0 ^= last;
  v2 ^= 0xff;
  SIPROUND;
  SIPROUND;
  SIPROUND;
  SIPROUND;
  return v0 ^ v1 ^ v2 ^ v3;
}

uint64_t kcr_hash(const void *p, size_t n)
{
  pthread_once(&key_once, key_init);
  return kcr_siphash24(proc_key, p, n);
}

uint64_t kcr_hash_str(const char *s) { return kcr_hash(s ? s : "", s ? strlen(s) : 0); }
