/* DESIGN: where the API server is and how to authenticate (kcr/config.h).
 *
 * What it is: kcr_config_load() picks a source (explicit kubeconfig,
 * $KUBECONFIG, ~/.kube/config, in-cluster service account), and turns it into
 * an immutable kcr_config: server URL, TLS settings, the CA bundle in memory,
 * static credentials and, when the credentials can change, the recipe to get
 * fresh ones (a token file, an exec plugin). kcr_config_dup_credentials() hands
 * out owned snapshots, refreshing the mutable part first.
 *
 * Why this shape:
 *  - Kubeconfig YAML is loaded with libyaml's document API (a node tree) and
 *    only the selected context, its cluster and its user are validated, like
 *    kubectl: a broken entry nobody uses does not stop a controller. Every
 *    error is one KCR_ECONFIG message naming the file and the field path
 *    ("PATH: clusters[0].cluster.server is missing").
 *  - Everything the TLS layer needs is read into memory at load time (CA,
 *    client certificate and key, whether inline base64 or files): the
 *    transport passes blobs to curl; nothing is written to disk; no secret is
 *    ever logged, and secrets are wiped before they are freed: tokens, keys,
 *    the kubeconfig text, exec args and env, plugin output. Buffers that
 *    hold one grow with kcr__secret_append (a realloc would free the old
 *    block unwiped). Out of reach: libyaml's freed temporaries while it
 *    scans (it has no allocator hook; its nodes and buffers are wiped,
 *    wipe_yaml) and the copies libcurl makes of the Authorization header and
 *    the client key (see client.c).
 *  - A CA together with insecure-skip-tls-verify is refused at load time, as
 *    client-go does (transport.TLSConfigFor: "specifying a root certificates
 *    file with the insecure flag is not allowed"), rather than one of them
 *    being silently ignored. tls-server-name must be a host name or an IP
 *    address; the client verifies the server against it (client.c).
 *  - proxy-url takes the schemes client-go's clientcmd takes (http, https,
 *    socks5) and needs a host; a message about it never quotes it (it may
 *    hold a password), and it is wiped when the config is freed. Which
 *    proxy a request uses is the client's decision (proxy.c).
 *  - A string holding a NUL byte (a double-quoted YAML scalar's "\0") cannot
 *    be a C string: it is refused, naming the field, never cut short.
 *  - $KUBECONFIG naming no existing file is an error (no silent fall-back).
 *  - $KUBECONFIG is a colon-separated list, but only the first file that
 *    exists is used: kubectl's merging of several files is not implemented.
 *  - A token file (users[].user.tokenFile, the in-cluster service-account
 *    token) is stat()ed at most once per second (recheck_ms) and re-read when
 *    its device, inode, size or mtime changed, which catches the kubelet's
 *    atomic symlink swap on rotation. If a re-read fails, the last good token
 *    is kept (and a warning logged) rather than failing every request.
 *  - Exec plugin answers are cached until expirationTimestamp (forever
 *    without one) or kcr_config_invalidate(); from EXEC_MARGIN_S before the
 *    expiry they are refreshed in the background while still handed out.
 *  - Precedence when several are set: exec plugin answer > tokenFile > token
 *    for the bearer token; exec plugin certificate > static certificate.
 *    *-data wins over the file form, as in client-go.
 *
 * Invariants and locking: every field above `mu` in struct kcr_config is
 * written only before kcr_config_from_yaml()/kcr_config_load() return (or by
 * the test hooks, before the config is shared). The token-file cache, the
 * exec cache and `generation` are guarded by `mu`, the only lock here.
 * Nothing else is locked under it, and it is never held while a plugin runs
 * (up to exec_timeout_ms, 60 s): a lease renewal with a 10 s deadline must
 * not wait behind a plugin it does not need. The exec protocol:
 *  - Single flight: ex.running says a plugin run is under way (at most one
 *    per config); the thread running it has released mu. A run ends with
 *    mu re-taken, its outcome published (answer installed, or ex.last_rc and
 *    ex.last_msg), ex.runs incremented and `ran` broadcast.
 *  - A caller whose cached answer is still valid gets it at once, also
 *    inside the refresh margin; there it also starts the run on a thread
 *    of its own when none is under way (not again within EXEC_RETRY_MS
 *    after a failed one: the cache is still good). That thread is joined
 *    by the next one's start or by kcr_config_free().
 *  - A caller with nothing valid (no answer yet, expired, or invalidated)
 *    runs the plugin itself; if a run is under way, it waits on `ran` for
 *    that run to end and shares its outcome: the new answer (even one that
 *    already expired), or the run's error, code and message, which every
 *    waiter gets. Nobody hangs: each run ends within exec_timeout_ms.
 *  - kcr_config_invalidate() does not stop a run under way: its answer is
 *    the fresh one.
 *  - kcr_config_free() sets ex.cancel (the plugin is killed within a
 *    second), waits for a run under way to end and joins the background
 *    thread before freeing anything; that thread touches cfg only while it
 *    holds mu.
 * The token file is re-checked under mu: a stat() and, rarely, a read of a
 * local file. */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml.h>

#include "core/assert-int.h"
#include "kcr/base64.h"
#include "kcr/buf.h"
#include "kcr/config.h"
#include "kcr/log.h"
#include "kcr/time.h"
#include "kube/config-int.h"

#define DEFAULT_SA_DIR   "/var/run/secrets/kubernetes.io/serviceaccount"
#define EXEC_MARGIN_S    10   /* refresh exec credentials this early */
#define EXEC_RETRY_MS    2000 /* after a failed background refresh */
#define TOKEN_RECHECK_MS 1000

struct file_id { /* what identifies a version of a token file */
  dev_t dev;
  ino_t ino;
  off_t size;
  struct timespec mtime;
};

struct kcr_config {
  atomic_uint refs;
  char *origin;          /* file path or "in-cluster" */
  char *server;          /* no trailing '/' */
  char *ns;              /* or NULL */
  char *tls_server_name; /* or NULL */
  char *proxy_url;       /* or NULL; may hold a password (wiped) */
  bool insecure;
  struct kcr__blob ca; /* PEM or {NULL, 0} */
  char *token;         /* static bearer token or NULL */
  struct kcr__blob cert, key;
  char *token_file;  /* resolved path or NULL */
  char *token_where; /* "PATH: users[0].user.tokenFile", for messages */
  struct kcr__exec_spec *exec;
  uint64_t exec_timeout_ms;
  uint64_t recheck_ms;
  long margin_s; /* EXEC_MARGIN_S */

  pthread_mutex_t mu;
  pthread_cond_t ran; /* a plugin run ended */
  struct {            /* token file cache, guarded by mu */
    char *token;
    struct file_id id;
    uint64_t next_check_ms;
    bool force;
  } tf;
  struct {                     /* exec plugin cache and run state, guarded by mu */
    struct kcr__exec_result r; /* the last successful answer */
    bool valid;                /* r may be used (not invalidated) */
    bool running;              /* a run is under way, mu released */
    unsigned long runs;        /* runs ended */
    kcr_err last_rc;           /* outcome of the last run that ended */
    char *last_msg;            /* its message if it failed, or NULL */
    uint64_t retry_ms;         /* no background run before (mono ms) */
    int waiters;               /* threads waiting on `ran` */
    pthread_t thread;          /* the last background refresh ... */
    bool joinable;             /* ... not joined yet */
    atomic_bool cancel;        /* kcr_config_free: kill the plugin */
  } ex;
  unsigned long generation; /* guarded by mu */
};

/* Debug builds: whether mu is held, as the functions marked "under mu"
 * require (by some thread - the caller, when the protocol is kept). When it
 * is not, the check takes it, and the assertion it is used in fails. */
#ifndef NDEBUG
static bool mu_held(const kcr_config *cfg)
{
  return pthread_mutex_trylock((pthread_mutex_t *)&cfg->mu) == EBUSY;
}
#endif

