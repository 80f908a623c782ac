#!/usr/bin/env bash
# ir_per_ebd.sh - callgrind instructions (Ir) per EBD of the whole ebdman
# operator, as bench/README.md measures it: bench/ebd_bench.sh with
# --operator-bin pointing at a wrapper that runs ebdman under
# `valgrind --tool=callgrind`, at two N (default 300 and 1000), the
# difference of the operator's total Ir over the difference of N.
#
#   bench/ir_per_ebd.sh EBDMAN_BIN OUT_DIR [CHECKOUT]
#
#   EBDMAN_BIN  the ebdman binary to measure (any build)
#   OUT_DIR     where each run goes: OUT_DIR/n<N>-r<R>/ (ebd_bench's run1/,
#               the callgrind.out.<pid> files, wrapper, logs), and
#               OUT_DIR/summary.txt
#   CHECKOUT    the tree whose bench/ebd_bench.sh, tools/controlplane/start,
#               CRDs, vfm-sim and ready_count are used (default this
#               script's checkout; it must have been built once with
#               `bench/ebd_bench.sh --build-only`, since runs use --no-build)
#
# Environment:
#   NS="300 1000"   the N values (the per-EBD figure uses the lowest and the highest)
#   REPEAT=1        runs per N (Ir of a N: the median... with 2 runs, the mean; all printed)
#   RUN_TIMEOUT=2400  seconds per ebd_bench run before timeout(1) stops it (TERM to its group)
#   KCR_CACHE       control-plane binaries (default CHECKOUT/.cache)
#   COMMIT          recorded as ebd_bench --commit (default: unknown)
#   VALGRIND_OPTS   extra valgrind options (default none)
#
# ebd_bench stops the operator with SIGTERM (its cleanup trap), so valgrind
# writes callgrind.out.<pid> at ebdman's exit. The wrapper only runs
# `ebdman run` (without --help) under valgrind; ebd_bench's `run --help`
# probe runs ebdman plainly. Callgrind writes one file per process (threads
# together, as --separate-threads=no is the default); the script sums the
# `totals:` line of every callgrind.out.* whose `cmd:` is an `ebdman run`,
# and warns when there is not exactly one.
# Exit status: 0 if every run had all N Ready, callgrind output and ok=1; 1 otherwise.
set -uo pipefail

