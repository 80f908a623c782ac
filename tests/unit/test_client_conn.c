/* The client's transports on real sockets, against a scripted HTTP/1.1
 * server on loopback: plain HTTP (every request a curl transfer) or TLS
 * with a self-signed certificate (writes and watches on connections of the
 * client's own, src/kube/client.c DESIGN). What a write does when a reused
 * connection gives no answer (re-sent only if no byte of it left; a GET is
 * re-sent when no answer byte came), a large write on a new TLS 1.3
 * connection whose server sent session tickets, and bytes nobody asked for
 * that came with an answer (never read as the next one). */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/secret-int.h"
#include "kcr.h"
#include "kube/client-int.h"
#include "runtime/tlscert-int.h"
#include "tfail.h"

/* ---- the server ---- */

/* What the server does with the request it has just read whole. */
enum act {
  ANSWER,  /* 200 with a small JSON body; the connection stays open */
  HANG_UP, /* closes the connection without a byte of answer */
  /* ANSWER, then an answer nobody asked for (STALE): in the same socket
   * write, in a TLS record of its own */
  ANSWER_AND_STALE_RECORD,
  /* a 200 of LONG_LEN bytes, then STALE, in one TLS record */
  LONG_ANSWER_AND_STALE,
};

/* The bytes of an answer nobody asked for; its body. */
#define STALE      "HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\n{\"stale\":1}"
#define STALE_BODY "{\"stale\":1}"

/* The length of LONG_ANSWER_AND_STALE's answer, head and body: a
 * multiple of every power of two up to 8 KiB, so that a client reading in
 * pieces of any of those sizes would find the answer ending where a read
 * ended. */
enum { LONG_LEN = 8192 };

/* Serves one connection at a time; on its conn-th connection (from 0) the
 * req-th request (from 0) gets script(conn, req). */
struct srv {
  int lfd, port;
  SSL_CTX *ctx; /* NULL: plain HTTP */
  enum act (*script)(int conn, int req);
  atomic_int posts, gets, conns;
  atomic_size_t body_bytes; /* of the request being read, read so far */
  pthread_t th;
};

struct sconn {
  int fd;
  SSL *ssl;
};

static int sread(struct sconn *s, char *p, size_t n)
{
  return s->ssl ? SSL_read(s->ssl, p, (int)n) : (int)read(s->fd, p, n);
}

static bool swrite(struct sconn *s, const char *p, size_t n)
{
  return s->ssl ? SSL_write(s->ssl, p, (int)n) == (int)n
                : write(s->fd, p, n) == (ssize_t)n;
}

/* Writes a and then b with one write(2): with TLS, each in records of its
 * own (made in memory, then sent together), so that both are in the
 * client's socket at once. */
static bool swrite_two(struct sconn *s, const char *a, size_t an, const char *b,
                       size_t bn)
{
  BIO *mem;
  char *p;
  long n;
  bool ok;

  if(!s->ssl) {
    char buf[1024];
    assert_true(an + bn <= sizeof(buf));
    memcpy(buf, a, an);
    memcpy(buf + an, b, bn);
    return write(s->fd, buf, an + bn) == (ssize_t)(an + bn);
  }
  assert_non_null(mem = BIO_new(BIO_s_mem()));
  SSL_set0_wbio(s->ssl, mem); /* the socket's BIO stays, as the rbio */
  ok = swrite(s, a, an) && swrite(s, b, bn);
  n = BIO_get_mem_data(mem, &p);
  ok = ok && n > 0 && write(s->fd, p, (size_t)n) == (ssize_t)n;
  SSL_set0_wbio(s->ssl, BIO_new_socket(s->fd, BIO_NOCLOSE)); /* frees mem */
  return ok;
}

/* A 200 of LONG_LEN bytes (its body {"pad":"aa...a"}) and STALE, in one
 * write (with TLS: one record). */
