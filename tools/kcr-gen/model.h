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
  int line;      /* in the YAML file */
  int id;        /* emit.c: the number of its local names in the source */
};

struct prop {
  char *json;   /* the JSON name */
  char *member; /* the C member name */
  bool required, nullable;
  struct schema *s;
};

/* One served version of one CRD. */
struct kind {
  char *group, *version, *kind, *plural, *list_kind;
  bool namespaced, status_sub;
  char *prefix; /* C names' prefix: "ebd" */
  struct schema *root;
};

void *xalloc(size_t n);
char *xstrdup(const char *s);
char *xstrndup(const char *s, size_t n);
char *xprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Reads every CustomResourceDefinition in the multi-document YAML text
 * [0..len) (origin names it in messages) and appends one kind per served
 * version (only versions in only[0..nonly) when nonly > 0) to *kinds.
 * Returns 0, or -1 after printing what is wrong to stderr. */
int crd_read(const char *origin, const char *text, size_t len, const char *const *only,
             size_t nonly, struct kind **kinds, size_t *nkinds);

/* Gives every kind its C names: type and member names from the JSON path,
 * keywords escaped, collisions after case folding suffixed. with_version:
 * the prefix carries the version (several versions of one kind). */
void names_assign(struct kind *k, bool with_version);

#endif
