/* DESIGN: dot-path access over cJSON trees, and exact int64 integers.
 *
 * Paths are short and static in practice, so they are walked segment by
 * segment without allocation.
 *
 * Integers: cJSON (1.7.15) parses every number with strtod into a double
 * and prints it with "%1.15g" (then "%1.17g"): exact below 10^15, "1e+15"
 * from there on, rounded beyond 2^53. Kubernetes integers are int64 and Go
 * refuses "1e+15" for one. So a node whose value must survive is a cJSON Raw
 * node holding the decimal text (Raw prints verbatim, duplicates and
 * compares by text); below 10^15 a plain number is exact and is kept, so
 * the common tree is untouched.
 *
 * kcr_json_parse lets cJSON parse, then walks the tree once; only when some
 * number has magnitude >= 10^15 (rare) does it re-scan the text. Number
 * nodes are leaves and cJSON keeps document order (members and elements are
 * appended as read, duplicates included), so the i-th number literal of the
 * text is the i-th number node of a pre-order walk. The scan skips strings
 * exactly as cJSON's parse_string does (a backslash escapes the next byte)
 * and takes a literal as cJSON's parse_number does: the run of [0-9+-eE.]
 * starting at '-' or a digit (upstream 1.7.15 copies at most 63 bytes of
 * it, Debian's build - patched for CVE-2023-26819 - all of it; a literal
 * that long is either refused by cJSON or caught by the check below, under
 * either build). Each canonical
 * integer literal (-?(0|[1-9][0-9]*)) of magnitude >= 10^15 becomes a Raw
 * node; its strtod value is checked against the node's first, and a
 * mismatch in the pairing stops the conversion, leaving the rest as cJSON
 * made it (it cannot happen while the two agree on the grammar above).
 *
 * Reading never converts a double to an integer unless it is an integer in
 * int64 range (the conversion is undefined behaviour otherwise).
 *
 * cJSON answers NULL both for malformed text and when it runs out of
 * memory; a caller told EPARSE drops the data as garbage, so the two are
 * told apart afterwards by a validator that allocates nothing (below).
 *
 * The same validator finds values in text without a tree (kcr__json_spans):
 * a writer that needs two strings of the object a write answered scans it
 * instead of building ~150 nodes it frees at once. */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json-int.h"
#include "kcr/json.h"

/* From this magnitude on, cJSON prints a double in exponent form. */
#define EXACT_MIN 1e15
/* Upstream cJSON 1.7.15's parse_number copies at most this many bytes of a
 * literal (Debian's patched build copies all): the validator below accepts
 * no longer literal, so that it stays within what both builds parse. */
#define NUMBER_MAX 63

/* Finds member name[0..n) in obj. */
static cJSON *member(const cJSON *obj, const char *name, size_t n)
{
  cJSON *it;
  if(!cJSON_IsObject(obj))
    return NULL;
  cJSON_ArrayForEach(it, obj)
  {
    if(it->string && strlen(it->string) == n && !memcmp(it->string, name, n))
      return it;
  }
  return NULL;
}

cJSON *kcr_json_at(const cJSON *obj, const char *path)
{
  const cJSON *cur = obj;
  while(cur && *path) {
    const char *dot = strchr(path, '.');
    size_t n = dot ? (size_t)(dot - path) : strlen(path);
    cur = member(cur, path, n);
    path += n + (dot ? 1 : 0);
  }
  return (cJSON *)cur;
}

const char *kcr_json_str(const cJSON *obj, const char *path)
{
  const cJSON *v = kcr_json_at(obj, path);
  return cJSON_IsString(v) ? v->valuestring : NULL;
}

