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
    /// Every reported `usage.completion_tokens` is the real count times this factor (an
    /// engine that inflates or deflates its usage); the tokens streamed are unchanged.
    LieUsage(f64),
    /// `/metrics` reports the generation counter times this factor (a counter that disagrees).
    CounterLies(f64),
    /// Every request ends after at most this many output tokens, `ignore_eos` or not (an
    /// engine that clamps `max_tokens` silently, as vLLM does to `max_model_len - prompt`).
    TruncateAt(u64),
    /// A completion request gets HTTP 500 while this many are already in flight: an engine
    /// that serves one stream (or N) and fails as soon as more run together.
    FailAboveConcurrency(u32),
    /// After this many wall-clock seconds the engine stops answering (a hang): every request,
    /// `/health` and `/metrics` included, and every open stream goes silent, but the process
    /// lives and keeps its sockets open.
    HangAfter(f64),
    /// The engine's real KV cache holds only this many tokens of running sequences (their
    /// prompt plus what they generated), though it admits requests as if it held its whole
    /// budget: when the running sequences outgrow it, the newest is preempted (its KV dropped,
    /// recomputed when there is room again), as vLLM does, and
    /// `vllm:num_preemptions_total` counts it. Plain `preempt` holds half the KV budget.
    Preempt(Option<u64>),
    /// llama-cpp-python's server (`python -m llama_cpp.server`, llama_cpp/server/app.py): one
    /// request decodes at a time (the others wait for its lock); with `interrupt` (its
    /// default `interrupt_requests`) a request arriving while one streams aborts that one at
    /// its next chunk, which gets `data: [DONE]` without a `finish_reason` and a chunked body
    /// that never ends (the connection is dropped); streams carry no usage; `/metrics`,
    /// `/tokenize` and `/version` do not exist (404). Written `llama-cpp-python` (interrupt)
    /// or `llama-cpp-python=queue` (`--interrupt_requests false`: requests wait their turn).
    LlamaCppPython {
        /// Abort the streaming request when another arrives.
        interrupt: bool,
    },
    /// After every `steps` engine steps the whole engine pauses `secs` wall seconds (a server
    /// with regular stalls: a garbage collection, a swap), every stream with it; between the
    /// pauses it decodes at its usual pace. Written `stall-every=STEPS:SECS`.
    StallEvery {
        /// Engine steps between two pauses.
        steps: u64,
        /// Length of each pause, wall seconds.
        secs: f64,
    },
    /// Prefill runs this many times slower (prompt tokens per second divided by it): `4` is a
    /// prefill at a quarter of the profile's `prefill_tps`, `1.3` one 30% slower. Decode
    /// steps keep their pace. Written `prefill-slowdown=FACTOR`.
    PrefillSlowdown(f64),
    /// A kernel regression only long contexts hit (an attention path taken above some length):
    /// decode steps of a batch whose mean prompt context is at least `tokens` last `factor`
    /// times longer; shorter contexts and prefill keep their pace, so one row of the matrix
    /// slows and the others do not. Written `long-context-slowdown=TOKENS:FACTOR`.
    LongContextSlowdown {
        /// Mean prompt context (tokens) from which decode steps are slower.
        tokens: u64,
        /// How many times longer such a step lasts (> 0).
        factor: f64,
    },
    /// Chunked-prefill interference: a request that arrives while others decode prefills at
    /// most this many tokens per engine step, each step paying a decode step of the whole
    /// batch on top, so its TTFT grows by a decode step per chunk and the decoding streams'
    /// inter-token gaps are stretched (by a chunk each) for as long as it prefills. A request
    /// arriving at an idle engine prefills in one step as before, so prefill measured alone
    /// does not change. Written `chunked-prefill=TOKENS`.
    ChunkedPrefill(u64),
    /// A rare long inter-token gap: after every `every`-th token of a stream its next tokens
    /// are held back for `factor - 1` engine steps and sent together, so that one gap lasts
    /// `factor` steps while no token is lost (throughput and the typical gap unchanged).
    /// Written `itl-tail=EVERY:FACTOR`. The gap moves a percentile only when more than its
    /// tail share of gaps is stretched: 1 in 50 (2%) moves p99 and leaves p90; 1 in 200
    /// (0.5%) stays under p99.
    ItlTail {
        /// Tokens of a stream between two long gaps.
        every: u64,
        /// Length of the long gap, in engine steps (>= 2).
        factor: u64,
    },
    /// `/metrics` reports the prompt counter (`vllm:prompt_tokens_total`) times this factor
    /// (a prefill counter that disagrees with what the engine served).
    PromptCounterLies(f64),
    /// A decode-first scheduler: a request that arrives while others decode waits this many
    /// wall seconds before it is admitted (its TTFT grows by that much, whatever is cached),
    /// while the decoding streams keep their pace; a request arriving at an idle engine is
    /// admitted at once. Written `admit-delay=SECS`.
    AdmitDelay(f64),
}

