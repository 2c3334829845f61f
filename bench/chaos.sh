#!/usr/bin/env bash
# The long form of the chaos test (tests/chaos.rs): N runs signalled at seeded moments, the
# scenario (every kind of resource this machine supports), the phase (provisioning, boot,
# workload, teardown) and the signal (SIGKILL, or SIGINT/SIGTERM one time in ten) drawn from
# the seed; after each, what the run left and what `isobench cleanup` left (must be 0).
#
#   bench/chaos.sh 50              SEED=1234 bench/chaos.sh 50   (repeat a schedule)
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"
kills=${1:-50}
seed=${SEED:-$(( $(date +%s%N) % 1000000 ))}
cargo build --profile ci --quiet
ISOBENCH_CHAOS_KILLS=$kills ISOBENCH_CHAOS_SEED=$seed \
  cargo test --profile ci --quiet --test chaos -- --nocapture 2>&1 | grep -v '^chaos: .* left before cleanup'
