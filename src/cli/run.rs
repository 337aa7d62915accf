//! `infergate run`: validate the config → boot the engine → measure the suite → compare with
//! the baseline → write results → print and report → tear down.
//!
//! Exit codes: 0 pass (also: no baseline yet, inconclusive unless `fail_on = "inconclusive"`),
//! 1 regression, 2 usage/config error (nothing was booted), 3 engine or measurement failure,
//! including a run cancelled by SIGINT/SIGTERM (partial results are still written).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use tokio_util::sync::CancellationToken;

use crate::config::{ConfigError, GateConfig, GithubMode};
use crate::exit::{GateExit, UsageError, usage};
use crate::report::github::render::{Conclusion, Links, Outcome};
use crate::report::github::{GithubReporter, PublishInput, check_name};
use crate::results::RunResults;
use crate::run::{self, MeasureRequest, RunFailure};
use crate::telemetry::NvmlSampler;

/// Arguments of `infergate run`.
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// Gate config (default: ./infergate.toml, or the embedded default when there is none).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Suite to run (default: `pr` if the config has one, else its first suite).
    #[arg(long)]
    pub suite: Option<String>,
    /// Output directory for results.json, verdict.json, summary.md and engine.log.
    #[arg(long, default_value = "infergate-results")]
    pub out: PathBuf,
    /// Baseline store directory (overrides `[baseline] dir`).
    #[arg(long)]
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
}

pub(crate) fn config_error(e: ConfigError) -> anyhow::Error {
    anyhow::Error::new(UsageError(e.to_string()))
}

/// The config to use: `--config`, else `./infergate.toml`, else the embedded default.
pub fn load_config(path: Option<&Path>) -> anyhow::Result<GateConfig> {
    match path {
        Some(p) => GateConfig::load(p).map_err(config_error),
        None => {
            let local = Path::new("infergate.toml");
            if local.exists() {
                GateConfig::load(local).map_err(config_error)
            } else {
                errln!(
                    "notice: no infergate.toml here and no --config: using the embedded default (simulated engine)"
                );
                GateConfig::embedded_default().map_err(config_error)
            }
        }
    }
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
            if !cancel.is_cancelled() {
                errln!(
                    "{name} received: stopping the measurement and the engine, writing partial results"
                );
            }
            cancel.cancel();
        }
    });
    Ok(())
}

