/* DESIGN: status conditions (metav1.Condition) as cJSON, bit for bit with
 * apimachinery pkg/api/meta/conditions.go and the validation of
 * pkg/apis/meta/v1/validation (ValidateCondition[s], IsQualifiedName).
 *
 * Why cJSON and not a C array of structs: the conditions live inside an object
 * we read from the API and write back (update, patch, apply). Working on the
 * served array keeps members we do not know about and the order of the list,
 * and saves a decode/encode round trip. struct kcr_cond is only the input and a
 * borrowed view.
 *
 * Invariants:
 *  - kcr_cond_set is all-or-nothing: it validates first, builds the updated
 *    item as a private copy, and commits by swapping the children of the
 *    existing item with the copy's (no allocation after that point). So on
 *    ENOMEM or EINVALID the array is untouched, and a pointer from
 *    kcr_cond_find stays valid across a set.
 *  - Lookups match the first item whose "type" is a string equal to the key;
 *    anything else in the array is skipped, never modified.
 *  - Go zero values: an absent or null member reads as "" / 0, exactly as Go
 *    decodes it into metav1.Condition. A member of the wrong JSON type never
 *    compares equal, so set overwrites it.
 *  - observedGeneration is an int64, read and written exactly through
 *    kcr_json_get_int / kcr_json_create_int (a served value of 10^15 or more
 *    is a Raw node when the tree came from kcr_json_parse), never through a
 *    double: cJSON would print 10^15 as "1e+15", which Go refuses.
 *  - lastTransitionTime is read with kcr_time_parse, which accepts exactly
 *    what metav1.Time does (Go's time.Parse(time.RFC3339)). Validating a
 *    served array also requires the two-digit hour of the CRD schema's
 *    date-time format (kube-openapi strfmt.IsDateTime), the one form Go
 *    takes that the schema refuses.
 *  - Strings are C strings. A JSON string holding \u0000 is not read as one
 *    (kcr_json_parse keeps it as a Raw node, see kcr/json.h): a type,
 *    status or reason holding it is refused, as apimachinery's patterns
 *    and enum refuse it, and so is a message, which apimachinery and the
 *    CRD schema would take (free text, maxLength only) but which a C string
 *    would cut short. Read, such a member has the wrong JSON type; in a
 *    served array, validation names it. Of members of the same name the
 *    last counts (kcr_json_parse keeps only it), as in Go's decoder.
 *  - Validation reports the first broken rule (upstream collects all) in the
 *    upstream order: duplicate, type, status, observedGeneration,
 *    lastTransitionTime, reason, message. Where ValidateCondition and the
 *    controller-gen CRD schema for metav1.Condition differ, the stricter rule
 *    wins (type <= 316 in all, message required as a key, lengths in bytes),
 *    so nothing accepted here is refused by either kind of apiserver path. */
#include <stdio.h>
#include <string.h>

#include "cond-int.h"
#include "core/assert-int.h"
#include "core/json-int.h"
#include "kcr/cond.h"
#include "kcr/json.h"
#include "kcr/time.h"

#define PREFIX_MAX 253              /* DNS1123SubdomainMaxLength */
#define NAME_MAX_  63               /* qualified name part */
#define QUOTE_MAX  48               /* bytes of a value shown in a message */
#define LTT_ZERO   (-62135596800LL) /* 0001-01-01T00:00:00Z, Go's zero time */
#define LTT_LAST   253402300799LL   /* 9999-12-31T23:59:59Z */

#define REASON_RE    "^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$"
#define SUBDOMAIN_RE "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
#define NAME_RE      "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"

static const char *nz(const char *s) { return s ? s : ""; }

/* ---- character classes (ASCII only, as Go's regexp classes) ---- */

static bool is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

static bool is_digit(char c) { return c >= '0' && c <= '9'; }

static bool is_alnum(char c) { return is_alpha(c) || is_digit(c); }

static bool is_lower_alnum(char c) { return (c >= 'a' && c <= 'z') || is_digit(c); }

/* ^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$ */
static bool reason_ok(const char *s, size_t n)
{
  if(n == 0 || !is_alpha(s[0]))
    return false;
  for(size_t i = 1; i < n; i++) {
    char c = s[i];
    bool last = i == n - 1;
    if(!(is_alnum(c) || c == '_' || (!last && (c == ',' || c == ':'))))
      return false;
  }
  return true;
}

