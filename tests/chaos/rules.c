/* DESIGN: chaosproxy's rules (see rules.h for the text form).
 *
 * Parsing is strict: an unknown fault or key, a value out of range, a key a
 * fault does not take, a missing required key - each is an error naming the
 * line and the word, so a typo in a test's rules never silently turns a
 * fault off. Matching is pure; drawing uses a splitmix64 generator whose
 * state the caller keeps (and locks). */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rules.h"

static const char *const verb_names[CHAOS_NVERBS] = {"GET", "LIST",  "WATCH",  "POST",
                                                     "PUT", "PATCH", "DELETE", "OTHER"};

static const char *const fault_names[] = {
    [CHAOS_NONE] = "none",         [CHAOS_DELAY] = "delay",
    [CHAOS_RESET] = "reset",       [CHAOS_STATUS] = "status",
    [CHAOS_TRUNCATE] = "truncate", [CHAOS_GARBLE] = "garble",
    [CHAOS_DRIP] = "drip",         [CHAOS_CUT] = "cut"};

const char *chaos_verb_name(enum chaos_verb v)
{
  return (unsigned)v < CHAOS_NVERBS ? verb_names[v] : "OTHER";
}

void chaos_fault_name(const struct chaos_action *a, char out[16])
{
  if(a->fault == CHAOS_STATUS)
    snprintf(out, 16, "status_%ld", a->code);
  else
    snprintf(out, 16, "%s", fault_names[a->fault]);
}

/* ---- classification ---- */

void chaos_agent(const char *ua, char out[33])
{
  size_t n = 0;
  for(; ua && *ua && *ua != '/' && *ua != ' ' && n < 32; ua++)
    if(isalnum((unsigned char)*ua) || strchr("._-", *ua))
      out[n++] = *ua;
  out[n] = '\0';
  if(!n)
    snprintf(out, 33, "unknown");
}

/* Copies path segment i (0-based, after the prefix) into out; false if absent. */
static bool segment(const char *path, size_t len, size_t i, char *out, size_t outsz)
{
  size_t at = 0;
  while(at < len) {
    while(at < len && path[at] == '/')
      at++;
    size_t end = at;
    while(end < len && path[end] != '/')
      end++;
    if(end == at)
      return false;
    if(!i--) {
      snprintf(out, outsz, "%.*s", (int)(end - at), path + at);
      return true;
    }
    at = end;
  }
  return false;
}

static bool watch_query(const char *q)
{
  while(q && *q) {
    size_t n = strcspn(q, "&");
    if((n == 7 && !strncmp(q, "watch=1", 7)) ||
       (n == 10 && !strncmp(q, "watch=true", 10)))
      return true;
    q += n + (q[n] == '&');
  }
  return false;
}

void chaos_classify(const char *method, const char *target, const char *user_agent,
                    struct chaos_req *out)
{
  const char *q = strchr(target, '?');
  size_t len = q ? (size_t)(q - target) : strlen(target);
  char seg[64], name[64] = "";
  size_t base; /* index of the first segment after /api/v1 or /apis/G/V */

  memset(out, 0, sizeof(*out));
  out->target = target;
  chaos_agent(user_agent, out->agent);
  base = segment(target, len, 0, seg, sizeof(seg)) && !strcmp(seg, "api")    ? 2
         : segment(target, len, 0, seg, sizeof(seg)) && !strcmp(seg, "apis") ? 3
                                                                             : 0;
  if(base && segment(target, len, base, seg, sizeof(seg))) {
    size_t r = base;
    if(!strcmp(seg, "namespaces") && segment(target, len, base + 2, seg, sizeof(seg)))
      r = base + 2;
    segment(target, len, r, out->resource, sizeof(out->resource));
    segment(target, len, r + 1, name, sizeof(name));
    segment(target, len, r + 2, out->sub, sizeof(out->sub));
  }
  if(!strcmp(method, "GET"))
    out->verb = !out->resource[0] || name[0]    ? CHAOS_GET
                : watch_query(q ? q + 1 : NULL) ? CHAOS_WATCH
                                                : CHAOS_LIST;
  else if(!strcmp(method, "POST"))
    out->verb = CHAOS_POST;
  else if(!strcmp(method, "PUT"))
    out->verb = CHAOS_PUT;
  else if(!strcmp(method, "PATCH"))
    out->verb = CHAOS_PATCH;
  else if(!strcmp(method, "DELETE"))
    out->verb = CHAOS_DELETE;
  else
    out->verb = CHAOS_OTHER;
}

