/* kcr/jsontext.h - reading and writing JSON text without a tree.
 *
 * kcr/json.h builds cJSON trees; this header reads values straight out of
 * the text (a cached object's, kcr_obj_json) and writes text straight into
 * a kcr_buf, which is how typed objects (kcr/typed.h) decode and encode.
 *
 * Reading. A struct kcr_jv is one value's text, borrowed from a text the
 * caller keeps. Check a whole text once with kcr_json_check; from then on
 * kcr_jiter walks the members of an object or the elements of an array by
 * the text's structure alone (a few instructions per byte, nothing
 * allocated), and kcr_jv_string, kcr_jv_int, kcr_jv_number, kcr_jv_bool
 * read single values. Given text kcr_json_check did not accept, every
 * function here still stays inside the text and fails or finds nothing;
 * what it finds may then be wrong.
 *
 * Strings are struct kcr_str: bytes and a length, not a C string. A string
 * read from JSON text is BORROWED from that text when it has no escape
 * (then s points into the text and is not NUL-terminated), and UNESCAPED
 * into the arena the caller passes when it has one ("caf\u00e9" and "a\nb"
 * are written there as the bytes they stand for, NUL-terminated); it then
 * lives until that arena is reset or cleaned up. \u0000 is a byte like any
 * other in a kcr_str: n counts it. Print one with
 *   printf("%.*s", KCR_STR_ARG(x));
 *
 * Writing. kcr_json_put_* append one JSON value to a kcr_buf and keep to
 * its error rule (kcr/buf.h): check kcr_buf_err once at the end.
 *
 * Thread safety: pure functions over the caller's memory; an arena or a
 * buffer is used by one thread at a time. */
#ifndef KCR_JSONTEXT_H
#define KCR_JSONTEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "api.h"
#include "arena.h"
#include "buf.h"
#include "err.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A string: n bytes at s (not NUL-terminated unless said). s NULL, n 0:
 * no string at all (in a typed object: the member is absent). */
struct kcr_str {
  const char *s;
  size_t n;
};

/* printf("%.*s", KCR_STR_ARG(x)) */
#define KCR_STR_ARG(x) (int)(x).n, (x).s

/* A kcr_str of the C string c (borrowed; NULL gives no string). */
static inline struct kcr_str kcr_str_c(const char *c)
{
  struct kcr_str r;
  r.s = c;
  r.n = c ? strlen(c) : 0;
  return r;
}

/* True when x holds exactly the bytes of the C string c (NULL c: when x is
 * no string). */
static inline bool kcr_str_eq(struct kcr_str x, const char *c)
{
  if(!c)
    return !x.s;
  return x.s && x.n == strlen(c) && !memcmp(x.s, c, x.n);
}

/* True when a and b hold the same bytes (two absent strings are equal). */
static inline bool kcr_str_same(struct kcr_str a, struct kcr_str b)
{
  if(!a.s || !b.s)
    return !a.s && !b.s;
  return a.n == b.n && (!a.n || !memcmp(a.s, b.s, a.n));
}

/* The index of the key that holds exactly the C string c among keys[0..n)
 * (the last one if several do), or n when none does: a typed map's value
 * by its key, as in
 *   size_t i = kcr_str_index(cm.data.k, cm.data.n, "greeting");
 *   if(i < cm.data.n) use(cm.data.v[i]);
 * keys may be NULL when n is 0. */
static inline size_t kcr_str_index(const struct kcr_str *keys, size_t n, const char *c)
{
  for(size_t i = n; i-- > 0;)
    if(kcr_str_eq(keys[i], c))
      return i;
  return n;
}

/* *out = a NUL-terminated copy of x owned by the caller (free), "" for no
 * string. Errors: KCR_EINVAL (out NULL, or x holds a NUL byte: no C string
 * can hold it), KCR_ENOMEM; *out is then NULL. */
KCR_API kcr_err kcr_str_dup(struct kcr_str x, char **out);
/* One JSON value's text, borrowed: a string with its quotes, an object
 * with its braces. */
struct kcr_jv {
  const char *at;
  size_t n;
};

enum kcr_jtype {
  KCR_JT_NONE = 0, /* no value (n 0), or text that starts no value */
  KCR_JT_NULL,
  KCR_JT_BOOL,
  KCR_JT_NUMBER,
  KCR_JT_STRING,
  KCR_JT_OBJECT,
  KCR_JT_ARRAY
};

