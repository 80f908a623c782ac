/* runtime/controller-int.h - what the manager asks of its controllers beyond
 * kcr/controller.h; not installed. */
#ifndef KCR_RUNTIME_CONTROLLER_INT_H
#define KCR_RUNTIME_CONTROLLER_INT_H

#include <stdbool.h>

#include "kcr/controller.h"

/* Whether inf is one of c's sources (For, Owns, Watches). Thread safety:
 * after setup (sources are added before the controller starts). */
bool kcr__controller_has_source(kcr_controller *c, kcr_informer *inf);

#endif
