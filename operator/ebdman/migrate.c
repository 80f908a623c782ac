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

struct rewrite {
  kcr_ctx *cx;
  size_t done, gone;
};

/* Rewrites one listed EBD: a merge patch holding only its resourceVersion.
 * A conflict means it was written since, so stored again already; not
 * found, that it is gone: both are done. */
static kcr_err rewrite_one(const cJSON *item, void *ud)
{
  struct rewrite *rw = ud;
  const char *ns = kcr_json_str(item, "/metadata/namespace");
  const char *name = kcr_json_str(item, "/metadata/name");
  const char *rv = kcr_json_str(item, "/metadata/resourceVersion");
  struct kcr_buf body = KCR_BUF_INIT;
  kcr_err rc;

  if(!ns || !name || !rv)
    return KCR_OK; /* the apiserver lists none such */
  kcr_buf_puts(&body, "{\"metadata\":{\"resourceVersion\":");
  kcr_json_put_str(&body, kcr_str_c(rv));
  kcr_buf_puts(&body, "}}");
  if(kcr_buf_err(&body)) {
    kcr_buf_cleanup(&body);
    return KCR_ENOMEM;
  }
  rc = kcr_patch(kcr_ctx_client(rw->cx),
                 &(struct kcr_ref){.gvr = &ebdman_ebds, .ns = ns, .name = name},
                 &(struct kcr_patch_opts){.type = KCR_PATCH_MERGE,
                                          .field_manager = EBDMAN_FIELD_MANAGER},
                 kcr_buf_str(&body), body.len, NULL, kcr_ctx_ei(rw->cx));
  kcr_buf_cleanup(&body);
  if(rc == KCR_ECONFLICT || rc == KCR_ENOTFOUND) {
    rw->gone++;
    return KCR_OK;
  }
  if(!rc)
    rw->done++;
  return rc;
}

kcr_err ebdman_migrate_reconcile(kcr_ctx *cx, const struct kcr_request *req,
                                 struct kcr_result *res, void *ud)
{
  kcr_store *crds = ud;
  kcr_obj *o = kcr_store_ref(crds, "", req->name);
  struct kcr_errinfo *ei = kcr_ctx_ei(cx);
  struct rewrite rw = {.cx = cx};
  struct kcr_buf body = KCR_BUF_INIT;
  const char *storage;
  cJSON *crd = NULL;
  kcr_err rc;

  (void)res;
  if(!o)
    return KCR_OK; /* not installed (yet): its creation enqueues it */
  rc = kcr_obj_parse(o, &crd);
  if(rc || !ebdman_migration_needed(crd, &storage))
    goto out;
  KCR_CLOG(cx, KCR_LOG_INFO, "storage migration: rewriting every EBD",
           KCR_S("crd", req->name), KCR_S("storageVersion", storage));
  rc = kcr_list_each(kcr_ctx_client(cx), &(struct kcr_ref){.gvr = &ebdman_ebds}, NULL,
                     rewrite_one, &rw, NULL, ei);
  if(rc)
    goto out;
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
             KCR_S("storedVersions", storage), KCR_I("rewritten", (int64_t)rw.done),
             KCR_I("changedOrGone", (int64_t)rw.gone));
out:
  kcr_buf_cleanup(&body);
  cJSON_Delete(crd);
  kcr_obj_unref(o);
  return rc;
}
