//! Joining shard verdicts: a fan-out workflow measures one profile per GPU runner (H100, H200,
//! RTX 5090, ...), and a final job needs ONE verdict, one check and one comment. This module
//! reads each shard's `verdict.json` (a [`ComparisonReport`]) — or, when its run compared
//! nothing, its `results.json` — and combines the gates. It never measures and never
//! re-decides a cell: a shard's verdict is taken as its runner computed it. It renders nothing
//! either: [`crate::report::merged`] turns a [`MergedVerdict`] into Markdown, text and outputs.
//!
//! A shard without a verdict is either a complete run with no baseline yet (its gate is
//! `no_baseline`, as `run` says) or a run that stopped early (cancelled, engine died): the
//! merge cannot vouch for a profile that was not measured, so it fails closed (exit 3).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use infergate_schema::answer::plural;
use infergate_schema::exit::{FailOn, GateExit};
use infergate_schema::policy::{GateEnding, GatePolicy};
use infergate_schema::results::{ProfileKey, RunResults, RunStatus};
use infergate_schema::verdict::{ComparisonReport, GateVerdict};

/// Version of the merged-verdict file format (2: a profile entry says its `kind`, and a shard
/// that compared nothing has no `report`).
pub(crate) const MERGED_SCHEMA_VERSION: u32 = 2;

/// File name of a shard's verdict inside its results directory (written by `infergate run`).
pub(crate) const VERDICT_FILE: &str = "verdict.json";

/// File name of a shard's results inside its results directory.
pub(crate) const RESULTS_FILE: &str = "results.json";

/// What one shard amounts to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ShardOutcome {
    /// The shard compared its run with its baseline.
    Compared {
        /// The shard's comparison, as its runner computed it (boxed: it is large).
        report: Box<ComparisonReport>,
    },
    /// The shard wrote results but no verdict.
    NotCompared {
        /// The run's profile (boxed, as the report is).
        profile: Box<ProfileKey>,
        /// The run's suite.
        #[serde(default)]
        suite: Option<String>,
        /// `complete`: there was no baseline yet; `cancelled` / `partial`: the run stopped.
        status: RunStatus,
        /// Why the run stopped, as its results file says.
        #[serde(default)]
        reason: Option<String>,
        /// Why a run measured in full has no verdict: its gate failed after measuring (the
        /// results' `gate_failure` reason, or in files written before that record their
        /// `compare_error` event; a verdict file beside them is a first look's, not the
        /// gate's). Not a run without a baseline yet.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        compare_error: Option<String>,
    },
}

impl ShardOutcome {
    /// The profile key of the shard.
    pub(crate) fn profile(&self) -> &ProfileKey {
        match self {
            ShardOutcome::Compared { report } => &report.profile,
            ShardOutcome::NotCompared { profile, .. } => profile,
        }
    }

    /// The suite of the shard.
    pub fn suite(&self) -> Option<&str> {
        match self {
            ShardOutcome::Compared { report } => report.suite.as_deref(),
            ShardOutcome::NotCompared { suite, .. } => suite.as_deref(),
        }
    }

    /// The shard's gate; `None` when its run stopped before anything could be compared.
    pub(crate) fn gate(&self) -> Option<GateVerdict> {
        match self {
            ShardOutcome::Compared { report } => Some(report.gate),
            ShardOutcome::NotCompared {
                status: RunStatus::Complete,
                compare_error: None,
                ..
            } => Some(GateVerdict::NoBaseline),
            ShardOutcome::NotCompared { .. } => None,
        }
    }

    /// Why a shard measured in full has no verdict (its gate failed after measuring).
    pub(crate) fn compare_error(&self) -> Option<&str> {
        match self {
            ShardOutcome::NotCompared { compare_error, .. } => compare_error.as_deref(),
            ShardOutcome::Compared { .. } => None,
        }
    }

    /// The comparison, when the shard made one.
    pub(crate) fn report(&self) -> Option<&ComparisonReport> {
        match self {
            ShardOutcome::Compared { report } => Some(report),
            ShardOutcome::NotCompared { .. } => None,
        }
    }
}

