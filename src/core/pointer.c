/* DESIGN: JSON Pointer (RFC 6901), the one path syntax of libkcr. Every
 * path the library takes - kcr_json_at and its kin, an informer's keep
 * list, kcr_obj_spans, and the walkers of JSON text inside the library - is
 * a pointer: "" for the value itself, else one "/token" per step, where a
 * token is a member name with '~' written "~0" and '/' written "~1"
 * ("/metadata/labels/app.kubernetes.io~1name"). What a token means on an
 * array (an index, or each element) is each reader's to say.
 *
 * Tokens are read in place: kcr__ptr_tok_eq compares an escaped token with
 * a name decoding as it goes, kcr__ptr_tok_decode copies one out, so a
 * lookup allocates nothing.
 *
 * Invariants: a valid pointer is "" or starts with '/', and every '~' in
 * it is followed by '0' or '1'; a token runs from after its '/' to the next
 * '/' or the end, and may be empty ("/" names the member ""). */
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "core/json-int.h"
#include "kcr/json.h"

const char *kcr__ptr_bad(const char *ptr)
{
  if(!ptr)
    return "is missing";
  if(*ptr && *ptr != '/')
    return "does not start with '/' (paths are JSON Pointers, RFC 6901: "
           "\"/status/conditions\", not \"status.conditions\")";
  for(const char *p = ptr; (p = strchr(p, '~')); p += 2)
    if(p[1] != '0' && p[1] != '1')
      return "has a '~' not followed by '0' or '1' (write '~' as \"~0\" and '/' as "
             "\"~1\")";
  return NULL;
}

size_t kcr__ptr_toklen(const char *tok) { return strcspn(tok, "/"); }

bool kcr__ptr_tok_eq(const char *tok, size_t tn, const char *name, size_t n)
{
  size_t i = 0, j = 0;

  /* Unescaped is never longer: equal lengths mean no escape, a match the
   * same bytes (those of a token with '~' differ from its name). */
  if(n >= tn)
    return n == tn && !memcmp(tok, name, n) && !memchr(tok, '~', tn);
  if(!memchr(tok, '~', tn))
    return false;
  while(i < tn && j < n) {
    char c = tok[i++];
    if(c == '~' && i < tn)
      c = tok[i++] == '0' ? '~' : '/';
    if(c != name[j++])
      return false;
  }
  return i == tn && j == n;
}

size_t kcr__ptr_tok_decode(const char *tok, size_t tn, char *out)
{
  size_t j = 0;

  for(size_t i = 0; i < tn; i++) {
    char c = tok[i];
    if(c == '~' && i + 1 < tn)
      c = tok[++i] == '0' ? '~' : '/';
    out[j++] = c;
  }
  return j;
}

bool kcr__ptr_tok_index(const char *tok, size_t tn, size_t *idx)
{
  size_t v = 0;

  if(!tn || tn > 18 || (tn > 1 && tok[0] == '0')) /* "0" or [1-9][0-9]* */
    return false;
  for(size_t i = 0; i < tn; i++) {
    if(tok[i] < '0' || tok[i] > '9')
      return false;
    v = v * 10 + (size_t)(tok[i] - '0');
  }
  *idx = v;
  return true;
}

kcr_err kcr_json_ptr_append(struct kcr_buf *out, const char *name)
{
  if(!out || !name)
    return KCR_EINVAL;
  kcr_buf_append(out, "/", 1);
  for(const char *p = name; *p;) {
    size_t run = strcspn(p, "~/");
    kcr_buf_append(out, p, run);
    p += run;
    if(*p)
      kcr_buf_append(out, *p++ == '~' ? "~0" : "~1", 2);
  }
  return kcr_buf_err(out);
}
