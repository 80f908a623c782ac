/* DESIGN: JSON Pointer access over cJSON trees and JSON text, and exact
 * int64 integers.
 *
 * Paths are JSON Pointers (pointer.c), short and static in practice, so
 * they are walked token by token without allocation.
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
 * Strings: a parsed tree holds no C string cut short. cJSON decodes
 * \u0000 into a NUL byte and keeps the string cut there, and takes a raw NUL
 * byte in a string (which JSON does not): kcr_json_parse refuses the raw
 * byte and a member name holding \u0000, and keeps a value holding \u0000 as
 * a Raw node of its literal (see "strings that are not C strings").
 *
 * Duplicate names: in a parsed tree every object has each name once, the
 * last member of it, as Go's decoder keeps (see "duplicate member names");
 * every reader of text (spans, kcr__json_find) takes the last member of a
 * name too, so text and tree agree. kcr__json_drop_members follows the
 * first, which is only a missed saving: the tree keeps the later one whole.
 *
 * The same validator finds values in text without a tree (kcr__json_spans):
 * a writer that needs two strings of the object a write answered scans it
 * instead of building ~150 nodes it frees at once. */
#include <float.h>
#include <locale.h>
#include <math.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/hash-int.h"
#include "core/json-int.h"
#include "core/secret-int.h"
#include "kcr/json.h"
#include "kcr/log.h"

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
    /* the first byte inline: most members differ there */
    if(it->string && (!n || it->string[0] == name[0]) && !strncmp(it->string, name, n) &&
       !it->string[n])
      return it;
  }
  return NULL;
}

/* Logs, once per process, the first path that is not a pointer (a dot
 * path from before pointers, most likely): the reader gets NULL. */
static void bad_path_once(const char *fn, const char *path, const char *why)
{
  static atomic_bool said;
  if(!atomic_exchange(&said, true))
    KCR_LOG(KCR_LOG_ERROR, "json: a path is not a JSON Pointer; nothing is found at it",
            KCR_S("function", fn), KCR_S("path", path), KCR_S("problem", why));
}

/* Member token tok[0..tn) of obj, escaped as in a pointer. */
static cJSON *member_tok(const cJSON *obj, const char *tok, size_t tn)
{
  cJSON *it;
  if(!memchr(tok, '~', tn))
    return member(obj, tok, tn);
  if(!cJSON_IsObject(obj))
    return NULL;
  cJSON_ArrayForEach(it, obj)
  {
    if(it->string && kcr__ptr_tok_eq(tok, tn, it->string, strlen(it->string)))
      return it;
  }
  return NULL;
}

