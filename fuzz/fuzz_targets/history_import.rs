//! A history export from elsewhere (`isobench history import FILE`): its lines into a history,
//! then that history's series shown, analysed, gated and drawn, as the `history` commands do.
#![no_main]
use std::collections::BTreeMap;
use std::path::PathBuf;

use isobench::history::detect::Options;
use isobench::history::gate;
use isobench::history::series::{self, Figure, Filter};
use isobench::history::{History, Location, trend};
use isobench::report::export::InconclusivePolicy;
use isobench_fuzz as _;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // In memory: SQLite's own name for a database without a file.
    let mut history = History::open(&Location::Sqlite(PathBuf::from(":memory:"))).expect("an in-memory history");
    if history.import_lines(&String::from_utf8_lossy(data), "fuzz").is_err() {
        return;
    }
    let points = history.points().expect("the points just imported");
    let acks: BTreeMap<_, _> = history.acks().expect("the acknowledgements just imported");
    let all = series::group(points, &Filter::default());
    let options = Options::default();
    let _ = series::show(&all);
    for s in &all {
        for figure in [Figure::Overhead, Figure::Value] {
            for cp in series::change_points(s, figure, &options, &acks) {
                let _ = series::describe(&cp);
            }
        }
    }
    let judged = gate::gate(&all, 5.0, &options, &acks);
    let _ = gate::junit(&judged, InconclusivePolicy::Report);
    let _ = trend::page(&all, &options, &acks, "fuzz");
});
