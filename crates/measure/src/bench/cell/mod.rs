//! One sustained-decode cell: keep C streams generating, wait until the engine really runs all
//! of them (or declare the cell capacity-limited as soon as admission stalls), warm up, then
//! count tokens over a steady-state window split into sub-windows.
//!
//! The parts: `accounting` (tokens per sub-window, the shared counters), `stream` (one
//! task per stream), `admission` (readiness or capacity-limited), `window` (the engine's
//! view during the window), `spec_decode` (speculative-decoding figures). This file runs
//! them in order and aggregates the result.

mod accounting;
mod admission;
pub(crate) mod crosscheck;
mod cut;
mod spec_decode;
mod stream;
mod window;

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use tokio_util::sync::CancellationToken;

use super::EventLog;
use super::client::EngineClient;
use super::counter::{self, EdgeReading};
use super::lateness::HostLatenessProbe;
use super::metrics::MetricsDialect;
pub(crate) use super::metrics::scrape;
use super::prompt::ContextPrompt;
use super::stats;
use accounting::{CellShared, StreamRecord, UsageTally};
use admission::Admission;
use crosscheck::{CounterEvidence, Evidence, cross_check};
use infergate_schema::results::{
    CellResult, CellStatus, CellTiming, Event, EventKind, RequestTally, SpecDecodeStats,
    TokenSource, TruncatedRequests, context_label,
};
use infergate_telemetry::telemetry::WindowSampler;
use spec_decode::spec_stats;
use stream::run_stream;
use window::{WindowLoad, poll_until};

/// Everything one cell needs to know.
#[derive(Clone)]
pub(crate) struct CellSpec {
    pub(crate) concurrency: u32,
    pub(crate) context_tokens: u64,
    pub(crate) prompt: ContextPrompt,
    pub(crate) model: String,
    /// The matrix's timing, clamped to workable values; `ready_timeout_s` is already scaled
    /// for the context length.
    pub(crate) timing: CellTiming,
    /// How often `/metrics` is polled during the window, seconds.
    pub(crate) metrics_poll_s: f64,
}

/// One sustained-decode cell run against an engine.
pub(crate) struct SustainedDecodeCell<'a> {
    pub(crate) spec: CellSpec,
    pub(crate) client: &'a EngineClient,
    pub(crate) dialect: Option<MetricsDialect>,
    pub(crate) sampler: Option<Arc<dyn WindowSampler>>,
    pub(crate) events: EventLog,
}

pub(super) fn fmt_n(v: f64) -> String {
    if (v - v.round()).abs() < 0.05 {
        format!("{}", v.round() as i64)
    } else {
        format!("{v:.1}")
    }
}

