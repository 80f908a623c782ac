/* A toy kind for conversion tests (unit, integration, fuzz): the hub v2
 * has spec.first, spec.last and spec.nick; the spoke v1 has spec.name
 * ("first last") and no nick. Converters on cJSON, as a user might write
 * them. */
#ifndef KCR_TTOY_H
#define KCR_TTOY_H

#include <stdbool.h>

#include "kcr/webhook.h"

/* v1 -> v2: name split at its first space. A spec that is no object:
 * KCR_EINVAL. With ttoy_break_name set it also renames the object (a
 * converter changing metadata it may not change). */
kcr_err ttoy_v1_to_hub(kcr_conversion *cv, struct kcr_str in, struct kcr_buf *out,
                       void *ud);
/* v2 -> v1: first and last joined; nick dropped; metadata.managedFields
 * dropped too (the library puts it back). First name "fail": an error. */
kcr_err ttoy_v1_from_hub(kcr_conversion *cv, struct kcr_str in, struct kcr_buf *out,
                         void *ud);

extern bool ttoy_break_name;

#endif
