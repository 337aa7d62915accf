//! Cross-checks of the engine's word: the tokens a cell counts come from the engine's own
//! `usage`, so an engine that over-reports would look faster. Each check holds that usage
//! against a figure the engine cannot inflate as easily:
//!
//! - `chunks_vs_usage`: every streamed chunk with text carries at least one token, so usage
//!   below the chunk count is a lie. (Above it is not: speculative decoding gives up to
//!   1 + draft tokens per chunk, and engines coalesce chunks when the client lags.)
//! - `usage_vs_counter_window`: a generation counter that moves per token (vLLM; or
//!   llama.cpp's per-request one plus `/slots` in-flight tokens) gives the tokens made between
//!   the two edge readings; scaled to the window they must match the client's count.
//! - `usage_vs_counter_requests`: a counter that moves only when a request ends (SGLang,
//!   TensorRT-LLM, whose `trtllm_generation_tokens_total` is added from a finished request's
//!   perf metrics) is reconciled with the usage of the requests that finished between the
//!   readings.
//!
//! Which engines give which is listed in docs/engines.md; an engine recognised without a
//! metrics page (SGLang without `--enable-metrics`) gets only the checks below.
//! - `tokens_per_request` (≤ `max_tokens`) and `stream_tps` (≤ `max_stream_tps`): physics.
//!
//! Each disagreement is allowed a relative tolerance plus the tokens that timing alone can
//! move across an edge (the readings' own uncertainty, one chunk per stream).
//!
//! The prefill layer's samples are held against the engine's prefill counters the same way
//! ([`prefill_cross_check`]): `prompt_tokens_vs_counter` (the prompt tokens the samples'
//! usage reported against the prompt counter's delta) and `prefill_time_vs_counter` (the
//! samples' summed TTFT against the prefill-time counter's delta).

use std::time::Instant;

use super::accounting::UsageTally;
use super::fmt_n;
use crate::bench::counter::CounterReading;
use infergate_schema::results::{
    CounterMoves, CrossCheck, PrefillAgreement, PrefillCounters, PrefillCrossCheck,
};

/// The engine's counter readings at the window's edges and when the window was open.
pub(super) struct CounterEvidence {
    pub(super) start: CounterReading,
    pub(super) end: CounterReading,
    pub(super) moves: CounterMoves,
    pub(super) metric: String,
}

/// Everything the checks look at.
pub(super) struct Evidence<'a> {
    pub(super) concurrency: u32,
    pub(super) max_tokens: u64,
    pub(super) window_s: f64,
    /// Tokens credited in the window, per stream.
    pub(super) stream_window_tokens: &'a [f64],
    pub(super) tally: &'a UsageTally,
    pub(super) counter: Option<CounterEvidence>,
    /// The most tokens one engine step can give a stream (1 + draft tokens per draft), from
    /// the spec-decode counters, when the engine decodes speculatively.
    pub(super) spec_tokens_per_step: Option<f64>,
    /// How late a token may reach the client, seconds: the longest inter-token gap (at least
    /// their mean). On a loaded host the client receives a stalled stream's tokens up to a
    /// long gap after the engine counted them, so the window's edges are that uncertain.
    pub(super) token_lag_s: Option<f64>,
    pub(super) tolerance: f64,
    pub(super) max_stream_tps: f64,
}

impl Evidence<'_> {
    /// The token lag the checks allow at each window edge: [`Evidence::token_lag_s`], at most
    /// `tolerance` of the window. The gaps are the engine's to set: an engine that stalls
    /// its own streams would otherwise widen its own slack without bound (a 1 s lag let a
    /// counter 1.5x the client's pass); capped, its two edges add at most twice the tolerance.
    fn lag_s(&self) -> f64 {
        self.token_lag_s
            .unwrap_or(0.0)
            .min(self.tolerance * self.window_s)
            .max(0.0)
    }
}

