#!/usr/bin/env bash
# e2e steady_state: once every EBD is Ready, forced resyncs make zero writes.
# ebdman runs with --resync 2s; after everything is Ready and ebdman is idle,
# every EBD, VFM and ConfigMap resourceVersion is recorded; over a window of
# at least three resync rounds (~6 s) kcr_status_writes_total{result="written"}
# stays put while {result="skipped"} grows (the resyncs did look), no child is
# applied, and no resourceVersion changes. Then a fresh ebdman (a restart)
# makes no write either.
set -euo pipefail
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh"
e2e_init

n=20
new_ns
ns=$E2E_NS
start_sim_and_op "$ns" 200ms --resync 2s

for i in $(seq -w 1 "$n"); do
  ebd_yaml "ebd-$i" registry.example.com/vfm:1.0 2
done | k -n "$ns" apply --server-side -f - >/dev/null
wait_eq 90 "EBDs with Ready=True" "$n" count_ready "$ns"
check_all_ready "$ns" "$n"
wait_for 30 "ebdman idle" ebd_idle op 0

rvs() {
  k -n "$ns" get ebds,vfms,configmaps \
    -o jsonpath='{range .items[*]}{.kind}/{.metadata.name} {.metadata.resourceVersion}{"\n"}{end}' | sort
}
# api_writes LABEL: write requests ebdman sent: PATCH (status and child
# applies, event series), POST (events), PUT, DELETE.
api_writes() {
  local m sum=0
  for m in PATCH POST PUT DELETE; do
    sum=$((sum + $(metric "$1" rest_client_requests_total "method=\"$m\"")))
  done
  echo "$sum"
}
writes() { metric op kcr_status_writes_total 'result="written"'; }
skips() { metric op kcr_status_writes_total 'result="skipped"'; }

rvs >"$E2E_TMP/rv-before.txt"
expect_eq "objects recorded (EBDs + VFMs + ConfigMaps)" "$((3 * n))" \
  "$(grep -c ebd- "$E2E_TMP/rv-before.txt" || true)"
w0=$(writes)
s0=$(skips)
p0=$(api_writes op)
t0=$SECONDS
# Three resync rounds: each looks at every EBD and skips its status write.
wait_for 60 "three resync rounds looked at every EBD (skipped >= $s0 + 3 x $n)" \
  at_least $((s0 + 3 * n)) skips
log "window: $((SECONDS - t0)) s"
wait_for 30 "ebdman idle after the resyncs" ebd_idle op 0
expect_eq "kcr_status_writes_total{result=\"written\"} across the resyncs" "$w0" "$(writes)"
expect_eq "write requests (PATCH/POST/PUT/DELETE) across the resyncs" "$p0" "$(api_writes op)"
rvs >"$E2E_TMP/rv-after.txt"
if ! d=$(diff "$E2E_TMP/rv-before.txt" "$E2E_TMP/rv-after.txt"); then
  echo "$d" | head -n 10 | sed 's/^/  /'
  fail "resourceVersions across the resyncs" "unchanged" "the changes above"
fi
pass "all $((3 * n)) resourceVersions unchanged across the resyncs"

# A restart: the new process lists everything, reconciles every EBD, writes nothing.
stop_proc op TERM
expect_eq "ebdman exit status after SIGTERM" "0" "$E2E_EXIT"
start_ebdman op2 --namespace "$ns" --resync 2s
wait_for 60 "restarted ebdman reconciled every EBD at least twice" at_least $((2 * n)) \
  metric op2 kcr_status_writes_total 'result="skipped"'
wait_for 30 "restarted ebdman idle" ebd_idle op2 0
expect_eq "restarted ebdman: status writes" "0" "$(metric op2 kcr_status_writes_total 'result="written"')"
expect_eq "restarted ebdman: write requests (PATCH/POST/PUT/DELETE)" "0" "$(api_writes op2)"
rvs >"$E2E_TMP/rv-restart.txt"
if ! d=$(diff "$E2E_TMP/rv-before.txt" "$E2E_TMP/rv-restart.txt"); then
  echo "$d" | head -n 10 | sed 's/^/  /'
  fail "resourceVersions across a restart of ebdman" "unchanged" "the changes above"
fi
pass "all $((3 * n)) resourceVersions unchanged across a restart"

check_no_forbidden op op2 sim
e2e_done
