#!/usr/bin/env bash
# bench/cluster_size.sh - memory against cluster size (bench/README.md,
# section 9; issue #31): an operator selecting one namespace of 1,000 EBDs
# while 0, 10,000 and 50,000 unselected objects of the kinds it caches
# exist elsewhere in the cluster. Settled and peak RSS, and the bytes the
# apiserver sends it, for ebdman and its peers, in one campaign.
#
#   bench/cluster_size.sh [--quick] [--sizes 0,10000,50000] [--ebds 1000]
#                         [--runs 3] [--configs LIST] [--settle 20]
#                         [--parallel 8] [--out DIR] [--no-build] [--commit C]
#
# Configurations (--configs, comma-separated; default all four):
#   ebdman      ebdman run --namespace bench-sel (one informer per kind, on
#               that namespace: the apiserver filters)
#   cr-default  peers/controller-runtime-typed run --reconcile-namespace
#               bench-sel: controller-runtime's default cache (cluster-wide
#               informers; ConfigMaps with the peer's managed-by label
#               selector, as always), EBDs of other namespaces dropped by a
#               predicate (the client filters)
#   cr-best     peers/controller-runtime-typed run --namespace bench-sel:
#               cache.Options.DefaultNamespaces (the apiserver filters); no
#               cache can be metadata-only (the reconcile reads the EBD's
#               spec, the VFM's spec and status, the ConfigMap's data)
#   kube-rs     peers/kube-rs run --namespace bench-sel (Api::namespaced)
#
# Self-contained: builds ebdman, vfm-sim and ready_count at HEAD from `git
# archive` (build/bench/at-COMMIT, Release, as bench/campaign's
# ebdman@COMMIT: other work in the tree does not leak in; --commit C for
# another commit), the proxy
# bench/byte_proxy.c (build/bench/bench/byte_proxy) and the two peers from
# the working tree (build/bench/peers/NAME); --no-build expects them there.
# Then one control plane for the whole campaign (tools/controlplane/start,
# no controller-manager: nothing is deleted), etcd started with
# ETCD_QUOTA_BACKEND_BYTES=8 GiB (etcd reads its flags from ETCD_*
# variables; start has no flag for it), and:
#   1. the CRDs of config/crd/bases, namespace bench-sel with --ebds EBDs
#      (default 1,000), namespaces bench-other-0..9, vfm-sim (all namespaces,
#      running throughout: it makes the VFMs Ready);
#   2. warm-up: each configuration once, unmeasured for the table, ebdman
#      first until every EBD is Ready, so the children and statuses exist
#      and every measured run starts from the same state;
#   3. for each size (default 0, 10,000, 50,000) the unselected objects are
#      grown to that count (only the new ones created: parallel `kubectl
#      create -f` on generated YAML), round-robin over namespaces
#      bench-other-0..9, object i of kind by i mod 10:
#        0: ConfigMap, 32 KB payload      1: Secret, 32 KB (base64 in data)
#        2-4: EBD, 1 KB config            5-7: ConfigMap, 1 KB
#        8-9: Secret, 1 KB
#      so 20% are 32 KB (10,000 of 50,000); each payload a different
#      slice of random base64 (gzip, which the Go clients ask for, finds
#      nothing to squeeze); every ConfigMap carries
#      app.kubernetes.io/managed-by=ebdman (as another ebdman's children
#      would, so only a namespace restriction keeps them out of a cache);
#      then etcd is compacted and defragmented and its size recorded;
#   4. --runs rounds (default 3), each every configuration in the same
#      order (A B C D A B C D ...): the operator runs with --workers 4,
#      --zap-log-level warn, metrics off, GOGC/GOMEMLIMIT unset, and a
#      kubeconfig whose server is a byte_proxy in front of the apiserver
#      (TCP, TLS untouched: the bytes on the wire, HTTP/2 and gzip as the
#      client negotiates them). Every second: VmRSS, RssAnon, RssFile,
#      VmHWM, CPU (rss.csv). After /readyz, at least --settle seconds
#      (default 20) and until its CPU moved less than 0.03 s in 3 s (at most
#      180 s more): settled RSS = median VmRSS of the last 5 samples; peak =
#      VmHWM; bytes = the proxy's count upstream->client then. The operator
#      is stopped (SIGTERM), then the Ready count of bench-sel is checked;
#      when a run left EBDs not Ready, an unmeasured ebdman run
#      (repair-after-<config>-r<R>/) makes them Ready before the next run.
# Raw files: --out (default bench/results/<UTC date>/cluster_size/<UTC
# start>; --quick: build/bench/cluster-size-quick/<start>): campaign.txt
# (parameters, commits, load), etcd-<size>.txt, <size>/<config>-r<R>/
# (result.txt key=value, rss.csv, operator.log, proxy.out; ok=0 when the
# operator gave no /readyz or died, or when fewer than --ebds EBDs were
# Ready after it stopped - the summary counts every run it could measure
# and shows the Ready count), and
# summary.txt (bench/cluster_size.sh --summary DIR prints it again).
# --quick: sizes 0,1000,5000, 100 EBDs, 1 run, settle 10 s.
# Not a test: ctest and CI never run it (a full campaign takes about 30
# minutes on the 2-core machine).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
self=$root/bench/cluster_size.sh
die() { echo "cluster_size: $*" >&2; exit 2; }

