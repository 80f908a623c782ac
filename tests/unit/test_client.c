/* The REST client and the watch at unit level, on the wire seam: paging,
 * limits on what the server sends, Retry-After arithmetic, the write gate,
 * and watch delivery (rv moves only past delivered events); and, without
 * the network, which servers the client reaches through a proxy. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "kcr.h"
#include "tcheck.h"
#include "tenv.h"
#include "tfail.h"
#include "twire.h"

static const struct kcr_gvr cms = {"", "v1", "configmaps", true};

/* ---- paging ---- */

/* Three pages of 2 items: continue tokens "p2", "p3". */
static kcr_err pages(struct twire_call *call, void *ud)
{
  char tok[16];
  const char *t = twire_query(call, "continue", tok, sizeof(tok));
  int page = !t ? 1 : !strcmp(t, "p2") ? 2 : 3;
  return twire_reply(
      call, 200,
      "{\"kind\":\"ConfigMapList\",\"metadata\":{\"resourceVersion\":\"10\""
      "%s%s%s},\"items\":[{\"metadata\":{\"name\":\"a%d\"}},"
      "{\"metadata\":{\"name\":\"b%d\"}}]}",
      page < 3 ? ",\"continue\":\"" : "", page == 1 ? "p2" : "p3", page < 3 ? "\"" : "",
      page, page);
}

static kcr_err count_item(const cJSON *item, void *ud)
{
  (*(int *)ud)++;
  return KCR_OK;
}

struct listing {
  kcr_client *c;
};

/* A listing either fails or returns every page: a lost continue token must
 * not end it early as a success (the informer would then emit deletes for
 * everything on the missing pages). */
static bool list_all_or_nothing(void *ud)
{
  struct listing *l = ud;
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  struct kcr_ref ref = {&cms, "ns"};
  char *rv = NULL;
  int n = 0;
  kcr_err rc = kcr_list_each(l->c, &ref, &(struct kcr_list_opts){.limit = 2}, count_item,
                             &n, &rv, &ei);
  bool ok = rc ? rv == NULL : n == 6 && rv && !strcmp(rv, "10");
  free(rv);
  kcr_errinfo_cleanup(&ei);
  return ok;
}

static void list_each_never_returns_a_truncated_list(void **state)
{
  struct listing l = {twire_client(pages, NULL)};
  tfail_torture("kcr_list_each", list_all_or_nothing, &l);
  kcr_client_free(l.c);
}

/* kcr_list_each_text: the same pages; each item's text as written, the
 * same torture. */
static kcr_err collect_text(const char *text, size_t len, void *ud)
{
  struct kcr_buf *b = ud;
  kcr_buf_append(b, text, len);
  kcr_buf_append(b, "|", 1);
  return kcr_buf_err(b);
}

static bool list_text_all_or_nothing(void *ud)
{
  struct listing *l = ud;
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  struct kcr_ref ref = {&cms, "ns"};
  struct kcr_buf b = KCR_BUF_INIT;
  char *rv = NULL;
  kcr_err rc = kcr_list_each_text(l->c, &ref, &(struct kcr_list_opts){.limit = 2},
                                  collect_text, &b, &rv, &ei);
  bool ok =
      rc ? rv == NULL
         : rv && !strcmp(rv, "10") &&
               !strcmp(
                   kcr_buf_str(&b),
                   "{\"metadata\":{\"name\":\"a1\"}}|{\"metadata\":{\"name\":\"b1\"}}|"
                   "{\"metadata\":{\"name\":\"a2\"}}|{\"metadata\":{\"name\":\"b2\"}}|"
                   "{\"metadata\":{\"name\":\"a3\"}}|{\"metadata\":{\"name\":\"b3\"}}|");
  free(rv);
  kcr_buf_cleanup(&b);
  kcr_errinfo_cleanup(&ei);
  return ok;
}

static void list_each_text_never_returns_a_truncated_list(void **state)
{
  struct listing l = {twire_client(pages, NULL)};
  tfail_torture("kcr_list_each_text", list_text_all_or_nothing, &l);
  kcr_client_free(l.c);
}

/* One page, as the test gives it (ud). */
static kcr_err one_page(struct twire_call *call, void *ud)
{
  return twire_reply(call, 200, "%s", (const char *)ud);
}

/* The items kcr_list_each_text hands out for page, '|'-terminated, and its
 * return code and resourceVersion. */
static kcr_err list_text(const char *page, struct kcr_buf *items, char **rv)
{
  kcr_client *c = twire_client(one_page, (void *)page);
  kcr_err rc = kcr_list_each_text(c, &(struct kcr_ref){&cms, "ns"}, NULL, collect_text,
                                  items, rv, NULL);
  kcr_client_free(c);
  return rc;
}

/* Items come as written from a compact page; from any other page (white
 * space, marks written with escapes, items that are not an array) as cJSON
 * prints them, which parse to the same; a malformed page is EPARSE. */
static void listed_texts_are_compact_whatever_the_page(void **state)
{
  static const struct {
    const char *page, *items, *rv;
  } cases[] = {
      {"{\"metadata\":{\"resourceVersion\":\"5\"},\"items\":[{\"a\":1.50e1},2,\"x\"]}",
       "{\"a\":1.50e1}|2|\"x\"|", "5"},
      {"{\"metadata\":{\"resourceVersion\":\"5\"},\"items\":[ {\"a\":1.50e1} ]}",
       "{\"a\":15}|", "5"},
      {"{\"metadata\":{\"resourceVersion\":\"\\u0035\"},\"items\":[{\"a\":1.50e1}]}",
       "{\"a\":15}|", "5"},
      {"{\"metadata\":{\"resourceVersion\":\"5\"},\"items\":{\"k\":{\"a\":1}}}",
       "{\"a\":1}|", "5"},
      {"{\"metadata\":{\"resourceVersion\":5},\"items\":[]}", "", NULL},
      {"{\"metadata\":{\"resourceVersion\":\"5\"}}", "", "5"},
  };
  for(size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    struct kcr_buf items = KCR_BUF_INIT;
    char *rv = NULL;
    print_message("%zu: %s\n", i, cases[i].page);
    assert_int_equal(KCR_OK, list_text(cases[i].page, &items, &rv));
    assert_string_equal(cases[i].items, kcr_buf_str(&items));
    if(cases[i].rv)
      assert_string_equal(cases[i].rv, rv);
    else
      assert_null(rv);
    free(rv);
    kcr_buf_cleanup(&items);
  }
  struct kcr_buf items = KCR_BUF_INIT;
  char *rv = NULL;
  assert_int_equal(KCR_EPARSE, list_text("{\"items\":[{\"a\":1},}", &items, &rv));
  assert_null(rv);
  kcr_buf_cleanup(&items);
}

/* An item nested deeper than the structure walk follows (128 levels) is
 * still valid JSON (a tree takes up to 1000): the page lists whole, every
 * item once, as the tree way prints it. */
