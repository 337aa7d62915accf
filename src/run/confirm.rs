//! The confirmation boot of `run`: when the first boot's matrix-wide change leans towards a
//! regression without proving one, boot the engine again, measure the whole matrix again, and
//! test both boots together (`stats::confirm`, `docs/statistics.md`).
//!
//! A uniform slowdown is confounded with the candidate's boot factor; only another boot redraws
//! that factor, so the second measurement is a fresh boot, never a re-measurement on the live
//! engine (that is what adaptive re-measurement does for single cells). Nothing here prints.

use std::path::{Path, PathBuf};

use tokio_util::sync::CancellationToken;

use crate::bench::EventSink;
use crate::results::{Event, EventKind, RunResults};
use crate::stats::DecisionRule;
use crate::verdict::ComparisonReport;

use super::decide::{Decision, GateError};
use super::measure::{MeasureRequest, MeasuredRun, boot_and_measure};

/// The results file of the confirmation boot, next to `results.json`.
pub(crate) const CONFIRM_RESULTS: &str = "results-confirm.json";

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

/// What the confirmation did.
#[derive(Debug)]
pub(crate) struct ConfirmOutcome {
    /// The second boot.
    pub measured: MeasuredRun,
    /// The comparison of both boots (with the plan's second-stage rule, the verdict carrying
    /// its [`Confirmation`]); `None` when the second boot failed (the run then fails with its
    /// reason).
    pub decision: Option<Result<Decision, GateError>>,
}

/// What the confirmation boot needs.
pub(crate) struct ConfirmRequest<'a> {
    /// The gate's decision rule.
    pub rule: &'a DecisionRule,
    /// The first look's decision: the baseline history loaded for it (not loaded again).
    pub first: &'a Decision,
    /// The first boot's request; its adaptive re-measurement is dropped.
    pub measure: MeasureRequest<'a>,
}

/// Boots the engine a second time (without adaptive re-measurement), measures the matrix, and
/// makes the plan's second look on the history the first look loaded. `first_run` gets
/// a `confirmation` event and a `confirmed_by` label; the second run a `confirms` label.
pub(crate) async fn confirm_boot(
    first_run: &mut RunResults,
    first: &ComparisonReport,
    req: ConfirmRequest<'_>,
    events: EventSink,
    cancel: CancellationToken,
) -> ConfirmOutcome {
    let ConfirmRequest {
        rule,
        first: decided,
        measure: mut req,
    } = req;
    let reason = crate::stats::confirm::reason(first);
    let event = Event::now(
        EventKind::Confirmation,
        format!("{reason}; booting the engine again to measure the matrix a second time"),
    );
    let _ = events.send(event.clone());
    first_run.events.push(event);
    req.adaptive = None;
    req.labels
        .insert("confirms".into(), first_run.run_id.clone());
    let _ = std::fs::remove_file(&req.log_path);
    let mut measured = boot_and_measure(req, events, cancel).await;
    first_run
        .labels
        .insert("confirmed_by".into(), measured.results.run_id.clone());
    let decision: Option<Result<Decision, GateError>> = measured.failure.is_none().then(|| {
        let verdict = crate::stats::confirm::second_stage(
            rule,
            &decided.history,
            first,
            std::slice::from_ref(first_run),
            std::slice::from_ref(&measured.results),
            CONFIRM_RESULTS,
        )?;
        Ok(Decision {
            verdict: Some(verdict),
            history: decided.history.clone(),
            notices: decided.notices.clone(),
        })
    });
    if let Some(Ok(d)) = &decision
        && let Some(v) = &d.verdict
    {
        let e = Event::now(
            EventKind::ConfirmationDone,
            format!("both boots compared: {}", v.gate.as_str()),
        );
        measured.results.events.push(e);
    }
    ConfirmOutcome { measured, decision }
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
