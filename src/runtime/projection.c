/* DESIGN: cache projection - print only the members of an object that an
 * informer was told to keep, in one pass, without copying the tree.
 *
 * The keep-list is compiled once (kcr_informer_new) into a trie of member
 * names: node 0 is the object, each node a member; a "whole" node keeps its
 * member with everything below it, an inner node only what its children
 * keep. Paths are checked first (kcr__proj_bad_path), so the trie is built
 * from valid paths only.
 *
 * Printing walks the source tree and the trie together and links a
 * skeleton: for each kept member a shallow copy of its cJSON node (same
 * type, key, value and, for a whole member, the same child list - the
 * subtree is shared, not copied), for each inner member a copy whose child
 * list is its own skeleton. cJSON prints the skeleton root as it would any
 * tree; the skeleton is never passed to cJSON_Delete, since it owns nothing.
 * Each trie node matches at most one member (the first of its name), so the
 * skeleton needs at most one node per trie node: an array indexed like the
 * trie, on the stack for small lists. The source tree is only read.
 *
 * From text (a watch event's object, kcr__proj_print_text) the same walk
 * runs over the members of the compact text, copying each kept member as
 * written and opening an inner one's braces only to take them back when
 * nothing below it was kept; seen[] (indexed like the trie) finds a kept
 * name written twice, which sends the object the tree way (kcr_json_parse
 * keeps the last member of a name, as Go does: the one the skeleton takes).
 *
 * Paths are JSON Pointers ("/status/conditions"); the trie holds their
 * names unescaped ("~1" is '/'), compared with members' names as bytes.
 *
 * Invariants: node[0] is the object itself and never whole (every path
 * has a member name); a node's children have distinct names; children and
 * siblings are indexes into node[], -1 for none; names point into `text`
 * (no NUL between them: each has its length). */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "core/assert-int.h"
#include "core/json-int.h"
#include "kcr/store.h"
#include "runtime/projection-int.h"

/* The metadata the runtime needs (the store's header: kcr_obj_ns ...
 * kcr_obj_controller) and what names the object (kcr_owner_set_controller
 * on an owner read from a cache). Keep in step with kcr/informer.h. */
static const char *const always[] = {"/apiVersion",
                                     "/kind",
                                     "/metadata/name",
                                     "/metadata/namespace",
                                     "/metadata/uid",
                                     "/metadata/resourceVersion",
                                     "/metadata/generation",
                                     "/metadata/deletionTimestamp",
                                     "/metadata/ownerReferences"};

#define NALWAYS     (sizeof(always) / sizeof(always[0]))
#define STACK_NODES 64

struct pnode {
  const char *name; /* the member's name, unescaped, in text */
  size_t len;
  bool whole;      /* keep the member and everything below it */
  int child, next; /* first child, next sibling; -1: none */
};

struct kcr__proj {
  char *text; /* the paths' names, unescaped, one after another */
  int n;      /* nodes used */
  int cap;    /* nodes allocated (counted from the paths) */
  struct pnode node[];
};

const char *kcr__proj_bad_path(const char *path)
{
  const char *why = kcr__ptr_bad(path);

  if(why)
    return why;
  if(!*path)
    return "is empty (the object itself: a keep list names members)";
  return NULL;
}

static size_t segments(const char *path)
{
  size_t n = 0;
  for(; *path; path++)
    n += *path == '/';
  return n;
}

/* The child of node t named name[len], or -1. */
static int find_child(const struct kcr__proj *p, int t, const char *name, size_t len)
{
  KCR_ASSERT(t >= 0 && t < p->n);
  for(int c = p->node[t].child; c >= 0; c = p->node[c].next) {
    KCR_ASSERT(c > t && c < p->n); /* children are added after their parent */
    if(p->node[c].len == len && !memcmp(p->node[c].name, name, len))
      return c;
  }
  return -1;
}

/* Adds the valid pointer path to the trie, its names unescaped into *cur;
 * room for its nodes and names was counted. */
static void add_path(struct kcr__proj *p, char **cur, const char *path)
{
  int t = 0;

  while(!p->node[t].whole) {
    const char *tok = path + 1;
    size_t tn = kcr__ptr_toklen(tok), len = kcr__ptr_tok_decode(tok, tn, *cur);
    int c = find_child(p, t, *cur, len);
    if(c < 0) { /* append, so siblings stay in the order given */
      int *link = &p->node[t].child;
      while(*link >= 0)
        link = &p->node[*link].next;
      KCR_ASSERT(p->n < p->cap); /* room was counted */
      c = *link = p->n++;
      p->node[c] = (struct pnode){*cur, len, false, -1, -1};
      *cur += len;
    }
    t = c;
    path = tok + tn;
    if(!*path) {
      p->node[t].whole = true; /* what was kept below it is now moot */
      return;
    }
  }
}

