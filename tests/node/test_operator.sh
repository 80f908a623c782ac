#!/usr/bin/env bash
# node operator: ebdman installed the way users install it, running as a Pod
# on the node of `tools/controlplane/start --with-node`.
#  1. scripts/image packs the Release ebdman into an OCI image (no registry,
#     no container engine); `ctr images import` loads it into the node.
#  2. `kubectl apply -k tests/node/overlay` - config/default as shipped, only
#     the image name and pull policy changed - over the EBD CRD of a release
#     before v1beta1 with EBDs stored as v1alpha1, gives an Available
#     Deployment (its Pod Ready before its caches sync, which needs its own
#     conversion webhook through the Service), those EBDs reconciled and
#     migrated to v1beta1 storage, and:
#     the container runs as uid 65532 with a read-only root filesystem, both
#     probes answer, the client uses the in-cluster configuration (mounted
#     ServiceAccount token and CA, the kubernetes Service IP), RBAC is exactly
#     config/rbac (no request refused), metrics are served over HTTPS to an
#     authorised token only, and `kubectl logs` shows key=value lines.
#  3. N EBDs converge through it (vfm-sim runs on the host); its webhooks,
#     with the certificates it made, are called through their Service: the
#     admission webhooks, and the EBD CRD's conversion webhook.
#  4. Two replicas, then `kubectl rollout restart`: leadership moves to a new
#     Pod while three writers change the EBDs' specs; the apiserver's audit
#     log shows one writer at a time and no gap between two leaders' writes
#     longer than the lease (15 s); every EBD ends current.
#  5. The leading Pod is deleted while it reconciles a new batch of EBDs:
#     the other replica takes over and nothing is lost (every EBD current,
#     exactly one VFM and one ConfigMap each, one writer at a time).
#  6. No container restarted (liveness never failed).
# Reports the image size and the leader's RSS idle and with N EBDs.
# Short form: N = 60 (CI); KCR_NODE_LONG=1: N = 1,000.
#
# Starts its own control plane with the node, so it runs outside `start`, as
# root (CTest label `node`). The image is built from KCR_EBDMAN_RELEASE_BIN
# (scripts/test sets it) or, without it, from a Release build scripts/image
# makes in build/release.
set -euo pipefail
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/../e2e/lib.sh"
src=${KCR_SOURCE_DIR:-}
[[ -n $src ]] || fail "KCR_SOURCE_DIR is not set (tests/CMakeLists.txt sets it)"
if [[ ${KCR_NODE_LONG:-0} == 1 ]]; then n=1000; else n=60; fi
lease_s=15 # the shipped Lease duration (kcr/cli.h defaults, manager.yaml keeps them)
image=kcr.local/ebdman:dev

# ---- around the control plane -----------------------------------------------
if [[ ${1:-} != --inner ]]; then
  [[ $(id -u) == 0 ]] || fail "needs root (start --with-node makes a mount namespace, cgroups, containers)"
  [[ -x ${KCR_VFMSIM_BIN:-} ]] || fail "KCR_VFMSIM_BIN=${KCR_VFMSIM_BIN:-} is not an executable"
  tmp=$(mktemp -d "${TMPDIR:-/tmp}/kcr-e2e-node-operator.XXXXXX")
  bin_args=()
  [[ -n ${KCR_EBDMAN_RELEASE_BIN:-} ]] && bin_args=(--binary "$KCR_EBDMAN_RELEASE_BIN")
  "$src/scripts/image" "${bin_args[@]}" --name "$image" --out "$tmp/ebdman.tar" >/dev/null 2>"$tmp/image.log" ||
    fail "scripts/image failed: $(cat "$tmp/image.log")"
  log "$(tail -n 1 "$tmp/image.log"), $(gzip -c "$tmp/ebdman.tar" | wc -c | awk '{printf "%.1f MiB", $1 / 1048576}') gzipped"
  # The Dockerfile's build stage makes the image's files with
  # `scripts/image --rootfs`: the same files, byte for byte, as the archive's
  # layer (the contract between the two ways of building the image).
  "$src/scripts/image" "${bin_args[@]}" --rootfs "$tmp/rootfs" 2>>"$tmp/image.log" ||
    fail "scripts/image --rootfs failed: $(cat "$tmp/image.log")"
  (cd "$tmp/rootfs" && find . -type f -printf '%P %m\n' | sort | while read -r f m; do
    echo "$f $m $(sha256sum <"$f" | cut -c1-64)"
  done) >"$tmp/rootfs.txt"
  python3 - "$tmp/ebdman.tar" >"$tmp/layer.txt" <<'PY'
