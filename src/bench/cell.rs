//! One sustained-decode cell: keep C streams generating, wait until the engine really runs all
//! of them (or declare the cell capacity-limited as soon as admission stalls), warm up, then
//! count tokens over a steady-state window split into sub-windows.
//!
//! Token accounting: with continuous usage (vLLM, SGLang) each chunk's cumulative
//! `completion_tokens` delta is credited at the chunk's arrival time. Without it (llama.cpp)
//! each content chunk counts one token, and when the request's final usage arrives the
//! difference is spread over that request's own chunks (so only the part that fell in the
//! window is credited). A request's final usage is never credited at its end.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use tokio_util::sync::CancellationToken;

use super::EventLog;
use super::client::{
    ChunkInfo, EngineClient, RequestFailure, SseParser, StreamEvent, parse_stream_event,
};
use super::metrics::{EngineState, MetricsDialect, parse_prometheus};
use super::prompt::ContextPrompt;
use super::stats;
use crate::results::{CellResult, CellStatus, Event, SpecDecodeStats, TokenSource, context_label};
use crate::telemetry::WindowSampler;

/// Everything one cell needs to know.
#[derive(Clone)]
pub struct CellSpec {
    pub concurrency: u32,
    pub context_tokens: u64,
    pub prompt: ContextPrompt,
    /// Share of the prompt unique to each stream (for the log line), percent.
    pub unique_context_percent: f64,
    pub model: String,
    pub max_tokens: u32,
    pub warmup_s: f64,
    pub duration_s: f64,
    pub sub_windows: u32,
    pub ready_stable_s: f64,
    pub capacity_stall_s: f64,
    /// Already scaled for the context length.
    pub ready_timeout_s: f64,
    pub request_timeout_s: f64,
    /// How often `/metrics` is polled during the window, seconds.
    pub metrics_poll_s: f64,
}

/// Scrapes `/metrics` once; `None` when the engine has no (known) metrics or did not answer.
pub async fn scrape(
    client: &EngineClient,
    dialect: Option<MetricsDialect>,
) -> Option<(Instant, EngineState)> {
    let dialect = dialect?;
    let sent = Instant::now();
    let (status, text) = client
        .get_text("/metrics", Duration::from_secs(3))
        .await
        .ok()?;
    // The counter was read somewhere between sending and receiving: take the midpoint, so a
    // slow answer does not shift the engine's window by its whole latency.
    let at = sent + Instant::now().duration_since(sent) / 2;
    if status != 200 {
        return None;
    }
    Some((at, dialect.read(&parse_prometheus(&text))))
}

/// State shared by a cell's stream tasks and its controller (atomics only on the hot path).
struct CellShared {
    t0: Instant,
    /// Window bounds as nanoseconds since `t0`; `u64::MAX` while the window is not open.
    window_start_ns: AtomicU64,
    window_end_ns: AtomicU64,
    sub_windows: usize,
    /// Streams whose current request has produced its first token.
    producing_now: AtomicU32,
    /// Streams that have produced at least one token since the cell started.
    ever_produced: AtomicU32,
    requests_started: AtomicU32,
    errors: AtomicU32,
    failures: Mutex<BTreeMap<String, (u32, String)>>,
}

impl CellShared {
    #[inline]
    fn sub_index(&self, now: Instant) -> Option<usize> {
        let start = self.window_start_ns.load(Ordering::Acquire);
        if start == u64::MAX {
            return None;
        }
        let end = self.window_end_ns.load(Ordering::Acquire);
        let off = now.saturating_duration_since(self.t0).as_nanos() as u64;
        if off < start || off >= end || end <= start {
            return None;
        }
        let idx =
            ((off - start) as u128 * self.sub_windows as u128 / (end - start) as u128) as usize;
        Some(idx.min(self.sub_windows - 1))
    }

    fn record_failure(&self, f: &RequestFailure) {
        self.errors.fetch_add(1, Ordering::Relaxed);
        if let Ok(mut map) = self.failures.lock() {
            let entry = map
                .entry(f.kind.clone())
                .or_insert_with(|| (0, f.detail.clone()));
            entry.0 += 1;
        }
    }

    /// "12 of 14 requests failed: HTTP 500 Internal Server Error (detail)".
    fn failure_summary(&self) -> String {
        let errors = self.errors.load(Ordering::Relaxed);
        let requests = self.requests_started.load(Ordering::Relaxed);
        let map = self.failures.lock().map(|m| m.clone()).unwrap_or_default();
        let mut kinds: Vec<(String, u32, String)> =
            map.into_iter().map(|(k, (n, d))| (k, n, d)).collect();
        kinds.sort_by_key(|k| std::cmp::Reverse(k.1));
        let listed: Vec<String> = kinds
            .iter()
            .take(2)
            .map(|(k, n, d)| {
                let d = if d.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", super::client::excerpt(d, 120))
                };
                if kinds.len() > 1 {
                    format!("{n}x {k}{d}")
                } else {
                    format!("{k}{d}")
                }
            })
            .collect();
        format!(
            "{errors} of {requests} requests failed: {}",
            if listed.is_empty() {
                "unknown error".to_string()
            } else {
                listed.join("; ")
            }
        )
    }
}

