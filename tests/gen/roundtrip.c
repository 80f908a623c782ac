/* gen-roundtrip: typed objects against what a real apiserver stores. Lists
 * every object of the test CRDs (tests/gen/crds, types generated at build
 * time) in one namespace, and for each: decodes it with the generated
 * types as a view and as a copy, encodes both, and compares - the two
 * encodings byte for byte, and the encoding with the object as the server
 * sent it: the same JSON value (member order ignored, numbers as exact
 * decimals, strings as the bytes they stand for, a null member the schema
 * does not make nullable as absent), and byte for byte
 * inside every member the schema keeps as raw JSON (preserve-unknown,
 * embedded resources, metadata).
 *
 *   gen-roundtrip NAMESPACE GROUP/VERSION/PLURAL[/cluster][=KIND]...
 *
 * GROUP "core" is the core group; /cluster lists a cluster-scoped resource;
 * KIND is the kind of items that carry none (a built-in list's).
 * Built-in kinds (k8s.h, from the OpenAPI snapshot) are found by their C
 * name, <group's first label>_<version>_<kind in snake_case>.
 * Run under tools/controlplane/start after tests/gen/verify.sh put the
 * samples there (tests/gen/roundtrip.sh, the ctest integration/gen_roundtrip, does both).
 * Every object the apiserver stored must also pass kcr_typed_validate.
 * Prints one line per object; exits 1 when one differs or none was found.
 *
 *   gen-roundtrip --files SAMPLES-DIR INVALID-DIR
 *
 * needs no server: see files_mode. */
#include <ctype.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "big.h"
#include "deep.h"
#include "freeform.h"
#include "intorstr.h"
#include "k8s.h"
#include "kcr.h"
#include "listmaps.h"
#include "unions.h"

static const struct kcr_type *const *const files[] = {
    big_types,      deep_types, freeform_types, intorstr_types,
    listmaps_types, k8s_types,  unions_types,
};

/* ---- comparing JSON values ---- */

/* A number literal as an exact decimal: sign, digits without leading or
 * trailing zeros, and the power of ten of the last one (0 is "0"). */
struct dec {
  bool neg;
  char d[64];
  long exp;
};

static bool decimal(struct kcr_jv v, struct dec *o)
{
  const char *p = v.at, *end = v.at + v.n;
  size_t n = 0;
  long frac = 0, e = 0;
  bool dot = false;

  memset(o, 0, sizeof(*o));
  if(p < end && *p == '-') {
    o->neg = true;
    p++;
  }
  for(; p < end && (isdigit((unsigned char)*p) || *p == '.'); p++) {
    if(*p == '.') {
      dot = true;
      continue;
    }
    if(dot)
      frac++;
    if(n == 0 && *p == '0')
      continue; /* leading zero */
    if(n + 1 >= sizeof(o->d))
      return false;
    o->d[n++] = *p;
  }
  if(p < end && (*p == 'e' || *p == 'E'))
    e = strtol(p + 1, NULL, 10);
  o->exp = e - frac;
  while(n && o->d[n - 1] == '0') {
    o->d[--n] = '\0';
    o->exp++;
  }
  if(!n) {
    o->neg = false;
    o->exp = 0;
  }
  return true;
}

static bool same(struct kcr_jv a, struct kcr_jv b, const struct kcr_type *t,
                 struct kcr_buf *path);

static bool same_string(struct kcr_jv a, struct kcr_jv b)
{
  struct kcr_arena ar = KCR_ARENA_INIT;
  struct kcr_str x, y;
  bool ok = !kcr_jv_string(a, &ar, 0, &x) && !kcr_jv_string(b, &ar, 0, &y) &&
            kcr_str_same(x, y);
  kcr_arena_cleanup(&ar);
  return ok;
}

/* The last member of obj named like nm (a name as written), or n 0. */
static struct kcr_jv member(struct kcr_jv obj, struct kcr_jv nm, size_t *count)
{
  struct kcr_arena ar = KCR_ARENA_INIT;
  struct kcr_jiter it;
  struct kcr_jv k, v, found = {0};
  struct kcr_str s;

