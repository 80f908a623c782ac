/* The informer at unit level, on the wire seam: a paged LIST and a watch
 * reach the handlers exactly once and in order, "forever" means forever,
 * the counters can be read while events flow, a 410 relists and deletes
 * only what vanished, and a LIST or an event the store cannot take is
 * neither half-applied nor lost (the store is made to fail with an index
 * function that arms tfail just before it emits a value). */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "kcr.h"
#include "tcheck.h"
#include "twait.h"
#include "tfail.h"
#include "twire.h"

static const struct kcr_gvr cms = {"", "v1", "configmaps", true};

#define PATH "/api/v1/namespaces/ns/configmaps"
/* A ConfigMap in namespace ns (string literals only). */
#define CM(name, rv)                                                                     \
  "{\"kind\":\"ConfigMap\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"" name         \
  "\",\"namespace\":\"ns\",\"resourceVersion\":\"" rv "\"}}"
#define BOOKMARK(rv)                                                                     \
  "{\"kind\":\"ConfigMap\",\"apiVersion\":\"v1\",\"metadata\":{\"resourceVersion\":"     \
  "\"" rv "\"}}"
#define GONE                                                                             \
  "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\","   \
  "\"message\":\"too old resource version\",\"reason\":\"Expired\",\"code\":410}"

/* ---- what the handlers saw, in order ---- */

#define MAX_EVENTS 400

struct evlog {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int n;
  char ev[MAX_EVENTS][48];
};

static void evlog_init(struct evlog *l)
{
  tlock_init(&l->mu, &l->cv);
  l->n = 0;
}

static void evlog_cleanup(struct evlog *l)
{
  pthread_cond_destroy(&l->cv);
  pthread_mutex_destroy(&l->mu);
}

