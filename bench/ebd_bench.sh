#!/usr/bin/env bash
# ebd_bench - the operator at scale: N EBDs (default 5000) created at once on
# a local control plane, until every one is Ready=True.
#
#   bench/ebd_bench.sh [--n N] [--quick] [--repeat R] [--parallel P]
#                      [--workers W] [--operator ebdman|controller-runtime]
#                      [--zap-log-level L] [--out DIR] [--operator-bin PATH]
#                      [--poll kubectl|watch]
#   bench/ebd_bench.sh --summary DIR     (the table of an earlier --out DIR)
#
# Self-contained: builds ebdman and vfm-sim (Release, build/bench), for
# --operator controller-runtime also the Go peer (bench/peers/controller-runtime,
# into build/bench/peers), then for each repetition starts a fresh control
# plane (tools/controlplane/start --with-controller-manager), installs the
# CRDs, runs the operator (--workers W, default 4) and vfm-sim (--delay 0),
# both with the admin kubeconfig and --zap-log-level warn, creates N EBDs with P
# parallel `kubectl create -f` processes (default 8) on split files of one
# generated multi-document YAML, and measures:
#   - wall time from the first create until `kubectl get ebd -o jsonpath`
#     (polled every second) counts N Ready=True; also when the creates ended;
#     --poll watch: instead, bench/ready_count (an informer counting Ready
#     transitions) gives the time of the event that made them N (no
#     repeated LIST of every EBD loading the apiserver; a final kubectl
#     count confirms);
#   - API writes, from the apiserver's own apiserver_request_total (verbs
#     POST, PUT, PATCH, APPLY, DELETE by resource/subresource), snapshot S0
#     before the first create and S1 10 s after all were Ready:
#       operator: ebds/status, vfms, configmaps, events (core and
#                 events.k8s.io) - nothing else writes those here;
#       vfm-sim:  vfms/status;
#       benchmark: ebds POST (the creates), namespaces;
#       other (controller-manager leases etc.): shown, not attributed;
#     cross-checked with the operator's own rest_client_requests_total;
#   - the operator's CPU seconds (utime+stime of /proc/PID/stat / CLK_TCK)
#     when all were Ready and at the end, and its peak RSS (VmHWM);
#   - steady state: snapshot S1 (Ready + 10 s), wait 20 s, S2: the operator's
#     writes in S1..S2 must be 0.
# Every process it starts is stopped on exit; the control plane's state is
# removed. Results (key=value per run, logs, metrics snapshots) go to --out
# (default build/bench/ebd-bench-<date>), and a summary table is printed.
# --quick: N=200, one repetition (a smoke run).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)

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
      split("operator commit n poll ready_count load_start load_end create_s ready_s last_create_to_ready_s poll_s_avg " \
            "op_writes_per_ebd op_writes op_ebds_status op_vfms op_configmaps op_events " \
            "op_events_dropped sim_vfms_status bench_ebds_post other_writes op_client_writes " \
            "op_cpu_ready_s op_cpu_end_s op_cpu_per_ebd_ms op_vmhwm_kb " \
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

n=5000 repeat=1 parallel=8 workers=4 operator=ebdman loglevel=warn out="" opbin_override="" poll=kubectl
while (($#)); do
  case $1 in
    --n) n=$2; shift ;;
    --quick) n=200 repeat=1 ;;
    --repeat) repeat=$2; shift ;;
    --parallel) parallel=$2; shift ;;
    --workers) workers=$2; shift ;;
    --operator) operator=$2; shift ;;
    --zap-log-level) loglevel=$2; shift ;;
    --out) out=$2; shift ;;
    --operator-bin) opbin_override=$2; shift ;;
    --poll) poll=$2; shift ;;
    --summary) summary "$2"; exit 0 ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d'  | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "ebd_bench: unknown option $1 (try --help)" >&2; exit 2 ;;
  esac
  shift
done
[[ $n =~ ^[0-9]+$ && $n -gt 0 ]] || { echo "ebd_bench: --n wants a positive number" >&2; exit 2; }

