#!/usr/bin/env bash
# Which of a lost machine's seconds are the database's and which the client's: a ring of three
# Cassandra pods on the local three-node Kubernetes (scripts/k8s-local.sh), RF 3, writes at CL
# (QUORUM by default), loses the machine of its second pod 5 s into the load, exactly as
# tests/k8s.rs loses it. The same ring, during the same loss, is loaded side by side by
# isobench's loaders (2 pods of 4 requests in flight; once with the client as users run it,
# `-mode speculate=100ms`, once as it was, `-mode heartbeat=off tcpKeepalive=off failover=off`)
# and from the host by a stock client no one here wrote, the DataStax Python driver from PyPI
# (2 in flight), with its defaults and tuned (heartbeats, idempotent statements, speculation).
# It prints each client's answered requests per second, from 3 s before the stop to 45 s after.
#
#   bench/lost-machine.sh            CL=ONE bench/lost-machine.sh
#
# Needs root, a set-up machine (scripts/setup.sh test) and 7 GiB of free memory; takes about 10
# minutes. Everything it starts is stopped when it ends, also when it fails halfway.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
export PATH="$HOME/.cargo/bin:$PATH"
cl=${CL:-QUORUM}
work=$(mktemp -d /tmp/isobench-lost-machine.XXXXXX)
cluster=$work/cluster
password=lost-machine-$RANDOM$RANDOM

cleanup() {
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

suite() { # suite CLIENT_MODE: the test's ring and loss, loaded for 60 s
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
args = "write duration=60s cl=$cl no-warmup -schema replication(factor=3) -rate threads=4 $1"
EOF
}

table() { # table RUN_RECORD STOPPED_AT PY_DEFAULTS PY_TUNED LABEL
  python3 - "$@" <<'EOF'
import json, sys
record, stopped, defaults, tuned, label = sys.argv[1:6]
run = json.load(open(record))
setup = run["setup"]
per_second = setup["fault.per_second"]
# "node 2 (pod … on machine node-2) at 5.0 s"
at = float(setup["fault.killed"].rsplit(" at ", 1)[1].split()[0])
rates = {}
for part in per_second.split(": ", 1)[1].split(" · "):
    second, rest = part.split(": ")
    rates[int(second)] = float(rest.split()[0])
stop = float(open(stopped).read())
def python(path):
    seconds = {}
    for line in open(path):
        s, ok, failed = map(int, line.split())
        seconds[s] = (ok, failed)
    return seconds
py = [python(defaults), python(tuned)]
print(f"\n{label}: the machine stopped {at:.1f} s into isobench's measured phase; down {setup['fault.down_s']} s")
print(f"  isobench kept serving: {setup['fault.kept_serving']}")
print(f"  isobench recovered:    {setup['fault.recovered']}")
print(f"  who served: {setup.get('fault.who_served', '-')}")
print(f"{'s after the stop':>17} {'isobench op/s':>14} {'python defaults':>16} {'python tuned':>13}")
for t in range(-3, 46):
    own = rates.get(int(at + t + 0.5))
    cells = [f"{own:.0f}" if own is not None else "-"]
    for seconds in py:
        ok, failed = seconds.get(int(stop) + t, (0, 0))
        cells.append(f"{ok}" + (f" ({failed} failed)" if failed else ""))
    print(f"{t:>17} {cells[0]:>14} {cells[1]:>16} {cells[2]:>13}")
EOF
}

run() { # run LABEL CLIENT_MODE
  local label=$1 mode=$2 out=$work/out-$RANDOM
  suite "$mode" >"$work/suite.toml"
  rm -f "$work/stopped-at"
  # The reference clients join once the ring is up and isobench's loaders made the table.
  for profile in defaults tuned; do
    "$venv/bin/python" "$root/bench/lost-machine.py" "$profile" "$cluster" bench "$password" "$cl" 70 \
      "$work/py-$profile" >"$work/py-$profile.log" 2>&1 &
  done
  "$isobench" run "$work/suite.toml" --out "$out" >"$work/isobench.log" 2>&1 \
    || { tail -30 "$work/isobench.log"; exit 1; }
  wait
  [ -f "$work/stopped-at" ] || { echo "the machine was never stopped"; tail -30 "$work/isobench.log"; exit 1; }
  table "$out/runs/runc.claim.cql/1.json" "$work/stopped-at" "$work/py-defaults" "$work/py-tuned" "$label"
}

run "isobench as users run it (-mode speculate=100ms)" "-mode speculate=100ms"
run "isobench as it was (-mode heartbeat=off tcpKeepalive=off failover=off)" \
  "-mode heartbeat=off tcpKeepalive=off failover=off"
