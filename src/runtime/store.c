/* DESIGN: the informer cache.
 *
 * Objects: one malloc block each: the header struct, then the strings it
 * points to, then the compact JSON text. Made from a tree (kcr_obj_from_json)
 * or from a watch event's text (kcr__obj_from_text, below), the same object
 * either way; immutable after; an atomic refcount lets readers keep one
 * past its removal from the store.
 *
 * Store: a hash table (kcr/htab.h) key -> entry (key "ns/name"); the entry
 * holds the object and the index values computed for it. Per index, a hash
 * table value -> small array of keys. One rwlock guards both; lookups take it
 * shared, the single writer takes it exclusive.
 *
 * User code never runs under the lock: index functions are called before
 * the writer locks, and their values are kept in the entry, so removing an
 * object from its indexes needs neither the function nor an allocation.
 * Under the write lock the writer only links, unlinks and (for new index
 * values) allocates; kcr_store_replace builds the new table and the new
 * indexes entirely outside the lock and swaps pointers in, so readers see
 * the old or the new contents, never a mix.
 *
 * Failure atomicity: every writer call either applies completely or leaves
 * the store as it was, and the caller keeps its references on error.
 * put/delete prepare everything that can fail first (values, the entry);
 * the only allocations under the lock are the table's room for a new key
 * (reserved before anything changes) and new index values, which are
 * rolled back if one fails. replace fails before the swap or not at all.
 *
 * Hashing: SipHash under the per-process key (kcr/hash.h): names are chosen
 * by users, an unkeyed hash would let them flood one bucket.
 *
 * Invariants (under the lock): every object in the table holds one
 * reference owned by the table; index entries mirror the entries' stored
 * values exactly; bytes == sum of kcr_obj_size over the table; only the
 * single writer changes anything. */
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/assert-int.h"
#include "core/htab-int.h"
#include "core/json-int.h"
#include "kcr/hash.h"
#include "kcr/htab.h"
#include "kcr/json.h"
#include "kcr/log.h"
#include "kcr/typed.h"
#include "status/status-int.h"
#include "kcr/store.h"
#include "runtime/projection-int.h"
#include "runtime/store-int.h"

struct kcr_obj {
  atomic_uint refs;
  const char *ns, *name, *uid, *rv, *key;
  int64_t generation;
  bool deleting;
  unsigned char unkept; /* UNKEPT_*: what the informer's keep list dropped */
  struct kcr_owner owner;
  size_t size, json_len;
  const char *json;
  char data[]; /* strings, then the JSON text */
};

/* ---- objects ---- */

/* A string of the header: its bytes, or none (p NULL: stored as ""). */
struct hstr {
  const char *p;
  size_t n;
};

/* What an object's header is made of, read from a tree or from text. */
struct header {
  struct hstr ns, name, uid, rv;
  bool has_ctl;
  struct hstr ctl_api_version, ctl_kind, ctl_name, ctl_uid;
  int64_t generation;
  bool deleting;
  unsigned char unkept;
};

/* What a keep list dropped, of what kcr_obj_label and kcr_obj_annotation
 * read: they tell "not kept" from "absent". */
enum { UNKEPT_LABELS = 1, UNKEPT_ANNOTATIONS = 2 };

static unsigned char unkept_of(const struct kcr__proj *proj)
{
  if(!proj)
    return 0;
  return (unsigned char)((kcr__proj_keeps(proj, "/metadata/labels") ? 0 : UNKEPT_LABELS) |
                         (kcr__proj_keeps(proj, "/metadata/annotations")
                              ? 0
                              : UNKEPT_ANNOTATIONS));
}

static struct hstr hs(const char *s) { return (struct hstr){s, s ? strlen(s) : 0}; }

static const char *put(char **cur, struct hstr s)
{
  char *at = *cur;
  if(s.n)
    memcpy(at, s.p, s.n);
  at[s.n] = '\0';
  *cur += s.n + 1;
  return at;
}

/* The object: header h and its stored text json[0..jlen). */
static kcr_err make_obj(const struct header *h, const char *json, size_t jlen,
                        kcr_obj **out)
{
  size_t need = sizeof(kcr_obj) + h->ns.n + h->name.n + h->uid.n + h->rv.n + 4 + h->ns.n +
                1 + h->name.n + 1 + jlen + 1;
  char *cur;
  kcr_obj *o;

  if(h->has_ctl)
    need += h->ctl_api_version.n + h->ctl_kind.n + h->ctl_name.n + h->ctl_uid.n + 4;
  o = malloc(need);
  if(!o)
    return KCR_ENOMEM;
  memset(o, 0, sizeof(*o));
  atomic_init(&o->refs, 1);
  cur = o->data;
  o->ns = put(&cur, h->ns);
  o->name = put(&cur, h->name);
  o->uid = put(&cur, h->uid);
  o->rv = put(&cur, h->rv);
  o->key = cur;
  if(h->ns.n) {
    memcpy(cur, h->ns.p, h->ns.n);
    cur[h->ns.n] = '/';
    cur += h->ns.n + 1;
  }
  put(&cur, h->name);
  if(h->has_ctl) {
    o->owner.api_version = put(&cur, h->ctl_api_version);
    o->owner.kind = put(&cur, h->ctl_kind);
    o->owner.name = put(&cur, h->ctl_name);
    o->owner.uid = put(&cur, h->ctl_uid);
  }
  memcpy(cur, json, jlen);
  cur[jlen] = '\0';
  o->json = cur;
  o->json_len = jlen;
  o->generation = h->generation;
  o->deleting = h->deleting;
  o->unkept = h->unkept;
  o->size = need;
  *out = o;
  return KCR_OK;
}

static const cJSON *controller_ref(const cJSON *tree)
{
  const cJSON *r;
  cJSON_ArrayForEach(r, kcr_json_at(tree, "/metadata/ownerReferences"))
  {
    if(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r, "controller")))
      return r;
  }
  return NULL;
}

kcr_err kcr_obj_from_json(const cJSON *tree, unsigned flags, kcr_obj **out,
                          struct kcr_errinfo *ei)
{
  return kcr__obj_from_json(tree, flags, NULL, out, ei);
}

/* deletionTimestamp set: a string, one holding \u0000 too (the tree keeps
 * it as a Raw node; the text path sees a string). */
static bool deleting(const cJSON *v)
{
  return cJSON_IsString(v) || kcr__json_nul_string(v);
}

/* fn: the caller's name; in: its tree or text (what). */
static kcr_err check_args(const char *fn, const void *in, const char *what,
                          unsigned flags, kcr_obj **out, struct kcr_errinfo *ei)
{
  if(!out)
    return kcr_errinfo_set(ei, KCR_EINVAL, "%s: no out", fn);
  *out = NULL;
  if(!in)
    return kcr_errinfo_set(ei, KCR_EINVAL, "%s: no %s", fn, what);
  if(flags & ~KCR_OBJ_KEEP_MANAGED_FIELDS)
    return kcr_errinfo_set(ei, KCR_EINVAL, "%s: unknown flags 0x%x", fn,
                           flags & ~KCR_OBJ_KEEP_MANAGED_FIELDS);
  return KCR_OK;
}

