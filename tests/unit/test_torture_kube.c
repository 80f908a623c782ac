/* Allocation-failure torture of the kube layer (see tfail.h): kubeconfig
 * loading, credentials, the request builder, every client verb and the
 * watch over the scripted transport (twire.h), and the watch's framer and
 * decoder. A call under test fails with an error and NULL outputs, or
 * completes exactly; requests that reach the (fake) server are always
 * complete - a half-built query or body never goes out - and nothing leaks.
 *
 * libyaml allocates outside the wrappers (it is not linked with them), so
 * kcr_config_from_yaml is tortured in libkcr's own allocations only. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "kcr.h"
#include "kube/watch-int.h"
#include "tfail.h"
#include "twire.h"

static const struct kcr_gvr cms = {"", "v1", "configmaps", true};

static bool str_eq(const char *a, const char *b) { return a && b && !strcmp(a, b); }

/* The error an allocation failure may surface as. KCR_EPARSE: cJSON cannot
 * tell a failed allocation from malformed text (see test_torture_core.c
 * json_parse_reports_out_of_memory_as_enomem_not_eparse). */
static bool oom_error(kcr_err rc) { return rc == KCR_ENOMEM || rc == KCR_EPARSE; }

/* ---- kubeconfig ------------------------------------------------------------ */

/* base64 of "-----BEGIN CERTIFICATE-----\nCA\n-----END CERTIFICATE-----\n" and
 * friends: the loader does not parse PEM, only decodes. */
#define CA_PEM "-----BEGIN CERTIFICATE-----\nCA\n-----END CERTIFICATE-----\n"
#define CA_B64                                                                           \
  "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCkNBCi0tLS0tRU5EIENFUlRJRklDQVRFLS0tLS0K"
#define CERT_PEM "-----BEGIN CERTIFICATE-----\nME\n-----END CERTIFICATE-----\n"
#define CERT_B64                                                                         \
  "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1FCi0tLS0tRU5EIENFUlRJRklDQVRFLS0tLS0K"
#define KEY_PEM "-----BEGIN PRIVATE KEY-----\nKEY\n-----END PRIVATE KEY-----\n"
#define KEY_B64                                                                          \
  "LS0tLS1CRUdJTiBQUklWQVRFIEtFWS0tLS0tCktFWQotLS0tLUVORCBQUklWQVRFIEtFWS0tLS0tCg=="

static const char kubeconfig_inline[] =
    "apiVersion: v1\n"
    "kind: Config\n"
    "clusters:\n"
    "- name: other\n"
    "  cluster: {server: https://other:6443}\n"
    "- name: c\n"
    "  cluster:\n"
    "    server: https://kube.example:6443/\n"
    "    certificate-authority-data: " CA_B64 "\n"
    "users:\n"
    "- name: u\n"
    "  user:\n"
    "    token: s3cr3t-t0ken\n"
    "    client-certificate-data: " CERT_B64 "\n"
    "    client-key-data: " KEY_B64 "\n"
    "contexts:\n"
    "- name: x\n"
    "  context: {cluster: c, user: u, namespace: team}\n"
    "current-context: x\n";

static const char kubeconfig_exec[] =
    "apiVersion: v1\n"
    "clusters:\n"
    "- name: c\n"
    "  cluster:\n"
    "    server: https://kube.example:6443\n"
    "    insecure-skip-tls-verify: true\n"
    "users:\n"
    "- name: u\n"
    "  user:\n"
    "    exec:\n"
    "      apiVersion: client.authentication.k8s.io/v1\n"
    "      command: ./bin/get-token\n"
    "      args: [--cluster, c, --verbose]\n"
    "      env:\n"
    "      - {name: A, value: one}\n"
    "      - {name: B, value: two}\n"
    "      interactiveMode: Never\n"
    "      installHint: install get-token\n"
    "contexts:\n"
    "- name: x\n"
    "  context: {cluster: c, user: u}\n"
    "current-context: x\n";

static bool blob_is(const unsigned char *p, size_t len, const char *want)
{
  return p && len == strlen(want) && !memcmp(p, want, len);
}

static bool load_inline(void *ud)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  kcr_config *cfg = (kcr_config *)1;
  kcr_err rc = kcr_config_from_yaml(
      kubeconfig_inline, sizeof(kubeconfig_inline) - 1,
      &(struct kcr_config_opts){.kubeconfig = "/home/u/.kube/config"}, &cfg, &ei);
  bool ok;

  if(rc) {
    ok = rc == KCR_ENOMEM && !cfg;
  } else {
    size_t n = 0;
    const unsigned char *ca = kcr_config_ca(cfg, &n);
    ok = str_eq(kcr_config_server(cfg), "https://kube.example:6443") &&
         str_eq(kcr_config_namespace(cfg), "team") &&
         str_eq(kcr_config_origin(cfg), "/home/u/.kube/config") &&
         !kcr_config_insecure(cfg) && blob_is(ca, n, CA_PEM);
  }
  kcr_config_free(rc ? NULL : cfg);
  kcr_errinfo_cleanup(&ei);
  return ok;
}

