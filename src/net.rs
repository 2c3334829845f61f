//! How a sandbox reaches the host over a network: the host's own loopback, a network namespace
//! joined to the host by a veth pair (containers), a tap device or QEMU's user-mode network
//! (VMs). Addresses come from private /30s that isobench checks are unused on this machine;
//! every namespace and link is recorded in the ledger before it is made.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use anyhow::{Context, Result, bail};

use crate::ledger::{Ledger, Resource};
use crate::sys;

/// The /16 the /30s are taken from; a block in use on this machine is skipped.
const POOL: [u8; 2] = [10, 211];

/// Where QEMU's user-mode network puts the guest, and where the guest finds the host.
pub const SLIRP_GUEST: Ipv4Addr = Ipv4Addr::new(10, 0, 2, 15);
pub const SLIRP_HOST: Ipv4Addr = Ipv4Addr::new(10, 0, 2, 2);

#[derive(Clone, Debug, PartialEq)]
pub enum NetPath {
    /// The host's own network stack: both ends on 127.0.0.1.
    Loopback,
    /// A network namespace whose `eth0` is one end of a veth pair; the host holds the other end,
    /// or, for sandboxes that must reach one another (a ring's nodes), a bridge holds it.
    Namespace { name: String, host_if: String, host: Ipv4Addr, sandbox: Ipv4Addr, bridge: Option<Bridge> },
    /// A tap device on the host for a VM's virtio-net (with vhost-net in the host kernel or not).
    Tap { name: String, host: Ipv4Addr, guest: Ipv4Addr, vhost: bool },
    /// QEMU's user-mode network: the guest's packets become the QEMU process's own sockets.
    User,
}

/// A bridge on the host joining several sandboxes' namespaces: the host's address is on it.
#[derive(Clone, Debug, PartialEq)]
pub struct Bridge {
    pub name: String,
    pub prefix: u8,
    /// How many sandboxes share it.
    pub members: usize,
}

impl NetPath {
    /// The sandbox's own address, where a server inside listens and the host dials it.
    pub fn sandbox_address(&self) -> Option<Ipv4Addr> {
        match self {
            NetPath::Namespace { sandbox, .. } => Some(*sandbox),
            NetPath::Tap { guest, .. } => Some(*guest),
            NetPath::Loopback | NetPath::User => None,
        }
    }

    /// Where a server on the host side listens.
    pub fn host_address(&self) -> Ipv4Addr {
        match self {
            NetPath::Loopback | NetPath::User => Ipv4Addr::LOCALHOST,
            NetPath::Namespace { host, .. } | NetPath::Tap { host, .. } => *host,
        }
    }

    /// The address the sandbox connects to for that server.
    pub fn host_address_inside(&self) -> Ipv4Addr {
        match self {
            NetPath::User => SLIRP_HOST,
            other => other.host_address(),
        }
    }

    /// The sandbox's own address and prefix, for a guest to configure on its NIC.
    pub fn guest_address(&self) -> Option<(Ipv4Addr, u8)> {
        match self {
            NetPath::Tap { guest, .. } => Some((*guest, 30)),
            NetPath::User => Some((SLIRP_GUEST, 24)),
            _ => None,
        }
    }

    /// The namespace's file, for a runtime to join.
    pub fn netns_file(&self) -> Option<PathBuf> {
        match self {
            NetPath::Namespace { name, .. } => Some(Path::new("/var/run/netns").join(name)),
            _ => None,
        }
    }

    /// What a run records about it.
    pub fn describe(&self) -> BTreeMap<String, String> {
        let path = match self {
            NetPath::Loopback => "loopback (the host's network)".to_string(),
            NetPath::Namespace { name, host_if, host, sandbox, bridge: None } => {
                format!("network namespace {name}, veth {host_if} {host}/30 ↔ eth0 {sandbox}/30")
            }
            NetPath::Namespace { name, host_if, host, sandbox, bridge: Some(b) } => format!(
                "network namespace {name}, eth0 {sandbox}/{p} ↔ veth {host_if} on bridge {} {host}/{p}, shared by {} sandboxes",
                b.name,
                b.members,
                p = b.prefix
            ),
            NetPath::Tap { name, host, guest, vhost } => format!(
                "tap {name} {host}/30 ↔ guest {guest}/30, vhost-net {}",
                if *vhost { "on" } else { "off (no /dev/vhost-net)" }
            ),
            NetPath::User => "QEMU user-mode network (slirp): the guest reaches the host's loopback at 10.0.2.2".into(),
        };
        BTreeMap::from([("net.path".to_string(), path)])
    }
}

/// Serialises choosing a free /30 and assigning it, within this process.
static ADDRESSES: Mutex<()> = Mutex::new(());

/// Why network namespaces cannot be made here, if they cannot.
pub fn namespaces_unavailable() -> Option<String> {
    if let Some(why) = crate::sys::needs_root() {
        return Some(why);
    }
    sys::find_program("ip").is_none().then(|| "the ip command is missing (apt-get install iproute2)".into())
}

