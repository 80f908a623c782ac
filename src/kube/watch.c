/* DESIGN: watch streams.
 *
 * Framing: the curl write callback feeds bytes into a framer that keeps an
 * incomplete line in a buffer and hands out each complete line; chunk
 * boundaries never matter (tests feed byte by byte and random chunks).
 *
 * Transfer: over https without a proxy, a GET on one of the client's own
 * connections (kcr__own_stream, transport_own.c), whose wait for the next bytes
 * also ends when kcr_watch_cancel() writes the watch's eventfd (never
 * drained: a canceled watch stays canceled); while the connection is
 * being made, curl's progress callback looks at it about once a second.
 * Otherwise (http, a proxy) one pooled easy handle driven by a private
 * multi handle, so kcr_watch_cancel() can interrupt curl_multi_poll() from
 * another thread with curl_multi_wakeup() instead of waiting for the next
 * byte.
 *
 * Termination (see watch.h): server end -> OK; ERROR event -> the code its
 * Status maps to (410/Expired/Gone -> EGONE); plain non-200 answer -> the
 * mapped code; callback error -> that code; malformed document -> EPARSE;
 * stream cut mid-document -> ETRANSPORT; an event larger than the client's
 * max_response_bytes -> ETOOLARGE. The handle of a stream that did not end
 * cleanly is not pooled again.
 *
 * Delivery: rv moves past an event only after its callback returned OK, so
 * an event whose callback failed is delivered again by the next watch from
 * kcr_watch_rv() (at least once, in order).
 *
 * Nothing from the stream's content is logged: a malformed line is reported
 * by its length and the parser's position, since objects may carry secrets. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "client-int.h"
#include "core/json-int.h"
#include "kcr/json.h"
#include "kcr/log.h"
#include "kcr/time.h"
#include "limits-int.h"
#include "watch-int.h"

/* ---- framing and decoding (pure) ---- */

kcr_err kcr__framer_feed(struct kcr__framer *f, const char *data, size_t len,
                         kcr__line_fn fn, void *ud)
{
  size_t max = f->max_line ? f->max_line : (size_t)64 << 20;

  while(len) {
    const char *nl = memchr(data, '\n', len);
    size_t n = nl ? (size_t)(nl - data) : len;
    kcr_err rc;

    if(f->pending.len + n > max)
      return KCR_ETOOLARGE;
    if(!nl)
      return kcr_buf_append(&f->pending, data, n);
    if(f->pending.len) {
      rc = kcr_buf_append(&f->pending, data, n);
      if(!rc)
        rc = fn(f->pending.ptr, f->pending.len, ud);
      kcr_buf_reset(&f->pending);
    } else {
      rc = fn(data, n, ud);
    }
    if(rc)
      return rc;
    data += n + 1;
    len -= n + 1;
  }
  return KCR_OK;
}

size_t kcr__framer_pending(const struct kcr__framer *f) { return f->pending.len; }

void kcr__framer_cleanup(struct kcr__framer *f) { kcr_buf_cleanup(&f->pending); }

static const char *const type_names[] = {"ADDED", "MODIFIED", "DELETED", "BOOKMARK",
                                         "ERROR"};

const char *kcr_watch_type_name(enum kcr_watch_type t)
{
  return (unsigned)t <= KCR_WATCH_ERROR ? type_names[t] : "UNKNOWN";
}

/* Whether a BOOKMARK's object has the annotation "k8s.io/initial-events-end":
 * "true" (metav1.InitialEventsAnnotationKey). A bookmark is rare and small:
 * its text is parsed to read it exactly (out of memory: false, and the
 * streaming list falls back as for a server that sends no end). */