/* --- test hooks (config-int.h) ------------------------------------------ */

void kcr__config_set_exec_timeout_ms(kcr_config *cfg, uint64_t ms)
{
  cfg->exec_timeout_ms = ms;
}

void kcr__config_set_token_recheck_ms(kcr_config *cfg, uint64_t ms)
{
  cfg->recheck_ms = ms;
}

void kcr__config_set_exec_margin_s(kcr_config *cfg, long s) { cfg->margin_s = s; }

int kcr__config_exec_waiters(kcr_config *cfg)
{
  int n;
  pthread_mutex_lock(&cfg->mu);
  n = cfg->ex.waiters;
  pthread_mutex_unlock(&cfg->mu);
  return n;
}

void kcr__config_exec_quiesce(kcr_config *cfg)
{
  pthread_mutex_lock(&cfg->mu);
  while(cfg->ex.running)
    pthread_cond_wait(&cfg->ran, &cfg->mu);
  pthread_mutex_unlock(&cfg->mu);
}

static char *xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *xasprintf(const char *fmt, ...)
{
  va_list ap;
  char *s = NULL;

  va_start(ap, fmt);
  if(vasprintf(&s, fmt, ap) < 0)
    s = NULL;
  va_end(ap);
  return s;
}

/* Reads a whole file (at most max bytes) into *out (NUL-terminated, not
 * counted). Returns 0 or an errno value (EFBIG when larger than max). */
static int read_file(const char *path, size_t max, struct kcr__blob *out,
                     struct file_id *id)
{
  struct kcr_buf b = KCR_BUF_INIT;
  struct stat st;
  char chunk[8192];
  int fd, err = 0;

  out->ptr = NULL;
  out->len = 0;
  fd = open(path, O_RDONLY | O_CLOEXEC);
  if(fd < 0)
    return errno;
  if(fstat(fd, &st)) {
    err = errno;
    goto out;
  }
  if(S_ISDIR(st.st_mode)) {
    err = EISDIR;
    goto out;
  }
  if(id)
    *id = (struct file_id){st.st_dev, st.st_ino, st.st_size, st.st_mtim};
  if(kcr_buf_reserve(&b, st.st_size > 0 && (size_t)st.st_size < max ? (size_t)st.st_size
                                                                    : 0)) {
    err = ENOMEM;
    goto out;
  }
  for(;;) {
    ssize_t r = read(fd, chunk, sizeof(chunk));
    if(r < 0 && errno == EINTR)
      continue;
    if(r < 0) {
      err = errno;
      goto out;
    }
    if(r == 0)
      break;
    if(b.len + (size_t)r > max) {
      err = EFBIG;
      goto out;
    }
    if(kcr__secret_append(&b, chunk, (size_t)r)) { /* keys, tokens */
      err = ENOMEM;
      goto out;
    }
  }
  if(kcr_buf_reserve(&b, 0)) {
    err = ENOMEM;
    goto out;
  }
  out->ptr = (unsigned char *)b.ptr;
  out->len = b.len;
  b.ptr = NULL;
out:
  kcr__wipe(chunk, sizeof(chunk));
  if(b.ptr)
    kcr__wipe_free(b.ptr, b.cap);
  close(fd);
  return err;
}

/* Reads a token file: surrounding whitespace trimmed. 0, an errno value,
 * -1 when the file holds nothing but whitespace, or -2 when the token holds
 * a NUL byte (no C string can: refused, not cut short). */
static int read_token(const char *path, char **out, struct file_id *id)
{
  struct kcr__blob b;
  size_t s = 0, e;
  int err = read_file(path, KCR__CONFIG_TOKEN_MAX, &b, id);

  *out = NULL;
  if(err)
    return err;
  e = b.len;
  while(e > s && (unsigned char)b.ptr[e - 1] <= ' ')
    e--;
  while(s < e && (unsigned char)b.ptr[s] <= ' ')
    s++;
  if(s == e || memchr(b.ptr + s, '\0', e - s)) {
    kcr__wipe_free(b.ptr, b.len);
    return s == e ? -1 : -2;
  }
  memmove(b.ptr, b.ptr + s, e - s);
  memset(b.ptr + (e - s), 0, b.len - (e - s));
  *out = (char *)b.ptr;
  return 0;
}

static const char *read_errstr(int err, char *buf, size_t size)
{
  if(err == -1)
    return "file is empty";
  if(err == -2)
    return "the token holds a NUL byte, which no token can hold";
  if(err == EFBIG)
    return "file is too large";
  return kcr__errstr(err, buf, size);
}

/* Resolves p against the directory of origin (kubeconfig semantics). */
static char *resolve_path(const char *origin, const char *p)
{
  const char *slash = origin ? strrchr(origin, '/') : NULL;

  if(p[0] == '/' || !slash)
    return strdup(p);
  return xasprintf("%.*s/%s", (int)(slash - origin), origin, p);
}

/* --- the config object ------------------------------------------------- */

static kcr_config *config_new(const char *origin)
{
  kcr_config *cfg = calloc(1, sizeof(*cfg));

  if(!cfg)
    return NULL;
  cfg->origin = strdup(origin);
  if(!cfg->origin || pthread_mutex_init(&cfg->mu, NULL)) {
    free(cfg->origin);
    free(cfg);
    return NULL;
  }
  if(pthread_cond_init(&cfg->ran, NULL)) {
    pthread_mutex_destroy(&cfg->mu);
    free(cfg->origin);
    free(cfg);
    return NULL;
  }
  atomic_init(&cfg->refs, 1);
  atomic_init(&cfg->ex.cancel, false);
  cfg->exec_timeout_ms = KCR__EXEC_TIMEOUT_MS;
  cfg->recheck_ms = TOKEN_RECHECK_MS;
  cfg->margin_s = EXEC_MARGIN_S;
  cfg->generation = 1;
  return cfg;
}

kcr_config *kcr_config_ref(kcr_config *cfg)
{
  if(cfg) {
    unsigned prev = atomic_fetch_add_explicit(&cfg->refs, 1, memory_order_relaxed);
    KCR_ASSERT(prev > 0 && prev < UINT_MAX); /* a reference held; no wrap */
    (void)prev;
  }
  return cfg;
}

void kcr_config_free(kcr_config *cfg)
{
  unsigned prev;

  if(!cfg)
    return;
  prev = atomic_fetch_sub_explicit(&cfg->refs, 1, memory_order_acq_rel);
  KCR_ASSERT(prev > 0); /* not freed more often than referenced */
  if(prev != 1)
    return;
  /* A background refresh may be under way: stop it and wait for it. */
  atomic_store(&cfg->ex.cancel, true);
  kcr__config_exec_quiesce(cfg);
  /* Nobody waits for a run: a waiter holds a reference. */
  KCR_ASSERT(!cfg->ex.running && cfg->ex.waiters == 0);
  if(cfg->ex.joinable)
    pthread_join(cfg->ex.thread, NULL);
  free(cfg->origin);
  free(cfg->server);
  free(cfg->ns);
  free(cfg->tls_server_name);
  kcr__wipe_str(cfg->proxy_url);
  free(cfg->ca.ptr);
  kcr__wipe_str(cfg->token);
  kcr__wipe_free(cfg->cert.ptr, cfg->cert.len);
  kcr__wipe_free(cfg->key.ptr, cfg->key.len);
  free(cfg->token_file);
  free(cfg->token_where);
  kcr__exec_spec_free(cfg->exec);
  kcr__wipe_str(cfg->tf.token);
  kcr__exec_result_cleanup(&cfg->ex.r);
  free(cfg->ex.last_msg);
  pthread_cond_destroy(&cfg->ran);
  pthread_mutex_destroy(&cfg->mu);
  free(cfg);
}

