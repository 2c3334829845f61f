#!/usr/bin/env bash
# gVisor's system call cost with the sandbox free to use every CPU and pinned to one
# (`cpuset = "0"`, the host baseline pinned alike), SETS result sets of each in the order ABAB…
# so that drift hits both alike; each set runs getpid REPEAT times a cell in shuffled rounds.
# Prints per set: runsc's getpid (median of its runs, their range and CV) and its verdict
# against the host; then the medians over the sets. PLATFORM picks runsc's platform.
#
#   bench/systrap-pinning.sh                    3 sets of each, repeat 9 (~3 min)
#   SETS=5 PLATFORM=ptrace bench/systrap-pinning.sh
set -euo pipefail
cd "$(dirname "$0")/.."
SETS=${SETS:-3} REPEAT=${REPEAT:-9} PLATFORM=${PLATFORM:-systrap}
BIN=${ISOBENCH:-target/release/isobench}
[ -x "$BIN" ] || cargo build --release -q
WORK=$(mktemp -d /var/tmp/isobench-bench.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
cat >"$WORK/suite.toml" <<EOF
name = "systrap-pinning"
repeat = $REPEAT
baseline = { env = "host" }

[[env]]
name = "host"
kind = "host"

[[env]]
name = "runsc"
kind = "oci"
runtime = "runsc"
platform = "$PLATFORM"

[[volume]]
name = "t"
kind = "tmpfs"
size = "64M"

[[workload]]
name = "getpid"
kind = "syscall"
probes = ["getpid"]
time = "250ms"
EOF

for i in $(seq 1 "$SETS"); do
  for mode in free pinned; do
    pins=()
    [ "$mode" = pinned ] && pins=(--set env.host.cpuset=0 --set env.runsc.cpuset=0)
    out="$WORK/$mode-$i"
    if ! "$BIN" run "$WORK/suite.toml" "${pins[@]}" --no-history --out "$out" >"$out.log" 2>&1; then
      echo "set $mode-$i failed:"; tail -5 "$out.log"; exit 1
    fi
    echo "ran $mode-$i"
  done
done

python3 - "$WORK" "$SETS" <<'EOF'
import csv, pathlib, re, statistics, sys
work, sets = pathlib.Path(sys.argv[1]), int(sys.argv[2])

def values(set_dir):
    rows = csv.DictReader(open(set_dir / "samples.csv"))
    return [float(r["value"]) for r in rows if r["env"] == "runsc" and r["metric"] == "syscall_ns"]

def verdict(log):
    line = next(l for l in reversed(log.read_text().splitlines()) if l.strip().startswith("runsc/"))
    m = re.search(r"syscall ns (~?[-+][\d.]+%)", line)
    return m.group(1) if m else "?"

print("\n| set | runsc getpid median | range | CV across runs | against the host |")
print("|---|---|---|---|---|")
summary = {}
for mode in ("free", "pinned"):
    for i in range(1, sets + 1):
        v = values(work / f"{mode}-{i}")
        cv = statistics.stdev(v) / statistics.mean(v) * 100
        summary.setdefault(mode, []).append((statistics.median(v), cv))
        print(f"| {mode}-{i} | {statistics.median(v) / 1000:.1f} µs | {min(v) / 1000:.1f}–{max(v) / 1000:.1f} µs "
              f"| {cv:.0f} % | {verdict(work / f'{mode}-{i}.log')} |")
print()
for mode, rows in summary.items():
    medians = [m for m, _ in rows]
    print(f"{mode}: median of the sets' medians {statistics.median(medians) / 1000:.1f} µs "
          f"(sets {min(medians) / 1000:.1f}–{max(medians) / 1000:.1f} µs), median CV across runs "
          f"{statistics.median(c for _, c in rows):.0f} %")
EOF
