/* DESIGN: CRD conversion webhooks (kcr/webhook.h, ConversionReview).
 *
 * The review is walked as text (kcr/jsontext.h): each object's text is cut
 * out of the body, and an object already in the desired version is copied
 * into the answer byte for byte. An object that needs converting becomes a
 * cJSON tree (kcr_json_parse: integers stay exact), because the library
 * works on it around the user's converters: apiVersion set, metadata
 * checked and restored, the round-trip annotation made or used. Converters
 * see and produce text, so they can use typed objects.
 *
 * Round trips (KCR_CONVERSION_ANNOTATION): hub -> spoke S is followed by
 * S -> hub; when that differs from the hub object in spec or status, the
 * hub's spec and status are stored on the spoke. S -> hub with the
 * annotation present: h = to_hub(S without it); r = to_hub(from_hub(H)),
 * where H is h with the stored spec and status, is what survives a trip
 * through S; restore(h, r, stored) then puts back, member by member, each
 * stored value the trip loses (absent from r, or changed by it) - unless
 * the client changed it through S (h differs from r there), when h's
 * value stays. Arrays and scalars are values; objects are walked. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err-int.h"
#include "kcr/json.h"
#include "kcr/log.h"
#include "kcr/webhook.h"
#include "runtime/httpd-int.h"
#include "runtime/webhook-int.h"

/* The round-trip annotation's largest text: the apiserver allows 256 KiB
 * of annotations in all. */
#define STASH_MAX (128u << 10)

struct spoke {
  char *version;
  kcr_convert_fn to_hub, from_hub;
};

struct conv {
  char *path, *name, *group, *hub;
  struct spoke *v;
  size_t n;
  void *ud;
  struct kcr__whm m;
};

struct kcr_conversion {
  struct kcr_arena arena;
  struct kcr_errinfo ei;
};

struct kcr_arena *kcr_conversion_arena(kcr_conversion *cv)
{
  return cv ? &cv->arena : NULL;
}

struct kcr_errinfo *kcr_conversion_ei(kcr_conversion *cv) { return cv ? &cv->ei : NULL; }

/* ---- one object ------------------------------------------------------------ */

static const struct spoke *spoke_of(const struct conv *c, const char *version)
{
  for(size_t i = 0; i < c->n; i++)
    if(!strcmp(c->v[i].version, version))
      return &c->v[i];
  return NULL;
}

/* Runs a converter on t and parses what it wrote into *out. */
static kcr_err call(const struct conv *c, kcr_conversion *cv, kcr_convert_fn fn,
                    const cJSON *t, cJSON **out, char *why, size_t nwhy)
{
  struct kcr_buf b = KCR_BUF_INIT;
  char *text = kcr_json_to_text(t);
  kcr_err rc;

  *out = NULL;
  if(!text)
    return KCR_ENOMEM;
  kcr_errinfo_cleanup(&cv->ei);
  rc = fn(cv, (struct kcr_str){.s = text, .n = strlen(text)}, &b, c->ud);
  free(text);
  if(rc) {
    snprintf(why, nwhy, "%s", cv->ei.message ? cv->ei.message : kcr_strerror(rc));
  } else if((rc = kcr_buf_err(&b))) {
    snprintf(why, nwhy, "out of memory");
  } else if(!b.len || kcr_json_parse(b.ptr, b.len, out, NULL) || !cJSON_IsObject(*out)) {
    rc = KCR_EPARSE;
    snprintf(why, nwhy, "the converter wrote no JSON object");
  }
  kcr_buf_cleanup(&b);
  if(rc) {
    cJSON_Delete(*out);
    *out = NULL;
  }
  return rc;
}

/* Adds a copy of v to obj as key; false (nothing added, nothing kept)
 * when out of memory. */
static bool add_copy(cJSON *obj, const char *key, const cJSON *v)
{
  cJSON *d = cJSON_Duplicate(v, true);

  if(d && cJSON_AddItemToObject(obj, key, d))
    return true;
  cJSON_Delete(d);
  return false;
}

static bool same(const cJSON *a, const cJSON *b)
{
  return (!a && !b) || (a && b && cJSON_Compare(a, b, true));
}

/* Puts back into h what a trip through the spoke loses of s (r: s after
 * the trip), unless the client changed it (see DESIGN). Out of memory:
 * false. */
