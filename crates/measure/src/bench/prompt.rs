//! Deterministic synthetic prompts and their calibration against the server's tokenizer.
//!
//! Every prompt of a cell is a shared prefix (the same text for every stream, so prefix caches
//! behave as with real traffic) plus a tail unique to the stream. Sizes are calibrated against
//! the engine (`/tokenize`, or `usage.prompt_tokens` of a one-token request) to within 2% of the
//! target, whatever the tokenizer's density: small probes first, then probes at the target size,
//! never a blind probe sized by an assumed 4 chars/token.

use std::future::Future;

use super::BenchError;

const WORDS: &[&str] = &[
    "the",
    "river",
    "engine",
    "quietly",
    "measures",
    "a",
    "long",
    "window",
    "of",
    "tokens",
    "while",
    "every",
    "stream",
    "keeps",
    "decoding",
    "under",
    "steady",
    "load",
    "and",
    "kernel",
    "batch",
    "cache",
    "prefix",
    "shared",
    "unique",
    "tail",
    "model",
    "server",
    "latency",
    "throughput",
    "signal",
    "noise",
    "baseline",
    "candidate",
    "regression",
    "gate",
    "north",
    "mountain",
    "copper",
    "violet",
    "seven",
    "eleven",
    "harbor",
    "lantern",
    "orbit",
    "paper",
    "garden",
    "silver",
    "thunder",
    "winter",
    "amber",
    "cobalt",
    "delta",
    "ember",
    "falcon",
    "granite",
    "horizon",
    "island",
    "jasmine",
    "kettle",
    "meadow",
    "nectar",
    "oyster",
    "pepper",
];

/// splitmix64: a tiny, fixed PRNG so prompts are identical across builds and machines.
fn next(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Appends `chars` characters of deterministic word salad (ASCII) seeded by `seed`.
pub(crate) fn push_synthetic_text(out: &mut String, seed: u64, chars: usize) {
    let target = out.len() + chars;
    let mut state = seed ^ 0xC0FF_EE00_D15E_A5E5;
    let mut since_period = 0;
    while out.len() < target {
        let r = next(&mut state);
        let word = WORDS[(r % WORDS.len() as u64) as usize];
        if !out.is_empty() && !out.ends_with(' ') && !out.ends_with('\n') {
            out.push(' ');
        }
        out.push_str(word);
        since_period += 1;
        if since_period > 6 && (r >> 32).is_multiple_of(5) {
            out.push('.');
            since_period = 0;
        }
    }
    out.truncate(target);
}

/// The stream-unique tail's marker; different from the first characters on.
fn tail_for(stream: u32, chars: usize) -> String {
    let mut s = String::with_capacity(chars + 16);
    let marker = format!("\n[{stream}] ");
    if chars <= marker.len() {
        s.push_str(&marker[..chars]);
        return s;
    }
    s.push_str(&marker);
    push_synthetic_text(
        &mut s,
        0x7A11_0000 + u64::from(stream),
        chars - marker.len(),
    );
    s
}

/// The minimal prompt of context 0.
pub(crate) const MINIMAL_PROMPT: &str = "Hello";

/// A calibrated prompt recipe for one context length.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ContextPrompt {
    /// Target context in tokens.
    pub(crate) context_tokens: u64,
    /// Characters of the shared prefix.
    pub(crate) prefix_chars: usize,
    /// Characters of each stream's unique tail.
    pub(crate) tail_chars: usize,
    /// Tokens the server counted for stream 0's prompt at the final calibration step.
    pub(crate) measured_tokens: u64,
    /// Probes the calibration needed.
    pub(crate) probes: u32,
}

impl ContextPrompt {
    /// The prompt of stream `stream` (deterministic).
    pub(crate) fn text(&self, stream: u32) -> String {
        if self.context_tokens == 0 {
            return MINIMAL_PROMPT.to_string();
        }
        let mut s = String::with_capacity(self.prefix_chars + self.tail_chars);
        push_synthetic_text(&mut s, 0x5EED, self.prefix_chars);
        s.push_str(&tail_for(stream, self.tail_chars));
        s
    }

    /// Relative calibration error of stream 0's prompt.
    pub(crate) fn error(&self) -> f64 {
        if self.context_tokens == 0 {
            return 0.0;
        }
        (self.measured_tokens as f64 - self.context_tokens as f64).abs()
            / self.context_tokens as f64
    }
}

/// The tokenizer density measured from small probes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Density {
    /// Characters per token of the synthetic text.
    pub(crate) chars_per_token: f64,
    /// Tokens the server adds to any prompt (BOS and the like).
    pub(crate) overhead_tokens: f64,
}

fn split(chars: usize, unique_percent: f64) -> (usize, usize) {
    let unique = ((chars as f64) * unique_percent.clamp(0.0, 100.0) / 100.0).round() as usize;
    (chars - unique.min(chars), unique.min(chars))
}

fn build(chars: usize, unique_percent: f64, context: u64) -> ContextPrompt {
    let (prefix_chars, tail_chars) = split(chars, unique_percent);
    ContextPrompt {
        context_tokens: context,
        prefix_chars,
        tail_chars,
        measured_tokens: 0,
        probes: 0,
    }
}

