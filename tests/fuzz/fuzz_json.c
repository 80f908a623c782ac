/* libkcr's own JSON text scanners (core/json.c) on any bytes: the ones
 * the other targets reach only with the texts their callers make.
 *  - kcr_json_parse: a parsed tree prints to a text that parses to a tree
 *    printing the same (int64 literals of 10^15 and more kept as written);
 *  - kcr__json_drop_members / kcr__json_parse_dropping with the paths the
 *    client uses (each List item's "/metadata" - token "*" on "/items" -
 *    a watch event's "/object/metadata", member "managedFields"): for a
 *    text that parses,
 *    a text with something left out parses to the tree of the whole text
 *    with those members removed (a model of the rules in json-int.h), and
 *    parse_dropping gives that tree or, when nothing was left out, the
 *    tree of the text;
 *  - kcr__json_spans with the status writer's paths (metadata.uid,
 *    metadata.resourceVersion, status) and a few more: for an object that
 *    parses, a value is found exactly when kcr_json_at finds one, and its
 *    text parses to the same value; kcr__json_spans_trusted with the same
 *    paths (the status writer reads a write's answer by its structure):
 *    spans inside the text on any bytes, and the validator's spans where
 *    it accepted the text.
 * Of members of the same name the tree keeps the last (as Go), and so do
 * the spans; the drop follows the first (see model_drop).
 * The scanners follow RFC 8259 where cJSON is lax (white space is only
 * space, tab, CR and LF; member names are compared as written, escapes and
 * all, where the tree has them decoded; numbers; depth), so the checks
 * against a model are made for plain texts only (see plain()), and those
 * of kcr__json_spans once its validator accepted the object (it found
 * something; a want for the tree's first member makes that the rule). */
#include "fuzz.h"
#include "core/json-int.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
  fuzz_quiet();
  return 0;
}

/* Nesting depth of a tree. */
static int depth(const cJSON *t)
{
  int d = 0;
  for(const cJSON *c = t->child; c; c = c->next) {
    int k = depth(c);
    d = k > d ? k : d;
  }
  return d + 1;
}

/* Whether the model checks apply: a text that parsed, with no backslash,
 * no control byte but tab, CR and LF, no byte-order mark, no more than 64
 * levels deep (kcr__json_drop_members follows 128). */
static bool plain(const char *text, size_t len, const cJSON *tree)
{
  if(!tree || (len >= 3 && !memcmp(text, "\xEF\xBB\xBF", 3)))
    return false;
  for(size_t i = 0; i < len; i++) {
    unsigned char c = (unsigned char)text[i];
    if(c == '\\' || (c < 0x20 && c != '\t' && c != '\n' && c != '\r'))
      return false;
  }
  return depth(tree) <= 64;
}

/* Removes every member named name from o, when o is an object. */
static void drop_named(cJSON *o, const char *name)
{
  cJSON *m, *next;

  if(!cJSON_IsObject(o))
    return;
  for(m = o->child; m; m = next) {
    next = m->next;
    if(m->string && !strcmp(m->string, name))
      cJSON_Delete(cJSON_DetachItemViaPointer(o, m));
  }
}

/* The first member of o named name, when o is an object. */
static cJSON *first(cJSON *o, const char *name)
{
  cJSON *m;

  if(!cJSON_IsObject(o))
    return NULL;
  for(m = o->child; m; m = m->next)
    if(m->string && !strcmp(m->string, name))
      return m;
  return NULL;
}

/* How many members of o are named name. */
static int count_named(const cJSON *o, const char *name)
{
  int n = 0;

  if(cJSON_IsObject(o))
    for(const cJSON *m = o->child; m; m = m->next)
      n += m->string && !strcmp(m->string, name);
  return n;
}

/* Leaves out the members of metadata md (in the parsed tree) when the
 * scanner reaches it: when its name is written once in raw (the same
 * object as cJSON reads it, every member kept), since the scanner follows
 * the first member of a name and the tree keeps the last. */
static bool drop_in(cJSON *md, const cJSON *raw_parent)
{
  bool dropped;

  if(count_named(raw_parent, "metadata") != 1)
    return false;
  dropped = first(md, "managedFields") != NULL;
  drop_named(md, "managedFields");
  return dropped;
}

