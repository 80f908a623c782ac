/* DESIGN: shared set-up for integration tests. Each test program makes one
 * client from $KUBECONFIG and its own namespaces, so tests never see each
 * other's objects and can run in parallel against one control plane. */
#include <arpa/inet.h>
#include <curl/curl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "itest.h"

const struct kcr_gvr itest_configmaps = {"", "v1", "configmaps", true};
const struct kcr_gvr itest_namespaces = {"", "v1", "namespaces", false};
const struct kcr_gvr itest_crds = {"apiextensions.k8s.io", "v1",
                                   "customresourcedefinitions", false};
const struct kcr_gvr itest_widgets = {"test.kcr.io", "v1", "widgets", true};

void itest_sleep_ms(long ms)
{
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

const char *itest_env(const char *name)
{
  const char *v = getenv(name);
  if(!v || !*v) {
    fprintf(stderr,
            "FATAL: $%s is not set. Integration tests run against the real control "
            "plane: use `scripts/test` (or tools/controlplane/start -- ctest).\n",
            name);
    exit(1);
  }
  return v;
}

void itest_expect_(kcr_err want, kcr_err rc, const struct kcr_errinfo *ei,
                   const char *file, int line)
{
  if(want == rc)
    return;
  fprintf(stderr, "%s:%d: expected %s, got %s (%s) code=%d reason=%s message=%s\n", file,
          line, kcr_err_name(want), kcr_err_name(rc), kcr_strerror(rc), ei ? ei->code : 0,
          ei && ei->reason ? ei->reason : "-", ei && ei->message ? ei->message : "-");
  fail();
}

kcr_client *itest_client(void)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  struct kcr_config_opts o = {.kubeconfig = itest_env("KUBECONFIG")};
  kcr_config *cfg = NULL;
  kcr_client *c;
  kcr_err rc;

  if(getenv("KCR_TEST_DEBUG"))
    kcr_log_set_level(KCR_LOG_DEBUG);
  rc = kcr_config_load(&o, &cfg, &ei);
  if(!rc)
    rc = kcr_client_new(&(struct kcr_client_opts){.config = cfg}, &c, &ei);
  kcr_config_free(cfg); /* the client holds its own reference */
  if(rc) {
    fprintf(stderr, "FATAL: cannot make a client: %s\n", ei.message);
    exit(1);
  }
  return c;
}

kcr_client *itest_client_with(const char *key, const char *value)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  const char *path = itest_env("KUBECONFIG"), *at;
  char *text = calloc(1, 1 << 16), *yaml = NULL;
  FILE *f = fopen(path, "r");
  kcr_config *cfg = NULL;
  kcr_client *c = NULL;
  size_t n;

  assert_non_null(f);
  assert_non_null(text);
  n = fread(text, 1, (1 << 16) - 1, f);
  fclose(f);
  at = strstr(text, "  cluster:\n");
  assert_true(n > 0 && at);
  at += strlen("  cluster:\n");
  assert_true(
      asprintf(&yaml, "%.*s    %s: %s\n%s", (int)(at - text), text, key, value, at) > 0);
  itest_expect(KCR_OK,
               kcr_config_from_yaml(yaml, strlen(yaml),
                                    &(struct kcr_config_opts){.kubeconfig = path}, &cfg,
                                    &ei),
               &ei);
  itest_expect(KCR_OK, kcr_client_new(&(struct kcr_client_opts){.config = cfg}, &c, &ei),
               &ei);
  kcr_config_free(cfg); /* the client holds its own reference */
  free(text);
  free(yaml);
  kcr_errinfo_cleanup(&ei);
  return c;
}

/* ---- an HTTP CONNECT proxy ---- */

#define PROXY_TUNNELS 64 /* connections a proxy takes in its life */

struct itest_proxy {
  int lfd, port;
  int stop[2]; /* a pipe: readable once the proxy stops */
  atomic_uint tunnels;
  pthread_t accept_th;
  pthread_t th[PROXY_TUNNELS]; /* written by the accept thread only */
  size_t nth;
};

struct tunnel {
  struct itest_proxy *p;
  int c;
};

/* Waits until fd is readable or the proxy stops (false). */
static bool proxy_wait(const struct itest_proxy *p, int fd)
{
  struct pollfd fds[2] = {{fd, POLLIN, 0}, {p->stop[0], POLLIN, 0}};
  return poll(fds, 2, -1) > 0 && !fds[1].revents;
}

static bool write_all(int fd, const char *b, size_t n)
{
  while(n) {
    ssize_t w = write(fd, b, n);
    if(w <= 0)
      return false;
    b += w;
    n -= (size_t)w;
  }
  return true;
}

