/* Read your own writes, at unit level: the status writer's record of its
 * own writes (src/status/written-int.h) - used only while the object passed
 * is older than the write, dropped once it is not, when versions are not
 * comparable, after its TTL and beyond its cap (oldest first), kept when an
 * older answer arrives late, int64 fields exact, all-or-nothing under
 * allocation failure - and the writer on the wire seam: a stale object is
 * not written again, one whose resourceVersion cannot be compared is. The
 * same table for any write (kcr_written, kcr/status.h: the children a
 * controller applies): a cache without the object is older than any write,
 * a newer one (someone else's change) drops the record, and a forgotten
 * (deleted) object's record is gone. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "kcr.h"
#include "status/written-int.h"
#include "tfail.h"
#include "twire.h"

#define BIG "9007199254740993" /* 2^53 + 1: no double holds it */

static const char status_text[] =
    "{\"observedGeneration\":" BIG ",\"conditions\":[{\"type\":\"Ready\",\"status\":"
    "\"True\",\"observedGeneration\":" BIG ",\"lastTransitionTime\":"
    "\"2026-11-29T10:00:00Z\",\"reason\":\"R\",\"message\":\"m\"}]}";

static cJSON *json(const char *text)
{
  cJSON *o = NULL;
  if(kcr_json_parse(text, strlen(text), &o, NULL))
    fail_msg("not JSON: %s", text);
  return o;
}

/* The status recorded for uid if rv is older, as text ("" for none). */
static char *newer_text(struct kcr__written *t, const char *uid, const char *rv,
                        uint64_t now)
{
  cJSON *s = kcr__written_newer(t, uid, rv, now);
  char *text = s ? kcr_json_to_text(s) : strdup("");
  cJSON_Delete(s);
  return text;
}

static void expect_newer(struct kcr__written *t, const char *uid, const char *rv,
                         uint64_t now, const char *want)
{
  char *got = newer_text(t, uid, rv, now);
  if(strcmp(got, want))
    fail_msg("newer(%s, %s): '%s', want '%s'", uid ? uid : "NULL", rv ? rv : "NULL", got,
             want);
  free(got);
}

static void put(struct kcr__written *t, const char *uid, const char *rv, const char *st,
                uint64_t now)
{
  kcr__written_put(t, uid, rv, st, st ? strlen(st) : 0, now);
}

static void used_only_while_the_object_is_older(void **state)
{
  struct kcr__written t;
  kcr__written_init(&t, 10, 1000);

  put(&t, "u1", "10", status_text, 0);
  assert_int_equal(1, kcr__written_len(&t, 0));
  expect_newer(&t, "u1", "9", 1, status_text); /* exact: int64 included */
  expect_newer(&t, "u1", "9", 2, status_text); /* kept while it lags */
  expect_newer(&t, "u2", "9", 2, "");          /* another object */
  expect_newer(&t, NULL, "9", 2, "");
  expect_newer(&t, "", "9", 2, "");
  assert_int_equal(1, kcr__written_len(&t, 2));
  expect_newer(&t, "u1", "10", 3, ""); /* caught up: dropped */
  assert_int_equal(0, kcr__written_len(&t, 3));
  expect_newer(&t, "u1", "9", 3, "");

  /* Overtaken (someone else wrote since), or not comparable: dropped. */
  static const char *const drop[] = {"11", "100", "0", "010", "abc", "", NULL};
  for(size_t i = 0; i < sizeof(drop) / sizeof(drop[0]); i++) {
    put(&t, "u1", "10", status_text, 4);
    expect_newer(&t, "u1", drop[i], 5, "");
    assert_int_equal(0, kcr__written_len(&t, 5));
  }
  /* A record whose own version cannot be compared is never used. */
  put(&t, "u1", "x10", status_text, 6);
  expect_newer(&t, "u1", "9", 6, "");
  assert_int_equal(0, kcr__written_len(&t, 6));
  /* No uid or no version: nothing to keep. A missing status is {}. */
  put(&t, NULL, "10", status_text, 7);
  put(&t, "", "10", status_text, 7);
  put(&t, "u1", NULL, status_text, 7);
  put(&t, "u1", "", status_text, 7);
  assert_int_equal(0, kcr__written_len(&t, 7));
  put(&t, "u1", "10", NULL, 7);
  expect_newer(&t, "u1", "9", 7, "{}");
  kcr__written_cleanup(&t);
}

