#!/usr/bin/env bash
# e2e valgrind (issue #10, memory checking): ebdman - a build without
# sanitizers, KCR_EBDMAN_PLAIN_BIN - runs under valgrind memcheck through a
# whole life: start-up with leader election, 20 EBDs installed and Ready,
# /metrics scraped, 5 spec changes, 5 EBDs deleted (garbage collector), one
# EBD whose ConfigMap name is someone else's (ChildConflict: the create-only
# apply's 409, the GET, the message) until that ConfigMap is deleted, then
# SIGTERM. Requires: exit status 0 (valgrind's --error-exitcode turns any
# error into 99), "ERROR SUMMARY: 0 errors" - no invalid read or write, no
# use of uninitialised memory, no bad free, no definite leak
# (--errors-for-leak-kinds=definite) - and nothing definitely or indirectly
# lost. No suppression file: none is needed (libcurl, OpenSSL, libyaml and
# cJSON are freed at exit like everything else), so every report is ours to
# read. The log is kept in the test's temp dir (and printed on failure).
#
# Under valgrind ebdman runs 20-50 times slower; a TLS handshake takes about
# a second. Budget: about 30 s.
set -euo pipefail
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh"
[[ -n ${KCR_EBDMAN_PLAIN_BIN:-} && -x ${KCR_EBDMAN_PLAIN_BIN:-} ]] ||
  fail "KCR_EBDMAN_PLAIN_BIN: ebdman built without sanitizers (scripts/test builds build/plain)" \
    "an executable" "'${KCR_EBDMAN_PLAIN_BIN:-}'"
command -v valgrind >/dev/null || fail "valgrind is installed (scripts/bootstrap installs it)"
if nm -an "$KCR_EBDMAN_PLAIN_BIN" 2>/dev/null | grep -q '__asan_init\|__tsan_init'; then
  fail "KCR_EBDMAN_PLAIN_BIN is built without sanitizers (valgrind cannot run them)"
fi
e2e_init

new_ns
ns=$E2E_NS
vglog=$E2E_TMP/valgrind.log
# The operator under test: valgrind in front of the plain build (exec, so
# the pid start_ebdman signals is valgrind's, which is ebdman's).
wrapper=$E2E_TMP/ebdman-valgrind
cat >"$wrapper" <<EOF
#!/bin/sh
exec valgrind --error-exitcode=99 --leak-check=full --show-leak-kinds=definite,indirect \\
  --errors-for-leak-kinds=definite --num-callers=40 --log-file="$vglog" \\
  "$KCR_EBDMAN_PLAIN_BIN" "\$@"
EOF
chmod +x "$wrapper"

start_vfm_sim sim --namespace "$ns" --delay 200ms
t0=$SECONDS
KCR_EBDMAN_BIN=$wrapper start_ebdman op --namespace "$ns" --leader-elect \
  --leader-election-namespace "$E2E_SYSTEM_NS" --leader-election-id "e2e-valgrind-$ns"
grep -q 'Memcheck' "$vglog" || fail "ebdman runs under valgrind memcheck (log $vglog)"
log "ebdman under valgrind ready in $((SECONDS - t0)) s"

k -n "$ns" create configmap c-20-config --from-literal=theirs=yes >/dev/null
{ for ((i = 1; i <= 20; i++)); do ebd_yaml "$(printf 'c-%02d' "$i")" registry.example.com/vfm:1.0 1; done; } |
  k -n "$ns" apply -f - >/dev/null
wait_eq 120 "EBDs Ready" 19 count_ready "$ns"
wait_eq 30 "c-20: Installed (its ConfigMap is someone else's)" "False/ChildConflict/1" \
  cond_summary "$ns" ebd c-20 Installed
scrape op >/dev/null || fail "scraping ebdman's /metrics"
for ((i = 1; i <= 5; i++)); do
  k -n "$ns" patch ebd "$(printf 'c-%02d' "$i")" --type merge \
    -p '{"spec":{"vfmTemplate":{"replicas":2,"config":{"step":"two"}}}}' >/dev/null
done
k -n "$ns" delete ebd c-06 c-07 c-08 c-09 c-10 --wait=false >/dev/null
k -n "$ns" delete configmap c-20-config >/dev/null
# (A touch, rather than the 30 s re-check, wakes it.)
k -n "$ns" annotate ebd c-20 e2e-poke=1 >/dev/null
wait_eq 60 "c-20: Ready once their ConfigMap is gone" "True/Ready/1" cond_summary "$ns" ebd c-20 Ready
wait_eq 60 "EBDs Ready after spec changes and deletions" 15 count_ready "$ns"
wait_eq 60 "VFMs left after the deletions" 15 count "$ns" vfms
spec_done() {
  local n
  n=$(k -n "$ns" get ebds -o jsonpath='{range .items[*]}{.status.observedGeneration}/{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' |
    grep -c '^2/True$' || true)
  echo "$n EBDs Ready at generation 2"
  ((n == 5))
}
wait_for 60 "the 5 changed EBDs Ready at generation 2" spec_done
wait_for 30 "ebdman idle" ebd_idle op 1
scrape op >/dev/null || fail "scraping ebdman's /metrics"
log "converged under valgrind in $((SECONDS - t0)) s"

# SIGTERM, with time for valgrind's leak check.
t1=$SECONDS
pid=${E2E_PID[op]}
kill -TERM "$pid"
for ((i = 0; i < 600; i++)); do
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.1
done
kill -0 "$pid" 2>/dev/null && fail "ebdman under valgrind exits within 60 s of SIGTERM"
rc=0
wait "$pid" || rc=$?
E2E_PID[op]=
log "ebdman under valgrind exited with $rc, $((SECONDS - t1)) s after SIGTERM"
summary=$(grep -E 'ERROR SUMMARY|in use at exit|total heap usage|definitely lost|indirectly lost|All heap blocks' "$vglog" |
  sed 's/^==[0-9]*== *//')
printf '%s\n' "$summary" | sed 's/^/  valgrind: /'
if ((rc != 0)) || ! grep -q 'ERROR SUMMARY: 0 errors' "$vglog"; then
  grep -v '^==[0-9]*== *$' "$vglog" | tail -n 80 | sed 's/^/  /'
  fail "ebdman under valgrind: exit status and errors (log $vglog)" "0 and 'ERROR SUMMARY: 0 errors'" \
    "$rc and '$(grep -o 'ERROR SUMMARY: [0-9]* errors' "$vglog" || echo none)'"
fi
pass "valgrind memcheck: no invalid access, no uninitialised value, no definite leak; exit status 0"
if grep -Eq '(definitely|indirectly) lost: [1-9]' "$vglog"; then
  fail "nothing definitely or indirectly lost" "0 bytes" "$(grep -E '(definitely|indirectly) lost' "$vglog")"
fi
pass "nothing definitely or indirectly lost"

check_no_forbidden op sim
e2e_done
