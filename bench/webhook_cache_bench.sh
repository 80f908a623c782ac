#!/usr/bin/env bash
# The webhook peer benchmark (bench/README.md, section 7, "against
# controller-runtime"): ebdman's validating webhook (operator/ebdman/
# webhooks.c) and the same webhook written with controller-runtime
# (bench/peers/controller-runtime-typed, `webhook`: typed EBD decoded by
# admission.Decoder, children looked up in the manager's informer cache),
# both judging from informer caches that hold --vfms unowned VFMs, under the
# same open-loop load of AdmissionReviews (bench/webhook_load.c load: TLS,
# keep-alive, 4 connections) - an EBD CREATE whose children do not exist,
# the path almost every creation takes. Both servers run the whole time;
# for each run and rate they are loaded one after the other, the order
# alternating between runs (ABAB). One line per run, rate and server: the
# client's view (sent, errors, achieved rate, latency from when each request
# was due: p50 p90 p99 max), the server process's CPU over its load window
# (utime+stime from /proc, in ms and per admission) and the load average;
# then the CPU ratio ebdman/peer per run and rate. Last, through the
# apiserver: a ValidatingWebhookConfiguration calls one server, then the
# other, while tests/e2e/dryrun_load.c creates EBDs with dryRun=All at 50/s
# (client latency, server CPU; not gated: the apiserver's own histogram
# starts at 5 ms).
#
#   tools/controlplane/start -- bench/webhook_cache_bench.sh [--build DIR]
#       [--runs N] [--seconds S] [--rates "50 200 500"] [--vfms N]
#
# DIR: a Release build with ebdman and webhook_load (default build/bench);
# the peer is built into DIR/peers/controller-runtime-typed when missing
# (Go modules from the proxy).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build/bench runs=3 seconds=20 rates="50 200 500" vfms=1000
while (($#)); do
  case $1 in
  --build) build=$2; shift 2 ;;
  --runs) runs=$2; shift 2 ;;
  --seconds) seconds=$2; shift 2 ;;
  --rates) rates=$2; shift 2 ;;
  --vfms) vfms=$2; shift 2 ;;
  *) echo "webhook_cache_bench: unknown argument $1" >&2; exit 2 ;;
  esac
done
die() { echo "webhook_cache_bench: $*" >&2; exit 2; }
[[ -n ${KUBECONFIG:-} && -n ${KCR_CONTROLPLANE_BIN:-} ]] ||
  die "run it under tools/controlplane/start (KUBECONFIG, KCR_CONTROLPLANE_BIN)"
load=$build/bench/webhook_load ebdman=$build/operator/ebdman/ebdman peer=$build/peers/controller-runtime-typed
dryrun=$build/tests/dryrun-load # the apiserver part is skipped without it (-DKCR_BUILD_TESTS=OFF)
[[ -x $load && -x $ebdman ]] || die "$load or $ebdman missing (cmake --build $build)"
if [[ ! -x $peer ]]; then
  mkdir -p "$build/peers"
  "$root/bench/peers/controller-runtime-typed/build" "$peer" || die "building the peer failed"
fi
k() { "$KCR_CONTROLPLANE_BIN/kubectl" "$@"; }
tmp=$(mktemp -d)
pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true; rm -rf "$tmp"' EXIT

# --- the cluster: the CRDs, namespace bench, --vfms VFMs of no EBD
k apply --server-side -f "$root/config/crd/bases" >/dev/null
k wait --for=condition=Established crd/ebds.ebdman.example.com crd/vfms.ebdman.example.com >/dev/null
k create namespace bench --dry-run=client -o yaml | k apply -f - >/dev/null
for ((i = 0; i < vfms; i++)); do
  printf -- '---\napiVersion: ebdman.example.com/v1alpha1\nkind: VFM\nmetadata:\n  name: vfm-%05d\n  namespace: bench\nspec:\n  image: theirs/x:1\n' "$i"