static void a_late_older_answer_does_not_replace_a_newer_one(void **state)
{
  struct kcr__written t;
  kcr__written_init(&t, 10, 1000);

  put(&t, "u", "10", "{\"n\":10}", 0);
  put(&t, "u", "9", "{\"n\":9}", 1); /* a concurrent write answered later */
  expect_newer(&t, "u", "5", 2, "{\"n\":10}");
  put(&t, "u", "10", "{\"n\":0}", 3); /* the same version: kept as it was */
  expect_newer(&t, "u", "5", 3, "{\"n\":10}");
  put(&t, "u", "11", "{\"n\":11}", 4);
  expect_newer(&t, "u", "5", 4, "{\"n\":11}");
  put(&t, "u", "junk", "{\"n\":1}", 5); /* not comparable: the latest call wins */
  assert_int_equal(1, kcr__written_len(&t, 5));
  put(&t, "u", "12", "{\"n\":12}", 6);
  expect_newer(&t, "u", "5", 6, "{\"n\":12}");
  assert_int_equal(1, kcr__written_len(&t, 6));
  kcr__written_cleanup(&t);
}

static void records_expire_and_the_oldest_go_first(void **state)
{
  struct kcr__written t;
  kcr__written_init(&t, 3, 1000);

  put(&t, "u1", "10", "{}", 0);
  put(&t, "u2", "10", "{}", 100);
  put(&t, "u3", "10", "{}", 200);
  put(&t, "u1", "11", "{\"again\":1}", 300); /* u1 is now the newest */
  put(&t, "u4", "10", "{}", 400);            /* the cap: u2 goes */
  assert_int_equal(3, kcr__written_len(&t, 400));
  expect_newer(&t, "u2", "1", 400, "");
  expect_newer(&t, "u1", "1", 400, "{\"again\":1}");
  expect_newer(&t, "u3", "1", 400, "{}");
  expect_newer(&t, "u4", "1", 400, "{}");
  /* The TTL: u3 (written at 200) expires at 1200, u1 at 1300, u4 at 1400. */
  assert_int_equal(3, kcr__written_len(&t, 1199));
  assert_int_equal(2, kcr__written_len(&t, 1200));
  expect_newer(&t, "u3", "1", 1200, "");
  expect_newer(&t, "u1", "1", 1299, "{\"again\":1}");
  expect_newer(&t, "u1", "1", 1300, "");
  assert_int_equal(1, kcr__written_len(&t, 1300));
  put(&t, "u5", "10", "{}", 5000); /* a put expires too */
  assert_int_equal(1, kcr__written_len(&t, 5000));
  expect_newer(&t, "u4", "1", 5000, "");
  /* A caller whose now is a little older than a record another thread
   * has just put does not expire it. */
  assert_int_equal(1, kcr__written_len(&t, 4999));
  assert_int_equal(1, kcr__written_len(&t, 0));
  kcr__written_cleanup(&t);

  /* A cap of 0 is 1; a cleanup frees what is left (ASan: no leak). */
  kcr__written_init(&t, 0, 1000);
  put(&t, "a", "1", "{}", 0);
  put(&t, "b", "1", "{}", 0);
  assert_int_equal(1, kcr__written_len(&t, 0));
  expect_newer(&t, "b", "0", 0, ""); /* "0" is no version: dropped */
  put(&t, "c", "5", status_text, 0);
  kcr__written_cleanup(&t);
}

