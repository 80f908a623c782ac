#!/usr/bin/env bash
# e2e rbac_later: a refusal that passes without the EBD changing is retried.
# ebdman runs as a ServiceAccount whose ClusterRole is the shipped one
# without "create" and "patch" on VFMs, so the first apply of every VFM is
# 403 Forbidden. Checks:
# - the EBD reports Installed=False/InstallFailed with the apiserver's
#   answer (cannot patch resource "vfms": an apply is a PATCH);
# - ebdman keeps trying with backoff (its reconcile errors grow), not in a
#   hot loop (at most 40 in the first 20 s: the backoff doubles from 5 ms);
# - once a Role in the namespace grants the two verbs, the EBD becomes
#   Ready with nothing of it touched (generation 1, no annotation): no event
#   of the EBD's wakes it, only the retry. Before the fix the EBD stayed
#   InstallFailed: a 403 was taken for a permanent refusal, as a 422 is.
# The same path is what an apiserver restart takes while its authorizer has
# not loaded the roles yet (e2e/test_apiserver_restart saw an EBD stuck so).
# Then SIGTERM: exit 0.
set -euo pipefail
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh"
e2e_init

new_ns
ns=$E2E_NS
limited=e2e-rbac-later-${ns##*-}

drop_limited() {
  k delete clusterrolebinding "$limited" --ignore-not-found >/dev/null 2>&1 || true
  k delete clusterrole "$limited" --ignore-not-found >/dev/null 2>&1 || true
  k -n "$E2E_SYSTEM_NS" delete serviceaccount "$limited" --ignore-not-found >/dev/null 2>&1 || true
}
E2E_EXIT_HOOKS+=(drop_limited)

k -n "$E2E_SYSTEM_NS" create serviceaccount "$limited" >/dev/null
k get clusterrole ebdman-manager-role -o json |
  jq --arg n "$limited" '{apiVersion, kind, metadata: {name: $n},
    rules: [.rules[] | if ((.resources // []) | index("vfms")) then .verbs -= ["create", "patch"] else . end]}' |
  k apply -f - >/dev/null || fail "could not make ClusterRole $limited"
k create clusterrolebinding "$limited" --clusterrole="$limited" \
  --serviceaccount="$E2E_SYSTEM_NS:$limited" >/dev/null
expect_eq "the limited role's verbs on vfms" "get list watch" \
  "$(k get clusterrole "$limited" -o json | jq -r '.rules[] | select(.resources | index("vfms")) | .verbs | join(" ")')"
_token_kubeconfig "$limited" "$E2E_TMP/limited.kubeconfig"
E2E_SA_KUBECONFIG=$E2E_TMP/limited.kubeconfig # start_ebdman runs with it
wait_eq 30 "the limited ServiceAccount may create VFMs" no \
  k_sa auth can-i create vfms.ebdman.example.com -n "$ns"

start_sim_and_op "$ns" 200ms
ebd_yaml a registry.example.com/vfm:1 1 | k -n "$ns" apply --server-side -f - >/dev/null
t0=$SECONDS

install_failed() {
  local got
  got=$(cond_status "$ns" ebd a Installed)/$(cond_reason "$ns" ebd a Installed)
  [[ $got == False/InstallFailed ]] || { echo "$got"; return 1; }
  cond_message "$ns" ebd a Installed
}
wait_for 60 "EBD a: Installed=False/InstallFailed" install_failed
expect_contains "its message" 'cannot patch resource "vfms"' "$(cond_message "$ns" ebd a Installed)"

errors() { metric op controller_runtime_reconcile_errors_total 'controller="ebd"'; }
wait_for 30 "ebdman retries the refused apply (3 reconcile errors or more)" at_least 3 errors
while ((SECONDS - t0 < 20)); do sleep 0.5; done
n=$(errors)
((n <= 40)) || fail "reconcile errors in the first 20 s: backoff, not a hot loop" "<= 40" "$n"
pass "reconcile errors in the first 20 s: $n (at most 40)"

k -n "$ns" create role vfm-writer --verb=create,patch --resource=vfms.ebdman.example.com >/dev/null
k -n "$ns" create rolebinding vfm-writer --role=vfm-writer \
  --serviceaccount="$E2E_SYSTEM_NS:$limited" >/dev/null
wait_eq 30 "the Role lets it create VFMs" yes k_sa auth can-i create vfms.ebdman.example.com -n "$ns"
# The backoff's next try is at most as far off as the time it has failed
# for (doubling), so within twice that, plus the VFM's 200 ms.
bound=$((2 * (SECONDS - t0) + 30))
wait_eq "$bound" "EBD a Ready once the Role is granted" True cond_status "$ns" ebd a Ready
expect_eq "EBD a Installed" True "$(cond_status "$ns" ebd a Installed)"
expect_eq "EBD a untouched: generation" 1 "$(generation "$ns" ebd a)"
expect_eq "EBD a untouched: annotations" "" "$(jp "$ns" ebd a '{.metadata.annotations}')"
expect_eq "EBD a observedGeneration" 1 "$(observed_generation "$ns" ebd a)"
e2e_done