/* DNS-1123 subdomain: labels [a-z0-9]([-a-z0-9]*[a-z0-9])? joined by '.'.
 * Like upstream, no per-label length limit; only the whole is capped. */
static bool subdomain_ok(const char *s, size_t n)
{
  size_t start = 0;
  for(size_t i = 0; i <= n; i++) {
    if(i < n && s[i] != '.') {
      if(!is_lower_alnum(s[i]) && s[i] != '-')
        return false;
      continue;
    }
    if(i == start || !is_lower_alnum(s[start]) || !is_lower_alnum(s[i - 1]))
      return false;
    start = i + 1;
  }
  return true;
}

/* ([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9] */
static bool name_ok(const char *s, size_t n)
{
  if(n == 0 || !is_alnum(s[0]) || !is_alnum(s[n - 1]))
    return false;
  for(size_t i = 1; i + 1 < n; i++) {
    if(!is_alnum(s[i]) && s[i] != '-' && s[i] != '_' && s[i] != '.')
      return false;
  }
  return true;
}

/* ---- messages ---- */

/* Writes s quoted for a message: '"' and '\' escaped, control bytes as \xNN,
 * cut after QUOTE_MAX bytes with "...". */
static const char *quote(char out[QUOTE_MAX * 4 + 8], const char *s)
{
  size_t o = 0, i;
  out[o++] = '"';
  for(i = 0; s[i] && i < QUOTE_MAX; i++) {
    unsigned char c = (unsigned char)s[i];
    if(c == '"' || c == '\\') {
      out[o++] = '\\';
      out[o++] = (char)c;
    } else if(c < 0x20 || c == 0x7f) {
      snprintf(out + o, 5, "\\x%02x", c);
      o += 4;
    } else {
      out[o++] = (char)c;
    }
  }
  if(s[i]) {
    memcpy(out + o, "...", 3);
    o += 3;
  }
  out[o++] = '"';
  KCR_ASSERT(o < QUOTE_MAX * 4 + 8);
  out[o] = '\0';
  return out;
}

#define QBUF(name) char name[QUOTE_MAX * 4 + 8]

/* ---- validation of one condition ---- */

static kcr_err check_type(const char *pfx, const char *type, struct kcr_errinfo *ei)
{
  QBUF(qt);
  QBUF(qp);
  const char *slash = strchr(type, '/');
  const char *name = slash ? slash + 1 : type;
  size_t len = strlen(type), nlen = strlen(name),
         plen = slash ? (size_t)(slash - type) : 0;

  if(len == 0)
    return kcr_errinfo_set(ei, KCR_EINVALID,
                           "%scondition type is required: a CamelCase name such as "
                           "\"Ready\", optionally prefixed by a DNS subdomain and '/' "
                           "(\"example.com/Ready\")",
                           pfx);
  quote(qt, type);
  if(slash && strchr(name, '/'))
    return kcr_errinfo_set(ei, KCR_EINVALID,
                           "%scondition %s: type must be a qualified name: an optional "
                           "DNS subdomain prefix and '/', then a name (e.g. \"Ready\" or "
                           "\"example.com/Ready\")",
                           pfx, qt);
  if(slash && plen == 0)
    return kcr_errinfo_set(ei, KCR_EINVALID,
                           "%scondition %s: type prefix before '/' must not be empty",
                           pfx, qt);
  if(plen > PREFIX_MAX)
    return kcr_errinfo_set(ei, KCR_EINVALID,
                           "%scondition %s: type prefix must be no more than %d "
                           "characters (has %zu)",
                           pfx, qt, PREFIX_MAX, plen);
  if(slash) {
    char prefix[PREFIX_MAX + 1];
    memcpy(prefix, type, plen);
    prefix[plen] = '\0';
    if(!subdomain_ok(prefix, plen))
      return kcr_errinfo_set(
          ei, KCR_EINVALID,
          "%scondition %s: type prefix %s must be a lowercase RFC 1123 "
          "subdomain matching " SUBDOMAIN_RE " (e.g. \"example.com\")",
          pfx, qt, quote(qp, prefix));
  }
  if(nlen == 0)
    return kcr_errinfo_set(ei, KCR_EINVALID,
                           "%scondition %s: type name after '/' must not be empty", pfx,
                           qt);
  if(nlen > NAME_MAX_)
    return kcr_errinfo_set(ei, KCR_EINVALID,
                           "%scondition %s: type name must be no more than %d characters "
                           "(has %zu)",
                           pfx, qt, NAME_MAX_, nlen);
  if(!name_ok(name, nlen))
    return kcr_errinfo_set(
        ei, KCR_EINVALID,
        "%scondition %s: type name %s must match " NAME_RE
        " (alphanumerics, '-', '_' or '.', starting and ending with an "
        "alphanumeric; CamelCase such as \"Ready\" by convention)",
        pfx, qt, quote(qp, name));
  if(len > KCR_COND_TYPE_MAX)
    return kcr_errinfo_set(ei, KCR_EINVALID,
                           "%scondition %s: type must be no more than %d characters (has "
                           "%zu; the CRD schema's maxLength for metav1.Condition)",
                           pfx, qt, KCR_COND_TYPE_MAX, len);
  return KCR_OK;
}

