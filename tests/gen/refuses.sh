#!/usr/bin/env bash
# tests/gen/refuses.sh KCR-GEN - the ctest unit/kcr_gen_refuses: schemas
# kcr-gen must refuse, each with a message naming the member and the rule,
# and no output written.
set -uo pipefail
gen=${1:?usage: refuses.sh KCR-GEN}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
rc=0

# one member's schema (YAML at 16 columns) in an otherwise valid CRD
crd() {
  cat <<YAML
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: things.refuses.kcr.test
spec:
  group: refuses.kcr.test
  names: {kind: Thing, plural: things, singular: thing, listKind: ThingList}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          m:
$1
YAML
}

expect() { # name, schema, what the message must say
  crd "$2" > "$tmp/$1.yaml"
  if out=$("$gen" -o "$tmp/out-$1" "$tmp/$1.yaml" 2>&1); then
    echo "FAIL $1: accepted"
    rc=1
  elif [[ $out != *"$3"* ]]; then
    echo "FAIL $1: the message does not say \"$3\": $out"
    rc=1
  elif [[ -e $tmp/out-$1/$1.h ]]; then
    echo "FAIL $1: output written"
    rc=1
  else
    echo "ok   $1: $out"
  fi
}

expect int-half '            type: integer
            minimum: 0.5' '/m: minimum 0.5 of an integer member is not an int64'
expect int-huge '            type: integer
            maximum: 1e20' '/m: maximum 1e+20 of an integer member is not an int64'
expect int32-range '            type: integer
            format: int32
            maximum: 3000000000' '/m: maximum 3000000000 of an int32 member is not an int32'
expect nan '            type: number
            minimum: .nan' '/m: minimum ".nan" that is not a finite number'
expect inf '            type: number
            maximum: 1e999' '/m: maximum "1e999" that is not a finite number'
expect count '            type: string
            maxLength: -1' '/m: maxLength "-1" that is not a count'
exit $rc
