/* DESIGN: which proxy, if any, the client reaches its server through
 * (kcr__proxy_for), decided as client-go decides it, and without I/O: the
 * caller reads the environment and passes the values in, so every rule is
 * a row of a table test (tests/unit/test_proxy.c). The client hands the
 * answer to curl (CURLOPT_PROXY, "" for none; CURLOPT_NOPROXY "") so that
 * curl's own reading of the environment (ALL_PROXY, NO_PROXY with rules of
 * its own) never applies, and keeps its connections of its own exactly when
 * the answer is "none".
 *
 * The rules, in order:
 *  1. The cluster's proxy-url (kubeconfig) is used for every request,
 *     whatever the server's host: client-go sets http.ProxyURL, which
 *     consults neither NO_PROXY nor the loopback rule below.
 *  2. Otherwise the environment, as Go's http.ProxyFromEnvironment
 *     (golang.org/x/net/http/httpproxy) reads it:
 *     - https_proxy, else HTTPS_PROXY for an https server; http_proxy, else
 *       HTTP_PROXY for an http one (an empty value counts as unset);
 *       ALL_PROXY is not read. A value without "scheme://" is
 *       "http://value".
 *     - Never for localhost or a loopback address (127.0.0.0/8, ::1,
 *       ::ffff:127.0.0.0/104); "localhost" in any case (Go: lower case only).
 *     - Never for a host that no_proxy, else NO_PROXY names. Its entries are
 *       separated by ',', trimmed and compared without regard to case:
 *       "*" (every host); an IP address, an IP address with a port
 *       ("1.2.3.4:80", "[::1]:443"), or a CIDR ("10.0.0.0/8", "fd00::/8"),
 *       which match a host that is that IP address; a domain ("foo.com"
 *       matches foo.com and every name under it), ".foo.com" or "*.foo.com"
 *       (names under it only), each optionally with ":port". An entry with
 *       a port matches the server's port only (the URL's, else 443 or 80);
 *       entries that fit no form are skipped. A domain never matches an IP
 *       address and an IP entry never a name. IPv4 and IPv4-mapped IPv6
 *       addresses are the same address (as Go's net.IP).
 *     - client-go's addition (apimachinery NewProxierWithNoProxyCIDR): a
 *       CIDR entry of NO_PROXY, else no_proxy - upper case first, entries
 *       not trimmed - also exempts an IP host in it.
 *  3. socks5:// becomes socks5h:// for curl: Go's SOCKS5 dialer sends the
 *     host name to the proxy, which resolves it (curl's socks5h); with
 *     socks5 curl would resolve it itself.
 * Not followed: Go's IDNA conversion of non-ASCII names (bytes are compared
 * as they are), and its refusal of HTTP_PROXY in a CGI process. */
#include <arpa/inet.h>
#include <ctype.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "kcr/buf.h"
#include "proxy-int.h"

/* A piece of a string, not NUL-terminated. */
struct span {
  const char *p;
  size_t n;
};

/* The server as the rules see it. */
struct target {
  bool https, http; /* its scheme (neither: no proxy from the environment) */
  struct span host; /* without brackets or a zone */
  struct span port; /* the URL's, else the scheme's */
  bool is_ip;
  unsigned char ip[16]; /* when is_ip: IPv4 as ::ffff:a.b.c.d */
};

static bool span_is(struct span s, const char *lit)
{
  return s.n == strlen(lit) && !strncasecmp(s.p, lit, s.n);
}

static bool span_eq(struct span a, struct span b)
{
  return a.n == b.n && !strncasecmp(a.p, b.p, a.n);
}

static bool span_has(struct span s, char c) { return s.n && memchr(s.p, c, s.n); }

/* An IPv4 or IPv6 address (no zone, no brackets) as 16 bytes, IPv4 as
 * IPv4-mapped IPv6; *v4 says which form the text had. */
static bool ip_parse(struct span s, unsigned char ip[16], bool *v4)
{
  char buf[64];

  if(!s.n || s.n >= sizeof(buf))
    return false;
  memcpy(buf, s.p, s.n);
  buf[s.n] = '\0';
  *v4 = !strchr(buf, ':');
  if(*v4 && inet_pton(AF_INET, buf, ip + 12) == 1) {
    memset(ip, 0, 10);
    ip[10] = ip[11] = 0xff;
    return true;
  }
  return !*v4 && inet_pton(AF_INET6, buf, ip) == 1;
}

