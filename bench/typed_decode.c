/* typed_decode - what reading an object costs: kcr-gen's typed decoding
 * against the tree a controller reads by hand (section 5 of bench/README.md).
 *
 *   typed_decode DIR [ROUNDS [WAY]]
 *
 * For each object - DIR/ebd.json (what ebdman reconciles) and
 * DIR/deployment.json (a built-in kind as the apiserver returns it, defaults
 * filled) - and each way of reading the fields a reconciler reads
 * (name, namespace, uid, generation, a spec field, the status conditions'
 * types and statuses, a label):
 *   tree   cJSON_ParseWithLength, then kcr_json_* at the fields (what
 *          kcr_obj_parse and ebdman do today)
 *   view   kcr_typed_decode with KCR_TYPED_TRUSTED (a kcr_obj's text is
 *          checked when stored), strings borrowed, then the struct members
 *   copy   the same with KCR_TYPED_COPY (every string in the arena)
 *   check  kcr_json_check alone, the floor of any reading that validates
 *   valid  view, then <kind>_validate (kcr_typed_validate: what the CRD's
 *          schema asks; a built-in kind has no checks, so the walk alone)
 * it runs ROUNDS (5) rounds of 20,000 decodes each, alternating the ways
 * within a round, and prints ns per object: min, median and max over the
 * rounds. WAY runs that one way alone (for callgrind: Ir per object is the
 * run's Ir over 21,000 x ROUNDS, less a run's with WAY none). Built with the project
 * (bench/CMakeLists.txt); the typed code is kcr_generate_types' output from the EBD CRD
 * and the apps/v1 snapshot. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ebds.h"
#include "k8s.h"
#include "kcr.h"

#define PER_ROUND  20000
#define MAX_ROUNDS 50

static volatile size_t sink; /* keeps the reads */

