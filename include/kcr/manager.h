/* kcr/manager.h - runs controllers: one client, shared informers, a metrics
 * and health server, optional leader election, and signal handling.
 *
 *   kcr_manager_new(&(struct kcr_manager_opts){.config = cfg, .name = "ebdman",
 *                   .metrics_addr = ":8080", .health_addr = ":8081",
 *                   .leader_elect = true, .lease_namespace = "ebdman-system"}, &m, &ei);
 *   kcr_manager_informer(m, &(struct kcr_informer_opts){.gvr = &ebds}, &inf, &ei);
 *   kcr_controller_new(&(struct kcr_controller_opts){.client = kcr_manager_client(m),
 *                      .metrics = kcr_manager_metrics(m), ...}, &ctl, &ei);
 *   kcr_controller_for(ctl, inf, NULL);
 *   kcr_manager_add(m, ctl);
 *   return kcr_manager_run(m);
 *
 * kcr_manager_run starts, in order: the metrics/health and webhook
 * servers, the informers, waits for every informer to sync (a clear error naming the one
 * that did not, after sync_timeout_ms) but those awaiting their CRD
 * (kcr_informer_opts.await_crd: only their controllers wait), leader election (blocks
 * until this instance leads) - or, with opts.ring, joining the ring (blocks until this
 * replica is a member) -, the controllers. SIGTERM/SIGINT (or kcr_manager_stop): stop
 * taking new work, let in-flight reconciles finish within grace_ms, flush the recorders
 * of kcr_manager_recorder (in what is left of grace_ms, while the lease is still
 * renewed), release the lease, stop informers and servers; returns 0. A start step that
 * fails (server, informer or controller thread, sync timeout) stops what was started and
 * returns 1 (2 for a server that cannot start).
 *
 * Leader election fences writes: with leader_elect, the manager's client
 * refuses every mutating request (KCR_ECANCELED, before anything is sent)
 * unless the lease was renewed less than renew_deadline_ms ago - so a
 * replica that was frozen past its lease cannot write after it wakes up,
 * not even from a reconcile that was in the middle of its writes. Losing
 * the lease stops intake at once, does not wait for in-flight reconciles
 * (they can no longer write) and returns 1: exit the process then, as
 * controller-runtime does (kcr_manager_busy() says whether reconciles are
 * still running; kcr_manager_free would wait for them).
 *
 * /healthz: "ping" (the process is serving). /readyz: "informers" (all
 * synced; one awaiting its CRD passes, named in the check's note:
 * "[+]informers ok: informer X waits for ..." with ?verbose). Leadership is the separate
 * gauge leader_election_master_status, so a standby replica is ready without leading.
 *
 * Thread safety: set up (new, informer, recorder, add) from one thread before run
 * (informers may also come and go while it runs: rule 5 below);
 * run from one thread; kcr_manager_stop from any thread (or a signal
 * handler); kcr_manager_busy, _leading, _client, _metrics, _get and
 * _health_port from any thread. */
#ifndef KCR_MANAGER_H
#define KCR_MANAGER_H

#include <stdbool.h>
#include <stdint.h>

#include "api.h"
#include "certs.h"
#include "client.h"
#include "controller.h"
#include "events.h"
#include "informer.h"
#include "metrics.h"
#include "webhook.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kcr_manager kcr_manager;

