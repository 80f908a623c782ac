/* DESIGN: ebdman status - EBDs with their conditions as an aligned table;
 * --watch redraws it on every change (a LIST, then a WATCH from its
 * resourceVersion).
 *
 * Every cell is untrusted text. Names come from the API server, and the
 * Ready message comes from whoever wrote the VFM's status: under vfm-sim an
 * EBD author sets it with the fail annotation. Printed raw, such text could
 * clear the screen (ESC [ 2 J), retitle the window or write the clipboard
 * (OSC 52), ring the bell, or overwrite a row with CR. So every cell goes
 * through ebdman_term_escape(), which escapes as kubectl does (cli-runtime's
 * printers.EscapeTerminal: ESC -> "^[", CR -> "\r") and goes further, since
 * kubectl lets BEL, the other C0 controls and the 8-bit C1 controls through:
 *   ESC -> ^[   CR -> \r   LF -> \n   TAB -> \t
 *   other C0 controls and DEL -> ^X (caret notation: BEL -> ^G, DEL -> ^?)
 *   C1 controls U+0080..U+009F, the bidirectional overrides and isolates and
 *   the line/paragraph separators -> \uXXXX
 *   a byte that is not part of valid UTF-8 (overlong, surrogate, truncated)
 *   -> \xNN
 * The escaping is for reading, not reversible (as kubectl's).
 *
 * Columns are as wide as their widest cell counted in characters (code
 * points), as kubectl's tabwriter counts runes, so multibyte UTF-8 aligns.
 * A cell holds at most EBDMAN_CELL_MAX - 1 bytes; longer text is cut at a
 * character boundary (never inside a UTF-8 sequence or an escape) and ends
 * with "...". Absent fields print as "-".
 *
 * The table, the sort and the watch-event bookkeeping are pure functions of
 * their arguments (declared in ebdman.h), so the unit tests drive them with
 * hostile objects; cmd_status() only adds the API calls. */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ebdman.h"

enum { C_NS, C_NAME, C_READY, C_REASON, C_INST, C_VFM, C_GEN, C_AGE, C_MSG, NCOL };
static const char *const heads[NCOL] = {"NAMESPACE", "NAME",      "READY",
                                        "REASON",    "INSTALLED", "VFM",
                                        "GEN/OBS",   "AGE",       "MESSAGE"};
#define COL_GAP 3 /* spaces between columns */

/* ---- escaping ---- */

/* Decodes the UTF-8 character at s into *cp and returns its length (1-4), or
 * 0 if s does not start a valid sequence (bad lead byte, overlong, surrogate,
 * above U+10FFFF, or cut short, including by the terminating NUL). */
static size_t utf8_decode(const unsigned char *s, uint32_t *cp)
{
  uint32_t c = s[0], min;
  size_t len;

  if(c < 0x80) {
    *cp = c;
    return 1;
  }
  if(c >= 0xC2 && c <= 0xDF) {
    len = 2, c &= 0x1F, min = 0x80;
  } else if(c >= 0xE0 && c <= 0xEF) {
    len = 3, c &= 0x0F, min = 0x800;
  } else if(c >= 0xF0 && c <= 0xF4) {
    len = 4, c &= 0x07, min = 0x10000;
  } else {
    return 0;
  }
  for(size_t i = 1; i < len; i++) {
    if((s[i] & 0xC0) != 0x80)
      return 0;
    c = c << 6 | (s[i] & 0x3F);
  }
  if(c < min || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF))
    return 0;
  *cp = c;
  return len;
}

/* Code points that control the terminal or the layout rather than print. */
static bool is_control(uint32_t cp)
{
  return cp < 0x20 || (cp >= 0x7F && cp <= 0x9F) || cp == 0x061C || cp == 0x200E ||
         cp == 0x200F || (cp >= 0x2028 && cp <= 0x202E) || (cp >= 0x2066 && cp <= 0x2069);
}

/* The display form of the character at s: its bytes, or an escape. Writes
 * it to u, sets *used to the input bytes consumed and *width to the
 * characters it shows as; returns its length in bytes. */
