/* ebdman - the operator of the mission: for each EBD it installs a ConfigMap
 * and a VFM without waiting, watches the VFM, and reports Installed,
 * VFMHealthy and Ready conditions - and, while not Ready, Reconciling or
 * Stalled for kstatus - (with observedGeneration) using conflict-free
 * server-side apply, writing only when something changed. */
#ifndef EBDMAN_H
#define EBDMAN_H

#include <stdio.h>
#include <time.h>

#include "kcr.h"
#include "kcr/controller.h"
#include "kcr/manager.h"
#include "kcr/status.h"

#define EBDMAN_GROUP         "ebdman.example.com"
#define EBDMAN_API_VERSION   "ebdman.example.com/v1alpha1"
#define EBDMAN_FIELD_MANAGER "ebdman"
/* ebdman is released with libkcr and carries its version. */
#define EBDMAN_VERSION KCR_VERSION
/* Annotations with this prefix are copied from the EBD to its VFM. */
#define EBDMAN_VFM_ANNOTATION_PREFIX "vfm-sim.ebdman.example.com/"

extern const struct kcr_gvr ebdman_ebds, ebdman_vfms, ebdman_configmaps;

/* The conditions ebdman owns, computed from what it observed. Strings point
 * into static text or into the arena / inputs; valid for one reconcile. */
struct ebdman_observed {
  int64_t generation;          /* the EBD's metadata.generation */
  bool install_failed;         /* a child could not be installed */
  const char *install_reason;  /* why, as a reason: NULL is InstallFailed (the
                                  server refused the apply); ChildConflict,
                                  NamespaceTerminating */
  const char *install_error;   /* the message: the server's, or the conflict */
  bool applied_new_spec;       /* this reconcile changed the VFM's spec */
  bool vfm_seen;               /* the cache holds our VFM (ebdman_observe_vfm) */
  const cJSON *vfm_conditions; /* then its status.conditions (NULL: none) */
  int64_t vfm_generation;      /* and its metadata.generation */
  const char *vfm_read_error;  /* reading the VFM failed: why */
  /* Where a message longer than a condition may hold is cut
   * (the reconcile's arena); NULL: a fixed text replaces it. */
  struct kcr_arena *arena;
};

enum {
  EBDMAN_COND_INSTALLED,
  EBDMAN_COND_VFM,
  EBDMAN_COND_READY,
  EBDMAN_COND_ABNORMAL, /* Reconciling or Stalled, only while not Ready */
  EBDMAN_NCOND
};
/* kstatus's abnormal-true conditions (sigs.k8s.io/cli-utils pkg/kstatus). */
#define EBDMAN_COND_RECONCILING "Reconciling"
#define EBDMAN_COND_STALLED     "Stalled"

/* Computes the conditions from the observation (pure) into out[0..n), and
 * returns n: Installed, VFMHealthy, Ready; and, when Ready is False, a 4th
 * with Ready's reason and message: Stalled=True when Installed is False or
 * the VFM reports Failed (kstatus: Failed), else Reconciling=True (kstatus:
 * InProgress). When Ready is True n is 3: the absent abnormal conditions are
 * removed by the status writer's server-side apply (conditions.c says why).
 * Every condition passes kcr_cond_validate: a message (the server's, the
 * VFM's) over KCR_COND_MESSAGE_MAX bytes is cut on a UTF-8 boundary and ends
 * with "...". */
size_t ebdman_conditions(const struct ebdman_observed *ob,
                         struct kcr_cond out[EBDMAN_NCOND]);
/* Sets what ob says of the VFM from a tree of it (NULL: none seen):
 * vfm_seen, vfm_conditions (borrowed from vfm) and vfm_generation. Pure. */
void ebdman_observe_vfm(struct ebdman_observed *ob, const cJSON *vfm);
/* The same from a cached VFM (not NULL), parsing only its
 * status.conditions - or, for a text kcr_obj_spans cannot walk, the whole
 * object - into *hold (the caller frees it after ebdman_conditions; NULL
 * when nothing was parsed). Out of memory: vfm_read_error is set. */
void ebdman_observe_vfm_obj(struct ebdman_observed *ob, const kcr_obj *vfm, cJSON **hold);

/* Builds the children for an EBD tree (new trees, caller frees). */
/* Each is complete or NULL: NULL when out of memory or the EBD has no
 * metadata.name. A metadata.annotations that is not a map (an array, a
 * string) carries no annotation to copy. */
cJSON *ebdman_configmap_for(const cJSON *ebd);
cJSON *ebdman_vfm_for(const cJSON *ebd);

/* ---- children (children.c): whose a child is and what to send, pure ---- */

/* What reconcile does about one child, decided from a stored copy. */
enum ebdman_child_plan {
  EBDMAN_CHILD_KEEP,     /* ours and as wanted: no request */
  EBDMAN_CHILD_CREATE,   /* absent: a create-only apply */
  EBDMAN_CHILD_UPDATE,   /* ours and out of date: an apply pinned to its uid */
  EBDMAN_CHILD_CONFLICT, /* someone else's: no request, ChildConflict */
};
/* The resourceVersion of a create-only apply: no stored object has it, so
 * the apply creates the object or, when one exists, fails with 409 and
 * changes nothing (children.c says why). */
#define EBDMAN_CREATE_ONLY_RV "1"
/* The reason of Installed=False for a child that is someone else's. */
#define EBDMAN_REASON_CHILD_CONFLICT "ChildConflict"
/* ... and for a child that cannot be made because its namespace is being
 * deleted (403 with cause NamespaceTerminating). */
#define EBDMAN_REASON_NAMESPACE_TERMINATING "NamespaceTerminating"

