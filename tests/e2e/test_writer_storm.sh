#!/usr/bin/env bash
# e2e writer_storm (issue 10, scenario 5): other actors edit the EBDs ebdman
# reconciles as fast as they can while the VFMs' readiness flips; when they
# stop, every generation ends observed and no condition update is lost.
# Six writers (kubectl in background loops, all over the same EBDs - the
# first "hot" ones, so that each is edited many times - for a fixed time):
#   label     sets a label                        (metadata only)
#   note      sets an annotation ebdman ignores   (metadata only)
#   replicas  merge-patches spec.vfmTemplate.replicas     (generation + 1)
#   config    read-modify-write of spec.vfmTemplate.config, guarded by the
#             resourceVersion it read: every write in between (ebdman's
#             status writes included) makes it fail with 409 - counted
#   fail      sets and clears vfm-sim's fail annotation on a third of them
#             (ebdman copies it to the VFM; vfm-sim flips Ready)
#   vfmstatus overwrites VFM statuses directly with Ready=False/Failed
#             (vfm-sim puts its own report back)
# After the storm: every EBD current (status.observedGeneration and each
# condition's observedGeneration = generation; conditions = what the final
# VFM report says: check_conditions_current); one VFM and one ConfigMap
# each (check_children); every EBD holds the last value each writer
# managed to write (nobody's field lost); ebdman's status writes are
# server-side applies: 0 conflicts (no 409 answer, no conflict_retried), 0
# failed reconciles; ebdman never crashed.
# Short form: 40 EBDs, 10 hot, 20 s of storm (CI); KCR_CHAOS_LONG=1: 200
# EBDs, 40 hot, 120 s.
set -euo pipefail
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh"
e2e_init
# hot: the EBDs the writers go over (the first ones), so that each is
# edited many times even at kubectl's pace (a process per write).
if [[ ${KCR_CHAOS_LONG:-0} == 1 ]]; then n=200 hot=40 storm_s=120; else n=40 hot=10 storm_s=20; fi
fail_ann=vfm-sim.ebdman.example.com/fail
writers=(label note replicas config fail vfmstatus)

new_ns
ns=$E2E_NS
start_sim_and_op "$ns" 300ms
op_pid=${E2E_PID[op]}
sim_pid=${E2E_PID[sim]}
for i in $(seq -w 1 "$n"); do ebd_yaml "e-$i" registry.example.com/vfm:1.0 1; done |
  k -n "$ns" apply --server-side -f - >/dev/null
wait_for 120 "$n EBDs current" conditions_current "$ns" "$n"

