/* webhook_load: the admission webhook benchmark's two sides (bench/README.md,
 * section 7).
 *
 *   webhook_load serve CERT KEY          a validating webhook on 127.0.0.1 over
 *                                        TLS (/validate: a typed ConfigMap view,
 *                                        denied when labelled forbidden=true),
 *                                        /metrics on a second, plain port;
 *                                        prints "PORT METRICS_PORT", runs until
 *                                        SIGTERM
 *   webhook_load load URL RATE SECONDS [CONNS [REVIEW]]
 *                                        posts AdmissionReviews to URL at RATE per
 *                                        second for SECONDS, open loop: request i
 *                                        is due at start + i/RATE, on CONNS (4)
 *                                        keep-alive connections, and its latency
 *                                        counts from when it was due (so a slow
 *                                        server is not hidden by a client that
 *                                        waits); prints one line: sent, errors,
 *                                        achieved rate, latency p50 p90 p99 max (ms)
 *
 * The review is a CREATE of a ConfigMap of about 1 KiB, or the text of the
 * file REVIEW (an answer counts as an error unless it is allowed). */
#include <curl/curl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "k8s.h"
#include "kcr.h"

/* ---- serve ----------------------------------------------------------------- */

static kcr_err validate(kcr_admission *adm, const struct kcr_admission_request *rq,
                        void *ud)
{
  struct core_v1_config_map cm;
  kcr_err rc;

  if(!rq->object.s)
    return KCR_OK;
  rc = core_v1_config_map_decode(rq->object.s, rq->object.n, 0, kcr_admission_arena(adm),
                                 &cm, kcr_admission_ei(adm));
  if(rc)
    return rc;
  if(kcr_str_eq(KCR_MAP_STR(cm.metadata.labels, "forbidden"), "true"))
    kcr_admission_deny(adm, 403, "ConfigMaps labelled forbidden=true are refused");
  return KCR_OK;
}

static int serve(const char *cert, const char *key)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  kcr_metrics *reg = NULL;
  kcr_httpd *h = NULL, *mh = NULL;
  sigset_t set;
  int sig;

  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, NULL);
  kcr_log_set_level(KCR_LOG_WARN);
  if(kcr_metrics_new(NULL, &reg, &ei) ||
     kcr_httpd_new(
         &(struct kcr_httpd_opts){
             .addr = "127.0.0.1:0",
             .tls = {.enabled = true, .cert_file = cert, .key_file = key}},
         &h, &ei) ||
     kcr_webhook_add(h,
                     &(struct kcr_webhook_opts){
                         .path = "/validate", .admit = validate, .metrics = reg},
                     &ei) ||
     kcr_httpd_start(h, &ei) ||
     kcr_httpd_new(&(struct kcr_httpd_opts){.addr = "127.0.0.1:0", .metrics = reg}, &mh,
                   &ei) ||
     kcr_httpd_start(mh, &ei)) {
    fprintf(stderr, "webhook_load serve: %s\n", ei.message ? ei.message : "failed");
    return 1;
  }
  printf("%d %d\n", kcr_httpd_port(h), kcr_httpd_port(mh));
  fflush(stdout);
  sigwait(&set, &sig);
  kcr_httpd_free(h);
  kcr_httpd_free(mh);
  kcr_metrics_free(reg);
  return 0;
}

/* ---- load ------------------------------------------------------------------ */

static const char *url;
static double rate;
static long total;
static uint64_t t0;
static atomic_long next_i, errors;
static double *lat_ms; /* per request, -1 until answered */
static char body_buf[2048];
static char *body = body_buf; /* the review posted */

static size_t sink(char *p, size_t sz, size_t n, void *ud)
{
  struct kcr_buf *b = ud;
  kcr_buf_append(b, p, sz * n);
  return sz * n;
}

static void sleep_until_ns(uint64_t t)
{
  uint64_t now = kcr_time_mono_ns();
  if(t > now) {
    struct timespec ts = {(time_t)((t - now) / 1000000000u),
                          (long)((t - now) % 1000000000u)};
    nanosleep(&ts, NULL);
  }
}

