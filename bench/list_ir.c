/* list_ir - a small driver for measuring an informer's initial LIST of
 * server-side-applied objects (with callgrind, the figures deterministic),
 * against a real API server (KUBECONFIG).
 *
 *   list_ir create NS N   namespace NS and N ConfigMaps in it, each applied
 *                         (server-side apply, field manager "list-ir-bench"):
 *                         3 labels, 2 annotations, 8 data keys of 24 bytes,
 *                         so managedFields name every one of those fields
 *   list_ir sync NS       starts an informer on NS's ConfigMaps, waits until
 *                         it has synced (its initial LIST, pages of 500),
 *                         prints objects and store bytes, and stops
 *   list_ir bytes NS      pages through the LIST as the informer does and
 *                         prints the bytes of the pages, and of the items'
 *                         "managedFields":[...] members in them
 *   list_ir delete NS     deletes the namespace
 *
 * The Ir of the initial LIST (every page fetched, parsed and made into
 * store objects):
 *
 *   valgrind --tool=callgrind --toggle-collect=kcr_list_each \
 *       build/rel/bench/list_ir sync NS
 *
 * Only the public API is used, so the same file builds against an older
 * libkcr for a before/after comparison. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kcr.h"

static const struct kcr_gvr configmaps = {
    .group = "", .version = "v1", .resource = "configmaps", .namespaced = true};
static const struct kcr_gvr namespaces = {
    .group = "", .version = "v1", .resource = "namespaces", .namespaced = false};

static void die(const char *what, kcr_err rc, const struct kcr_errinfo *ei)
{
  fprintf(stderr, "list_ir: %s: %s\n", what,
          ei && ei->message ? ei->message : kcr_strerror(rc));
  exit(2);
}

static kcr_client *make_client(void)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  kcr_config *cfg = NULL;
  kcr_client *c = NULL;
  kcr_err rc = kcr_config_load(&(struct kcr_config_opts){0}, &cfg, &ei);

  if(!rc)
    rc = kcr_client_new(&(struct kcr_client_opts){.config = cfg}, &c, &ei);
  kcr_config_free(cfg);
  if(rc)
    die("client", rc, &ei);
  return c;
}

static int create(kcr_client *c, const char *ns, int n)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  cJSON *nso = NULL;
  char text[1024];
  kcr_err rc;

  snprintf(text, sizeof(text), "{\"metadata\":{\"name\":\"%s\"}}", ns);
  if((rc = kcr_json_parse(text, strlen(text), &nso, &ei)) ||
     (rc = kcr_create(c, &(struct kcr_ref){.gvr = &namespaces}, nso, NULL, NULL, &ei)))
    die("namespace", rc, &ei);
  cJSON_Delete(nso);
  for(int i = 0; i < n; i++) {
    char name[32];
    cJSON *o = NULL;
    int k =
        snprintf(text, sizeof(text),
                 "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{"
                 "\"name\":\"cm-%05d\",\"labels\":{\"app\":\"bench\",\"tier\":\"t%d\","
                 "\"idx\":\"%d\"},\"annotations\":{\"bench.kcr.io/a\":\"x\","
                 "\"bench.kcr.io/b\":\"y\"}},\"data\":{",
                 i, i % 4, i);
    for(int d = 0; d < 8; d++)
      k += snprintf(text + k, sizeof(text) - (size_t)k, "%s\"key%d\":\"%024d\"",
                    d ? "," : "", d, i * 8 + d);
    snprintf(text + k, sizeof(text) - (size_t)k, "}}");
    snprintf(name, sizeof(name), "cm-%05d", i);
    if((rc = kcr_json_parse(text, strlen(text), &o, &ei)) ||
       (rc = kcr_apply(c, &(struct kcr_ref){.gvr = &configmaps, .ns = ns, .name = name},
                       o, &(struct kcr_apply_opts){.field_manager = "list-ir-bench"},
                       NULL, &ei)))
      die("apply", rc, &ei);
    cJSON_Delete(o);
  }
  kcr_errinfo_cleanup(&ei);
  return 0;
}

static int sync(kcr_client *c, const char *ns)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  kcr_informer *inf = NULL;
  kcr_err rc = kcr_informer_new(
      &(struct kcr_informer_opts){.client = c, .gvr = &configmaps, .ns = ns}, &inf, &ei);

  if(!rc)
    rc = kcr_informer_start(inf);
  if(rc)
    die("informer", rc, &ei);
  if(!kcr_informer_wait_synced(inf, 600000))
    die("informer", KCR_ETIMEDOUT, NULL);
  printf("objects %zu store_bytes %zu\n", kcr_store_len(kcr_informer_store(inf)),
         kcr_store_bytes(kcr_informer_store(inf)));
  kcr_informer_free(inf);
  return 0;
}

/* Pages as the informer asks for them (500 a page); the bytes of each
 * item's "managedFields":[...] member and its comma, as sent (the server
 * sends compact JSON, which cJSON prints back byte for byte here). */
