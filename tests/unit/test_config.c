/* Unit tests for kcr/config.h and kcr/base64.h: kubeconfig parsing (fixtures
 * in tests/data/kubeconfig/), token files, exec credential plugins (shell
 * scripts written into a temp dir; FIFOs when a test must hold a plugin run
 * open), in-cluster configuration (a temp service-account dir and env vars),
 * and secret hygiene (tfail_secret: no freed block may still hold a secret).
 * The real $HOME, $KUBECONFIG and in-cluster variables never matter: setup()
 * points HOME at an empty temp dir and unsets the rest; tests set what they
 * need. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "kcr/base64.h"
#include "kcr/client.h"
#include "kcr/config.h"
#include "kcr/log.h"
#include "kcr/time.h"
#include "kube/client-int.h"
#include "kube/config-int.h"
#include "tabort.h"
#include "tfail.h"

/* --- helpers ----------------------------------------------------------- */

static char g_home[64]; /* empty HOME for every test */
static char g_tmp[64];  /* per-test scratch dir */

static const char *data_path(const char *name)
{
  static char buf[4096];
  const char *dir = getenv("KCR_TEST_DATA");
  snprintf(buf, sizeof(buf), "%s/kubeconfig/%s", dir ? dir : "tests/data", name);
  return buf;
}

static const char *tmp_path(const char *name)
{
  static char buf[4][4096];
  static int i;
  i = (i + 1) % 4;
  snprintf(buf[i], sizeof(buf[i]), "%s/%s", g_tmp, name);
  return buf[i];
}

static void write_file(const char *path, const char *text, mode_t mode)
{
  char tmp[4200];
  FILE *f;

  /* Write-then-rename, as the kubelet does: readers see old or new. */
  snprintf(tmp, sizeof(tmp), "%s.new", path);
  f = fopen(tmp, "w");
  assert_non_null(f);
  assert_int_equal(strlen(text), fwrite(text, 1, strlen(text), f));
  assert_int_equal(0, fclose(f));
  assert_int_equal(0, chmod(tmp, mode));
  assert_int_equal(0, rename(tmp, path));
}

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
  (void)st;
  (void)flag;
  (void)ftw;
  return remove(p);
}

static void rm_rf(const char *dir) { nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS); }

static int read_count(void)
{
  FILE *f = fopen(tmp_path("count"), "r");
  int n = 0;
  if(f) {
    if(fscanf(f, "%d", &n) != 1)
      n = -1;
    fclose(f);
  }
  return n;
}

static int setup(void **state)
{
  (void)state;
  snprintf(g_home, sizeof(g_home), "/tmp/kcr-home-XXXXXX");
  snprintf(g_tmp, sizeof(g_tmp), "/tmp/kcr-config-XXXXXX");
  if(!mkdtemp(g_home) || !mkdtemp(g_tmp))
    return -1;
  setenv("HOME", g_home, 1);
  unsetenv("KUBECONFIG");
  unsetenv("KUBERNETES_SERVICE_HOST");
  unsetenv("KUBERNETES_SERVICE_PORT");
  return 0;
}

static int teardown(void **state)
{
  (void)state;
  rm_rf(g_home);
  rm_rf(g_tmp);
  kcr_log_set_level(KCR_LOG_INFO);
  kcr_log_set_fd(2);
  return 0;
}

/* Loads a fixture by explicit path; expects success. */
static kcr_config *load_ok(const char *path, const char *context)
{
  struct kcr_config_opts o = {.kubeconfig = path, .context = context};
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  kcr_config *cfg = NULL;
  kcr_err rc = kcr_config_load(&o, &cfg, &ei);

  if(rc)
    print_error("unexpected error: %s\n", ei.message ? ei.message : "(none)");
  assert_int_equal(KCR_OK, rc);
  assert_non_null(cfg);
  kcr_errinfo_cleanup(&ei);
  return cfg;
}

/* Loads a fixture; expects rc and a message equal to "<path>: <want>". */
static void load_fails(const char *name, kcr_err want_rc, const char *want)
{
  char path[4096], msg[8192];
  struct kcr_config_opts o = {path, NULL, false, NULL};
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  kcr_config *cfg = (kcr_config *)1;

  snprintf(path, sizeof(path), "%s", data_path(name));
  snprintf(msg, sizeof(msg), "%s: %s", path, want);
  assert_int_equal(want_rc, kcr_config_load(&o, &cfg, &ei));
  assert_null(cfg);
  assert_non_null(ei.message);
  assert_string_equal(msg, ei.message);
  kcr_errinfo_cleanup(&ei);
}

/* Parses y as the kubeconfig read from origin; expects success. */
static kcr_config *yaml_ok(const char *y, const char *origin)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  kcr_config *cfg = NULL;
  kcr_err rc = kcr_config_from_yaml(
      y, strlen(y), &(struct kcr_config_opts){.kubeconfig = origin}, &cfg, &ei);

  if(rc)
    print_error("unexpected error: %s\n", ei.message ? ei.message : "(none)");
  assert_int_equal(KCR_OK, rc);
  kcr_errinfo_cleanup(&ei);
  return cfg;
}

/* Parses y as the kubeconfig read from origin; expects KCR_ECONFIG and
 * returns the message (in a buffer the next call overwrites). */
static const char *yaml_error(const char *y, const char *origin)
{
  static char msg[8192];
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  kcr_config *cfg;

  assert_int_equal(KCR_ECONFIG,
                   kcr_config_from_yaml(y, strlen(y),
                                        &(struct kcr_config_opts){.kubeconfig = origin},
                                        &cfg, &ei));
  snprintf(msg, sizeof(msg), "%s", ei.message ? ei.message : "(none)");
  kcr_errinfo_cleanup(&ei);
  return msg;
}

static char *file_text(const char *path)
{
  FILE *f = fopen(path, "rb");
  char *buf = calloc(1, 65536);
  assert_non_null(f);
  assert_non_null(buf);
  assert_true(fread(buf, 1, 65535, f) > 0);
  fclose(f);
  return buf;
}

static void creds_ok(kcr_config *cfg, struct kcr_credentials *c)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  kcr_err rc = kcr_config_dup_credentials(cfg, c, &ei);
  if(rc)
    print_error("unexpected error: %s\n", ei.message ? ei.message : "(none)");
  assert_int_equal(KCR_OK, rc);
  kcr_errinfo_cleanup(&ei);
}

static void assert_token(kcr_config *cfg, const char *want)
{
  struct kcr_credentials c;
  creds_ok(cfg, &c);
  assert_non_null(c.token);
  assert_string_equal(want, c.token);
  kcr_credentials_cleanup(&c);
}

/* --- base64 ------------------------------------------------------------ */

static void b64_is(const char *in, const char *want)
{
  unsigned char *out;
  size_t len;
  assert_int_equal(KCR_OK, kcr_base64_decode(in, strlen(in), &out, &len));
  assert_int_equal(strlen(want), len);
  assert_memory_equal(want, out, len);
  assert_int_equal(0, out[len]);
  free(out);
}

static void b64_rejects(const char *in)
{
  unsigned char *out = (unsigned char *)1;
  size_t len = 99;
  assert_int_equal(KCR_EPARSE, kcr_base64_decode(in, strlen(in), &out, &len));
  assert_null(out);
  assert_int_equal(0, len);
}

static void base64_decodes_with_and_without_padding(void **state)
{
  (void)state;
  b64_is("", "");
  b64_is("YQ==", "a");
  b64_is("YQ", "a");
  b64_is("YWI=", "ab");
  b64_is("YWI", "ab");
  b64_is("YWJj", "abc");
  b64_is("aGVsbG8gd29ybGQ=", "hello world");
  b64_is("+/+/", "\xfb\xff\xbf");
}

static void base64_skips_embedded_whitespace(void **state)
{
  (void)state;
  b64_is("aGVs\nbG8g\r\nd29y bGQ=\n", "hello world");
  b64_is("  YQ = = ", "a");
}

static void base64_rejects_garbage(void **state)
{
  (void)state;
  b64_rejects("YQ*=");     /* not in the alphabet */
  b64_rejects("-_-_");     /* URL alphabet */
  b64_rejects("Y");        /* a dangling sextet */
  b64_rejects("YWJjZ");    /* ditto after a full quantum */
  b64_rejects("YQ===");    /* too much padding */
  b64_rejects("YQ=");      /* padding that does not complete the quantum */
  b64_rejects("YQ==YQ=="); /* data after padding */
  b64_rejects("=");
  unsigned char *out;
  size_t len;
  assert_int_equal(KCR_EPARSE, kcr_base64_decode("YQ\0=", 4, &out, &len));
}

/* --- good kubeconfigs -------------------------------------------------- */

static void kubeconfig_inline_data_is_decoded(void **state)
{
  (void)state;
  kcr_config *cfg = load_ok(data_path("inline.yaml"), NULL);
  char *ca = file_text(data_path("certs/ca.crt"));
  char *crt = file_text(data_path("certs/client.crt"));
  char *key = file_text(data_path("certs/client.key"));
  struct kcr_credentials c;
  size_t len = 0;
  const unsigned char *got = kcr_config_ca(cfg, &len);

  assert_string_equal("https://dev.example:6443", kcr_config_server(cfg)); /* no '/' */
  assert_string_equal(data_path("inline.yaml"), kcr_config_origin(cfg));
  assert_string_equal("team-a", kcr_config_namespace(cfg));
  assert_string_equal("kubernetes.default", kcr_config_tls_server_name(cfg));
  assert_false(kcr_config_insecure(cfg));
  assert_int_equal(strlen(ca), len);
  assert_memory_equal(ca, got, len);
  creds_ok(cfg, &c);
  assert_null(c.token);
  assert_int_equal(strlen(crt), c.cert_len);
  assert_memory_equal(crt, c.cert, c.cert_len);
  assert_int_equal(strlen(key), c.key_len);
  assert_memory_equal(key, c.key, c.key_len);
  assert_int_equal(1, c.generation);
  kcr_credentials_cleanup(&c);
  assert_null(c.cert);
  free(ca);
  free(crt);
  free(key);
  kcr_config_free(cfg);
}

