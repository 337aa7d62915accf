//! The verdict of a finished run recomputed from its results alone, against a trusted config
//! and baseline store: what `infergate report --trusted-config` posts in the two-workflow
//! pattern, so that neither the PR (which may edit `infergate.toml` or `baselines/` in its own
//! checkout) nor the engine it built (which may rewrite `verdict.json`) decides its own check.
//!
//! The results file is checked against what the trusted config asks (suite, matrix, model,
//! engine, pinned hardware, and a profile key that follows from them); anything else is
//! refused. The verdict is then given by the one judge (`stats::judge::replay`) under the
//! trusted plan: the first boot, its recorded adaptive rounds (rounds beyond the trusted
//! budget are never used), and the confirmation boot where the judge asks for one. The history
//! is the trusted store as it is: nothing in the untrusted files (not `verdict.json`'s
//! `baseline.runs`, not `started_at`) may choose which baseline runs judge them, since a
//! chosen window could be a slow one or none at all. So once the store has moved on, this is
//! the run judged against today's history; `compare --as-verdict` gives the run's own. Nothing
//! is measured; a missing piece the trusted plan requires (the confirmation boot) is an error,
//! never a pass.

use std::path::Path;

use infergate_config::config::{GateConfig, SuiteConfig};
use infergate_schema::results::{ProfileKey, RunResults, RunStatus};

use super::decide::{GateError, LoadedHistory, load_history};

/// Why a verdict could not be recomputed.
#[derive(Debug, thiserror::Error)]
pub enum RejudgeError {
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
    let model = config.model.as_ref().unwrap_or(&results.matrix.model);
    let want = suite.matrix_spec(model);
    if results.matrix != want {
        return mismatch(format!(
            "matrix {} in the results, {} asked by the trusted config",
            describe(&results.matrix),
            describe(&want)
        ));
    }
    if results.profile.model != *model {
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
    let key = ProfileKey::derive(hardware, &results.profile.engine, model, &want);
    if key.key != results.profile.key {
        return mismatch(format!(
            "profile key `{}` in the results, `{}` follows from their hardware, engine, model and matrix",
            results.profile.key, key.key
        ));
    }
    Ok(())
}

fn describe(m: &infergate_schema::results::MatrixSpec) -> String {
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
/// trusted `config`'s rule and plan and the baseline store `store_dir` as it is now: the judge
/// replays the recorded rounds and takes the second boot where it asks for one.
pub fn rejudge(
    config: &GateConfig,
    suite: &SuiteConfig,
    store_dir: &Path,
    results: &RunResults,
    confirm: Option<&RunResults>,
) -> Result<Judged, RejudgeError> {
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
    if let Some(second) = confirm {
        check_matches(config, suite, second)?;
        if second.profile.key != results.profile.key
            || second.labels.get("confirms") != Some(&results.run_id)
        {
            return Err(RejudgeError::Mismatch(format!(
                "the confirmation results `{}` are not the second boot of `{}`",
                second.run_id, results.run_id
            )));
        }
    }
    let loaded = load_history(results, store_dir)?;
    if loaded.is_empty() {
        return Ok(Judged {
            verdict: None,
            loaded,
        });
    }
    let replayed = infergate_model::stats::replay(
        loaded.history.clone(),
        &config.thresholds.rule,
        super::gate::plan_of(config),
        std::slice::from_ref(results),
        confirm.map(|c| (std::slice::from_ref(c), super::confirm::CONFIRM_RESULTS)),
    )
    .map_err(GateError::from)?;
    if let Some(c) = &replayed.report.confirmation
        && c.missing
    {
        return Err(RejudgeError::MissingConfirmation);
    }
    Ok(Judged {
        verdict: Some(replayed.report),
        loaded,
    })
}

/// A verdict given again, with the history it was judged on.
#[derive(Debug)]
pub struct Judged {
    /// `None` when the store holds no baseline for the run.
    pub verdict: Option<infergate_schema::verdict::ComparisonReport>,
    /// The history and what people should know of it.
    pub loaded: LoadedHistory,
}
