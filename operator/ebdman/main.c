/* ebdman - command-line entry: a table of subcommands, each with --help.
 * Bad flags or config: one clear line on stderr and exit 2. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ebdman.h"

static int cmd_version(int argc, char **argv)
{
  if(argc > 1 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
    printf("usage: ebdman version\nPrints the version.\n");
    return 0;
  }
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
  fprintf(f, "usage: ebdman COMMAND [options]\n\n"
             "ebdman installs a VFM and its config for every EBD and reports their\n"
             "health through status conditions.\n\ncommands:\n");
  for(size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
    fprintf(f, "  %-8s %s\n", cmds[i].name, cmds[i].help);
  fprintf(f, "\nRun 'ebdman COMMAND --help' for a command's options.\n");
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

static void run_usage(FILE *f)
{
  fprintf(f,
          "usage: ebdman run [options]\n"
          "Runs the EBD controller until SIGTERM/SIGINT.\n\n"
          "  --kubeconfig PATH                 kubeconfig (default: $KUBECONFIG, "
          "~/.kube/config, then in-cluster)\n"
          "  --namespace NS                    watch one namespace (default: all)\n"
          "  --workers N                       concurrent reconciles (default 4)\n"
          "  --leader-elect                    elect one active replica (Lease "
          "ebdman-leader)\n"
          "  --leader-election-namespace NS    namespace of the Lease (default: "
          "ebdman-system in a\n"
          "                                    cluster, else the kubeconfig's namespace "
          "or default)\n"
          "  --metrics-bind-address ADDR       default :8080; \"0\" disables\n"
          "  --health-probe-bind-address ADDR  default :8081\n"
          "  --log-level LEVEL                 debug, info, warn, error (default info)\n"
          "  --log-format FORMAT               kv or json (default kv)\n"
          "  --resync DURATION                 safety re-check of every EBD (default "
          "10h; 0 disables)\n"
          "  -h, --help                        this help\n");
}

static int bad_flag(const char *flag, const char *v, const char *want)
{
  fprintf(stderr, "ebdman run: invalid %s \"%s\": %s\n", flag, v, want);
  return 2;
}

int cmd_run(int argc, char **argv)
{
  enum {
    O_KC = 1,
    O_NS,
    O_WORKERS,
    O_LE,
    O_LENS,
    O_MET,
    O_HEALTH,
    O_LOG,
    O_FMT,
    O_RESYNC
  };
  static const struct option opts[] = {
      {"kubeconfig", required_argument, NULL, O_KC},
      {"namespace", required_argument, NULL, O_NS},
      {"workers", required_argument, NULL, O_WORKERS},
      {"leader-elect", no_argument, NULL, O_LE},
      {"leader-election-namespace", required_argument, NULL, O_LENS},
      {"metrics-bind-address", required_argument, NULL, O_MET},
      {"health-probe-bind-address", required_argument, NULL, O_HEALTH},
      {"log-level", required_argument, NULL, O_LOG},
      {"log-format", required_argument, NULL, O_FMT},
      {"resync", required_argument, NULL, O_RESYNC},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0}};
  struct ebdman_run_opts ro = {.metrics_addr = ":8080",
                               .health_addr = ":8081",
                               .workers = 4,
                               .resync_ms = 10ull * 3600 * 1000};
  int opt, lvl;
  char *end;

  optind = 1;
  opterr = 0;
  while((opt = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
    switch(opt) {
    case O_KC: ro.kubeconfig = optarg; break;
    case O_NS: ro.ns = optarg; break;
    case O_WORKERS:
      ro.workers = (int)strtol(optarg, &end, 10);
      if(*end || ro.workers < 1 || ro.workers > 256)
        return bad_flag("--workers", optarg, "want a number from 1 to 256");
      break;
    case O_LE: ro.leader_elect = true; break;
    case O_LENS: ro.lease_ns = optarg; break;
    case O_MET: ro.metrics_addr = optarg; break;
    case O_HEALTH: ro.health_addr = optarg; break;
    case O_LOG:
      if((lvl = kcr_log_level_parse(optarg)) < 0)
        return bad_flag("--log-level", optarg, "want debug, info, warn or error");
      kcr_log_set_level((enum kcr_log_level)lvl);
      break;
    case O_FMT:
      if(strcmp(optarg, "kv") && strcmp(optarg, "json"))
        return bad_flag("--log-format", optarg, "want kv or json");
      kcr_log_set_format(!strcmp(optarg, "json") ? KCR_LOG_JSON : KCR_LOG_KV);
      break;
    case O_RESYNC:
      if(kcr_duration_parse(optarg, &ro.resync_ms))
        return bad_flag("--resync", optarg, "want a duration such as 10h, 30m or 90s");
      break;
    case 'h': run_usage(stdout); return 0;
    case ':':
      fprintf(stderr, "ebdman run: %s needs a value\n", argv[optind - 1]);
      return 2;
    default:
      fprintf(stderr, "ebdman run: unknown option \"%s\" (try 'ebdman run --help')\n",
              argv[optind - 1]);
      return 2;
    }
  }
  if(optind < argc) {
    fprintf(stderr, "ebdman run: unexpected argument \"%s\"\n", argv[optind]);
    return 2;
  }
  if(!ro.lease_ns && getenv("KUBERNETES_SERVICE_HOST") &&
     access("/var/run/secrets/kubernetes.io/serviceaccount/namespace", R_OK) == 0) {
    static char nsbuf[256];
    FILE *f = fopen("/var/run/secrets/kubernetes.io/serviceaccount/namespace", "r");
    if(f && fgets(nsbuf, sizeof(nsbuf), f)) {
      nsbuf[strcspn(nsbuf, "\n")] = '\0';
      ro.lease_ns = nsbuf;
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
  if(argc > 1 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
    printf(
        "usage: ebdman demo [--keep]\n"
        "Starts a local control plane (etcd, kube-apiserver, kube-controller-manager "
        "on loopback),\ninstalls the CRDs, runs ebdman and vfm-sim, creates sample EBDs "
        "and shows their\nconditions as they change. --keep leaves it running until "
        "Ctrl-C.\n");
    return 0;
  }
  snprintf(path, sizeof(path), "%s/scripts/demo", EBDMAN_SOURCE_DIR);
  argv[0] = path;
  execv(path, argv);
  fprintf(stderr, "ebdman demo: cannot run %s (the demo needs the source tree)\n", path);
  return 2;
}
