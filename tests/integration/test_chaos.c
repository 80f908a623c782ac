/* Faults between the informer and the apiserver: a TCP proxy that forwards
 * bytes and, on command, cuts every connection in the middle of whatever it
 * is carrying (a watch stream mid-document, a LIST mid-page, a TLS record in
 * half). While objects churn and connections keep being cut, the informer
 * must recover by itself and end equal to a fresh LIST. And a watch
 * canceled while it connects to a server that never answers ends soon,
 * bytes a server sends after an answer are not taken for the next, and a
 * create whose answer the proxy drops is not sent twice. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "itest.h"
#include "kcr/informer.h"
#include "kcr/time.h"
#include "kcr/watch.h"

ITEST_CLIENT_FIXTURE

/* ---- the proxy ---- */

struct proxy {
  int lfd, port, upstream_port;
  atomic_bool stop;
  atomic_int generation;  /* bumped to cut every open connection */
  atomic_bool cut_answer; /* cut the next connection the server answers on */
  atomic_int cuts, conns;
  pthread_t th;
};

struct pipe_pair {
  struct proxy *p;
  int a, b;
};

static void *pump(void *arg)
{
  struct pipe_pair *pp = arg;
  int gen = atomic_load(&pp->p->generation);
  char buf[16384];
  struct pollfd fds[2] = {{pp->a, POLLIN, 0}, {pp->b, POLLIN, 0}};
  while(!atomic_load(&pp->p->stop)) {
    if(atomic_load(&pp->p->generation) != gen) {
      atomic_fetch_add(&pp->p->cuts, 1);
      break; /* cut, wherever the stream is */
    }
    int n = poll(fds, 2, 50);
    if(n < 0)
      break;
    if(n == 0)
      continue;
    bool done = false;
    for(int i = 0; i < 2 && !done; i++) {
      if(!(fds[i].revents & (POLLIN | POLLHUP | POLLERR)))
        continue;
      if(i == 1 && atomic_exchange(&pp->p->cut_answer, false)) {
        atomic_fetch_add(&pp->p->cuts, 1);
        done = true; /* the server's answer, dropped */
        break;
      }
      ssize_t r = read(fds[i].fd, buf, sizeof(buf));
      if(r <= 0 || write(fds[1 - i].fd, buf, (size_t)r) != r)
        done = true;
    }
    if(done)
      break;
  }
  close(pp->a);
  close(pp->b);
  free(pp);
  return NULL;
}

static void *accept_loop(void *arg)
{
  struct proxy *p = arg;
  while(!atomic_load(&p->stop)) {
    struct pollfd pf = {p->lfd, POLLIN, 0};
    if(poll(&pf, 1, 100) <= 0)
      continue;
    int c = accept(p->lfd, NULL, NULL);
    if(c < 0)
      continue;
    int u = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)p->upstream_port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if(u < 0 || connect(u, (struct sockaddr *)&a, sizeof(a))) {
      close(c);
      if(u >= 0)
        close(u);
      continue;
    }
    struct pipe_pair *pp = malloc(sizeof(*pp));
    *pp = (struct pipe_pair){p, c, u};
    pthread_t t;
    atomic_fetch_add(&p->conns, 1);
    if(pthread_create(&t, NULL, pump, pp) == 0)
      pthread_detach(t);
  }
  return NULL;
}

