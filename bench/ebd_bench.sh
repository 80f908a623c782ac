#!/usr/bin/env bash
# ebd_bench - an operator at scale: N EBDs (default 5000) created at once on
# a local control plane, until every one is Ready=True.
#
#   bench/ebd_bench.sh [--n N] [--quick] [--repeat R] [--parallel P]
#                      [--workers W] [--operator NAME] [--gomemlimit V]
#                      [--transport curl|auto]
#                      [--zap-log-level L] [--out DIR] [--operator-bin PATH]
#                      [--config NAME] [--poll watch|kubectl] [--settle S]
#                      [--results DIR|none] [--no-build] [--build-only]
#                      [--commit C] [--print-commit]
#   bench/ebd_bench.sh --summary DIR     (the table of an earlier --out DIR)
#
# Operators: --operator ebdman (default) or the name of a peer, a directory
# bench/peers/NAME whose executable `build OUT_BINARY` builds it
# (controller-runtime, controller-runtime-typed, kube-rs). --gomemlimit V
# runs a Go peer (one with a go.mod) with GOMEMLIMIT=V; the configuration is
# then named NAME+GOMEMLIMIT=V. Every operator runs with GOGC and GOMEMLIMIT
# removed from its environment unless --gomemlimit sets the latter.
# --transport curl runs ebdman with KCR_TRANSPORT=curl (every request a
# curl transfer, none on libkcr's own exchanges: the switch users have);
# the configuration is then named ebdman+KCR_TRANSPORT=curl.
#
# Self-contained: builds ebdman, vfm-sim and ready_count (Release,
# build/bench) and the peer (into build/bench/peers/NAME) - not with
# --no-build, which expects them there (bench/campaign builds once, then runs
# with --no-build); --build-only builds and exits. Then for each repetition
# it starts a fresh control plane (tools/controlplane/start
# --with-controller-manager), installs the CRDs, runs the operator (--workers
# W, default 4) and vfm-sim (--delay 0), both with the admin kubeconfig and
# --zap-log-level warn, waits for the operator's /readyz and S seconds more
# (--settle, default 5), creates N EBDs with P parallel `kubectl create -f`
# processes (default 8) on split files of one generated multi-document YAML,
# and measures:
#   - time to all Ready, from the first create: --poll watch (default):
#     bench/ready_count (an informer counting Ready transitions) gives the
#     time of the event that made them N (a final kubectl count confirms);
#     --poll kubectl: `kubectl get ebd -o jsonpath` polled every second (each
#     poll LISTs every EBD, which loads the apiserver: not for timing);
#   - per-EBD time to Ready: Ready's lastTransitionTime - creationTimestamp
#     of each EBD, from one `kubectl get ebd` after the run (both have 1 s
#     resolution); if ready_count can write per-EBD times (a PER_EBD file
#     argument, or --per-key FILE), also its millisecond times: when its
#     watch first saw each EBD and saw it Ready (ready-per-key.csv);
#   - API writes, from the apiserver's own apiserver_request_total (verbs
#     POST, PUT, PATCH, APPLY, DELETE by resource/subresource), snapshot S0
#     before the first create and S1 10 s after all were Ready:
#       operator: ebds/status, vfms, configmaps, events (core and
#                 events.k8s.io) - nothing else writes those here;
#       vfm-sim:  vfms/status;
#       benchmark: ebds POST (the creates), namespaces;
#       other (controller-manager leases etc.): shown, not attributed;
#     cross-checked with the operator's own rest_client_requests_total;
#     events dropped: the operator's kcr_events_total{result="dropped"} (0
#     for an operator without that metric); events delivered = events POSTs
#     / 2 per EBD (Installed, BecameReady);
#   - the operator's CPU seconds (utime+stime of /proc/PID/stat / CLK_TCK)
#     from S0 to all Ready and to the end (S2); its peak RSS (VmHWM); its
#     VmRSS, RssAnon and RssFile every second (rss.csv); idle RSS (anon and
#     file) after /readyz + --settle with 0 objects, and after the steady
#     window with all N settled;
#   - kube-apiserver's and etcd's CPU seconds from S0 to all Ready and to S2;
#   - steady state: snapshot S1 (Ready + 10 s), wait 20 s, S2: the operator's
#     writes in S1..S2 must be 0.
# Every process it starts is stopped on exit; the control plane's state is
# removed. Raw results (key=value per run in result.txt, logs, metrics
# snapshots, rss.csv) go to --out (default build/bench/ebd-bench-<date>), and
# a summary table is printed. Each run's figures also go, as one small JSON
# file (bench/ebd_result.py), to --results DIR/<UTC date>/CONFIG-nN-SEQ.json
# (default bench/results, the committed ones; --quick: build/bench/results-
# smoke; none: no JSON). bench/report makes README tables of them.
# --quick: N=200, one repetition (a smoke run). --config NAME: the
# configuration's name in the results (default OPERATOR[+GOMEMLIMIT=V]); give
# a build run with --operator-bin a name of its own.
# --campaign ID --pair K --vs CONFIG --order AB|BA: recorded in the JSON
# (bench/campaign passes them; bench/report pairs runs by them).
# The commit recorded is the one the operator was built from: each build
# writes the tree's commit (-dirty when src/, include/, operator/,
# examples/ or bench/peers/ had changes) next to the binary
# (build/bench/ebdman.commit, build/bench/peers/NAME.commit), and runs read
# it there, so editing the tree during a campaign does not relabel its
# runs; with --operator-bin, --commit C says it ("unknown" otherwise).
# --print-commit prints the commit a run would record and exits
# (bench/testdata/check-commit). EBD_BENCH_BUILD: the build directory
# (default build/bench).
# Exit status: 0 if every run finished with all N Ready, 1 otherwise.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
py=/usr/bin/python3 # Debian's, whatever else is on PATH
die() { echo "ebd_bench: $*" >&2; exit 2; }

