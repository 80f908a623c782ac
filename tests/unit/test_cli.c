/* kcr/cli.h: flags from a table - each kind, both spellings, one clear
 * message for every bad command line, the generated usage, and the
 * standard sets with controller-runtime's names. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "kcr/cli.h"
#include "kcr/log.h"
#include "tabort.h"
#include "tfail.h"

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

/* A program's own flags, as ebdman run has them. */
struct prog {
  const char *ns;
  int workers;
  bool watch;
  uint64_t resync_ms, delay_ms;
  int color;
  struct kcr_flag flags[6];
  struct kcr_cli cli;
};

static const char *const colors[] = {"red", "green", "blue", NULL};

static void prog_init(struct prog *p)
{
  memset(p, 0, sizeof(*p));
  p->workers = 4;
  p->resync_ms = 10ull * 3600 * 1000;
  p->delay_ms = 2000;
  p->flags[0] = (struct kcr_flag){"namespace", KCR_FLAG_STRING, &p->ns,
                                  "watch one namespace (default: all)", .arg = "NS"};
  p->flags[1] =
      (struct kcr_flag){"workers", KCR_FLAG_INT, &p->workers, "concurrent reconciles",
                        .min = 1,  .max = 256};
  p->flags[2] = (struct kcr_flag){"watch", KCR_FLAG_BOOL, &p->watch, "keep watching"};
  p->flags[3] = (struct kcr_flag){"resync", KCR_FLAG_DURATION, &p->resync_ms,
                                  "re-check everything this often; 0 disables"};
  p->flags[4] = (struct kcr_flag){"delay", KCR_FLAG_DURATION, &p->delay_ms,
                                  "how long to wait", .max = 24ll * 3600 * 1000};
  p->flags[5] = (struct kcr_flag){"color", KCR_FLAG_CHOICE, &p->color, "the color",
                                  .choices = colors};
  p->cli = (struct kcr_cli){.prog = "prog", .flags = p->flags, .nflags = NELEM(p->flags)};
}

/* Parses the NULL-terminated arguments (after a program name); returns the
 * error code and leaves the message in *msg (owned by the test, or NULL). */
static kcr_err parse(const struct kcr_cli *cli, bool *help, char **msg, ...)
{
  char *argv[32] = {"prog"};
  int argc = 1;
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  va_list ap;
  kcr_err rc;

  va_start(ap, msg);
  while((argv[argc] = va_arg(ap, char *)))
    argc++;
  va_end(ap);
  rc = kcr_cli_parse(cli, argc, argv, help, &ei);
  *msg = ei.message;
  ei.message = NULL;
  kcr_errinfo_cleanup(&ei);
  return rc;
}

/* Expects the arguments to fail with exactly this message. */
#define expect_error(cli, want, ...)                                                     \
  do {                                                                                   \
    bool help_;                                                                          \
    char *msg_;                                                                          \
    assert_int_equal(KCR_EINVAL, parse(cli, &help_, &msg_, __VA_ARGS__, NULL));          \
    assert_non_null(msg_);                                                               \
    assert_string_equal(want, msg_);                                                     \
    free(msg_);                                                                          \
  } while(0)

#define expect_ok(cli, ...)                                                              \
  do {                                                                                   \
    bool help_;                                                                          \
    char *msg_;                                                                          \
    kcr_err rc_ = parse(cli, &help_, &msg_, __VA_ARGS__, NULL);                          \
    if(rc_)                                                                              \
      fail_msg("%s", msg_ ? msg_ : "(no message)");                                      \
    assert_false(help_);                                                                 \
  } while(0)

static void parses_each_kind_with_a_separate_value(void **state)
{
  struct prog p;
  prog_init(&p);
  expect_ok(&p.cli, "--namespace", "ns1", "--workers", "8", "--resync", "30m", "--delay",
            "500ms", "--color", "blue");
  assert_string_equal("ns1", p.ns);
  assert_int_equal(8, p.workers);
  assert_int_equal(30 * 60 * 1000, p.resync_ms);
  assert_int_equal(500, p.delay_ms);
  assert_int_equal(2, p.color);
}

