#!/usr/bin/env bash
# e2e delete_gc: deleting an EBD removes its VFM and its ConfigMap through
# their controller ownerReferences (kube-controller-manager's garbage
# collector; ebdman has no delete permission), both with the default
# (background) and with foreground cascading deletion; other EBDs' children
# stay, and ebdman does not recreate the children of a deleted EBD. (The
# garbage collector notices new resource types, such as freshly installed
# CRDs, only at its periodic discovery resync, every 30 s: on a fresh control
# plane the first deletion can take that long.)
set -euo pipefail
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh"
e2e_init

new_ns
ns=$E2E_NS
start_sim_and_op "$ns" 200ms

for name in doomed foreground keeper; do
  ebd_yaml "$name" registry.example.com/vfm:1.0 1 | k -n "$ns" apply -f - >/dev/null
done
for name in doomed foreground keeper; do
  wait_eq 60 "$name: Ready" "True/Ready/1" cond_summary "$ns" ebd "$name" Ready
  expect_eq "$name: VFM exists" "vfm.ebdman.example.com/$name" "$(k -n "$ns" get vfm "$name" -o name)"
  expect_eq "$name: ConfigMap exists" "configmap/$name-config" \
    "$(k -n "$ns" get configmap "$name-config" -o name)"
done

# Background cascading deletion (kubectl's default).
k -n "$ns" delete ebd doomed --wait=true --timeout=60s >/dev/null
wait_for 10 "doomed: EBD gone" gone "$ns" ebd doomed
wait_for 90 "doomed: VFM removed by the garbage collector" gone "$ns" vfm doomed
wait_for 90 "doomed: ConfigMap removed by the garbage collector" gone "$ns" configmap doomed-config

# Foreground: the EBD waits (foregroundDeletion finalizer) for its children,
# which carry blockOwnerDeletion.
k -n "$ns" delete ebd foreground --cascade=foreground --wait=false >/dev/null
wait_for 90 "foreground: VFM removed by the garbage collector" gone "$ns" vfm foreground
wait_for 90 "foreground: ConfigMap removed by the garbage collector" gone "$ns" configmap foreground-config
wait_for 90 "foreground: EBD gone after its children" gone "$ns" ebd foreground

# The survivor keeps its children, and ebdman did not bring the others back.
wait_for 30 "ebdman idle after the deletions" ebd_idle op 0
expect_eq "keeper: still Ready" "True/Ready/1" "$(cond_summary "$ns" ebd keeper Ready)"
expect_eq "VFMs left" "vfm.ebdman.example.com/keeper" "$(k -n "$ns" get vfms -o name)"
expect_eq "ebdman ConfigMaps left" "configmap/keeper-config" \
  "$(k -n "$ns" get configmaps -l app.kubernetes.io/managed-by=ebdman -o name)"

check_no_forbidden op sim
e2e_done