/* Under allocation failure: the record is made whole or not at all, and
 * what newer returns is the whole status or nothing. */
static bool put_and_read_whole_or_not(void *ud)
{
  struct kcr__written t;
  cJSON *st, *got;
  bool ok;

  (void)ud;
  tfail_exempt(true);
  st = json(status_text);
  tfail_exempt(false);
  kcr__written_init(&t, 2, 1000);
  put(&t, "u1", "10", status_text, 0);
  put(&t, "u2", "10", status_text, 0);
  put(&t, "u3", "10", status_text, 0); /* evicts u1, if it was kept */
  got = kcr__written_newer(&t, "u3", "9", 1);
  ok = !got || cJSON_Compare(got, st, 1);
  cJSON_Delete(got);
  got = kcr__written_newer(&t, "u3", "10", 1);     /* dropped, never returned */
  ok = ok && !got && kcr__written_len(&t, 1) <= 2; /* the cap */
  kcr__written_cleanup(&t);
  tfail_exempt(true);
  cJSON_Delete(st);
  tfail_exempt(false);
  return ok;
}

/* ... and a pending record's text is given whole, or the answer is false
 * with the record kept and the buffer's error set. */
static bool pending_whole_or_not(void *ud)
{
  struct kcr__written t;
  struct kcr_buf b = KCR_BUF_INIT;
  bool ok, yes;
  size_t held;

  (void)ud;
  kcr__written_init(&t, 2, 1000);
  put(&t, "vfms/ns/a", "10", "digest", 0);
  held = kcr__written_len(&t, 1);
  yes = kcr__written_pending(&t, "vfms/ns/a", NULL, true, &b, 1);
  ok = yes ? !strcmp(kcr_buf_str(&b), "digest")
           : held == 0 || (kcr_buf_err(&b) && kcr__written_len(&t, 1) == 1);
  kcr_buf_cleanup(&b);
  kcr__written_cleanup(&t);
  return ok;
}

static void records_are_whole_or_absent_under_allocation_failure(void **state)
{
  tfail_torture("kcr__written", put_and_read_whole_or_not, NULL);
  tfail_torture("kcr__written_pending", pending_whole_or_not, NULL);
}

/* The text recorded for key while rv (NULL: absent) is pending, or "". */
static void expect_pending(struct kcr__written *t, const char *key, const char *rv,
                           bool absent, uint64_t now, const char *want)
{
  struct kcr_buf b = KCR_BUF_INIT;
  bool yes = kcr__written_pending(t, key, rv, absent, &b, now);
  if(yes != (want != NULL) || (yes && strcmp(kcr_buf_str(&b), want)))
    fail_msg("pending(%s, %s, %d): %d '%s', want %s", key ? key : "NULL",
             rv ? rv : "NULL", absent, yes, kcr_buf_str(&b), want ? want : "false");
  kcr_buf_cleanup(&b);
}

static void a_missing_copy_is_older_only_when_absent(void **state)
{
  struct kcr__written t;
  kcr__written_init(&t, 10, 1000);

  put(&t, "vfms/ns/a", "10", "d1", 0);
  expect_pending(&t, "vfms/ns/a", NULL, true, 1, "d1"); /* not in the cache yet */
  expect_pending(&t, "vfms/ns/a", "9", true, 1, "d1");  /* an older copy */
  assert_true(kcr__written_pending(&t, "vfms/ns/a", "9", false, NULL, 1));
  assert_int_equal(1, kcr__written_len(&t, 1));
  /* The status writer's way: no version is not comparable, dropped. */
  expect_pending(&t, "vfms/ns/a", NULL, false, 2, NULL);
  assert_int_equal(0, kcr__written_len(&t, 2));
  put(&t, "vfms/ns/a", "10", "d1", 3);
  expect_newer(&t, "vfms/ns/a", NULL, 3, "");
  assert_int_equal(0, kcr__written_len(&t, 3));
  /* No key: nothing. */
  expect_pending(&t, NULL, NULL, true, 4, NULL);
  expect_pending(&t, "", NULL, true, 4, NULL);
  kcr__written_cleanup(&t);
}

