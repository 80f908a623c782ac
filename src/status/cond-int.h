/* Private to src/status: what the status writer asks of cond.c. */
#ifndef KCR_STATUS_COND_INT_H
#define KCR_STATUS_COND_INT_H

#include <cjson/cJSON.h>
#include <stdbool.h>

#include "kcr/cond.h"

/* Whether kcr_cond_set(conds, c, ...) would leave conds as they are: an item
 * of c's type exists (the first, as kcr_cond_find finds it) and holds c's
 * status, reason, message and observedGeneration exactly as kcr_cond_set
 * compares them. c is not validated here. Reads only; no allocation. Thread
 * safety: as reading conds. */
bool kcr__cond_unchanged(const cJSON *conds, const struct kcr_cond *c);

/* Whether item holds c's status exactly as kcr_cond_set compares it (then
 * kcr_cond_set keeps the item's lastTransitionTime). */
bool kcr__cond_same_status(const cJSON *item, const struct kcr_cond *c);

#endif
