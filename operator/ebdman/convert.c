/* EBD conversion between v1alpha1 and v1beta1 (the hub), served as the
 * CRD's conversion webhook (kcr/webhook.h "CRD conversion").
 *
 * The two versions differ in one member: v1alpha1's spec.vfm is v1beta1's
 * spec.vfmTemplate, with the same content. So a conversion is a rename done
 * on the object's text: the converter copies every value but that member's
 * name as it came, without decoding it. (The library parses each object
 * and prints it again around the converter, so what the apiserver gets
 * back holds the same values - an int64 beyond 2^53 included, member order
 * kept - not the same bytes: escapes and white space are normalised.) The
 * library sets apiVersion and checks that the metadata did not change. */
#include <string.h>

#include "ebdman.h"
#include "kcr/jsontext.h"

/* Appends to out the object `in` with the member `from` of its spec
 * renamed `to`. A spec that is not an object, or that has no `from`, is
 * copied unchanged (an object the schema let through without it; the
 * apiserver validates what a client then writes). Errors: KCR_EPARSE (in
 * is no object, or spec already holds `to`, which the source version's
 * schema prunes: so never sent by the apiserver), KCR_ENOMEM. */
static kcr_err rename_in_spec(kcr_conversion *cv, struct kcr_str in, struct kcr_buf *out,
                              const char *from, const char *to)
{
  struct kcr_errinfo *ei = kcr_conversion_ei(cv);
  struct kcr_jv obj, name, val, sname, sval;
  struct kcr_jiter it, sit;
  bool first = true;
  int r, s;

  if(kcr_json_check(in.s, in.n, &obj) || kcr_jv_type(obj) != KCR_JT_OBJECT ||
     !kcr_jiter_init(&it, obj))
    return kcr_errinfo_set(ei, KCR_EPARSE, "the EBD is not a JSON object");
  kcr_buf_puts(out, "{");
  while((r = kcr_jiter_next(&it, &name, &val)) == 1) {
    if(!first)
      kcr_buf_puts(out, ",");
    first = false;
    kcr_buf_append(out, name.at, name.n);
    kcr_buf_puts(out, ":");
    if(!kcr_jv_str_is(name, "spec", 4) || kcr_jv_type(val) != KCR_JT_OBJECT ||
       !kcr_jiter_init(&sit, val)) {
      kcr_buf_append(out, val.at, val.n);
      continue;
    }
    bool sfirst = true;
    kcr_buf_puts(out, "{");
    while((s = kcr_jiter_next(&sit, &sname, &sval)) == 1) {
      if(kcr_jv_str_is(sname, to, strlen(to)))
        return kcr_errinfo_set(ei, KCR_EPARSE, "the EBD's spec already holds %s", to);
      if(!sfirst)
        kcr_buf_puts(out, ",");
      sfirst = false;
      if(kcr_jv_str_is(sname, from, strlen(from)))
        kcr_buf_printf(out, "\"%s\"", to);
      else
        kcr_buf_append(out, sname.at, sname.n);
      kcr_buf_puts(out, ":");
      kcr_buf_append(out, sval.at, sval.n);
    }
    if(s < 0)
      return kcr_errinfo_set(ei, KCR_EPARSE, "the EBD's spec is not well formed");
    kcr_buf_puts(out, "}");
  }
  if(r < 0)
    return kcr_errinfo_set(ei, KCR_EPARSE, "the EBD is not well formed");
  kcr_buf_puts(out, "}");
  return kcr_buf_err(out) ? KCR_ENOMEM : KCR_OK;
}

static kcr_err v1alpha1_to_hub(kcr_conversion *cv, struct kcr_str in, struct kcr_buf *out,
                               void *ud)
{
  (void)ud;
  return rename_in_spec(cv, in, out, "vfm", "vfmTemplate");
}

static kcr_err v1alpha1_from_hub(kcr_conversion *cv, struct kcr_str in,
                                 struct kcr_buf *out, void *ud)
{
  (void)ud;
  return rename_in_spec(cv, in, out, "vfmTemplate", "vfm");
}

static const struct kcr_conversion_version spokes[] = {
    {.version = "v1alpha1", .to_hub = v1alpha1_to_hub, .from_hub = v1alpha1_from_hub},
};

const struct kcr_conversion_opts ebdman_conversion = {.path = EBDMAN_CONVERT_PATH,
                                                      .name = "convert-ebd",
                                                      .group = EBDMAN_GROUP,
                                                      .hub = "v1beta1",
                                                      .versions = spokes,
                                                      .nversions = 1};
