//! Proof of where a run ran. A container shares the host's kernel but not its mount and pid
//! namespaces; gVisor and VMs bring their own kernel (their own boot id). A run asked to be in a
//! sandbox whose facts show the host's boot id *and* the host's namespaces ran on the host:
//! a benchmark of the wrong runtime is worse than none.

use crate::facts::Facts;

/// Why `facts` (seen inside a run) show the host itself, if they do.
pub fn looks_like_host(facts: &Facts, host: &Facts) -> Option<String> {
    let same = |key: &str| facts.get(key).is_some() && facts.get(key) == host.get(key);
    (same("boot_id") && same("ns.mnt") && same("ns.pid")).then(|| {
        format!(
            "the run saw the host's own kernel instance (boot id {}) and the host's mount and pid namespaces: it did not run in a sandbox",
            facts.get("boot_id").map(String::as_str).unwrap_or("?")
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(pairs: &[(&str, &str)]) -> Facts {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn the_host_is_recognised_and_sandboxes_are_not() {
        let host = facts(&[("boot_id", "b1"), ("ns.mnt", "mnt:[1]"), ("ns.pid", "pid:[2]")]);
        assert!(looks_like_host(&host, &host).is_some());
        let container = facts(&[("boot_id", "b1"), ("ns.mnt", "mnt:[9]"), ("ns.pid", "pid:[8]")]);
        assert!(looks_like_host(&container, &host).is_none());
        let vm = facts(&[("boot_id", "b2"), ("ns.mnt", "mnt:[1]"), ("ns.pid", "pid:[2]")]);
        assert!(looks_like_host(&vm, &host).is_none());
        assert!(looks_like_host(&Facts::new(), &host).is_none(), "no facts prove nothing either way");
    }
}
