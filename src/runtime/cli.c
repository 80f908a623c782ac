/* DESIGN: command-line flags from a table (kcr/cli.h).
 *
 * What it is. The one parser of libkcr's programs (ebdman, vfm-sim, the
 * examples): each program describes its flags in a table of struct kcr_flag
 * - name, kind, value pointer, help - and asks for the standard sets
 * (config, manager, log), so every program spells the same setting the
 * same way, with controller-runtime's names.
 *
 * Shape. A parse or a usage first builds a `struct table` on the stack: the
 * standard flags as kcr_flag entries pointing into the caller's
 * kcr_config_opts / kcr_manager_opts (head), the program's own table, and
 * the log set (tail), whose values are two ints in the table applied to the
 * logger only once the whole command line parsed. Everything after that -
 * lookup, value parsing, messages, usage - walks that one list, so a
 * standard flag behaves exactly like a program's. Nothing is allocated but
 * the error message.
 *
 * Invariants. A flag's value is written only with a value that passed its
 * kind's check (a bad value leaves it as it was). Every message names the
 * flag, the value as given, and what is wanted - the same "want" text the
 * usage's defaults and ranges are made from. */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "kcr/cli.h"
#include "kcr/log.h"
#include "kcr/time.h"

#include "core/assert-int.h"

#define WRAP      80  /* usage columns */
#define COL_MAX   36  /* help starts at most here; longer flags put it on the next line */
#define TYPED_MAX 512 /* what the user typed, escaped, in a message: cut beyond */

/* Indexes are the log level and format values (enum kcr_log_level,
 * enum kcr_log_format: console is KCR_LOG_KV). */
static const char *const log_levels[] = {"debug", "info", "warn", "error", NULL};
static const char *const log_encoders[] = {"console", "json", NULL};
static const char *const transports[] = {"auto", "curl", NULL}; /* enum kcr_transport */

struct table {
  struct kcr_flag head[20]; /* config and manager sets */
  size_t nhead;
  const struct kcr_flag *own; /* the program's */
  size_t nown;
  struct kcr_flag tail[2]; /* log set */
  size_t ntail;
  int level, encoder;   /* the log set's values; -1: not given */
  int transport;        /* --transport's index in transports; -1: not given */
  char lease_name[128]; /* --leader-election-id's default */
};

static size_t table_len(const struct table *t) { return t->nhead + t->nown + t->ntail; }

static const struct kcr_flag *table_at(const struct table *t, size_t i)
{
  KCR_ASSERT(i < table_len(t));
  if(i < t->nhead)
    return &t->head[i];
  i -= t->nhead;
  if(i < t->nown)
    return &t->own[i];
  return &t->tail[i - t->nown];
}

