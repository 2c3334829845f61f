//! `kind = "nbd"`: remote block storage over TCP. A storage node (nbdkit) exports a backing file,
//! on the host's loopback (`where = "local"`) or in a network namespace of its own reached over
//! a veth pair (`where = "netns"`), with `latency` and `bandwidth` shaped by the node; the
//! workload reaches it the way its environment can (see `nbd_export::deliver`).

use std::collections::BTreeMap;

use anyhow::Result;

use super::nbd_export::{self, Common, Where};
use super::{Kind, ProvisionContext, Provisioned, Volume};
use crate::syntax::{Fields, SuiteError};
use figures::units;

pub const KIND: Kind = Kind { name: "nbd", parse };

pub struct Nbd {
    common: Common,
}

fn parse(f: &mut Fields) -> Result<Box<dyn Volume>, SuiteError> {
    let common = Common::parse(f, Where::Local)?;
    f.finish()?;
    Ok(Box::new(Nbd { common }))
}

impl Volume for Nbd {
    fn raw(&self) -> bool {
        self.common.fs.is_none()
    }

    fn unavailable(&self) -> Option<String> {
        self.common.unavailable(false)
    }

    fn provision(&self, ctx: ProvisionContext) -> Result<Provisioned> {
        let node = nbd_export::start_node(&ctx, &self.common, 0, None)?;
        let mut facts = BTreeMap::from([
            ("volume.kind".to_string(), "nbd".to_string()),
            ("volume.size".into(), units::fio_size(self.common.size)),
            ("volume.fs".into(), self.common.fs.clone().unwrap_or_else(|| "none".into())),
            ("volume.export".into(), node.export.uri()),
        ]);
        facts.extend(node.facts);
        let route = nbd_export::route(&ctx, &self.common)?;
        nbd_export::deliver(&ctx, &self.common, route, nbd_export::Source::Nbd(&node.export), facts)
    }
}