/* What a request on a connection already made needs: the token, and
 * whether there is a certificate (and which, the generation) - not a copy
 * of the certificate and key. */
static void credentials_without_the_pair_say_whether_there_is_one(void **state)
{
  (void)state;
  static const char y[] = "current-context: x\n"
                          "contexts: [{name: x, context: {cluster: c, user: u}}]\n"
                          "clusters: [{name: c, cluster: {server: https://h}}]\n"
                          "users: [{name: u, user: {token: t0}}]\n";
  kcr_config *cfg = load_ok(data_path("inline.yaml"), NULL);
  struct kcr_credentials c, full;
  bool has = false;

  creds_ok(cfg, &full);
  assert_int_equal(KCR_OK, kcr__config_credentials(cfg, &c, false, &has, NULL));
  assert_true(has);
  assert_null(c.cert);
  assert_null(c.key);
  assert_int_equal(0, c.cert_len + c.key_len);
  assert_int_equal(full.generation, c.generation);
  kcr_credentials_cleanup(&c);
  has = false;
  assert_int_equal(KCR_OK, kcr__config_credentials(cfg, &c, true, &has, NULL));
  assert_true(has);
  assert_int_equal(full.cert_len, c.cert_len);
  assert_memory_equal(full.cert, c.cert, c.cert_len);
  assert_int_equal(full.key_len, c.key_len);
  assert_memory_equal(full.key, c.key, c.key_len);
  kcr_credentials_cleanup(&c);
  kcr_credentials_cleanup(&full);
  kcr_config_free(cfg);

  cfg = yaml_ok(y, "token");
  has = true;
  assert_int_equal(KCR_OK, kcr__config_credentials(cfg, &c, false, &has, NULL));
  assert_false(has);
  assert_non_null(c.token);
  assert_string_equal("t0", c.token);
  assert_null(c.cert);
  kcr_credentials_cleanup(&c);
  kcr_config_free(cfg);
}

static void kubeconfig_files_resolve_against_its_directory(void **state)
{
  (void)state;
  char *ca = file_text(data_path("certs/ca.crt"));
  char *crt = file_text(data_path("certs/client.crt"));
  char *key = file_text(data_path("certs/client.key"));
  char cwd[4096];
  kcr_config *cfg;
  struct kcr_credentials c;
  size_t len;

  /* From another working directory, to prove paths are not cwd-relative. */
  assert_non_null(getcwd(cwd, sizeof(cwd)));
  assert_int_equal(0, chdir("/"));
  cfg = load_ok(data_path("files.yaml"), NULL);
  assert_int_equal(0, chdir(cwd));
  assert_memory_equal(ca, kcr_config_ca(cfg, &len), strlen(ca));
  assert_int_equal(strlen(ca), len);
  assert_null(kcr_config_namespace(cfg));
  assert_null(kcr_config_tls_server_name(cfg));
  creds_ok(cfg, &c);
  assert_int_equal(strlen(crt), c.cert_len);
  assert_memory_equal(crt, c.cert, c.cert_len);
  assert_int_equal(strlen(key), c.key_len);
  assert_memory_equal(key, c.key, c.key_len);
  kcr_credentials_cleanup(&c);
  kcr_config_free(cfg);
  free(ca);
  free(crt);
  free(key);
}

static void kubeconfig_token_and_insecure(void **state)
{
  (void)state;
  kcr_config *cfg = load_ok(data_path("token.yaml"), NULL);
  struct kcr_credentials c;

  assert_string_equal("http://localhost:8080", kcr_config_server(cfg));
  assert_true(kcr_config_insecure(cfg));
  assert_null(kcr_config_ca(cfg, NULL));
  creds_ok(cfg, &c);
  assert_string_equal("test-token-123", c.token);
  assert_null(c.cert);
  assert_null(c.key);
  kcr_config_free(cfg); /* the snapshot outlives the config */
  assert_string_equal("test-token-123", c.token);
  kcr_credentials_cleanup(&c);
}

static void kubeconfig_current_context_vs_explicit_context(void **state)
{
  (void)state;
  kcr_config *a = load_ok(data_path("contexts.yaml"), NULL);
  kcr_config *b = load_ok(data_path("contexts.yaml"), "b");

  assert_string_equal("https://a.example:6443", kcr_config_server(a));
  assert_string_equal("ns-a", kcr_config_namespace(a));
  assert_false(kcr_config_insecure(a));
  assert_token(a, "token-a");
  assert_string_equal("https://b.example:443", kcr_config_server(b));
  assert_null(kcr_config_namespace(b));
  assert_true(kcr_config_insecure(b));
  assert_token(b, "token-b");
  kcr_config_free(a);
  kcr_config_free(b);
}

static void kubeconfig_explicit_context_not_found(void **state)
{
  (void)state;
  struct kcr_config_opts o = {NULL, "zz", false, NULL};
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  char want[4200];
  kcr_config *cfg;

  o.kubeconfig = data_path("contexts.yaml");
  snprintf(want, sizeof(want), "%s: context \"zz\" not found in contexts", o.kubeconfig);
  assert_int_equal(KCR_ECONFIG, kcr_config_load(&o, &cfg, &ei));
  assert_string_equal(want, ei.message);
  kcr_errinfo_cleanup(&ei);
}

static void kubeconfig_from_yaml_text(void **state)
{
  (void)state;
  /* Folded base64 (as a wrapped plain scalar), flow style, no origin. */
  static const char y[] = "current-context: x\n"
                          "contexts: [{name: x, context: {cluster: c, user: u}}]\n"
                          "clusters:\n- name: c\n  cluster:\n    server: https://h\n"
                          "    certificate-authority-data: aGVs\n      bG8=\n"
                          "users: [{name: u, user: {token: t0}}]\n";
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  kcr_config *cfg;
  size_t len;

  assert_int_equal(KCR_OK, kcr_config_from_yaml(y, strlen(y), NULL, &cfg, &ei));
  assert_string_equal("<kubeconfig>", kcr_config_origin(cfg));
  assert_memory_equal("hello", kcr_config_ca(cfg, &len), 5);
  assert_int_equal(5, len);
  assert_token(cfg, "t0");
  kcr_config_free(cfg);
  assert_string_equal("empty: current-context is not set and no context was given",
                      yaml_error("", "empty"));
  assert_string_equal("list: not a kubeconfig (expected a mapping)",
                      yaml_error("- a\n", "list"));
  /* The options select the context; in_cluster_only reads no text at all. */
  static const char two[] =
      "current-context: x\n"
      "contexts: [{name: x, context: {cluster: c, user: u}},\n"
      "  {name: y, context: {cluster: c, user: u, namespace: ny}}]\n"
      "clusters: [{name: c, cluster: {server: https://h}}]\n"
      "users: [{name: u, user: {token: t0}}]\n";
  assert_int_equal(KCR_OK, kcr_config_from_yaml(two, strlen(two),
                                                &(struct kcr_config_opts){.context = "y"},
                                                &cfg, &ei));
  assert_string_equal("ny", kcr_config_namespace(cfg));
  kcr_config_free(cfg);
  cfg = (kcr_config *)1;
  assert_int_equal(
      KCR_EINVAL, kcr_config_from_yaml(two, strlen(two),
                                       &(struct kcr_config_opts){.in_cluster_only = true},
                                       &cfg, &ei));
  assert_null(cfg);
  assert_non_null(strstr(ei.message, "in_cluster_only"));
  kcr_errinfo_cleanup(&ei);
}

/* A config is reference counted: a client holds its own reference, so the
 * caller may free its config at once, and the last reference frees it. */
static void a_config_lives_as_long_as_its_last_reference(void **state)
{
  static const char y[] = "current-context: x\n"
                          "contexts: [{name: x, context: {cluster: c, user: u}}]\n"
                          "clusters: [{name: c, cluster: {server: https://h}}]\n"
                          "users: [{name: u, user: {token: t0}}]\n";
  kcr_config *cfg, *again;
  kcr_client *c;

  assert_int_equal(KCR_OK, kcr_config_from_yaml(y, strlen(y), NULL, &cfg, NULL));
  again = kcr_config_ref(cfg);
  assert_ptr_equal(cfg, again);
  assert_null(kcr_config_ref(NULL));
  kcr_config_free(again);
  assert_int_equal(KCR_OK,
                   kcr_client_new(&(struct kcr_client_opts){.config = cfg}, &c, NULL));
  kcr_config_free(cfg);
  /* The client's reference keeps it (ASan would report a use after free). */
  assert_string_equal("https://h", kcr_config_server(kcr_client_config(c)));
  assert_token(kcr_client_config(c), "t0");
  kcr_client_free(c);
}

/* --- sources and load order -------------------------------------------- */

static void load_uses_first_existing_kubeconfig_in_env(void **state)
{
  (void)state;
  char list[8192], want[4096];
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  kcr_config *cfg;

  snprintf(want, sizeof(want), "%s", data_path("token.yaml"));
  snprintf(list, sizeof(list), "/nonexistent/one::%s:%s", want, data_path("inline.yaml"));
  setenv("KUBECONFIG", list, 1);
  assert_int_equal(KCR_OK, kcr_config_load(NULL, &cfg, &ei));
  assert_string_equal(want, kcr_config_origin(cfg));
  kcr_config_free(cfg);
}

