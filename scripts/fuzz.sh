#!/usr/bin/env bash
# Runs every cargo-fuzz target (fuzz/fuzz_targets) for SECONDS each, from its checked-in seeds
# (fuzz/seeds/TARGET, real files) plus what earlier runs found (fuzz/corpus/TARGET, not kept in
# git), and prints executions and crashes per target. `make test` runs it briefly; by hand:
#   scripts/fuzz.sh 600            # ten minutes per target
#   scripts/fuzz.sh 60 hdr_log     # one target
#   scripts/fuzz.sh --quick 10     # make test's: an unoptimised build, 1.5 min instead of 5
# A crash leaves its input in fuzz/artifacts/TARGET/ and makes the script exit 1; turn the input
# into a regression test next to the parser it broke.
# Needs a nightly toolchain (rustup) and cargo-fuzz (scripts/setup.sh test installs cargo-fuzz);
# without them it says what is missing and exits 0, so the rest of `make test` goes on.
set -euo pipefail
cd "$(dirname "$0")/../fuzz"
export PATH="$HOME/.cargo/bin:$PATH"

# Debug assertions on (overflow is a finding), no sanitizer: the code under test is safe Rust,
# and without ASan the runs get twice the executions.
flags=(--release --debug-assertions --sanitizer none)
if [ "${1:-}" = --quick ]; then
  flags=(--dev --sanitizer none)
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
rustup run nightly rustc --version >/dev/null 2>&1 \
  || skip rust-nightly "no nightly Rust toolchain (rustup toolchain install nightly); libFuzzer needs it"
cargo fuzz --version >/dev/null 2>&1 || skip cargo-fuzz "cargo-fuzz is not installed (scripts/setup.sh test installs it)"

cargo +nightly fuzz build "${flags[@]}" >/dev/null 2>/tmp/isobench-fuzz-build.log || {
  cat /tmp/isobench-fuzz-build.log >&2
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
  if cargo +nightly fuzz run "${flags[@]}" "$t" "corpus/$t" "seeds/$t" -- \
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