/// One shard's outcome and where it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct Shard {
    /// The file the shard was read from (shown in summaries so a reader can find the artifact).
    pub source: PathBuf,
    /// The shard's `results.json`, when it sits beside the verdict.
    pub results: Option<PathBuf>,
    /// The shard's comparison, or why there is none.
    pub outcome: ShardOutcome,
}

/// Why a shard could not be read. Every variant names the file, so exit 2 tells the user which
/// artifact to look at.
#[derive(Debug, thiserror::Error)]
pub enum ShardError {
    /// Neither a verdict file nor a directory holding a verdict or results file.
    #[error(
        "{path}: no such shard (expected a results directory containing {VERDICT_FILE} or {RESULTS_FILE}, or a verdict JSON file)"
    )]
    Missing { path: PathBuf },
    /// The file exists but could not be read.
    #[error("{path}: cannot read shard file: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The file is not a comparison report (wrong JSON, wrong field, wrong type).
    #[error(
        "{path}: not a verdict file (ComparisonReport JSON): at `{field}`: {message}; pass the verdict.json written by `infergate run` or `infergate compare`"
    )]
    Parse {
        path: PathBuf,
        field: String,
        message: String,
    },
    /// A results file (of a shard without a verdict) that is not infergate's results schema.
    #[error(
        "{path}: not a results file (infergate results JSON): at `{field}`: {message}; pass the results directory written by `infergate run`"
    )]
    ParseResults {
        path: PathBuf,
        field: String,
        message: String,
    },
    /// A verdict beside a results file it does not belong to (another run's, or older than
    /// the results): an output directory reused by a later run.
    #[error(
        "{verdict}: {why}; the pair cannot be merged (exit 2): pass the directory of one finished run"
    )]
    Stale { verdict: PathBuf, why: String },
    /// Written by a newer infergate with an incompatible format.
    #[error(
        "{path}: schema_version {found} is newer than this build understands ({supported}); upgrade infergate"
    )]
    Schema {
        path: PathBuf,
        found: u32,
        supported: u32,
    },
}

/// How much older than its `results.json` a `verdict.json` may look before the pair is stale:
/// the gate writes results first and the verdict right after, but an artifact download may
/// restore the two a moment apart in either order.
const PAIR_CLOCK_SLACK: std::time::Duration = std::time::Duration::from_secs(2);

/// Why a verdict does not belong to the results beside it, if it does not: it is of another
/// run (its `candidate_runs` do not name the results' run id) or older than the results (an
/// output directory reused by a later run). `None` when the two are one run's.
pub fn stale_pair(
    results: &RunResults,
    results_path: &Path,
    verdict: &ComparisonReport,
    verdict_path: &Path,
) -> Option<String> {
    if !verdict.candidate_runs.contains(&results.run_id) {
        return Some(format!(
            "the verdict is of {}, but {} is of run `{}`: a verdict of another run",
            infergate_schema::answer::runs_named(&verdict.candidate_runs, "`"),
            results_path.display(),
            results.run_id
        ));
    }
    let mtime = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    if let (Some(v), Some(r)) = (mtime(verdict_path), mtime(results_path))
        && v + PAIR_CLOCK_SLACK < r
    {
        return Some(format!(
            "the verdict is older than {} (written {:.0} s before it): a verdict left by an earlier run",
            results_path.display(),
            r.duration_since(v).map_or(0.0, |d| d.as_secs_f64())
        ));
    }
    None
}

