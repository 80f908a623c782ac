/* runtime/store-int.h - introspection of the informer cache for tests; not
 * installed, not for production code. */
#ifndef KCR_RUNTIME_STORE_INT_H
#define KCR_RUNTIME_STORE_INT_H

#include <stddef.h>

#include "kcr/store.h"

/* The length of the longest hash chain of the object table (the cost of the
 * worst lookup). Takes the read lock. */
size_t kcr__store_max_chain(kcr_store *s);
/* The number of buckets of the object table. Takes the read lock. */
size_t kcr__store_buckets(kcr_store *s);

#endif
