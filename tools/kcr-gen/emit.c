/* kcr-gen/emit.c - the C of the model: for one CRD file, a header (the
 * structs, enum constants, names of the kind and the functions) and a
 * source (the descriptions kcr/typed.h's engine walks, and the functions).
 * Output is a function of the input only: no date, no path but the
 * input's base name, so the same input gives the same bytes. Lines are
 * written as the project's clang-format (90 columns) leaves them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emit.h"
#include "kcr/version.h"
#include "kcr/typed.h"

#define COLS 90

/* Writing libkcr's own kcr/meta.h: exported with KCR_API. */
static bool lib;

/* kcr_buf errors are sticky: emit() checks them once at the end. */
#define out kcr_buf_printf

/* A C string literal of s: ASCII only, '?' escaped (no trigraphs). */
static char *lit(const char *s)
{
  struct kcr_buf b = KCR_BUF_INIT;
  kcr_buf_puts(&b, "\"");
  for(const unsigned char *p = (const unsigned char *)s; *p; p++) {
    if(*p == '"' || *p == '\\' || *p == '?')
      out(&b, "\\%c", *p);
    else if(*p < 0x20 || *p >= 0x7f)
      out(&b, "\\%03o", *p);
    else
      kcr_buf_append(&b, p, 1);
  }
  kcr_buf_puts(&b, "\"");
  if(kcr_buf_err(&b))
    xalloc((size_t)-1);
  return kcr_buf_take(&b);
}

/* A block comment of text at indent, its words wrapped at COLS ("*" + "/"
 * in the text written "*\/", which leaves a pattern readable). */
static void comment(struct kcr_buf *b, int indent, const char *text)
{
  char *safe = xalloc(2 * strlen(text) + 1), *q = safe;
  const char *p = safe;

  for(const char *t = text; *t; t++) {
    *q++ = *t;
    if(t[0] == '*' && t[1] == '/')
      *q++ = '\\';
  }
  *q = '\0';
  int col = indent + 2, start = 1;

  out(b, "%*s/*", indent, "");
  while(*p) {
    size_t w = strcspn(p, " ");
    if(!start && col + 1 + (int)w + 3 > COLS) {
      out(b, "\n%*s *", indent, "");
      col = indent + 2;
    }
    out(b, " %.*s", (int)w, p);
    col += 1 + (int)w;
    start = 0;
    p += w;
    while(*p == ' ')
      p++;
  }
  /* a last line that cannot hold the end: the end on a line of its own */
  out(b, col + 3 > COLS ? "\n%*s */\n" : " */\n", indent, "");
}

/* Packs args (the last followed by tail, the others by ',') greedily into
 * lines starting at column at (the first one at column first); returns
 * the number of lines, or 0 when an argument does not fit in COLS. With b,
 * writes them (the first line's text goes after what is on it). */
static int pack(struct kcr_buf *b, int first, int at, const char *const *args, size_t n,
                const char *tail)
{
  int col = first, lines = 1;

  for(size_t i = 0; i < n; i++) {
    char *a = xprintf("%s%s", args[i], i + 1 < n ? "," : tail);
    int w = (int)strlen(a);
    if(i && col + 1 + w > COLS) {
      if(b)
        out(b, "\n%*s%s", at, "", a);
      col = at + w;
      lines++;
    } else {
      if(b)
        out(b, "%s%s", i ? " " : "", a);
      col += (i ? 1 : 0) + w;
    }
    if(col > COLS && !b)
      return 0;
  }
  if(b)
    out(b, "\n");
  return lines;
}

/* head(args[0], ..., args[n - 1])tail at indent, laid out as clang-format
 * lays out a call, a declaration or an initialiser that does not fit on
 * one line: the arguments packed and continued under the first when they
 * all fit so (for a call or an initialiser's "{", only when that takes no
 * more lines than a break after the bracket); else, for a function's
 * declaration ("type name(" at column 0), the return type on a line of its
 * own and the arguments under the first, unless a break after the open
 * bracket and the arguments packed 4 columns in saves two lines or more
 * (clang-format's penalties: 100 for that break, 60 for the return type's,
 * about 30 a line) - and for the others the latter. */
static void call(struct kcr_buf *b, int indent, const char *head, const char *const *args,
                 size_t n, const char *tail)
{
  int at = indent + (int)strlen(head);
  const char *name = strchr(head, ' ');
  bool td = !strncmp(head, "typedef ", 8); /* aligned when it fits, never split */
  bool decl =
      !indent && name && !strchr(head, '=') && head[strlen(head) - 1] == '(' && !td;
  int own = 0, after;

  out(b, "%*s", indent, "");
  int aligned = pack(NULL, at, at, args, n, tail);
  after = pack(NULL, indent + 4, indent + 4, args, n, tail);
  /* but for a declaration, the fewer lines (aligned on a tie - but for
   * designated initialisers, which clang-format breaks after the brace;
   * after counts the lines below the bracket's) */
  bool desig = n && args[0][0] == '.' && head[strlen(head) - 1] == '{';
  if(aligned && (decl || td || !after || aligned <= after + 1 - desig)) {
    out(b, "%s", head);
    pack(b, at, at, args, n, tail);
    return;
  }
  if(decl) {
    int w = (int)strlen(name + 1);
    own = pack(NULL, w, w, args, n, tail);
    own = own ? own + 1 : 0;
  }
  if(own && (!after || own <= after + 2)) {
    out(b, "%.*s\n%s", (int)(name - head), head, name + 1);
    pack(b, (int)strlen(name + 1), (int)strlen(name + 1), args, n, tail);
    return;
  }
  out(b, "%s\n%*s", head, indent + 4, "");
  pack(b, indent + 4, indent + 4, args, n, tail);
}