impl Shard {
    /// Reads a shard from a results directory (its `verdict.json`, else its `results.json`) or
    /// a verdict file. A results file beside the verdict decides first: an `in_progress` one
    /// (the gate was killed) makes the shard not measured whatever verdict lies next to it, and
    /// a verdict of another run, or older than the results, is [`ShardError::Stale`].
    pub fn load(path: &Path) -> Result<Shard, ShardError> {
        let (verdict, results) = if path.is_dir() {
            let verdict = path.join(VERDICT_FILE);
            let results = path.join(RESULTS_FILE);
            if !verdict.is_file() && !results.is_file() {
                return Err(ShardError::Missing { path: verdict });
            }
            (
                verdict.is_file().then_some(verdict),
                results.is_file().then_some(results),
            )
        } else if path.is_file() {
            let results = path
                .parent()
                .map(|p| p.join(RESULTS_FILE))
                .filter(|p| p.is_file());
            (Some(path.to_path_buf()), results)
        } else {
            return Err(ShardError::Missing {
                path: path.to_path_buf(),
            });
        };
        let run = results
            .as_deref()
            .map(|r| parse_results(r, &read(r)?))
            .transpose()?;
        let not_compared = |run: RunResults, results: PathBuf| Shard {
            outcome: ShardOutcome::NotCompared {
                compare_error: run.compare_error().map(String::from),
                profile: Box::new(run.profile),
                suite: run.suite,
                status: run.status,
                reason: run.status_reason,
            },
            source: results.clone(),
            results: Some(results),
        };
        match (verdict, run, results) {
            (_, Some(run), Some(results)) if run.status == RunStatus::InProgress => {
                Ok(not_compared(run, results))
            }
            // The gate failed after measuring: a verdict beside the results is not its answer.
            (_, Some(run), Some(results)) if run.compare_error().is_some() => {
                Ok(not_compared(run, results))
            }
            (Some(verdict), run, results) => {
                let report = parse_report(&verdict, &read(&verdict)?)?;
                if let (Some(run), Some(rp)) = (&run, &results)
                    && let Some(why) = stale_pair(run, rp, &report, &verdict)
                {
                    return Err(ShardError::Stale { verdict, why });
                }
                Ok(Shard {
                    outcome: ShardOutcome::Compared {
                        report: Box::new(report),
                    },
                    source: verdict,
                    results,
                })
            }
            (None, Some(run), Some(results)) => Ok(not_compared(run, results)),
            (None, _, _) => Err(ShardError::Missing {
                path: path.to_path_buf(),
            }),
        }
    }
}

fn read(path: &Path) -> Result<String, ShardError> {
    // Bounded: a shard is an artifact another runner uploaded.
    infergate_io::fsio::read_input(path).map_err(|source| ShardError::Read {
        path: path.to_path_buf(),
        source,
    })
}

fn parse_report(path: &Path, text: &str) -> Result<ComparisonReport, ShardError> {
    let de = &mut serde_json::Deserializer::from_str(text);
    let report: ComparisonReport =
        serde_path_to_error::deserialize(de).map_err(|e| ShardError::Parse {
            path: path.to_path_buf(),
            field: e.path().to_string(),
            message: infergate_config::config::plain_type_names(&e.inner().to_string()),
        })?;
    if report.schema_version > infergate_schema::verdict::VERDICT_SCHEMA_VERSION {
        return Err(ShardError::Schema {
            path: path.to_path_buf(),
            found: report.schema_version,
            supported: infergate_schema::verdict::VERDICT_SCHEMA_VERSION,
        });
    }
    Ok(report)
}

fn parse_results(path: &Path, text: &str) -> Result<RunResults, ShardError> {
    let de = &mut serde_json::Deserializer::from_str(text);
    let run: RunResults =
        serde_path_to_error::deserialize(de).map_err(|e| ShardError::ParseResults {
            path: path.to_path_buf(),
            field: e.path().to_string(),
            message: infergate_config::config::plain_type_names(&e.inner().to_string()),
        })?;
    if run.schema_version > infergate_schema::results::SCHEMA_VERSION {
        return Err(ShardError::Schema {
            path: path.to_path_buf(),
            found: run.schema_version,
            supported: infergate_schema::results::SCHEMA_VERSION,
        });
    }
    Ok(run)
}

/// The joined answer of all shards: what the final fan-out job reports and exits on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MergedVerdict {
    pub schema_version: u32,
    /// Worst gate over the shards that have one: regression, then inconclusive, then
    /// no_baseline, else pass.
    pub gate: GateVerdict,
    /// Blocking cells over all shards.
    pub regressions: usize,
    /// Profiles whose run stopped before it was compared (cancelled, engine died) or whose
    /// gate is `unmeasured`: the merge fails closed when there is any.
    #[serde(default)]
    pub unmeasured: usize,
    /// One line for people: "1 of 3 profiles regressed (gpu-...): 2 regressions".
    pub headline: String,
    /// Per-profile verdicts, in the order the shards were given.
    pub profiles: Vec<ProfileVerdict>,
    /// The `fail_on` the exit code, the `verdict` output and the check conclusion were
    /// decided under (`merge --fail-on`).
    #[serde(default)]
    pub fail_on: FailOn,
    /// How many shards the workflow said would arrive (`merge --expect-shards`): any other
    /// number fails the merge closed, since a shard that never arrived was never judged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_shards: Option<usize>,
}

