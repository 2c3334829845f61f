//! The 95 % intervals are honest: result sets drawn with a known truth, compared as any result
//! set's cells are (`compare::diff`, after one whole `compare::analyze` per row), cover the
//! truth 95 % of the time, at every number of rounds a CI is reported for, with the runs paired
//! by block or not, on independent noise and on noise a round's runs share, and with slices
//! interleaved within blocks through a drifting level.
//! `cargo test --test statistics -- --nocapture` prints the table docs/statistics.md carries.

use figures::stats::{self, Rng};
use isobench::compare::{self, MetricResult, Verdict};
use isobench::store::{Baseline, BlockId, CellRecord, Labels, Order, PlanRecord, Repeat, RunRecord, Sample};

/// Trials per row: the coverage's standard error is then 0.34 points, so 93 % and 95 % are
/// six standard errors apart.
const TRIALS: usize = 4000;
/// What both sides measure, in op/s: the baseline's true typical value.
const TRUTH: f64 = 1000.0;
/// Run-to-run noise (σ of the logarithm: about 10 % CV), and the part a round's runs share.
const RUN_NOISE: f64 = 0.10;
const ROUND_NOISE: f64 = 0.10;

fn labels(env: &str) -> Labels {
    Labels { env: env.into(), volume: "disk".into(), workload: "fio".into(), params: vec![] }
}

fn plan() -> PlanRecord {
    PlanRecord {
        suite: "simulated".into(),
        baseline: Baseline { env: Some("base".into()), volume: None, workloads: Default::default() },
        repeat: Repeat::fixed(3),
        cells: ["base", "cell"].iter().map(|env| CellRecord::new(labels(env), "host", false, &["iops"])).collect(),
        bounds: vec![],
        order: Order::Shuffled,
        seed: Some(1),
        precision: None,
        rounds: vec![],
    }
}

#[derive(Clone, Copy)]
struct Row {
    rounds: u32,
    /// The cell's true difference from the baseline, in percent.
    truth_pct: f64,
    shared: bool,
    paired: bool,
}

#[derive(Default)]
struct Seen {
    diff_covered: usize,
    cell_covered: usize,
    verdicts: usize,
    widths: Vec<f64>,
}

/// One result set: `rounds` blocks, each a run of the baseline and of the cell, log-normal noise
/// per run and, where `shared`, per round too.
fn result_set(row: Row, rng: &mut Rng) -> Vec<RunRecord> {
    let mut runs = Vec::new();
    for round in 1..=row.rounds {
        let shared = if row.shared { ROUND_NOISE * rng.normal() } else { 0.0 };
        for (env, truth) in [("base", TRUTH), ("cell", TRUTH * (1.0 + row.truth_pct / 100.0))] {
            let value = truth * (shared + RUN_NOISE * rng.normal()).exp();
            let block = row.paired.then(|| BlockId { round, block: 1, session: "sim".into() });
            runs.push(RunRecord {
                samples: vec![Sample::new("iops", value, "op/s")],
                block,
                ..RunRecord::new(labels(env), round)
            });
        }
    }
    runs
}

/// A side's runs as the analysis holds them.
fn metric(runs: &[RunRecord], env: &str) -> MetricResult {
    let mine: Vec<&RunRecord> = runs.iter().filter(|r| r.labels.env == env).collect();
    let values: Vec<f64> = mine.iter().map(|r| r.samples[0].value).collect();
    MetricResult {
        metric: "iops".into(),
        unit: "op/s".into(),
        blocks: mine.iter().map(|r| r.block.clone()).collect(),
        summary: stats::summarize(&values).unwrap(),
        values,
        vs_baseline: None,
    }
}

fn simulate(row: Row, seed: u64) -> Seen {
    let mut rng = Rng::new(seed);
    let mut seen = Seen::default();
    let cell_truth = TRUTH * (1.0 + row.truth_pct / 100.0);
    // The whole analysis once: the runs' blocks reach the comparison and decide its method.
    let analysis = compare::analyze(&plan(), &result_set(row, &mut rng));
    let whole = analysis.cells[1].metric("iops").unwrap().vs_baseline.clone().unwrap();
    assert_eq!(whole.pairing.name(), if row.paired { "paired" } else { "unpaired" });
    for _ in 0..TRIALS {
        let runs = result_set(row, &mut rng);
        let m = metric(&runs, "cell");
        let d = compare::diff(&m, &metric(&runs, "base")).unwrap();
        assert_eq!(d.pairing, whole.pairing);
        let (lo, hi) = d.ci.expect("two runs a side or more give a CI");
        seen.diff_covered += usize::from(lo <= row.truth_pct && row.truth_pct <= hi);
        let (clo, chi) = m.summary.ci.unwrap();
        seen.cell_covered += usize::from(clo <= cell_truth && cell_truth <= chi);
        seen.verdicts += usize::from(matches!(d.verdict, Verdict::Faster | Verdict::Slower));
        seen.widths.push(d.half_width());
    }
    seen
}