static bool restore(cJSON *h, const cJSON *r, const cJSON *s)
{
  const cJSON *m;

  cJSON_ArrayForEach(m, s)
  {
    const cJSON *rm = cJSON_GetObjectItemCaseSensitive(r, m->string);
    cJSON *hm = cJSON_GetObjectItemCaseSensitive(h, m->string);
    if(!rm) { /* the spoke cannot hold it */
      if(!hm && !add_copy(h, m->string, m))
        return false;
    } else if(hm && cJSON_IsObject(m) && cJSON_IsObject(rm) && cJSON_IsObject(hm)) {
      if(!restore(hm, rm, m))
        return false;
    } else if(hm && same(hm, rm) && !same(rm, m)) { /* lost on the trip, unchanged */
      cJSON *d = cJSON_Duplicate(m, true);
      if(!d || !cJSON_ReplaceItemViaPointer(h, hm, d)) {
        cJSON_Delete(d);
        return false;
      }
    }
  }
  return true;
}

/* The stored hub data of a spoke (parsed) in *out, removed from it; NULL
 * when there is none or it is not a JSON object (a client's edit: the trip
 * then loses what it held). Errors: KCR_ENOMEM. */
static kcr_err take_stash(cJSON *spoke, cJSON **out)
{
  cJSON *ann = kcr_json_at(spoke, "/metadata/annotations");
  cJSON *a = cJSON_GetObjectItemCaseSensitive(ann, KCR_CONVERSION_ANNOTATION);
  kcr_err rc = KCR_OK;

  *out = NULL;
  if(!a)
    return KCR_OK;
  if(cJSON_IsString(a) && (rc = kcr_json_parse(a->valuestring, strlen(a->valuestring),
                                               out, NULL)) == KCR_ENOMEM)
    return rc;
  cJSON_DeleteItemFromObjectCaseSensitive(ann, KCR_CONVERSION_ANNOTATION);
  if(!ann->child)
    cJSON_DeleteItemFromObjectCaseSensitive(kcr_json_at(spoke, "/metadata"),
                                            "annotations");
  if(*out && !cJSON_IsObject(*out)) {
    cJSON_Delete(*out);
    *out = NULL;
  }
  return KCR_OK;
}

/* A copy of hub with spec and status taken from stash. */
static cJSON *with_stash(const cJSON *hub, const cJSON *stash)
{
  static const char *const parts[] = {"spec", "status"};
  cJSON *h = cJSON_Duplicate(hub, true);

  for(int i = 0; h && i < 2; i++) {
    cJSON *v = cJSON_GetObjectItemCaseSensitive(stash, parts[i]);
    cJSON_DeleteItemFromObjectCaseSensitive(h, parts[i]);
    if(v && !add_copy(h, parts[i], v)) {
      cJSON_Delete(h);
      return NULL;
    }
  }
  return h;
}

static bool put_stash(cJSON *spoke, const cJSON *hub)
{
  cJSON *s = cJSON_CreateObject();
  char *text;
  bool ok;

  for(const char *const *p = (const char *const[]){"spec", "status", NULL}; s && *p;
      p++) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(hub, *p);
    if(v && !add_copy(s, *p, v)) {
      cJSON_Delete(s);
      s = NULL;
    }
  }
  text = s ? kcr_json_to_text(s) : NULL;
  cJSON_Delete(s);
  if(text && strlen(text) > STASH_MAX) { /* annotations are limited to 256 KiB in all */
    const char *name = kcr_json_str(spoke, "/metadata/name");
    KCR_LOG(KCR_LOG_WARN,
            "conversion webhook: what the version cannot hold is too large to keep; a "
            "client writing through it loses it",
            KCR_S("name", name ? name : ""), KCR_I("bytes", strlen(text)));
    free(text);
    return true;
  }
  ok = text && !kcr_json_set_str(
                   spoke, "/metadata/annotations/conversion.kcr.io~1hub-data", text);
  free(text);
  return ok;
}

/* out's metadata made in's but for labels and annotations: a member out
 * lacks is copied, one it changed or added fails (why names it). */