/* `lhs = rhs;` at indent, broken after '=' when it does not fit, and rhs
 * (a call "f(a, b, c)") broken as call() breaks one when even that does
 * not fit. */
static void assign(struct kcr_buf *b, int indent, const char *lhs, const char *rhs)
{
  const char *open = strchr(rhs, '(');
  size_t n = 0;

  if(indent + (int)strlen(lhs) + 3 + (int)strlen(rhs) + 1 <= COLS) {
    out(b, "%*s%s = %s;\n", indent, "", lhs, rhs);
    return;
  }
  out(b, "%*s%s =\n", indent, "", lhs);
  if(indent + 4 + (int)strlen(rhs) + 1 <= COLS || !open) {
    out(b, "%*s%s;\n", indent + 4, "", rhs);
    return;
  }
  char *rest = xstrndup(open + 1, strlen(open + 1) - 1); /* without the ')' */
  const char *args[16];
  for(char *a = rest, *c; a && n < 16; a = c ? c + 2 : NULL) {
    if((c = strstr(a, ", ")))
      *c = '\0';
    args[n++] = a;
  }
  call(b, indent + 4, xstrndup(rhs, (size_t)(open - rhs) + 1), args, n, ");");
}

/* The C type and the description of the scalar kinds; NULL for the kinds
 * that have a generated type of their own. */
static const struct {
  const char *ctype, *desc;
} scalars[] = {
    [S_BOOL] = {"bool", "&kcr_type_bool"},
    [S_INT] = {"int64_t", "&kcr_type_int"},
    [S_NUM] = {"double", "&kcr_type_number"},
    [S_STR] = {"struct kcr_str", "&kcr_type_string"},
    [S_ENUM] = {"struct kcr_enum", NULL},
    [S_INTSTR] = {"struct kcr_intstr", "&kcr_type_intstr"},
    [S_RAW] = {"struct kcr_raw", "&kcr_type_raw"},
    [S_OBJ] = {NULL, NULL},
    [S_ARR] = {NULL, NULL},
    [S_MAP] = {NULL, NULL},
};

static const char *ctype(const struct schema *s, char *own, size_t n)
{
  if(scalars[s->kind].ctype)
    return scalars[s->kind].ctype;
  snprintf(own, n, "struct %s", s->cname);
  return own;
}

static const char *tdesc(const struct schema *s, char *own, size_t n)
{
  if(scalars[s->kind].desc)
    return scalars[s->kind].desc;
  snprintf(own, n, "&%s_type", s->cname);
  return own;
}

/* What a member's comment says: description, format, notes. */
static char *about(const struct prop *p)
{
  const struct schema *s = p->s;
  struct kcr_buf b = KCR_BUF_INIT;

  out(&b, "%s", p->desc ? p->desc : s->desc ? s->desc : p->json);
  if(p->required)
    out(&b, " [required]");
  if(p->nullable)
    out(&b, " [nullable: null_%s]", p->member);
  if(s->format)
    out(&b, " [%s]", s->format);
  if(s->kind == S_ENUM)
    out(&b, " [enum %.*s*]", (int)(strlen(s->unknown) - strlen("UNKNOWN")), s->unknown);
  if(s->kind == S_RAW && s->why)
    out(&b, " [JSON text: %s]", s->why);
  if(s->note)
    out(&b, " [%s]", s->note);
  if(kcr_buf_err(&b))
    xalloc((size_t)-1);
  return kcr_buf_take(&b);
}

/* ---- header ---- */

static void h_enum(struct kcr_buf *b, const struct schema *s)
{
  char *c = xprintf("%s: an enum (struct kcr_enum's v)", s->path);
  out(b, "\n");
  comment(b, 0, c);
  out(b, "enum %s {\n  /* a value the schema does not list */\n", s->cname);
  if(2 + strlen(s->unknown) + 5 > COLS)
    out(b, "  %s =\n      0,\n", s->unknown);
  else
    out(b, "  %s = 0,\n", s->unknown);
  for(size_t i = 0; i < s->nvalues; i++) {
    char *l = lit(s->values[i]);
    comment(b, 2, l);
    if(2 + strlen(s->consts[i]) + 3 + 2 + 1 > COLS)
      out(b, "  %s =\n      %zu,\n", s->consts[i], i + 1);
    else
      out(b, "  %s = %zu,\n", s->consts[i], i + 1);
    free(l);
  }
  out(b, "};\n");
}

/* A member declaration `type name;`, broken as clang-format breaks one
 * that does not fit: the name on a line of its own, and the struct's name
 * too when even `struct NAME` does not fit. */
static void member(struct kcr_buf *b, const char *type, const char *name)
{
  if(2 + strlen(type) + 1 + strlen(name) + 1 <= COLS)
    out(b, "  %s %s;\n", type, name);
  else if(2 + strlen(type) <= COLS || strncmp(type, "struct ", 7))
    out(b, "  %s\n      %s;\n", type, name);
  else
    out(b, "  struct\n      %s\n          %s;\n", type + 7, name);
}

/* `struct NAME {` */
static void open_struct(struct kcr_buf *b, const char *name)
{
  if(7 + strlen(name) + 2 <= COLS)
    out(b, "struct %s {\n", name);
  else
    out(b, "struct\n    %s {\n", name);
}