/// What one stream task measured.
struct StreamRecord {
    sub_tokens: Vec<f64>,
    itl: Histogram<u64>,
    itl_sum_s: f64,
    itl_n: u64,
    ttfts: Vec<f64>,
    prompt_tokens: Option<u64>,
    saw_continuous: bool,
    saw_chunk_mode: bool,
}

/// Per-request bookkeeping of a stream.
struct RequestTrack {
    sent: Instant,
    first: Option<Instant>,
    last: Instant,
    usage_seen: u64,
    continuous: bool,
    chunk_tokens: u64,
    window_counts: Vec<f64>,
    any_window: bool,
    finished: bool,
    done: bool,
}

struct StreamWorker {
    shared: Arc<CellShared>,
    rec: StreamRecord,
    req: RequestTrack,
    ever: bool,
    /// Last final-usage / chunk ratio (applied to requests cut off by the window's end).
    ratio: f64,
}

impl StreamWorker {
    /// A worker with nothing measured yet, one token counter per sub-window of the cell.
    fn new(shared: Arc<CellShared>) -> Self {
        let (n, t0) = (shared.sub_windows, shared.t0);
        StreamWorker {
            shared,
            rec: StreamRecord {
                sub_tokens: vec![0.0; n],
                itl: stats::new_latency_histogram(),
                itl_sum_s: 0.0,
                itl_n: 0,
                ttfts: Vec::new(),
                prompt_tokens: None,
                saw_continuous: false,
                saw_chunk_mode: false,
            },
            req: RequestTrack {
                sent: t0,
                first: None,
                last: t0,
                usage_seen: 0,
                continuous: false,
                chunk_tokens: 0,
                window_counts: vec![0.0; n],
                any_window: false,
                finished: false,
                done: false,
            },
            ever: false,
            ratio: 1.0,
        }
    }

    fn begin_request(&mut self, sent: Instant) {
        self.req.sent = sent;
        self.req.first = None;
        self.req.last = sent;
        self.req.usage_seen = 0;
        self.req.continuous = false;
        self.req.chunk_tokens = 0;
        self.req.window_counts.iter_mut().for_each(|c| *c = 0.0);
        self.req.any_window = false;
        self.req.finished = false;
        self.req.done = false;
    }

    fn end_request(&mut self) {
        if self.req.first.is_some() {
            self.shared.producing_now.fetch_sub(1, Ordering::Relaxed);
            self.req.first = None;
        }
        if self.req.any_window && !self.req.continuous && (self.ratio - 1.0).abs() > 1e-12 {
            // A request cut off (or failed) before its final usage: use the stream's last
            // known tokens-per-chunk ratio.
            for (t, c) in self.rec.sub_tokens.iter_mut().zip(&self.req.window_counts) {
                *t += c * (self.ratio - 1.0);
            }
        }
        self.req.any_window = false;
    }

    #[inline]
    fn on_payload(&mut self, payload: &[u8], now: Instant) -> Result<(), RequestFailure> {
        match parse_stream_event(payload)? {
            StreamEvent::Done => {
                self.req.done = true;
                Ok(())
            }
            StreamEvent::Chunk(info) => {
                self.on_chunk(&info, now);
                Ok(())
            }
        }
    }

    #[inline]
    fn on_chunk(&mut self, info: &ChunkInfo, now: Instant) {
        if let Some(p) = info.prompt_tokens {
            self.rec.prompt_tokens = Some(p);
        }
        let mut final_usage = None;
        let tokens = match info.completion_tokens {
            Some(ct) if self.req.continuous || (info.has_choices && !info.finished) => {
                self.req.continuous = true;
                self.rec.saw_continuous = true;
                let delta = ct.saturating_sub(self.req.usage_seen);
                self.req.usage_seen = self.req.usage_seen.max(ct);
                delta
            }
            Some(ct) => {
                final_usage = Some(ct);
                u64::from(info.has_text)
            }
            None if !self.req.continuous => u64::from(info.has_text),
            None => 0,
        };
        if tokens > 0 {
            self.credit(tokens, now);
        }
        if let Some(u) = final_usage {
            self.reconcile(u);
        }
        self.req.finished |= info.finished;
    }

