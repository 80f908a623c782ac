/* Which proxy the client reaches its server through (kcr__proxy_for,
 * src/kube/proxy.c), from tables modelled on Go's
 * golang.org/x/net/http/httpproxy proxy_test.go (proxyForURLTests,
 * UseProxyTests) and client-go's choices: the kubeconfig's proxy-url
 * first, then https_proxy / http_proxy by the server's scheme, NO_PROXY's
 * forms, loopback never proxied, ALL_PROXY never read. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "kube/proxy-int.h"
#include "tfail.h"

struct row {
  const char *server;
  const char *proxy_url; /* the kubeconfig's */
  struct kcr__proxy_env env;
  const char *want; /* NULL: no proxy */
};

static void check_rows(const struct row *rows, size_t n)
{
  int bad = 0;

  for(size_t i = 0; i < n; i++) {
    char *got = (char *)1;
    assert_int_equal(
        KCR_OK, kcr__proxy_for(rows[i].server, rows[i].proxy_url, &rows[i].env, &got));
    if(!got != !rows[i].want || (got && strcmp(got, rows[i].want))) {
      print_error("row %zu (%s): got %s, want %s\n", i, rows[i].server,
                  got ? got : "no proxy", rows[i].want ? rows[i].want : "no proxy");
      bad++;
    }
    free(got);
  }
  assert_int_equal(0, bad);
}

#define CHECK(rows) check_rows(rows, sizeof(rows) / sizeof(rows[0]))

/* Go's proxyForURLTests: the proxy's form, and which variable a scheme
 * reads. */
static void the_scheme_picks_the_variable_and_a_bare_host_means_http(void **state)
{
  static const struct row rows[] = {
      {"http://example.com",
       NULL,
       {.http_proxy = "127.0.0.1:8080"},
       "http://127.0.0.1:8080"},
      {"http://example.com",
       NULL,
       {.http_proxy = "cache.corp.example.com:1234"},
       "http://cache.corp.example.com:1234"},
      {"http://example.com", NULL, {.http_proxy = "localhost"}, "http://localhost"},
      {"http://example.com",
       NULL,
       {.http_proxy = "https://cache.corp.example.com"},
       "https://cache.corp.example.com"},
      {"http://example.com", NULL, {.http_proxy = "foo://host"}, "foo://host"},
      /* http reads http_proxy, https https_proxy, never the other */
      {"http://insecure.tld/",
       NULL,
       {.http_proxy = "http.proxy.tld", .https_proxy = "secure.proxy.tld"},
       "http://http.proxy.tld"},
      {"https://secure.tld/",
       NULL,
       {.http_proxy = "http.proxy.tld", .https_proxy = "https://secure.proxy.tld"},
       "https://secure.proxy.tld"},
      {"https://secure.tld/", NULL, {.http_proxy = "http.proxy.tld"}, NULL},
      {"ftp://insecure.tld/", NULL, {.http_proxy = "http.proxy.tld"}, NULL},
      {"http://example.com", NULL, {0}, NULL},
      /* SOCKS5: the proxy resolves the name, as Go's dialer has it */
      {"https://api.example.com",
       NULL,
       {.https_proxy = "socks5://127.0.0.1:1080"},
       "socks5h://127.0.0.1:1080"},
  };
  CHECK(rows);
  (void)state;
}

/* Go's FromEnvironment: the lower-case name first; an empty value is
 * unset; ALL_PROXY is not a variable the rules read at all (the struct has
 * no place for it), so with only it set there is no proxy: covered by the
 * client test (test_client: all_proxy_is_ignored). */
static void lower_case_names_win_and_empty_counts_as_unset(void **state)
{
  static const struct row rows[] = {
      {"https://api.example.com",
       NULL,
       {.https_proxy = "lower:1", .https_proxy_upper = "upper:2"},
       "http://lower:1"},
      {"https://api.example.com",
       NULL,
       {.https_proxy = "", .https_proxy_upper = "upper:2"},
       "http://upper:2"},
      {"https://api.example.com",
       NULL,
       {.https_proxy_upper = "upper:2"},
       "http://upper:2"},
      {"http://api.example.com",
       NULL,
       {.http_proxy = "lower:1", .http_proxy_upper = "upper:2"},
       "http://lower:1"},
      {"http://api.example.com", NULL, {.http_proxy_upper = "upper:2"}, "http://upper:2"},
      /* no_proxy (lower) names the server, NO_PROXY does not: lower wins */
      {"https://api.example.com",
       NULL,
       {.https_proxy = "p:1", .no_proxy = "example.com", .no_proxy_upper = "other.org"},
       NULL},
      {"https://api.example.com",
       NULL,
       {.https_proxy = "p:1", .no_proxy = "other.org", .no_proxy_upper = "example.com"},
       "http://p:1"},
      {"https://api.example.com",
       NULL,
       {.https_proxy = "p:1", .no_proxy = "", .no_proxy_upper = "example.com"},
       NULL},
  };
  CHECK(rows);
  (void)state;
}