/// One shard's place in the merged verdict.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProfileVerdict {
    /// Where the shard was read from.
    pub source: String,
    /// The shard's `results.json`, when present.
    #[serde(default)]
    pub results: Option<String>,
    /// Blocking cells in this shard.
    pub regressions: usize,
    /// The shard's full comparison (so the merged file is self-contained), or why there is none.
    #[serde(flatten)]
    pub outcome: ShardOutcome,
}

impl MergedVerdict {
    /// Whether the shards given are not the number the workflow expected.
    pub(crate) fn shards_missing(&self) -> bool {
        self.expected_shards
            .is_some_and(|n| n != self.profiles.len())
    }

    /// How the merged gate ends, from the one policy every subcommand ends by: a profile not
    /// measured, or a shard that did not arrive, is a gate failure (exit 3) under every
    /// `fail_on`.
    pub fn ending(&self) -> GateEnding {
        GatePolicy::new(self.fail_on).ending(
            self.unmeasured > 0 || self.shards_missing(),
            false,
            Some(self.gate),
        )
    }

    /// The exit code of [`MergedVerdict::ending`].
    pub fn exit(&self) -> GateExit {
        self.ending().exit
    }
}

/// Severity order used to combine gates: the worst shard decides.
fn severity(gate: GateVerdict) -> u8 {
    match gate {
        GateVerdict::Pass => 0,
        GateVerdict::NoBaseline => 1,
        GateVerdict::Insufficient => 2,
        GateVerdict::Regression => 3,
        GateVerdict::Unmeasured => 4,
    }
}

/// Joins the shards' verdicts into one under `policy` (no shards: `no_baseline`, nothing was
/// compared); `expected_shards` is the number the workflow launched, when it says.
pub fn merge(
    shards: Vec<Shard>,
    policy: GatePolicy,
    expected_shards: Option<usize>,
) -> MergedVerdict {
    let gate = shards
        .iter()
        .filter_map(|s| s.outcome.gate())
        .max_by_key(|g| severity(*g))
        .unwrap_or(GateVerdict::NoBaseline);
    let profiles: Vec<ProfileVerdict> = shards
        .into_iter()
        .map(|s| ProfileVerdict {
            source: s.source.display().to_string(),
            results: s.results.map(|p| p.display().to_string()),
            regressions: s.outcome.report().map_or(0, |r| r.regressions().count()),
            outcome: s.outcome,
        })
        .collect();
    let regressions = profiles.iter().map(|p| p.regressions).sum();
    let unmeasured = profiles
        .iter()
        .filter(|p| {
            p.outcome
                .gate()
                .is_none_or(|g| g == GateVerdict::Unmeasured)
        })
        .count();
    let mut headline = headline(gate, &profiles, regressions);
    if let Some(n) = expected_shards.filter(|n| *n != profiles.len()) {
        headline = format!(
            "{} of {} expected arrived: a shard that never arrived was never judged; {headline}",
            profiles.len(),
            plural(n, "shard")
        );
    }
    MergedVerdict {
        schema_version: MERGED_SCHEMA_VERSION,
        gate,
        regressions,
        unmeasured,
        headline,
        profiles,
        fail_on: policy.fail_on,
        expected_shards,
    }
}

