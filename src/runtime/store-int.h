/* runtime/store-int.h - the informer's way of making projected objects, and
 * introspection of the informer cache for tests; not installed. */
#ifndef KCR_RUNTIME_STORE_INT_H
#define KCR_RUNTIME_STORE_INT_H

#include <stddef.h>

#include "kcr/store.h"

struct kcr__proj;

/* kcr_obj_from_json, keeping of the tree only what proj keeps
 * (runtime/projection-int.h; NULL: everything). The header is read from
 * the whole tree and proj keeps every member it is made of. Errors as
 * kcr_obj_from_json. */
kcr_err kcr__obj_from_json(const cJSON *tree, unsigned flags,
                           const struct kcr__proj *proj, kcr_obj **out,
                           struct kcr_errinfo *ei);
/* The length of the longest hash chain of the object table (the cost of the
 * worst lookup). Takes the read lock. */
size_t kcr__store_max_chain(kcr_store *s);
/* The number of buckets of the object table. Takes the read lock. */
size_t kcr__store_buckets(kcr_store *s);

#endif