static void items_nested_deeper_than_the_walk_still_list(void **state)
{
  enum { DEEP = 200 };
  struct kcr_buf page = KCR_BUF_INIT, want = KCR_BUF_INIT, items = KCR_BUF_INIT;
  char *rv = NULL;

  kcr_buf_puts(&page, "{\"metadata\":{\"resourceVersion\":\"7\"},\"items\":[{\"a\":1},");
  kcr_buf_puts(&want, "{\"a\":1}|");
  for(int i = 0; i < DEEP; i++) {
    kcr_buf_append(&page, "[", 1);
    kcr_buf_append(&want, "[", 1);
  }
  for(int i = 0; i < DEEP; i++) {
    kcr_buf_append(&page, "]", 1);
    kcr_buf_append(&want, "]", 1);
  }
  kcr_buf_puts(&page, ",{\"b\":2}]}");
  kcr_buf_puts(&want, "|{\"b\":2}|");
  assert_int_equal(KCR_OK, kcr_buf_err(&page));
  assert_int_equal(KCR_OK, list_text(kcr_buf_str(&page), &items, &rv));
  assert_string_equal(kcr_buf_str(&want), kcr_buf_str(&items));
  assert_string_equal("7", rv);
  free(rv);
  kcr_buf_cleanup(&items);
  kcr_buf_cleanup(&want);
  kcr_buf_cleanup(&page);
}

/* ---- limits ---- */

static kcr_err big(struct twire_call *call, void *ud)
{
  size_t n = *(size_t *)ud;
  char *body = malloc(n + 3);
  long code = 200;
  if(twire_is(call, "GET", "/api/v1/namespaces/ns/configmaps/err"))
    code = 500;
  memset(body, 'x', n + 2);
  body[0] = '"';
  body[n + 1] = '"';
  body[n + 2] = '\0';
  twire_reply(call, code, "%s", body);
  free(body);
  return KCR_OK;
}

static void oversized_answers_are_refused_with_a_clear_error(void **state)
{
  size_t n = 4096;
  kcr_client *c =
      twire_client_opts(big, &n, &(struct kcr_client_opts){.max_response_bytes = 1000});
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  cJSON *out = NULL;

  assert_int_equal(KCR_ETOOLARGE,
                   kcr_get(c, &(struct kcr_ref){&cms, "ns", "a"}, &out, &ei));
  assert_null(out);
  assert_non_null(strstr(ei.message, "max_response_bytes = 1000"));
  assert_non_null(strstr(ei.message, "/api/v1/namespaces/ns/configmaps/a"));
  /* Under the limit: fine. */
  n = 900;
  assert_int_equal(KCR_OK, kcr_get(c, &(struct kcr_ref){&cms, "ns", "a"}, &out, &ei));
  cJSON_Delete(out);
  /* An error body is kept up to 64 KiB, the rest dropped: still the 5xx. */
  n = 200000;
  assert_int_equal(KCR_ESERVER,
                   kcr_get(c, &(struct kcr_ref){&cms, "ns", "err"}, &out, &ei));
  assert_non_null(ei.body);
  kcr_errinfo_cleanup(&ei);
  kcr_client_free(c);
}

/* ---- retries ---- */

static kcr_err unavailable(struct twire_call *call, void *ud)
{
  (*(int *)ud)++;
  return twire_reply(call, 503, "%s", twire_status_json(503, "ServiceUnavailable"));
}

static kcr_err unavailable_retry_after(struct twire_call *call, void *ud)
{
  (*(int *)ud)++;
  twire_retry_after(call, 999999999999999L); /* 15 digits: as parsed */
  return twire_reply(call, 503, "%s", twire_status_json(503, "ServiceUnavailable"));
}

static void many_retries_and_huge_retry_after_stay_bounded(void **state)
{
  /* 70 retries without Retry-After: the exponential backoff must not shift
   * past the width of long (UBSan would stop the test). */
  int calls = 0;
  kcr_client *c = twire_client_opts(
      unavailable, &calls,
      &(struct kcr_client_opts){.max_retries = 70, .max_retry_after_ms = 1});
  assert_int_equal(KCR_EUNAVAILABLE,
                   kcr_get(c, &(struct kcr_ref){&cms, "ns", "a"}, NULL, NULL));
  assert_int_equal(71, calls);
  kcr_client_free(c);
  /* A Retry-After of 10^15 s is capped at max_retry_after_ms. */
  calls = 0;
  c = twire_client_opts(
      unavailable_retry_after, &calls,
      &(struct kcr_client_opts){.max_retries = 2, .max_retry_after_ms = 1});
  assert_int_equal(KCR_EUNAVAILABLE,
                   kcr_get(c, &(struct kcr_ref){&cms, "ns", "a"}, NULL, NULL));
  assert_int_equal(3, calls);
  kcr_client_free(c);
}

/* The first call answers 429, the rest 200. */
static kcr_err busy_once(struct twire_call *call, void *ud)
{
  if(!(*(int *)ud)++) {
    twire_retry_after(call, 0);
    return twire_reply(call, 429, "%s", twire_status_json(429, "TooManyRequests"));
  }
  return twire_reply(call, 200, "{\"metadata\":{\"name\":\"a\"}}");
}

/* A call that succeeds after a retry says nothing in ei: what the retried
 * attempt got was neither reported nor left behind to leak (the informer's
 * LIST, which releases ei only on failure, leaked every such 429 Status). */
static void a_success_after_a_retry_leaves_ei_alone(void **state)
{
  int calls = 0;
  kcr_client *c = twire_client(busy_once, &calls);
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  cJSON *out = NULL;

  assert_int_equal(KCR_OK, kcr_get(c, &(struct kcr_ref){&cms, "ns", "a"}, &out, &ei));
  assert_int_equal(2, calls);
  assert_int_equal(0, ei.code);
  assert_null(ei.reason);
  assert_null(ei.message);
  assert_null(ei.details);
  cJSON_Delete(out);
  /* A failure after retries reports the last attempt. */
  kcr_client_free(c);
  calls = 0;
  c = twire_client_opts(
      unavailable, &calls,
      &(struct kcr_client_opts){.max_retries = 1, .max_retry_after_ms = 1});
  assert_int_equal(KCR_EUNAVAILABLE,
                   kcr_get(c, &(struct kcr_ref){&cms, "ns", "a"}, &out, &ei));
  assert_int_equal(2, calls);
  assert_int_equal(503, ei.code);
  assert_string_equal("ServiceUnavailable", ei.reason);
  kcr_errinfo_cleanup(&ei);
  kcr_client_free(c);
}

static kcr_err busy_for_7s(struct twire_call *call, void *ud)
{
  (*(int *)ud)++;
  twire_retry_after(call, 7);
  return twire_reply(call, 429, "%s", twire_status_json(429, "TooManyRequests"));
}

/* The answer that fails a call leaves its Retry-After in ei, and a raw
 * request can turn the client's own retries off: the event recorder backs
 * off all its senders at once instead (events.h). */
