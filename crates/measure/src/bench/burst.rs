//! The burst / end-to-end layer: a finite set of streamed requests, each with a cold prompt of
//! its own (a random prefix no prefix cache holds), sent on a fixed arrival schedule (Poisson
//! arrivals from a seed, as `vllm bench serve --request-rate --seed`; all at once for `inf`)
//! after the decode cells, on the same boot. Every request is accounted for: completed (a
//! finish reason `length` or `stop`, then the stream's end), ended early, or failed. The
//! latency figures are those of the completed requests, as `vllm bench serve` defines them:
//! TTFT, TPOT = (E2EL − TTFT) / (output tokens − 1), ITL = the gaps between chunks that carry
//! tokens, E2EL = send to last token; throughput is over the burst's wall time.

use std::time::{Duration, Instant};

use futures::future::join_all;
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use tokio_util::sync::CancellationToken;

use super::cell::streamed_request_body;
use super::chunk::{Finish, StreamEvent, parse_stream_event};
use super::client::{EngineClient, SseParser, StreamConn};
use super::prefill::unique_prompt;
use super::prompt::ContextPrompt;
use super::stats;
use infergate_schema::results::{BurstRecord, BurstSettings};

/// Everything the burst needs.
pub(crate) struct BurstPlan<'a> {
    pub(crate) client: &'a EngineClient,
    pub(crate) model: &'a str,
    /// The calibrated prompt size (each request sends a unique prompt of this size).
    pub(crate) prompt: &'a ContextPrompt,
    pub(crate) settings: &'a BurstSettings,
    /// No first token (or no next chunk) within this: the request failed.
    pub(crate) timeout: Duration,
}

/// When each request is sent, seconds after the burst starts: exponential gaps at the mean
/// rate from the settings' seed (the same schedule every run), all at 0 without a rate.
pub(crate) fn arrival_offsets(settings: &BurstSettings) -> Vec<f64> {
    let n = settings.requests as usize;
    let Some(rate) = settings.request_rate.filter(|r| r.is_finite() && *r > 0.0) else {
        return vec![0.0; n];
    };
    let mut rng = StdRng::seed_from_u64(settings.seed);
    let mut at = 0.0;
    (0..n)
        .map(|i| {
            if i > 0 {
                // 1 − U is in (0, 1]: its logarithm is finite.
                let u: f64 = rng.random::<f64>();
                at += -(1.0 - u).ln() / rate;
            }
            at
        })
        .collect()
}

/// How one request ended.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Outcome {
    /// Ended as asked: a finish reason `length` or `stop`, then the stream's end.
    Completed(Completed),
    /// The stream ended early: no finish reason, another one, or fewer tokens than a
    /// `length` finish says were generated.
    Incomplete(String),
    /// HTTP error, time-out, an error or malformed data in the stream.
    Failed(String),
}

/// A completed request's figures, seconds from its send.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Completed {
    pub(crate) ttft_s: f64,
    pub(crate) e2el_s: f64,
    pub(crate) output_tokens: u64,
    pub(crate) prompt_tokens: Option<u64>,
    /// Gaps between successive chunks that carried tokens.
    pub(crate) itl_s: Vec<f64>,
}

/// What one request's stream said so far: fed each SSE payload with its arrival time.
#[derive(Debug, Default)]
pub(crate) struct RequestTrace {
    first_s: Option<f64>,
    last_s: Option<f64>,
    itl_s: Vec<f64>,
    /// Tokens counted from the chunks (usage deltas, else one per chunk with text).
    counted: u64,
    /// The latest cumulative `usage.completion_tokens`.
    usage_tokens: Option<u64>,
    prompt_tokens: Option<u64>,
    finish: Option<Finish>,
    done: bool,
}

impl RequestTrace {
    /// Takes one payload that arrived `at_s` seconds after the send.
    pub(crate) fn on_payload(&mut self, payload: &[u8], at_s: f64) -> Result<(), String> {
        let info = match parse_stream_event(payload).map_err(|f| f.to_string())? {
            StreamEvent::Done => {
                self.done = true;
                return Ok(());
            }
            StreamEvent::Chunk(info) => info,
        };
        if let Some(p) = info.prompt_tokens {
            self.prompt_tokens = Some(p);
        }
        // A chunk with text is a token arrival (a usage-only chunk is not): as many tokens as
        // the cumulative usage moved, else one.
        if info.has_choices && info.has_text {
            let tokens = match info.completion_tokens {
                Some(now) => now.saturating_sub(self.usage_tokens.unwrap_or(0)).max(1),
                None => 1,
            };
            self.counted += tokens;
            match self.last_s {
                None => self.first_s = Some(at_s),
                Some(last) => self.itl_s.push(at_s - last),
            }
            self.last_s = Some(at_s);
        }
        if let Some(now) = info.completion_tokens {
            self.usage_tokens = Some(now.max(self.usage_tokens.unwrap_or(0)));
        }
        if info.finish.is_some() && self.finish.is_none() {
            self.finish = info.finish;
        }
        Ok(())
    }

