#!/usr/bin/env bash
# e2e bad_input (issue #10, scenario 7): what a user can send does not wedge
# ebdman.
# 1. Invalid EBD specs are refused at admission by the CRD's schema and CEL
#    rules, each with a message naming the field and the rule (printed in
#    the test's output as kubectl prints it): a spec.vfmTemplate.image with
#    whitespace or empty, replicas out of 1..100, a config key that cannot
#    be a ConfigMap key, a config value that is not a string, spec, spec.vfmTemplate
#    or spec.vfmTemplate.image missing. None of them is stored.
# 2. A config bigger than a ConfigMap holds (1 MiB; the EBD itself is
#    accepted): Installed=False/InstallFailed naming the ConfigMap and the
#    limit (1048576 bytes), Ready the same, an InstallFailed event, no VFM;
#    no hot loop (no reconcile and no request from ebdman in a 10 s
#    window); shrinking the config installs it (generation 2, Ready).
# 3. EBDs deleted while their children are being applied (60 EBDs, deleted
#    right after the create): the garbage collector leaves no VFM or
#    ConfigMap behind, ebdman ends idle with no error loop (errors and
#    requests flat over a 10 s window).
# 4. The namespace a second ebdman (--namespace) watches is deleted under it
#    while its EBDs are Ready. Held by a ValidatingAdmissionPolicy that
#    refuses to delete the EBDs, the namespace controller deletes their
#    children first (it happens by chance otherwise): ebdman cannot make them
#    again (403, cause NamespaceTerminating) and says
#    Installed/Ready=False/NamespaceTerminating, logs no refusal (no
#    "forbidden" in its log) and does not loop. Released, the namespace
#    goes: ebdman keeps running and ready, its caches empty, no request, no
#    reconcile and no error over 10 s; when the namespace is made again, a
#    new EBD there is installed and Ready.
# KCR_CHAOS_LONG=1: 300 EBDs in part 3 instead of 60.
set -euo pipefail
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh"
e2e_init

nstorm=60
[[ ${KCR_CHAOS_LONG:-0} == 1 ]] && nstorm=300

new_ns
ns=$E2E_NS
start_sim_and_op "$ns" 200ms

# requests LABEL: API requests the process has sent (all methods and codes).
requests() { metric "$1" rest_client_requests_total; }
errors() { metric "$1" controller_runtime_reconcile_errors_total 'controller="ebd"'; }
# requests_quiet LABEL: no request for 3 s. The events recorder sends from
# its own thread after the reconciles that recorded them are done (ebd_idle
# does not see it), so its last Event writes can trail an idle queue; a
# retry loop never goes quiet, or shows up in the 10 s window after it.
requests_quiet() {
  local a b
  a=$(requests "$1") || return 1
  sleep 3
  b=$(requests "$1") || return 1
  echo "requests $a -> $b in 3 s"
  ((a == b))
}

# --- 1. admission
# refused WHAT SPEC-VFM-YAML EXPECTED-TEXT: kubectl create of an EBD "bad"
# with that spec.vfmTemplate fails, printing EXPECTED-TEXT.
refused() {
  local what=$1 body=$2 want=$3 out rc=0
  out=$(printf 'apiVersion: ebdman.example.com/v1beta1\nkind: EBD\nmetadata:\n  name: bad\n%s\n' \
    "$body" | k -n "$ns" create -f - 2>&1) || rc=$?
  expect_eq "$what: kubectl exit status" 1 "$rc"
  expect_contains "$what: kubectl says" "$want" "$out"
  printf '    kubectl: %s\n' "$(printf '%s' "$out" | tr '\n' ' ')"
}
vfm() { printf 'spec:\n  vfmTemplate:\n%s' "$(printf '    %s\n' "$@")"; }
refused "image with a space" "$(vfm 'image: "bad image"')" \
  "spec.vfmTemplate.image: Invalid value: \"bad image\": spec.vfmTemplate.image in body should match '^[^\\s]+\$'"
