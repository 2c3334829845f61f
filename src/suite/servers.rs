//! The suite's `[[server]]` tables and which one each workload loads: the one its `server`
//! names, else the one of a kind it loads.

use super::{NamedServer, WorkloadEntry, check_name, optional_sections};
use crate::syntax::{Fields, Origin, SuiteError, Table};
use crate::workload;

/// Whether a cell running `spec` loads a database that isobench starts in the sandbox.
pub(super) fn serves(server: Option<&crate::server::ServerSpec>, spec: &workload::Spec) -> bool {
    match server {
        Some(crate::server::ServerSpec::Managed(_)) => matches!(spec, workload::Spec::Cql(_)),
        Some(crate::server::ServerSpec::Database(_)) => spec.served_load().is_some(),
        _ => false,
    }
}

pub(super) fn server_of<'a>(
    servers: &'a [NamedServer],
    workload: &WorkloadEntry,
) -> Option<&'a crate::server::ServerSpec> {
    workload.server.map(|k| &servers[k].spec)
}

/// The `[[server]]` kinds a workload of this kind loads (none: it loads no server).
fn loads(spec: &workload::Spec) -> &'static [&'static str] {
    match spec {
        workload::Spec::Cql(_) => &["cassandra", "external"],
        spec => spec.served_load().map_or(&[], |load| load.server_kinds()),
    }
}

fn quoted(kinds: &[&str]) -> String {
    kinds.iter().map(|k| format!("\"{k}\"")).collect::<Vec<_>>().join(" or ")
}

/// Each workload's server: the one its `server` names, else the one of a kind it loads. A load
/// of a database isobench starts (pgbench, oltp, redis-benchmark) must find one.
pub(super) fn resolve_servers(
    top: &Fields,
    servers: &[NamedServer],
    workloads: &mut [WorkloadEntry],
    tables: &[(&Table, Origin)],
) -> Result<(), SuiteError> {
    for (w, (table, origin)) in workloads.iter_mut().zip(tables) {
        let f = Fields::new(top.file(), format!("workload \"{}\"", w.name), table, origin.clone());
        let kinds = loads(&w.variants[0].spec);
        let fits: Vec<usize> = (0..servers.len()).filter(|k| kinds.contains(&servers[*k].spec.kind())).collect();
        w.server = match &w.server_name {
            Some(name) => Some(named_server(&f, servers, name, kinds, &w.kind, &fits)?),
            None => match fits.as_slice() {
                [k] => Some(*k),
                [] if w.variants[0].spec.served_load().is_some() => {
                    return Err(f.error_at(
                        "kind",
                        format!(
                            "a {} workload loads a server isobench starts, of kind {}, and the suite has none: add [[server]] kind = \"{}\"",
                            w.kind,
                            quoted(kinds),
                            kinds[0]
                        ),
                    ));
                }
                [] => None,
                several => {
                    let first = several.iter().find_map(|k| servers[*k].name.as_deref()).unwrap_or("NAME");
                    return Err(f.error(format!(
                        "the suite has {} servers this workload could load: name one, server = \"{first}\"",
                        several.len()
                    )));
                }
            },
        };
    }
    Ok(())
}

/// The server a workload's `server = "NAME"` names, if it is one the workload can load.
fn named_server(
    f: &Fields,
    servers: &[NamedServer],
    name: &str,
    kinds: &[&str],
    kind: &str,
    fits: &[usize],
) -> Result<usize, SuiteError> {
    let Some(k) = servers.iter().position(|s| s.name.as_deref() == Some(name)) else {
        let names: Vec<&str> = servers.iter().filter_map(|s| s.name.as_deref()).collect();
        let has = if names.is_empty() { "none has a name".into() } else { format!("it has {}", names.join(", ")) };
        return Err(f.error_at(
            "server",
            format!("the suite has no [[server]] named \"{name}\" ({has}); give the server name = \"{name}\""),
        ));
    };
    if fits.contains(&k) {
        return Ok(k);
    }
    let why = match kinds {
        [] => format!("a {kind} workload loads no server; remove server"),
        kinds => format!("it is of kind \"{}\", and a {kind} workload loads {}", servers[k].spec.kind(), quoted(kinds)),
    };
    Err(f.error_at("server", format!("server \"{name}\": {why}")))
}

/// The `[[server]]` tables: with several, each has a `name`, unique.
pub(super) fn parse_servers(top: &mut Fields) -> Result<Vec<NamedServer>, SuiteError> {
    let file = top.file();
    let tables = optional_sections(top, "server")?;
    let mut servers: Vec<NamedServer> = Vec::new();
    for (table, origin) in &tables {
        let mut f = Fields::new(file, "[[server]]", table, origin.clone());
        let name = f.str("name")?;
        if let Some(name) = &name {
            check_name(&f, "name", name)?;
            if servers.iter().any(|s| s.name.as_ref() == Some(name)) {
                return Err(f.error_at(
                    "name",
                    format!("two [[server]] tables are named \"{name}\"; each needs a name of its own"),
                ));
            }
        } else if tables.len() > 1 {
            return Err(f.error(
                "a suite with several [[server]] tables names each: name = \"pg\", and a workload loads it with server = \"pg\"",
            ));
        }
        servers.push(NamedServer { name, spec: crate::server::ServerSpec::parse(&mut f)? });
    }
    Ok(servers)
}
