/* kcr-gen/names.c - C names for the model, deterministic from the JSON
 * path: a type is its kind's prefix and the members on the way in
 * snake_case ("ebd_spec_vfm"), an array's element adds "_item", a map's
 * value "_value"; an enum's constants are its member's name upper-cased
 * and the value's ("EBD_STATUS_CONDITIONS_ITEM_STATUS_TRUE"), with
 * <PREFIX>_UNKNOWN (0) for a value the schema does not list.
 *
 * C and C++ keywords (and the macros of the C library and of GNU C that
 * look like names: unix, linux, errno ...) get a trailing '_'. Names that
 * come out the same (after case folding: "fooBar" and "FooBar" are both
 * foo_bar; "replace" and "Replace" both REPLACE; "hasFoo" is has_foo, the
 * presence flag of foo): the first in byte order of the JSON text keeps
 * the name, each later one gets "_" and four hex digits of the FNV-1a
 * hash of its JSON text - the same suffix whatever else the schema holds.
 * A member whose name starts has_ or null_ comes after all others, so that
 * "size" keeps size (and its has_size) when the schema also has "hasSize". */
#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"

static const char *const reserved[] = {
    /* C11 */
    "auto", "break", "case", "char", "const", "continue", "default", "do", "double",
    "else", "enum", "extern", "float", "for", "goto", "if", "inline", "int", "long",
    "register", "restrict", "return", "short", "signed", "sizeof", "static", "struct",
    "switch", "typedef", "union", "unsigned", "void", "volatile", "while",
    /* C++20 */
    "alignas", "alignof", "and", "and_eq", "asm", "bitand", "bitor", "bool", "catch",
    "char8_t", "char16_t", "char32_t", "class", "compl", "concept", "consteval",
    "constexpr", "constinit", "const_cast", "co_await", "co_return", "co_yield",
    "decltype", "delete", "dynamic_cast", "explicit", "export", "false", "friend",
    "mutable", "namespace", "new", "noexcept", "not", "not_eq", "nullptr", "operator",
    "or", "or_eq", "private", "protected", "public", "reinterpret_cast", "requires",
    "static_assert", "static_cast", "template", "this", "thread_local", "throw", "true",
    "try", "typeid", "typename", "using", "virtual", "wchar_t", "xor", "xor_eq",
    /* macros that look like names */
    "unix", "linux", "i386", "errno", "assert", "stdin", "stdout", "stderr", "offsetof",
    "complex", "imaginary", "noreturn", "static_assert", "thread_local", "alignas",
    "alignof", "bool", "true", "false", "NULL", "EOF"};

static bool is_reserved(const char *s)
{
  for(size_t i = 0; i < sizeof(reserved) / sizeof(reserved[0]); i++)
    if(!strcmp(reserved[i], s))
      return true;
  return false;
}

static uint32_t fnv1a(const char *s)
{
  uint32_t h = 2166136261u;
  for(; *s; s++)
    h = (h ^ (unsigned char)*s) * 16777619u;
  return h;
}

/* snake_case of a JSON name: words split at case changes, every other
 * byte '_', runs of '_' one, none leading or trailing; "m" before one
 * that would start with a digit or be empty. upper: upper case. */
char *snake(const char *j, bool upper)
{
  size_t n = strlen(j);
  char *o = xalloc(2 * n + 3), *w = o;

  for(size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)j[i], p = i ? (unsigned char)j[i - 1] : 0,
                  nx = (unsigned char)j[i + 1];
    if(isupper(c) && c < 0x80) {
      if(i && ((islower(p) || isdigit(p)) || (isupper(p) && islower(nx))))
        *w++ = '_';
      *w++ = (char)(upper ? c : tolower(c));
    } else if(c < 0x80 && isalnum(c)) {
      *w++ = (char)(upper ? toupper(c) : c);
    } else {
      *w++ = '_';
    }
  }
  *w = '\0';
  /* collapse and trim '_' */
  char *r = o, *q = o;
  for(; *r; r++)
    if(*r != '_' || (q > o && q[-1] != '_'))
      *q++ = *r;
  while(q > o && q[-1] == '_')
    q--;
  *q = '\0';
  if(!*o || isdigit((unsigned char)*o)) {
    char *m = xprintf("%s%s", upper ? "M" : "m", o);
    return m;
  }
  return o;
}

/* A set of names taken, compared exactly. */
struct taken {
  char **v;
  size_t n, cap;
};

static bool has(const struct taken *t, const char *s)
{
  for(size_t i = 0; i < t->n; i++)
    if(!strcmp(t->v[i], s))
      return true;
  return false;
}

static void take(struct taken *t, const char *s)
{
  if(t->n == t->cap) {
    t->cap = t->cap ? 2 * t->cap : 64;
    if(!(t->v = realloc(t->v, t->cap * sizeof(char *))))
      xalloc((size_t)-1);
  }
  t->v[t->n++] = xstrdup(s);
}

static void taken_free(struct taken *t)
{
  free(t->v); /* the names are in xalloc's arena */
}

/* A name from base free in t (and, for a member, with its has_ and null_
 * free too), taken: base itself, else with the suffix of json. */