/* After the type of a definition: its exported description. */
static void h_def(struct kcr_buf *b, const struct schema *s)
{
  const char *head =
      lib ? "KCR_API extern const struct kcr_type" : "extern const struct kcr_type";
  if(!s->def)
    return;
  if(strlen(head) + 1 + strlen(s->cname) + 6 <= COLS)
    out(b, "%s %s_type;\n", head, s->cname);
  else
    out(b, "%s\n    %s_type;\n", head, s->cname);
}

static void h_types(struct kcr_buf *b, struct schema *s)
{
  char t[512];

  if(s->ext || s->written)
    return;
  s->written = true;
  switch(s->kind) {
  case S_ENUM:
    h_enum(b, s);
    h_def(b, s);
    return;
  case S_ARR:
  case S_MAP: {
    char *c = xprintf("%s: %s", s->path, s->kind == S_ARR ? "an array" : "a map");
    h_types(b, s->elem);
    out(b, "\n");
    comment(b, 0, c);
    open_struct(b, s->cname);
    if(s->kind == S_MAP)
      out(b, "  struct kcr_str *k;\n");
    member(b, ctype(s->elem, t, sizeof(t)), "*v");
    if(s->elem_nullable)
      out(b, "  bool *null; /* null[i]: item i is JSON null */\n");
    out(b, "  size_t n;\n};\n");
    h_def(b, s);
    return;
  }
  case S_OBJ: break;
  default: return;
  }
  for(size_t i = 0; i < s->nprops; i++)
    h_types(b, s->props[i].s);
  out(b, "\n");
  comment(b, 0,
          xprintf("%s%s%s", s->path[0] ? s->path : "the object", s->desc ? ": " : "",
                  s->desc ? s->desc : ""));
  open_struct(b, s->cname);
  for(size_t i = 0; i < s->nprops; i++) {
    const struct prop *p = &s->props[i];
    char *a = about(p);
    comment(b, 2, a);
    free(a);
    member(b, "bool", xprintf("has_%s", p->member));
    if(p->nullable)
      member(b, "bool", xprintf("null_%s", p->member));
    member(b, ctype(p->s, t, sizeof(t)), p->member);
  }
  out(b, "};\n");
  h_def(b, s);
}

static char *upper(const char *s)
{
  char *u = xstrdup(s);
  for(char *p = u; *p; p++)
    if(*p >= 'a' && *p <= 'z')
      *p = (char)(*p - 'a' + 'A');
  return u;
}

/* Consecutive macros, their values aligned as clang-format aligns them. */
static void macros(struct kcr_buf *b, const char *const *names, const char *const *values,
                   size_t n)
{
  size_t w = 0;
  for(size_t i = 0; i < n; i++)
    if(strlen(names[i]) > w)
      w = strlen(names[i]);
  for(size_t i = 0; i < n; i++)
    out(b, "#define %-*s %s\n", (int)w, names[i], values[i]);
}

/* The functions every kind gets, in the header and the source alike: the
 * parameters ("%s" in one is the kind's prefix, "%S" it in capitals), the
 * contract the header
 * states, and for one that forwards, the library function and its
 * arguments; from_obj and init have bodies of their own. */