static void load_falls_back_to_home_kube_config(void **state)
{
  (void)state;
  char dir[128], path[160];
  char *text = file_text(data_path("token.yaml"));
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  kcr_config *cfg;

  snprintf(dir, sizeof(dir), "%s/.kube", g_home);
  snprintf(path, sizeof(path), "%s/config", dir);
  assert_int_equal(0, mkdir(dir, 0700));
  write_file(path, text, 0600);
  free(text);
  /* With $KUBECONFIG unset, ~/.kube/config is used... */
  unsetenv("KUBECONFIG");
  assert_int_equal(KCR_OK, kcr_config_load(NULL, &cfg, &ei));
  assert_string_equal(path, kcr_config_origin(cfg));
  kcr_config_free(cfg);
  /* ...but a $KUBECONFIG naming only missing files is an error, never a
   * silent switch to another cluster's config. */
  setenv("KUBECONFIG", "/nonexistent/a:/nonexistent/b", 1);
  assert_int_equal(KCR_ECONFIG, kcr_config_load(NULL, &cfg, &ei));
  assert_null(cfg);
  assert_string_equal(
      "$KUBECONFIG (/nonexistent/a:/nonexistent/b): no such file; unset it "
      "to use ~/.kube/config or the in-cluster service account",
      ei.message);
  kcr_errinfo_cleanup(&ei);
}

static void load_explicit_path_errors_are_final(void **state)
{
  (void)state;
  struct kcr_config_opts o = {"/nonexistent/kubeconfig", NULL, false, NULL};
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  kcr_config *cfg;

  setenv("KUBECONFIG", data_path("token.yaml"), 1); /* not a fallback */
  assert_int_equal(KCR_ECONFIG, kcr_config_load(&o, &cfg, &ei));
  assert_null(cfg);
  assert_string_equal("/nonexistent/kubeconfig: cannot read kubeconfig: No such file or "
                      "directory",
                      ei.message);
  kcr_errinfo_cleanup(&ei);
}

static void load_reports_when_nothing_is_found(void **state)
{
  (void)state;
  struct kcr_config_opts in = {NULL, NULL, true, NULL};
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  kcr_config *cfg;

  unsetenv("KUBECONFIG");
  assert_int_equal(KCR_ECONFIG, kcr_config_load(NULL, &cfg, &ei));
  assert_string_equal("no kubeconfig found (tried $KUBECONFIG, ~/.kube/config) and not "
                      "running in a cluster (KUBERNETES_SERVICE_HOST is unset)",
                      ei.message);
  assert_int_equal(KCR_ECONFIG, kcr_config_load(&in, &cfg, &ei));
  assert_string_equal("not running in a cluster (KUBERNETES_SERVICE_HOST is unset)",
                      ei.message);
  kcr_errinfo_cleanup(&ei);
}

/* --- malformed kubeconfigs --------------------------------------------- */

static void malformed_yaml_names_line_and_column(void **state)
{
  (void)state;
  load_fails("bad-syntax.yaml", KCR_ECONFIG,
             "line 4 column 2: YAML syntax error: did not find expected key");
}

static void malformed_missing_server(void **state)
{
  (void)state;
  load_fails("missing-server.yaml", KCR_ECONFIG, "clusters[0].cluster.server is missing");
}

static void malformed_unknown_current_context(void **state)
{
  (void)state;
  load_fails("unknown-context.yaml", KCR_ECONFIG,
             "current-context \"nope\" not found in contexts");
}

static void malformed_bad_base64(void **state)
{
  (void)state;
  load_fails("bad-base64.yaml", KCR_ECONFIG,
             "users[1].user.client-key-data: invalid base64");
}

static void malformed_cert_without_key(void **state)
{
  (void)state;
  load_fails(
      "cert-without-key.yaml", KCR_ECONFIG,
      "users[0].user: client-certificate-data is set but client-key-data is missing");
}

static void malformed_missing_referenced_file(void **state)
{
  (void)state;
  char want[4200];
  char dir[4096];

  snprintf(dir, sizeof(dir), "%s", data_path(""));
  snprintf(
      want, sizeof(want),
      "clusters[0].cluster.certificate-authority %sno-such-dir/ca.crt: No such file or "
      "directory",
      dir);
  load_fails("missing-file.yaml", KCR_ECONFIG, want);
}

static void malformed_non_http_scheme(void **state)
{
  (void)state;
  load_fails(
      "bad-scheme.yaml", KCR_ECONFIG,
      "clusters[0].cluster.server \"ftp://c.example\": must start with https:// or "
      "http://");
}

static void malformed_wrong_types(void **state)
{
  (void)state;
  static const char y1[] = "current-context: x\ncontexts: {x: 1}\n";
  static const char y2[] = "current-context: x\n"
                           "contexts: [{name: x, context: {cluster: c}}]\n"
                           "clusters: [{name: c, cluster: {server: https://h, "
                           "insecure-skip-tls-verify: maybe}}]\n";
  static const char y3[] = "current-context: x\n"
                           "contexts: [{name: x, context: {cluster: c, user: nobody}}]\n"
                           "clusters: [{name: c, cluster: {server: https://h}}]\n";

  assert_string_equal("/k: contexts: expected a list", yaml_error(y1, "/k"));
  assert_string_equal(
      "/k: clusters[0].cluster.insecure-skip-tls-verify: expected true or "
      "false",
      yaml_error(y2, "/k"));
  assert_string_equal("/k: contexts[0].context.user \"nobody\" not found in users",
                      yaml_error(y3, "/k"));
}

static void malformed_insecure_with_a_ca(void **state)
{
  (void)state;
  static const char with_file[] = "current-context: x\n"
                                  "contexts: [{name: x, context: {cluster: c}}]\n"
                                  "clusters: [{name: c, cluster: {server: https://h, "
                                  "insecure-skip-tls-verify: true, "
                                  "certificate-authority: /nonexistent/ca.crt}}]\n";
  static const char ca_only[] = "current-context: x\n"
                                "contexts: [{name: x, context: {cluster: c}}]\n"
                                "clusters: [{name: c, cluster: {server: https://h, "
                                "insecure-skip-tls-verify: false, "
                                "certificate-authority-data: aGVsbG8=}}]\n";
  kcr_config *cfg;

  /* kubectl refuses the combination: the CA would be silently ignored. */
  load_fails("insecure-with-ca.yaml", KCR_ECONFIG,
             "clusters[0].cluster.certificate-authority-data: cannot be used with "
             "insecure-skip-tls-verify: true (a CA is ignored when verification is off; "
             "remove one of them)");
  /* The combination is named before the CA file is even looked for. */
  assert_string_equal(
      "/k: clusters[0].cluster.certificate-authority: cannot be used with "
      "insecure-skip-tls-verify: true (a CA is ignored when verification "
      "is off; remove one of them)",
      yaml_error(with_file, "/k"));
  /* A CA with verification on is the normal case. */
  cfg = yaml_ok(ca_only, "/k");
  assert_false(kcr_config_insecure(cfg));
  kcr_config_free(cfg);
}

static void malformed_tls_server_name(void **state)
{
  (void)state;
  static const char fmt[] =
      "current-context: x\n"
      "contexts: [{name: x, context: {cluster: c}}]\n"
      "clusters: [{name: c, cluster: {server: https://127.0.0.1:6443, "
      "tls-server-name: '%s'}}]\n";
  static const char *const good[] = {"kubernetes.default.svc", "localhost", "10.0.0.1",
                                     "::1", "api_server.example"};
  static const char *const bad[] = {"h:443", "a b", "-x", "https://h", "h/x", ".h"};
  char y[512], want[256];
  kcr_config *cfg;

  for(size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
    snprintf(y, sizeof(y), fmt, good[i]);
    cfg = yaml_ok(y, "/k");
    assert_string_equal(good[i], kcr_config_tls_server_name(cfg));
    kcr_config_free(cfg);
  }
  for(size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    snprintf(y, sizeof(y), fmt, bad[i]);
    snprintf(want, sizeof(want),
             "/k: clusters[0].cluster.tls-server-name \"%s\": not a host name or IP "
             "address",
             bad[i]);
    assert_string_equal(want, yaml_error(y, "/k"));
  }
}

/* clusters[].cluster.proxy-url, as client-go's clientcmd takes it: http,
 * https or socks5 (d7: it was not read at all). A message about a bad one
 * names its scheme, never the URL (it may hold a password). */
static void proxy_url_is_read_and_checked(void **state)
{
  (void)state;
  static const char fmt[] = "current-context: x\n"
                            "contexts: [{name: x, context: {cluster: c}}]\n"
                            "clusters: [{name: c, cluster: {server: https://h%s%s%s}}]\n";
  static const char *const good[] = {"http://proxy.example:3128",
                                     "https://u:pw@proxy:443", "socks5://127.0.0.1:1080",
                                     "HTTP://Proxy"};
  static const struct {
    const char *url, *want;
  } bad[] = {
      {"ftp://u:secret@proxy", "/k: clusters[0].cluster.proxy-url: unsupported scheme "
                               "\"ftp\", must be http, https, or socks5"},
      {"proxy.example:3128", "/k: clusters[0].cluster.proxy-url: unsupported scheme "
                             "\"proxy.example\", must be http, https, or socks5"},
      {"u:secret@proxy", "/k: clusters[0].cluster.proxy-url: unsupported scheme \"u\", "
                         "must be http, https, or socks5"},
      {"proxy", "/k: clusters[0].cluster.proxy-url: unsupported scheme \"\", must be "
                "http, https, or socks5"},
      {"socks5://", "/k: clusters[0].cluster.proxy-url: no host"},
      {"http:///x", "/k: clusters[0].cluster.proxy-url: no host"},
  };
  char y[512];
  kcr_config *cfg;

  snprintf(y, sizeof(y), fmt, "", "", "");
  cfg = yaml_ok(y, "/k");
  assert_null(kcr_config_proxy_url(cfg));
  kcr_config_free(cfg);
  snprintf(y, sizeof(y), fmt, ", proxy-url: ''", "", "");
  cfg = yaml_ok(y, "/k"); /* empty: none, as client-go */
  assert_null(kcr_config_proxy_url(cfg));
  kcr_config_free(cfg);
  for(size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
    snprintf(y, sizeof(y), fmt, ", proxy-url: '", good[i], "'");
    cfg = yaml_ok(y, "/k");
    assert_string_equal(good[i], kcr_config_proxy_url(cfg));
    kcr_config_free(cfg);
  }
  for(size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    snprintf(y, sizeof(y), fmt, ", proxy-url: '", bad[i].url, "'");
    assert_string_equal(bad[i].want, yaml_error(y, "/k"));
  }
  snprintf(y, sizeof(y), fmt, ", proxy-url: [", "x", "]");
  assert_string_equal("/k: clusters[0].cluster.proxy-url: expected a string",
                      yaml_error(y, "/k"));
}

