//! `infergate ab`: paired A/B comparison of two engine builds (`[engine.a]` = base,
//! `[engine.b]` = candidate) booted alternately on one runner (A B B A A B B A …), each boot
//! measuring the suite; the pairs are compared ([`crate::run::ab::paired_compare`]) and the
//! outputs, exit codes and GitHub reports are those of `run`:
//! 0 pass (also inconclusive unless `fail_on = "inconclusive"`), 1 regression, 2 usage/config
//! error (nothing booted), 3 engine or measurement failure (including cancellation).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use tokio_util::sync::CancellationToken;

use crate::cli::run::{config_error, install_signal_handlers, load_config, parse_labels};
use crate::exit::{GateExit, usage};
use crate::report::github::render::{Links, Outcome};
use crate::report::github::{GithubReporter, PublishInput, check_name};
use crate::run::ab::{AbRequest, AbSide, fold_side, paired_compare, run_ab, summary_section};
use crate::run::{self, RunFailure};
use crate::telemetry::NvmlSampler;

use super::in_actions;

/// Arguments of `infergate ab`.
#[derive(Debug, clap::Args)]
pub struct AbArgs {
    /// Gate config with `[engine.a]` and `[engine.b]` (default: ./infergate.toml).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Suite to run on every boot (default: `pr` if the config has one, else its first suite).
    #[arg(long)]
    pub suite: Option<String>,
    /// Output directory: results.json (B), results-a.json (A), verdict.json, summary.md, engine logs.
    #[arg(long, default_value = "infergate-results")]
    pub out: PathBuf,
    /// Pairs of boots (overrides `[ab] rounds`; default 4 = A B B A A B B A).
    #[arg(long)]
    pub rounds: Option<u32>,
    /// Report to GitHub (check run, PR comment, job summary) even outside GitHub Actions.
    #[arg(long)]
    pub github: bool,
    /// Extra argument appended to both engine commands (repeatable).
    #[arg(long = "engine-arg", value_name = "ARG", allow_hyphen_values = true)]
    pub engine_args: Vec<String>,
    /// Label recorded in the results, KEY=VALUE (repeatable).
    #[arg(long = "label", value_name = "KEY=VALUE")]
    pub labels: Vec<String>,
}

