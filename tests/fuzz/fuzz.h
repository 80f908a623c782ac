/* Shared by the libFuzzer targets (tests/fuzz/README.md). */
#ifndef KCR_FUZZ_H
#define KCR_FUZZ_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kcr.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

/* The library logs at debug level (so the log formatting of what the input
 * put in messages runs too) into /dev/null. */
static inline void fuzz_quiet(void)
{
  static FILE *devnull; /* fopen, not open: fuzz_kubeconfig wraps open() */
  if(!devnull && !(devnull = fopen("/dev/null", "w")))
    abort();
  kcr_log_set_fd(fileno(devnull));
  kcr_log_set_level(KCR_LOG_DEBUG);
}

/* A client configuration for targets that answer requests on the
 * client's wire seam (kube/client-int.h): a server that is never dialled,
 * a token. The caller frees it. Aborts when it cannot be made. */
static inline kcr_config *fuzz_config(void)
{
  static const char kubeconfig[] = "apiVersion: v1\n"
                                   "kind: Config\n"
                                   "clusters:\n"
                                   "- name: c\n"
                                   "  cluster:\n"
                                   "    server: https://fuzz.invalid\n"
                                   "users:\n"
                                   "- name: u\n"
                                   "  user:\n"
                                   "    token: t0ken\n"
                                   "contexts:\n"
                                   "- name: x\n"
                                   "  context:\n"
                                   "    cluster: c\n"
                                   "    user: u\n"
                                   "current-context: x\n";
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  kcr_config *cfg = NULL;

  if(kcr_config_from_yaml(kubeconfig, sizeof(kubeconfig) - 1, NULL, &cfg, &ei)) {
    fprintf(stderr, "fuzz: %s\n", ei.message ? ei.message : "no configuration");
    abort();
  }
  return cfg;
}

/* A NUL-terminated copy of data in a block of exactly size + 1 bytes, so
 * ASan sees a read past the end. Aborts when out of memory. */
static inline char *fuzz_str(const uint8_t *data, size_t size)
{
  char *s = malloc(size + 1);
  if(!s)
    abort();
  if(size)
    memcpy(s, data, size);
  s[size] = '\0';
  return s;
}

/* Whether two trees print the same (cJSON_Compare matches members by key,
 * so a tree with a duplicate key differs from its own copy). */
static inline bool fuzz_same_json(const cJSON *a, const cJSON *b)
{
  char *ta = cJSON_PrintUnformatted(a), *tb = cJSON_PrintUnformatted(b);
  bool same;
  if(!ta || !tb)
    abort();
  same = !strcmp(ta, tb);
  free(ta);
  free(tb);
  return same;
}

/* Whether object o has two members with the same key. The API server never
 * sends one (Go's encoder writes a map or a struct), and libraries that act
 * on "the" member of a key act on one of them: checks skip such input. */
static inline bool fuzz_has_duplicate_keys(const cJSON *o)
{
  const cJSON *a, *b;
  for(a = cJSON_IsObject(o) ? o->child : NULL; a; a = a->next)
    for(b = a->next; b; b = b->next)
      if(a->string && b->string && !strcmp(a->string, b->string))
        return true;
  return false;
}

/* fuzz_has_duplicate_keys of o or of any object inside it. */
static inline bool fuzz_has_duplicate_keys_deep(const cJSON *o)
{
  const cJSON *a;
  if(fuzz_has_duplicate_keys(o))
    return true;
  for(a = o && (cJSON_IsObject(o) || cJSON_IsArray(o)) ? o->child : NULL; a; a = a->next)
    if(fuzz_has_duplicate_keys_deep(a))
      return true;
  return false;
}

/* A broken invariant: a crash libFuzzer reports, with what was expected. */
#define FUZZ_CHECK(cond)                                                                 \
  do {                                                                                   \
    if(!(cond)) {                                                                        \
      fprintf(stderr, "fuzz check failed: %s (%s:%d)\n", #cond, __FILE__, __LINE__);     \
      abort();                                                                           \
    }                                                                                    \
  } while(0)

#endif
