/* core/metrics-int.h - introspection of the metrics registry for tests; not
 * installed, not for production code. */
#ifndef KCR_CORE_METRICS_INT_H
#define KCR_CORE_METRICS_INT_H

#include <stddef.h>

#include "kcr/metrics.h"

/* The length of the longest hash chain of m's series table (the cost of the
 * worst lookup). Takes m's lock shared. */
size_t kcr__metric_max_chain(kcr_metric *m);

#endif
