/* kcr/events.h - an events.k8s.io/v1 Event recorder, as client-go's
 * tools/events: aggregation of repeats into Event series, a spam limit per
 * object and reason, and background sender threads that write to the API
 * server.
 *
 *   struct kcr_recorder_opts o = {.client = c,
 *                                 .reporting_controller = "ebdman.example.com/ebdman"};
 *   kcr_recorder *rec;
 *   kcr_recorder_new(&o, &rec, &ei);
 *   struct kcr_event_ref ref =
 *       kcr_event_ref_from_obj(obj, "ebdman.example.com/v1", "EBD");
 *   kcr_recorder_eventf(rec, &ref, KCR_EVENT_WARNING, "ProvisionFailed",
 *                       "Provision", "volume %s: %s", vol, msg);
 *   ...
 *   kcr_recorder_free(rec);
 *
 * What reaches the server. The first occurrence of an event becomes a new
 * Event (POST /apis/events.k8s.io/v1/namespaces/{ns}/events) named
 * "<regarding-name>.<hex unix nanoseconds>" in the regarding object's
 * namespace ("default" for cluster-scoped objects). An isomorphic occurrence
 * (same regarding kind/namespace/name/uid, type, reason, action and note)
 * within aggregate_window_ms of the previous one is not a new Event: it
 * increments the series of the one already created, written as a merge
 * PATCH of {series: {count, lastObservedTime}} at most once per
 * series_flush_ms per Event (count 2 on the first repeat). An Event that
 * has disappeared from the server (TTL) is created again, with its series.
 * A retried POST answered 409 AlreadyExists found the Event an earlier
 * attempt created (its answer lost with the connection): that is "sent".
 *
 * Similar events coalesce while they wait. A new event with the same
 * regarding object (kind/namespace/name/uid), reason and type as one that
 * no sender has taken yet - a flapping object, its note changing each time
 * - does not queue a second Event: it replaces the waiting one, as
 * client-go's EventAggregator combines similar events. The one Event has
 * the newest note and action, prefixed "(combined from similar events): "
 * (cut to 1024 bytes), the first one's eventTime, and a series count of
 * all of them; each replaced event counts as "aggregated". Once the Event
 * is on its way, the next similar event is a new Event again.
 *
 * Sending. opts.senders threads write at once, through the client's
 * connection pool, new events first in the order they came, then series.
 * A sleeping sender is woken only when the writes due outnumber the
 * senders busy writing: a new event may wait for one busy sender's write
 * to finish (as long as that write takes, up to the request timeout), which
 * saves a thread wake-up per write while events trickle in; a burst still
 * runs on every sender. Series PATCHes come after new events.
 * A 429 answer pauses every sender for its Retry-After (retry_initial_ms
 * without one, at most retry_max_ms), after which the refused write is done
 * again: it is flow control, not a failure, and uses none of the write's
 * max_attempts (the client's own 429/503 retries are off for these
 * requests, see kcr_http_request.max_retries).
 *
 * Memory. New events wait in a queue bounded in bytes, queue_bytes: a new
 * event holds the size of the recorder's record of it - a fixed part of
 * about 300 bytes plus its strings (regarding kind, namespace, name, uid,
 * apiVersion and resourceVersion; reason, type, action, the note as cut;
 * the Event's name and namespace): about 500 bytes for a short note, 1.5
 * KiB with a 1 KiB note - from the call until its first create succeeds or
 * is given up (also while it is being sent or waits for a retry).
 * stats.queued_bytes is the total now. Events created and remembered for
 * aggregation (up to aggregate_window_ms after their last occurrence) are
 * not in it.
 *
 * What never reaches the server. Occurrences beyond the spam limit (a token
 * bucket per regarding object and reason: spam_burst events, refilled one
 * per spam_refill_ms; the recorder remembers the buckets of the 4,096
 * object+reason pairs used most recently, as client-go does, and a pair it
 * has forgotten starts again with a full bucket), new events that would
 * take the queue past queue_bytes, events whose writes keep failing (403,
 * 5xx, transport: retried max_attempts times with backoff), and events
 * into a namespace being deleted (a 403 with cause NamespaceTerminating:
 * dropped at once, logged at debug level, as client-go does). Each is
 * counted and logged (once per object+reason when the spam limit starts
 * dropping; once each time the queue fills up after it had drained to
 * half). Repeats that join a series, and similar events that coalesce, do
 * not spend spam tokens; repeats take no queue bytes.
 *
 * Metrics (when opts.metrics is set): counter kcr_events_total{type, reason,
 * result}; every accepted kcr_recorder_eventf() call ends in exactly one
 * result: "sent" (a new Event was created), "aggregated" (joined a series,
 * or coalesced into a similar event), "dropped" (spam limit, full queue,
 * or shutdown) or "failed" (the server or the network refused it to the
 * end). Gauge kcr_events_queued_bytes: stats.queued_bytes (summed over
 * the recorders on the registry), read at each render.
 *
 * Thread safety: kcr_recorder_eventf/veventf/event/flush/get_stats may be
 * called from any thread concurrently; kcr_recorder_free by one thread once
 * no other call is running. The sink runs on the recorder's sender threads,
 * up to opts.senders calls at once (each about a different Event), with no
 * recorder lock held; the clock runs on the senders and on callers'
 * threads: both must be thread-safe. The pure helpers below are
 * thread-safe. */
