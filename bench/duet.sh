#!/usr/bin/env bash
# Whether duet benchmarking (the two sides run at once, one CPU each) can compare storage on this
# machine's disk: two ext4 loop volumes as the demo makes them (2 GiB, direct I/O to their backing
# files on the root disk), fio on each, with a planted difference (side B writes or reads 8k where
# side A does 4k) and without one (A/A). Each design estimates B against A:
#   duet  both fio processes at once for SECONDS_A_RUN s, each pinned to a CPU of its own;
#         their IOPS logged every 0.5 s, the log-ratio of each window's pair
#   alt   as many cycles of 0.5-s runs alternating between the sides, in a random order each
#         cycle, as isobench's slices do; the log-ratio of each cycle's pair
# and prints the mean difference with the sd of a window's or a cycle's log-ratio. A duet that
# reads the planted difference as the alternation does would share the disk's wander between
# the sides at every instant; one that reads it near 0 couples the sides (a device serving the
# two in turn) and would hide a sandbox's overhead.
#
#   bench/duet.sh                 SETS=2 SECONDS_A_RUN=20 (~6 min)
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" = 0 ] || { echo "bench/duet.sh: needs root (loop devices, mounts)" >&2; exit 2; }
SETS=${SETS:-2}
SECS=${SECONDS_A_RUN:-20}
WORK=$(mktemp -d /var/tmp/isobench-duet.XXXXXX)
devs=() py=
cleanup() {
  # Every step, whatever the one before returned (a killed child's wait fails).
  set +e
  # The measuring script and the fio processes it started, before their volumes go.
  [ -z "$py" ] || { kill "$py" 2>/dev/null; wait "$py" 2>/dev/null; }
  pkill -f -- "--directory=$WORK/" 2>/dev/null
  for _ in $(seq 50); do pgrep -f -- "--directory=$WORK/" >/dev/null || break; sleep 0.2; done
  for i in 1 2; do umount "$WORK/m$i" 2>/dev/null || true; done
  for d in "${devs[@]}"; do losetup -d "$d" 2>/dev/null || true; done
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
for i in 1 2; do
  truncate -s 2G "$WORK/v$i.img"
  # Initialised now, as isobench's own volumes are: ext4lazyinit would write during the sets.
  mkfs.ext4 -q -F -E lazy_itable_init=0,lazy_journal_init=0 "$WORK/v$i.img"
  devs+=("$(losetup --direct-io=on -f --show "$WORK/v$i.img")")
  mkdir -p "$WORK/m$i"
  mount "${devs[-1]}" "$WORK/m$i"
  fio --name=w --rw=write --bs=1M --size=256M --directory="$WORK/m$i" --output-format=terse \
    >/dev/null
done

# In the background and waited for, so that a signal reaches the trap at once.
python3 - "$WORK" "$SETS" "$SECS" <<'EOF' &
import json, math, random, statistics, subprocess, sys
work, sets, secs = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
JOBS = {
    "fsynced 4k random writes": ["--rw=randwrite", "--fsync=1"],
    "direct 4k random reads": ["--rw=randread", "--direct=1"],
}

def fio(side, job, planted, extra):
    bs = "8k" if planted and side == 2 else "4k"
    return ["fio", "--name=w", f"--bs={bs}", "--size=256M", "--ioengine=psync", "--time_based",
            "--clocksource=clock_gettime", "--output-format=json", f"--directory={work}/m{side}",
            *job, *extra]

def iops(out):
    j = json.loads(out[out.index("{"):])["jobs"][0]
    return j["read"]["iops"] + j["write"]["iops"]

def duet(job, planted):
    logged = lambda side: [f"--runtime={secs}", f"--write_iops_log={work}/log{side}", "--log_avg_msec=500"]
    procs = [subprocess.Popen(["taskset", "-c", str(side - 1), *fio(side, job, planted, logged(side))],
                              stdout=subprocess.PIPE, text=True) for side in (1, 2)]
    for p in procs:
        p.communicate()
    a, b = ([float(l.split(",")[1]) for l in open(f"{work}/log{side}_iops.1.log")] for side in (1, 2))
    # The first and last windows are partial.
    windows = range(1, min(len(a), len(b)) - 1)
    return [math.log(b[k] / a[k]) for k in windows if a[k] > 0 and b[k] > 0]

def alternating(job, planted):
    out = []
    for _ in range(int(secs)):
        rate = {}
        for side in random.sample((1, 2), 2):
            ran = subprocess.run(fio(side, job, planted, ["--runtime=500ms"]), capture_output=True, text=True)
            rate[side] = iops(ran.stdout)
        out.append(math.log(rate[2] / rate[1]))
    return out

print(f"{'job':26} {'B against A':12} {'design':5} {'set':>3} {'difference':>10} {'sd a pair':>9} {'pairs':>5}")
for name, job in JOBS.items():
    for planted in (True, False):
        for s in range(1, sets + 1):
            for design, measure in (("duet", duet), ("alt", alternating)):
                lr = measure(job, planted)
                what = "B at 8k" if planted else "A/A"
                difference = 100 * math.expm1(statistics.mean(lr))
                print(f"{name:26} {what:12} {design:5} {s:>3} {difference:>+9.1f}% "
                      f"{100 * statistics.stdev(lr):>8.1f}% {len(lr):>5}", flush=True)
EOF
py=$!
wait "$py"