/* Bytes both ways until one side closes or the proxy stops. */
static void relay(const struct itest_proxy *p, int a, int b)
{
  char buf[16384];
  struct pollfd fds[3] = {{a, POLLIN, 0}, {b, POLLIN, 0}, {p->stop[0], POLLIN, 0}};

  while(poll(fds, 3, -1) > 0 && !fds[2].revents) {
    for(int i = 0; i < 2; i++) {
      ssize_t r;
      if(!fds[i].revents)
        continue;
      r = read(fds[i].fd, buf, sizeof(buf));
      if(r <= 0 || !write_all(fds[1 - i].fd, buf, (size_t)r))
        return;
    }
  }
}

/* Reads the request head; if it is "CONNECT <IPv4>:<port>", connects there,
 * answers 200 and relays. */
static void *tunnel_main(void *arg)
{
  static const char ok[] = "HTTP/1.1 200 Connection established\r\n\r\n",
                    bad[] = "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n";
  struct tunnel *t = arg;
  char head[8192], host[64], *end = NULL;
  struct sockaddr_in a = {.sin_family = AF_INET};
  unsigned port;
  size_t n = 0;
  int u = -1;

  while(!end && n < sizeof(head) - 1 && proxy_wait(t->p, t->c)) {
    ssize_t r = read(t->c, head + n, sizeof(head) - 1 - n);
    if(r <= 0)
      break;
    n += (size_t)r;
    head[n] = '\0';
    end = strstr(head, "\r\n\r\n");
  }
  if(!end)
    goto out;
  if(sscanf(head, "CONNECT %63[0-9.]:%u HTTP/1.1\r\n", host, &port) != 2 ||
     port > 65535 || inet_pton(AF_INET, host, &a.sin_addr) != 1) {
    write_all(t->c, bad, strlen(bad));
    goto out;
  }
  a.sin_port = htons((uint16_t)port);
  u = socket(AF_INET, SOCK_STREAM, 0);
  if(u < 0 || connect(u, (struct sockaddr *)&a, sizeof(a)))
    goto out;
  atomic_fetch_add(&t->p->tunnels, 1);
  end += 4; /* what came after the head goes on */
  if(write_all(t->c, ok, strlen(ok)) && write_all(u, end, (size_t)(head + n - end)))
    relay(t->p, t->c, u);
out:
  if(u >= 0)
    close(u);
  close(t->c);
  free(t);
  return NULL;
}

static void *proxy_accept(void *arg)
{
  struct itest_proxy *p = arg;

  while(proxy_wait(p, p->lfd)) {
    struct tunnel *t;
    int c = accept(p->lfd, NULL, NULL);
    if(c < 0)
      continue;
    t = malloc(sizeof(*t));
    if(t)
      *t = (struct tunnel){p, c};
    if(!t || p->nth == PROXY_TUNNELS ||
       pthread_create(&p->th[p->nth], NULL, tunnel_main, t)) {
      free(t);
      close(c);
      continue;
    }
    p->nth++;
  }
  return NULL;
}

struct itest_proxy *itest_proxy_start(void)
{
  struct itest_proxy *p = calloc(1, sizeof(*p));
  struct sockaddr_in a = {.sin_family = AF_INET,
                          .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof(a);

  assert_non_null(p);
  p->lfd = socket(AF_INET, SOCK_STREAM, 0);
  assert_true(p->lfd >= 0);
  assert_int_equal(0, bind(p->lfd, (struct sockaddr *)&a, sizeof(a)));
  assert_int_equal(0, listen(p->lfd, 64));
  assert_int_equal(0, getsockname(p->lfd, (struct sockaddr *)&a, &len));
  p->port = ntohs(a.sin_port);
  assert_int_equal(0, pipe(p->stop));
  assert_int_equal(0, pthread_create(&p->accept_th, NULL, proxy_accept, p));
  return p;
}

int itest_proxy_port(const struct itest_proxy *p) { return p->port; }

unsigned itest_proxy_tunnels(struct itest_proxy *p) { return atomic_load(&p->tunnels); }

void itest_proxy_stop(struct itest_proxy *p)
{
  assert_int_equal(1, write(p->stop[1], "x", 1));
  pthread_join(p->accept_th, NULL);
  for(size_t i = 0; i < p->nth; i++)
    pthread_join(p->th[i], NULL);
  close(p->lfd);
  close(p->stop[0]);
  close(p->stop[1]);
  free(p);
}

cJSON *itest_json(const char *fmt, ...)
{
  va_list ap;
  char *text = NULL;
  cJSON *j;
  va_start(ap, fmt);
  if(vasprintf(&text, fmt, ap) < 0)
    text = NULL;
  va_end(ap);
  assert_non_null(text);
  j = cJSON_Parse(text);
  if(!j)
    fprintf(stderr, "itest_json: malformed: %s\n", text);
  free(text);
  assert_non_null(j);
  return j;
}

char *itest_namespace(kcr_client *c, const char *prefix)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  char *name = NULL;
  cJSON *ns;
  static unsigned seq;
  unsigned seed = (unsigned)time(NULL) ^ (unsigned)getpid() ^ (++seq * 2654435761u);

