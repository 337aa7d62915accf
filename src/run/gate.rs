//! After measuring: compare with the baseline store, decide the exit code, and write the
//! output directory (results, verdict, summary) atomically.

use std::path::{Path, PathBuf};

use crate::baseline::BaselineStore;
use crate::config::FailOn;
use crate::exit::GateExit;
use crate::results::{RunResults, RunStatus};
use crate::stats::DecisionRule;
use crate::verdict::{ComparisonReport, GateVerdict};

/// Why the comparison could not be made (the run itself may be fine).
#[derive(Debug, thiserror::Error)]
pub enum GateError {
    #[error("{0}")]
    Baseline(#[from] crate::baseline::BaselineError),
    #[error("{0}")]
    Stats(#[from] crate::stats::StatsError),
    #[error("cannot write {path}: {source}")]
    Write {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

/// The comparison of one run with its baseline history.
#[derive(Debug, Clone)]
pub struct Decision {
    /// `None` when there was nothing to compare (no baseline runs for this profile + suite).
    pub verdict: Option<ComparisonReport>,
    /// The baseline runs used (oldest → newest), for charts.
    pub history: Vec<RunResults>,
    /// Things people should know (no baseline, unreadable baseline files).
    pub notices: Vec<String>,
}

/// Loads the baseline runs of the run's profile and suite and compares.
pub fn decide(
    results: &RunResults,
    store_dir: &Path,
    rule: &DecisionRule,
) -> Result<Decision, GateError> {
    decide_runs(std::slice::from_ref(results), store_dir, rule)
}

/// [`decide`] for several candidate runs of one profile (repetitions, e.g. a confirmation
/// boot): the first run names the profile and suite.
pub fn decide_runs(
    runs: &[RunResults],
    store_dir: &Path,
    rule: &DecisionRule,
) -> Result<Decision, GateError> {
    let results = runs.first().ok_or(crate::stats::StatsError::NoCandidate)?;
    let store = BaselineStore::open(store_dir)?;
    let loaded = store.load(&results.profile.key, results.suite.as_deref())?;
    let mut notices: Vec<String> = loaded
        .skipped
        .iter()
        .map(|(p, why)| format!("baseline file {} skipped: {why}", p.display()))
        .collect();
    if loaded.runs.is_empty() {
        notices.push(format!(
            "no baseline for profile `{}` suite `{}` in {}: nothing to compare, the gate passes. Record one with `infergate run --update-baseline` (on the main branch) or `infergate baseline add RESULTS`",
            results.profile.key,
            results.suite.as_deref().unwrap_or("-"),
            store_dir.display()
        ));
        return Ok(Decision {
            verdict: None,
            history: Vec::new(),
            notices,
        });
    }
    let report = crate::stats::compare(&loaded.runs, runs, rule)?;
    Ok(Decision {
        verdict: Some(report),
        history: loaded.runs,
        notices,
    })
}

/// The exit code of a finished run: 3 when the run failed; otherwise the verdict under the
/// `fail_on` policy (no baseline and inconclusive pass unless `fail_on = "inconclusive"`).
pub fn exit_code(failed: bool, verdict: Option<&ComparisonReport>, fail_on: FailOn) -> GateExit {
    if failed {
        return GateExit::Failure;
    }
    match (verdict.map(|v| v.gate), fail_on) {
        (_, FailOn::Never) => GateExit::Pass,
        (Some(GateVerdict::Regression), _) => GateExit::Regression,
        (Some(GateVerdict::Inconclusive), FailOn::Inconclusive) => GateExit::Regression,
        _ => GateExit::Pass,
    }
}

/// Paths written into the output directory.
#[derive(Debug, Clone)]
pub struct OutputFiles {
    pub results: PathBuf,
    pub verdict: Option<PathBuf>,
    pub summary: PathBuf,
}

fn write_atomic(path: &Path, body: &[u8]) -> Result<(), GateError> {
    crate::fsio::write_durable(path, body).map_err(|source| GateError::Write {
        path: path.display().to_string(),
        source,
    })
}

/// Writes `results.json`, `verdict.json` (when compared) and `summary.md` into `out`, each
/// atomically (temp file + rename), so a reader never sees half a file.
pub fn write_outputs(
    out: &Path,
    results: &RunResults,
    verdict: Option<&ComparisonReport>,
    summary_md: &str,
) -> Result<OutputFiles, GateError> {
    std::fs::create_dir_all(out).map_err(|source| GateError::Write {
        path: out.display().to_string(),
        source,
    })?;
    let ser = |v: serde_json::Result<String>, what: &str| {
        v.map_err(|e| GateError::Write {
            path: format!("{}/{what}", out.display()),
            source: std::io::Error::other(e),
        })
    };
    let results_path = out.join("results.json");
    write_atomic(
        &results_path,
        ser(serde_json::to_string_pretty(results), "results.json")?.as_bytes(),
    )?;
    let verdict_path = match verdict {
        Some(v) => {
            let p = out.join("verdict.json");
            write_atomic(
                &p,
                ser(serde_json::to_string_pretty(v), "verdict.json")?.as_bytes(),
            )?;
            Some(p)
        }
        None => {
            // A stale verdict from an earlier run must not be mistaken for this one's.
            let stale = out.join("verdict.json");
            if stale.exists() {
                let _ = std::fs::remove_file(&stale);
            }
            None
        }
    };
    let summary = out.join("summary.md");
    write_atomic(&summary, summary_md.as_bytes())?;
    Ok(OutputFiles {
        results: results_path,
        verdict: verdict_path,
        summary,
    })
}

/// Whether this run may become a baseline run.
pub fn baseline_worthy(results: &RunResults, failed: bool) -> Result<(), String> {
    if failed || results.status != RunStatus::Complete {
        return Err(format!(
            "the run is {:?}, not complete: only complete runs become baselines",
            results.status
        )
        .to_lowercase());
    }
    BaselineStore::acceptable(results)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes_follow_the_policy() {
        assert_eq!(exit_code(true, None, FailOn::Never), GateExit::Failure);
        assert_eq!(exit_code(false, None, FailOn::Regression), GateExit::Pass);
        assert_eq!(exit_code(false, None, FailOn::Inconclusive), GateExit::Pass);
    }
}