/* Options for kcr_manager_new(); zero means the default shown. */
struct kcr_manager_opts {
  kcr_config *config;       /* required; the manager's client takes its own
                               reference: free yours when you like */
  const char *name;         /* "kcr": logs; default lease name "<name>-leader" */
  const char *metrics_addr; /* e.g. ":8080"; NULL, "" or "0": no server */
  const char *health_addr;  /* e.g. ":8081"; may equal metrics_addr (one
                               server) unless metrics_secure */
  /* true: the metrics server serves HTTPS, /metrics only, to bearer tokens
   * that a TokenReview authenticates and a SubjectAccessReview allows `get`
   * on /metrics (kcr_httpd_opts.auth_client; the RBAC it needs is in
   * docs/operations.md). The reviews go through a client of their own, made
   * from config, without the leader-election write gate and with a 10 s
   * timeout. The health server stays plain HTTP and never serves /metrics.
   * false: plain HTTP, /metrics open to anyone who can connect.
   * (controller-runtime's SecureServing plus its FilterProvider
   * WithAuthenticationAndAuthorization, as kubebuilder's --metrics-secure.) */
  bool metrics_secure;
  const char *metrics_cert_dir;  /* with metrics_secure: the directory holding the
                                    certificate and key; NULL: a self-signed
                                    certificate made by kcr_manager_new */
  const char *metrics_cert_name; /* "tls.crt", in metrics_cert_dir */
  const char *metrics_key_name;  /* "tls.key", in metrics_cert_dir */
  /* The webhook server (kcr/webhook.h; kcr_manager_add_webhook): HTTPS on
   * this address (controller-runtime's default port is 9443: ":9443"),
   * with the certificate and key read from webhook_cert_dir (and read again
   * when they change: kcr_httpd_tls.cert_file). NULL, "" or
   * "0": no webhook server. It starts before the informers and serves
   * whether or not this replica leads (every replica answers admission
   * reviews), and stops last. */
  const char *webhook_addr;
  const char *webhook_cert_dir;  /* "/tmp/k8s-webhook-server/serving-certs" */
  const char *webhook_cert_name; /* "tls.crt", in webhook_cert_dir */
  const char *webhook_key_name;  /* "tls.key", in webhook_cert_dir */
  /* Non-NULL: no certificate files; the library makes, keeps (a Secret),
   * rotates and serves the webhook server's certificates and writes the
   * caBundles (kcr/certs.h). Read during kcr_manager_new; the manager sets
   * client (its own, without the leader-election write gate), server and,
   * unless given, leading (kcr_manager_leading) and ns (the lease
   * namespace). The Secret is read or made when run starts, before the
   * server serves. Excludes webhook_cert_dir. */
  const struct kcr_certs_opts *webhook_certs;
  bool leader_elect; /* false: no election, this instance always leads */
  /* Non-NULL: every replica runs the controllers, each on its share of
   * the objects. The manager joins the ring of this name (kcr/shard.h) in
   * lease_namespace as identity (default: the host name, a pod's name;
   * give a StatefulSet's, stable across restarts) with the lease
   * durations below, shards every controller added (kcr_controller_shard:
   * each needs a For source by then), and starts the controllers once this
   * replica is a member. Writes are fenced by the replica's own ring
   * Lease as by a leader's, and a reconcile's writes (through
   * kcr_ctx_client) also by its key's bucket: refused once the bucket is
   * no longer this replica's. Losing the Lease stops the manager (run
   * returns 1). /readyz gains a "ring" check (a member within its renew
   * deadline; the verbose reason counts the buckets owned of those
   * assigned). With leader_elect as well, the replicas also elect a leader
   * on the manager's Lease (lease_name), for the cluster's singletons
   * alone - the library's webhook certificates (webhook_certs follow
   * kcr_manager_leading) - and the controllers do not wait for it; losing
   * that leadership stops the manager (run returns 1) as without a ring.
   * Without leader_elect nothing leads: kcr_manager_leading is false, and
   * the webhook certificates are not written. */
  const char *ring;
  const char *lease_namespace;   /* the config's namespace, else "default" */
  const char *lease_name;        /* "<name>-leader" */
  const char *identity;          /* "<hostname>_<random hex>" */
  uint64_t lease_duration_ms;    /* 15000 */
  uint64_t renew_deadline_ms;    /* 10000 */
  uint64_t retry_period_ms;      /* 2000 */
  uint64_t sync_timeout_ms;      /* 120000; KCR_FOREVER: wait as long as it takes */
  uint64_t grace_ms;             /* 30000: how long run gives in-flight reconciles
                                    on shutdown (kcr_controller_stop's timeout)
                                    and then the recorders' flush, together;
                                    KCR_FOREVER: as long as they take */
  bool no_signals;               /* false: kcr_manager_new blocks SIGTERM/SIGINT
                                    in the calling thread (create the manager
                                    before other threads) and run() stops on
                                    them; true: leave signals alone */
  struct kcr_client_opts client; /* timeouts etc.; observe is set by the manager */
};

