#!/usr/bin/env bash
# The e2e tests' lib.sh stops what a test started in the reverse order of
# its start (e2e_done, and the cleanup on exit): ebdman before the chaos
# proxy in front of the apiserver, whose stopping first left ebdman retrying
# its Events against nothing until stop_proc killed it (e2e/test_chaos_faults
# failing with exit status 137). Needs no cluster: two processes that write
# their label when SIGTERM reaches them.
set -euo pipefail
source "$(dirname "$0")/../e2e/lib.sh"
order=$(mktemp)
trap 'rm -f "$order"' EXIT

spawn() {
  (
    trap 'echo '"$1"' >>"'"$order"'"; exit 0' TERM
    while :; do sleep 0.05; done
  ) &
  E2E_PID[$1]=$!
  E2E_KIND[$1]=process
  E2E_PROCS+=("$1")
}

spawn proxy
spawn op
spawn sim
sleep 0.3 # the traps are set
e2e_done
got=$(paste -sd' ' "$order")
[[ $got == "sim op proxy" ]] || {
  echo "FAIL: stopped in the order '$got', expected 'sim op proxy'"
  exit 1
}
echo "ok: stopped in the reverse order of their start: $got"
