//! A/A comparisons: an environment that is the baseline environment's twin (the same table under
//! another name) is compared with the baseline as any cell is, so every verdict it gets beyond
//! the noise is a false one, and the report counts them. `aa = true` (`isobench run --aa`) adds
//! the twin, named `<baseline>-aa`, to any suite.

use crate::syntax::{Node, Origin, SuiteError, Table, Value};

/// The suffix of the twin `aa = true` adds.
pub const TWIN_SUFFIX: &str = "-aa";

/// With `aa = true` in `root`: a copy of the baseline environment's `[[env]]` table, renamed.
pub(super) fn add_twin(file: &str, root: &mut Table) -> Result<(), SuiteError> {
    let Some(aa) = root.get("aa").cloned() else {
        return Ok(());
    };
    let err = |message: String| SuiteError { file: file.into(), origin: aa.origin.clone(), message };
    match aa.value {
        Value::Bool(true) => {}
        Value::Bool(false) => return Ok(()),
        ref other => {
            return Err(err(format!("the suite: key \"aa\": expected true or false, found {}", other.type_name())));
        }
    }
    let baseline = match root.get("baseline").map(|n| &n.value) {
        Some(Value::Table(t)) => t.str("env").map(str::to_string),
        _ => None,
    };
    let Some(baseline) = baseline else {
        return Err(err(
            "the suite: key \"aa\": an A/A check twins the baseline environment, and the baseline names none; give it one, e.g. baseline = { env = \"host\" }".into(),
        ));
    };
    let twin_name = format!("{baseline}{TWIN_SUFFIX}");
    let Some(Node { value: Value::List(envs), .. }) = root.get_mut("env") else {
        return Ok(()); // the suite's own checks say that [[env]] is missing
    };
    let named = |n: &Node, name: &str| matches!(&n.value, Value::Table(t) if t.str("name") == Some(name));
    if envs.iter().any(|n| named(n, &twin_name)) {
        return Err(err(format!(
            "the suite: key \"aa\": it adds an env named \"{twin_name}\", and the suite has one; rename that env"
        )));
    }
    let Some(original) = envs.iter().find(|n| named(n, &baseline)).cloned() else {
        return Ok(()); // the baseline's own check names the missing env
    };
    let mut twin = original;
    if let Value::Table(t) = &mut twin.value {
        t.set("name", Node { value: Value::Str(twin_name), origin: Origin::Default });
    }
    envs.push(twin);
    Ok(())
}

/// Which of the `[[env]]` tables are twins of the one named `baseline`: every key but the name
/// the same.
pub(super) fn twins(tables: &[&Table], baseline: Option<&str>) -> Vec<bool> {
    // As TOML text: where a value came from (its line) is no part of it.
    let without_name = |t: &Table| {
        let entries = t.entries.iter().filter(|(k, _)| k != "name").cloned().collect();
        crate::syntax::to_toml(&Table { entries })
    };
    let original = tables.iter().find(|t| baseline.is_some() && t.str("name") == baseline).map(|t| without_name(t));
    tables
        .iter()
        .map(|t| t.str("name") != baseline && original.as_ref().is_some_and(|o| *o == without_name(t)))
        .collect()
}
