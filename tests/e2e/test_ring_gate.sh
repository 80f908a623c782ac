#!/usr/bin/env bash
# e2e ring with the apiserver's ShardedListAndWatch feature gate on: the
# checks of test_ring.sh, each replica's EBDs sent by the server alone
# (shardSelector). test_ring.sh restarts the apiserver with the gate and
# again without it at the end.
set -euo pipefail
E2E_SHARD_GATE=on exec bash "$(dirname "$0")/test_ring.sh" "$@"