# summary DIR: the table of DIR/run*/result.txt (one column per run, then
# min and median of the numeric rows), also saved as DIR/summary.txt.
summary() {
  local out=$1 repeat
  repeat=$(ls -d "$out"/run*/ 2>/dev/null | wc -l)
  awk -v runs="$repeat" -v out="$out" '
    function fmt(v) { return v == "" ? "-" : v }
    FNR == 1 { r++ }
    { split($0, kv, "="); val[r, kv[1]] = kv[2]; if (!(kv[1] in seen)) { seen[kv[1]] = 1; keys[++nk] = kv[1] } }
    END {
      split("config operator commit n workers poll ok ready_count load_start load_end create_s ready_s last_create_to_ready_s poll_s_avg " \
            "op_writes_per_ebd op_writes op_ebds_status op_vfms op_configmaps op_events " \
            "op_events_dropped sim_vfms_status bench_ebds_post other_writes op_client_writes " \
            "op_cpu_idle0_s op_cpu_ready_s op_cpu_sys_ready_s op_cpu_end_s op_cpu_total_s op_cpu_per_ebd_ms op_vmhwm_kb " \
            "idle0_rss_kb idle0_anon_kb idle0_file_kb settled_rss_kb settled_anon_kb settled_file_kb " \
            "steady_op_writes steady_all_writes", order, " ")
      printf "%-24s", "metric"; for (i = 1; i <= r; i++) printf " %12s", "run" i
      if (r > 1) printf " %12s %12s", "min", "median"
      printf "\n"
      for (k = 1; k in order; k++) {
        key = order[k]; printf "%-24s", key; m = 0
        for (i = 1; i <= r; i++) {
          printf " %12s", fmt(val[i, key])
          if (val[i, key] ~ /^-?[0-9.]+$/) v[++m] = val[i, key] + 0
        }
        if (r > 1 && m == r) { # numeric in every run: min and median
          for (i = 2; i <= m; i++) for (j = i; j > 1 && v[j - 1] > v[j]; j--) { t = v[j]; v[j] = v[j - 1]; v[j - 1] = t }
          printf " %12s %12s", v[1], (m % 2 ? v[(m + 1) / 2] : (v[m / 2] + v[m / 2 + 1]) / 2)
        }
        printf "\n"
      }
    }' "$out"/run*/result.txt 2>/dev/null | tee "$out/summary.txt" || true
}