static const struct kfn {
  const char *ret, *name, *doc, *fwd;
  const char *params[11], *args[11]; /* NULL-terminated */
} kfns[] = {
    {"kcr_err",
     "decode",
     "Decodes an object's JSON text into *out (kcr_typed_decode: flags 0 for a view "
     "borrowing from the text, KCR_TYPED_COPY for a copy; arrays, maps and unescaped "
     "strings in arena a). Errors: those of kcr_typed_decode.",
     "kcr_typed_decode",
     {"const char *json", "size_t len", "unsigned flags", "struct kcr_arena *a",
      "struct %s *out", "struct kcr_errinfo *ei"},
     {"&%s_type", "json", "len", "flags", "a", "out", "ei"}},
    {"kcr_err",
     "from_obj",
     "The decoding of a cached object's text (kcr_obj_json, checked when it was "
     "stored): a view borrows from o, so keep the reference while *out is in use.",
     NULL,
     {"const kcr_obj *o", "unsigned flags", "struct kcr_arena *a", "struct %s *out",
      "struct kcr_errinfo *ei"},
     {NULL}},
    {"kcr_err",
     "encode",
     "Appends the JSON text of *in to out: the members that are set "
     "(kcr_typed_encode). Errors: those of kcr_typed_encode.",
     "kcr_typed_encode",
     {"const struct %s *in", "struct kcr_buf *out", "struct kcr_errinfo *ei"},
     {"&%s_type", "in", "out", "ei"}},
    {"void",
     "init",
     "Empties *x and sets its apiVersion and kind (borrowed constants): the start of "
     "an object to write.",
     NULL,
     {"struct %s *x"},
     {NULL}},
    {"kcr_err",
     "get",
     "A cached read (kcr_manager_get_typed): object ns/name from the manager's "
     "informer of the kind's resource, decoded as flags say - 0 a view borrowing from "
     "*obj (kcr_obj_unref it after the last use of *out), KCR_TYPED_COPY a copy in "
     "arena a (obj may be NULL). Errors: those of kcr_manager_get_typed "
     "(KCR_ENOTFOUND: not in the cache).",
     "kcr_manager_get_typed",
     {"kcr_manager *m", "const char *ns", "const char *name", "unsigned flags",
      "struct kcr_arena *a", "struct %s *out", "kcr_obj **obj", "struct kcr_errinfo *ei"},
     {"m", "&%s_type", "&%s_gvr", "ns", "name", "flags", "a", "out", "obj", "ei"}},
    {"kcr_err",
     "list",
     "A cached list (kcr_manager_list_typed): the objects of the manager's informers of "
     "the kind's resource in namespace ns (NULL: every namespace) - with index, only "
     "those the store's index maps to value (KCR_INDEX_LABEL_PREFIX \"app\": labelled "
     "app=value) - as *n structs in arena a, decoded as flags say: 0 views borrowing "
     "from *objs (kcr_objs_unref(*objs, *n) after the last use of *items), "
     "KCR_TYPED_COPY copies (objs may be NULL). Errors: those of "
     "kcr_manager_list_typed (KCR_EINVAL: no informer of the resource, no such index).",
     NULL,
     {"kcr_manager *m", "const char *ns", "const char *index", "struct kcr_str value",
      "unsigned flags", "struct kcr_arena *a", "struct %s **items", "size_t *n",
      "kcr_obj ***objs", "struct kcr_errinfo *ei"},
     {NULL}},
    {"kcr_err",
     "watches",
     "An event source of controller c (kcr_controller_watches_typed): reconcile the keys "
     "fn emits for each object of inf, a view of the kind valid during the call (both "
     "objects of an update). An object that does not decode as the kind is logged and "
     "mapped to nothing. Errors: those of kcr_controller_watches_typed.",
     "kcr_controller_watches_typed",
     {"kcr_controller *c", "kcr_informer *inf", "%s_map_fn fn", "void *ud",
      "const struct kcr_source_opts *opts"},
     {"c", "inf", "&%s_type", "%s_call_map", "(kcr_fnptr)fn", "ud", "opts"}},
    {"kcr_err",
     "add_handlers",
     "Adds h's handlers to inf, before it starts (kcr_informer_add_typed_handlers; h is "
     "copied): each gets the objects as views of the kind, valid during the call. An "
     "object that does not decode as the kind is logged and its handler not called. "
     "Errors: those of kcr_informer_add_typed_handlers (KCR_EINVAL: started, 16 sets "
     "already, no h).",
     NULL,
     {"kcr_informer *inf", "const struct %s_handlers *h"},
     {NULL}},
    {"kcr_err",
     "apply",
     "Server-side apply of *in (kcr_typed_apply): the members that are set, to the "
     "object its metadata names, as opts' field manager; with result (not NULL), the "
     "applied object as the apiserver answers it, a copy in arena a. Errors: those of "
     "kcr_typed_apply.",
     "kcr_typed_apply",
     {"kcr_client *c", "const struct %s *in", "const struct kcr_apply_opts *opts",
      "struct kcr_arena *a", "struct %s *result", "struct kcr_errinfo *ei"},
     {"c", "&%s_type", "&%s_gvr", "in", "opts", "a", "result", "ei"}},
    {"kcr_err",
     "validate",
     "Checks *x against what the schema asks (kcr_typed_validate: required members - "
     "unless flags has KCR_VALIDATE_PARTIAL, for an apply configuration -, bounds, "
     "lengths, counts, enums, unique list items and keys, formats; not patterns or "
     "CEL rules). Errors: KCR_EINVAL with the JSON Pointer of the first value that "
     "fails and why, KCR_ENOMEM.",
     "kcr_typed_validate",
     {"const struct %s *x", "unsigned flags", "struct kcr_errinfo *ei"},
     {"&%s_type", "x", "flags", "ei"}},
    {"kcr_err",
     "set_controller_of",
     "Makes *owner the controller of the object whose metadata is child "
     "(kcr_typed_set_controller: an ownerReference with controller and "
     "blockOwnerDeletion, the name and uid copied into arena a; idempotent). Errors: "
     "those of kcr_typed_set_controller (KCR_EINVAL: an owner without name or uid, "
     "another namespace, another controller).",
     "kcr_typed_set_controller",
     {"struct kcr_arena *a", "struct kcr_meta_v1_object_meta *child",
      "const struct %s *owner", "struct kcr_errinfo *ei"},
     {"a", "child", "%S_API_VERSION", "%S_KIND", "kcr_typed_meta(&%s_type, owner)",
      "ei"}},
};

/* *out = the NULL-terminated list l with each "%s" made the prefix p, and
 * a leading "%S" p in capitals; returns its length. */
static size_t kfn_list(const char *const *l, const char *p, const char ***out)
{
  size_t n = 0;
  while(l[n])
    n++;
  *out = xalloc((n + 1) * sizeof(**out));
  for(size_t i = 0; i < n; i++)
    (*out)[i] = strstr(l[i], "%S")   ? xprintf("%s%s", upper(p), l[i] + 2)
                : strstr(l[i], "%s") ? xprintf(l[i], p)
                                     : l[i];
  (*out)[n] = NULL;
  return n;
}