static bool initial_events_end(const struct kcr_watch_event *ev)
{
  static const char *const path = "/metadata/annotations/k8s.io~1initial-events-end";
  cJSON *t = NULL;
  const char *v;
  bool end;
  if(ev->object)
    return (v = kcr_json_str(ev->object, path)) && !strcmp(v, "true");
  if(kcr_json_parse(ev->object_text, ev->object_len, &t, NULL))
    return false;
  end = (v = kcr_json_str(t, path)) && !strcmp(v, "true");
  cJSON_Delete(t);
  return end;
}

kcr_err kcr__watch_decode(const char *line, size_t len, struct kcr_buf *scratch,
                          struct kcr_watch_event *ev, struct kcr_errinfo *ei)
{
  cJSON *doc = NULL, *obj;
  const char *type;
  kcr_err rc;
  size_t i;

  memset(ev, 0, sizeof(*ev));
  rc = kcr__json_parse_dropping(line, len, "/object/metadata", "managedFields", scratch,
                                &doc, ei);
  if(rc)
    return rc;
  type = kcr_json_str(doc, "/type");
  obj = cJSON_DetachItemFromObjectCaseSensitive(doc, "object");
  if(!type || !cJSON_IsObject(obj)) {
    rc = kcr_errinfo_set(ei, KCR_EPARSE, "watch event without %s",
                         !type ? "a string \"type\"" : "an \"object\"");
    goto out;
  }
  for(i = 0; i < sizeof(type_names) / sizeof(type_names[0]); i++)
    if(!strcmp(type, type_names[i]))
      break;
  if(i == sizeof(type_names) / sizeof(type_names[0])) {
    rc = kcr_errinfo_set(ei, KCR_EUNSUPPORTED, "unknown watch event type \"%s\"", type);
    goto out;
  }
  ev->type = (enum kcr_watch_type)i;
  ev->object = obj;
  ev->resource_version = kcr_json_str(obj, "/metadata/resourceVersion");
  ev->initial_events_end = ev->type == KCR_WATCH_BOOKMARK && initial_events_end(ev);
  obj = NULL;
out:
  cJSON_Delete(obj);
  cJSON_Delete(doc);
  return rc;
}

kcr_err kcr__watch_decode_text(const char *line, size_t len, struct kcr_buf *rvbuf,
                               struct kcr_watch_event *ev)
{
  struct kcr__json_want w[5] = {{.path = "/type"},
                                {.path = "/object"},
                                {.path = "/object/metadata/resourceVersion"},
                                {.path = "/object/metadata"},
                                {.path = "/object/metadata/managedFields"}};
  const char *t;
  size_t objlen, tn, i;
  bool compact, deep;

  memset(ev, 0, sizeof(*ev));
  kcr__json_scan_deep(line, len, w, 5, &objlen, &compact, &deep);
  if(!objlen || !compact || !w[0].at || *w[0].at != '"' || !w[1].at || *w[1].at != '{')
    return KCR_ENOTFOUND;
  t = w[0].at + 1;
  tn = w[0].n - 2;
  for(i = 0; i < KCR_WATCH_ERROR; i++)
    if(strlen(type_names[i]) == tn && !memcmp(type_names[i], t, tn))
      break;
  if(i == KCR_WATCH_ERROR) /* ERROR, unknown, or escaped */
    return KCR_ENOTFOUND;
  if(w[2].at && *w[2].at == '"') {
    if(memchr(w[2].at, '\\', w[2].n))
      return KCR_ENOTFOUND;
    kcr_buf_reset(rvbuf);
    if(kcr_buf_append(rvbuf, w[2].at + 1, w[2].n - 2))
      return KCR_ENOMEM;
    ev->resource_version = kcr_buf_str(rvbuf);
  }
  ev->type = (enum kcr_watch_type)i;
  ev->object_text = w[1].at;
  ev->object_len = w[1].n;
  if(!deep) { /* (deeper, a walk without them may give up: none, as there) */
    ev->metadata_text = w[3].at;
    ev->metadata_len = w[3].n;
    ev->managed_fields_text = w[4].at;
    ev->managed_fields_len = w[4].n;
  }
  ev->initial_events_end = ev->type == KCR_WATCH_BOOKMARK && initial_events_end(ev);
  return KCR_OK;
}

