//! `infergate compare`: candidate results against a baseline (a store directory or results
//! files: ours, llm-decode-bench, vllm bench serve or guidellm), verdicts per cell, a table for
//! people, an exit code for CI.

use std::path::PathBuf;

use anyhow::Context;

use infergate_io::untrusted_text::console as inert;
use infergate_model::stats::build::not_comparable;
use infergate_model::stats::{DecisionRule, Plan};
use infergate_schema::exit::{GateExit, usage};
use infergate_schema::results::{RunResults, RunStatus};
use infergate_schema::verdict::{BaselineSummary, CellReason, ComparisonReport, MetricSince};
use infergate_store::baseline::{ADHOC_SUITE, BaselineStore};

/// Output format of tables and reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum OutputFormat {
    /// Terminal table.
    #[default]
    Text,
    /// GitHub-flavoured Markdown.
    Md,
    /// Machine-readable JSON.
    Json,
}

/// Arguments of `infergate compare`.
#[derive(Debug, clap::Args)]
pub struct CompareArgs {
    /// The baseline store directory: its runs of the candidate's profile and suite are the
    /// baseline.
    #[arg(long, value_name = "DIR", conflicts_with = "baseline")]
    pub baseline_dir: Option<PathBuf>,
    /// Baseline results files instead of a store: infergate, llm-decode-bench, vllm bench
    /// serve or guidellm JSON, auto-detected (one directory here is read as `--baseline-dir`).
    #[arg(
        long,
        num_args = 1..,
        value_name = "FILE",
        required_unless_present = "baseline_dir"
    )]
    pub baseline: Vec<PathBuf>,
    /// Candidate results file(s): repetitions of one run of one profile.
    #[arg(long, num_args = 1.., required = true, value_name = "FILE")]
    pub candidate: Vec<PathBuf>,
    /// Results file(s) of a second boot of the candidate: the gate then decides as `run` does
    /// with its confirmation boot (the default plan), using these only where `run` would have
    /// booted again; the JSON's `confirmation` object says whether they were used.
    #[arg(long, num_args = 1.., value_name = "FILE")]
    pub confirmation: Vec<PathBuf>,
    /// The `verdict.json` a gate wrote for the candidate: the comparison is then judged as
    /// that gate judged it — its rule, its plan of looks (second boot, adaptive rounds) and
    /// exactly the history runs it used (found by id in the store or the baseline files,
    /// however the store moved on since) — so it gives the gate's verdict again, or says
    /// which piece is missing. Without it: the default rule (with the flags below) and plan
    /// (a second boot where one boot cannot decide; no adaptive rounds) on the current store.
    #[arg(long, value_name = "VERDICT")]
    pub as_verdict: Option<PathBuf>,
    /// Decide on the candidate's runs alone, as a gate whose config turns the second boot off
    /// (`[confirm] enabled = false`): one look at the whole alpha. Without it, a comparison one
    /// boot cannot decide is `insufficient` until `--confirmation` gives the second boot.
    #[arg(long, conflicts_with_all = ["confirmation", "as_verdict"])]
    pub single_look: bool,
    /// Suite whose baseline to use from a store (default: the candidate's suite, else `adhoc`).
    #[arg(long)]
    pub suite: Option<String>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
    pub format: OutputFormat,
    /// Write the output to this file (atomically) instead of stdout.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// The history window: the newest N baseline runs the noise model is fitted on, the newest
    /// third of them the level (default 20, as `[baseline] history_runs`).
    #[arg(long)]
    pub history_runs: Option<usize>,
    /// Minimum relative effect worth failing for (default 0.03 = 3%).
    #[arg(long)]
    pub min_effect: Option<f64>,
    /// Family-wise false-alarm rate across cells x metrics (default 0.01).
    #[arg(long)]
    pub alpha: Option<f64>,
    /// Compare even when baseline and candidate profiles differ (hardware, engine, model or
    /// matrix), e.g. a seed file measured elsewhere. The verdicts then measure the setup
    /// difference too; use for exploration, never for a required check.
    #[arg(long)]
    pub allow_profile_mismatch: bool,
    #[command(flatten)]
    /// What fails the comparison's exit code (`regression` unless given).
    pub fail_on: super::FailOnArg,
}

/// Loads results files; an unreadable or invalid file is the user's to fix (exit 2).
pub(crate) fn load_files(paths: &[PathBuf]) -> anyhow::Result<Vec<RunResults>> {
    let mut runs = Vec::new();
    for p in paths {
        let loaded = infergate_store::import::load_results(p).map_err(|e| usage(e.to_string()))?;
        runs.extend(loaded);
    }
    Ok(runs)
}