  *count = 0;
  if(kcr_jv_string(nm, &ar, 0, &s))
    return found;
  kcr_jiter_init(&it, obj);
  while(kcr_jiter_next(&it, &k, &v) > 0) {
    ++*count;
    if(kcr_jv_str_is(k, s.s, s.n))
      found = v;
  }
  kcr_arena_cleanup(&ar);
  return found;
}

/* Member nm of object type t (NULL: none, or t is NULL). */
static const struct kcr_tfield *member_field(const struct kcr_type *t, struct kcr_jv nm)
{
  if(!t || t->kind != KCR_TK_OBJECT)
    return NULL;
  for(size_t i = 0; i < t->nfields; i++)
    if(kcr_jv_str_is(nm, t->fields[i].name, t->fields[i].name_len))
      return &t->fields[i];
  return NULL;
}

static bool fail_at(struct kcr_buf *path, const char *why)
{
  fprintf(stderr, "  at %s: %s\n", path->len ? kcr_buf_str(path) : "(root)", why);
  return false;
}

static bool same(struct kcr_jv a, struct kcr_jv b, const struct kcr_type *t,
                 struct kcr_buf *path)
{
  enum kcr_jtype ta = kcr_jv_type(a), tb = kcr_jv_type(b);
  size_t mark = path->len;

  if(t && t->kind == KCR_TK_RAW) /* byte for byte */
    return (a.n == b.n && !memcmp(a.at, b.at, a.n)) || fail_at(path, "raw bytes differ");
  if(ta != tb)
    return fail_at(path, "types differ");
  switch(ta) {
  case KCR_JT_NUMBER: {
    struct dec x, y;
    if(!decimal(a, &x) || !decimal(b, &y) || x.neg != y.neg || x.exp != y.exp ||
       strcmp(x.d, y.d))
      return fail_at(path, "numbers differ");
    return true;
  }
  case KCR_JT_STRING: return same_string(a, b) || fail_at(path, "strings differ");
  case KCR_JT_NULL:
  case KCR_JT_BOOL:
    return (a.n == b.n && !memcmp(a.at, b.at, a.n)) || fail_at(path, "values differ");
  case KCR_JT_OBJECT: {
    struct kcr_jiter it;
    struct kcr_jv k, v;
    size_t na = 0, nb = 0, distinct = 0;
    bool map = t && t->kind == KCR_TK_MAP;
    kcr_jiter_init(&it, a);
    while(kcr_jiter_next(&it, &k, &v) > 0) {
      struct kcr_jv w = member(b, k, &nb);
      struct kcr_arena ar = KCR_ARENA_INIT;
      struct kcr_str s;
      distinct++;
      if(!kcr_jv_string(k, &ar, KCR_JV_COPY, &s))
        kcr_json_ptr_append(path, s.s);
      kcr_arena_cleanup(&ar);
      const struct kcr_tfield *f = map ? NULL : member_field(t, k);
      if(!w.n && f && f->null_ == KCR_TNONE && kcr_jv_type(v) == KCR_JT_NULL) {
        /* null for a member not nullable reads as absent (built-in kinds:
         * Go writes a nil *Time as null) */
        distinct--;
        path->len = mark;
        path->ptr[mark] = '\0';
        continue;
      }
      if(!w.n)
        return fail_at(path, "member missing from the other");
      if(!same(member(a, k, &na), w, map ? t->elem : f ? f->type : NULL, path))
        return false;
      path->len = mark;
      path->ptr[mark] = '\0';
    }
    return distinct == nb || fail_at(path, "members differ in number");
  }
  case KCR_JT_ARRAY: {
    struct kcr_jiter ia, ib;
    struct kcr_jv k, x, y;
    size_t i = 0;
    int ra, rb;
    kcr_jiter_init(&ia, a);
    kcr_jiter_init(&ib, b);
    for(;; i++) {
      ra = kcr_jiter_next(&ia, &k, &x);
      rb = kcr_jiter_next(&ib, &k, &y);
      if(ra <= 0 || rb <= 0)
        break;
      kcr_buf_printf(path, "/%zu", i);
      if(!same(x, y, t && t->kind == KCR_TK_ARRAY ? t->elem : NULL, path))
        return false;
      path->len = mark;
      path->ptr[mark] = '\0';
    }
    return (ra == 0 && rb == 0) || fail_at(path, "arrays differ in length");
  }
  default: break;
  }
  return fail_at(path, "no value");
}

