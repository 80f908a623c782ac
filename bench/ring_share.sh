#!/usr/bin/env bash
# bench/ring_share.sh - what a replica of a ring costs (bench/README.md,
# section 11; issue #32): ebdman with N EBDs in one namespace as one
# replica, and as three replicas of a ring whose caches hold each its share,
# with the apiserver's ShardedListAndWatch feature gate off (every EBD crosses
# the wire to every replica, filtered there) and on (the apiserver sends each
# replica its share of the EBDs). Per replica: settled RSS, the bytes the
# apiserver sent it, the objects its caches hold.
#
#   bench/ring_share.sh [--ebds 2000] [--runs 3] [--settle 10] [--out DIR] [--no-build]
#   bench/ring_share.sh --summary DIR
#
# Method. Builds ebdman and vfm-sim at HEAD from `git archive` (Release,
# build/bench/at-COMMIT; --no-build expects them there) and
# bench/byte_proxy.c. One control plane (tools/controlplane/start, no
# controller-manager): the CRDs of config/crd/bases, namespace bench-ring
# with --ebds EBDs, vfm-sim throughout (it makes the VFMs Ready). Warm-up:
# one ebdman until every EBD is Ready, so the children and statuses exist
# before any measured run. Then --runs rounds of three configurations in
# the same order (single, ring-off, ring-on):
#   single    one ebdman --namespace bench-ring
#   ring-off  three ebdman --namespace bench-ring --ring bench (identities
#             r0..r2), the apiserver without the gate
#   ring-on   the same, the apiserver restarted with
#             --feature-gates=ShardedListAndWatch=true (and restarted
#             without it before the next single run)
# Each replica runs with --workers 4 and a kubeconfig whose server is its
# own byte_proxy (TLS untouched: the bytes on the wire). Once every replica
# answers /readyz, at least --settle seconds, then until their CPU moved
# less than 0.05 s in 3 s (at most 180 s): settled RSS = median VmRSS of the
# last 5 one-second samples; bytes = its proxy's count apiserver -> replica
# then; cached = its kcr_informer_objects per informer (metrics over plain
# HTTP). Then SIGTERM to all, and the Ready count is checked (ok=0 when not
# every EBD is Ready).
# Raw files: --out (default bench/results/<UTC date>/ring_share/<UTC start>):
# campaign.txt, <config>-r<R>/<replica>/ (result.txt, rss.csv, operator.log,
# metrics.txt, proxy.out), summary.txt.
# Not a test: ctest and CI never run it (about 10 minutes at 2,000 EBDs).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
self=$root/bench/ring_share.sh
die() { echo "ring_share: $*" >&2; exit 2; }

summary() {
  /usr/bin/python3 - "$1" <<'EOF'
import glob, os, statistics, sys
d = sys.argv[1]
rows = {}
for f in sorted(glob.glob(os.path.join(d, "*-r*", "*", "result.txt"))):
    kv = dict(l.rstrip("\n").split("=", 1) for l in open(f) if "=" in l)
    rows.setdefault(kv["config"], []).append(kv)
if not rows:
    sys.exit("no runs in " + d)
def med(v): return statistics.median(v) if v else float("nan")
def rng(v, f="%.1f"): return (f % min(v)) + "-" + (f % max(v)) if v else "-"
out = ["| configuration | replicas x runs | settled RSS per replica, MiB | settled RSS of all replicas, MiB | bytes from the apiserver per replica, MB | EBDs cached per replica | VFMs cached per replica | runs ok |",
       "|---|---|---|---|---|---|---|---|"]
for c in ["single", "ring-off", "ring-on"]:
    rs = rows.get(c, [])
    if not rs:
        continue
    rss = [int(r["settled_rss_kb"]) / 1024 for r in rs if r.get("settled_rss_kb")]
    runs = sorted({r["run"] for r in rs})
    tot = [sum(int(r["settled_rss_kb"]) / 1024 for r in rs if r["run"] == x and r.get("settled_rss_kb")) for x in runs]
    down = [int(r["bytes_down"]) / 1e6 for r in rs if r.get("bytes_down")]
    ebd = [int(float(r["cached_ebds"])) for r in rs if r.get("cached_ebds")]
    vfm = [int(float(r["cached_vfms"])) for r in rs if r.get("cached_vfms")]
    ok = sum(1 for x in runs if all(r.get("ok") == "1" for r in rs if r["run"] == x))
    reps = len(rs) // max(len(runs), 1)
    out.append(f"| {c} | {reps} x {len(runs)} | {med(rss):.1f} ({rng(rss)}) | {med(tot):.1f} ({rng(tot)}) | "
               f"{med(down):.2f} ({rng(down, '%.2f')}) | {med(ebd):.0f} ({rng(ebd, '%d')}) | "
               f"{med(vfm):.0f} ({rng(vfm, '%d')}) | {ok} of {len(runs)} |")
print("\n".join(out))
EOF
}

ebds=2000 runs=3 settle=10 out="" build=1
while (($#)); do
  case $1 in
    --ebds) ebds=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --settle) settle=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --no-build) build=0; shift ;;
    --summary) summary "$2"; exit ;;
    --inside) shift; break ;;
    *) die "unknown option $1" ;;
  esac
