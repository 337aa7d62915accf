//! `infergate baseline`: add accepted runs to the store, show per-cell history, prune, list.

use std::path::PathBuf;

use crate::cli::compare::{OutputFormat, load_files};
use infergate_io::untrusted_text::console as inert;
use infergate_schema::exit::{GateExit, usage};
use infergate_store::baseline::{ADHOC_SUITE, BaselineError, BaselineStore, history};

/// Arguments of `infergate baseline`.
#[derive(Debug, clap::Args)]
pub struct BaselineArgs {
    /// The baseline store directory (`--dir` is an old name for it).
    #[arg(
        long = "baseline-dir",
        alias = "dir",
        global = true,
        default_value = "baselines",
        value_name = "DIR"
    )]
    pub dir: PathBuf,
    /// What to do with the store.
    #[command(subcommand)]
    pub command: BaselineCommand,
}

/// The `baseline` subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum BaselineCommand {
    /// Add complete runs (infergate, llm-decode-bench, vllm bench serve or guidellm JSON) to the store.
    Add(AddArgs),
    /// Per-cell history: aggregate tok/s per run (newest last), the level and the noise CV.
    Show(ShowArgs),
    /// Delete all but the newest N runs of each profile and suite.
    Prune(PruneArgs),
    /// List profile keys and suites with their run counts.
    List,
    /// Accept a change point: comparisons use only the runs since RUN for level and noise (of
    /// every metric, or of those named with --metric).
    Accept(AcceptArgs),
}

/// Arguments of `baseline accept`.
#[derive(Debug, clap::Args)]
pub struct AcceptArgs {
    /// The first run at the new level (a run id of the store, see `infergate changes`).
    #[arg(long, value_name = "RUN")]
    pub since: String,
    /// Profile key (default: the one group holding RUN).
    #[arg(long)]
    pub profile: Option<String>,
    /// Suite (default: the one group holding RUN).
    #[arg(long)]
    pub suite: Option<String>,
    /// Why the change is accepted (kept with the record).
    #[arg(long)]
    pub note: Option<String>,
    /// Restart only this metric's baseline (repeatable; as `verdict.json` names it, e.g.
    /// `itl_p99`, `prefill_tps`): the others keep every run. Without it, or with
    /// `aggregate_tps` (the group's level), every metric restarts from RUN.
    #[arg(long = "metric", value_name = "METRIC", value_parser = super::parse_metric)]
    pub metrics: Vec<infergate_schema::verdict::Metric>,
}

/// Arguments of `baseline add`.
#[derive(Debug, clap::Args)]
pub struct AddArgs {
    /// Results files to add.
    #[arg(required = true, value_name = "RESULTS")]
    pub results: Vec<PathBuf>,
}

/// Arguments of `baseline show`.
#[derive(Debug, clap::Args)]
pub struct ShowArgs {
    /// Profile key (default: every profile in the store).
    #[arg(long)]
    pub profile: Option<String>,
    /// Suite (default: every suite of the profile).
    #[arg(long)]
    pub suite: Option<String>,
    /// Output format: `text` (terminal table), `md` (GitHub Markdown) or `json`.
    #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
    pub format: OutputFormat,
    /// The history window, as `compare`'s: the newest N runs give the CV, the newest third
    /// of them the level.
    #[arg(long, default_value_t = infergate_model::stats::DecisionRule::default().history_runs)]
    pub history_runs: usize,
    /// Show at most this many newest runs as columns.
    #[arg(long, default_value_t = 10)]
    pub last: usize,
    /// Write the output to this file instead of stdout.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
}

/// Arguments of `baseline prune`.
#[derive(Debug, clap::Args)]
pub struct PruneArgs {
    /// Runs to keep per profile and suite (newest).
    #[arg(long)]
    pub keep: usize,
    /// Prune only this profile key (default: every profile).
    #[arg(long)]
    pub profile: Option<String>,
    /// Prune only this suite (default: every suite).
    #[arg(long)]
    pub suite: Option<String>,
}