cJSON *kcr_json_at(const cJSON *obj, const char *path)
{
  const cJSON *cur = obj;
  const char *why;

  if(!obj || !path)
    return NULL;
  if((why = kcr__ptr_bad(path))) {
    bad_path_once("kcr_json_at", path, why);
    return NULL;
  }
  while(cur && *path) {
    const char *tok = path + 1;
    size_t tn = kcr__ptr_toklen(tok), i;
    if(cJSON_IsArray(cur))
      cur = kcr__ptr_tok_index(tok, tn, &i) && i <= INT32_MAX
                ? cJSON_GetArrayItem(cur, (int)i)
                : NULL;
    else
      cur = member_tok(cur, tok, tn);
    path = tok + tn;
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

/* Links item (its name already set) into object o. Cannot fail: unlike
 * cJSON_AddItemToObject it copies no key (cJSON_AddItemToArray only links,
 * and an object's members are the same list). */
static void link_member(cJSON *o, cJSON *item) { cJSON_AddItemToArray(o, item); }

/* A copy of token tok[0..tn), unescaped, allocated as cJSON frees member
 * names. */
static char *tok_dup(const char *tok, size_t tn)
{
  char *k = cJSON_malloc(tn + 1);
  if(k)
    k[kcr__ptr_tok_decode(tok, tn, k)] = '\0';
  return k;
}

/* Gets or creates the object at the valid pointer path[0..len); *rc says
 * why on NULL. All or nothing: missing objects are built as a detached
 * chain first and linked in one step that cannot fail, so on ENOMEM the
 * tree is unchanged. */
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
    const char *tok = path + 1;
    size_t tn = kcr__ptr_toklen(tok);
    cJSON *next = head ? NULL : member_tok(cur, tok, tn);
    if(!next) { /* from here on everything is new */
      next = cJSON_CreateObject();
      if(!next || !(next->string = tok_dup(tok, tn))) {
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
    path = tok + tn;
  }
  if(head) { /* commit */
    link_member(cur, head);
    cur = tail;
  }
  return cur;
}

cJSON *kcr_json_obj(cJSON *obj, const char *path)
{
  const char *why;
  kcr_err rc;

  if(!obj || !path)
    return NULL;
  if((why = kcr__ptr_bad(path))) {
    bad_path_once("kcr_json_obj", path, why);
    return NULL;
  }
  return obj_at(obj, path, strlen(path), &rc);
}

kcr_err kcr_json_set_str(cJSON *obj, const char *path, const char *value)
{
  const char *last;
  cJSON *parent, *v, *old;
  size_t kn;
  kcr_err rc;

  if(!obj || !path || !value || !*path || kcr__ptr_bad(path))
    return KCR_EINVAL; /* "": the value itself, not a member to set */
  last = strrchr(path, '/');
  kn = strlen(last + 1);
  /* The new member is made whole, named, before the tree is touched: after
   * obj_at (all or nothing) nothing can fail. */
  if(!(v = cJSON_CreateString(value)) || !(v->string = tok_dup(last + 1, kn))) {
    cJSON_Delete(v);
    return KCR_ENOMEM;
  }
  parent = obj_at(obj, path, (size_t)(last - path), &rc);
  if(!parent) {
    cJSON_Delete(v);
    return rc;
  }
  /* Not cJSON_ReplaceItemInObject: cJSON 1.7.15 (Debian 12) inserts a
   * nameless member when copying the key fails. */
  old = cJSON_GetObjectItemCaseSensitive(parent, v->string);
  if(old)
    cJSON_ReplaceItemViaPointer(parent, old, v);
  else
    link_member(parent, v);
  return KCR_OK;
}

/* ---- parsing with exact integers ---- */

static bool has_dup(const cJSON *obj);

/* Looks over it and its siblings and everything below: *big when a number
 * needs its text, *dups when an object may have a name twice (has_dup). */
static void survey(const cJSON *it, bool *big, bool *dups)
{
  for(; it; it = it->next) {
    if(cJSON_IsNumber(it) && !(fabs(it->valuedouble) < EXACT_MIN)) /* NaN, inf too */
      *big = true;
    if(it->child) {
      if(!*dups && cJSON_IsObject(it) && it->child->next)
        *dups = has_dup(it);
      survey(it->child, big, dups);
    }
  }
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

/* ---- strings that are not C strings ----
 *
 * cJSON decodes \u0000 into a NUL byte and keeps the string as a C string,
 * cut there ("Ready\u0000x" reads as "Ready"). kcr_json_parse finds such
 * strings afterwards, only when the text holds "\u0000" at all (a raw NUL
 * byte, which cJSON also takes in a string but JSON does not, is refused
 * outright): a value becomes a Raw node holding its literal as written,
 * quotes included (so it prints back unchanged, and no reader takes it for
 * a string); a member name cannot be anything but a C string, so a text
 * with one is refused. Strings pair with the text's string literals in
 * document order (a member's name, then its value) as numbers pair with
 * number literals above. */

/* The text's string literals, read from p on. */
struct strscan {
  const char *text, *p, *end;
};

/* The next string literal from r->p: *lit its opening quote, *n its length
 * with both quotes; false when there is none. */

static bool next_string(struct strscan *r, const char **lit, size_t *n)
{
  const char *p = r->p;

  while(p < r->end && *p != '"')
    p++;
  if(p >= r->end)
    return false;
  *lit = p;
  for(p++; p < r->end && *p != '"'; p++)
    if(*p == '\\')
      p++;
  if(p >= r->end)
    return false;
  r->p = ++p;
  *n = (size_t)(p - *lit);
  return true;
}

/* Whether text[0..n) may hold the escape \u0000: a backslash followed by
 * "u0000" (escaped backslashes skipped, as pairs). */
static bool has_nul_escape(const char *text, size_t n)
{
  const char *p = text, *e = text + n;

  for(; (p = memchr(p, '\\', (size_t)(e - p))); p += 2)
    if(e - p >= 6 && !memcmp(p + 1, "u0000", 5))
      return true;
    else if(e - p < 2)
      break;
  return false;
}

/* Whether the literal lit[0..n) holds the escape \u0000. */
static bool holds_nul(const char *lit, size_t n)
{
  for(size_t i = 1; i + 1 < n; i++)
    if(lit[i] == '\\' && lit[++i] == 'u' && n - i > 5 && !memcmp(lit + i + 1, "0000", 4))
      return true;
  return false;
}

/* Makes the string node it the Raw node of its literal lit[0..n). */
static kcr_err nul_to_raw(cJSON *it, const char *lit, size_t n)
{
  char *raw = cJSON_malloc(n + 1);

  if(!raw)
    return KCR_ENOMEM;
  memcpy(raw, lit, n);
  raw[n] = '\0';
  if(it->valuestring) { /* it may have been a secret (a token) */
    kcr__wipe(it->valuestring, strlen(it->valuestring));
    cJSON_free(it->valuestring);
  }
  it->valuestring = raw;
  it->type = (it->type & ~0xFF) | cJSON_Raw;
  return KCR_OK;
}

/* Walks it and its siblings (members of an object when named) in document
 * order along the text's string literals, turning values that hold \u0000
 * into Raw nodes. KCR_EPARSE (ei says where) for a name that holds one, or
 * when the pairing breaks; KCR_ENOMEM. */
static kcr_err fix_nul(cJSON *it, bool named, struct strscan *r, struct kcr_errinfo *ei)
{
  for(; it; it = it->next) {
    const char *lit;
    size_t n;
    kcr_err rc;
    if(named && !next_string(r, &lit, &n))
      break;
    if(named && holds_nul(lit, n))
      return kcr_errinfo_set(ei, KCR_EPARSE,
                             "JSON member name at byte %zu holds \\u0000, which no "
                             "name in libkcr can hold (names are C strings)",
                             (size_t)(lit - r->text));
    if(cJSON_IsString(it)) {
      if(!next_string(r, &lit, &n))
        break;
      if(holds_nul(lit, n) && (rc = nul_to_raw(it, lit, n)))
        return rc;
    }
    if(it->child && (rc = fix_nul(it->child, cJSON_IsObject(it), r, ei)))
      return rc;
  }
  if(it) /* cannot happen: cJSON and next_string read strings alike */
    return kcr_errinfo_set(ei, KCR_EPARSE,
                           "JSON strings could not be paired with the text");
  return KCR_OK;
}

bool kcr__json_nul_string(const cJSON *v)
{
  return cJSON_IsRaw(v) && v->valuestring && v->valuestring[0] == '"';
}

/* ---- duplicate member names ----
 *
 * Go's encoding/json keeps the last member of a name; cJSON keeps them all,
 * and its lookups (cJSON_GetObjectItem*) find the first. kcr_json_parse
 * deletes every member that a later one of the same name follows, so every
 * lookup in a parsed tree finds what Go finds. The walk that looks for big
 * numbers tells whether any object has a name twice, comparing the first
 * bytes of names first (no allocation); an object of more than DEDUP_SMALL
 * members counts as one that may, and is sorted by the deleting pass, which
 * runs only then (no quadratic cost on a large object). */
#define DEDUP_SMALL 32

/* The first four bytes of a name (fewer for a shorter one), which tell most
 * names apart at once. */
static uint32_t name_tag(const char *s)
{
  uint32_t t = 0;
  for(int i = 0; i < 4 && s[i]; i++)
    t |= (uint32_t)(unsigned char)s[i] << (8 * i);
  return t;
}

/* Whether obj (an object) may have a name twice: it does, or it has more
 * than DEDUP_SMALL members. */
static bool has_dup(const cJSON *obj)
{
  const char *name[DEDUP_SMALL];
  uint32_t tag[DEDUP_SMALL];
  size_t k = 0;

  for(const cJSON *c = obj->child; c; c = c->next, k++) {
    uint32_t t;
    if(k == DEDUP_SMALL)
      return true;
    t = name_tag(c->string);
    for(size_t j = 0; j < k; j++)
      if(tag[j] == t && !strcmp(name[j], c->string))
        return true;
    name[k] = c->string;
    tag[k] = t;
  }
  return false;
}

/* Wipes the strings and Raw texts of it and all below it and its siblings
 * (a member a later one replaces may hold a secret; cJSON frees without
 * wiping). */
static void wipe_strings(cJSON *it)
{
  for(; it; it = it->next) {
    if(it->valuestring)
      kcr__wipe(it->valuestring, strlen(it->valuestring));
    wipe_strings(it->child);
  }
}

static void drop_member(cJSON *obj, cJSON *it)
{
  cJSON_DetachItemViaPointer(obj, it); /* (it->next is NULL after) */
  wipe_strings(it);
  cJSON_Delete(it);
}

/* A member of a large object, with its place in it. */
struct named {
  cJSON *it;
  size_t at;
};

static int by_name_then_place(const void *a, const void *b)
{
  const struct named *x = a, *y = b;
  int c = strcmp(x->it->string, y->it->string);
  return c ? c : x->at < y->at ? -1 : x->at > y->at;
}

/* Deletes the members of obj (n of them) that a later one of the same name
 * follows, by sorting. KCR_ENOMEM leaves obj as it was. */
static kcr_err dedup_large(cJSON *obj, size_t n)
{
  struct named *v = malloc(n * sizeof(*v));
  size_t i = 0;

  if(!v)
    return KCR_ENOMEM;
  for(cJSON *it = obj->child; it; it = it->next, i++)
    v[i] = (struct named){it, i};
  qsort(v, n, sizeof(*v), by_name_then_place);
  for(i = 0; i + 1 < n; i++)
    if(!strcmp(v[i].it->string, v[i + 1].it->string))
      drop_member(obj, v[i].it);
  free(v);
  return KCR_OK;
}

/* Deletes, in the tree under it (and its siblings), every member that a
 * later one of the same name follows. KCR_ENOMEM: some may be left. */
static kcr_err dedup(cJSON *it)
{
  for(; it; it = it->next) {
    if(cJSON_IsObject(it) && it->child && it->child->next) {
      cJSON *kept[DEDUP_SMALL], *c, *next;
      uint32_t h[DEDUP_SMALL];
      size_t n = 0, k = 0;
      for(c = it->child; c; c = c->next)
        n++;
      if(n > DEDUP_SMALL) {
        if(dedup_large(it, n))
          return KCR_ENOMEM;
      } else {
        for(c = it->child; c; c = next) {
          uint32_t hc = name_tag(c->string);
          size_t j = 0;
          next = c->next;
          while(j < k && !(h[j] == hc && !strcmp(kept[j]->string, c->string)))
            j++;
          if(j < k)
            drop_member(it, kept[j]); /* the later one takes its slot */
          else
            k++;
          kept[j] = c;
          h[j] = hc;
        }
      }
    }
    if(it->child) {
      kcr_err rc = dedup(it->child);
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
 * than it copies, \u escapes that are lone or mismatched surrogates) and
 * minus what kcr_json_parse refuses after cJSON (a member name holding
 * \u0000; a raw NUL byte, which cJSON takes in a string, the validator
 * refuses with every control byte), so everything it accepts
 * kcr_json_parse parses given memory: then the failure was memory. It
 * looks at the first value only, as cJSON does here (text after it is
 * ignored). Anything it refuses is reported malformed. */
struct scan {
  const char *p, *end;
  int depth;
  bool spaced;  /* white space was skipped */
  bool trusted; /* spans: the text was checked before; follow its structure */
  bool escaped; /* spans: a name with an escape where a want was open */
  bool deep;    /* nested deeper than KCR__JSON_SKIP_DEPTH somewhere */
};

static void skip_ws(struct scan *s)
{
  const char *b = s->p;
  while(s->p < s->end &&
        (*s->p == ' ' || *s->p == '\t' || *s->p == '\n' || *s->p == '\r'))
    s->p++;
  s->spaced |= s->p != b;
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

/* The bytes of a string that need a look - control bytes (below 0x20),
 * quotes, backslashes - found 8 at a time: the high bit of each such byte
 * of x is set in the mask (bytes from 0x80 up are plain). A byte above a
 * flagged one may be flagged too (a borrow), never one below the first, so
 * the lowest flag is exact. */
static uint64_t special8(uint64_t x)
{
  const uint64_t ones = 0x0101010101010101u, high = 0x8080808080808080u;
  uint64_t q = x ^ (ones * '"'), b = x ^ (ones * '\\');
  return ((x - ones * 0x20) | (q - ones) | (b - ones)) & ~x & high;
}

/* The index of the first flagged byte of a nonzero special8 mask. */
static int first8(uint64_t m)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
  return __builtin_clzll(m) >> 3;
#else
  return __builtin_ctzll(m) >> 3;
#endif
}

/* A string; a member name (name) holding \u0000 is refused, as
 * kcr_json_parse refuses it (see there). */
static bool valid_string(struct scan *s, bool name)
{
  const char *p = s->p + 1, *end = s->end; /* after the opening quote */

  for(;;) {
    uint64_t x, m = 0;
    while(end - p >= 8) { /* plain bytes, 8 at a time, to the next special */
      memcpy(&x, p, 8);
      if((m = special8(x)))
        break;
      p += 8;
    }
    if(m)
      p += first8(m);
    else /* fewer than 8 left */
      while(p < end && (unsigned char)*p >= 0x20 && *p != '"' && *p != '\\')
        p++;
    if(p >= end || (unsigned char)*p < 0x20)
      return false;
    if(*p++ == '"')
      break;
    /* a backslash */
    if(p >= end)
      return false;
    if(strchr("\"\\/bfnrt", *p) && *p) {
      p++;
      continue;
    }
    if(*p != 'u')
      return false;
    int u = hex4(p + 1, end);
    p += 5;
    if(u < 0 || (u >= 0xDC00 && u <= 0xDFFF) || (u == 0 && name))
      return false;
    if(u >= 0xD800 && u <= 0xDBFF) { /* must be followed by a low surrogate */
      int lo;
      if(end - p < 6 || p[0] != '\\' || p[1] != 'u')
        return false;
      lo = hex4(p + 2, end);
      if(lo < 0xDC00 || lo > 0xDFFF)
        return false;
      p += 6;
    }
  }
  s->p = p;
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
  s->deep |= s->depth > KCR__JSON_SKIP_DEPTH;
  s->p++;
  if(eat(s, close)) {
    s->depth--;
    return true;
  }
  do {
    if(object) {
      skip_ws(s);
      if(s->p >= s->end || *s->p != '"' || !valid_string(s, true) || !eat(s, ':'))
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
  case '"': return valid_string(s, false);
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

bool kcr__json_check_value(const char *text, size_t len, const char **at, size_t *n)
{
  struct scan s = {text, text + len, 0};

  skip_ws(&s);
  *at = s.p;
  if(!valid_value(&s)) {
    *n = 0;
    return false;
  }
  *n = (size_t)(s.p - *at);
  return true;
}

/* True if cJSON could only have failed on text for want of memory. */
static bool well_formed(const char *text, size_t len)
{
  struct scan s = {text, text + len, 0};
  if(!text)
    return false;
  /* cJSON skips a byte-order mark only before 2 bytes or more (its
   * skip_utf8_bom wants index 4 readable) */
  if(len > 4 && !memcmp(text, "\xEF\xBB\xBF", 3))
    s.p += 3;
  return valid_value(&s);
}

/* ---- spans: values found in text, with the validator's scan ---- */

static const char *skip_string(const char *p, const char *end);
static bool skip_value(struct scan *s);

/* Where a want's path continues: at its token path + at (just after a
 * '/'), sl bytes long. */
struct seg {
  size_t at, sl;
};

/* Validates the object at s->p (after whitespace) and everything in it,
 * setting the span of each want in `mask` whose path continues at this
 * level (pos[i]) with the name of one of the object's members and ends
 * there, and descending into the member for those whose path goes on. The
 * last member of a name counts, as in a tree from kcr_json_parse: a later
 * one clears what an earlier one found (a span, or the spans below it). */
static bool spans_in(struct scan *s, struct kcr__json_want *w, const struct seg *pos,
                     unsigned mask)
{
  if(!eat(s, '{'))
    return false;
  if(++s->depth >= CJSON_NESTING_LIMIT) /* as valid_container counts */
    return false;
  s->deep |= s->depth > KCR__JSON_SKIP_DEPTH;
  if(eat(s, '}')) {
    s->depth--;
    return true;
  }
  do {
    struct seg next[KCR__JSON_WANT_MAX];
    const char *key, *b;
    unsigned hit = 0, sub = 0;
    size_t klen;
    skip_ws(s);
    if(s->p >= s->end || *s->p != '"')
      return false;
    key = s->p + 1;
    if(s->trusted ? !(s->p = skip_string(s->p, s->end)) : !valid_string(s, true))
      return false;
    klen = (size_t)(s->p - 1 - key);
    if(mask && memchr(key, '\\', klen))
      s->escaped = true; /* the tree may read it as a wanted name */
    for(unsigned i = 0, m = mask; m; i++, m >>= 1) {
      const char *seg;
      size_t sl;
      if(!(m & 1))
        continue;
      seg = w[i].path + pos[i].at;
      sl = pos[i].sl;
      if(!kcr__ptr_tok_eq(seg, sl, key, klen))
        continue;
      w[i].at = NULL; /* an earlier member of this name no longer counts */
      w[i].n = 0;
      if(seg[sl]) {
        sub |= 1u << i;
        next[i].at = pos[i].at + sl + 1;
        next[i].sl = kcr__ptr_toklen(seg + sl + 1);
      } else {
        hit |= 1u << i;
      }
    }
    if(!eat(s, ':'))
      return false;
    skip_ws(s);
    b = s->p;
    if(!(sub && s->p < s->end && *s->p == '{' ? spans_in(s, w, next, sub)
         : s->trusted                         ? skip_value(s)
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

/* Runs spans_in over the object at s->p for the wants w[0..nw); true when
 * it could (with no wants: only with any_ok, for the check alone). On
 * failure every span is cleared. */
static bool spans_all(struct scan *s, struct kcr__json_want *w, size_t nw, bool any_ok)
{
  struct seg pos[KCR__JSON_WANT_MAX] = {{0}}; /* (only wants' are read) */
  unsigned mask = 0;

  for(size_t i = 0; i < nw; i++) {
    w[i].at = NULL;
    w[i].n = 0;
    if(i < KCR__JSON_WANT_MAX && w[i].path && *w[i].path == '/' &&
       !kcr__ptr_bad(w[i].path)) {
      mask |= 1u << i;
      pos[i] = (struct seg){.at = 1, .sl = kcr__ptr_toklen(w[i].path + 1)};
    }
  }
  if(s->p && (mask || any_ok) && spans_in(s, w, pos, mask))
    return true;
  for(size_t i = 0; i < nw; i++)
    w[i].at = NULL, w[i].n = 0;
  return false;
}

static size_t found(const struct kcr__json_want *w, size_t nw)
{
  size_t n = 0;
  for(size_t i = 0; i < nw; i++)
    n += w[i].at != NULL;
  return n;
}

size_t kcr__json_scan_deep(const char *text, size_t len, struct kcr__json_want *w,
                           size_t nw, size_t *objlen, bool *compact, bool *deep)
{
  struct scan s = {text, text + len, 0, false, false};
  bool ok = spans_all(&s, w, nw, objlen != NULL);

  if(objlen)
    *objlen = ok ? (size_t)(s.p - text) : 0;
  if(compact)
    *compact = ok && !s.spaced;
  if(deep)
    *deep = ok && s.deep;
  return ok ? found(w, nw) : 0;
}

size_t kcr__json_scan(const char *text, size_t len, struct kcr__json_want *w, size_t nw,
                      size_t *objlen, bool *compact)
{
  return kcr__json_scan_deep(text, len, w, nw, objlen, compact, NULL);
}

size_t kcr__json_spans_trusted(const char *text, size_t len, struct kcr__json_want *w,
                               size_t nw)
{
  struct scan s = {text, text + len, 0, false, true};
  return spans_all(&s, w, nw, false) ? found(w, nw) : 0;
}

size_t kcr__json_spans(const char *text, size_t len, struct kcr__json_want *w, size_t nw)
{
  return kcr__json_scan(text, len, w, nw, NULL, NULL);
}

/* kcr__json_spans_exact, by the structure only (trusted) or checking it. */
static size_t spans_exact(const char *text, size_t len, struct kcr__json_want *w,
                          size_t nw, bool trusted)
{
  struct scan s = {text, text + len, 0, false, trusted};

  if(spans_all(&s, w, nw, false) && !s.escaped)
    return found(w, nw);
  for(size_t i = 0; i < nw; i++)
    w[i].at = NULL, w[i].n = 0;
  return 0;
}

size_t kcr__json_spans_exact(const char *text, size_t len, struct kcr__json_want *w,
                             size_t nw)
{
  return spans_exact(text, len, w, nw, false);
}

size_t kcr__json_spans_trusted_exact(const char *text, size_t len,
                                     struct kcr__json_want *w, size_t nw)
{
  return spans_exact(text, len, w, nw, true);
}

/* ---- leaving members out before parsing ----
 *
 * The text is followed by its structure only - strings (a backslash escapes
 * the next byte, as cJSON's parse_string reads them), brackets matched by
 * kind, and on the path the names, colons and commas of each member - at a
 * few instructions per byte, a third of what checking every token costs:
 * the kept bytes are checked by cJSON when they are parsed, and the dropped
 * ones are never read. So a text that is well formed parses as it would,
 * minus the members, and one that is not still fails, unless all that was
 * wrong lay inside a dropped member. */

/* The end of the string whose opening quote is at p, or NULL if the text
 * ends first. */
static const char *skip_string(const char *p, const char *end)
{
  const char *start = ++p;

  for(;;) {
    const char *q = memchr(p, '"', (size_t)(end - p));
    size_t bs = 0;
    if(!q)
      return NULL;
    while(q - bs > start && q[-1 - (ptrdiff_t)bs] == '\\')
      bs++;
    if(!(bs & 1))
      return q + 1;
    p = q + 1;
  }
}

/* A byte of a literal: true, false, null or a number. */
static bool literal_byte(char c) { return (c >= 'a' && c <= 'z') || number_byte(c); }

/* Moves s past the value at s->p (after white space), by its structure. */
static bool skip_value(struct scan *s)
{
  char close[KCR__JSON_SKIP_DEPTH];
  int depth = 0;
  const char *p, *b;

  skip_ws(s);
  p = b = s->p;
  if(p >= s->end)
    return false;
  if(*p == '"')
    return (s->p = skip_string(p, s->end)) != NULL;
  if(*p != '{' && *p != '[') { /* a literal */
    while(p < s->end && literal_byte(*p))
      p++;
    s->p = p;
    return p > b;
  }
  for(; p < s->end; p++) {
    switch(*p) {
    case '"':
      if(!(p = skip_string(p, s->end)))
        return false;
      p--;
      break;
    case '{':
    case '[':
      if(depth == KCR__JSON_SKIP_DEPTH)
        return false;
      close[depth++] = *p == '{' ? '}' : ']';
      break;
    case '}':
    case ']':
      if(close[--depth] != *p)
        return false;
      if(!depth) {
        s->p = p + 1;
        return true;
      }
      break;
    default: break;
    }
  }
  return false;
}

const char *kcr__json_skip(const char *p, const char *end)
{
  struct scan s = {.p = p, .end = end};
  return skip_value(&s) ? s.p : NULL;
}

/* Reads the member name at s->p and says whether its bytes between the
 * quotes are what pointer token name[0..n) names. */
static bool key_is(struct scan *s, const char *name, size_t n, bool *match)
{
  const char *e;

  skip_ws(s);
  if(s->p >= s->end || *s->p != '"' || !(e = skip_string(s->p, s->end)))
    return false;
  *match = kcr__ptr_tok_eq(name, n, s->p + 1, (size_t)(e - s->p - 2));
  s->p = e;
  return true;
}

/* Moves s from the object at s->p (its '{') to the value of its first
 * member named by token name[0..n): 1; 0 when it has none (s past the object); -1
 * when the structure breaks on the way. */
static int to_member(struct scan *s, const char *name, size_t n)
{
  s->p++;
  if(eat(s, '}'))
    return 0;
  do {
    bool match;
    if(!key_is(s, name, n, &match) || !eat(s, ':'))
      return -1;
    if(match) {
      skip_ws(s);
      return 1;
    }
    if(!skip_value(s))
      return -1;
  } while(eat(s, ','));
  return eat(s, '}') ? 0 : -1;
}

/* Moves s from the object at s->p (its '{') to the value of its last member
 * named by token name[0..n), as the tree from kcr_json_parse keeps it: 1; 0 when it
 * has none (s past the object); -1 when the structure breaks before the
 * object's end. */
static int to_last_member(struct scan *s, const char *name, size_t n)
{
  const char *at = NULL;

  s->p++;
  if(eat(s, '}'))
    return 0;
  do {
    bool match;
    if(!key_is(s, name, n, &match) || !eat(s, ':'))
      return -1;
    skip_ws(s);
    if(match)
      at = s->p;
    if(!skip_value(s))
      return -1;
  } while(eat(s, ','));
  if(!eat(s, '}'))
    return -1;
  if(!at)
    return 0;
  s->p = at;
  return 1;
}

/* Moves s from the end of a member's value past the end of its object. */
static bool past_object(struct scan *s)
{
  while(eat(s, ',')) {
    bool match;
    if(!key_is(s, "", 0, &match) || !eat(s, ':') || !skip_value(s))
      return false;
  }
  return eat(s, '}');
}

/* Appends the members of the object at s->p except those named
 * name[0..n), comma-separated, up to and without its closing brace (which
 * s has passed when it returns true). *dropped: some member was left out. */
static bool copy_members(struct scan *s, const char *name, size_t n, struct kcr_buf *out,
                         bool *dropped)
{
  bool first = true;

  if(s->p >= s->end || *s->p != '{')
    return false;
  s->p++;
  if(eat(s, '}'))
    return true;
  do {
    const char *m;
    bool match;
    skip_ws(s);
    m = s->p;
    if(!key_is(s, name, n, &match) || !eat(s, ':') || !skip_value(s))
      return false;
    if(match) {
      *dropped = true;
      continue;
    }
    if(!first)
      kcr_buf_append(out, ",", 1);
    kcr_buf_append(out, m, (size_t)(s->p - m));
    first = false;
  } while(eat(s, ','));
  return eat(s, '}');
}

/* A walk of the text along the path: out holds text[0..mark) as it is to
 * be (members left out), the text from mark on is still to copy. */
struct drop {
  struct scan s;
  const char *mark, *name;
  size_t n;
  struct kcr_buf *out;
  int arrays; /* "[]" segments being walked: every element must be seen */
  bool dropped;
};

enum walk {
  W_BROKEN, /* the structure could not be followed */
  W_PASSED, /* s is past the value */
  W_DONE    /* nothing further needs reading: the rest is copied unread */
};

static enum walk walk(struct drop *d, const char *seg);

/* The value at s->p is the object whose members are left out. */
static enum walk drop_here(struct drop *d)
{
  struct scan *s = &d->s;

  if(*s->p != '{')
    return skip_value(s) ? W_PASSED : W_BROKEN;
  kcr_buf_append(d->out, d->mark, (size_t)(s->p - d->mark) + 1); /* up to its '{' */
  if(!copy_members(s, d->name, d->n, d->out, &d->dropped))
    return W_BROKEN;
  d->mark = s->p - 1; /* its '}' */
  return W_PASSED;
}

/* The value at s->p is an array: the path's rest applies to each element. */
static enum walk walk_each(struct drop *d, const char *rest)
{
  struct scan *s = &d->s;
  enum walk w = W_PASSED;

  if(*s->p != '[')
    return skip_value(s) ? W_PASSED : W_BROKEN;
  s->p++;
  if(eat(s, ']'))
    return W_PASSED;
  d->arrays++;
  do
    w = walk(d, rest);
  while(w == W_PASSED && eat(s, ','));
  d->arrays--;
  return w == W_PASSED && !eat(s, ']') ? W_BROKEN : w;
}

/* Applies the pointer path (its rest, from a '/' or the end) to the value
 * at s->p (after white space). */
static enum walk walk(struct drop *d, const char *path)
{
  struct scan *s = &d->s;
  const char *tok = path + 1;
  size_t tn;
  enum walk w;
  int at;

  skip_ws(s);
  if(s->p >= s->end)
    return W_BROKEN;
  if(!*path)
    return drop_here(d);
  tn = kcr__ptr_toklen(tok);
  if(tn == 1 && *tok == '*') /* each element of an array */
    return walk_each(d, tok + tn);
  if(*s->p != '{')
    return skip_value(s) ? W_PASSED : W_BROKEN;
  at = to_member(s, tok, tn);
  if(at <= 0)
    return at < 0 ? W_BROKEN : d->arrays ? W_PASSED : W_DONE;
  w = walk(d, tok + tn);
  if(w != W_PASSED)
    return w;
  if(!d->arrays) /* the first member of that name was the one */
    return W_DONE;
  return past_object(s) ? W_PASSED : W_BROKEN; /* on to the next element */
}

kcr_err kcr__json_drop_members(const char *text, size_t len, const char *path,
                               const char *name, struct kcr_buf *out)
{
  struct drop d = {{text, text + len, 0}, text, name, strlen(name), out, 0, false};

  kcr_buf_reset(out);
  if(!text || (len >= 3 && !memcmp(text, "\xEF\xBB\xBF", 3)))
    return KCR_ENOTFOUND; /* (cJSON skips a BOM: not worth following) */
  if(walk(&d, path) == W_BROKEN || !d.dropped) {
    kcr_buf_reset(out);
    return KCR_ENOTFOUND;
  }
  kcr_buf_append(out, d.mark, (size_t)(text + len - d.mark)); /* the rest, unread */
  return kcr_buf_err(out);
}

kcr_err kcr__json_find(const char *text, size_t len, const char *path, const char **at,
                       size_t *n)
{
  struct scan s = {text, text + len, 0};

  *at = NULL;
  *n = 0;
  if(!text || !path || *path != '/' || kcr__ptr_bad(path))
    return KCR_ENOTFOUND;
  for(;;) {
    const char *tok = path + 1;
    size_t tn = kcr__ptr_toklen(tok);
    const char *b;
    int found;
    skip_ws(&s);
    if(s.p >= s.end)
      return KCR_EPARSE;
    if(*s.p != '{')
      return KCR_ENOTFOUND;
    found = to_last_member(&s, tok, tn);
    if(found <= 0)
      return found < 0 ? KCR_EPARSE : KCR_ENOTFOUND;
    path = tok + tn;
    if(*path)
      continue;
    b = s.p;
    if(!skip_value(&s))
      return KCR_EPARSE;
    *at = b;
    *n = (size_t)(s.p - b);
    return KCR_OK;
  }
}

bool kcr__json_iter_init(struct kcr__json_iter *it, const char *text, size_t len)
{
  it->p = text;
  it->end = text ? text + len : NULL;
  it->close = 0;
  it->first = true;
  it->known = NULL;
  it->nknown = 0;
  if(!text || !len || (*text != '{' && *text != '['))
    return false;
  it->close = *text == '{' ? '}' : ']';
  it->p++;
  return true;
}

/* The known value of it that starts at b and fits in its text, or NULL. */
static const struct kcr__json_want *known_at(const struct kcr__json_iter *it,
                                             const char *b)
{
  for(size_t i = 0; i < it->nknown; i++)
    if(it->known[i].at == b && it->known[i].n && it->known[i].n <= (size_t)(it->end - b))
      return &it->known[i];
  return NULL;
}

int kcr__json_iter_next(struct kcr__json_iter *it, const char **key, size_t *klen,
                        const char **at, size_t *n)
{
  struct scan s = {it->p, it->end, 0, false};
  const struct kcr__json_want *k;
  const char *b;

  *key = *at = NULL;
  *klen = *n = 0;
  if(!it->close)
    return -1;
  if(it->first ? eat(&s, it->close) : !eat(&s, ',')) {
    if(!it->first && !eat(&s, it->close))
      return -1;
    it->p = s.p;
    it->close = 0; /* done: further calls break */
    return 0;
  }
  it->first = false;
  if(it->close == '}') {
    skip_ws(&s);
    if(s.p >= s.end || *s.p != '"' || !(b = skip_string(s.p, s.end)))
      return -1;
    *key = s.p + 1;
    *klen = (size_t)(b - s.p - 2);
    s.p = b;
    if(!eat(&s, ':'))
      return -1;
  }
  skip_ws(&s);
  b = s.p;
  if((k = known_at(it, b)))
    s.p = b + k->n;
  else if(!skip_value(&s))
    return -1;
  *at = b;
  *n = (size_t)(s.p - b);
  it->p = s.p;
  return 1;
}

kcr_err kcr__json_parse_dropping(const char *text, size_t len, const char *path,
                                 const char *name, struct kcr_buf *scratch, cJSON **out,
                                 struct kcr_errinfo *ei)
{
  kcr_err rc =
      scratch ? kcr__json_drop_members(text, len, path, name, scratch) : KCR_ENOTFOUND;

  *out = NULL;
  if(rc == KCR_OK) {
    text = scratch->ptr;
    len = scratch->len;
  } else if(rc != KCR_ENOTFOUND) {
    return kcr_errinfo_set(ei, rc, "out of memory leaving %s out of a document", name);
  }
  return kcr_json_parse(text, len, out, ei);
}

/* ---- parsing ---- */

kcr_err kcr_json_parse(const char *text, size_t len, cJSON **out, struct kcr_errinfo *ei)
{
  const char *end = NULL, *nul;
  bool big = false, dups = false;
  cJSON *root;
  kcr_err rc;

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
  if(!(end && end >= text && end <= text + len))
    end = text + len;
  if((nul = memchr(text, '\0', (size_t)(end - text)))) { /* cJSON takes it in a string */
    rc = kcr_errinfo_set(ei, KCR_EPARSE,
                         "malformed JSON at byte %zu of %zu: a NUL byte (a string "
                         "must write it \\u0000)",
                         (size_t)(nul - text), len);
    goto fail;
  }
  survey(root, &big, &dups);
  if(big) {
    struct rescan r = {text, end, false};
    if(convert(root, &r)) {
      rc = kcr_errinfo_set(ei, KCR_ENOMEM, "out of memory reading JSON integers");
      goto fail;
    }
  }
  if(has_nul_escape(text, (size_t)(end - text))) {
    struct strscan r = {text, text, end};
    if((rc = fix_nul(root, false, &r, ei))) {
      if(rc == KCR_ENOMEM)
        kcr_errinfo_set(ei, rc, "out of memory reading JSON strings");
      goto fail;
    }
  }
  if(dups && dedup(root)) {
    rc = kcr_errinfo_set(ei, KCR_ENOMEM, "out of memory reading JSON members");
    goto fail;
  }
  *out = root;
  return KCR_OK;
fail:
  wipe_strings(root);
  cJSON_Delete(root);
  return rc;
}

/* ---- printing ----
 *
 * The text cJSON_PrintUnformatted makes, byte for byte (the unit test
 * compares the two on generated trees), made faster: runs of plain string
 * bytes are copied at once, and an integer below 10^15 - every number in
 * a Kubernetes object but for the rare fraction - is written directly,
 * where cJSON formats each number with "%1.15g" and reads it back with
 * sscanf to see whether 17 digits are needed. What that can print
 * differently (fractions, 10^15 and up, NaN and infinities) still goes
 * cJSON's way. */

/* Room for n more bytes at the end of b (NULL: out of memory, b's error
 * set); the caller writes them and sets b->len with done(). */
static char *room(struct kcr_buf *b, size_t n)
{
  return kcr_buf_reserve(b, n) ? NULL : b->ptr + b->len;
}

static void done(struct kcr_buf *b, char *end)
{
  b->len = (size_t)(end - b->ptr);
  b->ptr[b->len] = '\0';
}

static void put_byte(struct kcr_buf *b, char c)
{
  char *o = room(b, 1);
  if(o) {
    *o++ = c;
    done(b, o);
  }
}

static void put_chars(struct kcr_buf *b, const char *s, size_t n);

static void put_string(struct kcr_buf *b, const char *s)
{
  const char *text = s ? s : "";
  const unsigned char *run = (const unsigned char *)text;
  size_t n;
  char *o;

  /* Nearly every string has nothing to escape: found in one pass (no
   * strlen first), copied at once, with room for just it. */
  while(*run >= 32 && *run != '"' && *run != '\\')
    run++;
  if(!*run) {
    n = (size_t)((const char *)run - text);
    if(!(o = room(b, n + 2)))
      return;
    *o++ = '"';
    memcpy(o, text, n);
    o += n;
    *o++ = '"';
    done(b, o);
    return;
  }
  put_chars(b, s, strlen(s));
}

/* s[0..n) as a JSON string, every byte that needs it escaped. */
static void put_chars(struct kcr_buf *b, const char *s, size_t n)
{
  static const char hex[] = "0123456789abcdef";
  char *o = n < SIZE_MAX / 8 ? room(b, 6 * n + 2) : room(b, SIZE_MAX); /* at most */

  if(!o)
    return;
  *o++ = '"';
  for(const unsigned char *p = (const unsigned char *)s; n--; p++) {
    if(*p >= 32 && *p != '"' && *p != '\\') {
      *o++ = (char)*p;
      continue;
    }
    *o++ = '\\';
    switch(*p) {
    case '"': *o++ = '"'; break;
    case '\\': *o++ = '\\'; break;
    case '\b': *o++ = 'b'; break;
    case '\f': *o++ = 'f'; break;
    case '\n': *o++ = 'n'; break;
    case '\r': *o++ = 'r'; break;
    case '\t': *o++ = 't'; break;
    default:
      memcpy(o, "u00", 3);
      o[3] = hex[*p >> 4];
      o[4] = hex[*p & 15];
      o += 5;
      break;
    }
  }
  *o++ = '"';
  done(b, o);
}

void kcr__json_put_string(struct kcr_buf *out, const char *s) { put_string(out, s); }

void kcr__json_put_strn(struct kcr_buf *out, const char *s, size_t n)
{
  const char *p = s, *end = s + n;

  while(p < end && (unsigned char)*p >= 32 && *p != '"' && *p != '\\')
    p++;
  if(p < end) {
    put_chars(out, s, n);
    return;
  }
  char *o = room(out, n + 2);
  if(o) {
    *o++ = '"';
    if(n)
      memcpy(o, s, n);
    o += n;
    *o++ = '"';
    done(out, o);
  }
}

static void put_number(struct kcr_buf *b, double d);

void kcr__json_put_number(struct kcr_buf *out, double d) { put_number(out, d); }

void kcr__json_put_int(struct kcr_buf *out, int64_t v)
{
  char text[24], *p = text + sizeof(text);
  uint64_t m = v < 0 ? 0ull - (uint64_t)v : (uint64_t)v;

  do
    *--p = (char)('0' + m % 10);
  while(m /= 10);
  if(v < 0)
    *--p = '-';
  kcr_buf_append(out, p, (size_t)(text + sizeof(text) - p));
}

/* cJSON's check that a printed double reads back as itself. */
static bool same_double(double a, double b)
{
  double max = fabs(a) > fabs(b) ? fabs(a) : fabs(b);
  return fabs(a - b) <= max * DBL_EPSILON;
}

static void put_number(struct kcr_buf *b, double d)
{
  char text[32], *p = text + sizeof(text);
  struct lconv *lc;
  double back = 0;
  int n;

  if(d == 0) { /* "%1.15g" keeps the sign of -0 */
    kcr_buf_puts(b, signbit(d) ? "-0" : "0");
    return;
  }
  if(fabs(d) < EXACT_MIN && d == trunc(d)) { /* "%1.15g" gives the digits */
    long long v = (long long)d;
    unsigned long long m = v < 0 ? 0ull - (unsigned long long)v : (unsigned long long)v;
    do
      *--p = (char)('0' + m % 10);
    while(m /= 10);
    if(v < 0)
      *--p = '-';
    kcr_buf_append(b, p, (size_t)(text + sizeof(text) - p));
    return;
  }
  if(isnan(d) || isinf(d)) {
    kcr_buf_puts(b, "null");
    return;
  }
  n = snprintf(text, sizeof(text), "%1.15g", d);
  if(sscanf(text, "%lg", &back) != 1 || !same_double(back, d))
    n = snprintf(text, sizeof(text), "%1.17g", d);
  lc = localeconv();
  for(int i = 0; i < n; i++)
    if(lc && lc->decimal_point && text[i] == lc->decimal_point[0])
      text[i] = '.';
  kcr_buf_append(b, text, (size_t)n);
}

static kcr_err put_value(struct kcr_buf *b, const cJSON *it)
{
  const cJSON *c;
  bool object = false;

  switch(it->type & 0xFF) {
  case cJSON_NULL: kcr_buf_puts(b, "null"); return KCR_OK;
  case cJSON_False: kcr_buf_puts(b, "false"); return KCR_OK;
  case cJSON_True: kcr_buf_puts(b, "true"); return KCR_OK;
  case cJSON_Number: put_number(b, it->valuedouble); return KCR_OK;
  case cJSON_String: put_string(b, it->valuestring); return KCR_OK;
  case cJSON_Raw:
    if(!it->valuestring)
      return KCR_EINVAL;
    kcr_buf_puts(b, it->valuestring);
    return KCR_OK;
  case cJSON_Object: object = true; break;
  case cJSON_Array: break;
  default: return KCR_EINVAL;
  }
  put_byte(b, object ? '{' : '[');
  for(c = it->child; c; c = c->next) {
    kcr_err rc;
    if(c != it->child)
      put_byte(b, ',');
    if(object) {
      put_string(b, c->string);
      put_byte(b, ':');
    }
    if((rc = put_value(b, c)))
      return rc;
  }
  put_byte(b, object ? '}' : ']');
  return KCR_OK;
}

kcr_err kcr__json_print(const cJSON *obj, struct kcr_buf *out)
{
  kcr_err rc = obj ? put_value(out, obj) : KCR_EINVAL;
  return rc ? rc : kcr_buf_err(out);
}

char *kcr_json_to_text(const cJSON *obj)
{
  struct kcr_buf b = KCR_BUF_INIT;

  kcr_buf_reserve(&b, 1024); /* a usual object at once, not step by step */
  if(kcr__json_print(obj, &b)) {
    kcr_buf_cleanup(&b);
    return NULL;
  }
  return kcr_buf_take(&b);
}

/* ---- a digest of a tree ---- */

/* The bytes of a tree, gathered in a buffer and hashed a buffer at a time
 * (a node's pieces are a few bytes each). */
struct hsink {
  struct kcr__hasher h;
  size_t n;
  unsigned char b[512];
};

static void hput(struct hsink *k, const void *p, size_t n)
{
  if(n > sizeof(k->b) - k->n) {
    kcr__hash_add(&k->h, k->b, k->n);
    k->n = 0;
    if(n > sizeof(k->b)) {
      kcr__hash_add(&k->h, p, n);
      return;
    }
  }
  memcpy(k->b + k->n, p, n);
  k->n += n;
}

/* Each node adds its kind, then (in an object) its name and (a string, a
 * Raw) its text, each ended by its NUL, (a number) its double's bytes, (a
 * container) its children and an end mark: no two different trees give the
 * same byte sequence. */
static void hash_node(struct hsink *k, const cJSON *v, bool named)
{
  unsigned char kind = (unsigned char)(v->type & 0xFF);
  const char *s = NULL;

  hput(k, &kind, 1);
  if(named)
    hput(k, v->string ? v->string : "", v->string ? strlen(v->string) + 1 : 1);
  switch(kind) {
  case cJSON_Number: hput(k, &v->valuedouble, sizeof(v->valuedouble)); break;
  case cJSON_String:
  case cJSON_Raw:
    s = v->valuestring ? v->valuestring : "";
    hput(k, s, strlen(s) + 1);
    break;
  case cJSON_Object:
  case cJSON_Array:
    for(const cJSON *c = v->child; c; c = c->next)
      hash_node(k, c, kind == cJSON_Object);
    hput(k, "\xff", 1); /* no kind is 0xff */
    break;
  default: break;
  }
}

uint64_t kcr_json_hash(const cJSON *obj)
{
  static const cJSON null = {.type = cJSON_NULL};
  struct hsink k;

  k.n = 0;
  kcr__hash_begin(&k.h);
  hash_node(&k, obj ? obj : &null, false);
  kcr__hash_add(&k.h, k.b, k.n);
  return kcr__hash_end(&k.h);
}
