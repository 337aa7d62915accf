//! The verdict of a finished run recomputed from its results alone, against a trusted config
//! and baseline store: what `infergate report --trusted-config` posts in the two-workflow
//! pattern, so that neither the PR (which may edit `infergate.toml` or `baselines/` in its own
//! checkout) nor the engine it built (which may rewrite `verdict.json`) decides its own check.
//!
//! The results file is checked against what the trusted config asks (suite, matrix, model,
//! engine, pinned hardware, and a profile key that follows from them); anything else is
//! refused. The comparison then runs exactly as `run` made it, through the same library calls:
//! the first boot at the plan's first look, the
//! recorded adaptive rounds replayed look by look under the trusted budget and spending plan,
//! and the confirmation boot's results, when the trusted plan calls for one, compared together
//! with the first. Nothing is measured; a missing piece the trusted config requires (the
//! confirmation boot) is an error, never a pass.

use std::collections::{BTreeMap, VecDeque};
use std::path::Path;

use crate::config::{GateConfig, SuiteConfig};
use crate::results::{CellResult, CellStatus, ProfileKey, RunResults, RunStatus};

use super::adaptive::{look_at, remeasure_inconclusive, spending_plan};
use super::decide::{Decision, GateError, decide};

/// Why a verdict could not be recomputed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum RejudgeError {
    /// The results are not what the trusted config asks for.
    #[error("the results do not match the trusted config: {0}")]
    Mismatch(String),
    /// The run itself failed or stopped early: there is nothing to judge.
    #[error("the gate run did not complete: {0}")]
    Incomplete(String),
    /// The trusted config calls for a confirmation boot the artifact does not hold.
    #[error(
        "the trusted config's confirmation plan calls for a second boot, but no confirmation results were given (results-confirm.json)"
    )]
    MissingConfirmation,
    /// The comparison itself failed (unreadable store, statistics).
    #[error("comparison with the trusted baseline failed: {0}")]
    Gate(#[from] GateError),
}

/// Checks that `results` is a run of `suite` as the trusted `config` defines it.
pub(crate) fn check_matches(
    config: &GateConfig,
    suite: &SuiteConfig,
    results: &RunResults,
) -> Result<(), RejudgeError> {
    let mismatch = |m: String| Err(RejudgeError::Mismatch(m));
    if results.suite.as_deref() != Some(suite.name.as_str()) {
        return mismatch(format!(
            "suite `{}` in the results, `{}` asked",
            results.suite.as_deref().unwrap_or("-"),
            suite.name
        ));
    }
    let model = config
        .model
        .clone()
        .unwrap_or_else(|| results.matrix.model.clone());
    let want = suite.matrix_spec(&model);
    if results.matrix != want {
        return mismatch(format!(
            "matrix {} in the results, {} asked by the trusted config",
            describe(&results.matrix),
            describe(&want)
        ));
    }
    if results.profile.model != model {
        return mismatch(format!(
            "model `{}` in the profile, `{model}` asked",
            results.profile.model
        ));
    }
    if let Some(engine) = &config.engine.name
        && &results.profile.engine != engine
    {
        return mismatch(format!(
            "engine `{}` in the profile, `{engine}` asked",
            results.profile.engine
        ));
    }
    let hardware = config.profile.hardware(results.profile.hardware.clone());
    if hardware != results.profile.hardware {
        return mismatch(format!(
            "hardware {:?} in the profile, {:?} pinned by the trusted config",
            results.profile.hardware, hardware
        ));
    }
    let key = ProfileKey::derive(hardware, &results.profile.engine, &model, &want);
    if key.key != results.profile.key {
        return mismatch(format!(
            "profile key `{}` in the results, `{}` follows from their hardware, engine, model and matrix",
            results.profile.key, key.key
        ));
    }
    Ok(())
}

fn describe(m: &crate::results::MatrixSpec) -> String {
    format!(
        "C {:?} x contexts {:?}, {} s + {} s warm-up, max_tokens {}, {} sub-windows, {} repetition(s)",
        m.concurrency,
        m.contexts,
        m.timing.duration_s,
        m.timing.warmup_s,
        m.timing.max_tokens,
        m.timing.sub_windows,
        m.repetitions
    )
}

