//! `infergate run`: parse the arguments, run the gate pipeline ([`infergate_gate::run::gate`]) and print
//! what it returns.
//!
//! Exit codes: 0 pass (also: no baseline yet, insufficient unless `fail_on = "insufficient"`),
//! 1 regression, 2 usage/config error (nothing was booted), 3 engine or measurement failure,
//! including a run cancelled by SIGINT/SIGTERM (partial results are still written).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::Context;
use tokio_util::sync::CancellationToken;

use infergate_config::config::GateConfig;
use infergate_gate::run::gate::{BaselineUpdate, GateAbort, GatePlan, GateRun, ProgressSink};
use infergate_gate::run::{Design, GateRequest};
use infergate_io::untrusted_text::console as inert;
use infergate_report::report::console::{
    error_line, render_matrix, render_progress, telemetry_line, wrap,
};
use infergate_schema::answer;
use infergate_schema::exit::{GateExit, usage};

/// Arguments of `infergate run`.
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// Gate config (default: ./infergate.toml, or the embedded default when there is none).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Suite to run (default: `pr` if the config has one, else its first suite).
    #[arg(long)]
    pub suite: Option<String>,
    /// Output directory for results.json, verdict.json, summary.md and engine.log.
    #[arg(long, default_value = "infergate-results", value_name = "DIR", value_parser = super::output_dir)]
    pub out: PathBuf,
    /// Baseline store directory (overrides `[baseline] dir`).
    #[arg(long, value_name = "DIR")]
    pub baseline_dir: Option<PathBuf>,
    /// Add this run to the baseline store when it is complete (e.g. on pushes to main).
    #[arg(long)]
    pub update_baseline: bool,
    /// Report to GitHub (check run, PR comment, job summary) even outside GitHub Actions.
    #[arg(long)]
    pub github: bool,
    /// Extra argument appended to the engine command (repeatable).
    #[arg(long = "engine-arg", value_name = "ARG", allow_hyphen_values = true)]
    pub engine_args: Vec<String>,
    /// Label recorded in the results, KEY=VALUE (repeatable), e.g. --label sha=abc123.
    #[arg(long = "label", value_name = "KEY=VALUE")]
    pub labels: Vec<String>,
    #[command(flatten)]
    /// What fails the gate (overrides the config's `fail_on`).
    pub fail_on: super::FailOnArg,
}

/// The config to use: `--config`, else `./infergate.toml`, else the embedded default.
pub(crate) fn load_config(path: Option<&Path>) -> anyhow::Result<GateConfig> {
    let local = Path::new("infergate.toml");
    match path {
        Some(p) => GateConfig::load(p),
        None if local.exists() => GateConfig::load(local),
        None => {
            errln!(
                "notice: no infergate.toml here and no --config: using the embedded default (simulated engine)"
            );
            GateConfig::embedded_default()
        }
    }
    .map_err(|e| usage(e.to_string()))
}

/// The config with `--fail-on` in place of its `[thresholds] fail_on`, so the gate's one
/// policy ([`GatePlan::policy`]) follows the flag when given.
pub(crate) fn with_fail_on(mut config: GateConfig, flag: super::FailOnArg) -> GateConfig {
    config.thresholds.fail_on =
        infergate_schema::policy::GatePolicy::chosen(flag.fail_on, Some(config.thresholds.fail_on))
            .fail_on;
    config
}

pub(crate) fn parse_labels(labels: &[String]) -> anyhow::Result<BTreeMap<String, String>> {
    labels
        .iter()
        .map(|l| {
            l.split_once('=')
                .filter(|(k, _)| !k.trim().is_empty())
                .map(|(k, v)| (k.trim().to_string(), v.to_string()))
                .ok_or_else(|| {
                    usage(format!(
                        "--label `{l}` is not KEY=VALUE (e.g. --label sha=abc123)"
                    ))
                })
        })
        .collect()
}

/// Cancels `cancel` on SIGINT or SIGTERM (the runner cancelling the job).
pub(crate) fn install_signal_handlers(cancel: CancellationToken) -> anyhow::Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).context("cannot install the SIGTERM handler")?;
    let mut int = signal(SignalKind::interrupt()).context("cannot install the SIGINT handler")?;
    tokio::spawn(async move {
        loop {
            let name = tokio::select! {
                _ = term.recv() => "SIGTERM",
                _ = int.recv() => "SIGINT",
            };
            // Cancel first: a broken stderr must not lose the cancel.
            let first = !cancel.is_cancelled();
            cancel.cancel();
            if first {
                use std::io::Write;
                let _ = writeln!(
                    std::io::stderr(),
                    "{name} received: stopping the measurement and the engine, writing partial results"
                );
            }
        }
    });
    Ok(())
}

