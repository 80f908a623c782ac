#!/usr/bin/env bash
# e2e cli: ebdman's command line. --help everywhere and `version` exit 0;
# bad flags, bad values, unknown commands and an unreadable kubeconfig exit 2
# with one clear line on stderr naming the flag, the value and what is
# wanted; ebdman, vfm-sim, hello and kcr-watch (kcr/cli.h) spell the shared
# flags the same way - controller-runtime's names - and refuse the old ones
# naming the new; a bad or busy metrics/health address fails before
# anything starts; `ebdman status --namespace NS` prints an aligned table
# (NAME READY REASON ... columns) of the namespace's EBDs with their
# conditions, and without --namespace a NAMESPACE column; a message carrying
# terminal escape sequences (an EBD author writes it through vfm-sim's fail
# annotation) prints escaped, never as control characters; kcr-watch
# --label prints a label whose key has dots and a slash.
set -euo pipefail
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh"
e2e_init
for v in KCR_HELLO_BIN KCR_WATCH_BIN; do # (from tests/CMakeLists.txt, as the others)
  [[ -x ${!v:-} ]] || fail "$v=${!v:-} is not an executable"
done

# cli ARGS...: runs ebdman (30 s at most); sets CLI_RC, CLI_OUT, CLI_ERR, CLI_ERR_LINES.
# CLI_BIN=PATH cli ...: runs another program.
cli() {
  CLI_RC=0
  timeout 30 env -u KUBERNETES_SERVICE_HOST "${CLI_BIN:-$KCR_EBDMAN_BIN}" "$@" \
    >"$E2E_TMP/cli.out" 2>"$E2E_TMP/cli.err" || CLI_RC=$?
  CLI_OUT=$(cat "$E2E_TMP/cli.out")
  CLI_ERR=$(cat "$E2E_TMP/cli.err")
  CLI_ERR_LINES=$(grep -c '' "$E2E_TMP/cli.err" || true)
}

# expect_ok WHAT OUTPUT-SUBSTRING ARGS...
expect_ok() {
  local what=$1 want=$2
  shift 2
  cli "$@"
  expect_eq "ebdman $*: exit status" 0 "$CLI_RC"
  expect_contains "ebdman $*: stdout" "$want" "$CLI_OUT"
  expect_eq "ebdman $*: stderr" "" "$CLI_ERR"
}

# expect_usage_error SUBSTRING ARGS...: exit 2, one line on stderr naming SUBSTRING.
expect_usage_error() {
  local want=$1
  shift
  cli "$@"
  expect_eq "ebdman $*: exit status" 2 "$CLI_RC"
  expect_eq "ebdman $*: lines on stderr" 1 "$CLI_ERR_LINES"
  expect_contains "ebdman $*: stderr" "$want" "$CLI_ERR"
  expect_eq "ebdman $*: stdout" "" "$CLI_OUT"
}

# --- help and version
expect_ok help "usage: ebdman" --help
for c in run status demo version; do
  expect_contains "ebdman --help lists the command" "  $c " "$CLI_OUT"
done
expect_ok help "usage: ebdman" -h
expect_ok help "usage: ebdman run" run --help
# The flags every manager program shares, with controller-runtime's names.
manager_flags=(--kubeconfig --metrics-bind-address --metrics-secure --metrics-cert-path
  --metrics-cert-name --metrics-cert-key --webhook-bind-address --webhook-cert-path
  --webhook-cert-name --webhook-cert-key --health-probe-bind-address --leader-elect
  --leader-election-id --leader-election-namespace --leader-elect-lease-duration
  --leader-elect-renew-deadline --leader-elect-retry-period --ring --ring-identity --zap-log-level
  --zap-encoder)
for f in "${manager_flags[@]}" --namespace --namespace-selector --workers --resync \
  --graceful-shutdown-timeout; do
  expect_contains "ebdman run --help documents the flag" "  $f " "$CLI_OUT"
done
expect_ok help "usage: ebdman status" status --help
expect_ok help "usage: ebdman demo" demo --help
expect_ok help "usage: ebdman version" version --help
cli version
expect_eq "ebdman version: exit status" 0 "$CLI_RC"
expect_match "ebdman version: stdout" '^ebdman [0-9]+\.[0-9]+\.[0-9]+' "$CLI_OUT"

# --- bad usage: exit 2, one line
expect_usage_error '--workers: "zero" is not valid: want a number from 1 to 256' run --workers zero
expect_usage_error '--workers: "0" is not valid: want a number from 1 to 256' run --workers 0
expect_usage_error '--workers: "257" is not valid' run --workers=257
expect_usage_error "unknown flag --bogus" run --bogus
expect_usage_error '--resync: "forever" is not valid: want a duration' run --resync forever
expect_usage_error '--zap-log-level: "loud" is not valid: want debug, info, warn or error' \
  run --zap-log-level loud
