# tests/e2e/lib.sh - shared helpers for the ebdman end-to-end tests.
#
# Sourced by every tests/e2e/test_*.sh, which run (through CTest, label e2e)
# against the real control plane of `tools/controlplane/start
# --with-controller-manager` with these variables set:
#   KUBECONFIG, KCR_CONTROLPLANE_BIN, KCR_CONTROLPLANE_DIR, KCR_APISERVER_URL
#     (from the control plane), KCR_SOURCE_DIR, KCR_EBDMAN_BIN, KCR_VFMSIM_BIN
#     (from tests/CMakeLists.txt; test_cli.sh also wants KCR_HELLO_BIN and
#     KCR_WATCH_BIN).
# A missing variable is a failure, never a skip.
#
#   source "$(dirname "$0")/lib.sh"
#   e2e_init              # temp dir, EXIT trap, CRDs, RBAC, SA kubeconfigs
#   new_ns; ns=$E2E_NS    # a fresh namespace, deleted on exit
#   start_vfm_sim sim --namespace "$ns" --delay 200ms
#   start_ebdman op --namespace "$ns"
#   wait_eq 60 "EBD a Ready" True cond_status "$ns" ebd a Ready
#   e2e_done              # "e2e <name>: N passed, 0 failed"
#
# The operator runs under its own ServiceAccount with exactly the RBAC shipped
# in config/ (rendered from config/default, only the RBAC objects applied),
# through a token kubeconfig; that proves the manifests are sufficient. Any
# "forbidden" in an ebdman log fails the test with the refused request.
#
# Processes started here run in the background with their logs in the test's
# temp dir and are stopped by the EXIT trap (SIGTERM, SIGKILL after 15 s).
# The temp dir is removed when the test passes (kept with E2E_KEEP_LOGS=1),
# kept (path printed, ends of the logs shown) when it fails. Test namespaces
# are deleted on exit.
#
# Assertions never sleep a fixed time: wait_for / wait_eq poll with a timeout.

# ---- basics ----------------------------------------------------------------

# shellcheck disable=SC2034 # E2E_LEASE, E2E_EXIT, ... are read by the tests