/* Makes the manager and its client, and binds the metrics and health
 * addresses (served from kcr_manager_run), so a bad or busy address is an
 * error here, before anything starts. opts is read during the call (the
 * strings are copied; the client takes its own reference to opts->config,
 * which the caller still frees). Release with
 * kcr_manager_free(). Errors: KCR_EINVAL (no opts or config), KCR_ECONFIG
 * (an address that does not parse or resolve), KCR_EIO (cannot bind: in
 * use, permission), KCR_ENOMEM, and the client's errors (kcr_client_new);
 * with metrics_secure also the TLS errors of kcr_httpd_new (KCR_EIO, KCR_ECONFIG: a
 * certificate or key that cannot be read or does not fit); ei names what
 * was wrong. On error *out is NULL. Thread safety: the
 * process's first thread, before it makes others (see no_signals). */
KCR_API kcr_err kcr_manager_new(const struct kcr_manager_opts *opts, kcr_manager **out,
                                struct kcr_errinfo *ei);
/* The manager's client: borrowed, valid until kcr_manager_free (take a
 * reference with kcr_client_ref to keep it longer). Any thread. */
KCR_API kcr_client *kcr_manager_client(kcr_manager *m);
/* The manager's metrics registry: borrowed, valid until kcr_manager_free
 * (take a reference with kcr_metrics_ref to keep it longer; every libkcr
 * object given it takes its own). Any thread. */
KCR_API kcr_metrics *kcr_manager_metrics(kcr_manager *m);
/* The ring this manager joins (kcr_manager_opts.ring): borrowed, valid
 * until kcr_manager_free; NULL without one. For its views (which buckets
 * are this replica's) and listeners. Any thread. */
KCR_API kcr_ring *kcr_manager_ring(kcr_manager *m);
/* The informer registry. A manager keeps the informers its controllers
 * share, under these rules (later features - informers added and removed
 * while running, several namespaces per informer, per-shard stores -
 * extend them and keep them):
 *  1. Identity. An informer is (resource, namespaces): NULL ns means
 *     every namespace; ns or namespaces (kcr_informer_opts) a set of
 *     namespaces, the same set in any order being the same informer; a
 *     namespace_selector the namespaces it selects. A namespace is in at
 *     most one informer of a resource (an object is cached once), and an
 *     informer of every namespace or of a namespace selector is the only
 *     one of its resource. The other options that shape the cache - label and field
 *     selectors, keep list (the same paths in the same order),
 *     keep_managed_fields, shard_by - belong to the resource: every informer of one
 *     resource has the same ones, so an object looked up by resource is
 *     found the same way whichever informer holds it. A metadata-only informer
 *     (kcr_informer_opts.metadata_only) is of another resource under these
 *     rules, "<group>/<version>/<resource> (metadata)": it may sit beside
 *     full ones of the same resource, with options of its own, and the
 *     cached reads by gvr below never read it.
 *  2. Ownership. The manager makes, starts, stops and frees its
 *     informers; a kcr_informer * it hands out is borrowed until
 *     kcr_manager_free (not beyond), and so is its store.
 *  3. Reads. kcr_manager_get hands out a new reference to an immutable
 *     object: it stays valid however long it is kept, also after its
 *     informer is gone. Release it with kcr_obj_unref.
 *  4. Lookups never block on I/O: the registry has its own lock, held
 *     only to find an informer.
 *  5. Informers come and go while run runs. kcr_manager_informer called
 *     then (from any thread: a reconcile, a webhook) makes the informer
 *     and starts it at once; the manager does not wait for it - until its
 *     list is in, cached reads of it say KCR_ENOTFOUND, so wait with
 *     kcr_informer_wait_synced first - and neither handlers nor indexes
 *     can be added to it (kcr_informer_add_handlers refuses a started
 *     informer, kcr_store_add_index a written store): it serves cached
 *     reads (kcr_manager_get, kcr_manager_list_typed without an index), so
 *     register at setup what a controller watches. Until it syncs,
 *     /readyz passes and names it
 *     (a note). kcr_manager_remove_informer takes one out. A
 *     lookup that found an informer just before it was removed reads its
 *     emptied store: "not found", never freed memory.
 *
 * kcr_manager_informer: the informer for (gvr, ns) in *out, made on the
 * first request and returned again for the same (gvr, ns, selectors, keep
 * list); the other fields of later requests are then ignored. The manager
 * fills in client and metrics. *out is borrowed (rule 2) and started and
 * stopped by run (started at once when run runs: rule 5). Errors: KCR_EINVAL (no opts or
 * gvr, 32 informers already, or kcr_informer_new's; ei names the field), KCR_EEXIST (an
 * informer of the resource with other selectors or keep list, one of every
 * namespace or of a namespace selector beside another, or a namespace in
 * two - rule 1; ei names both),
 * KCR_ENOMEM (also: its threads could not be made while run runs). On
 * error *out is NULL. Thread safety: the setup thread before run; any
 * thread while run runs (rule 5). */
