//! A Kubernetes PersistentVolumeClaim of a StorageClass: the storage a cluster gives its pods.
//! Nothing is made on the host; the k8s environment creates the claim with the run's labels,
//! mounts it in the pod and records which PersistentVolume bound it.

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::Result;
use serde::{Deserialize, Serialize};

use super::{Kind, ProvisionContext, Provisioned, Volume};
use crate::syntax::{Fields, SuiteError};

pub const KIND: Kind = Kind { name: "pvc", parse };

/// What the claim asks the cluster for.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Claim {
    pub storage_class: String,
    /// Bytes.
    pub size: u64,
    pub access_mode: String,
    /// The pod gets a raw block device instead of a filesystem (`volume_mode = "Block"`).
    pub block: bool,
}

pub struct Pvc {
    claim: Claim,
}

const ACCESS_MODES: &[&str] = &["ReadWriteOnce", "ReadWriteOncePod", "ReadWriteMany", "ReadOnlyMany"];

fn parse(f: &mut Fields) -> Result<Box<dyn Volume>, SuiteError> {
    let storage_class = f.required_str("storage_class")?;
    let size = f.size("size")?.ok_or_else(|| f.error_at("size", "a claim needs a size, e.g. size = \"10G\""))?;
    let access_mode = f.choice("access_mode", ACCESS_MODES)?.unwrap_or_else(|| "ReadWriteOnce".into());
    let mode = f.choice("volume_mode", &["Filesystem", "Block"])?.unwrap_or_else(|| "Filesystem".into());
    f.finish()?;
    Ok(Box::new(Pvc { claim: Claim { storage_class, size, access_mode, block: mode == "Block" } }))
}

impl Volume for Pvc {
    fn unavailable(&self) -> Option<String> {
        None
    }

    fn provision(&self, ctx: ProvisionContext) -> Result<Provisioned> {
        if ctx.block {
            return Err(super::no_block("pvc"));
        }
        let c = &self.claim;
        let facts = BTreeMap::from([
            ("volume.kind".to_string(), "pvc".to_string()),
            ("volume.storage_class".into(), c.storage_class.clone()),
            ("volume.size".into(), figures::units::fio_size(c.size)),
            ("volume.access_mode".into(), c.access_mode.clone()),
            ("volume.mode".into(), if c.block { "Block" } else { "Filesystem" }.into()),
        ]);
        Ok(Provisioned { raw: c.block, claim: Some(c.clone()), ..Provisioned::dir(PathBuf::new(), facts) })
    }

    fn raw(&self) -> bool {
        self.claim.block
    }

    fn claim(&self) -> Option<Claim> {
        Some(self.claim.clone())
    }
}
