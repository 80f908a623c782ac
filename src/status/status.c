/* DESIGN: status writes.
 *
 * One merge function (kcr_status_merge) decides what the status should be
 * and whether anything changed; every writer uses it, so the rule "no change,
 * no request" and the lastTransitionTime rule hold whichever writer is
 * chosen. The apply writer sends only what this manager owns; the merge
 * patch writer sends the whole merged list; the update writer re-runs the
 * merge on a fresh server copy per attempt (kcr_update_retry), which is the
 * correct form of client-go's RetryOnConflict.
 *
 * Writers hold no mutable state after creation, so they are shared freely
 * between worker threads. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kcr/json.h"
#include "kcr/log.h"
#include "kcr/status.h"
#include "kcr/time.h"

struct kcr_status_writer {
  struct kcr_status_writer_opts o;
  struct kcr_gvr gvr;
  char *group, *version, *resource, *api_version, *kind, *field_manager;
  kcr_metric *m_writes;
};

static char *dup0(const char *s) { return s ? strdup(s) : NULL; }

kcr_err kcr_status_writer_new(const struct kcr_status_writer_opts *o,
                              kcr_status_writer **out)
{
  kcr_status_writer *w;

  *out = NULL;
  if(!o || !o->client || !o->gvr || !o->field_manager || !*o->field_manager ||
     (o->mode == KCR_STATUS_APPLY && (!o->api_version || !o->kind)))
    return KCR_EINVAL;
  w = calloc(1, sizeof(*w));
  if(!w)
    return KCR_ENOMEM;
  w->o = *o;
  w->o.client = kcr_client_ref(o->client);
  w->group = strdup(o->gvr->group ? o->gvr->group : "");
  w->version = dup0(o->gvr->version);
  w->resource = dup0(o->gvr->resource);
  w->api_version = dup0(o->api_version);
  w->kind = dup0(o->kind);
  w->field_manager = strdup(o->field_manager);
  w->gvr = (struct kcr_gvr){w->group, w->version, w->resource, o->gvr->namespaced};
  if(!w->o.retry.steps)
    w->o.retry = (struct kcr_retry)KCR_RETRY_DEFAULT;
  if(!w->group || !w->version || !w->resource || !w->field_manager ||
     (o->api_version && !w->api_version) || (o->kind && !w->kind)) {
    kcr_status_writer_free(w);
    return KCR_ENOMEM;
  }
  w->m_writes = kcr_metric_counter(o->metrics, "kcr_status_writes_total",
                                   "Status writes by outcome: written, skipped "
                                   "(nothing changed), conflict_retried, failed",
                                   (const char *[]){"result", NULL});
  for(const char *const *r =
          (const char *const[]){"written", "skipped", "conflict_retried", "failed", NULL};
      *r; r++)
    kcr_metric_inc(w->m_writes, (const char *[]){*r, NULL}, 0);
  *out = w;
  return KCR_OK;
}

void kcr_status_writer_free(kcr_status_writer *w)
{
  if(!w)
    return;
  free(w->group);
  free(w->version);
  free(w->resource);
  free(w->api_version);
  free(w->kind);
  free(w->field_manager);
  kcr_client_free(w->o.client);
  free(w);
}

static void count(kcr_status_writer *w, const char *result, double n)
{
  kcr_metric_inc(w->m_writes, (const char *[]){result, NULL}, n);
}

/* ---- the merge ---- */

kcr_err kcr_status_merge(const cJSON *obj, const struct kcr_status_desired *d, time_t now,
                         cJSON **conds, bool *changed, struct kcr_errinfo *ei)
{
  const cJSON *status = kcr_json_at(obj, "status");
  const cJSON *cur = kcr_json_at(status, "conditions");
  cJSON *list;
  const cJSON *x;

  *conds = NULL;
  *changed = false;
  for(size_t i = 0; i < d->n; i++) /* all-or-nothing: validate first */
    if(kcr_cond_validate(&d->conds[i], ei))
      return KCR_EINVALID;
  list = cJSON_IsArray(cur) ? cJSON_Duplicate(cur, 1) : cJSON_CreateArray();
  if(!list)
    return KCR_ENOMEM;
  for(size_t i = 0; i < d->n; i++) {
    bool ch = false;
    kcr_err rc = kcr_cond_set(list, &d->conds[i], now, &ch, ei);
    if(rc) {
      cJSON_Delete(list);
      return rc;
    }
    *changed |= ch;
  }
  if(d->set_observed_generation &&
     kcr_json_int(status, "observedGeneration", -1) != d->observed_generation)
    *changed = true;
  cJSON_ArrayForEach(x, d->extra)
  {
    const cJSON *have = cJSON_GetObjectItemCaseSensitive(status, x->string);
    if(!have || !cJSON_Compare(have, x, 1))
      *changed = true;
  }
  *conds = list;
  return KCR_OK;
}