/* ---- parsing ---- */

/* The keys a fault takes. */
enum key_bit {
  K_MS = 1,
  K_BYTES = 2,
  K_CODE = 4,
  K_RETRY = 8,
  K_AFTER_MS = 16,
  K_AFTER_BYTES = 32
};

static const unsigned fault_keys[] = {[CHAOS_DELAY] = K_MS,
                                      [CHAOS_RESET] = 0,
                                      [CHAOS_STATUS] = K_CODE | K_RETRY,
                                      [CHAOS_TRUNCATE] = K_BYTES,
                                      [CHAOS_GARBLE] = 0,
                                      [CHAOS_DRIP] = K_BYTES | K_MS,
                                      [CHAOS_CUT] = K_AFTER_MS | K_AFTER_BYTES};

static const struct {
  const char *name;
  enum key_bit bit;
  size_t off;
  long min, max;
} num_keys[] = {
    {"ms", K_MS, offsetof(struct chaos_action, ms), 1, 3600000},
    {"bytes", K_BYTES, offsetof(struct chaos_action, bytes), 1, 1L << 30},
    {"code", K_CODE, offsetof(struct chaos_action, code), 400, 599},
    {"retry-after", K_RETRY, offsetof(struct chaos_action, retry_after), 0, 3600},
    {"after-ms", K_AFTER_MS, offsetof(struct chaos_action, after_ms), 1, 3600000},
    {"after-bytes", K_AFTER_BYTES, offsetof(struct chaos_action, after_bytes), 1,
     1L << 30},
};

static bool parse_long(const char *s, long min, long max, long *out)
{
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if(errno || end == s || *end || v < min || v > max)
    return false;
  *out = v;
  return true;
}

static void rule_cleanup(struct chaos_rule *r)
{
  for(size_t i = 0; i < r->nresources; i++)
    free(r->resources[i]);
  free(r->resources);
  free(r->agent);
  if(r->has_path)
    regfree(&r->path);
}

void chaos_rules_free(struct chaos_rules *rs)
{
  if(!rs)
    return;
  for(size_t i = 0; i < rs->n; i++)
    rule_cleanup(&rs->r[i]);
  free(rs->r);
  free(rs);
}

static kcr_err parse_verbs(struct chaos_rule *r, const char *v, int line,
                           struct kcr_errinfo *ei)
{
  while(*v) {
    size_t n = strcspn(v, ","), i;
    for(i = 0; i < CHAOS_OTHER; i++)
      if(strlen(verb_names[i]) == n && !strncmp(v, verb_names[i], n))
        break;
    if(i == CHAOS_OTHER)
      return kcr_errinfo_set(ei, KCR_EINVAL,
                             "line %d: verb \"%.*s\": want GET, LIST, WATCH, POST, PUT, "
                             "PATCH or DELETE",
                             line, (int)n, v);
    r->verbs |= 1u << i;
    v += n + (v[n] == ',');
  }
  return KCR_OK;
}

static kcr_err parse_resources(struct chaos_rule *r, const char *v)
{
  while(*v) {
    size_t n = strcspn(v, ",");
    char **nr = realloc(r->resources, (r->nresources + 1) * sizeof(*nr));
    if(!nr)
      return KCR_ENOMEM;
    r->resources = nr;
    if(!(r->resources[r->nresources] = strndup(v, n)))
      return KCR_ENOMEM;
    r->nresources++;
    v += n + (v[n] == ',');
  }
  return KCR_OK;
}