  assert_true(asprintf(&name, "kcr-%s-%05u", prefix, rand_r(&seed) % 100000) > 0);
  ns = itest_json("{\"apiVersion\":\"v1\",\"kind\":\"Namespace\","
                  "\"metadata\":{\"name\":\"%s\"}}",
                  name);
  itest_expect(KCR_OK,
               kcr_create(c, &(struct kcr_ref){&itest_namespaces}, ns, NULL, NULL, &ei),
               &ei);
  cJSON_Delete(ns);
  kcr_errinfo_cleanup(&ei);
  return name;
}

void itest_namespace_drop(kcr_client *c, char *ns)
{
  if(ns)
    kcr_delete(c, &(struct kcr_ref){&itest_namespaces, NULL, ns}, NULL, NULL, NULL);
  free(ns);
}

void itest_done(kcr_client *c, char *ns)
{
  itest_namespace_drop(c, ns);
  kcr_client_free(c);
}

static const char widget_crd[] =
    "{\"apiVersion\":\"apiextensions.k8s.io/v1\",\"kind\":\"CustomResourceDefinition\","
    "\"metadata\":{\"name\":\"widgets.test.kcr.io\"},"
    "\"spec\":{\"group\":\"test.kcr.io\",\"scope\":\"Namespaced\","
    "\"names\":{\"plural\":\"widgets\",\"singular\":\"widget\",\"kind\":\"Widget\","
    "\"listKind\":\"WidgetList\"},"
    "\"versions\":[{\"name\":\"v1\",\"served\":true,\"storage\":true,"
    "\"subresources\":{\"status\":{}},"
    "\"schema\":{\"openAPIV3Schema\":{\"type\":\"object\",\"properties\":{"
    "\"spec\":{\"type\":\"object\",\"properties\":{"
    "\"size\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":100},"
    "\"color\":{\"type\":\"string\"}}},"
    "\"status\":{\"type\":\"object\",\"properties\":{"
    "\"observedGeneration\":{\"type\":\"integer\",\"format\":\"int64\"},"
    "\"phase\":{\"type\":\"string\"},"
    "\"conditions\":{\"type\":\"array\",\"x-kubernetes-list-type\":\"map\","
    "\"x-kubernetes-list-map-keys\":[\"type\"],\"items\":{\"type\":\"object\","
    "\"required\":[\"type\",\"status\",\"lastTransitionTime\",\"reason\",\"message\"],"
    "\"properties\":{\"type\":{\"type\":\"string\"},\"status\":{\"type\":\"string\","
    "\"enum\":[\"True\",\"False\",\"Unknown\"]},\"observedGeneration\":{\"type\":"
    "\"integer\",\"format\":\"int64\"},\"lastTransitionTime\":{\"type\":\"string\","
    "\"format\":\"date-time\"},\"reason\":{\"type\":\"string\"},\"message\":{\"type\":"
    "\"string\"}}}}}}}}}}]}}";

void itest_install_widget_crd(kcr_client *c)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  cJSON *crd = cJSON_Parse(widget_crd);
  kcr_err rc;

  assert_non_null(crd);
  rc = kcr_apply(c, &(struct kcr_ref){&itest_crds, NULL, "widgets.test.kcr.io"}, crd,
                 &(struct kcr_apply_opts){.field_manager = "kcr-itest", .force = true},
                 NULL, &ei);
  itest_expect(KCR_OK, rc, &ei);
  cJSON_Delete(crd);
  /* Established, then served: a LIST answers 200. */
  for(int i = 0; i < 300; i++) {
    cJSON *list = NULL;
    rc = kcr_list(c, &(struct kcr_ref){&itest_widgets, NULL}, NULL, &list, &ei);
    cJSON_Delete(list);
    if(rc == KCR_OK)
      break;
    itest_sleep_ms(100);
  }
  itest_expect(KCR_OK, rc, &ei);
  kcr_errinfo_cleanup(&ei);
}

static size_t sink(char *p, size_t sz, size_t n, void *ud)
{
  return kcr_buf_append(ud, p, sz * n) ? 0 : sz * n;
}

