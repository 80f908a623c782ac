/* kcr-gen/openapi.c - the built-in kinds from the apiserver's OpenAPI v3
 * documents (the snapshot of tools/kcr-gen/openapi, one document per
 * group-version; JSON is YAML, so libyaml reads it and crd.c's rules type
 * its schemas).
 *
 * A definition (components.schemas.<name>) is one node however often it
 * is used ($ref, or allOf of one $ref), named after the definition
 * (io.k8s.api.core.v1.PodSpec: core_v1_pod_spec) and written once. Some
 * are typed by name: IntOrString is int-or-string, Quantity a string (the
 * apiserver always writes one), and the meta types (meta_defs) are
 * libkcr's own, kcr/meta.h, which kcr-gen writes from these same
 * documents. A definition that refers back to itself (directly or not) is
 * raw JSON where it recurs: C has no struct that holds itself. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "schema.h"

#define META "io.k8s.apimachinery.pkg.apis.meta.v1."

const char *const meta_defs[] = {
    "Condition",          "LabelSelector", "LabelSelectorRequirement", "ListMeta",
    "ManagedFieldsEntry", "ObjectMeta",    "OwnerReference",           NULL,
};

struct def {
  char *name;
  struct schema *s; /* NULL while it is being read */
  struct def *next;
};

struct doc {
  yaml_document_t doc;
  char *origin;
  struct doc *next;
};

struct openapi {
  struct doc *docs, **tail;
  struct def *defs;
};

char *def_cname(const char *def)
{
  const char *p[3] = {NULL, NULL, NULL}; /* the last three labels */
  const char *c = def;

  for(const char *d; (d = strchr(c, '.')); c = d + 1) {
    p[0] = p[1];
    p[1] = p[2];
    p[2] = c;
  }
  if(!p[1])
    return snake(def, false);
  char *g = xstrndup(p[1], (size_t)(strchr(p[1], '.') - p[1]));
  char *v = xstrndup(p[2], (size_t)(strchr(p[2], '.') - p[2]));
  return xprintf("%s_%s_%s", snake(g, false), snake(v, false), snake(c, false));
}

static bool is_meta(const char *def)
{
  if(strncmp(def, META, strlen(META)))
    return false;
  for(const char *const *m = meta_defs; *m; m++)
    if(!strcmp(def + strlen(META), *m))
      return true;
  return false;
}

struct schema *meta_ext(const char *def, const char *path)
{
  struct schema *s = xalloc(sizeof(*s));
  s->kind = S_OBJ;
  s->def = xstrdup(def);
  s->ext = xprintf("kcr_%s", def_cname(def));
  s->path = xstrdup(path);
  s->desc = xprintf("libkcr's %s (kcr/meta.h).", strrchr(def, '.') + 1);
  return s;
}

int openapi_read(struct openapi **oa, const char *origin, const char *text, size_t len)
{
  yaml_parser_t p;
  struct doc *d = xalloc(sizeof(*d));
  struct rd r = {.doc = &d->doc, .origin = origin};
  yaml_node_t *root;

  if(!*oa) {
    *oa = xalloc(sizeof(**oa));
    (*oa)->tail = &(*oa)->docs;
  }
  if(!yaml_parser_initialize(&p))
    xalloc((size_t)-1);
  yaml_parser_set_input_string(&p, (const unsigned char *)text, len);
  if(!yaml_parser_load(&p, &d->doc)) {
    fprintf(stderr, "kcr-gen: %s:%lu: %s\n", origin,
            (unsigned long)p.problem_mark.line + 1,
            p.problem ? p.problem : "malformed JSON");
    yaml_parser_delete(&p);
    return -1;
  }
  yaml_parser_delete(&p);
  root = yaml_document_get_root_node(&d->doc);
  if(!get(&r, get(&r, root, "components"), "schemas")) {
    yaml_document_delete(&d->doc);
    return bad(&r, root, "no components.schemas: not an OpenAPI v3 document", NULL);
  }
  /* the documents live until kcr-gen exits: the model points into none of
   * them, but reading a kind visits several */
  d->origin = xstrdup(origin);
  *(*oa)->tail = d;
  (*oa)->tail = &d->next;
  return 0;
}

