/* DESIGN: webhook serving certificates kept in a Secret (kcr/certs.h).
 *
 * State lives in the Secret alone, so any replica - or a restarted one -
 * picks up where the last leader left off: the PEM texts of the signing CA,
 * the next CA during a rotation, the serving certificate, the trusted
 * bundle, and the times of the rotation's two waits as annotations. A round
 * (kcr_certs_sync) reads it, decides (plan(): a pure function of the state,
 * the options and the time, unit-tested without a cluster), writes it back
 * when the plan changed something and this replica leads (a PUT of the
 * object read, so its resourceVersion makes a concurrent write a conflict
 * that the next round resolves by reading again), serves the serving
 * certificate, and when leading writes the bundle into every caBundle
 * named.
 *
 * Why the leader alone writes: two replicas renewing at once would each
 * make a certificate, one write would win and the other replica would have
 * served a certificate nobody keeps. Creation is the exception - at start
 * no replica leads yet and the webhook server must serve before the
 * informers start (a conversion webhook is needed to list stored objects):
 * every replica that finds no Secret makes one, the create decides, and
 * the losers read the winner's.
 *
 * Times come from the wall clock (certificates carry wall-clock validity;
 * the annotations are read by other replicas). Waits are measured from the
 * recorded times, so a replica restarted mid-rotation resumes it. */
#include <openssl/evp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/err-int.h"
#include "core/secret-int.h"
#include "kcr/base64.h"
#include "kcr/certs.h"
#include "kcr/json.h"
#include "kcr/log.h"
#include "kcr/time.h"
#include "runtime/certs-int.h"
#include "runtime/tlscert-int.h"

#define ANN_BUNDLED  "certs.kcr.io/ca-next-bundled"
#define ANN_PROMOTED "certs.kcr.io/ca-promoted"

static const struct kcr_gvr secrets = {
    .group = "", .version = "v1", .resource = "secrets", .namespaced = true};
static const struct kcr_gvr vwcs = {.group = "admissionregistration.k8s.io",
                                    .version = "v1",
                                    .resource = "validatingwebhookconfigurations"};
static const struct kcr_gvr mwcs = {.group = "admissionregistration.k8s.io",
                                    .version = "v1",
                                    .resource = "mutatingwebhookconfigurations"};
static const struct kcr_gvr crds = {.group = "apiextensions.k8s.io",
                                    .version = "v1",
                                    .resource = "customresourcedefinitions"};

struct kcr_certs {
  struct kcr__certs_cfg cfg;
  kcr_client *client;
  char *ns, *secret;
  char **lists[5]; /* dns, ips, validating, mutating, crds (owned copies) */
  kcr_httpd *server;
  bool (*leading)(void *ud);
  void *leading_ud;
  uint64_t poll_ms;
  pthread_mutex_t round_mu; /* a round at a time; served, bundle */
  char *served;             /* the serving certificate handed to the server */
  char *bundle;             /* ca.crt as last read */
  pthread_mutex_t wake_mu;
  pthread_cond_t wake;
  bool stop, running;
  pthread_t th;
};

/* ---- the state and its plan ----------------------------------------------- */

void kcr__certs_state_free(struct kcr__certs_state *st)
{
  char **fields[] = {&st->bundle, &st->ca, &st->next, &st->tls};
  char **keys[] = {&st->ca_key, &st->next_key, &st->tls_key};

  for(size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
    free(*fields[i]);
    *fields[i] = NULL;
  }
  for(size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
    kcr__wipe_str(*keys[i]);
    *keys[i] = NULL;
  }
  st->bundled = st->promoted = 0;
}

static void set_str(char **dst, char *v)
{
  free(*dst);
  *dst = v;
}

static void set_key(char **dst, char *v)
{
  kcr__wipe_str(*dst);
  *dst = v;
}