/* Reads the token file the first time, at load: errors are final here. */
static kcr_err token_file_init(kcr_config *cfg, struct kcr_errinfo *ei)
{
  char eb[128];
  int err = read_token(cfg->token_file, &cfg->tf.token, &cfg->tf.id);

  if(err == ENOMEM)
    return KCR_ENOMEM;
  if(err)
    return kcr_errinfo_set(ei, KCR_ECONFIG, "%s %s: %s", cfg->token_where,
                           cfg->token_file, read_errstr(err, eb, sizeof(eb)));
  cfg->tf.next_check_ms = kcr_time_mono_ms() + cfg->recheck_ms;
  return KCR_OK;
}

/* --- YAML document access ---------------------------------------------- */

struct ydoc {
  yaml_document_t doc;
  const char *origin;
  struct kcr_errinfo *ei;
};

static bool scalar_is(const yaml_node_t *n, const char *s)
{
  size_t len = strlen(s);
  return n && n->type == YAML_SCALAR_NODE && n->data.scalar.length == len &&
         !memcmp(n->data.scalar.value, s, len);
}

/* YAML null: an absent value, "~" or "null" written plainly. */
static bool is_null(const yaml_node_t *n)
{
  return !n || (n->type == YAML_SCALAR_NODE &&
                n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE &&
                (n->data.scalar.length == 0 || scalar_is(n, "~") ||
                 scalar_is(n, "null") || scalar_is(n, "Null") || scalar_is(n, "NULL")));
}

/* The value under key in a mapping node, or NULL (absent or null). */
static yaml_node_t *yget(struct ydoc *y, yaml_node_t *map, const char *key)
{
  if(!map || map->type != YAML_MAPPING_NODE)
    return NULL;
  for(yaml_node_pair_t *p = map->data.mapping.pairs.start;
      p < map->data.mapping.pairs.top; p++) {
    if(scalar_is(yaml_document_get_node(&y->doc, p->key), key)) {
      yaml_node_t *v = yaml_document_get_node(&y->doc, p->value);
      return is_null(v) ? NULL : v;
    }
  }
  return NULL;
}

static kcr_err type_error(struct ydoc *y, const char *where, const char *key,
                          const char *what)
{
  return kcr_errinfo_set(y->ei, KCR_ECONFIG, "%s: %s%s%s: expected %s", y->origin, where,
                         *where ? "." : "", key, what);
}

/* A copy of scalar v (owned, NULL if out of memory). A scalar holding a NUL
 * byte (YAML's "\0" or "\x00" escape, in a double-quoted scalar) cannot be a
 * C string and is refused (*rc KCR_ECONFIG, the value never quoted: it may
 * be a secret) rather than cut short; where[.key][idx] names it. */
static char *scalar_dup(struct ydoc *y, const yaml_node_t *v, const char *where,
                        const char *key, long idx, kcr_err *rc)
{
  const char *s = (const char *)v->data.scalar.value;
  size_t n = v->data.scalar.length;
  char at[24] = "";
  char *d;

  if(memchr(s, '\0', n)) {
    if(idx >= 0)
      snprintf(at, sizeof(at), "[%ld]", idx);
    *rc = kcr_errinfo_set(y->ei, KCR_ECONFIG,
                          "%s: %s%s%s%s: holds a NUL byte (\\0), which no string here "
                          "can hold",
                          y->origin, where, *where ? "." : "", key, at);
    return NULL;
  }
  d = strndup(s, n);
  *rc = d ? KCR_OK : KCR_ENOMEM;
  return d;
}

/* A string member: *out is NULL when absent or empty, else owned. */
static kcr_err ystr(struct ydoc *y, yaml_node_t *map, const char *where, const char *key,
                    char **out)
{
  yaml_node_t *v = yget(y, map, key);
  kcr_err rc;

  *out = NULL;
  if(!v)
    return KCR_OK;
  if(v->type != YAML_SCALAR_NODE)
    return type_error(y, where, key, "a string");
  if(!v->data.scalar.length)
    return KCR_OK;
  *out = scalar_dup(y, v, where, key, -1, &rc);
  return rc;
}

static kcr_err ybool(struct ydoc *y, yaml_node_t *map, const char *where, const char *key,
                     bool *out)
{
  static const char *const yes[] = {"true", "yes", "on"}, *const no[] = {"false", "no",
                                                                         "off"};
  yaml_node_t *v = yget(y, map, key);

  *out = false;
  if(!v)
    return KCR_OK;
  for(size_t i = 0; v->type == YAML_SCALAR_NODE && i < 3; i++) {
    if(v->data.scalar.length == strlen(yes[i]) &&
       !strncasecmp((const char *)v->data.scalar.value, yes[i], strlen(yes[i]))) {
      *out = true;
      return KCR_OK;
    }
    if(v->data.scalar.length == strlen(no[i]) &&
       !strncasecmp((const char *)v->data.scalar.value, no[i], strlen(no[i])))
      return KCR_OK;
  }
  return type_error(y, where, key, "true or false");
}

/* A member of the given node type, or NULL when absent. */
static kcr_err ynode(struct ydoc *y, yaml_node_t *map, const char *where, const char *key,
                     yaml_node_type_t type, yaml_node_t **out)
{
  *out = yget(y, map, key);
  if(*out && (*out)->type != type)
    return type_error(y, where, key, type == YAML_MAPPING_NODE ? "a mapping" : "a list");
  return KCR_OK;
}

static yaml_node_t *yitem(struct ydoc *y, yaml_node_t *seq, size_t i)
{
  return yaml_document_get_node(&y->doc, seq->data.sequence.items.start[i]);
}

static size_t ylen(const yaml_node_t *seq)
{
  return (size_t)(seq->data.sequence.items.top - seq->data.sequence.items.start);
}

/* Finds the entry of list (clusters, contexts, users) called name and
 * returns its body (entry[inner]) and index; *body NULL if absent. */
static kcr_err find_named(struct ydoc *y, yaml_node_t *root, const char *list,
                          const char *inner, const char *name, yaml_node_t **body,
                          size_t *idx)
{
  yaml_node_t *seq;
  kcr_err rc = ynode(y, root, "", list, YAML_SEQUENCE_NODE, &seq);

  *body = NULL;
  for(size_t i = 0; !rc && seq && i < ylen(seq); i++) {
    yaml_node_t *item = yitem(y, seq, i);
    if(!scalar_is(yget(y, item, "name"), name))
      continue;
    *idx = i;
    *body = yget(y, item, inner);
    if(!*body)
      return kcr_errinfo_set(y->ei, KCR_ECONFIG, "%s: %s[%zu].%s is missing", y->origin,
                             list, i, inner);
    if((*body)->type != YAML_MAPPING_NODE)
      return kcr_errinfo_set(y->ei, KCR_ECONFIG, "%s: %s[%zu].%s: expected a mapping",
                             y->origin, list, i, inner);
    return KCR_OK;
  }
  return rc;
}

/* key-data (base64, inline) or key (a file) into out; *which names the one
 * used (NULL if neither is set). */
static kcr_err load_blob(struct ydoc *y, yaml_node_t *m, const char *where,
                         const char *file_key, const char *data_key,
                         struct kcr__blob *out, const char **which)
{
  char *data = NULL, *file = NULL, *path = NULL, eb[128];
  kcr_err rc;
  int err;