static void a_429_carries_retry_after_and_a_request_may_forgo_retries(void **state)
{
  int calls = 0;
  kcr_client *c = twire_client(busy_for_7s, &calls);
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  struct kcr_http_response resp = {0, KCR_BUF_INIT};
  struct kcr_http_request req = {.method = "POST",
                                 .path = "/api/v1/namespaces/ns/configmaps",
                                 .body = "{}",
                                 .body_len = 2,
                                 .max_retries = -1};

  assert_int_equal(KCR_ETOOMANY, kcr_client_do(c, &req, &resp, &ei));
  assert_int_equal(1, calls);
  assert_int_equal(429, ei.code);
  assert_int_equal(7000, ei.retry_after_ms);
  kcr_buf_cleanup(&resp.body);
  kcr_errinfo_cleanup(&ei);
  assert_int_equal(0, ei.retry_after_ms);
  kcr_client_free(c);
  /* The client's retries (their waits capped at 1 ms): the last answer's. */
  calls = 0;
  c = twire_client_opts(
      busy_for_7s, &calls,
      &(struct kcr_client_opts){.max_retries = 2, .max_retry_after_ms = 1});
  assert_int_equal(KCR_ETOOMANY,
                   kcr_get(c, &(struct kcr_ref){&cms, "ns", "a"}, NULL, &ei));
  assert_int_equal(3, calls);
  assert_int_equal(7000, ei.retry_after_ms);
  kcr_errinfo_cleanup(&ei);
  req.max_retries = 1; /* a request's own count */
  calls = 0;
  assert_int_equal(KCR_ETOOMANY, kcr_client_do(c, &req, &resp, &ei));
  assert_int_equal(2, calls);
  kcr_buf_cleanup(&resp.body);
  kcr_errinfo_cleanup(&ei);
  kcr_client_free(c);
  /* An answer without one: 0. */
  calls = 0;
  c = twire_client_opts(unavailable, &calls,
                        &(struct kcr_client_opts){.max_retries = -1});
  assert_int_equal(KCR_EUNAVAILABLE,
                   kcr_get(c, &(struct kcr_ref){&cms, "ns", "a"}, NULL, &ei));
  assert_int_equal(503, ei.code);
  assert_int_equal(0, ei.retry_after_ms);
  kcr_errinfo_cleanup(&ei);
  kcr_client_free(c);
}

static kcr_err unauthorized(struct twire_call *call, void *ud)
{
  (*(int *)ud)++;
  return twire_reply(call, 401, "%s", twire_status_json(401, "Unauthorized"));
}

/* A 401 is retried once, after a re-read, only with credentials a re-read
 * can change (a token file; an exec plugin): a static token or certificate
 * would be refused again, and each refusal cost two requests (an expired
 * client certificate doubled the load ebdman put on the apiserver). */
static void a_401_is_retried_only_with_credentials_that_can_change(void **state)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  char path[] = "/tmp/kcr-test-token-XXXXXX", yaml[512];
  kcr_config *cfg = NULL;
  int calls = 0, fd;
  kcr_client *c = twire_client(unauthorized, &calls); /* a static token */

  assert_int_equal(KCR_EUNAUTHORIZED,
                   kcr_get(c, &(struct kcr_ref){&cms, "ns", "a"}, NULL, &ei));
  assert_int_equal(1, calls);
  assert_int_equal(401, ei.code);
  kcr_client_free(c);

  fd = mkstemp(path);
  assert_true(fd >= 0);
  assert_int_equal(5, write(fd, "t0ken", 5));
  close(fd);
  snprintf(yaml, sizeof(yaml),
           "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n"
           "    server: https://twire.invalid\nusers:\n- name: u\n  user:\n"
           "    tokenFile: %s\ncontexts:\n- name: x\n  context: {cluster: c, user: u}\n"
           "current-context: x\n",
           path);
  assert_int_equal(KCR_OK, kcr_config_from_yaml(yaml, strlen(yaml), NULL, &cfg, &ei));
  assert_int_equal(KCR_OK,
                   kcr_client_new(&(struct kcr_client_opts){.config = cfg}, &c, &ei));
  kcr_config_free(cfg);
  twire_attach(c, unauthorized, &calls);
  calls = 0;
  assert_int_equal(KCR_EUNAUTHORIZED,
                   kcr_get(c, &(struct kcr_ref){&cms, "ns", "a"}, NULL, &ei));
  assert_int_equal(2, calls);
  kcr_client_free(c);
  unlink(path);
  kcr_errinfo_cleanup(&ei);
}

/* ---- the write gate ---- */

static kcr_err ok_echo(struct twire_call *call, void *ud)
{
  (*(int *)ud)++;
  return twire_reply(call, 200, "{\"metadata\":{\"name\":\"a\"}}");
}

static bool gate_open;
static bool gate(void *ud) { return gate_open; }

static void the_write_gate_stops_mutating_requests_only(void **state)
{
  int sent = 0;
  kcr_client *c = twire_client(ok_echo, &sent);
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  struct kcr_ref one = {&cms, "ns", "a"};
  const char body[] = "{}";

  kcr_client_set_write_gate(c, gate, NULL);
  gate_open = false;
  assert_int_equal(KCR_OK, kcr_get(c, &one, NULL, &ei)); /* reads pass */
  assert_int_equal(1, sent);
  assert_int_equal(KCR_ECANCELED,
                   kcr_patch(c, &one, &(struct kcr_patch_opts){KCR_PATCH_MERGE}, body,
                             strlen(body), NULL, &ei));
  assert_non_null(strstr(ei.message, "write gate"));
  assert_int_equal(KCR_ECANCELED, kcr_delete(c, &one, NULL, NULL, &ei));
  assert_int_equal(1, sent); /* nothing was sent */
  /* The lease's own requests are marked ungated. */
  struct kcr_http_response resp = {0, KCR_BUF_INIT};
  assert_int_equal(KCR_OK, kcr_client_do(c,
                                         &(struct kcr_http_request){.method = "PUT",
                                                                    .path = "/x",
                                                                    .body = body,
                                                                    .body_len = 2,
                                                                    .ungated = true},
                                         &resp, &ei));
  kcr_buf_cleanup(&resp.body);
  assert_int_equal(2, sent);
  gate_open = true;
  assert_int_equal(KCR_OK, kcr_delete(c, &one, NULL, NULL, &ei));
  assert_int_equal(3, sent);
  kcr_errinfo_cleanup(&ei);
  kcr_client_free(c);
}

/* A gate that lets through the writes of scope 7 alone, and records what
 * it was asked. */
struct scope_seen {
  int calls, unscoped;
  uint64_t last;
};

static bool scope_gate(void *ud)
{
  struct scope_seen *s = ud;
  uint64_t scope = 0;
  s->calls++;
  if(!kcr_write_scope(&scope)) {
    s->unscoped++;
    return true;
  }
  s->last = scope;
  return scope == 7;
}