/* --- token file -------------------------------------------------------- */

static const char token_file_yaml[] =
    "current-context: x\n"
    "contexts: [{name: x, context: {cluster: c, user: u}}]\n"
    "clusters: [{name: c, cluster: {server: https://h}}]\n"
    "users: [{name: u, user: {tokenFile: tok}}]\n";

static void token_file_is_reread_after_rotation(void **state)
{
  (void)state;
  kcr_config *cfg;

  write_file(tmp_path("tok"), "first-token\n", 0600);
  cfg = yaml_ok(token_file_yaml, tmp_path("config"));
  assert_token(cfg, "first-token");
  /* After a 401 the client invalidates: the new token is read at once. */
  write_file(tmp_path("tok"), "second-token\n", 0600);
  kcr_config_invalidate(cfg);
  assert_token(cfg, "second-token");
  /* Without invalidate: seen once the re-check interval (1 s) has passed. */
  write_file(tmp_path("tok"), "  third-token-rotated  \n", 0600);
  usleep(1100 * 1000);
  assert_token(cfg, "third-token-rotated");
  /* A vanished file keeps the last good token. */
  kcr_log_set_level(KCR_LOG_OFF);
  assert_int_equal(0, unlink(tmp_path("tok")));
  kcr_config_invalidate(cfg);
  assert_token(cfg, "third-token-rotated");
  kcr_config_free(cfg);
}

static void token_file_is_checked_at_most_once_per_interval(void **state)
{
  (void)state;
  kcr_config *cfg;

  write_file(tmp_path("tok"), "first-token\n", 0600);
  cfg = yaml_ok(token_file_yaml, tmp_path("config"));
  kcr__config_set_token_recheck_ms(cfg, 3600 * 1000);
  kcr_config_invalidate(cfg); /* restart the interval with the long setting */
  assert_token(cfg, "first-token");
  write_file(tmp_path("tok"), "second-token\n", 0600);
  assert_token(cfg, "first-token"); /* not looked at again yet */
  kcr_config_invalidate(cfg);
  assert_token(cfg, "second-token");
  kcr_config_free(cfg);
}

static void token_file_missing_at_load_is_an_error(void **state)
{
  (void)state;
  char want[256];
  const char *msg;

  snprintf(want, sizeof(want),
           "%s: users[0].user.tokenFile %s: No such file or directory",
           tmp_path("config"), tmp_path("tok"));
  assert_string_equal(want, yaml_error(token_file_yaml, tmp_path("config")));
  write_file(tmp_path("tok"), " \n", 0600);
  msg = yaml_error(token_file_yaml, tmp_path("config"));
  assert_non_null(strstr(msg, "tokenFile"));
  assert_non_null(strstr(msg, ": file is empty"));
}

/* A NUL byte cannot be in a C string: a kubeconfig string holding one (a
 * double-quoted YAML scalar's "\0" or "\x00"), or a token file's, is refused
 * naming the field, never cut short at the NUL ("abc\0def" read as "abc"). */
static void a_nul_in_a_kubeconfig_string_is_refused(void **state)
{
  (void)state;
  static const char fmt[] = "current-context: x\n"
                            "contexts: [{name: x, context: {cluster: c, user: u}}]\n"
                            "clusters: [{name: c, cluster: {server: %s}}]\n"
                            "users: [{name: u, user: {%s}}]\n";
  static const struct {
    const char *server, *user, *want;
  } cases[] = {
      {"https://h", "token: \"abc\\0def\"",
       "/k: users[0].user.token: holds a NUL byte (\\0), which no string here can hold"},
      {"https://h", "token: \"abc\\x00\"", "/k: users[0].user.token: holds a NUL byte"},
      {"\"https://h\\0.evil\"", "token: t",
       "/k: clusters[0].cluster.server: holds a NUL byte"},
      {"https://h",
       "exec: {apiVersion: client.authentication.k8s.io/v1, command: ./p, "
       "args: [a, \"b\\0c\"]}",
       "/k: users[0].user.exec.args[1]: holds a NUL byte"},
      {"https://h",
       "exec: {apiVersion: client.authentication.k8s.io/v1, command: ./p, "
       "env: [{name: A, value: \"s\\0\"}]}",
       "/k: users[0].user.exec.env[0].value: holds a NUL byte"},
  };
  char y[1024];

  for(size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    const char *msg;
    snprintf(y, sizeof(y), fmt, cases[i].server, cases[i].user);
    msg = yaml_error(y, "/k");
    if(strncmp(msg, cases[i].want, strlen(cases[i].want)))
      fail_msg("case %zu: %s\n  want %s...", i, msg, cases[i].want);
    assert_null(strstr(msg, "abc")); /* the value is never quoted */
  }
  /* "\\0" is a backslash and a zero, no NUL */
  snprintf(y, sizeof(y), fmt, "https://h", "token: \"abc\\\\0def\"");
  kcr_config *cfg = yaml_ok(y, "/k");
  assert_token(cfg, "abc\\0def");
  kcr_config_free(cfg);

  /* a token file: a NUL inside the token (surrounding white space aside) */
  FILE *f = fopen(tmp_path("tok"), "wb");
  assert_non_null(f);
  assert_int_equal(8, fwrite("abc\0def\n", 1, 8, f));
  assert_int_equal(0, fclose(f));
  const char *msg = yaml_error(token_file_yaml, tmp_path("config"));
  assert_non_null(strstr(msg, "tokenFile"));
  assert_non_null(strstr(msg, ": the token holds a NUL byte, which no token can hold"));
}

/* --- exec plugins ------------------------------------------------------ */

/* Counts its runs in ./count, records what it was given, and prints an
 * ExecCredential whose expiry comes from ./expiry (none if empty). */
static const char plugin_sh[] =
    "#!/bin/sh\n"
    "dir=${0%/*}\n"
    "n=$(cat \"$dir/count\" 2>/dev/null || echo 0)\n"
    "n=$((n + 1))\n"
    "echo $n > \"$dir/count\"\n"
    "printf '%s' \"$KUBERNETES_EXEC_INFO\" > \"$dir/exec-info\"\n"
    "printf '%s|%s|%s' \"$1\" \"$2\" \"$KCR_TEST_ENV\" > \"$dir/seen\"\n"
    "exp=$(cat \"$dir/expiry\" 2>/dev/null)\n"
    "[ -n \"$exp\" ] && exp=\",\\\"expirationTimestamp\\\":\\\"$exp\\\"\"\n"
    "printf '{\"apiVersion\":\"client.authentication.k8s.io/v1\",'\n"
    "printf '\"kind\":\"ExecCredential\",\"status\":{\"token\":\"exec-token-%s\"%s}}\\n' "
    "\"$n\" \"$exp\"\n";

static const char cert_plugin_sh[] =
    "#!/bin/sh\n"
    "dir=${0%/*}\n"
    "v=$(cat \"$dir/certver\")\n"
    "printf '{\"apiVersion\":\"client.authentication.k8s.io/v1beta1\",'\n"
    "printf '\"kind\":\"ExecCredential\",\"status\":{'\n"
    "printf '\"clientCertificateData\":\"-----BEGIN CERTIFICATE-----\\\\n%s\\\\n'"
    " \"$v\"\n"
    "printf '%s' '-----END CERTIFICATE-----\\n\",'\n"
    "printf '\"clientKeyData\":\"KEY %s\"}}' \"$v\"\n";

static const char exec_yaml_fmt[] =
    "current-context: x\n"
    "contexts: [{name: x, context: {cluster: c, user: me}}]\n"
    "clusters: [{name: c, cluster: {server: https://h}}]\n"
    "users:\n"
    "- name: me\n"
    "  user:\n"
    "    exec:\n"
    "      apiVersion: client.authentication.k8s.io/%s\n"
    "      command: ./%s\n"
    "      args: [first, \"second arg\"]\n"
    "      env:\n"
    "      - name: KCR_TEST_ENV\n"
    "        value: from-kubeconfig\n"
    "      interactiveMode: IfAvailable\n";

/* Writes plugin `name` with `script` into the temp dir and loads a config
 * whose user runs it. */
static kcr_config *exec_config(const char *name, const char *script, const char *api)
{
  char yaml[2048];
  kcr_config *cfg = NULL;

  write_file(tmp_path(name), script, 0755);
  snprintf(yaml, sizeof(yaml), exec_yaml_fmt, api, name);
  cfg = yaml_ok(yaml, tmp_path("config"));
  kcr__config_set_exec_timeout_ms(cfg, 5000);
  return cfg;
}

/* Expects the credentials call to fail with rc; returns the message. */
static char *creds_fail(kcr_config *cfg, kcr_err want)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  struct kcr_credentials c;
  char *msg;

  assert_int_equal(want, kcr_config_dup_credentials(cfg, &c, &ei));
  assert_null(c.token);
  assert_non_null(ei.message);
  msg = strdup(ei.message);
  kcr_errinfo_cleanup(&ei);
  return msg;
}

