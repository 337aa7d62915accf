//! Admission: the readiness phase of a cell. Waits until the engine really runs every stream
//! (confirmed by [`STEADY_POLLS`] consecutive polls of the engine's gauges, or stable for
//! `ready_stable_s` when the engine has no metrics), declares the cell capacity-limited as
//! soon as admission stalls, or fails on errors and time-out.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use super::accounting::CellShared;
use super::{SustainedDecodeCell, early_end_reason, fmt_n};
use crate::bench::metrics::scrape;
use infergate_schema::results::CellTiming;

/// Consecutive polls on which the engine's own gauges (running == C, empty queue) and the
/// streams (all producing) agree that make a cell ready: the engine's view is direct
/// evidence, so it needs no fixed stable period. Without gauges, `ready_stable_s` of
/// agreement from the streams alone is required.
pub(super) const STEADY_POLLS: u32 = 3;

/// How the readiness phase ended.
pub(super) enum Admission {
    /// Every stream runs. `admitted_at`: since when, without interruption (the warm-up counts
    /// from there, overlapping the confirmation).
    Ready {
        detail: String,
        admitted_at: Instant,
    },
    CapacityLimited {
        reason: String,
    },
    Failed {
        reason: String,
    },
    Cancelled,
}

impl SustainedDecodeCell<'_> {
    /// Readiness: waits until every stream produces and the engine runs all of them with an
    /// empty queue, on [`STEADY_POLLS`] consecutive polls (without engine gauges: for
    /// `ready_stable_s`); or declares the cell capacity-limited as soon as admission stalls;
    /// or fails on errors / time-out. Polls every `ready_stable_s / 5` (50–250 ms).
    pub(super) async fn admit(&self, shared: &CellShared, cancel: &CancellationToken) -> Admission {
        let c = self.spec.concurrency;
        let mut watch = AdmissionWatch::new(c, &self.spec.timing, shared);
        let poll =
            Duration::from_secs_f64((self.spec.timing.ready_stable_s / 5.0).clamp(0.05, 0.25));
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
                    reason: watch.most_failed_reason(),
                };
            }
            let completed = watch.track_peak(now);
            let state = scrape(self.client, self.dialect).await;
            let (running, waiting) = state
                .as_ref()
                .map_or((None, None), |(_, s)| (s.running, s.waiting));
            let seen = PollReading {
                now,
                produced,
                producing,
                errors,
                completed,
                running,
                waiting,
                kv_usage: state.as_ref().and_then(|(_, s)| s.kv_usage),
            };
            if let Some(admission) = watch.judge(&seen) {
                return admission;
            }
        }
    }
}

/// What one readiness poll read: the streams' counters and the engine's gauges.
struct PollReading {
    now: Instant,
    produced: u32,
    producing: f64,
    errors: u32,
    completed: u32,
    running: Option<f64>,
    waiting: Option<f64>,
    kv_usage: Option<f64>,
}

/// The readiness phase's view across its polls: since when streams and engine agree, the
/// best progress and when it was made, the most streams seen producing at once.
struct AdmissionWatch<'a> {
    c: u32,
    timing: &'a CellTiming,
    shared: &'a CellShared,
    start: Instant,
    ready_since: Option<Instant>,
    agreeing_polls: u32,
    last_progress: Instant,
    best_running: f64,
    best_produced: u32,
    metrics_seen: bool,
    /// The most streams the client has seen producing at once, since when, and how many
    /// requests had completed then (the no-metrics view of a stalled admission).
    peak: u32,
    peak_since: Instant,
    completed_at_peak: u32,
}

impl<'a> AdmissionWatch<'a> {
    fn new(c: u32, timing: &'a CellTiming, shared: &'a CellShared) -> Self {
        let start = Instant::now();
        AdmissionWatch {
            c,
            timing,
            shared,
            start,
            ready_since: None,
            agreeing_polls: 0,
            last_progress: start,
            best_running: -1.0,
            best_produced: 0,
            metrics_seen: false,
            peak: 0,
            peak_since: start,
            completed_at_peak: 0,
        }
    }

    /// Why a cell where most requests fail is an error: the early ends' pattern when it
    /// explains them (aborts while fewer streams ran, short requests), else the failures.
    fn most_failed_reason(&self) -> String {
        let (c, shared) = (self.c, self.shared);
        let tally = shared.tally();
        let truncated = shared.truncated();
        let explained = tally.aborted() * 2 > tally.early() && tally.max_streams_at_once < c
            || truncated.is_some_and(|t| t.short * 2 >= tally.early());
        if explained {
            early_end_reason(
                c,
                &tally,
                tally.completed + tally.early(),
                truncated,
                shared.max_tokens,
                &shared.failure_summary(),
            )
        } else {
            shared.failure_summary()
        }
    }

    /// Notes a new peak of streams producing at once; the requests completed so far.
    fn track_peak(&mut self, now: Instant) -> u32 {
        let peak_now = self.shared.peak_producing.load(Ordering::Relaxed);
        let completed = self.shared.completed.load(Ordering::Relaxed);
        if peak_now > self.peak {
            self.peak = peak_now;
            self.peak_since = now;
            self.completed_at_peak = completed;
        }
        completed
    }

    /// How admission ends after this poll, if it does: ready, capacity-limited (the engine's
    /// gauges or the client's view show a stall), or timed out.
    fn judge(&mut self, p: &PollReading) -> Option<Admission> {
        self.metrics_seen |= p.running.is_some();
        if p.produced > self.best_produced {
            self.best_produced = p.produced;
            self.last_progress = p.now;
        }
        if let Some(r) = p.running
            && r > self.best_running
        {
            self.best_running = r;
            self.last_progress = p.now;
        }
        self.confirm_ready(p)
            .or_else(|| self.engine_stall(p))
            .or_else(|| self.client_stall(p))
            .or_else(|| self.timed_out(p))
    }

