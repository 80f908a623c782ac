/* DESIGN: exec credential plugins (client.authentication.k8s.io/v1, v1beta1).
 *
 * What it is: kcr__exec_run() starts the kubeconfig's users[].user.exec
 * command, reads its stdout (the ExecCredential JSON), drains its stderr,
 * waits for it and turns the answer into a token and/or a client certificate
 * and key with an optional expiry. Caching is not done here: config.c decides
 * when to call us (one run at a time per config, with no lock held) and what
 * the other callers do meanwhile.
 *
 * Why this shape:
 *  - posix_spawn, not fork: safe in a multi-threaded process (no atfork
 *    hazards, no copied locks). The program is looked up in the controller's
 *    own $PATH first (look_path, like client-go's exec.LookPath), which is
 *    how "not found in PATH" is reported before anything is started.
 *  - The child gets stdin=/dev/null (a controller has no terminal; plugins
 *    that want to prompt fail fast instead of hanging), its own process
 *    group (so a timeout kills grandchildren too), default SIGPIPE and an
 *    empty signal mask whatever the controller set up for itself.
 *  - Pipes are created O_CLOEXEC so plugins started concurrently, or other
 *    children of the process, never inherit each other's pipe ends; the read
 *    ends are non-blocking and multiplexed with poll() against one deadline
 *    (and the caller's cancel flag, checked at least once a second).
 *  - stdout is capped (KCR__EXEC_MAX_STDOUT): past the cap the plugin is
 *    killed. It holds a token, so it never appears in a message or a log; it
 *    grows without realloc (kcr__secret_append) and is wiped before it is
 *    freed, as is every stack chunk it passed through.
 *  - stderr is read and thrown away, only counted: plugins print tokens and
 *    signed URLs there when they fail, and whatever we quote ends up in a
 *    controller's logs. client-go does not quote it either (its error is
 *    "executable X failed with exit code N"; kubectl shows the plugin's
 *    stderr only because the terminal is inherited). Our messages say how
 *    many bytes the plugin wrote there and to run it by hand to see them.
 *  - The spec's argv and env ("NAME=value" from the kubeconfig, often a
 *    secret) are wiped when the spec is freed.
 *
 * Invariants: every started child is reaped before kcr__exec_run returns;
 * every fd opened here is closed on every path; a credential string of the
 * answer holding \u0000 is refused, never cut short at the NUL. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "core/assert-int.h"
#include "core/json-int.h"
#include "kcr/buf.h"
#include "kcr/json.h"
#include "kcr/time.h"
#include "kube/config-int.h"

extern char **environ;

/* How the child ended. */
struct run_outcome {
  struct kcr__blob out; /* stdout, wiped and freed by the caller */
  size_t err_bytes;     /* bytes written on stderr (read and dropped) */
  int status;           /* waitpid status, valid when reaped */
  bool reaped;
  bool timed_out;
  bool too_big;
  bool canceled;
};

void kcr__exec_spec_free(struct kcr__exec_spec *spec)
{
  if(!spec)
    return;
  free(spec->api_version);
  free(spec->command);
  free(spec->path);
  /* args and env values are how kubeconfigs pass secrets to plugins. */
  for(char **p = spec->argv; p && *p; p++)
    kcr__wipe_str(*p);
  free(spec->argv);
  for(char **p = spec->env; p && *p; p++)
    kcr__wipe_str(*p);
  free(spec->env);
  free(spec->install_hint);
  free(spec->where);
  free(spec);
}

void kcr__exec_result_cleanup(struct kcr__exec_result *r)
{
  kcr__wipe_str(r->token);
  kcr__wipe_free(r->cert.ptr, r->cert.len);
  kcr__wipe_free(r->key.ptr, r->key.len);
  memset(r, 0, sizeof(*r));
}

/* --- environment ------------------------------------------------------- */

static bool same_name(const char *a, const char *b)
{
  while(*a && *a != '=' && *a == *b) {
    a++;
    b++;
  }
  return (*a == '=' || !*a) && (*b == '=' || !*b);
}

/* The child's environment: ours, minus names the kubeconfig overrides, plus
 * the kubeconfig's env entries and KUBERNETES_EXEC_INFO (the last, owned,
 * entry: *info). The array itself is owned; other strings are borrowed. */