static void parses_each_kind_with_an_equals_sign(void **state)
{
  struct prog p;
  prog_init(&p);
  expect_ok(&p.cli, "--namespace=ns1", "--workers=256", "--watch", "--resync=0",
            "--delay=24h", "--color=green");
  assert_string_equal("ns1", p.ns);
  assert_int_equal(256, p.workers);
  assert_true(p.watch);
  assert_int_equal(0, p.resync_ms);
  assert_int_equal(24ull * 3600 * 1000, p.delay_ms);
  assert_int_equal(1, p.color);
  /* The value is everything after the first '=', '=' included. */
  expect_ok(&p.cli, "--namespace==a=b");
  assert_string_equal("=a=b", p.ns);
  /* A value that starts with "--" is given with '='. */
  expect_ok(&p.cli, "--namespace=--odd");
  assert_string_equal("--odd", p.ns);
}

static void bool_flags_take_no_separate_value(void **state)
{
  struct prog p;
  prog_init(&p);
  expect_ok(&p.cli, "--watch");
  assert_true(p.watch);
  expect_ok(&p.cli, "--watch=false");
  assert_false(p.watch);
  static const char *const yes[] = {"1", "t", "T", "true", "TRUE", "True"};
  static const char *const no[] = {"0", "f", "F", "false", "FALSE", "False"};
  char arg[32];
  for(size_t i = 0; i < NELEM(yes); i++) {
    snprintf(arg, sizeof(arg), "--watch=%s", yes[i]);
    expect_ok(&p.cli, arg);
    assert_true(p.watch);
    snprintf(arg, sizeof(arg), "--watch=%s", no[i]);
    expect_ok(&p.cli, arg);
    assert_false(p.watch);
  }
  /* As in Go: `--watch false` is the flag and a stray argument. */
  expect_error(&p.cli, "unexpected argument \"false\" (see 'prog --help')", "--watch",
               "false");
  expect_error(&p.cli, "--watch: \"yes\" is not valid: want true or false",
               "--watch=yes");
  expect_error(&p.cli, "--watch: \"\" is not valid: want true or false", "--watch=");
}

static void bad_values_name_the_flag_the_value_and_what_is_wanted(void **state)
{
  struct prog p;
  prog_init(&p);
  expect_error(&p.cli, "--workers: \"0\" is not valid: want a number from 1 to 256",
               "--workers", "0");
  expect_error(&p.cli, "--workers: \"257\" is not valid: want a number from 1 to 256",
               "--workers=257");
  expect_error(&p.cli, "--workers: \"zero\" is not valid: want a number from 1 to 256",
               "--workers", "zero");
  expect_error(&p.cli, "--workers: \"4x\" is not valid: want a number from 1 to 256",
               "--workers", "4x");
  expect_error(&p.cli, "--workers: \" 4\" is not valid: want a number from 1 to 256",
               "--workers", " 4");
  expect_error(&p.cli,
               "--workers: \"99999999999999999999\" is not valid: want a number from 1 "
               "to 256",
               "--workers", "99999999999999999999");
  expect_error(&p.cli,
               "--resync: \"forever\" is not valid: want a duration such as 90s, 30m or "
               "1h30m",
               "--resync", "forever");
  expect_error(&p.cli,
               "--delay: \"25h\" is not valid: want a duration from 0 to 24h, such as "
               "500ms or 90s",
               "--delay=25h");
  expect_error(&p.cli, "--color: \"pink\" is not valid: want red, green or blue",
               "--color", "pink");
  expect_error(&p.cli, "--namespace: \"\" is not valid: want a non-empty value",
               "--namespace=");
  expect_error(&p.cli, "--namespace: \"\" is not valid: want a non-empty value",
               "--namespace", "");
  /* A bad value leaves the default as it was. */
  assert_int_equal(4, p.workers);
  assert_int_equal(10ull * 3600 * 1000, p.resync_ms);
  assert_int_equal(2000, p.delay_ms);
  assert_int_equal(0, p.color);
  assert_null(p.ns);
}

/* What the user typed is quoted escaped, so the message stays one line
 * and prints no control character (tests/fuzz/fuzz_cli found a newline in
 * an argument giving a message of two lines). */
static void messages_escape_what_was_typed(void **state)
{
  struct prog p;
  (void)state;
  prog_init(&p);
  expect_error(&p.cli, "--workers: \"1\\n\" is not valid: want a number from 1 to 256",
               "--workers", "1\n");
  expect_error(&p.cli, "--namespace: \"\" is not valid: want a non-empty value",
               "--namespace=");
  expect_error(&p.cli, "--color: \"\\\"red\\\"\" is not valid: want red, green or blue",
               "--color=\"red\"");
  expect_error(&p.cli, "unexpected argument \"a\\x1b[2Jb\\\\\" (see 'prog --help')", "--",
               "a\x1b[2Jb\\");
  expect_error(&p.cli, "unknown flag --bo\\r\\tgus (see 'prog --help')", "--bo\r\tgus=1");
}