/* The type of v, by its first byte. Pure. */
KCR_API enum kcr_jtype kcr_jv_type(struct kcr_jv v);

/* Checks that text[0..len) begins with one well-formed JSON value (RFC
 * 8259: what kcr_json_parse takes, nesting at most 1000 deep, no raw
 * control byte in a string, surrogates paired), white space before it
 * allowed, and gives it in *v (the value without the white space; text after it
 * is not looked at). Allocates nothing.
 * Errors: KCR_EINVAL (text or v NULL), KCR_EPARSE (not well formed; *v
 * then has n 0). */
KCR_API kcr_err kcr_json_check(const char *text, size_t len, struct kcr_jv *v);

/* Walks an object's members or an array's elements. Fields are private. */
struct kcr_jiter {
  const char *p, *end;
  char close;
  bool first;
};

/* Starts it at v, an object or an array. False (and every next returns -1)
 * when v is neither. Pure. */
KCR_API bool kcr_jiter_init(struct kcr_jiter *it, struct kcr_jv v);
/* The next member (*name the member's name, a string with its quotes;
 * name may be NULL, and for an array's element it is given n 0) and its
 * value *val. Returns 1; 0 after the last; -1 when the structure breaks
 * (text not checked) or nests deeper than 128 levels inside a value.
 * Every member is handed out, duplicates included: Go's decoder and
 * kcr_json_parse let the last of a name count. Pure. */
KCR_API int kcr_jiter_next(struct kcr_jiter *it, struct kcr_jv *name, struct kcr_jv *val);

/* True when the string v (with its quotes, escapes as written) stands for
 * exactly the n bytes at s. Allocates nothing. Pure. */
KCR_API bool kcr_jv_str_is(struct kcr_jv v, const char *s, size_t n);

/* Flags of kcr_jv_string. */
#define KCR_JV_COPY 1u /* always into the arena, NUL-terminated */

/* Reads the string v into *out: borrowed from v's text when it has no
 * escape, else unescaped into arena a (see above; a lone surrogate becomes
 * U+FFFD, as Go decodes it). With KCR_JV_COPY the bytes always go to a,
 * NUL-terminated, so *out outlives the text.
 * Errors: KCR_EPARSE (v is no string, or a malformed one), KCR_EINVAL (a
 * NULL where arena is needed), KCR_ENOMEM; *out is then no string. */
KCR_API kcr_err kcr_jv_string(struct kcr_jv v, struct kcr_arena *a, unsigned flags,
                              struct kcr_str *out);
/* Reads the integer literal v exactly (as kcr_json_get_int: "1.0" and
 * "1e3" are no integer literal). Errors: KCR_EPARSE (not an integer
 * literal), KCR_ERANGE (outside int64). */
KCR_API kcr_err kcr_jv_int(struct kcr_jv v, int64_t *out);
/* Reads the number v (any JSON number) as the nearest double, whatever
 * the locale. Errors: KCR_EPARSE (no number), KCR_ERANGE (beyond double). */
KCR_API kcr_err kcr_jv_number(struct kcr_jv v, double *out);
/* Reads true or false. Errors: KCR_EPARSE. */
KCR_API kcr_err kcr_jv_bool(struct kcr_jv v, bool *out);

/* Appends x as a JSON string, escaped as kcr_json_to_text writes strings
 * (no string, s NULL, writes ""). Errors: KCR_ENOMEM (kcr_buf_append's). */
KCR_API kcr_err kcr_json_put_str(struct kcr_buf *out, struct kcr_str x);
/* Appends v in decimal, as Go writes an int64. Errors: KCR_ENOMEM
 * (kcr_buf_append's). */
KCR_API kcr_err kcr_json_put_int(struct kcr_buf *out, int64_t v);
/* Appends d as kcr_json_to_text writes a number (the fewest digits, 15 or
 * 17, that read back as d; "1" for 1.0). Errors: KCR_EINVAL for NaN and
 * the infinities (JSON has none: nothing is appended), kcr_buf_append's. */
KCR_API kcr_err kcr_json_put_number(struct kcr_buf *out, double d);

#ifdef __cplusplus
}
#endif

#endif