    /// How the request ended once its body ended (`body_ended`: read to its end; false when
    /// it was cut off), `max_tokens` the tokens asked.
    pub(crate) fn outcome(self, body_ended: bool, max_tokens: u32) -> Outcome {
        let tokens = self.usage_tokens.unwrap_or(self.counted);
        let early = |why: &str| Outcome::Incomplete(format!("{why} after {tokens} tokens"));
        match self.finish {
            None => return early("the stream ended without a finish reason"),
            Some(Finish::Other) => {
                return early("the stream ended with a finish reason other than length or stop");
            }
            Some(Finish::Length) if tokens < u64::from(max_tokens) => {
                return early("finish reason length");
            }
            Some(_) => {}
        }
        if !self.done && !body_ended {
            return early("the stream was cut before its end");
        }
        match (self.first_s, self.last_s) {
            (Some(first), Some(last)) if tokens > 0 => Outcome::Completed(Completed {
                ttft_s: first,
                e2el_s: last,
                output_tokens: tokens,
                prompt_tokens: self.prompt_tokens,
                itl_s: self.itl_s,
            }),
            _ => early("no token"),
        }
    }
}

/// Sends one request at `send_at` and reads its stream; its outcome and when it ended.
async fn one_request(plan: &BurstPlan<'_>, send_at: Instant) -> (Outcome, Instant) {
    tokio::time::sleep_until(send_at.into()).await;
    let prompt = unique_prompt(plan.prompt, rand::random::<u64>());
    let body = streamed_request_body(plan.model, &prompt, plan.settings.max_tokens);
    let sent = Instant::now();
    let mut conn = StreamConn::default();
    let failed = |why: String| (Outcome::Failed(why), Instant::now());
    let max_tokens = plan.settings.max_tokens;
    let mut resp =
        match tokio::time::timeout(plan.timeout, plan.client.start_stream(&mut conn, body)).await {
            Ok(Ok(r)) => r,
            Ok(Err(f)) => return failed(f.to_string()),
            Err(_) => {
                return failed(format!(
                    "no response headers within {:.0} s",
                    plan.timeout.as_secs_f64()
                ));
            }
        };
    let mut parser = SseParser::new();
    let mut trace = RequestTrace::default();
    loop {
        let piece = match tokio::time::timeout(plan.timeout, resp.chunk()).await {
            Ok(p) => p,
            Err(_) => return failed(format!("no data for {:.0} s", plan.timeout.as_secs_f64())),
        };
        let at = sent.elapsed().as_secs_f64();
        let mut problem = None;
        let mut on = |payload: &[u8]| match trace.on_payload(payload, at) {
            Ok(()) => true,
            Err(e) => {
                problem = Some(e);
                false
            }
        };
        match piece {
            Ok(Some(bytes)) => {
                parser.feed(bytes, &mut on);
            }
            Ok(None) => {
                parser.finish(&mut on);
                return match problem {
                    Some(e) => failed(e),
                    None => (trace.outcome(true, max_tokens), Instant::now()),
                };
            }
            // A transport failure after the last token and `[DONE]` is the body's end (a
            // `[DONE]` makes `outcome` read the body as ended); after the first token, a cut.
            Err(_) if trace.done || trace.first_s.is_some() => {
                return (trace.outcome(false, max_tokens), Instant::now());
            }
            Err(f) => return failed(f.to_string()),
        }
        if let Some(e) = problem.or_else(|| parser.overflow().map(|f| f.to_string())) {
            return failed(e);
        }
    }
}

/// Sends the burst and accounts for every request. `None` when cancelled.
pub(crate) async fn measure(
    plan: &BurstPlan<'_>,
    cancel: &CancellationToken,
) -> Option<BurstRecord> {
    let offsets = arrival_offsets(plan.settings);
    let start = Instant::now();
    let requests = offsets
        .iter()
        .map(|&o| one_request(plan, start + Duration::from_secs_f64(o)));
    let ended = tokio::select! {
        _ = cancel.cancelled() => return None,
        all = join_all(requests) => all,
    };
    Some(summarize(
        plan.settings,
        plan.prompt.measured_tokens,
        start,
        &ended,
    ))
}