/* cert and key, PEM, form a pair that is valid at now. */
static bool usable(const char *cert, const char *key, time_t now, time_t *nb, time_t *na)
{
  return cert && key && !kcr__tlscert_times(cert, nb, na) && now >= *nb && now < *na &&
         !kcr__tlscert_check(cert, key, "", "", NULL);
}

static kcr_err new_ca(const struct kcr__certs_cfg *cfg, char **cert, char **key,
                      struct kcr_errinfo *ei)
{
  char cn[128];
  snprintf(cn, sizeof(cn), "%.100s-ca", cfg->name);
  struct kcr__certspec s = {.cn = cn, .ca = true, .lifetime_s = cfg->ca_lifetime_s};
  return kcr__tlscert_make(&s, NULL, NULL, cert, key, ei);
}

static char *concat(const char *a, const char *b)
{
  size_t na = strlen(a), nb = b ? strlen(b) : 0;
  char *s = malloc(na + nb + 1);

  if(s) {
    memcpy(s, a, na);
    memcpy(s + na, b ? b : "", nb + 1);
  }
  return s;
}

kcr_err kcr__certs_plan(const struct kcr__certs_cfg *cfg, struct kcr__certs_state *st,
                        time_t now, unsigned *changed, struct kcr_errinfo *ei)
{
  time_t nb, na;
  char *cert = NULL, *key = NULL, *b;
  kcr_err rc;

  *changed = 0;
  /* No signing CA to trust (none yet, expired, damaged): start over. */
  if(!usable(st->ca, st->ca_key, now, &nb, &na)) {
    if((rc = new_ca(cfg, &cert, &key, ei)))
      return rc;
    kcr__certs_state_free(st);
    st->ca = cert;
    st->ca_key = key;
    *changed |= KCR__CERTS_NEW_CA | KCR__CERTS_REPAIR;
  }
  kcr__tlscert_times(st->ca, &nb, &na);
  if(st->next && !usable(st->next, st->next_key, now, &nb, &na)) {
    set_str(&st->next, NULL); /* a damaged next CA: the rotation starts again */
    set_key(&st->next_key, NULL);
    st->bundled = 0;
    *changed |= KCR__CERTS_ROTATING;
  }
  kcr__tlscert_times(st->ca, &nb, &na);
  if(st->next) {
    if(st->bundled && now >= st->bundled + cfg->grace_s) { /* step 3: promote */
      set_str(&st->ca, st->next);
      set_key(&st->ca_key, st->next_key);
      st->next = st->next_key = NULL;
      st->bundled = 0;
      st->promoted = now;
      set_str(&st->tls, NULL); /* a serving certificate of the new CA, below */
      *changed |= KCR__CERTS_PROMOTED;
    }
  } else if(st->promoted) {
    if(now >= st->promoted + cfg->grace_s) { /* step 4: the old CA goes */
      if(!(b = concat(st->ca, NULL)))
        return KCR_ENOMEM;
      set_str(&st->bundle, b);
      st->promoted = 0;
      *changed |= KCR__CERTS_OLD_CA_GONE;
    }
  } else if(now >= na - cfg->ca_lifetime_s / 3) { /* step 1: a new CA */
    if((rc = new_ca(cfg, &cert, &key, ei)))
      return rc;
    st->next = cert;
    st->next_key = key;
    st->bundled = 0;
    if(!(b = concat(st->ca, st->next)))
      return KCR_ENOMEM;
    set_str(&st->bundle, b);
    *changed |= KCR__CERTS_ROTATING;
  }
  /* The bundle holds the signing CA and the next one (a damaged or absent
   * bundle is made again from them). */
  if(!st->bundle || !strstr(st->bundle, st->ca) ||
     (st->next && !strstr(st->bundle, st->next))) {
    if(!(b = concat(st->ca, st->next)))
      return KCR_ENOMEM;
    set_str(&st->bundle, b);
    *changed |= KCR__CERTS_BUNDLE | KCR__CERTS_REPAIR;
  }
  /* The serving certificate: issued by the signing CA, with the names
   * asked for, and a third of its lifetime left. */
  bool broken = !usable(st->tls, st->tls_key, now, &nb, &na) ||
                !kcr__tlscert_issued_by(st->tls, st->ca);
  if(broken ||
     !kcr__tlscert_has_names(st->tls, (const char *const *)cfg->dns,
                             (const char *const *)cfg->ips) ||
     now >= na - cfg->cert_lifetime_s / 3) {
    struct kcr__certspec s = {.cn = cfg->dns && cfg->dns[0] ? cfg->dns[0] : cfg->ips[0],
                              .dns = (const char *const *)cfg->dns,
                              .ips = (const char *const *)cfg->ips,
                              .lifetime_s = cfg->cert_lifetime_s};
    if((rc = kcr__tlscert_make(&s, st->ca, st->ca_key, &cert, &key, ei)))
      return rc;
    set_str(&st->tls, cert);
    set_key(&st->tls_key, key);
    *changed |= KCR__CERTS_NEW_CERT | (broken ? KCR__CERTS_REPAIR : 0);
  }
  return KCR_OK;
}

