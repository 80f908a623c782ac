#!/usr/bin/env bash
# e2e failure: a VFM that fails (vfm-sim.ebdman.example.com/fail: "disk on
# fire") gives Ready=False/Error and VFMHealthy=False/Error with the VFM's
# message; a new failure message changes the message but not the reason nor
# lastTransitionTime; removing the annotation recovers to Ready=True; the
# Ready lastTransitionTime moves on every flip (True<->False) and only then;
# BecameUnready / BecameReady events are recorded for the EBD.
set -euo pipefail
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh"
e2e_init

new_ns
ns=$E2E_NS
fail_ann=vfm-sim.ebdman.example.com/fail
start_sim_and_op "$ns" 200ms

ebd_yaml burning registry.example.com/vfm:1.0 1 "$fail_ann" "disk on fire" |
  k -n "$ns" apply -f - >/dev/null
# A healthy neighbour: failures must stay local to their EBD.
ebd_yaml calm registry.example.com/vfm:1.0 1 | k -n "$ns" apply -f - >/dev/null

# 1. failing
wait_eq 60 "burning: VFMHealthy status/reason/observedGeneration" "False/Error/1" \
  cond_summary "$ns" ebd burning VFMHealthy
expect_eq "burning: VFMHealthy message" "disk on fire" "$(cond_message "$ns" ebd burning VFMHealthy)"
wait_eq 30 "burning: Ready status/reason/observedGeneration" "False/Error/1" \
  cond_summary "$ns" ebd burning Ready
expect_eq "burning: Ready message" "disk on fire" "$(cond_message "$ns" ebd burning Ready)"
expect_eq "burning: Installed" "True/Installed/1" "$(cond_summary "$ns" ebd burning Installed)"
expect_eq "burning: VFM Ready reason (vfm-sim)" "Failed" "$(cond_reason "$ns" vfm burning Ready)"
wait_eq 60 "calm: Ready" "True/Ready/1" cond_summary "$ns" ebd calm Ready
ltt_ready1=$(cond_ltt "$ns" ebd burning Ready)
ltt_vfm1=$(cond_ltt "$ns" ebd burning VFMHealthy)
expect_match "burning: Ready lastTransitionTime (RFC 3339, UTC, seconds)" \
  '^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z$' "$ltt_ready1"

# 2. only the message changes: no transition
wait_clock_past "$ltt_ready1"
wait_clock_past "$ltt_vfm1"
k -n "$ns" annotate ebd burning --overwrite "$fail_ann=disk still on fire" >/dev/null
wait_eq 60 "burning: VFMHealthy message after a new failure message" "disk still on fire" \
  cond_message "$ns" ebd burning VFMHealthy
wait_eq 30 "burning: Ready message after a new failure message" "disk still on fire" \
  cond_message "$ns" ebd burning Ready
expect_eq "burning: Ready status/reason/observedGeneration (message change only)" "False/Error/1" \
  "$(cond_summary "$ns" ebd burning Ready)"
expect_eq "burning: VFMHealthy reason (message change only)" "Error" \
  "$(cond_reason "$ns" ebd burning VFMHealthy)"
expect_eq "burning: Ready lastTransitionTime unchanged by a message change" "$ltt_ready1" \
  "$(cond_ltt "$ns" ebd burning Ready)"
expect_eq "burning: VFMHealthy lastTransitionTime unchanged by a message change" "$ltt_vfm1" \
  "$(cond_ltt "$ns" ebd burning VFMHealthy)"

# 3. recovery: False -> True
k -n "$ns" annotate ebd burning "$fail_ann-" >/dev/null
wait_eq 60 "burning: Ready after removing the fail annotation" "True/Ready/1" \
  cond_summary "$ns" ebd burning Ready
expect_eq "burning: VFMHealthy after recovery" "True/Ready/1" \
  "$(cond_summary "$ns" ebd burning VFMHealthy)"
expect_eq "burning: VFMHealthy message after recovery" "vfm custom resource is ready" \
  "$(cond_message "$ns" ebd burning VFMHealthy)"