/// Runs `infergate run`.
pub async fn execute(args: RunArgs) -> anyhow::Result<GateExit> {
    // Before any engine boots: the paths of the outputs, store and config leave the gate's
    // /proc entries (see docs/security.md).
    infergate_engine::engine::conceal_gate();
    let config = with_fail_on(load_config(args.config.as_deref())?, args.fail_on);
    let request = GateRequest {
        github: infergate_gate::run::github_wanted(
            args.github,
            config.report.github,
            super::in_actions(),
        ),
        suite: args.suite,
        design: Design::Baseline {
            update_baseline: args.update_baseline,
        },
        out: args.out,
        baseline_dir: args.baseline_dir,
        engine_args: args.engine_args,
        labels: parse_labels(&args.labels)?,
        config,
    };
    let plan = GatePlan::new(request).map_err(|e| usage(e.to_string()))?;
    let cancel = CancellationToken::new();
    install_signal_handlers(cancel.clone())?;
    let suite = &plan.suite;
    let start = format!(
        "infergate run: config {} · suite `{}` ({} cells: C {:?} x contexts {:?}) · results in {}",
        plan.config.path,
        suite.name,
        suite.cells(),
        suite.concurrency,
        suite
            .contexts
            .iter()
            .map(|c| infergate_schema::results::context_label(*c))
            .collect::<Vec<_>>(),
        plan.out.display()
    );
    errln!("{}", wrap(&start, 2));
    let steps = answer::StepContext {
        config: answer::ConfigArg::named(
            &plan.config.path,
            infergate_config::config::EMBEDDED_NAME,
        ),
        insufficient_blocks: Some(plan.policy().fail_on.insufficient),
        results_file: Some(plan.out.join("results.json").display().to_string()),
    };
    let run = plan.run(&progress, cancel).await.map_err(aborted)?;
    print_run(&run, &steps);
    Ok(run.ending.exit)
}

/// Prints what reporting said before the gate stopped, and makes its error the command's.
pub(crate) fn aborted(abort: GateAbort) -> anyhow::Error {
    print_reporting(&abort.reporting);
    anyhow::Error::new(abort.error)
}

/// The progress of one boot on stderr (cells x repetitions).
pub(crate) fn progress(cells: u64) -> ProgressSink {
    let (events, rx) = tokio::sync::mpsc::unbounded_channel();
    let done = tokio::spawn(render_progress(rx, cells));
    ProgressSink { events, done }
}

/// What GitHub reporting said, as workflow commands inside Actions.
pub(crate) fn print_reporting(reporting: &[infergate_report::report::github::PublishOutcome]) {
    for r in reporting {
        r.print(super::in_actions());
    }
}

/// The verdict table, then the matrix, on stdout: the answer comes first (and the last line,
/// [`print_verdict`], says it again); `steps` gives the next steps their commands.
pub(crate) fn print_tables(run: &GateRun, steps: &answer::StepContext) {
    // A gate that failed before any cell was measured (an engine that never started) has no
    // matrix to show: its error, printed last, says what happened, once.
    let measured = run.results.cells.iter().any(|c| c.has_window());
    if run.failure.is_some() && !measured {
        return;
    }
    if let Some(v) = &run.verdict {
        outln!(
            "{}",
            infergate_report::report::verdict_table::text_with(v, steps)
        );
    }
    // The verdict above is over both boots of a confirmed gate; the figures below are the
    // first's.
    let heading = match &run.confirmation {
        Some(c) => Some(format!(
            "Measured, first boot (the verdict above is over both; the second boot's figures: {}):",
            c.results.display()
        )),
        None => run
            .verdict
            .as_ref()
            .map(|_| "Measured (this run):".to_string()),
    };
    if let Some(h) = heading {
        outln!("{}", wrap(&h, 2));
    }
    outln!("{}", render_matrix(&run.results));
}

/// The last line: the error, or the verdict and the answer in words (the verdict table's first
/// line: the console begins and ends with it), wrapped at the console's width.
pub(crate) fn print_verdict(run: &GateRun, no_verdict: &str) {
    let line = match (&run.failure, &run.verdict) {
        (Some(f), _) => {
            errln!("{}", error_line(&f.to_string()));
            return;
        }
        // The answer, then what fail-on made of it where the word alone would mislead.
        (None, Some(v)) => format!(
            "verdict: {} — {}{}",
            answer::gate_word(v.gate).1,
            inert(&answer::first_line(v)),
            answer::policy_note(v.gate, &run.ending)
                .map(|note| format!("; {note}"))
                .unwrap_or_default()
        ),
        (None, None) => format!("verdict: {no_verdict}"),
    };
    errln!("{}", wrap(&line, 2));
}

/// Everything `run` prints after the gate.
fn print_run(run: &GateRun, steps: &answer::StepContext) {
    for w in &run.warnings {
        super::say("warning", w);
    }
    if let Some(a) = &run.adaptive {
        errln!(
            "adaptive: {} on {}, {:.1} s extra; stopped: {}",
            answer::plural(a.rounds, "extra round"),
            answer::plural(a.remeasured, "leaning cell"),
            a.extra_s,
            a.stop_reason.map_or_else(String::new, |s| s.to_string())
        );
    }
    print_tables(run, steps);
    for n in &run.notices {
        super::say("notice", n);
    }
    if let Some(line) = run.results.telemetry.as_ref().and_then(telemetry_line) {
        errln!("{line}");
    }
    // No engine log when the gate stopped before booting one (a store it cannot read).
    let files = format!(
        "results: {}{} · summary: {}{}",
        run.files.results.display(),
        run.files
            .verdict
            .as_ref()
            .map_or(String::new(), |v| format!(" · verdict: {}", v.display())),
        run.files.summary.display(),
        if run.engine_log.exists() {
            format!(" · engine log: {}", run.engine_log.display())
        } else {
            String::new()
        }
    );
    errln!("{}", wrap(&files, 2));
    if let Some(c) = &run.confirmation {
        let files = format!(
            "confirmation boot: results {} · engine log: {}",
            c.results.display(),
            c.engine_log.display()
        );
        errln!("{}", wrap(&files, 2));
    }
    for b in &run.baseline {
        let line = match b {
            BaselineUpdate::Added(path) => format!("baseline: run added as {}", path.display()),
            BaselineUpdate::NotUpdated(why) => format!("baseline: not updated: {}", inert(why)),
        };
        errln!("{}", wrap(&line, 2));
    }
    print_reporting(&run.reporting);
    print_verdict(run, "no baseline — results recorded, the gate passes");
}