kcr_err kcr__obj_from_json(const cJSON *tree, unsigned flags,
                           const struct kcr__proj *proj, kcr_obj **out,
                           struct kcr_errinfo *ei)
{
  const cJSON *ctl = controller_ref(tree);
  cJSON *meta = kcr_json_at(tree, "/metadata"), *mf = NULL;
  struct kcr_buf text = KCR_BUF_INIT;
  struct header h = {
      .ns = hs(kcr_json_str(tree, "/metadata/namespace")),
      .name = hs(kcr_json_str(tree, "/metadata/name")),
      .uid = hs(kcr_json_str(tree, "/metadata/uid")),
      .rv = hs(kcr_json_str(tree, "/metadata/resourceVersion")),
      .has_ctl = ctl != NULL,
      .generation = kcr_json_int(tree, "/metadata/generation", 0),
      .deleting = deleting(kcr_json_at(tree, "/metadata/deletionTimestamp")),
      .unkept = unkept_of(proj),
  };
  kcr_err rc = check_args("kcr_obj_from_json", tree, "tree", flags, out, ei);

  if(rc)
    return rc;
  if(!h.name.n)
    return kcr_errinfo_set(ei, KCR_EINVAL, "kcr_obj_from_json: no metadata.name");
  if(ctl) {
    h.ctl_api_version = hs(kcr_json_str(ctl, "/apiVersion"));
    h.ctl_kind = hs(kcr_json_str(ctl, "/kind"));
    h.ctl_name = hs(kcr_json_str(ctl, "/name"));
    h.ctl_uid = hs(kcr_json_str(ctl, "/uid"));
  }
  /* Print without managedFields: detach, print, put back (tree unchanged).
   * The header comes from the whole tree: a projection keeps what it reads. */
  if(!(flags & KCR_OBJ_KEEP_MANAGED_FIELDS) && meta)
    mf = cJSON_DetachItemFromObjectCaseSensitive(meta, "managedFields");
  kcr_buf_reserve(&text, 2048); /* most objects at once, not step by step */
  rc = proj ? kcr__proj_print(proj, tree, &text) : kcr__json_print(tree, &text);
  if(mf) /* it kept its key: re-linking it cannot fail (AddItemToObject copies
            the key and could) */
    cJSON_AddItemToArray(meta, mf);
  if(!rc)
    rc = make_obj(&h, text.ptr, text.len, out);
  kcr_buf_cleanup(&text);
  return rc ? KCR_ENOMEM : KCR_OK;
}

/* ---- objects from text ----
 *
 * A watch event's object as the server wrote it: one validating scan reads
 * the header's values, one walk copies the members to keep as they are
 * written. Whatever that cannot do exactly as the tree would - text that
 * is not compact, a member name or a header string written with escapes
 * (the tree compares and stores them unescaped), a generation that is not
 * a plain integer, ownerReferences that are not an array, nesting past
 * what the walk follows - goes through the tree instead, as does malformed
 * text (for the parser's error). */

enum { H_NAME, H_NS, H_UID, H_RV, H_GEN, H_DEL, H_OWNERS, H_N };
/* The header's paths, all in metadata: the member name and its length. */
#define IN_METADATA(name)                                                                \
  {                                                                                      \
    "/metadata/" name, sizeof(name) - 1                                                  \
  }
static const struct {
  const char *path;
  size_t n; /* of the member name, after "metadata." */
} header[H_N] = {
    [H_NAME] = IN_METADATA("name"),
    [H_NS] = IN_METADATA("namespace"),
    [H_UID] = IN_METADATA("uid"),
    [H_RV] = IN_METADATA("resourceVersion"),
    [H_GEN] = IN_METADATA("generation"),
    [H_DEL] = IN_METADATA("deletionTimestamp"),
    [H_OWNERS] = IN_METADATA("ownerReferences"),
};
#undef IN_METADATA

/* A string value's bytes (kcr_json_str: a value of another kind is none);
 * false when it is written with escapes. */
static bool text_str(const char *at, size_t n, struct hstr *out)
{
  *out = (struct hstr){NULL, 0};
  if(!at || *at != '"')
    return true;
  if(memchr(at, '\\', n))
    return false;
  *out = (struct hstr){at + 1, n - 2};
  return true;
}

static bool key_is(const char *key, size_t kl, const char *name)
{
  return strlen(name) == kl && !memcmp(key, name, kl);
}

/* The controller among ownerReferences' text (an array): the first element
 * with "controller":true, as controller_ref finds it. */
static bool text_controller(const char *at, size_t n, struct header *h)
{
  struct kcr__json_iter arr, it;
  const char *key, *el, *v;
  size_t kl, eln, vn;
  int r;

  if(!at)
    return true;
  if(*at != '[')
    return *at != '{'; /* an object would be walked by the tree */
  kcr__json_iter_init(&arr, at, n);
  while((r = kcr__json_iter_next(&arr, &key, &kl, &el, &eln)) > 0) {
    const char *f[5] = {NULL};
    size_t fn[5] = {0};
    static const char *const names[5] = {"controller", "apiVersion", "kind", "name",
                                         "uid"};
    int m;
    if(*el != '{')
      continue;
    kcr__json_iter_init(&it, el, eln);
    while((m = kcr__json_iter_next(&it, &key, &kl, &v, &vn)) > 0) {
      if(memchr(key, '\\', kl))
        return false;
      for(int i = 0; i < 5; i++)
        if(key_is(key, kl, names[i])) {
          if(f[i]) /* written twice: the tree keeps the last; let it decide */
            return false;
          f[i] = v;
          fn[i] = vn;
        }
    }
    if(m < 0)
      return false;
    if(!f[0] || fn[0] != 4 || memcmp(f[0], "true", 4))
      continue;
    h->has_ctl = true;
    return text_str(f[1], fn[1], &h->ctl_api_version) &&
           text_str(f[2], fn[2], &h->ctl_kind) && text_str(f[3], fn[3], &h->ctl_name) &&
           text_str(f[4], fn[4], &h->ctl_uid);
  }
  return r == 0;
}

/* metadata.generation: none or null is 0; a plain integer; anything else
 * (false) is left to the tree. */
static bool text_generation(const char *at, size_t n, int64_t *out)
{
  int64_t v = 0;

  *out = 0;
  if(!at || (n == 4 && !memcmp(at, "null", 4)))
    return true;
  if(n > 18 || (n > 1 && *at == '0'))
    return false;
  for(size_t i = 0; i < n; i++) {
    if(at[i] < '0' || at[i] > '9')
      return false;
    v = v * 10 + (at[i] - '0');
  }
  *out = v;
  return true;
}

/* Appends the members of the object text[0..len) (compact) to out, comma-
 * separated, as they are written; with top, the "metadata" member, when an
 * object, is copied the same way with top false, which leaves out its
 * managedFields member when drop_mf. KCR_ENOTFOUND for a member name
 * written with escapes, a metadata, managedFields or header member written
 * twice (the tree keeps the last of a name, as Go does), or a broken walk. */