# summary DIR: the table of DIR/*/*/result.txt.
summary() {
  local dir=$1
  /usr/bin/python3 - "$dir" <<'EOF'
import glob, os, statistics, sys
d = sys.argv[1]
runs = []
for f in sorted(glob.glob(os.path.join(d, "*", "*", "result.txt"))):
    kv = dict(l.rstrip("\n").split("=", 1) for l in open(f) if "=" in l)
    if kv.get("warmup") == "1":
        continue
    runs.append(kv)
if not runs:
    sys.exit("no runs in " + d)
order = ["ebdman", "cr-default", "cr-best", "kube-rs"]
configs = sorted({r["config"] for r in runs}, key=lambda c: (order.index(c) if c in order else 99, c))
sizes = sorted({int(r["size"]) for r in runs})
def med(v): return statistics.median(v)
def mib(kb): return kb / 1024
def rng(v, f="%.1f"): return (f % min(v)) + "-" + (f % max(v))
out = []
out.append("| configuration | unselected objects | runs | settled RSS, MiB | settled anon, MiB | peak RSS (VmHWM), MiB | bytes from the apiserver, MB | EBDs Ready after the run | load (1 min) |")
out.append("|---|---|---|---|---|---|---|---|---|")
fits = {}
for c in configs:
    pts, bpts = [], []
    for s in sizes:
        rs = [r for r in runs if r["config"] == c and int(r["size"]) == s and r.get("settled_rss_kb")]
        bad = [r for r in runs if r["config"] == c and int(r["size"]) == s and not r.get("settled_rss_kb")]
        if not rs:
            out.append(f"| {c} | {s:,} | 0 ({len(bad)} failed) | - | - | - | - | - | - |")
            continue
        rss = [int(r["settled_rss_kb"]) for r in rs]
        anon = [int(r["settled_anon_kb"]) for r in rs]
        hwm = [int(r["vmhwm_kb"]) for r in rs]
        down = [int(r["bytes_down"]) for r in rs]
        load = [float(r["load_start"]) for r in rs] + [float(r["load_end"]) for r in rs]
        ready = sorted({int(r.get("ready_after") or -1) for r in rs})
        ready = [str(x) for x in ready] if len(ready) < 3 else [str(ready[0]), str(ready[-1])]
        pts.append((s, med(rss) * 1024))
        bpts.append(med(down))
        out.append(f"| {c} | {s:,} | {len(rs)}{' (+%d failed)' % len(bad) if bad else ''} | "
                   f"{mib(med(rss)):.1f} ({rng([mib(x) for x in rss])}) | "
                   f"{mib(med(anon)):.1f} ({rng([mib(x) for x in anon])}) | "
                   f"{mib(med(hwm)):.1f} ({rng([mib(x) for x in hwm])}) | "
                   f"{med(down)/1e6:.2f} ({rng([x/1e6 for x in down], '%.2f')}) | "
                   f"{'-'.join(ready)} | {rng(load, '%.2f')} |")
    fits[c] = (pts, bpts)
out.append("")
out.append("| configuration | settled-RSS slope, bytes per unselected object (least squares over the medians) | bytes sent: max/min - 1 over the sizes | pass (ebdman: slope <= 16 B/object, bytes within 5%) |")
out.append("|---|---|---|---|")
for c in configs:
    pts, bpts = fits[c]
    if len(pts) >= 2:
        xs = [p[0] for p in pts]; ys = [p[1] for p in pts]
        mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
        sxx = sum((x - mx) ** 2 for x in xs)
        slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx if sxx else float("nan")
    else:
        slope = float("nan")
    ratio = (max(bpts) / min(bpts) - 1) * 100 if bpts and min(bpts) > 0 else float("nan")
    verdict = "-"
    if c == "ebdman":
        ok = slope <= 16 and ratio <= 5 and len(pts) == len(sizes)
        verdict = "**pass**" if ok else "**fail**"
    out.append(f"| {c} | {slope:,.1f} | {ratio:.1f}% | {verdict} |")
text = "\n".join(out) + "\n"
open(os.path.join(d, "summary.txt"), "w").write(text)
print(text, end="")
EOF
}

