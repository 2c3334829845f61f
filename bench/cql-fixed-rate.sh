#!/usr/bin/env bash
# Response time at a fixed rate, two builds of isobench side by side against one local Cassandra:
# `write duration=SECONDS -rate threads=32 fixed=R/s` at each of RATES, RUNS times per build in
# ABBA order. A fixed rate's response time counts from each operation's intended start, so any
# moment the load generator's own thread is busy elsewhere (its interval bookkeeping, say) is
# added to the operations due then: at a low rate that sets the p99, and with it the capacity a
# search finds. Prints each run's p50 and p99 and the medians' ratio B/A per rate.
#
#   bench/cql-fixed-rate.sh OLD NEW        two isobench binaries (A, B)
#   RATES="16 500 2000" RUNS=5 SECONDS=8 bench/cql-fixed-rate.sh OLD NEW
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -eq 2 ] || { sed -n '2,11p' "$0" >&2; exit 2; }
A=$1 B=$2
RATES=${RATES:-16 125 500 2000} RUNS=${RUNS:-3} SECONDS_EACH=${SECONDS:-6} PORT=${PORT:-19043}
WORK=$(mktemp -d /var/tmp/isobench-fixedrate.XXXXXX)
cleanup() {
  ISOBENCH_WORKDIR=$WORK "$A" server stop cassandra --port "$PORT" >/dev/null 2>&1 || true
  rm -rf "$WORK"
}
trap cleanup EXIT
ISOBENCH_WORKDIR=$WORK "$A" server start cassandra --port "$PORT" --heap 1G --data "$WORK/cassandra" >&2
"$A" cql write n=20000 -rate threads=32 -node 127.0.0.1 -port native="$PORT" >/dev/null

# run BIN RATE: "p50 p99" in ms of one run.
run() {
  "$1" cql write duration="${SECONDS_EACH}s" -rate threads=32 fixed="$2/s" -node 127.0.0.1 -port native="$PORT" \
    | awk -F: '/^Latency median/ {split($2, m, " ")} /^Latency 99th/ {split($2, p, " ")} END {print m[1], p[1]}'
}

median() { sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }

printf '%-8s %-4s %-3s %8s %8s\n' rate tool run p50_ms p99_ms
for rate in $RATES; do
  : >"$WORK/a" && : >"$WORK/b"
  for i in $(seq "$RUNS"); do
    order="A B"
    [ $((i % 2)) -eq 0 ] && order="B A"
    for tool in $order; do
      bin=$A out=$WORK/a
      [ "$tool" = B ] && bin=$B out=$WORK/b
      read -r p50 p99 < <(run "$bin" "$rate")
      printf '%-8s %-4s %-3s %8s %8s\n' "$rate" "$tool" "$i" "$p50" "$p99"
      echo "$p99" >>"$out"
    done
  done
  a=$(median <"$WORK/a") b=$(median <"$WORK/b")
  awk -v r="$rate" -v a="$a" -v b="$b" 'BEGIN {printf "%s op/s: median p99 A %.1f ms, B %.1f ms, B/A %.2f\n", r, a, b, b / a}'
done
