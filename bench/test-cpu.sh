#!/usr/bin/env bash
# Where a command's CPU goes, by program: the command (default `CI=true make test`) run under the
# kernel's process accounting, then every process of the machine's that ended meanwhile (so run
# it on a quiet machine) summed by its name (user and system CPU-seconds, how many, the largest
# one), with the wall time and how busy the cores were. A program that outlives the command is
# not counted; gVisor's sentries and gofers are runsc started again as `exe`, and a gVisor
# sandbox's own processes are inside them.
#
#   bench/test-cpu.sh                                   # CI=true make test
#   bench/test-cpu.sh scripts/test.sh --test history    # any command
#
# Needs root and the acct package (apt-get install acct). The accounting file is kept in
# RESULTS (default /var/tmp/isobench-test-cpu-DATE); accounting is off again at the end, or back
# on Debian's own file if the acct package keeps one.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" != 0 ]; then
  echo "bench/test-cpu.sh: needs root (process accounting is the kernel's)" >&2
  exit 2
fi
if ! command -v accton >/dev/null || ! command -v dump-acct >/dev/null; then
  echo "bench/test-cpu.sh: needs accton and dump-acct: apt-get install acct" >&2
  exit 2
fi
[ $# -gt 0 ] || set -- env CI=true make test
results=${RESULTS:-/var/tmp/isobench-test-cpu-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$results"
pacct="$results/pacct"
: >"$pacct"

restore() {
  if [ -f /var/log/account/pacct ]; then accton /var/log/account/pacct >/dev/null; else accton off >/dev/null; fi
}
trap restore EXIT
trap 'exit 130' INT TERM

accton "$pacct" >/dev/null
started=$SECONDS
status=0
"$@" || status=$?
wall=$((SECONDS - started))
restore
trap - EXIT

echo
echo "== CPU by program while \`$*\` ran ($wall s, exit $status; $(nproc) CPUs)"
python3 - "$pacct" "$wall" "$(nproc)" <<'EOF'
import subprocess, sys
pacct, wall, cpus = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
# dump-acct: name|version|user|system|elapsed|... with times in clock ticks (AHZ, 100 a second).
lines = subprocess.run(["dump-acct", pacct], capture_output=True, text=True, check=True).stdout.splitlines()
by = {}
for line in lines:
    f = [x.strip() for x in line.split("|")]
    if len(f) < 5:
        continue
    cpu = (float(f[2]) + float(f[3])) / 100
    name = {"exe": "exe (runsc: sentries, gofers)"}.get(f[0], f[0])
    n, total, largest = by.get(name, (0, 0.0, 0.0))
    by[name] = (n + 1, total + cpu, max(largest, cpu))
total = sum(t for _, t, _ in by.values()) or 1e-9
print(f"  {'program':<32} {'processes':>9} {'CPU-s':>8} {'share':>6} {'largest':>8}")
for name, (n, t, largest) in sorted(by.items(), key=lambda kv: -kv[1][1]):
    if t >= total * 0.005:
        print(f"  {name:<32} {n:>9} {t:>8.1f} {t / total:>6.1%} {largest:>8.1f}")
print(f"  {'all':<32} {sum(n for n, _, _ in by.values()):>9} {total:>8.1f}")
busy = total / (max(wall, 1) * cpus)
print(f"  the processes kept the {cpus} CPUs {busy:.0%} busy; at full use they need {total / cpus / 60:.1f} min")
EOF
echo "accounting file: $pacct"
exit "$status"
