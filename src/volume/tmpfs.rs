//! Memory-backed storage: the upper bound of what a filesystem path can deliver, and the
//! usual baseline for "what does the storage stack cost".

use std::collections::BTreeMap;

use anyhow::Result;

use super::{Kind, ProvisionContext, Provisioned, Volume, mount_point};
use crate::syntax::{Fields, SuiteError};
use crate::sys;
use figures::units;

pub const KIND: Kind = Kind { name: "tmpfs", parse };

pub struct Tmpfs {
    size: u64,
}

fn parse(f: &mut Fields) -> Result<Box<dyn Volume>, SuiteError> {
    let size = f.size("size")?.unwrap_or(1 << 30);
    f.finish()?;
    Ok(Box::new(Tmpfs { size }))
}

impl Volume for Tmpfs {
    fn unavailable(&self) -> Option<String> {
        crate::sys::needs_root()
    }

    fn provision(&self, ctx: ProvisionContext) -> Result<Provisioned> {
        if ctx.block {
            return Err(super::no_block("tmpfs"));
        }
        let target = mount_point(&ctx, "mnt".into())?;
        let options = format!("size={},mode=1777", units::fio_size(self.size));
        sys::command_output("mount", &["-t", "tmpfs", "-o", &options, "isobench-tmpfs", &target.to_string_lossy()])?;
        Ok(Provisioned::dir(
            target,
            BTreeMap::from([
                ("volume.kind".into(), "tmpfs".into()),
                ("volume.size".into(), units::fio_size(self.size)),
            ]),
        ))
    }

    fn memory(&self) -> Option<u64> {
        Some(self.size)
    }
}
