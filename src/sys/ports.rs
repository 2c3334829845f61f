//! Free TCP ports on this machine.
//!
//! A port is chosen now and bound later by another process (a server's config names it). The
//! kernel's answer to a bind of port 0 comes from the ephemeral range, which every outgoing
//! connection draws from as well, so a client's connection could take the port in between (seen:
//! Cassandra's storage port taken during a parallel test's load). Ports are therefore chosen below
//! that range, from a random start, so that two isobench processes rarely try the same one.

use anyhow::{Context, Result, bail};
use std::hash::{BuildHasher, RandomState};
use std::net::TcpListener;

/// Where a search for a port starts: below it, listening services of this machine are common.
const LOWEST: u16 = 10_000;

pub fn free_port() -> Result<u16> {
    Ok(free_ports(1)?[0])
}

/// `n` distinct free ports: each stays bound until all are found, so none comes twice.
pub fn free_ports(n: usize) -> Result<Vec<u16>> {
    let Some((low, high)) = below_ephemeral() else {
        return from_the_kernel(n);
    };
    let span = u32::from(high - low) + 1;
    let start = (RandomState::new().hash_one(std::process::id()) % u64::from(span)) as u32;
    let mut held = Vec::with_capacity(n);
    for k in 0..span {
        let port = low + ((start + k) % span) as u16;
        if let Ok(listener) = TcpListener::bind(("127.0.0.1", port)) {
            held.push(listener);
            if held.len() == n {
                return held.iter().map(|l| Ok(l.local_addr()?.port())).collect();
            }
        }
    }
    bail!("found no {n} free TCP ports between {low} and {high}")
}

/// The ports from `LOWEST` up to the start of the ephemeral range, when there are enough of them.
fn below_ephemeral() -> Option<(u16, u16)> {
    let range = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").ok()?;
    let low: u16 = range.split_whitespace().next()?.parse().ok()?;
    (low > LOWEST + 1000).then(|| (LOWEST, low - 1))
}

fn from_the_kernel(n: usize) -> Result<Vec<u16>> {
    let listeners =
        (0..n).map(|_| TcpListener::bind("127.0.0.1:0").context("finding a free port")).collect::<Result<Vec<_>>>()?;
    listeners.iter().map(|l| Ok(l.local_addr()?.port())).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_are_distinct_bindable_and_outside_the_ephemeral_range() {
        let ports = free_ports(5).unwrap();
        let mut sorted = ports.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted.len(), 5);
        if let Some((low, high)) = below_ephemeral() {
            assert!(ports.iter().all(|p| (low..=high).contains(p)), "{ports:?} in {low}..={high}");
        }
        for p in ports {
            TcpListener::bind(("127.0.0.1", p)).unwrap();
        }
    }
}