KCR_API kcr_err kcr_manager_informer(kcr_manager *m, const struct kcr_informer_opts *opts,
                                     kcr_informer **out, struct kcr_errinfo *ei);
/* Removes inf, an informer of m's registry, before or while run runs
 * (rule 5): it is stopped (its threads joined: not from one of its own
 * handlers) and its store emptied without on_delete; the manager's cached
 * reads of its resource and namespaces then fail with KCR_EINVAL as for
 * one never made, and kcr_manager_informer may make a new one for them.
 * References to its objects stay valid (rule 3), and so do inf and its
 * store - stopped and empty - until kcr_manager_free (rule 2), so a
 * pointer kept elsewhere does not dangle. Errors: KCR_EINVAL (inf NULL,
 * not in m's registry - never made by it, or removed already - or a
 * source of one of m's controllers, whose sources stay while it runs; ei
 * names it), KCR_ENOMEM (nothing removed). Thread safety: any thread but
 * inf's own. */
KCR_API kcr_err kcr_manager_remove_informer(kcr_manager *m, kcr_informer *inf,
                                            struct kcr_errinfo *ei);
/* Makes reads of gvr's resource uncached, as controller-runtime's
 * client.CacheOptions.DisableFor: kcr_manager_get (and the typed _get)
 * sends a GET to the apiserver each time, kcr_manager_list_typed (the
 * typed _list) a LIST of the namespace (without an index: an index needs
 * a cache), and the resource is never listed or watched - for kinds a
 * controller reads rarely (the Secret a reconcile mounts by name), whose
 * cache would grow with the cluster. The objects are store objects as the
 * cache would hold them (managedFields dropped). Calling it again for the
 * same resource does nothing. A metadata-only informer of the resource
 * (kcr_manager_informer with metadata_only) may sit beside it. Errors:
 * KCR_EINVAL (no gvr, version or resource; 16 uncached resources
 * already), KCR_EEXIST (the resource has an informer: its reads are
 * cached; ei says so), KCR_ENOMEM. Thread safety: the setup thread,
 * before run. */
KCR_API kcr_err kcr_manager_uncached(kcr_manager *m, const struct kcr_gvr *gvr,
                                     struct kcr_errinfo *ei);
/* A cached read across informers, as controller-runtime's
 * mgr.GetClient().Get from its cache: a new reference (rule 3 above) to
 * object ns/name (ns ignored for a cluster-scoped gvr) from the manager's
 * informer of that resource - the one whose namespaces hold ns, or else
 * the one of every namespace or of a namespace selector. With a keep list
 * the object is the projected one.
 * With kcr_manager_uncached(gvr) it is a GET instead, and its errors
 * kcr_get's (KCR_ENOTFOUND: no such object).
 * Errors: KCR_ENOTFOUND (no such object in the cache: not there, not
 * synced yet, or filtered out by the resource's selectors), KCR_EBUDGET
 * (the informer is over its byte budget, kcr_informer_opts.max_bytes: its
 * cache is emptied until it lists again, so "not found" would be a lie; ei
 * says why, as kcr_informer_why_unsynced), KCR_EINVAL (no
 * informer of that resource for ns in this manager - a setup mistake, not
 * an absent object - no or an empty ns for a namespaced gvr, or no gvr,
 * name or out; ei names which). On error
 * *out is NULL. Thread safety: any thread, from setup on. */
KCR_API kcr_err kcr_manager_get(kcr_manager *m, const struct kcr_gvr *gvr, const char *ns,
                                const char *name, kcr_obj **out, struct kcr_errinfo *ei);