kcr_err kcr__proj_new(const char *const *keep, unsigned flags, struct kcr__proj **out)
{
  static const char mf[] = "/metadata/managedFields";
  bool with_mf = flags & KCR_OBJ_KEEP_MANAGED_FIELDS;
  size_t textlen = with_mf ? sizeof(mf) : 1, nodes = 1 + (with_mf ? segments(mf) : 0);
  struct kcr__proj *p;
  char *cur;

  if(!out)
    return KCR_EINVAL;
  *out = NULL;
  if(!keep || (flags & ~KCR_OBJ_KEEP_MANAGED_FIELDS))
    return KCR_EINVAL;
  for(size_t i = 0; i < NALWAYS; i++) {
    textlen += strlen(always[i]);
    nodes += segments(always[i]);
  }
  for(size_t i = 0; keep[i]; i++) {
    if(kcr__proj_bad_path(keep[i]))
      return KCR_EINVAL;
    textlen += strlen(keep[i]);
    nodes += segments(keep[i]);
  }
  if(nodes > INT_MAX) /* trie indexes are ints */
    return KCR_ENOMEM;
  p = malloc(sizeof(*p) + (size_t)nodes * sizeof(p->node[0]));
  if(!p || !(p->text = malloc(textlen))) {
    free(p);
    return KCR_ENOMEM;
  }
  p->node[0] = (struct pnode){"", 0, false, -1, -1};
  p->n = 1;
  p->cap = (int)nodes;
  cur = p->text;
  for(size_t i = 0; i < NALWAYS; i++)
    add_path(p, &cur, always[i]);
  if(with_mf)
    add_path(p, &cur, mf);
  for(size_t i = 0; keep[i]; i++)
    add_path(p, &cur, keep[i]);
  *out = p;
  return KCR_OK;
}

bool kcr__proj_keeps(const struct kcr__proj *p, const char *path)
{
  int t = 0;

  while(!p->node[t].whole) {
    const char *tok = path + 1;
    size_t tn = kcr__ptr_toklen(tok);
    int c = -1;
    for(int k = p->node[t].child; k >= 0 && c < 0; k = p->node[k].next)
      if(kcr__ptr_tok_eq(tok, tn, p->node[k].name, p->node[k].len))
        c = k;
    if(c < 0)
      return false;
    t = c;
    path = tok + tn;
    if(!*path)
      return p->node[t].whole;
  }
  return true;
}

void kcr__proj_free(struct kcr__proj *p)
{
  if(!p)
    return;
  free(p->text);
  free(p);
}

/* The key of a skeleton node that was looked at but not linked. */
static char seen_only[] = "";

/* Links into sk (indexed like the trie) the members of object src that trie
 * node t keeps, in src's order; returns the first, or NULL when none. */
static cJSON *view(const struct kcr__proj *p, int t, const cJSON *src, cJSON *sk)
{
  cJSON *first = NULL, *last = NULL;
  const cJSON *m;

  cJSON_ArrayForEach(m, src)
  {
    int c = m->string ? find_child(p, t, m->string, strlen(m->string)) : -1;
    cJSON *v;
    if(c < 0 || sk[c].string) /* not kept, or a second member of that name */
      continue;
    KCR_ASSERT(c > 0 && c < p->n); /* a member, never the object (node 0) */
    v = &sk[c];
    *v = *m; /* type, key and value; the child list too when whole */
    v->next = v->prev = NULL;
    if(!p->node[c].whole && (!cJSON_IsObject(m) || !(v->child = view(p, c, m, sk)))) {
      v->string = seen_only; /* nothing kept below it: leave it out (and any
                                later member of that name, as ever) */
      continue;
    }
    if(last) {
      last->next = v;
      v->prev = last;
    } else {
      first = v;
    }
    last = v;
  }
  if(first)
    first->prev = last; /* as cJSON keeps a list */
  return first;
}