# The whole script is one function, parsed before it runs: editing this file
# while a (long) benchmark runs cannot change what the running one does.
main() {

n=5000 repeat=1 parallel=8 workers=4 operator=ebdman loglevel=warn out="" opbin_override="" poll=watch
gomemlimit="" transport="" config="" settle=5 results="" nobuild=0 buildonly=0 quick=0
campaign="" pair="" vs="" order="" commit="" printcommit=0
while (($#)); do
  case $1 in
    --n) n=$2; shift ;;
    --quick) n=200 repeat=1 quick=1 ;;
    --repeat) repeat=$2; shift ;;
    --parallel) parallel=$2; shift ;;
    --workers) workers=$2; shift ;;
    --operator) operator=$2; shift ;;
    --gomemlimit) gomemlimit=$2; shift ;;
    --transport) transport=$2; shift ;;
    --config) config=$2; shift ;;
    --zap-log-level) loglevel=$2; shift ;;
    --out) out=$2; shift ;;
    --operator-bin) opbin_override=$2; shift ;;
    --poll) poll=$2; shift ;;
    --settle) settle=$2; shift ;;
    --results) results=$2; shift ;;
    --no-build) nobuild=1 ;;
    --build-only) buildonly=1 ;;
    --campaign) campaign=$2; shift ;;
    --pair) pair=$2; shift ;;
    --vs) vs=$2; shift ;;
    --order) order=$2; shift ;;
    --commit) commit=$2; shift ;;
    --print-commit) printcommit=1 ;;
    --summary) summary "$2"; exit 0 ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown option $1 (try --help)" ;;
  esac
  shift
done
[[ $n =~ ^[0-9]+$ && $n -gt 0 ]] || die "--n wants a positive number"
[[ $workers =~ ^[0-9]+$ && $workers -gt 0 ]] || die "--workers wants a positive number"
[[ $settle =~ ^[0-9]+$ ]] || die "--settle wants whole seconds"
[[ $poll == kubectl || $poll == watch ]] || die "--poll wants watch or kubectl"
[[ $operator =~ ^[a-z0-9][a-z0-9._-]*$ ]] || die "--operator: bad name '$operator'"
[[ -z $gomemlimit || $gomemlimit =~ ^[0-9]+(B|KiB|MiB|GiB|TiB)?$ || $gomemlimit == off ]] ||
  die "--gomemlimit wants a Go memory limit such as 64MiB (see the runtime package's GOMEMLIMIT)"
[[ -z $transport || $transport == curl || $transport == auto ]] ||
  die "--transport wants curl or auto (libkcr's KCR_TRANSPORT)"
[[ -x $py ]] || die "needs Debian's python3 at $py (apt-get install python3)"