struct copy {
  bool drop_mf;
  const struct kcr__json_want *known; /* stepped over (kcr__json_iter.known) */
  size_t nknown;
  struct kcr__json_want *hdr; /* [H_N]: the header's values, as found */
  struct kcr_buf *out;
};

static kcr_err copy_members(const char *text, size_t len, bool top, const struct copy *c)
{
  struct kcr__json_iter it;
  const char *key, *at;
  size_t kl, vn;
  bool first = true, seen = false; /* the metadata / managedFields member */
  int r;

  kcr__json_iter_init(&it, text, len);
  it.known = c->known;
  it.nknown = c->nknown;
  while((r = kcr__json_iter_next(&it, &key, &kl, &at, &vn)) > 0) {
    bool special;
    if(memchr(key, '\\', kl))
      return KCR_ENOTFOUND;
    special = key_is(key, kl, top ? "metadata" : "managedFields");
    if(special && seen) /* written twice: the tree keeps the last; let it decide */
      return KCR_ENOTFOUND;
    seen |= special;
    if(!top) /* the member of each name the header reads: written once */
      for(int i = 0; i < H_N; i++)
        if(header[i].n == kl &&
           !memcmp(header[i].path + sizeof("/metadata/") - 1, key, kl)) {
          if(c->hdr[i].at)
            return KCR_ENOTFOUND;
          c->hdr[i].at = at;
          c->hdr[i].n = vn;
        }
    if(special && !top && c->drop_mf)
      continue;
    if(!first)
      kcr_buf_append(c->out, ",", 1);
    first = false;
    if(special && top && *at == '{') {
      kcr_err rc;
      kcr_buf_append(c->out, key - 1, (size_t)(at + 1 - (key - 1))); /* "metadata":{ */
      if((rc = copy_members(at, vn, false, c)))
        return rc;
      kcr_buf_append(c->out, "}", 1);
      continue;
    }
    kcr_buf_append(c->out, key - 1, (size_t)(at + vn - (key - 1)));
  }
  return r < 0 ? KCR_ENOTFOUND : KCR_OK;
}

/* The object from text, or KCR_ENOTFOUND when the tree must make it. The
 * text to keep is copied first, the header's values found on the way (the
 * members of "metadata", as the tree reads them); through a
 * projection, the header is read from the copy, which holds every member
 * it is made of (a projection keeps them all) and no managedFields to step
 * over. */
static kcr_err from_text(const char *text, size_t len, unsigned flags, bool checked,
                         const struct kcr__proj *proj, const struct kcr__json_want *known,
                         size_t nknown, struct kcr_buf *buf, kcr_obj **out)
{
  struct kcr__json_want w[H_N];
  struct header h = {0};
  kcr_err rc;

  if(!checked) { /* one compact, well-formed object (and nothing after it) */
    size_t objlen;
    bool compact;
    kcr__json_scan(text, len, NULL, 0, &objlen, &compact);
    if(!objlen || !compact)
      return KCR_ENOTFOUND;
    len = objlen;
  }
  kcr_buf_reserve(buf, len + 1);
  for(int i = 0; i < H_N; i++)
    w[i] = (struct kcr__json_want){.path = header[i].path};
  if(proj) {
    rc = kcr__proj_print_text(proj, text, len, known, nknown, buf);
  } else {
    const struct copy c = {.drop_mf = !(flags & KCR_OBJ_KEEP_MANAGED_FIELDS),
                           .known = known,
                           .nknown = nknown,
                           .hdr = w,
                           .out = buf};
    kcr_buf_append(buf, "{", 1);
    rc = copy_members(text, len, true, &c);
    kcr_buf_append(buf, "}", 1);
  }
  if(!rc)
    rc = kcr_buf_err(buf);
  if(rc)
    return rc;
  if(proj) /* (the copy, rather than the text: smaller, no managedFields) */
    kcr__json_spans_trusted(buf->ptr, buf->len, w, H_N);
  if(!text_str(w[H_NAME].at, w[H_NAME].n, &h.name) || !h.name.n ||
     !text_str(w[H_NS].at, w[H_NS].n, &h.ns) ||
     !text_str(w[H_UID].at, w[H_UID].n, &h.uid) ||
     !text_str(w[H_RV].at, w[H_RV].n, &h.rv) ||
     !text_generation(w[H_GEN].at, w[H_GEN].n, &h.generation) ||
     !text_controller(w[H_OWNERS].at, w[H_OWNERS].n, &h))
    return KCR_ENOTFOUND;
  h.deleting = w[H_DEL].at && *w[H_DEL].at == '"';
  h.unkept = unkept_of(proj);
  return make_obj(&h, buf->ptr, buf->len, out);
}

kcr_err kcr__obj_from_text(const char *text, size_t len, unsigned flags,
                           const struct kcr__proj *proj,
                           const struct kcr__json_want *known, size_t nknown,
                           kcr_obj **out, struct kcr_errinfo *ei)
{
  struct kcr_buf buf = KCR_BUF_INIT;
  bool checked = flags & KCR__OBJ_CHECKED;
  cJSON *tree;
  kcr_err rc;

  flags &= ~KCR__OBJ_CHECKED;
  if((rc = check_args("kcr__obj_from_text", text, "text", flags, out, ei)))
    return rc;
  rc = from_text(text, len, flags, checked, proj, known, nknown, &buf, out);
  kcr_buf_cleanup(&buf);
  if(rc != KCR_ENOTFOUND)
    return rc;
  if((rc = kcr_json_parse(text, len, &tree, ei)))
    return rc;
  rc = kcr__obj_from_json(tree, flags, proj, out, ei);
  cJSON_Delete(tree);
  return rc;
}

kcr_obj *kcr_obj_ref(kcr_obj *o)
{
  if(o)
    atomic_fetch_add_explicit(&o->refs, 1, memory_order_relaxed);
  return o;
}

void kcr_obj_unref(kcr_obj *o)
{
  if(o && atomic_fetch_sub_explicit(&o->refs, 1, memory_order_acq_rel) == 1)
    free(o);
}

const char *kcr_obj_ns(const kcr_obj *o) { return o->ns; }
const char *kcr_obj_name(const kcr_obj *o) { return o->name; }
const char *kcr_obj_uid(const kcr_obj *o) { return o->uid; }
const char *kcr_obj_rv(const kcr_obj *o) { return o->rv; }
const char *kcr_obj_key(const kcr_obj *o) { return o->key; }
int64_t kcr_obj_generation(const kcr_obj *o) { return o->generation; }
bool kcr_obj_deleting(const kcr_obj *o) { return o->deleting; }
const struct kcr_owner *kcr_obj_controller(const kcr_obj *o) { return &o->owner; }
size_t kcr_obj_size(const kcr_obj *o) { return o->size; }

const char *kcr_obj_json(const kcr_obj *o, size_t *len)
{
  if(len)
    *len = o->json_len;
  return o->json;
}