/// Runs `infergate run`.
pub async fn execute(args: RunArgs) -> anyhow::Result<GateExit> {
    // 1. Validate everything before anything boots.
    let config = load_config(args.config.as_deref())?;
    let suite = config
        .suite(args.suite.as_deref())
        .map_err(config_error)?
        .clone();
    let labels = parse_labels(&args.labels)?;
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

    let log_path = match &config.engine.log_file {
        Some(p) if p.is_absolute() => p.clone(),
        Some(p) => config.base_dir.join(p),
        None => args.out.join("engine.log"),
    };
    if log_path.exists() {
        // One log per run: an old log's tail must not be shown as this engine's.
        let _ = std::fs::remove_file(&log_path);
    }

    let github_on = args.github
        || match config.report.github {
            GithubMode::Always => true,
            GithubMode::Never => false,
            GithubMode::Auto => super::in_actions(),
        };
    let mut reporter = github_on.then(GithubReporter::from_env);
    if let Some(r) = reporter.as_mut() {
        r.set_results_path(args.out.join("results.json"));
        r.set_summary_path(args.out.join("summary.md"));
        r.set_fail_on_inconclusive(
            config.thresholds.fail_on == crate::config::FailOn::Inconclusive,
        );
    }
    // The check name is known up front when engine and model are configured; else it is
    // created complete at the end.
    let predicted_check = match (&config.engine.name, &config.model) {
        (Some(engine), Some(model)) => {
            let key = crate::results::ProfileKey::derive(
                hardware.clone(),
                engine,
                model,
                &suite.matrix_spec(model),
            );
            Some(check_name(&key.key, &suite.name))
        }
        _ => None,
    };
    if let (Some(r), Some(name)) = (reporter.as_mut(), &predicted_check) {
        let out = r.start_check(name).await;
        out.print(super::in_actions());
    }

    errln!(
        "infergate run: config {} · suite `{}` ({} cells: C {:?} x contexts {:?}) · results in {}",
        config.path,
        suite.name,
        suite.cells(),
        suite.concurrency,
        suite
            .contexts
            .iter()
            .map(|c| crate::results::context_label(*c))
            .collect::<Vec<_>>(),
        args.out.display()
    );

    // 2. Boot, measure, tear down.
    let (tx, printer) = progress_printer(&suite);
    let baseline_dir = args
        .baseline_dir
        .clone()
        .unwrap_or_else(|| config.baseline.dir.clone());
    // The confirmation boot splits the matrix test's alpha: the first boot (and its adaptive
    // looks) test with the first stage's rule.
    let rule = config.thresholds.rule.clone();
    let confirm = (config.confirm.enabled && config.confirm.plan.applies(&rule))
        .then(|| config.confirm.plan.clone());
    let first_rule = confirm
        .as_ref()
        .map_or_else(|| rule.clone(), |p| p.first_rule(&rule));
    let adaptive = config
        .adaptive
        .enabled
        .then(|| run::adaptive::AdaptiveRequest {
            config: config.adaptive.clone(),
            rule: first_rule.clone(),
            store_dir: baseline_dir.clone(),
        });
    let req = MeasureRequest {
        engine: &config.engine,
        model: config.model.as_deref(),
        suite: &suite,
        hardware,
        telemetry: telemetry.map(|s: Arc<NvmlSampler>| s),
        engine_args: &args.engine_args,
        log_path: log_path.clone(),
        log_tail_lines: config.report.log_tail_lines,
        labels,
        adaptive,
    };
    let confirm_req = req.clone();
    let mut measured = run::boot_and_measure(req, tx, cancel.clone()).await;
    let _ = printer.await;
    if let Some(stop) = &measured.stop
        && !stop.group_gone
    {
        errln!("warning: some engine processes survived teardown (SIGKILL sent to the group)");
    }
    let adaptive = measured.adaptive.take();
    let mut results = measured.results;
    let mut failure = measured.failure.as_ref().map(RunFailure::message);
    if let Some(a) = &adaptive
        && a.rounds > 0
    {
        errln!(
            "adaptive: {} extra round(s) on {} inconclusive cell(s), {:.1} s extra; stopped: {}",
            a.rounds,
            a.remeasured.len(),
            a.extra_s,
            a.stop_reason
        );
    }

    // 3. Compare (already done, with alpha spending, when cells were re-measured adaptively).
    let mut decision = if failure.is_none() {
        let compared = match adaptive {
            Some(a) => a.decision,
            None => run::decide(&results, &baseline_dir, &first_rule),
        };
        match compared {
            Ok(d) => Some(d),
            Err(e) => {
                failure = Some(format!("comparison with the baseline failed: {e}"));
                None
            }
        }
    } else {
        None
    };

    // 3b. The confirmation boot, when the first boot's matrix-wide change leans towards a
    // regression without proving one.
    let mut confirmation = None;
    if let (Some(plan), None, Some(first)) = (
        &confirm,
        &failure,
        decision.as_ref().and_then(|d| d.verdict.as_ref()),
    ) && plan.wants_confirmation(&rule, first)
        && !cancel.is_cancelled()
    {
        let first = first.clone();
        let (tx, printer) = progress_printer(&suite);
        let mut req = confirm_req;
        req.log_path = run::confirm::confirm_log_path(&log_path);
        let outcome = run::confirm::confirm_boot(
            &mut results,
            &first,
            run::confirm::ConfirmRequest {
                plan,
                rule: &rule,
                store_dir: &baseline_dir,
                measure: req,
            },
            tx,
            cancel.clone(),
        )
        .await;
        let _ = printer.await;
        if let Some(stop) = &outcome.measured.stop
            && !stop.group_gone
        {
            errln!(
                "warning: some engine processes of the confirmation boot survived teardown (SIGKILL sent to the group)"
            );
        }
        match &outcome.decision {
            None => {
                failure = Some(format!(
                    "the confirmation boot failed: {}",
                    outcome
                        .measured
                        .failure
                        .as_ref()
                        .map_or_else(|| "no reason given".into(), RunFailure::message)
                ));
            }
            Some(Err(e)) => {
                failure = Some(format!(
                    "comparison of both boots with the baseline failed: {e}"
                ));
            }
            Some(Ok(d)) => decision = Some(d.clone()),
        }
        confirmation = Some(outcome);
    }
    let verdict = decision.as_ref().and_then(|d| d.verdict.as_ref());
    let history: &[RunResults] = decision.as_ref().map_or(&[], |d| d.history.as_slice());

    // 4. Write the outputs (also for failed and cancelled runs: partial results).
    let name = check_name(&results.profile.key, &suite.name);
    let outcome = Outcome {
        results: &results,
        verdict,
        failure: failure.as_deref(),
        fail_on_inconclusive: config.thresholds.fail_on == crate::config::FailOn::Inconclusive,
    };
    let chart = crate::report::mermaid::throughput_chart(history, &results, verdict);
    let summary_md = crate::report::github::render::job_summary(
        &name,
        &outcome,
        &Links::default(),
        chart.as_deref(),
    );

    let files = match run::write_outputs(&args.out, &results, verdict, &summary_md)
        .context("writing the results")
    {
        Ok(files) => files,
        Err(err) => {
            close_open_checks(&mut reporter, &err).await;
            return Err(err);
        }
    };

    if let Some(c) = &confirmation {
        let path = args.out.join(run::confirm::CONFIRM_RESULTS);
        let written = serde_json::to_string_pretty(&c.measured.results)
            .map_err(std::io::Error::other)
            .and_then(|body| crate::baseline::write_file_atomic(&path, body.as_bytes()))
            .with_context(|| format!("writing {}", path.display()));
        if let Err(err) = written {
            close_open_checks(&mut reporter, &err).await;
            return Err(err);
        }
    }

    // 5. Print.
    outln!("{}", crate::report::console::render_matrix(&results));
    if let Some(v) = verdict {
        outln!("{}", crate::report::verdict_table::text(v));
    }
    if let Some(d) = &decision {
        for n in &d.notices {
            errln!("notice: {n}");
        }
    }
    if let Some(t) = &results.telemetry
        && t.status == "available"
    {
        errln!(
            "telemetry: {} · energy {} · {} J/token · avg power {} W",
            t.devices.join(", "),
            t.energy_j.map_or("-".into(), |e| format!("{e:.0} J")),
            t.joules_per_token.map_or("-".into(), |j| format!("{j:.3}")),
            t.power_w_avg.map_or("-".into(), |p| format!("{p:.0}"))
        );
    }
    errln!(
        "results: {}{} · summary: {} · engine log: {}",
        files.results.display(),
        files
            .verdict
            .as_ref()
            .map_or(String::new(), |v| format!(" · verdict: {}", v.display())),
        files.summary.display(),
        measured.engine_log.display()
    );
    if let Some(c) = &confirmation {
        errln!(
            "confirmation boot: results {} · engine log: {}",
            args.out.join(run::confirm::CONFIRM_RESULTS).display(),
            c.measured.engine_log.display()
        );
    }

    // 6. Baseline update: every complete boot of this run (a confirmation boot is a run of
    // its own, with its own boot factor).
    if args.update_baseline {
        let mut runs = vec![&results];
        if let Some(c) = &confirmation {
            runs.push(&c.measured.results);
        }
        for run in runs {
            match run::baseline_worthy(run, failure.is_some()) {
                Ok(()) => {
                    let added = crate::baseline::BaselineStore::open(&baseline_dir)
                        .context("opening the baseline store")
                        .and_then(|store| {
                            store
                                .add(run)
                                .context("adding the run to the baseline store")
                        });
                    match added {
                        Ok(path) => errln!("baseline: run added as {}", path.display()),
                        Err(err) => {
                            close_open_checks(&mut reporter, &err).await;
                            return Err(err);
                        }
                    }
                }
                Err(why) => errln!("baseline: not updated: {why}"),
            }
        }
    }

    // 7. Report (never changes the exit code).
    if let Some(r) = reporter.as_mut() {
        let input = PublishInput {
            results: &results,
            verdict,
            history,
            config_path: (config.path != crate::config::EMBEDDED_NAME)
                .then(|| Path::new(&config.path)),
            matrix_line: Some(suite.line as u32),
            artifact_url: None,
            failure: failure.clone(),
        };
        let out = r.publish(&name, &input).await;
        out.print(super::in_actions());
        // A check started under a predicted name that turned out different (the engine
        // reported another model, say) must not stay in progress.
        let out = r
            .complete_open_checks(
                Conclusion::Neutral,
                &format!("superseded: the results are reported as `{name}`"),
            )
            .await;
        out.print(super::in_actions());
    }

    // 8. The verdict.
    let code = run::exit_code(failure.is_some(), verdict, config.thresholds.fail_on);
    match (&failure, verdict) {
        (Some(f), _) => errln!("error: {f}"),
        (None, Some(v)) => errln!("verdict: {} — {}", v.gate.as_str(), v.headline),
        (None, None) => errln!("verdict: no baseline — results recorded, the gate passes"),
    }
    Ok(code)
}

/// The event channel of one boot and the task printing its progress (cells x repetitions).
fn progress_printer(
    suite: &crate::config::SuiteConfig,
) -> (crate::bench::EventSink, tokio::task::JoinHandle<()>) {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let total = (suite.cells() * suite.repetitions.max(1) as usize) as u64;
    let printer = tokio::spawn(crate::report::console::render_progress(rx, total));
    (tx, printer)
}

/// Completes every check this run started as failed with the error, so that no check run is
/// left in progress when the gate stops on an error after starting one.
async fn close_open_checks(reporter: &mut Option<GithubReporter>, err: &anyhow::Error) {
    if let Some(r) = reporter.as_mut() {
        let out = r
            .complete_open_checks(Conclusion::Failure, &format!("infergate failed: {err:#}"))
            .await;
        out.print(super::in_actions());
    }
}