expect_usage_error '--zap-encoder: "kv" is not valid: want console or json' run --zap-encoder=kv
expect_usage_error '--leader-elect: "maybe" is not valid: want true or false' \
  run --leader-elect=maybe
expect_usage_error 'unexpected argument "false"' run --leader-elect false
expect_usage_error '--leader-elect-lease-duration: "0" is not valid' \
  run --leader-elect-lease-duration 0
expect_usage_error "--namespace: missing value" run --namespace
expect_usage_error "--namespace: missing value" run --namespace --leader-elect
expect_usage_error 'unexpected argument "extra"' run extra
expect_usage_error "--namespace and --namespace-selector exclude each other" \
  run --namespace a --namespace b --namespace-selector team=a
many=()
for i in $(seq 65); do many+=(--namespace "n$i"); done
expect_usage_error '--namespace: "n65" is not valid: want a non-empty value, given at most 64 times' \
  run "${many[@]}"
expect_usage_error "--default-vfm-image needs --webhook-bind-address" \
  run --default-vfm-image x:1
expect_usage_error "--webhook-certs-secret needs --webhook-bind-address" \
  run --webhook-certs-secret s --webhook-service svc
expect_usage_error "--webhook-certs-secret needs --webhook-service or --webhook-ip" \
  run --webhook-certs-secret s --webhook-bind-address :0
expect_usage_error "--webhook-certs-secret and --webhook-cert-path exclude each other" \
  run --webhook-certs-secret s --webhook-ip 127.0.0.1 --webhook-bind-address :0 \
  --webhook-cert-path /tmp
expect_usage_error "nosuch" nosuch
expect_usage_error "unknown flag --bogus" status --bogus
expect_usage_error "unknown flag -n (did you mean --namespace?)" status -n x
expect_usage_error 'unexpected argument "x"' version x
expect_usage_error "unknown flag --bogus" demo --bogus
# The old names are gone, and the message names the new one.
expect_usage_error "unknown flag --log-level (did you mean --zap-log-level?)" \
  run --log-level debug
expect_usage_error "unknown flag --log-format" run --log-format json
expect_usage_error "/nonexistent" status --kubeconfig /nonexistent
# `run` logs "ebdman starting" (a log record, ts=...) before it loads the
# config; besides log records, one line naming the file.
cli run --kubeconfig /nonexistent
expect_eq "ebdman run --kubeconfig /nonexistent: exit status" 2 "$CLI_RC"
errline=$(grep -v '^ts=' "$E2E_TMP/cli.err" || true)
expect_eq "ebdman run --kubeconfig /nonexistent: stderr lines other than log records" 1 \
  "$(printf '%s' "$errline" | grep -c '' || true)"
expect_contains "ebdman run --kubeconfig /nonexistent: stderr" "/nonexistent" "$errline"
cli
expect_eq "ebdman (no command): exit status" 2 "$CLI_RC"