static void config_from_yaml_with_inline_data_loads_whole_or_enomem(void **state)
{
  tfail_torture("kcr_config_from_yaml (inline CA/cert/key, token)", load_inline, NULL);
}

static bool load_exec(void *ud)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  kcr_config *cfg = (kcr_config *)1;
  kcr_err rc = kcr_config_from_yaml(
      kubeconfig_exec, sizeof(kubeconfig_exec) - 1,
      &(struct kcr_config_opts){.kubeconfig = "/home/u/.kube/config"}, &cfg, &ei);
  bool ok = rc ? rc == KCR_ENOMEM && !cfg
               : str_eq(kcr_config_server(cfg), "https://kube.example:6443") &&
                     kcr_config_insecure(cfg) && !kcr_config_namespace(cfg);
  kcr_config_free(rc ? NULL : cfg);
  kcr_errinfo_cleanup(&ei);
  return ok;
}

static void config_from_yaml_with_an_exec_section_loads_whole_or_enomem(void **state)
{
  tfail_torture("kcr_config_from_yaml (exec)", load_exec, NULL);
}

struct tokfile {
  char dir[64], origin[96];
};

static bool load_token_file(void *ud)
{
  struct tokfile *t = ud;
  static const char yaml[] = "clusters: [{name: c, cluster: {server: https://k}}]\n"
                             "users: [{name: u, user: {tokenFile: tok}}]\n"
                             "contexts: [{name: x, context: {cluster: c, user: u}}]\n"
                             "current-context: x\n";
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  struct kcr_credentials cr;
  kcr_config *cfg = NULL;
  kcr_err rc =
      kcr_config_from_yaml(yaml, sizeof(yaml) - 1,
                           &(struct kcr_config_opts){.kubeconfig = t->origin}, &cfg, &ei);
  bool ok;

  if(rc) {
    ok = rc == KCR_ENOMEM && !cfg;
    goto out;
  }
  rc = kcr_config_dup_credentials(cfg, &cr, &ei);
  ok = rc ? rc == KCR_ENOMEM && !cr.token : str_eq(cr.token, "file-token");
  kcr_credentials_cleanup(&cr);
out:
  kcr_config_free(cfg);
  kcr_errinfo_cleanup(&ei);
  return ok;
}

static void config_with_a_token_file_loads_and_reads_it_or_enomem(void **state)
{
  struct tokfile t = {"/tmp/tfail-kube-XXXXXX"};
  char path[128];
  FILE *f;

  assert_non_null(mkdtemp(t.dir));
  snprintf(t.origin, sizeof(t.origin), "%s/config", t.dir);
  snprintf(path, sizeof(path), "%s/tok", t.dir);
  assert_non_null(f = fopen(path, "w"));
  fputs("file-token\n", f);
  fclose(f);
  bool ok =
      tfail_torture_try("kcr_config_from_yaml + kcr_config_dup_credentials (tokenFile)",
                        load_token_file, &t, 0);
  unlink(path);
  rmdir(t.dir);
  assert_true(ok);
}

static bool credentials(void *ud)
{
  kcr_config *cfg = ud;
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  struct kcr_credentials cr;
  kcr_err rc;
  bool ok;

  memset(&cr, 0xa5, sizeof(cr)); /* garbage: the call must set every field */
  rc = kcr_config_dup_credentials(cfg, &cr, &ei);
  if(rc)
    ok = rc == KCR_ENOMEM && !cr.token && !cr.cert && !cr.key && !cr.cert_len &&
         !cr.key_len;
  else
    ok = str_eq(cr.token, "s3cr3t-t0ken") && blob_is(cr.cert, cr.cert_len, CERT_PEM) &&
         blob_is(cr.key, cr.key_len, KEY_PEM);
  kcr_credentials_cleanup(&cr);
  kcr_errinfo_cleanup(&ei);
  return ok;
}

static void config_credentials_are_a_whole_snapshot_or_nothing(void **state)
{
  kcr_config *cfg = NULL;
  assert_int_equal(KCR_OK, kcr_config_from_yaml(
                               kubeconfig_inline, sizeof(kubeconfig_inline) - 1,
                               &(struct kcr_config_opts){.kubeconfig = "t"}, &cfg, NULL));
  bool ok = tfail_torture_try("kcr_config_dup_credentials (token, cert, key)",
                              credentials, cfg, 0);
  kcr_config_free(cfg);
  assert_true(ok);
}