/* ---- the watch ---- */

struct kcr_watch {
  kcr_client *c;
  struct kcr_gvr gvr;
  struct kcr_ref ref;
  char *group, *version, *resource, *ns, *label_selector, *field_selector,
      *shard_selector;
  uint64_t timeout_s; /* 0: the server's default */
  uint64_t batch_ms;
  bool allow_bookmarks, drop_managed_fields, object_text, send_initial_events;
  const char *accept; /* NULL: JSON; KCR_ACCEPT_METADATA (metadata_only) */
  kcr_watch_fn fn;
  void *ud;
  char *rv;
  CURLM *multi;
  int wake_fd; /* an eventfd kcr_watch_cancel makes readable, for good */
  atomic_bool canceled;
  /* per run */
  struct kcr__framer fr;
  struct kcr_buf errbody;
  struct kcr_buf scratch; /* a document without managedFields */
  struct kcr_buf rvbuf;   /* object_text: the event's resourceVersion */
  struct kcr_errinfo *ei;
  kcr_err stop_rc;
  long code;
  bool warned_unknown;
  CURL *h;
};

static char *dup_or_null(const char *s) { return s ? strdup(s) : NULL; }

kcr_err kcr_watch_new(const struct kcr_watch_opts *o, kcr_watch **out,
                      struct kcr_errinfo *ei)
{
  struct kcr_buf path = KCR_BUF_INIT;
  kcr_watch *w;
  kcr_err rc;

  *out = NULL;
  if(!o || !o->client || !o->ref || !o->ref->gvr || !o->on_event)
    return kcr_errinfo_set(ei, KCR_EINVAL,
                           "kcr_watch_new: client, ref (with a gvr) and on_event are "
                           "required");
  if(o->ref->name)
    return kcr_errinfo_set(ei, KCR_EINVAL,
                           "kcr_watch_new: the ref names an object; watches go to the "
                           "collection (select one object with a field selector)");
  if(o->send_initial_events && !o->allow_bookmarks)
    return kcr_errinfo_set(
        ei, KCR_EINVAL,
        "kcr_watch_new: send_initial_events needs allow_bookmarks (the "
        "end of the initial events is a bookmark)");
  w = calloc(1, sizeof(*w));
  if(!w)
    return KCR_ENOMEM;
  w->wake_fd = -1;
  w->c = kcr_client_ref(kcr__client_root(o->client)); /* watches are reads */
  w->fn = o->on_event;
  w->ud = o->ud;
  w->group = dup_or_null(o->ref->gvr->group ? o->ref->gvr->group : "");
  w->version = dup_or_null(o->ref->gvr->version);
  w->resource = dup_or_null(o->ref->gvr->resource);
  w->ns = dup_or_null(o->ref->ns);
  w->label_selector = dup_or_null(o->label_selector);
  w->field_selector = dup_or_null(o->field_selector);
  w->shard_selector = dup_or_null(o->shard_selector);
  w->rv = dup_or_null(o->resource_version);
  /* Rounded up, so the stream never ends before the time asked for; 0 and
   * KCR_FOREVER send none (the server's default); capped where the server's
   * seconds-to-nanoseconds conversion would overflow. */
  if(o->timeout_ms != KCR_FOREVER)
    w->timeout_s = o->timeout_ms / 1000 + (o->timeout_ms % 1000 != 0);
  if(w->timeout_s > INT32_MAX)
    w->timeout_s = INT32_MAX;
  w->allow_bookmarks = o->allow_bookmarks;
  w->send_initial_events = o->send_initial_events;
  w->drop_managed_fields = o->drop_managed_fields;
  w->accept = o->metadata_only ? KCR_ACCEPT_METADATA : NULL;
  w->object_text = o->object_text;
  w->batch_ms = o->batch_ms;
  w->gvr = (struct kcr_gvr){.group = w->group,
                            .version = w->version,
                            .resource = w->resource,
                            .namespaced = o->ref->gvr->namespaced};
  w->ref = (struct kcr_ref){.gvr = &w->gvr, .ns = w->ns};
  atomic_init(&w->canceled, false);
  w->multi = curl_multi_init();
  w->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if(!w->group || !w->version || !w->resource || !w->multi || w->wake_fd < 0 ||
     (o->ref->ns && !w->ns) || (o->label_selector && !w->label_selector) ||
     (o->field_selector && !w->field_selector) ||
     (o->shard_selector && !w->shard_selector) || (o->resource_version && !w->rv)) {
    kcr_watch_free(w);
    return KCR_ENOMEM;
  }
  /* Check the ref now, so that run fails only for what happens on the wire. */
  rc = kcr_path(&path, &w->ref);
  kcr_buf_cleanup(&path);
  if(rc) {
    kcr_watch_free(w);
    return rc == KCR_EINVAL
               ? kcr_errinfo_set(ei, rc,
                                 "kcr_watch_new: invalid ref (resource "
                                 "\"%s\", namespace \"%s\"): see kcr_path",
                                 o->ref->gvr->resource ? o->ref->gvr->resource : "",
                                 o->ref->ns ? o->ref->ns : "")
               : rc;
  }
  *out = w;
  return KCR_OK;
}

