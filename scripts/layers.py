#!/usr/bin/env python3
"""`make layers`: each crate's dependencies point one way, down its list of layers.

Each top-level module of a crate may name (`crate::x`, or `super::x` from a file at the top,
outside `#[cfg(test)]` items) only modules listed before it. The lists are the architecture:
docs/architecture.md draws them, and a new kind is one file under its kind's folder, which changes
nothing here. The crates themselves depend one way too (figures ← cql-stress ← isobench), which
cargo enforces.

No module is named from below, the registry included: the ledger is handed the kinds' release
(`kinds::register`) rather than naming it. DEBT holds back-edges a crate still has; the check
fails on any other, and on a DEBT entry that no longer exists, so the list only shrinks. No file
is over MAX_LINES, no function over MAX_FN_LINES, in any crate.
"""
import os
import re
import sys

# Each crate's source folder and its layers, bottom first.
CRATES = {
    "src": [
        ("system", ["sys", "secrets", "facts", "proof"]),
        ("model", ["store", "syntax", "ledger", "compare", "report", "history"]),
        ("kinds", ["net", "volume", "workload", "server", "agent", "env"]),
        ("registry", ["kinds"]),
        ("assembly", ["suite", "plan"]),
        ("orchestration", ["runner", "doctor", "result_sets", "cli"]),
    ],
    "crates/cql/src": [
        ("base", ["random", "dist", "data", "consistency", "vars", "process", "metrics", "capacity", "tls"]),
        ("grammar", ["profile", "settings"]),
        ("driver", ["schema", "failover"]),
        ("load", ["users", "engine", "output", "hdrlog", "graph", "loaders", "stress"]),
    ],
    "crates/figures/src": [
        ("figures", ["units", "stats", "chart"]),
    ],
}

# (crate folder, from, to): why the back-edge is still there.
DEBT = {}

MAX_LINES = 800
MAX_FN_LINES = 100
FN = re.compile(r"^[ \t]*(?:pub(?:\([^)]*\))?\s+)?(?:const\s+)?(?:async\s+)?(?:unsafe\s+)?fn\s+(\w+)", re.M)


# A comment, a string (raw or not) or a char literal, left to right: what they hold is no code,
# and a brace in one must not unbalance the search for a test module's end.
LITERAL_OR_COMMENT = re.compile(
    r"""//[^\n]*|/\*.*?\*/|b?r(#*)".*?"\1|b?"(?:\\.|[^"\\])*"|'(?:\\.|[^\\'\n])'""", re.S
)


def code_only(text):
    """The text with comments gone and every string and char literal emptied."""
    return LITERAL_OR_COMMENT.sub(lambda m: "" if m.group(0).startswith("/") else '""', text)


def closing_brace(text, brace):
    """The index of the `}` that closes the `{` at `brace` (the text's end if none does)."""
    depth = 0
    for p in range(brace, len(text)):
        depth += {"{": 1, "}": -1}.get(text[p], 0)
        if depth == 0:
            return p
    return len(text)


def long_functions(code):
    """(name, lines) of each function in the code (comments gone) longer than MAX_FN_LINES."""
    found = []
    for m in FN.finditer(code):
        brace, semi = code.find("{", m.end()), code.find(";", m.end())
        if brace < 0 or 0 <= semi < brace and ")" in code[m.end() : semi]:
            continue  # a declaration without a body
        lines = code[m.start() : closing_brace(code, brace)].count("\n") + 1
        if lines > MAX_FN_LINES:
            found.append((m.group(1), lines))
    return found


def without_tests(text):
    """The text without `#[cfg(test)]` items (a module, a function, a `use`)."""
    out, i = [], 0
    while (j := text.find("#[cfg(test)]", i)) >= 0:
        out.append(text[i:j])
        semi, brace = text.find(";", j), text.find("{", j)
        if brace < 0 or 0 <= semi < brace:
            i = semi + 1
            continue
        i = closing_brace(text, brace) + 1
    return "".join(out) + text[i:]


def named_modules(text):
    """Top-level modules a file names: crate::x and each x of crate::{x, y::z}."""
    names = set()
    for m in re.finditer(r"crate::(\{|\w+)", text):
        if m.group(1) != "{":
            names.add(m.group(1))
            continue
        inner, depth, part = text[m.end(1) : closing_brace(text, m.start(1))], 0, ""
        for ch in inner + ",":
            depth += {"{": 1, "}": -1}.get(ch, 0)
            if ch == "," and depth == 0:
                if w := re.match(r"\s*(\w+)", part):
                    names.add(w.group(1))
                part = ""
            else:
                part += ch
    return names


def names_from_the_top(code):
    """Top-level modules a top-level file names through `super::x` (its crate's root)."""
    names = set(re.findall(r"\bsuper::(\w+)", code))
    for m in re.finditer(r"\bsuper::\{([^}]*)\}", code):
        names |= {w.strip().split("::")[0] for w in m.group(1).split(",") if w.strip()}
    return names - {"super"}


def check_crate(repo, folder, layers, problems):
    """Appends what is wrong in one crate to `problems`; returns its module count."""
    src = os.path.join(repo, folder)
    order = [module for _, modules in layers for module in modules]
    rank = {module: i for i, module in enumerate(order)}
    layer_of = {module: layer for layer, modules in layers for module in modules}
    edges, seen = {}, set()
    for root, _, files in os.walk(src):
        for name in sorted(files):
            if not name.endswith(".rs"):
                continue
            path = os.path.join(root, name)
            rel = os.path.join(folder, os.path.relpath(path, src))
            text = open(path, encoding="utf-8").read()
            lines = text.count("\n")
            if lines > MAX_LINES:
                problems.append(f"{rel} has {lines} lines (at most {MAX_LINES}): split it by concern")
            for function, length in long_functions(code_only(text)):
                problems.append(f"{rel}: fn {function} has {length} lines (at most {MAX_FN_LINES}): give its steps names")
            inner = os.path.relpath(path, src)
            top = inner.split(os.sep)[0].removesuffix(".rs")
            if top in ("lib", "main"):
                continue
            seen.add(top)
            if top not in rank:
                problems.append(f"{rel}: module {top} is in no layer: add it to CRATES in {sys.argv[0]}")
                continue
            code = without_tests(code_only(text))
            named = named_modules(code) | (names_from_the_top(code) if os.sep not in inner else set())
            for target in named - {top, "self"}:
                if target in rank and rank[target] > rank[top]:
                    edges.setdefault((top, target), []).append(rel)
    for (lower, higher), files in sorted(edges.items()):
        if (folder, lower, higher) not in DEBT:
            problems.append(
                f"{lower} ({layer_of[lower]}) names {higher} ({layer_of[higher]}), which sits above it, in "
                f"{', '.join(sorted(set(files)))}: move what both need below {lower}, or reach the kind "
                "through a trait the lower module defines"
            )
    for debt in sorted(d for d in DEBT if d[0] == folder and (d[1], d[2]) not in edges):
        problems.append(f"{debt[1]} no longer names {debt[2]}: remove the entry from DEBT in {sys.argv[0]}")
    for module in sorted(set(rank) - seen):
        problems.append(f"module {module} of {folder}'s layers is not there: remove it")
    return len(order)


def main(repo):
    problems = []
    modules = sum(check_crate(repo, folder, layers, problems) for folder, layers in CRATES.items())
    for problem in problems:
        print(f"layers: {problem}", file=sys.stderr)
    if problems:
        return 1
    debt = f"; {len(DEBT)} known back-edges left" if DEBT else ""
    print(f"layers: {modules} modules in {len(CRATES)} crates, each one direction{debt}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")))
