#!/usr/bin/env bash
# e2e ring_churn (issue #32): the ring's members come and go under a storm of
# spec changes, and no object is ever written by two replicas at once.
#  1. Three ebdman replicas with --ring (6 s leases, renew deadline 4 s,
#     retry 1 s); N EBDs converge; three writers bump the EBDs' specs in a
#     loop from then on. r0's writes of objects take 1.5 s to arrive (a
#     proxy holds them): when r0 gives buckets up, its writes let out before
#     are still on their way, and only its drain keeps them from landing
#     after the new owner's.
#  2. r1 leaves gracefully (SIGTERM, exit 0): r0 and r2 share its buckets
#     (and, bounded loads, some of r0's move to r2, which acts on them at
#     once).
#  3. r3 joins: r0 and r2 hand it its share.
#  4. r2 is SIGKILLed (no goodbye): r0 and r3 take its buckets once its
#     Lease expired, each on its own clock.
#  5. r3 is SIGSTOPped past its lease, then resumed: r0 takes everything
#     once r3's Lease expired; r3, resumed, finds its Lease lost and exits 1
#     without a write.
#  6. The storm stops; every EBD converges on its latest generation with
#     its children (r0 alone, its writes no longer held).
# The apiserver's audit log ($KCR_AUDIT_LOG; ebdman's user agent names its
# pid) proves who wrote what: between two of the steps above, every object of
# the test's namespace is written by one replica, then maybe by another
# (its hand-over), never back to one that wrote it before in that step; no write by r1 after it left, none
# by r2 after its kill, none by r3 after it was frozen (a second's grace for
# requests already on their way). The time each hand-over took is printed.
# Short form: 120 EBDs (CI); KCR_CHAOS_LONG=1: 2000 EBDs. E2E_SHARD_GATE=on:
# the apiserver restarted first with its ShardedListAndWatch gate on (each
# replica's EBD cache then gets its buckets alone from the server).
set -euo pipefail
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh"
e2e_init
require_audit_log
if [[ ${KCR_CHAOS_LONG:-0} == 1 ]]; then n=2000; else n=120; fi
lease_s=6

