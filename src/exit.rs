//! Exit codes of the `infergate` binary: the contract a required check blocks on.

use std::fmt;

/// The documented exit codes (README "Exit codes").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GateExit {
    /// 0: the matrix ran and nothing regressed (or there was nothing to compare yet).
    Pass = 0,
    /// 1: at least one regression (cell, capacity, or matrix-wide).
    Regression = 1,
    /// 2: bad usage, config or input file; nothing was measured.
    Usage = 2,
    /// 3: the engine or the measurement failed (engine died, never ready, unreachable,
    /// every cell errored, cancelled by SIGINT/SIGTERM).
    Failure = 3,
}

impl GateExit {
    /// The process exit code.
    pub fn code(self) -> u8 {
        self as u8
    }
}

/// Marks an error as the user's to fix (bad flag, config or input file): exit code 2.
///
/// Wrap with `anyhow::Error::new(UsageError(..))` or `.context(..)` on top of one; the binary
/// maps any error chain containing a `UsageError` to [`GateExit::Usage`], everything else to
/// [`GateExit::Failure`].
#[derive(Debug)]
pub struct UsageError(pub String);

impl fmt::Display for UsageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

/// Builds an `anyhow::Error` that exits with code 2.
pub fn usage(msg: impl Into<String>) -> anyhow::Error {
    anyhow::Error::new(UsageError(msg.into()))
}

/// The exit code an error chain maps to.
pub fn exit_for_error(err: &anyhow::Error) -> GateExit {
    if err
        .chain()
        .any(|e| e.downcast_ref::<UsageError>().is_some())
    {
        GateExit::Usage
    } else {
        GateExit::Failure
    }
}

/// The message of an error chain for people: each cause once. Typed errors often quote their
/// source in their own text ("cannot create X: File exists (os error 17)") and also return it
/// as `source()`; `{:#}` would then print the cause twice. A cause whose text the message
/// already holds is left out.
pub fn error_text(err: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in err.chain() {
        let part = cause.to_string();
        if part.is_empty() || text.contains(&part) {
            continue;
        }
        if !text.is_empty() {
            text.push_str(": ");
        }
        text.push_str(&part);
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use anyhow::Context;

    #[test]
    fn each_cause_is_said_once() {
        #[derive(Debug, thiserror::Error)]
        #[error("cannot create notes.txt: {source}")]
        struct Create {
            #[source]
            source: std::io::Error,
        }
        let io = std::io::Error::from_raw_os_error(17);
        let e = anyhow::Error::new(Create { source: io }).context("writing the results");
        let text = error_text(&e);
        assert_eq!(text.matches("os error 17").count(), 1, "{text}");
        assert!(
            text.starts_with("writing the results: cannot create notes.txt"),
            "{text}"
        );
    }

    #[test]
    fn usage_errors_map_to_2_even_under_context() {
        let e: anyhow::Result<()> = Err(usage("bad --contexts"));
        let e = e.context("parsing arguments").unwrap_err();
        assert_eq!(exit_for_error(&e), GateExit::Usage);
        assert_eq!(
            exit_for_error(&anyhow::anyhow!("engine died")),
            GateExit::Failure
        );
    }
}