void kcr_watch_free(kcr_watch *w)
{
  if(!w)
    return;
  if(w->multi)
    curl_multi_cleanup(w->multi);
  if(w->wake_fd >= 0)
    close(w->wake_fd);
  free(w->group);
  free(w->version);
  free(w->resource);
  free(w->ns);
  free(w->label_selector);
  free(w->field_selector);
  free(w->shard_selector);
  free(w->rv);
  kcr__framer_cleanup(&w->fr);
  kcr_buf_cleanup(&w->errbody);
  kcr_buf_cleanup(&w->scratch);
  kcr_buf_cleanup(&w->rvbuf);
  kcr_client_free(w->c);
  free(w);
}

const char *kcr_watch_rv(const kcr_watch *w) { return w->rv; }

void kcr_watch_cancel(kcr_watch *w)
{
  uint64_t one = 1;
  atomic_store(&w->canceled, true);
  curl_multi_wakeup(w->multi);
  /* never drained: every later wait ends at once (cannot fail but for an
   * overflow no number of cancels reaches) */
  (void)!write(w->wake_fd, &one, sizeof(one));
}

/* Moves rv (a copy made before the callback ran) into w->rv; *rv becomes
 * NULL when taken. */
static void set_rv(kcr_watch *w, char **rv)
{
  if(!*rv || !**rv || (w->rv && !strcmp(w->rv, *rv)))
    return;
  free(w->rv);
  w->rv = *rv;
  *rv = NULL;
}