kcr_err kcr__proj_print(const struct kcr__proj *p, const cJSON *tree, struct kcr_buf *out)
{
  cJSON stack[STACK_NODES], *sk = stack, root;
  kcr_err rc;

  if(!cJSON_IsObject(tree))
    return KCR_EINVAL;
  KCR_ASSERT(p->n >= 1 && p->n <= p->cap && !p->node[0].whole);
  if(p->n > STACK_NODES && !(sk = calloc((size_t)p->n, sizeof(*sk))))
    return KCR_ENOMEM;
  if(sk == stack)
    memset(stack, 0, sizeof(stack[0]) * (size_t)p->n);
  root = *tree;
  root.next = root.prev = NULL;
  root.string = NULL;
  root.child = view(p, 0, tree, sk);
  rc = kcr__json_print(&root, out);
  if(sk != stack)
    free(sk);
  return rc;
}

/* Truncates b to len bytes (len <= b->len). */
static void cut(struct kcr_buf *b, size_t len)
{
  if(b->ptr && len <= b->len) {
    b->len = len;
    b->ptr[len] = '\0';
  }
}

/* Appends to out, comma-separated, the members of the compact object text
 * obj[0..n) that trie node t keeps, as view() links them; *kept counts
 * them. seen[] marks the trie nodes whose member was found. KCR_ENOTFOUND
 * when a member name is written with escapes (the tree compares it
 * unescaped), a kept one is written twice (the tree keeps the last) or the
 * structure breaks. */
static kcr_err view_text(const struct kcr__proj *p, int t, const char *obj, size_t n,
                         const struct kcr__json_want *known, size_t nknown, bool *seen,
                         struct kcr_buf *out, int *kept)
{
  struct kcr__json_iter it;
  const char *key, *at;
  size_t kl, vn;
  int r;

  *kept = 0;
  if(!kcr__json_iter_init(&it, obj, n) || *obj != '{')
    return KCR_ENOTFOUND;
  it.known = known;
  it.nknown = nknown;
  while((r = kcr__json_iter_next(&it, &key, &kl, &at, &vn)) > 0) {
    int c;
    if(memchr(key, '\\', kl))
      return KCR_ENOTFOUND;
    c = find_child(p, t, key, kl);
    if(c < 0)
      continue;
    if(seen[c]) /* a name twice: the tree keeps the last; let it decide */
      return KCR_ENOTFOUND;
    KCR_ASSERT(c > 0 && c < p->n);
    seen[c] = true;
    if(p->node[c].whole) { /* "name":value, as written (compact) */
      if(*kept)
        kcr_buf_append(out, ",", 1);
      kcr_buf_append(out, key - 1, (size_t)(at + vn - (key - 1)));
      ++*kept;
    } else if(*at == '{') {
      size_t mark = out->len;
      int sub;
      kcr_err rc;
      if(*kept)
        kcr_buf_append(out, ",", 1);
      kcr_buf_append(out, key - 1, (size_t)(at + 1 - (key - 1))); /* "name":{ */
      if((rc = view_text(p, c, at, vn, known, nknown, seen, out, &sub)))
        return rc;
      if(sub) {
        kcr_buf_append(out, "}", 1);
        ++*kept;
      } else {
        cut(out, mark); /* nothing kept below it: leave it out */
      }
    }
  }
  return r < 0 ? KCR_ENOTFOUND : KCR_OK;
}

kcr_err kcr__proj_print_text(const struct kcr__proj *p, const char *text, size_t len,
                             const struct kcr__json_want *known, size_t nknown,
                             struct kcr_buf *out)
{
  bool stack[STACK_NODES], *seen = stack;
  size_t mark = out->len;
  int kept;
  kcr_err rc;

  if(!text || !len || *text != '{')
    return KCR_EINVAL;
  KCR_ASSERT(p->n >= 1 && p->n <= p->cap && !p->node[0].whole);
  if(p->n > STACK_NODES && !(seen = calloc((size_t)p->n, sizeof(*seen))))
    return KCR_ENOMEM;
  if(seen == stack)
    memset(stack, 0, sizeof(stack[0]) * (size_t)p->n);
  kcr_buf_append(out, "{", 1);
  rc = view_text(p, 0, text, len, known, nknown, seen, out, &kept);
  kcr_buf_append(out, "}", 1);
  if(seen != stack)
    free(seen);
  if(!rc)
    rc = kcr_buf_err(out);
  if(rc == KCR_ENOTFOUND)
    cut(out, mark);
  return rc;
}
