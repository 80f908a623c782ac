/* DESIGN: whose a child is, and what ebdman may send about it - pure, so
 * that the rule "never take over an object someone else made" is
 * unit-tested without a cluster.
 *
 * A child (ConfigMap <name>-config, VFM <name>) is ebdman's for an EBD when
 * its controller ownerReference carries that EBD's uid: ebdman sets it on
 * everything it creates, and nobody else has a reason to. Anything else that
 * holds the name - no owner, another controller, an ownerReference to the
 * EBD that is not the controller one, a controller EBD with another uid (a
 * deleted namesake the garbage collector has not reached yet) - is someone
 * else's: ebdman sends nothing to it and reports Installed=False with
 * reason ChildConflict.
 *
 * Deciding from a cache is not enough: the object can appear, or be
 * replaced, between the cache read and the request, and the ConfigMap cache
 * only holds ConfigMaps labelled managed-by=ebdman, so a user's ConfigMap
 * is never in it. Each apply therefore carries a precondition the apiserver
 * checks atomically with the write (k8s.io/apiserver
 * pkg/registry/generic/registry/store.go Update, pkg/endpoints/handlers/
 * patch.go applyPatch):
 *   - create: metadata.resourceVersion EBDMAN_CREATE_ONLY_RV. An apply
 *     that creates ignores the resourceVersion; one that would update
 *     compares it with the stored object's, which is never "1" (etcd's
 *     first write is revision 2), so it fails with 409 Conflict and
 *     changes nothing. A create-only server-side apply in one request,
 *     whose fields are owned by ebdman's Apply manager like any apply's
 *     (a POST would record them under an Update manager, and a later
 *     apply could then never remove a config key or annotation).
 *   - update: metadata.uid of the copy that was seen to be ours. Another
 *     object under the name (deleted and made again) fails with 422
 *     "metadata.uid: field is immutable"; none at all with 409 "uid
 *     mismatch". Not the resourceVersion: it changes with every write of
 *     anyone (vfm-sim's status), which says nothing about whose it is.
 * A refused precondition means the cache was wrong: reconcile reads the
 * object with a GET and decides again. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "ebdman.h"

const char *const ebdman_configmap_keep[] = {"/data", "/metadata/annotations", NULL};

typedef struct kcr_meta_v1_object_meta meta;

/* The uid of m's controller ownerReference (s NULL: none). */
static struct kcr_str controller_uid(const meta *m)
{
  for(size_t i = 0; m && i < m->owner_references.n; i++) {
    const struct kcr_meta_v1_owner_reference *r = &m->owner_references.v[i];
    if(r->has_controller && r->controller && r->has_uid)
      return r->uid;
  }
  return kcr_str_c(NULL);
}

static bool propagated(struct kcr_str name)
{
  size_t plen = sizeof(EBDMAN_VFM_ANNOTATION_PREFIX) - 1;
  return name.n >= plen && !memcmp(name.s, EBDMAN_VFM_ANNOTATION_PREFIX, plen);
}

/* The annotations ebdman propagates: the same set with the same values. */
static bool same_annotations(const meta *want, const meta *have)
{
  const struct kcr_strmap *w = &want->annotations, *h = &have->annotations;

  for(size_t i = 0; i < w->n; i++) {
    size_t j = h->n;
    while(j-- > 0 && !kcr_str_same(h->k[j], w->k[i])) {
    }
    if(j >= h->n || !kcr_str_same(h->v[j], w->v[i]))
      return false;
  }
  for(size_t j = 0; j < h->n; j++) {
    size_t i = w->n;
    if(!propagated(h->k[j]))
      continue;
    while(i-- > 0 && !kcr_str_same(w->k[i], h->k[j])) {
    }
    if(i >= w->n)
      return false;
  }
  return true;
}

bool ebdman_configmap_same(const struct core_v1_config_map *have,
                           const struct core_v1_config_map *want)
{
  return have && kcr_strmap_same(&have->data, &want->data);
}