  *which = NULL;
  rc = ystr(y, m, where, data_key, &data);
  if(!rc && !data)
    rc = ystr(y, m, where, file_key, &file);
  if(rc)
    goto out;
  if(data) {
    *which = data_key;
    rc = kcr_base64_decode(data, strlen(data), &out->ptr, &out->len);
    if(rc == KCR_EPARSE)
      rc = kcr_errinfo_set(y->ei, KCR_ECONFIG, "%s: %s.%s: invalid base64", y->origin,
                           where, data_key);
  } else if(file) {
    *which = file_key;
    path = resolve_path(y->origin, file);
    if(!path) {
      rc = KCR_ENOMEM;
      goto out;
    }
    err = read_file(path, KCR__CONFIG_FILE_MAX, out, NULL);
    if(err == ENOMEM)
      rc = KCR_ENOMEM;
    else if(err)
      rc = kcr_errinfo_set(y->ei, KCR_ECONFIG, "%s: %s.%s %s: %s", y->origin, where,
                           file_key, path, read_errstr(err, eb, sizeof(eb)));
  }
out:
  kcr__wipe_str(data);
  free(file);
  free(path);
  return rc;
}

/* --- clusters, users, contexts ----------------------------------------- */

static kcr_err set_server(struct ydoc *y, kcr_config *cfg, const char *where, char *url)
{
  size_t n = strlen(url);
  const char *host;

  if(!strncmp(url, "https://", 8))
    host = url + 8;
  else if(!strncmp(url, "http://", 7))
    host = url + 7;
  else
    return kcr_errinfo_set(y->ei, KCR_ECONFIG,
                           "%s: %s.server \"%s\": must start with https:// or http://",
                           y->origin, where, url);
  if(!*host || *host == '/')
    return kcr_errinfo_set(y->ei, KCR_ECONFIG, "%s: %s.server \"%s\": no host", y->origin,
                           where, url);
  while(n && url[n - 1] == '/')
    url[--n] = '\0';
  cfg->server = url;
  return KCR_OK;
}

/* client-go refuses a CA together with insecure-skip-tls-verify
 * (transport.TLSConfigFor), and so does kubectl: one of them is a mistake,
 * and honouring either silently would hide it. Checked before any CA file
 * is read, so the message is about the combination. */
static kcr_err refuse_ca_when_insecure(struct ydoc *y, yaml_node_t *c, const char *where)
{
  static const char *const keys[] = {"certificate-authority-data",
                                     "certificate-authority"};

  for(size_t i = 0; i < 2; i++) {
    yaml_node_t *v = yget(y, c, keys[i]);
    if(v && v->type == YAML_SCALAR_NODE && v->data.scalar.length)
      return kcr_errinfo_set(y->ei, KCR_ECONFIG,
                             "%s: %s.%s: cannot be used with insecure-skip-tls-verify: "
                             "true (a CA is ignored when verification is off; remove "
                             "one of them)",
                             y->origin, where, keys[i]);
  }
  return KCR_OK;
}

/* What TLS can verify a server against: a DNS name or an IP address. */
static bool valid_server_name(const char *s)
{
  unsigned char v6[16];
  size_t n = strlen(s);

  if(strchr(s, ':'))
    return inet_pton(AF_INET6, s, v6) == 1;
  if(!n || n > 253 || s[0] == '.' || s[0] == '-')
    return false;
  for(; *s; s++)
    if(!isalnum((unsigned char)*s) && *s != '-' && *s != '.' && *s != '_')
      return false;
  return true;
}

/* proxy-url: the schemes client-go takes (clientcmd parseProxyURL: http,
 * https, socks5), and a host. The message names the scheme, never the URL,
 * which may hold a password. */
static kcr_err check_proxy_url(struct ydoc *y, const char *where, const char *url)
{
  static const char *const schemes[] = {"http://", "https://", "socks5://"};
  size_t n = strcspn(url, ":/");

  for(size_t i = 0; i < sizeof(schemes) / sizeof(schemes[0]); i++) {
    size_t k = strlen(schemes[i]);
    if(!strncasecmp(url, schemes[i], k)) {
      if(!url[k] || strchr("/?#", url[k]))
        return kcr_errinfo_set(y->ei, KCR_ECONFIG, "%s: %s.proxy-url: no host", y->origin,
                               where);
      return KCR_OK;
    }
  }
  return kcr_errinfo_set(y->ei, KCR_ECONFIG,
                         "%s: %s.proxy-url: unsupported scheme \"%.*s\", must be http, "
                         "https, or socks5",
                         y->origin, where, url[n] == ':' ? (int)n : 0, url);
}

static kcr_err load_cluster(struct ydoc *y, yaml_node_t *c, size_t idx, kcr_config *cfg)
{
  char where[64], *server = NULL;
  const char *which;
  kcr_err rc;

  snprintf(where, sizeof(where), "clusters[%zu].cluster", idx);
  rc = ystr(y, c, where, "server", &server);
  if(rc)
    return rc;
  if(!server)
    return kcr_errinfo_set(y->ei, KCR_ECONFIG, "%s: %s.server is missing", y->origin,
                           where);
  rc = set_server(y, cfg, where, server);
  if(rc) {
    free(server);
    return rc;
  }
  rc = ybool(y, c, where, "insecure-skip-tls-verify", &cfg->insecure);
  if(!rc && cfg->insecure)
    rc = refuse_ca_when_insecure(y, c, where);
  if(!rc)
    rc = ystr(y, c, where, "tls-server-name", &cfg->tls_server_name);
  if(!rc && cfg->tls_server_name && !valid_server_name(cfg->tls_server_name))
    rc = kcr_errinfo_set(y->ei, KCR_ECONFIG,
                         "%s: %s.tls-server-name \"%s\": not a host name or IP address",
                         y->origin, where, cfg->tls_server_name);
  if(!rc)
    rc = ystr(y, c, where, "proxy-url", &cfg->proxy_url);
  if(!rc && cfg->proxy_url)
    rc = check_proxy_url(y, where, cfg->proxy_url);
  if(!rc)
    rc = load_blob(y, c, where, "certificate-authority", "certificate-authority-data",
                   &cfg->ca, &which);
  return rc;
}

static kcr_err load_string_list(struct ydoc *y, yaml_node_t *m, const char *where,
                                const char *key, const char *first, char ***out)
{
  yaml_node_t *seq;
  size_t n, k = 0;
  kcr_err rc = ynode(y, m, where, key, YAML_SEQUENCE_NODE, &seq);

  if(rc)
    return rc;
  n = seq ? ylen(seq) : 0;
  *out = calloc(n + 2, sizeof(char *));
  if(!*out || (first && !((*out)[k++] = strdup(first))))
    return KCR_ENOMEM;
  for(size_t i = 0; i < n; i++) {
    yaml_node_t *v = yitem(y, seq, i);
    if(v->type != YAML_SCALAR_NODE)
      return kcr_errinfo_set(y->ei, KCR_ECONFIG, "%s: %s.%s[%zu]: expected a string",
                             y->origin, where, key, i);
    (*out)[k] = scalar_dup(y, v, where, key, (long)i, &rc);
    if(!(*out)[k++])
      return rc;
  }
  return KCR_OK;
}

/* "NAME=value" in one exact allocation: value may be a secret, and a
 * formatter growing its buffer would leave copies behind. */
static char *env_entry(const char *name, const char *value)
{
  size_t nl = strlen(name), vl = value ? strlen(value) : 0;
  char *kv = malloc(nl + vl + 2);

  if(!kv)
    return NULL;
  memcpy(kv, name, nl);
  kv[nl] = '=';
  if(vl)
    memcpy(kv + nl + 1, value, vl);
  kv[nl + 1 + vl] = '\0';
  return kv;
}

