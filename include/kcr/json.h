/* kcr/json.h - small helpers over cJSON for Kubernetes objects.
 *
 * Paths are JSON Pointers (RFC 6901), the one path syntax of libkcr (the
 * same for an informer's keep list and kcr_obj_spans): "" for the value
 * itself, else "/" before each member name - "/metadata/name",
 * "/status/conditions" - with '~' written "~0" and '/' written "~1" in a
 * name, so that every label key can be named:
 * "/metadata/labels/app.kubernetes.io~1name" (a dot is an ordinary byte).
 * kcr_json_ptr_append builds one from names. Here a token on an array is
 * an index ("/status/conditions/0"). A path that is not a pointer ("" and
 * "/..." are; "metadata.name", from before pointers, is not; nor is one
 * with '~' followed by anything but 0 or 1) finds nothing, and the first
 * such path a process uses is logged as an error.
 * Getters return borrowed pointers into the tree (valid while it lives) or
 * NULL/defaults when a member is absent or of another type.
 *
 * Integers. Kubernetes integers are int64 (generation, observedGeneration,
 * gracePeriodSeconds ...) and cJSON keeps numbers as doubles, exact only up
 * to 2^53 and printed as "1e+15" from 10^15 on, which Go refuses to decode
 * into an int64. So integers travel exactly:
 *   - kcr_json_parse keeps every integer literal of magnitude >= 10^15 as a
 *     cJSON Raw node holding its text (valuedouble still holds the nearest
 *     double), so printing the tree reproduces it and kcr_json_int reads it
 *     exactly. Smaller integers, and numbers that are not integer literals
 *     (1.5, 1e15), stay cJSON numbers. Parse with kcr_json_parse, not
 *     cJSON_Parse, whenever the text comes from the API server.
 *   - kcr_json_create_int / kcr_json_add_int make the same nodes (a number
 *     below 10^15, a Raw node from there on), so what is written compares
 *     equal (cJSON_Compare) to what the server sends back.
 *   - kcr_json_get_int / kcr_json_int read both kinds, and never convert a
 *     double that is not an integer within int64 range.
 * cJSON_IsNumber is false for a Raw node: read Kubernetes integers through
 * these functions, not through valuedouble/valueint.
 *
 * Strings are C strings, as cJSON keeps them, so a JSON string holding
 * \u0000 cannot be one (cJSON would cut it at the NUL: "Ready\u0000x" would
 * read "Ready"). kcr_json_parse keeps such a value as a Raw node holding its
 * literal as written, quotes included: it prints back unchanged, and
 * cJSON_IsString, kcr_json_str and kcr_json_member_str do not take it for a
 * string (a reader that says why it refused a value can tell it by a Raw
 * text starting with '"'). A member NAME holding \u0000 makes kcr_json_parse
 * refuse the text (KCR_EPARSE). Kubernetes refuses NUL in every name and
 * key it validates; Go keeps the NUL.
 *
 * Duplicate member names: Go's encoding/json keeps the last member of a
 * name, cJSON keeps all and its lookups find the first. kcr_json_parse
 * deletes every member a later one of the same name follows, so every
 * lookup in a parsed tree (these functions, cJSON_GetObjectItem*) finds what
 * Go finds.
 *
 * Ownership: trees passed in are borrowed for the call; what a function
 * returns is borrowed from the tree passed in unless its comment says the
 * caller owns it (kcr_json_parse, kcr_json_create_int, kcr_json_to_text).
 *
 * Thread safety: as cJSON - a tree is used by one thread at a time;
 * functions that only read may share a tree that no thread modifies. */
#ifndef KCR_JSON_H
#define KCR_JSON_H

#include <cjson/cJSON.h>
#include <stdint.h>

#include "api.h"
#include "buf.h"
#include "err.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The node at path (borrowed), or NULL when a member or element on the
 * way is absent, obj is NULL or path is not a pointer (see above). */
KCR_API cJSON *kcr_json_at(const cJSON *obj, const char *path);
/* The string at path (borrowed), or NULL when absent or not a string (a
 * string holding \u0000, kept as a Raw node, is none: see above). */