static size_t display_unit(const unsigned char *s, char u[8], size_t *used, size_t *width)
{
  uint32_t cp;
  size_t len = utf8_decode(s, &cp);
  int n;

  *used = len ? len : 1;
  if(!len)
    n = snprintf(u, 8, "\\x%02x", s[0]);
  else if(!is_control(cp)) {
    memcpy(u, s, len);
    *width = 1;
    return len;
  } else if(cp == 0x1B)
    n = snprintf(u, 8, "^[");
  else if(cp == '\r')
    n = snprintf(u, 8, "\\r");
  else if(cp == '\n')
    n = snprintf(u, 8, "\\n");
  else if(cp == '\t')
    n = snprintf(u, 8, "\\t");
  else if(cp < 0x20)
    n = snprintf(u, 8, "^%c", (char)(cp + 0x40));
  else if(cp == 0x7F)
    n = snprintf(u, 8, "^?");
  else
    n = snprintf(u, 8, "\\u%04x", (unsigned)cp);
  *width = (size_t)n; /* escapes are ASCII */
  return (size_t)n;
}

size_t ebdman_term_escape(char *out, size_t n, const char *in)
{
  const unsigned char *s = (const unsigned char *)(in ? in : "");
  size_t pos = 0, w = 0, mark_pos = 0, mark_w = 0;

  if(!n)
    return 0;
  while(*s) {
    char u[8];
    size_t used, uw, ulen = display_unit(s, u, &used, &uw);
    if(ulen > n - 1 - pos) {
      /* Cut back to the last character after which "..." still fits. */
      pos = mark_pos, w = mark_w;
      if(n - 1 - pos >= 3) {
        memcpy(out + pos, "...", 3);
        pos += 3, w += 3;
      }
      break;
    }
    memcpy(out + pos, u, ulen);
    pos += ulen, w += uw, s += used;
    if(n - 1 - pos >= 3)
      mark_pos = pos, mark_w = w;
  }
  out[pos] = '\0';
  return w;
}

/* ---- the table ---- */

struct cell {
  char text[EBDMAN_CELL_MAX];
  size_t width; /* in characters */
};

static void set_cell(struct cell *c, const char *text)
{
  c->width = ebdman_term_escape(c->text, sizeof(c->text), text ? text : "-");
}

static void age(time_t created, time_t now, char *out, size_t n)
{
  long long s = (long long)now - (long long)created;
  if(s < 0)
    s = 0;
  if(s < 120)
    snprintf(out, n, "%llds", s);
  else if(s < 7200)
    snprintf(out, n, "%lldm", s / 60);
  else if(s < 172800)
    snprintf(out, n, "%lldh", s / 3600);
  else
    snprintf(out, n, "%lldd", s / 86400);
}

static const char *cond(const cJSON *o, const char *type, const char *field)
{
  return kcr_json_member_str(kcr_cond_find(kcr_json_at(o, "/status/conditions"), type),
                             field);
}

static void fill_row(struct cell row[NCOL], const cJSON *o, time_t now)
{
  char buf[64];
  time_t created;

  set_cell(&row[C_NS], kcr_json_str(o, "/metadata/namespace"));
  set_cell(&row[C_NAME], kcr_json_str(o, "/metadata/name"));
  set_cell(&row[C_READY], cond(o, "Ready", "status"));
  set_cell(&row[C_REASON], cond(o, "Ready", "reason"));
  set_cell(&row[C_INST], cond(o, "Installed", "status"));
  set_cell(&row[C_VFM], cond(o, "VFMHealthy", "status"));
  snprintf(buf, sizeof(buf), "%lld/%lld",
           (long long)kcr_json_int(o, "/metadata/generation", 0),
           (long long)kcr_json_int(o, "/status/observedGeneration", 0));
  set_cell(&row[C_GEN], buf);
  if(kcr_time_parse(kcr_json_str(o, "/metadata/creationTimestamp"), &created))
    snprintf(buf, sizeof(buf), "<unknown>");
  else
    age(created, now, buf, sizeof(buf));
  set_cell(&row[C_AGE], buf);
  set_cell(&row[C_MSG], cond(o, "Ready", "message"));
}

