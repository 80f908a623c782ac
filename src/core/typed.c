/* core/typed.c - kcr/typed.h: decoding JSON text into the structs kcr-gen
 * describes, and encoding them back, by walking the description.
 *
 * DESIGN. One engine, tables from the generator: the generated code is
 * structs and constant descriptions only, so every kind decodes and
 * encodes by this one tested (and fuzzed) walk. Decoding follows the
 * text's structure in one pass after one check of the whole text (none for
 * a cached object's, checked when it was stored): a value is decoded where
 * it starts and the walk resumes where it ended, so nested text is not
 * read again at each level (stepping over each member to find its end,
 * as a kcr_jiter does, made a Deployment's decoding cost grow with its
 * depth); an object's members are found by binary search in its sorted
 * fields; an array grows in the arena by doubling. Errors name the JSON Pointer of the
 * value, built from a chain of frames on the stack only when one fails. */
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/json-int.h"
#include "kcr/json.h"
#include "kcr/meta.h"
#include "kcr/typed.h"

const struct kcr_type kcr_type_bool = {
    .name = "bool", .kind = KCR_TK_BOOL, .size = sizeof(bool)};
const struct kcr_type kcr_type_int = {
    .name = "int64", .kind = KCR_TK_INT, .size = sizeof(int64_t)};
const struct kcr_type kcr_type_number = {
    .name = "number", .kind = KCR_TK_NUMBER, .size = sizeof(double)};
const struct kcr_type kcr_type_string = {
    .name = "string", .kind = KCR_TK_STRING, .size = sizeof(struct kcr_str)};
const struct kcr_type kcr_type_intstr = {
    .name = "int-or-string", .kind = KCR_TK_INTSTR, .size = sizeof(struct kcr_intstr)};
const struct kcr_type kcr_type_raw = {
    .name = "raw", .kind = KCR_TK_RAW, .size = sizeof(struct kcr_raw)};
const struct kcr_type kcr_strlist_type =
    KCR_TARRAY("strings", struct kcr_strlist, &kcr_type_string);
const struct kcr_type kcr_strmap_type =
    KCR_TMAP("map of strings", struct kcr_strmap, &kcr_type_string);

/* The layout of every array member, and of every map member. */
struct arr {
  void *v;
  size_t n;
};
struct map {
  struct kcr_str *k;
  void *v;
  size_t n;
};
/* ... of nullable items (KCR_TNULLABLE_ITEMS) */
struct arr_null {
  void *v;
  bool *null;
  size_t n;
};
struct map_null {
  struct kcr_str *k;
  void *v;
  bool *null;
  size_t n;
};

/* Where a value is: a member name (escaped, as in the text) or an index. */
struct frame {
  const struct frame *up;
  struct kcr_jv name;        /* n 0: an element, idx */
  const char *cname;         /* a name of the description (encoding) */
  const struct kcr_str *key; /* a map's key (validation) */
  size_t idx;
};

struct dec {
  struct kcr_arena *a;
  bool copy;
  struct kcr_errinfo *ei;
  const char *end; /* of the text */
};

static void put_frames(struct kcr_buf *b, const struct frame *f)
{
  if(!f)
    return;
  put_frames(b, f->up);
  if(f->cname) {
    kcr_json_ptr_append(b, f->cname);
  } else if(f->key) {
    char *c = f->key->s ? strndup(f->key->s, f->key->n) : NULL;
    if(c && strlen(c) == f->key->n)
      kcr_json_ptr_append(b, c);
    else
      kcr_buf_puts(b, "/?");
    free(c);
  } else if(f->name.n >= 2) {
    struct kcr_arena a = KCR_ARENA_INIT;
    struct kcr_str s;
    if(!kcr_jv_string(f->name, &a, KCR_JV_COPY, &s) && !memchr(s.s, '\0', s.n))
      kcr_json_ptr_append(b, s.s);
    else
      kcr_buf_puts(b, "/?");
    kcr_arena_cleanup(&a);
  } else {
    kcr_buf_printf(b, "/%zu", f->idx);
  }
}

static const char *jtype_name(struct kcr_jv v)
{
  switch(kcr_jv_type(v)) {
  case KCR_JT_NULL: return "null";
  case KCR_JT_BOOL: return "a boolean";
  case KCR_JT_NUMBER: return "a number";
  case KCR_JT_STRING: return "a string";
  case KCR_JT_OBJECT: return "an object";
  case KCR_JT_ARRAY: return "an array";
  default: break;
  }
  return "no value";
}

static kcr_err fail(struct kcr_errinfo *ei, kcr_err rc, const struct frame *f,
                    const char *what, const char *detail)
{
  struct kcr_buf p = KCR_BUF_INIT;
  kcr_err r;

  if(!ei)
    return rc;
  put_frames(&p, f);
  r = kcr_errinfo_set(ei, rc, "%s: %s%s", p.len ? kcr_buf_str(&p) : "(the value)", what,
                      detail ? detail : "");
  kcr_buf_cleanup(&p);
  return r;
}

static kcr_err want(struct dec *d, const struct frame *f, const char *type,
                    struct kcr_jv v)
{
  struct kcr_buf m = KCR_BUF_INIT;
  kcr_err rc;

  kcr_buf_printf(&m, "want %s, got %s", type, jtype_name(v));
  rc = fail(d->ei, KCR_EPARSE, f, kcr_buf_err(&m) ? "wrong type" : kcr_buf_str(&m), NULL);
  kcr_buf_cleanup(&m);
  return rc;
}

static kcr_err decode(struct dec *d, const struct kcr_type *t, const char *p, void *out,
                      const struct frame *f, const char **next);