/// The checks that ran and, when one failed, the cell's error reason.
pub(super) struct Outcome {
    pub(super) checks: Vec<CrossCheck>,
    pub(super) failure: Option<String>,
}

fn rel(reported: f64, expected: f64) -> f64 {
    if expected > 0.0 {
        (reported - expected) / expected
    } else if reported > 0.0 {
        f64::INFINITY
    } else {
        0.0
    }
}

/// Runs every check the evidence allows.
pub(super) fn cross_check(ev: &Evidence<'_>) -> Outcome {
    let mut checker = Checker {
        ev,
        checks: Vec::new(),
        disagree: Vec::new(),
        implausible: Vec::new(),
    };
    let t = ev.tally;
    if t.requests > 0 && t.text_chunks > 0 {
        checker.chunks_vs_usage();
    }
    if let Some(c) = &ev.counter {
        checker.usage_vs_counter(c);
    }
    if t.requests > 0 {
        checker.tokens_per_request();
    }
    if ev.window_s > 0.0 && !ev.stream_window_tokens.is_empty() {
        checker.stream_tps();
    }
    checker.outcome()
}

/// The checks run so far over one cell's evidence, and what the failed ones said.
struct Checker<'a> {
    ev: &'a Evidence<'a>,
    checks: Vec<CrossCheck>,
    /// Where usage disagrees with the engine's counters.
    disagree: Vec<String>,
    /// Where usage is physically implausible.
    implausible: Vec<String>,
}

