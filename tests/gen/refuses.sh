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

# kcr-gen on $tmp/NAME.yaml must fail, say MSG and write nothing
refused() { # name, what the message must say, kcr-gen's other arguments...
  local name=$1 want=$2
  shift 2
  if out=$("$gen" -o "$tmp/out-$name" "$@" "$tmp/$name.yaml" 2>&1); then
    echo "FAIL $name: accepted"
    rc=1
  elif [[ $out != *"$want"* ]]; then
    echo "FAIL $name: the message does not say \"$want\": $out"
    rc=1
  elif [[ -e $tmp/out-$name/$name.h ]]; then
    echo "FAIL $name: output written"
    rc=1
  else
    echo "ok   $name: $out"
  fi
}

expect() { # name, schema, what the message must say
  crd "$2" > "$tmp/$1.yaml"
  refused "$1" "$3"
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

# --path: paths that are not in the schema, or run through what a keep path
# cannot index into, each refused with what to list instead
expect_path() { # name, path, what the message must say
  crd '            type: object
            properties:
              list: {type: array, items: {type: object, properties: {a: {type: string}}}}
              map: {type: object, additionalProperties: {type: string}}
              raw: {type: object, x-kubernetes-preserve-unknown-fields: true}
              s: {type: string}' > "$tmp/$1.yaml"
  refused "$1" "$3" --path "$2"
}
expect_path path-missing /m/nope 'path "/m/nope": the schema has no such member under /m'
expect_path path-array /m/list/0 'runs through /m/list, which is an array'
expect_path path-map /m/map/k 'runs through /m/map, which is a map'
expect_path path-raw /m/raw/x 'runs through /m/raw, which is kept as raw JSON text'
expect_path path-scalar /m/s/x 'runs through /m/s, which is a scalar'
expect_path path-syntax m 'path "m" does not start with'
expect_path path-tilde '/m/a~2' "has a '~' not followed by 0 or 1"
exit $rc
