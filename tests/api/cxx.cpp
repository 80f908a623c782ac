// libkcr from C++: kcr.h and every header it includes compile as C++ (no
// C-only syntax, no member named after a C++ keyword, extern "C" linkage),
// and a C++ program links against the C library and calls it.
#include "kcr.h"

#include <cstdio>
#include <cstring>

int main()
{
  int failed = 0;
  auto check = [&failed](bool ok, const char *what) {
    if(!ok) {
      std::fprintf(stderr, "cxx: %s\n", what);
      failed = 1;
    }
  };

  check(std::strcmp(kcr_version(), KCR_VERSION) == 0, "kcr_version() != KCR_VERSION");
  check(std::strcmp(kcr_err_name(KCR_ECONFLICT), "ECONFLICT") == 0, "kcr_err_name");

  struct kcr_buf b = KCR_BUF_INIT;
  check(kcr_buf_puts(&b, "hello ") == KCR_OK && kcr_buf_printf(&b, "%d", 42) == KCR_OK,
        "kcr_buf");
  check(std::strcmp(kcr_buf_str(&b), "hello 42") == 0 && kcr_buf_err(&b) == KCR_OK,
        "kcr_buf contents");
  kcr_buf_cleanup(&b);

  struct kcr_event_ref ref = {};
  ref.ns = "default"; // the member once named "namespace", a C++ keyword
  check(ref.ns != nullptr, "kcr_event_ref.ns");

  kcr_log_set_level(KCR_LOG_OFF);
  KCR_LOG(KCR_LOG_INFO, "from C++", KCR_S("lang", "c++"), KCR_I("n", 1),
          KCR_B("ok", true), KCR_D("x", 0.5));
  return failed;
}