bool ebdman_vfm_same(const struct vfm *have, const struct vfm *want)
{
  const struct vfm_spec *h = have ? &have->spec : NULL, *w = &want->spec;

  return h && h->has_image == w->has_image &&
         (!w->has_image || kcr_str_same(h->image, w->image)) &&
         h->has_replicas == w->has_replicas &&
         (!w->has_replicas || h->replicas == w->replicas) &&
         kcr_strmap_same(&h->config, &w->config);
}

enum ebdman_child_plan ebdman_child_plan(const meta *have, const meta *want,
                                         bool same_content)
{
  struct kcr_str ours = controller_uid(want), theirs;

  if(!have)
    return EBDMAN_CHILD_CREATE;
  theirs = controller_uid(have);
  if(!ours.n || !theirs.s || !kcr_str_same(ours, theirs))
    return EBDMAN_CHILD_CONFLICT;
  if(same_content && same_annotations(want, have))
    return EBDMAN_CHILD_KEEP;
  return EBDMAN_CHILD_UPDATE;
}

/* What every child of ebd has: metadata (name, the EBD's namespace, the
 * labels, the propagated annotations, the controller reference). */
static kcr_err child_meta(const struct ebd *ebd, struct kcr_arena *a, struct kcr_str name,
                          meta *m, struct kcr_errinfo *ei)
{
  const struct kcr_strmap *from = &ebd->metadata.annotations;
  char *ebd_name = NULL;
  kcr_err rc;
  size_t k = 0;

  if(!ebd->metadata.name.n)
    return kcr_errinfo_set(ei, KCR_EINVAL, "the EBD has no metadata.name");
  if(!(ebd_name = kcr_arena_alloc(a, ebd->metadata.name.n + 1)))
    return KCR_ENOMEM;
  memcpy(ebd_name, ebd->metadata.name.s, ebd->metadata.name.n);
  ebd_name[ebd->metadata.name.n] = '\0';
  KCR_SET(*m, name, name);
  if(ebd->metadata.has_namespace_)
    KCR_SET(*m, namespace_, ebd->metadata.namespace_);
  if((rc = KCR_SET_STRMAP(*m, labels, a, "app.kubernetes.io/managed-by", "ebdman",
                          "ebdman.example.com/ebd", ebd_name)))
    return rc;
  for(size_t i = 0; i < from->n; i++)
    k += propagated(from->k[i]);
  if(k) {
    struct kcr_strmap *to = &m->annotations;
    to->k = kcr_arena_alloc(a, k * sizeof(*to->k));
    to->v = kcr_arena_alloc(a, k * sizeof(*to->v));
    if(!to->k || !to->v)
      return KCR_ENOMEM;
    to->n = 0;
    for(size_t i = 0; i < from->n; i++)
      if(propagated(from->k[i])) {
        to->k[to->n] = from->k[i];
        to->v[to->n++] = from->v[i];
      }
    m->has_annotations = true;
  }
  return ebd_set_controller_of(a, m, ebd, ei);
}

kcr_err ebdman_configmap_for(const struct ebd *ebd, struct kcr_arena *a,
                             struct core_v1_config_map *out, struct kcr_errinfo *ei)
{
  struct kcr_str name = {.n = ebd->metadata.name.n + sizeof("-config") - 1};
  char *at;

  core_v1_config_map_init(out);
  if(!ebd->metadata.name.n)
    return kcr_errinfo_set(ei, KCR_EINVAL, "the EBD has no metadata.name");
  if(!(at = kcr_arena_alloc(a, name.n + 1)))
    return KCR_ENOMEM;
  memcpy(at, ebd->metadata.name.s, ebd->metadata.name.n);
  memcpy(at + ebd->metadata.name.n, "-config", sizeof("-config"));
  name.s = at;
  KCR_SET(*out, data, ebd->spec.vfm_template.config);
  return child_meta(ebd, a, name, &out->metadata, ei);
}

