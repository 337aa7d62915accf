//! Token accounting of one cell: the state its stream tasks share with the controller
//! (window bounds, admission counters, failure tally) and each stream's bookkeeping.
//!
//! With continuous usage (vLLM, SGLang) each chunk's cumulative `completion_tokens` delta is
//! credited at the chunk's arrival time. Without it (llama.cpp) each content chunk counts one
//! token, and when the request's final usage arrives the difference is spread over that
//! request's own chunks (so only the part that fell in the window is credited). A request's
//! final usage is never credited at its end.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use hdrhistogram::Histogram;

use crate::bench::chunk::{ChunkInfo, StreamEvent, parse_stream_event};
use crate::bench::client::RequestFailure;
use crate::bench::stats;

/// State shared by a cell's stream tasks and its controller (atomics only on the hot path).
pub(super) struct CellShared {
    pub(super) t0: Instant,
    /// Window bounds as nanoseconds since `t0`; `u64::MAX` while the window is not open.
    pub(super) window_start_ns: AtomicU64,
    pub(super) window_end_ns: AtomicU64,
    pub(super) sub_windows: usize,
    /// Streams whose current request has produced its first token.
    pub(super) producing_now: AtomicU32,
    /// Streams that have produced at least one token since the cell started.
    pub(super) ever_produced: AtomicU32,
    pub(super) requests_started: AtomicU32,
    pub(super) errors: AtomicU32,
    pub(super) failures: Mutex<BTreeMap<String, (u32, String)>>,
}

impl CellShared {
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

    pub(super) fn record_failure(&self, f: &RequestFailure) {
        self.errors.fetch_add(1, Ordering::Relaxed);
        if let Ok(mut map) = self.failures.lock() {
            let entry = map
                .entry(f.kind.clone())
                .or_insert_with(|| (0, f.detail.clone()));
            entry.0 += 1;
        }
    }

    /// "12 of 14 requests failed: HTTP 500 Internal Server Error (detail)".
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
pub(super) struct StreamRecord {
    pub(super) sub_tokens: Vec<f64>,
    pub(super) itl: Histogram<u64>,
    pub(super) itl_sum_s: f64,
    pub(super) itl_n: u64,
    pub(super) ttfts: Vec<f64>,
    pub(super) prompt_tokens: Option<u64>,
    pub(super) saw_continuous: bool,
    pub(super) saw_chunk_mode: bool,
    /// The engine's word per request, for the cross-checks (every request whose usage is
    /// known at its end: continuous usage, or a final usage that arrived).
    pub(super) usage: UsageTally,
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

/// Per-request bookkeeping of a stream.
pub(super) struct RequestTrack {
    pub(super) sent: Instant,
    pub(super) first: Option<Instant>,
    pub(super) last: Instant,
    pub(super) usage_seen: u64,
    pub(super) continuous: bool,
    pub(super) chunk_tokens: u64,
    pub(super) window_counts: Vec<f64>,
    pub(super) any_window: bool,
    pub(super) finished: bool,
    pub(super) done: bool,
    /// Content chunks with text.
    pub(super) text_chunks: u64,
    /// The final usage, when it arrived (final-only usage).
    pub(super) final_usage: Option<u64>,
    /// When the chunk with the finish reason arrived.
    pub(super) finished_at: Option<Instant>,
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
                itl: stats::new_latency_histogram(),
                itl_sum_s: 0.0,
                itl_n: 0,
                ttfts: Vec::new(),
                prompt_tokens: None,
                saw_continuous: false,
                saw_chunk_mode: false,
                usage: UsageTally::default(),
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
                text_chunks: 0,
                final_usage: None,
                finished_at: None,
            },
            ever: false,
            ratio: 1.0,
        }
    }

    pub(super) fn begin_request(&mut self, sent: Instant) {
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
        self.req.text_chunks = 0;
        self.req.final_usage = None;
        self.req.finished_at = None;
    }

    pub(super) fn end_request(&mut self) {
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
    pub(super) fn on_payload(
        &mut self,
        payload: &[u8],
        now: Instant,
    ) -> Result<(), RequestFailure> {
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
    pub(super) fn on_chunk(&mut self, info: &ChunkInfo, now: Instant) {
        if let Some(p) = info.prompt_tokens {
            self.rec.prompt_tokens = Some(p);
        }
        if info.has_text {
            self.req.text_chunks += 1;
        }
        if info.finished && self.req.finished_at.is_none() {
            self.req.finished_at = Some(now);
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
            self.req.final_usage = Some(u);
            self.reconcile(u);
        }
        self.req.finished |= info.finished;
    }

    #[inline]
    pub(super) fn credit(&mut self, n: u64, now: Instant) {
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
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

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
}