impl SustainedDecodeCell<'_> {
    fn emit(&self, kind: EventKind, message: String) {
        self.events.emit(Event::cell(
            kind,
            self.spec.concurrency,
            self.spec.context_tokens,
            message,
        ));
    }

    /// "`what` C=4 ctx=8k `detail`": an event naming the cell.
    fn emit_at(&self, kind: EventKind, what: &str, detail: &str) {
        let (c, ctx) = (self.spec.concurrency, self.spec.context_tokens);
        self.emit(
            kind,
            format!("{what} C={c} ctx={} {detail}", context_label(ctx)),
        );
    }

    fn request_body(&self, stream: u32) -> bytes::Bytes {
        streamed_request_body(
            &self.spec.model,
            &self.spec.prompt.text(stream),
            self.spec.timing.max_tokens,
        )
    }

    /// Measures the cell. Never fails: every problem becomes a status and a reason.
    pub(crate) async fn run(self, cancel: &CancellationToken) -> CellResult {
        let c = self.spec.concurrency;
        let ctx = self.spec.context_tokens;
        self.emit_at(
            EventKind::CellStart,
            "cell start",
            &format!(
                "unique_context={}%",
                fmt_n(self.spec.timing.unique_context_percent)
            ),
        );
        let mut streams = self.start_streams(cancel);

        let admission = self.admit(&streams.shared, cancel).await;
        let ready_after = streams.shared.t0.elapsed().as_secs_f64();
        // The warm-up counts from the moment every stream was admitted: the readiness
        // confirmation overlaps it (the window opens no earlier than `warmup_s` after that).
        let admitted = match admission {
            Admission::Ready {
                detail,
                admitted_at,
            } => self.ready(detail, admitted_at),
            Admission::CapacityLimited { reason } => self.capacity_limited(reason),
            Admission::Failed { reason } => {
                return self
                    .admission_failed(&mut streams, reason, ready_after)
                    .await;
            }
            Admission::Cancelled => return self.stopped(&mut streams, "cancelled").await,
        };

        // Warm-up (what is left of it).
        if admitted.warmup_until > Instant::now() {
            tokio::select! {
                _ = cancel.cancelled() => {}
                _ = tokio::time::sleep_until(admitted.warmup_until.into()) => {}
            }
        }
        if cancel.is_cancelled() {
            streams.stop().await;
            return CellResult::unmeasured(c, ctx, CellStatus::Error, "cancelled");
        }

        let Some(window) = self
            .measure_window(&mut streams, admitted.window_s, cancel)
            .await
        else {
            return CellResult::unmeasured(c, ctx, CellStatus::Error, "cancelled");
        };
        let cell = self.result(&streams.shared, admitted, window, ready_after);
        self.emit_end(&cell);
        cell
    }

    /// Spawns the cell's C stream tasks; they run until the cell cuts them or `cancel` fires.
    fn start_streams(&self, cancel: &CancellationToken) -> CellStreams {
        let c = self.spec.concurrency;
        let sub_windows = self.spec.timing.sub_windows.max(1) as usize;
        let shared = Arc::new(CellShared::new(
            sub_windows,
            u64::from(self.spec.timing.max_tokens),
        ));
        let streams_cancel = cancel.child_token();
        let first_token_timeout =
            Duration::from_secs_f64(self.spec.timing.ready_timeout_s.max(1.0));
        let stall_timeout = Duration::from_secs_f64(self.spec.timing.request_timeout_s.max(0.1));
        let cuts: Vec<cut::StreamCut> = (0..c).map(|_| cut::StreamCut::default()).collect();
        let handles = (0..c)
            .zip(&cuts)
            .map(|(i, stream_cut)| {
                tokio::spawn(run_stream(
                    self.client.clone(),
                    self.request_body(i),
                    shared.clone(),
                    stream_cut.clone(),
                    first_token_timeout,
                    stall_timeout,
                ))
            })
            .collect();
        tokio::spawn(cut::forward(streams_cancel.clone(), cuts));
        CellStreams {
            shared,
            handles,
            cancel: streams_cancel,
        }
    }

    /// Every stream runs: the window opens `warmup_s` after they were all admitted.
    fn ready(&self, detail: String, admitted_at: Instant) -> Admitted {
        self.emit_at(EventKind::Ready, "ready", &detail);
        Admitted {
            status: CellStatus::Ok,
            reason: Some(detail),
            warmup_until: admitted_at + Duration::from_secs_f64(self.spec.timing.warmup_s),
            window_s: self.spec.timing.duration_s,
        }
    }

    /// Admission stalled, so the cell is already steady: a short window records what it makes.
    fn capacity_limited(&self, reason: String) -> Admitted {
        self.emit_at(EventKind::CapacityLimited, "capacity limited", &reason);
        Admitted {
            status: CellStatus::CapacityLimited,
            reason: Some(reason),
            warmup_until: Instant::now(),
            window_s: self.spec.timing.duration_s * 0.5,
        }
    }

    /// The streams never all ran: an error cell with what its requests did.
    async fn admission_failed(
        &self,
        streams: &mut CellStreams,
        reason: String,
        ready_after: f64,
    ) -> CellResult {
        let mut cell = self.stopped(streams, &reason).await;
        self.emit_at(EventKind::CellError, "cell error", &reason);
        cell.truncated_requests = streams.shared.truncated();
        cell.ready_after_s = Some(ready_after);
        cell
    }

    /// Cuts the streams of a cell that was not admitted (also when cancelled before every
    /// stream was: no event then): an `error` cell with its requests' tally.
    async fn stopped(&self, streams: &mut CellStreams, reason: &str) -> CellResult {
        let (c, ctx) = (self.spec.concurrency, self.spec.context_tokens);
        streams.stop().await;
        let mut cell = CellResult::unmeasured(c, ctx, CellStatus::Error, reason);
        cell.errors = streams.shared.errors.load(Ordering::Relaxed);
        cell.requests = Some(streams.shared.tally());
        cell
    }

    /// The steady-state window: reads the engine at its opening edge, credits the streams'
    /// tokens for `window_s` while polling the engine's load, reads the closing edge, then
    /// cuts the streams. `None` when cancelled meanwhile.
    async fn measure_window(
        &self,
        streams: &mut CellStreams,
        window_s: f64,
        cancel: &CancellationToken,
    ) -> Option<WindowReading> {
        let edge0 = counter::read_edge(self.client, self.dialect).await;
        if let Some(s) = &self.sampler {
            s.start_window();
        }
        let probe = HostLatenessProbe::start();
        let open = Instant::now();
        let shared = &streams.shared;
        let start_ns = open.duration_since(shared.t0).as_nanos() as u64;
        let len_ns = (window_s.max(0.001) * 1e9) as u64;
        shared
            .window_end_ns
            .store(start_ns + len_ns, Ordering::Release);
        shared.window_start_ns.store(start_ns, Ordering::Release);
        let close = open + Duration::from_nanos(len_ns);
        let poll = Duration::from_secs_f64(self.spec.metrics_poll_s.max(0.05));
        let WindowLoad {
            running,
            waiting,
            cancelled,
        } = poll_until(self.client, self.dialect, close, poll, cancel).await;
        let host_lateness = probe.and_then(HostLatenessProbe::finish);
        let edge1 = if cancelled {
            EdgeReading::default()
        } else {
            counter::read_edge(self.client, self.dialect).await
        };
        let records = streams.stop().await;
        if cancelled {
            return None;
        }
        Some(WindowReading {
            edge0,
            edge1,
            open,
            close,
            running,
            waiting,
            records,
            host_lateness,
        })
    }

    /// The measured cell: the window's figures, checked against the engine's own.
    fn result(
        &self,
        shared: &CellShared,
        admitted: Admitted,
        window: WindowReading,
        ready_after: f64,
    ) -> CellResult {
        let window_s = admitted.window_s;
        let sub_len_s = window_s / shared.sub_windows as f64;
        let itl = shared.take_itl();
        let totals = StreamTotals::sum(&window.records, shared.sub_windows, itl);
        let total: f64 = totals.sub_tokens.iter().sum();
        let output_tokens = total.round().max(0.0) as u64;
        let aggregate_tps = total / window_s;
        let samples: Vec<f64> = totals.sub_tokens.iter().map(|t| t / sub_len_s).collect();
        let errors = shared.errors.load(Ordering::Relaxed);
        let requests = shared.tally();

        let engine_counter = counter::window(
            self.dialect,
            &window.edge0,
            &window.edge1,
            window.open,
            window.close,
        );
        let spec_decode = spec_stats(
            window.edge0.state.as_ref(),
            window.edge1.state.as_ref(),
            output_tokens,
            aggregate_tps,
        );
        let telemetry = self
            .sampler
            .as_ref()
            .and_then(|s| s.finish_window(output_tokens));

        let itl_mean_s = totals.itl_mean_s();
        let checked = cross_check(&self.evidence(window_s, &totals, &window, spec_decode.as_ref()));
        let unverified = unverified(&checked.checks, &totals.tally, self.dialect.is_some());
        let outcome = WindowOutcome {
            output_tokens,
            errors,
            requests,
            truncated: shared.truncated(),
            preemptions: window.preemptions(),
        };
        let (status, reason) = self.verdict(admitted, shared, &outcome, checked.failure);

        let mean = |v: &[f64]| (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64);
        CellResult {
            concurrency: self.spec.concurrency,
            context_tokens: self.spec.context_tokens,
            status,
            reason,
            aggregate_tps,
            samples,
            per_user_tps: stats::exact(&totals.per_user),
            ttft_s: stats::exact(&totals.ttfts),
            itl_s: stats::from_histogram(&totals.itl, itl_mean_s),
            tpot_s: stats::exact(&totals.tpots),
            effective_concurrency: mean(&window.running),
            waiting_avg: mean(&window.waiting),
            output_tokens,
            measured_s: window_s,
            prompt_tokens: totals.prompt_tokens,
            errors,
            token_source: Some(totals.token_source()),
            server_tps: engine_counter.as_ref().map(|(tps, _)| *tps),
            engine_counter: engine_counter.as_ref().map(|(_, w)| w.clone()),
            ready_after_s: Some(ready_after),
            spec_decode,
            telemetry,
            rounds: Vec::new(),
            cross_checks: checked.checks,
            truncated_requests: outcome.truncated,
            preemptions: outcome.preemptions,
            requests: Some(outcome.requests),
            unverified,
            host_lateness_s: window.host_lateness,
        }
    }

    /// What the cross-checks hold the client's count against.
    fn evidence<'a>(
        &self,
        window_s: f64,
        totals: &'a StreamTotals,
        window: &WindowReading,
        spec_decode: Option<&SpecDecodeStats>,
    ) -> Evidence<'a> {
        Evidence {
            concurrency: self.spec.concurrency,
            max_tokens: u64::from(self.spec.timing.max_tokens),
            window_s,
            stream_window_tokens: &totals.stream_window_tokens,
            tally: &totals.tally,
            counter: match (self.dialect, window.edge0.counter, window.edge1.counter) {
                (Some(d), Some(start), Some(end)) => Some(CounterEvidence {
                    start,
                    end,
                    moves: d.counter_moves(),
                    metric: d.generation_counter().to_string(),
                }),
                _ => None,
            },
            spec_tokens_per_step: spec_decode
                .filter(|s| s.drafts > 0)
                .map(|s| 1.0 + s.draft_tokens as f64 / s.drafts as f64),
            token_lag_s: totals.token_lag_s(),
            tolerance: self.spec.timing.usage_tolerance,
            max_stream_tps: self.spec.timing.max_stream_tps,
        }
    }

    /// The measured cell's status and reason: a window without tokens, with short or too many
    /// early-ended requests, or whose count the cross-checks refute is no measurement; an
    /// engine that preempted requests with every stream admitted is saturated.
    fn verdict(
        &self,
        admitted: Admitted,
        shared: &CellShared,
        outcome: &WindowOutcome,
        cross_check_failure: Option<String>,
    ) -> (CellStatus, Option<String>) {
        let c = self.spec.concurrency;
        let window_s = admitted.window_s;
        let max_tokens = u64::from(self.spec.timing.max_tokens);
        let truncated = outcome.truncated;
        let requests = &outcome.requests;
        let early = requests.early();
        let ended = requests.completed + early;

        let mut status = admitted.status;
        let mut reason = admitted.reason;
        if outcome.output_tokens == 0 {
            status = CellStatus::Error;
            reason = Some(self.no_tokens_reason(window_s, shared, outcome));
        } else if let Some(t) = truncated.filter(|t| t.short > 0) {
            // A short request decoded a different workload (fewer tokens, a shorter KV tail)
            // than the baseline's: its cell is not comparable, so it is not measured.
            status = CellStatus::Error;
            reason = Some(truncated_reason(&t, max_tokens));
        } else if f64::from(early) > EARLY_END_SHARE * f64::from(ended) {
            // More than a small share of the requests did not do what was asked: the tokens
            // left are not the workload's.
            status = CellStatus::Error;
            reason = Some(early_end_reason(
                c,
                requests,
                ended,
                truncated,
                max_tokens,
                &shared.failure_summary(),
            ));
        } else if let Some(why) = cross_check_failure {
            status = CellStatus::Error;
            reason = Some(why);
        } else if let Some(n) = outcome
            .preemptions
            .filter(|n| *n > 0 && status == CellStatus::Ok)
        {
            // Every stream was admitted, but the engine ran out of KV cache during the window
            // and took requests back (recomputing them later): another regime than a cell that
            // holds its streams, which flips between runs. Measured, compared like capacity.
            status = CellStatus::Saturated;
            let counter = self
                .dialect
                .and_then(|d| d.preemption_counter())
                .unwrap_or("preemptions");
            reason = Some(format!(
                "saturated: {n} request(s) preempted or retracted in the {window_s:.1} s window ({counter}); the engine ran out of KV cache with all {c} streams admitted"
            ));
        } else if early > 0 && status == CellStatus::Ok {
            reason = Some(format!(
                "{}; {early} of {ended} requests ended early ({}): their tokens are not counted",
                reason.unwrap_or_default(),
                requests.causes()
            ));
        }
        (status, reason)
    }

    /// Why a window without a token is no measurement, from what its requests did.
    fn no_tokens_reason(
        &self,
        window_s: f64,
        shared: &CellShared,
        outcome: &WindowOutcome,
    ) -> String {
        let c = self.spec.concurrency;
        let max_tokens = u64::from(self.spec.timing.max_tokens);
        let (errors, truncated) = (outcome.errors, outcome.truncated);
        let requests = &outcome.requests;
        let early = requests.early();
        let ended = requests.completed + early;
        if let Some(t) = truncated.filter(|t| t.short > 0) {
            truncated_reason(&t, max_tokens)
        } else if early > 0 {
            format!(
                "no completed work in the window: {}",
                early_end_reason(
                    c,
                    requests,
                    ended,
                    truncated,
                    max_tokens,
                    &shared.failure_summary(),
                )
            )
        } else if errors > 0 {
            format!("no tokens in the window; {}", shared.failure_summary())
        } else {
            format!(
                "no tokens in the {window_s:.1} s window although {} streams were admitted",
                shared.ever_produced.load(Ordering::Relaxed)
            )
        }
    }

    /// Says how the measured cell ended: an error, saturated, or done at its rate.
    fn emit_end(&self, cell: &CellResult) {
        let server = cell
            .server_tps
            .zip(cell.engine_counter.as_ref())
            .map(|(tps, w)| counter::describe(tps, w))
            .unwrap_or_default();
        let rate = format!("{:.1} tok/s{server}", cell.aggregate_tps);
        let reason = cell.reason.as_deref().unwrap_or_default();
        match cell.status {
            CellStatus::Error => self.emit_at(EventKind::CellError, "cell error", reason),
            CellStatus::Saturated => self.emit_at(
                EventKind::CellDone,
                "cell saturated",
                &format!("{rate}: {reason}"),
            ),
            _ => {
                let unverified = if cell.unverified.is_some() {
                    " (client count not cross-checked)"
                } else {
                    ""
                };
                self.emit_at(
                    EventKind::CellDone,
                    "cell done",
                    &format!("{rate}{unverified}"),
                )
            }
        }
    }
}

