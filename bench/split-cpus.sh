#!/usr/bin/env bash
# A suite's Cassandra cells on the host and under gVisor (the demo's by default) with the
# database and the load generator on the same CPUs (shared) and on CPUs of their own
# (split_cpus = true), SETS result sets of each, in the order ABAB… so that drift hits both
# alike. Each set runs every cell REPEAT times in shuffled rounds; SET adds --set overrides.
# Prints, per set and as medians over the sets: each cell's METRIC (median of its runs), its CV
# across runs, and gVisor's verdict against the host with its 95 % CI; then how far apart the
# sets' verdicts were (each verdict's median inside the other sets' CIs?).
#
#   bench/split-cpus.sh                 the demo, 3 sets of each, repeat 3 (~16 min)
#   SETS=5 REPEAT=5 bench/split-cpus.sh
#   SUITE=examples/capacity.toml METRIC=capacity SETS=1 REPEAT=2 \
#     SET="workload.cassandra.capacity.budget=2m workload.cassandra.capacity.resolution=50%" bench/split-cpus.sh
set -euo pipefail
cd "$(dirname "$0")/.."
SETS=${SETS:-3} REPEAT=${REPEAT:-3} SUITE=${SUITE:-examples/demo.toml} METRIC=${METRIC:-op_rate}
overrides=()
for o in ${SET:-}; do overrides+=(--set "$o"); done
BIN=${ISOBENCH:-target/release/isobench}
[ -x "$BIN" ] || cargo build --release -q
"$BIN" server fetch cassandra >/dev/null
WORK=$(mktemp -d /var/tmp/isobench-bench.XXXXXX)
trap 'rm -rf "$WORK"' EXIT

for i in $(seq 1 "$SETS"); do
  for mode in shared split; do
    split=false && [ "$mode" = split ] && split=true
    out="$WORK/$mode-$i"
    "$BIN" run "$SUITE" --filter workload=cassandra,env=host --filter workload=cassandra,env=runsc \
      --set "repeat=$REPEAT" --set "split_cpus=$split" "${overrides[@]}" \
      --out "$out" >"$out.log" 2>&1 || status=$?
    # 3: the set completed, some runs failed (a search that found no rate within the bound).
    case ${status:-0} in
      0) echo "ran $mode-$i" ;;
      3) echo "ran $mode-$i; runs that failed:"; sed -n '/of the runs failed/,$p' "$out.log" | tail -n +2 ;;
      *) echo "set $mode-$i failed:"; tail -5 "$out.log"; exit 1 ;;
    esac
    unset status
  done
done

python3 - "$WORK" "$SETS" "$METRIC" <<'EOF'
import json, pathlib, re, statistics, sys
work, sets, metric = pathlib.Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3]

def op_rates(set_dir, cell):
    runs = [json.loads(p.read_text()) for p in (set_dir / "runs" / cell).glob("*.json")]
    return [s["value"] for r in runs if r["status"] == "ok" for s in r["samples"] if s["metric"] == metric]

def verdict(log):
    line = next(l for l in reversed(log.read_text().splitlines()) if l.strip().startswith("runsc/"))
    m = re.search(r"cassandra [^\[]*?(~?[-+][\d.]+%\??) \[([-+][\d.]+)%, ([-+][\d.]+)%\]", line)
    return (m.group(1), float(m.group(2)), float(m.group(3))) if m else (None, None, None)

cv = lambda v: statistics.stdev(v) / statistics.mean(v) * 100 if len(v) > 1 else float("nan")
median = lambda v: statistics.median(v) if v else float("nan")
print(f"\n| set | host {metric} (CV) | gVisor {metric} (CV) | gVisor against the host [95% CI] |")
print("|---|---|---|---|")
summary = {}
for mode in ("shared", "split"):
    rows = []
    for i in range(1, sets + 1):
        d = work / f"{mode}-{i}"
        host, runsc = op_rates(d, "host.ext4.cassandra"), op_rates(d, "runsc.ext4.cassandra")
        v, lo, hi = verdict(work / f"{mode}-{i}.log")
        rows.append((median(host), cv(host), median(runsc), cv(runsc), v, lo, hi))
        said = f"{v} [{lo:+.0f}%, {hi:+.0f}%]" if v else "none"
        print(f"| {mode} {i} | {rows[-1][0]:.0f} ({rows[-1][1]:.1f} %) | {rows[-1][2]:.0f} ({rows[-1][3]:.1f} %) | {said} |")
    summary[mode] = rows
print(f"\n| | host {metric} | host CV | gVisor {metric} | gVisor CV | gVisor verdicts | spread of the verdicts | each median inside the others' CIs |")
print("|---|---|---|---|---|---|---|---|")
for mode, rows in summary.items():
    rows = [r for r in rows if r[4]]
    if not rows:
        print(f"| {mode} | no verdict in any set |")
        continue
    pcts = [float(r[4].strip("~?%")) for r in rows]
    inside = all(r[5] <= p <= r[6] for j, p in enumerate(pcts) for k, r in enumerate(rows) if j != k)
    print(
        f"| {mode} | {median([r[0] for r in rows]):.0f} | {median([r[1] for r in rows]):.1f} % "
        f"| {median([r[2] for r in rows]):.0f} | {median([r[3] for r in rows]):.1f} % "
        f"| {', '.join(r[4] for r in rows)} | {max(pcts) - min(pcts):.0f} points | {'yes' if inside else 'no'} |"
    )
EOF
