/* Watch streams: a whole kcr_watch_run over the client's wire seam
 * (src/kube/client-int.h), whose answer is the input, so the framing
 * (kcr__framer_feed), the decoding of each document (kcr__watch_decode),
 * ERROR events' Status, the event-size limit, a stream cut mid-document
 * and a non-200 answer all run as in production.
 *
 * Input: byte 0 picks the answer (HTTP code, whether the connection fails
 * at the end, the client's event-size limit) and whether events come as
 * text (kcr_watch_opts.object_text), byte 1 seeds the chunking
 * of the body and which callback calls fail, the rest is the body.
 * Checked: events arrive with a type in range, an object (or its text,
 * which parses), and the resourceVersion of that object; kcr_watch_rv() ends as the last
 * resourceVersion whose event was delivered successfully; the return code
 * is one of those kcr/watch.h lists. */
#include "fuzz.h"
#include "kube/client-int.h"

static const struct kcr_gvr configmaps = {"", "v1", "configmaps", true};

/* One run's answer and what the callback saw. */
struct run {
  long code;
  bool fail_at_end;
  unsigned seed;
  const uint8_t *body;
  size_t len;
  unsigned events, fail_mask;
  bool text;     /* kcr_watch_opts.object_text */
  char *last_rv; /* of the last event delivered with KCR_OK */
};

static kcr_client *clients[2]; /* default limit; 512-byte events */

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  kcr_config *cfg;

  fuzz_quiet();
  cfg = fuzz_config();
  if(kcr_client_new(&(struct kcr_client_opts){.config = cfg}, &clients[0], &ei) ||
     kcr_client_new(&(struct kcr_client_opts){.config = cfg, .max_response_bytes = 512},
                    &clients[1], &ei)) {
    fprintf(stderr, "fuzz_watch: %s\n", ei.message ? ei.message : "set-up failed");
    abort();
  }
  kcr_config_free(cfg);
  return 0;
}

static kcr_err wire(void *ud, const struct kcr__wire_request *req, long *code,
                    long *retry_after_s, kcr__wire_write write, void *wctx,
                    struct kcr_errinfo *ei)
{
  struct run *r = ud;
  unsigned seed = r->seed;
  size_t off = 0;

  FUZZ_CHECK(req->watch && !strcmp(req->method, "GET"));
  *code = r->code;
  while(off < r->len) {
    size_t n;
    seed = seed * 1103515245u + 12345u;
    n = (size_t)(seed >> 16) % 97 + 1; /* chunks of 1..97 bytes */
    if(n > r->len - off)
      n = r->len - off;
    if(!write((const char *)r->body + off, n, wctx))
      return KCR_OK; /* the client stopped reading */
    off += n;
  }
  return r->fail_at_end ? kcr_errinfo_set(ei, KCR_ETRANSPORT, "fuzz: connection reset")
                        : KCR_OK;
}

static kcr_err on_event(struct kcr_watch_event *ev, void *ud)
{
  struct run *r = ud;
  const char *rv;
  unsigned i = r->events++;

  FUZZ_CHECK(ev->type <= KCR_WATCH_BOOKMARK); /* ERROR events end the run */
  /* the end of a streaming list's initial events: a bookmark annotated so */
  static const char *const end = "/metadata/annotations/k8s.io~1initial-events-end";
  FUZZ_CHECK(!ev->initial_events_end || ev->type == KCR_WATCH_BOOKMARK);
  if(ev->object_text) { /* object_text: the object's text, checked whole */
    cJSON *t = NULL;
    const char *trv, *e;
    FUZZ_CHECK(r->text && !ev->object && ev->object_len && *ev->object_text == '{');
    FUZZ_CHECK(kcr_json_parse(ev->object_text, ev->object_len, &t, NULL) == KCR_OK);
    trv = kcr_json_str(t, "/metadata/resourceVersion");
    FUZZ_CHECK(trv ? ev->resource_version && !strcmp(trv, ev->resource_version)
                   : !ev->resource_version);
    e = kcr_json_str(t, end);
    FUZZ_CHECK(ev->initial_events_end ==
               (ev->type == KCR_WATCH_BOOKMARK && e && !strcmp(e, "true")));
    cJSON_Delete(t);
  } else {
    const char *e = kcr_json_str(ev->object, end);
    FUZZ_CHECK(cJSON_IsObject(ev->object));
    rv = kcr_json_str(ev->object, "/metadata/resourceVersion");
    FUZZ_CHECK(rv == ev->resource_version);
    FUZZ_CHECK(ev->initial_events_end ==
               (ev->type == KCR_WATCH_BOOKMARK && e && !strcmp(e, "true")));
  }
  rv = ev->resource_version;
  if(i < 32 && r->fail_mask >> i & 1)
    return KCR_EIO; /* not delivered: rv must not move past it */
  if(rv && *rv) {
    free(r->last_rv);
    r->last_rv = strdup(rv);
    FUZZ_CHECK(r->last_rv);
  }
  if(i & 1) { /* the callback may take the object */
    cJSON_Delete(ev->object);
    ev->object = NULL;
  }
  return KCR_OK;
}

static bool documented(kcr_err rc)
{
  switch(rc) {
  case KCR_OK:
  case KCR_EGONE:
  case KCR_EPARSE:
  case KCR_ETRANSPORT:
  case KCR_ETOOLARGE:
  case KCR_EIO: /* on_event's */
  case KCR_ENOMEM: return true;
  default: break;
  }
  /* An ERROR event's Status or a non-200 answer: any API error code. */
  return (rc >= KCR_ENOTFOUND && rc <= KCR_EHTTP && rc != KCR_ETERMINAL) ||
         rc == KCR_EUNSUPPORTED;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  static const long codes[] = {200, 200, 200, 200, 200, 410, 500, 403};
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  struct run r = {0};
  kcr_client *c;
  kcr_watch *w = NULL;
  kcr_err rc;

  if(size < 2)
    return 0;
  r.code = codes[data[0] & 7];
  r.fail_at_end = data[0] & 8;
  c = clients[(data[0] >> 4) & 1];
  r.seed = data[1];
  r.fail_mask = (data[0] & 0x20) ? (unsigned)data[1] * 0x01010101u : 0;
  r.text = data[0] & 0x40;
  r.body = data + 2;
  r.len = size - 2;

  kcr__client_set_wire(c, wire, &r);
  rc = kcr_watch_new(
      &(struct kcr_watch_opts){.client = c,
                               .ref = &(struct kcr_ref){&configmaps, "default"},
                               .on_event = on_event,
                               .ud = &r,
                               .allow_bookmarks = true,
                               .object_text = r.text},
      &w, &ei);
  FUZZ_CHECK(rc == KCR_OK);
  rc = kcr_watch_run(w, &ei);
  FUZZ_CHECK(documented(rc));
  if(r.code != 200)
    FUZZ_CHECK(rc != KCR_OK && r.events == 0);
  if(r.last_rv)
    FUZZ_CHECK(kcr_watch_rv(w) && !strcmp(kcr_watch_rv(w), r.last_rv));
  else
    FUZZ_CHECK(kcr_watch_rv(w) == NULL);
  kcr_watch_free(w);
  kcr__client_set_wire(c, NULL, NULL);
  kcr_errinfo_cleanup(&ei);
  free(r.last_rv);
  return 0;
}
