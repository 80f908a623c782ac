/* kcr/cli.h - command-line flags from a table, with the names
 * controller-runtime users know.
 *
 * A program lists its flags in a table - name, kind, where the value goes,
 * help - and asks for the standard sets it wants; one call parses argv,
 * prints a generated usage for --help and reports a bad command line in one
 * line naming the flag, the value and what is wanted:
 *
 *   struct kcr_config_opts co = {0};
 *   struct kcr_manager_opts mo = {.name = "hello", .metrics_addr = ":8080",
 *                                 .health_addr = ":8081"};
 *   const char *ns = NULL;
 *   int workers = 2;
 *   const struct kcr_flag flags[] = {
 *       {"namespace", KCR_FLAG_STRING, &ns, "watch one namespace (default: all)",
 *        .arg = "NS"},
 *       {"workers", KCR_FLAG_INT, &workers, "concurrent reconciles", .min = 1, .max =
 * 64},
 *   };
 *   kcr_cli_parse_or_exit(&(struct kcr_cli){.prog = "hello", .flags = flags,
 *                         .nflags = 2, .config = &co, .manager = &mo, .log = true},
 *                         argc, argv);
 *
 *   $ hello --workers 0
 *   hello: --workers: "0" is not valid: want a number from 1 to 64
 *
 * Syntax, as Go's flag package with GNU's two dashes: `--name value` or
 * `--name=value`; a bool flag is `--name` or `--name=true|false` (also 1, 0,
 * t, f, T, F, TRUE, FALSE, True, False), never `--name false`. A flag given
 * twice: the last one wins. `--` ends the flags. `-h` and `--help` ask for
 * the usage. Flags and positional arguments may come in any order. A
 * separate value that starts with "--" is taken for a forgotten value
 * (`--namespace --leader-elect`): give it as `--name=--value`.
 *
 * The standard sets (one name per setting, no aliases):
 *   config   --kubeconfig PATH                     kcr_config_opts.kubeconfig
 *   manager  --metrics-bind-address ADDR           .metrics_addr ("0": none)
 *            --metrics-secure                      .metrics_secure
 *            --metrics-cert-path DIR               .metrics_cert_dir
 *            --metrics-cert-name NAME              .metrics_cert_name
 *            --metrics-cert-key NAME               .metrics_key_name
 *            --webhook-bind-address ADDR           .webhook_addr ("0": none)
 *            --webhook-cert-path DIR               .webhook_cert_dir
 *            --webhook-cert-name NAME              .webhook_cert_name
 *            --webhook-cert-key NAME               .webhook_key_name
 *            --health-probe-bind-address ADDR      .health_addr
 *            --leader-elect                        .leader_elect
 *            --leader-election-id NAME             .lease_name
 *            --leader-election-namespace NS        .lease_namespace
 *            --leader-elect-lease-duration DUR     .lease_duration_ms
 *            --leader-elect-renew-deadline DUR     .renew_deadline_ms
 *            --leader-elect-retry-period DUR       .retry_period_ms
 *   log      --zap-log-level debug|info|warn|error kcr_log_set_level
 *            --zap-encoder console|json            kcr_log_set_format (console:
 *                                                  key=value lines, KCR_LOG_KV)
 * controller-runtime's names (kubebuilder's main.go and its zap options;
 * the lease timings are Kubernetes component-base's). Values already in the
 * structs are the defaults the usage shows.
 *
 * Strings stored are pointers into argv (never ""), valid as long as argv.
 * Thread safety: the parse writes the values and the log settings; call it
 * from one thread, before the program starts others. */
#ifndef KCR_CLI_H
#define KCR_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "api.h"
#include "config.h"
#include "err.h"
#include "manager.h"

