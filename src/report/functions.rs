//! Which code a sandbox's extra CPU per operation went to: each sampled part split by function
//! (a JIT's compiled methods named by the JVM's own map, the interpreter's CPU by the methods the
//! JVM's own samples found it running, `… (interpreted)`, or as `Interpreter` without them, native
//! code by its symbols) and by thread, set against the baseline per operation as the parts are.
//! A function's CPU per operation is its share of the sandbox's sampled CPU times the cell's CPU
//! per operation; its growth is the cell's less the baseline's for the same part and function
//! (the threads differ by environment: gVisor runs a JVM's threads in its stubs, named as its
//! own).

use std::collections::BTreeMap;

use crate::compare::CellResult;
use crate::sys::cpu_parts::UNRESOLVED;
use figures::units;

/// One function's CPU per operation more in the cell than in its baseline.
#[derive(Debug, Clone, PartialEq)]
pub struct Grown {
    pub part: String,
    /// The cell's thread that spent the most of it.
    pub thread: String,
    pub function: String,
    pub us: f64,
}

/// Every function's growth per operation, largest first (those that shrank last).
pub fn grown(cell: &CellResult, base: &CellResult) -> Vec<Grown> {
    let (Some(cell_op), Some(base_op)) = (cell.median("sys.cpu_per_op"), base.median("sys.cpu_per_op")) else {
        return Vec::new();
    };
    if cell.functions.is_empty() || base.functions.is_empty() {
        return Vec::new();
    }
    // (cell µs, baseline µs, the cell's thread with the most of it, that thread's µs)
    let mut by_function: BTreeMap<(&str, &str), (f64, f64, &str, f64)> = BTreeMap::new();
    for f in &cell.functions {
        let entry = by_function.entry((&f.part, &f.function)).or_default();
        let us = f.share * cell_op;
        entry.0 += us;
        if us > entry.3 {
            (entry.2, entry.3) = (&f.thread, us);
        }
    }
    for f in &base.functions {
        by_function.entry((&f.part, &f.function)).or_default().1 += f.share * base_op;
    }
    let mut out: Vec<Grown> = by_function
        .into_iter()
        .map(|((part, function), (mine, theirs, thread, _))| Grown {
            part: part.into(),
            thread: thread.into(),
            function: function.into(),
            us: mine - theirs,
        })
        .collect();
    out.sort_by(|a, b| b.us.total_cmp(&a.us));
    out
}

/// How many functions the why names for a part.
const NAMED: usize = 5;

/// What a runtime's own entry in a JIT's map stands for, where its name does not say.
fn gloss(function: &str) -> &'static str {
    match function {
        // Time a JVM spends interpreting is time its JIT had not compiled the code yet
        // (docs/gvisor-guide.md: under gVisor, its compiler is behind).
        crate::sys::jit_map::INTERPRETER => " (bytecode not compiled yet)",
        _ => "",
    }
}

/// The why's line of the functions that grew in the parts that grew most: "in app: void
/// Foo.bar() +120 µs (thread ReadStage-1), Interpreter +40 µs, …; in platform: …", each part's
/// functions together against the part's growth, and what no symbol or map named.
pub fn line(cell: &CellResult, base: &CellResult, parts: &[(&str, f64)]) -> Option<String> {
    let grown = grown(cell, base);
    if grown.is_empty() {
        return None;
    }
    let items: Vec<String> = parts
        .iter()
        .filter(|(_, part_us)| *part_us > 0.0)
        .take(2)
        .filter_map(|(part, part_us)| {
            let top: Vec<&Grown> = grown.iter().filter(|g| g.part == *part && g.us > 0.0).take(NAMED).collect();
            if top.is_empty() {
                return None;
            }
            let named: Vec<String> = top
                .iter()
                .map(|g| format!("{}{} +{} ({})", g.function, gloss(&g.function), units::human(g.us, "us"), g.thread))
                .collect();
            let together = top.iter().map(|g| g.us).sum::<f64>() / part_us * 100.0;
            Some(format!("in {part}: {} — together {together:.0}% of its growth", named.join(", ")))
        })
        .collect();
    if items.is_empty() {
        return None;
    }
    let unresolved: f64 = cell.functions.iter().filter(|f| f.function.starts_with(UNRESOLVED)).map(|f| f.share).sum();
    Some(format!(
        "the functions that grew most (thread in brackets), {}; {:.1}% of the sampled CPU named by no symbol or map",
        items.join("; "),
        unresolved * 100.0
    ))
}