static void table_init(struct table *t, const struct kcr_cli *cli)
{
  struct kcr_config_opts *co = cli->config;
  struct kcr_manager_opts *mo = cli->manager;
  size_t n = 0;

  memset(t, 0, sizeof(*t));
  t->transport = -1;
  if(co)
    t->head[n++] = (struct kcr_flag){
        "kubeconfig",
        KCR_FLAG_STRING,
        &co->kubeconfig,
        "the kubeconfig file",
        .arg = "PATH",
        .def = co->kubeconfig ? NULL : "$KUBECONFIG, ~/.kube/config, then in-cluster"};
  if(mo) {
    snprintf(t->lease_name, sizeof(t->lease_name), "%s-leader",
             mo->name ? mo->name : "kcr");
    t->head[n++] = (struct kcr_flag){
        "metrics-bind-address", KCR_FLAG_STRING, &mo->metrics_addr,
        "the address the metrics endpoint binds to; 0 disables it", .arg = "ADDR"};
    t->head[n++] = (struct kcr_flag){
        "metrics-secure", KCR_FLAG_BOOL, &mo->metrics_secure,
        "serve metrics over HTTPS to authorised bearer tokens only (TokenReview and "
        "SubjectAccessReview); --metrics-secure=false serves plain HTTP to anyone"};
    t->head[n++] = (struct kcr_flag){
        "metrics-cert-path",
        KCR_FLAG_STRING,
        &mo->metrics_cert_dir,
        "the directory that holds the metrics server's certificate and key",
        .arg = "DIR",
        .def = mo->metrics_cert_dir ? NULL : "none: a self-signed certificate"};
    t->head[n++] = (struct kcr_flag){
        "metrics-cert-name",    KCR_FLAG_STRING,
        &mo->metrics_cert_name, "the certificate's file name in --metrics-cert-path",
        .arg = "NAME",          .def = mo->metrics_cert_name ? NULL : "tls.crt"};
    t->head[n++] = (struct kcr_flag){
        "metrics-cert-key",    KCR_FLAG_STRING,
        &mo->metrics_key_name, "the key's file name in --metrics-cert-path",
        .arg = "NAME",         .def = mo->metrics_key_name ? NULL : "tls.key"};
    t->head[n++] = (struct kcr_flag){
        "webhook-bind-address", KCR_FLAG_STRING,
        &mo->webhook_addr,      "the address the webhook server binds to; 0 disables it",
        .arg = "ADDR",          .def = mo->webhook_addr ? NULL : "0"};
    t->head[n++] = (struct kcr_flag){
        "webhook-cert-path", KCR_FLAG_STRING, &mo->webhook_cert_dir,
        "the directory that holds the webhook server's certificate and key, read again "
        "when they change (when not given: /tmp/k8s-webhook-server/serving-certs)",
        .arg = "DIR"};
    t->head[n++] = (struct kcr_flag){
        "webhook-cert-name",    KCR_FLAG_STRING,
        &mo->webhook_cert_name, "the certificate's file name in --webhook-cert-path",
        .arg = "NAME",          .def = mo->webhook_cert_name ? NULL : "tls.crt"};
    t->head[n++] = (struct kcr_flag){
        "webhook-cert-key",    KCR_FLAG_STRING,
        &mo->webhook_key_name, "the key's file name in --webhook-cert-path",
        .arg = "NAME",         .def = mo->webhook_key_name ? NULL : "tls.key"};
    t->head[n++] = (struct kcr_flag){
        "health-probe-bind-address", KCR_FLAG_STRING, &mo->health_addr,
        "the address the /healthz and /readyz endpoint binds to; 0 disables it",
        .arg = "ADDR"};
    t->head[n++] = (struct kcr_flag){
        "leader-elect", KCR_FLAG_BOOL, &mo->leader_elect,
        "elect a leader through a Lease: only one replica reconciles at a time "
        "(with --ring: the leader writes the webhook certificates, every replica "
        "reconciles)"};
    t->head[n++] = (struct kcr_flag){
        "leader-election-id", KCR_FLAG_STRING,
        &mo->lease_name,      "the name of the Lease",
        .arg = "NAME",        .def = mo->lease_name ? NULL : t->lease_name};
    t->head[n++] = (struct kcr_flag){
        "leader-election-namespace",
        KCR_FLAG_STRING,
        &mo->lease_namespace,
        "the namespace of the Lease",
        .arg = "NS",
        .def = mo->lease_namespace
                   ? NULL
                   : "the namespace of the current context or, in a pod, the pod's; else "
                     "\"default\""};
    t->head[n++] = (struct kcr_flag){
        "leader-elect-lease-duration",
        KCR_FLAG_DURATION,
        &mo->lease_duration_ms,
        "how long a standby waits after the leader's last renewal before it takes over",
        .min = 1,
        .max = INT64_MAX,
        .def = mo->lease_duration_ms ? NULL : "15s"};
    t->head[n++] = (struct kcr_flag){
        "leader-elect-renew-deadline",
        KCR_FLAG_DURATION,
        &mo->renew_deadline_ms,
        "how long the leader keeps trying to renew before it gives up leading (and "
        "writing)",
        .min = 1,
        .max = INT64_MAX,
        .def = mo->renew_deadline_ms ? NULL : "10s"};
    t->head[n++] =
        (struct kcr_flag){"leader-elect-retry-period",
                          KCR_FLAG_DURATION,
                          &mo->retry_period_ms,
                          "the time between two attempts to acquire or renew the Lease",
                          .min = 1,
                          .max = INT64_MAX,
                          .def = mo->retry_period_ms ? NULL : "2s"};
    t->head[n++] = (struct kcr_flag){
        "ring", KCR_FLAG_STRING, &mo->ring,
        "every replica reconciles, each its share of the objects, as a member of "
        "this ring (Leases <ring>-<identity> in --leader-election-namespace, the "
        "durations of --leader-elect-*); with --leader-elect a leader is also "
        "elected, for the cluster's singletons alone (the webhook certificates)",
        .arg = "NAME"};
    t->head[n++] = (struct kcr_flag){
        "ring-identity",
        KCR_FLAG_STRING,
        &mo->identity,
        "this replica's name in the ring: best a StatefulSet pod's, stable across "
        "restarts",
        .arg = "NAME",
        .def = mo->identity ? NULL : "the host name (in a pod, its name)"};
    t->head[n++] = (struct kcr_flag){
        "transport",
        KCR_FLAG_CHOICE,
        &t->transport,
        "what carries requests and watches: auto (libkcr's own exchanges where they "
        "apply, curl for the rest) or curl (every request a curl transfer); the "
        "environment variable KCR_TRANSPORT decides over it",
        .choices = transports,
        .def = transports[mo->client.transport == KCR_TRANSPORT_CURL]};
  }
  KCR_ASSERT(n <= sizeof(t->head) / sizeof(t->head[0]));
  t->nhead = n;
  t->own = cli->flags;
  t->nown = cli->flags ? cli->nflags : 0;
  t->level = t->encoder = -1;
  if(cli->log) {
    int lvl = (int)kcr_log_get_level();
    t->tail[0] = (struct kcr_flag){"zap-log-level",
                                   KCR_FLAG_CHOICE,
                                   &t->level,
                                   "the least severe level logged",
                                   .choices = log_levels,
                                   .def = lvl >= 0 && lvl < 4 ? log_levels[lvl] : NULL};
    t->tail[1] = (struct kcr_flag){"zap-encoder",
                                   KCR_FLAG_CHOICE,
                                   &t->encoder,
                                   "the log format: console is key=value lines",
                                   .choices = log_encoders,
                                   .def = "console"};
    t->ntail = 2;
  }
}