#ifdef __cplusplus
extern "C" {
#endif

enum kcr_flag_kind {
  KCR_FLAG_STRING = 1, /* const char *: a non-empty value */
  KCR_FLAG_BOOL,       /* bool */
  KCR_FLAG_INT,        /* int: a decimal number within [min, max] */
  KCR_FLAG_DURATION,   /* uint64_t milliseconds (kcr_duration_parse: "90s", "1h30m",
                          a bare number is seconds) within [min, max] ms */
  KCR_FLAG_CHOICE,     /* int: the index of the value in choices */
  KCR_FLAG_STRINGS     /* const char *[max + 1]: a non-empty value, given up to
                          max times (--namespace a --namespace b); each is
                          added after the last non-NULL entry, so the array
                          starts all NULL (no default) and stays
                          NULL-terminated */
};

struct kcr_flag {
  const char *name; /* without the dashes: "workers" */
  enum kcr_flag_kind kind;
  void *value;                /* where the value goes (the type the kind names); what
                                 it holds before the parse is the default shown */
  const char *help;           /* one sentence, no default: the usage adds it */
  const char *arg;            /* the value's name in the usage ("NS"); default by kind:
                                 VALUE, N, DURATION, the choices joined by '|' */
  int64_t min, max;           /* KCR_FLAG_INT, KCR_FLAG_DURATION (ms): the accepted
                                 range, inclusive; both 0: any int / any duration;
                                 max INT64_MAX: no upper bound. KCR_FLAG_STRINGS:
                                 max is how many values the array holds (>= 1),
                                 min 0 */
  const char *const *choices; /* KCR_FLAG_CHOICE: the values, NULL-terminated */
  const char *def;            /* the default as the usage shows it, in place of the
                                 value's (for a default computed later); NULL: the
                                 value's, omitted when zero, false or NULL */
};

struct kcr_cli {
  const char *prog;      /* names the program in the usage and messages: "ebdman run" */
  const char *about;     /* what it does, printed under the usage line; may be NULL */
  const char *args;      /* positional arguments in the usage line ("[RESOURCE]") */
  const char **argv_out; /* where positional arguments go, in order; NULL: none are
                            accepted */
  size_t max_args;       /* how many argv_out holds */
  const struct kcr_flag *flags; /* the program's own flags */
  size_t nflags;
  struct kcr_config_opts *config;   /* non-NULL: the config set (--kubeconfig) */
  struct kcr_manager_opts *manager; /* non-NULL: the manager set */
  bool log;                         /* the log set */
};

/* Parses argv[1..argc) (argv[0] is the program) into the flags' values and
 * cli->argv_out, and on success applies the log set's values
 * (kcr_log_set_level/format; untouched when those flags are absent).
 * *help is set when -h or --help came (the parse stops there, nothing is
 * applied): print kcr_cli_usage then. No output.
 * Errors: KCR_EINVAL - a bad command line, ei->message in one line: a bad
 * value (`--workers: "0" is not valid: want a number from 1 to 256`), a
 * missing value (`--namespace: missing value: want a non-empty value`), an
 * unknown flag (`unknown flag --log-level (did you mean --zap-log-level?)`),
 * an argument too many (`unexpected argument "x" (see 'PROG --help')`), or
 * a bad table (a name twice, no value pointer, no choices): values before
 * the bad one may have been stored. ei may be NULL; its message is NULL when
 * memory ran out. */
KCR_API kcr_err kcr_cli_parse(const struct kcr_cli *cli, int argc, char *const *argv,
                              bool *help, struct kcr_errinfo *ei);

/* Writes the usage to f: "usage: PROG [flags] ARGS", about, then every flag
 * (the standard sets, the program's, the log set, -h/--help) with its
 * value's name, help and default, wrapped at 80 columns. The table must be
 * one kcr_cli_parse accepts (debug builds of libkcr abort on a bad one).
 * Errors: KCR_EIO (writing failed). */
KCR_API kcr_err kcr_cli_usage(const struct kcr_cli *cli, FILE *f);

/* kcr_cli_parse for main(), as Go's flag.Parse: after --help prints the
 * usage on stdout and exits 0; after a bad command line prints
 * "PROG: MESSAGE" on stderr and exits 2; otherwise returns. Call it before
 * the program starts threads or allocates what it would have to free. */
KCR_API void kcr_cli_parse_or_exit(const struct kcr_cli *cli, int argc,
                                   char *const *argv);

#ifdef __cplusplus
}
#endif

#endif
