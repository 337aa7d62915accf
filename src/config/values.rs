//! Value types of the gate config that parse themselves: durations (`"10s"`, `500ms`, `2m` or
//! a number of seconds), context lengths (`"8k"` or a token count) and the engine command (an
//! argument array or a shell command line). Their deserializers reject bad values with a
//! message that says what to write instead; the TOML deserializer attaches the span, so the
//! error names the file, line and column.

use std::fmt;

use serde::Deserialize;
use serde::de::{self, Deserializer, SeqAccess, Visitor};

/// A non-negative duration in seconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Seconds(pub f64);

impl Seconds {
    fn checked(v: f64, shown: &str) -> Result<Self, String> {
        if !v.is_finite() {
            return Err(format!(
                "duration `{shown}` is not a finite number: write e.g. \"10s\", \"500ms\" or \"2m\""
            ));
        }
        if v < 0.0 {
            return Err(format!(
                "duration `{shown}` is negative: write a positive duration such as \"10s\", \"500ms\" or \"2m\""
            ));
        }
        Ok(Seconds(v))
    }
}

impl<'de> Deserialize<'de> for Seconds {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Seconds;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a duration such as \"10s\", \"500ms\", \"2m\" or a number of seconds")
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Seconds, E> {
                Seconds::checked(v as f64, &v.to_string()).map_err(E::custom)
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Seconds, E> {
                Seconds::checked(v as f64, &v.to_string()).map_err(E::custom)
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Seconds, E> {
                Seconds::checked(v, &v.to_string()).map_err(E::custom)
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Seconds, E> {
                let t = v.trim();
                if t.starts_with('-') {
                    return Err(E::custom(format!(
                        "duration `{v}` is negative: write a positive duration such as \"10s\", \"500ms\" or \"2m\""
                    )));
                }
                let s = crate::bench::parse_duration_s(t).map_err(|e| {
                    E::custom(format!(
                        "invalid duration `{v}` ({e}): write e.g. \"10s\", \"500ms\" or \"2m\""
                    ))
                })?;
                Seconds::checked(s, v).map_err(E::custom)
            }
        }
        d.deserialize_any(V)
    }
}

/// A context length in tokens, written `"8k"` (k = 1024, as the seed) or as an integer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ContextLen(pub u64);

impl<'de> Deserialize<'de> for ContextLen {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = ContextLen;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a context length such as \"8k\", \"128k\" or a number of tokens")
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<ContextLen, E> {
                u64::try_from(v).map(ContextLen).map_err(|_| {
                    E::custom(format!(
                        "context length {v} is negative: write a token count >= 0 or e.g. \"8k\""
                    ))
                })
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<ContextLen, E> {
                Ok(ContextLen(v))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<ContextLen, E> {
                let bad = |why: String| {
                    E::custom(format!(
                        "invalid context length `{v}` ({why}): write e.g. \"8k\", \"128k\" or 4096"
                    ))
                };
                if v.contains(',') {
                    return Err(bad("one context per list entry".into()));
                }
                let list = crate::bench::parse_contexts(v.trim()).map_err(bad)?;
                match list.as_slice() {
                    [one] => Ok(ContextLen(*one)),
                    _ => Err(bad("expected exactly one context length".into())),
                }
            }
        }
        d.deserialize_any(V)
    }
}

/// The engine command: an argument vector (run directly) or one string (run by `sh -c`, so
/// pipes, `&&` and environment expansion work).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CommandSpec {
    /// `command = ["vllm", "serve", "{model}", "--port", "{port}"]`
    Argv(Vec<String>),
    /// `command = "source venv/bin/activate && vllm serve {model} --port {port}"`
    Shell(String),
}

impl CommandSpec {
    /// Every string of the command, for placeholder checks.
    pub fn parts(&self) -> Vec<&str> {
        match self {
            CommandSpec::Argv(v) => v.iter().map(String::as_str).collect(),
            CommandSpec::Shell(s) => vec![s.as_str()],
        }
    }
}

impl<'de> Deserialize<'de> for CommandSpec {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = CommandSpec;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str(
                    "an array of strings such as [\"vllm\", \"serve\", \"{model}\", \"--port\", \"{port}\"] or one shell command line",
                )
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<CommandSpec, E> {
                if v.trim().is_empty() {
                    return Err(E::custom(
                        "the engine command is empty: write the command that starts the engine, e.g. [\"vllm\", \"serve\", \"{model}\", \"--port\", \"{port}\"]",
                    ));
                }
                Ok(CommandSpec::Shell(v.to_string()))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<CommandSpec, A::Error> {
                let mut out = Vec::new();
                while let Some(s) = seq.next_element::<String>()? {
                    out.push(s);
                }
                if out.first().is_none_or(|p| p.trim().is_empty()) {
                    return Err(de::Error::custom(
                        "the engine command is empty: write the program first, e.g. [\"vllm\", \"serve\", \"{model}\", \"--port\", \"{port}\"]",
                    ));
                }
                Ok(CommandSpec::Argv(out))
            }
        }
        d.deserialize_any(V)
    }
}
