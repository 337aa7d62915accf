//! The prefill layer: per context, cold-prefill samples taken alone on the engine (no decode
//! stream running), each a one-token request whose latency is its time to first token;
//! prefill tok/s = prompt tokens / TTFT, as the reference tool (llm-decode-bench) defines it.
//!
//! The first sample is the context's warm-up: its decode prompt (stream 0), which the first
//! decode cell would otherwise prefill inside its admission, so it costs nothing extra. Then
//! `prefill_samples` prompts of the same size, each opening with a random prefix of its own,
//! so no prefix cache holds any of it. The engine's prompt and prefill-time counters are
//! read before the first cold sample and after the last (their deltas, never a gauge) and
//! held against the client's figures ([`super::cell::crosscheck::prefill_cross_check`]): the
//! window holds every sample the context's median is taken over, the warm-up where it is
//! cold, so the counters' rate and the layer's figure describe the same requests.

use std::time::{Duration, Instant};

use super::cell::crosscheck::{PrefillEvidence, prefill_cross_check};
use super::client::{EngineClient, excerpt};
use super::metrics::{EngineState, MetricsDialect, scrape};
use super::prompt::{ContextPrompt, push_synthetic_text};
use infergate_schema::results::{
    PrefillAgreement, PrefillCounters, PrefillRecord, PrefillSample, PrefillSampleKind,
    PrefillSettings,
};

/// Everything one context's prefill samples need.
pub(crate) struct PrefillPlan<'a> {
    pub(crate) client: &'a EngineClient,
    pub(crate) dialect: Option<MetricsDialect>,
    pub(crate) model: &'a str,
    pub(crate) prompt: &'a ContextPrompt,
    pub(crate) settings: PrefillSettings,
    /// Whether the warm-up prompt can be cold (see [`PrefillSample::cold`]).
    pub(crate) warmup_cold: bool,
    /// Per-request time-out.
    pub(crate) timeout: Duration,
    /// Relative disagreement allowed with the engine's counters.
    pub(crate) tolerance: f64,
}

/// A prompt of `p`'s size that opens with `nonce`: every block of it is new to a prefix cache.
pub(crate) fn unique_prompt(p: &ContextPrompt, nonce: u64) -> String {
    let chars = p.prefix_chars + p.tail_chars;
    let mut s = format!("[{nonce:016x}] ");
    let rest = chars.saturating_sub(s.len());
    push_synthetic_text(&mut s, nonce, rest);
    s
}

/// The body of a one-token, unstreamed, greedy request: a prefill sample's, or the prompt
/// calibration's probe where the engine has no tokenize endpoint.
pub(crate) fn one_token_body(model: &str, prompt: &str) -> serde_json::Value {
    serde_json::json!({
        "model": model, "prompt": prompt, "max_tokens": 1, "stream": false,
        "temperature": 0,
    })
}

/// Sends one one-token request; its prompt tokens (usage, else `calibrated`) and latency.
async fn sample(
    plan: &PrefillPlan<'_>,
    prompt: String,
    calibrated: u64,
) -> Result<(u64, f64), String> {
    let body = one_token_body(plan.model, &prompt);
    let sent = Instant::now();
    let answer = plan
        .client
        .post_json("/v1/completions", &body, plan.timeout)
        .await;
    let ttft = sent.elapsed().as_secs_f64();
    let (status, text) = answer.map_err(|e| format!("prefill sample: {}", e.failure()))?;
    if status != 200 {
        return Err(format!(
            "prefill sample: HTTP {status}: {}",
            excerpt(&text, 200)
        ));
    }
    let tokens = serde_json::from_str::<serde_json::Value>(&text)
        .ok()
        .and_then(|v| v.pointer("/usage/prompt_tokens").and_then(|n| n.as_u64()))
        .unwrap_or(calibrated);
    Ok((tokens, ttft))
}