static void ranges_are_inclusive_and_open_ended_ranges_read_at_least(void **state)
{
  int n = 0;
  uint64_t ms = 0;
  struct kcr_flag flags[] = {
      {"n", KCR_FLAG_INT, &n, "any", .min = -5, .max = INT64_MAX},
      {"ms", KCR_FLAG_DURATION, &ms, "at least 1ms", .min = 1, .max = INT64_MAX},
  };
  struct kcr_cli cli = {.prog = "prog", .flags = flags, .nflags = NELEM(flags)};
  expect_ok(&cli, "--n", "-5");
  assert_int_equal(-5, n);
  expect_ok(&cli, "--n=+2147483647");
  assert_int_equal(2147483647, n);
  expect_error(&cli, "--n: \"-6\" is not valid: want a number of at least -5", "--n=-6");
  expect_error(&cli, "--n: \"2147483648\" is not valid: want a number of at least -5",
               "--n=2147483648");
  expect_ok(&cli, "--ms=1ns"); /* rounded up to 1 ms */
  assert_int_equal(1, ms);
  expect_error(&cli,
               "--ms: \"0\" is not valid: want a duration of at least 1ms, such as 90s, "
               "30m or 1h30m",
               "--ms=0");
}

static void durations_read_as_go_with_bare_seconds(void **state)
{
  struct prog p;
  prog_init(&p);
  expect_ok(&p.cli, "--resync", "1h30m");
  assert_int_equal(90 * 60 * 1000, p.resync_ms);
  expect_ok(&p.cli, "--resync", "10"); /* a bare number is seconds */
  assert_int_equal(10000, p.resync_ms);
  expect_ok(&p.cli, "--resync", "1.5s");
  assert_int_equal(1500, p.resync_ms);
  expect_ok(&p.cli, "--delay", "0");
  assert_int_equal(0, p.delay_ms);
  expect_error(&p.cli,
               "--resync: \"-1s\" is not valid: want a duration such as 90s, 30m or "
               "1h30m",
               "--resync=-1s");
}

static void unknown_flags_and_stray_arguments_are_refused(void **state)
{
  struct prog p;
  prog_init(&p);
  expect_error(&p.cli, "unknown flag --bogus (see 'prog --help')", "--bogus");
  expect_error(&p.cli, "unknown flag --bogus (see 'prog --help')", "--bogus=1");
  expect_error(&p.cli, "unknown flag -x (see 'prog --help')", "-x");
  expect_error(&p.cli, "unknown flag -q (see 'prog --help')", "-q");
  expect_error(&p.cli, "unknown flag -w (see 'prog --help')", "-w"); /* two start so */
  expect_error(&p.cli, "unexpected argument \"extra\" (see 'prog --help')", "extra");
  expect_error(&p.cli, "unexpected argument \"-\" (see 'prog --help')", "-");
  /* A typo or an old name gets a suggestion. */
  expect_error(&p.cli, "unknown flag --worker (did you mean --workers?)", "--worker=3");
  expect_error(&p.cli, "unknown flag --namepsace (did you mean --namespace?)",
               "--namepsace", "x");
  expect_error(&p.cli, "unknown flag -workers (did you mean --workers?)", "-workers",
               "3");
  expect_error(&p.cli, "unknown flag -n (did you mean --namespace?)", "-n", "x");
  struct kcr_cli log = {.prog = "prog", .log = true};
  struct kcr_manager_opts mo = {0};
  struct kcr_cli mgr = {.prog = "prog", .manager = &mo};
  expect_error(&log, "unknown flag --log-level (did you mean --zap-log-level?)",
               "--log-level", "debug");
  expect_error(
      &mgr, "unknown flag --lease-duration (did you mean --leader-elect-lease-duration?)",
      "--lease-duration=4s");
  expect_error(&mgr, "unknown flag --lease-namespace (see 'prog --help')",
               "--lease-namespace=x");
}

static void a_missing_value_is_named(void **state)
{
  struct prog p;
  prog_init(&p);
  expect_error(&p.cli, "--namespace: missing value: want a non-empty value",
               "--namespace");
  expect_error(&p.cli, "--workers: missing value: want a number from 1 to 256",
               "--workers", "--watch");
  expect_error(&p.cli, "--color: missing value: want red, green or blue", "--color",
               "--");
  assert_false(p.watch);
  assert_int_equal(4, p.workers);
}