import hashlib, io, json, sys, tarfile
oci = tarfile.open(sys.argv[1])
blob = lambda d: oci.extractfile("blobs/sha256/" + d.split(":", 1)[1]).read()
index = json.loads(oci.extractfile("index.json").read())
manifest = json.loads(blob(index["manifests"][0]["digest"]))
layer = tarfile.open(fileobj=io.BytesIO(blob(manifest["layers"][0]["digest"])))
for m in sorted(layer.getmembers(), key=lambda m: m.name):
    if m.isfile():
        print(m.name, "%o" % m.mode, hashlib.sha256(layer.extractfile(m).read()).hexdigest())
PY
  d=$(diff "$tmp/rootfs.txt" "$tmp/layer.txt") ||
    fail "files of scripts/image --rootfs and of the archive's layer (path mode sha256)" "the same" "$d"
  pass "scripts/image --rootfs (the Dockerfile's way) and the archive hold the same $(wc -l <"$tmp/layer.txt") files, byte for byte"
  rc=0
  "$src/tools/controlplane/start" --with-node -- bash "$0" --inner "$tmp" || rc=$?
  rm -rf "$tmp"
  exit "$rc"
fi

# ---- with the node up (run by start) ----------------------------------------
tmp=$2
E2E_TMP=$(mktemp -d "${TMPDIR:-/tmp}/kcr-e2e-$E2E_NAME.XXXXXX")
export KUBECACHEDIR=$E2E_TMP/kube-cache
trap _cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
require_audit_log
t_start=$(utc_now)
ctr_() { ctr --address "$KCR_CONTAINERD_SOCKET" -n k8s.io "$@"; }
deploy=deployment/ebdman-controller-manager
sel=control-plane=controller-manager

ctr_ images import "$tmp/ebdman.tar" >/dev/null || fail "ctr images import $tmp/ebdman.tar failed"
pass "image $image imported into the node's containerd"

# ---- 2. install as users do, over EBDs of a release before v1beta1 -------------
# The EBD CRD as it was (v1alpha1 alone) and EBDs stored as v1alpha1: the
# new Pod's caches (v1beta1) sync only through its own conversion webhook,
# which the apiserver calls through the webhook Service - whose endpoints
# are the Ready Pods. So the Pod must be Ready before its caches sync
# (readinessProbe /readyz/webhooks), or the rollout waits for itself.
ebd_crd_v1alpha1_only | k create -f - >/dev/null
k wait --for=condition=Established --timeout=60s crd/ebds.ebdman.example.com >/dev/null ||
  fail "the v1alpha1 CRD not Established in 60 s"
new_ns
old_ns=$E2E_NS
n_old=5
wait_for 30 "v1alpha1 EBDs served" k get ebds.v1alpha1.ebdman.example.com -A -o name
for i in $(seq 1 "$n_old"); do
  printf -- '---\napiVersion: ebdman.example.com/v1alpha1\nkind: EBD\nmetadata:\n  name: old-%s\nspec:\n  vfm:\n    image: registry.example.com/vfm:0.9\n' "$i"
done | k -n "$old_ns" create -f - >/dev/null
k apply -k "$KCR_SOURCE_DIR/tests/node/overlay" >"$E2E_TMP/apply.txt" ||
  fail "kubectl apply -k tests/node/overlay failed: $(cat "$E2E_TMP/apply.txt")"
k wait --for=condition=Established --timeout=60s \
  crd/ebds.ebdman.example.com crd/vfms.ebdman.example.com >/dev/null || fail "CRDs not Established in 60 s"
if ! k -n "$E2E_SYSTEM_NS" wait "$deploy" --for=condition=Available --timeout=120s >/dev/null; then
  k -n "$E2E_SYSTEM_NS" get pods -o wide || true
  k -n "$E2E_SYSTEM_NS" describe pods | tail -n 30 || true
  k -n "$E2E_SYSTEM_NS" logs -l "$sel" --tail=30 || true
  fail "Deployment ebdman-controller-manager not Available in 120 s"
