#!/usr/bin/env bash
# e2e conversion (issue #30): EBD v1beta1 beside v1alpha1, converted by
# ebdman's conversion webhook (operator/ebdman/convert.c) that the real
# apiserver calls over loopback TLS, and ebdman's storage migration.
#
# 1. The world before v1beta1: the EBD CRD as it was (v1alpha1 alone, the
#    storage version) and N EBDs created in v1alpha1 - in etcd, every one is
#    stored as v1alpha1 (read straight from etcd's JSON gateway).
# 2. The upgrade: config/crd as config/default renders it (v1beta1 stored,
#    v1alpha1 served and deprecated, conversion by ebdman's webhook Service -
#    turned into a URL here, the apiserver having no route to a Service),
#    and a cold start of one ebdman: its cache lists v1beta1, so every
#    stored EBD goes through its own conversion webhook, whose certificate
#    it makes and whose caBundle it writes into the CRD first. It converges:
#    every EBD Ready, its children as for any EBD. Each EBD reads back
#    unchanged in v1alpha1 (uid, annotation, spec.vfm), and the same in
#    v1beta1 (spec.vfmTemplate).
# 3. Both versions for every verb: create in one and get in the other, list
#    in both, a watch in each version sees the objects created in the other
#    in its own shape, an update through v1alpha1 reaches the VFM, and an
#    admission webhook that names v1beta1 alone (matchPolicy Equivalent)
#    defaults a v1alpha1 request.
# 4. The storage migration: ebdman (the leader) sets the CRD's
#    status.storedVersions to [v1beta1] and etcd holds every EBD as v1beta1.
#    The status writes of the cold start store each EBD again too, so the
#    migration's own rewrite is checked apart: K EBDs are put back into etcd
#    as v1alpha1 (status and all, so the reconcile has nothing to write) and
#    storedVersions back to both; the migration rewrites exactly those, and
#    ebdman writes no status meanwhile. Then v1alpha1 set served: false
#    leaves every EBD readable.
# 5. No request of ebdman was refused: config/rbac suffices.
# At the end the CRD is put back as config/crd/bases has it.
# KCR_CONVERSION_EBDS: how many stored v1alpha1 EBDs (default 100).
set -euo pipefail
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh"
e2e_init

n=${KCR_CONVERSION_EBDS:-100}
crd=ebds.ebdman.example.com
bases=$KCR_SOURCE_DIR/config/crd/bases/ebdman.example.com_ebds.yaml
alpha=ebds.v1alpha1.ebdman.example.com
beta=ebds.v1beta1.ebdman.example.com
new_ns
ns=$E2E_NS
free_port
wport=$E2E_PORT
default_image=registry.example.com/vfm:default
k delete secret -n "$E2E_SYSTEM_NS" "$E2E_CERTS_SECRET" --ignore-not-found >/dev/null
# Whatever happens, later tests get the CRD as config/crd/bases has it.
# (In a subshell: a failure here must not end the cleanup that calls it.)
restore_crd() { (install_crds); }

# stored_versions: "NAME APIVERSION" of each EBD of $ns as etcd holds it
# (etcd's JSON gateway: a range over the namespace's keys, values base64).
stored_versions() {
  local prefix=/registry/ebdman.example.com/ebds/$ns/ v
  curl -sf --max-time 10 -X POST "$KCR_ETCD_ENDPOINT/v3/kv/range" -d "{\"key\":\"$(printf %s "$prefix" | base64 -w0)\",\"range_end\":\"$(printf %s "${prefix%/}0" | base64 -w0)\"}" |
    grep -o '"value":"[^"]*"' | cut -d'"' -f4 |
    while read -r v; do
      { printf '%s' "$v" | base64 -d; echo; } |
        sed -n 's/^{"apiVersion":"\([^"]*\)","kind":"EBD",.*"name":"\([^"]*\)","namespace".*/\2 \1/p'
    done
}
stored_as() { stored_versions | awk -v v="$1" '$2 == v' | grep -c . || true; }