static void a_forgotten_record_is_gone(void **state)
{
  struct kcr__written t;
  kcr__written_init(&t, 10, 1000);

  put(&t, "configmaps/ns/a-config", "10", "d1", 0);
  put(&t, "vfms/ns/a", "11", "d2", 0);
  kcr__written_forget(&t, "configmaps/ns/a-config");
  kcr__written_forget(&t, "configmaps/ns/other"); /* none: no-op */
  kcr__written_forget(&t, NULL);
  kcr__written_forget(&t, "");
  assert_int_equal(1, kcr__written_len(&t, 1));
  expect_pending(&t, "configmaps/ns/a-config", NULL, true, 1, NULL);
  expect_pending(&t, "vfms/ns/a", NULL, true, 1, "d2");
  kcr__written_forget(&t, "vfms/ns/a");
  assert_int_equal(0, kcr__written_len(&t, 1));
  put(&t, "vfms/ns/a", "12", "d3", 2); /* a write after the forget counts */
  expect_pending(&t, "vfms/ns/a", "11", true, 2, "d3");
  kcr__written_cleanup(&t);
}

/* kcr_written: the public handle over the same table. */
static void a_child_write_is_pending_until_the_cache_shows_it(void **state)
{
  struct kcr_buf b = KCR_BUF_INIT;
  kcr_written *w;

  assert_int_equal(KCR_OK, kcr_written_new(NULL, &w, NULL));
  assert_int_equal(0, kcr_written_len(w));
  assert_false(kcr_written_pending(w, "vfms/ns/a", NULL, &b)); /* no record */
  /* Created at 10: pending while the cache has no copy or an older one. */
  kcr_written_put(w, "vfms/ns/a", "10", "digest-1", 8);
  assert_true(kcr_written_pending(w, "vfms/ns/a", NULL, &b));
  assert_string_equal("digest-1", kcr_buf_str(&b));
  assert_true(kcr_written_pending(w, "vfms/ns/a", "9", &b));
  assert_string_equal("digest-1", kcr_buf_str(&b)); /* replaced, not appended */
  assert_true(kcr_written_pending(w, "vfms/ns/a", "9", NULL));
  /* The cache caught up: dropped, and a later absence is not pending. */
  assert_false(kcr_written_pending(w, "vfms/ns/a", "10", &b));
  assert_int_equal(0, kcr_written_len(w));
  assert_false(kcr_written_pending(w, "vfms/ns/a", NULL, &b));
  /* Changed by someone else since (a newer copy): dropped, so the caller
   * decides from that copy and corrects it. */
  kcr_written_put(w, "vfms/ns/a", "20", "digest-2", 8);
  assert_false(kcr_written_pending(w, "vfms/ns/a", "21", &b));
  assert_false(kcr_written_pending(w, "vfms/ns/a", "9", &b));
  /* A copy whose version cannot be compared: dropped. */
  kcr_written_put(w, "vfms/ns/a", "20", "digest-2", 8);
  assert_false(kcr_written_pending(w, "vfms/ns/a", "", &b));
  assert_int_equal(0, kcr_written_len(w));
  /* Deleted (the child, or its owner): forgotten. */
  kcr_written_put(w, "vfms/ns/a", "30", "digest-3", 8);
  kcr_written_put(w, "configmaps/ns/a-config", "31", NULL, 0);
  assert_int_equal(2, kcr_written_len(w));
  kcr_written_forget(w, "vfms/ns/a");
  assert_false(kcr_written_pending(w, "vfms/ns/a", NULL, &b));
  assert_true(kcr_written_pending(w, "configmaps/ns/a-config", NULL, &b));
  assert_string_equal("", kcr_buf_str(&b));
  /* Nothing recorded without a key or a version. */
  kcr_written_put(w, NULL, "40", "x", 1);
  kcr_written_put(w, "k", NULL, "x", 1);
  kcr_written_put(w, "k", "", "x", 1);
  assert_int_equal(1, kcr_written_len(w));
  kcr_buf_cleanup(&b);
  kcr_written_free(w);
  kcr_written_free(NULL);
}