done >"$tmp/vfms.yaml"
k apply --server-side -f "$tmp/vfms.yaml" >/dev/null

# --- the two servers, one certificate
mkdir "$tmp/certs"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 \
  -keyout "$tmp/certs/tls.key" -out "$tmp/certs/tls.crt" -subj /CN=127.0.0.1 \
  -addext subjectAltName=IP:127.0.0.1 2>/dev/null
port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
pe=$(port) pp=$(port)
"$ebdman" run --namespace bench --webhook-bind-address "127.0.0.1:$pe" \
  --webhook-cert-path "$tmp/certs" --metrics-bind-address 0 --health-probe-bind-address 0 \
  --zap-log-level error >"$tmp/ebdman.log" 2>&1 &
pids+=($!) epid=$!
"$peer" webhook --port "$pp" --cert-dir "$tmp/certs" >"$tmp/peer.log" 2>&1 &
pids+=($!) ppid=$!

review() { # NAME: an EBD CREATE review
  printf '{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"5f0c2a3e-bench","kind":{"group":"ebdman.example.com","version":"v1beta1","kind":"EBD"},"resource":{"group":"ebdman.example.com","version":"v1beta1","resource":"ebds"},"name":"%s","namespace":"bench","operation":"CREATE","userInfo":{"username":"bench","groups":["system:authenticated"]},"object":{"apiVersion":"ebdman.example.com/v1beta1","kind":"EBD","metadata":{"name":"%s","namespace":"bench","uid":"0c7d6a5e-1111-4a4a-9b9b-5e5e5e5e5e5e","labels":{"app.kubernetes.io/name":"bench"}},"spec":{"vfmTemplate":{"image":"registry.example.com/vfm:1.0","replicas":1,"config":{"name":"%s","mode":"fast"}}}},"oldObject":null,"dryRun":false,"options":{"kind":"CreateOptions","apiVersion":"meta.k8s.io/v1"}}}' "$1" "$1" "$1"
}
review fresh-ebd >"$tmp/allow.json"
review vfm-00000 >"$tmp/deny.json"
post() { curl -sk --max-time 5 -H 'Content-Type: application/json' --data-binary "@$2" "https://127.0.0.1:$1/validate-ebdman-example-com-v1beta1-ebd"; }
# up, and the cache synced: the review of a taken name is denied
for p in "$pe" "$pp"; do
  for ((i = 0; i < 300; i++)); do
    post "$p" "$tmp/deny.json" 2>/dev/null | grep -q '"allowed":false' && break
    sleep 0.2
  done
  ((i < 300)) || die "the server on port $p does not deny a taken name (logs: $tmp)"
  post "$p" "$tmp/allow.json" | grep -q '"allowed":true' || die "the server on port $p does not allow a free name"
done

hz=$(getconf CLK_TCK)
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
echo "# webhook_cache_bench $(date -u +%FT%TZ) commit $(git -C "$root" rev-parse --short HEAD) runs=$runs seconds=$seconds vfms=$vfms"
echo "# $(nproc) cores; ebdman $("$ebdman" version | head -n 1); peer controller-runtime $(grep 'sigs.k8s.io/controller-runtime ' "$root/bench/peers/controller-runtime-typed/go.mod" | awk '{print $2}')"
echo "# run rate server | client: sent errors achieved p50 p90 p99 max (ms) | cpu_ms us/admission | loadavg"
declare -A us
for ((r = 1; r <= runs; r++)); do
  for rate in $rates; do
    if ((r % 2)); then order="ebdman peer"; else order="peer ebdman"; fi
    for who in $order; do
      if [[ $who == ebdman ]]; then pid=$epid p=$pe; else pid=$ppid p=$pp; fi
      c0=$(cpu_ticks "$pid")
      line=$("$load" load "https://127.0.0.1:$p/validate-ebdman-example-com-v1beta1-ebd" "$rate" "$seconds" 4 "$tmp/allow.json")
      c1=$(cpu_ticks "$pid")
      read -r _ sent _ errs _ achieved _ p50 _ p90 _ p99 _ max _ <<<"$line"
      cpu_ms=$(((c1 - c0) * 1000 / hz))
      us[$who]=$(awk -v c="$cpu_ms" -v n="$sent" 'BEGIN{printf "%.1f", 1000*c/n}')
      printf '%d %s %s | %s %s %s %s %s %s %s | %d %s | %s\n' "$r" "$rate" "$who" "$sent" "$errs" \
        "${achieved%/s}" "$p50" "$p90" "$p99" "$max" "$cpu_ms" "${us[$who]}" "$(cut -d' ' -f1 /proc/loadavg)"
    done
    printf '%d %s ratio | cpu per admission ebdman/peer %s\n' "$r" "$rate" \
      "$(awk -v a="${us[ebdman]}" -v b="${us[peer]}" 'BEGIN{printf "%.2f", (b > 0 ? a / b : 0)}')"
  done