/* ---- one object ---- */

struct run {
  const char *group, *version, *kind;
  int objects, failed, validated;
};

static const struct kcr_type *type_of(struct kcr_jv obj, const struct run *r)
{
  size_t c;
  static const char kind[] = "\"kind\"";
  struct kcr_jv k = member(obj, (struct kcr_jv){.at = kind, .n = 6}, &c);
  const char *group = r->group, *version = r->version;
  char quoted[130];

  if(!k.at && r->kind && strlen(r->kind) < 128) {
    k.n = (size_t)snprintf(quoted, sizeof(quoted), "\"%s\"", r->kind);
    k.at = quoted;
  }
  char want[128], with_v[160], builtin[300], *w;
  struct kcr_arena ar = KCR_ARENA_INIT;
  struct kcr_str s;
  const struct kcr_type *found = NULL;

  if(kcr_jv_string(k, &ar, KCR_JV_COPY, &s) || s.n >= sizeof(want)) {
    kcr_arena_cleanup(&ar);
    return NULL;
  }
  for(size_t i = 0; i <= s.n; i++)
    want[i] = (char)tolower((unsigned char)s.s[i]);
  snprintf(with_v, sizeof(with_v), "%s_%s", want, version);
  w = builtin + snprintf(builtin, 160, "%.*s_%s_",
                         (int)strcspn(*group ? group : "core", "."),
                         *group ? group : "core", version);
  for(size_t i = 0; i < s.n; i++) {
    if(i && isupper((unsigned char)s.s[i]) && islower((unsigned char)s.s[i - 1]))
      *w++ = '_';
    *w++ = (char)tolower((unsigned char)s.s[i]);
  }
  *w = '\0';
  kcr_arena_cleanup(&ar);
  for(size_t f = 0; f < sizeof(files) / sizeof(files[0]); f++)
    for(size_t i = 0; files[f][i]; i++)
      if(!strcmp(files[f][i]->name, want) || !strcmp(files[f][i]->name, with_v) ||
         !strcmp(files[f][i]->name, builtin))
        found = files[f][i];
  return found;
}

/* Whether the object was written in the version it was read in (a
 * managedFields entry of that apiVersion): only then did the apiserver
 * check it against this version's schema. An object written in another
 * version is served in this one unchecked (no conversion webhook), and
 * may break its rules (pool-2's replicas -1, allowed by v1beta1, read as
 * v1). */
static bool written_as_read(const struct kcr_type *t, const void *obj)
{
  const struct kcr_meta_v1_object_meta *m = kcr_typed_meta(t, obj);
  const struct kcr_tfield *av = NULL;

  for(size_t i = 0; i < t->nfields; i++)
    if(!strcmp(t->fields[i].name, "apiVersion"))
      av = &t->fields[i];
  if(!m || !av || !*(const bool *)((const char *)obj + av->has))
    return false;
  const struct kcr_str *v = (const void *)((const char *)obj + av->off);
  for(size_t i = 0; i < m->managed_fields.n; i++)
    if(kcr_str_same(m->managed_fields.v[i].api_version, *v))
      return true;
  return false;
}

