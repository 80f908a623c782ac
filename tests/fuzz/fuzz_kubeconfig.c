/* Kubeconfig YAML: kcr_config_from_yaml on any text (the selected context
 * NULL - current-context - and "fuzz"), then what a client does with a
 * loaded config: the accessors, kcr_config_dup_credentials and
 * kcr_client_new (no I/O).
 *
 * A kubeconfig names files (CA, certificate, key, token file) relative to
 * its own path, here tests/data/kubeconfig/ so the checked-in certificates
 * load. Reading them is real, but this executable is linked with
 * --wrap=open and --wrap=posix_spawn: open() refuses anything but a regular
 * file (a FIFO or a device would block or never end) and no exec plugin is
 * ever started (posix_spawn fails with ENOENT: "plugin not found"). */
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdarg.h>
#include <sys/stat.h>

#include "fuzz.h"

#ifndef KCR_FUZZ_KUBECONFIG
#error "KCR_FUZZ_KUBECONFIG: the path the input is named as (tests/fuzz/CMakeLists.txt)"
#endif

int __real_open(const char *path, int flags, ...);
int __wrap_open(const char *path, int flags, ...);
int __wrap_posix_spawn(pid_t *pid, const char *path, const posix_spawn_file_actions_t *fa,
                       const posix_spawnattr_t *attr, char *const argv[],
                       char *const envp[]);

int __wrap_open(const char *path, int flags, ...)
{
  struct stat st;
  mode_t mode = 0;
  va_list ap;

  if(stat(path, &st) || !S_ISREG(st.st_mode) || (flags & O_ACCMODE) != O_RDONLY) {
    errno = ENOENT;
    return -1;
  }
  va_start(ap, flags);
  if(flags & O_CREAT)
    mode = (mode_t)va_arg(ap, int);
  va_end(ap);
  return __real_open(path, flags, mode);
}

int __wrap_posix_spawn(pid_t *pid, const char *path, const posix_spawn_file_actions_t *fa,
                       const posix_spawnattr_t *attr, char *const argv[],
                       char *const envp[])
{
  return ENOENT;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
  fuzz_quiet();
  return 0;
}

static void use(kcr_config *cfg)
{
  struct kcr_credentials cr = {0};
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  kcr_client *c = NULL;
  const unsigned char *ca;
  size_t ca_len = 0;
  const char *server = kcr_config_server(cfg), *tsn = kcr_config_tls_server_name(cfg);
  const char *ns = kcr_config_namespace(cfg);

  FUZZ_CHECK(server && strlen(server) > 0);
  FUZZ_CHECK(kcr_config_origin(cfg) != NULL);
  FUZZ_CHECK(!tsn || strlen(tsn) > 0);
  FUZZ_CHECK(!ns || strlen(ns) < 1u << 20);
  ca = kcr_config_ca(cfg, &ca_len);
  FUZZ_CHECK(!ca || ca_len > 0);
  FUZZ_CHECK(!(ca && kcr_config_insecure(cfg))); /* refused at load time */
  if(kcr_config_dup_credentials(cfg, &cr, &ei) == KCR_OK) {
    FUZZ_CHECK(!cr.cert == !cr.key);
    FUZZ_CHECK(!cr.token || strlen(cr.token) > 0);
  } else {
    FUZZ_CHECK(!cr.token && !cr.cert && !cr.key);
  }
  kcr_credentials_cleanup(&cr);
  kcr_errinfo_cleanup(&ei);
  if(kcr_client_new(&(struct kcr_client_opts){.config = cfg}, &c, &ei) == KCR_OK)
    kcr_client_free(c);
  kcr_errinfo_cleanup(&ei);
}

static void load(const char *yaml, size_t len, const char *context)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  kcr_config *cfg = (kcr_config *)"not set";
  kcr_err rc;

  rc = kcr_config_from_yaml(
      yaml, len,
      &(struct kcr_config_opts){.kubeconfig = KCR_FUZZ_KUBECONFIG, .context = context},
      &cfg, &ei);
  if(rc == KCR_OK) {
    FUZZ_CHECK(cfg != NULL);
    use(cfg);
    kcr_config_free(cfg);
  } else {
    FUZZ_CHECK(cfg == NULL);
    FUZZ_CHECK(rc == KCR_ECONFIG || rc == KCR_ENOMEM);
    FUZZ_CHECK(rc == KCR_ENOMEM || ei.message != NULL);
  }
  kcr_errinfo_cleanup(&ei);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  /* A copy of exactly size bytes, not NUL-terminated: the parser gets a
   * length and must not read past it. */
  char *yaml = malloc(size ? size : 1);
  if(!yaml)
    abort();
  if(size)
    memcpy(yaml, data, size);
  load(yaml, size, NULL);
  load(yaml, size, "fuzz");
  free(yaml);
  return 0;
}
