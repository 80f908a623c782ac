/* kcr/cond.h - status conditions (metav1.Condition) over cJSON.
 *
 * The operations work on the `status.conditions` array of an object exactly as
 * the API serves it: an array of objects
 *
 *   {"type":"Ready","status":"True","observedGeneration":3,
 *    "lastTransitionTime":"2026-11-29T10:00:00Z","reason":"Installed","message":""}
 *
 * kcr_cond_set/remove/find/is_* follow apimachinery pkg/api/meta/conditions.go
 * (SetStatusCondition & co.) bit for bit; kcr_cond_validate* follow
 * ValidateCondition/ValidateConditions and the CRD schema generated for
 * metav1.Condition, taking the stricter rule where the two differ.
 *
 * The one rule to remember: lastTransitionTime moves only when status flips.
 * kcr_cond_set keeps the old time otherwise, so calling it on every reconcile
 * is safe and a steady-state reconcile reports changed == false.
 *
 * Conditions are keyed by type. Items that are not objects or carry no string
 * "type" are skipped by every lookup (never touched, never matched).
 *
 * Thread safety: pure functions over caller-owned trees; a tree is used by one
 * thread at a time (as cJSON). */
#ifndef KCR_COND_H
#define KCR_COND_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "api.h"
#include "err.h"