/// The body of a measured request, a cell's or a burst's: streamed to exactly `max_tokens`
/// (`ignore_eos`), greedy, with usage on every chunk where the engine gives it.
pub(crate) fn streamed_request_body(model: &str, prompt: &str, max_tokens: u32) -> bytes::Bytes {
    let body = serde_json::json!({
        "model": model,
        "prompt": prompt,
        "max_tokens": max_tokens,
        "stream": true,
        "ignore_eos": true,
        "temperature": 0,
        "stream_options": {"include_usage": true, "continuous_usage_stats": true},
    });
    bytes::Bytes::from(serde_json::to_vec(&body).unwrap_or_default())
}

/// The cell's stream tasks and the state they share with the controller.
struct CellStreams {
    shared: Arc<CellShared>,
    handles: Vec<tokio::task::JoinHandle<StreamRecord>>,
    /// Cuts every stream: a child of the cell's cancellation.
    cancel: CancellationToken,
}

impl CellStreams {
    /// Cuts every stream and waits for what each measured.
    async fn stop(&mut self) -> Vec<StreamRecord> {
        self.cancel.cancel();
        join_all(std::mem::take(&mut self.handles)).await
    }
}

/// A cell whose streams were admitted: its status so far, when the warm-up ends, and how
/// long its window lasts.
struct Admitted {
    status: CellStatus,
    reason: Option<String>,
    warmup_until: Instant,
    window_s: f64,
}