kcr_err ebdman_vfm_for(const struct ebd *ebd, struct kcr_arena *a, struct vfm *out,
                       struct kcr_errinfo *ei)
{
  const struct ebd_spec_vfm_template *from = &ebd->spec.vfm_template;

  vfm_init(out);
  out->has_spec = true;
  if(from->has_image)
    KCR_SET(out->spec, image, from->image);
  if(from->has_replicas)
    KCR_SET(out->spec, replicas, from->replicas);
  if(from->has_config)
    KCR_SET(out->spec, config, from->config);
  return child_meta(ebd, a, ebd->metadata.name, &out->metadata, ei);
}

static kcr_err build_cm(const struct ebd *ebd, struct kcr_arena *a, void *out,
                        struct kcr_errinfo *ei)
{
  return ebdman_configmap_for(ebd, a, out, ei);
}

static kcr_err build_vfm(const struct ebd *ebd, struct kcr_arena *a, void *out,
                         struct kcr_errinfo *ei)
{
  return ebdman_vfm_for(ebd, a, out, ei);
}

static bool same_cm(const void *have, const void *want)
{
  return ebdman_configmap_same(have, want);
}

static bool same_vfm(const void *have, const void *want)
{
  return ebdman_vfm_same(have, want);
}

const struct ebdman_child_kind ebdman_child_configmap = {.gvr = &ebdman_configmaps,
                                                         .type = &core_v1_config_map_type,
                                                         .kind = "ConfigMap",
                                                         .suffix = "-config",
                                                         .field = "/data",
                                                         .src =
                                                             "/spec/vfmTemplate/config",
                                                         .build = build_cm,
                                                         .same = same_cm};
const struct ebdman_child_kind ebdman_child_vfm = {.gvr = &ebdman_vfms,
                                                   .type = &vfm_type,
                                                   .kind = "VFM",
                                                   .suffix = "",
                                                   .field = "/spec",
                                                   .src = "/spec/vfmTemplate",
                                                   .build = build_vfm,
                                                   .same = same_vfm};

static bool empty_map(const struct kcr_span *s)
{
  return s->n == 2 && !memcmp(s->at, "{}", 2);
}

/* Whether annotations' text (absent: none) holds no annotation ebdman
 * propagates, as the text shows it: no name starting with the prefix, and
 * no escape that could spell one. want: the EBD's, where a value that is
 * not a map carries none; else a child's, which must be a map or absent
 * (ebdman_child_plan updates any other). */
static bool none_propagated(const struct kcr_span *s, bool want)
{
  static const char quoted[] = "\"" EBDMAN_VFM_ANNOTATION_PREFIX;

  if(!s->at)
    return true;
  if(*s->at != '{')
    return want;
  return !memchr(s->at, '\\', s->n) && !memmem(s->at, s->n, quoted, sizeof(quoted) - 1);
}

bool ebdman_child_kept_as_is(const char *ebd_uid, const struct kcr_span *src,
                             const struct kcr_span *ebd_ann, const char *ctl_uid,
                             const struct kcr_span *have, const struct kcr_span *have_ann)
{
  if(!ebd_uid || !*ebd_uid || !ctl_uid || strcmp(ctl_uid, ebd_uid))
    return false;
  if(!none_propagated(ebd_ann, true) || !none_propagated(have_ann, false))
    return false;
  if(src->at && *src->at != '{')
    return false; /* no object: it does not decode */
  if(src->at)
    return (have->at && have->n == src->n && !memcmp(have->at, src->at, src->n)) ||
           (!have->at && empty_map(src));
  return !have->at || empty_map(have); /* an EBD without that part: {} */
}