done

if [[ -z ${KCR_CONTROLPLANE_DIR:-} ]]; then # set up, then run inside a control plane
  commit=$(git -C "$root" rev-parse --short=12 HEAD)
  at=$root/build/bench/at-$commit
  if ((build)); then
    rm -rf "$at" && mkdir -p "$at/src"
    git -C "$root" archive HEAD | tar -x -C "$at/src"
    cmake -S "$at/src" -B "$at" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
    cmake --build "$at" --target ebdman vfm-sim >/dev/null
    mkdir -p "$root/build/bench/bench"
    gcc -O2 -Wall -Wextra -pthread -o "$root/build/bench/bench/byte_proxy" "$root/bench/byte_proxy.c"
  fi
  [[ -x $at/operator/ebdman/ebdman && -x $root/build/bench/bench/byte_proxy ]] ||
    die "not built: run without --no-build"
  start=$(date -u +%Y%m%dT%H%M%SZ)
  [[ -n $out ]] || out=$root/bench/results/$(date -u +%F)/ring_share/$start
  mkdir -p "$out"
  {
    echo "commit=$commit"
    echo "ebds=$ebds runs=$runs settle=$settle"
    echo "started=$start load=$(cut -d' ' -f1-3 /proc/loadavg) cpus=$(nproc)"
  } >"$out/campaign.txt"
  exec "$root/tools/controlplane/start" -- "$self" --ebds "$ebds" --runs "$runs" \
    --settle "$settle" --out "$out" --inside "$at"
fi