cJSON *itest_etcd(const char *path, const char *body)
{
  struct kcr_buf url = KCR_BUF_INIT, out = KCR_BUF_INIT;
  CURL *h = curl_easy_init();
  cJSON *j;

  assert_non_null(h);
  kcr_buf_printf(&url, "%s%s", itest_env("KCR_ETCD_ENDPOINT"), path);
  curl_easy_setopt(h, CURLOPT_URL, url.ptr);
  curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, sink);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, &out);
  assert_int_equal(CURLE_OK, curl_easy_perform(h));
  curl_easy_cleanup(h);
  j = cJSON_Parse(kcr_buf_str(&out));
  if(!j)
    fprintf(stderr, "etcd %s answered: %s\n", path, kcr_buf_str(&out));
  assert_non_null(j);
  kcr_buf_cleanup(&url);
  kcr_buf_cleanup(&out);
  return j;
}

void itest_etcd_compact(void)
{
  char body[128];
  cJSON *r = itest_etcd("/v3/kv/range", "{\"key\":\"AA==\",\"limit\":1}");
  const char *rev = kcr_json_str(r, "/header/revision");
  assert_non_null(rev);
  snprintf(body, sizeof(body), "{\"revision\":\"%s\",\"physical\":true}", rev);
  cJSON_Delete(itest_etcd("/v3/kv/compaction", body));
  cJSON_Delete(r);
}

void itest_controlplane(const char *args)
{
  char *cmd = NULL;
  assert_true(asprintf(&cmd, "%s %s", itest_env("KCR_RESTART_APISERVER"), args) > 0);
  assert_int_equal(0, system(cmd));
  free(cmd);
}

static void *itest_run_main(void *p)
{
  struct itest_run *r = p;
  r->status = kcr_manager_run(r->m);
  return NULL;
}

void itest_run_start(struct itest_run *r, kcr_manager *m)
{
  r->m = m;
  r->status = -1;
  assert_int_equal(0, pthread_create(&r->th, NULL, itest_run_main, r));
}

void itest_run_stop(struct itest_run *r, int want)
{
  kcr_manager_stop(r->m);
  pthread_join(r->th, NULL);
  assert_int_equal(want, r->status);
  kcr_manager_free(r->m);
  r->m = NULL;
}

long itest_http_get(int port, const char *path, struct kcr_buf *body)
{
  char url[128];
  long code = 0;
  CURL *h = curl_easy_init();
  snprintf(url, sizeof(url), "http://127.0.0.1:%d%s", port, path);
  kcr_buf_reset(body);
  curl_easy_setopt(h, CURLOPT_URL, url);
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, sink);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, body);
  curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 2000L);
  if(curl_easy_perform(h) == CURLE_OK)
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
  curl_easy_cleanup(h);
  return code;
}

kcr_err itest_seen_reconcile(kcr_ctx *cx, const struct kcr_request *req,
                             struct kcr_result *res, void *ud)
{
  struct itest_seen *s = ud;
  (void)cx;
  (void)res;
  pthread_mutex_lock(&s->mu);
  if(s->n < ITEST_MAX_SEEN)
    snprintf(s->key[s->n++], sizeof(s->key[0]), "%s", req->key);
  pthread_mutex_unlock(&s->mu);
  return KCR_OK;
}

bool itest_saw(struct itest_seen *s, const char *ns, const char *name)
{
  char key[128];
  bool found = false;
  snprintf(key, sizeof(key), "%s/%s", ns, name);
  pthread_mutex_lock(&s->mu);
  for(int i = 0; i < s->n && !found; i++)
    found = !strcmp(s->key[i], key);
  pthread_mutex_unlock(&s->mu);
  return found;
}

bool itest_wait_saw(struct itest_seen *s, const char *ns, const char *name, long ms)
{
  for(long t = 0; t < ms && !itest_saw(s, ns, name); t += 20)
    itest_sleep_ms(20);
  return itest_saw(s, ns, name);
}

kcr_controller *itest_seen_controller(kcr_manager *m, kcr_client *c, const char *name,
                                      kcr_informer *inf, struct itest_seen *s)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  kcr_controller *ctl;
  itest_expect(
      KCR_OK,
      kcr_controller_new(
          &(struct kcr_controller_opts){
              .name = name, .reconcile = itest_seen_reconcile, .ud = s, .client = c},
          &ctl, &ei),
      &ei);
  itest_expect(KCR_OK, kcr_controller_for(ctl, inf, NULL), &ei);
  itest_expect(KCR_OK, kcr_manager_add(m, ctl), &ei);
  return ctl;
}