# --- 1. before v1beta1: the CRD with v1alpha1 alone, stored --------------
# (a CRD whose status.storedVersions holds v1beta1 cannot drop it: replace it)
delete_ebd_crd
E2E_EXIT_HOOKS+=(restore_crd)
ebd_crd_v1alpha1_only | k create -f - >/dev/null
k wait --for=condition=Established --timeout=60s "crd/$crd" >/dev/null
expect_eq "the old CRD: v1alpha1 alone, stored" "v1alpha1 true" \
  "$(k get crd "$crd" -o jsonpath='{.spec.versions[*].name} {.spec.versions[*].storage}')"
wait_for 30 "v1alpha1 EBDs served" k get "$alpha" -A -o name
v1alpha1_ebd() { # NAME [IMAGE]
  printf -- '---\napiVersion: ebdman.example.com/v1alpha1\nkind: EBD\nmetadata:\n  name: %s\n  annotations:\n    note: "made as v1alpha1 %s"\nspec:\n  vfm:\n' "$1" "$1"
  [[ -n ${2:-} ]] && printf '    image: "%s"\n' "$2"
  printf '    replicas: 1\n    config:\n      name: "%s"\n      z-first: "1"\n' "$1"
}
for ((i = 0; i < n; i++)); do v1alpha1_ebd "$(printf 'old-%03d' "$i")" registry.example.com/vfm:1.0; done |
  k -n "$ns" create -f - >/dev/null
expect_eq "etcd holds $n EBDs, all as v1alpha1" "$n" "$(stored_as ebdman.example.com/v1alpha1)"
view='{range .items[*]}{.metadata.name} {.metadata.uid} {.metadata.annotations.note} '
before=$(k -n "$ns" get "$alpha" -o jsonpath="$view{.spec.vfm}{\"\\n\"}{end}")

# --- 2. the upgrade, and a cold start -------------------------------------
k kustomize "$KCR_SOURCE_DIR/config/default" | select_kinds CustomResourceDefinition |
  awk 'BEGIN { RS = "---\n" } /\n  name: ebds\.ebdman\.example\.com\n/ { printf "%s", $0 }' >"$E2E_TMP/crd.yaml"
expect_eq "config/default: the EBD CRD converts through ebdman's webhook Service" \
  "Webhook ebdman-webhook-service ebdman-system /convert v1" \
  "$(k patch --local -f "$E2E_TMP/crd.yaml" --type merge -p '{}' -o jsonpath='{.spec.conversion.strategy} {.spec.conversion.webhook.clientConfig.service.name} {.spec.conversion.webhook.clientConfig.service.namespace} {.spec.conversion.webhook.clientConfig.service.path} {.spec.conversion.webhook.conversionReviewVersions[*]}')"
k patch --local -f "$E2E_TMP/crd.yaml" --type merge -o yaml -p \
  "{\"spec\":{\"conversion\":{\"webhook\":{\"clientConfig\":{\"service\":null,\"url\":\"https://127.0.0.1:$wport/convert\"}}}}}" |
  k apply --server-side --force-conflicts --field-manager=kcr-e2e -f - >/dev/null
expect_eq "the new CRD: v1alpha1 served, v1beta1 stored" "v1alpha1 v1beta1 true true false true" \
  "$(k get crd "$crd" -o jsonpath='{.spec.versions[*].name} {.spec.versions[*].served} {.spec.versions[*].storage}')"
install_webhooks "$wport" "$wport"
start_vfm_sim sim --namespace "$ns" --delay 100ms
# All namespaces (the migration lists every EBD), so no --namespace.
start_ebdman op --webhook-bind-address "127.0.0.1:$wport" \
  --webhook-certs-secret "$E2E_CERTS_SECRET" --webhook-ip 127.0.0.1 --leader-elect \
  --leader-election-namespace "$E2E_SYSTEM_NS" --default-vfm-image "$default_image"
expect_eq "the CRD's caBundle is the Secret's ca.crt" \
  "$(k get secret -n "$E2E_SYSTEM_NS" "$E2E_CERTS_SECRET" -o jsonpath='{.data.ca\.crt}')" \
  "$(k get crd "$crd" -o jsonpath='{.spec.conversion.webhook.clientConfig.caBundle}')"
