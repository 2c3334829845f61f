//! `kind = "loop"`: a filesystem (ext4 or xfs) on a loop device over a sparse file, made and
//! destroyed by isobench on any machine. It is the file-backed, formatted form of `block`.

use super::block::{Block, Source};
use super::{Kind, Volume};
use crate::syntax::{Fields, SuiteError};

pub const KIND: Kind = Kind { name: "loop", parse };

fn parse(f: &mut Fields) -> Result<Box<dyn Volume>, SuiteError> {
    let fs = f.choice("fs", &["ext4", "xfs"])?.unwrap_or_else(|| "ext4".into());
    let size = f.size("size")?.unwrap_or(4 << 30);
    let direct_io = f.bool("direct_io")?.unwrap_or(true);
    let mkfs_args = f.str_list("mkfs_args")?.unwrap_or_default();
    let mount_options = f.str("mount_options")?;
    f.finish()?;
    Ok(Box::new(Block {
        kind: "loop",
        source: Source::File { size },
        fs: Some(fs),
        destructive: true,
        partitions: 1,
        direct_io,
        mkfs_args,
        mount_options,
    }))
}