/// Why a fault spec could not be parsed; the message names the accepted forms.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid fault `{spec}`: {why} (expected one of: crash-after=SECS, never-ready, http-500=FRACTION, stall-after=TOKENS, malformed-sse=FRACTION, lie-usage=FACTOR, counter-lies=FACTOR, truncate-at=TOKENS, fail-above-concurrency=N, hang-after=SECS, preempt[=TOKENS], llama-cpp-python[=interrupt|queue], stall-every=STEPS:SECS, prefill-slowdown=FACTOR, long-context-slowdown=TOKENS:FACTOR, chunked-prefill=TOKENS, itl-tail=EVERY:FACTOR, prompt-counter-lies=FACTOR, admit-delay=SECS)"
)]
pub struct FaultParseError {
    /// The text as given.
    pub(crate) spec: String,
    /// What was wrong with it.
    pub(crate) why: String,
}

fn factor(spec: &str, v: &str) -> Result<f64, FaultParseError> {
    match v.parse::<f64>() {
        Ok(f) if f.is_finite() && f >= 0.0 => Ok(f),
        _ => Err(parse_error(spec, &format!("`{v}` is not a factor >= 0"))),
    }
}

fn fraction(spec: &str, v: &str) -> Result<f64, FaultParseError> {
    let f: f64 = v
        .parse()
        .map_err(|_| parse_error(spec, &format!("`{v}` is not a number")))?;
    if !(0.0..=1.0).contains(&f) {
        return Err(parse_error(spec, &format!("fraction {v} is outside 0..=1")));
    }
    Ok(f)
}

/// A number of seconds (`5`, `2.5s`), >= 0.
fn seconds(spec: &str, v: &str) -> Result<f64, FaultParseError> {
    let err = |why: &str| parse_error(spec, why);
    let secs: f64 = v
        .trim_end_matches('s')
        .parse()
        .map_err(|_| err("SECS must be a number of seconds"))?;
    if !secs.is_finite() || secs < 0.0 {
        return Err(err("SECS must be >= 0"));
    }
    Ok(secs)
}

impl FromStr for Fault {
    type Err = FaultParseError;

    fn from_str(spec: &str) -> Result<Self, Self::Err> {
        let (name, value) = match spec.split_once('=') {
            Some((n, v)) => (n.trim(), Some(v.trim())),
            None => (spec.trim(), None),
        };
        match value {
            None => fault_without_value(spec, name),
            Some(v) => fault_with_value(spec, name, v),
        }
    }
}

/// The error for `spec`, saying `why`.
fn parse_error(spec: &str, why: &str) -> FaultParseError {
    FaultParseError {
        spec: spec.into(),
        why: why.into(),
    }
}

/// A fault written by its name alone (`never-ready`, `preempt`, `llama-cpp-python`).
fn fault_without_value(spec: &str, name: &str) -> Result<Fault, FaultParseError> {
    match name {
        "never-ready" => Ok(Fault::NeverReady),
        "preempt" => Ok(Fault::Preempt(None)),
        "llama-cpp-python" => Ok(Fault::LlamaCppPython { interrupt: true }),
        // Any other name [`fault_with_value`] knows needs a value.
        _ => match fault_with_value(spec, name, "") {
            Err(e) if e.why == UNKNOWN_FAULT => Err(e),
            _ => Err(parse_error(spec, "this fault needs a value after `=`")),
        },
    }
}