/* The model of kcr__json_drop_members for the client's two paths, applied
 * to root, the tree of kcr_json_parse (the last member of a name kept), with
 * raw the tree of cJSON_Parse (all kept): returns whether something was left
 * out of root; *in_text whether the scanner leaves something out of the text
 * (it follows the first member of a name; under a name written twice on the
 * path, that is not the member the tree keeps, whose members stay). */
static bool model_drop(cJSON *root, const cJSON *raw, bool list, bool *in_text)
{
  cJSON *items, *e;
  const cJSON *re;
  bool dropped = false;

  *in_text = false;
  if(!list) {
    const cJSON *ro = first((cJSON *)raw, "object");
    *in_text = first(first((cJSON *)ro, "metadata"), "managedFields") != NULL;
    if(count_named(raw, "object") != 1)
      return false;
    return drop_in(first(first(root, "object"), "metadata"), ro);
  }
  items = first(root, "items");
  re = first((cJSON *)raw, "items");
  if(cJSON_IsArray(re))
    for(const cJSON *r = re->child; r; r = r->next)
      *in_text |= first(first((cJSON *)r, "metadata"), "managedFields") != NULL;
  if(!cJSON_IsArray(items) || count_named(raw, "items") != 1)
    return false;
  re = re->child;
  cJSON_ArrayForEach(e, items)
  {
    if(!re)
      abort(); /* the same array, read twice */
    dropped |= drop_in(first(e, "metadata"), re);
    re = re->next;
  }
  return dropped;
}

static char *print(const cJSON *t)
{
  struct kcr_buf b = KCR_BUF_INIT;
  char *s;

  FUZZ_CHECK(kcr__json_print(t, &b) == KCR_OK);
  s = strdup(kcr_buf_str(&b));
  kcr_buf_cleanup(&b);
  if(!s)
    abort();
  return s;
}

static void check_round_trip(const cJSON *tree)
{
  char *t1 = print(tree), *t2;
  cJSON *again = NULL;
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;

  FUZZ_CHECK(kcr_json_parse(t1, strlen(t1), &again, &ei) == KCR_OK);
  t2 = print(again);
  FUZZ_CHECK(!strcmp(t1, t2));
  cJSON_Delete(again);
  free(t1);
  free(t2);
  kcr_errinfo_cleanup(&ei);
}

static void check_drop(const char *text, size_t len, const cJSON *tree, bool list,
                       bool strict)
{
  const char *path = list ? "/items/*/metadata" : "/object/metadata";
  struct kcr_buf out = KCR_BUF_INIT, scratch = KCR_BUF_INIT;
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  cJSON *model = NULL, *got = NULL, *via = NULL, *raw = NULL;
  bool in_text = false;
  kcr_err rc = kcr__json_drop_members(text, len, path, "managedFields", &out);

  FUZZ_CHECK(rc == KCR_OK || rc == KCR_ENOTFOUND);
  FUZZ_CHECK(rc == KCR_OK || out.len == 0);
  if(tree) {
    if(!(model = cJSON_Duplicate(tree, true)) ||
       !(raw = cJSON_ParseWithLengthOpts(text, len, NULL, 0)))
      abort();
    model_drop(model, raw, list, &in_text);
  }
  if(rc == KCR_OK && tree) {
    FUZZ_CHECK(kcr_json_parse(kcr_buf_str(&out), out.len, &got, &ei) == KCR_OK);
    if(strict) {
      FUZZ_CHECK(in_text);
      FUZZ_CHECK(fuzz_same_json(got, model));
    }
  }
  /* A plain text: whatever the model leaves out of the text, the scanner
   * does (the structure can always be followed). */
  if(strict && in_text)
    FUZZ_CHECK(rc == KCR_OK);
  kcr_errinfo_cleanup(&ei);
  rc = kcr__json_parse_dropping(text, len, path, "managedFields", &scratch, &via, &ei);
  FUZZ_CHECK((rc == KCR_OK) == (via != NULL));
  if(tree) {
    FUZZ_CHECK(rc == KCR_OK);
    if(strict)
      FUZZ_CHECK(fuzz_same_json(via, model));
  }
  cJSON_Delete(via);
  cJSON_Delete(got);
  cJSON_Delete(model);
  cJSON_Delete(raw);
  kcr_buf_cleanup(&scratch);
  kcr_buf_cleanup(&out);
  kcr_errinfo_cleanup(&ei);
}