static void scoped_handles_carry_their_scope_to_the_gate(void **state)
{
  int sent = 0;
  kcr_client *c = twire_client(ok_echo, &sent), *h7 = NULL, *h9 = NULL, *h97 = NULL;
  struct scope_seen seen = {0};
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  struct kcr_ref one = {&cms, "ns", "a"};

  assert_int_equal(KCR_EINVAL, kcr_client_scoped(NULL, 7, &h7));
  assert_null(h7);
  assert_int_equal(KCR_OK, kcr_client_scoped(c, 7, &h7));
  assert_int_equal(KCR_OK, kcr_client_scoped(c, 9, &h9));
  assert_int_equal(KCR_OK, kcr_client_scoped(h9, 7, &h97)); /* same root */
  /* a gate set through a handle is the client's */
  kcr_client_set_write_gate(h9, scope_gate, &seen);
  assert_ptr_equal(kcr_client_config(c), kcr_client_config(h7));
  assert_int_equal(KCR_OK, kcr_delete(h7, &one, NULL, NULL, &ei));
  assert_int_equal(1, seen.calls);
  assert_true(seen.last == 7);
  assert_int_equal(KCR_ECANCELED, kcr_delete(h9, &one, NULL, NULL, &ei));
  assert_true(seen.last == 9);
  assert_int_equal(KCR_OK, kcr_delete(h97, &one, NULL, NULL, &ei));
  assert_true(seen.last == 7);
  /* the client itself: no scope; after a scoped call none is left over */
  assert_int_equal(KCR_OK, kcr_delete(c, &one, NULL, NULL, &ei));
  assert_int_equal(1, seen.unscoped);
  assert_false(kcr_write_scope(NULL));
  /* reads through a handle are not gated */
  assert_int_equal(KCR_OK, kcr_get(h9, &one, NULL, &ei));
  assert_int_equal(4, seen.calls);
  assert_int_equal(4, sent);
  /* a handle keeps its root alive */
  kcr_client_set_write_gate(c, NULL, NULL);
  kcr_client_free(c);
  assert_int_equal(KCR_OK, kcr_delete(h7, &one, NULL, NULL, &ei));
  assert_int_equal(5, sent);
  kcr_client_free(h97);
  kcr_client_free(h9);
  kcr_client_free(h7);
  kcr_errinfo_cleanup(&ei);
}

/* ---- the watch ---- */

static kcr_err three_events(struct twire_call *call, void *ud)
{
  twire_stream(call, 200);
  for(int i = 1; i <= 3; i++)
    if(!twire_send(call,
                   "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"o%d\","
                   "\"resourceVersion\":\"%d\"}}}",
                   i, 100 + i))
      break;
  return KCR_OK;
}

static kcr_err fail_second(struct kcr_watch_event *ev, void *ud)
{
  int *seen = ud;
  return ++*seen == 2 ? KCR_ENOMEM : KCR_OK;
}

static void a_failed_event_is_not_skipped(void **state)
{
  int seen = 0;
  kcr_client *c = twire_client(three_events, NULL);
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  kcr_watch *w;

  assert_int_equal(
      KCR_OK, kcr_watch_new(&(struct kcr_watch_opts){.client = c,
                                                     .on_event = fail_second,
                                                     .ud = &seen,
                                                     .ref = &(struct kcr_ref){&cms, "ns"},
                                                     .resource_version = "100"},
                            &w, NULL));
  assert_int_equal(KCR_ENOMEM, kcr_watch_run(w, &ei));
  assert_int_equal(2, seen);
  /* The next watch starts after the last delivered event, so the failed one
   * comes again. */
  assert_string_equal("101", kcr_watch_rv(w));
  kcr_watch_free(w);
  kcr_errinfo_cleanup(&ei);
  kcr_client_free(c);
}

static kcr_err huge_event(struct twire_call *call, void *ud)
{
  char pad[2048];
  memset(pad, 'x', sizeof(pad) - 1);
  pad[sizeof(pad) - 1] = '\0';
  twire_stream(call, 200);
  twire_send(call, "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"%s\"}}}",
             pad);
  return KCR_OK;
}

static kcr_err ignore(struct kcr_watch_event *ev, void *ud) { return KCR_OK; }

static void an_oversized_watch_event_is_refused(void **state)
{
  kcr_client *c = twire_client_opts(
      huge_event, NULL, &(struct kcr_client_opts){.max_response_bytes = 1024});
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  kcr_watch *w;
  assert_int_equal(
      KCR_OK,
      kcr_watch_new(&(struct kcr_watch_opts){.client = c,
                                             .on_event = ignore,
                                             .ref = &(struct kcr_ref){&cms, "ns"}},
                    &w, NULL));
  assert_int_equal(KCR_ETOOLARGE, kcr_watch_run(w, &ei));
  assert_non_null(strstr(ei.message, "max_response_bytes = 1024"));
  kcr_watch_free(w);
  kcr_errinfo_cleanup(&ei);
  kcr_client_free(c);
}

/* A watch line that does not parse is logged by its length, never by its
 * content: a Secret's data can be in it (the old watch logged its first 120
 * bytes at WARN). The caller's error does not quote it either. */
static kcr_err broken_secret_event(struct twire_call *call, void *ud)
{
  twire_stream(call, 200);
  twire_send(call, "{\"type\":\"ADDED\",\"object\":{\"kind\":\"Secret\",\"data\":"
                   "{\"token\":\"kcr-secret-in-a-broken-event\"}");
  return KCR_OK;
}

static void a_malformed_watch_line_is_logged_without_its_content(void **state)
{
  kcr_client *c = twire_client(broken_secret_event, NULL);
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  enum kcr_log_level lvl = kcr_log_get_level();
  FILE *f = tmpfile();
  char log[4096];
  size_t n;
  kcr_watch *w;

  assert_non_null(f);
  assert_int_equal(
      KCR_OK,
      kcr_watch_new(&(struct kcr_watch_opts){.client = c,
                                             .on_event = ignore,
                                             .ref = &(struct kcr_ref){&cms, "ns"}},
                    &w, NULL));
  kcr_log_set_fd(fileno(f));
  kcr_log_set_level(KCR_LOG_DEBUG);
  assert_int_equal(KCR_EPARSE, kcr_watch_run(w, &ei));
  kcr_log_set_level(lvl);
  kcr_log_set_fd(2);
  rewind(f);
  n = fread(log, 1, sizeof(log) - 1, f);
  log[n] = '\0';
  fclose(f);
  assert_non_null(strstr(log, "malformed watch event"));
  assert_null(strstr(log, "kcr-secret"));
  assert_null(strstr(ei.message, "kcr-secret"));
  kcr_watch_free(w);
  kcr_errinfo_cleanup(&ei);
  kcr_client_free(c);
}

/* ---- arguments and options ---- */