/// Measures the density with two small probes (400 and 2,000 characters: at most 2,000
/// tokens even for a 1 char/token tokenizer).
pub(crate) async fn measure_density<F, Fut>(count: &F) -> Result<Density, BenchError>
where
    F: Fn(String) -> Fut,
    Fut: Future<Output = Result<u64, BenchError>>,
{
    let (small, large) = (400usize, 2000usize);
    let mut a = String::new();
    push_synthetic_text(&mut a, 0x5EED, small);
    let mut b = String::new();
    push_synthetic_text(&mut b, 0x5EED, large);
    let na = count(a).await?;
    let nb = count(b).await?;
    if nb <= na {
        return Err(BenchError::Calibration {
            reason: format!(
                "the server counted {na} tokens for {small} characters and {nb} for {large}; \
                 token counts must grow with the prompt"
            ),
        });
    }
    let cpt = (large - small) as f64 / (nb - na) as f64;
    let overhead = (na as f64 - small as f64 / cpt).max(0.0);
    Ok(Density {
        chars_per_token: cpt,
        overhead_tokens: overhead,
    })
}

/// Calibrates one context to within `tolerance` (relative), correcting with probes at the
/// target size (at most 6).
pub(crate) async fn calibrate_context<F, Fut>(
    count: &F,
    density: Density,
    context: u64,
    unique_percent: f64,
    tolerance: f64,
) -> Result<ContextPrompt, BenchError>
where
    F: Fn(String) -> Fut,
    Fut: Future<Output = Result<u64, BenchError>>,
{
    if context == 0 {
        let n = count(MINIMAL_PROMPT.to_string()).await?;
        return Ok(ContextPrompt {
            context_tokens: 0,
            prefix_chars: 0,
            tail_chars: 0,
            measured_tokens: n,
            probes: 1,
        });
    }
    let target = context as f64;
    let content_tokens = (target - density.overhead_tokens).max(1.0);
    let mut chars = (content_tokens * density.chars_per_token).round().max(1.0) as usize;
    let mut best: Option<ContextPrompt> = None;
    for probe in 1..=6u32 {
        let mut p = build(chars, unique_percent, context);
        let n = count(p.text(0)).await?;
        p.measured_tokens = n;
        p.probes = probe;
        let err = p.error();
        let better = best.as_ref().is_none_or(|b| err < b.error());
        if better {
            best = Some(p);
        }
        // Stop at a tight fit; keep going (cheaply) only while outside a tenth of the
        // tolerance and the correction can still move the size.
        if err <= tolerance / 4.0 || (n as f64 - target).abs() < 1.0 {
            break;
        }
        let measured_content = (n as f64 - density.overhead_tokens).max(1.0);
        let next = ((chars as f64) * content_tokens / measured_content)
            .round()
            .max(1.0) as usize;
        // Never grow by more than 1.5x in one step, whatever the last probe said.
        let next = next.min(chars + chars / 2 + 1);
        if next == chars {
            break;
        }
        chars = next;
    }
    let best = best.ok_or_else(|| BenchError::Calibration {
        reason: format!("no probe for context {context}"),
    })?;
    if best.error() > tolerance {
        return Err(BenchError::Calibration {
            reason: format!(
                "context {context}: best prompt has {} tokens ({:.1}% off) after {} probes",
                best.measured_tokens,
                best.error() * 100.0,
                best.probes
            ),
        });
    }
    Ok(best)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    /// A fake tokenizer with a fixed density and a BOS token, recording probe sizes.
    fn counter(
        cpt: f64,
        log: &Mutex<Vec<usize>>,
    ) -> impl Fn(String) -> std::future::Ready<Result<u64, BenchError>> + '_ {
        move |s: String| {
            log.lock().unwrap().push(s.len());
            std::future::ready(Ok(1 + (s.len() as f64 / cpt).ceil() as u64))
        }
    }

    #[tokio::test]
    async fn calibrates_within_two_percent_for_any_density() {
        for cpt in [1.0, 1.7, 4.0, 6.0] {
            let log = Mutex::new(Vec::new());
            let count = counter(cpt, &log);
            let d = measure_density(&count).await.unwrap();
            assert!((d.chars_per_token - cpt).abs() / cpt < 0.02, "{d:?}");
            for ctx in [512u64, 8192, 32768, 131072] {
                let p = calibrate_context(&count, d, ctx, 25.0, 0.02).await.unwrap();
                assert!(p.error() <= 0.02, "cpt {cpt} ctx {ctx}: {p:?}");
                // Stream tails differ, and the prefix is shared.
                let (a, b) = (p.text(0), p.text(1));
                assert_ne!(a, b);
                assert_eq!(a[..p.prefix_chars], b[..p.prefix_chars]);
                assert_eq!(a.len(), p.prefix_chars + p.tail_chars);
            }
            // No probe was ever far larger than the biggest target needs.
            let max_probe = *log.lock().unwrap().iter().max().unwrap();
            assert!(
                max_probe as f64 <= 131072.0 * cpt * 1.1,
                "cpt {cpt}: {max_probe}"
            );
        }
    }

    #[test]
    fn text_is_deterministic_and_exact_length() {
        let mut a = String::new();
        push_synthetic_text(&mut a, 1, 1000);
        let mut b = String::new();
        push_synthetic_text(&mut b, 1, 1000);
        assert_eq!(a, b);
        assert_eq!(a.len(), 1000);
        assert!(a.is_ascii());
        let p = build(1000, 25.0, 250);
        assert_eq!((p.prefix_chars, p.tail_chars), (750, 250));
    }
}
