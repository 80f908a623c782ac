/* DESIGN: the I/O-free request path builder. Every REST call goes through
 * kcr_path(), so the path rules (core vs named group, namespaced vs cluster,
 * subresources, segment validity) live in one place with their own tests.
 *
 * Segments are copied into the path as they are, never percent-encoded, so
 * each one is checked against what the apiserver accepts for it, and what a
 * URL path segment can carry literally: a '?' or '#' would start a query or
 * a fragment, a space or a control character would break the request line.
 *  - namespaces: RFC 1123 labels (apimachinery ValidateNamespaceName);
 *  - versions, resources (CRD plurals) and subresources: RFC 1123 labels;
 *  - groups: RFC 1123 subdomains;
 *  - object names: IsValidPathSegmentName (not "." or "..", no '/' or '%'),
 *    and only RFC 3986 pchar characters that stand for themselves (letters,
 *    digits and -._~!$&'()*+,;=:@). DNS subdomain names (most kinds) and the
 *    ':' of RBAC names like "system:controller:x" pass; the odd name some
 *    kinds would accept with a space or non-ASCII text is refused.
 *
 * kcr_rv_compare is apimachinery's resourceversion.CompareResourceVersion
 * (Kubernetes 1.35, KEP-5504): pure too, on strings only, so versions
 * longer than any integer type compare. */
#include <stdio.h>
#include <string.h>

#include "kcr/path.h"

static bool lower_alnum(char c)
{
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

/* [a-z0-9]([-a-z0-9]*[a-z0-9])? of n bytes, at most 63. */
static bool dns_label(const char *s, size_t n)
{
  if(!n || n > 63 || !lower_alnum(s[0]) || !lower_alnum(s[n - 1]))
    return false;
  for(size_t i = 1; i + 1 < n; i++)
    if(!lower_alnum(s[i]) && s[i] != '-')
      return false;
  return true;
}

bool kcr_is_dns_label(const char *s) { return s && dns_label(s, strlen(s)); }

static bool label(const char *s) { return kcr_is_dns_label(s); }

/* Labels joined by '.', at most 253 bytes. */
bool kcr_is_dns_subdomain(const char *s)
{
  size_t n = s ? strlen(s) : 0;

  if(!n || n > 253)
    return false;
  for(const char *p = s;;) {
    size_t k = strcspn(p, ".");
    if(!dns_label(p, k))
      return false;
    if(!p[k])
      return true;
    p += k + 1;
  }
}

/* RFC 3986 pchar without pct-encoded. */
static bool literal_pchar(char c)
{
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         (c && strchr("-._~!$&'()*+,;=:@", c));
}

static bool object_name(const char *s)
{
  if(!s || !*s || !strcmp(s, ".") || !strcmp(s, ".."))
    return false;
  for(; *s; s++)
    if(!literal_pchar(*s))
      return false;
  return true;
}

/* Appends sep and s (both checked already). */
static struct kcr_buf *segment(struct kcr_buf *out, const char *sep, const char *s)
{
  kcr_buf_puts(out, sep);
  kcr_buf_puts(out, s);
  return out;
}

kcr_err kcr_path(struct kcr_buf *out, const struct kcr_ref *ref)
{
  const struct kcr_gvr *g = ref ? ref->gvr : NULL;

  if(!g || !label(g->version) || !label(g->resource))
    return KCR_EINVAL;
  if(ref->name && !object_name(ref->name))
    return KCR_EINVAL;
  if(ref->ns && (!label(ref->ns) || !g->namespaced))
    return KCR_EINVAL;
  if(ref->sub && (!ref->name || !label(ref->sub)))
    return KCR_EINVAL;
  if(g->namespaced && ref->name && !ref->ns)
    return KCR_EINVAL;
  if(g->group && *g->group && !kcr_is_dns_subdomain(g->group))
    return KCR_EINVAL;
  /* Appends, not kcr_buf_printf: a path is built for every request. Room
   * for the usual path and query at once, not grown step by step. */
  kcr_buf_reserve(out, 192);
  if(g->group && *g->group)
    segment(segment(out, "/apis/", g->group), "/", g->version);
  else
    segment(out, "/api/", g->version);
  if(ref->ns)
    segment(out, "/namespaces/", ref->ns);
  segment(out, "/", g->resource);
  if(ref->name)
    segment(out, "/", ref->name);
  if(ref->sub)
    segment(out, "/", ref->sub);
  return kcr_buf_err(out);
}

kcr_err kcr_query_add(struct kcr_buf *out, const char *key, const char *value)
{
  if(!value || !*value)
    return kcr_buf_err(out);
  kcr_buf_puts(out, out->ptr && strchr(out->ptr, '?') ? "&" : "?");
  kcr_buf_urlenc(out, key);
  kcr_buf_puts(out, "=");
  kcr_buf_urlenc(out, value);
  return kcr_buf_err(out);
}

kcr_err kcr_query_add_int(struct kcr_buf *out, const char *key, long long value)
{
  char num[24];
  snprintf(num, sizeof(num), "%lld", value);
  return kcr_query_add(out, key, num);
}

/* apimachinery resourceversion.isWellFormed: digits, no leading zero. */
static bool rv_well_formed(const char *s)
{
  if(!s || *s < '1' || *s > '9')
    return false;
  for(; *s; s++)
    if(*s < '0' || *s > '9')
      return false;
  return true;
}

kcr_err kcr_rv_compare(const char *a, const char *b, int *cmp)
{
  size_t la, lb;
  int c;

  *cmp = 0;
  if(!rv_well_formed(a) || !rv_well_formed(b))
    return KCR_EINVAL;
  la = strlen(a);
  lb = strlen(b);
  c = la != lb ? (la < lb ? -1 : 1) : strcmp(a, b);
  *cmp = (c > 0) - (c < 0);
  return KCR_OK;
}
