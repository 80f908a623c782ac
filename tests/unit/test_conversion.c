/* CRD conversion reviews without a server (kcr_conversion_review): a toy
 * kind whose hub v2 has spec.first, spec.last and spec.nick and whose
 * spoke v1 has spec.name ("first last") and no nick. Objects converted
 * both ways in request order, objects already in the desired version
 * passed through, metadata kept (a converter may change only labels and
 * annotations), the nick kept across a trip through v1 in the round-trip
 * annotation and never shown in v2, a change made through v1 winning over
 * the stored value, failures failing the whole review, reviews that
 * cannot be read, and allocation failures. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kcr/json.h"
#include "kcr/webhook.h"
#include "tfail.h"
#include "ttoy.h"

static const struct kcr_conversion_version v1 = {"v1", ttoy_v1_to_hub, ttoy_v1_from_hub};
static const struct kcr_conversion_opts opts = {.path = "/convert",
                                                .group = "toy.kcr.io",
                                                .hub = "v2",
                                                .versions = &v1,
                                                .nversions = 1};

#define META                                                                             \
  "\"metadata\":{\"name\":\"a\",\"namespace\":\"n\",\"uid\":\"u-a\",\"generation\":"     \
  "9007199254740993,\"resourceVersion\":\"7\",\"managedFields\":[{\"manager\":\"k\"}]}"

static char *review_of(const char *desired, const char *objects)
{
  char *s;
  assert_true(asprintf(&s,
                       "{\"apiVersion\":\"apiextensions.k8s.io/v1\",\"kind\":"
                       "\"ConversionReview\",\"request\":{\"uid\":\"r-1\","
                       "\"desiredAPIVersion\":\"%s\",\"objects\":[%s]}}",
                       desired, objects) > 0);
  return s;
}

/* The answer, parsed; its result status checked against want. */
static cJSON *convert(const char *desired, const char *objects, const char *want)
{
  struct kcr_buf out = KCR_BUF_INIT;
  char *body = review_of(desired, objects);
  cJSON *t = NULL;

  assert_int_equal(
      KCR_OK, kcr_conversion_review(&opts, body, strlen(body), "application/json", &out));
  assert_int_equal(KCR_OK, kcr_json_parse(out.ptr, out.len, &t, NULL));
  assert_string_equal("ConversionReview", kcr_json_str(t, "/kind"));
  if(strcmp(want, kcr_json_str(t, "/response/result/status")))
    fail_msg("result %s, wanted %s: %s", kcr_json_str(t, "/response/result/status"), want,
             out.ptr);
  kcr_buf_cleanup(&out);
  free(body);
  return t;
}

static void objects_convert_both_ways_in_order(void **state)
{
  cJSON *t =
      convert("toy.kcr.io/v2",
              "{\"apiVersion\":\"toy.kcr.io/v1\",\"kind\":\"Toy\"," META
              ",\"spec\":{\"name\":\"Ada Lovelace\"}},"
              "{\"apiVersion\":\"toy.kcr.io/v2\",\"kind\":\"Toy\",\"metadata\":{\"name\":"
              "\"b\"},\"spec\":{\"first\":\"B\",  \"last\":\"C\"}}",
              "Success");

  assert_string_equal("r-1", kcr_json_str(t, "/response/uid"));
  assert_string_equal("toy.kcr.io/v2",
                      kcr_json_str(t, "/response/convertedObjects/0/apiVersion"));
  assert_string_equal("Ada", kcr_json_str(t, "/response/convertedObjects/0/spec/first"));
  assert_string_equal("Lovelace",
                      kcr_json_str(t, "/response/convertedObjects/0/spec/last"));
  assert_null(kcr_json_at(t, "/response/convertedObjects/0/spec/name"));
  /* metadata as it came, exact integers too */
  assert_string_equal("u-a",
                      kcr_json_str(t, "/response/convertedObjects/0/metadata/uid"));
  char *gen = kcr_json_to_text(
      kcr_json_at(t, "/response/convertedObjects/0/metadata/generation"));
  assert_string_equal("9007199254740993", gen);
  free(gen);
  /* already in v2: passed through */
  assert_string_equal("b", kcr_json_str(t, "/response/convertedObjects/1/metadata/name"));
  assert_null(kcr_json_at(t, "/response/convertedObjects/2"));
  cJSON_Delete(t);
  /* and back: managedFields the converter dropped is put back */
  t = convert("toy.kcr.io/v1",
              "{\"apiVersion\":\"toy.kcr.io/v2\",\"kind\":\"Toy\"," META
              ",\"spec\":{\"first\":\"Ada\",\"last\":\"Lovelace\"}}",
              "Success");
  assert_string_equal("Ada Lovelace",
                      kcr_json_str(t, "/response/convertedObjects/0/spec/name"));
  assert_string_equal(
      "k",
      kcr_json_str(t, "/response/convertedObjects/0/metadata/managedFields/0/manager"));
  /* nothing lost: no round-trip annotation */
  assert_null(kcr_json_at(t, "/response/convertedObjects/0/metadata/annotations"));
  cJSON_Delete(t);
}