# A bad or busy metrics/health address is refused before anything starts
# (issue 8, item 9): exit 2 with the address in the message, no informer
# started, and no "signal received" line (there was no signal).
api_port=${KCR_APISERVER_URL##*:}
for args in "--metrics-bind-address 127.0.0.1:99999" \
  "--metrics-bind-address no-such-host.invalid:8080" \
  "--health-probe-bind-address 127.0.0.1:$api_port"; do
  # shellcheck disable=SC2086 # two words on purpose
  cli run $args
  addr=${args#* }
  expect_eq "ebdman run $args: exit status" 2 "$CLI_RC"
  expect_contains "ebdman run $args: stderr" "$addr" "$CLI_ERR"
  expect_eq "ebdman run $args: informer or signal lines" 0 \
    "$(grep -cE 'informer|caches synced|signal received' "$E2E_TMP/cli.err" || true)"
done
expect_contains "ebdman run on a busy port: stderr" "in use" "$CLI_ERR"

# --- one name for one setting in every program
# vfm-sim and hello run a manager: the same flags as ebdman run. kcr-watch
# only talks to the API server: --kubeconfig, --namespace and the log flags.
for prog in "$KCR_VFMSIM_BIN" "$KCR_HELLO_BIN"; do
  name=$(basename "$prog")
  CLI_BIN=$prog cli --help
  expect_eq "$name --help: exit status" 0 "$CLI_RC"
  for f in "${manager_flags[@]}" --namespace --workers; do
    expect_contains "$name --help documents the flag" "  $f " "$CLI_OUT"
  done
  CLI_BIN=$prog cli --workers 0
  expect_eq "$name --workers 0: exit status" 2 "$CLI_RC"
  expect_contains "$name --workers 0: stderr" "$name: --workers: \"0\" is not valid: want a number from 1 to" "$CLI_ERR"
  CLI_BIN=$prog cli --log-level debug
  expect_eq "$name --log-level: exit status" 2 "$CLI_RC"
  expect_contains "$name --log-level: stderr" "(did you mean --zap-log-level?)" "$CLI_ERR"
done
CLI_BIN=$KCR_HELLO_BIN cli --lease-duration 4s
expect_contains "hello --lease-duration: stderr" \
  "unknown flag --lease-duration (did you mean --leader-elect-lease-duration?)" "$CLI_ERR"
CLI_BIN=$KCR_WATCH_BIN cli --help
expect_eq "kcr-watch --help: exit status" 0 "$CLI_RC"
expect_contains "kcr-watch --help: usage" "usage: kcr-watch [flags] [RESOURCE]" "$CLI_OUT"
for f in --kubeconfig --namespace --zap-log-level --zap-encoder; do
  expect_contains "kcr-watch --help documents the flag" "  $f " "$CLI_OUT"
done
CLI_BIN=$KCR_WATCH_BIN cli configmaps secrets
expect_eq "kcr-watch with two resources: exit status" 2 "$CLI_RC"
expect_contains "kcr-watch with two resources: stderr" 'unexpected argument "secrets"' "$CLI_ERR"
CLI_BIN=$KCR_WATCH_BIN cli --for=0
expect_contains "kcr-watch --for=0: stderr" '--for: "0" is not valid' "$CLI_ERR"

# --- status: an aligned table of the namespace's EBDs
new_ns
ns=$E2E_NS

# kcr-watch --label KEY prints that label: a key with dots and a slash is
# one member (the path is built with kcr_json_ptr_append).
k -n "$ns" create configmap labelled >/dev/null
k -n "$ns" label configmap labelled app.kubernetes.io/name=web >/dev/null
CLI_BIN=$KCR_WATCH_BIN cli --namespace "$ns" --for=1s --label app.kubernetes.io/name
expect_contains "kcr-watch --label app.kubernetes.io/name" \
  "$ns/labelled rv=" "$CLI_OUT"
expect_contains "kcr-watch --label app.kubernetes.io/name: the value" \
  " app.kubernetes.io/name=web" "$CLI_OUT"
k -n "$ns" delete configmap labelled >/dev/null
start_vfm_sim sim --namespace "$ns" --delay 200ms --zap-log-level=debug --zap-encoder json
start_ebdman op --namespace "$ns"
{
  ebd_yaml alpha registry.example.com/vfm:1.0 1
  ebd_yaml beta-with-a-longer-name registry.example.com/vfm:1.0 2 \
    vfm-sim.ebdman.example.com/fail "disk on fire"
} | k -n "$ns" apply -f - >/dev/null
wait_eq 60 "alpha: Ready" "True/Ready/1" cond_summary "$ns" ebd alpha Ready
wait_eq 60 "beta-with-a-longer-name: Ready" "False/Error/1" \
  cond_summary "$ns" ebd beta-with-a-longer-name Ready

# vfm-sim was started with --zap-encoder json --zap-log-level=debug: every
# record is JSON, and debug records are there.
simlog=$(grep -v '^-----' "${E2E_LOG[sim]}" || true)
expect_eq "vfm-sim --zap-encoder json: lines that are not JSON records" 0 \
  "$(printf '%s\n' "$simlog" | grep -vc '^{"ts":' || true)"
expect_contains "vfm-sim --zap-log-level=debug: debug records" '"level":"debug","msg":"informer: listed"' \
  "$simlog"

# aligned FILE COLUMNS...: every row has each column's text starting exactly
# where its header does (the header words found in the first line).
aligned() {
  awk -v cols="$2" '
    NR == 1 {
      n = split(cols, C, " ")
      for (i = 1; i <= n; i++) {
        S[i] = index($0, C[i])
        if (!S[i]) { print "no column " C[i] " in the header: " $0; bad = 1; exit }
      }
      next
    }
    {
      for (i = 1; i <= n; i++)
        if (substr($0, S[i], 1) == " " || (S[i] > 1 && substr($0, S[i] - 1, 1) != " ")) {
          printf "row %d, column %s (at %d) not aligned: %s\n", NR, C[i], S[i], $0; bad = 1
        }
    }
    END { exit bad }' "$1"
}

cli status --namespace "$ns"
expect_eq "ebdman status --namespace NS: exit status" 0 "$CLI_RC"
expect_eq "ebdman status --namespace NS: stderr" "" "$CLI_ERR"
printf '%s\n' "$CLI_OUT" | sed 's/^/  | /'
printf '%s\n' "$CLI_OUT" >"$E2E_TMP/status.txt"
expect_match "ebdman status --namespace NS: header" '^NAME +READY +REASON ' "$(head -n 1 "$E2E_TMP/status.txt")"
expect_eq "ebdman status --namespace NS: rows" 3 "$(grep -c '' "$E2E_TMP/status.txt")"
if ! out=$(aligned "$E2E_TMP/status.txt" "NAME READY REASON INSTALLED VFM GEN/OBS AGE MESSAGE"); then
  fail "ebdman status --namespace NS: an aligned table" "every column aligned with its header" "$out"
fi
pass "ebdman status --namespace NS: columns aligned"
expect_eq "ebdman status --namespace NS: alpha's NAME READY REASON INSTALLED VFM GEN/OBS" \
  "alpha True Ready True True 1/1" "$(awk '$1 == "alpha" { print $1, $2, $3, $4, $5, $6 }' "$E2E_TMP/status.txt")"
expect_eq "ebdman status --namespace NS: beta's NAME READY REASON INSTALLED VFM GEN/OBS" \
  "beta-with-a-longer-name False Error True False 1/1" \
  "$(awk '$1 == "beta-with-a-longer-name" { print $1, $2, $3, $4, $5, $6 }' "$E2E_TMP/status.txt")"
expect_contains "ebdman status --namespace NS: beta's message" "disk on fire" \
  "$(grep '^beta-with-a-longer-name ' "$E2E_TMP/status.txt")"

cli status
expect_eq "ebdman status (all namespaces): exit status" 0 "$CLI_RC"
printf '%s\n' "$CLI_OUT" >"$E2E_TMP/status-all.txt"
expect_match "ebdman status (all namespaces): header" '^NAMESPACE +NAME +READY +REASON ' \
  "$(head -n 1 "$E2E_TMP/status-all.txt")"
expect_eq "ebdman status (all namespaces): alpha's row" "$ns alpha True Ready" \
  "$(awk -v ns="$ns" '$1 == ns && $2 == "alpha" { print $1, $2, $3, $4 }' "$E2E_TMP/status-all.txt")"
if ! out=$(aligned "$E2E_TMP/status-all.txt" "NAMESPACE NAME READY REASON INSTALLED VFM GEN/OBS AGE MESSAGE"); then
  fail "ebdman status (all namespaces): an aligned table" "every column aligned with its header" "$out"
fi
pass "ebdman status (all namespaces): columns aligned"

# status works under the operator's own (least-privilege) ServiceAccount too.
cli status --namespace="$ns" --kubeconfig "$E2E_SA_KUBECONFIG"
expect_eq "ebdman status under the ServiceAccount: exit status" 0 "$CLI_RC"
expect_eq "ebdman status under the ServiceAccount: rows" 3 "$(printf '%s\n' "$CLI_OUT" | grep -c '')"

# --- status: a hostile message prints escaped
# YAML double-quoted escapes: \e is ESC, \a BEL, \r CR. The message clears
# the screen (ESC [ 2 J), writes the clipboard (OSC 52 ... BEL) and hides
# what precedes it (CR), on a terminal that gets it raw.
ebd_yaml hostile registry.example.com/vfm:1.0 1 vfm-sim.ebdman.example.com/fail \
  'boom\e[2J\e]52;c;aGk=\a\rAll good' | k -n "$ns" apply -f - >/dev/null
wait_eq 60 "hostile: Ready" "False/Error/1" cond_summary "$ns" ebd hostile Ready
# (Compared and shown in printf %q form: the test log must not act on a
# terminal either.)
expect_eq "hostile: the Ready message holds the raw control characters (%q)" \
  "$(printf '%q' $'boom\e[2J\e]52;c;aGk=\a\rAll good')" \
  "$(printf '%q' "$(cond_message "$ns" ebd hostile Ready)")"
cli status --namespace "$ns"
expect_eq "ebdman status with a hostile message: exit status" 0 "$CLI_RC"
printf '%s\n' "$CLI_OUT" >"$E2E_TMP/status-hostile.txt"
ctl=$(LC_ALL=C grep -c $'[\x01-\x09\x0b-\x1f\x7f]' "$E2E_TMP/status-hostile.txt" || true)
expect_eq "ebdman status with a hostile message: lines with control characters" 0 "$ctl"
# (Shown through cat -v, which would show a raw CR as ^M, not \r.)
expect_contains "ebdman status: hostile's message, escaped" 'boom^[[2J^[]52;c;aGk=^G\rAll good' \
  "$(grep '^hostile ' "$E2E_TMP/status-hostile.txt" | cat -v)"
if ! out=$(aligned "$E2E_TMP/status-hostile.txt" "NAME READY REASON INSTALLED VFM GEN/OBS AGE MESSAGE"); then
  fail "ebdman status with a hostile message: an aligned table" "every column aligned with its header" \
    "$(printf '%s' "$out" | cat -v)"
fi
pass "ebdman status with a hostile message: columns aligned"

check_no_forbidden op sim
e2e_done