/* exec.env: a list of {name, value} into "NAME=value" strings. */
static kcr_err load_exec_env(struct ydoc *y, yaml_node_t *x, const char *where,
                             char ***out)
{
  yaml_node_t *seq;
  size_t n;
  kcr_err rc = ynode(y, x, where, "env", YAML_SEQUENCE_NODE, &seq);

  if(rc)
    return rc;
  n = seq ? ylen(seq) : 0;
  *out = calloc(n + 1, sizeof(char *));
  if(!*out)
    return KCR_ENOMEM;
  for(size_t i = 0; i < n; i++) {
    yaml_node_t *e = yitem(y, seq, i);
    char item[128], *name = NULL, *value = NULL;
    snprintf(item, sizeof(item), "%s.env[%zu]", where, i);
    if(e->type != YAML_MAPPING_NODE)
      return kcr_errinfo_set(y->ei, KCR_ECONFIG, "%s: %s: expected a mapping", y->origin,
                             item);
    rc = ystr(y, e, item, "name", &name);
    if(!rc && !name)
      rc = kcr_errinfo_set(y->ei, KCR_ECONFIG, "%s: %s.name is missing", y->origin, item);
    if(!rc && strchr(name, '='))
      rc = kcr_errinfo_set(y->ei, KCR_ECONFIG, "%s: %s.name \"%s\" contains '='",
                           y->origin, item, name);
    if(!rc)
      rc = ystr(y, e, item, "value", &value);
    if(!rc && !((*out)[i] = env_entry(name, value)))
      rc = KCR_ENOMEM;
    free(name);
    kcr__wipe_str(value);
    if(rc)
      return rc;
  }
  return KCR_OK;
}

static kcr_err check_interactive(struct ydoc *y, yaml_node_t *x, const char *where)
{
  char *mode = NULL;
  kcr_err rc = ystr(y, x, where, "interactiveMode", &mode);

  if(rc || !mode || !strcmp(mode, "Never") || !strcmp(mode, "IfAvailable"))
    goto out;
  if(!strcmp(mode, "Always"))
    rc = kcr_errinfo_set(y->ei, KCR_ECONFIG,
                         "%s: %s.interactiveMode is \"Always\", but a controller has no "
                         "terminal to prompt on; use \"Never\" or \"IfAvailable\"",
                         y->origin, where);
  else
    rc = kcr_errinfo_set(y->ei, KCR_ECONFIG,
                         "%s: %s.interactiveMode \"%s\": must be Never, IfAvailable or "
                         "Always",
                         y->origin, where, mode);
out:
  free(mode);
  return rc;
}

static kcr_err load_exec(struct ydoc *y, yaml_node_t *x, const char *uwhere,
                         const char *user, kcr_config *cfg)
{
  struct kcr__exec_spec *s = calloc(1, sizeof(*s));
  char where[96];
  kcr_err rc;

  if(!s)
    return KCR_ENOMEM;
  cfg->exec = s;
  snprintf(where, sizeof(where), "%s.exec", uwhere);
  rc = ystr(y, x, where, "apiVersion", &s->api_version);
  if(!rc && !s->api_version)
    rc = kcr_errinfo_set(y->ei, KCR_ECONFIG, "%s: %s.apiVersion is missing", y->origin,
                         where);
  if(!rc && strcmp(s->api_version, KCR__EXEC_API_V1) &&
     strcmp(s->api_version, KCR__EXEC_API_V1BETA1))
    rc = kcr_errinfo_set(
        y->ei, KCR_ECONFIG, "%s: %s.apiVersion \"%s\" is not supported (use %s or %s)",
        y->origin, where, s->api_version, KCR__EXEC_API_V1, KCR__EXEC_API_V1BETA1);
  if(!rc)
    rc = ystr(y, x, where, "command", &s->command);
  if(!rc && !s->command)
    rc = kcr_errinfo_set(y->ei, KCR_ECONFIG, "%s: %s.command is missing", y->origin,
                         where);
  if(!rc)
    rc = check_interactive(y, x, where);
  if(!rc)
    rc = load_string_list(y, x, where, "args", s->command, &s->argv);
  if(!rc)
    rc = load_exec_env(y, x, where, &s->env);
  if(!rc)
    rc = ystr(y, x, where, "installHint", &s->install_hint);
  if(rc)
    return rc;
  /* A command with a '/' is relative to the kubeconfig, as in client-go. */
  s->path =
      strchr(s->command, '/') ? resolve_path(y->origin, s->command) : strdup(s->command);
  s->where = xasprintf("%s: %s (user \"%s\")", y->origin, where, user);
  return s->path && s->where ? KCR_OK : KCR_ENOMEM;
}

static kcr_err reject_unsupported(struct ydoc *y, yaml_node_t *u, const char *where)
{
  if(yget(y, u, "auth-provider"))
    return kcr_errinfo_set(y->ei, KCR_ECONFIG,
                           "%s: %s.auth-provider is not supported; use an exec plugin",
                           y->origin, where);
  if(yget(y, u, "username") || yget(y, u, "password"))
    return kcr_errinfo_set(y->ei, KCR_ECONFIG,
                           "%s: %s.username/password: basic authentication is not "
                           "supported",
                           y->origin, where);
  return KCR_OK;
}

static kcr_err load_user(struct ydoc *y, yaml_node_t *u, size_t idx, const char *name,
                         kcr_config *cfg)
{
  const char *cert_from = NULL, *key_from = NULL;
  char where[64], *tf = NULL;
  yaml_node_t *x = NULL;
  kcr_err rc;

  snprintf(where, sizeof(where), "users[%zu].user", idx);
  rc = reject_unsupported(y, u, where);
  if(!rc)
    rc = ystr(y, u, where, "token", &cfg->token);
  if(!rc)
    rc = ystr(y, u, where, "tokenFile", &tf);
  if(!rc)
    rc = load_blob(y, u, where, "client-certificate", "client-certificate-data",
                   &cfg->cert, &cert_from);
  if(!rc)
    rc = load_blob(y, u, where, "client-key", "client-key-data", &cfg->key, &key_from);
  if(!rc && cert_from && !key_from)
    rc = kcr_errinfo_set(y->ei, KCR_ECONFIG, "%s: %s: %s is set but %s is missing",
                         y->origin, where, cert_from,
                         strcmp(cert_from, "client-certificate") ? "client-key-data"
                                                                 : "client-key");
  if(!rc && key_from && !cert_from)
    rc = kcr_errinfo_set(y->ei, KCR_ECONFIG, "%s: %s: %s is set but %s is missing",
                         y->origin, where, key_from,
                         strcmp(key_from, "client-key") ? "client-certificate-data"
                                                        : "client-certificate");
  if(!rc)
    rc = ynode(y, u, where, "exec", YAML_MAPPING_NODE, &x);
  if(!rc && x)
    rc = load_exec(y, x, where, name, cfg);
  if(!rc && tf) {
    cfg->token_file = resolve_path(y->origin, tf);
    cfg->token_where = xasprintf("%s: %s.tokenFile", y->origin, where);
    rc = cfg->token_file && cfg->token_where ? token_file_init(cfg, y->ei) : KCR_ENOMEM;
  }
  free(tf);
  return rc;
}

/* The selected context: its cluster and user, and the namespace. */
static kcr_err load_context(struct ydoc *y, yaml_node_t *root, const char *context,
                            kcr_config *cfg)
{
  char *cur = NULL, *cluster = NULL, *user = NULL, where[64];
  const char *name = context;
  yaml_node_t *ctx, *body;
  size_t ci = 0, i = 0;
  kcr_err rc = KCR_OK;

  if(!name) {
    rc = ystr(y, root, "", "current-context", &cur);
    if(!rc && !cur)
      rc = kcr_errinfo_set(y->ei, KCR_ECONFIG,
                           "%s: current-context is not set and no context was given",
                           y->origin);
    if(rc)
      goto out;
    name = cur;
  }
  rc = find_named(y, root, "contexts", "context", name, &ctx, &ci);
  if(!rc && !ctx)
    rc = kcr_errinfo_set(y->ei, KCR_ECONFIG, "%s: %s \"%s\" not found in contexts",
                         y->origin, context ? "context" : "current-context", name);
  if(rc)
    goto out;
  snprintf(where, sizeof(where), "contexts[%zu].context", ci);
  rc = ystr(y, ctx, where, "cluster", &cluster);
  if(!rc)
    rc = ystr(y, ctx, where, "user", &user);
  if(!rc)
    rc = ystr(y, ctx, where, "namespace", &cfg->ns);
  if(!rc && !cluster)
    rc = kcr_errinfo_set(y->ei, KCR_ECONFIG, "%s: %s.cluster is missing", y->origin,
                         where);
  if(!rc)
    rc = find_named(y, root, "clusters", "cluster", cluster, &body, &i);
  if(!rc && !body)
    rc =
        kcr_errinfo_set(y->ei, KCR_ECONFIG, "%s: %s.cluster \"%s\" not found in clusters",
                        y->origin, where, cluster);
  if(!rc)
    rc = load_cluster(y, body, i, cfg);
  if(rc || !user) /* no user: anonymous */
    goto out;
  rc = find_named(y, root, "users", "user", user, &body, &i);
  if(!rc && !body)
    rc = kcr_errinfo_set(y->ei, KCR_ECONFIG, "%s: %s.user \"%s\" not found in users",
                         y->origin, where, user);
  if(!rc)
    rc = load_user(y, body, i, user, cfg);
out:
  free(cur);
  free(cluster);
  free(user);
  return rc;
}