kcr_err kcr_obj_status_write(kcr_status_writer *w, const kcr_obj *o,
                             const struct kcr_status_desired *d,
                             enum kcr_write_result *res, struct kcr_errinfo *ei)
{
  if(!o) {
    if(res)
      *res = KCR_WRITE_FAILED;
    return kcr_errinfo_set(ei, KCR_EINVAL, "kcr_obj_status_write: no object");
  }
  return kcr__status_write_text(w, o->json, o->json_len, true, d, res, ei);
}

size_t kcr_obj_spans(const kcr_obj *o, const char *const *paths, struct kcr_span *out,
                     size_t n)
{
  struct kcr__json_want w[KCR__JSON_WANT_MAX];
  size_t k = n < KCR__JSON_WANT_MAX ? n : KCR__JSON_WANT_MAX, found;

  for(size_t i = 0; i < k; i++)
    w[i] = (struct kcr__json_want){.path = paths[i]};
  /* The text is well-formed (the validator or cJSON's printer made it): the
   * structure alone gives the validator's spans. */
  found = kcr__json_spans_trusted(o->json, o->json_len, w, k);
  for(size_t i = 0; i < n; i++)
    out[i] = i < k ? (struct kcr_span){.at = w[i].at, .n = w[i].n}
                   : (struct kcr_span){.at = NULL, .n = 0};
  return found;
}

kcr_err kcr_span_strdup(const struct kcr_span *sp, char **out)
{
  cJSON *v = NULL;
  kcr_err rc;

  if(!out)
    return KCR_EINVAL;
  *out = NULL;
  if(!sp || !sp->at || !sp->n || *sp->at != '"')
    return KCR_EINVAL;
  if(!memchr(sp->at, '\\', sp->n)) { /* nothing to unescape: the bytes */
    if(sp->n < 2 || sp->at[sp->n - 1] != '"')
      return KCR_EPARSE;
    *out = strndup(sp->at + 1, sp->n - 2);
    return *out ? KCR_OK : KCR_ENOMEM;
  }
  if((rc = kcr_json_parse(sp->at, sp->n, &v, NULL)))
    return rc == KCR_ENOMEM ? rc : KCR_EPARSE;
  if(!cJSON_IsString(v)) /* a string holding \u0000 is no C string */
    rc = KCR_EPARSE;
  else if(!(*out = strdup(v->valuestring)))
    rc = KCR_ENOMEM;
  cJSON_Delete(v);
  return rc;
}

bool kcr_span_is(const struct kcr_span *sp, const char *s)
{
  char *v = NULL;
  bool eq;

  if(!sp || !sp->at || sp->n < 2 || *sp->at != '"' || !s)
    return false;
  if(!memchr(sp->at, '\\', sp->n))
    return sp->n - 2 == strlen(s) && !memcmp(sp->at + 1, s, sp->n - 2);
  if(kcr_span_strdup(sp, &v))
    return false;
  eq = !strcmp(v, s);
  free(v);
  return eq;
}

/* Whether the member name key[0..klen), as written in JSON text (escapes
 * and all), is name. */
static bool name_is(const char *key, size_t klen, const char *name)
{
  struct kcr_span sp = {.at = key - 1, .n = klen + 2}; /* with its quotes */
  return kcr_span_is(&sp, name);
}

/* The value of member name of the object at path ("/metadata/labels") in
 * o's text: the last of that name, as a tree would read it. */
static kcr_err meta_member(const kcr_obj *o, const char *path, unsigned char unkept,
                           const char *name, struct kcr_span *out)
{
  const char *paths[] = {path, "/metadata/name"};
  struct kcr_span sp[2];
  struct kcr__json_iter it;
  const char *key, *at;
  size_t kl, vn;
  int r;

  if(out)
    *out = (struct kcr_span){.at = NULL, .n = 0};
  if(!o || !name || !out)
    return KCR_EINVAL;
  if(o->unkept & unkept)
    return KCR_ENOTKEPT;
  kcr_obj_spans(o, paths, sp, 2);
  if(!sp[1].at) /* no name found either: the walk could not pass the text */
    return KCR_EPARSE;
  if(!sp[0].at)
    return KCR_ENOTFOUND;
  if(*sp[0].at != '{' || !kcr__json_iter_init(&it, sp[0].at, sp[0].n))
    return KCR_ENOTFOUND; /* labels that are not an object hold no label */
  while((r = kcr__json_iter_next(&it, &key, &kl, &at, &vn)) > 0)
    if(name_is(key, kl, name))
      *out = (struct kcr_span){.at = at, .n = vn};
  return out->at ? KCR_OK : KCR_ENOTFOUND;
}

kcr_err kcr_obj_label(const kcr_obj *o, const char *key, struct kcr_span *value)
{
  return meta_member(o, "/metadata/labels", UNKEPT_LABELS, key, value);
}

kcr_err kcr_obj_annotation(const kcr_obj *o, const char *key, struct kcr_span *value)
{
  return meta_member(o, "/metadata/annotations", UNKEPT_ANNOTATIONS, key, value);
}

kcr_err kcr_obj_parse(const kcr_obj *o, cJSON **out)
{
  /* kcr_json_parse: integers of 10^15 and up stay exact. The text was
   * printed by cJSON, so the only failure is memory. */
  kcr_err rc = kcr_json_parse(o->json, o->json_len, out, NULL);
  KCR_ASSERT(rc == KCR_OK || rc == KCR_ENOMEM);
  return rc ? KCR_ENOMEM : KCR_OK;
}

/* ---- hash tables of string -> pointer (kcr/htab.h) ---- */

struct entry {
  struct kcr_hnode hn; /* under hash_str(key) */
  const char *key;     /* borrowed from the value (obj key) or owned (index) */
  void *val;
  struct ixvals *ixv; /* object table only: the object's index values */
};

static uint64_t hash_str(const char *s) { return kcr_hash_str(s); }

static struct entry *entry_of(struct kcr_hnode *n)
{
  return KCR_HTAB_ENTRY(n, struct entry, hn);
}

static struct entry *tfind(const struct kcr_htab *t, const char *key, uint64_t h)
{
  for(struct kcr_hnode *n = kcr_htab_lookup(t, h); n; n = kcr_htab_lookup_next(n))
    if(!strcmp(entry_of(n)->key, key))
      return entry_of(n);
  return NULL;
}

/* Inserts key (must be absent); NULL when out of memory. */
static struct entry *tinsert(struct kcr_htab *t, const char *key, uint64_t h, void *val)
{
  struct entry *e = calloc(1, sizeof(*e));
  if(!e)
    return NULL;
  e->key = key;
  e->val = val;
  if(kcr_htab_insert(t, &e->hn, h)) {
    free(e);
    return NULL;
  }
  return e;
}

/* Unlinks the entry for key and returns it (not freed), or NULL. */
static struct entry *tunlink(struct kcr_htab *t, const char *key, uint64_t h)
{
  struct entry *e = tfind(t, key, h);
  if(e)
    kcr_htab_remove(t, &e->hn);
  return e;
}

/* ---- index values of one object ---- */

/* The values every index emitted for one object: (index number, value). */
struct ixval {
  size_t idx;
  char *value;
};
struct ixvals {
  size_t n, cap;
  struct ixval v[];
};