static void exec_plugin_token_is_cached_until_invalidate(void **state)
{
  (void)state;
  kcr_config *cfg;
  char *info, *seen;

  write_file(tmp_path("expiry"), "", 0600); /* no expiry: cached until invalidate */
  cfg = exec_config("plugin.sh", plugin_sh, "v1");
  assert_token(cfg, "exec-token-1");
  assert_token(cfg, "exec-token-1");
  assert_int_equal(1, read_count());
  kcr_config_invalidate(cfg);
  assert_token(cfg, "exec-token-2");
  assert_int_equal(2, read_count());
  info = file_text(tmp_path("exec-info"));
  assert_string_equal("{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":"
                      "\"ExecCredential\",\"spec\":{\"interactive\":false}}",
                      info);
  seen = file_text(tmp_path("seen"));
  assert_string_equal("first|second arg|from-kubeconfig", seen);
  free(info);
  free(seen);
  kcr_config_free(cfg);
}

static void exec_plugin_reruns_when_expired(void **state)
{
  (void)state;
  char soon[KCR_RFC3339_LEN];
  kcr_config *cfg;

  write_file(tmp_path("expiry"), "2001-01-01T00:00:00Z", 0600); /* already expired */
  cfg = exec_config("plugin.sh", plugin_sh, "v1");
  assert_token(cfg, "exec-token-1");
  assert_token(cfg, "exec-token-2");
  /* Inside the refresh margin (made an hour here, so that nothing expires
   * while the test runs), the cached token is still handed out, and a
   * refresh starts in the background. */
  kcr__config_set_exec_margin_s(cfg, 3600);
  kcr_time_format(kcr_time_now() + 1800, soon);
  write_file(tmp_path("expiry"), soon, 0600);
  assert_token(cfg, "exec-token-3"); /* token 2 expired: run 3, in the caller */
  write_file(tmp_path("expiry"), "2999-01-01T00:00:00+02:00", 0600);
  assert_token(cfg, "exec-token-3"); /* due: run 4 in the background */
  kcr__config_exec_quiesce(cfg);
  /* Far in the future: cached. */
  assert_token(cfg, "exec-token-4");
  assert_token(cfg, "exec-token-4");
  assert_int_equal(4, read_count());
  kcr_config_free(cfg);
}

static void exec_plugin_certificate_bumps_generation(void **state)
{
  (void)state;
  static const char want_cert[] =
      "-----BEGIN CERTIFICATE-----\nv1\n-----END CERTIFICATE-----\n";
  struct kcr_credentials c;
  kcr_config *cfg;
  unsigned long g1;

  write_file(tmp_path("certver"), "v1", 0600);
  cfg = exec_config("cert.sh", cert_plugin_sh, "v1beta1");
  creds_ok(cfg, &c);
  assert_null(c.token);
  assert_int_equal(strlen(want_cert), c.cert_len);
  assert_memory_equal(want_cert, c.cert, c.cert_len);
  assert_int_equal(6, c.key_len);
  assert_memory_equal("KEY v1", c.key, 6);
  g1 = c.generation;
  kcr_credentials_cleanup(&c);
  kcr_config_invalidate(cfg); /* same certificate again: same generation */
  creds_ok(cfg, &c);
  assert_int_equal(g1, c.generation);
  kcr_credentials_cleanup(&c);
  write_file(tmp_path("certver"), "v2", 0600);
  kcr_config_invalidate(cfg);
  creds_ok(cfg, &c);
  assert_int_not_equal(g1, c.generation);
  assert_memory_equal("KEY v2", c.key, 6);
  kcr_credentials_cleanup(&c);
  kcr_config_free(cfg);
}

/* Plugins print tokens on stderr when they fail (and signed URLs, and
 * refresh tokens): the message counts those bytes and quotes none of them,
 * as client-go's "executable X failed with exit code N". */
static void exec_plugin_failure_quotes_neither_stdout_nor_stderr(void **state)
{
  (void)state;
  kcr_config *cfg = exec_config("fail.sh",
                                "#!/bin/sh\n"
                                "echo '{\"status\":{\"token\":\"leaked-secret\"}}'\n"
                                "echo 'warming up' >&2\n"
                                "echo 'login failed: token stderr-secret expired' >&2\n"
                                "exit 1\n",
                                "v1");
  char want[512], *msg = creds_fail(cfg, KCR_EIO);

  snprintf(want, sizeof(want),
           "%s: users[0].user.exec (user \"me\"): exec plugin './fail.sh' exited with "
           "status 1 (it wrote 53 bytes on stderr, not shown because plugins print "
           "credentials there; run the command by hand to see them)",
           tmp_path("config"));
  assert_string_equal(want, msg);
  assert_null(strstr(msg, "leaked-secret"));
  assert_null(strstr(msg, "stderr-secret"));
  free(msg);
  kcr_config_free(cfg);
}

static void exec_plugin_garbage_output_is_a_parse_error(void **state)
{
  (void)state;
  kcr_config *cfg =
      exec_config("garbage.sh", "#!/bin/sh\necho 'this is not json'\n", "v1");
  char *msg = creds_fail(cfg, KCR_EPARSE);

  assert_non_null(strstr(msg, tmp_path("config")));
  assert_non_null(strstr(msg, "exec plugin './garbage.sh' printed something that is not "
                              "an ExecCredential (malformed JSON at byte 0 of 17)"));
  free(msg);
  kcr_config_free(cfg);
}

/* The ExecCredential is JSON from a program, not from the apiserver: a
 * token holding \u0000 is refused by name (it was cut to "abc"), a member
 * name holding it is malformed, and of two "token" members the last counts,
 * as in client-go's decoder. */
static void exec_plugin_nul_in_token_is_refused(void **state)
{
  (void)state;
  static const char head[] = "#!/bin/sh\nprintf '%s' '{\"apiVersion\":"
                             "\"client.authentication.k8s.io/v1\",\"kind\":"
                             "\"ExecCredential\",\"status\":{";
  static const struct {
    const char *status, *want;
  } cases[] = {
      {"\"token\":\"abc\\u0000def\"",
       "exec plugin './nul.sh' returned a status.token holding \\u0000"},
      {"\"clientCertificateData\":\"c\\u0000\",\"clientKeyData\":\"k\"",
       "returned a status.clientCertificateData holding \\u0000"},
      {"\"token\":\"abc\",\"token\\u0000\":\"def\"",
       "printed something that is not an ExecCredential (JSON member name at byte "},
  };
  char script[512];

  for(size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    snprintf(script, sizeof(script), "%s%s}}'\n", head, cases[i].status);
    kcr_config *cfg = exec_config("nul.sh", script, "v1");
    char *msg = creds_fail(cfg, KCR_EPARSE);
    if(!strstr(msg, cases[i].want))
      fail_msg("case %zu: %s\n  want ...%s...", i, msg, cases[i].want);
    assert_null(strstr(msg, "abc"));
    free(msg);
    kcr_config_free(cfg);
  }
  snprintf(script, sizeof(script), "%s%s}}'\n", head,
           "\"token\":\"first\",\"token\":\"second\"");
  kcr_config *cfg = exec_config("dup.sh", script, "v1");
  assert_token(cfg, "second");
  kcr_config_free(cfg);
}

static void exec_plugin_wrong_api_version_or_kind(void **state)
{
  (void)state;
  kcr_config *cfg = exec_config(
      "old.sh",
      "#!/bin/sh\necho '{\"apiVersion\":\"client.authentication.k8s.io/v1beta1\","
      "\"kind\":\"ExecCredential\",\"status\":{\"token\":\"x\"}}'\n",
      "v1");
  char *msg = creds_fail(cfg, KCR_EPARSE);

  assert_non_null(strstr(msg, "exec plugin './old.sh' returned apiVersion "
                              "\"client.authentication.k8s.io/v1beta1\", expected "
                              "\"client.authentication.k8s.io/v1\""));
  free(msg);
  kcr_config_free(cfg);
  cfg =
      exec_config("kind.sh",
                  "#!/bin/sh\necho '{\"apiVersion\":\"client.authentication.k8s.io/v1\","
                  "\"kind\":\"Status\"}'\n",
                  "v1");
  msg = creds_fail(cfg, KCR_EPARSE);
  assert_non_null(strstr(msg, "returned kind \"Status\", expected \"ExecCredential\""));
  free(msg);
  kcr_config_free(cfg);
  cfg =
      exec_config("empty.sh",
                  "#!/bin/sh\necho '{\"apiVersion\":\"client.authentication.k8s.io/v1\","
                  "\"kind\":\"ExecCredential\",\"status\":{}}'\n",
                  "v1");
  msg = creds_fail(cfg, KCR_EPARSE);
  assert_non_null(strstr(msg, "returned neither status.token nor "
                              "status.clientCertificateData/clientKeyData"));
  free(msg);
  kcr_config_free(cfg);
}

static void exec_plugin_not_in_path(void **state)
{
  (void)state;
  kcr_config *cfg = load_ok(data_path("exec-missing.yaml"), NULL);
  char want[4200], *msg = creds_fail(cfg, KCR_ECONFIG);

  snprintf(want, sizeof(want),
           "%s: users[0].user.exec (user \"sso-user\"): exec plugin 'kcr-no-such-plugin' "
           "not found in PATH: install kcr-no-such-plugin from your IT portal",
           data_path("exec-missing.yaml"));
  assert_string_equal(want, msg);
  free(msg);
  kcr_config_free(cfg);
}