/* type, status, observedGeneration: the part of ValidateCondition before
 * lastTransitionTime. */
static kcr_err check_head(const char *pfx, const struct kcr_cond *c,
                          struct kcr_errinfo *ei)
{
  QBUF(qt);
  QBUF(qs);
  const char *status = nz(c->status);
  kcr_err rc = check_type(pfx, nz(c->type), ei);

  if(rc)
    return rc;
  quote(qt, nz(c->type));
  if(!*status)
    return kcr_errinfo_set(ei, KCR_EINVALID,
                           "%scondition %s: status is required: one of \"True\", "
                           "\"False\", \"Unknown\"",
                           pfx, qt);
  if(strcmp(status, KCR_COND_TRUE) && strcmp(status, KCR_COND_FALSE) &&
     strcmp(status, KCR_COND_UNKNOWN))
    return kcr_errinfo_set(
        ei, KCR_EINVALID,
        "%scondition %s: status %s must be one of \"True\", \"False\", "
        "\"Unknown\" (case matters)",
        pfx, qt, quote(qs, status));
  if(c->observed_generation < 0)
    return kcr_errinfo_set(ei, KCR_EINVALID,
                           "%scondition %s: observedGeneration %lld must be greater than "
                           "or equal to zero",
                           pfx, qt, (long long)c->observed_generation);
  return KCR_OK;
}

/* reason, message: the part of ValidateCondition after lastTransitionTime. */
static kcr_err check_tail(const char *pfx, const struct kcr_cond *c,
                          struct kcr_errinfo *ei)
{
  QBUF(qt);
  QBUF(qr);
  const char *reason = nz(c->reason);
  size_t rlen = strlen(reason), mlen = strlen(nz(c->message));

  quote(qt, nz(c->type));
  if(rlen == 0)
    return kcr_errinfo_set(
        ei, KCR_EINVALID,
        "%scondition %s: reason is required: one CamelCase word such "
        "as \"Progressing\" (an empty reason makes the apiserver refuse "
        "the whole status write)",
        pfx, qt);
  if(!reason_ok(reason, rlen))
    return kcr_errinfo_set(ei, KCR_EINVALID,
                           "%scondition %s: reason %s must match " REASON_RE
                           " (one CamelCase word such as \"Progressing\")",
                           pfx, qt, quote(qr, reason));
  if(rlen > KCR_COND_REASON_MAX)
    return kcr_errinfo_set(
        ei, KCR_EINVALID,
        "%scondition %s: reason must be no more than %d bytes (has %zu)", pfx, qt,
        KCR_COND_REASON_MAX, rlen);
  if(mlen > KCR_COND_MESSAGE_MAX)
    return kcr_errinfo_set(ei, KCR_EINVALID,
                           "%scondition %s: message must be no more than %d bytes (has "
                           "%zu)",
                           pfx, qt, KCR_COND_MESSAGE_MAX, mlen);
  return KCR_OK;
}

kcr_err kcr_cond_validate(const struct kcr_cond *c, struct kcr_errinfo *ei)
{
  QBUF(qt);
  int64_t t;
  kcr_err rc;

  if(!c)
    return kcr_errinfo_set(ei, KCR_EINVAL, "kcr_cond_validate: no condition");
  rc = check_head("", c, ei);
  if(rc)
    return rc;
  t = (int64_t)c->last_transition_time;
  if(t != 0 && (t <= LTT_ZERO || t > LTT_LAST))
    return kcr_errinfo_set(ei, KCR_EINVALID,
                           "condition %s: lastTransitionTime %lld is outside "
                           "0001-01-01T00:00:01Z..9999-12-31T23:59:59Z",
                           quote(qt, nz(c->type)), (long long)t);
  return check_tail("", c, ei);
}

