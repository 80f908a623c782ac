/* DESIGN: who may read /metrics (metricsauth-int.h), as controller-runtime's
 * filters.WithAuthenticationAndAuthorization decides it: the bearer token
 * is authenticated with a TokenReview (authentication.k8s.io/v1), then the
 * user it names is authorised with a SubjectAccessReview
 * (authorization.k8s.io/v1) for the request's verb on its non-resource URL.
 *
 * The token is parsed strictly before anything is sent: "Bearer" (any
 * case), one space, then 1..KCR__MAUTH_TOKEN_MAX visible ASCII characters
 * and nothing else; anything else is 401 at once, so a malformed header
 * costs the API server nothing. A well-formed unknown token costs one
 * TokenReview a minute, as in controller-runtime (and the HTTP server's
 * thread pool bounds the reviews in flight to its size).
 *
 * Cache: tokens are never stored. A request is known by its key,
 * HMAC-SHA256(random key, verb NUL path NUL token), computed as the bytes
 * stream in (no copy of the token), so a memory dump does not yield a
 * credential, the key cannot be precomputed, and an answer for one verb
 * and path says nothing about another. Two fixed arrays of
 * KCR__MAUTH_CACHE_MAX entries, scanned linearly under mu (a scan of 1024
 * 32-byte keys costs less than the TLS record it answers): `allowed` holds
 * 200s, `denied` 401s and 403s. They are apart - as the API server's
 * caches keep allowed and denied answers with TTLs of their own - so that
 * what anyone can produce at will (an unknown token, a 401) only ever
 * evicts other denials: a flood of made-up tokens leaves the answers of
 * authorised callers in place. An entry of `allowed` can only be made by
 * a token the API server authenticated and authorised. When an array is
 * full, an expired entry, else the one that expires first, makes room.
 * Reviews run without the lock; two requests with the same new key may
 * both review it (the later answer is kept, in whichever array, and the
 * other array's entry for the key dropped).
 *
 * Invariants: an entry with expires_ms == 0 is free; a used one of
 * `allowed` holds 200, of `denied` 401 or 403 (never 500); a key is live
 * in at most one array; mu guards both arrays. */
#include <openssl/core_names.h>
#include <openssl/evp.h>
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
  unsigned char key[KEY_LEN]; /* HMAC of verb, path and token */
  uint64_t expires_ms;        /* monotonic; 0: free */
  int code;                   /* 200 (allowed), 401 or 403 (denied) */
  char *user;                 /* for the 403 message; may be NULL */
};

struct kcr__mauth {
  kcr_client *client;
  EVP_MAC *hmac;
  unsigned char hkey[KEY_LEN];
  pthread_mutex_t mu;
  struct entry allowed[KCR__MAUTH_CACHE_MAX]; /* 200s */
  struct entry denied[KCR__MAUTH_CACHE_MAX];  /* 401s and 403s */
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
  if(RAND_bytes(a->hkey, sizeof(a->hkey)) != 1 ||
     !(a->hmac = EVP_MAC_fetch(NULL, OSSL_MAC_NAME_HMAC, NULL))) {
    kcr__wipe_free(a, sizeof(*a));
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
  for(size_t i = 0; i < KCR__MAUTH_CACHE_MAX; i++) {
    free(a->allowed[i].user);
    free(a->denied[i].user);
  }
  EVP_MAC_free(a->hmac);
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

/* key = HMAC-SHA256(hkey, verb NUL path NUL token). Returns false if
 * OpenSSL fails (out of memory). */
static bool request_key(kcr__mauth *a, const char *verb, const char *path,
                        const char *tok, size_t len, unsigned char key[KEY_LEN])
{
  OSSL_PARAM params[] = {
      OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, (char *)"SHA256", 0),
      OSSL_PARAM_construct_end()};
  EVP_MAC_CTX *ctx = EVP_MAC_CTX_new(a->hmac);
  size_t klen = 0;
  bool ok = ctx && EVP_MAC_init(ctx, a->hkey, KEY_LEN, params) &&
            EVP_MAC_update(ctx, (const unsigned char *)verb, strlen(verb) + 1) &&
            EVP_MAC_update(ctx, (const unsigned char *)path, strlen(path) + 1) &&
            EVP_MAC_update(ctx, (const unsigned char *)tok, len) &&
            EVP_MAC_final(ctx, key, &klen, KEY_LEN) && klen == KEY_LEN;

  EVP_MAC_CTX_free(ctx); /* wipes what it held of the token */
  return ok;
}

/* The live entry for key in c, or NULL. Called with mu held. */
static struct entry *find(struct entry *c, const unsigned char *key, uint64_t now)
{
  for(size_t i = 0; i < KCR__MAUTH_CACHE_MAX; i++)
    if(c[i].expires_ms > now && !memcmp(c[i].key, key, KEY_LEN))
      return &c[i];
  return NULL;
}

/* The cached answer for key (copying its user into user), or 0. */
static int cache_get(kcr__mauth *a, const unsigned char *key, uint64_t now, char *user,
                     size_t n)
{
  struct entry *e;
  int code = 0;

  pthread_mutex_lock(&a->mu);
  if((e = find(a->allowed, key, now)))
    KCR_ASSERT(e->code == 200);
  else if((e = find(a->denied, key, now)))
    KCR_ASSERT(e->code == 401 || e->code == 403);
  if(e) {
    code = e->code;
    snprintf(user, n, "%s", e->user ? e->user : "");
  }
  pthread_mutex_unlock(&a->mu);
  return code;
}

/* The entry of c to hold key: its own (a racing review's), else a free or
 * expired one, else the one that expires first. Called with mu held. */
static struct entry *slot_for(struct entry *c, const unsigned char *key, uint64_t now)
{
  struct entry *slot = NULL;

