/* Status conditions from served JSON: kcr_cond_validate_json on the array,
 * kcr_cond_from_json on each item, and kcr_cond_set / kcr_cond_remove with
 * each item's view as the input, applied to a copy of the array.
 * Input: JSON; the conditions are the document itself when it is an array,
 * else its status.conditions.
 * Checked: kcr_cond_set validates as kcr_cond_validate does; on success the
 * array holds the condition (equal ignoring time) and a second set with the
 * same input changes nothing; on failure the array is exactly as before;
 * after a remove the type is gone; kcr_cond_to_json of a valid view reads
 * back equal; a valid array equals itself ignoring time. */
#include "fuzz.h"

#define NOW     ((time_t)1780000000) /* 2026-05-28 */
#define MAX_SET 16                   /* items tried as kcr_cond_set input */

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
  fuzz_quiet();
  return 0;
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
  conds = cJSON_IsArray(doc) ? doc : kcr_json_at(doc, "status.conditions");
  rc = kcr_cond_validate_json(conds, &ei);
  if(!conds || cJSON_IsArray(conds))
    FUZZ_CHECK(rc == KCR_OK || (rc == KCR_EINVALID && ei.message));
  else
    FUZZ_CHECK(rc == KCR_EINVAL);
  kcr_errinfo_cleanup(&ei);
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