/// What the steady-state window saw: the engine at both edges and its load in between, and
/// the streams' records.
struct WindowReading {
    edge0: EdgeReading,
    edge1: EdgeReading,
    open: Instant,
    close: Instant,
    /// The engine's `running` and `waiting` gauges, one per poll.
    running: Vec<f64>,
    waiting: Vec<f64>,
    records: Vec<StreamRecord>,
    /// How late the host ran the probe thread while the window was open.
    host_lateness: Option<infergate_schema::results::Percentiles>,
}

impl WindowReading {
    /// Requests the engine preempted or retracted in the window (its counter at both edges).
    fn preemptions(&self) -> Option<u64> {
        let at = |e: &EdgeReading| e.state.as_ref().and_then(|(_, s)| s.preemptions);
        Some((at(&self.edge1)? - at(&self.edge0)?).max(0.0).round() as u64)
    }
}

/// The streams' records summed over the window, with the cell's inter-token latencies.
struct StreamTotals {
    /// Tokens per sub-window, every stream's.
    sub_tokens: Vec<f64>,
    itl: Histogram<u64>,
    itl_sum: f64,
    itl_n: u64,
    ttfts: Vec<f64>,
    tpots: Vec<f64>,
    /// Each stream's decode rate, tokens per second.
    per_user: Vec<f64>,
    prompt_tokens: Option<u64>,
    saw_cont: bool,
    saw_chunks: bool,
    tally: UsageTally,
    /// Every token that arrived in the window per stream, the early-ended requests' too:
    /// what the engine's counter saw.
    stream_window_tokens: Vec<f64>,
}

