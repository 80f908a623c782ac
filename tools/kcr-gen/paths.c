/* kcr-gen/paths.c - a kind cut down to the paths a controller uses
 * (--path, PATHS of kcr_generate_types): the members on no listed path are
 * taken out of the model, so the generated struct lacks them (using one is
 * a compile error), and the paths become the kind's keep list, the cache
 * projection of kcr_informer_opts.keep (kcr/informer.h), so that the type
 * and the cache come from one declaration. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"

/* Whether a is b or an ancestor of b (JSON Pointers). */
static bool covers(const char *a, const char *b)
{
  size_t n = strlen(a);
  return !strncmp(a, b, n) && (b[n] == '/' || !b[n]);
}

/* What a node is, for messages. */
static const char *what(const struct schema *s)
{
  switch(s->kind) {
  case S_ARR: return "an array (a keep path keeps one whole: it does not index into it)";
  case S_MAP: return "a map (a keep path keeps one whole)";
  case S_RAW:
    return "kept as raw JSON text (preserve-unknown-fields, or an untyped value)";
  case S_OBJ: return "libkcr's own type";
  default: return "a scalar";
  }
}

/* Null if path is a JSON Pointer the library takes as a keep path (kcr/json.h
 * syntax, RFC 6901), else what is wrong. */
static const char *bad_syntax(const char *path)
{
  if(*path != '/')
    return "does not start with '/'";
  for(const char *c = path; *c; c++) {
    if(*c == '~' && c[1] != '0' && c[1] != '1')
      return "has a '~' not followed by 0 or 1 (write '~' as ~0 and '/' as ~1)";
    if(*c == '/' && (c[1] == '/' || !c[1]))
      return "has an empty member name";
  }
  return NULL;
}

/* Finds path's node in the (uncut) schema of k, or prints why it cannot
 * and returns -1. Under /metadata (libkcr's ObjectMeta) any member is
 * taken as the keep list takes it. */
static int resolve(const struct kind *k, const char *path, const char *origin)
{
  const struct schema *s = k->root;
  const char *why = bad_syntax(path);

  if(why) {
    fprintf(stderr, "kcr-gen: %s: path \"%s\" %s\n", origin, path, why);
    return -1;
  }
  while(strcmp(s->path, path)) {
    const struct schema *next = NULL;
    if(s->kind != S_OBJ || s->ext) {
      if(s->ext && !strcmp(s->path, "/metadata"))
        return 0;
      fprintf(stderr,
              "kcr-gen: %s: %s %s: path \"%s\" runs through %s, which is %s; list \"%s\" "
              "instead\n",
              origin, k->kind, k->version, path, *s->path ? s->path : "the object",
              what(s), s->path);
      return -1;
    }
    for(size_t i = 0; i < s->nprops && !next; i++)
      if(covers(s->props[i].s->path, path))
        next = s->props[i].s;
    if(!next) {
      fprintf(stderr,
              "kcr-gen: %s: %s %s: path \"%s\": the schema has no such member under "
              "%s\n",
              origin, k->kind, k->version, path, *s->path ? s->path : "the object");
      return -1;
    }
    s = next;
  }
  return 0;
}

/* Takes out of object s (on the way to a listed path) the members on no
 * listed path, recursively; the root keeps apiVersion, kind and metadata,
 * which the cache always keeps. */
static void cut(struct schema *s, char **paths, size_t n, bool root)
{
  size_t k = 0;
  for(size_t i = 0; i < s->nprops; i++) {
    struct prop *p = &s->props[i];
    bool kept = root && (!strcmp(p->json, "apiVersion") || !strcmp(p->json, "kind") ||
                         !strcmp(p->json, "metadata"));
    bool way = false;
    for(size_t j = 0; j < n && !kept; j++) {
      kept = covers(paths[j], p->s->path);
      way |= covers(p->s->path, paths[j]);
    }
    if(!kept && !way)
      continue;
    if(!kept) /* resolve() made sure it is an object of the CRD's own */
      cut(p->s, paths, n, false);
    s->props[k++] = *p;
  }
  s->nprops = k;
}

static int cmp_str(const void *a, const void *b)
{
  return strcmp(*(char *const *)a, *(char *const *)b);
}

int paths_cut(struct kind *kinds, size_t nk, const char *const *paths, size_t np,
              const char *origin)
{
  char **keep = xalloc((np ? np : 1) * sizeof(*keep));
  size_t n = 0;

  for(size_t i = 0; i < np; i++)
    keep[i] = xstrdup(paths[i]);
  qsort(keep, np, sizeof(*keep), cmp_str);
  for(size_t i = 0; i < np; i++) /* sorted, without repeats */
    if(!n || strcmp(keep[i], keep[n - 1]))
      keep[n++] = keep[i];
  for(size_t i = 0; i < nk; i++)
    for(size_t j = 0; j < n; j++)
      if(resolve(&kinds[i], keep[j], origin))
        return -1;
  for(size_t i = 0; i < nk; i++) {
    cut(kinds[i].root, keep, n, true);
    kinds[i].keep = keep;
    kinds[i].nkeep = n;
  }
  return 0;
}
