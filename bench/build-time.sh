#!/usr/bin/env bash
# What the first answer waits for: a fresh release build of isobench under each release profile
# in PROFILES (cold target directories, the crates already downloaded), timed one after another,
# each with the units that took longest (cargo --timings), and then the load generator's CPU per
# operation of each build against the first's (bench/cql-vs-latte.sh with ISOBENCH_B), so that a
# quicker build is taken only if the client does not pay for it.
#
#   bench/build-time.sh
#   PROFILES="fat:fat:1 thin:thin:16" ROWS=200000 RUNS=3 bench/build-time.sh
#
# A profile is NAME:LTO:CODEGEN_UNITS[:OPT_LEVEL] (cargo's [profile.release] lto, codegen-units
# and opt-level, 3 unless given, set through CARGO_PROFILE_RELEASE_*). Defaults: fat LTO with one codegen unit, thin LTO with 16,
# and no LTO with 16; 200k rows and 3 runs a side for the CPU per operation. CPU=0 skips the
# CPU comparison. Each build's cargo-timing.html is kept in RESULTS (default
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
  IFS=: read -r name lto units opt <<<"$profile"
  opt=${opt:-3}
  started=$SECONDS
  CARGO_TARGET_DIR="$work/$name" CARGO_PROFILE_RELEASE_LTO=$lto CARGO_PROFILE_RELEASE_CODEGEN_UNITS=$units \
    CARGO_PROFILE_RELEASE_OPT_LEVEL=$opt cargo build --release --locked --quiet --timings
  seconds=$((SECONDS - started))
  summary+=("$(printf '%-6s lto=%-5s codegen-units=%-3s opt-level=%s %4d s' "$name" "$lto" "$units" "$opt" "$seconds")")
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
    ROWS=${ROWS:-200000} RUNS=${RUNS:-3} PROFILE_OPS=0 bench/cql-vs-latte.sh | grep median
done
