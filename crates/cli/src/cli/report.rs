//! `infergate report`: renders a results file (and its verdict) and, inside GitHub Actions or
//! with `--github`, posts the check run and the sticky PR comment and writes the job summary,
//! step outputs and workflow commands. Used by the two-workflow pattern: the untrusted PR job
//! measures with a read-only token and uploads its files; a `workflow_run` job reports them.
//!
//! With `--trusted-config` (what the action's `report` mode always passes) the verdict is not
//! read from the artifact at all: it is recomputed from `results.json` against the trusted
//! config and baseline store (a checkout of the base branch, never the PR's), and results that
//! are not what that config asks for are refused (`run::rejudge`).
//!
//! Without `--trusted-config` a `--verdict` file is untrusted (an artifact's `verdict.json` is
//! whatever the pull request's job wrote): one that fails the gate (regression, unmeasured) is
//! reported as it is, one that would pass or be neutral is refused (exit 2, nothing posted,
//! the error names `--trusted-config`).
//!
//! The exit code is the verdict's (0 pass/neutral, 1 regression, under the trusted config's
//! `fail_on` when one is given), never altered by a reporting failure; 2 when an input file
//! cannot be read or an untrusted verdict would pass; 3 when the trusted recompute is refused
//! or fails (the check says why).

use std::path::{Path, PathBuf};

use anyhow::Context;

use infergate_gate::run::confirm::CONFIRM_RESULTS;
use infergate_io::untrusted_text::console as inert;
use infergate_report::report::github::{
    GithubContext, GithubReporter, PublishInput, RetryPolicy, check_name,
};
use infergate_report::report::verdict_table;
use infergate_schema::exit::{GateExit, usage};
use infergate_schema::results::{RunResults, RunStatus};
use infergate_schema::verdict::ComparisonReport;
use infergate_store::baseline::{PROFILE_FILE, STORE_MARKER};

/// Arguments of `infergate report`.
#[derive(Debug, clap::Args)]
pub struct ReportArgs {
    /// Results file (infergate's results schema) of the run to report.
    #[arg(long)]
    pub results: PathBuf,
    /// Verdict file, as written by `infergate compare --format json`; without it the run is
    /// reported as "no baseline yet". Untrusted without `--trusted-config`: it may fail the
    /// report (regression, unmeasured), never pass it (exit 2).
    #[arg(long)]
    pub verdict: Option<PathBuf>,
    /// Directory of baseline results files (searched recursively for `*.json`; a baseline
    /// store works too) for the trend chart in the job summary.
    #[arg(long)]
    pub history: Option<PathBuf>,
    /// Gate config file: annotations point at the line defining the suite's matrix.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Suite name (default: the one recorded in the results file).
    #[arg(long)]
    pub suite: Option<String>,
    /// Post to GitHub (implied when GITHUB_ACTIONS=true).
    #[arg(long)]
    pub github: bool,
    /// Check-run name (default `infergate / <profile> / <suite>`).
    #[arg(long)]
    pub name: Option<String>,
    /// Link to the uploaded results artifact, shown in the check and the comment.
    #[arg(long)]
    pub artifact_url: Option<String>,
    /// Commit to attach the check to (default: PR head from the event payload, else GITHUB_SHA);
    /// needed in `workflow_run` jobs for fork PRs, whose payload lists no pull request.
    #[arg(long)]
    pub head_sha: Option<String>,
    /// Pull request number to comment on (default: from the event payload).
    #[arg(long)]
    pub pr: Option<u64>,
    #[command(flatten)]
    /// What fails the report's check and exit code (default: the trusted config's `fail_on`,
    /// else `regression`).
    pub fail_on: super::FailOnArg,
    /// Gate config from a trusted checkout (the base branch): the verdict is recomputed from
    /// the results against it and its baseline store, and `--verdict` is ignored.
    #[arg(long, value_name = "FILE")]
    pub trusted_config: Option<PathBuf>,
    /// Baseline store for `--trusted-config` (default: the trusted config's `[baseline] dir`).
    #[arg(long, value_name = "DIR", requires = "trusted_config")]
    pub baseline_dir: Option<PathBuf>,
    /// The confirmation boot's results (default: `results-confirm.json` next to `--results`,
    /// when present); only read with `--trusted-config`.
    #[arg(long, value_name = "FILE", requires = "trusted_config")]
    pub confirm_results: Option<PathBuf>,
    /// Write the verdict that was reported (the recomputed one with `--trusted-config`) to
    /// this file, atomically.
    #[arg(long, value_name = "FILE")]
    pub verdict_out: Option<PathBuf>,
}

