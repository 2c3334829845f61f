#!/usr/bin/env bash
# What the runs in slices buy: each suite as shipped (its fio workloads cut in slices that
# alternate between the block's environments) beside the same suite with every `slice` line
# removed (each run at once, back to back in its block, as before), SETS result sets of each in
# the order ABAB… so that drift hits both alike, each within its own precision and budget:
#   examples/demo.toml         host, runc, gVisor; fio 4k fsynced writes and Cassandra (±5 %, 3 min)
#   examples/io-verdicts.toml  host, its A/A twin, runc, crun; fio 4k direct random reads (±3 %, 8 min)
# Prints per comparison the median CI half-width, rounds and minutes of runs, and the half-width
# times the square root of the minutes (the precision one minute of runs buys: a half-width
# shrinks with the square root of the runs, so the smaller, the more each minute bought), and
# how often the A/A twin's interval left out 0.
#
#   bench/precision.sh                      SETS=2, both suites (~45 min)
#   SETS=3 SUITES=examples/io-verdicts.toml bench/precision.sh
#   KEEP=/var/tmp/precision bench/precision.sh   keeps the result sets there and adds to those a
#                                                  run before left, so that sets taken apart count together
set -euo pipefail
cd "$(dirname "$0")/.."
SETS=${SETS:-2}
SUITES=${SUITES:-examples/demo.toml examples/io-verdicts.toml}
BIN=${ISOBENCH:-target/release/isobench}
[ -x "$BIN" ] || cargo build --release -q
"$BIN" server fetch cassandra >/dev/null
if [ -n "${KEEP:-}" ]; then
  WORK=$KEEP && mkdir -p "$WORK"
else
  WORK=$(mktemp -d /var/tmp/isobench-bench.XXXXXX)
  trap 'rm -rf "$WORK"' EXIT
fi

for suite in $SUITES; do
  name=$(basename "$suite" .toml)
  cp "$suite" "$WORK/$name-slices.toml"
  grep -v '^slice *=' "$suite" >"$WORK/$name-blocks.toml"
  taken=$(find "$WORK" -path "$WORK/$name-slices-*/report.json" | wc -l)
  for i in $(seq $((taken + 1)) $((taken + SETS))); do
    for design in blocks slices; do
      out=$WORK/$name-$design-$i
      rm -rf "$out"
      "$BIN" run "$WORK/$name-$design.toml" --no-history --out "$out" >"$out.log" 2>&1 || status=$?
      case ${status:-0} in
        0 | 3) echo "ran $name $design #$i" ;;
        *) echo "$name $design #$i failed:"; tail -5 "$out.log"; exit 1 ;;
      esac
      unset status
      "$BIN" report "$out" --format json >/dev/null
    done
  done
done

python3 - "$WORK" <<'EOF'
import json, math, pathlib, statistics, sys
work = pathlib.Path(sys.argv[1])
rows, aa = {}, {}
for out in sorted(p for p in work.iterdir() if (p / "report.json").exists()):
    suite, design, _ = out.name.rsplit("-", 2)
    minutes = sum(json.loads(r.read_text())["seconds"] for r in out.glob("runs/*/*.json")) / 60
    report = json.loads((out / "report.json").read_text())
    for c in report["cells"]:
        if c["baseline"] or not c["compared_with"]:
            continue
        m = next((m for m in c["metrics"] if m["metric"] == c["headline"][0]), None)
        d = m and m.get("vs_baseline")
        if not d or d["ci"] is None:
            continue
        half = (d["ci"][1] - d["ci"][0]) / 2
        key = (suite, f'{c["labels"]["env"]} {c["labels"]["workload"]}', design)
        rows.setdefault(key, []).append((half, d["n"], minutes))
        if c["twin"]:
            seen = aa.setdefault((suite, design), [0, 0])
            seen[0] += 1
            seen[1] += int(d["ci"][0] > 0 or d["ci"][1] < 0)
med = lambda v: statistics.median(v) if v else float("nan")
print("\n| suite | comparison | design | CI half-width | rounds | minutes of runs | half-width × √minutes |")
print("|---|---|---|---|---|---|---|")
for (suite, name, design), r in sorted(rows.items()):
    halves, rounds, minutes = zip(*r)
    per = med([h * math.sqrt(m) for h, _, m in r])
    print(f"| {suite} | {name} | {design} | ±{med(halves):.1f} | {med(rounds):.0f} | {med(minutes):.1f} | {per:.1f} |")
if aa:
    print("\n| suite | design | A/A comparisons | CI left out 0 |\n|---|---|---|---|")
    for (suite, design), (n, out) in sorted(aa.items()):
        print(f"| {suite} | {design} | {n} | {out} |")
EOF
