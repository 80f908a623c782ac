#!/usr/bin/env bash
# tests/gen/paths.sh CC GENDIR INCLUDE BUILD_INCLUDE - the ctest
# unit/kcr_gen_paths: in the EBD type cut to three paths (tests/CMakeLists.txt,
# unit_test_typed_paths), a member on a path compiles and a member that was
# cut is a compile error naming it (not a member present but never set).
set -uo pipefail
cc=${1:?usage: paths.sh CC GENDIR INCLUDE BUILD_INCLUDE} gen=$2 inc=$3 binc=$4
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
rc=0

try() { # name, expression on struct ebd e
  printf '#include "ebds.h"\nint f(const struct ebd *e);\nint f(const struct ebd *e) { return (int)sizeof(%s); }\n' \
    "$2" > "$tmp/$1.c"
  LC_ALL=C "$cc" -std=c11 -fsyntax-only -I"$gen" -I"$inc" -I"$binc" "$tmp/$1.c" > "$tmp/$1.out" 2>&1
}

if try kept 'e->spec.vfm_template.image' && try kept2 'e->status.conditions.v[0].reason' \
  && try meta 'e->metadata.labels'; then
  echo "ok   the members on the paths compile"
else
  echo "FAIL a member on a path does not compile:"; cat "$tmp"/*.out; rc=1
fi
for cut in 'e->spec.vfm_template.replicas' 'e->spec.vfm_template.config' \
  'e->status.observed_generation'; do
  member=${cut##*.}
  if try cut "$cut"; then
    echo "FAIL $cut compiles: the member was not cut"; rc=1
  elif ! grep -q "no member named '$member'\|has no member named '$member'" "$tmp/cut.out"; then
    echo "FAIL $cut: the error does not name $member:"; cat "$tmp/cut.out"; rc=1
  else
    echo "ok   $cut: $(grep -m1 "member named" "$tmp/cut.out")"
  fi
done
exit $rc
