//! The gate pipeline of `infergate run` and `infergate ab`, one for both: validate → boot →
//! measure → decide → confirm / adapt → write → baseline update → publish → ending.
//!
//! [`GatePlan::new`] validates everything before anything boots (its errors are the user's to
//! fix: exit 2); [`GatePlan::run`] does the rest and returns a [`GateRun`], typed data the
//! command line prints. Nothing here prints: progress goes out as events through the sink the
//! caller gives, and the ending (exit code, check conclusion, `verdict` output) comes from the
//! one [`GatePolicy`].

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use infergate_config::config::{AbConfig, ConfigError, GateConfig, GithubMode, SuiteConfig};
use infergate_measure::bench::EventSink;
use infergate_report::report::github::render::{self, Links};
use infergate_report::report::github::{GithubReporter, PublishInput, PublishOutcome, check_name};
use infergate_report::report::layout;
use infergate_schema::policy::{Conclusion, GateEnding, GatePolicy};
use infergate_schema::results::{
    Event, EventKind, GateFailureKind, GateFailureRecord, RunResults, RunStatus,
};
use infergate_schema::verdict::{ComparisonReport, RoundsStop};
use infergate_telemetry::telemetry::NvmlSampler;

use super::ab::{AbBoot, AbRequest, AbSide, fold_side, run_ab, side_results_path};
use super::decide::{GateError, LoadedHistory, load_history};
use super::measure::{
    Live, LiveEngine, MeasureRequest, MeasuredRun, RunFailure, unmeasured_results,
};
use super::outputs::{OutputFiles, baseline_worthy, write_outputs};
use infergate_model::stats::{DecisionRule, Evidence, Judge, Next, Plan};

/// Which measurement design the gate runs.
#[derive(Debug, Clone, PartialEq)]
pub enum Design {
    /// One engine against the stored baseline (`infergate run`); with `update_baseline`, a
    /// complete run is added to the store.
    Baseline { update_baseline: bool },
    /// Paired A/B: `[engine.a]` and `[engine.b]` booted alternately (`infergate ab`);
    /// `pairs` overrides `[ab] rounds`.
    Ab { pairs: Option<u32> },
}

/// What the command line asks of the gate.
#[derive(Debug, Clone)]
pub struct GateRequest {
    pub config: GateConfig,
    /// Suite name (`None`: `pr` if the config has one, else its first suite).
    pub suite: Option<String>,
    pub design: Design,
    /// Output directory (results, verdict, summary, engine logs).
    pub out: PathBuf,
    /// Overrides `[baseline] dir`.
    pub baseline_dir: Option<PathBuf>,
    /// Report to GitHub (see [`github_wanted`]).
    pub github: bool,
    /// Appended to the engine command(s).
    pub engine_args: Vec<String>,
    /// Recorded in the results.
    pub labels: BTreeMap<String, String>,
}

/// Why a gate cannot start: the user's to fix (exit 2); nothing was booted.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    #[error("{0}")]
    Config(#[from] ConfigError),
    #[error(
        "{config}: `infergate ab` needs two engines: add [engine.a] (the base build) and [engine.b] (the candidate), each with its `command` (see docs/adaptive-and-ab.md)"
    )]
    NoAbEngines { config: String },
    #[error("--rounds {0}: a paired comparison needs 2 to 100 pairs of boots")]
    Pairs(u32),
    /// A store that does not exist is a typo until proven otherwise: passing for want of a
    /// baseline would let a wrong path pass every build.
    #[error(
        "baseline store {dir} does not exist ({origin}): correct the path, or create the first baseline with `infergate run --update-baseline` (which creates the store)"
    )]
    NoStore { dir: String, origin: &'static str },
    #[error("baseline store {dir} is not a directory ({origin})")]
    StoreNotDir { dir: String, origin: &'static str },
    /// A directory that is not a store root (a profile directory, a typo that exists): read
    /// as "no baseline yet" it would pass every build.
    #[error("{reason} ({origin})")]
    NotAStore {
        reason: String,
        origin: &'static str,
    },
    /// Found before booting: the engine's command declares a context limit some cell does not
    /// fit in (after booting, the limit the engine serves is checked again), its program does
    /// not exist, or its user cannot reach what the command names
    /// ([`infergate_engine::engine::preflight`]).
    #[error("{config}: {reason}")]
    Engine { config: String, reason: String },
}

/// The context limit an engine command declares, with the flag as written: vLLM
/// `--max-model-len N` and SGLang `--context-length N` (also `--flag=N`); the last one wins, as
/// on the engines' command lines. Only plain whole numbers are read (vLLM's `40k` forms are
/// left to the check after boot).
fn declared_context_limit<'a>(args: impl IntoIterator<Item = &'a str>) -> Option<(u64, String)> {
    let words: Vec<&str> = args.into_iter().flat_map(str::split_whitespace).collect();
    let mut found = None;
    for (i, w) in words.iter().enumerate() {
        for flag in ["--max-model-len", "--context-length"] {
            let value = if *w == flag {
                words.get(i + 1).copied()
            } else {
                w.strip_prefix(flag).and_then(|r| r.strip_prefix('='))
            };
            if let Some(n) = value.and_then(|v| v.parse::<u64>().ok()).filter(|n| *n > 0) {
                found = Some((n, format!("`{flag} {n}` in the engine command")));
            }
        }
    }
    found
}

/// The GitHub event when this gate runs in Actions for a pull request or a merge queue
/// (`pull_request`, `pull_request_target`, `merge_group`): where a missing baseline fails the
/// gate unless `[baseline] allow_no_baseline`.
fn pull_request_event() -> Option<String> {
    if std::env::var("GITHUB_ACTIONS").ok().as_deref() != Some("true") {
        return None;
    }
    std::env::var("GITHUB_EVENT_NAME").ok().filter(|e| {
        matches!(
            e.as_str(),
            "pull_request" | "pull_request_target" | "merge_group"
        )
    })
}

