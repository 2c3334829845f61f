#!/usr/bin/env bash
# What does network storage cost against the local device? The figure the container-attached
# storage study's "< 10 % overhead" goal is about: fio 4k, iodepth 64, numjobs 8, direct, on the
# local loop device, on an NBD export of the same kind of file on the host's loopback (nbd-local)
# and through the mirror nexus with one replica (mirror-1), RUNS runs of each in one isobench
# run (round-robin, so drift hits all alike). Prints the median IOPS of each and the ratios
# nbd-local/local and mirror-1/local per rw (goal ≥ 0.90).
#
#   bench/network-volume.sh               defaults: randread randwrite randrw, 5 s, 5 runs
#   RW="randwrite" RUNTIME=10 RUNS=7 bench/network-volume.sh
set -euo pipefail
cd "$(dirname "$0")/.."
RW=${RW:-randread randwrite randrw} RUNTIME=${RUNTIME:-5} RUNS=${RUNS:-5}
BIN=${ISOBENCH:-target/release/isobench}
[ -x "$BIN" ] || cargo build --release -q
WORK=$(mktemp -d /var/tmp/isobench-bench.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
rws=$(printf '"%s", ' $RW)

cat > "$WORK/suite.toml" <<TOML
name = "network-volume-bench"
repeat = $RUNS
baseline = { env = "host", volume = "local" }
[[env]]
name = "host"
kind = "host"
[[volume]]
name = "local"
kind = "block"
backing = "file"
size = "1G"
[[volume]]
name = "nbd-local"
kind = "nbd"
where = "local"
size = "1G"
[[volume]]
name = "mirror-1"
kind = "mirror"
replicas = 1
size = "1G"
[[workload]]
name = "fio"
kind = "fio"
rw = [${rws%, }]
bs = "4k"
iodepth = 64
numjobs = 8
size = "512M"
runtime = "${RUNTIME}s"
direct = true
ioengine = "libaio"
TOML

ISOBENCH_WORKDIR="$WORK/state" "$BIN" run "$WORK/suite.toml" --out "$WORK/set" >"$WORK/run.log" 2>&1 || {
  tail -20 "$WORK/run.log"; exit 1; }
python3 - "$WORK/set/samples.csv" "$RUNS" "$RUNTIME" <<'PY'
import csv, statistics, sys
iops = {}
for row in csv.DictReader(open(sys.argv[1])):
    if row["metric"] == "iops":
        iops.setdefault((row["params"], row["volume"]), []).append(float(row["value"]))
print(f"fio 4k iodepth 64 numjobs 8 direct, {sys.argv[3]} s, {sys.argv[2]} runs each; median IOPS")
print(f"{'':16} {'local':>10} {'nbd-local':>10} {'mirror-1':>10}   nbd-local/local  mirror-1/local")
for params in sorted({p for p, _ in iops}):
    m = {v: statistics.median(iops.get((params, v), [float("nan")])) for v in ("local", "nbd-local", "mirror-1")}
    print(f"{params:16} {m['local']:10.0f} {m['nbd-local']:10.0f} {m['mirror-1']:10.0f}"
          f"   {m['nbd-local'] / m['local']:15.3f} {m['mirror-1'] / m['local']:15.3f}")
PY
