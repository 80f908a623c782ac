/* Command lines (runtime/cli.c): kcr_cli_parse with the config, manager
 * and log sets and a program table with one flag of each kind, on an argv
 * made of the input's NUL-separated words (argv[0] is the program).
 * Checked:
 *  - KCR_OK, or KCR_EINVAL with a message of one line (the table is
 *    well-formed, so no other error);
 *  - after any outcome every value is one its kind accepts: an int or duration
 *    within its range, a choice index in range, a string non-empty and one
 *    of argv's words or a suffix of one (--name=value), the positional
 *    arguments at most max_args, each one of argv's words;
 *  - a flag the input never names keeps its default, whatever else the
 *    parse met (it writes only checked values, only to the flag named);
 *  - a parse that succeeded once succeeds again on the same argv with the
 *    same values (the last of a flag given twice wins, both times). */
#include <limits.h>

#include "fuzz.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
  fuzz_quiet();
  return 0;
}

static const char *const colours[] = {"red", "green", "blue", NULL};

struct values {
  const char *name, *args[2];
  bool flag;
  int workers, colour;
  uint64_t wait_ms;
  struct kcr_config_opts co;
  struct kcr_manager_opts mo;
};

static const int64_t WAIT_MIN = 100, WAIT_MAX = 3600000;

static void defaults(struct values *v)
{
  *v = (struct values){
      .workers = 2,
      .colour = 1,
      .wait_ms = 5000,
      .mo = {.name = "fuzz", .metrics_addr = ":8080", .health_addr = ":8081"}};
}

static kcr_err parse(struct values *v, int argc, char **argv, bool *help,
                     struct kcr_errinfo *ei)
{
  const struct kcr_flag flags[] = {
      {"name", KCR_FLAG_STRING, &v->name, "a name", .arg = "NAME"},
      {"flag", KCR_FLAG_BOOL, &v->flag, "a switch"},
      {"workers", KCR_FLAG_INT, &v->workers, "how many", .min = 1, .max = 64},
      {"wait", KCR_FLAG_DURATION, &v->wait_ms, "how long", .min = WAIT_MIN,
       .max = WAIT_MAX},
      {"colour", KCR_FLAG_CHOICE, &v->colour, "which", .choices = colours},
  };
  kcr_err rc = kcr_cli_parse(&(struct kcr_cli){.prog = "fuzz",
                                               .args = "[A [B]]",
                                               .argv_out = v->args,
                                               .max_args = 2,
                                               .flags = flags,
                                               .nflags = 5,
                                               .config = &v->co,
                                               .manager = &v->mo,
                                               .log = true},
                             argc, argv, help, ei);
  fuzz_quiet(); /* the log set may have changed the level */
  kcr_log_set_format(KCR_LOG_KV);
  return rc;
}

/* Whether s is one of argv's words or a suffix of one. */
static bool from_argv(const char *s, int argc, char **argv)
{
  for(int i = 1; i < argc; i++)
    if(s >= argv[i] && s <= argv[i] + strlen(argv[i]))
      return true;
  return false;
}

static bool string_ok(const char *s, int argc, char **argv)
{
  return !s || (*s && from_argv(s, argc, argv));
}

/* Whether the input mentions the flag (a cheap over-approximation). */
static bool mentioned(const uint8_t *data, size_t size, const char *name)
{
  size_t n = strlen(name);
  for(size_t i = 0; i + n <= size; i++)
    if(!memcmp(data + i, name, n))
      return true;
  return false;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  static char prog[] = "fuzz";
  char *text = fuzz_str(data, size), *argv[66];
  int argc = 0;
  struct values v, w, d;
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  bool help = false;
  kcr_err rc;

  argv[argc++] = prog;
  for(size_t i = 0; i < size && argc < 65;) {
    argv[argc++] = text + i;
    i += strlen(text + i) + 1;
  }
  argv[argc] = NULL;

  defaults(&d);
  defaults(&v);
  rc = parse(&v, argc, argv, &help, &ei);
  FUZZ_CHECK(rc == KCR_OK || rc == KCR_EINVAL);
  if(rc == KCR_EINVAL)
    FUZZ_CHECK(ei.message && !strchr(ei.message, '\n'));
  /* whatever the outcome, only values a kind accepts were stored */
  FUZZ_CHECK(v.workers >= 1 && v.workers <= 64);
  FUZZ_CHECK(v.colour >= 0 && v.colour <= 2);
  FUZZ_CHECK(v.wait_ms >= (uint64_t)WAIT_MIN && v.wait_ms <= (uint64_t)WAIT_MAX);
  FUZZ_CHECK(string_ok(v.name, argc, argv));
  FUZZ_CHECK(string_ok(v.co.kubeconfig, argc, argv));
  FUZZ_CHECK(string_ok(v.mo.lease_name, argc, argv));
  FUZZ_CHECK(!v.args[0] || from_argv(v.args[0], argc, argv));
  FUZZ_CHECK(!v.args[1] || (v.args[0] && from_argv(v.args[1], argc, argv)));
  if(rc == KCR_OK && !help) {
    /* the same command line again: the same values */
    defaults(&w);
    help = false;
    kcr_errinfo_cleanup(&ei);
    FUZZ_CHECK(parse(&w, argc, argv, &help, &ei) == KCR_OK);
    FUZZ_CHECK(w.workers == v.workers && w.colour == v.colour && w.wait_ms == v.wait_ms &&
               w.flag == v.flag && w.name == v.name && w.args[0] == v.args[0] &&
               w.args[1] == v.args[1]);
  }
  /* a flag the input never names keeps its default */
  if(!mentioned(data, size, "workers"))
    FUZZ_CHECK(v.workers == d.workers);
  if(!mentioned(data, size, "wait"))
    FUZZ_CHECK(v.wait_ms == d.wait_ms);
  if(!mentioned(data, size, "colour"))
    FUZZ_CHECK(v.colour == d.colour);
  if(!mentioned(data, size, "name"))
    FUZZ_CHECK(v.name == NULL);
  kcr_errinfo_cleanup(&ei);
  free(text);
  return 0;
}
