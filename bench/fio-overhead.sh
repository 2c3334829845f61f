#!/usr/bin/env bash
# What does running fio through isobench cost? The same fio job bare and through `isobench run`
# (host environment, a dir volume on a tmpfs), in PAIRS rounds. Each round runs every arm once,
# in an order that reverses from one round to the next (ABC CBA …), so drift hits all arms alike;
# each isobench arm is divided by the bare run of its own round, and the ratios' geometric mean
# is printed with its paired 95 % confidence interval (Student t on the log ratios).
# Arms: `isobench` as it runs by default (per-second IOPS log and the sys. collectors on),
# `no-collect` (collect = false: no CPU, switch, fault or device counters), `no-series`
# (series = []: no per-second log at all) and, with CLAT=1, `clat-log` (series = ["iops",
# "clat"]: fio's latency log, which costs a clock read per I/O). The gaps to `isobench` are the
# collectors' and the time series' costs.
# CPU=1 pins fio's jobs to one CPU (the default: where the scheduler places a single job is this
# machine's largest noise); CPU= leaves them to the scheduler, e.g. NUMJOBS=4 CPU= .
# With DENSITY=N the isobench side is a density cell (N sandboxes behind a barrier, results
# aggregated) and the bare side N fios started together (bench/density-overhead.sh: N = 1).
# Exits 0 when the isobench arm's ratio is >= 0.98 and its CI's lower end >= 0.97.
#
#   bench/fio-overhead.sh                 randread bs=4k iodepth=8, 5 s, 40 rounds (~12 min)
#   RW=randwrite RUNTIME=10 PAIRS=20 bench/fio-overhead.sh
#   NUMJOBS=4 CPU= bench/fio-overhead.sh
set -euo pipefail
cd "$(dirname "$0")/.."
RW=${RW:-randread} BS=${BS:-4k} IODEPTH=${IODEPTH:-8} NUMJOBS=${NUMJOBS:-1} SIZE=${SIZE:-512M}
RUNTIME=${RUNTIME:-5} PAIRS=${PAIRS:-40} CPU=${CPU-1} DENSITY=${DENSITY:-} CLAT=${CLAT:-}
BIN=${ISOBENCH:-target/release/isobench}
[ -x "$BIN" ] || cargo build --release -q
WORK=$(mktemp -d /var/tmp/isobench-bench.XXXXXX)
VOL="$WORK/vol"
cleanup() { umount "$VOL" 2>/dev/null || true; rm -rf "$WORK"; }
trap cleanup EXIT
mkdir -p "$VOL" && mount -t tmpfs -o size=3g bench-tmpfs "$VOL"
pin=() args=""
[ -n "$CPU" ] && pin=("--cpus_allowed=$CPU") && args="\"--cpus_allowed=$CPU\""

# One suite per isobench arm; they differ only in which per-second series fio logs and whether
# the collectors run.
suite() {
  cat <<TOML
name = "fio-overhead"
repeat = 1
collect = ${2:-true}
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
numjobs = $NUMJOBS
size = "$SIZE"
runtime = "${RUNTIME}s"
direct = true
ioengine = "libaio"
args = [$args]
series = $1
${DENSITY:+density = $DENSITY}
TOML
}
suite '["iops"]' > "$WORK/isobench.toml"
suite '["iops"]' false > "$WORK/no-collect.toml"
suite '[]' > "$WORK/no-series.toml"
suite '["iops", "clat"]' > "$WORK/clat-log.toml"
arms=(bare isobench no-collect no-series) && [ -n "$CLAT" ] && arms+=(clat-log)