static void exec_plugin_relative_command_missing_or_not_executable(void **state)
{
  (void)state;
  kcr_config *cfg = exec_config("noexec.sh", "#!/bin/sh\n", "v1");
  char want[512], *msg;

  assert_int_equal(0, chmod(tmp_path("noexec.sh"), 0644));
  msg = creds_fail(cfg, KCR_ECONFIG);
  snprintf(want, sizeof(want),
           "%s: users[0].user.exec (user \"me\"): cannot run exec plugin './noexec.sh': "
           "Permission denied",
           tmp_path("config"));
  assert_string_equal(want, msg);
  free(msg);
  assert_int_equal(0, unlink(tmp_path("noexec.sh")));
  msg = creds_fail(cfg, KCR_ECONFIG);
  snprintf(want, sizeof(want),
           "%s: users[0].user.exec (user \"me\"): exec plugin './noexec.sh' not found "
           "(%s/./noexec.sh)",
           tmp_path("config"), g_tmp);
  assert_string_equal(want, msg);
  free(msg);
  kcr_config_free(cfg);
}

static void exec_plugin_interactive_always_is_refused(void **state)
{
  (void)state;
  load_fails("exec-always.yaml", KCR_ECONFIG,
             "users[0].user.exec.interactiveMode is \"Always\", but a controller has no "
             "terminal to prompt on; use \"Never\" or \"IfAvailable\"");
}

static void exec_plugin_is_killed_after_timeout(void **state)
{
  (void)state;
  kcr_config *cfg =
      exec_config("hang.sh", "#!/bin/sh\necho waiting >&2\nsleep 30\n", "v1");
  uint64_t t0 = kcr_time_mono_ms();
  char *msg;

  kcr__config_set_exec_timeout_ms(cfg, 300);
  msg = creds_fail(cfg, KCR_ETIMEDOUT);
  assert_true(kcr_time_mono_ms() - t0 < 5000);
  assert_non_null(strstr(msg, "exec plugin './hang.sh' did not finish within 300 ms and "
                              "was killed ("));
  assert_null(strstr(msg, "waiting")); /* its stderr */
  free(msg);
  kcr_config_free(cfg);
}

static void exec_plugin_output_is_capped(void **state)
{
  (void)state;
  kcr_config *cfg = exec_config(
      "flood.sh", "#!/bin/sh\nwhile :; do echo xxxxxxxxxxxxxxxx; done\n", "v1");
  char *msg = creds_fail(cfg, KCR_EPARSE);

  assert_non_null(strstr(msg, "exec plugin './flood.sh' printed more than 1048576 bytes "
                              "on stdout and was killed"));
  free(msg);
  kcr_config_free(cfg);
}

static void exec_plugin_logs_refresh_without_the_token(void **state)
{
  (void)state;
  kcr_config *cfg;
  char *log;
  FILE *f = fopen(tmp_path("log"), "w+");

  assert_non_null(f);
  write_file(tmp_path("expiry"), "", 0600);
  cfg = exec_config("plugin.sh", plugin_sh, "v1");
  kcr_log_set_fd(fileno(f));
  kcr_log_set_level(KCR_LOG_DEBUG);
  assert_token(cfg, "exec-token-1");
  kcr_log_set_level(KCR_LOG_INFO);
  kcr_log_set_fd(2);
  fclose(f);
  log = file_text(tmp_path("log"));
  assert_non_null(strstr(log, "exec plugin refreshed credentials"));
  assert_null(strstr(log, "exec-token"));
  free(log);
  kcr_config_free(cfg);
}

struct race {
  kcr_config *cfg;
  char token[64];
};

static void *race_thread(void *arg)
{
  struct race *r = arg;
  struct kcr_credentials c;
  if(!kcr_config_dup_credentials(r->cfg, &c, NULL) && c.token)
    snprintf(r->token, sizeof(r->token), "%s", c.token);
  kcr_credentials_cleanup(&c);
  return NULL;
}

static void exec_plugin_runs_once_for_concurrent_callers(void **state)
{
  (void)state;
  struct race r[8];
  pthread_t t[8];
  kcr_config *cfg;

  write_file(tmp_path("expiry"), "2999-01-01T00:00:00Z", 0600);
  cfg = exec_config("plugin.sh", plugin_sh, "v1");
  for(int i = 0; i < 8; i++) {
    r[i].cfg = cfg;
    r[i].token[0] = '\0';
    assert_int_equal(0, pthread_create(&t[i], NULL, race_thread, &r[i]));
  }
  for(int i = 0; i < 8; i++) {
    pthread_join(t[i], NULL);
    assert_string_equal("exec-token-1", r[i].token);
  }
  assert_int_equal(1, read_count());
  kcr_config_free(cfg);
}

/* A plugin whose runs can be held open: while ./block exists a run says
 * "started" on the FIFO ./started and waits for a line on the FIFO ./release
 * before it answers; with ./fail it then fails. Runs are counted in ./count
 * and the expiry comes from ./expiry, read after the release. */
static const char slow_plugin_sh[] =
    "#!/bin/sh\n"
    "dir=${0%/*}\n"
    "n=$(cat \"$dir/count\" 2>/dev/null || echo 0)\n"
    "n=$((n + 1))\n"
    "echo $n > \"$dir/count\"\n"
    "if [ -e \"$dir/block\" ]; then\n"
    "  echo started > \"$dir/started\"\n"
    "  read go < \"$dir/release\"\n"
    "fi\n"
    "if [ -e \"$dir/fail\" ]; then echo 'login failed' >&2; exit 1; fi\n"
    "printf '{\"apiVersion\":\"client.authentication.k8s.io/v1\",'\n"
    "printf '\"kind\":\"ExecCredential\",\"status\":{\"token\":\"exec-token-%s\",' "
    "\"$n\"\n"
    "printf '\"expirationTimestamp\":\"%s\"}}\\n' \"$(cat \"$dir/expiry\")\"\n";

/* The test's ends of the FIFOs, opened read-write so that no open blocks,
 * on either side. */
struct gate {
  int started, release;
};

static void gate_open(struct gate *g)
{
  assert_int_equal(0, mkfifo(tmp_path("started"), 0600));
  assert_int_equal(0, mkfifo(tmp_path("release"), 0600));
  g->started = open(tmp_path("started"), O_RDWR | O_CLOEXEC);
  g->release = open(tmp_path("release"), O_RDWR | O_CLOEXEC);
  assert_true(g->started >= 0 && g->release >= 0);
}

/* Waits (10 s at most) until a held run has started. */
static bool gate_wait_started(struct gate *g)
{
  struct pollfd pf = {g->started, POLLIN, 0};
  char line[16];
  return poll(&pf, 1, 10000) == 1 && read(g->started, line, sizeof(line)) > 0;
}

/* Lets held runs go (and no later run wait). */
static void gate_release(struct gate *g)
{
  unlink(tmp_path("block"));
  assert_int_equal(9, write(g->release, "go\ngo\ngo\n", 9));
}

static void gate_close(struct gate *g)
{
  close(g->started);
  close(g->release);
}

/* kcr_config_dup_credentials on a thread of its own. */
struct caller {
  kcr_config *cfg;
  pthread_t t;
  kcr_err rc;
  bool done;
  char token[64], msg[512];
};

static pthread_mutex_t callers_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t callers_cv = PTHREAD_COND_INITIALIZER;

static void *caller_main(void *arg)
{
  struct caller *c = arg;
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  struct kcr_credentials cr;
  kcr_err rc = kcr_config_dup_credentials(c->cfg, &cr, &ei);

  pthread_mutex_lock(&callers_mu);
  c->rc = rc;
  snprintf(c->token, sizeof(c->token), "%s", cr.token ? cr.token : "");
  snprintf(c->msg, sizeof(c->msg), "%s", ei.message ? ei.message : "");
  c->done = true;
  pthread_cond_broadcast(&callers_cv);
  pthread_mutex_unlock(&callers_mu);
  kcr_credentials_cleanup(&cr);
  kcr_errinfo_cleanup(&ei);
  return NULL;
}

static void caller_start(struct caller *c, kcr_config *cfg)
{
  memset(c, 0, sizeof(*c));
  c->cfg = cfg;
  assert_int_equal(0, pthread_create(&c->t, NULL, caller_main, c));
}

/* Whether the call returned within ms. */
static bool caller_returns_within(struct caller *c, long ms)
{
  struct timespec ts;
  bool done;

  clock_gettime(CLOCK_REALTIME, &ts);
  ts.tv_sec += ms / 1000;
  ts.tv_nsec += (ms % 1000) * 1000000L;
  if(ts.tv_nsec >= 1000000000L) {
    ts.tv_sec++;
    ts.tv_nsec -= 1000000000L;
  }
  pthread_mutex_lock(&callers_mu);
  while(!c->done && pthread_cond_timedwait(&callers_cv, &callers_mu, &ts) == 0)
    ;
  done = c->done;
  pthread_mutex_unlock(&callers_mu);
  return done;
}

/* Whether n threads are waiting for the plugin run within 10 s. */
static bool waiters_reach(kcr_config *cfg, int n)
{
  uint64_t end = kcr_time_mono_ms() + 10000;
  while(kcr__config_exec_waiters(cfg) != n) {
    if(kcr_time_mono_ms() > end)
      return false;
    usleep(1000); /* polling a condition, with a deadline */
  }
  return true;
}

/* Loads the slow plugin with a token that is due for refresh from the start
 * (an hour's margin) but valid for the whole test (half an hour left), and
 * makes run 1. */
static kcr_config *slow_config(void)
{
  char exp[KCR_RFC3339_LEN];
  kcr_config *cfg;

  kcr_time_format(kcr_time_now() + 1800, exp);
  write_file(tmp_path("expiry"), exp, 0600);
  cfg = exec_config("slow.sh", slow_plugin_sh, "v1");
  kcr__config_set_exec_timeout_ms(cfg, 60000);
  kcr__config_set_exec_margin_s(cfg, 3600);
  assert_token(cfg, "exec-token-1");
  return cfg;
}