static void child_records_are_bounded(void **state)
{
  kcr_written *w;
  char key[32];

  assert_int_equal(KCR_OK,
                   kcr_written_new(&(struct kcr_written_opts){.max = 3}, &w, NULL));
  for(int i = 0; i < 5; i++) {
    snprintf(key, sizeof(key), "vfms/ns/%d", i);
    kcr_written_put(w, key, "10", "d", 1);
  }
  assert_int_equal(3, kcr_written_len(w));
  assert_false(kcr_written_pending(w, "vfms/ns/0", NULL, NULL)); /* the oldest went */
  assert_false(kcr_written_pending(w, "vfms/ns/1", NULL, NULL));
  assert_true(kcr_written_pending(w, "vfms/ns/4", NULL, NULL));
  kcr_written_free(w);
}

/* kcr_written_new takes the constructor's form: opts (ttl_ms honoured),
 * out, errinfo; no out is KCR_EINVAL. */
static void child_records_expire_after_ttl_ms(void **state)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  kcr_written *w;

  assert_int_equal(KCR_EINVAL, kcr_written_new(NULL, NULL, &ei));
  assert_non_null(strstr(ei.message, "no out"));
  kcr_errinfo_cleanup(&ei);
  assert_int_equal(KCR_OK,
                   kcr_written_new(&(struct kcr_written_opts){.ttl_ms = 20}, &w, NULL));
  kcr_written_put(w, "vfms/ns/a", "10", "d", 1);
  assert_int_equal(1, kcr_written_len(w));
  nanosleep(&(struct timespec){.tv_nsec = 40 * 1000000}, NULL); /* past ttl_ms */
  assert_int_equal(0, kcr_written_len(w));
  assert_false(kcr_written_pending(w, "vfms/ns/a", NULL, NULL));
  kcr_written_free(w);
}

/* A record the informer shows caught up goes KCR__WRITTEN_GRACE_MS after
 * that, not ttl_ms after the write; in the grace a reader of the older
 * cache still finds it; an older version seen changes nothing; a new write
 * makes it a pending record again; seen records are evicted first. */
static void records_seen_caught_up_go_after_a_grace(void **state)
{
  struct kcr__written t;
  const uint64_t g = KCR__WRITTEN_GRACE_MS, ttl = 10 * KCR__WRITTEN_GRACE_MS;
  kcr__written_init(&t, 4, ttl);

  put(&t, "u1", "10", "{\"a\":1}", 0);
  put(&t, "u2", "10", "{}", 0);
  put(&t, "u3", "20", "{}", 0);
  kcr__written_seen(&t, "u1", "10", 100); /* caught up */
  kcr__written_seen(&t, "u2", "11", 100); /* past it */
  kcr__written_seen(&t, "u3", "19", 100); /* still older: stays pending */
  kcr__written_seen(&t, "nobody", "1", 100);
  kcr__written_seen(&t, "u3", NULL, 100);
  assert_int_equal(3, kcr__written_len(&t, 100 + g - 1));
  expect_newer(&t, "u1", "9", 100 + g - 1, "{\"a\":1}"); /* a reader of the old cache */
  assert_int_equal(1, kcr__written_len(&t, 100 + g));    /* u1 and u2 gone */
  expect_newer(&t, "u3", "19", 100 + g, "{}");

  /* Seen, then written again: pending for ttl_ms again. */
  put(&t, "u4", "30", "{}", 200);
  kcr__written_seen(&t, "u4", "30", 300);
  put(&t, "u4", "31", "{\"b\":2}", 400);
  assert_int_equal(2, kcr__written_len(&t, 400 + 2 * g));
  expect_newer(&t, "u4", "30", 400 + 2 * g, "{\"b\":2}");

  /* Full: a seen record goes before the oldest pending one. */
  put(&t, "u5", "10", "{}", 500);
  put(&t, "u6", "10", "{}", 500);
  kcr__written_seen(&t, "u6", "10", 600);
  put(&t, "u7", "10", "{}", 700); /* 4 held (u3, u4, u5, u6): u6 goes */
  expect_newer(&t, "u6", "9", 700, "");
  expect_newer(&t, "u3", "19", 700, "{}");
  expect_newer(&t, "u5", "9", 700, "{}");
  kcr__written_cleanup(&t);

  /* A ttl shorter than the grace bounds it. */
  kcr__written_init(&t, 4, 10);
  put(&t, "u1", "10", "{}", 0);
  kcr__written_seen(&t, "u1", "10", 5);
  assert_int_equal(0, kcr__written_len(&t, 15));
  kcr__written_cleanup(&t);
}