const char *kcr_json_member_str(const cJSON *obj, const char *key)
{
  const cJSON *v =
      cJSON_IsObject(obj) ? cJSON_GetObjectItemCaseSensitive(obj, key) : NULL;
  return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* ---- integers ---- */

/* Parses a whole decimal integer literal -?[0-9]+ exactly. */
static kcr_err int_from_text(const char *s, int64_t *out)
{
  bool neg = *s == '-';
  uint64_t mag = 0, limit;
  const char *p = s + neg;

  if(!*p)
    return KCR_EPARSE;
  for(; *p; p++)
    if(*p < '0' || *p > '9')
      return KCR_EPARSE;
  limit = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
  for(p = s + neg; *p; p++) {
    unsigned d = (unsigned)(*p - '0');
    if(mag > (limit - d) / 10)
      return KCR_ERANGE;
    mag = mag * 10 + d;
  }
  /* -(2^63) is INT64_MIN: negate in unsigned arithmetic, then convert. */
  *out = neg ? (int64_t)(0 - mag) : (int64_t)mag;
  return KCR_OK;
}

kcr_err kcr_json_get_int(const cJSON *v, int64_t *out)
{
  double d;

  if(!v || cJSON_IsNull(v))
    return KCR_ENOTFOUND;
  if(cJSON_IsRaw(v))
    return v->valuestring ? int_from_text(v->valuestring, out) : KCR_EPARSE;
  if(!cJSON_IsNumber(v))
    return KCR_EPARSE;
  d = v->valuedouble;
  if(isnan(d))
    return KCR_EPARSE;
  /* [-2^63, 2^63): both bounds are exact doubles; inf falls outside. */
  if(d < -9223372036854775808.0 || d >= 9223372036854775808.0)
    return KCR_ERANGE;
  if(d != trunc(d))
    return KCR_EPARSE;
  *out = (int64_t)d;
  return KCR_OK;
}

int64_t kcr_json_int(const cJSON *obj, const char *path, int64_t def)
{
  int64_t v;
  return kcr_json_get_int(kcr_json_at(obj, path), &v) == KCR_OK ? v : def;
}

cJSON *kcr_json_create_int(int64_t v)
{
  char text[24];
  cJSON *n;

  if(v > -1000000000000000LL && v < 1000000000000000LL)
    return cJSON_CreateNumber((double)v); /* printed exactly by cJSON */
  snprintf(text, sizeof(text), "%lld", (long long)v);
  n = cJSON_CreateRaw(text);
  if(n)
    n->valuedouble = (double)v; /* the nearest double, for readers of it */
  return n;
}

cJSON *kcr_json_add_int(cJSON *obj, const char *name, int64_t v)
{
  cJSON *n;
  if(!obj || !name)
    return NULL;
  n = kcr_json_create_int(v);
  if(n && !cJSON_AddItemToObject(obj, name, n)) {
    cJSON_Delete(n);
    n = NULL;
  }
  return n;
}

/* ---- objects and strings ---- */

/* A copy of name[0..n) allocated as cJSON frees member names. */
static char *key_dup(const char *name, size_t n)
{
  char *k = cJSON_malloc(n + 1);
  if(k) {
    memcpy(k, name, n);
    k[n] = '\0';
  }
  return k;
}

/* Links item (its name already set) into object o. Cannot fail: unlike
 * cJSON_AddItemToObject it copies no key (cJSON_AddItemToArray only links,
 * and an object's members are the same list). */
static void link_member(cJSON *o, cJSON *item) { cJSON_AddItemToArray(o, item); }

/* Gets or creates the object at path[0..len); *rc says why on NULL.
 * All or nothing: missing objects are built as a detached chain first and
 * linked in one step that cannot fail, so on ENOMEM the tree is unchanged. */
static cJSON *obj_at(cJSON *obj, const char *path, size_t len, kcr_err *rc)
{
  cJSON *cur = obj, *head = NULL, *tail = NULL;
  const char *end = path + len;

  *rc = KCR_OK;
  if(!cJSON_IsObject(cur)) {
    *rc = KCR_EINVAL;
    return NULL;
  }
  while(path < end) {
    const char *dot = memchr(path, '.', (size_t)(end - path));
    size_t n = dot ? (size_t)(dot - path) : (size_t)(end - path);
    cJSON *next = head ? NULL : member(cur, path, n);
    if(!next) { /* from here on everything is new */
      next = cJSON_CreateObject();
      if(!next || !(next->string = key_dup(path, n))) {
        cJSON_Delete(next);
        cJSON_Delete(head);
        *rc = KCR_ENOMEM;
        return NULL;
      }
      if(tail)
        link_member(tail, next);
      else
        head = next;
      tail = next;
    } else if(!cJSON_IsObject(next)) {
      *rc = KCR_EINVAL;
      return NULL;
    }
    if(!head)
      cur = next;
    path += n + (dot ? 1 : 0);
  }
  if(head) { /* commit */
    link_member(cur, head);
    cur = tail;
  }
  return cur;
}

cJSON *kcr_json_obj(cJSON *obj, const char *path)
{
  kcr_err rc;
  if(!obj)
    return NULL;
  return obj_at(obj, path, strlen(path), &rc);
}

kcr_err kcr_json_set_str(cJSON *obj, const char *path, const char *value)
{
  const char *last = path ? strrchr(path, '.') : NULL;
  const char *key = last ? last + 1 : path;
  cJSON *parent, *v, *old;
  kcr_err rc;

  if(!obj || !path || !value)
    return KCR_EINVAL;
  /* The new member is made whole, named, before the tree is touched: after
   * obj_at (all or nothing) nothing can fail. */
  if(!(v = cJSON_CreateString(value)) || !(v->string = key_dup(key, strlen(key)))) {
    cJSON_Delete(v);
    return KCR_ENOMEM;
  }
  parent = obj_at(obj, path, last ? (size_t)(last - path) : 0, &rc);
  if(!parent) {
    cJSON_Delete(v);
    return rc;
  }
  /* Not cJSON_ReplaceItemInObject: cJSON 1.7.15 (Debian 12) inserts a
   * nameless member when copying the key fails. */
  old = cJSON_GetObjectItemCaseSensitive(parent, key);
  if(old)
    cJSON_ReplaceItemViaPointer(parent, old, v);
  else
    link_member(parent, v);
  return KCR_OK;
}

/* ---- parsing with exact integers ---- */

/* Counts number nodes under (and including) it; *big when one needs text. */
static size_t count_numbers(const cJSON *it, bool *big)
{
  size_t n = 0;
  for(; it; it = it->next) {
    if(cJSON_IsNumber(it)) {
      n++;
      if(!(fabs(it->valuedouble) < EXACT_MIN)) /* NaN and inf included */
        *big = true;
    }
    n += count_numbers(it->child, big);
  }
  return n;
}

static bool number_byte(char c)
{
  return (c >= '0' && c <= '9') || c == '+' || c == '-' || c == 'e' || c == 'E' ||
         c == '.';
}

/* The next number literal in p[0..end-p), as cJSON reads it: *len bytes. */
static const char *next_literal(const char *p, const char *end, size_t *len)
{
  while(p < end) {
    if(*p == '"') { /* skip the string, as parse_string does */
      for(p++; p < end && *p != '"'; p++)
        if(*p == '\\')
          p++;
      p++;
      continue;
    }
    if(*p == '-' || (*p >= '0' && *p <= '9')) {
      size_t n = 0;
      while(p + n < end && number_byte(p[n]))
        n++;
      *len = n;
      return p;
    }
    p++;
  }
  return NULL;
}

/* -?(0|[1-9][0-9]*), as Go writes an integer. */
static bool canonical_integer(const char *s, size_t n)
{
  size_t i = s[0] == '-';
  if(i == n || (s[i] == '0' && n - i > 1))
    return false;
  for(; i < n; i++)
    if(s[i] < '0' || s[i] > '9')
      return false;
  return true;
}

struct rescan {
  const char *p, *end;
  bool lost; /* the pairing of literals and nodes broke: stop converting */
};

/* Turns big integer-literal number nodes into Raw nodes, in document
 * order. KCR_ENOMEM leaves some converted: the caller drops the tree. */
static kcr_err convert(cJSON *it, struct rescan *r)
{
  for(; it && !r->lost; it = it->next) {
    if(cJSON_IsNumber(it)) {
      size_t n = 0;
      const char *lit = next_literal(r->p, r->end, &n);
      char *raw;
      if(!lit) {
        r->lost = true;
        break;
      }
      r->p = lit + n;
      if(fabs(it->valuedouble) < EXACT_MIN || !canonical_integer(lit, n))
        continue;
      if(!(raw = cJSON_malloc(n + 1)))
        return KCR_ENOMEM;
      memcpy(raw, lit, n);
      raw[n] = '\0';
      /* An integer literal has no decimal point, so strtod reads it as
       * cJSON's did whatever the locale: the pairing check. */
      if(strtod(raw, NULL) != it->valuedouble) {
        cJSON_free(raw);
        r->lost = true;
        break;
      }
      it->valuestring = raw;
      it->type = (it->type & ~0xFF) | cJSON_Raw;
    }
    if(it->child) {
      kcr_err rc = convert(it->child, r);
      if(rc)
        return rc;
    }
  }
  return KCR_OK;
}

/* ---- telling out of memory from malformed input ---- */

/* cJSON returns NULL for both. After a failure, a validator that allocates
 * nothing decides: it accepts RFC 8259 JSON minus what cJSON 1.7.15 refuses
 * in it (nesting deeper than CJSON_NESTING_LIMIT, number literals longer
 * than it copies, \u escapes that are lone or mismatched surrogates), so
 * everything it accepts cJSON parses given memory: then the failure was
 * memory. It looks at the first value only, as cJSON does here (text after
 * it is ignored). Anything it refuses is reported malformed. */
struct scan {
  const char *p, *end;
  int depth;
};

static void skip_ws(struct scan *s)
{
  while(s->p < s->end &&
        (*s->p == ' ' || *s->p == '\t' || *s->p == '\n' || *s->p == '\r'))
    s->p++;
}

static bool eat(struct scan *s, char c)
{
  skip_ws(s);
  if(s->p < s->end && *s->p == c) {
    s->p++;
    return true;
  }
  return false;
}

static int hex4(const char *p, const char *end)
{
  int v = 0;
  if(end - p < 4)
    return -1;
  for(int i = 0; i < 4; i++) {
    char c = p[i];
    int d = c >= '0' && c <= '9'   ? c - '0'
            : c >= 'a' && c <= 'f' ? c - 'a' + 10
            : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                   : -1;
    if(d < 0)
      return -1;
    v = v * 16 + d;
  }
  return v;
}

static bool valid_string(struct scan *s)
{
  s->p++; /* the opening quote */
  while(s->p < s->end && *s->p != '"') {
    if((unsigned char)*s->p < 0x20)
      return false;
    if(*s->p++ != '\\')
      continue;
    if(s->p >= s->end)
      return false;
    if(strchr("\"\\/bfnrt", *s->p) && *s->p) {
      s->p++;
      continue;
    }
    if(*s->p != 'u')
      return false;
    int u = hex4(s->p + 1, s->end);
    s->p += 5;
    if(u < 0 || (u >= 0xDC00 && u <= 0xDFFF))
      return false;
    if(u >= 0xD800 && u <= 0xDBFF) { /* must be followed by a low surrogate */
      int lo;
      if(s->end - s->p < 6 || s->p[0] != '\\' || s->p[1] != 'u')
        return false;
      lo = hex4(s->p + 2, s->end);
      if(lo < 0xDC00 || lo > 0xDFFF)
        return false;
      s->p += 6;
    }
  }
  if(s->p >= s->end)
    return false;
  s->p++; /* the closing quote */
  return true;
}

static bool digits1(struct scan *s)
{
  const char *b = s->p;
  while(s->p < s->end && *s->p >= '0' && *s->p <= '9')
    s->p++;
  return s->p > b;
}

static bool valid_number(struct scan *s)
{
  const char *b = s->p;
  if(*s->p == '-')
    s->p++;
  if(s->p < s->end && *s->p == '0')
    s->p++;
  else if(!digits1(s))
    return false;
  if(s->p < s->end && *s->p == '.') {
    s->p++;
    if(!digits1(s))
      return false;
  }
  if(s->p < s->end && (*s->p == 'e' || *s->p == 'E')) {
    s->p++;
    if(s->p < s->end && (*s->p == '+' || *s->p == '-'))
      s->p++;
    if(!digits1(s))
      return false;
  }
  return s->p - b <= NUMBER_MAX;
}

static bool valid_value(struct scan *s);

static bool valid_container(struct scan *s, char close, bool object)
{
  if(++s->depth >= CJSON_NESTING_LIMIT)
    return false;
  s->p++;
  if(eat(s, close)) {
    s->depth--;
    return true;
  }
  do {
    if(object) {
      skip_ws(s);
      if(s->p >= s->end || *s->p != '"' || !valid_string(s) || !eat(s, ':'))
        return false;
    }
    if(!valid_value(s))
      return false;
  } while(eat(s, ','));
  s->depth--;
  return eat(s, close);
}

static bool valid_value(struct scan *s)
{
  static const char *const words[] = {"null", "true", "false"};
  skip_ws(s);
  if(s->p >= s->end)
    return false;
  switch(*s->p) {
  case '"': return valid_string(s);
  case '[': return valid_container(s, ']', false);
  case '{': return valid_container(s, '}', true);
  case '-': return valid_number(s);
  default: break;
  }
  if(*s->p >= '0' && *s->p <= '9')
    return valid_number(s);
  for(size_t i = 0; i < 3; i++) {
    size_t n = strlen(words[i]);
    if((size_t)(s->end - s->p) >= n && !memcmp(s->p, words[i], n)) {
      s->p += n;
      return true;
    }
  }
  return false;
}

/* True if cJSON could only have failed on text for want of memory. */
static bool well_formed(const char *text, size_t len)
{
  struct scan s = {text, text + len, 0};
  if(!text)
    return false;
  if(len >= 3 && !memcmp(text, "\xEF\xBB\xBF", 3)) /* cJSON skips a BOM */
    s.p += 3;
  return valid_value(&s);
}

/* ---- spans: values found in text, with the validator's scan ---- */

/* Validates the object at s->p (after whitespace) and everything in it,
 * setting the span of each want in `mask` whose path continues at this
 * level (pos[i]: where its rest starts) with the name of one of the
 * object's members - the first of that name - and ends there, and
 * descending into the member for those whose path goes on. */
static bool spans_in(struct scan *s, struct kcr__json_want *w, size_t *pos, unsigned mask)
{
  if(!eat(s, '{'))
    return false;
  if(++s->depth >= CJSON_NESTING_LIMIT) /* as valid_container counts */
    return false;
  if(eat(s, '}')) {
    s->depth--;
    return true;
  }
  do {
    const char *key, *b;
    unsigned hit = 0, sub = 0;
    size_t klen;
    skip_ws(s);
    if(s->p >= s->end || *s->p != '"')
      return false;
    key = s->p + 1;
    if(!valid_string(s))
      return false;
    klen = (size_t)(s->p - 1 - key);
    for(unsigned i = 0, m = mask; m; i++, m >>= 1) {
      const char *seg = w[i].path + pos[i];
      size_t sl = strcspn(seg, ".");
      if(!(m & 1) || sl != klen || memcmp(seg, key, klen))
        continue;
      if(seg[sl]) {
        sub |= 1u << i;
        pos[i] += sl + 1;
      } else {
        hit |= 1u << i;
      }
    }
    mask &= ~(hit | sub); /* the first member of a name counts */
    if(!eat(s, ':'))
      return false;
    skip_ws(s);
    b = s->p;
    if(!(sub && s->p < s->end && *s->p == '{' ? spans_in(s, w, pos, sub)
                                              : valid_value(s)))
      return false;
    for(unsigned i = 0; hit >> i; i++)
      if(hit >> i & 1) {
        w[i].at = b;
        w[i].n = (size_t)(s->p - b);
      }
  } while(eat(s, ','));
  s->depth--;
  return eat(s, '}');
}

size_t kcr__json_spans(const char *text, size_t len, struct kcr__json_want *w, size_t nw)
{
  struct scan s = {text, text + len, 0};
  size_t pos[KCR__JSON_WANT_MAX] = {0}, found = 0;
  unsigned mask = 0;

  for(size_t i = 0; i < nw; i++) {
    w[i].at = NULL;
    w[i].n = 0;
    if(i < KCR__JSON_WANT_MAX && w[i].path && *w[i].path)
      mask |= 1u << i;
  }
  if(!text || !mask || !spans_in(&s, w, pos, mask)) {
    for(size_t i = 0; i < nw; i++)
      w[i].at = NULL, w[i].n = 0;
    return 0;
  }
  for(size_t i = 0; i < nw; i++)
    found += w[i].at != NULL;
  return found;
}

/* ---- parsing ---- */

kcr_err kcr_json_parse(const char *text, size_t len, cJSON **out, struct kcr_errinfo *ei)
{
  const char *end = NULL;
  bool big = false;
  cJSON *root;

  *out = NULL;
  if(!text)
    return kcr_errinfo_set(ei, KCR_EINVAL, "kcr_json_parse: no text");
  root = cJSON_ParseWithLengthOpts(text, len, &end, 0);
  if(!root && well_formed(text, len))
    return kcr_errinfo_set(ei, KCR_ENOMEM, "out of memory parsing %zu bytes of JSON",
                           len);
  if(!root)
    return kcr_errinfo_set(ei, KCR_EPARSE, "malformed JSON at byte %ld of %zu",
                           end ? (long)(end - text) : -1L, len);
  count_numbers(root, &big);
  if(big) {
    struct rescan r = {text, end && end >= text && end <= text + len ? end : text + len,
                       false};
    if(convert(root, &r)) {
      cJSON_Delete(root);
      return kcr_errinfo_set(ei, KCR_ENOMEM, "out of memory reading JSON integers");
    }
  }
  *out = root;
  return KCR_OK;
}

char *kcr_json_to_text(const cJSON *obj) { return cJSON_PrintUnformatted(obj); }