/* An exec plugin's answer: the plugin runs in every run (the credentials
 * are invalidated first); its ExecCredential is parsed into a token, or the
 * call fails with ENOMEM and hands out nothing. */
static bool exec_credentials(void *ud)
{
  kcr_config *cfg = ud;
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  struct kcr_credentials cr;
  kcr_err rc;
  bool ok;

  kcr_config_invalidate(cfg);
  rc = kcr_config_dup_credentials(cfg, &cr, &ei);
  ok = rc ? rc == KCR_ENOMEM && !cr.token : str_eq(cr.token, "exec-t0ken");
  if(!ok)
    print_error("exec credentials: %s (%s)\n", kcr_err_name(rc),
                ei.message ? ei.message : "-");
  kcr_credentials_cleanup(&cr);
  kcr_errinfo_cleanup(&ei);
  return ok;
}

static void config_credentials_from_an_exec_plugin_are_whole_or_enomem(void **state)
{
  static const char yaml_fmt[] = "clusters: [{name: c, cluster: {server: https://k}}]\n"
                                 "users:\n"
                                 "- name: u\n"
                                 "  user:\n"
                                 "    exec:\n"
                                 "      apiVersion: client.authentication.k8s.io/v1\n"
                                 "      command: ./plugin.sh\n"
                                 "      args: [--flag]\n"
                                 "      env: [{name: TORTURE, value: '1'}]\n"
                                 "      interactiveMode: Never\n"
                                 "contexts: [{name: x, context: {cluster: c, user: u}}]\n"
                                 "current-context: x\n";
  static const char plugin[] =
      "#!/bin/sh\n"
      "printf '{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":"
      "\"ExecCredential\",\"status\":{\"token\":\"exec-t0ken\","
      "\"expirationTimestamp\":\"2999-01-01T00:00:00Z\"}}\\n'\n";
  char dir[] = "/tmp/tfail-exec-XXXXXX", path[128], origin[128];
  kcr_config *cfg = NULL;
  FILE *f;
  bool ok;

  assert_non_null(mkdtemp(dir));
  snprintf(path, sizeof(path), "%s/plugin.sh", dir);
  snprintf(origin, sizeof(origin), "%s/config", dir);
  assert_non_null(f = fopen(path, "w"));
  fputs(plugin, f);
  fclose(f);
  assert_int_equal(0, chmod(path, 0700));
  assert_int_equal(KCR_OK,
                   kcr_config_from_yaml(yaml_fmt, sizeof(yaml_fmt) - 1,
                                        &(struct kcr_config_opts){.kubeconfig = origin},
                                        &cfg, NULL));
  /* Warm: the first run fills the config's credential cache, which lives
   * as long as the config. */
  ok = tfail_torture_warm("kcr_config_dup_credentials (exec plugin)", exec_credentials,
                          cfg, 0);
  kcr_config_free(cfg);
  unlink(path);
  rmdir(dir);
  assert_true(ok);
}

/* kcr_config_load from a file, then kcr_client_new, which takes the config
 * over (and frees it also when it fails): a client or ENOMEM, nothing
 * left behind. */
static bool load_and_connect(void *ud)
{
  const char *path = ud;
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  kcr_config *cfg = (kcr_config *)1;
  kcr_client *c = (kcr_client *)1;
  kcr_err rc = kcr_config_load(&(struct kcr_config_opts){.kubeconfig = path}, &cfg, &ei);
  bool ok;

  if(rc) {
    ok = rc == KCR_ENOMEM && (!cfg || cfg == (kcr_config *)1); /* no config */
    goto out;
  }
  rc = kcr_client_new(&(struct kcr_client_opts){.config = cfg, .user_agent = "torture/1"},
                      &c, &ei);
  kcr_config_free(cfg); /* the client holds its own reference */
  ok = rc ? rc == KCR_ENOMEM && !c
          : str_eq(kcr_config_server(kcr_client_config(c)), "https://kube.example:6443");
  kcr_client_free(rc ? NULL : c);
out:
  kcr_errinfo_cleanup(&ei);
  return ok;
}

static void config_load_and_client_new_fail_cleanly(void **state)
{
  char dir[] = "/tmp/tfail-load-XXXXXX", path[128];
  FILE *f;
  bool ok;

  assert_non_null(mkdtemp(dir));
  snprintf(path, sizeof(path), "%s/config", dir);
  assert_non_null(f = fopen(path, "w"));
  fputs(kubeconfig_inline, f);
  fclose(f);
  ok = tfail_torture_try("kcr_config_load (file) + kcr_client_new", load_and_connect,
                         path, 0);
  unlink(path);
  rmdir(dir);
  assert_true(ok);
}

