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
 * Every request body is built with each allocation checked and is sent
 * whole or not at all: a finalizer JSON patch always starts with its test
 * guard, a status body always carries everything the caller owns. int64
 * fields (observedGeneration) are written with kcr_json_add_int, as Go
 * writes them, and compared exactly (kcr_json_int).
 *
 * Read your own writes: a cache lags behind the writes made through it, so
 * the object a reconciler passes may not show this writer's last write yet
 * (a reconcile woken by something else between the write and its watch
 * event). Compared with that older status, the desired one differs, and
 * the write would be made again - a request that changes nothing, or, for
 * a condition that flipped, one that moves its lastTransitionTime to a new
 * "now". So each write's answer (its resourceVersion and status) is kept
 * per uid (written.c), and an object older than it (kcr_rv_compare) is
 * compared with, and merged onto, that status instead. A record goes when
 * an object at or past it is passed (the cache caught up), when versions
 * are not comparable, after WRITTEN_TTL_MS, or the oldest first beyond
 * WRITTEN_MAX; without one the comparison is with the object as given.
 *
 * The record table is the only mutable state of a writer, under its own
 * mutex, so writers are shared freely between worker threads. */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/assert-int.h"
#include "cond-int.h"
#include "core/json-int.h"
#include "kcr/json.h"
#include "kcr/log.h"
#include "kcr/status.h"
#include "kcr/time.h"
#include "kube/client-int.h"
#include "status-int.h"
#include "written-int.h"

/* Records of a writer's own writes (see DESIGN above): a record is needed
 * only until the watch delivers the write it describes, normally within
 * milliseconds; the limits bound the memory of records nobody asks for
 * again (objects deleted, or reconciled no more); kcr_status_writer_seen
 * lets the caller's informer end one soon after the watch delivered it. */
#define WRITTEN_TTL_MS 30000
#define WRITTEN_MAX    4096

struct kcr_status_writer {
  struct kcr_status_writer_opts o;
  struct kcr_gvr gvr;
  char *group, *version, *resource, *api_version, *kind, *field_manager;
  kcr_metric *m_writes;
  struct kcr__written written; /* what its writes answered, per uid */
};

static char *dup0(const char *s) { return s ? strdup(s) : NULL; }

kcr_err kcr_status_writer_new(const struct kcr_status_writer_opts *o,
                              kcr_status_writer **out, struct kcr_errinfo *ei)
{
  kcr_status_writer *w;
  kcr_err rc;

  *out = NULL;
  if(!o || !o->client || !o->gvr || !o->field_manager || !*o->field_manager)
    return kcr_errinfo_set(ei, KCR_EINVAL,
                           "status writer: client, gvr and field_manager are required");
  if((unsigned)o->mode > KCR_STATUS_UPDATE_RETRY)
    return kcr_errinfo_set(ei, KCR_EINVAL, "status writer: unknown mode %d",
                           (int)o->mode);
  if(o->mode == KCR_STATUS_APPLY && (!o->api_version || !o->kind))
    return kcr_errinfo_set(ei, KCR_EINVAL,
                           "status writer: server-side apply needs api_version and kind");
  w = calloc(1, sizeof(*w));
  if(!w)
    return KCR_ENOMEM;
  kcr__written_init(&w->written, WRITTEN_MAX, WRITTEN_TTL_MS);
  w->o = *o;
  w->o.client = kcr_client_ref(o->client);
  w->o.metrics = kcr_metrics_ref(o->metrics);
  w->group = strdup(o->gvr->group ? o->gvr->group : "");
  w->version = dup0(o->gvr->version);
  w->resource = dup0(o->gvr->resource);
  w->api_version = dup0(o->api_version);
  w->kind = dup0(o->kind);
  w->field_manager = strdup(o->field_manager);
  w->gvr = (struct kcr_gvr){.group = w->group,
                            .version = w->version,
                            .resource = w->resource,
                            .namespaced = o->gvr->namespaced};
  if(!w->o.retry.steps)
    w->o.retry = (struct kcr_retry)KCR_RETRY_DEFAULT;
  if(!w->group || !w->version || !w->resource || !w->field_manager ||
     (o->api_version && !w->api_version) || (o->kind && !w->kind)) {
    kcr_status_writer_free(w);
    return KCR_ENOMEM;
  }
  if(o->metrics) {
    rc = kcr_metric_counter(
        o->metrics,
        &(struct kcr_metric_opts){.name = "kcr_status_writes_total",
                                  .help = "Status writes by outcome: written, skipped "
                                          "(nothing changed), conflict_retried, failed",
                                  .label_names = (const char *[]){"result", NULL}},
        &w->m_writes, ei);
    if(rc) {
      kcr_status_writer_free(w);
      return rc;
    }
  }
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
  kcr__written_cleanup(&w->written);
  kcr_client_free(w->o.client);
  kcr_metrics_free(w->o.metrics);
  free(w);
}

void kcr_status_writer_seen(kcr_status_writer *w, const char *uid, const char *rv)
{
  kcr__written_seen(&w->written, uid, rv, kcr_time_mono_ms());
}

bool kcr_status_writer_wrote(kcr_status_writer *w, const char *uid, const char *rv)
{
  return w && kcr__written_is(&w->written, uid, rv);
}

static void count(kcr_status_writer *w, const char *result, double n)
{
  kcr_metric_inc(w->m_writes, (const char *[]){result, NULL}, n);
}

/* ---- the merge ---- */

/* Checks every desired condition (kcr_cond_validate) and that no type is
 * named twice (one item per type is what the list holds, and what an apply
 * may send). All-or-nothing: before anything is merged or sent. */
static kcr_err validate_desired(const struct kcr_status_desired *d,
                                struct kcr_errinfo *ei)
{
  for(size_t i = 0; i < d->n; i++) {
    if(kcr_cond_validate(&d->conds[i], ei))
      return KCR_EINVALID;
    for(size_t j = 0; j < i; j++)
      if(!strcmp(d->conds[j].type, d->conds[i].type))
        return kcr_errinfo_set(
            ei, KCR_EINVALID,
            "desired status: condition type %s named twice (conds[%zu] "
            "and conds[%zu])",
            d->conds[i].type, j, i);
  }
  return KCR_OK;
}

