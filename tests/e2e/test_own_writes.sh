#!/usr/bin/env bash
# e2e own_writes (issue 11): with --workers 16 ebdman writes each EBD's
# status exactly twice - Installed with VFMHealthy/Ready Progressing, then
# Ready - for 300 EBDs (E2E_OWN_WRITES_COUNT) created at once, with vfm-sim
# reporting VFMs Ready at once (--delay 0), so that reconciles of an EBD
# follow each other while ebdman's own status writes are still on their way
# back through the watch. Counted by the apiserver (its audit log: ebdman's
# process, this namespace, ebds/status, answered 2xx), and equal to
# ebdman's own kcr_status_writes_total{result="written"}; no status write
# failed or conflicted (a 429 or 5xx retried under load is reported). Before the status writer read its own
# writes, a reconcile that got an EBD from the cache before ebdman's
# previous status apply had arrived applied the same status again
# (bench/README.md section 3, item 5: 10,005 writes for 5,000 EBDs).
# Children: exactly one successful apply per VFM and per ConfigMap; the
# create-only applies the apiserver refused with 409 because ebdman's cache
# did not show its own new child yet (by design: it then reads the child;
# operator/ebdman/children.c) are reported in the result line, not asserted.
set -euo pipefail
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh"
e2e_init
require_audit_log

n=${E2E_OWN_WRITES_COUNT:-300}
new_ns
ns=$E2E_NS
start_vfm_sim sim --namespace "$ns" --delay 0
start_ebdman op --namespace "$ns" --workers 16
op_pid=${E2E_PID[op]}

for i in $(seq -w 1 "$n"); do
  ebd_yaml "w-$i" "registry.example.com/vfm:1.$i" 1
done >"$E2E_TMP/ebds.yaml"
log "creating $n EBDs with one kubectl apply; ebdman runs 16 workers"
k -n "$ns" apply --server-side -f "$E2E_TMP/ebds.yaml" >/dev/null
wait_eq 300 "EBDs with Ready=True" "$n" count_ready "$ns"
check_all_ready "$ns" "$n"
check_children "$ns"

# The last status writes come back as watch events and wake their EBDs once
# more: wait until those reconciles are done, twice, 3 s apart (a window in
# which a late redundant write would show).
wait_for 120 "ebdman idle" ebd_idle op "$n"
sleep 3
wait_for 120 "ebdman still idle" ebd_idle op "$n"

# audit_codes RESOURCE SUBRESOURCE: the HTTP code of each write ebdman's
# process made to RESOURCE[/SUBRESOURCE] in ns, one per line.
audit_codes() {
  grep -F "; pid $op_pid) " "$KCR_AUDIT_LOG" | grep -F "\"namespace\":\"$ns\"" |
    grep -F "\"objectRef\":{\"resource\":\"$1\"" | {
    if [[ -n $2 ]]; then grep -F "\"subresource\":\"$2\""; else grep -vF '"subresource":'; fi
  } | grep -o '"code":[0-9]*' | cut -d: -f2 || true
}
ok_count() { grep -c '^2' || true; }

status_codes=$(audit_codes ebds status)
status_ok=$(ok_count <<<"$status_codes")
status_all=$(grep -c . <<<"$status_codes" || true)
written=$(metric op kcr_status_writes_total 'result="written"')
skipped=$(metric op kcr_status_writes_total 'result="skipped"')
expect_eq "ebds/status writes by ebdman (audit log, 2xx), 2 per EBD" "$((2 * n))" "$status_ok"
# Any other answer (a 429 or 5xx the client retried under load) is not a
# write that changed nothing: reported, but a 409 would be a conflict.
expect_eq "ebds/status writes by ebdman answered 409 (audit log)" "0" \
  "$(grep -c '^409$' <<<"$status_codes" || true)"
expect_eq "ebdman: kcr_status_writes_total{result=\"written\"}" "$((2 * n))" "$written"
expect_eq "ebdman: failed status writes" "0" "$(metric op kcr_status_writes_total 'result="failed"')"
expect_eq "ebdman: status writes retried after a conflict" "0" \
  "$(metric op kcr_status_writes_total 'result="conflict_retried"')"

child_409=0
for r in vfms configmaps; do
  codes=$(audit_codes "$r" "")
  expect_eq "$r: successful applies by ebdman (audit log), 1 per EBD" "$n" "$(ok_count <<<"$codes")"
  child_409=$((child_409 + $(grep -c '^409$' <<<"$codes" || true)))
done
expect_eq "ebdman: failed reconciles" "0" \
  "$(metric op controller_runtime_reconcile_errors_total 'controller="ebd"')"
check_no_forbidden op sim

log "result: $n EBDs, 16 workers: $status_ok status writes ($((2 * n)) wanted;" \
  "$((status_all - status_ok)) other answers)," \
  "$skipped skipped without a request, $(reconciles op) reconciles;" \
  "children: $((2 * n)) applies, $child_409 create-only applies refused with 409 (cache behind)"
e2e_done