# ---------------------------------------------------------------- outer part
if [[ ${EBD_BENCH_INNER:-} != 1 ]]; then
  build=$root/build/bench
  echo "ebd_bench: building ebdman and vfm-sim (Release, $build)" >&2
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$build" --target ebdman vfm-sim ready_count >/dev/null
  case $operator in
    ebdman) opbin=$build/operator/ebdman/ebdman ;;
    controller-runtime)
      opbin=$build/peers/ebdman-cr
      echo "ebd_bench: building the controller-runtime peer ($opbin)" >&2
      (cd "$root/bench/peers/controller-runtime" && go build -trimpath -o "$opbin" .)
      ;;
    *) echo "ebd_bench: --operator wants ebdman or controller-runtime" >&2; exit 2 ;;
  esac
  if [[ -n $opbin_override ]]; then # e.g. a debug or sanitizer build of ebdman
    opbin=$(realpath "$opbin_override")
  fi
  out=${out:-$build/ebd-bench-$(date +%Y%m%d-%H%M%S)-$operator-n$n}
  mkdir -p "$out"
  [[ $poll == kubectl || $poll == watch ]] || { echo "ebd_bench: --poll wants kubectl or watch" >&2; exit 2; }
  export EBD_BENCH_INNER=1 EBD_BENCH_OPBIN=$opbin EBD_BENCH_VFMSIM=$build/examples/vfm-sim
  export EBD_BENCH_READY_COUNT=$build/bench/ready_count
  for ((r = 1; r <= repeat; r++)); do
    echo "ebd_bench: run $r/$repeat ($operator, N=$n) -> $out/run$r" >&2
    mkdir -p "$out/run$r"
    "$root/tools/controlplane/start" --with-controller-manager -- \
      "$0" --n "$n" --parallel "$parallel" --workers "$workers" --operator "$operator" \
      --zap-log-level "$loglevel" --poll "$poll" --out "$out/run$r" || echo "ebd_bench: run $r failed" >&2
  done
  summary "$out"
  echo "ebd_bench: results in $out" >&2
  exit 0
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
now() { date +%s.%N; }
load() { cut -d' ' -f1 /proc/loadavg; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
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
op_cpu() { # utime+stime in seconds
  awk -v tck="$(getconf CLK_TCK)" '{ sub(/^.*\) /, ""); printf "%.2f", ($12 + $13) / tck }' "/proc/$1/stat"
}
op_hwm() { awk '/^VmHWM:/ { print $2 }' "/proc/$1/status"; }
op_metrics() { curl -s "http://127.0.0.1:$mport/metrics"; }

put operator "$(basename "$opbin")"
put commit "$(git -C "$root" rev-parse --short HEAD 2>/dev/null)$(git -C "$root" status --porcelain -- src include operator examples 2>/dev/null | grep -q . && echo -dirty)"
put n "$n"
put poll "$poll"
put load_start "$(load)"

echo "ebd_bench: installing the CRDs" >&2
kubectl apply -f "$root/config/crd/bases" >/dev/null
kubectl wait --for=condition=Established crd/ebds.ebdman.example.com crd/vfms.ebdman.example.com >/dev/null
kubectl create namespace "$ns" >/dev/null

mport=$(free_port) hport=$(free_port)
# In $out with core dumps on, so a crash leaves its core there.
(cd "$out" && ulimit -c unlimited && exec "$opbin" run --workers "$workers" --zap-log-level "$loglevel" \
  --metrics-bind-address "127.0.0.1:$mport" --health-probe-bind-address "127.0.0.1:$hport") \
  >"$out/operator.log" 2>&1 &
oppid=$!
pids+=("$oppid")
"$vfmsim" --delay 0 --zap-log-level "$loglevel" >"$out/vfm-sim.log" 2>&1 &
simpid=$!
pids+=("$simpid")
for ((i = 0; i < 300; i++)); do # until the operator's informers are synced
  curl -sf "http://127.0.0.1:$hport/readyz" >/dev/null 2>&1 && break
  kill -0 "$oppid" 2>/dev/null || { echo "ebd_bench: the operator died:" >&2; tail "$out/operator.log" >&2; exit 1; }
  sleep 0.2
done
sleep 1 # vfm-sim has no health endpoint: give it a moment to sync (empty lists)

echo "ebd_bench: generating $n EBDs in $parallel files" >&2
mkdir -p "$out/yaml"
awk -v n="$n" -v p="$parallel" -v ns="$ns" -v dir="$out/yaml" 'BEGIN {
  for (i = 0; i < n; i++) {
    f = sprintf("%s/ebds-%02d.yaml", dir, i % p)
    printf "---\napiVersion: ebdman.example.com/v1alpha1\nkind: EBD\nmetadata:\n  name: ebd-%05d\n  namespace: %s\nspec:\n  vfm:\n    image: registry.example.com/vfm:1.0\n    replicas: 1\n    config:\n      mode: fast\n      index: \"%d\"\n", i, ns, i > f
  }
}'

snapshot s0
cpu0=$(op_cpu "$oppid")
echo "ebd_bench: creating $n EBDs with $parallel kubectl processes" >&2
t0=$(now)
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
  "$EBD_BENCH_READY_COUNT" "$ns" "$n" "$t0" "$out/ready.csv" >"$out/ready_count.out" &
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
cpu_ready=$(op_cpu "$oppid")
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
cpu_end=$(op_cpu "$oppid")
hwm=$(op_hwm "$oppid")
put load_end "$(load)"

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
put op_cpu_end_s "$cpu_end"
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
exit 0
}
main "$@"
exit $?