static void check_spans(const char *text, size_t len, const cJSON *tree, bool strict)
{
  static const char *const paths[] = {
      "/metadata/uid", "/metadata/resourceVersion", "/status", "/metadata",
      "/kind",         "/status/conditions",        "/a/b/c"};
  enum { N = sizeof(paths) / sizeof(paths[0]) + 1 };
  struct kcr__json_want w[N];
  const char *path[N];
  struct kcr_buf first = KCR_BUF_INIT;
  size_t found = 0, i;

  for(i = 0; i + 1 < N; i++)
    path[i] = paths[i];
  /* the tree's first member, named by a pointer with its '~' and '/'
   * escaped: found whenever the validator accepts */
  path[N - 1] = cJSON_IsObject(tree) && tree->child && tree->child->string &&
                        !kcr_json_ptr_append(&first, tree->child->string)
                    ? kcr_buf_str(&first)
                    : "";
  for(i = 0; i < N; i++)
    w[i] = (struct kcr__json_want){path[i], NULL, 0};
  i = kcr__json_spans(text, len, w, N);
  for(size_t k = 0; k < N; k++) {
    found += w[k].at != NULL;
    FUZZ_CHECK(!w[k].at || (w[k].at >= text && w[k].at + w[k].n <= text + len));
  }
  FUZZ_CHECK(i == found);
  FUZZ_CHECK(!w[N - 1].at || *path[N - 1]);
  /* The same wants by the structure only (the status writer reads a
   * write's answer so): inside the text on any bytes; where the validator
   * accepted the text, the same spans (unless the structure could not be
   * followed: then none). */
  {
    struct kcr__json_want t[N];
    size_t ti;
    for(size_t k = 0; k < N; k++)
      t[k] = (struct kcr__json_want){path[k], NULL, 0};
    ti = kcr__json_spans_trusted(text, len, t, N);
    for(size_t k = 0; k < N; k++) {
      FUZZ_CHECK(!t[k].at || (t[k].at >= text && t[k].at + t[k].n <= text + len));
      if(ti && found)
        FUZZ_CHECK(t[k].at == w[k].at && t[k].n == w[k].n);
    }
  }
  if(!found || !cJSON_IsObject(tree))
    goto out;
  for(i = 0; i < N; i++) {
    const cJSON *v = *path[i] ? kcr_json_at(tree, path[i]) : NULL;
    cJSON *span = NULL;
    struct kcr_errinfo ei = KCR_ERRINFO_INIT;

    if(!strict) { /* names as written: only the values found are compared */
      if(!w[i].at)
        continue;
    } else {
      FUZZ_CHECK((w[i].at != NULL) == (v != NULL));
      if(!v)
        continue;
    }
    FUZZ_CHECK(kcr_json_parse(w[i].at, w[i].n, &span, &ei) == KCR_OK);
    if(strict)
      FUZZ_CHECK(fuzz_same_json(span, v));
    cJSON_Delete(span);
    kcr_errinfo_cleanup(&ei);
  }
  /* a plain object the validator accepts: the first member is found */
  if(strict && *path[N - 1])
    FUZZ_CHECK(w[N - 1].at != NULL);
out:
  kcr_buf_cleanup(&first);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  char *text = fuzz_str(data, size);
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  cJSON *tree = NULL;
  kcr_err rc = kcr_json_parse(text, size, &tree, &ei);
  bool strict = plain(text, size, tree);

  FUZZ_CHECK((rc == KCR_OK) == (tree != NULL));
  FUZZ_CHECK(rc == KCR_OK || rc == KCR_EPARSE);
  if(tree)
    check_round_trip(tree);
  check_drop(text, size, tree, true, strict);
  check_drop(text, size, tree, false, strict);
  check_spans(text, size, tree, strict);
  cJSON_Delete(tree);
  kcr_errinfo_cleanup(&ei);
  free(text);
  return 0;
}
