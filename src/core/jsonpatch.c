/* DESIGN: kcr_json_diff, the JSON Patch between two JSON texts
 * (kcr/jsonpatch.h), read with kcr/jsontext.h's walkers: no tree is built.
 *
 * An object's members are gathered into an array of (unescaped name,
 * value), sorted by name with the last of a repeated name kept (a stable
 * sort by name, then only the last of each run), and the two sorted arrays
 * are merged: O(n log n) per object, so a map of thousands of labels is no
 * quadratic walk. Arrays are compared by index. Equality is a separate
 * deep walk (values_equal), so a replace is only written when something
 * differs, and a subtree is walked at most once per level it is compared
 * at.
 *
 * Scratch memory (member arrays, unescaped names and strings) comes from an
 * arena freed before the return; the path being built is a kcr_buf whose
 * length is restored after each step. The patch is appended to the
 * caller's buffer; on error its length is set back. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/err-int.h"
#include "kcr/arena.h"
#include "kcr/jsonpatch.h"
#include "kcr/jsontext.h"

#define EXACT (INT64_C(1) << 53) /* integers up to this are exact as doubles */

struct member {
  struct kcr_str name;
  struct kcr_jv val;
  size_t seq; /* position in the text: of equal names the last counts */
};

struct diff {
  struct kcr_buf *out;
  struct kcr_buf path;
  struct kcr_arena a;
  unsigned flags;
  size_t nops;
  kcr_err rc; /* the first error */
};

static int name_cmp(struct kcr_str a, struct kcr_str b)
{
  size_t n = a.n < b.n ? a.n : b.n;
  int c = n ? memcmp(a.s, b.s, n) : 0;

  return c ? c : a.n < b.n ? -1 : a.n > b.n;
}

static int by_name(const void *x, const void *y)
{
  const struct member *a = x, *b = y;
  int c = name_cmp(a->name, b->name);

  return c ? c : a->seq < b->seq ? -1 : a->seq > b->seq;
}

/* The members of object v, sorted by name, one per name (the last). */
static kcr_err members(struct diff *d, struct kcr_jv v, struct member **out, size_t *n)
{
  struct kcr_jiter it;
  struct kcr_jv name, val;
  struct member *m;
  size_t cap = 0, k = 0, w = 0;
  int r;

  kcr_jiter_init(&it, v);
  while((r = kcr_jiter_next(&it, NULL, &val)) == 1)
    cap++;
  if(r < 0)
    return KCR_ERANGE; /* checked text: only too deep a nesting breaks it */
  *out = NULL;
  *n = 0;
  if(!cap)
    return KCR_OK;
  if(cap > SIZE_MAX / sizeof(*m) || !(m = kcr_arena_alloc(&d->a, cap * sizeof(*m))))
    return KCR_ENOMEM;
  kcr_jiter_init(&it, v);
  while(k < cap && kcr_jiter_next(&it, &name, &val) == 1) {
    kcr_err rc = kcr_jv_string(name, &d->a, 0, &m[k].name);
    if(rc)
      return rc;
    m[k].val = val;
    m[k].seq = k;
    k++;
  }
  qsort(m, k, sizeof(*m), by_name);
  for(size_t i = 0; i < k; i++)
    if(i + 1 == k || !kcr_str_same(m[i].name, m[i + 1].name))
      m[w++] = m[i];
  *out = m;
  *n = w;
  return KCR_OK;
}

static bool is_int_literal(struct kcr_jv v)
{
  for(size_t i = 0; i < v.n; i++)
    if(v.at[i] == '.' || v.at[i] == 'e' || v.at[i] == 'E')
      return false;
  return true;
}

static bool numbers_equal(struct kcr_jv a, struct kcr_jv b)
{
  bool ia = is_int_literal(a), ib = is_int_literal(b);
  int64_t x, y;
  double f, g;

  if(ia && ib) {
    kcr_err ra = kcr_jv_int(a, &x), rb = kcr_jv_int(b, &y);
    if(!ra && !rb)
      return x == y;
    if(ra && rb) /* both beyond int64: the same literal */
      return a.n == b.n && !memcmp(a.at, b.at, a.n);
    return false; /* one fits int64, the other does not */
  }
  /* An integer literal against a fraction or exponent: equal only when the
   * integer is exact as a double, so that no rounding makes two equal. */
  if((ia && (kcr_jv_int(a, &x) || x > EXACT || x < -EXACT)) ||
     (ib && (kcr_jv_int(b, &y) || y > EXACT || y < -EXACT)))
    return false;
  if(kcr_jv_number(a, &f) || kcr_jv_number(b, &g)) /* beyond double: the literal */
    return a.n == b.n && !memcmp(a.at, b.at, a.n);
  return f == g;
}

