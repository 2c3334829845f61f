//! Numbers as people read them (sizes, durations, rates, "1.2 ms"), the statistics behind an
//! interval (t quantiles, geometric means, the warm-up of a series), and self-contained SVG
//! charts. Std only: every crate of the workspace stands on it.

pub mod chart;
pub mod stats;
pub mod units;
