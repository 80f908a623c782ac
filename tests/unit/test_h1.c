/* kcr__h1: HTTP/1.1 answers read as they arrive. Every answer is read the
 * same whole and cut at every byte (the body, the code, where it ends);
 * each framing (Content-Length, chunked with extensions and trailers, until
 * close, none for 1xx/204/304); interim answers skipped; the fields it acts
 * on; and every kind of answer it refuses, with its reason. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kcr/buf.h"
#include "kube/h1-int.h"

static bool collect(const char *p, size_t n, void *ud)
{
  return kcr_buf_append(ud, p, n) == KCR_OK;
}

struct read {
  enum kcr__h1_result r;
  size_t used; /* bytes of the text the answer took */
  struct kcr__h1 h;
  struct kcr_buf body;
};

/* Reads text in pieces of at most step bytes (0: whole), then, if the
 * answer is not over, the connection's end when eof. */
static void read_in(const char *text, size_t len, size_t step, bool eof, struct read *rd)
{
  size_t at = 0;

  kcr__h1_init(&rd->h);
  rd->body = (struct kcr_buf)KCR_BUF_INIT;
  rd->r = KCR__H1_MORE;
  while(at < len && rd->r == KCR__H1_MORE) {
    size_t n = step && len - at > step ? step : len - at, used = 0;
    rd->r = kcr__h1_feed(&rd->h, text + at, n, &used, collect, &rd->body);
    assert_true(used <= n);
    if(rd->r == KCR__H1_MORE)
      assert_int_equal(n, used);
    at += used;
    if(rd->r != KCR__H1_MORE)
      break;
  }
  rd->used = at;
  if(rd->r == KCR__H1_MORE && eof)
    rd->r = kcr__h1_eof(&rd->h);
}

/* text read whole and in every cut gives r, code, body and used. */
static void same_every_way(const char *text, bool eof, enum kcr__h1_result r, long code,
                           const char *body, size_t used)
{
  size_t len = strlen(text);
  for(size_t step = 0; step <= len; step++) {
    struct read rd;
    read_in(text, len, step, eof, &rd);
    print_message("step %zu\n", step);
    assert_int_equal(r, rd.r);
    if(r != KCR__H1_BAD) {
      assert_int_equal(code, rd.h.code);
      assert_string_equal(body, kcr_buf_str(&rd.body));
      assert_int_equal(used, rd.used);
    }
    kcr_buf_cleanup(&rd.body);
  }
}

#define DONE KCR__H1_DONE
#define BAD  KCR__H1_BAD
#define MORE KCR__H1_MORE

static void each_framing_reads_the_same_in_any_cut(void **state)
{
  static const char len[] = "HTTP/1.1 201 Created\r\nContent-Type: application/json\r\n"
                            "Content-Length: 7\r\n\r\n{\"a\":1}";
  static const char chunked[] =
      "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
      "3;x=y\r\n{\"a\r\nA \r\n\":1234567}\r\n0\r\nX-T: 1\r\n\r\n";
  static const char eof_body[] = "HTTP/1.1 200 OK\r\n\r\n{\"until\":\"close\"}";
  static const char lf_only[] = "HTTP/1.1 200 OK\nContent-Length: 2\n\nok";
  static const char no_body[] = "HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\n";

  same_every_way(len, false, DONE, 201, "{\"a\":1}", sizeof(len) - 1);
  same_every_way(chunked, false, DONE, 200, "{\"a\":1234567}", sizeof(chunked) - 1);
  same_every_way(eof_body, true, DONE, 200, "{\"until\":\"close\"}",
                 sizeof(eof_body) - 1);
  same_every_way(eof_body, false, MORE, 200, "{\"until\":\"close\"}",
                 sizeof(eof_body) - 1);
  same_every_way(lf_only, false, DONE, 200, "ok", sizeof(lf_only) - 1);
  same_every_way(no_body, false, DONE, 204, "", sizeof(no_body) - 1);
  same_every_way("HTTP/1.1 304 Not Modified\r\n\r\n", false, DONE, 304, "", 29);
  same_every_way("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", false, DONE, 200, "",
                 38);
}

