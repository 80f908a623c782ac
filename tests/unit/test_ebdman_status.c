/* `ebdman status`: what its table shows for hostile and malformed EBDs.
 * Every cell is untrusted (an EBD author writes the Ready message through
 * vfm-sim's fail annotation), so control characters print escaped; columns
 * align by characters, not bytes; objects without a namespace or a name are
 * shown, sorted and matched to watch events without crashing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ebdman.h"
#include "tfail.h"

#define T_CREATED "2026-11-29T10:00:00Z"

/* ---- helpers ---- */

/* Whether s is valid UTF-8 (no overlong forms, surrogates or cut sequences). */
static bool valid_utf8(const char *s)
{
  const unsigned char *p = (const unsigned char *)s;
  while(*p) {
    unsigned c = *p, len = c < 0x80                 ? 1
                           : c >= 0xC2 && c <= 0xDF ? 2
                           : c >= 0xE0 && c <= 0xEF ? 3
                           : c >= 0xF0 && c <= 0xF4 ? 4
                                                    : 0;
    uint32_t cp = len == 1 ? c : c & (0x7F >> len);
    if(!len)
      return false;
    for(unsigned i = 1; i < len; i++) {
      if((p[i] & 0xC0) != 0x80)
        return false;
      cp = cp << 6 | (p[i] & 0x3F);
    }
    if((len == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) ||
       (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)))
      return false;
    p += len;
  }
  return true;
}

/* Characters (code points) in valid UTF-8. */
static size_t chars(const char *s, size_t bytes)
{
  size_t n = 0;
  for(size_t i = 0; i < bytes; i++)
    n += ((unsigned char)s[i] & 0xC0) != 0x80;
  return n;
}

/* s with every byte outside printable ASCII as \xNN, for failure messages
 * that must not act on the terminal of whoever runs the tests. */
static const char *visible(const char *s)
{
  static char buf[1024];
  size_t n = 0;
  for(const unsigned char *p = (const unsigned char *)s; *p && n + 5 < sizeof(buf); p++)
    n += (size_t)snprintf(buf + n, sizeof(buf) - n,
                          *p >= 0x20 && *p < 0x7F ? "%c" : "\\x%02x", *p);
  buf[n] = '\0';
  return buf;
}

/* Fails unless out holds nothing a terminal would act on: no C0 control but
 * the newline ending each row, no DEL, no C1 control, valid UTF-8. */
static void assert_terminal_safe(const char *out)
{
  assert_true(valid_utf8(out));
  for(const unsigned char *p = (const unsigned char *)out; *p; p++) {
    if((*p < 0x20 && *p != '\n') || *p == 0x7F)
      fail_msg("control byte 0x%02x at offset %zu in:\n%s", *p,
               (size_t)(p - (const unsigned char *)out), visible(out));
    if(*p == 0xC2 && p[1] >= 0x80 && p[1] <= 0x9F)
      fail_msg("C1 control U+00%02X in:\n%s", p[1], visible(out));
  }
}

static size_t lines(const char *s)
{
  size_t n = 0;
  for(; *s; s++)
    n += *s == '\n';
  return n;
}

/* The table as text (caller frees). */
static char *table(const cJSON *objs, bool all_ns, time_t now)
{
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  assert_non_null(f);
  assert_int_equal(KCR_OK, ebdman_status_table(f, objs, all_ns, now));
  fclose(f);
  return text;
}

static time_t created(void)
{
  time_t t;
  assert_int_equal(KCR_OK, kcr_time_parse(T_CREATED, &t));
  return t;
}

/* An EBD as `ebdman status` lists it. */
static cJSON *ebd(const char *ns, const char *name, const char *ready, const char *reason,
                  const char *msg)
{
  cJSON *o = cJSON_CreateObject(), *conds = cJSON_CreateArray(), *c;
  if(ns)
    kcr_json_set_str(o, "/metadata/namespace", ns);
  if(name)
    kcr_json_set_str(o, "/metadata/name", name);
  kcr_json_set_str(o, "/metadata/creationTimestamp", T_CREATED);
  cJSON_AddNumberToObject(kcr_json_obj(o, "/metadata"), "generation", 1);
  cJSON_AddNumberToObject(kcr_json_obj(o, "/status"), "observedGeneration", 1);
  cJSON_AddItemToObject(kcr_json_obj(o, "/status"), "conditions", conds);
  const char *types[] = {"Ready", "Installed", "VFMHealthy"};
  for(int i = 0; i < 3; i++) {
    cJSON_AddItemToArray(conds, c = cJSON_CreateObject());
    cJSON_AddStringToObject(c, "type", types[i]);
    cJSON_AddStringToObject(c, "status", i == 1 ? "True" : ready);
    cJSON_AddStringToObject(c, "reason", reason);
    cJSON_AddStringToObject(c, "message", msg);
  }
  return o;
}