expect_eq "burning: fail annotation removed from the VFM" "" \
  "$(jp "$ns" vfm burning '{.metadata.annotations.vfm-sim\.ebdman\.example\.com/fail}')"
ltt_ready2=$(cond_ltt "$ns" ebd burning Ready)
expect_gt "burning: Ready lastTransitionTime moved on False->True (epoch s, was $ltt_ready1)" \
  "$(epoch "$ltt_ready1")" "$(epoch "$ltt_ready2")"
expect_gt "burning: VFMHealthy lastTransitionTime moved on False->True" \
  "$(epoch "$ltt_vfm1")" "$(epoch "$(cond_ltt "$ns" ebd burning VFMHealthy)")"

# 4. failing again: True -> False
wait_clock_past "$ltt_ready2"
k -n "$ns" annotate ebd burning --overwrite "$fail_ann=disk on fire" >/dev/null
wait_eq 60 "burning: Ready after failing again" "False/Error/1" cond_summary "$ns" ebd burning Ready
expect_eq "burning: VFMHealthy after failing again" "False/Error/1" \
  "$(cond_summary "$ns" ebd burning VFMHealthy)"
expect_eq "burning: VFMHealthy message after failing again" "disk on fire" \
  "$(cond_message "$ns" ebd burning VFMHealthy)"
ltt_ready3=$(cond_ltt "$ns" ebd burning Ready)
expect_gt "burning: Ready lastTransitionTime moved on True->False (epoch s, was $ltt_ready2)" \
  "$(epoch "$ltt_ready2")" "$(epoch "$ltt_ready3")"

# 5. and recovering again
wait_clock_past "$ltt_ready3"
k -n "$ns" annotate ebd burning "$fail_ann-" >/dev/null
wait_eq 60 "burning: Ready after the second recovery" "True/Ready/1" \
  cond_summary "$ns" ebd burning Ready
expect_gt "burning: Ready lastTransitionTime moved on the second False->True (was $ltt_ready3)" \
  "$(epoch "$ltt_ready3")" "$(epoch "$(cond_ltt "$ns" ebd burning Ready)")"

# The neighbour never moved.
expect_eq "calm: still Ready" "True/Ready/1" "$(cond_summary "$ns" ebd calm Ready)"
expect_eq "burning: generation (annotations do not bump it)" "1" "$(generation "$ns" ebd burning)"
expect_eq "burning: status.observedGeneration" "1" "$(observed_generation "$ns" ebd burning)"

# Events (events.k8s.io/v1) for the EBD.
ev_reasons() {
  k -n "$ns" get events.events.k8s.io --field-selector regarding.name=burning \
    -o jsonpath='{range .items[*]}{.reason}{"\n"}{end}' | sort -u | tr '\n' ' '
}
has_reasons() {
  local got
  got=$(ev_reasons)
  for r in "$@"; do [[ " $got" == *" $r "* ]] || { echo "$got"; return 1; }; done
}
wait_for 30 "events BecameUnready and BecameReady recorded for burning" has_reasons BecameUnready BecameReady
unready=$(k -n "$ns" get events.events.k8s.io --field-selector regarding.name=burning,reason=BecameUnready \
  -o jsonpath='{.items[0].type}|{.items[0].regarding.kind}|{.items[0].reportingController}')
expect_eq "BecameUnready event: type|regarding.kind|reportingController" \
  "Warning|EBD|ebdman.example.com/ebdman" "$unready"
# "with reason": the note is "<Reason>: <message>" (which reason: see
# test_no_spurious_flip.sh).
expect_match "BecameUnready event: note" '^[A-Z][A-Za-z]*: .+' \
  "$(k -n "$ns" get events.events.k8s.io --field-selector regarding.name=burning,reason=BecameUnready \
    -o jsonpath='{.items[0].note}')"
expect_eq "BecameReady event: type" "Normal" \
  "$(k -n "$ns" get events.events.k8s.io --field-selector regarding.name=burning,reason=BecameReady \
    -o jsonpath='{.items[0].type}')"

check_no_forbidden op sim
e2e_done