static kcr_err yaml_error(const yaml_parser_t *p, const char *origin,
                          struct kcr_errinfo *ei)
{
  const char *problem = p->problem ? p->problem : "unknown error";

  if(p->error == YAML_MEMORY_ERROR)
    return KCR_ENOMEM;
  if(p->error == YAML_READER_ERROR)
    return kcr_errinfo_set(ei, KCR_ECONFIG, "%s: byte %zu: YAML syntax error: %s", origin,
                           p->problem_offset, problem);
  return kcr_errinfo_set(ei, KCR_ECONFIG,
                         "%s: line %zu column %zu: YAML syntax error: %s", origin,
                         p->problem_mark.line + 1, p->problem_mark.column + 1, problem);
}

/* libyaml frees without wiping: blank every scalar (tokens, key data) and the
 * parser's input buffers first. Best effort: freed temporaries may remain. */
static void wipe_yaml(yaml_parser_t *p, yaml_document_t *doc)
{
  for(yaml_node_t *n = doc ? doc->nodes.start : NULL; n && n < doc->nodes.top; n++)
    if(n->type == YAML_SCALAR_NODE && n->data.scalar.value)
      kcr__wipe(n->data.scalar.value, n->data.scalar.length);
  if(p->buffer.start)
    kcr__wipe(p->buffer.start, (size_t)(p->buffer.end - p->buffer.start));
  if(p->raw_buffer.start)
    kcr__wipe(p->raw_buffer.start, (size_t)(p->raw_buffer.end - p->raw_buffer.start));
}

kcr_err kcr_config_from_yaml(const char *yaml, size_t len,
                             const struct kcr_config_opts *opts, kcr_config **out,
                             struct kcr_errinfo *ei)
{
  const char *origin = opts ? opts->kubeconfig : NULL;
  const char *context = opts ? opts->context : NULL;
  struct ydoc y = {.origin = origin ? origin : "<kubeconfig>", .ei = ei};
  yaml_parser_t parser;
  yaml_node_t *root;
  kcr_config *cfg = NULL;
  bool loaded = false;
  kcr_err rc;

  *out = NULL;
  if(opts && opts->in_cluster_only)
    return kcr_errinfo_set(ei, KCR_EINVAL,
                           "kcr_config_from_yaml: in_cluster_only reads no kubeconfig");
  if(!yaml_parser_initialize(&parser))
    return KCR_ENOMEM;
  yaml_parser_set_input_string(&parser, (const unsigned char *)yaml, len);
  if(!yaml_parser_load(&parser, &y.doc)) {
    rc = yaml_error(&parser, y.origin, ei);
    goto out;
  }
  loaded = true;
  root = yaml_document_get_root_node(&y.doc);
  if(is_null(root))
    root = NULL; /* an empty file: an empty kubeconfig */
  if(root && root->type != YAML_MAPPING_NODE) {
    rc = kcr_errinfo_set(ei, KCR_ECONFIG, "%s: not a kubeconfig (expected a mapping)",
                         y.origin);
    goto out;
  }
  cfg = config_new(y.origin);
  if(!cfg) {
    rc = KCR_ENOMEM;
    goto out;
  }
  rc = load_context(&y, root, context, cfg);
out:
  wipe_yaml(&parser, loaded ? &y.doc : NULL);
  if(loaded)
    yaml_document_delete(&y.doc);
  yaml_parser_delete(&parser);
  if(rc)
    kcr_config_free(cfg);
  else
    *out = cfg;
  return rc;
}

/* --- sources ----------------------------------------------------------- */

static kcr_err load_file(const char *path, const char *context, kcr_config **out,
                         struct kcr_errinfo *ei)
{
  struct kcr__blob text;
  char eb[128];
  kcr_err rc;
  int err = read_file(path, KCR__CONFIG_FILE_MAX, &text, NULL);

  if(err == ENOMEM)
    return KCR_ENOMEM;
  if(err)
    return kcr_errinfo_set(ei, KCR_ECONFIG, "%s: cannot read kubeconfig: %s", path,
                           read_errstr(err, eb, sizeof(eb)));
  rc = kcr_config_from_yaml(
      (const char *)text.ptr, text.len,
      &(struct kcr_config_opts){.kubeconfig = path, .context = context}, out, ei);
  kcr__wipe_free(text.ptr, text.len);
  return rc;
}

/* The first existing file of $KUBECONFIG, then ~/.kube/config; NULL if none
 * (or out of memory: *rc). */
static char *find_kubeconfig(kcr_err *rc)
{
  const char *env = getenv("KUBECONFIG"), *home = getenv("HOME");
  struct stat st;
  char *path;

  *rc = KCR_OK;
  for(const char *p = env; p && *p;) {
    size_t n = strcspn(p, ":");
    if(n) {
      path = strndup(p, n);
      if(!path) {
        *rc = KCR_ENOMEM;
        return NULL;
      }
      if(!stat(path, &st))
        return path;
      free(path);
    }
    p += n + (p[n] == ':');
  }
  /* $KUBECONFIG set but naming no existing file: an error (as kubectl and
   * controller-runtime), never a silent fall-back to another cluster. */
  if(env && *env) {
    *rc = KCR_ENOTFOUND;
    return NULL;
  }
  if(!home || !*home)
    return NULL;
  path = xasprintf("%s/.kube/config", home);
  if(!path)
    *rc = KCR_ENOMEM;
  else if(stat(path, &st)) {
    free(path);
    path = NULL;
  }
  return path;
}

static kcr_err load_in_cluster(const char *sa_dir, kcr_config **out,
                               struct kcr_errinfo *ei)
{
  const char *host = getenv("KUBERNETES_SERVICE_HOST");
  const char *port = getenv("KUBERNETES_SERVICE_PORT");
  bool v6 = strchr(host, ':') && host[0] != '[';
  char *ca_path = NULL, *ns_path = NULL, eb[128];
  struct kcr__blob ns;
  kcr_config *cfg;
  kcr_err rc = KCR_ENOMEM;
  int err;