done
# --- through the apiserver: dry-run creations at 50/s (dryrun-load), the
# validating webhook configured to call one server, then the other
if [[ -x $dryrun ]]; then
  {
    printf 'apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingWebhookConfiguration\n'
    printf 'metadata:\n  name: bench-validating\nwebhooks:\n- name: vebd.bench.example.com\n'
    printf '  admissionReviewVersions: [v1]\n  clientConfig:\n'
    printf '    url: https://127.0.0.1:%s/validate-ebdman-example-com-v1beta1-ebd\n' "$pe"
    printf '    caBundle: %s\n' "$(base64 -w0 "$tmp/certs/tls.crt")"
    printf '  rules:\n  - {apiGroups: [ebdman.example.com], apiVersions: [v1beta1], operations: [CREATE], resources: [ebds], scope: Namespaced}\n'
    printf '  namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: bench}}\n'
    printf '  failurePolicy: Fail\n  sideEffects: None\n  timeoutSeconds: 5\n'
  } >"$tmp/vwc.yaml"
  k apply -f "$tmp/vwc.yaml" >/dev/null
  echo "# through the apiserver: run server | dryrun-load at 50/s: sent ok failed p50 p99 max (ms) late | server cpu_ms us/admission | loadavg"
  for ((r = 1; r <= runs; r++)); do
    if ((r % 2)); then order="ebdman peer"; else order="peer ebdman"; fi
    for who in $order; do
      if [[ $who == ebdman ]]; then pid=$epid p=$pe; else pid=$ppid p=$pp; fi
      k patch validatingwebhookconfiguration bench-validating --type=json -p \
        "[{\"op\":\"replace\",\"path\":\"/webhooks/0/clientConfig/url\",\"value\":\"https://127.0.0.1:$p/validate-ebdman-example-com-v1beta1-ebd\"}]" >/dev/null
      sleep 2 # the apiserver's webhook configuration cache
      c0=$(cpu_ticks "$pid")
      line=$("$dryrun" --namespace bench --rate 50 --duration "${seconds}s" --threads 8 \
        --image registry.example.com/vfm:1.0 | head -n 1) || true
      c1=$(cpu_ticks "$pid")
      cpu_ms=$(((c1 - c0) * 1000 / hz))
      sent=$(grep -o 'sent=[0-9]*' <<<"$line" | cut -d= -f2)
      printf '%d %s | %s | %d %s | %s\n' "$r" "$who" "$line" "$cpu_ms" \
        "$(awk -v c="$cpu_ms" -v n="${sent:-0}" 'BEGIN{printf "%.1f", (n > 0 ? 1000 * c / n : 0)}')" \
        "$(cut -d' ' -f1 /proc/loadavg)"
    done
  done
  k delete validatingwebhookconfiguration bench-validating >/dev/null
fi
echo "# RSS after the runs: ebdman $(awk '/^VmRSS/ {print $2, $3}' "/proc/$epid/status"), peer $(awk '/^VmRSS/ {print $2, $3}' "/proc/$ppid/status")"
