#!/usr/bin/env bash
# A real one-node Kubernetes on 127.0.0.1 for isobench's k8s tests and for trying the k8s
# environment without a cluster: etcd, kube-apiserver, kube-controller-manager, kube-scheduler,
# kubelet and containerd (built by `scripts/setup.sh test`), with Debian's runc and, where
# scripts/setup.sh built gVisor's shim, runsc. Everything lives under DIR and stops with `down`.
#
#   scripts/k8s-local.sh up DIR [IMAGE.tar ...]   start, import the images, print the kubeconfig
#                                                 (no image named: isobench's two, made by
#                                                 scripts/k8s-image.sh of target/release/isobench)
#   scripts/k8s-local.sh down DIR                 stop everything and unmount what pods left
#
# What it makes in the cluster: RuntimeClasses "runc" and "gvisor" (handler runsc); two
# StorageClasses that differ for real, each with PV_COUNT PersistentVolumes made here (static
# provisioning) that a reclaimer started here scrubs and makes Available again when their claim
# is deleted, so runs can follow one another without end (the controller-manager's own Recycle
# races when several claims go at once, as a StatefulSet's do, and leaves volumes Failed):
#   isobench-local  a directory on the host's disk (hostPath)
#   isobench-loop   an ext4 filesystem of its own on a loop device (direct I/O to a file on the
#                   host's disk): a block layer and a journal between the pod and the disk
#   isobench-block  a raw loop device (volumeMode: Block, a `local` volume): the pod gets the
#                   device itself
# a bridge network for pods without hostNetwork, and the cluster's DNS (CoreDNS on the bridge's
# address), so a StatefulSet's pods find one another by name.
set -euo pipefail

KUBE_VERSION=${KUBE_VERSION:-1.34.4}
BIN=${KUBE_BIN:-/usr/local/lib/isobench/k8s-v$KUBE_VERSION}
TOOLS=/usr/local/lib/isobench/bin
PV_COUNT=${PV_COUNT:-8}
PV_SIZE=${PV_SIZE:-4Gi}
BLOCK_PV_COUNT=${BLOCK_PV_COUNT:-2}
API_PORT=${API_PORT:-16443}
CASSANDRA_VERSION=${ISOBENCH_CASSANDRA_VERSION:-5.0.9}
ETCD_PORT=${ETCD_PORT:-23790}
BRIDGE=isobench-cni0
POD_SUBNET=10.244.77.0/24
# The bridge's own address: the pods' gateway, and where the cluster's DNS answers them.
GATEWAY=10.244.77.1
KUBELET_SYSCTLS="vm.overcommit_memory vm.panic_on_oom kernel.panic kernel.panic_on_oops kernel.keys.root_maxkeys kernel.keys.root_maxbytes"