/* ---- reading items ---- */

static const char *item_type(const cJSON *item)
{
  const cJSON *t = cJSON_GetObjectItemCaseSensitive(item, "type");
  return cJSON_IsString(t) && t->valuestring ? t->valuestring : NULL;
}

/* A string member as Go decodes it: absent/null -> "", *ok false when the
 * member has another JSON type. */
static const char *member_str(const cJSON *o, const char *key, bool *ok)
{
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
  *ok = true;
  if(!v || cJSON_IsNull(v))
    return "";
  if(cJSON_IsString(v) && v->valuestring)
    return v->valuestring;
  *ok = false;
  return "";
}

/* An int64 member, exactly: absent/null -> 0; *ok false if not an integer
 * within int64. */
static int64_t member_int(const cJSON *o, const char *key, bool *ok)
{
  int64_t v = 0;
  kcr_err rc = kcr_json_get_int(cJSON_GetObjectItemCaseSensitive(o, key), &v);
  *ok = rc == KCR_OK || rc == KCR_ENOTFOUND;
  return rc == KCR_OK ? v : 0;
}

/* True when member key of o holds exactly want (absent/null == ""). */
static bool member_is(const cJSON *o, const char *key, const char *want)
{
  bool ok;
  const char *have = member_str(o, key, &ok);
  return ok && !strcmp(have, want);
}

cJSON *kcr_cond_find(const cJSON *conds, const char *type)
{
  cJSON *it;
  if(!cJSON_IsArray(conds) || !type)
    return NULL;
  cJSON_ArrayForEach(it, conds)
  {
    const char *t = item_type(it);
    if(t && !strcmp(t, type))
      return it;
  }
  return NULL;
}

kcr_err kcr_cond_from_json(const cJSON *item, struct kcr_cond *out)
{
  bool ok, all = true;
  const cJSON *ltt;

  memset(out, 0, sizeof(*out));
  out->type = out->status = out->reason = out->message = "";
  if(!cJSON_IsObject(item))
    return KCR_EPARSE;
  out->type = member_str(item, "type", &ok);
  all &= ok;
  out->status = member_str(item, "status", &ok);
  all &= ok;
  out->reason = member_str(item, "reason", &ok);
  all &= ok;
  out->message = member_str(item, "message", &ok);
  all &= ok;
  out->observed_generation = member_int(item, "observedGeneration", &ok);
  all &= ok;
  ltt = cJSON_GetObjectItemCaseSensitive(item, "lastTransitionTime");
  if(cJSON_IsString(ltt)) {
    time_t t;
    if(kcr_time_parse(ltt->valuestring, &t) == KCR_OK)
      out->last_transition_time = t;
    else
      all = false;
  } else if(ltt && !cJSON_IsNull(ltt)) {
    all = false;
  }
  return all ? KCR_OK : KCR_EPARSE;
}

kcr_err kcr_cond_get(const cJSON *conds, const char *type, struct kcr_cond *out)
{
  const cJSON *item = kcr_cond_find(conds, type);
  if(!item) {
    memset(out, 0, sizeof(*out));
    out->type = out->status = out->reason = out->message = "";
    return KCR_ENOTFOUND;
  }
  return kcr_cond_from_json(item, out);
}

bool kcr_cond_has_status(const cJSON *conds, const char *type, const char *status)
{
  const cJSON *item = kcr_cond_find(conds, type);
  return item && status && member_is(item, "status", status);
}

bool kcr_cond_is_true(const cJSON *conds, const char *type)
{
  return kcr_cond_has_status(conds, type, KCR_COND_TRUE);
}

bool kcr_cond_is_false(const cJSON *conds, const char *type)
{
  return kcr_cond_has_status(conds, type, KCR_COND_FALSE);
}

bool kcr_cond_is_unknown(const cJSON *conds, const char *type)
{
  return kcr_cond_has_status(conds, type, KCR_COND_UNKNOWN);
}

/* ---- writing items ---- */

/* Sets member key of o to v (consumed), in place if present.
 * Not cJSON_ReplaceItemInObject: up to cJSON 1.7.15 (Debian's) it ignores a
 * failed strdup of the key and inserts a nameless member (fixed upstream by
 * DaveGamble/cJSON#675). The key is copied here first; the pointer swap that
 * follows cannot fail. */
