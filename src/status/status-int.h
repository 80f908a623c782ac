/* Internal to libkcr: the status writer's entry for the layers above. */
#ifndef KCR_STATUS_STATUS_INT_H
#define KCR_STATUS_STATUS_INT_H

#include <stdbool.h>
#include <stddef.h>

#include "kcr/status.h"

/* kcr_status_write_text; with checked, json[0..len) is known to be one
 * well-formed JSON object (a cached object's text, kcr_obj_status_write):
 * it is followed by its structure, not checked again - text that breaks
 * that promise makes a wrong write, never a read outside it. */
kcr_err kcr__status_write_text(kcr_status_writer *w, const char *json, size_t len,
                               bool checked, const struct kcr_status_desired *d,
                               enum kcr_write_result *res, struct kcr_errinfo *ei);

#endif