/* ---- the request builder ---------------------------------------------------- */

static bool path_and_query(void *ud)
{
  static const struct kcr_gvr ebds = {"ebdman.example.com", "v1alpha1", "ebds", true};
  static const char want[] =
      "/apis/ebdman.example.com/v1alpha1/namespaces/team-a/ebds/my-ebd/status"
      "?fieldManager=ebdman%2Fcontroller&labelSelector=app%3Dx%2Ctier%20in%20%28a%2Cb%29"
      "&limit=500";
  struct kcr_buf p = KCR_BUF_INIT;
  kcr_err rc;
  bool ok;

  /* The buffer keeps the first error: one check at the end. */
  kcr_path(&p, &(struct kcr_ref){&ebds, "team-a", "my-ebd", "status"});
  kcr_query_add(&p, "fieldManager", "ebdman/controller");
  kcr_query_add(&p, "labelSelector", "app=x,tier in (a,b)");
  kcr_query_add(&p, "continue", NULL); /* nothing */
  kcr_query_add_int(&p, "limit", 500);
  rc = kcr_buf_err(&p);
  ok = rc ? rc == KCR_ENOMEM && !strncmp(want, kcr_buf_str(&p), p.len)
          : str_eq(kcr_buf_str(&p), want);
  kcr_buf_cleanup(&p);
  return ok;
}

static void path_and_query_build_whole_or_enomem(void **state)
{
  tfail_torture("kcr_path/kcr_query_add", path_and_query, NULL);
}

/* ---- the client verbs over twire ------------------------------------------- */

#define OBJ                                                                              \
  "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"a\","          \
  "\"namespace\":\"ns\",\"resourceVersion\":\"7\",\"uid\":\"u1\",\"labels\":{\"app\":"   \
  "\"x\"}},\"data\":{\"k\":\"v\",\"big\":\"" BIG "\"}}"
#define BIG                                                                              \
  "0123456789012345678901234567890123456789012345678901234567890123456789"               \
  "0123456789012345678901234567890123456789012345678901234567890123456789"

/* What the fake server expects, exactly, and what it answers. */
struct expect {
  const char *method, *path, *ctype, *body;
  long code;
  const char *reply;
  bool bad; /* a request differed from the expectation */
  int calls;
};

static kcr_err exact(struct twire_call *call, void *ud)
{
  struct expect *e = ud;
  const struct kcr__wire_request *r = call->req;

  e->calls++;
  if(!str_eq(r->method, e->method) || !str_eq(r->path, e->path) ||
     (e->ctype ? !str_eq(r->content_type, e->ctype) : r->content_type != NULL) ||
     (e->body ? !(r->body && r->body_len == strlen(e->body) &&
                  !memcmp(r->body, e->body, r->body_len))
              : r->body != NULL)) {
    if(!e->bad)
      fprintf(stderr, "unexpected request: %s %s (%s) %.*s\n", r->method, r->path,
              r->content_type ? r->content_type : "-", (int)r->body_len,
              r->body ? r->body : "");
    e->bad = true;
    return twire_reply(call, 400, "%s", twire_status_json(400, "BadRequest"));
  }
  return twire_reply(call, e->code, "%s", e->reply);
}

enum verb { V_GET, V_LIST, V_CREATE, V_UPDATE, V_PATCH, V_APPLY, V_DELETE };

struct verb_case {
  kcr_client *c;
  struct expect e;
  enum verb v;
  cJSON *obj;  /* body for create/update/apply */
  cJSON *want; /* the answer's tree */
};

