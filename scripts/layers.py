#!/usr/bin/env python3
"""`make layers`: the crate's dependencies point one way, down this list.

Each top-level module of src/ may name (`crate::x`, outside `#[cfg(test)]` items) only modules
listed before it. The list is the architecture: docs/architecture.md draws it, and a new kind is
one file under its kind's folder, which changes nothing here.

Only the registry (REGISTRY) may be named from below: the one cycle is through it. DEBT holds
back-edges the crate still has; the check fails on any other, and on a DEBT entry that no longer
exists, so the list only shrinks. LONG_FILES likewise for files over MAX_LINES.
"""
import os
import re
import sys

LAYERS = [
    ("system", ["sys", "units", "stats", "secrets", "facts", "proof", "chart", "capacity"]),
    ("libraries", ["cql"]),
    ("model", ["store", "syntax", "ledger", "compare", "report", "history"]),
    ("kinds", ["net", "volume", "workload", "server", "agent", "env"]),
    ("registry", ["kinds"]),
    ("assembly", ["suite", "plan"]),
    ("orchestration", ["runner", "doctor", "result_sets", "cli"]),
]

# The one module every layer may name: the ledger hands what a kind made back to its kind there.
REGISTRY = "kinds"

# (from, to): why the back-edge is still there.
DEBT = {}

MAX_LINES = 900
LONG_FILES = {}


def without_tests(text):
    """The text without `#[cfg(test)]` items (a module, a function, a `use`)."""
    out, i = [], 0
    while (j := text.find("#[cfg(test)]", i)) >= 0:
        out.append(text[i:j])
        semi, brace = text.find(";", j), text.find("{", j)
        if brace < 0 or 0 <= semi < brace:
            i = semi + 1
            continue
        depth = 0
        for p in range(brace, len(text)):
            depth += {"{": 1, "}": -1}.get(text[p], 0)
            if depth == 0:
                break
        i = p + 1
    return "".join(out) + text[i:]


def named_modules(text):
    """Top-level modules a file names: crate::x and each x of crate::{x, y::z}."""
    names = set()
    for m in re.finditer(r"crate::(\{|\w+)", text):
        if m.group(1) != "{":
            names.add(m.group(1))
            continue
        depth, start = 0, m.end(1)
        for p in range(m.start(1), len(text)):
            depth += {"{": 1, "}": -1}.get(text[p], 0)
            if depth == 0:
                break
        inner, depth, part = text[start:p], 0, ""
        for ch in inner + ",":
            depth += {"{": 1, "}": -1}.get(ch, 0)
            if ch == "," and depth == 0:
                if w := re.match(r"\s*(\w+)", part):
                    names.add(w.group(1))
                part = ""
            else:
                part += ch
    return names


def main(src):
    order = [module for _, modules in LAYERS for module in modules]
    rank = {module: i for i, module in enumerate(order)}
    layer_of = {module: layer for layer, modules in LAYERS for module in modules}
    problems, edges, seen = [], {}, set()
    for root, _, files in os.walk(src):
        for name in sorted(files):
            if not name.endswith(".rs"):
                continue
            path = os.path.join(root, name)
            rel = os.path.relpath(path, src)
            text = open(path, encoding="utf-8").read()
            lines = text.count("\n")
            if lines > MAX_LINES and rel not in LONG_FILES:
                problems.append(f"src/{rel} has {lines} lines (at most {MAX_LINES}): split it by concern")
            top = rel.split(os.sep)[0].removesuffix(".rs")
            if top in ("lib", "main"):
                continue
            seen.add(top)
            if top not in rank:
                problems.append(f"src/{rel}: module {top} is in no layer: add it to LAYERS in {sys.argv[0]}")
                continue
            code = without_tests(re.sub(r"//[^\n]*", "", text))
            for target in named_modules(code) - {top, "self", REGISTRY}:
                if target in rank and rank[target] > rank[top]:
                    edges.setdefault((top, target), []).append(f"src/{rel}")
    for (lower, higher), files in sorted(edges.items()):
        if (lower, higher) not in DEBT:
            problems.append(
                f"{lower} ({layer_of[lower]}) names {higher} ({layer_of[higher]}), which sits above it, in "
                f"{', '.join(sorted(set(files)))}: move what both need below {lower}, or reach the kind "
                "through a trait the lower module defines"
            )
    for edge in sorted(set(DEBT) - set(edges)):
        problems.append(f"{edge[0]} no longer names {edge[1]}: remove the entry from DEBT in {sys.argv[0]}")
    for rel in sorted(LONG_FILES):
        path = os.path.join(src, rel)
        if not os.path.exists(path) or open(path, encoding="utf-8").read().count("\n") <= MAX_LINES:
            problems.append(f"src/{rel} is no longer over {MAX_LINES} lines: remove it from LONG_FILES")
    for module in sorted(set(rank) - seen):
        problems.append(f"module {module} of LAYERS is not in src/: remove it")
    for problem in problems:
        print(f"layers: {problem}", file=sys.stderr)
    if problems:
        return 1
    debt = f"; {len(DEBT)} known back-edges left" if DEBT else ""
    print(f"layers: {len(order)} modules in {len(LAYERS)} layers, one direction{debt}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "src")))
