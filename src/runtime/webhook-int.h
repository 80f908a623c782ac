/* webhook-int.h - what admission (webhook.c) and conversion
 * (conversion.c) webhooks share: their metric families, the timing of a
 * call, and the Content-Type check. */
#ifndef KCR_RUNTIME_WEBHOOK_INT_H
#define KCR_RUNTIME_WEBHOOK_INT_H

#include <stdbool.h>
#include <stdint.h>

#include "kcr/httpd.h"
#include "kcr/metrics.h"

/* A webhook's metrics (kcr/webhook.h); every member NULL without a
 * registry. */
struct kcr__whm {
  kcr_metrics *reg; /* referenced */
  kcr_metric *req, *inflight, *lat, *rej;
};

/* Registers the families in reg (may be NULL: none) for the webhook name.
 * Errors: the registry's. On error m holds a reference to release with
 * kcr__whm_cleanup. */
kcr_err kcr__whm_init(struct kcr__whm *m, kcr_metrics *reg, const char *name,
                      struct kcr_errinfo *ei);
void kcr__whm_cleanup(struct kcr__whm *m);

/* A call being timed: begin before the work, end after it with its
 * outcome (rejected_code 0: allowed; else the code counted as a
 * rejection). end also logs an answer made after the caller's timeout
 * (the ?timeout= of the URL). */
struct kcr__whcall {
  const char *name;
  uint64_t t0;
};
void kcr__whm_begin(const struct kcr__whm *m, const char *name, struct kcr__whcall *c);
void kcr__whm_end(const struct kcr__whm *m, const struct kcr__whcall *c,
                  const struct kcr_httpd_request *r, int rejected_code);

/* True for "application/json", with parameters or not. */
bool kcr__wh_json_content(const char *ct);

#endif
