//! The confirmation boot of `run`: when the first boot's matrix-wide change leans towards a
//! regression without proving one, boot the engine again, measure the whole matrix again, and
//! test both boots together (`stats::confirm`, `docs/statistics.md`).
//!
//! A uniform slowdown is confounded with the candidate's boot factor; only another boot redraws
//! that factor, so the second measurement is a fresh boot, never a re-measurement on the live
//! engine (that is what adaptive re-measurement does for single cells). The judge
//! (`stats::judge`) asks for it and decides; nothing here decides or prints.

use std::path::{Path, PathBuf};

use tokio_util::sync::CancellationToken;

use infergate_measure::bench::EventSink;
use infergate_schema::results::{Event, EventKind, RunResults};
use infergate_schema::verdict::ConfirmationReason;

use super::measure::{MeasureRequest, MeasuredRun, boot_and_measure};

/// The results file of the confirmation boot, next to `results.json`.
pub const CONFIRM_RESULTS: &str = "results-confirm.json";

/// The engine log of the confirmation boot: `engine.log` → `engine-confirm.log`, next to it.
pub(crate) fn confirm_log_path(first: &Path) -> PathBuf {
    let stem = first
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or("engine");
    let name = match first.extension().and_then(|e| e.to_str()) {
        Some(ext) => format!("{stem}-confirm.{ext}"),
        None => format!("{stem}-confirm"),
    };
    first.with_file_name(name)
}

/// Boots the engine a second time and measures the matrix (the judge asked for it, saying
/// `reason`). `first_run` gets a `confirmation` event and a `confirmed_by` label; the second
/// run a `confirms` label.
pub(crate) async fn confirm_boot(
    first_run: &mut RunResults,
    reason: &ConfirmationReason,
    mut req: MeasureRequest<'_>,
    events: EventSink,
    cancel: CancellationToken,
) -> MeasuredRun {
    let event = Event::now(
        EventKind::Confirmation,
        format!("{reason}; booting the engine again to measure the matrix a second time"),
    );
    let _ = events.send(event.clone());
    first_run.events.push(event);
    req.labels
        .insert("confirms".into(), first_run.run_id.clone());
    let _ = std::fs::remove_file(&req.log_path);
    let measured = boot_and_measure(req, events, cancel).await;
    first_run
        .labels
        .insert("confirmed_by".into(), measured.results.run_id.clone());
    measured
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_confirmation_log_sits_next_to_the_first() {
        assert_eq!(
            confirm_log_path(Path::new("/out/engine.log")),
            PathBuf::from("/out/engine-confirm.log")
        );
        assert_eq!(
            confirm_log_path(Path::new("logs/vllm")),
            PathBuf::from("logs/vllm-confirm")
        );
    }
}
