/* Status conditions from served JSON: kcr_cond_validate_json on the array,
 * kcr_cond_from_json on each item, and kcr_cond_set / kcr_cond_remove with
 * each item's view as the input, applied to a copy of the array.
 * Input: JSON; the conditions are the document itself when it is an array,
 * else its status.conditions.
 * Checked: kcr_cond_set validates as kcr_cond_validate does; on success the
 * array holds the condition (equal ignoring time) and a second set with the
 * same input changes nothing; on failure the array is exactly as before;
 * after a remove the type is gone; kcr_cond_to_json of a valid view reads
 * back equal; a valid array equals itself ignoring time; for an object,
 * kcr_status_write_text on its text does what kcr_status_write does on its
 * tree (the same result and body byte for byte). */
#include "fuzz.h"
#include "kube/client-int.h"

#define NOW     ((time_t)1780000000) /* 2026-05-28 */
#define MAX_SET 16                   /* items tried as kcr_cond_set input */

static const struct kcr_gvr widgets = {"test.kcr.io", "v1", "widgets", true};

/* Two status writers, each on a wire that keeps the last body written. */
struct sink {
  kcr_client *client;
  kcr_status_writer *w;
  char *body;
  int writes;
};
static struct sink sinks[2];

static kcr_err keep_body(void *ud, const struct kcr__wire_request *req, long *code,
                         long *retry_after_s, kcr__wire_write write, void *wctx,
                         struct kcr_errinfo *ei)
{
  struct sink *k = ud;

  free(k->body);
  k->body = strndup(req->body ? req->body : "", req->body_len);
  k->writes++;
  *code = 200;
  write("{}", 2, wctx);
  return KCR_OK;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  kcr_config *cfg;

  fuzz_quiet();
  cfg = fuzz_config();
  for(int i = 0; i < 2; i++) {
    if(kcr_client_new(&(struct kcr_client_opts){.config = cfg, .max_retries = -1},
                      &sinks[i].client, &ei))
      abort();
    kcr__client_set_wire(sinks[i].client, keep_body, &sinks[i]);
    if(kcr_status_writer_new(
           &(struct kcr_status_writer_opts){.client = sinks[i].client,
                                            .gvr = &widgets,
                                            .api_version = "test.kcr.io/v1",
                                            .kind = "Widget",
                                            .field_manager = "fuzz"},
           &sinks[i].w, &ei))
      abort();
  }
  kcr_config_free(cfg);
  return 0;
}

/* body with each time in [t0, t1] (the writer's "now") written NOW. */
static void now_as_word(char *body, time_t t0, time_t t1)
{
  char t[KCR_RFC3339_LEN], *at;

  for(time_t x = t0; body && x <= t1; x++) {
    kcr_time_format(x, t);
    while((at = strstr(body, t)))
      memcpy(at, "NOW", 3), memmove(at + 3, at + strlen(t), strlen(at + strlen(t)) + 1);
  }
}

/* kcr_status_write_text on the input's bytes does what kcr_status_write
 * does on their tree: the same error, result and requests, the same body
 * byte for byte. Desired: the valid views of the first items, as they are
 * and with the first one's status flipped, with and without an
 * observedGeneration. */
static void check_write_text(const uint8_t *data, size_t size, const cJSON *doc,
                             const cJSON *conds)
{
  struct kcr_cond want[4];
  const cJSON *it;
  size_t n = 0;

  cJSON_ArrayForEach(it, conds)
  {
    if(n == 3)
      break;
    if(!kcr_cond_from_json(it, &want[n]) && !kcr_cond_validate(&want[n], NULL))
      n++;
  }
  want[n] = (struct kcr_cond){"Ready", "True", "R", "m", 1, 0};
  for(int v = 0; v < 4; v++) {
    struct kcr_status_desired d = {
        .conds = want, .n = n + (v == 3), .observed_generation = v & 1 ? 2 : 0};
    enum kcr_write_result res[2];
    kcr_err rc[2];
    time_t t0, t1;

    if(v == 2 && n) /* flip the first */
      want[0].status = strcmp(want[0].status, "True") ? "True" : "False";
    for(int i = 0; i < 2; i++) {
      free(sinks[i].body);
      sinks[i].body = NULL;
      sinks[i].writes = 0;
    }
    t0 = time(NULL) - 1;
    rc[0] = kcr_status_write(sinks[0].w, doc, &d, &res[0], NULL);
    rc[1] =
        kcr_status_write_text(sinks[1].w, (const char *)data, size, &d, &res[1], NULL);
    t1 = time(NULL) + 1;
    FUZZ_CHECK(rc[0] == rc[1] && res[0] == res[1] && sinks[0].writes == sinks[1].writes);
    now_as_word(sinks[0].body, t0, t1);
    now_as_word(sinks[1].body, t0, t1);
    FUZZ_CHECK(!sinks[0].body == !sinks[1].body);
    if(sinks[0].body && strcmp(sinks[0].body, sinks[1].body)) {
      fprintf(stderr, "tree: %s\ntext: %s\n", sinks[0].body, sinks[1].body);
      FUZZ_CHECK(!"the same body");
    }
  }
}

