/* DESIGN: who may read /metrics (metricsauth-int.h), as controller-runtime's
 * filters.WithAuthenticationAndAuthorization decides it: the bearer token
 * is authenticated with a TokenReview (authentication.k8s.io/v1), then the
 * user it names is authorised with a SubjectAccessReview
 * (authorization.k8s.io/v1) for `get` on the non-resource URL.
 *
 * The token is parsed strictly before anything is sent: "Bearer" (any
 * case), one space, then 1..KCR__MAUTH_TOKEN_MAX visible ASCII characters
 * and nothing else; anything else is 401 at once, so a malformed header
 * costs the API server nothing. A well-formed unknown token costs one
 * TokenReview a minute, as in controller-runtime (and the HTTP server's
 * thread pool bounds the reviews in flight to its size).
 *
 * Cache: tokens are never stored, only HMAC-SHA256(random key, token), so
 * a memory dump does not yield a credential and the hash cannot be
 * precomputed. One entry per token holds the final answer (200, 401 or
 * 403) and when it expires; a fixed array of KCR__MAUTH_CACHE_MAX entries,
 * scanned linearly under mu (a scan of 1024 32-byte keys costs less than
 * the TLS record it answers). Reviews run without the lock; two requests
 * with the same new token may both review it (the later answer is kept).
 *
 * Invariants: an entry with expires_ms == 0 is free; a used one holds a
 * final answer (200, 401 or 403; never 500); mu guards the array. */
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/assert-int.h"
#include "core/secret-int.h"
#include "kcr/json.h"
#include "kcr/log.h"
#include "kcr/time.h"
#include "runtime/metricsauth-int.h"

#define KEY_LEN 32

struct entry {
  unsigned char key[KEY_LEN]; /* HMAC of the token */
  uint64_t expires_ms;        /* monotonic; 0: free */
  int code;                   /* 200, 401 or 403 */
  char *user;                 /* for the 403 message; may be NULL */
};

struct kcr__mauth {
  kcr_client *client;
  unsigned char hkey[KEY_LEN];
  pthread_mutex_t mu;
  struct entry cache[KCR__MAUTH_CACHE_MAX];
};

static const struct kcr_gvr tokenreviews = {.group = "authentication.k8s.io",
                                            .version = "v1",
                                            .resource = "tokenreviews",
                                            .namespaced = false};
static const struct kcr_gvr sars = {.group = "authorization.k8s.io",
                                    .version = "v1",
                                    .resource = "subjectaccessreviews",
                                    .namespaced = false};

kcr_err kcr__mauth_new(kcr_client *c, kcr__mauth **out)
{
  kcr__mauth *a;

  *out = NULL;
  if(!(a = calloc(1, sizeof(*a))))
    return KCR_ENOMEM;
  if(RAND_bytes(a->hkey, sizeof(a->hkey)) != 1) {
    free(a);
    return KCR_ENOMEM;
  }
  pthread_mutex_init(&a->mu, NULL);
  a->client = kcr_client_ref(c);
  *out = a;
  return KCR_OK;
}

void kcr__mauth_free(kcr__mauth *a)
{
  if(!a)
    return;
  for(size_t i = 0; i < KCR__MAUTH_CACHE_MAX; i++)
    free(a->cache[i].user);
  pthread_mutex_destroy(&a->mu);
  kcr_client_free(a->client);
  kcr__wipe_free(a, sizeof(*a));
}

/* The token of a "Bearer TOKEN" header value, or NULL when malformed. */
static const char *bearer_token(const char *auth, size_t *len)
{
  const char *t;
  size_t n = 0;

  if(!auth || strncasecmp(auth, "Bearer ", 7))
    return NULL;
  t = auth + 7;
  while(n <= KCR__MAUTH_TOKEN_MAX && t[n] > 0x20 && t[n] < 0x7f)
    n++;
  if(!n || n > KCR__MAUTH_TOKEN_MAX || t[n])
    return NULL;
  *len = n;
  return t;
}

/* The cached answer for key (copying its user into user), or 0. */
static int cache_get(kcr__mauth *a, const unsigned char *key, uint64_t now, char *user,
                     size_t n)
{
  int code = 0;

  pthread_mutex_lock(&a->mu);
  for(size_t i = 0; i < KCR__MAUTH_CACHE_MAX && !code; i++) {
    struct entry *e = &a->cache[i];
    if(e->expires_ms > now && !memcmp(e->key, key, KEY_LEN)) {
      code = e->code;
      KCR_ASSERT(code == 200 || code == 401 || code == 403);
      snprintf(user, n, "%s", e->user ? e->user : "");
    }
  }
  pthread_mutex_unlock(&a->mu);
  return code;
}

static void cache_put(kcr__mauth *a, const unsigned char *key, uint64_t now, int code,
                      const char *user)
{
  uint64_t ttl = code == 403 ? KCR__MAUTH_DENY_TTL_MS : KCR__MAUTH_AUTHN_TTL_MS;
  char *dup = user ? strdup(user) : NULL;
  struct entry *slot = NULL;

  KCR_ASSERT(code == 200 || code == 401 || code == 403); /* errors are not cached */
  pthread_mutex_lock(&a->mu);
  for(size_t i = 0; i < KCR__MAUTH_CACHE_MAX; i++) {
    struct entry *e = &a->cache[i];
    if(e->expires_ms && !memcmp(e->key, key, KEY_LEN)) { /* a racing review's */
      slot = e;
      break;
    }
    if(!slot || (slot->expires_ms > now && e->expires_ms < slot->expires_ms))
      slot = e; /* free or expired (expires_ms <= now) beats any live one */
  }
  KCR_ASSERT(slot && (slot->expires_ms || (!slot->user && !slot->code)));
  free(slot->user);
  memcpy(slot->key, key, KEY_LEN);
  slot->expires_ms = now + ttl;
  slot->code = code;
  slot->user = dup;
  pthread_mutex_unlock(&a->mu);
}