static void the_last_of_a_repeated_flag_wins(void **state)
{
  struct prog p;
  prog_init(&p);
  expect_ok(&p.cli, "--workers", "2", "--namespace=a", "--workers=3", "--namespace", "b",
            "--watch", "--watch=false");
  assert_int_equal(3, p.workers);
  assert_string_equal("b", p.ns);
  assert_false(p.watch);
}

/* A list flag (KCR_FLAG_STRINGS) collects each value given, in order, up
 * to max; one more is refused naming the limit. The usage shows the values
 * given before the parse (none here). */
static void a_list_flag_collects_every_value_up_to_max(void **state)
{
  const char *ns[3 + 1] = {0};
  struct kcr_flag f[] = {{"namespace", KCR_FLAG_STRINGS, ns, "a namespace; repeat it",
                          .arg = "NS", .max = 3}};
  struct kcr_cli cli = {.prog = "prog", .flags = f, .nflags = 1};

  expect_ok(&cli, "--namespace", "a", "--namespace=b");
  assert_string_equal("a", ns[0]);
  assert_string_equal("b", ns[1]);
  assert_null(ns[2]);
  expect_ok(&cli, "--namespace", "c");
  assert_string_equal("c", ns[2]);
  assert_null(ns[3]);
  memset(ns, 0, sizeof(ns));
  expect_error(&cli,
               "--namespace: \"d\" is not valid: want a non-empty value, given at most 3 "
               "times",
               "--namespace", "a", "--namespace", "b", "--namespace", "c", "--namespace",
               "d");
  assert_null(ns[3]);
  memset(ns, 0, sizeof(ns));
  expect_error(&cli,
               "--namespace: \"\" is not valid: want a non-empty value, given at most 3 "
               "times",
               "--namespace=");
  assert_null(ns[0]);
}

static void positional_arguments_go_to_argv_out_in_order(void **state)
{
  const char *args[2] = {"configmaps", NULL};
  struct prog p;
  prog_init(&p);
  p.cli.argv_out = args;
  p.cli.max_args = 2;
  expect_ok(&p.cli, "secrets", "--workers=2", "x");
  assert_string_equal("secrets", args[0]);
  assert_string_equal("x", args[1]);
  assert_int_equal(2, p.workers);
  expect_error(&p.cli, "unexpected argument \"z\" (see 'prog --help')", "x", "y", "z");
  /* `--` ends the flags. */
  expect_ok(&p.cli, "--workers=5", "--", "--workers=6", "-h");
  assert_int_equal(5, p.workers);
  assert_string_equal("--workers=6", args[0]);
  assert_string_equal("-h", args[1]);
}

static void help_stops_the_parse(void **state)
{
  struct prog p;
  bool help;
  char *msg;
  prog_init(&p);
  assert_int_equal(KCR_OK, parse(&p.cli, &help, &msg, "--workers=2", "-h", NULL));
  assert_true(help);
  assert_int_equal(2, p.workers);
  assert_int_equal(KCR_OK, parse(&p.cli, &help, &msg, "--help", "--bogus", NULL));
  assert_true(help);
  assert_int_equal(KCR_OK, parse(&p.cli, &help, &msg, NULL));
  assert_false(help);
  /* In order, as Go: an error before the help is reported. */
  expect_error(&p.cli, "unknown flag --bogus (see 'prog --help')", "--bogus", "--help");
}

/* noinline: gcc 12 at -O3 takes the returned text for a pointer to the
 * local that open_memstream() filled in (-Wdangling-pointer). */
__attribute__((noinline)) static char *usage_of(const struct kcr_cli *cli)
{
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  assert_non_null(f);
  assert_int_equal(KCR_OK, kcr_cli_usage(cli, f));
  fclose(f);
  return text;
}

/* The line of the usage that starts with "  --name" (its first line). */
static const char *line_of(const char *usage, const char *flag)
{
  char want[128];
  snprintf(want, sizeof(want), "\n  %s", flag);
  const char *at = strstr(usage, want);
  if(!at)
    fail_msg("the usage has no line for %s:\n%s", flag, usage);
  return at + 1;
}