/* What follows an answer is not its own: used stops at its end. */
static void an_answer_ends_where_its_framing_says(void **state)
{
  static const char two[] = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP/1.1 500";
  static const char chunk[] = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                              "2\r\nok\r\n0\r\n\r\nextra";

  same_every_way(two, false, DONE, 200, "ok", sizeof(two) - 1 - 12);
  same_every_way(chunk, false, DONE, 200, "ok", sizeof(chunk) - 1 - 5);
}

/* 100 Continue and 103 are skipped; their fields say nothing. */
static void interim_answers_are_skipped(void **state)
{
  static const char t[] = "HTTP/1.1 100 Continue\r\nRetry-After: 9\r\n\r\n"
                          "\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n"
                          "HTTP/1.1 429 Too Many Requests\r\nContent-Length: 1\r\n\r\nx";
  struct read rd;

  same_every_way(t, false, DONE, 429, "x", sizeof(t) - 1);
  read_in(t, sizeof(t) - 1, 0, false, &rd);
  assert_int_equal(-1, rd.h.retry_after_s);
  kcr_buf_cleanup(&rd.body);
}

/* Retry-After in seconds (a date: none), Connection: close, HTTP/1.0, and
 * chunked over Content-Length (then the connection is not kept). */
static void the_fields_it_acts_on(void **state)
{
  static const struct {
    const char *text;
    long retry_after;
    bool close;
  } cases[] = {
      {"HTTP/1.1 429 X\r\nretry-after:  7 \r\nContent-Length: 0\r\n\r\n", 7, false},
      {"HTTP/1.1 503 X\r\nRetry-After: Fri, 31 Dec 1999 23:59:59 GMT\r\n"
       "Content-Length: 0\r\n\r\n",
       -1, false},
      {"HTTP/1.1 200 X\r\nConnection: keep-alive, Close\r\nContent-Length: 0\r\n\r\n", -1,
       true},
      {"HTTP/1.0 200 X\r\nContent-Length: 0\r\n\r\n", -1, true},
      {"HTTP/1.1 200 X\r\nContent-Length: 3\r\nTransfer-Encoding: "
       "chunked\r\n\r\n0\r\n\r\n",
       -1, true},
      {"HTTP/1.1 429 X\r\nRetry-After: 999999999999999\r\nContent-Length: 0\r\n\r\n",
       INT32_MAX, false},
      {"HTTP/1.1 200 X\r\nContent-Length: 0\r\nContent-Length: 0\r\n"
       "Content-Encoding: identity\r\n\r\n",
       -1, false},
  };
  for(size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    struct read rd;
    print_message("%zu\n", i);
    read_in(cases[i].text, strlen(cases[i].text), 0, false, &rd);
    assert_int_equal(DONE, rd.r);
    assert_int_equal(cases[i].retry_after, rd.h.retry_after_s);
    assert_int_equal(cases[i].close, rd.h.close);
    kcr_buf_cleanup(&rd.body);
  }
}

/* A head of 16-byte lines up to about at, then one line to the end of
 * buf (n bytes with its NUL). */
static void long_lines(char *buf, size_t n, size_t at)
{
  size_t i = 16;
  memcpy(buf, "HTTP/1.1 200 O\r\n", 16);
  for(; i + 16 <= at; i += 16)
    memcpy(buf + i, "X: 0123456789a\r\n", 16);
  memcpy(buf + i, "Y: ", 3);
  memset(buf + i + 3, 'y', n - 1 - i - 3);
  buf[n - 1] = '\0';
}

