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
        let cf = f64::from(c);
        let start = Instant::now();
        let poll =
            Duration::from_secs_f64((self.spec.timing.ready_stable_s / 5.0).clamp(0.05, 0.25));
        let mut ready_since: Option<Instant> = None;
        let mut agreeing_polls = 0u32;
        let mut last_progress = start;
        let mut best_running = -1.0f64;
        let mut best_produced = 0u32;
        let mut metrics_seen = false;
        // The most streams the client has seen producing at once, since when, and how many
        // requests had completed then (the no-metrics view of a stalled admission).
        let mut peak = 0u32;
        let mut peak_since = start;
        let mut completed_at_peak = 0u32;
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
                let tally = shared.tally();
                let truncated = shared.truncated();
                let explained = tally.aborted() * 2 > tally.early()
                    && tally.max_streams_at_once < c
                    || truncated.is_some_and(|t| t.short * 2 >= tally.early());
                return Admission::Failed {
                    reason: if explained {
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
                    },
                };
            }
            let peak_now = shared.peak_producing.load(Ordering::Relaxed);
            let completed = shared.completed.load(Ordering::Relaxed);
            if peak_now > peak {
                peak = peak_now;
                peak_since = now;
                completed_at_peak = completed;
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
            let gauges = running.is_some() && waiting.is_some();
            if all_producing && engine_agrees {
                let since = *ready_since.get_or_insert(now);
                agreeing_polls += 1;
                let stable = now.duration_since(since).as_secs_f64();
                let steady = if gauges {
                    agreeing_polls >= STEADY_POLLS
                } else {
                    stable >= self.spec.timing.ready_stable_s
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
                    return Admission::Ready {
                        detail,
                        admitted_at: since,
                    };
                }
            } else if all_producing || produced < c {
                ready_since = None;
                agreeing_polls = 0;
            }
            // Admission stalled: some requests queue, the engine runs fewer than C, every
            // admitted request is already decoding (none is still prefilling), and nothing has
            // improved for `capacity_stall_s`.
            if let (Some(r), Some(q)) = (running, waiting)
                && q >= 0.5
                && r + 0.5 < cf
                && producing + 0.5 >= r
                && now.duration_since(last_progress).as_secs_f64()
                    >= self.spec.timing.capacity_stall_s
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
            // Without the engine's gauges, what the client sees: the server never had more than
            // `peak` streams producing at once, and C requests completed since that peak was
            // reached (so streams took turns rather than ran together) for `capacity_stall_s`.
            // A slow prefill raises the peak as each stream is admitted; a server that runs
            // fewer streams than asked cycles requests without raising it.
            if running.is_none()
                && peak < c
                && completed >= completed_at_peak + c
                && now.duration_since(peak_since).as_secs_f64() >= self.spec.timing.capacity_stall_s
            {
                return Admission::CapacityLimited {
                    reason: format!(
                        "{} (as the client saw: no engine metrics): {} requests completed in {:.1} s while the other streams waited for their first token",
                        super::streams_at_once(peak, c),
                        completed - completed_at_peak,
                        now.duration_since(peak_since).as_secs_f64()
                    ),
                };
            }
            if now.duration_since(start).as_secs_f64() >= self.spec.timing.ready_timeout_s {
                let what = match (running, waiting) {
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
                    format!("; {}", shared.failure_summary())
                } else {
                    String::new()
                };
                if produced > 0 && (waiting.unwrap_or(0.0) >= 0.5 || !metrics_seen) {
                    return Admission::CapacityLimited {
                        reason: format!(
                            "not all streams admitted after {:.0} s: {what}{errs}",
                            self.spec.timing.ready_timeout_s
                        ),
                    };
                }
                return Admission::Failed {
                    reason: format!(
                        "not ready after {:.0} s: {what}{errs}",
                        self.spec.timing.ready_timeout_s
                    ),
                };
            }
        }
    }
}
