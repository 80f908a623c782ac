#!/usr/bin/env bash
# e2e shutdown_grace (issue 8, item 1): SIGTERM while a reconcile outlives
# the graceful-shutdown timeout. ebdman talks to the apiserver through
# chaosproxy, which holds every PATCH of ebdman's for 12 s (less than the
# client's 30 s request timeout and stop_proc's 15 s before SIGKILL), so the
# reconcile of a new EBD is stuck in its first write - deterministically,
# not by racing a storm as test_leader_fence does. With
# --graceful-shutdown-timeout 1s, SIGTERM gives it that second, then ebdman
# exits at once with status 0 and says so, without freeing what the
# reconcile still uses (its _exit decision, operator/ebdman/reconcile.c).
# Without that decision ebdman frees the status writer and the recorder and
# then waits in kcr_manager_free until the PATCH returns, 12 s later; the
# reconcile goes on into the freed writer: in an ASan build a
# heap-use-after-free (kcr_written_put from install) and exit status 1.
set -euo pipefail
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh"
e2e_init

new_ns
ns=$E2E_NS
start_chaosproxy proxy
op_kc=$(via_proxy "$E2E_SA_KUBECONFIG" proxy)
start_ebdman op --namespace "$ns" --kubeconfig "$op_kc" --graceful-shutdown-timeout 1s
proxy_rules proxy <<'RULES'
delay ms=12000 verb=PATCH agent=ebdman
RULES

ebd_yaml e1 registry.example.com/vfm:1.0 1 | k -n "$ns" apply -f - >/dev/null
held() { metric proxy chaosproxy_injected_total 'fault="delay"'; }
wait_for 60 "a PATCH of ebdman's reconcile is held by the proxy" at_least 1 held
expect_eq "reconciles finished while the PATCH is held" "0" \
  "$(metric op controller_runtime_reconcile_total 'controller="ebd"')"

t0=$(date +%s%N)
stop_proc op # SIGTERM; SIGKILL after 15 s
ms=$((($(date +%s%N) - t0) / 1000000))
log "ebdman exited $ms ms after SIGTERM"
expect_eq "ebdman exit status (SIGTERM, a reconcile past the grace period)" "0" "$E2E_EXIT"
if ((ms < 10000)); then
  pass "ebdman exited within 10 s of SIGTERM (1 s grace), not after the held reconcile"
else
  fail "ebdman exit after SIGTERM" "within 10 s" "$ms ms"
fi
if grep -q 'exiting with reconciles still running' "${E2E_LOG[op]}"; then
  pass "ebdman's log says it exits without waiting for the running reconcile"
else
  fail "ebdman's log" "'exiting with reconciles still running'" "$(tail -n 5 "${E2E_LOG[op]}")"
fi
if grep -qE 'AddressSanitizer|runtime error:|LeakSanitizer' "${E2E_LOG[op]}"; then
  fail "ebdman's log" "no sanitizer report" "$(grep -m3 -E 'Sanitizer|runtime error:' "${E2E_LOG[op]}")"
else
  pass "ebdman's log has no sanitizer report"
fi
e2e_done