/// The record of a burst whose requests ended as `ended` (started at `start`).
pub(crate) fn summarize(
    settings: &BurstSettings,
    calibrated_prompt_tokens: u64,
    start: Instant,
    ended: &[(Outcome, Instant)],
) -> BurstRecord {
    let duration_s = ended
        .iter()
        .map(|(_, at)| at.saturating_duration_since(start).as_secs_f64())
        .fold(0.0, f64::max);
    let mut r = BurstRecord {
        settings: settings.clone(),
        sent: ended.len() as u32,
        completed: 0,
        incomplete: 0,
        errors: 0,
        duration_s,
        prompt_tokens: 0,
        output_tokens: 0,
        request_throughput: 0.0,
        output_tps: 0.0,
        total_tps: 0.0,
        ttft_s: None,
        tpot_s: None,
        itl_s: None,
        e2el_s: None,
        good: None,
        goodput: None,
        first_problem: None,
    };
    let (mut ttft, mut tpot, mut itl, mut e2el) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let slo = settings.slo;
    let mut good = 0u32;
    for (outcome, _) in ended {
        match outcome {
            Outcome::Completed(c) => {
                r.completed += 1;
                r.output_tokens += c.output_tokens;
                r.prompt_tokens += c.prompt_tokens.unwrap_or(calibrated_prompt_tokens);
                ttft.push(c.ttft_s);
                e2el.push(c.e2el_s);
                itl.extend_from_slice(&c.itl_s);
                let per_token = (c.output_tokens > 1)
                    .then(|| (c.e2el_s - c.ttft_s) / (c.output_tokens - 1) as f64);
                if let Some(t) = per_token {
                    tpot.push(t);
                }
                // No limit, or no value to hold against it, is met.
                let meets =
                    |limit: Option<f64>, v: Option<f64>| limit.zip(v).is_none_or(|(l, v)| v <= l);
                if meets(slo.ttft_s, Some(c.ttft_s))
                    && meets(slo.tpot_s, per_token)
                    && meets(slo.e2el_s, Some(c.e2el_s))
                {
                    good += 1;
                }
            }
            Outcome::Incomplete(why) => {
                r.incomplete += 1;
                r.first_problem
                    .get_or_insert_with(|| format!("ended early: {why}"));
            }
            Outcome::Failed(why) => {
                r.errors += 1;
                r.first_problem
                    .get_or_insert_with(|| format!("failed: {why}"));
            }
        }
    }
    if duration_s > 0.0 {
        r.request_throughput = f64::from(r.completed) / duration_s;
        r.output_tps = r.output_tokens as f64 / duration_s;
        r.total_tps = (r.output_tokens + r.prompt_tokens) as f64 / duration_s;
    }
    if !slo.is_empty() {
        r.good = Some(good);
        r.goodput = (duration_s > 0.0).then(|| f64::from(good) / duration_s);
    }
    r.ttft_s = stats::exact(&ttft);
    r.tpot_s = stats::exact(&tpot);
    r.itl_s = stats::exact(&itl);
    r.e2el_s = stats::exact(&e2el);
    r
}