  *out = NULL;
  if(!port || !*port)
    return kcr_errinfo_set(ei, KCR_ECONFIG,
                           "in-cluster: KUBERNETES_SERVICE_HOST is set but "
                           "KUBERNETES_SERVICE_PORT is not");
  cfg = config_new("in-cluster");
  if(!cfg)
    return KCR_ENOMEM;
  cfg->server = xasprintf(v6 ? "https://[%s]:%s" : "https://%s:%s", host, port);
  cfg->token_file = xasprintf("%s/token", sa_dir);
  cfg->token_where = strdup("in-cluster: token");
  ca_path = xasprintf("%s/ca.crt", sa_dir);
  ns_path = xasprintf("%s/namespace", sa_dir);
  if(!cfg->server || !cfg->token_file || !cfg->token_where || !ca_path || !ns_path)
    goto out;
  err = read_file(ca_path, KCR__CONFIG_FILE_MAX, &cfg->ca, NULL);
  if(err) {
    rc = err == ENOMEM ? KCR_ENOMEM
                       : kcr_errinfo_set(ei, KCR_ECONFIG, "in-cluster: CA %s: %s",
                                         ca_path, read_errstr(err, eb, sizeof(eb)));
    goto out;
  }
  rc = token_file_init(cfg, ei);
  if(rc)
    goto out;
  /* The namespace file is optional: without it the caller picks a default. */
  if(!read_token(ns_path, (char **)&ns.ptr, NULL))
    cfg->ns = (char *)ns.ptr;
out:
  free(ca_path);
  free(ns_path);
  if(rc)
    kcr_config_free(cfg);
  else
    *out = cfg;
  return rc;
}

kcr_err kcr_config_load(const struct kcr_config_opts *opts, kcr_config **out,
                        struct kcr_errinfo *ei)
{
  static const struct kcr_config_opts none = {0};
  const char *host = getenv("KUBERNETES_SERVICE_HOST");
  char *path;
  kcr_err rc;

  *out = NULL;
  if(!opts)
    opts = &none;
  if(opts->kubeconfig && opts->in_cluster_only)
    return kcr_errinfo_set(ei, KCR_EINVAL,
                           "kubeconfig and in_cluster_only are mutually exclusive");
  if(opts->kubeconfig)
    return load_file(opts->kubeconfig, opts->context, out, ei);
  if(!opts->in_cluster_only) {
    path = find_kubeconfig(&rc);
    if(rc == KCR_ENOTFOUND)
      return kcr_errinfo_set(ei, KCR_ECONFIG,
                             "$KUBECONFIG (%s): no such file; unset it to use "
                             "~/.kube/config or the in-cluster service account",
                             getenv("KUBECONFIG"));
    if(rc)
      return rc;
    if(path) {
      rc = load_file(path, opts->context, out, ei);
      free(path);
      return rc;
    }
  }
  if(host && *host)
    return load_in_cluster(opts->sa_dir ? opts->sa_dir : DEFAULT_SA_DIR, out, ei);
  if(opts->in_cluster_only)
    return kcr_errinfo_set(ei, KCR_ECONFIG,
                           "not running in a cluster (KUBERNETES_SERVICE_HOST is unset)");
  return kcr_errinfo_set(
      ei, KCR_ECONFIG,
      "no kubeconfig found (tried $KUBECONFIG, ~/.kube/config) and not "
      "running in a cluster (KUBERNETES_SERVICE_HOST is unset)");
}

/* --- views ------------------------------------------------------------- */

const char *kcr_config_server(const kcr_config *cfg) { return cfg->server; }
const char *kcr_config_origin(const kcr_config *cfg) { return cfg->origin; }
const char *kcr_config_namespace(const kcr_config *cfg) { return cfg->ns; }
bool kcr_config_insecure(const kcr_config *cfg) { return cfg->insecure; }

const char *kcr_config_tls_server_name(const kcr_config *cfg)
{
  return cfg->tls_server_name;
}

const char *kcr_config_proxy_url(const kcr_config *cfg) { return cfg->proxy_url; }

const unsigned char *kcr_config_ca(const kcr_config *cfg, size_t *len)
{
  if(len)
    *len = cfg->ca.len;
  return cfg->ca.ptr;
}

/* --- credentials ------------------------------------------------------- */

/* The certificate/key pair in effect (under mu). ex.r is the last successful
 * plugin answer; ex.valid only says whether it may be reused without a run. */
static void current_pair(const kcr_config *cfg, const struct kcr__blob **cert,
                         const struct kcr__blob **key)
{
  bool ex = cfg->ex.r.cert.ptr != NULL;
  KCR_ASSERT(mu_held(cfg));
  *cert = ex ? &cfg->ex.r.cert : &cfg->cert;
  *key = ex ? &cfg->ex.r.key : &cfg->key;
}

static bool blob_eq(const struct kcr__blob *a, const struct kcr__blob *b)
{
  return a->len == b->len && (!a->len || !memcmp(a->ptr, b->ptr, a->len));
}

enum ex_state {
  EX_NONE,   /* no answer, invalidated, or expired: a run is needed */
  EX_USABLE, /* valid, but inside the refresh margin */
  EX_FRESH,
};

/* How good the cached plugin answer is at `now` (under mu). */
static enum ex_state exec_state(const kcr_config *cfg, time_t now)
{
  const struct kcr__exec_result *r = &cfg->ex.r;

  KCR_ASSERT(mu_held(cfg));
  if(!cfg->ex.valid)
    return EX_NONE;
  if(!r->has_expiry)
    return EX_FRESH;
  if(now >= r->expiry)
    return EX_NONE;
  return r->expiry - now > cfg->margin_s ? EX_FRESH : EX_USABLE;
}

/* Makes a successful answer the cached one (under mu); takes r's contents. */
static void exec_install(kcr_config *cfg, struct kcr__exec_result *r)
{
  const struct kcr__blob *c0, *k0, *c1, *k1;
  char when[KCR_RFC3339_LEN] = "never";

  current_pair(cfg, &c0, &k0);
  c1 = r->cert.ptr ? &r->cert : &cfg->cert;
  k1 = r->cert.ptr ? &r->key : &cfg->key;
  if(!blob_eq(c0, c1) || !blob_eq(k0, k1))
    cfg->generation++;
  kcr__exec_result_cleanup(&cfg->ex.r);
  cfg->ex.r = *r;
  memset(r, 0, sizeof(*r));
  cfg->ex.valid = true;
  if(cfg->ex.r.has_expiry)
    kcr_time_format(cfg->ex.r.expiry, when);
  KCR_LOG(KCR_LOG_DEBUG, "exec plugin refreshed credentials",
          KCR_S("kubeconfig", cfg->origin), KCR_S("command", cfg->exec->command),
          KCR_B("certificate", cfg->ex.r.cert.ptr != NULL), KCR_S("expires", when));
}

/* Runs the plugin once with mu released and publishes the outcome. Called
 * with mu held and ex.running set by the caller; returns with mu held,
 * ex.running clear and every waiter woken. The run's error goes to ei. */
static kcr_err exec_run(kcr_config *cfg, struct kcr_errinfo *ei)
{
  struct kcr__exec_result r;
  struct kcr_errinfo mine = KCR_ERRINFO_INIT;
  kcr_err rc;

  KCR_ASSERT(mu_held(cfg) && cfg->ex.running); /* this thread's run */
  pthread_mutex_unlock(&cfg->mu);
  rc = kcr__exec_run(cfg->exec, cfg->exec_timeout_ms, &cfg->ex.cancel, &r, &mine);
  pthread_mutex_lock(&cfg->mu);
  free(cfg->ex.last_msg);
  cfg->ex.last_msg = NULL;
  cfg->ex.last_rc = rc;
  if(rc)
    cfg->ex.last_msg = mine.message ? strdup(mine.message) : NULL;
  else
    exec_install(cfg, &r);
  cfg->ex.running = false;
  cfg->ex.runs++;
  pthread_cond_broadcast(&cfg->ran);
  if(rc && ei) {
    kcr_errinfo_cleanup(ei);
    *ei = mine;
  } else {
    kcr_errinfo_cleanup(&mine);
  }
  return rc;
}

