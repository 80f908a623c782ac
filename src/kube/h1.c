/* An HTTP/1.1 answer read as it arrives (h1-int.h). RFC 9112: the status
 * line (2.1, 4), field lines (5; obsolete folding refused, 5.2), message
 * body length (6.3: no body for 1xx, 204 and 304; Transfer-Encoding chunked
 * over Content-Length; otherwise until the connection closes) and chunked
 * coding (7.1: chunk extensions and trailer fields are read and dropped).
 * Lines end in CRLF; a bare LF is taken too (9112 2.2 allows it). */
#include <stdint.h>
#include <string.h>
#include <strings.h>

#include "h1-int.h"

enum {
  ST_STATUS,
  ST_HEADER,
  ST_BODY,       /* Content-Length bytes left */
  ST_EOFBODY,    /* until the connection closes */
  ST_CHUNK_SIZE, /* the chunk-size line */
  ST_CHUNK_DATA, /* left bytes of a chunk */
  ST_CHUNK_END,  /* the CRLF after a chunk's data */
  ST_TRAILER,
  ST_DONE,
  ST_BAD,
  ST_STOPPED,
};

void kcr__h1_init(struct kcr__h1 *h)
{
  h->code = 0;
  h->retry_after_s = -1;
  h->close = false;
  h->why = NULL;
  h->st = ST_STATUS;
  h->chunked = h->has_len = false;
  h->len = h->left = 0;
  h->head = h->n = 0;
  h->interim = 0;
}

static enum kcr__h1_result bad(struct kcr__h1 *h, const char *why)
{
  h->why = why;
  h->st = ST_BAD;
  return KCR__H1_BAD;
}

static enum kcr__h1_result done(struct kcr__h1 *h)
{
  h->st = ST_DONE;
  return KCR__H1_DONE;
}

static bool is_ows(char c) { return c == ' ' || c == '\t'; }

/* p[0..n) equals the lower-case lit, ignoring case. */
static bool ieq(const char *p, size_t n, const char *lit)
{
  return strlen(lit) == n && !strncasecmp(p, lit, n);
}

/* p[0..n) trimmed of optional white space. */
static void trim(const char **p, size_t *n)
{
  while(*n && is_ows(**p))
    (*p)++, (*n)--;
  while(*n && is_ows((*p)[*n - 1]))
    (*n)--;
}

/* Decimal (base 10, at most maxd digits) or hexadecimal (base 16) digits,
 * all of p[0..n), at least one. */
static bool number(const char *p, size_t n, int base, size_t maxd, uint64_t *v)
{
  *v = 0;
  if(!n || n > maxd)
    return false;
  for(size_t i = 0; i < n; i++) {
    char c = p[i];
    unsigned d;
    if(c >= '0' && c <= '9')
      d = (unsigned)(c - '0');
    else if(base == 16 && c >= 'a' && c <= 'f')
      d = (unsigned)(c - 'a' + 10);
    else if(base == 16 && c >= 'A' && c <= 'F')
      d = (unsigned)(c - 'A' + 10);
    else
      return false;
    *v = *v * (unsigned)base + d;
  }
  return true;
}

/* Whether a comma-separated list holds the token tok. */
static bool has_token(const char *p, size_t n, const char *tok)
{
  while(n) {
    const char *comma = memchr(p, ',', n);
    size_t k = comma ? (size_t)(comma - p) : n;
    const char *t = p;
    size_t tn = k;
    trim(&t, &tn);
    if(ieq(t, tn, tok))
      return true;
    p += k + (comma != NULL);
    n -= k + (comma != NULL);
  }
  return false;
}

static enum kcr__h1_result status_line(struct kcr__h1 *h, const char *l, size_t n)
{
  uint64_t code;

  if(!n) /* an empty line before the answer is let pass (9112 2.2) */
    return KCR__H1_MORE;
  if(n < 12 || memcmp(l, "HTTP/1.", 7) || l[7] < '0' || l[7] > '9' || l[8] != ' ' ||
     !number(l + 9, 3, 10, 3, &code) || (n > 12 && l[12] != ' ') || code < 100)
    return bad(h, "a malformed status line");
  if(code == 101)
    return bad(h, "a switch of protocols nobody asked for (101)");
  h->code = (long)code;
  h->close = l[7] == '0'; /* HTTP/1.0: no persistent connection */
  h->st = ST_HEADER;
  return KCR__H1_MORE;
}

/* The end of the head: where the body ends. */
static enum kcr__h1_result head_end(struct kcr__h1 *h)
{
  if(h->code < 200) { /* interim: the answer follows */
    unsigned interim = h->interim + 1;
    if(interim > KCR__H1_INTERIM_MAX)
      return bad(h, "more interim answers than 16");
    kcr__h1_init(h);
    h->interim = interim;
    return KCR__H1_MORE;
  }
  if(h->code == 204 || h->code == 304)
    return done(h);
  if(h->chunked) {
    if(h->has_len) /* 9112 6.3: chunked wins; the connection is not trusted on */
      h->close = true;
    h->head = 0;
    h->st = ST_CHUNK_SIZE;
    return KCR__H1_MORE;
  }
  if(h->has_len) {
    h->left = h->len;
    h->st = ST_BODY;
    return h->len ? KCR__H1_MORE : done(h);
  }
  h->close = true;
  h->st = ST_EOFBODY;
  return KCR__H1_MORE;
}

static enum kcr__h1_result field(struct kcr__h1 *h, const char *l, size_t n)
{
  const char *colon, *v;
  size_t nl, vn;
  uint64_t x;