at=$1
proxy=$root/build/bench/bench/byte_proxy
ebdman=$at/operator/ebdman/ebdman
vfmsim=$at/examples/vfm-sim
ns=bench-ring
k() { "$KCR_CONTROLPLANE_BIN/kubectl" --request-timeout=300s "$@"; }
log() { echo "ring_share: $(date -u +%T) $*" >&2; }
free_port() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
tck=$(getconf CLK_TCK)
api_port=${KCR_APISERVER_URL##*:}
bg=()
cleanup() {
  local p
  for p in "${bg[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${bg[@]}"; do wait "$p" 2>/dev/null || true; done
}
trap cleanup EXIT
ready_count() {
  k get ebd -n "$ns" -o 'jsonpath={range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' 2>/dev/null |
    grep -c '^True$' || true
}
cpu_of() { awk -v tck="$tck" '{ sub(/^.*\) /, ""); print ($12 + $13) / tck }' "/proc/$1/stat"; }

log "CRDs, namespaces, $ebds EBDs"
k apply -f "$root/config/crd/bases" >/dev/null
k create namespace "$ns" >/dev/null
k create namespace ebdman-system >/dev/null
k wait --for condition=Established crd --all --timeout=60s >/dev/null
for ((i = 0; i < ebds; i++)); do
  printf -- '---\napiVersion: ebdman.example.com/v1beta1\nkind: EBD\nmetadata:\n  name: e%05d\nspec:\n  vfmTemplate:\n    image: "registry.example.com/vfm:1"\n    replicas: 1\n    config:\n      name: "e%05d"\n' "$i" "$i"
done >"$out/ebds.yaml"
k -n "$ns" apply --server-side -f "$out/ebds.yaml" >/dev/null
rm -f "$out/ebds.yaml"
vport=$(free_port)
"$vfmsim" --namespace "$ns" --delay 100ms --metrics-bind-address "127.0.0.1:$vport" \
  --health-probe-bind-address "127.0.0.1:$vport" >"$out/vfm-sim.log" 2>&1 &
bg+=($!)

# start_replica DIR ARGS...: an ebdman behind its own byte_proxy; sets
# R_PID R_PPID R_HPORT R_MPORT.
start_replica() {
  local dir=$1 i pport
  shift
  mkdir -p "$dir"
  "$proxy" "$api_port" >"$dir/proxy.out" 2>"$dir/proxy.err" &
  R_PPID=$!
  for ((i = 0; i < 50; i++)); do grep -qs '^port ' "$dir/proxy.out" && break; sleep 0.1; done
  pport=$(sed -n 's/^port //p' "$dir/proxy.out")
  [[ -n $pport ]] || die "byte_proxy did not start"
  sed "s#server: .*#server: \"https://127.0.0.1:$pport\"#" "$KUBECONFIG" >"$dir/kubeconfig"
  R_HPORT=$(free_port) R_MPORT=$(free_port)
  (cd "$dir" && exec env KUBECONFIG="$dir/kubeconfig" "$ebdman" run --workers 4 \
    --health-probe-bind-address "127.0.0.1:$R_HPORT" --metrics-bind-address "127.0.0.1:$R_MPORT" \
    --metrics-secure=false --namespace "$ns" "$@") >"$dir/operator.log" 2>&1 &
  R_PID=$!
  local t0=$EPOCHREALTIME pid=$R_PID
  (
    while [[ -r /proc/$pid/status ]]; do
      awk -v t="$EPOCHREALTIME" -v t0="$t0" '$1 == "VmRSS:" { printf "%.2f,%d\n", t - t0, $2 }' "/proc/$pid/status" 2>/dev/null || true
      sleep 1
    done
  ) >"$dir/rss.csv" &
}

# run CONFIG R: one run of CONFIG (its replicas), round R.
run() {
  local config=$1 r=$2 n=3 i d pids=() ppids=() hports=() mports=() dirs=()
  [[ $config == single ]] && n=1
  for ((i = 0; i < n; i++)); do
    d=$out/$config-r$r/r$i
    if ((n == 1)); then start_replica "$d"; else start_replica "$d" --ring bench --ring-identity "r$i"; fi
    pids+=("$R_PID") ppids+=("$R_PPID") hports+=("$R_HPORT") mports+=("$R_MPORT") dirs+=("$d")
  done
  for ((i = 0; i < n; i++)); do
    local t
    for ((t = 0; t < 900; t++)); do
      curl -sf "http://127.0.0.1:${hports[i]}/readyz" >/dev/null 2>&1 && break
      kill -0 "${pids[i]}" 2>/dev/null || break
      sleep 0.2
    done
  done
  sleep "$settle"
  local c0 c1 k2
  for ((k2 = 0; k2 < 60; k2++)); do
    c0=0 c1=0
    for ((i = 0; i < n; i++)); do c0=$(awk -v a="$c0" -v b="$(cpu_of "${pids[i]}")" 'BEGIN { print a + b }'); done
    sleep 3
    for ((i = 0; i < n; i++)); do c1=$(awk -v a="$c1" -v b="$(cpu_of "${pids[i]}")" 'BEGIN { print a + b }'); done
    awk -v a="$c0" -v b="$c1" 'BEGIN { exit !(b - a < 0.05) }' && break
  done
  sleep 5
  for ((i = 0; i < n; i++)); do
    d=${dirs[i]}
    kill -USR1 "${ppids[i]}"
    curl -sf "http://127.0.0.1:${mports[i]}/metrics" >"$d/metrics.txt" || true
    {
      echo "config=$config"
      echo "run=$r"
      echo "replica=r$i"
      echo "load=$(cut -d' ' -f1 /proc/loadavg)"
      echo "cpu_s=$(cpu_of "${pids[i]}")"
      echo "settled_rss_kb=$(tail -5 "$d/rss.csv" | cut -d, -f2 | sort -n | sed -n 3p)"
      awk '/^kcr_informer_objects\{informer="ebds/ { print "cached_ebds=" $2 } /^kcr_informer_objects\{informer="vfms/ { print "cached_vfms=" $2 } /^kcr_informer_objects\{informer="configmaps"/ { print "cached_configmaps=" $2 }' "$d/metrics.txt"
    } >"$d/result.txt"
  done
  sleep 0.3
  for ((i = 0; i < n; i++)); do
    echo "bytes_down=$(grep '^down=' "${dirs[i]}/proxy.out" | tail -1 | sed -n 's/.*down=\([0-9]*\).*/\1/p')" >>"${dirs[i]}/result.txt"
    kill "${pids[i]}" 2>/dev/null || true
  done
  for ((i = 0; i < n; i++)); do
    wait "${pids[i]}" 2>/dev/null || true
    kill "${ppids[i]}" 2>/dev/null || true
    wait "${ppids[i]}" 2>/dev/null || true
    rm -f "${dirs[i]}/kubeconfig" "${dirs[i]}/proxy.err"
  done
  local ready ok=1
  ready=$(ready_count)
  ((ready == ebds)) || ok=0
  for ((i = 0; i < n; i++)); do echo "ready_after=$ready" >>"${dirs[i]}/result.txt"; echo "ok=$ok" >>"${dirs[i]}/result.txt"; done
  log "$config r$r: $(for ((i = 0; i < n; i++)); do grep -E '^(settled_rss_kb|bytes_down|cached_ebds)=' "${dirs[i]}/result.txt" | tr '\n' ' '; echo -n '| '; done) ready=$ready"
  k -n ebdman-system delete leases --all >/dev/null 2>&1 || true
}

gate() { # gate on|off: the apiserver restarted with or without the feature gate
  if [[ $1 == on ]]; then
    "$root/tools/controlplane/restart-apiserver" --arg --feature-gates=ShardedListAndWatch=true >/dev/null 2>&1
  else
    "$root/tools/controlplane/restart-apiserver" >/dev/null 2>&1
  fi
  sleep 5 # (the restarted apiserver's caches and RBAC warm up)
}

log "warm-up: one ebdman until every EBD is Ready"
start_replica "$out/warmup"
wpid=$R_PID
for ((i = 0; i < 600; i++)); do
  (($(ready_count) >= ebds)) && break
  sleep 2
done
kill "$wpid" "$R_PPID" 2>/dev/null || true
wait "$wpid" "$R_PPID" 2>/dev/null || true
log "warm-up: $(ready_count) of $ebds Ready"
for ((r = 1; r <= runs; r++)); do
  run single "$r"
  run ring-off "$r"
  gate on
  run ring-on "$r"
  gate off
done
summary "$out" | tee "$out/summary.txt"
