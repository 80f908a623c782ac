/* runtime/informer-int.h - what the controller asks of its sources'
 * informers beyond kcr/informer.h; not installed. */
#ifndef KCR_RUNTIME_INFORMER_INT_H
#define KCR_RUNTIME_INFORMER_INT_H

#include <stdbool.h>

#include "kcr/informer.h"

/* Whether a controller with inf as a source is to hold its keys rather
 * than reconcile them: the cache is emptied for its byte budget
 * (kcr_informer_over_budget), or, with opts.await_crd, not synced - its
 * CRD does not serve the resource, or does again but the list is not in.
 * A reconcile would read "not found" there. Thread safety: any thread. */
bool kcr__informer_holds_keys(kcr_informer *inf);

/* The manager removed inf from its registry: stops it (as
 * kcr_informer_stop: not from its own threads) and empties its store
 * (without on_delete; references to its objects stay valid), its gauges
 * to 0. inf stays valid until freed. */
void kcr__informer_retire(kcr_informer *inf);

/* inf's opts.shard_by. Thread safety: any thread. */
enum kcr_shard_by kcr__informer_shard_by(const kcr_informer *inf);

#endif
