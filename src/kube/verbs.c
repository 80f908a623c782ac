/* DESIGN: the REST verbs over kcr_client_do - get, list (paged, as trees or
 * as texts), create, update, patch, server-side apply, delete - and the
 * request paths and queries they build. Nothing here knows the transport:
 * every request is a kcr_client_do (client.c), which owns connections,
 * retries, the write gate and error mapping.
 *
 * Lists: pages of limit items are followed by their continue token until
 * the last. kcr_list_each parses each page (dropping the items'
 * managedFields on request) and hands over the items as trees;
 * kcr_list_each_text checks the page's text in one scan, which also finds
 * its resourceVersion, continue and items, and hands over each item's text
 * (the informer makes cached objects from text, without a tree). A list
 * never returns a truncated result: an error on any page fails the call. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client-int.h"
#include "core/json-int.h"
#include "kcr/json.h"
#include "kcr/log.h"
#include "kcr/meta.h"
#include "kcr/path.h"
#include "kcr/time.h"

/* Performs a request whose answer is one JSON object: parsed into *out,
 * or, with text set, its text moved to *text (out NULL). accept: the
 * Accept header (NULL: JSON). */
static kcr_err do_json_accept(kcr_client *c, const char *method,
                              const struct kcr_buf *path, const char *ctype,
                              const char *accept, const char *body, size_t len,
                              cJSON **out, struct kcr_buf *text, struct kcr_errinfo *ei)
{
  struct kcr_http_request req = {.method = method,
                                 .path = path->ptr,
                                 .content_type = ctype,
                                 .accept = accept,
                                 .body = body,
                                 .body_len = len};
  struct kcr_http_response resp = {.body = KCR_BUF_INIT};
  kcr_err rc;

  if(out)
    *out = NULL;
  rc = kcr_client_do(c, &req, &resp, ei);
  if(!rc && out)
    rc = kcr_json_parse(kcr_buf_str(&resp.body), resp.body.len, out, ei);
  if(text) {
    kcr_buf_cleanup(text);
    *text = resp.body;
  } else {
    kcr_buf_cleanup(&resp.body);
  }
  return rc;
}

static kcr_err do_json_text(kcr_client *c, const char *method, const struct kcr_buf *path,
                            const char *ctype, const char *body, size_t len, cJSON **out,
                            struct kcr_buf *text, struct kcr_errinfo *ei)
{
  return do_json_accept(c, method, path, ctype, NULL, body, len, out, text, ei);
}

static kcr_err do_json(kcr_client *c, const char *method, const struct kcr_buf *path,
                       const char *ctype, const char *body, size_t len, cJSON **out,
                       struct kcr_errinfo *ei)
{
  return do_json_text(c, method, path, ctype, body, len, out, NULL, ei);
}

/* The Accept header of a list with opts o (NULL: JSON). */
static const char *list_accept(const struct kcr_list_opts *o)
{
  return o && o->metadata_only ? KCR_ACCEPT_METADATA_LIST : NULL;
}

/* kcr_path for the client's calls, with a message saying what was wrong. */
static kcr_err ref_path(struct kcr_buf *p, const char *verb, const struct kcr_ref *ref,
                        bool name, struct kcr_errinfo *ei)
{
  const struct kcr_gvr *g = ref ? ref->gvr : NULL;
  kcr_err rc;

  if(ref && name && !ref->name)
    return kcr_errinfo_set(ei, KCR_EINVAL, "%s: the ref names no object", verb);
  if(ref && !name && ref->name)
    return kcr_errinfo_set(ei, KCR_EINVAL,
                           "%s: the ref names an object; %s goes to the collection", verb,
                           verb);
  rc = kcr_path(p, ref);
  if(rc == KCR_EINVAL)
    kcr_errinfo_set(
        ei, rc,
        "%s: invalid ref (group \"%s\", version \"%s\", resource \"%s\"%s, "
        "namespace \"%s\", name \"%s\", subresource \"%s\"): see kcr_path",
        verb, g && g->group ? g->group : "", g && g->version ? g->version : "",
        g && g->resource ? g->resource : "", g && g->namespaced ? ", namespaced" : "",
        ref && ref->ns ? ref->ns : "", ref && ref->name ? ref->name : "",
        ref && ref->sub ? ref->sub : "");
  return rc;
}

