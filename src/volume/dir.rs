//! An existing directory on whatever filesystem holds it. isobench works in a fresh
//! subdirectory per run and removes only that, never what was there before.

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::{Context, Result};

use super::{Kind, ProvisionContext, Provisioned, Volume};
use crate::ledger::Resource;
use crate::syntax::{Fields, SuiteError};

pub const KIND: Kind = Kind { name: "dir", parse };

pub struct Dir {
    path: PathBuf,
}

fn parse(f: &mut Fields) -> Result<Box<dyn Volume>, SuiteError> {
    let path = PathBuf::from(f.required_str("path")?);
    if !path.is_absolute() {
        return Err(f.error_at("path", format!("\"{}\" must be an absolute path", path.display())));
    }
    f.finish()?;
    Ok(Box::new(Dir { path }))
}

impl Volume for Dir {
    fn unavailable(&self) -> Option<String> {
        None
    }

    fn provision(&self, ctx: ProvisionContext) -> Result<Provisioned> {
        if ctx.block {
            return Err(super::no_block("dir"));
        }
        // The outermost directory we create is recorded, so teardown removes exactly what we made.
        let mut first_missing = None;
        for ancestor in self.path.ancestors() {
            if ancestor.exists() {
                break;
            }
            first_missing = Some(ancestor.to_path_buf());
        }
        if let Some(top) = first_missing {
            ctx.ledger.record(Resource::Dir { path: top })?;
        }
        let run_name = ctx.run_dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let work = self.path.join(format!("isobench-{run_name}"));
        ctx.ledger.record(Resource::Dir { path: work.clone() })?;
        std::fs::create_dir_all(&work).with_context(|| format!("creating {}", work.display()))?;
        let facts = BTreeMap::from([
            ("volume.kind".into(), "dir".into()),
            ("volume.path".into(), self.path.display().to_string()),
            ("volume.fs".into(), crate::facts::fs_type(&work)),
        ]);
        Ok(Provisioned::dir(work, facts))
    }
}
