//! Exit codes of the `infergate` binary, the contract a required check blocks on, and the
//! setting that says which verdicts take exit 1 (`fail_on`; the verdict → exit mapping itself
//! is `crate::policy`).

use std::fmt;

use serde::{Deserialize, Serialize};

/// The documented exit codes (README "Exit codes").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GateExit {
    /// 0: the matrix ran and nothing regressed (or there was nothing to compare yet).
    Pass,
    /// 1: at least one regression (cell, capacity, or matrix-wide).
    Regression,
    /// 2: bad usage, config or input file; nothing was measured.
    Usage,
    /// 3: the engine or the measurement failed (engine died, never ready, unreachable,
    /// every cell errored, cancelled by SIGINT/SIGTERM).
    Failure,
    /// 1 from `stats-eval --check`: an operating characteristic missed its target. Not a
    /// verdict on a build, so never produced by the gate policy (`crate::policy`).
    TargetMissed,
}

impl GateExit {
    /// The process exit code.
    pub fn code(self) -> u8 {
        match self {
            GateExit::Pass => 0,
            GateExit::Regression | GateExit::TargetMissed => 1,
            GateExit::Usage => 2,
            GateExit::Failure => 3,
        }
    }
}

/// What fails the gate (`[thresholds] fail_on`): one word, or a list of words.
///
/// `"regression"` (default) fails regressions; `"insufficient"` also a gate that was not
/// sensitive enough to say `pass` (older configs' `"inconclusive"` and
/// `"insufficient_baseline"` mean the same); `"never"` is report only.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(try_from = "FailOnWords")]
pub struct FailOn {
    /// Regressions fail (exit 1).
    pub regression: bool,
    /// Insufficient verdicts fail (exit 1).
    pub insufficient: bool,
}

impl FailOn {
    /// Regressions fail; insufficient passes as a neutral check (default).
    pub const REGRESSION: FailOn = FailOn {
        regression: true,
        insufficient: false,
    };
    /// Regressions and insufficient verdicts fail.
    pub const INSUFFICIENT: FailOn = FailOn {
        regression: true,
        insufficient: true,
    };
    /// Report only: never fail on a verdict (a regression is a `neutral` check and exit 0;
    /// engine failures still exit 3).
    pub const NEVER: FailOn = FailOn {
        regression: false,
        insufficient: false,
    };

    /// The one word that names this setting (`verdict.json`'s `fail_on`, the action's input).
    pub fn as_str(self) -> &'static str {
        match (self.regression, self.insufficient) {
            (_, true) => "insufficient",
            (true, false) => "regression",
            (false, false) => "never",
        }
    }

    /// Reads one word as `--fail-on` and the action's `fail-on` input take it (the config's
    /// older words included).
    pub fn parse(word: &str) -> Result<FailOn, String> {
        let word: FailOnWord =
            FailOnWord::parse::<serde::de::value::Error>(word.trim()).map_err(|e| e.to_string())?;
        FailOn::try_from(FailOnWords(vec![word]))
    }
}

impl Serialize for FailOn {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl Default for FailOn {
    fn default() -> Self {
        FailOn::REGRESSION
    }
}

/// One `fail_on` word.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FailOnWord {
    Regression,
    Insufficient,
    Never,
}

impl FailOnWord {
    fn parse<E: serde::de::Error>(word: &str) -> Result<FailOnWord, E> {
        Ok(match word {
            "regression" => FailOnWord::Regression,
            "insufficient" | "inconclusive" | "insufficient_baseline" => FailOnWord::Insufficient,
            "never" => FailOnWord::Never,
            other => {
                return Err(E::custom(format!(
                    "unknown word `{other}`: expected regression, insufficient or never"
                )));
            }
        })
    }
}

/// `fail_on` as written: a word or a list of words.
struct FailOnWords(Vec<FailOnWord>);

impl<'de> Deserialize<'de> for FailOnWords {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Words;
        impl<'de> serde::de::Visitor<'de> for Words {
            type Value = FailOnWords;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a word (regression, insufficient, never) or a list of them")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<FailOnWords, E> {
                Ok(FailOnWords(vec![FailOnWord::parse(v)?]))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<FailOnWords, A::Error> {
                let mut words = Vec::new();
                while let Some(w) = seq.next_element::<String>()? {
                    words.push(FailOnWord::parse(&w)?);
                }
                Ok(FailOnWords(words))
            }
        }
        d.deserialize_any(Words)
    }
}

impl TryFrom<FailOnWords> for FailOn {
    type Error = String;

    fn try_from(FailOnWords(words): FailOnWords) -> Result<FailOn, String> {
        if words.contains(&FailOnWord::Never) {
            return if words.len() == 1 {
                Ok(FailOn::NEVER)
            } else {
                Err("\"never\" (report only) cannot be combined with other words".into())
            };
        }
        if words.is_empty() {
            return Err("an empty list: write \"never\" for report only".into());
        }
        // Every word but `never` includes failing on regressions.
        Ok(if words.contains(&FailOnWord::Insufficient) {
            FailOn::INSUFFICIENT
        } else {
            FailOn::REGRESSION
        })
    }
}

/// Marks an error as the user's to fix (bad flag, config or input file): exit code 2.
///
/// Wrap with `anyhow::Error::new(UsageError(..))` or `.context(..)` on top of one; the binary
/// maps any error chain containing a `UsageError` to [`GateExit::Usage`], everything else to
/// [`GateExit::Failure`].
#[derive(Debug)]
pub(crate) struct UsageError(pub String);

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
    if err.chain().any(|e| e.is::<UsageError>()) {
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
    use crate::asserts::{assert_contains, assert_starts_with};

    #[test]
    fn a_flag_word_round_trips_through_its_name() {
        for f in [FailOn::REGRESSION, FailOn::INSUFFICIENT, FailOn::NEVER] {
            assert_eq!(FailOn::parse(f.as_str()), Ok(f));
            assert_eq!(
                serde_json::to_value(f).ok(),
                Some(serde_json::json!(f.as_str()))
            );
        }
        assert_eq!(FailOn::parse("inconclusive"), Ok(FailOn::INSUFFICIENT));
        let err = FailOn::parse("sometimes").unwrap_err();
        assert_contains(&err, "regression, insufficient or never");
    }

    #[test]
    fn fail_on_reads_a_word_or_a_list_and_the_old_words() {
        let read = |v: serde_json::Value| serde_json::from_value::<FailOn>(v).ok();
        assert_eq!(
            read(serde_json::json!("regression")),
            Some(FailOn::REGRESSION)
        );
        for old in ["insufficient", "inconclusive", "insufficient_baseline"] {
            assert_eq!(read(serde_json::json!(old)), Some(FailOn::INSUFFICIENT));
        }
        assert_eq!(read(serde_json::json!("never")), Some(FailOn::NEVER));
        assert_eq!(
            read(serde_json::json!(["inconclusive", "insufficient_baseline"])),
            Some(FailOn::INSUFFICIENT)
        );
        assert_eq!(read(serde_json::json!(["never", "regression"])), None);
        assert_eq!(read(serde_json::json!([])), None);
        assert_eq!(read(serde_json::json!("sometimes")), None);
    }
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
        assert_starts_with(&text, "writing the results: cannot create notes.txt");
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
