#!/usr/bin/env bash
# Installs what isobench needs on Debian 12, skipping what is already there.
#   scripts/setup.sh demo    what `make demo` needs
#   scripts/setup.sh test    what `make test` needs (everything the tests exercise)
# Run as root. Safe to run again: every step checks first.
set -euo pipefail

stage=${1:-test}
log() { printf 'setup: %s\n' "$*" >&2; }

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
  apt-get update -qq
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
  # network namespaces; time measures client CPU in bench/.
  apt_install fio e2fsprogs xfsprogs util-linux mount sysbench iperf3 iproute2 time procps
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
  # The demo compares the host with runc and gVisor: Debian's packages, no Go build (where the
  # test stage built a current runsc, isobench uses that one).
  apt_install runc runsc
}

runtimes() {
  # runc, crun and podman from Debian; Debian's runsc stays selectable as /usr/bin/runsc.
  apt_install runc crun podman runsc uidmap
  if [ -x "$TOOL_DIR/runsc" ] && "$TOOL_DIR/runsc" --version 2>/dev/null | grep -q "$RUNSC_VERSION"; then
    return 0
  fi
  local built="$CACHE/runsc-$RUNSC_VERSION/runsc"
  if [ ! -x "$built" ]; then
    export PATH="/usr/local/go/bin:$PATH"
    if ! command -v go >/dev/null; then
      log "go is not installed: cannot build a current runsc; tests that need it will say they skipped"
      return 0
    fi
    log "building runsc $RUNSC_VERSION from the Go module proxy (about 2 minutes on 2 cores)"
    local src
    src=$(mktemp -d)
    (cd "$src" && go mod init isobench-runsc >/dev/null 2>&1 \
      && GOFLAGS=-mod=mod go get "gvisor.dev/gvisor/runsc@$RUNSC_VERSION" \
      && mkdir -p "$(dirname "$built")" \
      && CGO_ENABLED=0 GOFLAGS=-mod=mod go build -o "$built" \
           -ldflags "-X gvisor.dev/gvisor/runsc/version.version=$RUNSC_VERSION" gvisor.dev/gvisor/runsc)
    rm -rf "$src"
  fi
  install -D -m 755 "$built" "$TOOL_DIR/runsc"
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

# Cassandra runs on Java 17 (Debian 12's newest); Maven fetches it from Maven Central
# (`isobench server fetch cassandra`, which the Makefile runs after the build).
databases() {
  apt_install openjdk-17-jre-headless maven
}

need_root
check_rust
case "$stage" in
  demo) core; demo_runtimes; databases ;;
  test) core; report_tools; runtimes; vms; network_volumes; databases ;;
  *) log "unknown stage '$stage' (demo | test)"; exit 2 ;;
esac
log "ready ($stage)"
