/* kcr/typed.h - typed objects: C structs decoded from and encoded to JSON
 * text by a description of their layout. kcr-gen (docs/typed-objects.md)
 * writes the structs and their descriptions from a CRD's schema; this
 * header is the engine they run on, and what their members are made of.
 *
 * The members of a generated struct, by schema type:
 *   boolean                bool
 *   integer                int64_t (exact: int32 and int64 alike)
 *   number                 double
 *   string (date-time,     struct kcr_str (kcr/jsontext.h): the text as it
 *    byte, quantity ...)    came; parse helpers read it (kcr_time_parse ...)
 *   string with enum       struct kcr_enum: v is the generated constant,
 *                           0 (<TYPE>_UNKNOWN) for a value the schema does
 *                           not list; text is always the value as read
 *   int-or-string          struct kcr_intstr: the kind it was read as
 *   preserve-unknown,      struct kcr_raw: the JSON text, byte for byte
 *    embedded resources
 *   object                 a generated struct, by value
 *   array                  struct { T *v; size_t n; }; of plain strings
 *                           struct kcr_strlist (below)
 *   map (additional-       struct { struct kcr_str *k; T *v; size_t n; }; of
 *    Properties)            plain strings struct kcr_strmap (below)
 *   ... of nullable items  the same with `bool *null;` before n: null[i]
 *                           says item i is JSON null (v[i] zero)
 *
 * Presence. Every member x has a `bool has_x` beside it: set when x was in
 * the text (required members too: decoding does not check,
 * kcr_typed_validate does), and written by encoding only when set - so unset, zero and
 * empty are three different things, as server-side apply needs (writing a zero you did
 * not mean takes ownership of the field). An object member is also written when a member
 * inside it is: setting e.spec.vfm_template.image and its has_ is enough, the objects
 * around it follow. A member the schema marks nullable has a `bool null_x` too: x was
 * JSON null (has_x set, x zero). null for a member that is not nullable reads as absent,
 * as Go's decoder reads it. KCR_SET(s, x, v) sets a member and its has_ at once.
 *
 * Ownership. A decoded struct borrows; what it borrows from depends on the
 * form:
 *   view (flags 0): strings without escapes and raw texts point into the
 *     text decoded (keep it - a kcr_obj reference - while the struct is in
 *     use); arrays, maps and unescaped strings are allocated in the arena.
 *   copy (KCR_TYPED_COPY): everything is in the arena, NUL-terminated
 *     strings included; the text may go.
 * Either way the arena is the one thing to free (kcr_arena_reset or
 * _cleanup, or the reconcile's own arena, kcr_ctx_arena, which the
 * controller resets after each reconcile). Nothing else is allocated. On
 * error what was allocated stays in the arena until then.
 *
 * Unknown members are skipped, as Go's decoder skips them (the apiserver
 * prunes them from custom resources); the last of a repeated member name
 * counts. Arrays' elements and maps' values have no presence; where the
 * schema makes them nullable, null[i] keeps a JSON null (encoded back as
 * null); elsewhere a JSON null among them decodes as the zero value, as Go
 * decodes it (a raw element keeps "null" as its text).
 *
 * Thread safety: pure over the caller's memory (an arena is used by one
 * thread at a time); descriptions are immutable. */
#ifndef KCR_TYPED_H
#define KCR_TYPED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "api.h"
#include "arena.h"
#include "buf.h"
#include "err.h"
#include "jsontext.h"