fi
pass "kubectl apply -k tests/node/overlay: Deployment Available"
old_templates() {
  k -n "$old_ns" get ebds.v1beta1.ebdman.example.com \
    -o jsonpath='{range .items[*]}{.spec.vfmTemplate.image}{"\n"}{end}' | grep -c 'vfm:0.9' || true
}
wait_eq 60 "the $n_old EBDs stored as v1alpha1 read as v1beta1, converted through the Service" \
  "$n_old" old_templates
old_installed() {
  k -n "$old_ns" get ebds -o jsonpath='{range .items[*]}{.status.conditions[?(@.type=="Installed")].status}{"\n"}{end}' |
    grep -c '^True$' || true
}
wait_eq 60 "and reconciled: Installed" "$n_old" old_installed
wait_eq 150 "the leader's storage migration: status.storedVersions" '["v1beta1"]' \
  k get crd ebds.ebdman.example.com -o jsonpath='{.status.storedVersions}'

# pods: the names of the operator's Pods that are not being deleted.
pods() {
  k -n "$E2E_SYSTEM_NS" get pods -l "$sel" \
    -o jsonpath='{range .items[*]}{.metadata.name}{" "}{.metadata.deletionTimestamp}{"\n"}{end}' |
    awk 'NF == 1 {print $1}'
}
# container_pid POD: the host pid of POD's manager container.
container_pid() {
  local cid
  cid=$(k -n "$E2E_SYSTEM_NS" get pod "$1" -o 'jsonpath={.status.containerStatuses[0].containerID}')
  ctr_ tasks ls | awk -v id="${cid#containerd://}" '$1 == id {print $2}'
}
pod_ip() { k -n "$E2E_SYSTEM_NS" get pod "$1" -o 'jsonpath={.status.podIP}'; }
# leader_pod: the Pod holding the Lease (holderIdentity is "<pod>_<random>").
leader_pod() {
  local h
  h=$(lease_holder) || return 1
  [[ -n $h ]] || return 1
  echo "${h%_*}"
}
# rss_mib PID: "VmRSS (RssAnon)" in MiB.
rss_mib() {
  awk '/^VmRSS:/ {r = $2} /^RssAnon:/ {a = $2} END {printf "%.1f MiB (anonymous %.1f MiB)", r / 1024, a / 1024}' "/proc/$1/status"
}

# new_leader OLD: a Pod other than OLD, not being deleted, leads (prints it).
new_leader() {
  local l
  l=$(leader_pod) || return 1
  echo "$l"
  [[ $l != "$1" ]] && pods | grep -qx "$l"
}

pod=$(pods)
expect_match "one operator Pod" '^[a-z0-9-]+$' "$pod"
pid=$(container_pid "$pod")
expect_match "the container's host pid" '^[0-9]+$' "$pid"
expect_eq "the container's uid (real, effective, saved, fs)" "65532 65532 65532 65532" \
  "$(awk '/^Uid:/ {print $2, $3, $4, $5}' "/proc/$pid/status")"
expect_eq "the container's capabilities (effective)" 0000000000000000 \
  "$(awk '/^CapEff:/ {print $2}' "/proc/$pid/status")"
expect_match "the container's root filesystem is mounted read-only" '^ro(,|$)' \
  "$(awk '$5 == "/" {print $6}' "/proc/$pid/mountinfo" | tail -n 1)"
ip=$(pod_ip "$pod")
expect_match "the Pod's IP in $KCR_POD_CIDR" "^${KCR_POD_CIDR%.0/24}\." "$ip"
for p in healthz readyz; do
  expect_eq "GET http://$ip:8081/$p (the probe port)" 200 \
    "$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "http://$ip:8081/$p")"
done
expect_contains "the container's environment: the kubernetes Service" KUBERNETES_SERVICE_HOST=10.0.0.1 \
  "$(tr '\0' '\n' <"/proc/$pid/environ")"
expect_contains "ebdman's log: in-cluster configuration through the Service IP" \
  'msg="client configuration loaded" config=in-cluster server=https://10.0.0.1:443' \
  "$(k -n "$E2E_SYSTEM_NS" logs "$pod")"
wait_for 60 "the Pod's ebdman leads" leader_pod
expect_eq "the leader is the one Pod" "$pod" "$(leader_pod)"