    #[inline]
    fn credit(&mut self, n: u64, now: Instant) {
        let idx = self.shared.sub_index(now);
        if self.req.first.is_none() {
            self.req.first = Some(now);
            self.rec
                .ttfts
                .push(now.saturating_duration_since(self.req.sent).as_secs_f64());
            self.shared.producing_now.fetch_add(1, Ordering::Relaxed);
            if !self.ever {
                self.ever = true;
                self.shared.ever_produced.fetch_add(1, Ordering::Relaxed);
            }
        } else if idx.is_some() {
            let gap = now.saturating_duration_since(self.req.last);
            let per_token = gap.as_nanos() as u64 / n;
            let _ = self.rec.itl.record_n(per_token.max(1), n);
            self.rec.itl_sum_s += gap.as_secs_f64();
            self.rec.itl_n += n;
        }
        if let Some(i) = idx {
            self.rec.sub_tokens[i] += n as f64;
            if !self.req.continuous {
                self.req.window_counts[i] += n as f64;
                self.req.any_window = true;
            }
        }
        if !self.req.continuous {
            self.req.chunk_tokens += n;
            self.rec.saw_chunk_mode = true;
        }
        self.req.last = now;
    }

    fn reconcile(&mut self, usage: u64) {
        let counted = self.req.chunk_tokens;
        if counted == 0 {
            return;
        }
        let ratio = usage as f64 / counted as f64;
        self.ratio = ratio;
        if self.req.any_window {
            for (t, c) in self.rec.sub_tokens.iter_mut().zip(&self.req.window_counts) {
                *t += c * (ratio - 1.0);
            }
            self.req.any_window = false;
        }
    }
}

/// Runs one stream: requests back to back until cancelled, restarting with the same prompt
/// (the stream's identity) whenever a request finishes or fails.
async fn run_stream(
    client: EngineClient,
    body: bytes::Bytes,
    shared: Arc<CellShared>,
    cancel: CancellationToken,
    first_token_timeout: Duration,
    stall_timeout: Duration,
) -> StreamRecord {
    let mut w = StreamWorker::new(shared);
    let mut parser = SseParser::new();
    let mut backoff = Duration::from_millis(50);
    'outer: while !cancel.is_cancelled() {
        let sent = Instant::now();
        w.shared.requests_started.fetch_add(1, Ordering::Relaxed);
        w.begin_request(sent);
        let outcome: Result<(), RequestFailure> = async {
            let mut resp = tokio::select! {
                _ = cancel.cancelled() => return Ok(()),
                r = tokio::time::timeout(first_token_timeout, client.start_stream(body.clone())) => match r {
                    Ok(r) => r?,
                    Err(_) => return Err(RequestFailure::new("timed out", format!("no response headers within {:.0} s", first_token_timeout.as_secs_f64()))),
                },
            };
            parser = SseParser::new();
            let mut last_byte = Instant::now();
            let deadline = |first: bool, last: Instant| {
                if first { last + stall_timeout } else { sent + first_token_timeout }
            };
            let sleep = tokio::time::sleep_until(deadline(false, last_byte).into());
            tokio::pin!(sleep);
            // The timer is re-armed lazily: once when the first token arrives (switching from
            // the first-token deadline to the stall deadline), then only when it fires early.
            let mut armed_for_stall = false;
            loop {
                tokio::select! {
                    biased;
                    _ = cancel.cancelled() => return Ok(()),
                    chunk = resp.chunk() => {
                        let now = Instant::now();
                        match chunk {
                            Ok(Some(bytes)) => {
                                last_byte = now;
                                client.activity().note();
                                let mut failure = None;
                                parser.feed(&bytes, |payload| match w.on_payload(payload, now) {
                                    Ok(()) => true,
                                    Err(f) => { failure = Some(f); false }
                                });
                                if let Some(f) = failure { return Err(f); }
                                if w.req.done { return Ok(()); }
                                if !armed_for_stall && w.req.first.is_some() {
                                    armed_for_stall = true;
                                    sleep.as_mut().reset((now + stall_timeout).into());
                                }
                            }
                            Ok(None) => {
                                let mut failure = None;
                                parser.finish(|payload| match w.on_payload(payload, now) {
                                    Ok(()) => true,
                                    Err(f) => { failure = Some(f); false }
                                });
                                if let Some(f) = failure { return Err(f); }
                                if w.req.done || w.req.finished { return Ok(()); }
                                return Err(RequestFailure::new("stream closed early", format!("after {} tokens, without a finish reason or [DONE]", w.req.chunk_tokens.max(w.req.usage_seen))));
                            }
                            Err(e) => return Err(super::client::classify_transport(&e)),
                        }
                    }
                    _ = &mut sleep => {
                        let due = deadline(w.req.first.is_some(), last_byte);
                        let now = Instant::now();
                        if now >= due {
                            return Err(if w.req.first.is_some() {
                                RequestFailure::new("stream stalled", format!("no data for {:.0} s", stall_timeout.as_secs_f64()))
                            } else {
                                RequestFailure::new("timed out", format!("no first token within {:.0} s", first_token_timeout.as_secs_f64()))
                            });
                        }
                        sleep.as_mut().reset(due.into());
                    }
                }
            }
        }
        .await;
        let produced = w.req.first.is_some();
        w.end_request();
        match outcome {
            Ok(()) => {
                backoff = Duration::from_millis(50);
            }
            Err(f) => {
                if cancel.is_cancelled() {
                    break 'outer;
                }
                w.shared.record_failure(&f);
                if produced {
                    backoff = Duration::from_millis(50);
                }
                tokio::select! {
                    _ = cancel.cancelled() => break 'outer,
                    _ = tokio::time::sleep(backoff) => {}
                }
                backoff = (backoff * 2).min(Duration::from_secs(2));
            }
        }
    }
    w.rec
}