/* "addr/bits" into net and a prefix length over the 16 bytes. */
static bool cidr_parse(struct span s, unsigned char net[16], unsigned *bits)
{
  const char *slash = memchr(s.p, '/', s.n);
  size_t nd;
  unsigned b = 0;
  bool v4;

  if(!slash)
    return false;
  nd = s.n - (size_t)(slash + 1 - s.p);
  if(!nd || nd > 3 || !ip_parse((struct span){s.p, (size_t)(slash - s.p)}, net, &v4))
    return false;
  for(size_t i = 0; i < nd; i++) {
    if(!isdigit((unsigned char)slash[1 + i]))
      return false;
    b = b * 10 + (unsigned)(slash[1 + i] - '0');
  }
  if(b > (v4 ? 32u : 128u))
    return false;
  *bits = v4 ? b + 96 : b;
  return true;
}

static bool in_prefix(const unsigned char ip[16], const unsigned char net[16],
                      unsigned bits)
{
  unsigned whole = bits / 8, rest = bits % 8;
  unsigned char mask = (unsigned char)(0xff << (8 - rest));

  return !memcmp(ip, net, whole) && (!rest || !((ip[whole] ^ net[whole]) & mask));
}

static bool loopback(const struct target *t)
{
  static const unsigned char v6[16] = {[15] = 1}, v4[13] = {[10] = 0xff, 0xff, 127};

  if(span_is(t->host, "localhost"))
    return true;
  return t->is_ip && (!memcmp(t->ip, v6, 16) || !memcmp(t->ip, v4, 13));
}

/* Go's net.SplitHostPort: "host:port" or "[host]:port" (the port may be
 * empty); false for anything else (no port, too many colons), with *host
 * and *port then undefined. */
static bool split_host_port(struct span s, struct span *host, struct span *port)
{
  const char *end = s.p + s.n, *c = NULL, *rb;

  if(s.n && s.p[0] == '[') {
    rb = memchr(s.p, ']', s.n);
    if(!rb || rb + 1 == end || rb[1] != ':')
      return false;
    *host = (struct span){s.p + 1, (size_t)(rb - s.p - 1)};
    *port = (struct span){rb + 2, (size_t)(end - rb - 2)};
    return !span_has((struct span){s.p + 1, s.n - 1}, '[') && !span_has(*port, ']');
  }
  for(const char *q = s.p; q < end; q++)
    if(*q == ':')
      c = q;
  if(!c)
    return false;
  *host = (struct span){s.p, (size_t)(c - s.p)};
  *port = (struct span){c + 1, (size_t)(end - c - 1)};
  return !span_has(*host, ':') && !span_has(s, '[') && !span_has(s, ']');
}

/* Whether the trimmed no_proxy entry e exempts t (Go's httpproxy matchers). */
static bool entry_matches(const struct target *t, struct span e)
{
  struct span h, port = {NULL, 0};
  unsigned char ip[16];
  unsigned bits;
  bool v4, whole;

  if(span_is(e, "*"))
    return true;
  if(cidr_parse(e, ip, &bits))
    return t->is_ip && in_prefix(t->ip, ip, bits);
  if(!split_host_port(e, &h, &port)) {
    h = e;
    port = (struct span){NULL, 0};
  } else if(!h.n)
    return false; /* ":80": no host, skipped */
  if(port.n && !span_eq(port, t->port))
    return false;
  if(ip_parse(h, ip, &v4))
    return t->is_ip && !memcmp(ip, t->ip, 16);
  if(!h.n || t->is_ip)
    return false;
  if(h.n >= 2 && h.p[0] == '*' && h.p[1] == '.') {
    h.p++;
    h.n--;
  }
  whole = h.p[0] != '.'; /* "foo.com": foo.com itself and names under it */
  if(whole && span_eq(t->host, h))
    return true;
  if(t->host.n < h.n + whole ||
     strncasecmp(t->host.p + t->host.n - h.n, h.p, h.n)) /* not a suffix */
    return false;
  return !whole || t->host.p[t->host.n - h.n - 1] == '.';
}

