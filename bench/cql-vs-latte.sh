#!/usr/bin/env bash
# Client CPU per operation: `isobench cql` against latte (the most frugal CQL load generator we
# know of), the same workloads on one local Cassandra: write ROWS rows of cassandra-stress's
# standard1 shape with CONCURRENCY operations in flight, then read ROWS random rows. Each tool
# runs RUNS times per workload, interleaved in ABBA order so that drift hits both alike.
# CPU is user+sys of the client process from /usr/bin/time; the server's CPU is not counted.
# Prints each run, the medians of CPU-s per 100k operations, and the ratio isobench/latte
# (goal ≤ 1.0).
#
#   bench/cql-vs-latte.sh                  defaults: ROWS=1000000 CONCURRENCY=128 RUNS=3
#   ROWS=200000 RUNS=5 bench/cql-vs-latte.sh
#   NODE=10.0.0.5 bench/cql-vs-latte.sh    an existing node instead of one started here
set -euo pipefail
cd "$(dirname "$0")/.."
ROWS=${ROWS:-1000000} CONCURRENCY=${CONCURRENCY:-128} RUNS=${RUNS:-3}
BIN=${ISOBENCH:-target/release/isobench}
LATTE_ROOT=${XDG_CACHE_HOME:-$HOME/.cache}/isobench/latte
LATTE=$LATTE_ROOT/bin/latte
export PATH="$HOME/.cargo/bin:$PATH"
[ -x "$BIN" ] || cargo build --release -q
if [ ! -x "$LATTE" ]; then
  echo "building latte into $LATTE_ROOT (cargo install --locked latte-cli; about 10 minutes, once)" >&2
  cargo install --locked --quiet latte-cli --root "$LATTE_ROOT"
fi
WORK=$(mktemp -d /var/tmp/isobench-cqlbench.XXXXXX)
export LATTE_LOG_DIR=$WORK   # latte logs into the current directory otherwise
PORT=${PORT:-19042}
OWN_NODE=
cleanup() {
  [ -z "$OWN_NODE" ] || ISOBENCH_WORKDIR=$WORK "$BIN" server stop cassandra --port "$PORT" >/dev/null 2>&1 || true
  rm -rf "$WORK"
}
trap cleanup EXIT
if [ -z "${NODE:-}" ]; then
  OWN_NODE=1
  ISOBENCH_WORKDIR=$WORK "$BIN" server start cassandra --port "$PORT" --heap 2G --data "$WORK/cassandra" >&2
  NODE=127.0.0.1
fi
# latte gets the threads isobench's runtime takes for CONCURRENCY in flight (one per 128, at
# most one per core), each with its share of the operations in flight.
THREADS=$(( (CONCURRENCY + 127) / 128 )); [ "$THREADS" -le "$(nproc)" ] || THREADS=$(nproc)
PER_THREAD=$(( CONCURRENCY / THREADS ))

# cpu_per_100k OPS TIMEFILE: (user+sys) seconds per 100k operations.
cpu_per_100k() { awk -v ops="$1" '/^cpu/ { printf "%.3f", ($2 + $3) * 100000 / ops }' "$2"; }

isobench() { # WORKLOAD
  local args
  case $1 in
    write) args="write n=$ROWS no-warmup" ;;
    read) args="read n=$ROWS no-warmup -pop dist=uniform(1..$ROWS)" ;;
  esac
  /usr/bin/time -f 'cpu %U %S' -o "$WORK/time" \
    "$BIN" cql $args -rate threads="$CONCURRENCY" -node "$NODE" -port native="$PORT" \
    -schema keyspace=isobench_bench -errors ignore > "$WORK/out" 2>&1 || { tail -20 "$WORK/out" >&2; return 1; }
  grep -q '^END$' "$WORK/out" || { tail -20 "$WORK/out" >&2; return 1; }
  cpu_per_100k "$ROWS" "$WORK/time"
}

latte_run() { # WORKLOAD
  /usr/bin/time -f 'cpu %U %S' -o "$WORK/time" \
    "$LATTE" run -f "$1" -d "$ROWS" -w 0 -t "$THREADS" -p "$PER_THREAD" -P rows="$ROWS" -q \
    -o "$WORK/latte.json" bench/latte/standard1.rn "$NODE:$PORT" > "$WORK/out" 2>&1 || { tail -20 "$WORK/out" >&2; return 1; }
  cpu_per_100k "$ROWS" "$WORK/time"
}

"$LATTE" schema bench/latte/standard1.rn "$NODE:$PORT" > /dev/null

median() { tr ' ' '\n' | grep . | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

printf '%-6s %-5s %s\n' workload run "client CPU-s per 100k ops: isobench  latte"
for workload in write read; do
  if [ "$workload" = read ]; then
    # The writes leave flushes and compactions behind, and the server's read path is cold: a
    # slower server costs a client more CPU per operation (fewer responses per wake-up), so
    # warm both up, unmeasured, before the first measured read.
    ROWS=$(( ROWS / 5 )) isobench read > /dev/null
    ROWS=$(( ROWS / 5 )) latte_run read > /dev/null
  fi
  ours="" theirs=""
  for run in $(seq "$RUNS"); do
    # ABBA: whichever goes first meets a slightly different server; alternate.
    if [ $(( run % 2 )) = 1 ]; then
      a=$(isobench "$workload"); b=$(latte_run "$workload")
    else
      b=$(latte_run "$workload"); a=$(isobench "$workload")
    fi
    ours+=" $a" theirs+=" $b"
    printf '%-6s %-5s %37s  %s\n' "$workload" "$run" "$a" "$b"
  done
  m_ours=$(echo "$ours" | median) m_theirs=$(echo "$theirs" | median)
  printf '%-6s median %36s  %s   ratio isobench/latte %.2f\n' "$workload" "$m_ours" "$m_theirs" \
    "$(echo "$m_ours $m_theirs" | awk '{ print $1 / $2 }')"
done