fn record(kind: PrefillSampleKind, tokens: u64, ttft_s: f64, cold: bool) -> PrefillSample {
    PrefillSample {
        kind,
        prompt_tokens: tokens,
        ttft_s,
        prefill_tps: if ttft_s > 0.0 {
            tokens as f64 / ttft_s
        } else {
            0.0
        },
        cold,
    }
}

/// The engine's prompt counters once they have taken in every finished sample: read again
/// (up to 5 times, 20 ms apart) while the prompt counter still moves, since an engine may
/// count a request just after answering it.
async fn settled(client: &EngineClient, dialect: Option<MetricsDialect>) -> Option<EngineState> {
    let mut last = scrape(client, dialect).await?.1;
    for _ in 0..5 {
        tokio::time::sleep(Duration::from_millis(20)).await;
        let Some((_, now)) = scrape(client, dialect).await else {
            break;
        };
        let moved =
            now.prompt_tokens != last.prompt_tokens || now.prefill_seconds != last.prefill_seconds;
        last = now;
        if !moved {
            break;
        }
    }
    Some(last)
}

/// The counters' deltas between two readings, when the prompt counter was read at both.
pub(crate) fn counter_deltas(
    dialect: MetricsDialect,
    before: &EngineState,
    after: &EngineState,
) -> Option<PrefillCounters> {
    let tokens = (after.prompt_tokens? - before.prompt_tokens?).max(0.0);
    let seconds = before
        .prefill_seconds
        .zip(after.prefill_seconds)
        .map(|(a, b)| (b - a).max(0.0));
    Some(PrefillCounters {
        prompt_metric: dialect.prompt_counter().to_string(),
        prompt_tokens: tokens,
        excludes_cached: dialect.prompt_counter_excludes_cached(),
        time_metric: seconds
            .and(dialect.prefill_time_counter())
            .map(|m| m.trim_end_matches("_sum").to_string()),
        seconds,
        engine_prefill_tps: seconds.filter(|s| *s > 0.0).map(|s| tokens / s),
    })
}

/// The median of `values` (`None` when empty).
fn median(values: &mut [f64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    let n = values.len();
    Some(if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    })
}

/// Takes one context's samples: the warm-up, then the cold ones between counter readings.
/// Never fails: a sample that errors ends the context's samples with its reason.
pub(crate) async fn measure_context(plan: &PrefillPlan<'_>) -> PrefillRecord {
    let p = plan.prompt;
    let mut samples = Vec::new();
    let mut error = None;
    // A cold warm-up is inside the counters' window (it is in the median); one that found
    // part of its prompt in the prefix cache is not (the counter leaves cached tokens out).
    let mut before = None;
    if plan.warmup_cold {
        before = settled(plan.client, plan.dialect).await;
    }
    let (mut cold_tokens, mut cold_ttft, mut cold_n) = (0.0, 0.0, 0usize);
    match sample(plan, p.text(0), p.measured_tokens).await {
        Ok((tokens, ttft)) => {
            if plan.warmup_cold {
                cold_tokens += tokens as f64;
                cold_ttft += ttft;
                cold_n += 1;
            }
            samples.push(record(
                PrefillSampleKind::Warmup,
                tokens,
                ttft,
                plan.warmup_cold,
            ))
        }
        Err(e) => error = Some(e),
    }
    if error.is_none() && !plan.warmup_cold {
        before = settled(plan.client, plan.dialect).await;
    }
    if error.is_none() {
        for _ in 0..plan.settings.samples {
            let prompt = unique_prompt(p, rand::random::<u64>());
            match sample(plan, prompt, p.measured_tokens).await {
                Ok((tokens, ttft)) => {
                    cold_tokens += tokens as f64;
                    cold_ttft += ttft;
                    cold_n += 1;
                    samples.push(record(PrefillSampleKind::Unique, tokens, ttft, true));
                }
                Err(e) => {
                    error = Some(e);
                    break;
                }
            }
        }
    }
    let after = match (&before, error.is_none()) {
        (Some(_), true) => settled(plan.client, plan.dialect).await,
        _ => None,
    };
    let engine_counters = match (plan.dialect, &before, &after) {
        (Some(d), Some(b), Some(a)) => counter_deltas(d, b, a),
        _ => None,
    };
    let cross_check = prefill_cross_check(
        &PrefillEvidence {
            samples: if error.is_none() { cold_n } else { 0 },
            prompt_tokens: cold_tokens,
            ttft_s: cold_ttft,
            tolerance: plan.tolerance,
        },
        engine_counters.as_ref(),
    );
    let mut cold_rates: Vec<f64> = samples
        .iter()
        .filter(|s| s.cold)
        .map(|s| s.prefill_tps)
        .collect();
    PrefillRecord {
        context_tokens: p.context_tokens,
        samples,
        prefill_tps: median(&mut cold_rates),
        engine_counters,
        cross_check,
        error,
    }
}