#ifdef __cplusplus
extern "C" {
#endif

#define KCR_COND_TRUE    "True"
#define KCR_COND_FALSE   "False"
#define KCR_COND_UNKNOWN "Unknown"

#define KCR_COND_REASON_MAX  1024  /* bytes */
#define KCR_COND_MESSAGE_MAX 32768 /* bytes (the CRD schema counts characters) */
#define KCR_COND_TYPE_MAX    316   /* the CRD schema's maxLength for type */

/* One condition. On input every string is borrowed from the caller; NULL is
 * read as "" (so a NULL reason is refused as missing, a NULL message is the
 * empty message). As a view filled by kcr_cond_get/kcr_cond_from_json the
 * strings are borrowed from the tree and never NULL. */
struct kcr_cond {
  const char *type;            /* "Ready" or "example.com/Ready" */
  const char *status;          /* KCR_COND_TRUE / _FALSE / _UNKNOWN */
  const char *reason;          /* one CamelCase word: "Installed", "ChildMissing" */
  const char *message;         /* human text, may be "" */
  int64_t observed_generation; /* metadata.generation this was computed from */
  time_t last_transition_time; /* 0 = unset (so the epoch itself cannot be used) */
};

/* The first condition of that type in conds, borrowed from the tree, or NULL
 * when absent (or conds is not an array, or type is NULL). The pointer stays
 * valid across kcr_cond_set (which updates the item in place) until the item
 * is removed or the tree freed; pointers to its members do not survive a set
 * that changes them. */
KCR_API cJSON *kcr_cond_find(const cJSON *conds, const char *type);

/* Fills out (the caller's struct) with a view of one condition object: its
 * strings are BORROWED from item, valid while the item lives and is not
 * changed ("" when a member is absent or null; never NULL),
 * observed_generation 0 when absent, last_transition_time 0 when
 * absent/null.
 * Errors: KCR_EPARSE when item is not an object, a member has the wrong JSON
 * type (a string holding \u0000 has: it cannot be a C string, see
 * kcr/json.h; it reads as ""), observedGeneration is not an integer within
 * int64 (it is read exactly, see kcr_json_get_int), or lastTransitionTime
 * is not RFC 3339 (kcr_time_parse); out is still filled as far as it could
 * be read. */
KCR_API kcr_err kcr_cond_from_json(const cJSON *item, struct kcr_cond *out);

/* kcr_cond_find + kcr_cond_from_json: out's strings are borrowed from the
 * tree (see kcr_cond_from_json). Errors: KCR_ENOTFOUND when absent (out
 * zeroed, strings ""), otherwise as kcr_cond_from_json (KCR_EPARSE). */
KCR_API kcr_err kcr_cond_get(const cJSON *conds, const char *type, struct kcr_cond *out);

/* SetStatusCondition. Validates c first (kcr_cond_validate); then:
 *  - absent: appends a new object with lastTransitionTime =
 *    c->last_transition_time if nonzero, else now; *changed = true.
 *  - present (the first item of that type): if status differs, sets status
 *    and lastTransitionTime = c's if nonzero, else now. When status is the
 *    same, c->last_transition_time is IGNORED and the old time kept. reason,
 *    message and observedGeneration are copied where they differ
 *    (observedGeneration 0 removes the member, as omitempty does). Any of
 *    these marks *changed. Other members of the item are kept untouched.
 * changed may be NULL; it is false on any error.
 * Errors: KCR_EINVAL (conds not an array, c NULL, now == 0),
 * KCR_EINVALID (c fails validation; the reason is in ei), KCR_ENOMEM.
 * On any error conds is left exactly as it was. ei may be NULL. */
KCR_API kcr_err kcr_cond_set(cJSON *conds, const struct kcr_cond *c, time_t now,
                             bool *changed, struct kcr_errinfo *ei);

/* RemoveStatusCondition: deletes every item of that type (upstream filters
 * the whole list, so duplicates go too). *removed (may be NULL) says whether
 * anything was. Pointers into removed items are invalidated.
 * Errors: KCR_EINVAL when conds is not an array or type is NULL. */
KCR_API kcr_err kcr_cond_remove(cJSON *conds, const char *type, bool *removed);

/* IsStatusConditionPresentAndEqual: true when the first item of that type
 * exists and its status equals status. Absent is neither True nor False nor
 * Unknown: all three return false ("not True" does not mean "False"). */
KCR_API bool kcr_cond_has_status(const cJSON *conds, const char *type,
                                 const char *status);
KCR_API bool kcr_cond_is_true(const cJSON *conds, const char *type);
KCR_API bool kcr_cond_is_false(const cJSON *conds, const char *type);
KCR_API bool kcr_cond_is_unknown(const cJSON *conds, const char *type);

/* ValidateCondition on an input condition: type a qualified name (optional
 * lowercase DNS-1123 subdomain prefix <= 253 + '/' + name <= 63 of
 * [A-Za-z0-9][-A-Za-z0-9_.]*[A-Za-z0-9]; whole type <= 316), status one of
 * True/False/Unknown, observedGeneration >= 0, reason 1..1024 bytes matching
 * ^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$, message <= 32768 bytes.
 * lastTransitionTime may be 0 (kcr_cond_set assigns it); when set it must be
 * within years 0001..9999 (0001-01-01T00:00:00Z is Go's zero time).
 * Returns KCR_OK or KCR_EINVALID with the first broken rule in ei->message,
 * naming the condition, the field and the rule, e.g.
 *   condition "Ready": reason "not ready" must match ^[A-Za-z]...$ (...)
 * or KCR_EINVAL when c is NULL. ei may be NULL. */
KCR_API kcr_err kcr_cond_validate(const struct kcr_cond *c, struct kcr_errinfo *ei);

/* ValidateConditions on a whole array as the apiserver would see it: every
 * item an object passing kcr_cond_validate, with string type/status/reason/
 * message members (message present, may be ""; none holding \u0000, which
 * the message names - refused in message too, which the apiserver would
 * take, as libkcr reads it as a C string), an integer or absent
 * observedGeneration (int64, read exactly), a lastTransitionTime present
 * and RFC 3339 as both apiserver paths take it - what metav1.Time decodes
 * (kcr_time_parse: upper-case T and Z, no space) with the two-digit hour
 * the CRD schema's date-time format also requires (null or Go's zero time
 * count as absent) - and no type twice. NULL conds (no
 * conditions) is valid. The message is prefixed with the index:
 *   conditions[2]: condition "Ready": duplicate type (first at conditions[0])
 * Errors: KCR_EINVALID (first problem in ei), KCR_EINVAL if conds is not an
 * array. ei may be NULL. */
KCR_API kcr_err kcr_cond_validate_json(const cJSON *conds, struct kcr_errinfo *ei);

/* A new condition object, owned by the caller (cJSON_Delete), with the json
 * names and order of metav1.Condition: type, status, observedGeneration (only
 * when nonzero: omitempty), lastTransitionTime (c->last_transition_time),
 * reason, message (always present, "" when c->message is NULL or empty).
 * Does not validate.
 * Returns NULL when out of memory, c is NULL, or c->last_transition_time is
 * 0: a condition without a time would be written as null and refused by the
 * apiserver. */
KCR_API cJSON *kcr_cond_to_json(const struct kcr_cond *c);

/* Semantic equality as kcr_cond_set sees it: same type, status, reason,
 * message (NULL == "") and observedGeneration; lastTransitionTime ignored,
 * since set would keep the existing one anyway. */
KCR_API bool kcr_cond_equal_ignoring_time(const struct kcr_cond *a,
                                          const struct kcr_cond *b);

/* The same over two condition arrays, as sets keyed by type: true when they
 * hold the same types and each pair is equal ignoring time. Order does not
 * matter (conditions are a map keyed by type); extra members of an item are
 * ignored. NULL counts as the empty array. Use it to decide that a desired
 * status needs no write. */
KCR_API bool kcr_cond_list_equal_ignoring_time(const cJSON *a, const cJSON *b);

#ifdef __cplusplus
}
#endif

#endif