/// Recomputes the verdict of `results` (and of its confirmation boot, `confirm`) against the
/// trusted `config`'s rule and the baseline store `store_dir`.
pub(crate) async fn rejudge(
    config: &GateConfig,
    suite: &SuiteConfig,
    store_dir: &Path,
    results: &RunResults,
    confirm: Option<&RunResults>,
) -> Result<Decision, RejudgeError> {
    check_matches(config, suite, results)?;
    if results.status != RunStatus::Complete {
        return Err(RejudgeError::Incomplete(format!(
            "status {:?}{}",
            results.status,
            results
                .status_reason
                .as_deref()
                .map(|r| format!(": {r}"))
                .unwrap_or_default()
        )));
    }
    let rule = config.thresholds.rule.clone();
    let first_look = crate::stats::confirm::first_look(&rule, config.confirm.enabled);

    let (first_run, first) = if config.adaptive.enabled {
        replay_adaptive(config, store_dir, results, &rule, &first_look).await?
    } else {
        (
            results.clone(),
            decide(results, store_dir, &rule, &first_look)?,
        )
    };
    if !config.confirm.enabled {
        return Ok(first);
    }
    let Some(first_verdict) = first.verdict.as_ref() else {
        return Ok(first);
    };
    if !crate::stats::confirm::wants_confirmation(first_verdict) {
        return Ok(first);
    }
    let second = confirm.ok_or(RejudgeError::MissingConfirmation)?;
    check_matches(config, suite, second)?;
    if second.profile.key != results.profile.key
        || second.labels.get("confirms") != Some(&results.run_id)
    {
        return Err(RejudgeError::Mismatch(format!(
            "the confirmation results `{}` are not the second boot of `{}`",
            second.run_id, results.run_id
        )));
    }
    let mut decision = Decision {
        verdict: Some(
            crate::stats::confirm::second_stage(
                &rule,
                &first.history,
                first_verdict,
                std::slice::from_ref(&first_run),
                std::slice::from_ref(second),
                super::confirm::CONFIRM_RESULTS,
            )
            .map_err(GateError::from)?,
        ),
        history: first.history.clone(),
        notices: first.notices.clone(),
    };
    if let (Some(v), Some(recorded)) = (decision.verdict.as_mut(), confirm_note(results)) {
        v.confirmation = Some(recorded);
    }
    Ok(decision)
}

/// The confirmation note for people (the first boot's matrix test is recomputed; the reason is
/// the run's own words, which are rendered as escaped text).
fn confirm_note(results: &RunResults) -> Option<crate::verdict::Confirmation> {
    let reason = results
        .events
        .iter()
        .rev()
        .find(|e| e.kind == crate::results::EventKind::Confirmation)
        .map(|e| e.message.clone())?;
    Some(crate::verdict::Confirmation {
        reason,
        first_boot: None,
        provisional_alarms: 0,
        second_results: super::confirm::CONFIRM_RESULTS.into(),
        used: true,
    })
}

/// Replays the adaptive looks: every cell back to its first measurement, then the recorded
/// rounds fed to the same loop `run` uses, under the trusted budget and spending plan. A look
/// the run did not record stops the replay (as a cancelled run stops); recorded rounds beyond
/// the trusted budget are never used.
async fn replay_adaptive(
    config: &GateConfig,
    store_dir: &Path,
    results: &RunResults,
    rule: &crate::stats::DecisionRule,
    first_look: &crate::stats::Look,
) -> Result<(RunResults, Decision), RejudgeError> {
    let mut run = results.clone();
    let mut recorded: BTreeMap<(u32, u64), VecDeque<CellResult>> = BTreeMap::new();
    for cell in &mut run.cells {
        if cell.rounds.is_empty() {
            continue;
        }
        let rounds = std::mem::take(&mut cell.rounds);
        let first = &rounds[0];
        cell.samples = first.samples.clone();
        cell.aggregate_tps = first.aggregate_tps;
        cell.measured_s = first.measured_s;
        let later = rounds[1..]
            .iter()
            .map(|r| {
                let status = if r.measured_s > 0.0 {
                    CellStatus::Ok
                } else {
                    CellStatus::Error
                };
                let mut again =
                    CellResult::unmeasured(cell.concurrency, cell.context_tokens, status, "");
                again.reason = None;
                again.samples = r.samples.clone();
                again.aggregate_tps = r.aggregate_tps;
                again.measured_s = r.measured_s;
                again
            })
            .collect();
        recorded.insert(cell.coord(), later);
    }
    let plan = spending_plan(&config.adaptive, first_look);
    let first = decide(&run, store_dir, rule, &look_at(&plan, first_look, 0))?;
    let Some(report) = first.verdict.clone() else {
        return Ok((run, first));
    };
    let history = first.history.clone();
    // The trusted budget counts looks and rounds, not the replay's (instant) wall time.
    let mut budget = config.adaptive.clone();
    budget.max_extra_s = None;
    let (report, _) = remeasure_inconclusive(
        &mut run,
        &history,
        report,
        rule,
        first_look,
        &budget,
        1.0,
        async |c, ctx| recorded.get_mut(&(c, ctx)).and_then(VecDeque::pop_front),
        &|_| {},
    )
    .await
    .map_err(RejudgeError::Gate)?;
    Ok((
        run,
        Decision {
            verdict: Some(report),
            history,
            notices: first.notices,
        },
    ))
}