/* Adds observedGeneration and the extra fields to a status object. */
static kcr_err add_owned_fields(cJSON *st, const struct kcr_status_desired *d)
{
  const cJSON *x;
  if(d->set_observed_generation) {
    cJSON_DeleteItemFromObjectCaseSensitive(st, "observedGeneration");
    if(!cJSON_AddNumberToObject(st, "observedGeneration", (double)d->observed_generation))
      return KCR_ENOMEM;
  }
  cJSON_ArrayForEach(x, d->extra)
  {
    cJSON *copy = cJSON_Duplicate(x, 1);
    cJSON_DeleteItemFromObjectCaseSensitive(st, x->string);
    if(!copy || !cJSON_AddItemToObject(st, x->string, copy)) {
      cJSON_Delete(copy);
      return KCR_ENOMEM;
    }
  }
  return KCR_OK;
}

/* ---- writers ---- */

static kcr_err write_apply(kcr_status_writer *w, const struct kcr_ref *ref,
                           const cJSON *merged, const struct kcr_status_desired *d,
                           struct kcr_errinfo *ei)
{
  cJSON *body = cJSON_CreateObject(), *st, *mine;
  kcr_err rc = KCR_ENOMEM;

  if(!body || !cJSON_AddStringToObject(body, "apiVersion", w->api_version) ||
     !cJSON_AddStringToObject(body, "kind", w->kind) ||
     kcr_json_set_str(body, "metadata.name", ref->name) ||
     (ref->ns && kcr_json_set_str(body, "metadata.namespace", ref->ns)) ||
     !(st = cJSON_AddObjectToObject(body, "status")) || add_owned_fields(st, d) ||
     !(mine = cJSON_AddArrayToObject(st, "conditions")))
    goto out;
  /* Only our types, each as merged (so an unchanged one keeps its time). */
  for(size_t i = 0; i < d->n; i++) {
    cJSON *c = cJSON_Duplicate(kcr_cond_find(merged, d->conds[i].type), 1);
    if(!c || !cJSON_AddItemToArray(mine, c)) {
      cJSON_Delete(c);
      goto out;
    }
  }
  rc = kcr_apply(w->o.client, ref, body, w->field_manager, true, NULL, ei);
out:
  cJSON_Delete(body);
  return rc;
}

static kcr_err write_merge(kcr_status_writer *w, const struct kcr_ref *ref,
                           const cJSON *merged, const struct kcr_status_desired *d,
                           struct kcr_errinfo *ei)
{
  cJSON *body = cJSON_CreateObject(), *st, *list = cJSON_Duplicate(merged, 1);
  char *text = NULL;
  kcr_err rc = KCR_ENOMEM;

  if(!body || !list || !(st = cJSON_AddObjectToObject(body, "status")) ||
     add_owned_fields(st, d) || !cJSON_AddItemToObject(st, "conditions", list))
    goto out;
  list = NULL;
  if(!(text = kcr_json_print(body)))
    goto out;
  rc = kcr_patch(w->o.client, ref,
                 &(struct kcr_patch_opts){KCR_PATCH_MERGE, w->field_manager}, text,
                 strlen(text), NULL, ei);
out:
  free(text);
  cJSON_Delete(list);
  cJSON_Delete(body);
  return rc;
}

struct remerge {
  const struct kcr_status_desired *d;
  struct kcr_errinfo *ei;
};