fn store_err(e: BaselineError) -> anyhow::Error {
    match e {
        BaselineError::Rejected { .. }
        | BaselineError::Escape(_)
        | BaselineError::NotAStore { .. }
        | BaselineError::BadMarker { .. } => usage(e.to_string()),
        other => anyhow::Error::new(other),
    }
}

/// Runs `infergate baseline`.
pub async fn execute(args: BaselineArgs) -> anyhow::Result<GateExit> {
    let store = match args.command {
        BaselineCommand::Add(_) => BaselineStore::open(&args.dir),
        // Only `add` may start a store: reading one that is not there is a typo in the path.
        _ if !args.dir.is_dir() => {
            return Err(usage(format!(
                "--baseline-dir {}: no such directory (the baseline store; `infergate baseline add` creates one)",
                args.dir.display()
            )));
        }
        _ => BaselineStore::open_existing(&args.dir),
    }
    .map_err(|e| usage(e.to_string()))?;
    match args.command {
        BaselineCommand::Add(a) => add(&store, &a),
        BaselineCommand::Accept(a) => accept(&store, &a),
        BaselineCommand::Show(a) => show(&store, &a),
        BaselineCommand::Prune(a) => {
            let report = store
                .prune(a.profile.as_deref(), a.suite.as_deref(), a.keep)
                .map_err(store_err)?;
            for p in &report.removed {
                outln!("removed {}", p.display());
            }
            outln!(
                "pruned {}, kept {} in {}",
                infergate_schema::answer::plural(report.removed.len(), "run"),
                report.kept,
                store.root().display()
            );
            Ok(GateExit::Pass)
        }
        BaselineCommand::List => {
            let profiles = store.profiles().map_err(store_err)?;
            if profiles.is_empty() {
                outln!("the store {} holds no runs", store.root().display());
            }
            for (key, suites) in profiles {
                for suite in suites {
                    let loaded = store.scan(&key, Some(&suite)).map_err(store_err)?;
                    let newest = loaded.runs.last().map_or("-".into(), |r| {
                        r.started_at
                            .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
                    });
                    outln!(
                        "{key}  suite={suite}  runs={}  newest={newest}{}",
                        loaded.runs.len(),
                        if loaded.skipped.is_empty() {
                            String::new()
                        } else {
                            format!("  unreadable={}", loaded.skipped.len())
                        }
                    );
                }
            }
            Ok(GateExit::Pass)
        }
    }
}

/// `baseline add`: every file is tried; any failure makes the command exit 2 at the end.
fn add(store: &BaselineStore, a: &AddArgs) -> anyhow::Result<GateExit> {
    let mut failures = Vec::new();
    for file in &a.results {
        let runs = match load_files(std::slice::from_ref(file)) {
            Ok(r) => r,
            Err(e) => {
                failures.push(format!("{e:#}"));
                continue;
            }
        };
        for run in runs {
            match store.add_run(&run) {
                // Id, key and suite are the added file's text.
                Ok(added) => outln!(
                    "added {} ({}, suite {}) → {}",
                    inert(&run.run_id),
                    inert(&run.profile.key),
                    inert(run.suite.as_deref().unwrap_or(ADHOC_SUITE)),
                    added.path.display()
                ),
                Err(
                    e @ (BaselineError::Rejected { .. }
                    | BaselineError::Duplicate { .. }
                    | BaselineError::NotAStore { .. }
                    | BaselineError::BadMarker { .. }),
                ) => failures.push(format!("{}: {e}", file.display())),
                Err(e) => return Err(anyhow::Error::new(e)),
            }
        }
    }
    if failures.is_empty() {
        Ok(GateExit::Pass)
    } else {
        Err(usage(failures.join("\n")))
    }
}

