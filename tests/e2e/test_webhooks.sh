#!/usr/bin/env bash
# e2e webhooks (issue #30): ebdman's admission webhooks called by the real
# apiserver over loopback TLS.
#
# The webhook configurations are config/default's (config/webhook), with
# clientConfig turned into a URL (https://127.0.0.1:PORT/...; the apiserver
# has no route to a Service here), the namespace selector narrowed to the
# test's namespace and failurePolicy Fail, so that a webhook that is not
# called fails the test instead of passing it. ebdman makes the certificates
# itself (--webhook-certs-secret, the IP SAN 127.0.0.1) and writes their CA
# into both configurations' caBundle.
# Checks:
# - the validating webhook refuses an EBD whose VFM name is taken by an
#   object that is not an EBD's (the message names it), also under
#   --dry-run=server; an EBD without a conflict is admitted by a dry run and
#   not stored; with the webhook skipped (label ebdman.example.com/webhooks=
#   skip) the reconcile still reports ChildConflict (it is authoritative);
# - the defaulting webhook sets spec.vfmTemplate.image when it is left out, and is
#   not called at all when the EBD names its image (matchConditions);
# - the status writes of ebdman call no webhook (the rules name ebds, not
#   ebds/status);
# - while ebdman is stopped (SIGSTOP: the connection is accepted, no answer
#   comes - a handler slower than timeoutSeconds) and while it is gone:
#   failurePolicy Fail refuses EBD writes (apiserver_admission_webhook_
#   rejection_count{error_type="calling_webhook_error"} counts them),
#   Ignore admits them (apiserver_admission_webhook_fail_open_count), and an
#   EBD without an image is then refused by the schema;
# - no forbidden request in ebdman's log: the RBAC of config/ suffices
#   (Secret in its namespace, the two configurations by name).
set -euo pipefail
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh"
e2e_init

new_ns
ns=$E2E_NS
vwc=$E2E_VWC
mwc=$E2E_MWC
vname=vebd-v1beta1.ebdman.example.com
mname=mebd-v1beta1.ebdman.example.com
secret=$E2E_CERTS_SECRET
default_image=registry.example.com/vfm:default
free_port
wport=$E2E_PORT

# --- the webhook configurations of config/default, called by URL
install_webhooks "$wport" "$wport"

# --- someone else's VFM, before ebdman starts (so its cache holds it)
printf 'apiVersion: ebdman.example.com/v1alpha1\nkind: VFM\nmetadata:\n  name: taken\nspec:\n  image: theirs/x:1\n' |
  k -n "$ns" create -f - >/dev/null

start_sim_and_op "$ns" 100ms --webhook-bind-address "127.0.0.1:$wport" \
  --webhook-certs-secret "$secret" --webhook-ip 127.0.0.1 \
  --leader-election-namespace "$E2E_SYSTEM_NS" --default-vfm-image "$default_image"
wait_for 60 "ebdman wrote the caBundle of both configurations" has_bundles
expect_eq "the caBundle is the Secret's ca.crt" \
  "$(k get secret -n "$E2E_SYSTEM_NS" "$secret" -o jsonpath='{.data.ca\.crt}')" \
  "$(webhook_bundle validatingwebhookconfiguration "$vwc")"
ready() { curl -sf "http://127.0.0.1:${E2E_HEALTH[op]}/readyz" >/dev/null; }
wait_for 60 "ebdman ready (its webhooks serve the Secret's certificate)" ready
# the VFM cache has synced once a reconcile has run: wait for an EBD
printf 'apiVersion: ebdman.example.com/v1beta1\nkind: EBD\nmetadata:\n  name: first\nspec:\n  vfmTemplate:\n    image: mine/x:1\n' |
  k -n "$ns" create -f - >/dev/null
wait_eq 60 "first: Ready" "True/Ready/1" cond_summary "$ns" ebd first Ready

# --- validating: a taken name is refused, at creation and in a dry run
ebd() { # ebd NAME [IMAGE] [LABELS]: the EBD's YAML
  printf 'apiVersion: ebdman.example.com/v1beta1\nkind: EBD\nmetadata:\n  name: %s\n' "$1"
  [[ -n ${3:-} ]] && printf '  labels:\n    %s\n' "$3"
  printf 'spec:\n  vfmTemplate:\n'
  if [[ -n ${2:-} ]]; then printf '    image: %s\n' "$2"; else printf '    replicas: 1\n'; fi
}
for dry in "" --dry-run=server; do
  out=$(ebd taken mine/x:1 | k -n "$ns" create $dry -f - 2>&1) &&
    fail "EBD taken ${dry:-created} was admitted" "a denial" "$out"
  expect_contains "taken ${dry:-(create)}: denied by the validating webhook" \
    "admission webhook \"$vname\" denied the request: VFM $ns/taken exists and is not this EBD's (it has no owner)" "$out"
done
gone "$ns" ebd taken || fail "the refused EBD taken was stored"
out=$(ebd fresh mine/x:1 | k -n "$ns" create --dry-run=server -o jsonpath='{.metadata.uid}' -f - 2>&1) ||
  fail "a dry run of EBD fresh" "admitted" "$out"
gone "$ns" ebd fresh || fail "the dry run of EBD fresh stored it"
pass "a dry run without a conflict is admitted and not stored"
expect_gt "ebdman's validating webhook answered" 2 \
  "$(metric op controller_runtime_webhook_requests_total 'webhook="validate-ebd"' 'code="200"')"
expect_gt "ebdman counted its denials" 1 \
  "$(metric op kcr_webhook_rejections_total 'webhook="validate-ebd"' 'code="403"')"

