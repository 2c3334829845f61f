//! cassandra-stress's tokenizer and option groups (`Settings*.java`'s shared parsing): the words
//! joined and split again, `-option` groups, and each group's parameters taken one by one.

use super::ArgError;
use crate::dist::DistSpec;

/// cassandra-stress's tokenizer: the words joined, spaces before `,=()` and after `,=(`
/// removed, split on spaces again.
pub fn tokens(args: &[String]) -> Vec<String> {
    let joined = args.join(" ");
    let mut out = String::with_capacity(joined.len());
    for c in joined.chars() {
        if ",=()".contains(c) {
            while out.ends_with(char::is_whitespace) {
                out.pop();
            }
        }
        if c.is_whitespace() && out.ends_with([',', '=', '(']) {
            continue;
        }
        out.push(c);
    }
    out.split_whitespace().map(str::to_string).collect()
}

/// Groups: the command and its parameters, then each `-option` and its parameters.
pub(super) fn groups(tokens: &[String]) -> Result<Vec<(String, Vec<String>)>, ArgError> {
    let mut out: Vec<(String, Vec<String>)> = Vec::new();
    for (i, t) in tokens.iter().enumerate() {
        if i == 0 || t.starts_with('-') {
            let key = t.to_ascii_lowercase();
            if out.iter().any(|(k, _)| *k == key) {
                return Err(ArgError::Invalid(format!(
                    "{key} is defined multiple times. Each option/command can be specified at most once."
                )));
            }
            out.push((key, Vec::new()));
        } else if let Some(last) = out.last_mut() {
            last.1.push(t.clone());
        }
    }
    Ok(out)
}

/// The parameters of one group, taken one by one; whatever is left over is an error.
pub(super) struct Params {
    pub(super) group: String,
    pub(super) items: Vec<String>,
}

impl Params {
    /// The value of `prefix…` (e.g. `n=`), removed from the list.
    pub(super) fn take(&mut self, prefix: &str) -> Option<String> {
        let pos = self.items.iter().position(|p| p.to_ascii_lowercase().starts_with(prefix))?;
        Some(self.items.remove(pos)[prefix.len()..].to_string())
    }

    pub(super) fn flag(&mut self, name: &str) -> bool {
        match self.items.iter().position(|p| p.eq_ignore_ascii_case(name)) {
            Some(pos) => {
                self.items.remove(pos);
                true
            }
            None => false,
        }
    }

    /// `name(k=v,k=v)` as pairs.
    pub(super) fn map(&mut self, name: &str) -> Result<Option<Vec<(String, String)>>, ArgError> {
        let Some(inner) = self.take(&format!("{name}(")) else { return Ok(None) };
        let inner = inner.strip_suffix(')').ok_or_else(|| self.invalid(&format!("{name}( is not closed")))?;
        inner
            .split(',')
            .filter(|p| !p.is_empty())
            .map(|p| {
                p.split_once('=')
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .ok_or_else(|| self.invalid(&format!("{name}(…) takes key=value pairs, not \"{p}\"")))
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some)
    }

    pub(super) fn invalid(&self, why: &str) -> ArgError {
        ArgError::Invalid(format!("Invalid {} options provided: {why}", self.group))
    }

    pub(super) fn finish(self, allowed: &str) -> Result<(), ArgError> {
        if let Some(p) = self.items.first() {
            return Err(
                self.invalid(&format!("\"{p}\" is not an option of {}; its options are: {allowed}", self.group))
            );
        }
        Ok(())
    }
}

pub(super) fn dist(p: &Params, text: &str) -> Result<DistSpec, ArgError> {
    DistSpec::parse(text).map_err(|e| p.invalid(&e))
}

pub(super) fn number<T: std::str::FromStr>(p: &Params, key: &str, text: &str) -> Result<T, ArgError> {
    text.parse().map_err(|_| p.invalid(&format!("{key}{text} is not a number")))
}

/// A rate like "1000/s".
pub(super) fn per_second(p: &Params, key: &str, text: &str) -> Result<u64, ArgError> {
    let n = text.strip_suffix("/s").ok_or_else(|| p.invalid(&format!("write {key}R/s, e.g. {key}1000/s")))?;
    number(p, key, n)
}