static kcr_err put(cJSON *o, const char *key, cJSON *v)
{
  cJSON *old = cJSON_GetObjectItemCaseSensitive(o, key);
  size_t n = strlen(key) + 1;
  char *name;

  if(!v)
    return KCR_ENOMEM;
  KCR_ASSERT(!v->string && !v->next && !v->prev); /* fresh, in no list */
  if(!old) {
    if(cJSON_AddItemToObject(o, key, v))
      return KCR_OK;
    cJSON_Delete(v);
    return KCR_ENOMEM;
  }
  if(!(name = cJSON_malloc(n))) {
    cJSON_Delete(v);
    return KCR_ENOMEM;
  }
  memcpy(name, key, n);
  v->string = name; /* v is fresh: no previous name to free */
  cJSON_ReplaceItemViaPointer(o, old, v);
  return KCR_OK;
}

static cJSON *time_json(time_t t)
{
  char buf[KCR_RFC3339_LEN];
  kcr_time_format(t, buf);
  return cJSON_CreateString(buf);
}

cJSON *kcr_cond_to_json(const struct kcr_cond *c)
{
  cJSON *o;
  time_t t = c ? c->last_transition_time : 0;

  if(!t || !(o = cJSON_CreateObject()))
    return NULL;
  if(!cJSON_AddStringToObject(o, "type", nz(c->type)) ||
     !cJSON_AddStringToObject(o, "status", nz(c->status)) ||
     (c->observed_generation &&
      !kcr_json_add_int(o, "observedGeneration", c->observed_generation)) ||
     put(o, "lastTransitionTime", time_json(t)) ||
     !cJSON_AddStringToObject(o, "reason", nz(c->reason)) ||
     !cJSON_AddStringToObject(o, "message", nz(c->message))) {
    cJSON_Delete(o);
    return NULL;
  }
  return o;
}

/* Whether update_item would change nothing in item: the comparisons it
 * makes, without a copy. */
static bool item_unchanged(const cJSON *item, const struct kcr_cond *c)
{
  bool ok;
  return member_is(item, "status", nz(c->status)) &&
         member_is(item, "reason", nz(c->reason)) &&
         member_is(item, "message", nz(c->message)) &&
         member_int(item, "observedGeneration", &ok) == c->observed_generation && ok;
}

bool kcr__cond_same_status(const cJSON *item, const struct kcr_cond *c)
{
  return member_is(item, "status", nz(c->status));
}

bool kcr__cond_unchanged(const cJSON *conds, const struct kcr_cond *c)
{
  const cJSON *item = c ? kcr_cond_find(conds, c->type) : NULL;
  return item && item_unchanged(item, c);
}

/* The body of SetStatusCondition for an existing item, applied to upd (a
 * private copy). */
static kcr_err update_item(cJSON *upd, const struct kcr_cond *c, time_t now, bool *ch)
{
  bool ok;
  kcr_err rc;

  if(!member_is(upd, "status", c->status)) {
    if((rc = put(upd, "status", cJSON_CreateString(c->status))) ||
       (rc = put(upd, "lastTransitionTime",
                 time_json(c->last_transition_time ? c->last_transition_time : now))))
      return rc;
    *ch = true;
  }
  if(!member_is(upd, "reason", nz(c->reason))) {
    if((rc = put(upd, "reason", cJSON_CreateString(nz(c->reason)))))
      return rc;
    *ch = true;
  }
  if(!member_is(upd, "message", nz(c->message))) {
    if((rc = put(upd, "message", cJSON_CreateString(nz(c->message)))))
      return rc;
    *ch = true;
  }
  if(member_int(upd, "observedGeneration", &ok) != c->observed_generation || !ok) {
    if(c->observed_generation == 0)
      cJSON_DeleteItemFromObjectCaseSensitive(upd, "observedGeneration"); /* omitempty */
    else if((rc = put(upd, "observedGeneration",
                      kcr_json_create_int(c->observed_generation))))
      return rc;
    *ch = true;
  }
  return KCR_OK;
}

kcr_err kcr_cond_set(cJSON *conds, const struct kcr_cond *c, time_t now, bool *changed,
                     struct kcr_errinfo *ei)
{
  cJSON *old, *upd = NULL, *tmp;
  bool ch = false;
  kcr_err rc;

