# shellcheck shell=bash
# Helpers shared by tools/controlplane/start and tools/controlplane/restart-apiserver.
# Sourced, not run. Everything prints to stderr with the "controlplane: " prefix.

cp_log() { echo "controlplane: $*" >&2; }

# cp_die MSG...: print MSG and exit 1 (the caller's EXIT trap tears down).
cp_die() { cp_log "error: $*"; exit 1; }

# cp_tail_log FILE [N]: show the last N (default 30) lines of FILE, indented.
cp_tail_log() {
  [[ -s $1 ]] || { cp_log "  ($1 is empty or missing)"; return 0; }
  cp_log "last lines of $1:"
  tail -n "${2:-30}" "$1" | sed 's/^/    | /' >&2
}

# cp_alive PID: true while PID runs. A zombie (exited, not yet reaped by its
# parent) counts as gone, so this works for processes that are not our children.
cp_alive() {
  local pid=$1 state
  [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null || return 1
  state=$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null) || return 1
  [[ $state != Z && $state != X ]]
}

# cp_stop NAME PID: SIGTERM, up to 5 s grace, then SIGKILL; waits until gone and
# reaps PID if it is a child of this shell.
cp_stop() {
  local name=$1 pid=$2 i
  [[ -n $pid ]] || return 0
  if cp_alive "$pid"; then
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < 50; i++)); do cp_alive "$pid" || break; sleep 0.1; done
    if cp_alive "$pid"; then
      cp_log "$name (pid $pid) ignored SIGTERM for 5 s; sending SIGKILL"
      kill -KILL "$pid" 2>/dev/null || true
      for ((i = 0; i < 50; i++)); do cp_alive "$pid" || break; sleep 0.1; done
    fi
  fi
  wait "$pid" 2>/dev/null || true
}

# cp_pick_ports N: print N distinct free TCP ports on 127.0.0.1, space separated.
# The kernel picks them (bind to port 0); all sockets stay open until all are
# picked so the N are distinct. Another process can still grab one before our
# server binds it, so callers retry on "address already in use".
cp_pick_ports() {
  if command -v python3 >/dev/null; then
    python3 -c '
import socket, sys
socks = []
for _ in range(int(sys.argv[1])):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", 0))
    socks.append(s)
print(" ".join(str(s.getsockname()[1]) for s in socks))
' "$1"
  else
    # Fallback: random ports below the Linux ephemeral range that nothing listens on.
    local ports=() p
    while ((${#ports[@]} < $1)); do
      p=$((20000 + RANDOM % 12000))
      [[ " ${ports[*]} " == *" $p "* ]] && continue
      (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null && continue
      ports+=("$p")
    done
    echo "${ports[*]}"
  fi
}

# cp_bind_race LOG: true if LOG says a listen failed because the port was taken.
cp_bind_race() { grep -qiE 'address already in use' "$1" 2>/dev/null; }

# cp_wait_url NAME PID URL TIMEOUT_S CURL_ARGS...: poll URL (curl with
# CURL_ARGS) until it answers 2xx. Fails (1) as soon as PID exits, or (2) after
# TIMEOUT_S. Prints a dot every 2 s while waiting.
cp_wait_url() {
  local name=$1 pid=$2 url=$3 timeout=$4; shift 4
  local start=$SECONDS dots=0 i=0
  while :; do
    if curl -fsS --max-time 2 "$@" "$url" >/dev/null 2>&1; then
      ((dots)) && echo >&2
      return 0
    fi
    if ! cp_alive "$pid"; then
      ((dots)) && echo >&2
      cp_log "$name (pid $pid) exited before becoming ready"
      return 1
    fi
    if ((SECONDS - start >= timeout)); then
      ((dots)) && echo >&2
      cp_log "$name did not become ready within ${timeout} s ($url)"
      curl -sS --max-time 2 "$@" "$url?verbose" 2>&1 | grep -v '\] ok$' | sed 's/^/    /' >&2 || true
      return 2
    fi
    if ((++i % 10 == 0)); then
      ((dots)) || printf 'controlplane: waiting for %s ' "$name" >&2
      printf . >&2
      dots=1
    fi
    sleep 0.2
  done
}

# cp_start_apiserver DIR: (re)start kube-apiserver from DIR/apiserver.cmd in the
# background, appending to DIR/apiserver.log; writes DIR/apiserver.pid.
# stdin is /dev/null and stdout/stderr go to the log so it holds no pipe of
# whoever started it (a test runner may wait for its pipes to close).
cp_start_apiserver() {
  local dir=$1 cmdline a
  shift
  cmdline=$(<"$dir/apiserver.cmd")
  for a in "$@"; do cmdline+=" $(printf '%q' "$a")"; done # this start only
  (eval "exec $cmdline") </dev/null >>"$dir/apiserver.log" 2>&1 &
  echo $! >"$dir/apiserver.pid"
}

# cp_wait_apiserver DIR TIMEOUT_S: wait for /readyz of the apiserver in DIR.
cp_wait_apiserver() {
  local dir=$1 timeout=$2
  cp_wait_url kube-apiserver "$(<"$dir/apiserver.pid")" "$(<"$dir/apiserver.url")/readyz" "$timeout" \
    --cacert "$dir/pki/ca.crt" --cert "$dir/pki/admin.crt" --key "$dir/pki/admin.key"
}
