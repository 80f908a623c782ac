#!/usr/bin/env bash
# e2e leader_kill (issue 10, scenario 4): the leader is SIGKILLed under load;
# the standby takes over when the Lease runs out; no object is written by
# both.
#  1. Two replicas with --leader-elect (the shipped defaults: Lease 15 s,
#     renewal every 2 s, a standby retries every 2 s + up to 120% jitter);
#     N EBDs converge under the leader.
#  2. Three writers bump the EBDs' specs in a loop; once the leader is busy
#     with them it is SIGKILLed (a node lost: no release of the Lease, no
#     goodbye). The writers go on until the standby leads.
#  3. The standby takes the Lease once it expired and converges every EBD on
#     its latest generation (check_conditions_current, check_children).
# The apiserver's audit log ($KCR_AUDIT_LOG; ebdman's user agent names its
# pid) proves who wrote what: no write by the old leader after the kill,
# none by the standby before it (not even its Lease: it only read it while
# it was held), and the new leader's first write - taking the Lease - comes
# no earlier than the lease duration after the old leader's last renewal
# and at most lease duration + two of the standby's polls after the kill.
# Short form: 60 EBDs (CI); KCR_CHAOS_LONG=1: 300 EBDs.
set -euo pipefail
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh"
e2e_init
require_audit_log
if [[ ${KCR_CHAOS_LONG:-0} == 1 ]]; then n=300; else n=60; fi
lease_s=15 retry_s=2 # ebdman's defaults (kcr/cli.h), which the test keeps

new_ns
ns=$E2E_NS
# audit_writes PID: the writes the apiserver audited from the ebdman process
# PID, one per line, in time order: "RECEIVED CODE VERB RESOURCE/NAME[/SUB]".
# Only this test's time and objects: its namespace and the Lease.
audit_writes() {
  audit_ebdman "$t_start" | awk -v pid="$1" -v ns="$ns" -v lease="leases/$E2E_LEASE" \
    '$3 == pid && ($7 == ns || $6 == lease) {print $1, $4, $5, $6}'
}
secs() { date -u -d "$1" +%s.%N; } # RFC 3339 -> epoch seconds
minus() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a - b }'; }

t_start=$(utc_now)
start_vfm_sim sim --namespace "$ns" --delay 200ms
start_replicas "$ns"
leader=$E2E_LEADER standby=$E2E_STANDBY
old_pid=${E2E_PID[$leader]}
new_pid=${E2E_PID[$standby]}
log "leader: $leader (pid $old_pid), standby: $standby (pid $new_pid)"

for i in $(seq -w 1 "$n"); do ebd_yaml "e-$i" registry.example.com/vfm:1.0 1; done |
  k -n "$ns" apply --server-side -f - >/dev/null
wait_for 120 "$n EBDs current under the leader" conditions_current "$ns" "$n"
expect_eq "standby $standby: reconciles before the kill" "0" "$(reconciles "$standby")"

# Load: three writers bump specs (each a third of the EBDs) until told to stop.
storm_start "$ns" "$n"
wait_for 60 "the leader busy with the storm (30 more reconciles)" \
  at_least $(($(reconciles "$leader") + 30)) reconciles "$leader"

# The kill.
t_kill=$(utc_now)
stop_proc "$leader" KILL
t_gone=$(utc_now) # reaped: it sends nothing more
expect_eq "old leader $leader: exit status (SIGKILL)" "137" "$E2E_EXIT"
log "SIGKILLed the leader $leader (pid $old_pid) at $t_kill, in the middle of the storm"
wait_eq 60 "standby $standby: leader_election_master_status" "1" leading "$standby"
storm_stop
t_storm_end=$SECONDS
wait_for 180 "all $n EBDs current at their latest generation under the new leader" \
  conditions_current "$ns" "$n"
converge=$((SECONDS - t_storm_end))
check_conditions_current "$ns" "$n"
check_children "$ns"
moved=$(awk '$3 > 1' "$E2E_TMP/ebds.txt" | wc -l)
expect_gt "EBDs whose generation the storm moved" 0 "$moved"
maxgen=$(awk '$3 > m { m = $3 } END { print m + 0 }' "$E2E_TMP/ebds.txt")

