/* runtime/queue-int.h - introspection of the work queue for tests; not
 * installed, not for production code. */
#ifndef KCR_RUNTIME_QUEUE_INT_H
#define KCR_RUNTIME_QUEUE_INT_H

#include <stddef.h>

#include "kcr/queue.h"

/* The length of the longest hash chain of the key table. Takes the lock. */
size_t kcr__queue_max_chain(kcr_queue *q);

#endif
