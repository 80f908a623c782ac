/* byte_proxy - a loopback TCP proxy that counts the bytes it carries, for
 * bench/cluster_size.sh (bench/README.md, section 9): the bytes the
 * apiserver sends to one operator.
 *
 *   byte_proxy UPSTREAM_PORT
 *
 * Listens on 127.0.0.1 at a port the kernel picks and prints it as the
 * first line of stdout ("port P"). Each accepted connection is joined to a
 * new connection to 127.0.0.1:UPSTREAM_PORT and the bytes are copied both
 * ways untouched: TLS is not terminated, so the client still verifies the
 * apiserver's certificate (which names 127.0.0.1), negotiates HTTP/2 or
 * HTTP/1.1 with it by ALPN, and asks for gzip or not, as it would without
 * the proxy. What is counted is therefore what crossed the wire: TLS
 * records, handshakes included.
 *
 * SIGUSR1 prints "down=D up=U conns=C" (bytes upstream->client, client->
 * upstream, connections accepted so far); SIGTERM and SIGINT print the
 * same line and exit. Two threads per connection (one per direction), each
 * blocking in read/write; counters are atomics. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static atomic_ullong down_bytes, up_bytes, conns;
static int upstream_port;

struct pipe_half {
  int from, to;
  atomic_ullong *count;
  atomic_int *left; /* halves still running; the last one closes both fds */
  int other_from;
};

static void *copy(void *arg)
{
  struct pipe_half *h = arg;
  char buf[65536];
  for(;;) {
    ssize_t n = read(h->from, buf, sizeof buf);
    if(n < 0 && errno == EINTR)
      continue;
    if(n <= 0)
      break;
    atomic_fetch_add(h->count, (unsigned long long)n);
    for(ssize_t off = 0; off < n;) {
      ssize_t w = write(h->to, buf + off, (size_t)(n - off));
      if(w < 0 && errno == EINTR)
        continue;
      if(w <= 0)
        goto out;
      off += w;
    }
  }
out:
  shutdown(h->to, SHUT_WR);
  shutdown(h->from, SHUT_RD);
  if(atomic_fetch_sub(h->left, 1) == 1) {
    close(h->from);
    close(h->to);
    free(h->left);
  }
  free(h);
  return NULL;
}

static int dial(void)
{
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if(fd < 0)
    return -1;
  struct sockaddr_in a = {.sin_family = AF_INET,
                          .sin_port = htons((uint16_t)upstream_port),
                          .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  if(connect(fd, (struct sockaddr *)&a, sizeof a) < 0) {
    close(fd);
    return -1;
  }
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

static void start(int from, int to, atomic_ullong *count, atomic_int *left)
{
  struct pipe_half *h = malloc(sizeof *h);
  if(!h)
    abort();
  *h = (struct pipe_half){.from = from, .to = to, .count = count, .left = left};
  pthread_t t;
  pthread_attr_t at;
  pthread_attr_init(&at);
  pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
  pthread_attr_setstacksize(&at, 256 * 1024);
  if(pthread_create(&t, &at, copy, h))
    abort();
  pthread_attr_destroy(&at);
}

static void report(void)
{
  printf("down=%llu up=%llu conns=%llu\n", atomic_load(&down_bytes),
         atomic_load(&up_bytes), atomic_load(&conns));
  fflush(stdout);
}

static void *signals(void *arg)
{
  sigset_t *set = arg;
  for(;;) {
    int sig;
    if(sigwait(set, &sig))
      continue;
    report();
    if(sig != SIGUSR1)
      exit(0);
  }
  return NULL;
}

int main(int argc, char **argv)
{
  if(argc != 2 || (upstream_port = atoi(argv[1])) <= 0 || upstream_port > 65535) {
    fprintf(stderr, "usage: byte_proxy UPSTREAM_PORT\n");
    return 2;
  }
  static sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGUSR1);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, NULL);
  signal(SIGPIPE, SIG_IGN);
  pthread_t st;
  if(pthread_create(&st, NULL, signals, &set))
    return 1;

  int ls = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in a = {.sin_family = AF_INET,
                          .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t al = sizeof a;
  if(ls < 0 || bind(ls, (struct sockaddr *)&a, sizeof a) < 0 || listen(ls, 128) < 0 ||
     getsockname(ls, (struct sockaddr *)&a, &al) < 0) {
    perror("byte_proxy: listen");
    return 1;
  }
  printf("port %d\n", ntohs(a.sin_port));
  fflush(stdout);
  for(;;) {
    int c = accept4(ls, NULL, NULL, SOCK_CLOEXEC);
    if(c < 0) {
      if(errno == EINTR || errno == ECONNABORTED)
        continue;
      perror("byte_proxy: accept");
      return 1;
    }
    int one = 1;
    setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    int u = dial();
    if(u < 0) {
      perror("byte_proxy: connect upstream");
      close(c);
      continue;
    }
    atomic_fetch_add(&conns, 1);
    atomic_int *left = malloc(sizeof *left);
    if(!left)
      abort();
    atomic_init(left, 2);
    start(u, c, &down_bytes, left);
    start(c, u, &up_bytes, left);
  }
}