/// A network namespace with a veth pair to the host, addresses assigned and links up.
pub fn namespace(ledger: &Ledger) -> Result<NetPath> {
    if let Some(why) = namespaces_unavailable() {
        bail!("{why}");
    }
    let (name, host_if) = veth_namespace(ledger)?;
    let _serial = ADDRESSES.lock().unwrap_or_else(|p| p.into_inner());
    let (host, sandbox) = free_block()?;
    ip(&["addr", "add", &format!("{host}/30"), "dev", &host_if])?;
    ip(&["link", "set", &host_if, "up"])?;
    up_inside(&name, sandbox, 30)?;
    Ok(NetPath::Namespace { name, host_if, host, sandbox, bridge: None })
}

/// `n` network namespaces on one bridge, as container engines join a pod's or a network's
/// containers: each reaches the others and the host (the bridge's address), as a ring's nodes
/// must. Addresses from one free block of the pool.
pub fn bridged(ledger: &Ledger, n: usize) -> Result<Vec<NetPath>> {
    if let Some(why) = namespaces_unavailable() {
        bail!("{why}");
    }
    // The network and broadcast addresses, the bridge's, and one per sandbox.
    let prefix = (24u8..=30)
        .rev()
        .find(|p| (1usize << (32 - p)) >= n + 3)
        .ok_or_else(|| anyhow::anyhow!("{n} sandboxes on one bridge: at most 253"))?;
    let bridge = link_name(ledger.next_id());
    ledger.record(Resource::Link { name: bridge.clone() })?;
    ip(&["link", "add", &bridge, "type", "bridge"])?;
    let _serial = ADDRESSES.lock().unwrap_or_else(|p| p.into_inner());
    let net = free_block_of(prefix)?;
    let host = Ipv4Addr::from(u32::from(net) + 1);
    ip(&["addr", "add", &format!("{host}/{prefix}"), "dev", &bridge])?;
    ip(&["link", "set", &bridge, "up"])?;
    let mut paths = Vec::new();
    for k in 0..n {
        let (name, host_if) = veth_namespace(ledger)?;
        ip(&["link", "set", &host_if, "master", &bridge])?;
        ip(&["link", "set", &host_if, "up"])?;
        let sandbox = Ipv4Addr::from(u32::from(net) + 2 + k as u32);
        up_inside(&name, sandbox, prefix)?;
        let bridge = Some(Bridge { name: bridge.clone(), prefix, members: n });
        paths.push(NetPath::Namespace { name, host_if, host, sandbox, bridge });
    }
    Ok(paths)
}

/// A namespace whose `eth0` is one end of a new veth pair, both recorded first: (namespace,
/// the host's end).
fn veth_namespace(ledger: &Ledger) -> Result<(String, String)> {
    let id = ledger.next_id();
    let name = format!("isobench-{}-{id}", ledger.token());
    let host_if = link_name(id);
    ledger.record(Resource::NetNs { name: name.clone() })?;
    ip(&["netns", "add", &name])?;
    ledger.record(Resource::Link { name: host_if.clone() })?;
    ip(&["link", "add", &host_if, "type", "veth", "peer", "name", "eth0", "netns", &name])?;
    Ok((name, host_if))
}

/// The namespace's `eth0` addressed and up, and its loopback up.
fn up_inside(name: &str, address: Ipv4Addr, prefix: u8) -> Result<()> {
    ip(&["-n", name, "addr", "add", &format!("{address}/{prefix}"), "dev", "eth0"])?;
    ip(&["-n", name, "link", "set", "eth0", "up"])?;
    ip(&["-n", name, "link", "set", "lo", "up"]).map(|_| ())
}

/// A tap device for a VM, with the host's end addressed and up.
pub fn tap(ledger: &Ledger) -> Result<NetPath> {
    if let Some(why) = tap_unavailable() {
        bail!("{why}");
    }
    let name = link_name(ledger.next_id());
    ledger.record(Resource::Link { name: name.clone() })?;
    ip(&["tuntap", "add", "dev", &name, "mode", "tap"])?;
    let _serial = ADDRESSES.lock().unwrap_or_else(|p| p.into_inner());
    let (host, guest) = free_block()?;
    ip(&["addr", "add", &format!("{host}/30"), "dev", &name])?;
    ip(&["link", "set", &name, "up"])?;
    Ok(NetPath::Tap { name, host, guest, vhost: Path::new("/dev/vhost-net").exists() })
}

/// Why tap devices cannot be made here, if they cannot.
pub fn tap_unavailable() -> Option<String> {
    namespaces_unavailable().or_else(|| {
        (!Path::new("/dev/net/tun").exists()).then(|| "there is no /dev/net/tun (the tun module is not loaded)".into())
    })
}

/// Host-side interface names: at most 15 characters ("ib" + pid + "n" + id, in hex), unique
/// per isobench process and id.
fn link_name(id: u64) -> String {
    format!("ib{:x}n{:x}", std::process::id() & 0xffff, id & 0xf_ffff)
}

