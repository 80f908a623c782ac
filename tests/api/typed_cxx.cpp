// Typed objects from C++: headers kcr-gen generated (widgets.h: every schema
// feature it types; ebds.h) compile as C++17 and C++20 with -Wall -Wextra
// -Werror, and a C++ program reads an object through them and writes one.
#include "ebds.h"
#include "widgets.h"

#include <cstdio>
#include <cstring>
#include <string>

int main()
{
  int failed = 0;
  auto check = [&failed](bool ok, const char *what) {
    if(!ok) {
      std::fprintf(stderr, "typed_cxx: %s\n", what);
      failed = 1;
    }
  };
  const std::string in = "{\"apiVersion\":\"gen.kcr.test/v1\",\"kind\":\"Widget\","
                         "\"spec\":{\"action\":\"Replace\",\"class\":\"c\",\"port\":8080,"
                         "\"servers\":{\"a\":{\"host\":\"h\",\"weight\":2}},\"size\":3}}";
  struct kcr_arena a = KCR_ARENA_INIT;
  struct widget w;

  check(widget_decode(in.data(), in.size(), 0, &a, &w, nullptr) == KCR_OK, "decode");
  check(w.spec.has_size && w.spec.size == 3, "size");
  check(w.spec.action.v == WIDGET_SPEC_ACTION_REPLACE, "enum");
  check(!w.spec.port.is_str && w.spec.port.i == 8080, "int-or-string");
  check(kcr_str_eq(w.spec.class_, "c"), "a member named after a C++ keyword");
  check(w.spec.servers.n == 1 && w.spec.servers.v[0].weight == 2, "map");

  struct kcr_buf b = KCR_BUF_INIT;
  check(widget_encode(&w, &b, nullptr) == KCR_OK && in == kcr_buf_str(&b), "encode");

  struct ebd e;
  ebd_init(&e);
  KCR_SET(e.spec.vfm_template, image, kcr_str_c("nginx"));
  e.has_spec = e.spec.has_vfm_template = true;
  kcr_buf_reset(&b);
  check(ebd_encode(&e, &b, nullptr) == KCR_OK &&
            std::strcmp(kcr_buf_str(&b),
                        "{\"apiVersion\":\"ebdman.example.com/v1beta1\",\"kind\":\"EBD\","
                        "\"spec\":{\"vfmTemplate\":{\"image\":\"nginx\"}}}") == 0,
        "build and encode");
  check(std::strcmp(ebd_gvr.resource, "ebds") == 0 && ebd_gvr.namespaced, "gvr");
  kcr_buf_cleanup(&b);
  kcr_arena_cleanup(&a);
  if(!failed)
    std::puts("typed_cxx: ok");
  return failed;
}
