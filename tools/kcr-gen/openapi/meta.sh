#!/bin/sh
# tools/kcr-gen/openapi/meta.sh - libkcr's kcr/meta.h and src/core/meta.c (the
# meta types: ObjectMeta, OwnerReference, Condition, LabelSelector, ListMeta
# ...) are kcr-gen's output from the snapshot's core document, committed:
#
#   tools/kcr-gen/openapi/meta.sh KCR-GEN write   regenerate them
#   tools/kcr-gen/openapi/meta.sh KCR-GEN check   exit 1 when they are stale
#                                                 (the ctest unit/kcr_gen_meta)
set -eu
gen=$1 mode=${2:-check}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
snap=$(ls -d "$here"/v*/ | sort -V | tail -n 1)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$snap" && "$gen" --openapi api__v1.json --meta -o "$tmp")
case $mode in
write)
  cp "$tmp/meta.h" "$root/include/kcr/meta.h"
  cp "$tmp/meta.c" "$root/src/core/meta.c"
  ;;
check)
  rc=0
  cmp -s "$tmp/meta.h" "$root/include/kcr/meta.h" || { echo "include/kcr/meta.h is stale: run $0 KCR-GEN write" >&2; rc=1; }
  cmp -s "$tmp/meta.c" "$root/src/core/meta.c" || { echo "src/core/meta.c is stale: run $0 KCR-GEN write" >&2; rc=1; }
  exit $rc
  ;;
*) echo "usage: $0 KCR-GEN write|check" >&2; exit 2 ;;
esac
