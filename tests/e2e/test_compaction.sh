#!/usr/bin/env bash
# e2e compaction (issue 10, scenario 3): etcd is compacted under running
# watches, every watch of ebdman and vfm-sim is answered 410 Gone, their
# informers list again, and nothing is missed or duplicated.
#
# How the 410 comes about. The informers watch through the apiserver's watch
# cache, which keeps its own window of history: a compaction alone breaks
# no watch (each round proves it: a change made right after the compaction
# arrives through the running watches, with no relist). A watch is answered
# 410 when it asks for a resourceVersion older than what the apiserver and
# etcd still have, i.e. when it must restart after the history is gone. So
# each round
#  1. compacts etcd at its current revision under the running watches and
#     checks that a change still arrives without a relist;
#  2. (odd rounds) freezes ebdman and vfm-sim (SIGSTOP: a long GC pause, a
#     partitioned node), so they cannot take anything from their watches;
#  3. stops the apiserver, moves etcd's revision on and compacts again, and
#     starts the apiserver: its new watch cache starts at the compacted
#     revision, and every old watch stream is gone;
#  4. changes things while the watches are broken: specs (generation +1),
#     VFM failures set and cleared (vfm-sim's fail annotation, which ebdman
#     copies to the VFM), VFM statuses patched directly (vfm-sim puts its own
#     back), EBDs created and (but in the last round) deleted; then compacts
#     once more, so none of that history exists anywhere;
#  5. thaws the processes: every informer (ebdman's EBDs, VFMs and
#     ConfigMaps, vfm-sim's VFMs) re-watches from its old resourceVersion,
#     is answered 410 ("too old resource version"; counted from the logs)
#     and lists again; everything converges.
# Even rounds do the same without freezing: the informers reconnect while
# the changes are being made.
# At the end: every EBD current (check_conditions_current), one VFM and one
# ConfigMap each (check_children), the informers' caches hold exactly the
# objects there are (kcr_informer_objects), ebdman and vfm-sim never crashed.
# Short form: 60 EBDs, 2 rounds (CI); KCR_CHAOS_LONG=1: 300 EBDs, 4 rounds.
set -euo pipefail
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh"
e2e_init
[[ -n ${KCR_ETCD_ENDPOINT:-} ]] ||
  fail "the control plane's etcd" "\$KCR_ETCD_ENDPOINT (tools/controlplane/start)" "nothing"

if [[ ${KCR_CHAOS_LONG:-0} == 1 ]]; then n=300 rounds=4; else n=60 rounds=2; fi
fail_ann=vfm-sim.ebdman.example.com/fail
informers=(ebds.ebdman.example.com vfms.ebdman.example.com configmaps)

# ---- etcd, through its v3 HTTP gateway ----
etcd() { curl -sS --max-time 10 -X POST "$KCR_ETCD_ENDPOINT/v3/$1" -d "$2"; }
etcd_revision() {
  etcd kv/range '{"key":"AA=="}' | sed -n 's/.*"revision":"\([0-9]*\)".*/\1/p'
}
bump_key=$(printf '/kcr-e2e/%s' "$E2E_NAME" | base64 -w0)
# etcd_bump: moves the revision on (a put and a delete of a key the apiserver
# does not read), so nothing cached before can be at the current revision.
etcd_bump() {
  etcd kv/put "{\"key\":\"$bump_key\",\"value\":\"eA==\"}" >/dev/null &&
    etcd kv/deleterange "{\"key\":\"$bump_key\"}" >/dev/null
}
COMPACTIONS=0
# etcd_compact: compacts at the current revision and checks that a read
# below it is refused as compacted. Sets REV; on failure prints why and
# returns 1 (no exit: the apiserver may be down and must be started first).
etcd_compact() {
  local out
  REV=$(etcd_revision)
  [[ $REV =~ ^[0-9]+$ ]] || { echo "etcd's current revision: '$REV'"; return 1; }
  out=$(etcd kv/compaction "{\"revision\":\"$REV\",\"physical\":true}") ||
    { echo "compacting etcd at $REV: $out"; return 1; }
  out=$(etcd kv/range "{\"key\":\"AA==\",\"revision\":\"$((REV - 1))\"}" || true)
  [[ $out == *compacted* ]] ||
    { echo "a read at revision $((REV - 1)) after compacting at $REV: '$out' (not refused as compacted)"; return 1; }
  COMPACTIONS=$((COMPACTIONS + 1))
}

