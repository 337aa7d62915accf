//! The span locator: turns TOML byte offsets into `file:line:col` errors with a fix, so every
//! config mistake names where it is and what to write instead.

use std::ops::Range;

use super::ConfigError;

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

    pub(super) fn toml_error(&self, err: &toml::de::Error) -> ConfigError {
        let mut message = err.message().trim().to_string();
        // Value errors of this module's own types say "<problem>: write <fix>".
        if let Some((problem, fix)) = message.clone().split_once(": write ") {
            message = problem.to_string();
            let (line, col) = err.span().map_or((1, 1), |s| self.line_col(s.start));
            return ConfigError::Invalid {
                path: self.path.to_string(),
                line,
                col,
                message,
                fix: Some(format!("write {fix}")),
            };
        }
        let fix = if message.contains("unknown field") {
            Some(
                "remove the key or correct its spelling (the keys allowed here are listed above; see docs/config.md)",
            )
        } else if message.contains("unknown variant") {
            Some("use one of the values listed above")
        } else if message.contains("missing field") {
            Some("add the key (see docs/config.md for the full format)")
        } else if message.contains("invalid type") {
            Some("write the value with the type named above (strings in quotes, lists in [ ])")
        } else {
            None
        };
        let (line, col) = err.span().map_or((1, 1), |s| self.line_col(s.start));
        ConfigError::Invalid {
            path: self.path.to_string(),
            line,
            col,
            message,
            fix: fix.map(str::to_string),
        }
    }
}

fn floor_char_boundary(s: &str, mut i: usize) -> usize {
    while i > 0 && !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}