KCR_API const char *kcr_json_str(const cJSON *obj, const char *path);
/* The string member named exactly `key` (a name, not a path: for label
 * and annotation keys such as "example.com/name"), or NULL. */
KCR_API const char *kcr_json_member_str(const cJSON *obj, const char *key);
/* Integer at path, exactly (see above); def if absent, null, not an integer
 * (a string, 1.5, NaN ...) or out of int64 range. */
KCR_API int64_t kcr_json_int(const cJSON *obj, const char *path, int64_t def);
/* Reads node v as an int64, exactly; *out is set only on KCR_OK. Pure.
 * Errors: KCR_ENOTFOUND when v is NULL or JSON null, KCR_EPARSE when it is
 * not an integer (another type, a fraction, NaN, a Raw node that is not an
 * integer literal), KCR_ERANGE when it is an integer outside int64. */
KCR_API kcr_err kcr_json_get_int(const cJSON *v, int64_t *out);
/* A new node for v, owned by the caller, that prints exactly as Go's
 * encoder writes an int64 ("1000000000000000", never "1e+15"); NULL if out
 * of memory. */
KCR_API cJSON *kcr_json_create_int(int64_t v);
/* Adds member name = v (kcr_json_create_int) to obj, as
 * cJSON_AddNumberToObject does (appends; does not replace a member of that
 * name). Returns the new node, or NULL (out of memory, or obj/name NULL)
 * with obj unchanged. */
KCR_API cJSON *kcr_json_add_int(cJSON *obj, const char *name, int64_t v);
/* Gets or creates the object at path (creating intermediate objects; ""
 * is obj itself); NULL if out of memory (then obj is unchanged), if obj or
 * a member on the way is not an object, or if path is not a pointer. */
KCR_API cJSON *kcr_json_obj(cJSON *obj, const char *path);
/* Sets a string member at path to a copy of value (replacing any value),
 * creating intermediate objects. Errors: KCR_EINVAL when obj, path or value
 * is NULL, path is "" or not a pointer, or obj or a member on the way is
 * not an object; KCR_ENOMEM. On error obj is unchanged. */
KCR_API kcr_err kcr_json_set_str(cJSON *obj, const char *path, const char *value);
/* Appends to out one step of a path: '/' and name with '~' written "~0" and
 * '/' written "~1" ("app.kubernetes.io/name" -> "/app.kubernetes.io~1name").
 * Errors: KCR_EINVAL (out or name NULL), KCR_ENOMEM (out's error, which it
 * keeps: see kcr/buf.h). Thread safety: as out. */
KCR_API kcr_err kcr_json_ptr_append(struct kcr_buf *out, const char *name);
/* Parses text[0..len) into a new tree (*out, caller frees; NULL on error),
 * keeping integers exact, a string value holding \u0000 as a Raw node of its
 * literal, and of members of the same name in an object only the last
 * (see above). Text after the first value is ignored.
 * Errors: KCR_EINVAL (text NULL), KCR_EPARSE when malformed (a raw NUL
 * byte included, which cJSON alone would take in a string) or when a
 * member name holds \u0000 (ei says at which byte), KCR_ENOMEM when
 * out of memory (well-formed text is never called malformed; a well-formed
 * number literal longer than 63 bytes is the one exception, reported
 * EPARSE if memory ran out while parsing a text holding one). */
KCR_API kcr_err kcr_json_parse(const char *text, size_t len, cJSON **out,
                               struct kcr_errinfo *ei);
/* The compact JSON text of a tree (integers as kcr_json_parse read them),
 * a new string owned by the caller (free); NULL if out of memory or obj is
 * NULL. */
KCR_API char *kcr_json_to_text(const cJSON *obj);
/* A keyed digest of a tree's content (kcr_hash's key: the same within one
 * process, different in the next), for remembering what was sent without
 * keeping or printing it: equal trees - the same kinds, member names in the
 * same order, the same strings, numbers (the bytes of their doubles: -0 is
 * not 0) and Raw texts - hash the same. NULL hashes as JSON null. Allocates nothing.
 * Thread safety: as reading the tree. */
KCR_API uint64_t kcr_json_hash(const cJSON *obj);

#ifdef __cplusplus
}
#endif

#endif