/* A mistake in a flag of the table, not in the command line. */
static kcr_err check_flags(const struct table *t, struct kcr_errinfo *ei)
{
  for(size_t i = 0; i < table_len(t); i++) {
    const struct kcr_flag *f = table_at(t, i);
    if(!f->name || !*f->name || f->name[0] == '-' || strchr(f->name, '=') ||
       !strcmp(f->name, "help"))
      return kcr_errinfo_set(ei, KCR_EINVAL, "flag table: bad name \"%s\"",
                             f->name ? f->name : "(null)");
    if(!f->value || f->kind < KCR_FLAG_STRING || f->kind > KCR_FLAG_STRINGS ||
       (f->kind == KCR_FLAG_CHOICE && (!f->choices || !f->choices[0])) ||
       (f->kind == KCR_FLAG_STRINGS && (f->max < 1 || f->min)) || f->min > f->max)
      return kcr_errinfo_set(ei, KCR_EINVAL,
                             "flag table: --%s: no value, bad kind, no choices, "
                             "min > max, or a list without max",
                             f->name);
    for(size_t j = 0; j < i; j++)
      if(!strcmp(table_at(t, j)->name, f->name))
        return kcr_errinfo_set(ei, KCR_EINVAL, "flag table: --%s is there twice",
                               f->name);
  }
  return KCR_OK;
}

/* A mistake in the program's table, not in the command line. */
static kcr_err check_table(const struct kcr_cli *cli, const struct table *t,
                           struct kcr_errinfo *ei)
{
  if(!cli->prog || !*cli->prog)
    return kcr_errinfo_set(ei, KCR_EINVAL, "flag table: no program name");
  if(cli->nflags && !cli->flags)
    return kcr_errinfo_set(ei, KCR_EINVAL, "flag table: nflags without flags");
  return check_flags(t, ei);
}

/* ---- values ---- */

/* Writes ms as the shortest exact duration kcr_duration_parse reads back:
 * "24h", "1m30s", "1s500ms", "0". */
static void fmt_duration(char *out, size_t n, uint64_t ms)
{
  static const struct {
    uint64_t ms;
    const char *unit;
  } units[] = {{3600000, "h"}, {60000, "m"}, {1000, "s"}, {1, "ms"}};
  size_t len = 0;

  out[0] = '\0';
  for(size_t i = 0; i < 4 && len < n; i++) {
    if(ms / units[i].ms)
      len += (size_t)snprintf(out + len, n - len, "%llu%s",
                              (unsigned long long)(ms / units[i].ms), units[i].unit);
    ms %= units[i].ms;
  }
  if(!out[0])
    snprintf(out, n, "0");
}

static bool is_range(const struct kcr_flag *f) { return f->min || f->max; }