static kcr_err write_query(struct kcr_buf *p, const struct kcr_write_opts *wo)
{
  if(wo && wo->field_manager)
    kcr_query_add(p, "fieldManager", wo->field_manager);
  if(wo && wo->dry_run)
    kcr_query_add(p, "dryRun", "All");
  return kcr_buf_err(p);
}

static kcr_err get_accept(kcr_client *c, const struct kcr_ref *ref, const char *accept,
                          cJSON **out, struct kcr_errinfo *ei)
{
  struct kcr_buf p = KCR_BUF_INIT;
  kcr_err rc = ref_path(&p, "GET", ref, true, ei);
  if(!rc)
    rc = do_json_accept(c, "GET", &p, NULL, accept, NULL, 0, out, NULL, ei);
  else if(out)
    *out = NULL;
  kcr_buf_cleanup(&p);
  return rc;
}

kcr_err kcr_get(kcr_client *c, const struct kcr_ref *ref, cJSON **out,
                struct kcr_errinfo *ei)
{
  return get_accept(c, ref, NULL, out, ei);
}

kcr_err kcr_get_metadata(kcr_client *c, const struct kcr_ref *ref, cJSON **out,
                         struct kcr_errinfo *ei)
{
  return get_accept(c, ref, KCR_ACCEPT_METADATA, out, ei);
}

static kcr_err list_query(struct kcr_buf *p, const struct kcr_list_opts *o)
{
  if(!o)
    return kcr_buf_err(p);
  kcr_query_add(p, "labelSelector", o->label_selector);
  kcr_query_add(p, "fieldSelector", o->field_selector);
  kcr_query_add(p, "shardSelector", o->shard_selector);
  if(o->limit > 0)
    kcr_query_add_int(p, "limit", o->limit);
  kcr_query_add(p, "continue", o->continue_token);
  kcr_query_add(p, "resourceVersion", o->resource_version);
  kcr_query_add(p, "resourceVersionMatch", o->resource_version_match);
  return kcr_buf_err(p);
}

kcr_err kcr_list(kcr_client *c, const struct kcr_ref *ref,
                 const struct kcr_list_opts *opts, cJSON **out, struct kcr_errinfo *ei)
{
  struct kcr_buf p = KCR_BUF_INIT;
  kcr_err rc = ref_path(&p, "list", ref, false, ei);
  struct kcr_buf body = KCR_BUF_INIT, scratch = KCR_BUF_INIT;

  if(out)
    *out = NULL;
  if(!rc)
    rc = list_query(&p, opts);
  if(rc || !out || !opts || !opts->drop_managed_fields) {
    if(!rc)
      rc = do_json_accept(c, "GET", &p, NULL, list_accept(opts), NULL, 0, out, NULL, ei);
    goto out;
  }
  rc = do_json_accept(c, "GET", &p, NULL, list_accept(opts), NULL, 0, NULL, &body, ei);
  if(!rc)
    rc = kcr__json_parse_dropping(kcr_buf_str(&body), body.len, "/items/*/metadata",
                                  "managedFields", &scratch, out, ei);
out:
  kcr_buf_cleanup(&scratch);
  kcr_buf_cleanup(&body);
  kcr_buf_cleanup(&p);
  return rc;
}

/* The resourceVersion and continue token of a page, copied (NULL: none). */
struct page_marks {
  char *rv, *next;
};

static kcr_err keep_marks(const char *rv, const char *next, struct page_marks *m)
{
  if((rv && !(m->rv = strdup(rv))) || (next && !(m->next = strdup(next))))
    return KCR_ENOMEM;
  return KCR_OK;
}

/* One page for kcr_list_each: its items as trees. */
static kcr_err page_trees(kcr_client *c, const struct kcr_ref *ref,
                          const struct kcr_list_opts *o, kcr_list_item_fn fn, void *ud,
                          struct page_marks *m, struct kcr_errinfo *ei)
{
  cJSON *list = NULL, *item;
  kcr_err rc = kcr_list(c, ref, o, &list, ei);

  if(rc)
    return rc;
  cJSON_ArrayForEach(item, kcr_json_at(list, "/items"))
  {
    if((rc = fn(item, ud)))
      break;
  }
  if(!rc)
    rc = keep_marks(kcr_json_str(list, "/metadata/resourceVersion"),
                    kcr_json_str(list, "/metadata/continue"), m);
  cJSON_Delete(list);
  return rc;
}

/* A string value of a page as kcr_json_str reads it (a value of another
 * kind: none), copied into *out; false when it is written with escapes. */
