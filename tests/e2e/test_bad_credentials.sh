#!/usr/bin/env bash
# e2e bad_credentials (issue #10, scenario 8): ebdman with credentials or a
# server it cannot use. Five cases, side by side, each with its own ebdman
# and (but the last) its own chaosproxy (tests/chaos) with no fault rules,
# used only to count the requests:
#   wrong_ca  the kubeconfig trusts another CA: TLS fails at the handshake
#   expired   a client certificate (O=system:masters) that expired in 2020,
#             signed by the cluster's CA: 401 from the apiserver (the proxy
#             presents a copy with the same subject and validity)
#   revoked   the token of a ServiceAccount that was deleted: 401
#   no_rbac   the token of a ServiceAccount without any RBAC: 403
#   absent    a server where nothing listens: connection refused
# For each, over a fixed window W after ebdman starts:
# - one clear error: the log has at least one and at most one warning per
#   informer (3), each naming the problem;
# - /readyz is false (500, "informer ... has not synced", or "has not read
#   its CustomResourceDefinition ... yet" for the EBD and VFM caches, whose
#   lists wait for their CRDs' - so 3 informers list: the CRDs' two and
#   the ConfigMaps') while /healthz is
#   true: the process is up, waiting, and says why it is not ready;
# - bounded retries with backoff, no storm: the requests counted (by the
#   proxy: requests or refused handshakes; for `absent`, ebdman's own
#   rest_client_requests_total{code="<error>"}) are at most
#   3 informers x A(W) x R, where A(W) is the most LIST attempts the
#   reflector backoff allows in W - 1 + the largest k whose first k waits
#   fit in W, each wait at its least: min(0.8 s x 2^i, 30 s) (the waits
#   are 0.8 s, 1.6 s, 3.2 s ... up to the 30 s cap, each stretched by a
#   jitter of up to 2x, never shortened, never past the cap) - and R the
#   requests per attempt (1); and at least 3 informers x a(W), a(W) the
#   fewest: 1 + the largest k whose first k waits at their most, min(1.6 s
#   x 2^i, 30 s), plus 2 s each for the request, fit in W - so the backoff
#   is not a stall either, and stops growing at its cap.
# Short form: W = 15 s (5 attempts at most, 3 at least, per informer).
# Then SIGTERM: ebdman exits 0 (it was waiting for its caches, not failing).
# KCR_CHAOS_LONG=1: W = 110 s, past the backoff's 30 s cap (8 attempts at
# most, 7 at least); then, at the manager's 120 s cache-sync timeout (as
# controller-runtime's), each ebdman exits 1 by itself with one error
# saying which informer did not sync and what to check.
set -euo pipefail
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh"
e2e_init

long=0
[[ ${KCR_CHAOS_LONG:-0} == 1 ]] && long=1
if ((long)); then window_ms=110000; else window_ms=15000; fi
informers=3
new_ns
ns=$E2E_NS
pki=$KCR_CONTROLPLANE_DIR/pki

# ---- the bad credentials ----------------------------------------------------

# kubeconfig FILE SERVER CA USER-YAML: a kubeconfig with one user stanza.
kubeconfig() {
  cat >"$1" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: c
  cluster:
    server: $2
    certificate-authority: $3
users:
- name: u
  user:
$4
contexts:
- name: c
  context: {cluster: c, user: u, namespace: $ns}
current-context: c
EOF
}

ossl() { openssl "$@" >>"$E2E_TMP/openssl.log" 2>&1 || fail "openssl $1 failed (see $E2E_TMP/openssl.log)"; }

# Another CA, which signed nothing the cluster uses.
ossl req -x509 -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 \
  -subj /CN=not-the-cluster-ca -keyout "$E2E_TMP/other-ca.key" -out "$E2E_TMP/other-ca.crt"

# A client certificate from the cluster's CA, valid for one day in 2020.
exp=$E2E_TMP/expired
mkdir -p "$exp/new"
: >"$exp/index.txt"
echo 01 >"$exp/serial"
cat >"$exp/ca.cnf" <<EOF
[ca]
default_ca = dflt
[dflt]
database = $exp/index.txt
new_certs_dir = $exp/new
serial = $exp/serial
default_md = sha256
policy = any
x509_extensions = client
unique_subject = no
[any]
commonName = supplied
organizationName = optional
[client]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature, keyEncipherment
extendedKeyUsage = clientAuth
EOF
ossl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
  -subj "/O=system:masters/CN=kcr-expired" -keyout "$exp/client.key" -out "$exp/client.csr"