/// "prefill 8k: 187,000 tok/s (3 cold samples, counters within tolerance)": the progress
/// line of one context.
pub(crate) fn describe(r: &PrefillRecord) -> String {
    let label = infergate_schema::results::context_label(r.context_tokens);
    let cold = r.samples.iter().filter(|s| s.cold).count();
    let verdict = match r.cross_check.verdict {
        PrefillAgreement::WithinTolerance => "counters within tolerance",
        PrefillAgreement::Disagrees => "counters DISAGREE",
        PrefillAgreement::Unavailable => "counters unavailable",
    };
    let rate = r
        .prefill_tps
        .map(|t| format!("{t:.0} tok/s"))
        .unwrap_or_else(|| "no cold sample".into());
    let mut line = format!("prefill {label}: {rate} ({cold} cold samples, {verdict})");
    if let Some(d) = &r.cross_check.detail
        && r.cross_check.verdict == PrefillAgreement::Disagrees
    {
        line.push_str(": ");
        line.push_str(d);
    }
    if let Some(e) = &r.error {
        line.push_str("; ");
        line.push_str(e);
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prompt() -> ContextPrompt {
        ContextPrompt {
            context_tokens: 8192,
            prefix_chars: 24_000,
            tail_chars: 8_000,
            measured_tokens: 8190,
            probes: 2,
        }
    }

    /// Unique prompts are the decode prompt's size, share no opening block with it or with
    /// each other, and are the same for the same nonce.
    #[test]
    fn unique_prompts_share_nothing_a_cache_could_hold() {
        let p = prompt();
        let (a, b) = (unique_prompt(&p, 1), unique_prompt(&p, 2));
        assert_eq!(a.len(), p.prefix_chars + p.tail_chars);
        assert_eq!(b.len(), a.len());
        assert_eq!(a, unique_prompt(&p, 1));
        let decode = p.text(0);
        assert_ne!(a[..64], decode[..64]);
        assert_ne!(a[..64], b[..64]);
    }

    #[test]
    fn deltas_need_the_prompt_counter_at_both_edges() {
        let at = |tokens: Option<f64>, secs: Option<f64>| EngineState {
            prompt_tokens: tokens,
            prefill_seconds: secs,
            ..EngineState::default()
        };
        let d = MetricsDialect::Vllm;
        let (before, after) = (at(Some(100.0), Some(1.0)), at(Some(8292.0), Some(1.05)));
        let c = counter_deltas(d, &before, &after).unwrap();
        assert_eq!(c.prompt_tokens, 8192.0);
        assert!((c.seconds.unwrap() - 0.05).abs() < 1e-9);
        assert!((c.engine_prefill_tps.unwrap() - 163_840.0).abs() < 1e-3);
        assert_eq!(
            c.time_metric.as_deref(),
            Some("vllm:request_prefill_time_seconds")
        );
        let tokens_only = counter_deltas(d, &at(Some(0.0), None), &at(Some(10.0), Some(1.0)));
        assert_eq!(tokens_only.unwrap().seconds, None);
        assert!(counter_deltas(d, &at(None, None), &at(Some(1.0), None)).is_none());
    }

    #[test]
    fn medians() {
        assert_eq!(median(&mut []), None);
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&mut [4.0, 1.0, 2.0, 3.0]), Some(2.5));
    }
}