/* The mutation for the update writer: the same merge, on the fresh copy. */
static kcr_err remerge_fresh(cJSON *fresh, bool *changed, void *ud)
{
  struct remerge *r = ud;
  cJSON *conds = NULL, *st;
  kcr_err rc = kcr_status_merge(fresh, r->d, kcr_time_now(), &conds, changed, r->ei);
  if(rc || !*changed) {
    cJSON_Delete(conds);
    return rc;
  }
  st = kcr_json_obj(fresh, "status");
  if(!st) {
    cJSON_Delete(conds);
    return KCR_ENOMEM;
  }
  cJSON_DeleteItemFromObjectCaseSensitive(st, "conditions");
  if(!cJSON_AddItemToObject(st, "conditions", conds)) {
    cJSON_Delete(conds);
    return KCR_ENOMEM;
  }
  return add_owned_fields(st, r->d);
}

static void sleep_retry(const struct kcr_retry *r, int attempt, unsigned *seed)
{
  double ms = (double)r->base_ms;
  for(int i = 0; i < attempt; i++)
    ms *= r->factor > 0 ? r->factor : 1;
  ms += ms * r->jitter * ((double)rand_r(seed) / ((double)RAND_MAX + 1));
  struct timespec ts = {(time_t)(ms / 1000),
                        (long)((ms - (double)(long)(ms / 1000) * 1000) * 1e6)};
  nanosleep(&ts, NULL);
}

kcr_err kcr_update_retry(kcr_client *c, const struct kcr_ref *ref,
                         const struct kcr_retry *retry, kcr_mutate_fn mutate, void *ud,
                         enum kcr_write_result *res, int *conflicts,
                         struct kcr_errinfo *ei)
{
  struct kcr_retry r =
      retry && retry->steps ? *retry : (struct kcr_retry)KCR_RETRY_DEFAULT;
  struct kcr_ref main_ref = *ref;
  unsigned seed = (unsigned)kcr_time_mono_ns();
  kcr_err rc = KCR_ECONFLICT;

  *res = KCR_WRITE_FAILED;
  if(conflicts)
    *conflicts = 0;
  main_ref.sub = NULL; /* GET the whole object; PUT to ref (maybe /status) */
  for(int attempt = 0; attempt < r.steps; attempt++) {
    cJSON *fresh = NULL;
    bool changed = false;
    if(attempt)
      sleep_retry(&r, attempt - 1, &seed);
    rc = kcr_get(c, &main_ref, &fresh, ei); /* from the server, into a new tree */
    if(!rc)
      rc = mutate(fresh, &changed, ud);
    if(!rc && !changed) {
      cJSON_Delete(fresh);
      *res = KCR_WRITE_SKIPPED;
      return KCR_OK;
    }
    if(!rc)
      rc = kcr_update(c, ref, fresh, NULL, NULL, ei);
    cJSON_Delete(fresh);
    if(rc == KCR_OK) {
      *res = KCR_WRITE_WRITTEN;
      return KCR_OK;
    }
    if(rc != KCR_ECONFLICT)
      return rc;
    if(conflicts)
      (*conflicts)++;
  }
  return rc; /* KCR_ECONFLICT: out of retries; ei holds the last 409 */
}

kcr_err kcr_status_write(kcr_status_writer *w, const cJSON *obj,
                         const struct kcr_status_desired *d, enum kcr_write_result *res,
                         struct kcr_errinfo *ei)
{
  const char *ns = kcr_json_str(obj, "metadata.namespace");
  const char *name = kcr_json_str(obj, "metadata.name");
  struct kcr_ref ref = {&w->gvr, ns, name, "status"};
  cJSON *merged = NULL;
  bool changed = false;
  int conflicts = 0;
  kcr_err rc;

  *res = KCR_WRITE_FAILED;
  if(!name)
    return kcr_errinfo_set(ei, KCR_EINVAL, "status write: the object has no name");
  rc = kcr_status_merge(obj, d, kcr_time_now(), &merged, &changed, ei);
  if(rc)
    goto out;
  if(!changed) {
    *res = KCR_WRITE_SKIPPED;
    count(w, "skipped", 1);
    goto out;
  }
  switch(w->o.mode) {
  case KCR_STATUS_APPLY: rc = write_apply(w, &ref, merged, d, ei); break;
  case KCR_STATUS_MERGE_PATCH: rc = write_merge(w, &ref, merged, d, ei); break;
  case KCR_STATUS_UPDATE_RETRY: {
    struct remerge r = {d, ei};
    rc = kcr_update_retry(w->o.client, &ref, &w->o.retry, remerge_fresh, &r, res,
                          &conflicts, ei);
    if(conflicts)
      count(w, "conflict_retried", conflicts);
    if(!rc && *res == KCR_WRITE_SKIPPED) { /* someone already wrote it */
      count(w, "skipped", 1);
      goto out;
    }
    break;
  }
  }
  if(rc) {
    *res = KCR_WRITE_FAILED;
    count(w, "failed", 1);
  } else {
    *res = KCR_WRITE_WRITTEN;
    count(w, "written", 1);
  }
out:
  cJSON_Delete(merged);
  return rc;
}

