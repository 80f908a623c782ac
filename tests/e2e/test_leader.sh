#!/usr/bin/env bash
# e2e leader: two ebdman replicas with --leader-elect (Lease ebdman-leader in
# ebdman-system, both under the ServiceAccount): exactly one leads
# (leader_election_master_status 1) and only that one reconciles; EBDs become
# Ready; after SIGTERM the leader releases the Lease, exits 0, and the other
# replica takes over quickly and reconciles a new EBD.
set -euo pipefail
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh"
e2e_init

new_ns
ns=$E2E_NS
ok_reconciles() { metric "$1" controller_runtime_reconcile_total 'controller="ebd"' 'result="success"'; }

start_vfm_sim sim --namespace "$ns" --delay 200ms
start_replicas "$ns"
leader=$E2E_LEADER standby=$E2E_STANDBY
log "leader: $leader, standby: $standby"
expect_eq "standby $standby: leader_election_master_status" "0" "$(leading "$standby")"
holder=$(lease_holder)
expect_ne "Lease $E2E_SYSTEM_NS/$E2E_LEASE holderIdentity" "" "$holder"

for i in 1 2 3 4 5; do
  ebd_yaml "ebd-$i" registry.example.com/vfm:1.0 1
done | k -n "$ns" apply -f - >/dev/null
wait_eq 60 "EBDs with Ready=True" "5" count_ready "$ns"
expect_gt "leader $leader: successful reconciles" 0 "$(ok_reconciles "$leader")"
expect_eq "standby $standby: reconciles" "0" \
  "$(metric "$standby" controller_runtime_reconcile_total 'controller="ebd"')"
expect_eq "standby $standby: status writes" "0" \
  "$(metric "$standby" kcr_status_writes_total 'result="written"')"
expect_eq "exactly one leader, still" "$leader" "$(leaders a b)"

# Hand-over: SIGTERM the leader.
t0=$SECONDS
stop_proc "$leader" TERM
expect_eq "old leader $leader: exit status after SIGTERM" "0" "$E2E_EXIT"
wait_eq 30 "standby $standby: leader_election_master_status after the leader stopped" "1" \
  leading "$standby"
takeover=$((SECONDS - t0))
log "take-over after ${takeover} s"
# Released on SIGTERM, the Lease is taken at the standby's next retry (2 s);
# an unreleased one would only expire after 15 s.
if ((takeover > 10)); then
  fail "take-over after SIGTERM of the leader (the Lease should be released)" "<= 10 s" "$takeover s"
fi
pass "take-over within $takeover s"
expect_ne "Lease holderIdentity after the take-over" "$holder" "$(lease_holder)"

before=$(ok_reconciles "$standby")
ebd_yaml late registry.example.com/vfm:1.0 1 | k -n "$ns" apply -f - >/dev/null
wait_eq 60 "late: Ready (reconciled by the new leader)" "True/Ready/1" cond_summary "$ns" ebd late Ready
expect_gt "new leader $standby: successful reconciles" "$before" "$(ok_reconciles "$standby")"
expect_eq "EBDs with Ready=True" "6" "$(count_ready "$ns")"

check_no_forbidden a b sim
e2e_done
