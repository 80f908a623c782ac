/* kcr-gen/crd.c - CustomResourceDefinitions (apiextensions.k8s.io/v1, YAML,
 * several documents) into the type model, one kind per served version.
 *
 * How a schema node is typed, first rule that applies:
 *   x-kubernetes-preserve-unknown-fields: true   raw JSON text (anything
 *     goes there, so nothing is dropped; declared properties included)
 *   x-kubernetes-embedded-resource: true         raw
 *   x-kubernetes-int-or-string: true             int-or-string
 *   the root's metadata                          libkcr's ObjectMeta
 *     (struct kcr_meta_v1_object_meta of kcr/meta.h: the apiserver keeps
 *     all of it, whatever the CRD declares)
 *   OpenAPI: a $ref (or allOf of one $ref)       the definition's type
 *     (openapi.c: one C type per definition, IntOrString and Quantity
 *     special, meta types libkcr's)
 *   type boolean / integer / number              bool / int64 / double
 *   type string                                  enum when it lists values,
 *                                                else string
 *   type array                                   array of its items (raw
 *                                                items when none declared)
 *   type object with properties                  struct
 *   type object with additionalProperties        map of that schema
 *   any other object (no properties)             raw
 * oneOf/anyOf/allOf/not in a structural schema only validate (the types
 * come from properties), so they type nothing; they are noted. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kcr/typed.h"

#include "schema.h"

bool is(const yaml_node_t *n, const char *s)
{
  size_t len = strlen(s);
  return n && n->type == YAML_SCALAR_NODE && n->data.scalar.length == len &&
         !memcmp(n->data.scalar.value, s, len);
}

yaml_node_t *get(struct rd *r, const yaml_node_t *map, const char *key)
{
  if(!map || map->type != YAML_MAPPING_NODE)
    return NULL;
  for(yaml_node_pair_t *p = map->data.mapping.pairs.start;
      p < map->data.mapping.pairs.top; p++) {
    if(is(yaml_document_get_node(r->doc, p->key), key))
      return yaml_document_get_node(r->doc, p->value);
  }
  return NULL;
}

char *scalar(const yaml_node_t *n)
{
  if(!n || n->type != YAML_SCALAR_NODE)
    return NULL;
  return xstrndup((const char *)n->data.scalar.value, n->data.scalar.length);
}

char *sget(struct rd *r, const yaml_node_t *map, const char *key)
{
  return scalar(get(r, map, key));
}

bool yes(struct rd *r, const yaml_node_t *map, const char *key)
{
  return is(get(r, map, key), "true");
}

int bad(struct rd *r, const yaml_node_t *n, const char *what, const char *path)
{
  fprintf(stderr, "kcr-gen: %s:%lu: %s%s%s\n", r->origin,
          n ? (unsigned long)n->start_mark.line + 1 : 0ul, path ? path : "",
          path ? ": " : "", what);
  return -1;
}

/* The first sentence of a description, on one line, without comment ends. */
static char *first_sentence(const char *d)
{
  size_t n = 0;
  char *s;

  if(!d)
    return NULL;
  while(d[n] && !(d[n] == '.' && (d[n + 1] == ' ' || d[n + 1] == '\n' || !d[n + 1])) &&
        n < 200)
    n++;
  s = xstrndup(d, n + (d[n] == '.'));
  for(char *p = s; *p; p++) {
    if(*p == '\n' || *p == '\t' || *p == '\r')
      *p = ' ';
    if(p[0] == '*' && p[1] == '/')
      p[1] = '|';
    if(p[0] == '/' && p[1] == '*')
      p[0] = '|';
  }
  return s;
}

static void note_add(struct schema *s, const char *what)
{
  char *n = s->note ? xprintf("%s; %s", s->note, what) : xstrdup(what);
  s->note = n;
}

/* The number at key of schema n into *d (and *flag set in s->checks):
 * 0 absent or read, -1 not a number. */
static int number(struct rd *r, const yaml_node_t *n, const char *key, struct schema *s,
                  unsigned flag, double *d, long long *ll)
{
  yaml_node_t *v = get(r, n, key);
  char *t, *end;

  if(!v)
    return 0;
  if(!(t = scalar(v)) || !*t)
    return bad(r, v, xprintf("%s that is not a number", key), s->path);
  errno = 0;
  if(d)
    *d = strtod(t, &end);
  else
    *ll = strtoll(t, &end, 10);
  if(*end || errno || (ll && *ll < 0) || (d && !isfinite(*d)))
    return bad(
        r, v,
        xprintf("%s \"%s\" that is not a %s", key, t, d ? "finite number" : "count"),
        s->path);
  s->checks |= flag;
  return 0;
}