kcr_err ebdman_status_table(FILE *out, const cJSON *objs, bool all_ns, time_t now)
{
  size_t n = cJSON_IsArray(objs) ? (size_t)cJSON_GetArraySize(objs) : 0, w[NCOL] = {0};
  struct cell(*rows)[NCOL] = calloc(n + 1, sizeof(*rows));
  const cJSON *o, *items = n ? objs : NULL;
  size_t r = 0;

  if(!rows)
    return KCR_ENOMEM;
  for(int c = 0; c < NCOL; c++)
    set_cell(&rows[0][c], heads[c]);
  cJSON_ArrayForEach(o, items) { fill_row(rows[++r], o, now); }
  for(size_t i = 0; i <= n; i++)
    for(int c = 0; c < NCOL; c++)
      if(rows[i][c].width > w[c])
        w[c] = rows[i][c].width;
  for(size_t i = 0; i <= n; i++) {
    for(int c = all_ns ? 0 : 1; c < NCOL; c++) {
      fputs(rows[i][c].text, out);
      if(c == NCOL - 1)
        fputc('\n', out);
      else
        fprintf(out, "%*s", (int)(w[c] - rows[i][c].width + COL_GAP), "");
    }
  }
  if(!n)
    fputs("(no EBDs)\n", out);
  free(rows);
  return fflush(out) || ferror(out) ? KCR_EIO : KCR_OK;
}

/* ---- sorting and watch events ---- */

static const char *str_or_empty(const cJSON *o, const char *path)
{
  const char *s = kcr_json_str(o, path);
  return s ? s : "";
}

/* By namespace, then name; an absent one sorts as "". */
static int cmp_obj(const void *a, const void *b)
{
  const cJSON *x = *(const cJSON *const *)a, *y = *(const cJSON *const *)b;
  int c = strcmp(str_or_empty(x, "/metadata/namespace"),
                 str_or_empty(y, "/metadata/namespace"));
  return c ? c
           : strcmp(str_or_empty(x, "/metadata/name"), str_or_empty(y, "/metadata/name"));
}

kcr_err ebdman_status_sort(cJSON *objs)
{
  int n = cJSON_GetArraySize(objs);
  cJSON **v;

  if(n < 2)
    return KCR_OK;
  if(!(v = calloc((size_t)n, sizeof(*v))))
    return KCR_ENOMEM;
  for(int i = n - 1; i >= 0; i--)
    v[i] = cJSON_DetachItemFromArray(objs, i);
  qsort(v, (size_t)n, sizeof(*v), cmp_obj);
  for(int i = 0; i < n; i++)
    cJSON_AddItemToArray(objs, v[i]); /* cannot fail: both non-NULL */
  free(v);
  return KCR_OK;
}

bool ebdman_status_apply(cJSON *objs, struct kcr_watch_event *ev)
{
  const char *name = kcr_json_str(ev->object, "/metadata/name");
  const char *ns = str_or_empty(ev->object, "/metadata/namespace");
  cJSON *it;
  int i = 0;

  if(ev->type == KCR_WATCH_BOOKMARK || ev->type == KCR_WATCH_ERROR || !name ||
     !cJSON_IsArray(objs))
    return false; /* nothing to key it by */
  cJSON_ArrayForEach(it, objs)
  {
    const char *iname = kcr_json_str(it, "/metadata/name");
    if(iname && !strcmp(iname, name) &&
       !strcmp(str_or_empty(it, "/metadata/namespace"), ns))
      break;
    i++;
  }
  if(it)
    cJSON_DeleteItemFromArray(objs, i);
  if(ev->type != KCR_WATCH_DELETED && cJSON_AddItemToArray(objs, ev->object))
    ev->object = NULL; /* taken */
  return true;
}

/* ---- the command ---- */

struct view {
  cJSON *objs;
  bool all_ns, tty;
};

static kcr_err add_item(const cJSON *item, void *ud)
{
  cJSON *dup = cJSON_Duplicate(item, 1);
  if(!dup || !cJSON_AddItemToArray(ud, dup)) {
    cJSON_Delete(dup);
    return KCR_ENOMEM;
  }
  return KCR_OK;
}

static kcr_err show(struct view *v)
{
  kcr_err rc = ebdman_status_sort(v->objs);
  return rc ? rc : ebdman_status_table(stdout, v->objs, v->all_ns, kcr_time_now());
}

static kcr_err redraw(struct view *v)
{
  char now[KCR_RFC3339_LEN];
  if(v->tty)
    printf("\033[H\033[2J");
  kcr_time_format(kcr_time_now(), now);
  printf("--- %s\n", now);
  return show(v);
}

