#!/usr/bin/env bash
# What does sampling the CPU by part cost the run it explains? A suite with `attribute` on (perf
# record on every CPU at 250 Hz, call chains) and off, in PAIRS rounds whose arm order alternates
# (on-off, off-on, …) so that drift hits both alike. Per environment it prints the geometric mean
# of the on/off ratios of each figure, with its paired 95 % CI (Student t on the log ratios).
# WHAT=cassandra: the demo's Cassandra read (host, runc, runsc; split CPUs): op rate and CPU per
# operation. WHAT=cpu: sysbench's CPU loop for 5 s on the host and in runsc, a figure steady
# enough to see a percent in a few rounds: events per second.
#
#   bench/attribution-cost.sh                      cpu, 8 rounds (~4 min)
#   WHAT=cassandra PAIRS=4 bench/attribution-cost.sh   (~9 min)
set -euo pipefail
cd "$(dirname "$0")/.."
WHAT=${WHAT:-cpu} PAIRS=${PAIRS:-8}
BIN=${ISOBENCH:-target/release/isobench}
[ -x "$BIN" ] || cargo build --release -q
WORK=$(mktemp -d /var/tmp/isobench-bench.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
case $WHAT in
  # The demo's suite, its Cassandra cells only, one run each.
  cassandra)
    sed -e 's/^repeat = 3/repeat = 1/' -e '/^precision = /d' -e '/^budget = /d' \
      -e 's/^cells = \[.*\]/cells = ["workload=cassandra"]/' examples/demo.toml | sed '/^\[\[bound\]\]/,$d' \
      >"$WORK/suite.toml"
    metrics="op_rate sys.cpu_per_op" ;;
  cpu)
    printf '%s\n' 'name = "cost"' 'repeat = 1' 'baseline = { env = "host" }' \
      '[[env]]' 'name = "host"' 'kind = "host"' '[[env]]' 'name = "runsc"' 'kind = "oci"' 'runtime = "runsc"' \
      '[[volume]]' 'name = "tmp"' 'kind = "tmpfs"' 'size = "64M"' \
      '[[workload]]' 'name = "loop"' 'kind = "cpu"' 'time = "5s"' >"$WORK/suite.toml"
    metrics="events_per_s" ;;
  *) echo "WHAT=$WHAT: cassandra or cpu" >&2; exit 2 ;;
esac
for round in $(seq 1 "$PAIRS"); do
  arms=(true false)
  [ $((round % 2)) -eq 0 ] && arms=(false true)
  for arm in "${arms[@]}"; do
    "$BIN" run "$WORK/suite.toml" --set "attribute=$arm" --no-history --out "$WORK/r$round-$arm" >/dev/null 2>&1 \
      || { echo "round $round (attribute = $arm) failed: see $WORK/r$round-$arm" >&2; trap - EXIT; exit 1; }
  done
done
python3 - "$WORK" "$PAIRS" $metrics <<'PY'
import glob, json, math, statistics, sys
work, pairs, metrics = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
T975 = {1: 12.71, 2: 4.30, 3: 3.18, 4: 2.78, 5: 2.57, 6: 2.45, 7: 2.36, 8: 2.31, 9: 2.26, 10: 2.23}
def value(path, metric):
    run = json.load(open(path))
    return next(s["value"] for s in run["samples"] if s["metric"] == metric)
envs = sorted({p.split("/")[-2].split(".")[0] for p in glob.glob(f"{work}/r1-true/runs/*/1.json")})
print(f"sampling on against off, {pairs} rounds (geometric mean of the ratios [95% CI]):")
for env in envs:
    line = [env]
    for metric in metrics:
        logs = []
        for r in range(1, pairs + 1):
            on, off = (glob.glob(f"{work}/r{r}-{a}/runs/{env}.*/1.json")[0] for a in ("true", "false"))
            logs.append(math.log(value(on, metric) / value(off, metric)))
        mean = statistics.mean(logs)
        half = T975.get(pairs - 1, 2.0) * statistics.stdev(logs) / math.sqrt(pairs) if pairs > 1 else float("nan")
        line.append(f"{metric} ×{math.exp(mean):.3f} [{math.exp(mean - half):.3f}, {math.exp(mean + half):.3f}]")
    print("  " + "   ".join(line))
PY