/* What kcr_typed_validate is to check of s (kcr/typed.h's KCR_TC_*), and
 * what it cannot, noted for the comments. */
static int checks(struct rd *r, const yaml_node_t *n, struct schema *s)
{
  static const char *const counts[][2] = {{"minLength", "maxLength"},
                                          {"minItems", "maxItems"},
                                          {"minProperties", "maxProperties"}};
  yaml_node_t *v;
  char *lt = sget(r, n, "x-kubernetes-list-type");

  if(number(r, n, "minimum", s, KCR_TC_MIN, &s->min, NULL) ||
     number(r, n, "maximum", s, KCR_TC_MAX, &s->max, NULL))
    return -1;
  char *type = sget(r, n, "type");
  bool i32 = s->format && !strcmp(s->format, "int32");
  for(int k = 0; type && !strcmp(type, "integer") && k < 2; k++) {
    double b = k ? s->max : s->min;
    if((s->checks & (k ? KCR_TC_MAX : KCR_TC_MIN)) &&
       (b != trunc(b) || b < (i32 ? -2147483648.0 : -9223372036854775808.0) ||
        b >= (i32 ? 2147483648.0 : 9223372036854775808.0)))
      return bad(r, n,
                 xprintf("%s %.17g of an %s member is not an %s: the apiserver "
                         "refuses every value against it",
                         k ? "maximum" : "minimum", b, i32 ? "int32" : "integer",
                         i32 ? "int32" : "int64"),
                 s->path);
  }
  if((s->checks & KCR_TC_MIN) && yes(r, n, "exclusiveMinimum"))
    s->checks |= KCR_TC_EXCL_MIN;
  if((s->checks & KCR_TC_MAX) && yes(r, n, "exclusiveMaximum"))
    s->checks |= KCR_TC_EXCL_MAX;
  for(size_t i = 0; i < 3; i++)
    if(number(r, n, counts[i][0], s, KCR_TC_MIN_N, NULL, &s->min_n) ||
       number(r, n, counts[i][1], s, KCR_TC_MAX_N, NULL, &s->max_n))
      return -1;
  if(lt && !strcmp(lt, "set"))
    s->checks |= KCR_TC_SET;
  if(lt && !strcmp(lt, "map") && (v = get(r, n, "x-kubernetes-list-map-keys")) &&
     v->type == YAML_SEQUENCE_NODE) {
    size_t nk = (size_t)(v->data.sequence.items.top - v->data.sequence.items.start);
    s->keys = xalloc((nk + 1) * sizeof(char *));
    for(size_t i = 0; i < nk; i++) {
      char *k = scalar(yaml_document_get_node(r->doc, v->data.sequence.items.start[i]));
      if(!k)
        return bad(r, v, "a list-map key that is not a string", s->path);
      s->keys[s->nkeys++] = k;
    }
    s->checks |= KCR_TC_MAP;
  }
  if(s->format && (!strcmp(s->format, "date-time") || !strcmp(s->format, "datetime")))
    s->checks |= KCR_TC_DATE_TIME;
  if(s->format && !strcmp(s->format, "date"))
    s->checks |= KCR_TC_DATE;
  if(s->format && !strcmp(s->format, "byte"))
    s->checks |= KCR_TC_BYTE;
  if(get(r, n, "default"))
    s->checks |= KCR_TC_DEFAULT;
  if((v = get(r, n, "pattern")))
    note_add(s, xprintf("pattern %s: not checked by kcr_typed_validate (RE2)",
                        scalar(v) ? scalar(v) : "?"));
  if(get(r, n, "multipleOf"))
    note_add(s, "multipleOf: not checked by kcr_typed_validate");
  if(get(r, n, "not") || get(r, n, "allOf"))
    note_add(s, "not/allOf: not checked by kcr_typed_validate");
  if(type && strcmp(type, "string") && get(r, n, "enum"))
    note_add(s, xprintf("enum of %ss: not checked by kcr_typed_validate", type));
  static const char *const typing[] = {"date-time",     "datetime", "date",  "byte",
                                       "int32",         "int64",    "float", "double",
                                       "int-or-string", "password"};
  bool known = !s->format;
  for(size_t i = 0; !known && i < sizeof(typing) / sizeof(typing[0]); i++)
    known = !strcmp(s->format, typing[i]);
  if(!known)
    note_add(s, xprintf("format %s: not checked by kcr_typed_validate", s->format));
  return 0;
}