impl StreamTotals {
    fn sum(records: &[StreamRecord], sub_windows: usize, itl: Histogram<u64>) -> Self {
        let mut totals = StreamTotals {
            sub_tokens: vec![0.0f64; sub_windows],
            itl,
            itl_sum: 0.0,
            itl_n: 0,
            ttfts: Vec::new(),
            tpots: Vec::new(),
            per_user: Vec::new(),
            prompt_tokens: None,
            saw_cont: false,
            saw_chunks: false,
            tally: UsageTally::default(),
            stream_window_tokens: Vec::with_capacity(records.len()),
        };
        for r in records {
            totals.tally.absorb(&r.usage);
            totals
                .stream_window_tokens
                .push(r.sub_tokens.iter().sum::<f64>() + r.removed_window_tokens);
            for (t, s) in totals.sub_tokens.iter_mut().zip(&r.sub_tokens) {
                *t += s;
            }
            totals.itl_sum += r.itl_sum_s;
            totals.itl_n += r.itl_n;
            totals.ttfts.extend_from_slice(&r.ttfts);
            totals.tpots.extend_from_slice(&r.tpots);
            if r.itl_n > 0 && r.itl_sum_s > 0.0 {
                totals.per_user.push(r.itl_n as f64 / r.itl_sum_s);
            }
            totals.prompt_tokens = totals.prompt_tokens.or(r.prompt_tokens);
            totals.saw_cont |= r.saw_continuous;
            totals.saw_chunks |= r.saw_chunk_mode;
        }
        totals
    }

