/* Allocation-failure torture of the core layer (see tfail.h): buffers, the
 * arena, base64, the JSON helpers, error details and the logger. Each test
 * runs one public entry point with its n-th allocation failing for every n;
 * the outcome must be an error with the outputs the contract promises
 * (NULL, empty, unchanged), or the complete, correct result - never a
 * silent partial one - and nothing may leak.
 *
 * Verdicts compute their expectations with tfail_exempt() on, so checking
 * never counts as (or fails like) an allocation of the code under test. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>

#include "kcr.h"
#include "kcr/base64.h"
#include "tfail.h"

/* Compact text of a tree, made outside the count (caller frees). */

static bool str_eq(const char *a, const char *b) { return a && b && !strcmp(a, b); }

/* ---- kcr_buf -------------------------------------------------------------- */

/* A step either applies completely or leaves the buffer as it was. */
static bool buf_same(const struct kcr_buf *b, const char *text, size_t len)
{
  return b->len == len && !memcmp(kcr_buf_str(b), text, len) && kcr_buf_str(b)[len] == 0;
}

static bool buf_steps(void *ud)
{
  struct kcr_buf b = KCR_BUF_INIT;
  char big[1000], slashes[151], before[4096], *taken = NULL;
  size_t blen;
  bool ok = false;

  memset(big, 'x', sizeof(big));
  memset(slashes, '/', 150);
  slashes[150] = '\0';
#define STEP(call)                                                                       \
  do {                                                                                   \
    blen = b.len;                                                                        \
    memcpy(before, kcr_buf_str(&b), blen + 1);                                           \
    if((call) != KCR_OK) {                                                               \
      ok = buf_same(&b, before, blen);                                                   \
      goto out;                                                                          \
    }                                                                                    \
  } while(0)
  STEP(kcr_buf_puts(&b, "start:"));
  STEP(kcr_buf_append(&b, big, sizeof(big))); /* grows past the first 64 bytes */
  STEP(kcr_buf_printf(&b, "|%s-%d|%0600d", "printf", 42, 7)); /* grows again */
  STEP(kcr_buf_urlenc(&b, "a b/\xc3\xbc?&=%~._-Z9"));
  STEP(kcr_buf_urlenc(&b, slashes)); /* grows in the middle of encoding */
  STEP(kcr_buf_reserve(&b, 8000));
#undef STEP
  /* Everything applied: check the whole text. */
  {
    char want[4096];
    int n = snprintf(want, sizeof(want), "start:%.*s|printf-42|%0600d%s", 1000, big, 7,
                     "a%20b%2F%C3%BC%3F%26%3D%25~._-Z9");
    for(int i = 0; i < 150; i++)
      n += snprintf(want + n, sizeof(want) - (size_t)n, "%%2F");
    if(!buf_same(&b, want, (size_t)n) || b.cap < b.len + 8001)
      goto out;
    taken = kcr_buf_take(&b); /* a non-empty buffer: no allocation */
    ok = str_eq(taken, want) && b.ptr == NULL && b.len == 0 && b.cap == 0;
  }
out:
  free(taken);
  kcr_buf_cleanup(&b);
  return ok;
}

static void buf_append_printf_urlenc_apply_completely_or_not_at_all(void **state)
{
  tfail_torture("kcr_buf_append/printf/urlenc/reserve", buf_steps, NULL);
}

/* kcr_buf_take of an empty buffer allocates "": NULL only then. */
static bool buf_take_empty(void *ud)
{
  struct kcr_buf b = KCR_BUF_INIT;
  char *s = kcr_buf_take(&b);
  bool ok = (!s || !strcmp(s, "")) && !b.ptr && !b.len && !b.cap;
  free(s);
  return ok;
}

static void buf_take_of_an_empty_buffer_is_empty_or_null(void **state)
{
  tfail_torture("kcr_buf_take", buf_take_empty, NULL);
}

/* ---- kcr_arena ------------------------------------------------------------ */