static int prop_cmp(const void *a, const void *b)
{
  return strcmp(((const struct prop *)a)->json, ((const struct prop *)b)->json);
}

static int object(struct rd *r, const yaml_node_t *n, struct schema *s)
{
  yaml_node_t *props = get(r, n, "properties"), *req = get(r, n, "required");
  size_t np = 0;

  if(props->type != YAML_MAPPING_NODE)
    return bad(r, props, "properties is not a mapping", s->path);
  np = (size_t)(props->data.mapping.pairs.top - props->data.mapping.pairs.start);
  s->props = xalloc((np ? np : 1) * sizeof(*s->props));
  for(size_t i = 0; i < np; i++) {
    yaml_node_pair_t *p = &props->data.mapping.pairs.start[i];
    yaml_node_t *k = yaml_document_get_node(r->doc, p->key);
    yaml_node_t *v = yaml_document_get_node(r->doc, p->value);
    struct prop *x = &s->props[s->nprops];
    char *sub, *esc;
    if(!(x->json = scalar(k)))
      return bad(r, k, "a property name that is not a scalar", s->path);
    for(size_t j = 0; j < s->nprops; j++)
      if(!strcmp(s->props[j].json, x->json))
        return bad(r, k, "a property declared twice", s->path);
    /* the path, in the library's one syntax (RFC 6901) */
    esc = xalloc(2 * strlen(x->json) + 1);
    char *e = esc;
    for(const char *c = x->json; *c; c++) {
      if(*c == '~' || *c == '/') {
        *e++ = '~';
        *e++ = *c == '~' ? '0' : '1';
      } else {
        *e++ = *c;
      }
    }
    *e = '\0';
    sub = xprintf("%s/%s", s->path, esc);
    x->nullable = yes(r, v, "nullable");
    x->desc = first_sentence(sget(r, v, "description"));
    if(build(r, v, sub, !*s->path && !strcmp(x->json, "metadata"), &x->s))
      return -1;
    s->nprops++;
  }
  if(req && req->type == YAML_SEQUENCE_NODE)
    for(yaml_node_item_t *it = req->data.sequence.items.start;
        it < req->data.sequence.items.top; it++) {
      yaml_node_t *q = yaml_document_get_node(r->doc, *it);
      for(size_t j = 0; j < s->nprops; j++)
        if(is(q, s->props[j].json))
          s->props[j].required = true;
    }
  qsort(s->props, s->nprops, sizeof(*s->props), prop_cmp);
  return 0;
}

int build(struct rd *r, const yaml_node_t *n, const char *path, bool root_meta,
          struct schema **out)
{
  struct schema *s;
  char *type;
  yaml_node_t *v;
  int ref;

  if(root_meta && !r->lib) {
    *out = meta_ext("io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta", path);
    return 0;
  }
  if(r->oa && (ref = openapi_ref(r, n, path, out)))
    return ref < 0 ? -1 : 0;
  s = xalloc(sizeof(*s));
  *out = s;
  s->path = xstrdup(path);
  s->line = n ? (int)n->start_mark.line + 1 : 0;
  if(!n || n->type != YAML_MAPPING_NODE)
    return bad(r, n, "a schema that is not a mapping", path);
  s->desc = first_sentence(sget(r, n, "description"));
  s->format = sget(r, n, "format");
  type = sget(r, n, "type");
  if((v = get(r, n, "x-kubernetes-validations")) && v->type == YAML_SEQUENCE_NODE)
    note_add(
        s, xprintf("%zu x-kubernetes-validations (CEL) rule(s), evaluated by the "
                   "apiserver only",
                   (size_t)(v->data.sequence.items.top - v->data.sequence.items.start)));
  if(get(r, n, "oneOf"))
    note_add(s, "oneOf");
  if(get(r, n, "anyOf") && !yes(r, n, "x-kubernetes-int-or-string"))
    note_add(s, "anyOf");
  if((v = get(r, n, "x-kubernetes-list-type")) && v->type == YAML_SCALAR_NODE)
    note_add(s, xprintf("list-type %s", scalar(v)));
  if((v = get(r, n, "x-kubernetes-map-type")) && v->type == YAML_SCALAR_NODE)
    note_add(s, xprintf("map-type %s", scalar(v)));
  s->checked = !r->oa;
  if(s->checked && checks(r, n, s))
    return -1;