static kcr_err fix_metadata(const cJSON *in, cJSON *out, char *why, size_t nwhy)
{
  const cJSON *mi = cJSON_GetObjectItemCaseSensitive(in, "metadata"), *m;
  cJSON *mo = cJSON_GetObjectItemCaseSensitive(out, "metadata");

  if(!mi && !mo)
    return KCR_OK; /* none came, none goes */
  if(mo && !cJSON_IsObject(mo)) {
    snprintf(why, nwhy, "the converter wrote a metadata that is no object");
    return KCR_EINVAL;
  }
  if(!mo && !(mo = kcr_json_obj(out, "/metadata")))
    return KCR_ENOMEM;
  cJSON_ArrayForEach(m, mo)
  {
    if(!strcmp(m->string, "labels") || !strcmp(m->string, "annotations"))
      continue;
    const cJSON *was = cJSON_GetObjectItemCaseSensitive(mi, m->string);
    if(!was || !cJSON_Compare(was, m, true)) {
      snprintf(why, nwhy,
               "the converter %s metadata.%s (only labels and annotations "
               "may change)",
               was ? "changed" : "added", m->string);
      return KCR_EINVAL;
    }
  }
  cJSON_ArrayForEach(m, mi)
  {
    if(!strcmp(m->string, "labels") || !strcmp(m->string, "annotations") ||
       cJSON_GetObjectItemCaseSensitive(mo, m->string))
      continue;
    if(!add_copy(mo, m->string, m))
      return KCR_ENOMEM;
  }
  return KCR_OK;
}

/* Converts the object text from version `from` to `to` into *out. */
static kcr_err convert(const struct conv *c, kcr_conversion *cv, struct kcr_str text,
                       const char *from, const char *to, cJSON **out, char *why,
                       size_t nwhy)
{
  const struct spoke *fs = strcmp(from, c->hub) ? spoke_of(c, from) : NULL;
  const struct spoke *ts = strcmp(to, c->hub) ? spoke_of(c, to) : NULL;
  cJSON *in = NULL, *hub = NULL, *res = NULL, *stash = NULL, *tmp = NULL, *rt = NULL;
  char api[320];
  kcr_err rc;

  *out = NULL;
  if((strcmp(from, c->hub) && !fs) || (strcmp(to, c->hub) && !ts)) {
    snprintf(why, nwhy, "no converter for version %s",
             fs || !strcmp(from, c->hub) ? to : from);
    return KCR_EINVAL;
  }
  if(kcr_json_parse(text.s, text.n, &in, NULL)) {
    snprintf(why, nwhy, "the object is not JSON");
    return KCR_EPARSE;
  }
  /* to the hub, putting back what the spoke's round-trip data holds */
  if(!fs) {
    hub = cJSON_Duplicate(in, true);
    rc = hub ? KCR_OK : KCR_ENOMEM;
  } else {
    cJSON *spoke = cJSON_Duplicate(in, true);
    rc = spoke ? take_stash(spoke, &stash) : KCR_ENOMEM;
    if(!rc)
      rc = call(c, cv, fs->to_hub, spoke, &hub, why, nwhy);
    cJSON_Delete(spoke);
    if(!rc && stash) {
      cJSON *h = with_stash(hub, stash);
      rc = h ? call(c, cv, fs->from_hub, h, &tmp, why, nwhy) : KCR_ENOMEM;
      if(!rc)
        rc = call(c, cv, fs->to_hub, tmp, &rt, why, nwhy);
      if(!rc && !restore(hub, rt, h))
        rc = KCR_ENOMEM;
      cJSON_Delete(h);
    }
  }
  /* from the hub, keeping what the spoke cannot hold */
  if(!rc && !ts) {
    res = hub;
    hub = NULL;
  } else if(!rc) {
    cJSON *back = NULL;
    rc = call(c, cv, ts->from_hub, hub, &res, why, nwhy);
    if(!rc)
      rc = call(c, cv, ts->to_hub, res, &back, why, nwhy);
    if(!rc &&
       (!same(cJSON_GetObjectItemCaseSensitive(back, "spec"),
              cJSON_GetObjectItemCaseSensitive(hub, "spec")) ||
        !same(cJSON_GetObjectItemCaseSensitive(back, "status"),
              cJSON_GetObjectItemCaseSensitive(hub, "status"))) &&
       !put_stash(res, hub))
      rc = KCR_ENOMEM;
    cJSON_Delete(back);
  }
  if(!rc)
    rc = fix_metadata(in, res, why, nwhy);
  snprintf(api, sizeof(api), "%s/%s", c->group, to);
  if(!rc) { /* apiVersion the target's, kind the input's (it never changes) */
    const cJSON *kind = cJSON_GetObjectItemCaseSensitive(in, "kind");
    cJSON_DeleteItemFromObjectCaseSensitive(res, "apiVersion");
    cJSON_DeleteItemFromObjectCaseSensitive(res, "kind");
    if(!cJSON_AddStringToObject(res, "apiVersion", api) ||
       (kind && !add_copy(res, "kind", kind)))
      rc = KCR_ENOMEM;
  }
  if(rc == KCR_ENOMEM && !why[0])
    snprintf(why, nwhy, "out of memory");
  cJSON_Delete(in);
  cJSON_Delete(hub);
  cJSON_Delete(stash);
  cJSON_Delete(tmp);
  cJSON_Delete(rt);
  if(rc)
    cJSON_Delete(res);
  else
    *out = res;
  return rc;
}