# writer W: one pass after another over the hot EBDs until the storm flag goes;
# writes $E2E_TMP/w-W.out: "ok=.. conflicts=.. errors=.. passes=..", then
# "EBD<TAB>value" for the last value it wrote to each EBD.
writer() {
  local w=$1 r=0 i e v rv out ok=0 conflicts=0 errors=0 cmd
  local -A last=()
  while [[ -f $E2E_TMP/storm ]] && kill -0 $$ 2>/dev/null; do # (ends with the test)
    r=$((r + 1))
    for ((i = 1; i <= hot; i++)); do
      [[ -f $E2E_TMP/storm ]] || break
      e=e-$(printf "%0${#n}d" "$i")
      case $w in
      label) v=w$r cmd=(label ebd "$e" "storm-label=$v" --overwrite) ;;
      note) v="pass $r" cmd=(annotate ebd "$e" "storm-note=$v" --overwrite) ;;
      replicas)
        v=$((r % 7 + 2))
        cmd=(patch ebd "$e" --type merge -p "{\"spec\":{\"vfmTemplate\":{\"replicas\":$v}}}")
        ;;
      config)
        rv=$(jp "$ns" ebd "$e" '{.metadata.resourceVersion}' 2>/dev/null) || continue
        v=p$r
        cmd=(patch ebd "$e" --type merge
          -p "{\"metadata\":{\"resourceVersion\":\"$rv\"},\"spec\":{\"vfmTemplate\":{\"config\":{\"storm\":\"$v\"}}}}")
        ;;
      fail)
        ((i % 3 == 0)) || continue
        if ((r % 2)); then
          v="pass $r: disk $e on fire" cmd=(annotate ebd "$e" "$fail_ann=$v" --overwrite)
        else
          v="" cmd=(annotate ebd "$e" "$fail_ann-")
        fi
        ;;
      vfmstatus)
        ((i % 2 == r % 2)) || continue
        v=x
        cmd=(patch vfm "$e" --subresource=status --type merge -p "{\"status\":{\"conditions\":[{\"type\":\"Ready\",\"status\":\"False\",\"reason\":\"Failed\",\"message\":\"overwritten by the storm\",\"lastTransitionTime\":\"$(date -u +%FT%TZ)\"}]}}")
        ;;
      esac
      if out=$(k -n "$ns" "${cmd[@]}" 2>&1); then
        ok=$((ok + 1))
        last[$e]=$v
      elif [[ $out == *"the object has been modified"* ]]; then
        conflicts=$((conflicts + 1))
      else
        errors=$((errors + 1))
        echo "$w $e: $out" >>"$E2E_TMP/w-$w.errors"
      fi
    done
  done
  {
    echo "ok=$ok conflicts=$conflicts errors=$errors passes=$r"
    for e in "${!last[@]}"; do printf '%s\t%s\n' "$e" "${last[$e]}"; done
  } >"$E2E_TMP/w-$w.out"
}
stat_of() { head -n 1 "$E2E_TMP/w-$1.out" | tr ' ' '\n' | sed -n "s/^$2=//p"; }

reconciles0=$(reconciles op)
touch "$E2E_TMP/storm"
pids=()
for w in "${writers[@]}"; do
  writer "$w" &
  pids+=($!)
done
log "storm: ${#writers[@]} writers over $hot of the $n EBDs for $storm_s s"
t0=$SECONDS
while ((SECONDS - t0 < storm_s)); do
  proc_alive op || fail "ebdman (pid $op_pid) died during the storm"
  sleep 1
done
rm -f "$E2E_TMP/storm"
wait "${pids[@]}"
t_end=$SECONDS
for w in "${writers[@]}"; do
  log "writer $w: $(head -n 1 "$E2E_TMP/w-$w.out")"
  if [[ -s $E2E_TMP/w-$w.errors ]]; then
    head -n 3 "$E2E_TMP/w-$w.errors" | sed 's/^/  /'
    fail "writer $w: writes refused for another reason than a conflict" "0" "$(stat_of "$w" errors)"
  fi
  expect_gt "writer $w: successful writes" 0 "$(stat_of "$w" ok)"
done
expect_gt "writer config: writes refused with 409 (its resourceVersion was stale)" 0 \
  "$(stat_of config conflicts)"

# Every generation observed, every condition what the final VFM says.
wait_for 120 "all $n EBDs current after the storm" conditions_current "$ns" "$n"
converge=$((SECONDS - t_end))
check_conditions_current "$ns" "$n"
check_children "$ns"
maxgen=$(awk '$3 > m { m = $3 } END { print m + 0 }' "$E2E_TMP/ebds.txt")
# Each pass of the replicas writer changes every hot EBD's spec (a value
# other than the last pass's, and than the initial 1), and every pass but a
# cut-short last one writes e-01 first: its generation, 1 at the start,
# reaches at least the number of passes. (A fixed bound - "> 5" - depended on
# how many passes the machine's speed allowed in storm_s.)
expect_gt "highest generation reached (at least the replicas writer's passes)" \
  "$(($(stat_of replicas passes) - 1))" "$maxgen"

# Nobody's last write lost.
k -n "$ns" get ebds -o jsonpath='{range .items[*]}{.metadata.name}{"\t"}{.metadata.labels.storm-label}{"\t"}{.metadata.annotations.storm-note}{"\t"}{.spec.vfmTemplate.replicas}{"\t"}{.spec.vfmTemplate.config.storm}{"\t"}{.metadata.annotations.vfm-sim\.ebdman\.example\.com/fail}{"\n"}{end}' \
  >"$E2E_TMP/final.txt"
