/* kcr/manager.h - runs controllers: one client, shared informers, a metrics
 * and health server, optional leader election, and signal handling.
 *
 *   kcr_manager_new(&(struct kcr_manager_opts){.config = cfg, .name = "ebdman",
 *                   .metrics_addr = ":8080", .health_addr = ":8081",
 *                   .leader_elect = true, .lease_namespace = "ebdman-system"}, &m, &ei);
 *   kcr_manager_informer(m, &(struct kcr_informer_opts){.gvr = &ebds}, &inf);
 *   kcr_controller_new(&(struct kcr_controller_opts){.client = kcr_manager_client(m),
 *                      .metrics = kcr_manager_metrics(m), ...}, &ctl);
 *   kcr_controller_for(ctl, inf, NULL, 0);
 *   kcr_manager_add(m, ctl);
 *   return kcr_manager_run(m);
 *
 * kcr_manager_run starts, in order: the metrics/health servers, the
 * informers, waits for every informer to sync (a clear error naming the one
 * that did not, after sync_timeout_ms), leader election (blocks until this
 * instance leads), the controllers. SIGTERM/SIGINT (or kcr_manager_stop):
 * stop taking new work, let in-flight reconciles finish within grace_ms,
 * release the lease, stop informers and servers; returns 0. Losing the lease
 * stops everything the same way and returns 1; a sync timeout returns 1.
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

#include "client.h"
#include "controller.h"
#include "informer.h"
#include "metrics.h"

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

kcr_err kcr_manager_new(const struct kcr_manager_opts *o, kcr_manager **out,
                        struct kcr_errinfo *ei);
kcr_client *kcr_manager_client(kcr_manager *m);
kcr_metrics *kcr_manager_metrics(kcr_manager *m);
/* The shared informer for (gvr, ns, selectors), made on first request. The
 * manager fills client and metrics in io. Borrowed; lives with the manager. */
kcr_err kcr_manager_informer(kcr_manager *m, const struct kcr_informer_opts *io,
                             kcr_informer **out);
/* Adds a controller; the manager takes ownership. */
kcr_err kcr_manager_add(kcr_manager *m, kcr_controller *c);
/* Runs until stopped; see above for the exit code. */
int kcr_manager_run(kcr_manager *m);
/* Asks a running manager to stop (async-signal-safe). */
void kcr_manager_stop(kcr_manager *m);
/* True while this instance may reconcile (always true without election). */
bool kcr_manager_leading(kcr_manager *m);
/* The health server's bound port (after run started; 0 if none). */
int kcr_manager_health_port(kcr_manager *m);
void kcr_manager_free(kcr_manager *m);

#endif
