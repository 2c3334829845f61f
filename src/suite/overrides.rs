//! `--set path=value`: one key of the suite replaced or added before it is read.

use crate::syntax::{Node, Origin, SuiteError, Table, Value};

/// Applies one `--set path=value`: `repeat=5`, `workload.fio.runtime=3s`,
/// `workload.fio.env.FIO_RW=read`, `volume.tmpfs.size=1G`, `baseline.env=host`, `server.nodes=3` (`server.NAME.memory=2G` where the suite has several).
pub(super) fn apply_override(file: &str, root: &mut Table, text: &str) -> Result<(), SuiteError> {
    let err = |message: String| SuiteError { file: file.into(), origin: Origin::Set(text.into()), message };
    let (path, value) = text
        .split_once('=')
        .ok_or_else(|| err("write overrides as key=value, e.g. --set workload.fio.runtime=3s".into()))?;
    let segments: Vec<&str> = path.trim().split('.').collect();
    if segments.iter().any(|s| s.is_empty()) {
        return Err(err(format!("\"{path}\" is not a key path; write it like workload.fio.runtime")));
    }
    let node = crate::syntax::parse_override_value(value.trim(), Origin::Set(text.into()));
    let (target, rest): (&mut Table, &[&str]) = match segments.as_slice() {
        [section @ ("env" | "volume" | "workload" | "bound"), name, rest @ ..] if !rest.is_empty() => {
            let Some(Node { value: Value::List(items), .. }) = root.get_mut(section) else {
                return Err(err(format!("the suite has no [[{section}]] tables")));
            };
            let names: Vec<String> = items
                .iter()
                .filter_map(|n| match &n.value {
                    Value::Table(t) => t.str("name").map(str::to_string),
                    _ => None,
                })
                .collect();
            let found = items.iter_mut().find_map(|n| match &mut n.value {
                Value::Table(t) if t.str("name") == Some(*name) => Some(t),
                _ => None,
            });
            match found {
                Some(t) => (t, rest),
                None => {
                    return Err(err(format!(
                        "the suite has no {section} named \"{name}\"; it has: {}",
                        names.join(", ")
                    )));
                }
            }
        }
        // `server.KEY` for a suite's one [[server]]; `server.NAME.KEY` for one of several.
        ["server", rest @ ..] if !rest.is_empty() => {
            let servers = match root.get_mut("server") {
                Some(Node { value: Value::List(items), .. }) => items,
                _ => return Err(err("the suite has no [[server]] table".into())),
            };
            let named = |n: &Node| matches!(&n.value, Value::Table(t) if t.get("name").is_some_and(|v| v.value.label() == rest[0]));
            let (server, rest) = match servers.iter().position(named) {
                Some(k) if rest.len() > 1 => (&mut servers[k], &rest[1..]),
                _ if servers.len() > 1 => {
                    return Err(err(
                        "the suite has several [[server]] tables: name one, like server.NAME.KEY=VALUE".into()
                    ));
                }
                _ => (&mut servers[0], rest),
            };
            match server {
                Node { value: Value::Table(t), .. } => (t, rest),
                _ => return Err(err("the suite has no [[server]] table".into())),
            }
        }
        [section @ ("env" | "volume" | "workload" | "bound"), ..] => {
            return Err(err(format!("name the {section} and the key, like {section}.NAME.KEY=VALUE")));
        }
        _ => (root, segments.as_slice()),
    };
    let mut table = target;
    for (i, key) in rest.iter().enumerate() {
        if i + 1 == rest.len() {
            table.set(key, node);
            return Ok(());
        }
        if table.get(key).is_none() {
            table.set(key, Node { value: Value::Table(Table::default()), origin: Origin::Set(text.into()) });
        }
        match table.get_mut(key) {
            Some(Node { value: Value::Table(inner), .. }) => table = inner,
            _ => {
                return Err(err(format!("\"{key}\" is not a table, so \"{path}\" cannot be set")));
            }
        }
    }
    Ok(())
}
