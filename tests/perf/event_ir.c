/* event_ir - the instructions an informer spends turning watch events into
 * cached objects, the two ways libkcr has: from the event's text (what the
 * informer does: kcr__watch_decode_text, then kcr__obj_from_text with
 * KCR__OBJ_CHECKED) and from a tree (kcr__watch_decode with managedFields
 * left out before parsing, then kcr__obj_from_json: what it did before).
 * Deterministic under callgrind, so the machine's load does not matter:
 *
 *   valgrind --tool=callgrind --toggle-collect=run_once \
 *       build/release/tests/event_ir STREAM text|tree REPS [keep]
 *
 * STREAM is a captured watch stream, one event per line (the fuzz seeds
 * tests/fuzz/corpus/watch/NAME.bin, whose first 2 bytes are the fuzzer's
 * and are skipped); REPS times over all its events; "keep" makes the
 * objects through a keep-list (spec, status.conditions) as ebdman's child
 * caches do. Prints the events and bytes of one pass. Uses libkcr's
 * internal headers (src/), so it lives in tests/ (bench/ programs use the
 * public API only) and builds only with this tree. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/json-int.h"
#include "kcr.h"
#include "kube/watch-int.h"
#include "runtime/projection-int.h"
#include "runtime/store-int.h"

#define MAX_EVENTS 256

static const char *lines[MAX_EVENTS];
static size_t lens[MAX_EVENTS];
static int nev;
static struct kcr__proj *proj;

/* One pass over every event: callgrind counts only inside (--toggle-collect). */
__attribute__((noinline)) void run_once(bool text)
{
  struct kcr_buf rvbuf = KCR_BUF_INIT, scratch = KCR_BUF_INIT;

  for(int i = 0; i < nev; i++) {
    struct kcr_watch_event ev;
    kcr_obj *o = NULL;
    if(text) {
      if(kcr__watch_decode_text(lines[i], lens[i], &rvbuf, &ev))
        continue;
      const struct kcr__json_want known[2] = {
          {.at = ev.metadata_text, .n = ev.metadata_len},
          {.at = ev.managed_fields_text, .n = ev.managed_fields_len}};
      kcr__obj_from_text(ev.object_text, ev.object_len, KCR__OBJ_CHECKED, proj, known, 2,
                         &o, NULL);
    } else {
      if(kcr__watch_decode(lines[i], lens[i], &scratch, &ev, NULL))
        continue;
      kcr__obj_from_json(ev.object, 0, proj, &o, NULL);
      cJSON_Delete(ev.object);
    }
    kcr_obj_unref(o);
  }
  kcr_buf_cleanup(&rvbuf);
  kcr_buf_cleanup(&scratch);
}

int main(int argc, char **argv)
{
  static char buf[4 << 20];
  FILE *f;
  size_t n, bytes = 0;
  char *p, *end;
  int reps;
  bool text;

  if(argc < 4 || (strcmp(argv[2], "text") && strcmp(argv[2], "tree"))) {
    fprintf(stderr, "usage: event_ir STREAM text|tree REPS [keep]\n");
    return 2;
  }
  if(!(f = fopen(argv[1], "rb"))) {
    perror(argv[1]);
    return 2;
  }
  n = fread(buf, 1, sizeof(buf), f);
  fclose(f);
  text = !strcmp(argv[2], "text");
  reps = atoi(argv[3]);
  if(argc > 4 &&
     kcr__proj_new((const char *[]){"/spec", "/status/conditions", NULL}, 0, &proj))
    return 2;
  for(p = buf + (n > 2 ? 2 : n), end = buf + n; p < end;) {
    char *q = memchr(p, '\n', (size_t)(end - p));
    if(!q)
      q = end;
    if(q > p && nev < MAX_EVENTS && *p == '{') {
      lines[nev] = p;
      lens[nev] = (size_t)(q - p);
      bytes += lens[nev++];
    }
    p = q + 1;
  }
  for(int r = 0; r < reps; r++)
    run_once(text);
  printf("%d events, %zu bytes per pass, %d passes\n", nev, bytes, reps);
  kcr__proj_free(proj);
  return 0;
}