# ---------------------------------------------------------------- outer part
if [[ ${EBD_BENCH_INNER:-} != 1 ]]; then
  build=${EBD_BENCH_BUILD:-$root/build/bench}
  # The commit the binaries come from: each build records the tree's (with
  # -dirty for uncommitted changes) next to what it built, and a run reads
  # it there, so a tree edited after the build does not relabel the run.
  tree_commit() {
    echo "$(git -C "$root" rev-parse --short HEAD 2>/dev/null)$(git -C "$root" status --porcelain -- src include operator examples bench/peers 2>/dev/null | grep -q . && echo -dirty)"
  }
  if ((!nobuild)); then
    echo "ebd_bench: building ebdman, vfm-sim and ready_count (Release, $build)" >&2
    cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
    cmake --build "$build" --target ebdman vfm-sim ready_count >/dev/null
    tree_commit >"$build/ebdman.commit"
  fi
  case $operator in
    ebdman)
      opbin=$build/operator/ebdman/ebdman
      [[ -z $gomemlimit ]] || die "--gomemlimit is for a Go peer, not ebdman"
      ;;
    *)
      pdir=$root/bench/peers/$operator
      [[ -d $pdir ]] || die "no operator '$operator': bench/peers/$operator does not exist (peers here: $(cd "$root/bench/peers" && echo */ | tr -d /))"
      [[ -x $pdir/build ]] || die "bench/peers/$operator/build is missing or not executable"
      [[ -z $gomemlimit || -f $pdir/go.mod ]] || die "--gomemlimit is for a Go peer; bench/peers/$operator has no go.mod"
      [[ -z $transport ]] || die "--transport is for ebdman (libkcr), not a peer"
      opbin=$build/peers/$operator
      if ((!nobuild)); then
        echo "ebd_bench: building the $operator peer ($opbin)" >&2
        mkdir -p "$build/peers"
        "$pdir/build" "$opbin" || die "bench/peers/$operator/build failed"
        tree_commit >"$opbin.commit"
      fi
      ;;
  esac
  for f in "$opbin" "$build/examples/vfm-sim" "$build/bench/ready_count"; do
    [[ -x $f ]] || die "$f is missing (build it: run without --no-build)"
  done
  ((buildonly)) && exit 0
  if [[ -n $opbin_override ]]; then # e.g. a debug or sanitizer build of ebdman
    opbin=$(realpath "$opbin_override")
    commit=${commit:-unknown} # (--commit says which)
  elif [[ -z $commit ]]; then
    cf=$opbin.commit
    [[ $operator == ebdman ]] && cf=$build/ebdman.commit
    commit=$(cat "$cf" 2>/dev/null || echo "unknown")
  fi
  if ((printcommit)); then
    echo "$commit"
    exit 0
  fi
  config=${config:-$operator${gomemlimit:++GOMEMLIMIT=$gomemlimit}${transport:++KCR_TRANSPORT=$transport}}
  if [[ -z $results ]]; then
    results=$root/bench/results
    ((quick)) && results=$build/results-smoke
  fi
  out=${out:-$build/ebd-bench-$(date +%Y%m%d-%H%M%S)-$config-n$n}
  mkdir -p "$out"
  export EBD_BENCH_INNER=1 EBD_BENCH_OPBIN=$opbin EBD_BENCH_VFMSIM=$build/examples/vfm-sim
  export EBD_BENCH_READY_COUNT=$build/bench/ready_count EBD_BENCH_GOMEMLIMIT=$gomemlimit
  export EBD_BENCH_TRANSPORT=$transport
  export EBD_BENCH_COMMIT=$commit
  failed=0
  for ((r = 1; r <= repeat; r++)); do
    echo "ebd_bench: run $r/$repeat ($config, N=$n) -> $out/run$r" >&2
    mkdir -p "$out/run$r"
    {
      echo "config=$config"
      echo "operator=$operator"
      echo "operator_bin=$opbin"
      echo "gomemlimit=$gomemlimit"
      echo "transport=$transport"
      echo "workers=$workers"
      echo "parallel=$parallel"
      echo "settle_s=$settle"
      echo "campaign=$campaign"
      echo "pair=$pair"
      echo "vs=$vs"
      echo "order=$order"
    } >"$out/run$r/meta.txt"
    "$root/tools/controlplane/start" --with-controller-manager -- \
      "$0" --n "$n" --parallel "$parallel" --workers "$workers" --operator "$operator" \
      --zap-log-level "$loglevel" --poll "$poll" --settle "$settle" --out "$out/run$r" ||
      { echo "ebd_bench: run $r failed" >&2; failed=1; }
    grep -qx 'ok=1' "$out/run$r/result.txt" 2>/dev/null || failed=1
    if [[ $results != none && -s $out/run$r/result.txt ]]; then
      "$py" "$root/bench/ebd_result.py" --run "$out/run$r" --results "$results" ||
        { echo "ebd_bench: no JSON result for run $r" >&2; failed=1; }
    fi
  done
  summary "$out"
  echo "ebd_bench: results in $out" >&2
  exit "$failed"
fi