/// The decision rule from defaults and flags, validated (exit 2 when out of range).
fn rule_from(args: &CompareArgs) -> anyhow::Result<DecisionRule> {
    let mut rule = DecisionRule::default();
    rule.history_runs = args.history_runs.unwrap_or(rule.history_runs);
    rule.min_effect = args.min_effect.unwrap_or(rule.min_effect);
    rule.alpha = args.alpha.unwrap_or(rule.alpha);
    rule.validate().map_err(|e| usage(e.to_string()))?;
    Ok(rule)
}

/// Renders a report in the chosen format.
fn render(report: &ComparisonReport, format: OutputFormat) -> anyhow::Result<String> {
    Ok(match format {
        OutputFormat::Text => infergate_report::report::verdict_table::text(report),
        OutputFormat::Md => infergate_report::report::verdict_table::markdown(report),
        OutputFormat::Json => super::pretty_json(report, "the comparison")?,
    })
}

/// The rule, the plan and the history run ids of `--as-verdict`, or the flags' rule and the
/// default plan.
fn judging(args: &CompareArgs) -> anyhow::Result<(DecisionRule, Plan, Option<BaselineSummary>)> {
    let Some(path) = &args.as_verdict else {
        let plan = Plan {
            confirm: !args.single_look,
            ..Plan::default()
        };
        return Ok((rule_from(args)?, plan, None));
    };
    if args.history_runs.is_some() || args.min_effect.is_some() || args.alpha.is_some() {
        return Err(usage(format!(
            "--as-verdict {}: the rule is the verdict's; drop --history-runs, --min-effect and --alpha",
            path.display()
        )));
    }
    let text = std::fs::read_to_string(path)
        .map_err(|e| usage(format!("--as-verdict {}: {e}", path.display())))?;
    let verdict: ComparisonReport = serde_json::from_str(&text).map_err(|e| {
        usage(format!(
            "--as-verdict {}: not a verdict.json ({e}); give the verdict.json a gate wrote",
            path.display()
        ))
    })?;
    let Some((plan, rule)) = Plan::recorded(&verdict.rule, verdict.judged_by.as_ref()) else {
        return Err(usage(format!(
            "--as-verdict {}: field `judged_by` is absent: the file was written by an older infergate or by a command that follows no plan (ab, merge); compare without --as-verdict",
            path.display()
        )));
    };
    rule.validate()
        .map_err(|e| usage(format!("--as-verdict {}: {e}", path.display())))?;
    if verdict.baseline.runs.is_empty() {
        return Err(usage(format!(
            "--as-verdict {}: field `baseline.runs` is empty: the verdict compared with no history (or predates the record); compare without --as-verdict",
            path.display()
        )));
    }
    Ok((rule, plan, Some(verdict.baseline)))
}

/// Keeps the runs named in `ids` (in history order), or says which are missing.
fn named_runs(
    runs: Vec<RunResults>,
    ids: &[String],
    source: &str,
) -> anyhow::Result<Vec<RunResults>> {
    let kept: Vec<RunResults> = runs
        .into_iter()
        .filter(|r| ids.contains(&r.run_id))
        .collect();
    let missing: Vec<&str> = ids
        .iter()
        .filter(|id| !kept.iter().any(|r| &&r.run_id == id))
        .map(String::as_str)
        .collect();
    if !missing.is_empty() {
        return Err(usage(format!(
            "--as-verdict: {} of the verdict's history {} not in {source}: {}; give the store (or the files) the gate compared with",
            missing.len(),
            if missing.len() == 1 {
                "run is"
            } else {
                "runs are"
            },
            inert(&missing.join(", "))
        )));
    }
    Ok(kept)
}

/// The baseline runs, and the metrics a store's accepts restarted later than the rest.
type BaselineRuns = (Vec<RunResults>, Vec<MetricSince>);