static void ixvals_free(struct ixvals *x)
{
  if(!x)
    return;
  for(size_t i = 0; i < x->n; i++)
    free(x->v[i].value);
  free(x);
}

static bool ixvals_has(const struct ixvals *x, size_t idx, const char *value)
{
  for(size_t i = 0; x && i < x->n; i++)
    if(x->v[i].idx == idx && !strcmp(x->v[i].value, value))
      return true;
  return false;
}

static void tclear(struct kcr_htab *t, void (*free_val)(void *), bool free_keys)
{
  struct kcr_htab_iter it;
  struct kcr_hnode *n;

  kcr_htab_iter_init(&it, t);
  while((n = kcr_htab_iter_next(&it))) {
    struct entry *e = entry_of(n);
    if(free_val)
      free_val(e->val);
    if(free_keys)
      free((char *)e->key);
    ixvals_free(e->ixv);
    free(e);
  }
  kcr_htab_cleanup(t);
}

/* ---- indexes: value -> array of object keys (owned copies) ---- */

struct keyset {
  char **keys;
  size_t n, cap;
};

struct index {
  char *name;
  kcr_index_fn fn;        /* NULL: a label index */
  char *label;            /* the label key of a label index */
  struct kcr_htab values; /* value (owned) -> struct keyset* */
};

static void keyset_free(void *p)
{
  struct keyset *ks = p;
  for(size_t i = 0; i < ks->n; i++)
    free(ks->keys[i]);
  free(ks->keys);
  free(ks);
}

struct kcr_store {
  pthread_rwlock_t lock;
  struct kcr_htab objs; /* key (borrowed from obj) -> kcr_obj* */
  struct index *idx;
  size_t nidx;
  size_t bytes;
  bool written;
};

static bool rdlock(kcr_store *s)
{
  /* No user code runs under the lock, so a thread never holds it when it
   * asks again (which would be EDEADLK); failure means a broken invariant
   * or the reader limit. Either way: report it, never unlock what we did
   * not get. */
  int err = pthread_rwlock_rdlock(&s->lock);
  KCR_ASSERT(err == 0);
  return err == 0;
}

kcr_err kcr_store_new(const struct kcr_store_opts *opts, kcr_store **out,
                      struct kcr_errinfo *ei)
{
  kcr_store *s;

  if(!out)
    return kcr_errinfo_set(ei, KCR_EINVAL, "kcr_store_new: no out");
  *out = NULL;
  s = calloc(1, sizeof(*s));
  if(!s)
    return KCR_ENOMEM;
  if(opts && opts->size_hint && kcr_htab_reserve(&s->objs, opts->size_hint)) {
    free(s);
    return kcr_errinfo_set(
        ei, KCR_ENOMEM, "kcr_store_new: no memory for a table of size_hint %zu objects",
        opts->size_hint);
  }
  if(pthread_rwlock_init(&s->lock, NULL)) {
    kcr_htab_cleanup(&s->objs);
    free(s);
    return KCR_ENOMEM;
  }
  *out = s;
  return KCR_OK;
}

static void obj_unref_void(void *o) { kcr_obj_unref(o); }

void kcr_store_free(kcr_store *s)
{
  if(!s)
    return;
  tclear(&s->objs, obj_unref_void, false);
  for(size_t i = 0; i < s->nidx; i++) {
    tclear(&s->idx[i].values, keyset_free, true);
    free(s->idx[i].name);
    free(s->idx[i].label);
  }
  free(s->idx);
  pthread_rwlock_destroy(&s->lock);
  free(s);
}

void kcr_index_controller(const kcr_obj *o, kcr_index_emit emit, void *ctx)
{
  if(o->owner.uid && *o->owner.uid)
    emit(o->owner.uid, ctx);
}

/* Adds index name (copied), computed by fn or, fn NULL, the value of
 * label (copied). */
static kcr_err add_index(kcr_store *s, const char *name, kcr_index_fn fn,
                         const char *label)
{
  struct index *n, x = {.fn = fn};
  for(size_t i = 0; i < s->nidx; i++)
    if(!strcmp(s->idx[i].name, name))
      return KCR_EEXIST;
  x.name = strdup(name);
  x.label = label ? strdup(label) : NULL;
  n = x.name && (!label || x.label) ? realloc(s->idx, (s->nidx + 1) * sizeof(*n)) : NULL;
  if(!n) {
    free(x.name);
    free(x.label);
    return KCR_ENOMEM;
  }
  s->idx = n;
  n[s->nidx++] = x;
  return KCR_OK;
}

kcr_err kcr_store_add_index(kcr_store *s, const char *name, kcr_index_fn fn)
{
  if(s->written || !name || !fn)
    return KCR_EINVAL;
  return add_index(s, name, fn, NULL);
}

kcr_err kcr_store_add_label_index(kcr_store *s, const char *key)
{
  char *name;
  kcr_err rc;

  if(s->written || !key || !*key)
    return KCR_EINVAL;
  if(asprintf(&name, KCR_INDEX_LABEL_PREFIX "%s", key) < 0)
    return KCR_ENOMEM;
  rc = add_index(s, name, NULL, key);
  free(name);
  return rc;
}

/* Collecting an object's values: called by index functions, no lock held. */
struct collect_ctx {
  struct ixvals *x;
  size_t idx;
  kcr_err rc;
};

static void collect_value(const char *value, void *p)
{
  struct collect_ctx *c = p;
  char *v;
  if(c->rc || !value || ixvals_has(c->x, c->idx, value))
    return;
  if(!c->x || c->x->n == c->x->cap) {
    size_t cap = c->x ? c->x->cap * 2 : 2;
    struct ixvals *nx = realloc(c->x, sizeof(*nx) + cap * sizeof(nx->v[0]));
    if(!nx) {
      c->rc = KCR_ENOMEM;
      return;
    }
    if(!c->x)
      nx->n = 0;
    nx->cap = cap;
    c->x = nx;
  }
  if(!(v = strdup(value))) {
    c->rc = KCR_ENOMEM;
    return;
  }
  c->x->v[c->x->n++] = (struct ixval){c->idx, v};
}

/* Runs every index function on o (user code: never under the lock). *out
 * is NULL when o has no index values. */
static kcr_err collect_values(const kcr_store *s, const kcr_obj *o, struct ixvals **out)
{
  struct collect_ctx c = {NULL, 0, KCR_OK};
  for(size_t i = 0; i < s->nidx && !c.rc; i++) {
    c.idx = i;
    if(s->idx[i].fn) {
      s->idx[i].fn(o, collect_value, &c);
    } else { /* a label index: the label's value, when it is a string */
      struct kcr_span v;
      char *val = NULL;
      if(!kcr_obj_label(o, s->idx[i].label, &v) && (c.rc = kcr_span_strdup(&v, &val)))
        c.rc = c.rc == KCR_ENOMEM ? c.rc : KCR_OK; /* not a string: no value */
      if(val)
        collect_value(val, &c);
      free(val);
    }
  }
  if(c.rc) {
    ixvals_free(c.x);
    c.x = NULL;
  }
  *out = c.x;
  return c.rc;
}

