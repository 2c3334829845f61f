#!/usr/bin/env bash
# Client CPU per operation: `isobench cql` against latte (the most frugal CQL load generator we
# know of), the same workloads on one local Cassandra: write ROWS rows of cassandra-stress's
# standard1 shape with CONCURRENCY operations in flight, then read ROWS random rows. Each tool
# runs RUNS times per workload, interleaved in ABBA order so that drift hits both alike. Reads
# run twice: as isobench runs them by default (every column regenerated and compared with what
# came back) and with -errors skip-read-validation (latte never checks what it reads).
# CPU is user+sys of the client process from /usr/bin/time; the server's CPU is not counted.
# Prints each run, the medians of CPU-s per 100k operations, and the ratio isobench/latte
# (goals: write ≤ 0.6, read ≤ 0.8). A validating read that reports an error fails the bench: a
# validation that compared nothing would look frugal.
# Then where the read's CPU went: the medians' user/sys split, and (with valgrind) callgrind's
# instructions per write and per read of each tool (the difference between a run of
# 2×PROFILE_OPS operations and one of PROFILE_OPS, which cancels start-up), isobench's reads split
# into the driver's request path, the connection's reader/writer task and isobench around the
# driver call. Instructions do not wander with the machine as CPU-seconds do: where two builds'
# CPU per operation cannot be told apart in a few runs, theirs can. PROFILE_OPS=0 skips it.
# With ISOBENCH_B, another build of isobench takes latte's place (its own keyspace, the same
# runs): how a build profile changes the client's CPU per operation.
#
#   bench/cql-vs-latte.sh                  defaults: ROWS=1000000 CONCURRENCY=128 RUNS=3
#   ROWS=200000 RUNS=5 bench/cql-vs-latte.sh
#   NODE=10.0.0.5 NODETOOL="nodetool -h 10.0.0.5" bench/cql-vs-latte.sh
#                                          an existing node instead of one started here
#   ISOBENCH_B=/tmp/thin/release/isobench PROFILE_OPS=0 bench/cql-vs-latte.sh
#                                          target/release/isobench against another build
set -euo pipefail
cd "$(dirname "$0")/.."
ROWS=${ROWS:-1000000} CONCURRENCY=${CONCURRENCY:-128} RUNS=${RUNS:-3} PROFILE_OPS=${PROFILE_OPS:-10000}
BIN=${ISOBENCH:-target/release/isobench}
LATTE_ROOT=${XDG_CACHE_HOME:-$HOME/.cache}/isobench/latte
LATTE=$LATTE_ROOT/bin/latte
export PATH="$HOME/.cargo/bin:$PATH"
[ -x "$BIN" ] || cargo build --release -q
B=${ISOBENCH_B:-}
OTHER=latte OTHER_KEYSPACE=latte_bench
[ -z "$B" ] || OTHER=B OTHER_KEYSPACE=isobench_b
if [ -z "$B" ] && [ ! -x "$LATTE" ]; then
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
# nodetool ARGS...: NODETOOL, or the distribution's own NodeTool on the node started here.
nodetool() {
  if [ -n "${NODETOOL:-}" ]; then
    $NODETOOL "$@"
    return
  fi
  [ -n "$OWN_NODE" ] || return 1
  local pid cmdline jmx lib
  pid=$(pgrep -f -- "-Dcassandra.storagedir=$WORK/cassandra" | head -1)
  cmdline=$(tr '\0' '\n' < "/proc/$pid/cmdline")
  jmx=$(echo "$cmdline" | sed -n 's/^-Dcassandra.jmx.local.port=//p')
  lib=$(echo "$cmdline" | sed -n 's/^-javaagent:\(.*\)\/jamm-.*/\1/p')
  # The module flags are those Cassandra's jvm17-clients.options gives its tools.
  java -Xmx128m -XX:TieredStopAtLevel=1 -Duser.home="$WORK" -cp "$lib/*" \
    --add-exports java.base/jdk.internal.ref=ALL-UNNAMED --add-exports java.base/sun.nio.ch=ALL-UNNAMED \
    --add-opens java.base/sun.nio.ch=ALL-UNNAMED --add-opens java.base/jdk.internal.ref=ALL-UNNAMED \
    --add-exports java.rmi/sun.rmi.registry=ALL-UNNAMED \
    org.apache.cassandra.tools.NodeTool -h 127.0.0.1 -p "$jmx" "$@"
}

