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

const char *const ebdman_vfm_keep[] = {"/spec", "/metadata/annotations",
                                       "/status/conditions", NULL};
const char *const ebdman_configmap_keep[] = {"/data", "/metadata/annotations", NULL};

/* The uid of obj's controller ownerReference, or NULL. */
static const char *controller_uid(const cJSON *obj)
{
  const cJSON *r;
  cJSON_ArrayForEach(r, kcr_json_at(obj, "/metadata/ownerReferences"))
  {
    if(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r, "controller")))
      return kcr_json_member_str(r, "uid");
  }
  return NULL;
}

/* Absent and {} are the same for maps the server may drop when empty. */
static bool same_map(const cJSON *a, const cJSON *b)
{
  bool ea = !a || (cJSON_IsObject(a) && !a->child),
       eb = !b || (cJSON_IsObject(b) && !b->child);
  if(ea || eb)
    return ea && eb;
  return cJSON_Compare(a, b, 1);
}

/* The annotations ebdman propagates: the same set with the same values.
 * Annotations are a map of strings; anything else (an array has members
 * without names) is no match. */
static bool same_annotations(const cJSON *want, const cJSON *have)
{
  const cJSON *wann = kcr_json_at(want, "/metadata/annotations"),
              *hann = kcr_json_at(have, "/metadata/annotations"), *a;
  size_t plen = strlen(EBDMAN_VFM_ANNOTATION_PREFIX);

  if((wann && !cJSON_IsObject(wann)) || (hann && !cJSON_IsObject(hann)))
    return false;
  cJSON_ArrayForEach(a, wann)
  {
    const char *v = a->string ? kcr_json_member_str(hann, a->string) : NULL;
    if(!v || !cJSON_IsString(a) || strcmp(v, a->valuestring))
      return false;
  }
  cJSON_ArrayForEach(a, hann)
  {
    if(a->string && !strncmp(a->string, EBDMAN_VFM_ANNOTATION_PREFIX, plen) &&
       !cJSON_GetObjectItemCaseSensitive(wann, a->string))
      return false;
  }
  return true;
}

bool ebdman_child_same_content(const cJSON *have, const cJSON *want, const char *field)
{
  return have && same_map(kcr_json_at(want, field), kcr_json_at(have, field));
}

enum ebdman_child_plan ebdman_child_plan(const cJSON *have, const cJSON *want,
                                         const char *field)
{
  const char *ours = controller_uid(want), *theirs;

  if(!have)
    return EBDMAN_CHILD_CREATE;
  theirs = controller_uid(have);
  if(!ours || !theirs || strcmp(ours, theirs))
    return EBDMAN_CHILD_CONFLICT;
  if(ebdman_child_same_content(have, want, field) && same_annotations(want, have))
    return EBDMAN_CHILD_KEEP;
  return EBDMAN_CHILD_UPDATE;
}

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
  if(src->at && *src->at == '{')
    return (have->at && have->n == src->n && !memcmp(have->at, src->at, src->n)) ||
           (!have->at && empty_map(src));
  return !have->at || empty_map(have); /* an EBD without that part: {} */
}

kcr_err ebdman_child_precondition(cJSON *want, enum ebdman_child_plan plan,
                                  const cJSON *have)
{
  cJSON *meta = cJSON_GetObjectItemCaseSensitive(want, "metadata");
  const char *uid = kcr_json_str(have, "/metadata/uid");

  if(!cJSON_IsObject(meta) ||
     (plan != EBDMAN_CHILD_CREATE && plan != EBDMAN_CHILD_UPDATE) ||
     (plan == EBDMAN_CHILD_UPDATE && (!uid || !*uid)))
    return KCR_EINVAL;
  cJSON_DeleteItemFromObjectCaseSensitive(meta, "resourceVersion");
  cJSON_DeleteItemFromObjectCaseSensitive(meta, "uid");
  if(plan == EBDMAN_CHILD_CREATE)
    return cJSON_AddStringToObject(meta, "resourceVersion", EBDMAN_CREATE_ONLY_RV)
               ? KCR_OK
               : KCR_ENOMEM;
  return cJSON_AddStringToObject(meta, "uid", uid) ? KCR_OK : KCR_ENOMEM;
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

/* "Kind name (uid U)" of one ownerReference. */
static void put_ref(char *out, size_t n, size_t *at, const cJSON *r)
{
  const char *kind = kcr_json_member_str(r, "kind"),
             *name = kcr_json_member_str(r, "name"), *uid = kcr_json_member_str(r, "uid");
  put(out, n, at, "%s %s (uid %s)", kind ? kind : "?", name ? name : "?",
      uid ? uid : "?");
}

/* Who owns have: its controller, else its other owners, else "no owner". */
static void put_owners(char *out, size_t n, size_t *at, const cJSON *have)
{
  const cJSON *refs = kcr_json_at(have, "/metadata/ownerReferences"), *r;
  int others = 0;

  cJSON_ArrayForEach(r, refs)
  {
    if(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r, "controller"))) {
      put(out, n, at, "its controller is ");
      put_ref(out, n, at, r);
      return;
    }
  }
  cJSON_ArrayForEach(r, refs)
  {
    put(out, n, at, others++ ? ", " : "it has no controller; its owners are ");
    put_ref(out, n, at, r);
  }
  if(!others)
    put(out, n, at, "it has no owner");
}

/* The field managers that wrote have (managedFields; known when it was
 * read with a GET - caches drop them), at most four, each once; not those
 * that wrote only a subresource (the status its controller reports). */
static void put_managers(char *out, size_t n, size_t *at, const cJSON *have)
{
  const cJSON *mf;
  const char *seen[4];
  int k = 0;

  cJSON_ArrayForEach(mf, kcr_json_at(have, "/metadata/managedFields"))
  {
    const char *m = kcr_json_member_str(mf, "manager"),
               *sub = kcr_json_member_str(mf, "subresource");
    bool dup = sub && *sub;
    for(int i = 0; i < k && m; i++)
      dup = dup || !strcmp(seen[i], m);
    if(!m || !*m || dup)
      continue;
    if(k == 4) {
      put(out, n, at, ", ...");
      break;
    }
    put(out, n, at, k ? ", %s" : "; written by %s", m);
    seen[k++] = m;
  }
}

void ebdman_child_conflict_msg(char *out, size_t n, const cJSON *want, const cJSON *have)
{
  const char *kind = kcr_json_str(want, "/kind"),
             *ns = kcr_json_str(want, "/metadata/namespace"),
             *name = kcr_json_str(want, "/metadata/name");
  size_t at = 0;

  if(!n)
    return;
  *out = '\0';
  put(out, n, &at, "%s %s/%s exists and is not this EBD's (", kind ? kind : "child",
      ns ? ns : "", name ? name : "");
  put_owners(out, n, &at, have);
  put_managers(out, n, &at, have);
  put(out, n, &at,
      "): ebdman does not take over an object it did not create; delete or rename "
      "that %s, or use another EBD name",
      kind ? kind : "object");
}