# --- the reconcile stays authoritative: the webhook skipped, ChildConflict
ebd taken mine/x:1 "ebdman.example.com/webhooks: skip" | k -n "$ns" create -f - >/dev/null
wait_eq 60 "taken (webhook skipped): Installed" "False/ChildConflict/1" \
  cond_summary "$ns" ebd taken Installed

# --- defaulting: the image filled in, the webhook not called when given
m0=$(metric op controller_runtime_webhook_requests_total 'webhook="default-ebd"')
ebd noimage | k -n "$ns" create -f - >/dev/null
expect_eq "noimage: spec.vfmTemplate.image defaulted" "$default_image" \
  "$(jp "$ns" ebd noimage '{.spec.vfmTemplate.image}')"
wait_eq 60 "noimage: Ready" "True/Ready/1" cond_summary "$ns" ebd noimage Ready
expect_eq "noimage: its VFM has the default image" "$default_image" \
  "$(jp "$ns" vfm noimage '{.spec.image}')"
m1=$(metric op controller_runtime_webhook_requests_total 'webhook="default-ebd"')
expect_eq "the defaulting webhook was called once for noimage" 1 $((m1 - m0))
ebd named mine/named:1 | k -n "$ns" create -f - >/dev/null
k -n "$ns" label ebd named color=blue >/dev/null
wait_eq 60 "named: Ready" "True/Ready/1" cond_summary "$ns" ebd named Ready
expect_eq "named: its image kept" mine/named:1 "$(jp "$ns" ebd named '{.spec.vfmTemplate.image}')"
expect_eq "the defaulting webhook was not called for an EBD with an image (create, label, status writes)" \
  "$m1" "$(metric op controller_runtime_webhook_requests_total 'webhook="default-ebd"')"
v=$(metric op controller_runtime_webhook_requests_total 'webhook="validate-ebd"')
k -n "$ns" annotate ebd first touched=yes >/dev/null
k -n "$ns" label ebd noimage color=red >/dev/null
expect_eq "updates and status writes do not call the validating webhook" "$v" \
  "$(metric op controller_runtime_webhook_requests_total 'webhook="validate-ebd"')"

# --- a webhook that does not answer in time, and one that is gone. A policy
# takes effect once the apiserver's informer has seen it, so each check
# retries with a fresh name until the new policy shows.
rej() { api_metric apiserver_admission_webhook_rejection_count "name=\"$1\"" 'error_type="calling_webhook_error"'; }
fo() { api_metric apiserver_admission_webhook_fail_open_count "name=\"$1\""; }
# refused_by WEBHOOK PREFIX [IMAGE]: creating an EBD PREFIX-N fails calling WEBHOOK
refused_by() {
  local out
  out=$(ebd "$2-$RANDOM" "${3:-}" | k -n "$ns" create -f - 2>&1) && { echo "admitted"; return 1; }
  echo "$out"
  [[ $out == *"failed calling webhook \"$1\""* ]]
}
# admitted PREFIX IMAGE: creating an EBD PREFIX-N with IMAGE succeeds
admitted() { ebd "$1-$RANDOM" "$2" | k -n "$ns" create -f - 2>&1; }
# schema_refuses: an EBD without an image is refused by the schema
schema_refuses() {
  local out
  out=$(ebd "slow-$RANDOM" | k -n "$ns" create -f - 2>&1) && { echo "admitted"; return 1; }
  echo "$out"
  [[ $out == *"spec.vfmTemplate.image: Required value"* ]]
}
webhook_policy validatingwebhookconfiguration "$vwc" Fail 2
webhook_policy mutatingwebhookconfiguration "$mwc" Fail 2
r0=$(rej "$mname")
kill -STOP "${E2E_PID[op]}"
wait_for 60 "Fail, ebdman stopped: an EBD without an image is refused (the mutating webhook timed out)" \
  refused_by "$mname" slow
expect_gt "the apiserver counted calling_webhook_errors" 0 $(($(rej "$mname") - r0))
webhook_policy validatingwebhookconfiguration "$vwc" Ignore 2
webhook_policy mutatingwebhookconfiguration "$mwc" Ignore 2
fv0=$(fo "$vname")
wait_for 60 "Ignore, ebdman stopped: an EBD with an image is admitted past the validating webhook" \
  admitted late mine/late:1
expect_gt "the validating webhook failed open" 0 $(($(fo "$vname") - fv0))
fm0=$(fo "$mname")
wait_for 60 "Ignore, ebdman stopped: an EBD without an image is refused by the schema" schema_refuses
expect_gt "the mutating webhook failed open" 0 $(($(fo "$mname") - fm0))
kill -CONT "${E2E_PID[op]}"
webhook_policy mutatingwebhookconfiguration "$mwc" Fail 5
ebd resumed | k -n "$ns" create -f - >/dev/null ||
  fail "EBD resumed refused after ebdman was continued"
expect_eq "resumed: defaulted once ebdman answers again" "$default_image" \
  "$(jp "$ns" ebd resumed '{.spec.vfmTemplate.image}')"
stop_proc op
fv0=$(fo "$vname")
wait_for 30 "Ignore, ebdman gone: admitted" admitted gone mine/x:1
expect_gt "the validating webhook failed open" 0 $(($(fo "$vname") - fv0))
webhook_policy validatingwebhookconfiguration "$vwc" Fail 2
wait_for 30 "Fail, ebdman gone: refused" refused_by "$vname" gone mine/x:1

check_no_forbidden op sim
e2e_done
