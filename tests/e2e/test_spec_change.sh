#!/usr/bin/env bash
# e2e spec_change: patching spec.vfmTemplate (replicas, config) bumps the EBD's
# generation; status.observedGeneration and every condition's
# observedGeneration follow it; the VFM's spec and the ConfigMap's data
# follow the new spec (a removed config key disappears from the ConfigMap);
# while the VFM works on the new generation the EBD says Progressing at the
# new generation.
set -euo pipefail
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh"
e2e_init

new_ns
ns=$E2E_NS
start_sim_and_op "$ns" 500ms

cat <<'EOF' | k -n "$ns" apply -f - >/dev/null
apiVersion: ebdman.example.com/v1beta1
kind: EBD
metadata:
  name: shifting
  annotations:
    vfm-sim.ebdman.example.com/delay: "4s"
spec:
  vfmTemplate:
    image: registry.example.com/vfm:1.0
    replicas: 1
    config:
      mode: fast
      level: "1"
EOF

all_conds() { # "observedGeneration Ready Installed VFMHealthy" as status/reason/og
  echo "$(observed_generation "$ns" ebd shifting) $(cond_summary "$ns" ebd shifting Ready)" \
    "$(cond_summary "$ns" ebd shifting Installed) $(cond_summary "$ns" ebd shifting VFMHealthy)"
}
vfm_spec() { jp "$ns" vfm shifting '{.spec.image} {.spec.replicas} {.spec.config}'; }
cm_data() { jp "$ns" configmap shifting-config '{.data}'; }

wait_eq 60 "shifting: observedGeneration and conditions at generation 1" \
  "1 True/Ready/1 True/Installed/1 True/Ready/1" all_conds
expect_eq "shifting: generation" "1" "$(generation "$ns" ebd shifting)"
expect_eq "VFM spec at generation 1" 'registry.example.com/vfm:1.0 1 {"level":"1","mode":"fast"}' \
  "$(vfm_spec)"
expect_eq "ConfigMap data at generation 1" '{"level":"1","mode":"fast"}' "$(cm_data)"
vfm_gen1=$(generation "$ns" vfm shifting)

# Generation 2: replicas and config change.
k -n "$ns" patch ebd shifting --type merge \
  -p '{"spec":{"vfmTemplate":{"replicas":3,"config":{"mode":"careful","extra":"yes"}}}}' >/dev/null
expect_eq "shifting: generation after the patch" "2" "$(generation "$ns" ebd shifting)"
# vfm-sim takes 4 s for the new generation: meanwhile the status describes
# generation 2 as progressing (fresh, not a stale Ready=True of generation 1).
wait_eq 20 "shifting: VFMHealthy while the VFM progresses" "False/Progressing/2" \
  cond_summary "$ns" ebd shifting VFMHealthy
expect_eq "shifting: observedGeneration while the VFM progresses" "2" \
  "$(observed_generation "$ns" ebd shifting)"
wait_eq 60 "shifting: observedGeneration and conditions at generation 2" \
  "2 True/Ready/2 True/Installed/2 True/Ready/2" all_conds
expect_eq "VFM spec at generation 2" \
  'registry.example.com/vfm:1.0 3 {"extra":"yes","level":"1","mode":"careful"}' "$(vfm_spec)"
expect_eq "ConfigMap data at generation 2" '{"extra":"yes","level":"1","mode":"careful"}' "$(cm_data)"
expect_eq "VFM generation bumped by the new spec" "$((vfm_gen1 + 1))" "$(generation "$ns" vfm shifting)"
expect_eq "VFM Ready observedGeneration (vfm-sim saw the new spec)" "$((vfm_gen1 + 1))" \
  "$(cond_ogen "$ns" vfm shifting Ready)"

# Generation 3: a config key removed, the image changed.
k -n "$ns" patch ebd shifting --type merge \
  -p '{"spec":{"vfmTemplate":{"image":"registry.example.com/vfm:2.0","config":{"level":null}}}}' >/dev/null
expect_eq "shifting: generation after the second patch" "3" "$(generation "$ns" ebd shifting)"
wait_eq 60 "shifting: observedGeneration and conditions at generation 3" \
  "3 True/Ready/3 True/Installed/3 True/Ready/3" all_conds
expect_eq "VFM spec at generation 3" \
  'registry.example.com/vfm:2.0 3 {"extra":"yes","mode":"careful"}' "$(vfm_spec)"
expect_eq "ConfigMap data at generation 3 (removed key gone)" '{"extra":"yes","mode":"careful"}' \
  "$(cm_data)"

# A metadata-only change does not bump the generation.
k -n "$ns" label ebd shifting team=storage >/dev/null
expect_eq "shifting: generation after a label change" "3" "$(generation "$ns" ebd shifting)"
expect_eq "shifting: observedGeneration after a label change" "3" \
  "$(observed_generation "$ns" ebd shifting)"

check_no_forbidden op sim
e2e_done
