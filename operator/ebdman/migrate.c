/* Storage migration: after an upgrade that makes v1beta1 the storage
 * version, EBDs written before it are still stored as v1alpha1, and the
 * CRD's status.storedVersions lists both. While it does, v1alpha1 cannot be
 * removed from the CRD (the apiserver refuses to drop a stored version), and
 * every read of such an EBD needs the conversion webhook.
 *
 * A controller of the one CRD (an informer with a metadata.name field
 * selector, so RBAC can name it), running on the leader only, as every
 * controller: when storedVersions holds anything but the storage version,
 * it rewrites every EBD - an empty write with the resourceVersion just
 * listed, which the apiserver stores again in the storage version (its
 * bytes changed) and does not write when they did not - and then sets
 * storedVersions to the storage version alone, with the CRD's
 * resourceVersion as precondition, so a CRD changed meanwhile (the storage
 * version moved again) is looked at again. This is what
 * kube-storage-version-migrator does, without a component of its own.
 *
 * The list is read from the apiserver, not from the informer's cache: an
 * EBD written just before the storage version changed may not have reached
 * the cache yet, and a migration that missed it would declare v1alpha1
 * unused while it is not. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ebdman.h"

const struct kcr_gvr ebdman_crds = {.group = "apiextensions.k8s.io",
                                    .version = "v1",
                                    .resource = "customresourcedefinitions"};

/* The name of the version with storage: true (borrowed from crd; NULL:
 * none). */
static const char *storage_version(const cJSON *crd)
{
  const cJSON *v;

  cJSON_ArrayForEach(v, kcr_json_at(crd, "/spec/versions"))
  {
    if(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(v, "storage")))
      return kcr_json_member_str(v, "name");
  }
  return NULL;
}

bool ebdman_migration_needed(const cJSON *crd, const char **storage)
{
  const cJSON *stored = kcr_json_at(crd, "/status/storedVersions"), *v;
  const char *s = storage_version(crd);
  bool other = false;

  *storage = s;
  if(!s)
    return false;
  cJSON_ArrayForEach(v, stored)
  {
    if(!cJSON_IsString(v) || strcmp(v->valuestring, s))
      other = true;
  }
  return other;
}

/* The EBDs to rewrite: namespace, name and resourceVersion of each, as
 * listed (metadata only: nothing else is needed, and 10,000 EBDs of
 * 1 KiB of spec would otherwise pass through memory whole). */
struct listed {
  char **ns, **name, **rv;
  size_t n, cap;
};

static void listed_free(struct listed *l)
{
  for(size_t i = 0; i < l->n; i++) {
    free(l->ns[i]);
    free(l->name[i]);
    free(l->rv[i]);
  }
  free(l->ns);
  free(l->name);
  free(l->rv);
}

static kcr_err note_listed(const cJSON *item, void *ud)
{
  struct listed *l = ud;
  const char *ns = kcr_json_str(item, "/metadata/namespace");
  const char *name = kcr_json_str(item, "/metadata/name");
  const char *rv = kcr_json_str(item, "/metadata/resourceVersion");

  if(!ns || !name || !rv)
    return KCR_OK; /* the apiserver lists none such */
  if(l->n == l->cap) {
    size_t cap = l->cap ? 2 * l->cap : 64;
    char **a = realloc(l->ns, cap * sizeof(*a)), **b, **c;
    if(a)
      l->ns = a;
    b = a ? realloc(l->name, cap * sizeof(*b)) : NULL;
    if(b)
      l->name = b;
    c = b ? realloc(l->rv, cap * sizeof(*c)) : NULL;
    if(!c)
      return KCR_ENOMEM;
    l->rv = c;
    l->cap = cap;
  }
  l->ns[l->n] = strdup(ns);
  l->name[l->n] = strdup(name);
  l->rv[l->n] = strdup(rv);
  l->n++; /* freed by listed_free, whole or not */
  return l->ns[l->n - 1] && l->name[l->n - 1] && l->rv[l->n - 1] ? KCR_OK : KCR_ENOMEM;
}

/* Rewrites one EBD: a merge patch holding only its resourceVersion. A
 * conflict means it was written since, so stored again already; not found,
 * that it is gone: both are done (*gone counts them). */
static kcr_err rewrite_one(kcr_ctx *cx, const char *ns, const char *name, const char *rv,
                           size_t *gone)
{
  struct kcr_buf body = KCR_BUF_INIT;
  kcr_err rc;

  kcr_buf_puts(&body, "{\"metadata\":{\"resourceVersion\":");
  kcr_json_put_str(&body, kcr_str_c(rv));
  kcr_buf_puts(&body, "}}");
  if(kcr_buf_err(&body)) {
    kcr_buf_cleanup(&body);
    return KCR_ENOMEM;
  }
  rc = kcr_patch(kcr_ctx_client(cx),
                 &(struct kcr_ref){.gvr = &ebdman_ebds, .ns = ns, .name = name},
                 &(struct kcr_patch_opts){.type = KCR_PATCH_MERGE,
                                          .field_manager = EBDMAN_FIELD_MANAGER},
                 kcr_buf_str(&body), body.len, NULL, kcr_ctx_ei(cx));
  kcr_buf_cleanup(&body);
  if(rc == KCR_ECONFLICT || rc == KCR_ENOTFOUND) {
    (*gone)++;
    return KCR_OK;
  }
  return rc;
}