static kcr_err on_line(const char *line, size_t len, void *ud)
{
  kcr_watch *w = ud;
  struct kcr_watch_event ev;
  struct kcr_errinfo local = KCR_ERRINFO_INIT;
  char *rv;
  kcr_err rc;

  while(len && (line[len - 1] == '\r' || line[len - 1] == ' '))
    len--;
  if(!len)
    return KCR_OK;
  rc = w->object_text ? kcr__watch_decode_text(line, len, &w->rvbuf, &ev) : KCR_ENOTFOUND;
  if(rc == KCR_ENOMEM)
    kcr_errinfo_set(&local, rc, "out of memory reading a watch event");
  if(rc == KCR_ENOTFOUND)
    rc = kcr__watch_decode(line, len, w->drop_managed_fields ? &w->scratch : NULL, &ev,
                           &local);
  if(w->scratch.cap > KCR__WATCH_SCRATCH_KEEP) /* kept for the next event, unless large */
    kcr_buf_cleanup(&w->scratch);
  if(rc == KCR_EUNSUPPORTED) {
    if(!w->warned_unknown)
      KCR_LOG(KCR_LOG_WARN, "skipping watch event of unknown type",
              KCR_S("resource", w->resource), KCR_S("detail", local.message));
    w->warned_unknown = true;
    kcr_errinfo_cleanup(&local);
    return KCR_OK;
  }
  if(rc) {
    KCR_LOG(KCR_LOG_WARN, "malformed watch event; re-watch from last resourceVersion",
            KCR_S("resource", w->resource), KCR_S("detail", local.message),
            KCR_I("bytes", len), KCR_S("resourceVersion", w->rv));
    if(w->ei) {
      kcr_errinfo_cleanup(w->ei);
      *w->ei = local;
    } else {
      kcr_errinfo_cleanup(&local);
    }
    return rc;
  }
  if(ev.type == KCR_WATCH_ERROR) {
    rc = kcr_errinfo_from_status(&local, ev.object);
    if(rc == KCR_OK || rc == KCR_EHTTP)
      rc = rc == KCR_OK ? KCR_ESERVER : rc;
    KCR_LOG(rc == KCR_EGONE ? KCR_LOG_DEBUG : KCR_LOG_WARN, "watch ERROR event",
            KCR_S("resource", w->resource), KCR_I("code", local.code),
            KCR_S("reason", local.reason), KCR_S("message", local.message));
    if(w->ei) {
      kcr_errinfo_cleanup(w->ei);
      *w->ei = local;
    } else {
      kcr_errinfo_cleanup(&local);
    }
    cJSON_Delete(ev.object);
    return rc;
  }
  /* The callback may take the object (ev.object = NULL): keep the rv. */
  rv = ev.resource_version ? strdup(ev.resource_version) : NULL;
  if(ev.resource_version && !rv) {
    cJSON_Delete(ev.object);
    return KCR_ENOMEM; /* not delivered: the next watch starts before it */
  }
  rc = w->fn(&ev, w->ud);
  if(!rc)
    set_rv(w, &rv);
  free(rv);
  cJSON_Delete(ev.object);
  return rc;
}

/* Takes stream bytes (curl's write callback and the wire seam's). */
static bool feed(const char *p, size_t len, void *ud)
{
  kcr_watch *w = ud;
  kcr_err rc;

  if(!w->code && w->h)
    curl_easy_getinfo(w->h, CURLINFO_RESPONSE_CODE, &w->code);
  if(atomic_load(&w->canceled))
    return false;
  if(w->code != 200) { /* an error answer: keep its start for the message */
    size_t room =
        w->errbody.len < KCR__ERRBODY_MAX ? KCR__ERRBODY_MAX - w->errbody.len : 0;
    return kcr_buf_append(&w->errbody, p, len < room ? len : room) == KCR_OK;
  }
  rc = kcr__framer_feed(&w->fr, p, len, on_line, w);
  if(rc) {
    w->stop_rc = rc;
    return false; /* aborts the transfer */
  }
  return true;
}

static size_t on_data(char *p, size_t sz, size_t n, void *ud)
{
  return feed(p, sz * n, ud) ? sz * n : 0;
}

static kcr_err watch_path(const kcr_watch *w, struct kcr_buf *p)
{
  kcr_err rc = kcr_path(p, &w->ref);
  if(rc)
    return rc;
  kcr_query_add(p, "watch", "1");
  kcr_query_add(p, "resourceVersion", w->rv);
  if(w->allow_bookmarks)
    kcr_query_add(p, "allowWatchBookmarks", "true");
  if(w->send_initial_events) {
    kcr_query_add(p, "sendInitialEvents", "true");
    kcr_query_add(p, "resourceVersionMatch", "NotOlderThan");
  }
  if(w->timeout_s)
    kcr_query_add_int(p, "timeoutSeconds", (long long)w->timeout_s);
  kcr_query_add(p, "labelSelector", w->label_selector);
  kcr_query_add(p, "fieldSelector", w->field_selector);
  kcr_query_add(p, "shardSelector", w->shard_selector);
  return kcr_buf_err(p);
}