static bool verb(void *ud)
{
  struct verb_case *vc = ud;
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  struct kcr_ref one = {&cms, "ns", "a"}, coll = {&cms, "ns"};
  cJSON *out = (cJSON *)1;
  kcr_err rc = KCR_EINVAL;
  bool ok;

  vc->e.bad = false;
  switch(vc->v) {
  case V_GET: rc = kcr_get(vc->c, &one, &out, &ei); break;
  case V_LIST:
    rc = kcr_list(vc->c, &coll,
                  &(struct kcr_list_opts){.label_selector = "app=x,tier in (a,b)",
                                          .field_selector = "metadata.name=a",
                                          .limit = 10,
                                          .resource_version = "5",
                                          .resource_version_match = "NotOlderThan"},
                  &out, &ei);
    break;
  case V_CREATE:
    rc = kcr_create(vc->c, &coll, vc->obj,
                    &(struct kcr_write_opts){.field_manager = "mgr", .dry_run = true},
                    &out, &ei);
    break;
  case V_UPDATE:
    rc = kcr_update(vc->c, &one, vc->obj,
                    &(struct kcr_write_opts){.field_manager = "mgr"}, &out, &ei);
    break;
  case V_PATCH: {
    static const char patch[] = "{\"data\":{\"k\":\"v2\"}}";
    rc = kcr_patch(vc->c, &one, &(struct kcr_patch_opts){KCR_PATCH_MERGE, "mgr"}, patch,
                   sizeof(patch) - 1, &out, &ei);
    break;
  }
  case V_APPLY:
    rc = kcr_apply(vc->c, &one, vc->obj,
                   &(struct kcr_apply_opts){.field_manager = "mgr", .force = true}, &out,
                   &ei);
    break;
  case V_DELETE:
    rc = kcr_delete(vc->c, &one,
                    &(struct kcr_delete_opts){.propagation = KCR_PROPAGATE_FOREGROUND,
                                              .precondition_uid = "u1",
                                              .precondition_rv = "7",
                                              .grace_period_seconds = &(int64_t){0},
                                              .dry_run = true},
                    &out, &ei);
    break;
  }
  ok = !vc->e.bad && (rc ? oom_error(rc) && !out : tfail_equal(out, vc->want));
  cJSON_Delete(rc ? NULL : out);
  kcr_errinfo_cleanup(&ei);
  return ok;
}

static void run_verb(const char *name, enum verb v, struct expect e)
{
  struct verb_case vc = {NULL, e, v, tfail_parse(OBJ), tfail_parse(e.reply)};
  char *body = NULL;

  if(v == V_CREATE || v == V_UPDATE || v == V_APPLY) {
    body = cJSON_PrintUnformatted(vc.obj);
    vc.e.body = body;
  }
  vc.c = twire_client(exact, &vc.e);
  bool ok = tfail_torture_try(name, verb, &vc, 0);
  kcr_client_free(vc.c);
  cJSON_Delete(vc.obj);
  cJSON_Delete(vc.want);
  free(body);
  assert_true(ok);
}

static void get_returns_the_object_or_an_error_and_null(void **state)
{
  run_verb(
      "kcr_get", V_GET,
      (struct expect){"GET", "/api/v1/namespaces/ns/configmaps/a", NULL, NULL, 200, OBJ});
}

static void list_returns_the_page_or_an_error_and_null(void **state)
{
  run_verb(
      "kcr_list", V_LIST,
      (struct expect){"GET",
                      "/api/v1/namespaces/ns/configmaps?labelSelector=app%3Dx%2Ctier%"
                      "20in%20%28a%2Cb%29&fieldSelector=metadata.name%3Da&limit=10&"
                      "resourceVersion=5&resourceVersionMatch=NotOlderThan",
                      NULL, NULL, 200,
                      "{\"kind\":\"ConfigMapList\",\"metadata\":{\"resourceVersion\":"
                      "\"9\"},\"items\":[" OBJ "," OBJ "]}"});
}

static void create_sends_the_whole_object_or_nothing(void **state)
{
  run_verb("kcr_create", V_CREATE,
           (struct expect){"POST",
                           "/api/v1/namespaces/ns/configmaps?fieldManager=mgr&dryRun=All",
                           "application/json", NULL, 201, OBJ});
}

static void update_sends_the_whole_object_or_nothing(void **state)
{
  run_verb("kcr_update", V_UPDATE,
           (struct expect){"PUT", "/api/v1/namespaces/ns/configmaps/a?fieldManager=mgr",
                           "application/json", NULL, 200, OBJ});
}

static void patch_sends_the_whole_patch_or_nothing(void **state)
{
  run_verb("kcr_patch", V_PATCH,
           (struct expect){"PATCH", "/api/v1/namespaces/ns/configmaps/a?fieldManager=mgr",
                           "application/merge-patch+json", "{\"data\":{\"k\":\"v2\"}}",
                           200, OBJ});
}

static void apply_sends_the_whole_object_or_nothing(void **state)
{
  run_verb("kcr_apply", V_APPLY,
           (struct expect){
               "PATCH", "/api/v1/namespaces/ns/configmaps/a?fieldManager=mgr&force=true",
               "application/apply-patch+yaml", NULL, 200, OBJ});
}

static void delete_sends_whole_delete_options_or_nothing(void **state)
{
  run_verb("kcr_delete", V_DELETE,
           (struct expect){"DELETE", "/api/v1/namespaces/ns/configmaps/a",
                           "application/json",
                           "{\"kind\":\"DeleteOptions\",\"apiVersion\":\"v1\","
                           "\"propagationPolicy\":\"Foreground\",\"preconditions\":{"
                           "\"uid\":\"u1\",\"resourceVersion\":\"7\"},"
                           "\"gracePeriodSeconds\":0,\"dryRun\":[\"All\"]}",
                           200, OBJ});
}

