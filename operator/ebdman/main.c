/* ebdman - command-line entry: a table of subcommands, each with --help.
 * Bad flags or config: one clear line on stderr and exit 2. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ebdman.h"

static int cmd_version(int argc, char **argv)
{
  kcr_cli_parse_or_exit(
      &(struct kcr_cli){.prog = "ebdman version", .about = "Prints the version."}, argc,
      argv);
  printf("ebdman %s (libkcr %s)\n", EBDMAN_VERSION, kcr_version());
  return 0;
}

static const struct cmd {
  const char *name;
  int (*fn)(int argc, char **argv);
  const char *help;
} cmds[] = {
    {"run", cmd_run, "run the operator against a cluster"},
    {"status", cmd_status, "print EBDs and their conditions"},
    {"demo", cmd_demo, "start a local control plane and show the operator at work"},
    {"version", cmd_version, "print the version"},
};

static void usage(FILE *f)
{
  fprintf(f, "usage: ebdman COMMAND [flags]\n\n"
             "ebdman installs a VFM and its config for every EBD and reports their\n"
             "health through status conditions.\n\ncommands:\n");
  for(size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
    fprintf(f, "  %-8s %s\n", cmds[i].name, cmds[i].help);
  fprintf(f, "\nRun 'ebdman COMMAND --help' for a command's flags.\n");
}

int main(int argc, char **argv)
{
  if(argc < 2) {
    usage(stderr);
    return 2;
  }
  if(!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
    usage(stdout);
    return 0;
  }
  if(!strcmp(argv[1], "--version"))
    return cmd_version(1, argv);
  for(size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
    if(!strcmp(argv[1], cmds[i].name))
      return cmds[i].fn(argc - 1, argv + 1);
  fprintf(stderr, "ebdman: unknown command \"%s\" (try 'ebdman --help')\n", argv[1]);
  return 2;
}

/* ---- run ---- */