/* ---- a review -------------------------------------------------------------- */

/* The version of apiVersion "group/version" when the group is c's. */
static bool version_of(const struct conv *c, struct kcr_str api, char *out, size_t n)
{
  size_t g = strlen(c->group);

  if(api.n <= g + 1 || api.n - g - 1 >= n || memcmp(api.s, c->group, g) ||
     api.s[g] != '/')
    return false;
  memcpy(out, api.s + g + 1, api.n - g - 1);
  out[api.n - g - 1] = '\0';
  return true;
}

static void answer(struct kcr_buf *out, struct kcr_str api, struct kcr_str uid,
                   const struct kcr_buf *objs, const char *failure)
{
  kcr_buf_puts(out, "{\"apiVersion\":");
  kcr_json_put_str(out, api);
  kcr_buf_puts(out, ",\"kind\":\"ConversionReview\",\"response\":{\"uid\":");
  kcr_json_put_str(out, uid);
  if(failure) {
    kcr_buf_puts(out, ",\"result\":{\"status\":\"Failure\",\"message\":");
    kcr_json_put_str(out, kcr_str_c(failure));
    kcr_buf_puts(out, "}}}");
    return;
  }
  kcr_buf_puts(out, ",\"convertedObjects\":[");
  kcr_buf_append(out, objs->ptr, objs->len);
  kcr_buf_puts(out, "],\"result\":{\"status\":\"Success\"}}}");
}

/* Answers one review into out; returns the failure's message or NULL. */
static bool review(const struct conv *c, const char *body, size_t len, const char *ctype,
                   struct kcr_buf *out)
{
  kcr_conversion cv = {.ei = KCR_ERRINFO_INIT};
  struct kcr_buf objs = KCR_BUF_INIT;
  struct kcr_jiter it, oi;
  struct kcr_jv doc, name, val, req = {0}, objects = {0}, o;
  struct kcr_str api = {0}, kind = {0}, uid = {0}, desired = {0};
  char want[128], ver[128], why[512] = "", failure[1024] = "";
  size_t i = 0;

