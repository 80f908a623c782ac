/* core/jsontext.c - kcr/jsontext.h: values read out of JSON text, values
 * written into a buffer. The structure is followed by json.c's walker
 * (kcr__json_iter) and checked by its validator; this file adds what a
 * reader of single values needs: strings unescaped, integers exact,
 * numbers whatever the locale. */
#include <errno.h>
#include <locale.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/json-int.h"
#include "kcr/jsontext.h"

kcr_err kcr_str_dup(struct kcr_str x, char **out)
{
  char *c;

  if(!out)
    return KCR_EINVAL;
  *out = NULL;
  if(x.n && memchr(x.s, '\0', x.n))
    return KCR_EINVAL;
  if(!(c = malloc(x.n + 1)))
    return KCR_ENOMEM;
  if(x.n)
    memcpy(c, x.s, x.n);
  c[x.n] = '\0';
  *out = c;
  return KCR_OK;
}

enum kcr_jtype kcr_jv_type(struct kcr_jv v)
{
  if(!v.at || !v.n)
    return KCR_JT_NONE;
  switch(v.at[0]) {
  case 'n': return KCR_JT_NULL;
  case 't':
  case 'f': return KCR_JT_BOOL;
  case '"': return KCR_JT_STRING;
  case '{': return KCR_JT_OBJECT;
  case '[': return KCR_JT_ARRAY;
  default: break;
  }
  return v.at[0] == '-' || (v.at[0] >= '0' && v.at[0] <= '9') ? KCR_JT_NUMBER
                                                              : KCR_JT_NONE;
}

kcr_err kcr_json_check(const char *text, size_t len, struct kcr_jv *v)
{
  if(!text || !v)
    return KCR_EINVAL;
  if(!kcr__json_check_value(text, len, &v->at, &v->n)) {
    v->n = 0;
    return KCR_EPARSE;
  }
  return KCR_OK;
}

/* kcr_jiter keeps kcr__json_iter's state, without its known values. */
bool kcr_jiter_init(struct kcr_jiter *it, struct kcr_jv v)
{
  struct kcr__json_iter in;
  bool ok = kcr__json_iter_init(&in, v.at, v.n);

  it->p = in.p;
  it->end = in.end;
  it->close = in.close;
  it->first = in.first;
  return ok;
}

int kcr_jiter_next(struct kcr_jiter *it, struct kcr_jv *name, struct kcr_jv *val)
{
  struct kcr__json_iter in = {
      .p = it->p, .end = it->end, .close = it->close, .first = it->first};
  const char *key;
  size_t klen;
  int r = kcr__json_iter_next(&in, &key, &klen, &val->at, &val->n);

  it->p = in.p;
  it->close = in.close;
  it->first = in.first;
  if(name) {
    name->at = key ? key - 1 : NULL; /* with its quotes */
    name->n = key ? klen + 2 : 0;
  }
  return r;
}

static int hexval(char c)
{
  return c >= '0' && c <= '9'   ? c - '0'
         : c >= 'a' && c <= 'f' ? c - 'a' + 10
         : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                : -1;
}

static long hex4at(const char *p, const char *end)
{
  long v = 0;
  if(end - p < 4)
    return -1;
  for(int i = 0; i < 4; i++) {
    int d = hexval(p[i]);
    if(d < 0)
      return -1;
    v = v * 16 + d;
  }
  return v;
}

/* Decodes the escape at *pp (just after its backslash) into out (up to 4
 * bytes) and moves *pp past it; the number of bytes, or -1 if malformed. */
static int unescape1(const char **pp, const char *end, char out[4])
{
  const char *p = *pp;
  long u, lo;

  if(p >= end)
    return -1;
  *pp = p + 1;
  switch(*p) {
  case '"':
  case '\\':
  case '/': out[0] = *p; return 1;
  case 'b': out[0] = '\b'; return 1;
  case 'f': out[0] = '\f'; return 1;
  case 'n': out[0] = '\n'; return 1;
  case 'r': out[0] = '\r'; return 1;
  case 't': out[0] = '\t'; return 1;
  case 'u': break;
  default: return -1;
  }
  if((u = hex4at(p + 1, end)) < 0)
    return -1;
  *pp = p + 5;
  if(u >= 0xD800 && u <= 0xDBFF) {
    if(end - *pp >= 6 && (*pp)[0] == '\\' && (*pp)[1] == 'u' &&
       (lo = hex4at(*pp + 2, end)) >= 0xDC00 && lo <= 0xDFFF) {
      *pp += 6;
      u = 0x10000 + ((u - 0xD800) << 10) + (lo - 0xDC00);
    } else {
      u = 0xFFFD; /* a lone high surrogate, as Go decodes it */
    }
  } else if(u >= 0xDC00 && u <= 0xDFFF) {
    u = 0xFFFD;
  }
  if(u < 0x80) {
    out[0] = (char)u;
    return 1;
  }
  if(u < 0x800) {
    out[0] = (char)(0xC0 | (u >> 6));
    out[1] = (char)(0x80 | (u & 0x3F));
    return 2;
  }
  if(u < 0x10000) {
    out[0] = (char)(0xE0 | (u >> 12));
    out[1] = (char)(0x80 | ((u >> 6) & 0x3F));
    out[2] = (char)(0x80 | (u & 0x3F));
    return 3;
  }
  out[0] = (char)(0xF0 | (u >> 18));
  out[1] = (char)(0x80 | ((u >> 12) & 0x3F));
  out[2] = (char)(0x80 | ((u >> 6) & 0x3F));
  out[3] = (char)(0x80 | (u & 0x3F));
  return 4;
}

