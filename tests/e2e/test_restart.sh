#!/usr/bin/env bash
# e2e restart: 50 EBDs are being created and installed (vfm-sim takes 2 s per
# VFM) when ebdman is killed with SIGKILL; a new ebdman converges: all 50
# Ready, with exactly 50 VFMs and 50 ebdman ConfigMaps in the namespace (no
# duplicate children), each with a single controller ownerReference.
set -euo pipefail
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh"
e2e_init

n=50
new_ns
ns=$E2E_NS
start_sim_and_op "$ns" 2s

manifest=$E2E_TMP/ebds.yaml
for i in $(seq -w 1 "$n"); do
  ebd_yaml "ebd-$i" "registry.example.com/vfm:1.$i" 1
done >"$manifest"
log "creating $n EBDs with one kubectl apply (in the background)"
k -n "$ns" apply --server-side -f "$manifest" >"$E2E_TMP/apply.out" 2>&1 &
apply_pid=$!

wait_for 60 "ebdman installed at least 5 VFMs" at_least 5 count "$ns" vfms
stop_proc op KILL
expect_eq "ebdman exit status after SIGKILL" "137" "$E2E_EXIT"
ready_at_kill=$(count_ready "$ns")
vfms_at_kill=$(count "$ns" vfms)
log "killed ebdman with $vfms_at_kill VFMs installed and $ready_at_kill EBDs Ready"
if ((ready_at_kill >= n)); then
  fail "ebdman was not killed mid-way" "fewer than $n EBDs Ready at the kill" "$ready_at_kill"
fi
pass "ebdman killed mid-way ($ready_at_kill of $n EBDs Ready)"
apply_rc=0
wait "$apply_pid" || apply_rc=$?
expect_eq "kubectl apply of $n EBDs (exit status)" "0" "$apply_rc"

start_ebdman op --namespace "$ns"
wait_eq 150 "EBDs with Ready=True after the restart" "$n" count_ready "$ns"
check_all_ready "$ns" "$n"
check_children "$ns"

check_no_forbidden op sim
e2e_done
