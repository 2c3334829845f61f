#!/usr/bin/env bash
# What halted CPUs do to a storage comparison: the demo's fio cells (host, runc, gVisor; 4k
# fsynced random writes in 1-s slices, its ±5 % goal within 3 minutes) as the machine idles
# (`cpu_idle = "as-is"`) beside the same with every CPU kept polling (`cpu_idle = "poll"`), SETS
# result sets of each in the order ABAB… so that drift hits both alike. Prints per result set each
# comparison's difference and 95 % CI, the rounds it took, and each environment's IOPS and mean
# flush (fsync) time.
#
#   bench/cpu-idle.sh            SETS=2 (~10 min)
set -euo pipefail
cd "$(dirname "$0")/.."
SETS=${SETS:-2}
BIN=${ISOBENCH:-target/release/isobench}
[ -x "$BIN" ] || cargo build --release -q
WORK=$(mktemp -d /var/tmp/isobench-bench.XXXXXX)
trap 'rm -rf "$WORK"' EXIT

for i in $(seq 1 "$SETS"); do
  for idle in as-is poll; do
    out=$WORK/$idle-$i
    "$BIN" run examples/demo.toml --filter workload=fio-random --set cpu_idle=$idle --no-history --out "$out" \
      >"$out.log" 2>&1 || status=$?
    case ${status:-0} in
      0 | 3) ;;
      *) echo "$idle #$i failed:"; tail -5 "$out.log"; exit 1 ;;
    esac
    unset status
    "$BIN" report "$out" --format json >/dev/null
    python3 - "$out" "$idle #$i" <<'EOF'
import glob, json, os, statistics, sys
out, name = sys.argv[1:3]
report = json.load(open(os.path.join(out, "report.json")))
said = []
for cell in report["cells"]:
    metric = next((m for m in cell["metrics"] if m["metric"] == "iops"), None)
    d = metric and metric.get("vs_baseline")
    runs = sorted(glob.glob(os.path.join(out, "runs", cell["cell"], "*.json")))
    figures = lambda key: [s["value"] for r in runs for s in json.load(open(r))["samples"] if s["metric"] == key]
    iops, sync = statistics.median(figures("iops")), statistics.median(figures("sync_lat_mean"))
    line = f"{cell['cell'].split('.')[0]:6} {iops:6.0f} op/s, fsync {sync:4.0f} µs, {len(runs)} runs"
    if d:
        line += f", vs host {d['pct']:+5.1f}% [{d['ci'][0]:+.1f}, {d['ci'][1]:+.1f}] (±{(d['ci'][1] - d['ci'][0]) / 2:.1f})"
    said.append(line)
print(f"{name}:\n  " + "\n  ".join(said))
EOF
  done
done