/* ---- finalizers ---- */

static bool has_finalizer(const cJSON *obj, const char *f)
{
  const cJSON *it;
  cJSON_ArrayForEach(it, kcr_json_at(obj, "metadata.finalizers"))
  {
    if(cJSON_IsString(it) && !strcmp(it->valuestring, f))
      return true;
  }
  return false;
}

/* Builds [{test list}, {op}] guarding the current finalizers list. */
static char *finalizer_patch(const cJSON *obj, const char *f, bool add)
{
  const cJSON *list = kcr_json_at(obj, "metadata.finalizers");
  cJSON *ops = cJSON_CreateArray(), *t, *op;
  char *text = NULL;
  int idx = 0, at = -1;
  const cJSON *it;

  if(!ops)
    return NULL;
  t = cJSON_CreateObject();
  op = cJSON_CreateObject();
  cJSON_AddItemToArray(ops, t);
  cJSON_AddItemToArray(ops, op);
  if(cJSON_IsArray(list)) {
    cJSON_AddStringToObject(t, "op", "test");
    cJSON_AddStringToObject(t, "path", "/metadata/finalizers");
    cJSON_AddItemToObject(t, "value", cJSON_Duplicate(list, 1));
  } else {
    cJSON_AddStringToObject(t, "op", "test");
    cJSON_AddStringToObject(t, "path", "/metadata/resourceVersion");
    cJSON_AddStringToObject(t, "value", kcr_json_str(obj, "metadata.resourceVersion"));
  }
  cJSON_ArrayForEach(it, list)
  {
    if(at < 0 && cJSON_IsString(it) && !strcmp(it->valuestring, f))
      at = idx;
    idx++;
  }
  if(add) {
    cJSON_AddStringToObject(op, "op", "add");
    if(cJSON_IsArray(list)) {
      cJSON_AddStringToObject(op, "path", "/metadata/finalizers/-");
      cJSON_AddStringToObject(op, "value", f);
    } else {
      cJSON_AddStringToObject(op, "path", "/metadata/finalizers");
      cJSON_AddItemToObject(op, "value", cJSON_CreateStringArray(&f, 1));
    }
  } else {
    char path[64];
    snprintf(path, sizeof(path), "/metadata/finalizers/%d", at);
    cJSON_AddStringToObject(op, "op", "remove");
    cJSON_AddStringToObject(op, "path", path);
  }
  text = kcr_json_print(ops);
  cJSON_Delete(ops);
  return text;
}

static kcr_err finalizer_edit(kcr_client *c, const struct kcr_ref *ref, const char *f,
                              bool add, bool *changed, struct kcr_errinfo *ei)
{
  struct kcr_ref main_ref = *ref;
  kcr_err rc = KCR_ECONFLICT;

  if(changed)
    *changed = false;
  if(!f || !*f)
    return kcr_errinfo_set(ei, KCR_EINVAL, "finalizer name is empty");
  main_ref.sub = NULL; /* finalizers live in metadata: never /status */
  for(int attempt = 0; attempt < 5; attempt++) {
    cJSON *obj = NULL;
    char *patch;
    rc = kcr_get(c, &main_ref, &obj, ei);
    if(rc)
      return rc;
    if(has_finalizer(obj, f) == add) { /* already as wanted */
      cJSON_Delete(obj);
      return KCR_OK;
    }
    if(add && kcr_json_str(obj, "metadata.deletionTimestamp")) {
      cJSON_Delete(obj);
      return kcr_errinfo_set(ei, KCR_EINVAL,
                             "cannot add finalizer %s to %s/%s: it is being deleted", f,
                             ref->ns ? ref->ns : "", ref->name);
    }
    patch = finalizer_patch(obj, f, add);
    cJSON_Delete(obj);
    if(!patch)
      return KCR_ENOMEM;
    rc = kcr_patch(c, &main_ref, &(struct kcr_patch_opts){KCR_PATCH_JSON}, patch,
                   strlen(patch), NULL, ei);
    free(patch);
    if(!rc) {
      if(changed)
        *changed = true;
      return KCR_OK;
    }
    /* A failed test op (someone changed the list) answers 422: re-read. */
    if(rc != KCR_EINVALID && rc != KCR_ECONFLICT)
      return rc;
  }
  return rc;
}