static void what_v1_cannot_hold_survives_a_trip_through_it(void **state)
{
  cJSON *t = convert(
      "toy.kcr.io/v1",
      "{\"apiVersion\":\"toy.kcr.io/v2\",\"kind\":\"Toy\"," META
      ",\"spec\":{\"first\":\"Ada\",\"last\":\"Lovelace\",\"nick\":\"Enchantress\"}}",
      "Success");
  cJSON *o = kcr_json_at(t, "/response/convertedObjects/0");
  const char *stash =
      kcr_json_str(o, "/metadata/annotations/conversion.kcr.io~1hub-data");
  assert_non_null(stash);
  assert_non_null(strstr(stash, "Enchantress"));
  /* back to v2: the nick is back, the annotation gone */
  char *v1obj = kcr_json_to_text(o);
  cJSON_Delete(t);
  t = convert("toy.kcr.io/v2", v1obj, "Success");
  o = kcr_json_at(t, "/response/convertedObjects/0");
  assert_string_equal("Enchantress", kcr_json_str(o, "/spec/nick"));
  assert_string_equal("Ada", kcr_json_str(o, "/spec/first"));
  assert_null(kcr_json_at(o, "/metadata/annotations"));
  cJSON_Delete(t);
  /* a client changed the name through v1: the change wins, the nick stays */
  cJSON *edited = NULL;
  assert_int_equal(KCR_OK, kcr_json_parse(v1obj, strlen(v1obj), &edited, NULL));
  kcr_json_set_str(edited, "/spec/name", "Augusta King");
  char *text = kcr_json_to_text(edited);
  t = convert("toy.kcr.io/v2", text, "Success");
  o = kcr_json_at(t, "/response/convertedObjects/0");
  assert_string_equal("Augusta", kcr_json_str(o, "/spec/first"));
  assert_string_equal("King", kcr_json_str(o, "/spec/last"));
  assert_string_equal("Enchantress", kcr_json_str(o, "/spec/nick"));
  cJSON_Delete(t);
  free(text);
  cJSON_Delete(edited);
  free(v1obj);
}