/* Fails unless, on every line after the first, each of the header's column
 * titles (cols, space-separated) starts a cell at the same character
 * position: not a space there, a space just before. */
static void assert_aligned(const char *text, const char *cols)
{
  char *copy = strdup(text), *save = NULL, *line, *hdr;
  size_t start[16], n = 0;
  assert_non_null(copy);
  hdr = strtok_r(copy, "\n", &save);
  char *cs = strdup(cols), *csave = NULL;
  for(char *c = strtok_r(cs, " ", &csave); c; c = strtok_r(NULL, " ", &csave)) {
    size_t cl = strlen(c);
    char *at = hdr;
    while((at = strstr(at, c)) &&
          ((at > hdr && at[-1] != ' ') || (at[cl] && at[cl] != ' ')))
      at++; /* a whole word: NAME is not the start of NAMESPACE */
    if(!at)
      fail_msg("no column %s in the header: %s", c, hdr);
    start[n++] = chars(hdr, (size_t)(at - hdr));
  }
  free(cs);
  while((line = strtok_r(NULL, "\n", &save))) {
    size_t len = strlen(line), pos = 0, cp[512], ncp = 0;
    for(size_t i = 0; i < len && ncp < 512; i++)
      if(((unsigned char)line[i] & 0xC0) != 0x80)
        cp[ncp++] = i;
    for(size_t i = 0; i < n; i++) {
      pos = start[i];
      if(pos >= ncp || line[cp[pos]] == ' ' || (pos && line[cp[pos - 1]] != ' '))
        fail_msg("column %zu (character %zu) is not aligned with its header in:\n%s\n%s",
                 i, pos, hdr, visible(line));
    }
  }
  free(copy);
}

/* ---- escaping ---- */

/* clang-format off: one vector per line, strings split where a hex escape
 * would swallow the next character. */
static const struct {
  const char *in, *shown;
} escapes[] = {
    {"\x1b[2J\x1b[Hclear", "^[[2J^[[Hclear"},       /* CSI: clear screen */
    {"ding\a", "ding^G"},                           /* BEL */
    {"real\rFAKE", "real\\rFAKE"},                  /* CR overwrites */
    {"\x1b]52;c;ZXZpbA==\a", "^[]52;c;ZXZpbA==^G"}, /* OSC 52: clipboard */
    {"\x1b]0;title\x1b\\", "^[]0;title^[\\"},       /* OSC 0 ended by ST */
    {"a\nb\tc\fd\be", "a\\nb\\tc^Ld^He"},           /* layout controls */
    {"\x01\x1f\x7f", "^A^_^?"},                     /* C0, DEL */
    {"\xc2\x9b"
     "2J \xc2\x9d"
     "0;t",
     "\\u009b2J \\u009d0;t"}, /* C1 CSI, OSC */
    {"\x9b"
     "2J",
     "\\x9b2J"},                                  /* 8-bit CSI, not UTF-8 */
    {"\xc0\x9b", "\\xc0\\x9b"},                   /* overlong */
    {"\xed\xa0\x80", "\\xed\\xa0\\x80"},          /* surrogate */
    {"cut \xe2\x82", "cut \\xe2\\x82"},           /* sequence cut short */
    {"\xf4\x90\x80\x80", "\\xf4\\x90\\x80\\x80"}, /* above U+10FFFF */
    {"True\xe2\x80\xae"
     "eslaF",
     "True\\u202eeslaF"}, /* bidi override */
    {"a\xe2\x80\xa8"
     "b",
     "a\\u2028b"},                                /* line separator */
    {"plain, café ✓ 日本", "plain, café ✓ 日本"}, /* printable: as is */
};
/* clang-format on */