void openapi_free(struct openapi *oa)
{
  for(struct doc *d = oa ? oa->docs : NULL; d; d = d->next)
    yaml_document_delete(&d->doc);
}

/* The definition name in the documents: its node, and r switched to its
 * document. NULL when none has it. */
static yaml_node_t *find(struct openapi *oa, struct rd *r, const char *name)
{
  for(struct doc *d = oa->docs; d; d = d->next) {
    r->doc = &d->doc;
    r->origin = d->origin;
    yaml_node_t *root = yaml_document_get_root_node(&d->doc);
    yaml_node_t *n = get(r, get(r, get(r, root, "components"), "schemas"), name);
    if(n)
      return n;
  }
  return NULL;
}

/* The node of definition name (see the top), 1; or -1. */
static int def_node(struct rd *r, const char *name, const yaml_node_t *at,
                    struct schema **out)
{
  struct schema *s;
  struct def *d;
  struct rd sub = *r;
  yaml_node_t *n;

  if(!strcmp(name, "io.k8s.apimachinery.pkg.util.intstr.IntOrString") ||
     !strcmp(name, "io.k8s.apimachinery.pkg.api.resource.Quantity")) {
    s = xalloc(sizeof(*s));
    s->path = xstrdup(name);
    s->kind = strstr(name, "IntOrString") ? S_INTSTR : S_STR;
    if(s->kind == S_STR) {
      s->format = xstrdup("quantity");
      s->desc = xstrdup("A Quantity (\"100m\", \"1Gi\"): the apiserver writes a string; "
                        "kcr_quantity_scaled reads it as a number.");
    }
    *out = s;
    return 1;
  }
  if(!r->lib && is_meta(name)) {
    *out = meta_ext(name, name);
    return 1;
  }
  for(d = r->oa->defs; d; d = d->next)
    if(!strcmp(d->name, name))
      break;
  if(d && d->s) {
    *out = d->s;
    return 1;
  }
  if(d) { /* being read: a cycle */
    s = xalloc(sizeof(*s));
    s->kind = S_RAW;
    s->path = xstrdup(name);
    s->why = xprintf("%s holds itself", name);
    *out = s;
    return 1;
  }
  if(!(n = find(r->oa, &sub, name)))
    return bad(r, at, xprintf("$ref to %s, which no document defines", name), NULL);
  d = xalloc(sizeof(*d));
  d->name = xstrdup(name);
  d->next = r->oa->defs;
  r->oa->defs = d;
  if(build(&sub, n, name, false, &s))
    return -1;
  if(s->kind == S_OBJ || s->kind == S_ENUM || s->kind == S_ARR || s->kind == S_MAP) {
    s->def = d->name;
    s->def_cname = xprintf("%s%s", r->lib ? "kcr_" : "", def_cname(name));
  }
  d->s = s;
  *out = s;
  return 1;
}

int openapi_ref(struct rd *r, const yaml_node_t *n, const char *path, struct schema **out)
{
  static const char pre[] = "#/components/schemas/";
  yaml_node_t *v = get(r, n, "$ref"), *all = get(r, n, "allOf");
  char *ref;
  (void)path;

  if(!v && all && all->type == YAML_SEQUENCE_NODE &&
     all->data.sequence.items.top - all->data.sequence.items.start == 1)
    v = get(r, yaml_document_get_node(r->doc, *all->data.sequence.items.start), "$ref");
  if(!v)
    return 0;
  if(!(ref = scalar(v)) || strncmp(ref, pre, strlen(pre)))
    return bad(r, v, "a $ref that is not #/components/schemas/<name>", path);
  return def_node(r, ref + strlen(pre), v, out);
}

/* "v1/ConfigMap", "apps/v1/Deployment" into group, version, kind. */
static bool split_gvk(const char *gvk, char **g, char **v, char **k)
{
  const char *last = strrchr(gvk, '/'), *first = strchr(gvk, '/');
  if(!last || !last[1] || last == gvk)
    return false;
  *k = xstrdup(last + 1);
  if(first == last) {
    *g = xstrdup("");
    *v = xstrndup(gvk, (size_t)(last - gvk));
  } else {
    *g = xstrndup(gvk, (size_t)(first - gvk));
    *v = xstrndup(first + 1, (size_t)(last - first - 1));
  }
  return **v && !strchr(*v, '/');
}

