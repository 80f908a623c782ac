#!/usr/bin/env bash
# tests/gen/roundtrip.sh - the ctest integration/gen_roundtrip: verify.sh puts
# the samples of tests/gen into a fresh namespace of the real apiserver, then
# gen-roundtrip (its path in $1) decodes and encodes every stored object of
# every served version of every test CRD with the types kcr-gen generated.
#
#   KCR_CACHE=... tools/controlplane/start -- tests/gen/roundtrip.sh build/asan/tests/gen-roundtrip
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
bin=${1:?usage: roundtrip.sh PATH-TO-gen-roundtrip}
: "${KUBECONFIG:?run under tools/controlplane/start (KUBECONFIG is not set)}"
kubectl=${KCR_CONTROLPLANE_BIN:+$KCR_CONTROLPLANE_BIN/}kubectl
export KCR_GEN_NAMESPACE=kcr-gen-$$
trap '"$kubectl" delete namespace "$KCR_GEN_NAMESPACE" --wait=false >/dev/null 2>&1' EXIT

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
echo "gen-roundtrip $KCR_GEN_NAMESPACE ${gvrs[*]}"
"$bin" "$KCR_GEN_NAMESPACE" "${gvrs[@]}" || rc=1
exit "$rc"