#[test]
fn every_95_percent_interval_covers_the_truth_95_percent_of_the_time() {
    let mut table = String::from(
        "| rounds | truth | noise | method | difference's CI covers | cell's CI covers | called a difference (A/A: falsely) | median ± half-width |\n|---|---|---|---|---|---|---|---|\n",
    );
    let mut failures = Vec::new();
    let mut seed = 1;
    for rounds in [2, 3, 5, 10] {
        for truth_pct in [0.0, -10.0] {
            for shared in [false, true] {
                for paired in [true, false] {
                    seed += 1;
                    let row = Row { rounds, truth_pct, shared, paired };
                    let mut seen = simulate(row, seed);
                    let rate = |n: usize| n as f64 / TRIALS as f64;
                    let (diff, cell) = (rate(seen.diff_covered), rate(seen.cell_covered));
                    seen.widths.sort_by(f64::total_cmp);
                    let half = seen.widths[TRIALS / 2];
                    let noise = if shared { "shared by the round" } else { "independent" };
                    let method = if paired { "paired" } else { "unpaired" };
                    let verdicts = if rounds < 3 {
                        "— (no verdict below 3 runs)".to_string()
                    } else {
                        format!("{:.1} %", rate(seen.verdicts) * 100.0)
                    };
                    table.push_str(&format!(
                        "| {rounds} | {} | {noise} | {method} | {:.1} % | {:.1} % | {verdicts} | ±{half:.1} points |\n",
                        if truth_pct == 0.0 { "A/A".into() } else { format!("{truth_pct:+.0} %") },
                        diff * 100.0,
                        cell * 100.0,
                    ));
                    // Exact under this noise, up to the simulation's own error (3 standard
                    // errors). Unpaired may err on the wide side only: Welch's degrees of freedom
                    // are few at few runs, and a round's shared part cancels in the difference
                    // but not in the two sides' spreads.
                    let conservative = !paired;
                    let honest = |c: f64| c >= 0.94 && (conservative || c <= 0.96);
                    if !honest(diff) || !(0.94..=0.96).contains(&cell) {
                        failures.push(format!(
                            "{rounds} rounds, truth {truth_pct} %, {noise}, {method}: difference {diff:.3}, cell {cell:.3}"
                        ));
                    }
                }
            }
        }
    }
    eprintln!("{table}");
    assert!(failures.is_empty(), "intervals that are not 95 %: {failures:#?}\n{table}");
}

/// Pairing is what makes a verdict sharp where the machine's moment moves both sides: with noise
/// shared by the round, the paired interval is narrower than the unpaired one of the same runs.
#[test]
fn pairing_by_round_narrows_the_interval_where_the_round_moves_both_sides() {
    let row = |paired| Row { rounds: 5, truth_pct: -10.0, shared: true, paired };
    let (mut paired, mut unpaired) = (simulate(row(true), 99), simulate(row(false), 99));
    for seen in [&mut paired, &mut unpaired] {
        seen.widths.sort_by(f64::total_cmp);
    }
    let (p, u) = (paired.widths[TRIALS / 2], unpaired.widths[TRIALS / 2]);
    assert!(p < 0.8 * u, "paired ±{p:.1} against unpaired ±{u:.1}");
    assert!(paired.verdicts > unpaired.verdicts, "a planted -10 % is found more often paired");
}

/// The interleaved design (a workload's `slice`): in each block the two sides stay up and run
/// `SLICES` short slices each, alternating in a random order per cycle, through a level that
/// drifts slowly (the disk's seconds) and noise per slice, per (block, side) and per block.
/// Each run's figure is its slices' geometric mean, as the agent reports it, and the blocks pair
/// as any blocks do: the interval is one over blocks, so the slices' nesting is in it.
mod interleaved {
    use super::*;

