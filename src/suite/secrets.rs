//! Secrets in a suite: values marked `{ value = …, secret = true }` (and keys that name one)
//! are registered to be scrubbed from every output, and redacted in the suite's record.

use crate::syntax::{Node, SuiteError, Table, Value};

/// Keys whose values are secrets anywhere in a suite.
pub fn is_secret_key(key: &str) -> bool {
    let k = key.to_ascii_lowercase();
    ["password", "passwd", "secret", "token", "api_key", "apikey", "credentials"].iter().any(|s| k.contains(s))
}

/// `key = { value = …, secret = true }` anywhere in the suite becomes `key = …`; the values so
/// marked are added to `secrets` (as text).
pub(super) fn unwrap_secrets(file: &str, table: &mut Table, secrets: &mut Vec<String>) -> Result<(), SuiteError> {
    for (key, node) in table.entries.iter_mut() {
        unwrap_secret(file, key, node, secrets)?;
    }
    Ok(())
}

fn unwrap_secret(file: &str, key: &str, node: &mut Node, secrets: &mut Vec<String>) -> Result<(), SuiteError> {
    let error = |message: String| SuiteError { file: file.to_string(), origin: node.origin.clone(), message };
    let wrapped = match &mut node.value {
        Value::Table(inner) => {
            let mut keys: Vec<&str> = inner.entries.iter().map(|(k, _)| k.as_str()).collect();
            keys.sort_unstable();
            if keys != ["secret", "value"] {
                return unwrap_secrets(file, inner, secrets);
            }
            inner.entries.clone()
        }
        Value::List(items) => {
            for item in items.iter_mut() {
                unwrap_secret(file, key, item, secrets)?;
            }
            return Ok(());
        }
        _ => return Ok(()),
    };
    let field = |name: &str| wrapped.iter().find(|(k, _)| k == name).map(|(_, n)| n.clone()).expect("both keys");
    let Value::Bool(secret) = field("secret").value else {
        return Err(error(format!("key \"{key}\": secret must be true or false")));
    };
    let value = field("value");
    if secret {
        secrets.push(match &value.value {
            Value::Str(s) => s.clone(),
            Value::Int(i) => i.to_string(),
            Value::Float(f) => f.to_string(),
            _ => {
                return Err(error(format!(
                    "key \"{key}\": a secret is a string or a number, e.g. {key} = {{ value = \"…\", secret = true }}"
                )));
            }
        });
    }
    node.value = value.value;
    Ok(())
}

pub(super) fn redact(table: &mut Table, secrets: &[String]) {
    for (key, node) in table.entries.iter_mut() {
        let shown = match &node.value {
            Value::Str(s) => Some(s.clone()),
            Value::Int(i) => Some(i.to_string()),
            Value::Float(f) => Some(f.to_string()),
            _ => None,
        };
        match &mut node.value {
            Value::Table(inner) => redact(inner, secrets),
            Value::List(items) => {
                for item in items.iter_mut() {
                    match &mut item.value {
                        Value::Table(inner) => redact(inner, secrets),
                        Value::Str(text) if secrets.contains(text) => *text = "REDACTED".into(),
                        _ => {}
                    }
                }
            }
            _ if is_secret_key(key) || shown.is_some_and(|s| secrets.contains(&s)) => {
                node.value = Value::Str("REDACTED".into())
            }
            Value::Str(text) => {
                *text = crate::secrets::scrub(text).into_owned();
                // cassandra-stress command lines carry `-mode password=…`.
                if text.to_ascii_lowercase().contains("password") {
                    *text = cql_stress::redacted(std::slice::from_ref(text));
                }
            }
            _ => {}
        }
    }
}
