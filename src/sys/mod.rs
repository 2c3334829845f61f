//! The bottom layer: what every other module may use and which names none of them — child
//! processes, signals and pids, free ports, atomic writes, usage and device counters, the
//! machine's perf counters and its CPU sampled by part, a cgroup that counts a sandbox's CPU, sets of CPUs to pin to, the
//! machine let settle between runs, and the progress lines a run says.

mod cgroup;
pub mod code_names;
mod counters;
pub mod cpu_idle;
pub mod cpu_parts;
mod cpuset;
mod files;
pub mod jfr;
pub mod jit_map;
mod perf;
mod placement;
mod ports;
mod process;
pub mod progress;
mod prometheus;
pub mod sampling;
mod settle;
mod wait;

pub use cgroup::*;
pub use counters::*;
pub use cpuset::*;
pub use files::*;
pub use perf::*;
pub use placement::*;
pub use ports::*;
pub use process::*;
pub use prometheus::*;
pub use settle::*;
pub use wait::*;
