/* DESIGN: the EBD reconciler.
 *
 * reconcile(ns/name):
 *   1. read the EBD from the cache (gone or deleting: nothing to do - the
 *      garbage collector removes children through their ownerReferences);
 *   2. install without waiting: for each child (ConfigMap <name>-config, VFM
 *      <name>) compare the cached child with the desired one - first as
 *      text (kept_as_is: ours, and its content the EBD's byte for byte, as
 *      most reconciles find it), else as typed objects (kcr-gen's EBD, VFM
 *      and ConfigMap, decoded as views of the cached text) - and
 *      server-side apply it
 *      only if it differs (deterministic names, idempotent, no
 *      request at steady state) - and never to an object that is not this
 *      EBD's: each apply carries a precondition (create-only, or pinned to
 *      the uid of our child) and an object someone else made is reported as
 *      Installed=False/ChildConflict (children.c). Read your own writes:
 *      each apply's answer (resourceVersion, and a digest of the child as
 *      wanted) is kept per child (kcr_written), and while the cache shows
 *      the child older than that, or not at all, a child wanted as it was
 *      written is not sent again (a second reconcile soon after the first
 *      would create it again - 409 - or re-apply it); records go when the
 *      cache catches up, and when the child or the EBD is deleted;
 *   3. observe the VFM in the cache, compute Installed / VFMHealthy / Ready
 *      and, while not Ready, Reconciling or Stalled (conditions.c) and
 *      write them with the SSA status writer, which sends
 *      nothing when nothing changed - from the cached EBD's text
 *      (kcr_obj_status_write, which parses it only where the text cannot
 *      be read as the tree would be: its conditions quoting a message with
 *      an escape); the
 *      reconciler itself decodes the EBD only when a child has to be built
 *      or, once per EBD after a start, its stored conditions are read;
 *   4. record events for transitions (Installed, InstallFailed, BecameReady,
 *      BecameUnready).
 * Never polls: VFMs and ConfigMaps are watched and map to their owner EBD.
 *
 * Errors: a child the server refuses (422 schema, 403 RBAC, 404 missing
 * CRD), and - when a child has to be built - an EBD or a child read with a
 * GET that does not decode as its schema says (which the apiserver never
 * sends), is reported as
 * Installed=False/InstallFailed with the error. What the EBD's spec causes
 * (422, 400, a read that does not decode) is not retried until something
 * changes; a refusal that goes away without the EBD changing - 403 or 401
 * (a Role granted, a token renewed, a restarted apiserver whose authorizer
 * has not loaded its roles yet) or 404 (the CRD installed) - is retried
 * with the controller's backoff (5 ms doubling to 1000 s) while the
 * condition says so; a conflict waits for the other object to go (its
 * deletion wakes the EBD, or a re-check every 30 s when no informer of ours
 * shows it); transient errors (5xx, timeouts) return the error so the key
 * is retried with backoff. */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ebdman.h"
#include "kcr/events.h"

/* What ebdman last announced (by event) for one EBD, keyed by uid. The
 * cache can lag behind our own status write, so comparing with the cached
 * status alone would announce a transition twice. */
struct announced {
  struct kcr_hnode hn; /* in ebdman.announced, under kcr_hash_str(uid) */
  char uid[40];
  int ready;     /* -1 unknown, 0 not ready, 1 ready */
  int installed; /* -1 unknown, 0 failed, 1 installed */
  char install_msg_hash[17];
};

struct ebdman {
  kcr_manager *m; /* set only when exiting without freeing */
  kcr_informer *ebds, *vfms, *cms;
  kcr_status_writer *status;
  kcr_written *wrote; /* the children's last applies, by child_key */
  kcr_recorder *events;
  struct ebdman_webhooks hooks; /* what the webhooks read */
  pthread_mutex_t mu;           /* guards announced */
  struct kcr_htab announced;    /* struct announced by uid */
};

/* The record for uid (h = kcr_hash_str(uid)), or NULL; call with e->mu
 * held. */
static struct announced *announced_find(struct ebdman *e, const char *uid, uint64_t h)
{
  for(struct kcr_hnode *n = kcr_htab_lookup(&e->announced, h); n;
      n = kcr_htab_lookup_next(n)) {
    struct announced *a = KCR_HTAB_ENTRY(n, struct announced, hn);
    if(!strcmp(a->uid, uid))
      return a;
  }
  return NULL;
}

/* Finds or makes the record for uid; call with e->mu held. */
static struct announced *announced_for(struct ebdman *e, const char *uid)
{
  uint64_t h = kcr_hash_str(uid);
  struct announced *a = announced_find(e, uid, h);
  if(a || !(a = calloc(1, sizeof(*a))))
    return a;
  snprintf(a->uid, sizeof(a->uid), "%s", uid);
  a->ready = a->installed = -1;
  if(kcr_htab_insert(&e->announced, &a->hn, h)) {
    free(a);
    return NULL;
  }
  return a;
}

/* The key of a child's record in ebdman.wrote: "resource/namespace/name"
 * (name + suffix) in out[n] (384 bytes hold any: a namespace has at most
 * 63, a name 253). */
static void child_key(char *out, size_t n, const char *resource, const char *ns,
                      const char *name, const char *suffix)
{
  snprintf(out, n, "%s/%s/%s%s", resource, ns ? ns : "", name ? name : "", suffix);
}

/* A digest of the child as wanted (before its precondition), in out[17]:
 * of its JSON text (kcr_typed_encode). Out of memory: "" (then no record). */
static void digest(const struct kcr_type *t, const void *want, char out[17])
{
  struct kcr_buf b = KCR_BUF_INIT;

  *out = '\0';
  if(!kcr_typed_encode(t, want, &b, NULL))
    snprintf(out, 17, "%016llx", (unsigned long long)kcr_hash(b.ptr, b.len));
  kcr_buf_cleanup(&b);
}

/* How often an EBD whose child name is taken by an object no informer of
 * ours shows (a ConfigMap without the managed-by label) looks again: two
 * requests each time, and the conflict ends only when a user acts. */
#define EBDMAN_CONFLICT_RECHECK_MS 30000

static bool permanent(kcr_err rc)
{
  return rc == KCR_EINVALID || rc == KCR_EFORBIDDEN || rc == KCR_EBADREQUEST ||
         rc == KCR_ENOTFOUND || rc == KCR_EUNAUTHORIZED || rc == KCR_EINVAL;
}

