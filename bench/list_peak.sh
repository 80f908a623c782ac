#!/usr/bin/env bash
# bench/list_peak.sh - an informer of N EBDs: peak against settled RSS, and
# the apiserver's peak RSS, for its first list and for a relist forced by a
# 410, with streaming lists and with paged LISTs, alternating (ABAB)
# (bench/README.md, section 8).
#
#   tools/controlplane/start -- bench/list_peak.sh [--n N] [--runs R] [--out FILE]
#
# Needs build/bench (cmake -S . -B build/bench -G Ninja
# -DCMAKE_BUILD_TYPE=Release; cmake --build build/bench --target list_peak)
# and a control plane started by tools/controlplane/start (etcd's endpoint,
# the apiserver's pid file, restart-apiserver). Installs the CRDs of
# config/crd/bases, makes a namespace with N EBDs (default 20,000), then R
# times (default 3) each mode, streaming then paged: resets the apiserver's
# peak RSS, runs build/bench/bench/list_peak --relist in a fresh process,
# and once its first list is in, reads the apiserver's peak, stops the
# apiserver, moves etcd's revision on and compacts it, and starts the
# apiserver again, so the informer's next watch gets 410 and relists; then
# reads the new apiserver's peak (its start-up included). Raw lines to
# --out (default stdout): list_peak's two lines each, plus
# "apiserver phase=initial|relist mode=... peak_kb=K".
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
n=20000 runs=3 out=/dev/stdout
while (($#)); do
  case $1 in
    --n) n=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    *) echo "list_peak.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
: "${KCR_CONTROLPLANE_DIR:?run under tools/controlplane/start}" "${KCR_ETCD_ENDPOINT:?}"
bin=$root/build/bench/bench/list_peak
[[ -x $bin ]] || { echo "list_peak.sh: build $bin first (see the header)" >&2; exit 2; }
k() { "$KCR_CONTROLPLANE_BIN/kubectl" --request-timeout=120s "$@"; }
etcd() { curl -sS --max-time 30 -X POST "$KCR_ETCD_ENDPOINT/v3/$1" -d "$2"; }
api_pid() { cat "$KCR_CONTROLPLANE_DIR/apiserver.pid"; }
api_peak() { awk '/^VmHWM:/ { print $2 }' "/proc/$(api_pid)/status"; }
api_reset() { echo 5 >"/proc/$(api_pid)/clear_refs"; }

k apply --server-side -f "$root/config/crd/bases" >/dev/null
k wait --for=condition=Established --timeout=60s crd/ebds.ebdman.example.com >/dev/null
ns=kcr-bench-list-$$
k create namespace "$ns" >/dev/null
trap 'k delete namespace "$ns" --wait=false >/dev/null 2>&1 || true' EXIT
until k -n "$ns" get ebds >/dev/null 2>&1; do sleep 0.5; done
echo "list_peak.sh: making $n EBDs in $ns" >&2
t=$SECONDS
for ((b = 0; b < n; b += 1000)); do
  for ((i = b; i < b + 1000 && i < n; i++)); do
    printf -- '---\napiVersion: ebdman.example.com/v1beta1\nkind: EBD\nmetadata:\n  name: e-%05d\n  labels:\n    bench: list-peak\nspec:\n  vfmTemplate:\n    image: "registry.example.com/vfm:1.%d"\n    replicas: 1\n    config:\n      name: "e-%05d"\n' "$i" "$i" "$i"
  done | k -n "$ns" apply --server-side -f - >/dev/null &
  (((b / 1000) % 2 == 1)) && wait
done
wait
echo "list_peak.sh: $(k -n "$ns" get ebds -o name | grep -c .) EBDs in $((SECONDS - t)) s" >&2

{
  echo "# list_peak.sh n=$n runs=$runs $(date -u +%FT%TZ) commit=$(git -C "$root" rev-parse --short HEAD) load=$(cut -d' ' -f1-3 /proc/loadavg)"
  for ((r = 1; r <= runs; r++)); do
    for mode in stream paged; do
      args=()
      [[ $mode == paged ]] && args=(--paged)
      api_reset
      while read -r line; do
        if [[ $line == ready-for-relist ]]; then
          echo "apiserver phase=initial mode=$mode peak_kb=$(api_peak)"
          "$root/tools/controlplane/restart-apiserver" --stop-only >/dev/null 2>&1
          etcd kv/put '{"key":"L2tjci1iZW5jaC9idW1w","value":"eA=="}' >/dev/null
          rev=$(etcd kv/range '{"key":"AA=="}' | sed -n 's/.*"revision":"\([0-9]*\)".*/\1/p')
          etcd kv/compaction "{\"revision\":\"$rev\",\"physical\":true}" >/dev/null
          "$root/tools/controlplane/restart-apiserver" --start-only >/dev/null 2>&1
        else
          echo "$line"
        fi
      done < <("$bin" "$ns" ebdman.example.com v1beta1 ebds --relist "${args[@]}")
      wait $! || { echo "list_peak.sh: list_peak failed ($mode, run $r)" >&2; exit 1; }
      echo "apiserver phase=relist mode=$mode peak_kb=$(api_peak)"
      echo "load $(cut -d' ' -f1-3 /proc/loadavg)"
    done
  done
} >"$out"
