/* kcr-gen/schema.h - the schema reader that CRDs (crd.c) and OpenAPI
 * documents (openapi.c) share: libyaml's nodes into the model. */
#ifndef KCR_GEN_SCHEMA_H
#define KCR_GEN_SCHEMA_H

#include <yaml.h>

#include "model.h"

struct rd {
  yaml_document_t *doc; /* the document the nodes are in */
  const char *origin;   /* its file, for messages */
  struct openapi *oa;   /* reading an OpenAPI document: its definitions, else NULL */
  bool lib;             /* libkcr's kcr/meta.h: the meta types are not libkcr's yet */
};

bool is(const yaml_node_t *n, const char *s);
yaml_node_t *get(struct rd *r, const yaml_node_t *map, const char *key);
char *scalar(const yaml_node_t *n);
char *sget(struct rd *r, const yaml_node_t *map, const char *key);
bool yes(struct rd *r, const yaml_node_t *map, const char *key);
/* Prints "origin:line: path: what"; returns -1. */
int bad(struct rd *r, const yaml_node_t *n, const char *what, const char *path);

/* The schema node n (at JSON Pointer path) into *out, typed as crd.c's top
 * comment says. root_meta: n is a kind's metadata. Returns 0 or -1. */
int build(struct rd *r, const yaml_node_t *n, const char *path, bool root_meta,
          struct schema **out);

/* openapi.c: n is a $ref (or allOf of one $ref) to a definition: *out is
 * its node (shared), 1 returned; 0 when n is no reference; -1 on error. */
int openapi_ref(struct rd *r, const yaml_node_t *n, const char *path,
                struct schema **out);

/* A node for libkcr's type of definition def (kcr_meta_v1_*). */
struct schema *meta_ext(const char *def, const char *path);

#endif