fn headline(gate: GateVerdict, profiles: &[ProfileVerdict], regressions: usize) -> String {
    let measured: Vec<&ProfileVerdict> = profiles
        .iter()
        .filter(|p| p.outcome.gate().is_some())
        .collect();
    let n = measured.len();
    let with = |g: GateVerdict| {
        measured
            .iter()
            .filter(|p| p.outcome.gate() == Some(g))
            .map(|p| p.outcome.profile().key.as_str())
            .collect::<Vec<_>>()
    };
    let compared = match gate {
        GateVerdict::Regression => {
            let bad = with(GateVerdict::Regression);
            format!(
                "{} of {} regressed ({}): {}",
                bad.len(),
                plural(n, "profile"),
                bad.join(", "),
                plural(regressions, "regression")
            )
        }
        GateVerdict::NoBaseline if n == 0 => "no shards to merge".to_string(),
        GateVerdict::Pass if n == 1 => "1 profile passed".to_string(),
        GateVerdict::Pass => format!("all {} passed", plural(n, "profile")),
        GateVerdict::Insufficient => format!(
            "no regression; {} of {} not sensitive enough (insufficient)",
            with(GateVerdict::Insufficient).len(),
            plural(n, "profile")
        ),
        GateVerdict::NoBaseline => format!(
            "no regression; {} of {} without a baseline yet",
            with(GateVerdict::NoBaseline).len(),
            plural(n, "profile")
        ),
        GateVerdict::Unmeasured => format!(
            "{} of {} could not be measured well enough to decide",
            with(GateVerdict::Unmeasured).len(),
            plural(n, "profile")
        ),
    };
    let stopped: Vec<String> = profiles
        .iter()
        .filter_map(|p| match &p.outcome {
            ShardOutcome::NotCompared {
                profile,
                status: RunStatus::InProgress,
                ..
            } => Some(format!(
                "{}: its results are `in_progress` (the gate was stopped before it finished)",
                profile.key
            )),
            ShardOutcome::NotCompared {
                profile,
                compare_error: Some(why),
                ..
            } => Some(format!("{}: measured, but no verdict: {why}", profile.key)),
            ShardOutcome::NotCompared {
                profile,
                status,
                reason,
                ..
            } if *status != RunStatus::Complete => Some(format!(
                "{}: {}",
                profile.key,
                reason.as_deref().unwrap_or(match status {
                    RunStatus::Cancelled => "cancelled",
                    _ => "stopped early",
                })
            )),
            _ => None,
        })
        .collect();
    if stopped.is_empty() {
        return compared;
    }
    let without = format!(
        "{} of {} without a verdict ({})",
        stopped.len(),
        plural(profiles.len(), "profile"),
        stopped.join("; ")
    );
    if n == 0 {
        without
    } else {
        format!("{without}; compared: {compared}")
    }
}

#[cfg(test)]
pub mod tests {
    use super::*;
    use infergate_schema::asserts::{assert_contains, assert_ends_with, assert_starts_with};
    use infergate_schema::results::HardwareFingerprint;
    use infergate_schema::verdict::{CellVerdict, fixtures};

    /// The shards merged under the default policy, no count expected.
    pub(crate) fn merged(shards: Vec<Shard>) -> MergedVerdict {
        merge(shards, GatePolicy::default(), None)
    }

    /// A shard's comparison on a `gpu` profile with `regressed_cells` regressions.
    pub(crate) fn report(gpu: &str, gate: GateVerdict, regressed_cells: usize) -> ComparisonReport {
        let profile = infergate_schema::results::ProfileKey {
            key: format!(
                "gpu-{}x1__vllm__m__mabc",
                infergate_schema::results::path_safe(gpu)
            ),
            hardware: HardwareFingerprint {
                kind: "gpu".into(),
                gpu_model: Some(gpu.into()),
                gpu_count: 1,
                driver_version: None,
                cpu_model: None,
            },
            engine: "vllm".into(),
            model: "m".into(),
            matrix_hash: "abc".into(),
        };
        // One cell, 7% slower, per verdict.
        let cell = |v: CellVerdict| fixtures::cells(-0.07, v).remove(0);
        let mut cells: Vec<_> = (0..regressed_cells)
            .map(|_| cell(CellVerdict::Regression))
            .collect();
        cells.push(cell(CellVerdict::Unchanged));
        ComparisonReport {
            profile,
            candidate_runs: vec!["r1".into()],
            headline: format!("{gpu} headline"),
            ..fixtures::report(
                gate,
                cells,
                fixtures::matrix(-0.07, 0.02, CellVerdict::Unchanged),
            )
        }
    }