/* A refusal that can pass with nothing of the EBD's changing, so no event
 * would wake it: RBAC (a Role granted later, or a restarted apiserver that
 * answers before its authorizer has the roles), credentials, or a resource
 * not served yet (its CRD installed later). */
static bool may_pass(kcr_err rc)
{
  return rc == KCR_EFORBIDDEN || rc == KCR_EUNAUTHORIZED || rc == KCR_ENOTFOUND;
}

/* Did the apiserver refuse an apply's precondition (children.c): 409 for a
 * create-only apply of an existing object or a uid-pinned one of a missing
 * object, 422 on metadata.uid for a uid-pinned one of another object? Then
 * the copy the plan was made from was wrong. (With force, an apply has no
 * other 409.) */
static bool precondition_failed(kcr_err rc, const struct kcr_errinfo *ei)
{
  return rc == KCR_ECONFLICT || rc == KCR_EEXIST ||
         (rc == KCR_EINVALID && kcr_errinfo_has_cause(ei, NULL, "metadata.uid"));
}

/* What installing one child came to. */
struct install {
  bool applied;       /* an apply was sent and succeeded */
  bool new_content;   /* it changed the child's data/spec */
  bool failed;        /* not installed; reason (NULL: InstallFailed), msg */
  const char *reason; /* say why */
  const char *msg;
  bool recheck;  /* someone else's child our cache does not show: its
                    removal wakes nobody, so look again later */
  kcr_err retry; /* failed with a refusal that may go away by itself
                    (may_pass): returned once the status is written */
  /* The child as the informer's cache held it when the plan was made, and
   * - when the plan needed more than the texts (not kept_as_is) - that copy
   * decoded (a view borrowing from seen, in the reconcile's arena); NULL
   * when absent, the decoded one also when it does not decode or was not
   * needed (then the create-only apply finds out whether it exists). Kept
   * for the caller, which reads the VFM's health from the same decoded copy
   * when the cache still holds that object: each cached child is decoded at
   * most once per reconcile. Released by install_cleanup. */
  kcr_obj *seen;
  void *seen_typed;
};

static void install_cleanup(struct install *r) { kcr_obj_unref(r->seen); }

/* The EBD being reconciled: its cached object, where in its text the parts
 * its children copy are (kcr_obj_spans of ebd_paths), and - when a child
 * has to be built - the object decoded. */
enum { SP_NAME, SP_VFM, SP_CONFIG, SP_ANNOTATIONS, SP_NSPAN };
static const char *const ebd_paths[SP_NSPAN] = {
    [SP_NAME] = "/metadata/name",
    [SP_VFM] = "/spec/vfmTemplate",
    [SP_CONFIG] = "/spec/vfmTemplate/config",
    [SP_ANNOTATIONS] = "/metadata/annotations",
};
struct ebd_in {
  kcr_obj *o;
  struct kcr_span sp[SP_NSPAN];
  struct ebd typed; /* decoded when first needed (ebd_typed) */
  bool decoded;     /* typed_rc says how decoding it went */
  kcr_err typed_rc;
  const char *typed_error;
};

/* The EBD decoded (a view borrowing from in->o, in arena a), or NULL with
 * *rc (KCR_ENOMEM, or KCR_EPARSE/ERANGE for a text that is no EBD of this
 * schema - the apiserver sends none - with in->typed_error saying why). */
static const struct ebd *ebd_typed(struct ebd_in *in, struct kcr_arena *a, kcr_err *rc)
{
  if(!in->decoded) {
    in->decoded = true;
    struct kcr_errinfo ei = KCR_ERRINFO_INIT;
    in->typed_rc = ebd_from_obj(in->o, 0, a, &in->typed, &ei);
    if(in->typed_rc)
      in->typed_error = kcr_arena_printf(a, "reading the EBD failed: %s",
                                         ei.message ? ei.message : "out of memory");
    kcr_errinfo_cleanup(&ei);
  }
  *rc = in->typed_rc;
  return in->typed_rc ? NULL : &in->typed;
}

/* The metadata of a child of ch's type (every kind kcr-gen writes has it). */
static struct kcr_meta_v1_object_meta *meta_of(const struct ebdman_child_kind *ch,
                                               void *obj)
{
  return obj ? (struct kcr_meta_v1_object_meta *)kcr_typed_meta(ch->type, obj) : NULL;
}

static void conflict(kcr_ctx *cx, const struct ebdman_child_kind *ch, const char *name,
                     void *want, void *have, bool in_cache, struct install *r)
{
  char msg[1024];

  ebdman_child_conflict_msg(msg, sizeof(msg), ch->kind, meta_of(ch, want),
                            meta_of(ch, have));
  r->failed = true;
  r->reason = EBDMAN_REASON_CHILD_CONFLICT;
  r->msg = kcr_arena_strdup(kcr_ctx_arena(cx), msg); /* NULL: the default text */
  r->recheck = !in_cache;
  KCR_CLOG(cx, KCR_LOG_WARN,
           "a child's name is taken by someone else's object; not touching it",
           KCR_S("kind", ch->kind), KCR_S("child", name), KCR_S("detail", msg));
}

/* The span of the EBD's part at path src, or NULL when it is none of
 * ebd_paths (then nothing is judged by the text). */
static const struct kcr_span *src_span(const struct ebd_in *ebd, const char *src)
{
  for(int i = 0; i < SP_NSPAN; i++)
    if(!strcmp(ebd_paths[i], src))
      return &ebd->sp[i];
  return NULL;
}

/* ebdman_child_kept_as_is on the cached child `have` and the EBD. */
static bool kept_as_is(const struct ebdman_child_kind *ch, const struct ebd_in *ebd,
                       const kcr_obj *have)
{
  const char *paths[] = {"/metadata/name", ch->field, "/metadata/annotations"};
  struct kcr_span h[3];

  /* The EBD's text could be followed and has a name (and, as
   * ebdman_child_kept_as_is checks, a uid): a child can be built of it. */
  if(!ebd->sp[SP_NAME].at || !src_span(ebd, ch->src))
    return false;
  kcr_obj_spans(have, paths, h, 3);
  return h[0].at && /* nor the child's: absence would say nothing */
         ebdman_child_kept_as_is(kcr_obj_uid(ebd->o), src_span(ebd, ch->src),
                                 &ebd->sp[SP_ANNOTATIONS], kcr_obj_controller(have)->uid,
                                 &h[1], &h[2]);
}

