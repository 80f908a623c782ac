/* The node's pause (sandbox) image and the e2e tests' hello image, in one
 * static program. Without arguments it waits for SIGINT or SIGTERM, reaping
 * any child it inherits (the job of a Pod's sandbox "pause" container), and
 * exits 0. With arguments it prints them, space separated, on stdout and
 * exits 0. Built and packed by tools/controlplane/node/images. */
#include <signal.h>
#include <stdio.h>
#include <sys/wait.h>

int main(int argc, char **argv)
{
  sigset_t set;
  int sig = 0;

  if(argc > 1) {
    for(int i = 1; i < argc; i++)
      printf("%s%s", argv[i], i + 1 < argc ? " " : "\n");
    return fflush(stdout) == 0 ? 0 : 1;
  }
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGCHLD);
  sigprocmask(SIG_BLOCK, &set, NULL);
  while(sigwait(&set, &sig) == 0 && sig == SIGCHLD)
    while(waitpid(-1, NULL, WNOHANG) > 0)
      ;
  return 0;
}