/// Why a gate stopped before it ended (exit 3); any check it started is completed as failed.
#[derive(Debug, thiserror::Error)]
pub enum AbortError {
    #[error("{0} crashed")]
    Task(&'static str),
    #[error("cannot create {path}: {source}")]
    CreateDir {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("writing the results: {0}")]
    Write(#[source] GateError),
    #[error("writing {path}: {source}")]
    WriteFile {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("opening the baseline store: {0}")]
    OpenStore(#[source] infergate_store::baseline::BaselineError),
    #[error("adding the run to the baseline store: {0}")]
    AddBaseline(#[source] infergate_store::baseline::BaselineError),
    #[error("no engine was booted")]
    NothingBooted,
}

/// A gate that stopped early, with what reporting said on the way.
#[derive(Debug)]
pub struct GateAbort {
    pub error: AbortError,
    pub reporting: Vec<PublishOutcome>,
}

/// Whether to report to GitHub: `--github`, else the config's `[report] github`
/// (`auto` = inside GitHub Actions).
pub fn github_wanted(forced: bool, mode: GithubMode, in_actions: bool) -> bool {
    forced
        || match mode {
            GithubMode::Always => true,
            GithubMode::Never => false,
            GithubMode::Auto => in_actions,
        }
}

/// How long GitHub reporting may take after a cancel: GitHub sends SIGKILL about 10 s after
/// its first signal, and teardown (`stop_grace` ≤ 5 s in Actions) comes first.
pub(crate) const CANCELLED_REPORTING: Duration = Duration::from_millis(2500);

/// The design as validated.
#[derive(Debug, Clone)]
pub enum PlannedDesign {
    /// `run`: one engine against the store.
    Baseline { update_baseline: bool },
    /// `ab`: the two builds and the pairs of boots (2 to 100).
    Ab { ab: Box<AbConfig>, pairs: u32 },
}

/// A validated gate, ready to boot.
#[derive(Debug, Clone)]
pub struct GatePlan {
    pub config: GateConfig,
    pub suite: SuiteConfig,
    pub design: PlannedDesign,
    pub out: PathBuf,
    /// The baseline store (`--baseline-dir`, else `[baseline] dir`).
    pub baseline_dir: PathBuf,
    pub github: bool,
    pub engine_args: Vec<String>,
    pub labels: BTreeMap<String, String>,
    /// How each boot's engine is started: [`infergate_engine::engine::ProcessEngine`] unless a
    /// test of the pipeline puts an in-process engine here.
    pub boot: Arc<dyn infergate_engine::engine::EngineBoot>,
}

/// Where one boot's progress events go: the sink, and the task rendering them, which ends when
/// every sender is dropped; the gate waits for it after the boot, so that whatever the caller
/// prints afterwards comes after the boot's progress.
pub struct ProgressSink {
    pub events: EventSink,
    pub done: tokio::task::JoinHandle<()>,
}

/// Makes the progress sink of one boot from the number of cell measurements it will make.
pub(crate) type Progress<'a> = &'a (dyn Fn(u64) -> ProgressSink + Sync);

/// What the adaptive phase did.
#[derive(Debug, Clone, PartialEq)]
pub struct AdaptiveSummary {
    pub rounds: u32,
    pub remeasured: usize,
    pub extra_s: f64,
    pub stop_reason: Option<RoundsStop>,
}

/// Where the confirmation boot's outputs are.
#[derive(Debug, Clone, PartialEq)]
pub struct ConfirmationFiles {
    pub results: PathBuf,
    pub engine_log: PathBuf,
}

/// What an A/B gate ran.
#[derive(Debug, Clone)]
pub struct AbSummary {
    /// The boots in the order they ran.
    pub boots: Vec<AbBoot>,
    /// Engine-seconds of all boots.
    pub elapsed_s: f64,
    /// The folded A results (`results-a.json`); B's is [`OutputFiles::results`].
    pub a_results: PathBuf,
}

/// One baseline-store update.
#[derive(Debug, Clone, PartialEq)]
pub enum BaselineUpdate {
    /// The run was added as this file.
    Added(PathBuf),
    /// The run may not become a baseline, and why.
    NotUpdated(String),
}

/// A finished gate: everything the command line prints, and how it ended.
#[derive(Debug)]
pub struct GateRun {
    /// The (candidate's) results.
    pub results: RunResults,
    /// The comparison; `None` = no baseline, or the gate failed before comparing.
    pub verdict: Option<ComparisonReport>,
    /// Why the gate failed (exit 3).
    pub failure: Option<GateFailure>,
    /// Exit code, check conclusion and `verdict` output.
    pub ending: GateEnding,
    /// Things people should know (no baseline, skipped baseline files).
    pub notices: Vec<String>,
    /// Engine processes that survived teardown; cells measured while the GPU slowed its clocks.
    pub warnings: Vec<String>,
    pub adaptive: Option<AdaptiveSummary>,
    pub confirmation: Option<ConfirmationFiles>,
    pub ab: Option<AbSummary>,
    /// The first boot's engine log (`run`).
    pub engine_log: PathBuf,
    pub files: OutputFiles,
    pub baseline: Vec<BaselineUpdate>,
    /// What GitHub reporting said (check start, publish, superseded checks), in order.
    pub reporting: Vec<PublishOutcome>,
}

/// Why a gate could not decide (exit 3): each step's failure as it was, said in words by
/// `Display` (the console's `error:` line, the check, the summary).
#[derive(Debug, thiserror::Error)]
pub enum GateFailure {
    /// The (first) boot could not be measured.
    #[error("{}", .0.message())]
    Measurement(RunFailure),
    /// The first look's comparison with the baseline store failed.
    #[error("comparison with the baseline failed: {0}")]
    Comparison(GateError),
    /// The confirmation boot could not be measured.
    #[error(
        "the confirmation boot failed: {}",
        .0.as_ref().map_or_else(|| "no reason given".into(), RunFailure::message)
    )]
    ConfirmationBoot(Option<RunFailure>),
    /// Comparing both boots with the baseline failed.
    #[error("comparison of both boots with the baseline failed: {0}")]
    Confirmation(GateError),
    /// The A/B run's paired comparison failed.
    #[error("paired comparison failed: {0}")]
    Paired(infergate_model::stats::PairedError),
    /// A pull-request gate found no baseline for its profile (the reason says where to get one).
    #[error("{0}")]
    NoBaseline(String),
    /// `run --update-baseline` measured a run that cannot become a baseline (a cell the engine
    /// cannot serve keeps it partial): the message names the cells and the `skip` list.
    #[error("{0}")]
    NotABaseline(String),
}

impl GateFailure {
    /// The kind written into the results' `gate_failure` record, for readers that decide on
    /// what failed rather than on the sentence.
    pub(crate) fn kind(&self) -> GateFailureKind {
        match self {
            GateFailure::Measurement(_) => GateFailureKind::Measurement,
            GateFailure::Comparison(_) => GateFailureKind::Comparison,
            GateFailure::ConfirmationBoot(_) => GateFailureKind::ConfirmationBoot,
            GateFailure::Confirmation(_) => GateFailureKind::Confirmation,
            GateFailure::Paired(_) => GateFailureKind::Paired,
            GateFailure::NoBaseline(_) => GateFailureKind::NoBaseline,
            GateFailure::NotABaseline(_) => GateFailureKind::NotABaseline,
        }
    }
}

/// What the measurement and decision steps hand to the common epilogue.
struct Decided {
    results: RunResults,
    verdict: Option<ComparisonReport>,
    history: Vec<RunResults>,
    failure: Option<GateFailure>,
    notices: Vec<String>,
    /// "NO BASELINE YET … the gate passes": said only when the gate ends without a failure.
    no_baseline: Option<String>,
    warnings: Vec<String>,
    adaptive: Option<AdaptiveSummary>,
    engine_log: PathBuf,
    /// What only one design has.
    design: DecidedDesign,
}

/// The parts of a decided gate that belong to one design.
enum DecidedDesign {
    /// Against the store.
    Baseline {
        /// The second boot's results and engine log, when the gate booted twice; its results
        /// are written beside `results.json` as [`super::confirm::CONFIRM_RESULTS`].
        confirmation: Option<(RunResults, PathBuf)>,
    },
    /// A paired A/B.
    Ab {
        /// The folded A side, written beside `results.json`.
        a_side: Option<RunResults>,
        boots: Vec<AbBoot>,
        elapsed_s: f64,
        /// The job summary's "Paired A/B run" section.
        section: String,
    },
}

impl Decided {
    /// The confirmation boot's results, when the gate booted twice.
    fn confirmation(&self) -> Option<&RunResults> {
        match &self.design {
            DecidedDesign::Baseline { confirmation } => confirmation.as_ref().map(|(run, _)| run),
            DecidedDesign::Ab { .. } => None,
        }
    }

    /// Every complete boot of a gate against the store, the runs `update_baseline` adds (a
    /// confirmation boot is a run of its own, with its own boot factor); none of an A/B.
    fn baseline_candidates(&self) -> Vec<&RunResults> {
        match &self.design {
            DecidedDesign::Baseline { .. } => std::iter::once(&self.results)
                .chain(self.confirmation())
                .collect(),
            DecidedDesign::Ab { .. } => Vec::new(),
        }
    }
}

/// The history a gate is judged on, and the judge after its first look (with its rounds):
/// `None` when there is no baseline to compare with.
struct FirstLook {
    loaded: LoadedHistory,
    judging: Option<(Judge<'static>, Next)>,
}

/// Loads the history once and makes the judge's first look at `results`.
fn first_look(
    results: &RunResults,
    store_dir: &Path,
    rule: &DecisionRule,
    plan: Plan,
) -> Result<FirstLook, GateError> {
    let loaded = load_history(results, store_dir)?;
    let judging = if loaded.is_empty() {
        None
    } else {
        let mut judge = Judge::new(loaded.history.clone(), rule, plan);
        let next = judge.look(Evidence::FirstBoot(vec![results.clone()]))?;
        Some((judge, next))
    };
    Ok(FirstLook { loaded, judging })
}

/// The boot-independent parts of a gate's environment.
pub(super) struct Setup {
    pub(super) hardware: infergate_schema::results::HardwareFingerprint,
    pub(super) telemetry: Result<Arc<NvmlSampler>, String>,
}

impl GatePlan {
    /// Validates the request: suite, A/B engines and pair count. Boots nothing.
    pub fn new(req: GateRequest) -> Result<GatePlan, SetupError> {
        let suite = req.config.suite(req.suite.as_deref())?.clone();
        let design = match req.design {
            Design::Baseline { update_baseline } => PlannedDesign::Baseline { update_baseline },
            Design::Ab { pairs } => {
                let Some(ab) = req.config.ab.clone() else {
                    return Err(SetupError::NoAbEngines {
                        config: req.config.path.clone(),
                    });
                };
                let pairs = pairs.unwrap_or(ab.rounds);
                if !(2..=100).contains(&pairs) {
                    return Err(SetupError::Pairs(pairs));
                }
                PlannedDesign::Ab {
                    ab: Box::new(ab),
                    pairs,
                }
            }
        };
        let origin = if req.baseline_dir.is_some() {
            "--baseline-dir"
        } else {
            "[baseline] dir"
        };
        let baseline_dir = req
            .baseline_dir
            .unwrap_or_else(|| req.config.baseline.dir.clone());
        let declared = declared_context_limit(
            req.config
                .engine
                .command
                .parts()
                .into_iter()
                .chain(req.engine_args.iter().map(String::as_str)),
        );
        if let Some((limit, source)) = declared {
            infergate_measure::bench::check_fits(&suite.matrix_spec(""), limit, &source).map_err(
                |e| SetupError::Engine {
                    config: req.config.path.clone(),
                    reason: e.to_string(),
                },
            )?;
        }
        if let PlannedDesign::Baseline { update_baseline } = &design {
            let dir = baseline_dir.display().to_string();
            if baseline_dir.exists() && !baseline_dir.is_dir() {
                return Err(SetupError::StoreNotDir { dir, origin });
            }
            if !baseline_dir.exists() && !update_baseline {
                return Err(SetupError::NoStore { dir, origin });
            }
            if baseline_dir.is_dir() {
                infergate_store::baseline::BaselineStore::open_existing(&baseline_dir).map_err(
                    |e| SetupError::NotAStore {
                        reason: e.to_string(),
                        origin,
                    },
                )?;
            }
        }
        // Before any boot: every engine's program exists and its user can reach what the
        // command names (the outputs and the store excepted: they are hidden from it).
        let engines = match &design {
            PlannedDesign::Baseline { .. } => vec![&req.config.engine],
            PlannedDesign::Ab { ab, .. } => vec![&ab.a, &ab.b],
        };
        for engine in engines {
            let launch = infergate_engine::engine::EngineLaunch::from_config(
                engine,
                req.config.model.as_deref(),
                &req.engine_args,
                PathBuf::new(),
            );
            // A launch that cannot be resolved (no free port) fails at boot, with its reason.
            if let Ok(launch) = launch {
                infergate_engine::engine::preflight(engine, &launch, &[&req.out, &baseline_dir])
                    .map_err(|e| SetupError::Engine {
                        config: req.config.path.clone(),
                        reason: e.to_string(),
                    })?;
            }
        }
        Ok(GatePlan {
            config: req.config,
            suite,
            design,
            out: req.out,
            baseline_dir,
            github: req.github,
            engine_args: req.engine_args,
            labels: req.labels,
            boot: Arc::new(infergate_engine::engine::ProcessEngine),
        })
    }

    pub fn policy(&self) -> GatePolicy {
        GatePolicy::new(self.config.thresholds.fail_on)
    }

    /// The A/B boot order, e.g. `ABBAABBA`; `None` for `run`.
    pub fn ab_schedule(&self) -> Option<String> {
        match &self.design {
            PlannedDesign::Ab { ab, pairs } => Some(
                ab.order
                    .schedule(*pairs)
                    .iter()
                    .map(|(_, b)| if *b { 'B' } else { 'A' })
                    .collect(),
            ),
            PlannedDesign::Baseline { .. } => None,
        }
    }

    /// Boots, measures, decides, writes, updates the baseline and reports. `progress` makes
    /// each boot's event sink; `cancel` stops the measurement (partial results are written).
    pub async fn run(
        self,
        progress: Progress<'_>,
        cancel: CancellationToken,
    ) -> Result<GateRun, GateAbort> {
        let abort = |error, reporting| GateAbort { error, reporting };
        let setup = setup(&self.config)
            .await
            .map_err(|e| abort(e, Vec::new()))?;
        let mut reporter = self.github.then(GithubReporter::from_env);
        if let Some(r) = reporter.as_mut() {
            r.set_results_path(self.out.join("results.json"));
            r.set_summary_path(self.out.join("summary.md"));
            r.set_policy(self.policy());
            r.set_config(self.config.path.clone());
        }

        // The results are kept current in the output directory from the first cell on.
        std::fs::create_dir_all(&self.out).map_err(|source| {
            let path = self.out.display().to_string();
            abort(AbortError::CreateDir { path, source }, Vec::new())
        })?;
        // The engine sees an empty, read-only directory at both paths (docs/security.md).
        infergate_engine::engine::hide_from_engines(&[&self.out, &self.baseline_dir]);
        let mut reporting = Vec::new();
        let decided = match &self.design {
            PlannedDesign::Baseline { .. } => {
                // The check name is known up front when engine and model are configured;
                // else it is created complete at the end. A cancel during the request is
                // honoured at once (the request is dropped; the check, if GitHub created
                // it, is completed at the end or by the stale-check cleanup).
                if let (Some(r), Some(key)) = (reporter.as_mut(), self.predicted_key(&setup)) {
                    let name = check_name(&key, &self.suite.name);
                    tokio::select! {
                        biased;
                        _ = cancel.cancelled() => {}
                        started = r.start_check(&name) => reporting.push(started),
                    }
                }
                self.measure_against_baseline(setup, progress, &cancel)
                    .await
            }
            PlannedDesign::Ab { ab, pairs } => {
                match self.measure_ab(ab, *pairs, setup, progress, &cancel).await {
                    Some(d) => d,
                    None => return Err(abort(AbortError::NothingBooted, reporting)),
                }
            }
        };
        match self
            .finish(decided, &mut reporter, &mut reporting, &cancel)
            .await
        {
            Ok(run) => Ok(GateRun { reporting, ..run }),
            Err(error) => {
                if let Some(r) = reporter.as_mut() {
                    let reason = format!("infergate failed: {error}");
                    let close = r.complete_open_checks(Conclusion::Failure, &reason);
                    let closed = if cancel.is_cancelled() {
                        tokio::time::timeout(CANCELLED_REPORTING, close).await.ok()
                    } else {
                        Some(close.await)
                    };
                    reporting.extend(closed);
                }
                Err(abort(error, reporting))
            }
        }
    }

    /// The profile key the run will have, when engine and model are configured (else it is
    /// known only once the engine has been identified).
    fn predicted_key(&self, setup: &Setup) -> Option<String> {
        let (Some(engine), Some(model)) = (&self.config.engine.name, &self.config.model) else {
            return None;
        };
        let key = infergate_schema::results::ProfileKey::derive(
            setup.hardware.clone(),
            engine,
            model,
            &self.suite.matrix_spec(model),
        );
        Some(key.key)
    }

    /// Why the store cannot be compared with, found before the engine boots: a run file of the
    /// profile's group that cannot be used fails the comparison after the whole matrix was
    /// measured otherwise (a GPU runner's whole gate time). `None` when it can be read, or the
    /// group is not known yet.
    fn unreadable_store(&self, setup: &Setup) -> Option<infergate_store::baseline::BaselineError> {
        let key = self.predicted_key(setup)?;
        let store =
            infergate_store::baseline::BaselineStore::open_existing(&self.baseline_dir).ok()?;
        store.load_current(&key, Some(&self.suite.name)).err()
    }

    /// `run`: boot, measure (adaptively when configured), compare with the store, and boot
    /// again to confirm when the first boot leans towards a matrix-wide regression.
    async fn measure_against_baseline(
        &self,
        setup: Setup,
        progress: Progress<'_>,
        cancel: &CancellationToken,
    ) -> Decided {
        let log_path = self.fresh_engine_log();
        let unreadable = self.unreadable_store(&setup);
        // The plan of looks, declared up front: the judge (`stats::judge`) decides; this
        // drives it with the live engine (rounds while it serves, a second boot on request).
        let rule = self.config.thresholds.rule.clone();
        let plan = plan_of(&self.config);
        let req = self.measure_request(setup, &log_path);
        if let Some(e) = unreadable {
            return not_measured(&req, GateFailure::Comparison(e.into()), log_path);
        }
        // The second boot's results and log go beside the first's.
        let mut confirm_req = req.clone();
        confirm_req.progress_file = Some(self.out.join(super::confirm::CONFIRM_RESULTS));
        confirm_req.log_path = super::confirm::confirm_log_path(&log_path);
        let sink = progress(boot_cells(&self.suite));
        // With rounds in the plan, the first look and the rounds are made while the engine
        // still serves; else after it stopped.
        let mut live_judged: Option<Result<FirstLook, GateError>> = None;
        let mut adaptive_summary = None;
        let measured = match LiveEngine::boot(req, sink.events, cancel.clone()).await {
            Err(not_served) => *not_served,
            Ok(mut engine) => {
                engine.measure_matrix().await;
                if plan.max_rounds > 0
                    && let Some(live) = engine.live()
                {
                    let judged = self.first_look_live(live, &rule, plan).await;
                    adaptive_summary = judged.as_ref().ok().and_then(|(_, s)| s.clone());
                    live_judged = Some(judged.map(|(first, _)| first));
                }
                engine.stop().await
            }
        };
        let _ = sink.done.await;
        let mut warnings: Vec<String> = (measured.stop.as_ref())
            .and_then(|s| s.survivors_warning("the first boot"))
            .into_iter()
            .collect();
        let mut results = measured.results;
        let mut failure = measured.failure.clone().map(GateFailure::Measurement);

        // The first look (already made, with its rounds, when the plan has rounds).
        let (mut loaded, mut judging) = (None, None);
        if failure.is_none() {
            match live_judged
                .unwrap_or_else(|| first_look(&results, &self.baseline_dir, &rule, plan))
            {
                Ok(f) => (loaded, judging) = (Some(f.loaded), f.judging),
                Err(e) => failure = Some(GateFailure::Comparison(e)),
            }
        }

        // What the judge asked for after the first boot: its verdict, or a second boot.
        let after = match (judging, &failure) {
            (Some((judge, next)), None) => {
                after_first_look(judge, next, &mut results, confirm_req, progress, cancel).await
            }
            _ => AfterFirstLook::default(),
        };
        failure = failure.or(after.failure);
        warnings.extend(after.warning);
        let (verdict, confirmation) = (after.verdict, after.confirmation);
        warnings.extend(layout::clock_cautions(
            &results,
            confirmation.as_ref().map(|c| &c.results),
        ));
        let (history, notices, no_baseline) = match loaded {
            Some(l) => (l.history.runs().to_vec(), l.notices, l.no_baseline),
            None => (Vec::new(), Vec::new(), None),
        };
        if verdict.is_none() && failure.is_none() {
            failure = self.nothing_compared(&results);
        }
        Decided {
            results,
            verdict,
            history,
            failure,
            notices,
            no_baseline,
            warnings,
            adaptive: adaptive_summary,
            engine_log: measured.engine_log,
            design: DecidedDesign::Baseline {
                confirmation: confirmation.map(|c| (c.results, c.engine_log)),
            },
        }
    }

    /// The engine's log file for this run (the config's, else `engine.log` in the outputs),
    /// with any earlier log removed: an old log's tail must not be shown as this engine's.
    fn fresh_engine_log(&self) -> PathBuf {
        let log_path = match &self.config.engine.log_file {
            Some(p) if p.is_absolute() => p.clone(),
            Some(p) => self.config.base_dir.join(p),
            None => self.out.join("engine.log"),
        };
        let _ = std::fs::remove_file(&log_path);
        log_path
    }

    /// What one boot of the engine measures, and where its log and progress go.
    fn measure_request(&self, setup: Setup, log_path: &Path) -> MeasureRequest<'_> {
        let config = &self.config;
        MeasureRequest {
            boot: self.boot.as_ref(),
            engine: &config.engine,
            model: config.model.as_deref(),
            suite: &self.suite,
            hardware: setup.hardware,
            telemetry: setup.telemetry,
            engine_args: &self.engine_args,
            log_path: log_path.to_path_buf(),
            log_tail_lines: config.report.log_tail_lines,
            labels: self.labels.clone(),
            progress_file: Some(self.out.join("results.json")),
        }
    }

    /// A run with no verdict and no failure: the gate fails (exit 3) where comparing nothing
    /// may not pass (`allow_no_baseline`, a pull request).
    fn nothing_compared(&self, results: &RunResults) -> Option<GateFailure> {
        super::decide::nothing_compared(
            &self.baseline_dir,
            results,
            self.config.baseline.allow_no_baseline,
            pull_request_event().as_deref(),
            &self.config.path,
        )
        .err()
        .map(GateFailure::NoBaseline)
    }

    /// The judge's first look and its adaptive rounds on the engine while it serves (the
    /// rounds recorded in the live results), with what the rounds did for the reports.
    async fn first_look_live(
        &self,
        live: Live<'_>,
        rule: &DecisionRule,
        plan: Plan,
    ) -> Result<(FirstLook, Option<AdaptiveSummary>), GateError> {
        let FirstLook { loaded, judging } =
            first_look(live.results, &self.baseline_dir, rule, plan)?;
        let Some((mut judge, asked)) = judging else {
            return Ok((FirstLook { loaded, judging }, None));
        };
        let (session, cancel, tx) = (live.session, live.cancel, live.emit);
        let (next, spent) = super::adaptive::measure_rounds(
            &mut judge,
            asked,
            &self.config.adaptive,
            live.est_cell_s,
            async |c, ctx| {
                if cancel.is_cancelled() {
                    return None;
                }
                let cell = session.measure_cell(c, ctx, cancel).await;
                (!cancel.is_cancelled()).then_some(cell)
            },
            &|e| {
                let _ = tx.send(e);
            },
        )
        .await?;
        super::adaptive::record_rounds(&judge, &spent, live.results);
        let r = judge.rounds();
        let summary = (r.rounds > 0).then_some(AdaptiveSummary {
            rounds: r.rounds,
            remeasured: r.remeasured.len(),
            extra_s: spent.extra_s,
            stop_reason: r.stop_reason,
        });
        let judging = Some((judge, next));
        Ok((FirstLook { loaded, judging }, summary))
    }

    /// `ab`: boot A and B alternately, fold each side's boots, compare pair by pair.
    /// `None` when no engine was booted at all.
    async fn measure_ab(
        &self,
        ab: &AbConfig,
        pairs: u32,
        setup: Setup,
        progress: Progress<'_>,
        cancel: &CancellationToken,
    ) -> Option<Decided> {
        let sink = progress(boot_cells(&self.suite) * 2 * pairs as u64);
        let req = AbRequest {
            base: self.measure_request(setup, Path::new("")),
            ab,
            log_dir: self.out.clone(),
            pairs,
        };
        let measured = run_ab(req, sink.events, cancel.clone()).await;
        let _ = sink.done.await;
        let mut failure = measured.failure.clone().map(GateFailure::Measurement);
        let b_side = fold_side(&measured.b);
        let a_side = fold_side(&measured.a);
        let results = b_side.clone().or_else(|| a_side.clone())?;
        let mut verdict = None;
        if failure.is_none() {
            let rule = &self.config.thresholds.rule;
            match infergate_model::stats::paired_compare(&measured.a, &measured.b, rule) {
                Ok(v) => verdict = Some(v),
                Err(e) => failure = Some(GateFailure::Paired(e)),
            }
        }
        let command = |side: &Option<RunResults>| {
            side.as_ref()
                .and_then(|r| r.engine.command.clone())
                .unwrap_or_else(|| "-".into())
        };
        let section = infergate_report::report::ab::summary_section(
            &measured.boots,
            measured.elapsed_s,
            &command(&a_side),
            &command(&b_side),
            ab.order.as_str(),
        );
        Some(Decided {
            results,
            verdict,
            history: measured.a.clone(),
            failure,
            notices: Vec::new(),
            no_baseline: None,
            warnings: Vec::new(),
            adaptive: None,
            engine_log: self.out.clone(),
            design: DecidedDesign::Ab {
                a_side,
                boots: measured.boots,
                elapsed_s: measured.elapsed_s,
                section,
            },
        })
    }

    /// The epilogue both designs share: summary, outputs, baseline update, GitHub, ending.
    async fn finish(
        &self,
        mut d: Decided,
        reporter: &mut Option<GithubReporter>,
        reporting: &mut Vec<PublishOutcome>,
        cancel: &CancellationToken,
    ) -> Result<GateRun, AbortError> {
        if let Some(v) = d.verdict.as_mut() {
            v.fail_on = Some(self.policy().fail_on);
            // The headline verdict.json stores: the reports' first line, written here.
            v.set_headline();
        }
        let worthy = self.baseline_worthiness(&mut d);
        let failure = d.failure.as_ref().map(ToString::to_string);
        record_gate_failure(&mut d);
        let outcome = render::Outcome {
            results: &d.results,
            verdict: d.verdict.as_ref(),
            failure: failure.as_deref(),
            cautions: &d.warnings,
            policy: self.policy(),
        };
        // An A/B's check is its own: it must not replace the gate's check of the suite. The
        // history chart is the store's: an A/B has none, and its own section instead.
        let (check_suite, chart, section) = match &d.design {
            DecidedDesign::Baseline { .. } => {
                let chart = infergate_report::report::mermaid::throughput_chart(
                    &d.history,
                    &d.results,
                    d.confirmation(),
                    d.verdict.as_ref(),
                );
                (self.suite.name.clone(), chart, None)
            }
            DecidedDesign::Ab { section, .. } => {
                (format!("{}-ab", self.suite.name), None, Some(section))
            }
        };
        let name = check_name(&d.results.profile.key, &check_suite);
        let mut summary_md =
            render::job_summary(&name, &outcome, &Links::default(), chart.as_deref());
        if let Some(section) = section {
            summary_md.push('\n');
            summary_md.push_str(section);
        }
        // summary.md is a file as inert as the console (the engine's and the store's text).
        let summary_md = infergate_io::untrusted_text::file_sink(&summary_md);
        let files = write_outputs(&self.out, &d.results, d.verdict.as_ref(), &summary_md)
            .map_err(AbortError::Write)?;
        self.write_side_results(&d)?;

        // Baseline update (`--update-baseline`: else nothing is worthy): every complete boot.
        let baseline = self.add_to_store(&d, worthy)?;

        // Report (never changes the ending), after teardown and the results.
        if let Some(r) = reporter.as_mut() {
            self.publish(&d, &name, r, reporting, cancel).await;
        }

        let ending = outcome.ending();
        let (confirmation, ab) = match d.design {
            DecidedDesign::Baseline { confirmation } => {
                let files = confirmation.map(|(_, engine_log)| ConfirmationFiles {
                    results: self.out.join(super::confirm::CONFIRM_RESULTS),
                    engine_log,
                });
                (files, None)
            }
            DecidedDesign::Ab {
                boots, elapsed_s, ..
            } => {
                let summary = AbSummary {
                    boots,
                    elapsed_s,
                    a_results: side_results_path(&self.out, AbSide::A),
                };
                (None, Some(summary))
            }
        };
        Ok(GateRun {
            ending,
            results: d.results,
            verdict: d.verdict,
            failure: d.failure,
            notices: d.notices,
            warnings: d.warnings,
            adaptive: d.adaptive,
            confirmation,
            ab,
            engine_log: d.engine_log,
            files,
            baseline,
            reporting: Vec::new(),
        })
    }

    /// The other boot's results beside results.json: the confirmation boot's, or an A/B run's
    /// A side, durably before anything is reported.
    fn write_side_results(&self, d: &Decided) -> Result<(), AbortError> {
        let side = match &d.design {
            DecidedDesign::Baseline {
                confirmation: Some((run, _)),
            } => Some((self.out.join(super::confirm::CONFIRM_RESULTS), run)),
            DecidedDesign::Ab {
                a_side: Some(run), ..
            } => Some((side_results_path(&self.out, AbSide::A), run)),
            _ => None,
        };
        if let Some((path, run)) = &side {
            super::outputs::write_json(path, serde_json::to_string_pretty(run)).map_err(
                |source| AbortError::WriteFile {
                    path: path.display().to_string(),
                    source,
                },
            )?;
        }
        Ok(())
    }

    /// `--update-baseline`: adds every complete boot of this run that may become a baseline
    /// to the store, and says why of each that may not (`worthy` is empty without it).
    fn add_to_store(
        &self,
        d: &Decided,
        worthy: Vec<Result<(), String>>,
    ) -> Result<Vec<BaselineUpdate>, AbortError> {
        let mut baseline = Vec::new();
        for (run, worthy) in d.baseline_candidates().into_iter().zip(worthy) {
            match worthy {
                Ok(()) => {
                    let store = infergate_store::baseline::BaselineStore::open(&self.baseline_dir)
                        .map_err(AbortError::OpenStore)?;
                    let path = store.add(run).map_err(AbortError::AddBaseline)?;
                    baseline.push(BaselineUpdate::Added(path));
                }
                Err(why) => baseline.push(BaselineUpdate::NotUpdated(why)),
            }
        }
        Ok(baseline)
    }

    /// Posts the check, the comment and the job summary of a decided gate. After a cancel the
    /// runner's SIGKILL is seconds away: reporting gets a short, fixed budget, and says where
    /// it stopped.
    async fn publish(
        &self,
        d: &Decided,
        name: &str,
        r: &mut GithubReporter,
        reporting: &mut Vec<PublishOutcome>,
        cancel: &CancellationToken,
    ) {
        let report = async {
            let input = PublishInput {
                results: &d.results,
                confirmation: d.confirmation(),
                verdict: d.verdict.as_ref(),
                cautions: &d.warnings,
                history: &d.history,
                config_path: (self.config.path != infergate_config::config::EMBEDDED_NAME)
                    .then(|| Path::new(&self.config.path)),
                matrix_line: Some(self.suite.line as u32),
                artifact_url: None,
                failure: d.failure.as_ref().map(ToString::to_string),
            };
            reporting.push(r.publish(name, &input).await);
            // A check started under a predicted name that turned out different (the engine
            // reported another model, say) must not stay in progress.
            if matches!(self.design, PlannedDesign::Baseline { .. }) {
                let reason = format!("superseded: the results are reported as `{name}`");
                reporting.push(r.complete_open_checks(Conclusion::Neutral, &reason).await);
            }
        };
        if !cancel.is_cancelled() {
            report.await;
            return;
        }
        if tokio::time::timeout(CANCELLED_REPORTING, report)
            .await
            .is_err()
        {
            reporting.push(PublishOutcome {
                notices: Vec::new(),
                errors: vec![format!(
                    "GitHub reporting of the cancelled run stopped after {} s; a check left in progress is completed as cancelled by `infergate close-stale-checks`",
                    CANCELLED_REPORTING.as_secs_f64()
                )],
            });
        }
    }

    /// Whether each boot this run adds to the baseline (none without `--update-baseline`) may
    /// become one.
    /// `--update-baseline` on a run that cannot fails the gate (exit 3): a baseline that can
    /// never exist must not pass unnoticed night after night. Where nothing failed, "nothing
    /// compared, the gate passes" becomes a notice.
    fn baseline_worthiness(&self, d: &mut Decided) -> Vec<Result<(), String>> {
        let update_baseline = matches!(
            self.design,
            PlannedDesign::Baseline {
                update_baseline: true
            }
        );
        let failed = d.failure.is_some();
        let candidates = if update_baseline {
            d.baseline_candidates()
        } else {
            Vec::new()
        };
        let worthy: Vec<_> = candidates
            .iter()
            .map(|run| baseline_worthy(run, failed))
            .collect();
        let refused = (candidates.iter().zip(&worthy))
            .find_map(|(run, w)| w.as_ref().err().map(|why| (run, why)))
            .map(|(run, why)| super::outputs::not_a_baseline(run, why, &self.suite.name));
        if let (Some(why), false) = (refused, failed) {
            d.failure = Some(GateFailure::NotABaseline(why));
        }
        // "Nothing compared, the gate passes" only where it does.
        if d.failure.is_none() {
            d.notices.extend(d.no_baseline.take());
        }
        worthy
    }
}

/// A run measured in full whose gate failed after measuring (its comparison, or the
/// confirmation boot a first look asked for) says why in its results, which a `merge` of the
/// shards reads: else it would read as one without a baseline yet, or by the first look's
/// verdict that the second boot was to decide. The typed `gate_failure` record is what readers
/// decide on; the event stays, as the log of what happened (and what files written before the
/// record hold).
fn record_gate_failure(d: &mut Decided) {
    if let (Some(f), RunStatus::Complete) = (&d.failure, d.results.status) {
        let reason = f.to_string();
        d.results
            .events
            .push(Event::now(EventKind::CompareError, reason.clone()));
        d.results.gate_failure = Some(GateFailureRecord {
            kind: f.kind(),
            reason,
        });
    }
}

/// The plan of looks a config asks for: `[confirm]` and `[adaptive]`'s rounds.
pub(crate) fn plan_of(config: &GateConfig) -> Plan {
    Plan {
        confirm: config.confirm.enabled,
        max_rounds: if config.adaptive.enabled {
            config.adaptive.max_rounds
        } else {
            0
        },
    }
}

/// The cell measurements one boot of `suite` makes (the length of its progress display).
pub(super) fn boot_cells(suite: &SuiteConfig) -> u64 {
    (suite.cells() * suite.repetitions.max(1) as usize) as u64
}

/// Hardware fingerprint (detected, or pinned by `[profile] hardware`) and GPU telemetry.
pub(super) async fn setup(config: &GateConfig) -> Result<Setup, AbortError> {
    let telemetry = tokio::task::spawn_blocking(|| NvmlSampler::start(Duration::from_millis(250)))
        .await
        .map_err(|_| AbortError::Task("telemetry start"))?
        .map_err(|e| e.reason);
    // NVML is initialised once per gate: a sampler that started knows the GPUs; one that did
    // not found no usable NVML or GPU, which is the `cpu` fingerprint.
    let detected = match &telemetry {
        Ok(sampler) => sampler.hardware(),
        Err(_) => tokio::task::spawn_blocking(infergate_telemetry::telemetry::detect_hardware)
            .await
            .map_err(|_| AbortError::Task("hardware detection"))?,
    };
    Ok(Setup {
        hardware: config.profile.hardware(detected),
        telemetry,
    })
}

/// The gate of a run that measured nothing because `failure` came first (an unreadable
/// store): every cell unmeasured with the reason.
fn not_measured(req: &MeasureRequest<'_>, failure: GateFailure, log_path: PathBuf) -> Decided {
    let reason = format!("not measured: {failure}");
    Decided {
        results: unmeasured_results(req, None, &reason, RunStatus::Partial),
        verdict: None,
        history: Vec::new(),
        failure: Some(failure),
        notices: Vec::new(),
        no_baseline: None,
        warnings: Vec::new(),
        adaptive: None,
        engine_log: log_path,
        design: DecidedDesign::Baseline { confirmation: None },
    }
}

/// The judge's verdict after its first look, the confirmation boot where it took one, the
/// failure where a step failed, and the second boot's teardown warning.
#[derive(Default)]
struct AfterFirstLook {
    verdict: Option<ComparisonReport>,
    confirmation: Option<MeasuredRun>,
    failure: Option<GateFailure>,
    warning: Option<String>,
}

/// Follows the judge from its first look, with no failure so far: boots the engine again
/// (`req`) where it asks for that (cancelled first: not decided), shows it the second boot,
/// and takes its verdict.
async fn after_first_look(
    mut judge: Judge<'static>,
    next: Next,
    results: &mut RunResults,
    req: MeasureRequest<'_>,
    progress: Progress<'_>,
    cancel: &CancellationToken,
) -> AfterFirstLook {
    let mut after = AfterFirstLook::default();
    let next = match next {
        Next::BootAgain { reason } if !cancel.is_cancelled() => {
            let sink = progress(boot_cells(req.suite));
            let second =
                super::confirm::confirm_boot(results, &reason, req, sink.events, cancel.clone())
                    .await;
            let _ = sink.done.await;
            after.warning =
                (second.stop.as_ref()).and_then(|s| s.survivors_warning("the confirmation boot"));
            let next = match &second.failure {
                Some(why) => Err(GateFailure::ConfirmationBoot(Some(why.clone()))),
                None => judge
                    .look(Evidence::SecondBoot {
                        runs: vec![second.results.clone()],
                        name: super::confirm::CONFIRM_RESULTS.into(),
                    })
                    .map_err(|e| GateFailure::Confirmation(e.into())),
            };
            after.confirmation = Some(second);
            next
        }
        // Cancelled before the second boot the verdict needs: not decided.
        Next::BootAgain { .. } => Err(GateFailure::Measurement(RunFailure::Cancelled)),
        next => Ok(next),
    };
    match next {
        Ok(Next::Decided(report)) => {
            if let Some(second) = after.confirmation.as_mut() {
                let e = Event::now(
                    EventKind::ConfirmationDone,
                    format!("both boots compared: {}", report.gate.as_str()),
                );
                second.results.events.push(e);
            }
            after.verdict = Some(*report);
        }
        Ok(other) => {
            let why = format!("the judge asked for {other:?} after its last look");
            after.failure = Some(GateFailure::Comparison(
                infergate_model::stats::StatsError::OutOfTurn(why).into(),
            ));
        }
        Err(failure) => after.failure = Some(failure),
    }
    after
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each failure says which step failed and why, in the words the console, the check and
    /// the summary show; the kind the results' `gate_failure` record carries is its variant,
    /// one to one, so a reader can decide on it without reading the sentence.
    #[test]
    fn a_gate_failure_says_which_step_failed_and_names_its_kind() {
        use {GateFailure as F, GateFailureKind as K};
        let boot = || RunFailure::Boot("engine never became ready within 30 s".into());
        let store = || {
            GateError::Stats(infergate_model::stats::StatsError::InvalidRule(
                "alpha must be in (0, 1)".into(),
            ))
        };
        let paired = infergate_model::stats::PairedError::TooFewPairs { a: 1, b: 1 };
        let said = [
            (
                F::Measurement(boot()),
                K::Measurement,
                "engine never became ready within 30 s",
            ),
            (
                F::Comparison(store()),
                K::Comparison,
                "comparison with the baseline failed: invalid decision rule: alpha must be in (0, 1)",
            ),
            (
                F::ConfirmationBoot(Some(boot())),
                K::ConfirmationBoot,
                "the confirmation boot failed: engine never became ready within 30 s",
            ),
            (
                F::ConfirmationBoot(None),
                K::ConfirmationBoot,
                "the confirmation boot failed: no reason given",
            ),
            (
                F::Confirmation(store()),
                K::Confirmation,
                "comparison of both boots with the baseline failed: invalid decision rule: alpha must be in (0, 1)",
            ),
            (
                F::Paired(paired),
                K::Paired,
                "paired comparison failed: a paired comparison needs at least 2 complete pairs of boots (got 1 A and 1 B runs)",
            ),
            (
                F::NoBaseline("no baseline yet".into()),
                K::NoBaseline,
                "no baseline yet",
            ),
            (
                F::NotABaseline("2 cells errored".into()),
                K::NotABaseline,
                "2 cells errored",
            ),
        ];
        for (failure, kind, words) in said {
            assert_eq!(failure.to_string(), words);
            assert_eq!(failure.kind(), kind, "{failure}");
        }
    }

    #[test]
    fn a_declared_context_limit_is_read_from_the_engine_command() {
        let argv = [
            "vllm",
            "serve",
            "{model}",
            "--max-model-len",
            "40960",
            "--port",
            "{port}",
        ];
        assert_eq!(declared_context_limit(argv).map(|x| x.0), Some(40960));
        assert_eq!(
            declared_context_limit(["python -m sglang.launch_server --context-length=8192"])
                .map(|x| x.0),
            Some(8192)
        );
        // The last one wins (an `--engine-arg` appended after the config's command).
        let (n, source) =
            declared_context_limit(["--max-model-len", "4096", "--max-model-len", "2048"]).unwrap();
        assert_eq!(n, 2048);
        assert_eq!(source, "`--max-model-len 2048` in the engine command");
        assert_eq!(declared_context_limit(["--max-model-len", "40k"]), None);
        assert_eq!(declared_context_limit(["vllm", "serve", "m"]), None);
    }

    #[test]
    fn github_is_reported_when_forced_configured_or_inside_actions() {
        assert!(github_wanted(true, GithubMode::Never, false));
        assert!(github_wanted(false, GithubMode::Always, false));
        assert!(github_wanted(false, GithubMode::Auto, true));
        assert!(!github_wanted(false, GithubMode::Auto, false));
        assert!(!github_wanted(false, GithubMode::Never, true));
    }
}
