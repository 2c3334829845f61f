#!/usr/bin/env bash
# Where an fio run's level comes from, measured with fio and runc alone (no isobench in the
# loop), so that what the harness does and what the runtime does can be told apart. The demo's
# job (4k random writes, each fsynced, 256 MiB file, RUNTIME s) runs PAIRS times on the host and
# in runc, in a random order per pair, each run after a sync and a second's rest, under each of
# these designs:
#   run       a new backing file, ext4 and mount for every run, then the sync and rest
#   fresh     a new backing file, ext4 and mount for every run, and the run at once (as isobench
#             did: its settle came before the volume was made)
#   pair      one volume per pair, the host and runc writing their own file on it
#   all       one volume for every run of the design
#   nosettle  as pair, with no sync or rest before a run
#   scratch   as pair, but the host's fio writes its output where isobench's host runs did (a
#             directory on the root disk) and runc's in its tmpfs-backed root
#   cgroup    as pair, with the host's fio started in a cpu cgroup of its own (runc's has one)
# Prints per design: the host's and runc's median IOPS, runc/host per pair (median, spread), and
# the coefficient of variation of each side's runs.
#
#   bench/fio-levels.sh                 PAIRS=8 RUNTIME=5
#   DESIGNS="pair cgroup" bench/fio-levels.sh
set -euo pipefail
PAIRS=${PAIRS:-8}
RUNTIME=${RUNTIME:-5}
DESIGNS=${DESIGNS:-run fresh pair all nosettle scratch cgroup}
WORK=$(mktemp -d /var/tmp/fio-levels.XXXXXX)
BUNDLE=$WORK/bundle
MNT=$WORK/mnt
CGROUP=/sys/fs/cgroup/cpu/fio-levels-$$

cleanup() {
  runc delete -f "fio-levels-$$" >/dev/null 2>&1 || true
  umount "$BUNDLE/rootfs" 2>/dev/null || true
  umount "$WORK/upper" 2>/dev/null || true
  umount "$MNT" 2>/dev/null || true
  losetup -j "$WORK/volume.img" -O NAME -n 2>/dev/null | xargs -r -n1 losetup -d
  rmdir "$CGROUP" 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT INT TERM

fio_args() { # DIR OUTPUT
  echo "--name=fio-random --directory=$1 --rw=randwrite --bs=4k --size=256M --fsync=1 \
    --time_based --runtime=${RUNTIME}s --output-format=json --output=$2"
}

new_volume() {
  umount "$MNT" 2>/dev/null || true
  losetup -j "$WORK/volume.img" -O NAME -n | xargs -r -n1 losetup -d
  rm -f "$WORK/volume.img"
  truncate -s 2G "$WORK/volume.img"
  local dev
  dev=$(losetup --find --show --direct-io=on "$WORK/volume.img")
  mkfs.ext4 -q -F -E lazy_itable_init=0,lazy_journal_init=0 "$dev"
  mkdir -p "$MNT"
  mount -t ext4 "$dev" "$MNT"
  mkdir -p "$MNT/host" "$MNT/runc"
}

# A runc bundle whose root is the host's / under a tmpfs upper layer, as isobench's; the volume
# is bound at /data.
make_bundle() {
  mkdir -p "$BUNDLE/rootfs" "$WORK/upper"
  mount -t tmpfs tmpfs "$WORK/upper"
  mkdir -p "$WORK/upper/u" "$WORK/upper/w"
  mount -t overlay overlay -o "lowerdir=/,upperdir=$WORK/upper/u,workdir=$WORK/upper/w" "$BUNDLE/rootfs"
  (cd "$BUNDLE" && runc spec)
  local args
  args=$(printf '%s\n' fio $(fio_args /data/runc /tmp/fio.json) | jq -R . | jq -s .)
  jq --argjson args "$args" --arg mnt "$MNT" '
    .process.terminal = false | .process.args = ["sh", "-c", (($args | join(" ")) + " && cat /tmp/fio.json")]
    | .root.readonly = false
    | .mounts += [{"destination": "/data", "type": "bind", "source": $mnt, "options": ["rbind", "rw"]}]
    | .linux.namespaces |= map(select(.type != "network"))' "$BUNDLE/config.json" >"$BUNDLE/c.json"
  mv "$BUNDLE/c.json" "$BUNDLE/config.json"
}

iops() { python3 -c 'import json,sys; t=sys.stdin.read(); print(json.loads(t[t.find("{"):])["jobs"][0]["write"]["iops"])'; }

run_host() { # DESIGN
  local out
  case $1 in
    scratch) out=/var/lib/fio-levels-$$.json ;;
    *) out=/dev/shm/fio-levels-$$.json ;;
  esac
  if [ "$1" = cgroup ]; then
    mkdir -p "$CGROUP"
    sh -c "echo \$\$ > $CGROUP/cgroup.procs; exec fio $(fio_args "$MNT/host" "$out")" >/dev/null
  else
    fio $(fio_args "$MNT/host" "$out") >/dev/null
  fi
  iops <"$out"
  rm -f "$out"
}

run_runc() {
  runc run -b "$BUNDLE" "fio-levels-$$" </dev/null | iops
}

settle() { case $1 in nosettle | fresh) ;; *) sync; sleep 1 ;; esac; }

make_bundle
printf '%-8s %12s %12s %14s %16s %8s %8s\n' design host_iops runc_iops runc/host min..max host_cv runc_cv
for design in $DESIGNS; do
  [ "$design" = all ] && new_volume
  hosts=() runcs=()
  for ((i = 0; i < PAIRS; i++)); do
    order="host runc"
    ((RANDOM % 2)) && order="runc host"
    case $design in run | fresh | all) ;; *) new_volume ;; esac
    for side in $order; do
      [ "$design" = fresh ] && settle run
      case $design in run | fresh) new_volume ;; esac
      settle "$design"
      if [ "$side" = host ]; then hosts+=("$(run_host "$design")"); else runcs+=("$(run_runc)"); fi
    done
  done
  python3 - "$design" "${hosts[*]}" "${runcs[*]}" <<'PY'
import statistics as s, sys
design, h, r = sys.argv[1], [float(x) for x in sys.argv[2].split()], [float(x) for x in sys.argv[3].split()]
ratios = [b / a for a, b in zip(h, r)]
cv = lambda v: 100 * s.stdev(v) / s.mean(v)
print(f"{design:<8} {s.median(h):12.0f} {s.median(r):12.0f} {s.median(ratios):14.3f} "
      f"{min(ratios):7.3f}..{max(ratios):<7.3f} {cv(h):7.1f}% {cv(r):7.1f}%")
PY
done
