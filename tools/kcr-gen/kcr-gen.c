/* kcr-gen - typed C objects from CustomResourceDefinitions.
 *
 *   kcr-gen [-o DIR] [--version V]... [--path P]... [--name BASE] [--check]
 *           CRD.yaml...
 *
 * For each CRD file, DIR/BASE.h and DIR/BASE.c: every served version of
 * every CRD in the file (or the versions --version names). BASE is the
 * file's name without directory and extension, and of a name controller-gen
 * writes (<group>_<plural>.yaml) the plural: ebdman.example.com_ebds.yaml
 * gives ebds.h. --check writes nothing and exits 1 when a file on disk is
 * not what the input gives now (a stale file). --path P (JSON Pointers from
 * the object's root: /spec/image) cuts each kind down to those paths (paths.c)
 * and writes them as its keep list, <prefix>_keep. docs/typed-objects.md is the
 * user's guide; kcr/typed.h the engine the output runs on.
 *
 *   kcr-gen [-o DIR] --openapi DOC.json... --kind GVK... --name BASE [--check]
 *
 * The second form: the built-in kinds GVK (v1/ConfigMap, apps/v1/Deployment)
 * from the apiserver's OpenAPI v3 documents (tools/kcr-gen/openapi), into
 * one DIR/BASE.h and .c; --meta instead of --kind and --name writes
 * libkcr's own kcr/meta.h (tools/kcr-gen/openapi/meta.sh).
 *
 * DESIGN. Three passes over a model (model.h): crd.c reads the YAML into
 * schema nodes (openapi.c the OpenAPI documents, with crd.c's rules), names.c gives them
 * C names, emit.c writes the text. The tool is a build step: it reads, writes and exits,
 * so running out of memory ends it with a message (xalloc) rather than unwinding. */
#include <errno.h>
#include <getopt.h>
#include <openssl/evp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emit.h"
#include "kcr/arena.h"
#include "kcr/version.h"
#include "model.h"

/* Everything the model holds lives in one arena, freed at exit. */
static struct kcr_arena heap = KCR_ARENA_INIT;

void *xalloc(size_t n)
{
  void *p = n == (size_t)-1 ? NULL : kcr_arena_alloc(&heap, n ? n : 1);
  if(!p) {
    fputs("kcr-gen: out of memory\n", stderr);
    exit(2);
  }
  memset(p, 0, n);
  return p;
}

char *xstrndup(const char *s, size_t n)
{
  char *d = xalloc(n + 1);
  memcpy(d, s, n);
  return d;
}

char *xstrdup(const char *s) { return xstrndup(s, strlen(s)); }

char *xprintf(const char *fmt, ...)
{
  va_list ap;
  char *s, *d;
  int n;

  va_start(ap, fmt);
  n = vasprintf(&s, fmt, ap);
  va_end(ap);
  if(n < 0)
    xalloc((size_t)-1);
  d = xstrndup(s, (size_t)n);
  free(s);
  return d;
}

static int slurp(const char *path, char **text, size_t *len)
{
  FILE *f = fopen(path, "rb");
  struct kcr_buf b = KCR_BUF_INIT;
  char chunk[65536];
  size_t n;

  if(!f) {
    fprintf(stderr, "kcr-gen: %s: %s\n", path, strerror(errno));
    return -1;
  }
  while((n = fread(chunk, 1, sizeof(chunk), f)) > 0)
    kcr_buf_append(&b, chunk, n);
  if(ferror(f) || kcr_buf_err(&b)) {
    fprintf(stderr, "kcr-gen: %s: read error\n", path);
    fclose(f);
    kcr_buf_cleanup(&b);
    return -1;
  }
  fclose(f);
  *len = b.len;
  *text = kcr_buf_take(&b);
  return *text ? 0 : -1;
}

static void sha256_hex(const char *text, size_t len, char hex[65])
{
  unsigned char md[32];
  unsigned int n = 0;

  if(!EVP_Digest(text, len, md, &n, EVP_sha256(), NULL) || n != 32)
    xalloc((size_t)-1);
  for(int i = 0; i < 32; i++)
    snprintf(hex + 2 * i, 3, "%02x", md[i]);
}