static void h_kind(struct kcr_buf *b, const struct kind *k)
{
  char *P = upper(k->prefix);
  const char *p = k->prefix;
  const char *names[] = {xprintf("%s_GROUP", P), xprintf("%s_VERSION", P),
                         xprintf("%s_API_VERSION", P), xprintf("%s_KIND", P),
                         xprintf("%s_RESOURCE", P)};
  char *vals[] = {lit(k->group), lit(k->version), NULL, lit(k->kind), lit(k->plural)};
  char *av = *k->group ? xprintf("%s/%s", k->group, k->version) : k->version;

  vals[2] = lit(av);
  out(b, "\n");
  comment(b, 0,
          xprintf("---- %s, Kind=%s (resource %s, %s) ----", av, k->kind, k->plural,
                  k->namespaced ? "namespaced" : "cluster-scoped"));
  out(b, "\n");
  macros(b, names, (const char *const *)vals, 5);
  for(size_t i = 0; i < 5; i++)
    free(vals[i]);
  out(b,
      "\n/* The resource, for kcr_ref, informers and the manager's cached reads. */\n");
  out(b, "extern const struct kcr_gvr %s_gvr;\n", p);
  h_types(b, k->root);
  if(!k->root->def) {
    out(b, "\n/* The description kcr_typed_decode and kcr_typed_encode walk. */\n");
    out(b, "extern const struct kcr_type %s_type;\n", p);
  }
  if(k->nkeep) {
    out(b, "\n");
    comment(
        b, 0,
        "The paths this type was cut to (kcr-gen --path, PATHS of kcr_generate_types), "
        "NULL-terminated: the cache's keep list (kcr_informer_opts.keep), so that the "
        "cache holds what the type has.");
    out(b, "extern const char *const %s_keep[];\n", p);
  }
  out(b, "\n");
  comment(
      b, 0,
      xprintf("A map function of %s objects (%s_watches): emit(ns, name, ctx) for each "
              "object to reconcile; obj is a view, valid during the call, and a an "
              "arena for the call's scratch memory, emptied after it.",
              k->kind, p));
  const char *mapp[] = {xprintf("const struct %s *obj", p), "struct kcr_arena *a",
                        "kcr_map_emit emit", "void *ctx", "void *ud"};
  call(b, 0, xprintf("typedef void (*%s_map_fn)(", p), mapp, 5, ");");
  comment(
      b, 0,
      xprintf("Informer handlers of %s objects (%s_add_handlers); any may be NULL. The "
              "objects are views, valid during the call; on_update gets one view as both "
              "for a resync, on_delete the last known object.",
              k->kind, p));
  const char *objp[] = {xprintf("const struct %s *obj", p), "void *ud"};
  call(b, 0, xprintf("typedef void (*%s_obj_fn)(", p), objp, 2, ");");
  const char *pairp[] = {xprintf("const struct %s *old", p),
                         xprintf("const struct %s *cur", p), "void *ud"};
  call(b, 0, xprintf("typedef void (*%s_pair_fn)(", p), pairp, 3, ");");
  out(b, "struct %s_handlers {\n", p);
  out(b, "  %s_obj_fn on_add;\n", p);
  out(b, "  %s_pair_fn on_update;\n", p);
  out(b, "  %s_obj_fn on_delete;\n", p);
  out(b, "  void *ud;\n};\n\n");
  for(size_t i = 0; i < sizeof(kfns) / sizeof(kfns[0]); i++) {
    const char **params;
    size_t np = kfn_list(kfns[i].params, p, &params);
    comment(b, 0, kfns[i].doc);
    call(b, 0, xprintf("%s %s_%s(", kfns[i].ret, p, kfns[i].name), params, np, ");");
  }
}

/* ---- source ---- */

/* The source names its descriptions by number (s<id> the struct's typedef,
 * f<id> its members, t<id> its description, v<id> an enum's values), so
 * that no line of it is longer for a long path. */
static int next_id, next_check;

/* Whether s, or an element or value of it, has something for
 * kcr_typed_validate to check. */
static bool wants_check(const struct schema *s)
{
  return s->checks || ((s->kind == S_ARR || s->kind == S_MAP) && wants_check(s->elem));
}

/* The shortest text of d that reads back as d. */
static char *shortest(double d)
{
  for(int prec = 15;; prec++) {
    char *t = xprintf("%.*g", prec, d);
    if(strtod(t, NULL) == d || prec >= 17)
      return t; /* xprintf's: kcr-gen's heap, freed at exit */
  }
}

/* `static const struct kcr_tcheck c<N> = {...};` for s (and the checks of
 * its items before it, and its list-map keys k<N>), a comment above saying
 * what it checks; returns N. */
