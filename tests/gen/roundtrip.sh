#!/usr/bin/env bash
# tests/gen/roundtrip.sh - the ctest integration/gen_roundtrip: verify.sh puts
# the samples of tests/gen into a fresh namespace of the real apiserver, then
# gen-roundtrip (its path in $1) decodes and encodes every stored object of
# every served version of every test CRD with the types kcr-gen generated,
# then the same for objects of built-in kinds (builtin/, types from the
# OpenAPI snapshot).
#
#   KCR_CACHE=... tools/controlplane/start -- tests/gen/roundtrip.sh build/asan/tests/gen-roundtrip
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
bin=${1:?usage: roundtrip.sh PATH-TO-gen-roundtrip}
: "${KUBECONFIG:?run under tools/controlplane/start (KUBECONFIG is not set)}"
kubectl=${KCR_CONTROLPLANE_BIN:+$KCR_CONTROLPLANE_BIN/}kubectl
export KCR_GEN_NAMESPACE=kcr-gen-$$
tmp=$(mktemp)
trap 'rm -f "$tmp"; "$kubectl" delete namespace "$KCR_GEN_NAMESPACE" --wait=false >/dev/null 2>&1' EXIT

rc=0
"$here/verify.sh" || rc=1

# Every served version of every test CRD, as GROUP/VERSION/PLURAL.
gvrs=()
for f in "$here"/crds/*.yaml; do
  name=$(sed -n 's/^  name: \(.*\.gen\.kcr\.test\)$/\1/p' "$f" | head -n 1)
  tmpl='{{$g := .spec.group}}{{$p := .spec.names.plural}}{{range .spec.versions}}{{if .served}}{{$g}}/{{.name}}/{{$p}} {{end}}{{end}}'
  if ! list=$("$kubectl" get crd "$name" -o go-template="$tmpl"); then
    echo "FAIL no CRD $name on the server"
    rc=1
    continue
  fi
  read -r -a more <<<"$list"
  gvrs+=("${more[@]}")
done
# The built-in kinds (types from the OpenAPI snapshot): the objects of
# builtin/ created in the namespace, next to what the apiserver and the
# controller-manager made there (kube-root-ca.crt ...), and every namespace.
# A Pod needs the namespace's default ServiceAccount; the controller-manager
# makes it only if its serviceaccount controller runs, so make it here.
"$kubectl" create -n "$KCR_GEN_NAMESPACE" serviceaccount default >/dev/null 2>&1 || true
for f in "$here"/builtin/*.json; do
  if ! err=$(sed "s/@NAMESPACE@/$KCR_GEN_NAMESPACE/g" "$f" |
    "$kubectl" create -n "$KCR_GEN_NAMESPACE" -f - 2>&1 >/dev/null); then
    echo "FAIL builtin/${f##*/}: create refused: $err"
    rc=1
  fi
done
# (items of built-in lists carry no kind: =Kind says it)
gvrs+=(core/v1/configmaps=ConfigMap core/v1/secrets=Secret core/v1/services=Service
  core/v1/pods=Pod core/v1/events=Event apps/v1/deployments=Deployment batch/v1/jobs=Job
  coordination.k8s.io/v1/leases=Lease events.k8s.io/v1/events=Event
  core/v1/namespaces/cluster=Namespace)
echo "gen-roundtrip $KCR_GEN_NAMESPACE ${gvrs[*]}"
"$bin" "$KCR_GEN_NAMESPACE" "${gvrs[@]}" | tee "$tmp" || rc=1
# every object of builtin/ was among them
for f in "$here"/builtin/*.json; do
  name=$(sed -n 's/^ *"metadata": {"name": "\([^"]*\)".*/\1/p' "$f")
  if ! grep -q "^ok .*{\"name\":\"$name\"" "$tmp"; then
    echo "FAIL builtin/${f##*/}: $name was not read back"
    rc=1
  fi
done
exit "$rc"
