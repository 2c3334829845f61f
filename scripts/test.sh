#!/usr/bin/env bash
# `make test` after setup: the layering check, the build, every test binary (each test timed),
# the fuzz targets briefly, then one summary: passed, failed and skipped (a test that skipped
# all it checks is not "passed"), the skipped tests and parts grouped by the capability they
# lacked, and the ten slowest tests. With CI=true (CI sets it), a skip of a capability
# tests/capabilities.txt marks required on this machine kind fails the run, naming the tests.
# Arguments select the tests as cargo test's do, harness arguments after `--`
# (`scripts/test.sh --test server -- a_managed`): the same checks and summary over fewer tests,
# without the fuzzing.
set -uo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"

began=$(date -u +%FT%TZ)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export ISOBENCH_SKIP_LOG="$work/skips.tsv"
: >"$ISOBENCH_SKIP_LOG"

cargo_args=() harness_args=()
while [ $# -gt 0 ]; do
  if [ "$1" = -- ]; then
    shift
    harness_args=("$@")
    break
  fi
  cargo_args+=("$1")
  shift
done

status=0
python3 scripts/layers.py || status=1
# The test binaries cargo builds for this selection, isobench's own among them: one cargo run,
# so that the library's two builds (with and without its unit tests) share the cores, and no
# `cargo build`, which would build the library a third time (without the dev-dependencies,
# some crates' features differ).
# Every crate of the workspace's, unless a selection names its own.
build_args=("${cargo_args[@]}")
[ ${#build_args[@]} -gt 0 ] || build_args=(--workspace)
cargo test --profile ci --no-run --message-format=json-render-diagnostics "${build_args[@]}" >"$work/build.json" \
  || exit 1
[ -x target/ci/isobench ] || cargo build --profile ci || exit 1
target/ci/isobench server fetch cassandra || exit 1
# Network objects a run killed before the tests began left (its pid gone; `isobench cleanup`
# removes them): not the tests' leftovers, so the tests that count leftovers leave them out.
# Said here, as they are the machine's state, not a pass.
export ISOBENCH_TESTS_NETWORK_BEFORE="$work/network-before"
{
  ip netns list 2>/dev/null | awk '$1 ~ /^isobench-/ {print $1}' | while read -r ns; do
    pid=${ns#isobench-} && pid=${pid%%-*}
    [ -d "/proc/$pid" ] || echo "netns $ns"
  done
  ip -o link show 2>/dev/null | awk -F': ' '{sub(/@.*/, "", $2); print $2}' | grep -E '^ib[0-9a-f]+n[0-9a-f]+$' \
    | while read -r link; do
      pid=${link#ib} && pid=$((16#${pid%%n*}))
      [ -d "/proc/$pid" ] || echo "link $link"
    done
} >"$ISOBENCH_TESTS_NETWORK_BEFORE"
if [ -s "$ISOBENCH_TESTS_NETWORK_BEFORE" ]; then
  echo "make test: left by isobench runs killed before the tests began (\`isobench cleanup\` removes them;" \
    "the tests do not count them):"
  sed 's/^/  /' "$ISOBENCH_TESTS_NETWORK_BEFORE"
fi
python3 - "$work/build.json" >"$work/binaries" <<'EOF'
import json, sys
for line in open(sys.argv[1]):
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if m.get("reason") == "compiler-artifact" and m.get("profile", {}).get("test") and m.get("executable"):
        kind = m["target"]["kind"][0]
        print(f"{kind}\t{m['target']['src_path']}\t{m['executable']}")
EOF
# Each binary as cargo test runs it (from the package's root, two tests at a time), with the
# harness timing each test (`--report-time`, which stable's libtest gives under RUSTC_BOOTSTRAP):
# side by side in two lanes, as one lane leaves much of a core idle (its tests wait on JVMs,
# guests and timeouts), the longest first so that the lanes end together. Tests that call
# `alone()` (tests/common) run first, when nothing else runs. The fuzz targets' build and runs,
# which keep a core busy throughout, run at the lowest CPU priority (nice 19), so that they take
# only the cores the tests leave idle; their executions per second say what they got. They start
# beside the Kubernetes tests' alone job, the longest (8 min), whose pods wait on JVM starts,
# grace periods and timeouts with a core often idle, and which bounds no latency; it runs last of
# the alone jobs, so that the fuzzing goes on beside the lanes if it is not done by then. Not
# beside the other alone jobs: even niced, it took the Cassandra capacity search's p99 to
# 26-42 ms at 31-500 op/s (14 ms alone), failing it. Beside the k8s job runs one lane too, of
# the jobs that start no database ("light": unit tests, and test files that name none), which
# takes the core its pods leave idle; the database rings it once failed beside (a nodetool with
# no answer in 180 s) wait for the two lanes after it. Each job's output is shown whole when it ends.
durations=target/ci/test-durations.txt
[ -f "$durations" ] || durations=tests/durations.txt
python3 - "$work/binaries" "$durations" "${cargo_args[*]}" "${harness_args[*]}" >"$work/queue" <<'EOF2'
import re, sys
binaries, durations, selected, harness = sys.argv[1:5]
NICED_BESIDE = "k8s"  # the test file whose alone job the niced jobs may run beside (above), last
seconds = {}
for line in open(durations):
    words = line.split()
    if len(words) == 2 and not line.startswith("#"):
        seconds[words[1]] = float(words[0])
# A test file that names a database starts one (a JVM, a ring, a PostgreSQL); unit tests start none.
DATABASE = re.compile(r"cassandra|postgres|mariadb|redis|\[\[server\]\]", re.I)
jobs = []  # (where it runs, -expected seconds, name, source, executable, harness arguments, light)
for line in open(binaries):
    kind, src, exe = line.rstrip("\n").split("\t")
    name = src.split("/")[-1].removesuffix(".rs")
    # A crate of crates/ names its binaries apart from isobench's own (each has a lib.rs).
    if m := re.search(r"/crates/([^/]+)/", src):
        name = f"{m.group(1)}-{name}"
    # A test is alone if its body (up to the next #[test]) calls alone().
    alone = [] if harness or kind != "test" else [
        m.group(1) for chunk in open(src).read().split("#[test]")[1:]
        if "alone()" in chunk and (m := re.search(r"fn (\w+)", chunk))
    ]
    if alone:
        where = "alone+niced" if name == NICED_BESIDE else "alone"
        jobs.append((where, 0, f"{name}-alone", src, exe, "--exact " + " ".join(alone), "0"))
    skips = ("--exact " + " ".join(f"--skip {t}" for t in alone)) if alone else ""
    light = kind == "lib" or not DATABASE.search(open(src).read())
    jobs.append(("lane", -seconds.get(name, 60), name, src, exe, skips, "1" if light else "0"))
if not (selected or harness):
    jobs.append(("niced", 0, "fuzz", "scripts/fuzz.sh", "-", "", "0"))
for where, _, name, src, exe, args, light in sorted(jobs):
    # The arguments last: an empty field between tabs would vanish in the shell's `read`.
    print("\t".join([where, name, src, exe, light, args]))
EOF2
run_job() { # name src exe args: runs one job into its log, shows it and keeps its time
  local name=$1 src=$2 exe=$3 log=$work/log.$1 start=$SECONDS rc args
  read -ra args <<<"$4"
  if [ "$exe" = - ]; then
    scripts/fuzz.sh --quick 3 >"$log" 2>&1
    rc=$?
  else
    { echo; echo "     Running ${src#"$PWD"/} ($exe)"; } >"$log"
    # From its package's root, as cargo test runs it.
    (cd "${src%/*/*}" &&
      RUSTC_BOOTSTRAP=1 "$exe" --test-threads=2 -Z unstable-options --report-time "${args[@]}" "${harness_args[@]}") \
      >>"$log" 2>&1
    rc=$?
    sed -i -E "s|^test (.+ \.\.\. )|test ${name%-alone}::\1|" "$log"
  fi
  (
    flock 9
    cat "$log"
    cat "$log" >>"$work/tests.log"
    echo "$((SECONDS - start)) $name" >>"$work/durations"
    echo "$start $SECONDS $name" >>"$work/timeline"
    [ "$rc" -eq 0 ] || echo "$name" >>"$work/failed"
  ) 9>"$work/show.lock"
}
# A lane takes the longest job left; while "$work/beside-k8s" exists, only a light one.
lane() {
  local job name src exe args
  while :; do
    job=$( (
      flock 9
      only_light=0
      [ ! -e "$work/beside-k8s" ] || only_light=1
      n=$(awk -F'\t' -v only="$only_light" '!only || $4 == 1 {print NR; exit}' "$work/lane")
      [ -z "$n" ] || { sed -n "${n}p" "$work/lane"; sed -i "${n}d" "$work/lane"; }
    ) 9>"$work/queue.lock")
    if [ -z "$job" ]; then
      # Heavy jobs wait for the k8s job's end; then this lane takes them.
      [ -e "$work/beside-k8s" ] && [ -s "$work/lane" ] || return 0
      sleep 1
      continue
    fi
    IFS=$'\t' read -r name src exe _ args <<<"$job"
    run_job "$name" "$src" "$exe" "$args"
  done
}
: >"$work/tests.log" && : >"$work/durations" && : >"$work/timeline" && : >"$work/failed"
grep -P '^lane\t' "$work/queue" | cut -f2- >"$work/lane"
niced_started=
start_niced() {
  [ -z "$niced_started" ] || return 0
  niced_started=1
  local name src exe args
  while IFS=$'\t' read -r _ name src exe _ args; do
    (renice -n 19 "$BASHPID" >/dev/null && run_job "$name" "$src" "$exe" "$args") &
  done < <(grep -P '^niced\t' "$work/queue")
}
beside_lane=
while IFS=$'\t' read -r where name src exe _ args; do
  if [ "$where" = alone+niced ]; then
    start_niced
    : >"$work/beside-k8s"
    lane &
    beside_lane=1
  fi
  run_job "$name" "$src" "$exe" "$args"
  rm -f "$work/beside-k8s"
done < <(grep -P '^alone' "$work/queue")
start_niced
[ -n "$beside_lane" ] || lane &
lane
wait
[ -s "$work/failed" ] && status=1
if [ -z "${cargo_args[*]}${harness_args[*]}" ]; then
  sort -rn "$work/durations" >target/ci/test-durations.txt
  # When each job began and ended, in seconds from this script's start (the build before the
  # first), which the first line gives by the clock that runs' records keep.
  { echo "# seconds from $began"; sort -n "$work/timeline"; } >target/ci/test-timeline.txt
fi

python3 - "$work/tests.log" "$ISOBENCH_SKIP_LOG" tests/capabilities.txt "${CI:-}" "$work" <<'EOF' || status=1
import re, sys
from collections import defaultdict

log, skips, capabilities, ci, work = sys.argv[1:6]
passed = failed = 0
times = []
for line in open(log, errors="replace"):
    m = re.search(r"test result: \w+\. (\d+) passed; (\d+) failed", line)
    if m:
        passed += int(m.group(1))
        failed += int(m.group(2))
    t = re.match(r"test (\S+) \.\.\. (\w+) <([\d.]+)s>", line)
    if t:
        times.append((float(t.group(3)), t.group(1), t.group(2)))
required, known = set(), set()
for line in open(capabilities):
    words = line.split()
    if words and not line.startswith("#"):
        known.add(words[0])
        if words[1] == "yes":
            required.add(words[0])
tests, parts = {}, []
for line in open(skips, errors="replace"):
    kind, name, capability, why = (line.rstrip("\n").split("\t") + ["", "", "", ""])[:4]
    if kind == "test":
        tests[name] = (capability, why)
    elif kind == "part":
        parts.append((name, capability, why))
skipped = len(tests)
print()
if times:
    print("the slowest tests:")
    for seconds, name, outcome in sorted(times, reverse=True)[:10]:
        print(f"  {seconds:7.1f} s  {name}" + ("" if outcome == "ok" else f" ({outcome})"))
# A job that failed with no failed test (the fuzzing found a crash; a test binary died) is one
# failure more, named, so that the summary never says 0 failed of a failed run.
for job in open(f"{work}/failed").read().split():
    if "test result: FAILED" not in open(f"{work}/log.{job}", errors="replace").read():
        failed += 1
        print(f"{job}: failed outside any test (its output is above)")
print(f"summary: {passed - skipped} passed, {failed} failed, {skipped} skipped")
if parts:
    print(f"  and {len(parts)} parts of tests skipped")
by_reason = defaultdict(list)
for name, (capability, why) in sorted(tests.items()):
    by_reason[(capability, why)].append(name)
for name, capability, why in parts:
    by_reason[(capability, why)].append(name + " (part)")
for (capability, why), names in sorted(by_reason.items()):
    mark = "required here" if capability in required else "not required here" if capability in known else "unknown capability"
    print(f"  skipped for want of {capability} ({mark}): {why}")
    for name in names:
        print(f"    {name}")
unknown = sorted({c for c, _ in by_reason} - known)
if unknown:
    print(f"make test: tests/capabilities.txt does not list {', '.join(unknown)}: add each, required or not")
    sys.exit(1)
lacking = sorted({c for c, _ in by_reason if c in required})
if ci == "true" and lacking:
    names = sorted({n for (c, _), ns in by_reason.items() if c in lacking for n in ns})
    print(f"make test: CI=true and this machine kind must have {', '.join(lacking)}: skipped {', '.join(names)}")
    sys.exit(1)
EOF
exit $status