/* kcr_manager_get, decoded into a typed object (kcr/typed.h): *out, a
 * t->size struct, decoded from the cached object's text as flags say - 0
 * a view that borrows from the object, or KCR_TYPED_COPY a copy,
 * everything in arena a. With obj (required for a view) the object's
 * reference goes to *obj: release it with kcr_obj_unref, for a view after
 * the last use of *out; with obj NULL (a copy only) it is released here.
 * What kcr-gen's <kind>_get calls:
 *   rc = ebd_get(m, req->ns, req->name, 0, kcr_ctx_arena(cx), &e, &o, &ei);
 * Errors: those of kcr_manager_get (KCR_ENOTFOUND: not in the cache),
 * KCR_EINVAL (t, a or out missing; obj NULL for a view), those of
 * kcr_typed_decode (the cached text is not of type t: KCR_EPARSE naming
 * the value), KCR_ENOMEM. On error *obj is NULL, no reference is kept, and
 * *out must not be used (a view's strings may point into the released
 * object).
 * Thread safety: as kcr_manager_get; a is the caller's. */
KCR_API kcr_err kcr_manager_get_typed(kcr_manager *m, const struct kcr_type *t,
                                      const struct kcr_gvr *gvr, const char *ns,
                                      const char *name, unsigned flags,
                                      struct kcr_arena *a, void *out, kcr_obj **obj,
                                      struct kcr_errinfo *ei);
/* A cached list across informers, as controller-runtime's
 * mgr.GetClient().List from its cache, decoded into typed objects
 * (kcr/typed.h): the objects of the manager's informers of gvr in
 * namespace ns - the informer whose namespaces hold ns, or else the one of
 * every namespace or of a namespace selector (keeping ns's objects); ns NULL or "" (or a
 * cluster-scoped gvr): every informer of the resource - and, with index (not NULL), only
 * those that the store's index of that name maps to value (kcr_store_add_index;
 * kcr_store_add_label_index's KCR_INDEX_LABEL_PREFIX "app" holds the
 * objects labelled app=value). *items is an array of *n t->size structs in
 * arena a (NULL when *n is 0), in no particular order, each decoded as
 * flags say: 0 views borrowing from the objects, whose references go to
 * *objs (release them with kcr_objs_unref(*objs, *n) after the last use of
 * the items), or KCR_TYPED_COPY copies (objs may then be NULL: released
 * here). What kcr-gen's <kind>_list calls:
 *   rc = core_v1_config_map_list(m, req->ns, KCR_INDEX_LABEL_PREFIX "app",
 *                                kcr_str_c("web"), KCR_TYPED_COPY, a, &cms, &n,
 *                                NULL, ei);
 * Errors: KCR_EINVAL (no informer of the resource for ns - a setup
 * mistake -, no index of that name, an index without value.s, t, a,
 * items, n or gvr missing, a view without objs; ei names which),
 * KCR_EBUDGET (an informer it reads is over its byte budget: see
 * kcr_manager_get), those of
 * kcr_typed_decode (an object not of type t: KCR_EPARSE, ei names the
 * object and the value), KCR_ENOMEM. On error *items, *n and *objs are
 * empty and no reference is kept. Thread safety: any thread, from setup
 * on; a is the caller's. */
KCR_API kcr_err kcr_manager_list_typed(kcr_manager *m, const struct kcr_type *t,
                                       const struct kcr_gvr *gvr, const char *ns,
                                       const char *index, struct kcr_str value,
                                       unsigned flags, struct kcr_arena *a, void **items,
                                       size_t *n, kcr_obj ***objs,
                                       struct kcr_errinfo *ei);
/* An event recorder owned by the manager, as controller-runtime's
 * mgr.GetEventRecorderFor: made from opts as kcr_recorder_new does, with
 * the manager's client when opts->client (and opts->sink) is NULL and the
 * manager's metrics when opts->metrics is NULL. run flushes it once the
 * controllers have stopped and before the lease is released - within what
 * is left of grace_ms - so the last events and series counts of a
 * replica that stops are written; when the lease was lost, what is
 * pending is dropped instead (this replica may not write any more).
 * kcr_manager_free frees it after the controllers: do not free it
 * yourself. *out is borrowed until kcr_manager_free; use it from any
 * thread. Errors: KCR_EINVAL (no opts or out, 8 recorders already), and
 * kcr_recorder_new's. On error *out is NULL. Thread safety: the setup
 * thread, before run. */
