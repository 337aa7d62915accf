//! Token accounting of one cell: the state its stream tasks share with the controller
//! (window bounds, admission counters, how requests ended) and each stream's bookkeeping.
//!
//! With continuous usage (vLLM, SGLang) each chunk's cumulative `completion_tokens` delta is
//! credited at the chunk's arrival time. Without it (llama.cpp) each content chunk counts one
//! token, and when the request's final usage arrives the difference is spread over that
//! request's own chunks (so only the part that fell in the window is credited). A request's
//! final usage is never credited at its end.
//!
//! Every request ends one way ([`Ended`]): as asked (`finish_reason` `length` at
//! `max_tokens`, or `stop`), cut by the gate when the cell ends, or early by a cause
//! ([`EarlyEnd`]). The window tokens of a request that ended early are taken back out of
//! the cell's count, and its latencies are not recorded: a stream that ended early is not
//! work done.
//!
//! Latencies follow vLLM's `bench serve` (benchmarks/lib/endpoint_request_func.py and
//! serve.py `calculate_metrics`): TTFT from the request's send to its first token; ITL the gap
//! between successive arrivals of tokens after the first; TPOT per request `(last − first) /
//! (tokens − 1)`. Everything one read delivered is one arrival (all its chunks carry the
//! same instant), so coalesced chunks make no gaps of ~0.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use hdrhistogram::Histogram;

use crate::bench::chunk::{ChunkInfo, Finish, StreamEvent, parse_stream_event};
use crate::bench::client::RequestFailure;
use crate::bench::stats;
use infergate_schema::results::{EarlyEnd, RequestTally, TruncatedRequests};

/// State shared by a cell's stream tasks and its controller (atomics only on the hot path).
pub(super) struct CellShared {
    pub(super) t0: Instant,
    /// Window bounds as nanoseconds since `t0`; `u64::MAX` while the window is not open.
    pub(super) window_start_ns: AtomicU64,
    pub(super) window_end_ns: AtomicU64,
    pub(super) sub_windows: usize,
    /// `max_tokens` of every request.
    pub(super) max_tokens: u64,
    /// Streams whose current request has produced its first token and not yet ended.
    pub(super) producing_now: AtomicU32,
    /// The most streams producing at once so far.
    pub(super) peak_producing: AtomicU32,
    /// Streams that have produced at least one token since the cell started.
    pub(super) ever_produced: AtomicU32,
    pub(super) requests_started: AtomicU32,
    /// Requests that ended early (every cause), the count admission and the status read.
    pub(super) errors: AtomicU32,
    pub(super) failures: Mutex<BTreeMap<String, (u32, String)>>,
    /// Requests that ended as asked, of them at `stop` before `max_tokens`, and cut at close.
    pub(super) completed: AtomicU32,
    pub(super) stopped: AtomicU32,
    pub(super) cut: AtomicU32,
    /// Requests that ended early, by cause (index in [`EarlyEnd::ALL`]).
    pub(super) early: [AtomicU32; EarlyEnd::ALL.len()],
    /// The fewest tokens of a request that ended `length` short of `max_tokens`.
    pub(super) fewest_short: AtomicU64,
    /// Inter-token latencies of the cell's requests that did not end early: one per arrival
    /// after a request's first, nanoseconds. One histogram per cell, written once per request
    /// end: one per stream cost each stream its own ~150 KB of zeroed buckets at a GPU's ITL.
    pub(super) itl: Mutex<Histogram<u64>>,
}

impl CellShared {
    /// The cell's inter-token latencies, leaving an empty histogram (read once the cell's
    /// stream tasks have ended).
    pub(super) fn take_itl(&self) -> Histogram<u64> {
        let mut itl = self.itl.lock().unwrap_or_else(PoisonError::into_inner);
        std::mem::replace(&mut *itl, stats::new_latency_histogram())
    }