static bool arena_steps(void *ud)
{
  struct kcr_arena a = {NULL, 256}; /* small blocks: several mallocs */
  const char *s[6] = {0};
  char *big;
  bool ok = false;

  if(!(s[0] = kcr_arena_strdup(&a, "first")))
    goto fail;
  if(!(s[1] = kcr_arena_printf(&a, "%s/%d", "ns", 17)))
    goto fail;
  if(!(big = kcr_arena_alloc(&a, 1000))) /* larger than a block */
    goto fail;
  memset(big, 'b', 999);
  big[999] = '\0';
  s[2] = big;
  if(!(s[3] = kcr_arena_printf(&a, "%0300d", 3)))
    goto fail;
  kcr_arena_reset(&a); /* keeps one block */
  if(!(s[4] = kcr_arena_strdup(&a, "after reset")))
    goto fail;
  if(!(s[5] = kcr_arena_alloc(&a, 0)))
    goto fail;
  ok = str_eq(s[4], "after reset");
  goto out;
fail:
  /* What was handed out before the failure is intact. */
  ok = (!s[0] || str_eq(s[0], "first")) && (!s[1] || str_eq(s[1], "ns/17")) &&
       (!s[2] || (strlen(s[2]) == 999 && s[2][998] == 'b'));
out:
  kcr_arena_cleanup(&a);
  return ok && !a.head;
}

static void arena_alloc_strdup_printf_fail_cleanly(void **state)
{
  tfail_torture("kcr_arena_*", arena_steps, NULL);
}

/* ---- kcr_base64_decode ---------------------------------------------------- */

static bool b64(void *ud)
{
  /* "The quick brown fox..." repeated, wrapped like a PEM bundle. */
  static const char in[] =
      "VGhlIHF1aWNrIGJyb3duIGZveCBqdW1wcyBvdmVyIHRoZSBsYXp5IGRvZy4K\n"
      "VGhlIHF1aWNrIGJyb3duIGZveCBqdW1wcyBvdmVyIHRoZSBsYXp5IGRvZw==\n";
  static const char want[] = "The quick brown fox jumps over the lazy dog.\n"
                             "The quick brown fox jumps over the lazy dog";
  unsigned char *out = (unsigned char *)"garbage";
  size_t len = 99;
  kcr_err rc = kcr_base64_decode(in, sizeof(in) - 1, &out, &len);
  bool ok = rc == KCR_OK
                ? len == sizeof(want) - 1 && !memcmp(out, want, len) && out[len] == '\0'
                : rc == KCR_ENOMEM && !out && !len;
  free(rc ? NULL : out);
  return ok;
}

static void base64_decode_is_whole_or_enomem_with_null_output(void **state)
{
  tfail_torture("kcr_base64_decode", b64, NULL);
}

/* ---- kcr_json_* ----------------------------------------------------------- */

static const char obj_json[] =
    "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"a\","
    "\"namespace\":\"ns\",\"labels\":{\"app\":\"old\",\"tier\":\"web\"}},"
    "\"data\":{\"k\":\"v\",\"n\":\"1\"}}";

static bool json_parse_print(void *ud)
{
  const cJSON *want = ud;
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  cJSON *t = (cJSON *)1;
  char *text = NULL;
  kcr_err rc = kcr_json_parse(obj_json, sizeof(obj_json) - 1, &t, &ei);
  bool ok;

  if(rc) {
    /* EPARSE is what cJSON's NULL turns into; see test below. */
    ok = (rc == KCR_ENOMEM || rc == KCR_EPARSE) && !t;
    goto out;
  }
  ok = cJSON_Compare(t, want, true);
  if(!ok)
    goto out;
  text = kcr_json_to_text(t);
  ok = !text || !strcmp(text, obj_json);
out:
  free(text);
  cJSON_Delete(t);
  kcr_errinfo_cleanup(&ei);
  return ok;
}

static void json_parse_and_print_give_the_whole_tree_or_nothing(void **state)
{
  cJSON *want = tfail_parse(obj_json);
  bool ok = tfail_torture_try("kcr_json_parse/print", json_parse_print, want, 0);
  cJSON_Delete(want);
  assert_true(ok);
}

/* Out of memory is not malformed input: a caller told EPARSE drops the data
 * as garbage (the informer re-watches, a reader reports a broken object). */
static bool json_parse_says_enomem(void *ud)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  cJSON *t = NULL;
  kcr_err rc = kcr_json_parse(obj_json, sizeof(obj_json) - 1, &t, &ei);
  bool ok = rc == KCR_OK || (rc == KCR_ENOMEM && !t);
  cJSON_Delete(t);
  kcr_errinfo_cleanup(&ei);
  return ok;
}

static void json_parse_reports_out_of_memory_as_enomem_not_eparse(void **state)
{
  tfail_torture("kcr_json_parse (error code)", json_parse_says_enomem, NULL);
}

/* A text with what the parser mends after cJSON: a string holding \u0000
 * (kept as a Raw node of its literal, a new allocation) and members written
 * twice, in a small object and in one large enough to be sorted (an array
 * allocated for it). The whole tree or ENOMEM, never EPARSE. */