static kcr_err build_env(const struct kcr__exec_spec *spec, char ***out, char **info)
{
  size_t n = 0, k = 0;
  char **env;
  struct kcr_buf b = KCR_BUF_INIT;

  *out = NULL;
  if(kcr_buf_printf(&b,
                    "KUBERNETES_EXEC_INFO={\"apiVersion\":\"%s\",\"kind\":"
                    "\"ExecCredential\",\"spec\":{\"interactive\":false}}",
                    spec->api_version))
    goto nomem;
  for(char **e = environ; e && *e; e++)
    n++;
  for(char **e = spec->env; e && *e; e++)
    n++;
  env = calloc(n + 2, sizeof(*env));
  if(!env)
    goto nomem;
  for(char **e = environ; e && *e; e++) {
    bool overridden = same_name(*e, "KUBERNETES_EXEC_INFO");
    for(char **s = spec->env; s && *s && !overridden; s++)
      overridden = same_name(*e, *s);
    if(!overridden)
      env[k++] = *e;
  }
  for(char **e = spec->env; e && *e; e++)
    env[k++] = *e;
  *info = env[k++] = kcr_buf_take(&b);
  if(!*info) {
    free(env);
    goto nomem;
  }
  *out = env;
  return KCR_OK;
nomem:
  kcr_buf_cleanup(&b);
  return KCR_ENOMEM;
}

/* --- spawning ---------------------------------------------------------- */

static kcr_err spawn_error(const struct kcr__exec_spec *spec, int err,
                           struct kcr_errinfo *ei)
{
  char eb[128];
  const char *hint = spec->install_hint ? spec->install_hint : "";
  const char *sep = spec->install_hint ? ": " : "";

  if(err == ENOENT && !strchr(spec->command, '/'))
    return kcr_errinfo_set(ei, KCR_ECONFIG, "%s: exec plugin '%s' not found in PATH%s%s",
                           spec->where, spec->command, sep, hint);
  if(err == ENOENT)
    return kcr_errinfo_set(ei, KCR_ECONFIG, "%s: exec plugin '%s' not found (%s)%s%s",
                           spec->where, spec->command, spec->path, sep, hint);
  return kcr_errinfo_set(ei, KCR_ECONFIG, "%s: cannot run exec plugin '%s': %s",
                         spec->where, spec->command, kcr__errstr(err, eb, sizeof(eb)));
}

/* Finds the program like client-go's exec.LookPath: a command with a '/' is
 * taken as is (already resolved against the kubeconfig), else the first
 * executable regular file in $PATH. Checked here rather than left to
 * posix_spawnp so that "not found" is reported the same way everywhere (some
 * spawn implementations, and valgrind, only show it as exit status 127).
 * Returns 0 with *out owned, or an errno value. */
static int look_path(const char *prog, char **out)
{
  const char *path = getenv("PATH");
  struct stat st;
  int err = ENOENT;

  *out = NULL;
  if(strchr(prog, '/')) {
    if(access(prog, X_OK))
      return errno;
    *out = strdup(prog);
    return *out ? 0 : ENOMEM;
  }
  if(!path)
    path = "/usr/local/bin:/usr/bin:/bin";
  for(const char *p = path; *p;) {
    size_t n = strcspn(p, ":");
    if(n) { /* empty entries (the current directory) are not searched */
      char *cand = NULL;
      if(asprintf(&cand, "%.*s/%s", (int)n, p, prog) < 0)
        return ENOMEM;
      if(!stat(cand, &st) && S_ISREG(st.st_mode)) {
        if(!access(cand, X_OK)) {
          *out = cand;
          return 0;
        }
        err = EACCES;
      }
      free(cand);
    }
    p += n + (p[n] == ':');
  }
  return err;
}

static void close_fd(int *fd)
{
  if(*fd >= 0)
    close(*fd);
  *fd = -1;
}

/* Starts the plugin with stdout/stderr on new pipes; *outfd and *errfd are the
 * non-blocking read ends. */