/* Records the last request's path and body; answers 200 with an object (a
 * watch: an empty stream the server ends). */
struct last {
  char path[512], body[512];
  char timeout[32]; /* timeoutSeconds, "" when absent */
  int n;
};

static kcr_err record_last(struct twire_call *call, void *ud)
{
  struct last *l = ud;
  l->n++;
  snprintf(l->path, sizeof(l->path), "%s", call->req->path);
  snprintf(l->body, sizeof(l->body), "%.*s", (int)call->req->body_len,
           call->req->body ? call->req->body : "");
  if(!twire_query(call, "timeoutSeconds", l->timeout, sizeof(l->timeout)))
    l->timeout[0] = '\0';
  if(call->req->watch) {
    twire_stream(call, 200);
    return KCR_OK;
  }
  return twire_reply(call, 200, "{\"metadata\":{\"name\":\"a\"}}");
}

/* The watch's timeout is in milliseconds like every other; the server gets
 * whole seconds, rounded up so the stream never ends early. */
static void watch_timeouts_are_ms_rounded_up_to_seconds(void **state)
{
  static const struct {
    uint64_t ms;
    const char *want; /* timeoutSeconds, "" for none */
  } cases[] = {{0, ""},
               {1, "1"},
               {1000, "1"},
               {1500, "2"},
               {300000, "300"},
               {KCR_FOREVER, ""},
               {KCR_FOREVER - 1, "2147483647"}};
  struct last l = {0};
  kcr_client *c = twire_client(record_last, &l);

  for(size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    kcr_watch *w;
    assert_int_equal(
        KCR_OK,
        kcr_watch_new(&(struct kcr_watch_opts){.client = c,
                                               .ref = &(struct kcr_ref){&cms, "ns"},
                                               .on_event = ignore,
                                               .timeout_ms = cases[i].ms},
                      &w, NULL));
    assert_int_equal(KCR_OK, kcr_watch_run(w, NULL));
    kcr_watch_free(w);
    assert_string_equal(cases[i].want, l.timeout);
  }
  kcr_client_free(c);
}

/* A watch holds a reference to its client: the caller may drop its own. */
static void a_watch_keeps_its_client(void **state)
{
  struct last l = {0};
  kcr_client *c = twire_client(record_last, &l);
  kcr_watch *w;

  assert_int_equal(
      KCR_OK, kcr_watch_new(&(struct kcr_watch_opts){.client = c,
                                                     .ref = &(struct kcr_ref){&cms, "ns"},
                                                     .on_event = ignore},
                            &w, NULL));
  kcr_client_free(c);
  assert_int_equal(KCR_OK, kcr_watch_run(w, NULL));
  assert_int_equal(1, l.n);
  kcr_watch_free(w);
}

/* The Accept header each request carried, by kind of request; written on
 * the threads that send them (an informer's), read on the test's: under mu. */
struct accepts {
  pthread_mutex_t mu;
  char list[160], watch[160], get[160];
};

static void note_accept(struct accepts *a, char *to, const struct kcr__wire_request *req)
{
  pthread_mutex_lock(&a->mu);
  snprintf(to, 160, "%s", req->accept ? req->accept : "(json)");
  pthread_mutex_unlock(&a->mu);
}

/* A copy of field (one of a's), taken under a's lock. */
static const char *accepted(struct accepts *a, const char *field)
{
  static char copy[160];
  pthread_mutex_lock(&a->mu);
  snprintf(copy, sizeof(copy), "%s", field);
  pthread_mutex_unlock(&a->mu);
  return copy;
}

static void forget(struct accepts *a, char *field)
{
  pthread_mutex_lock(&a->mu);
  field[0] = '\0';
  pthread_mutex_unlock(&a->mu);
}

static kcr_err record_accept(struct twire_call *call, void *ud)
{
  struct accepts *a = ud;
  if(call->req->watch) {
    note_accept(a, a->watch, call->req);
    twire_stream(call, 200);
    twire_send(call, "{\"type\":\"ADDED\",\"object\":{\"apiVersion\":\"meta.k8s.io/v1\","
                     "\"kind\":\"PartialObjectMetadata\",\"metadata\":{\"name\":\"o\","
                     "\"resourceVersion\":\"5\"}}}");
    return KCR_OK;
  }
  if(twire_is(call, "GET", "/api/v1/namespaces/ns/configmaps/x")) {
    note_accept(a, a->get, call->req);
    return twire_reply(call, 200, "{\"metadata\":{\"name\":\"x\"}}");
  }
  note_accept(a, a->list, call->req);
  return twire_reply(call, 200,
                     "{\"kind\":\"PartialObjectMetadataList\",\"apiVersion\":"
                     "\"meta.k8s.io/v1\",\"metadata\":{\"resourceVersion\":\"5\"},"
                     "\"items\":[]}");
}

static kcr_err stop_at_first(struct kcr_watch_event *ev, void *ud)
{
  return KCR_ECANCELED;
}

/* metadata_only asks for PartialObjectMetadata(List), on a list (each of
 * the three list calls), a watch and an informer's list and watch, and so
 * does kcr_get_metadata; every
 * other request, and the same ones without it, accept plain JSON. A raw
 * request's accept and content type may not hold a control character (the
 * header would end there). */