/* Adds key under value in one index table (allocates). */
static kcr_err ix_add(struct kcr_htab *values, const char *value, const char *key)
{
  uint64_t h = hash_str(value);
  struct entry *e = tfind(values, value, h);
  struct keyset *ks;

  if(!e) {
    char *v = strdup(value);
    ks = calloc(1, sizeof(*ks));
    if(!v || !ks || !(e = tinsert(values, v, h, ks))) {
      free(v);
      free(ks);
      return KCR_ENOMEM;
    }
  }
  ks = e->val;
  for(size_t i = 0; i < ks->n; i++)
    if(!strcmp(ks->keys[i], key))
      return KCR_OK;
  if(ks->n == ks->cap) {
    size_t ncap = ks->cap ? ks->cap * 2 : 2;
    char **nk = realloc(ks->keys, ncap * sizeof(*nk));
    if(!nk)
      goto fail;
    ks->keys = nk;
    ks->cap = ncap;
  }
  if(!(ks->keys[ks->n] = strdup(key)))
    goto fail;
  ks->n++;
  return KCR_OK;
fail:
  if(!ks->n) { /* a value entry made for this key only: take it back */
    struct entry *dead = tunlink(values, value, h);
    free((char *)dead->key);
    keyset_free(dead->val);
    free(dead);
  }
  return KCR_ENOMEM;
}

/* Removes key from under value (frees only; never fails). */
static void ix_remove(struct kcr_htab *values, const char *value, const char *key)
{
  uint64_t h = hash_str(value);
  struct entry *e = tfind(values, value, h);
  struct keyset *ks;
  if(!e)
    return;
  ks = e->val;
  for(size_t i = 0; i < ks->n; i++) {
    if(!strcmp(ks->keys[i], key)) {
      free(ks->keys[i]);
      ks->keys[i] = ks->keys[--ks->n];
      break;
    }
  }
  if(!ks->n) {
    struct entry *dead = tunlink(values, value, h);
    free((char *)dead->key);
    keyset_free(dead->val);
    free(dead);
  }
}

/* Moves key's index entries from the values `was` to `now`: adds what is
 * new first (rolled back on failure), then removes what went away. */
static kcr_err ix_move(kcr_store *s, const char *key, const struct ixvals *was,
                       const struct ixvals *now)
{
  size_t i;
  kcr_err rc = KCR_OK;
  for(i = 0; now && i < now->n; i++) {
    const struct ixval *v = &now->v[i];
    if(!ixvals_has(was, v->idx, v->value) &&
       (rc = ix_add(&s->idx[v->idx].values, v->value, key)))
      break;
  }
  if(rc) {
    while(i-- > 0)
      if(!ixvals_has(was, now->v[i].idx, now->v[i].value))
        ix_remove(&s->idx[now->v[i].idx].values, now->v[i].value, key);
    return rc;
  }
  for(i = 0; was && i < was->n; i++)
    if(!ixvals_has(now, was->v[i].idx, was->v[i].value))
      ix_remove(&s->idx[was->v[i].idx].values, was->v[i].value, key);
  return KCR_OK;
}

kcr_obj *kcr_store_ref_key(kcr_store *s, const char *key)
{
  struct entry *e;
  kcr_obj *o = NULL;
  if(!rdlock(s))
    return NULL;
  e = tfind(&s->objs, key, hash_str(key));
  if(e)
    o = kcr_obj_ref(e->val);
  pthread_rwlock_unlock(&s->lock);
  return o;
}

/* "ns/name" (or "name") in buf[512], or in a new heap block for longer
 * keys; NULL if that block cannot be had. Free with key_free. */
static char *key_make(char buf[512], const char *ns, const char *name)
{
  size_t a = ns ? strlen(ns) : 0, b = strlen(name);
  char *key = buf;

  if(a + b + 2 > 512 && !(key = malloc(a + b + 2)))
    return NULL;
  if(a) {
    memcpy(key, ns, a);
    key[a] = '/';
    memcpy(key + a + 1, name, b + 1);
  } else {
    memcpy(key, name, b + 1);
  }
  return key;
}

static void key_free(char buf[512], char *key)
{
  if(key != buf)
    free(key);
}

kcr_obj *kcr_store_ref(kcr_store *s, const char *ns, const char *name)
{
  char buf[512], *key = key_make(buf, ns, name);
  kcr_obj *o = key ? kcr_store_ref_key(s, key) : NULL;
  key_free(buf, key);
  return o;
}

static kcr_err grow_refs(kcr_obj ***arr, size_t *cap, size_t need)
{
  kcr_obj **n;
  if(need <= *cap)
    return KCR_OK;
  n = realloc(*arr, (need > *cap * 2 ? need : *cap * 2) * sizeof(*n));
  if(!n)
    return KCR_ENOMEM;
  *cap = need > *cap * 2 ? need : *cap * 2;
  *arr = n;
  return KCR_OK;
}

/* References to every object (index NULL) or to those under index/value. */
static kcr_err ref_list(kcr_store *s, const char *index, const char *value,
                        kcr_obj ***objs, size_t *n)
{
  kcr_obj **arr = NULL;
  size_t cnt = 0, cap = 0;
  kcr_err rc = KCR_OK;

  *objs = NULL;
  *n = 0;
  if(!rdlock(s))
    return KCR_ENOMEM; /* the reader limit: a resource ran out */
  if(index) {
    struct index *ix = NULL;
    for(size_t i = 0; i < s->nidx; i++)
      if(!strcmp(s->idx[i].name, index))
        ix = &s->idx[i];
    struct entry *e = ix ? tfind(&ix->values, value, hash_str(value)) : NULL;
    struct keyset *ks = e ? e->val : NULL;
    if(!ix) {
      rc = KCR_EINVAL;
    } else if(ks && !(rc = grow_refs(&arr, &cap, ks->n))) {
      for(size_t i = 0; i < ks->n; i++) {
        struct entry *oe = tfind(&s->objs, ks->keys[i], hash_str(ks->keys[i]));
        KCR_ASSERT(oe != NULL); /* indexes mirror the table */
        if(oe)
          arr[cnt++] = kcr_obj_ref(oe->val);
      }
    }
  } else if(!(rc = grow_refs(&arr, &cap, s->objs.n ? s->objs.n : 1))) {
    struct kcr_htab_iter it;
    struct kcr_hnode *hn;
    kcr_htab_iter_init(&it, &s->objs);
    while((hn = kcr_htab_iter_next(&it)))
      arr[cnt++] = kcr_obj_ref(entry_of(hn)->val);
  }
  pthread_rwlock_unlock(&s->lock);
  if(rc) {
    kcr_objs_unref(arr, cnt);
    return rc;
  }
  *objs = arr;
  *n = cnt;
  return KCR_OK;
}

kcr_err kcr_store_ref_all(kcr_store *s, kcr_obj ***objs, size_t *n)
{
  return ref_list(s, NULL, NULL, objs, n);
}