static kcr_err on_event(struct kcr_watch_event *ev, void *ud)
{
  struct view *v = ud;
  return ebdman_status_apply(v->objs, ev) ? redraw(v) : KCR_OK;
}

static kcr_watch *volatile current;
static void on_signal(int sig)
{
  (void)sig;
  if(current)
    kcr_watch_cancel(current);
}

/* Prints "ebdman status: WHAT: <error>[: <server message>]", the server's
 * message escaped like a cell (it can quote user input). */
static void report(const char *what, kcr_err rc, const struct kcr_errinfo *ei)
{
  char msg[1024];
  if(ei->message)
    ebdman_term_escape(msg, sizeof(msg), ei->message);
  fprintf(stderr, "ebdman status: %s: %s%s%s\n", what, kcr_strerror(rc),
          ei->message ? ": " : "", ei->message ? msg : "");
}

static int watch_loop(kcr_client *c, struct view *v, const struct kcr_ref *ref,
                      const char *rv)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  struct kcr_watch_opts wo = {.client = c,
                              .ref = ref,
                              .on_event = on_event,
                              .ud = v,
                              .resource_version = rv,
                              .allow_bookmarks = true,
                              .timeout_ms = 300000};
  kcr_watch *w = NULL;
  kcr_err rc;

  signal(SIGINT, on_signal);
  signal(SIGTERM, on_signal);
  if((rc = redraw(v)) || (rc = kcr_watch_new(&wo, &w, &ei)))
    goto out;
  current = w;
  while((rc = kcr_watch_run(w, &ei)) == KCR_OK)
    ;
  current = NULL;
out:
  if(rc && rc != KCR_ECANCELED)
    report("watch ended", rc, &ei);
  kcr_watch_free(w);
  kcr_errinfo_cleanup(&ei);
  return rc && rc != KCR_ECANCELED ? 1 : 0;
}

int cmd_status(int argc, char **argv)
{
  struct kcr_config_opts co = {0};
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  const char *ns = NULL;
  bool watch = false;
  int status = 0;
  kcr_config *cfg = NULL;
  kcr_client *c;
  char *rv = NULL;
  kcr_err rc;
  const struct kcr_flag flags[] = {
      {"namespace", KCR_FLAG_STRING, &ns, "one namespace (default: all)", .arg = "NS"},
      {"watch", KCR_FLAG_BOOL, &watch, "redraw the table on every change"},
  };

  kcr_cli_parse_or_exit(
      &(struct kcr_cli){
          .prog = "ebdman status",
          .about = "Prints EBDs with their Ready, Installed and VFMHealthy conditions, "
                   "reasons,\ngeneration/observedGeneration and age. Control characters "
                   "in the cells are\nshown escaped (ESC as ^[, CR as \\r).",
          .flags = flags,
          .nflags = sizeof(flags) / sizeof(flags[0]),
          .config = &co},
      argc, argv);
  rc = kcr_config_load(&co, &cfg, &ei);
  if(!rc)
    rc = kcr_client_new(&(struct kcr_client_opts){.config = cfg}, &c, &ei);
  kcr_config_free(cfg); /* the client holds its own reference */
  if(rc) {
    fprintf(stderr, "ebdman status: %s\n", ei.message ? ei.message : kcr_strerror(rc));
    kcr_errinfo_cleanup(&ei);
    return 2;
  }
  struct view v = {cJSON_CreateArray(), ns == NULL, isatty(1)};
  struct kcr_ref ref = {.gvr = &ebdman_ebds, .ns = ns};
  rc = v.objs ? kcr_list_each(c, &ref, NULL, add_item, v.objs, &rv, &ei) : KCR_ENOMEM;
  if(rc) {
    report("listing EBDs", rc, &ei);
    status = rc == KCR_ENOTFOUND ? 2 : 1;
  } else if(!watch) {
    if((rc = show(&v))) {
      report("printing the table", rc, &ei);
      status = 1;
    }
  } else {
    status = watch_loop(c, &v, &ref, rv);
  }
  free(rv);
  cJSON_Delete(v.objs);
  kcr_errinfo_cleanup(&ei);
  kcr_client_free(c);
  return status;
}
