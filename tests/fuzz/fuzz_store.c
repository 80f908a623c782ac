/* The informer cache: kcr_obj_from_json on any served object (the header:
 * namespace, name, uid, resourceVersion, generation, deletion, controller
 * owner; the compact text without managedFields), the same through a
 * keep-list (cache projection), and the store's writes -
 * kcr_store_put, kcr_store_replace, kcr_store_delete(_key) - with the
 * controller-uid index, checked against a plain model of the contents.
 * Input: JSON, an array of objects (or one object), at most MAX_OBJS used.
 * Checked: the header agrees with the tree; the text parses back
 * (kcr_obj_parse) to a tree with the same name; after every write, lookups
 * by key and by namespace/name, the index, kcr_store_len and
 * kcr_store_bytes agree with the model; a put or a delete hands back the
 * object the model had under that key. The input's text itself (and each
 * element's, for an array) also goes through kcr__obj_from_text, the
 * watch's way, which must make what the tree's way makes. */
#include "core/json-int.h"
#include "fuzz.h"
#include "kube/watch-int.h"
#include "runtime/projection-int.h"
#include "runtime/store-int.h"

#define MAX_OBJS 64

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
  fuzz_quiet();
  return 0;
}

/* The number of members of o named key. */
static int members(const cJSON *o, const char *key)
{
  const cJSON *it, *obj = cJSON_IsObject(o) ? o : NULL;
  int n = 0;
  cJSON_ArrayForEach(it, obj) { n += it->string && !strcmp(it->string, key); }
  return n;
}

static void check_header(const cJSON *tree, kcr_obj *o)
{
  const char *ns = kcr_json_str(tree, "/metadata/namespace");
  const char *name = kcr_json_str(tree, "/metadata/name");
  const char *uid = kcr_json_str(tree, "/metadata/uid");
  const char *rv = kcr_json_str(tree, "/metadata/resourceVersion");
  const struct kcr_owner *ow = kcr_obj_controller(o);
  char key[4096];
  size_t len = 0;
  cJSON *back = NULL;

  FUZZ_CHECK(!strcmp(kcr_obj_name(o), name));
  FUZZ_CHECK(!strcmp(kcr_obj_ns(o), ns ? ns : ""));
  FUZZ_CHECK(!strcmp(kcr_obj_uid(o), uid ? uid : ""));
  FUZZ_CHECK(!strcmp(kcr_obj_rv(o), rv ? rv : ""));
  FUZZ_CHECK(kcr_obj_generation(o) == kcr_json_int(tree, "/metadata/generation", 0));
  /* set: a string, one holding \u0000 too (a Raw node in the tree) */
  FUZZ_CHECK(kcr_obj_deleting(o) ==
             (kcr_json_str(tree, "/metadata/deletionTimestamp") != NULL ||
              kcr__json_nul_string(kcr_json_at(tree, "/metadata/deletionTimestamp"))));
  if(ns && *ns)
    snprintf(key, sizeof(key), "%s/%s", ns, name);
  else
    snprintf(key, sizeof(key), "%s", name);
  if(strlen(key) < sizeof(key) - 1)
    FUZZ_CHECK(!strcmp(kcr_obj_key(o), key));
  FUZZ_CHECK(!ow->uid == !ow->name && !ow->uid == !ow->kind &&
             !ow->uid == !ow->api_version);
  FUZZ_CHECK(strlen(kcr_obj_json(o, &len)) == len);
  FUZZ_CHECK(kcr_obj_size(o) > len);
  FUZZ_CHECK(kcr_obj_parse(o, &back) == KCR_OK);
  FUZZ_CHECK(!strcmp(kcr_json_str(back, "/metadata/name"), name));
  /* Dropped; of a duplicate key (never served) only the first. */
  if(members(kcr_json_at(tree, "/metadata"), "managedFields") <= 1)
    FUZZ_CHECK(kcr_json_at(back, "/metadata/managedFields") == NULL);
  cJSON_Delete(back);
}

static bool same_str(const char *a, const char *b)
{
  return a == b || (a && b && !strcmp(a, b));
}

/* The same object made through a keep-list (kcr_informer_opts.keep): the
 * same header, a text no longer than whole's, and of what it parses back to
 * only kept members: the metadata, spec, and status.conditions. */
