# shellcheck shell=bash
# The worker node of `tools/controlplane/start --with-node`: containerd + runc
# (Debian packages) and a kubelet built from the pinned modules, registered as
# node "localhost". Sourced by start after the apiserver is up; uses start's
# variables ($dir, $pki, $bin, $api_url, ...) and helpers (leaf, write_kubeconfig,
# start_with_retry, elapsed). See tools/controlplane/README.md, "--with-node".
#
# The host is left exactly as found:
# - containerd and kubelet run in a private mount namespace held by one process
#   (node_holder_pid): tmpfs over /run, /var/lib and /var/log (the fixed paths
#   kubelet, containerd's shims, runc and CNI write to), and every /proc/sys
#   entry kubelet or the CNI plugins would rewrite is bind-mounted over by a
#   file holding the value they want, so they find nothing to change.
# - no iptables: kubelet runs with makeIPTablesUtilChains: false and the CNI
#   network (ptp + host-local) has ipMasq off.
# - cgroups: kubelet's cgroupRoot, and containerd (hence its shims), live under
#   /kcr-node-ID in every cgroup hierarchy; teardown kills what is left there
#   and removes the directories.
# - Pod network namespaces are pinned under the private /run/netns, so they and
#   their veth pairs vanish with the mount namespace.
# - The kubernetes Service IP is on the host's lo only while the node runs (a
#   forwarder from it to the apiserver stands in for kube-proxy).

node_holder_pid='' node_containerd_pid='' node_kubelet_pid='' node_sched_pid='' node_cg=''
node_pod_cidr='' node_fwd_pid='' node_svc_ip_added=0
node_svc_ip=10.0.0.1 # the kubernetes Service's ClusterIP (first of --service-cluster-ip-range)
node_runtime_cg='' # $node_cg/runtime in the pids hierarchy: containerd, its shims, kubelet

# The values kubelet (setupKernelTunables) and the ptp plugin want; each file is
# bind-mounted over /proc/sys/PATH inside the node's mount namespace.
node_sysctls=(
  vm/overcommit_memory=1
  vm/panic_on_oom=0
  kernel/panic=10
  kernel/panic_on_oops=1
  kernel/keys/root_maxkeys=1000000
  kernel/keys/root_maxbytes=25000000
  net/ipv4/ip_forward=1
)

# node_cgroup_dirs: every cgroup hierarchy's /kcr-node-ID directory.
node_cgroup_dirs() {
  local mp
  awk '$9 ~ /^cgroup2?$/ {print $5}' /proc/self/mountinfo | while read -r mp; do
    echo "$mp$node_cg"
  done
}

node_make_cgroups() {
  local d parent
  for d in $(node_cgroup_dirs); do
    mkdir "$d" || return 1
    # cgroup v1 cpuset: a new group starts with no CPUs and no memory nodes.
    parent=$(dirname "$d")
    if [[ -f $d/cpuset.cpus && -z $(<"$d/cpuset.cpus") ]]; then
      cat "$parent/cpuset.cpus" >"$d/cpuset.cpus"
      cat "$parent/cpuset.mems" >"$d/cpuset.mems"
    fi
  done
  # Not `... | grep -m1`: under pipefail the writer's SIGPIPE fails the pipeline.
  node_runtime_cg=$(awk '$9 == "cgroup" && $NF ~ /(^|,)pids(,|$)/ {print $5; exit}' /proc/self/mountinfo)
  [[ -n $node_runtime_cg ]] || return 1
  node_runtime_cg+=$node_cg/runtime
  mkdir "$node_runtime_cg"
}

# node_start_time PID: the process's start time (clock ticks after boot), to
# tell it from a later process that reuses the pid; empty once it is reaped.
node_start_time() { awk '{print $22}' "/proc/$1/stat" 2>/dev/null; }

# node_kill_cgroups: SIGKILL everything left under /kcr-node-ID (shims,
# containers), wait until they are reaped (their parents died too, so init
# reaps them, not always at once; a zombie still shows in ps), then remove
# the directories, deepest first.
node_kill_cgroups() {
  [[ -n $node_cg ]] || return 0
  local i d p pids
  local -A killed=()
  for ((i = 0; i < 50; i++)); do
    pids=$(node_cgroup_dirs | while read -r d; do
      [[ -d $d ]] && find "$d" -name cgroup.procs -exec cat {} + 2>/dev/null
    done | sort -u)
    [[ -z $pids ]] && break
    for p in $pids; do
      [[ -n ${killed[$p]:-} ]] || killed[$p]=$(node_start_time "$p")
    done
    # shellcheck disable=SC2086
    kill -KILL $pids 2>/dev/null || true
    sleep 0.1
  done
  for ((i = 0; i < 100; i++)); do
    local waiting=0
    for p in "${!killed[@]}"; do
      [[ -n ${killed[$p]} && $(node_start_time "$p") == "${killed[$p]}" ]] && waiting=1
    done
    ((waiting)) || break
    sleep 0.1
  done
  ((i < 100)) || cp_log "some of the node's killed processes are not reaped after 10 s: ${!killed[*]}"
  for ((i = 0; i < 50; i++)); do
    local left=0
    for d in $(node_cgroup_dirs); do
      [[ -d $d ]] || continue
      find "$d" -depth -type d -exec rmdir {} + 2>/dev/null || left=1
    done
    ((left)) || break
    sleep 0.1
  done
  for d in $(node_cgroup_dirs); do
    [[ -d $d ]] && cp_log "could not remove cgroup $d"
  done
  return 0
}

