/* runtime/queue-int.h - the work queue's internals for the controller
 * and tests; not installed. */
#ifndef KCR_RUNTIME_QUEUE_INT_H
#define KCR_RUNTIME_QUEUE_INT_H

#include <stdbool.h>
#include <stddef.h>

#include "kcr/queue.h"

/* The length of the longest hash chain of the key table. Takes the lock. */
size_t kcr__queue_max_chain(kcr_queue *q);

/* Removes every key for which match(key, ud) is true from the line and
 * from the wait (parked by add_after or the rate limiter), and forgets its
 * failures; a key being processed stays so, but a done() no longer queues
 * it again for adds made before. Returns the number of keys that left the
 * line or the wait. match runs under the queue's lock: it must not call
 * the queue or take a lock that is held while adding to it. Any thread. */
size_t kcr__queue_remove_if(kcr_queue *q, bool (*match)(const char *key, void *ud),
                            void *ud);

#endif