static int c_check(struct kcr_buf *b, const struct schema *s, bool required)
{
  static const struct {
    unsigned flag;
    const char *what;
  } names[] = {{KCR_TC_REQUIRED, "required"},
               {KCR_TC_MIN, "minimum"},
               {KCR_TC_MAX, "maximum"},
               {KCR_TC_EXCL_MIN, "exclusive minimum"},
               {KCR_TC_EXCL_MAX, "exclusive maximum"},
               {KCR_TC_MIN_N, "at least"},
               {KCR_TC_MAX_N, "at most"},
               {KCR_TC_ENUM, "enum"},
               {KCR_TC_SET, "list-type set"},
               {KCR_TC_MAP, "list-type map"},
               {KCR_TC_DATE_TIME, "date-time"},
               {KCR_TC_DATE, "date"},
               {KCR_TC_BYTE, "byte"},
               {KCR_TC_DEFAULT, "defaulted"}};
  unsigned flags = s->checks | (required ? KCR_TC_REQUIRED : 0);
  int items = 0, id;
  struct kcr_buf what = KCR_BUF_INIT;

  if((s->kind == S_ARR || s->kind == S_MAP) && wants_check(s->elem))
    items = c_check(b, s->elem, false);
  id = ++next_check;
  out(b, "\n");
  if(s->nkeys) {
    const char **keys = xalloc(s->nkeys * sizeof(*keys));
    for(size_t i = 0; i < s->nkeys; i++)
      keys[i] = lit(s->keys[i]);
    call(b, 0, xprintf("static const char *const k%d[] = {", id), keys, s->nkeys, "};");
    for(size_t i = 0; i < s->nkeys; i++)
      free((char *)keys[i]);
  }
  out(&what, "%s:", s->path);
  for(size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
    if(flags & names[i].flag) {
      out(&what, " %s", names[i].what);
      if(names[i].flag == KCR_TC_MIN)
        out(&what, " %s", shortest(s->min));
      if(names[i].flag == KCR_TC_MAX)
        out(&what, " %s", shortest(s->max));
      if(names[i].flag == KCR_TC_MIN_N)
        out(&what, " %lld", s->min_n);
      if(names[i].flag == KCR_TC_MAX_N)
        out(&what, " %lld", s->max_n);
      out(&what, ",");
    }
  if(items)
    out(&what, " items c%d,", items);
  what.ptr[--what.len] = '\0'; /* the last comma */
  comment(b, 0, kcr_buf_str(&what));
  kcr_buf_cleanup(&what);
  const char *args[8];
  size_t na = 0;
  args[na++] = xprintf(".flags = 0x%xu", flags);
  if(flags & KCR_TC_MIN)
    args[na++] = xprintf(".min = %s", shortest(s->min));
  if(flags & KCR_TC_MAX)
    args[na++] = xprintf(".max = %s", shortest(s->max));
  if(flags & KCR_TC_MIN_N)
    args[na++] = xprintf(".min_n = %lld", s->min_n);
  if(flags & KCR_TC_MAX_N)
    args[na++] = xprintf(".max_n = %lld", s->max_n);
  if(s->nkeys) {
    args[na++] = xprintf(".keys = k%d", id);
    args[na++] = xprintf(".nkeys = %zu", s->nkeys);
  }
  if(items)
    args[na++] = xprintf(".items = &c%d", items);
  call(b, 0, xprintf("static const struct kcr_tcheck c%d = {", id), args, na, "};");
  return id;
}

static const char *c_desc(const struct schema *s, char *own, size_t n)
{
  if(s->ext || s->def) {
    snprintf(own, n, "&%s_type", s->cname);
    return own;
  }
  if(s->kind == S_OBJ || s->kind == S_ARR || s->kind == S_MAP || s->kind == S_ENUM) {
    snprintf(own, n, "&t%d", s->id);
    return own;
  }
  return tdesc(s, own, n);
}

/* `typedef struct NAME s<id>;`, broken as clang-format breaks it. */
static void c_typedef(struct kcr_buf *b, const struct schema *s)
{
  char id[16];
  snprintf(id, sizeof(id), "s%d", s->id);
  if(15 + strlen(s->cname) + 1 + strlen(id) + 1 <= COLS)
    out(b, "typedef struct %s %s;\n", s->cname, id);
  else if(15 + strlen(s->cname) <= COLS)
    out(b, "typedef struct %s\n    %s;\n", s->cname, id);
  else if(4 + strlen(s->cname) + 1 + strlen(id) + 1 <= COLS)
    out(b, "typedef struct\n    %s %s;\n", s->cname, id);
  else
    out(b, "typedef struct\n    %s\n        %s;\n", s->cname, id);
}

/* The description of s: t<id>, or exported as <root>_type. init's "%s"
 * is the name given for messages. */
static void c_decl(struct kcr_buf *b, const struct schema *s, const char *root,
                   const char *init)
{
  if(root)
    assign(b, 0, xprintf("const struct kcr_type %s_type", root),
           xprintf(init, xprintf("\"%s\"", root)));
  else
    assign(b, 0, xprintf("static const struct kcr_type t%d", s->id),
           xprintf(init, "NULL"));
}

static void c_types(struct kcr_buf *b, struct schema *s, const char *root)
{
  char t[512];

  if(s->ext || s->id)
    return;
  if(s->def)
    root = s->cname;
  switch(s->kind) {
  case S_ENUM: {
    s->id = ++next_id;
    /* a comment above each value keeps them one per line */
    out(b, "\nstatic const char *const v%d[] = {\n    NULL,\n", s->id);
    for(size_t i = 0; i < s->nvalues; i++) {
      char *l = lit(s->values[i]);
      comment(b, 4, s->consts[i]);
      out(b, "    %s,\n", l);
      free(l);
    }
    out(b, "};\n");
    c_decl(b, s, root, xprintf("KCR_TENUM(%%s, v%d)", s->id));
    return;
  }
  case S_ARR:
  case S_MAP:
    c_types(b, s->elem, NULL);
    s->id = ++next_id;
    out(b, "\n");
    c_typedef(b, s);
    c_decl(b, s, root,
           xprintf("%s%s(%%s, s%d, %s)", s->kind == S_ARR ? "KCR_TARRAY" : "KCR_TMAP",
                   s->elem_nullable ? "_NULLABLE" : "", s->id,
                   c_desc(s->elem, t, sizeof(t))));
    return;
  case S_OBJ: break;
  default: return;
  }
  for(size_t i = 0; i < s->nprops; i++)
    c_types(b, s->props[i].s, NULL);
  int *checks = xalloc((s->nprops + 1) * sizeof(*checks));
  for(size_t i = 0; i < s->nprops; i++)
    checks[i] = s->checked && (wants_check(s->props[i].s) || s->props[i].required)
                    ? c_check(b, s->props[i].s, s->props[i].required)
                    : 0;
  s->id = ++next_id;
  out(b, "\n");
  c_typedef(b, s);
  out(b, "static const struct kcr_tfield f%d[] = {\n", s->id);
  for(size_t i = 0; i < s->nprops; i++) {
    const struct prop *p = &s->props[i];
    char sid[16];
    snprintf(sid, sizeof(sid), "s%d", s->id);
    const char *args[] = {sid, lit(p->json), p->member, c_desc(p->s, t, sizeof(t)),
                          checks[i] ? xprintf("&c%d", checks[i]) : NULL};
    const char *m =
        p->nullable ? (checks[i] ? "KCR_TFIELD_NULLABLE_CHECK(" : "KCR_TFIELD_NULLABLE(")
                    : (checks[i] ? "KCR_TFIELD_CHECK(" : "KCR_TFIELD(");
    comment(b, 4, p->s->path); /* also keeps the entries one per line */
    call(b, 4, m, args, checks[i] ? 5 : 4, "),");
    free((char *)args[1]);
  }
  out(b, "};\n");
  c_decl(b, s, root, xprintf("KCR_TOBJECT(%%s, s%d, f%d)", s->id, s->id));
}

static void c_kind(struct kcr_buf *b, const struct kind *k)
{
  const char *p = k->prefix;
  const struct prop *api = NULL, *kind = NULL;

  for(size_t i = 0; i < k->root->nprops; i++) {
    if(!strcmp(k->root->props[i].json, "apiVersion") &&
       k->root->props[i].s->kind == S_STR)
      api = &k->root->props[i];
    if(!strcmp(k->root->props[i].json, "kind") && k->root->props[i].s->kind == S_STR)
      kind = &k->root->props[i];
  }
  char *P = upper(p);
  out(b, "\n");
  comment(b, 0, xprintf("---- %s/%s, Kind=%s ----", k->group, k->version, k->kind));
  out(b, "\n");
  const char *gvr[] = {xprintf("%s_GROUP", P), xprintf("%s_VERSION", P),
                       xprintf("%s_RESOURCE", P), k->namespaced ? "true" : "false"};
  call(b, 0, xprintf("const struct kcr_gvr %s_gvr = {", p), gvr, 4, "};");
  if(k->nkeep) {
    const char **keep = xalloc((k->nkeep + 1) * sizeof(*keep));
    for(size_t i = 0; i < k->nkeep; i++)
      keep[i] = lit(k->keep[i]);
    keep[k->nkeep] = "NULL";
    call(b, 0, xprintf("const char *const %s_keep[] = {", p), keep, k->nkeep + 1, "};");
    for(size_t i = 0; i < k->nkeep; i++)
      free((char *)keep[i]);
  }
  c_types(b, k->root, p);

  /* the typed callbacks, called back as their own types (kcr_fnptr) */
  out(b, "\n");
  const char *cmap[] = {"kcr_fnptr fn",      "const void *obj", "struct kcr_arena *a",
                        "kcr_map_emit emit", "void *ctx",       "void *ud"};
  call(b, 0, xprintf("static void %s_call_map(", p), cmap, 6, ")");
  const char *amap[] = {xprintf("(const struct %s *)obj", p), "a", "emit", "ctx", "ud"};
  out(b, "{\n");
  call(b, 2, xprintf("((%s_map_fn)fn)(", p), amap, 5, ");");
  out(b, "}\n\n");
  const char *cobj[] = {"kcr_fnptr fn", "const void *obj", "void *ud"};
  call(b, 0, xprintf("static void %s_call_obj(", p), cobj, 3, ")");
  const char *aobj[] = {xprintf("(const struct %s *)obj", p), "ud"};
  out(b, "{\n");
  call(b, 2, xprintf("((%s_obj_fn)fn)(", p), aobj, 2, ");");
  out(b, "}\n\n");
  const char *cpair[] = {"kcr_fnptr fn", "const void *old", "const void *cur",
                         "void *ud"};
  call(b, 0, xprintf("static void %s_call_pair(", p), cpair, 4, ")");
  const char *apair[] = {xprintf("(const struct %s *)old", p),
                         xprintf("(const struct %s *)cur", p), "ud"};
  out(b, "{\n");
  call(b, 2, xprintf("((%s_pair_fn)fn)(", p), apair, 3, ");");
  out(b, "}\n\n");
  for(size_t i = 0; i < sizeof(kfns) / sizeof(kfns[0]); i++) {
    const char **params, **args;
    if(!kfns[i].fwd)
      continue; /* from_obj, list, add_handlers and init: below */
    size_t np = kfn_list(kfns[i].params, p, &params),
           na = kfn_list(kfns[i].args, p, &args);
    call(b, 0, xprintf("%s %s_%s(", kfns[i].ret, p, kfns[i].name), params, np, ")");
    out(b, "{\n");
    call(b, 2, xprintf("return %s(", kfns[i].fwd), args, na, ");");
    out(b, "}\n\n");
  }

  const char **obj = NULL;
  size_t nobj = 0;
  for(size_t i = 0; i < sizeof(kfns) / sizeof(kfns[0]); i++)
    if(!strcmp(kfns[i].name, "from_obj"))
      nobj = kfn_list(kfns[i].params, p, &obj);
  const char *objb[] = {xprintf("&%s_type", p),
                        "json",
                        "len",
                        "flags | KCR_TYPED_TRUSTED",
                        "a",
                        "out",
                        "ei"};
  const char *err[] = {"ei", "KCR_EINVAL", xprintf("\"%s_from_obj: no object\"", p)};
  call(b, 0, xprintf("kcr_err %s_from_obj(", p), obj, nobj, ")");
  out(b,
      "{\n  size_t len = 0;\n  const char *json = o ? kcr_obj_json(o, &len) : NULL;\n\n");
  out(b, "  if(!json)\n");
  call(b, 4, "return kcr_errinfo_set(", err, 3, ");");
  call(b, 2, "return kcr_typed_decode(", objb, 7, ");");
  out(b, "}\n\n");

  const char **lp = NULL;
  size_t nlp = 0;
  for(size_t i = 0; i < sizeof(kfns) / sizeof(kfns[0]); i++)
    if(!strcmp(kfns[i].name, "list"))
      nlp = kfn_list(kfns[i].params, p, &lp);
  call(b, 0, xprintf("kcr_err %s_list(", p), lp, nlp, ")");
  out(b, "{\n");
  assign(b, 2, "const struct kcr_type *t", xprintf("&%s_type", p));
  assign(b, 2, "const struct kcr_gvr *g", xprintf("&%s_gvr", p));
  out(b, "  void *v = NULL;\n  kcr_err rc = kcr_manager_list_typed(m, t, g, ns, index, "
         "value, flags, a,\n                                      items ? &v : NULL, n, "
         "objs, ei);\n\n");
  out(b, "  if(items)\n");
  assign(b, 4, "*items", xprintf("(struct %s *)v", p));
  out(b, "  return rc;\n}\n\n");

  call(b, 0, xprintf("kcr_err %s_add_handlers(", p),
       (const char *[]){"kcr_informer *inf", xprintf("const struct %s_handlers *h", p)},
       2, ")");
  out(b, "{\n  struct kcr_typed_handlers th;\n\n  if(!h)\n    return KCR_EINVAL;\n");
  out(b, "  memset(&th, 0, sizeof(th));\n  th.t = &%s_type;\n", p);
  out(b,
      "  th.on_add = (kcr_fnptr)h->on_add;\n  th.on_update = (kcr_fnptr)h->on_update;\n");
  out(b, "  th.on_delete = (kcr_fnptr)h->on_delete;\n");
  out(b, "  th.call_obj = %s_call_obj;\n  th.call_pair = %s_call_pair;\n", p, p);
  out(b, "  th.ud = h->ud;\n  return kcr_informer_add_typed_handlers(inf, &th);\n}\n\n");

  if(!api && !kind) { /* a short function: on one line, as clang-format puts it */
    out(b, "void %s_init(struct %s *x) { memset(x, 0, sizeof(*x)); }\n", p, p);
    return;
  }
  out(b, "void %s_init(struct %s *x)\n{\n  memset(x, 0, sizeof(*x));\n", p, p);
  if(api)
    out(b, "  x->has_%s = true;\n  x->%s = kcr_str_c(%s_API_VERSION);\n", api->member,
        api->member, P);
  if(kind)
    out(b, "  x->has_%s = true;\n  x->%s = kcr_str_c(%s_KIND);\n", kind->member,
        kind->member, P);
  out(b, "}\n");
}

void emit(const char *base, const char *input, const char *sha, const struct kind *kinds,
          size_t n, struct schema **types, size_t nt, struct kcr_buf *h,
          struct kcr_buf *c)
{
  char *G = upper(base);
  const char *top = "%s.%s - typed objects generated by kcr-gen %s from %s (SHA-256 %s). "
                    "DO NOT EDIT: regenerate it (docs/typed-objects.md).";

  lib = nt > 0;
  next_id = next_check = 0;
  for(char *q = G; *q; q++)
    if(!((*q >= 'A' && *q <= 'Z') || (*q >= '0' && *q <= '9')))
      *q = '_';
  comment(h, 0, xprintf(top, base, "h", lib ? "(libkcr)" : KCR_VERSION, input, sha));
  if(lib)
    out(h, "#ifndef KCR_%s_H\n#define KCR_%s_H\n\n", G, G);
  else
    out(h, "#ifndef KCR_GEN_%s_H\n#define KCR_GEN_%s_H\n\n", G, G);
  out(h, "#include <stdbool.h>\n#include <stddef.h>\n#include <stdint.h>\n\n");
  if(lib)
    out(h, "#include \"api.h\"\n#include \"typed.h\"\n\n");
  else
    out(h, "#include \"kcr/client.h\"\n#include \"kcr/manager.h\"\n#include "
           "\"kcr/meta.h\"\n#include \"kcr/path.h\"\n#include \"kcr/store.h\"\n#include "
           "\"kcr/typed.h\"\n\n");
  out(h, "#ifdef __cplusplus\nextern \"C\" {\n#endif\n");
  for(size_t i = 0; i < n; i++)
    h_kind(h, &kinds[i]);
  for(size_t i = 0; i < nt; i++)
    h_types(h, types[i]);
  if(!lib) {
    out(h, "\n");
    comment(h, 0, "The description of every kind above, in order, then NULL.");
    char *decl = xprintf("*const %s_types[];", base);
    /* clang-format breaks before the declarator that does not fit */
    out(h,
        29 + strlen(decl) <= COLS ? "extern const struct kcr_type %s\n"
                                  : "extern const struct kcr_type\n    %s\n",
        decl);
  }
  out(h, "\n#ifdef __cplusplus\n}\n#endif\n\n#endif\n");

  comment(c, 0, xprintf(top, base, "c", lib ? "(libkcr)" : KCR_VERSION, input, sha));
  if(lib)
    out(c, "#include <stddef.h>\n\n#include \"kcr/%s.h\"\n", base);
  else
    out(c, "#include <stddef.h>\n#include <string.h>\n\n#include \"%s.h\"\n", base);
  for(size_t i = 0; i < n; i++)
    c_kind(c, &kinds[i]);
  for(size_t i = 0; i < nt; i++)
    c_types(c, types[i], NULL);
  if(!lib) {
    out(c, "\nconst struct kcr_type *const %s_types[] = {\n", base);
    for(size_t i = 0; i < n; i++)
      out(c, "    &%s_type,\n", kinds[i].prefix);
    out(c, "    NULL,\n};\n");
  }
  if(kcr_buf_err(h) || kcr_buf_err(c))
    xalloc((size_t)-1);
}