refused "empty image" "$(vfm 'image: ""')" "spec.vfmTemplate.image in body should be at least 1 chars long"
refused "replicas 0" "$(vfm 'image: img' 'replicas: 0')" \
  "spec.vfmTemplate.replicas in body should be greater than or equal to 1"
refused "replicas 101" "$(vfm 'image: img' 'replicas: 101')" \
  "spec.vfmTemplate.replicas in body should be less than or equal to 100"
refused "config key with a space" "$(vfm 'image: img' 'config:' '  ok: "1"' '  "a b": "2"')" \
  "spec.vfmTemplate.config: Invalid value: config key \"a b\" cannot be a ConfigMap key: ebdman renders config into a ConfigMap, whose keys are 1 to 253 letters, digits, '-', '_' and '.', and neither '.' nor starting with '..'"
refused "config key starting with .." "$(vfm 'image: img' 'config:' '  "..data": "1"')" \
  "config key \"..data\" cannot be a ConfigMap key"
refused "config key of 254 characters" "$(vfm 'image: img' 'config:' "  $(printf '%*s' 254 '' | tr ' ' k): \"1\"")" \
  "cannot be a ConfigMap key"
refused "config value not a string" "$(vfm 'image: img' 'config:' '  count: 5')" \
  "spec.vfmTemplate.config.count in body must be of type string"
refused "no image" "$(vfm 'replicas: 1')" "spec.vfmTemplate.image: Required value"
refused "no spec.vfmTemplate" "spec: {}" "spec.vfmTemplate: Required value"
refused "no spec" "" "spec: Required value"
wait_for 10 "none of the refused EBDs exists" gone "$ns" ebd bad
ebd_yaml fine "registry.example.com/vfm:1.0" 1 | k -n "$ns" create -f - >/dev/null
k -n "$ns" patch ebd fine --type merge -p '{"spec":{"vfmTemplate":{"config":{"key-1.x_Y":"v"}}}}' >/dev/null
pass "a config key of letters, digits, '-', '_' and '.' is accepted"

# --- 2. a config too big for a ConfigMap
t=$SECONDS
{
  printf 'apiVersion: ebdman.example.com/v1beta1\nkind: EBD\nmetadata:\n  name: big\nspec:\n  vfmTemplate:\n'
  printf '    image: registry.example.com/vfm:1.0\n    config:\n      blob: "'
  head -c 1100000 /dev/zero | tr '\0' x
  printf '"\n'
} >"$E2E_TMP/big.yaml"
# (kubectl create: apply would keep a 1 MiB last-applied annotation, which
# the 256 KiB annotation limit refuses.)
k -n "$ns" create -f "$E2E_TMP/big.yaml" >/dev/null
pass "an EBD with a 1,100,000-byte config is accepted"
wait_eq 60 "big: Installed" "False/InstallFailed/1" cond_summary "$ns" ebd big Installed
msg=$(cond_message "$ns" ebd big Installed)
expect_contains "big: the message names the ConfigMap" "ConfigMap big-config:" "$msg"
expect_contains "big: the message names the limit" "may not be more than 1048576 bytes" "$msg"
log "big: Installed message: $msg"
expect_eq "big: Ready" "False/InstallFailed/1" "$(cond_summary "$ns" ebd big Ready)"
expect_eq "big: Ready message" "$msg" "$(cond_message "$ns" ebd big Ready)"
expect_eq "big: no ConfigMap" 0 "$(count "$ns" configmaps ebdman.example.com/ebd=big)"
expect_eq "big: no VFM (not tried after the ConfigMap was refused)" 0 \
  "$(count "$ns" vfms ebdman.example.com/ebd=big)"
