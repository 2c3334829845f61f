#!/usr/bin/env python3
"""How often a suite's precision goal is met within its budget, from result sets it left.

Each comparison (a cell against the baseline cell of its block, paired by round, on its first
headline metric) gives per result set the sd of its log ratio and its ratio; each block the
seconds its cells' runs took. The runner's rule is then played over blocks of normal noise
drawn with those sds: the suite's `repeat` rounds, then rounds to the comparisons still wider
than the goal, those furthest from it per second of runs first, while they fit the budget.
Prints per budget how often every comparison met the goal, two result sets in a row did, and
each comparison did.

  bench/precision-odds.py SET...                     the budget of the sets' suite
  BUDGETS="180 240 300" bench/precision-odds.py SET...
"""
import glob
import json
import math
import os
import random
import statistics
import sys

T975 = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160]


def t975(df):
    return T975[df - 1] if df <= len(T975) else 1.96 + 2.4 / df


def half_width(logs, ratio):
    """The 95 % CI's half-width in points of a difference whose log ratios are `logs`."""
    n = len(logs)
    q = t975(n - 1) * statistics.stdev(logs) / math.sqrt(n)
    mean = statistics.fmean(logs)
    return 100 * ratio * (math.exp(mean + q) - math.exp(mean - q)) / 2


def headline_value(run, metrics):
    values = {s["metric"]: s["value"] for s in run["samples"]}
    return next((values[m] for m in metrics if m in values), None)


def read_set(path):
    plan = json.load(open(os.path.join(path, "plan.json")))
    cells = {c["cell"]: c for c in plan["cells"]}
    base = plan["baseline"]
    runs = {}
    for f in glob.glob(os.path.join(path, "runs", "*", "*.json")):
        run = json.load(open(f))
        if run["status"] == "ok":
            runs.setdefault(run["cell"], {})[run["block"]["round"]] = run
    baselines = {
        c["workload"]: name
        for name, c in cells.items()
        if all(c.get(k) == v for k, v in base.items())
    }
    comparisons = {}
    for name, cell in cells.items():
        baseline = baselines.get(cell["workload"])
        if baseline in (None, name):
            continue
        logs, seconds = [], []
        for rnd, run in runs.get(name, {}).items():
            other = runs.get(baseline, {}).get(rnd)
            a, b = headline_value(run, cell["headline"]), other and headline_value(other, cell["headline"])
            if a and b:
                logs.append(math.log(a / b))
                seconds.append(run["seconds"])
        if len(logs) >= 3:
            comparisons[name] = (statistics.stdev(logs), math.exp(statistics.fmean(logs)), statistics.fmean(seconds))
    base_seconds = {
        w: statistics.fmean(r["seconds"] for r in runs.get(b, {}).values()) for w, b in baselines.items() if runs.get(b)
    }
    return plan, cells, comparisons, base_seconds


def main():
    sets = [read_set(p) for p in sys.argv[1:]]
    if not sets:
        sys.exit(__doc__)
    plan, cells = sets[0][0], sets[0][1]
    goal, rounds = plan["precision"]["half_width"], plan["repeat"]["min"]
    budgets = [float(b) for b in os.environ.get("BUDGETS", str(plan["precision"]["budget_s"])).split()]
    names = sorted({n for s in sets for n in s[2]})
    sds = {n: [s[2][n][0] for s in sets if n in s[2]] for n in names}
    ratio = {n: statistics.median(s[2][n][1] for s in sets if n in s[2]) for n in names}
    own = {n: statistics.median(s[2][n][2] for s in sets if n in s[2]) for n in names}
    workload = {n: cells[n]["workload"] for n in names}
    base = {w: statistics.median(s[3][w] for s in sets if w in s[3]) for w in set(workload.values())}

    def cost(n, taken):
        shared = any(workload[t] == workload[n] for t in taken)
        return own[n] + (0 if shared else base[workload[n]])

    def one_set(budget, rng):
        sd = {n: rng.choice(sds[n]) for n in names}
        logs = {n: [rng.gauss(0, sd[n]) for _ in range(rounds)] for n in names}
        spent = sum(own.values()) * rounds + sum(base.values()) * rounds
        while True:
            width = {n: half_width(logs[n], ratio[n]) for n in names}
            wide = sorted((n for n in names if width[n] > goal), key=lambda n: -(width[n] - goal) / cost(n, []))
            taken, more = [], 0.0
            for n in wide:
                if spent + more + cost(n, taken) <= budget:
                    more += cost(n, taken)
                    taken.append(n)
            if not taken:
                return {n: width[n] <= goal for n in names}
            for n in taken:
                logs[n].append(rng.gauss(0, sd[n]))
            spent += more

    print(f"{len(sets)} result sets; goal ±{goal:g} points, {rounds} rounds first; per comparison its sds and seconds a round:")
    for n in names:
        print(f"  {n}: ratio {ratio[n]:.3f}, sd {min(sds[n]):.3f}-{max(sds[n]):.3f}, {own[n] + base[workload[n]]:.1f} s")
    trials = int(os.environ.get("TRIALS", "4000"))
    for budget in budgets:
        rng = random.Random(1)
        met = [one_set(budget, rng) for _ in range(trials)]
        every = sum(all(m.values()) for m in met) / trials
        each = ", ".join(f"{n} {sum(m[n] for m in met) / trials:.0%}" for n in names)
        print(f"budget {budget:.0f} s: every comparison {every:.0%}, two sets in a row {every * every:.0%} ({each})")


main()
