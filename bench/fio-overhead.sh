#!/usr/bin/env bash
# What does running fio through isobench cost? The same fio job, bare and through `isobench run`
# (host environment, a dir volume on the same tmpfs), RUNS times each, interleaved in ABBA order
# so machine drift hits both alike. fio is pinned to one CPU on both sides (CPU=…): where the
# scheduler happens to place a single job is this machine's largest source of noise, and a pinned
# fio would feel it more, not less, if isobench's own processes took that CPU's time.
# Prints the median IOPS of each and the ratio isobench/bare (goal ≥ 0.98).
# With DENSITY=N the isobench side is a density cell (N sandboxes behind a barrier, results
# aggregated) and the bare side N fios started together (bench/density-overhead.sh: N = 1).
#
#   bench/fio-overhead.sh            defaults: randread bs=4k iodepth=8 10 s, 5 runs each
#   RW=randwrite RUNTIME=20 RUNS=7 bench/fio-overhead.sh
set -euo pipefail
cd "$(dirname "$0")/.."
RW=${RW:-randread} BS=${BS:-4k} IODEPTH=${IODEPTH:-8} SIZE=${SIZE:-512M} RUNTIME=${RUNTIME:-10} RUNS=${RUNS:-5}
CPU=${CPU:-1} DENSITY=${DENSITY:-}
BIN=${ISOBENCH:-target/release/isobench}
[ -x "$BIN" ] || cargo build --release -q
WORK=$(mktemp -d /var/tmp/isobench-bench.XXXXXX)
VOL="$WORK/vol"
cleanup() { umount "$VOL" 2>/dev/null || true; rm -rf "$WORK"; }
trap cleanup EXIT
mkdir -p "$VOL" && mount -t tmpfs -o size=2g bench-tmpfs "$VOL"

cat > "$WORK/suite.toml" <<TOML
name = "fio-overhead"
repeat = 1
baseline = { env = "host", volume = "vol" }
[[env]]
name = "host"
kind = "host"
[[volume]]
name = "vol"
kind = "dir"
path = "$VOL"
[[workload]]
name = "fio"
kind = "fio"
rw = "$RW"
bs = "$BS"
iodepth = $IODEPTH
size = "$SIZE"
runtime = "${RUNTIME}s"
direct = true
ioengine = "libaio"
args = ["--cpus_allowed=$CPU"]
${DENSITY:+density = $DENSITY}
TOML

# Exactly the options isobench passes to fio for that suite; with DENSITY, that many at once.
bare_iops() {
  local n=${DENSITY:-1} k
  for k in $(seq 1 "$n"); do
    mkdir -p "$VOL/bare-$k"
    fio --name=isobench --directory="$VOL/bare-$k" --rw="$RW" --bs="$BS" --iodepth="$IODEPTH" --numjobs=1 \
        --size="$SIZE" --runtime="${RUNTIME}s" --time_based --direct=1 --ioengine=libaio \
        --group_reporting --cpus_allowed="$CPU" --output-format=json+ --output="$WORK/bare-$k.json" >/dev/null &
  done
  wait
  rm -rf "$VOL"/bare-*
  python3 -c 'import json,sys; print(sum(j["read"]["iops"]+j["write"]["iops"] for f in sys.argv[1:] for j in json.load(open(f))["jobs"]))' "$WORK"/bare-*.json
}

isobench_iops() {
  local out="$WORK/set-$1"
  ISOBENCH_WORKDIR="$WORK/state" "$BIN" run "$WORK/suite.toml" --out "$out" >/dev/null 2>&1
  awk -F, '$7 == "iops" { print $8 }' "$out/samples.csv"
}

median() { sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

bare=() ; iso=()
for i in $(seq 1 "$RUNS"); do
  if [ $((i % 2)) = 1 ]; then b=$(bare_iops); n=$(isobench_iops "$i"); else n=$(isobench_iops "$i"); b=$(bare_iops); fi
  bare+=("$b"); iso+=("$n")
  printf 'run %d: bare %.0f  isobench %.0f IOPS\n' "$i" "$b" "$n"
done
mb=$(printf '%s\n' "${bare[@]}" | median); mi=$(printf '%s\n' "${iso[@]}" | median)
ratio=$(awk -v a="$mi" -v b="$mb" 'BEGIN { printf "%.3f", a / b }')
printf '\nfio %s bs=%s iodepth=%s %ss on tmpfs, CPU %s, %d runs each (ABBA)%s\n' "$RW" "$BS" "$IODEPTH" "$RUNTIME" "$CPU" "$RUNS" "${DENSITY:+, density $DENSITY}"
printf 'median IOPS: bare %.0f, isobench %.0f\nratio isobench/bare: %s (goal >= 0.98)\n' "$mb" "$mi" "$ratio"
awk -v r="$ratio" 'BEGIN { exit !(r >= 0.98) }'