/* The background refresh: touches cfg only while holding mu (see DESIGN). */
static void *refresh_main(void *arg)
{
  kcr_config *cfg = arg;
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;

  pthread_mutex_lock(&cfg->mu);
  if(exec_run(cfg, &ei) && !atomic_load(&cfg->ex.cancel)) {
    cfg->ex.retry_ms = kcr_time_mono_ms() + EXEC_RETRY_MS;
    KCR_LOG(KCR_LOG_WARN,
            "exec plugin refresh failed; the cached credentials are used until they "
            "expire",
            KCR_S("error", ei.message ? ei.message : "out of memory"));
  }
  pthread_mutex_unlock(&cfg->mu);
  kcr_errinfo_cleanup(&ei);
  return NULL;
}

/* Starts a background run (under mu, none under way). The previous
 * refresh thread, if any, has published its run and released mu, so it is
 * joined here without waiting on anything. The thread blocks every signal:
 * they are for the application's own threads. */
static void start_refresh(kcr_config *cfg)
{
  sigset_t all, old;

  KCR_ASSERT(mu_held(cfg) && !cfg->ex.running); /* single flight */
  if(cfg->ex.joinable) {
    pthread_join(cfg->ex.thread, NULL);
    cfg->ex.joinable = false;
  }
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  cfg->ex.running = true;
  if(pthread_create(&cfg->ex.thread, NULL, refresh_main, cfg)) {
    cfg->ex.running = false; /* no thread: retried by a later call */
    cfg->ex.retry_ms = kcr_time_mono_ms() + EXEC_RETRY_MS;
  } else {
    cfg->ex.joinable = true;
  }
  pthread_sigmask(SIG_SETMASK, &old, NULL);
}

/* Makes the exec cache good enough for this caller (under mu; released while
 * this thread runs or waits for a plugin). See the DESIGN comment. */
static kcr_err exec_creds(kcr_config *cfg, struct kcr_errinfo *ei)
{
  for(;;) {
    enum ex_state st = exec_state(cfg, kcr_time_now());
    unsigned long seen = cfg->ex.runs;

    if(st == EX_FRESH)
      return KCR_OK;
    if(st == EX_USABLE) {
      if(!cfg->ex.running && kcr_time_mono_ms() >= cfg->ex.retry_ms)
        start_refresh(cfg);
      return KCR_OK;
    }
    if(!cfg->ex.running) {
      cfg->ex.running = true;
      return exec_run(cfg, ei);
    }
    cfg->ex.waiters++;
    while(cfg->ex.runs == seen)
      pthread_cond_wait(&cfg->ran, &cfg->mu);
    KCR_ASSERT(cfg->ex.waiters > 0);
    cfg->ex.waiters--;
    if(cfg->ex.last_rc)
      return kcr_errinfo_set(ei, cfg->ex.last_rc, "%s",
                             cfg->ex.last_msg ? cfg->ex.last_msg
                                              : kcr_strerror(cfg->ex.last_rc));
    if(cfg->ex.valid) /* that run's answer, even if it has already expired */
      return KCR_OK;
    /* invalidated since that run ended: go round again */
  }
}

static bool same_file(const struct file_id *a, const struct file_id *b)
{
  return a->dev == b->dev && a->ino == b->ino && a->size == b->size &&
         a->mtime.tv_sec == b->mtime.tv_sec && a->mtime.tv_nsec == b->mtime.tv_nsec;
}

/* Re-reads the token file when it changed (checked every recheck_ms). */
static kcr_err refresh_token_file(kcr_config *cfg, struct kcr_errinfo *ei)
{
  uint64_t now = kcr_time_mono_ms();
  struct stat st;
  struct file_id id;
  char *tok, eb[128];
  int err;

  KCR_ASSERT(mu_held(cfg));
  if(!cfg->tf.force && now < cfg->tf.next_check_ms)
    return KCR_OK;
  cfg->tf.next_check_ms = now + cfg->recheck_ms;
  if(!cfg->tf.force && !stat(cfg->token_file, &st)) {
    id = (struct file_id){st.st_dev, st.st_ino, st.st_size, st.st_mtim};
    if(same_file(&id, &cfg->tf.id))
      return KCR_OK;
  }
  cfg->tf.force = false;
  err = read_token(cfg->token_file, &tok, &id);
  if(err == ENOMEM)
    return KCR_ENOMEM;
  if(err && !cfg->tf.token)
    return kcr_errinfo_set(ei, KCR_ECONFIG, "%s %s: %s", cfg->token_where,
                           cfg->token_file, read_errstr(err, eb, sizeof(eb)));
  if(err) {
    KCR_LOG(KCR_LOG_WARN, "cannot re-read token file; keeping the previous token",
            KCR_S("path", cfg->token_file),
            KCR_S("error", read_errstr(err, eb, sizeof(eb))));
    return KCR_OK;
  }
  kcr__wipe_str(cfg->tf.token);
  cfg->tf.token = tok;
  cfg->tf.id = id;
  KCR_LOG(KCR_LOG_DEBUG, "token file re-read", KCR_S("path", cfg->token_file));
  return KCR_OK;
}

static kcr_err dup_blob(const struct kcr__blob *src, unsigned char **dst, size_t *len)
{
  *len = 0;
  *dst = NULL;
  if(!src->ptr)
    return KCR_OK;
  *dst = malloc(src->len + 1);
  if(!*dst)
    return KCR_ENOMEM;
  memcpy(*dst, src->ptr, src->len);
  (*dst)[src->len] = '\0';
  *len = src->len;
  return KCR_OK;
}

/* The credentials in effect into *out (under mu), the certificate and
 * key only when pair; *has_pair: whether there is a certificate (as
 * out->cert would say). */
static kcr_err snapshot(const kcr_config *cfg, struct kcr_credentials *out, bool pair,
                        bool *has_pair)
{
  const struct kcr__blob *cert, *key;
  const char *tok = cfg->token;

  if(cfg->token_file && cfg->tf.token)
    tok = cfg->tf.token;
  if(cfg->ex.r.token)
    tok = cfg->ex.r.token;
  current_pair(cfg, &cert, &key);
  out->generation = cfg->generation;
  *has_pair = cert->ptr != NULL;
  if(tok && !(out->token = strdup(tok)))
    return KCR_ENOMEM;
  if(pair && (dup_blob(cert, &out->cert, &out->cert_len) ||
              dup_blob(key, &out->key, &out->key_len)))
    return KCR_ENOMEM;
  return KCR_OK;
}

kcr_err kcr__config_credentials(kcr_config *cfg, struct kcr_credentials *out, bool pair,
                                bool *has_pair, struct kcr_errinfo *ei)
{
  kcr_err rc = KCR_OK;
  bool has = false;

  memset(out, 0, sizeof(*out));
  pthread_mutex_lock(&cfg->mu);
  if(cfg->exec)
    rc = exec_creds(cfg, ei);
  if(!rc && cfg->token_file)
    rc = refresh_token_file(cfg, ei);
  if(!rc)
    rc = snapshot(cfg, out, pair, &has);
  pthread_mutex_unlock(&cfg->mu);
  if(rc)
    kcr_credentials_cleanup(out);
  if(has_pair)
    *has_pair = !rc && has;
  return rc;
}

kcr_err kcr_config_dup_credentials(kcr_config *cfg, struct kcr_credentials *out,
                                   struct kcr_errinfo *ei)
{
  return kcr__config_credentials(cfg, out, true, NULL, ei);
}

bool kcr__config_refreshable(const kcr_config *cfg)
{
  return cfg->exec || cfg->token_file;
}

void kcr_config_invalidate(kcr_config *cfg)
{
  pthread_mutex_lock(&cfg->mu);
  cfg->ex.valid = false;
  cfg->tf.force = true;
  pthread_mutex_unlock(&cfg->mu);
}

void kcr_credentials_cleanup(struct kcr_credentials *c)
{
  if(!c)
    return;
  kcr__wipe_str(c->token);
  kcr__wipe_free(c->cert, c->cert_len);
  kcr__wipe_free(c->key, c->key_len);
  memset(c, 0, sizeof(*c));
}