has_install_failed_event() {
  k -n "$ns" get events.events.k8s.io --field-selector regarding.name=big,reason=InstallFailed \
    -o jsonpath='{.items[*].note}' | grep -q '1048576 bytes'
}
wait_for 30 "big: InstallFailed event with the server's message" has_install_failed_event
wait_for 30 "ebdman idle" ebd_idle op 1
wait_for 30 "ebdman sends nothing more" requests_quiet op
r0=$(reconciles op) q0=$(requests op)
sleep 10
r1=$(reconciles op) q1=$(requests op)
expect_eq "reconciles in 10 s after big was refused (no hot loop)" 0 "$((r1 - r0))"
expect_eq "requests in 10 s after big was refused (no retry loop)" 0 "$((q1 - q0))"
k -n "$ns" patch ebd big --type json -p '[{"op":"replace","path":"/spec/vfmTemplate/config","value":{"blob":"small"}}]' >/dev/null
wait_eq 60 "big: Ready after shrinking the config" "True/Ready/2" cond_summary "$ns" ebd big Ready
expect_eq "big: Installed" "True/Installed/2" "$(cond_summary "$ns" ebd big Installed)"
expect_eq "big: ConfigMap data" '{"blob":"small"}' "$(jp "$ns" configmap big-config '{.data}')"
log "oversized config: refused, quiet and recovered in $((SECONDS - t)) s"

# --- 3. EBDs deleted while their children are being applied
t=$SECONDS
e0=$(errors op)
{ for ((i = 0; i < nstorm; i++)); do ebd_yaml "$(printf 'del-%03d' "$i")" registry.example.com/vfm:1.0 1; done; } \
  >"$E2E_TMP/storm.yaml"
k -n "$ns" create -f "$E2E_TMP/storm.yaml" >/dev/null
k -n "$ns" delete ebds --field-selector metadata.name!=fine,metadata.name!=big --wait=false >/dev/null
created=$(grep -F '"verb":"patch"' "$KCR_AUDIT_LOG" 2>/dev/null | grep -F "\"namespace\":\"$ns\",\"name\":\"del-" |
  grep -c '"code":20[01]' || true)
children() { echo "$(count "$ns" vfms)+$(count "$ns" configmaps app.kubernetes.io/managed-by=ebdman)"; }
wait_eq 60 "the deleted EBDs are gone" 2 count "$ns" ebds
wait_eq 60 "no VFM or ConfigMap left of them (garbage collector)" "2+2" children
wait_for 30 "ebdman idle" ebd_idle op 1
wait_for 30 "ebdman sends nothing more" requests_quiet op
e1=$(errors op) q0=$(requests op)
sleep 10
e2=$(errors op) q1=$(requests op)
expect_eq "reconcile errors in 10 s after the storm (no error loop)" 0 "$((e2 - e1))"
expect_eq "requests in 10 s after the storm (no retry loop)" 0 "$((q1 - q0))"
log "delete storm: $nstorm EBDs, $((created)) child/status writes of theirs succeeded before the delete won, $((e1 - e0)) reconcile errors, all collected in $((SECONDS - t)) s"
expect_eq "fine and big still Ready" "True True" \
  "$(cond_status "$ns" ebd fine Ready) $(cond_status "$ns" ebd big Ready)"

# --- 4. the namespace of a namespaced ebdman is deleted under it
new_ns
ns2=$E2E_NS
start_vfm_sim sim2 --namespace "$ns2" --delay 200ms
start_ebdman op2 --namespace "$ns2"
{ for n in x1 x2 x3; do ebd_yaml "$n" registry.example.com/vfm:1.0 1; done; } | k -n "$ns2" apply -f - >/dev/null
wait_eq 60 "EBDs Ready in $ns2" 3 count_ready "$ns2"
# The namespace controller deletes everything in the namespace, in no set
# order: now and then the children go while their EBD is still there, and
# ebdman cannot make them again (403, cause NamespaceTerminating). A
# ValidatingAdmissionPolicy that refuses to delete EBDs in ns2 makes that
# certain: the children go, the EBDs stay, the namespace stays Terminating.
hold=e2e-hold-$ns2
release_hold() {
  k delete validatingadmissionpolicybinding,validatingadmissionpolicy "$hold" \
    --ignore-not-found >/dev/null 2>&1 || true
}
trap 'rc=$?; release_hold; (exit $rc); _cleanup' EXIT
k apply -f - >/dev/null <<EOF
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: $hold
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
    - apiGroups: [ebdman.example.com]
      apiVersions: ["*"]
      operations: [DELETE]
      resources: [ebds]
  validations:
  - expression: "false"
    message: held by the e2e test bad_input
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata:
  name: $hold