/// `baseline accept`: finds the group of the run (or takes the one named) and records it.
fn accept(store: &BaselineStore, a: &AcceptArgs) -> anyhow::Result<GateExit> {
    let (key, suite) = match (&a.profile, &a.suite) {
        (Some(k), Some(s)) => (k.clone(), s.clone()),
        _ => {
            let groups = store
                .groups_with_run(&a.since, a.profile.as_deref(), a.suite.as_deref())
                .map_err(store_err)?;
            match groups.as_slice() {
                [one] => one.clone(),
                [] => {
                    return Err(usage(format!(
                        "run `{}` is not in the store {} (see `infergate baseline show` or `infergate changes`)",
                        a.since,
                        store.root().display()
                    )));
                }
                many => {
                    let names: Vec<String> =
                        many.iter().map(|(k, s)| format!("{k} / {s}")).collect();
                    return Err(usage(format!(
                        "run `{}` is in several groups ({}): name one with --profile and --suite",
                        a.since,
                        names.join(", ")
                    )));
                }
            }
        }
    };
    let entry = store
        .accept(&key, Some(&suite), &a.since, a.note.as_deref(), &a.metrics)
        .map_err(store_err)?;
    let since = entry.since_started_at.to_rfc3339();
    let what = if entry.whole_group() {
        format!("comparisons use the runs started since {since}")
    } else {
        let names: Vec<&str> = entry.metrics.iter().map(|m| m.as_str()).collect();
        format!(
            "{} compared with the runs started since {since} (every other metric keeps every run)",
            names.join(", ")
        )
    };
    outln!(
        "accepted the change at run {} ({key}, suite {suite}): {what}",
        entry.since_run_id
    );
    Ok(GateExit::Pass)
}

/// The store's groups (profile key, suite) matching `--profile` and `--suite`; a usage error
/// naming both when none does.
pub(crate) fn matching_groups(
    store: &BaselineStore,
    profile: Option<&str>,
    suite: Option<&str>,
) -> anyhow::Result<Vec<(String, String)>> {
    let groups = store.groups(profile, suite).map_err(store_err)?;
    if groups.is_empty() && store.holds_no_runs().map_err(store_err)? {
        return Err(usage(format!(
            "the store {} holds no runs: nothing to read (record runs with `infergate run --update-baseline` or `infergate baseline add RESULTS`)",
            store.root().display()
        )));
    }
    if groups.is_empty() {
        return Err(usage(format!(
            "no baseline in {} for profile {} suite {} (see `infergate baseline list`)",
            store.root().display(),
            profile.unwrap_or("(any)"),
            suite.unwrap_or("(any)")
        )));
    }
    Ok(groups)
}

/// `baseline show`.
fn show(store: &BaselineStore, a: &ShowArgs) -> anyhow::Result<GateExit> {
    let groups = matching_groups(store, a.profile.as_deref(), a.suite.as_deref())?;
    let mut histories = Vec::new();
    for (key, suite) in groups {
        let loaded = store.scan(&key, Some(&suite)).map_err(store_err)?;
        for (path, why) in &loaded.skipped {
            super::say(
                "warning",
                &format!(
                    "{} cannot be used (a comparison against this store fails until it is fixed or removed): {why}",
                    path.display()
                ),
            );
        }
        let accepted = store.accepted(&key, Some(&suite)).map_err(store_err)?;
        histories.push(history::history(
            &key,
            &suite,
            &loaded.runs,
            &accepted,
            infergate_model::stats::rule::level_window(a.history_runs),
            a.history_runs.max(1),
            a.last,
        ));
    }
    use infergate_report::report::history::{markdown, text};
    let text = match a.format {
        OutputFormat::Json => super::pretty_json(&histories, "the history")?,
        OutputFormat::Md => histories
            .iter()
            .map(markdown)
            .collect::<Vec<_>>()
            .join("\n"),
        OutputFormat::Text => histories.iter().map(text).collect::<Vec<_>>().join("\n"),
    };
    super::emit(&text, a.out.as_deref())?;
    Ok(GateExit::Pass)
}