/* A new object of ch's type in the reconcile's arena (not zeroed: decoding
 * and building zero it), or NULL. */
static void *new_child(kcr_ctx *cx, const struct ebdman_child_kind *ch)
{
  return kcr_arena_alloc(kcr_ctx_arena(cx), ch->type->size);
}

/* Installs one child: plans from the cached copy (ebdman_child_plan; kept
 * in r->seen and, when decoded, r->seen_typed) and applies with the plan's
 * precondition, so that the apply does only what was decided. When the
 * plan is a conflict, or the apiserver refuses the precondition (the cache
 * was wrong), reads the child with a GET and plans once more from that; a
 * second refusal is retried with backoff. At most three requests. No
 * request when an earlier apply of the same child is still on its way to
 * the cache (wrote), and nothing decoded when the texts show the cached
 * child kept as it is (kept_as_is). Returns a transient error to retry, or
 * OK with r->failed set for a permanent refusal, a conflict, or an EBD or
 * child that does not decode; in every case the caller releases r with
 * install_cleanup. */
static kcr_err install(kcr_ctx *cx, kcr_written *wrote, kcr_informer *inf,
                       const struct ebdman_child_kind *ch, struct ebd_in *ebd,
                       struct install *r)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  struct kcr_arena *a = kcr_ctx_arena(cx);
  struct kcr_buf text = KCR_BUF_INIT;
  const char *ns = *kcr_obj_ns(ebd->o) ? kcr_obj_ns(ebd->o) : NULL, *kind = ch->kind;
  char name[300], key[384], sum[17] = "";
  struct kcr_ref ref = {.gvr = ch->gvr, .ns = ns, .name = name};
  enum ebdman_child_plan plan;
  const struct ebd *e;
  void *want, *have = NULL, *got = NULL; /* read with a GET */
  char *rv = NULL; /* the apply's answer: the child's new resourceVersion */
  bool fresh = false, unreadable = false, in_cache, pending;
  kcr_err rc = KCR_OK;

  snprintf(name, sizeof(name), "%s%s", kcr_obj_name(ebd->o), ch->suffix);
  r->seen = kcr_store_ref(kcr_informer_store(inf), ns, name);
  child_key(key, sizeof(key), ch->gvr->resource, ns, name, "");
  /* An earlier apply still on its way to the cache, which shows the child
   * older (or not at all)? */
  pending = kcr_written_pending(wrote, key, r->seen ? kcr_obj_rv(r->seen) : NULL, &text);
  if(!pending && r->seen && kept_as_is(ch, ebd, r->seen))
    goto out;
  if(!(e = ebd_typed(ebd, a, &rc)) || !(want = new_child(cx, ch))) {
    if(e || rc == KCR_ENOMEM) {
      rc = KCR_ENOMEM; /* retried */
      goto out;
    }
    r->failed = true;
    r->msg = ebd->typed_error;
    rc = KCR_OK;
    goto out;
  }
  if((rc = ch->build(e, a, want, &ei))) {
    if(rc != KCR_ENOMEM) {
      r->failed = true;
      r->msg = kcr_arena_printf(a, "building the %s: %s", kind,
                                ei.message ? ei.message : kcr_strerror(rc));
      rc = KCR_OK;
    }
    goto out;
  }
  if(r->seen && (have = new_child(cx, ch))) {
    size_t len;
    const char *json = kcr_obj_json(r->seen, &len);
    if(kcr_typed_decode(ch->type, json, len, KCR_TYPED_TRUSTED, a, have, NULL))
      have = NULL; /* planned as absent: the create-only apply finds out */
  }
  r->seen_typed = have;
  in_cache = have != NULL;
  if(pending) {
    digest(ch->type, want, sum);
    if(!strcmp(kcr_buf_str(&text), sum)) {
      /* As the apply left it: its spec is new if the cache's is not it. */
      r->applied = true;
      r->new_content = !ch->same(have, want);
      KCR_CLOG(cx, KCR_LOG_DEBUG,
               "child as an earlier apply wrote it; the cache is behind",
               KCR_S("kind", kind), KCR_S("child", name));
      goto out;
    }
  }
  for(;;) {
    plan = ebdman_child_plan(meta_of(ch, have), meta_of(ch, want), ch->same(have, want));
    if(plan == EBDMAN_CHILD_KEEP)
      break;
    if(plan == EBDMAN_CHILD_CONFLICT && fresh) {
      conflict(cx, ch, name, want, have, in_cache, r);
      break;
    }
    if(plan != EBDMAN_CHILD_CONFLICT) {
      r->new_content = !ch->same(have, want);
      if(!*sum)
        digest(ch->type, want, sum); /* before the precondition: what is wanted */
      rc = ebdman_child_precondition(meta_of(ch, want), plan, meta_of(ch, have));
      if(!rc)
        rc = kcr_typed_apply_rv(kcr_ctx_client(cx), ch->type, ch->gvr, want,
                                &(struct kcr_apply_opts){
                                    .field_manager = EBDMAN_FIELD_MANAGER, .force = true},
                                &rv, &ei);
      if(!rc) {
        r->applied = true;
        if(*sum)
          kcr_written_put(wrote, key, rv, sum, strlen(sum));
        KCR_CLOG(
            cx, KCR_LOG_DEBUG, "applied child", KCR_S("kind", kind), KCR_S("child", name),
            KCR_S("precondition", plan == EBDMAN_CHILD_CREATE ? "create-only" : "uid"));
        break;
      }
      if(!precondition_failed(rc, &ei))
        break;
      KCR_CLOG(cx, KCR_LOG_DEBUG, "child not as the cache said; reading it",
               KCR_S("kind", kind), KCR_S("child", name), KCR_S("detail", ei.message));
      if(fresh) {
        rc = KCR_ECONFLICT; /* it changed again since the GET: retry later */
        break;
      }
    }
    /* The full story (the cache drops managedFields and may be behind). */
    kcr_errinfo_cleanup(&ei);
    if(!got && !(got = new_child(cx, ch))) {
      rc = KCR_ENOMEM;
      break;
    }
    rc = kcr_typed_get(kcr_ctx_client(cx), ch->type, &ref, a, got, &ei);
    have = rc ? NULL : got;
    fresh = true;
    unreadable = rc == KCR_EPARSE || rc == KCR_ERANGE;
    if(rc == KCR_ENOTFOUND)
      rc = KCR_OK; /* have is NULL: absent */
    else if(rc)
      break;
  }
  if(rc == KCR_EFORBIDDEN && kcr_errinfo_has_cause(&ei, "NamespaceTerminating", NULL)) {
    /* Nothing can be made in it any more (the namespace controller deletes
     * the children, maybe before the EBD). Not a refusal of ebdman's: said
     * as such, and not logged as a 403. */
    r->failed = true;
    r->reason = EBDMAN_REASON_NAMESPACE_TERMINATING;
    r->msg = kcr_arena_printf(a, "%s %s cannot be created: namespace %s is being deleted",
                              kind, name, ref.ns);
    KCR_CLOG(cx, KCR_LOG_DEBUG, "the namespace is being deleted; not installing",
             KCR_S("kind", kind), KCR_S("child", name));
    rc = KCR_OK;
  } else if(rc && (permanent(rc) || unreadable)) {
    /* refused; or what the GET read is no object of the child's schema */
    r->failed = true;
    r->msg = kcr_arena_printf(a, "%s %s: %s", kind, name,
                              ei.message ? ei.message : kcr_strerror(rc));
    KCR_CLOG(cx, KCR_LOG_WARN, "child refused by the server", KCR_S("kind", kind),
             KCR_S("err", kcr_err_name(rc)), KCR_S("detail", ei.message),
             KCR_S("retried", may_pass(rc) ? "with backoff" : "on a change"));
    if(may_pass(rc))
      r->retry = rc;
    rc = KCR_OK;
  } else if(rc) {
    KCR_CLOG(cx, KCR_LOG_WARN, "installing child failed; will retry", KCR_S("kind", kind),
             KCR_S("err", kcr_err_name(rc)), KCR_S("detail", ei.message));
  }
