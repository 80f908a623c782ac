#!/usr/bin/env bash
# e2e foreign_child (issue #10, scenario 6): an object that already holds an
# EBD's child name and is someone else's is never taken over.
#
# Before ebdman starts, the cluster admin (kubectl, field managers
# kubectl-create / kubectl-client-side-apply) makes:
#   a-config  ConfigMap, no labels, no owner: invisible to ebdman's ConfigMap
#             informer (it lists managed-by=ebdman only), so only the
#             apiserver can tell ebdman it exists - the same path as a child
#             created between ebdman's cache read and its apply;
#   b         VFM, no owner (in ebdman's VFM cache);
#   c-config  ConfigMap labelled managed-by=ebdman, controlled by another
#             object (ConfigMap c-owner);
#   d         VFM, no owner, whose EBD is deleted while it conflicts;
# and EBDs a, b, c, d, plus e whose children are free.
# Checks: a-d are Installed=False/ChildConflict (Ready too) with a message
# naming kind, namespace/name, the owner and the field managers; e is Ready;
# their objects are byte-for-byte untouched (resourceVersion, no ebdman
# field manager, no ownerReference added) and the audit log shows no write by
# ebdman to them that succeeded; a ChildConflict event; no hot loop (a
# bounded number of reconciles in a 10 s window); deleting EBD d leaves VFM d
# (while the garbage collector removes e's children when e is deleted); once
# the owners delete a-config, b and c-config, EBDs a, b and c install and
# become Ready with exactly one VFM and one ConfigMap each.
# KCR_CHAOS_LONG=1: 100 more EBDs f-000..f-099 whose child names are taken
# (VFMs f-<even>, unlabelled ConfigMaps f-<odd>-config), with the same
# checks.
set -euo pipefail
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh"
e2e_init
require_audit_log

new_ns
ns=$E2E_NS
sa_user="system:serviceaccount:$E2E_SYSTEM_NS:$E2E_SA"

# --- their objects, before any EBD
k -n "$ns" create configmap a-config --from-literal=theirs=a >/dev/null
k -n "$ns" create configmap c-owner --from-literal=role=owner >/dev/null
owner_uid=$(jp "$ns" configmap c-owner '{.metadata.uid}')
cat <<EOF | k -n "$ns" apply -f - >/dev/null
apiVersion: v1
kind: ConfigMap
metadata:
  name: c-config
  labels:
    app.kubernetes.io/managed-by: ebdman
  ownerReferences:
  - apiVersion: v1
    kind: ConfigMap
    name: c-owner
    uid: $owner_uid
    controller: true
data:
  theirs: c
EOF
for v in b d; do
  printf 'apiVersion: ebdman.example.com/v1alpha1\nkind: VFM\nmetadata:\n  name: %s\nspec:\n  image: theirs/%s:1\n' \
    "$v" "$v" | k -n "$ns" create -f - >/dev/null
done
# snapshot KIND NAME: what must not change: all but the status (vfm-sim
# reports on every VFM in the namespace, theirs too) - ownerReferences,
# labels, annotations, data, spec, generation and the field managers of the
# object itself, and for ConfigMaps (no status) the resourceVersion.
snapshot() {
  local rv=
  [[ $1 == configmap ]] && rv='{.metadata.resourceVersion}'
  jp "$ns" "$1" "$2" "$rv|{.metadata.generation}|{.metadata.ownerReferences}|{.metadata.labels}|{.metadata.annotations}|{.data}|{.spec}|{range .metadata.managedFields[*]}{.manager}/{.subresource} {end}" |
    sed -E 's#[^ |]+/status ##g'
}
declare -A before=()
for o in configmap/a-config vfm/b configmap/c-config vfm/d; do
  before[$o]=$(snapshot "${o%/*}" "${o#*/}")
done
nextra=0
[[ ${KCR_CHAOS_LONG:-0} == 1 ]] && nextra=100
extra=()
for ((i = 0; i < nextra; i++)); do
  extra+=("$(printf 'f-%03d' "$i")")
  if ((i % 2 == 0)); then
    printf -- '---\napiVersion: ebdman.example.com/v1alpha1\nkind: VFM\nmetadata:\n  name: %s\nspec:\n  image: theirs/x:1\n' "${extra[i]}"
  else
    printf -- '---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s-config\ndata:\n  theirs: "yes"\n' "${extra[i]}"
  fi