static bool swrite_long_and_stale(struct sconn *s)
{
  static const char head[] = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                             "Content-Length: %4d\r\n\r\n";
  char buf[LONG_LEN + sizeof(STALE)];
  int blen = LONG_LEN - (int)(sizeof(head) - 1 - 3 + 4); /* "%4d": 4 digits */
  int hn = snprintf(buf, sizeof(buf), head, blen);

  assert_int_equal(LONG_LEN, hn + blen);
  memset(buf + hn, 'a', (size_t)blen);
  memcpy(buf + hn, "{\"pad\":\"", 8);
  memcpy(buf + LONG_LEN - 2, "\"}", 2);
  memcpy(buf + LONG_LEN, STALE, sizeof(STALE) - 1);
  return swrite(s, buf, LONG_LEN + sizeof(STALE) - 1);
}

/* Reads one request whole (its body counted, not kept) and counts its
 * method; false at the connection's end. */
static bool read_request(struct srv *sv, struct sconn *s)
{
  char head[8192], buf[16384], *end;
  size_t n = 0, want, have;
  int k;

  for(;;) {
    if(n == sizeof(head) - 1 || (k = sread(s, head + n, sizeof(head) - 1 - n)) <= 0)
      return false;
    n += (size_t)k;
    head[n] = '\0';
    if((end = strstr(head, "\r\n\r\n")))
      break;
  }
  end += 4;
  char *clen = strcasestr(head, "content-length:");
  want = clen && clen < end ? strtoul(clen + 15, NULL, 10) : 0;
  have = n - (size_t)(end - head);
  atomic_store(&sv->body_bytes, have);
  while(have < want) {
    if((k = sread(s, buf, sizeof(buf))) <= 0)
      return false;
    have += (size_t)k;
    atomic_store(&sv->body_bytes, have);
  }
  if(!strncmp(head, "POST ", 5))
    atomic_fetch_add(&sv->posts, 1);
  else if(!strncmp(head, "GET ", 4))
    atomic_fetch_add(&sv->gets, 1);
  return true;
}

/* Does a to the request just read; false: the connection is done with. */
static bool respond(struct sconn *s, enum act a)
{
  static const char answer[] = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                               "Content-Length: 13\r\n\r\n{\"answer\":42}";
  switch(a) {
  case ANSWER: return swrite(s, answer, sizeof(answer) - 1);
  case HANG_UP: return false;
  case ANSWER_AND_STALE_RECORD:
    return swrite_two(s, answer, sizeof(answer) - 1, STALE, sizeof(STALE) - 1);
  case LONG_ANSWER_AND_STALE: return swrite_long_and_stale(s);
  }
  return false;
}

static void *serve(void *arg)
{
  struct srv *sv = arg;
  for(int i = 0;; i++) {
    struct sconn s = {accept(sv->lfd, NULL, NULL), NULL};
    if(s.fd < 0)
      break; /* shut down */
    atomic_fetch_add(&sv->conns, 1);
    if(sv->ctx) {
      s.ssl = SSL_new(sv->ctx);
      SSL_set_fd(s.ssl, s.fd);
    }
    if(!s.ssl || SSL_accept(s.ssl) == 1)
      for(int k = 0; read_request(sv, &s); k++)
        if(!respond(&s, sv->script(i, k)))
          break;
    SSL_free(s.ssl);
    close(s.fd);
  }
  return NULL;
}

/* Starts a server: TLS when tls (TLS 1.3 only, session tickets as OpenSSL
 * sends them by default: two after each handshake), the receive buffer of
 * its connections rcvbuf bytes (0: the system's). */
