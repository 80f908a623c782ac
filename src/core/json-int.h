/* Private to libkcr (and the tests): reading a few values out of JSON text
 * without building a tree. */
#ifndef KCR_JSON_INT_H
#define KCR_JSON_INT_H

#include <stddef.h>

/* One value wanted by kcr__json_spans. */
struct kcr__json_want {
  const char *path; /* member names separated by dots: "metadata.uid" */
  const char *at;   /* out: the value's text (a string with its quotes), */
  size_t n;         /* and its length; NULL and 0 when not found */
};
#define KCR__JSON_WANT_MAX 16

/* Finds, in one pass over the JSON object text[0..len), the value at each
 * w[i].path (as kcr_json_at: the first member of a name counts; a path
 * through anything but objects finds nothing; a member name written with
 * escapes matches only the same escaped text), and returns how many were
 * found. The whole object must be well-formed JSON (the allocation-free
 * validator of kcr_json_parse; text after it is not looked at): otherwise
 * nothing is found. Wants past the first KCR__JSON_WANT_MAX, and empty or
 * NULL paths, find nothing. Pure. */
size_t kcr__json_spans(const char *text, size_t len, struct kcr__json_want *w, size_t nw);

#endif