main() {
sizes=0,10000,50000 ebds=1000 runs=3 configs=ebdman,cr-default,cr-best,kube-rs settle=20 parallel=8
out="" nobuild=0 quick=0 inner=0 commit=HEAD
while (($#)); do
  case $1 in
    --quick) quick=1 sizes=0,1000,5000 ebds=100 runs=1 settle=10 ;;
    --sizes) sizes=$2; shift ;;
    --ebds) ebds=$2; shift ;;
    --runs) runs=$2; shift ;;
    --configs) configs=$2; shift ;;
    --settle) settle=$2; shift ;;
    --parallel) parallel=$2; shift ;;
    --out) out=$2; shift ;;
    --no-build) nobuild=1 ;;
    --commit) commit=$2; shift ;;
    --inner) inner=1 ;;
    --summary) summary "$2"; exit 0 ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown option $1 (try --help)" ;;
  esac
  shift
done
[[ $sizes =~ ^[0-9]+(,[0-9]+)*$ ]] || die "--sizes wants numbers, comma-separated"
[[ $ebds =~ ^[1-9][0-9]*$ && $runs =~ ^[1-9][0-9]*$ && $settle =~ ^[0-9]+$ ]] || die "bad --ebds, --runs or --settle"
for c in ${configs//,/ }; do
  case $c in ebdman | cr-default | cr-best | kube-rs) ;; *) die "unknown configuration $c" ;; esac
done
build=$root/build/bench
commit=$(git -C "$root" rev-parse --short "$commit")
at=$build/at-$commit/build
proxy=$build/bench/byte_proxy
crbin=$build/peers/controller-runtime-typed
rsbin=$build/peers/kube-rs