# Metrics: HTTPS with the self-signed certificate, TokenReview +
# SubjectAccessReview; ebdman-metrics-reader grants get on /metrics.
k -n "$E2E_SYSTEM_NS" create serviceaccount scraper >/dev/null
k -n "$E2E_SYSTEM_NS" create serviceaccount stranger >/dev/null
k create clusterrolebinding e2e-node-scraper --clusterrole=ebdman-metrics-reader \
  --serviceaccount="$E2E_SYSTEM_NS:scraper" >/dev/null
metrics_code() { # TOKEN-SA: the HTTP status of GET /metrics with that SA's token
  local token
  token=$(k -n "$E2E_SYSTEM_NS" create token "$1" --duration=10m)
  curl -sk -o /dev/null -w '%{http_code}' --max-time 10 -H "Authorization: Bearer $token" \
    "https://$ip:8443/metrics"
}
expect_eq "GET https://$ip:8443/metrics without a token" 401 \
  "$(curl -sk -o /dev/null -w '%{http_code}' --max-time 10 "https://$ip:8443/metrics")"
expect_eq "GET /metrics with a token not allowed to" 403 "$(metrics_code stranger)"
wait_eq 30 "GET /metrics with a token bound to ebdman-metrics-reader" 200 metrics_code scraper

# Webhooks (config/webhook): the certificates ebdman made (Secret), for the
# Service's names, their CA in both configurations' caBundle; the apiserver
# reaches the Service through its endpoint (--enable-aggregator-routing).
bundle() { k get "$1" "ebdman-$2-webhook-configuration" -o jsonpath='{.webhooks[0].clientConfig.caBundle}'; }
has_bundles() { [[ -n $(bundle validatingwebhookconfiguration validating) && -n $(bundle mutatingwebhookconfiguration mutating) ]]; }
wait_for 60 "ebdman wrote the caBundle of both webhook configurations" has_bundles
expect_eq "the caBundle is the Secret's ca.crt" \
  "$(k -n "$E2E_SYSTEM_NS" get secret ebdman-webhook-certs -o jsonpath='{.data.ca\.crt}')" \
  "$(bundle validatingwebhookconfiguration validating)"
expect_contains "the serving certificate names the Service" \
  "DNS:ebdman-webhook-service.$E2E_SYSTEM_NS.svc" \
  "$(k -n "$E2E_SYSTEM_NS" get secret ebdman-webhook-certs -o jsonpath='{.data.tls\.crt}' |
    base64 -d | openssl x509 -noout -ext subjectAltName)"

# ---- 3. EBDs converge through the Pod -----------------------------------------
retry k apply -k "$KCR_SOURCE_DIR/config/vfm-sim" >/dev/null || fail "kubectl apply -k config/vfm-sim failed"
E2E_VFMSIM_KUBECONFIG=$E2E_TMP/vfm-sim-sa.kubeconfig
_token_kubeconfig "$E2E_VFMSIM_SA" "$E2E_VFMSIM_KUBECONFIG"
new_ns
ns=$E2E_NS
start_vfm_sim sim --namespace "$ns" --delay 500ms
log "idle leader: RSS $(rss_mib "$pid")"
for i in $(seq -w 1 "$n"); do ebd_yaml "e-$i" registry.example.com/vfm:1.0 1; done |
  k -n "$ns" apply --server-side -f - >/dev/null
wait_for $((60 + n / 5)) "$n EBDs current through the Pod" conditions_current "$ns" "$n"
check_children "$ns"
log "leader with $n EBDs: RSS $(rss_mib "$pid")"

# The validating webhook through the Service: a VFM name that is someone
# else's is refused at creation (config/webhook: failurePolicy Ignore, so a
# webhook the apiserver cannot reach would let it through).
printf 'apiVersion: ebdman.example.com/v1alpha1\nkind: VFM\nmetadata:\n  name: taken\nspec:\n  image: theirs/x:1\n' |
  k -n "$ns" create -f - >/dev/null
denied() {
  local out
  out=$(ebd_yaml taken registry.example.com/vfm:1.0 1 | k -n "$ns" create --dry-run=server -f - 2>&1)
  echo "$out"
  [[ $out == *'denied the request: VFM '"$ns"'/taken exists and is not this EBD'* ]]
}
wait_for 30 "an EBD whose VFM name is taken is refused by the webhook, through its Service" denied
expect_eq "no fail-open admission (the apiserver reached the webhooks)" 0 \
  "$(api_metric apiserver_admission_webhook_fail_open_count)"
