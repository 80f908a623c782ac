/* Typed objects in a program outside the tree: kcr_generate_types of the
 * installed CMake package, from a CRD (ebds.h) and of a built-in kind from
 * the installed OpenAPI snapshot (k8s.h). Decodes one of each, checks what
 * it read and writes it back; exits 0 when all of it holds. */
#include <stdio.h>
#include <string.h>

#include <kcr.h>

#include "ebds.h"
#include "k8s.h"

int main(void)
{
  static const char cm_text[] = "{\"apiVersion\":\"v1\",\"data\":{\"k\":\"v\"},\"kind\":"
                                "\"ConfigMap\",\"metadata\":{\"name\":\"cm\"}}";
  static const char ebd_text[] =
      "{\"metadata\":{\"labels\":{\"a\":\"b\"},\"name\":\"e\"},\"spec\":{}}";
  struct kcr_arena a = KCR_ARENA_INIT;
  struct kcr_buf b = KCR_BUF_INIT;
  struct core_v1_config_map cm;
  struct ebd e;
  int bad = 0;

  bad |= core_v1_config_map_decode(cm_text, strlen(cm_text), 0, &a, &cm, NULL) != KCR_OK;
  bad |= !(cm.has_data && cm.data.n == 1 && kcr_str_eq(cm.data.v[0], "v") &&
           kcr_str_eq(cm.metadata.name, "cm"));
  bad |= core_v1_config_map_encode(&cm, &b, NULL) != KCR_OK ||
         strcmp(kcr_buf_str(&b), cm_text) != 0;
  bad |= ebd_decode(ebd_text, strlen(ebd_text), KCR_TYPED_COPY, &a, &e, NULL) != KCR_OK;
  bad |= !(e.metadata.has_labels && kcr_str_eq(e.metadata.labels.k[0], "a"));
  kcr_buf_reset(&b);
  bad |= ebd_encode(&e, &b, NULL) != KCR_OK || strcmp(kcr_buf_str(&b), ebd_text) != 0;
  printf("%s\n", bad ? "typed: wrong" : "typed: ok");
  kcr_buf_cleanup(&b);
  kcr_arena_cleanup(&a);
  return bad;
}