# Exactly the options isobench passes to fio for that suite, without the per-second log;
# with DENSITY, that many at once.
run_bare() {
  local n=${DENSITY:-1} k
  for k in $(seq 1 "$n"); do
    mkdir -p "$VOL/bare-$k"
    fio --name=isobench --ioengine=libaio --directory="$VOL/bare-$k" --rw="$RW" --bs="$BS" --iodepth="$IODEPTH" \
        --numjobs="$NUMJOBS" --size="$(per_job_size)" --runtime="${RUNTIME}s" --time_based --direct=1 \
        --group_reporting "${pin[@]}" --output-format=json+ --output="$WORK/bare-$k.json" >/dev/null &
  done
  wait
  rm -rf "$VOL"/bare-*
  python3 -c 'import json,sys; print(sum(j["read"]["iops"]+j["write"]["iops"] for f in sys.argv[1:] for j in json.load(open(f))["jobs"]))' "$WORK"/bare-*.json
}

# isobench gives each job size/numjobs; so must the bare side.
per_job_size() { python3 -c 'import sys; u={"K":1<<10,"M":1<<20,"G":1<<30}; s=sys.argv[1]; print(int(s[:-1])*u[s[-1]]//int(sys.argv[2]))' "$SIZE" "$NUMJOBS"; }

run_isobench() {
  local out="$WORK/out"
  rm -rf "$out"
  ISOBENCH_WORKDIR="$WORK/state" "$BIN" run "$WORK/$1.toml" --out "$out" >/dev/null 2>&1
  awk -F, '$7 == "iops" { print $8 }' "$out/samples.csv"
}

order=("${arms[@]}")
: > "$WORK/results"
for round in $(seq 1 "$PAIRS"); do
  line="round $round:"
  for arm in "${order[@]}"; do
    if [ "$arm" = bare ]; then v=$(run_bare); else v=$(run_isobench "$arm"); fi
    echo "$round $arm $v" >> "$WORK/results"
    line+=$(printf '  %s %.0f' "$arm" "$v")
  done
  echo "$line"
  order=($(printf '%s\n' "${order[@]}" | tac))
done

printf '\nfio %s bs=%s iodepth=%s numjobs=%s, %ss on tmpfs, %s, %d rounds%s\n' "$RW" "$BS" "$IODEPTH" "$NUMJOBS" \
  "$RUNTIME" "$([ -n "$CPU" ] && echo "CPU $CPU" || echo unpinned)" "$PAIRS" "${DENSITY:+, density $DENSITY}"
python3 - "$WORK/results" <<'PY'
import collections, math, statistics, sys
# Two-sided 95 % Student t quantiles by degrees of freedom (normal beyond 30).
T95 = {1: 12.71, 2: 4.30, 3: 3.18, 4: 2.78, 5: 2.57, 6: 2.45, 7: 2.36, 8: 2.31, 9: 2.26, 10: 2.23,
       12: 2.18, 15: 2.13, 20: 2.09, 25: 2.06, 30: 2.04}
def t95(df):
    return T95[max(k for k in T95 if k <= df)] if df <= 30 else 1.96 + 2.4 / df
rounds = collections.defaultdict(dict)
for line in open(sys.argv[1]):
    r, arm, v = line.split()
    rounds[r][arm] = float(v)
bare = [x["bare"] for x in rounds.values()]
print(f"median IOPS: bare {statistics.median(bare):.0f}")
status = 0
for arm in [a for a in ("isobench", "no-collect", "no-series", "clat-log") if a in next(iter(rounds.values()))]:
    logs = [math.log(x[arm] / x["bare"]) for x in rounds.values()]
    n, mean = len(logs), statistics.mean(logs)
    half = t95(n - 1) * statistics.stdev(logs) / math.sqrt(n) if n > 1 else float("inf")
    ratio, lo, hi = math.exp(mean), math.exp(mean - half), math.exp(mean + half)
    median = statistics.median(x[arm] for x in rounds.values())
    print(f"{arm:>10}/bare: {ratio:.3f} [{lo:.3f}, {hi:.3f}]  (median IOPS {median:.0f}, "
          f"CI ±{(hi - lo) / 2 * 100:.1f} %)")
    if arm == "isobench" and not (ratio >= 0.98 and lo >= 0.97):
        status = 1
print("goal: isobench/bare >= 0.98 with the CI's lower end >= 0.97:", "met" if status == 0 else "NOT met")
sys.exit(status)
PY