k -n "$ns" delete vfm taken --wait=true >/dev/null

# The conversion webhook through the Service: config/default's EBD CRD
# converts through ebdman (its caBundle written by ebdman), so an EBD stored
# as v1beta1 reads in v1alpha1 with spec.vfm.
crd_bundle() { k get crd ebds.ebdman.example.com -o jsonpath='{.spec.conversion.webhook.clientConfig.caBundle}'; }
has_crd_bundle() { [[ -n $(crd_bundle) ]]; }
wait_for 60 "ebdman wrote the EBD CRD's conversion caBundle" has_crd_bundle
expect_eq "the CRD's caBundle is the Secret's ca.crt" \
  "$(k -n "$E2E_SYSTEM_NS" get secret ebdman-webhook-certs -o jsonpath='{.data.ca\.crt}')" "$(crd_bundle)"
first=$(k -n "$ns" get ebds -o jsonpath='{.items[0].metadata.name}')
as_v1alpha1() { k -n "$ns" get ebds.v1alpha1.ebdman.example.com "$first" -o jsonpath='{.apiVersion} {.spec.vfm.image}' 2>/dev/null; }
wait_eq 30 "$first read as v1alpha1, converted by ebdman through its Service" \
  "ebdman.example.com/v1alpha1 registry.example.com/vfm:1.0" as_v1alpha1

# audit_writes: the writes the apiserver audited from ebdman Pods (the user
# agent names the Pod) since the test started, in time order:
# "RECEIVED POD CODE VERB RESOURCE/NAME[/SUB]".
audit_writes() { audit_ebdman "$t_start" | awk '{print $1, $2, $4, $5, $6}'; }
secs() { date -u -d "$1" +%s.%N; }
# check_one_writer_at_a_time WHAT: in the audited writes (but a lease update
# the apiserver refused: a standby that lost the race to acquire the lease,
# two standbys trying at once, writes nothing and is how leader election
# works; any other write counts, refused or not), each Pod's writes form one
# unbroken run (no Pod writes again after another has written), and the
# pause between one Pod's last write and the next Pod's first is shorter
# than the lease. Prints the hand-overs.
check_one_writer_at_a_time() {
  local what=$1 runs prev_pod="" prev_ts="" ts pod rest gap max_gap=0
  audit_writes | awk '!($3 !~ /^2/ && $5 ~ /^leases\//)' >"$E2E_TMP/writes.txt"
  runs=$(awk '$2 != last {print $2; last = $2}' "$E2E_TMP/writes.txt")
  expect_eq "$what: Pods that wrote again after another Pod had written" "" \
    "$(sort <<<"$runs" | uniq -d | tr '\n' ' ' | sed 's/ $//')"
  while read -r ts pod rest; do
    if [[ -n $prev_pod && $pod != "$prev_pod" ]]; then
      gap=$(awk -v a="$(secs "$ts")" -v b="$(secs "$prev_ts")" 'BEGIN {printf "%.2f", a - b}')
      log "$what: $prev_pod wrote last at $prev_ts, $pod first at $ts ($gap s later)"
      awk -v g="$gap" -v m="$max_gap" 'BEGIN {exit !(g > m)}' && max_gap=$gap
    fi
    prev_pod=$pod prev_ts=$ts
  done <"$E2E_TMP/writes.txt"
  awk -v g="$max_gap" -v l="$lease_s" 'BEGIN {exit !(g < l)}' ||
    fail "$what: the longest pause between two leaders' writes" "< $lease_s s" "$max_gap s"
  pass "$what: one writer at a time over $(wc -l <"$E2E_TMP/writes.txt") writes by $(wc -l <<<"$runs") Pod(s); longest hand-over pause $max_gap s"
}
check_one_writer_at_a_time "one replica"

# ---- 4. two replicas, rolling restart under spec changes -----------------------
k -n "$E2E_SYSTEM_NS" scale "$deploy" --replicas=2 >/dev/null
k -n "$E2E_SYSTEM_NS" rollout status "$deploy" --timeout=120s >/dev/null ||
  fail "two replicas not rolled out in 120 s"
