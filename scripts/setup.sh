#!/usr/bin/env bash
# Installs what isobench needs on Debian 12, skipping what is already there.
#   scripts/setup.sh demo    what `make demo` needs
#   scripts/setup.sh test    what `make test` needs (everything the tests exercise)
#   scripts/setup.sh fuzz    cargo-fuzz and a nightly toolchain, for long fuzzing runs
# Run as root. Safe to run again: every step checks first.
set -euo pipefail

stage=${1:-test}
log() { printf 'setup: %s\n' "$*" >&2; }
# took WHAT START: says how long WHAT took since START ($SECONDS then).
took() { log "built $1 in $((SECONDS - $2)) s"; }

need_root() {
  if [ "$(id -u)" != 0 ]; then
    log "run as root: isobench mounts filesystems and attaches loop devices"
    exit 1
  fi
}

# apt_install PKG... : installs the packages that are not installed yet.
apt_install() {
  local missing=()
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  log "installing Debian packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  if [ -z "${apt_updated:-}" ]; then
    apt-get update -qq
    apt_updated=1
  fi
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

check_rust() {
  export PATH="$HOME/.cargo/bin:$PATH"
  if ! command -v cargo >/dev/null; then
    log "cargo is missing: install Rust (1.85 or newer) with rustup; Debian 12's rustc is too old for this project"
    exit 1
  fi
}

core() {
  # fio is the disk workload; e2fsprogs/xfsprogs/util-linux make and mount loop volumes;
  # sysbench and iperf3 are the CPU/memory and network engines; iproute2 makes the sandboxes'
  # network namespaces; time measures client CPU in bench/; linux-perf counts the machine's
  # events beside each run.
  apt_install fio e2fsprogs xfsprogs util-linux mount sysbench iperf3 iproute2 time procps linux-perf
}

network_volumes() {
  # nbdkit serves the storage nodes, qemu-storage-daemon (qemu-system-common) is the mirror's
  # nexus and the FUSE exports; nbd-client and nvme-cli are the kernel's clients, used where the
  # kernel has nbd and nvme-tcp.
  apt_install nbdkit qemu-system-common nbd-client nvme-cli
}

report_tools() {
  # Headless Chromium renders report.html in the tests (and for `isobench report --png`).
  apt_install chromium fonts-dejavu-core
}

# A current gVisor: Debian's runsc is from 2022 (ptrace and kvm platforms only). Built from the Go
# module proxy, cached by version, installed where isobench looks first for "runsc".
RUNSC_VERSION=${RUNSC_VERSION:-v0.0.0-20260905035102-160fafc42237}
TOOL_DIR=/usr/local/lib/isobench/bin
CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/isobench

demo_runtimes() {
  # The demo compares the host with runc and gVisor: the same gVisor as the tests and every
  # other suite (the current one, built once), not Debian's 2022 runsc.
  apt_install runc
  current_runsc
  if [ ! -x "$TOOL_DIR/runsc" ]; then
    log "no current runsc could be built: the demo measures Debian's 2022 runsc (its verdict names the version)"
    apt_install runsc
  fi
}

runtimes() {
  # runc, crun and podman from Debian; Debian's runsc stays selectable as /usr/bin/runsc.
  apt_install runc crun podman runsc uidmap
  current_runsc
}

current_runsc() {
  runsc_current && return 0
  if ! have_go; then
    log "go is not installed: cannot build a current runsc; tests that need it will say they skipped"
    return 0
  fi
  wait_go_parts
  go_parts demo
  install -D -m 755 "$RUNSC_BIN" "$TOOL_DIR/runsc"
}

runsc_current() {
  [ -x "$TOOL_DIR/runsc" ] && "$TOOL_DIR/runsc" --version 2>/dev/null | grep -q "$RUNSC_VERSION"
}

have_go() {
  export PATH="/usr/local/go/bin:$PATH"
  command -v go >/dev/null
}

RUNSC_BIN=$CACHE/runsc-$RUNSC_VERSION/runsc
SHIM_BIN=$CACHE/runsc-$RUNSC_VERSION/containerd-shim-runsc-v1

# build_gvisor OUT PACKAGE: a command of gVisor's module at RUNSC_VERSION (runsc, its shim).
build_gvisor() {
  local out=$1 package=$2 src
  src=$(mktemp -d)
  (cd "$src" && go mod init isobench-gvisor >/dev/null 2>&1 \
    && GOFLAGS=-mod=mod go get "gvisor.dev/gvisor/$package@$RUNSC_VERSION" \
    && mkdir -p "$(dirname "$out")" \
    && { [ "$package" != shim ] || keep_shim_oom_score "$src"; } \
    && CGO_ENABLED=0 GOFLAGS=-mod=mod go build -o "$out" \
         -ldflags "-X gvisor.dev/gvisor/runsc/version.version=$RUNSC_VERSION" "gvisor.dev/gvisor/$package")
  rm -rf "$src"
}

build_runsc() { build_gvisor "$1" runsc; }

build_shim() { build_gvisor "$1" shim; }

# cached NAME BINARY BUILD [OUT]: unless BINARY is there, builds NAME with `BUILD OUT` (OUT
# defaults to BINARY) from the Go module proxy, and says how long that took.
cached() {
  local name=$1 binary=$2 build=$3 out=${4:-$2} start=$SECONDS
  [ -x "$binary" ] && return 0
  log "building $name from the Go module proxy"
  "$build" "$out"
  took "$name" "$start"
}

# go_parts STAGE: builds into the cache what STAGE installs from it and the machine lacks.
go_parts() {
  have_go || return 0
  runsc_current || cached "runsc $RUNSC_VERSION" "$RUNSC_BIN" build_runsc
  [ "$1" = test ] || return 0
  shim_installed || cached "gVisor's containerd shim $RUNSC_VERSION" "$SHIM_BIN" build_shim
  kubernetes_installed && return 0
  cached "Kubernetes v$KUBE_VERSION" "$KUBE_BUILD/kubelet" build_kubernetes "$KUBE_BUILD"
  cached "containerd $CONTAINERD_VERSION" "$CONTAINERD_BUILD/containerd" build_containerd "$CONTAINERD_BUILD"
  cached "CoreDNS $COREDNS_VERSION" "$COREDNS_BUILD/coredns" build_coredns "$COREDNS_BUILD"
}

# The Go builds keep both cores busy, while apt mostly waits on the network and the disk: they
# start in the background before the packages (start_go_parts) and the steps that install from
# the cache wait for them (wait_go_parts), then build in the foreground whatever is still missing
# (go_parts again), so that a failed build shows its error there.
start_go_parts() {
  go_log=$(mktemp)
  go_parts "$1" >"$go_log" 2>&1 &
  go_builds=$!
  trap 'stop_tree "${go_builds:-}"; rm -f "$go_log"' EXIT
}

wait_go_parts() {
  [ -n "${go_builds:-}" ] || return 0
  wait "$go_builds" || log "a build in the background failed (its output follows); trying it again"
  cat "$go_log" >&2
  rm -f "$go_log"
  go_builds=
}

# stop_tree PID: a process and all its descendants (the background builds if setup fails first).
stop_tree() {
  [ -n "$1" ] || return 0
  local child
  for child in $(pgrep -P "$1"); do
    stop_tree "$child"
  done
  kill "$1" 2>/dev/null || true
}

# A real Kubernetes node for the k8s environment's tests: etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler and kubelet built from the Go module proxy (no release
# tarball is reachable here), cached by version. containerd runs the pods with Debian's runc and
# with gVisor's containerd shim built from the same Go module as runsc. Debian's containerd (1.6)
# cannot start a current gVisor shim (it does not read the shim's bootstrap reply), so containerd
# is the version that shim is built against, also from the Go module proxy.
# The builds run in turn: each Go build already keeps every core busy, and side by side (with
# cargo-fuzz's) they took 534 s from empty caches on 2 cores against 552 s in turn. They run
# beside the Debian packages' installation instead (start_go_parts).
KUBE_VERSION=${KUBE_VERSION:-1.34.4}
CONTAINERD_VERSION=${CONTAINERD_VERSION:-v2.1.5}
KUBE_DIR=/usr/local/lib/isobench/k8s-v$KUBE_VERSION
KUBE_BUILD=$CACHE/k8s-v$KUBE_VERSION
CONTAINERD_BUILD=$CACHE/containerd-$CONTAINERD_VERSION

# gVisor's shim gives itself an OOM score of -999, which takes CAP_SYS_RESOURCE; where root lacks
# it (this project's CI VMs) every gVisor pod would fail with "failed to set OOM Score on shim".
# There the shim is built from a copy of the module with that one constant at 0.
keep_shim_oom_score() {
  local src=$1 module
  if (echo -999 >/proc/self/oom_score_adj) 2>/dev/null; then
    return 0
  fi
  module=$(cd "$src" && GOFLAGS=-mod=mod go list -m -f '{{.Dir}}' gvisor.dev/gvisor)
  cp -r "$module" "$src/gvisor"
  chmod -R u+w "$src/gvisor"
  sed -i 's/oomScoreMax = -999/oomScoreMax = 0/' "$src/gvisor/pkg/shim/v1/manager.go"
  (cd "$src" && go mod edit -replace gvisor.dev/gvisor=./gvisor)
  log "no CAP_SYS_RESOURCE: gVisor's shim is built to keep its OOM score at 0"
}

kubernetes() {
  apt_install runc openssl containernetworking-plugins busybox-static curl python3
  if ! have_go; then
    kubernetes_installed || log "go is not installed: cannot build Kubernetes; the k8s tests will say they skipped"
    return 0
  fi
  wait_go_parts
  go_parts test
  shim_installed || install -D -m 755 "$SHIM_BIN" "$TOOL_DIR/containerd-shim-runsc-v1"
  kubernetes_installed && return 0
  mkdir -p "$KUBE_DIR"
  install -m 755 "$KUBE_BUILD"/* "$CONTAINERD_BUILD"/* "$COREDNS_BUILD"/* "$KUBE_DIR/"
}

shim_installed() { [ -x "$TOOL_DIR/containerd-shim-runsc-v1" ]; }

kubernetes_installed() {
  [ -x "$KUBE_DIR/kubelet" ] && [ -x "$KUBE_DIR/etcd" ] && [ -x "$KUBE_DIR/containerd" ] \
    && [ -x "$KUBE_DIR/coredns" ]
}

# The cluster's DNS: a StatefulSet's pods find one another by name through their headless
# Service (a Cassandra node's seed is `<set>-0.<service>`). CoreDNS with the plugin a cluster's
# DNS serves its names with (kubernetes), built the way CoreDNS documents for a chosen set of
# plugins: a main that imports them.
COREDNS_VERSION=${COREDNS_VERSION:-v1.14.7}
COREDNS_BUILD=$CACHE/coredns-$COREDNS_VERSION

build_coredns() {
  local out=$1 src
  src=$(mktemp -d)
  (
    cd "$src"
    go mod init isobench-coredns >/dev/null 2>&1
    cat >main.go <<'EOF'
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	"github.com/coredns/coredns/coremain"
)

func init() { dnsserver.Directives = []string{"bind", "errors", "kubernetes"} }

func main() { coremain.Run() }
EOF
    GOFLAGS=-mod=mod go get "github.com/coredns/coredns@$COREDNS_VERSION" 2>&1 | grep -v '^go: ' || true
    mkdir -p "$out.tmp"
    CGO_ENABLED=0 GOFLAGS=-mod=mod go build -ldflags "-s -w" -o "$out.tmp/coredns" .
  )
  rm -rf "$src" "$out"
  mv "$out.tmp" "$out"
}

build_containerd() {
  local out=$1 src cmd
  src=$(mktemp -d)
  (
    cd "$src"
    go mod init isobench-containerd >/dev/null 2>&1
    GOFLAGS=-mod=mod go get "github.com/containerd/containerd/v2/cmd/containerd@$CONTAINERD_VERSION" 2>&1 \
      | grep -v '^go: ' || true
    mkdir -p "$out.tmp"
    for cmd in containerd containerd-shim-runc-v2 ctr; do
      CGO_ENABLED=0 GOFLAGS=-mod=mod go build -tags "no_btrfs no_devmapper no_zfs" -o "$out.tmp/$cmd" \
        "github.com/containerd/containerd/v2/cmd/$cmd"
    done
  )
  rm -rf "$src" "$out"
  mv "$out.tmp" "$out"
}

build_kubernetes() {
  local out=$1 src ldflags p
  src=$(mktemp -d)
  GOFLAGS=-mod=mod go mod download -json "k8s.io/kubernetes@v$KUBE_VERSION" >/dev/null
  cp -r "$(go env GOMODCACHE)/k8s.io/kubernetes@v$KUBE_VERSION/." "$src/"
  chmod -R u+w "$src"
  (
    cd "$src"
    rm -f go.work go.work.sum
    # The module zip has no staging/: each ./staging replace points at the published k8s.io/*
    # module of the same minor and patch instead.
    # shellcheck disable=SC2046
    go mod edit $(sed -n '/^replace (/,/^)/p' go.mod \
      | awk -v v="v0.${KUBE_VERSION#1.}" '/=>/ { printf " -replace=%s=%s@%s", $1, $1, v }')
    # etcd 3.6 from the version Kubernetes itself requires (Debian's 3.4 breaks watches).
    mkdir -p cmd/isobench-etcd
    printf 'package main\n\nimport (\n\t"os"\n\n\t"go.etcd.io/etcd/server/v3/etcdmain"\n)\n\nfunc main() { etcdmain.Main(os.Args) }\n' \
      > cmd/isobench-etcd/main.go
    ldflags="-s -w"
    for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
      ldflags="$ldflags -X $p.gitVersion=v$KUBE_VERSION -X $p.gitMajor=1"
      ldflags="$ldflags -X $p.gitMinor=$(echo "$KUBE_VERSION" | cut -d. -f2) -X $p.gitTreeState=clean"
    done
    mkdir -p "$out.tmp"
    CGO_ENABLED=0 GOFLAGS=-mod=mod go build -ldflags "$ldflags" -o "$out.tmp/" \
      ./cmd/kube-apiserver ./cmd/kube-controller-manager ./cmd/kube-scheduler ./cmd/kubelet \
      ./cmd/isobench-etcd
  )
  mv "$out.tmp/isobench-etcd" "$out.tmp/etcd"
  rm -rf "$src" "$out"
  mv "$out.tmp" "$out"
}

# Guest kernels for the vm environment: Debian's *generic* kernel (the cloud one has no 9p),
# downloaded and unpacked, not installed on the host.
GUEST_DIR=/usr/local/lib/isobench/guest

vms() {
  apt_install qemu-system-x86 busybox-static kmod
  if ls "$GUEST_DIR"/*/boot/vmlinuz-* >/dev/null 2>&1; then
    return 0
  fi
  local pkg
  pkg=$(apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-/ { print $2; exit }')
  if [ -z "$pkg" ]; then
    apt-get update -qq
    pkg=$(apt-cache depends linux-image-amd64 | awk '/Depends: linux-image-/ { print $2; exit }')
  fi
  local version=${pkg#linux-image-} tmp
  log "unpacking guest kernel $version into $GUEST_DIR (not installed on the host)"
  tmp=$(mktemp -d)
  (cd "$tmp" && apt-get download -q -o APT::Sandbox::User=root "$pkg" >/dev/null)
  mkdir -p "$GUEST_DIR/$version"
  dpkg -x "$tmp"/*.deb "$GUEST_DIR/$version"
  rm -rf "$tmp" "$GUEST_DIR/$version/usr"
  depmod -b "$GUEST_DIR/$version" "$version"
}

# cargo-fuzz drives the long fuzzing runs (scripts/fuzz.sh 600) on a nightly toolchain; make
# test's brief ones need neither (they build with the stable toolchain beside its tests).
fuzz_tools() {
  local start=$SECONDS
  if ! cargo fuzz --version >/dev/null 2>&1; then
    log "installing cargo-fuzz from crates.io"
    cargo install --locked --quiet cargo-fuzz
    took cargo-fuzz "$start"
  fi
  if ! rustup run nightly rustc --version >/dev/null 2>&1; then
    log "installing a nightly Rust toolchain for cargo-fuzz"
    rustup toolchain install nightly --profile minimal ||
      log "could not install a nightly toolchain: the fuzz targets will be skipped"
  fi
}

# Cassandra runs on Java 17 (Debian 12's newest); Maven fetches it from Maven Central
# (`isobench server fetch cassandra`, which the Makefile runs after the build). PostgreSQL,
# MariaDB and Redis are Debian's, with the loads their users run (pgbench comes with
# PostgreSQL, sysbench's OLTP scripts with sysbench); isobench starts each server itself, so the
# packages' own services are stopped and kept from starting at boot.
databases() {
  apt_install openjdk-17-jre-headless maven postgresql redis-server redis-tools mariadb-server mariadb-client sysbench
  for service in postgresql redis-server mariadb; do
    if command -v systemctl >/dev/null && systemctl is-enabled "$service" >/dev/null 2>&1; then
      systemctl disable --now "$service" >/dev/null 2>&1 || true
    fi
  done
}

# The tests check what isobench wrote with a CQL client of another make: Python's. The history's
# tests start a PostgreSQL server of their own, from the package's binaries, on a port of their own
# (one of them speaking TLS only, its certificates made with openssl). A known-answer Java program
# is compiled with the JDK's javac.
outside_clients() {
  apt_install python3-cassandra postgresql openssl openjdk-17-jdk-headless
}

need_root
check_rust
started=$SECONDS
case "$stage" in
  demo | test) start_go_parts "$stage" ;;
  fuzz) ;;
  *) log "unknown stage '$stage' (demo | test | fuzz)"; exit 2 ;;
esac
# The steps that install Go-built parts (demo_runtimes, runtimes, kubernetes) come last.
case "$stage" in
  demo) core; databases; demo_runtimes ;;
  test) core; report_tools; vms; network_volumes; databases; outside_clients; runtimes; kubernetes ;;
  fuzz) fuzz_tools ;;
esac
log "ready ($stage) in $((SECONDS - started)) s"