static void *worker(void *p)
{
  CURL *c = curl_easy_init();
  struct curl_slist *hd = curl_slist_append(NULL, "Content-Type: application/json");
  struct kcr_buf out = KCR_BUF_INIT;
  long i;

  curl_easy_setopt(c, CURLOPT_URL, url);
  curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
  curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 0L);
  curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 0L);
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, hd);
  curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, sink);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &out);
  curl_easy_setopt(c, CURLOPT_TIMEOUT, 10L);
  while((i = atomic_fetch_add(&next_i, 1)) < total) {
    uint64_t due = t0 + (uint64_t)((double)i * 1e9 / rate);
    long code = 0;
    sleep_until_ns(due);
    kcr_buf_reset(&out);
    if(curl_easy_perform(c) != CURLE_OK ||
       curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code) != CURLE_OK || code != 200 ||
       !strstr(kcr_buf_str(&out), "\"allowed\":true"))
      atomic_fetch_add(&errors, 1);
    lat_ms[i] = (double)(kcr_time_mono_ns() - due) / 1e6;
  }
  kcr_buf_cleanup(&out);
  curl_slist_free_all(hd);
  curl_easy_cleanup(c);
  return NULL;
}

static int cmp(const void *a, const void *b)
{
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static int load(int argc, char **argv)
{
  long conns = argc > 5 ? atol(argv[5]) : 4;
  pthread_t th[64];

  url = argv[2];
  rate = atof(argv[3]);
  total = (long)(rate * atof(argv[4]));
  if(rate <= 0 || total <= 0 || conns < 1 || conns > 64) {
    fprintf(stderr, "webhook_load load: bad rate, seconds or connections\n");
    return 2;
  }
  snprintf(
      body_buf, sizeof(body_buf),
      "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\","
      "\"request\":{\"uid\":\"3b9a4c2e-bench\",\"kind\":{\"group\":\"\",\"version\":"
      "\"v1\",\"kind\":\"ConfigMap\"},\"resource\":{\"group\":\"\",\"version\":\"v1\","
      "\"resource\":\"configmaps\"},\"name\":\"bench\",\"namespace\":\"bench\","
      "\"operation\":\"CREATE\",\"userInfo\":{\"username\":\"bench\",\"groups\":["
      "\"system:authenticated\"]},\"object\":{\"apiVersion\":\"v1\",\"kind\":"
      "\"ConfigMap\",\"metadata\":{\"name\":\"bench\",\"namespace\":\"bench\","
      "\"labels\":{\"app.kubernetes.io/name\":\"bench\",\"tier\":\"web\"},"
      "\"annotations\":{\"note\":\"%s\"}},\"data\":{\"a\":\"1\",\"b\":\"2\"}},"
      "\"oldObject\":null,\"dryRun\":true,\"options\":{\"kind\":\"CreateOptions\","
      "\"apiVersion\":\"meta.k8s.io/v1\"}}}",
      "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789ab"
      "cdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef01234567");
  if(argc > 6) { /* the review from a file */
    FILE *f = fopen(argv[6], "r");
    struct kcr_buf b = KCR_BUF_INIT;
    char chunk[4096];
    size_t n;
    while(f && (n = fread(chunk, 1, sizeof(chunk), f)) > 0)
      kcr_buf_append(&b, chunk, n);
    if(f)
      fclose(f);
    if(!f || kcr_buf_err(&b) || !b.len) {
      fprintf(stderr, "webhook_load load: cannot read %s\n", argv[6]);
      kcr_buf_cleanup(&b);
      return 2;
    }
    body = kcr_buf_take(&b);
  }
  if(!(lat_ms = calloc((size_t)total, sizeof(double))))
    return 1;
  curl_global_init(CURL_GLOBAL_DEFAULT);
  t0 = kcr_time_mono_ns() + 100000000u;
  for(long i = 0; i < conns; i++)
    pthread_create(&th[i], NULL, worker, NULL);
  for(long i = 0; i < conns; i++)
    pthread_join(th[i], NULL);
  double secs = (double)(kcr_time_mono_ns() - t0) / 1e9;
  qsort(lat_ms, (size_t)total, sizeof(double), cmp);
  printf("sent %ld errors %ld rate %.1f/s p50 %.3f p90 %.3f p99 %.3f max %.3f ms\n",
         total, atomic_load(&errors), (double)total / secs, lat_ms[total / 2],
         lat_ms[(long)(total * 0.9)], lat_ms[(long)(total * 0.99)], lat_ms[total - 1]);
  free(lat_ms);
  if(body != body_buf)
    free(body);
  curl_global_cleanup();
  return 0;
}

int main(int argc, char **argv)
{
  if(argc == 4 && !strcmp(argv[1], "serve"))
    return serve(argv[2], argv[3]);
  if(argc >= 5 && !strcmp(argv[1], "load"))
    return load(argc, argv);
  fprintf(
      stderr,
      "usage: webhook_load serve CERT KEY | load URL RATE SECONDS [CONNS [REVIEW]]\n");
  return 2;
}