# ------------------------------------------------------------- outer part
if ((!inner)); then
  if ((!nobuild)); then
    echo "cluster_size: building ebdman, vfm-sim, ready_count at $commit (git archive -> $build/at-$commit)" >&2
    src=$build/at-$commit
    if [[ ! -x $at/operator/ebdman/ebdman ]]; then
      rm -rf "$src" && mkdir -p "$src"
      git -C "$root" archive "$commit" | tar -x -C "$src"
      cmake -S "$src" -B "$at" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
    fi
    cmake --build "$at" --target ebdman vfm-sim ready_count >/dev/null
    mkdir -p "$build/bench" "$build/peers"
    gcc -O2 -Wall -Wextra -pthread -o "$proxy" "$root/bench/byte_proxy.c"
    if [[ ,$configs, == *,cr-* ]]; then
      echo "cluster_size: building the controller-runtime-typed peer" >&2
      "$root/bench/peers/controller-runtime-typed/build" "$crbin"
    fi
    if [[ ,$configs, == *,kube-rs,* ]]; then
      echo "cluster_size: building the kube-rs peer" >&2
      "$root/bench/peers/kube-rs/build" "$rsbin"
    fi
  fi
  for f in "$at/operator/ebdman/ebdman" "$at/examples/vfm-sim" "$proxy"; do
    [[ -x $f ]] || die "$f is missing (run without --no-build)"
  done
  [[ ,$configs, != *,cr-* || -x $crbin ]] || die "$crbin is missing"
  [[ ,$configs, != *,kube-rs,* || -x $rsbin ]] || die "$rsbin is missing"
  start=$(date -u +%Y%m%dT%H%M%SZ)
  if [[ -z $out ]]; then
    if ((quick)); then
      out=$build/cluster-size-quick/$start
    else
      out=$root/bench/results/$(date -u +%Y-%m-%d)/cluster_size/$start
    fi
  fi
  mkdir -p "$out"
  out=$(cd "$out" && pwd)
  peers_dirty=$(git -C "$root" status --porcelain -- bench/peers | grep -q . && echo "yes (uncommitted changes in bench/peers)" || echo no)
  {
    echo "campaign=$start"
    echo "sizes=$sizes ebds=$ebds runs=$runs configs=$configs settle_s=$settle parallel=$parallel quick=$quick"
    echo "ebdman_commit=$commit (git archive, clean)"
    echo "peers_from_tree_at=$(git -C "$root" rev-parse --short HEAD) peers_dirty=$peers_dirty"
    echo "machine=nproc $(nproc), $(awk '/MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo), $(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1)"
    echo "load_start=$(cut -d' ' -f1-3 /proc/loadavg)"
    echo "started_utc=$(date -u +%FT%TZ)"
  } >"$out/campaign.txt"
  echo "cluster_size: campaign $start -> $out" >&2
  rc=0
  ETCD_QUOTA_BACKEND_BYTES=$((8 << 30)) "$root/tools/controlplane/start" -- \
    "$self" --inner --sizes "$sizes" --ebds "$ebds" --runs "$runs" --configs "$configs" \
    --settle "$settle" --parallel "$parallel" --out "$out" --commit "$commit" 2>&1 | tee "$out/campaign.log" >&2 || rc=1
  { echo "load_end=$(cut -d' ' -f1-3 /proc/loadavg)"; echo "ended_utc=$(date -u +%FT%TZ)"; } >>"$out/campaign.txt"
  summary "$out" || rc=1
  echo "cluster_size: results in $out" >&2
  exit "$rc"
fi

# ------------------------------------------------------------- inner part
# (under tools/controlplane/start: KUBECONFIG etc. are exported)
k() { "$KCR_CONTROLPLANE_BIN/kubectl" --request-timeout=300s "$@"; }
load() { cut -d' ' -f1 /proc/loadavg; }
log() { echo "cluster_size: $(date -u +%T) $*" >&2; }
etcd() { curl -sS --max-time 600 -X POST "$KCR_ETCD_ENDPOINT/v3/$1" -d "$2"; }
free_port() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
tck=$(getconf CLK_TCK)
sel=bench-sel
bg=()
cleanup() {
  local p
  for p in "${bg[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${bg[@]}"; do wait "$p" 2>/dev/null || true; done
}
trap cleanup EXIT

grep -q '"quota-backend-bytes":8589934592' "$KCR_CONTROLPLANE_DIR/etcd.log" ||
  die "etcd did not take ETCD_QUOTA_BACKEND_BYTES (see $KCR_CONTROLPLANE_DIR/etcd.log)"