out:
  free(rv);
  kcr_buf_cleanup(&text);
  kcr_errinfo_cleanup(&ei);
  return rc;
}

static void record(struct ebdman *e, const kcr_obj *ebd, const char *type,
                   const char *reason, const char *action, const char *note)
{
  struct kcr_event_ref ref = kcr_event_ref_from_obj(ebd, EBDMAN_API_VERSION, "EBD");
  if(e->events)
    kcr_recorder_eventf(e->events, &ref, type, reason, action, "%s", note);
}

/* Events for transitions: from what we announced last (or, after a restart,
 * the stored conditions) to the new conditions. */
/* The stored status.conditions item of type `type` of the EBD (NULL: none,
 * or the EBD does not decode). */
static const struct ebd_status_conditions_item *stored_condition(const struct ebd *e,
                                                                 const char *type)
{
  for(size_t i = 0; e && i < e->status.conditions.n; i++)
    if(kcr_str_eq(e->status.conditions.v[i].type, type))
      return &e->status.conditions.v[i];
  return NULL;
}

static void transitions(struct ebdman *e, kcr_ctx *cx, struct ebd_in *in,
                        const struct kcr_cond *now)
{
  const struct kcr_cond *ni = &now[EBDMAN_COND_INSTALLED], *nr = &now[EBDMAN_COND_READY];
  bool ready = !strcmp(nr->status, "True"), installed = !strcmp(ni->status, "True");
  char msg_hash[17];
  struct announced *a;
  int was_ready, was_installed;
  const kcr_obj *ebd = in->o;
  const struct ebd_status_conditions_item *oi = NULL, * or = NULL;
  bool msg_changed, first;
  kcr_err rc;

  /* Messages are the server's and users' words: keyed (kcr/hash.h). */
  snprintf(msg_hash, sizeof(msg_hash), "%016llx",
           (unsigned long long)kcr_hash_str(ni->message));
  pthread_mutex_lock(&e->mu);
  a = announced_for(e, kcr_obj_uid(ebd));
  first = a && (a->ready < 0 || a->installed < 0);
  pthread_mutex_unlock(&e->mu);
  if(first) { /* what is stored is read only then, and not under the lock */
    const struct ebd *old = ebd_typed(in, kcr_ctx_arena(cx), &rc);
    or = stored_condition(old, "Ready");
    oi = stored_condition(old, "Installed");
  }
  pthread_mutex_lock(&e->mu);
  /* forget may have run meanwhile (the EBD was deleted): then nothing */
  a = announced_find(e, kcr_obj_uid(ebd), kcr_hash_str(kcr_obj_uid(ebd)));
  if(!a) {
    pthread_mutex_unlock(&e->mu);
    return;
  }
  if(a->ready < 0 && or) /* first look since start: the stored status is the past */
    a->ready = or->status.v == EBD_STATUS_CONDITIONS_ITEM_STATUS_TRUE;
  if(a->installed < 0 && oi) {
    a->installed = oi->status.v == EBD_STATUS_CONDITIONS_ITEM_STATUS_TRUE;
    /* kcr_hash_str of the message as a C string: its bytes up to a NUL */
    snprintf(a->install_msg_hash, sizeof(a->install_msg_hash), "%016llx",
             (unsigned long long)kcr_hash(
                 oi->message.s ? oi->message.s : "",
                 oi->message.s ? strnlen(oi->message.s, oi->message.n) : 0));
  }
  was_ready = a->ready;
  was_installed = a->installed;
  msg_changed = strcmp(a->install_msg_hash, msg_hash) != 0;
  a->ready = ready;
  a->installed = installed;
  snprintf(a->install_msg_hash, sizeof(a->install_msg_hash), "%s", msg_hash);
  pthread_mutex_unlock(&e->mu);

  if(installed && was_installed != 1)
    record(e, ebd, "Normal", "Installed", "Install",
           "configmap and vfm custom resource applied");
  if(!installed && (was_installed != 0 || msg_changed))
    record(e, ebd, "Warning", ni->reason, "Install", ni->message);
  if(ready && was_ready != 1) {
    record(e, ebd, "Normal", "BecameReady", "Reconcile", "ebd is ready");
    KCR_CLOG(cx, KCR_LOG_INFO, "became ready");
  }
  if(!ready && was_ready == 1) {
    char *note = kcr_arena_printf(kcr_ctx_arena(cx), "%s: %s", nr->reason, nr->message);
    record(e, ebd, "Warning", "BecameUnready", "Reconcile", note ? note : nr->reason);
    KCR_CLOG(cx, KCR_LOG_INFO, "became unready", KCR_S("reason", nr->reason));
  }
}

