//! `infergate ab`: paired A/B comparison of two engine builds (`[engine.a]` = base,
//! `[engine.b]` = candidate) booted alternately on one runner (A B B A A B B A …), each boot
//! measuring the suite; the pairs are compared ([`infergate_model::stats::paired`]) and the outputs,
//! exit codes and GitHub reports are those of `run` (one pipeline: [`infergate_gate::run::gate`]):
//! 0 pass (also insufficient unless `fail_on = "insufficient"`), 1 regression, 2 usage/config
//! error (nothing booted), 3 engine or measurement failure (including cancellation).

use std::path::PathBuf;

use tokio_util::sync::CancellationToken;

use crate::cli::run::{
    aborted, install_signal_handlers, load_config, parse_labels, print_reporting, print_tables,
    print_verdict, progress, with_fail_on,
};
use infergate_gate::run::gate::{GatePlan, GateRun};
use infergate_gate::run::{Design, GateRequest};
use infergate_report::report::console::wrap;
use infergate_schema::exit::{GateExit, usage};

/// Arguments of `infergate ab`.
#[derive(Debug, clap::Args)]
pub struct AbArgs {
    /// Gate config with `[engine.a]` and `[engine.b]` (default: ./infergate.toml).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Suite to run on every boot (default: `pr` if the config has one, else its first suite).
    #[arg(long)]
    pub suite: Option<String>,
    /// Output directory: results.json (B), results-a.json (A), verdict.json, summary.md, engine logs.
    #[arg(long, default_value = "infergate-results", value_name = "DIR", value_parser = super::output_dir)]
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
    #[command(flatten)]
    /// What fails the gate (overrides the config's `fail_on`).
    pub fail_on: super::FailOnArg,
}

/// Runs `infergate ab`.
pub async fn execute(args: AbArgs) -> anyhow::Result<GateExit> {
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
        design: Design::Ab { pairs: args.rounds },
        out: args.out,
        baseline_dir: None,
        engine_args: args.engine_args,
        labels: parse_labels(&args.labels)?,
        config,
    };
    let plan = GatePlan::new(request).map_err(|e| usage(e.to_string()))?;
    let cancel = CancellationToken::new();
    install_signal_handlers(cancel.clone())?;
    let schedule = plan.ab_schedule().unwrap_or_default();
    let start = format!(
        "infergate ab: config {} · suite `{}` ({} cells) · {} pairs of boots ({schedule}) · results in {}",
        plan.config.path,
        plan.suite.name,
        plan.suite.cells(),
        schedule.len() / 2,
        plan.out.display()
    );
    errln!("{}", wrap(&start, 2));
    let run = plan.run(&progress, cancel).await.map_err(aborted)?;
    print_ab(&run);
    Ok(run.ending.exit)
}

/// Everything `ab` prints after the gate.
fn print_ab(run: &GateRun) {
    print_tables(run, &infergate_schema::answer::StepContext::default());
    if let Some(ab) = &run.ab {
        for b in &ab.boots {
            errln!(
                "boot {:>2}: engine {} pair {} · {} · {}",
                b.index + 1,
                b.side.as_str().to_uppercase(),
                b.pair + 1,
                b.boot_s.map_or("never ready".into(), |s| format!(
                    "ready after {}",
                    infergate_schema::results::duration_label(s)
                )),
                if b.group_gone {
                    "torn down (no process left)"
                } else {
                    "PROCESSES LEFT after teardown"
                }
            );
        }
        let files = format!(
            "results: B {} · A {} · summary: {}{} · {:.0} s for {} boots",
            run.files.results.display(),
            ab.a_results.display(),
            run.files.summary.display(),
            run.files
                .verdict
                .as_ref()
                .map_or(String::new(), |v| format!(" · verdict: {}", v.display())),
            ab.elapsed_s,
            ab.boots.len()
        );
        errln!("{}", wrap(&files, 2));
    }
    print_reporting(&run.reporting);
    print_verdict(run, "none");
}