static char dup_json[2048];

static bool json_parse_mended(void *ud)
{
  const char *want = ud;
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  cJSON *t = (cJSON *)1;
  char *text = NULL;
  kcr_err rc = kcr_json_parse(dup_json, strlen(dup_json), &t, &ei);
  bool ok;

  if(rc) {
    ok = rc == KCR_ENOMEM && !t;
    goto out;
  }
  tfail_exempt(true);
  text = kcr_json_to_text(t);
  tfail_exempt(false);
  ok = str_eq(text, want);
out:
  free(text);
  cJSON_Delete(t);
  kcr_errinfo_cleanup(&ei);
  return ok;
}

static void json_parse_mends_nul_strings_and_duplicates_or_says_enomem(void **state)
{
  char want[2048];
  size_t a = 0, b = 0;

  a += (size_t)snprintf(dup_json, sizeof(dup_json),
                        "{\"t\":\"x\\u0000y\",\"s\":{\"a\":1,\"a\":2},\"big\":{");
  b += (size_t)snprintf(want, sizeof(want),
                        "{\"t\":\"x\\u0000y\",\"s\":{\"a\":2},\"big\":{");
  for(int i = 0; i < 40; i++)
    a += (size_t)snprintf(dup_json + a, sizeof(dup_json) - a, "%s\"k%d\":%d",
                          i ? "," : "", i % 20, i);
  for(int i = 20; i < 40; i++)
    b += (size_t)snprintf(want + b, sizeof(want) - b, "%s\"k%d\":%d", i > 20 ? "," : "",
                          i % 20, i);
  snprintf(dup_json + a, sizeof(dup_json) - a, "}}");
  snprintf(want + b, sizeof(want) - b, "}}");
  assert_true(tfail_torture_try("kcr_json_parse (mended)", json_parse_mended, want, 0));
}

struct json_edit {
  const char *path;
  const char *value; /* set_str; NULL: kcr_json_obj */
};

/* kcr_json_obj / kcr_json_set_str: the member is there afterwards, or the
 * call failed and the tree is exactly as it was. */
static bool json_edit(void *ud)
{
  const struct json_edit *e = ud;
  cJSON *t = tfail_parse(obj_json);
  char *before = tfail_print(t), *after = NULL;
  bool ok;

  if(e->value) {
    kcr_err rc = kcr_json_set_str(t, e->path, e->value);
    if(rc == KCR_OK) {
      ok = str_eq(kcr_json_str(t, e->path), e->value);
    } else {
      after = tfail_print(t);
      ok = rc == KCR_ENOMEM && str_eq(before, after);
    }
  } else {
    cJSON *o = kcr_json_obj(t, e->path);
    if(o) {
      ok = cJSON_IsObject(o) && kcr_json_at(t, e->path) == o;
    } else {
      after = tfail_print(t);
      ok = str_eq(before, after);
    }
  }
  free(before);
  free(after);
  cJSON_Delete(t);
  return ok;
}

static void json_set_str_replaces_a_value_or_leaves_the_tree_unchanged(void **state)
{
  /* An existing member in an existing object: nothing else to create. */
  tfail_torture("kcr_json_set_str (replace)", json_edit,
                &(struct json_edit){"/metadata/labels/app", "new"});
}

static void json_set_str_on_a_new_path_leaves_no_half_built_objects(void **state)
{
  tfail_torture("kcr_json_set_str (new path)", json_edit,
                &(struct json_edit){"/status/sub/field", "v"});
}

static void json_obj_creates_the_whole_path_or_nothing(void **state)
{
  tfail_torture("kcr_json_obj", json_edit,
                &(struct json_edit){"/spec/template/metadata"});
}

/* ---- kcr_errinfo ---------------------------------------------------------- */

/* A field of ei after a failure: exact, or NULL (the detail was lost) - never
 * garbage, never a stale value from before. */
static bool field_ok(const char *got, const char *want)
{
  return !got || str_eq(got, want);
}

static bool errinfo_set(void *ud)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  kcr_err rc;
  bool ok;

  tfail_exempt(true);
  ei.reason = strdup("stale reason");
  ei.code = 500;
  tfail_exempt(false);
  rc = kcr_errinfo_set(&ei, KCR_ECONFIG, "%s: field %s is missing", "/etc/kc", "server");
  ok = rc == KCR_ECONFIG && field_ok(ei.message, "/etc/kc: field server is missing") &&
       !ei.reason && !ei.code && !ei.status && !ei.body && !ei.details;
  kcr_errinfo_cleanup(&ei);
  return ok;
}