/// How the readiness phase ended.
enum Admission {
    Ready { detail: String },
    CapacityLimited { reason: String },
    Failed { reason: String },
    Cancelled,
}

/// One sustained-decode cell run against an engine.
pub struct SustainedDecodeCell<'a> {
    pub spec: CellSpec,
    pub client: &'a EngineClient,
    pub dialect: Option<MetricsDialect>,
    pub sampler: Option<Arc<dyn WindowSampler>>,
    pub events: EventLog,
}

fn fmt_n(v: f64) -> String {
    if (v - v.round()).abs() < 0.05 {
        format!("{}", v.round() as i64)
    } else {
        format!("{v:.1}")
    }
}

impl SustainedDecodeCell<'_> {
    fn emit(&self, kind: &str, message: String) {
        self.events.emit(Event::cell(
            kind,
            self.spec.concurrency,
            self.spec.context_tokens,
            message,
        ));
    }

    fn request_body(&self, stream: u32) -> bytes::Bytes {
        let body = serde_json::json!({
            "model": self.spec.model,
            "prompt": self.spec.prompt.text(stream),
            "max_tokens": self.spec.max_tokens,
            "stream": true,
            "ignore_eos": true,
            "temperature": 0,
            "stream_options": {"include_usage": true, "continuous_usage_stats": true},
        });
        bytes::Bytes::from(serde_json::to_vec(&body).unwrap_or_default())
    }

    /// Measures the cell. Never fails: every problem becomes a status and a reason.
    pub async fn run(self, cancel: &CancellationToken) -> CellResult {
        let c = self.spec.concurrency;
        let ctx = self.spec.context_tokens;
        self.emit(
            "cell_start",
            format!(
                "cell start C={c} ctx={} unique_context={}%",
                context_label(ctx),
                fmt_n(self.spec.unique_context_percent)
            ),
        );
        let t0 = Instant::now();
        let sub_windows = self.spec.sub_windows.max(1) as usize;
        let shared = Arc::new(CellShared {
            t0,
            window_start_ns: AtomicU64::new(u64::MAX),
            window_end_ns: AtomicU64::new(u64::MAX),
            sub_windows,
            producing_now: AtomicU32::new(0),
            ever_produced: AtomicU32::new(0),
            requests_started: AtomicU32::new(0),
            errors: AtomicU32::new(0),
            failures: Mutex::new(BTreeMap::new()),
        });
        let streams_cancel = cancel.child_token();
        let first_token_timeout = Duration::from_secs_f64(self.spec.ready_timeout_s.max(1.0));
        let stall_timeout = Duration::from_secs_f64(self.spec.request_timeout_s.max(0.1));
        let mut handles = Vec::with_capacity(c as usize);
        for i in 0..c {
            handles.push(tokio::spawn(run_stream(
                self.client.clone(),
                self.request_body(i),
                shared.clone(),
                // One child token per stream: polling a token locks its node, so streams
                // sharing one token would contend on every chunk.
                streams_cancel.child_token(),
                first_token_timeout,
                stall_timeout,
            )));
        }

        let admission = self.admit(&shared, cancel).await;
        let ready_after = t0.elapsed().as_secs_f64();
        let (status, reason, warmup_s, window_s) = match &admission {
            Admission::Ready { detail } => {
                self.emit(
                    "ready",
                    format!("ready C={c} ctx={} {detail}", context_label(ctx)),
                );
                (
                    CellStatus::Ok,
                    Some(detail.clone()),
                    self.spec.warmup_s,
                    self.spec.duration_s,
                )
            }
            Admission::CapacityLimited { reason } => {
                self.emit(
                    "capacity_limited",
                    format!("capacity limited C={c} ctx={} {reason}", context_label(ctx)),
                );
                // Already steady (admission stalled): a short window records what it makes.
                (
                    CellStatus::CapacityLimited,
                    Some(reason.clone()),
                    0.0,
                    self.spec.duration_s * 0.5,
                )
            }
            Admission::Failed { reason } => {
                streams_cancel.cancel();
                join_all(handles).await;
                self.emit(
                    "cell_error",
                    format!("cell error C={c} ctx={} {reason}", context_label(ctx)),
                );
                let mut cell = CellResult::unmeasured(c, ctx, CellStatus::Error, reason.clone());
                cell.errors = shared.errors.load(Ordering::Relaxed);
                return cell;
            }
            Admission::Cancelled => {
                streams_cancel.cancel();
                join_all(handles).await;
                let mut cell = CellResult::unmeasured(c, ctx, CellStatus::Error, "cancelled");
                cell.errors = shared.errors.load(Ordering::Relaxed);
                return cell;
            }
        };

        // Warm-up.
        if warmup_s > 0.0 {
            tokio::select! {
                _ = cancel.cancelled() => {}
                _ = tokio::time::sleep(Duration::from_secs_f64(warmup_s)) => {}
            }
        }
        if cancel.is_cancelled() {
            streams_cancel.cancel();
            join_all(handles).await;
            return CellResult::unmeasured(c, ctx, CellStatus::Error, "cancelled");
        }

        // Steady-state window.
        let s0 = scrape(self.client, self.dialect).await;
        if let Some(s) = &self.sampler {
            s.start_window();
        }
        let open = Instant::now();
        let start_ns = open.duration_since(t0).as_nanos() as u64;
        let len_ns = (window_s.max(0.001) * 1e9) as u64;
        shared
            .window_end_ns
            .store(start_ns + len_ns, Ordering::Release);
        shared.window_start_ns.store(start_ns, Ordering::Release);
        let close = open + Duration::from_nanos(len_ns);
        let errors_at_open = shared.errors.load(Ordering::Relaxed);
        let requests_at_open = shared.requests_started.load(Ordering::Relaxed);
        let mut running = Vec::new();
        let mut waiting = Vec::new();
        let poll = Duration::from_secs_f64(self.spec.metrics_poll_s.max(0.05));
        let mut cancelled = false;
        loop {
            let now = Instant::now();
            if now >= close {
                break;
            }
            let wake = (now + poll).min(close);
            tokio::select! {
                _ = cancel.cancelled() => { cancelled = true; break; }
                _ = tokio::time::sleep_until(wake.into()) => {}
            }
            if Instant::now() >= close {
                break;
            }
            if let Some((_, st)) = scrape(self.client, self.dialect).await {
                if let Some(r) = st.running {
                    running.push(r);
                }
                if let Some(q) = st.waiting {
                    waiting.push(q);
                }
            }
        }
        let s1 = if cancelled {
            None
        } else {
            scrape(self.client, self.dialect).await
        };
        streams_cancel.cancel();
        let records = join_all(handles).await;
        if cancelled {
            return CellResult::unmeasured(c, ctx, CellStatus::Error, "cancelled");
        }

        // Aggregate.
        let sub_len_s = window_s / sub_windows as f64;
        let mut sub_tokens = vec![0.0f64; sub_windows];
        let mut itl = stats::new_latency_histogram();
        let (mut itl_sum, mut itl_n) = (0.0f64, 0u64);
        let mut ttfts = Vec::new();
        let mut per_user = Vec::new();
        let mut prompt_tokens = None;
        let (mut saw_cont, mut saw_chunks) = (false, false);
        for r in &records {
            for (t, s) in sub_tokens.iter_mut().zip(&r.sub_tokens) {
                *t += s;
            }
            let _ = itl.add(&r.itl);
            itl_sum += r.itl_sum_s;
            itl_n += r.itl_n;
            ttfts.extend_from_slice(&r.ttfts);
            if r.itl_n > 0 && r.itl_sum_s > 0.0 {
                per_user.push(r.itl_n as f64 / r.itl_sum_s);
            }
            prompt_tokens = prompt_tokens.or(r.prompt_tokens);
            saw_cont |= r.saw_continuous;
            saw_chunks |= r.saw_chunk_mode;
        }
        let total: f64 = sub_tokens.iter().sum();
        let output_tokens = total.round().max(0.0) as u64;
        let aggregate_tps = total / window_s;
        let samples: Vec<f64> = sub_tokens.iter().map(|t| t / sub_len_s).collect();
        let errors = shared.errors.load(Ordering::Relaxed);
        let requests = shared.requests_started.load(Ordering::Relaxed);
        let window_errors = errors - errors_at_open;
        let window_requests = requests - requests_at_open + c;

        let server_tps = match (&s0, &s1) {
            (Some((a_at, a)), Some((b_at, b))) => match (a.generated_tokens, b.generated_tokens) {
                (Some(x), Some(y)) if *b_at > *a_at => {
                    Some((y - x).max(0.0) / b_at.duration_since(*a_at).as_secs_f64())
                }
                _ => None,
            },
            _ => None,
        };
        let spec_decode = spec_stats(s0.as_ref(), s1.as_ref(), output_tokens, aggregate_tps);
        let telemetry = self
            .sampler
            .as_ref()
            .and_then(|s| s.finish_window(output_tokens));

        let mut status = status;
        let mut reason = reason;
        if output_tokens == 0 {
            status = CellStatus::Error;
            reason = Some(if errors > 0 {
                format!("no tokens in the window; {}", shared.failure_summary())
            } else {
                format!(
                    "no tokens in the {window_s:.1} s window although {} streams were admitted",
                    shared.ever_produced.load(Ordering::Relaxed)
                )
            });
        } else if window_errors > 0 && window_errors * 2 > window_requests {
            status = CellStatus::Error;
            reason = Some(shared.failure_summary());
        } else if errors > 0 && status == CellStatus::Ok {
            reason = Some(format!(
                "{}; {}",
                reason.unwrap_or_default(),
                shared.failure_summary()
            ));
        }

        let mean = |v: &[f64]| (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64);
        let cell = CellResult {
            concurrency: c,
            context_tokens: ctx,
            status,
            reason,
            aggregate_tps,
            samples,
            per_user_tps: stats::exact(&per_user),
            ttft_s: stats::exact(&ttfts),
            itl_s: stats::from_histogram(&itl, (itl_n > 0).then(|| itl_sum / itl_n as f64)),
            effective_concurrency: mean(&running),
            waiting_avg: mean(&waiting),
            output_tokens,
            measured_s: window_s,
            prompt_tokens,
            errors,
            token_source: Some(if saw_chunks || !saw_cont {
                TokenSource::ChunksReconciled
            } else {
                TokenSource::ContinuousUsage
            }),
            server_tps,
            ready_after_s: Some(ready_after),
            spec_decode,
            telemetry,
            rounds: Vec::new(),
        };
        let server = server_tps
            .map(|s| format!(" (engine counter {s:.1} tok/s)"))
            .unwrap_or_default();
        match cell.status {
            CellStatus::Error => self.emit(
                "cell_error",
                format!(
                    "cell error C={c} ctx={} {}",
                    context_label(ctx),
                    cell.reason.clone().unwrap_or_default()
                ),
            ),
            _ => self.emit(
                "cell_done",
                format!(
                    "cell done C={c} ctx={} {:.1} tok/s{server}",
                    context_label(ctx),
                    cell.aggregate_tps
                ),
            ),
        }
        cell
    }

    /// Readiness: waits until every stream produces and the engine runs all of them with an
    /// empty queue, stable for `ready_stable_s`; or declares the cell capacity-limited as soon
    /// as admission stalls; or fails on errors / time-out.
    async fn admit(&self, shared: &CellShared, cancel: &CancellationToken) -> Admission {
        let c = self.spec.concurrency;
        let cf = f64::from(c);
        let start = Instant::now();
        let poll = Duration::from_millis(250);
        let mut ready_since: Option<Instant> = None;
        let mut last_progress = start;
        let mut best_running = -1.0f64;
        let mut best_produced = 0u32;
        let mut metrics_seen = false;
        loop {
            tokio::select! {
                _ = cancel.cancelled() => return Admission::Cancelled,
                _ = tokio::time::sleep(poll) => {}
            }
            let now = Instant::now();
            let produced = shared.ever_produced.load(Ordering::Relaxed);
            let producing = f64::from(shared.producing_now.load(Ordering::Relaxed));
            let errors = shared.errors.load(Ordering::Relaxed);
            let requests = shared.requests_started.load(Ordering::Relaxed);
            // Most requests fail (whether or not they produced a token first): no amount of
            // waiting makes this cell measurable.
            if errors >= 2 * c + 2 && errors * 2 > requests {
                return Admission::Failed {
                    reason: shared.failure_summary(),
                };
            }
            let state = scrape(self.client, self.dialect).await;
            let (running, waiting) = match &state {
                Some((_, s)) => (s.running, s.waiting),
                None => (None, None),
            };
            metrics_seen |= running.is_some();
            if produced > best_produced {
                best_produced = produced;
                last_progress = now;
            }
            if let Some(r) = running
                && r > best_running
            {
                best_running = r;
                last_progress = now;
            }
            // A poll confirms readiness only when every stream is producing right now (no
            // restart in flight) and the engine agrees: running == C, queue empty. Polls
            // caught mid-restart neither confirm nor reset; a poll where everyone produces
            // but the engine disagrees resets the stable period. Above 16 streams a few
            // restarting streams (1 in 16) are tolerated.
            let tol = f64::from(c / 16);
            let all_producing = produced == c && producing + tol + 0.5 >= cf;
            let engine_agrees = match (running, waiting) {
                (Some(r), Some(q)) => q < 0.5 && r + tol + 0.5 >= cf,
                (Some(r), None) => r + tol + 0.5 >= cf,
                _ => true,
            };
            if all_producing && engine_agrees {
                let since = *ready_since.get_or_insert(now);
                let stable = now.duration_since(since).as_secs_f64();
                if stable >= self.spec.ready_stable_s {
                    let detail = match (running, waiting) {
                        (Some(r), Some(q)) => format!(
                            "running_reqs={}/{c}, queue_reqs={}, active_streams={}/{c}, stable={stable:.1}s",
                            fmt_n(r),
                            fmt_n(q),
                            fmt_n(producing)
                        ),
                        _ => format!(
                            "active_streams={}/{c} (no engine metrics), stable={stable:.1}s",
                            fmt_n(producing)
                        ),
                    };
                    return Admission::Ready { detail };
                }
            } else if all_producing || produced < c {
                ready_since = None;
            }
            // Admission stalled: some requests queue, the engine runs fewer than C, every
            // admitted request is already decoding (none is still prefilling), and nothing has
            // improved for `capacity_stall_s`.
            if let (Some(r), Some(q)) = (running, waiting)
                && q >= 0.5
                && r + 0.5 < cf
                && producing + 0.5 >= r
                && now.duration_since(last_progress).as_secs_f64() >= self.spec.capacity_stall_s
            {
                // Name the limit: a (nearly) full KV cache, or a cap on running requests
                // (llama.cpp slots, max_num_seqs) when the cache still has room.
                let limit = match state.as_ref().and_then(|(_, s)| s.kv_usage) {
                    Some(u) if u < 0.85 => format!(
                        "running-request limit (slots / max sequences; KV cache only {:.0}% used)",
                        u * 100.0
                    ),
                    Some(u) => format!("KV capacity, KV cache {:.0}% used", u * 100.0),
                    None => "KV capacity or running-request limit".to_string(),
                };
                return Admission::CapacityLimited {
                    reason: format!(
                        "running {}/{c}, waiting {}: {limit} (admission stalled {:.1} s)",
                        fmt_n(r),
                        fmt_n(q),
                        now.duration_since(last_progress).as_secs_f64()
                    ),
                };
            }
            if now.duration_since(start).as_secs_f64() >= self.spec.ready_timeout_s {
                let what = match (running, waiting) {
                    (Some(r), Some(q)) => format!(
                        "running {}/{c}, waiting {}, {produced}/{c} streams produced tokens",
                        fmt_n(r),
                        fmt_n(q)
                    ),
                    _ => format!("{produced}/{c} streams produced tokens"),
                };
                let errs = if errors > 0 {
                    format!("; {}", shared.failure_summary())
                } else {
                    String::new()
                };
                if produced > 0 && (waiting.unwrap_or(0.0) >= 0.5 || !metrics_seen) {
                    return Admission::CapacityLimited {
                        reason: format!(
                            "not all streams admitted after {:.0} s: {what}{errs}",
                            self.spec.ready_timeout_s
                        ),
                    };
                }
                return Admission::Failed {
                    reason: format!(
                        "not ready after {:.0} s: {what}{errs}",
                        self.spec.ready_timeout_s
                    ),
                };
            }
        }
    }
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