col=2
for w in label note replicas config fail; do # ("" for fail: cleared, absent)
  want=$(tail -n +2 "$E2E_TMP/w-$w.out" | LC_ALL=C sort)
  got=$(awk -F'\t' -v c="$col" 'NR == FNR { w[$1] = 1; next } ($1 in w) { print $1 "\t" $c }' \
    <(printf '%s\n' "$want") "$E2E_TMP/final.txt" | LC_ALL=C sort)
  if [[ $got != "$want" ]]; then
    diff <(echo "$want") <(echo "$got") | sed -n '1,6s/^/  /p'
    fail "writer $w: every EBD holds its last write (EBD<TAB>value)" "the writer's" "the diff above"
  fi
  pass "writer $w: each of the $(grep -c . <<<"$want") EBDs it wrote holds its last write"
  col=$((col + 1))
done
failing=$(tail -n +2 "$E2E_TMP/w-fail.out" | awk -F'\t' '$2 != ""' | wc -l)
expect_eq "EBDs Ready (all but those left with a fail annotation: $failing)" \
  "$((n - failing))" "$(count_ready "$ns")"

# Conflicts: ebdman writes status by server-side apply of the conditions it
# owns, which no other writer can make conflict: no write of ebdman's to an
# EBD (status included) is answered 409. Its child applies carry a
# precondition (create-only, or the uid it saw: operator/ebdman/children.c)
# that answers 409 when its cache has not seen its own child yet - by
# design: it then reads the child and applies again (0 failed reconciles,
# below). Counted from the audit log, ebdman's process by pid.
codes=$(request_codes op)
conflicts_409() { # RESOURCES (regex): ebdman's writes in ns to those answered 409
  grep -F "; pid $op_pid) " "$KCR_AUDIT_LOG" | grep -F "\"namespace\":\"$ns\"" |
    grep -F '"code":409' | grep -cE "\"objectRef\":\\{\"resource\":\"($1)\"" || true
}
expect_eq "ebdman: writes to EBDs (status included) answered 409 Conflict" "0" "$(conflicts_409 ebds)"
log "ebdman: child applies answered 409 by their precondition (then read and applied again):" \
  "$(conflicts_409 'vfms|configmaps') of $(metric op rest_client_requests_total 'code="409"') answers 409"
expect_eq "ebdman: status writes retried after a conflict" "0" \
  "$(metric op kcr_status_writes_total 'result="conflict_retried"')"
expect_eq "ebdman: failed status writes" "0" "$(metric op kcr_status_writes_total 'result="failed"')"
expect_eq "ebdman: failed reconciles" "0" \
  "$(metric op controller_runtime_reconcile_errors_total 'controller="ebd"')"
expect_eq "vfm-sim: requests answered 409 Conflict" "0" "$(metric sim rest_client_requests_total 'code="409"')"
written=$(metric op kcr_status_writes_total 'result="written"')
skipped=$(metric op kcr_status_writes_total 'result="skipped"')
if [[ ${E2E_PID[op]} == "$op_pid" && ${E2E_PID[sim]} == "$sim_pid" ]] && proc_alive op && proc_alive sim; then
  pass "ebdman (pid $op_pid) and vfm-sim (pid $sim_pid) never crashed"
else
  fail "ebdman (pid $op_pid) and vfm-sim (pid $sim_pid) alive at the end"
fi
check_no_forbidden op sim

total=0
for w in "${writers[@]}"; do total=$((total + $(stat_of "$w" ok))); done
log "result: $n EBDs ($hot edited); ${#writers[@]} writers for $storm_s s: $total writes (config writer:" \
  "$(stat_of config ok) written, $(stat_of config conflicts) refused with 409); highest generation" \
  "$maxgen; ebdman: $(($(reconciles op) - reconciles0)) reconciles, $written status writes" \
  "($skipped skipped as unchanged), 0 conflicts, 0 failed; requests by code: $codes;" \
  "converged $converge s after the storm; lost: 0"
e2e_done