# ---- the EBDs the test wants: name -> replicas, fail message ("" = none) ----
declare -A want_r=() want_fail=()
names() { printf '%s\n' "${!want_r[@]}" | sort; }
apply_all() {
  local e
  for e in $(names); do
    if [[ -n ${want_fail[$e]} ]]; then
      ebd_yaml "$e" registry.example.com/vfm:1.0 "${want_r[$e]}" "$fail_ann" "${want_fail[$e]}"
    else
      ebd_yaml "$e" registry.example.com/vfm:1.0 "${want_r[$e]}"
    fi
  done >"$E2E_TMP/ebds.yaml"
  retry k -n "$ns" apply --server-side -f "$E2E_TMP/ebds.yaml" >/dev/null ||
    fail "applying the EBDs"
}
all_relists() {
  local i out=""
  for i in "${informers[@]}"; do out+="$(relists op "$i") "; done
  echo "$out$(relists sim vfms.ebdman.example.com)"
}
same_processes() {
  [[ ${E2E_PID[op]} == "$op_pid" && ${E2E_PID[sim]} == "$sim_pid" ]] && proc_alive op &&
    proc_alive sim
}

new_ns
ns=$E2E_NS
start_sim_and_op "$ns" 500ms
op_pid=${E2E_PID[op]}
sim_pid=${E2E_PID[sim]}
for i in $(seq -w 1 "$n"); do want_r[e-$i]=1 want_fail[e-$i]=""; done
apply_all
wait_for 120 "$n EBDs current" conditions_current "$ns" "$n"