static void check_projection(const cJSON *tree, const kcr_obj *whole)
{
  static struct kcr__proj *p; /* for the process */
  const struct kcr_owner *a, *b;
  kcr_obj *o = NULL;
  cJSON *back = NULL, *m;
  size_t len, wlen;

  if(!p && kcr__proj_new((const char *[]){"/spec", "/status/conditions", NULL}, 0, &p))
    abort();
  FUZZ_CHECK(kcr__obj_from_json(tree, 0, p, &o, NULL) == KCR_OK);
  a = kcr_obj_controller(o);
  b = kcr_obj_controller(whole);
  FUZZ_CHECK(!strcmp(kcr_obj_key(o), kcr_obj_key(whole)));
  FUZZ_CHECK(!strcmp(kcr_obj_uid(o), kcr_obj_uid(whole)));
  FUZZ_CHECK(!strcmp(kcr_obj_rv(o), kcr_obj_rv(whole)));
  FUZZ_CHECK(kcr_obj_generation(o) == kcr_obj_generation(whole));
  FUZZ_CHECK(kcr_obj_deleting(o) == kcr_obj_deleting(whole));
  FUZZ_CHECK(same_str(a->uid, b->uid) && same_str(a->name, b->name));
  kcr_obj_json(o, &len);
  kcr_obj_json(whole, &wlen);
  FUZZ_CHECK(len <= wlen);
  FUZZ_CHECK(kcr_obj_parse(o, &back) == KCR_OK);
  FUZZ_CHECK(!strcmp(kcr_json_str(back, "/metadata/name"), kcr_obj_name(o)));
  cJSON_ArrayForEach(m, back)
  {
    FUZZ_CHECK(!strcmp(m->string, "apiVersion") || !strcmp(m->string, "kind") ||
               !strcmp(m->string, "metadata") || !strcmp(m->string, "spec") ||
               !strcmp(m->string, "status"));
  }
  cJSON_ArrayForEach(m, kcr_json_at(back, "/status"))
  {
    FUZZ_CHECK(!strcmp(m->string, "conditions"));
  }
  cJSON_Delete(back);
  kcr_obj_unref(o);
}

/* As the informer makes it from a watch event (checked text only): the
 * event's spans of metadata and managedFields are the first members of
 * those names, and stepping over them makes the object a (ra its code),
 * byte for byte. */
static void check_from_event(const char *text, size_t len, unsigned flags,
                             const struct kcr__proj *pj, const kcr_obj *a, kcr_err ra)
{
  static const char head[] = "{\"type\":\"ADDED\",\"object\":";
  struct kcr_buf line = KCR_BUF_INIT, rv = KCR_BUF_INIT;
  struct kcr__json_want w[2] = {{.path = "/metadata"},
                                {.path = "/metadata/managedFields"}};
  struct kcr_watch_event ev;
  kcr_obj *o = NULL;

  kcr_buf_append(&line, head, sizeof(head) - 1);
  kcr_buf_append(&line, text, len);
  kcr_buf_append(&line, "}", 1);
  if(kcr_buf_err(&line) || kcr__watch_decode_text(line.ptr, line.len, &rv, &ev))
    goto out; /* (escapes in the resourceVersion: a tree event) */
  kcr__json_spans(ev.object_text, ev.object_len, w, 2);
  FUZZ_CHECK(ev.object_len == len && w[0].at == ev.metadata_text &&
             w[0].n == ev.metadata_len && w[1].at == ev.managed_fields_text &&
             w[1].n == ev.managed_fields_len);
  const struct kcr__json_want known[2] = {
      {.at = ev.metadata_text, .n = ev.metadata_len},
      {.at = ev.managed_fields_text, .n = ev.managed_fields_len}};
  FUZZ_CHECK(kcr__obj_from_text(ev.object_text, ev.object_len, flags, pj, known, 2, &o,
                                NULL) == ra);
  if(!ra) {
    size_t an, on;
    const char *at = kcr_obj_json(a, &an), *ot = kcr_obj_json(o, &on);
    FUZZ_CHECK(an == on && !memcmp(at, ot, an));
    FUZZ_CHECK(!strcmp(kcr_obj_key(a), kcr_obj_key(o)) &&
               !strcmp(kcr_obj_rv(a), kcr_obj_rv(o)) &&
               kcr_obj_generation(a) == kcr_obj_generation(o));
  }
out:
  kcr_obj_unref(o);
  kcr_buf_cleanup(&line);
  kcr_buf_cleanup(&rv);
}

/* kcr__obj_from_text (a watch event's object as written) against the
 * tree's way, kcr_json_parse + kcr__obj_from_json: the same return code,
 * header and, parsed and printed again, text; for flags 0 and
 * KCR_OBJ_KEEP_MANAGED_FIELDS, whole and projected, and with
 * KCR__OBJ_CHECKED when the text is one compact, well-formed object. */
