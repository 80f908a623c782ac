#!/usr/bin/env bash
# e2e ready: 200 EBDs created with one kubectl apply all reach Ready=True,
# with Installed=True and VFMHealthy=True, status.observedGeneration ==
# metadata.generation == 1 and observedGeneration 1 on every condition; each
# has exactly one VFM <name> and one ConfigMap <name>-config, each with a
# single, controller ownerReference to it.
set -euo pipefail
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh"
e2e_init

n=${E2E_READY_COUNT:-200}
new_ns
ns=$E2E_NS
start_sim_and_op "$ns" 200ms

manifest=$E2E_TMP/ebds.yaml
for i in $(seq -w 1 "$n"); do
  ebd_yaml "ebd-$i" "registry.example.com/vfm:1.$i" $((10#$i % 3 + 1))
done >"$manifest"
log "creating $n EBDs with one kubectl apply"
k -n "$ns" apply --server-side -f "$manifest" >/dev/null
expect_eq "EBDs created" "$n" "$(count "$ns" ebds)"

wait_eq 180 "EBDs with Ready=True" "$n" count_ready "$ns"

check_all_ready "$ns" "$n"
check_children "$ns"

check_no_forbidden op sim
e2e_done