ossl ca -batch -notext -config "$exp/ca.cnf" -cert "$pki/ca.crt" -keyfile "$pki/ca.key" \
  -startdate 20200101000000Z -enddate 20200102000000Z -in "$exp/client.csr" -out "$exp/client.crt"
expect_match "the expired certificate's end date" "notAfter=Jan  2 00:00:00 2020 GMT" \
  "$(openssl x509 -in "$exp/client.crt" -noout -enddate)"

# Tokens: of a ServiceAccount deleted afterwards, and of one without RBAC.
k -n "$ns" create serviceaccount revoked >/dev/null
k -n "$ns" create serviceaccount nobody >/dev/null
revoked_token=$(k -n "$ns" create token revoked --duration=1h)
nobody_token=$(k -n "$ns" create token nobody --duration=1h)
k -n "$ns" delete serviceaccount revoked --wait >/dev/null
kubeconfig "$E2E_TMP/revoked-direct.kubeconfig" "$KCR_APISERVER_URL" "$pki/ca.crt" \
  "    token: $revoked_token"
refused() { # the apiserver answers 401 to the token
  local out
  out=$(k --kubeconfig "$E2E_TMP/revoked-direct.kubeconfig" auth whoami 2>&1) && return 1
  [[ $out == *Unauthorized* ]] || { echo "$out"; return 1; }
}
wait_for 30 "the deleted ServiceAccount's token is refused" refused

# ---- running the cases -------------------------------------------------------

declare -A T0=() WANT=() COUNT0=()
cases=(wrong_ca expired revoked no_rbac absent)
for c in "${cases[@]}"; do
  [[ $c == absent ]] || start_chaosproxy "px_$c"
done
free_port
absent_url=https://127.0.0.1:$E2E_PORT # nothing listens there
via() { echo "https://127.0.0.1:${E2E_PROXY_PORT[px_$1]}"; }
kubeconfig "$E2E_TMP/wrong_ca.kubeconfig" "$(via wrong_ca)" "$E2E_TMP/other-ca.crt" \
  "    token: $nobody_token"
kubeconfig "$E2E_TMP/expired.kubeconfig" "$(via expired)" "$pki/ca.crt" \
  "    client-certificate: $exp/client.crt
    client-key: $exp/client.key"
kubeconfig "$E2E_TMP/revoked.kubeconfig" "$(via revoked)" "$pki/ca.crt" \
  "    token: $revoked_token"
kubeconfig "$E2E_TMP/no_rbac.kubeconfig" "$(via no_rbac)" "$pki/ca.crt" \
  "    token: $nobody_token"
kubeconfig "$E2E_TMP/absent.kubeconfig" "$absent_url" "$pki/ca.crt" "    token: $nobody_token"

# What each case's warnings must say (extended regex).
WANT[wrong_ca]='certificate'
WANT[expired]='Unauthorized.*kubeconfig=.*expired client certificate'
WANT[revoked]='Unauthorized.*kubeconfig=.*ServiceAccount was deleted'
# (a cache's list is a streaming list: a watch, so "cannot watch")
WANT[no_rbac]='forbidden.*cannot (list|watch) resource'
WANT[absent]='[Cc]onnect'

# requests CASE: what the case has sent so far.
requests() {
  case $1 in
    wrong_ca) metric px_wrong_ca chaosproxy_connections_total 'result="tls_failed"' ;;
    absent) metric absent rest_client_requests_total 'code="<error>"' ;;
    *) metric "px_$1" chaosproxy_requests_total 'agent="ebdman"' ;;
  esac
}

now_ms() { local t=${EPOCHREALTIME/./}; echo $((t / 1000)); }

# start_unready LABEL KUBECONFIG: ebdman, waiting only for /healthz (it can
# never be ready).
start_unready() {
  local label=$1 i
  free_port; E2E_METRICS[$label]=$E2E_PORT
  free_port; E2E_HEALTH[$label]=$E2E_PORT
  E2E_LOG[$label]=$E2E_TMP/$label.log
  E2E_KIND[$label]=ebdman
  E2E_PROCS+=("$label")
  T0[$label]=$(now_ms)
  "$KCR_EBDMAN_BIN" run --kubeconfig "$2" --namespace "$ns" \
    --metrics-bind-address "127.0.0.1:${E2E_METRICS[$label]}" \
    --health-probe-bind-address "127.0.0.1:${E2E_HEALTH[$label]}" --metrics-secure=false \
    >>"${E2E_LOG[$label]}" 2>&1 &
  E2E_PID[$label]=$!
  for ((i = 0; i < 100; i++)); do
    curl -sf -o /dev/null --max-time 2 "http://127.0.0.1:${E2E_HEALTH[$label]}/healthz" && return 0
    proc_alive "$label" || fail "ebdman $label exited at start-up (log: ${E2E_LOG[$label]})"
    sleep 0.1
  done
  fail "ebdman $label: no /healthz within 10 s"
}