  for(size_t i = 0; i < KCR__MAUTH_CACHE_MAX; i++) {
    struct entry *e = &c[i];
    if(e->expires_ms && !memcmp(e->key, key, KEY_LEN))
      return e;
    if(!slot || (slot->expires_ms > now && e->expires_ms < slot->expires_ms))
      slot = e; /* free or expired (expires_ms <= now) beats any live one */
  }
  return slot;
}

static void cache_put(kcr__mauth *a, const unsigned char *key, uint64_t now, int code,
                      const char *user)
{
  uint64_t ttl = code == 403 ? KCR__MAUTH_DENY_TTL_MS : KCR__MAUTH_AUTHN_TTL_MS;
  struct entry *c = code == 200 ? a->allowed : a->denied;
  struct entry *other = code == 200 ? a->denied : a->allowed, *slot, *stale;
  char *dup = user ? strdup(user) : NULL;

  KCR_ASSERT(code == 200 || code == 401 || code == 403); /* errors are not cached */
  pthread_mutex_lock(&a->mu);
  if((stale = find(other, key, now))) /* the later answer replaces it */
    stale->expires_ms = now;
  slot = slot_for(c, key, now);
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
    cJSON *tk = kcr_json_at(req, "/spec/token");
    if(tk && tk->valuestring)
      kcr__wipe(tk->valuestring, strlen(tk->valuestring));
  }
  cJSON_Delete(req);
  cJSON_Delete(res);
  kcr_errinfo_cleanup(&ei);
  return code;
}

/* SubjectAccessReview of verb on path for user: 200, 403 or 500. */
static int review_access(kcr__mauth *a, const cJSON *user, const char *verb,
                         const char *path, char *msg, size_t n)
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
       cJSON_AddStringToObject(nr, "verb", verb);
  if(ok)
    rc = kcr_create(a->client, &(struct kcr_ref){.gvr = &sars}, req, NULL, &res, &ei);
  if(rc) {
    snprintf(msg, n, "Authorization for user %s failed", name ? name : "");
    KCR_LOG(KCR_LOG_WARN, "metrics: SubjectAccessReview failed",
            KCR_S("user", name ? name : ""), KCR_S("error", kcr_strerror(rc)),
            KCR_S("detail", ei.message));
  } else {
    code = cJSON_IsTrue(kcr_json_at(res, "/status/allowed")) ? 200 : 403;
  }
  cJSON_Delete(req);
  cJSON_Delete(res);
  kcr_errinfo_cleanup(&ei);
  return code;
}

int kcr__mauth_check(kcr__mauth *a, const char *verb, const char *path, const char *auth,
                     char *msg, size_t n)
{
  unsigned char key[KEY_LEN];
  char user[256];
  cJSON *u = NULL;
  const char *tok;
  size_t len = 0;
  uint64_t now;
  int code;

  KCR_ASSERT(a && verb && path && msg && n > 0); /* msg gets at least its NUL */
  msg[0] = '\0';
  user[0] = '\0';
  if(!(tok = bearer_token(auth, &len))) {
    code = 401;
    goto out;
  }
  if(!request_key(a, verb, path, tok, len, key)) {
    code = 500;
    snprintf(msg, n, "Authentication failed");
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
    code = review_access(a, u, verb, path, msg, n);
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