/* The bytes between the quotes of string v; false if v is no string. */
static bool inner(struct kcr_jv v, const char **b, const char **e)
{
  if(!v.at || v.n < 2 || v.at[0] != '"' || v.at[v.n - 1] != '"')
    return false;
  *b = v.at + 1;
  *e = v.at + v.n - 1;
  return true;
}

bool kcr_jv_str_is(struct kcr_jv v, const char *s, size_t n)
{
  const char *p, *end, *want = s, *wend = s + n;
  char c[4];
  int k;

  if(!inner(v, &p, &end))
    return false;
  if(!memchr(p, '\\', (size_t)(end - p)))
    return (size_t)(end - p) == n && (!n || !memcmp(p, s, n));
  while(p < end) {
    if(*p != '\\') {
      if(want >= wend || *want++ != *p++)
        return false;
      continue;
    }
    p++;
    if((k = unescape1(&p, end, c)) < 0 || wend - want < k || memcmp(want, c, (size_t)k))
      return false;
    want += k;
  }
  return want == wend;
}

kcr_err kcr_jv_string(struct kcr_jv v, struct kcr_arena *a, unsigned flags,
                      struct kcr_str *out)
{
  bool copy = flags & KCR_JV_COPY;
  const char *p, *end, *bs;
  char *o, *w;

  out->s = NULL;
  out->n = 0;
  if(!inner(v, &p, &end))
    return KCR_EPARSE;
  bs = memchr(p, '\\', (size_t)(end - p));
  if(!bs && !copy) {
    out->s = p;
    out->n = (size_t)(end - p);
    return KCR_OK;
  }
  if(!a)
    return KCR_EINVAL;
  /* the text never grows when unescaped */
  if(!(o = w = kcr_arena_alloc(a, (size_t)(end - p) + 1)))
    return KCR_ENOMEM;
  while(p < end) {
    const char *q = memchr(p, '\\', (size_t)(end - p));
    size_t run = q ? (size_t)(q - p) : (size_t)(end - p);
    int k;
    memcpy(w, p, run);
    w += run;
    p += run;
    if(p == end)
      break;
    p++;
    if((k = unescape1(&p, end, w)) < 0)
      return KCR_EPARSE;
    w += k;
  }
  *w = '\0';
  out->s = o;
  out->n = (size_t)(w - o);
  return KCR_OK;
}

kcr_err kcr_jv_int(struct kcr_jv v, int64_t *out)
{
  const char *p = v.at, *end = v.at + v.n;
  bool neg = false;
  uint64_t m = 0;

  if(!v.at || !v.n)
    return KCR_EPARSE;
  if(*p == '-') {
    neg = true;
    p++;
  }
  if(p == end || (*p == '0' && end - p > 1))
    return KCR_EPARSE; /* no digit, or a leading zero */
  for(; p < end; p++) {
    unsigned d = (unsigned)(*p - '0');
    if(d > 9)
      return KCR_EPARSE;
    if(m > (UINT64_MAX - d) / 10)
      return KCR_ERANGE;
    m = m * 10 + d;
  }
  if(m > (uint64_t)INT64_MAX + neg)
    return KCR_ERANGE;
  *out = neg ? (int64_t)(0 - m) : (int64_t)m;
  return KCR_OK;
}

kcr_err kcr_jv_number(struct kcr_jv v, double *out)
{
  char text[64], *e;
  struct lconv *lc = localeconv();
  double d;

  if(kcr_jv_type(v) != KCR_JT_NUMBER || v.n >= sizeof(text))
    return KCR_EPARSE;
  for(size_t i = 0; i < v.n; i++) {
    char c = v.at[i];
    if(!(c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E' ||
         (c >= '0' && c <= '9')))
      return KCR_EPARSE;
    /* strtod reads the locale's decimal point */
    text[i] = c == '.' && lc && lc->decimal_point && lc->decimal_point[0]
                  ? lc->decimal_point[0]
                  : c;
  }
  text[v.n] = '\0';
  errno = 0;
  d = strtod(text, &e);
  if(e != text + v.n)
    return KCR_EPARSE;
  if(errno == ERANGE && isinf(d))
    return KCR_ERANGE;
  *out = d;
  return KCR_OK;
}

kcr_err kcr_jv_bool(struct kcr_jv v, bool *out)
{
  if(v.n == 4 && !memcmp(v.at, "true", 4))
    *out = true;
  else if(v.n == 5 && !memcmp(v.at, "false", 5))
    *out = false;
  else
    return KCR_EPARSE;
  return KCR_OK;
}

kcr_err kcr_json_put_str(struct kcr_buf *out, struct kcr_str x)
{
  kcr__json_put_strn(out, x.s ? x.s : "", x.s ? x.n : 0);
  return kcr_buf_err(out);
}

kcr_err kcr_json_put_int(struct kcr_buf *out, int64_t v)
{
  kcr__json_put_int(out, v);
  return kcr_buf_err(out);
}

kcr_err kcr_json_put_number(struct kcr_buf *out, double d)
{
  if(isnan(d) || isinf(d))
    return kcr_buf_err(out) ? kcr_buf_err(out) : KCR_EINVAL;
  kcr__json_put_number(out, d);
  return kcr_buf_err(out);
}