static void proxy_start(struct proxy *p, int upstream_port)
{
  struct sockaddr_in a = {.sin_family = AF_INET,
                          .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof(a);
  memset(p, 0, sizeof(*p));
  p->upstream_port = upstream_port;
  p->lfd = socket(AF_INET, SOCK_STREAM, 0);
  assert_int_equal(0, bind(p->lfd, (struct sockaddr *)&a, sizeof(a)));
  assert_int_equal(0, listen(p->lfd, 64));
  getsockname(p->lfd, (struct sockaddr *)&a, &len);
  p->port = ntohs(a.sin_port);
  assert_int_equal(0, pthread_create(&p->th, NULL, accept_loop, p));
}

static void proxy_stop(struct proxy *p)
{
  atomic_store(&p->stop, true);
  pthread_join(p->th, NULL);
  close(p->lfd);
  itest_sleep_ms(200); /* detached pumps notice `stop` within one poll */
}

/* A client whose kubeconfig points at the proxy instead of the apiserver. */
static kcr_client *client_via(int port)
{
  const char *path = itest_env("KUBECONFIG"), *url = itest_env("KCR_APISERVER_URL");
  struct kcr_buf text = KCR_BUF_INIT, out = KCR_BUF_INIT;
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  char buf[4096], *at, proxy_url[64];
  size_t n;
  FILE *f = fopen(path, "r");
  kcr_config *cfg;
  kcr_client *c;

  assert_non_null(f);
  while((n = fread(buf, 1, sizeof(buf), f)) > 0)
    kcr_buf_append(&text, buf, n);
  fclose(f);
  snprintf(proxy_url, sizeof(proxy_url), "https://127.0.0.1:%d", port);
  at = strstr(text.ptr, url);
  assert_non_null(at);
  kcr_buf_append(&out, text.ptr, (size_t)(at - text.ptr));
  kcr_buf_puts(&out, proxy_url);
  kcr_buf_puts(&out, at + strlen(url));
  itest_expect(KCR_OK,
               kcr_config_from_yaml(out.ptr, out.len,
                                    &(struct kcr_config_opts){.kubeconfig = path}, &cfg,
                                    &ei),
               &ei);
  itest_expect(KCR_OK, kcr_client_new(&(struct kcr_client_opts){.config = cfg}, &c, &ei),
               &ei);
  kcr_config_free(cfg); /* the client holds its own reference */
  kcr_buf_cleanup(&text);
  kcr_buf_cleanup(&out);
  return c;
}

static int url_port(const char *url)
{
  const char *colon = strrchr(url, ':');
  assert_non_null(colon);
  return atoi(colon + 1);
}

/* ---- the test ---- */

static kcr_err count_item(const cJSON *item, void *ud)
{
  (*(int *)ud)++;
  return KCR_OK;
}

static bool converged(kcr_informer *inf, const char *ns)
{
  int n = 0;
  kcr_obj **objs;
  size_t m;
  bool eq = true;
  if(kcr_list_each(cl, &(struct kcr_ref){&itest_configmaps, ns}, NULL, count_item, &n,
                   NULL, NULL))
    return false;
  if(kcr_store_ref_all(kcr_informer_store(inf), &objs, &m))
    return false;
  eq = (size_t)n == m;
  for(size_t i = 0; i < m && eq; i++) { /* every cached version is the current one */
    cJSON *cur = NULL;
    if(kcr_get(cl, &(struct kcr_ref){&itest_configmaps, ns, kcr_obj_name(objs[i])}, &cur,
               NULL))
      eq = false;
    else
      eq = !strcmp(kcr_json_str(cur, "/metadata/resourceVersion"), kcr_obj_rv(objs[i]));
    cJSON_Delete(cur);
  }
  kcr_objs_unref(objs, m);
  return eq;
}

static void informer_recovers_from_cut_streams(void **state)
{
  struct proxy p;
  char *ns = itest_namespace(cl, "chaos");
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  struct kcr_informer_stats st;
  kcr_informer *inf;

  proxy_start(&p, url_port(itest_env("KCR_APISERVER_URL")));
  kcr_client *via = client_via(p.port);
  struct kcr_informer_opts o = {
      .client = via, .gvr = &itest_configmaps, .ns = ns, .page_size = 20};
  assert_int_equal(KCR_OK, kcr_informer_new(&o, &inf, NULL));
  assert_int_equal(KCR_OK, kcr_informer_start(inf));
  assert_true(kcr_informer_wait_synced(inf, 60000));

  /* Churn while every connection is cut every ~300 ms. */
  for(int i = 0; i < 60; i++) {
    char name[32], body[160];
    snprintf(name, sizeof(name), "cm-%02d", i % 20);
    snprintf(
        body, sizeof(body),
        "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"%s\","
        "\"namespace\":\"%s\"},\"data\":{\"round\":\"%d\"}}",
        name, ns, i);
    cJSON *obj = cJSON_Parse(body);
    if(i >= 40 && i % 3 == 0)
      kcr_delete(cl, &(struct kcr_ref){&itest_configmaps, ns, name}, NULL, NULL, NULL);
    else
      itest_expect(KCR_OK,
                   kcr_apply(cl, &(struct kcr_ref){&itest_configmaps, ns, name}, obj,
                             &(struct kcr_apply_opts){.field_manager = "chaos-test",
                                                      .force = true},
                             NULL, &ei),
                   &ei);
    cJSON_Delete(obj);
    if(i % 3 == 0)
      atomic_fetch_add(&p.generation, 1);
    itest_sleep_ms(100);
  }
  bool ok = false;
  for(int i = 0; i < 300 && !(ok = converged(inf, ns)); i++)
    itest_sleep_ms(100);
  kcr_informer_get_stats(inf, &st);
  print_message(
      "chaos: %d connections cut, %d opened; informer: %llu lists, %llu watches, "
      "%llu errors\n",
      atomic_load(&p.cuts), atomic_load(&p.conns), (unsigned long long)st.lists,
      (unsigned long long)st.watches, (unsigned long long)st.errors);
  assert_true(ok);
  assert_true(atomic_load(&p.cuts) >=
              2); /* cut while streaming (not while backing off) */
  assert_true(st.watches >= (uint64_t)atomic_load(&p.cuts)); /* re-watched by itself */

  kcr_informer_free(inf);
  kcr_client_free(via);
  proxy_stop(&p);
  itest_namespace_drop(cl, ns);
  kcr_errinfo_cleanup(&ei);
}

/* Writes on connections the server side closed while they sat in the
 * pool: every pooled connection is dead, and the next write must still go
 * through (a dead reused connection is not tried again with another pooled
 * one, which may be as dead). */
struct writer {
  kcr_client *c;
  const char *ns;
  int i;
  pthread_barrier_t *go;
  kcr_err rc;
};

static kcr_err put_cm(kcr_client *c, const char *ns, const char *name, int round,
                      struct kcr_errinfo *ei)
{
  cJSON *obj = itest_json("{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":"
                          "{\"name\":\"%s\"},\"data\":{\"round\":\"%d\"}}",
                          name, round);
  kcr_err rc = kcr_apply(
      c, &(struct kcr_ref){&itest_configmaps, ns, name}, obj,
      &(struct kcr_apply_opts){.field_manager = "chaos-test", .force = true}, NULL, ei);
  cJSON_Delete(obj);
  return rc;
}

static void *write_once(void *arg)
{
  struct writer *w = arg;
  char name[32];
  snprintf(name, sizeof(name), "pooled-%d", w->i);
  pthread_barrier_wait(w->go);
  w->rc = put_cm(w->c, w->ns, name, 0, NULL);
  return NULL;
}

static void writes_go_through_after_every_pooled_connection_died(void **state)
{
  enum { WRITERS = 4 };
  struct proxy p;
  char *ns = itest_namespace(cl, "pooled");
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  pthread_barrier_t go;

  /* writes go on connections of the client's own unless a proxy is named */
  unsetenv("https_proxy");
  unsetenv("HTTPS_PROXY");
  unsetenv("all_proxy");
  unsetenv("ALL_PROXY");
  proxy_start(&p, url_port(itest_env("KCR_APISERVER_URL")));
  kcr_client *via = client_via(p.port);
  /* Concurrent writes until at least two connections were opened. */
  for(int round = 0; round < 20 && atomic_load(&p.conns) < 2; round++) {
    struct writer w[WRITERS];
    pthread_t th[WRITERS];
    pthread_barrier_init(&go, NULL, WRITERS);
    for(int i = 0; i < WRITERS; i++) {
      w[i] = (struct writer){via, ns, i, &go, KCR_OK};
      assert_int_equal(0, pthread_create(&th[i], NULL, write_once, &w[i]));
    }
    for(int i = 0; i < WRITERS; i++) {
      pthread_join(th[i], NULL);
      assert_int_equal(KCR_OK, w[i].rc);
    }
    pthread_barrier_destroy(&go);
  }
  assert_true(atomic_load(&p.conns) >= 2);
  /* Cut every one of them, and wait until the proxy has closed them all. */
  atomic_fetch_add(&p.generation, 1);
  for(int i = 0; i < 100 && atomic_load(&p.cuts) < atomic_load(&p.conns); i++)
    itest_sleep_ms(20);
  assert_true(atomic_load(&p.cuts) >= 2);
  print_message("pooled: %d connections cut\n", atomic_load(&p.cuts));
  for(int i = 0; i < 3; i++)
    itest_expect(KCR_OK, put_cm(via, ns, "after-the-cut", i, &ei), &ei);

  kcr_client_free(via);
  proxy_stop(&p);
  itest_namespace_drop(cl, ns);
  kcr_errinfo_cleanup(&ei);
}

/* A create with generateName whose answer is lost - the connection, a
 * reused one, cut after the apiserver read the request and as its answer
 * came back - makes one object, not two: the client does not send it
 * again on a new connection (it did, as curl does for any method), and
 * says that the outcome is unknown. */
static void a_create_whose_answer_is_lost_makes_one_object(void **state)
{
  struct proxy p;
  char *ns = itest_namespace(cl, "once");
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  struct kcr_ref ref = {&itest_configmaps, ns};
  cJSON *obj = itest_json("{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\","
                          "\"metadata\":{\"generateName\":\"once-\"}}");
  kcr_err rc, lrc;
  int n = 0, conns;
  bool cut;

  unsetenv("https_proxy"); /* writes on connections of the client's own */
  unsetenv("HTTPS_PROXY");
  unsetenv("all_proxy");
  unsetenv("ALL_PROXY");
  proxy_start(&p, url_port(itest_env("KCR_APISERVER_URL")));
  kcr_client *via = client_via(p.port);
  itest_expect(KCR_OK, kcr_create(via, &ref, obj, NULL, NULL, &ei), &ei);
  atomic_store(&p.cut_answer, true); /* the connection is pooled, idle */
  rc = kcr_create(via, &ref, obj, NULL, NULL, &ei);
  print_message("once: the second create: %s (%s)\n", kcr_err_name(rc),
                ei.message ? ei.message : "");
  cut = !atomic_load(&p.cut_answer);
  conns = atomic_load(&p.conns);
  kcr_client_free(via); /* the proxy stopped before any assert can fail */
  proxy_stop(&p);
  lrc = kcr_list_each(cl, &ref, NULL, count_item, &n, NULL, NULL);
  itest_namespace_drop(cl, ns);
  cJSON_Delete(obj);
  kcr_errinfo_cleanup(&ei);

  assert_true(cut); /* the second create's answer was dropped */
  assert_int_equal(KCR_OK, lrc);
  assert_int_equal(2, n);
  assert_int_equal(KCR_EUNCERTAIN, rc);
  assert_int_equal(1, conns); /* not sent on another one */
}

static kcr_err ignore(struct kcr_watch_event *ev, void *ud) { return KCR_OK; }

struct watch_run {
  kcr_watch *w;
  kcr_err rc;
};

static void *run_watch(void *arg)
{
  struct watch_run *r = arg;
  r->rc = kcr_watch_run(r->w, NULL);
  return NULL;
}

/* A watch canceled while its connection is still being made - a server
 * that accepts TCP and never answers TLS (a listening socket nobody
 * accepts from) - ends within about a second, not after the connect
 * timeout (10 s): an informer stopping while the apiserver hangs. */
static void a_watch_canceled_while_connecting_ends_soon(void **state)
{
  struct sockaddr_in a = {.sin_family = AF_INET,
                          .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof(a);
  int lfd = socket(AF_INET, SOCK_STREAM, 0);
  struct watch_run r = {0};
  pthread_t th;

  unsetenv("https_proxy"); /* a connection of the client's own */
  unsetenv("HTTPS_PROXY");
  unsetenv("all_proxy");
  unsetenv("ALL_PROXY");
  assert_int_equal(0, bind(lfd, (struct sockaddr *)&a, sizeof(a)));
  assert_int_equal(0, listen(lfd, 8));
  getsockname(lfd, (struct sockaddr *)&a, &len);
  kcr_client *silent = client_via(ntohs(a.sin_port));
  struct kcr_watch_opts wo = {.client = silent,
                              .ref = &(struct kcr_ref){&itest_configmaps, "default"},
                              .on_event = ignore,
                              .timeout_ms = 300000};
  assert_int_equal(KCR_OK, kcr_watch_new(&wo, &r.w, NULL));
  assert_int_equal(0, pthread_create(&th, NULL, run_watch, &r));
  itest_sleep_ms(1500); /* TCP connected, the TLS handshake waiting */
  uint64_t t0 = kcr_time_mono_ms();
  kcr_watch_cancel(r.w);
  pthread_join(th, NULL);
  uint64_t took = kcr_time_mono_ms() - t0;
  assert_int_equal(KCR_ECANCELED, r.rc);
  if(took > 2500)
    fail_msg("the canceled watch ended after %llu ms", (unsigned long long)took);
  kcr_watch_free(r.w);
  kcr_client_free(silent);
  close(lfd);
}

/* ---- a server that sends what nobody asked for ---- */

/* Answers each request on its first connection with {"answer":1} and,
 * right behind it - a second TLS record in the same TCP segment - a whole
 * answer nobody asked for; on its second connection with {"answer":2}. */
struct talker {
  int lfd, port;
  SSL_CTX *ctx;
  pthread_t th;
};

/* Reads one request (head and Content-Length body); false at its end. */
static bool read_request(SSL *ssl)
{
  char buf[8192];
  size_t n = 0;
  for(;;) {
    int k = SSL_read(ssl, buf + n, (int)(sizeof(buf) - 1 - n));
    char *end, *clen;
    if(k <= 0)
      return false;
    n += (size_t)k;
    buf[n] = '\0';
    if((end = strstr(buf, "\r\n\r\n"))) {
      clen = strcasestr(buf, "content-length:");
      if(n - (size_t)(end + 4 - buf) >= (clen ? strtoul(clen + 15, NULL, 10) : 0))
        return true;
    }
    if(n == sizeof(buf) - 1)
      return false;
  }
}

static void *talk(void *arg)
{
  static const char stale[] = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                              "Content-Length: 14\r\n\r\n{\"stale\":true}";
  struct talker *t = arg;
  for(int i = 1; i <= 2; i++) {
    int fd = accept(t->lfd, NULL, NULL), on = 1, off = 0;
    SSL *ssl;
    if(fd < 0)
      break;
    ssl = SSL_new(t->ctx);
    SSL_set_fd(ssl, fd);
    if(SSL_accept(ssl) == 1) {
      while(read_request(ssl)) {
        char a[160];
        int n = snprintf(a, sizeof(a),
                         "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                         "Content-Length: 12\r\n\r\n{\"answer\":%d}",
                         i);
        setsockopt(fd, IPPROTO_TCP, TCP_CORK, &on, sizeof(on));
        SSL_write(ssl, a, n);
        if(i == 1)
          SSL_write(ssl, stale, (int)sizeof(stale) - 1);
        setsockopt(fd, IPPROTO_TCP, TCP_CORK, &off, sizeof(off));
      }
    }
    SSL_free(ssl);
    close(fd);
  }
  return NULL;
}

/* A write's connection is not used again when more than its answer came
 * with it (in TLS records after the answer's: left in the socket, where
 * the client looks before the next request): the next write goes on a new
 * connection and gets its own answer, not the one nobody asked for. */
static void bytes_after_an_answer_are_not_the_next_answer(void **state)
{
  struct sockaddr_in a = {.sin_family = AF_INET,
                          .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof(a);
  struct talker t = {.lfd = socket(AF_INET, SOCK_STREAM, 0)};
  char crt[512], key[512];
  struct kcr_http_request req = {.method = "POST",
                                 .path = "/api/v1/namespaces/x/configmaps",
                                 .body = "{}",
                                 .body_len = 2};
  struct kcr_http_response resp = {.body = KCR_BUF_INIT};
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;

  unsetenv("https_proxy"); /* writes on connections of the client's own */
  unsetenv("HTTPS_PROXY");
  unsetenv("all_proxy");
  unsetenv("ALL_PROXY");
  /* the apiserver's serving certificate: the kubeconfig's CA trusts it */
  snprintf(crt, sizeof(crt), "%s/pki/apiserver.crt", itest_env("KCR_CONTROLPLANE_DIR"));
  snprintf(key, sizeof(key), "%s/pki/apiserver.key", itest_env("KCR_CONTROLPLANE_DIR"));
  assert_non_null(t.ctx = SSL_CTX_new(TLS_server_method()));
  assert_int_equal(1, SSL_CTX_use_certificate_chain_file(t.ctx, crt));
  assert_int_equal(1, SSL_CTX_use_PrivateKey_file(t.ctx, key, SSL_FILETYPE_PEM));
  assert_int_equal(0, bind(t.lfd, (struct sockaddr *)&a, sizeof(a)));
  assert_int_equal(0, listen(t.lfd, 8));
  getsockname(t.lfd, (struct sockaddr *)&a, &len);
  assert_int_equal(0, pthread_create(&t.th, NULL, talk, &t));
  kcr_client *c = client_via(ntohs(a.sin_port));

  itest_expect(KCR_OK, kcr_client_do(c, &req, &resp, &ei), &ei);
  assert_string_equal("{\"answer\":1}", resp.body.ptr);
  itest_sleep_ms(200); /* the unasked answer has long arrived */
  itest_expect(KCR_OK, kcr_client_do(c, &req, &resp, &ei), &ei);
  assert_string_equal("{\"answer\":2}", resp.body.ptr);

  kcr_client_free(c); /* closes the connections: the server's reads end */
  shutdown(t.lfd, SHUT_RDWR);
  pthread_join(t.th, NULL);
  close(t.lfd);
  SSL_CTX_free(t.ctx);
  kcr_buf_cleanup(&resp.body);
  kcr_errinfo_cleanup(&ei);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(informer_recovers_from_cut_streams),
      cmocka_unit_test(writes_go_through_after_every_pooled_connection_died),
      cmocka_unit_test(a_create_whose_answer_is_lost_makes_one_object),
      cmocka_unit_test(a_watch_canceled_while_connecting_ends_soon),
      cmocka_unit_test(bytes_after_an_answer_are_not_the_next_answer),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