static void metadata_only_reads_ask_for_partial_object_metadata(void **state)
{
  struct accepts a = {PTHREAD_MUTEX_INITIALIZER, "", "", ""};
  kcr_client *c = twire_client(record_accept, &a);
  struct kcr_ref coll = {&cms, "ns"};
  struct kcr_list_opts mo = {.metadata_only = true};
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  cJSON *out = NULL;
  kcr_watch *w;
  kcr_informer *inf;

  assert_int_equal(KCR_OK, kcr_list(c, &coll, &mo, &out, NULL));
  assert_string_equal(KCR_ACCEPT_METADATA_LIST, accepted(&a, a.list));
  cJSON_Delete(out);
  forget(&a, a.list);
  assert_int_equal(KCR_OK,
                   kcr_list_each(c, &coll, &mo, count_item, &(int){0}, NULL, NULL));
  assert_string_equal(KCR_ACCEPT_METADATA_LIST, accepted(&a, a.list));
  forget(&a, a.list);
  assert_int_equal(KCR_OK, kcr_list_each_text(c, &coll, &mo, collect_text,
                                              &(struct kcr_buf)KCR_BUF_INIT, NULL, NULL));
  assert_string_equal(KCR_ACCEPT_METADATA_LIST, accepted(&a, a.list));
  assert_int_equal(KCR_OK, kcr_list(c, &coll, NULL, &out, NULL));
  assert_string_equal("(json)", accepted(&a, a.list));
  cJSON_Delete(out);
  assert_int_equal(KCR_OK, kcr_get(c, &(struct kcr_ref){&cms, "ns", "x"}, &out, NULL));
  assert_string_equal("(json)", accepted(&a, a.get));
  cJSON_Delete(out);
  assert_int_equal(KCR_OK,
                   kcr_get_metadata(c, &(struct kcr_ref){&cms, "ns", "x"}, &out, NULL));
  assert_string_equal(KCR_ACCEPT_METADATA, accepted(&a, a.get));
  cJSON_Delete(out);

  assert_int_equal(KCR_OK,
                   kcr_watch_new(&(struct kcr_watch_opts){.client = c,
                                                          .ref = &coll,
                                                          .on_event = stop_at_first,
                                                          .resource_version = "1",
                                                          .metadata_only = true},
                                 &w, NULL));
  kcr_watch_run(w, &ei);
  assert_string_equal(KCR_ACCEPT_METADATA, accepted(&a, a.watch));
  kcr_watch_free(w);
  kcr_errinfo_cleanup(&ei);

  forget(&a, a.list);
  forget(&a, a.watch);
  assert_int_equal(KCR_OK,
                   kcr_informer_new(
                       &(struct kcr_informer_opts){
                           .client = c, .gvr = &cms, .ns = "ns", .metadata_only = true},
                       &inf, NULL));
  assert_int_equal(KCR_OK, kcr_informer_start(inf));
  assert_true(kcr_informer_wait_synced(inf, 10000));
  for(int i = 0; i < 200 && !*accepted(&a, a.watch); i++)
    usleep(10000);
  assert_string_equal(KCR_ACCEPT_METADATA_LIST, accepted(&a, a.list));
  assert_string_equal(KCR_ACCEPT_METADATA, accepted(&a, a.watch));
  kcr_informer_free(inf);

  struct kcr_http_response resp = {.body = KCR_BUF_INIT};
  assert_int_equal(KCR_EINVAL,
                   kcr_client_do(c,
                                 &(struct kcr_http_request){.method = "GET",
                                                            .path = "/api",
                                                            .accept = "a\r\nX-Evil: 1"},
                                 &resp, &ei));
  assert_non_null(strstr(ei.message, "Accept"));
  assert_int_equal(KCR_EINVAL, kcr_client_do(c,
                                             &(struct kcr_http_request){
                                                 .method = "POST",
                                                 .path = "/api",
                                                 .body = "{}",
                                                 .body_len = 2,
                                                 .content_type = "application/json\n"},
                                             &resp, &ei));
  assert_non_null(strstr(ei.message, "Content-Type"));
  kcr_buf_cleanup(&resp.body);
  kcr_errinfo_cleanup(&ei);
  kcr_client_free(c);
}

static void invalid_arguments_are_einval_with_a_message(void **state)
{
  struct last l = {0};
  kcr_client *c = twire_client(record_last, &l);
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  struct kcr_ref one = {&cms, "ns", "a"}, coll = {&cms, "ns"};
  struct kcr_http_response resp = {0, KCR_BUF_INIT};
  cJSON *obj = cJSON_CreateObject(), *out = (cJSON *)1;
  kcr_client *nc = (kcr_client *)1;
  kcr_watch *w = (kcr_watch *)1;

  assert_int_equal(KCR_EINVAL, kcr_client_new(&(struct kcr_client_opts){0}, &nc, &ei));
  assert_null(nc);
  assert_int_equal(KCR_EINVAL, kcr_client_new(NULL, &nc, &ei));
  assert_int_equal(KCR_EINVAL, kcr_apply(c, &one, obj, NULL, &out, &ei));
  assert_null(out);
  assert_non_null(strstr(ei.message, "fieldManager"));
  assert_int_equal(KCR_EINVAL,
                   kcr_apply(c, &one, NULL,
                             &(struct kcr_apply_opts){.field_manager = "m"}, NULL, &ei));
  assert_int_equal(KCR_EINVAL,
                   kcr_apply(c, &coll, obj,
                             &(struct kcr_apply_opts){.field_manager = "m"}, NULL, &ei));
  assert_non_null(strstr(ei.message, "names no object"));
  assert_int_equal(KCR_EINVAL, kcr_update(c, &coll, obj, NULL, NULL, &ei));
  assert_int_equal(KCR_EINVAL, kcr_create(c, &one, obj, NULL, NULL, &ei));
  assert_int_equal(KCR_EINVAL, kcr_create(c, &coll, NULL, NULL, NULL, &ei));
  assert_int_equal(KCR_EINVAL,
                   kcr_get(c, &(struct kcr_ref){&cms, "ns", "a/b"}, NULL, &ei));
  assert_non_null(strstr(ei.message, "invalid ref"));
  /* out is optional also when the call fails (it was dereferenced). */
  assert_int_equal(KCR_EINVAL, kcr_list(c, &one, NULL, NULL, &ei));
  assert_int_equal(KCR_EINVAL, kcr_list_each(c, &coll, NULL, NULL, NULL, NULL, &ei));
  assert_int_equal(
      KCR_EINVAL,
      kcr_delete(c, &one, &(struct kcr_delete_opts){.propagation = 9}, NULL, &ei));
  assert_int_equal(
      KCR_EINVAL,
      kcr_client_do(c, &(struct kcr_http_request){.method = "GET"}, &resp, &ei));
  assert_int_equal(KCR_EINVAL, kcr_watch_new(&(struct kcr_watch_opts){.client = c,
                                                                      .ref = &one,
                                                                      .on_event = ignore},
                                             &w, &ei));
  assert_null(w);
  assert_int_equal(
      KCR_EINVAL,
      kcr_watch_new(&(struct kcr_watch_opts){.client = c,
                                             .ref = &(struct kcr_ref){&cms, "NS"},
                                             .on_event = ignore},
                    &w, &ei));
  assert_int_equal(
      KCR_EINVAL,
      kcr_watch_new(&(struct kcr_watch_opts){.client = c, .ref = &coll}, &w, &ei));
  assert_int_equal(0, l.n); /* nothing was sent */
  kcr_buf_cleanup(&resp.body);
  cJSON_Delete(obj);
  kcr_errinfo_cleanup(&ei);
  kcr_client_free(c);
}

/* gracePeriodSeconds mirrors the API's *int64: absent unless given, and 0
 * (delete at once) is a value like any other. */
static void delete_sends_grace_period_only_when_given(void **state)
{
  struct last l = {0};
  kcr_client *c = twire_client(record_last, &l);
  struct kcr_ref one = {&cms, "ns", "a"};

  assert_int_equal(KCR_OK, kcr_delete(c, &one,
                                      &(struct kcr_delete_opts){
                                          .propagation = KCR_PROPAGATE_BACKGROUND},
                                      NULL, NULL));
  assert_null(strstr(l.body, "gracePeriodSeconds"));
  assert_non_null(strstr(l.body, "\"propagationPolicy\":\"Background\""));
  assert_int_equal(
      KCR_OK, kcr_delete(c, &one,
                         &(struct kcr_delete_opts){.grace_period_seconds = &(int64_t){0}},
                         NULL, NULL));
  assert_non_null(strstr(l.body, "\"gracePeriodSeconds\":0"));
  assert_int_equal(KCR_OK,
                   kcr_delete(c, &one,
                              &(struct kcr_delete_opts){.grace_period_seconds =
                                                            &(int64_t){1000000000000000}},
                              NULL, NULL));
  assert_non_null(strstr(l.body, "\"gracePeriodSeconds\":1000000000000000"));
  assert_int_equal(KCR_OK, kcr_delete(c, &one, NULL, NULL, NULL));
  assert_string_equal("", l.body);
  kcr_client_free(c);
}

