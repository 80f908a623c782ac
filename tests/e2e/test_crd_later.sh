#!/usr/bin/env bash
# e2e crd_later (issue #31): ebdman started before its CRDs exist.
# - With neither CRD: ebdman starts and is ready; /readyz?verbose names both
#   CRDs it waits for ("it is not installed").
# - The CRDs installed: an EBD made at once gets its VFM (a reconcile) within
#   5 s of both CRDs being Established; /readyz names nothing any more.
# - The CRDs deleted (their EBDs and VFMs with them): ebdman stays up and
#   ready and names them again.
# - Installed again: the same 5 s.
# Then SIGTERM: exit 0; nothing refused by RBAC (the shipped role lets it
# watch the two CRDs by name), no error in its log.
set -euo pipefail
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh"
e2e_init

new_ns
ns=$E2E_NS
now_ms() { local t=${EPOCHREALTIME/./}; echo $((t / 1000)); }
restore_crds() { (install_crds); }
E2E_EXIT_HOOKS+=(restore_crds)

delete_crds() {
  delete_ebd_crd
  k delete crd vfms.ebdman.example.com --ignore-not-found --timeout=120s >/dev/null ||
    fail "could not delete the VFM CRD"
}
readyz() { curl -s --max-time 5 "http://127.0.0.1:${E2E_HEALTH[op]}/readyz?verbose"; }
readyz_code() {
  curl -s -o /dev/null -w '%{http_code}' --max-time 5 "http://127.0.0.1:${E2E_HEALTH[op]}/readyz"
}
waits_for() { # CRD VERSION WHY: what /readyz?verbose says of a CRD it waits for
  echo "informer $1 waits for its CustomResourceDefinition $1 to serve version $2: $3"
}
waiting_for_both() {
  local body
  body=$(readyz)
  [[ $body == *"$(waits_for ebds.ebdman.example.com v1beta1 'it is not installed')"* &&
    $body == *"$(waits_for vfms.ebdman.example.com v1alpha1 'it is not installed')"* ]] ||
    { echo "$body"; return 1; }
}

# install_and_reconcile ROUND: installs the CRDs, makes an EBD as soon as
# they serve, and checks its VFM is made within 5 s of Established.
install_and_reconcile() {
  local round=$1 t0 t1
  retry k apply --server-side --force-conflicts --field-manager=kcr-e2e \
    -f "$KCR_SOURCE_DIR/config/crd/bases" >/dev/null || fail "kubectl apply of the CRDs failed"
  k wait --for=condition=Established --timeout=60s \
    crd/ebds.ebdman.example.com crd/vfms.ebdman.example.com >/dev/null ||
    fail "CRDs not Established within 60 s"
  t0=$(now_ms)
  until ebd_yaml "$round" registry.example.com/vfm:1 1 | k -n "$ns" apply --server-side \
    -f - >/dev/null 2>&1; do
    (($(now_ms) - t0 < 30000)) || fail "$round: EBDs not served 30 s after Established"
    sleep 0.1
  done
  until k -n "$ns" get vfm "$round" >/dev/null 2>&1; do
    (($(now_ms) - t0 < 30000)) || fail "$round: no VFM 30 s after the CRDs were Established"
    sleep 0.1
  done
  t1=$(now_ms)
  log "numbers: $round: the EBD's VFM made $((t1 - t0)) ms after the CRDs were Established"
  if ((t1 - t0 > 5000)); then
    fail "$round: reconciled after the CRDs were Established" "within 5000 ms" "$((t1 - t0)) ms"
  fi
  pass "$round: reconciled $((t1 - t0)) ms after the CRDs were Established (<= 5000)"
  wait_for 10 "$round: /readyz names no CRD" bash -c \
    "! curl -s --max-time 5 'http://127.0.0.1:${E2E_HEALTH[op]}/readyz?verbose' | grep -q 'waits for'"
}

# --- without the CRDs -----------------------------------------------------
delete_crds
start_ebdman op --namespace "$ns"
expect_eq "/readyz without the CRDs" 200 "$(readyz_code)"
wait_for 10 "/readyz?verbose names both CRDs, not installed" waiting_for_both

# --- installed, deleted, installed again -----------------------------------
install_and_reconcile first
delete_crds
wait_for 60 "after the CRDs were deleted, /readyz?verbose names both again" waiting_for_both
expect_eq "/readyz after the CRDs were deleted" 200 "$(readyz_code)"
proc_alive op || fail "ebdman exited after its CRDs were deleted"
install_and_reconcile again

stop_proc op
expect_eq "ebdman's exit status on SIGTERM" 0 "$E2E_EXIT"
check_no_forbidden op
errors=$(grep -c 'level=error' "${E2E_LOG[op]}" || true)
grep 'level=error' "${E2E_LOG[op]}" | head -n 5 | sed 's/^/  [op] /' || true
expect_eq "errors in ebdman's log" 0 "$errors"
e2e_done
