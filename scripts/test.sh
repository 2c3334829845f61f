#!/usr/bin/env bash
# `make test` after setup: the layering check, the build, every test, the fuzz targets briefly,
# then one summary: passed, failed and skipped (a test that skipped all it checks is not
# "passed"), the skipped tests and parts grouped by the capability they lacked. With CI=true (CI
# sets it), a skip of a capability tests/capabilities.txt marks required on this machine kind
# fails the run, naming the tests. cargo's own lines, its closing ones included, pass through
# untouched. Arguments select the tests as cargo test's do (`scripts/test.sh --test server`): the
# same checks and summary over fewer tests.
set -uo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export ISOBENCH_SKIP_LOG="$work/skips.tsv"
: >"$ISOBENCH_SKIP_LOG"

status=0
python3 scripts/layers.py || status=1
cargo build --profile ci || exit 1
target/ci/isobench server fetch cassandra || exit 1
cargo test --profile ci --no-fail-fast "$@" -- --test-threads=2 2>&1 | tee "$work/cargo.log"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1
scripts/fuzz.sh --quick 10 || status=1

python3 - "$work/cargo.log" "$ISOBENCH_SKIP_LOG" tests/capabilities.txt "${CI:-}" <<'EOF' || status=1
import re, sys
from collections import defaultdict

log, skips, capabilities, ci = sys.argv[1:5]
passed = failed = 0
for line in open(log, errors="replace"):
    m = re.search(r"test result: \w+\. (\d+) passed; (\d+) failed", line)
    if m:
        passed += int(m.group(1))
        failed += int(m.group(2))
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
print(f"make test: {passed - skipped} passed, {failed} failed, {skipped} skipped"
      + (f", {len(parts)} parts of tests skipped" if parts else ""))
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
