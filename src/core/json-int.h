/* core/json-int.h - JSON text for libkcr's own hot paths: leaving a member
 * out before parsing (watch events, List pages), printing into a buffer of the
 * caller's (the store), reading a few values out of text without building
 * a tree (the status writer); not installed. */
#ifndef KCR_CORE_JSON_INT_H
#define KCR_CORE_JSON_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "kcr/buf.h"
#include "kcr/err.h"

/* JSON Pointers (RFC 6901; pointer.c's DESIGN): the one path syntax. */

/* NULL when ptr is a valid pointer ("" or "/token"..., every '~' followed
 * by '0' or '1'), else a static phrase saying what is wrong ("does not
 * start with '/' ..."), for a message that also names the path. Pure. */
const char *kcr__ptr_bad(const char *ptr);
/* The length of the token that starts at tok (just after its '/'): the
 * bytes up to the next '/' or the end. Pure. */
size_t kcr__ptr_toklen(const char *tok);
/* True when token tok[0..tn) of a valid pointer (escaped: "~0", "~1")
 * names name[0..n) (bytes, unescaped). Pure. */
bool kcr__ptr_tok_eq(const char *tok, size_t tn, const char *name, size_t n);
/* Writes token tok[0..tn) of a valid pointer, unescaped, to out (room for
 * tn bytes; no NUL added) and returns its length (<= tn). Pure. */
size_t kcr__ptr_tok_decode(const char *tok, size_t tn, char *out);
/* True, with *idx, when token tok[0..tn) is an array index as RFC 6901
 * writes one ("0", or digits not starting with '0'; at most 18). Pure. */
bool kcr__ptr_tok_index(const char *tok, size_t tn, size_t *idx);

/* True when v is a JSON string that holds \u0000, which kcr_json_parse keeps
 * as a Raw node of its literal (quotes included) since a C string cannot
 * hold it: for a reader to say why it refuses the value. Pure. */
bool kcr__json_nul_string(const cJSON *v);

/* Writes to out (emptied first) the JSON text text[0..len) without the
 * members named `name` of the objects at `path`, a valid JSON Pointer of
 * member names from the top-level object ("/object/metadata": a watch
 * event's object); there a token "*" stands for each element of an array,
 * the rest of the path applying to each (each item of a List: tokens
 * "items", "*", "metadata"), and a value of another kind than its token
 * needs is passed over. Meant for a member that is a
 * large share of the text and of no use to the caller, to spare parsing it
 * (an object's managedFields).
 * The text is followed by its structure only (strings, brackets, the names,
 * colons and commas of the objects on the path), not checked token by
 * token: for a well-formed text, parsing out gives the tree parsing text
 * gives minus those members; for a malformed one, parsing out fails too,
 * unless all that was wrong lay inside a dropped member. Names are
 * compared with the path's tokens byte for byte as written (a name spelled with escapes
 * is not matched); in each object on the path the first member of that name is followed,
 * and a later member of that name is kept as written (the tree, where the last member of
 * a name counts, keeps that one whole: its members of `name` are not left out, a saving
 * missed, nothing wrong); an element or value that is not of the kind the path needs is
 * kept as it is. Bytes after the value the path leads to (after its array's end, with
 * "[]") are copied unread.
 * Returns KCR_OK when it left something out; KCR_ENOTFOUND, with out empty,
 * when there was nothing to leave out or the structure could not be
 * followed to the end of what the path leads to (then parse text itself:
 * cJSON says what is wrong); KCR_ENOMEM (out holds part of the text). */
kcr_err kcr__json_drop_members(const char *text, size_t len, const char *path,
                               const char *name, struct kcr_buf *out);

/* Parses text[0..len) into *out as kcr_json_parse does; with scratch (a
 * buffer of the caller's, which it may reuse between calls) the members
 * kcr__json_drop_members(path, name) finds are left out first, so the tree
 * has none of them. Errors: those of kcr_json_parse, and KCR_ENOMEM. */