/// "burst: 32 requests at 40/s, 32 completed, total 61,000 tok/s, TTFT p90 21.3 ms": the
/// progress line.
pub(crate) fn describe(r: &BurstRecord) -> String {
    let rate = r
        .settings
        .request_rate
        .map_or_else(|| "all at once".to_string(), |x| format!("at {x}/s"));
    let mut line = format!(
        "burst: {} requests {rate}, {} completed, {} ended early, {} failed; {:.2} s, total {:.0} tok/s, output {:.0} tok/s",
        r.sent, r.completed, r.incomplete, r.errors, r.duration_s, r.total_tps, r.output_tps
    );
    if let Some(t) = &r.ttft_s {
        line.push_str(&format!(", TTFT p90 {:.1} ms", t.p90 * 1e3));
    }
    if let Some(p) = &r.first_problem {
        line.push_str("; ");
        line.push_str(p);
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(rate: Option<f64>) -> BurstSettings {
        BurstSettings {
            requests: 32,
            request_rate: rate,
            seed: 0,
            prompt_tokens: 2048,
            max_tokens: 4,
            slo: Default::default(),
        }
    }

    /// The schedule is the seed's: the same every run, Poisson at the mean rate.
    #[test]
    fn arrivals_are_fixed_by_the_seed() {
        let a = arrival_offsets(&settings(Some(40.0)));
        assert_eq!(a, arrival_offsets(&settings(Some(40.0))));
        assert_eq!(a.len(), 32);
        assert_eq!(a[0], 0.0);
        assert!(a.windows(2).all(|w| w[1] >= w[0]));
        let mut other = settings(Some(40.0));
        other.seed = 1;
        assert_ne!(a, arrival_offsets(&other));
        assert_eq!(arrival_offsets(&settings(None)), vec![0.0; 32]);
        // Many arrivals: the mean gap is 1/rate.
        let mut many = settings(Some(40.0));
        many.requests = 20_000;
        let last = *arrival_offsets(&many).last().unwrap();
        assert!((last / 19_999.0 * 40.0 - 1.0).abs() < 0.03, "{last}");
    }

    fn chunk(tokens: u64, finish: Option<&str>) -> Vec<u8> {
        let f = finish.map_or("null".to_string(), |f| format!("\"{f}\""));
        format!(
            r#"{{"choices":[{{"text":"x","finish_reason":{f}}}],"usage":{{"prompt_tokens":2048,"completion_tokens":{tokens}}}}}"#
        )
        .into_bytes()
    }

    /// A stream that ends before its finish reason is not a completed request, whatever it
    /// streamed; one that ends as asked is, with its TTFT, gaps and tokens.
    #[test]
    fn a_stream_ending_early_is_not_done() {
        let mut t = RequestTrace::default();
        t.on_payload(&chunk(1, None), 0.010).unwrap();
        t.on_payload(&chunk(2, None), 0.018).unwrap();
        assert!(matches!(t.outcome(true, 4), Outcome::Incomplete(_)));

        let mut t = RequestTrace::default();
        t.on_payload(&chunk(1, None), 0.010).unwrap();
        t.on_payload(&chunk(2, Some("length")), 0.018).unwrap();
        t.on_payload(b"[DONE]", 0.018).unwrap();
        // `length` after 2 of the 4 tokens asked: the engine cut it.
        assert!(matches!(t.outcome(true, 4), Outcome::Incomplete(_)));

        let mut t = RequestTrace::default();
        t.on_payload(&chunk(1, None), 0.010).unwrap();
        t.on_payload(&chunk(4, Some("abort")), 0.020).unwrap();
        assert!(matches!(t.outcome(true, 4), Outcome::Incomplete(_)));

        let mut t = RequestTrace::default();
        for (i, at) in [0.010, 0.018, 0.026].iter().enumerate() {
            t.on_payload(&chunk(i as u64 + 1, None), *at).unwrap();
        }
        t.on_payload(&chunk(4, Some("length")), 0.034).unwrap();
        // Cut before `[DONE]` and the body's end: not done either.
        let mut cut = RequestTrace::default();
        cut.on_payload(&chunk(4, Some("length")), 0.034).unwrap();
        assert!(matches!(cut.outcome(false, 4), Outcome::Incomplete(_)));
        t.on_payload(b"[DONE]", 0.034).unwrap();
        match t.outcome(true, 4) {
            Outcome::Completed(c) => {
                assert_eq!(c.output_tokens, 4);
                assert_eq!(c.ttft_s, 0.010);
                assert_eq!(c.e2el_s, 0.034);
                assert_eq!(c.itl_s.len(), 3);
            }
            other => panic!("{other:?}"),
        }
    }

    /// Only completed requests enter the figures; goodput counts those within every SLO.
    #[test]
    fn the_summary_accounts_for_every_request() {
        let start = Instant::now();
        let at = |s: f64| start + Duration::from_secs_f64(s);
        let done = |ttft: f64, e2el: f64| {
            Outcome::Completed(Completed {
                ttft_s: ttft,
                e2el_s: e2el,
                output_tokens: 4,
                prompt_tokens: Some(2048),
                itl_s: vec![(e2el - ttft) / 3.0; 3],
            })
        };
        let mut s = settings(Some(40.0));
        s.slo.ttft_s = Some(0.05);
        let ended = vec![
            (done(0.01, 0.04), at(0.04)),
            (done(0.08, 0.11), at(0.5)),
            (Outcome::Incomplete("no finish".into()), at(0.2)),
            (Outcome::Failed("HTTP 500".into()), at(0.1)),
        ];
        let r = summarize(&s, 2000, start, &ended);
        assert_eq!((r.sent, r.completed, r.incomplete, r.errors), (4, 2, 1, 1));
        assert_eq!(r.output_tokens, 8);
        assert_eq!(r.prompt_tokens, 4096);
        assert!((r.duration_s - 0.5).abs() < 1e-6);
        assert!((r.output_tps - 16.0).abs() < 1e-3);
        assert!((r.total_tps - 8208.0).abs() < 0.1);
        assert_eq!(r.ttft_s.unwrap().count, 2);
        assert_eq!(r.itl_s.unwrap().count, 6);
        assert_eq!(r.good, Some(1));
        assert!(r.first_problem.unwrap().contains("ended early"));
    }
}