[[ $# -ge 2 ]] || { sed -n '2,/^set -uo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 2; }
bin=$(realpath "$1") || exit 2
out=$(mkdir -p "$2" && cd "$2" && pwd) || exit 2
checkout=$(cd "${3:-$(dirname "$0")/..}" && pwd) || exit 2
[[ -x $bin ]] || { echo "ir_per_ebd: $bin is not executable" >&2; exit 2; }
[[ -x $checkout/bench/ebd_bench.sh ]] || { echo "ir_per_ebd: no $checkout/bench/ebd_bench.sh" >&2; exit 2; }
command -v valgrind >/dev/null || { echo "ir_per_ebd: valgrind is not on PATH" >&2; exit 2; }
export KCR_CACHE=${KCR_CACHE:-$checkout/.cache}
read -r -a ns <<<"${NS:-300 1000}"
repeat=${REPEAT:-1}
run_timeout=${RUN_TIMEOUT:-2400}
commit=${COMMIT:-unknown}
summary=$out/summary.txt
log() { echo "$*" | tee -a "$summary"; }

log "ir_per_ebd: $(date -u +%Y-%m-%dT%H:%M:%SZ) bin=$bin ($(sha256sum "$bin" | cut -c1-16)) checkout=$checkout ($(git -C "$checkout" rev-parse --short HEAD 2>/dev/null)) N=${ns[*]} repeat=$repeat"
log "ir_per_ebd: valgrind $(valgrind --version) opts: --tool=callgrind ${VALGRIND_OPTS:-}"
failed=0
declare -A ir_sum ir_cnt
t_all=$EPOCHREALTIME
for ((r = 1; r <= repeat; r++)); do
  for n in "${ns[@]}"; do
    d=$out/n$n-r$r
    rm -rf "$d"
    mkdir -p "$d"
    # The wrapper: ebdman under callgrind, one output file per process.
    cat >"$d/ebdman-callgrind" <<EOF
#!/usr/bin/env bash
for a in "\$@"; do [[ \$a == --help || \$a == -h ]] && exec "$bin" "\$@"; done
exec valgrind --tool=callgrind ${VALGRIND_OPTS:-} --callgrind-out-file="$d/callgrind.out.%p" --log-file="$d/valgrind.log.%p" "$bin" "\$@"
EOF
    chmod +x "$d/ebdman-callgrind"
    la0=$(cat /proc/loadavg)
    t0=$EPOCHREALTIME
    echo "ir_per_ebd: N=$n run $r -> $d (load $la0)" >&2
    timeout --kill-after=120 "$run_timeout" \
      "$checkout/bench/ebd_bench.sh" --no-build --n "$n" --operator-bin "$d/ebdman-callgrind" \
      --config ebdman-callgrind --commit "$commit" --results none --out "$d/bench" \
      >"$d/ebd_bench.out" 2>"$d/ebd_bench.err"
    rc=$?
    t1=$EPOCHREALTIME
    la1=$(cat /proc/loadavg)
    res=$d/bench/run1/result.txt
    ok=$(sed -n 's/^ok=//p' "$res" 2>/dev/null)
    ready=$(sed -n 's/^ready_count=//p' "$res" 2>/dev/null)
    ready_s=$(sed -n 's/^ready_s=//p' "$res" 2>/dev/null)
    died=$(sed -n 's/^operator_died=//p' "$res" 2>/dev/null)
    # The operator's callgrind files: those whose cmd: is `... ebdman run ...`.
    files=() tot=0
    for f in "$d"/callgrind.out.*; do
      [[ -f $f ]] || continue
      grep -q '^cmd: .* run\b' "$f" || { echo "ir_per_ebd: ignoring $f ($(grep -m1 '^cmd:' "$f"))" >&2; continue; }
      t=$(awk '$1 == "totals:" { print $2; found = 1 } END { if (!found) print "" }' "$f")
      [[ -n $t ]] || t=$(awk '$1 == "summary:" { print $2 }' "$f")
      [[ -n $t ]] || { echo "ir_per_ebd: no totals in $f (killed before it dumped?)" >&2; continue; }
      files+=("$(basename "$f")")
      tot=$((tot + t))
    done
    note=""
    ((${#files[@]} == 1)) || note=" WARNING: ${#files[@]} operator callgrind files"
    [[ $rc == 0 && $ok == 1 && ${ready:-0} -ge $n && ${#files[@]} -ge 1 ]] || {
      note="$note NOT OK (ebd_bench exit $rc, ok=${ok:-?}, ready ${ready:-?}/$n${died:+, operator died: $died})"
      failed=1
    }
    log "$(printf 'N=%-5s run %d: Ir %15s  all Ready %s/%s in %s s (under valgrind)  wall %6.0f s  files %s  load before [%s] after [%s]%s' \
      "$n" "$r" "$tot" "${ready:-?}" "$n" "${ready_s:-?}" "$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')" \
      "${files[*]:-none}" "$la0" "$la1" "$note")"
    if ((${#files[@]} >= 1)) && [[ $ok == 1 ]]; then
      ir_sum[$n]=$((${ir_sum[$n]:-0} + tot))
      ir_cnt[$n]=$((${ir_cnt[$n]:-0} + 1))
    fi
  done
done
lo=$(printf '%s\n' "${ns[@]}" | sort -n | head -1)
hi=$(printf '%s\n' "${ns[@]}" | sort -n | tail -1)
for n in "${ns[@]}"; do
  [[ -n ${ir_cnt[$n]:-} ]] && log "$(printf 'Ir(N=%s) = %s (mean of %d good run(s))' "$n" \
    "$(awk -v s="${ir_sum[$n]}" -v c="${ir_cnt[$n]}" 'BEGIN { printf "%.0f", s / c }')" "${ir_cnt[$n]}")"
done
if [[ -n ${ir_cnt[$lo]:-} && -n ${ir_cnt[$hi]:-} && $lo != "$hi" ]]; then
  log "$(awk -v a="${ir_sum[$hi]}" -v ca="${ir_cnt[$hi]}" -v b="${ir_sum[$lo]}" -v cb="${ir_cnt[$lo]}" -v hi="$hi" -v lo="$lo" \
    'BEGIN { d = a / ca - b / cb; printf "per EBD: (Ir(N=%s) - Ir(N=%s)) / %d = %.0f instructions = %.3f M", hi, lo, hi - lo, d / (hi - lo), d / (hi - lo) / 1e6 }')"
else
  log "per EBD: not computed (a N without a good run)"
  failed=1
fi
log "ir_per_ebd: whole measurement took $(awk -v a="$t_all" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.0f", b - a }') s; exit $failed"
exit "$failed"