static void control_characters_are_shown_escaped(void **state)
{
  for(size_t i = 0; i < sizeof(escapes) / sizeof(escapes[0]); i++) {
    char out[EBDMAN_CELL_MAX];
    size_t w = ebdman_term_escape(out, sizeof(out), escapes[i].in);
    if(strcmp(out, escapes[i].shown))
      fail_msg("vector %zu: expected \"%s\", got \"%s\"", i, escapes[i].shown,
               visible(out));
    assert_terminal_safe(out);
    assert_int_equal(chars(out, strlen(out)), w);
  }
}

static void long_text_is_cut_between_characters(void **state)
{
  char in[1024], out[EBDMAN_CELL_MAX];
  size_t w;

  /* 200 two-byte characters: cut to whole characters, marked "...". */
  in[0] = '\0';
  for(int i = 0; i < 200; i++)
    strcat(in, "é");
  w = ebdman_term_escape(out, sizeof(out), in);
  assert_true(valid_utf8(out));
  assert_true(strlen(out) <= EBDMAN_CELL_MAX - 1);
  assert_string_equal("...", out + strlen(out) - 3);
  assert_int_equal(chars(out, strlen(out)), w);
  assert_int_equal(0, strncmp(out, in, strlen(out) - 3));
  /* Three-byte characters too. */
  in[0] = '\0';
  for(int i = 0; i < 100; i++)
    strcat(in, "✓");
  w = ebdman_term_escape(out, sizeof(out), in);
  assert_true(valid_utf8(out));
  assert_int_equal(chars(out, strlen(out)), w);
  /* An escape is never cut in half. */
  memset(in, 'a', 157);
  strcpy(in + 157, "\x1b[2J");
  ebdman_term_escape(out, sizeof(out), in);
  assert_terminal_safe(out);
  assert_string_equal("...", out + strlen(out) - 3);
  assert_null(strchr(out, '^'));
  /* Exactly full: not cut; one more byte: cut. */
  memset(in, 'x', 159);
  in[159] = '\0';
  assert_int_equal(159, ebdman_term_escape(out, sizeof(out), in));
  assert_string_equal(in, out);
  strcpy(in + 159, "y");
  assert_int_equal(159, ebdman_term_escape(out, sizeof(out), in));
  assert_string_equal("...", out + 156);
  /* Tiny buffers. */
  assert_int_equal(3, ebdman_term_escape(out, 4, "abcdef"));
  assert_string_equal("...", out);
  assert_int_equal(3, ebdman_term_escape(out, 4, "abc"));
  assert_string_equal("abc", out);
  assert_int_equal(0, ebdman_term_escape(out, 1, "abc"));
  assert_string_equal("", out);
  assert_int_equal(0, ebdman_term_escape(out, sizeof(out), NULL));
  assert_string_equal("", out);
}

/* ---- the table ---- */

static void hostile_messages_print_escaped_in_the_table(void **state)
{
  cJSON *objs = cJSON_CreateArray();
  cJSON_AddItemToArray(objs, ebd("ns", "calm", "True", "Ready", "ebd is ready"));
  cJSON_AddItemToArray(objs, ebd("ns", "evil\x1b[31m", "False", "Error",
                                 "\x1b[2J\x1b[Hall good\a\x1b]52;c;cm0gLXJmIH4=\a"
                                 "\rReady\x1b]0;pwned\x1b\\\xc2\x9b"
                                 "1A\x9b"
                                 "1A"));
  char *out = table(objs, true, created() + 5);
  assert_terminal_safe(out);
  print_message("%s", out);
  assert_non_null(strstr(out, "evil^[[31m"));
  assert_non_null(strstr(out,
                         "^[[2J^[[Hall good^G^[]52;c;cm0gLXJmIH4=^G\\rReady^[]0;pwned^[\\"
                         "\\u009b1A\\x9b1A\n"));
  assert_aligned(out, "NAMESPACE NAME READY REASON INSTALLED VFM GEN/OBS AGE MESSAGE");
  free(out);
  cJSON_Delete(objs);
}