static void usage_lists_every_flag_with_its_default(void **state)
{
  struct prog p;
  struct kcr_config_opts co = {0};
  struct kcr_manager_opts mo = {.name = "prog", .metrics_addr = ":8080"};
  prog_init(&p);
  p.cli.about = "Does things.";
  p.cli.args = "[RESOURCE]";
  p.cli.config = &co;
  p.cli.manager = &mo;
  p.cli.log = true;
  kcr_log_set_level(KCR_LOG_INFO);
  char *u = usage_of(&p.cli);
  static const char *const flags[] = {"--kubeconfig PATH",
                                      "--metrics-bind-address ADDR",
                                      "--metrics-secure ",
                                      "--metrics-cert-path DIR",
                                      "--metrics-cert-name NAME",
                                      "--metrics-cert-key NAME",
                                      "--webhook-bind-address ADDR",
                                      "--webhook-cert-path DIR",
                                      "--webhook-cert-name NAME",
                                      "--webhook-cert-key NAME",
                                      "--health-probe-bind-address ADDR",
                                      "--leader-elect ",
                                      "--leader-election-id NAME",
                                      "--leader-election-namespace NS",
                                      "--leader-elect-lease-duration DURATION",
                                      "--leader-elect-renew-deadline DURATION",
                                      "--leader-elect-retry-period DURATION",
                                      "--ring NAME",
                                      "--ring-identity NAME",
                                      "--transport auto|curl",
                                      "--namespace NS",
                                      "--workers N",
                                      "--watch ",
                                      "--resync DURATION",
                                      "--delay DURATION",
                                      "--color red|green|blue",
                                      "--zap-log-level debug|info|warn|error",
                                      "--zap-encoder console|json",
                                      "-h, --help"};
  if(strncmp(u, "usage: prog [flags] [RESOURCE]\n\nDoes things.\n\nflags:\n", 53))
    fail_msg("the usage starts:\n%s", u);
  const char *prev = u;
  for(size_t i = 0; i < NELEM(flags); i++) {
    const char *at = line_of(u, flags[i]);
    if(at < prev)
      fail_msg("%s is out of order:\n%s", flags[i], u);
    prev = at;
  }
  /* Defaults: the value's, or the def text; none for zero, false, NULL. */
  assert_non_null(strstr(u, "(default: :8080)"));
  assert_non_null(strstr(u, "(default: 4)"));
  assert_non_null(strstr(u, "(default: 10h)"));
  assert_non_null(strstr(u, "(default: 2s)"));
  assert_non_null(strstr(u, "(default: red)"));
  assert_non_null(strstr(u, "(default: prog-leader)"));
  assert_non_null(strstr(u, "(default: 15s)"));
  assert_non_null(strstr(u, "(default: info)"));
  assert_non_null(strstr(u, "(default: console)"));
  assert_non_null(strstr(u, "(default: tls.crt)"));
  assert_non_null(strstr(u, "(default: tls.key)"));
  assert_non_null(strstr(u, "(default: auto)"));
  const char *w = line_of(u, "--watch ");
  assert_null(memmem(w, strcspn(w, "\n"), "(default:", 9));
  /* Every line fits in 80 columns. */
  for(const char *l = u; *l; l += strcspn(l, "\n") + (l[strcspn(l, "\n")] != '\0'))
    if(strcspn(l, "\n") > 80)
      fail_msg("a line over 80 columns: %.*s", (int)strcspn(l, "\n"), l);
  free(u);
}