  if(yes(r, n, "x-kubernetes-preserve-unknown-fields")) {
    s->kind = S_RAW;
    s->why = xstrdup("x-kubernetes-preserve-unknown-fields");
  } else if(yes(r, n, "x-kubernetes-embedded-resource")) {
    s->kind = S_RAW;
    s->why = xstrdup("x-kubernetes-embedded-resource");
  } else if(yes(r, n, "x-kubernetes-int-or-string")) {
    s->kind = S_INTSTR;
  } else if(!type) {
    s->kind = S_RAW;
    s->why = xstrdup("no type");
  } else if(!strcmp(type, "boolean")) {
    s->kind = S_BOOL;
  } else if(!strcmp(type, "integer")) {
    s->kind = S_INT;
  } else if(!strcmp(type, "number")) {
    s->kind = S_NUM;
  } else if(!strcmp(type, "string")) {
    s->kind = S_STR;
    if((v = get(r, n, "enum")) && v->type == YAML_SEQUENCE_NODE) {
      size_t nv = (size_t)(v->data.sequence.items.top - v->data.sequence.items.start);
      s->kind = S_ENUM;
      if(s->checked) /* a CRD's enum is enforced; Kubernetes' own are open */
        s->checks |= KCR_TC_ENUM;
      s->values = xalloc((nv + 1) * sizeof(char *));
      s->consts = xalloc((nv + 1) * sizeof(char *));
      for(size_t i = 0; i < nv; i++) {
        yaml_node_t *e = yaml_document_get_node(r->doc, v->data.sequence.items.start[i]);
        char *val = scalar(e);
        bool dup = false;
        if(!val)
          return bad(r, e, "an enum value that is not a scalar", path);
        for(size_t j = 0; j < s->nvalues; j++)
          dup |= !strcmp(s->values[j], val);
        if(!dup)
          s->values[s->nvalues++] = val;
      }
    }
  } else if(!strcmp(type, "array")) {
    s->kind = S_ARR;
    if(!(v = get(r, n, "items"))) {
      s->elem = xalloc(sizeof(*s->elem));
      s->elem->kind = S_RAW;
      s->elem->path = xprintf("%s[*]", path);
      s->elem->why = xstrdup("no items schema");
    } else {
      char *sub = xprintf("%s[*]", path);
      s->elem_nullable = yes(r, v, "nullable");
      if(build(r, v, sub, false, &s->elem))
        return -1;
    }
  } else if(!strcmp(type, "object")) {
    yaml_node_t *props = get(r, n, "properties"), *ap = get(r, n, "additionalProperties");
    if(props && props->type == YAML_MAPPING_NODE &&
       props->data.mapping.pairs.top > props->data.mapping.pairs.start) {
      s->kind = S_OBJ;
      if(object(r, n, s))
        return -1;
    } else if(ap && ap->type == YAML_MAPPING_NODE) {
      char *sub = xprintf("%s[*]", path);
      s->kind = S_MAP;
      s->elem_nullable = yes(r, ap, "nullable");
      if(build(r, ap, sub, false, &s->elem))
        return -1;
    } else {
      s->kind = S_RAW;
      s->why = xstrdup("an object without properties");
    }
  } else {
    return bad(r, n, xprintf("unknown type \"%s\"", type), path);
  }
  if(s->kind == S_ARR && s->elem->kind == S_RAW &&
     (s->checks & (KCR_TC_SET | KCR_TC_MAP)))
    note_add(s, "items kept as JSON text: their uniqueness is not checked by "
                "kcr_typed_validate");
  /* Arrays and maps of plain strings are libkcr's struct kcr_strlist and
   * struct kcr_strmap, one type each: labels, a ConfigMap's data, a
   * container's args assign to one another. */
  if((s->kind == S_ARR || s->kind == S_MAP) && s->elem->kind == S_STR &&
     !s->elem_nullable)
    s->ext = xstrdup(s->kind == S_ARR ? "kcr_strlist" : "kcr_strmap");
  return 0;
}

