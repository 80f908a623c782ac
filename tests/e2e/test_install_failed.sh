#!/usr/bin/env bash
# e2e install_failed: a VFM the apiserver's schema rejects gives
# Installed=False/InstallFailed with the server's message, and
# Ready=False/InstallFailed. The VFM CRD is stricter than the EBD's: its
# spec.image must match ^[^\s]+$ (an image reference has no whitespace),
# while the EBD only wants minLength 1, so the EBD "bad image" is stored but
# its VFM is refused (422). Fixing the image recovers to Ready=True; an
# InstallFailed event is recorded.
set -euo pipefail
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh"
e2e_init

new_ns
ns=$E2E_NS

# The stricter VFM schema is in effect (a just-updated CRD can take a moment).
vfm_rejected() {
  local out
  if out=$(printf 'apiVersion: ebdman.example.com/v1alpha1\nkind: VFM\nmetadata:\n  name: probe\nspec:\n  image: "bad image"\n' |
    k -n "$ns" create --dry-run=server -f - 2>&1); then
    echo "accepted: $out"
    return 1
  fi
  echo "$out"
  [[ $out == *spec.image* ]]
}
wait_for 30 "the VFM CRD rejects an image with a space (dry run)" vfm_rejected

start_vfm_sim sim --namespace "$ns" --delay 200ms
start_ebdman op --namespace "$ns"

ebd_yaml broken "bad image" 1 | k -n "$ns" apply -f - >/dev/null
pass "the EBD with image 'bad image' is accepted by the EBD schema"

wait_eq 60 "broken: Installed" "False/InstallFailed/1" cond_summary "$ns" ebd broken Installed
msg=$(cond_message "$ns" ebd broken Installed)
expect_contains "broken: Installed message (the apiserver's validation text)" "spec.image" "$msg"
expect_contains "broken: Installed message (the apiserver's validation text)" "should match" "$msg"
expect_contains "broken: Installed message names the VFM" "broken" "$msg"
wait_eq 30 "broken: Ready" "False/InstallFailed/1" cond_summary "$ns" ebd broken Ready
expect_eq "broken: Ready message" "$msg" "$(cond_message "$ns" ebd broken Ready)"
expect_eq "broken: VFMHealthy (no VFM)" "False/Progressing/1" \
  "$(cond_summary "$ns" ebd broken VFMHealthy)"
expect_eq "broken: status.observedGeneration" "1" "$(observed_generation "$ns" ebd broken)"
wait_for 10 "broken: no VFM was created" gone "$ns" vfm broken

has_install_failed_event() {
  k -n "$ns" get events.events.k8s.io --field-selector regarding.name=broken,reason=InstallFailed \
    -o jsonpath='{.items[*].note}' | grep -q 'should match'
}
wait_for 30 "broken: InstallFailed event with the server's message" has_install_failed_event

# Fix the image: generation 2, installed, then Ready.
k -n "$ns" patch ebd broken --type merge \
  -p '{"spec":{"vfm":{"image":"registry.example.com/vfm:1.0"}}}' >/dev/null
wait_eq 60 "broken: Installed after fixing the image" "True/Installed/2" \
  cond_summary "$ns" ebd broken Installed
wait_eq 60 "broken: Ready after fixing the image" "True/Ready/2" cond_summary "$ns" ebd broken Ready
expect_eq "broken: VFMHealthy after fixing the image" "True/Ready/2" \
  "$(cond_summary "$ns" ebd broken VFMHealthy)"
expect_eq "broken: VFM image" "registry.example.com/vfm:1.0" "$(jp "$ns" vfm broken '{.spec.image}')"
expect_eq "broken: status.observedGeneration" "2" "$(observed_generation "$ns" ebd broken)"

check_no_forbidden op sim
e2e_done