/* kcr_apply's options: field manager, force and dry run in the query. */
static void apply_options_reach_the_query(void **state)
{
  struct last l = {0};
  kcr_client *c = twire_client(record_last, &l);
  cJSON *obj = cJSON_CreateObject();

  assert_int_equal(KCR_OK,
                   kcr_apply(c, &(struct kcr_ref){&cms, "ns", "a"}, obj,
                             &(struct kcr_apply_opts){.field_manager = "m"}, NULL, NULL));
  assert_string_equal("/api/v1/namespaces/ns/configmaps/a?fieldManager=m", l.path);
  assert_int_equal(KCR_OK,
                   kcr_apply(c, &(struct kcr_ref){&cms, "ns", "a"}, obj,
                             &(struct kcr_apply_opts){
                                 .field_manager = "m", .force = true, .dry_run = true},
                             NULL, NULL));
  assert_string_equal(
      "/api/v1/namespaces/ns/configmaps/a?fieldManager=m&force=true&dryRun=All", l.path);
  cJSON_Delete(obj);
  kcr_client_free(c);
}

/* kcr_apply_rv: the answer's metadata.resourceVersion, found in its text. */
static const char *rv_answer;

static kcr_err answer_rv(struct twire_call *call, void *ud)
{
  (*(int *)ud)++;
  if(!strcmp(rv_answer, "409"))
    return twire_reply(call, 409,
                       "{\"kind\":\"Status\",\"status\":\"Failure\",\"reason\":"
                       "\"Conflict\",\"code\":409,\"message\":\"taken\"}");
  return twire_reply(call, 200, rv_answer);
}

static void apply_rv_finds_the_resource_version_in_the_answer(void **state)
{
  int sent = 0;
  kcr_client *c = twire_client(answer_rv, &sent);
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  struct kcr_ref one = {&cms, "ns", "a"};
  struct kcr_apply_opts ao = {.field_manager = "m", .force = true};
  cJSON *obj = cJSON_CreateObject();
  char *rv = (char *)1;

  rv_answer = "{\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"a\",\"labels\":{\"r\""
              ":\"}\"},\"resourceVersion\":\"1234\",\"managedFields\":[{\"manager\":"
              "\"m\"}]},\"data\":{\"k\":\"v\"}}";
  assert_int_equal(KCR_OK, kcr_apply_rv(c, &one, obj, &ao, &rv, &ei));
  assert_string_equal("1234", rv);
  free(rv);
  /* none: KCR_OK (the apply was made), no rv */
  rv_answer = "{\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"a\"}}";
  assert_int_equal(KCR_OK, kcr_apply_rv(c, &one, obj, &ao, &rv, &ei));
  assert_null(rv);
  /* an answer that breaks off: KCR_EPARSE, as kcr_apply's parse */
  rv_answer = "{\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"a\",\"resourceVers";
  assert_int_equal(KCR_EPARSE, kcr_apply_rv(c, &one, obj, &ao, &rv, &ei));
  assert_null(rv);
  assert_non_null(strstr(ei.message, "metadata.resourceVersion"));
  /* the server's refusal: its code and Status, no rv */
  rv_answer = "409";
  assert_int_equal(KCR_ECONFLICT, kcr_apply_rv(c, &one, obj, &ao, &rv, &ei));
  assert_null(rv);
  assert_string_equal("taken", ei.message);
  /* invalid arguments: nothing sent */
  assert_int_equal(4, sent);
  assert_int_equal(KCR_EINVAL, kcr_apply_rv(c, &one, obj, &ao, NULL, &ei));
  assert_int_equal(KCR_EINVAL, kcr_apply_rv(c, &one, obj, NULL, &rv, &ei));
  assert_null(rv);
  assert_int_equal(4, sent);
  cJSON_Delete(obj);
  kcr_errinfo_cleanup(&ei);
  kcr_client_free(c);
}

/* ---- proxies ---- */

/* Whether a client for server (with the cluster's proxy_url unless NULL),
 * made while the proxy variables hold vals (by tenv_proxy_vars' index, NULL:
 * unset), writes and watches on connections of its own - i.e. reaches its
 * server without a proxy. The environment is restored after. */
static bool own_path(const char *server, const char *proxy_url,
                     const char *const vals[TENV_NPROXY])
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  char yaml[512], *saved[TENV_NPROXY];
  kcr_config *cfg = NULL;
  kcr_client *c = NULL;
  bool own;

  snprintf(yaml, sizeof(yaml),
           "current-context: x\ncontexts: [{name: x, context: {cluster: c}}]\n"
           "clusters: [{name: c, cluster: {server: '%s'%s%s%s}}]\n",
           server, proxy_url ? ", proxy-url: '" : "", proxy_url ? proxy_url : "",
           proxy_url ? "'" : "");
  assert_int_equal(KCR_OK, kcr_config_from_yaml(yaml, strlen(yaml), NULL, &cfg, &ei));
  tenv_proxy_set(saved, vals);
  assert_int_equal(KCR_OK,
                   kcr_client_new(&(struct kcr_client_opts){.config = cfg}, &c, &ei));
  tenv_proxy_restore(saved);
  own = kcr__own_streams(c, "/api/v1/namespaces/ns/configmaps");
  kcr_client_free(c);
  kcr_config_free(cfg);
  kcr_errinfo_cleanup(&ei);
  return own;
}

#define VALS(...)       ((const char *const[TENV_NPROXY]){__VA_ARGS__})
#define HTTPS_PROXY_(v) [0] = (v)
#define ALL_PROXY_(v)   [4] = (v), [5] = (v)
#define NO_PROXY_(v)    [7] = (v)

/* Defect d7: with e7442a7 any https_proxy or all_proxy turned the client's
 * own connections off, whatever NO_PROXY said, for a loopback server too,
 * and the kubeconfig's proxy-url was never read. Now the connections stay
 * the client's exactly when client-go would reach the server without a
 * proxy (the rules themselves: test_proxy). */