impl Checker<'_> {
    /// `chunks_vs_usage`: every streamed chunk with text carries at least one token.
    fn chunks_vs_usage(&mut self) {
        let ev = self.ev;
        let tol = ev.tolerance;
        let t = ev.tally;
        let (expected, reported) = (t.text_chunks as f64, t.usage_tokens as f64);
        let ok = reported >= expected * (1.0 - tol);
        let bound = ev
            .spec_tokens_per_step
            .map(|k| format!("; speculative decoding allows up to {k:.2} per chunk"))
            .unwrap_or_default();
        let detail = format!(
            "{} requests reported {} tokens in {} text chunks ({:.2} per chunk; each chunk is at least one token{bound})",
            t.requests,
            t.usage_tokens,
            t.text_chunks,
            reported / expected
        );
        if !ok {
            self.disagree.push(format!(
                "{} requests reported {} tokens but streamed {} text chunks",
                t.requests, t.usage_tokens, t.text_chunks
            ));
        }
        self.checks.push(CrossCheck {
            name: "chunks_vs_usage".into(),
            expected,
            reported,
            disagreement: rel(reported, expected),
            tolerance: tol,
            slack: 0.0,
            ok,
            detail: Some(detail),
        });
    }

    /// The engine's generation counter between the edge readings: per token (or per request
    /// plus the in-flight tokens) against the window's tokens, else per request against the
    /// usage of the requests that finished between the readings.
    fn usage_vs_counter(&mut self, c: &CounterEvidence) {
        let span = c.end.at.saturating_duration_since(c.start.at).as_secs_f64();
        let per_token_view = match (c.moves, c.start.in_flight, c.end.in_flight) {
            (CounterMoves::PerToken, _, _) => Some("per-token counter"),
            (CounterMoves::PerRequest, Some(_), Some(_)) => {
                Some("per-request counter + in-flight tokens")
            }
            _ => None,
        };
        if span > 0.0 {
            if let Some(view) = per_token_view {
                self.usage_vs_counter_window(c, span, view);
            } else {
                self.usage_vs_counter_requests(c, span);
            }
        }
    }

    /// `usage_vs_counter_window`: the counter's rate between the readings, scaled to the
    /// window, against the tokens the client counted in it.
    fn usage_vs_counter_window(&mut self, c: &CounterEvidence, span: f64, view: &str) {
        let ev = self.ev;
        let tol = ev.tolerance;
        let itl = ev.lag_s();
        let window_tokens: f64 = ev.stream_window_tokens.iter().sum();
        let delta = (c.end.counter + c.end.in_flight.unwrap_or(0.0))
            - (c.start.counter + c.start.in_flight.unwrap_or(0.0));
        let rate = delta.max(0.0) / span;
        let expected = rate * ev.window_s;
        let slack = rate * (c.start.uncertainty_s + c.end.uncertainty_s + 2.0 * itl)
            + 2.0 * f64::from(ev.concurrency) * ev.spec_tokens_per_step.unwrap_or(1.0);
        let ok = (window_tokens - expected).abs() <= tol * expected + slack;
        if !ok {
            self.disagree.push(format!(
                "{} tokens in the {:.1} s window, {} by {} ({view})",
                fmt_n(window_tokens),
                ev.window_s,
                fmt_n(expected),
                c.metric
            ));
        }
        self.checks.push(CrossCheck {
            name: "usage_vs_counter_window".into(),
            expected,
            reported: window_tokens,
            disagreement: rel(window_tokens, expected),
            tolerance: tol,
            slack,
            ok,
            detail: Some(format!(
                "{} moved {} over {span:.3} s ({view}), scaled to the window",
                c.metric,
                fmt_n(delta)
            )),
        });
    }

    /// `usage_vs_counter_requests`: the counter's move between the readings against the usage
    /// of the requests that finished between them; those finishing near an edge are slack.
    fn usage_vs_counter_requests(&mut self, c: &CounterEvidence, span: f64) {
        let ev = self.ev;
        let tol = ev.tolerance;
        let t = ev.tally;
        let itl = ev.lag_s();
        let (a, b) = (c.start.at, c.end.at);
        let expected = (c.end.counter - c.start.counter).max(0.0);
        let near = |at: Instant, edge: Instant, u: f64| {
            let d = at.max(edge).duration_since(at.min(edge));
            d.as_secs_f64() <= u + (2.0 * itl).max(0.01)
        };
        let (mut reported, mut slack) = (0.0, 0.0);
        for &(at, u) in &t.finished {
            if at > a && at <= b {
                reported += u as f64;
            }
            if near(at, a, c.start.uncertainty_s) || near(at, b, c.end.uncertainty_s) {
                slack += u as f64;
            }
        }
        let ran = expected > 0.0 || reported > 0.0;
        let ok = !ran || (reported - expected).abs() <= tol * expected + slack;
        if !ok {
            self.disagree.push(format!(
                "requests that finished between the readings reported {} tokens, {} moved {}",
                fmt_n(reported),
                c.metric,
                fmt_n(expected)
            ));
        }
        self.checks.push(CrossCheck {
            name: "usage_vs_counter_requests".into(),
            expected,
            reported,
            disagreement: rel(reported, expected),
            tolerance: tol,
            slack,
            ok,
            detail: Some(if ran {
                format!(
                    "{} moves when a request ends: reconciled over the requests that finished between the readings ({span:.3} s apart)",
                    c.metric
                )
            } else {
                format!(
                    "{} moves when a request ends and none finished between the readings: not compared",
                    c.metric
                )
            }),
        });
    }

    /// `tokens_per_request`: no request's usage above `max_tokens`.
    fn tokens_per_request(&mut self) {
        let ev = self.ev;
        let t = ev.tally;
        let (bound, reported) = (ev.max_tokens as f64, t.max_request_usage as f64);
        let ok = t.max_request_usage <= ev.max_tokens;
        if !ok {
            self.implausible.push(format!(
                "a request reported {} tokens with max_tokens = {}",
                t.max_request_usage, ev.max_tokens
            ));
        }
        self.checks.push(CrossCheck {
            name: "tokens_per_request".into(),
            expected: bound,
            reported,
            disagreement: if ok { 0.0 } else { rel(reported, bound) },
            tolerance: 0.0,
            slack: 0.0,
            ok,
            detail: Some("the largest usage of one request, at most max_tokens".into()),
        });
    }

    /// `stream_tps`: no stream faster than `max_stream_tps` over the window.
    fn stream_tps(&mut self) {
        let ev = self.ev;
        let fastest = ev
            .stream_window_tokens
            .iter()
            .fold(0.0f64, |m, v| m.max(*v))
            / ev.window_s;
        let ok = fastest <= ev.max_stream_tps;
        if !ok {
            self.implausible.push(format!(
                "a stream made {} tok/s, above max_stream_tps = {}",
                fmt_n(fastest),
                fmt_n(ev.max_stream_tps)
            ));
        }
        self.checks.push(CrossCheck {
            name: "stream_tps".into(),
            expected: ev.max_stream_tps,
            reported: fastest,
            disagreement: if ok {
                0.0
            } else {
                rel(fastest, ev.max_stream_tps)
            },
            tolerance: 0.0,
            slack: 0.0,
            ok,
            detail: Some("the fastest stream's window tokens per second".into()),
        });
    }

    /// The checks that ran and, when one failed, why the cell is an error.
    fn outcome(self) -> Outcome {
        let mut reasons = Vec::new();
        if !self.disagree.is_empty() {
            reasons.push(format!(
                "usage disagrees with the engine's counters: {}",
                self.disagree.join("; ")
            ));
        }
        if !self.implausible.is_empty() {
            reasons.push(format!(
                "usage is implausible: {}",
                self.implausible.join("; ")
            ));
        }
        Outcome {
            checks: self.checks,
            failure: (!reasons.is_empty()).then(|| reasons.join("; ")),
        }
    }
}

