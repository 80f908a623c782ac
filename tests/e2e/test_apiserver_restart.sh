#!/usr/bin/env bash
# e2e apiserver_restart (issue 10, scenario 2): the apiserver goes away twice
# while EBDs converge, and ebdman (and vfm-sim) ride it out.
#  1. N EBDs are created by one kubectl apply (in the background); when a
#     fifth of them have a VFM, kube-apiserver is SIGKILLed (no graceful
#     shutdown: every connection is cut), stays down 3 s and is started again
#     (tools/controlplane/restart-apiserver --start-only). The interrupted
#     apply is repeated, as a user would.
#  2. A second apply changes a third of the specs (generation 2) and makes a
#     tenth of the VFMs fail (vfm-sim's fail annotation, copied to the VFM
#     by ebdman); while that is being worked on, the apiserver is stopped
#     (SIGTERM) and restarted again after 3 s (restart-apiserver --down 3).
#  3. Everything converges: every EBD current at its generation with the
#     conditions its VFM's report calls for (check_conditions_current), one
#     VFM and one ConfigMap each (check_children); ebdman and vfm-sim are
#     the processes started at the beginning (never crashed, never
#     restarted) and exit 0 on SIGTERM.
# Short form: 120 EBDs (CI); KCR_CHAOS_LONG=1: 500 EBDs.
# Prints the measured numbers on a "result:" line.
set -euo pipefail
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh"
e2e_init

if [[ ${KCR_CHAOS_LONG:-0} == 1 ]]; then n=500; else n=120; fi
fail_ann=vfm-sim.ebdman.example.com/fail

new_ns
ns=$E2E_NS
start_sim_and_op "$ns" 1s
op_pid=${E2E_PID[op]}
sim_pid=${E2E_PID[sim]}

# manifest FILE CHANGED: the N EBDs; with CHANGED=1 every third one has
# replicas 2 and every tenth one carries the fail annotation.
manifest() {
  local i r
  for i in $(seq -w 1 "$n"); do
    r=1
    if (($2)) && ((10#$i % 3 == 0)); then r=2; fi
    if (($2)) && ((10#$i % 10 == 0)); then
      ebd_yaml "ebd-$i" registry.example.com/vfm:1.0 "$r" "$fail_ann" "disk $i on fire"
    else
      ebd_yaml "ebd-$i" registry.example.com/vfm:1.0 "$r"
    fi
  done >"$1"
}
both_alive() {
  [[ ${E2E_PID[op]} == "$op_pid" && ${E2E_PID[sim]} == "$sim_pid" ]] && proc_alive op &&
    proc_alive sim
}

manifest "$E2E_TMP/ebds-1.yaml" 0
manifest "$E2E_TMP/ebds-2.yaml" 1

# 1. SIGKILL of the apiserver while the EBDs are being created.
log "creating $n EBDs with one kubectl apply (in the background)"
k -n "$ns" apply --server-side -f "$E2E_TMP/ebds-1.yaml" >"$E2E_TMP/apply-1.out" 2>&1 &
apply_pid=$!
wait_for 120 "ebdman installed at least $((n / 5)) VFMs" at_least $((n / 5)) count "$ns" vfms
ready1=$(count_ready "$ns")
pid1=$(apiserver_pid)
t_kill1=$SECONDS
kill_apiserver
log "SIGKILLed kube-apiserver (pid $pid1) with $ready1 of $n EBDs Ready"
apply_rc=0
wait "$apply_pid" || apply_rc=$?
log "the apply cut by the kill exited with $apply_rc"
restart_apiserver --start-only --down 3
log "kube-apiserver back (pid $(apiserver_pid)) after $((SECONDS - t_kill1)) s"
if both_alive; then pass "ebdman and vfm-sim survived the first outage"; else
  fail "ebdman (pid $op_pid) and vfm-sim (pid $sim_pid) alive after the first outage"; fi
retry k -n "$ns" apply --server-side -f "$E2E_TMP/ebds-1.yaml" >/dev/null ||
  fail "applying the $n EBDs again after the restart"

# 2. New specs and failures, and a second outage while they are worked on.
retry k -n "$ns" apply --server-side -f "$E2E_TMP/ebds-2.yaml" >/dev/null ||
  fail "applying the changed EBDs"
pending=$(conditions_current "$ns" "$n" | sed -n 1p || true)
log "changes applied ($pending); stopping the apiserver"
expect_match "EBDs still converging when the apiserver stops again" \
  "^$n EBDs, [1-9][0-9]* not current" "$pending"
pid2=$(apiserver_pid)
t_stop2=$SECONDS
restart_apiserver --down 3
t_back=$SECONDS
how2=SIGTERM
grep -q "(pid $pid2) ignored SIGTERM" "$E2E_TMP/restart-apiserver.log" && how2="SIGTERM, SIGKILL 5 s later"
log "kube-apiserver (pid $pid2) stopped ($how2) and back (pid $(apiserver_pid)) after $((t_back - t_stop2)) s"

# 3. Convergence.
wait_for 300 "all $n EBDs current after the second restart" conditions_current "$ns" "$n"
converge=$((SECONDS - t_back))
check_conditions_current "$ns" "$n"
gen2=$(awk '$3 == 2' "$E2E_TMP/ebds.txt" | wc -l)
expect_eq "EBDs at generation 2 (every third one)" "$((n / 3))" "$gen2"
expect_eq "EBDs Ready (all but the failing tenth)" "$((n - n / 10))" "$(count_ready "$ns")"
check_children "$ns"
if both_alive; then pass "ebdman (pid $op_pid) and vfm-sim (pid $sim_pid) never crashed nor restarted"; else
  fail "ebdman (pid $op_pid) and vfm-sim (pid $sim_pid) alive at the end"; fi
check_no_forbidden_but_warmup op sim

log "result: $n EBDs; 2 apiserver restarts survived (SIGKILL, then $how2; 3 s down each);" \
  "converged $converge s after the last one; relists after 410: ebdman $(relists op)," \
  "vfm-sim $(relists sim); $E2E_WARMUP_403 log lines with a 403 during the warm-ups;" \
  "requests by code: ebdman $(request_codes op), vfm-sim $(request_codes sim);" \
  "lost: 0; duplicate children: 0"
e2e_done
