#!/usr/bin/env bash
# node: `tools/controlplane/start --with-node` brings up a node "localhost"
# that is Ready and untainted; an image packed by tools/controlplane/node/oci-image
# and imported with `ctr -n k8s.io images import` runs as a Pod (non-root,
# read-only root filesystem, ServiceAccount token mounted) to completion with
# exit code 0, a Pod IP from the CNI range, and its output in `kubectl logs`
# (apiserver -> kubelet with verified certificates); a Deployment becomes
# Available (scheduler, deployment and replicaset controllers) and is left
# running, and from its network namespace the apiserver answers at the
# kubernetes Service IP (https://10.0.0.1:443). Teardown leaves the host
# exactly as found: the snapshot of
# tools/controlplane/node/host-state (sysctls, mounts, links, routes, iptables,
# kubelet/containerd/CNI paths, cgroups, processes) taken before equals the one
# taken after, while the one taken with the node up shows the node (so the
# comparison can fail).
#
# Starts its own control plane (it checks the host after teardown), so it runs
# outside `start` and needs root:
#   KCR_SOURCE_DIR=$PWD bash tests/node/test_node.sh
# CTest label `node`.
set -euo pipefail
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/../e2e/lib.sh"
src=${KCR_SOURCE_DIR:-}
[[ -n $src ]] || fail "KCR_SOURCE_DIR is not set (tests/CMakeLists.txt sets it)"
host_state=$src/tools/controlplane/node/host-state

# ---- with the node up (run by start) ----------------------------------------
if [[ ${1:-} == --inner ]]; then
  tmp=$2
  expect_eq "node localhost Ready" True \
    "$(k get node localhost -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}')"
  expect_eq "node localhost taints" "" "$(k get node localhost -o 'jsonpath={.spec.taints}')"

  "$src/tools/controlplane/node/oci-image" --name kcr.local/hello:1 --entrypoint /hello \
    --user 65534:65534 --out "$tmp/hello.tar" "$KCR_CONTROLPLANE_DIR/node/images/pause:/hello"
  ctr --address "$KCR_CONTAINERD_SOCKET" -n k8s.io images import "$tmp/hello.tar" >/dev/null
  pass "hello image imported with ctr"

  k apply -f - >/dev/null <<'YAML'
apiVersion: v1
kind: Pod
metadata: {name: hello, namespace: default}
spec:
  restartPolicy: Never
  securityContext: {runAsNonRoot: true}
  containers:
  - name: hello
    image: kcr.local/hello:1
    imagePullPolicy: Never
    args: [hello, from, kcr]
    securityContext: {readOnlyRootFilesystem: true, allowPrivilegeEscalation: false}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: sleeper, namespace: default}
spec:
  replicas: 1
  selector: {matchLabels: {app: sleeper}}
  template:
    metadata: {labels: {app: sleeper}}
    spec:
      containers:
      - name: pause
        image: kcr.local/pause:1
        imagePullPolicy: Never
YAML
  wait_eq 60 "Pod hello's phase" Succeeded k get pod hello -o 'jsonpath={.status.phase}'
  expect_eq "hello's exit code" 0 \
    "$(k get pod hello -o 'jsonpath={.status.containerStatuses[0].state.terminated.exitCode}')"
  expect_eq "hello's logs" "hello from kcr" "$(k logs hello)"
  ip=$(k get pod hello -o 'jsonpath={.status.podIP}')
  expect_eq "hello's Pod IP in $KCR_POD_CIDR" "${KCR_POD_CIDR%.0/24}" "${ip%.*}"
  expect_eq "hello's node" localhost "$(k get pod hello -o 'jsonpath={.spec.nodeName}')"
  k wait deployment/sleeper --for=condition=Available --timeout=60s >/dev/null ||
    fail "Deployment sleeper not Available in 60 s: $(k get pods -o wide 2>&1)"
  pass "Deployment sleeper Available"
  expect_eq "sleeper's Pod phase" Running "$(k get pods -l app=sleeper -o 'jsonpath={.items[*].status.phase}')"
  # The Service IP from inside the Pod: its network namespace, its environment.
  cid=$(k get pods -l app=sleeper -o 'jsonpath={.items[0].status.containerStatuses[0].containerID}')
  pid=$(ctr --address "$KCR_CONTAINERD_SOCKET" -n k8s.io tasks ls | awk -v id="${cid#containerd://}" '$1 == id {print $2}')
  expect_match "sleeper's container pid" '^[0-9]+$' "$pid"
  expect_contains "sleeper's environment" "KUBERNETES_SERVICE_HOST=10.0.0.1" "$(tr '\0' '\n' <"/proc/$pid/environ")"
  expect_contains "the apiserver through https://10.0.0.1:443 from the Pod's network namespace" \
    '"gitVersion": "v1.37.2"' \
    "$(nsenter --net="/proc/$pid/ns/net" -- curl -sS --max-time 10 --cacert "$KCR_CONTROLPLANE_DIR/pki/ca.crt" \
      https://10.0.0.1:443/version 2>&1)"
  "$host_state" >"$tmp/during"
  log "leaving the sleeper Pod running for teardown"
  echo "e2e $E2E_NAME (inside the control plane): $E2E_PASSED passed, $E2E_FAILED failed"
  exit 0
fi

# ---- around the control plane -----------------------------------------------
[[ $(id -u) == 0 ]] || fail "needs root (start --with-node makes a mount namespace, cgroups, containers)"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/kcr-e2e-node.XXXXXX")
trap 'rc=$?; ((rc == 0)) || echo "e2e $E2E_NAME: failed; kept $tmp (host snapshots)"' EXIT
"$host_state" >"$tmp/before"
rc=0
"$src/tools/controlplane/start" --with-node -- bash "$0" --inner "$tmp" || rc=$?
expect_eq "start --with-node and the checks inside it: exit code" 0 "$rc"
"$host_state" >"$tmp/after"

during=$(diff "$tmp/before" "$tmp/during" || true)
expect_match "host-state with the node up shows its cgroups" 'cgroup /sys/fs/cgroup/[a-z]+/kcr-node-' "$during"
expect_match "host-state with the node up shows containerd" 'process containerd running' "$during"
expect_match "host-state with the node up shows the running Pod" 'process pause running' "$during"
expect_match "host-state with the node up shows the Pod's veth" 'link veth' "$during"
expect_match "host-state with the node up shows the Service IP on lo" 'addr lo inet 10\.0\.0\.1/32' "$during"
if ! diff -u "$tmp/before" "$tmp/after" >"$tmp/diff"; then
  fail "the host changed across start --with-node (kept $tmp):
$(head -n 40 "$tmp/diff")"
fi
pass "host unchanged after teardown ($(wc -l <"$tmp/before") facts compared)"
[[ ${E2E_KEEP_LOGS:-} == 1 ]] && log "kept $tmp" || rm -rf "$tmp"
e2e_done
