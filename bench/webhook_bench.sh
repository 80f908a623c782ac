#!/usr/bin/env bash
# The admission webhook benchmark (bench/README.md, section 7): libkcr's
# webhook server (bench/webhook_load.c serve: a validating webhook reading a
# typed ConfigMap view) under an open-loop load of AdmissionReviews over TLS
# with keep-alive, at each rate, for a number of runs; a fresh server per run
# and rate. One line per run: the client's view (sent, errors, achieved rate,
# latency from when each request was due: p50 p90 p99 max), the server's own
# latency histogram (p50, p99 by Prometheus' histogram_quantile rule), the
# server process's CPU (utime+stime from /proc, per admission) and the load
# average.
#
#   bench/webhook_bench.sh [--build DIR] [--runs N] [--seconds S] [--rates "50 200 500"]
#
# DIR: a Release build (default build/bench: cmake -S . -B build/bench -G Ninja
# -DCMAKE_BUILD_TYPE=Release && cmake --build build/bench --target webhook_load).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build/bench runs=3 seconds=20 rates="50 200 500"
while (($#)); do
  case $1 in
  --build) build=$2; shift 2 ;;
  --runs) runs=$2; shift 2 ;;
  --seconds) seconds=$2; shift 2 ;;
  --rates) rates=$2; shift 2 ;;
  *) echo "webhook_bench: unknown argument $1" >&2; exit 2 ;;
  esac
done
bin=$build/bench/webhook_load
[[ -x $bin ]] || { echo "webhook_bench: $bin missing (see the header of this script)" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'kill "${srv:-0}" 2>/dev/null || true; rm -rf "$tmp"' EXIT
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 \
  -keyout "$tmp/tls.key" -out "$tmp/tls.crt" -subj /CN=127.0.0.1 \
  -addext subjectAltName=IP:127.0.0.1 2>/dev/null
hz=$(getconf CLK_TCK)
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
# histogram_quantile Q < exposition: webhook latency buckets -> seconds
quantile() {
  python3 -c '
import re, sys
q = float(sys.argv[1]); b = []
for line in sys.stdin:
    m = re.match(r"controller_runtime_webhook_latency_seconds_bucket\{.*le=\"([^\"]+)\"\} (\S+)", line)
    if m: b.append((float("inf") if m.group(1) == "+Inf" else float(m.group(1)), float(m.group(2))))
b.sort(); total = b[-1][1]; rank = q * total; prev_le, prev_c = 0.0, 0.0
for le, c in b:
    if c >= rank:
        print("%.3f" % (1000 * (le if le == float("inf") else prev_le + (le - prev_le) * (rank - prev_c) / max(c - prev_c, 1e-9))))
        break
    prev_le, prev_c = le, c' "$1"
}
echo "# webhook_bench $(date -u +%FT%TZ) commit $(git -C "$root" rev-parse --short HEAD) runs=$runs seconds=$seconds"
echo "# run rate | client: sent errors achieved p50 p90 p99 max (ms) | server: p50 p99 (ms) | cpu_ms us/admission | loadavg"
for ((r = 1; r <= runs; r++)); do
  for rate in $rates; do
    "$bin" serve "$tmp/tls.crt" "$tmp/tls.key" >"$tmp/ports" &
    srv=$!
    for _ in $(seq 50); do [[ -s $tmp/ports ]] && break; sleep 0.1; done
    read -r port mport <"$tmp/ports"
    c0=$(cpu_ticks "$srv")
    line=$("$bin" load "https://127.0.0.1:$port/validate" "$rate" "$seconds" 4)
    c1=$(cpu_ticks "$srv")
    metrics=$(curl -s "http://127.0.0.1:$mport/metrics")
    kill "$srv"; wait "$srv" 2>/dev/null || true; srv=
    read -r _ sent _ errs _ achieved _ p50 _ p90 _ p99 _ max _ <<<"$line"
    cpu_ms=$(( (c1 - c0) * 1000 / hz ))
    printf '%d %s | %s %s %s %s %s %s %s | %s %s | %d %.1f | %s\n' "$r" "$rate" "$sent" "$errs" \
      "${achieved%/s}" "$p50" "$p90" "$p99" "$max" \
      "$(quantile 0.5 <<<"$metrics")" "$(quantile 0.99 <<<"$metrics")" \
      "$cpu_ms" "$(awk -v c="$cpu_ms" -v n="$sent" 'BEGIN{print 1000*c/n}')" \
      "$(cut -d' ' -f1 /proc/loadavg)"
  done
done