static bool page_str(const struct kcr__json_want *w, char **out, kcr_err *rc)
{
  *out = NULL;
  if(!w->at || *w->at != '"')
    return true;
  if(memchr(w->at, '\\', w->n))
    return false;
  if(!(*out = strndup(w->at + 1, w->n - 2)))
    *rc = KCR_ENOMEM;
  return true;
}

/* One page for kcr_list_each_text: each item's text as the server wrote it
 * when the page is compact and well formed (one validating scan finds the
 * marks and the items); otherwise (or when an item nests deeper than the
 * walk follows), from the parsed page, each item printed compact (so fn
 * always gets compact, well-formed text). */
static kcr_err page_texts(kcr_client *c, const struct kcr_ref *ref,
                          const struct kcr_list_opts *o, kcr__list_page_fn pfn,
                          kcr_list_text_fn fn, void *ud, struct page_marks *m,
                          struct kcr_errinfo *ei)
{
  struct kcr__json_want w[3] = {{.path = "/metadata/resourceVersion"},
                                {.path = "/metadata/continue"},
                                {.path = "/items"}};
  struct kcr_buf p = KCR_BUF_INIT, body = KCR_BUF_INIT, item = KCR_BUF_INIT;
  struct kcr_buf spans = KCR_BUF_INIT;
  struct span {
    const char *at;
    size_t n;
  };
  kcr_err rc = ref_path(&p, "list", ref, false, ei);
  struct kcr__json_iter it;
  const char *key, *at;
  size_t objlen = 0, kl, n;
  bool compact = false;
  cJSON *list = NULL, *items, *t;
  int r;

  if(!rc)
    rc = list_query(&p, o);
  if(!rc)
    rc = do_json_accept(c, "GET", &p, NULL, list_accept(o), NULL, 0, NULL, &body, ei);
  if(!rc && pfn)
    rc = pfn(body.len, ud);
  if(rc)
    goto out;
  kcr__json_scan(kcr_buf_str(&body), body.len, w, 3, &objlen, &compact);
  if(objlen && compact && (!w[2].at || *w[2].at == '[') && page_str(&w[0], &m->rv, &rc) &&
     page_str(&w[1], &m->next, &rc)) {
    if(rc || !w[2].at)
      goto out;
    /* The items are found before any is handed out: an item nested deeper
     * than the walk follows (valid, since the scan accepted it) sends the
     * whole page the tree way. */
    kcr__json_iter_init(&it, w[2].at, w[2].n);
    while((r = kcr__json_iter_next(&it, &key, &kl, &at, &n)) > 0) {
      struct span sp = {at, n};
      if((rc = kcr_buf_append(&spans, &sp, sizeof(sp))))
        goto out;
    }
    if(r == 0) {
      const struct span *sp = (const struct span *)spans.ptr;
      for(size_t i = 0; !rc && i < spans.len / sizeof(*sp); i++)
        rc = fn(sp[i].at, sp[i].n, ud);
      goto out;
    }
  }
  free(m->rv);
  free(m->next);
  *m = (struct page_marks){NULL, NULL};
  rc = kcr_json_parse(kcr_buf_str(&body), body.len, &list, ei);
  items = rc ? NULL : kcr_json_at(list, "/items");
  cJSON_ArrayForEach(t, items)
  {
    kcr_buf_reset(&item);
    if((rc = kcr__json_print(t, &item)) || (rc = fn(item.ptr, item.len, ud)))
      break;
  }
  if(!rc)
    rc = keep_marks(kcr_json_str(list, "/metadata/resourceVersion"),
                    kcr_json_str(list, "/metadata/continue"), m);
out:
  cJSON_Delete(list);
  kcr_buf_cleanup(&spans);
  kcr_buf_cleanup(&item);
  kcr_buf_cleanup(&body);
  kcr_buf_cleanup(&p);
  return rc;
}

/* kcr_list_each and kcr_list_each_text: one of tfn and xfn (pfn with xfn
 * only). */
