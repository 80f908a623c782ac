#!/usr/bin/env bash
# e2e chaos_faults (issue #10, scenario 1): EBDs converge while about 20% of
# the operator's requests fail and every watch is cut mid-document after 3 s.
# ebdman (under the shipped RBAC's token kubeconfig) and vfm-sim run
# unmodified, their kubeconfigs pointing at chaosproxy (tests/chaos), whose
# rules fail requests with a mix of 429 (Retry-After 1), 503, 500, 504,
# resets, truncated and garbled bodies, and slow some down (delays, drips).
# The test's own kubectl talks to the apiserver directly.
#
# Short form: 100 EBDs. KCR_CHAOS_LONG=1: 500 EBDs.
#
# End checks, once every EBD is Ready and the faults are off:
# - every EBD's conditions say what its VFM and generation say
#   (check_all_ready), exactly one VFM and one ConfigMap per EBD with one
#   controller ownerReference (check_children);
# - ebdman never crashed: the process started first is still running and
#   exits 0 on SIGTERM;
# - ebdman's metrics account for the faults: for each code C of 429, 500,
#   503 and 504, ebdman's rest_client_requests_total{code=C} equals the
#   proxy's chaosproxy_responses_total{agent="ebdman",code=C}. Why exact:
#   ebdman talks only to the proxy; the proxy counts every response head it
#   writes to ebdman (injected or the apiserver's own), ebdman's client
#   observes every attempt once (retries included, watches included) with
#   the code it read; compared when no request is in flight and no fault is
#   on. And ebdman's failed reconciles are at most the faults that fail a
#   reconcile's request (any but delay, drip and cut on ebdman's
#   GET/POST/PUT/PATCH/DELETE), and at least one.
set -euo pipefail
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh"
e2e_init

if [[ ${KCR_CHAOS_LONG:-0} == 1 ]]; then n=500 converge_s=900; else n=100 converge_s=240; fi
new_ns
ns=$E2E_NS
start_chaosproxy proxy --seed 10 --zap-log-level debug
# The rules: the first that hits wins, so a watch request can also fail;
# the ones that get through are cut after 3 s (delays and drips, which
# would spare a watch its cut, are for the other verbs). Failing ones add up to
# 1 - 0.94*0.95*0.96*0.98*0.97*0.98*0.99 = 20.9% of all requests. A
# truncated or garbled answer to a write comes after the write was done.
proxy_rules proxy <<'EOF'
status code=429 retry-after=1 rate=0.06
status code=503 rate=0.05
status code=500 rate=0.04
status code=504 rate=0.02
reset rate=0.03
truncate rate=0.02
garble rate=0.01
delay ms=200 verb=GET,LIST,POST,PUT,PATCH,DELETE rate=0.03
drip bytes=512 ms=5 verb=GET,LIST,POST,PUT,PATCH,DELETE rate=0.01
cut after-ms=3000
EOF
op_kc=$(via_proxy "$E2E_SA_KUBECONFIG" proxy)
sim_kc=$(via_proxy "$E2E_VFMSIM_KUBECONFIG" proxy)
# (Both may need several tries to sync their caches through the faults.)
start_vfm_sim sim --namespace "$ns" --delay 200ms --kubeconfig "$sim_kc"
start_ebdman op --namespace "$ns" --kubeconfig "$op_kc"
op_pid=${E2E_PID[op]}

t0=$SECONDS
for i in $(seq -w 1 "$n"); do
  ebd_yaml "ebd-$i" registry.example.com/vfm:1.0 1
done | k -n "$ns" apply --server-side -f - >/dev/null
wait_eq "$converge_s" "EBDs with Ready=True through the faults" "$n" count_ready "$ns"
converge=$((SECONDS - t0))
log "converged in $converge s"
expect_eq "ebdman pid (never restarted)" "$op_pid" "${E2E_PID[op]}"
proc_alive op || fail "ebdman died during the faults"

# Faults off; then nothing is in flight but watches (200s).
proxy_rules proxy </dev/null
wait_for 60 "ebdman idle" ebd_idle op "$n"
check_all_ready "$ns" "$n"
check_children "$ns"
proc_alive op || fail "ebdman (pid $op_pid) is not running"

for code in 429 500 503 504; do
  expect_eq "ebdman's rest_client_requests_total{code=\"$code\"} = the proxy's $code answers to ebdman" \
    "$(metric proxy chaosproxy_responses_total 'agent="ebdman"' "code=\"$code\"")" \
    "$(metric op rest_client_requests_total "code=\"$code\"")"
done
# Faults that fail the request they hit, on the requests a reconcile makes.
failing=0
for verb in GET POST PUT PATCH DELETE; do
  for fault in status_429 status_500 status_503 status_504 reset truncate garble; do
    failing=$((failing + $(metric proxy chaosproxy_injected_total 'agent="ebdman"' \
      "verb=\"$verb\"" "fault=\"$fault\"")))
  done
done
rec_errors=$(metric op controller_runtime_reconcile_errors_total 'controller="ebd"')
expect_gt "ebdman's failed reconciles" 0 "$rec_errors"
if ((rec_errors > failing)); then
  fail "ebdman's failed reconciles ($rec_errors) exceed the faults that could fail one ($failing)"
fi
pass "ebdman's failed reconciles ($rec_errors) <= faults on its reconcile requests ($failing)"

# The numbers, for docs/reliability.md.
m() { metric "$@"; }
inj() { m proxy chaosproxy_injected_total "agent=\"$1\"" ${2:+"fault=\"$2\""}; }
log "numbers: EBDs=$n converge_s=$converge"
log "numbers: proxy requests from ebdman=$(m proxy chaosproxy_requests_total 'agent="ebdman"') forwarded=$(m proxy chaosproxy_forwarded_total 'agent="ebdman"') injected=$(inj ebdman); from vfm-sim (agent kcr)=$(m proxy chaosproxy_requests_total 'agent="kcr"') injected=$(inj kcr); connections ok=$(m proxy chaosproxy_connections_total 'result="ok"') tls_failed=$(m proxy chaosproxy_connections_total 'result="tls_failed"')"
for f in status_429 status_503 status_500 status_504 reset truncate garble delay drip cut; do
  log "numbers: injected $f: ebdman=$(inj ebdman "$f") vfm-sim=$(inj kcr "$f")"
done
log "numbers: ebdman rest_client_requests_total=$(m op rest_client_requests_total) 429=$(m op rest_client_requests_total 'code="429"') 503=$(m op rest_client_requests_total 'code="503"') 500=$(m op rest_client_requests_total 'code="500"') 504=$(m op rest_client_requests_total 'code="504"') <error>=$(m op rest_client_requests_total 'code="<error>"')"
log "numbers: ebdman reconciles=$(reconciles op) reconcile errors=$rec_errors status writes=$(m op kcr_status_writes_total 'result="written"')"

check_no_forbidden op sim
e2e_done