/* What the flag wants, as the end of "want ...". */
static void want(const struct kcr_flag *f, char *out, size_t n)
{
  char lo[48], hi[48];
  size_t len = 0;

  switch(f->kind) {
  case KCR_FLAG_STRING: snprintf(out, n, "a non-empty value"); break;
  case KCR_FLAG_STRINGS:
    snprintf(out, n, "a non-empty value, given at most %lld times", (long long)f->max);
    break;
  case KCR_FLAG_BOOL: snprintf(out, n, "true or false"); break;
  case KCR_FLAG_INT:
    if(!is_range(f))
      snprintf(out, n, "a whole number");
    else if(f->max >= INT_MAX)
      snprintf(out, n, "a number of at least %lld", (long long)f->min);
    else
      snprintf(out, n, "a number from %lld to %lld", (long long)f->min,
               (long long)f->max);
    break;
  case KCR_FLAG_DURATION:
    fmt_duration(lo, sizeof(lo), f->min > 0 ? (uint64_t)f->min : 0);
    fmt_duration(hi, sizeof(hi), (uint64_t)f->max);
    if(!is_range(f))
      snprintf(out, n, "a duration such as 90s, 30m or 1h30m");
    else if(f->max == INT64_MAX)
      snprintf(out, n, "a duration of at least %s, such as 90s, 30m or 1h30m", lo);
    else
      snprintf(out, n, "a duration from %s to %s, such as 500ms or 90s", lo, hi);
    break;
  case KCR_FLAG_CHOICE:
    out[0] = '\0';
    for(size_t i = 0; f->choices[i] && len < n; i++)
      len += (size_t)snprintf(out + len, n - len, "%s%s",
                              !i                  ? ""
                              : f->choices[i + 1] ? ", "
                                                  : " or ",
                              f->choices[i]);
    break;
  }
}

/* s[0..len) as the user typed it, for a message of one line: a backslash,
 * a double quote and every control byte escaped as Go's %q writes them
 * (\\, \", \n, \r, \t, else \xHH); other bytes as they are. Cut with
 * "..." when it does not fit out[n] (n >= 8). Returns out. */
static const char *typed(const char *s, size_t len, char *out, size_t n)
{
  size_t o = 0;

  for(size_t i = 0; i < len; i++) {
    unsigned char c = (unsigned char)s[i];
    char e[5] = {(char)c, 0};
    size_t k;
    if(c == '\\' || c == '"')
      e[0] = '\\', e[1] = (char)c, e[2] = 0;
    else if(c == '\n' || c == '\r' || c == '\t')
      e[0] = '\\', e[1] = c == '\n' ? 'n' : c == '\r' ? 'r' : 't', e[2] = 0;
    else if(c < 0x20 || c == 0x7f)
      snprintf(e, sizeof(e), "\\x%02x", c);
    k = strlen(e);
    if(o + k + 4 > n) { /* room for "..." and the NUL */
      memcpy(out + o, "...", 4);
      return out;
    }
    memcpy(out + o, e, k);
    o += k;
  }
  out[o] = '\0';
  return out;
}

static bool parse_bool(const char *v, bool *out)
{
  static const char *const yes[] = {"1", "t", "T", "true", "TRUE", "True"};
  static const char *const no[] = {"0", "f", "F", "false", "FALSE", "False"};
  for(size_t i = 0; i < 6; i++) {
    if(!strcmp(v, yes[i]) || !strcmp(v, no[i])) {
      *out = !strcmp(v, yes[i]);
      return true;
    }
  }
  return false;
}