static void the_manager_set_fills_the_opts(void **state)
{
  struct kcr_config_opts co = {0};
  struct kcr_manager_opts mo = {.name = "prog", .metrics_addr = ":8080"};
  struct kcr_cli cli = {.prog = "prog", .config = &co, .manager = &mo};
  expect_ok(&cli, "--kubeconfig", "/k", "--metrics-bind-address=0",
            "--health-probe-bind-address", ":9", "--leader-elect", "--leader-election-id",
            "lid", "--leader-election-namespace=lns", "--leader-elect-lease-duration=4s",
            "--leader-elect-renew-deadline", "3s", "--leader-elect-retry-period=500ms");
  assert_string_equal("/k", co.kubeconfig);
  assert_string_equal("0", mo.metrics_addr);
  assert_string_equal(":9", mo.health_addr);
  assert_true(mo.leader_elect);
  assert_string_equal("lid", mo.lease_name);
  assert_string_equal("lns", mo.lease_namespace);
  assert_int_equal(4000, mo.lease_duration_ms);
  assert_int_equal(3000, mo.renew_deadline_ms);
  assert_int_equal(500, mo.retry_period_ms);
  assert_false(mo.metrics_secure);
  expect_ok(&cli, "--metrics-secure", "--metrics-cert-path", "/certs",
            "--metrics-cert-name=c.pem", "--metrics-cert-key", "k.pem");
  assert_true(mo.metrics_secure);
  assert_string_equal("/certs", mo.metrics_cert_dir);
  assert_string_equal("c.pem", mo.metrics_cert_name);
  assert_string_equal("k.pem", mo.metrics_key_name);
  expect_ok(&cli, "--webhook-bind-address", ":9443", "--webhook-cert-path=/w",
            "--webhook-cert-name", "w.crt", "--webhook-cert-key=w.key");
  assert_string_equal(":9443", mo.webhook_addr);
  assert_string_equal("/w", mo.webhook_cert_dir);
  assert_string_equal("w.crt", mo.webhook_cert_name);
  assert_string_equal("w.key", mo.webhook_key_name);
  expect_ok(&cli, "--metrics-secure=false");
  assert_false(mo.metrics_secure);
  assert_int_equal(KCR_TRANSPORT_AUTO, mo.client.transport);
  expect_ok(&cli, "--transport=curl");
  assert_int_equal(KCR_TRANSPORT_CURL, mo.client.transport);
  expect_ok(&cli, "--transport", "auto");
  assert_int_equal(KCR_TRANSPORT_AUTO, mo.client.transport);
  expect_error(&cli, "--transport: \"own\" is not valid: want auto or curl",
               "--transport=own");
  expect_error(&cli,
               "--leader-elect-lease-duration: \"0\" is not valid: want a duration of at "
               "least 1ms, such as 90s, 30m or 1h30m",
               "--leader-elect-lease-duration=0");
  /* Without the sets their flags are unknown. */
  struct kcr_cli bare = {.prog = "prog"};
  expect_error(&bare, "unknown flag --kubeconfig (see 'prog --help')", "--kubeconfig=x");
}

/* The first byte of a log record written at this point. */
static char log_record_start(void)
{
  char path[] = "/tmp/test_cli_logXXXXXX", c = 0;
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  kcr_log_set_fd(fd);
  KCR_LOG(KCR_LOG_ERROR, "probe");
  kcr_log_set_fd(2);
  assert_int_equal(1, pread(fd, &c, 1, 0));
  close(fd);
  unlink(path);
  return c;
}

static void the_log_set_applies_after_a_good_parse_only(void **state)
{
  struct kcr_cli cli = {.prog = "prog", .log = true};
  kcr_log_set_level(KCR_LOG_INFO);
  kcr_log_set_format(KCR_LOG_KV);
  expect_error(&cli,
               "--zap-log-level: \"loud\" is not valid: want debug, info, warn or error",
               "--zap-log-level", "loud");
  expect_error(&cli, "--zap-encoder: \"text\" is not valid: want console or json",
               "--zap-encoder=text");
  expect_error(&cli, "unknown flag --x (see 'prog --help')", "--zap-log-level=debug",
               "--zap-encoder=json", "--x");
  assert_int_equal(KCR_LOG_INFO, kcr_log_get_level());
  assert_int_equal('t', log_record_start()); /* "ts=..." */
  expect_ok(&cli, "--zap-log-level=warn", "--zap-encoder", "json");
  assert_int_equal(KCR_LOG_WARN, kcr_log_get_level());
  assert_int_equal('{', log_record_start());
  expect_ok(&cli, "--zap-encoder=console");
  assert_int_equal(KCR_LOG_WARN, kcr_log_get_level()); /* absent: untouched */
  assert_int_equal('t', log_record_start());
  kcr_log_set_level(KCR_LOG_INFO);
}

