//! Fault modes of the simulated engine: the failures a gate must survive (engine crash, never
//! ready, HTTP 500s, stalled or broken streams), injectable on demand so tests can prove it does.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// One injected failure. Written `name[=value]` on the command line (`--fault http-500=0.2`)
/// and in profile files (`faults = ["stall-after=50"]`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum Fault {
    /// The process exits with status 1 after this many wall-clock seconds (an engine crash).
    CrashAfter(f64),
    /// `/health` and `/v1/models` answer 503 forever (an engine that never finishes booting).
    NeverReady,
    /// This fraction (0..=1) of completion requests get HTTP 500 (seeded draw per request).
    Http500(f64),
    /// Every stream stops sending after this many output tokens but keeps the connection open.
    StallAfter(u64),
    /// This fraction (0..=1) of streams emit one garbage `data:` line mid-stream.
    MalformedSse(f64),
}

/// Why a fault spec could not be parsed; the message names the accepted forms.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid fault `{spec}`: {why} (expected one of: crash-after=SECS, never-ready, http-500=FRACTION, stall-after=TOKENS, malformed-sse=FRACTION)"
)]
pub struct FaultParseError {
    /// The text as given.
    pub spec: String,
    /// What was wrong with it.
    pub why: String,
}

fn fraction(spec: &str, v: &str) -> Result<f64, FaultParseError> {
    let f: f64 = v.parse().map_err(|_| FaultParseError {
        spec: spec.into(),
        why: format!("`{v}` is not a number"),
    })?;
    if !(0.0..=1.0).contains(&f) {
        return Err(FaultParseError {
            spec: spec.into(),
            why: format!("fraction {v} is outside 0..=1"),
        });
    }
    Ok(f)
}

impl FromStr for Fault {
    type Err = FaultParseError;

    fn from_str(spec: &str) -> Result<Self, Self::Err> {
        let err = |why: &str| FaultParseError {
            spec: spec.into(),
            why: why.into(),
        };
        let (name, value) = match spec.split_once('=') {
            Some((n, v)) => (n.trim(), Some(v.trim())),
            None => (spec.trim(), None),
        };
        match (name, value) {
            ("never-ready", None) => Ok(Fault::NeverReady),
            ("never-ready", Some(_)) => Err(err("never-ready takes no value")),
            ("crash-after", Some(v)) => {
                let secs: f64 = v
                    .trim_end_matches('s')
                    .parse()
                    .map_err(|_| err("SECS must be a number of seconds"))?;
                if !secs.is_finite() || secs < 0.0 {
                    return Err(err("SECS must be >= 0"));
                }
                Ok(Fault::CrashAfter(secs))
            }
            ("http-500", Some(v)) => Ok(Fault::Http500(fraction(spec, v)?)),
            ("malformed-sse", Some(v)) => Ok(Fault::MalformedSse(fraction(spec, v)?)),
            ("stall-after", Some(v)) => Ok(Fault::StallAfter(
                v.parse()
                    .map_err(|_| err("TOKENS must be a whole number"))?,
            )),
            ("crash-after" | "http-500" | "malformed-sse" | "stall-after", None) => {
                Err(err("this fault needs a value after `=`"))
            }
            _ => Err(err("unknown fault name")),
        }
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Fault::CrashAfter(s) => write!(f, "crash-after={s}"),
            Fault::NeverReady => f.write_str("never-ready"),
            Fault::Http500(p) => write!(f, "http-500={p}"),
            Fault::StallAfter(n) => write!(f, "stall-after={n}"),
            Fault::MalformedSse(p) => write!(f, "malformed-sse={p}"),
        }
    }
}

impl TryFrom<String> for Fault {
    type Error = FaultParseError;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        s.parse()
    }
}

impl From<Fault> for String {
    fn from(f: Fault) -> String {
        f.to_string()
    }
}

/// The faults of one server, folded into the questions the request path asks.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct FaultSet {
    /// Exit after this many seconds.
    pub crash_after: Option<f64>,
    /// Health and model listing answer 503.
    pub never_ready: bool,
    /// Fraction of completion requests answered with 500.
    pub http_500: f64,
    /// Streams go silent after this many tokens.
    pub stall_after: Option<u64>,
    /// Fraction of streams that carry one garbage `data:` line.
    pub malformed_sse: f64,
}

impl FaultSet {
    /// Folds a list of faults; a later fault of the same kind wins.
    pub(crate) fn from_faults(faults: &[Fault]) -> Self {
        let mut set = FaultSet::default();
        for f in faults {
            match *f {
                Fault::CrashAfter(s) => set.crash_after = Some(s),
                Fault::NeverReady => set.never_ready = true,
                Fault::Http500(p) => set.http_500 = p,
                Fault::StallAfter(n) => set.stall_after = Some(n),
                Fault::MalformedSse(p) => set.malformed_sse = p,
            }
        }
        set
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_fault_form() {
        assert_eq!("crash-after=5".parse(), Ok(Fault::CrashAfter(5.0)));
        assert_eq!("crash-after=2.5s".parse(), Ok(Fault::CrashAfter(2.5)));
        assert_eq!("never-ready".parse(), Ok(Fault::NeverReady));
        assert_eq!("http-500=0.25".parse(), Ok(Fault::Http500(0.25)));
        assert_eq!("stall-after=40".parse(), Ok(Fault::StallAfter(40)));
        assert_eq!("malformed-sse=1".parse(), Ok(Fault::MalformedSse(1.0)));
    }

    #[test]
    fn rejects_bad_specs_with_a_reason() {
        for bad in [
            "http-500=2",
            "http-500",
            "stall-after=-1",
            "crash-after=soon",
            "never-ready=1",
            "explode",
            "malformed-sse=x",
        ] {
            let e = bad.parse::<Fault>().unwrap_err();
            assert_eq!(e.spec, bad);
            assert!(e.to_string().contains("expected one of"), "{e}");
        }
    }

    #[test]
    fn round_trips_through_text_and_folds() {
        let all = [
            "crash-after=3",
            "never-ready",
            "http-500=0.5",
            "stall-after=7",
        ];
        let faults: Vec<Fault> = all.iter().map(|s| s.parse().unwrap()).collect();
        for (f, s) in faults.iter().zip(all) {
            assert_eq!(f.to_string(), s);
        }
        let set = FaultSet::from_faults(&faults);
        assert_eq!(set.crash_after, Some(3.0));
        assert!(set.never_ready);
        assert_eq!(set.http_500, 0.5);
        assert_eq!(set.stall_after, Some(7));
        assert_eq!(set.malformed_sse, 0.0);
    }
}