static kcr_err values_equal(struct diff *d, struct kcr_jv a, struct kcr_jv b, bool *eq);

static kcr_err objects_equal(struct diff *d, struct kcr_jv a, struct kcr_jv b, bool *eq)
{
  struct member *ma, *mb;
  size_t na, nb;
  kcr_err rc;

  if((rc = members(d, a, &ma, &na)) || (rc = members(d, b, &mb, &nb)))
    return rc;
  *eq = na == nb;
  for(size_t i = 0; *eq && i < na; i++) {
    *eq = kcr_str_same(ma[i].name, mb[i].name);
    if(*eq && (rc = values_equal(d, ma[i].val, mb[i].val, eq)))
      return rc;
  }
  return KCR_OK;
}

static kcr_err arrays_equal(struct kcr_jv a, struct kcr_jv b, struct diff *d, bool *eq)
{
  struct kcr_jiter ia, ib;
  struct kcr_jv va, vb;
  int ra, rb;
  kcr_err rc;

  kcr_jiter_init(&ia, a);
  kcr_jiter_init(&ib, b);
  *eq = true;
  while(*eq) {
    ra = kcr_jiter_next(&ia, NULL, &va);
    rb = kcr_jiter_next(&ib, NULL, &vb);
    if(ra < 0 || rb < 0)
      return KCR_ERANGE;
    if(ra != rb)
      *eq = false;
    else if(!ra)
      break;
    else if((rc = values_equal(d, va, vb, eq)))
      return rc;
  }
  return KCR_OK;
}

static kcr_err values_equal(struct diff *d, struct kcr_jv a, struct kcr_jv b, bool *eq)
{
  enum kcr_jtype t = kcr_jv_type(a);
  struct kcr_str sa, sb;
  kcr_err rc;

  *eq = false;
  if(t != kcr_jv_type(b))
    return KCR_OK;
  switch(t) {
  case KCR_JT_NUMBER: *eq = numbers_equal(a, b); return KCR_OK;
  case KCR_JT_STRING:
    if((rc = kcr_jv_string(a, &d->a, 0, &sa)) || (rc = kcr_jv_string(b, &d->a, 0, &sb)))
      return rc;
    *eq = kcr_str_same(sa, sb);
    return KCR_OK;
  case KCR_JT_OBJECT: return objects_equal(d, a, b, eq);
  case KCR_JT_ARRAY: return arrays_equal(a, b, d, eq);
  default: /* null, true, false */ *eq = a.at[0] == b.at[0]; return KCR_OK;
  }
}

/* ---- writing operations -------------------------------------------------- */

/* One path step: '/' and name with '~' -> "~0" and '/' -> "~1" (RFC 6901). */
static void path_push(struct kcr_buf *p, struct kcr_str name)
{
  size_t from = 0;

  kcr_buf_append(p, "/", 1);
  for(size_t i = 0; i < name.n; i++) {
    if(name.s[i] != '~' && name.s[i] != '/')
      continue;
    kcr_buf_append(p, name.s + from, i - from);
    kcr_buf_append(p, name.s[i] == '~' ? "~0" : "~1", 2);
    from = i + 1;
  }
  kcr_buf_append(p, name.s + from, name.n - from);
}

static void path_index(struct kcr_buf *p, size_t i) { kcr_buf_printf(p, "/%zu", i); }

static void path_pop(struct kcr_buf *p, size_t len)
{
  if(p->len > len) {
    p->len = len;
    p->ptr[len] = '\0';
  }
}

/* Appends {"op":op,"path":<the path>[,"value":<val>]}. */
static void op(struct diff *d, const char *name, const struct kcr_jv *val)
{
  struct kcr_buf *o = d->out;

  if(d->rc)
    return;
  kcr_buf_puts(o, d->nops ? ",{\"op\":\"" : "{\"op\":\"");
  kcr_buf_puts(o, name);
  kcr_buf_puts(o, "\",\"path\":");
  kcr_json_put_str(
      o, (struct kcr_str){.s = d->path.ptr ? d->path.ptr : "", .n = d->path.len});
  if(val) {
    kcr_buf_puts(o, ",\"value\":");
    kcr_buf_append(o, val->at, val->n);
  }
  kcr_buf_puts(o, "}");
  d->nops++;
  if(kcr_buf_err(o) || kcr_buf_err(&d->path))
    d->rc = KCR_ENOMEM;
}

static void diff_value(struct diff *d, struct kcr_jv a, struct kcr_jv b);