/* One key=value word of a rule. */
static kcr_err parse_word(struct chaos_rule *r, char *w, int line, unsigned *seen,
                          struct kcr_errinfo *ei)
{
  char *v = strchr(w, '=');
  if(!v || v == w || !v[1])
    return kcr_errinfo_set(ei, KCR_EINVAL, "line %d: \"%s\": want key=value", line, w);
  *v++ = '\0';
  if(!strcmp(w, "verb"))
    return parse_verbs(r, v, line, ei);
  if(!strcmp(w, "resource"))
    return parse_resources(r, v);
  if(!strcmp(w, "agent"))
    return (r->agent = strdup(v)) ? KCR_OK : KCR_ENOMEM;
  if(!strcmp(w, "rate")) {
    char *end;
    errno = 0;
    r->rate = strtod(v, &end);
    if(errno || end == v || *end || !(r->rate >= 0 && r->rate <= 1))
      return kcr_errinfo_set(ei, KCR_EINVAL,
                             "line %d: rate \"%s\": want a number in [0, 1]", line, v);
    return KCR_OK;
  }
  if(!strcmp(w, "max")) {
    if(!parse_long(v, 1, 1L << 40, &r->max))
      return kcr_errinfo_set(ei, KCR_EINVAL, "line %d: max \"%s\": want a number >= 1",
                             line, v);
    return KCR_OK;
  }
  if(!strcmp(w, "path")) {
    int e = regcomp(&r->path, v, REG_EXTENDED | REG_NOSUB);
    if(e) {
      char msg[128];
      regerror(e, &r->path, msg, sizeof(msg));
      return kcr_errinfo_set(ei, KCR_EINVAL, "line %d: path \"%s\": %s", line, v, msg);
    }
    r->has_path = true;
    return KCR_OK;
  }
  for(size_t i = 0; i < sizeof(num_keys) / sizeof(num_keys[0]); i++) {
    if(strcmp(w, num_keys[i].name))
      continue;
    if(!(fault_keys[r->a.fault] & num_keys[i].bit))
      return kcr_errinfo_set(ei, KCR_EINVAL, "line %d: a %s rule takes no %s", line,
                             fault_names[r->a.fault], w);
    if(!parse_long(v, num_keys[i].min, num_keys[i].max,
                   (long *)((char *)&r->a + num_keys[i].off)))
      return kcr_errinfo_set(ei, KCR_EINVAL,
                             "line %d: %s \"%s\": want a number from %ld to %ld", line, w,
                             v, num_keys[i].min, num_keys[i].max);
    *seen |= num_keys[i].bit;
    return KCR_OK;
  }
  return kcr_errinfo_set(ei, KCR_EINVAL,
                         "line %d: unknown key \"%s\" (want verb, resource, path, agent, "
                         "rate, max, or the fault's own: see tests/chaos/rules.h)",
                         line, w);
}

/* Required keys and defaults, once the whole rule is read. */
static kcr_err finish_rule(struct chaos_rule *r, unsigned seen, int line,
                           struct kcr_errinfo *ei)
{
  struct chaos_action *a = &r->a;
  switch(a->fault) {
  case CHAOS_DELAY:
    if(!(seen & K_MS))
      return kcr_errinfo_set(ei, KCR_EINVAL, "line %d: a delay rule needs ms=N", line);
    break;
  case CHAOS_STATUS:
    if(!(seen & K_CODE))
      return kcr_errinfo_set(ei, KCR_EINVAL, "line %d: a status rule needs code=N", line);
    if(!(seen & K_RETRY))
      a->retry_after = a->code == 429 ? 1 : -1;
    break;
  case CHAOS_DRIP:
    if(!a->bytes)
      a->bytes = 16;
    if(!a->ms)
      a->ms = 50;
    break;
  case CHAOS_CUT:
    if(!(seen & (K_AFTER_MS | K_AFTER_BYTES)))
      return kcr_errinfo_set(
          ei, KCR_EINVAL, "line %d: a cut rule needs after-ms=N or after-bytes=N", line);
    if(r->verbs & ~(1u << CHAOS_WATCH))
      return kcr_errinfo_set(ei, KCR_EINVAL, "line %d: a cut rule applies to WATCH only",
                             line);
    r->verbs = 1u << CHAOS_WATCH;
    break;
  default: break;
  }
  return KCR_OK;
}