E2E_NAME=$(basename "$0" .sh)
E2E_NAME=${E2E_NAME#test_}
E2E_PASSED=0
E2E_FAILED=0
E2E_TMP=
E2E_NAMESPACES=()
E2E_CLUSTER_OBJECTS=() # TYPE/NAME of cluster-scoped objects deleted on exit
E2E_EXIT_HOOKS=()      # functions _cleanup calls after deleting those
E2E_PROCS=()           # labels of started processes
declare -A E2E_PID=() E2E_LOG=() E2E_METRICS=() E2E_HEALTH=() E2E_KIND=()
E2E_START=$SECONDS
E2E_SYSTEM_NS=ebdman-system
E2E_SA=ebdman-controller-manager
E2E_VFMSIM_SA=ebdman-vfm-sim
E2E_LEASE=ebdman-leader

log() { printf '%s e2e %s: %s\n' "$(date -u +%H:%M:%S)" "$E2E_NAME" "$*"; }

# pass WHAT: counts one passed check.
pass() {
  E2E_PASSED=$((E2E_PASSED + 1))
  printf 'ok: %s\n' "$*"
}

# fail WHAT [EXPECTED GOT]: prints "FAIL: WHAT (expected X, got Y)" and exits 1.
fail() {
  local what=$1
  E2E_FAILED=$((E2E_FAILED + 1))
  if (($# >= 3)); then
    printf 'FAIL: %s (expected %s, got %s)\n' "$what" "$2" "$3"
  else
    printf 'FAIL: %s\n' "$what"
  fi
  exit 1
}

# expect_eq WHAT EXPECTED ACTUAL
expect_eq() {
  if [[ $3 == "$2" ]]; then pass "$1 = $2"; else fail "$1" "'$2'" "'$3'"; fi
}

# expect_ne WHAT UNEXPECTED ACTUAL
expect_ne() {
  if [[ $3 != "$2" ]]; then pass "$1 (not '$2')"; else fail "$1" "anything but '$2'" "'$3'"; fi
}

# expect_match WHAT EXTENDED-REGEX ACTUAL
expect_match() {
  if [[ $3 =~ $2 ]]; then pass "$1 =~ /$2/"; else fail "$1" "a match for /$2/" "'$3'"; fi
}

# expect_contains WHAT SUBSTRING ACTUAL
expect_contains() {
  if [[ $3 == *"$2"* ]]; then pass "$1 contains '$2'"; else fail "$1" "text containing '$2'" "'$3'"; fi
}

# expect_gt WHAT NUMBER ACTUAL (ACTUAL > NUMBER)
expect_gt() {
  if [[ $3 =~ ^-?[0-9]+$ ]] && (($3 > $2)); then pass "$1 = $3 > $2"; else fail "$1" "> $2" "'$3'"; fi
}

# wait_for TIMEOUT_S WHAT CMD...: polls CMD until it succeeds.
wait_for() {
  local timeout=$1 what=$2 out="" start=$SECONDS
  shift 2
  while :; do
    if out=$("$@" 2>&1); then
      pass "$what ($((SECONDS - start)) s)"
      return 0
    fi
    if ((SECONDS - start >= timeout)); then
      fail "$what: timed out after ${timeout} s (last output: '$(printf '%s' "$out" | tail -c 400)')"
    fi
    sleep 0.5
  done
}

# at_least N CMD...: CMD prints a number >= N (for wait_for; prints it).
at_least() {
  local want=$1 got
  shift
  got=$("$@") || return 1
  echo "$got"
  ((got >= want))
}

# wait_eq TIMEOUT_S WHAT EXPECTED CMD...: polls until CMD prints EXPECTED.
wait_eq() {
  local timeout=$1 what=$2 want=$3 got="" start=$SECONDS
  shift 3
  while :; do
    got=$("$@" 2>&1) || true
    if [[ $got == "$want" ]]; then
      pass "$what = $want ($((SECONDS - start)) s)"
      return 0
    fi
    if ((SECONDS - start >= timeout)); then
      fail "$what after ${timeout} s" "'$want'" "'$(printf '%s' "$got" | tail -c 400)'"
    fi
    sleep 0.5
  done
}

# ---- kubectl ---------------------------------------------------------------

# k ARGS...: kubectl as the cluster admin (the test's own view of the cluster).
k() { "$KCR_CONTROLPLANE_BIN/kubectl" --request-timeout=30s "$@"; }

# k_sa ARGS...: kubectl as ebdman's ServiceAccount.
k_sa() { k --kubeconfig "$E2E_SA_KUBECONFIG" "$@"; }

# jp NS KIND NAME JSONPATH: one jsonpath of one object ("" when absent).
jp() { k -n "$1" get "$2" "$3" -o jsonpath="$4"; }

# cond_field NS KIND NAME TYPE FIELD: a field of the condition of that type.
cond_field() { jp "$1" "$2" "$3" "{.status.conditions[?(@.type==\"$4\")].$5}"; }
cond_status() { cond_field "$@" status; }
cond_reason() { cond_field "$@" reason; }
cond_message() { cond_field "$@" message; }
cond_ltt() { cond_field "$@" lastTransitionTime; }
cond_ogen() { cond_field "$@" observedGeneration; }
# cond_summary NS KIND NAME TYPE: "status/reason/observedGeneration".
cond_summary() {
  jp "$1" "$2" "$3" "{.status.conditions[?(@.type==\"$4\")].status}/{.status.conditions[?(@.type==\"$4\")].reason}/{.status.conditions[?(@.type==\"$4\")].observedGeneration}"
}
generation() { jp "$1" "$2" "$3" '{.metadata.generation}'; }
observed_generation() { jp "$1" "$2" "$3" '{.status.observedGeneration}'; }

# gone NS KIND NAME: succeeds when the object does not exist.
gone() {
  local out
  if out=$(k -n "$1" get "$2" "$3" -o name 2>&1); then
    echo "still there: $out"
    return 1
  fi
  [[ $out == *NotFound* ]] || { echo "$out"; return 1; }
}

# count NS KIND [SELECTOR]: number of objects.
count() {
  local sel=()
  [[ -n ${3:-} ]] && sel=(-l "$3")
  k -n "$1" get "$2" "${sel[@]}" -o name | grep -c . || true
}

# count_ready NS: number of EBDs with Ready=True.
count_ready() {
  k -n "$1" get ebds -o jsonpath='{range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' |
    grep -c '^True$' || true
}

# rfc3339 -> seconds since the epoch
epoch() { date -u -d "$1" +%s; }

# wait_clock_past RFC3339: waits until the wall clock is past that second, so
# a later transition gets a strictly later (second-precision) timestamp.
wait_clock_past() {
  local t
  t=$(epoch "$1")
  while (($(date -u +%s) <= t)); do sleep 0.2; done
}

# ebd_yaml NAME IMAGE [REPLICAS [ANNOTATION-KEY ANNOTATION-VALUE]...]: one EBD document.
ebd_yaml() {
  local name=$1 image=$2 replicas=${3:-1}
  shift 3 2>/dev/null || shift $#
  printf -- '---\napiVersion: ebdman.example.com/v1beta1\nkind: EBD\nmetadata:\n  name: %s\n' "$name"
  if (($# >= 2)); then
    printf '  annotations:\n'
    while (($# >= 2)); do
      printf '    %s: "%s"\n' "$1" "$2"
      shift 2
    done
  fi
  printf 'spec:\n  vfmTemplate:\n    image: "%s"\n    replicas: %s\n    config:\n      name: "%s"\n' \
    "$image" "$replicas" "$name"
}

# _cond_jp TYPE: jsonpath of "status/reason/observedGeneration" of a condition.
_cond_jp() {
  printf '{.status.conditions[?(@.type=="%s")].status}/{.status.conditions[?(@.type=="%s")].reason}/{.status.conditions[?(@.type=="%s")].observedGeneration}' "$1" "$1" "$1"
}

# check_all_ready NS N: exactly N EBDs in NS, each with generation 1,
# status.observedGeneration 1, Ready, Installed and VFMHealthy True with
# observedGeneration 1. Leaves "NAME UID ..." lines in $E2E_TMP/ebds.txt.
check_all_ready() {
  local ns=$1 n=$2 bad
  k -n "$ns" get ebds -o jsonpath="{range .items[*]}{.metadata.name} {.metadata.uid} {.metadata.generation} {.status.observedGeneration} $(_cond_jp Ready) $(_cond_jp Installed) $(_cond_jp VFMHealthy){\"\\n\"}{end}" \
    >"$E2E_TMP/ebds.txt"
  expect_eq "EBDs in $ns" "$n" "$(grep -c . "$E2E_TMP/ebds.txt" || true)"
  bad=$(awk '$3 != 1 || $4 != 1 || $5 != "True/Ready/1" || $6 != "True/Installed/1" || $7 != "True/Ready/1"' \
    "$E2E_TMP/ebds.txt")
  if [[ -n $bad ]]; then
    echo "$bad" | head -n 5 | sed 's/^/  /'
    fail "$(echo "$bad" | wc -l) EBD(s) not fully Ready at generation 1 (NAME UID GEN OBSGEN Ready Installed VFMHealthy)" \
      "'<name> <uid> 1 1 True/Ready/1 True/Installed/1 True/Ready/1'" "'$(echo "$bad" | head -n 1)'"
  fi
  pass "all $n EBDs: generation 1, observedGeneration 1, Ready/Installed/VFMHealthy True with observedGeneration 1"
}

# check_children NS: after check_all_ready, every EBD has exactly one VFM
# <name> and one ConfigMap <name>-config (labelled managed-by=ebdman), each
# with a single ownerReference, the controller one (blockOwnerDeletion), to
# that EBD (by uid), and there are no other VFMs or ebdman ConfigMaps.
check_children() {
  local ns=$1 n kind d
  local ref='{.metadata.ownerReferences[?(@.controller==true)].uid}|{.metadata.ownerReferences[?(@.controller==true)].kind}|{.metadata.ownerReferences[?(@.controller==true)].apiVersion}|{.metadata.ownerReferences[?(@.controller==true)].name}|{.metadata.ownerReferences[?(@.controller==true)].blockOwnerDeletion}|{.metadata.ownerReferences[*].uid}'
  n=$(grep -c . "$E2E_TMP/ebds.txt" || true)
  awk '{ printf "%s|%s|EBD|ebdman.example.com/v1beta1|%s|true|%s|%s\n", $1, $2, $1, $2, $1 }' \
    "$E2E_TMP/ebds.txt" | sort >"$E2E_TMP/want-vfms.txt"
  awk '{ printf "%s-config|%s|EBD|ebdman.example.com/v1beta1|%s|true|%s|%s\n", $1, $2, $1, $2, $1 }' \
    "$E2E_TMP/ebds.txt" | sort >"$E2E_TMP/want-configmaps.txt"
  k -n "$ns" get vfms -o jsonpath="{range .items[*]}{.metadata.name}|$ref|{.metadata.labels.ebdman\.example\.com/ebd}{\"\\n\"}{end}" |
    sort >"$E2E_TMP/vfms.txt"
  k -n "$ns" get configmaps -l app.kubernetes.io/managed-by=ebdman \
    -o jsonpath="{range .items[*]}{.metadata.name}|$ref|{.metadata.labels.ebdman\.example\.com/ebd}{\"\\n\"}{end}" |
    sort >"$E2E_TMP/configmaps.txt"
  for kind in vfms configmaps; do
    if ! d=$(diff "$E2E_TMP/want-$kind.txt" "$E2E_TMP/$kind.txt"); then
      echo "$d" | head -n 8 | sed 's/^/  /'
      fail "$kind: one per EBD with a single controller ownerReference (NAME|UID|KIND|APIVERSION|OWNER|BLOCK|ALLOWNERS|LABEL)" \
        "$n lines as in $E2E_TMP/want-$kind.txt" "the diff above"
    fi
    pass "$n $kind, one per EBD, each with exactly one (controller) ownerReference to it"
  done
  expect_eq "VFMs in $ns" "$n" "$(count "$ns" vfms)"
  expect_eq "ConfigMaps managed by ebdman in $ns" "$n" \
    "$(count "$ns" configmaps app.kubernetes.io/managed-by=ebdman)"
}

# _current_report NS: one line per EBD of NS that is not current (see
# conditions_current), "NAME: what (want X, got Y)"; the last line is
# "N EBDs, M not current". Leaves "NAME UID GENERATION" lines for every EBD
# in $E2E_TMP/ebds.txt (what check_children reads).
_current_report() {
  local ns=$1 fields t f
  fields="{.kind}{\"\\t\"}{.metadata.name}{\"\\t\"}{.metadata.uid}{\"\\t\"}{.metadata.generation}"
  fields+="{\"\\t\"}{.status.observedGeneration}{\"\\t\"}{.spec.vfmTemplate}{\"\\t\"}{.spec}"
  fields+="{\"\\t\"}{.metadata.annotations.vfm-sim\\.ebdman\\.example\\.com/fail}"
  fields+="{\"\\t\"}{.metadata.annotations.vfm-sim\\.ebdman\\.example\\.com/delay}"
  for t in Ready Installed VFMHealthy Stalled Reconciling; do
    for f in status reason message observedGeneration; do
      fields+="{\"\\t\"}{.status.conditions[?(@.type==\"$t\")].$f}"
    done
  done
  {
    k -n "$ns" get configmaps -l app.kubernetes.io/managed-by=ebdman \
      -o jsonpath='{range .items[*]}CM{"\t"}{.metadata.name}{"\t"}{.data}{"\n"}{end}' || echo "ERROR"
    k -n "$ns" get ebds,vfms -o jsonpath="{range .items[*]}$fields{\"\\n\"}{end}" || echo "ERROR"
  } | awk -F'\t' -v list="$E2E_TMP/ebds.txt" '
    function norm(m) { return m == "{}" ? "" : m }
    $1 == "ERROR" { err = 1; next }
    $1 == "CM" { cm[$2] = norm($3); hascm[$2] = 1; next }
    $1 == "VFM" {
      vfm[$2] = 1; vgen[$2] = $4; vspec[$2] = $7; vfail[$2] = $8; vdelay[$2] = $9
      vrs[$2] = $10; vrr[$2] = $11; vrm[$2] = $12; vrg[$2] = $13; next
    }
    $1 == "EBD" {
      n++; name[n] = $2; uid[n] = $3; gen[n] = $4; og[n] = $5; spec[n] = $6
      fail[n] = $8; delay[n] = $9
      r[n] = $10 "/" $11 "/" $13; rmsg[n] = $12
      i_[n] = $14 "/" $15 "/" $17
      h[n] = $18 "/" $19 "/" $21; hmsg[n] = $20
      st[n] = $22 "/" $23 "/" $25; stmsg[n] = $24; rec[n] = $26 "/" $27 "/" $29
    }
    function bad(i, what, want, got) {
      if (!(i in reported)) { nbad++; reported[i] = 1 }
      printf "%s: %s (want %s, got %s)\n", name[i], what, want, got
    }
    END {
      if (err) { print "kubectl get failed"; exit 1 }
      printf "" >list
      for (i = 1; i <= n; i++) {
        e = name[i]; g = gen[i]
        printf "%s %s %s\n", e, uid[i], g >list
        if (og[i] != g) bad(i, "status.observedGeneration", g, "\"" og[i] "\"")
        if (i_[i] != "True/Installed/" g) bad(i, "Installed", "True/Installed/" g, i_[i])
        if (!(e in vfm)) { bad(i, "its VFM", "present", "none"); continue }
        if (vspec[e] != spec[i]) bad(i, "VFM spec", spec[i], vspec[e])
        if (vfail[e] != fail[i]) bad(i, "VFM fail annotation", "\"" fail[i] "\"", "\"" vfail[e] "\"")
        if (vdelay[e] != delay[i]) bad(i, "VFM delay annotation", "\"" delay[i] "\"", "\"" vdelay[e] "\"")
        # The VFM owner has reported on the current VFM generation, and settled.
        if (vrg[e] != vgen[e] || vrs[e] == "" || vrr[e] == "Progressing")
          bad(i, "VFM Ready (status/reason/observedGeneration; VFM generation " vgen[e] ")",
              "a settled report for generation " vgen[e], vrs[e] "/" vrr[e] "/" vrg[e])
        # What ebdman must say about that VFM (operator/ebdman/conditions.c).
        if (vrs[e] == "True") { hw = "True/Ready/" g; hm = "vfm custom resource is ready" }
        else if (vrs[e] == "False" && vrr[e] == "Failed") {
          hw = "False/Error/" g; hm = vrm[e] != "" ? vrm[e] : "vfm custom resource failed"
        } else { hw = "False/Progressing/" g; hm = "vfm custom resource is not ready" }
        if (h[i] != hw) bad(i, "VFMHealthy", hw, h[i])
        if (hmsg[i] != hm) bad(i, "VFMHealthy message", "\"" hm "\"", "\"" hmsg[i] "\"")
        split(hw, hp, "/")
        rw = hp[1] == "True" ? "True/Ready/" g : "False/" hp[2] "/" g
        rm = hp[1] == "True" ? "ebd is ready" : hm
        if (r[i] != rw) bad(i, "Ready", rw, r[i])
        if (rmsg[i] != rm) bad(i, "Ready message", "\"" rm "\"", "\"" rmsg[i] "\"")
        # kstatus: a failed VFM is Stalled, one not ready for another
        # reason Reconciling, with the reason and message of Ready; neither when
        # ready ("//": absent).
        sw = hp[2] == "Error" ? "True/Error/" g : "//"
        cw = hp[2] == "Progressing" ? "True/Progressing/" g : "//"
        if (st[i] != sw) bad(i, "Stalled", sw, st[i])
        if (sw != "//" && stmsg[i] != rm) bad(i, "Stalled message", "\"" rm "\"", "\"" stmsg[i] "\"")
        if (rec[i] != cw) bad(i, "Reconciling", cw, rec[i])
        c = e "-config"
        if (!(c in hascm)) bad(i, "its ConfigMap " c, "present", "none")
        else {
          want = spec[i]
          if (match(want, /"config":\{[^{}]*\}/)) want = substr(want, RSTART + 9, RLENGTH - 9)
          else want = ""
          if (cm[c] != norm(want)) bad(i, "ConfigMap data", want, cm[c])
        }
      }
      printf "%d EBDs, %d not current\n", n, nbad
    }'
}

# conditions_current NS N: succeeds when NS holds exactly N EBDs and every
# one is current whatever its generation: status.observedGeneration and the
# observedGeneration of Ready, Installed and VFMHealthy equal
# metadata.generation; Installed is True; its VFM carries the EBD's spec.vfmTemplate
# and vfm-sim annotations, and vfm-sim has settled on it (Ready reported for
# the VFM's current generation, not Progressing); VFMHealthy and Ready say
# what that report says (True -> True/Ready; False/Failed -> False/Error with
# its message; ebdman's conditions.c), so do Stalled (True for Failed) and
# Reconciling (True when not ready for another reason; neither when ready),
# and its ConfigMap holds spec.vfmTemplate.config.
# Prints "N EBDs, M not current" and the first mismatches (for wait_for).
conditions_current() {
  local out
  out=$(_current_report "$1") || { echo "$out"; return 1; }
  tail -n 1 <<<"$out"
  sed '$d' <<<"$out" | sed -n '1,5p' # (sed reads to the end: no SIGPIPE)
  [[ $(tail -n 1 <<<"$out") == "$2 EBDs, 0 not current" ]]
}

# check_conditions_current NS N: asserts conditions_current NS N (the
# generalisation of check_all_ready to EBDs whose generation moved and whose
# VFM may have failed), printing the mismatches. Leaves "NAME UID GENERATION"
# lines in $E2E_TMP/ebds.txt for check_children.
check_conditions_current() {
  local ns=$1 n=$2 out last
  out=$(_current_report "$ns") || fail "reading the EBDs, VFMs and ConfigMaps of $ns: $out"
  last=$(tail -n 1 <<<"$out")
  if [[ $last != "$n EBDs, 0 not current" ]]; then
    sed '$d' <<<"$out" | sed -n '1,10s/^/  /p'
    fail "EBDs in $ns current (observedGeneration = generation; conditions = what the VFM says)" \
      "'$n EBDs, 0 not current'" "'$last' (mismatches above)"
  fi
  pass "all $n EBDs current: observedGeneration = generation everywhere, conditions = what the VFM says, children hold the spec"
}

# request_codes LABEL: the process's API requests by HTTP status, from
# rest_client_requests_total, as "CODE=COUNT ..." (<error>: no answer).
request_codes() {
  scrape "$1" | awk '/^rest_client_requests_total\{/ {
      if (match($0, /code="[^"]*"/)) c[substr($0, RSTART + 6, RLENGTH - 7)] += $NF
    }
    END { for (k in c) printf "%s=%d ", k, c[k]; printf "\n" }' | tr ' ' '\n' | sort | tr '\n' ' '
}

# relists LABEL [INFORMER]: how many times the informers of LABEL (or the one
# named INFORMER, e.g. ebds.ebdman.example.com) listed again after their
# watch was answered 410 Gone (the informer's info log line).
relists() {
  local pat='resourceVersion too old; listing again'
  if [[ -n ${2:-} ]]; then
    grep -F "$pat" "${E2E_LOG[$1]}" | grep -cF "informer=$2 " || true
  else
    grep -cF "$pat" "${E2E_LOG[$1]}" || true
  fi
}

# ---- apiserver faults ---------------------------------------------------------

E2E_WARMUP=() # "FROM TO" (UTC, as in the process logs) per apiserver (re)start

# utc_now: the time as the process logs print it (ts=...), which sorts as text.
utc_now() { date -u +%Y-%m-%dT%H:%M:%S.%6NZ; }

# apiserver_pid: the pid of the control plane's current kube-apiserver.
apiserver_pid() { cat "$KCR_CONTROLPLANE_DIR/apiserver.pid"; }

# kill_apiserver: SIGKILLs the current kube-apiserver (no graceful shutdown:
# every connection is cut) and waits until it is gone (a zombie counts as
# gone: the control plane's script reaps it). Start it again with
# restart_apiserver --start-only.
kill_apiserver() {
  local pid st i
  pid=$(apiserver_pid)
  kill -KILL "$pid" || fail "kill -KILL kube-apiserver (pid $pid)"
  for ((i = 0; i < 100; i++)); do
    st=$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null) || return 0
    [[ $st == Z || $st == X ]] && return 0
    sleep 0.1
  done
  fail "kube-apiserver (pid $pid) still running 10 s after SIGKILL"
}

# restart_apiserver [ARGS...]: tools/controlplane/restart-apiserver ARGS
# (stop with SIGTERM, SIGKILL after 5 s; start; wait for /readyz), its output
# appended to $E2E_TMP/restart-apiserver.log. Records the warm-up window, from
# the call until 5 s after /readyz: a starting apiserver serves requests
# before its caches are filled, and refuses some in that time (403 until the
# RBAC authorizer has its roles, 429 while a watch cache initialises).
restart_apiserver() {
  local from rc=0
  from=$(utc_now)
  "$KCR_SOURCE_DIR/tools/controlplane/restart-apiserver" "$@" \
    2>>"$E2E_TMP/restart-apiserver.log" || rc=$?
  E2E_WARMUP+=("$from $(date -u -d '+5 seconds' +%Y-%m-%dT%H:%M:%S.%6NZ)")
  if ((rc != 0)); then
    tail -n 20 "$E2E_TMP/restart-apiserver.log" | sed 's/^/  /'
    fail "tools/controlplane/restart-apiserver $* (exit status $rc)"
  fi
}

# shard_gate: with E2E_SHARD_GATE=on, restarts the apiserver with its
# ShardedListAndWatch feature gate on (and without it again at exit, also on
# failure). Sets E2E_GATE to on or off. check_no_forbidden_gate then allows
# the restarted apiserver's warm-up.
shard_gate() {
  E2E_GATE=${E2E_SHARD_GATE:-off}
  [[ $E2E_GATE == on ]] || return 0
  E2E_EXIT_HOOKS+=(_shard_gate_off)
  restart_apiserver --arg --feature-gates=ShardedListAndWatch=true
}
_shard_gate_off() {
  "$KCR_SOURCE_DIR/tools/controlplane/restart-apiserver" 2>>"$E2E_TMP/restart-apiserver.log" || true
}
check_no_forbidden_gate() {
  if [[ ${E2E_GATE:-off} == on ]]; then check_no_forbidden_but_warmup "$@"; else check_no_forbidden "$@"; fi
}

# check_no_forbidden_but_warmup LABEL...: check_no_forbidden, except for the
# refusals logged while a restarted apiserver warmed up (the windows of
# restart_apiserver), which are counted: E2E_WARMUP_403 holds the number.
check_no_forbidden_but_warmup() {
  local label out
  E2E_WARMUP_403=0
  for label in "$@"; do
    out=$({ grep -i 'forbidden' "${E2E_LOG[$label]}" || true; } |
      awk -v windows="${E2E_WARMUP[*]}" '
        BEGIN { n = split(windows, w, " ") }
        {
          ts = ""
          if (match($0, /^ts=[^ ]*/)) ts = substr($0, 4, RLENGTH - 3)
          for (i = 1; i < n; i += 2) if (ts != "" && ts >= w[i] && ts <= w[i + 1]) { warm++; next }
          if (bad < 5) print
          bad++
        }
        END { printf "%d\n", warm }')
    E2E_WARMUP_403=$((E2E_WARMUP_403 + $(tail -n 1 <<<"$out")))
    if [[ $(wc -l <<<"$out") -gt 1 ]]; then
      sed '$d' <<<"$out" | sed "s/^/  [$label] /"
      fail "${E2E_KIND[$label]} $label: a request was refused by RBAC outside an apiserver's warm-up" \
        "no 403/forbidden in the log but while a restarted apiserver warmed up" "the lines above"
    fi
  done
  pass "no request refused by RBAC in the logs of $* but during apiserver warm-ups ($E2E_WARMUP_403 lines then)"
}

# ---- namespaces ------------------------------------------------------------

# new_ns: creates a fresh namespace for this test, sets E2E_NS to its name and
# registers it for deletion on exit. (Call it directly, not in $(...), or the
# registration would be lost in the subshell.)
new_ns() {
  local suffix
  suffix=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' | head -c 6)
  E2E_NS="e2e-${E2E_NAME//_/-}-$suffix"
  k create namespace "$E2E_NS" >/dev/null
  E2E_NAMESPACES+=("$E2E_NS")
  log "namespace $E2E_NS"
}

# ---- processes ---------------------------------------------------------------

# free_port: sets E2E_PORT to a port nobody listens on (below the ephemeral
# range the control plane's kernel-picked ports come from) and not handed out
# before in this test. The starters retry when a bind still fails.
E2E_USED_PORTS=" "
free_port() {
  local p i
  for ((i = 0; i < 200; i++)); do
    p=$((20000 + (RANDOM * 32768 + RANDOM) % 12000))
    [[ $E2E_USED_PORTS == *" $p "* ]] && continue
    if (: </dev/tcp/127.0.0.1/$p) 2>/dev/null; then continue; fi
    E2E_USED_PORTS+="$p "
    E2E_PORT=$p
    return 0
  done
  fail "no free TCP port found"
}

# proc_alive LABEL
proc_alive() { kill -0 "${E2E_PID[$1]}" 2>/dev/null; }

# _start_proc KIND LABEL BIN HEALTH-PORT ARGS...: starts and waits for /readyz.
# Returns 3 (to retry on other ports) when the process could not bind.
_start_proc() {
  local kind=$1 label=$2 bin=$3 hport=$4 start=$SECONDS logf
  shift 4
  logf=$E2E_TMP/$label.log
  printf '%s\n' "----- $(date -u +%FT%TZ) $bin $*" >>"$logf"
  "$bin" "$@" >>"$logf" 2>&1 &
  E2E_PID[$label]=$!
  E2E_LOG[$label]=$logf
  E2E_KIND[$label]=$kind
  [[ " ${E2E_PROCS[*]} " == *" $label "* ]] || E2E_PROCS+=("$label")
  while :; do
    if ! proc_alive "$label"; then
      local rc=0
      wait "${E2E_PID[$label]}" || rc=$?
      if grep -qE 'cannot (start the metrics/health server|listen on .*in use)' "$logf"; then
        return 3
      fi
      tail -n 30 "$logf" | sed "s/^/  [$label] /"
      fail "$kind $label exited during start-up with status $rc (log: $logf)"
    fi
    if curl -sf -o /dev/null --max-time 2 "http://127.0.0.1:$hport/readyz"; then
      log "$kind $label ready (pid ${E2E_PID[$label]}, $((SECONDS - start)) s)"
      return 0
    fi
    if ((SECONDS - start >= 120)); then
      tail -n 30 "$logf" | sed "s/^/  [$label] /"
      fail "$kind $label not ready (/readyz on port $hport) within 120 s"
    fi
    sleep 0.3
  done
}

# start_ebdman LABEL [ebdman run ARGS...]: runs `ebdman run` under the
# ServiceAccount kubeconfig with free metrics and health ports, and waits until
# /readyz answers (informers synced). Pass --namespace "$E2E_NS" for isolation
# (and --leader-elect --leader-election-namespace ebdman-system for leaders).
# Metrics plain (scrape reads them; test_secure_metrics.sh passes
# --metrics-secure=true). Logs at debug level: a refused event write is retried and logged (with its
# 403) only at debug level at first, and check_no_forbidden must see it.
# Sets E2E_METRICS[LABEL] / E2E_HEALTH[LABEL] to the ports.
start_ebdman() {
  local label=$1 rc
  shift
  for _ in 1 2 3; do
    free_port; E2E_METRICS[$label]=$E2E_PORT
    free_port; E2E_HEALTH[$label]=$E2E_PORT
    rc=0
    _start_proc ebdman "$label" "$KCR_EBDMAN_BIN" "${E2E_HEALTH[$label]}" run \
      --kubeconfig "$E2E_SA_KUBECONFIG" \
      --metrics-bind-address "127.0.0.1:${E2E_METRICS[$label]}" \
      --health-probe-bind-address "127.0.0.1:${E2E_HEALTH[$label]}" --zap-log-level debug \
      --metrics-secure=false "$@" ||
      rc=$?
    ((rc == 3)) || return 0
  done
  fail "ebdman $label could not bind its metrics/health ports (log: ${E2E_LOG[$label]})"
}

# start_vfm_sim LABEL [vfm-sim ARGS...]: vfm-sim under its own ServiceAccount
# (config/vfm-sim), metrics and health on one free port.
start_vfm_sim() {
  local label=$1 rc
  shift
  for _ in 1 2 3; do
    free_port; E2E_METRICS[$label]=$E2E_PORT
    E2E_HEALTH[$label]=$E2E_PORT
    rc=0
    _start_proc vfm-sim "$label" "$KCR_VFMSIM_BIN" "$E2E_PORT" \
      --kubeconfig "$E2E_VFMSIM_KUBECONFIG" --metrics-bind-address "127.0.0.1:$E2E_PORT" \
      --health-probe-bind-address "127.0.0.1:$E2E_PORT" "$@" ||
      rc=$?
    ((rc == 3)) || return 0
  done
  fail "vfm-sim $label could not bind its metrics port (log: ${E2E_LOG[$label]})"
}

# start_sim_and_op NS DELAY [ARGS...]: vfm-sim "sim" answering after DELAY
# and one ebdman "op" (with ARGS), both on namespace NS.
start_sim_and_op() {
  start_vfm_sim sim --namespace "$1" --delay "$2"
  start_ebdman op --namespace "$1" "${@:3}"
}

# stop_proc LABEL [SIGNAL]: sends SIGNAL (default TERM), waits for the exit
# (SIGKILL after 15 s) and sets E2E_EXIT to the exit status.
stop_proc() {
  local label=$1 sig=${2:-TERM} pid=${E2E_PID[$1]:-} i
  E2E_EXIT=0
  [[ -n $pid ]] || return 0
  { # (stderr: no "Killed" job notice from bash)
    kill -"$sig" "$pid" || true
    for ((i = 0; i < 150; i++)); do
      kill -0 "$pid" || break
      sleep 0.1
    done
    if kill -0 "$pid"; then
      log "$label (pid $pid) still running 15 s after SIG$sig; killing it"
      kill -KILL "$pid" || true
    fi
    wait "$pid" || E2E_EXIT=$?
  } 2>/dev/null
  E2E_PID[$label]=
}

# ---- the fault-injecting proxy (tests/chaos/chaosproxy.c) -----------------

declare -A E2E_PROXY_PORT=() E2E_PROXY_RULES=()

# start_chaosproxy LABEL [chaosproxy ARGS...]: chaosproxy in front of the
# apiserver on free ports, with the rules file $E2E_TMP/LABEL.rules (empty
# at first; see proxy_rules). Sets E2E_PROXY_PORT[LABEL] and
# E2E_METRICS[LABEL], so `metric LABEL NAME ...` reads its counts. Needs
# KCR_CHAOSPROXY_BIN (tests/CMakeLists.txt sets it).
start_chaosproxy() {
  local label=$1 rc pki=$KCR_CONTROLPLANE_DIR/pki
  shift
  [[ -x ${KCR_CHAOSPROXY_BIN:-} ]] || fail "KCR_CHAOSPROXY_BIN=${KCR_CHAOSPROXY_BIN:-} is not an executable"
  E2E_PROXY_RULES[$label]=$E2E_TMP/$label.rules
  : >"${E2E_PROXY_RULES[$label]}"
  for _ in 1 2 3; do
    free_port; E2E_PROXY_PORT[$label]=$E2E_PORT
    free_port; E2E_METRICS[$label]=$E2E_PORT
    E2E_HEALTH[$label]=$E2E_PORT
    rc=0
    _start_proc chaosproxy "$label" "$KCR_CHAOSPROXY_BIN" "$E2E_PORT" \
      --upstream "$KCR_APISERVER_URL" --ca-cert "$pki/ca.crt" --ca-key "$pki/ca.key" \
      --listen "127.0.0.1:${E2E_PROXY_PORT[$label]}" \
      --metrics-bind-address "127.0.0.1:${E2E_METRICS[$label]}" \
      --rules "${E2E_PROXY_RULES[$label]}" "$@" || rc=$?
    ((rc == 3)) || return 0
  done
  fail "chaosproxy $label could not bind its ports (log: ${E2E_LOG[$label]})"
}

# proxy_rules LABEL < RULES: puts the rules (tests/chaos/rules.h) read from
# stdin in effect in proxy LABEL: writes its file, sends SIGHUP and waits
# until it has re-read them (a bad file fails the test).
proxy_rules() {
  local label=$1 ok bad i
  ok=$(metric "$label" chaosproxy_rules_loads_total 'result="ok"') || fail "$ok"
  bad=$(metric "$label" chaosproxy_rules_loads_total 'result="error"') || fail "$bad"
  cat >"${E2E_PROXY_RULES[$label]}"
  kill -HUP "${E2E_PID[$label]}"
  for ((i = 0; i < 100; i++)); do
    (($(metric "$label" chaosproxy_rules_loads_total 'result="ok"') > ok)) && return 0
    (($(metric "$label" chaosproxy_rules_loads_total 'result="error"') > bad)) &&
      fail "chaosproxy $label refused its rules (log: ${E2E_LOG[$label]})"
    sleep 0.1
  done
  fail "chaosproxy $label did not re-read its rules within 10 s"
}

# via_proxy KUBECONFIG LABEL: writes a copy of KUBECONFIG whose server is
# proxy LABEL (same credentials and CA) and prints its path.
via_proxy() {
  local out=${1%.kubeconfig}-via-$2.kubeconfig
  sed -E "s#^( *server: ).*#\\1https://127.0.0.1:${E2E_PROXY_PORT[$2]}#" "$1" >"$out"
  echo "$out"
}

# ---- metrics -----------------------------------------------------------------

# scrape LABEL: the process's /metrics text.
scrape() { curl -sf --max-time 5 "http://127.0.0.1:${E2E_METRICS[$1]}/metrics"; }

# api_metric NAME [LABEL="VALUE"...]: as metric, of the apiserver's /metrics.
api_metric() {
  local name=$1 text
  shift
  text=$(k get --raw /metrics) || { echo "cannot read the apiserver's /metrics"; return 1; }
  _metric_sum "$name" "$*" <<<"$text"
}

# metric LABEL NAME [LABEL="VALUE"...]: sum of the series of NAME that carry all
# the given label pairs (0 when none). Fails when /metrics cannot be read.
metric() {
  local label=$1 name=$2 text
  shift 2
  text=$(scrape "$label") || { echo "cannot scrape /metrics of $label"; return 1; }
  _metric_sum "$name" "$*" <<<"$text"
}

# _metric_sum NAME FILTER: the sum of NAME's series in the text on stdin that
# carry every label pair of FILTER (space-separated).
_metric_sum() {
  awk -v name="$1" -v filt="$2" '
    BEGIN { n = split(filt, F, " ") }
    /^#/ || NF < 2 { next }
    {
      series = $0; sub(/[ \t]+[^ \t]+$/, "", series)
      base = series; sub(/\{.*/, "", base)
      if (base != name) next
      for (i = 1; i <= n; i++) if (index(series, F[i]) == 0) next
      sum += $NF
    }
    END { printf "%.0f\n", sum }'
}

# reconciles LABEL: reconciles the ebd controller of LABEL has finished.
reconciles() { metric "$1" controller_runtime_reconcile_total 'controller="ebd"'; }

# ---- leader election: two replicas -----------------------------------------

# require_audit_log: fails unless $KCR_AUDIT_LOG names the control plane's
# audit log (the leader tests prove who wrote what from it).
require_audit_log() {
  [[ -n ${KCR_AUDIT_LOG:-} && -f $KCR_AUDIT_LOG ]] ||
    fail "the control plane's audit log" "\$KCR_AUDIT_LOG naming a file" "'${KCR_AUDIT_LOG:-}'"
}

# Load for hand-over tests: three writers, each bumping spec.vfmTemplate.replicas
# of a third of the EBDs e-1..e-N of namespace NS (names zero-padded to N's
# width) over and over, until storm_stop (or the end of the test).
storm_start() { # storm_start NS N
  local third=$((($2 + 2) / 3))
  touch "$E2E_TMP/storm"
  STORM_PIDS=()
  storm_writer "$1" "$2" 1 "$third" &
  STORM_PIDS+=($!)
  storm_writer "$1" "$2" $((third + 1)) $((2 * third)) &
  STORM_PIDS+=($!)
  storm_writer "$1" "$2" $((2 * third + 1)) "$2" &
  STORM_PIDS+=($!)
}
storm_writer() { # storm_writer NS N FIRST LAST
  local r=2 i
  while [[ -f $E2E_TMP/storm ]] && kill -0 $$ 2>/dev/null; do
    for ((i = $3; i <= $4 && i <= $2; i++)); do
      k -n "$1" patch ebd "e-$(printf "%0${#2}d" "$i")" --type merge \
        -p "{\"spec\":{\"vfmTemplate\":{\"replicas\":$r}}}" >/dev/null 2>&1 || true
      [[ -f $E2E_TMP/storm ]] || break
    done
    r=$((r + 1))
  done
}
storm_stop() {
  rm -f "$E2E_TMP/storm"
  wait "${STORM_PIDS[@]}"
}

# audit_ebdman SINCE: the writes (the control plane audits only writes) the
# apiserver received from ebdman processes at or after SINCE (RFC 3339), in
# time order, one per line: "RECEIVED HOST PID CODE VERB RESOURCE/NAME[/SUB] NS"
# (HOST and PID from ebdman's user agent "ebdman/V (HOST; pid PID) ...";
# NS "-" for cluster-scoped objects; CODE "?" when the log has none).
audit_ebdman() {
  grep -F '"userAgent":"ebdman/' "$KCR_AUDIT_LOG" | awk -v since="$1" '
    function field(re, skip) { return match($0, re) ? substr($0, RSTART + skip, RLENGTH - skip - 1) : "" }
    {
      ts = field("\"requestReceivedTimestamp\":\"[^\"]*\"", 28)
      if (ts < since) next
      ua = field("\"userAgent\":\"[^\"]*\"", 13)
      host = pid = "?"
      if (match(ua, /\([^;]*; pid [0-9]+\)/)) {
        split(substr(ua, RSTART + 1, RLENGTH - 2), hp, "; pid ")
        host = hp[1]; pid = hp[2]
      }
      verb = field("\"verb\":\"[^\"]*\"", 8)
      code = match($0, /"code":[0-9]+/) ? substr($0, RSTART + 7, RLENGTH - 7) : "?"
      ref = field("\"objectRef\":\\{[^}]*\\}", 12)
      res = name = sub_ = ""; ns = "-"
      if (match(ref, /"resource":"[^"]*"/)) res = substr(ref, RSTART + 12, RLENGTH - 13)
      if (match(ref, /"namespace":"[^"]*"/)) ns = substr(ref, RSTART + 13, RLENGTH - 14)
      if (match(ref, /"name":"[^"]*"/)) name = substr(ref, RSTART + 8, RLENGTH - 9)
      if (match(ref, /"subresource":"[^"]*"/)) sub_ = "/" substr(ref, RSTART + 15, RLENGTH - 16)
      print ts, host, pid, code, verb, res "/" name sub_, ns
    }' | sort
}

# lease_holder: the holderIdentity of the Lease the replicas elect with.
lease_holder() { k -n "$E2E_SYSTEM_NS" get lease "$E2E_LEASE" -o jsonpath='{.spec.holderIdentity}'; }

# leading LABEL: the replica's leader_election_master_status gauge.
leading() { metric "$1" leader_election_master_status "name=\"$E2E_LEASE\""; }

# leaders LABELS...: the labels of the running replicas whose gauge says
# they lead.
leaders() {
  local l out=""
  for l in "$@"; do
    [[ -n ${E2E_PID[$l]:-} ]] || continue
    [[ $(leading "$l") == 1 ]] && out+="$l "
  done
  echo "${out% }"
}

# one_leader LABELS...: exactly one of them leads (prints who leads).
one_leader() {
  local got
  got=$(leaders "$@")
  echo "leaders: '$got'"
  [[ -n $got && $got != *" "* ]]
}

# start_replicas NS: ebdman replicas a and b on namespace NS with
# --leader-elect (the Lease in $E2E_SYSTEM_NS); waits (one check) until
# exactly one leads - a Lease an earlier test left expires after 15 s - and
# sets E2E_LEADER and E2E_STANDBY to their labels.
start_replicas() {
  local le=(--namespace "$1" --leader-elect --leader-election-namespace "$E2E_SYSTEM_NS")
  start_ebdman a "${le[@]}"
  start_ebdman b "${le[@]}"
  wait_for 60 "exactly one replica leads" one_leader a b
  E2E_LEADER=$(leaders a b)
  if [[ $E2E_LEADER == a ]]; then E2E_STANDBY=b; else E2E_STANDBY=a; fi
}

# ebd_idle LABEL MIN: the ebd controller of LABEL has finished at least MIN
# reconciles in all and has nothing queued or running (for wait_for).
ebd_idle() {
  local total depth active
  total=$(reconciles "$1") || return 1
  depth=$(metric "$1" workqueue_depth 'name="ebd"') || return 1
  active=$(metric "$1" controller_runtime_active_workers 'controller="ebd"') || return 1
  echo "reconciles=$total (want >= $2) depth=$depth active=$active"
  ((total >= $2 && depth == 0 && active == 0))
}

# ---- log checks ------------------------------------------------------------

# check_no_forbidden LABEL...: fails when a log shows a request RBAC refused
# (the shipped manifests would be insufficient), quoting the refusals.
check_no_forbidden() {
  local label lines
  for label in "$@"; do
    lines=$(grep -i 'forbidden' "${E2E_LOG[$label]}" | head -n 5 || true)
    if [[ -n $lines ]]; then
      printf '%s\n' "$lines" | sed "s/^/  [$label] /"
      fail "${E2E_KIND[$label]} $label: a request was refused by RBAC (shipped config/rbac insufficient?)" \
        "no 403/forbidden in the log" "the lines above"
    fi
  done
  pass "no request refused by RBAC in the logs of: $*"
}

# ---- setup -------------------------------------------------------------------

_cleanup() {
  local rc=$? label ns o
  set +e
  trap - EXIT INT TERM
  for label in $(_procs_lifo); do
    [[ -n ${E2E_PID[$label]:-} ]] && stop_proc "$label" TERM
  done
  if ((rc != 0)); then
    for label in "${E2E_PROCS[@]}"; do
      echo "--- last lines of ${E2E_KIND[$label]} $label (${E2E_LOG[$label]}):"
      tail -n 25 "${E2E_LOG[$label]}" | sed "s/^/  [$label] /"
    done
    for ns in "${E2E_NAMESPACES[@]}"; do
      echo "--- EBDs in $ns:"
      k -n "$ns" get ebds 2>&1 | head -n 15 | sed 's/^/  /'
    done
    echo "e2e $E2E_NAME: $E2E_PASSED passed, $((E2E_FAILED > 0 ? E2E_FAILED : 1)) failed ($((SECONDS - E2E_START)) s; logs kept in $E2E_TMP)"
  fi
  for o in "${E2E_CLUSTER_OBJECTS[@]}"; do
    k delete "$o" --ignore-not-found --wait=false >/dev/null 2>&1 ||
      echo "e2e $E2E_NAME: could not delete $o: delete it by hand"
  done
  for o in "${E2E_EXIT_HOOKS[@]}"; do
    "$o" || echo "e2e $E2E_NAME: $o failed: later tests may find the cluster changed"
  done
  for ns in "${E2E_NAMESPACES[@]}"; do
    k delete namespace "$ns" --wait=false >/dev/null 2>&1
  done
  if ((rc == 0)) && [[ -n $E2E_TMP ]]; then
    if [[ ${E2E_KEEP_LOGS:-0} == 1 ]]; then
      echo "e2e $E2E_NAME: logs kept in $E2E_TMP (E2E_KEEP_LOGS=1)"
    else
      rm -rf "$E2E_TMP"
    fi
  fi
  exit "$rc"
}

_require_env() {
  local v
  for v in KUBECONFIG KCR_CONTROLPLANE_BIN KCR_CONTROLPLANE_DIR KCR_APISERVER_URL \
    KCR_SOURCE_DIR KCR_EBDMAN_BIN KCR_VFMSIM_BIN; do
    [[ -n ${!v:-} ]] || fail "environment variable $v is not set (run under tools/controlplane/start --with-controller-manager, through ctest -L e2e)"
  done
  [[ -x $KCR_EBDMAN_BIN ]] || fail "KCR_EBDMAN_BIN=$KCR_EBDMAN_BIN is not an executable"
  [[ -x $KCR_VFMSIM_BIN ]] || fail "KCR_VFMSIM_BIN=$KCR_VFMSIM_BIN is not an executable"
  [[ -x $KCR_CONTROLPLANE_BIN/kubectl ]] || fail "no kubectl in KCR_CONTROLPLANE_BIN=$KCR_CONTROLPLANE_BIN"
}

# retry CMD...: runs CMD up to 3 times, 1 s apart (an apply racing another
# test's apply of the same object can meet a 409 conflict).
retry() {
  local i
  for i in 1 2 3; do
    "$@" && return 0
    ((i < 3)) && sleep 1
  done
  return 1
}

# ebd_crd_v1alpha1_only: the EBD CRD as it was before v1beta1, made from
# config/crd/bases: v1alpha1 alone, the storage version, not deprecated.
ebd_crd_v1alpha1_only() {
  awk '/^  - additionalPrinterColumns:/ { blocks++ }
       blocks == 2 { next }
       /^    deprecated: true$/ { next }
       /^    deprecationWarning:/ { dw = 1; next }
       dw && /^      / { next }
       { dw = 0 }
       /^    storage: false$/ { print "    storage: true"; next }
       { print }' "$KCR_SOURCE_DIR/config/crd/bases/ebdman.example.com_ebds.yaml"
}

# delete_ebd_crd: deletes the EBD CRD, and every EBD with it. Its
# conversion is set to None first: deleting EBDs stored in another version
# would otherwise need a conversion webhook that may be gone, and the
# deletion would never end (kubernetes/kubernetes#71925).
delete_ebd_crd() {
  k patch crd ebds.ebdman.example.com --type merge \
    -p '{"spec":{"conversion":{"strategy":"None","webhook":null}}}' >/dev/null 2>&1 || true
  k delete crd ebds.ebdman.example.com --ignore-not-found --timeout=120s >/dev/null ||
    fail "could not delete the EBD CRD"
}

# install_crds: applies config/crd/bases (server-side, idempotent) and waits
# until both CRDs are Established and served. An EBD CRD that a test left
# otherwise (a conversion webhook, a version not served, something stored
# but as v1beta1: test_conversion.sh) is deleted first - with every EBD -
# since apply cannot undo what another field manager set.
install_crds() {
  local state
  state=$(k get crd ebds.ebdman.example.com -o jsonpath='{.spec.conversion.strategy} {.spec.versions[*].served} {.status.storedVersions}' 2>/dev/null || true)
  if [[ -n $state && $state != 'None true true ["v1beta1"]' ]]; then
    log "the EBD CRD is not as config/crd/bases has it ($state): replacing it"
    delete_ebd_crd
  fi
  retry k apply --server-side --force-conflicts --field-manager=kcr-e2e \
    -f "$KCR_SOURCE_DIR/config/crd/bases" >/dev/null ||
    fail "kubectl apply -f config/crd/bases failed"
  k wait --for=condition=Established --timeout=60s \
    crd/ebds.ebdman.example.com crd/vfms.ebdman.example.com >/dev/null ||
    fail "CRDs not Established within 60 s"
  local i
  for ((i = 0; i < 60; i++)); do
    k get ebds,vfms -A -o name >/dev/null 2>&1 && return 0
    sleep 0.5
  done
  fail "the ebds/vfms resources are not served 30 s after the CRDs were Established"
}

# select_kinds KIND...: keeps only the YAML documents (of a rendered stream)
# whose top-level kind is one of KIND.
select_kinds() {
  awk -v keep="$*" '
    BEGIN { n = split(keep, a, " "); for (i = 1; i <= n; i++) K[a[i]] = 1 }
    function flush() { if (doc != "" && (kind in K)) printf "---\n%s", doc; doc = ""; kind = "" }
    /^---$/ { flush(); next }
    { doc = doc $0 "\n"; if (kind == "" && $0 ~ /^kind: /) kind = $2 }
    END { flush() }'
}

# _token_kubeconfig SA FILE: a kubeconfig for ebdman-system/SA with a fresh token.
_token_kubeconfig() {
  local sa=$1 file=$2 token
  token=$(k create token "$sa" -n "$E2E_SYSTEM_NS" --duration=2h) ||
    fail "kubectl create token $sa -n $E2E_SYSTEM_NS failed"
  (
    umask 077
    cat >"$file" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: e2e
  cluster:
    server: $KCR_APISERVER_URL
    certificate-authority: $KCR_CONTROLPLANE_DIR/pki/ca.crt
users:
- name: $sa
  user:
    token: $token
contexts:
- name: $sa
  context:
    cluster: e2e
    user: $sa
    namespace: $E2E_SYSTEM_NS
current-context: $sa
EOF
  )
}

# install_rbac: the operator's RBAC exactly as shipped: `kubectl kustomize
# config/default` (names prefixed ebdman-, namespace ebdman-system), of which
# only the Namespace, ServiceAccount, Role(Binding)s and ClusterRole(Binding)s
# are applied (not the CRDs, which install_crds handles, nor the Deployment).
# Also vfm-sim's RBAC (config/vfm-sim). Then token kubeconfigs for both.
install_rbac() {
  local rendered=$E2E_TMP/rbac.yaml
  k kustomize "$KCR_SOURCE_DIR/config/default" |
    select_kinds Namespace ServiceAccount Role ClusterRole RoleBinding ClusterRoleBinding \
      >"$rendered" || fail "kubectl kustomize config/default failed"
  grep -q "name: $E2E_SA\$" "$rendered" ||
    fail "rendered config/default has no ServiceAccount $E2E_SA (see $rendered)"
  retry k apply -f "$rendered" >/dev/null || fail "applying the RBAC of config/default failed"
  retry k apply -k "$KCR_SOURCE_DIR/config/vfm-sim" >/dev/null ||
    fail "kubectl apply -k config/vfm-sim failed"
  E2E_SA_KUBECONFIG=$E2E_TMP/ebdman-sa.kubeconfig
  E2E_VFMSIM_KUBECONFIG=$E2E_TMP/vfm-sim-sa.kubeconfig
  _token_kubeconfig "$E2E_SA" "$E2E_SA_KUBECONFIG"
  _token_kubeconfig "$E2E_VFMSIM_SA" "$E2E_VFMSIM_KUBECONFIG"
  local who
  who=$(k_sa auth whoami -o jsonpath='{.status.userInfo.username}' 2>&1) || true
  [[ $who == "system:serviceaccount:$E2E_SYSTEM_NS:$E2E_SA" ]] ||
    fail "the token kubeconfig's identity" "system:serviceaccount:$E2E_SYSTEM_NS:$E2E_SA" "$who"
}

# install_webhooks VPORT MPORT: config/default's two webhook configurations
# (config/webhook), called by URL at https://127.0.0.1:VPORT (validating) and
# MPORT (mutating) - the apiserver has no route to a Service here - only for
# $E2E_NS, failurePolicy Fail and timeoutSeconds 5 (so that a webhook that is
# not reached fails the test); deleted on exit. The caBundle is left for
# ebdman to write (--webhook-certs-secret), and the certificates' Secret of
# an earlier test is deleted.
E2E_VWC=ebdman-validating-webhook-configuration
E2E_MWC=ebdman-mutating-webhook-configuration
E2E_CERTS_SECRET=ebdman-webhook-certs
install_webhooks() {
  local rendered=$E2E_TMP/webhooks.yaml
  k delete secret -n "$E2E_SYSTEM_NS" "$E2E_CERTS_SECRET" --ignore-not-found >/dev/null
  E2E_CLUSTER_OBJECTS+=("validatingwebhookconfiguration/$E2E_VWC" "mutatingwebhookconfiguration/$E2E_MWC")
  k kustomize "$KCR_SOURCE_DIR/config/default" |
    select_kinds ValidatingWebhookConfiguration MutatingWebhookConfiguration >"$rendered"
  expect_eq "config/default's webhook configurations" "$E2E_MWC $E2E_VWC" \
    "$(awk '/^metadata:/ { m = 1; next } m && /^  name:/ { print $2; m = 0 }' "$rendered" | sort | xargs)"
  retry k apply -f "$rendered" >/dev/null || fail "applying config/default's webhook configurations failed"
  _webhook_url validatingwebhookconfiguration "$E2E_VWC" "$1" /validate-ebdman-example-com-v1beta1-ebd
  _webhook_url mutatingwebhookconfiguration "$E2E_MWC" "$2" /mutate-ebdman-example-com-v1beta1-ebd
  webhook_policy validatingwebhookconfiguration "$E2E_VWC" Fail 5
  webhook_policy mutatingwebhookconfiguration "$E2E_MWC" Fail 5
  pass "webhook configurations installed (https://127.0.0.1:$1 and :$2, failurePolicy Fail, only $E2E_NS)"
}
_webhook_url() {
  k patch "$1" "$2" --type=json -p "[
    {\"op\":\"replace\",\"path\":\"/webhooks/0/clientConfig\",
     \"value\":{\"url\":\"https://127.0.0.1:$3$4\"}},
    {\"op\":\"replace\",\"path\":\"/webhooks/0/namespaceSelector\",
     \"value\":{\"matchLabels\":{\"kubernetes.io/metadata.name\":\"$E2E_NS\"}}}]" >/dev/null
}
# webhook_policy KIND NAME POLICY TIMEOUT: its failurePolicy and timeoutSeconds.
webhook_policy() {
  k patch "$1" "$2" --type=json -p "[
    {\"op\":\"replace\",\"path\":\"/webhooks/0/failurePolicy\",\"value\":\"$3\"},
    {\"op\":\"replace\",\"path\":\"/webhooks/0/timeoutSeconds\",\"value\":$4}]" >/dev/null
}
# has_bundles: both configurations carry a caBundle.
webhook_bundle() { k get "$1" "$2" -o jsonpath='{.webhooks[0].clientConfig.caBundle}'; }
has_bundles() {
  [[ -n $(webhook_bundle validatingwebhookconfiguration "$E2E_VWC") &&
    -n $(webhook_bundle mutatingwebhookconfiguration "$E2E_MWC") ]]
}

# e2e_init: checks the environment, makes the temp dir, installs the EXIT
# trap, the CRDs, the RBAC and the ServiceAccount kubeconfigs.
e2e_init() {
  _require_env
  E2E_TMP=$(mktemp -d "${TMPDIR:-/tmp}/kcr-e2e-$E2E_NAME.XXXXXX")
  export KUBECACHEDIR=$E2E_TMP/kube-cache
  trap _cleanup EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  log "start (logs in $E2E_TMP)"
  install_crds
  install_rbac
}

# _procs_lifo: the labels of the processes started, the last started first.
# What starts later may need what started before it - ebdman the chaos proxy
# that is its only way to the apiserver - so it is stopped first: stopped
# after its proxy, ebdman would spend its shutdown grace retrying the Events
# it still holds against nothing, past stop_proc's 15 s.
_procs_lifo() {
  local i
  for ((i = ${#E2E_PROCS[@]} - 1; i >= 0; i--)); do
    printf '%s\n' "${E2E_PROCS[i]}"
  done
}

# e2e_done: stops the processes still running with SIGTERM, the last started
# first (_procs_lifo), and checks that each shuts down cleanly (exit status
# 0: signal handled, lease released, and under ASan no leak), then prints
# the summary line.
e2e_done() {
  local label
  for label in $(_procs_lifo); do
    [[ -n ${E2E_PID[$label]:-} ]] || continue
    stop_proc "$label" TERM
    expect_eq "${E2E_KIND[$label]} $label: exit status after SIGTERM" 0 "$E2E_EXIT"
  done
  echo "e2e $E2E_NAME: $E2E_PASSED passed, $E2E_FAILED failed ($((SECONDS - E2E_START)) s)"
}