/* Item 5 of issue 8: the plugin ran with the config's mutex held, so every
 * request waited behind it (a lease renewal with a 10 s deadline behind a
 * plugin allowed 60 s). */
static void exec_plugin_refresh_holds_up_no_caller_with_valid_credentials(void **state)
{
  (void)state;
  struct caller a, b, c[3];
  struct gate g;
  kcr_config *cfg;
  bool a_ok, b_ok = false, started, waiting = false;

  gate_open(&g);
  cfg = slow_config();
  write_file(tmp_path("block"), "", 0600); /* run 2 will wait for the release */
  /* Due for refresh: the caller gets its valid token at once (10 s is the
   * bound for "at once"; run 2 is held until the release), and run 2 starts
   * in the background. */
  caller_start(&a, cfg);
  a_ok = caller_returns_within(&a, 10000);
  started = gate_wait_started(&g);
  if(a_ok && started) { /* else the test has failed: unwind at once */
    /* While run 2 is held open, another caller is not held up either. */
    caller_start(&b, cfg);
    b_ok = caller_returns_within(&b, 10000);
    /* After a 401 nothing cached is valid: callers wait for the run under
     * way (no second run) and all get its answer. */
    kcr_config_invalidate(cfg);
    for(int i = 0; i < 3; i++)
      caller_start(&c[i], cfg);
    waiting = waiters_reach(cfg, 3);
    write_file(tmp_path("expiry"), "2999-01-01T00:00:00Z", 0600);
  }
  gate_release(&g);
  pthread_join(a.t, NULL);
  assert_true(a_ok);
  assert_true(started);
  pthread_join(b.t, NULL);
  for(int i = 0; i < 3; i++)
    pthread_join(c[i].t, NULL);

  assert_string_equal("exec-token-1", a.token);
  assert_true(b_ok);
  assert_string_equal("exec-token-1", b.token);
  assert_true(waiting);
  for(int i = 0; i < 3; i++) {
    assert_int_equal(KCR_OK, c[i].rc);
    assert_string_equal("exec-token-2", c[i].token);
  }
  assert_int_equal(2, read_count());
  assert_token(cfg, "exec-token-2"); /* fresh until 2999: no run */
  assert_int_equal(2, read_count());
  kcr_config_free(cfg);
  gate_close(&g);
}

/* When the run they wait for fails, every waiter gets its error (code and
 * message), nobody hangs, and the next caller runs the plugin again. */
static void exec_plugin_failed_run_fails_every_waiter(void **state)
{
  (void)state;
  struct caller a, c[2];
  struct gate g;
  kcr_config *cfg;
  bool a_ok, started, waiting = false;
  char want[512];

  kcr_log_set_level(KCR_LOG_ERROR); /* the failed background refresh warns */
  gate_open(&g);
  cfg = slow_config();
  write_file(tmp_path("block"), "", 0600);
  write_file(tmp_path("fail"), "", 0600);
  caller_start(&a, cfg);
  a_ok = caller_returns_within(&a, 10000);
  started = gate_wait_started(&g);
  if(a_ok && started) { /* else the test has failed: unwind at once */
    kcr_config_invalidate(cfg);
    for(int i = 0; i < 2; i++)
      caller_start(&c[i], cfg);
    waiting = waiters_reach(cfg, 2);
  }
  gate_release(&g);
  pthread_join(a.t, NULL);
  assert_true(a_ok);
  assert_true(started);
  for(int i = 0; i < 2; i++)
    pthread_join(c[i].t, NULL);

  assert_string_equal("exec-token-1", a.token);
  assert_true(waiting);
  snprintf(want, sizeof(want),
           "%s: users[0].user.exec (user \"me\"): exec plugin './slow.sh' exited with "
           "status 1 (it wrote 13 bytes on stderr, not shown because plugins print "
           "credentials there; run the command by hand to see them)",
           tmp_path("config"));
  for(int i = 0; i < 2; i++) {
    assert_int_equal(KCR_EIO, c[i].rc);
    assert_string_equal("", c[i].token);
    assert_string_equal(want, c[i].msg);
  }
  assert_int_equal(2, read_count());
  assert_int_equal(0, unlink(tmp_path("fail")));
  assert_token(cfg, "exec-token-3");
  kcr_config_free(cfg);
  gate_close(&g);
}

/* kcr_config_free kills a background refresh instead of waiting a minute. */
static void exec_plugin_background_run_is_stopped_by_free(void **state)
{
  (void)state;
  struct gate g;
  kcr_config *cfg;
  uint64_t t0;

  kcr_log_set_level(KCR_LOG_ERROR);
  gate_open(&g);
  cfg = slow_config();
  write_file(tmp_path("block"), "", 0600);
  assert_token(cfg, "exec-token-1"); /* due: run 2 in the background */
  assert_true(gate_wait_started(&g));
  t0 = kcr_time_mono_ms();
  kcr_config_free(cfg);                         /* run 2 never gets its release */
  assert_true(kcr_time_mono_ms() - t0 < 30000); /* the plugin may run 60 s */
  gate_close(&g);
}

/* Plugin stderr may hold secrets: not logged, at any level. */
static void exec_plugin_stderr_is_never_logged(void **state)
{
  (void)state;
  kcr_config *cfg;
  char *log;
  FILE *f = fopen(tmp_path("log"), "w+");

  assert_non_null(f);
  cfg = exec_config("chatty.sh",
                    "#!/bin/sh\n"
                    "echo 'debug: using refresh token stderr-secret' >&2\n"
                    "echo '{\"apiVersion\":\"client.authentication.k8s.io/v1\",'\n"
                    "echo '\"kind\":\"ExecCredential\",\"status\":{\"token\":\"t\"}}'\n",
                    "v1");
  kcr_log_set_fd(fileno(f));
  kcr_log_set_level(KCR_LOG_DEBUG);
  assert_token(cfg, "t");
  kcr_log_set_level(KCR_LOG_INFO);
  kcr_log_set_fd(2);
  fclose(f);
  log = file_text(tmp_path("log"));
  assert_non_null(strstr(log, "exec plugin refreshed credentials"));
  assert_null(strstr(log, "stderr-secret"));
  free(log);
  kcr_config_free(cfg);
}

/* --- secret hygiene ---------------------------------------------------- */

/* The wire of the request test: answers every GET with an empty object. */
static kcr_err answer_ok(void *ud, const struct kcr__wire_request *req, long *code,
                         long *retry_after_s, kcr__wire_write write, void *wctx,
                         struct kcr_errinfo *ei)
{
  (void)ud;
  (void)req;
  (void)retry_after_s;
  (void)ei;
  *code = 200;
  write("{}", 2, wctx);
  return KCR_OK;
}

/* Loads yaml, gets credentials, makes a request through the wire seam and
 * frees everything. */
static void load_use_free(const char *yaml)
{
  static const struct kcr_gvr cms = {"", "v1", "configmaps", true};
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  struct kcr_credentials cr;
  kcr_config *cfg;
  kcr_client *c;
  struct kcr__conn *conn;
  struct curl_slist *hdrs;
  cJSON *got = NULL;

  cfg = yaml_ok(yaml, tmp_path("config"));
  kcr__config_set_exec_timeout_ms(cfg, 5000);
  creds_ok(cfg, &cr);
  kcr_credentials_cleanup(&cr);
  assert_int_equal(KCR_OK,
                   kcr_client_new(&(struct kcr_client_opts){.config = cfg}, &c, &ei));
  kcr_config_free(cfg); /* the client holds its own reference */
  kcr__client_set_wire(c, answer_ok, NULL);
  assert_int_equal(KCR_OK,
                   kcr_get(c, &(struct kcr_ref){&cms, "default", "x"}, &got, &ei));
  cJSON_Delete(got);
  /* What the network path gives curl (the header list curl copies into its
   * own allocations, which tfail_init routes through the wrappers), short of
   * performing the request: libcurl's own request buffers are out of reach. */
  conn = kcr__conn_get(c);
  assert_non_null(conn);
  assert_int_equal(KCR_OK, kcr__conn_prepare(c, conn, "GET", "/api/v1/namespaces", NULL,
                                             NULL, false, &hdrs, &ei));
  curl_easy_setopt(conn->h, CURLOPT_HTTPHEADER, NULL);
  kcr__headers_free(hdrs);
  kcr__conn_put(c, conn, false);
  kcr_client_free(c); /* frees the config */
  kcr_errinfo_cleanup(&ei);
}

/* Every block that held the token is wiped before it is freed: the
 * kubeconfig text and its parse, the config, the credential snapshots, the
 * Authorization header made for the request and the copy in curl's list. */
static void secret_static_token_is_wiped_everywhere(void **state)
{
  (void)state;
  static const char secret[] = "kcr-secret-static-7a1f9c3e";
  char yaml[1024], path[256];
  struct kcr_config_opts o = {path, NULL, false, NULL};
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  kcr_config *cfg;

  snprintf(yaml, sizeof(yaml),
           "current-context: x\n"
           "contexts: [{name: x, context: {cluster: c, user: u}}]\n"
           "clusters: [{name: c, cluster: {server: https://h}}]\n"
           "users: [{name: u, user: {token: %s}}]\n",
           secret);
  snprintf(path, sizeof(path), "%s", tmp_path("config"));
  write_file(path, yaml, 0600);
  tfail_secret(secret);
  load_use_free(yaml);
  assert_int_equal(KCR_OK, kcr_config_load(&o, &cfg, &ei)); /* from the file */
  kcr_config_free(cfg);
  assert_int_equal(0, tfail_secret_hits());
  tfail_secret(NULL);
}

/* A password in the proxy-url is wiped with the config (curl's copy of it,
 * CURLOPT_PROXY, is out of reach: see client.c, Secrets). */
