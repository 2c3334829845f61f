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
  # sysbench and iperf3 are the CPU/memory and network engines; time measures client CPU in bench/.
  apt_install fio e2fsprogs xfsprogs util-linux mount sysbench iperf3 time procps
}

report_tools() {
  # Headless Chromium renders report.html in the tests (and for `isobench report --png`).
  apt_install chromium fonts-dejavu-core
}

need_root
check_rust
case "$stage" in
  demo) core ;;
  test) core; report_tools ;;
  *) log "unknown stage '$stage' (demo | test)"; exit 2 ;;
esac
log "ready ($stage)"