new_ns
ns=$E2E_NS
ring=e2e-churn-${ns##*-}
drop_leases() {
  k -n "$E2E_SYSTEM_NS" delete leases -l "kcr.dev/ring=$ring" --ignore-not-found >/dev/null 2>&1 || true
}
E2E_EXIT_HOOKS+=(drop_leases)
flags=(--namespace "$ns" --ring "$ring" --leader-elect-lease-duration "${lease_s}s"
  --leader-elect-renew-deadline 4s --leader-elect-retry-period 1s)
members() { metric "$1" kcr_ring_members; }
owned_by() { # owned_by LABEL...: the buckets they own, added up
  local s=0 r
  for r in "$@"; do s=$((s + $(metric "$r" kcr_ring_buckets_owned))); done
  echo "$s"
}
# step NAME: marks the start of a step in $E2E_TMP/steps.txt ("TIME NAME").
step() {
  printf '%s %s\n' "$(utc_now)" "$1" >>"$E2E_TMP/steps.txt"
  log "step: $1"
}
declare -A pid_of=()
# busy LABEL: waits until LABEL finished 20 more reconciles (the storm keeps
# it at work), so that every step happens under load.
busy() {
  wait_for 60 "$1 at work (20 more reconciles)" at_least $(($(reconciles "$1") + 20)) reconciles "$1"
}

t_start=$(utc_now)
shard_gate
start_vfm_sim sim --namespace "$ns" --delay 200ms
# r0 talks through a proxy that will hold its writes of objects (not of
# Leases) 1.5 s, with 16 workers: writes let through by the gate are still
# on their way when r0 gives buckets up, and land after the new owner's
# unless r0 drains.
start_chaosproxy proxy
for r in r0 r1 r2; do
  if [[ $r == r0 ]]; then
    extra=(--kubeconfig "$(via_proxy "$E2E_SA_KUBECONFIG" proxy)" --workers 16)
  else
    extra=()
  fi
  start_ebdman "$r" "${flags[@]}" --ring-identity "$r" "${extra[@]}"
  pid_of[$r]=${E2E_PID[$r]}
done
for r in r0 r1 r2; do
  wait_eq 30 "$r: ring members" 3 members "$r"
done
wait_eq 10 "buckets owned by r0, r1 and r2" 256 owned_by r0 r1 r2
for i in $(seq -w 1 "$n"); do ebd_yaml "e-$i" registry.example.com/vfm:1.0 1; done |
  k -n "$ns" apply --server-side -f - >/dev/null
wait_for 300 "$n EBDs current" conditions_current "$ns" "$n"
proxy_rules proxy <<'RULES'
delay ms=1500 verb=POST,PUT,PATCH,DELETE resource=ebds,vfms,configmaps agent=ebdman
RULES
storm_start "$ns" "$n"
step storm
busy r0
busy r2

# 2. A replica leaves gracefully: r0 and r2 share its buckets, and some of
# r0's move to r2 (bounded loads) - r2 acts on them at once.
step leave-r1
t0=$SECONDS
stop_proc r1
expect_eq "r1's exit status (SIGTERM)" 0 "$E2E_EXIT"
wait_eq 10 "buckets owned by r0 and r2 after r1 left" 256 owned_by r0 r2
took_leave=$((SECONDS - t0))
busy r2

# 3. A replica joins.
step join-r3
t0=$SECONDS
start_ebdman r3 "${flags[@]}" --ring-identity r3
pid_of[r3]=${E2E_PID[r3]}
wait_eq 30 "r3: ring members" 3 members r3
wait_eq 10 "buckets owned by r0, r2 and r3" 256 owned_by r0 r2 r3
expect_gt "buckets owned by r3" 0 "$(owned_by r3)"
took_join=$((SECONDS - t0))
busy r3

# 4. A replica killed: r0 and r3 take its buckets once its Lease expired,
# each on its own clock.
step kill-r2
t0=$SECONDS
stop_proc r2 KILL
expect_eq "r2's exit status (SIGKILL)" 137 "$E2E_EXIT"
wait_eq $((lease_s + 10)) "buckets owned by r0 and r3 after r2's kill" 256 owned_by r0 r3
took_kill=$((SECONDS - t0))
expect_eq "r0: members" 2 "$(members r0)"
busy r3

# 5. A replica frozen past its lease, then resumed.
step stop-r3
t0=$SECONDS
kill -STOP "${pid_of[r3]}"
wait_eq $((lease_s + 10)) "buckets owned by r0 while r3 is frozen" 256 owned_by r0
took_stop=$((SECONDS - t0))
step cont-r3
kill -CONT "${pid_of[r3]}"
r3_gone() { ! proc_alive r3; }
wait_for 30 "r3 exits once resumed (its Lease was lost)" r3_gone
stop_proc r3
expect_eq "r3's exit status (lost its ring Lease)" 1 "$E2E_EXIT"

# 6. Convergence.
step end
storm_stop
held=$(metric proxy chaosproxy_injected_total 'fault="delay"')
proxy_rules proxy </dev/null # r0 alone converges at full speed
wait_for 300 "all $n EBDs current at their latest generation" conditions_current "$ns" "$n"
check_conditions_current "$ns" "$n"
check_children "$ns"
moved=$(awk '$3 > 1' "$E2E_TMP/ebds.txt" | wc -l)
expect_gt "EBDs whose generation the storm moved" 0 "$moved"

# Who wrote what: "TIME REPLICA OBJECT" for the writes of the test
# namespace's EBDs (spec and status as one) and children; Events are the
# recorder's, made and named per replica.
audit_ebdman "$t_start" | awk -v ns="$ns" -v map="$(for r in "${!pid_of[@]}"; do printf '%s=%s ' "${pid_of[$r]}" "$r"; done)" '
  BEGIN { n = split(map, kv, " "); for (i = 1; i <= n; i++) { split(kv[i], p, "="); who[p[1]] = p[2] } }
  $7 == ns && $6 !~ /^events\// { obj = $6; sub(/\/status$/, "", obj); print $1, ($3 in who ? who[$3] : "pid" $3), obj }' \
  >"$E2E_TMP/writes.txt"
expect_gt "writes audited in the test namespace" 0 "$(grep -c . "$E2E_TMP/writes.txt" || true)"
for r in r0 r1 r2 r3; do
  expect_gt "writes by $r" 0 "$(awk -v r="$r" '$2 == r' "$E2E_TMP/writes.txt" | wc -l)"
done
# Each write's step: the last step that began at or before it.
awk 'NR == FNR { t[++k] = $1; s[k] = $2; next }
  { st = "before"; for (i = 1; i <= k; i++) if (t[i] <= $1) st = s[i]; print $1, $2, $3, st }' \
  "$E2E_TMP/steps.txt" "$E2E_TMP/writes.txt" >"$E2E_TMP/writes-steps.txt"
# Per object and step, the runs of writers in time order, starting from the
# last writer before the step: each writer has one run at most - it may
# hand over (r1>r0, and on to r3 when r0's first writes of r1's objects
# came late), never come back (r0>r2>r0).
awk '{ key = $3 " " $4
       if (!(key in runs)) {
         cur[key] = ($3 in last) ? last[$3] : $2; runs[key] = cur[key]; seen[key, cur[key]] = 1
       }
       if ($2 != cur[key]) {
         if ((key, $2) in seen) back[key] = 1
         seen[key, $2] = 1; runs[key] = runs[key] ">" $2; cur[key] = $2
       }
       last[$3] = $2 }
     END { for (k in back) print k, runs[k] }' \
  "$E2E_TMP/writes-steps.txt" | sort >"$E2E_TMP/back-and-forth.txt"
expect_eq "objects written back and forth by two replicas within one step" 0 \
  "$(grep -c . "$E2E_TMP/back-and-forth.txt" || true)"
[[ -s $E2E_TMP/back-and-forth.txt ]] && head -5 "$E2E_TMP/back-and-forth.txt"
late() { # late REPLICA STEP: its writes received a second or more after STEP began
  local t
  t=$(awk -v s="$2" '$2 == s { print $1 }' "$E2E_TMP/steps.txt")
  t=$(date -u -d "$t + 1 second" +%Y-%m-%dT%H:%M:%S.%6NZ)
  awk -v r="$1" -v t="$t" '$2 == r && $1 >= t' "$E2E_TMP/writes.txt" | wc -l
}
expect_eq "writes by r1 a second after it was told to leave" 0 "$(late r1 leave-r1)"
expect_eq "writes by r2 a second after its kill" 0 "$(late r2 kill-r2)"
expect_eq "writes by r3 a second after it was frozen" 0 "$(late r3 stop-r3)"
expect_gt "r0's writes the proxy held" 0 "$held"
check_no_forbidden_gate r0 sim

log "result (shard gate ${E2E_GATE:-off}): $n EBDs under a storm of spec changes ($moved moved); all buckets owned" \
  "again ${took_leave} s after a leave, ${took_join} s after a join, ${took_kill} s after a" \
  "kill (lease ${lease_s} s), ${took_stop} s after a freeze; r0's writes held $held times; objects written back and" \
  "forth within a step: 0; $(grep -c . "$E2E_TMP/writes.txt") writes audited"
e2e_done
