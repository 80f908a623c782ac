#!/usr/bin/env bash
# e2e namespaces: ebdman bounded to the namespaces it is given.
#
# --namespace-selector: of three namespaces with EBDs, ebdman installs and
# reports in the one labelled, and in a second once it gains the label;
# when the first loses the label, ebdman leaves it alone - no write to any
# object there from then on (the apiserver's audit log), though its EBDs
# change under load meanwhile - while the changes in the selected one are
# all reconciled (nothing missed inside); labelled again, the changes made
# while it was out are reconciled. The namespace never labelled gets no
# write at all. --namespace given twice: both namespaces, and no other.
set -euo pipefail
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh"
e2e_init
require_audit_log

n=5
new_ns; a=$E2E_NS
new_ns; b=$E2E_NS
new_ns; c=$E2E_NS
sel_key=e2e.ebdman.example.com/selected
sel_val=${a##*-}
t0=$(utc_now)

# ebds NS: creates EBDs e-1..e-$n in NS.
ebds() {
  local i
  for i in $(seq 1 "$n"); do ebd_yaml "e-$i" "registry.example.com/vfm:1.$i" 1; done |
    k -n "$1" apply --server-side -f - >/dev/null
}
# writes_in NS SINCE: ebdman's writes to objects of NS since SINCE.
writes_in() { audit_ebdman "$2" | awk -v ns="$1" '$7 == ns' | grep -c . || true; }
# current NS: EBDs of NS whose status.observedGeneration is their generation.
current() {
  k -n "$1" get ebds -o jsonpath='{range .items[*]}{.metadata.generation}={.status.observedGeneration}{"\n"}{end}' |
    awk -F= '$1 == $2' | grep -c . || true
}
# left NS: how many of ebdman's three informers have let NS go (its log).
left() {
  grep -F 'namespace left the selection' "${E2E_LOG[op]}" | grep -cF "namespace=$1" || true
}

k label namespace "$a" "$sel_key=$sel_val" >/dev/null
for ns in "$a" "$b" "$c"; do ebds "$ns"; done
start_vfm_sim sim --delay 100ms
start_ebdman op --namespace-selector "$sel_key=$sel_val"

wait_eq 90 "EBDs Ready in the selected namespace" "$n" count_ready "$a"
expect_eq "VFMs in the namespace not selected (yet)" 0 "$(count "$b" vfms)"

# b gains the label: its EBDs are installed and reported.
k label namespace "$b" "$sel_key=$sel_val" >/dev/null
wait_eq 90 "EBDs Ready once their namespace gained the label" "$n" count_ready "$b"

# a loses the label while both namespaces' EBDs change.
k label namespace "$a" "$sel_key-" >/dev/null
wait_eq 60 "ebdman's informers that let $a go (log)" 3 left "$a"
t_left=$(utc_now)
for i in $(seq 1 "$n"); do
  for ns in "$a" "$b"; do
    k -n "$ns" patch ebd "e-$i" --type merge -p '{"spec":{"vfmTemplate":{"replicas":2}}}' >/dev/null
  done
done
wait_eq 90 "EBDs of the selected namespace reconciled after their change" "$n" current "$b"
expect_eq "ebdman's writes in $a after it left the selection (audit log)" 0 \
  "$(writes_in "$a" "$t_left")"
expect_eq "EBDs of $a reconciled after it left the selection" 0 "$(current "$a")"

# labelled again: what changed meanwhile is reconciled.
k label namespace "$a" "$sel_key=$sel_val" >/dev/null
wait_eq 90 "EBDs of $a reconciled once it is selected again" "$n" current "$a"
expect_eq "ebdman's writes in the namespace never selected (audit log)" 0 \
  "$(writes_in "$c" "$t0")"
check_no_forbidden op
stop_proc op
expect_eq "ebdman op: exit status after SIGTERM" 0 "$E2E_EXIT"

# --namespace, twice: those two and no other.
t_two=$(utc_now)
start_ebdman two --namespace "$c" --namespace "$b"
wait_eq 90 "EBDs Ready in the second of two --namespace" "$n" count_ready "$c"
k -n "$a" patch ebd e-1 --type merge -p '{"spec":{"vfmTemplate":{"replicas":3}}}' >/dev/null
k -n "$b" patch ebd e-1 --type merge -p '{"spec":{"vfmTemplate":{"replicas":3}}}' >/dev/null
wait_eq 60 "EBDs of $b current after a change" "$n" current "$b"
expect_eq "writes in $a by an ebdman of two other namespaces (audit log)" 0 \
  "$(writes_in "$a" "$t_two")"
check_no_forbidden two
e2e_done
