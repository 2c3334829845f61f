//! Free TCP ports on this machine.

use anyhow::{Context, Result};

pub fn free_port() -> Result<u16> {
    Ok(free_ports(1)?[0])
}

/// `n` distinct free ports: each stays bound until all are found, so none comes twice.
pub fn free_ports(n: usize) -> Result<Vec<u16>> {
    let listeners = (0..n)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0").context("finding a free port"))
        .collect::<Result<Vec<_>>>()?;
    listeners.iter().map(|l| Ok(l.local_addr()?.port())).collect()
}
