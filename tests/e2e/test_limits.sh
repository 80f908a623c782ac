#!/usr/bin/env bash
# e2e limits: what an EBD author writes cannot wedge ebdman or vfm-sim.
# - An EBD name longer than 63 characters is refused at admission (the CRD's
#   CEL rule), with a message saying why: ebdman labels the children with the
#   name and a label value holds 63 characters, so such an EBD could never be
#   installed. A 63-character name is installed (VFM <name>, ConfigMap
#   <name>-config, both labelled with it) and becomes Ready. The shipped
#   samples pass admission.
# - A delay annotation beyond vfm-sim's 24h cap ("10000000000000000s", once a
#   requeue delay above INT64_MAX: an immediate requeue, forever) is reported
#   as Ready=False/Failed with a message naming the limit, and vfm-sim stays
#   idle (a bounded number of reconciles while other EBDs are served).
set -euo pipefail
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh"
e2e_init

new_ns
ns=$E2E_NS
start_sim_and_op "$ns" 200ms

# --- names
# name N: a valid EBD name of exactly N characters.
name() { printf 'n-%s' "$(printf '%*s' $(($1 - 2)) '' | tr ' ' x)"; }
n63=$(name 63)
n64=$(name 64)
expect_eq "the 63-character name's length" 63 "${#n63}"
expect_eq "the 64-character name's length" 64 "${#n64}"

rc=0
out=$(ebd_yaml "$n64" registry.example.com/vfm:1.0 1 | k -n "$ns" apply -f - 2>&1) || rc=$?
expect_eq "kubectl apply of an EBD with a 64-character name: exit status" 1 "$rc"
expect_contains "the refusal names the field" "metadata.name: Invalid value" "$out"
expect_contains "the refusal says why" \
  "EBD names are limited to 63 characters, because ebdman labels the EBD's VFM and ConfigMap with the name (label ebdman.example.com/ebd) and a label value holds at most 63 characters" \
  "$out"
wait_for 10 "the EBD with a 64-character name does not exist" gone "$ns" ebd "$n64"

ebd_yaml "$n63" registry.example.com/vfm:1.0 1 | k -n "$ns" apply -f - >/dev/null
wait_eq 60 "the EBD with a 63-character name: Ready" "True/Ready/1" cond_summary "$ns" ebd "$n63" Ready
expect_eq "its Installed condition" "True/Installed/1" "$(cond_summary "$ns" ebd "$n63" Installed)"
expect_eq "its VFM, labelled with the EBD's name" "$n63" \
  "$(jp "$ns" vfm "$n63" '{.metadata.labels.ebdman\.example\.com/ebd}')"
expect_eq "its ConfigMap <name>-config, labelled with the EBD's name" "$n63" \
  "$(jp "$ns" configmap "$n63-config" '{.metadata.labels.ebdman\.example\.com/ebd}')"

out=$(k -n "$ns" apply --dry-run=server -k "$KCR_SOURCE_DIR/config/samples" 2>&1) ||
  fail "the samples in config/samples pass admission" "no error" "$out"
pass "the samples in config/samples pass admission (server dry run)"

# --- vfm-sim's delay cap
rc=0
timeout 30 "$KCR_VFMSIM_BIN" --delay 25h --kubeconfig /nonexistent \
  >"$E2E_TMP/vfm-sim-flag.out" 2>&1 || rc=$?
expect_eq "vfm-sim --delay 25h: exit status" 2 "$rc"
expect_contains "vfm-sim --delay 25h: the error names the flag, the value and the limit" \
  '--delay: "25h" is not valid: want a duration from 0 to 24h' \
  "$(cat "$E2E_TMP/vfm-sim-flag.out")"

ebd_yaml slowest registry.example.com/vfm:1.0 1 vfm-sim.ebdman.example.com/delay \
  10000000000000000s | k -n "$ns" apply -f - >/dev/null
wait_eq 60 "slowest: its VFM's Ready status/reason" "False/Failed" \
  jp "$ns" vfm slowest '{.status.conditions[?(@.type=="Ready")].status}/{.status.conditions[?(@.type=="Ready")].reason}'
expect_eq "slowest: its VFM's Ready message" \
  "annotation vfm-sim.ebdman.example.com/delay is not a duration from 0 to 24h such as 500ms or 2s" \
  "$(cond_message "$ns" vfm slowest Ready)"
wait_eq 60 "slowest: Ready" "False/Error/1" cond_summary "$ns" ebd slowest Ready

# A hot loop would reconcile slowest thousands of times while vfm-sim serves
# the next EBD; without one the count stays small. (A count, not a time.)
ebd_yaml after registry.example.com/vfm:1.0 1 | k -n "$ns" apply -f - >/dev/null
wait_eq 60 "after: Ready" "True/Ready/1" cond_summary "$ns" ebd after Ready
n=$(metric sim controller_runtime_reconcile_total 'controller="vfm-sim"')
if ! [[ $n =~ ^[0-9]+$ ]] || ((n > 200)); then
  fail "vfm-sim reconciles for 3 VFMs (no hot loop)" "at most 200" "$n"
fi
pass "vfm-sim reconciled $n times for 3 VFMs (no hot loop)"

check_no_forbidden op sim
e2e_done