/// The verdict recomputed against a trusted config, or why it could not be.
struct Trusted {
    config: infergate_config::config::GateConfig,
    suite: infergate_config::config::SuiteConfig,
    /// The baseline store judged against: `--baseline-dir`, else the config's.
    store: PathBuf,
    /// The recompute, or why it failed.
    judged: Result<infergate_gate::run::rejudge::Judged, String>,
    confirmation: Option<RunResults>,
}

async fn rejudge(
    args: &ReportArgs,
    config_path: &Path,
    results: &RunResults,
) -> anyhow::Result<Trusted> {
    let config = super::run::load_config(Some(config_path))?;
    let suite = config
        .suite(args.suite.as_deref())
        .map_err(|e| usage(e.to_string()))?
        .clone();
    let store = args
        .baseline_dir
        .clone()
        .unwrap_or_else(|| config.baseline.dir.clone());
    let confirm_path = args.confirm_results.clone().or_else(|| {
        let p = args.results.with_file_name(CONFIRM_RESULTS);
        p.is_file().then_some(p)
    });
    let confirm: Option<RunResults> = (confirm_path.as_deref())
        .map(|p| read_json(p, "confirmation results", CONFIRM_RESULTS))
        .transpose()?;
    let judged =
        infergate_gate::run::rejudge::rejudge(&config, &suite, &store, results, confirm.as_ref())
            .map_err(|e| e.to_string());
    Ok(Trusted {
        config,
        suite,
        store,
        judged,
        confirmation: confirm,
    })
}

pub(crate) async fn execute(args: ReportArgs) -> anyhow::Result<GateExit> {
    let results: RunResults = read_json(&args.results, "results", "results.json")?;
    let mut notices = Vec::new();
    let trusted = match &args.trusted_config {
        Some(path) => Some(rejudge(&args, path, &results).await?),
        None => None,
    };
    let mut verdict = verdict_to_report(&args, trusted.as_ref(), &results, &mut notices)?;
    // A results file the gate never finished (`in_progress`: it was killed mid-run) is posted
    // as a gate error (check `failure`, `verdict=error`), and the step fails with it.
    let unfinished = results.status == RunStatus::InProgress;
    if unfinished {
        errln!(
            "error: {} is `in_progress`: the gate that wrote it was stopped before it finished; reported as a gate error (exit 3)",
            args.results.display()
        );
    }
    if let Some(f) = trusted.as_ref().and_then(|t| t.judged.as_ref().err()) {
        // Quotes the artifact's suite, model or profile key when it refuses them.
        errln!("error: {}", inert(f));
    }
    let policy = infergate_schema::policy::GatePolicy::chosen(
        args.fail_on.fail_on,
        trusted.as_ref().map(|t| t.config.thresholds.fail_on),
    );
    if let Some(v) = verdict.as_mut() {
        v.fail_on = Some(policy.fail_on);
    }
    let cancelled = results.status == RunStatus::Cancelled;
    // Without a trusted config the verdict file is the artifact's word (the pull request's
    // job wrote it): it may fail the report, never pass it (no success check, no exit 0).
    let refused = match (&trusted, &args.verdict, &verdict) {
        (None, Some(path), Some(v)) => untrusted_pass(policy, cancelled, path, v),
        _ => None,
    };
    write_verdict_out(
        args.verdict_out.as_deref(),
        verdict.as_ref().filter(|_| refused.is_none()),
    )?;
    let history = match (&args.history, &trusted) {
        (Some(dir), _) => load_history(dir, &results, &mut notices)?,
        (None, t) => (t.as_ref().and_then(|t| t.judged.as_ref().ok()))
            .map(|d| d.loaded.history.runs().to_vec())
            .unwrap_or_default(),
    };
    let suite = (trusted.as_ref().map(|t| t.suite.name.clone()))
        .or_else(|| args.suite.clone())
        .or_else(|| results.suite.clone())
        .or_else(|| verdict.as_ref().and_then(|v| v.suite.clone()))
        .unwrap_or_else(|| "default".to_string());
    let failure = trusted.as_ref().and_then(|t| {
        (t.judged.as_ref().err().cloned())
            .or_else(|| nothing_compared(&args, t, &results, &mut notices))
    });
    let matrix_line = match &args.config {
        None => trusted.as_ref().map(|t| t.suite.line as u32),
        Some(path) => Some(config_matrix_line(path, &suite)?),
    };

    print_verdict(&results, verdict.as_ref(), &notices);
    if let Some(refusal) = refused {
        return Err(refusal);
    }
    if args.github || super::in_actions() {
        let confirmation = trusted.as_ref().and_then(|t| t.confirmation.as_ref());
        // The GPU's clocks of either boot, as `run` warned of them.
        let cautions = infergate_report::report::layout::clock_cautions(&results, confirmation);
        let input = PublishInput {
            results: &results,
            confirmation,
            verdict: verdict.as_ref(),
            cautions: &cautions,
            history: &history,
            config_path: args
                .config
                .as_deref()
                .or_else(|| trusted.as_ref().map(|t| Path::new(t.config.path.as_str()))),
            matrix_line,
            artifact_url: args.artifact_url.clone(),
            failure: failure.clone(),
        };
        let name = (args.name.clone()).unwrap_or_else(|| check_name(&results.profile.key, &suite));
        publish_github(&args, policy, &name, &input).await;
    }
    // The reporter's check conclusion came from the same policy and inputs.
    let gate = verdict.as_ref().map(|v| v.gate);
    Ok(policy
        .ending(failure.is_some() || unfinished, cancelled, gate)
        .exit)
}