kcr_err kcr__json_parse_dropping(const char *text, size_t len, const char *path,
                                 const char *name, struct kcr_buf *scratch, cJSON **out,
                                 struct kcr_errinfo *ei);

/* The value at path (a JSON Pointer of member names: "/metadata/uid") of
 * the JSON object text[0..len), found by following the text's structure
 * only (as kcr__json_drop_members reads it: strings, brackets, and the
 * names and colons of the members on the path; the last member of a name
 * counts, as in the tree kcr_json_parse makes) and stopping at the value:
 * *at and *n get its text (a string with its quotes). Nothing else is read
 * or checked, so it costs a few instructions per byte up to the end of the
 * object holding the value. Returns KCR_OK; KCR_ENOTFOUND when there is no
 * such member (or something on the path is not an object); KCR_EPARSE when
 * the structure breaks before the objects on the path end.
 * Pure. */
kcr_err kcr__json_find(const char *text, size_t len, const char *path, const char **at,
                       size_t *n);

/* Appends the compact text of obj to out: the text cJSON_PrintUnformatted
 * makes, faster (kcr_json_to_text is this into a new buffer). Returns
 * KCR_OK; KCR_EINVAL for what cJSON cannot print either (no obj, a Raw
 * node without text, a node of no type), out then holding part of the
 * text; KCR_ENOMEM (out's error). */
kcr_err kcr__json_print(const cJSON *obj, struct kcr_buf *out);

/* Appends s (NULL: "") to out as a JSON string, quoted and escaped as
 * kcr__json_print writes strings: for a text built without a tree. Running
 * out of memory shows in kcr_buf_err(out). */
void kcr__json_put_string(struct kcr_buf *out, const char *s);

/* kcr__json_put_string of the n bytes at s (which may hold NUL bytes:
 * written \u0000). */
void kcr__json_put_strn(struct kcr_buf *out, const char *s, size_t n);

/* Appends d as kcr__json_print writes a number (NaN and the infinities as
 * null: callers that must refuse them check first). */
void kcr__json_put_number(struct kcr_buf *out, double d);

/* Checks that text[0..len) begins (after white space) with one well-formed
 * value as kcr_json_parse's validator accepts it; *at and *n get its text
 * (n 0 when not well formed). Pure. */
bool kcr__json_check_value(const char *text, size_t len, const char **at, size_t *n);

/* Appends v in decimal, as Go writes an int64 (and printf's %lld): for a
 * text built without a tree. Running out of memory shows in
 * kcr_buf_err(out). */
void kcr__json_put_int(struct kcr_buf *out, int64_t v);

/* One value wanted by kcr__json_spans. */
struct kcr__json_want {
  const char *path; /* a JSON Pointer of member names: "/metadata/uid" */
  const char *at;   /* out: the value's text (a string with its quotes), */
  size_t n;         /* and its length; NULL and 0 when not found */
};
#define KCR__JSON_WANT_MAX 16

/* Finds, in one pass over the JSON object text[0..len), the value at each
 * w[i].path (as kcr_json_at on the tree kcr_json_parse makes: the last
 * member of a name counts; a path through anything but objects finds
 * nothing; a member name written with escapes matches only the same escaped
 * text; one holding \u0000 fails the check), and returns how many were
 * found. The whole object must be well-formed JSON (the allocation-free
 * validator of kcr_json_parse; text after it is not looked at): otherwise
 * nothing is found. Wants past the first KCR__JSON_WANT_MAX, and paths that
 * are NULL, "" or not pointers, find nothing. Pure. */
size_t kcr__json_spans(const char *text, size_t len, struct kcr__json_want *w, size_t nw);

/* kcr__json_spans where the spans are what the tree reads: nothing is
 * found (0) also when a member name written with an escape lies in an
 * object on a want's path: the tree compares names unescaped and might take
 * that member for the wanted one. Pure. */
size_t kcr__json_spans_exact(const char *text, size_t len, struct kcr__json_want *w,
                             size_t nw);