pass "scaled to two replicas"
old_leader=$(leader_pod)
storm_start "$ns" "$n"
k -n "$E2E_SYSTEM_NS" rollout restart "$deploy" >/dev/null
k -n "$E2E_SYSTEM_NS" rollout status "$deploy" --timeout=180s >/dev/null ||
  fail "the rolling restart did not finish in 180 s"
pass "kubectl rollout restart: two new replicas"
wait_for 60 "a new Pod leads" new_leader "$old_leader"
storm_stop
wait_for $((60 + n / 5)) "$n EBDs current after the rolling restart" conditions_current "$ns" "$n"
check_conditions_current "$ns" "$n"
check_children "$ns"
check_one_writer_at_a_time "rolling restart"

# ---- 5. the leader's Pod deleted mid-reconcile --------------------------------
# A batch of m new EBDs, created one after another; the leader's Pod is
# deleted (as `kubectl delete pod` does: SIGTERM, then the grace period) once
# it has begun on them, while they are still being created and before they
# are all Ready (each waits for its VFM, which vfm-sim readies 3 s
# after it was made: the annotation on these EBDs).
m=$((n < 300 ? 300 : n))
leader=$(leader_pod)
for i in $(seq -w 1 "$m"); do
  ebd_yaml "f-$i" registry.example.com/vfm:1.0 1 vfm-sim.ebdman.example.com/delay 3s
done >"$E2E_TMP/batch.yaml"
k -n "$ns" apply --server-side -f "$E2E_TMP/batch.yaml" >/dev/null & # one create after another
applying=$!
batch() { # "OBSERVED READY" of the new EBDs
  k -n "$ns" get ebds -o jsonpath='{range .items[*]}{.metadata.name} {.status.observedGeneration} {.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' |
    awk '$1 ~ /^f-/ && $2 != "" {o++} $1 ~ /^f-/ && $3 == "True" {r++} END {print o + 0, r + 0}'
}
observed_f() { local b; b=$(batch); echo "${b% *}"; }
wait_for 60 "the leader has begun on the new EBDs" at_least 1 observed_f
k -n "$E2E_SYSTEM_NS" delete pod "$leader" --wait=false >/dev/null
read -r obs rdy <<<"$(batch)"
log "deleted the leader's Pod $leader with $obs of $m new EBDs observed, $rdy Ready"
wait "$applying" || fail "kubectl apply of the $m new EBDs failed"
expect_gt "new EBDs not yet Ready when the leader's Pod was deleted (mid-reconcile)" 0 $((m - rdy))
wait_for 60 "another Pod leads" new_leader "$leader"
wait_for $((60 + m / 5)) "$((n + m)) EBDs current after the leader's Pod was deleted" \
  conditions_current "$ns" $((n + m))
check_conditions_current "$ns" $((n + m))
check_children "$ns"
check_one_writer_at_a_time "leader's Pod deleted"
k -n "$E2E_SYSTEM_NS" rollout status "$deploy" --timeout=120s >/dev/null ||
  fail "the Deployment did not replace the deleted Pod in 120 s"

# ---- 6. logs, restarts, RBAC ----------------------------------------------------
leader=$(leader_pod)
log "leader $leader with $((n + m)) EBDs: RSS $(rss_mib "$(container_pid "$leader")")"
for p in $(pods); do
  k -n "$E2E_SYSTEM_NS" logs "$p" >"$E2E_TMP/$p.log"
  lines=$(grep -c . "$E2E_TMP/$p.log" || true)
  expect_gt "lines in kubectl logs $p" 0 "$lines"
  expect_eq "kubectl logs $p: lines that are not key=value records (ts, level, msg first)" "" \
    "$(grep -Ev '^ts=[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:.]+Z level=(debug|info|warn|error) msg=("[^"]*"|[^ ]+)( |$)' \
      "$E2E_TMP/$p.log" | head -n 3)"
  expect_eq "kubectl logs $p: requests refused by RBAC" "" \
    "$(grep -i forbidden "$E2E_TMP/$p.log" | head -n 3)"
done
expect_eq "container restarts (a failed liveness probe restarts the container)" "0 0" \
  "$(k -n "$E2E_SYSTEM_NS" get pods -l "$sel" -o 'jsonpath={range .items[*]}{.status.containerStatuses[0].restartCount}{" "}{end}' | sed 's/ $//')"

echo "e2e $E2E_NAME (inside the control plane): $E2E_PASSED passed, $E2E_FAILED failed ($((SECONDS - E2E_START)) s)"
