//! The span locator: turns TOML byte offsets into `file:line:col` errors with a fix, so every
//! config mistake names where it is and what to write instead.

use std::ops::Range;

use super::ConfigError;

/// serde's Rust type names in plain words: "expected u32" means nothing to someone writing a
/// TOML file or reading why a results file was refused.
pub fn plain_type_names(message: &str) -> String {
    let mut text = message.to_string();
    for (rust, plain) in [
        ("expected u8", "expected a whole number from 0 to 255"),
        ("expected u16", "expected a whole number from 0 to 65535"),
        ("expected u32", "expected a whole number of 0 or more"),
        ("expected u64", "expected a whole number of 0 or more"),
        ("expected usize", "expected a whole number of 0 or more"),
        ("expected i32", "expected a whole number"),
        ("expected i64", "expected a whole number"),
        ("expected f32", "expected a number"),
        ("expected f64", "expected a number"),
        ("expected a sequence", "expected a list in [ ]"),
        ("expected a map", "expected a table"),
    ] {
        // Only whole words: `u32` must not match inside a longer name.
        let mut out = String::new();
        let mut rest = text.as_str();
        while let Some(i) = rest.find(rust) {
            let after = &rest[i + rust.len()..];
            let whole = !after.starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_');
            out.push_str(&rest[..i]);
            out.push_str(if whole { plain } else { rust });
            rest = after;
        }
        out.push_str(rest);
        text = out;
    }
    text
}

/// Turns byte offsets into `file:line:col` errors.
pub(super) struct Locator<'a> {
    pub(super) path: &'a str,
    pub(super) text: &'a str,
}

impl Locator<'_> {
    pub(super) fn line_col(&self, offset: usize) -> (usize, usize) {
        let offset = offset.min(self.text.len());
        let before = &self.text[..floor_char_boundary(self.text, offset)];
        let line = before.matches('\n').count() + 1;
        let col = before
            .rsplit_once('\n')
            .map_or(before, |(_, tail)| tail)
            .chars()
            .count()
            + 1;
        (line, col)
    }

    pub(super) fn at(
        &self,
        span: Range<usize>,
        message: impl Into<String>,
        fix: Option<&str>,
    ) -> ConfigError {
        let (line, col) = self.line_col(span.start);
        ConfigError::Invalid {
            path: self.path.to_string(),
            line,
            col,
            message: message.into(),
            fix: fix.map(str::to_string),
        }
    }

    /// A key's value where `ok` accepts it, `default` where it is not set; else the error at
    /// its line, with `message` (given the value) and `fix`.
    pub(super) fn check<T>(
        &self,
        v: Option<toml::Spanned<T>>,
        default: T,
        ok: impl Fn(&T) -> bool,
        message: impl FnOnce(&T) -> String,
        fix: &str,
    ) -> Result<T, ConfigError> {
        match v {
            Some(v) if !ok(v.get_ref()) => Err(self.at(v.span(), message(v.get_ref()), Some(fix))),
            Some(v) => Ok(v.into_inner()),
            None => Ok(default),
        }
    }

    /// The key whose value starts at `offset`, and its table: (`Some("suites.pr")`,
    /// `sub_windows`). `None` where the offset is not in a `key = value` line (a table header,
    /// a value on a line of its own inside a multi-line list).
    fn key_at(&self, offset: usize) -> Option<(Option<&str>, &str)> {
        let offset = floor_char_boundary(self.text, offset.min(self.text.len()));
        let start = self.text[..offset].rfind('\n').map_or(0, |i| i + 1);
        let (key, _) = self.text[start..offset].split_once('=')?;
        let key = key.trim();
        if key.is_empty() || key.starts_with('#') {
            return None;
        }
        let table = self.text[..start]
            .lines()
            .rev()
            .map(str::trim)
            .find(|l| l.starts_with('['))
            .and_then(|l| {
                l.split_once(']')
                    .map(|(h, _)| h.trim_start_matches('[').trim())
            });
        Some((table, key))
    }

    pub(super) fn toml_error(&self, err: &toml::de::Error) -> ConfigError {
        let mut message = plain_type_names(err.message().trim());
        // A value error names the key it is about, with its table (the message names only
        // the value, or the key without its table).
        if let Some((table, key)) = err.span().and_then(|s| self.key_at(s.start))
            && !message.contains("unknown field")
        {
            let table = table.map(|t| format!("[{t}] ")).unwrap_or_default();
            message = if message.starts_with(key) {
                format!("{table}{message}")
            } else {
                format!("{table}{key}: {message}")
            };
        }
        // No span: line 1, column 1.
        let span = err.span().unwrap_or(0..0);
        // Value errors of this module's own types say "<problem>: write <fix>".
        if let Some((problem, fix)) = message.split_once(": write ") {
            return self.at(span, problem, Some(&format!("write {fix}")));
        }
        let fix = [
            ("unknown field", "remove the key or correct its spelling (the keys allowed here are listed above; see docs/config.md)"),
            ("unknown variant", "use one of the values listed above"),
            ("missing field", "add the key (see docs/config.md for the full format)"),
            ("invalid type", "write the value with the type named above (strings in quotes, lists in [ ])"),
        ]
        .into_iter()
        .find_map(|(problem, fix)| message.contains(problem).then_some(fix));
        self.at(span, message, fix)
    }
}

fn floor_char_boundary(s: &str, mut i: usize) -> usize {
    while i > 0 && !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

#[cfg(test)]
mod tests {
    use super::{Locator, plain_type_names};

    #[test]
    fn rust_type_names_become_words() {
        assert_eq!(
            plain_type_names("invalid type: string \"8\", expected u32"),
            "invalid type: string \"8\", expected a whole number of 0 or more"
        );
        assert_eq!(plain_type_names("expected u32x"), "expected u32x");
    }

    #[test]
    fn a_value_error_names_its_key_and_table() {
        let text = "model = \"m\"\n[suites.pr]\n# a note\nsub_windows = \"four\"\ncontexts = [\n  \"8k\",\n]\n";
        let loc = Locator {
            path: "c.toml",
            text,
        };
        let at = |needle: &str| text.find(needle).expect("in the text");
        assert_eq!(
            loc.key_at(at("\"four")),
            Some((Some("suites.pr"), "sub_windows"))
        );
        assert_eq!(loc.key_at(at("\"m\"")), Some((None, "model")));
        // A table header, or a value on a line of its own, names no key.
        assert_eq!(loc.key_at(at("suites.pr")), None);
        assert_eq!(loc.key_at(at("\"8k\"")), None);
    }
}