/* kcr__json_spans_exact by the structure only, as kcr__json_spans_trusted
 * follows it: for text known to be well formed (a cached object's), where
 * it finds what kcr__json_spans_exact does. Pure. */
size_t kcr__json_spans_trusted_exact(const char *text, size_t len,
                                     struct kcr__json_want *w, size_t nw);

/* kcr__json_spans, telling also where the object ends and how it is
 * written: *objlen (when not NULL) gets the length of the object's text
 * (from text's first byte to its closing brace), *compact (when not NULL)
 * whether there is no white space around its tokens (none before it
 * either), both 0/false when it is not well formed. With objlen, no wants
 * are needed (nw 0: just the check). Pure. */
size_t kcr__json_scan(const char *text, size_t len, struct kcr__json_want *w, size_t nw,
                      size_t *objlen, bool *compact);

/* How deep a walk by the structure follows (kcr__json_spans_trusted,
 * kcr__json_iter, kcr__json_drop_members): nesting deeper inside the value
 * it steps over makes it give up. */
#define KCR__JSON_SKIP_DEPTH 128

/* The end of the one value at p (white space before it skipped) in text
 * that kcr_json_check accepted, by its structure alone; NULL when it does
 * not end before end or nests deeper than KCR__JSON_SKIP_DEPTH. */
const char *kcr__json_skip(const char *p, const char *end);

/* kcr__json_scan, telling also (*deep, when not NULL) whether the text
 * nests deeper than KCR__JSON_SKIP_DEPTH levels anywhere - where a walk by
 * the structure may give up. Pure. */
size_t kcr__json_scan_deep(const char *text, size_t len, struct kcr__json_want *w,
                           size_t nw, size_t *objlen, bool *compact, bool *deep);

/* kcr__json_spans by the structure only (as kcr__json_find follows it), at
 * a fraction of a check's cost (the whole object is read all the same: a
 * later member of a name replaces an earlier): on well-formed text the
 * validator's spans (made for text kcr__json_scan accepted, or cut from
 * text that it did).
 * Any bytes may be given: text that is not well formed gives spans that
 * may be wrong, never a read outside it (a caller keeping what it finds
 * checks it: the status writer's answers). 0 when the structure cannot be
 * followed (nesting deeper than 128 inside a value is not). Pure. */
size_t kcr__json_spans_trusted(const char *text, size_t len, struct kcr__json_want *w,
                               size_t nw);

/* Walks the members of an object's text, or the elements of an array's,
 * by the structure only (as kcr__json_drop_members reads it): meant for
 * text a validator has accepted (kcr__json_scan), whose parts it hands out
 * without copying. Every member is handed out, duplicates included: a
 * reader that looks a name up must take the last of that name (as the tree
 * from kcr_json_parse does), or leave text with duplicates to the tree. */
struct kcr__json_iter {
  const char *p, *end;
  char close; /* '}' or ']'; 0: not started or finished */
  bool first;
  /* Optional, set after init: values whose extent a validator found in this
   * same text (kcr__json_scan's spans). A value that starts at one's `at`
   * is stepped over to at + n without being read - a big one (an object's
   * managedFields) costs nothing to pass. A span that is not the value's
   * whole text makes the walk go wrong, never read outside the text. */
  const struct kcr__json_want *known;
  size_t nknown;
};

/* Starts it at the object or array whose text begins at text[0] ('{' or
 * '[') and lies within text[0..len), with no known values. False (and every next -1) when
 * text[0] is neither. Pure. */
bool kcr__json_iter_init(struct kcr__json_iter *it, const char *text, size_t len);
/* The next member: *key and *klen the bytes of its name between the quotes
 * (escapes as written; NULL and 0 for an array's element), *at and *n the
 * text of its value. Returns 1; 0 after the last (then -1 for any further
 * call); -1 when the structure breaks (or nests deeper than 128 levels
 * inside a value). Pure. */
int kcr__json_iter_next(struct kcr__json_iter *it, const char **key, size_t *klen,
                        const char **at, size_t *n);

#endif
