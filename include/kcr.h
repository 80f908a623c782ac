/* kcr.h - the umbrella header of libkcr, the Kubernetes controller runtime
 * for C. Include this one; each module's header documents its contract. */
#ifndef KCR_H
#define KCR_H

#include "kcr/api.h"
#include "kcr/arena.h"
#include "kcr/backoff.h"
#include "kcr/base64.h"
#include "kcr/buf.h"
#include "kcr/cli.h"
#include "kcr/client.h"
#include "kcr/cond.h"
#include "kcr/config.h"
#include "kcr/controller.h"
#include "kcr/err.h"
#include "kcr/events.h"
#include "kcr/hash.h"
#include "kcr/htab.h"
#include "kcr/httpd.h"
#include "kcr/informer.h"
#include "kcr/json.h"
#include "kcr/jsontext.h"
#include "kcr/leader.h"
#include "kcr/log.h"
#include "kcr/meta.h"
#include "kcr/manager.h"
#include "kcr/metrics.h"
#include "kcr/path.h"
#include "kcr/quantity.h"
#include "kcr/queue.h"
#include "kcr/status.h"
#include "kcr/store.h"
#include "kcr/time.h"
#include "kcr/typed.h"
#include "kcr/version.h"
#include "kcr/watch.h"

#endif