# Who wrote what, from the audit log.
audit_writes "$old_pid" >"$E2E_TMP/writes-old.txt"
audit_writes "$new_pid" >"$E2E_TMP/writes-new.txt"
# Requests the old leader sent just before it died can be received (and
# time-stamped) by the apiserver a little after the kill: those are counted
# as in flight; none may be received a second after it was gone.
t_late=$(date -u -d "$t_gone + 1 second" +%Y-%m-%dT%H:%M:%S.%6NZ)
old_before=$(awk -v t="$t_kill" '$1 < t' "$E2E_TMP/writes-old.txt" | wc -l)
old_inflight=$(awk -v t="$t_kill" '$1 >= t' "$E2E_TMP/writes-old.txt" | wc -l)
old_late=$(awk -v t="$t_late" '$1 >= t' "$E2E_TMP/writes-old.txt" | wc -l)
new_before=$(awk -v t="$t_kill" '$1 < t' "$E2E_TMP/writes-new.txt" | wc -l)
new_after=$(awk -v t="$t_kill" '$1 >= t' "$E2E_TMP/writes-new.txt" | wc -l)
expect_gt "writes by the old leader (pid $old_pid) before the kill" 0 "$old_before"
expect_eq "writes by the old leader (pid $old_pid) received a second after it was gone" "0" "$old_late"
expect_eq "writes by the standby (pid $new_pid) before the kill" "0" "$new_before"
expect_gt "writes by the new leader (pid $new_pid) after the kill" 0 "$new_after"
first_new=$(head -n 1 "$E2E_TMP/writes-new.txt")
expect_match "the new leader's first write: taking the Lease" \
  "^[^ ]+ 200 update leases/$E2E_LEASE\$" "$first_new"
last_old=$(tail -n 1 "$E2E_TMP/writes-old.txt")
if [[ ${last_old%% *} < ${first_new%% *} ]]; then
  pass "the old leader's last write (${last_old%% *}) came before the new leader's first (${first_new%% *})"
else
  fail "writes of the two leaders in turn" "the old leader's last before the new leader's first" \
    "'$last_old' vs '$first_new'"
fi
first_work=$(awk '!/ leases\// { print; exit }' "$E2E_TMP/writes-new.txt")
last_renew=$(grep " leases/$E2E_LEASE\$" "$E2E_TMP/writes-old.txt" | tail -n 1)
t_first=$(secs "${first_new%% *}")
takeover=$(minus "$t_first" "$(secs "$t_kill")")
since_renew=$(minus "$t_first" "$(secs "${last_renew%% *}")")
to_work=$(minus "$(secs "${first_work%% *}")" "$(secs "$t_kill")")
gap=$(minus "$t_first" "$(secs "${last_old%% *}")")
log "take-over: Lease taken $takeover s after the kill and $since_renew s after the old" \
  "leader's last renewal; first reconcile write $to_work s after the kill"
# The standby counts the lease duration from when it saw the last renewal,
# which is after the renewal: never earlier than lease_s after it.
if awk -v d="$since_renew" -v l="$lease_s" 'BEGIN { exit !(d >= l - 0.5) }'; then
  pass "the Lease was taken $since_renew s after the last renewal (not before it expired: >= $lease_s s)"
else
  fail "time from the old leader's last renewal to the take-over" ">= $lease_s s" "$since_renew s"
fi
# It sees a renewal at its next poll (up to 2.2 retry periods later) and
# takes the expired Lease at the poll after the expiry (again up to 2.2).
bound=$(awk -v l="$lease_s" -v r="$retry_s" 'BEGIN { print l + 2 * 2.2 * r }')
if awk -v d="$takeover" -v b="$bound" 'BEGIN { exit !(d <= b) }'; then
  pass "take-over $takeover s after the kill (<= lease $lease_s s + two polls = $bound s)"
else
  fail "time from the kill to the new leader's first write" "<= $bound s" "$takeover s"
fi
both=$(comm -12 <(awk '{print $4}' "$E2E_TMP/writes-old.txt" | sort -u) \
  <(awk '{print $4}' "$E2E_TMP/writes-new.txt" | sort -u) | wc -l)
proc_alive "$standby" && [[ ${E2E_PID[$standby]} == "$new_pid" ]] ||
  fail "the new leader $standby (pid $new_pid) alive"
pass "the new leader $standby (pid $new_pid) never crashed"
check_no_forbidden "$standby" sim

log "result: $n EBDs under a storm of spec changes (highest generation $maxgen);" \
  "leader SIGKILLed; Lease taken $takeover s after the kill ($since_renew s after the last" \
  "renewal; lease $lease_s s); first reconcile write $to_work s after the kill; converged" \
  "$converge s after the storm ended; writes: old leader $old_before before the kill" \
  "($old_inflight in flight at the kill, 0 later), new leader $new_before before / $new_after" \
  "after; $gap s between the old leader's last write and the new leader's first; objects" \
  "written by both in turn: $both, at the same time: 0; lost: 0; duplicate children: 0"
e2e_done
