#!/usr/bin/env bash
# A real Kubernetes of 1 to 4 worker nodes on this machine, for isobench's k8s tests and for
# trying the k8s environment without a cluster: etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler and CoreDNS on the host; per node, a kubelet and a containerd (built by
# `scripts/setup.sh test`) with Debian's runc and, where scripts/setup.sh built gVisor's shim,
# runsc, in a network namespace of the node's own. Everything lives under DIR and stops with
# `down`.
#
#   scripts/k8s-local.sh up DIR [--nodes N] [IMAGE.tar ...]
#       start N nodes (default 1), import the images into each, print the kubeconfig (no image
#       named: isobench's two, made by scripts/k8s-image.sh of target/release/isobench)
#   scripts/k8s-local.sh down DIR               stop everything and unmount what pods left
#   scripts/k8s-local.sh stop-node DIR NODE     a machine lost: NODE's network cut, its kubelet,
#                                               containerd, shims and containers killed
#   scripts/k8s-local.sh start-node DIR NODE    the machine back: network, containerd, kubelet
#
# The network: a host bridge (isobench-nodes, 10.244.0.1/24) where the API server and the
# cluster's DNS listen; node K (named node-K) is a veth on it at 10.244.0.(10+K), in the network
# namespace k8s-local-node-K, its pods on a bridge of their own in 10.244.K.0/24, with routes to
# the other nodes' pods through their nodes. No address outside these is used; no traffic
# leaves the machine. Each node offers the scheduler its share of the machine's CPUs and memory
# (1/N of each), not the whole machine, and runs its pods in a cgroup of its own that weighs as
# much as each other node's. The controller-manager marks a node NotReady 10 s after
# its kubelet last renewed its lease (every 2 s), so a lost machine shows in seconds.
#
# What it makes in the cluster: RuntimeClasses "runc" and "gvisor" (handler runsc); three
# StorageClasses that differ for real, each with volumes made here on every node (static `local`
# PersistentVolumes pinned to their node, bound when a pod is scheduled, so a pod's volume is
# always on its node) that a reclaimer started here scrubs and makes Available again when their
# claim is deleted, so runs can follow one another without end (the controller-manager's own
# Recycle races when several claims go at once, as a StatefulSet's do, and leaves volumes Failed):
#   isobench-local  a directory on the host's disk
#   isobench-loop   an ext4 filesystem of its own on a loop device (direct I/O to a file on the
#                   host's disk): a block layer and a journal between the pod and the disk
#   isobench-block  a raw loop device (volumeMode: Block): the pod gets the device itself
set -euo pipefail

KUBE_VERSION=${KUBE_VERSION:-1.34.4}
BIN=${KUBE_BIN:-/usr/local/lib/isobench/k8s-v$KUBE_VERSION}
TOOLS=/usr/local/lib/isobench/bin
PV_SIZE=${PV_SIZE:-4Gi}
API_PORT=${API_PORT:-16443}
CASSANDRA_VERSION=${ISOBENCH_CASSANDRA_VERSION:-5.0.9}
ETCD_PORT=${ETCD_PORT:-23790}
MAX_NODES=4
# What a node must have of the machine's memory: a Cassandra pod (its heap and the JVM's rest).
NODE_MEMORY_MIB=2048
HOST_BRIDGE=isobench-nodes
HOST_ADDR=10.244.0.1
KUBELET_SYSCTLS="vm.overcommit_memory vm.panic_on_oom kernel.panic kernel.panic_on_oops kernel.keys.root_maxkeys kernel.keys.root_maxbytes"