/* Parses v for f and stores it; false (nothing stored) when v is not valid. */
static bool store(const struct kcr_flag *f, const char *v)
{
  int64_t lo = is_range(f) ? f->min : f->kind == KCR_FLAG_INT ? INT_MIN : 0;
  int64_t hi = is_range(f) ? f->max : f->kind == KCR_FLAG_INT ? INT_MAX : INT64_MAX;
  bool b;
  uint64_t ms;
  long long x;
  char *end;

  switch(f->kind) {
  case KCR_FLAG_STRING:
    if(!*v)
      return false;
    *(const char **)f->value = v;
    return true;
  case KCR_FLAG_STRINGS: {
    const char **a = f->value;
    int64_t i = 0;
    while(i < f->max && a[i])
      i++;
    if(!*v || i == f->max)
      return false;
    a[i] = v;
    return true;
  }
  case KCR_FLAG_BOOL:
    if(!parse_bool(v, &b))
      return false;
    *(bool *)f->value = b;
    return true;
  case KCR_FLAG_INT:
    if(!(*v >= '0' && *v <= '9') &&
       !((*v == '-' || *v == '+') && v[1] >= '0' && v[1] <= '9'))
      return false;
    errno = 0;
    x = strtoll(v, &end, 10);
    if(*end || errno || x < lo || x > hi || x < INT_MIN || x > INT_MAX)
      return false;
    *(int *)f->value = (int)x;
    return true;
  case KCR_FLAG_DURATION:
    if(kcr_duration_parse(v, &ms) || ms > (uint64_t)hi || (lo > 0 && ms < (uint64_t)lo))
      return false;
    *(uint64_t *)f->value = ms;
    return true;
  case KCR_FLAG_CHOICE:
    for(int i = 0; f->choices[i]; i++) {
      if(!strcmp(v, f->choices[i])) {
        *(int *)f->value = i;
        return true;
      }
    }
    return false;
  }
  KCR_ASSERT(!"a kind check_table let through"); /* no value stored unchecked */
  return false;
}

/* ---- the command line ---- */

/* Levenshtein distance of a[0..la) and b, or SIZE_MAX for long names. */
static size_t distance(const char *a, size_t la, const char *b)
{
  size_t lb = strlen(b), row[64], prev, tmp;
  if(la >= 64 || lb >= 64)
    return SIZE_MAX;
  for(size_t j = 0; j <= lb; j++)
    row[j] = j;
  for(size_t i = 1; i <= la; i++) {
    prev = row[0];
    row[0] = i;
    for(size_t j = 1; j <= lb; j++) {
      tmp = row[j];
      row[j] = a[i - 1] == b[j - 1] ? prev : 1 + (prev < row[j] ? prev : row[j]);
      if(row[j - 1] + 1 < row[j])
        row[j] = row[j - 1] + 1;
      prev = tmp;
    }
  }
  return row[lb];
}

/* The flag an unknown name probably meant: the only one that starts with a
 * single letter (-n: --namespace), one whose name ends with it (--log-level:
 * --zap-log-level), else the nearest within two edits (--worker). */
static const struct kcr_flag *suggest(const struct table *t, const char *name, size_t len)
{
  const struct kcr_flag *best = NULL;
  size_t best_d = 3;
  char n[64];

  if(len >= sizeof(n))
    return NULL;
  memcpy(n, name, len);
  n[len] = '\0';
  if(len == 1) {
    for(size_t i = 0; i < table_len(t); i++) {
      if(table_at(t, i)->name[0] != n[0])
        continue;
      if(best)
        return NULL;
      best = table_at(t, i);
    }
    return best;
  }
  for(size_t i = 0; i < table_len(t) && len >= 3; i++) {
    const struct kcr_flag *f = table_at(t, i);
    size_t fl = strlen(f->name);
    if(fl > len && f->name[fl - len - 1] == '-' && !strcmp(f->name + fl - len, n))
      return f; /* a suffix: --log-level for --zap-log-level */
  }
  for(size_t i = 0; i < table_len(t); i++) {
    size_t d = distance(n, len, table_at(t, i)->name);
    if(d < best_d) {
      best = table_at(t, i);
      best_d = d;
    }
  }
  return best;
}

static const struct kcr_flag *find(const struct table *t, const char *name, size_t len)
{
  for(size_t i = 0; i < table_len(t); i++) {
    const struct kcr_flag *f = table_at(t, i);
    if(strlen(f->name) == len && !memcmp(f->name, name, len))
      return f;
  }
  return NULL;
}

static kcr_err unknown(const struct kcr_cli *cli, const struct table *t, const char *arg,
                       struct kcr_errinfo *ei)
{
  size_t len = strcspn(arg, "="), dashes = arg[1] == '-' ? 2 : 1;
  const struct kcr_flag *s = suggest(t, arg + dashes, len - dashes);
  char a[TYPED_MAX];

  typed(arg, len, a, sizeof(a));
  if(s)
    return kcr_errinfo_set(ei, KCR_EINVAL, "unknown flag %s (did you mean --%s?)", a,
                           s->name);
  return kcr_errinfo_set(ei, KCR_EINVAL, "unknown flag %s (see '%s --help')", a,
                         cli->prog);
}