spec:
  policyName: $hold
  validationActions: [Deny]
  matchResources:
    namespaceSelector:
      matchLabels:
        kubernetes.io/metadata.name: $ns2
EOF
held() {
  local out
  out=$(k -n "$ns2" delete ebd x1 --dry-run=server 2>&1) && return 1
  [[ $out == *"held by the e2e test"* ]]
}
wait_for 30 "deleting an EBD in $ns2 is refused (the hold is in effect)" held
t=$SECONDS
k delete namespace "$ns2" --wait=false >/dev/null
children2() { echo "$(count "$ns2" vfms)+$(count "$ns2" configmaps app.kubernetes.io/managed-by=ebdman)"; }
wait_eq 60 "the namespace controller deleted the children in $ns2" "0+0" children2
for n in x1 x2 x3; do
  wait_eq 30 "$n: Installed while its namespace is being deleted" "False/NamespaceTerminating/1" \
    cond_summary "$ns2" ebd "$n" Installed
done
msg=$(cond_message "$ns2" ebd x1 Installed)
expect_contains "x1: the message says why" "cannot be created: namespace $ns2 is being deleted" "$msg"
log "x1: $msg"
expect_eq "x1: Ready" "False/NamespaceTerminating/1" "$(cond_summary "$ns2" ebd x1 Ready)"
wait_for 30 "op2 idle" ebd_idle op2 1
r0=$(reconciles op2)
sleep 5
expect_eq "op2: reconciles in 5 s while its namespace cannot be emptied (no hot loop)" 0 \
  "$(($(reconciles op2) - r0))"
release_hold
ns_gone() { ! k get namespace "$1" -o name 2>/dev/null; }
wait_for 120 "namespace $ns2 is gone once the hold is released" ns_gone "$ns2"
log "namespace $ns2 deleted in $((SECONDS - t)) s"
cache_empty() {
  local n
  n=$(metric op2 kcr_informer_objects) || return 1
  echo "objects in op2's caches: $n"
  ((n == 0))
}
wait_for 30 "op2's caches are empty" cache_empty
wait_for 30 "op2 idle" ebd_idle op2 1
proc_alive op2 || fail "ebdman op2 is running after its namespace was deleted"
curl -sf -o /dev/null --max-time 2 "http://127.0.0.1:${E2E_HEALTH[op2]}/readyz" ||
  fail "ebdman op2 /readyz after its namespace was deleted" "200" "an error"
pass "ebdman op2 still running and ready"
e1=$(errors op2) q0=$(requests op2) r0=$(reconciles op2)
sleep 10
e2=$(errors op2) q1=$(requests op2) r1=$(reconciles op2)
expect_eq "op2: reconciles in 10 s with its namespace gone" 0 "$((r1 - r0))"
expect_eq "op2: reconcile errors in 10 s with its namespace gone" 0 "$((e2 - e1))"
# Only its watches run: each ends after 5-10 minutes, so no request at all.
expect_eq "op2: requests in 10 s with its namespace gone" 0 "$((q1 - q0))"
k create namespace "$ns2" >/dev/null
ebd_yaml again registry.example.com/vfm:1.0 1 | k -n "$ns2" apply -f - >/dev/null
wait_eq 60 "an EBD in the namespace made again: Ready" "True/Ready/1" cond_summary "$ns2" ebd again Ready
check_all_ready "$ns2" 1
check_children "$ns2"

check_no_forbidden op sim op2 sim2
e2e_done