static void errinfo_set_returns_its_code_and_exact_or_no_message(void **state)
{
  tfail_torture("kcr_errinfo_set", errinfo_set, NULL);
}

struct http_case {
  long code;
  const char *body;
  kcr_err want;
  const char *reason, *message; /* expected ei fields */
  bool has_details;
};

/* The code is derived from the HTTP status (and the Status's reason): out of
 * memory may lose details, or make the call say KCR_ENOMEM, but must never
 * turn one answer into another (409 AlreadyExists into a plain conflict). */
static bool errinfo_http(void *ud)
{
  const struct http_case *c = ud;
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  kcr_err rc = kcr_errinfo_from_http(&ei, c->code, c->body, strlen(c->body));
  bool ok = rc == c->want || rc == KCR_ENOMEM;

  if(ok && rc == c->want) {
    ok = ei.code == (int)c->code && field_ok(ei.reason, c->reason) &&
         field_ok(ei.message, c->message);
    if(!c->reason) /* not a Status: the raw body is kept (or lost) */
      ok = ok && field_ok(ei.body, c->body);
    if(c->has_details && ei.details)
      ok = ok && str_eq(kcr_json_str(ei.details, "/name"), "a");
  }
  kcr_errinfo_cleanup(&ei);
  return ok;
}

static void errinfo_from_http_never_changes_the_answer_a_status_body(void **state)
{
  tfail_torture(
      "kcr_errinfo_from_http (409 AlreadyExists)", errinfo_http,
      &(struct http_case){409,
                          "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":"
                          "\"Failure\",\"message\":\"configmaps \\\"a\\\" already "
                          "exists\",\"reason\":\"AlreadyExists\",\"details\":{\"name\":"
                          "\"a\",\"kind\":\"configmaps\"},\"code\":409}",
                          KCR_EEXIST, "AlreadyExists", "configmaps \"a\" already exists",
                          true});
}

static void errinfo_from_http_keeps_a_plain_body_or_nothing(void **state)
{
  tfail_torture("kcr_errinfo_from_http (plain 500)", errinfo_http,
                &(struct http_case){500, "upstream connect error", KCR_ESERVER, NULL,
                                    "HTTP 500 with a body that is not a Status", false});
}

static bool errinfo_status(void *ud)
{
  const cJSON *st = ud;
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  kcr_err rc = kcr_errinfo_from_status(&ei, st);
  bool ok = rc == KCR_EGONE && ei.code == 410 && field_ok(ei.status, "Failure") &&
            field_ok(ei.reason, "Expired") &&
            field_ok(ei.message, "too old resource version: 1 (5)") &&
            (!ei.details || str_eq(kcr_json_str(ei.details, "/kind"), "configmaps"));
  kcr_errinfo_cleanup(&ei);
  return ok;
}

static void errinfo_from_status_classifies_before_it_copies(void **state)
{
  cJSON *st = tfail_parse("{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":"
                          "\"Failure\",\"message\":\"too old resource version: 1 (5)\","
                          "\"reason\":\"Expired\",\"details\":{\"kind\":"
                          "\"configmaps\"},\"code\":410}");
  bool ok = tfail_torture_try("kcr_errinfo_from_status", errinfo_status, st, 0);
  cJSON_Delete(st);
  assert_true(ok);
}

/* ---- kcr_time_* and kcr_backoff: no allocation at all ---------------------- */

static void time_and_backoff_functions_do_not_allocate(void **state)
{
  char buf[KCR_RFC3339_MICRO_LEN];
  struct timespec ts = {1764410400, 123456000};
  struct kcr_backoff b = KCR_BACKOFF_REFLECTOR;
  time_t t;
  uint64_t ms;

  tfail_reset();
  kcr_time_format(1764410400, buf);
  kcr_time_format_micro(&ts, buf);
  assert_int_equal(KCR_OK, kcr_time_parse("2025-11-29T10:00:00.5+01:00", &t));
  assert_int_equal(KCR_OK, kcr_duration_parse("1m30s", &ms));
  (void)kcr_time_deadline_ms(1000);
  (void)kcr_time_mono_after(10);
  (void)kcr_backoff_next(&b);
  kcr_backoff_reset(&b);
  (void)kcr_hash_str("ns/name");
  assert_int_equal(0, tfail_count());
}

/* ---- kcr_log_kv ----------------------------------------------------------- */

/* What a record looks like without its timestamp (from " level=" or
 * ",\"level\"" on). */