/* An error answer: the code is the server's, whatever allocation fails
 * (ENOMEM aside), and no answer tree is returned. */
static bool get_conflict(void *ud)
{
  kcr_client *c = ud;
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  cJSON *out = (cJSON *)1;
  kcr_err rc = kcr_get(c, &(struct kcr_ref){&cms, "ns", "a"}, &out, &ei);
  bool ok = (rc == KCR_ENOTFOUND || rc == KCR_ENOMEM) && !out;
  kcr_errinfo_cleanup(&ei);
  return ok;
}

static kcr_err not_found(struct twire_call *call, void *ud)
{
  return twire_reply(call, 404, "%s", twire_status_json(404, "NotFound"));
}

static void an_error_answer_keeps_its_code_when_allocations_fail(void **state)
{
  kcr_client *c = twire_client(not_found, NULL);
  bool ok = tfail_torture_try("kcr_get (404)", get_conflict, c, 0);
  kcr_client_free(c);
  assert_true(ok);
}

/* ---- kcr_list_each with options ------------------------------------------ */
/* (drop_managed_fields among them: a page whose managedFields cannot be
 * left out for want of memory fails the listing, never half-cut) */

static kcr_err pages(struct twire_call *call, void *ud)
{
  char tok[16], sel[32];
  const char *t = twire_query(call, "continue", tok, sizeof(tok));
  int page = !t ? 1 : !strcmp(t, "p2") ? 2 : 3;
  const char *s = twire_query(call, "labelSelector", sel, sizeof(sel));
  if(!str_eq(s, "app=x") || (page > 1 && twire_query(call, "resourceVersion", tok, 16)))
    return twire_reply(call, 400, "%s", twire_status_json(400, "BadRequest"));
  return twire_reply(
      call, 200,
      "{\"metadata\":{\"resourceVersion\":\"10\"%s%s%s},\"items\":["
      "{\"metadata\":{\"name\":\"a%d\",\"managedFields\":[{\"manager\":\"m\"}]}},"
      "{\"metadata\":{\"name\":\"b%d\"}}]}",
      page < 3 ? ",\"continue\":\"" : "", page == 1 ? "p2" : "p3", page < 3 ? "\"" : "",
      page, page);
}

static kcr_err collect_name(const cJSON *item, void *ud)
{
  char *names = ud;
  tfail_exempt(true);
  strcat(names, kcr_json_str(item, "/metadata/name"));
  strcat(names, kcr_json_at(item, "/metadata/managedFields") ? "+mf," : ",");
  tfail_exempt(false);
  return KCR_OK;
}

static bool list_each(void *ud)
{
  kcr_client *c = ud;
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  char names[64] = "", *rv = (char *)1;
  kcr_err rc = kcr_list_each(c, &(struct kcr_ref){&cms, "ns"},
                             &(struct kcr_list_opts){.label_selector = "app=x",
                                                     .limit = 2,
                                                     .resource_version = "0",
                                                     .drop_managed_fields = true},
                             collect_name, names, &rv, &ei);
  /* The items seen before a failure are a prefix; the caller learns it
   * failed (and gets no resourceVersion to watch from). */
  bool ok =
      rc ? oom_error(rc) && !rv && !strncmp("a1,b1,a2,b2,a3,b3,", names, strlen(names))
         : str_eq(names, "a1,b1,a2,b2,a3,b3,") && str_eq(rv, "10");
  free(rc ? NULL : rv);
  kcr_errinfo_cleanup(&ei);
  return ok;
}

static void list_each_with_options_lists_all_pages_or_fails(void **state)
{
  kcr_client *c = twire_client(pages, NULL);
  bool ok = tfail_torture_try("kcr_list_each (selector, rv, 3 pages)", list_each, c, 0);
  kcr_client_free(c);
  assert_true(ok);
}

/* ---- the watch ------------------------------------------------------------ */

#define NEV 4
static const char *const events[NEV] = {
    "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"a\",\"resourceVersion\":"
    "\"11\"},\"data\":{\"big\":\"" BIG "\"}}}",
    "{\"type\":\"MODIFIED\",\"object\":{\"metadata\":{\"name\":\"a\","
    "\"resourceVersion\":\"12\"}}}",
    "{\"type\":\"BOOKMARK\",\"object\":{\"metadata\":{\"resourceVersion\":\"13\"}}}",
    "{\"type\":\"DELETED\",\"object\":{\"metadata\":{\"name\":\"a\",\"resourceVersion\":"
    "\"14\"}}}",
};
static const char *const event_rv[NEV] = {"11", "12", "13", "14"};
static const enum kcr_watch_type event_type[NEV] = {
    KCR_WATCH_ADDED, KCR_WATCH_MODIFIED, KCR_WATCH_BOOKMARK, KCR_WATCH_DELETED};