static void a_bad_table_is_refused(void **state)
{
  int n = 0;
  struct kcr_config_opts co = {0};
  struct kcr_flag twice[] = {{"kubeconfig", KCR_FLAG_INT, &n, "clash"}};
  struct kcr_flag novalue[] = {{"n", KCR_FLAG_INT, NULL, "no value"}};
  struct kcr_flag nochoices[] = {{"n", KCR_FLAG_CHOICE, &n, "no choices"}};
  struct kcr_flag dashed[] = {{"--n", KCR_FLAG_INT, &n, "dashes"}};
  struct kcr_flag help[] = {{"help", KCR_FLAG_BOOL, &(bool){0}, "help"}};
  struct kcr_flag range[] = {{"n", KCR_FLAG_INT, &n, "range", .min = 2, .max = 1}};
  const char *list[2] = {0};
  struct kcr_flag nomax[] = {{"n", KCR_FLAG_STRINGS, list, "no max"}};
  const struct {
    struct kcr_cli cli;
    const char *want;
  } cases[] = {
      {{.prog = "p", .flags = twice, .nflags = 1, .config = &co},
       "flag table: --kubeconfig is there twice"},
      {{.prog = "p", .flags = novalue, .nflags = 1},
       "flag table: --n: no value, bad kind, no choices, min > max, or a list without "
       "max"},
      {{.prog = "p", .flags = nochoices, .nflags = 1},
       "flag table: --n: no value, bad kind, no choices, min > max, or a list without "
       "max"},
      {{.prog = "p", .flags = range, .nflags = 1},
       "flag table: --n: no value, bad kind, no choices, min > max, or a list without "
       "max"},
      {{.prog = "p", .flags = nomax, .nflags = 1},
       "flag table: --n: no value, bad kind, no choices, min > max, or a list without "
       "max"},
      {{.prog = "p", .flags = dashed, .nflags = 1}, "flag table: bad name \"--n\""},
      {{.prog = "p", .flags = help, .nflags = 1}, "flag table: bad name \"help\""},
      {{.prog = NULL}, "flag table: no program name"},
  };
  for(size_t i = 0; i < NELEM(cases); i++)
    expect_error(&cases[i].cli, cases[i].want, "--n=1");
}

/* kcr_cli_usage walks a table kcr_cli_parse would accept: in debug builds a
 * bad one aborts (KCR_ASSERT) instead of reading a choice list that is not
 * there. */
static void usage_of_a_flag_without_choices(void *ud)
{
  int n = 0;
  struct kcr_flag nochoices[] = {{"n", KCR_FLAG_CHOICE, &n, "no choices"}};
  FILE *f = fopen("/dev/null", "w");
  kcr_cli_usage(&(struct kcr_cli){.prog = "p", .flags = nochoices, .nflags = 1}, f);
}

static void broken_invariants_abort_debug_builds(void **state)
{
  TABORT_SKIP_IN_RELEASE();
  assert_true(tabort(usage_of_a_flag_without_choices, NULL));
}

static bool bad_parse(void *ud)
{
  struct prog *p = ud;
  bool help;
  char *msg;
  kcr_err rc = parse(&p->cli, &help, &msg, "--workers", "0", NULL);
  bool ok = rc == KCR_EINVAL && (!msg || strstr(msg, "--workers")) && p->workers == 4;
  free(msg);
  return ok;
}

static void out_of_memory_still_fails_the_parse(void **state)
{
  struct prog p;
  prog_init(&p);
  tfail_torture("kcr_cli_parse", bad_parse, &p);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(parses_each_kind_with_a_separate_value),
      cmocka_unit_test(parses_each_kind_with_an_equals_sign),
      cmocka_unit_test(bool_flags_take_no_separate_value),
      cmocka_unit_test(bad_values_name_the_flag_the_value_and_what_is_wanted),
      cmocka_unit_test(ranges_are_inclusive_and_open_ended_ranges_read_at_least),
      cmocka_unit_test(durations_read_as_go_with_bare_seconds),
      cmocka_unit_test(unknown_flags_and_stray_arguments_are_refused),
      cmocka_unit_test(a_missing_value_is_named),
      cmocka_unit_test(the_last_of_a_repeated_flag_wins),
      cmocka_unit_test(a_list_flag_collects_every_value_up_to_max),
      cmocka_unit_test(positional_arguments_go_to_argv_out_in_order),
      cmocka_unit_test(help_stops_the_parse),
      cmocka_unit_test(usage_lists_every_flag_with_its_default),
      cmocka_unit_test(the_manager_set_fills_the_opts),
      cmocka_unit_test(the_log_set_applies_after_a_good_parse_only),
      cmocka_unit_test(a_bad_table_is_refused),
      cmocka_unit_test(broken_invariants_abort_debug_builds),
      cmocka_unit_test(messages_escape_what_was_typed),
      cmocka_unit_test(out_of_memory_still_fails_the_parse),
  };
  tfail_init();
  return cmocka_run_group_tests(tests, NULL, NULL);
}
