/* ebdman - the operator of the mission: for each EBD it installs a ConfigMap
 * and a VFM without waiting, watches the VFM, and reports Installed,
 * VFMHealthy and Ready conditions (with observedGeneration) using
 * conflict-free server-side apply, writing only when something changed. */
#ifndef EBDMAN_H
#define EBDMAN_H

#include "kcr.h"
#include "kcr/controller.h"
#include "kcr/manager.h"
#include "kcr/status.h"

#define EBDMAN_GROUP         "ebdman.example.com"
#define EBDMAN_API_VERSION   "ebdman.example.com/v1alpha1"
#define EBDMAN_FIELD_MANAGER "ebdman"
#define EBDMAN_VERSION       "0.1.0"
/* Annotations with this prefix are copied from the EBD to its VFM. */
#define EBDMAN_VFM_ANNOTATION_PREFIX "vfm-sim.ebdman.example.com/"

extern const struct kcr_gvr ebdman_ebds, ebdman_vfms, ebdman_configmaps;

/* The conditions ebdman owns, computed from what it observed. Strings point
 * into static text or into the arena / inputs; valid for one reconcile. */
struct ebdman_observed {
  int64_t generation;         /* the EBD's metadata.generation */
  bool install_failed;        /* the apply of a child failed */
  const char *install_error;  /* the server's message when it failed */
  bool applied_new_spec;      /* this reconcile changed the VFM's spec */
  const cJSON *vfm;           /* the VFM from the cache, or NULL */
  const char *vfm_read_error; /* reading the VFM failed: why */
};

enum { EBDMAN_COND_INSTALLED, EBDMAN_COND_VFM, EBDMAN_COND_READY, EBDMAN_NCOND };

/* Computes Installed, VFMHealthy, Ready from the observation (pure). */
void ebdman_conditions(const struct ebdman_observed *ob,
                       struct kcr_cond out[EBDMAN_NCOND]);

/* Builds the children for an EBD tree (new trees, caller frees). */
cJSON *ebdman_configmap_for(const cJSON *ebd);
cJSON *ebdman_vfm_for(const cJSON *ebd);

struct ebdman_run_opts {
  const char *kubeconfig, *ns, *metrics_addr, *health_addr, *lease_ns;
  int workers;
  bool leader_elect;
  uint64_t resync_ms;
};
int ebdman_run(const struct ebdman_run_opts *o);

int cmd_run(int argc, char **argv);
int cmd_status(int argc, char **argv);
int cmd_demo(int argc, char **argv);

#endif
