#!/usr/bin/env bash
# e2e webhook_rotation (issue #30): ebdman's webhook certificates rotate
# under load without one admission failing.
#
# Two ebdman replicas (--leader-elect) serve the webhooks with the
# certificates they keep in one Secret (--webhook-certs-secret), in a test
# mode with lifetimes in seconds: a serving certificate renewed every 30 s
# and a CA rotated 60 s after it was made, with 10 s of grace at each step
# (KCR_CERTS_LONG=1: 2 min, 4 min, 30 s, and a longer load). The validating
# webhook calls replica op1, the mutating one op2, both failurePolicy Fail,
# so a request fails if either replica serves a certificate the apiserver
# does not trust. Meanwhile dryrun-load creates EBDs with dryRun=All at 100
# per second through the apiserver (each one calls both webhooks; nothing is
# stored). Checks:
# - 0 failed requests, and the apiserver's
#   apiserver_admission_webhook_rejection_count{error_type=
#   "calling_webhook_error"} and apiserver_admission_webhook_fail_open_count
#   unchanged;
# - the load spanned a CA rotation (the signing CA changed, ca.crt held two
#   CAs in between) and serving-certificate renewals (the Secret, polled
#   every second);
# - both replicas serve the Secret's serving certificate (the TLS handshake
#   on their ports), and a replica started after the rotation serves it too.
set -euo pipefail
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh"
e2e_init
[[ -x ${KCR_DRYRUN_LOAD_BIN:-} ]] || fail "KCR_DRYRUN_LOAD_BIN=${KCR_DRYRUN_LOAD_BIN:-} is not an executable"

if [[ ${KCR_CERTS_LONG:-0} == 1 ]]; then
  cert=120s ca=240s grace=30s poll=5s load=360s
else
  cert=45s ca=90s grace=10s poll=3s load=100s
fi
new_ns
ns=$E2E_NS
free_port
p1=$E2E_PORT
free_port
p2=$E2E_PORT
free_port
p3=$E2E_PORT
install_webhooks "$p1" "$p2"
certs=(--webhook-certs-secret "$E2E_CERTS_SECRET" --webhook-ip 127.0.0.1 --leader-elect
  --leader-election-namespace "$E2E_SYSTEM_NS" --webhook-cert-lifetime "$cert"
  --webhook-ca-lifetime "$ca" --webhook-ca-grace "$grace" --webhook-certs-poll "$poll"
  --default-vfm-image registry.example.com/vfm:default --namespace "$ns")
start_ebdman op1 --webhook-bind-address "127.0.0.1:$p1" "${certs[@]}"
start_ebdman op2 --webhook-bind-address "127.0.0.1:$p2" "${certs[@]}"
wait_for 60 "the caBundle of both configurations written" has_bundles
ready() { curl -sf "http://127.0.0.1:${E2E_HEALTH[$1]}/readyz" >/dev/null; }
wait_for 60 "op1 ready" ready op1
wait_for 60 "op2 ready" ready op2

# fingerprints: of the certificate served on a port, and of the Secret's
served() {
  openssl s_client -connect "127.0.0.1:$1" </dev/null 2>/dev/null |
    openssl x509 -noout -fingerprint -sha256 2>/dev/null | cut -d= -f2
}
secret_field() {
  k -n "$E2E_SYSTEM_NS" get secret "$E2E_CERTS_SECRET" -o jsonpath="{.data.$1}" | base64 -d
}
fingerprint() { openssl x509 -noout -fingerprint -sha256 2>/dev/null | cut -d= -f2; }
serving_fp() { secret_field 'tls\.crt' | fingerprint; }
both_serve_the_secrets() {
  local want
  want=$(serving_fp)
  [[ -n $want && $(served "$p1") == "$want" && $(served "$p2") == "$want" ]]
}
wait_for 30 "both replicas serve the Secret's serving certificate" both_serve_the_secrets

