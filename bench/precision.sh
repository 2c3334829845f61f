#!/usr/bin/env bash
# The demo before and after this method, side by side on this machine, each with an A/A twin of
# the host (--aa), SETS result sets of each in the order ABAB… so that drift hits both alike:
#   before  the demo as it was: 3 rounds, fio 2 s (random and sequential), a 2-s Cassandra read
#   after   examples/demo.toml: 3 rounds, then rounds for the comparisons wider than ±5 points,
#           within 3 minutes of runs
# Every result set is judged by both methods on its own runs: the old (a percentile bootstrap of
# the ratio of medians, each side resampled alone, reimplemented here from samples.csv) and the
# new (isobench's: t on the rounds' paired log-ratios, from report.json). Prints per comparison
# the median CI half-width (points) of each method, rounds and minutes per result set, and, over
# every A/A comparison (the twin's headline metrics), how many each method called a difference.
#
#   bench/precision.sh            2 sets of each (~20 min)
#   SETS=3 bench/precision.sh
set -euo pipefail
cd "$(dirname "$0")/.."
SETS=${SETS:-2}
BIN=${ISOBENCH:-target/release/isobench}
[ -x "$BIN" ] || cargo build --release -q
"$BIN" server fetch cassandra >/dev/null
WORK=$(mktemp -d /var/tmp/isobench-bench.XXXXXX)
trap 'rm -rf "$WORK"' EXIT

# The demo as it was before blocks and precision (its suite at that time, less its comments).
cat >"$WORK/before.toml" <<'EOF'
name = "demo-before"
repeat = 3
baseline = { env = "host", volume = "ext4" }
split_cpus = true
cells = ["workload=fio-*", "workload=cassandra,env=host", "workload=cassandra,env=runsc"]

[[env]]
name = "host"
kind = "host"

[[env]]
name = "runc"
kind = "oci"
runtime = "runc"

[[env]]
name = "runsc"
kind = "oci"
runtime = "runsc"

[[volume]]
name = "ext4"
kind = "loop"
fs = "ext4"
size = "2G"

[[workload]]
name = "fio-random"
kind = "fio"
rw = "randwrite"
bs = "4k"
size = "256M"
runtime = "2s"
fsync = 1

[[workload]]
name = "fio-seq"
kind = "fio"
rw = "write"
bs = "1M"
size = "256M"
runtime = "2s"
fsync = 1

[[server]]
kind = "cassandra"
heap = "1G"

[[workload]]
name = "cassandra"
kind = "cql"
load = "write n=2500 no-warmup -rate threads=16"
args = "read duration=2s no-warmup -rate threads=16 -pop dist=uniform(1..2500)"
headline = ["op_rate", "latency_mean", "latency_p99", "server_startup"]
EOF

for i in $(seq 1 "$SETS"); do
  for which in before after; do
    suite=$WORK/before.toml && [ "$which" = after ] && suite=examples/demo.toml
    out=$WORK/$which-$i
    start=$SECONDS
    "$BIN" run "$suite" --aa --no-history --out "$out" >"$out.log" 2>&1 || status=$?
    case ${status:-0} in
      0 | 3) echo "ran $which-$i in $((SECONDS - start)) s" ;;
      *) echo "set $which-$i failed:"; tail -5 "$out.log"; exit 1 ;;
    esac
    unset status
    echo $((SECONDS - start)) >"$out.seconds"
    "$BIN" report "$out" --format json >/dev/null
  done
done

python3 - "$WORK" "$SETS" <<'EOF'
import csv, json, pathlib, random, statistics, sys
work, sets = pathlib.Path(sys.argv[1]), int(sys.argv[2])

def old_ci(cell, base, rng):
    """The percentile bootstrap isobench used before: each side resampled alone, 2000 times."""
    diffs = []
    for _ in range(2000):
        c = statistics.median(rng.choice(cell) for _ in cell)
        b = statistics.median(rng.choice(base) for _ in base)
        diffs.append((c / b - 1) * 100)
    diffs.sort()
    q = lambda p: diffs[int(p * (len(diffs) - 1))]
    return q(0.025), q(0.975)

rows = {}  # (which, comparison) -> {"old": [...], "new": [...], "rounds": [...]}
aa = {("before", "old"): [0, 0], ("before", "new"): [0, 0], ("after", "old"): [0, 0], ("after", "new"): [0, 0]}
minutes = {"before": [], "after": []}
for i in range(1, sets + 1):
    for which in ("before", "after"):
        out = work / f"{which}-{i}"
        minutes[which].append(int((work / f"{which}-{i}.seconds").read_text()) / 60)
        values = {}
        for r in csv.DictReader(open(out / "samples.csv")):
            values.setdefault((r["cell"], r["metric"]), []).append(float(r["value"]))
        report = json.loads((out / "report.json").read_text())
        rng = random.Random(i)
        for c in report["cells"]:
            if c["baseline"] or not c["compared_with"]:
                continue
            twin = c["twin"]
            for m in c["metrics"]:
                d = m.get("vs_baseline")
                if not d or m["metric"] not in c["headline"] or d["ci"] is None:
                    continue
                cell_v, base_v = values.get((c["cell"], m["metric"])), values.get((c["compared_with"], m["metric"]))
                if not cell_v or not base_v or min(base_v) <= 0:
                    continue
                lo, hi = old_ci(cell_v, base_v, rng)
                if twin:
                    aa[(which, "old")][0] += 1
                    aa[(which, "old")][1] += int(lo > 0 or hi < 0)
                    aa[(which, "new")][0] += 1
                    aa[(which, "new")][1] += int(d["verdict"] in ("faster", "slower"))
                if m["metric"] != c["headline"][0] or twin:
                    continue
                key = (which, f'{c["labels"]["env"]} {c["labels"]["workload"]}')
                row = rows.setdefault(key, {"old": [], "new": [], "rounds": []})
                row["old"].append((hi - lo) / 2)
                row["new"].append((d["ci"][1] - d["ci"][0]) / 2)
                row["rounds"].append(d["n"])

med = lambda v: statistics.median(v) if v else float("nan")
print("\n| suite | comparison | old method: CI half-width | new method: CI half-width | rounds |")
print("|---|---|---|---|---|")
for (which, name), r in sorted(rows.items()):
    print(f"| {which} | {name} | ±{med(r['old']):.1f} points | ±{med(r['new']):.1f} points | {med(r['rounds']):.0f} |")
print("\n| suite | minutes per result set (median) | A/A comparisons | called a difference: old method | new method |")
print("|---|---|---|---|---|")
for which in ("before", "after"):
    n, old = aa[(which, "old")]
    _, new = aa[(which, "new")]
    print(f"| {which} | {med(minutes[which]):.1f} | {n} | {old} ({old / max(n, 1) * 100:.0f} %) | {new} ({new / max(n, 1) * 100:.0f} %) |")
EOF