/* Go's UseProxyTests, with its NO_PROXY, the server on port 80. */
static void no_proxy_forms_as_go_matches_them(void **state)
{
#define NP                                                                               \
  "foobar.com, .barbaz.net, *.wildcard.io, 192.168.1.1, 192.168.1.2:81, "                \
  "192.168.1.3:80, 10.0.0.0/30, 2001:db8::52:0:1, [2001:db8::52:0:2]:443, "              \
  "[2001:db8::52:0:3]:80, 2002:db8:a::45/64"
#define USE(host, proxied)                                                               \
  {                                                                                      \
    "http://" host ":80", NULL, {.http_proxy = "p:3128", .no_proxy = NP},                \
        (proxied) ? "http://p:3128" : NULL                                               \
  }
  static const struct row rows[] = {
      USE("localhost", false),
      USE("127.0.0.1", false),
      USE("127.0.0.2", false),
      USE("[::1]", false),
      USE("[::2]", true),
      USE("192.168.1.1", false), /* exact IPv4 */
      USE("192.168.1.2", true),  /* ports differ */
      USE("192.168.1.3", false), /* IPv4:port */
      USE("192.168.1.4", true),
      USE("10.0.0.2", false), /* IPv4 CIDR */
      USE("10.0.0.4", true),
      USE("[2001:db8::52:0:1]", false), /* exact IPv6 */
      USE("[2001:db8::52:0:2]", true),  /* ports differ */
      USE("[2001:db8::52:0:3]", false), /* [IPv6]:port */
      USE("[2002:db8:a::123]", false),  /* IPv6 CIDR */
      USE("[fe80::424b:c8be:1643:a1b6]", true),
      USE("barbaz.net", true), /* .barbaz.net: names under it only */
      USE("www.barbaz.net", false),
      USE("foobar.com", false),     /* foobar.com: itself */
      USE("www.foobar.com", false), /* and names under it */
      USE("foofoobar.com", true),   /* not a label boundary */
      USE("baz.com", true),
      USE("localhost.net", true),
      USE("local.localhost", true),
      USE("barbarbaz.net", true),
      USE("wildcard.io", true), /* *.wildcard.io: names under it only */
      USE("nested.wildcard.io", false),
      USE("awildcard.io", true),
      USE("WWW.FooBar.COM", false), /* case does not matter */
      /* a zone is no part of the address, and makes it no name */
      {"http://[1000::%25.example.com]:123",
       NULL,
       {.http_proxy = "p:3128", .no_proxy = "example.com"},
       "http://p:3128"},
  };
#undef USE
#undef NP
  CHECK(rows);
  (void)state;
}

/* The server's port is its URL's, else its scheme's; an entry's port must
 * be it; "*" is every server; malformed entries are skipped. */
static void ports_star_and_malformed_entries(void **state)
{
#define ENV(np)                                                                          \
  {                                                                                      \
    .https_proxy = "p:3128", .no_proxy = (np)                                            \
  }
  static const struct row rows[] = {
      {"https://api.example.com", NULL, ENV("api.example.com:443"), NULL},
      {"https://api.example.com:443", NULL, ENV("api.example.com:443"), NULL},
      {"https://api.example.com:6443", NULL, ENV("api.example.com:443"), "http://p:3128"},
      {"https://api.example.com:6443", NULL, ENV("example.com:6443"), NULL},
      {"https://api.example.com:6443/prefix", NULL, ENV(".example.com"), NULL},
      {"https://10.1.2.3:6443", NULL, ENV("10.1.2.3:6443"), NULL},
      {"https://10.1.2.3:6443", NULL, ENV("10.1.2.3:443"), "http://p:3128"},
      {"https://[fd00::1]:6443", NULL, ENV("[fd00::1]:6443"), NULL},
      {"https://[fd00::1]:6443", NULL, ENV("fd00::1"), NULL},
      {"https://[fd00::1]:6443", NULL, ENV("fd00::/8"), NULL},
      {"https://[fd00::1]:6443", NULL, ENV("fe00::/8"), "http://p:3128"},
      {"https://api.example.com", NULL, ENV("*"), NULL},
      {"https://10.1.2.3", NULL, ENV("other.org, *"), NULL},
      {"https://api.example.com", NULL, ENV(":1"), "http://p:3128"},
      {"https://api.example.com", NULL, ENV(" , ,,"), "http://p:3128"},
      {"https://api.example.com", NULL, ENV("10.0.0.0/99, [x, a:b:c"), "http://p:3128"},
      /* a name never matches an IP entry, nor an IP address a domain */
      {"https://10.1.2.3", NULL, ENV("3"), "http://p:3128"},
      {"https://10.1.2.3", NULL, ENV(".2.3"), "http://p:3128"},
      {"https://ten.example", NULL, ENV("10.0.0.0/8"), "http://p:3128"},
      /* IPv4 and IPv4-mapped IPv6 are one address */
      {"https://[::ffff:10.1.2.3]", NULL, ENV("10.1.2.3"), NULL},
      {"https://10.1.2.3", NULL, ENV("::ffff:10.0.0.0/104"), NULL},
      /* user info is no part of the host */
      {"https://u@api.example.com", NULL, ENV("api.example.com"), NULL},
  };
#undef ENV
  CHECK(rows);
  (void)state;
}