static kcr_err one(const char *text, size_t len, void *ud)
{
  struct run *r = ud;
  struct kcr_arena a = KCR_ARENA_INIT;
  struct kcr_buf view = KCR_BUF_INIT, copy = KCR_BUF_INIT, path = KCR_BUF_INIT;
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  struct kcr_jv in = {.at = text, .n = len}, out;
  const struct kcr_type *t = type_of(in, r);
  void *obj = t ? calloc(1, t->size) : NULL;
  bool ok = false;

  r->objects++;
  if(!t) {
    fprintf(stderr, "gen-roundtrip: an object of no generated kind: %.*s\n", (int)len,
            text);
  } else if(!obj || kcr_typed_decode(t, text, len, 0, &a, obj, &ei) ||
            kcr_typed_encode(t, obj, &view, &ei) ||
            kcr_typed_decode(t, text, len, KCR_TYPED_COPY, &a, obj, &ei) ||
            kcr_typed_encode(t, obj, &copy, &ei)) {
    fprintf(stderr, "gen-roundtrip: %s: %s\n", t->name,
            ei.message ? ei.message : "failed");
  } else if(view.len != copy.len || memcmp(view.ptr, copy.ptr, view.len)) {
    fprintf(stderr, "gen-roundtrip: %s: the view and the copy encode differently\n",
            t->name);
  } else {
    out = (struct kcr_jv){.at = view.ptr, .n = view.len};
    ok = same(in, out, t, &path);
    if(!ok)
      fprintf(stderr,
              "gen-roundtrip: %s: the round trip differs\n  in:  %.*s\n  out: %s\n",
              t->name, (int)len, text, view.ptr);
  }
  bool check = ok && written_as_read(t, obj);
  r->validated += check;
  if(check && kcr_typed_validate(t, obj, 0, &ei)) {
    fprintf(stderr,
            "gen-roundtrip: %s: validation refuses what the apiserver stored: %s\n",
            t->name, ei.message ? ei.message : "?");
    ok = false;
  }
  if(ok) {
    size_t c;
    static const char meta[] = "\"metadata\"";
    struct kcr_jv m = member(in, (struct kcr_jv){.at = meta, .n = 10}, &c);
    printf("ok   %s %.*s (%zu bytes)\n", t->name, (int)(m.n < 60 ? m.n : 60), m.at, len);
  } else {
    r->failed++;
  }
  free(obj);
  kcr_buf_cleanup(&view);
  kcr_buf_cleanup(&copy);
  kcr_buf_cleanup(&path);
  kcr_errinfo_cleanup(&ei);
  kcr_arena_cleanup(&a);
  return KCR_OK;
}

/* ---- objects in files, without a server ---- */

static char *slurp(const char *path, size_t *len)
{
  FILE *f = fopen(path, "rb");
  char *b = NULL;
  long n;

  if(f && !fseek(f, 0, SEEK_END) && (n = ftell(f)) >= 0 && !fseek(f, 0, SEEK_SET) &&
     (b = malloc((size_t)n + 1)) && fread(b, 1, (size_t)n, f) == (size_t)n) {
    b[n] = '\0';
    *len = (size_t)n;
  } else {
    free(b);
    b = NULL;
  }
  if(f)
    fclose(f);
  return b;
}

/* What the typed code says of the object in file path: NULL when it is
 * decoded and valid, else why not (static). */
static const char *refusal(const char *path, char *why, size_t n)
{
  static const char av[] = "\"apiVersion\"";
  struct kcr_arena a = KCR_ARENA_INIT;
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  struct kcr_jv in, v;
  struct kcr_str s;
  size_t len = 0, c;
  char *text = slurp(path, &len), group[128] = "", version[64] = "";
  const struct kcr_type *t = NULL;
  void *obj = NULL;
  const char *res = NULL;

  if(!text || kcr_json_check(text, len, &in)) {
    snprintf(why, n, "cannot read it as JSON");
    res = why;
  } else if(v = member(in, (struct kcr_jv){.at = av, .n = sizeof(av) - 1}, &c),
            kcr_jv_string(v, &a, KCR_JV_COPY, &s) ||
                sscanf(s.s, "%127[^/]/%63s", group, version) != 2) {
    snprintf(why, n, "no apiVersion group/version");
    res = why;
  } else if(!(t = type_of(in, &(struct run){.group = group, .version = version})) ||
            !(obj = calloc(1, t->size))) {
    snprintf(why, n, "of no generated kind");
    res = why;
  } else if(kcr_typed_decode(t, text, len, 0, &a, obj, &ei)) {
    snprintf(why, n, "decoding: %s", ei.message ? ei.message : "?");
    res = why;
  } else if(kcr_typed_validate(t, obj, 0, &ei)) {
    snprintf(why, n, "validation: %s", ei.message ? ei.message : "?");
    res = why;
  }
  free(obj);
  free(text);
  kcr_errinfo_cleanup(&ei);
  kcr_arena_cleanup(&a);
  return res;
}