KCR_API kcr_err kcr_manager_recorder(kcr_manager *m, const struct kcr_recorder_opts *opts,
                                     kcr_recorder **out, struct kcr_errinfo *ei);
/* Adds a controller, which the manager then owns (starts, stops and frees
 * it); with opts.ring, shards it first (kcr_controller_shard). Errors:
 * KCR_EINVAL (c NULL, or 16 controllers already; with a ring, c has no For
 * source yet), and with a ring kcr_controller_shard's KCR_ERANGE,
 * KCR_EEXIST and KCR_ENOMEM: the caller still owns c. Thread safety: the
 * setup thread, before run. */
KCR_API kcr_err kcr_manager_add(kcr_manager *m, kcr_controller *c);
/* Runs until stopped (see above) and returns the process exit code it
 * suggests: 0 after a stop request (SIGTERM, SIGINT, kcr_manager_stop), 1
 * when a start step failed or the lease was lost, 2 when the metrics/health
 * server cannot start. Call it once, from one thread. */
KCR_API int kcr_manager_run(kcr_manager *m);
/* Asks a running (or about to run) manager to stop; returns at once.
 * Thread safety: any thread; async-signal-safe. */
KCR_API void kcr_manager_stop(kcr_manager *m);
/* The number of reconciles still running, summed over the controllers (0
 * unless run returned past its grace period or on lease loss).
 * kcr_manager_free waits for them; a process that wants to exit promptly
 * calls _exit() (not exit(): library atexit handlers, OpenSSL's, free state
 * the running reconciles still use). Thread safety: any thread. */
KCR_API int kcr_manager_busy(kcr_manager *m);
/* True while this instance leads (always true without election; with a
 * ring, true only with leader_elect, on the replica that holds the
 * leader's Lease). Any thread. Writes are fenced more strictly: see
 * kcr_leader_may_write. */
KCR_API bool kcr_manager_leading(kcr_manager *m);
/* The TCP port the health server is bound to (the kernel's choice for port
 * 0), valid from kcr_manager_new on; 0 when there is no server. When the
 * health and metrics addresses are the same, that one server's; without a
 * health address, the metrics server's (unless metrics_secure: that one
 * serves no probes). Thread safety: any thread. */
KCR_API int kcr_manager_health_port(kcr_manager *m);
/* Serves an admission webhook on the manager's webhook server
 * (kcr_webhook_add; opts->metrics NULL: the manager's registry). Before or
 * after run. Errors: KCR_EINVAL (no webhook_addr was given: ei says so),
 * and kcr_webhook_add's. Thread safety: any thread. */
KCR_API kcr_err kcr_manager_add_webhook(kcr_manager *m,
                                        const struct kcr_webhook_opts *opts,
                                        struct kcr_errinfo *ei);
/* Serves a CRD conversion webhook on the manager's webhook server
 * (kcr_conversion_add; opts->metrics NULL: the manager's registry). As
 * kcr_manager_add_webhook otherwise. */
KCR_API kcr_err kcr_manager_add_conversion(kcr_manager *m,
                                           const struct kcr_conversion_opts *opts,
                                           struct kcr_errinfo *ei);
/* The webhook server's TCP port (bound from kcr_manager_new on; the
 * kernel's choice for port 0), 0 without one. Any thread. */
KCR_API int kcr_manager_webhook_port(kcr_manager *m);
/* Frees the controllers first - each waits for its in-flight reconciles, so
 * nothing they use is freed under them (see kcr_controller_free) - then the
 * recorders of kcr_manager_recorder, the elector, the informers, the
 * servers and the manager's client and metrics references. Objects made
 * with the manager's client or metrics that the caller owns (a status
 * writer, a recorder of kcr_recorder_new) hold references of their own and
 * may be freed before or after it. NULL: no-op. */
KCR_API void kcr_manager_free(kcr_manager *m);

#ifdef __cplusplus
}
#endif

#endif