    /// A poll confirms readiness only when every stream is producing right now (no restart
    /// in flight) and the engine agrees: running == C, queue empty. Polls caught mid-restart
    /// neither confirm nor reset; a poll where everyone produces but the engine disagrees
    /// resets the stable period. Above 16 streams a few restarting streams (1 in 16) are
    /// tolerated.
    fn confirm_ready(&mut self, p: &PollReading) -> Option<Admission> {
        let c = self.c;
        let cf = f64::from(c);
        let (now, produced, producing, running, waiting) =
            (p.now, p.produced, p.producing, p.running, p.waiting);
        let tol = f64::from(c / 16);
        let all_producing = produced == c && producing + tol + 0.5 >= cf;
        let engine_agrees = match (running, waiting) {
            (Some(r), Some(q)) => q < 0.5 && r + tol + 0.5 >= cf,
            (Some(r), None) => r + tol + 0.5 >= cf,
            _ => true,
        };
        let gauges = running.is_some() && waiting.is_some();
        if all_producing && engine_agrees {
            let since = *self.ready_since.get_or_insert(now);
            self.agreeing_polls += 1;
            let stable = now.duration_since(since).as_secs_f64();
            let steady = if gauges {
                self.agreeing_polls >= STEADY_POLLS
            } else {
                stable >= self.timing.ready_stable_s
            };
            if steady {
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
                return Some(Admission::Ready {
                    detail,
                    admitted_at: since,
                });
            }
        } else if all_producing || produced < c {
            self.ready_since = None;
            self.agreeing_polls = 0;
        }
        None
    }

    /// Admission stalled: some requests queue, the engine runs fewer than C, every admitted
    /// request is already decoding (none is still prefilling), and nothing has improved for
    /// `capacity_stall_s`.
    fn engine_stall(&self, p: &PollReading) -> Option<Admission> {
        let c = self.c;
        let cf = f64::from(c);
        let now = p.now;
        if let (Some(r), Some(q)) = (p.running, p.waiting)
            && q >= 0.5
            && r + 0.5 < cf
            && p.producing + 0.5 >= r
            && now.duration_since(self.last_progress).as_secs_f64() >= self.timing.capacity_stall_s
        {
            // Name the limit: a (nearly) full KV cache, or a cap on running requests
            // (llama.cpp slots, max_num_seqs) when the cache still has room.
            let limit = match p.kv_usage {
                Some(u) if u < 0.85 => format!(
                    "running-request limit (slots / max sequences; KV cache only {:.0}% used)",
                    u * 100.0
                ),
                Some(u) => format!("KV capacity, KV cache {:.0}% used", u * 100.0),
                None => "KV capacity or running-request limit".to_string(),
            };
            return Some(Admission::CapacityLimited {
                reason: format!(
                    "running {}/{c}, waiting {}: {limit} (admission stalled {:.1} s)",
                    fmt_n(r),
                    fmt_n(q),
                    now.duration_since(self.last_progress).as_secs_f64()
                ),
            });
        }
        None
    }

    /// Without the engine's gauges, what the client sees: the server never had more than
    /// `peak` streams producing at once, and C requests completed since that peak was reached
    /// (so streams took turns rather than ran together) for `capacity_stall_s`. A slow
    /// prefill raises the peak as each stream is admitted; a server that runs fewer streams
    /// than asked cycles requests without raising it.
    fn client_stall(&self, p: &PollReading) -> Option<Admission> {
        let c = self.c;
        if p.running.is_none()
            && self.peak < c
            && p.completed >= self.completed_at_peak + c
            && p.now.duration_since(self.peak_since).as_secs_f64() >= self.timing.capacity_stall_s
        {
            return Some(Admission::CapacityLimited {
                reason: format!(
                    "{} (as the client saw: no engine metrics): {} requests completed in {:.1} s while the other streams waited for their first token",
                    super::streams_at_once(self.peak, c),
                    p.completed - self.completed_at_peak,
                    p.now.duration_since(self.peak_since).as_secs_f64()
                ),
            });
        }
        None
    }

    /// After `ready_timeout_s`: capacity-limited when some streams produced and the rest
    /// queued (or the engine has no gauges), else failed.
    fn timed_out(&self, p: &PollReading) -> Option<Admission> {
        let c = self.c;
        let (produced, errors, peak) = (p.produced, p.errors, self.peak);
        if p.now.duration_since(self.start).as_secs_f64() >= self.timing.ready_timeout_s {
            let what = match (p.running, p.waiting) {
                (Some(r), Some(q)) => format!(
                    "running {}/{c}, waiting {}, {produced}/{c} streams produced tokens",
                    fmt_n(r),
                    fmt_n(q)
                ),
                _ => format!(
                    "at most {peak} of {c} streams produced tokens at once ({produced}/{c} produced at some point; no engine metrics)"
                ),
            };
            let errs = if errors > 0 {
                format!("; {}", self.shared.failure_summary())
            } else {
                String::new()
            };
            if produced > 0 && (p.waiting.unwrap_or(0.0) >= 0.5 || !self.metrics_seen) {
                return Some(Admission::CapacityLimited {
                    reason: format!(
                        "not all streams admitted after {:.0} s: {what}{errs}",
                        self.timing.ready_timeout_s
                    ),
                });
            }
            return Some(Admission::Failed {
                reason: format!(
                    "not ready after {:.0} s: {what}{errs}",
                    self.timing.ready_timeout_s
                ),
            });
        }
        None
    }
}