static void srv_start(struct srv *sv, bool tls, int rcvbuf, enum act (*script)(int, int))
{
  struct sockaddr_in a = {.sin_family = AF_INET,
                          .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof(a);
  char *crt = NULL, *key = NULL;

  memset(sv, 0, sizeof(*sv));
  sv->script = script;
  if(tls) {
    BIO *cb, *kb;
    X509 *x;
    EVP_PKEY *pk;
    assert_int_equal(KCR_OK, kcr__tlscert_self_signed(&crt, &key, NULL));
    assert_non_null(sv->ctx = SSL_CTX_new(TLS_server_method()));
    assert_int_equal(1, SSL_CTX_set_min_proto_version(sv->ctx, TLS1_3_VERSION));
    assert_int_equal(1, SSL_CTX_set_num_tickets(sv->ctx, 2));
    cb = BIO_new_mem_buf(crt, -1);
    kb = BIO_new_mem_buf(key, -1);
    assert_non_null(x = PEM_read_bio_X509(cb, NULL, NULL, NULL));
    assert_non_null(pk = PEM_read_bio_PrivateKey(kb, NULL, NULL, NULL));
    assert_int_equal(1, SSL_CTX_use_certificate(sv->ctx, x));
    assert_int_equal(1, SSL_CTX_use_PrivateKey(sv->ctx, pk));
    X509_free(x);
    EVP_PKEY_free(pk);
    BIO_free(cb);
    BIO_free(kb);
    free(crt);
    kcr__wipe_str(key);
  }
  sv->lfd = socket(AF_INET, SOCK_STREAM, 0);
  assert_true(sv->lfd >= 0);
  /* set before listen: accepted connections inherit it (and the window
   * scale it implies) */
  if(rcvbuf)
    assert_int_equal(0,
                     setsockopt(sv->lfd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf)));
  assert_int_equal(0, bind(sv->lfd, (struct sockaddr *)&a, sizeof(a)));
  assert_int_equal(0, listen(sv->lfd, 8));
  getsockname(sv->lfd, (struct sockaddr *)&a, &len);
  sv->port = ntohs(a.sin_port);
  assert_int_equal(0, pthread_create(&sv->th, NULL, serve, sv));
}

/* After the client was freed (its connections closed: the server's reads
 * end). */
static void srv_stop(struct srv *sv)
{
  shutdown(sv->lfd, SHUT_RDWR);
  pthread_join(sv->th, NULL);
  close(sv->lfd);
  SSL_CTX_free(sv->ctx);
}

/* ---- a proxy ---- */

/* An HTTP proxy that tunnels (CONNECT) one connection at a time to the
 * port it is asked for on loopback. */
struct proxy {
  int lfd, port;
  pthread_t th;
};

static int connect_to(int port)
{
  struct sockaddr_in a = {.sin_family = AF_INET,
                          .sin_port = htons((uint16_t)port),
                          .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if(fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof(a))) {
    close(fd);
    fd = -1;
  }
  return fd;
}

/* Forwards bytes both ways until either side ends. */
static void pump(int a, int b)
{
  char buf[16384];
  struct pollfd pf[2] = {{a, POLLIN, 0}, {b, POLLIN, 0}};
  for(;;) {
    if(poll(pf, 2, -1) < 0)
      return;
    for(int i = 0; i < 2; i++) {
      ssize_t k;
      if(!pf[i].revents)
        continue;
      k = read(pf[i].fd, buf, sizeof(buf));
      if(k <= 0 || write(pf[1 - i].fd, buf, (size_t)k) != k)
        return;
    }
  }
}

static void *tunnel(void *arg)
{
  static const char ok[] = "HTTP/1.1 200 Connection established\r\n\r\n";
  struct proxy *px = arg;
  for(;;) {
    int fd = accept(px->lfd, NULL, NULL), up = -1;
    char head[2048], *colon;
    size_t n = 0;
    ssize_t k;
    if(fd < 0)
      break; /* shut down */
    while(n < sizeof(head) - 1 && (k = read(fd, head + n, sizeof(head) - 1 - n)) > 0) {
      n += (size_t)k;
      head[n] = '\0';
      if(strstr(head, "\r\n\r\n"))
        break;
    }
    head[n] = '\0';
    if(!strncmp(head, "CONNECT ", 8) && (colon = strchr(head + 8, ':')) &&
       (up = connect_to(atoi(colon + 1))) >= 0 && write(fd, ok, sizeof(ok) - 1) > 0)
      pump(fd, up);
    if(up >= 0)
      close(up);
    close(fd);
  }
  return NULL;
}