  if(!kcr__wh_json_content(ctype))
    snprintf(failure, sizeof(failure), "the Content-Type is not application/json");
  else if(kcr_json_check(body, len, &doc) || kcr_jv_type(doc) != KCR_JT_OBJECT)
    snprintf(failure, sizeof(failure), "the request body is not a JSON object");
  if(!failure[0]) {
    kcr_jiter_init(&it, doc);
    while(kcr_jiter_next(&it, &name, &val) == 1) {
      if(kcr_jv_str_is(name, "apiVersion", 10))
        kcr_jv_string(val, &cv.arena, 0, &api);
      else if(kcr_jv_str_is(name, "kind", 4))
        kcr_jv_string(val, &cv.arena, 0, &kind);
      else if(kcr_jv_str_is(name, "request", 7))
        req = val;
    }
    if(!kcr_str_eq(api, "apiextensions.k8s.io/v1") &&
       !kcr_str_eq(api, "apiextensions.k8s.io/v1beta1"))
      snprintf(failure, sizeof(failure),
               "not a ConversionReview of apiextensions.k8s.io/v1 or v1beta1");
    else if(!kcr_str_eq(kind, "ConversionReview"))
      snprintf(failure, sizeof(failure), "the kind is not ConversionReview");
    else if(kcr_jv_type(req) != KCR_JT_OBJECT)
      snprintf(failure, sizeof(failure), "the review has no request");
  }
  if(!failure[0]) {
    kcr_jiter_init(&it, req);
    while(kcr_jiter_next(&it, &name, &val) == 1) {
      if(kcr_jv_str_is(name, "uid", 3))
        kcr_jv_string(val, &cv.arena, 0, &uid);
      else if(kcr_jv_str_is(name, "desiredAPIVersion", 17))
        kcr_jv_string(val, &cv.arena, 0, &desired);
      else if(kcr_jv_str_is(name, "objects", 7))
        objects = val;
    }
    if(!uid.n)
      snprintf(failure, sizeof(failure), "the request has no uid");
    else if(!version_of(c, desired, want, sizeof(want)))
      snprintf(failure, sizeof(failure), "desiredAPIVersion %.*s is not of group %s",
               (int)(desired.n > 200 ? 200 : desired.n), desired.s ? desired.s : "",
               c->group);
    else if(strcmp(want, c->hub) && !spoke_of(c, want))
      snprintf(failure, sizeof(failure), "no converter for version %s", want);
    else if(kcr_jv_type(objects) != KCR_JT_ARRAY && kcr_jv_type(objects) != KCR_JT_NULL)
      snprintf(failure, sizeof(failure), "request.objects is not an array");
  }
  if(!failure[0] && kcr_jv_type(objects) == KCR_JT_ARRAY) {
    kcr_jiter_init(&oi, objects);
    for(; !failure[0] && kcr_jiter_next(&oi, NULL, &o) == 1; i++) {
      struct kcr_str oapi = {0}, oname = {0}, ons = {0};
      struct kcr_jiter mi;
      struct kcr_jv mname, mval;
      cJSON *res = NULL;
      kcr_err rc = KCR_OK;
      if(kcr_jv_type(o) != KCR_JT_OBJECT || !kcr_jiter_init(&it, o)) {
        snprintf(failure, sizeof(failure), "object %zu is not an object", i);
        break;
      }
      while(kcr_jiter_next(&it, &name, &val) == 1) {
        if(kcr_jv_str_is(name, "apiVersion", 10)) {
          kcr_jv_string(val, &cv.arena, 0, &oapi);
        } else if(kcr_jv_str_is(name, "metadata", 8) && kcr_jiter_init(&mi, val)) {
          while(kcr_jiter_next(&mi, &mname, &mval) == 1)
            if(kcr_jv_str_is(mname, "name", 4))
              kcr_jv_string(mval, &cv.arena, 0, &oname);
            else if(kcr_jv_str_is(mname, "namespace", 9))
              kcr_jv_string(mval, &cv.arena, 0, &ons);
        }
      }
      if(!version_of(c, oapi, ver, sizeof(ver))) {
        snprintf(failure, sizeof(failure),
                 "object %zu: apiVersion %.*s is not of group %s", i,
                 (int)(oapi.n > 200 ? 200 : oapi.n), oapi.s ? oapi.s : "", c->group);
        break;
      }
      if(i)
        kcr_buf_puts(&objs, ",");
      if(!strcmp(ver, want)) { /* already there: as it came */
        kcr_buf_append(&objs, o.at, o.n);
        continue;
      }
      why[0] = '\0';
      rc = convert(c, &cv, (struct kcr_str){.s = o.at, .n = o.n}, ver, want, &res, why,
                   sizeof(why));
      if(!rc) {
        char *text = kcr_json_to_text(res);
        if(!text)
          rc = KCR_ENOMEM;
        else
          kcr_buf_puts(&objs, text);
        free(text);
        cJSON_Delete(res);
      }
      if(rc)
        snprintf(failure, sizeof(failure),
                 "converting %.*s%s%.*s (object %zu) from %.40s to %.40s: %.500s",
                 (int)(ons.n > 63 ? 63 : ons.n), ons.s ? ons.s : "", ons.n ? "/" : "",
                 (int)(oname.n > 253 ? 253 : oname.n), oname.s ? oname.s : "", i, ver,
                 want, why[0] ? why : kcr_strerror(rc));
    }
  }
  if(!failure[0] && kcr_buf_err(&objs))
    snprintf(failure, sizeof(failure), "out of memory");
  if(!api.n || (failure[0] && !kcr_str_eq(api, "apiextensions.k8s.io/v1beta1")))
    api = kcr_str_c("apiextensions.k8s.io/v1");
  answer(out, api, uid, &objs, failure[0] ? failure : NULL);
  if(failure[0])
    KCR_LOG(KCR_LOG_ERROR, "conversion webhook: review failed", KCR_S("webhook", c->name),
            KCR_S("error", failure));
  kcr_buf_cleanup(&objs);
  kcr_errinfo_cleanup(&cv.ei);
  kcr_arena_cleanup(&cv.arena);
  return !failure[0];
}

/* ---- serving --------------------------------------------------------------- */