/* The output's base name from the input's path (see the top). */
static char *base_of(const char *path)
{
  const char *b = strrchr(path, '/'), *u;
  char *s, *dot;

  b = b ? b + 1 : path;
  s = xstrdup(b);
  if((dot = strrchr(s, '.')) && (!strcmp(dot, ".yaml") || !strcmp(dot, ".yml")))
    *dot = '\0';
  if((u = strrchr(s, '_')) && u[1]) {
    s = xstrdup(u + 1);
  }
  for(char *p = s; *p; p++)
    if(!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9')))
      *p = (*p >= 'A' && *p <= 'Z') ? (char)(*p - 'A' + 'a') : '_';
  return s;
}

/* Writes text to path unless it holds it already; with check, only says
 * whether it does. 0, or 1 (stale, with check), or -1. */
static int put(const char *path, const struct kcr_buf *text, bool check)
{
  char *old = NULL;
  size_t n = 0;
  FILE *f;
  bool same = false;

  if((f = fopen(path, "rb"))) {
    fclose(f);
    if(!slurp(path, &old, &n))
      same = n == text->len && !memcmp(old, text->ptr, n);
    free(old);
  }
  if(check) {
    if(!same)
      fprintf(stderr, "kcr-gen: %s is stale: regenerate it\n", path);
    return !same;
  }
  if(same)
    return 0;
  if(!(f = fopen(path, "wb")) || fwrite(text->ptr, 1, text->len, f) != text->len ||
     fclose(f)) {
    fprintf(stderr, "kcr-gen: %s: %s\n", path, strerror(errno));
    return -1;
  }
  return 0;
}

static void usage(FILE *f)
{
  fputs(
      "usage: kcr-gen [-o DIR] [--version V]... [--path P]... [--name BASE] [--check] "
      "CRD.yaml...\n"
      "       kcr-gen [-o DIR] --openapi DOC.json... --kind GVK... --name BASE "
      "[--check]\n"
      "Typed C objects (BASE.h, BASE.c) from each file of CustomResourceDefinitions,\n"
      "or of built-in kinds (GVK: v1/ConfigMap, apps/v1/Deployment) from the\n"
      "apiserver's OpenAPI v3 documents (the snapshot in share/kcr/openapi).\n"
      "  -o, --output DIR  where to write (default .)\n"
      "  --version V       only version V (repeat for more; default: every served one)\n"
      "  --path P          only the members on path P (a JSON Pointer: /spec/image;\n"
      "                    repeat), written as the keep list <prefix>_keep too\n"
      "  --name BASE       the output's base name (one input only)\n"
      "  --check           write nothing; exit 1 if an output is stale\n"
      "  --openapi DOC     an OpenAPI v3 document (repeat: every one the kinds need)\n"
      "  --kind GVK        a built-in kind, as apiVersion/Kind (repeat)\n"
      "  --meta            libkcr's own kcr/meta.h and meta.c (its build only)\n"
      "  --help, --about\n",
      f);
}

/* Names the model, writes DIR/BASE.h and .c (or checks them). 0, 1 (stale,
 * with check) or -1. */
static int write_out(const char *dir, const char *base, const char *shown,
                     const char *sha, struct kind *kinds, size_t nk,
                     struct schema **types, size_t nt, bool check)
{
  struct kcr_buf h = KCR_BUF_INIT, c = KCR_BUF_INIT;
  int rc;

  names_assign(kinds, nk, types, nt);
  emit(base, shown, sha, kinds, nk, types, nt, &h, &c);
  rc = put(xprintf("%s/%s.h", dir, base), &h, check);
  if(rc >= 0) {
    int r2 = put(xprintf("%s/%s.c", dir, base), &c, check);
    rc = r2 < 0 ? r2 : rc | r2;
  }
  kcr_buf_cleanup(&h);
  kcr_buf_cleanup(&c);
  return rc;
}

static int one(const char *path, const char *dir, const char *name,
               const char *const *only, size_t nonly, const char *const *paths,
               size_t npaths, bool check)
{
  struct kind *kinds = NULL;
  size_t nk = 0;
  char *text, sha[65];
  size_t len;
  int rc;

  if(slurp(path, &text, &len))
    return -1;
  if(npaths) { /* the output follows the paths too: they are input */
    struct kcr_buf all = KCR_BUF_INIT;
    kcr_buf_append(&all, text, len);
    for(size_t i = 0; i < npaths; i++)
      kcr_buf_printf(&all, "\n--path %s", paths[i]);
    if(kcr_buf_err(&all))
      xalloc((size_t)-1);
    sha256_hex(all.ptr, all.len, sha);
    kcr_buf_cleanup(&all);
  } else {
    sha256_hex(text, len, sha);
  }
  rc = crd_read(path, text, len, only, nonly, &kinds, &nk);
  free(text);
  if(!rc && npaths)
    rc = paths_cut(kinds, nk, paths, npaths, path);
  if(!rc)
    rc = write_out(dir, name ? name : base_of(path),
                   strrchr(path, '/') ? strrchr(path, '/') + 1 : path, sha, kinds, nk,
                   NULL, 0, check);
  free(kinds);
  return rc;
}

/* --openapi: the kinds gvks[0..n) (or, with meta, libkcr's meta types)
 * from the documents docs[0..nd), into one file pair. */
static int openapi(const char *const *docs, size_t nd, const char *const *gvks, size_t n,
                   bool meta, const char *dir, const char *name, bool check)
{
  struct openapi *oa = NULL;
  struct kind *kinds = NULL;
  struct schema **types = NULL;
  size_t nk = 0, nt = 0;
  struct kcr_buf all = KCR_BUF_INIT, shown = KCR_BUF_INIT;
  char sha[65];
  int rc = 0;

  for(size_t i = 0; i < nd && !rc; i++) {
    char *text;
    size_t len;
    if(slurp(docs[i], &text, &len))
      return -1;
    kcr_buf_append(&all, text, len);
    kcr_buf_printf(&shown, "%s%s", i ? " " : "",
                   strrchr(docs[i], '/') ? strrchr(docs[i], '/') + 1 : docs[i]);
    rc = openapi_read(&oa, docs[i], text, len);
    free(text);
  }
  if(kcr_buf_err(&all) || kcr_buf_err(&shown))
    xalloc((size_t)-1);
  sha256_hex(all.ptr, all.len, sha);
  if(!rc && meta)
    rc = openapi_meta(oa, &types, &nt);
  for(size_t i = 0; i < n && !rc; i++)
    rc = openapi_kind(oa, gvks[i], &kinds, &nk);
  if(!rc)
    rc = write_out(dir, meta ? "meta" : name, kcr_buf_str(&shown), sha, kinds, nk, types,
                   nt, check);
  openapi_free(oa);
  kcr_buf_cleanup(&all);
  kcr_buf_cleanup(&shown);
  free(kinds);
  return rc;
}

int main(int argc, char **argv)
{
  static const struct option opts[] = {{"output", required_argument, NULL, 'o'},
                                       {"version", required_argument, NULL, 'V'},
                                       {"path", required_argument, NULL, 'p'},
                                       {"name", required_argument, NULL, 'n'},
                                       {"check", no_argument, NULL, 'c'},
                                       {"openapi", required_argument, NULL, 'O'},
                                       {"kind", required_argument, NULL, 'k'},
                                       {"meta", no_argument, NULL, 'm'},
                                       {"help", no_argument, NULL, 'h'},
                                       {"about", no_argument, NULL, 'a'},
                                       {NULL, 0, NULL, 0}};
  const char *dir = ".", *name = NULL;
  const char **only = xalloc((size_t)argc * sizeof(char *));
  const char **docs = xalloc((size_t)argc * sizeof(char *));
  const char **gvks = xalloc((size_t)argc * sizeof(char *));
  const char **paths = xalloc((size_t)argc * sizeof(char *));
  size_t nonly = 0, ndocs = 0, ngvks = 0, npaths = 0;
  bool check = false, meta = false;
  int o, status = 0;

  while((o = getopt_long(argc, argv, "o:", opts, NULL)) != -1) {
    switch(o) {
    case 'o': dir = optarg; break;
    case 'V': only[nonly++] = optarg; break;
    case 'p': paths[npaths++] = optarg; break;
    case 'n': name = optarg; break;
    case 'c': check = true; break;
    case 'O': docs[ndocs++] = optarg; break;
    case 'k': gvks[ngvks++] = optarg; break;
    case 'm': meta = true; break;
    case 'h': usage(stdout); return 0;
    case 'a': printf("kcr-gen %s\n", KCR_VERSION); return 0;
    default: usage(stderr); return 2;
    }
  }
  if(ndocs || ngvks || meta) {
    int rc = -1;
    if(!ndocs || optind < argc || nonly || npaths ||
       (meta ? ngvks || name : !ngvks || !name))
      fputs("kcr-gen: --openapi DOC... with --kind GVK... and --name BASE (or --meta), "
            "and no CRD file, --version or --path (paths are for CRDs)\n",
            stderr);
    else
      rc = openapi(docs, ndocs, gvks, ngvks, meta, dir, name, check);
    kcr_arena_cleanup(&heap);
    return rc < 0 ? 2 : rc;
  }
  if(optind >= argc || (name && argc - optind > 1)) {
    fputs(optind >= argc ? "kcr-gen: no CRD file given\n"
                         : "kcr-gen: --name takes one input file\n",
          stderr);
    usage(stderr);
    return 2;
  }
  for(int i = optind; i < argc; i++) {
    int rc = one(argv[i], dir, name, only, nonly, paths, npaths, check);
    if(rc < 0) {
      kcr_arena_cleanup(&heap);
      return 2;
    }
    status |= rc;
  }
  kcr_arena_cleanup(&heap);
  return status;
}