static kcr_err list_pages(kcr_client *c, const struct kcr_ref *ref,
                          const struct kcr_list_opts *opts, kcr_list_item_fn tfn,
                          kcr__list_page_fn pfn, kcr_list_text_fn xfn, void *ud,
                          char **rv, struct kcr_errinfo *ei)
{
  struct kcr_list_opts o = {0};
  char *token = NULL;
  kcr_err rc;

  if(rv)
    *rv = NULL;
  if(!tfn && !xfn)
    return kcr_errinfo_set(ei, KCR_EINVAL, "kcr_list_each: no item function");
  if(opts)
    o = *opts;
  if(o.limit <= 0)
    o.limit = 500;
  for(;;) {
    struct page_marks m = {NULL, NULL};
    rc = tfn ? page_trees(c, ref, &o, tfn, ud, &m, ei)
             : page_texts(c, ref, &o, pfn, xfn, ud, &m, ei);
    if(!rc && rv && m.rv) {
      free(*rv);
      *rv = m.rv;
      m.rv = NULL;
    }
    free(m.rv);
    free(token);
    /* A page that says more follow must lead to them: a lost continue token
     * would end the listing early and look like success (keep_marks fails
     * then). */
    token = m.next && *m.next ? m.next : NULL;
    if(token != m.next)
      free(m.next);
    if(rc || !token)
      break;
    /* Later pages continue the first page's snapshot. */
    o.continue_token = token;
    o.resource_version = NULL;
    o.resource_version_match = NULL;
  }
  free(token);
  if(rc && rv) {
    free(*rv);
    *rv = NULL;
  }
  return rc;
}

kcr_err kcr_list_each(kcr_client *c, const struct kcr_ref *ref,
                      const struct kcr_list_opts *opts, kcr_list_item_fn fn, void *ud,
                      char **rv, struct kcr_errinfo *ei)
{
  if(!fn)
    return kcr_errinfo_set(ei, KCR_EINVAL, "kcr_list_each: no item function");
  return list_pages(c, ref, opts, fn, NULL, NULL, ud, rv, ei);
}

kcr_err kcr_list_each_text(kcr_client *c, const struct kcr_ref *ref,
                           const struct kcr_list_opts *opts, kcr_list_text_fn fn,
                           void *ud, char **rv, struct kcr_errinfo *ei)
{
  if(rv)
    *rv = NULL;
  if(!fn)
    return kcr_errinfo_set(ei, KCR_EINVAL, "kcr_list_each_text: no item function");
  return list_pages(c, ref, opts, NULL, NULL, fn, ud, rv, ei);
}

kcr_err kcr__list_each_text_paged(kcr_client *c, const struct kcr_ref *ref,
                                  const struct kcr_list_opts *opts, kcr__list_page_fn pfn,
                                  kcr_list_text_fn fn, void *ud, char **rv,
                                  struct kcr_errinfo *ei)
{
  if(rv)
    *rv = NULL;
  if(!fn)
    return kcr_errinfo_set(ei, KCR_EINVAL, "kcr_list_each_text: no item function");
  return list_pages(c, ref, opts, NULL, pfn, fn, ud, rv, ei);
}

static kcr_err send_obj(kcr_client *c, const char *method, const struct kcr_ref *ref,
                        const cJSON *obj, const struct kcr_write_opts *wo, cJSON **out,
                        struct kcr_buf *text, struct kcr_errinfo *ei)
{
  struct kcr_buf p = KCR_BUF_INIT;
  char *body = NULL;
  kcr_err rc = ref_path(&p, method, ref, !strcmp(method, "PUT"), ei);

  if(out)
    *out = NULL;
  if(!rc && !obj)
    rc = kcr_errinfo_set(ei, KCR_EINVAL, "%s: no object", method);
  if(!rc)
    rc = write_query(&p, wo);
  if(!rc && !(body = kcr_json_to_text(obj)))
    rc = KCR_ENOMEM;
  if(!rc)
    rc = do_json_text(c, method, &p, "application/json", body, strlen(body), out, text,
                      ei);
  free(body);
  kcr_buf_cleanup(&p);
  return rc;
}

kcr_err kcr_create(kcr_client *c, const struct kcr_ref *ref, const cJSON *obj,
                   const struct kcr_write_opts *wo, cJSON **out, struct kcr_errinfo *ei)
{
  return send_obj(c, "POST", ref, obj, wo, out, NULL, ei);
}

kcr_err kcr_update(kcr_client *c, const struct kcr_ref *ref, const cJSON *obj,
                   const struct kcr_write_opts *wo, cJSON **out, struct kcr_errinfo *ei)
{
  return send_obj(c, "PUT", ref, obj, wo, out, NULL, ei);
}