/// Why [`fault_with_value`] refuses a name it does not know (also how
/// [`fault_without_value`] tells a fault that needs a value from an unknown one).
const UNKNOWN_FAULT: &str = "unknown fault name";

/// A fault written `name=value`.
fn fault_with_value(spec: &str, name: &str, v: &str) -> Result<Fault, FaultParseError> {
    let err = |why: &str| parse_error(spec, why);
    match name {
        "preempt" => whole(spec, v, 1, TOKENS).map(|n| Fault::Preempt(Some(n))),
        "never-ready" => Err(err("never-ready takes no value")),
        "llama-cpp-python" => match v {
            "interrupt" => Ok(Fault::LlamaCppPython { interrupt: true }),
            "queue" => Ok(Fault::LlamaCppPython { interrupt: false }),
            _ => Err(err("the value is `interrupt` or `queue`")),
        },
        "stall-every" => stall_every(spec, v),
        "itl-tail" => itl_tail(spec, v),
        "prefill-slowdown" => Ok(Fault::PrefillSlowdown(positive_factor(spec, v)?)),
        "long-context-slowdown" => long_context_slowdown(spec, v),
        "chunked-prefill" => whole(spec, v, 1, TOKENS).map(Fault::ChunkedPrefill),
        "prompt-counter-lies" => Ok(Fault::PromptCounterLies(factor(spec, v)?)),
        "admit-delay" => Ok(Fault::AdmitDelay(seconds(spec, v)?)),
        "crash-after" => Ok(Fault::CrashAfter(seconds(spec, v)?)),
        "hang-after" => Ok(Fault::HangAfter(seconds(spec, v)?)),
        "fail-above-concurrency" => {
            whole(spec, v, 1, "N must be a whole number >= 1").map(Fault::FailAboveConcurrency)
        }
        "http-500" => Ok(Fault::Http500(fraction(spec, v)?)),
        "malformed-sse" => Ok(Fault::MalformedSse(fraction(spec, v)?)),
        "stall-after" => Ok(Fault::StallAfter(
            v.parse()
                .map_err(|_| err("TOKENS must be a whole number"))?,
        )),
        "truncate-at" => whole(spec, v, 1, TOKENS).map(Fault::TruncateAt),
        "lie-usage" => Ok(Fault::LieUsage(factor(spec, v)?)),
        "counter-lies" => Ok(Fault::CounterLies(factor(spec, v)?)),
        _ => Err(err(UNKNOWN_FAULT)),
    }
}

/// Why a count of tokens is refused.
const TOKENS: &str = "TOKENS must be a whole number >= 1";

/// A whole number (its spaces trimmed) of at least `min`, else the error saying `why`.
fn whole<T: FromStr + PartialOrd>(
    spec: &str,
    v: &str,
    min: T,
    why: &str,
) -> Result<T, FaultParseError> {
    (v.trim().parse::<T>().ok())
        .filter(|n| *n >= min)
        .ok_or_else(|| parse_error(spec, why))
}

/// A factor > 0.
fn positive_factor(spec: &str, v: &str) -> Result<f64, FaultParseError> {
    match factor(spec, v)? {
        f if f > 0.0 => Ok(f),
        _ => Err(parse_error(spec, "FACTOR must be > 0")),
    }
}

/// `stall-every=STEPS:SECS`.
fn stall_every(spec: &str, v: &str) -> Result<Fault, FaultParseError> {
    let err = |why: &str| parse_error(spec, why);
    let (steps, secs) = v
        .split_once(':')
        .ok_or_else(|| err("the value is STEPS:SECS, e.g. stall-every=8:0.05"))?;
    Ok(Fault::StallEvery {
        steps: whole(spec, steps, 1, "STEPS must be a whole number >= 1")?,
        secs: seconds(spec, secs.trim())?,
    })
}

/// `itl-tail=EVERY:FACTOR`.
fn itl_tail(spec: &str, v: &str) -> Result<Fault, FaultParseError> {
    let err = |why: &str| parse_error(spec, why);
    let (every, factor) = v
        .split_once(':')
        .ok_or_else(|| err("the value is EVERY:FACTOR, e.g. itl-tail=50:2"))?;
    Ok(Fault::ItlTail {
        every: whole(spec, every, 1, "EVERY must be a whole number >= 1")?,
        factor: whole(
            spec,
            factor,
            2,
            "FACTOR must be a whole number of steps >= 2",
        )?,
    })
}

