/* One Lease (default/lock) served on the wire seam (twire.h), for unit
 * tests of leader election: GET answers it (404 before it exists), POST
 * creates it (409 once it exists), PUT replaces it when the body carries
 * the current resourceVersion (409 otherwise). Each write gets the next
 * resourceVersion. Not locked: call it under the handler's own lock. */
#ifndef KCR_TLEASE_H
#define KCR_TLEASE_H

#include "kcr.h"
#include "twire.h"

#define TLEASES "/apis/coordination.k8s.io/v1/namespaces/default/leases"
#define TLEASE  TLEASES "/lock"

struct tlease {
  cJSON *obj; /* the stored Lease, or NULL */
  long rv;    /* its resourceVersion */
};

/* What tlease_serve did. */
enum tlease_done {
  TLEASE_OTHER,    /* not a Lease request: nothing answered */
  TLEASE_READ,     /* a GET, answered */
  TLEASE_REFUSED,  /* a POST or PUT refused: 400, 404 or 409 AlreadyExists */
  TLEASE_CONFLICT, /* a PUT at a stale resourceVersion: 409 Conflict */
  TLEASE_STORED,   /* a POST (201) or PUT (200) stored the body */
};

/* Frees the stored Lease. */
void tlease_cleanup(struct tlease *l);
/* Answers a GET, POST or PUT of the Lease; *done says what it did (rc is
 * the answer's; KCR_OK with TLEASE_OTHER when it is not a Lease request).
 * A body that is not JSON fails a TCHECK. */
kcr_err tlease_serve(struct tlease *l, struct twire_call *call, enum tlease_done *done);
/* spec.holderIdentity of a Lease, "" if none. */
const char *tlease_holder(const cJSON *lease);

#endif