static char *unique(struct taken *t, const char *base, const char *json, bool member)
{
  char *name = is_reserved(base) ? xprintf("%s_", base) : xstrdup(base);

  for(unsigned round = 0;; round++) {
    char *h = xprintf("has_%s", name), *nu = xprintf("null_%s", name);
    bool clash = has(t, name) || (member && (has(t, h) || has(t, nu)));
    if(!clash) {
      take(t, name);
      if(member) {
        take(t, h);
        take(t, nu);
      }
      return name;
    }
    uint32_t x = fnv1a(json) + round * 0x9e3779b9u;
    name = xprintf(strpbrk(base, "abcdefghijklmnopqrstuvwxyz") ? "%s_%04x" : "%s_%04X",
                   base, (unsigned)(x & 0xffff));
  }
}

static void walk(struct schema *s, const char *base, struct taken *global);

static void object(struct schema *s, struct taken *global)
{
  struct taken mem = {0};

  /* in byte order of the JSON names, but a member's own name before a name
   * that could be another's presence flag ("hasSize" after "size") */
  for(int pass = 0; pass < 2; pass++)
    for(size_t i = 0; i < s->nprops; i++) {
      char *b = snake(s->props[i].json, false);
      bool flag = !strncmp(b, "has_", 4) || !strncmp(b, "null_", 5);
      if(flag == (pass == 1))
        s->props[i].member = unique(&mem, b, s->props[i].json, true);
    }
  taken_free(&mem);
  for(size_t i = 0; i < s->nprops; i++) {
    char *b = xprintf("%s_%s", s->cname, s->props[i].member);
    /* a trailing '_' of an escaped keyword is no part of a type's name */
    size_t n = strlen(b);
    if(n && b[n - 1] == '_')
      b[n - 1] = '\0';
    walk(s->props[i].s, b, global);
  }
}

static void walk(struct schema *s, const char *base, struct taken *global)
{
  if(s->named) /* a definition used again */
    return;
  s->named = true;
  if(s->ext) {
    s->cname = s->ext;
    return;
  }
  if(s->def_cname)
    base = s->def_cname;
  switch(s->kind) {
  case S_OBJ:
    s->cname = unique(global, base, s->path, false);
    object(s, global);
    break;
  case S_ARR:
  case S_MAP: {
    s->cname = unique(global, base, s->path, false);
    char *b = xprintf("%s_%s", s->cname, s->kind == S_ARR ? "item" : "value");
    walk(s->elem, b, global);
    break;
  }
  case S_ENUM: {
    struct taken k = {0};
    char *up = snake(base, true);
    s->cname = unique(global, base, s->path, false);
    s->unknown = xprintf("%s_UNKNOWN", up);
    take(&k, s->unknown);
    size_t *ord = xalloc((s->nvalues + 1) * sizeof(*ord));
    for(size_t i = 0; i < s->nvalues; i++) { /* by byte order of the values */
      size_t j = i;
      for(; j && strcmp(s->values[ord[j - 1]], s->values[i]) > 0; j--)
        ord[j] = ord[j - 1];
      ord[j] = i;
    }
    for(size_t o = 0; o < s->nvalues; o++) {
      size_t i = ord[o];
      char *v = *s->values[i] ? snake(s->values[i], true) : xstrdup("EMPTY");
      char *b = xprintf("%s_%s", up, v);
      s->consts[i] = unique(&k, b, s->values[i], false);
    }
    for(size_t i = 0; i < k.n; i++)
      if(has(global, k.v[i])) /* a constant of another enum: never, by prefix */
        fprintf(stderr, "kcr-gen: warning: constant %s named twice\n", k.v[i]);
      else
        take(global, k.v[i]);
    taken_free(&k);
    break;
  }
  default: break;
  }
}

void names_assign(struct kind *kinds, size_t n, struct schema **types, size_t nt)
{
  struct taken global = {0};

  /* the kinds' names first, so that no member's type takes one */
  for(size_t i = 0; i < n; i++) {
    struct kind *k = &kinds[i];
    bool several = false;
    for(size_t j = 0; j < n; j++)
      several |=
          j != i && !strcmp(k->kind, kinds[j].kind) && !strcmp(k->group, kinds[j].group);
    if(!k->prefix) {
      char *p = snake(k->kind, false);
      k->prefix = several ? xprintf("%s_%s", p, k->version) : p;
    }
    if(k->root->named) /* two kinds of one definition */
      continue;
    k->prefix = k->root->cname = unique(&global, k->prefix, k->root->path, false);
    k->root->named = true;
    /* the names of its callbacks' types: in C++ a member's struct of the same
     * name would clash with the typedef */
    static const char *const own[] = {"handlers", "map_fn", "obj_fn", "pair_fn"};
    for(size_t j = 0; j < sizeof(own) / sizeof(own[0]); j++)
      take(&global, xprintf("%s_%s", k->prefix, own[j]));
  }
  for(size_t i = 0; i < n; i++)
    if(kinds[i].root->kind == S_OBJ && !kinds[i].root->props[0].member)
      object(kinds[i].root, &global);
  for(size_t i = 0; i < nt; i++)
    walk(types[i], types[i]->cname ? types[i]->cname : "", &global);
  taken_free(&global);
}