/* ---- the Secret ------------------------------------------------------------ */

/* data[name] of a Secret tree, decoded, NUL-terminated; NULL when absent
 * or not base64 text without NUL bytes. */
static char *data_of(const cJSON *secret, const char *name)
{
  const cJSON *d = cJSON_GetObjectItemCaseSensitive(
      cJSON_GetObjectItemCaseSensitive(secret, "data"), name);
  unsigned char *out;
  size_t n;

  if(!cJSON_IsString(d) ||
     kcr_base64_decode(d->valuestring, strlen(d->valuestring), &out, &n))
    return NULL;
  if(memchr(out, '\0', n)) {
    kcr__wipe_free(out, n);
    return NULL;
  }
  return (char *)out;
}

static time_t annotation_time(const cJSON *secret, const char *key)
{
  const cJSON *ann = kcr_json_at(secret, "/metadata/annotations");
  const char *v = kcr_json_member_str(ann, key);
  time_t t;

  return v && !kcr_time_parse(v, &t) ? t : 0;
}

static void read_state(const cJSON *secret, struct kcr__certs_state *st)
{
  st->bundle = data_of(secret, "ca.crt");
  st->ca = data_of(secret, "ca-signing.crt");
  st->ca_key = data_of(secret, "ca-signing.key");
  st->next = data_of(secret, "ca-next.crt");
  st->next_key = data_of(secret, "ca-next.key");
  st->tls = data_of(secret, "tls.crt");
  st->tls_key = data_of(secret, "tls.key");
  st->bundled = annotation_time(secret, ANN_BUNDLED);
  st->promoted = annotation_time(secret, ANN_PROMOTED);
}

static kcr_err put_data(cJSON *data, const char *name, const char *v)
{
  size_t n;
  char *b64;

  cJSON_DeleteItemFromObjectCaseSensitive(data, name);
  if(!v)
    return KCR_OK;
  n = strlen(v);
  if(!(b64 = malloc(4 * ((n + 2) / 3) + 1)))
    return KCR_ENOMEM;
  EVP_EncodeBlock((unsigned char *)b64, (const unsigned char *)v, (int)n);
  cJSON *s = cJSON_CreateString(b64);
  kcr__wipe_free(b64, strlen(b64));
  if(!s || !cJSON_AddItemToObject(data, name, s)) {
    cJSON_Delete(s);
    return KCR_ENOMEM;
  }
  return KCR_OK;
}

static kcr_err put_time(cJSON *ann, const char *key, time_t t)
{
  char buf[KCR_RFC3339_LEN];

  cJSON_DeleteItemFromObjectCaseSensitive(ann, key);
  if(!t)
    return KCR_OK;
  kcr_time_format(t, buf);
  return cJSON_AddStringToObject(ann, key, buf) ? KCR_OK : KCR_ENOMEM;
}