fn ip(args: &[&str]) -> Result<String> {
    sys::command_output("ip", args)
}

/// The first /30 of the pool that no address or route on this machine touches: (host, peer).
fn free_block() -> Result<(Ipv4Addr, Ipv4Addr)> {
    let net = u32::from(free_block_of(30)?);
    Ok((Ipv4Addr::from(net + 1), Ipv4Addr::from(net + 2)))
}

/// The first block of `/prefix` in the pool that no address or route on this machine touches.
fn free_block_of(prefix: u8) -> Result<Ipv4Addr> {
    let used = ip(&["-o", "-4", "addr", "show"])? + &ip(&["-4", "route", "show", "table", "all"])?;
    let taken: Vec<(u32, u32)> = used
        .split_whitespace()
        .filter_map(|word| {
            let (addr, prefix) = word.split_once('/').unwrap_or((word, "32"));
            let addr: Ipv4Addr = addr.parse().ok()?;
            let prefix: u32 = prefix.parse().ok().filter(|p| *p <= 32)?;
            let mask = if prefix == 0 { 0 } else { u32::MAX << (32 - prefix) };
            Some((u32::from(addr) & mask, mask))
        })
        .collect();
    let base = u32::from(Ipv4Addr::new(POOL[0], POOL[1], 0, 0));
    let size = 1u32 << (32 - prefix);
    let block_mask = !(size - 1);
    for block in (0..(1u32 << 16)).step_by(size as usize) {
        let net = base + block;
        // Taken: it lies inside something in use, or something in use lies inside it.
        let clash = taken.iter().any(|(t, mask)| (net & mask) == *t || (t & block_mask) == net);
        if !clash {
            return Ok(Ipv4Addr::from(net));
        }
    }
    bail!("no free /{prefix} left in {}.{}.0.0/16", POOL[0], POOL[1])
}

/// Removes a namespace isobench made; one already gone is not an error.
pub fn delete_netns(name: &str) -> Result<()> {
    if !Path::new("/var/run/netns").join(name).exists() {
        return Ok(());
    }
    ip(&["netns", "del", name]).map(|_| ()).with_context(|| format!("deleting network namespace {name}"))
}

/// Removes a link isobench made (a veth end or a tap); one already gone is not an error.
pub fn delete_link(name: &str) -> Result<()> {
    if !Path::new("/sys/class/net").join(name).exists() {
        return Ok(());
    }
    ip(&["link", "del", name]).map(|_| ()).with_context(|| format!("deleting network link {name}"))
}

/// Waits until something listens on TCP `address:port` in this network namespace.
pub fn wait_listening(address: Ipv4Addr, port: u16, timeout: Duration) -> Result<()> {
    // /proc/net/tcp writes the address as the hex of its in-memory (network order) bytes.
    let wanted = format!("{:08X}:{port:04X}", u32::from_ne_bytes(address.octets()));
    let any = format!("00000000:{port:04X}");
    sys::Wait::new(format!("something to listen on {address}:{port}"), timeout).every(Duration::from_millis(20)).until(
        || {
            let table = std::fs::read_to_string("/proc/net/tcp").unwrap_or_default();
            let listening = table.lines().skip(1).any(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                f.len() > 3 && (f[1] == wanted || f[1] == any) && f[3] == "0A"
            });
            Ok(if listening { sys::Check::Done(()) } else { sys::Check::NotYet(String::new()) })
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_say_where_each_side_connects() {
        assert_eq!(NetPath::User.host_address(), Ipv4Addr::LOCALHOST);
        assert_eq!(NetPath::User.host_address_inside(), SLIRP_HOST);
        let ns = NetPath::Namespace {
            name: "n".into(),
            host_if: "h".into(),
            host: Ipv4Addr::new(10, 211, 0, 1),
            sandbox: Ipv4Addr::new(10, 211, 0, 2),
            bridge: None,
        };
        assert_eq!(ns.sandbox_address(), Some(Ipv4Addr::new(10, 211, 0, 2)));
        assert_eq!(ns.host_address_inside(), Ipv4Addr::new(10, 211, 0, 1));
        assert_eq!(ns.netns_file().unwrap(), Path::new("/var/run/netns/n"));
        assert!(ns.describe()["net.path"].contains("veth h 10.211.0.1/30"));
        assert!(link_name(123_456_789).len() <= 15, "interface names are limited to 15 characters");
    }

    #[test]
    fn a_listening_socket_is_found_in_proc_net_tcp() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        wait_listening(Ipv4Addr::LOCALHOST, port, Duration::from_secs(10)).unwrap();
        // Another address while the listener is held, not the same port after dropping it: a
        // process forked by a concurrent test holds the listener's fd until it execs, and a
        // freed port can be taken by anyone.
        assert!(wait_listening(Ipv4Addr::new(127, 0, 0, 2), port, Duration::from_millis(100)).is_err());
        drop(listener);
    }
}