/* Whether the storage version `storage` of the CRD of uid `uid` was first
 * seen needing a migration at least EBDMAN_MIGRATION_SETTLE_MS ago; if not,
 * *wait_ms gets how long is left. The reconciles of one key never run at
 * once (one worker), so m needs no lock. */
static bool settled(struct ebdman_migration *m, const char *uid, const char *storage,
                    uint64_t *wait_ms)
{
  uint64_t now = kcr_time_mono_ms();
  char key[sizeof(m->seen)];

  snprintf(key, sizeof(key), "%s/%s", uid, storage);
  if(strcmp(key, m->seen)) {
    snprintf(m->seen, sizeof(m->seen), "%s", key);
    m->seen_at = now;
  }
  if(now - m->seen_at >= m->settle_ms)
    return true;
  *wait_ms = m->settle_ms - (now - m->seen_at);
  return false;
}

kcr_err ebdman_migrate_reconcile(kcr_ctx *cx, const struct kcr_request *req,
                                 struct kcr_result *res, void *ud)
{
  struct ebdman_migration *m = ud;
  kcr_obj *o = kcr_store_ref(m->crds, "", req->name);
  struct kcr_errinfo *ei = kcr_ctx_ei(cx);
  struct listed l = {0};
  struct kcr_buf body = KCR_BUF_INIT;
  const char *storage, *strategy, *failed_ns = NULL, *failed_name = NULL;
  kcr_err rc, first = KCR_OK;
  size_t gone = 0, failed = 0;
  uint64_t wait_ms = 0;
  cJSON *crd = NULL;

  if(!o)
    return KCR_OK; /* not installed (yet): its creation enqueues it */
  rc = kcr_obj_parse(o, &crd);
  if(rc || !ebdman_migration_needed(crd, &storage))
    goto out;
  strategy = kcr_json_str(crd, "/spec/conversion/strategy");
  if(!strategy || strcmp(strategy, "Webhook")) {
    /* Read through strategy None, an EBD stored as v1alpha1 has lost its
     * spec.vfm: rewriting it would make the loss permanent. */
    KCR_CLOG(cx, KCR_LOG_WARN,
             "storage migration: not run, the CRD converts without a webhook (config/crd "
             "adds ebdman's)",
             KCR_S("crd", req->name), KCR_S("strategy", strategy ? strategy : "None"));
    goto out;
  }
  /* An apiserver that has not switched to the new storage version yet (each
   * of a replicated control plane sees the CRD change on its own) would
   * store a rewritten EBD in the old one: let the change settle first. */
  if(!settled(m, kcr_obj_uid(o), storage, &wait_ms)) {
    res->requeue_after_ms = wait_ms;
    goto out;
  }
  KCR_CLOG(cx, KCR_LOG_INFO, "storage migration: rewriting every EBD",
           KCR_S("crd", req->name), KCR_S("storageVersion", storage));
  rc = kcr_list_each(kcr_ctx_client(cx), &(struct kcr_ref){.gvr = &ebdman_ebds},
                     &(struct kcr_list_opts){.metadata_only = true}, note_listed, &l,
                     NULL, ei);
  if(rc)
    goto out;
  /* One EBD that cannot be written (an admission policy, a lost lease) does
   * not hold the others up; storedVersions waits for all. */
  for(size_t i = 0; i < l.n; i++) {
    kcr_err one = rewrite_one(cx, l.ns[i], l.name[i], l.rv[i], &gone);
    if(!one)
      continue;
    KCR_CLOG(cx, KCR_LOG_WARN, "storage migration: rewriting an EBD failed",
             KCR_S("ebd", l.name[i]), KCR_S("ebdNamespace", l.ns[i]),
             KCR_S("error", ei->message ? ei->message : kcr_strerror(one)));
    if(!failed++) {
      first = one;
      failed_ns = l.ns[i];
      failed_name = l.name[i];
    }
  }
  if(failed) {
    rc =
        kcr_errinfo_set(ei, first,
                        "storage migration: %zu of %zu EBDs not rewritten (first %s/%s); "
                        "storedVersions left as it is",
                        failed, l.n, failed_ns, failed_name);
    goto out;
  }
  /* Every EBD is stored as `storage` now: say so, unless the CRD changed
   * since it was read (a conflict: looked at again, with backoff). */
  kcr_buf_puts(&body, "{\"metadata\":{\"resourceVersion\":");
  kcr_json_put_str(&body, kcr_str_c(kcr_obj_rv(o)));
  kcr_buf_puts(&body, "},\"status\":{\"storedVersions\":[");
  kcr_json_put_str(&body, kcr_str_c(storage));
  kcr_buf_puts(&body, "]}}");
  if(kcr_buf_err(&body)) {
    rc = KCR_ENOMEM;
    goto out;
  }
  rc = kcr_patch(
      kcr_ctx_client(cx),
      &(struct kcr_ref){.gvr = &ebdman_crds, .name = req->name, .sub = "status"},
      &(struct kcr_patch_opts){.type = KCR_PATCH_MERGE,
                               .field_manager = EBDMAN_FIELD_MANAGER},
      kcr_buf_str(&body), body.len, NULL, ei);
  if(!rc)
    KCR_CLOG(cx, KCR_LOG_INFO, "storage migration done", KCR_S("crd", req->name),
             KCR_S("storedVersions", storage), KCR_I("listed", (int64_t)l.n),
             KCR_I("changedOrGone", (int64_t)gone));
out:
  kcr_buf_cleanup(&body);
  listed_free(&l);
  cJSON_Delete(crd);
  kcr_obj_unref(o);
  return rc;
}