/* What the caches of the children keep (kcr_informer_opts.keep), besides
 * the metadata every cache keeps (name, uid, generation, ownerReferences
 * ...): the content and the propagated annotations ebdman_child_plan
 * compares, and for the VFM the conditions VFMHealthy is computed from.
 * Nothing sends a cached child back: a plan that needs more of a child
 * (a conflict's message) reads it with a GET. */
extern const char *const ebdman_vfm_keep[];
extern const char *const ebdman_configmap_keep[];

/* Decides from `have`, the stored child (from the cache or a GET; NULL when
 * absent), and `want` (ebdman_configmap_for / ebdman_vfm_for, whose
 * controller ownerReference names the EBD): ours when have's controller
 * ownerReference has want's uid, then KEEP when `field` ("/data", "/spec": a path)
 * and the propagated annotations are as wanted. Pure. */
enum ebdman_child_plan ebdman_child_plan(const cJSON *have, const cJSON *want,
                                         const char *field);
/* Whether a cached child is ours and as wanted, judged from texts alone
 * (kcr_obj_spans of the EBD and the child; each span NULL when absent): the
 * KEEP of ebdman_child_plan decided without a tree - what most reconciles
 * find. Sound, not complete: true only when ebdman_child_plan on the trees
 * of those texts gives KEEP; false leaves the decision to it. True when the
 * child's controller uid is the EBD's uid (non-empty), its content `have`
 * (data, spec) is the EBD's part it copies, `src` (spec.vfm.config,
 * spec.vfm), byte for byte - or both are empty ({} and absent alike; a part
 * that is not an object is {}) - and neither the EBD's annotations
 * (ebd_ann) nor the child's (have_ann, a map or absent) hold one ebdman
 * propagates (a name with the prefix; any escape in them leaves it to the
 * trees). Exceptions, none of which the API server sends: a member name
 * twice in the content, and a number beyond a double's range (the trees
 * compare either as different from itself). The caller checks that the
 * texts could be walked (kcr_obj_spans found metadata.name) and that a
 * child can be built of the EBD. Pure. */
bool ebdman_child_kept_as_is(const char *ebd_uid, const struct kcr_span *src,
                             const struct kcr_span *ebd_ann, const char *ctl_uid,
                             const struct kcr_span *have,
                             const struct kcr_span *have_ann);
/* Whether have (NULL: no) already holds want's `field` (absent and {} are
 * the same). Pure. */
bool ebdman_child_same_content(const cJSON *have, const cJSON *want, const char *field);
/* Sets want's precondition for an apply of `plan`: CREATE puts
 * metadata.resourceVersion EBDMAN_CREATE_ONLY_RV, UPDATE have's
 * metadata.uid; either removes the other. Errors: KCR_EINVAL (plan is
 * neither, want has no metadata, UPDATE and have has no uid), KCR_ENOMEM;
 * want may then have lost its old precondition. Pure. */
kcr_err ebdman_child_precondition(cJSON *want, enum ebdman_child_plan plan,
                                  const cJSON *have);
/* Writes to out[n] (always terminated when n > 0, cut when too long) the
 * Installed message for a child that is someone else's: want's kind,
 * namespace/name, have's controller or owners, the field managers that
 * wrote it (when have carries managedFields), and what to do. Pure. */
void ebdman_child_conflict_msg(char *out, size_t n, const cJSON *want, const cJSON *have);

/* What `ebdman run` was told (kcr/cli.h's standard sets fill config and
 * manager; ebdman_run sets the manager's config and user agent). */
struct ebdman_run_opts {
  struct kcr_config_opts config;
  struct kcr_manager_opts manager;
  const char *ns; /* NULL: all namespaces */
  int workers;
  uint64_t resync_ms;
};
int ebdman_run(const struct ebdman_run_opts *o);

int cmd_run(int argc, char **argv);
int cmd_status(int argc, char **argv);
int cmd_demo(int argc, char **argv);

/* ---- ebdman status (cmd_status.c): pure parts, unit-tested ---- */

/* Bytes a table cell holds, with its terminating NUL. */
#define EBDMAN_CELL_MAX 160

/* Copies untrusted text into out[n] as it is safe to show on a terminal:
 * control characters escaped (ESC -> ^[, CR -> \r, LF -> \n, TAB -> \t,
 * other C0 and DEL -> ^X, C1 controls, bidirectional controls and line
 * separators -> \uXXXX, bytes of invalid UTF-8 -> \xNN; see cmd_status.c).
 * Text that does not fit is cut at a character boundary and ends with "..."
 * (when n >= 4). out is always NUL-terminated when n > 0; in NULL is "".
 * Returns the width of out in characters (code points). Pure. */
size_t ebdman_term_escape(char *out, size_t n, const char *in);

/* Prints the table of `objs` (a JSON array of EBDs, in the order given) to
 * out: a header, then one row per EBD (NAMESPACE first when all_ns), columns
 * aligned by characters, every cell escaped with ebdman_term_escape and
 * absent fields shown as "-"; AGE is counted up to `now`. Any object shape is
 * accepted. Errors: KCR_ENOMEM, KCR_EIO (writing out failed). */
kcr_err ebdman_status_table(FILE *out, const cJSON *objs, bool all_ns, time_t now);
/* Sorts the array's items by namespace, then name (absent sorts as "").
 * Errors: KCR_ENOMEM (then the array is unchanged). */
kcr_err ebdman_status_sort(cJSON *objs);
/* Applies a watch event to the array of EBDs: ADDED/MODIFIED replace the
 * item with the same namespace/name (or append) and take ev->object (set to
 * NULL); DELETED removes it. Events that name no object (no metadata.name,
 * BOOKMARK, ERROR) are ignored. Returns whether the array may have changed. */
bool ebdman_status_apply(cJSON *objs, struct kcr_watch_event *ev);

#endif