wait_eq 180 "stored v1alpha1 EBDs Ready after the cold start" "$n" count_ready "$ns"
check_all_ready "$ns" "$n"
check_children "$ns"
expect_eq "each EBD reads back unchanged in v1alpha1" "$before" \
  "$(k -n "$ns" get "$alpha" -o jsonpath="$view{.spec.vfm}{\"\\n\"}{end}")"
expect_eq "and the same in v1beta1, as spec.vfmTemplate" "$before" \
  "$(k -n "$ns" get "$beta" -o jsonpath="$view{.spec.vfmTemplate}{\"\\n\"}{end}")"
expect_gt "ebdman's conversion webhook answered" 0 \
  "$(metric op controller_runtime_webhook_requests_total 'webhook="convert-ebd"' 'code="200"')"

# --- 3. both versions, every verb -----------------------------------------
rv=$(k -n "$ns" get "$beta" -o jsonpath='{.metadata.resourceVersion}')
for v in v1alpha1 v1beta1; do
  k get --raw "/apis/ebdman.example.com/$v/namespaces/$ns/ebds?watch=1&resourceVersion=$rv&timeoutSeconds=25" \
    >"$E2E_TMP/watch-$v.txt" 2>&1 &
done
sleep 1
ebd_yaml new-beta registry.example.com/vfm:b 1 | k -n "$ns" create -f - >/dev/null
v1alpha1_ebd new-alpha registry.example.com/vfm:a | k -n "$ns" create -f - >/dev/null
v1alpha1_ebd new-noimage | k -n "$ns" create -f - >/dev/null
expect_eq "new-beta (made as v1beta1) read as v1alpha1" \
  "ebdman.example.com/v1alpha1 registry.example.com/vfm:b" \
  "$(k -n "$ns" get "$alpha" new-beta -o jsonpath='{.apiVersion} {.spec.vfm.image}')"
expect_eq "new-alpha (made as v1alpha1) read as v1beta1" \
  "ebdman.example.com/v1beta1 registry.example.com/vfm:a" \
  "$(k -n "$ns" get "$beta" new-alpha -o jsonpath='{.apiVersion} {.spec.vfmTemplate.image}')"
expect_eq "new-noimage (v1alpha1, no image) defaulted by the v1beta1 webhook" "$default_image" \
  "$(k -n "$ns" get "$alpha" new-noimage -o jsonpath='{.spec.vfm.image}')"
for e in new-beta new-alpha new-noimage; do
  wait_eq 60 "$e: Ready" "True/Ready/1" cond_summary "$ns" ebd "$e" Ready
done
expect_eq "new-alpha's VFM" "registry.example.com/vfm:a 1" \
  "$(jp "$ns" vfm new-alpha '{.spec.image} {.spec.replicas}')"
k -n "$ns" patch "$alpha" new-alpha --type merge -p '{"spec":{"vfm":{"replicas":3}}}' >/dev/null
wait_eq 60 "an update through v1alpha1 reaches the VFM" "registry.example.com/vfm:a 3" \
  jp "$ns" vfm new-alpha '{.spec.image} {.spec.replicas}'
total=$((n + 3))
for v in alpha beta; do
  f='{.spec.vfm.image}'
  [[ $v == beta ]] && f='{.spec.vfmTemplate.image}'
  res=$alpha
  [[ $v == beta ]] && res=$beta
  expect_eq "a list in $res: every EBD with its image" "$total" \
    "$(k -n "$ns" get "$res" -o jsonpath="{range .items[*]}$f{\"\\n\"}{end}" | grep -c .)"
done
# watch_saw VERSION NAME MEMBER: the watch in VERSION has an ADDED event of
# NAME whose spec holds MEMBER, in VERSION's apiVersion
watch_saw() {
  grep "\"type\":\"ADDED\"" "$E2E_TMP/watch-$1.txt" | grep "\"name\":\"$2\"" |
    grep "\"apiVersion\":\"ebdman.example.com/$1\"" | grep -c "\"spec\":{\"$3\":"
}
for e in new-beta new-alpha; do
  wait_eq 30 "the v1alpha1 watch saw $e with spec.vfm" 1 watch_saw v1alpha1 "$e" vfm
  wait_eq 30 "the v1beta1 watch saw $e with spec.vfmTemplate" 1 watch_saw v1beta1 "$e" vfmTemplate