api_port=${KCR_APISERVER_URL##*:}
kc_in=$root/build/bench/cluster-size-gen/$(basename "$out").kubeconfig.in
mkdir -p "${kc_in%/*}"
sed "s#server: .*#server: \"https://127.0.0.1:PROXYPORT\"#" "$KUBECONFIG" >"$kc_in"

# create FILES...: kubectl create -f of each file, all at once.
create() {
  local f p ps=() bad=0
  for f in "$@"; do
    k create -f "$f" >/dev/null 2>"$f.err" &
    ps+=($!)
  done
  for p in "${ps[@]}"; do wait "$p" || bad=1; done
  ((!bad)) || { grep -h . "${@/%/.err}" | head -5 >&2; die "a kubectl create failed"; }
  rm -f "$@" "${@/%/.err}"
}
ready_count() {
  k get ebd -n "$sel" -o 'jsonpath={range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' 2>/dev/null |
    grep -c '^True$' || true
}
# etcd_maint TAG: compact to the current revision, defragment, record size.
etcd_maint() {
  local rev before after
  before=$(etcd maintenance/status '{}' | sed -n 's/.*"dbSize":"\([0-9]*\)".*/\1/p')
  rev=$(etcd kv/range '{"key":"AA=="}' | sed -n 's/.*"revision":"\([0-9]*\)".*/\1/p')
  etcd kv/compaction "{\"revision\":\"$rev\",\"physical\":true}" >/dev/null
  etcd maintenance/defragment '{}' >/dev/null
  after=$(etcd maintenance/status '{}' | sed -n 's/.*"dbSize":"\([0-9]*\)".*/\1/p')
  echo "revision=$rev db_bytes_before=$before db_bytes_after=$after" >"$out/etcd-$1.txt"
  log "etcd compacted at $rev, defragmented: $before -> $after bytes"
}

log "installing the CRDs, namespaces"
k apply -f "$root/config/crd/bases" >/dev/null
k wait --for=condition=Established crd/ebds.ebdman.example.com crd/vfms.ebdman.example.com >/dev/null
k create namespace "$sel" >/dev/null
for i in 0 1 2 3 4 5 6 7 8 9; do k create namespace "bench-other-$i" >/dev/null; done
until k -n "$sel" get ebds >/dev/null 2>&1; do sleep 0.5; done

gen=$root/build/bench/cluster-size-gen/$(basename "$out")
mkdir -p "$gen"
log "creating $ebds EBDs in $sel"
awk -v n="$ebds" -v p="$parallel" -v ns="$sel" -v dir="$gen" 'BEGIN {
  for (i = 0; i < n; i++)
    printf "---\napiVersion: ebdman.example.com/v1beta1\nkind: EBD\nmetadata:\n  name: ebd-%05d\n  namespace: %s\nspec:\n  vfmTemplate:\n    image: registry.example.com/vfm:1.0\n    replicas: 1\n    config:\n      mode: fast\n      index: \"%d\"\n", i, ns, i > sprintf("%s/sel-%02d.yaml", dir, i % p)
}'
create "$gen"/sel-*.yaml

"$at/examples/vfm-sim" --delay 0 --zap-log-level warn >"$out/vfm-sim.log" 2>&1 &
bg+=($!)

# grow N: the unselected objects [have, N), as described in the header.
have=0
grow() {
  local to=$1
  ((to > have)) || return 0
  log "creating unselected objects $have..$((to - 1))"
  # Payloads: slices of 4 MB of random base64 at random offsets (a multiple
  # of 4, so a Secret's slice is valid base64 too): a different, barely
  # compressible payload per object, as gzip would find real data.
  [[ -s $gen/pool.b64 ]] || head -c 3000000 /dev/urandom | base64 -w0 >"$gen/pool.b64"
  awk -v from="$have" -v to="$to" -v p="$parallel" -v dir="$gen" -v poolf="$gen/pool.b64" 'BEGIN {
    getline pool <poolf; plen = length(pool); srand(from + 1)
    for (i = from; i < to; i++) {
      k = i % 10; ns = "bench-other-" int(i / 10) % 10
      f = sprintf("%s/other-%02d.yaml", dir, i % p)
      len = (k <= 1 ? 32000 : (k >= 8 ? 1200 : 900))    # 32 KB; a 1 KB Secret holds 900 bytes as 1,200 base64
      data = substr(pool, 4 * int(rand() * (plen - len) / 4) + 1, len)
      if (k == 0 || (k >= 5 && k <= 7))
        printf "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-%06d\n  namespace: %s\n  labels:\n    app.kubernetes.io/managed-by: ebdman\n    ebdman.example.com/ebd: other-%06d\ndata:\n  payload: \"%s\"\n", i, ns, i, data > f
      else if (k == 1 || k >= 8)
        printf "---\napiVersion: v1\nkind: Secret\nmetadata:\n  name: sec-%06d\n  namespace: %s\ntype: Opaque\ndata:\n  payload: \"%s\"\n", i, ns, data > f
      else
        printf "---\napiVersion: ebdman.example.com/v1beta1\nkind: EBD\nmetadata:\n  name: ebd-%06d\n  namespace: %s\nspec:\n  vfmTemplate:\n    image: registry.example.com/vfm:1.0\n    replicas: 1\n    config:\n      index: \"%d\"\n      payload: \"%s\"\n", i, ns, i, data > f
    }
  }'
  local t=$SECONDS
  create "$gen"/other-*.yaml
  log "created $((to - have)) objects in $((SECONDS - t)) s"
  have=$to
}