/* Whether merge_status would find nothing to change in status (the desired
 * conditions already valid): the same comparisons, with no copy - what most
 * reconciles come to. */
static bool unchanged(const cJSON *status, const struct kcr_status_desired *d)
{
  const cJSON *cur = kcr_json_at(status, "/conditions"), *x;

  for(size_t i = 0; i < d->n; i++)
    if(!kcr__cond_unchanged(cur, &d->conds[i]))
      return false;
  if(d->observed_generation &&
     kcr_json_int(status, "/observedGeneration", -1) != d->observed_generation)
    return false;
  cJSON_ArrayForEach(x, d->extra)
  {
    const cJSON *have = cJSON_GetObjectItemCaseSensitive(status, x->string);
    if(!have || !cJSON_Compare(have, x, 1))
      return false;
  }
  return true;
}

/* kcr_status_merge on a status object (NULL: none yet); with need_list
 * false only *changed is set (*conds stays NULL). */
static kcr_err merge_status(const cJSON *status, const struct kcr_status_desired *d,
                            time_t now, bool need_list, cJSON **conds, bool *changed,
                            struct kcr_errinfo *ei)
{
  const cJSON *cur = kcr_json_at(status, "/conditions");
  cJSON *list;
  const cJSON *x;

  *conds = NULL;
  *changed = false;
  if(!d || (d->n && !d->conds) || !now)
    return kcr_errinfo_set(ei, KCR_EINVAL,
                           "status merge: needs the desired status and a nonzero now");
  if(validate_desired(d, ei))
    return KCR_EINVALID;
  if(!need_list) {
    *changed = !unchanged(status, d);
    return KCR_OK;
  }
  list = cJSON_IsArray(cur) ? cJSON_Duplicate(cur, 1) : cJSON_CreateArray();
  if(!list)
    return KCR_ENOMEM;
  for(size_t i = 0; i < d->n; i++) {
    bool ch = false;
    kcr_err rc = kcr_cond_set(list, &d->conds[i], now, &ch, ei);
    if(rc) {
      cJSON_Delete(list);
      *changed = false;
      return rc;
    }
    *changed |= ch;
  }
  if(d->observed_generation &&
     kcr_json_int(status, "/observedGeneration", -1) != d->observed_generation)
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

kcr_err kcr_status_merge(const cJSON *obj, const struct kcr_status_desired *d, time_t now,
                         cJSON **conds, bool *changed, struct kcr_errinfo *ei)
{
  return merge_status(kcr_json_at(obj, "/status"), d, now, true, conds, changed, ei);
}

/* Adds observedGeneration and the extra fields to a status object. */
static kcr_err add_owned_fields(cJSON *st, const struct kcr_status_desired *d)
{
  const cJSON *x;
  if(d->observed_generation) {
    cJSON_DeleteItemFromObjectCaseSensitive(st, "observedGeneration");
    if(!kcr_json_add_int(st, "observedGeneration", d->observed_generation))
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

/* Sends an apply body: this writer's field manager, with force. */
static kcr_err send_apply(kcr_status_writer *w, const struct kcr_ref *ref,
                          const char *text, size_t len, struct kcr_buf *answer,
                          struct kcr_errinfo *ei)
{
  return kcr__patch_text(w->o.client, ref,
                         &(struct kcr_patch_opts){.type = KCR_PATCH_APPLY,
                                                  .field_manager = w->field_manager,
                                                  .force = true},
                         text, len, answer, ei);
}

/* What an apply keeps of the item of a desired condition's type in the
 * status compared with: keep when the item exists and holds the desired
 * status (kcr__cond_same_status), and then its lastTransitionTime as it
 * was written - a node (tree) or its text (text) - or none. */
struct kept {
  bool keep;
  const cJSON *ltt;
  const char *ltt_text;
  size_t ltt_n;
};

/* kept for c from a status tree. */
static void kept_in_tree(const void *base, const struct kcr_cond *c, struct kept *k)
{
  const cJSON *old = kcr_cond_find(kcr_json_at(base, "/conditions"), c->type);

  k->keep = old && kcr__cond_same_status(old, c);
  k->ltt = k->keep ? cJSON_GetObjectItemCaseSensitive(old, "lastTransitionTime") : NULL;
}

/* The apply of d on base (the status compared with), written as text
 * without a tree: what write_apply sends of the merged list, for a desired
 * status without extra fields. Each of our types as kcr_cond_set leaves
 * it: the desired type, status, observedGeneration (omitted when 0),
 * reason and message, and the lastTransitionTime the item had when its
 * status stays (as it was written; none if it had none), else the desired
 * one or now. Only those fields: the type's list item is ours to send.
 * Where kcr_status_merge differs, it is in what the apiserver reads the
 * same: a stored observedGeneration 0 is left out (omitempty), and an
 * absent or null message, kept by the merge when "" is wanted, is sent as
 * "" (which the CRD schema requires). old_of tells what is kept of each
 * item of base (a tree: kept_in_tree; text: kept_in_text). */
static kcr_err
apply_text(kcr_status_writer *w, const struct kcr_ref *ref, const void *base,
           void (*old_of)(const void *, const struct kcr_cond *, struct kept *),
           const struct kcr_status_desired *d, time_t now, struct kcr_buf *out)
{
  char t[KCR_RFC3339_LEN];

  kcr_buf_reserve(out, 256 + 160 * d->n);
  kcr_buf_puts(out, "{\"apiVersion\":");
  kcr__json_put_string(out, w->api_version);
  kcr_buf_puts(out, ",\"kind\":");
  kcr__json_put_string(out, w->kind);
  kcr_buf_puts(out, ",\"metadata\":{\"name\":");
  kcr__json_put_string(out, ref->name);
  if(ref->ns) {
    kcr_buf_puts(out, ",\"namespace\":");
    kcr__json_put_string(out, ref->ns);
  }
  kcr_buf_puts(out, "},\"status\":{");
  if(d->observed_generation) {
    kcr_buf_puts(out, "\"observedGeneration\":");
    kcr__json_put_int(out, d->observed_generation);
    kcr_buf_puts(out, ",");
  }
  kcr_buf_puts(out, "\"conditions\":[");
  for(size_t i = 0; i < d->n; i++) {
    const struct kcr_cond *c = &d->conds[i];
    struct kept k = {0};
    old_of(base, c, &k);
    kcr_buf_puts(out, i ? ",{\"type\":" : "{\"type\":");
    kcr__json_put_string(out, c->type);
    kcr_buf_puts(out, ",\"status\":");
    kcr__json_put_string(out, c->status);
    if(c->observed_generation) {
      kcr_buf_puts(out, ",\"observedGeneration\":");
      kcr__json_put_int(out, c->observed_generation);
    }
    if(k.keep && k.ltt) {
      kcr_buf_puts(out, ",\"lastTransitionTime\":");
      if(kcr__json_print(k.ltt, out))
        return KCR_EINVAL; /* a node the tree path could not print either */
    } else if(k.keep && k.ltt_text) {
      kcr_buf_puts(out, ",\"lastTransitionTime\":");
      kcr_buf_append(out, k.ltt_text, k.ltt_n);
    } else if(!k.keep) {
      kcr_time_format(c->last_transition_time ? c->last_transition_time : now, t);
      kcr_buf_puts(out, ",\"lastTransitionTime\":\"");
      kcr_buf_puts(out, t);
      kcr_buf_puts(out, "\"");
    }
    kcr_buf_puts(out, ",\"reason\":");
    kcr__json_put_string(out, c->reason ? c->reason : "");
    kcr_buf_puts(out, ",\"message\":");
    kcr__json_put_string(out, c->message ? c->message : "");
    kcr_buf_puts(out, "}");
  }
  kcr_buf_puts(out, "]}}");
  return kcr_buf_err(out);
}

/* write_apply for a desired status without extra fields: apply_text. */
static kcr_err
write_apply_text(kcr_status_writer *w, const struct kcr_ref *ref, const void *base,
                 void (*old_of)(const void *, const struct kcr_cond *, struct kept *),
                 const struct kcr_status_desired *d, time_t now, struct kcr_buf *answer,
                 struct kcr_errinfo *ei)
{
  struct kcr_buf text = KCR_BUF_INIT;
  kcr_err rc = apply_text(w, ref, base, old_of, d, now, &text);

  if(!rc)
    rc = send_apply(w, ref, text.ptr, text.len, answer, ei);
  kcr_buf_cleanup(&text);
  return rc;
}

/* item without the members a metav1.Condition has not (another writer's,
 * which an apply with force would take over); returns item. */
static cJSON *only_condition_fields(cJSON *item)
{
  static const char *const keep[] = {"type",   "status",  "observedGeneration",
                                     "reason", "message", "lastTransitionTime"};
  cJSON *m = item->child, *next;

  for(; m; m = next) {
    size_t i = 0;
    next = m->next;
    while(i < sizeof(keep) / sizeof(keep[0]) &&
          (!m->string || strcmp(m->string, keep[i])))
      i++;
    if(i == sizeof(keep) / sizeof(keep[0]))
      cJSON_Delete(cJSON_DetachItemViaPointer(item, m));
  }
  return item;
}

/* The writers: *answer gets the text of the server's answer to the write
 * (the object), for remember(). */
static kcr_err write_apply(kcr_status_writer *w, const struct kcr_ref *ref, cJSON *merged,
                           const struct kcr_status_desired *d, struct kcr_buf *answer,
                           struct kcr_errinfo *ei)
{
  cJSON *body = cJSON_CreateObject(), *st, *mine;
  char *text = NULL;
  kcr_err rc = KCR_ENOMEM;

  if(!body || !cJSON_AddStringToObject(body, "apiVersion", w->api_version) ||
     !cJSON_AddStringToObject(body, "kind", w->kind) ||
     kcr_json_set_str(body, "/metadata/name", ref->name) ||
     (ref->ns && kcr_json_set_str(body, "/metadata/namespace", ref->ns)) ||
     !(st = cJSON_AddObjectToObject(body, "status")) || add_owned_fields(st, d) ||
     !(mine = cJSON_AddArrayToObject(st, "conditions")))
    goto out;
  /* Only our types, each as merged (so an unchanged one keeps its time),
   * moved out of merged (the caller's to free, read no more). */
  for(size_t i = 0; i < d->n; i++) {
    cJSON *c = kcr_cond_find(merged, d->conds[i].type);
    if(c)
      cJSON_AddItemToArray(mine,
                           only_condition_fields(cJSON_DetachItemViaPointer(merged, c)));
  }
  if(!(text = kcr_json_to_text(body)))
    goto out;
  rc = send_apply(w, ref, text, strlen(text), answer, ei);
out:
  free(text);
  cJSON_Delete(body);
  return rc;
}

static kcr_err write_merge(kcr_status_writer *w, const struct kcr_ref *ref,
                           const cJSON *merged, const struct kcr_status_desired *d,
                           struct kcr_buf *answer, struct kcr_errinfo *ei)
{
  cJSON *body = cJSON_CreateObject(), *st, *list = cJSON_Duplicate(merged, 1);
  char *text = NULL;
  kcr_err rc = KCR_ENOMEM;

  if(!body || !list || !(st = cJSON_AddObjectToObject(body, "status")) ||
     add_owned_fields(st, d) || !cJSON_AddItemToObject(st, "conditions", list))
    goto out;
  list = NULL;
  if(!(text = kcr_json_to_text(body)))
    goto out;
  rc = kcr__patch_text(w->o.client, ref,
                       &(struct kcr_patch_opts){.type = KCR_PATCH_MERGE,
                                                .field_manager = w->field_manager},
                       text, strlen(text), answer, ei);
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
  st = kcr_json_obj(fresh, "/status");
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

/* Longest sleep between attempts: keeps the double-to-integer conversion
 * below defined (about 31,700 years: never a limit in practice). */
#define SLEEP_MAX_MS 1e15

static void sleep_retry(const struct kcr_retry *r, int attempt, unsigned *seed)
{
  double factor = isfinite(r->factor) && r->factor > 0 ? r->factor : 1;
  double jitter = isfinite(r->jitter) && r->jitter > 0 ? r->jitter : 0;
  double ms = (double)r->base_ms;
  uint64_t whole;

  for(int i = 0; i < attempt && ms < SLEEP_MAX_MS; i++)
    ms *= factor;
  ms += ms * jitter * ((double)rand_r(seed) / ((double)RAND_MAX + 1));
  if(!(ms < SLEEP_MAX_MS)) /* inf included; ms >= 0 by construction */
    ms = SLEEP_MAX_MS;
  whole = (uint64_t)ms;
  struct timespec ts = {(time_t)(whole / 1000), (long)(whole % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* kcr_update_retry; *answer (optional) gets the text of the answer to the
 * PUT that succeeded. */
static kcr_err update_retry(kcr_client *c, const struct kcr_ref *ref,
                            const struct kcr_update_retry_opts *opts,
                            kcr_mutate_fn mutate, void *ud, enum kcr_write_result *res,
                            int *conflicts, struct kcr_buf *answer,
                            struct kcr_errinfo *ei)
{
  struct kcr_retry r =
      opts && opts->retry.steps ? opts->retry : (struct kcr_retry)KCR_RETRY_DEFAULT;
  struct kcr_write_opts wo = {.field_manager = opts ? opts->field_manager : NULL};
  struct kcr_ref main_ref;
  unsigned seed = (unsigned)kcr_time_mono_ns();
  kcr_err rc = KCR_ECONFLICT;

  *res = KCR_WRITE_FAILED;
  if(conflicts)
    *conflicts = 0;
  if(!ref || !ref->name || !mutate)
    return kcr_errinfo_set(ei, KCR_EINVAL,
                           "kcr_update_retry: needs a ref naming an object and a mutate "
                           "function");
  main_ref = *ref;
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
      rc = answer ? kcr__update_text(c, ref, fresh, &wo, answer, ei)
                  : kcr_update(c, ref, fresh, &wo, NULL, ei);
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

kcr_err kcr_update_retry(kcr_client *c, const struct kcr_ref *ref,
                         const struct kcr_update_retry_opts *opts, kcr_mutate_fn mutate,
                         void *ud, enum kcr_write_result *res, int *conflicts,
                         struct kcr_errinfo *ei)
{
  return update_retry(c, ref, opts, mutate, ud, res, conflicts, NULL, ei);
}

/* The string w found, without quotes, into out[size]: false when not
 * found, not a string, escaped (never so in a uid or a version) or too
 * long. */
static bool plain_str(const struct kcr__json_want *w, char *out, size_t size)
{
  if(!w->at || w->n < 2 || *w->at != '"' || w->n - 2 >= size || memchr(w->at, '\\', w->n))
    return false;
  memcpy(out, w->at + 1, w->n - 2);
  out[w->n - 2] = '\0';
  return true;
}

/* Keeps what a write answered (see DESIGN: read your own writes): the
 * object's uid, resourceVersion and status, found in one scan of the
 * answer's text by its structure (a whole object, managed fields included:
 * checking all of it, or parsing it into a tree, costs several times as
 * much). The uid and resourceVersion must be plain strings; the status
 * text is checked when it is needed (kcr__written_newer parses it, and a
 * broken one counts as no record). */
static void remember(kcr_status_writer *w, const struct kcr_buf *answer)
{
  struct kcr__json_want want[] = {{.path = "/metadata/uid"},
                                  {.path = "/metadata/resourceVersion"},
                                  {.path = "/status"}};
  char uid[64], rv[64];

  kcr__json_spans_trusted(kcr_buf_str(answer), answer->len, want, 3);
  if(!plain_str(&want[0], uid, sizeof(uid)) || !plain_str(&want[1], rv, sizeof(rv)))
    return;
  if(want[2].at && *want[2].at != '{')
    want[2].at = NULL, want[2].n = 0; /* no status object: none yet */

  kcr__written_put(&w->written, uid, rv, want[2].at, want[2].n, kcr_time_mono_ms());
}

/* Counts a write's outcome, sets *res, and keeps what it answered. */
static void written(kcr_status_writer *w, kcr_err rc, const struct kcr_buf *answer,
                    enum kcr_write_result *res)
{
  if(rc) {
    *res = KCR_WRITE_FAILED;
    count(w, "failed", 1);
  } else {
    *res = KCR_WRITE_WRITTEN;
    count(w, "written", 1);
    remember(w, answer);
  }
}

kcr_err kcr_status_write(kcr_status_writer *w, const cJSON *obj,
                         const struct kcr_status_desired *d, enum kcr_write_result *res,
                         struct kcr_errinfo *ei)
{
  const char *ns = kcr_json_str(obj, "/metadata/namespace");
  const char *name = kcr_json_str(obj, "/metadata/name");
  const char *rv = kcr_json_str(obj, "/metadata/resourceVersion");
  struct kcr_ref ref = {.gvr = &w->gvr, .ns = ns, .name = name, .sub = "status"};
  cJSON *merged = NULL, *mine = NULL;
  const cJSON *base;
  struct kcr_buf answer = KCR_BUF_INIT;
  time_t now = kcr_time_now();
  bool changed = false, list;
  int conflicts = 0;
  kcr_err rc;

  *res = KCR_WRITE_FAILED;
  if(!name || !d)
    return kcr_errinfo_set(ei, KCR_EINVAL, "status write: %s",
                           d ? "the object has no name" : "no desired status");
  /* obj older than our last write to it: that write's status is the base. */
  mine = kcr__written_newer(&w->written, kcr_json_str(obj, "/metadata/uid"), rv,
                            kcr_time_mono_ms());
  base = mine ? mine : kcr_json_at(obj, "/status");
  /* The merged list is needed only to send it: by a merge patch, or an
   * apply with extra fields (without, the apply is written from d and base:
   * apply_text). */
  list = w->o.mode == KCR_STATUS_MERGE_PATCH ||
         (w->o.mode == KCR_STATUS_APPLY && d->extra && d->extra->child);
  rc = merge_status(base, d, now, list, &merged, &changed, ei);
  if(rc)
    goto out;
  if(mine)
    KCR_LOG(KCR_LOG_DEBUG,
            "status compared with this writer's last write: the object "
            "passed is older",
            KCR_S("namespace", ns), KCR_S("name", name), KCR_S("resourceVersion", rv),
            KCR_B("changed", changed));
  if(!changed) {
    *res = KCR_WRITE_SKIPPED;
    count(w, "skipped", 1);
    goto out;
  }
  switch(w->o.mode) {
  case KCR_STATUS_APPLY:
    rc = merged ? write_apply(w, &ref, merged, d, &answer, ei)
                : write_apply_text(w, &ref, base, kept_in_tree, d, now, &answer, ei);
    break;
  case KCR_STATUS_MERGE_PATCH: rc = write_merge(w, &ref, merged, d, &answer, ei); break;
  case KCR_STATUS_UPDATE_RETRY: {
    struct remerge r = {d, ei};
    rc = update_retry(w->o.client, &ref,
                      &(struct kcr_update_retry_opts){.retry = w->o.retry,
                                                      .field_manager = w->field_manager},
                      remerge_fresh, &r, res, &conflicts, &answer, ei);
    if(conflicts)
      count(w, "conflict_retried", conflicts);
    if(!rc && *res == KCR_WRITE_SKIPPED) { /* someone already wrote it */
      count(w, "skipped", 1);
      goto out;
    }
    break;
  }
  }
  written(w, rc, &answer, res);
out:
  kcr_buf_cleanup(&answer);
  cJSON_Delete(mine);
  cJSON_Delete(merged);
  return rc;
}

/* ---- the object as text ----
 *
 * kcr_status_write_text reads what the comparison needs from the object's
 * text - the namespace, name, uid and resourceVersion, the items of our
 * types in status.conditions and status.observedGeneration - and writes an
 * apply from it, without a tree: what most reconciles of a controller that
 * reads its cache as text come to. Only where the text reads exactly as
 * the tree would: an apply without extra fields, the metadata strings and
 * the conditions without a single escape (the bytes are the strings), the
 * integers plain (at most 18 digits), a kept lastTransitionTime a string
 * or a literal (its text is what printing its node gives). An object older
 * than this writer's own last write is compared with the status text that
 * write answered (own_newer), as the tree compares with its parse, when
 * that text has no escape. Everything else - and a
 * malformed text, for the parser's error - goes through the tree and
 * kcr_status_write. */

/* A value's text: a kcr__json_want's span. */
struct tspan {
  const char *at;
  size_t n;
};

/* Whether a string member's text (no escapes: the caller checked) holds
 * want as member_is reads the tree (absent and null are ""; a value of
 * another kind is nothing). */
static bool tstr_is(const struct tspan *v, const char *want)
{
  size_t n = strlen(want);

  if(!v->at || (v->n == 4 && !memcmp(v->at, "null", 4)))
    return !*want;
  return *v->at == '"' && v->n - 2 == n && !memcmp(v->at + 1, want, n);
}

/* An integer member's text, as kcr_json_get_int reads the node. */
enum tint { TINT_NONE, TINT_INT, TINT_OTHER, TINT_UNSURE };
static enum tint tint(const struct tspan *v, int64_t *out)
{
  const char *p = v->at;
  size_t i = 0, digits;
  int64_t x = 0;

  *out = 0;
  if(!p || (v->n == 4 && !memcmp(p, "null", 4)))
    return TINT_NONE; /* ENOTFOUND */
  if(*p != '-' && (*p < '0' || *p > '9'))
    return TINT_OTHER; /* a string, a literal, an object: EPARSE */
  i = *p == '-';
  digits = v->n - i;
  if(!digits || digits > 18)
    return TINT_UNSURE;
  for(; i < v->n; i++) {
    if(p[i] < '0' || p[i] > '9')
      return TINT_UNSURE; /* a fraction or an exponent: the tree judges */
    x = x * 10 + (p[i] - '0');
  }
  *out = *p == '-' ? -x : x;
  return TINT_INT;
}

/* The members of a condition item kcr_cond_set reads, as text. */
struct titem {
  struct tspan type, status, reason, message, og, ltt;
};

/* The member of it named key[0..kl), or NULL. */
static struct tspan *titem_member(struct titem *it, const char *key, size_t kl)
{
#define TM(name, field)                                                                  \
  if(kl == sizeof(name) - 1 && !memcmp(key, name, kl))                                   \
    return &it->field;
  switch(kl) {
  case 4: TM("type", type) break;
  case 6: TM("status", status) TM("reason", reason) break;
  case 7: TM("message", message) break;
  case 18: TM("observedGeneration", og) TM("lastTransitionTime", ltt) break;
  default: break;
  }
#undef TM
  return NULL;
}

/* The condition items of a status, read once: the objects of the
 * conditions array, each with its members (each written once: a name
 * written twice, which the tree reads as the last, is left to the tree). */
#define TITEMS_MAX 16
struct tconds {
  size_t n;
  struct titem item[TITEMS_MAX];
};

/* Reads conds (an array's text, or none: no items; anything but an array
 * holds none, as kcr_cond_find finds none in it) into *tc: 0; -1 when the
 * structure breaks, an item writes a member it reads twice, or it holds more
 * than TITEMS_MAX objects (then the tree decides). */
static int tconds_read(const struct tspan *conds, struct tconds *tc)
{
  struct kcr__json_iter arr, obj;
  const char *key, *el, *v;
  size_t kl, eln, vn;
  int r, m;

  tc->n = 0;
  if(!conds->at || *conds->at != '[')
    return 0;
  kcr__json_iter_init(&arr, conds->at, conds->n);
  while((r = kcr__json_iter_next(&arr, &key, &kl, &el, &eln)) > 0) {
    struct titem *it;
    if(*el != '{')
      continue;
    if(tc->n == TITEMS_MAX)
      return -1;
    it = &tc->item[tc->n++];
    *it = (struct titem){{0}};
    kcr__json_iter_init(&obj, el, eln);
    while((m = kcr__json_iter_next(&obj, &key, &kl, &v, &vn)) > 0) {
      struct tspan *f = titem_member(it, key, kl);
      if(f && f->at) /* written twice: the tree keeps the last; let it decide */
        return -1;
      if(f)
        *f = (struct tspan){v, vn};
    }
    if(m < 0)
      return -1;
  }
  return r < 0 ? -1 : 0;
}

/* The item kcr_cond_find finds for type: the first whose "type" is that
 * string; NULL: none. */
static const struct titem *tconds_find(const struct tconds *tc, const char *type)
{
  size_t tn = strlen(type);

  for(size_t i = 0; i < tc->n; i++) {
    const struct tspan *t = &tc->item[i].type;
    if(t->at && *t->at == '"' && t->n - 2 == tn && !memcmp(t->at + 1, type, tn))
      return &tc->item[i];
  }
  return NULL;
}

/* unchanged() on the status text: 1 nothing to change, 0 something, -1
 * the text cannot tell (then the tree decides). */
static int unchanged_text(const struct tconds *tc, const struct tspan *og,
                          const struct kcr_status_desired *d)
{
  bool same = true;

  for(size_t i = 0; i < d->n; i++) {
    const struct kcr_cond *c = &d->conds[i];
    const struct titem *it = tconds_find(tc, c->type);
    enum tint k;
    int64_t v;
    if(!it) {
      same = false;
      continue;
    }
    k = tint(&it->og, &v);
    if(k == TINT_UNSURE ||
       (it->ltt.at && !strchr("\"ntf", *it->ltt.at))) /* see kept_in_text */
      return -1;
    same = same && tstr_is(&it->status, c->status ? c->status : "") &&
           tstr_is(&it->reason, c->reason ? c->reason : "") &&
           tstr_is(&it->message, c->message ? c->message : "") && k != TINT_OTHER &&
           v == c->observed_generation;
  }
  if(d->observed_generation) {
    int64_t v;
    enum tint k = tint(og, &v);
    if(k == TINT_UNSURE)
      return -1;
    same = same && (k == TINT_INT ? v : -1) == d->observed_generation;
  }
  return same;
}

/* kept for c from the items of status.conditions (base: a struct
 * tconds): a kept lastTransitionTime is copied as written - a string
 * without escapes or a literal, which printing its node writes the same
 * (unchanged_text sends anything else to the tree). */
static void kept_in_text(const void *base, const struct kcr_cond *c, struct kept *k)
{
  const struct titem *it = tconds_find(base, c->type);

  k->keep = it && tstr_is(&it->status, c->status ? c->status : "");
  if(k->keep && it->ltt.at) {
    k->ltt_text = it->ltt.at;
    k->ltt_n = it->ltt.n;
  }
}

/* The status this writer last wrote to the object uid, when the object
 * (at rv) is older than that write - kcr__written_newer's record, copied
 * into buf - read as text: *conds and *og become its conditions and
 * observedGeneration (or none), and 1 is returned. 0 (the spans left as
 * they are) when there is no such record, or an empty one (no tree either:
 * kcr_status_write compares with the object's); -1 when only the tree
 * reads it exactly: a backslash in it, or text the check refuses (the
 * server's answer is only followed when it is remembered, and the parser
 * takes some text the check does not, such as a number "01"). */
static int own_newer(kcr_status_writer *w, const char *uid, const char *rv,
                     struct kcr_buf *buf, struct tspan *conds, struct tspan *og)
{
  struct kcr__json_want sw[2] = {{.path = "/conditions"},
                                 {.path = "/observedGeneration"}};
  size_t objlen;

  if(!uid || !*uid ||
     !kcr__written_pending(&w->written, uid, rv, false, buf, kcr_time_mono_ms()) ||
     !buf->len)
    return 0;
  if(memchr(buf->ptr, '\\', buf->len))
    return -1;
  kcr__json_scan(buf->ptr, buf->len, sw, 2, &objlen, NULL);
  if(objlen != buf->len)
    return -1;
  *conds = (struct tspan){sw[0].at, sw[0].n};
  *og = (struct tspan){sw[1].at, sw[1].n};
  return 1;
}

kcr_err kcr__status_write_text(kcr_status_writer *w, const char *json, size_t len,
                               bool checked, const struct kcr_status_desired *d,
                               enum kcr_write_result *res, struct kcr_errinfo *ei)
{
  enum { NS, NAME, UID, RV, CONDS, OG, NW };
  struct kcr__json_want want[NW] = {
      {.path = "/metadata/namespace"}, {.path = "/metadata/name"},
      {.path = "/metadata/uid"},       {.path = "/metadata/resourceVersion"},
      {.path = "/status/conditions"},  {.path = "/status/observedGeneration"},
  }; /* in the order of the enum */
  char ns[256], name[256], uid[64], rv[64];
  struct tspan conds, og;
  struct tconds tc;
  struct kcr_buf answer = KCR_BUF_INIT, base = KCR_BUF_INIT;
  cJSON *obj = NULL;
  int same, mine_text;
  kcr_err rc;

  *res = KCR_WRITE_FAILED;
  if(!json)
    return kcr_errinfo_set(ei, KCR_EINVAL, "status write: no object text");
  if(!d || (d->n && !d->conds) || w->o.mode != KCR_STATUS_APPLY ||
     (d->extra && d->extra->child) ||
     !(checked ? kcr__json_spans_trusted_exact : kcr__json_spans_exact)(json, len, want,
                                                                        NW) ||
     !plain_str(&want[NAME], name, sizeof(name)) ||
     (want[NS].at && !plain_str(&want[NS], ns, sizeof(ns))) ||
     (want[UID].at && !plain_str(&want[UID], uid, sizeof(uid))) ||
     (want[RV].at && !plain_str(&want[RV], rv, sizeof(rv))))
    goto tree;
  conds = (struct tspan){want[CONDS].at, want[CONDS].n};
  og = (struct tspan){want[OG].at, want[OG].n};
  /* Older than this writer's last write: compared with that, as the tree
   * compares with kcr__written_newer's status. */
  if((mine_text = own_newer(w, want[UID].at ? uid : NULL, want[RV].at ? rv : NULL, &base,
                            &conds, &og)) < 0)
    goto tree;
  if((conds.at && memchr(conds.at, '\\', conds.n)) || tconds_read(&conds, &tc))
    goto tree;
  if((rc = validate_desired(d, ei)))
    goto out;
  if((same = unchanged_text(&tc, &og, d)) < 0)
    goto tree;
  if(mine_text)
    KCR_LOG(KCR_LOG_DEBUG,
            "status compared with this writer's last write: the object "
            "passed is older",
            KCR_S("namespace", want[NS].at ? ns : NULL), KCR_S("name", name),
            KCR_S("resourceVersion", want[RV].at ? rv : NULL), KCR_B("changed", !same));
  if(same) {
    *res = KCR_WRITE_SKIPPED;
    count(w, "skipped", 1);
    rc = KCR_OK;
    goto out;
  }
  struct kcr_ref ref = {
      .gvr = &w->gvr, .ns = want[NS].at ? ns : NULL, .name = name, .sub = "status"};
  rc = write_apply_text(w, &ref, &tc, kept_in_text, d, kcr_time_now(), &answer, ei);
  written(w, rc, &answer, res);
out:
  kcr_buf_cleanup(&answer);
  kcr_buf_cleanup(&base);
  return rc;
tree:
  kcr_buf_cleanup(&base);
  if((rc = kcr_json_parse(json, len, &obj, ei)))
    return rc;
  rc = kcr_status_write(w, obj, d, res, ei);
  cJSON_Delete(obj);
  return rc;
}

kcr_err kcr_status_write_text(kcr_status_writer *w, const char *json, size_t len,
                              const struct kcr_status_desired *d,
                              enum kcr_write_result *res, struct kcr_errinfo *ei)
{
  return kcr__status_write_text(w, json, len, false, d, res, ei);
}

/* ---- finalizers ---- */

static bool has_finalizer(const cJSON *obj, const char *f)
{
  const cJSON *it;
  cJSON_ArrayForEach(it, kcr_json_at(obj, "/metadata/finalizers"))
  {
    if(cJSON_IsString(it) && !strcmp(it->valuestring, f))
      return true;
  }
  return false;
}

/* Adds a new object to array ops; NULL if out of memory. */
static cJSON *add_op(cJSON *ops, const char *op, const char *path)
{
  cJSON *o = cJSON_CreateObject();
  if(!o || !cJSON_AddStringToObject(o, "op", op) ||
     !cJSON_AddStringToObject(o, "path", path) || !cJSON_AddItemToArray(ops, o)) {
    cJSON_Delete(o);
    return NULL;
  }
  return o;
}

/* Adds member "value" (v, consumed) to op. */
static bool add_value(cJSON *op, cJSON *v)
{
  if(v && cJSON_AddItemToObject(op, "value", v))
    return true;
  cJSON_Delete(v);
  return false;
}

/* Builds [{test}, {op}] into *text: the test op guards the current
 * finalizers list (or, when there is none, the resourceVersion), so the
 * patch applies only to the object as read. Every allocation is checked: a
 * patch is made whole, with its guard first, or not at all.
 * KCR_EPARSE when the object has no resourceVersion to guard with. */
static kcr_err finalizer_patch(const cJSON *obj, const char *f, bool add, char **text)
{
  const cJSON *list = kcr_json_at(obj, "/metadata/finalizers");
  const char *rv = kcr_json_str(obj, "/metadata/resourceVersion");
  bool has_list = cJSON_IsArray(list);
  cJSON *ops = NULL, *t, *op;
  kcr_err rc = KCR_ENOMEM;
  char path[64];

  *text = NULL;
  if(!has_list && !rv)
    return KCR_EPARSE;
  if(!(ops = cJSON_CreateArray()))
    goto out;
  if(has_list) {
    if(!(t = add_op(ops, "test", "/metadata/finalizers")) ||
       !add_value(t, cJSON_Duplicate(list, 1)))
      goto out;
  } else if(!(t = add_op(ops, "test", "/metadata/resourceVersion")) ||
            !add_value(t, cJSON_CreateString(rv))) {
    goto out;
  }
  if(add && has_list) {
    if(!(op = add_op(ops, "add", "/metadata/finalizers/-")) ||
       !add_value(op, cJSON_CreateString(f)))
      goto out;
  } else if(add) {
    if(!(op = add_op(ops, "add", "/metadata/finalizers")) ||
       !add_value(op, cJSON_CreateStringArray(&f, 1)))
      goto out;
  } else {
    int idx = 0, at = -1;
    const cJSON *it;
    cJSON_ArrayForEach(it, list)
    {
      if(at < 0 && cJSON_IsString(it) && !strcmp(it->valuestring, f))
        at = idx;
      idx++;
    }
    KCR_ASSERT(at >= 0); /* the caller saw it in the list */
    snprintf(path, sizeof(path), "/metadata/finalizers/%d", at);
    if(!add_op(ops, "remove", path))
      goto out;
  }
  if((*text = kcr_json_to_text(ops)))
    rc = KCR_OK;
out:
  cJSON_Delete(ops);
  return rc;
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
    if(add && kcr_json_str(obj, "/metadata/deletionTimestamp")) {
      cJSON_Delete(obj);
      return kcr_errinfo_set(ei, KCR_EINVAL,
                             "cannot add finalizer %s to %s/%s: it is being deleted", f,
                             ref->ns ? ref->ns : "", ref->name);
    }
    rc = finalizer_patch(obj, f, add, &patch);
    cJSON_Delete(obj);
    if(rc == KCR_EPARSE)
      return kcr_errinfo_set(ei, rc,
                             "finalizer %s on %s/%s: the object has no "
                             "metadata.resourceVersion to guard the patch with",
                             f, ref->ns ? ref->ns : "", ref->name);
    if(rc)
      return kcr_errinfo_set(ei, rc, "finalizer %s: out of memory", f);
    rc = kcr_patch(c, &main_ref, &(struct kcr_patch_opts){.type = KCR_PATCH_JSON}, patch,
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

/* Sets member key of o to v (a new tree, not consumed on error), replacing
 * any member of that name; on KCR_ENOMEM o is unchanged. Not
 * cJSON_ReplaceItemInObject: cJSON 1.7.15 inserts a nameless member when
 * copying the key fails; here the key is copied first and the swap that
 * follows cannot fail. */
static kcr_err set_member(cJSON *o, const char *key, cJSON *v)
{
  cJSON *old = cJSON_GetObjectItemCaseSensitive(o, key);
  char *name;

  if(!old)
    return cJSON_AddItemToObject(o, key, v) ? KCR_OK : KCR_ENOMEM;
  if(!(name = cJSON_malloc(strlen(key) + 1)))
    return KCR_ENOMEM;
  memcpy(name, key, strlen(key) + 1);
  v->string = name;
  cJSON_ReplaceItemViaPointer(o, old, v);
  return KCR_OK;
}

kcr_err kcr_owner_set_controller(cJSON *child, const cJSON *owner, struct kcr_errinfo *ei)
{
  const char *uid = kcr_json_str(owner, "/metadata/uid");
  const char *name = kcr_json_str(owner, "/metadata/name");
  const char *av = kcr_json_str(owner, "/apiVersion");
  const char *kind = kcr_json_str(owner, "/kind");
  const char *ons = kcr_json_str(owner, "/metadata/namespace");
  const char *cns = kcr_json_str(child, "/metadata/namespace");
  cJSON *meta, *refs, *ref = NULL, *list, *it;

  if(!cJSON_IsObject(child))
    return kcr_errinfo_set(ei, KCR_EINVAL, "owner reference: the child is not an object");
  if(!uid || !*uid || !name || !av || !kind)
    return kcr_errinfo_set(ei, KCR_EINVAL,
                           "owner reference: the owner needs apiVersion, kind, "
                           "metadata.name and metadata.uid");
  if(ons && *ons && (!cns || strcmp(ons, cns)))
    return kcr_errinfo_set(ei, KCR_EINVAL,
                           "owner reference: %s %s/%s cannot own an object in namespace "
                           "\"%s\" (cross-namespace owner references are not allowed)",
                           kind, ons, name, cns ? cns : "");
  refs = kcr_json_at(child, "/metadata/ownerReferences");
  cJSON_ArrayForEach(it, refs)
  {
    const char *u = kcr_json_str(it, "/uid");
    if(!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(it, "controller")))
      continue;
    if(u && !strcmp(u, uid))
      return KCR_OK; /* already ours */
    return kcr_errinfo_set(ei, KCR_EINVAL,
                           "owner reference: the object is already controlled by %s %s "
                           "(uid %s); only one controller reference is allowed",
                           kcr_json_str(it, "/kind") ? kcr_json_str(it, "/kind") : "?",
                           kcr_json_str(it, "/name") ? kcr_json_str(it, "/name") : "?",
                           u ? u : "?");
  }
  /* Everything new is built first and attached by steps that cannot fail
   * (a pointer swap, an append to an existing array), so on ENOMEM the
   * child is exactly as it was. */
  cJSON_ArrayForEach(it, refs)
  {
    /* A non-controller reference to the same owner is upgraded in place. */
    const char *u = kcr_json_str(it, "/uid");
    cJSON *upd, *tmp;
    if(!u || strcmp(u, uid))
      continue;
    upd = cJSON_Duplicate(it, 1);
    if(!upd)
      return KCR_ENOMEM;
    cJSON_DeleteItemFromObjectCaseSensitive(upd, "controller");
    cJSON_DeleteItemFromObjectCaseSensitive(upd, "blockOwnerDeletion");
    if(!cJSON_AddTrueToObject(upd, "controller") ||
       !cJSON_AddTrueToObject(upd, "blockOwnerDeletion")) {
      cJSON_Delete(upd);
      return KCR_ENOMEM;
    }
    tmp = it->child; /* commit: it takes the new members */
    it->child = upd->child;
    upd->child = tmp;
    cJSON_Delete(upd);
    return KCR_OK;
  }
  if(!(ref = cJSON_CreateObject()) || !cJSON_AddStringToObject(ref, "apiVersion", av) ||
     !cJSON_AddStringToObject(ref, "kind", kind) ||
     !cJSON_AddStringToObject(ref, "name", name) ||
     !cJSON_AddStringToObject(ref, "uid", uid) ||
     !cJSON_AddTrueToObject(ref, "controller") ||
     !cJSON_AddTrueToObject(ref, "blockOwnerDeletion"))
    goto nomem;
  if(cJSON_IsArray(refs)) {
    cJSON_AddItemToArray(refs, ref); /* cannot fail: both exist */
    return KCR_OK;
  }
  /* No list yet (or one of another type): a new one, then metadata. */
  if(!(list = cJSON_CreateArray()))
    goto nomem;
  cJSON_AddItemToArray(list, ref);
  ref = list;
  meta = kcr_json_at(child, "/metadata");
  if(!cJSON_IsObject(meta)) {
    cJSON *m = cJSON_CreateObject();
    if(!m || !cJSON_AddItemToObject(m, "ownerReferences", list)) {
      cJSON_Delete(m);
      goto nomem;
    }
    ref = m; /* holds list now */
    if(set_member(child, "metadata", m))
      goto nomem;
    return KCR_OK;
  }
  if(set_member(meta, "ownerReferences", list))
    goto nomem;
  return KCR_OK;
nomem:
  cJSON_Delete(ref);
  return KCR_ENOMEM;
}