static const char *after_ts(const char *line, bool json)
{
  const char *p = strstr(line, json ? ",\"level\"" : " level=");
  return p ? p : "";
}

struct logcase {
  int fd;
  bool json;
  const char *want; /* the record after its timestamp */
};

static bool log_record(void *ud)
{
  struct logcase *lc = ud;
  char got[4096];
  ssize_t n;
  bool ok;

  lseek(lc->fd, 0, SEEK_SET);
  if(ftruncate(lc->fd, 0))
    return false;
  KCR_LOG(KCR_LOG_WARN, "a \"quoted\" message\nwith a newline",
          KCR_S("resource", "configmaps"), KCR_I("attempt", 3), KCR_B("ok", false),
          KCR_D("ratio", 0.5), KCR_S("token", "s3cr3t"),
          KCR_S("note", "tab\there, \\back\\ and \x01 ctl"));
  n = pread(lc->fd, got, sizeof(got) - 1, 0);
  if(n < 0)
    return false;
  got[n] = '\0';
  tfail_exempt(true);
  /* Complete, or the fixed notice that a record was dropped: never a record
   * with pieces missing (a lost quote makes the rest of a JSON line junk). */
  ok = !strcmp(after_ts(got, lc->json), lc->want) ||
       strstr(got, "log record dropped: out of memory") != NULL;
  ok = ok && n > 0 && got[n - 1] == '\n' && !strchr(got, '\n')[1];
  tfail_exempt(false);
  return ok;
}

static void log_record_is_written_whole_or_replaced_by_a_notice(void **state)
{
  struct logcase lc = {memfd_create("tlog", 0), false, NULL};
  int old_level = kcr_log_get_level();

  assert_true(lc.fd >= 0);
  kcr_log_set_fd(lc.fd);
  kcr_log_set_level(KCR_LOG_DEBUG);
  lc.want = " level=warn msg=\"a \\\"quoted\\\" message\\nwith a newline\" "
            "resource=configmaps attempt=3 ok=false ratio=0.5 token=[redacted] "
            "note=\"tab\\u0009here, \\\\back\\\\ and \\u0001 ctl\"\n";
  bool ok = tfail_torture_try("kcr_log_kv (key=value)", log_record, &lc, 0);
  kcr_log_set_format(KCR_LOG_JSON);
  lc.json = true;
  lc.want = ",\"level\":\"warn\",\"msg\":\"a \\\"quoted\\\" message\\nwith a newline\","
            "\"resource\":\"configmaps\",\"attempt\":3,\"ok\":false,\"ratio\":0.5,"
            "\"token\":\"[redacted]\",\"note\":\"tab\\u0009here, \\\\back\\\\ and "
            "\\u0001 ctl\"}\n";
  ok &= tfail_torture_try("kcr_log_kv (json)", log_record, &lc, 0);
  kcr_log_set_format(KCR_LOG_KV);
  kcr_log_set_fd(2);
  kcr_log_set_level(old_level);
  close(lc.fd);
  assert_true(ok);
}

int main(void)
{
  tfail_init();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(buf_append_printf_urlenc_apply_completely_or_not_at_all),
      cmocka_unit_test(buf_take_of_an_empty_buffer_is_empty_or_null),
      cmocka_unit_test(arena_alloc_strdup_printf_fail_cleanly),
      cmocka_unit_test(base64_decode_is_whole_or_enomem_with_null_output),
      cmocka_unit_test(json_parse_and_print_give_the_whole_tree_or_nothing),
      cmocka_unit_test(json_parse_reports_out_of_memory_as_enomem_not_eparse),
      cmocka_unit_test(json_parse_mends_nul_strings_and_duplicates_or_says_enomem),
      cmocka_unit_test(json_set_str_replaces_a_value_or_leaves_the_tree_unchanged),
      cmocka_unit_test(json_set_str_on_a_new_path_leaves_no_half_built_objects),
      cmocka_unit_test(json_obj_creates_the_whole_path_or_nothing),
      cmocka_unit_test(errinfo_set_returns_its_code_and_exact_or_no_message),
      cmocka_unit_test(errinfo_from_http_never_changes_the_answer_a_status_body),
      cmocka_unit_test(errinfo_from_http_keeps_a_plain_body_or_nothing),
      cmocka_unit_test(errinfo_from_status_classifies_before_it_copies),
      cmocka_unit_test(time_and_backoff_functions_do_not_allocate),
      cmocka_unit_test(log_record_is_written_whole_or_replaced_by_a_notice),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