static void check_text(const char *text, size_t len)
{
  static struct kcr__proj *p;
  size_t objlen;
  bool compact;
  if(!p && kcr__proj_new((const char *[]){"/spec/replicas", "/status", NULL}, 0, &p))
    abort();
  kcr__json_scan(text, len, NULL, 0, &objlen, &compact);
  for(int i = 0; i < 8; i++) {
    unsigned flags = i & 1 ? KCR_OBJ_KEEP_MANAGED_FIELDS : 0;
    const struct kcr__proj *pj = i & 2 ? p : NULL;
    if(i & 4) { /* as the informer gives it: checked before */
      if(!compact || objlen != len)
        continue;
      flags |= KCR__OBJ_CHECKED;
    }
    kcr_obj *a = NULL, *b = NULL;
    cJSON *tree = NULL, *ta = NULL, *tb = NULL;
    kcr_err ra = kcr__obj_from_text(text, len, flags, pj, NULL, 0, &a, NULL), rb;
    const struct kcr_owner *oa, *ob;
    char *sa, *sb;
    rb = kcr_json_parse(text, len, &tree, NULL);
    if(!rb)
      rb = kcr__obj_from_json(tree, flags & ~KCR__OBJ_CHECKED, pj, &b, NULL);
    cJSON_Delete(tree);
    FUZZ_CHECK(ra == rb && !a == !!ra && !b == !!rb);
    if(i & 4)
      check_from_event(text, len, flags, pj, a, ra);
    if(ra)
      continue;
    oa = kcr_obj_controller(a);
    ob = kcr_obj_controller(b);
    FUZZ_CHECK(!strcmp(kcr_obj_key(a), kcr_obj_key(b)));
    FUZZ_CHECK(!strcmp(kcr_obj_ns(a), kcr_obj_ns(b)));
    FUZZ_CHECK(!strcmp(kcr_obj_name(a), kcr_obj_name(b)));
    FUZZ_CHECK(!strcmp(kcr_obj_uid(a), kcr_obj_uid(b)));
    FUZZ_CHECK(!strcmp(kcr_obj_rv(a), kcr_obj_rv(b)));
    FUZZ_CHECK(kcr_obj_generation(a) == kcr_obj_generation(b));
    FUZZ_CHECK(kcr_obj_deleting(a) == kcr_obj_deleting(b));
    FUZZ_CHECK(same_str(oa->api_version, ob->api_version) &&
               same_str(oa->kind, ob->kind) && same_str(oa->name, ob->name) &&
               same_str(oa->uid, ob->uid));
    FUZZ_CHECK(kcr_obj_parse(a, &ta) == KCR_OK && kcr_obj_parse(b, &tb) == KCR_OK);
    sa = kcr_json_to_text(ta);
    sb = kcr_json_to_text(tb);
    FUZZ_CHECK(sa && sb && !strcmp(sa, sb));
    free(sa);
    free(sb);
    cJSON_Delete(ta);
    cJSON_Delete(tb);
    kcr_obj_unref(a);
    kcr_obj_unref(b);
  }
}

/* The model: the object under each key, in put order (latest wins). */
struct model {
  kcr_obj *v[MAX_OBJS];
  size_t n;
};

static size_t model_find(const struct model *m, const char *key)
{
  for(size_t i = 0; i < m->n; i++)
    if(!strcmp(kcr_obj_key(m->v[i]), key))
      return i;
  return m->n;
}

/* Puts o in the model; returns what it replaced (or NULL). */
static kcr_obj *model_put(struct model *m, kcr_obj *o)
{
  size_t i = model_find(m, kcr_obj_key(o));
  kcr_obj *old = i < m->n ? m->v[i] : NULL;
  m->v[i] = o;
  if(i == m->n)
    m->n++;
  return old;
}

static bool in(kcr_obj **v, size_t n, const kcr_obj *o)
{
  for(size_t i = 0; i < n; i++)
    if(v[i] == o)
      return true;
  return false;
}

static void check_store(kcr_store *s, const struct model *m)
{
  size_t bytes = 0;

  FUZZ_CHECK(kcr_store_len(s) == m->n);
  for(size_t i = 0; i < m->n; i++) {
    kcr_obj *o = m->v[i], *got = kcr_store_ref_key(s, kcr_obj_key(o)), **idx = NULL;
    const char *uid = kcr_obj_controller(o)->uid;
    size_t nidx = 0;
    bytes += kcr_obj_size(o);
    FUZZ_CHECK(got == o);
    kcr_obj_unref(got);
    if(!strchr(kcr_obj_ns(o), '/') && !strchr(kcr_obj_name(o), '/')) {
      got = kcr_store_ref(s, kcr_obj_ns(o), kcr_obj_name(o));
      FUZZ_CHECK(got == o);
      kcr_obj_unref(got);
    }
    if(uid && *uid) {
      FUZZ_CHECK(kcr_store_ref_by_index(s, KCR_INDEX_CONTROLLER, uid, &idx, &nidx) ==
                 KCR_OK);
      FUZZ_CHECK(in(idx, nidx, o));
      for(size_t j = 0; j < nidx; j++)
        FUZZ_CHECK(!strcmp(kcr_obj_controller(idx[j])->uid, uid));
      kcr_objs_unref(idx, nidx);
    }
  }
  FUZZ_CHECK(kcr_store_bytes(s) == bytes);
}