# latte gets the threads isobench's runtime takes for CONCURRENCY in flight (one per 128, at
# most one per core), each with its share of the operations in flight.
THREADS=$(( (CONCURRENCY + 127) / 128 )); [ "$THREADS" -le "$(nproc)" ] || THREADS=$(nproc)
PER_THREAD=$(( CONCURRENCY / THREADS ))

# cpu_per_100k OPS TIMEFILE: "total user sys" seconds per 100k operations.
cpu_per_100k() { awk -v ops="$1" '/^cpu/ { k = 100000 / ops; printf "%.3f %.3f %.3f", ($2 + $3) * k, $2 * k, $3 * k }' "$2"; }

# isobench_args WORKLOAD OPS: the `isobench cql` arguments of a workload.
isobench_args() {
  case $1 in
    write) echo "write n=$2 no-warmup -errors ignore" ;;
    read) echo "read n=$2 no-warmup -pop dist=uniform(1..$ROWS) -errors ignore" ;;
    read-nv) echo "read n=$2 no-warmup -pop dist=uniform(1..$ROWS) -errors ignore skip-read-validation" ;;
  esac
}

isobench() { # WORKLOAD [OPS [WRAPPER...]]
  local workload=$1 ops=${2:-$ROWS}
  shift $(( $# < 2 ? $# : 2 ))
  # shellcheck disable=SC2046
  "$@" "${RUN_BIN:-$BIN}" cql $(isobench_args "$workload" "$ops") -rate threads="$CONCURRENCY" -node "$NODE" \
    -port native="$PORT" -schema keyspace="${KEYSPACE:-isobench_bench}" > "$WORK/out" 2>&1 || { tail -20 "$WORK/out" >&2; return 1; }
  grep -q '^END$' "$WORK/out" || { tail -20 "$WORK/out" >&2; return 1; }
  if [ "$workload" = read ] && ! grep -Eq '^Total errors +: +0 ' "$WORK/out"; then
    grep -m 5 'not validated' "$WORK/out" >&2; echo "isobench's validating read reported errors" >&2; return 1
  fi
}

latte_run() { # WORKLOAD [OPS [WRAPPER...]]
  if [ -n "$B" ]; then
    RUN_BIN=$B KEYSPACE=$OTHER_KEYSPACE isobench "$@"
    return
  fi
  local workload=$1 ops=${2:-$ROWS}
  shift $(( $# < 2 ? $# : 2 ))
  "$@" "$LATTE" run -f "${workload%-nv}" -d "$ops" -w 0 -t "$THREADS" -p "$PER_THREAD" -P rows="$ROWS" -q \
    -o "$WORK/latte.json" bench/latte/standard1.rn "$NODE:$PORT" > "$WORK/out" 2>&1 || { tail -20 "$WORK/out" >&2; return 1; }
}

timed() { # TOOL WORKLOAD: prints "total user sys" CPU-s per 100k operations
  "$1" "$2" "$ROWS" /usr/bin/time -f 'cpu %U %S' -o "$WORK/time"
  cpu_per_100k "$ROWS" "$WORK/time"
}

[ -n "$B" ] || "$LATTE" schema bench/latte/standard1.rn "$NODE:$PORT" > /dev/null

median() { tr ' ' '\n' | grep . | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

median_of() { # FIELD "TOTAL USER SYS;…": the median of one field over the runs
  echo "$2" | tr ';' '\n' | awk -v f="$1" 'NF { print $f }' | median
}

printf '%-8s %-5s %s\n' workload run "client CPU-s per 100k ops: isobench  $OTHER"
for workload in write read read-nv; do
  if [ "$workload" = read ]; then
    # How many sstables a read meets depends on when compactions happened to run, which differs
    # from one tool's table to the other's: one sstable each, so both read tables of one shape.
    for keyspace in isobench_bench "$OTHER_KEYSPACE"; do
      { nodetool flush "$keyspace" && nodetool compact "$keyspace"; } > "$WORK/nodetool.log" 2>&1 || {
        tail -3 "$WORK/nodetool.log" >&2
        echo "$keyspace was not compacted (set NODETOOL for a node not started here): the tools' reads may meet different numbers of sstables" >&2
      }
    done
    # The writes leave flushes and compactions behind, and the server's read path is cold: a
    # slower server costs a client more CPU per operation (fewer responses per wake-up), so
    # warm both up, unmeasured, before the first measured read.
    isobench read $(( ROWS / 5 ))
    latte_run read $(( ROWS / 5 ))
  fi
  ours="" theirs=""
  for run in $(seq "$RUNS"); do
    # ABBA: whichever goes first meets a slightly different server; alternate.
    if [ $(( run % 2 )) = 1 ]; then
      a=$(timed isobench "$workload"); b=$(timed latte_run "$workload")
    else
      b=$(timed latte_run "$workload"); a=$(timed isobench "$workload")
    fi
    ours+="$a;" theirs+="$b;"
    printf '%-8s %-5s %37s  %s\n' "$workload" "$run" "${a%% *}" "${b%% *}"
  done
  m_ours=$(median_of 1 "$ours") m_theirs=$(median_of 1 "$theirs")
  printf '%-8s median %36s  %s   ratio isobench/%s %.2f\n' "$workload" "$m_ours" "$m_theirs" "$OTHER" \
    "$(echo "$m_ours $m_theirs" | awk '{ print $1 / $2 }')"
  if [ "$workload" = read ]; then
    split="user $(median_of 2 "$ours") sys $(median_of 3 "$ours") | $OTHER: user $(median_of 2 "$theirs") sys $(median_of 3 "$theirs")"
  fi
done

[ "$PROFILE_OPS" -gt 0 ] || exit 0
echo
echo "where a validating read's CPU went (medians, CPU-s per 100k ops): isobench: $split"
if ! command -v valgrind >/dev/null; then
  echo "no valgrind: instructions per read not counted (apt-get install valgrind)"
  exit 0
fi
# instructions TOOL WORKLOAD OPS: callgrind's instruction count of one run of OPS operations.
instructions() {
  local out="$WORK/callgrind.$1.$2.$3"
  "$1" "$2" "$3" valgrind --tool=callgrind --callgrind-out-file="$out" 2> /dev/null
  callgrind_annotate --inclusive=yes "$out" > "$out.txt" 2> /dev/null
  awk '/PROGRAM TOTALS/ { gsub(",", "", $1); print $1; exit }' "$out.txt"
}
# inclusive FILE PATTERN: the inclusive instructions of the first function matching PATTERN.
inclusive() { awk -v p="$2" 'index($0, p) { gsub(",", "", $1); print $1; exit }' "$1"; }
per_op() { echo "$1 $2 $PROFILE_OPS" | awk '{ printf "%.0f", ($1 - $2) / $3 }'; }
for tool in isobench latte_run; do
  once=$(instructions "$tool" write "$PROFILE_OPS") twice=$(instructions "$tool" write $(( 2 * PROFILE_OPS )))
  line="$(per_op "$twice" "$once") instructions per write, "
  once=$(instructions "$tool" read "$PROFILE_OPS") twice=$(instructions "$tool" read $(( 2 * PROFILE_OPS )))
  line+="$(per_op "$twice" "$once") per read"
  if [ "$tool" = isobench ]; then
    # Of the longer read, per operation: each operation's task (our work and the driver call it
    # makes), the driver's request path inside it, and the connection's reader/writer task.
    txt="$WORK/callgrind.isobench.read.$(( 2 * PROFILE_OPS )).txt" ops=$(( 2 * PROFILE_OPS ))
    task=$(inclusive "$txt" 'cql_stress::engine::Load::task')
    request=$(inclusive "$txt" 'Session::execute_unpaged_nongeneric')
    router=$(inclusive "$txt" 'Connection::router')
    [ -n "$task" ] && [ -n "$request" ] && [ -n "$router" ] &&
      line+=$(echo "$task $request $router $ops" | awk '{ printf " (of a run of %d: driver request path %.0f, connection task %.0f, isobench around the call %.0f)", $4, $2 / $4, $3 / $4, ($1 - $2) / $4 }')
  fi
  name=isobench; [ "$tool" = isobench ] || name=$OTHER
  printf '%-9s %s\n' "$name" "$line"
done