/// The verdict to report: the trusted recompute's, else the `--verdict` file's (refused when it
/// belongs to other results); what to say of it goes to `notices`.
fn verdict_to_report(
    args: &ReportArgs,
    trusted: Option<&Trusted>,
    results: &RunResults,
    notices: &mut Vec<String>,
) -> anyhow::Result<Option<ComparisonReport>> {
    let verdict = match (trusted, &args.verdict) {
        (Some(t), given) => {
            if given.is_some() {
                notices.push(
                    "--verdict ignored: the verdict is recomputed from the results against the trusted config"
                        .to_string(),
                );
            }
            let judged = t.judged.as_ref().ok();
            notices.extend(
                judged
                    .into_iter()
                    .flat_map(|d| d.loaded.notices.iter().cloned()),
            );
            // A recomputed verdict's headline is written here; a given file keeps its own.
            judged.and_then(|d| d.verdict.clone()).map(|mut v| {
                v.set_headline();
                v
            })
        }
        (None, Some(p)) => {
            let v: ComparisonReport = read_json(p, "verdict", "verdict.json")?;
            // A verdict file beside results of another run (an output directory reused by a
            // later run) is not this run's verdict: refused, nothing posted.
            if let Some(why) = infergate_report::merge::stale_pair(results, &args.results, &v, p) {
                return Err(usage(format!(
                    "{}: {why}; pass the verdict.json written with these results",
                    p.display()
                )));
            }
            Some(v)
        }
        (None, None) => None,
    };
    if let Some(v) = &verdict
        && v.profile.key != results.profile.key
    {
        notices.push(format!(
            "the verdict is for profile `{}` but the results are for `{}`",
            v.profile.key, results.profile.key
        ));
    }
    Ok(verdict)
}

/// The verdict table (or that there is none) and the notices.
fn print_verdict(results: &RunResults, verdict: Option<&ComparisonReport>, notices: &[String]) {
    match verdict {
        Some(v) => out!("{}", verdict_table::text(v)),
        // The run id is the artifact's text: inert before it reaches the Actions log.
        None => outln!(
            "{}: no verdict given (no baseline yet); {} cells measured",
            inert(&results.run_id),
            results.cells.len()
        ),
    }
    for n in notices {
        super::say("notice", n);
    }
}

/// Why an untrusted verdict file is not reported: it would pass.
fn untrusted_pass(
    policy: infergate_schema::policy::GatePolicy,
    cancelled: bool,
    path: &Path,
    v: &ComparisonReport,
) -> Option<anyhow::Error> {
    if policy
        .ending(false, cancelled, Some(v.gate))
        .stands_unverified()
    {
        return None;
    }
    Some(usage(format!(
        "the verdict file {} says `{}`, which infergate report does not take on trust: nothing \
         was posted. Add --trusted-config FILE (the base branch's gate config, with \
         --baseline-dir DIR) to recompute the verdict from the results, or use the exit \
         code of `infergate compare`, which judged it; a verdict file alone can only fail a report",
        path.display(),
        v.gate.as_str()
    )))
}