static const char *ws(const char *p, const char *end)
{
  while(p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r'))
    p++;
  return p;
}

static kcr_err malformed(struct dec *d, const struct frame *f)
{
  return fail(d->ei, KCR_EPARSE, f, "malformed or nested too deep", NULL);
}

/* The value at p (no white space before it) whole, *v; its end in *next. */
static kcr_err whole(struct dec *d, const char *p, struct kcr_jv *v,
                     const struct frame *f, const char **next)
{
  const char *e = kcr__json_skip(p, d->end);
  if(!e)
    return malformed(d, f);
  v->at = p;
  v->n = (size_t)(e - p);
  *next = e;
  return KCR_OK;
}

static kcr_err str(struct dec *d, struct kcr_jv v, struct kcr_str *out,
                   const struct frame *f)
{
  kcr_err rc = kcr_jv_string(v, d->a, d->copy ? KCR_JV_COPY : 0, out);
  if(rc == KCR_EPARSE)
    return want(d, f, "a string", v);
  return rc ? fail(d->ei, rc, f, "out of memory", NULL) : KCR_OK;
}

static kcr_err integer(struct dec *d, struct kcr_jv v, int64_t *out,
                       const struct frame *f)
{
  kcr_err rc = kcr_jv_int(v, out);
  if(rc == KCR_ERANGE)
    return fail(d->ei, rc, f, "integer outside int64", NULL);
  return rc ? want(d, f, "an integer", v) : KCR_OK;
}

/* The field of object type t named by the member name nm, or NULL. */
static const struct kcr_tfield *field(const struct kcr_type *t, struct kcr_jv nm,
                                      struct kcr_arena *a)
{
  const char *s = nm.at + 1;
  size_t n = nm.n - 2, lo = 0, hi = t->nfields;
  struct kcr_str u;

  if(memchr(s, '\\', n)) { /* rare: compare the name unescaped */
    if(kcr_jv_string(nm, a, 0, &u))
      return NULL;
    s = u.s;
    n = u.n;
  }
  while(lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    const struct kcr_tfield *x = &t->fields[mid];
    size_t m = x->name_len < n ? x->name_len : n;
    int c = memcmp(x->name, s, m);
    if(!c)
      c = x->name_len < n ? -1 : x->name_len > n;
    if(!c)
      return x;
    if(c < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  return NULL;
}

/* Reads the member name at *p and the ':' after it: *nm the name as
 * written, *p the member's value (white space skipped). */
static kcr_err member_name(struct dec *d, const char **p, struct kcr_jv *nm,
                           const struct frame *up)
{
  const char *e = NULL;
  if(*p >= d->end || **p != '"' || whole(d, *p, nm, up, &e))
    return malformed(d, up);
  e = ws(e, d->end);
  if(e >= d->end || *e != ':')
    return malformed(d, up);
  *p = ws(e + 1, d->end);
  return KCR_OK;
}

/* After a member or an element: past the ',' (1) or at the closing byte
 * close (0, *p past it); -1 malformed. */
static int after_item(struct dec *d, const char **p, char close)
{
  const char *q = ws(*p, d->end);
  if(q < d->end && *q == ',') {
    *p = ws(q + 1, d->end);
    return 1;
  }
  if(q < d->end && *q == close) {
    *p = q + 1;
    return 0;
  }
  return -1;
}

/* One pass over the text: each member's value is decoded where it starts
 * and the walk goes on where the decoding ended, so no byte is read once
 * per level of nesting; only members the description does not have are
 * stepped over. out is zero (its parent's, or an array's fresh items). */
static kcr_err object(struct dec *d, const struct kcr_type *t, const char *p, char *out,
                      const struct frame *up, const char **next)
{
  struct frame f = {.up = up};
  struct kcr_jv nm, v;
  kcr_err rc;
  int r;

  if(*p != '{') {
    if((rc = whole(d, p, &v, up, next)))
      return rc;
    return want(d, up, "an object", v);
  }
  p = ws(p + 1, d->end);
  if(p < d->end && *p == '}') {
    *next = p + 1;
    return KCR_OK;
  }
  do {
    const struct kcr_tfield *x;
    if((rc = member_name(d, &p, &nm, up)))
      return rc;
    if(p >= d->end)
      return malformed(d, up);
    if(!(x = field(t, nm, d->a))) {
      if(!(p = kcr__json_skip(p, d->end)))
        return malformed(d, up);
      continue;
    }
    f.name = nm;
    if(out[x->has] || (x->null_ != KCR_TNONE && out[x->null_])) {
      memset(out + x->off, 0, x->type->size); /* a repeated member starts over */
      out[x->has] = false;
      if(x->null_ != KCR_TNONE)
        out[x->null_] = false;
    }
    if(*p == 'n' && x->type->kind != KCR_TK_RAW) { /* null */
      if(x->null_ != KCR_TNONE) {
        out[x->has] = true;
        out[x->null_] = true;
      }
      if(!(p = kcr__json_skip(p, d->end)))
        return malformed(d, up);
      continue;
    }
    if((rc = decode(d, x->type, p, out + x->off, &f, &p)))
      return rc;
    out[x->has] = true;
  } while((r = after_item(d, &p, '}')) > 0);
  if(r < 0)
    return malformed(d, up);
  *next = p;
  return KCR_OK;
}

/* Stores the decoded items in the array or map struct at out. */
static void put_items(const struct kcr_type *t, void *out, struct kcr_str *keys,
                      void *items, bool *null, size_t n)
{
  if(t->kind == KCR_TK_MAP && (t->flags & KCR_TNULLABLE_ITEMS)) {
    struct map_null m = {.k = keys, .v = items, .null = null, .n = n};
    memcpy(out, &m, sizeof(m));
  } else if(t->kind == KCR_TK_MAP) {
    struct map m = {.k = keys, .v = items, .n = n};
    memcpy(out, &m, sizeof(m));
  } else if(t->flags & KCR_TNULLABLE_ITEMS) {
    struct arr_null a = {.v = items, .null = null, .n = n};
    memcpy(out, &a, sizeof(a));
  } else {
    struct arr a = {.v = items, .n = n};
    memcpy(out, &a, sizeof(a));
  }
}

/* Makes room for item n of items (and keys, null) of capacity *cap: a new
 * arena block twice the size, the items so far copied (the old block stays
 * in the arena: at most as much again). Zeroed. */
static bool grow(struct dec *d, size_t esize, size_t n, size_t *cap, char **items,
                 struct kcr_str **keys, bool **null)
{
  size_t c = *cap ? 2 * *cap : esize >= 256 ? 1 : 4; /* big items: most lists are short */
  char *ni;
  struct kcr_str *nk = NULL;
  bool *nn = NULL;

  if(n < *cap)
    return true;
  if(c > SIZE_MAX / (esize + sizeof(**keys) + 1) ||
     !(ni = kcr_arena_alloc(d->a, c * esize)) ||
     (keys && !(nk = kcr_arena_alloc(d->a, c * sizeof(**keys)))) ||
     (null && !(nn = kcr_arena_alloc(d->a, c))))
    return false;
  memset(ni, 0, c * esize);
  if(n)
    memcpy(ni, *items, n * esize);
  *items = ni;
  if(keys) {
    if(n)
      memcpy(nk, *keys, n * sizeof(**keys));
    *keys = nk;
  }
  if(null) {
    memset(nn, 0, c);
    if(n)
      memcpy(nn, *null, n);
    *null = nn;
  }
  *cap = c;
  return true;
}

static kcr_err elements(struct dec *d, const struct kcr_type *t, const char *p, void *out,
                        const struct frame *up, const char **next)
{
  bool map = t->kind == KCR_TK_MAP, nullable = t->flags & KCR_TNULLABLE_ITEMS;
  const struct kcr_type *e = t->elem;
  struct frame f = {.up = up};
  struct kcr_jv nm, v;
  struct kcr_str *keys = NULL;
  char *items = NULL;
  bool *null = NULL;
  size_t n = 0, cap = 0;
  kcr_err rc;
  int r;

  if(*p != (map ? '{' : '[')) {
    if((rc = whole(d, p, &v, up, next)))
      return rc;
    return want(d, up, map ? "an object" : "an array", v);
  }
  p = ws(p + 1, d->end);
  if(p < d->end && *p == (map ? '}' : ']')) {
    *next = p + 1;
    put_items(t, out, NULL, NULL, NULL, 0);
    return KCR_OK;
  }
  do {
    f.idx = n;
    if(map && (rc = member_name(d, &p, &nm, up)))
      return rc;
    if(p >= d->end)
      return malformed(d, up);
    f.name = map ? nm : (struct kcr_jv){.at = NULL, .n = 0};
    if(!grow(d, e->size, n, &cap, &items, map ? &keys : NULL, nullable ? &null : NULL))
      return fail(d->ei, KCR_ENOMEM, up, "out of memory", NULL);
    if(map && (rc = str(d, nm, &keys[n], &f)))
      return rc;
    if(*p == 'n' && e->kind != KCR_TK_RAW) { /* null */
      if(null)
        null[n] = true;
      if(!(p = kcr__json_skip(p, d->end)))
        return malformed(d, up);
    } else if((rc = decode(d, e, p, items + n * e->size, &f, &p))) {
      return rc;
    }
    n++;
  } while((r = after_item(d, &p, map ? '}' : ']')) > 0);
  if(r < 0)
    return malformed(d, up);
  put_items(t, out, keys, items, null, n);
  *next = p;
  return KCR_OK;
}

static kcr_err decode(struct dec *d, const struct kcr_type *t, const char *p, void *out,
                      const struct frame *f, const char **next)
{
  struct kcr_jv v;
  kcr_err rc;

  if(t->kind == KCR_TK_OBJECT)
    return object(d, t, p, out, f, next);
  if(t->kind == KCR_TK_ARRAY || t->kind == KCR_TK_MAP)
    return elements(d, t, p, out, f, next);
  if((rc = whole(d, p, &v, f, next)))
    return rc;
  switch(t->kind) {
  case KCR_TK_BOOL:
    if(kcr_jv_bool(v, out))
      return want(d, f, "a boolean", v);
    return KCR_OK;
  case KCR_TK_INT: return integer(d, v, out, f);
  case KCR_TK_NUMBER:
    rc = kcr_jv_number(v, out);
    if(rc == KCR_ERANGE)
      return fail(d->ei, rc, f, "number beyond double", NULL);
    return rc ? want(d, f, "a number", v) : KCR_OK;
  case KCR_TK_STRING: return str(d, v, out, f);
  case KCR_TK_ENUM: {
    struct kcr_enum *e = out;
    if((rc = str(d, v, &e->text, f)))
      return rc;
    for(size_t i = 1; i < t->nvalues; i++)
      if(strlen(t->values[i]) == e->text.n && !memcmp(t->values[i], e->text.s, e->text.n))
        e->v = (int)i;
    return KCR_OK;
  }
  case KCR_TK_INTSTR: {
    struct kcr_intstr *x = out;
    if(kcr_jv_type(v) == KCR_JT_STRING) {
      x->is_str = true;
      return str(d, v, &x->s, f);
    }
    if(kcr_jv_type(v) != KCR_JT_NUMBER)
      return want(d, f, "an integer or a string", v);
    return integer(d, v, &x->i, f);
  }
  case KCR_TK_RAW: {
    struct kcr_raw *x = out;
    char *c;
    if(d->copy) {
      if(!(c = kcr_arena_alloc(d->a, v.n + 1)))
        return fail(d->ei, KCR_ENOMEM, f, "out of memory", NULL);
      memcpy(c, v.at, v.n);
      c[v.n] = '\0';
      x->s = c;
    } else {
      x->s = v.at;
    }
    x->n = v.n;
    return KCR_OK;
  }
  default: break;
  }
  return fail(d->ei, KCR_EINVAL, f, "a description of no known kind", NULL);
}

kcr_err kcr_typed_decode(const struct kcr_type *t, const char *text, size_t len,
                         unsigned flags, struct kcr_arena *a, void *out,
                         struct kcr_errinfo *ei)
{
  struct dec d = {.a = a, .copy = flags & KCR_TYPED_COPY, .ei = ei};
  struct kcr_jv v;
  const char *end;

  if(!t || !out || !a || (!text && len))
    return kcr_errinfo_set(ei, KCR_EINVAL, "kcr_typed_decode: no %s",
                           !t     ? "type"
                           : !out ? "output"
                           : !a   ? "arena"
                                  : "text");
  memset(out, 0, t->size);
  if(!len) {
    v.at = "";
    v.n = 0;
  } else if(flags & KCR_TYPED_TRUSTED) {
    v.at = ws(text, text + len);
    v.n = len - (size_t)(v.at - text);
  } else if(kcr_json_check(text ? text : "", len, &v)) {
    return kcr_errinfo_set(ei, KCR_EPARSE, "%s: not well-formed JSON",
                           t->name ? t->name : "object");
  }
  if(!v.n)
    return kcr_errinfo_set(ei, KCR_EPARSE, "%s: no JSON value",
                           t->name ? t->name : "object");
  d.end = v.at + v.n;
  if(kcr_jv_type(v) == KCR_JT_NULL)
    return KCR_OK; /* as Go decodes null into a struct: nothing */
  return decode(&d, t, v.at, out, NULL, &end);
}

/* ---- encoding ---- */

static kcr_err encode(const struct kcr_type *t, const void *in, struct kcr_buf *b,
                      const struct frame *f, struct kcr_errinfo *ei);

/* Whether member x of the object at in is written: its has_ is set, or it
 * is an object with a member written - so setting e.spec.vfm_template.image (and
 * its has_) makes spec and vfm_template present, as a Go struct holding it is. */
static bool written(const struct kcr_tfield *x, const char *in)
{
  if(in[x->has])
    return true;
  if(x->type->kind != KCR_TK_OBJECT)
    return false;
  for(size_t i = 0; i < x->type->nfields; i++)
    if(written(&x->type->fields[i], in + x->off))
      return true;
  return false;
}

static kcr_err enc_object(const struct kcr_type *t, const char *in, struct kcr_buf *b,
                          const struct frame *up, struct kcr_errinfo *ei)
{
  struct frame f = {.up = up};
  bool first = true;
  kcr_err rc;

  kcr_buf_append(b, "{", 1);
  for(size_t i = 0; i < t->nfields; i++) {
    const struct kcr_tfield *x = &t->fields[i];
    if(!written(x, in))
      continue;
    if(!first)
      kcr_buf_append(b, ",", 1);
    first = false;
    kcr_json_put_str(b, (struct kcr_str){.s = x->name, .n = x->name_len});
    kcr_buf_append(b, ":", 1);
    if(x->null_ != KCR_TNONE && in[x->null_] && in[x->has]) {
      kcr_buf_append(b, "null", 4);
      continue;
    }
    f.cname = x->name;
    if((rc = encode(x->type, in + x->off, b, &f, ei)))
      return rc;
  }
  kcr_buf_append(b, "}", 1);
  return kcr_buf_err(b);
}

/* The array or map at in (of description t), whatever its layout. */
static struct map_null items(const struct kcr_type *t, const void *in)
{
  bool map = t->kind == KCR_TK_MAP;
  struct map_null m = {0};

  if(map && (t->flags & KCR_TNULLABLE_ITEMS)) {
    memcpy(&m, in, sizeof(m));
  } else if(map) {
    struct map x;
    memcpy(&x, in, sizeof(x));
    m = (struct map_null){.k = x.k, .v = x.v, .n = x.n};
  } else if(t->flags & KCR_TNULLABLE_ITEMS) {
    struct arr_null x;
    memcpy(&x, in, sizeof(x));
    m = (struct map_null){.v = x.v, .null = x.null, .n = x.n};
  } else {
    struct arr x;
    memcpy(&x, in, sizeof(x));
    m = (struct map_null){.v = x.v, .n = x.n};
  }
  return m;
}

static kcr_err enc_elements(const struct kcr_type *t, const void *in, struct kcr_buf *b,
                            const struct frame *up, struct kcr_errinfo *ei)
{
  bool map = t->kind == KCR_TK_MAP;
  struct frame f = {.up = up};
  struct map_null m = items(t, in);
  kcr_err rc;

  kcr_buf_append(b, map ? "{" : "[", 1);
  for(size_t i = 0; i < m.n; i++) {
    if(i)
      kcr_buf_append(b, ",", 1);
    f.idx = i;
    if(map) {
      kcr_json_put_str(b, m.k[i]);
      kcr_buf_append(b, ":", 1);
    }
    if(m.null && m.null[i])
      kcr_buf_append(b, "null", 4);
    else if((rc = encode(t->elem, (const char *)m.v + i * t->elem->size, b, &f, ei)))
      return rc;
  }
  kcr_buf_append(b, map ? "}" : "]", 1);
  return kcr_buf_err(b);
}

static kcr_err encode(const struct kcr_type *t, const void *in, struct kcr_buf *b,
                      const struct frame *f, struct kcr_errinfo *ei)
{
  switch(t->kind) {
  case KCR_TK_BOOL: return kcr_buf_puts(b, *(const bool *)in ? "true" : "false");
  case KCR_TK_INT: return kcr_json_put_int(b, *(const int64_t *)in);
  case KCR_TK_NUMBER: {
    kcr_err rc = kcr_json_put_number(b, *(const double *)in);
    return rc == KCR_EINVAL ? fail(ei, rc, f, "NaN or infinity has no JSON", NULL) : rc;
  }
  case KCR_TK_STRING: return kcr_json_put_str(b, *(const struct kcr_str *)in);
  case KCR_TK_ENUM: {
    const struct kcr_enum *e = in;
    if(e->v > 0 && (size_t)e->v < t->nvalues)
      return kcr_json_put_str(b, kcr_str_c(t->values[e->v]));
    if(e->v || !e->text.s)
      return fail(ei, KCR_EINVAL, f, "an enum value that is neither listed nor text",
                  NULL);
    return kcr_json_put_str(b, e->text);
  }
  case KCR_TK_INTSTR: {
    const struct kcr_intstr *x = in;
    return x->is_str ? kcr_json_put_str(b, x->s) : kcr_json_put_int(b, x->i);
  }
  case KCR_TK_RAW: {
    const struct kcr_raw *x = in;
    struct kcr_jv v;
    if(!x->s || kcr_json_check(x->s, x->n, &v) || v.at != x->s || v.n != x->n)
      return fail(ei, KCR_EINVAL, f, "raw text that is not one JSON value", NULL);
    return kcr_buf_append(b, x->s, x->n);
  }
  case KCR_TK_OBJECT: return enc_object(t, in, b, f, ei);
  case KCR_TK_ARRAY:
  case KCR_TK_MAP: return enc_elements(t, in, b, f, ei);
  default: break;
  }
  return fail(ei, KCR_EINVAL, f, "a description of no known kind", NULL);
}

kcr_err kcr_typed_encode(const struct kcr_type *t, const void *in, struct kcr_buf *out,
                         struct kcr_errinfo *ei)
{
  if(!t || !in || !out)
    return kcr_errinfo_set(ei, KCR_EINVAL, "kcr_typed_encode: no %s",
                           !t    ? "type"
                           : !in ? "input"
                                 : "buffer");
  if(kcr_buf_err(out))
    return kcr_buf_err(out);
  return encode(t, in, out, NULL, ei);
}

const struct kcr_meta_v1_object_meta *kcr_typed_meta(const struct kcr_type *t,
                                                     const void *obj)
{
  static const char name[] = "\"metadata\"";
  struct kcr_arena none = KCR_ARENA_INIT; /* not used: the name has no escape */
  const struct kcr_tfield *x;

  if(!t || !obj || t->kind != KCR_TK_OBJECT)
    return NULL;
  x = field(t, (struct kcr_jv){.at = name, .n = sizeof(name) - 1}, &none);
  if(!x || x->type != &kcr_meta_v1_object_meta_type)
    return NULL;
  return (const void *)((const char *)obj + x->off);
}

kcr_err kcr_strmap_set(struct kcr_arena *a, struct kcr_str **k, struct kcr_str **v,
                       size_t *n, bool *has, const char *key, ...)
{
  va_list ap;
  size_t m = 0;
  struct kcr_str *nk, *nv;

  if(!a || !k || !v || !n || !has)
    return KCR_EINVAL;
  va_start(ap, key);
  for(const char *c = key; c; c = va_arg(ap, const char *), m++)
    if(!va_arg(ap, const char *)) {
      va_end(ap);
      return KCR_EINVAL; /* a key without a value */
    }
  va_end(ap);
  if(m > SIZE_MAX / (2 * sizeof(*nk)) ||
     !(nk = kcr_arena_alloc(a, (m ? m : 1) * sizeof(*nk))) ||
     !(nv = kcr_arena_alloc(a, (m ? m : 1) * sizeof(*nv))))
    return KCR_ENOMEM;
  va_start(ap, key);
  for(size_t i = 0; i < m; i++) {
    nk[i] = kcr_str_c(i ? va_arg(ap, const char *) : key);
    nv[i] = kcr_str_c(va_arg(ap, const char *));
  }
  va_end(ap);
  *k = nk;
  *v = nv;
  *n = m;
  *has = true;
  return KCR_OK;
}

/* The value of the last key k in m, or no string. */
static struct kcr_str strmap_at(const struct kcr_strmap *m, struct kcr_str k, bool *found)
{
  *found = false;
  for(size_t i = m ? m->n : 0; i-- > 0;)
    if(m->k[i].n == k.n && (!k.n || !memcmp(m->k[i].s, k.s, k.n))) {
      *found = true;
      return m->v[i];
    }
  return kcr_str_c(NULL);
}

/* Whether every key of a is in b with the same value (each map's last). */
static bool strmap_within(const struct kcr_strmap *a, const struct kcr_strmap *b)
{
  for(size_t i = 0; a && i < a->n; i++) {
    bool in_a, in_b;
    struct kcr_str w = strmap_at(a, a->k[i], &in_a), v = strmap_at(b, a->k[i], &in_b);
    if(!in_b || v.n != w.n || (v.n && memcmp(v.s, w.s, v.n)))
      return false;
  }
  return true;
}

bool kcr_strmap_same(const struct kcr_strmap *a, const struct kcr_strmap *b)
{
  return strmap_within(a, b) && strmap_within(b, a);
}

kcr_err kcr_strmap_put(struct kcr_arena *a, struct kcr_strmap *m, const char *key,
                       const char *value)
{
  struct kcr_str *nk, *nv;
  size_t n, at;
  bool found;

  if(!a || !m || !key || !value)
    return KCR_EINVAL;
  n = m->n;
  strmap_at(m, kcr_str_c(key), &found);
  for(at = n; found && at-- > 0;)
    if(kcr_str_eq(m->k[at], key))
      break;
  if(n >= SIZE_MAX / sizeof(*nk) - 1 ||
     !(nk = kcr_arena_alloc(a, (n + !found) * sizeof(*nk))) ||
     !(nv = kcr_arena_alloc(a, (n + !found) * sizeof(*nv))))
    return KCR_ENOMEM;
  if(n) {
    memcpy(nk, m->k, n * sizeof(*nk));
    memcpy(nv, m->v, n * sizeof(*nv));
  }
  if(!found)
    at = n;
  nk[at] = kcr_str_c(key);
  nv[at] = kcr_str_c(value);
  m->k = nk;
  m->v = nv;
  m->n = n + !found;
  return KCR_OK;
}

/* x copied into a, NUL-terminated; false when out of memory. */
static bool str_copy(struct kcr_arena *a, struct kcr_str x, struct kcr_str *out)
{
  char *s = kcr_arena_alloc(a, x.n + 1);

  if(!s)
    return false;
  if(x.n)
    memcpy(s, x.s, x.n);
  s[x.n] = '\0';
  *out = (struct kcr_str){.s = s, .n = x.n};
  return true;
}

static bool str_same(struct kcr_str x, struct kcr_str y)
{
  return x.n == y.n && (!x.n || !memcmp(x.s, y.s, x.n));
}

/* The group of an apiVersion: what comes before its "/", "" for core. */
static struct kcr_str group_of(struct kcr_str av)
{
  const char *slash = av.s ? memchr(av.s, '/', av.n) : NULL;
  return slash ? (struct kcr_str){.s = av.s, .n = (size_t)(slash - av.s)} : kcr_str_c("");
}

/* controller-runtime's referSameObject: the same group, kind and name. */
static bool same_object(const struct kcr_meta_v1_owner_reference *r, struct kcr_str av,
                        struct kcr_str kind, struct kcr_str name)
{
  return str_same(group_of(r->api_version), group_of(av)) && str_same(r->kind, kind) &&
         str_same(r->name, name);
}

kcr_err kcr_typed_set_controller(struct kcr_arena *a,
                                 struct kcr_meta_v1_object_meta *child,
                                 const char *api_version, const char *kind,
                                 const struct kcr_meta_v1_object_meta *owner,
                                 struct kcr_errinfo *ei)
{
  const struct kcr_meta_v1_object_meta_owner_references *refs;
  struct kcr_meta_v1_owner_reference *nv, *r, want;
  struct kcr_str ons, cns, av = kcr_str_c(api_version), k = kcr_str_c(kind);
  size_t n, at;

  if(!a || !child)
    return kcr_errinfo_set(ei, KCR_EINVAL, "owner reference: no %s",
                           a ? "child metadata" : "arena");
  if(!api_version || !*api_version || !kind || !*kind || !owner || !owner->has_name ||
     !owner->name.n || !owner->has_uid || !owner->uid.n)
    return kcr_errinfo_set(ei, KCR_EINVAL,
                           "owner reference: the owner needs apiVersion, kind, "
                           "metadata.name and metadata.uid (an owner read from the "
                           "cache or the apiserver has them)");
  ons = owner->has_namespace_ ? owner->namespace_ : kcr_str_c(NULL);
  cns = child->has_namespace_ ? child->namespace_ : kcr_str_c(NULL);
  if(ons.n && !str_same(ons, cns))
    return kcr_errinfo_set(ei, KCR_EINVAL,
                           "owner reference: %s %.*s/%.*s cannot own an object in "
                           "namespace \"%.*s\" (cross-namespace owner references are "
                           "not allowed)",
                           kind, KCR_STR_ARG(ons), KCR_STR_ARG(owner->name),
                           KCR_STR_ARG(cns));
  refs = &child->owner_references;
  n = child->has_owner_references ? refs->n : 0;
  at = n; /* where the reference goes: replacing the one to the same object */
  for(size_t i = 0; i < n; i++) {
    r = &refs->v[i];
    if(r->has_controller && r->controller && !same_object(r, av, k, owner->name))
      return kcr_errinfo_set(ei, KCR_EINVAL,
                             "owner reference: the object is already controlled by %.*s "
                             "%.*s (uid %.*s); only one controller reference is allowed",
                             KCR_STR_ARG(r->kind), KCR_STR_ARG(r->name),
                             KCR_STR_ARG(r->uid));
    if(at == n && same_object(r, av, k, owner->name))
      at = i;
  }
  /* A new array with the reference in place, attached last: on ENOMEM the
   * child is as it was, and an array the child shares with another object
   * is never written. */
  memset(&want, 0, sizeof(want));
  if(!str_copy(a, owner->name, &want.name) || !str_copy(a, owner->uid, &want.uid) ||
     n >= SIZE_MAX / sizeof(*nv) - 1 ||
     !(nv = kcr_arena_alloc(a, (n + (at == n)) * sizeof(*nv))))
    return KCR_ENOMEM;
  want.has_name = want.has_uid = true;
  KCR_SET(want, api_version, av);
  KCR_SET(want, kind, k);
  KCR_SET(want, controller, true);
  KCR_SET(want, block_owner_deletion, true);
  if(n)
    memcpy(nv, refs->v, n * sizeof(*nv));
  nv[at] = want;
  child->owner_references.v = nv;
  child->owner_references.n = n + (at == n);
  child->has_owner_references = true;
  return KCR_OK;
}

/* ---- validation ---- */

static kcr_err invalid(struct kcr_errinfo *ei, const struct frame *f, const char *fmt,
                       ...) __attribute__((format(printf, 3, 4)));
static kcr_err invalid(struct kcr_errinfo *ei, const struct frame *f, const char *fmt,
                       ...)
{
  char m[256];
  va_list ap;

  va_start(ap, fmt);
  vsnprintf(m, sizeof(m), fmt, ap);
  va_end(ap);
  return fail(ei, KCR_EINVAL, f, m, NULL);
}

/* Code points in s as Go's utf8.RuneCount counts them: a byte that does
 * not start a well-formed sequence counts one. */
static int64_t runes(struct kcr_str s)
{
  const unsigned char *p = (const unsigned char *)s.s;
  int64_t n = 0;

  for(size_t i = 0; i < s.n; n++) {
    unsigned c = p[i], len = c < 0x80   ? 1
                             : c < 0xc2 ? 0
                             : c < 0xe0 ? 2
                             : c < 0xf0 ? 3
                             : c < 0xf5 ? 4
                                        : 0;
    unsigned lo = c == 0xe0 ? 0xa0 : c == 0xf0 ? 0x90 : 0x80;
    unsigned hi = c == 0xed ? 0x9f : c == 0xf4 ? 0x8f : 0xbf;
    bool ok = len > 0 && i + len <= s.n;
    for(unsigned k = 1; ok && k < len; k++, lo = 0x80, hi = 0xbf)
      ok = p[i + k] >= lo && p[i + k] <= hi;
    i += ok ? len : 1;
  }
  return n;
}

static bool digits(const char *p, size_t n)
{
  for(size_t i = 0; i < n; i++)
    if(p[i] < '0' || p[i] > '9')
      return false;
  return true;
}

static int num(const char *p, size_t n)
{
  int v = 0;
  for(size_t i = 0; i < n; i++)
    v = v * 10 + (p[i] - '0');
  return v;
}

/* RFC 3339 full-date, as Go's time.Parse("2006-01-02") takes it. */
static bool is_date(const char *p, size_t n)
{
  static const int days[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  int y, m, d;

  if(n != 10 || !digits(p, 4) || p[4] != '-' || !digits(p + 5, 2) || p[7] != '-' ||
     !digits(p + 8, 2))
    return false;
  y = num(p, 4), m = num(p + 5, 2), d = num(p + 8, 2);
  if(m < 1 || m > 12 || d < 1 || d > days[m - 1])
    return false;
  return m != 2 || d < 29 || (y % 4 == 0 && (y % 100 != 0 || y % 400 == 0));
}

/* z or [+-]hh:mm, and nothing after */
static bool is_zone(const char *p, size_t n)
{
  return (n == 1 && (*p == 'z' || *p == 'Z')) ||
         (n == 6 && (*p == '+' || *p == '-') && digits(p + 1, 2) && p[3] == ':' &&
          digits(p + 4, 2));
}

/* kube-openapi's strfmt.IsDateTime: a date, "t" (either case), then up to
 * the next "t": hh:mm:ss, optionally any one character and digits, then
 * the zone; hh <= 23, mm and ss <= 59. */
static bool is_date_time(struct kcr_str s)
{
  const char *t, *e, *end = s.s + s.n;
  size_t n;

  if(s.n < 4)
    return false;
  for(t = s.s; t < end && *t != 't' && *t != 'T'; t++)
    ;
  if(t == end || !is_date(s.s, (size_t)(t - s.s)))
    return false;
  for(e = ++t; e < end && *e != 't' && *e != 'T'; e++)
    ;
  n = (size_t)(e - t);
  if(n < 9 || !digits(t, 2) || t[2] != ':' || !digits(t + 3, 2) || t[5] != ':' ||
     !digits(t + 6, 2) || num(t, 2) > 23 || num(t + 3, 2) > 59 || num(t + 6, 2) > 59)
    return false;
  if(is_zone(t + 8, n - 8))
    return true;
  /* the fraction: one character (a whole UTF-8 sequence, not a newline),
   * digits, the zone */
  size_t i = 8, len = 1;
  unsigned char c = (unsigned char)t[i];
  if(c == '\n')
    return false;
  if(c >= 0xc0)
    len = c < 0xe0 ? 2 : c < 0xf0 ? 3 : 4;
  if(runes((struct kcr_str){.s = t + i, .n = n - i < len ? n - i : len}) != 1)
    len = 1; /* an invalid byte is one character to Go's regexp too */
  i += len;
  size_t d = i;
  while(i < n && t[i] >= '0' && t[i] <= '9')
    i++;
  return i > d && is_zone(t + i, n - i);
}

/* govalidator.IsBase64: groups of four of the standard alphabet, the last
 * padded with = or ==; not empty. */
static bool is_base64(struct kcr_str s)
{
  size_t pad = s.n >= 2 && s.s[s.n - 1] == '=' ? (s.s[s.n - 2] == '=' ? 2 : 1) : 0;

  if(!s.n || s.n % 4)
    return false;
  for(size_t i = 0; i < s.n - pad; i++) {
    char c = s.s[i];
    if(!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
         c == '+' || c == '/'))
      return false;
  }
  return true;
}

static bool in_int64(double b)
{
  return b >= -9223372036854775808.0 && b < 9223372036854775808.0;
}

/* A value against c's bounds as kube-openapi's numberValidator compares
 * it: one the JSON text writes as an integer (is_int: an integer member, or
 * a whole number below 10^15, as the encoder writes it, which the
 * apiserver then reads as an int64) against the bound converted as Go's
 * int64(bound) converts it on amd64 (toward zero; INT64_MIN outside int64);
 * any other as doubles. An integer member's bound must be an integer
 * within int64: the apiserver refuses every value against another. */
static kcr_err num_bounds(const struct kcr_tcheck *c, bool int_member, bool is_int,
                          int64_t iv, double dv, const struct frame *f,
                          struct kcr_errinfo *ei)
{
  static const struct {
    unsigned has, excl;
    const char *name, *past, *at;
    int sign;
  } side[2] = {
      {KCR_TC_MIN, KCR_TC_EXCL_MIN, "minimum", "less than", "not above", -1},
      {KCR_TC_MAX, KCR_TC_EXCL_MAX, "maximum", "more than", "not below", 1},
  };
  char shown[48];

  if(is_int)
    snprintf(shown, sizeof(shown), "%" PRId64, iv);
  else
    snprintf(shown, sizeof(shown), "%.17g", dv);
  for(int k = 0; k < 2; k++) {
    double b = k ? c->max : c->min;
    int cmp;
    if(!(c->flags & side[k].has))
      continue;
    if(int_member && !(in_int64(b) && b == trunc(b)))
      return invalid(ei, f,
                     "the schema's %s %.17g is not an integer: the apiserver refuses "
                     "every value against it",
                     side[k].name, b);
    if(is_int) {
      int64_t ib = in_int64(b) ? (int64_t)b : INT64_MIN;
      cmp = iv < ib ? -1 : iv > ib;
    } else {
      cmp = dv < b ? -1 : dv > b;
    }
    if(cmp * side[k].sign > 0 || (cmp == 0 && (c->flags & side[k].excl)))
      return invalid(ei, f, "%s is %s the %s %.17g", shown,
                     cmp ? side[k].past : side[k].at, side[k].name, b);
  }
  return KCR_OK;
}

static kcr_err count(const struct kcr_tcheck *c, int64_t n, const char *what,
                     const struct frame *f, struct kcr_errinfo *ei)
{
  if((c->flags & KCR_TC_MIN_N) && n < c->min_n)
    return invalid(ei, f, "%" PRId64 " %s, fewer than the %" PRId64 " required", n, what,
                   c->min_n);
  if((c->flags & KCR_TC_MAX_N) && n > c->max_n)
    return invalid(ei, f, "%" PRId64 " %s, more than the %" PRId64 " allowed", n, what,
                   c->max_n);
  return KCR_OK;
}

static kcr_err validate(const struct kcr_type *t, const void *in,
                        const struct kcr_tcheck *c, unsigned flags, const struct frame *f,
                        struct kcr_errinfo *ei);

/* A string's rules: its length in code points, its format. */
static kcr_err str_rules(const struct kcr_tcheck *c, struct kcr_str s,
                         const struct frame *f, struct kcr_errinfo *ei)
{
  kcr_err rc;

  if((rc = count(c, runes(s), "characters", f, ei)))
    return rc;
  if((c->flags & KCR_TC_DATE_TIME) && !is_date_time(s))
    return invalid(ei, f, "\"%.*s\" is not a date-time (RFC 3339)",
                   (int)(s.n > 64 ? 64 : s.n), s.s ? s.s : "");
  if((c->flags & KCR_TC_DATE) && !is_date(s.s, s.n))
    return invalid(ei, f, "\"%.*s\" is not a date (RFC 3339 full-date)",
                   (int)(s.n > 64 ? 64 : s.n), s.s ? s.s : "");
  if((c->flags & KCR_TC_BYTE) && !is_base64(s))
    return invalid(ei, f, "not base64 (format byte)");
  return KCR_OK;
}

static kcr_err val_object(const struct kcr_type *t, const char *in,
                          const struct kcr_tcheck *c, unsigned flags,
                          const struct frame *up, struct kcr_errinfo *ei)
{
  struct frame f = {.up = up};
  int64_t present = 0;
  kcr_err rc;

  if(c && (c->flags & (KCR_TC_MIN_N | KCR_TC_MAX_N))) {
    for(size_t i = 0; i < t->nfields; i++)
      present += written(&t->fields[i], in);
    if((rc = count(c, present, "properties", up, ei)))
      return rc;
  }
  for(size_t i = 0; i < t->nfields; i++) {
    const struct kcr_tfield *x = &t->fields[i];
    unsigned k = x->type->kind;
    /* a scalar nothing is asked of: nothing to look at */
    if(!x->check && k != KCR_TK_OBJECT && k != KCR_TK_ARRAY && k != KCR_TK_MAP)
      continue;
    f.cname = x->name;
    if(!in[x->has] && (k != KCR_TK_OBJECT || !written(x, in))) {
      if(x->check && (x->check->flags & KCR_TC_REQUIRED) &&
         !(flags & KCR_VALIDATE_PARTIAL))
        return invalid(ei, &f, "required, and absent");
      continue;
    }
    if(x->null_ != KCR_TNONE && in[x->null_] && in[x->has])
      continue;
    if((rc = validate(x->type, in + x->off, x->check, flags, &f, ei)))
      return rc;
  }
  return KCR_OK;
}

/* The member of object type e named key (a list-map key), or NULL. */
static const struct kcr_tfield *key_field(const struct kcr_type *e, const char *key)
{
  for(size_t q = 0; q < e->nfields; q++)
    if(!strcmp(e->fields[q].name, key))
      return &e->fields[q];
  return NULL;
}

/* Appends to b what tells item i of the array at m (elements of type e)
 * apart: for a list-type set the item's JSON text, for a map (c's flags)
 * each key's presence and text. Errors: KCR_EINVAL (an item that cannot be
 * encoded), KCR_ENOMEM. */
static kcr_err item_text(const struct kcr_type *e, const struct map_null *m,
                         const struct kcr_tcheck *c, size_t i, struct kcr_buf *b)
{
  const char *x = (const char *)m->v + i * e->size;
  kcr_err rc = KCR_OK;

  if(m->null && m->null[i])
    return kcr_buf_append(b, "null", 4);
  if(!(c->flags & KCR_TC_MAP) || e->kind != KCR_TK_OBJECT)
    return encode(e, x, b, NULL, NULL);
  for(size_t k = 0; !rc && k < c->nkeys; k++) {
    const struct kcr_tfield *fx = key_field(e, c->keys[k]);
    if(!fx)
      continue;
    kcr_buf_append(b, x[fx->has] ? "1" : "0", 1);
    if(x[fx->has] && !(rc = encode(fx->type, x + fx->off, b, NULL, NULL)))
      rc = kcr_buf_append(b, ",", 1);
  }
  return rc ? rc : kcr_buf_err(b);
}

struct item {
  const char *s;   /* its text (once the buffer is whole) */
  size_t at, n, i; /* where the text is in the buffer, its length, its index */
};

static int item_cmp(const void *pa, const void *pb)
{
  const struct item *a = pa, *b = pb;
  int d = memcmp(a->s, b->s, a->n < b->n ? a->n : b->n);

  if(d || a->n != b->n)
    return d ? d : a->n < b->n ? -1 : 1;
  return a->i < b->i ? -1 : a->i > b->i;
}

/* The first item (by index) of the array at m that is the same as an
 * earlier one for a list-type set or map: *dup and *first, or *dup n.
 * Sorted, not compared pairwise: n log n for a long list. Errors: KCR_ENOMEM. */
static kcr_err first_duplicate(const struct kcr_type *e, const struct map_null *m,
                               const struct kcr_tcheck *c, size_t *dup, size_t *first)
{
  struct kcr_buf b = KCR_BUF_INIT;
  struct item *it = m->n ? calloc(m->n, sizeof(*it)) : NULL;
  kcr_err rc = KCR_OK;

  *dup = m->n;
  if(m->n && !it)
    return KCR_ENOMEM;
  for(size_t i = 0; i < m->n; i++) {
    it[i].at = b.len;
    it[i].i = i;
    rc = item_text(e, m, c, i, &b);
    if(rc == KCR_EINVAL) { /* what cannot be encoded is the same as nothing */
      rc = KCR_OK;
      b.len = it[i].at;
      kcr_buf_printf(&b, "\x01%zu", i);
    }
    if(rc || (rc = kcr_buf_err(&b)))
      break;
    it[i].n = b.len - it[i].at;
  }
  if(!rc && m->n > 1) {
    for(size_t i = 0; i < m->n; i++)
      it[i].s = b.ptr + it[i].at;
    qsort(it, m->n, sizeof(*it), item_cmp);
    for(size_t k = 1; k < m->n; k++) {
      bool same = it[k].n == it[k - 1].n && !memcmp(it[k].s, it[k - 1].s, it[k].n);
      bool start = k == 1 || !(it[k - 1].n == it[k - 2].n &&
                               !memcmp(it[k - 1].s, it[k - 2].s, it[k - 1].n));
      if(same && start && it[k].i < *dup) {
        *dup = it[k].i;
        *first = it[k - 1].i;
      }
    }
  }
  free(it);
  kcr_buf_cleanup(&b);
  return rc;
}

static kcr_err val_elements(const struct kcr_type *t, const void *in,
                            const struct kcr_tcheck *c, unsigned flags,
                            const struct frame *up, struct kcr_errinfo *ei)
{
  bool map = t->kind == KCR_TK_MAP;
  struct frame f = {.up = up};
  struct map_null m = items(t, in);
  kcr_err rc;

  if(c && (rc = count(c, (int64_t)m.n, map ? "properties" : "items", up, ei)))
    return rc;
  for(size_t i = 0; i < m.n; i++) {
    f.idx = i;
    f.key = map ? &m.k[i] : NULL;
    if(!(m.null && m.null[i]) &&
       (rc = validate(t->elem, (const char *)m.v + i * t->elem->size, c ? c->items : NULL,
                      flags, &f, ei)))
      return rc;
  }
  if(!map && c && (c->flags & KCR_TC_MAP) && t->elem->kind == KCR_TK_OBJECT)
    for(size_t i = 0; i < m.n; i++)
      for(size_t k = 0; k < c->nkeys && !(m.null && m.null[i]); k++) {
        const struct kcr_tfield *x = key_field(t->elem, c->keys[k]);
        if(x && !written(x, (const char *)m.v + i * t->elem->size) &&
           !(x->check && (x->check->flags & KCR_TC_DEFAULT))) {
          f.idx = i;
          return invalid(ei, &f, "no \"%s\", a key of this list-type map", c->keys[k]);
        }
      }
  /* (items kept as JSON text are not compared: their text is not canonical) */
  if(!map && c && (c->flags & (KCR_TC_SET | KCR_TC_MAP)) && t->elem->kind != KCR_TK_RAW) {
    size_t dup, first = 0;
    if((rc = first_duplicate(t->elem, &m, c, &dup, &first)))
      return rc;
    if(dup < m.n) {
      f.idx = dup;
      return invalid(ei, &f, "the same %s as item %zu (list-type %s)",
                     c->flags & KCR_TC_MAP ? "keys" : "value", first,
                     c->flags & KCR_TC_MAP ? "map" : "set");
    }
  }
  return KCR_OK;
}

static kcr_err validate(const struct kcr_type *t, const void *in,
                        const struct kcr_tcheck *c, unsigned flags, const struct frame *f,
                        struct kcr_errinfo *ei)
{
  switch(t->kind) {
  case KCR_TK_INT:
    return c ? num_bounds(c, true, true, *(const int64_t *)in, 0, f, ei) : KCR_OK;
  case KCR_TK_NUMBER: {
    double v = *(const double *)in;
    bool whole = v == 0 || (fabs(v) < 1e15 && v == trunc(v)); /* written as such */
    return c ? num_bounds(c, false, whole, whole ? (int64_t)v : 0, v, f, ei) : KCR_OK;
  }
  case KCR_TK_STRING:
    return c ? str_rules(c, *(const struct kcr_str *)in, f, ei) : KCR_OK;
  case KCR_TK_ENUM: {
    const struct kcr_enum *e = in;
    bool listed = e->v > 0 && (size_t)e->v < t->nvalues;
    for(size_t i = 1; !listed && !e->v && e->text.s && i < t->nvalues; i++)
      listed = kcr_str_eq(e->text, t->values[i]);
    if(c && (c->flags & KCR_TC_ENUM) && !listed)
      return invalid(ei, f, "\"%.*s\" is not one of the %zu values the schema lists",
                     (int)(e->text.n > 64 ? 64 : e->text.n), e->text.s ? e->text.s : "",
                     t->nvalues - 1);
    if(!c)
      return KCR_OK;
    return str_rules(
        c, e->v > 0 && (size_t)e->v < t->nvalues ? kcr_str_c(t->values[e->v]) : e->text,
        f, ei);
  }
  case KCR_TK_INTSTR: { /* the rules of the type the value has */
    const struct kcr_intstr *x = in;
    if(!c)
      return KCR_OK;
    return x->is_str ? str_rules(c, x->s, f, ei)
                     : num_bounds(c, false, true, x->i, 0, f, ei);
  }
  case KCR_TK_OBJECT: return val_object(t, in, c, flags, f, ei);
  case KCR_TK_ARRAY:
  case KCR_TK_MAP: return val_elements(t, in, c, flags, f, ei);
  default: return KCR_OK; /* booleans, raw text: no rule here */
  }
}

kcr_err kcr_typed_validate(const struct kcr_type *t, const void *in, unsigned flags,
                           struct kcr_errinfo *ei)
{
  if(!t || !in)
    return kcr_errinfo_set(ei, KCR_EINVAL, "kcr_typed_validate: no %s",
                           t ? "object" : "description");
  return validate(t, in, NULL, flags, NULL, ei);
}