static kcr_err stream(struct twire_call *call, void *ud)
{
  bool *bad = ud;
  if(!str_eq(call->req->path, "/api/v1/namespaces/ns/configmaps?watch=1&resourceVersion="
                              "10&allowWatchBookmarks=true&timeoutSeconds=30&"
                              "labelSelector=app%3Dx")) {
    *bad = true;
    return twire_reply(call, 400, "%s", twire_status_json(400, "BadRequest"));
  }
  twire_stream(call, 200);
  for(int i = 0; i < NEV; i++) {
    /* Cut each document in two writes: framing must not care. */
    size_t n = strlen(events[i]);
    if(!twire_write(call, events[i], n / 2) ||
       !twire_write(call, events[i] + n / 2, n - n / 2) || !twire_write(call, "\n", 1))
      break;
  }
  return KCR_OK;
}

struct seen {
  int n;
  bool bad_order;
};

static kcr_err on_event(struct kcr_watch_event *ev, void *ud)
{
  struct seen *s = ud;
  if(s->n >= NEV || ev->type != event_type[s->n] ||
     !str_eq(ev->resource_version, event_rv[s->n]))
    s->bad_order = true;
  s->n++;
  return KCR_OK;
}

struct watch_case {
  kcr_client *c;
  bool bad_request;
};

static bool watch(void *ud)
{
  struct watch_case *wc = ud;
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  struct seen s = {0};
  kcr_watch *w = (kcr_watch *)1;
  kcr_err rc =
      kcr_watch_new(&(struct kcr_watch_opts){.client = wc->c,
                                             .on_event = on_event,
                                             .ud = &s,
                                             .ref = &(struct kcr_ref){&cms, "ns"},
                                             .resource_version = "10",
                                             .label_selector = "app=x",
                                             .timeout_ms = 30000,
                                             .allow_bookmarks = true},
                    &w, NULL);
  bool ok;

  if(rc)
    return rc == KCR_ENOMEM && !w;
  rc = kcr_watch_run(w, &ei);
  /* Events reach the callback in order, a failure ends the run with an
   * error, and the place to re-watch from is after the last event
   * delivered: nothing is skipped. */
  ok = !s.bad_order && !wc->bad_request;
  if(rc)
    ok = ok && oom_error(rc) && s.n < NEV &&
         str_eq(kcr_watch_rv(w), s.n ? event_rv[s.n - 1] : "10");
  else
    ok = ok && s.n == NEV && str_eq(kcr_watch_rv(w), "14");
  kcr_watch_free(w);
  kcr_errinfo_cleanup(&ei);
  return ok;
}

static void watch_delivers_a_prefix_in_order_and_fails_or_all_of_it(void **state)
{
  struct watch_case wc = {NULL, false};
  wc.c = twire_client(stream, &wc.bad_request);
  bool ok = tfail_torture_try("kcr_watch_new + kcr_watch_run", watch, &wc, 0);
  kcr_client_free(wc.c);
  assert_true(ok);
}

/* ---- framer and decoder ------------------------------------------------------ */

struct lines {
  char got[8][256];
  int n;
};

static kcr_err on_line(const char *line, size_t len, void *ud)
{
  struct lines *l = ud;
  if(l->n < 8 && len < 256) {
    memcpy(l->got[l->n], line, len);
    l->got[l->n][len] = '\0';
  }
  l->n++;
  return KCR_OK;
}

static bool framer(void *ud)
{
  static const char *const want[] = {"first line", "", "a longer second line " BIG,
                                     "third"};
  static const char *const chunks[] = {"fir", "st line\n\na longer second ", "line " BIG,
                                       "\nthi", "rd\npart"};
  struct kcr__framer f = {KCR_BUF_INIT, 0};
  struct lines l = {.n = 0};
  kcr_err rc = KCR_OK;
  bool ok = true;

  for(size_t i = 0; i < 5 && !rc; i++)
    rc = kcr__framer_feed(&f, chunks[i], strlen(chunks[i]), on_line, &l);
  /* Lines handed out are whole and in order, whether or not the feed
   * failed later. */
  for(int i = 0; i < l.n && i < 4; i++)
    ok = ok && !strcmp(l.got[i], want[i]);
  if(rc)
    ok = ok && rc == KCR_ENOMEM && l.n <= 4;
  else
    ok = ok && l.n == 4 && kcr__framer_pending(&f) == 4;
  kcr__framer_cleanup(&f);
  return ok;
}

