/* kcr/json.h - small helpers over cJSON for Kubernetes objects.
 *
 * Paths are dot-separated member names: "metadata.name", "status.conditions".
 * Getters return borrowed pointers into the tree (valid while it lives) or
 * NULL/defaults when a member is absent or of another type.
 * Thread safety: as cJSON — a tree is used by one thread at a time. */
#ifndef KCR_JSON_H
#define KCR_JSON_H

#include <cjson/cJSON.h>
#include <stdint.h>

#include "err.h"

cJSON *kcr_json_at(const cJSON *obj, const char *path);
const char *kcr_json_str(const cJSON *obj, const char *path);
/* The string member named exactly `key` (no path splitting: for label and
 * annotation keys such as "example.com/name"), or NULL. */
const char *kcr_json_member_str(const cJSON *obj, const char *key);
/* Integer at path, or def if absent / not a number. */
int64_t kcr_json_int(const cJSON *obj, const char *path, int64_t def);
/* Gets or creates the object at path (creating intermediate objects);
 * NULL if out of memory or a member on the way is not an object. */
cJSON *kcr_json_obj(cJSON *obj, const char *path);
/* Sets a string member at path (replacing any value). */
kcr_err kcr_json_set_str(cJSON *obj, const char *path, const char *value);
/* Parses text into a new tree; KCR_EPARSE with a position in ei if malformed. */
kcr_err kcr_json_parse(const char *text, size_t len, cJSON **out, struct kcr_errinfo *ei);
/* Compact text of a tree, owned by the caller; NULL if out of memory. */
char *kcr_json_print(const cJSON *obj);

#endif