static kcr_err parse_line(struct chaos_rules *rs, char *s, int line,
                          struct kcr_errinfo *ei)
{
  struct chaos_rule *r, *nr;
  char *save = NULL, *w = strtok_r(s, " \t\r", &save);
  unsigned seen = 0;
  size_t f;
  kcr_err rc;

  if(!w || *w == '#')
    return KCR_OK;
  for(f = CHAOS_DELAY; f <= CHAOS_CUT; f++)
    if(!strcmp(w, fault_names[f]))
      break;
  if(f > CHAOS_CUT)
    return kcr_errinfo_set(ei, KCR_EINVAL,
                           "line %d: unknown fault \"%s\" (want delay, reset, status, "
                           "truncate, garble, drip or cut)",
                           line, w);
  if(!(nr = realloc(rs->r, (rs->n + 1) * sizeof(*nr))))
    return KCR_ENOMEM;
  rs->r = nr;
  r = &rs->r[rs->n++];
  memset(r, 0, sizeof(*r));
  r->a.fault = (enum chaos_fault)f;
  r->a.line = line;
  r->rate = 1;
  while((w = strtok_r(NULL, " \t\r", &save)))
    if((rc = parse_word(r, w, line, &seen, ei)))
      return rc;
  return finish_rule(r, seen, line, ei);
}

kcr_err chaos_rules_parse(const char *text, struct chaos_rules **out,
                          struct kcr_errinfo *ei)
{
  struct chaos_rules *rs = calloc(1, sizeof(*rs));
  char *copy = strdup(text ? text : ""), *p;
  int line = 1;
  kcr_err rc = KCR_OK;

  *out = NULL;
  if(!rs || !copy) {
    rc = KCR_ENOMEM;
    goto out;
  }
  /* Line by line, keeping empty lines for the count (no strtok here). */
  for(p = copy; p && !rc; line++) {
    char *nl = strchr(p, '\n');
    if(nl)
      *nl = '\0';
    rc = parse_line(rs, p, line, ei);
    p = nl ? nl + 1 : NULL;
  }
out:
  free(copy);
  if(rc)
    chaos_rules_free(rs);
  else
    *out = rs;
  return rc;
}

/* ---- matching and drawing ---- */

static bool matches(const struct chaos_rule *r, const struct chaos_req *rq)
{
  if(r->verbs && !(r->verbs & (1u << rq->verb)))
    return false;
  if(r->agent && strcmp(r->agent, rq->agent))
    return false;
  if(r->nresources) {
    size_t i;
    for(i = 0; i < r->nresources; i++) {
      const char *want = r->resources[i], *slash = strchr(want, '/');
      if(slash ? (strlen(rq->resource) == (size_t)(slash - want) &&
                  !strncmp(want, rq->resource, (size_t)(slash - want)) &&
                  !strcmp(slash + 1, rq->sub))
               : !strcmp(want, rq->resource))
        break;
    }
    if(i == r->nresources)
      return false;
  }
  return !r->has_path || !regexec(&r->path, rq->target, 0, NULL, 0);
}

/* splitmix64: a uniform double in [0, 1). */
static double draw(uint64_t *state)
{
  uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return (double)(z >> 11) / 9007199254740992.0;
}

bool chaos_rules_pick(struct chaos_rules *rs, const struct chaos_req *rq, uint64_t *rng,
                      struct chaos_action *out)
{
  memset(out, 0, sizeof(*out));
  for(size_t i = 0; rs && i < rs->n; i++) {
    struct chaos_rule *r = &rs->r[i];
    if(!matches(r, rq) || (r->max && r->hits >= r->max))
      continue;
    if(draw(rng) < r->rate) {
      r->hits++;
      *out = r->a;
      return true;
    }
  }
  return false;
}