kcr_err kcr__update_text(kcr_client *c, const struct kcr_ref *ref, const cJSON *obj,
                         const struct kcr_write_opts *wo, struct kcr_buf *text,
                         struct kcr_errinfo *ei)
{
  return send_obj(c, "PUT", ref, obj, wo, NULL, text, ei);
}

static const char *const patch_ctype[] = {
    [KCR_PATCH_MERGE] = "application/merge-patch+json",
    [KCR_PATCH_JSON] = "application/json-patch+json",
    [KCR_PATCH_APPLY] = "application/apply-patch+yaml",
    [KCR_PATCH_STRATEGIC] = "application/strategic-merge-patch+json",
};

static kcr_err patch(kcr_client *c, const struct kcr_ref *ref,
                     const struct kcr_patch_opts *po, const char *body, size_t len,
                     cJSON **out, struct kcr_buf *text, struct kcr_errinfo *ei)
{
  struct kcr_buf p = KCR_BUF_INIT;
  kcr_err rc;

  if(out)
    *out = NULL;
  if(!po || (unsigned)po->type > KCR_PATCH_STRATEGIC || !body)
    return kcr_errinfo_set(ei, KCR_EINVAL, "patch: missing options or body");
  if(po->type == KCR_PATCH_APPLY && (!po->field_manager || !*po->field_manager))
    return kcr_errinfo_set(ei, KCR_EINVAL, "server-side apply needs a fieldManager");
  rc = ref_path(&p, "PATCH", ref, true, ei);
  if(rc)
    goto out;
  kcr_query_add(&p, "fieldManager", po->field_manager);
  if(po->force && po->type == KCR_PATCH_APPLY)
    kcr_query_add(&p, "force", "true");
  if(po->dry_run)
    kcr_query_add(&p, "dryRun", "All");
  rc = kcr_buf_err(&p);
  if(!rc)
    rc = do_json_text(c, "PATCH", &p, patch_ctype[po->type], body, len, out, text, ei);
out:
  kcr_buf_cleanup(&p);
  return rc;
}

kcr_err kcr_patch(kcr_client *c, const struct kcr_ref *ref,
                  const struct kcr_patch_opts *po, const char *body, size_t len,
                  cJSON **out, struct kcr_errinfo *ei)
{
  return patch(c, ref, po, body, len, out, NULL, ei);
}

kcr_err kcr__patch_text(kcr_client *c, const struct kcr_ref *ref,
                        const struct kcr_patch_opts *po, const char *body, size_t len,
                        struct kcr_buf *text, struct kcr_errinfo *ei)
{
  return patch(c, ref, po, body, len, NULL, text, ei);
}

/* kcr_apply, the answer parsed into *out or its text moved to *text. */
static kcr_err apply(kcr_client *c, const struct kcr_ref *ref, const cJSON *obj,
                     const struct kcr_apply_opts *opts, cJSON **out, struct kcr_buf *text,
                     struct kcr_errinfo *ei)
{
  struct kcr_patch_opts po = {.type = KCR_PATCH_APPLY};
  char *body;
  kcr_err rc;

  if(out)
    *out = NULL;
  if(!opts || !opts->field_manager || !*opts->field_manager)
    return kcr_errinfo_set(ei, KCR_EINVAL, "server-side apply needs a fieldManager");
  if(!obj)
    return kcr_errinfo_set(ei, KCR_EINVAL, "apply: no object");
  po.field_manager = opts->field_manager;
  po.force = opts->force;
  po.dry_run = opts->dry_run;
  if(!(body = kcr_json_to_text(obj)))
    return KCR_ENOMEM;
  rc = patch(c, ref, &po, body, strlen(body), out, text, ei);
  free(body);
  return rc;
}

kcr_err kcr_apply(kcr_client *c, const struct kcr_ref *ref, const cJSON *obj,
                  const struct kcr_apply_opts *opts, cJSON **out, struct kcr_errinfo *ei)
{
  return apply(c, ref, obj, opts, out, NULL, ei);
}

/* *rv = a copy of the metadata.resourceVersion of an apply's answer text
 * (NULL when it has none, or not a plain string). Errors: KCR_EPARSE (the
 * text breaks off before it), KCR_ENOMEM. */