static int crd(struct rd *r, yaml_node_t *root, const char *const *only, size_t nonly,
               struct kind **kinds, size_t *nkinds)
{
  yaml_node_t *spec = get(r, root, "spec"), *names = get(r, spec, "names");
  yaml_node_t *versions = get(r, spec, "versions");
  char *api = sget(r, root, "apiVersion");

  if(!api || strcmp(api, "apiextensions.k8s.io/v1"))
    return bad(r, root, "a CustomResourceDefinition that is not apiextensions.k8s.io/v1",
               NULL);
  if(!spec || !names || !versions || versions->type != YAML_SEQUENCE_NODE)
    return bad(r, root, "a CustomResourceDefinition without spec.names and spec.versions",
               NULL);
  for(yaml_node_item_t *it = versions->data.sequence.items.start;
      it < versions->data.sequence.items.top; it++) {
    yaml_node_t *ver = yaml_document_get_node(r->doc, *it);
    yaml_node_t *schema;
    struct kind *k;
    char *vname = sget(r, ver, "name");
    bool want = nonly == 0;
    if(!vname)
      return bad(r, ver, "a version without a name", NULL);
    for(size_t i = 0; i < nonly; i++)
      want |= !strcmp(only[i], vname);
    if(!yes(r, ver, "served") || !want) {
      continue;
    }
    schema = get(r, get(r, ver, "schema"), "openAPIV3Schema");
    if(!schema)
      return bad(r, ver, xprintf("version %s has no schema.openAPIV3Schema", vname),
                 NULL);
    *kinds = realloc(*kinds, (*nkinds + 1) * sizeof(**kinds));
    if(!*kinds)
      xalloc((size_t)-1);
    k = &(*kinds)[(*nkinds)++];
    memset(k, 0, sizeof(*k));
    k->group = sget(r, spec, "group");
    k->version = vname;
    k->kind = sget(r, names, "kind");
    k->plural = sget(r, names, "plural");
    k->list_kind = sget(r, names, "listKind");
    k->namespaced = is(get(r, spec, "scope"), "Namespaced");
    k->status_sub = get(r, get(r, ver, "subresources"), "status") != NULL;
    if(!k->group || !k->kind || !k->plural)
      return bad(r, names,
                 "spec.group, spec.names.kind and spec.names.plural are required", NULL);
    if(build(r, schema, "", false, &k->root))
      return -1;
    if(k->root->kind != S_OBJ)
      return bad(r, schema, "the schema's root is not an object with properties", NULL);
  }
  return 0;
}

int crd_read(const char *origin, const char *text, size_t len, const char *const *only,
             size_t nonly, struct kind **kinds, size_t *nkinds)
{
  yaml_parser_t p;
  yaml_document_t doc;
  struct rd r = {.doc = &doc, .origin = origin};
  int rc = 0, ndoc = 0;
  size_t before = *nkinds;

  if(!yaml_parser_initialize(&p))
    xalloc((size_t)-1);
  yaml_parser_set_input_string(&p, (const unsigned char *)text, len);
  for(;;) {
    yaml_node_t *root;
    if(!yaml_parser_load(&p, r.doc)) {
      fprintf(stderr, "kcr-gen: %s:%lu: %s\n", origin,
              (unsigned long)p.problem_mark.line + 1,
              p.problem ? p.problem : "malformed YAML");
      rc = -1;
      break;
    }
    if(!(root = yaml_document_get_root_node(r.doc))) {
      yaml_document_delete(r.doc);
      break;
    }
    ndoc++;
    if(is(get(&r, root, "kind"), "CustomResourceDefinition"))
      rc = crd(&r, root, only, nonly, kinds, nkinds);
    yaml_document_delete(r.doc);
    if(rc)
      break;
  }
  yaml_parser_delete(&p);
  if(!rc && *nkinds == before) {
    fprintf(stderr, "kcr-gen: %s: no served version of a CustomResourceDefinition%s\n",
            origin, nonly ? " among the versions asked for" : "");
    rc = -1;
  }
  return rc;
}