/// Speculative-decoding figures over the window (formulas in `results::SpecDecodeStats`).
fn spec_stats(
    s0: Option<&(Instant, EngineState)>,
    s1: Option<&(Instant, EngineState)>,
    output_tokens: u64,
    aggregate_tps: f64,
) -> Option<SpecDecodeStats> {
    let (a, b) = (&s0?.1, &s1?.1);
    if let (Some(x), Some(y)) = (&a.spec, &b.spec) {
        let drafts = (y.drafts - x.drafts).max(0.0);
        if drafts <= 0.0 {
            return None;
        }
        let draft_tokens = (y.draft_tokens - x.draft_tokens).max(0.0);
        let accepted = (y.accepted_tokens - x.accepted_tokens).max(0.0);
        let out = output_tokens as f64;
        let engine_steps = drafts + (out - (accepted + drafts)).max(0.0);
        let accept_len = if engine_steps > 0.0 {
            out / engine_steps
        } else {
            0.0
        };
        let per_position_acceptance = y
            .accepted_per_pos
            .iter()
            .enumerate()
            .map(|(i, v)| (v - x.accepted_per_pos.get(i).copied().unwrap_or(0.0)).max(0.0) / drafts)
            .collect();
        return Some(SpecDecodeStats {
            drafts: drafts as u64,
            draft_tokens: draft_tokens as u64,
            accepted_tokens: accepted as u64,
            acceptance_rate: if draft_tokens > 0.0 {
                accepted / draft_tokens
            } else {
                0.0
            },
            accept_len,
            steps_per_s: if accept_len > 0.0 {
                aggregate_tps / accept_len
            } else {
                0.0
            },
            per_position_acceptance,
        });
    }
    // SGLang reports only the mean accepted length as a gauge.
    let len = b.spec_accept_length_gauge?;
    Some(SpecDecodeStats {
        drafts: 0,
        draft_tokens: 0,
        accepted_tokens: 0,
        acceptance_rate: 0.0,
        accept_len: len,
        steps_per_s: aggregate_tps / len,
        per_position_acceptance: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::metrics::SpecCounters;

    fn worker(sub: usize) -> StreamWorker {
        let t0 = Instant::now();
        StreamWorker::new(Arc::new(CellShared {
            t0,
            window_start_ns: AtomicU64::new(u64::MAX),
            window_end_ns: AtomicU64::new(u64::MAX),
            sub_windows: sub,
            producing_now: AtomicU32::new(0),
            ever_produced: AtomicU32::new(0),
            requests_started: AtomicU32::new(0),
            errors: AtomicU32::new(0),
            failures: Mutex::new(BTreeMap::new()),
        }))
    }

    fn open_window(w: &StreamWorker, from_ms: u64, to_ms: u64) {
        w.shared
            .window_end_ns
            .store(to_ms * 1_000_000, Ordering::Release);
        w.shared
            .window_start_ns
            .store(from_ms * 1_000_000, Ordering::Release);
    }

    fn at(w: &StreamWorker, ms: u64) -> Instant {
        w.shared.t0 + Duration::from_millis(ms)
    }

    fn chunk(text: bool, usage: Option<u64>, finished: bool) -> ChunkInfo {
        ChunkInfo {
            has_text: text,
            completion_tokens: usage,
            prompt_tokens: None,
            finished,
            has_choices: true,
        }
    }

    #[test]
    fn continuous_usage_deltas_are_credited_at_arrival() {
        let mut w = worker(2);
        open_window(&w, 100, 300);
        w.begin_request(at(&w, 0));
        // tokens 1..=3 before the window, 4..=9 inside (two chunks of 3), 10 after.
        w.on_chunk(&chunk(true, Some(3), false), at(&w, 50));
        w.on_chunk(&chunk(true, Some(6), false), at(&w, 150));
        w.on_chunk(&chunk(true, Some(9), false), at(&w, 250));
        w.on_chunk(&chunk(true, Some(10), true), at(&w, 350));
        w.end_request();
        assert_eq!(w.rec.sub_tokens, vec![3.0, 3.0]);
        assert_eq!(w.rec.ttfts.len(), 1);
        assert!(w.rec.saw_continuous && !w.rec.saw_chunk_mode);
        // ITL: 2 chunks of 3 tokens 100 ms apart → 6 gaps of 33.3 ms.
        assert_eq!(w.rec.itl_n, 6);
        assert!((w.rec.itl_sum_s - 0.2).abs() < 1e-9);
        assert_eq!(w.shared.producing_now.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn final_only_usage_is_spread_over_the_requests_own_chunks() {
        let mut w = worker(1);
        open_window(&w, 100, 200);
        w.begin_request(at(&w, 0));
        // 10 chunks every 20 ms (t=20..200): 5 of them (100,120,...,180) in the window.
        for i in 1..=10u64 {
            w.on_chunk(&chunk(true, None, false), at(&w, 20 * i));
        }
        // The engine says 20 tokens were produced (2 per chunk): the window gets 10, not 20,
        // and nothing is credited at the end.
        w.on_chunk(&chunk(false, Some(20), true), at(&w, 201));
        w.end_request();
        assert!(
            (w.rec.sub_tokens[0] - 10.0).abs() < 1e-9,
            "{:?}",
            w.rec.sub_tokens
        );
        assert!(w.rec.saw_chunk_mode);
    }

    #[test]
    fn cut_off_requests_use_the_last_known_ratio() {
        let mut w = worker(1);
        open_window(&w, 0, 1000);
        w.begin_request(at(&w, 0));
        for i in 1..=4u64 {
            w.on_chunk(&chunk(true, None, false), at(&w, i));
        }
        w.on_chunk(&chunk(false, Some(8), true), at(&w, 5));
        w.end_request();
        assert!((w.rec.sub_tokens[0] - 8.0).abs() < 1e-9);
        w.begin_request(at(&w, 10));
        for i in 11..=13u64 {
            w.on_chunk(&chunk(true, None, false), at(&w, i));
        }
        w.end_request(); // cancelled at the window's end: 3 chunks x 2
        assert!(
            (w.rec.sub_tokens[0] - 14.0).abs() < 1e-9,
            "{:?}",
            w.rec.sub_tokens
        );
    }

    #[test]
    fn spec_formulas() {
        let st = |d: f64, dt: f64, a: f64| EngineState {
            spec: Some(SpecCounters {
                drafts: d,
                draft_tokens: dt,
                accepted_tokens: a,
                accepted_per_pos: vec![a * 0.6, a * 0.4],
            }),
            ..EngineState::default()
        };
        let t = Instant::now();
        let s = spec_stats(
            Some(&(t, st(100.0, 200.0, 50.0))),
            Some(&(t, st(200.0, 400.0, 150.0))),
            300,
            150.0,
        )
        .unwrap();
        // steps = 100 + max(0, 300 - (100 + 100)) = 200; accept_len = 1.5; steps/s = 100.
        assert_eq!(s.drafts, 100);
        assert!((s.accept_len - 1.5).abs() < 1e-9);
        assert!((s.steps_per_s - 100.0).abs() < 1e-9);
        assert!((s.acceptance_rate - 0.5).abs() < 1e-9);
        assert!((s.per_position_acceptance[0] - 0.6).abs() < 1e-9);
    }
}
