/* kcr/quantity.h - resource quantities (resource.Quantity) as numbers.
 *
 * A typed object keeps a quantity as its text, struct kcr_str ("250m",
 * "1.5Gi", "2e3", "128974848"): what the apiserver sent, written back
 * unchanged. kcr_quantity_scaled reads that text as a count of units, as
 * resource.Quantity's Value and MilliValue do:
 *
 *   int64_t mcpu;
 *   if(!kcr_quantity_scaled(c->resources.requests.v[i], KCR_QUANTITY_MILLI, &mcpu))
 *     ... mcpu is 250 for "250m", 1500 for "1.5", 1 for "1u" (rounded up)
 *
 * The grammar is ParseQuantity's (k8s.io/apimachinery pkg/api/resource):
 * an optional sign, digits with an optional '.' and fraction, then a
 * suffix - none, n u m k M G T P E (powers of ten), Ki Mi Gi Ti Pi Ei
 * (powers of two), or e/E and a signed integer exponent ("1e3", "5E-3").
 * Thread safety: pure. */
#ifndef KCR_QUANTITY_H
#define KCR_QUANTITY_H

#include <stdint.h>

#include "api.h"
#include "err.h"
#include "jsontext.h"

#ifdef __cplusplus
extern "C" {
#endif

#define KCR_QUANTITY_UNITS 0    /* Quantity.Value(): bytes, cores ... */
#define KCR_QUANTITY_MILLI (-3) /* Quantity.MilliValue(): millicores ... */

/* *out = the quantity q counted in units of 10^scale (scale -9 .. 18:
 * KCR_QUANTITY_UNITS, KCR_QUANTITY_MILLI, -9 for nano-units), exactly,
 * its magnitude rounded up when it is not a whole number of them ("100m"
 * at scale 0 is 1, "-100m" is -1) - as Quantity.ScaledValue, which rounds
 * at a nanounit first (no difference at these scales). Unlike Go, a
 * result beyond int64 is an error, not a wrapped or capped value ("8Ei" is
 * 2^63: KCR_ERANGE).
 * As in Go, no digits at all read as 0 ("m", "e3", "+").
 * Errors: KCR_EINVAL (out NULL, scale outside -9 .. 18, q not a quantity -
 * empty, an unknown suffix ("1K", "1kb"), anything after the suffix
 * ("1.5.5") - or longer than 256 bytes), KCR_ERANGE (the result does not
 * fit int64); *out is then 0. */
KCR_API kcr_err kcr_quantity_scaled(struct kcr_str q, int scale, int64_t *out);

#ifdef __cplusplus
}
#endif

#endif