rej() { api_metric apiserver_admission_webhook_rejection_count 'error_type="calling_webhook_error"'; }
fo() { api_metric apiserver_admission_webhook_fail_open_count; }
rej0=$(rej)
fo0=$(fo)

# the Secret, every second: signing CA, serving certificate, CAs in ca.crt
# (a read that failed: "-", so the columns stay in place)
monitor() {
  local s c n
  while :; do
    s=$(secret_field 'ca-signing\.crt' | fingerprint) || true
    c=$(serving_fp) || true
    n=$(secret_field 'ca\.crt' | grep -c 'BEGIN CERTIFICATE') || true
    printf '%s %s %s\n' "${s:--}" "${c:--}" "${n:--}"
    sleep 1
  done
}
monitor >"$E2E_TMP/secret.txt" 2>/dev/null &
mon=$!
log "load: 100 dry-run creations per second for $load (lifetimes: certificate $cert, CA $ca, grace $grace)"
rc=0
"$KCR_DRYRUN_LOAD_BIN" --kubeconfig "$KUBECONFIG" --namespace "$ns" --rate 100 \
  --duration "$load" --threads 16 >"$E2E_TMP/load.txt" 2>&1 || rc=$?
kill "$mon" 2>/dev/null || true
wait "$mon" 2>/dev/null || true
log "load: $(head -n 1 "$E2E_TMP/load.txt")"
expect_eq "dryrun-load: failed requests (exit $rc; $(sed -n 2p "$E2E_TMP/load.txt"))" failed=0 \
  "$(head -n 1 "$E2E_TMP/load.txt" | grep -o 'failed=[0-9]*')"
# The generator shares the machine's two cores with the apiserver, etcd and
# both replicas: a request sent more than 100 ms after its time is "late";
# the rate counts as kept while fewer than a tenth are.
late=$(head -n 1 "$E2E_TMP/load.txt" | grep -o 'late=[0-9]*' | cut -d= -f2)
sent=$(head -n 1 "$E2E_TMP/load.txt" | grep -o 'sent=[0-9]*' | cut -d= -f2)
((late * 10 < sent)) || fail "dryrun-load kept the rate" "fewer than a tenth late" "$late of $sent"
pass "dryrun-load kept the rate: $late of $sent requests late"
expect_eq "apiserver: calling_webhook_error rejections during the load" 0 $(($(rej) - rej0))
expect_eq "apiserver: fail-open admissions during the load" 0 $(($(fo) - fo0))

signing=$(awk '$1 != "-" { print $1 }' "$E2E_TMP/secret.txt" | sort -u | wc -l)
serving=$(awk '$2 != "-" { print $2 }' "$E2E_TMP/secret.txt" | sort -u | wc -l)
two=$(awk '$3 == 2' "$E2E_TMP/secret.txt" | wc -l)
log "during the load: $signing signing CA(s), $serving serving certificate(s), ca.crt held two CAs for $two s"
expect_gt "signing CAs seen during the load (a CA rotation)" 1 "$signing"
expect_gt "seconds in which ca.crt held both CAs" 0 "$two"
expect_gt "serving certificates seen during the load (renewals and the promotion)" 2 "$serving"
expect_gt "webhook requests op1 answered" 1000 \
  "$(metric op1 controller_runtime_webhook_requests_total 'webhook="validate-ebd"')"
expect_gt "webhook requests op2 answered" 1000 \
  "$(metric op2 controller_runtime_webhook_requests_total 'webhook="default-ebd"')"

# after the rotation: every replica serves the Secret's certificate, also
# one started now
wait_for 30 "both replicas serve the Secret's serving certificate" both_serve_the_secrets
start_ebdman op3 --webhook-bind-address "127.0.0.1:$p3" "${certs[@]}"
wait_for 60 "op3 ready" ready op3
op3_serves_the_secrets() { [[ $(served "$p3") == "$(serving_fp)" ]]; }
wait_for 30 "op3, started after the rotation, serves the Secret's certificate" op3_serves_the_secrets
check_no_forbidden op1 op2 op3
e2e_done
