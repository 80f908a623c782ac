#!/usr/bin/env bash
# bench/ns_crossover.sh - a namespace set of K namespaces out of T, watched
# per namespace or with one filtered cluster watch (opts.cluster_watch),
# alternating (ABAB), for each K (bench/README.md, section 10).
#
#   tools/controlplane/start -- bench/ns_crossover.sh [--t T] [--n N]
#       [--bytes B] [--k "K1 K2 ..."] [--runs R] [--rate U] [--window MS]
#       [--out FILE]
#
# Needs build/bench/bench/ns_crossover (or $NS_CROSSOVER_BIN) and a control
# plane started by tools/controlplane/start. Makes T namespaces (default
# 100) of N ConfigMaps (default 50) of B bytes (default 1024); then for
# each K (default "1 5 10 25 50 75 100") R times (default 3) each mode,
# per then cluster: runs `ns_crossover watch` in a fresh process, and once
# it is synced, `ns_crossover churn` at U patches a second (default 100)
# spread over all T namespaces for the window (default 10,000 ms) plus
# 3 s, so the watch's window falls inside the churn. Raw lines to --out
# (default stdout): the watch's "synced" and "window" lines, the churn's
# line, "load" (the 1-minute load average) before each run, and "sent"
# (the bytes of ConfigMaps the apiserver sent, from its metrics: watch
# events - a streaming list's too - plus LIST responses; the watch process
# is their only reader besides the apiserver's own kube-system informers)
# from its start to synced and from synced to the end of the window.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
t=100 n=50 bytes=1024 ks="1 5 10 25 50 75 100" runs=3 rate=100 window=10000
out=/dev/stdout
while (($#)); do
  case $1 in
    --t) t=$2; shift 2 ;;
    --n) n=$2; shift 2 ;;
    --bytes) bytes=$2; shift 2 ;;
    --k) ks=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    --window) window=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    *) echo "ns_crossover.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
: "${KCR_CONTROLPLANE_DIR:?run under tools/controlplane/start}"
bin=${NS_CROSSOVER_BIN:-$root/build/bench/bench/ns_crossover}
[[ -x $bin ]] || { echo "ns_crossover.sh: build $bin first" >&2; exit 2; }
prefix=xo-$$-
# The apiserver's bytes of ConfigMaps sent so far (watch events, LISTs).
sent() {
  "$KCR_CONTROLPLANE_BIN/kubectl" get --raw /metrics | awk '
    /^apiserver_watch_events_sizes_sum\{.*resource="configmaps"/ { s += $NF }
    /^apiserver_response_sizes_sum\{.*resource="configmaps".*verb="LIST"/ { s += $NF }
    END { printf "%.0f\n", s }'
}

echo "ns_crossover.sh: making $t namespaces of $n ConfigMaps of $bytes bytes" >&2
s=$SECONDS
"$bin" setup "$prefix" "$t" "$n" "$bytes"
echo "ns_crossover.sh: made in $((SECONDS - s)) s" >&2
{
  echo "# ns_crossover t=$t n=$n bytes=$bytes rate=$rate window_ms=$window" \
    "commit=$(git -C "$root" rev-parse --short HEAD) date=$(date -u +%FT%TZ)"
  for k in $ks; do
    for ((r = 0; r < runs; r++)); do
      for mode in per cluster; do
        echo "load $(cut -d' ' -f1 /proc/loadavg) mode=$mode k=$k run=$r"
        s0=$(sent)
        coproc W { "$bin" watch "$prefix" "$k" "$mode" "$window"; }
        wpid=$W_PID
        IFS= read -r line <&"${W[0]}" || true
        [[ $line == synced* ]] || { echo "ns_crossover.sh: no synced line from the watch (k=$k $mode)" >&2; exit 1; }
        echo "$line"
        s1=$(sent)
        "$bin" churn "$prefix" "$t" "$n" "$rate" $((window + 3000)) &
        churn_pid=$!
        IFS= read -r line <&"${W[0]}" || true
        [[ $line == window* ]] || { echo "ns_crossover.sh: no window line from the watch (k=$k $mode)" >&2; exit 1; }
        echo "$line"
        s2=$(sent)
        echo "sent mode=$mode k=$k sync=$((s1 - s0)) window=$((s2 - s1))"
        wait "$churn_pid"
        wait "$wpid" || { echo "ns_crossover.sh: the watch failed (k=$k $mode)" >&2; exit 1; }
      done
    done
  done
} >"$out"