    /// A shard read from `<profile key>/verdict.json`.
    pub(crate) fn shard(r: ComparisonReport) -> Shard {
        Shard {
            source: PathBuf::from(format!("{}/verdict.json", r.profile.key)),
            results: None,
            outcome: ShardOutcome::Compared {
                report: Box::new(r),
            },
        }
    }

    /// A shard whose run wrote no verdict (`status` complete: no baseline).
    pub(crate) fn not_compared(gpu: &str, status: RunStatus, reason: Option<&str>) -> Shard {
        let r = report(gpu, GateVerdict::NoBaseline, 0);
        Shard {
            source: PathBuf::from(format!("{}/results.json", r.profile.key)),
            results: Some(PathBuf::from(format!("{}/results.json", r.profile.key))),
            outcome: ShardOutcome::NotCompared {
                profile: Box::new(r.profile),
                suite: r.suite,
                status,
                reason: reason.map(String::from),
                compare_error: None,
            },
        }
    }

    #[test]
    fn worst_gate_wins_in_severity_order() {
        use GateVerdict::*;
        let cases = [
            (vec![Pass, Pass], Pass),
            (vec![Pass, NoBaseline], NoBaseline),
            (vec![NoBaseline, Insufficient, Pass], Insufficient),
            (vec![Pass, Regression, Insufficient], Regression),
            (vec![], NoBaseline),
        ];
        for (gates, want) in cases {
            let shards = gates
                .iter()
                .enumerate()
                .map(|(i, g)| shard(report(&format!("G{i}"), *g, 0)))
                .collect();
            assert_eq!(merged(shards).gate, want, "{gates:?}");
        }
    }

    #[test]
    fn a_shard_that_never_arrived_fails_the_merge_under_every_fail_on() {
        let two = || {
            vec![
                shard(report("H100", GateVerdict::Pass, 0)),
                shard(report("H200", GateVerdict::Pass, 0)),
            ]
        };
        for fail_on in [FailOn::REGRESSION, FailOn::INSUFFICIENT, FailOn::NEVER] {
            let m = merge(two(), GatePolicy::new(fail_on), Some(3));
            assert_eq!(m.exit(), GateExit::Failure, "{fail_on:?}");
            assert_eq!(m.ending().verdict_word, "error");
            assert_starts_with(
                &m.headline,
                "2 of 3 shards expected arrived: a shard that never arrived",
            );
        }
        let m = merge(two(), GatePolicy::default(), Some(2));
        assert_eq!(
            (m.exit(), m.ending().verdict_word),
            (GateExit::Pass, "pass")
        );
        assert_eq!(m.headline, "all 2 profiles passed");
    }

    #[test]
    fn counts_regressions_over_shards_and_names_the_bad_profile() {
        let m = merged(vec![
            shard(report("H100", GateVerdict::Pass, 0)),
            shard(report("H200", GateVerdict::Regression, 2)),
            shard(report("RTX 5090", GateVerdict::Pass, 0)),
        ]);
        assert_eq!(m.regressions, 2);
        assert_eq!(m.profiles[1].regressions, 2);
        assert_starts_with(&m.headline, "1 of 3 profiles regressed (gpu-h200x1");
    }

    #[test]
    fn a_run_without_a_verdict_is_no_baseline_when_complete_and_fails_closed_when_stopped() {
        let m = merged(vec![
            shard(report("H100", GateVerdict::Pass, 0)),
            not_compared("H200", RunStatus::Complete, None),
        ]);
        assert_eq!(m.gate, GateVerdict::NoBaseline);
        assert_eq!((m.unmeasured, m.exit()), (0, GateExit::Pass));
        assert_eq!(
            m.headline,
            "no regression; 1 of 2 profiles without a baseline yet"
        );

        let m = merged(vec![
            shard(report("H100", GateVerdict::Regression, 1)),
            not_compared(
                "H200",
                RunStatus::Cancelled,
                Some("cancelled by SIGINT/SIGTERM"),
            ),
        ]);
        assert_eq!((m.unmeasured, m.exit()), (1, GateExit::Failure));
        assert_eq!(
            m.gate,
            GateVerdict::Regression,
            "the measured shard still says it"
        );
        assert_starts_with(
            &m.headline,
            "1 of 2 profiles without a verdict (gpu-h200x1__vllm__m__mabc: cancelled by SIGINT/SIGTERM); compared: 1 of 1 profile regressed",
        );
        let only = merged(vec![not_compared("H200", RunStatus::Partial, None)]);
        assert_eq!(only.exit(), GateExit::Failure);
        assert_eq!(
            only.headline,
            "1 of 1 profile without a verdict (gpu-h200x1__vllm__m__mabc: stopped early)"
        );
    }