  if(!n)
    return head_end(h);
  if(is_ows(l[0]))
    return bad(h, "a header field folded over lines");
  colon = memchr(l, ':', n);
  if(!colon || colon == l || is_ows(colon[-1]))
    return bad(h, "a malformed header field");
  if(h->code < 200) /* an interim answer's fields say nothing about the answer */
    return KCR__H1_MORE;
  nl = (size_t)(colon - l);
  v = colon + 1;
  vn = n - nl - 1;
  trim(&v, &vn);
  if(ieq(l, nl, "content-length")) {
    if(!number(v, vn, 10, 18, &x))
      return bad(h, "a malformed Content-Length");
    if(h->has_len && x != h->len)
      return bad(h, "Content-Length values that disagree");
    h->has_len = true;
    h->len = x;
  } else if(ieq(l, nl, "transfer-encoding")) {
    if(h->chunked || !ieq(v, vn, "chunked"))
      return bad(h, "a transfer coding other than chunked");
    h->chunked = true;
  } else if(ieq(l, nl, "connection")) {
    if(has_token(v, vn, "close"))
      h->close = true;
  } else if(ieq(l, nl, "retry-after")) {
    h->retry_after_s = !number(v, vn, 10, 15, &x) ? -1
                       : x > INT32_MAX            ? INT32_MAX
                                                  : (long)x;
  } else if(ieq(l, nl, "content-encoding")) {
    if(vn && !ieq(v, vn, "identity"))
      return bad(h, "a content coding the client did not ask for");
  }
  return KCR__H1_MORE;
}

static enum kcr__h1_result chunk_size(struct kcr__h1 *h, const char *l, size_t n)
{
  size_t k = 0;
  uint64_t size;

  while(k < n && l[k] != ';' && !is_ows(l[k]))
    k++;
  if(!number(l, k, 16, 15, &size))
    return bad(h, "a malformed chunk size");
  while(k < n && is_ows(l[k]))
    k++;
  if(k < n && l[k] != ';') /* what follows the size: only extensions */
    return bad(h, "a malformed chunk size");
  h->left = size;
  h->st = size ? ST_CHUNK_DATA : ST_TRAILER;
  return KCR__H1_MORE;
}

/* A whole line (without its end) in the current state. */
static enum kcr__h1_result line(struct kcr__h1 *h, const char *l, size_t n)
{
  switch(h->st) {
  case ST_STATUS: return status_line(h, l, n);
  case ST_HEADER: return field(h, l, n);
  case ST_CHUNK_SIZE: return chunk_size(h, l, n);
  case ST_CHUNK_END:
    if(n)
      return bad(h, "a chunk longer than its size");
    h->st = ST_CHUNK_SIZE;
    return KCR__H1_MORE;
  default: /* ST_TRAILER: its fields are dropped */ return n ? KCR__H1_MORE : done(h);
  }
}

static enum kcr__h1_result result_of(const struct kcr__h1 *h)
{
  return h->st == ST_DONE  ? KCR__H1_DONE
         : h->st == ST_BAD ? KCR__H1_BAD
                           : KCR__H1_STOPPED;
}

enum kcr__h1_result kcr__h1_feed(struct kcr__h1 *h, const char *p, size_t n, size_t *used,
                                 kcr__h1_body_fn fn, void *ud)
{
  enum kcr__h1_result r = KCR__H1_MORE;
  size_t i = 0;

  if(h->st >= ST_DONE) {
    *used = 0;
    return result_of(h);
  }
  while(i < n && r == KCR__H1_MORE) {
    if(h->st == ST_BODY || h->st == ST_CHUNK_DATA || h->st == ST_EOFBODY) {
      size_t k = n - i;
      if(h->st != ST_EOFBODY && k > h->left)
        k = (size_t)h->left;
      if(!fn(p + i, k, ud)) {
        h->st = ST_STOPPED;
        r = KCR__H1_STOPPED;
      }
      i += k;
      if(h->st == ST_EOFBODY || r != KCR__H1_MORE)
        continue;
      if(!(h->left -= k))
        r = h->st == ST_BODY ? done(h) : (h->st = ST_CHUNK_END, KCR__H1_MORE);
      continue;
    }
    /* A line: whole in p when it can be, else gathered in h->line. */
    const char *nl = memchr(p + i, '\n', n - i);
    size_t k = (size_t)((nl ? nl + 1 : p + n) - (p + i));
    const char *l = p + i;
    size_t ln;
    /* The limits, in the order the bytes cross them (the same however the
     * text is cut). */
    size_t line_room = KCR__H1_LINE_MAX - h->n, head_room = SIZE_MAX;
    if(h->st == ST_STATUS || h->st == ST_HEADER || h->st == ST_TRAILER)
      head_room = KCR__H1_HEAD_MAX - h->head;
    if(k > line_room || k > head_room)
      return *used = i, bad(h, head_room <= line_room ? "a head longer than 64 KiB"
                                                      : "a line longer than 8 KiB");
    if(head_room != SIZE_MAX)
      h->head += k;
    i += k;
    if(!nl || h->n) {
      memcpy(h->line + h->n, l, k);
      h->n += k;
      if(!nl)
        continue;
      l = h->line;
      k = h->n;
    }
    h->n = 0;
    ln = k - 1; /* without the LF, and a CR before it */
    if(ln && l[ln - 1] == '\r')
      ln--;
    if(memchr(l, '\r', ln)) /* 9112 2.2 */
      r = bad(h, "a bare CR in a line");
    else
      r = line(h, l, ln);
  }
  *used = i;
  return r;
}

enum kcr__h1_result kcr__h1_eof(struct kcr__h1 *h)
{
  if(h->st == ST_EOFBODY)
    return done(h);
  if(h->st >= ST_DONE)
    return result_of(h);
  return bad(h, "the connection closed before the answer ended");
}