static void own_connections_stay_unless_the_server_is_proxied(void **state)
{
  static const char api[] = "https://api.example.com:6443";
  static const char p[] = "http://proxy.invalid:3128";

  /* no proxy at all */
  assert_true(own_path(api, NULL, VALS(NULL)));
  /* NO_PROXY names the server */
  assert_true(own_path(api, NULL, VALS(HTTPS_PROXY_(p), NO_PROXY_(".example.com"))));
  assert_true(
      own_path(api, NULL, VALS(HTTPS_PROXY_(p), NO_PROXY_("api.example.com:6443"))));
  assert_true(own_path("https://10.0.0.1:6443", NULL,
                       VALS(HTTPS_PROXY_(p), NO_PROXY_("10.0.0.0/8"))));
  /* a loopback server is never proxied from the environment */
  assert_true(own_path("https://127.0.0.1:6443", NULL, VALS(HTTPS_PROXY_(p))));
  assert_true(own_path("https://localhost:6443", NULL, VALS(HTTPS_PROXY_(p))));
  assert_true(own_path("https://[::1]:6443", NULL, VALS(HTTPS_PROXY_(p))));
  /* ALL_PROXY is not read; http_proxy is not for an https server */
  assert_true(own_path(api, NULL, VALS(ALL_PROXY_(p))));
  assert_true(own_path(api, NULL, VALS([2] = p, [3] = p)));
  /* a proxied server: curl does it all */
  assert_false(own_path(api, NULL, VALS(HTTPS_PROXY_(p))));
  assert_false(own_path(api, NULL, VALS([1] = p, NO_PROXY_("other.example.com"))));
  /* the kubeconfig's proxy-url: every request, loopback and NO_PROXY or not */
  assert_false(own_path(api, p, VALS(NULL)));
  assert_false(own_path("https://127.0.0.1:6443", p, VALS(NO_PROXY_("*"))));
  (void)state;
}

#undef VALS
#undef HTTPS_PROXY_
#undef ALL_PROXY_
#undef NO_PROXY_

/* The switch (client.c DESIGN, "The switch"): KCR_TRANSPORT_CURL turns the
 * own exchanges off; KCR_TRANSPORT in the environment decides over the
 * option, both ways; any other value of it is refused naming it. */
static bool own_with(enum kcr_transport t, const char *env, kcr_err *rc,
                     struct kcr_errinfo *ei)
{
  static const char yaml[] =
      "current-context: x\ncontexts: [{name: x, context: {cluster: c}}]\n"
      "clusters: [{name: c, cluster: {server: 'https://127.0.0.1:6443'}}]\n";
  kcr_config *cfg = NULL;
  kcr_client *c = NULL;
  bool own = false;

  assert_int_equal(KCR_OK, kcr_config_from_yaml(yaml, strlen(yaml), NULL, &cfg, ei));
  if(env)
    setenv("KCR_TRANSPORT", env, 1);
  else
    unsetenv("KCR_TRANSPORT");
  *rc = kcr_client_new(&(struct kcr_client_opts){.config = cfg, .transport = t}, &c, ei);
  unsetenv("KCR_TRANSPORT");
  if(c)
    own = kcr__own_streams(c, "/api/v1/namespaces/ns/configmaps");
  kcr_client_free(c);
  kcr_config_free(cfg);
  return own;
}

static void the_transport_switch_forces_curl(void **state)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  kcr_err rc;

  assert_true(own_with(KCR_TRANSPORT_AUTO, NULL, &rc, &ei));
  assert_false(own_with(KCR_TRANSPORT_CURL, NULL, &rc, &ei));
  assert_int_equal(KCR_OK, rc);
  assert_false(own_with(KCR_TRANSPORT_AUTO, "curl", &rc, &ei));
  assert_true(own_with(KCR_TRANSPORT_CURL, "auto", &rc, &ei));
  assert_true(own_with(KCR_TRANSPORT_AUTO, "", &rc, &ei)); /* empty: unset */
  assert_false(own_with(KCR_TRANSPORT_AUTO, "CURL", &rc, &ei));
  assert_int_equal(KCR_ECONFIG, rc);
  assert_non_null(strstr(ei.message, "KCR_TRANSPORT"));
  assert_non_null(strstr(ei.message, "\"CURL\""));
  assert_false(own_with((enum kcr_transport)7, NULL, &rc, &ei));
  assert_int_equal(KCR_EINVAL, rc);
  kcr_errinfo_cleanup(&ei);
  (void)state;
}

/* The exchanges of our own run only on the libcurl they were tested with:
 * 7.88.x with OpenSSL (client.c, DESIGN: The switch). */
static void the_own_exchanges_need_a_tested_libcurl(void **state)
{
  curl_version_info_data v = {.version_num = 0x075801, .ssl_version = "OpenSSL/3.0.15"};
  assert_true(kcr__own_curl_tested(&v));
  v.version_num = 0x075800;
  assert_true(kcr__own_curl_tested(&v));
  v.version_num = 0x075700; /* 7.87 */
  assert_false(kcr__own_curl_tested(&v));
  v.version_num = 0x080500; /* 8.5 */
  assert_false(kcr__own_curl_tested(&v));
  v.version_num = 0x075801;
  v.ssl_version = "GnuTLS/3.7.9";
  assert_false(kcr__own_curl_tested(&v));
  v.ssl_version = NULL;
  assert_false(kcr__own_curl_tested(&v));
  assert_false(kcr__own_curl_tested(NULL));
  (void)state;
}

int main(void)
{
  tfail_init();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(list_each_never_returns_a_truncated_list),
      cmocka_unit_test(list_each_text_never_returns_a_truncated_list),
      cmocka_unit_test(items_nested_deeper_than_the_walk_still_list),
      cmocka_unit_test(listed_texts_are_compact_whatever_the_page),
      cmocka_unit_test(oversized_answers_are_refused_with_a_clear_error),
      cmocka_unit_test(many_retries_and_huge_retry_after_stay_bounded),
      cmocka_unit_test(a_429_carries_retry_after_and_a_request_may_forgo_retries),
      cmocka_unit_test(a_success_after_a_retry_leaves_ei_alone),
      cmocka_unit_test(a_401_is_retried_only_with_credentials_that_can_change),
      cmocka_unit_test(the_write_gate_stops_mutating_requests_only),
      cmocka_unit_test(scoped_handles_carry_their_scope_to_the_gate),
      cmocka_unit_test(a_failed_event_is_not_skipped),
      cmocka_unit_test(an_oversized_watch_event_is_refused),
      cmocka_unit_test(a_malformed_watch_line_is_logged_without_its_content),
      cmocka_unit_test(watch_timeouts_are_ms_rounded_up_to_seconds),
      cmocka_unit_test(a_watch_keeps_its_client),
      cmocka_unit_test(metadata_only_reads_ask_for_partial_object_metadata),
      cmocka_unit_test(invalid_arguments_are_einval_with_a_message),
      cmocka_unit_test(delete_sends_grace_period_only_when_given),
      cmocka_unit_test(apply_options_reach_the_query),
      cmocka_unit_test(apply_rv_finds_the_resource_version_in_the_answer),
      cmocka_unit_test(own_connections_stay_unless_the_server_is_proxied),
      cmocka_unit_test(the_transport_switch_forces_curl),
      cmocka_unit_test(the_own_exchanges_need_a_tested_libcurl),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