/* One flag argument argv[*i] ("--name" or "--name=value"); may take the
 * next argument as its value. */
static kcr_err parse_flag(const struct kcr_cli *cli, const struct table *t, int argc,
                          char *const *argv, int *i, struct kcr_errinfo *ei)
{
  const char *arg = argv[*i], *name = arg + 2, *eq = strchr(name, '='), *v;
  const struct kcr_flag *f = find(t, name, eq ? (size_t)(eq - name) : strlen(name));
  char w[256], tv[TYPED_MAX];

  if(arg[1] != '-' || !f)
    return unknown(cli, t, arg, ei);
  want(f, w, sizeof(w));
  if(eq)
    v = eq + 1;
  else if(f->kind == KCR_FLAG_BOOL)
    v = "true";
  else if(*i + 1 < argc && strncmp(argv[*i + 1], "--", 2))
    v = argv[++*i];
  else
    return kcr_errinfo_set(ei, KCR_EINVAL, "--%s: missing value: want %s", f->name, w);
  if(!store(f, v))
    return kcr_errinfo_set(ei, KCR_EINVAL, "--%s: \"%s\" is not valid: want %s", f->name,
                           typed(v, strlen(v), tv, sizeof(tv)), w);
  return KCR_OK;
}

kcr_err kcr_cli_parse(const struct kcr_cli *cli, int argc, char *const *argv, bool *help,
                      struct kcr_errinfo *ei)
{
  struct table t;
  size_t npos = 0;
  bool flags_done = false;
  kcr_err rc;

  if(!help)
    return kcr_errinfo_set(ei, KCR_EINVAL, "kcr_cli_parse: help is required");
  *help = false;
  table_init(&t, cli);
  if((rc = check_table(cli, &t, ei)))
    return rc;
  for(int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if(!flags_done && !strcmp(a, "--")) {
      flags_done = true;
    } else if(flags_done || a[0] != '-' || !a[1]) {
      char ta[TYPED_MAX];
      if(!cli->argv_out || npos == cli->max_args)
        return kcr_errinfo_set(ei, KCR_EINVAL,
                               "unexpected argument \"%s\" (see '%s --help')",
                               typed(a, strlen(a), ta, sizeof(ta)), cli->prog);
      cli->argv_out[npos++] = a;
    } else if(!strcmp(a, "-h") || !strcmp(a, "--help")) {
      *help = true;
      return KCR_OK;
    } else if((rc = parse_flag(cli, &t, argc, argv, &i, ei))) {
      return rc;
    }
  }
  if(t.transport >= 0)
    cli->manager->client.transport = (enum kcr_transport)t.transport;
  if(t.level >= 0)
    kcr_log_set_level((enum kcr_log_level)t.level);
  if(t.encoder >= 0)
    kcr_log_set_format(t.encoder ? KCR_LOG_JSON : KCR_LOG_KV);
  return KCR_OK;
}

void kcr_cli_parse_or_exit(const struct kcr_cli *cli, int argc, char *const *argv)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  bool help;
  kcr_err rc = kcr_cli_parse(cli, argc, argv, &help, &ei);

  if(rc) {
    fprintf(stderr, "%s: %s\n", cli->prog ? cli->prog : argv[0],
            ei.message ? ei.message : kcr_strerror(rc));
    kcr_errinfo_cleanup(&ei);
    exit(2);
  }
  if(help)
    exit(kcr_cli_usage(cli, stdout) ? 1 : 0);
}

/* ---- usage ---- */

/* "--name ARG" into out; returns its length. */
static size_t flag_left(const struct kcr_flag *f, char *out, size_t n)
{
  char arg[128];
  size_t len = 0;

  if(f->kind == KCR_FLAG_BOOL) {
    arg[0] = '\0';
  } else if(f->arg) {
    snprintf(arg, sizeof(arg), " %s", f->arg);
  } else if(f->kind == KCR_FLAG_CHOICE) {
    arg[0] = '\0';
    for(size_t i = 0; f->choices[i] && len < sizeof(arg); i++)
      len += (size_t)snprintf(arg + len, sizeof(arg) - len, "%s%s", i ? "|" : " ",
                              f->choices[i]);
  } else {
    snprintf(arg, sizeof(arg), " %s",
             f->kind == KCR_FLAG_INT        ? "N"
             : f->kind == KCR_FLAG_DURATION ? "DURATION"
                                            : "VALUE");
  }
  int w = snprintf(out, n, "--%s%s", f->name, arg);
  return w < 0 ? 0 : (size_t)w < n ? (size_t)w : n - 1;
}

