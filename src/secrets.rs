//! Values a suite marks secret (`key = { value = "…", secret = true }`): used as given, shown as
//! REDACTED in everything isobench writes for people: the stored suite, run records and raw
//! files, reports, progress lines, warnings and errors. Passwords by key name (`password=`,
//! `-mode password=…`) are redacted where they are parsed; this is for any other value.
//!
//! A secret shorter than 4 characters is redacted in the stored suite but not searched for in
//! free text: replacing every "42" would wreck a report and hide nothing worth hiding.

use std::borrow::Cow;
use std::sync::RwLock;

pub const REDACTED: &str = "REDACTED";

/// The shortest secret searched for in free text.
pub const SHORTEST_SCRUBBED: usize = 4;

/// Every form a secret can take in what isobench writes: as given, JSON-escaped, HTML-escaped.
static FORMS: RwLock<Vec<String>> = RwLock::new(Vec::new());

/// Makes `value` a secret for the rest of this process.
pub fn register(value: &str) {
    if value.chars().count() < SHORTEST_SCRUBBED {
        return;
    }
    let json = serde_json::to_string(value).expect("a string serialises");
    let html = value.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;");
    let mut forms = FORMS.write().unwrap_or_else(|p| p.into_inner());
    for form in [value.to_string(), json[1..json.len() - 1].to_string(), html] {
        if !forms.contains(&form) {
            forms.push(form);
        }
    }
    // Longest first: a secret that contains another is replaced whole.
    forms.sort_by_key(|f| std::cmp::Reverse(f.len()));
}

/// `text` with every secret replaced by REDACTED.
pub fn scrub(text: &str) -> Cow<'_, str> {
    let forms = FORMS.read().unwrap_or_else(|p| p.into_inner());
    if !forms.iter().any(|f| text.contains(f.as_str())) {
        return Cow::Borrowed(text);
    }
    let mut out = text.to_string();
    for form in forms.iter() {
        out = out.replace(form.as_str(), REDACTED);
    }
    Cow::Owned(out)
}

/// As `scrub`, for a file's bytes; bytes that are not UTF-8 text are left as they are.
pub fn scrub_bytes(bytes: &[u8]) -> Cow<'_, [u8]> {
    match std::str::from_utf8(bytes).map(scrub) {
        Ok(Cow::Owned(text)) => Cow::Owned(text.into_bytes()),
        _ => Cow::Borrowed(bytes),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_form_of_a_secret_is_redacted_and_short_ones_are_left_to_the_suite_copy() {
        register("s3cr<et>\"tok");
        register("42");
        assert_eq!(scrub("a s3cr<et>\"tok b"), "a REDACTED b");
        assert_eq!(scrub(r#"{"v": "s3cr<et>\"tok"}"#), r#"{"v": "REDACTED"}"#);
        assert_eq!(scrub("<td>s3cr&lt;et&gt;&quot;tok</td>"), "<td>REDACTED</td>");
        assert_eq!(scrub("cpus 42"), "cpus 42");
        assert!(matches!(scrub("nothing here"), Cow::Borrowed(_)));
        assert_eq!(&*scrub_bytes(b"x s3cr<et>\"tok"), b"x REDACTED");
    }
}