static void exercise(kcr_obj **objs, size_t n)
{
  struct model m = {0}, half = {0};
  kcr_obj **refs, **gone = NULL, *old;
  size_t ngone = 0;
  kcr_store *s = NULL;

  FUZZ_CHECK(kcr_store_new(NULL, &s, NULL) == KCR_OK);
  FUZZ_CHECK(kcr_store_add_index(s, KCR_INDEX_CONTROLLER, kcr_index_controller) ==
             KCR_OK);
  for(size_t i = 0; i < n; i++) { /* put, one by one */
    FUZZ_CHECK(kcr_store_put(s, kcr_obj_ref(objs[i]), &old) == KCR_OK);
    FUZZ_CHECK(old == model_put(&m, objs[i]));
    kcr_obj_unref(old);
    check_store(s, &m);
  }
  /* replace with the same objects: nothing is gone */
  refs = malloc((n ? n : 1) * sizeof(*refs));
  FUZZ_CHECK(refs);
  for(size_t i = 0; i < n; i++)
    refs[i] = kcr_obj_ref(objs[i]);
  FUZZ_CHECK(kcr_store_replace(s, refs, n, &gone, &ngone) == KCR_OK);
  FUZZ_CHECK(ngone == 0);
  kcr_objs_unref(gone, ngone);
  check_store(s, &m);
  /* replace with the first half: the rest of the keys are gone */
  for(size_t i = 0; i < n / 2; i++) {
    refs[i] = kcr_obj_ref(objs[i]);
    model_put(&half, objs[i]);
  }
  FUZZ_CHECK(kcr_store_replace(s, refs, n / 2, &gone, &ngone) == KCR_OK);
  FUZZ_CHECK(ngone == m.n - half.n);
  for(size_t i = 0; i < ngone; i++) {
    FUZZ_CHECK(in(m.v, m.n, gone[i]));
    FUZZ_CHECK(model_find(&half, kcr_obj_key(gone[i])) == half.n);
  }
  kcr_objs_unref(gone, ngone);
  free(refs);
  check_store(s, &half);
  /* delete everything */
  for(size_t i = 0; i < half.n; i++) {
    kcr_store_delete_key(s, kcr_obj_key(half.v[i]), &old);
    FUZZ_CHECK(old == half.v[i]);
    kcr_obj_unref(old);
  }
  FUZZ_CHECK(kcr_store_len(s) == 0 && kcr_store_bytes(s) == 0);
  kcr_store_free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  kcr_obj *objs[MAX_OBJS];
  cJSON *doc = NULL, *list, *it;
  size_t n = 0;

  /* The input as written: the object, or each element of the array. */
  check_text((const char *)data, size);
  if(size && *data == '[') {
    struct kcr__json_iter el;
    const char *key, *at;
    size_t kl, vn;
    kcr__json_iter_init(&el, (const char *)data, size);
    while(kcr__json_iter_next(&el, &key, &kl, &at, &vn) > 0)
      check_text(at, vn);
  }
  if(kcr_json_parse((const char *)data, size, &doc, NULL))
    return 0;
  list = cJSON_IsArray(doc) ? doc : NULL;
  cJSON_ArrayForEach(it, list)
  {
    const char *name = kcr_json_str(it, "/metadata/name");
    struct kcr_errinfo ei = KCR_ERRINFO_INIT;
    kcr_err rc;
    char *compact;
    if(n == MAX_OBJS)
      break;
    if((compact = kcr_json_to_text(it))) { /* as the server writes it */
      check_text(compact, strlen(compact));
      free(compact);
    }
    rc = kcr_obj_from_json(it, n & 1 ? KCR_OBJ_KEEP_MANAGED_FIELDS : 0, &objs[n], &ei);
    if(!name || !*name) {
      FUZZ_CHECK(rc == KCR_EINVAL && objs[n] == NULL && ei.message);
    } else {
      FUZZ_CHECK(rc == KCR_OK);
      if(!(n & 1)) {
        check_header(it, objs[n]);
        check_projection(it, objs[n]);
      }
      n++;
    }
    kcr_errinfo_cleanup(&ei);
  }
  if(cJSON_IsObject(doc) && kcr_obj_from_json(doc, 0, &objs[n], NULL) == KCR_OK) {
    check_header(doc, objs[n]);
    n++;
  }
  exercise(objs, n);
  for(size_t i = 0; i < n; i++)
    kcr_obj_unref(objs[i]);
  cJSON_Delete(doc);
  return 0;
}