/// Writes `--verdict-out`, or removes a stale one when there is no verdict this time (it must
/// not be read as this run's).
fn write_verdict_out(path: Option<&Path>, v: Option<&ComparisonReport>) -> anyhow::Result<()> {
    match (path, v) {
        (Some(path), Some(v)) => {
            let body = serde_json::to_string_pretty(v).context("serialising the verdict")?;
            infergate_io::fsio::write_durable(path, body.as_bytes())
                .with_context(|| format!("writing {}", path.display()))?;
        }
        (Some(path), None) if path.exists() => {
            let _ = std::fs::remove_file(path);
        }
        _ => {}
    }
    Ok(())
}

/// As in `run`: a pull request's gate that compared nothing fails, unless the trusted config
/// says it is bootstrapping. The report job of the two-workflow pattern runs on `workflow_run`;
/// the pull request is then the payload's (or `--pr`). The failure, if any.
fn nothing_compared(
    args: &ReportArgs,
    t: &Trusted,
    results: &RunResults,
    notices: &mut Vec<String>,
) -> Option<String> {
    let d = t.judged.as_ref().ok().filter(|d| d.verdict.is_none())?;
    match infergate_gate::run::decide::nothing_compared(
        &t.store,
        results,
        t.config.baseline.allow_no_baseline,
        about_pull_request(args.pr).as_deref(),
        &t.config.path,
    ) {
        Ok(()) => {
            notices.extend(d.loaded.no_baseline.clone());
            None
        }
        Err(why) => {
            errln!("error: {}", inert(&why));
            Some(why)
        }
    }
}

/// The line of `suite`'s matrix in the `--config` file, for the check's annotations (1 when
/// not found).
fn config_matrix_line(path: &Path, suite: &str) -> anyhow::Result<u32> {
    let text = infergate_io::fsio::read_input(path).map_err(|e| {
        usage(format!(
            "cannot read the config file {}: {e}; pass the gate config the run used",
            path.display()
        ))
    })?;
    Ok(matrix_line(&text, suite).unwrap_or(1))
}

/// Posts the check run and the PR comment and writes the job summary and step outputs.
async fn publish_github(
    args: &ReportArgs,
    policy: infergate_schema::policy::GatePolicy,
    name: &str,
    input: &PublishInput<'_>,
) {
    let mut ctx = GithubContext::from_env();
    // Given by hand (the fork-PR case of a workflow_run): checked against the API before
    // a comment, never trusted blindly.
    ctx.target(args.head_sha.as_deref(), args.pr);
    let (retry, warnings) = RetryPolicy::from_lookup(|k| std::env::var(k).ok());
    ctx.warnings.extend(warnings);
    let mut reporter = GithubReporter::from_context(ctx, retry);
    reporter.set_results_path(&args.results);
    reporter.set_policy(policy);
    // The config the run used names the "reproduce locally" command: `--config`, else the
    // trusted one the verdict was recomputed against.
    if let Some(path) = input.config_path {
        reporter.set_config(path.display().to_string());
    }
    let outcome = reporter.publish(name, input).await;
    outcome.print(reporter.context().in_actions);
}

/// The event, when this report is about a pull request: `--pr`, or inside Actions a
/// `pull_request` / `merge_group` event or a `workflow_run` whose payload names a pull request
/// (or a fork's head to look one up by).
fn about_pull_request(pr: Option<u64>) -> Option<String> {
    if let Some(n) = pr {
        return Some(format!("pull request #{n}"));
    }
    let ctx = GithubContext::from_env();
    if !ctx.in_actions {
        return None;
    }
    let event = ctx.event_name.clone().unwrap_or_default();
    if matches!(
        event.as_str(),
        "pull_request" | "pull_request_target" | "merge_group"
    ) {
        return Some(event);
    }
    (ctx.pr_number.is_some() || ctx.pr_lookup.is_some())
        .then(|| format!("{event} of a pull request"))
}

fn read_json<T: serde::de::DeserializeOwned>(
    path: &Path,
    what: &str,
    usual_name: &str,
) -> anyhow::Result<T> {
    let text = infergate_store::import::read_file(path, usual_name)
        .map_err(|e| usage(format!("cannot read the {what} file: {e}")))?;
    serde_json::from_str(&text)
        .map_err(|e| {
            usage(format!(
                "the {what} file {} is not a valid infergate {what} file: {e}",
                path.display()
            ))
        })
        .with_context(|| format!("reading {}", path.display()))
}