fn long_context_slowdown(spec: &str, v: &str) -> Result<Fault, FaultParseError> {
    let err = |why: &str| parse_error(spec, why);
    let (tokens, f) = v
        .split_once(':')
        .ok_or_else(|| err("the value is TOKENS:FACTOR, e.g. long-context-slowdown=4096:1.1"))?;
    Ok(Fault::LongContextSlowdown {
        tokens: tokens
            .trim()
            .parse()
            .map_err(|_| err("TOKENS must be a whole number"))?,
        factor: positive_factor(spec, f)?,
    })
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Fault::CrashAfter(s) => write!(f, "crash-after={s}"),
            Fault::NeverReady => f.write_str("never-ready"),
            Fault::Http500(p) => write!(f, "http-500={p}"),
            Fault::StallAfter(n) => write!(f, "stall-after={n}"),
            Fault::MalformedSse(p) => write!(f, "malformed-sse={p}"),
            Fault::LieUsage(x) => write!(f, "lie-usage={x}"),
            Fault::CounterLies(x) => write!(f, "counter-lies={x}"),
            Fault::TruncateAt(n) => write!(f, "truncate-at={n}"),
            Fault::FailAboveConcurrency(n) => write!(f, "fail-above-concurrency={n}"),
            Fault::HangAfter(s) => write!(f, "hang-after={s}"),
            Fault::Preempt(None) => f.write_str("preempt"),
            Fault::Preempt(Some(n)) => write!(f, "preempt={n}"),
            Fault::LlamaCppPython { interrupt: true } => f.write_str("llama-cpp-python"),
            Fault::LlamaCppPython { interrupt: false } => f.write_str("llama-cpp-python=queue"),
            Fault::StallEvery { steps, secs } => write!(f, "stall-every={steps}:{secs}"),
            Fault::PrefillSlowdown(x) => write!(f, "prefill-slowdown={x}"),
            Fault::LongContextSlowdown { tokens, factor } => {
                write!(f, "long-context-slowdown={tokens}:{factor}")
            }
            Fault::ChunkedPrefill(n) => write!(f, "chunked-prefill={n}"),
            Fault::ItlTail { every, factor } => write!(f, "itl-tail={every}:{factor}"),
            Fault::PromptCounterLies(x) => write!(f, "prompt-counter-lies={x}"),
            Fault::AdmitDelay(s) => write!(f, "admit-delay={s}"),
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
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct FaultSet {
    /// Exit after this many seconds.
    pub(crate) crash_after: Option<f64>,
    /// Health and model listing answer 503.
    pub(crate) never_ready: bool,
    /// Fraction of completion requests answered with 500.
    pub(crate) http_500: f64,
    /// Streams go silent after this many tokens.
    pub(crate) stall_after: Option<u64>,
    /// Fraction of streams that carry one garbage `data:` line.
    pub(crate) malformed_sse: f64,
    /// Factor applied to reported `completion_tokens` (1 = honest).
    pub(crate) usage_factor: f64,
    /// Factor applied to the `/metrics` generation counter (1 = honest).
    pub(crate) counter_factor: f64,
    /// Requests end after at most this many tokens.
    pub(crate) truncate_at: Option<u64>,
    /// Completion requests beyond this many in flight get HTTP 500.
    pub(crate) fail_above_concurrency: Option<u32>,
    /// Stop answering (everything, sockets kept open) after this many seconds.
    pub(crate) hang_after: Option<f64>,
    /// Preempt running sequences beyond this real KV size (`Some(None)`: half the budget).
    pub(crate) preempt: Option<Option<u64>>,
    /// llama-cpp-python's server: `Some(interrupt)`.
    pub(crate) llama_cpp_python: Option<bool>,
    /// The engine pauses `(steps, secs)`: `secs` wall seconds after every `steps` steps.
    pub(crate) stall_every: Option<(u64, f64)>,
    /// Prefill time is multiplied by this (1 = the profile's `prefill_tps`).
    pub(crate) prefill_factor: f64,
    /// Decode steps from this mean prompt context on last this many times longer.
    pub(crate) long_context_slowdown: Option<(u64, f64)>,
    /// Arrivals during decoding prefill at most this many tokens per step.
    pub(crate) chunked_prefill: Option<u64>,
    /// `(every, factor)`: one gap of `factor` steps after every `every` tokens of a stream.
    pub(crate) itl_tail: Option<(u64, u64)>,
    /// Factor applied to the `/metrics` prompt counter (1 = honest).
    pub(crate) prompt_counter_factor: f64,
    /// Arrivals during decoding wait this many seconds before admission.
    pub(crate) admit_delay: Option<f64>,
}

impl Default for FaultSet {
    fn default() -> Self {
        FaultSet {
            crash_after: None,
            never_ready: false,
            http_500: 0.0,
            stall_after: None,
            malformed_sse: 0.0,
            usage_factor: 1.0,
            counter_factor: 1.0,
            truncate_at: None,
            fail_above_concurrency: None,
            hang_after: None,
            preempt: None,
            llama_cpp_python: None,
            stall_every: None,
            prefill_factor: 1.0,
            long_context_slowdown: None,
            chunked_prefill: None,
            itl_tail: None,
            prompt_counter_factor: 1.0,
            admit_delay: None,
        }
    }
}

impl FaultSet {
    /// The `completion_tokens` reported for `generated` real tokens.
    pub(crate) fn reported_usage(&self, generated: u64) -> u64 {
        if self.usage_factor == 1.0 {
            generated
        } else {
            // `as` saturates: 10^15 x a few hundred tokens still fits, larger ones clamp.
            (generated as f64 * self.usage_factor).round() as u64
        }
    }

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
                Fault::LieUsage(x) => set.usage_factor = x,
                Fault::CounterLies(x) => set.counter_factor = x,
                Fault::TruncateAt(n) => set.truncate_at = Some(n),
                Fault::FailAboveConcurrency(n) => set.fail_above_concurrency = Some(n),
                Fault::HangAfter(s) => set.hang_after = Some(s),
                Fault::Preempt(n) => set.preempt = Some(n),
                Fault::LlamaCppPython { interrupt } => set.llama_cpp_python = Some(interrupt),
                Fault::StallEvery { steps, secs } => set.stall_every = Some((steps, secs)),
                Fault::PrefillSlowdown(x) => set.prefill_factor = x,
                Fault::LongContextSlowdown { tokens, factor } => {
                    set.long_context_slowdown = Some((tokens, factor));
                }
                Fault::ChunkedPrefill(n) => set.chunked_prefill = Some(n),
                Fault::ItlTail { every, factor } => set.itl_tail = Some((every, factor)),
                Fault::PromptCounterLies(x) => set.prompt_counter_factor = x,
                Fault::AdmitDelay(s) => set.admit_delay = Some(s),
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
        assert_eq!("lie-usage=1e15".parse(), Ok(Fault::LieUsage(1e15)));
        assert_eq!("counter-lies=0.5".parse(), Ok(Fault::CounterLies(0.5)));
        assert_eq!("truncate-at=40".parse(), Ok(Fault::TruncateAt(40)));
        assert_eq!(
            "fail-above-concurrency=1".parse(),
            Ok(Fault::FailAboveConcurrency(1))
        );
        assert_eq!("hang-after=12".parse(), Ok(Fault::HangAfter(12.0)));
        assert_eq!("hang-after=0.5s".parse(), Ok(Fault::HangAfter(0.5)));
        assert_eq!("preempt".parse(), Ok(Fault::Preempt(None)));
        assert_eq!("preempt=300".parse(), Ok(Fault::Preempt(Some(300))));
        assert_eq!(Fault::Preempt(Some(300)).to_string(), "preempt=300");
        for (text, interrupt) in [
            ("llama-cpp-python", true),
            ("llama-cpp-python=interrupt", true),
            ("llama-cpp-python=queue", false),
        ] {
            assert_eq!(text.parse(), Ok(Fault::LlamaCppPython { interrupt }));
        }
        assert_eq!(
            Fault::LlamaCppPython { interrupt: false }.to_string(),
            "llama-cpp-python=queue"
        );
        let stall = Fault::StallEvery {
            steps: 8,
            secs: 0.05,
        };
        assert_eq!("stall-every=8:0.05".parse(), Ok(stall));
        assert!("stall-every=8:50ms".parse::<Fault>().is_err());
        assert_eq!(stall.to_string(), "stall-every=8:0.05");
        assert_eq!(FaultSet::from_faults(&[stall]).stall_every, Some((8, 0.05)));
        // The issue-57 plants: a 4x and a 1.3x prefill, chunked prefill, a p99-only ITL tail,
        // a lying prompt counter.
        for (text, fault) in [
            ("prefill-slowdown=4", Fault::PrefillSlowdown(4.0)),
            ("prefill-slowdown=1.3", Fault::PrefillSlowdown(1.3)),
            (
                "long-context-slowdown=4096:1.1",
                Fault::LongContextSlowdown {
                    tokens: 4096,
                    factor: 1.1,
                },
            ),
            ("chunked-prefill=256", Fault::ChunkedPrefill(256)),
            (
                "itl-tail=50:2",
                Fault::ItlTail {
                    every: 50,
                    factor: 2,
                },
            ),
            ("prompt-counter-lies=1.5", Fault::PromptCounterLies(1.5)),
            ("admit-delay=0.004", Fault::AdmitDelay(0.004)),
        ] {
            assert_eq!(text.parse(), Ok(fault), "{text}");
            assert_eq!(fault.to_string(), text);
        }
        let set = FaultSet::from_faults(&[
            Fault::PrefillSlowdown(1.3),
            Fault::ChunkedPrefill(256),
            Fault::ItlTail {
                every: 200,
                factor: 2,
            },
            Fault::PromptCounterLies(2.0),
            Fault::LongContextSlowdown {
                tokens: 4096,
                factor: 1.1,
            },
        ]);
        assert_eq!(set.prefill_factor, 1.3);
        assert_eq!(set.long_context_slowdown, Some((4096, 1.1)));
        assert_eq!(set.chunked_prefill, Some(256));
        assert_eq!(set.itl_tail, Some((200, 2)));
        assert_eq!(set.prompt_counter_factor, 2.0);
        assert_eq!(FaultSet::default().prefill_factor, 1.0);
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
            "lie-usage",
            "lie-usage=-2",
            "counter-lies=inf",
            "truncate-at=0",
            "fail-above-concurrency=0",
            "fail-above-concurrency=1.5",
            "fail-above-concurrency",
            "hang-after=-1",
            "hang-after",
            "preempt=0",
            "preempt=lots",
            "llama-cpp-python=sometimes",
            "stall-every",
            "stall-every=8",
            "stall-every=0:0.1",
            "stall-every=8:-1",
            "prefill-slowdown=0",
            "prefill-slowdown",
            "long-context-slowdown",
            "long-context-slowdown=4096",
            "long-context-slowdown=4k:1.1",
            "long-context-slowdown=4096:0",
            "chunked-prefill=0",
            "itl-tail=200",
            "itl-tail=0:2",
            "itl-tail=200:1",
            "prompt-counter-lies=-1",
            "admit-delay",
            "admit-delay=-1",
        ] {
            let e = bad.parse::<Fault>().unwrap_err();
            assert_eq!(e.spec, bad);
            assert!(e.to_string().contains("expected one of"), "{e}");
        }
        // A known fault without its value is told so; an unknown name is not a known one.
        for (spec, why) in [
            ("http-500", "this fault needs a value after `=`"),
            ("admit-delay", "this fault needs a value after `=`"),
            ("explode", UNKNOWN_FAULT),
        ] {
            assert_eq!(spec.parse::<Fault>().unwrap_err().why, why, "{spec}");
        }
    }

    #[test]
    fn round_trips_through_text_and_folds() {
        let all = [
            "crash-after=3",
            "never-ready",
            "http-500=0.5",
            "stall-after=7",
            "fail-above-concurrency=2",
            "hang-after=4.5",
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
        assert_eq!(set.fail_above_concurrency, Some(2));
        assert_eq!(set.hang_after, Some(4.5));
    }
}
