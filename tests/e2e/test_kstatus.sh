#!/usr/bin/env bash
# e2e kstatus: what GitOps tools (Flux, kpt, cli-utils) make of an EBD, with
# the real library: tools/controlplane/kstatus runs sigs.k8s.io/cli-utils's
# kstatus on `kubectl get -o json`. Through one EBD's life:
#   installing (its VFM delayed)         -> InProgress, Reconciling=True
#   installed and ready                  -> Current, no Reconciling/Stalled
#   VFM failed                           -> Failed with the VFM's message
#   recovered                            -> Current, Stalled removed
#   spec changed, ebdman not there       -> InProgress (generation not observed)
#   spec changed, VFM progressing        -> InProgress (Reconciling=True)
#   being deleted (held by a finalizer)  -> Terminating
# and a second EBD whose child name someone else holds (install refused) ->
# Failed with the conflict's message. `kubectl wait --for=condition=Ready`
# (and =false) keeps working throughout; the status writes are counted: two
# for an EBD that installs and becomes ready, none when nothing changed.
set -euo pipefail
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh"
e2e_init

KSTATUS=${KCR_KSTATUS_BIN:-$KCR_CONTROLPLANE_BIN/kstatus}
[[ -x $KSTATUS ]] ||
  fail "no kstatus checker at $KSTATUS (tools/controlplane/build builds it; or set KCR_KSTATUS_BIN)"

new_ns
ns=$E2E_NS
fail_ann=vfm-sim.ebdman.example.com/fail
delay_ann=vfm-sim.ebdman.example.com/delay
start_vfm_sim sim --namespace "$ns" --delay 200ms

# kst NAME: "Status: message" as kstatus computes it for the EBD.
kst() {
  local line
  line=$(k -n "$ns" get ebd "$1" -o json | "$KSTATUS") || return 1
  IFS=$'\t' read -r _ st msg <<<"$line"
  printf '%s: %s' "$st" "$msg"
}
# abnormal NAME: the EBD's Reconciling and Stalled as "R=status/reason S=status/reason".
abnormal() {
  echo "R=$(cond_status "$ns" ebd "$1" Reconciling)/$(cond_reason "$ns" ebd "$1" Reconciling)" \
    "S=$(cond_status "$ns" ebd "$1" Stalled)/$(cond_reason "$ns" ebd "$1" Stalled)"
}
writes() { metric op kcr_status_writes_total 'result="written"'; }

# 0. created before ebdman runs: not observed yet.
ebd_yaml a registry.example.com/vfm:1.0 1 "$delay_ann" 6s | k -n "$ns" apply -f - >/dev/null
expect_eq "a: kstatus before ebdman looked at it" \
  "InProgress: EBD generation is 1, but latest observed generation is 0" "$(kst a)"

# 1. installing: the VFM is held back for 6 s, so ebdman reports progress.
start_ebdman op --namespace "$ns"
wait_eq 30 "a: kstatus while its VFM is not ready" \
  "InProgress: vfm custom resource is not ready" kst a
expect_eq "a: Reconciling/Stalled while installing" "R=True/Progressing S=/" "$(abnormal a)"
expect_eq "a: Reconciling observedGeneration" 1 "$(cond_ogen "$ns" ebd a Reconciling)"

# 2. ready: Current, Reconciling removed (not False), kubectl wait works.
wait_eq 60 "a: kstatus once ready" "Current: Resource is Ready" kst a
expect_eq "a: Reconciling/Stalled once ready (removed)" "R=/ S=/" "$(abnormal a)"
expect_eq "a: Ready" "True/Ready/1" "$(cond_summary "$ns" ebd a Ready)"
out=$(k -n "$ns" wait --for=condition=Ready ebd/a --timeout=10s 2>&1) ||
  fail "kubectl wait --for=condition=Ready ebd/a: $out"
pass "kubectl wait --for=condition=Ready ebd/a"
wait_for 30 "ebdman idle" ebd_idle op 2
expect_eq "status writes for an EBD that installs and becomes ready" 2 "$(writes)"