static kcr_err answer_rv(const struct kcr_buf *text, char **rv, struct kcr_errinfo *ei)
{
  const char *at = NULL;
  size_t n = 0;
  kcr_err found =
      kcr__json_find(kcr_buf_str(text), text->len, "/metadata/resourceVersion", &at, &n);

  if(found == KCR_EPARSE)
    return kcr_errinfo_set(ei, KCR_EPARSE,
                           "apply: the answer (%zu bytes) breaks off before its "
                           "metadata.resourceVersion",
                           text->len);
  if(found == KCR_OK && n >= 2 && *at == '"' && !memchr(at, '\\', n) &&
     !(*rv = strndup(at + 1, n - 2)))
    return KCR_ENOMEM;
  return KCR_OK; /* else none, or not a plain string: no rv */
}

kcr_err kcr_apply_rv(kcr_client *c, const struct kcr_ref *ref, const cJSON *obj,
                     const struct kcr_apply_opts *opts, char **rv, struct kcr_errinfo *ei)
{
  struct kcr_buf text = KCR_BUF_INIT;
  kcr_err rc;

  if(!rv)
    return kcr_errinfo_set(ei, KCR_EINVAL, "kcr_apply_rv: no rv");
  *rv = NULL;
  rc = apply(c, ref, obj, opts, NULL, &text, ei);
  if(!rc)
    rc = answer_rv(&text, rv, ei);
  kcr_buf_cleanup(&text);
  return rc;
}

/* *out = a C string of member `what` of the metadata (has set, not empty,
 * no NUL byte), or EINVAL naming it. */
static kcr_err meta_str(const char *fn, const char *what, bool has, struct kcr_str v,
                        char **out, struct kcr_errinfo *ei)
{
  kcr_err rc;

  if(!has || !v.n)
    return kcr_errinfo_set(ei, KCR_EINVAL, "%s: no metadata.%s", fn, what);
  if((rc = kcr_str_dup(v, out)))
    return rc == KCR_EINVAL
               ? kcr_errinfo_set(ei, rc, "%s: metadata.%s holds a NUL byte", fn, what)
               : rc;
  return KCR_OK;
}

/* kcr_typed_apply up to the answer's text, in *text. */
static kcr_err typed_apply(const char *fn, kcr_client *c, const struct kcr_type *t,
                           const struct kcr_gvr *gvr, const void *in,
                           const struct kcr_apply_opts *opts, struct kcr_buf *text,
                           struct kcr_errinfo *ei)
{
  const struct kcr_meta_v1_object_meta *m = kcr_typed_meta(t, in);
  struct kcr_buf body = KCR_BUF_INIT;
  char *name = NULL, *ns = NULL;
  kcr_err rc;

  if(!t || !gvr || !in || !opts)
    return kcr_errinfo_set(ei, KCR_EINVAL, "%s: no %s", fn,
                           !t     ? "type"
                           : !gvr ? "resource"
                           : !in  ? "object"
                                  : "options");
  if(!opts->field_manager || !*opts->field_manager)
    return kcr_errinfo_set(ei, KCR_EINVAL, "server-side apply needs a fieldManager");
  if(!m)
    return kcr_errinfo_set(ei, KCR_EINVAL, "%s: %s has no ObjectMeta metadata", fn,
                           t->name ? t->name : "the type");
  if((rc = meta_str(fn, "name", m->has_name, m->name, &name, ei)) ||
     (gvr->namespaced &&
      (rc = meta_str(fn, "namespace", m->has_namespace_, m->namespace_, &ns, ei))))
    goto out;
  if((rc = kcr_typed_encode(t, in, &body, ei)))
    goto out;
  rc = kcr__patch_text(c, &(struct kcr_ref){.gvr = gvr, .ns = ns, .name = name},
                       &(struct kcr_patch_opts){.type = KCR_PATCH_APPLY,
                                                .field_manager = opts->field_manager,
                                                .force = opts->force,
                                                .dry_run = opts->dry_run},
                       body.ptr, body.len, text, ei);
out:
  kcr_buf_cleanup(&body);
  free(name);
  free(ns);
  return rc;
}

kcr_err kcr_typed_apply(kcr_client *c, const struct kcr_type *t,
                        const struct kcr_gvr *gvr, const void *in,
                        const struct kcr_apply_opts *opts, struct kcr_arena *a,
                        void *result, struct kcr_errinfo *ei)
{
  struct kcr_buf text = KCR_BUF_INIT;
  kcr_err rc;

  if(result && !a)
    return kcr_errinfo_set(ei, KCR_EINVAL, "kcr_typed_apply: no arena for the result");
  rc = typed_apply("kcr_typed_apply", c, t, gvr, in, opts, &text, ei);
  if(!rc && result)
    rc = kcr_typed_decode(t, text.ptr, text.len, KCR_TYPED_COPY, a, result, ei);
  kcr_buf_cleanup(&text);
  return rc;
}

