//! `-log` (`SettingsLog.java`).

use std::path::PathBuf;
use std::time::Duration;

use super::ArgError;
use super::tokens::{Params, number};

#[derive(Clone, Debug)]
pub struct Log {
    pub interval: Duration,
    pub hdrfile: Option<PathBuf>,
    pub file: Option<PathBuf>,
    pub no_settings: bool,
    pub no_summary: bool,
    pub level: String,
}

pub(super) fn parse_log(params: Option<Params>) -> Result<Log, ArgError> {
    let mut log = Log {
        interval: Duration::from_secs(1),
        hdrfile: None,
        file: None,
        no_settings: false,
        no_summary: false,
        level: "normal".into(),
    };
    let Some(mut p) = params else { return Ok(log) };
    if let Some(i) = p.take("interval=") {
        log.interval = if let Some(ms) = i.strip_suffix("ms") {
            Duration::from_millis(number(&p, "interval=", ms)?)
        } else {
            Duration::from_secs(number(&p, "interval=", i.trim_end_matches('s'))?)
        };
        if log.interval.is_zero() {
            return Err(p.invalid("interval= must be more than zero"));
        }
    }
    log.hdrfile = p.take("hdrfile=").map(PathBuf::from);
    log.file = p.take("file=").map(PathBuf::from);
    log.no_settings = p.flag("no-settings");
    log.no_summary = p.flag("no-summary");
    if let Some(l) = p.take("level=") {
        log.level = l;
    }
    p.flag("print-statements-on-error");
    p.finish("interval=, hdrfile=, file=, level=, no-settings, no-summary")?;
    Ok(log)
}