/* How long one wait for the stream may last. curl_multi_poll returns
 * earlier for data, for curl's own timers (the transfer timeout) and for
 * kcr_watch_cancel's curl_multi_wakeup, so an idle watch need not wake up
 * to look: this only bounds the wait should a wakeup ever be lost. */
#define IDLE_POLL_MS 60000

/* How long the whole stream may last, in ms (0: no limit): the server
 * ends it after timeoutSeconds, allowed a margin. */
static uint64_t stream_ms(const kcr_watch *w)
{
  return w->timeout_s && w->timeout_s < INT32_MAX / 1000 - 30 ? (w->timeout_s + 30) * 1000
                                                              : 0;
}

/* Drives the transfer until it ends or is canceled; returns curl's result. */
static CURLcode pump(kcr_watch *w, bool *canceled)
{
  CURLcode cc = CURLE_OK;
  int running = 1;
  CURLMsg *msg;
  int left;

  while(running) {
    if(atomic_load(&w->canceled)) {
      *canceled = true;
      return CURLE_ABORTED_BY_CALLBACK;
    }
    if(curl_multi_perform(w->multi, &running) != CURLM_OK)
      return CURLE_RECV_ERROR;
    if(running && curl_multi_poll(w->multi, NULL, 0, IDLE_POLL_MS, NULL) != CURLM_OK)
      return CURLE_RECV_ERROR;
  }
  while((msg = curl_multi_info_read(w->multi, &left)))
    if(msg->msg == CURLMSG_DONE)
      cc = msg->data.result;
  return cc;
}

/* The transfer over the network; *cc curl's result, *conn the handle used. */
static kcr_err run_curl(kcr_watch *w, const char *path, struct kcr__conn **connp,
                        CURLcode *cc, bool *canceled, struct kcr_errinfo *ei)
{
  struct curl_slist *hdrs = NULL;
  struct kcr__conn *conn = kcr__conn_get(w->c);
  kcr_err rc;

  *connp = conn;
  if(!conn)
    return KCR_ENOMEM;
  w->h = conn->h;
  conn->errbuf[0] = '\0';
  curl_easy_setopt(conn->h, CURLOPT_POSTFIELDS, NULL);
  rc = kcr__conn_prepare(w->c, conn, "GET", path, NULL, w->accept, false, &hdrs, ei);
  if(rc)
    goto out;
  curl_easy_setopt(conn->h, CURLOPT_TIMEOUT_MS, (long)stream_ms(w));
  curl_easy_setopt(conn->h, CURLOPT_WRITEFUNCTION, on_data);
  curl_easy_setopt(conn->h, CURLOPT_WRITEDATA, w);
  curl_easy_setopt(conn->h, CURLOPT_HEADERFUNCTION, NULL);
  curl_easy_setopt(conn->h, CURLOPT_HEADERDATA, NULL);
  curl_multi_add_handle(w->multi, conn->h);
  *cc = pump(w, canceled);
  curl_multi_remove_handle(w->multi, conn->h);
  if(!w->code)
    curl_easy_getinfo(conn->h, CURLINFO_RESPONSE_CODE, &w->code);
out:
  curl_easy_setopt(conn->h, CURLOPT_HTTPHEADER, NULL);
  curl_easy_setopt(conn->h, CURLOPT_WRITEDATA, NULL);
  kcr__headers_free(hdrs);
  return rc;
}

/* The stream on a connection of our own (transport_own.c, kcr__own_streams). */
static kcr_err run_own(kcr_watch *w, const char *path, CURLcode *cc, bool *canceled,
                       struct kcr_errinfo *ei)
{
  uint64_t ms = stream_ms(w);
  kcr_err rc = kcr__own_stream(w->c, path, w->accept, ms ? ms : KCR_FOREVER, w->wake_fd,
                               w->batch_ms, feed, w, &w->code, ei);
  *canceled = atomic_load(&w->canceled);
  *cc = rc ? CURLE_RECV_ERROR : CURLE_OK;
  return rc;
}