/* The public handles: kcr_written_seen and kcr_status_writer_seen take
 * NULLs, and a record seen caught up is still found inside the grace. */
static void seen_through_the_public_handles(void **state)
{
  kcr_written *w;

  assert_int_equal(KCR_OK, kcr_written_new(NULL, &w, NULL));
  kcr_written_put(w, "vfms/ns/a", "10", "d", 1);
  kcr_written_seen(w, NULL, "10");
  kcr_written_seen(w, "vfms/ns/a", NULL);
  kcr_written_seen(w, "vfms/ns/a", "10");
  assert_int_equal(1, kcr_written_len(w));
  assert_true(kcr_written_pending(w, "vfms/ns/a", "9", NULL));
  kcr_written_free(w);
}

/* ---- the writer on the wire ---- */

struct api {
  int gets, writes;
  int rv; /* of the object the server holds; each write adds 1 */
};

/* GET answers the object without status (as it was before any write);
 * a write answers it with the status written, at the next version. */
static kcr_err one_widget(struct twire_call *call, void *ud)
{
  struct api *a = ud;
  bool get = !strcmp(call->req->method, "GET");
  if(get)
    a->gets++;
  else
    a->writes++, a->rv++;
  return twire_reply(call, 200,
                     "{\"apiVersion\":\"test.kcr.io/v1\",\"kind\":\"Widget\","
                     "\"metadata\":{\"name\":\"w\",\"namespace\":\"ns\",\"uid\":\"u-1\","
                     "\"resourceVersion\":\"%d\",\"generation\":1},\"status\":%s}",
                     a->rv,
                     get ? "{}"
                         : "{\"observedGeneration\":1,\"conditions\":[{\"type\":"
                           "\"Ready\",\"status\":\"True\",\"observedGeneration\":1,"
                           "\"lastTransitionTime\":\"2026-11-29T10:00:00Z\","
                           "\"reason\":\"R\",\"message\":\"m\"}]}");
}

static void write_from(kcr_status_writer *w, const char *rv, enum kcr_write_result want)
{
  char text[256];
  struct kcr_cond c = {"Ready", "True", "R", "m", 1, 0};
  struct kcr_status_desired d = {.conds = &c, .n = 1, .observed_generation = 1};
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  enum kcr_write_result res;
  cJSON *obj;

  /* The object as a cache would hold it before the first write. */
  snprintf(text, sizeof(text),
           "{\"metadata\":{\"name\":\"w\",\"namespace\":\"ns\",\"uid\":\"u-1\"%s%s%s},"
           "\"status\":{}}",
           rv ? ",\"resourceVersion\":\"" : "", rv ? rv : "", rv ? "\"" : "");
  obj = json(text);
  assert_int_equal(KCR_OK, kcr_status_write(w, obj, &d, &res, &ei));
  if(res != want)
    fail_msg("from resourceVersion %s: result %d, want %d", rv ? rv : "NULL", (int)res,
             (int)want);
  cJSON_Delete(obj);
  kcr_errinfo_cleanup(&ei);
}

