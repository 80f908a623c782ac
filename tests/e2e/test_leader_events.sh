#!/usr/bin/env bash
# e2e leader_events: the last events of a leader that stops are written.
# One ebdman replica with --leader-elect; an EBD flaps Ready -> not ready ->
# Ready -> not ready, so BecameReady and BecameUnready each happen twice.
# The repeat of an Event is a series update that the recorder holds back for
# series_flush_ms (30 s); SIGTERM comes long before that. The manager must
# flush its recorder while it still holds (and renews) the Lease, so on the
# server each Event's series.count is 2 after the exit - not 1, which is
# what a flush after the Lease's release leaves (its writes are refused by
# the write gate: "this replica does not hold the leader lease").
set -euo pipefail
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh"
e2e_init

new_ns
ns=$E2E_NS
fail_ann=vfm-sim.ebdman.example.com/fail

start_vfm_sim sim --namespace "$ns" --delay 100ms
start_ebdman op --namespace "$ns" --leader-elect --leader-election-namespace "$E2E_SYSTEM_NS"
wait_eq 60 "op: leader_election_master_status" "1" leading op

# event_count REASON: the series count of the Event with that reason about
# EBD flap (1 without a series; empty when there is no such Event).
event_count() {
  k -n "$ns" get events.events.k8s.io \
    -o jsonpath='{range .items[?(@.reason=="'"$1"'")]}{.regarding.name} {.series.count}{"\n"}{end}' |
    awk '$1 == "flap" { n = ($2 == "" ? 1 : $2); if (n > max) max = n } END { if (max) print max }'
}

ebd_yaml flap registry.example.com/vfm:1.0 1 | k -n "$ns" apply -f - >/dev/null
wait_eq 60 "flap: Ready" "True/Ready/1" cond_summary "$ns" ebd flap Ready
wait_eq 30 "BecameReady Event, first occurrence" "1" event_count BecameReady
for round in 1 2; do
  k -n "$ns" annotate ebd flap --overwrite "$fail_ann=disk on fire" >/dev/null
  wait_eq 60 "flap: Ready after failing (round $round)" "False/Error/1" \
    cond_summary "$ns" ebd flap Ready
  if ((round == 1)); then
    k -n "$ns" annotate ebd flap "$fail_ann-" >/dev/null
    wait_eq 60 "flap: Ready after recovering" "True/Ready/1" cond_summary "$ns" ebd flap Ready
  fi
done
wait_eq 30 "BecameUnready Event, first occurrence" "1" event_count BecameUnready
# Both repeats are recorded now and wait for their series write (30 s).
wait_for 30 "op: the 2 repeats recorded (kcr_events_total aggregated)" \
  at_least 2 metric op kcr_events_total 'result="aggregated"'

stop_proc op TERM
expect_eq "op: exit status after SIGTERM" "0" "$E2E_EXIT"
expect_eq "BecameReady Event: series.count on the server after the leader stopped" "2" \
  "$(event_count BecameReady)"
expect_eq "BecameUnready Event: series.count on the server after the leader stopped" "2" \
  "$(event_count BecameUnready)"
expect_eq "Lease released (holderIdentity)" "" "$(lease_holder)"
if grep -q 'does not hold the leader lease' "${E2E_LOG[op]}"; then
  grep 'does not hold the leader lease' "${E2E_LOG[op]}" | head -3
  fail "op: a write was refused by the write gate at shutdown"
fi
pass "op: no write refused by the write gate at shutdown"

check_no_forbidden op sim
e2e_done