static void one_failure_fails_the_review(void **state)
{
  cJSON *t =
      convert("toy.kcr.io/v1",
              "{\"apiVersion\":\"toy.kcr.io/v2\",\"kind\":\"Toy\",\"metadata\":{\"name\":"
              "\"ok\"},\"spec\":{\"first\":\"A\"}},"
              "{\"apiVersion\":\"toy.kcr.io/v2\",\"kind\":\"Toy\",\"metadata\":{\"name\":"
              "\"bad\",\"namespace\":\"n\"},\"spec\":{\"first\":\"fail\"}}",
              "Failure");
  const char *msg = kcr_json_str(t, "/response/result/message");
  assert_non_null(strstr(msg, "n/bad (object 1) from v2 to v1"));
  assert_non_null(strstr(msg, "first name 'fail' refused"));
  assert_null(kcr_json_at(t, "/response/convertedObjects"));
  cJSON_Delete(t);
  /* a converter that changes metadata other than labels and annotations */
  ttoy_break_name = true;
  t = convert("toy.kcr.io/v2",
              "{\"apiVersion\":\"toy.kcr.io/v1\",\"kind\":\"Toy\"," META
              ",\"spec\":{\"name\":\"A B\"}}",
              "Failure");
  ttoy_break_name = false;
  assert_non_null(
      strstr(kcr_json_str(t, "/response/result/message"), "changed metadata.name"));
  cJSON_Delete(t);
}

static void what_is_no_review_fails_saying_so(void **state)
{
  static const struct {
    const char *body, *ctype, *why;
  } bad[] = {
      {"{}", "text/plain", "Content-Type"},
      {"[", "application/json", "not a JSON object"},
      {"{\"apiVersion\":\"apiextensions.k8s.io/v1\",\"kind\":\"AdmissionReview\"}",
       "application/json", "ConversionReview"},
      {"{\"apiVersion\":\"apiextensions.k8s.io/v1\",\"kind\":\"ConversionReview\","
       "\"request\":{\"desiredAPIVersion\":\"toy.kcr.io/v1\"}}",
       "application/json", "uid"},
      {"{\"apiVersion\":\"apiextensions.k8s.io/v1\",\"kind\":\"ConversionReview\","
       "\"request\":{\"uid\":\"u\",\"desiredAPIVersion\":\"other.io/v1\"}}",
       "application/json", "not of group toy.kcr.io"},
      {"{\"apiVersion\":\"apiextensions.k8s.io/v1\",\"kind\":\"ConversionReview\","
       "\"request\":{\"uid\":\"u\",\"desiredAPIVersion\":\"toy.kcr.io/v9\"}}",
       "application/json", "no converter for version v9"},
      {"{\"apiVersion\":\"apiextensions.k8s.io/v1\",\"kind\":\"ConversionReview\","
       "\"request\":{\"uid\":\"u\",\"desiredAPIVersion\":\"toy.kcr.io/v1\",\"objects\":"
       "[{\"apiVersion\":\"toy.kcr.io/v7\"}]}}",
       "application/json", "no converter for version v7"},
  };
  for(size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    struct kcr_buf out = KCR_BUF_INIT;
    cJSON *t = NULL;
    assert_int_equal(KCR_OK,
                     kcr_conversion_review(&opts, bad[i].body, strlen(bad[i].body),
                                           bad[i].ctype, &out));
    assert_int_equal(KCR_OK, kcr_json_parse(out.ptr, out.len, &t, NULL));
    const char *msg = kcr_json_str(t, "/response/result/message");
    assert_string_equal("Failure", kcr_json_str(t, "/response/result/status"));
    if(!msg || !strstr(msg, bad[i].why))
      fail_msg("case %zu: \"%s\" does not say \"%s\"", i, msg ? msg : "", bad[i].why);
    cJSON_Delete(t);
    kcr_buf_cleanup(&out);
  }
  /* options that cannot work */
  struct kcr_conversion_opts o = opts;
  struct kcr_conversion_version hubv = {"v2", ttoy_v1_to_hub, ttoy_v1_from_hub};
  struct kcr_buf out = KCR_BUF_INIT;
  o.versions = &hubv;
  assert_int_equal(KCR_EINVAL,
                   kcr_conversion_review(&o, "{}", 2, "application/json", &out));
  o = opts;
  o.hub = NULL;
  assert_int_equal(KCR_EINVAL,
                   kcr_conversion_review(&o, "{}", 2, "application/json", &out));
  kcr_buf_cleanup(&out);
}

