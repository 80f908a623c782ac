#!/usr/bin/env bash
# e2e own_echo (issue 11): the watch event that brings ebdman's own status
# write back does not reconcile the EBD again (kcr_pred_not_own_status on
# the controller's `for` source), while a status change someone else makes
# does, and ebdman puts its conditions back.
# On a Ready, idle EBD another client sets Ready to False through the
# status subresource (a JSON patch, its own field manager). That update
# reconciles the EBD once; the reconcile writes Ready=True again; the echo
# of that write reconciles nothing. So, counted after ebdman is idle twice,
# 3 s apart: exactly 1 reconcile and 1 status write more, and no reconcile
# that found nothing to write (kcr_status_writes_total{result="skipped"}).
# Before the predicate every status write cost a second reconcile that
# found nothing to do - 2 reconciles here, 1 of them skipped (and a third of
# all reconciles in bench/ebd_bench.sh: 3 per EBD, now 2).
set -euo pipefail
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh"
e2e_init

new_ns
ns=$E2E_NS
start_sim_and_op "$ns" 0

ebd_yaml echo registry.example.com/vfm:1.0 1 | k -n "$ns" apply -f - >/dev/null
wait_eq 60 "echo: Ready" "True/Ready/1" cond_summary "$ns" ebd echo Ready
wait_for 30 "ebdman idle after Ready" ebd_idle op 0
sleep 3
wait_for 30 "ebdman still idle" ebd_idle op 0

before=$(reconciles op)
written=$(metric op kcr_status_writes_total 'result="written"')
skipped=$(metric op kcr_status_writes_total 'result="skipped"')
ltt=$(cond_ltt "$ns" ebd echo Ready)

# Ready's index in status.conditions, for the JSON patch.
idx=$(jp "$ns" ebd echo '{.status.conditions[*].type}' | tr ' ' '\n' | grep -nx Ready | cut -d: -f1)
[[ -n $idx ]] || fail "echo: a Ready condition" "an index" "none"
wait_clock_past "$ltt"
k -n "$ns" patch ebd echo --subresource=status --type=json \
  -p "[{\"op\":\"replace\",\"path\":\"/status/conditions/$((idx - 1))/status\",\"value\":\"False\"}]" \
  >/dev/null
wait_eq 30 "echo: Ready put back by ebdman" "True/Ready/1" cond_summary "$ns" ebd echo Ready
wait_for 30 "ebdman idle after the foreign status change" ebd_idle op $((before + 1))
sleep 3
wait_for 30 "ebdman still idle" ebd_idle op $((before + 1))

expect_eq "reconciles caused by a foreign status change (not by the echo of ebdman's write)" \
  "$((before + 1))" "$(reconciles op)"
expect_eq "ebdman status writes putting Ready back" "$((written + 1))" \
  "$(metric op kcr_status_writes_total 'result="written"')"
expect_eq "reconciles that found nothing to write" "$skipped" \
  "$(metric op kcr_status_writes_total 'result="skipped"')"
expect_ne "echo: Ready lastTransitionTime (True -> False -> True)" "$ltt" \
  "$(cond_ltt "$ns" ebd echo Ready)"
check_no_forbidden op sim
e2e_done