/* Forgets a deleted EBD. */
static void forget(struct ebdman *e, const char *uid)
{
  struct announced *dead;

  pthread_mutex_lock(&e->mu);
  dead = announced_find(e, uid, kcr_hash_str(uid));
  if(dead)
    kcr_htab_remove(&e->announced, &dead->hn);
  pthread_mutex_unlock(&e->mu);
  free(dead);
}

/* Forgets the record of a child's last apply (ebdman.wrote). */
static void forget_child(struct ebdman *e, const char *resource, const char *ns,
                         const char *name, const char *suffix)
{
  char key[384];

  child_key(key, sizeof(key), resource, ns, name, suffix);
  kcr_written_forget(e->wrote, key);
}

static void on_ebd_deleted(kcr_obj *o, void *ud)
{
  forget(ud, kcr_obj_uid(o));
  forget_child(ud, ebdman_vfms.resource, kcr_obj_ns(o), kcr_obj_name(o), "");
  forget_child(ud, ebdman_configmaps.resource, kcr_obj_ns(o), kcr_obj_name(o), "-config");
}

/* The informers show our writes: their records (kept for a reconcile that
 * reads the cache before it shows them) can go soon, not after 30 s. */
static void on_ebd_seen(kcr_obj *o, void *ud)
{
  struct ebdman *e = ud;

  kcr_status_writer_seen(e->status, kcr_obj_uid(o), kcr_obj_rv(o));
}

static void on_ebd_changed(kcr_obj *old, kcr_obj *cur, void *ud) { on_ebd_seen(cur, ud); }

static void child_seen(struct ebdman *e, const char *resource, kcr_obj *o)
{
  char key[384];

  child_key(key, sizeof(key), resource, kcr_obj_ns(o), kcr_obj_name(o), "");
  kcr_written_seen(e->wrote, key, kcr_obj_rv(o));
}

static void on_vfm_seen(kcr_obj *o, void *ud) { child_seen(ud, ebdman_vfms.resource, o); }

static void on_vfm_changed(kcr_obj *old, kcr_obj *cur, void *ud)
{
  child_seen(ud, ebdman_vfms.resource, cur);
}

static void on_cm_seen(kcr_obj *o, void *ud)
{
  child_seen(ud, ebdman_configmaps.resource, o);
}

static void on_cm_changed(kcr_obj *old, kcr_obj *cur, void *ud)
{
  child_seen(ud, ebdman_configmaps.resource, cur);
}

/* A deleted child is absent from the cache, as one not seen yet would be:
 * its record must go before a reconcile can see it missing (these
 * handlers come before kcr_controller_owns's), or the child would not be
 * made again. */
static void on_vfm_deleted(kcr_obj *o, void *ud)
{
  forget_child(ud, ebdman_vfms.resource, kcr_obj_ns(o), kcr_obj_name(o), "");
}

static void on_cm_deleted(kcr_obj *o, void *ud)
{
  forget_child(ud, ebdman_configmaps.resource, kcr_obj_ns(o), kcr_obj_name(o), "");
}

/* A child-named object that its EBD does not control (someone else's,
 * reported as ChildConflict) wakes the EBD whose child name it has: its
 * removal is what that EBD waits for. Ours wake their EBD through
 * kcr_controller_owns. ud: what the child's name adds to the EBD's. */
static void map_by_name(kcr_obj *o, kcr_map_emit emit, void *ctx, void *ud)
{
  const char *suffix = ud, *name = kcr_obj_name(o);
  const struct kcr_owner *c = kcr_obj_controller(o);
  size_t n = strlen(name), sn = strlen(suffix), gn = strlen(EBDMAN_GROUP);
  char ebd[256];

  if(n <= sn || n - sn >= sizeof(ebd) || strcmp(name + n - sn, suffix))
    return;
  memcpy(ebd, name, n - sn);
  ebd[n - sn] = '\0';
  if(c->kind && !strcmp(c->kind, "EBD") && c->name && !strcmp(c->name, ebd) &&
     c->api_version && !strncmp(c->api_version, EBDMAN_GROUP, gn) &&
     c->api_version[gn] == '/')
    return;
  emit(kcr_obj_ns(o), ebd, ctx);
}

/* What ob says of our VFM, vo (its controller is the EBD): from the copy
 * install decoded when it planned from this very one, else decoded now
 * (ebdman_observe_vfm_obj, into *hold). */
static void observe_vfm(kcr_ctx *cx, struct ebdman_observed *ob, const kcr_obj *vo,
                        const struct install *iv, struct vfm *hold)
{
  if(vo == iv->seen && iv->seen_typed)
    ebdman_observe_vfm(ob, iv->seen_typed);
  else
    ebdman_observe_vfm_obj(ob, vo, kcr_ctx_arena(cx), hold);
}

static kcr_err reconcile(kcr_ctx *cx, const struct kcr_request *req,
                         struct kcr_result *res, void *ud)
{
  struct ebdman *e = ud;
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  struct ebdman_observed ob = {0};
  struct kcr_cond conds[EBDMAN_NCOND];
  size_t nconds;
  enum kcr_write_result wr;
  struct ebd_in in = {.o =
                          kcr_store_ref(kcr_informer_store(e->ebds), req->ns, req->name)};
  kcr_obj *o = in.o, *vo;
  struct vfm vfm_hold;
  struct install icm = {0}, ivfm = {0};
  kcr_err rc = KCR_OK;