static void diff_objects(struct diff *d, struct kcr_jv a, struct kcr_jv b)
{
  struct member *ma, *mb;
  size_t na, nb, i = 0, j = 0, at = d->path.len;
  kcr_err rc;

  if((rc = members(d, a, &ma, &na)) || (rc = members(d, b, &mb, &nb))) {
    d->rc = rc;
    return;
  }
  while(!d->rc && (i < na || j < nb)) {
    int c = i == na ? 1 : j == nb ? -1 : name_cmp(ma[i].name, mb[j].name);
    path_push(&d->path, c <= 0 ? ma[i].name : mb[j].name);
    if(c < 0) {
      if(!(d->flags & KCR_JSON_DIFF_NO_REMOVE))
        op(d, "remove", NULL);
      i++;
    } else if(c > 0) {
      op(d, "add", &mb[j].val);
      j++;
    } else {
      diff_value(d, ma[i++].val, mb[j++].val);
    }
    path_pop(&d->path, at);
  }
}

static void diff_arrays(struct diff *d, struct kcr_jv a, struct kcr_jv b)
{
  struct kcr_jiter ia, ib;
  struct kcr_jv va, vb;
  size_t i = 0, na, at = d->path.len;
  int ra = 1, rb = 1;

  kcr_jiter_init(&ia, a);
  kcr_jiter_init(&ib, b);
  for(; !d->rc; i++) {
    ra = kcr_jiter_next(&ia, NULL, &va);
    rb = kcr_jiter_next(&ib, NULL, &vb);
    if(ra != 1 || rb != 1)
      break;
    path_index(&d->path, i);
    diff_value(d, va, vb);
    path_pop(&d->path, at);
  }
  if(d->rc)
    return;
  if(ra < 0 || rb < 0) {
    d->rc = KCR_ERANGE;
    return;
  }
  for(; rb == 1 && !d->rc; i++) { /* `to` is longer: add the rest in order */
    path_index(&d->path, i);
    op(d, "add", &vb);
    path_pop(&d->path, at);
    if((rb = kcr_jiter_next(&ib, NULL, &vb)) < 0)
      d->rc = KCR_ERANGE;
  }
  if(ra != 1 || d->rc || (d->flags & KCR_JSON_DIFF_NO_REMOVE))
    return;
  for(na = i + 1; (ra = kcr_jiter_next(&ia, NULL, &va)) == 1;) /* `from` is longer */
    na++;
  if(ra < 0) {
    d->rc = KCR_ERANGE;
    return;
  }
  while(na-- > i && !d->rc) { /* from the last down, so indices stay valid */
    path_index(&d->path, na);
    op(d, "remove", NULL);
    path_pop(&d->path, at);
  }
}

static void diff_value(struct diff *d, struct kcr_jv a, struct kcr_jv b)
{
  enum kcr_jtype t = kcr_jv_type(a);
  bool eq;
  kcr_err rc;

  if(d->rc)
    return;
  if(t == kcr_jv_type(b) && t == KCR_JT_OBJECT)
    diff_objects(d, a, b);
  else if(t == kcr_jv_type(b) && t == KCR_JT_ARRAY)
    diff_arrays(d, a, b);
  else if((rc = values_equal(d, a, b, &eq)))
    d->rc = rc;
  else if(!eq)
    op(d, "replace", &b);
}

kcr_err kcr_json_diff(const char *from, size_t from_n, const char *to, size_t to_n,
                      unsigned flags, struct kcr_buf *patch, size_t *nops,
                      struct kcr_errinfo *ei)
{
  struct diff d = {.out = patch, .flags = flags};
  struct kcr_jv a, b;
  size_t start;

  if(nops)
    *nops = 0;
  if(!from || !to || !patch)
    return kcr_errinfo_set(ei, KCR_EINVAL, "kcr_json_diff: a NULL argument");
  if(kcr_buf_err(patch))
    return kcr_buf_err(patch);
  if(kcr_json_check(from, from_n, &a))
    return kcr_errinfo_set(ei, KCR_EPARSE, "JSON diff: \"from\" is not well-formed JSON");
  if(kcr_json_check(to, to_n, &b))
    return kcr_errinfo_set(ei, KCR_EPARSE, "JSON diff: \"to\" is not well-formed JSON");
  start = patch->len;
  if(kcr_buf_puts(patch, "["))
    return KCR_ENOMEM;
  diff_value(&d, a, b);
  if(!d.rc && kcr_buf_puts(patch, "]"))
    d.rc = KCR_ENOMEM;
  kcr_buf_cleanup(&d.path);
  kcr_arena_cleanup(&d.a);
  if(d.rc) {
    path_pop(patch, start);
    if(d.rc == KCR_ERANGE)
      return kcr_errinfo_set(ei, KCR_ERANGE,
                             "JSON diff: a value nests deeper than 128 levels");
    return d.rc;
  }
  if(nops)
    *nops = d.nops;
  return KCR_OK;
}