    fn itl_mean_s(&self) -> Option<f64> {
        (self.itl_n > 0).then(|| self.itl_sum / self.itl_n as f64)
    }

    /// How late a token at the window's edges may reach the client: the longest gap (at least
    /// the mean). A loaded host stalls the client for a moment, and the tokens it then reads
    /// late at an edge are a few of the window's hundreds of gaps, below their p99: under a
    /// load of 8 on 2 cores an honest engine's window read 631 tokens against its counter's
    /// 570.5 with a p99 slack. The checks cap it ([`crosscheck`]), so an engine that stalls
    /// itself gains no more than with the p99.
    fn token_lag_s(&self) -> Option<f64> {
        self.itl_mean_s().map(|mean| {
            let longest = if self.itl.is_empty() {
                0.0
            } else {
                self.itl.max() as f64 / 1e9
            };
            mean.max(longest)
        })
    }

    fn token_source(&self) -> TokenSource {
        if self.saw_chunks || !self.saw_cont {
            TokenSource::ChunksReconciled
        } else {
            TokenSource::ContinuousUsage
        }
    }
}

/// How the window's requests went: what decides whether the cell is a measurement.
struct WindowOutcome {
    output_tokens: u64,
    errors: u32,
    requests: RequestTally,
    truncated: Option<TruncatedRequests>,
    preemptions: Option<u64>,
}