/// Prompt tokens a prefill sample's counters may differ by without a disagreement: a BOS
/// token, a prompt's first block kept in a cache.
const PREFILL_TOKEN_SLACK_PER_SAMPLE: f64 = 16.0;

/// Seconds per sample the client's TTFT may exceed the engine's prefill time by on top of the
/// tolerance: the request's trip through HTTP, the prompt's tokenization and the answer's
/// rendering, which no engine counts as prefill (7 ms a request measured against the
/// simulated engine's debug build on a loaded 2-core machine; vLLM tokenizes 8k tokens in
/// a few ms). The client can never have waited less than the engine prefilled, so below the
/// engine's time only the tolerance is allowed.
pub(crate) const PREFILL_TIME_SLACK_PER_SAMPLE_S: f64 = 0.02;

/// What the client saw over the cold prefill samples.
pub(crate) struct PrefillEvidence {
    /// Samples taken between the counter readings.
    pub(crate) samples: usize,
    /// Their prompt tokens, as the engine's usage reported them.
    pub(crate) prompt_tokens: f64,
    /// Their summed TTFT, seconds.
    pub(crate) ttft_s: f64,
    /// Relative disagreement allowed.
    pub(crate) tolerance: f64,
}

/// Holds the cold samples against the engine's prefill counter deltas (`None`: no counter
/// could be read at both edges, which is said, not failed).
pub(crate) fn prefill_cross_check(
    ev: &PrefillEvidence,
    counters: Option<&PrefillCounters>,
) -> PrefillCrossCheck {
    let unavailable = |why: &str| PrefillCrossCheck {
        verdict: PrefillAgreement::Unavailable,
        checks: Vec::new(),
        detail: Some(why.to_string()),
    };
    if ev.samples == 0 || ev.ttft_s <= 0.0 {
        return unavailable("no cold sample to compare");
    }
    let Some(c) = counters else {
        return unavailable(
            "the engine's prompt counter could not be read before and after the samples (no metrics page infergate reads)",
        );
    };
    let tol = ev.tolerance;
    let n = ev.samples as f64;
    let mut checks = Vec::new();
    let mut disagree = Vec::new();

    let slack = PREFILL_TOKEN_SLACK_PER_SAMPLE * n;
    let (expected, reported) = (c.prompt_tokens, ev.prompt_tokens);
    let ok = (reported - expected).abs() <= tol * expected + slack;
    if !ok {
        disagree.push(format!(
            "the samples' usage reported {} prompt tokens, {} moved {}",
            fmt_n(reported),
            c.prompt_metric,
            fmt_n(expected)
        ));
    }
    checks.push(CrossCheck {
        name: "prompt_tokens_vs_counter".into(),
        expected,
        reported,
        disagreement: rel(reported, expected),
        tolerance: tol,
        slack,
        ok,
        detail: Some(format!(
            "{} moved {} over {} cold samples{}",
            c.prompt_metric,
            fmt_n(expected),
            ev.samples,
            if c.excludes_cached {
                " (cached prompt tokens excluded)"
            } else {
                ""
            }
        )),
    });

    if let (Some(metric), Some(seconds)) = (&c.time_metric, c.seconds) {
        let slack = PREFILL_TIME_SLACK_PER_SAMPLE_S * n;
        let (expected, reported) = (seconds, ev.ttft_s);
        let ok = reported >= expected * (1.0 - tol) && reported <= expected * (1.0 + tol) + slack;
        let rate = |tokens: f64, s: f64| if s > 0.0 { tokens / s } else { f64::INFINITY };
        let detail = format!(
            "{metric} moved {expected:.4} s, the samples' TTFT summed to {reported:.4} s: engine {:.0} prompt tok/s, client {:.0}",
            rate(c.prompt_tokens, expected),
            rate(ev.prompt_tokens, reported)
        );
        if !ok {
            disagree.push(detail.clone());
        }
        checks.push(CrossCheck {
            name: "prefill_time_vs_counter".into(),
            expected,
            reported,
            disagreement: rel(reported, expected),
            tolerance: tol,
            slack,
            ok,
            detail: Some(detail),
        });
    }
    PrefillCrossCheck {
        verdict: if disagree.is_empty() {
            PrefillAgreement::WithinTolerance
        } else {
            PrefillAgreement::Disagrees
        },
        checks,
        detail: (!disagree.is_empty()).then(|| disagree.join("; ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use infergate_schema::asserts::{assert_contains, assert_starts_with};
    use std::time::Duration;

    fn prefill_counters(tokens: f64, seconds: Option<f64>) -> PrefillCounters {
        PrefillCounters {
            prompt_metric: "vllm:prompt_tokens_total".into(),
            prompt_tokens: tokens,
            excludes_cached: false,
            time_metric: seconds.map(|_| "vllm:request_prefill_time_seconds_sum".into()),
            seconds,
            engine_prefill_tps: seconds.map(|s| tokens / s),
        }
    }

    /// Three 8k samples at 200k tok/s (41 ms each, 6 ms of step and 1 ms of HTTP on top): the
    /// counters agree, and still with 8 ms of HTTP a request; a counter at 1.5x, a prefill
    /// clock 4x faster than the client's, or one slower than the client waited, does not; no
    /// counters is `unavailable`, never a failure.
    #[test]
    fn prefill_samples_are_held_against_the_engines_counters() {
        let ev = PrefillEvidence {
            samples: 3,
            prompt_tokens: TOKENS,
            ttft_s: 3.0 * 0.048,
            tolerance: 0.05,
        };
        const TOKENS: f64 = 3.0 * 8192.0;
        let check = |ev: &PrefillEvidence, tokens: f64, seconds: Option<f64>| {
            prefill_cross_check(ev, Some(&prefill_counters(tokens, seconds)))
        };
        let ok = check(&ev, TOKENS, Some(3.0 * 0.047));
        assert_eq!(ok.verdict, PrefillAgreement::WithinTolerance, "{ok:?}");
        assert_eq!(ok.checks.len(), 2);
        let slow_trip = PrefillEvidence {
            ttft_s: 3.0 * 0.055,
            ..ev
        };
        let trip = check(&slow_trip, TOKENS, Some(3.0 * 0.047));
        assert_eq!(trip.verdict, PrefillAgreement::WithinTolerance, "{trip:?}");
        let longer_than_waited = check(&ev, TOKENS, Some(3.0 * 0.052));
        assert_eq!(longer_than_waited.verdict, PrefillAgreement::Disagrees);
        let lies = check(&ev, 1.5 * TOKENS, Some(0.141));
        assert_eq!(lies.verdict, PrefillAgreement::Disagrees);
        assert!(lies.detail.unwrap().contains("moved 36864"));
        let fast_clock = check(&ev, TOKENS, Some(0.036));
        assert_eq!(fast_clock.verdict, PrefillAgreement::Disagrees);
        assert!(!fast_clock.checks[1].ok && fast_clock.checks[0].ok);
        let tokens_only = check(&ev, TOKENS, None);
        assert_eq!(tokens_only.verdict, PrefillAgreement::WithinTolerance);
        assert_eq!(tokens_only.checks.len(), 1);
        let none = prefill_cross_check(&ev, None);
        assert_eq!(none.verdict, PrefillAgreement::Unavailable);
        assert!(none.checks.is_empty());
    }

    fn reading(at: Instant, counter: f64) -> CounterReading {
        CounterReading {
            at,
            counter,
            in_flight: None,
            uncertainty_s: 0.001,
        }
    }

    fn tally(requests: u32, chunks: u64, usage: u64, max: u64) -> UsageTally {
        UsageTally {
            text_chunks: chunks,
            usage_tokens: usage,
            requests,
            max_request_usage: max,
            finished: Vec::new(),
        }
    }

    fn evidence<'a>(
        streams: &'a [f64],
        t: &'a UsageTally,
        counter: Option<CounterEvidence>,
    ) -> Evidence<'a> {
        Evidence {
            concurrency: streams.len() as u32,
            max_tokens: 128,
            window_s: 2.0,
            stream_window_tokens: streams,
            tally: t,
            counter,
            spec_tokens_per_step: None,
            token_lag_s: Some(0.01),
            tolerance: 0.05,
            max_stream_tps: 5000.0,
        }
    }

    fn per_token(t0: Instant, tokens_over_2s: f64) -> Option<CounterEvidence> {
        Some(CounterEvidence {
            start: reading(t0, 1000.0),
            end: reading(t0 + Duration::from_secs(2), 1000.0 + tokens_over_2s),
            moves: CounterMoves::PerToken,
            metric: "vllm:generation_tokens_total".into(),
        })
    }

    #[test]
    fn an_honest_cell_passes_every_check() {
        let t0 = Instant::now();
        let streams = [200.0, 200.0];
        let t = tally(6, 640, 640, 128);
        let out = cross_check(&evidence(&streams, &t, per_token(t0, 404.0)));
        assert!(out.failure.is_none(), "{:?}", out.failure);
        let names: Vec<&str> = out.checks.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "chunks_vs_usage",
                "usage_vs_counter_window",
                "tokens_per_request",
                "stream_tps"
            ]
        );
        assert!(out.checks.iter().all(|c| c.ok));
        let w = &out.checks[1];
        assert!((w.expected - 404.0).abs() < 1e-9 && (w.disagreement + 0.0099).abs() < 1e-3);
    }

    #[test]
    fn doubled_usage_disagrees_with_the_counter_and_max_tokens() {
        let t0 = Instant::now();
        let streams = [400.0, 400.0];
        let t = tally(6, 640, 1280, 256);
        let out = cross_check(&evidence(&streams, &t, per_token(t0, 400.0)));
        let why = out.failure.unwrap();
        assert_starts_with(
            &why,
            "usage disagrees with the engine's counters: 800 tokens",
        );
        assert!(why.contains("usage is implausible: a request reported 256 tokens"));
        let w = &out.checks[1];
        assert!(!w.ok && (w.disagreement - 1.0).abs() < 1e-9);
        assert!(out.checks[0].ok, "more tokens than chunks is allowed");
    }

    #[test]
    fn halved_usage_is_below_the_chunk_count() {
        let streams = [100.0];
        let t = tally(3, 384, 192, 64);
        let out = cross_check(&evidence(&streams, &t, None));
        let why = out.failure.unwrap();
        assert_contains(&why, "reported 192 tokens but streamed 384 text chunks");
        assert!((out.checks[0].disagreement + 0.5).abs() < 1e-9);
    }

    #[test]
    fn absurd_rates_are_implausible() {
        let streams = [1e15];
        let t = tally(1, 10, 1_000_000_000_000_000, 1_000_000_000_000_000);
        let out = cross_check(&evidence(&streams, &t, None));
        let why = out.failure.unwrap();
        assert_contains(&why, "above max_stream_tps = 5000");
        assert!(
            !out.checks
                .iter()
                .find(|c| c.name == "stream_tps")
                .unwrap()
                .ok
        );
    }

    #[test]
    fn a_lying_counter_is_caught_and_edge_slack_is_allowed() {
        let t0 = Instant::now();
        let streams = [200.0, 200.0];
        let t = tally(6, 640, 640, 128);
        // The counter says 1.5x what the client saw.
        let out = cross_check(&evidence(&streams, &t, per_token(t0, 600.0)));
        assert_contains(&out.failure.unwrap(), "600 by vllm:generation_tokens_total");
        // 3% off plus a chunk per stream: within tolerance.
        let out = cross_check(&evidence(&streams, &t, per_token(t0, 416.0)));
        assert!(out.failure.is_none());
    }

    /// A loaded host stalls the client: the counter ran 10% ahead of what reached it in the
    /// window. With the gaps' p99 at 100 ms that is the window's edge, not a lie; with 10 ms
    /// gaps it is caught, and a counter 1.5x the client's is caught either way.
    #[test]
    fn a_stalled_clients_lag_is_allowed_and_a_lie_is_still_caught() {
        let t0 = Instant::now();
        let streams = [200.0, 200.0];
        let t = tally(6, 640, 640, 128);
        let lagging = |lag: f64, moved: f64| {
            let mut ev = evidence(&streams, &t, per_token(t0, moved));
            ev.token_lag_s = Some(lag);
            cross_check(&ev).failure
        };
        assert!(lagging(0.1, 444.0).is_none());
        assert!(lagging(0.01, 444.0).is_some());
        assert!(lagging(0.1, 600.0).is_some());
        // An engine that stalls itself for a second does not buy a second of slack.
        assert!(lagging(1.0, 600.0).is_some());
    }

    #[test]
    fn per_request_counters_reconcile_over_finished_requests() {
        let t0 = Instant::now();
        let at = |ms| t0 + Duration::from_millis(ms);
        let mut t = tally(4, 512, 512, 128);
        // Two requests finish inside the readings (1000 ms apart), one long before.
        t.finished = vec![(at(300), 128), (at(700), 128), (at(0), 128)];
        let counter = |moved: f64| {
            Some(CounterEvidence {
                start: reading(at(100), 5000.0),
                end: reading(at(1100), 5000.0 + moved),
                moves: CounterMoves::PerRequest,
                metric: "sglang:generation_tokens_total".into(),
            })
        };
        let streams = [150.0, 150.0];
        let out = cross_check(&evidence(&streams, &t, counter(256.0)));
        let c = &out.checks[1];
        assert_eq!(c.name, "usage_vs_counter_requests");
        assert!(c.ok && c.reported == 256.0, "{c:?}");
        let out = cross_check(&evidence(&streams, &t, counter(128.0)));
        assert!(out.failure.unwrap().contains("reported 256 tokens"));
        // Nothing finished and nothing counted: said, not failed.
        t.finished.clear();
        let out = cross_check(&evidence(&streams, &t, counter(0.0)));
        assert!(out.checks[1].ok);
        assert_contains(out.checks[1].detail.as_deref().unwrap(), "not compared");
    }
}
