#!/usr/bin/env bash
# `make test` after setup: the layering check, the build, every test binary (each test timed),
# the fuzz targets briefly, then one summary: passed, failed and skipped (a test that skipped
# all it checks is not "passed"), the skipped tests and parts grouped by the capability they
# lacked, and the ten slowest tests. With CI=true (CI sets it), a skip of a capability
# tests/capabilities.txt marks required on this machine kind fails the run, naming the tests.
# Arguments select the tests as cargo test's do, harness arguments after `--`
# (`scripts/test.sh --test server -- a_managed`): the same checks and summary over fewer tests.
set -uo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"

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
cargo build --profile ci || exit 1
target/ci/isobench server fetch cassandra || exit 1
# The test binaries cargo builds for this selection, in cargo's order (the library's first).
cargo test --profile ci --no-run --message-format=json "${cargo_args[@]}" >"$work/build.json" || exit 1
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
# harness timing each test (`--report-time`, which stable's libtest gives under RUSTC_BOOTSTRAP).
while IFS=$'\t' read -r kind src exe; do
  echo
  echo "     Running ${src#"$PWD"/} ($exe)"
  RUSTC_BOOTSTRAP=1 "$exe" --test-threads=2 -Z unstable-options --report-time "${harness_args[@]}" 2>&1 \
    | sed -u -E "s|^test (.+ \.\.\. )|test $(basename "$src" .rs)::\1|" | tee -a "$work/tests.log"
  [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
done <"$work/binaries"
scripts/fuzz.sh --quick 10 || status=1

python3 - "$work/tests.log" "$ISOBENCH_SKIP_LOG" tests/capabilities.txt "${CI:-}" <<'EOF' || status=1
import re, sys
from collections import defaultdict

log, skips, capabilities, ci = sys.argv[1:5]
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