/* A status writer of Widgets through c, in the given mode. */
static kcr_status_writer *widget_writer(kcr_client *c, enum kcr_status_mode mode)
{
  kcr_status_writer *w = NULL;
  struct kcr_status_writer_opts o = {
      .client = c,
      .gvr = &(struct kcr_gvr){"test.kcr.io", "v1", "widgets", true},
      .api_version = "test.kcr.io/v1",
      .kind = "Widget",
      .field_manager = "kcr-test",
      .mode = mode};
  assert_int_equal(KCR_OK, kcr_status_writer_new(&o, &w, NULL));
  return w;
}

static void a_stale_object_is_not_written_again(void **state)
{
  static const enum kcr_status_mode modes[] = {KCR_STATUS_APPLY, KCR_STATUS_MERGE_PATCH,
                                               KCR_STATUS_UPDATE_RETRY};
  for(size_t i = 0; i < 3; i++) {
    struct api a = {0, 0, 7};
    kcr_client *c = twire_client(one_widget, &a);
    kcr_status_writer *w = widget_writer(c, modes[i]);
    int upd = modes[i] == KCR_STATUS_UPDATE_RETRY;

    write_from(w, "7", KCR_WRITE_WRITTEN); /* answered with version 8 */
    assert_int_equal(1, a.writes);
    write_from(w, "7", KCR_WRITE_SKIPPED); /* the cache lags: no request */
    write_from(w, "6", KCR_WRITE_SKIPPED);
    assert_int_equal(1, a.writes);
    assert_int_equal(upd, a.gets); /* the UPDATE writer's one GET, for the write */
    /* Versions that cannot be compared: as without a record, the object as
     * given is the base (the record goes). */
    write_from(w, "abc", KCR_WRITE_WRITTEN);
    assert_int_equal(2, a.writes);
    write_from(w, NULL, KCR_WRITE_WRITTEN); /* (answered 9, then 10) */
    write_from(w, "9", KCR_WRITE_SKIPPED);
    /* Caught up: the record goes, and the object is the base again. */
    write_from(w, "10", KCR_WRITE_WRITTEN);
    assert_int_equal(4, a.writes);
    assert_int_equal(4 * upd, a.gets);
    kcr_status_writer_free(w);
    kcr_client_free(c);
  }
}

/* A write answered with a broken status (or no plain uid): nothing is
 * remembered, so the stale object that follows is written again. */
struct broken {
  int writes;
  const char *answer;
};

static kcr_err broken_answer(struct twire_call *call, void *ud)
{
  struct broken *b = ud;
  b->writes++;
  return twire_reply(call, 200, "%s", b->answer);
}

static void only_what_a_well_formed_answer_says_is_remembered(void **state)
{
  static const char *const answers[] = {
      /* the status cut short inside its list */
      "{\"metadata\":{\"name\":\"w\",\"uid\":\"u-1\",\"resourceVersion\":\"8\"},"
      "\"status\":{\"observedGeneration\":1,\"conditions\":[}}",
      /* a bare word in the status */
      "{\"metadata\":{\"name\":\"w\",\"uid\":\"u-1\",\"resourceVersion\":\"8\"},"
      "\"status\":{\"observedGeneration\":tru}}",
      /* an escaped uid */
      "{\"metadata\":{\"name\":\"w\",\"uid\":\"u\\u002d1\",\"resourceVersion\":"
      "\"8\"},\"status\":{}}",
  };
  for(size_t i = 0; i < sizeof(answers) / sizeof(answers[0]); i++) {
    struct broken b = {0, answers[i]};
    kcr_client *c = twire_client(broken_answer, &b);
    kcr_status_writer *w = widget_writer(c, KCR_STATUS_APPLY);
    write_from(w, "7", KCR_WRITE_WRITTEN);
    write_from(w, "7", KCR_WRITE_WRITTEN); /* no record: the object is the base */
    if(b.writes != 2)
      fail_msg("answer %zu: %d writes, want 2", i, b.writes);
    kcr_status_writer_free(w);
    kcr_client_free(c);
  }
  (void)state;
}

