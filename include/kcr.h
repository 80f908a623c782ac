/* kcr.h - the umbrella header of libkcr, the Kubernetes controller runtime
 * for C. Include this one; each module's header documents its contract. */
#ifndef KCR_H
#define KCR_H

#include "kcr/buf.h"
#include "kcr/client.h"
#include "kcr/config.h"
#include "kcr/err.h"
#include "kcr/json.h"
#include "kcr/log.h"
#include "kcr/path.h"
#include "kcr/time.h"
#include "kcr/watch.h"

#define KCR_VERSION "0.1.0"

#endif