/* Every answer it cannot read is refused, saying why, in any cut. */
static void what_it_refuses_and_why(void **state)
{
  static char long_line[KCR__H1_LINE_MAX + 64], long_head[KCR__H1_HEAD_MAX + 4096];
  /* a long line after a long head: the limit its bytes cross first */
  static char line_first[60000], head_first[KCR__H1_HEAD_MAX + 4096];
  static char interims[17 * 25 + 64];
  static const struct {
    const char *text, *why;
    bool eof;
  } cases[] = {
      {"HTTP/2 200 OK\r\n\r\n", "a malformed status line"},
      {"HTTP/1.1 20 OK\r\n\r\n", "a malformed status line"},
      {"HTTP/1.1 099 OK\r\n\r\n", "a malformed status line"},
      {"HTTP/1.1 200OK\r\n\r\n", "a malformed status line"},
      {"HTTP/1.1 101 Switching Protocols\r\n\r\n",
       "a switch of protocols nobody asked for (101)"},
      {"HTTP/1.1 200 OK\r\nX: a\r\n b\r\n\r\n", "a header field folded over lines"},
      {"HTTP/1.1 200 OK\r\nno colon\r\n\r\n", "a malformed header field"},
      {"HTTP/1.1 200 OK\r\nContent-Length : 1\r\n\r\nx", "a malformed header field"},
      {"HTTP/1.1 200 OK\r\nContent-Length: 1x\r\n\r\nx", "a malformed Content-Length"},
      {"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", "a malformed Content-Length"},
      {"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nxx",
       "Content-Length values that disagree"},
      {"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
       "a transfer coding other than chunked"},
      {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: "
       "chunked\r\n\r\n",
       "a transfer coding other than chunked"},
      {"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\n\r\n",
       "a content coding the client did not ask for"},
      {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
       "a malformed chunk size"},
      {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2 x\r\n",
       "a malformed chunk size"},
      {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n\r\n",
       "a malformed chunk size"},
      {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nxy\r\n",
       "a chunk longer than its size"},
      {"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nab",
       "the connection closed before the answer ended", true},
      {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n",
       "the connection closed before the answer ended", true},
      {"", "the connection closed before the answer ended", true},
      {"HTTP/1.1 200 OK\r\nX: a\rb\r\n\r\n", "a bare CR in a line"},
      {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r2\r\n",
       "a bare CR in a line"},
      {long_line, "a line longer than 8 KiB"},
      {long_head, "a head longer than 64 KiB"},
      {interims, "more interim answers than 16"},
      {line_first, "a line longer than 8 KiB"},
      {head_first, "a head longer than 64 KiB"},
  };

  memset(long_line, 'x', sizeof(long_line) - 1);
  memcpy(long_line, "HTTP/1.1 200 OK\r\nX: ", 20);
  for(size_t i = 0; i + 16 < sizeof(long_head); i += 16)
    memcpy(long_head + i, "X: 0123456789a\r\n", 16);
  memcpy(long_head, "HTTP/1.1 200 O\r\n", 16); /* one line of the 16 */
  for(int i = 0; i <= KCR__H1_INTERIM_MAX; i++)
    strcat(interims, "HTTP/1.1 100 Continue\r\n\r\n");
  strcat(interims, "HTTP/1.1 200 OK\r\n\r\n");
  long_lines(line_first, sizeof(line_first), 50000); /* line ends at 58,192 */
  long_lines(head_first, sizeof(head_first), 60000); /* head ends at 65,536 */
  for(size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    size_t len = strlen(cases[i].text);
    print_message("%zu: %.60s\n", i, cases[i].text);
    for(size_t step = 0; step <= len; step += len > 200 ? 997 : 1) {
      struct read rd;
      read_in(cases[i].text, len, step, cases[i].eof, &rd);
      assert_int_equal(BAD, rd.r);
      assert_string_equal(cases[i].why, rd.h.why);
      /* and it stays so */
      size_t used = 1;
      assert_int_equal(BAD, kcr__h1_feed(&rd.h, "x", 1, &used, collect, &rd.body));
      assert_int_equal(0, used);
      assert_int_equal(BAD, kcr__h1_eof(&rd.h));
      kcr_buf_cleanup(&rd.body);
    }
  }
}

static bool refuse(const char *p, size_t n, void *ud)
{
  (*(size_t *)ud) += n;
  return false;
}

/* A body callback that says stop stops the reading where it was. */
static void the_body_callback_can_stop_it(void **state)
{
  static const char t[] = "HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nabcdMORE";
  struct kcr__h1 h;
  size_t seen = 0, used = 0;

  kcr__h1_init(&h);
  assert_int_equal(KCR__H1_STOPPED,
                   kcr__h1_feed(&h, t, sizeof(t) - 1, &used, refuse, &seen));
  assert_int_equal(4, seen);
  assert_int_equal(sizeof(t) - 1 - 4, used);
  assert_int_equal(KCR__H1_STOPPED, kcr__h1_eof(&h));
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(each_framing_reads_the_same_in_any_cut),
      cmocka_unit_test(an_answer_ends_where_its_framing_says),
      cmocka_unit_test(interim_answers_are_skipped),
      cmocka_unit_test(the_fields_it_acts_on),
      cmocka_unit_test(what_it_refuses_and_why),
      cmocka_unit_test(the_body_callback_can_stop_it),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
