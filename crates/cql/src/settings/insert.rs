//! `-insert` (`SettingsInsert.java`).

use std::sync::Arc;

use super::ArgError;
use super::command::Command;
use super::tokens::{Params, dist};
use crate::profile::{BatchKind, Ratio};

/// `-insert` of a `user` command: what the profiles' `insert:` sections say (`partitions=`,
/// `batchtype=`, `select-ratio=`), overridden for every profile of the run.
pub(super) fn parse_insert(
    command: &mut Command,
    params: Option<Params>,
    warnings: &mut Vec<String>,
) -> Result<(), ArgError> {
    let Some(mut p) = params else { return Ok(()) };
    let partitions = p.take("partitions=").map(|d| dist(&p, &d)).transpose()?;
    let batch = p.take("batchtype=").map(|b| BatchKind::parse(&b).map_err(|why| p.invalid(&why))).transpose()?;
    let select = p.take("select-ratio=").map(|r| Ratio::parse(&r).map_err(|why| p.invalid(&why))).transpose()?;
    for key in ["visits=", "revisit=", "row-population-ratio="] {
        if let Some(v) = p.take(key) {
            warnings.push(format!(
                "-insert {key}{v} is accepted and ignored: isobench writes the rows an insert selects in one visit, every column"
            ));
        }
    }
    p.finish("partitions=, batchtype=, select-ratio=, visits=, revisit=, row-population-ratio=")?;
    for profile in &mut command.profiles {
        let insert = &mut Arc::make_mut(profile).insert;
        if let Some(d) = &partitions {
            insert.partitions = d.clone();
        }
        if let Some(b) = batch {
            insert.batch = b;
        }
        if let Some(r) = &select {
            insert.select = r.clone();
        }
    }
    Ok(())
}
