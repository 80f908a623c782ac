/* DESIGN: the event recorder's request bodies (events.c has the map of
 * the recorder's files): the text of an Event, and of a merge patch of
 * its series.
 *
 * JSON text written directly, member by member, as kcr_json_to_text would
 * print the tree (the same members in the same order): no tree to build
 * and free for each Event. Names are constants with nothing to escape;
 * values go through kcr__json_put_string. */
#include <stdio.h>

#include "core/json-int.h"
#include "kcr/buf.h"
#include "kcr/events.h"
#include "kcr/time.h"
#include "runtime/recorder-int.h"

#define COMBINED "(combined from similar events): " /* client-go's */

/* Appends "name":"v", after a comma unless it is the object's first. */
static void put_str(struct kcr_buf *b, bool *more, const char *name, const char *v)
{
  kcr_buf_puts(b, *more ? ",\"" : "\"");
  *more = true;
  kcr_buf_puts(b, name);
  kcr_buf_puts(b, "\":");
  kcr__json_put_string(b, v);
}

/* put_str, only when v is not empty. */
static void put_opt(struct kcr_buf *b, bool *more, const char *name, const char *v)
{
  if(*v)
    put_str(b, more, name, v);
}

/* The note as sent: a combined Event's says so, cut to the limit. False
 * when it cannot be written (nothing appended). */
static bool put_note(struct kcr_buf *b, bool *more, const struct entry *e)
{
  char buf[sizeof(COMBINED) + KCR_EVENT_NOTE_MAX];
  int n;

  if(!e->combined) {
    put_opt(b, more, "note", e->note);
    return true;
  }
  n = snprintf(buf, sizeof(buf), "%s%s", COMBINED, e->note);
  if(n < 0)
    return false;
  if((size_t)n >= sizeof(buf))
    n = (int)sizeof(buf) - 1;
  buf[kcr_event_note_cut(buf, (size_t)n, KCR_EVENT_NOTE_MAX)] = '\0';
  put_str(b, more, "note", buf);
  return true;
}

/* Appends "series":{"count":N,"lastObservedTime":"..."}. */
static void put_series(struct kcr_buf *b, bool *more, const struct entry *e)
{
  char t[KCR_RFC3339_MICRO_LEN];
  bool in = false;

  kcr_time_format_micro(&e->last_observed, t);
  kcr_buf_printf(b, "%s\"series\":{\"count\":%llu", *more ? "," : "",
                 (unsigned long long)e->count);
  *more = true;
  in = true;
  put_str(b, &in, "lastObservedTime", t);
  kcr_buf_puts(b, "}");
}

/* The text of the whole Event, with its series when it has repeats
 * already; NULL when out of memory. */
char *kcr__events_event_body(const kcr_recorder *r, const struct entry *e)
{
  struct kcr_buf b = KCR_BUF_INIT;
  bool more = false, in = false, ok;

  kcr_buf_reserve(&b, 512); /* an Event at once, not step by step */
  kcr_buf_puts(&b, "{");
  put_str(&b, &more, "apiVersion", "events.k8s.io/v1");
  put_str(&b, &more, "kind", "Event");
  kcr_buf_puts(&b, ",\"metadata\":{");
  put_str(&b, &in, "name", e->name);
  put_str(&b, &in, "namespace", e->ns);
  kcr_buf_puts(&b, "}");
  put_str(&b, &more, "eventTime", e->event_time);
  put_str(&b, &more, "reportingController", r->controller);
  put_str(&b, &more, "reportingInstance", r->instance);
  put_str(&b, &more, "action", e->action);
  put_str(&b, &more, "reason", e->reason);
  ok = put_note(&b, &more, e);
  put_str(&b, &more, "type", e->type);
  kcr_buf_puts(&b, ",\"regarding\":{");
  in = false;
  put_opt(&b, &in, "apiVersion", e->r_api);
  put_str(&b, &in, "kind", e->r_kind);
  put_opt(&b, &in, "namespace", e->r_ns);
  put_str(&b, &in, "name", e->r_name);
  put_opt(&b, &in, "uid", e->r_uid);
  put_opt(&b, &in, "resourceVersion", e->r_rv);
  kcr_buf_puts(&b, "}");
  if(e->count >= 2)
    put_series(&b, &more, e);
  kcr_buf_puts(&b, "}");
  if(!ok || kcr_buf_err(&b)) {
    kcr_buf_cleanup(&b);
    return NULL;
  }
  return kcr_buf_take(&b);
}

/* The text of a merge patch of the series; NULL when out of memory. */
char *kcr__events_series_body(const struct entry *e)
{
  struct kcr_buf b = KCR_BUF_INIT;
  bool more = false;

  kcr_buf_puts(&b, "{");
  put_series(&b, &more, e);
  kcr_buf_puts(&b, "}");
  if(kcr_buf_err(&b)) {
    kcr_buf_cleanup(&b);
    return NULL;
  }
  return kcr_buf_take(&b);
}