changed=0 created=0 deleted=0 flips=0 patched=0 max_converge=0
for ((round = 1; round <= rounds; round++)); do
  frozen=$((round % 2))
  before=($(all_relists))
  # 1. Compaction under running watches: nothing breaks.
  etcd_compact || fail "compacting etcd"
  log "round $round: compacted etcd at revision $REV under the running watches"
  probe=$(names | sed -n 1p)
  want_r[$probe]=$((want_r[$probe] + 1))
  apply_all
  wait_for 60 "round $round: a spec change after the compaction is reflected" \
    conditions_current "$ns" "${#want_r[@]}"
  expect_eq "round $round: relists caused by the compaction alone (watch cache)" \
    "${before[*]}" "$(all_relists)"

  # 2.-3. Freeze (odd rounds); the apiserver restarts onto a compacted etcd.
  if ((frozen)); then
    kill -STOP "$op_pid" "$sim_pid"
    log "round $round: froze ebdman (pid $op_pid) and vfm-sim (pid $sim_pid)"
  fi
  restart_apiserver --stop-only
  down_ok=1
  { etcd_bump && etcd_compact; } >"$E2E_TMP/etcd.err" 2>&1 || down_ok=0
  restart_apiserver --start-only
  ((down_ok)) || fail "moving etcd on while the apiserver was down: $(cat "$E2E_TMP/etcd.err")"
  log "round $round: apiserver restarted on etcd compacted at revision $REV"

  # 4. Changes while the watches are broken.
  mapfile -t all < <(names)
  m=${#all[@]}
  for ((j = round; j < m; j += 4)); do # specs: a quarter
    e=${all[j]}
    want_r[$e]=$((want_r[$e] + 1))
    changed=$((changed + 1))
  done
  for ((j = round + 1; j < m; j += 7)); do # failures set or cleared
    e=${all[j]}
    if [[ -n ${want_fail[$e]} ]]; then want_fail[$e]=""; else want_fail[$e]="round $round: disk $e on fire"; fi
    flips=$((flips + 1))
  done
  for c in 1 2 3; do # new EBDs
    want_r[r$round-new-$c]=1 want_fail[r$round-new-$c]=""
    created=$((created + 1))
  done
  apply_all
  # Deleted EBDs (not in the last round: the garbage collector, whose
  # watches come back with backoff after a restart, can take a minute to
  # remove their children).
  if ((round < rounds)); then
    doomed=("${all[m - 1]}" "${all[m - 2]}")
    k -n "$ns" delete ebd "${doomed[@]}" --wait=false >/dev/null
    for e in "${doomed[@]}"; do unset "want_r[$e]" "want_fail[$e]"; done
    deleted=$((deleted + ${#doomed[@]}))
  fi
  for ((j = round + 2; j < m - 2; j += 9)); do # VFM statuses written by someone else
    e=${all[j]}
    g=$(jp "$ns" vfm "$e" '{.metadata.generation}')
    k -n "$ns" patch vfm "$e" --subresource=status --type merge -p "{\"status\":{\"conditions\":[{\"type\":\"Ready\",\"status\":\"False\",\"reason\":\"Failed\",\"message\":\"patched while the watches were broken\",\"lastTransitionTime\":\"$(date -u +%FT%TZ)\",\"observedGeneration\":$g}]}}" >/dev/null
    patched=$((patched + 1))
  done
  etcd_bump || fail "writing to etcd"
  etcd_compact || fail "compacting etcd"
  log "round $round: changes made; compacted etcd again at revision $REV"

  # 5. Thaw; every informer gets 410, lists again, and all converges.
  t0=$SECONDS
  if ((frozen)); then
    kill -CONT "$op_pid" "$sim_pid"
    log "round $round: thawed ebdman and vfm-sim"
  fi
  wait_for 180 "round $round: all ${#want_r[@]} EBDs current" conditions_current "$ns" "${#want_r[@]}"
  converge=$((SECONDS - t0))
  ((converge > max_converge)) && max_converge=$converge
  after=($(all_relists))
  for ((j = 0; j < 4; j++)); do
    if ((j < 3)); then who="ebdman informer ${informers[j]}"; else who="vfm-sim informer vfms.ebdman.example.com"; fi
    expect_gt "round $round: relists after 410 by $who" "${before[j]}" "${after[j]}"
  done
  if same_processes; then pass "round $round: ebdman and vfm-sim still the processes started"; else
    fail "round $round: ebdman (pid $op_pid) and vfm-sim (pid $sim_pid) alive"; fi
done

# Nothing missed, nothing duplicated.
total=${#want_r[@]}
t_gc=$SECONDS
wait_eq 120 "VFMs (the deleted EBDs' collected)" "$total" count "$ns" vfms
wait_eq 60 "ebdman's ConfigMaps (the deleted EBDs' collected)" "$total" \
  count "$ns" configmaps app.kubernetes.io/managed-by=ebdman
log "the garbage collector took $((SECONDS - t_gc)) s to remove the deleted EBDs' children"
check_conditions_current "$ns" "$total"
expect_eq "EBDs (names)" "$(names | tr '\n' ' ')" "$(awk '{print $1}' "$E2E_TMP/ebds.txt" | sort | tr '\n' ' ')"
expect_eq "every EBD's replicas/fail annotation as last applied" \
  "$(for e in $(names); do printf '%s %s/%s\n' "$e" "${want_r[$e]}" "${want_fail[$e]}"; done)" \
  "$(k -n "$ns" get ebds -o jsonpath='{range .items[*]}{.metadata.name} {.spec.vfmTemplate.replicas}/{.metadata.annotations.vfm-sim\.ebdman\.example\.com/fail}{"\n"}{end}' | sort)"
expect_eq "EBDs Ready (all but the failing ones)" \
  "$(for e in $(names); do [[ -z ${want_fail[$e]} ]] && echo "$e"; done | grep -c . || true)" \
  "$(count_ready "$ns")"
check_children "$ns"
wait_eq 30 "ebdman's EBD cache (kcr_informer_objects)" "$total" \
  metric op kcr_informer_objects 'informer="ebds.ebdman.example.com"'
expect_eq "ebdman's VFM cache" "$total" "$(metric op kcr_informer_objects 'informer="vfms.ebdman.example.com"')"
expect_eq "ebdman's ConfigMap cache" "$total" "$(metric op kcr_informer_objects 'informer="configmaps"')"
expect_eq "vfm-sim's VFM cache" "$total" "$(metric sim kcr_informer_objects 'informer="vfms.ebdman.example.com"')"
if same_processes; then pass "ebdman (pid $op_pid) and vfm-sim (pid $sim_pid) never crashed nor restarted"; else
  fail "ebdman (pid $op_pid) and vfm-sim (pid $sim_pid) alive at the end"; fi
check_no_forbidden_but_warmup op sim

log "result: $total EBDs at the end; $rounds rounds ($(((rounds + 1) / 2)) with the processes frozen);" \
  "$COMPACTIONS compactions, $rounds apiserver restarts; made while the watches were broken:" \
  "$changed spec changes, $flips failure flips, $patched foreign VFM status writes, $created creates," \
  "$deleted deletes; relists after 410 (ebdman ebds/vfms/configmaps, vfm-sim): $(all_relists);" \
  "longest convergence after a round's faults: $max_converge s;" \
  "$E2E_WARMUP_403 log lines with a 403 during warm-ups; lost: 0; duplicated: 0"
e2e_done