static struct span trim(struct span s)
{
  while(s.n && isspace((unsigned char)*s.p)) {
    s.p++;
    s.n--;
  }
  while(s.n && isspace((unsigned char)s.p[s.n - 1]))
    s.n--;
  return s;
}

/* Whether an entry of the comma-separated list exempts t: every entry as
 * Go's httpproxy takes them (trimmed), or (cidr_only) the CIDR entries,
 * untrimmed, as client-go's wrapper takes them. */
static bool listed(const struct target *t, const char *list, bool cidr_only)
{
  unsigned char net[16];
  unsigned bits;

  for(const char *p = list; p && *p;) {
    size_t n = strcspn(p, ",");
    struct span e = {p, n};
    if(cidr_only ? cidr_parse(e, net, &bits) && t->is_ip && in_prefix(t->ip, net, bits)
                 : (e = trim(e)).n && entry_matches(t, e))
      return true;
    p += n + (p[n] == ',');
  }
  return false;
}

/* The scheme, host and port of the server URL (Go's url.Hostname and
 * url.Port, the scheme's port when none is given). */
static void target_parse(const char *server, struct target *t)
{
  const char *a, *end, *at, *c = NULL;
  bool v4;

  memset(t, 0, sizeof(*t));
  t->https = !strncasecmp(server, "https://", 8);
  t->http = !t->https && !strncasecmp(server, "http://", 7);
  if(!t->https && !t->http)
    return;
  a = server + (t->https ? 8 : 7);
  end = a + strcspn(a, "/?#");
  for(at = a; at < end; at++) /* after any user info */
    if(*at == '@')
      a = at + 1;
  if(*a == '[' && (c = memchr(a, ']', (size_t)(end - a)))) {
    t->host = (struct span){a + 1, (size_t)(c - a - 1)};
    c = c + 1 < end && c[1] == ':' ? c + 1 : NULL;
  } else {
    for(const char *q = a; q < end; q++)
      if(*q == ':')
        c = q;
    t->host = (struct span){a, (size_t)((c ? c : end) - a)};
  }
  t->port = c && c + 1 < end ? (struct span){c + 1, (size_t)(end - c - 1)}
                             : (struct span){t->https ? "443" : "80", t->https ? 3 : 2};
  /* an IPv6 zone ("%25eth0") is no part of the address */
  c = memchr(t->host.p, '%', t->host.n);
  t->is_ip = ip_parse((struct span){t->host.p, c ? (size_t)(c - t->host.p) : t->host.n},
                      t->ip, &v4);
}

/* The proxy URL v as curl takes it (see DESIGN: 2, 3). */
static kcr_err curl_form(const char *v, char **out)
{
  struct kcr_buf b = KCR_BUF_INIT;
  const char *sep = strstr(v, "://");

  if(!sep || sep == v)
    kcr_buf_printf(&b, "http://%s", v);
  else if(sep - v == 6 && !strncasecmp(v, "socks5", 6))
    kcr_buf_printf(&b, "socks5h%s", sep);
  else
    kcr_buf_puts(&b, v);
  *out = kcr_buf_take(&b);
  return *out ? KCR_OK : KCR_ENOMEM;
}

static const char *first_set(const char *a, const char *b)
{
  return a && *a ? a : b && *b ? b : NULL;
}

kcr_err kcr__proxy_for(const char *server, const char *proxy_url,
                       const struct kcr__proxy_env *env, char **out)
{
  static const struct kcr__proxy_env none = {.https_proxy = NULL};
  struct target t;
  const char *v;

  *out = NULL;
  if(proxy_url && *proxy_url)
    return curl_form(proxy_url, out);
  if(!env)
    env = &none;
  target_parse(server, &t);
  v = t.https  ? first_set(env->https_proxy, env->https_proxy_upper)
      : t.http ? first_set(env->http_proxy, env->http_proxy_upper)
               : NULL;
  if(!v || loopback(&t) ||
     listed(&t, first_set(env->no_proxy, env->no_proxy_upper), false) ||
     listed(&t, first_set(env->no_proxy_upper, env->no_proxy), true))
    return KCR_OK;
  return curl_form(v, out);
}