static void framer_hands_out_whole_lines_or_fails(void **state)
{
  tfail_torture("kcr__framer_feed", framer, NULL);
}

static bool decode(void *ud)
{
  const cJSON *want = ud;
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  struct kcr_watch_event ev;
  kcr_err rc = kcr__watch_decode(events[0], strlen(events[0]), NULL, &ev, &ei);
  bool ok = rc ? oom_error(rc) && !ev.object
               : ev.type == KCR_WATCH_ADDED && str_eq(ev.resource_version, "11") &&
                     tfail_equal(ev.object, want);
  cJSON_Delete(ev.object);
  kcr_errinfo_cleanup(&ei);
  return ok;
}

static void decoder_returns_a_whole_event_or_an_error(void **state)
{
  cJSON *doc = tfail_parse(events[0]);
  bool ok = tfail_torture_try("kcr__watch_decode", decode,
                              cJSON_GetObjectItem(doc, "object"), 0);
  cJSON_Delete(doc);
  assert_true(ok);
}

/* The same with managedFields left out first (the informer's way). */
static const char with_mf[] =
    "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"managedFields\":[{\"manager\":"
    "\"m\",\"fieldsV1\":{\"f:data\":{}}}],\"name\":\"a\",\"resourceVersion\":\"11\"},"
    "\"data\":{\"k\":\"v\"}}}";

static bool decode_dropping(void *ud)
{
  const cJSON *want = ud;
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  struct kcr_buf scratch = KCR_BUF_INIT;
  struct kcr_watch_event ev;
  kcr_err rc = kcr__watch_decode(with_mf, strlen(with_mf), &scratch, &ev, &ei);
  bool ok = rc ? oom_error(rc) && !ev.object
               : ev.type == KCR_WATCH_ADDED && str_eq(ev.resource_version, "11") &&
                     tfail_equal(ev.object, want);
  cJSON_Delete(ev.object);
  kcr_buf_cleanup(&scratch);
  kcr_errinfo_cleanup(&ei);
  return ok;
}

static void
decoder_leaving_out_managed_fields_returns_a_whole_event_or_an_error(void **state)
{
  cJSON *doc = tfail_parse(with_mf), *obj = cJSON_GetObjectItem(doc, "object");
  bool ok;
  cJSON_DeleteItemFromObjectCaseSensitive(cJSON_GetObjectItem(obj, "metadata"),
                                          "managedFields");
  ok = tfail_torture_try("kcr__watch_decode (scratch)", decode_dropping, obj, 0);
  cJSON_Delete(doc);
  assert_true(ok);
}

int main(void)
{
  tfail_init();
  /* Log lines are made (and their allocations tortured) but not shown. */
  kcr_log_set_fd(open("/dev/null", 1));
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(config_from_yaml_with_inline_data_loads_whole_or_enomem),
      cmocka_unit_test(config_from_yaml_with_an_exec_section_loads_whole_or_enomem),
      cmocka_unit_test(config_with_a_token_file_loads_and_reads_it_or_enomem),
      cmocka_unit_test(config_credentials_are_a_whole_snapshot_or_nothing),
      cmocka_unit_test(config_credentials_from_an_exec_plugin_are_whole_or_enomem),
      cmocka_unit_test(config_load_and_client_new_fail_cleanly),
      cmocka_unit_test(path_and_query_build_whole_or_enomem),
      cmocka_unit_test(get_returns_the_object_or_an_error_and_null),
      cmocka_unit_test(list_returns_the_page_or_an_error_and_null),
      cmocka_unit_test(create_sends_the_whole_object_or_nothing),
      cmocka_unit_test(update_sends_the_whole_object_or_nothing),
      cmocka_unit_test(patch_sends_the_whole_patch_or_nothing),
      cmocka_unit_test(apply_sends_the_whole_object_or_nothing),
      cmocka_unit_test(delete_sends_whole_delete_options_or_nothing),
      cmocka_unit_test(an_error_answer_keeps_its_code_when_allocations_fail),
      cmocka_unit_test(list_each_with_options_lists_all_pages_or_fails),
      cmocka_unit_test(watch_delivers_a_prefix_in_order_and_fails_or_all_of_it),
      cmocka_unit_test(framer_hands_out_whole_lines_or_fails),
      cmocka_unit_test(decoder_returns_a_whole_event_or_an_error),
      cmocka_unit_test(
          decoder_leaving_out_managed_fields_returns_a_whole_event_or_an_error),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