static int bytes(kcr_client *c, const char *ns)
{
  struct kcr_errinfo ei = KCR_ERRINFO_INIT;
  size_t total = 0, mf = 0, items = 0, pages = 0;
  char *token = NULL;

  do {
    struct kcr_buf path = KCR_BUF_INIT;
    struct kcr_http_response resp = {.body = KCR_BUF_INIT};
    cJSON *page = NULL, *it;
    const char *next;
    kcr_err rc;
    kcr_buf_printf(&path, "/api/v1/namespaces/%s/configmaps", ns);
    kcr_query_add_int(&path, "limit", 500);
    kcr_query_add(&path, "continue", token);
    if((rc = kcr_client_do(c,
                           &(struct kcr_http_request){.method = "GET", .path = path.ptr},
                           &resp, &ei)) ||
       (rc = kcr_json_parse(resp.body.ptr, resp.body.len, &page, &ei)))
      die("list", rc, &ei);
    total += resp.body.len;
    pages++;
    cJSON_ArrayForEach(it, kcr_json_at(page, "/items"))
    {
      char *t = kcr_json_to_text(kcr_json_at(it, "/metadata/managedFields"));
      items++;
      if(t)
        mf += strlen("\"managedFields\":,") + strlen(t);
      free(t);
    }
    next = kcr_json_str(page, "/metadata/continue");
    free(token);
    token = next && *next ? strdup(next) : NULL;
    cJSON_Delete(page);
    kcr_buf_cleanup(&resp.body);
    kcr_buf_cleanup(&path);
  } while(token);
  printf("pages %zu items %zu page_bytes %zu managedFields_bytes %zu (%.1f%%) "
         "parsed_with_drop %zu\n",
         pages, items, total, mf, total ? 100.0 * (double)mf / (double)total : 0.0,
         total - mf);
  kcr_errinfo_cleanup(&ei);
  return 0;
}

int main(int argc, char **argv)
{
  kcr_client *c;
  int rc = 2;

  if(argc < 3 || (!strcmp(argv[1], "create") && argc < 4)) {
    fprintf(stderr, "usage: list_ir create NS N | sync NS | bytes NS | delete NS\n");
    return 2;
  }
  c = make_client();
  if(!strcmp(argv[1], "create"))
    rc = create(c, argv[2], (int)strtol(argv[3], NULL, 10));
  else if(!strcmp(argv[1], "sync"))
    rc = sync(c, argv[2]);
  else if(!strcmp(argv[1], "bytes"))
    rc = bytes(c, argv[2]);
  else if(!strcmp(argv[1], "delete"))
    rc = kcr_delete(c, &(struct kcr_ref){.gvr = &namespaces, .name = argv[2]}, NULL, NULL,
                    NULL)
             ? 1
             : 0;
  kcr_client_free(c);
  return rc;
}
