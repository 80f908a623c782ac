/* kcr/manager.h - runs controllers: one client, shared informers, a metrics
 * and health server, optional leader election, and signal handling.
 *
 *   kcr_manager_new(&(struct kcr_manager_opts){.config = cfg, .name = "ebdman",
 *                   .metrics_addr = ":8080", .health_addr = ":8081",
 *                   .leader_elect = true, .lease_namespace = "ebdman-system"}, &m, &ei);
 *   kcr_manager_informer(m, &(struct kcr_informer_opts){.gvr = &ebds}, &inf);
 *   kcr_controller_new(&(struct kcr_controller_opts){.client = kcr_manager_client(m),
 *                      .metrics = kcr_manager_metrics(m), ...}, &ctl, &ei);
 *   kcr_controller_for(ctl, inf, NULL);
 *   kcr_manager_add(m, ctl);
 *   return kcr_manager_run(m);
 *
 * kcr_manager_run starts, in order: the metrics/health servers, the
 * informers, waits for every informer to sync (a clear error naming the one
 * that did not, after sync_timeout_ms), leader election (blocks until this
 * instance leads), the controllers. SIGTERM/SIGINT (or kcr_manager_stop):
 * stop taking new work, let in-flight reconciles finish within grace_ms,
 * release the lease, stop informers and servers; returns 0. A start step
 * that fails (server, informer or controller thread, sync timeout) stops
 * what was started and returns 1 (2 for a server that cannot start).
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
 * synced). Leadership is the separate gauge leader_election_master_status,
 * so a standby replica is ready without leading.
 *
 * Thread safety: set up from one thread before run; kcr_manager_stop from any
 * thread (or a signal). */
#ifndef KCR_MANAGER_H
#define KCR_MANAGER_H

#include <stdbool.h>
#include <stdint.h>

#include "api.h"
#include "client.h"
#include "controller.h"
#include "informer.h"
#include "metrics.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kcr_manager kcr_manager;

struct kcr_manager_opts {
  kcr_config *config;       /* taken over (freed with the manager) */
  const char *name;         /* logs; default lease name "<name>-leader" */
  const char *metrics_addr; /* e.g. ":8080"; NULL or "0": no server */
  const char *health_addr;  /* e.g. ":8081"; may equal metrics_addr */
  bool leader_elect;
  const char *lease_namespace; /* default: the config's namespace or "default" */
  const char *lease_name;
  const char *identity;          /* default: hostname_random */
  uint64_t lease_duration_ms;    /* 15000 */
  uint64_t renew_deadline_ms;    /* 10000 */
  uint64_t retry_period_ms;      /* 2000 */
  uint64_t sync_timeout_ms;      /* 120000 */
  uint64_t grace_ms;             /* 30000 */
  bool no_signals;               /* do not handle SIGTERM/SIGINT; otherwise
                                    kcr_manager_new blocks them in the calling
                                    thread (create the manager before other
                                    threads) and run() waits for them */
  struct kcr_client_opts client; /* timeouts etc.; observe is set by the manager */
};

/* Makes the manager and its client, and binds the metrics and health
 * addresses (served from kcr_manager_run), so a bad or busy address is an
 * error here, before anything starts. Takes over o->config (freed also on
 * failure). Errors: KCR_EINVAL (no config), KCR_ECONFIG (an address that
 * does not parse or resolve), KCR_EIO (cannot bind: in use, permission),
 * KCR_ENOMEM, and the client's errors; ei names what was wrong. */
KCR_API kcr_err kcr_manager_new(const struct kcr_manager_opts *o, kcr_manager **out,
                                struct kcr_errinfo *ei);
KCR_API kcr_client *kcr_manager_client(kcr_manager *m);
KCR_API kcr_metrics *kcr_manager_metrics(kcr_manager *m);
/* The shared informer for (gvr, ns, selectors), made on first request. The
 * manager fills client and metrics in io. Borrowed; lives with the manager. */
KCR_API kcr_err kcr_manager_informer(kcr_manager *m, const struct kcr_informer_opts *io,
                                     kcr_informer **out);
/* Adds a controller; the manager takes ownership. */
KCR_API kcr_err kcr_manager_add(kcr_manager *m, kcr_controller *c);
/* Runs until stopped; see above for the exit code. */
KCR_API int kcr_manager_run(kcr_manager *m);
/* Asks a running manager to stop (async-signal-safe). */
KCR_API void kcr_manager_stop(kcr_manager *m);
/* Reconciles still running (after run returned past its grace period or on
 * lease loss). kcr_manager_free waits for them; a process that wants to exit
 * promptly calls _exit() (not exit(): library atexit handlers, OpenSSL's,
 * free state the running reconciles still use). Any thread. */
KCR_API int kcr_manager_busy(kcr_manager *m);
/* True while this instance leads (always true without election). Any
 * thread. Writes are fenced more strictly: see kcr_leader_may_write. */
KCR_API bool kcr_manager_leading(kcr_manager *m);
/* The health server's bound port (after kcr_manager_new; 0 if none). */
KCR_API int kcr_manager_health_port(kcr_manager *m);
/* Frees the controllers first - each waits for its in-flight reconciles, so
 * nothing they use is freed under them (see kcr_controller_free) - then the
 * elector, the informers, the servers and the manager's client reference.
 * Objects that hold their own client reference (a status writer, a
 * recorder) may be freed before or after. NULL: no-op. */
KCR_API void kcr_manager_free(kcr_manager *m);

#ifdef __cplusplus
}
#endif

#endif
