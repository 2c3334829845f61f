#!/usr/bin/env bash
# Which of a lost machine's seconds are the database's and which the client's: a ring of three
# Cassandra pods on the local three-node Kubernetes (scripts/k8s-local.sh), RF 3, writes at CL
# (QUORUM by default), loses the machine of its second pod 5 s into the load, exactly as
# tests/k8s.rs loses it. Four runs, one after another, each on a fresh ring with the machine to
# itself, each with 8 requests in flight: isobench's loaders (2 pods of 4 threads) with the
# client as users run it (`-mode speculate=100ms`) and as it was (`-mode heartbeat=off
# tcpKeepalive=off failover=off`); then a stock client no one here wrote, the DataStax Python
# driver from PyPI on the host, with its defaults and tuned (heartbeats, idempotent statements,
# a speculative execution after 100 ms), while isobench's loaders only witness the loss (1
# thread at 10 op/s). It prints each client's answered requests per second, from 3 s before the
# stop to 45 s after.
#
#   bench/lost-machine.sh            CL=ONE bench/lost-machine.sh
#   RUNS="py-tuned" bench/lost-machine.sh          some of the four: speculate as-it-was py-defaults py-tuned
#
# Each run's result set, log and client seconds are kept in RESULTS (default
# /var/tmp/isobench-lost-machine-DATE).
# Needs root, a set-up machine (scripts/setup.sh test) and 7 GiB of free memory; takes about 15
# minutes. Everything it starts is stopped when it ends, also when it fails halfway.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
export PATH="$HOME/.cargo/bin:$PATH"
cl=${CL:-QUORUM}
runs=${RUNS:-speculate as-it-was py-defaults py-tuned}
work=$(mktemp -d /tmp/isobench-lost-machine.XXXXXX)
results=${RESULTS:-/var/tmp/isobench-lost-machine-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$results"
cluster=$work/cluster
password=lost-machine-$RANDOM$RANDOM

cleanup() {
  kill $(jobs -p) 2>/dev/null || true
  "$root/scripts/k8s-local.sh" down "$cluster" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

cargo build --profile ci --quiet
isobench=$root/target/ci/isobench

# The stock client, from PyPI, in a venv of its own (pure Python: nothing to compile).
venv=${XDG_CACHE_HOME:-$HOME/.cache}/isobench/lost-machine-venv
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c 'import cassandra' 2>/dev/null; then
  command -v python3 >/dev/null && python3 -c 'import ensurepip' 2>/dev/null \
    || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null
  python3 -m venv "$venv"
  CASS_DRIVER_NO_EXTENSIONS=1 "$venv/bin/pip" install -q cassandra-driver
fi
echo "reference client: DataStax Python driver $("$venv/bin/python" -c 'import cassandra; print(cassandra.__version__)')"

# The pods run the binary just built: the agent's image and the database's.
"$root/scripts/k8s-image.sh" --bin "$isobench" "$work/isobench.tar" >/dev/null
"$root/scripts/k8s-image.sh" --bin "$isobench" --cassandra "${ISOBENCH_CASSANDRA_VERSION:-5.0.9}" \
  "$work/isobench-cassandra.tar" >/dev/null
"$root/scripts/k8s-local.sh" up "$cluster" --nodes 3 "$work/isobench.tar" "$work/isobench-cassandra.tar" >/dev/null
# The stop, stamped: the clients' seconds are set against it.
cat >"$work/stop-node" <<EOF
#!/bin/sh
date +%s.%N >"$work/stopped-at"
exec "$root/scripts/k8s-local.sh" stop-node "$cluster" "\$1"
EOF
chmod +x "$work/stop-node"

suite() { # suite LOAD: the test's ring and loss, loaded for 60 s with LOAD's threads and mode
  cat <<EOF
name = "lost-machine"
repeat = 1
baseline = { env = "runc" }

[[server]]
kind = "cassandra"
heap = "512M"
quick_jit = true
user = "bench"
password = "$password"
nodes = 3
kill_node = 2
kill_after = "5s"
kill = "machine"

[[env]]
name = "runc"
kind = "k8s"
kubeconfig = "$cluster/kubeconfig"
runtime_class = "runc"
spread = "required"
machine_stop = "$work/stop-node {machine}"
machine_start = "$root/scripts/k8s-local.sh start-node $cluster {machine}"

[[volume]]
name = "claim"
kind = "pvc"
storage_class = "isobench-local"
size = "1G"

[[workload]]
name = "cql"
kind = "cql"
loaders = 2
args = "write duration=60s cl=$cl no-warmup -schema replication(factor=3) $1"
EOF
}

# run NAME LOAD [PYTHON_PROFILE]: one fresh ring through one loss; in RESULTS, the result set
# NAME/, the stop's time NAME.stopped and a Python client's seconds NAME.py.
run() {
  local name=$1 load=$2 profile=${3:-} out=$results/$1
  [[ " $runs " == *" $name "* ]] || return 0
  suite "$load" >"$work/suite.toml"
  rm -f "$work/stopped-at"
  if [ -n "$profile" ]; then
    # It joins once the ring's three pods are Ready, before the loaders' measured phase begins.
    "$venv/bin/python" "$root/bench/lost-machine.py" "$profile" "$cluster" bench "$password" "$cl" 90 \
      "$results/$name.py" >"$results/$name.py.log" 2>&1 &
  fi
  "$isobench" run "$work/suite.toml" --out "$out" >"$results/$name.log" 2>&1 \
    || { tail -30 "$results/$name.log"; echo "kept: $results"; exit 1; }
  wait
  [ -f "$work/stopped-at" ] || { echo "$name: the machine was never stopped"; tail -30 "$results/$name.log"; exit 1; }
  mv "$work/stopped-at" "$results/$name.stopped"
  echo "$name: done" >&2
}

run speculate "-rate threads=4 -mode speculate=100ms"
run as-it-was "-rate threads=4 -mode heartbeat=off tcpKeepalive=off failover=off"
witness="-rate threads=1 fixed=10/s"
run py-defaults "$witness" defaults
run py-tuned "$witness" tuned

python3 - "$results" "$cl" <<'EOF'
import json, os, sys
results, cl = sys.argv[1:3]

def facts(name):
    setup = json.load(open(f"{results}/{name}/runs/runc.claim.cql/1.json"))["setup"]
    # "node 2 (pod … on machine node-2) at 5.0 s"
    at = float(setup["fault.killed"].rsplit(" at ", 1)[1].split()[0])
    heading, listed = setup["fault.per_second"].split(": ", 1)
    ready = float(heading.split("Ready again at ")[1].split()[0]) - at if "Ready again at" in heading else None
    rates = {}
    for part in listed.split(" · "):
        second, rest = part.split(": ")
        rates[int(second)] = float(rest.split()[0])
    return setup, at, rates, ready

def python(name):
    stop = int(float(open(f"{results}/{name}.stopped").read()))
    seconds = {}
    for line in open(f"{results}/{name}.py"):
        s, ok, failed = map(int, line.split())
        seconds[s - stop] = f"{ok}" + (f" ({failed} failed)" if failed else "")
    return seconds

columns = {}
print(f"\nWrites at {cl}, RF 3, a ring of three; the machine of pod 2 stopped 5 s into the load.")
for name, label in [
    ("speculate", "isobench speculate=100ms"),
    ("as-it-was", "isobench as it was"),
    ("py-defaults", "Python driver, defaults"),
    ("py-tuned", "Python driver, tuned"),
]:
    if not os.path.exists(f"{results}/{name}.stopped"):
        continue
    setup, at, rates, ready = facts(name)
    if name.startswith("py-"):
        columns[label] = python(name)
    else:
        columns[label] = {t: f"{rates[round(at + t)]:.0f}" for t in range(-3, 46) if round(at + t) in rates}
        print(f"- {label}: kept serving: {setup['fault.kept_serving']}; recovered: {setup['fault.recovered']}")
    back = f"its pod Ready {ready:.1f} s after the stop" if ready is not None else "its pod not Ready in the run"
    print(f"- {label}: machine down {setup['fault.down_s']} s, NotReady after {setup['fault.not_ready_s']} s, {back}")
print()
print(f"{'s after the stop':>16} " + " ".join(f"{label:>25}" for label in columns))
for t in range(-3, 46):
    print(f"{t:>16} " + " ".join(f"{column.get(t, '-'):>25}" for column in columns.values()))
EOF
echo "kept: $results"