kcr_err kcr_store_ref_by_index(kcr_store *s, const char *index, const char *value,
                               kcr_obj ***objs, size_t *n)
{
  if(!index || !value) {
    *objs = NULL;
    *n = 0;
    return KCR_EINVAL;
  }
  return ref_list(s, index, value, objs, n);
}

void kcr_objs_unref(kcr_obj **objs, size_t n)
{
  if(!objs)
    return;
  for(size_t i = 0; i < n; i++)
    kcr_obj_unref(objs[i]);
  free(objs);
}

size_t kcr__store_max_chain(kcr_store *s)
{
  size_t max;
  if(!rdlock(s))
    return 0;
  max = kcr__htab_longest_chain(&s->objs);
  pthread_rwlock_unlock(&s->lock);
  return max;
}

size_t kcr__store_buckets(kcr_store *s)
{
  size_t n = 0;
  if(rdlock(s)) {
    n = s->objs.nb;
    pthread_rwlock_unlock(&s->lock);
  }
  return n;
}

size_t kcr_store_len(kcr_store *s)
{
  size_t n = 0;
  if(rdlock(s)) {
    n = s->objs.n;
    pthread_rwlock_unlock(&s->lock);
  }
  return n;
}

size_t kcr_store_bytes(kcr_store *s)
{
  size_t n = 0;
  if(rdlock(s)) {
    n = s->bytes;
    pthread_rwlock_unlock(&s->lock);
  }
  return n;
}

kcr_err kcr_store_put(kcr_store *s, kcr_obj *o, kcr_obj **old)
{
  uint64_t h = hash_str(o->key);
  struct ixvals *vals = NULL, *was = NULL;
  struct entry *fresh = NULL, *e;
  kcr_obj *prev = NULL;
  kcr_err rc;

  *old = NULL;
  /* Everything that can fail or runs user code, before the lock. */
  rc = collect_values(s, o, &vals);
  if(!rc && !(fresh = calloc(1, sizeof(*fresh))))
    rc = KCR_ENOMEM;
  if(rc)
    goto out;
  pthread_rwlock_wrlock(&s->lock);
  s->written = true;
  e = tfind(&s->objs, o->key, h);
  if(!e) /* room for the new key first: then linking it cannot fail */
    rc = kcr_htab_reserve(&s->objs, s->objs.n + 1);
  if(!rc)
    rc = ix_move(s, o->key, e ? e->ixv : NULL, vals);
  if(!rc && e) {
    prev = e->val;
    was = e->ixv;
    s->bytes -= prev->size;
    e->val = o;
    e->key = o->key;
    e->ixv = vals;
    vals = NULL;
  } else if(!rc) {
    *fresh = (struct entry){.key = o->key, .val = o, .ixv = vals};
    rc = kcr_htab_insert(&s->objs, &fresh->hn, h);
    KCR_ASSERT(rc == KCR_OK); /* reserved above */
    fresh = NULL;
    vals = NULL;
  }
  if(!rc)
    s->bytes += o->size;
  pthread_rwlock_unlock(&s->lock);
  *old = prev; /* the table's reference moves to the caller */
out:
  ixvals_free(vals);
  ixvals_free(was);
  free(fresh);
  return rc;
}

void kcr_store_delete_key(kcr_store *s, const char *key, kcr_obj **old)
{
  struct entry *e;

  *old = NULL;
  pthread_rwlock_wrlock(&s->lock);
  e = tunlink(&s->objs, key, hash_str(key));
  if(e) {
    ix_move(s, key, e->ixv, NULL); /* removals only: cannot fail */
    s->bytes -= ((kcr_obj *)e->val)->size;
  }
  pthread_rwlock_unlock(&s->lock);
  if(e) {
    *old = e->val; /* the table's reference moves to the caller */
    ixvals_free(e->ixv);
    free(e);
  }
}

kcr_err kcr_store_delete(kcr_store *s, const char *ns, const char *name, kcr_obj **old)
{
  char buf[512], *key = key_make(buf, ns, name);

  *old = NULL;
  if(!key)
    return KCR_ENOMEM; /* only for keys longer than any valid name */
  kcr_store_delete_key(s, key, old);
  key_free(buf, key);
  return KCR_OK;
}

/* The parts of a store that kcr_store_replace swaps. */
struct snapshot {
  struct kcr_htab objs;
  struct kcr_htab *values; /* one per index */
  size_t bytes;
};

static void snapshot_clear(struct snapshot *sn, size_t nidx, bool drop_objs)
{
  tclear(&sn->objs, drop_objs ? obj_unref_void : NULL, false);
  for(size_t i = 0; sn->values && i < nidx; i++)
    tclear(&sn->values[i], keyset_free, true);
  free(sn->values);
  sn->values = NULL;
}

kcr_err kcr_store_replace(kcr_store *s, kcr_obj **objs, size_t n, kcr_obj ***gone,
                          size_t *ngone)
{
  struct snapshot fresh = {KCR_HTAB_INIT, NULL, 0}, stale = {KCR_HTAB_INIT, NULL, 0};
  struct kcr_htab_iter it;
  struct kcr_hnode *hn;
  kcr_obj **dead = NULL, **dups = NULL;
  size_t ndead = 0, ndups = 0, cap = 0;
  kcr_err rc = KCR_OK;

  *gone = NULL;
  *ngone = 0;
  /* 1. The new table and indexes, outside the lock. */
  if(s->nidx && (!(fresh.values = calloc(s->nidx, sizeof(*fresh.values))) ||
                 !(stale.values = calloc(s->nidx, sizeof(*stale.values)))))
    rc = KCR_ENOMEM;
  if(!rc && n && !(dups = calloc(n, sizeof(*dups))))
    rc = KCR_ENOMEM;
  if(!rc && n)
    rc = kcr_htab_reserve(&fresh.objs, n); /* then inserts cannot fail */
  for(size_t i = 0; i < n && !rc; i++) {
    uint64_t h = hash_str(objs[i]->key);
    struct entry *e = tfind(&fresh.objs, objs[i]->key, h);
    struct ixvals *vals = NULL;
    if((rc = collect_values(s, objs[i], &vals)))
      break;
    if(e) { /* a duplicate in the input: the later one wins */
      fresh.bytes -= ((kcr_obj *)e->val)->size;
      dups[ndups++] = e->val;
      ixvals_free(e->ixv);
      e->val = objs[i];
      e->key = objs[i]->key;
      e->ixv = vals;
    } else if(!(e = tinsert(&fresh.objs, objs[i]->key, h, objs[i]))) {
      ixvals_free(vals);
      rc = KCR_ENOMEM;
      break;
    } else {
      e->ixv = vals;
    }
    fresh.bytes += objs[i]->size;
  }
  kcr_htab_iter_init(&it, &fresh.objs);
  while(!rc && (hn = kcr_htab_iter_next(&it))) {
    struct entry *e = entry_of(hn);
    for(size_t j = 0; e->ixv && j < e->ixv->n && !rc; j++)
      rc = ix_add(&fresh.values[e->ixv->v[j].idx], e->ixv->v[j].value, e->key);
  }
  /* 2. What vanishes: the single writer is the only one changing the
   * table, so reading it unlocked here is safe. */
  kcr_htab_iter_init(&it, &s->objs);
  while(!rc && (hn = kcr_htab_iter_next(&it))) {
    struct entry *e = entry_of(hn);
    if(!tfind(&fresh.objs, e->key, e->hn.hash) &&
       !(rc = grow_refs(&dead, &cap, ndead + 1)))
      dead[ndead++] = e->val;
  }
  if(rc) { /* nothing changed; the caller keeps every reference */
    snapshot_clear(&fresh, s->nidx, false);
    free(stale.values);
    free(dead);
    free(dups);
    return rc;
  }
  /* 3. The swap: pointers only. */
  pthread_rwlock_wrlock(&s->lock);
  s->written = true;
  stale.objs = s->objs;
  s->objs = fresh.objs;
  stale.bytes = s->bytes;
  s->bytes = fresh.bytes;
  for(size_t i = 0; i < s->nidx; i++) {
    stale.values[i] = s->idx[i].values;
    s->idx[i].values = fresh.values[i];
  }
  pthread_rwlock_unlock(&s->lock);
  free(fresh.values);
  /* 4. Outside the lock: drop the old table's references except those that
   * move to *gone, then the duplicates' (the store keeps the later one). */
  kcr_htab_iter_init(&it, &stale.objs);
  while((hn = kcr_htab_iter_next(&it)))
    if(tfind(&s->objs, entry_of(hn)->key, hn->hash)) /* still present: a newer copy */
      kcr_obj_unref(entry_of(hn)->val);
  snapshot_clear(&stale, s->nidx, false);
  for(size_t i = 0; i < ndups; i++)
    kcr_obj_unref(dups[i]);
  free(dups);
  *gone = dead;
  *ngone = ndead;
  return KCR_OK;
}