/* Loopback servers are never proxied from the environment, whatever
 * NO_PROXY says; client-go's wrapper also takes CIDRs from NO_PROXY first. */
static void loopback_is_never_proxied_and_client_go_cidrs(void **state)
{
  static const struct row rows[] = {
      {"https://127.0.0.1:6443", NULL, {.https_proxy = "p:3128"}, NULL},
      {"https://127.255.0.9:6443", NULL, {.https_proxy = "p:3128"}, NULL},
      {"https://localhost:6443", NULL, {.https_proxy = "p:3128"}, NULL},
      {"https://LocalHost:6443", NULL, {.https_proxy = "p:3128"}, NULL},
      {"https://[::1]:6443", NULL, {.https_proxy = "p:3128"}, NULL},
      {"https://[::ffff:127.0.0.1]:6443", NULL, {.https_proxy = "p:3128"}, NULL},
      {"https://128.0.0.1:6443", NULL, {.https_proxy = "p:3128"}, "http://p:3128"},
      {"https://localhost.example:6443",
       NULL,
       {.https_proxy = "p:3128"},
       "http://p:3128"},
      /* Go reads no_proxy, which names nothing here; client-go's wrapper
       * reads NO_PROXY for CIDRs */
      {"https://10.1.2.3",
       NULL,
       {.https_proxy = "p:3128", .no_proxy = "other.org", .no_proxy_upper = "10.0.0.0/8"},
       NULL},
      {"https://10.1.2.3",
       NULL,
       {.https_proxy = "p:3128", .no_proxy = "other.org", .no_proxy_upper = "10.1.2.3"},
       "http://p:3128"},
  };
  CHECK(rows);
  (void)state;
}

/* The kubeconfig's proxy-url comes first and is used for every request
 * (client-go: http.ProxyURL), NO_PROXY and loopback notwithstanding. */
static void the_kubeconfig_proxy_url_comes_first(void **state)
{
  static const struct row rows[] = {
      {"https://api.example.com",
       "http://kube.proxy:3128",
       {.https_proxy = "env.proxy:1"},
       "http://kube.proxy:3128"},
      {"https://api.example.com",
       "http://kube.proxy:3128",
       {.no_proxy = "*"},
       "http://kube.proxy:3128"},
      {"https://127.0.0.1:6443",
       "https://u:pw@kube.proxy",
       {0},
       "https://u:pw@kube.proxy"},
      {"http://api.example.com",
       "socks5://kube.proxy:1080",
       {0},
       "socks5h://kube.proxy:1080"},
      {"https://api.example.com",
       "",
       {.https_proxy = "env.proxy:1"},
       "http://env.proxy:1"},
  };
  CHECK(rows);
  (void)state;
}

/* No environment at all (env NULL) is an empty one. */
static void a_null_environment_is_empty(void **state)
{
  char *got = (char *)1;

  assert_int_equal(KCR_OK, kcr__proxy_for("https://api.example.com", NULL, NULL, &got));
  assert_null(got);
  assert_int_equal(KCR_OK,
                   kcr__proxy_for("https://api.example.com", "http://p:1", NULL, &got));
  assert_string_equal("http://p:1", got);
  free(got);
  (void)state;
}

/* Out of memory: KCR_ENOMEM with nothing out, nothing leaked. ud: the
 * kubeconfig's proxy-url, or NULL. */
static bool decide(void *ud)
{
  const struct kcr__proxy_env env = {.https_proxy = "p:3128", .no_proxy = "other.org"};
  const char *want = ud ? "socks5h://kube.proxy:1080" : "http://p:3128";
  char *got = (char *)1;
  kcr_err rc = kcr__proxy_for("https://api.example.com", ud, &env, &got);
  bool ok = rc == KCR_OK ? got && !strcmp(got, want) : rc == KCR_ENOMEM && !got;

  free(got);
  return ok;
}

static void out_of_memory_is_enomem(void **state)
{
  tfail_torture("kcr__proxy_for (environment)", decide, NULL);
  tfail_torture("kcr__proxy_for (proxy-url)", decide, (void *)"socks5://kube.proxy:1080");
  (void)state;
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(the_scheme_picks_the_variable_and_a_bare_host_means_http),
      cmocka_unit_test(lower_case_names_win_and_empty_counts_as_unset),
      cmocka_unit_test(no_proxy_forms_as_go_matches_them),
      cmocka_unit_test(ports_star_and_malformed_entries),
      cmocka_unit_test(loopback_is_never_proxied_and_client_go_cidrs),
      cmocka_unit_test(the_kubeconfig_proxy_url_comes_first),
      cmocka_unit_test(a_null_environment_is_empty),
      cmocka_unit_test(out_of_memory_is_enomem),
  };
  tfail_init();
  return cmocka_run_group_tests(tests, NULL, NULL);
}