done >"$E2E_TMP/extra.yaml"
((nextra == 0)) || k -n "$ns" create -f "$E2E_TMP/extra.yaml" >/dev/null
pass "their objects made: ConfigMaps a-config (no label, no owner), c-config (controlled by ConfigMap c-owner), VFMs b and d (no owner), and $nextra more"

start_sim_and_op "$ns" 200ms
start=$SECONDS
{ for n in a b c d e "${extra[@]}"; do ebd_yaml "$n" registry.example.com/vfm:1.0 1; done; } |
  k -n "$ns" apply -f - >/dev/null

for n in a b c d; do
  wait_eq 60 "$n: Installed" "False/ChildConflict/1" cond_summary "$ns" ebd "$n" Installed
done
conflicts() {
  k -n "$ns" get ebds -o jsonpath='{range .items[*]}{.status.conditions[?(@.type=="Installed")].reason}{"\n"}{end}' |
    grep -c '^ChildConflict$' || true
}
wait_eq 120 "EBDs with Installed=False/ChildConflict" $((4 + nextra)) conflicts
t_conflict=$((SECONDS - start))
wait_eq 60 "e (no conflict): Ready" "True/Ready/1" cond_summary "$ns" ebd e Ready
for n in a b c d; do
  expect_eq "$n: Ready" "False/ChildConflict/1" "$(cond_summary "$ns" ebd "$n" Ready)"
done

msg=$(cond_message "$ns" ebd a Installed)
expect_contains "a: message names the ConfigMap" "ConfigMap $ns/a-config exists and is not this EBD's" "$msg"
expect_contains "a: message names the owner" "it has no owner" "$msg"
expect_contains "a: message names who wrote it" "written by kubectl-create" "$msg"
expect_contains "a: message says what to do" "delete or rename that ConfigMap, or use another EBD name" "$msg"
expect_eq "a: Ready message" "$msg" "$(cond_message "$ns" ebd a Ready)"
log "a: $msg"
msg=$(cond_message "$ns" ebd b Installed)
expect_contains "b: message names the VFM" "VFM $ns/b exists and is not this EBD's (it has no owner; written by kubectl-create)" "$msg"
msg=$(cond_message "$ns" ebd c Installed)
expect_contains "c: message names the ConfigMap and its controller" \
  "ConfigMap $ns/c-config exists and is not this EBD's (its controller is ConfigMap c-owner (uid $owner_uid); written by kubectl-client-side-apply)" "$msg"
expect_eq "b: no VFMHealthy from someone else's VFM" "False/Progressing/1" \
  "$(cond_summary "$ns" ebd b VFMHealthy)"

has_conflict_event() {
  k -n "$ns" get events.events.k8s.io --field-selector regarding.name=a,reason=ChildConflict \
    -o jsonpath='{.items[*].note}' | grep -q "a-config exists"
}
wait_for 30 "a: ChildConflict Warning event" has_conflict_event

# --- nothing of theirs was touched
check_untouched() {
  local o
  for o in "$@"; do
    expect_eq "$o: unchanged (resourceVersion|generation|ownerReferences|labels|annotations|data|spec|managers)" \
      "${before[$o]}" "$(snapshot "${o%/*}" "${o#*/}")"
  done
}
check_untouched configmap/a-config vfm/b configmap/c-config vfm/d
expect_eq "a's ConfigMap was not created (the name is theirs)" "0" \
  "$(count "$ns" configmaps app.kubernetes.io/managed-by=ebdman,ebdman.example.com/ebd=a)"