    /// Shared state for a cell starting now.
    pub(super) fn new(sub_windows: usize, max_tokens: u64) -> Self {
        CellShared {
            t0: Instant::now(),
            window_start_ns: AtomicU64::new(u64::MAX),
            window_end_ns: AtomicU64::new(u64::MAX),
            sub_windows: sub_windows.max(1),
            max_tokens,
            producing_now: AtomicU32::new(0),
            peak_producing: AtomicU32::new(0),
            ever_produced: AtomicU32::new(0),
            requests_started: AtomicU32::new(0),
            errors: AtomicU32::new(0),
            failures: Mutex::new(BTreeMap::new()),
            completed: AtomicU32::new(0),
            stopped: AtomicU32::new(0),
            cut: AtomicU32::new(0),
            early: Default::default(),
            fewest_short: AtomicU64::new(u64::MAX),
            itl: Mutex::new(stats::new_latency_histogram()),
        }
    }

    #[inline]
    pub(super) fn sub_index(&self, now: Instant) -> Option<usize> {
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

    /// Counts one request that ended early, under `cause` and the failure's kind.
    pub(super) fn record_early(&self, cause: EarlyEnd, f: &RequestFailure) {
        self.early[cause.index()].fetch_add(1, Ordering::Relaxed);
        self.errors.fetch_add(1, Ordering::Relaxed);
        if let Ok(mut map) = self.failures.lock() {
            let entry = map
                .entry(f.kind.clone())
                .or_insert_with(|| (0, f.detail.clone()));
            entry.0 += 1;
        }
    }

    /// Requests that ended with `finish_reason` `length` short of `max_tokens`, out of those
    /// that finished; `None` before any finished.
    pub(super) fn truncated(&self) -> Option<TruncatedRequests> {
        let short = self.early[EarlyEnd::FewerTokens.index()].load(Ordering::Relaxed);
        let finished = self.completed.load(Ordering::Relaxed) + short;
        (finished > 0).then(|| TruncatedRequests {
            short,
            finished,
            fewest_tokens: self
                .fewest_short
                .load(Ordering::Relaxed)
                .min(self.max_tokens),
        })
    }

    /// How every request ended so far.
    pub(super) fn tally(&self) -> RequestTally {
        RequestTally {
            sent: self.requests_started.load(Ordering::Relaxed),
            completed: self.completed.load(Ordering::Relaxed),
            stopped: self.stopped.load(Ordering::Relaxed),
            cut_at_close: self.cut.load(Ordering::Relaxed),
            ended_early: EarlyEnd::ALL
                .iter()
                .zip(&self.early)
                .map(|(c, n)| (*c, n.load(Ordering::Relaxed)))
                .filter(|(_, n)| *n > 0)
                .collect(),
            max_streams_at_once: self.peak_producing.load(Ordering::Relaxed),
        }
    }

    /// "12 of 14 requests ended early: HTTP 500 Internal Server Error (detail)".
    pub(super) fn failure_summary(&self) -> String {
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
                    format!(" ({})", crate::bench::client::excerpt(d, 300))
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
#[derive(Default)]
pub(super) struct StreamRecord {
    pub(super) sub_tokens: Vec<f64>,
    /// Sum of the stream's inter-token gaps (kept in [`CellShared::itl`]), and the tokens
    /// they brought (the stream's decode rate).
    pub(super) itl_sum_s: f64,
    pub(super) itl_n: u64,
    pub(super) ttfts: Vec<f64>,
    /// Time per output token of each request whose last token arrived in the window.
    pub(super) tpots: Vec<f64>,
    pub(super) prompt_tokens: Option<u64>,
    pub(super) saw_continuous: bool,
    pub(super) saw_chunk_mode: bool,
    /// The engine's word per request, for the cross-checks (every request whose usage is
    /// known at its end: continuous usage, or a final usage that arrived).
    pub(super) usage: UsageTally,
    /// Window tokens taken back out because their request ended early (they did arrive: the
    /// cross-checks against the engine's counter count them).
    pub(super) removed_window_tokens: f64,
}

/// What the engine reported about a stream's requests, beside what the client saw.
#[derive(Debug, Default, Clone)]
pub(super) struct UsageTally {
    /// Content chunks (with text) of the requests counted: each is at least one token.
    pub(super) text_chunks: u64,
    /// `completion_tokens` the engine reported for the same requests.
    pub(super) usage_tokens: u64,
    /// Requests counted.
    pub(super) requests: u32,
    /// The largest `completion_tokens` of one request.
    pub(super) max_request_usage: u64,
    /// Requests that finished (a finish reason): when the finish arrived and their usage.
    pub(super) finished: Vec<(Instant, u64)>,
}

impl UsageTally {
    /// Adds another stream's tally.
    pub(super) fn absorb(&mut self, other: &UsageTally) {
        self.text_chunks += other.text_chunks;
        self.usage_tokens += other.usage_tokens;
        self.requests += other.requests;
        self.max_request_usage = self.max_request_usage.max(other.max_request_usage);
        self.finished.extend_from_slice(&other.finished);
    }
}

/// How a request's stream ended, as the stream loop saw it.
#[derive(Debug)]
pub(super) enum Ended {
    /// The gate ended it (the window closed, the cell is over).
    Cut,
    /// The body ended (`terminated`), or did not end after the last event.
    Body { terminated: bool },
    /// The request failed.
    Failed(RequestFailure),
}

/// Per-request bookkeeping of a stream.
pub(super) struct RequestTrack {
    pub(super) sent: Instant,
    pub(super) first: Option<Instant>,
    /// The arrival that brought the request's latest tokens.
    pub(super) last: Instant,
    pub(super) usage_seen: u64,
    pub(super) continuous: bool,
    pub(super) chunk_tokens: u64,
    /// Tokens credited to each sub-window by this request, as credited.
    pub(super) window_counts: Vec<f64>,
    /// Window counts not yet scaled by a final usage (chunk mode).
    pub(super) any_window: bool,
    /// The ratio the window counts were scaled by when the final usage came (chunk mode).
    pub(super) applied_ratio: f64,
    pub(super) finish: Option<Finish>,
    pub(super) done: bool,
    /// Counted in `producing_now`.
    pub(super) producing: bool,
    /// Content chunks with text.
    pub(super) text_chunks: u64,
    /// The final usage, when it arrived (final-only usage).
    pub(super) final_usage: Option<u64>,
    /// When the chunk with the finish reason arrived.
    pub(super) finished_at: Option<Instant>,
    /// Latencies kept until the request ends (recorded only if it did not end early).
    pub(super) ttft: Option<f64>,
    pub(super) gaps_ns: Vec<u64>,
    pub(super) gap_sum_s: f64,
    pub(super) gap_tokens: u64,
    /// The current arrival opened a gap in the window (its further tokens belong to it).
    pub(super) arrival_in_gap: bool,
}

impl RequestTrack {
    /// A request sent at `sent` that has received nothing yet, in the buffers given (empty or
    /// zeroed).
    fn new(sent: Instant, window_counts: Vec<f64>, gaps_ns: Vec<u64>) -> Self {
        RequestTrack {
            sent,
            first: None,
            last: sent,
            usage_seen: 0,
            continuous: false,
            chunk_tokens: 0,
            window_counts,
            any_window: false,
            applied_ratio: 1.0,
            finish: None,
            done: false,
            producing: false,
            text_chunks: 0,
            final_usage: None,
            finished_at: None,
            ttft: None,
            gaps_ns,
            gap_sum_s: 0.0,
            gap_tokens: 0,
            arrival_in_gap: false,
        }
    }
}

pub(super) struct StreamWorker {
    pub(super) shared: Arc<CellShared>,
    pub(super) rec: StreamRecord,
    pub(super) req: RequestTrack,
    pub(super) ever: bool,
    /// Last final-usage / chunk ratio (applied to requests cut off by the window's end).
    pub(super) ratio: f64,
}

impl StreamWorker {
    /// A worker with nothing measured yet, one token counter per sub-window of the cell.
    pub(super) fn new(shared: Arc<CellShared>) -> Self {
        let (n, t0) = (shared.sub_windows, shared.t0);
        StreamWorker {
            shared,
            rec: StreamRecord {
                sub_tokens: vec![0.0; n],
                ..StreamRecord::default()
            },
            req: RequestTrack::new(t0, vec![0.0; n], Vec::with_capacity(1024)),
            ever: false,
            ratio: 1.0,
        }
    }

    /// Starts tracking a new request sent at `sent`, keeping the buffers of the last one.
    pub(super) fn begin_request(&mut self, sent: Instant) {
        let mut window_counts = std::mem::take(&mut self.req.window_counts);
        window_counts.fill(0.0);
        let mut gaps_ns = std::mem::take(&mut self.req.gaps_ns);
        gaps_ns.clear();
        self.req = RequestTrack::new(sent, window_counts, gaps_ns);
    }

    /// The request no longer produces (its last event arrived): it leaves `producing_now`
    /// at once, before its body is read to the end.
    pub(super) fn stop_producing(&mut self) {
        if self.req.producing {
            self.req.producing = false;
            self.shared.producing_now.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// Seconds the request had been silent at the window's close, when it is past its first
    /// token and that silence is at least half the window; `None` otherwise (still streaming,
    /// or waiting for its first token, or no window yet).
    fn silent_at_close(&self) -> Option<f64> {
        let start = self.shared.window_start_ns.load(Ordering::Acquire);
        let end = self.shared.window_end_ns.load(Ordering::Acquire);
        if start == u64::MAX || end <= start {
            return None;
        }
        self.req.first?;
        let last = self
            .req
            .last
            .saturating_duration_since(self.shared.t0)
            .as_nanos() as u64;
        let silent = end.checked_sub(last)?;
        (silent.saturating_mul(2) >= end - start).then_some(silent as f64 / 1e9)
    }

    /// The request's output tokens as best known: continuous usage, its final usage, or its
    /// text chunks scaled by the stream's last usage / chunk ratio.
    fn request_tokens(&self) -> u64 {
        if self.req.continuous {
            self.req.usage_seen
        } else if let Some(u) = self.req.final_usage {
            u
        } else {
            (self.req.chunk_tokens as f64 * self.ratio).round() as u64
        }
    }

    /// Whether the engine reported this request's token count (continuous or final usage).
    fn usage_known(&self) -> bool {
        self.req.continuous || self.req.final_usage.is_some()
    }

    /// How the request ended: `Ok(stopped_early)` when as asked (or cut by the gate:
    /// `Ok(false)` with `cut`), or the cause it ended early and why.
    fn classify(&self, ended: &Ended) -> Result<bool, (EarlyEnd, RequestFailure)> {
        let tokens = self.request_tokens();
        let max = self.shared.max_tokens;
        let after = || format!("after {tokens} tokens");
        let by_finish = |terminated: bool| match self.req.finish {
            None if self.req.done => Err((
                EarlyEnd::DoneWithoutFinish,
                RequestFailure::new("aborted: [DONE] without a finish_reason", after()),
            )),
            None => Err((
                EarlyEnd::NoFinishReason,
                RequestFailure::new(
                    "stream closed early",
                    format!("{}, without a finish reason or [DONE]", after()),
                ),
            )),
            Some(Finish::Other) => Err((
                EarlyEnd::OtherFinish,
                RequestFailure::new("finish_reason other than length/stop", after()),
            )),
            // Without usage the client counts chunks, and a chunk may carry several tokens:
            // only the engine's count can say a request came back short.
            // Usage below the chunks seen is the engine's usage lying (a cross-check's
            // business), not a short request.
            Some(Finish::Length)
                if tokens < max && tokens >= self.req.text_chunks && self.usage_known() =>
            {
                Err((
                    EarlyEnd::FewerTokens,
                    RequestFailure::new(
                        "truncated",
                        format!("finish_reason length after {tokens} of max_tokens = {max}"),
                    ),
                ))
            }
            Some(_) if !terminated => Err((
                EarlyEnd::BodyNotTerminated,
                RequestFailure::new(
                    "body not terminated",
                    "the HTTP body did not end after the last event",
                ),
            )),
            Some(f) => Ok(f == Finish::Stop && tokens < max && self.usage_known()),
        };
        match ended {
            Ended::Cut if self.req.finish.is_none() && !self.req.done => {
                match self.silent_at_close() {
                    // Past its first token, then silent for half the window or more: a stream that
                    // stalled, not one the window's end happened to cut (its tokens are not the
                    // engine's rate; a longer window would have timed it out).
                    Some(silent_s) => Err((
                        EarlyEnd::TimedOut,
                        RequestFailure::new(
                            "stream stalled",
                            format!(
                                "{}, then no token for the last {silent_s:.1} s of the window (still open at its close)",
                                after()
                            ),
                        ),
                    )),
                    None => Ok(false),
                }
            }
            Ended::Cut => by_finish(true),
            Ended::Body { terminated } => by_finish(*terminated),
            Ended::Failed(f) if self.req.finish.is_some() || self.req.done => by_finish(false)
                .map_err(|(c, g)| {
                    if c == EarlyEnd::BodyNotTerminated {
                        (c, f.clone())
                    } else {
                        (c, g)
                    }
                }),
            Ended::Failed(f) => {
                let cause = match f.kind.as_str() {
                    k if k.starts_with("HTTP ") => EarlyEnd::HttpError,
                    "timed out" | "stream stalled" => EarlyEnd::TimedOut,
                    "malformed SSE" | "engine error in stream" => EarlyEnd::Malformed,
                    "stream broken" | "connection closed by the engine before a response" => {
                        EarlyEnd::Reset
                    }
                    _ => EarlyEnd::Failed,
                };
                Err((cause, f.clone()))
            }
        }
    }

    /// Ends the request: counts how it ended, keeps its latencies and window tokens when it
    /// did what was asked (or was cut by the gate), takes its window tokens back otherwise.
    /// Returns the cause when it ended early.
    pub(super) fn end_request(&mut self, ended: Ended) -> Option<EarlyEnd> {
        let usage = if self.req.continuous {
            Some(self.req.usage_seen)
        } else {
            self.req.final_usage
        };
        if let Some(u) = usage
            && (u > 0 || self.req.text_chunks > 0)
        {
            let t = &mut self.rec.usage;
            t.text_chunks += self.req.text_chunks;
            t.usage_tokens += u;
            t.requests += 1;
            t.max_request_usage = t.max_request_usage.max(u);
            if let Some(at) = self.req.finished_at {
                t.finished.push((at, u));
            }
        }
        let outcome = self.classify(&ended);
        self.stop_producing();
        let cut = matches!(ended, Ended::Cut) && matches!(outcome, Ok(false));
        let cause = match outcome {
            Err((cause, failure)) => {
                // Not work done: its window tokens come back out.
                let scale = if self.req.any_window {
                    1.0
                } else {
                    self.req.applied_ratio
                };
                for (t, c) in self.rec.sub_tokens.iter_mut().zip(&self.req.window_counts) {
                    *t -= c * scale;
                    self.rec.removed_window_tokens += c * scale;
                }
                if cause == EarlyEnd::FewerTokens {
                    self.shared
                        .fewest_short
                        .fetch_min(self.request_tokens(), Ordering::Relaxed);
                }
                self.shared.record_early(cause, &failure);
                Some(cause)
            }
            Ok(stopped) => {
                if self.req.any_window && !self.req.continuous && (self.ratio - 1.0).abs() > 1e-12 {
                    // A request cut off before its final usage: use the stream's last known
                    // tokens-per-chunk ratio.
                    for (t, c) in self.rec.sub_tokens.iter_mut().zip(&self.req.window_counts) {
                        *t += c * (self.ratio - 1.0);
                    }
                }
                if cut {
                    self.shared.cut.fetch_add(1, Ordering::Relaxed);
                } else {
                    self.shared.completed.fetch_add(1, Ordering::Relaxed);
                    if stopped {
                        self.shared.stopped.fetch_add(1, Ordering::Relaxed);
                    }
                }
                self.keep_latencies();
                None
            }
        };
        self.req.any_window = false;
        self.req.first = None;
        cause
    }

    /// Records the request's TTFT, inter-token gaps and time per output token.
    fn keep_latencies(&mut self) {
        if let Some(t) = self.req.ttft {
            self.rec.ttfts.push(t);
        }
        if !self.req.gaps_ns.is_empty() {
            let mut itl = self
                .shared
                .itl
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            for &g in &self.req.gaps_ns {
                let _ = itl.record(g.max(1));
            }
        }
        self.rec.itl_sum_s += self.req.gap_sum_s;
        self.rec.itl_n += self.req.gap_tokens;
        let tokens = self.request_tokens();
        if let Some(first) = self.req.first
            && tokens >= 2
            && self.req.last > first
            && self.shared.sub_index(self.req.last).is_some()
        {
            let span = self.req.last.duration_since(first).as_secs_f64();
            self.rec.tpots.push(span / (tokens - 1) as f64);
        }
    }

    #[inline]
    pub(super) fn on_payload(
        &mut self,
        payload: &[u8],
        now: Instant,
    ) -> Result<(), RequestFailure> {
        match parse_stream_event(payload)? {
            StreamEvent::Done => {
                self.req.done = true;
                self.stop_producing();
                Ok(())
            }
            StreamEvent::Chunk(info) => {
                self.on_chunk(&info, now);
                Ok(())
            }
        }
    }

    #[inline]
    pub(super) fn on_chunk(&mut self, info: &ChunkInfo, now: Instant) {
        if let Some(p) = info.prompt_tokens {
            self.rec.prompt_tokens = Some(p);
        }
        if info.has_text {
            self.req.text_chunks += 1;
        }
        if info.finish.is_some() && self.req.finished_at.is_none() {
            self.req.finished_at = Some(now);
        }
        let mut final_usage = None;
        let tokens = match info.completion_tokens {
            Some(ct) if self.req.continuous || (info.has_choices && info.finish.is_none()) => {
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
            self.req.final_usage = Some(u);
            self.reconcile(u);
        }
        if self.req.finish.is_none() {
            self.req.finish = info.finish;
        }
        if info.finish.is_some() {
            self.stop_producing();
        }
    }

    #[inline]
    pub(super) fn credit(&mut self, n: u64, now: Instant) {
        let idx = self.shared.sub_index(now);
        if self.req.first.is_none() {
            self.req.first = Some(now);
            self.req.ttft = Some(now.saturating_duration_since(self.req.sent).as_secs_f64());
            if !self.ever {
                self.ever = true;
                self.shared.ever_produced.fetch_add(1, Ordering::Relaxed);
            }
            self.req.arrival_in_gap = false;
        } else if now != self.req.last {
            // A new arrival: one inter-token latency, whatever number of tokens it brings.
            if !self.req.producing && self.req.finish.is_none() && !self.req.done {
                // Decoding (past its first token): counted among the streams producing at
                // once from here, not from the first token, so a stream the engine runs
                // only for its prefill (then aborts, or makes wait) never counts.
                self.req.producing = true;
                let before = self.shared.producing_now.fetch_add(1, Ordering::Relaxed);
                self.shared
                    .peak_producing
                    .fetch_max(before + 1, Ordering::Relaxed);
            }
            self.req.arrival_in_gap = idx.is_some();
            if idx.is_some() {
                let gap = now.saturating_duration_since(self.req.last);
                self.req.gaps_ns.push(gap.as_nanos() as u64);
                self.req.gap_sum_s += gap.as_secs_f64();
                self.req.gap_tokens += n;
            }
        } else if self.req.arrival_in_gap {
            // More tokens of the same arrival (another chunk of the same read).
            self.req.gap_tokens += n;
        }
        if let Some(i) = idx {
            self.rec.sub_tokens[i] += n as f64;
            self.req.window_counts[i] += n as f64;
            if !self.req.continuous {
                self.req.any_window = true;
            }
        }
        if !self.req.continuous {
            self.req.chunk_tokens += n;
            self.rec.saw_chunk_mode = true;
        }
        self.req.last = now;
    }

    pub(super) fn reconcile(&mut self, usage: u64) {
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
            self.req.applied_ratio = ratio;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn worker(sub: usize) -> StreamWorker {
        StreamWorker::new(Arc::new(CellShared::new(sub, 8)))
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

    /// Asserts `v` is within 1e-9 of `want`; `all` (where `v` is from) is shown on failure.
    #[track_caller]
    fn assert_near(v: f64, want: f64, all: &[f64]) {
        assert!((v - want).abs() < 1e-9, "{all:?}");
    }

    fn chunk(text: bool, usage: Option<u64>, finished: bool) -> ChunkInfo {
        ChunkInfo {
            has_text: text,
            completion_tokens: usage,
            prompt_tokens: None,
            finish: finished.then_some(Finish::Length),
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
        w.end_request(Ended::Body { terminated: true });
        assert_eq!(w.rec.sub_tokens, vec![3.0, 3.0]);
        assert_eq!(w.rec.ttfts.len(), 1);
        assert!(w.rec.saw_continuous && !w.rec.saw_chunk_mode);
        // ITL: 2 arrivals in the window, 100 ms after the one before each: 2 samples, and
        // the stream's rate is their 6 tokens over 0.2 s.
        assert_eq!(w.shared.take_itl().len(), 2);
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
        w.end_request(Ended::Body { terminated: true });
        assert_near(w.rec.sub_tokens[0], 10.0, &w.rec.sub_tokens);
        assert!(w.rec.saw_chunk_mode);
    }

    #[test]
    fn cut_off_requests_use_the_last_known_ratio() {
        let mut w = worker(1);
        // Closed at 20 ms, the cut request streaming until 13 ms (not a stall).
        open_window(&w, 0, 20);
        w.begin_request(at(&w, 0));
        for i in 1..=4u64 {
            w.on_chunk(&chunk(true, None, false), at(&w, i));
        }
        w.on_chunk(&chunk(false, Some(8), true), at(&w, 5));
        w.end_request(Ended::Body { terminated: true });
        assert!((w.rec.sub_tokens[0] - 8.0).abs() < 1e-9);
        w.begin_request(at(&w, 10));
        for i in 11..=13u64 {
            w.on_chunk(&chunk(true, None, false), at(&w, i));
        }
        w.end_request(Ended::Cut); // cancelled at the window's end: 3 chunks x 2
        assert_near(w.rec.sub_tokens[0], 14.0, &w.rec.sub_tokens);
    }

    /// An aborted request (llama-cpp-python: `[DONE]` without a finish_reason) is counted by
    /// cause and its window tokens come back out; chunks of one read are one arrival.
    #[test]
    fn early_ends_are_not_work_and_one_read_is_one_arrival() {
        let mut w = worker(1);
        open_window(&w, 0, 1000);
        w.begin_request(at(&w, 0));
        w.on_chunk(&chunk(true, None, false), at(&w, 10));
        // Two chunks read together at 20 ms: one arrival, one ITL sample of 10 ms.
        w.on_chunk(&chunk(true, None, false), at(&w, 20));
        w.on_chunk(&chunk(true, None, false), at(&w, 20));
        w.on_payload(b"[DONE]", at(&w, 21)).unwrap();
        assert_eq!(w.shared.producing_now.load(Ordering::Relaxed), 0);
        let cause = w.end_request(Ended::Body { terminated: false });
        assert_eq!(cause, Some(EarlyEnd::DoneWithoutFinish));
        assert_eq!(w.rec.sub_tokens, vec![0.0], "its 3 tokens are taken back");
        assert!(w.rec.ttfts.is_empty() && w.shared.take_itl().is_empty());
        let tally = w.shared.tally();
        assert_eq!(tally.ended_early[&EarlyEnd::DoneWithoutFinish], 1);
        assert_eq!(tally.completed, 0);

        // A whole request: 8 tokens, the last two read together.
        w.begin_request(at(&w, 100));
        for ms in [110, 120, 130, 140, 150, 160] {
            w.on_chunk(&chunk(true, None, false), at(&w, ms));
        }
        w.on_chunk(&chunk(true, None, false), at(&w, 170));
        w.on_chunk(&chunk(true, Some(8), true), at(&w, 170));
        w.on_payload(b"[DONE]", at(&w, 170)).unwrap();
        assert_eq!(w.end_request(Ended::Body { terminated: true }), None);
        assert_eq!(w.rec.sub_tokens, vec![8.0]);
        assert_eq!(w.shared.take_itl().len(), 6, "6 arrivals after the first");
        assert_eq!(w.rec.itl_n, 7);
        // TPOT: (170 - 110) ms / (8 - 1) tokens.
        assert_eq!(w.rec.tpots.len(), 1);
        assert_near(w.rec.tpots[0], 0.060 / 7.0, &w.rec.tpots);
        assert_eq!(w.shared.tally().completed, 1);

        // finish_reason length before max_tokens: fewer tokens than asked.
        w.begin_request(at(&w, 200));
        w.on_chunk(&chunk(true, None, false), at(&w, 210));
        w.on_chunk(&chunk(true, Some(2), true), at(&w, 220));
        assert_eq!(
            w.end_request(Ended::Body { terminated: true }),
            Some(EarlyEnd::FewerTokens)
        );
        let t = w.shared.truncated().unwrap();
        assert_eq!((t.short, t.finished, t.fewest_tokens), (1, 2, 2));
        assert_eq!(w.rec.sub_tokens, vec![8.0]);
        // A stream still running at the close is the gate's doing: counted.
        w.begin_request(at(&w, 300));
        w.on_chunk(&chunk(true, None, false), at(&w, 310));
        w.on_chunk(&chunk(true, None, false), at(&w, 990));
        assert_eq!(w.end_request(Ended::Cut), None);
        assert_eq!(w.shared.tally().cut_at_close, 1);
        // One silent for half the window or more at the close stalled (its tokens are not the
        // engine's rate): an early end, timed out, not a request the close cut.
        w.begin_request(at(&w, 400));
        w.on_chunk(&chunk(true, None, false), at(&w, 410));
        w.on_chunk(&chunk(true, None, false), at(&w, 420));
        assert_eq!(w.end_request(Ended::Cut), Some(EarlyEnd::TimedOut));
        let t = w.shared.tally();
        assert_eq!((t.cut_at_close, t.ended_early[&EarlyEnd::TimedOut]), (1, 1));
        assert!(w.shared.failure_summary().contains("stream stalled"));
        // Waiting for its first token is not a stall (a queue, a long prefill).
        w.begin_request(at(&w, 450));
        assert_eq!(w.end_request(Ended::Cut), None);
    }
}