/* ttoy's v1 -> v2, forgetting kind on the way. */
static kcr_err to_hub_without_kind(kcr_conversion *cv, struct kcr_str in,
                                   struct kcr_buf *out, void *ud)
{
  struct kcr_buf mid = KCR_BUF_INIT;
  cJSON *t = NULL;
  kcr_err rc = ttoy_v1_to_hub(cv, in, &mid, ud);
  if(!rc)
    rc = kcr_json_parse(mid.ptr, mid.len, &t, NULL);
  kcr_buf_cleanup(&mid);
  if(rc)
    return rc;
  cJSON_DeleteItemFromObjectCaseSensitive(t, "kind");
  char *text = kcr_json_to_text(t);
  rc = text ? kcr_buf_puts(out, text) : KCR_ENOMEM;
  free(text);
  cJSON_Delete(t);
  return rc;
}

static void kind_is_kept_whatever_the_converter_writes(void **state)
{
  const struct kcr_conversion_version v = {"v1", to_hub_without_kind, ttoy_v1_from_hub};
  struct kcr_conversion_opts o = opts;
  struct kcr_buf out = KCR_BUF_INIT;
  cJSON *t = NULL;
  char *body = review_of("toy.kcr.io/v2", "{\"apiVersion\":\"toy.kcr.io/v1\",\"kind\":"
                                          "\"Toy\",\"metadata\":{\"name\":\"a\"},"
                                          "\"spec\":{\"name\":\"A B\"}}");
  o.versions = &v;
  assert_int_equal(
      KCR_OK, kcr_conversion_review(&o, body, strlen(body), "application/json", &out));
  assert_int_equal(KCR_OK, kcr_json_parse(out.ptr, out.len, &t, NULL));
  assert_string_equal("Toy", kcr_json_str(t, "/response/convertedObjects/0/kind"));
  cJSON_Delete(t);
  kcr_buf_cleanup(&out);
  free(body);
}

static bool review_under_failure(void *ud)
{
  const char *body = ud;
  struct kcr_buf out = KCR_BUF_INIT;
  kcr_err rc = kcr_conversion_review(&opts, body, strlen(body), "application/json", &out);
  bool ok = rc == KCR_ENOMEM;

  if(!rc) {
    cJSON *t = NULL;
    tfail_exempt(true);
    ok = !kcr_json_parse(out.ptr, out.len, &t, NULL);
    const char *st = kcr_json_str(t, "/response/result/status");
    const char *nick = kcr_json_str(t, "/response/convertedObjects/0/spec/nick");
    ok = ok && st && (!strcmp(st, "Failure") || (nick && !strcmp(nick, "Enchantress")));
    cJSON_Delete(t);
    tfail_exempt(false);
  }
  kcr_buf_cleanup(&out);
  return ok;
}

static void allocation_failures_give_an_answer_or_an_error(void **state)
{
  /* a v1 object with the round-trip annotation: the longest path */
  cJSON *t =
      convert("toy.kcr.io/v1",
              "{\"apiVersion\":\"toy.kcr.io/v2\",\"kind\":\"Toy\"," META
              ",\"spec\":{\"first\":\"Ada\",\"last\":\"L\",\"nick\":\"Enchantress\"}}",
              "Success");
  char *obj = kcr_json_to_text(kcr_json_at(t, "/response/convertedObjects/0"));
  char *body = review_of("toy.kcr.io/v2", obj);
  tfail_torture("kcr_conversion_review", review_under_failure, body);
  free(body);
  free(obj);
  cJSON_Delete(t);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(objects_convert_both_ways_in_order),
      cmocka_unit_test(what_v1_cannot_hold_survives_a_trip_through_it),
      cmocka_unit_test(one_failure_fails_the_review),
      cmocka_unit_test(what_is_no_review_fails_saying_so),
      cmocka_unit_test(kind_is_kept_whatever_the_converter_writes),
      cmocka_unit_test(allocation_failures_give_an_answer_or_an_error),
  };
  tfail_init();
  return cmocka_run_group_tests(tests, NULL, NULL);
}