static void columns_align_by_characters_not_bytes(void **state)
{
  cJSON *objs = cJSON_CreateArray();
  char longmsg[512] = "";
  for(int i = 0; i < 120; i++)
    strcat(longmsg, "é"); /* 240 bytes: more than a cell holds */
  cJSON_AddItemToArray(objs, ebd("ns", "café", "True", "Ready", "ebd est prêt"));
  cJSON_AddItemToArray(objs, ebd("ns", "abcdef", "False", "Érreur", longmsg));
  cJSON_AddItemToArray(objs, ebd("ns", "日本語", "False", "Error", "\x1b[2Jboom"));
  char *out = table(objs, false, created() + 5);
  assert_aligned(out, "NAME READY REASON INSTALLED VFM GEN/OBS AGE MESSAGE");
  assert_terminal_safe(out);
  print_message("%s", out);
  /* The widest name is 6 characters (and "café" 4 characters in 5 bytes). */
  assert_non_null(strstr(out, "\ncafé     True "));
  assert_non_null(strstr(out, "\nabcdef   False"));
  assert_non_null(strstr(out, "\n日本語"
                              "      False"));
  assert_non_null(strstr(out, "é...\n"));
  free(out);
  cJSON_Delete(objs);
}

static void an_empty_list_says_so(void **state)
{
  cJSON *objs = cJSON_CreateArray(), *notarray = cJSON_CreateObject();
  char *out = table(objs, false, 0);
  assert_string_equal(
      "NAME   READY   REASON   INSTALLED   VFM   GEN/OBS   AGE   MESSAGE\n"
      "(no EBDs)\n",
      out);
  free(out);
  out = table(notarray, false, 0);
  assert_non_null(strstr(out, "(no EBDs)\n"));
  free(out);
  out = table(NULL, false, 0);
  assert_non_null(strstr(out, "(no EBDs)\n"));
  free(out);
  cJSON_Delete(objs);
  cJSON_Delete(notarray);
}

static void items_without_namespace_or_name_are_sorted_and_shown(void **state)
{
  cJSON *objs = cJSON_Parse("[{\"metadata\":{\"name\":\"z\",\"namespace\":\"ns\"}},"
                            "{\"metadata\":{\"name\":\"b\"}},"
                            "{\"metadata\":{\"namespace\":\"ns\"}},"
                            "{},"
                            "{\"metadata\":{\"name\":5,\"namespace\":[\"x\"]}},"
                            "\"not an object\",42,null,"
                            "{\"metadata\":{\"name\":\"a\",\"namespace\":\"ns\"},"
                            "\"status\":{\"conditions\":7}}]");
  assert_non_null(objs);
  assert_int_equal(KCR_OK, ebdman_status_sort(objs));
  assert_int_equal(9, cJSON_GetArraySize(objs));
  /* Absent sorts as "": the namespaced ones come last, by name. */
  assert_string_equal("ns",
                      kcr_json_str(cJSON_GetArrayItem(objs, 6), "/metadata/namespace"));
  assert_null(kcr_json_str(cJSON_GetArrayItem(objs, 6), "/metadata/name"));
  assert_string_equal("a", kcr_json_str(cJSON_GetArrayItem(objs, 7), "/metadata/name"));
  assert_string_equal("z", kcr_json_str(cJSON_GetArrayItem(objs, 8), "/metadata/name"));
  char *out = table(objs, true, created());
  print_message("%s", out);
  assert_int_equal(10, lines(out)); /* the header and 9 rows */
  assert_non_null(strstr(out, "\n-           b "));
  assert_non_null(strstr(out, "\nns          -  "));
  assert_aligned(out, "NAMESPACE NAME READY REASON INSTALLED VFM GEN/OBS AGE MESSAGE");
  free(out);
  cJSON_Delete(objs);
}

/* ---- watch events ---- */

static struct kcr_watch_event event(enum kcr_watch_type type, const char *json)
{
  struct kcr_watch_event ev = {type, cJSON_Parse(json), NULL};
  assert_non_null(ev.object);
  return ev;
}

