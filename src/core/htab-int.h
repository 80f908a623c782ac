/* core/htab-int.h - introspection of kcr/htab.h tables, for the owners'
 * test hooks (queue-int.h, store-int.h, events-int.h); not installed. */
#ifndef KCR_CORE_HTAB_INT_H
#define KCR_CORE_HTAB_INT_H

#include <stddef.h>

#include "kcr/htab.h"

/* The length of the longest chain of t (the cost of its worst lookup).
 * O(buckets + nodes). */
size_t kcr__htab_longest_chain(const struct kcr_htab *t);

#endif