# ---------------------------------------------------------------- inner part
# (runs under tools/controlplane/start: KUBECONFIG etc. are exported)
bin=$KCR_CONTROLPLANE_BIN
kubectl() { "$bin/kubectl" "$@"; }
opbin=$EBD_BENCH_OPBIN
vfmsim=$EBD_BENCH_VFMSIM
ns=ebd-bench
res=$out/result.txt
: >"$res"
put() { echo "$1=$2" >>"$res"; }
now() { echo "$EPOCHREALTIME"; }
load() { cut -d' ' -f1 /proc/loadavg; }
free_port() { "$py" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
tck=$(getconf CLK_TCK)
pids=()
cleanup() {
  local p
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
}
trap cleanup EXIT

# apiserver_request_total for write verbs, summed by
# "verb group/resource[/subresource] code" -> count.
snapshot() {
  kubectl get --raw /metrics | awk '
    /^apiserver_request_total\{/ {
      v = $NF; lab = $0; sub(/\}[^}]*$/, "", lab); sub(/^[^{]*\{/, "", lab)
      n = split(lab, parts, /",/); delete L
      for (i = 1; i <= n; i++) { split(parts[i], kv, "=\""); gsub(/"/, "", kv[2]); L[kv[1]] = kv[2] }
      if (L["verb"] !~ /^(POST|PUT|PATCH|APPLY|DELETE|DELETECOLLECTION)$/) next
      res = (L["group"] == "" ? "core" : L["group"]) "/" L["resource"] (L["subresource"] == "" ? "" : "/" L["subresource"])
      s[L["verb"] " " res " " L["code"]] += v
    }
    END { for (k in s) print k, s[k] }' | sort >"$out/$1.metrics"
}
# Differences of two snapshots: "verb resource code delta", nonzero only.
delta() {
  awk 'NR == FNR { a[$1 " " $2 " " $3] = $4; next }
       { k = $1 " " $2 " " $3; d = $4 - a[k]; if (d) print k, d; delete a[k] }' \
    "$out/$1.metrics" "$out/$2.metrics"
}
# Sum of a delta's counts for resources matching a regex (and verb regex).
sum_of() { awk -v re="$2" -v vre="${3:-.}" '$2 ~ re && $1 ~ vre { s += $4 } END { print s + 0 }' "$1"; }
ready_count() {
  kubectl get ebd -n "$ns" -o 'jsonpath={range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' 2>/dev/null |
    grep -c '^True$' || true
}
cpu_of() { # utime+stime of PID in seconds; empty if PID is unknown or gone
  [[ -n $1 ]] || return 0
  awk -v tck="$tck" '{ sub(/^.*\) /, ""); printf "%.2f", ($12 + $13) / tck }' "/proc/$1/stat" 2>/dev/null || true
}
sys_of() { # stime of PID in seconds (the kernel's part of cpu_of)
  [[ -n $1 ]] || return 0
  awk -v tck="$tck" '{ sub(/^.*\) /, ""); printf "%.2f", $13 / tck }' "/proc/$1/stat" 2>/dev/null || true
}
op_hwm() { awk '/^VmHWM:/ { print $2 }' "/proc/$1/status"; }
# "VmRSS RssAnon RssFile" of PID, kB.
mem_of() { awk '$1 == "VmRSS:" { r = $2 } $1 == "RssAnon:" { a = $2 } $1 == "RssFile:" { f = $2 } END { print r, a, f }' "/proc/$1/status"; }
op_metrics() { curl -s "http://127.0.0.1:$mport/metrics"; }
# The control plane's processes (the apiserver's pid file is current even
# after a restart-apiserver).
api_pid=${KCR_APISERVER_PID:-}
[[ -f ${KCR_CONTROLPLANE_DIR:-}/apiserver.pid ]] && api_pid=$(<"$KCR_CONTROLPLANE_DIR/apiserver.pid")
etcd_pid=${KCR_ETCD_PID:-}
# cp_cpu TAG: the apiserver's and etcd's CPU seconds now, as api_cpu_TAG, etcd_cpu_TAG.
cp_cpu() { put "api_cpu_$1" "$(cpu_of "$api_pid")"; put "etcd_cpu_$1" "$(cpu_of "$etcd_pid")"; }

put config "$(sed -n 's/^config=//p' "$out/meta.txt" 2>/dev/null)"
put operator "$(basename "$opbin")"
put commit "$EBD_BENCH_COMMIT"
put n "$n"
put workers "$workers"
put poll "$poll"
put nproc "$(nproc)"
put started_utc "$(date -u +%Y-%m-%dT%H:%M:%SZ)"
put load_start "$(load)"

echo "ebd_bench: installing the CRDs" >&2
kubectl apply -f "$root/config/crd/bases" >/dev/null
kubectl wait --for=condition=Established crd/ebds.ebdman.example.com crd/vfms.ebdman.example.com >/dev/null
kubectl create namespace "$ns" >/dev/null

mport=$(free_port) hport=$(free_port)
# Plain metrics (op_metrics reads them with curl, and TokenReviews would add
# to the request counts): ebdman serves them over HTTPS with authentication
# by default; peers without the flag serve plain anyway.
secure=()
"$opbin" run --help 2>/dev/null | grep -q -- '--metrics-secure' && secure=(--metrics-secure=false)
# In $out with core dumps on, so a crash leaves its core there; Go's memory
# knobs only as --gomemlimit says.
goenv=(-u GOGC -u GOMEMLIMIT -u KCR_TRANSPORT)
[[ -n ${EBD_BENCH_GOMEMLIMIT:-} ]] && goenv+=("GOMEMLIMIT=$EBD_BENCH_GOMEMLIMIT")
[[ -n ${EBD_BENCH_TRANSPORT:-} ]] && goenv+=("KCR_TRANSPORT=$EBD_BENCH_TRANSPORT")
(cd "$out" && ulimit -c unlimited && exec env "${goenv[@]}" "$opbin" run --workers "$workers" --zap-log-level "$loglevel" \
  --metrics-bind-address "127.0.0.1:$mport" --health-probe-bind-address "127.0.0.1:$hport" "${secure[@]}") \
  >"$out/operator.log" 2>&1 &
oppid=$!
pids+=("$oppid")
# The operator's memory and CPU every second: epoch,VmRSS,RssAnon,RssFile (kB),cpu_s.
(
  while [[ -r /proc/$oppid/status ]]; do
    awk -v t="$EPOCHREALTIME" -v tck="$tck" '
      FILENAME ~ /status$/ { if ($1 == "VmRSS:") r = $2; else if ($1 == "RssAnon:") a = $2; else if ($1 == "RssFile:") f = $2; next }
      { sub(/^.*\) /, ""); c = ($12 + $13) / tck }
      END { if (r != "") printf "%.2f,%d,%d,%d,%.2f\n", t, r, a, f, c }' "/proc/$oppid/status" "/proc/$oppid/stat" 2>/dev/null || true
    sleep 1
  done
) >"$out/rss.csv" &
pids+=($!)
"$vfmsim" --delay 0 --zap-log-level "$loglevel" >"$out/vfm-sim.log" 2>&1 &
simpid=$!
pids+=("$simpid")
for ((i = 0; i < 300; i++)); do # until the operator's informers are synced
  curl -sf "http://127.0.0.1:$hport/readyz" >/dev/null 2>&1 && break
  kill -0 "$oppid" 2>/dev/null || { echo "ebd_bench: the operator died:" >&2; tail "$out/operator.log" >&2; exit 1; }
  sleep 0.2
done
# vfm-sim has no health endpoint: give it a moment to sync (empty lists);
# the operator settles (idle, 0 objects) meanwhile.
sleep 1
sleep "$settle"
read -r r a f < <(mem_of "$oppid")
put idle0_rss_kb "$r"
put idle0_anon_kb "$a"
put idle0_file_kb "$f"

echo "ebd_bench: generating $n EBDs in $parallel files" >&2
mkdir -p "$out/yaml"
awk -v n="$n" -v p="$parallel" -v ns="$ns" -v dir="$out/yaml" 'BEGIN {
  for (i = 0; i < n; i++) {
    f = sprintf("%s/ebds-%02d.yaml", dir, i % p)
    printf "---\napiVersion: ebdman.example.com/v1beta1\nkind: EBD\nmetadata:\n  name: ebd-%05d\n  namespace: %s\nspec:\n  vfmTemplate:\n    image: registry.example.com/vfm:1.0\n    replicas: 1\n    config:\n      mode: fast\n      index: \"%d\"\n", i, ns, i > f
  }
}'

# ready_count with per-EBD timestamps, if this build of it has them (its
# usage line, printed for a wrong argument count, says how).
rc_pre=() rc_post=()
rc_usage=$(timeout 5 "$EBD_BENCH_READY_COUNT" 2>&1 || true)
if [[ $rc_usage == *PER_EBD* ]]; then
  rc_post=("$out/ready-per-key.csv")
elif [[ $rc_usage == *--per-key* ]]; then
  rc_pre=(--per-key "$out/ready-per-key.csv")
fi

snapshot s0
cpu0=$(cpu_of "$oppid")
sys0=$(sys_of "$oppid")
put op_cpu_idle0_s "$cpu0"
cp_cpu s0
echo "ebd_bench: creating $n EBDs with $parallel kubectl processes" >&2
t0=$(now)
put t0_epoch "$t0"
(
  cpids=()
  for f in "$out"/yaml/ebds-*.yaml; do
    kubectl create -f "$f" >/dev/null 2>"$f.err" &
    cpids+=($!)
  done
  for p in "${cpids[@]}"; do wait "$p" || echo "ebd_bench: a kubectl create failed" >&2; done
  now >"$out/creates_done"
) &
waiter=$!

if [[ $poll == watch ]]; then
  "$EBD_BENCH_READY_COUNT" "${rc_pre[@]}" "$ns" "$n" "$t0" "$out/ready.csv" "${rc_post[@]}" >"$out/ready_count.out" &
  rcpid=$!
  pids+=("$rcpid")
fi

if [[ $poll == watch ]]; then
  deadline=$(awk -v t="$t0" -v n="$n" 'BEGIN { printf "%d", t + 600 + n / 5 }')
  polls=1 polltime=0 ready=0
  while kill -0 "$rcpid" 2>/dev/null; do
    if (($(date +%s) > deadline)); then
      echo "ebd_bench: timed out" >&2
      break
    fi
    if ! kill -0 "$oppid" 2>/dev/null; then
      wait "$oppid" && st=0 || st=$?
      echo "ebd_bench: the operator died (exit status $st); log tail:" >&2
      tail -5 "$out/operator.log" >&2
      put operator_died "status $st"
      exit 1
    fi
    sleep 0.2
  done
  wait "$rcpid" || true
  tr=$(awk -v t="$t0" '{ printf "%.3f", t + $1 }' "$out/ready_count.out")
  polltime=-1
  [[ -n $tr ]] || tr=$(now)
  ready=$(ready_count) # confirm with kubectl
else
# Poll the Ready count every second (start to start).
: >"$out/ready.csv"
deadline=$(awk -v t="$t0" -v n="$n" 'BEGIN { printf "%d", t + 600 + n / 5 }')
polls=0 polltime=0 ready=0
while :; do
  ps=$(now)
  ready=$(ready_count)
  pe=$(now)
  polls=$((polls + 1))
  polltime=$(awk -v a="$polltime" -v s="$ps" -v e="$pe" 'BEGIN { print a + e - s }')
  echo "$(awk -v s="$ps" -v t="$t0" 'BEGIN { printf "%.1f", s - t }'),$ready" >>"$out/ready.csv"
  ((ready >= n)) && break
  if (($(date +%s) > deadline)); then
    echo "ebd_bench: timed out with $ready/$n Ready" >&2
    break
  fi
  if ! kill -0 "$oppid" 2>/dev/null; then
    wait "$oppid" && st=0 || st=$?
    echo "ebd_bench: the operator died (exit status $st) after $(awk -v s="$(now)" -v t="$t0" 'BEGIN { printf "%.1f", s - t }') s with $ready/$n Ready; log tail:" >&2
    tail -5 "$out/operator.log" >&2
    put operator_died "status $st"
    exit 1
  fi
  pn=$(now)
  sleep "$(awk -v s="$ps" -v e="$pn" 'BEGIN { d = 1 - (e - s); printf "%.3f", (d > 0 ? d : 0) }')"
done
tr=$pe # the poll that saw them all ended here
fi
cpu_ready=$(cpu_of "$oppid")
sys_ready=$(sys_of "$oppid")
cp_cpu ready
wait "$waiter" || true
tc=$(cat "$out/creates_done" 2>/dev/null || echo "$t0")
snapshot sready
put ready_count "$ready"
put create_s "$(awk -v a="$t0" -v b="$tc" 'BEGIN { printf "%.1f", b - a }')"
put ready_s "$( ((ready >= n)) && awk -v a="$t0" -v b="$tr" 'BEGIN { printf "%.1f", b - a }' || echo timeout)"
put last_create_to_ready_s "$(awk -v a="$tc" -v b="$tr" 'BEGIN { printf "%.1f", b - a }')"
put poll_s_avg "$(awk -v a="$polltime" -v n="$polls" 'BEGIN { if (a < 0) print "-"; else printf "%.2f", a / n }')"

echo "ebd_bench: all Ready; steady-state check (10 s + 20 s)" >&2
sleep 10
snapshot s1
op_metrics >"$out/operator-s1.prom" || true
sleep 20
snapshot s2
op_metrics >"$out/operator-s2.prom" || true
cpu_end=$(cpu_of "$oppid")
cp_cpu end
hwm=$(op_hwm "$oppid")
read -r r a f < <(mem_of "$oppid")
put settled_rss_kb "$r"
put settled_anon_kb "$a"
put settled_file_kb "$f"
put load_end "$(load)"
# Per-EBD creation and Ready times (one GET of every EBD, after the
# measurements: it loads the apiserver). "name created ready-transition".
kubectl get ebd -n "$ns" -o 'jsonpath={range .items[*]}{.metadata.name}{" "}{.metadata.creationTimestamp}{" "}{.status.conditions[?(@.type=="Ready")].lastTransitionTime}{"\n"}{end}' \
  >"$out/ebd-times.txt" 2>/dev/null || true

delta s0 s1 >"$out/writes.txt"
delta s0 sready >"$out/writes-at-ready.txt"
delta s1 s2 >"$out/writes-steady.txt"
w=$out/writes.txt
op_status=$(sum_of "$w" '^ebdman.example.com/ebds/status$')
op_vfms=$(sum_of "$w" '^ebdman.example.com/vfms$')
op_cms=$(sum_of "$w" '^core/configmaps$')
op_events=$(sum_of "$w" '^(core|events.k8s.io)/events$')
sim=$(sum_of "$w" '^ebdman.example.com/vfms/status$')
bench_posts=$(sum_of "$w" '^(ebdman.example.com/ebds|core/namespaces)$' '^POST$')
all=$(awk '{ s += $4 } END { print s + 0 }' "$w")
op=$((op_status + op_vfms + op_cms + op_events))
put op_ebds_status "$op_status"
put op_vfms "$op_vfms"
put op_configmaps "$op_cms"
put op_events "$op_events"
put op_writes "$op"
put op_writes_per_ebd "$(awk -v a="$op" -v n="$n" 'BEGIN { printf "%.2f", a / n }')"
put sim_vfms_status "$sim"
put bench_ebds_post "$bench_posts"
put other_writes "$((all - op - sim - bench_posts))"
# The operator's own count of its write requests (cross-check).
put op_client_writes "$(awk '/^rest_client_requests_total\{/ && /method="(POST|PUT|PATCH|DELETE)"/ { s += $NF } END { print s + 0 }' "$out/operator-s1.prom")"
put op_events_dropped "$(awk '/^kcr_events_total\{/ && /result="dropped"/ { s += $NF } END { print s + 0 }' "$out/operator-s1.prom")"
put op_cpu_ready_s "$(awk -v a="$cpu_ready" -v b="$cpu0" 'BEGIN { printf "%.2f", a - b }')"
put op_cpu_sys_ready_s "$(awk -v a="$sys_ready" -v b="$sys0" 'BEGIN { if (a == "" || b == "") print ""; else printf "%.2f", a - b }')"
put op_cpu_end_s "$(awk -v a="$cpu_end" -v b="$cpu0" 'BEGIN { printf "%.2f", a - b }')"
put op_cpu_total_s "$cpu_end"
put op_cpu_per_ebd_ms "$(awk -v a="$cpu_ready" -v b="$cpu0" -v n="$n" 'BEGIN { printf "%.3f", (a - b) * 1000 / n }')"
put op_vmhwm_kb "$hwm"
s=$out/writes-steady.txt
put steady_op_writes "$(($(sum_of "$s" '^ebdman.example.com/ebds/status$') + $(sum_of "$s" '^ebdman.example.com/vfms$') + $(sum_of "$s" '^core/configmaps$') + $(sum_of "$s" '^(core|events.k8s.io)/events$')))"
put steady_all_writes "$(awk '{ s += $4 } END { print s + 0 }' "$s")"

{
  echo "writes S0..S1 (verb resource code count):"
  sed 's/^/  /' "$w"
  echo "writes in the steady window S1..S2:"
  sed 's/^/  /' "$s"
} >&2
kubectl get ebd -n "$ns" --no-headers 2>/dev/null | awk '{ print $2, $3 }' | sort | uniq -c >"$out/final-conditions.txt" || true
((ready >= n)) && put ok 1 || put ok 0
exit 0
}
main "$@"
exit $?