log() { printf 'k8s-local: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

usage="usage: $0 up DIR [--nodes N] [IMAGE.tar ...] | down DIR | stop-node DIR NODE | start-node DIR NODE"
action=${1:-}; dir=${2:-}
[ -n "$action" ] && [ -n "$dir" ] || die "$usage"
shift 2
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
# containerd finds its shims on PATH: runc's beside it, gVisor's in TOOLS.
export PATH="$BIN:$TOOLS:$PATH"

# Node K's name, directory, network namespace, address, and its pods' subnet and gateway.
node_name() { echo "node-$1"; }
node_dir() { echo "$dir/node-$1"; }
node_netns() { echo "k8s-local-node-$1"; }
node_addr() { echo "10.244.0.$((10 + $1))"; }
pod_subnet() { echo "10.244.$1.0/24"; }
pod_gateway() { echo "10.244.$1.1"; }
node_count() { cat "$dir/nodes" 2>/dev/null || echo 0; }

# node_index NAME: K of node-K, if it is one of this cluster's nodes.
node_index() {
  local k=${1#node-}
  case "$k" in ''|*[!0-9]*) die "$1 is not a node of the cluster in $dir (its nodes: node-1 to node-$(node_count))" ;; esac
  [ "$k" -ge 1 ] && [ "$k" -le "$(node_count)" ] || die "$1 is not a node of the cluster in $dir (its nodes: node-1 to node-$(node_count))"
  echo "$k"
}

start() { # start NAME COMMAND...: NAME may be node-K/PROGRAM
  local name=$1; shift
  # setsid: the cluster outlives the shell that started it, and `down` stops it by pid.
  setsid "$@" >"$dir/$name.log" 2>&1 < /dev/null &
  echo $! >"$dir/$name.pid"
}

running() { # running PID: alive, and not a zombie waiting for init to reap it
  local stat
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  stat=${stat##*) }
  [ "${stat%% *}" != Z ]
}

stop() { # stop NAME...: SIGTERM to each together, SIGKILL to those still running 10 s later
  local name pid pids=()
  for name in "$@"; do
    [ -f "$dir/$name.pid" ] || continue
    pid=$(cat "$dir/$name.pid")
    kill "$pid" 2>/dev/null && pids+=("$pid")
    rm -f "$dir/$name.pid"
  done
  for _ in $(seq 1 100); do
    local left=()
    for pid in "${pids[@]}"; do running "$pid" && left+=("$pid"); done
    [ ${#left[@]} -gt 0 ] || return 0
    sleep 0.1
  done
  for pid in "${left[@]}"; do kill -9 "$pid" 2>/dev/null || true; done
}

kill_now() { # kill_now NAME...: SIGKILL, as a machine that loses power
  local name
  for name in "$@"; do
    [ -f "$dir/$name.pid" ] || continue
    kill -9 "$(cat "$dir/$name.pid")" 2>/dev/null || true
    rm -f "$dir/$name.pid"
  done
}

api() { # api METHOD PATH [BODY]: the API server with the cluster's token
  curl -sSk --max-time 20 -X "$1" -H "Authorization: Bearer $(cat "$dir/token")" \
    -H 'Content-Type: application/json' "https://$HOST_ADDR:$API_PORT$2" ${3:+--data-binary "$3"}
}

wait_for() { # wait_for SECONDS WHAT COMMAND...
  local seconds=$1 what=$2; shift 2
  for _ in $(seq 1 $((seconds * 5))); do "$@" >/dev/null 2>&1 && return 0; sleep 0.2; done
  die "$what was not ready after ${seconds}s (logs in $dir)"
}

node_ready() { # node_ready NAME
  api GET "/api/v1/nodes/$1" | python3 -c '
import json, sys
conditions = json.load(sys.stdin)["status"]["conditions"]
sys.exit(0 if any(c["type"] == "Ready" and c["status"] == "True" for c in conditions) else 1)'
}

ctr_of() { # ctr_of K ARGS...: ctr against node K's containerd
  local k=$1; shift
  ctr --address "$(node_dir "$k")/containerd.sock" "$@"
}

# holder_of PORT: what listens on PORT here: "the cluster in DIR (PROGRAM)" for one of this
# script's, else the program and its pid; nothing when the port is free.
holder_of() {
  local pid args other
  pid=$(ss -Hltnp "sport = :$1" 2>/dev/null | grep -o 'pid=[0-9]*' | head -1 | cut -d= -f2)
  [ -n "$pid" ] || return 0
  args=$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null || true)
  other=$(printf '%s' "$args" | grep -o -- '--cert-dir=[^ ]*/certs' | sed 's/^--cert-dir=//; s#/certs$##' || true)
  [ -n "$other" ] || other=$(printf '%s' "$args" | grep -o -- '--data-dir [^ ]*/etcd' | sed 's/^--data-dir //; s#/etcd$##' || true)
  if [ -n "$other" ]; then
    echo "the cluster in $other ($(cat "/proc/$pid/comm")): scripts/k8s-local.sh down $other first"
  else
    echo "$(cat "/proc/$pid/comm" 2>/dev/null) (pid $pid): stop it, or set API_PORT and ETCD_PORT"
  fi
}

# An `up` that fails stops what it started: the trap it sets once nothing of another cluster's
# is in the way (the network's names are every cluster's: `down` must not take another's).
up_failed() {
  local status=$?
  [ "$status" -eq 0 ] && return 0
  log "up failed: stopping what it started"
  down >/dev/null 2>&1 || true
  exit "$status"
}

# The cgroup that holds every node's pods and the file of its CPU weight: cgroup v1's cpu.shares
# or v2's cpu.weight.
pods_cgroup_weight() {
  if [ -d /sys/fs/cgroup/cpu ]; then echo /sys/fs/cgroup/cpu/k8s.io/cpu.shares; else echo /sys/fs/cgroup/k8s.io/cpu.weight; fi
}

# The weight of one CPU (a cgroup's default) in that file.
one_cpu_weight() {
  case "$(pods_cgroup_weight)" in *cpu.shares) echo 1024 ;; *) echo 100 ;; esac
}

# weigh_pods: the pods together get the weight of the machine's CPUs, as a kubelet gives its
# `kubepods` cgroup the node's allocatable CPU. Left at the default, every pod of every node
# shared the weight of one host thread (a BestEffort container gets 2 inside it) against each
# thread of the control plane and of whatever else ran (with two busy host threads beside, a lost
# machine's Cassandra pod came back after 46-50 s at the default weight, 34-35 s at this one).
# The weight before is saved and put back at `down`; a cgroup made here is removed.
weigh_pods() {
  local file cgroup
  file=$(pods_cgroup_weight)
  cgroup=$(dirname "$file")
  [ -f "$dir/pods-weight.saved" ] && return 0
  if [ -d "$cgroup" ]; then
    cat "$file" >"$dir/pods-weight.saved" 2>/dev/null || true
  elif mkdir "$cgroup" 2>/dev/null; then
    echo made >"$dir/pods-weight.saved"
  fi
  echo $(($(nproc) * $(one_cpu_weight))) 2>/dev/null >"$file" || log "the pods keep the default CPU weight: $file cannot be written"
}

# The cgroup hierarchies: cgroup v1's, each mounted under /sys/fs/cgroup (a kubelet wants its
# root in every one), or v2's one.
cgroup_hierarchies() {
  local h
  if [ -d /sys/fs/cgroup/cpu ]; then
    for h in /sys/fs/cgroup/*/; do [ ! -f "$h/cgroup.procs" ] || echo "${h%/}"; done
  else
    echo /sys/fs/cgroup
  fi
}

# node_cgroup K: the cgroup node K's kubelet runs its pods in (its cgroupRoot), inside the pods'.
node_cgroup() { echo "k8s.io/$(node_netns "$1")"; }

# make_node_cgroup K: node K's cgroup in every hierarchy, at the default weight as every node's.
# A machine's pods take no other machine's CPUs: with every node's pods side by side in one
# cgroup, a lost machine's Cassandra starting again took the CPU its survivors needed to serve
# (docs/kubernetes.md). Weighed by node, a node's pods take another's share only as far as that
# node leaves it idle.
make_node_cgroup() {
  local k=$1 h
  # cgroup v2 hands a child only the controllers its parent delegates.
  [ -d /sys/fs/cgroup/cpu ] || echo "+cpu +cpuset +memory +pids" 2>/dev/null >/sys/fs/cgroup/k8s.io/cgroup.subtree_control \
    || log "the pods' cgroup does not hand node $k's the controllers a kubelet needs (cpu cpuset memory pids)"
  for h in $(cgroup_hierarchies); do mkdir -p "$h/$(node_cgroup "$k")"; done
}

# remove_node_cgroups: every node's cgroup and what its kubelet made in it, once their tasks are
# gone, and the pods' cgroup where it is empty (but for its CPU weight's, which `unweigh_pods` keeps).
remove_node_cgroups() {
  local h k
  for h in $(cgroup_hierarchies); do
    for k in $(seq 1 "$MAX_NODES"); do
      [ ! -d "$h/$(node_cgroup "$k")" ] || find "$h/$(node_cgroup "$k")" -depth -type d -exec rmdir {} + 2>/dev/null || true
    done
    [ "$h/k8s.io" = "$(dirname "$(pods_cgroup_weight)")" ] || rmdir "$h/k8s.io" 2>/dev/null || true
  done
}

unweigh_pods() {
  local file saved
  file=$(pods_cgroup_weight)
  [ -f "$dir/pods-weight.saved" ] || return 0
  saved=$(cat "$dir/pods-weight.saved")
  if [ "$saved" = made ]; then
    # containerd may still hold a child cgroup: the default weight stays if the rmdir cannot.
    one_cpu_weight 2>/dev/null >"$file" || true
    rmdir "$(dirname "$file")" 2>/dev/null || true
  else
    echo "$saved" 2>/dev/null >"$file" || true
  fi
  rm -f "$dir/pods-weight.saved"
}

mem_kib() { sed -n 's/^MemTotal: *\([0-9]*\) kB/\1/p' /proc/meminfo; }

# The most nodes this machine holds: MAX_NODES, and no more than its memory gives each node
# NODE_MEMORY_MIB.
most_nodes() {
  local mib=$(($(mem_kib) / 1024))
  local most=$((mib / NODE_MEMORY_MIB))
  echo $((most < MAX_NODES ? most : MAX_NODES))
}

up() {
  local arg port holder nodes=1 images=() k most
  while [ $# -gt 0 ]; do
    case "$1" in
      --nodes)
        [ $# -ge 2 ] || die "--nodes needs a count: up DIR --nodes 3"
        nodes=$2; shift 2
        most=$(most_nodes)
        case "$nodes" in ''|*[!0-9]*) die "--nodes $nodes is not a count: give 1 to $most" ;; esac
        [ "$nodes" -ge 1 ] && [ "$nodes" -le "$most" ] || die "--nodes $nodes: this machine holds 1 to $most nodes ($MAX_NODES at most, $NODE_MEMORY_MIB MiB of its memory each)"
        ;;
      -*) die "up takes DIR, --nodes N and image archives (IMAGE.tar), not the option $1" ;;
      *) [ -f "$1" ] || die "$1 is not an image archive here ($usage)"; images+=("$1"); shift ;;
    esac
  done
  for b in etcd kube-apiserver kube-controller-manager kube-scheduler kubelet containerd ctr coredns; do
    [ -x "$BIN/$b" ] || die "$BIN/$b is missing: scripts/setup.sh test builds it"
  done
  [ -f "$dir/apiserver.pid" ] && die "a cluster already runs in $dir (down first)"
  for port in "$API_PORT" "$ETCD_PORT"; do
    holder=$(holder_of "$port")
    [ -z "$holder" ] || die "port $port is taken by $holder"
  done
  for k in $(seq 1 "$nodes"); do
    ! ip netns list | grep -qw "$(node_netns "$k")" \
      || die "the network namespace $(node_netns "$k") exists: a cluster that was not stopped (scripts/k8s-local.sh down ITS_DIR), or ip netns delete $(node_netns "$k")"
  done
  trap up_failed EXIT
  echo "$nodes" >"$dir/nodes"
  local t0=$SECONDS
  credentials
  network
  control_plane
  [ ${#images[@]} -gt 0 ] || images=("$(own_image "$dir/images/isobench.tar")" "$(own_image "$dir/images/isobench-cassandra.tar" --cassandra "$CASSANDRA_VERSION")")
  images=("$(pause_image)" "${images[@]}")
  [ -f "$dir/sysctl.saved" ] || for key in $KUBELET_SYSCTLS; do
    echo "$key=$(sysctl -n "$key")"
  done >"$dir/sysctl.saved"
  weigh_pods
  local pids=()
  for k in $(seq 1 "$nodes"); do
    node_config "$k"
    start_runtime "$k"
  done
  # Every node's images at once: the imports are disk- and CPU-bound by turns.
  for k in $(seq 1 "$nodes"); do
    (for image in "${images[@]}"; do ctr_of "$k" -n k8s.io images import "$image" >/dev/null; done) &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do wait "$pid" || die "an image was not imported (ctr's log above)"; done
  for k in $(seq 1 "$nodes"); do start_kubelet "$k"; done
  for k in $(seq 1 "$nodes"); do wait_for 120 "node $(node_name "$k")" node_ready "$(node_name "$k")"; done
  wait_for 60 "the default ServiceAccount" api GET /api/v1/namespaces/default/serviceaccounts/default
  cluster_objects
  volumes "$nodes"
  start reclaimer "$(cd "$(dirname "$0")" && pwd)/$(basename "$0")" reclaim "$dir"
  trap - EXIT
  log "$nodes node(s) ready after $((SECONDS - t0)) s: KUBECONFIG=$dir/kubeconfig"
  echo "$dir/kubeconfig"
}

credentials() {
  (umask 077; [ -f "$dir/sa.key" ] || openssl genrsa -out "$dir/sa.key" 2048 2>/dev/null)
  openssl rsa -in "$dir/sa.key" -pubout -out "$dir/sa.pub" 2>/dev/null
  (umask 077; head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$dir/token")
  (umask 077; echo "$(cat "$dir/token"),admin,admin,system:masters" >"$dir/tokens.csv")
  (umask 077; cat >"$dir/kubeconfig" <<KC
apiVersion: v1
kind: Config
clusters: [{name: local, cluster: {server: "https://$HOST_ADDR:$API_PORT", insecure-skip-tls-verify: true}}]
users: [{name: admin, user: {token: $(cat "$dir/token")}}]
contexts: [{name: local, context: {cluster: local, user: admin, namespace: default}}]
current-context: local
KC
)
}

# The host's bridge, and each node's namespace on it with a route to every node's pods.
network() {
  local k j ns nodes
  nodes=$(node_count)
  ip link show "$HOST_BRIDGE" >/dev/null 2>&1 || ip link add "$HOST_BRIDGE" type bridge
  ip addr replace "$HOST_ADDR/24" dev "$HOST_BRIDGE"
  ip link set "$HOST_BRIDGE" up
  for k in $(seq 1 "$nodes"); do
    ns=$(node_netns "$k")
    ip netns add "$ns"
    ip link add "isb-node-$k" type veth peer name eth0 netns "$ns"
    ip link set "isb-node-$k" master "$HOST_BRIDGE" up
    ip -n "$ns" link set lo up
    ip -n "$ns" addr add "$(node_addr "$k")/24" dev eth0
    ip -n "$ns" link set eth0 up
    ip -n "$ns" route add default via "$HOST_ADDR"
    for j in $(seq 1 "$nodes"); do
      [ "$j" = "$k" ] || ip -n "$ns" route add "$(pod_subnet "$j")" via "$(node_addr "$j")"
    done
    ip route replace "$(pod_subnet "$k")" via "$(node_addr "$k")"
    nsenter --net="/run/netns/$ns" sysctl -qw net.ipv4.ip_forward=1
  done
}

control_plane() {
  start etcd "$BIN/etcd" --name isobench --data-dir "$dir/etcd" \
    --listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
    --listen-peer-urls "http://127.0.0.1:$((ETCD_PORT + 10))" \
    --initial-advertise-peer-urls "http://127.0.0.1:$((ETCD_PORT + 10))" \
    --initial-cluster "isobench=http://127.0.0.1:$((ETCD_PORT + 10))" --listen-metrics-urls "http://127.0.0.1:$((ETCD_PORT + 11))"
  # The nodes reach the API server on the host's bridge; it reaches their kubelets (logs, exec,
  # the node proxy) at their InternalIPs.
  start apiserver "$BIN/kube-apiserver" --etcd-servers="http://127.0.0.1:$ETCD_PORT" \
    --bind-address="$HOST_ADDR" --advertise-address="$HOST_ADDR" --secure-port="$API_PORT" --cert-dir="$dir/certs" \
    --token-auth-file="$dir/tokens.csv" --authorization-mode=RBAC,Node --endpoint-reconciler-type=none \
    --service-account-key-file="$dir/sa.pub" --service-account-signing-key-file="$dir/sa.key" \
    --service-account-issuer=https://kubernetes.default.svc --service-cluster-ip-range=10.0.0.0/24 \
    --kubelet-preferred-address-types=InternalIP
  wait_for 60 "the API server" api GET /readyz
  start controller-manager "$BIN/kube-controller-manager" --kubeconfig="$dir/kubeconfig" --leader-elect=false \
    --bind-address=127.0.0.1 --secure-port=0 --service-account-private-key-file="$dir/sa.key" \
    --root-ca-file="$dir/certs/apiserver.crt" --use-service-account-credentials=false --controllers='*' \
    --node-monitor-period=1s --node-monitor-grace-period=10s
  start scheduler "$BIN/kube-scheduler" --kubeconfig="$dir/kubeconfig" --leader-elect=false \
    --bind-address=127.0.0.1 --secure-port=0
  cat >"$dir/Corefile" <<CF
cluster.local:53 {
    bind $HOST_ADDR
    errors
    kubernetes cluster.local {
        kubeconfig $dir/kubeconfig local
    }
}
CF
  start coredns "$BIN/coredns" -conf "$dir/Corefile"
}

# node_config K: node K's containerd and kubelet configurations, and its pods' network.
node_config() {
  local k=$1 nd nodes cpu_m mem_ki
  nd=$(node_dir "$k"); nodes=$(node_count)
  mkdir -p "$nd/cni/net.d" "$nd/cni/ipam" "$nd/pod-logs"
  cat >"$nd/cni/net.d/10-isobench.conflist" <<CNI
{"cniVersion": "1.0.0", "name": "isobench", "plugins": [
  {"type": "bridge", "bridge": "isobench-cni0", "isGateway": true, "ipMasq": false, "hairpinMode": true,
   "ipam": {"type": "host-local", "ranges": [[{"subnet": "$(pod_subnet "$k")", "gateway": "$(pod_gateway "$k")"}]],
     "routes": [{"dst": "0.0.0.0/0"}], "dataDir": "$nd/cni/ipam"}},
  {"type": "loopback"}]}
CNI
  # restrict_oom_score_adj: this kind of VM does not give root CAP_SYS_RESOURCE. Log lines are
  # not split: the agent's report is one line. NRI's socket is one path for the machine: off.
  # runc keeps its state in the node's directory, not in the path every containerd shares.
  cat >"$nd/containerd.toml" <<TOML
version = 3
root = "$nd/containerd/root"
state = "$nd/containerd/state"
[grpc]
  address = "$nd/containerd.sock"
[plugins.'io.containerd.nri.v1.nri']
  disable = true
[plugins.'io.containerd.cri.v1.images'.pinned_images]
  sandbox = "isobench/pause:1"
[plugins.'io.containerd.cri.v1.runtime']
  restrict_oom_score_adj = true
  max_container_log_line_size = -1
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = ["/usr/lib/cni"]
    conf_dir = "$nd/cni/net.d"
  [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
    runtime_type = "io.containerd.runc.v2"
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
      Root = "$nd/runc"
$(runsc_runtime)
TOML
  # Each node offers the scheduler 1/N of the machine's CPUs and memory: the rest is reserved.
  cpu_m=$(($(nproc) * 1000))
  mem_ki=$(mem_kib)
  cat >"$nd/kubelet.yaml" <<YAML
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
authentication: {anonymous: {enabled: true}, webhook: {enabled: false}}
authorization: {mode: AlwaysAllow}
address: $(node_addr "$k")
healthzBindAddress: 127.0.0.1
readOnlyPort: 0
containerRuntimeEndpoint: unix://$nd/containerd.sock
podLogsDir: $nd/pod-logs
cgroupDriver: cgroupfs
cgroupsPerQOS: true
cgroupRoot: /$(node_cgroup "$k")
enforceNodeAllocatable: []
kubeReserved: {cpu: "$((cpu_m - cpu_m / nodes))m", memory: "$((mem_ki - mem_ki / nodes))Ki"}
failCgroupV1: false
failSwapOn: false
serializeImagePulls: false
imageGCHighThresholdPercent: 100
evictionHard: {memory.available: "100Mi", nodefs.available: "1%", imagefs.available: "1%"}
nodeStatusUpdateFrequency: 2s
nodeLeaseDurationSeconds: 8
clusterDNS: [$HOST_ADDR]
clusterDomain: cluster.local
YAML
}

# start_runtime K: node K's containerd, in the node's network namespace (its pods' bridge and
# their network namespaces hang from there).
start_runtime() {
  local k=$1
  mkdir -p "$dir/node-$k"
  start "node-$k/containerd" nsenter --net="/run/netns/$(node_netns "$k")" "$BIN/containerd" --config "$(node_dir "$k")/containerd.toml"
  wait_for 30 "node-$k's containerd" ctr_of "$k" version
}

# start_kubelet K. It samples each pod's CPU every second, not every 10 s: isobench counts a
# pod's CPU in a measured phase from the samples taken in it, and the tests' phases are a few
# seconds long. (It sets kernel tunables it wants: `down` puts back what this host had.)
start_kubelet() {
  local k=$1 nd
  nd=$(node_dir "$k")
  make_node_cgroup "$k"
  start "node-$k/kubelet" nsenter --net="/run/netns/$(node_netns "$k")" "$BIN/kubelet" \
    --kubeconfig="$dir/kubeconfig" --config="$nd/kubelet.yaml" --hostname-override="$(node_name "$k")" \
    --node-ip="$(node_addr "$k")" --root-dir="$nd/kubelet" --cert-dir="$nd/kubelet-pki" --housekeeping-interval=1s
}

cluster_objects() {
  api POST /apis/node.k8s.io/v1/runtimeclasses \
    '{"apiVersion":"node.k8s.io/v1","kind":"RuntimeClass","metadata":{"name":"runc"},"handler":"runc"}' >/dev/null
  if [ -x "$TOOLS/containerd-shim-runsc-v1" ] && command -v runsc >/dev/null; then
    api POST /apis/node.k8s.io/v1/runtimeclasses \
      '{"apiVersion":"node.k8s.io/v1","kind":"RuntimeClass","metadata":{"name":"gvisor"},"handler":"runsc"}' >/dev/null
  else
    log "no runsc or no gVisor shim in $TOOLS: RuntimeClass gvisor not made"
  fi
  local class
  for class in isobench-local isobench-loop isobench-block; do
    api POST /apis/storage.k8s.io/v1/storageclasses \
      "{\"apiVersion\":\"storage.k8s.io/v1\",\"kind\":\"StorageClass\",\"metadata\":{\"name\":\"$class\"},\"provisioner\":\"kubernetes.io/no-provisioner\",\"volumeBindingMode\":\"WaitForFirstConsumer\"}" >/dev/null
  done
}

# volumes N: each node's volumes of each class (fewer a node where there are several nodes).
volumes() {
  local nodes=$1 k i per block
  per=${PV_PER_NODE:-$((nodes == 1 ? 8 : 4))}
  block=${BLOCK_PV_PER_NODE:-$((nodes == 1 ? 2 : 1))}
  for k in $(seq 1 "$nodes"); do
    for i in $(seq 1 "$per"); do
      mkdir -p "$dir/pv/$k-$i"
      persistent_volume "isobench-local-$k-$i" isobench-local "$k" "\"path\":\"$dir/pv/$k-$i\""
      loop_filesystem "$k-$i"
      persistent_volume "isobench-loop-$k-$i" isobench-loop "$k" "\"path\":\"$dir/loop-pv/$k-$i\""
    done
    for i in $(seq 1 "$block"); do block_volume "$k" "$i"; done
  done
}

# persistent_volume NAME CLASS K LOCAL [MODE]: a `local` volume on node K, scrubbed and reused
# after each claim.
persistent_volume() {
  api POST /api/v1/persistentvolumes "{\"apiVersion\":\"v1\",\"kind\":\"PersistentVolume\",\"metadata\":{\"name\":\"$1\"},\"spec\":{\"storageClassName\":\"$2\",\"capacity\":{\"storage\":\"$PV_SIZE\"},\"accessModes\":[\"ReadWriteOnce\"],\"volumeMode\":\"${5:-Filesystem}\",\"persistentVolumeReclaimPolicy\":\"Retain\",\"local\":{$4},\"nodeAffinity\":{\"required\":{\"nodeSelectorTerms\":[{\"matchExpressions\":[{\"key\":\"kubernetes.io/hostname\",\"operator\":\"In\",\"values\":[\"$(node_name "$3")\"]}]}]}}}}" >/dev/null
}

# The reclaimer (`$0 reclaim DIR`, started by `up`): every second, each of this cluster's
# volumes whose claim was deleted (Released) is emptied on the host and made Available again.
# A pass that fails (the API server slow to answer under a ring's load, a file that will not go)
# is logged and tried again a second later: under `set -e` one such pass ended the reclaimer, and
# no volume came back for the rest of the cluster's life (a fresh clone's make test, 12-04: none
# of 12 Available within 300 s after a lost machine's run).
reclaim() {
  while sleep 1; do
    reclaim_pass || log "reclaimer: a pass failed (exit $?); again in a second"
  done
}

reclaim_pass() {
  api GET /api/v1/persistentvolumes 2>/dev/null | python3 -c '
import json, sys
for v in json.load(sys.stdin).get("items", []):
    source = v["spec"].get("hostPath") or v["spec"].get("local")
    if v["status"].get("phase") == "Released" and source:
        print(v["metadata"]["name"], source["path"])' 2>/dev/null | while read -r name path; do
    # A volume is made Available only once emptied (errexit does not hold in a pass called
    # with ||: each step says for itself).
    case "$name:$path" in
      *:"$dir"/pv/*|*:"$dir"/loop-pv/*)
        find "$path" -mindepth 1 -maxdepth 1 -exec rm -rf --one-file-system {} + ||
          { log "reclaimer: $name not emptied; again in a second"; continue; } ;;
      isobench-block-*:/dev/loop*) ;; # a raw device: what a pod wrote there is only bytes
      *) continue ;;
    esac
    curl -sSk --max-time 20 -X PATCH -H "Authorization: Bearer $(cat "$dir/token")" \
      -H 'Content-Type: application/json-patch+json' "https://$HOST_ADDR:$API_PORT/api/v1/persistentvolumes/$name" \
      --data-binary '[{"op": "remove", "path": "/spec/claimRef"}]' >/dev/null || true
  done
}

block_volume() { # K I: a raw loop device over a sparse file, as a Block-mode volume on node K
  local image device
  image="$dir/block/$1-$2.img"
  mkdir -p "$dir/block"
  truncate -s "${PV_SIZE%i}" "$image"
  device=$(losetup --direct-io=on -f --show "$image")
  persistent_volume "isobench-block-$1-$2" isobench-block "$1" "\"path\":\"$device\"" Block
}

loop_filesystem() { # NAME: an ext4 of its own on a loop device over a sparse file, mounted for volume NAME
  local image="$dir/loop/$1.img" mnt="$dir/loop-pv/$1" device
  mkdir -p "$dir/loop" "$mnt"
  mountpoint -q "$mnt" && return 0
  truncate -s "${PV_SIZE%i}" "$image"
  device=$(losetup --direct-io=on -f --show "$image")
  # Inode tables and journal written now, not by a kernel thread during the first run.
  mkfs.ext4 -q -E lazy_itable_init=0,lazy_journal_init=0 "$device"
  mount "$device" "$mnt"
}

runsc_runtime() {
  [ -x "$TOOLS/containerd-shim-runsc-v1" ] && command -v runsc >/dev/null || return 0
  echo "  [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runsc]"
  echo '    runtime_type = "io.containerd.runsc.v1"'
}

# own_image OUT [--cassandra VERSION]: one of isobench's images, of the release build.
own_image() {
  local out=$1 bin; shift
  bin="$(dirname "$0")/../target/release/isobench"
  [ -x "$bin" ] || die "$bin is missing: cargo build --release (or name the images to import)"
  mkdir -p "$(dirname "$out")"
  "$(dirname "$0")/k8s-image.sh" --bin "$bin" "$@" "$out" >&2
  echo "$out"
}

# The sandbox ("pause") image every pod needs; no registry is reachable, so it is made from
# Debian's static busybox: a shell that sleeps until it is told to stop.
pause_image() {
  local out="$dir/pause.tar"
  [ -f "$out" ] && { echo "$out"; return; }
  command -v busybox >/dev/null || die "busybox is missing (apt-get install busybox-static)"
  local root; root=$(mktemp -d)
  mkdir -p "$root/bin"
  cp "$(command -v busybox)" "$root/bin/busybox"
  ln -s busybox "$root/bin/sh"
  ln -s busybox "$root/bin/sleep"
  "$(dirname "$0")/k8s-image.sh" --root "$root" --tag isobench/pause:1 \
    --entrypoint '["/bin/sh", "-c", "trap \"exit 0\" TERM INT; sleep 2147483647 & wait"]' "$out" >/dev/null
  rm -rf "$root"
  echo "$out"
}

# unmount_matching PATTERN: every mount point that grep's PATTERN finds in mountinfo, innermost
# first (none found is not an error).
unmount_matching() {
  { grep -o "$1" /proc/self/mountinfo || true; } | sort -r | while read -r m; do umount -l "$m" 2>/dev/null || true; done
}

# pod_netns K: the network namespaces (CNI's) of node K's pod sandboxes, read from their specs.
pod_netns() {
  local c
  for c in $(ctr_of "$1" -n k8s.io containers ls -q 2>/dev/null); do
    ctr_of "$1" -n k8s.io containers info "$c" 2>/dev/null
  done | python3 -c '
import json, sys
decoder, text, at = json.JSONDecoder(), sys.stdin.read(), 0
while True:
    while at < len(text) and text[at].isspace():
        at += 1
    if at >= len(text):
        break
    info, at = decoder.raw_decode(text, at)
    for ns in (info.get("Spec") or {}).get("linux", {}).get("namespaces", []):
        if ns.get("type") == "network" and ns.get("path", "").startswith("/var/run/netns/"):
            print(ns["path"].rsplit("/", 1)[1])' | sort -u
}

kill_tasks() { # kill_tasks K: SIGKILL to every container of node K
  local c
  for c in $(ctr_of "$1" -n k8s.io tasks ls -q 2>/dev/null); do
    ctr_of "$1" -n k8s.io tasks kill -s KILL "$c" >/dev/null 2>&1 || true
  done
}

# stop_node NAME: the machine lost at once. Its network goes first, so that nothing it does
# from then on reaches the cluster; then its kubelet, its containers, containerd and the shims
# (which outlive containerd by design) are killed. Its volumes stay, as a machine's disks do.
stop_node() {
  local k nd
  k=$(node_index "$1"); nd=$(node_dir "$k")
  [ -f "$nd/stopped" ] && die "$1 is stopped already (start-node DIR $1)"
  ip link set "isb-node-$k" down
  touch "$nd/stopped"
  kill_now "node-$k/kubelet"
  kill_tasks "$k"
  kill_now "node-$k/containerd"
  pkill -9 -f -- "-address $nd/containerd.sock" 2>/dev/null || true
  log "$1 stopped"
}

# start_node NAME: the machine back, as after a reboot: its network, containerd (which finds its
# old sandboxes dead) and kubelet (which starts its pods again), until the node is Ready.
start_node() {
  local k nd
  k=$(node_index "$1"); nd=$(node_dir "$k")
  [ -f "$nd/stopped" ] || die "$1 is not stopped (stop-node DIR $1 first)"
  ip link set "isb-node-$k" up
  start_runtime "$k"
  start_kubelet "$k"
  rm -f "$nd/stopped"
  wait_for 120 "node $1" node_ready "$1"
  log "$1 started"
}

down() {
  local nodes k netns=""
  nodes=$(node_count)
  # A stopped node's containerd runs again for a moment: it knows its pods' namespaces.
  for k in $(seq 1 "$nodes"); do
    [ -f "$(node_dir "$k")/stopped" ] || continue
    ip link set "isb-node-$k" up 2>/dev/null || true
    (start_runtime "$k") || true
    rm -f "$(node_dir "$k")/stopped"
  done
  if [ -f "$dir/apiserver.pid" ] && api GET /readyz >/dev/null 2>&1; then
    # Pods first, through the API, so the kubelets tear their sandboxes down themselves.
    for ns in $(api GET /api/v1/namespaces | python3 -c 'import json,sys; print(" ".join(i["metadata"]["name"] for i in json.load(sys.stdin)["items"]))'); do
      api DELETE "/api/v1/namespaces/$ns/pods?gracePeriodSeconds=0" >/dev/null || true
    done
    for _ in $(seq 1 100); do
      local tasks=""
      for k in $(seq 1 "$nodes"); do tasks+=$(ctr_of "$k" -n k8s.io tasks ls -q 2>/dev/null || true); done
      [ -z "$tasks" ] && break
      sleep 0.2
    done
  fi
  stop reclaimer
  for k in $(seq 1 "$nodes"); do stop "node-$k/kubelet"; done
  for k in $(seq 1 "$nodes"); do
    [ -S "$(node_dir "$k")/containerd.sock" ] || continue
    netns+=" $(pod_netns "$k")"
    kill_tasks "$k"
  done
  for k in $(seq 1 "$nodes"); do
    stop "node-$k/containerd"
    # Shims outlive containerd by design; these are this node's (their -address names it).
    pkill -9 -f -- "-address $(node_dir "$k")/containerd.sock" 2>/dev/null || true
  done
  stop scheduler controller-manager coredns
  stop apiserver
  stop etcd
  unmount_matching " $dir/[^ ]*"
  # gVisor's shim mounts a placeholder network namespace under /run/containerd, outside DIR: it
  # is this cluster's to remove once no other containerd runs.
  pgrep -x containerd >/dev/null || unmount_matching " /run/containerd/runsc/[^ ]*/null-netns"
  # The loop devices (they detach once their lazily unmounted filesystems let go).
  for image in "$dir"/loop/*.img "$dir"/block/*.img; do
    [ -e "$image" ] || continue
    losetup -j "$image" | cut -d: -f1 | while read -r device; do losetup -d "$device" 2>/dev/null || true; done
  done
  for n in $netns; do ip netns delete "$n" 2>/dev/null || true; done
  # A node's veth goes with its namespace, and the routes through it with the veth.
  for k in $(seq 1 "$nodes"); do
    ip netns delete "$(node_netns "$k")" 2>/dev/null || true
    ip link del "isb-node-$k" 2>/dev/null || true
  done
  ip link del "$HOST_BRIDGE" 2>/dev/null || true
  if [ -f "$dir/sysctl.saved" ]; then
    sysctl -q -w $(cat "$dir/sysctl.saved") || true
    rm -f "$dir/sysctl.saved"
  fi
  remove_node_cgroups
  unweigh_pods
  rm -f "$dir/nodes"
  log "stopped"
}

case "$action" in
  up) up "$@" ;;
  down) down ;;
  stop-node) [ $# -eq 1 ] || die "$usage"; stop_node "$1" ;;
  start-node) [ $# -eq 1 ] || die "$usage"; start_node "$1" ;;
  reclaim) reclaim ;;
  *) die "$usage" ;;
esac