/* The transfer over the wire seam (tests). */
static kcr_err run_wire(kcr_watch *w, const char *path, kcr__wire_fn wire, void *wud,
                        CURLcode *cc, bool *canceled, struct kcr_errinfo *ei)
{
  struct kcr__wire_request req = {.method = "GET",
                                  .path = path,
                                  .accept = w->accept,
                                  .watch = true,
                                  .canceled = &w->canceled};
  long retry_after = -1;
  kcr_err rc = wire(wud, &req, &w->code, &retry_after, feed, w, ei);
  *canceled = atomic_load(&w->canceled);
  *cc = rc ? CURLE_RECV_ERROR : CURLE_OK;
  return rc;
}

kcr_err kcr_watch_run(kcr_watch *w, struct kcr_errinfo *ei)
{
  struct kcr_buf path = KCR_BUF_INIT;
  struct kcr__conn *conn = NULL;
  bool canceled = false, clean = false, own = false;
  uint64_t t0 = kcr_time_mono_ns();
  CURLcode cc = CURLE_OK;
  kcr__wire_fn wire;
  void *wud;
  kcr_err rc, trc;

  if(atomic_load(&w->canceled))
    return kcr_errinfo_set(ei, KCR_ECANCELED, "watch canceled");
  w->ei = ei;
  w->stop_rc = KCR_OK;
  w->code = 0;
  kcr_buf_reset(&w->errbody);
  kcr__framer_cleanup(&w->fr);
  w->fr.max_line = kcr__client_max_response(w->c);
  rc = watch_path(w, &path);
  if(rc)
    goto out;
  wire = kcr__client_wire(w->c, &wud);
  if(wire)
    trc = run_wire(w, path.ptr, wire, wud, &cc, &canceled, ei);
  else if((own = kcr__own_streams(w->c, path.ptr)))
    trc = run_own(w, path.ptr, &cc, &canceled, ei);
  else
    trc = run_curl(w, path.ptr, &conn, &cc, &canceled, ei);
  if(!conn && !wire && !own) {
    rc = trc;
    goto out;
  }
  kcr__client_observe(w->c, "WATCH", w->code, (double)(kcr_time_mono_ns() - t0) / 1e9);
  if(canceled) {
    rc = kcr_errinfo_set(ei, KCR_ECANCELED, "watch canceled");
  } else if(w->stop_rc == KCR_ETOOLARGE) {
    rc = kcr__too_large(w->c, "WATCH", path.ptr, ei);
  } else if(w->stop_rc) {
    rc = w->stop_rc;
  } else if(trc && (!conn || cc == CURLE_OK)) {
    rc = trc; /* preparing the request failed, or the wire reported an error */
  } else if(cc != CURLE_OK) {
    rc = kcr__curl_err(cc, conn, "GET", path.ptr, ei);
  } else if(w->code != 200) {
    rc = kcr_errinfo_from_http(ei, w->code, w->errbody.ptr, w->errbody.len);
    clean = true;
  } else if(kcr__framer_pending(&w->fr)) {
    rc = kcr_errinfo_set(ei, KCR_ETRANSPORT,
                         "watch stream ended in the middle of a document "
                         "(%zu bytes pending)",
                         kcr__framer_pending(&w->fr));
  } else {
    clean = true;
  }
out:
  if(conn)
    kcr__conn_put(w->c, conn, !clean);
  kcr_buf_cleanup(&path);
  kcr__framer_cleanup(&w->fr);
  kcr_buf_cleanup(&w->scratch);
  kcr_buf_cleanup(&w->rvbuf);
  w->ei = NULL;
  w->h = NULL;
  return rc;
}