/// Runs `infergate ab`.
pub async fn execute(args: AbArgs) -> anyhow::Result<GateExit> {
    // 1. Validate everything before anything boots.
    let config = load_config(args.config.as_deref())?;
    let Some(ab) = config.ab.clone() else {
        return Err(usage(format!(
            "{}: `infergate ab` needs two engines: add [engine.a] (the base build) and [engine.b] (the candidate), each with its `command` (see docs/adaptive-and-ab.md)",
            config.path
        )));
    };
    let suite = config
        .suite(args.suite.as_deref())
        .map_err(config_error)?
        .clone();
    let pairs = args.rounds.unwrap_or(ab.rounds);
    if !(2..=100).contains(&pairs) {
        return Err(usage(format!(
            "--rounds {pairs}: a paired comparison needs 2 to 100 pairs of boots"
        )));
    }
    let labels: BTreeMap<String, String> = parse_labels(&args.labels)?;
    let cancel = CancellationToken::new();
    install_signal_handlers(cancel.clone())?;

    let detected = tokio::task::spawn_blocking(crate::telemetry::detect_hardware)
        .await
        .context("hardware detection crashed")?;
    let hardware = config.profile.hardware(detected);
    let telemetry = tokio::task::spawn_blocking(|| NvmlSampler::start(Duration::from_millis(250)))
        .await
        .context("telemetry start crashed")?
        .map_err(|e| e.reason);

    let github_on = args.github
        || match config.report.github {
            crate::config::GithubMode::Always => true,
            crate::config::GithubMode::Never => false,
            crate::config::GithubMode::Auto => in_actions(),
        };
    let mut reporter = github_on.then(GithubReporter::from_env);
    if let Some(r) = reporter.as_mut() {
        r.set_results_path(args.out.join("results.json"));
        r.set_summary_path(args.out.join("summary.md"));
        r.set_fail_on_inconclusive(
            config.thresholds.fail_on == crate::config::FailOn::Inconclusive,
        );
    }
    let schedule: String = ab
        .order
        .schedule(pairs)
        .iter()
        .map(|(_, b)| if *b { 'B' } else { 'A' })
        .collect();
    errln!(
        "infergate ab: config {} · suite `{}` ({} cells) · {pairs} pairs of boots ({schedule}) · results in {}",
        config.path,
        suite.name,
        suite.cells(),
        args.out.display()
    );
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("cannot create {}", args.out.display()))?;

    // 2. Boot A and B alternately, one at a time.
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let boots = 2 * pairs as u64;
    let printer = tokio::spawn(crate::report::console::render_progress(
        rx,
        suite.cells() as u64 * suite.repetitions.max(1) as u64 * boots,
    ));
    let req = AbRequest {
        ab: &ab,
        model: config.model.as_deref(),
        suite: &suite,
        hardware,
        telemetry,
        engine_args: &args.engine_args,
        log_dir: args.out.clone(),
        log_tail_lines: config.report.log_tail_lines,
        labels,
        pairs,
    };
    let measured = run_ab(req, tx, cancel.clone()).await;
    let _ = printer.await;
    let mut failure = measured.failure.as_ref().map(RunFailure::message);

    // 3. Fold each side's boots; compare pair by pair.
    let b_side = fold_side(&measured.b);
    let a_side = fold_side(&measured.a);
    let Some(results) = b_side.clone().or_else(|| a_side.clone()) else {
        anyhow::bail!("no engine was booted")
    };
    let verdict = if failure.is_none() {
        match paired_compare(&measured.a, &measured.b, &config.thresholds.rule) {
            Ok(v) => Some(v),
            Err(e) => {
                failure = Some(format!("paired comparison failed: {e}"));
                None
            }
        }
    } else {
        None
    };

    // 4. Write the outputs.
    let name = check_name(&results.profile.key, &format!("{}-ab", suite.name));
    let outcome = Outcome {
        results: &results,
        verdict: verdict.as_ref(),
        failure: failure.as_deref(),
        fail_on_inconclusive: config.thresholds.fail_on == crate::config::FailOn::Inconclusive,
    };
    let command = |side: &Option<crate::results::RunResults>| {
        side.as_ref()
            .and_then(|r| r.engine.command.clone())
            .unwrap_or_else(|| "-".into())
    };
    let mut summary_md =
        crate::report::github::render::job_summary(&name, &outcome, &Links::default(), None);
    summary_md.push('\n');
    summary_md.push_str(&summary_section(
        &measured,
        &command(&a_side),
        &command(&b_side),
        ab.order.as_str(),
    ));
    let files = run::write_outputs(&args.out, &results, verdict.as_ref(), &summary_md)
        .context("writing the results")?;
    if let Some(a) = &a_side {
        let path = crate::run::ab::side_results_path(&args.out, AbSide::A);
        let body = serde_json::to_string_pretty(a).context("serializing the A results")?;
        crate::baseline::write_file_atomic(&path, body.as_bytes())
            .with_context(|| format!("cannot write {}", path.display()))?;
    }

    // 5. Print.
    outln!("{}", crate::report::console::render_matrix(&results));
    if let Some(v) = &verdict {
        outln!("{}", crate::report::verdict_table::text(v));
    }
    for b in &measured.boots {
        errln!(
            "boot {:>2}: engine {} pair {} · {} · {}",
            b.index + 1,
            b.side.as_str().to_uppercase(),
            b.pair + 1,
            b.boot_s
                .map_or("never ready".into(), |s| format!("ready after {s:.1}s")),
            if b.group_gone {
                "torn down (no process left)"
            } else {
                "PROCESSES LEFT after teardown"
            }
        );
    }
    errln!(
        "results: B {} · A {} · summary: {}{} · {:.0} s for {} boots",
        files.results.display(),
        crate::run::ab::side_results_path(&args.out, AbSide::A).display(),
        files.summary.display(),
        files
            .verdict
            .as_ref()
            .map_or(String::new(), |v| format!(" · verdict: {}", v.display())),
        measured.elapsed_s,
        measured.boots.len()
    );

    // 6. Report (never changes the exit code).
    if let Some(r) = reporter.as_mut() {
        let input = PublishInput {
            results: &results,
            verdict: verdict.as_ref(),
            history: &measured.a,
            config_path: (config.path != crate::config::EMBEDDED_NAME)
                .then(|| Path::new(&config.path)),
            matrix_line: Some(suite.line as u32),
            artifact_url: None,
            failure: failure.clone(),
        };
        let out = r.publish(&name, &input).await;
        out.print(in_actions());
    }

    // 7. The verdict.
    let code = run::exit_code(
        failure.is_some(),
        verdict.as_ref(),
        config.thresholds.fail_on,
    );
    match (&failure, &verdict) {
        (Some(f), _) => errln!("error: {f}"),
        (None, Some(v)) => errln!("verdict: {} — {}", v.gate.as_str(), v.headline),
        (None, None) => errln!("verdict: none"),
    }
    Ok(code)
}