static void proxy_start(struct proxy *px)
{
  struct sockaddr_in a = {.sin_family = AF_INET,
                          .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof(a);
  px->lfd = socket(AF_INET, SOCK_STREAM, 0);
  assert_int_equal(0, bind(px->lfd, (struct sockaddr *)&a, sizeof(a)));
  assert_int_equal(0, listen(px->lfd, 8));
  getsockname(px->lfd, (struct sockaddr *)&a, &len);
  px->port = ntohs(a.sin_port);
  assert_int_equal(0, pthread_create(&px->th, NULL, tunnel, px));
}

static void proxy_stop(struct proxy *px)
{
  shutdown(px->lfd, SHUT_RDWR);
  pthread_join(px->th, NULL);
  close(px->lfd);
}

/* ---- the client ---- */

/* A client of sv (https with verification off, or http), its requests'
 * timeout timeout_ms. No proxy from the environment but the one at
 * proxy_port (0: none): a TLS server gets writes on connections of the
 * client's own, a plain one or one through the proxy curl's transfers. */
static kcr_client *client_via(const struct srv *sv, uint64_t timeout_ms, int proxy_port)
{
  static const char *const proxies[] = {"https_proxy", "HTTPS_PROXY", "http_proxy",
                                        "HTTP_PROXY",  "all_proxy",   "ALL_PROXY",
                                        "no_proxy",    "NO_PROXY"};
  char yaml[512], url[64];
  kcr_config *cfg;
  kcr_client *c;
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  int n;

  for(size_t i = 0; i < sizeof(proxies) / sizeof(proxies[0]); i++)
    unsetenv(proxies[i]);
  if(proxy_port) {
    snprintf(url, sizeof(url), "http://127.0.0.1:%d", proxy_port);
    setenv("https_proxy", url, 1); /* read when the client is made, and by curl */
  }
  n = snprintf(yaml, sizeof(yaml),
               "apiVersion: v1\nkind: Config\n"
               "clusters: [{name: c, cluster: {server: \"%s://127.0.0.1:%d\"%s}}]\n"
               "users: [{name: u, user: {token: t0ken}}]\n"
               "contexts: [{name: x, context: {cluster: c, user: u}}]\n"
               "current-context: x\n",
               sv->ctx ? "https" : "http", sv->port,
               sv->ctx ? ", insecure-skip-tls-verify: true" : "");
  assert_int_equal(KCR_OK, kcr_config_from_yaml(yaml, (size_t)n, NULL, &cfg, &ei));
  assert_int_equal(
      KCR_OK,
      kcr_client_new(&(struct kcr_client_opts){.config = cfg, .timeout_ms = timeout_ms},
                     &c, &ei));
  kcr_config_free(cfg);
  kcr_errinfo_cleanup(&ei);
  return c;
}

static kcr_client *client_of(const struct srv *sv, uint64_t timeout_ms)
{
  return client_via(sv, timeout_ms, 0);
}

static const char cms_path[] = "/api/v1/namespaces/ns/configmaps";

/* A create (POST) of body[0..len). */
static kcr_err create(kcr_client *c, const char *body, size_t len, uint64_t timeout_ms,
                      struct kcr_errinfo *ei)
{
  struct kcr_http_response resp = {.body = KCR_BUF_INIT};
  kcr_err rc = kcr_client_do(c,
                             &(struct kcr_http_request){.method = "POST",
                                                        .path = cms_path,
                                                        .body = body,
                                                        .body_len = len,
                                                        .timeout_ms = timeout_ms},
                             &resp, ei);
  if(!rc)
    assert_string_equal("{\"answer\":42}", kcr_buf_str(&resp.body));
  kcr_buf_cleanup(&resp.body);
  return rc;
}

static const char small[] = "{\"metadata\":{\"generateName\":\"cm-\"}}";

/* ---- a write is not sent twice ---- */

/* The first request on the first connection is answered; the second is
 * read whole, and the connection closed without an answer. Any later
 * connection answers everything. */
static enum act cut_the_second(int conn, int req)
{
  return conn == 0 && req == 1 ? HANG_UP : ANSWER;
}

/* A create whose reused connection closed after the server had read it
 * (a generateName create the server may have carried out) is not sent
 * again: the caller gets KCR_EUNCERTAIN and decides. Both transports. */
static void check_a_write_is_not_resent(bool tls)
{
  struct srv sv;
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  kcr_client *c;
  kcr_err rc;

  srv_start(&sv, tls, 0, cut_the_second);
  c = client_of(&sv, 5000);
  assert_int_equal(KCR_OK, create(c, small, sizeof(small) - 1, 0, &ei));
  rc = create(c, small, sizeof(small) - 1, 0, &ei);
  if(rc != KCR_EUNCERTAIN)
    fail_msg("%s: the second create: %s (%s), the server saw %d POSTs",
             tls ? "own" : "curl", kcr_err_name(rc), ei.message ? ei.message : "",
             atomic_load(&sv.posts));
  print_message("%s\n", ei.message);
  assert_int_equal(2, atomic_load(&sv.posts)); /* each create exactly once */
  /* the client works on: the next write goes on a new connection */
  assert_int_equal(KCR_OK, create(c, small, sizeof(small) - 1, 0, &ei));
  assert_int_equal(3, atomic_load(&sv.posts));
  kcr_client_free(c);
  srv_stop(&sv);
  kcr_errinfo_cleanup(&ei);
}

static void a_write_is_not_resent_on_a_connection_of_our_own(void **state)
{
  check_a_write_is_not_resent(true);
}

static void a_write_is_not_resent_by_curl(void **state)
{
  check_a_write_is_not_resent(false);
}

/* ---- a read is ---- */

static bool keep_body(const char *p, size_t n, void *ud)
{
  return !kcr_buf_append(ud, p, n);
}

/* A GET on a reused connection that the server closed after reading it,
 * before a byte of answer, is sent again on a new connection and gets its
 * answer: a connection of our own (a watch's, kcr__own_stream) and curl's
 * (kcr_client_do). */
static void check_a_read_is_resent(bool tls)
{
  struct srv sv;
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  struct kcr_buf body = KCR_BUF_INIT;
  kcr_client *c;
  kcr_err rc;
  long code = 0;

  srv_start(&sv, tls, 0, cut_the_second);
  c = client_of(&sv, 5000);
  /* the first request: a write for the own path (its pool), a GET for curl */
  if(tls) {
    assert_int_equal(KCR_OK, create(c, small, sizeof(small) - 1, 0, &ei));
    rc = kcr__own_stream(c, cms_path, NULL, 0, -1, 0, keep_body, &body, &code, &ei);
  } else {
    struct kcr_http_request req = {.method = "GET", .path = cms_path};
    struct kcr_http_response resp = {.body = KCR_BUF_INIT};
    assert_int_equal(KCR_OK, kcr_client_do(c, &req, &resp, &ei));
    rc = kcr_client_do(c, &req, &resp, &ei);
    code = resp.code;
    body = resp.body;
  }
  if(rc)
    fail_msg("%s: the GET: %s (%s)", tls ? "own" : "curl", kcr_err_name(rc),
             ei.message ? ei.message : "");
  assert_int_equal(200, code);
  assert_string_equal("{\"answer\":42}", kcr_buf_str(&body));
  assert_int_equal(2, atomic_load(&sv.conns));
  assert_int_equal(tls ? 2 : 3, atomic_load(&sv.gets)); /* the cut one, again */
  kcr_client_free(c);
  srv_stop(&sv);
  kcr_buf_cleanup(&body);
  kcr_errinfo_cleanup(&ei);
}

static void a_read_is_resent_on_a_connection_of_our_own(void **state)
{
  check_a_read_is_resent(true);
}

static void a_read_is_resent_by_curl(void **state) { check_a_read_is_resent(false); }

/* ---- on a new connection, nothing is sent again ---- */

/* The first request on each of the first two connections is read whole
 * and the connection closed; later ones answer. */
static enum act cut_the_first_two(int conn, int req)
{
  return conn < 2 && req == 0 ? HANG_UP : ANSWER;
}

/* A create the server read on a new connection and closed it without an
 * answer is KCR_EUNCERTAIN too (it went out once, and stays so); a GET so
 * cut is a transport failure. Both transports. */
static void check_no_answer_on_a_new_connection(bool tls)
{
  struct srv sv;
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  struct kcr_buf body = KCR_BUF_INIT;
  kcr_client *c;
  kcr_err rc;
  long code = 0;

  srv_start(&sv, tls, 0, cut_the_first_two);
  c = client_of(&sv, 5000);
  rc = create(c, small, sizeof(small) - 1, 0, &ei);
  if(rc != KCR_EUNCERTAIN)
    fail_msg("%s: the create: %s (%s)", tls ? "own" : "curl", kcr_err_name(rc),
             ei.message ? ei.message : "");
  print_message("%s\n", ei.message);
  assert_int_equal(1, atomic_load(&sv.posts));
  if(tls) {
    rc = kcr__own_stream(c, cms_path, NULL, 0, -1, 0, keep_body, &body, &code, &ei);
  } else {
    struct kcr_http_request req = {.method = "GET", .path = cms_path};
    struct kcr_http_response resp = {.body = KCR_BUF_INIT};
    rc = kcr_client_do(c, &req, &resp, &ei);
    body = resp.body;
  }
  assert_int_equal(KCR_ETRANSPORT, rc);
  assert_int_equal(1, atomic_load(&sv.gets));
  assert_int_equal(KCR_OK, create(c, small, sizeof(small) - 1, 0, &ei));
  assert_int_equal(3, atomic_load(&sv.conns));
  kcr_client_free(c);
  srv_stop(&sv);
  kcr_buf_cleanup(&body);
  kcr_errinfo_cleanup(&ei);
}

static void no_answer_on_a_new_connection_of_our_own(void **state)
{
  check_no_answer_on_a_new_connection(true);
}

static void no_answer_on_a_new_connection_of_curl(void **state)
{
  check_no_answer_on_a_new_connection(false);
}

/* Through a proxy (a CONNECT tunnel: every request curl's), whose CONNECT
 * curl counts among the bytes it sent: a write on a new tunnel goes out,
 * and one on a reused tunnel the server cut after reading it is not sent
 * again. */
static void writes_through_a_proxy_go_out_once(void **state)
{
  struct srv sv;
  struct proxy px;
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  kcr_client *c;
  kcr_err rc;

  srv_start(&sv, true, 0, cut_the_second);
  proxy_start(&px);
  c = client_via(&sv, 5000, px.port);
  assert_int_equal(KCR_OK, create(c, small, sizeof(small) - 1, 0, &ei));
  rc = create(c, small, sizeof(small) - 1, 0, &ei);
  if(rc != KCR_EUNCERTAIN)
    fail_msg("the second create: %s (%s), the server saw %d POSTs", kcr_err_name(rc),
             ei.message ? ei.message : "", atomic_load(&sv.posts));
  print_message("%s\n", ei.message);
  assert_int_equal(2, atomic_load(&sv.posts));
  assert_int_equal(KCR_OK, create(c, small, sizeof(small) - 1, 0, &ei));
  assert_int_equal(3, atomic_load(&sv.posts));
  kcr_client_free(c);
  unsetenv("https_proxy");
  proxy_stop(&px);
  srv_stop(&sv);
  kcr_errinfo_cleanup(&ei);
}

/* ---- session tickets while a write goes out ---- */

static enum act always(int conn, int req) { return ANSWER; }

/* A TLS 1.3 server sends its session tickets right after the handshake
 * (the apiserver, Go's crypto/tls, does too): the socket of a new
 * connection is readable while the request goes out. A write larger than
 * what the socket buffers hold - the server has a 4 KiB receive buffer -
 * waits for the socket while it is sent, and a readable socket is then not
 * an early answer unless application data came: the tickets are read and
 * the sending goes on (it used to stop and wait for an answer that could
 * not come, until the timeout). */
static void a_large_write_goes_out_after_session_tickets(void **state)
{
  enum { LEN = 16 << 20 };
  struct srv sv;
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  char *body = malloc(LEN);
  kcr_client *c;
  kcr_err rc;

  assert_non_null(body);
  memset(body, ' ', LEN);
  body[0] = '{';
  body[LEN - 1] = '}';
  srv_start(&sv, true, 4096, always);
  c = client_of(&sv, 5000);
  rc = create(c, body, LEN, 0, &ei);
  if(rc)
    fail_msg("a %d MiB create: %s (%s) after %zu bytes of its body", LEN >> 20,
             kcr_err_name(rc), ei.message ? ei.message : "", atomic_load(&sv.body_bytes));
  assert_int_equal(1, atomic_load(&sv.posts));
  assert_int_equal(LEN, (int)atomic_load(&sv.body_bytes));
  kcr_client_free(c);
  srv_stop(&sv);
  free(body);
  kcr_errinfo_cleanup(&ei);
}

/* ---- bytes nobody asked for ---- */

static enum act stale_record_first(int conn, int req)
{
  return conn == 0 && req == 0 ? ANSWER_AND_STALE_RECORD : ANSWER;
}

static enum act stale_in_the_record_first(int conn, int req)
{
  return conn == 0 && req == 0 ? LONG_ANSWER_AND_STALE : ANSWER;
}

/* The first request is answered and, with the same socket write, comes an
 * answer nobody asked for (script's first act). That connection is not
 * used again: the second request gets the answer to it, on a new
 * connection - never the stale one, which a connection kept with unread
 * bytes would hand it. On a connection of our own (writes) the bytes are
 * in the answer's last TLS record (the read that ends the answer takes
 * the whole record, so the reader sees them: a client reading less than a
 * record would find the answer ending where its read did, and the rest
 * waiting in OpenSSL, out of poll()'s sight) or in the records after it
 * (left in the socket, where the check before the next request sees them;
 * a client that read ahead would hold them in OpenSSL instead). */
static void check_unasked_bytes_are_not_an_answer(bool tls, enum act (*script)(int, int))
{
  struct srv sv;
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  struct kcr_http_request req = {
      .method = "POST", .path = cms_path, .body = small, .body_len = sizeof(small) - 1};
  struct kcr_http_response resp = {.body = KCR_BUF_INIT};
  kcr_client *c;
  kcr_err rc;

  srv_start(&sv, tls, 0, script);
  c = client_of(&sv, 5000);
  assert_int_equal(KCR_OK, kcr_client_do(c, &req, &resp, &ei));
  assert_int_equal(200, resp.code);
  assert_string_not_equal(STALE_BODY, kcr_buf_str(&resp.body));
  rc = kcr_client_do(c, &req, &resp, &ei);
  if(rc || strcmp("{\"answer\":42}", kcr_buf_str(&resp.body)))
    fail_msg("%s: the second create: %s (%s), answered %s", tls ? "own" : "curl",
             kcr_err_name(rc), ei.message ? ei.message : "", kcr_buf_str(&resp.body));
  assert_int_equal(2, atomic_load(&sv.posts));
  assert_int_equal(2, atomic_load(&sv.conns));
  kcr_client_free(c);
  srv_stop(&sv);
  kcr_buf_cleanup(&resp.body);
  kcr_errinfo_cleanup(&ei);
}

static void an_unasked_record_after_an_answer_is_not_the_next_answer(void **state)
{
  check_unasked_bytes_are_not_an_answer(true, stale_record_first);
}

static void unasked_bytes_in_an_answers_record_are_not_the_next_answer(void **state)
{
  check_unasked_bytes_are_not_an_answer(true, stale_in_the_record_first);
}

static void unasked_bytes_after_an_answer_by_curl(void **state)
{
  check_unasked_bytes_are_not_an_answer(false, stale_record_first);
}

int main(void)
{
  tfail_init();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(a_write_is_not_resent_on_a_connection_of_our_own),
      cmocka_unit_test(a_write_is_not_resent_by_curl),
      cmocka_unit_test(a_read_is_resent_on_a_connection_of_our_own),
      cmocka_unit_test(a_read_is_resent_by_curl),
      cmocka_unit_test(no_answer_on_a_new_connection_of_our_own),
      cmocka_unit_test(no_answer_on_a_new_connection_of_curl),
      cmocka_unit_test(writes_through_a_proxy_go_out_once),
      cmocka_unit_test(a_large_write_goes_out_after_session_tickets),
      cmocka_unit_test(an_unasked_record_after_an_answer_is_not_the_next_answer),
      cmocka_unit_test(unasked_bytes_in_an_answers_record_are_not_the_next_answer),
      cmocka_unit_test(unasked_bytes_after_an_answer_by_curl),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
