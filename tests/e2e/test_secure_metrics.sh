#!/usr/bin/env bash
# e2e secure_metrics: ebdman with --metrics-secure (its default), under the
# RBAC exactly as shipped (config/rbac: metrics-auth-role for the operator,
# metrics-reader for scrapers):
# - the metrics port speaks HTTPS only, with a self-signed certificate;
# - /metrics without a token and with a garbage token: 401; with the token
#   of a ServiceAccount not bound to ebdman-metrics-reader: 403; bound: 200
#   and the metrics;
# - the probes stay plain HTTP on their own port, which serves no /metrics
#   (and the metrics port nothing else);
# - with --metrics-cert-path the given certificate is served (verifiable
#   with it as the CA), a missing one is refused at start-up naming it;
# - the operator's TokenReviews and SubjectAccessReviews are not refused by
#   RBAC (no "forbidden" in its log).
set -euo pipefail
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh"
e2e_init

new_ns
ns=$E2E_NS
start_ebdman op --namespace "$ns" --metrics-secure=true
mport=${E2E_METRICS[op]} hport=${E2E_HEALTH[op]}

# Scrapers: two ServiceAccounts, one bound to the shipped metrics-reader role.
k -n "$ns" create serviceaccount reader >/dev/null
k -n "$ns" create serviceaccount stranger >/dev/null
crb=$ns-metrics-reader
k create clusterrolebinding "$crb" --clusterrole=ebdman-metrics-reader \
  --serviceaccount="$ns:reader" >/dev/null
reader=$(k -n "$ns" create token reader --duration=10m)
stranger=$(k -n "$ns" create token stranger --duration=10m)
# RBAC reaches the authorizer through an informer: wait until it allows the
# reader (a denial would be cached by ebdman for 30 s).
wait_eq 30 "the reader may get /metrics" yes \
  k auth can-i get /metrics --as "system:serviceaccount:$ns:reader"

# code URL [TOKEN] [CURL ARGS...]: the HTTP status of a GET (000: no answer).
code() {
  local url=$1 tok=${2:-}
  shift 2 || shift $#
  curl -s -o /dev/null -w '%{http_code}' --max-time 10 \
    ${tok:+-H "Authorization: Bearer $tok"} "$@" "$url" || true
}
murl=https://127.0.0.1:$mport/metrics
expect_eq "/metrics without a token" 401 "$(code "$murl" "" -k)"
expect_eq "/metrics with a garbage token" 401 "$(code "$murl" garbage -k)"
expect_eq "/metrics as a ServiceAccount without the metrics-reader role" 403 \
  "$(code "$murl" "$stranger" -k)"
expect_eq "/metrics as the metrics-reader" 200 "$(code "$murl" "$reader" -k)"
body=$(curl -sfk --max-time 10 -H "Authorization: Bearer $reader" "$murl")
expect_contains "the metrics-reader gets the metrics" \
  "# TYPE controller_runtime_reconcile_total counter" "$body"
expect_eq "plain HTTP on the metrics port" 000 \
  "$(code "http://127.0.0.1:$mport/metrics" "$reader")"
expect_eq "the certificate is self-signed (verification fails)" 000 \
  "$(code "$murl" "$reader")"

expect_eq "no probes on the metrics port" 404 \
  "$(code "https://127.0.0.1:$mport/readyz" "$reader" -k)"
expect_eq "/readyz: plain HTTP on the health port" 200 \
  "$(code "http://127.0.0.1:$hport/readyz")"
expect_eq "/healthz: plain HTTP on the health port" 200 \
  "$(code "http://127.0.0.1:$hport/healthz")"
expect_eq "no /metrics on the health port" 404 \
  "$(code "http://127.0.0.1:$hport/metrics" "$reader")"

# A given certificate: served, and verifiable with it as the CA.
certs=$E2E_TMP/certs
mkdir -p "$certs"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 \
  -subj /CN=localhost -addext subjectAltName=IP:127.0.0.1 \
  -keyout "$certs/key.pem" -out "$certs/cert.pem" 2>/dev/null ||
  fail "openssl could not make a test certificate"
start_ebdman op2 --namespace "$ns" --metrics-secure=true --metrics-cert-path "$certs" \
  --metrics-cert-name cert.pem --metrics-cert-key key.pem
expect_eq "/metrics over the given certificate, verified" 200 \
  "$(code "https://127.0.0.1:${E2E_METRICS[op2]}/metrics" "$reader" \
    --cacert "$certs/cert.pem")"
stop_proc op2
out=$("$KCR_EBDMAN_BIN" run --kubeconfig "$E2E_SA_KUBECONFIG" --namespace "$ns" \
  --metrics-bind-address 127.0.0.1:0 --health-probe-bind-address 127.0.0.1:0 \
  --metrics-cert-path "$certs/none" 2>&1) && rc=0 || rc=$?
expect_ne "a missing certificate: ebdman refuses to start" 0 "$rc"
expect_contains "the message names the file" "$certs/none/tls.crt" "$out"

check_no_forbidden op
k delete clusterrolebinding "$crb" >/dev/null
e2e_done