int cmd_run(int argc, char **argv)
{
  struct ebdman_run_opts ro = {
      /* Secure metrics by default, as kubebuilder's scaffold (port 8443). */
      .manager = {.name = "ebdman",
                  .metrics_addr = ":8443",
                  .metrics_secure = true,
                  .health_addr = ":8081"},
      .workers = 4,
      .resync_ms = 10ull * 3600 * 1000,
      .validating_config = "ebdman-validating-webhook-configuration",
      .mutating_config = "ebdman-mutating-webhook-configuration",
      .conversion_crd = EBDMAN_CRD,
      .migrate_storage = true};
  const struct kcr_flag flags[] = {
      {"namespace", KCR_FLAG_STRINGS, ro.namespaces,
       "watch EBDs and their children in this namespace; repeat it for several "
       "(default: all)",
       .arg = "NS", .max = EBDMAN_MAX_NAMESPACES},
      {"namespace-selector", KCR_FLAG_STRING, &ro.namespace_selector,
       "watch EBDs and their children in the namespaces whose labels match this "
       "selector (team=a), followed as labels change; needs list and watch on "
       "namespaces",
       .arg = "SELECTOR"},
      {"workers", KCR_FLAG_INT, &ro.workers, "concurrent reconciles", .min = 1,
       .max = 256},
      {"resync", KCR_FLAG_DURATION, &ro.resync_ms,
       "safety re-check of every EBD; 0 disables it"},
      {"webhook-certs-secret", KCR_FLAG_STRING, &ro.certs_secret,
       "make, keep and rotate the webhook certificates in this Secret (in the "
       "--leader-election-namespace) and write their CA into the webhook "
       "configurations' caBundle, in place of --webhook-cert-path's files",
       .arg = "NAME"},
      {"webhook-service", KCR_FLAG_STRING, &ro.service,
       "with --webhook-certs-secret: the webhook Service, in the same namespace, "
       "whose names the certificate holds",
       .arg = "NAME"},
      {"webhook-ip", KCR_FLAG_STRING, &ro.ip,
       "with --webhook-certs-secret: an IP address the certificate holds (for a "
       "clientConfig.url)",
       .arg = "IP"},
      {"validating-webhook-configuration", KCR_FLAG_STRING, &ro.validating_config,
       "with --webhook-certs-secret: the ValidatingWebhookConfiguration whose caBundle "
       "is written",
       .arg = "NAME"},
      {"mutating-webhook-configuration", KCR_FLAG_STRING, &ro.mutating_config,
       "with --webhook-certs-secret: the MutatingWebhookConfiguration whose caBundle "
       "is written",
       .arg = "NAME"},
      {"conversion-crd", KCR_FLAG_STRING, &ro.conversion_crd,
       "with --webhook-certs-secret: the CustomResourceDefinition whose conversion "
       "webhook's caBundle is written (when its strategy is Webhook)",
       .arg = "NAME"},
      {"webhook-cert-lifetime", KCR_FLAG_DURATION, &ro.cert_lifetime_ms,
       "with --webhook-certs-secret: how long a serving certificate is valid (renewed "
       "at two thirds)",
       .min = 1000, .max = INT64_MAX, .def = "2160h"},
      {"webhook-ca-lifetime", KCR_FLAG_DURATION, &ro.ca_lifetime_ms,
       "with --webhook-certs-secret: how long a CA is valid (rotated at two thirds)",
       .min = 1000, .max = INT64_MAX, .def = "8760h"},
      {"webhook-ca-grace", KCR_FLAG_DURATION, &ro.ca_grace_ms,
       "with --webhook-certs-secret: in a CA rotation, how long both CAs are trusted "
       "before the new one signs, and again before the old one goes",
       .min = 1000, .max = INT64_MAX, .def = "5m"},
      {"webhook-certs-poll", KCR_FLAG_DURATION, &ro.certs_poll_ms,
       "with --webhook-certs-secret: how often every replica reads the Secret",
       .min = 1000, .max = INT64_MAX, .def = "10s"},
      {"default-vfm-image", KCR_FLAG_STRING, &ro.default_image,
       "the image an EBD without spec.vfmTemplate.image gets (the defaulting webhook; "
       "needs "
       "--webhook-bind-address)",
       .arg = "IMAGE"},
      {"migrate-storage", KCR_FLAG_BOOL, &ro.migrate_storage,
       "while the EBD CRD lists a stored version other than its storage version, "
       "rewrite every EBD and then say so in its status.storedVersions (the leader "
       "does; off with --namespace and --namespace-selector, which cannot list "
       "every EBD)"},
      {"graceful-shutdown-timeout", KCR_FLAG_DURATION, &ro.manager.grace_ms,
       "how long reconciles under way get to finish after SIGTERM; ebdman exits "
       "without waiting for those still running then",
       .min = 1, .max = INT64_MAX, .def = "30s"},
  };
  kcr_cli_parse_or_exit(
      &(struct kcr_cli){.prog = "ebdman run",
                        .about = "Runs the EBD controller until SIGTERM/SIGINT.",
                        .flags = flags,
                        .nflags = sizeof(flags) / sizeof(flags[0]),
                        .config = &ro.config,
                        .manager = &ro.manager,
                        .log = true},
      argc, argv);
  /* In a pod the Lease lives in the pod's namespace, whatever the
   * kubeconfig says (controller-runtime's default). */
  if(!ro.manager.lease_namespace && getenv("KUBERNETES_SERVICE_HOST") &&
     access("/var/run/secrets/kubernetes.io/serviceaccount/namespace", R_OK) == 0) {
    static char nsbuf[256];
    FILE *f = fopen("/var/run/secrets/kubernetes.io/serviceaccount/namespace", "r");
    if(f && fgets(nsbuf, sizeof(nsbuf), f)) {
      nsbuf[strcspn(nsbuf, "\n")] = '\0';
      ro.manager.lease_namespace = nsbuf;
    }
    if(f)
      fclose(f);
  }
  return ebdman_run(&ro);
}

/* ---- demo: the scripted tour lives in scripts/demo ---- */

int cmd_demo(int argc, char **argv)
{
  char path[4096];
  bool keep = false;
  const struct kcr_flag flags[] = {
      {"keep", KCR_FLAG_BOOL, &keep, "leave it running at the end until Ctrl-C"},
  };
  kcr_cli_parse_or_exit(
      &(struct kcr_cli){.prog = "ebdman demo",
                        .about = "Starts a local control plane (etcd, kube-apiserver and "
                                 "kube-controller-manager\non loopback), installs the "
                                 "CRDs, runs ebdman and vfm-sim, creates sample EBDs\n"
                                 "and shows their conditions as they change.",
                        .flags = flags,
                        .nflags = 1},
      argc, argv);
  snprintf(path, sizeof(path), "%s/scripts/demo", EBDMAN_SOURCE_DIR);
  execv(path, keep ? (char *[]){path, "--keep", NULL} : (char *[]){path, NULL});
  fprintf(stderr, "ebdman demo: cannot run %s (the demo needs the source tree)\n", path);
  return 2;
}