done

# --- 4. the storage migration ---------------------------------------------
# (it waits until the storage version has been seen for 30 s)
wait_eq 150 "the CRD's status.storedVersions" '["v1beta1"]' \
  k get crd "$crd" -o jsonpath='{.status.storedVersions}'
expect_gt "ebdman logged the migration (times)" 0 "$(grep -c 'storage migration done' "${E2E_LOG[op]}" || true)"
expect_eq "etcd holds every EBD as v1beta1" "$total" "$(stored_as ebdman.example.com/v1beta1)"
expect_eq "and none as v1alpha1" 0 "$(stored_as ebdman.example.com/v1alpha1)"
# The migration's own rewrite: K EBDs put back as v1alpha1, behind the
# apiserver's back (etcd's JSON gateway), as they were before the upgrade.
k_back=10
etcd_put_v1alpha1() { # NAME
  local key=/registry/ebdman.example.com/ebds/$ns/$1 v
  v=$(curl -sf --max-time 10 -X POST "$KCR_ETCD_ENDPOINT/v3/kv/range" \
    -d "{\"key\":\"$(printf %s "$key" | base64 -w0)\"}" | grep -o '"value":"[^"]*"' | cut -d'"' -f4 |
    base64 -d | sed 's|^{"apiVersion":"ebdman.example.com/v1beta1",|{"apiVersion":"ebdman.example.com/v1alpha1",|; s|"spec":{"vfmTemplate":|"spec":{"vfm":|')
  [[ $v == '{"apiVersion":"ebdman.example.com/v1alpha1",'*'"spec":{"vfm":'* ]] || return 1
  v+=$'\n' # as the apiserver writes it
  curl -sf --max-time 10 -X POST "$KCR_ETCD_ENDPOINT/v3/kv/put" \
    -d "{\"key\":\"$(printf %s "$key" | base64 -w0)\",\"value\":\"$(printf %s "$v" | base64 -w0)\"}" >/dev/null
}
written0=$(metric op kcr_status_writes_total 'result="written"')
for ((i = 0; i < k_back; i++)); do
  etcd_put_v1alpha1 "$(printf 'old-%03d' "$i")" || fail "putting old-$i back as v1alpha1 in etcd failed"
done
expect_eq "etcd holds $k_back EBDs as v1alpha1 again" "$k_back" "$(stored_as ebdman.example.com/v1alpha1)"
expect_eq "and they read as before, in v1alpha1" "$(printf '%s\n' "$before" | grep '^old-00')" \
  "$(k -n "$ns" get "$alpha" -o jsonpath="$view{.spec.vfm}{\"\\n\"}{end}" | grep '^old-00')"
k patch crd "$crd" --subresource=status --type merge \
  -p '{"status":{"storedVersions":["v1alpha1","v1beta1"]}}' >/dev/null
wait_eq 60 "the migration again: status.storedVersions" '["v1beta1"]' \
  k get crd "$crd" -o jsonpath='{.status.storedVersions}'
expect_eq "the migration rewrote them: none stored as v1alpha1" 0 "$(stored_as ebdman.example.com/v1alpha1)"
expect_eq "while ebdman wrote no status (nothing changed for it)" "$written0" \
  "$(metric op kcr_status_writes_total 'result="written"')"
expect_eq "v1alpha1 is the CRD's first version" v1alpha1 \
  "$(k get crd "$crd" -o jsonpath='{.spec.versions[0].name}')"
k patch crd "$crd" --type json -p '[{"op":"replace","path":"/spec/versions/0/served","value":false}]' >/dev/null
alpha_gone() { ! k -n "$ns" get "$alpha" -o name >/dev/null 2>&1; }
wait_for 60 "v1alpha1 no longer served" alpha_gone
expect_eq "every EBD still reads in v1beta1" "$total" \
  "$(k -n "$ns" get "$beta" -o jsonpath='{range .items[*]}{.spec.vfmTemplate.image}{"\n"}{end}' | grep -c .)"
check_no_forbidden op
e2e_done
