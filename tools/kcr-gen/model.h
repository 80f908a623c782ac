/* kcr-gen/model.h - the type model kcr-gen builds from a CRD's schema and
 * emits C from. A command-line tool: running out of memory ends it (xalloc). */
#ifndef KCR_GEN_MODEL_H
#define KCR_GEN_MODEL_H

#include <stdbool.h>
#include <stddef.h>

enum skind { S_BOOL, S_INT, S_NUM, S_STR, S_ENUM, S_INTSTR, S_RAW, S_OBJ, S_ARR, S_MAP };

struct prop;

/* One schema node, as kcr-gen types it. */
struct schema {
  enum skind kind;
  char *path;         /* JSON Pointer from the object's root: "/spec/vfm" */
  char *cname;        /* OBJ, ARR, MAP, ENUM: the C name (type, or constants' prefix) */
  char *desc;         /* first sentence of description, or NULL */
  char *format;       /* format: int32, date-time ..., or NULL */
  char *why;          /* S_RAW: why it is kept as text */
  char *note;         /* validations not evaluated here, list type ... for comments */
  struct prop *props; /* S_OBJ, sorted by JSON name (bytes) */
  size_t nprops;
  struct schema *elem; /* S_ARR, S_MAP */
  bool elem_nullable;  /* S_ARR, S_MAP: items may be JSON null */
  char **values;       /* S_ENUM: values (JSON text unescaped), and */
  char **consts;       /* their C constants */
  size_t nvalues;
  char *unknown; /* S_ENUM: the constant for an unlisted value */
  /* What kcr_typed_validate checks (kcr/typed.h's KCR_TC_* flags, but
   * KCR_TC_REQUIRED, which is the property's), and its figures */
  unsigned checks;
  bool checked; /* a CRD's node: validation asked of it, required included (the
                 * built-in kinds' OpenAPI describes Go types; the apiserver
                 * validates those in Go, so nothing is asked from it) */
  double min, max;
  long long min_n, max_n;
  char **keys; /* list-map keys */
  size_t nkeys;
  int line; /* in the YAML file */
  int id;   /* emit.c: the number of its local names in the source */
  /* A named definition of an OpenAPI document ("io.k8s.api.core.v1.PodSpec"):
   * one node for all its uses, one C type named after it (def_cname), whose
   * description is exported as <cname>_type. */
  char *def, *def_cname;
  /* A type of libkcr's - S_OBJ of kcr/meta.h (ObjectMeta ...), an array or
   * map of plain strings (kcr_strlist, kcr_strmap of kcr/typed.h): its C
   * name; the type and its description <ext>_type are libkcr's, not written
   * again. */
  char *ext;
  bool named, written; /* names.c, emit.c: done once for a shared node */
};

struct prop {
  char *json;   /* the JSON name */
  char *desc;   /* first sentence of the property's description, or NULL */
  char *member; /* the C member name */
  bool required, nullable;
  struct schema *s;
};

/* One served version of one CRD, or one built-in kind. */
struct kind {
  char *group, *version, *kind, *plural, *list_kind;
  bool namespaced, status_sub;
  char *prefix; /* C names' prefix: "ebd" */
  struct schema *root;
  char **keep; /* --path: the paths it was cut to (sorted, once each) */
  size_t nkeep;
};

void *xalloc(size_t n);
char *xstrdup(const char *s);
char *xstrndup(const char *s, size_t n);
char *xprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Cuts kinds[0..nk) down to paths[0..np) (JSON Pointers from the object's
 * root, RFC 6901 escaping): an object member on no path's way is taken out,
 * one a path names (or is under) is kept whole, apiVersion, kind and
 * metadata always; and sets each kind's keep list. A path that is not in
 * a kind's schema, or runs through an array, a map, raw text or a scalar,
 * is an error. Returns 0, or -1 after printing what is wrong (origin names
 * the input). */
int paths_cut(struct kind *kinds, size_t nk, const char *const *paths, size_t np,
              const char *origin);

/* Reads every CustomResourceDefinition in the multi-document YAML text
 * [0..len) (origin names it in messages) and appends one kind per served
 * version (only versions in only[0..nonly) when nonly > 0) to *kinds.
 * Returns 0, or -1 after printing what is wrong to stderr. */
int crd_read(const char *origin, const char *text, size_t len, const char *const *only,
             size_t nonly, struct kind **kinds, size_t *nkinds);

/* The definitions of the apiserver's OpenAPI v3 documents (the snapshot of
 * tools/kcr-gen/openapi: JSON, which libyaml reads as YAML). */
struct openapi;

/* Reads one document (origin names it in messages) into *oa (NULL: a new
 * set). Returns 0, or -1 after printing what is wrong. */
int openapi_read(struct openapi **oa, const char *origin, const char *text, size_t len);

/* Frees the documents of oa (the model read from them stays). */
void openapi_free(struct openapi *oa);

/* Appends the kind apiVersion/Kind ("v1/ConfigMap", "apps/v1/Deployment")
 * to *kinds, its schema and every definition it uses typed as crd_read
 * types a CRD's (prefix and type names from the definitions' names:
 * core_v1_config_map). Returns 0, or -1 after printing what is wrong. */
int openapi_kind(struct openapi *oa, const char *gvk, struct kind **kinds,
                 size_t *nkinds);

/* libkcr's own build: the meta types (kcr/meta.h) from their definitions,
 * named kcr_meta_v1_*, into types[0..*n). Returns 0 or -1. */
int openapi_meta(struct openapi *oa, struct schema ***types, size_t *n);

/* The definitions libkcr's kcr/meta.h holds (ObjectMeta and what it uses,
 * Condition, LabelSelector, ListMeta), under io.k8s.apimachinery.pkg.apis.meta.v1. */
extern const char *const meta_defs[];

/* The C name of a definition: "io.k8s.api.core.v1.PodSpec" -> core_v1_pod_spec
 * (group's first label, version, snake_case of the name). */
char *def_cname(const char *def);

/* snake_case of a JSON name (upper: upper case), as names.c names members. */
char *snake(const char *json, bool upper);

/* Gives kinds[0..n) and types[0..nt) their C names: type and member names
 * from the JSON path (a definition's from its name), keywords escaped,
 * collisions after case folding suffixed, one name space for all. A kind's
 * prefix carries the version when the file has several of one kind. */
void names_assign(struct kind *kinds, size_t n, struct schema **types, size_t nt);

#endif