log() { printf 'k8s-local: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

action=${1:-}; dir=${2:-}
[ -n "$action" ] && [ -n "$dir" ] || die "usage: $0 up|down DIR [IMAGE.tar ...]"
shift 2
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
# containerd finds its shims on PATH: runc's beside it, gVisor's in TOOLS.
export PATH="$BIN:$TOOLS:$PATH"

start() {
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

api() { # api METHOD PATH [BODY]: the API server with the cluster's token
  curl -sSk --max-time 20 -X "$1" -H "Authorization: Bearer $(cat "$dir/token")" \
    -H 'Content-Type: application/json' "https://127.0.0.1:$API_PORT$2" ${3:+--data-binary "$3"}
}

wait_for() { # wait_for SECONDS WHAT COMMAND...
  local seconds=$1 what=$2; shift 2
  for _ in $(seq 1 $((seconds * 5))); do "$@" >/dev/null 2>&1 && return 0; sleep 0.2; done
  die "$what was not ready after ${seconds}s (logs in $dir)"
}

node_ready() {
  api GET /api/v1/nodes/localhost | python3 -c '
import json, sys
conditions = json.load(sys.stdin)["status"]["conditions"]
sys.exit(0 if any(c["type"] == "Ready" and c["status"] == "True" for c in conditions) else 1)'
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
# is in the way (the bridge's name is every cluster's: `down` must not take another's).
up_failed() {
  local status=$?
  [ "$status" -eq 0 ] && return 0
  log "up failed: stopping what it started"
  down >/dev/null 2>&1 || true
  exit "$status"
}

up() {
  local arg port holder
  for arg in "$@"; do
    case "$arg" in
      -*) die "up takes DIR and image archives (IMAGE.tar), not the option $arg" ;;
      *) [ -f "$arg" ] || die "$arg is not an image archive here (up DIR [IMAGE.tar ...])" ;;
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
  trap up_failed EXIT
  local t0=$SECONDS
  (umask 077; [ -f "$dir/sa.key" ] || openssl genrsa -out "$dir/sa.key" 2048 2>/dev/null)
  openssl rsa -in "$dir/sa.key" -pubout -out "$dir/sa.pub" 2>/dev/null
  (umask 077; head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$dir/token")
  (umask 077; echo "$(cat "$dir/token"),admin,admin,system:masters" >"$dir/tokens.csv")
  (umask 077; cat >"$dir/kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters: [{name: local, cluster: {server: "https://127.0.0.1:$API_PORT", insecure-skip-tls-verify: true}}]
users: [{name: admin, user: {token: $(cat "$dir/token")}}]
contexts: [{name: local, context: {cluster: local, user: admin, namespace: default}}]
current-context: local
EOF
)
  start etcd "$BIN/etcd" --name isobench --data-dir "$dir/etcd" \
    --listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
    --listen-peer-urls "http://127.0.0.1:$((ETCD_PORT + 10))" \
    --initial-advertise-peer-urls "http://127.0.0.1:$((ETCD_PORT + 10))" \
    --initial-cluster "isobench=http://127.0.0.1:$((ETCD_PORT + 10))" --listen-metrics-urls "http://127.0.0.1:$((ETCD_PORT + 11))"
  start apiserver "$BIN/kube-apiserver" --etcd-servers="http://127.0.0.1:$ETCD_PORT" \
    --bind-address=127.0.0.1 --advertise-address=127.0.0.1 --secure-port="$API_PORT" --cert-dir="$dir/certs" \
    --token-auth-file="$dir/tokens.csv" --authorization-mode=RBAC,Node --endpoint-reconciler-type=none \
    --service-account-key-file="$dir/sa.pub" --service-account-signing-key-file="$dir/sa.key" \
    --service-account-issuer=https://kubernetes.default.svc --service-cluster-ip-range=10.0.0.0/24 \
    --kubelet-preferred-address-types=Hostname,InternalIP
  wait_for 60 "the API server" api GET /readyz
  start controller-manager "$BIN/kube-controller-manager" --kubeconfig="$dir/kubeconfig" --leader-elect=false \
    --bind-address=127.0.0.1 --secure-port=0 --service-account-private-key-file="$dir/sa.key" \
    --root-ca-file="$dir/certs/apiserver.crt" --use-service-account-credentials=false --controllers='*'
  start scheduler "$BIN/kube-scheduler" --kubeconfig="$dir/kubeconfig" --leader-elect=false \
    --bind-address=127.0.0.1 --secure-port=0

  # Pods without hostNetwork get a bridge (the CNI plugins from Debian). It is made here, with
  # its address, so that the DNS can listen there before the first pod.
  mkdir -p "$dir/cni/net.d" "$dir/cni/ipam"
  cat >"$dir/cni/net.d/10-isobench.conflist" <<EOF
{"cniVersion": "1.0.0", "name": "isobench", "plugins": [
  {"type": "bridge", "bridge": "$BRIDGE", "isGateway": true, "ipMasq": false, "hairpinMode": true,
   "ipam": {"type": "host-local", "ranges": [[{"subnet": "$POD_SUBNET", "gateway": "$GATEWAY"}]], "dataDir": "$dir/cni/ipam"}},
  {"type": "loopback"}]}
EOF
  ip link show "$BRIDGE" >/dev/null 2>&1 || ip link add "$BRIDGE" type bridge
  ip addr replace "$GATEWAY/24" dev "$BRIDGE"
  ip link set "$BRIDGE" up
  cat >"$dir/Corefile" <<EOF
cluster.local:53 {
    bind $GATEWAY
    errors
    kubernetes cluster.local {
        kubeconfig $dir/kubeconfig local
    }
}
EOF
  start coredns "$BIN/coredns" -conf "$dir/Corefile"
  # restrict_oom_score_adj: this kind of VM does not give root CAP_SYS_RESOURCE. Log lines are
  # not split: the agent's report is one line.
  cat >"$dir/containerd.toml" <<EOF
version = 3
root = "$dir/containerd/root"
state = "$dir/containerd/state"
[grpc]
  address = "$dir/containerd.sock"
[plugins.'io.containerd.cri.v1.images'.pinned_images]
  sandbox = "isobench/pause:1"
[plugins.'io.containerd.cri.v1.runtime']
  restrict_oom_score_adj = true
  max_container_log_line_size = -1
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = ["/usr/lib/cni"]
    conf_dir = "$dir/cni/net.d"
  [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
    runtime_type = "io.containerd.runc.v2"
$(runsc_runtime)
EOF
  start containerd "$BIN/containerd" --config "$dir/containerd.toml"
  wait_for 30 "containerd" ctr --address "$dir/containerd.sock" version
  import "$(pause_image)"
  if [ $# -eq 0 ]; then
    set -- "$(own_image "$dir/images/isobench.tar")" "$(own_image "$dir/images/isobench-cassandra.tar" --cassandra "$CASSANDRA_VERSION")"
  fi
  for image in "$@"; do import "$image"; done

  cat >"$dir/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
authentication: {anonymous: {enabled: true}, webhook: {enabled: false}}
authorization: {mode: AlwaysAllow}
address: 127.0.0.1
healthzBindAddress: 127.0.0.1
readOnlyPort: 0
containerRuntimeEndpoint: unix://$dir/containerd.sock
cgroupDriver: cgroupfs
cgroupsPerQOS: false
enforceNodeAllocatable: []
failCgroupV1: false
failSwapOn: false
serializeImagePulls: false
imageGCHighThresholdPercent: 100
evictionHard: {memory.available: "100Mi", nodefs.available: "1%", imagefs.available: "1%"}
clusterDNS: [$GATEWAY]
clusterDomain: cluster.local
EOF
  # The node's name is "localhost", which the API server dials for logs: the kubelet listens on
  # loopback only (it takes any request), and a node IP cannot be a loopback address.
  # The kubelet sets kernel tunables it wants (overcommit, panic on oops, keys); `down` puts
  # back what this host had.
  [ -f "$dir/sysctl.saved" ] || for key in $KUBELET_SYSCTLS; do
    echo "$key=$(sysctl -n "$key")"
  done >"$dir/sysctl.saved"
  # It samples each pod's CPU every second, not every 10 s: isobench counts a pod's CPU in a
  # measured phase from the samples taken in it, and the tests' phases are a few seconds long.
  start kubelet "$BIN/kubelet" --kubeconfig="$dir/kubeconfig" --config="$dir/kubelet.yaml" \
    --hostname-override=localhost --root-dir="$dir/kubelet" --cert-dir="$dir/kubelet-pki" \
    --housekeeping-interval=1s
  wait_for 120 "the node" node_ready
  wait_for 60 "the default ServiceAccount" api GET /api/v1/namespaces/default/serviceaccounts/default

  api POST /apis/node.k8s.io/v1/runtimeclasses \
    '{"apiVersion":"node.k8s.io/v1","kind":"RuntimeClass","metadata":{"name":"runc"},"handler":"runc"}' >/dev/null
  if [ -x "$TOOLS/containerd-shim-runsc-v1" ] && command -v runsc >/dev/null; then
    api POST /apis/node.k8s.io/v1/runtimeclasses \
      '{"apiVersion":"node.k8s.io/v1","kind":"RuntimeClass","metadata":{"name":"gvisor"},"handler":"runsc"}' >/dev/null
  else
    log "no runsc or no gVisor shim in $TOOLS: RuntimeClass gvisor not made"
  fi
  for class in isobench-local isobench-loop isobench-block; do
    api POST /apis/storage.k8s.io/v1/storageclasses \
      "{\"apiVersion\":\"storage.k8s.io/v1\",\"kind\":\"StorageClass\",\"metadata\":{\"name\":\"$class\"},\"provisioner\":\"kubernetes.io/no-provisioner\",\"volumeBindingMode\":\"Immediate\"}" >/dev/null
  done
  for i in $(seq 1 "$PV_COUNT"); do
    mkdir -p "$dir/pv/$i"
    persistent_volume "isobench-local-$i" isobench-local "$dir/pv/$i"
    loop_filesystem "$i"
    persistent_volume "isobench-loop-$i" isobench-loop "$dir/loop-pv/$i"
  done
  for i in $(seq 1 "$BLOCK_PV_COUNT"); do block_volume "$i"; done
  start reclaimer "$(cd "$(dirname "$0")" && pwd)/$(basename "$0")" reclaim "$dir"
  trap - EXIT
  log "ready after $((SECONDS - t0)) s: KUBECONFIG=$dir/kubeconfig"
  echo "$dir/kubeconfig"
}

persistent_volume() { # NAME CLASS PATH: a hostPath volume, scrubbed and reused after each claim
  api POST /api/v1/persistentvolumes "{\"apiVersion\":\"v1\",\"kind\":\"PersistentVolume\",\"metadata\":{\"name\":\"$1\"},\"spec\":{\"storageClassName\":\"$2\",\"capacity\":{\"storage\":\"$PV_SIZE\"},\"accessModes\":[\"ReadWriteOnce\"],\"persistentVolumeReclaimPolicy\":\"Retain\",\"hostPath\":{\"path\":\"$3\",\"type\":\"Directory\"}}}" >/dev/null
}

# The reclaimer (`$0 reclaim DIR`, started by `up`): every second, each of this cluster's
# volumes whose claim was deleted (Released) is emptied on the host and made Available again.
reclaim() {
  while sleep 1; do
    api GET /api/v1/persistentvolumes 2>/dev/null | python3 -c '
import json, sys
for v in json.load(sys.stdin).get("items", []):
    source = v["spec"].get("hostPath") or v["spec"].get("local")
    if v["status"].get("phase") == "Released" and source:
        print(v["metadata"]["name"], source["path"])' 2>/dev/null | while read -r name path; do
      case "$name:$path" in
        *:"$dir"/pv/*|*:"$dir"/loop-pv/*) find "$path" -mindepth 1 -maxdepth 1 -exec rm -rf --one-file-system {} + ;;
        isobench-block-*:/dev/loop*) ;; # a raw device: what a pod wrote there is only bytes
        *) continue ;;
      esac
      curl -sSk --max-time 20 -X PATCH -H "Authorization: Bearer $(cat "$dir/token")" \
        -H 'Content-Type: application/json-patch+json' "https://127.0.0.1:$API_PORT/api/v1/persistentvolumes/$name" \
        --data-binary '[{"op": "remove", "path": "/spec/claimRef"}]' >/dev/null || true
    done
  done
}

block_volume() { # I: a raw loop device over a sparse file, as a Block-mode `local` volume
  local image device
  image="$dir/block/$1.img"
  mkdir -p "$dir/block"
  truncate -s "${PV_SIZE%i}" "$image"
  device=$(losetup --direct-io=on -f --show "$image")
  api POST /api/v1/persistentvolumes "{\"apiVersion\":\"v1\",\"kind\":\"PersistentVolume\",\"metadata\":{\"name\":\"isobench-block-$1\"},\"spec\":{\"storageClassName\":\"isobench-block\",\"capacity\":{\"storage\":\"$PV_SIZE\"},\"accessModes\":[\"ReadWriteOnce\"],\"volumeMode\":\"Block\",\"persistentVolumeReclaimPolicy\":\"Retain\",\"local\":{\"path\":\"$device\"},\"nodeAffinity\":{\"required\":{\"nodeSelectorTerms\":[{\"matchExpressions\":[{\"key\":\"kubernetes.io/hostname\",\"operator\":\"In\",\"values\":[\"localhost\"]}]}]}}}}" >/dev/null
}

loop_filesystem() { # I: an ext4 of its own on a loop device over a sparse file, mounted for volume I
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

import() {
  ctr --address "$dir/containerd.sock" -n k8s.io images import "$1" >/dev/null
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

down() {
  if [ -f "$dir/apiserver.pid" ] && api GET /readyz >/dev/null 2>&1; then
    # Pods first, through the API, so the kubelet tears their sandboxes down itself.
    for ns in $(api GET /api/v1/namespaces | python3 -c 'import json,sys; print(" ".join(i["metadata"]["name"] for i in json.load(sys.stdin)["items"]))'); do
      api DELETE "/api/v1/namespaces/$ns/pods?gracePeriodSeconds=0" >/dev/null || true
    done
    for _ in $(seq 1 100); do
      [ -z "$(ctr --address "$dir/containerd.sock" -n k8s.io tasks ls -q 2>/dev/null)" ] && break
      sleep 0.2
    done
  fi
  stop reclaimer kubelet
  local netns=""
  if [ -S "$dir/containerd.sock" ]; then
    local c
    # The pod sandboxes' network namespaces (CNI's), read from their specs before they go.
    netns=$(for c in $(ctr --address "$dir/containerd.sock" -n k8s.io containers ls -q 2>/dev/null); do
      ctr --address "$dir/containerd.sock" -n k8s.io containers info "$c" 2>/dev/null
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
            print(ns["path"].rsplit("/", 1)[1])' | sort -u)
    for c in $(ctr --address "$dir/containerd.sock" -n k8s.io tasks ls -q 2>/dev/null); do
      ctr --address "$dir/containerd.sock" -n k8s.io tasks kill -s KILL "$c" >/dev/null 2>&1 || true
    done
  fi
  stop containerd
  # Shims outlive containerd by design; these are this cluster's (their -address names DIR).
  pkill -9 -f -- "-address $dir/containerd.sock" 2>/dev/null || true
  stop scheduler controller-manager coredns
  stop apiserver
  stop etcd
  unmount_matching " $dir/[^ ]*"
  # gVisor's shim mounts a placeholder network namespace under /run/containerd, outside DIR: it
  # is this cluster's to remove once no other containerd runs.
  pgrep -x containerd >/dev/null || unmount_matching " /run/containerd/runsc/[^ ]*/null-netns"
  # The loop devices of isobench-loop (they detach once their lazily unmounted filesystems let go).
  for image in "$dir"/loop/*.img "$dir"/block/*.img; do
    [ -e "$image" ] || continue
    losetup -j "$image" | cut -d: -f1 | while read -r device; do losetup -d "$device" 2>/dev/null || true; done
  done
  for n in $netns; do ip netns delete "$n" 2>/dev/null || true; done
  ip link del "$BRIDGE" 2>/dev/null || true
  if [ -f "$dir/sysctl.saved" ]; then
    sysctl -q -w $(cat "$dir/sysctl.saved") || true
    rm -f "$dir/sysctl.saved"
  fi
  log "stopped"
}

case "$action" in
  up) up "$@" ;;
  down) down ;;
  reclaim) reclaim ;;
  *) die "usage: $0 up|down DIR [IMAGE.tar ...]" ;;
esac