  if(changed)
    *changed = false;
  if(!cJSON_IsArray(conds) || !c || now == 0)
    return kcr_errinfo_set(ei, KCR_EINVAL,
                           "kcr_cond_set: needs a conditions array, a condition and a "
                           "nonzero now");
  rc = kcr_cond_validate(c, ei);
  if(rc)
    return rc;
  old = kcr_cond_find(conds, c->type);
  if(!old) {
    struct kcr_cond at = *c;
    if(!at.last_transition_time)
      at.last_transition_time = now;
    cJSON *item = kcr_cond_to_json(&at);
    if(!item || !cJSON_AddItemToArray(conds, item)) {
      cJSON_Delete(item);
      rc = KCR_ENOMEM;
      goto out;
    }
    ch = true;
    goto out;
  }
  if(item_unchanged(old, c))
    goto out; /* no copy to make */
  upd = cJSON_Duplicate(old, 1);
  if(!upd) {
    rc = KCR_ENOMEM;
    goto out;
  }
  rc = update_item(upd, c, now, &ch);
  if(rc || !ch)
    goto out;
  /* Commit: old takes the updated members, upd the old ones (freed below). */
  tmp = old->child;
  old->child = upd->child;
  upd->child = tmp;
  /* The item is still the one a lookup of its type finds. */
  KCR_ASSERT(kcr_cond_find(conds, c->type) == old);
out:
  cJSON_Delete(upd);
  if(rc == KCR_ENOMEM)
    kcr_errinfo_set(ei, rc, "kcr_cond_set: out of memory");
  else if(changed)
    *changed = ch;
  return rc;
}

kcr_err kcr_cond_remove(cJSON *conds, const char *type, bool *removed)
{
  cJSON *it, *next;
  bool any = false;

  if(removed)
    *removed = false;
  if(!cJSON_IsArray(conds) || !type)
    return KCR_EINVAL;
  for(it = conds->child; it; it = next) {
    const char *t = item_type(it);
    next = it->next;
    if(t && !strcmp(t, type)) {
      cJSON_Delete(cJSON_DetachItemViaPointer(conds, it));
      any = true;
    }
  }
  if(removed)
    *removed = any;
  return KCR_OK;
}

/* ---- validation of a served array ---- */

/* Why member key of item is not a string: one holding \u0000 (see the
 * DESIGN comment), or another JSON type. */
static const char *not_a_string(const cJSON *item, const char *key)
{
  return kcr__json_nul_string(cJSON_GetObjectItemCaseSensitive(item, key))
             ? "must not hold \\u0000 (conditions are C strings; apimachinery "
               "refuses a NUL in type, status and reason)"
             : "must be a string";
}

/* Reads item i into c, refusing members of the wrong JSON type. */
static kcr_err read_item(const char *pfx, const cJSON *item, struct kcr_cond *c,
                         struct kcr_errinfo *ei)
{
  static const char *const keys[] = {"status", "reason", "message"};
  const char **dst[] = {&c->status, &c->reason, &c->message};
  QBUF(qt);
  bool ok;

  memset(c, 0, sizeof(*c));
  if(!cJSON_IsObject(item))
    return kcr_errinfo_set(ei, KCR_EINVALID, "%smust be an object", pfx);
  c->type = member_str(item, "type", &ok);
  if(!ok)
    return kcr_errinfo_set(ei, KCR_EINVALID, "%stype %s", pfx,
                           not_a_string(item, "type"));
  quote(qt, c->type);
  for(size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++) {
    *dst[k] = member_str(item, keys[k], &ok);
    if(!ok)
      return kcr_errinfo_set(ei, KCR_EINVALID, "%scondition %s: %s %s", pfx, qt, keys[k],
                             not_a_string(item, keys[k]));
  }
  c->observed_generation = member_int(item, "observedGeneration", &ok);
  if(!ok)
    return kcr_errinfo_set(ei, KCR_EINVALID,
                           "%scondition %s: observedGeneration must be an integer", pfx,
                           qt);
  return KCR_OK;
}

/* lastTransitionTime of a served item: required, RFC 3339, not Go's zero
 * (which metav1.Time decodes like null). */
static kcr_err check_ltt(const char *pfx, const cJSON *item, const char *type,
                         struct kcr_errinfo *ei)
{
  QBUF(qt);
  QBUF(qv);
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(item, "lastTransitionTime");
  time_t t = 0;
  kcr_err prc = KCR_OK;