static kcr_err spawn(const struct kcr__exec_spec *spec, pid_t *pid, int *outfd,
                     int *errfd, struct kcr_errinfo *ei)
{
  int po[2] = {-1, -1}, pe[2] = {-1, -1}, err;
  posix_spawn_file_actions_t fa;
  posix_spawnattr_t attr;
  sigset_t none, def;
  char **env = NULL, *info = NULL, *prog = NULL, eb[128];
  bool fa_ok = false, attr_ok = false;
  kcr_err rc = KCR_OK;

  *outfd = *errfd = -1;
  err = look_path(spec->path, &prog);
  if(err)
    return err == ENOMEM ? KCR_ENOMEM : spawn_error(spec, err, ei);
  if(pipe2(po, O_CLOEXEC) || pipe2(pe, O_CLOEXEC)) {
    rc = kcr_errinfo_set(ei, KCR_EIO, "%s: pipe: %s", spec->where,
                         kcr__errstr(errno, eb, sizeof(eb)));
    goto out;
  }
  rc = build_env(spec, &env, &info);
  if(rc)
    goto out;
  err = posix_spawn_file_actions_init(&fa);
  fa_ok = !err;
  if(!err)
    err = posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  if(!err)
    err = posix_spawn_file_actions_adddup2(&fa, po[1], 1);
  if(!err)
    err = posix_spawn_file_actions_adddup2(&fa, pe[1], 2);
  if(!err)
    err = posix_spawnattr_init(&attr);
  attr_ok = fa_ok && !err;
  sigemptyset(&none);
  sigemptyset(&def);
  sigaddset(&def, SIGPIPE);
  if(!err)
    err = posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK |
                                              POSIX_SPAWN_SETSIGDEF);
  if(!err)
    err = posix_spawnattr_setpgroup(&attr, 0);
  if(!err)
    err = posix_spawnattr_setsigmask(&attr, &none);
  if(!err)
    err = posix_spawnattr_setsigdefault(&attr, &def);
  if(err) {
    rc = err == ENOMEM ? KCR_ENOMEM : spawn_error(spec, err, ei);
    goto out;
  }
  err = posix_spawn(pid, prog, &fa, &attr, spec->argv, env);
  if(err) {
    rc = spawn_error(spec, err, ei);
    goto out;
  }
  fcntl(po[0], F_SETFL, fcntl(po[0], F_GETFL) | O_NONBLOCK);
  fcntl(pe[0], F_SETFL, fcntl(pe[0], F_GETFL) | O_NONBLOCK);
  *outfd = po[0];
  *errfd = pe[0];
  po[0] = pe[0] = -1;
out:
  if(fa_ok)
    posix_spawn_file_actions_destroy(&fa);
  if(attr_ok)
    posix_spawnattr_destroy(&attr);
  free(env);
  free(info);
  free(prog);
  close_fd(&po[0]);
  close_fd(&po[1]);
  close_fd(&pe[0]);
  close_fd(&pe[1]);
  return rc;
}

/* --- collecting output ------------------------------------------------- */

/* Reads what is available on *fd; closes it at EOF or on error. With b,
 * keeps up to cap bytes (past it: *over, stop reading; the plugin will be
 * killed); without b, counts the bytes in *count and drops them. */
