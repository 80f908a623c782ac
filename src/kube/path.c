/* DESIGN: the I/O-free request path builder. Every REST call goes through
 * kcr_path(), so the path rules (core vs named group, namespaced vs cluster,
 * subresources, segment validity) live in one place with their own tests. */
#include <stdio.h>
#include <string.h>

#include "kcr/path.h"

static bool valid_segment(const char *s)
{
  return s && *s && strcmp(s, ".") && strcmp(s, "..") && !strchr(s, '/') &&
         !strchr(s, '%');
}

kcr_err kcr_path(struct kcr_buf *out, const struct kcr_ref *ref)
{
  const struct kcr_gvr *g = ref ? ref->gvr : NULL;
  kcr_err rc;

  if(!g || !valid_segment(g->version) || !valid_segment(g->resource))
    return KCR_EINVAL;
  if(ref->name && !valid_segment(ref->name))
    return KCR_EINVAL;
  if(ref->ns && (!valid_segment(ref->ns) || !g->namespaced))
    return KCR_EINVAL;
  if(ref->sub && (!ref->name || !valid_segment(ref->sub)))
    return KCR_EINVAL;
  if(g->namespaced && ref->name && !ref->ns)
    return KCR_EINVAL;
  if(g->group && *g->group) {
    if(!valid_segment(g->group))
      return KCR_EINVAL;
    rc = kcr_buf_printf(out, "/apis/%s/%s", g->group, g->version);
  } else {
    rc = kcr_buf_printf(out, "/api/%s", g->version);
  }
  if(!rc && ref->ns)
    rc = kcr_buf_printf(out, "/namespaces/%s", ref->ns);
  if(!rc)
    rc = kcr_buf_printf(out, "/%s", g->resource);
  if(!rc && ref->name)
    rc = kcr_buf_printf(out, "/%s", ref->name);
  if(!rc && ref->sub)
    rc = kcr_buf_printf(out, "/%s", ref->sub);
  return rc;
}

kcr_err kcr_query_add(struct kcr_buf *out, const char *key, const char *value)
{
  kcr_err rc;
  if(!value || !*value)
    return KCR_OK;
  rc = kcr_buf_puts(out, out->ptr && strchr(out->ptr, '?') ? "&" : "?");
  if(!rc)
    rc = kcr_buf_urlenc(out, key);
  if(!rc)
    rc = kcr_buf_puts(out, "=");
  if(!rc)
    rc = kcr_buf_urlenc(out, value);
  return rc;
}

kcr_err kcr_query_add_int(struct kcr_buf *out, const char *key, long long value)
{
  char num[24];
  snprintf(num, sizeof(num), "%lld", value);
  return kcr_query_add(out, key, num);
}