static void watch_events_match_items_without_namespace_or_name(void **state)
{
  cJSON *objs = cJSON_Parse("[{\"metadata\":{}},"
                            "{\"metadata\":{\"namespace\":\"ns\"}},"
                            "{\"metadata\":{\"name\":\"a\"}},"
                            "{\"metadata\":{\"name\":\"a\",\"namespace\":\"ns\"}}]");
  struct kcr_watch_event ev;

  /* A new object is appended and taken. */
  ev = event(KCR_WATCH_ADDED, "{\"metadata\":{\"name\":\"b\",\"namespace\":\"ns\"}}");
  assert_true(ebdman_status_apply(objs, &ev));
  assert_null(ev.object);
  assert_int_equal(5, cJSON_GetArraySize(objs));
  /* Without a namespace it replaces the item without one, not ns/a. */
  ev = event(KCR_WATCH_MODIFIED, "{\"metadata\":{\"name\":\"a\"},\"spec\":1}");
  assert_true(ebdman_status_apply(objs, &ev));
  assert_null(ev.object);
  assert_int_equal(5, cJSON_GetArraySize(objs));
  int with_spec = 0, ns_a = 0;
  const cJSON *it;
  cJSON_ArrayForEach(it, objs)
  {
    with_spec += kcr_json_at(it, "/spec") != NULL;
    ns_a += kcr_json_str(it, "/metadata/namespace") &&
            kcr_json_str(it, "/metadata/name") &&
            !strcmp(kcr_json_str(it, "/metadata/name"), "a");
  }
  assert_int_equal(1, with_spec);
  assert_int_equal(1, ns_a);
  /* DELETED removes ns/a only. */
  ev = event(KCR_WATCH_DELETED, "{\"metadata\":{\"name\":\"a\",\"namespace\":\"ns\"}}");
  assert_true(ebdman_status_apply(objs, &ev));
  assert_int_equal(4, cJSON_GetArraySize(objs));
  cJSON_Delete(ev.object);
  /* An event naming no object changes nothing and leaves it with the watch. */
  ev = event(KCR_WATCH_ADDED, "{\"metadata\":{\"namespace\":\"ns\"}}");
  assert_false(ebdman_status_apply(objs, &ev));
  assert_non_null(ev.object);
  cJSON_Delete(ev.object);
  ev = event(KCR_WATCH_MODIFIED, "[1,2]");
  assert_false(ebdman_status_apply(objs, &ev));
  cJSON_Delete(ev.object);
  ev = event(KCR_WATCH_BOOKMARK,
             "{\"metadata\":{\"name\":\"a\",\"resourceVersion\":\"9\"}}");
  assert_false(ebdman_status_apply(objs, &ev));
  cJSON_Delete(ev.object);
  assert_int_equal(4, cJSON_GetArraySize(objs));
  cJSON_Delete(objs);
}

/* ---- out of memory ---- */

struct printing {
  cJSON *objs;
  char *want; /* the table when nothing fails */
};

/* Sorting and printing either fail with ENOMEM (printing nothing) or
 * print the whole table. */
static bool sort_and_print(void *ud)
{
  struct printing *p = ud;
  static char text[8192];
  FILE *f = fmemopen(text, sizeof(text), "w"); /* allocates outside the wrappers */
  kcr_err rc;

  assert_non_null(f);
  rc = ebdman_status_sort(p->objs);
  if(!rc)
    rc = ebdman_status_table(f, p->objs, true, created() + 300);
  fputc('\0', f);
  fclose(f);
  return rc == KCR_ENOMEM ? text[0] == '\0' : rc == KCR_OK && !strcmp(text, p->want);
}

static void status_table_prints_all_or_nothing_when_memory_runs_out(void **state)
{
  struct printing p = {cJSON_CreateArray(), NULL};
  cJSON_AddItemToArray(p.objs, ebd("ns", "b", "True", "Ready", "ok"));
  cJSON_AddItemToArray(p.objs, ebd("ns", "a", "False", "Error", "\x1b[2J"));
  cJSON_AddItemToArray(p.objs, ebd(NULL, NULL, "False", "Error", "x"));
  cJSON *copy = cJSON_Duplicate(p.objs, 1);
  assert_int_equal(KCR_OK, ebdman_status_sort(copy));
  p.want = table(copy, true, created() + 300);
  cJSON_Delete(copy);
  tfail_torture("ebdman_status_sort/table", sort_and_print, &p);
  free(p.want);
  cJSON_Delete(p.objs);
}

int main(void)
{
  tfail_init();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(control_characters_are_shown_escaped),
      cmocka_unit_test(long_text_is_cut_between_characters),
      cmocka_unit_test(hostile_messages_print_escaped_in_the_table),
      cmocka_unit_test(columns_align_by_characters_not_bytes),
      cmocka_unit_test(an_empty_list_says_so),
      cmocka_unit_test(items_without_namespace_or_name_are_sorted_and_shown),
      cmocka_unit_test(watch_events_match_items_without_namespace_or_name),
      cmocka_unit_test(status_table_prints_all_or_nothing_when_memory_runs_out),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
