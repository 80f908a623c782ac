#!/usr/bin/env bash
# all-kinds.sh KCR_GEN CHECK_TYPED_HEADERS INCLUDE... - kcr-gen on every
# built-in kind of the committed OpenAPI snapshot (the x-kcr-resources of
# each document), one header and source per kind, then check-typed-headers
# on them all: each compiles as C11, C++17 and C++20 and is as the
# project's clang-format leaves it, whatever the length of its names.
set -euo pipefail
gen=$1 check=$2
shift 2
here=$(cd "$(dirname "$0")/../.." && pwd)
snap=$(ls -d "$here"/tools/kcr-gen/openapi/v*/ | tail -1)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
docs=()
for d in "$snap"*.json; do docs+=(--openapi "$d"); done
n=0
while read -r gvk name; do
  "$gen" -o "$out" "${docs[@]}" --kind "$gvk" --name "$name"
  n=$((n + 1))
done < <(/usr/bin/python3 - "$snap" <<'PY'
import glob, json, os, sys
for f in sorted(glob.glob(os.path.join(sys.argv[1], "*.json"))):
    gv = os.path.basename(f)[:-5].replace("apis__", "").replace("api__", "").replace("__", "/")
    for r in json.load(open(f)).get("x-kcr-resources", []):
        print(f"{gv}/{r['kind']}", (gv + "_" + r["kind"]).replace("/", "_").replace(".", "_").lower())
PY
)
((n > 30)) || { echo "all-kinds: only $n kinds in $snap" >&2; exit 1; }
echo "all-kinds: $n kinds generated"
bash "$check" "$out" "$@"
