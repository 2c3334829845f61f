//! A workload table's variants: one per combination of its list-valued keys (and of list
//! values inside table-valued keys such as fio's `env`), each parsed by its kind.

use super::{Variant, WorkloadEntry, named};
use crate::kinds;
use crate::syntax::{Fields, Node, Origin, SuiteError, Table, Value};
use crate::workload::ParseContext;

/// A workload table expands into one variant per combination of its list-valued keys (and of
/// list values inside table-valued keys such as fio's `env`).
pub(super) fn workload_entry(
    file: &str,
    table: &Table,
    origin: Origin,
    ctx: &ParseContext,
) -> Result<WorkloadEntry, SuiteError> {
    let named_entry =
        named(file, "workload", table, origin.clone(), kinds::WORKLOADS.iter().map(|k| k.name).collect(), |_, _| {
            Ok(())
        })?;
    let kind = kinds::workload(&named_entry.kind).expect("kind was checked");
    let what = format!("workload \"{}\"", named_entry.name);
    let axes = axes_of(table, kind.list_keys);
    for axis in &axes {
        if axis.values.is_empty() {
            let f = Fields::new(file, what.clone(), table, origin.clone());
            return Err(f.error_at(&axis.path[0], "an empty list gives the matrix no cells; give at least one value"));
        }
    }
    let mut variants = Vec::new();
    let (mut headline, mut target, mut server) = (None, None, None);
    for combination in combinations(&axes) {
        let mut concrete = table.clone();
        let mut params = Vec::new();
        for (axis, value) in axes.iter().zip(&combination) {
            set_path(&mut concrete, &axis.path, (*value).clone());
            params.push((axis.path.last().expect("non-empty path").clone(), value.value.label()));
        }
        let mut f = Fields::new(file, what.clone(), &concrete, origin.clone());
        f.str("name")?;
        f.str("kind")?;
        // The workload's own baseline is checked with the suite's, against the envs and volumes.
        f.node("baseline");
        headline = f.str_list("headline")?;
        server = f.str("server")?;
        target = crate::workload::rate(&mut f, "target")?;
        let density = f.count("density")?.map(|n| n as usize);
        if table.get("capacity").is_some() {
            if let Err(why) = kind.capacity {
                return Err(f.error_at(
                    "capacity",
                    format!("a {} workload {why}; a capacity search is for fio, cql and pgbench workloads", kind.name),
                ));
            }
            if density.is_some() {
                return Err(f.error_at(
                    "capacity",
                    "a capacity search offers one environment its rates; it cannot be combined with density",
                ));
            }
        }
        let spec = (kind.parse)(&mut f, ctx)?;
        if density.is_some() && spec.sliced().is_some() {
            return Err(f.error_at(
                "slice",
                "density runs its sandboxes at once and slices run them in turn; remove slice or density",
            ));
        }
        variants.push(Variant { params, spec, density });
    }
    Ok(WorkloadEntry {
        name: named_entry.name,
        kind: named_entry.kind,
        headline,
        variants,
        target,
        server: None,
        server_name: server,
    })
}

struct Axis {
    path: Vec<String>,
    values: Vec<Node>,
}

fn axes_of(table: &Table, list_keys: &[&str]) -> Vec<Axis> {
    let mut axes = Vec::new();
    for (key, node) in &table.entries {
        if list_keys.contains(&key.as_str()) || key == "headline" {
            continue;
        }
        match &node.value {
            Value::List(values) => axes.push(Axis { path: vec![key.clone()], values: values.clone() }),
            Value::Table(inner) => {
                for (inner_key, inner_node) in &inner.entries {
                    if let Value::List(values) = &inner_node.value {
                        axes.push(Axis { path: vec![key.clone(), inner_key.clone()], values: values.clone() });
                    }
                }
            }
            _ => {}
        }
    }
    axes
}

/// The cartesian product of the axes' values, first axis slowest.
fn combinations(axes: &[Axis]) -> Vec<Vec<&Node>> {
    let mut out: Vec<Vec<&Node>> = vec![Vec::new()];
    for axis in axes {
        out = out
            .into_iter()
            .flat_map(|prefix| {
                axis.values.iter().map(move |v| {
                    let mut next = prefix.clone();
                    next.push(v);
                    next
                })
            })
            .collect();
    }
    out
}

fn set_path(table: &mut Table, path: &[String], node: Node) {
    match path {
        [key] => table.set(key, node),
        [key, rest @ ..] => {
            if let Some(Node { value: Value::Table(inner), .. }) = table.get_mut(key) {
                set_path(inner, rest, node);
            }
        }
        [] => {}
    }
}