/* Writes st into the Secret tree s (data and our annotations). */
static kcr_err write_state(cJSON *s, const struct kcr__certs_state *st)
{
  cJSON *data = kcr_json_obj(s, "/data"), *ann = kcr_json_obj(s, "/metadata/annotations");
  kcr_err rc;

  if(!data || !ann)
    return KCR_ENOMEM;
  if(!cJSON_GetObjectItemCaseSensitive(s, "type") &&
     !cJSON_AddStringToObject(s, "type", "kubernetes.io/tls"))
    return KCR_ENOMEM;
  if((rc = put_data(data, "ca.crt", st->bundle)) ||
     (rc = put_data(data, "ca-signing.crt", st->ca)) ||
     (rc = put_data(data, "ca-signing.key", st->ca_key)) ||
     (rc = put_data(data, "ca-next.crt", st->next)) ||
     (rc = put_data(data, "ca-next.key", st->next_key)) ||
     (rc = put_data(data, "tls.crt", st->tls)) ||
     (rc = put_data(data, "tls.key", st->tls_key)) ||
     (rc = put_time(ann, ANN_BUNDLED, st->bundled)) ||
     (rc = put_time(ann, ANN_PROMOTED, st->promoted)))
    return rc;
  if(!ann->child)
    cJSON_DeleteItemFromObjectCaseSensitive(kcr_json_at(s, "/metadata"), "annotations");
  return KCR_OK;
}

/* Reads the Secret into *s, making it (a new CA and serving certificate)
 * when absent: create, and on AlreadyExists read the winner's. */
static kcr_err read_or_make(kcr_certs *c, cJSON **s, struct kcr_errinfo *ei)
{
  const struct kcr_ref ref = {.gvr = &secrets, .ns = c->ns, .name = c->secret};
  struct kcr__certs_state st = {0};
  unsigned changed;
  kcr_err rc = kcr_get(c->client, &ref, s, ei);

  if(rc != KCR_ENOTFOUND)
    return rc;
  kcr_errinfo_cleanup(ei);
  *s = cJSON_CreateObject();
  rc = *s ? kcr__certs_plan(&c->cfg, &st, time(NULL), &changed, ei) : KCR_ENOMEM;
  if(!rc &&
     (!cJSON_AddStringToObject(*s, "apiVersion", "v1") ||
      !cJSON_AddStringToObject(*s, "kind", "Secret") ||
      kcr_json_set_str(*s, "/metadata/name", c->secret) ||
      kcr_json_set_str(*s, "/metadata/namespace", c->ns) ||
      kcr_json_set_str(*s, "/metadata/labels/app.kubernetes.io~1managed-by", "kcr")))
    rc = KCR_ENOMEM;
  if(!rc)
    rc = write_state(*s, &st);
  kcr__certs_state_free(&st);
  if(!rc) {
    cJSON *made = NULL;
    rc = kcr_create(c->client, &(struct kcr_ref){.gvr = &secrets, .ns = c->ns}, *s, NULL,
                    &made, ei);
    if(!rc)
      KCR_LOG(KCR_LOG_INFO, "certs: made the webhook CA and serving certificate",
              KCR_S("name", c->secret), KCR_S("namespace", c->ns));
    cJSON_Delete(*s);
    *s = made;
  } else {
    cJSON_Delete(*s);
    *s = NULL;
  }
  if(rc == KCR_EEXIST) { /* another replica made it first */
    kcr_errinfo_cleanup(ei);
    rc = kcr_get(c->client, &ref, s, ei);
  }
  return rc;
}

/* ---- caBundles ------------------------------------------------------------- */

/* The base64 caBundle b64 holds the PEM certificate ca. */
static bool bundle_has(const char *b64, const char *ca)
{
  unsigned char *pem;
  size_t n;
  bool has = false;

  if(b64 && !kcr_base64_decode(b64, strlen(b64), &pem, &n)) {
    has = strstr((char *)pem, ca) != NULL;
    free(pem);
  }
  return has;
}

