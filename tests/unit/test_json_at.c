/* kcr_json_at finds members by their whole names, segment by segment:
 * not by a prefix, not past a name's end, the empty name included. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "kcr/json.h"

static void members_are_matched_by_whole_names(void **state)
{
  static const char text[] =
      "{\"metadat\":1,\"metadataX\":2,\"m\":3,\"metadata\":{\"na\":4,"
      "\"name\":\"n\",\"\":{\"x\":5}},\"\":{\"\":6}}";
  cJSON *t = NULL;

  assert_int_equal(KCR_OK, kcr_json_parse(text, strlen(text), &t, NULL));
  assert_string_equal("n", kcr_json_str(t, "metadata.name"));
  assert_int_equal(4, kcr_json_int(t, "metadata.na", 0));
  assert_int_equal(1, kcr_json_int(t, "metadat", 0));
  assert_int_equal(3, kcr_json_int(t, "m", 0));
  assert_int_equal(5, kcr_json_int(t, "metadata..x", 0)); /* the empty name */
  assert_int_equal(6, kcr_json_int(t, "..", 0));          /* "" then "" */
  assert_null(kcr_json_at(t, "metadata.nam"));
  assert_null(kcr_json_at(t, "metadata.names"));
  assert_null(kcr_json_at(t, "metadat.a"));
  cJSON_Delete(t);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(members_are_matched_by_whole_names),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
