#!/usr/bin/env bash
# e2e no_spurious_flip: Ready reflects what the VFM reports, not ebdman's own
# writes. When a metadata-only change of the EBD (an annotation ebdman copies
# to the VFM) makes ebdman re-apply the VFM, the VFM's generation does not
# change, so its fresh Ready=True still holds (issue 5: only a Ready whose
# observedGeneration is older than the VFM's generation means progressing):
#  - a harmless annotation change on a Ready EBD writes no status, leaves
#    Ready's lastTransitionTime alone and records no BecameUnready;
#  - a failure goes True -> False/Error directly, so the BecameUnready
#    event carries the real reason: "Error: <the VFM's message>".
set -euo pipefail
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh"
e2e_init

new_ns
ns=$E2E_NS
start_sim_and_op "$ns" 200ms

for name in steady tipping; do
  ebd_yaml "$name" registry.example.com/vfm:1.0 1 | k -n "$ns" apply -f - >/dev/null
done
for name in steady tipping; do
  wait_eq 60 "$name: Ready" "True/Ready/1" cond_summary "$ns" ebd "$name" Ready
done
wait_for 30 "ebdman idle after both became Ready" ebd_idle op 0

# 1. A harmless annotation change: ebdman copies every vfm-sim.ebdman.example.com/*
#    annotation to the VFM, vfm-sim ignores this one. (Not the delay
#    annotation: vfm-sim measures a new delay from the start of the VFM's
#    generation, and may rightly go back to Progressing.)
ltt=$(cond_ltt "$ns" ebd steady Ready)
written=$(metric op kcr_status_writes_total 'result="written"')
sim_written=$(metric sim kcr_status_writes_total 'result="written"')
before=$(reconciles op)
wait_clock_past "$ltt"
k -n "$ns" annotate ebd steady vfm-sim.ebdman.example.com/note=hello >/dev/null
wait_eq 30 "steady: note annotation copied to the VFM" "hello" \
  jp "$ns" vfm steady '{.metadata.annotations.vfm-sim\.ebdman\.example\.com/note}'
expect_eq "steady: VFM generation (metadata change)" "1" "$(generation "$ns" vfm steady)"
# The EBD's update and the VFM's update each reconcile the EBD once.
wait_for 30 "ebdman idle after the annotation change" ebd_idle op $((before + 2))
expect_eq "vfm-sim status writes caused by the annotation change (the VFM stayed Ready)" \
  "$sim_written" "$(metric sim kcr_status_writes_total 'result="written"')"
expect_eq "steady: Ready" "True/Ready/1" "$(cond_summary "$ns" ebd steady Ready)"
expect_eq "ebdman status writes caused by a harmless annotation change" "$written" \
  "$(metric op kcr_status_writes_total 'result="written"')"
expect_eq "steady: Ready lastTransitionTime after a harmless annotation change" "$ltt" \
  "$(cond_ltt "$ns" ebd steady Ready)"
expect_eq "steady: BecameUnready events" "" \
  "$(k -n "$ns" get events.events.k8s.io --field-selector regarding.name=steady,reason=BecameUnready \
    -o jsonpath='{.items[*].note}')"

# 2. A failure: True -> False/Error, reported with its reason.
k -n "$ns" annotate ebd tipping "vfm-sim.ebdman.example.com/fail=disk on fire" >/dev/null
wait_eq 60 "tipping: Ready" "False/Error/1" cond_summary "$ns" ebd tipping Ready
wait_for 30 "tipping: BecameUnready event recorded" \
  bash -c "[[ -n \$($KCR_CONTROLPLANE_BIN/kubectl -n $ns get events.events.k8s.io \
    --field-selector regarding.name=tipping,reason=BecameUnready -o name) ]]"
expect_eq "tipping: BecameUnready event notes" "Error: disk on fire" \
  "$(k -n "$ns" get events.events.k8s.io --field-selector regarding.name=tipping,reason=BecameUnready \
    -o jsonpath='{.items[*].note}')"

check_no_forbidden op sim
e2e_done