kcr_err kcr_typed_apply_rv(kcr_client *c, const struct kcr_type *t,
                           const struct kcr_gvr *gvr, const void *in,
                           const struct kcr_apply_opts *opts, char **rv,
                           struct kcr_errinfo *ei)
{
  struct kcr_buf text = KCR_BUF_INIT;
  kcr_err rc;

  if(!rv)
    return kcr_errinfo_set(ei, KCR_EINVAL, "kcr_typed_apply_rv: no rv");
  *rv = NULL;
  rc = typed_apply("kcr_typed_apply_rv", c, t, gvr, in, opts, &text, ei);
  if(!rc)
    rc = answer_rv(&text, rv, ei);
  kcr_buf_cleanup(&text);
  return rc;
}

kcr_err kcr_typed_get(kcr_client *c, const struct kcr_type *t, const struct kcr_ref *ref,
                      struct kcr_arena *a, void *out, struct kcr_errinfo *ei)
{
  struct kcr_buf p = KCR_BUF_INIT, text = KCR_BUF_INIT;
  kcr_err rc;

  if(!t || !a || !out)
    return kcr_errinfo_set(ei, KCR_EINVAL, "kcr_typed_get: no %s",
                           !t   ? "type"
                           : !a ? "arena"
                                : "result");
  rc = ref_path(&p, "GET", ref, true, ei);
  if(!rc)
    rc = do_json_text(c, "GET", &p, NULL, NULL, 0, NULL, &text, ei);
  if(!rc)
    rc = kcr_typed_decode(t, text.ptr, text.len, KCR_TYPED_COPY, a, out, ei);
  kcr_buf_cleanup(&p);
  kcr_buf_cleanup(&text);
  return rc;
}

kcr_err kcr_delete(kcr_client *c, const struct kcr_ref *ref,
                   const struct kcr_delete_opts *o, cJSON **out, struct kcr_errinfo *ei)
{
  static const char *const prop[] = {NULL, "Background", "Foreground", "Orphan"};
  struct kcr_buf p = KCR_BUF_INIT;
  cJSON *opts = NULL;
  char *body = NULL;
  kcr_err rc;

  if(out)
    *out = NULL;
  if(o && (unsigned)o->propagation > KCR_PROPAGATE_ORPHAN)
    return kcr_errinfo_set(ei, KCR_EINVAL, "delete: unknown propagation %d",
                           (int)o->propagation);
  rc = ref_path(&p, "DELETE", ref, true, ei);
  if(rc)
    goto out;
  if(o) {
    rc = KCR_ENOMEM;
    if(!(opts = cJSON_CreateObject()) ||
       !cJSON_AddStringToObject(opts, "kind", "DeleteOptions") ||
       !cJSON_AddStringToObject(opts, "apiVersion", "v1"))
      goto out;
    if(prop[o->propagation] &&
       !cJSON_AddStringToObject(opts, "propagationPolicy", prop[o->propagation]))
      goto out;
    if(o->precondition_uid || o->precondition_rv) {
      cJSON *pre = cJSON_AddObjectToObject(opts, "preconditions");
      if(!pre ||
         (o->precondition_uid &&
          !cJSON_AddStringToObject(pre, "uid", o->precondition_uid)) ||
         (o->precondition_rv &&
          !cJSON_AddStringToObject(pre, "resourceVersion", o->precondition_rv)))
        goto out;
    }
    if(o->grace_period_seconds &&
       !kcr_json_add_int(opts, "gracePeriodSeconds", *o->grace_period_seconds))
      goto out;
    if(o->dry_run) {
      cJSON *all = cJSON_CreateStringArray((const char *[]){"All"}, 1);
      if(!all || !cJSON_AddItemToObject(opts, "dryRun", all)) {
        cJSON_Delete(all); /* not added: still ours */
        goto out;
      }
    }
    if(!(body = kcr_json_to_text(opts)))
      goto out;
  }
  rc = do_json(c, "DELETE", &p, body ? "application/json" : NULL, body,
               body ? strlen(body) : 0, out, ei);
out:
  cJSON_Delete(opts);
  free(body);
  kcr_buf_cleanup(&p);
  return rc;
}