  if(!o)
    return KCR_OK; /* deleted: children go with it (ownerReferences) */
  if(kcr_obj_deleting(o))
    goto out;
  kcr_obj_spans(o, ebd_paths, in.sp, SP_NSPAN);
  ob.generation = kcr_obj_generation(o);
  ob.arena = kcr_ctx_arena(cx);
  rc = install(cx, e->wrote, e->cms, &ebdman_child_configmap, &in, &icm);
  if(!rc && !icm.failed)
    rc = install(cx, e->wrote, e->vfms, &ebdman_child_vfm, &in, &ivfm);
  if(rc)
    goto out; /* transient: retried with backoff */
  if(icm.failed || ivfm.failed) {
    const struct install *f = icm.failed ? &icm : &ivfm;
    ob.install_failed = true;
    ob.install_reason = f->reason;
    ob.install_error = f->msg;
  }
  /* The cached VFM describes an older spec: its Ready says nothing yet. */
  ob.applied_new_spec = ivfm.applied && ivfm.new_content;
  /* Someone else's child whose removal no watch of ours will show. */
  if(icm.recheck || ivfm.recheck)
    res->requeue_after_ms = EBDMAN_CONFLICT_RECHECK_MS;
  /* Only our VFM's health is the EBD's: not that of someone else's VFM
   * holding its name. */
  vo = kcr_store_ref(kcr_informer_store(e->vfms), req->ns, req->name);
  if(vo && kcr_obj_controller(vo)->uid &&
     !strcmp(kcr_obj_controller(vo)->uid, kcr_obj_uid(o)))
    observe_vfm(cx, &ob, vo, &ivfm, &vfm_hold);
  nconds = ebdman_conditions(&ob, conds); /* copies what it keeps of the VFM's */
  kcr_obj_unref(vo);
  struct kcr_status_desired d = {
      .conds = conds, .n = nconds, .observed_generation = ob.generation};
  rc = kcr_obj_status_write(e->status, o, &d, &wr, &ei);
  if(rc) {
    KCR_CLOG(cx, KCR_LOG_ERROR, "status write failed", KCR_S("err", kcr_err_name(rc)),
             KCR_S("detail", ei.message));
    goto out;
  }
  if(wr == KCR_WRITE_WRITTEN) {
    KCR_CLOG(cx, KCR_LOG_DEBUG, "status written",
             KCR_S("ready", conds[EBDMAN_COND_READY].status),
             KCR_S("reason", conds[EBDMAN_COND_READY].reason),
             KCR_I("observedGeneration", ob.generation));
  }
  transitions(e, cx, &in, conds);
  /* Said in the status; now retried with backoff. */
  rc = icm.retry ? icm.retry : ivfm.retry;
out:
  install_cleanup(&icm);
  install_cleanup(&ivfm);
  kcr_obj_unref(o);
  kcr_errinfo_cleanup(&ei);
  return rc;
}

/* The library's webhook certificates (kcr/certs.h), when asked for with
 * --webhook-certs-secret: what the certificate names and the caBundles
 * to write. */
struct webhook_certs {
  struct kcr_certs_opts o;
  char dns[2][300];
  const char *dns_names[3], *ips[2], *vwc[2], *mwc[2], *crds[2];
};

/* Refuses flags that do not go together. */
static kcr_err webhook_flags(const struct ebdman_run_opts *ro, struct kcr_errinfo *ei)
{
  const char *a = ro->manager.webhook_addr;
  bool serving = a && *a && strcmp(a, "0");

  if(ro->namespaces[0] && ro->namespace_selector)
    return kcr_errinfo_set(ei, KCR_EINVAL,
                           "--namespace and --namespace-selector exclude each other");
  if(ro->default_image && !serving)
    return kcr_errinfo_set(ei, KCR_EINVAL,
                           "--default-vfm-image needs --webhook-bind-address (the "
                           "defaulting webhook sets it)");
  if(ro->manager.ring && ro->certs_secret && !ro->manager.leader_elect)
    return kcr_errinfo_set(ei, KCR_EINVAL,
                           "--webhook-certs-secret with --ring needs --leader-elect: "
                           "the certificates are written by a leader, and in a ring "
                           "one is elected for them alone (or use "
                           "--webhook-cert-path's files)");
  if(!ro->certs_secret)
    return KCR_OK;
  if(!serving)
    return kcr_errinfo_set(ei, KCR_EINVAL,
                           "--webhook-certs-secret needs --webhook-bind-address");
  if(ro->manager.webhook_cert_dir)
    return kcr_errinfo_set(ei, KCR_EINVAL,
                           "--webhook-certs-secret and --webhook-cert-path exclude each "
                           "other: the certificates are either ebdman's or yours");
  if(!ro->service && !ro->ip)
    return kcr_errinfo_set(ei, KCR_EINVAL,
                           "--webhook-certs-secret needs --webhook-service or "
                           "--webhook-ip: the names the certificate is for");
  return KCR_OK;
}

static void webhook_certs(const struct ebdman_run_opts *ro, struct kcr_manager_opts *mo,
                          struct webhook_certs *c)
{
  const char *ns = mo->lease_namespace;

  if(!ro->certs_secret)
    return;
  if(!ns)
    ns = kcr_config_namespace(mo->config);
  if(!ns)
    ns = "default";
  *c = (struct webhook_certs){
      .o = {.ns = ns,
            .secret = ro->certs_secret,
            .validating_webhooks = c->vwc,
            .mutating_webhooks = c->mwc,
            .crds = c->crds,
            .cert_lifetime_ms = ro->cert_lifetime_ms,
            .ca_lifetime_ms = ro->ca_lifetime_ms,
            .grace_ms = ro->ca_grace_ms,
            .poll_ms = ro->certs_poll_ms},
      /* "": none */
      .vwc = {ro->validating_config && *ro->validating_config ? ro->validating_config
                                                              : NULL},
      .mwc = {ro->mutating_config && *ro->mutating_config ? ro->mutating_config : NULL},
      .crds = {ro->conversion_crd && *ro->conversion_crd ? ro->conversion_crd : NULL}};
  if(ro->service) {
    /* The Service's names, as the apiserver calls them (clientConfig.service). */
    snprintf(c->dns[0], sizeof(c->dns[0]), "%s.%s.svc", ro->service, ns);
    snprintf(c->dns[1], sizeof(c->dns[1]), "%s.%s.svc.cluster.local", ro->service, ns);
    c->dns_names[0] = c->dns[0];
    c->dns_names[1] = c->dns[1];
    c->o.dns_names = c->dns_names;
  }
  if(ro->ip) {
    c->ips[0] = ro->ip;
    c->o.ip_addresses = c->ips;
  }
  mo->webhook_certs = &c->o;
}

