//! `infergate report`: renders a results file (and its verdict) and, inside GitHub Actions or
//! with `--github`, posts the check run and the sticky PR comment and writes the job summary,
//! step outputs and workflow commands. Used by the two-workflow pattern: the untrusted PR job
//! measures with a read-only token and uploads its files; a `workflow_run` job reports them.
//!
//! The exit code is the verdict's (0 pass/neutral, 1 regression), never altered by a reporting
//! failure; 2 when an input file cannot be read.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;

use crate::exit::{GateExit, usage};
use crate::report::github::{GithubContext, GithubReporter, PublishInput, RetryPolicy, check_name};
use crate::report::verdict_table;
use crate::results::RunResults;
use crate::verdict::{ComparisonReport, GateVerdict};

/// Arguments of `infergate report`.
#[derive(Debug, clap::Args)]
pub struct ReportArgs {
    /// Results file (infergate's results schema) of the run to report.
    #[arg(long)]
    pub results: PathBuf,
    /// Verdict file, as written by `infergate compare --format json`; without it the run is
    /// reported as "no baseline yet".
    #[arg(long)]
    pub verdict: Option<PathBuf>,
    /// Directory of baseline results files (searched recursively for `*.json`) for the trend
    /// chart in the job summary.
    #[arg(long)]
    pub history: Option<PathBuf>,
    /// Gate config file: annotations point at the line defining the suite's matrix.
    #[arg(long)]
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
    /// Complete the check as failure when the verdict is inconclusive.
    #[arg(long)]
    pub fail_on_inconclusive: bool,
}

/// Runs `infergate report`.
pub async fn execute(args: ReportArgs) -> anyhow::Result<GateExit> {
    let results: RunResults = read_json(&args.results, "results")?;
    let verdict: Option<ComparisonReport> = match &args.verdict {
        Some(p) => Some(read_json(p, "verdict")?),
        None => None,
    };
    let mut notices = Vec::new();
    if let Some(v) = &verdict
        && v.profile.key != results.profile.key
    {
        notices.push(format!(
            "the verdict is for profile `{}` but the results are for `{}`",
            v.profile.key, results.profile.key
        ));
    }
    let history = match &args.history {
        Some(dir) => load_history(dir, &results, &mut notices)?,
        None => Vec::new(),
    };
    let suite = args
        .suite
        .clone()
        .or_else(|| results.suite.clone())
        .or_else(|| verdict.as_ref().and_then(|v| v.suite.clone()))
        .unwrap_or_else(|| "default".to_string());
    let matrix_line = match &args.config {
        Some(path) => {
            let text = std::fs::read_to_string(path).map_err(|e| {
                usage(format!(
                    "cannot read the config file {}: {e}; pass the gate config the run used",
                    path.display()
                ))
            })?;
            Some(matrix_line(&text, &suite).unwrap_or(1))
        }
        None => None,
    };

    match &verdict {
        Some(v) => print!("{}", verdict_table::text(v)),
        None => println!(
            "{}: no verdict given (no baseline yet); {} cells measured",
            results.run_id,
            results.cells.len()
        ),
    }
    let in_actions = super::in_actions();
    for n in &notices {
        eprintln!("notice: {n}");
    }

    if args.github || in_actions {
        let mut ctx = GithubContext::from_env();
        if let Some(sha) = &args.head_sha {
            ctx.head_sha = Some(sha.clone());
        }
        if let Some(pr) = args.pr {
            ctx.pr_number = Some(pr);
        }
        let mut retry = RetryPolicy::default();
        if let Some(ms) = std::env::var("INFERGATE_GITHUB_RETRY_BASE_MS")
            .ok()
            .and_then(|v| v.parse::<u64>().ok())
        {
            retry.base_delay = Duration::from_millis(ms);
            retry.max_delay = retry
                .max_delay
                .min(Duration::from_millis(ms.saturating_mul(8)));
        }
        let mut reporter = GithubReporter::from_context(ctx, retry);
        reporter.set_results_path(&args.results);
        reporter.set_policy(crate::policy::GatePolicy::new(
            if args.fail_on_inconclusive {
                crate::policy::FailOn::Inconclusive
            } else {
                crate::policy::FailOn::Regression
            },
        ));
        let name = args
            .name
            .clone()
            .unwrap_or_else(|| check_name(&results.profile.key, &suite));
        let input = PublishInput {
            results: &results,
            verdict: verdict.as_ref(),
            history: &history,
            config_path: args.config.as_deref(),
            matrix_line,
            artifact_url: args.artifact_url.clone(),
            failure: None,
        };
        let outcome = reporter.publish(&name, &input).await;
        outcome.print(reporter.context().in_actions);
    }

    Ok(match verdict.map(|v| v.gate) {
        Some(GateVerdict::Regression) => GateExit::Regression,
        Some(GateVerdict::Unmeasured) => GateExit::Failure,
        _ => GateExit::Pass,
    })
}

fn read_json<T: serde::de::DeserializeOwned>(path: &Path, what: &str) -> anyhow::Result<T> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        usage(format!(
            "cannot read the {what} file {}: {e}",
            path.display()
        ))
    })?;
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
pub fn matrix_line(config: &str, suite: &str) -> Option<u32> {
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
    for table in ["suites", "suite"] {
        let want = format!("{table}.{suite}.matrix");
        if let Some(i) = lines
            .iter()
            .position(|l| header(l).as_deref() == Some(&want))
        {
            return Some(i as u32 + 1);
        }
    }
    let in_block = |start: usize| -> u32 {
        for (j, l) in lines.iter().enumerate().skip(start + 1) {
            if l.trim_start().starts_with('[') {
                break;
            }
            let key = l.trim_start();
            if key.starts_with("matrix") || key.starts_with("concurrency") {
                return j as u32 + 1;
            }
        }
        start as u32 + 1
    };
    for table in ["suites", "suite"] {
        let want = format!("{table}.{suite}");
        if let Some(i) = lines
            .iter()
            .position(|l| header(l).as_deref() == Some(&want))
        {
            return Some(in_block(i));
        }
    }
    for (i, l) in lines.iter().enumerate() {
        let t = l.trim();
        if t == "[[suites]]" || t == "[[suite]]" {
            let end = lines
                .iter()
                .enumerate()
                .skip(i + 1)
                .find(|(_, l)| l.trim_start().starts_with('['))
                .map(|(j, _)| j)
                .unwrap_or(lines.len());
            let named = lines[i + 1..end].iter().any(|l| {
                let s = l.replace(' ', "");
                s == format!("name=\"{suite}\"") || s == format!("name='{suite}'")
            });
            if named {
                return Some(in_block(i));
            }
        }
    }
    None
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
