#!/usr/bin/env bash
# e2e ring (issue #32, first steps): three ebdman replicas with --ring share
# the EBDs of a namespace.
# - Each joins: its Lease <ring>-<identity> in ebdman-system, and every
#   replica's kcr_ring_members is 3; the buckets they own add up to 256;
#   each one's /readyz says it is a member owning what is assigned to it.
# - 90 EBDs made once all three are members: all Ready with their children;
#   each EBD's status is written by exactly one replica (their logs'
#   "status written" lines), and each replica wrote some.
# - One replica stopped with SIGTERM (it leaves: its Lease's holder is
#   cleared): the other two see 2 members within 5 s, well inside the 15 s
#   lease, and a spec change of every EBD then converges (observedGeneration
#   2) - the share of the replica that left was taken over.
# - Each replica caches its share alone: the EBDs it caches are those whose
#   buckets it owns (kcr_informer_objects = kcr_controller_objects_owned),
#   and the three caches add up to the 90 EBDs; the children's caches add
#   up to the children (each by its owner's bucket).
# - No request refused by RBAC (the shipped Role allows the ring's Leases).
# With E2E_SHARD_GATE=on (tests/e2e/test_ring_gate.sh) the apiserver is
# restarted first with its ShardedListAndWatch feature gate on (and again
# without it at the end): each replica's EBD cache then says the server
# filters by shard (told by a LIST asking for no bucket: an EBD in the
# answer says the server ignored it), and the same checks hold.
# Then SIGTERM: exit 0.
set -euo pipefail
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh"
e2e_init

new_ns
ns=$E2E_NS
ring=e2e-ring-${ns##*-}
n=90

drop_leases() {
  k -n "$E2E_SYSTEM_NS" delete leases -l "kcr.dev/ring=$ring" --ignore-not-found >/dev/null 2>&1 || true
}
E2E_EXIT_HOOKS+=(drop_leases)

shard_gate
gate=$E2E_GATE
start_vfm_sim sim --namespace "$ns" --delay 200ms
for r in r0 r1 r2; do
  start_ebdman "$r" --namespace "$ns" --ring "$ring" --ring-identity "$r"
done
members() { metric "$1" kcr_ring_members; }
for r in r0 r1 r2; do
  wait_eq 30 "$r: ring members" 3 members "$r"
done
owned_by() { # owned_by LABEL...: the buckets they own (handed over), added up
  local s=0 r
  for r in "$@"; do s=$((s + $(metric "$r" kcr_ring_buckets_owned))); done
  echo "$s"
}
wait_eq 10 "buckets owned by the three (handed over)" 256 owned_by r0 r1 r2
for r in r0 r1 r2; do
  expect_match "$r's /readyz?verbose on the ring" \
    '\[\+\]ring ok: a member: 3 members, [0-9]+ of the [0-9]+ buckets assigned to it owned' \
    "$(curl -sf --max-time 5 "http://127.0.0.1:${E2E_HEALTH[$r]}/readyz?verbose")"
done
expect_eq "the ring's Leases" "$ring-r0 $ring-r1 $ring-r2" \
  "$(k -n "$E2E_SYSTEM_NS" get leases -l "kcr.dev/ring=$ring" -o jsonpath='{.items[*].metadata.name}')"

for ((i = 0; i < n; i++)); do ebd_yaml "$(printf 'e%03d' "$i")" registry.example.com/vfm:1 1; done |
  k -n "$ns" apply --server-side -f - >/dev/null
wait_eq 120 "EBDs Ready" "$n" count_ready "$ns"
check_all_ready "$ns" "$n"
check_children "$ns"

# Who wrote each EBD's status.
writers() {
  local r
  for r in r0 r1 r2; do
    grep 'msg="status written"' "${E2E_LOG[$r]}" | grep -o ' name=[^ ]*' | sort -u | sed "s/\$/ $r/"
  done | sort | awk '{ w[$1] = w[$1] " " $2; c[$1]++ } END { for (k in w) print k, c[k], w[k] }'
}
writers >"$E2E_TMP/writers.txt"
expect_eq "EBDs whose status was written" "$n" "$(grep -c . "$E2E_TMP/writers.txt" || true)"
expect_eq "EBDs written by more than one replica" 0 "$(awk '$2 != 1' "$E2E_TMP/writers.txt" | grep -c . || true)"
for r in r0 r1 r2; do
  expect_gt "EBDs written by $r" 0 "$(grep -c " $r\$" "$E2E_TMP/writers.txt" || true)"
done
cached() { # cached RESOURCE LABEL...: the objects the replicas' caches hold, added up
  local res=$1 s=0 r
  shift
  for r in "$@"; do s=$((s + $(metric "$r" kcr_informer_objects "informer=\"$res\""))); done
  echo "$s"
}
for r in r0 r1 r2; do
  expect_eq "$r caches the EBDs it owns, no more" "$(metric "$r" kcr_controller_objects_owned)" \
    "$(cached ebds.ebdman.example.com "$r")"
  expect_gt "EBDs $r does not cache" 0 "$((n - $(cached ebds.ebdman.example.com "$r")))"
done
expect_eq "EBDs cached by the three" "$n" "$(cached ebds.ebdman.example.com r0 r1 r2)"
expect_eq "VFMs cached by the three" "$n" "$(cached vfms.ebdman.example.com r0 r1 r2)"
expect_eq "ConfigMaps cached by the three" "$n" "$(cached configmaps r0 r1 r2)"

stop_proc r2
expect_eq "r2's exit status after SIGTERM" 0 "$E2E_EXIT"
expect_eq "r2's Lease holder after it left" "" \
  "$(k -n "$E2E_SYSTEM_NS" get lease "$ring-r2" -o jsonpath='{.spec.holderIdentity}')"
for r in r0 r1; do
  wait_eq 5 "$r: ring members once r2 left" 2 members "$r"
done
for ((i = 0; i < n; i++)); do ebd_yaml "$(printf 'e%03d' "$i")" registry.example.com/vfm:1 2; done |
  k -n "$ns" apply --server-side -f - >/dev/null
converged() {
  k -n "$ns" get ebds -o jsonpath='{range .items[*]}{.status.observedGeneration}/{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' |
    grep -c '^2/True$' || true
}
wait_eq 120 "EBDs Ready at generation 2 with two replicas" "$n" converged

# (the buckets r2 gave up made r0 and r1 list again, with EBDs there to ask about)
if [[ $gate == on ]]; then
  want="filters by shard" other="ignores shardSelector"
else
  want="ignores shardSelector" other="filters by shard"
fi
for r in r0 r1; do
  expect_gt "$r's EBD cache: the server $want (gate $gate)" 0 \
    "$(grep 'informer=ebds.ebdman.example.com' "${E2E_LOG[$r]}" | grep -c "the server $want" || true)"
done
for r in r0 r1 r2; do
  expect_eq "$r's EBD cache: never 'the server $other'" 0 \
    "$(grep 'informer=ebds.ebdman.example.com' "${E2E_LOG[$r]}" | grep -c "the server $other" || true)"
done
check_no_forbidden_gate r0 r1 r2 sim
e2e_done