for c in "${cases[@]}"; do
  [[ $c == absent ]] && COUNT0[$c]=0 || COUNT0[$c]=$(requests "$c")
  start_unready "$c" "$E2E_TMP/$c.kubeconfig"
done

# attempts MS FIRST SLACK: 1 + how many waits of the reflector backoff fit
# in MS, the i-th (from 0) taken as min(FIRST x 2^i, 30000) + SLACK ms.
attempts() {
  local k=0 sum=0 d=$2
  while :; do
    ((d > 30000)) && d=30000
    ((sum + d + $3 <= $1)) || break
    sum=$((sum + d + $3)) k=$((k + 1)) d=$((d * 2))
  done
  echo $((k + 1))
}
# The most LIST attempts one informer's backoff allows in MS (waits at their
# least), and the fewest (waits at their most, and 2 s per request).
max_attempts() { attempts "$1" 800 0; }
min_attempts() { attempts "$1" 1600 2000; }

for c in "${cases[@]}"; do
  # A fixed window: this is a measurement, not a wait for a condition.
  while (($(now_ms) < T0[$c] + window_ms)); do sleep 0.1; done
  n=$(($(requests "$c") - COUNT0[$c]))
  elapsed=$(($(now_ms) - T0[$c]))
  hi=$((informers * $(max_attempts "$elapsed")))
  lo=$((informers * $(min_attempts "$elapsed")))
  log "numbers: $c: $n requests in $elapsed ms (bound $lo..$hi)"
  if ((n < lo || n > hi)); then
    fail "$c: requests in $elapsed ms" "between $lo and $hi (3 informers x the backoff's attempts)" "$n"
  fi
  pass "$c: $n requests in $elapsed ms, within $lo..$hi"
  code=$(curl -s -o "$E2E_TMP/$c.readyz" -w '%{http_code}' --max-time 5 \
    "http://127.0.0.1:${E2E_HEALTH[$c]}/readyz")
  expect_eq "$c: /readyz" 500 "$code"
  # (the EBD and VFM caches wait for their CRDs, which cannot be read)
  expect_match "$c: /readyz says why" \
    'informer .* has not (synced|read its CustomResourceDefinition .* yet)' \
    "$(cat "$E2E_TMP/$c.readyz")"
  expect_eq "$c: /healthz" 200 "$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 \
    "http://127.0.0.1:${E2E_HEALTH[$c]}/healthz")"
  grep -E 'level=(warn|error)' "${E2E_LOG[$c]}" >"$E2E_TMP/$c.warnings" || true
  nw=$(grep -c . "$E2E_TMP/$c.warnings" || true)
  sed 's/^/    /' "$E2E_TMP/$c.warnings" | cut -c1-400
  if ((nw < 1 || nw > informers)); then
    fail "$c: warnings in the log" "1..$informers (one per informer)" "$nw"
  fi
  if grep -vqE "${WANT[$c]}" "$E2E_TMP/$c.warnings"; then
    fail "$c: every warning names the problem" "/${WANT[$c]}/ in each" "the lines above"
  fi
  pass "$c: $nw warning(s), each naming the problem (/${WANT[$c]}/)"
done
# The wrong-CA client never got past TLS: no request reached the proxy.
expect_eq "wrong_ca: requests read by its proxy" 0 \
  "$(metric px_wrong_ca chaosproxy_requests_total 'agent="ebdman"')"

# Long form: the manager gives up at its cache-sync timeout, as
# controller-runtime's does (then the kubelet restarts the pod, with its own
# backoff): exit 1 and one error naming the informer.
if ((long)); then
  exited() { ! proc_alive "$1"; }
  for c in "${cases[@]}"; do
    wait_for 60 "ebdman $c exits at the cache-sync timeout" exited "$c"
    rc=0
    wait "${E2E_PID[$c]}" 2>/dev/null || rc=$?
    E2E_PID[$c]=
    log "numbers: $c: exited $(($(now_ms) - T0[$c])) ms after start"
    expect_eq "ebdman $c: exit status at the cache-sync timeout" 1 "$rc"
    nerr=$(grep -c 'level=error msg="manager: timed out waiting for caches to sync' "${E2E_LOG[$c]}" || true)
    expect_eq "ebdman $c: errors saying the caches did not sync" 1 "$nerr"
  done
fi
e2e_done