# 3. VFM failed: Failed at once, with the VFM's message.
k -n "$ns" annotate ebd a "$fail_ann=disk on fire" >/dev/null
wait_eq 60 "a: kstatus with a failed VFM" "Failed: disk on fire" kst a
expect_eq "a: Reconciling/Stalled with a failed VFM" "R=/ S=True/Error" "$(abnormal a)"
expect_eq "a: Stalled message" "disk on fire" "$(cond_message "$ns" ebd a Stalled)"
expect_eq "a: Ready with a failed VFM" "False/Error/1" "$(cond_summary "$ns" ebd a Ready)"
out=$(k -n "$ns" wait --for=condition=Ready=false ebd/a --timeout=10s 2>&1) ||
  fail "kubectl wait --for=condition=Ready=false ebd/a: $out"
pass "kubectl wait --for=condition=Ready=false ebd/a"

# 4. recovered: Current, Stalled removed.
k -n "$ns" annotate ebd a "$fail_ann-" >/dev/null
wait_eq 60 "a: kstatus after recovery" "Current: Resource is Ready" kst a
expect_eq "a: Reconciling/Stalled after recovery (removed)" "R=/ S=/" "$(abnormal a)"

# 5. spec changed while no ebdman runs: the generation is not observed yet.
stop_proc op
expect_eq "ebdman: exit status after SIGTERM" 0 "$E2E_EXIT"
k -n "$ns" annotate ebd a --overwrite "$delay_ann=6s" >/dev/null
k -n "$ns" patch ebd a --type merge -p '{"spec":{"vfmTemplate":{"replicas":2}}}' >/dev/null
expect_eq "a: generation after the spec change" 2 "$(generation "$ns" ebd a)"
expect_eq "a: kstatus before ebdman saw the new spec" \
  "InProgress: EBD generation is 2, but latest observed generation is 1" "$(kst a)"

# 6. ebdman back: the VFM works on the new spec (6 s), then Current.
start_ebdman op --namespace "$ns"
wait_eq 30 "a: kstatus while the VFM works on the new spec" \
  "InProgress: vfm custom resource is not ready" kst a
expect_eq "a: Reconciling at generation 2" "True/Progressing/2" \
  "$(cond_summary "$ns" ebd a Reconciling)"
wait_eq 60 "a: kstatus once the new spec is ready" "Current: Resource is Ready" kst a
expect_eq "a: Reconciling/Stalled at generation 2 once ready" "R=/ S=/" "$(abnormal a)"
expect_eq "a: observedGeneration" 2 "$(observed_generation "$ns" ebd a)"
out=$(k -n "$ns" wait --for=condition=Ready ebd/a --timeout=10s 2>&1) ||
  fail "kubectl wait --for=condition=Ready ebd/a after the spec change: $out"
pass "kubectl wait --for=condition=Ready ebd/a after the spec change"
wait_for 30 "ebdman idle" ebd_idle op 1
expect_eq "status writes by the new ebdman for the spec change (progressing, ready)" 2 \
  "$(writes)"
sleep 2 # a measurement, not a wait: nothing changed, so nothing is written
expect_eq "status writes when nothing changed" 2 "$(writes)"

# 7. install refused: someone else's ConfigMap holds b's child name.
k -n "$ns" create configmap b-config --from-literal=owner=someone-else >/dev/null
ebd_yaml b registry.example.com/vfm:1.0 1 | k -n "$ns" apply -f - >/dev/null
wait_eq 60 "b: Reconciling/Stalled with its child name taken" "R=/ S=True/ChildConflict" abnormal b
expect_match "b: kstatus with its child name taken" "^Failed: .*b-config" "$(kst b)"
expect_eq "b: kstatus message is Stalled's" "Failed: $(cond_message "$ns" ebd b Stalled)" "$(kst b)"

# 8. being deleted: Terminating while a finalizer holds the EBD.
k -n "$ns" patch ebd a --type merge -p '{"metadata":{"finalizers":["e2e.example.com/hold"]}}' >/dev/null
k -n "$ns" delete ebd a --wait=false >/dev/null
wait_eq 30 "a: kstatus while being deleted" "Terminating: Resource scheduled for deletion" kst a
k -n "$ns" patch ebd a --type merge -p '{"metadata":{"finalizers":null}}' >/dev/null
wait_for 60 "a: gone once the finalizer is removed" gone "$ns" ebd a

check_no_forbidden op
e2e_done