/* Sets clientConfig.caBundle of every webhook of a webhook configuration,
 * or of a CRD's conversion webhook, to b64 - only where it lacks the CA
 * must_hold when that is given; *changed when one was set. */
static bool set_bundles(cJSON *obj, bool crd, const char *b64, const char *must_hold,
                        bool *changed)
{
  cJSON *cc, *wh, *one[1], **list = one;
  size_t n = 0;

  if(crd) {
    const char *strategy = kcr_json_str(obj, "/spec/conversion/strategy");
    if(!strategy || strcmp(strategy, "Webhook"))
      return true; /* no conversion webhook: nothing to hold */
    if(!(one[0] = kcr_json_obj(obj, "/spec/conversion/webhook")))
      return false;
    n = 1;
  }
  for(size_t i = 0;; i++) {
    if(crd) {
      if(i == n)
        break;
      wh = list[i];
    } else if(!(wh = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(obj, "webhooks"),
                                        (int)i))) {
      break;
    }
    if(!(cc = kcr_json_obj(wh, "/clientConfig")))
      return false;
    const char *have = kcr_json_str(cc, "/caBundle");
    if(must_hold ? bundle_has(have, must_hold) : have && !strcmp(have, b64))
      continue;
    *changed = true;
    if(kcr_json_set_str(cc, "/caBundle", b64))
      return false;
  }
  return true;
}

/* Writes bundle into every caBundle named (with must_hold: only those that
 * lack that CA); *all when every one of them holds it now. */
static void inject(kcr_certs *c, const char *bundle, const char *must_hold, bool *all)
{
  static const struct kcr_gvr *const kinds[] = {&vwcs, &mwcs, &crds};
  size_t n = strlen(bundle);
  char *b64 = malloc(4 * ((n + 2) / 3) + 1);

  *all = b64 != NULL;
  if(!b64)
    return;
  EVP_EncodeBlock((unsigned char *)b64, (const unsigned char *)bundle, (int)n);
  for(int k = 0; k < 3; k++)
    for(char **name = c->lists[2 + k]; name && *name; name++) {
      struct kcr_errinfo ei = KCR_ERRINFO_INIT;
      const struct kcr_ref ref = {.gvr = kinds[k], .name = *name};
      cJSON *obj = NULL;
      bool changed = false;
      kcr_err rc = kcr_get(c->client, &ref, &obj, &ei);
      if(!rc && !set_bundles(obj, k == 2, b64, must_hold, &changed))
        rc = KCR_ENOMEM;
      if(!rc && changed)
        rc = kcr_update(c->client, &ref, obj, NULL, NULL, &ei);
      if(!rc && changed)
        KCR_LOG(KCR_LOG_INFO, "certs: caBundle written",
                KCR_S("resource", kinds[k]->resource), KCR_S("name", *name),
                KCR_B("repair", must_hold != NULL));
      if(rc) {
        *all = false;
        KCR_LOG(rc == KCR_ECONFLICT ? KCR_LOG_DEBUG : KCR_LOG_WARN,
                "certs: cannot write a caBundle (retried next round)",
                KCR_S("resource", kinds[k]->resource), KCR_S("name", *name),
                KCR_S("error", ei.message ? ei.message : kcr_strerror(rc)));
      }
      cJSON_Delete(obj);
      kcr_errinfo_cleanup(&ei);
    }
  free(b64);
}

/* ---- rounds ---------------------------------------------------------------- */

static bool leading(kcr_certs *c) { return !c->leading || c->leading(c->leading_ud); }