static void secret_proxy_password_is_wiped_with_the_config(void **state)
{
  (void)state;
  static const char secret[] = "kcr-secret-proxy-5e0d2b71";
  char yaml[1024];
  kcr_config *cfg;

  snprintf(yaml, sizeof(yaml),
           "current-context: x\n"
           "contexts: [{name: x, context: {cluster: c}}]\n"
           "clusters: [{name: c, cluster: {server: https://h, "
           "proxy-url: 'http://u:%s@proxy:3128'}}]\n",
           secret);
  tfail_secret(secret);
  cfg = yaml_ok(yaml, "/k");
  assert_non_null(strstr(kcr_config_proxy_url(cfg), secret));
  kcr_config_free(cfg);
  assert_int_equal(0, tfail_secret_hits());
  tfail_secret(NULL);
}

/* An exec plugin gets a secret through its env (the kubeconfig's exec.env),
 * answers with it as its token and also prints it on stderr, as plugins do:
 * the env strings, its stdout and stderr, the parsed ExecCredential, the
 * cache, the snapshots and the request's header are all wiped. */
static void secret_exec_env_and_token_are_wiped_everywhere(void **state)
{
  (void)state;
  static const char secret[] = "kcr-secret-exec-5d2b8e40";
  char yaml[2048];

  write_file(tmp_path("echo.sh"),
             "#!/bin/sh\n"
             "echo \"refreshing with $KCR_SECRET\" >&2\n"
             "printf '{\"apiVersion\":\"client.authentication.k8s.io/v1\",'\n"
             "printf '\"kind\":\"ExecCredential\",\"status\":{\"token\":\"%s\"}}' "
             "\"$KCR_SECRET\"\n",
             0755);
  snprintf(yaml, sizeof(yaml),
           "current-context: x\n"
           "contexts: [{name: x, context: {cluster: c, user: me}}]\n"
           "clusters: [{name: c, cluster: {server: https://h}}]\n"
           "users:\n"
           "- name: me\n"
           "  user:\n"
           "    exec:\n"
           "      apiVersion: client.authentication.k8s.io/v1\n"
           "      command: ./echo.sh\n"
           "      env: [{name: KCR_SECRET, value: %s}]\n",
           secret);
  tfail_secret(secret);
  load_use_free(yaml);
  assert_int_equal(0, tfail_secret_hits());
  tfail_secret(NULL);
}

/* --- in-cluster -------------------------------------------------------- */

static const char sa_ca[] =
    "-----BEGIN CERTIFICATE-----\nQ0E=\n-----END CERTIFICATE-----\n";

static void make_sa_dir(bool with_namespace)
{
  write_file(tmp_path("token"), "sa-token-1\n", 0600);
  write_file(tmp_path("ca.crt"), sa_ca, 0644);
  if(with_namespace)
    write_file(tmp_path("namespace"), "kube-system\n", 0644);
}

static void in_cluster_reads_service_account(void **state)
{
  (void)state;
  struct kcr_config_opts o = {NULL, NULL, true, g_tmp};
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  kcr_config *cfg;
  size_t len;

  make_sa_dir(true);
  setenv("KUBECONFIG", data_path("token.yaml"), 1); /* skipped: in_cluster_only */
  setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1", 1);
  setenv("KUBERNETES_SERVICE_PORT", "443", 1);
  assert_int_equal(KCR_OK, kcr_config_load(&o, &cfg, &ei));
  assert_string_equal("https://10.96.0.1:443", kcr_config_server(cfg));
  assert_string_equal("in-cluster", kcr_config_origin(cfg));
  assert_string_equal("kube-system", kcr_config_namespace(cfg));
  assert_false(kcr_config_insecure(cfg));
  assert_memory_equal(sa_ca, kcr_config_ca(cfg, &len), strlen(sa_ca));
  assert_int_equal(strlen(sa_ca), len);
  assert_token(cfg, "sa-token-1");
  write_file(tmp_path("token"), "sa-token-2\n", 0600); /* the kubelet rotates it */
  kcr_config_invalidate(cfg);
  assert_token(cfg, "sa-token-2");
  kcr_config_free(cfg);
}

static void in_cluster_brackets_ipv6_and_is_the_last_resort(void **state)
{
  (void)state;
  struct kcr_config_opts o = {NULL, NULL, false, g_tmp};
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  kcr_config *cfg;

  make_sa_dir(false);
  setenv("KUBERNETES_SERVICE_HOST", "fd00:10:96::1", 1);
  setenv("KUBERNETES_SERVICE_PORT", "6443", 1);
  assert_int_equal(KCR_OK, kcr_config_load(&o, &cfg, &ei));
  assert_string_equal("https://[fd00:10:96::1]:6443", kcr_config_server(cfg));
  assert_string_equal("in-cluster", kcr_config_origin(cfg));
  assert_null(kcr_config_namespace(cfg));
  kcr_config_free(cfg);
}

static void in_cluster_missing_token_or_port(void **state)
{
  (void)state;
  struct kcr_config_opts o = {NULL, NULL, true, g_tmp};
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  char want[256];
  kcr_config *cfg;

  setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1", 1);
  assert_int_equal(KCR_ECONFIG, kcr_config_load(&o, &cfg, &ei));
  assert_string_equal("in-cluster: KUBERNETES_SERVICE_HOST is set but "
                      "KUBERNETES_SERVICE_PORT is not",
                      ei.message);
  setenv("KUBERNETES_SERVICE_PORT", "443", 1);
  write_file(tmp_path("ca.crt"), "CA\n", 0644);
  snprintf(want, sizeof(want), "in-cluster: token %s: No such file or directory",
           tmp_path("token"));
  assert_int_equal(KCR_ECONFIG, kcr_config_load(&o, &cfg, &ei));
  assert_string_equal(want, ei.message);
  kcr_errinfo_cleanup(&ei);
}

/* Debug builds check the exec spec kcr__exec_run gets (config_exec.c's
 * DESIGN: argv NULL-terminated, argv[0] the command): one whose argv does
 * not start with the command aborts (KCR_ASSERT) before anything runs. */
static void exec_a_spec_whose_argv_is_not_the_command(void *ud)
{
  char *argv[] = {"sh", NULL};
  struct kcr__exec_spec spec = {.api_version = KCR__EXEC_API_V1,
                                .command = "true",
                                .path = "true",
                                .argv = argv,
                                .where = "test"};
  struct kcr__exec_result r;
  kcr__exec_run(&spec, 10000, NULL, &r, NULL);
}

static void exec_broken_invariants_abort_debug_builds(void **state)
{
  (void)state;
  TABORT_SKIP_IN_RELEASE();
  assert_true(tabort(exec_a_spec_whose_argv_is_not_the_command, NULL));
}

int main(void)
{
  tfail_init(); /* cJSON (the ExecCredential) allocates through the wrappers */
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
  const struct CMUnitTest tests[] = {
      T(base64_decodes_with_and_without_padding),
      T(base64_skips_embedded_whitespace),
      T(base64_rejects_garbage),
      T(kubeconfig_inline_data_is_decoded),
      T(kubeconfig_files_resolve_against_its_directory),
      T(kubeconfig_token_and_insecure),
      T(kubeconfig_current_context_vs_explicit_context),
      T(kubeconfig_explicit_context_not_found),
      T(kubeconfig_from_yaml_text),
      T(a_config_lives_as_long_as_its_last_reference),
      T(load_uses_first_existing_kubeconfig_in_env),
      T(load_falls_back_to_home_kube_config),
      T(load_explicit_path_errors_are_final),
      T(load_reports_when_nothing_is_found),
      T(malformed_yaml_names_line_and_column),
      T(malformed_missing_server),
      T(malformed_unknown_current_context),
      T(malformed_bad_base64),
      T(malformed_cert_without_key),
      T(malformed_missing_referenced_file),
      T(malformed_non_http_scheme),
      T(malformed_wrong_types),
      T(malformed_insecure_with_a_ca),
      T(malformed_tls_server_name),
      T(proxy_url_is_read_and_checked),
      T(token_file_is_reread_after_rotation),
      T(token_file_is_checked_at_most_once_per_interval),
      T(token_file_missing_at_load_is_an_error),
      T(a_nul_in_a_kubeconfig_string_is_refused),
      T(exec_plugin_token_is_cached_until_invalidate),
      T(exec_plugin_reruns_when_expired),
      T(exec_plugin_certificate_bumps_generation),
      T(credentials_without_the_pair_say_whether_there_is_one),
      T(exec_plugin_failure_quotes_neither_stdout_nor_stderr),
      T(exec_plugin_garbage_output_is_a_parse_error),
      T(exec_plugin_nul_in_token_is_refused),
      T(exec_plugin_wrong_api_version_or_kind),
      T(exec_plugin_not_in_path),
      T(exec_plugin_relative_command_missing_or_not_executable),
      T(exec_plugin_interactive_always_is_refused),
      T(exec_plugin_is_killed_after_timeout),
      T(exec_plugin_output_is_capped),
      T(exec_plugin_logs_refresh_without_the_token),
      T(exec_plugin_runs_once_for_concurrent_callers),
      T(exec_plugin_refresh_holds_up_no_caller_with_valid_credentials),
      T(exec_plugin_failed_run_fails_every_waiter),
      T(exec_plugin_background_run_is_stopped_by_free),
      T(exec_plugin_stderr_is_never_logged),
      T(exec_broken_invariants_abort_debug_builds),
      T(secret_static_token_is_wiped_everywhere),
      T(secret_proxy_password_is_wiped_with_the_config),
      T(secret_exec_env_and_token_are_wiped_everywhere),
      T(in_cluster_reads_service_account),
      T(in_cluster_brackets_ipv6_and_is_the_last_resort),
      T(in_cluster_missing_token_or_port),
  };
#undef T
  return cmocka_run_group_tests(tests, NULL, NULL);
}