    pub const SLICES: usize = 6;
    /// σ of the logarithm: the drift's step per slice (a random walk, so that it moves over
    /// seconds), each slice's own noise, and what a block gives each side (its sandbox's start,
    /// where its file landed) and both (the volume made for the block).
    const DRIFT_STEP: f64 = 0.04;
    const SLICE_NOISE: f64 = 0.05;
    const SIDE_NOISE: f64 = 0.02;
    const BLOCK_NOISE: f64 = 0.10;

    /// One result set of `rounds` blocks: the runs' figures, interleaved or (not) the baseline's
    /// slices all before the cell's.
    pub fn result_set(rounds: u32, truth_pct: f64, interleave: bool, rng: &mut Rng) -> Vec<RunRecord> {
        let mut runs = Vec::new();
        for round in 1..=rounds {
            let block = BLOCK_NOISE * rng.normal();
            let side = [SIDE_NOISE * rng.normal(), SIDE_NOISE * rng.normal()];
            let truth = [TRUTH.ln(), (TRUTH * (1.0 + truth_pct / 100.0)).ln()];
            let order: Vec<usize> = match interleave {
                true => (0..SLICES)
                    .flat_map(|_| {
                        let mut cycle = [0, 1];
                        rng.shuffle(&mut cycle);
                        cycle
                    })
                    .collect(),
                false => [0; SLICES].into_iter().chain([1; SLICES]).collect(),
            };
            let (mut drift, mut logs) = (0.0, [0.0, 0.0]);
            for s in order {
                drift += DRIFT_STEP * rng.normal();
                logs[s] += truth[s] + block + side[s] + drift + SLICE_NOISE * rng.normal();
            }
            for (s, env) in ["base", "cell"].iter().enumerate() {
                let value = (logs[s] / SLICES as f64).exp();
                runs.push(RunRecord {
                    samples: vec![Sample::new("iops", value, "op/s")],
                    block: Some(BlockId { round, block: 1, session: "sim".into() }),
                    ..RunRecord::new(labels(env), round)
                });
            }
        }
        runs
    }

    /// How often the difference's CI covered the truth, and its median half-width.
    pub fn coverage(rounds: u32, truth_pct: f64, interleave: bool, seed: u64) -> (f64, f64) {
        let mut rng = Rng::new(seed);
        let (mut covered, mut widths) = (0, Vec::new());
        for _ in 0..TRIALS {
            let runs = result_set(rounds, truth_pct, interleave, &mut rng);
            let d = compare::diff(&metric(&runs, "cell"), &metric(&runs, "base")).unwrap();
            assert_eq!(d.pairing.name(), "paired");
            let (lo, hi) = d.ci.expect("paired blocks give a CI");
            covered += usize::from(lo <= truth_pct && truth_pct <= hi);
            widths.push(d.half_width());
        }
        widths.sort_by(f64::total_cmp);
        (covered as f64 / TRIALS as f64, widths[TRIALS / 2])
    }
}

#[test]
fn slices_interleaved_within_blocks_cover_the_truth_95_percent_of_the_time() {
    let mut table = String::from("| rounds | truth | design | covers | median ± half-width |\n|---|---|---|---|---|\n");
    let mut failures = Vec::new();
    let mut seed = 1000;
    for rounds in [3, 5, 10] {
        for truth_pct in [0.0, -10.0] {
            seed += 1;
            let (covers, half) = interleaved::coverage(rounds, truth_pct, true, seed);
            let truth = if truth_pct == 0.0 { "A/A".into() } else { format!("{truth_pct:+.0} %") };
            table.push_str(&format!(
                "| {rounds} | {truth} | {} slices interleaved | {:.1} % | ±{half:.1} points |\n",
                interleaved::SLICES,
                covers * 100.0
            ));
            if !(0.94..=0.96).contains(&covers) {
                failures.push(format!("{rounds} rounds, truth {truth_pct} %: {covers:.3}"));
            }
        }
    }
    eprintln!("{table}");
    assert!(failures.is_empty(), "interleaved intervals that are not 95 %: {failures:#?}\n{table}");
}

/// What interleaving buys: under a drift that moves over seconds, slices that alternate share
/// it, where one side's slices all before the other's do not; the interval is narrower.
#[test]
fn interleaving_narrows_the_interval_under_a_slow_drift() {
    let (_, interleaved) = interleaved::coverage(5, -10.0, true, 7);
    let (sequential_covers, sequential) = interleaved::coverage(5, -10.0, false, 7);
    assert!(sequential_covers >= 0.94, "back to back is honest too, only wider ({sequential_covers:.3})");
    assert!(interleaved < 0.7 * sequential, "interleaved ±{interleaved:.1} against back to back ±{sequential:.1}");
}
