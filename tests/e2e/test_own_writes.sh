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
# Children: exactly one write per VFM and per ConfigMap - its create-only
# apply, answered 2xx - and no other write to them (audit log, by verb and
# code). Before ebdman read its own child writes, a second reconcile that
# read an EBD's children from a cache that did not show the child just
# created sent the create-only apply again, refused with 409 (0-39 per
# 300 EBDs at 16 workers), and read the child with a GET.
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

# The last status writes come back as watch events (which reconcile nothing:
# test_own_echo.sh) while other events may still be queued: wait until the
# reconciles are done, twice, 3 s apart (a window in which a late redundant
# write would show).
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

# audit_writes RESOURCE: "VERB CODE" of each write ebdman's process made to
# RESOURCE (no subresource) in ns, one per line.
audit_writes() {
  grep -F "; pid $op_pid) " "$KCR_AUDIT_LOG" | grep -F "\"namespace\":\"$ns\"" |
    grep -F "\"objectRef\":{\"resource\":\"$1\"" | grep -vF '"subresource":' |
    sed -n 's/.*"verb":"\([a-z]*\)".*"code":\([0-9]*\).*/\1 \2/p' || true
}
# request_methods LABEL: the process's API requests by method and HTTP
# status, from rest_client_requests_total ("GET:200=COUNT ...").
request_methods() {
  scrape "$1" | awk '/^rest_client_requests_total\{/ && match($0, /method="[A-Z]*"/) {
      m = substr($0, RSTART + 8, RLENGTH - 9)
      if (match($0, /code="[^"]*"/)) c[m ":" substr($0, RSTART + 6, RLENGTH - 7)] += $NF
    }
    END { for (k in c) printf "%s=%d\n", k, c[k] }' | sort | tr '\n' ' '
}
child_writes=""
declare -A writes
for r in vfms configmaps; do
  writes[$r]=$(audit_writes "$r")
  summary=$(sort <<<"${writes[$r]}" | uniq -c | awk 'NF == 3 {printf "%s %s=%d, ", $2, $3, $1}')
  child_writes+="$r: ${summary%, }; "
  log "$r: writes by ebdman by verb and code: ${summary%, }"
done
for r in vfms configmaps; do
  expect_eq "$r: writes by ebdman answered 2xx (audit log), 1 apply per EBD" "$n" \
    "$(grep -c '^patch 2' <<<"${writes[$r]}" || true)"
  expect_eq "$r: all writes by ebdman (audit log; a 409 is a create the cache hid)" "$n" \
    "$(grep -c . <<<"${writes[$r]}" || true)"
done
expect_eq "ebdman: failed reconciles" "0" \
  "$(metric op controller_runtime_reconcile_errors_total 'controller="ebd"')"
check_no_forbidden op sim

log "result: $n EBDs, 16 workers: $status_ok status writes ($((2 * n)) wanted;" \
  "$((status_all - status_ok)) other answers)," \
  "$skipped skipped without a request, $(reconciles op) reconciles;" \
  "children: ${child_writes}ebdman's requests by method and code: $(request_methods op)"
e2e_done
