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
#include <stdarg.h>
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
  struct kcr_jv name; /* n 0: an element, idx */
  const char *cname;  /* a name of the description (encoding) */
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
 * is an object with a member written - so setting e.spec.vfm.image (and
 * its has_) makes spec and vfm present, as a Go struct holding it is. */
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

static kcr_err enc_elements(const struct kcr_type *t, const void *in, struct kcr_buf *b,
                            const struct frame *up, struct kcr_errinfo *ei)
{
  bool map = t->kind == KCR_TK_MAP;
  struct frame f = {.up = up};
  struct map_null m = {0};
  kcr_err rc;

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

kcr_err kcr_typed_set_controller(struct kcr_arena *a,
                                 struct kcr_meta_v1_object_meta *child,
                                 const char *api_version, const char *kind,
                                 const struct kcr_meta_v1_object_meta *owner,
                                 struct kcr_errinfo *ei)
{
  struct kcr_meta_v1_object_meta_owner_references *refs;
  struct kcr_meta_v1_owner_reference *nv, *r;
  struct kcr_str ons, cns;

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
  if(!child->has_owner_references)
    refs->n = 0;
  for(size_t i = 0; i < refs->n; i++) {
    r = &refs->v[i];
    if(!r->has_controller || !r->controller)
      continue;
    if(str_same(r->uid, owner->uid))
      return KCR_OK; /* already ours */
    return kcr_errinfo_set(ei, KCR_EINVAL,
                           "owner reference: the object is already controlled by %.*s "
                           "%.*s (uid %.*s); only one controller reference is allowed",
                           KCR_STR_ARG(r->kind), KCR_STR_ARG(r->name),
                           KCR_STR_ARG(r->uid));
  }
  for(size_t i = 0; i < refs->n; i++) {
    r = &refs->v[i]; /* a reference to the same owner is upgraded in place */
    if(!r->has_uid || !str_same(r->uid, owner->uid))
      continue;
    KCR_SET(*r, controller, true);
    KCR_SET(*r, block_owner_deletion, true);
    return KCR_OK;
  }
  /* Everything new is made first and attached last, so on ENOMEM the child
   * is as it was. */
  if(refs->n >= SIZE_MAX / sizeof(*nv) - 1 ||
     !(nv = kcr_arena_alloc(a, (refs->n + 1) * sizeof(*nv))))
    return KCR_ENOMEM;
  if(refs->n)
    memcpy(nv, refs->v, refs->n * sizeof(*nv));
  r = &nv[refs->n];
  memset(r, 0, sizeof(*r));
  if(!str_copy(a, owner->name, &r->name) || !str_copy(a, owner->uid, &r->uid))
    return KCR_ENOMEM;
  r->has_name = r->has_uid = true;
  KCR_SET(*r, api_version, kcr_str_c(api_version));
  KCR_SET(*r, kind, kcr_str_c(kind));
  KCR_SET(*r, controller, true);
  KCR_SET(*r, block_owner_deletion, true);
  refs->v = nv;
  refs->n++;
  child->has_owner_references = true;
  return KCR_OK;
}