/* Hands the serving certificate to the server when it is new. */
static void serve(kcr_certs *c, const struct kcr__certs_state *st)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  char *copy;

  if(!st->tls || !st->tls_key || (c->served && !strcmp(c->served, st->tls)))
    return;
  if(c->server && kcr_httpd_set_cert(c->server, st->tls, st->tls_key, &ei)) {
    KCR_LOG(KCR_LOG_ERROR, "certs: cannot serve the Secret's certificate",
            KCR_S("name", c->secret), KCR_S("error", ei.message ? ei.message : "?"));
    kcr_errinfo_cleanup(&ei);
    return;
  }
  if((copy = strdup(st->tls))) {
    free(c->served);
    c->served = copy;
  }
  KCR_LOG(KCR_LOG_INFO, "certs: serving the Secret's certificate",
          KCR_S("name", c->secret));
}

/* Writes state pl into a copy of the Secret s and updates it; on success
 * *s becomes the object the server returned (its new resourceVersion).
 * KCR_ECONFLICT: written meanwhile, *s unchanged. */
static kcr_err store(kcr_certs *c, cJSON **s, const struct kcr__certs_state *pl,
                     struct kcr_errinfo *ei)
{
  const struct kcr_ref ref = {.gvr = &secrets, .ns = c->ns, .name = c->secret};
  cJSON *w = cJSON_Duplicate(*s, true), *out = NULL;
  kcr_err rc = w ? write_state(w, pl) : KCR_ENOMEM;

  if(!rc)
    rc = kcr_update(c->client, &ref, w, NULL, &out, ei);
  cJSON_Delete(w);
  if(!rc) {
    cJSON_Delete(*s);
    *s = out;
  } else {
    cJSON_Delete(out);
  }
  return rc;
}

static kcr_err round_locked(kcr_certs *c, struct kcr_errinfo *ei)
{
  struct kcr__certs_state st = {0}, pl = {0};
  cJSON *s = NULL;
  unsigned changed = 0;
  bool lead = leading(c), conflicted = false, all;
  kcr_err rc = read_or_make(c, &s, ei);

  if(rc)
    return rc;
  read_state(s, &st);
  /* The plan is made on a state of its own: st stays what is stored until
   * the write succeeds. The leader renews and rotates; any replica repairs
   * a Secret that holds no usable CA or serving certificate (before anyone
   * leads: a conversion webhook may be needed for the informers to sync). */
  read_state(s, &pl);
  rc = kcr__certs_plan(&c->cfg, &pl, time(NULL), &changed, ei);
  if(!rc && changed && (lead || (changed & KCR__CERTS_REPAIR))) {
    rc = store(c, &s, &pl, ei);
    if(rc == KCR_ECONFLICT) { /* written meanwhile: the next round reads it */
      kcr_errinfo_cleanup(ei);
      rc = KCR_OK;
      conflicted = true;
    } else if(!rc) {
      KCR_LOG(KCR_LOG_INFO, "certs: Secret updated", KCR_S("name", c->secret),
              KCR_B("leading", lead), KCR_B("newCA", changed & KCR__CERTS_NEW_CA),
              KCR_B("rotationStarted", changed & KCR__CERTS_ROTATING),
              KCR_B("newCAPromoted", changed & KCR__CERTS_PROMOTED),
              KCR_B("oldCARemoved", changed & KCR__CERTS_OLD_CA_GONE),
              KCR_B("newServingCert", changed & KCR__CERTS_NEW_CERT));
      kcr__certs_state_free(&st);
      st = pl;
      memset(&pl, 0, sizeof(pl));
    }
  }
  kcr__certs_state_free(&pl);
  if(!rc) {
    serve(c, &st);
    if(st.bundle) {
      char *b = strdup(st.bundle);
      if(b) {
        free(c->bundle);
        c->bundle = b;
      }
    }
  }
  /* caBundles: the leader writes the stored bundle; another replica only
   * one that lacks the stored signing CA (a configuration re-applied before
   * anyone leads). Never a bundle that was not stored. */
  if(!rc && !conflicted && st.bundle && st.ca) {
    inject(c, st.bundle, lead ? NULL : st.ca, &all);
    /* step 2 done: every caBundle holds the next CA */
    if(lead && all && st.next && !st.bundled) {
      st.bundled = time(NULL);
      rc = store(c, &s, &st, ei);
      if(rc == KCR_ECONFLICT) {
        kcr_errinfo_cleanup(ei);
        rc = KCR_OK;
      }
    } else if(lead && !all && st.next) {
      KCR_LOG(KCR_LOG_WARN,
              "certs: CA rotation waits until every caBundle named holds the new CA",
              KCR_S("name", c->secret));
    }
  }
  kcr__certs_state_free(&st);
  cJSON_Delete(s);
  return rc;
}