static void check_set(const cJSON *conds, const struct kcr_cond *c)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  cJSON *copy = cJSON_Duplicate(conds, 1);
  struct kcr_cond got;
  bool changed = true, removed = false;
  kcr_err rc, valid;

  if(!copy)
    abort();
  valid = kcr_cond_validate(c, NULL);
  rc = kcr_cond_set(copy, c, NOW, &changed, &ei);
  FUZZ_CHECK(rc == KCR_OK || rc == KCR_EINVALID);
  FUZZ_CHECK((rc == KCR_OK) == (valid == KCR_OK));
  if(rc) {
    FUZZ_CHECK(!changed);
    FUZZ_CHECK(ei.message);
    FUZZ_CHECK(fuzz_same_json(copy, conds));
    goto out;
  }
  /* A set keeps the item's other members, also a lastTransitionTime that
   * does not parse when the status stays, and acts on the first of members
   * with the same key (the API server serves neither): then the item need
   * not read back as set. */
  if(kcr_cond_get(conds, c->type, &got) == KCR_EPARSE ||
     fuzz_has_duplicate_keys(kcr_cond_find(conds, c->type)))
    goto out;
  FUZZ_CHECK(kcr_cond_get(copy, c->type, &got) == KCR_OK);
  FUZZ_CHECK(kcr_cond_equal_ignoring_time(&got, c));
  FUZZ_CHECK(kcr_cond_has_status(copy, c->type, c->status));
  FUZZ_CHECK(kcr_cond_set(copy, c, NOW + 60, &changed, &ei) == KCR_OK);
  FUZZ_CHECK(!changed);
  FUZZ_CHECK(kcr_cond_remove(copy, c->type, &removed) == KCR_OK);
  FUZZ_CHECK(removed);
  FUZZ_CHECK(kcr_cond_find(copy, c->type) == NULL);
out:
  kcr_errinfo_cleanup(&ei);
  cJSON_Delete(copy);
}

static void check_to_json(const struct kcr_cond *c)
{
  struct kcr_cond back;
  cJSON *o;

  if(!c->last_transition_time || kcr_cond_validate(c, NULL))
    return;
  o = kcr_cond_to_json(c);
  FUZZ_CHECK(o != NULL);
  FUZZ_CHECK(kcr_cond_from_json(o, &back) == KCR_OK);
  FUZZ_CHECK(kcr_cond_equal_ignoring_time(&back, c));
  FUZZ_CHECK(back.last_transition_time == c->last_transition_time);
  cJSON_Delete(o);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  cJSON *doc = NULL;
  const cJSON *conds, *it;
  kcr_err rc;
  int n = 0;

  if(kcr_json_parse((const char *)data, size, &doc, NULL))
    return 0;
  conds = cJSON_IsArray(doc) ? doc : kcr_json_at(doc, "/status/conditions");
  rc = kcr_cond_validate_json(conds, &ei);
  if(!conds || cJSON_IsArray(conds))
    FUZZ_CHECK(rc == KCR_OK || (rc == KCR_EINVALID && ei.message));
  else
    FUZZ_CHECK(rc == KCR_EINVAL);
  kcr_errinfo_cleanup(&ei);
  if(cJSON_IsObject(doc))
    check_write_text(data, size, doc, conds);
  if(!cJSON_IsArray(conds))
    goto out;
  if(rc == KCR_OK)
    FUZZ_CHECK(kcr_cond_list_equal_ignoring_time(conds, conds));
  cJSON_ArrayForEach(it, conds)
  {
    struct kcr_cond c;
    if(n++ == MAX_SET)
      break;
    if(kcr_cond_from_json(it, &c) != KCR_OK)
      continue;
    FUZZ_CHECK(c.type && c.status && c.reason && c.message);
    check_set(conds, &c);
    check_to_json(&c);
    (void)kcr_cond_is_true(conds, c.type);
    (void)kcr_cond_is_false(conds, c.type);
    (void)kcr_cond_is_unknown(conds, c.type);
  }
out:
  cJSON_Delete(doc);
  return 0;
}