kcr_err kcr_finalizer_add(kcr_client *c, const struct kcr_ref *ref, const char *finalizer,
                          bool *changed, struct kcr_errinfo *ei)
{
  return finalizer_edit(c, ref, finalizer, true, changed, ei);
}

kcr_err kcr_finalizer_remove(kcr_client *c, const struct kcr_ref *ref,
                             const char *finalizer, bool *changed, struct kcr_errinfo *ei)
{
  return finalizer_edit(c, ref, finalizer, false, changed, ei);
}

/* ---- owner references ---- */

kcr_err kcr_owner_set_controller(cJSON *child, const cJSON *owner, struct kcr_errinfo *ei)
{
  const char *uid = kcr_json_str(owner, "metadata.uid");
  const char *name = kcr_json_str(owner, "metadata.name");
  const char *av = kcr_json_str(owner, "apiVersion");
  const char *kind = kcr_json_str(owner, "kind");
  const char *ons = kcr_json_str(owner, "metadata.namespace");
  const char *cns = kcr_json_str(child, "metadata.namespace");
  cJSON *meta, *refs, *ref, *it;

  if(!uid || !*uid || !name || !av || !kind)
    return kcr_errinfo_set(ei, KCR_EINVAL,
                           "owner reference: the owner needs apiVersion, kind, "
                           "metadata.name and metadata.uid");
  if(ons && *ons && (!cns || strcmp(ons, cns)))
    return kcr_errinfo_set(ei, KCR_EINVAL,
                           "owner reference: %s %s/%s cannot own an object in namespace "
                           "\"%s\" (cross-namespace owner references are not allowed)",
                           kind, ons, name, cns ? cns : "");
  refs = kcr_json_at(child, "metadata.ownerReferences");
  cJSON_ArrayForEach(it, refs)
  {
    const char *u = kcr_json_str(it, "uid");
    if(!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(it, "controller")))
      continue;
    if(u && !strcmp(u, uid))
      return KCR_OK; /* already ours */
    return kcr_errinfo_set(ei, KCR_EINVAL,
                           "owner reference: the object is already controlled by %s %s "
                           "(uid %s); only one controller reference is allowed",
                           kcr_json_str(it, "kind") ? kcr_json_str(it, "kind") : "?",
                           kcr_json_str(it, "name") ? kcr_json_str(it, "name") : "?",
                           u ? u : "?");
  }
  if(!(meta = kcr_json_obj(child, "metadata")))
    return KCR_ENOMEM;
  if(!cJSON_IsArray(refs)) {
    cJSON_DeleteItemFromObjectCaseSensitive(meta, "ownerReferences");
    if(!(refs = cJSON_AddArrayToObject(meta, "ownerReferences")))
      return KCR_ENOMEM;
  }
  /* A non-controller reference to the same owner is upgraded in place. */
  cJSON_ArrayForEach(it, refs)
  {
    const char *u = kcr_json_str(it, "uid");
    if(u && !strcmp(u, uid)) {
      cJSON_DeleteItemFromObjectCaseSensitive(it, "controller");
      cJSON_DeleteItemFromObjectCaseSensitive(it, "blockOwnerDeletion");
      cJSON_AddTrueToObject(it, "controller");
      cJSON_AddTrueToObject(it, "blockOwnerDeletion");
      return KCR_OK;
    }
  }
  if(!(ref = cJSON_CreateObject()) || !cJSON_AddStringToObject(ref, "apiVersion", av) ||
     !cJSON_AddStringToObject(ref, "kind", kind) ||
     !cJSON_AddStringToObject(ref, "name", name) ||
     !cJSON_AddStringToObject(ref, "uid", uid) ||
     !cJSON_AddTrueToObject(ref, "controller") ||
     !cJSON_AddTrueToObject(ref, "blockOwnerDeletion") ||
     !cJSON_AddItemToArray(refs, ref)) {
    cJSON_Delete(ref);
    return KCR_ENOMEM;
  }
  return KCR_OK;
}
