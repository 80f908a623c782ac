/* Private to src/kube (and the tests): an HTTP/1.1 answer read as it
 * arrives, for the client's own exchanges (transport_own.c, DESIGN).
 *
 * It reads the status line, the header fields it acts on and the body in
 * whichever framing the server chose (Content-Length, chunked, or until the
 * connection closes), handing the body's bytes to a callback as they come.
 * Interim answers (1xx but 101) are skipped. What it refuses, with a reason
 * in why: a malformed status line, header field or chunk; a line longer
 * than KCR__H1_LINE_MAX or a head (or trailer) longer than KCR__H1_HEAD_MAX;
 * 101; more than KCR__H1_INTERIM_MAX interim answers; a transfer coding
 * other than chunked; a content coding other than identity (the client
 * never asks for one); Content-Length values that disagree; a field folded
 * over lines (obsolete, RFC 9112 5.2); a CR not followed by LF in the head
 * or a chunk line (9112 2.2). Retry-After beyond INT32_MAX seconds is
 * taken as INT32_MAX.
 *
 * Pure: no I/O, no allocation. One reader per answer; not thread-safe. */
#ifndef KCR_H1_INT_H
#define KCR_H1_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "limits-int.h"

enum kcr__h1_result {
  KCR__H1_MORE,    /* all of it taken; the answer goes on */
  KCR__H1_DONE,    /* the answer ended (*used: where) */
  KCR__H1_BAD,     /* not an answer it can read (why says what) */
  KCR__H1_STOPPED, /* the body callback returned false */
};

/* Body bytes, in order; false stops the reading (KCR__H1_STOPPED). */
typedef bool (*kcr__h1_body_fn)(const char *p, size_t n, void *ud);

struct kcr__h1 {
  /* What the answer says, once its head is read (code != 0). */
  long code;
  long retry_after_s; /* Retry-After in seconds; -1 when absent or a date */
  bool close;         /* the server closes the connection after it */
  const char *why;    /* KCR__H1_BAD: what was wrong (static text) */
  /* The reader's state. */
  int st;
  bool chunked, has_len;
  uint64_t len, left;
  size_t head, n;   /* bytes of the current head; of line */
  unsigned interim; /* interim answers read */
  char line[KCR__H1_LINE_MAX];
};

/* Starts reading an answer (to a request other than HEAD). */
void kcr__h1_init(struct kcr__h1 *h);

/* Reads the next n bytes of the connection. *used gets how many belong to
 * the answer (all of them but after KCR__H1_DONE; what follows an answer
 * is the server's next message, or garbage; after KCR__H1_BAD it says
 * nothing: the connection is done with). After DONE, BAD or STOPPED it
 * reads nothing more (returns the same again). */
enum kcr__h1_result kcr__h1_feed(struct kcr__h1 *h, const char *p, size_t n, size_t *used,
                                 kcr__h1_body_fn fn, void *ud);

/* The connection ended: KCR__H1_DONE if the answer's body runs until the
 * connection closes, else KCR__H1_BAD ("the connection closed before the
 * answer ended"; DONE, BAD and STOPPED stay as they are). */
enum kcr__h1_result kcr__h1_eof(struct kcr__h1 *h);

#endif