/// Baseline runs for `candidate` from the `--baseline` arguments, with the metrics a store's
/// accepts restarted later than the rest, or why there are none. With `ids` (`--as-verdict`),
/// exactly the runs of those ids, wherever the store's current window is.
fn baseline_runs(
    args: &CompareArgs,
    candidate: &RunResults,
    suite: Option<&str>,
    ids: Option<&[String]>,
) -> anyhow::Result<Result<BaselineRuns, String>> {
    if let Some(dir) = args.baseline_dir.as_ref().filter(|d| !d.is_dir()) {
        return Err(usage(format!(
            "--baseline-dir {}: not a directory (give results files with --baseline)",
            dir.display()
        )));
    }
    let is_store =
        args.baseline_dir.is_some() || (args.baseline.len() == 1 && args.baseline[0].is_dir());
    if !is_store {
        if let Some(dir) = args.baseline.iter().find(|p| p.is_dir()) {
            return Err(usage(format!(
                "--baseline {}: a store directory goes in --baseline-dir, results files in --baseline",
                dir.display()
            )));
        }
        let mut runs = load_files(&args.baseline)?;
        if let Some(r) = runs.iter().find(|r| r.status == RunStatus::InProgress) {
            // Fail closed, as for the candidate: an unfinished run is not a baseline level.
            anyhow::bail!(
                "--baseline: run `{}` is `in_progress`: the gate that wrote it was stopped before it finished, so it is no baseline (only finished runs are)",
                inert(&r.run_id)
            );
        }
        runs.sort_by_key(|r| r.started_at);
        if let Some(ids) = ids {
            return named_runs(runs, ids, "the --baseline files").map(|r| Ok((r, Vec::new())));
        }
        return Ok(Ok((runs, Vec::new())));
    }
    // Lazily: with --baseline-dir there may be no --baseline at all.
    let Some(dir) = args.baseline_dir.as_ref().or(args.baseline.first()) else {
        return Err(usage(
            "no baseline: give --baseline-dir DIR or --baseline FILE...",
        ));
    };
    let store = BaselineStore::open_existing(dir).map_err(|e| usage(e.to_string()))?;
    // Every store error names the store or the file already.
    if let Some(ids) = ids {
        let loaded = store.load(&candidate.profile.key, suite)?;
        let source = format!("the store {}", dir.display());
        return named_runs(loaded.runs, ids, &source).map(|r| Ok((r, Vec::new())));
    }
    let current = store.load_current(&candidate.profile.key, suite)?;
    let loaded = current.loaded;
    for (dup, counted) in &loaded.duplicates {
        errln!(
            "note: baseline file {} repeats the run of {}: counted once",
            dup.display(),
            counted.display()
        );
    }
    if !loaded.runs.is_empty() {
        return Ok(Ok((loaded.runs, current.metric_since)));
    }
    let existing = store
        .profiles()
        .with_context(|| format!("listing the baseline store {}", dir.display()))?;
    let listing = if existing.is_empty() {
        "the store is empty".to_string()
    } else {
        let parts: Vec<String> = existing
            .iter()
            .map(|(k, s)| format!("{k} ({})", s.join(", ")))
            .collect();
        format!("the store has: {}", parts.join("; "))
    };
    Ok(Err(format!(
        "no baseline runs for profile `{}` suite `{}` in {}; {listing}",
        candidate.profile.key,
        suite.unwrap_or(ADHOC_SUITE),
        dir.display()
    )))
}

/// Runs `infergate compare`.
pub(crate) async fn execute(args: CompareArgs) -> anyhow::Result<GateExit> {
    let (rule, plan, recorded) = judging(&args)?;
    let ids = recorded.as_ref().map(|b| b.runs.clone());
    let candidate = load_files(&args.candidate)?;
    let first = first_of_candidate(&candidate)?;
    let second = load_files(&args.confirmation)?;
    check_second_boot(&second, &candidate, first)?;
    let suite = args.suite.clone().or_else(|| first.suite.clone());
    if ids.is_none()
        && candidate
            .iter()
            .any(|r| r.labels.get("adaptive_rounds").is_some_and(|n| n != "0"))
    {
        errln!(
            "note: the candidate was re-measured adaptively; without --as-verdict it is compared on its cells' first measurements (give the run's verdict.json to replay its rounds)"
        );
    }
    let mut report = match baseline_runs(&args, first, suite.as_deref(), ids.as_deref())? {
        Err(why) => {
            errln!("note: {}", inert(&why));
            not_comparable(
                first,
                candidate.iter().map(|r| r.run_id.clone()).collect(),
                suite,
                &rule,
                CellReason::Recorded(why),
            )
        }
        Ok((mut baseline, metric_since)) => {
            align_profiles(&args, first, &mut baseline)?;
            let names: Vec<String> = args
                .confirmation
                .iter()
                .map(|p| p.display().to_string())
                .collect();
            let names = names.join(" ");
            let second = (!second.is_empty()).then_some((&second[..], names.as_str()));
            // A replay restarts the metrics the verdict did; else those the store's accepts do.
            let metric_since = recorded.map_or(metric_since, |b| b.metric_since);
            let history = std::sync::Arc::new(infergate_model::stats::History::with_metric_since(
                baseline,
                metric_since,
            ));
            let mut report =
                infergate_model::stats::replay(history, &rule, plan, &candidate, second)
                    .map_err(|e| usage(e.to_string()))?
                    .report;
            if report.confirmation.as_ref().is_some_and(|c| c.missing) {
                errln!(
                    "note: one boot cannot decide this comparison (a gate would boot again): give the second boot's results with --confirmation (or decide on one boot with --single-look); until then it is `insufficient`"
                );
            }
            if report.suite.is_none() {
                report.suite = suite;
            }
            report
        }
    };
    // compare reads no config: the flag, else the default.
    let policy = infergate_schema::policy::GatePolicy::chosen(args.fail_on.fail_on, None);
    report.fail_on = Some(policy.fail_on);
    report.set_headline();
    let text = render(&report, args.format)?;
    super::emit(&text, args.out.as_deref())?;
    if let Some(out) = &args.out {
        errln!(
            "{}: gate {} — {}",
            out.display(),
            report.gate.as_str(),
            report.headline
        );
    }
    let ending = policy.ending(false, false, Some(report.gate));
    if let Some(note) = infergate_schema::answer::policy_note(report.gate, &ending) {
        errln!(
            "verdict: {} — {note}",
            infergate_schema::answer::gate_word(report.gate).1
        );
    }
    Ok(ending.exit)
}