static void evlog_put(struct evlog *l, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void evlog_put(struct evlog *l, const char *fmt, ...)
{
  va_list ap;
  pthread_mutex_lock(&l->mu);
  if(TCHECK(l->n < MAX_EVENTS)) {
    va_start(ap, fmt);
    vsnprintf(l->ev[l->n++], sizeof(l->ev[0]), fmt, ap);
    va_end(ap);
  }
  pthread_cond_broadcast(&l->cv);
  pthread_mutex_unlock(&l->mu);
}

static int evlog_len(struct evlog *l)
{
  pthread_mutex_lock(&l->mu);
  int n = l->n;
  pthread_mutex_unlock(&l->mu);
  return n;
}

/* Events whose text starts with prefix. */
static int evlog_count(struct evlog *l, const char *prefix)
{
  int k = 0;
  pthread_mutex_lock(&l->mu);
  for(int i = 0; i < l->n; i++)
    k += !strncmp(l->ev[i], prefix, strlen(prefix));
  pthread_mutex_unlock(&l->mu);
  return k;
}

static bool evlog_wait(struct evlog *l, int n, uint64_t ms)
{
  struct timespec ts = kcr_time_mono_after(ms);
  bool ok;
  pthread_mutex_lock(&l->mu);
  while(l->n < n && pthread_cond_timedwait(&l->cv, &l->mu, &ts) == 0)
    ;
  ok = l->n >= n;
  pthread_mutex_unlock(&l->mu);
  return ok;
}

/* On the test thread: the log is exactly want[0..n). */
static void evlog_expect(struct evlog *l, const char *const *want, int n)
{
  pthread_mutex_lock(&l->mu);
  for(int i = 0; i < n && i < l->n; i++)
    if(strcmp(want[i], l->ev[i]))
      print_error("event %d: want \"%s\", got \"%s\"\n", i, want[i], l->ev[i]);
  for(int i = n; i < l->n; i++)
    print_error("unexpected event %d: \"%s\"\n", i, l->ev[i]);
  int got = l->n;
  bool same = got == n;
  for(int i = 0; same && i < n; i++)
    same = !strcmp(want[i], l->ev[i]);
  pthread_mutex_unlock(&l->mu);
  assert_int_equal(n, got);
  assert_true(same);
}

static atomic_int slow_add_ms; /* on_add takes this long (0: at once) */

static void on_add(kcr_obj *o, void *ud)
{
  int ms = atomic_load(&slow_add_ms);
  if(ms)
    nanosleep(&(struct timespec){ms / 1000, (long)(ms % 1000) * 1000000}, NULL);
  evlog_put(ud, "add %s %s", kcr_obj_name(o), kcr_obj_rv(o));
}

static void on_update(kcr_obj *old, kcr_obj *cur, void *ud)
{
  TCHECK(!strcmp(kcr_obj_key(old), kcr_obj_key(cur)));
  evlog_put(ud, "update %s %s>%s", kcr_obj_name(cur), kcr_obj_rv(old), kcr_obj_rv(cur));
}

static void on_delete(kcr_obj *o, void *ud)
{
  evlog_put(ud, "delete %s %s", kcr_obj_name(o), kcr_obj_rv(o));
}

/* ---- making the store fail on purpose ---- */

/* While armed, the index function arms tfail for the next allocation just
 * before it emits its value (for the object named fail_name, or any if
 * empty): the store's copy of that value fails, so the write fails. */
static atomic_bool fail_armed;
static char fail_name[32];

static void arm_store_failure(const char *name)
{
  snprintf(fail_name, sizeof(fail_name), "%s", name ? name : "");
  atomic_store(&fail_armed, true); /* publishes fail_name */
}

static void index_by_name(const kcr_obj *o, kcr_index_emit emit, void *ctx)
{
  if(atomic_load(&fail_armed) && (!fail_name[0] || !strcmp(fail_name, kcr_obj_name(o))) &&
     atomic_exchange(&fail_armed, false))
    tfail_arm(1);
  emit(kcr_obj_name(o), ctx);
}

/* ---- the fake API server's state, per test ---- */

struct fake {
  kcr_informer *inf;
  kcr_client *cl;
  struct evlog *log;
  struct evlog ev;
  atomic_int lists, watches; /* LIST requests (first pages), WATCH requests */
  atomic_bool go;            /* test -> handler: go on */
  atomic_bool held;          /* handler -> test: holding a page */
  atomic_bool reader;        /* a stats reader is running */
  uint64_t t_list[4];        /* when the first LISTs came (informer thread) */
  uint64_t t_watch[8];       /* when the first WATCHes came (informer thread) */
};

static bool query_is(const struct twire_call *call, const char *key, const char *want)
{
  char buf[64];
  const char *v = twire_query(call, key, buf, sizeof(buf));
  return v && !strcmp(v, want);
}

static kcr_err list_reply(struct twire_call *call, const char *rv, const char *cont,
                          const char *items)
{
  return twire_reply(call, 200,
                     "{\"kind\":\"ConfigMapList\",\"apiVersion\":\"v1\",\"metadata\":{"
                     "\"resourceVersion\":\"%s\"%s%s%s},\"items\":[%s]}",
                     rv, cont ? ",\"continue\":\"" : "", cont ? cont : "",
                     cont ? "\"" : "", items);
}

static bool send_event(struct twire_call *call, const char *type, const char *obj)
{
  return twire_send(call, "{\"type\":\"%s\",\"object\":%s}", type, obj);
}

static kcr_err not_found(struct twire_call *call)
{
  TCHECK_FAIL("unexpected request %s %s", call->req->method, call->req->path);
  return twire_reply(call, 404, "%s", twire_status_json(404, "NotFound"));
}

/* A first LIST: counts it and notes when it came. */
static int first_page(struct fake *f)
{
  int n = atomic_fetch_add(&f->lists, 1) + 1;
  if(n <= 4)
    f->t_list[n - 1] = kcr_time_mono_ms();
  return n;
}

static kcr_informer *informer(kcr_client *cl, struct evlog *log, long page_size)
{
  kcr_informer *inf;
  assert_int_equal(KCR_OK,
                   kcr_informer_new(
                       &(struct kcr_informer_opts){
                           .client = cl, .gvr = &cms, .ns = "ns", .page_size = page_size},
                       &inf, NULL));
  assert_int_equal(
      KCR_OK, kcr_informer_add_handlers(inf, &(struct kcr_informer_handlers){
                                                 on_add, on_update, on_delete, log}));
  assert_int_equal(KCR_OK,
                   kcr_store_add_index(kcr_informer_store(inf), "name", index_by_name));
  return inf;
}

/* Sets up f: its own event log, a fake API server answering with api and
 * an informer on it (not started). */
static void fake_start(struct fake *f, twire_fn api, long page_size)
{
  memset(f, 0, sizeof(*f));
  evlog_init(&f->ev);
  f->log = &f->ev;
  atomic_init(&f->lists, 0);
  atomic_init(&f->watches, 0);
  atomic_init(&f->go, false);
  atomic_init(&f->held, false);
  atomic_init(&f->reader, false);
  f->cl = twire_client(api, f);
  f->inf = informer(f->cl, f->log, page_size);
}

/* Frees what fake_start made (the informer unless the test did and set
 * f->inf to NULL), then reports what the handlers found wrong. */
static void fake_finish(struct fake *f)
{
  kcr_informer_free(f->inf);
  kcr_client_free(f->cl);
  tcheck_report();
  evlog_cleanup(&f->ev);
}

/* Stops the informer; the handlers saw exactly want[0..n), in order, and the
 * store holds len objects. */
static void stop_and_expect(struct fake *f, const char *const *want, int n, size_t len)
{
  kcr_informer_stop(f->inf);
  evlog_expect(f->log, want, n);
  assert_int_equal(len, kcr_store_len(kcr_informer_store(f->inf)));
}

/* ---- a paged LIST, then a watch ---- */

static kcr_err api_paged(struct twire_call *call, void *ud)
{
  struct fake *f = ud;
  char buf[64];
  const char *cont;

  if(call->req->watch) {
    TCHECK(atomic_fetch_add(&f->watches, 1) == 0);
    TCHECK(query_is(call, "resourceVersion", "10"));
    TCHECK(query_is(call, "allowWatchBookmarks", "true"));
    twire_stream(call, 200);
    if(send_event(call, "ADDED", CM("d", "11")) &&
       send_event(call, "MODIFIED", CM("a", "12")) &&
       send_event(call, "BOOKMARK", BOOKMARK("13")) &&
       send_event(call, "DELETED", CM("b", "14")))
      twire_wait_cancel(call, 60000);
    return KCR_OK;
  }
  if(!twire_is(call, "GET", PATH))
    return not_found(call);
  TCHECK(query_is(call, "limit", "2"));
  cont = twire_query(call, "continue", buf, sizeof(buf));
  if(!cont) {
    first_page(f);
    return list_reply(call, "10", "p2", CM("a", "1") "," CM("b", "2"));
  }
  TCHECK(!strcmp(cont, "p2"));
  /* The last page waits until the test let it go. */
  atomic_store(&f->held, true);
  TCHECK(tflag_wait(&f->go, 60000));
  return list_reply(call, "10", NULL, CM("c", "3"));
}

struct waiter {
  kcr_informer *inf;
  bool synced;
  atomic_bool returned;
};

static void *wait_forever(void *p)
{
  struct waiter *w = p;
  w->synced = kcr_informer_wait_synced(w->inf, KCR_FOREVER);
  atomic_store(&w->returned, true);
  return NULL;
}

static void handlers_see_a_paged_list_and_the_watch_exactly_once_in_order(void **state)
{
  static const char *const want[] = {"add a 1",  "add b 2",       "add c 3",
                                     "add d 11", "update a 1>12", "delete b 14"};
  struct fake f;
  struct waiter w = {0};
  struct kcr_informer_stats st;
  kcr_obj *a;
  pthread_t th;

  fake_start(&f, api_paged, 2);
  w.inf = f.inf;
  atomic_init(&w.returned, false);
  assert_int_equal(KCR_OK, kcr_informer_start(f.inf));
  assert_int_equal(0, pthread_create(&th, NULL, wait_forever, &w));

  /* While the last page is held, waiting "forever" does not give up (it
   * used to overflow its deadline and return false at once). */
  assert_true(tflag_wait(&f.held, 30000));
  assert_false(tflag_wait(&w.returned, 200));
  assert_false(kcr_informer_has_synced(f.inf));
  atomic_store(&f.go, true);
  pthread_join(th, NULL);
  assert_true(w.synced);
  /* Synced: the store holds the list and the handlers have seen it. */
  assert_true(evlog_count(f.log, "add ") >= 3);
  assert_true(kcr_informer_wait_synced(f.inf, KCR_FOREVER));

  assert_true(evlog_wait(f.log, 6, 30000));
  stop_and_expect(&f, want, 6, 3);
  assert_non_null(a = kcr_store_ref(kcr_informer_store(f.inf), "ns", "a"));
  assert_string_equal("12", kcr_obj_rv(a));
  kcr_obj_unref(a);
  kcr_informer_get_stats(f.inf, &st);
  assert_int_equal(1, st.lists);
  assert_int_equal(1, st.watches);
  assert_int_equal(3, st.events); /* bookmarks are not events */
  assert_int_equal(0, st.errors);
  fake_finish(&f);
}

/* ---- counters read while events flow ---- */

#define STREAMED 300

static kcr_err api_stream(struct twire_call *call, void *ud)
{
  struct fake *f = ud;
  if(call->req->watch) {
    twire_stream(call, 200);
    TCHECK(tflag_wait(&f->reader, 30000)); /* the reader runs before events flow */
    for(int i = 0; i < STREAMED; i++)
      if(!twire_send(call,
                     "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"o%d\","
                     "\"namespace\":\"ns\",\"resourceVersion\":\"%d\"}}}",
                     i, 2 + i))
        return KCR_OK;
    twire_wait_cancel(call, 60000);
    return KCR_OK;
  }
  if(!twire_is(call, "GET", PATH))
    return not_found(call);
  first_page(f);
  return list_reply(call, "1", NULL, "");
}

static void *read_stats(void *p)
{
  struct fake *f = p;
  struct kcr_informer_stats st = {0};
  uint64_t prev = 0, until = kcr_time_mono_ms() + 60000;
  atomic_store(&f->reader, true);
  do {
    kcr_informer_get_stats(f->inf, &st);
    TCHECK(st.events >= prev);
    prev = st.events;
  } while(st.events < STREAMED && kcr_time_mono_ms() < until);
  TCHECK(st.events == STREAMED);
  return NULL;
}

static void stats_can_be_read_from_another_thread_while_events_flow(void **state)
{
  struct fake f;
  pthread_t th;

  fake_start(&f, api_stream, 0);
  assert_int_equal(KCR_OK, kcr_informer_start(f.inf));
  assert_int_equal(0, pthread_create(&th, NULL, read_stats, &f));
  assert_true(evlog_wait(f.log, STREAMED, 60000));
  pthread_join(th, NULL);
  fake_finish(&f);
}

/* ---- watches cut mid-stream ---- */

#define CUTS 4

/* Watches 1..CUTS deliver one event and are cut mid-document; later ones
 * fail at once (500). Notes when each watch came. */
static kcr_err api_cut(struct twire_call *call, void *ud)
{
  struct fake *f = ud;
  if(call->req->watch) {
    int n = atomic_fetch_add(&f->watches, 1) + 1;
    if(n <= 8)
      f->t_watch[n - 1] = kcr_time_mono_ms();
    if(n > CUTS)
      return twire_reply(call, 500, "%s", twire_status_json(500, "InternalError"));
    twire_stream(call, 200);
    twire_send(call,
               "{\"type\":\"MODIFIED\",\"object\":{\"kind\":\"ConfigMap\",\"apiVersion\":"
               "\"v1\",\"metadata\":{\"name\":\"a\",\"namespace\":\"ns\","
               "\"resourceVersion\":\"%d\"}}}",
               10 + n);
    twire_write(call, "{\"type\":\"MODIFIED\",\"obj", 22);
    return KCR_OK;
  }
  if(!twire_is(call, "GET", PATH))
    return not_found(call);
  first_page(f);
  return list_reply(call, "10", NULL, CM("a", "1"));
}

/* A watch cut after it delivered events is watched again after the
 * initial backoff (0.8-1.6 s) every time, not after 1.6, 3.2, 6.4 ... s: a
 * proxy that cuts every watch after a few seconds must not leave the cache
 * up to 30 s behind. Watches that fail at once still back off further. */
static void a_watch_cut_after_events_does_not_grow_the_backoff(void **state)
{
  struct fake f;
  uint64_t t0;

  fake_start(&f, api_cut, 0);
  t0 = kcr_time_mono_ms();
  assert_int_equal(KCR_OK, kcr_informer_start(f.inf));
  while(atomic_load(&f.watches) < CUTS + 3 && kcr_time_mono_ms() - t0 < 30000)
    nanosleep(&(struct timespec){0, 50000000L}, NULL);
  kcr_informer_free(f.inf);
  f.inf = NULL;
  assert_true(atomic_load(&f.watches) >= CUTS + 3);
  /* (2.5 s: room for a loaded machine, below the 3.2 s the third wait
   * would be at least if the backoff grew.) */
  for(int i = 1; i < CUTS; i++) {
    uint64_t gap = f.t_watch[i] - f.t_watch[i - 1];
    if(gap < 750 || gap > 2500)
      fail_msg("watch %d came %llu ms after the cut of watch %d, want 0.8-1.6 s", i + 1,
               (unsigned long long)gap, i);
  }
  /* 500s at once: 0.8-1.6 s, then 1.6-3.2 s. */
  assert_true(f.t_watch[CUTS + 2] - f.t_watch[CUTS + 1] >= 1550);
  fake_finish(&f);
}

/* ---- refused credentials ---- */

static kcr_err api_unauthorized(struct twire_call *call, void *ud)
{
  first_page(ud);
  return twire_reply(call, 401, "%s", twire_status_json(401, "Unauthorized"));
}

/* The apiserver answers a refused certificate or token with a bare
 * "Unauthorized": the warning names the kubeconfig and what to check. */
static void refused_credentials_are_logged_with_what_to_check(void **state)
{
  char path[] = "/tmp/test_informer_logXXXXXX", text[4096] = "";
  struct fake f;
  int fd = mkstemp(path);
  ssize_t n;

  assert_true(fd >= 0);
  fake_start(&f, api_unauthorized, 0);
  kcr_log_set_fd(fd);
  assert_int_equal(KCR_OK, kcr_informer_start(f.inf));
  for(int i = 0; i < 200 && atomic_load(&f.lists) < 1; i++)
    nanosleep(&(struct timespec){0, 10000000L}, NULL);
  kcr_informer_free(f.inf);
  f.inf = NULL;
  kcr_log_set_fd(2);
  n = pread(fd, text, sizeof(text) - 1, 0);
  close(fd);
  unlink(path);
  assert_true(n > 0);
  if(!strstr(text, "err=EUNAUTHORIZED") || !strstr(text, "kubeconfig=twire") ||
     !strstr(text, "an expired client certificate, or a token that expired"))
    fail_msg("the warning does not say what to check: %s", text);
  fake_finish(&f);
}

/* ---- 410: relist, deletes only for what vanished ---- */

static kcr_err api_gone(struct twire_call *call, void *ud)
{
  struct fake *f = ud;
  if(call->req->watch) {
    int n = atomic_fetch_add(&f->watches, 1) + 1;
    twire_stream(call, 200);
    if(n == 1) {
      TCHECK(query_is(call, "resourceVersion", "10"));
      if(send_event(call, "MODIFIED", CM("a", "11")))
        send_event(call, "ERROR", GONE);
      return KCR_OK;
    }
    TCHECK(n == 2);
    TCHECK(query_is(call, "resourceVersion", "20"));
    twire_wait_cancel(call, 60000);
    return KCR_OK;
  }
  if(!twire_is(call, "GET", PATH))
    return not_found(call);
  if(first_page(f) == 1)
    return list_reply(call, "10", NULL, CM("a", "1") "," CM("b", "2") "," CM("c", "3"));
  /* b was deleted while we were not watching; d was added. */
  return list_reply(call, "20", NULL, CM("a", "12") "," CM("c", "3") "," CM("d", "13"));
}

/* (c, unchanged - same uid and resourceVersion - is the cached object
 * again: not told, no second copy) */
static void a_410_relists_and_deletes_only_what_vanished(void **state)
{
  static const char *const want[] = {"add a 1",       "add b 2",        "add c 3",
                                     "update a 1>11", "update a 11>12", "add d 13",
                                     "delete b 2"};
  struct fake f;
  struct kcr_informer_stats st;

  fake_start(&f, api_gone, 0);
  assert_int_equal(KCR_OK, kcr_informer_start(f.inf));
  assert_true(evlog_wait(f.log, 7, 30000));
  /* the second watch is running: nothing more comes */
  stop_and_expect(&f, want, 7, 3);
  kcr_informer_get_stats(f.inf, &st);
  assert_int_equal(2, st.lists);
  assert_int_equal(1, st.relists_gone);
  assert_int_equal(0, st.errors);
  fake_finish(&f);
}

/* ---- failure atomicity: a LIST the store cannot take ---- */

static kcr_err api_first_list_fails(struct twire_call *call, void *ud)
{
  struct fake *f = ud;
  char buf[64];
  struct kcr_informer_stats st;

  if(call->req->watch) {
    TCHECK(atomic_fetch_add(&f->watches, 1) == 0);
    TCHECK(query_is(call, "resourceVersion", "10"));
    twire_stream(call, 200);
    twire_wait_cancel(call, 60000);
    return KCR_OK;
  }
  if(!twire_is(call, "GET", PATH))
    return not_found(call);
  if(!twire_query(call, "continue", buf, sizeof(buf))) {
    int n = first_page(f);
    if(n == 2) {
      /* The failed LIST left no trace but the error and the backoff. */
      TCHECK(!kcr_informer_has_synced(f->inf));
      TCHECK(evlog_len(f->log) == 0);
      TCHECK(kcr_store_len(kcr_informer_store(f->inf)) == 0);
      kcr_informer_get_stats(f->inf, &st);
      TCHECK(st.errors == 1);
      TCHECK(f->t_list[1] - f->t_list[0] >= 750); /* backoff 0.8-1.6 s */
    }
    TCHECK(n <= 2);
    return list_reply(call, "10", "p2", CM("a", "1") "," CM("b", "2"));
  }
  return list_reply(call, "10", NULL, CM("c", "3"));
}

static void a_list_the_store_cannot_take_is_not_applied_and_is_listed_again(void **state)
{
  static const char *const want[] = {"add a 1", "add b 2", "add c 3"};
  struct fake f;
  struct kcr_informer_stats st;

  fake_start(&f, api_first_list_fails, 2);
  arm_store_failure(NULL); /* the first kcr_store_replace fails */
  assert_int_equal(KCR_OK, kcr_informer_start(f.inf));
  assert_true(kcr_informer_wait_synced(f.inf, 30000));
  tfail_reset();
  assert_false(atomic_load(&fail_armed));
  assert_int_equal(2, atomic_load(&f.lists));
  stop_and_expect(&f, want, 3, 3);
  kcr_informer_get_stats(f.inf, &st);
  assert_int_equal(2, st.lists);
  assert_int_equal(1, st.errors);
  fake_finish(&f);
}

/* A relist after 410 that the store cannot take emits no deletes; the next
 * one, after backoff, emits each exactly once. */
static kcr_err api_relist_fails(struct twire_call *call, void *ud)
{
  struct fake *f = ud;
  int n;

  if(call->req->watch) {
    n = atomic_fetch_add(&f->watches, 1) + 1;
    if(n == 1) { /* a plain 410 answer this time */
      TCHECK(query_is(call, "resourceVersion", "10"));
      return twire_reply(call, 410, "%s", GONE);
    }
    TCHECK(n == 2);
    TCHECK(query_is(call, "resourceVersion", "20")); /* from the list that worked */
    twire_stream(call, 200);
    twire_wait_cancel(call, 60000);
    return KCR_OK;
  }
  if(!twire_is(call, "GET", PATH))
    return not_found(call);
  n = first_page(f);
  if(n == 1)
    return list_reply(call, "10", NULL, CM("a", "1") "," CM("b", "2") "," CM("c", "3"));
  if(n == 2) {
    arm_store_failure("c"); /* this relist's kcr_store_replace fails */
  } else {
    TCHECK(n == 3);
    TCHECK(evlog_len(f->log) == 3); /* nothing from the failed relist */
    TCHECK(evlog_count(f->log, "delete ") == 0);
    TCHECK(kcr_store_len(kcr_informer_store(f->inf)) == 3);
  }
  return list_reply(call, "20", NULL, CM("a", "11") "," CM("c", "3"));
}

/* (c, unchanged, is not told again) */
static void a_relist_the_store_cannot_take_emits_no_deletes(void **state)
{
  static const char *const want[] = {"add a 1", "add b 2", "add c 3", "update a 1>11",
                                     "delete b 2"};
  struct fake f;
  struct kcr_informer_stats st;

  fake_start(&f, api_relist_fails, 0);
  assert_int_equal(KCR_OK, kcr_informer_start(f.inf));
  assert_true(evlog_wait(f.log, 5, 30000));
  tfail_reset();
  stop_and_expect(&f, want, 5, 2);
  kcr_informer_get_stats(f.inf, &st);
  assert_int_equal(3, st.lists);
  assert_int_equal(1, st.relists_gone);
  assert_int_equal(1, st.errors);
  fake_finish(&f);
}

/* ---- failure atomicity: an event the store cannot take ---- */

static kcr_err api_event_fails(struct twire_call *call, void *ud)
{
  struct fake *f = ud;
  if(call->req->watch) {
    int n = atomic_fetch_add(&f->watches, 1) + 1;
    twire_stream(call, 200);
    if(n == 1) {
      TCHECK(query_is(call, "resourceVersion", "10"));
      arm_store_failure("c"); /* c's kcr_store_put fails */
      if(send_event(call, "ADDED", CM("b", "11")) &&
         send_event(call, "ADDED", CM("c", "12")) &&
         send_event(call, "ADDED", CM("d", "13")))
        twire_wait_cancel(call, 60000);
      return KCR_OK;
    }
    /* The next watch starts after the last event that was stored. */
    TCHECK(n == 2);
    TCHECK(query_is(call, "resourceVersion", "11"));
    TCHECK(evlog_count(f->log, "add c") == 0);
    if(send_event(call, "ADDED", CM("c", "12")) &&
       send_event(call, "ADDED", CM("d", "13")))
      twire_wait_cancel(call, 60000);
    return KCR_OK;
  }
  if(!twire_is(call, "GET", PATH))
    return not_found(call);
  TCHECK(first_page(f) == 1);
  return list_reply(call, "10", NULL, CM("a", "10"));
}

static void an_event_the_store_cannot_take_is_delivered_again(void **state)
{
  static const char *const want[] = {"add a 10", "add b 11", "add c 12", "add d 13"};
  struct fake f;
  struct kcr_informer_stats st;

  fake_start(&f, api_event_fails, 0);
  assert_int_equal(KCR_OK, kcr_informer_start(f.inf));
  assert_true(evlog_wait(f.log, 4, 30000));
  tfail_reset();
  stop_and_expect(&f, want, 4, 4);
  assert_int_equal(2, atomic_load(&f.watches));
  kcr_informer_get_stats(f.inf, &st);
  assert_int_equal(1, st.lists);
  assert_int_equal(1, st.errors);
  fake_finish(&f);
}

/* ---- start is all or nothing (issue 8, item 9) ---- */

static kcr_err api_plain(struct twire_call *call, void *ud)
{
  if(call->req->watch) {
    twire_stream(call, 200);
    twire_wait_cancel(call, 60000);
    return KCR_OK;
  }
  if(!twire_is(call, "GET", PATH))
    return not_found(call);
  return list_reply(call, "10", NULL, CM("a", "1"));
}

/* One of its two threads cannot be made: start fails with nothing left
 * running and nothing listed (before, a failed resync thread was ignored:
 * the informer ran without the resync it was asked for), and a later start
 * works. */
static void a_resync_thread_that_cannot_start_fails_start(void **state)
{
  struct evlog log;
  kcr_client *cl = twire_client(api_plain, NULL);
  kcr_informer *inf;

  evlog_init(&log);
  assert_int_equal(KCR_OK,
                   kcr_informer_new(
                       &(struct kcr_informer_opts){
                           .client = cl, .gvr = &cms, .ns = "ns", .resync_ms = 60000},
                       &inf, NULL));
  tfail_threads_arm(2); /* the resync thread starts, the list/watch thread not */
  assert_int_equal(KCR_ENOMEM, kcr_informer_start(inf));
  tfail_threads_arm(1); /* now the first one */
  assert_int_equal(KCR_ENOMEM, kcr_informer_start(inf));
  tfail_threads_arm(0);
  assert_false(kcr_informer_wait_synced(inf, 300)); /* nothing is running */
  assert_int_equal(KCR_OK, kcr_informer_start(inf));
  assert_true(kcr_informer_wait_synced(inf, 30000));
  kcr_informer_free(inf);
  kcr_client_free(cl);
  evlog_cleanup(&log);
  tcheck_report();
}

/* ---- cache projection (issue 11) ---- */

/* A ConfigMap with labels, annotations and managedFields, data k=v. */
#define FULL_CM(rv, v)                                                                   \
  "{\"kind\":\"ConfigMap\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"a\","          \
  "\"namespace\":\"ns\",\"uid\":\"u\",\"resourceVersion\":\"" rv "\","                   \
  "\"labels\":{\"l\":\"1\"},\"annotations\":{\"n\":\"1\"},"                              \
  "\"managedFields\":[{\"manager\":\"m\"}]},\"data\":{\"k\":\"" v "\"},"                 \
  "\"binaryData\":{\"b\":\"AAAA\"}}"
#define PROJECTED_CM(rv, v)                                                              \
  "{\"kind\":\"ConfigMap\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"a\","          \
  "\"namespace\":\"ns\",\"uid\":\"u\",\"resourceVersion\":\"" rv "\","                   \
  "\"annotations\":{\"n\":\"1\"}},\"data\":{\"k\":\"" v "\"}}"

static kcr_err api_full(struct twire_call *call, void *ud)
{
  if(call->req->watch) {
    twire_stream(call, 200);
    if(send_event(call, "MODIFIED", FULL_CM("2", "w")))
      twire_wait_cancel(call, 60000);
    return KCR_OK;
  }
  if(!twire_is(call, "GET", PATH))
    return not_found(call);
  return list_reply(call, "1", NULL, FULL_CM("1", "v"));
}

/* What the handlers were given, and what the store held for them. */
static void on_update_text(kcr_obj *old, kcr_obj *cur, void *ud)
{
  evlog_put(ud, "update %s", kcr_obj_rv(cur));
  TCHECK(!strcmp(kcr_obj_json(old, NULL), PROJECTED_CM("1", "v")));
  TCHECK(!strcmp(kcr_obj_json(cur, NULL), PROJECTED_CM("2", "w")));
}

static void on_add_text(kcr_obj *o, void *ud)
{
  evlog_put(ud, "add %s", kcr_obj_rv(o));
  TCHECK(!strcmp(kcr_obj_json(o, NULL), PROJECTED_CM("1", "v")));
}

/* Listed and watched objects alike are stored (and handed to handlers)
 * with only the listed members and the metadata the runtime needs. */
static void a_keep_list_projects_listed_and_watched_objects(void **state)
{
  static const char *const want[] = {"add 1", "update 2"};
  struct evlog log;
  kcr_client *cl = twire_client(api_full, NULL);
  kcr_informer *inf;
  kcr_obj *a;

  evlog_init(&log);
  assert_int_equal(
      KCR_OK, kcr_informer_new(
                  &(struct kcr_informer_opts){
                      .client = cl,
                      .gvr = &cms,
                      .ns = "ns",
                      .keep = (const char *[]){"/data", "/metadata/annotations", NULL}},
                  &inf, NULL));
  assert_int_equal(KCR_OK, kcr_informer_add_handlers(inf, &(struct kcr_informer_handlers){
                                                              .on_add = on_add_text,
                                                              .on_update = on_update_text,
                                                              .ud = &log}));
  assert_int_equal(KCR_OK, kcr_informer_start(inf));
  assert_true(evlog_wait(&log, 2, 30000));
  kcr_informer_stop(inf);
  evlog_expect(&log, want, 2);
  assert_non_null(a = kcr_store_ref(kcr_informer_store(inf), "ns", "a"));
  assert_string_equal(PROJECTED_CM("2", "w"), kcr_obj_json(a, NULL));
  assert_int_equal(kcr_obj_size(a), kcr_store_bytes(kcr_informer_store(inf)));
  kcr_obj_unref(a);
  kcr_informer_free(inf);
  kcr_client_free(cl);
  evlog_cleanup(&log);
  tcheck_report();
}

/* ---- options (issue 9) ---- */

static void new_refuses_invalid_options_naming_them(void **state)
{
  kcr_client *cl = twire_client(api_plain, NULL);
  const struct kcr_gvr no_version = {.resource = "configmaps"};
  const struct {
    struct kcr_informer_opts o;
    const char *field;
  } bad[] = {
      {{.gvr = &cms}, "client"},
      {{.client = cl}, "gvr"},
      {{.client = cl, .gvr = &no_version}, "gvr->version"},
      {{.client = cl, .gvr = &cms, .page_size = -1}, "page_size"},
      {{.client = cl,
        .gvr = &cms,
        .watch_timeout_min_ms = 2000,
        .watch_timeout_max_ms = 1000},
       "watch_timeout_max_ms"},
      {{.client = cl,
        .gvr = &cms,
        .keep = (const char *[]){"/data", "metadata.labels", NULL}},
       "keep[1] \"metadata.labels\" does not start with '/'"},
      {{.client = cl, .gvr = &cms, .keep = (const char *[]){"", NULL}}, "keep[0] \"\""},
      {{.client = cl,
        .gvr = &cms,
        .keep = (const char *[]){"/metadata/labels/a~b", NULL}},
       "keep[0] \"/metadata/labels/a~b\" has a '~' not followed by '0' or '1'"},
      {{.client = cl, .gvr = &cms, .ns = "a", .namespaces = (const char *[]){"b", NULL}},
       "ns and namespaces exclude each other"},
      {{.client = cl,
        .gvr = &cms,
        .namespaces = (const char *[]){"b", NULL},
        .namespace_selector = "x=y"},
       "namespace_selector excludes ns and namespaces"},
      {{.client = cl, .gvr = &cms, .namespaces = (const char *[]){NULL}},
       "namespaces is empty"},
      {{.client = cl, .gvr = &cms, .namespaces = (const char *[]){"a", "", NULL}},
       "namespaces[1] \"\""},
      {{.client = cl, .gvr = &cms, .namespaces = (const char *[]){"a,b", NULL}},
       "namespaces[0] \"a,b\" is not a namespace name"},
      {{.client = cl, .gvr = &cms, .namespace_selector = ""},
       "namespace_selector is \"\""},
      {{.client = cl,
        .gvr = &(const struct kcr_gvr){"", "v1", "nodes", false},
        .namespace_selector = "x=y"},
       "nodes, which is not namespaced"},
  };
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  kcr_informer *inf;

  for(size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    inf = (kcr_informer *)1;
    assert_int_equal(KCR_EINVAL, kcr_informer_new(&bad[i].o, &inf, &ei));
    assert_null(inf);
    if(!strstr(ei.message, bad[i].field))
      fail_msg("case %zu: \"%s\" does not name %s", i, ei.message, bad[i].field);
  }
  assert_int_equal(KCR_EINVAL, kcr_informer_new(NULL, &inf, &ei));
  kcr_errinfo_cleanup(&ei);
  kcr_client_free(cl);
}

/* The watch timeout is given in milliseconds and sent as the whole seconds
 * the API takes, rounded up. */
struct timeout_seen {
  atomic_bool watched;
  char seconds[32];
};

static kcr_err api_timeout(struct twire_call *call, void *ud)
{
  struct timeout_seen *ts = ud;
  if(call->req->watch) {
    TCHECK(twire_query(call, "timeoutSeconds", ts->seconds, sizeof(ts->seconds)) != NULL);
    atomic_store(&ts->watched, true);
    twire_stream(call, 200);
    twire_wait_cancel(call, 60000);
    return KCR_OK;
  }
  if(!twire_is(call, "GET", PATH))
    return not_found(call);
  return list_reply(call, "10", NULL, "");
}

static void watch_timeouts_are_milliseconds_sent_as_whole_seconds(void **state)
{
  static const struct {
    uint64_t min_ms, max_ms;
    const char *want;
  } cases[] = {{1500, 1500, "2"}, {1, 1000, "1"}, {7000, 0, NULL /* 7..14 */}};

  for(size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    struct timeout_seen ts = {.seconds = ""};
    kcr_client *cl = twire_client(api_timeout, &ts);
    kcr_informer *inf;
    long s;

    atomic_init(&ts.watched, false);
    assert_int_equal(
        KCR_OK, kcr_informer_new(
                    &(struct kcr_informer_opts){.client = cl,
                                                .gvr = &cms,
                                                .ns = "ns",
                                                .watch_timeout_min_ms = cases[i].min_ms,
                                                .watch_timeout_max_ms = cases[i].max_ms},
                    &inf, NULL));
    assert_int_equal(KCR_OK, kcr_informer_start(inf));
    assert_true(tflag_wait(&ts.watched, 30000));
    kcr_informer_free(inf);
    kcr_client_free(cl);
    if(cases[i].want) {
      assert_string_equal(cases[i].want, ts.seconds);
    } else {
      s = strtol(ts.seconds, NULL, 10);
      assert_true(s >= 7 && s <= 14);
    }
  }
  tcheck_report();
}

static void typed_call_obj(kcr_fnptr fn, const void *obj, void *ud) {}
static void typed_on_add(void) {}

/* Typed handler sets count among the 16 of an informer: the 17th and every
 * later one is refused, and a refused one takes no slot (it wrote the 17th
 * slot past the array, then ntyped, and the next call crashed). */
static void the_seventeenth_typed_handler_set_is_refused(void **state)
{
  kcr_client *cl = twire_client(api_paged, NULL);
  kcr_informer *inf;
  struct kcr_typed_handlers h = {
      .t = &kcr_type_string, .on_add = typed_on_add, .call_obj = typed_call_obj};

  assert_int_equal(
      KCR_OK,
      kcr_informer_new(&(struct kcr_informer_opts){.client = cl, .gvr = &cms, .ns = "ns"},
                       &inf, NULL));
  for(int i = 0; i < 16; i++)
    assert_int_equal(KCR_OK, kcr_informer_add_typed_handlers(inf, &h));
  for(int i = 0; i < 4; i++)
    assert_int_equal(KCR_EINVAL, kcr_informer_add_typed_handlers(inf, &h));
  h.call_obj = NULL; /* a handler without its caller */
  assert_int_equal(KCR_EINVAL, kcr_informer_add_typed_handlers(inf, &h));
  kcr_informer_free(inf);
  kcr_client_free(cl);
}

/* ---- streaming lists (issue 31) ---- */

#define CMU(name, uid, rv)                                                               \
  "{\"kind\":\"ConfigMap\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"" name         \
  "\",\"namespace\":\"ns\",\"uid\":\"" uid "\",\"resourceVersion\":\"" rv "\"}}"
#define END_BOOKMARK(rv)                                                                 \
  "{\"kind\":\"ConfigMap\",\"apiVersion\":\"v1\",\"metadata\":{\"resourceVersion\":"     \
  "\"" rv "\",\"annotations\":{\"k8s.io/initial-events-end\":\"true\"}}}"

/* A server with streaming lists: the first stream brings a, b, c, the end
 * bookmark, then a change of a and 410; the second (the relist) brings a
 * unchanged, b changed, no c, the end bookmark, and stays open. Never a
 * LIST. */
static kcr_err api_streaming_list(struct twire_call *call, void *ud)
{
  struct fake *f = ud;
  int n;

  if(!call->req->watch)
    return not_found(call);
  n = atomic_fetch_add(&f->watches, 1);
  TCHECK(query_is(call, "sendInitialEvents", "true"));
  TCHECK(query_is(call, "resourceVersionMatch", "NotOlderThan"));
  TCHECK(query_is(call, "allowWatchBookmarks", "true"));
  TCHECK(!twire_query(call, "resourceVersion", (char[8]){0}, 8));
  twire_stream(call, 200);
  if(n == 0) {
    if(send_event(call, "ADDED", CMU("a", "ua", "1")) &&
       send_event(call, "ADDED", CMU("b", "ub", "2")) &&
       send_event(call, "BOOKMARK", BOOKMARK("3")) && /* not the end */
       send_event(call, "ADDED", CMU("c", "uc", "4")) &&
       send_event(call, "BOOKMARK", END_BOOKMARK("5")) &&
       send_event(call, "MODIFIED", CMU("a", "ua", "6")) && tflag_wait(&f->go, 60000))
      twire_send(call, "{\"type\":\"ERROR\",\"object\":%s}", GONE);
    return KCR_OK;
  }
  if(n == 1 && send_event(call, "ADDED", CMU("a", "ua", "6")) &&
     send_event(call, "ADDED", CMU("b", "ub", "7")) &&
     send_event(call, "BOOKMARK", END_BOOKMARK("8")))
    twire_wait_cancel(call, 60000);
  return KCR_OK;
}

/* A streaming list fills the store at its end bookmark, as a LIST would,
 * and the stream goes on as the watch; the relist after a 410 is streamed
 * too, and keeps the cached object of what did not change (the same
 * pointer: no second copy), tells updates for all it brought and deletes
 * what vanished. */
static void a_streaming_list_is_applied_at_its_end_bookmark(void **state)
{
  /* the relist's a is unchanged: not told again */
  static const char *const want[] = {"add a 1",      "add b 2",      "add c 4",
                                     "update a 1>6", "update b 2>7", "delete c 4"};
  struct fake f;
  struct kcr_informer_stats st;
  kcr_obj *a6, *again;

  fake_start(&f, api_streaming_list, 0);
  twire_watchlist(api_streaming_list, &f, true);
  assert_int_equal(KCR_OK, kcr_informer_start(f.inf));
  assert_true(kcr_informer_wait_synced(f.inf, 30000));
  assert_int_equal(3, kcr_store_len(kcr_informer_store(f.inf)));
  assert_true(evlog_wait(f.log, 4, 30000)); /* and the change of a */
  a6 = kcr_store_ref(kcr_informer_store(f.inf), "ns", "a");
  assert_string_equal("6", kcr_obj_rv(a6));
  atomic_store(&f.go, true); /* 410: streamed again */
  assert_true(evlog_wait(f.log, 6, 30000));
  stop_and_expect(&f, want, 6, 2);
  again = kcr_store_ref(kcr_informer_store(f.inf), "ns", "a");
  assert_ptr_equal(a6, again); /* unchanged: the cached object, not a copy */
  kcr_informer_get_stats(f.inf, &st);
  assert_int_equal(0, st.lists);
  assert_int_equal(2, st.stream_lists);
  assert_int_equal(2, st.watches);
  assert_int_equal(0, st.list_fallbacks);
  assert_int_equal(1, st.relists_gone);
  kcr_obj_unref(a6);
  kcr_obj_unref(again);
  twire_watchlist(api_streaming_list, &f, false);
  fake_finish(&f);
}

/* Handlers slower than initial_events_wait_ms while the list is applied
 * at its end bookmark: the timer must not take that for a missing end
 * bookmark (review of issue 31: it canceled the stream mid-apply, and the
 * feed then stopped for good while the informer said synced). The stream
 * goes on as the watch, and the relist after its 410 comes. */
static void a_slow_apply_is_not_a_missing_end_bookmark(void **state)
{
  struct fake f;
  struct kcr_informer_stats st;
  kcr_informer *inf;

  fake_start(&f, api_streaming_list, 0);
  twire_watchlist(api_streaming_list, &f, true);
  kcr_informer_free(f.inf);
  assert_int_equal(
      KCR_OK, kcr_informer_new(&(struct kcr_informer_opts){.client = f.cl,
                                                           .gvr = &cms,
                                                           .ns = "ns",
                                                           .initial_events_wait_ms = 100},
                               &inf, NULL));
  f.inf = inf;
  assert_int_equal(
      KCR_OK, kcr_informer_add_handlers(inf, &(struct kcr_informer_handlers){
                                                 on_add, on_update, on_delete, f.log}));
  atomic_store(&slow_add_ms, 150); /* 3 adds: 450 ms of applying */
  assert_int_equal(KCR_OK, kcr_informer_start(inf));
  assert_true(kcr_informer_wait_synced(inf, 30000));
  atomic_store(&slow_add_ms, 0);
  assert_true(evlog_wait(f.log, 4, 30000)); /* the change of a, watched */
  atomic_store(&f.go, true);                /* 410: streamed again */
  assert_true(evlog_wait(f.log, 6, 30000));
  kcr_informer_stop(inf);
  kcr_informer_get_stats(inf, &st);
  assert_int_equal(2, st.stream_lists);
  assert_int_equal(0, st.list_fallbacks);
  twire_watchlist(api_streaming_list, &f, false);
  fake_finish(&f);
}

/* A server that ignores sendInitialEvents: the objects come as ADDED, and
 * no end bookmark ever; after initial_events_wait_ms the informer lists in
 * pages, says why in the metric, and watches from the LIST. */
static atomic_bool ignored_with_a_change; /* api_ignores: a MODIFIED follows */
static kcr_err api_ignores(struct twire_call *call, void *ud)
{
  struct fake *f = ud;
  if(call->req->watch) {
    int n = atomic_fetch_add(&f->watches, 1);
    twire_stream(call, 200);
    if(n == 0) { /* the streaming list, answered as a plain watch */
      TCHECK(query_is(call, "sendInitialEvents", "true"));
      if(send_event(call, "ADDED", CMU("a", "ua", "1")) &&
         (!atomic_load(&ignored_with_a_change) ||
          send_event(call, "MODIFIED", CMU("a", "ua", "2"))))
        twire_wait_cancel(call, 60000);
    } else {
      TCHECK(query_is(call, "resourceVersion", "9"));
      TCHECK(!twire_query(call, "sendInitialEvents", (char[8]){0}, 8));
      twire_wait_cancel(call, 60000);
    }
    return KCR_OK;
  }
  if(!twire_is(call, "GET", PATH))
    return not_found(call);
  first_page(f);
  return list_reply(call, "9", NULL, CMU("a", "ua", "1") "," CMU("b", "ub", "2"));
}

/* The informer on api_ignores (initial_events_wait_ms wait_ms) lists in
 * pages after its streaming list; it took at least (or less than) ms. */
static void ignored_then_paged(uint64_t wait_ms, bool at_least, uint64_t ms);

static void no_end_bookmark_means_a_paged_list(void **state)
{
  ignored_then_paged(300, true, 300);
}

/* A MODIFIED before the end bookmark: a server that does not stream lists
 * - a paged LIST at once, not after initial_events_wait_ms. */
static void a_change_before_the_end_bookmark_means_a_paged_list(void **state)
{
  atomic_store(&ignored_with_a_change, true);
  ignored_then_paged(60000, false, 20000);
  atomic_store(&ignored_with_a_change, false);
}

static void ignored_then_paged(uint64_t wait_ms, bool at_least, uint64_t ms)
{
  static const char *const want[] = {"add a 1", "add b 2"};
  struct fake f;
  struct kcr_informer_stats st;
  kcr_metrics *reg;
  kcr_informer *inf;
  uint64_t t0;

  fake_start(&f, api_ignores, 0);
  twire_watchlist(api_ignores, &f, true);
  assert_int_equal(KCR_OK, kcr_metrics_new(NULL, &reg, NULL));
  kcr_informer_free(f.inf);
  assert_int_equal(
      KCR_OK,
      kcr_informer_new(&(struct kcr_informer_opts){.client = f.cl,
                                                   .gvr = &cms,
                                                   .ns = "ns",
                                                   .metrics = reg,
                                                   .initial_events_wait_ms = wait_ms},
                       &inf, NULL));
  f.inf = inf;
  assert_int_equal(
      KCR_OK, kcr_informer_add_handlers(inf, &(struct kcr_informer_handlers){
                                                 on_add, on_update, on_delete, f.log}));
  t0 = kcr_time_mono_ms();
  assert_int_equal(KCR_OK, kcr_informer_start(inf));
  assert_true(kcr_informer_wait_synced(inf, 30000));
  if(at_least)
    assert_true(kcr_time_mono_ms() - t0 >= ms);
  else
    assert_true(kcr_time_mono_ms() - t0 < ms);
  while(atomic_load(&f.watches) < 2)
    nanosleep(&(struct timespec){0, 10000000}, NULL);
  stop_and_expect(&f, want, 2, 2);
  kcr_informer_get_stats(inf, &st);
  assert_int_equal(1, st.stream_lists);
  assert_int_equal(1, st.list_fallbacks);
  assert_int_equal(1, st.lists);
  {
    struct kcr_buf out = KCR_BUF_INIT;
    assert_int_equal(KCR_OK, kcr_metrics_render(reg, &out));
    if(!strstr(out.ptr, "kcr_informer_list_fallbacks_total{informer=\"configmaps\","
                        "reason=\"no_end_bookmark\"} 1"))
      fail_msg("no fallback counted:\n%s", out.ptr);
    kcr_buf_cleanup(&out);
  }
  twire_watchlist(api_ignores, &f, false);
  fake_finish(&f);
  kcr_metrics_free(reg);
}

/* ---- namespaces chosen by a selector (issue 31) ---- */

#define NSOBJ(n)                                                                         \
  "{\"kind\":\"Namespace\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"" n            \
  "\",\"uid\":\"u" n "\",\"resourceVersion\":\"3\",\"labels\":{\"t\":\"x\"}}}"

/* Namespace a is selected; once the test says go, the namespaces' watch
 * brings a change of a (a label added, say). Each namespace's ConfigMaps:
 * one, named after it. */
static kcr_err api_selected(struct twire_call *call, void *ud)
{
  struct fake *f = ud;
  char ns[64];

  if(twire_is(call, "GET", "/api/v1/namespaces") &&
     sscanf(call->req->path, "/api/v1/namespaces/%63[^/?]/configmaps", ns) != 1) {
    TCHECK(query_is(call, "labelSelector", "t=x"));
    if(!call->req->watch)
      return twire_reply(call, 200,
                         "{\"kind\":\"NamespaceList\",\"metadata\":{\"resourceVersion\":"
                         "\"3\"},\"items\":[" NSOBJ("a") "]}");
    twire_stream(call, 200);
    if(tflag_wait(&f->go, 60000))
      send_event(call, "MODIFIED", NSOBJ("a"));
    twire_wait_cancel(call, 60000);
    return KCR_OK;
  }
  if(sscanf(call->req->path, "/api/v1/namespaces/%63[^/?]/configmaps", ns) != 1)
    return not_found(call);
  if(!call->req->watch)
    return twire_reply(call, 200,
                       "{\"kind\":\"ConfigMapList\",\"metadata\":{\"resourceVersion\":"
                       "\"10\"},\"items\":[{\"metadata\":{\"name\":\"%s\",\"namespace\":"
                       "\"%s\",\"uid\":\"c%s\",\"resourceVersion\":\"5\"}}]}",
                       ns, ns, ns);
  twire_stream(call, 200);
  twire_wait_cancel(call, 60000);
  return KCR_OK;
}

/* The feed of a selected namespace whose thread could not be made is
 * made at the namespace's next event (review of issue 31: only adds and
 * deletes were handled, so the namespace stayed out of the cache). */
static void a_selected_namespace_whose_feed_failed_is_tried_again(void **state)
{
  struct fake f;
  kcr_informer *inf;

  fake_start(&f, api_selected, 0);
  kcr_informer_free(f.inf);
  assert_int_equal(
      KCR_OK, kcr_informer_new(&(struct kcr_informer_opts){.client = f.cl,
                                                           .gvr = &cms,
                                                           .namespace_selector = "t=x"},
                               &inf, NULL));
  f.inf = inf;
  /* threads: the timer, the namespaces' informer's timer and feed, then
   * the feed of a - which fails */
  tfail_threads_arm(4);
  assert_int_equal(KCR_OK, kcr_informer_start(inf));
  assert_true(kcr_informer_wait_synced(inf, 30000));
  tfail_threads_arm(0);
  assert_false(kcr_informer_selects_namespace(inf, "a"));
  assert_int_equal(0, kcr_store_len(kcr_informer_store(inf)));
  atomic_store(&f.go, true); /* a's next event */
  for(int i = 0; i < 300 && kcr_store_len(kcr_informer_store(inf)) != 1; i++)
    nanosleep(&(struct timespec){0, 10000000}, NULL);
  assert_true(kcr_informer_selects_namespace(inf, "a"));
  assert_int_equal(1, kcr_store_len(kcr_informer_store(inf)));
  fake_finish(&f);
}

/* ---- one filtered cluster watch (cluster_watch) ---- */

#define CMIN(name, ns)                                                                   \
  "{\"kind\":\"ConfigMap\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"" name         \
  "\",\"namespace\":\"" ns "\",\"uid\":\"u" name "\",\"resourceVersion\":\"5\"}}"

/* Namespaces a and b are selected; every namespace's ConfigMaps are one
 * paged LIST: its first page holds a1, b1 and x1 (x: not selected); while
 * the informer waits for the second page, b leaves the selection (the
 * namespaces' watch deletes it); then the second page brings a2. */
static kcr_err api_cluster(struct twire_call *call, void *ud)
{
  struct fake *f = ud;
  char buf[64];

  if(twire_is(call, "GET", "/api/v1/namespaces")) {
    if(!call->req->watch)
      return twire_reply(call, 200,
                         "{\"kind\":\"NamespaceList\",\"metadata\":{\"resourceVersion\":"
                         "\"3\"},\"items\":[" NSOBJ("a") "," NSOBJ("b") "]}");
    twire_stream(call, 200);
    if(tflag_wait(&f->go, 60000))
      send_event(call, "DELETED", NSOBJ("b"));
    twire_wait_cancel(call, 60000);
    return KCR_OK;
  }
  if(!twire_is(call, "GET", "/api/v1/configmaps"))
    return not_found(call);
  if(call->req->watch) {
    atomic_fetch_add(&f->watches, 1);
    twire_stream(call, 200);
    twire_wait_cancel(call, 60000);
    return KCR_OK;
  }
  if(!twire_query(call, "continue", buf, sizeof(buf))) {
    first_page(f);
    return list_reply(call, "10", "p2",
                      CMIN("a1", "a") "," CMIN("b1", "b") "," CMIN("x1", "x"));
  }
  atomic_store(&f->go, true); /* b leaves now */
  for(int i = 0; i < 3000 && kcr_informer_selects_namespace(f->inf, "b"); i++)
    nanosleep(&(struct timespec){0, 1000000}, NULL);
  nanosleep(&(struct timespec){0, 200000000}, NULL); /* and is taken out */
  return list_reply(call, "10", NULL, CMIN("a2", "a"));
}

/* Replaces f's informer with one of the namespaces labelled t=x on one
 * filtered cluster watch (paged: paged LISTs), with f's handlers; started
 * and synced. */
static kcr_informer *cluster_informer(struct fake *f, bool paged)
{
  kcr_informer *inf;
  kcr_informer_free(f->inf);
  f->inf = NULL;
  assert_int_equal(
      KCR_OK, kcr_informer_new(&(struct kcr_informer_opts){.client = f->cl,
                                                           .gvr = &cms,
                                                           .namespace_selector = "t=x",
                                                           .cluster_watch = true,
                                                           .paged_list = paged},
                               &inf, NULL));
  f->inf = inf;
  assert_int_equal(
      KCR_OK, kcr_informer_add_handlers(inf, &(struct kcr_informer_handlers){
                                                 on_add, on_update, on_delete, f->log}));
  assert_int_equal(KCR_OK, kcr_informer_start(inf));
  assert_true(kcr_informer_wait_synced(inf, 30000));
  return inf;
}

/* A namespace that leaves the selection while the cluster watch's list is
 * read: what the list gathered of it is not applied - only what is
 * selected when the list is put into the store is (x's never was). */
static void a_cluster_watch_applies_only_what_is_selected_at_the_end(void **state)
{
  struct fake f;
  kcr_informer *inf;

  fake_start(&f, api_cluster, 0);
  inf = cluster_informer(&f, true);
  assert_false(kcr_informer_selects_namespace(inf, "b"));
  assert_true(kcr_informer_selects_namespace(inf, "a"));
  assert_false(kcr_informer_selects_namespace(inf, "x"));
  stop_and_expect(&f, (const char *[]){"add a1 5", "add a2 5"}, 2, 2);
  assert_int_equal(1, atomic_load(&f.lists));
  fake_finish(&f);
}

/* Namespace a is selected; b enters while the cluster watch's streaming
 * list is under way (after a1, before b1 and the end bookmark). The list
 * is applied all the same - entering namespaces do not cancel a list that
 * is gathering, or a stream of them would never let one finish - and the
 * relist follows. */
static kcr_err api_cluster_stream(struct twire_call *call, void *ud)
{
  struct fake *f = ud;
  bool initial = query_is(call, "sendInitialEvents", "true");

  if(twire_is(call, "GET", "/api/v1/namespaces")) {
    twire_stream(call, 200);
    if(!initial) /* (the stream below goes on as the watch) */
      return twire_wait_cancel(call, 60000), KCR_OK;
    if(send_event(call, "ADDED", NSOBJ("a")) &&
       send_event(call, "BOOKMARK", END_BOOKMARK("3")) && tflag_wait(&f->go, 60000))
      send_event(call, "ADDED", NSOBJ("b"));
    twire_wait_cancel(call, 60000);
    return KCR_OK;
  }
  if(!twire_is(call, "GET", "/api/v1/configmaps") || !initial)
    return not_found(call);
  int n = atomic_fetch_add(&f->watches, 1);
  twire_stream(call, 200);
  if(n == 0 && send_event(call, "ADDED", CMIN("a1", "a"))) {
    atomic_store(&f->go, true); /* b enters */
    for(int i = 0; i < 3000 && !kcr_informer_selects_namespace(f->inf, "b"); i++)
      nanosleep(&(struct timespec){0, 1000000}, NULL);
    nanosleep(&(struct timespec){0, 200000000}, NULL); /* and ns_entered ran */
    if(send_event(call, "ADDED", CMIN("b1", "b")) &&
       send_event(call, "BOOKMARK", END_BOOKMARK("6")))
      twire_wait_cancel(call, 1000); /* (the informer ends it to relist) */
    return KCR_OK;
  } else if(n == 1 && send_event(call, "ADDED", CMIN("a1", "a")) &&
            send_event(call, "ADDED", CMIN("b1", "b"))) {
    send_event(call, "BOOKMARK", END_BOOKMARK("7"));
  }
  twire_wait_cancel(call, 60000);
  return KCR_OK;
}

static void a_namespace_entering_does_not_cancel_a_streaming_list(void **state)
{
  struct kcr_informer_stats st;
  struct fake f;
  kcr_informer *inf;

  fake_start(&f, api_cluster_stream, 0);
  twire_watchlist(api_cluster_stream, &f, true);
  inf = cluster_informer(&f, false);
  for(int i = 0; i < 3000 && atomic_load(&f.watches) < 2; i++)
    nanosleep(&(struct timespec){0, 10000000}, NULL);
  nanosleep(&(struct timespec){0, 200000000}, NULL); /* the relist applied */
  assert_int_equal(2, atomic_load(&f.watches));
  /* both streaming lists applied (a stream counts as a watch once applied):
   * the first was not cut short by b entering */
  kcr_informer_get_stats(inf, &st);
  assert_int_equal(2, st.stream_lists);
  assert_int_equal(2, st.watches);
  /* b1 came in the first list (b was selected by then); the relist brought
   * nothing new */
  stop_and_expect(&f, (const char *[]){"add a1 5", "add b1 5"}, 2, 2);
  twire_watchlist(api_cluster_stream, &f, false);
  fake_finish(&f);
}

/* A paged LIST's page holds an object of a namespace that is not
 * selected, bigger than max_bytes: dropped, and not counted either. */
static char big_x[9000];

static kcr_err api_cluster_big(struct twire_call *call, void *ud)
{
  if(!twire_is(call, "GET", "/api/v1/configmaps"))
    return not_found(call);
  if(call->req->watch) {
    twire_stream(call, 200);
    twire_wait_cancel(call, 60000);
    return KCR_OK;
  }
  return twire_reply(call, 200,
                     "{\"kind\":\"ConfigMapList\",\"apiVersion\":\"v1\",\"metadata\":{"
                     "\"resourceVersion\":\"10\"},\"items\":[" CMIN("a1", "a") ",%s]}",
                     big_x);
}

static void a_cluster_watch_counts_only_selected_objects_against_the_budget(void **state)
{
  struct fake f;
  kcr_informer *inf;

  snprintf(
      big_x, sizeof(big_x),
      "{\"kind\":\"ConfigMap\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"x1\","
      "\"namespace\":\"x\",\"uid\":\"ux\",\"resourceVersion\":\"5\"},\"data\":{\"k\":"
      "\"%08000d\"}}",
      0);
  fake_start(&f, api_cluster_big, 0);
  kcr_informer_free(f.inf);
  f.inf = NULL;
  assert_int_equal(KCR_OK, kcr_informer_new(
                               &(struct kcr_informer_opts){
                                   .client = f.cl,
                                   .gvr = &cms,
                                   .namespaces = (const char *[]){"a", "b", NULL},
                                   .cluster_watch = true,
                                   .paged_list = true,
                                   .max_bytes = 4096},
                               &inf, NULL));
  f.inf = inf;
  assert_int_equal(KCR_OK, kcr_informer_start(inf));
  assert_true(kcr_informer_wait_synced(inf, 10000));
  assert_false(kcr_informer_over_budget(inf));
  assert_int_equal(1, kcr_store_len(kcr_informer_store(inf)));
  fake_finish(&f);
}

/* ---- the byte budget (max_bytes) ---- */

#define BUDGET 4096
/* A ConfigMap c of about 8 KiB: over BUDGET alone. */
static char big_c[9000];

static void make_big_c(const char *rv)
{
  char fill[8193];
  memset(fill, 'x', sizeof(fill) - 1);
  fill[sizeof(fill) - 1] = 0;
  snprintf(big_c, sizeof(big_c),
           "{\"kind\":\"ConfigMap\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"c\","
           "\"namespace\":\"ns\",\"uid\":\"uc\",\"resourceVersion\":\"%s\"},"
           "\"data\":{\"k\":\"%s\"}}",
           rv, fill);
}

/* Streaming lists: the first brings a and b and then, when the test says
 * go, the big c as a watch event; the second (the relist after the cache
 * was emptied) brings a, b and c again; the third a and b only (c was
 * deleted) and stays open. */
static kcr_err api_budget_stream(struct twire_call *call, void *ud)
{
  struct fake *f = ud;
  int n;

  if(!call->req->watch)
    return not_found(call);
  n = atomic_fetch_add(&f->watches, 1);
  twire_stream(call, 200);
  if(n == 0) {
    if(send_event(call, "ADDED", CMU("a", "ua", "1")) &&
       send_event(call, "ADDED", CMU("b", "ub", "2")) &&
       send_event(call, "BOOKMARK", END_BOOKMARK("3")) && tflag_wait(&f->go, 60000) &&
       send_event(call, "ADDED", big_c))
      twire_wait_cancel(call, 60000);
    return KCR_OK;
  }
  if(n == 1) {
    if(send_event(call, "ADDED", CMU("a", "ua", "1")) &&
       send_event(call, "ADDED", CMU("b", "ub", "2")) && send_event(call, "ADDED", big_c))
      twire_wait_cancel(call, 60000);
    return KCR_OK;
  }
  if(send_event(call, "ADDED", CMU("a", "ua", "1")) &&
     send_event(call, "ADDED", CMU("b", "ub", "2")) &&
     send_event(call, "BOOKMARK", END_BOOKMARK("9")))
    twire_wait_cancel(call, 60000);
  return KCR_OK;
}

/* Paged LISTs: a, b and the big c do not fit (the page alone is over the
 * budget), twice; then a and b do. */
static kcr_err api_budget_paged(struct twire_call *call, void *ud)
{
  struct fake *f = ud;

  if(call->req->watch) {
    twire_stream(call, 200);
    twire_wait_cancel(call, 60000);
    return KCR_OK;
  }
  if(!twire_is(call, "GET", PATH))
    return not_found(call);
  switch(first_page(f)) {
  case 1:
  case 2: {
    char items[9400];
    snprintf(items, sizeof(items), "%s,%s,%s", CMU("a", "ua", "1"), CMU("b", "ub", "2"),
             big_c);
    return list_reply(call, "6", NULL, items);
  }
  default:
    return list_reply(call, "9", NULL, CMU("a", "ua", "1") "," CMU("b", "ub", "2"));
  }
}

static kcr_informer *budget_informer(struct fake *f, bool paged, kcr_metrics *mx)
{
  kcr_informer *inf;
  assert_int_equal(KCR_OK,
                   kcr_informer_new(&(struct kcr_informer_opts){.client = f->cl,
                                                                .gvr = &cms,
                                                                .ns = "ns",
                                                                .paged_list = paged,
                                                                .metrics = mx,
                                                                .max_bytes = BUDGET},
                                    &inf, NULL));
  assert_int_equal(
      KCR_OK, kcr_informer_add_handlers(inf, &(struct kcr_informer_handlers){
                                                 on_add, on_update, on_delete, f->log}));
  return inf;
}

/* Going over the budget empties the cache (no delete told: nothing was
 * deleted), unsyncs the informer and says why; it lists again with
 * backoff while the list does not fit, and fills and syncs again, as at
 * start, once it does. Either way of listing. */
static void over_budget_then_fits(twire_fn api, bool paged)
{
  static const char *const want[] = {"add a 1", "add b 2", "add a 1", "add b 2"};
  struct fake f;
  struct kcr_informer_stats st;
  kcr_metrics *mx = NULL;
  struct kcr_buf text = KCR_BUF_INIT;
  char why[512];

  assert_int_equal(KCR_OK, kcr_metrics_new(NULL, &mx, NULL));
  make_big_c("6");
  fake_start(&f, api, 0);
  kcr_informer_free(f.inf);
  f.inf = budget_informer(&f, paged, mx);
  twire_watchlist(api, &f, !paged);
  assert_int_equal(KCR_OK, kcr_informer_start(f.inf));
  if(!paged) {
    assert_true(kcr_informer_wait_synced(f.inf, 30000));
    assert_int_equal(2, kcr_store_len(kcr_informer_store(f.inf)));
    assert_false(kcr_informer_why_unsynced(f.inf, why, sizeof(why)));
    assert_string_equal("", why);
    atomic_store(&f.go, true); /* the big c comes as a watch event */
  }
  for(int i = 0; i < 30000 && !kcr_informer_over_budget(f.inf); i++)
    nanosleep(&(struct timespec){0, 1000000}, NULL);
  assert_true(kcr_informer_over_budget(f.inf));
  assert_false(kcr_informer_has_synced(f.inf)); /* (unsynced first, then emptied) */
  for(int i = 0; i < 30000 && kcr_store_len(kcr_informer_store(f.inf)); i++)
    nanosleep(&(struct timespec){0, 1000000}, NULL);
  assert_int_equal(0, kcr_store_len(kcr_informer_store(f.inf)));
  assert_true(kcr_informer_why_unsynced(f.inf, why, sizeof(why)));
  assert_non_null(strstr(why, "informer configmaps is over its byte budget"));
  assert_non_null(strstr(why, "max_bytes is 4096"));
  assert_non_null(strstr(why, "namespace ns"));
  /* listed again (and over again) with backoff, then it fits */
  assert_true(kcr_informer_wait_synced(f.inf, 30000));
  assert_false(kcr_informer_over_budget(f.inf));
  assert_int_equal(2, kcr_store_len(kcr_informer_store(f.inf)));
  stop_and_expect(&f, want, paged ? 2 : 4, 2);
  kcr_informer_get_stats(f.inf, &st);
  assert_int_equal(2, st.budget_exceeded);
  assert_int_equal(KCR_OK, kcr_metrics_render(mx, &text));
  assert_non_null(
      strstr(kcr_buf_str(&text),
             "kcr_informer_budget_exceeded_total{informer=\"configmaps\"} 2"));
  kcr_buf_cleanup(&text);
  kcr_metrics_free(mx);
  twire_watchlist(api, &f, false);
  fake_finish(&f);
}

static void a_watch_event_over_the_budget_empties_the_cache_until_it_fits(void **state)
{
  over_budget_then_fits(api_budget_stream, false);
}

static void a_paged_list_over_the_budget_is_listed_again_until_it_fits(void **state)
{
  over_budget_then_fits(api_budget_paged, true);
}

int main(void)
{
  tfail_init();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(a_selected_namespace_whose_feed_failed_is_tried_again),
      cmocka_unit_test(a_cluster_watch_applies_only_what_is_selected_at_the_end),
      cmocka_unit_test(a_namespace_entering_does_not_cancel_a_streaming_list),
      cmocka_unit_test(a_cluster_watch_counts_only_selected_objects_against_the_budget),
      cmocka_unit_test(a_streaming_list_is_applied_at_its_end_bookmark),
      cmocka_unit_test(no_end_bookmark_means_a_paged_list),
      cmocka_unit_test(a_slow_apply_is_not_a_missing_end_bookmark),
      cmocka_unit_test(a_change_before_the_end_bookmark_means_a_paged_list),
      cmocka_unit_test(handlers_see_a_paged_list_and_the_watch_exactly_once_in_order),
      cmocka_unit_test(stats_can_be_read_from_another_thread_while_events_flow),
      cmocka_unit_test(a_watch_cut_after_events_does_not_grow_the_backoff),
      cmocka_unit_test(refused_credentials_are_logged_with_what_to_check),
      cmocka_unit_test(a_410_relists_and_deletes_only_what_vanished),
      cmocka_unit_test(a_list_the_store_cannot_take_is_not_applied_and_is_listed_again),
      cmocka_unit_test(a_relist_the_store_cannot_take_emits_no_deletes),
      cmocka_unit_test(an_event_the_store_cannot_take_is_delivered_again),
      cmocka_unit_test(a_resync_thread_that_cannot_start_fails_start),
      cmocka_unit_test(a_keep_list_projects_listed_and_watched_objects),
      cmocka_unit_test(new_refuses_invalid_options_naming_them),
      cmocka_unit_test(watch_timeouts_are_milliseconds_sent_as_whole_seconds),
      cmocka_unit_test(the_seventeenth_typed_handler_set_is_refused),
      cmocka_unit_test(a_watch_event_over_the_budget_empties_the_cache_until_it_fits),
      cmocka_unit_test(a_paged_list_over_the_budget_is_listed_again_until_it_fits),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