  quote(qt, type);
  if(v && !cJSON_IsNull(v) && !cJSON_IsString(v))
    return kcr_errinfo_set(
        ei, KCR_EINVALID, "%scondition %s: lastTransitionTime must be an RFC 3339 string",
        pfx, qt);
  if(cJSON_IsString(v)) {
    prc = kcr_time_parse(v->valuestring, &t);
    /* The CRD schema's date-time wants "THH:"; Go also takes "TH:". */
    if(prc == KCR_OK && v->valuestring[12] == ':')
      prc = KCR_EPARSE;
  }
  if(!cJSON_IsString(v) || (prc == KCR_OK && (int64_t)t == LTT_ZERO))
    return kcr_errinfo_set(ei, KCR_EINVALID,
                           "%scondition %s: lastTransitionTime is required (RFC 3339, "
                           "e.g. \"2026-11-29T10:00:00Z\")",
                           pfx, qt);
  if(prc != KCR_OK)
    return kcr_errinfo_set(
        ei, KCR_EINVALID,
        "%scondition %s: lastTransitionTime %s is not an RFC 3339 time "
        "(e.g. \"2026-11-29T10:00:00Z\")",
        pfx, qt, quote(qv, v->valuestring));
  return KCR_OK;
}

kcr_err kcr_cond_validate_json(const cJSON *conds, struct kcr_errinfo *ei)
{
  const cJSON *it;
  int i = 0;

  if(!conds)
    return KCR_OK;
  if(!cJSON_IsArray(conds))
    return kcr_errinfo_set(ei, KCR_EINVAL, "conditions must be an array");
  cJSON_ArrayForEach(it, conds)
  {
    char pfx[32];
    QBUF(qt);
    struct kcr_cond c;
    kcr_err rc;

    snprintf(pfx, sizeof(pfx), "conditions[%d]: ", i);
    if((rc = read_item(pfx, it, &c, ei)))
      return rc;
    /* Duplicate first, as ValidateConditions reports it before the item. */
    int j = 0;
    for(const cJSON *prev = conds->child; prev != it; prev = prev->next, j++) {
      const char *pt = item_type(prev);
      if(!strcmp(pt ? pt : "", c.type))
        return kcr_errinfo_set(ei, KCR_EINVALID,
                               "%scondition %s: duplicate type (first at conditions[%d])",
                               pfx, quote(qt, c.type), j);
    }
    if((rc = check_head(pfx, &c, ei)) || (rc = check_ltt(pfx, it, c.type, ei)) ||
       (rc = check_tail(pfx, &c, ei)))
      return rc;
    if(!cJSON_GetObjectItemCaseSensitive(it, "message") ||
       cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(it, "message")))
      return kcr_errinfo_set(ei, KCR_EINVALID,
                             "%scondition %s: message is required (it may be \"\")", pfx,
                             quote(qt, c.type));
    i++;
  }
  return KCR_OK;
}

/* ---- semantic equality ---- */

bool kcr_cond_equal_ignoring_time(const struct kcr_cond *a, const struct kcr_cond *b)
{
  return !strcmp(nz(a->type), nz(b->type)) && !strcmp(nz(a->status), nz(b->status)) &&
         !strcmp(nz(a->reason), nz(b->reason)) &&
         !strcmp(nz(a->message), nz(b->message)) &&
         a->observed_generation == b->observed_generation;
}

/* Every typed item of a has an equal first match in b. */
static bool covered_by(const cJSON *a, const cJSON *b)
{
  const cJSON *it;
  cJSON_ArrayForEach(it, a)
  {
    const char *t = item_type(it);
    const cJSON *other;
    struct kcr_cond x, y;
    if(!t)
      continue;
    if(!(other = kcr_cond_find(b, t)))
      return false;
    if(kcr_cond_from_json(it, &x) != kcr_cond_from_json(other, &y) ||
       !kcr_cond_equal_ignoring_time(&x, &y))
      return false;
  }
  return true;
}

bool kcr_cond_list_equal_ignoring_time(const cJSON *a, const cJSON *b)
{
  if(a && !cJSON_IsArray(a))
    a = NULL;
  if(b && !cJSON_IsArray(b))
    b = NULL;
  return covered_by(a, b) && covered_by(b, a);
}