/* Under allocation failure: a write is WRITTEN or FAILED as it went, and
 * the stale object that follows is SKIPPED (recorded) or written again
 * (not recorded) - never anything else. Each run has a writer of its own,
 * whose records go with it. */
struct torture {
  struct api a;
  kcr_client *c;
  bool clean; /* no failure injected: the stale write must be skipped */
};

static bool stale_write_under_failure(void *ud)
{
  struct torture *t = ud;
  struct kcr_cond c = {"Ready", "True", "R", "m", 1, 0};
  struct kcr_status_desired d = {.conds = &c, .n = 1, .observed_generation = 1};
  struct kcr_status_writer_opts o = {
      .client = t->c,
      .gvr = &(struct kcr_gvr){"test.kcr.io", "v1", "widgets", true},
      .api_version = "test.kcr.io/v1",
      .kind = "Widget",
      .field_manager = "kcr-test"};
  enum kcr_write_result r1 = KCR_WRITE_SKIPPED, r2 = KCR_WRITE_SKIPPED;
  kcr_status_writer *w = NULL;
  kcr_err rc1, rc2;
  cJSON *obj;
  bool ok;

  if(kcr_status_writer_new(&o, &w, NULL))
    return w == NULL;
  tfail_exempt(true);
  obj = json("{\"metadata\":{\"name\":\"w\",\"namespace\":\"ns\",\"uid\":\"u-1\","
             "\"resourceVersion\":\"1\"},\"status\":{}}");
  t->a.rv = 1;
  tfail_exempt(false);
  rc1 = kcr_status_write(w, obj, &d, &r1, NULL);
  rc2 = kcr_status_write(w, obj, &d, &r2, NULL);
  ok =
      (rc1 ? r1 == KCR_WRITE_FAILED : r1 == KCR_WRITE_WRITTEN) &&
      (rc2 ? r2 == KCR_WRITE_FAILED
           : (r2 == KCR_WRITE_WRITTEN && !t->clean) || (r2 == KCR_WRITE_SKIPPED && !rc1));
  kcr_status_writer_free(w);
  tfail_exempt(true);
  cJSON_Delete(obj);
  tfail_exempt(false);
  return ok;
}

static void stale_writes_hold_under_allocation_failure(void **state)
{
  struct torture t = {{0, 0, 1}, NULL, true};
  t.c = twire_client(one_widget, &t.a);
  assert_true(stale_write_under_failure(&t)); /* warm up the client */
  t.clean = false;
  tfail_torture("kcr_status_write from a stale object", stale_write_under_failure, &t);
  kcr_client_free(t.c);
}

int main(void)
{
  tfail_init();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(used_only_while_the_object_is_older),
      cmocka_unit_test(a_late_older_answer_does_not_replace_a_newer_one),
      cmocka_unit_test(records_expire_and_the_oldest_go_first),
      cmocka_unit_test(records_are_whole_or_absent_under_allocation_failure),
      cmocka_unit_test(a_missing_copy_is_older_only_when_absent),
      cmocka_unit_test(a_forgotten_record_is_gone),
      cmocka_unit_test(a_child_write_is_pending_until_the_cache_shows_it),
      cmocka_unit_test(child_records_are_bounded),
      cmocka_unit_test(child_records_expire_after_ttl_ms),
      cmocka_unit_test(records_seen_caught_up_go_after_a_grace),
      cmocka_unit_test(seen_through_the_public_handles),
      cmocka_unit_test(a_stale_object_is_not_written_again),
      cmocka_unit_test(only_what_a_well_formed_answer_says_is_remembered),
      cmocka_unit_test(stale_writes_hold_under_allocation_failure),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
