#!/usr/bin/env bash
# tests/gen/verify.sh - proves that the kcr-gen test CRDs (tests/gen/crds) and
# samples (tests/gen/samples) are what a real kube-apiserver accepts, and that
# it returns every sample as written (or as tests/gen/expected/<name>.json
# says, where the apiserver applies defaults or drops a null).
#
#   KCR_CACHE=/work/main/.cache tools/controlplane/start -- tests/gen/verify.sh
#
# Steps (each failure is reported, the script goes on and exits 1 at the end):
#  1. static: make-big.sh reproduces big.yaml and samples/big-2.json byte for
#     byte; check.py lint (one CRD per file with a leading comment, sorted
#     keys, names, subresources; sample names and no metadata.namespace);
#  2. server-side apply every CRD; wait until each is Established (and not
#     NonStructuralSchema);
#  3. in namespace $KCR_GEN_NAMESPACE (default kcr-gen), for each sample:
#     delete any old copy, POST it (status is ignored on create), PUT its
#     status through the /status subresource when it has one, GET it back
#     and compare everything but metadata with the sample or its expected/
#     file (check.py compare: exact, numbers by value);
#  4. every object in tests/gen/invalid must be refused as invalid (422).
# The last line is "N passed, M failed".
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
: "${KUBECONFIG:?run under tools/controlplane/start (KUBECONFIG is not set)}"
kubectl=${KCR_CONTROLPLANE_BIN:+$KCR_CONTROLPLANE_BIN/}kubectl
ns=${KCR_GEN_NAMESPACE:-kcr-gen}
# the Debian python3 that scripts/bootstrap gives PyYAML (python3-yaml)
py=/usr/bin/python3
check() { "$py" "$here/check.py" "$@"; }
k() { "$kubectl" "$@"; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/kcr-gen-verify.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
passed=0 failed=0
ok() { passed=$((passed + 1)); printf 'ok   %s\n' "$*"; }
bad() { failed=$((failed + 1)); printf 'FAIL %s\n' "$*"; }

# ---- 1. static ----------------------------------------------------------------
if sh "$here/crds/make-big.sh" | cmp -s - "$here/crds/big.yaml"; then
  ok "make-big.sh reproduces crds/big.yaml ($(sh "$here/crds/make-big.sh" count) leaf properties)"
else
  bad "make-big.sh does not reproduce crds/big.yaml"
fi
if sh "$here/crds/make-big.sh" sample | cmp -s - "$here/samples/big-2.json"; then
  ok "make-big.sh sample reproduces samples/big-2.json"
else
  bad "make-big.sh sample does not reproduce samples/big-2.json"
fi
if check lint "$here"; then ok "lint"; else bad "lint"; fi

# ---- 2. CRDs --------------------------------------------------------------------
crds=()
for f in "$here"/crds/*.yaml; do
  name=$(sed -n 's/^  name: \(.*\.gen\.kcr\.test\)$/\1/p' "$f" | head -n 1)
  # server-side apply: no last-applied annotation (big.yaml would not fit in one)
  if out=$(k apply --server-side --force-conflicts --field-manager=kcr-gen-verify -f "$f" 2>&1); then
    crds+=("$name")
  else
    bad "create CRD ${f#"$here"/}: $out"
  fi
done
for name in "${crds[@]}"; do
  state=
  for _ in $(seq 1 120); do
    state=$(k get crd "$name" -o go-template='{{range .status.conditions}}{{.type}}={{.status}} {{end}}' 2>/dev/null) || state=
    [[ $state == *Established=True* ]] && break
    sleep 0.5
  done
  if [[ $state == *Established=True* && $state != *NonStructuralSchema=True* ]]; then
    ok "CRD $name established"
  else
    bad "CRD $name not established: $state"
  fi
done

# ---- 3. samples --------------------------------------------------------------------
k get namespace "$ns" >/dev/null 2>&1 || k create namespace "$ns" >/dev/null
for f in "$here"/samples/*.json; do
  stem=$(basename "$f" .json)
  if ! coll=$(check collection "$here" "$f" "$ns"); then
    bad "$stem: no CRD for it"
    continue
  fi
  k delete --raw "$coll/$stem" >/dev/null 2>&1 || true
  for _ in $(seq 1 50); do k get --raw "$coll/$stem" >/dev/null 2>&1 || break; sleep 0.2; done
  if ! k create --raw "$coll" -f "$f" >"$tmp/$stem.created.json" 2>"$tmp/err"; then
    bad "$stem: create refused: $(cat "$tmp/err")"
    continue
  fi
  what="create"
  if grep -q '"status"' "$f" && "$py" -c 'import json,sys; sys.exit(0 if "status" in json.load(open(sys.argv[1])) else 1)' "$f"; then
    check status-body "$tmp/$stem.created.json" "$f" >"$tmp/$stem.status-body.json"
    if ! k replace --raw "$coll/$stem/status" -f "$tmp/$stem.status-body.json" >/dev/null 2>"$tmp/err"; then
      bad "$stem: status update refused: $(cat "$tmp/err")"
      continue
    fi
    what="create + PUT /status"
  fi
  if ! k get --raw "$coll/$stem" >"$tmp/$stem.got.json" 2>"$tmp/err"; then
    bad "$stem: read back failed: $(cat "$tmp/err")"
    continue
  fi
  want=$f
  [[ -f $here/expected/$stem.json ]] && want=$here/expected/$stem.json
  if check compare "$tmp/$stem.got.json" "$want" >"$tmp/diff"; then
    ok "$stem: $what, read back equal to ${want#"$here"/}"
  else
    bad "$stem: $what, read back differs from ${want#"$here"/}:"
    cat "$tmp/diff"
  fi
done

# ---- 4. objects the schemas must refuse ------------------------------------------------
for f in "$here"/invalid/*.json; do
  [[ -e $f ]] || continue
  stem=$(basename "$f" .json)
  coll=$(check collection "$here" "$f" "$ns") || { bad "invalid/$stem: no CRD for it"; continue; }
  if k create --raw "$coll" -f "$f" >/dev/null 2>"$tmp/err"; then
    bad "invalid/$stem: accepted, but the schema should refuse it"
    k delete --raw "$coll/$stem" >/dev/null 2>&1 || true
  elif grep -qi 'is invalid' "$tmp/err"; then
    # kubectl: 'The Route "x" is invalid: <field>: <reason>'
    ok "invalid/$stem: refused: $(sed 's/^.* is invalid: //' "$tmp/err" | tr '\n' ' ' | cut -c 1-240)"
  else
    bad "invalid/$stem: refused, but not as Invalid: $(head -c 300 "$tmp/err")"
  fi
done

echo "$passed passed, $failed failed"
((failed == 0))