static kcr_err drain(int *fd, struct kcr_buf *b, size_t cap, bool *over, size_t *count)
{
  char chunk[4096];
  kcr_err rc = KCR_OK;

  KCR_ASSERT(*fd >= 0 && (b ? over && b->len <= cap : count != NULL));
  for(;;) {
    ssize_t r = read(*fd, chunk, sizeof(chunk));
    if(r < 0 && errno == EINTR)
      continue;
    if(r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
      break;
    if(r <= 0) {
      close_fd(fd);
      break;
    }
    if(!b) {
      *count += (size_t)r;
      continue;
    }
    if(b->len + (size_t)r > cap) {
      size_t room = cap - b->len;
      *over = true;
      if(room)
        rc = kcr__secret_append(b, chunk, room);
      break;
    }
    rc = kcr__secret_append(b, chunk, (size_t)r);
    if(rc)
      break;
  }
  kcr__wipe(chunk, sizeof(chunk)); /* it held a token, or a plugin's secrets */
  return rc;
}

/* Waits for the child until the deadline; kills its group when it must. */
static void reap(pid_t pid, uint64_t deadline, struct run_outcome *o)
{
  bool killed = o->timed_out || o->too_big || o->canceled;

  if(killed) {
    kill(-pid, SIGKILL);
    kill(pid, SIGKILL);
  }
  for(;;) {
    pid_t w = waitpid(pid, &o->status, killed ? 0 : WNOHANG);
    if(w == pid) {
      o->reaped = true;
      return;
    }
    if(w < 0 && errno == EINTR)
      continue;
    if(w < 0) /* ECHILD: someone else reaped it (a SIGCHLD handler) */
      return;
    if(kcr_time_mono_ms() >= deadline) {
      o->timed_out = killed = true;
      kill(-pid, SIGKILL);
      kill(pid, SIGKILL);
      continue;
    }
    poll(NULL, 0, 5);
  }
}

/* Runs the plugin to completion (or the deadline, or a cancel) and fills o. */
static kcr_err run(const struct kcr__exec_spec *spec, uint64_t timeout_ms,
                   const atomic_bool *cancel, struct run_outcome *o,
                   struct kcr_errinfo *ei)
{
  struct kcr_buf out = KCR_BUF_INIT;
  uint64_t deadline = kcr_time_mono_ms() + timeout_ms;
  int outfd, errfd;
  pid_t pid;
  kcr_err rc;

  rc = spawn(spec, &pid, &outfd, &errfd, ei);
  if(rc)
    return rc;
  while((outfd >= 0 || errfd >= 0) && !o->too_big && rc == KCR_OK) {
    struct pollfd pf[2] = {{outfd, POLLIN, 0}, {errfd, POLLIN, 0}};
    uint64_t now = kcr_time_mono_ms();
    int n;
    if(cancel && atomic_load(cancel)) {
      o->canceled = true;
      break;
    }
    if(now >= deadline) {
      o->timed_out = true;
      break;
    }
    n = poll(pf, 2, (int)(deadline - now > 1000 ? 1000 : deadline - now));
    if(n < 0 && errno != EINTR)
      break;
    if(n <= 0)
      continue;
    if(outfd >= 0 && pf[0].revents)
      rc = drain(&outfd, &out, KCR__EXEC_MAX_STDOUT, &o->too_big, NULL);
    if(rc == KCR_OK && errfd >= 0 && pf[1].revents)
      rc = drain(&errfd, NULL, 0, NULL, &o->err_bytes);
  }
  if(rc) /* out of memory: stop the plugin, report that */
    o->too_big = true;
  close_fd(&outfd);
  close_fd(&errfd);
  reap(pid, deadline, o);
  /* Every fd opened here is closed; the child is reaped (or was by someone
   * else: ECHILD). */
  KCR_ASSERT(outfd < 0 && errfd < 0);
  o->out.len = out.len;
  o->out.ptr = (unsigned char *)out.ptr; /* moved, with its capacity wiped later */
  if(out.ptr && out.cap > out.len)
    memset(out.ptr + out.len, 0, out.cap - out.len);
  return rc;
}

/* What the message says about stderr, which it never quotes. */
static void stderr_note(size_t n, char *dst, size_t size)
{
  if(!n)
    snprintf(dst, size, "(nothing on stderr)");
  else
    snprintf(dst, size,
             "(it wrote %zu bytes on stderr, not shown because plugins print "
             "credentials there; run the command by hand to see them)",
             n);
}

static kcr_err outcome_error(const struct kcr__exec_spec *spec, uint64_t timeout_ms,
                             const struct run_outcome *o, struct kcr_errinfo *ei)
{
  char note[160];

  stderr_note(o->err_bytes, note, sizeof(note));
  if(o->canceled)
    return kcr_errinfo_set(ei, KCR_ECANCELED,
                           "%s: exec plugin '%s' was killed: the config is being freed",
                           spec->where, spec->command);
  if(o->timed_out)
    return kcr_errinfo_set(ei, KCR_ETIMEDOUT,
                           "%s: exec plugin '%s' did not finish within %llu ms and was "
                           "killed %s",
                           spec->where, spec->command, (unsigned long long)timeout_ms,
                           note);
  if(o->too_big)
    return kcr_errinfo_set(ei, KCR_EPARSE,
                           "%s: exec plugin '%s' printed more than %u bytes on stdout "
                           "and was killed",
                           spec->where, spec->command, KCR__EXEC_MAX_STDOUT);
  if(!o->reaped)
    return kcr_errinfo_set(ei, KCR_EIO,
                           "%s: exec plugin '%s': exit status unknown (reaped elsewhere)",
                           spec->where, spec->command);
  if(WIFSIGNALED(o->status))
    return kcr_errinfo_set(ei, KCR_EIO, "%s: exec plugin '%s' was killed by signal %d %s",
                           spec->where, spec->command, WTERMSIG(o->status), note);
  return kcr_errinfo_set(ei, KCR_EIO, "%s: exec plugin '%s' exited with status %d %s",
                         spec->where, spec->command, WEXITSTATUS(o->status), note);
}

/* --- the ExecCredential answer ----------------------------------------- */

static kcr_err dup_member(const cJSON *status, const char *name, struct kcr__blob *dst)
{
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(status, name);
  size_t n;

  if(!cJSON_IsString(v) || !v->valuestring || !*v->valuestring)
    return KCR_OK;
  n = strlen(v->valuestring);
  dst->ptr = malloc(n + 1);
  if(!dst->ptr)
    return KCR_ENOMEM;
  memcpy(dst->ptr, v->valuestring, n + 1);
  dst->len = n;
  return KCR_OK;
}

static kcr_err parse_status(const struct kcr__exec_spec *spec, const cJSON *status,
                            struct kcr__exec_result *r, struct kcr_errinfo *ei)
{
  const char *who = spec->where, *cmd = spec->command;
  const cJSON *exp = cJSON_GetObjectItemCaseSensitive(status, "expirationTimestamp");
  static const char *const strs[] = {"token", "clientCertificateData", "clientKeyData"};
  struct kcr__blob tok = {0};

  /* A string holding \u0000 cannot be a C string: refused, never cut short
   * (kcr_json_parse keeps it out of cJSON's strings, see kcr/json.h). */
  for(size_t i = 0; i < sizeof(strs) / sizeof(strs[0]); i++)
    if(kcr__json_nul_string(cJSON_GetObjectItemCaseSensitive(status, strs[i])))
      return kcr_errinfo_set(ei, KCR_EPARSE,
                             "%s: exec plugin '%s' returned a status.%s holding \\u0000 "
                             "(a NUL byte, which no credential may hold)",
                             who, cmd, strs[i]);
  if(dup_member(status, "token", &tok) ||
     dup_member(status, "clientCertificateData", &r->cert) ||
     dup_member(status, "clientKeyData", &r->key)) {
    kcr__wipe_free(tok.ptr, tok.len);
    return KCR_ENOMEM;
  }
  r->token = (char *)tok.ptr;
  if(r->cert.ptr && !r->key.ptr)
    return kcr_errinfo_set(ei, KCR_EPARSE,
                           "%s: exec plugin '%s' returned status.clientCertificateData "
                           "without status.clientKeyData",
                           who, cmd);
  if(r->key.ptr && !r->cert.ptr)
    return kcr_errinfo_set(ei, KCR_EPARSE,
                           "%s: exec plugin '%s' returned status.clientKeyData without "
                           "status.clientCertificateData",
                           who, cmd);
  if(!r->token && !r->cert.ptr)
    return kcr_errinfo_set(ei, KCR_EPARSE,
                           "%s: exec plugin '%s' returned neither status.token nor "
                           "status.clientCertificateData/clientKeyData",
                           who, cmd);
  if(exp && !cJSON_IsNull(exp)) {
    if(!cJSON_IsString(exp) || kcr_time_parse(exp->valuestring, &r->expiry))
      return kcr_errinfo_set(ei, KCR_EPARSE,
                             "%s: exec plugin '%s' returned a status.expirationTimestamp "
                             "that is not an RFC 3339 time",
                             who, cmd);
    r->has_expiry = true;
  }
  return KCR_OK;
}

/* Never quotes the text itself: it may hold a token. */
static kcr_err parse_credential(const struct kcr__exec_spec *spec,
                                const unsigned char *text, size_t len,
                                struct kcr__exec_result *r, struct kcr_errinfo *ei)
{
  const char *who = spec->where, *cmd = spec->command;
  struct kcr_errinfo jei = KCR_ERRINFO_INIT;
  const cJSON *status;
  const char *api, *kind;
  cJSON *root;
  kcr_err rc;

  if(!len)
    return kcr_errinfo_set(ei, KCR_EPARSE,
                           "%s: exec plugin '%s' exited successfully but printed nothing "
                           "on stdout (expected an ExecCredential)",
                           who, cmd);
  /* kcr_json_parse tells running out of memory from malformed text; its
   * message gives a position, never the text. */
  rc = kcr_json_parse((const char *)text, len, &root, &jei);
  if(rc == KCR_EPARSE)
    rc = kcr_errinfo_set(ei, KCR_EPARSE,
                         "%s: exec plugin '%s' printed something that is not an "
                         "ExecCredential (%s)",
                         who, cmd, jei.message ? jei.message : "malformed JSON");
  kcr_errinfo_cleanup(&jei);
  if(rc)
    return rc;
  if(!cJSON_IsObject(root)) {
    cJSON_Delete(root);
    return kcr_errinfo_set(ei, KCR_EPARSE,
                           "%s: exec plugin '%s' printed JSON that is not an "
                           "ExecCredential object",
                           who, cmd);
  }
  api = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(root, "apiVersion"));
  kind = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(root, "kind"));
  status = cJSON_GetObjectItemCaseSensitive(root, "status");
  if(!kind || strcmp(kind, "ExecCredential"))
    rc = kcr_errinfo_set(ei, KCR_EPARSE,
                         "%s: exec plugin '%s' returned kind \"%.64s\", expected "
                         "\"ExecCredential\"",
                         who, cmd, kind ? kind : "");
  else if(!api || strcmp(api, spec->api_version))
    rc = kcr_errinfo_set(ei, KCR_EPARSE,
                         "%s: exec plugin '%s' returned apiVersion \"%.64s\", expected "
                         "\"%s\"",
                         who, cmd, api ? api : "", spec->api_version);
  else if(!cJSON_IsObject(status))
    rc = kcr_errinfo_set(ei, KCR_EPARSE,
                         "%s: exec plugin '%s' returned an ExecCredential without status",
                         who, cmd);
  else
    rc = parse_status(spec, status, r, ei);
  /* cJSON frees without wiping; blank the token strings in the tree first. */
  if(cJSON_IsObject(status)) {
    static const char *const secret[] = {"token", "clientKeyData"};
    for(size_t i = 0; i < 2; i++) {
      cJSON *v = cJSON_GetObjectItemCaseSensitive(status, secret[i]);
      if((cJSON_IsString(v) || cJSON_IsRaw(v)) && v->valuestring)
        kcr__wipe(v->valuestring, strlen(v->valuestring));
    }
  }
  cJSON_Delete(root);
  return rc;
}

