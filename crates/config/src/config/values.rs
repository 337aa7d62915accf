//! Value types of the gate config that parse themselves: durations (`"10s"`, `500ms`, `2m` or
//! a number of seconds), context lengths (`"8k"` or a token count) and the engine command (an
//! argument array or a shell command line). Their deserializers reject bad values with a
//! message that says what to write instead; the TOML deserializer attaches the span, so the
//! error names the file, line and column. The same parsers read `bench`'s flags
//! (`--contexts 0,8k`, `--duration 10s`, `--concurrency 1,2,4`), so a value means one thing.

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
                let s = parse_duration_s(t).map_err(|e| {
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
pub(crate) struct ContextLen(pub u64);

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
                let list = parse_contexts(v.trim()).map_err(bad)?;
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

/// Parses a context list such as `0,8k,32k,128k,1.5k,4096` (`k` = 1024 tokens, as the seed).
pub fn parse_contexts(s: &str) -> Result<Vec<u64>, String> {
    let mut out = Vec::new();
    for part in s.split(',') {
        let p = part.trim();
        if p.is_empty() {
            return Err(format!("'{s}' has an empty entry; use e.g. 0,8k,32k"));
        }
        let lower = p.to_ascii_lowercase();
        let (num, mult) = [('k', 1024.0), ('m', 1024.0 * 1024.0)]
            .into_iter()
            .find_map(|(unit, mult)| Some((lower.strip_suffix(unit)?, mult)))
            .unwrap_or((lower.as_str(), 1.0));
        let v: f64 = num
            .parse()
            .ok()
            .filter(|v: &f64| v.is_finite() && *v >= 0.0)
            .ok_or_else(|| format!("'{p}' is not a size; use e.g. 0,8k,32k"))?;
        let tokens = (v * mult).round();
        if tokens > 16.0 * 1024.0 * 1024.0 {
            return Err(format!(
                "'{p}' is larger than 16M tokens; use e.g. 0,8k,32k"
            ));
        }
        out.push(tokens as u64);
    }
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

/// Parses a duration such as `10s`, `500ms`, `2m` or `10` (seconds).
pub fn parse_duration_s(s: &str) -> Result<f64, String> {
    let t = s.trim().to_ascii_lowercase();
    // `ms` before `s` and `m`.
    let (num, mult) = [("ms", 0.001), ("s", 1.0), ("m", 60.0), ("h", 3600.0)]
        .into_iter()
        .find_map(|(unit, mult)| Some((t.strip_suffix(unit)?, mult)))
        .unwrap_or((t.as_str(), 1.0));
    num.trim()
        .parse::<f64>()
        .ok()
        .filter(|v| v.is_finite() && *v >= 0.0)
        .map(|v| v * mult)
        .ok_or_else(|| format!("'{s}' is not a duration; use e.g. 10s, 500ms or 2m"))
}

/// The most streams one cell may keep running (config suites and `bench --concurrency`).
pub(crate) const MAX_CONCURRENCY: u32 = 65_536;

/// Parses a concurrency list such as `1,2,4,8` (each at least 1).
pub fn parse_concurrency(s: &str) -> Result<Vec<u32>, String> {
    let mut out = s
        .split(',')
        .map(|part| {
            let p = part.trim();
            p.parse()
                .ok()
                .filter(|v| (1..=MAX_CONCURRENCY).contains(v))
                .ok_or_else(|| {
                    format!(
                        "'{p}' is not a concurrency level (1..={MAX_CONCURRENCY}); use e.g. 1,2,4,8"
                    )
                })
        })
        .collect::<Result<Vec<u32>, _>>()?;
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use infergate_schema::asserts::assert_contains;

    #[test]
    fn contexts_parse_like_the_seed() {
        assert_eq!(
            parse_contexts("0,8k,32k,128k,1.5k,4096").unwrap(),
            vec![0, 1536, 4096, 8192, 32768, 131072]
        );
        assert_eq!(parse_contexts(" 8K ").unwrap(), vec![8192]);
        let e = parse_contexts("0,8q").unwrap_err();
        assert_contains(&e, "'8q' is not a size; use e.g. 0,8k,32k");
        assert!(parse_contexts("8k,,16k").is_err());
        assert!(parse_contexts("-1").is_err());
    }

    #[test]
    fn durations_parse() {
        assert_eq!(parse_duration_s("10s").unwrap(), 10.0);
        assert_eq!(parse_duration_s("500ms").unwrap(), 0.5);
        assert_eq!(parse_duration_s("2m").unwrap(), 120.0);
        assert_eq!(parse_duration_s("10").unwrap(), 10.0);
        assert_eq!(parse_duration_s("1.5s").unwrap(), 1.5);
        assert!(
            parse_duration_s("ten")
                .unwrap_err()
                .contains("use e.g. 10s")
        );
        assert!(parse_duration_s("-1s").is_err());
    }

    #[test]
    fn concurrency_parses() {
        assert_eq!(parse_concurrency("4,1,2").unwrap(), vec![1, 2, 4]);
        assert!(parse_concurrency("0").is_err());
        assert!(parse_concurrency("a").is_err());
    }
}
