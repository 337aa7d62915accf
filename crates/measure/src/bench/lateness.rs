//! How late the host ran a thread that works and sleeps as an engine's step loop does, while a
//! decode window was open: the host's own share of a millisecond latency tail.
//!
//! A simulated engine, or any engine that decodes on the runner's CPUs, waits on a few wake-ups
//! per token; on a shared runner one of them delayed by the scheduler is a gap of several
//! milliseconds, which an ITL p99 of 6–13 ms reads as +50–90% (`docs/statistics.md`). The
//! probe makes that visible: each cycle it works [`WORK`] (a busy spin, as a step's CPU part),
//! sleeps [`SLEEP`], and records by how much the cycle overran. A thread that only sleeps does
//! not see a busy host: the scheduler favours a sleeper on wake-up (two busy loops on 2 cores
//! moved a sleeping probe's p99 overshoot 0.21 → 0.14 ms), while a probe that works 0.2 ms per
//! cycle read p99 0.23 ms idle and 3.6 ms under them. The model reads the figures; this module
//! only records them.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use infergate_schema::results::Percentiles;

use super::stats;

/// The busy part of one probe cycle.
const WORK: Duration = Duration::from_micros(200);
/// The sleeping part of one probe cycle.
const SLEEP: Duration = Duration::from_millis(1);
/// Cycles kept at most (a 10-minute window at ~1.2 ms a cycle): the memory stays bounded.
const MAX_SAMPLES: usize = 500_000;

/// A running probe: started at a window's opening edge, finished at its closing edge. Dropped
/// unfinished (a cell's future dropped mid-window), it stops its thread all the same: a
/// spinning thread must not outlive its window.
pub(crate) struct HostLatenessProbe {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<Vec<f64>>>,
}

impl Drop for HostLatenessProbe {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
    }
}

impl HostLatenessProbe {
    /// Starts the probe thread; `None` when no thread could be started (the cell then has no
    /// figure, and the model does not vouch for what needed it).
    pub(crate) fn start() -> Option<HostLatenessProbe> {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("host-lateness".into())
            .spawn(move || probe(&flag))
            .ok()?;
        Some(HostLatenessProbe {
            stop,
            thread: Some(thread),
        })
    }

    /// Stops the probe: how late its cycles ran, seconds; `None` without a cycle.
    pub(crate) fn finish(mut self) -> Option<Percentiles> {
        self.stop.store(true, Ordering::Release);
        let samples = self.thread.take()?.join().ok()?;
        stats::exact(&samples)
    }
}

/// The probe alone for `duration` on this host (`doctor`): how late its cycles ran, seconds.
pub fn sample(duration: Duration) -> Option<Percentiles> {
    let probe = HostLatenessProbe::start()?;
    std::thread::sleep(duration);
    probe.finish()
}

/// The probe's loop: one overrun (seconds) per cycle until `stop`.
fn probe(stop: &AtomicBool) -> Vec<f64> {
    let mut late = Vec::with_capacity(4096);
    let due = (WORK + SLEEP).as_secs_f64();
    while !stop.load(Ordering::Acquire) && late.len() < MAX_SAMPLES {
        let start = Instant::now();
        while start.elapsed() < WORK {
            std::hint::spin_loop();
        }
        std::thread::sleep(SLEEP);
        late.push((start.elapsed().as_secs_f64() - due).max(0.0));
    }
    late
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The probe records its cycles, none negative, and stops when asked (how many ran in the
    /// time depends on the host, so only that one did is asserted).
    #[test]
    fn a_probe_records_its_cycles_until_finished() {
        let probe = HostLatenessProbe::start().expect("a thread starts");
        std::thread::sleep(Duration::from_millis(60));
        let p = probe.finish().expect("cycles ran");
        assert!(p.count >= 1, "{p:?}");
        assert!(0.0 <= p.p50 && p.p50 <= p.p99, "{p:?}");
    }

    /// A probe dropped unfinished stops its thread.
    #[test]
    fn a_dropped_probe_stops_its_thread() {
        let probe = HostLatenessProbe::start().expect("a thread starts");
        let stop = Arc::clone(&probe.stop);
        drop(probe);
        assert!(stop.load(Ordering::Acquire));
    }
}
