//! Paired A/B runs: two engine builds (A = base, B = candidate) booted alternately on one
//! runner (A B B A A B B A …), each boot measuring the suite's matrix; the paired comparison of
//! the boots is [`infergate_model::stats::paired`] (why paired: see there and `docs/adaptive-and-ab.md`).
//!
//! Only one engine runs at a time: each boot is stopped (whole process group) before the next
//! starts, and a group that survives teardown stops the A/B run (exit 3).

use std::path::{Path, PathBuf};

use tokio_util::sync::CancellationToken;

use infergate_config::config::AbConfig;
use infergate_measure::bench::EventSink;
pub use infergate_schema::results::{AbBoot, AbSide};
use infergate_schema::results::{CellResult, CellStatus, Event, EventKind, RunResults, RunStatus};

use super::measure::{MeasureRequest, RunFailure, boot_and_measure};

/// Everything an A/B run measured.
#[derive(Debug, Default)]
pub(crate) struct AbRun {
    /// The A boots' results, in pair order.
    pub a: Vec<RunResults>,
    /// The B boots' results, in pair order.
    pub b: Vec<RunResults>,
    /// The boots in the order they ran.
    pub boots: Vec<AbBoot>,
    /// Set when the run must exit 3 (a boot failed, teardown left processes, cancelled).
    pub failure: Option<RunFailure>,
    /// Engine-seconds spent (wall clock of all boots, measurement and teardown).
    pub elapsed_s: f64,
}

/// What an A/B run needs besides the config.
pub(crate) struct AbRequest<'a> {
    /// What every boot shares; its engine, log, labels and progress file are each boot's.
    pub base: MeasureRequest<'a>,
    pub ab: &'a AbConfig,
    /// Directory for the per-boot engine logs (`engine-<NN>-<a|b>.log`).
    pub log_dir: PathBuf,
    /// Pairs of boots.
    pub pairs: u32,
}

/// Boots A and B alternately (the config's order), measuring the suite on each boot; stops at
/// the first failure. Never runs two engines at once.
pub(crate) async fn run_ab(
    req: AbRequest<'_>,
    events: EventSink,
    cancel: CancellationToken,
) -> AbRun {
    let started = std::time::Instant::now();
    let schedule = req.ab.order.schedule(req.pairs);
    let mut run = AbRun::default();
    for (index, &(pair, is_b)) in schedule.iter().enumerate() {
        let side = if is_b { AbSide::B } else { AbSide::A };
        if cancel.is_cancelled() {
            run.failure = Some(RunFailure::Cancelled);
            break;
        }
        let _ = events.send(Event::now(
            EventKind::AbBoot,
            format!(
                "boot {} of {}: engine {} (pair {})",
                index + 1,
                schedule.len(),
                side.as_str().to_uppercase(),
                pair + 1
            ),
        ));
        let mut labels = req.base.labels.clone();
        labels.insert("ab_side".into(), side.as_str().into());
        labels.insert("ab_pair".into(), pair.to_string());
        labels.insert("ab_boot".into(), index.to_string());
        let engine = if is_b { &req.ab.b } else { &req.ab.a };
        let log_path = match &engine.log_file {
            Some(p) => p.with_file_name(format!(
                "{}-{index:02}-{}.log",
                p.file_stem().and_then(|s| s.to_str()).unwrap_or("engine"),
                side.as_str()
            )),
            None => req
                .log_dir
                .join(format!("engine-{index:02}-{}.log", side.as_str())),
        };
        let _ = std::fs::remove_file(&log_path);
        let measured = boot_and_measure(
            MeasureRequest {
                engine,
                log_path,
                labels,
                progress_file: None,
                ..req.base.clone()
            },
            events.clone(),
            cancel.clone(),
        )
        .await;
        let group_gone = measured.stop.as_ref().is_none_or(|s| s.group_gone);
        let pgid = measured.results.engine_process_group();
        let mut results = measured.results;
        let stopped = match pgid {
            Some(g) if group_gone => format!("engine process group {g} stopped; no process left"),
            Some(g) => format!("engine process group {g} survived teardown"),
            None => "engine never started".to_string(),
        };
        let stop_event = Event::now(EventKind::EngineStopped, stopped);
        let _ = events.send(stop_event.clone());
        results.events.push(stop_event);
        run.boots.push(AbBoot {
            index: index as u32,
            pair,
            side,
            pgid,
            group_gone,
            boot_s: measured.boot_s,
            failure: measured.failure.as_ref().map(RunFailure::message),
        });
        if is_b {
            run.b.push(results);
        } else {
            run.a.push(results);
        }
        if let Some(f) = stop_after(index, side, measured.failure, group_gone) {
            run.failure = Some(f);
            break;
        }
    }
    run.elapsed_s = started.elapsed().as_secs_f64();
    run
}

/// Why no boot follows boot `index`: it failed, or its engine left processes behind that the
/// other engine would run next to.
fn stop_after(
    index: usize,
    side: AbSide,
    failure: Option<RunFailure>,
    group_gone: bool,
) -> Option<RunFailure> {
    let (boot, engine) = (index + 1, side.as_str().to_uppercase());
    match failure {
        Some(RunFailure::Cancelled) => Some(RunFailure::Cancelled),
        Some(other) => Some(RunFailure::Measurement(format!(
            "boot {boot} (engine {engine}) failed: {}",
            other.message()
        ))),
        None if !group_gone => Some(RunFailure::Measurement(format!(
            "engine {engine} (boot {boot}) left processes behind after SIGKILL: not booting the other engine next to it"
        ))),
        None => None,
    }
}

/// Folds the boots of one side into one results file: the first boot's header, each cell's
/// `rounds` = its measurement in each boot (round = pair index), samples pooled, aggregate the
/// mean over boots, every boot's events.
pub(crate) fn fold_side(runs: &[RunResults]) -> Option<RunResults> {
    let mut out = runs.first()?.clone();
    for (pair, run) in runs.iter().enumerate().skip(1) {
        for cell in &mut out.cells {
            let again = run
                .cells
                .iter()
                .find(|c| c.coord() == cell.coord())
                .cloned()
                .unwrap_or_else(|| {
                    CellResult::unmeasured(
                        cell.concurrency,
                        cell.context_tokens,
                        CellStatus::Error,
                        "missing in this boot",
                    )
                });
            cell.fold_round(&again, pair as u32);
        }
        out.events.extend(run.events.iter().cloned());
        if run.status != RunStatus::Complete {
            out.status = run.status;
            out.status_reason = run.status_reason.clone();
        }
        out.finished_at = run.finished_at;
    }
    out.events.sort_by_key(|e| e.at);
    out.labels.remove("ab_pair");
    out.labels.remove("ab_boot");
    out.labels.insert("ab_boots".into(), runs.len().to_string());
    Some(out)
}

/// Where the per-side folded results go.
pub(crate) fn side_results_path(out: &Path, side: AbSide) -> PathBuf {
    match side {
        AbSide::B => out.join("results.json"),
        AbSide::A => out.join("results-a.json"),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn abba_schedule_alternates_and_never_repeats_a_boot() {
        let s = infergate_config::config::AbOrder::Abba.schedule(4);
        let sides: String = s.iter().map(|(_, b)| if *b { 'B' } else { 'A' }).collect();
        assert_eq!(sides, "ABBAABBA");
        let s = infergate_config::config::AbOrder::Ab.schedule(2);
        let sides: String = s.iter().map(|(_, b)| if *b { 'B' } else { 'A' }).collect();
        assert_eq!(sides, "ABAB");
    }
}