static int serve(void *ud, const struct kcr_httpd_request *r, struct kcr_buf *out,
                 const char **ctype)
{
  const struct conv *c = ud;
  struct kcr__whcall call;
  bool ok;

  kcr__whm_begin(&c->m, c->name, &call);
  ok = review(c, r->body, r->len, r->content_type, out);
  kcr__whm_end(&c->m, &call, r, ok ? 0 : 500);
  *ctype = "application/json";
  return 200;
}

static void conv_free(void *p)
{
  struct conv *c = p;

  if(!c)
    return;
  for(size_t i = 0; i < c->n; i++)
    free(c->v[i].version);
  free(c->v);
  kcr__whm_cleanup(&c->m);
  free(c->path);
  free(c->name);
  free(c->group);
  free(c->hub);
  free(c);
}

static kcr_err conv_new(const struct kcr_conversion_opts *o, struct conv **out,
                        struct kcr_errinfo *ei)
{
  struct conv *c;

  *out = NULL;
  if(!o || !o->path || !o->group || !*o->group || !o->hub || !*o->hub || !o->versions ||
     !o->nversions)
    return kcr_errinfo_set(ei, KCR_EINVAL,
                           "conversion webhook: path, group, hub and "
                           "versions are required");
  for(size_t i = 0; i < o->nversions; i++) {
    const struct kcr_conversion_version *v = &o->versions[i];
    if(!v->version || !*v->version || !v->to_hub || !v->from_hub)
      return kcr_errinfo_set(ei, KCR_EINVAL,
                             "conversion webhook %s: version %zu needs a "
                             "name and both converters",
                             o->path, i);
    if(!strcmp(v->version, o->hub))
      return kcr_errinfo_set(ei, KCR_EINVAL,
                             "conversion webhook %s: %s is the hub, not a "
                             "spoke",
                             o->path, v->version);
    for(size_t j = 0; j < i; j++)
      if(!strcmp(o->versions[j].version, v->version))
        return kcr_errinfo_set(ei, KCR_EINVAL, "conversion webhook %s: version %s twice",
                               o->path, v->version);
  }
  if(!(c = calloc(1, sizeof(*c))) || !(c->path = strdup(o->path)) ||
     !(c->name = strdup(o->name && *o->name ? o->name : o->path)) ||
     !(c->group = strdup(o->group)) || !(c->hub = strdup(o->hub)) ||
     !(c->v = calloc(o->nversions, sizeof(*c->v)))) {
    conv_free(c);
    return KCR_ENOMEM;
  }
  for(size_t i = 0; i < o->nversions; i++) {
    c->v[i] = (struct spoke){.version = strdup(o->versions[i].version),
                             .to_hub = o->versions[i].to_hub,
                             .from_hub = o->versions[i].from_hub};
    c->n++;
    if(!c->v[i].version) {
      conv_free(c);
      return KCR_ENOMEM;
    }
  }
  c->ud = o->ud;
  *out = c;
  return KCR_OK;
}

kcr_err kcr_conversion_add(kcr_httpd *srv, const struct kcr_conversion_opts *opts,
                           struct kcr_errinfo *ei)
{
  struct conv *c;
  kcr_err rc;

  if(!srv)
    return kcr_errinfo_set(ei, KCR_EINVAL, "conversion webhook: no server");
  if((rc = conv_new(opts, &c, ei)))
    return rc;
  if(!(rc = kcr__whm_init(&c->m, opts->metrics, c->name, ei)))
    rc = kcr__httpd_add_handler_owned(srv, c->path, opts->max_body, serve, c, conv_free);
  if(rc == KCR_EINVAL)
    kcr_errinfo_set(ei, rc, "conversion webhook %s: bad path", opts->path);
  else if(rc == KCR_EEXIST)
    kcr_errinfo_set(ei, rc, "conversion webhook %s: the path is served already",
                    opts->path);
  if(rc) {
    conv_free(c);
    return rc;
  }
  KCR_LOG(KCR_LOG_INFO, "conversion webhook: registered", KCR_S("webhook", c->name),
          KCR_S("group", c->group), KCR_S("hub", c->hub));
  return KCR_OK;
}

kcr_err kcr_conversion_review(const struct kcr_conversion_opts *opts, const char *body,
                              size_t len, const char *content_type, struct kcr_buf *out)
{
  struct conv *c;
  kcr_err rc;

  if(!body || !out)
    return KCR_EINVAL;
  if((rc = conv_new(opts, &c, NULL)))
    return rc;
  review(c, body, len, content_type, out);
  conv_free(c);
  return kcr_buf_err(out);
}