/// The share of a cell's ended requests that may end early (by any cause) before the cell
/// is not `ok`: a stray reset is noise, a pattern is another workload.
pub(super) const EARLY_END_SHARE: f64 = 0.05;

/// Why a cell whose requests ended early is not a measurement, in what the client saw:
/// "the server ran 1 of 2 streams at a time; 2,068 of 2,091 requests aborted ([DONE] without
/// a finish_reason)" when the engine cut requests while running fewer than asked.
pub(super) fn early_end_reason(
    c: u32,
    t: &infergate_schema::results::RequestTally,
    ended: u32,
    truncated: Option<TruncatedRequests>,
    max_tokens: u64,
    failures: &str,
) -> String {
    use infergate_schema::results::thousands;
    let early = t.early();
    let aborted = t.aborted();
    if let Some(tr) = truncated.filter(|tr| tr.short > 0 && tr.short * 2 >= early) {
        truncated_reason(&tr, max_tokens)
    } else if aborted * 2 > early && t.max_streams_at_once < c {
        format!(
            "{}; {} of {} requests aborted ({}): throughput not published. An engine that serves one request at a time and aborts the running one when another arrives (llama-cpp-python's default `interrupt_requests`) cannot run {c} streams; measure C=1, or start it so that requests queue (llama-cpp-python: --interrupt_requests false)",
            streams_at_once(t.max_streams_at_once, c),
            thousands(u64::from(aborted)),
            thousands(u64::from(t.sent)),
            t.causes()
        )
    } else {
        format!(
            "{} of {} requests ended early ({}): their tokens are not counted, and more than {:.0}% ended early is not a measurement; {failures}",
            thousands(u64::from(early)),
            thousands(u64::from(ended)),
            t.causes(),
            EARLY_END_SHARE * 100.0
        )
    }
}

/// What the client saw of the streams an engine ran together: "the server ran 1 of 2 streams
/// at a time", or, when no stream got past its first token (each aborted or left waiting as
/// soon as it had one), "no stream of 2 got past its first token" — never "ran 0 of 2", which
/// no server that sent tokens did.
pub(super) fn streams_at_once(peak: u32, c: u32) -> String {
    if peak == 0 {
        format!("no stream of {c} got past its first token")
    } else {
        format!("the server ran {peak} of {c} streams at a time")
    }
}

/// "client count not cross-checked: …" when none of the checks that hold the client's count
/// against an independent figure (the engine's usage, its generation counter) could run.
fn unverified(
    checks: &[infergate_schema::results::CrossCheck],
    tally: &accounting::UsageTally,
    has_metrics: bool,
) -> Option<String> {
    const AGAINST_COUNT: [&str; 3] = [
        "chunks_vs_usage",
        "usage_vs_counter_window",
        "usage_vs_counter_requests",
    ];
    if checks
        .iter()
        .any(|c| AGAINST_COUNT.contains(&c.name.as_str()))
    {
        return None;
    }
    let usage = if tally.requests == 0 {
        "the engine sent no usage in its streams"
    } else {
        "its usage covered no text chunk"
    };
    let counter = if has_metrics {
        "its generation counter could not be read at both window edges"
    } else {
        "it has no generation counter (no metrics page infergate reads)"
    };
    Some(format!(
        "client count not cross-checked: {usage} and {counter}, so the tokens counted are the client's chunks alone (one token each)"
    ))
}

/// "truncated: 12 of 12 finished requests ended with fewer than max_tokens = 128 …".
pub(super) fn truncated_reason(t: &TruncatedRequests, max_tokens: u64) -> String {
    // A short request decoded a different workload (fewer tokens, a shorter KV tail) than the
    // baseline's: its cell is not comparable, so it is not measured.
    format!(
        "truncated: {} of {} finished requests ended with fewer than max_tokens = {max_tokens} tokens under ignore_eos (fewest {}); the engine clamps or cuts requests (context + max_tokens over its max_model_len?)",
        t.short, t.finished, t.fewest_tokens
    )
}

async fn join_all(handles: Vec<tokio::task::JoinHandle<StreamRecord>>) -> Vec<StreamRecord> {
    let mut out = Vec::with_capacity(handles.len());
    for h in handles {
        if let Ok(r) = h.await {
            out.push(r);
        }
    }
    out
}