bool kcr__certs_serving(kcr_certs *c)
{
  bool yes;

  pthread_mutex_lock(&c->round_mu);
  yes = c->served != NULL;
  pthread_mutex_unlock(&c->round_mu);
  return yes;
}

kcr_err kcr_certs_sync(kcr_certs *c, struct kcr_errinfo *ei)
{
  kcr_err rc;

  if(!c)
    return KCR_EINVAL;
  pthread_mutex_lock(&c->round_mu);
  rc = round_locked(c, ei);
  pthread_mutex_unlock(&c->round_mu);
  return rc;
}

kcr_err kcr_certs_ca_bundle(kcr_certs *c, char **out)
{
  kcr_err rc = KCR_OK;

  if(!out)
    return KCR_EINVAL;
  *out = NULL;
  if(!c)
    return KCR_EINVAL;
  pthread_mutex_lock(&c->round_mu);
  if(!c->bundle)
    rc = KCR_ENOTFOUND;
  else if(!(*out = strdup(c->bundle)))
    rc = KCR_ENOMEM;
  pthread_mutex_unlock(&c->round_mu);
  return rc;
}

static void *loop(void *p)
{
  kcr_certs *c = p;

  pthread_mutex_lock(&c->wake_mu);
  while(!c->stop) {
    struct timespec until = kcr_time_mono_after(c->poll_ms);
    while(!c->stop && pthread_cond_timedwait(&c->wake, &c->wake_mu, &until) == 0) {
    }
    if(c->stop)
      break;
    pthread_mutex_unlock(&c->wake_mu);
    struct kcr_errinfo ei = KCR_ERRINFO_INIT;
    kcr_err rc = kcr_certs_sync(c, &ei);
    if(rc)
      KCR_LOG(KCR_LOG_WARN, "certs: round failed (retried)", KCR_S("name", c->secret),
              KCR_S("error", ei.message ? ei.message : kcr_strerror(rc)));
    kcr_errinfo_cleanup(&ei);
    pthread_mutex_lock(&c->wake_mu);
  }
  pthread_mutex_unlock(&c->wake_mu);
  return NULL;
}

kcr_err kcr_certs_start(kcr_certs *c, struct kcr_errinfo *ei)
{
  kcr_err rc;

  if(!c || c->running)
    return kcr_errinfo_set(ei, KCR_EINVAL, "kcr_certs_start: no certs, or started");
  if((rc = kcr_certs_sync(c, ei)))
    return rc;
  if(!kcr__certs_serving(c))
    KCR_LOG(KCR_LOG_ERROR, "certs: no certificate from the Secret served yet (retried)",
            KCR_S("name", c->secret), KCR_S("namespace", c->ns));
  c->stop = false;
  if(pthread_create(&c->th, NULL, loop, c))
    return kcr_errinfo_set(ei, KCR_EIO, "certs: cannot start a thread");
  c->running = true;
  return KCR_OK;
}

void kcr_certs_stop(kcr_certs *c)
{
  if(!c || !c->running)
    return;
  pthread_mutex_lock(&c->wake_mu);
  c->stop = true;
  pthread_cond_signal(&c->wake);
  pthread_mutex_unlock(&c->wake_mu);
  pthread_join(c->th, NULL);
  c->running = false;
}

/* ---- making and freeing ---------------------------------------------------- */

