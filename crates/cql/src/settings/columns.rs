//! `-col` (`SettingsColumn.java`).

use super::ArgError;
use super::tokens::{Params, dist, number};
use crate::dist::DistSpec;

#[derive(Clone, Debug)]
pub struct Columns {
    pub names: Vec<String>,
    pub size: DistSpec,
    pub slice: bool,
    pub timestamp: Option<i64>,
}

pub(super) fn parse_columns(params: Option<Params>, warnings: &mut Vec<String>) -> Result<Columns, ArgError> {
    let defaults = |n: usize| (0..n).map(|i| format!("C{i}")).collect::<Vec<_>>();
    let mut columns = Columns { names: defaults(5), size: DistSpec::Fixed(34), slice: false, timestamp: None };
    let Some(mut p) = params else { return Ok(columns) };
    if let Some(n) = p.take("n=") {
        match dist(&p, &n)? {
            DistSpec::Fixed(k) if k > 0 => columns.names = defaults(k as usize),
            _ => return Err(p.invalid(&format!("n={n}: isobench writes a fixed number of columns; use n=FIXED(k)"))),
        }
    }
    if let Some(size) = p.take("size=") {
        columns.size = dist(&p, &size)?;
    }
    if let Some(names) = p.take("names=") {
        columns.names = names.split(',').filter(|s| !s.is_empty()).map(str::to_string).collect();
    }
    columns.slice = p.flag("slice");
    if let Some(t) = p.take("timestamp=") {
        columns.timestamp = Some(number(&p, "timestamp=", &t)?);
    }
    for deprecated in ["comparator=", "super="] {
        if let Some(v) = p.take(deprecated) {
            warnings.push(format!("-col {deprecated}{v} is accepted and ignored"));
        }
    }
    p.finish("n=FIXED(k), size=DIST, names=, slice, timestamp=")?;
    Ok(columns)
}
