/* ebdman's admission webhooks: a validating one that refuses an EBD whose
 * child's name is already someone else's object (the ChildConflict the
 * reconcile would report, caught at creation from the children's caches),
 * and a defaulting one that fills in spec.vfmTemplate.image from the operator's
 * --default-vfm-image. docs/operations.md, "Webhooks", says how they are
 * installed and what each failure policy does. */
#include <string.h>

#include "ebdman.h"

typedef struct kcr_meta_v1_object_meta meta;

/* Whether ref names an EBD (any version of ebdman's group) as controller. */
static bool ebd_controller(const struct kcr_meta_v1_owner_reference *ref)
{
  size_t g = strlen(EBDMAN_GROUP);

  return ref->has_controller && ref->controller && kcr_str_eq(ref->kind, "EBD") &&
         ref->api_version.n > g && !memcmp(ref->api_version.s, EBDMAN_GROUP, g) &&
         ref->api_version.s[g] == '/';
}

enum ebdman_admit ebdman_child_admit(const char *kind, struct kcr_str ebd_name,
                                     const char *ebd_uid, const meta *want,
                                     const meta *have, char *msg, size_t n)
{
  if(n)
    *msg = '\0';
  if(!have)
    return EBDMAN_ADMIT_ALLOW;
  for(size_t i = 0; i < have->owner_references.n; i++) {
    const struct kcr_meta_v1_owner_reference *ref = &have->owner_references.v[i];
    if(!ebd_controller(ref))
      continue;
    if(ebd_uid && *ebd_uid && kcr_str_eq(ref->uid, ebd_uid))
      return EBDMAN_ADMIT_ALLOW;
    if(!kcr_str_same(ref->name, ebd_name))
      break; /* another EBD's, by name: it stays */
    if(n)
      snprintf(msg, n,
               "%s %.*s/%.*s belongs to an earlier EBD named %.*s (uid %.*s); ebdman "
               "installs this EBD's once that one is deleted and the garbage collector "
               "has removed it",
               kind, KCR_STR_ARG(want->namespace_), KCR_STR_ARG(want->name),
               KCR_STR_ARG(ref->name), KCR_STR_ARG(ref->uid));
    return EBDMAN_ADMIT_WARN;
  }
  ebdman_child_conflict_msg(msg, n, kind, want, have);
  return EBDMAN_ADMIT_DENY;
}

/* Whether the request is for a namespace this ebdman manages (--namespace,
 * --namespace-selector). */
static bool managed(const struct ebdman_webhooks *w,
                    const struct kcr_admission_request *rq)
{
  char ns[64]; /* a namespace name has at most 63 bytes */
  /* Before the namespaces are known, every request is judged: passing one
   * ebdman will manage would skip its defaulting. */
  if(!w->ebds || !kcr_informer_has_synced(w->ebds))
    return true;
  if(rq->namespace_.n >= sizeof(ns))
    return false;
  memcpy(ns, rq->namespace_.s, rq->namespace_.n);
  ns[rq->namespace_.n] = 0;
  return kcr_informer_selects_namespace(w->ebds, ns);
}

/* Judges the child of kind ch named after the EBD (ns, name, uid) from
 * the cache store: denies or warns through adm. Returns whether it denied. */
static bool admit_child(kcr_admission *adm, kcr_store *store,
                        const struct ebdman_child_kind *ch, const char *ns,
                        const char *name, const char *uid)
{
  struct kcr_arena *a = kcr_admission_arena(adm);
  char child[320], msg[1024];
  enum ebdman_admit verdict;
  void *have;
  kcr_obj *o;
  size_t len;
  const char *json;

  if(!store)
    return false;
  snprintf(child, sizeof(child), "%s%s", name, ch->suffix);
  if(!(o = kcr_store_ref(store, ns, child)))
    return false;
  json = kcr_obj_json(o, &len);
  have = kcr_arena_alloc(a, ch->type->size);
  if(!have || kcr_typed_decode(ch->type, json, len, KCR_TYPED_COPY | KCR_TYPED_TRUSTED, a,
                               have, NULL)) {
    kcr_obj_unref(o); /* unreadable: the reconcile judges it */
    return false;
  }
  kcr_obj_unref(o);
  meta want = {.name = kcr_str_c(child), .namespace_ = kcr_str_c(ns)};
  verdict = ebdman_child_admit(ch->kind, kcr_str_c(name), uid, &want,
                               kcr_typed_meta(ch->type, have), msg, sizeof(msg));
  if(verdict == EBDMAN_ADMIT_DENY)
    kcr_admission_deny(adm, 0, "%s", msg);
  else if(verdict == EBDMAN_ADMIT_WARN)
    kcr_admission_warn(adm, "%s", msg);
  return verdict == EBDMAN_ADMIT_DENY;
}

kcr_err ebdman_validate_ebd(kcr_admission *adm, const struct kcr_admission_request *rq,
                            void *ud)
{
  const struct ebdman_webhooks *w = ud;
  struct kcr_arena *a = kcr_admission_arena(adm);
  const char *ns, *name, *uid;
  struct ebd e;
  kcr_err rc;

  /* A name cannot change, so only a creation can take a child's name. */
  if(rq->operation != KCR_ADMISSION_CREATE || !rq->object.s || !managed(w, rq))
    return KCR_OK;
  if((rc = ebd_decode(rq->object.s, rq->object.n, 0, a, &e, kcr_admission_ei(adm))))
    return rc;
  ns = kcr_arena_printf(a, "%.*s", KCR_STR_ARG(rq->namespace_));
  name = kcr_arena_printf(a, "%.*s", KCR_STR_ARG(e.metadata.name));
  uid = kcr_arena_printf(a, "%.*s", KCR_STR_ARG(e.metadata.uid));
  if(!ns || !name || !uid)
    return KCR_ENOMEM;
  if(!*name) /* generateName: no name yet, so no child's name to check */
    return KCR_OK;
  if(!admit_child(adm, w->vfms, &ebdman_child_vfm, ns, name, uid))
    admit_child(adm, w->cms, &ebdman_child_configmap, ns, name, uid);
  return KCR_OK;
}

kcr_err ebdman_default_ebd(kcr_admission *adm, const struct kcr_admission_request *rq,
                           void *ud)
{
  const struct ebdman_webhooks *w = ud;
  struct kcr_buf text = KCR_BUF_INIT;
  struct ebd e;
  kcr_err rc;

  if(!w->default_image || !*w->default_image || !rq->object.s || !managed(w, rq) ||
     (rq->operation != KCR_ADMISSION_CREATE && rq->operation != KCR_ADMISSION_UPDATE))
    return KCR_OK;
  /* Mutating webhooks run before the schema is checked: an EBD that is not
   * one is left unchanged for the schema to refuse with its own message. */
  if(ebd_decode(rq->object.s, rq->object.n, 0, kcr_admission_arena(adm), &e, NULL))
    return KCR_OK;
  if(e.spec.vfm_template.has_image) /* also "": the schema refuses it, with its message */
    return KCR_OK;
  KCR_SET(e.spec.vfm_template, image, kcr_str_c(w->default_image));
  if(!(rc = ebd_encode(&e, &text, kcr_admission_ei(adm))))
    rc = kcr_admission_set_object(adm, text.ptr, text.len);
  kcr_buf_cleanup(&text);
  return rc;
}