#ifndef KCR_EVENTS_H
#define KCR_EVENTS_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "api.h"
#include "client.h"
#include "err.h"
#include "metrics.h"
#include "store.h"

#ifdef __cplusplus
extern "C" {
#endif

#define KCR_EVENT_NORMAL  "Normal"
#define KCR_EVENT_WARNING "Warning"

/* Limits the API server enforces (bytes, as Go's len()). */
#define KCR_EVENT_REASON_MAX   128
#define KCR_EVENT_ACTION_MAX   128
#define KCR_EVENT_NOTE_MAX     1024
#define KCR_EVENT_INSTANCE_MAX 128

typedef struct kcr_recorder kcr_recorder;

/* The default of kcr_recorder_opts.queue_bytes: 8 MiB, about 17,000 events
 * with short notes, 5,500 with 1 KiB notes. */
#define KCR_EVENT_QUEUE_BYTES ((size_t)8 << 20)

/* The object an event is about (Event.regarding). All strings are borrowed
 * for the call and copied. kind and name are required; ns is NULL or
 * "" for cluster-scoped objects; the others are optional (NULL or ""). */
struct kcr_event_ref {
  const char *api_version; /* "v1", "ebdman.example.com/v1alpha1" */
  const char *kind;        /* "ConfigMap" */
  const char *ns;          /* namespace */
  const char *name;
  const char *uid;
  const char *resource_version;
};

/* A ref to a cached object: namespace, name, uid and resourceVersion come
 * from o (borrowed: valid while the caller holds its reference to o),
 * api_version and kind from the arguments (borrowed). Thread safety: pure. */
KCR_API struct kcr_event_ref
kcr_event_ref_from_obj(const kcr_obj *o, const char *api_version, const char *kind);

/* One occurrence, for kcr_recorder_event() and kcr_event_isomorphic().
 * Borrowed for the call. */
struct kcr_event {
  const struct kcr_event_ref *regarding;
  const char *type;   /* KCR_EVENT_NORMAL or KCR_EVENT_WARNING */
  const char *reason; /* CamelCase, 1..128 bytes: "ProvisionFailed" */
  const char *action; /* 1..128 bytes: what was done or failed: "Provision" */
  const char *note;   /* human text, NULL or "" for none; cut to 1024 bytes */
};

/* Where the recorder writes; the default is the API server via opts.client.
 * op CREATE: POST body (a whole Event) to the events of namespace ns;
 * op PATCH: merge-patch Event ns/name with body. body is JSON text, len
 * bytes (NUL-terminated as well), borrowed for the call. Returns what
 * kcr_create / kcr_patch would (KCR_ENOTFOUND, KCR_EEXIST, ... drive the
 * recorder's retries and re-creation) and may fill ei (a KCR_ETOOMANY with
 * ei->retry_after_ms pauses the senders that long). Called on the recorder's sender
 * threads, up to opts.senders calls at once, never two at once for the same Event: it
 * must be thread-safe. For tests. */
enum kcr_event_op { KCR_EVENT_CREATE, KCR_EVENT_PATCH };
typedef kcr_err (*kcr_event_sink_fn)(void *ud, enum kcr_event_op op, const char *ns,
                                     const char *name, const char *body, size_t len,
                                     struct kcr_errinfo *ei);

/* Options for kcr_recorder_new(); zero means the default shown. */
struct kcr_recorder_opts {
  kcr_client *client;               /* the recorder takes a reference
                                       (kcr_client_ref) and drops it in
                                       kcr_recorder_free; required unless
                                       sink is set */
  const char *reporting_controller; /* required, a qualified name:
                                       "ebdman.example.com/ebdman" */
  const char *reporting_instance;   /* default: the host name (<= 128 bytes) */
  kcr_metrics *metrics;             /* optional: kcr_events_total */
  int spam_burst;                   /* 25 events per object+reason */
  uint64_t spam_refill_ms;          /* 300000: one token per 5 minutes */
  bool no_spam_limit;               /* true: no spam limit at all */
  size_t queue_bytes;               /* KCR_EVENT_QUEUE_BYTES: bytes held for
                                       new events not yet created (see
                                       "Memory" above) */
  int senders;                      /* 4: writes in flight at once, one
                                       thread each; a controller passes its
                                       worker count, so that events keep up
                                       with what its workers do */
  uint64_t series_flush_ms;         /* 30000: at most one series write per Event
                                       per interval (a flush writes at once) */
  uint64_t aggregate_window_ms;     /* 360000: a repeat later than this after
                                       the previous one starts a new Event */
  int max_attempts;                 /* 5 tries per write before dropping it */
  uint64_t retry_initial_ms;        /* 1000, doubling, capped at retry_max_ms */
  uint64_t retry_max_ms;            /* 30000 */
  uint64_t shutdown_flush_ms;       /* 5000: how long kcr_recorder_free flushes */
  kcr_event_sink_fn sink;           /* tests: replaces the API server */
  void *sink_ud;
  uint64_t (*clock_ms)(void *ud); /* tests: monotonic milliseconds; default
                                     kcr_time_mono_ms. Event timestamps
                                     always come from the wall clock. */
  void *clock_ud;
};

/* Creates a recorder and starts its sender threads. opts is read during
 * the call (the strings are copied, the client and metrics are referenced
 * until kcr_recorder_free). Release with kcr_recorder_free().
 * Errors: KCR_EINVAL (no opts; no client or sink; no valid
 * reporting_controller; a reporting_instance empty or over 128 bytes; a
 * negative spam_burst, max_attempts or senders - ei names the field),
 * KCR_EEXIST (opts.metrics has a kcr_events_* family of another type or
 * with other labels; ei names it), KCR_ENOMEM (also when a thread cannot
 * be started). On error *out is NULL.
 * Thread safety: any thread. */
KCR_API kcr_err kcr_recorder_new(const struct kcr_recorder_opts *opts, kcr_recorder **out,
                                 struct kcr_errinfo *ei);

/* Flushes for at most opts.shutdown_flush_ms, stops the senders (waiting
 * for the requests in flight, each bounded by the client's timeout) and
 * frees. Events still unsent are counted as dropped and logged. NULL is a
 * no-op. Not concurrently with any other call on r. */
KCR_API void kcr_recorder_free(kcr_recorder *r);

/* Records one occurrence; never blocks on the network: validates, applies
 * aggregation and the spam limit, queues, returns. The note is formatted
 * from fmt (NULL for none) and cut to 1024 bytes on a UTF-8 boundary.
 * Returns KCR_OK when the event was accepted - including when it joined a
 * series, coalesced, or was dropped by the spam limit or a full queue (both counted and
 * logged: recording an event is best effort and must not fail the caller's
 * work) - KCR_EINVAL if regarding lacks kind or name, the type is not
 * Normal/Warning, the reason or action is empty or over 128 bytes (nothing
 * is recorded then, also when the note cannot be formatted), KCR_ENOMEM.
 * Every argument is borrowed for the call. Thread safety: any thread. */
KCR_API kcr_err kcr_recorder_eventf(kcr_recorder *r,
                                    const struct kcr_event_ref *regarding,
                                    const char *type, const char *reason,
                                    const char *action, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));