/* The admission webhooks (webhooks.c) and the EBD conversion webhook
 * (convert.c), on the manager's webhook server when there is one. */
static kcr_err add_webhooks(kcr_manager *m, struct ebdman *e,
                            const struct ebdman_run_opts *ro, struct kcr_errinfo *ei)
{
  const char *a = ro->manager.webhook_addr;

  if(!a || !*a || !strcmp(a, "0"))
    return KCR_OK;
  e->hooks = (struct ebdman_webhooks){
      .vfms = kcr_informer_store(e->vfms),
      .cms = kcr_informer_store(e->cms),
      .ebds = ro->namespaces[0] || ro->namespace_selector ? e->ebds : NULL,
      .default_image = ro->default_image};
  kcr_err rc =
      kcr_manager_add_webhook(m,
                              &(struct kcr_webhook_opts){.path = EBDMAN_VALIDATE_PATH,
                                                         .name = "validate-ebd",
                                                         .admit = ebdman_validate_ebd,
                                                         .ud = &e->hooks},
                              ei);
  if(!rc)
    rc = kcr_manager_add_webhook(m,
                                 &(struct kcr_webhook_opts){.path = EBDMAN_MUTATE_PATH,
                                                            .name = "default-ebd",
                                                            .admit = ebdman_default_ebd,
                                                            .ud = &e->hooks,
                                                            .mutating = true},
                                 ei);
  if(!rc)
    rc = kcr_manager_add_conversion(m, &ebdman_conversion, ei);
  return rc;
}

/* The storage migration (migrate.c): a controller of the EBD CRD alone,
 * which runs on the leader, as every controller - or, with --ring, on the
 * replica that owns the CRD's bucket. */
static kcr_err add_migration(kcr_manager *m, const struct ebdman_run_opts *ro,
                             struct kcr_errinfo *ei)
{
  static struct ebdman_migration mig = {.settle_ms = EBDMAN_MIGRATION_SETTLE_MS};
  kcr_informer *inf;
  kcr_controller *c = NULL;
  kcr_err rc;

  if(!ro->migrate_storage)
    return KCR_OK;
  if(ro->namespaces[0] || ro->namespace_selector) {
    KCR_LOG(KCR_LOG_INFO,
            "storage migration off: with --namespace or --namespace-selector ebdman "
            "cannot list every EBD");
    return KCR_OK;
  }
  rc = kcr_manager_informer(
      m,
      &(struct kcr_informer_opts){.gvr = &ebdman_crds,
                                  .field_selector = "metadata.name=" EBDMAN_CRD},
      &inf, ei);
  if(rc)
    return rc;
  mig.crds = kcr_informer_store(inf);
  if((rc = kcr_controller_new(
          &(struct kcr_controller_opts){.name = "storage-migration",
                                        .reconcile = ebdman_migrate_reconcile,
                                        .ud = &mig,
                                        .client = kcr_manager_client(m),
                                        .metrics = kcr_manager_metrics(m)},
          &c, ei)) ||
     (rc = kcr_controller_for(c, inf, NULL)) || (rc = kcr_manager_add(m, c)))
    kcr_controller_free(c);
  return rc;
}