void kcr__store_clear(kcr_store *s)
{
  pthread_rwlock_wrlock(&s->lock);
  s->written = true;
  tclear(&s->objs, obj_unref_void, false);
  for(size_t i = 0; i < s->nidx; i++)
    tclear(&s->idx[i].values, keyset_free, true);
  s->bytes = 0;
  pthread_rwlock_unlock(&s->lock);
}

/* An object's text as up to three pieces: all of it but its status member
 * (name, value and the comma that joins it) and its resourceVersion's
 * value. */
struct cut {
  const char *p[3];
  size_t n[3];
};

static bool cut_of(const kcr_obj *o, struct cut *c)
{
  static const char *const paths[] = {"/status", "/metadata/resourceVersion"};
  static const char name[] = "\"status\":";
  const size_t nl = sizeof(name) - 1;
  struct kcr_span sp[2];
  size_t len;
  const char *t = kcr_obj_json(o, &len), *end = t + len, *from[2], *to[2];
  int k = 0;

  kcr_obj_spans(o, paths, sp, 2);
  if(!sp[1].at)
    return false;
  if(sp[0].at) {
    const char *s = sp[0].at - nl, *e = sp[0].at + sp[0].n;
    if(sp[0].at - t < (ptrdiff_t)nl || memcmp(s, name, nl))
      return false;
    if(s > t && s[-1] == ',')
      s--;
    else if(e < end && *e == ',')
      e++;
    from[k] = s, to[k++] = e;
  }
  from[k] = sp[1].at, to[k++] = sp[1].at + sp[1].n;
  if(k == 2 && from[1] < from[0]) {
    const char *f = from[0], *e = to[0];
    from[0] = from[1], to[0] = to[1], from[1] = f, to[1] = e;
  }
  if(k == 2 && to[0] > from[1])
    return false; /* overlapping: not a text this reads */
  memset(c, 0, sizeof(*c));
  c->p[0] = t, c->n[0] = (size_t)(from[0] - t);
  c->p[1] = to[0], c->n[1] = (size_t)((k == 2 ? from[1] : end) - to[0]);
  if(k == 2)
    c->p[2] = to[1], c->n[2] = (size_t)(end - to[1]);
  return true;
}

static bool cuts_equal(const struct cut *x, const struct cut *y)
{
  size_t i = 0, j = 0, oi = 0, oj = 0;
  if(x->n[0] + x->n[1] + x->n[2] != y->n[0] + y->n[1] + y->n[2])
    return false;
  while(i < 3 && j < 3) {
    size_t k;
    if(oi == x->n[i]) {
      i++, oi = 0;
      continue;
    }
    if(oj == y->n[j]) {
      j++, oj = 0;
      continue;
    }
    k = x->n[i] - oi < y->n[j] - oj ? x->n[i] - oi : y->n[j] - oj;
    if(memcmp(x->p[i] + oi, y->p[j] + oj, k))
      return false;
    oi += k, oj += k;
  }
  return true;
}

bool kcr__obj_same_but_status(const kcr_obj *a, const kcr_obj *b)
{
  struct cut x, y;
  return cut_of(a, &x) && cut_of(b, &y) && cuts_equal(&x, &y);
}

kcr_err kcr__obj_list_push(struct kcr__obj_list *l, kcr_obj *o)
{
  if(l->n == l->cap) {
    size_t ncap = l->cap ? l->cap * 2 : 256;
    kcr_obj **n = realloc(l->objs, ncap * sizeof(*n));
    if(!n)
      return KCR_ENOMEM;
    l->objs = n;
    l->cap = ncap;
  }
  l->objs[l->n++] = o;
  return KCR_OK;
}

kcr_err kcr__obj_list_add(const char *text, size_t len, void *ud)
{
  struct kcr__obj_list *l = ud;
  kcr_obj *o;
  kcr_err rc;

  if(l->quit && atomic_load(l->quit))
    return KCR_ECANCELED;
  rc = kcr__obj_from_text(text, len, l->flags | KCR__OBJ_CHECKED, l->proj, NULL, 0, &o,
                          NULL);
  if(rc == KCR_EINVAL) {
    KCR_LOG(KCR_LOG_WARN, "skipping a listed item without a name", KCR_S("by", l->who));
    return KCR_OK;
  }
  if(!rc && (rc = kcr__obj_list_push(l, o)))
    kcr_obj_unref(o);
  return rc;
}

void *kcr__obj_view(const struct kcr_type *t, const kcr_obj *o, struct kcr_arena *a,
                    const char *who)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  size_t len = 0;
  const char *json = kcr_obj_json(o, &len); /* checked when it was stored */
  void *v = kcr_arena_alloc(a, t->size);
  kcr_err rc =
      v ? kcr_typed_decode(t, json, len, KCR_TYPED_TRUSTED, a, v, &ei) : KCR_ENOMEM;

  if(rc) {
    KCR_LOG(KCR_LOG_ERROR,
            "an object does not decode as its type: its typed callback is "
            "not called",
            KCR_S("by", who), KCR_S("object", kcr_obj_key(o)), KCR_S("type", t->name),
            KCR_S("error", ei.message ? ei.message : kcr_strerror(rc)));
    v = NULL;
  }
  kcr_errinfo_cleanup(&ei);
  return v;
}