static kcr_err copy_list(const char *const *in, char ***out)
{
  size_t n = 0;

  *out = NULL;
  if(!in)
    return KCR_OK;
  while(in[n])
    n++;
  if(!(*out = calloc(n + 1, sizeof(char *))))
    return KCR_ENOMEM;
  for(size_t i = 0; i < n; i++)
    if(!((*out)[i] = strdup(in[i])))
      return KCR_ENOMEM;
  return KCR_OK;
}

void kcr_certs_free(kcr_certs *c)
{
  if(!c)
    return;
  kcr_certs_stop(c);
  for(int i = 0; i < 5; i++) {
    for(char **p = c->lists[i]; p && *p; p++)
      free(*p);
    free(c->lists[i]);
  }
  kcr_client_free(c->client);
  free(c->ns);
  free(c->secret);
  free(c->served);
  free(c->bundle);
  pthread_mutex_destroy(&c->round_mu);
  pthread_mutex_destroy(&c->wake_mu);
  pthread_cond_destroy(&c->wake);
  free(c);
}

kcr_err kcr_certs_new(const struct kcr_certs_opts *o, kcr_certs **out,
                      struct kcr_errinfo *ei)
{
  const char *const *in[5];
  pthread_condattr_t ca;
  kcr_certs *c;
  kcr_err rc = KCR_OK;

  if(!out)
    return KCR_EINVAL;
  *out = NULL;
  if(!o || !o->client || !o->ns || !*o->ns || !o->secret || !*o->secret)
    return kcr_errinfo_set(ei, KCR_EINVAL,
                           "certs: a client, a namespace and a Secret name "
                           "are required");
  if((!o->dns_names || !o->dns_names[0]) && (!o->ip_addresses || !o->ip_addresses[0]))
    return kcr_errinfo_set(
        ei, KCR_EINVAL,
        "certs: the serving certificate needs a DNS name or an IP address");
  if((o->ca_lifetime_ms && o->ca_lifetime_ms < 1000) ||
     (o->cert_lifetime_ms && o->cert_lifetime_ms < 1000))
    return kcr_errinfo_set(ei, KCR_EINVAL, "certs: lifetimes of at least a second");
  if(!(c = calloc(1, sizeof(*c))))
    return KCR_ENOMEM;
  pthread_mutex_init(&c->round_mu, NULL);
  pthread_mutex_init(&c->wake_mu, NULL);
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&c->wake, &ca);
  pthread_condattr_destroy(&ca);
  c->client = kcr_client_ref(o->client);
  c->server = o->server;
  c->leading = o->leading;
  c->leading_ud = o->leading_ud;
  c->poll_ms = o->poll_ms ? o->poll_ms : 10000;
  in[0] = o->dns_names;
  in[1] = o->ip_addresses;
  in[2] = o->validating_webhooks;
  in[3] = o->mutating_webhooks;
  in[4] = o->crds;
  for(int i = 0; i < 5 && !rc; i++)
    rc = copy_list(in[i], &c->lists[i]);
  if(!rc && (!(c->ns = strdup(o->ns)) || !(c->secret = strdup(o->secret))))
    rc = KCR_ENOMEM;
  if(rc) {
    kcr_certs_free(c);
    return rc;
  }
  c->cfg.name = c->secret;
  c->cfg.dns = c->lists[0];
  c->cfg.ips = c->lists[1];
  c->cfg.ca_lifetime_s =
      (long)((o->ca_lifetime_ms ? o->ca_lifetime_ms : 365ull * 86400000) / 1000);
  c->cfg.cert_lifetime_s =
      (long)((o->cert_lifetime_ms ? o->cert_lifetime_ms : 90ull * 86400000) / 1000);
  uint64_t grace = o->grace_ms ? o->grace_ms : 300000;
  if(grace < 2 * c->poll_ms)
    grace = 2 * c->poll_ms;
  c->cfg.grace_s = (long)((grace + 999) / 1000);
  *out = c;
  return KCR_OK;
}