#ifdef __cplusplus
extern "C" {
#endif

/* An enum member's value: v is the index of text in the type's values (a
 * generated constant), 0 when the schema does not list it. Encoding writes
 * the listed value of v when v is nonzero, else text unchanged. */
struct kcr_enum {
  int v;
  struct kcr_str text;
};

/* int-or-string: is_str says which was read (or is to be written). */
struct kcr_intstr {
  bool is_str;
  int64_t i;
  struct kcr_str s;
};

/* JSON text, one whole value, kept byte for byte. */
struct kcr_raw {
  const char *s;
  size_t n;
};

/* Sets member x of struct lvalue s to v and marks it present. */
#define KCR_SET(s, x, v) ((s).x = (v), (s).has_##x = true)

/* Arrays and maps of plain strings - finalizers, a container's args;
 * labels, annotations, a ConfigMap's data - are these two types in every
 * generated struct, so one assigns to another:
 *   KCR_SET(child.metadata, labels, owner.metadata.labels); */
struct kcr_strlist {
  struct kcr_str *v;
  size_t n;
};
struct kcr_strmap {
  struct kcr_str *k;
  struct kcr_str *v;
  size_t n;
};

/* The value of key c (a C string) in map m: no string (s NULL) when the key
 * is absent; the last, when it is there twice.
 *   if(!kcr_str_eq(KCR_MAP_STR(cm.data, "greeting"), want)) ... */
#define KCR_MAP_STR(m, c) kcr_strmap_get((m).k, (m).v, (m).n, (c))
static inline struct kcr_str
kcr_strmap_get(const struct kcr_str *k, const struct kcr_str *v, size_t n, const char *c)
{
  size_t i = kcr_str_index(k, n, c);
  return i < n ? v[i] : kcr_str_c(NULL);
}

/* Whether maps a and b hold the same keys with the same values, in any
 * order (an absent map - NULL - and an empty one are the same, as the
 * apiserver drops an empty map): what a level-based reconcile compares
 * before it writes (labels, a ConfigMap's data). Keys are unique in what
 * the apiserver stores; a key repeated in a or b counts its last value.
 * Pure; quadratic in the number of keys (maps of a few dozen). */
KCR_API bool kcr_strmap_same(const struct kcr_strmap *a, const struct kcr_strmap *b);
/* Sets key to value (C strings, borrowed) in *m: the value replaced where
 * key is there, else the pair appended - in new arrays in arena a, so *m's
 * old arrays (which it may share with another object) are not written; for
 * maps whose keys are known only at run time:
 *   for(size_t i = 0; i < b.spec.targets.n; i++)
 *     rc = kcr_strmap_put(a, &cm.data, key_of(i), path_of(i));
 *   cm.has_data = true;
 * Errors: KCR_EINVAL (a, m, key or value NULL), KCR_ENOMEM; *m is then
 * unchanged. Pure; a is the caller's. */
KCR_API kcr_err kcr_strmap_put(struct kcr_arena *a, struct kcr_strmap *m, const char *key,
                               const char *value);

/* Sets map member x of struct lvalue s to the pairs of C strings given -
 * key, value, key, value ... (borrowed, not copied) - its arrays in arena
 * a, and marks it present:
 *   KCR_SET_STRMAP(p, data, a, "greeting", want, "greeter", id);
 * An empty map (present, no pairs): KCR_SET_STRMAP(p, data, a, (char *)NULL).
 * Errors: KCR_EINVAL (a key without a value: a NULL value ends the list
 * there), KCR_ENOMEM; x is then unchanged. */
#define KCR_SET_STRMAP(s, x, a, ...)                                                     \
  kcr_strmap_set((a), &(s).x.k, &(s).x.v, &(s).x.n, &(s).has_##x, __VA_ARGS__,           \
                 (const char *)NULL)
/* What KCR_SET_STRMAP calls: *k, *v, *n the map's members, *has its
 * presence; the pairs end with a NULL key. Errors: KCR_EINVAL (as above,
 * or a, k, v, n or has NULL), KCR_ENOMEM. Pure; a is the caller's. */
KCR_API kcr_err kcr_strmap_set(struct kcr_arena *a, struct kcr_str **k,
                               struct kcr_str **v, size_t *n, bool *has, const char *key,
                               ...);

enum kcr_tkind {
  KCR_TK_BOOL = 1,
  KCR_TK_INT,
  KCR_TK_NUMBER,
  KCR_TK_STRING,
  KCR_TK_ENUM,
  KCR_TK_INTSTR,
  KCR_TK_RAW,
  KCR_TK_OBJECT,
  KCR_TK_ARRAY,
  KCR_TK_MAP
};

/* A member's offset that is not there (null_ of a member not nullable). */
#define KCR_TNONE ((size_t)-1)

struct kcr_tfield;

/* The description of one C type: what kcr-gen writes; immutable. */
struct kcr_type {
  const char *name; /* the C type or the schema path, for messages */
  unsigned kind;    /* enum kcr_tkind */
  size_t size;      /* sizeof the C value */
  /* KCR_TK_OBJECT: its members, sorted by JSON name (bytes, memcmp) */
  const struct kcr_tfield *fields;
  size_t nfields;
  /* KCR_TK_ARRAY, KCR_TK_MAP: the element's or value's type */
  const struct kcr_type *elem;
  /* KCR_TK_ENUM: the listed values, values[0] unused (NULL) */
  const char *const *values;
  size_t nvalues;
  /* KCR_TK_ARRAY, KCR_TK_MAP: KCR_TNULLABLE_ITEMS when the struct has a
   * bool *null (see above) */
  unsigned flags;
};
#define KCR_TNULLABLE_ITEMS 1u

/* What the schema asks of a member's value, for kcr_typed_validate: the
 * flags say which of the other members hold. kcr-gen writes one for each
 * member the schema constrains. */
struct kcr_tcheck {
  unsigned flags;          /* KCR_TC_* */
  double min, max;         /* minimum, maximum: integers and numbers */
  int64_t min_n;           /* minLength (code points), minItems, minProperties */
  int64_t max_n;           /* maxLength, maxItems, maxProperties */
  const char *const *keys; /* list-type map: x-kubernetes-list-map-keys */
  size_t nkeys;
  const struct kcr_tcheck *items; /* of each element or map value, or NULL */
};
#define KCR_TC_REQUIRED  0x1u    /* in the object's required list */
#define KCR_TC_MIN       0x2u    /* min holds */
#define KCR_TC_MAX       0x4u    /* max holds */
#define KCR_TC_EXCL_MIN  0x8u    /* exclusiveMinimum: the value must be > min */
#define KCR_TC_EXCL_MAX  0x10u   /* exclusiveMaximum: < max */
#define KCR_TC_MIN_N     0x20u   /* min_n holds */
#define KCR_TC_MAX_N     0x40u   /* max_n holds */
#define KCR_TC_ENUM      0x80u   /* only the listed values (a CRD's enum) */
#define KCR_TC_SET       0x100u  /* list-type set: items unique */
#define KCR_TC_MAP       0x200u  /* list-type map: keys unique */
#define KCR_TC_DATE_TIME 0x400u  /* format date-time, as the apiserver checks it */
#define KCR_TC_DATE      0x800u  /* format date */
#define KCR_TC_BYTE      0x1000u /* format byte: standard base64 */
#define KCR_TC_DEFAULT   0x2000u /* the schema has a default (the apiserver sets it) */

/* One member of an object. */
struct kcr_tfield {
  const char *name; /* the JSON name */
  size_t name_len;
  size_t off;   /* of the value in the struct */
  size_t has;   /* of its bool has_x */
  size_t null_; /* of its bool null_x, or KCR_TNONE */
  const struct kcr_type *type;
  const struct kcr_tcheck *check; /* what the schema asks of it, or NULL */
};

/* For the code kcr-gen writes: the description of member m of struct
 * type S (JSON name json, a string literal; value described by desc),
 * without and with null_m; of struct type S (its members in the array
 * fields), of array or map struct type S (elements described by elem;
 * _NULLABLE: items that may be null, and a null array in S), of
 * enums (their values in the array values, [0] NULL). name: for messages,
 * or NULL. */
#define KCR_TFIELD(S, json, m, desc)                                                     \
  {                                                                                      \
    json, sizeof(json) - 1, offsetof(S, m), offsetof(S, has_##m), KCR_TNONE, desc, NULL  \
  }
#define KCR_TFIELD_NULLABLE(S, json, m, desc)                                            \
  {                                                                                      \
    json, sizeof(json) - 1, offsetof(S, m), offsetof(S, has_##m), offsetof(S, null_##m), \
        desc, NULL                                                                       \
  }
/* ... and what the schema asks of it (a struct kcr_tcheck *) */
#define KCR_TFIELD_CHECK(S, json, m, desc, check)                                        \
  {                                                                                      \
    json, sizeof(json) - 1, offsetof(S, m), offsetof(S, has_##m), KCR_TNONE, desc, check \
  }
#define KCR_TFIELD_NULLABLE_CHECK(S, json, m, desc, check)                               \
  {                                                                                      \
    json, sizeof(json) - 1, offsetof(S, m), offsetof(S, has_##m), offsetof(S, null_##m), \
        desc, check                                                                      \
  }
#define KCR_TOBJECT(name, S, fields)                                                     \
  {                                                                                      \
    name, KCR_TK_OBJECT, sizeof(S), fields, sizeof(fields) / sizeof(fields[0]), NULL,    \
        NULL, 0, 0                                                                       \
  }
#define KCR_TARRAY(name, S, elem)                                                        \
  {                                                                                      \
    name, KCR_TK_ARRAY, sizeof(S), NULL, 0, elem, NULL, 0, 0                             \
  }
#define KCR_TMAP(name, S, elem)                                                          \
  {                                                                                      \
    name, KCR_TK_MAP, sizeof(S), NULL, 0, elem, NULL, 0, 0                               \
  }
#define KCR_TARRAY_NULLABLE(name, S, elem)                                               \
  {                                                                                      \
    name, KCR_TK_ARRAY, sizeof(S), NULL, 0, elem, NULL, 0, KCR_TNULLABLE_ITEMS           \
  }
#define KCR_TMAP_NULLABLE(name, S, elem)                                                 \
  {                                                                                      \
    name, KCR_TK_MAP, sizeof(S), NULL, 0, elem, NULL, 0, KCR_TNULLABLE_ITEMS             \
  }
#define KCR_TENUM(name, values)                                                          \
  {                                                                                      \
    name, KCR_TK_ENUM, sizeof(struct kcr_enum), NULL, 0, NULL, values,                   \
        sizeof(values) / sizeof(values[0]), 0                                            \
  }

/* The scalar types, for elements of arrays and maps. */
KCR_API extern const struct kcr_type kcr_type_bool;
KCR_API extern const struct kcr_type kcr_type_int;
KCR_API extern const struct kcr_type kcr_type_number;
KCR_API extern const struct kcr_type kcr_type_string;
KCR_API extern const struct kcr_type kcr_type_intstr;
KCR_API extern const struct kcr_type kcr_type_raw;
/* The descriptions of struct kcr_strlist and struct kcr_strmap. */
KCR_API extern const struct kcr_type kcr_strlist_type;
KCR_API extern const struct kcr_type kcr_strmap_type;

/* Flags of kcr_typed_decode. */
#define KCR_TYPED_COPY 1u /* copy every string into the arena (see above) */
/* The text was checked already (kcr_json_check, or a kcr_obj's text): the
 * structure is followed without checking it again. Untrusted text without
 * this flag is checked first, once. */
#define KCR_TYPED_TRUSTED 2u

/* Decodes the JSON value text[0..len) of type t into *out (a t->size
 * struct of the caller's, zeroed first), in the form flags say (see
 * Ownership above), allocating in a.
 * Errors: KCR_EINVAL (t, out or a NULL, text NULL with len > 0),
 * KCR_EPARSE (not well-formed JSON, or a value of another JSON type than
 * the schema's - "/spec/replicas: want an integer, got a string" in ei,
 * with the JSON Pointer of the value), KCR_ERANGE (an integer outside
 * int64, a number beyond double), KCR_ENOMEM. ei may be NULL. */
KCR_API kcr_err kcr_typed_decode(const struct kcr_type *t, const char *text, size_t len,
                                 unsigned flags, struct kcr_arena *a, void *out,
                                 struct kcr_errinfo *ei);

/* Appends the JSON text of *in (type t) to out: of every object the
 * members whose has_ is set - and an object member with a member written,
 * its has_ set or not (e.spec.vfm_template.image set makes spec and vfm_template present;
 * to leave such a member out, zero it) -, null for those whose null_ (and
 * has_) is set, an enum's
 * listed value or its text, a raw member's text as it is.
 * Errors: KCR_EINVAL (t, in or out NULL; a number that is NaN or infinite;
 * an enum with v outside its values and no text; a raw member that is not
 * one well-formed JSON value - ei names the member), KCR_ENOMEM (out's
 * error). On error out holds part of the text. ei may be NULL. */
KCR_API kcr_err kcr_typed_encode(const struct kcr_type *t, const void *in,
                                 struct kcr_buf *out, struct kcr_errinfo *ei);

/* Flags of kcr_typed_validate. */
/* An apply configuration, not a whole object: required members may be
 * absent (you send only what you own; the apiserver checks the merge). */
#define KCR_VALIDATE_PARTIAL 1u

/* Checks *in (type t) against what its schema asks, as the apiserver
 * checks a custom resource (k8s.io/kube-openapi's validator): every
 * member present - set, or an object with a member set - or, unless
 * flags has KCR_VALIDATE_PARTIAL, required and absent; minimum and
 * maximum (exclusive too; a value written as an integer - an integer
 * member, a whole number below 10^15 - against the bound as Go's int64()
 * converts it, others as doubles, as the apiserver reads and compares
 * them; an integer member's bound that is no integer refuses every value,
 * as the apiserver does); minLength and maxLength in Unicode code points
 * (an invalid UTF-8 byte counts one, as Go's utf8.RuneCount); minItems,
 * maxItems, minProperties, maxProperties; a CRD's enum (a value it does not
 * list - v 0 - fails; the built-in kinds' enums are open and not checked);
 * list-type set items and list-type map keys unique (compared as their
 * JSON text), and each list-type map item carrying its keys (but those
 * the schema defaults) - server-side apply tells items apart by them, so
 * an apply configuration needs them too; format date-time, date and byte. Not evaluated
 * here, and listed as such in the generated comments: pattern (the apiserver's are RE2,
 * which POSIX regex is not), x-kubernetes-validations (CEL), multipleOf and the other
 * formats. Members JSON null are not checked further. Stops at the first failure. Errors:
 * KCR_EINVAL (t or in NULL; or a value that fails, with the JSON Pointer of the value and
 * the rule in ei: "/spec/vfmTemplate/replicas: 0 is less than the minimum 1"), KCR_ENOMEM
 * (comparing list items). ei may be NULL. Pure. */
KCR_API kcr_err kcr_typed_validate(const struct kcr_type *t, const void *in,
                                   unsigned flags, struct kcr_errinfo *ei);

struct kcr_meta_v1_object_meta; /* kcr/meta.h */
/* The metadata of *obj, an object of type t: its member "metadata" when
 * that is an ObjectMeta (every kind kcr-gen writes has one), else NULL
 * (also for t or obj NULL). Borrowed from obj. Pure. */
KCR_API const struct kcr_meta_v1_object_meta *kcr_typed_meta(const struct kcr_type *t,
                                                             const void *obj);

/* Makes the owner - an object of apiVersion api_version and kind kind, its
 * metadata owner - the controller of the object whose metadata is child (an
 * object being built for apply or create), as controller-runtime's
 * SetControllerReference does: child's ownerReferences gains {apiVersion,
 * kind, name, uid, controller: true, blockOwnerDeletion: true}, so the
 * child is garbage-collected with its owner and its events map to it. A
 * reference to the same object - the same group, kind and name, whatever
 * its uid or version (controller-runtime's referSameObject: an owner made
 * again under its name) - is replaced by that one; so calling it again
 * changes nothing (idempotent).
 * Generated code calls it as <kind>_set_controller_of(a, &child.metadata,
 * &owner, ei), with the kind's own apiVersion and kind.
 * Memory: a new array (the old one, which child may share with another
 * object, is never written) and copies of the owner's name and uid, in
 * arena a; api_version and kind are borrowed (the generated constants).
 * All or nothing: on any error child is unchanged.
 * Errors: KCR_EINVAL (the message says why: a or child NULL; an owner
 * without apiVersion, kind, name or uid; a namespaced owner in another
 * namespace than child's - set child's namespace first; child already
 * controlled by another object), KCR_ENOMEM. ei may be NULL. Pure; a is
 * the caller's. */
KCR_API kcr_err kcr_typed_set_controller(struct kcr_arena *a,
                                         struct kcr_meta_v1_object_meta *child,
                                         const char *api_version, const char *kind,
                                         const struct kcr_meta_v1_object_meta *owner,
                                         struct kcr_errinfo *ei);

#ifdef __cplusplus
}
#endif

#endif
