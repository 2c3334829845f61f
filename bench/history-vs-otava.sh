#!/usr/bin/env bash
# isobench's history and Apache Otava on the same generated series, side by side: recall (the
# planted changes each found within one result set of where they are) and precision (of the
# changes each found, those within three result sets of a planted one), by shape and noise level.
#
# The series are made here, as otava-test-data's generators make theirs: a step, a step near the
# start, a regression then its fix, three steps in a row (each of STEP noise σ, with 6 points or
# more a side), noise alone, and noise with one outlier (+50 %); 40 result sets each, log-normal
# noise of σ = 2, 4 and 8 %, SEEDS seeds. Otava 0.8.0 (from PyPI, in a virtual environment made
# here) runs `compute_change_points` with its defaults on the values; isobench gets the same
# series as result sets of a history (imported from an export's JSON lines, each point with
# the CI its runs would give it) and `isobench history analyze` with its defaults.
#
#   bench/history-vs-otava.sh                 20 seeds, steps of 2.5 σ (seconds, after the venv)
#   SEEDS=50 STEP=1.5 bench/history-vs-otava.sh
set -euo pipefail
cd "$(dirname "$0")/.."
SEEDS=${SEEDS:-20} STEP=${STEP:-2.5}
BIN=${ISOBENCH:-target/release/isobench}
[ -x "$BIN" ] || cargo build --release -q
VENV=${XDG_CACHE_HOME:-$HOME/.cache}/isobench/otava-venv
if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c 'import otava' 2>/dev/null; then
  echo "making a virtual environment with Apache Otava 0.8.0 in $VENV" >&2
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q apache-otava==0.8.0
fi
WORK=$(mktemp -d /var/tmp/isobench-otava.XXXXXX)
trap 'rm -rf "$WORK"' EXIT

# The series, and each tool's change points, as JSON.
"$VENV/bin/python" - "$WORK" "$SEEDS" "$STEP" <<'EOF'
import json, math, random, sys
from otava.analysis import compute_change_points

work, seeds, step = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
N = 40

def shapes(s):
    return {
        "a step": (lambda i: s if i >= 20 else 0.0, [20]),
        "a step near the start": (lambda i: -s if i >= 6 else 0.0, [6]),
        "a regression, then its fix": (lambda i: s if 16 <= i < 24 else 0.0, [16, 24]),
        "three steps in a row": (lambda i: s * sum(i >= a for a in (10, 20, 30)), [10, 20, 30]),
        "noise alone": (lambda i: 0.0, []),
        "one outlier": (lambda i: 0.0, []),
    }

series, export = [], []
for sigma in (0.02, 0.04, 0.08):
    for name, (level, planted) in shapes(step * sigma).items():
        for seed in range(seeds):
            rng = random.Random(f"{name}/{sigma}/{seed}")
            logs = [level(i) + sigma * rng.gauss(0, 1) for i in range(N)]
            if name == "one outlier":
                logs[rng.randrange(N)] += math.log(1.5)
            values = [100 * math.exp(x) for x in logs]
            key = f"s{len(series)}"
            found = sorted(int(c.index) for c in compute_change_points(values)[0])
            series.append({"key": key, "shape": name, "sigma": sigma, "planted": planted, "otava": found})
            # Each point as a result set would record it: three runs about its value, a CI
            # whose half-width is what three runs of σ/2 give (runs vary less than sets do).
            half = 4.303 * (sigma / 2) / math.sqrt(3)
            for i, v in enumerate(values):
                point = {
                    "cell": "host.v.w", "metric": key, "unit": "op/s", "headline": True,
                    "labels": {"env": "host", "volume": "v", "workload": "w"},
                    "values": [v, v, v], "median": v, "ci": [v * math.exp(-half), v * math.exp(half)],
                    "overhead": None, "overhead_ci": None, "baseline": "", "facts": {},
                }
                export.append({"result_set": {
                    "id": f"{key}-{i:03d}", "suite": key, "path": f"/generated/{key}/{i}",
                    "time": f"2026-01-01T00:{i // 60:02d}:{i % 60:02d}Z", "facts": {},
                    "runs": [], "points": [point],
                }})
json.dump(series, open(f"{work}/series.json", "w"))
with open(f"{work}/export.jsonl", "w") as f:
    for line in export:
        f.write(json.dumps(line) + "\n")
EOF

export ISOBENCH_HISTORY=$WORK/history.sqlite
"$BIN" history import "$WORK/export.jsonl" >/dev/null
"$BIN" history analyze --json >"$WORK/isobench.json"

python3 - "$WORK" "$STEP" <<'EOF'
import json, sys
work, step = sys.argv[1], sys.argv[2]
series = json.load(open(f"{work}/series.json"))
found = {}
for cp in json.load(open(f"{work}/isobench.json"))["change_points"]:
    if cp["series"] == "value":
        found.setdefault(cp["metric"], []).append(cp["index"])

rows = {}
for s in series:
    for tool, cps in (("isobench", sorted(found.get(s["key"], []))), ("otava", s["otava"])):
        r = rows.setdefault((s["shape"], s["sigma"], tool), [0, 0, 0, 0])
        r[0] += sum(any(abs(f - p) <= 1 for f in cps) for p in s["planted"])
        r[1] += len(s["planted"])
        r[2] += sum(not any(abs(f - p) <= 3 for p in s["planted"]) for f in cps)
        r[3] += len(cps)

def text(hit, planted, false, found):
    recall = f"{hit / planted:.2f} ({hit}/{planted})" if planted else "—"
    precision = f"{1 - false / found:.2f}" if found else "—"
    return f"{recall} · {precision} · {false} false"

print(f"\nchanges of {step} σ; recall (found/planted) · precision · false changes")
print("\n| series | σ | isobench | Otava 0.8.0 |\n|---|---|---|---|")
shapes = list(dict.fromkeys(s["shape"] for s in series))
for shape in shapes:
    for sigma in (0.02, 0.04, 0.08):
        i, o = rows[(shape, sigma, "isobench")], rows[(shape, sigma, "otava")]
        print(f"| {shape} | {sigma * 100:.0f} % | {text(*i)} | {text(*o)} |")
for tool in ("isobench", "otava"):
    t = [sum(r[k] for (sh, sg, tl), r in rows.items() if tl == tool) for k in range(4)]
    print(f"all, {tool}: {text(*t)}")
EOF
