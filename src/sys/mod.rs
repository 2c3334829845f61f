//! The bottom layer: what every other module may use and which names none of them — child
//! processes, signals and pids, free ports, atomic writes, usage and device counters.

mod counters;
mod files;
mod ports;
mod process;

pub use counters::*;
pub use files::*;
pub use ports::*;
pub use process::*;
