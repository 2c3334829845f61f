#!/usr/bin/env bash
# What the first answer waits for: a fresh release build of isobench under each release profile
# in PROFILES (cold target directories, the crates already downloaded), timed one after another,
# each with the units that took longest (cargo --timings), and then the load generator's CPU per
# operation of each build against the first's (bench/cql-vs-latte.sh with ISOBENCH_B: CPU-seconds,
# and callgrind's instructions per write and per read, which do not wander with the machine), and
# the syscall probes' nanoseconds per call (their loops are isobench's own code, built at its
# package's opt-level), so that a quicker build is taken only if neither pays for it.
#
#   bench/build-time.sh
#   PROFILES="fat:fat:1 thin:thin:16" ROWS=200000 RUNS=3 bench/build-time.sh
#   PROFILES="fat:fat:1 main1:fat:1:3:isobench.opt-level=1" bench/build-time.sh
#
# A profile is NAME:LTO:CODEGEN_UNITS[:OPT_LEVEL[:PACKAGE.KEY=VALUE,...]] (cargo's
# [profile.release] lto, codegen-units and opt-level, 3 unless given, set through
# CARGO_PROFILE_RELEASE_*; then settings of one package's, as [profile.release.package.PACKAGE]
# holds them). Defaults: fat LTO with one codegen unit, thin LTO with 16,
# and no LTO with 16; 200k rows and 3 runs a side for the CPU per operation, PROFILE_OPS=10000
# for the instruction counts, PROBES=7 runs a side of the probes. CPU=0 skips the comparisons. Each build's cargo-timing.html is kept in RESULTS (default
# /var/tmp/isobench-build-time-DATE). Needs a set-up machine (scripts/setup.sh demo); about 40
# minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"
PROFILES=${PROFILES:-"fat:fat:1 thin:thin:16 off:false:16"}
work=$(mktemp -d /var/tmp/isobench-build-time.XXXXXX)
results=${RESULTS:-/var/tmp/isobench-build-time-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$results"
trap 'rm -rf "$work"' EXIT
trap 'exit 130' INT TERM

cargo fetch --locked --quiet
summary=()
for profile in $PROFILES; do
  IFS=: read -r name lto units opt packages <<<"$profile"
  opt=${opt:-3}
  per_package=()
  for package in ${packages//,/ }; do
    per_package+=(--config "profile.release.package.$package")
  done
  started=$SECONDS
  CARGO_TARGET_DIR="$work/$name" CARGO_PROFILE_RELEASE_LTO=$lto CARGO_PROFILE_RELEASE_CODEGEN_UNITS=$units \
    CARGO_PROFILE_RELEASE_OPT_LEVEL=$opt cargo build "${per_package[@]}" --release --locked --quiet --timings
  seconds=$((SECONDS - started))
  summary+=("$(printf '%-6s lto=%-5s codegen-units=%-3s opt-level=%s%s %4d s' "$name" "$lto" "$units" "$opt" \
    "${packages:+ ($packages)}" "$seconds")")
  echo "== $name: $seconds s; the units that took longest:"
  # cargo-timing.html carries the units as `const UNIT_DATA = [...]`.
  cp "$work/$name/cargo-timings/cargo-timing.html" "$results/$name.html"
  python3 - "$results/$name.html" <<'EOF'
import json, re, sys
html = open(sys.argv[1]).read()
units = json.loads(re.search(r"const UNIT_DATA = (\[.*?\]);", html, re.S).group(1))
for unit in sorted(units, key=lambda u: -u["duration"])[:8]:
    target = unit["target"].strip() or "lib"
    print(f"   {unit['duration']:6.1f} s  {unit['name']} {unit['version']} {target}")
EOF
done

echo
echo "fresh release builds (2 cores here):"
printf '  %s\n' "${summary[@]}"
echo "timings: $results"

[ "${CPU:-1}" != 0 ] || exit 0
first=${PROFILES%% *}
first=${first%%:*}
for profile in ${PROFILES#* }; do
  name=${profile%%:*}
  echo
  echo "== the load generator's CPU per operation: $first (isobench) against $name (B)"
  ISOBENCH="$work/$first/release/isobench" ISOBENCH_B="$work/$name/release/isobench" \
    ROWS=${ROWS:-200000} RUNS=${RUNS:-3} PROFILE_OPS=${PROFILE_OPS:-10000} bench/cql-vs-latte.sh |
    grep -E 'median|instructions per'
  echo "== the syscall probes, ns per call (medians of ${PROBES:-7} runs a side, alternating): $first against $name"
  printf '%s\n' 'name = "probes"' 'repeat = 1' 'baseline = { env = "host", volume = "mem" }' '[[env]]' 'name = "host"' 'kind = "host"' '[[volume]]' \
    'name = "mem"' 'kind = "tmpfs"' 'size = "16M"' '[[workload]]' 'name = "probes"' 'kind = "syscall"' \
    'probes = ["getpid", "clock_gettime"]' 'time = "1s"' >"$work/probes.toml"
  : >"$work/probes.tsv"
  for run in $(seq "${PROBES:-7}"); do
    for build in "$first" "$name"; do
      out="$work/probes-$build-$run"
      "$work/$build/release/isobench" run "$work/probes.toml" --out "$out" --workdir "$work/state" \
        >"$work/probes.log" 2>&1 || { cat "$work/probes.log" >&2; exit 1; }
      python3 -c '
import glob, json, sys
run = json.load(open(glob.glob(sys.argv[1] + "/runs/*/1.json")[0]))
for s in run["samples"]:
    if s["metric"] in ("syscall_ns", "clock_gettime_ns"):
        print(sys.argv[2], s["metric"], s["value"], sep="\t")
' "$out" "$build" >>"$work/probes.tsv"
    done
  done
  python3 -c '
import statistics, sys
rows = [l.split("\t") for l in open(sys.argv[1]).read().splitlines()]
for metric in ("syscall_ns", "clock_gettime_ns"):
    a, b = ([float(v) for build, m, v in rows if m == metric and build == side] for side in sys.argv[2:4])
    ma, mb = statistics.median(a), statistics.median(b)
    print(f"  {metric:18} {sys.argv[2]} {ma:7.1f}  {sys.argv[3]} {mb:7.1f}  ratio {mb / ma:.3f}")
' "$work/probes.tsv" "$first" "$name"
done
