#!/usr/bin/env bash
# tools/kcr-gen/openapi/snapshot.sh - takes the snapshot of the built-in
# kinds' schemas that kcr-gen reads (--openapi) from the pinned control
# plane, into tools/kcr-gen/openapi/<kubernetes version>/:
#
#   KCR_CACHE=... tools/controlplane/start -- tools/kcr-gen/openapi/snapshot.sh
#
# One file per group-version (api__v1.json, apis__apps__v1.json, ...): the
# apiserver's OpenAPI v3 document of that group-version (/openapi/v3/api/v1)
# without its "paths" (kcr-gen reads only components.schemas), plus two
# members of our own: "x-kcr-source" (where it came from and the server's
# version) and "x-kcr-resources" (from the group-version's discovery
# document, /api/v1: each top-level resource's name, kind and namespaced,
# which the OpenAPI document does not say). JSON, keys sorted, one space of
# indent, UTF-8 as is: a new Kubernetes version is a readable diff.
# Run it after moving tools/controlplane to a new version; then regenerate
# libkcr's kcr/meta.h (docs/typed-objects.md, "Built-in kinds").
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
: "${KUBECONFIG:?run under tools/controlplane/start (KUBECONFIG is not set)}"
kubectl=${KCR_CONTROLPLANE_BIN:+$KCR_CONTROLPLANE_BIN/}kubectl
gvs=(api/v1 apis/apps/v1 apis/batch/v1 apis/coordination.k8s.io/v1
  apis/events.k8s.io/v1 apis/networking.k8s.io/v1 apis/rbac.authorization.k8s.io/v1)

version=$("$kubectl" version -o json | /usr/bin/python3 -c \
  'import json,sys; print(json.load(sys.stdin)["serverVersion"]["gitVersion"])')
out=$here/$version
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for gv in "${gvs[@]}"; do
  "$kubectl" get --raw "/openapi/v3/$gv" >"$tmp/doc.json"
  "$kubectl" get --raw "/$gv" >"$tmp/disc.json"
  /usr/bin/python3 - "$tmp/doc.json" "$tmp/disc.json" "$gv" "$version" \
    >"$out/${gv//\//__}.json" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1], encoding="utf-8"))
disc = json.load(open(sys.argv[2], encoding="utf-8"))
snap = {
    "openapi": doc["openapi"],
    "x-kcr-source": {"document": "/openapi/v3/" + sys.argv[3],
                     "discovery": "/" + sys.argv[3],
                     "kubernetesVersion": sys.argv[4]},
    "x-kcr-resources": [{"name": r["name"], "kind": r["kind"], "namespaced": r["namespaced"]}
                        for r in disc["resources"] if "/" not in r["name"]],
    "components": doc["components"],
}
json.dump(snap, sys.stdout, sort_keys=True, indent=1, ensure_ascii=False)
sys.stdout.write("\n")
PY
  echo "snapshot: $gv -> ${out#"$here"/}/${gv//\//__}.json"
done