KCR_API kcr_err kcr_recorder_veventf(kcr_recorder *r,
                                     const struct kcr_event_ref *regarding,
                                     const char *type, const char *reason,
                                     const char *action, const char *fmt, va_list ap)
    __attribute__((format(printf, 6, 0)));
/* As eventf with ev->note as it is (no formatting); ev is borrowed for the
 * call. */
KCR_API kcr_err kcr_recorder_event(kcr_recorder *r, const struct kcr_event *ev);

/* Waits until no new event is queued or being sent and every series count
 * has been written (series writes are not held back by series_flush_ms
 * while someone flushes), or timeout_ms passed (0: do not wait, only say
 * whether that is so now; KCR_FOREVER: no limit): KCR_OK, or KCR_ETIMEDOUT.
 * Writes being retried keep their backoff. KCR_EINVAL if r is NULL.
 * Thread safety: any thread. */
KCR_API kcr_err kcr_recorder_flush(kcr_recorder *r, uint64_t timeout_ms);

/* Counters since creation (the same outcomes as kcr_events_total) and the
 * queue now, read together under the recorder's lock. Thread safety: any
 * thread. */
struct kcr_recorder_stats {
  uint64_t sent, aggregated, dropped, failed;
  uint64_t series_writes; /* successful series PATCHes */
  size_t queued;          /* new events waiting now */
  size_t queued_bytes;    /* what new events not yet created hold now */
  size_t tracked;         /* Events remembered for aggregation now */
};
KCR_API void kcr_recorder_get_stats(kcr_recorder *r, struct kcr_recorder_stats *out);

/* ---- pure helpers, used by the recorder and exposed for tests ---- */

/* KCR_OK if type, reason and action are acceptable (see eventf), else
 * KCR_EINVAL. Thread safety: pure. */
KCR_API kcr_err kcr_event_validate(const char *type, const char *reason,
                                   const char *action);

/* How many of the len bytes of s to keep so that at most max bytes remain
 * without splitting a UTF-8 sequence: len if len <= max, else max moved back
 * to the start of the sequence that straddles it. Thread safety: pure. */
KCR_API size_t kcr_event_note_cut(const char *s, size_t len, size_t max);

/* True if a and b would be aggregated into one Event series by one
 * recorder: same regarding kind, namespace, name and uid (api_version and
 * resource_version are ignored: a new version of the object continues the
 * series), type, reason, action and note (NULL equals ""). Thread safety:
 * pure. */
KCR_API bool kcr_event_isomorphic(const struct kcr_event *a, const struct kcr_event *b);

#ifdef __cplusplus
}
#endif

#endif