/* gen-roundtrip --files SAMPLES INVALID: every sample (objects the
 * apiserver accepts) decodes and validates; every invalid object (one the
 * apiserver refuses, verify.sh checks) is refused by decoding or
 * validation - but for those INVALID/NOT-CHECKED names, one per line with
 * the rule kcr_typed_validate does not evaluate, which must be accepted
 * (so the list stays true). */
static int files_mode(const char *samples, const char *invalid)
{
  int failed = 0, seen = 0;
  char pat[4096], why[512], *skip;
  size_t skip_len = 0;
  glob_t g;

  snprintf(pat, sizeof(pat), "%s/NOT-CHECKED", invalid);
  skip = slurp(pat, &skip_len);
  for(int pass = 0; pass < 2; pass++) {
    snprintf(pat, sizeof(pat), "%s/*.json", pass ? invalid : samples);
    if(glob(pat, 0, NULL, &g)) {
      fprintf(stderr, "gen-roundtrip: nothing matches %s\n", pat);
      return 1;
    }
    for(size_t i = 0; i < g.gl_pathc; i++, seen++) {
      const char *file = g.gl_pathv[i], *base = strrchr(file, '/') + 1;
      const char *r = refusal(file, why, sizeof(why));
      char line[300];
      snprintf(line, sizeof(line), "\n%.*s ", (int)(strlen(base) - 5), base);
      bool listed = pass && skip && strstr(skip, line);
      bool good = pass ? (listed ? !r : r != NULL) : !r;
      printf("%s %s: %s%s\n", good ? "ok  " : "FAIL", base, r ? r : "accepted",
             listed ? " (NOT-CHECKED lists it)" : "");
      failed += !good;
    }
    globfree(&g);
  }
  free(skip);
  printf("gen-roundtrip --files: %d objects, %d failed\n", seen, failed);
  return failed || !seen;
}

int main(int argc, char **argv)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  kcr_config *cfg = NULL;
  kcr_client *c = NULL;
  struct run r = {0};

  if(argc == 4 && !strcmp(argv[1], "--files"))
    return files_mode(argv[2], argv[3]);
  if(argc < 3) {
    fprintf(stderr, "usage: gen-roundtrip NAMESPACE GROUP/VERSION/PLURAL...\n");
    return 2;
  }
  if(kcr_config_load(&(struct kcr_config_opts){0}, &cfg, &ei) ||
     kcr_client_new(&(struct kcr_client_opts){.config = cfg}, &c, &ei)) {
    fprintf(stderr, "gen-roundtrip: %s\n", ei.message ? ei.message : "no client");
    return 2;
  }
  for(int i = 2; i < argc; i++) {
    char group[128], version[64], plural[128], scope[16] = "", *kind;
    if((kind = strchr(argv[i], '=')))
      *kind++ = '\0';
    if(sscanf(argv[i], "%127[^/]/%63[^/]/%127[^/]/%15s", group, version, plural, scope) <
           3 ||
       (*scope && strcmp(scope, "cluster"))) {
      fprintf(stderr, "gen-roundtrip: %s is not GROUP/VERSION/PLURAL[/cluster]\n",
              argv[i]);
      return 2;
    }
    bool cluster = !strcmp(scope, "cluster");
    struct kcr_gvr gvr = {.group = strcmp(group, "core") ? group : "",
                          .version = version,
                          .resource = plural,
                          .namespaced = !cluster};
    r.group = gvr.group;
    r.version = version;
    r.kind = kind;
    if(kcr_list_each_text(c,
                          &(struct kcr_ref){.gvr = &gvr, .ns = cluster ? NULL : argv[1]},
                          NULL, one, &r, NULL, &ei)) {
      fprintf(stderr, "gen-roundtrip: listing %s: %s\n", argv[i], ei.message);
      r.failed++;
    }
  }
  printf("gen-roundtrip: %d objects (%d validated: written in the version read), %d "
         "failed\n",
         r.objects, r.validated, r.failed);
  kcr_client_free(c);
  kcr_config_free(cfg);
  kcr_errinfo_cleanup(&ei);
  return r.failed || !r.objects;
}