/// The candidate's first run, once the candidate is finished runs of one profile.
fn first_of_candidate(candidate: &[RunResults]) -> anyhow::Result<&RunResults> {
    let Some(first) = candidate.first() else {
        return Err(usage("--candidate: no runs in the given files"));
    };
    if let Some(r) = candidate.iter().find(|r| r.status == RunStatus::InProgress) {
        // Fail closed: an unfinished file has only the cells done before the gate stopped.
        anyhow::bail!(
            "--candidate: run `{}` is `in_progress`: the gate that wrote it was stopped before it finished, so it cannot be compared (its finished cells are kept for inspection)",
            inert(&r.run_id)
        );
    }
    if let Some(other) = candidate
        .iter()
        .find(|r| r.profile.key != first.profile.key)
    {
        return Err(usage(format!(
            "--candidate: runs `{}` and `{}` have different profiles (`{}` vs `{}`); give repetitions of one profile",
            first.run_id, other.run_id, first.profile.key, other.profile.key
        )));
    }
    Ok(first)
}

/// A `--confirmation` boot repeats the candidate: finished runs of its profile, as many.
fn check_second_boot(
    second: &[RunResults],
    candidate: &[RunResults],
    first: &RunResults,
) -> anyhow::Result<()> {
    if let Some(r) = second
        .iter()
        .find(|r| r.profile.key != first.profile.key || r.status == RunStatus::InProgress)
    {
        return Err(usage(format!(
            "--confirmation: run `{}` is not a finished second boot of the candidate's profile `{}` (its profile is `{}`, status `{:?}`)",
            inert(&r.run_id),
            first.profile.key,
            r.profile.key,
            r.status
        )));
    }
    if !second.is_empty() && second.len() != candidate.len() {
        return Err(usage(format!(
            "--confirmation: {} given for a candidate of {}; a second boot repeats the first boot's runs",
            infergate_schema::answer::plural(second.len(), "run"),
            infergate_schema::answer::plural(candidate.len(), "run")
        )));
    }
    Ok(())
}

/// Baseline runs of another profile than the candidate's are refused, or with
/// `--allow-profile-mismatch` relabelled as the candidate's (with a warning).
fn align_profiles(
    args: &CompareArgs,
    first: &RunResults,
    baseline: &mut [RunResults],
) -> anyhow::Result<()> {
    let Some(other) = baseline.iter().find(|r| r.profile.key != first.profile.key) else {
        return Ok(());
    };
    if !args.allow_profile_mismatch {
        // Only named files get here (a store loads the candidate's profile only). Fail closed:
        // the files the user chose cannot be compared, and a gate that compared nothing must
        // not pass. (The binary's edge neutralises the files' text in the message.)
        return Err(usage(format!(
            "--baseline: different profile: baseline run `{}` has `profile.key` `{}`, the candidate `{}` has `{}`; give baseline runs of the candidate's profile (or a store directory), or pass --allow-profile-mismatch to compare across setups (exploration only: the verdicts then measure the setup too)",
            other.run_id, other.profile.key, first.run_id, first.profile.key,
        )));
    }
    errln!(
        "warning: comparing across profiles (--allow-profile-mismatch): differences include the setup, not only the code"
    );
    for run in baseline {
        run.profile = first.profile.clone();
    }
    Ok(())
}