kcr_err kcr__exec_parse(const struct kcr__exec_spec *spec, const unsigned char *text,
                        size_t len, struct kcr__exec_result *out, struct kcr_errinfo *ei)
{
  kcr_err rc;

  memset(out, 0, sizeof(*out));
  rc = parse_credential(spec, text, len, out, ei);
  if(rc)
    kcr__exec_result_cleanup(out);
  return rc;
}

kcr_err kcr__exec_run(const struct kcr__exec_spec *spec, uint64_t timeout_ms,
                      const atomic_bool *cancel, struct kcr__exec_result *out,
                      struct kcr_errinfo *ei)
{
  struct run_outcome o;
  kcr_err rc;

  /* A spec as load_exec makes it: argv NULL-terminated, argv[0] the command. */
  KCR_ASSERT(spec && spec->api_version && spec->command && spec->path && spec->where &&
             spec->argv && spec->argv[0] && !strcmp(spec->argv[0], spec->command));
  memset(out, 0, sizeof(*out));
  memset(&o, 0, sizeof(o));
  rc = run(spec, timeout_ms, cancel, &o, ei);
  if(rc) /* did not start (ei is set) or out of memory */
    goto out;
  if(o.canceled || o.timed_out || o.too_big || !o.reaped || !WIFEXITED(o.status) ||
     WEXITSTATUS(o.status) != 0) {
    rc = outcome_error(spec, timeout_ms, &o, ei);
    goto out;
  }
  rc = kcr__exec_parse(spec, o.out.ptr, o.out.len, out, ei);
out:
  if(rc)
    kcr__exec_result_cleanup(out);
  kcr__wipe_free(o.out.ptr, o.out.len);
  return rc;
}