static double now_ns(void)
{
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static char *slurp(const char *dir, const char *name, size_t *len)
{
  char path[4096];
  FILE *f;
  char *s;
  long n;

  snprintf(path, sizeof(path), "%s/%s", dir, name);
  if(!(f = fopen(path, "rb")) || fseek(f, 0, SEEK_END) || (n = ftell(f)) < 0 ||
     fseek(f, 0, SEEK_SET) || !(s = malloc((size_t)n + 1)) ||
     fread(s, 1, (size_t)n, f) != (size_t)n) {
    fprintf(stderr, "typed_decode: cannot read %s\n", path);
    exit(2);
  }
  fclose(f);
  s[n] = '\0';
  *len = (size_t)n;
  return s;
}

enum way { TREE, VIEW, COPY, CHECK, VALID, NWAYS };
static const char *const way_name[] = {"tree", "view", "copy", "check", "valid"};

static void ebd_once(enum way w, const char *text, size_t len, struct kcr_arena *a)
{
  size_t acc = 0;

  if(w == CHECK) {
    struct kcr_jv v;
    acc = kcr_json_check(text, len, &v) == KCR_OK;
  } else if(w == TREE) {
    cJSON *o = cJSON_ParseWithLength(text, len);
    const cJSON *c;
    acc += strlen(kcr_json_str(o, "/metadata/name")) +
           strlen(kcr_json_str(o, "/metadata/namespace")) +
           strlen(kcr_json_str(o, "/metadata/uid")) +
           (size_t)kcr_json_int(o, "/metadata/generation", 0) +
           strlen(kcr_json_str(o, "/spec/vfmTemplate/image")) +
           (size_t)kcr_json_int(o, "/spec/vfmTemplate/replicas", 0) +
           strlen(kcr_json_member_str(kcr_json_at(o, "/metadata/labels"), "team"));
    cJSON_ArrayForEach(c, kcr_json_at(o, "/status/conditions"))
    {
      acc += strlen(kcr_json_member_str(c, "type")) +
             strlen(kcr_json_member_str(c, "status"));
    }
    cJSON_Delete(o);
  } else {
    struct ebd e;
    ebd_decode(text, len, KCR_TYPED_TRUSTED | (w == COPY ? KCR_TYPED_COPY : 0), a, &e,
               NULL);
    acc += e.metadata.name.n + e.metadata.namespace_.n + e.metadata.uid.n +
           (size_t)e.metadata.generation + e.spec.vfm_template.image.n +
           (size_t)e.spec.vfm_template.replicas;
    size_t i = kcr_str_index(e.metadata.labels.k, e.metadata.labels.n, "team");
    acc += i < e.metadata.labels.n ? e.metadata.labels.v[i].n : 0;
    for(size_t j = 0; j < e.status.conditions.n; j++)
      acc += e.status.conditions.v[j].type.n + e.status.conditions.v[j].status.text.n;
    if(w == VALID)
      acc += ebd_validate(&e, 0, NULL) == KCR_OK;
    kcr_arena_reset(a);
  }
  sink += acc;
}

static void deployment_once(enum way w, const char *text, size_t len, struct kcr_arena *a)
{
  size_t acc = 0;

  if(w == CHECK) {
    struct kcr_jv v;
    acc = kcr_json_check(text, len, &v) == KCR_OK;
  } else if(w == TREE) {
    cJSON *o = cJSON_ParseWithLength(text, len);
    const cJSON *c;
    acc += strlen(kcr_json_str(o, "/metadata/name")) +
           strlen(kcr_json_str(o, "/metadata/uid")) +
           (size_t)kcr_json_int(o, "/spec/replicas", 0);
    cJSON_ArrayForEach(c, kcr_json_at(o, "/spec/template/spec/containers"))
    {
      acc += strlen(kcr_json_member_str(c, "image"));
    }
    cJSON_Delete(o);
  } else {
    struct apps_v1_deployment d;
    apps_v1_deployment_decode(
        text, len, KCR_TYPED_TRUSTED | (w == COPY ? KCR_TYPED_COPY : 0), a, &d, NULL);
    acc += d.metadata.name.n + d.metadata.uid.n + (size_t)d.spec.replicas;
    for(size_t j = 0; j < d.spec.template_.spec.containers.n; j++)
      acc += d.spec.template_.spec.containers.v[j].image.n;
    if(w == VALID)
      acc += apps_v1_deployment_validate(&d, 0, NULL) == KCR_OK;
    kcr_arena_reset(a);
  }
  sink += acc;
}

static int cmp_double(const void *x, const void *y)
{
  double a = *(const double *)x, b = *(const double *)y;
  return (a > b) - (a < b);
}

int main(int argc, char **argv)
{
  struct {
    const char *file;
    void (*once)(enum way, const char *, size_t, struct kcr_arena *);
  } objs[] = {{.file = "ebd.json", .once = ebd_once},
              {.file = "deployment.json", .once = deployment_once}};
  int rounds = argc > 2 ? atoi(argv[2]) : 5, only = -1;
  struct kcr_arena a = KCR_ARENA_INIT;

  if(argc > 3) {
    only = NWAYS;
    for(int w = 0; w < NWAYS; w++)
      if(!strcmp(argv[3], way_name[w]))
        only = w;
    if(only == NWAYS && strcmp(argv[3], "none"))
      only = -2;
  }
  if(argc < 2 || rounds < 1 || rounds > MAX_ROUNDS || only == -2) {
    fprintf(stderr,
            "usage: typed_decode DIR [ROUNDS (1-%d) [tree|view|copy|check|valid|none]]\n",
            MAX_ROUNDS);
    return 2;
  }
  printf("# typed_decode: ns per object, %d rounds of %d, min median max\n", rounds,
         PER_ROUND);
  for(size_t o = 0; o < sizeof(objs) / sizeof(objs[0]); o++) {
    size_t len;
    char *text = slurp(argv[1], objs[o].file, &len);
    double ns[NWAYS][MAX_ROUNDS];
    for(int r = 0; r < rounds; r++)
      for(int w = 0; w < NWAYS; w++) {
        ns[w][r] = 0;
        if(only >= 0 && w != only)
          continue;
        for(int i = 0; i < 1000; i++) /* warm */
          objs[o].once((enum way)w, text, len, &a);
        double t0 = now_ns();
        for(int i = 0; i < PER_ROUND; i++)
          objs[o].once((enum way)w, text, len, &a);
        ns[w][r] = (now_ns() - t0) / PER_ROUND;
      }
    for(int w = 0; w < NWAYS; w++) {
      qsort(ns[w], (size_t)rounds, sizeof(double), cmp_double);
      printf("%-16s %zu bytes  %-5s %8.0f %8.0f %8.0f\n", objs[o].file, len, way_name[w],
             ns[w][0], ns[w][rounds / 2], ns[w][rounds - 1]);
    }
    free(text);
  }
  kcr_arena_cleanup(&a);
  return 0;
}