int ebdman_run(const struct ebdman_run_opts *ro)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  char ua[256], host[128] = "unknown";
  struct kcr_manager_opts mo = ro->manager;
  static struct ebdman e; /* one per process */
  struct kcr_htab_iter it;
  struct kcr_hnode *n;
  kcr_manager *m = NULL;
  kcr_controller *ctl = NULL;
  struct webhook_certs certs;
  kcr_err rc;
  int status = 1;

  pthread_mutex_init(&e.mu, NULL);
  /* The user agent names the replica (a Pod's host name is its name), so an
   * audit log tells which replica wrote what. */
  gethostname(host, sizeof(host) - 1);
  snprintf(ua, sizeof(ua), "ebdman/%s (%s; pid %ld) libkcr/%s", EBDMAN_VERSION, host,
           (long)getpid(), kcr_version());
  mo.client.user_agent = ua;
  rc = webhook_flags(ro, &ei);
  if(!rc)
    rc = kcr_config_load(&ro->config, &mo.config, &ei);
  if(!rc) {
    /* Which configuration: a kubeconfig file's path or "in-cluster". */
    KCR_LOG(KCR_LOG_INFO, "client configuration loaded",
            KCR_S("config", kcr_config_origin(mo.config)),
            KCR_S("server", kcr_config_server(mo.config)));
    webhook_certs(ro, &mo, &certs);
    rc = kcr_manager_new(&mo, &m, &ei);
  }
  kcr_config_free(mo.config); /* the manager's client holds its own reference */
  if(rc) {
    fprintf(stderr, "ebdman: %s\n", ei.message ? ei.message : kcr_strerror(rc));
    kcr_errinfo_cleanup(&ei);
    return 2;
  }
  /* Every cache holds the namespaces ebdman manages, and no more. The
   * CRDs may come after ebdman (or go, and come back): their caches wait
   * for them, and so does the EBD controller, while the webhooks serve. */
  const char *const *nss = ro->namespaces[0] ? ro->namespaces : NULL;
  const char *nssel = ro->namespace_selector;
  /* One namespace: one list and watch of it. */
  const char *ns1 = nss && !nss[1] ? nss[0] : NULL;
  if(ns1)
    nss = NULL;
  /* In a ring each replica caches its share: the EBDs of its buckets, and
   * the children of those (by their controller owner). A sharded cache is
   * one list and watch, so not with several namespaces (one each). */
  bool share = ro->manager.ring && !nss && !nssel;
  if(ro->manager.ring && !share)
    KCR_LOG(KCR_LOG_INFO, "ring: every replica caches every EBD of its namespaces (a "
                          "cache of a share needs one namespace or all)");
  struct kcr_informer_opts ebds = {.gvr = &ebdman_ebds,
                                   .ns = ns1,
                                   .namespaces = nss,
                                   .namespace_selector = nssel,
                                   .resync_ms = ro->resync_ms,
                                   .await_crd = true,
                                   .shard_by =
                                       share ? KCR_SHARD_BY_UID : KCR_SHARD_BY_NONE};
  /* The children's caches hold only what ebdman reads of them (children.c). */
  struct kcr_informer_opts vfms = {.gvr = &ebdman_vfms,
                                   .ns = ns1,
                                   .namespaces = nss,
                                   .namespace_selector = nssel,
                                   .keep = vfm_keep,
                                   .await_crd = true,
                                   .shard_by =
                                       share ? KCR_SHARD_BY_OWNER : KCR_SHARD_BY_NONE};
  struct kcr_informer_opts cms = {.gvr = &ebdman_configmaps,
                                  .ns = ns1,
                                  .namespaces = nss,
                                  .namespace_selector = nssel,
                                  .label_selector = "app.kubernetes.io/managed-by=ebdman",
                                  .keep = ebdman_configmap_keep,
                                  .shard_by =
                                      share ? KCR_SHARD_BY_OWNER : KCR_SHARD_BY_NONE};
  struct kcr_status_writer_opts so = {.client = kcr_manager_client(m),
                                      .gvr = &ebdman_ebds,
                                      .api_version = EBDMAN_API_VERSION,
                                      .kind = "EBD",
                                      .field_manager = EBDMAN_FIELD_MANAGER,
                                      .mode = KCR_STATUS_APPLY,
                                      .metrics = kcr_manager_metrics(m)};
  /* The manager's own recorder: flushed at shutdown while the lease is
   * still ours, freed by kcr_manager_free. */
  struct kcr_recorder_opts eo = {.reporting_controller = "ebdman.example.com/ebdman",
                                 .senders = ro->workers}; /* keep up with them */
  if(kcr_manager_informer(m, &ebds, &e.ebds, &ei) ||
     kcr_manager_informer(m, &vfms, &e.vfms, &ei) ||
     kcr_manager_informer(m, &cms, &e.cms, &ei) ||
     kcr_status_writer_new(&so, &e.status, &ei) || kcr_written_new(NULL, &e.wrote, &ei) ||
     kcr_manager_recorder(m, &eo, &e.events, &ei) ||
     kcr_controller_new(&(struct kcr_controller_opts){.name = "ebd",
                                                      .workers = ro->workers,
                                                      .reconcile = reconcile,
                                                      .ud = &e,
                                                      .client = kcr_manager_client(m),
                                                      .metrics = kcr_manager_metrics(m)},
                        &ctl, &ei) ||
     /* the echo of our own status write reconciles nothing new */
     kcr_controller_for(
         ctl, e.ebds,
         &(struct kcr_source_opts){
             .preds = (struct kcr_predicate[]){kcr_pred_not_own_status(e.status)},
             .npreds = 1}) ||
     kcr_informer_add_handlers(
         e.ebds, &(struct kcr_informer_handlers){.on_add = on_ebd_seen,
                                                 .on_update = on_ebd_changed,
                                                 .on_delete = on_ebd_deleted,
                                                 .ud = &e}) ||
     /* Before kcr_controller_owns: see on_vfm_deleted. */
     kcr_informer_add_handlers(
         e.vfms, &(struct kcr_informer_handlers){.on_add = on_vfm_seen,
                                                 .on_update = on_vfm_changed,
                                                 .on_delete = on_vfm_deleted,
                                                 .ud = &e}) ||
     kcr_informer_add_handlers(e.cms,
                               &(struct kcr_informer_handlers){.on_add = on_cm_seen,
                                                               .on_update = on_cm_changed,
                                                               .on_delete = on_cm_deleted,
                                                               .ud = &e}) ||
     kcr_controller_owns(ctl, e.vfms, EBDMAN_GROUP, "EBD", NULL) ||
     kcr_controller_owns(ctl, e.cms, EBDMAN_GROUP, "EBD", NULL) ||
     kcr_controller_watches(ctl, e.vfms, map_by_name, "", NULL) ||
     kcr_controller_watches(ctl, e.cms, map_by_name, "-config", NULL) ||
     /* before kcr_manager_add: after it the manager owns ctl */
     add_webhooks(m, &e, ro, &ei) || add_migration(m, ro, &ei) ||
     kcr_manager_add(m, ctl)) {
    fprintf(stderr, "ebdman: setting up the controller failed%s%s\n",
            ei.message ? ": " : "", ei.message ? ei.message : "");
    kcr_controller_free(ctl);
    goto out;
  }
  char nsl[1024] = "(all)";
  for(size_t i = 0, len = 0; ro->namespaces[i] && len < sizeof(nsl); i++)
    len += (size_t)snprintf(nsl + len, sizeof(nsl) - len, "%s%s", i ? "," : "",
                            ro->namespaces[i]);
  if(ro->namespace_selector)
    snprintf(nsl, sizeof(nsl), "selected by %s", ro->namespace_selector);
  KCR_LOG(KCR_LOG_INFO, "ebdman starting", KCR_S("version", EBDMAN_VERSION),
          KCR_S("namespaces", nsl), KCR_I("workers", ro->workers),
          KCR_B("leaderElect", mo.leader_elect), KCR_S("ring", mo.ring ? mo.ring : ""));
  status = kcr_manager_run(m);
  if(kcr_manager_busy(m)) {
    /* A reconcile outlived the grace period (or the lease was lost: its
     * writes are fenced). Freeing would wait for it: exit instead, as
     * controller-runtime does - with _exit, not exit: atexit handlers of
     * the libraries below (OpenSSL's cleanup) free global state that the
     * running reconcile's requests still use. Log records are written with
     * one write(2) each, so nothing is left in a buffer. (e2e
     * test_shutdown_grace holds a reconcile past the grace period.) */
    e.m = m;
    KCR_LOG(KCR_LOG_WARN, "ebdman: exiting with reconciles still running",
            KCR_I("running", kcr_manager_busy(m)), KCR_I("exitCode", status));
    fflush(NULL);
    _exit(status);
  }
out:
  /* The writer holds its own references to the manager's client and
   * metrics: it may go before or after the manager. */
  kcr_status_writer_free(e.status);
  kcr_written_free(e.wrote);
  kcr_manager_free(m);
  kcr_htab_iter_init(&it, &e.announced);
  while((n = kcr_htab_iter_next(&it)))
    free(KCR_HTAB_ENTRY(n, struct announced, hn));
  kcr_htab_cleanup(&e.announced);
  kcr_errinfo_cleanup(&ei);
  return status;
}