    #[test]
    fn the_merged_file_round_trips_with_both_kinds_of_profile() {
        let m = merged(vec![
            shard(report("H100", GateVerdict::Pass, 0)),
            not_compared("H200", RunStatus::Cancelled, Some("cancelled")),
        ]);
        let json = serde_json::to_value(&m).unwrap();
        assert_eq!(json["profiles"][0]["kind"], "compared");
        assert_eq!(json["profiles"][0]["report"]["gate"], "pass");
        assert_eq!(json["profiles"][1]["kind"], "not_compared");
        assert_eq!(json["profiles"][1]["status"], "cancelled");
        let back: MergedVerdict = serde_json::from_value(json).unwrap();
        assert_eq!(back, m);
    }

    /// A shard whose results carry the typed `gate_failure` record (a pull request without a
    /// baseline, a store that could not be read) merges exactly as the same results did with
    /// only the `compare_error` event, as files written before the record hold: measured, no
    /// verdict, the merge fails closed, a first look's verdict beside them notwithstanding.
    #[test]
    fn a_typed_gate_failure_merges_as_the_compare_error_event_did() {
        use infergate_schema::results::{Event, EventKind, GateFailureKind, GateFailureRecord};
        let dir = tempfile::tempdir().unwrap();
        let load = |run: &RunResults| {
            let body = serde_json::to_string_pretty(run).unwrap();
            std::fs::write(dir.path().join(RESULTS_FILE), body).unwrap();
            merged(vec![Shard::load(dir.path()).unwrap()])
        };
        let cases = [
            (
                GateFailureKind::NoBaseline,
                "no baseline for this profile in suite `pr`: run the nightly suite first",
            ),
            (
                GateFailureKind::Comparison,
                "comparison with the baseline failed: baseline store unreadable",
            ),
        ];
        for (kind, why) in cases {
            for first_look in [false, true] {
                let verdict = dir.path().join(VERDICT_FILE);
                if first_look {
                    let r = report("H100", GateVerdict::Pass, 0);
                    std::fs::write(&verdict, serde_json::to_string(&r).unwrap()).unwrap();
                } else if verdict.exists() {
                    std::fs::remove_file(&verdict).unwrap();
                }
                let mut old = infergate_model::synthetic::template();
                old.run_id = "r1".into();
                old.status = RunStatus::Complete;
                old.events.push(Event::now(EventKind::CompareError, why));
                let before = load(&old);
                let mut both = old.clone();
                both.gate_failure = Some(GateFailureRecord {
                    kind,
                    reason: why.into(),
                });
                let mut record_only = both.clone();
                record_only.events.clear();
                for run in [&both, &record_only] {
                    assert_eq!(load(run), before, "{kind:?}, first look: {first_look}");
                }
                assert_eq!(before.profiles[0].outcome.compare_error(), Some(why));
                assert_eq!(before.profiles[0].outcome.gate(), None);
                assert_eq!((before.unmeasured, before.exit()), (1, GateExit::Failure));
                assert_ends_with(
                    &before.headline,
                    &format!("measured, but no verdict: {why})"),
                );
            }
        }
    }

    #[test]
    fn unreadable_shards_name_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let bad = dir.path().join("verdict.json");
        std::fs::write(&bad, r#"{"schema_version": 1, "profile": 7}"#).unwrap();
        let err = Shard::load(dir.path()).unwrap_err().to_string();
        assert_contains(&err, "verdict.json");
        assert_contains(&err, "profile");
        let missing = Shard::load(&dir.path().join("nope")).unwrap_err();
        assert!(matches!(missing, ShardError::Missing { .. }));
    }
}