/* TokenReview: 200 with *user (the status.user object, owned) set, 401, or
 * 500 with msg set. */
static int review_token(kcr__mauth *a, const char *tok, size_t len, cJSON **user,
                        char *msg, size_t n)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  cJSON *req = cJSON_CreateObject(), *spec, *res = NULL, *st;
  char *t = strndup(tok, len);
  int code = 500;
  kcr_err rc = KCR_ENOMEM;

  *user = NULL;
  if(req && t && cJSON_AddStringToObject(req, "apiVersion", "authentication.k8s.io/v1") &&
     cJSON_AddStringToObject(req, "kind", "TokenReview") &&
     (spec = cJSON_AddObjectToObject(req, "spec")) &&
     cJSON_AddStringToObject(spec, "token", t))
    rc = kcr_create(a->client, &(struct kcr_ref){.gvr = &tokenreviews}, req, NULL, &res,
                    &ei);
  if(rc) {
    snprintf(msg, n, "Authentication failed");
    KCR_LOG(KCR_LOG_WARN, "metrics: TokenReview failed", KCR_S("error", kcr_strerror(rc)),
            KCR_S("detail", ei.message));
    goto out;
  }
  st = cJSON_GetObjectItemCaseSensitive(res, "status");
  if(!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(st, "authenticated"))) {
    code = 401;
    goto out;
  }
  *user = cJSON_DetachItemFromObjectCaseSensitive(st, "user");
  code = *user ? 200 : 401;
out:
  if(t)
    kcr__wipe_str(t);
  if(req) { /* the token is in the tree: wipe it with the tree */
    cJSON *tk = kcr_json_at(req, "spec.token");
    if(tk && tk->valuestring)
      kcr__wipe(tk->valuestring, strlen(tk->valuestring));
  }
  cJSON_Delete(req);
  cJSON_Delete(res);
  kcr_errinfo_cleanup(&ei);
  return code;
}

/* SubjectAccessReview of `get` on path for user: 200, 403 or 500. */
static int review_access(kcr__mauth *a, const cJSON *user, const char *path, char *msg,
                         size_t n)
{
  static const char *const copy[][2] = {
      {"username", "user"}, {"uid", "uid"}, {"groups", "groups"}, {"extra", "extra"}};
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  cJSON *req = cJSON_CreateObject(), *spec = NULL, *nr, *res = NULL;
  const char *name = kcr_json_member_str(user, "username");
  bool ok = req && (spec = cJSON_AddObjectToObject(req, "spec"));
  kcr_err rc = KCR_ENOMEM;
  int code = 500;

  ok = ok && cJSON_AddStringToObject(req, "apiVersion", "authorization.k8s.io/v1") &&
       cJSON_AddStringToObject(req, "kind", "SubjectAccessReview");
  for(size_t i = 0; ok && i < sizeof(copy) / sizeof(copy[0]); i++) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(user, copy[i][0]);
    cJSON *d = v ? cJSON_Duplicate(v, true) : NULL;
    if(v && !(d && cJSON_AddItemToObject(spec, copy[i][1], d))) {
      cJSON_Delete(d);
      ok = false;
    }
  }
  ok = ok && (nr = cJSON_AddObjectToObject(spec, "nonResourceAttributes")) &&
       cJSON_AddStringToObject(nr, "path", path) &&
       cJSON_AddStringToObject(nr, "verb", "get");
  if(ok)
    rc = kcr_create(a->client, &(struct kcr_ref){.gvr = &sars}, req, NULL, &res, &ei);
  if(rc) {
    snprintf(msg, n, "Authorization for user %s failed", name ? name : "");
    KCR_LOG(KCR_LOG_WARN, "metrics: SubjectAccessReview failed",
            KCR_S("user", name ? name : ""), KCR_S("error", kcr_strerror(rc)),
            KCR_S("detail", ei.message));
  } else {
    code = cJSON_IsTrue(kcr_json_at(res, "status.allowed")) ? 200 : 403;
  }
  cJSON_Delete(req);
  cJSON_Delete(res);
  kcr_errinfo_cleanup(&ei);
  return code;
}

int kcr__mauth_check(kcr__mauth *a, const char *path, const char *auth, char *msg,
                     size_t n)
{
  unsigned char key[KEY_LEN];
  unsigned int klen = KEY_LEN;
  char user[256];
  cJSON *u = NULL;
  const char *tok;
  size_t len = 0;
  uint64_t now;
  int code;

  KCR_ASSERT(a && msg && n > 0); /* msg gets at least its NUL */
  msg[0] = '\0';
  user[0] = '\0';
  if(!(tok = bearer_token(auth, &len)) ||
     !HMAC(EVP_sha256(), a->hkey, KEY_LEN, (const unsigned char *)tok, len, key, &klen)) {
    code = 401;
    goto out;
  }
  now = kcr_time_mono_ms();
  if((code = cache_get(a, key, now, user, sizeof(user))))
    goto out;
  code = review_token(a, tok, len, &u, msg, n);
  if(code == 200) {
    snprintf(user, sizeof(user), "%s",
             kcr_json_member_str(u, "username") ? kcr_json_member_str(u, "username")
                                                : "");
    code = review_access(a, u, path, msg, n);
  }
  if(code != 500)
    cache_put(a, key, kcr_time_mono_ms(), code, user[0] ? user : NULL);
out:
  if(code == 401)
    snprintf(msg, n, "Unauthorized");
  else if(code == 403)
    snprintf(msg, n, "Authorization denied for user %s", user);
  cJSON_Delete(u);
  return code;
}