node_teardown() {
  [[ -n $node_fwd_pid ]] && cp_stop "Service IP forwarder" "$node_fwd_pid"
  ((node_svc_ip_added)) && { ip addr del "$node_svc_ip/32" dev lo || cp_log "could not remove $node_svc_ip from lo"; }
  [[ -n $node_sched_pid ]] && cp_stop kube-scheduler "$node_sched_pid"
  [[ -n $node_kubelet_pid ]] && cp_stop kubelet "$node_kubelet_pid"
  [[ -n $node_containerd_pid ]] && cp_stop containerd "$node_containerd_pid"
  node_kill_cgroups
  [[ -n $node_holder_pid ]] && cp_stop "node mount namespace" "$node_holder_pid"
  return 0
}

# node_exec NAME LOG CMD...: run CMD in the node's mount namespace, in the
# runtime cgroup, in the background; sets $node_pid.
node_exec() {
  local log=$2; shift 2
  # shellcheck disable=SC2016
  bash -c 'echo $$ >"$0"; exec nsenter --mount=/proc/"$1"/ns/mnt -- "${@:2}"' \
    "$node_runtime_cg/cgroup.procs" "$node_holder_pid" "$@" </dev/null >>"$log" 2>&1 &
  node_pid=$!
}

node_start() {
  local nd=$dir/node s
  mkdir -p "$nd/sysctl" "$nd/cni" "$nd/images"
  for b in kube-scheduler kubelet; do
    [[ -x $bin/$b ]] || cp_die "$bin/$b is missing: run tools/controlplane/build"
  done
  for t in containerd runc ctr nsenter unshare cc python3; do
    command -v "$t" >/dev/null ||
      cp_die "'$t' is not on PATH (scripts/bootstrap installs containerd, runc, containernetworking-plugins)"
  done
  [[ -x /usr/lib/cni/ptp ]] || cp_die "/usr/lib/cni/ptp is missing: apt-get install containernetworking-plugins"
  [[ $(id -u) == 0 ]] || cp_die "--with-node needs root (mount namespace, cgroups, containers)"

  # ---- images: pause (the sandbox) and hello, one static program ----
  cc -std=c11 -D_POSIX_C_SOURCE=200809L -Wall -Wextra -static -Os -s \
    -o "$nd/images/pause" "$here/node/pause.c" ||
    cp_die "compiling $here/node/pause.c failed (needs libc6-dev's static libc)"
  "$here/node/oci-image" --name kcr.local/pause:1 --entrypoint /pause --user 65535:65535 \
    --out "$nd/images/pause.tar" "$nd/images/pause:/pause" || cp_die "packing the pause image failed"

  # ---- PKI, kubeconfigs, RBAC ----
  leaf scheduler "/CN=system:kube-scheduler" client
  leaf node "/O=system:nodes/CN=system:node:localhost" client
  write_kubeconfig "$dir/scheduler.kubeconfig" system:kube-scheduler scheduler
  write_kubeconfig "$dir/node.kubeconfig" system:node:localhost node
  # No Node authorizer (--authorization-mode=RBAC): bind the node's user to
  # the bootstrap system:node ClusterRole.
  "$bin/kubectl" --kubeconfig "$dir/admin.kubeconfig" create clusterrolebinding kcr-node \
    --clusterrole=system:node --user=system:node:localhost >/dev/null ||
    cp_die "creating the kcr-node ClusterRoleBinding failed"

  # ---- kube-scheduler ----
  start_sched() {
    read -r sched_port < <(cp_pick_ports 1)
    "$bin/kube-scheduler" \
      --kubeconfig="$dir/scheduler.kubeconfig" \
      --authentication-kubeconfig="$dir/scheduler.kubeconfig" \
      --authorization-kubeconfig="$dir/scheduler.kubeconfig" \
      --authentication-skip-lookup=true \
      --leader-elect=false \
      --bind-address=127.0.0.1 --secure-port="$sched_port" \
      --profiling=false \
      </dev/null >>"$dir/scheduler.log" 2>&1 &
    node_sched_pid=$!
  }
  wait_sched() { cp_wait_url kube-scheduler "$node_sched_pid" "https://127.0.0.1:$sched_port/healthz" 60 -k; }
  clean_sched() { cp_stop kube-scheduler "$node_sched_pid"; node_sched_pid=; }
  start_with_retry kube-scheduler "$dir/scheduler.log" start_sched wait_sched clean_sched
  cp_log "kube-scheduler ready on 127.0.0.1:$sched_port (pid $node_sched_pid, $(elapsed) s)"

  # ---- mount namespace and cgroups ----
  node_cg=/kcr-node-$$-$RANDOM
  node_make_cgroups || cp_die "creating cgroups $node_cg failed"
  local binds=()
  for s in "${node_sysctls[@]}"; do
    local path=${s%%=*} val=${s#*=} f
    f=$nd/sysctl/${path//\//.}
    echo "$val" >"$f"
    binds+=("$f" "/proc/sys/$path")
  done
  # The holder sets up the namespace, then waits; containerd and kubelet join it
  # with nsenter. Ready once it has written $nd/ns.ready. mount -n: no entry
  # in libmount's utab - whose directory, /run/mount, would otherwise be made
  # on the host's /run before the tmpfs covers it, and left behind.
  # shellcheck disable=SC2016
  unshare --mount --propagation private -- bash -c '
    set -e
    ready=$1; shift
    for d in /run /var/lib /var/log; do mount -n -t tmpfs -o mode=0755 kcr-node "$d"; done
    while (($#)); do mount -n --bind "$1" "$2"; shift 2; done
    echo ok >"$ready"
    exec sleep infinity' node-ns "$nd/ns.ready" "${binds[@]}" \
    </dev/null >>"$nd/ns.log" 2>&1 &
  node_holder_pid=$!
  local i
  for ((i = 0; i < 100; i++)); do
    [[ -f $nd/ns.ready ]] && break
    cp_alive "$node_holder_pid" || { cp_tail_log "$nd/ns.log"; cp_die "setting up the node's mount namespace failed"; }
    sleep 0.1
  done

  # ---- containerd ----
  local sock=$nd/containerd.sock
  # ptp puts a host route per Pod IP: a random /24 keeps two nodes started side
  # by side (each with its own private host-local state) apart, mostly.
  node_pod_cidr=10.244.$((RANDOM % 256)).0/24
  cat >"$nd/cni/10-kcr.conflist" <<EOF2
{
  "cniVersion": "1.0.0",
  "name": "kcr",
  "plugins": [
    {
      "type": "ptp",
      "ipMasq": false,
      "ipam": {"type": "host-local", "ranges": [[{"subnet": "$node_pod_cidr"}]],
               "routes": [{"dst": "0.0.0.0/0"}]}
    }
  ]
}
EOF2
  cat >"$nd/containerd.toml" <<EOF2
version = 2
root = "$nd/containerd"
state = "/run/containerd"
# opt would create /opt/containerd on the host; the others are unused.
disabled_plugins = ["io.containerd.internal.v1.opt", "io.containerd.snapshotter.v1.aufs",
  "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs",
  "io.containerd.snapshotter.v1.devmapper", "io.containerd.tracing.processor.v1.otlp"]
[grpc]
  address = "$sock"
[ttrpc]
  address = "$sock.ttrpc"
[debug]
  address = ""
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "kcr.local/pause:1"
  # No CAP_SYS_RESOURCE here: without this runc fails every sandbox with
  # "can't get final child's PID from pipe: EOF".
  restrict_oom_score_adj = true
  tolerate_missing_hugetlb_controller = true
  disable_apparmor = true
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$nd/cni"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        BinaryName = "$(command -v runc)"
        SystemdCgroup = false
EOF2
  node_exec containerd "$dir/containerd.log" containerd --config "$nd/containerd.toml"
  node_containerd_pid=$node_pid
  for ((i = 0; i < 300; i++)); do
    ctr --address "$sock" version >/dev/null 2>&1 && break
    cp_alive "$node_containerd_pid" || { cp_tail_log "$dir/containerd.log"; cp_die "containerd exited"; }
    sleep 0.1
  done
  ctr --address "$sock" version >/dev/null 2>&1 || { cp_tail_log "$dir/containerd.log"; cp_die "containerd not ready in 30 s"; }
  ctr --address "$sock" -n k8s.io images import "$nd/images/pause.tar" >/dev/null ||
    cp_die "importing the pause image failed"
  cp_log "containerd ready at $sock (pid $node_containerd_pid, $(elapsed) s)"

  # ---- the kubernetes Service IP, without kube-proxy ----
  # Pods dial KUBERNETES_SERVICE_HOST:443 = $node_svc_ip:443 (routed to the host
  # by their default route): the address on the host's lo for the node's
  # lifetime, and a forwarder from it to the apiserver. No iptables.
  if [[ -n $(ip -4 -o addr show to "$node_svc_ip/32") ]]; then
    cp_die "$node_svc_ip is already an address of this host (another start --with-node?); one node per host"
  fi
  ip addr add "$node_svc_ip/32" dev lo || cp_die "adding $node_svc_ip to lo failed"
  node_svc_ip_added=1
  "$here/node/tcp-forward" "$node_svc_ip" 443 127.0.0.1 "${api_url##*:}" \
    </dev/null >>"$nd/forward.log" 2>&1 &
  node_fwd_pid=$!
  for ((i = 0; i < 100; i++)); do
    curl -fsS --max-time 2 --cacert "$pki/ca.crt" --cert "$pki/admin.crt" --key "$pki/admin.key" \
      "https://$node_svc_ip:443/readyz" >/dev/null 2>&1 && break
    cp_alive "$node_fwd_pid" || { cp_tail_log "$nd/forward.log"; cp_die "the Service IP forwarder exited"; }
    sleep 0.1
  done
  ((i < 100)) || cp_die "https://$node_svc_ip:443 does not reach the apiserver"

  # ---- kubelet ----
  # Serving certificate for localhost, so the apiserver (which dials the node
  # by its hostname, "localhost") can verify it with the control plane's CA.
  leaf kubelet "/CN=localhost" server
  start_kubelet() {
    read -r kubelet_port kubelet_healthz_port < <(cp_pick_ports 2)
    cat >"$nd/kubelet.yaml" <<EOF2
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# These VMs run cgroup v1, which kubelet 1.37 refuses by default.
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: $node_cg
address: 127.0.0.1
port: $kubelet_port
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: $kubelet_healthz_port
tlsCertFile: $pki/kubelet.crt
tlsPrivateKeyFile: $pki/kubelet.key
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {clientCAFile: $pki/ca.crt}
authorization: {mode: AlwaysAllow}
containerRuntimeEndpoint: unix://$sock
# No CAP_SYS_RESOURCE: kubelet cannot lower its own oom_score_adj.
oomScoreAdj: 0
makeIPTablesUtilChains: false
failSwapOn: false
protectKernelDefaults: false
rotateCertificates: false
serverTLSBootstrap: false
evictionHard: {memory.available: "1Mi", nodefs.available: "1%", imagefs.available: "1%"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
resolvConf: /etc/resolv.conf
EOF2
    node_exec kubelet "$dir/kubelet.log" "$bin/kubelet" \
      --config="$nd/kubelet.yaml" \
      --kubeconfig="$dir/node.kubeconfig" \
      --hostname-override=localhost
    node_kubelet_pid=$node_pid
  }
  wait_kubelet() { cp_wait_url kubelet "$node_kubelet_pid" "http://127.0.0.1:$kubelet_healthz_port/healthz" 60; }
  clean_kubelet() { cp_stop kubelet "$node_kubelet_pid"; node_kubelet_pid=; }
  start_with_retry kubelet "$dir/kubelet.log" start_kubelet wait_kubelet clean_kubelet
  cp_log "kubelet healthy on 127.0.0.1:$kubelet_port (pid $node_kubelet_pid, $(elapsed) s)"

  for ((i = 0; i < 300; i++)); do
    "$bin/kubectl" --kubeconfig "$dir/admin.kubeconfig" get node localhost >/dev/null 2>&1 && break
    cp_alive "$node_kubelet_pid" || { cp_tail_log "$dir/kubelet.log" 40; cp_die "kubelet exited"; }
    sleep 0.1
  done
  if ! "$bin/kubectl" --kubeconfig "$dir/admin.kubeconfig" wait node/localhost \
      --for=condition=Ready --timeout=60s >/dev/null 2>&1; then
    cp_tail_log "$dir/kubelet.log" 40
    cp_die "node localhost not Ready within 60 s"
  fi
  for ((i = 0; i < 300; i++)); do
    [[ -z $("$bin/kubectl" --kubeconfig "$dir/admin.kubeconfig" get node localhost \
      -o 'jsonpath={.spec.taints}' 2>/dev/null) ]] && break
    sleep 0.1
  done
  ((i < 300)) || cp_die "node localhost still tainted after 30 s (kube-controller-manager's node-lifecycle-controller lifts the not-ready taint)"
  cp_log "node localhost Ready and untainted ($(elapsed) s)"
  node_containerd_sock=$sock
}