kcr_err ebdman_child_precondition(meta *want, enum ebdman_child_plan plan,
                                  const meta *have)
{
  if((plan != EBDMAN_CHILD_CREATE && plan != EBDMAN_CHILD_UPDATE) ||
     (plan == EBDMAN_CHILD_UPDATE && (!have || !have->has_uid || !have->uid.n)))
    return KCR_EINVAL;
  want->has_resource_version = plan == EBDMAN_CHILD_CREATE;
  want->resource_version =
      kcr_str_c(plan == EBDMAN_CHILD_CREATE ? EBDMAN_CREATE_ONLY_RV : NULL);
  want->has_uid = plan == EBDMAN_CHILD_UPDATE;
  want->uid = plan == EBDMAN_CHILD_UPDATE ? have->uid : kcr_str_c(NULL);
  return KCR_OK;
}

/* Appends printf text to out[n] at *at (truncating, always terminated). */
static void put(char *out, size_t n, size_t *at, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void put(char *out, size_t n, size_t *at, const char *fmt, ...)
{
  va_list ap;
  int k;

  if(*at >= n)
    return;
  va_start(ap, fmt);
  k = vsnprintf(out + *at, n - *at, fmt, ap);
  va_end(ap);
  *at = k < 0 ? n : *at + (size_t)k;
}

/* s, or "" when it is no string (absent): never NULL to %.*s. */
static struct kcr_str or_empty(struct kcr_str s) { return s.s ? s : kcr_str_c(""); }

/* "Kind name (uid U)" of one ownerReference. */
static void put_ref(char *out, size_t n, size_t *at,
                    const struct kcr_meta_v1_owner_reference *r)
{
  put(out, n, at, "%.*s %.*s (uid %.*s)",
      KCR_STR_ARG(r->kind.n ? r->kind : kcr_str_c("?")),
      KCR_STR_ARG(r->name.n ? r->name : kcr_str_c("?")),
      KCR_STR_ARG(r->uid.n ? r->uid : kcr_str_c("?")));
}

/* Who owns have: its controller, else its other owners, else "no owner". */
static void put_owners(char *out, size_t n, size_t *at, const meta *have)
{
  const struct kcr_meta_v1_object_meta_owner_references *refs = &have->owner_references;

  for(size_t i = 0; i < refs->n; i++) {
    if(refs->v[i].has_controller && refs->v[i].controller) {
      put(out, n, at, "its controller is ");
      put_ref(out, n, at, &refs->v[i]);
      return;
    }
  }
  for(size_t i = 0; i < refs->n; i++) {
    put(out, n, at, i ? ", " : "it has no controller; its owners are ");
    put_ref(out, n, at, &refs->v[i]);
  }
  if(!refs->n)
    put(out, n, at, "it has no owner");
}

/* The field managers that wrote have (managedFields; known when it was
 * read with a GET - caches drop them), at most four, each once; not those
 * that wrote only a subresource (the status its controller reports). */
static void put_managers(char *out, size_t n, size_t *at, const meta *have)
{
  struct kcr_str seen[4];
  int k = 0;

  for(size_t i = 0; i < have->managed_fields.n; i++) {
    const struct kcr_meta_v1_managed_fields_entry *mf = &have->managed_fields.v[i];
    struct kcr_str m = mf->manager;
    bool dup = mf->subresource.n > 0;
    for(int j = 0; j < k; j++)
      dup = dup || kcr_str_same(seen[j], m);
    if(!m.n || dup)
      continue;
    if(k == 4) {
      put(out, n, at, ", ...");
      break;
    }
    put(out, n, at, k ? ", %.*s" : "; written by %.*s", KCR_STR_ARG(m));
    seen[k++] = m;
  }
}

void ebdman_child_conflict_msg(char *out, size_t n, const char *kind, const meta *want,
                               const meta *have)
{
  size_t at = 0;

  if(!n)
    return;
  *out = '\0';
  put(out, n, &at, "%s %.*s/%.*s exists and is not this EBD's (", kind ? kind : "child",
      KCR_STR_ARG(or_empty(want->namespace_)), KCR_STR_ARG(or_empty(want->name)));
  put_owners(out, n, &at, have);
  put_managers(out, n, &at, have);
  put(out, n, &at,
      "): ebdman does not take over an object it did not create; delete or rename "
      "that %s, or use another EBD name",
      kind ? kind : "object");
}