/* The default the usage shows, or "" for none. */
static void flag_default(const struct kcr_flag *f, char *out, size_t n)
{
  out[0] = '\0';
  if(f->def) {
    snprintf(out, n, "%s", f->def);
    return;
  }
  switch(f->kind) {
  case KCR_FLAG_STRING:
    if(*(const char *const *)f->value)
      snprintf(out, n, "%s", *(const char *const *)f->value);
    break;
  case KCR_FLAG_STRINGS: {
    const char *const *a = f->value;
    size_t len = 0;
    for(int64_t i = 0; i < f->max && a[i] && len < n; i++)
      len += (size_t)snprintf(out + len, n - len, "%s%s", i ? "," : "", a[i]);
    break;
  }
  case KCR_FLAG_BOOL:
    if(*(const bool *)f->value)
      snprintf(out, n, "true");
    break;
  case KCR_FLAG_INT:
    if(*(const int *)f->value)
      snprintf(out, n, "%d", *(const int *)f->value);
    break;
  case KCR_FLAG_DURATION:
    if(*(const uint64_t *)f->value)
      fmt_duration(out, n, *(const uint64_t *)f->value);
    break;
  case KCR_FLAG_CHOICE: {
    int i = *(const int *)f->value, nc = 0;
    while(f->choices[nc])
      nc++;
    if(i >= 0 && i < nc)
      snprintf(out, n, "%s", f->choices[i]);
    break;
  }
  }
}

/* Writes text from column col, breaking between words before column WRAP
 * and indenting continuation lines to col; \x1f is a space that does not
 * break. */
static void put_wrapped(FILE *f, const char *text, size_t col)
{
  size_t at = col;
  const char *p = text;

  while(*p) {
    size_t word = strcspn(p, " ");
    if(at > col && at + 1 + word > WRAP) {
      fprintf(f, "\n%*s", (int)col, "");
      at = col;
    } else if(at > col) {
      fputc(' ', f);
      at++;
    }
    for(size_t i = 0; i < word; i++)
      fputc(p[i] == '\x1f' ? ' ' : p[i], f);
    at += word;
    p += word;
    while(*p == ' ')
      p++;
  }
  fputc('\n', f);
}

static void put_flag(FILE *f, const char *left, const char *help, const char *def,
                     size_t col)
{
  char text[1024];
  size_t len = strlen(left);

  /* \x1f: a space the wrapping does not break at. */
  snprintf(text, sizeof(text), "%s%s%s%s", help ? help : "", *def ? " (default:\x1f" : "",
           def, *def ? ")" : "");
  fprintf(f, "  %s", left);
  if(2 + len + 2 > col)
    fprintf(f, "\n%*s", (int)col, "");
  else
    fprintf(f, "%*s", (int)(col - 2 - len), "");
  put_wrapped(f, text, col);
}

kcr_err kcr_cli_usage(const struct kcr_cli *cli, FILE *f)
{
  struct table t;
  char left[256], def[256];
  size_t col = sizeof("  -h, --help  ") - 1;

  table_init(&t, cli);
  /* The usage walks a table kcr_cli_parse accepts (names, kinds, choices). */
  KCR_ASSERT(check_flags(&t, NULL) == KCR_OK);
  for(size_t i = 0; i < table_len(&t); i++) {
    size_t w = 2 + flag_left(table_at(&t, i), left, sizeof(left)) + 2;
    if(w > col && w <= COL_MAX)
      col = w;
  }
  fprintf(f, "usage: %s [flags]%s%s\n", cli->prog ? cli->prog : "", cli->args ? " " : "",
          cli->args ? cli->args : "");
  if(cli->about)
    fprintf(f, "\n%s%s", cli->about,
            *cli->about && cli->about[strlen(cli->about) - 1] == '\n' ? "" : "\n");
  fprintf(f, "\nflags:\n");
  for(size_t i = 0; i < table_len(&t); i++) {
    const struct kcr_flag *fl = table_at(&t, i);
    flag_left(fl, left, sizeof(left));
    flag_default(fl, def, sizeof(def));
    put_flag(f, left, fl->help, def, col);
  }
  put_flag(f, "-h, --help", "print this help", "", col);
  return fflush(f) || ferror(f) ? KCR_EIO : KCR_OK;
}