# audit_writes RESOURCE NAME: the HTTP code of each write ebdman's account
# made to that object in ns.
audit_writes() {
  grep -F "\"username\":\"$sa_user\"" "$KCR_AUDIT_LOG" |
    grep -F "\"objectRef\":{\"resource\":\"$1\",\"namespace\":\"$ns\",\"name\":\"$2\"" |
    grep -E '"verb":"(create|update|patch|delete)"' | grep -o '"code":[0-9]*' | cut -d: -f2 || true
}
refused=0
for o in configmaps/a-config vfms/b configmaps/c-config vfms/d; do
  all=$(audit_writes "${o%/*}" "${o#*/}")
  codes=$(sort <<<"$all" | uniq -c | tr -s ' ' | tr '\n' ',')
  if [[ $'\n'$all == *$'\n'2* ]]; then
    fail "no write by ebdman to their $o succeeded (audit log)" "only refusals" "'$codes'"
  fi
  refused=$((refused + $(grep -c . <<<"$all" || true)))
  log "audit: ebdman's writes to $o (count code): ${codes:-none}"
done
for ((i = 0; i < nextra; i++)); do
  if ((i % 2 == 0)); then o=vfms/${extra[i]}; else o=configmaps/${extra[i]}-config; fi
  all=$(audit_writes "${o%/*}" "${o#*/}")
  [[ $'\n'$all != *$'\n'2* ]] || fail "no write by ebdman to their $o succeeded" "none" "'$all'"
  refused=$((refused + $(grep -c . <<<"$all" || true)))
done
expect_eq "VFMs in $ns with an owner (e's only: none of theirs adopted)" "e" \
  "$(k -n "$ns" get vfms -o jsonpath='{range .items[*]}{.metadata.name}={.metadata.ownerReferences[*].uid}{"\n"}{end}' |
    awk -F= '$2 != "" { print $1 }' | xargs)"
pass "the audit log shows no successful write by ebdman to their objects ($refused refused create-only applies)"

# --- no hot loop: a conflict waits for a change (or a 30 s re-check of
# a-config, which no watch of ebdman shows).
sleep 2
r0=$(reconciles op)
sleep 10
r1=$(reconciles op)
# (the 30 s re-checks of the unlabelled ConfigMaps' EBDs: a third at most)
max=$((3 + nextra / 2 / 3 + 1))
if ((r1 - r0 > max)); then
  fail "reconciles in 10 s while $((4 + nextra)) EBDs conflict (no hot loop)" "at most $max" "$((r1 - r0))"
fi
pass "$((r1 - r0)) reconcile(s) in 10 s while $((4 + nextra)) EBDs conflict (no hot loop)"

# --- deleting the EBD does not delete their object; the garbage collector
# is at work meanwhile (it removes e's children).
k -n "$ns" delete ebd d e --wait=true >/dev/null
wait_for 60 "e's VFM is collected" gone "$ns" vfm e
wait_for 60 "e's ConfigMap is collected" gone "$ns" configmap e-config
check_untouched vfm/d
pass "their VFM d outlived EBD d"

# --- once they delete their objects, the EBDs install
k -n "$ns" delete configmap a-config c-config --wait=true >/dev/null
k -n "$ns" delete vfm b d --wait=true >/dev/null
((nextra == 0)) || k -n "$ns" delete -f "$E2E_TMP/extra.yaml" --wait=true >/dev/null
released=$SECONDS
wait_eq 30 "b: Ready after their VFM went (woken by its deletion)" "True/Ready/1" \
  cond_summary "$ns" ebd b Ready
wait_eq 30 "c: Ready after their ConfigMap went (woken by its deletion)" "True/Ready/1" \
  cond_summary "$ns" ebd c Ready
wait_eq 45 "a: Ready after their ConfigMap went (the 30 s re-check)" "True/Ready/1" \
  cond_summary "$ns" ebd a Ready
wait_eq 60 "all EBDs Ready" $((3 + nextra)) count_ready "$ns"
t_release=$((SECONDS - released))
check_all_ready "$ns" $((3 + nextra))
check_children "$ns"
expect_eq "a's ConfigMap data is the EBD's" '{"name":"a"}' "$(jp "$ns" configmap a-config '{.data}')"
log "conflicts reported after ${t_conflict} s; all three installed ${t_release} s after their objects went"

check_no_forbidden op sim
e2e_done
