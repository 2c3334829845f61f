//! `-pop` (`SettingsPopulation.java`).

use super::ArgError;
use super::command::Command;
use super::tokens::Params;
use crate::dist::{DistSpec, parse_count};

#[derive(Clone, Debug, PartialEq)]
pub enum Population {
    Sequence { start: i64, end: i64, wrap: bool },
    Distribution(DistSpec),
}

pub(super) fn parse_population(
    command: &Command,
    params: Option<Params>,
) -> Result<(Population, Vec<String>), ArgError> {
    let limit = command.count().filter(|n| *n > 0).unwrap_or(1_000_000) as i64;
    let mut warnings = Vec::new();
    let Some(mut p) = params else {
        return Ok((
            if command.updates() && !command.is_mixed() {
                Population::Sequence { start: 1, end: limit, wrap: true }
            } else {
                Population::Distribution(DistSpec::parse(&format!("gaussian(1..{limit})")).expect("valid"))
            },
            warnings,
        ));
    };
    let seq = p.take("seq=");
    let d = p.take("dist=");
    let no_wrap = p.flag("no-wrap");
    if let Some(lookback) = p.take("read-lookback=") {
        warnings.push(format!("-pop read-lookback={lookback} is accepted and ignored: reads draw from the population"));
    }
    if let Some(contents) = p.take("contents=") {
        warnings.push(format!("-pop contents={contents} is deprecated and ignored"));
    }
    p.finish("seq=A..B, dist=DIST, no-wrap, read-lookback=")?;
    let population = match (seq, d) {
        (Some(s), None) => {
            let (a, b) = s
                .split_once("..")
                .ok_or_else(|| ArgError::Invalid(format!("Invalid -pop options provided: seq={s}: write seq=A..B")))?;
            let start = parse_count(a).map_err(ArgError::Invalid)?;
            let end = parse_count(b.trim_start_matches('.')).map_err(ArgError::Invalid)?;
            if start > end {
                return Err(ArgError::Invalid(format!("Invalid -pop options provided: seq={s}: start after end")));
            }
            Population::Sequence { start, end, wrap: !no_wrap }
        }
        (None, Some(d)) => Population::Distribution(
            DistSpec::parse(&d).map_err(|e| ArgError::Invalid(format!("Invalid -pop options provided: {e}")))?,
        ),
        (None, None) => Population::Sequence { start: 1, end: limit, wrap: !no_wrap },
        (Some(_), Some(_)) => {
            return Err(ArgError::Invalid("Invalid -pop options provided: give seq= or dist=, not both".into()));
        }
    };
    Ok((population, warnings))
}