# run CONFIG SIZE DIR [warmup]: one measured run of CONFIG; result.txt in DIR.
run() {
  local config=$1 size=$2 dir=$3 warm=${4:-0} bin args=() pport hport pid ppid i t0
  mkdir -p "$dir"
  local res=$dir/result.txt
  : >"$res"
  put() { echo "$1=$2" >>"$res"; }
  case $config in
    ebdman) bin=$at/operator/ebdman/ebdman args=(--namespace "$sel" --metrics-secure=false) ;;
    cr-default) bin=$crbin args=(--reconcile-namespace "$sel") ;;
    cr-best) bin=$crbin args=(--namespace "$sel") ;;
    kube-rs) bin=$rsbin args=(--namespace "$sel") ;;
  esac
  put config "$config"
  put size "$size"
  put warmup "$warm"
  put ebds "$ebds"
  put args "${args[*]}"
  put started_utc "$(date -u +%FT%TZ)"
  put load_start "$(load)"
  "$proxy" "$api_port" >"$dir/proxy.out" 2>"$dir/proxy.err" &
  ppid=$!
  for ((i = 0; i < 50; i++)); do grep -qs '^port ' "$dir/proxy.out" && break; sleep 0.1; done
  pport=$(sed -n 's/^port //p' "$dir/proxy.out")
  [[ -n $pport ]] || die "byte_proxy did not start"
  sed "s/PROXYPORT/$pport/" "$kc_in" >"$dir/kubeconfig"
  hport=$(free_port)
  t0=$EPOCHREALTIME
  (cd "$dir" && exec env -u GOGC -u GOMEMLIMIT -u KCR_TRANSPORT KUBECONFIG="$dir/kubeconfig" \
    "$bin" run --workers 4 --zap-log-level warn --metrics-bind-address 0 \
    --health-probe-bind-address "127.0.0.1:$hport" "${args[@]}") >"$dir/operator.log" 2>&1 &
  pid=$!
  (
    while [[ -r /proc/$pid/status ]]; do
      awk -v t="$EPOCHREALTIME" -v t0="$t0" -v tck="$tck" '
        FILENAME ~ /status$/ { if ($1 == "VmRSS:") r = $2; else if ($1 == "RssAnon:") a = $2; else if ($1 == "RssFile:") f = $2; else if ($1 == "VmHWM:") h = $2; next }
        { sub(/^.*\) /, ""); c = ($12 + $13) / tck }
        END { if (r != "") printf "%.2f,%d,%d,%d,%d,%.2f\n", t - t0, r, a, f, h, c }' "/proc/$pid/status" "/proc/$pid/stat" 2>/dev/null || true
      sleep 1
    done
  ) >"$dir/rss.csv" &
  local sampler=$!
  local ok=1 tr="" tend
  for ((i = 0; i < 3000; i++)); do # /readyz, at most 600 s
    if curl -sf "http://127.0.0.1:$hport/readyz" >/dev/null 2>&1; then
      tr=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.2f", b - a }')
      break
    fi
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.2
  done
  if [[ -z $tr ]]; then
    log "$config at $size: no /readyz (log tail follows)"
    tail -5 "$dir/operator.log" >&2
    ok=0
  else
    put readyz_s "$tr"
    if ((warm)); then # the first run of all: until every EBD is Ready
      for ((i = 0; i < 300; i++)); do
        (($(ready_count) >= ebds)) && break
        sleep 2
      done
    fi
    # settle: at least $settle s, then until 3 s with < 0.03 s of CPU (max 180 s)
    sleep "$settle"
    local c0 c1 n
    for ((n = 0; n < 60; n++)); do
      c0=$(awk -v tck="$tck" '{ sub(/^.*\) /, ""); print ($12 + $13) / tck }' "/proc/$pid/stat")
      sleep 3
      c1=$(awk -v tck="$tck" '{ sub(/^.*\) /, ""); print ($12 + $13) / tck }' "/proc/$pid/stat")
      awk -v a="$c0" -v b="$c1" 'BEGIN { exit !(b - a < 0.03) }' && break
    done
    sleep 2 # two more samples at rest
    kill -0 "$pid" 2>/dev/null || ok=0
  fi
  tend=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.2f", b - a }')
  kill -USR1 "$ppid"
  sleep 0.3
  local bytes
  bytes=$(grep '^down=' "$dir/proxy.out" | tail -1)
  put measured_at_s "$tend"
  put bytes_down "$(sed -n 's/.*down=\([0-9]*\).*/\1/p' <<<"$bytes")"
  put bytes_up "$(sed -n 's/.*up=\([0-9]*\).*/\1/p' <<<"$bytes")"
  put connections "$(sed -n 's/.*conns=\([0-9]*\).*/\1/p' <<<"$bytes")"
  if ((ok)); then
    awk '/^(VmRSS|RssAnon|RssFile|VmHWM):/ { print $1, $2 }' "/proc/$pid/status" >"$dir/status-end.txt"
    put vmhwm_kb "$(awk '$1 == "VmHWM:" { print $2 }' "$dir/status-end.txt")"
    put cpu_s "$(awk -v tck="$tck" '{ sub(/^.*\) /, ""); printf "%.2f", ($12 + $13) / tck }' "/proc/$pid/stat")"
    # settled: medians of the last 5 samples
    tail -5 "$dir/rss.csv" | awk -F, '{ r[NR] = $2; a[NR] = $3; f[NR] = $4 }
      function med(v, n,   i, j, t) { for (i = 2; i <= n; i++) for (j = i; j > 1 && v[j - 1] > v[j]; j--) { t = v[j]; v[j] = v[j - 1]; v[j - 1] = t } return v[int((n + 1) / 2)] }
      END { print "settled_rss_kb=" med(r, NR); print "settled_anon_kb=" med(a, NR); print "settled_file_kb=" med(f, NR) }' >>"$res"
  fi
  kill "$pid" 2>/dev/null || true
  i=0
  while ((i++ < 300)) && kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
  kill -9 "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  wait "$sampler" 2>/dev/null || true
  kill "$ppid" 2>/dev/null || true
  wait "$ppid" 2>/dev/null || true
  rm -f "$dir/kubeconfig" "$dir/proxy.err"
  put bytes_down_at_exit "$(grep '^down=' "$dir/proxy.out" | tail -1 | sed -n 's/.*down=\([0-9]*\).*/\1/p')"
  put load_end "$(load)"
  local rc
  rc=$(ready_count)
  put ready_after "$rc"
  ((rc == ebds)) || ok=0
  put ok "$ok"
  log "$config at $size: $(grep -E '^(readyz_s|settled_rss_kb|vmhwm_kb|bytes_down|ready_after|ok)=' "$res" | tr '\n' ' ')"
}

IFS=, read -r -a clist <<<"$configs"
IFS=, read -r -a slist <<<"$sizes"
log "warm-up: each configuration once at 0 unselected objects (ebdman first: all EBDs Ready)"
run ebdman 0 "$out/warmup/ebdman" 1
for c in "${clist[@]}"; do
  [[ $c == ebdman ]] && continue
  run "$c" 0 "$out/warmup/$c" 1
done
for s in "${slist[@]}"; do
  grow "$s"
  etcd_maint "$s"
  for ((r = 1; r <= runs; r++)); do
    for c in "${clist[@]}"; do
      run "$c" "$s" "$out/$s/$c-r$r"
      # A run that left EBDs not Ready (the kube-rs peer can, see the
      # README): an unmeasured ebdman run makes them Ready again, so that
      # every measured run starts from the same state.
      ra=$(sed -n 's/^ready_after=//p' "$out/$s/$c-r$r/result.txt")
      if ((${ra:-0} < ebds)); then
        log "repair: $c left EBDs not Ready; an unmeasured ebdman run until all are"
        run ebdman "$s" "$out/$s/repair-after-$c-r$r" 1
      fi
    done
  done
done
rm -rf "$gen" "$kc_in"
log "done"
}
main "$@"
exit $?