/* Whether definition node n is the kind g/v/k (x-kubernetes-group-version-kind). */
static bool is_kind(struct rd *r, yaml_node_t *n, const char *g, const char *v,
                    const char *k)
{
  yaml_node_t *l = get(r, n, "x-kubernetes-group-version-kind");
  if(!l || l->type != YAML_SEQUENCE_NODE)
    return false;
  for(yaml_node_item_t *i = l->data.sequence.items.start; i < l->data.sequence.items.top;
      i++) {
    yaml_node_t *e = yaml_document_get_node(r->doc, *i);
    if(is(get(r, e, "group"), g) && is(get(r, e, "version"), v) &&
       is(get(r, e, "kind"), k))
      return true;
  }
  return false;
}

int openapi_kind(struct openapi *oa, const char *gvk, struct kind **kinds, size_t *nkinds)
{
  char *g, *v, *kn, *name = NULL;
  struct rd r = {.oa = oa, .origin = "(OpenAPI documents)"};
  yaml_node_t *res = NULL;
  struct kind *k;

  if(!split_gvk(gvk, &g, &v, &kn)) {
    fprintf(stderr,
            "kcr-gen: --kind %s: want apiVersion/Kind (v1/ConfigMap, "
            "apps/v1/Deployment)\n",
            gvk);
    return -1;
  }
  for(struct doc *d = oa ? oa->docs : NULL; d && !name; d = d->next) {
    r.doc = &d->doc;
    r.origin = d->origin;
    yaml_node_t *root = yaml_document_get_root_node(&d->doc);
    yaml_node_t *defs = get(&r, get(&r, root, "components"), "schemas");
    for(yaml_node_pair_t *p = defs->data.mapping.pairs.start;
        p < defs->data.mapping.pairs.top && !name; p++)
      if(is_kind(&r, yaml_document_get_node(r.doc, p->value), g, v, kn))
        name = scalar(yaml_document_get_node(r.doc, p->key));
    if(!name)
      continue;
    yaml_node_t *rl = get(&r, root, "x-kcr-resources");
    for(yaml_node_item_t *i =
            rl && rl->type == YAML_SEQUENCE_NODE ? rl->data.sequence.items.start : NULL;
        i && i < rl->data.sequence.items.top && !res; i++) {
      yaml_node_t *e = yaml_document_get_node(r.doc, *i);
      if(is(get(&r, e, "kind"), kn))
        res = e;
    }
  }
  if(!name || !res) {
    fprintf(stderr, "kcr-gen: --kind %s: %s\n", gvk,
            !name ? "no definition of that kind in the OpenAPI documents given"
                  : "not a resource of its group-version (x-kcr-resources)");
    return -1;
  }
  *kinds = realloc(*kinds, (*nkinds + 1) * sizeof(**kinds));
  if(!*kinds)
    xalloc((size_t)-1);
  k = &(*kinds)[(*nkinds)++];
  memset(k, 0, sizeof(*k));
  k->group = g;
  k->version = v;
  k->kind = kn;
  k->plural = sget(&r, res, "name");
  k->namespaced = yes(&r, res, "namespaced");
  if(def_node(&r, name, res, &k->root) < 0)
    return -1;
  if(k->root->kind != S_OBJ)
    return bad(&r, res, xprintf("%s is not an object with properties", name), NULL);
  k->prefix = k->root->def_cname;
  return 0;
}

int openapi_meta(struct openapi *oa, struct schema ***types, size_t *n)
{
  struct rd r = {.oa = oa, .lib = true, .origin = "(OpenAPI documents)"};
  size_t nm = 0;

  while(meta_defs[nm])
    nm++;
  *types = xalloc(nm * sizeof(**types));
  for(*n = 0; *n < nm; (*n)++)
    if(!oa || def_node(&r, xprintf(META "%s", meta_defs[*n]), NULL, &(*types)[*n]) < 0)
      return -1;
  return 0;
}