/// Baseline runs of the same profile under `dir` (recursive); unreadable files are skipped with
/// a notice: the chart is decoration, the verdict file is the judgement.
fn load_history(
    dir: &Path,
    current: &RunResults,
    notices: &mut Vec<String>,
) -> anyhow::Result<Vec<RunResults>> {
    if !dir.is_dir() {
        return Err(usage(format!(
            "--history {} is not a directory",
            dir.display()
        )));
    }
    let mut files = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let entries = match std::fs::read_dir(&d) {
            Ok(e) => e,
            Err(e) => {
                notices.push(format!("cannot list {}: {e}", d.display()));
                continue;
            }
        };
        for entry in entries.flatten() {
            let p = entry.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "json") {
                files.push(p);
            }
        }
    }
    files.sort();
    let mut runs = Vec::new();
    for f in files {
        let parsed = std::fs::read_to_string(&f)
            .map_err(|e| e.to_string())
            .and_then(|t| serde_json::from_str::<RunResults>(&t).map_err(|e| e.to_string()));
        match parsed {
            Ok(r) if r.profile.key == current.profile.key => runs.push(r),
            Ok(_) => {}
            // A baseline store's own description of a profile directory, and its marker: not runs.
            Err(_)
                if f.file_name()
                    .is_some_and(|n| n == PROFILE_FILE || n == STORE_MARKER) => {}
            Err(e) => notices.push(format!(
                "history file {} skipped (not a results file: {e})",
                f.display()
            )),
        }
    }
    Ok(runs)
}

/// 1-based line that defines `suite`'s matrix in a TOML gate config: a `[suites.<S>.matrix]`
/// (or `[suite.<S>.matrix]`) table, else the `matrix`/`concurrency` key inside the suite's
/// table (`[suites.<S>]` or a `[[suites]]` entry with `name = "<S>"`), else the suite's header.
fn matrix_line(config: &str, suite: &str) -> Option<u32> {
    let lines: Vec<&str> = config.lines().collect();
    let header = |l: &str| -> Option<String> {
        let t = l.trim();
        let inner = t
            .strip_prefix('[')?
            .split(']')
            .next()?
            .trim_start_matches('[');
        Some(inner.replace(['"', '\'', ' '], ""))
    };
    // The first `[suites.X]` or `[suite.X]` header (`X` after the table's name).
    let table = |rest: String| {
        ["suites", "suite"].iter().find_map(|t| {
            let want = format!("{t}.{rest}");
            lines
                .iter()
                .position(|l| header(l).as_deref() == Some(&want))
        })
    };
    // The lines of the table whose header is at `start`.
    let body = |start: usize| {
        lines[start + 1..]
            .iter()
            .take_while(|l| !l.trim_start().starts_with('['))
    };
    let in_block = |start: usize| -> u32 {
        let key = body(start).position(|l| {
            let key = l.trim_start();
            key.starts_with("matrix") || key.starts_with("concurrency")
        });
        key.map_or(start, |j| start + 1 + j) as u32 + 1
    };
    if let Some(i) = table(format!("{suite}.matrix")) {
        return Some(i as u32 + 1);
    }
    let named = [format!("name=\"{suite}\""), format!("name='{suite}'")];
    table(suite.to_string())
        .or_else(|| {
            (0..lines.len()).find(|&i| {
                matches!(lines[i].trim(), "[[suites]]" | "[[suite]]")
                    && body(i).any(|l| named.contains(&l.replace(' ', "")))
            })
        })
        .map(in_block)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_matrix_line_of_a_suite() {
        let cfg = "[engine]\ncommand = \"x\"\n\n[suites.pr]\nduration_s = 5\n\n[suites.pr.matrix]\nconcurrency = [1, 2]\n\n[suites.nightly.matrix]\nconcurrency = [1]\n";
        assert_eq!(matrix_line(cfg, "pr"), Some(7));
        assert_eq!(matrix_line(cfg, "nightly"), Some(10));
        let inline = "[suites.pr]\nname = 1\nconcurrency = [1, 2]\n[other]\n";
        assert_eq!(matrix_line(inline, "pr"), Some(3));
        let array =
            "[[suites]]\nname = \"a\"\n[[suites]]\nname = \"pr\"\nmatrix = { concurrency = [1] }\n";
        assert_eq!(matrix_line(array, "pr"), Some(5));
        assert_eq!(matrix_line(cfg, "missing"), None);
    }
}
