#!/usr/bin/env bash
# Runs every cargo-fuzz target (fuzz/fuzz_targets) for SECONDS each, from its checked-in seeds
# (fuzz/seeds/TARGET, real files) plus what earlier runs found (fuzz/corpus/TARGET, not kept in
# git), and prints executions and crashes per target. `make test` runs it briefly; by hand:
#   scripts/fuzz.sh 600            # ten minutes per target
#   scripts/fuzz.sh 60 hdr_log     # one target
#   scripts/fuzz.sh --quick 3      # make test's: see below
# A crash leaves its input in fuzz/artifacts/TARGET/ and makes the script exit 1; turn the input
# into a regression test next to the parser it broke.
# The long runs use cargo-fuzz and a nightly toolchain (scripts/setup.sh fuzz installs both;
# without them it says what is missing and exits 0). --quick needs neither: it builds the
# targets into target/ci beside make test's build, whose dependencies it reuses uninstrumented
# (fuzz/instrumented-rustc instruments isobench and the targets alone), in about 20 s rather
# than the 2.5 min of the whole tree instrumented.
set -euo pipefail
cd "$(dirname "$0")/../fuzz"
export PATH="$HOME/.cargo/bin:$PATH"

quick=
if [ "${1:-}" = --quick ]; then
  quick=1
  shift
fi
seconds=${1:-20}
shift || true
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  mapfile -t targets < <(sed -n 's/^name = "\(.*\)"$/\1/p' Cargo.toml | grep -v '^isobench-fuzz$')
fi

# skip CAPABILITY WHY: said, and counted by `make test` (scripts/test.sh) like a test's skip.
skip() {
  echo "SKIP fuzz::all: $2 [$1]"
  if [ -n "${ISOBENCH_SKIP_LOG:-}" ]; then printf 'test\tfuzz::all\t%s\t%s\n' "$1" "$2" >>"$ISOBENCH_SKIP_LOG"; fi
  exit 0
}

build_log=$(mktemp)
trap 'rm -f "$build_log"' EXIT
if [ -n "$quick" ]; then
  # The reuse holds only while the dependencies are built alike; a drift would silently build
  # them again: the profile and the lock are errors with their fix, features a warning.
  python3 - <<'PY'
import subprocess, sys, tomllib
# The workspace's own crates: instrumented in the fuzz build, so built with settings of their own.
OURS = ("isobench", "isobench-fuzz", "cql-stress", "figures")
def ci(path):
    profiles = tomllib.load(open(path, "rb"))["profile"]
    settings = {"debug": 0, **profiles.get("release", {}), **profiles["ci"]}
    packages = settings.pop("package", {})
    return settings, {k: v for k, v in packages.items() if k not in OURS}
def pins(path):
    return {(p["name"], p["version"]) for p in tomllib.load(open(path, "rb"))["package"]}
if ci("Cargo.toml") != ci("../Cargo.toml"):
    sys.exit("fuzz/Cargo.toml: its [profile.ci] must build the dependencies as ../Cargo.toml's does"
             f" (its: {ci('Cargo.toml')}; the project's: {ci('../Cargo.toml')}); make them the same")
ours, project = pins("Cargo.lock"), pins("../Cargo.lock")
names = {n for n, _ in project}
drift = sorted(f"{n} {v}" for n, v in ours - project if n in names)
if drift:
    sys.exit(f"fuzz/Cargo.lock pins {', '.join(drift)}, not what ../Cargo.lock pins; sync it: "
             "cp Cargo.lock fuzz/Cargo.lock && cargo metadata --manifest-path fuzz/Cargo.toml --format-version 1 >/dev/null")
# Features as the tests build them (with the dev-dependencies): another set is only slower.
def features(directory, *edges):
    tree = subprocess.run(["cargo", "tree", "-f", "{p} {f}", "--prefix", "none", *edges], cwd=directory,
                          capture_output=True, text=True, check=True).stdout
    return {" ".join(line.split()[:2]): line for line in tree.replace(" (*)", "").splitlines()}
ours, project = features("."), features("..", "-e", "normal,build,dev")
def listed(line):
    return (line.split()[2:3] or ["none"])[0]
other = sorted(f"{p} with {listed(ours[p])} (the tests: {listed(project[p])})"
               for p in ours.keys() & project.keys() if listed(ours[p]) != listed(project[p]))
if other:
    print(f"warning: the fuzz build has {'; '.join(other)}: each is built twice; give fuzz/Cargo.toml"
          " the dependency with the tests' features", file=sys.stderr)
PY
  build=(env RUSTC_WRAPPER="$PWD/instrumented-rustc" cargo build --profile ci --target-dir ../target --bins)
  fuzz_run() { # TARGET CORPUS... -- LIBFUZZER-ARGS..., as cargo fuzz run takes them
    local t=$1 a args=()
    shift
    for a in "$@"; do [ "$a" = -- ] || args+=("$a"); done
    "../target/ci/$t" -artifact_prefix="artifacts/$t/" "${args[@]}"
  }
else
  rustup run nightly rustc --version >/dev/null 2>&1 \
    || skip rust-nightly "no nightly Rust toolchain (scripts/setup.sh fuzz installs one); libFuzzer needs it"
  cargo fuzz --version >/dev/null 2>&1 || skip cargo-fuzz "cargo-fuzz is not installed (scripts/setup.sh fuzz installs it)"
  # Debug assertions on (overflow is a finding), no sanitizer: the code under test is safe Rust,
  # and without ASan the runs get twice the executions.
  flags=(--release --debug-assertions --sanitizer none)
  build=(cargo +nightly fuzz build "${flags[@]}")
  fuzz_run() { cargo +nightly fuzz run "${flags[@]}" "$@"; }
fi
"${build[@]}" >/dev/null 2>"$build_log" || {
  cat "$build_log" >&2
  exit 1
}

failed=0
printf '%-16s %10s %10s %8s %s\n' target executions "exec/s" "rss MB" result
for t in "${targets[@]}"; do
  mkdir -p "corpus/$t" "artifacts/$t"
  log=$(mktemp)
  # -rss_limit_mb turns unbounded growth into a finding; one allocation over 256 MiB is one too,
  # by the targets' own allocator (fuzz/src/lib.rs): libFuzzer's -malloc_limit_mb sees only a
  # sanitizer's allocations, and these run without one.
  if fuzz_run "$t" "corpus/$t" "seeds/$t" -- \
    -max_total_time="$seconds" -print_final_stats=1 -rss_limit_mb=1024 \
    -max_len=65536 -timeout=10 >"$log" 2>&1; then
    result=ok
  else
    result="CRASH (fuzz/artifacts/$t/)"
    failed=1
    grep -E "panicked at|ERROR: libFuzzer|Test unit written" "$log" | head -5 >&2 || true
  fi
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rss=$(sed -n 's/^stat::peak_rss_mb: *//p' "$log" | tail -1)
  printf '%-16s %10s %10s %8s %s\n' "$t" "${execs:-0}" "$(( ${execs:-0} / seconds ))" "${rss:-?}" "$result"
  rm -f "$log"
done
exit $failed
