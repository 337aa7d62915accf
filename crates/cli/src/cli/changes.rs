//! `infergate changes`: change points over a baseline store's history, without booting
//! anything; and `infergate changes-eval`: the Monte Carlo of the change-point search.

use std::path::PathBuf;

use anyhow::Context;

use crate::cli::compare::load_files;
use infergate_eval::eval::changes::{
    ChangeEvalConfig, ChangeEvalReport, export_histories, run_change_eval,
};
use infergate_io::untrusted_text::console as inert;
use infergate_model::stats::changepoint::{ChangeSettings, analyse, default_metrics};
use infergate_report::report::changes::GroupChanges;
use infergate_report::report::console::{fitted_table, wrap};
use infergate_report::report::github::{GithubReporter, PublishOutcome};
use infergate_schema::exit::{GateExit, usage};
use infergate_schema::results::RunResults;
use infergate_schema::verdict::Metric;
use infergate_store::baseline::{ADHOC_SUITE, BaselineStore, component};

/// Output format of `changes`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ChangesFormat {
    /// Terminal tables, one per series with a change point.
    Text,
    /// GitHub-flavoured Markdown (what the nightly issue carries).
    Md,
    /// Machine-readable JSON: every group, series and change point.
    Json,
    /// The self-contained trend report (one HTML file).
    Html,
}

/// The change-point search's settings a user may set (`changes` and `changes-eval` alike);
/// unset ones keep [`ChangeSettings::default`].
#[derive(Debug, clap::Args)]
pub struct ChangeSettingsArgs {
    /// Level of each series' permutation test (false change points per series per analysis).
    #[arg(long)]
    pub alpha: Option<f64>,
    /// Smallest relative change reported.
    #[arg(long)]
    pub min_effect: Option<f64>,
    /// Smallest z of a change against its estimate's noise (run noise plus the runner's drift).
    #[arg(long)]
    pub min_z: Option<f64>,
    /// SD of the runner's random-walk drift per run (relative, e.g. 0.001 = 0.1%/night).
    #[arg(long)]
    pub drift_per_run: Option<f64>,
    /// Threshold of the creep test (a decline since the last change with a slope z at or below
    /// minus this is a creep; 0 turns it off).
    #[arg(long)]
    pub creep_z: Option<f64>,
}

impl ChangeSettingsArgs {
    /// Sets the settings given on the command line.
    fn apply(&self, s: &mut ChangeSettings) {
        s.alpha = self.alpha.unwrap_or(s.alpha);
        s.min_effect = self.min_effect.unwrap_or(s.min_effect);
        s.min_z = self.min_z.unwrap_or(s.min_z);
        s.drift_per_run = self.drift_per_run.unwrap_or(s.drift_per_run);
        s.creep_z = self.creep_z.unwrap_or(s.creep_z);
    }
}

/// Arguments of `infergate changes`.
#[derive(Debug, clap::Args)]
pub struct ChangesArgs {
    /// The baseline store directory.
    #[arg(long, alias = "dir", default_value = "baselines", value_name = "DIR")]
    pub baseline_dir: PathBuf,
    /// Profile key (default: every profile in the store).
    #[arg(long)]
    pub profile: Option<String>,
    /// Suite (default: every suite of the profile).
    #[arg(long)]
    pub suite: Option<String>,
    /// Output format: `text`, `md`, `json`, or `html` (the self-contained trend report).
    #[arg(long, value_enum, default_value_t = ChangesFormat::Text)]
    pub format: ChangesFormat,
    /// Write the output to this file instead of stdout.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// A results file appended to its group's history as the newest run (highlighted).
    #[arg(long, value_name = "RESULTS")]
    pub candidate: Option<PathBuf>,
    /// A metric whose series to search (repeatable; default: what the gate gates by default,
    /// `aggregate_tps`, `prefill_tps`, `burst_tps`, `burst_ttft_p90` and `itl_p99`). A tail's
    /// night the gate's probe read the host late on is left out of its series.
    #[arg(long = "metric", value_name = "METRIC", value_parser = super::parse_metric)]
    pub metrics: Vec<Metric>,
    /// The change-point search's settings.
    #[command(flatten)]
    pub settings: ChangeSettingsArgs,
    /// Seed of the permutation tests.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Report the change points as GitHub issues: one per new change, updated on later runs,
    /// closed when accepted or no longer detected (needs a token with `issues: write` and
    /// `GITHUB_REPOSITORY`). Exit 3 when the issues could not be reconciled.
    #[arg(long)]
    pub alert: bool,
}

/// Runs `infergate changes`.
pub(crate) async fn execute(args: ChangesArgs) -> anyhow::Result<GateExit> {
    let mut settings = ChangeSettings::default();
    args.settings.apply(&mut settings);
    settings.seed = args.seed.unwrap_or(settings.seed);
    settings.validate().map_err(|e| usage(e.to_string()))?;
    let metrics = if args.metrics.is_empty() {
        default_metrics()
    } else {
        args.metrics.clone()
    };
    let store =
        BaselineStore::open_existing(&args.baseline_dir).map_err(|e| usage(e.to_string()))?;
    let candidate = args.candidate.as_deref().map(load_candidate).transpose()?;
    let groups =
        super::baseline::matching_groups(&store, args.profile.as_deref(), args.suite.as_deref())?;
    let store_err =
        |e| anyhow::Error::new(e).context(format!("reading {}", store.root().display()));
    let mut out = Vec::new();
    for (key, suite) in groups {
        let mut loaded = store.load(&key, Some(&suite)).map_err(store_err)?;
        for (dup, counted) in &loaded.duplicates {
            // Named, never silent: a store whose runs share ids is a history with holes.
            errln!(
                "warning: {} repeats the run id (or the content) of {}: only the first is in the history; give every run its own id (remove or re-record the file)",
                dup.display(),
                counted.display()
            );
        }
        for (path, why) in &loaded.skipped {
            errln!("warning: skipped {}: {}", path.display(), inert(why));
        }
        let accepts = store.accepted(&key, Some(&suite)).map_err(store_err)?;
        let by_metric: Vec<(String, Vec<Metric>)> = (accepts.iter())
            .map(|a| {
                let ms = if a.whole_group() {
                    Vec::new()
                } else {
                    a.metrics.clone()
                };
                (a.since_run_id.clone(), ms)
            })
            .collect();
        let accepted_metrics = (by_metric.iter())
            .filter(|(_, ms)| !ms.is_empty())
            .cloned()
            .collect();
        let accepted: Vec<String> = accepts.into_iter().map(|a| a.since_run_id).collect();
        let mut candidate_id = None;
        if let Some(c) = &candidate
            && component(&c.profile.key) == key
            && component(c.suite.as_deref().unwrap_or(ADHOC_SUITE)) == suite
        {
            loaded.runs.retain(|r| r.run_id != c.run_id);
            loaded.runs.push(c.clone());
            candidate_id = Some(c.run_id.clone());
        }
        let history = analyse(&loaded.runs, &metrics, &by_metric, &settings)
            .map_err(|e| usage(e.to_string()))?;
        out.push(GroupChanges {
            profile_key: key,
            suite,
            accepted,
            accepted_metrics,
            candidate: candidate_id,
            history,
        });
    }
    if let Some(c) = candidate.filter(|_| out.iter().all(|g| g.candidate.is_none())) {
        return Err(usage(format!(
            "--candidate: its profile `{}` suite `{}` is not among the analysed groups",
            c.profile.key,
            c.suite.as_deref().unwrap_or(ADHOC_SUITE)
        )));
    }
    let text = match args.format {
        ChangesFormat::Text => infergate_report::report::changes::text(&out),
        ChangesFormat::Md => infergate_report::report::changes::markdown(&out),
        ChangesFormat::Json => {
            super::pretty_json(&serde_json::json!({ "groups": out }), "the change points")?
        }
        ChangesFormat::Html => infergate_report::report::trend_html::render(&out),
    };
    // A file is as inert as the console (the store's run ids, commits and notes are data).
    super::emit(&text, args.out.as_deref())?;
    if args.alert {
        return alert(&out).await;
    }
    Ok(GateExit::Pass)
}

/// The one finished run `--candidate` names, to place on the history.
fn load_candidate(p: &std::path::Path) -> anyhow::Result<RunResults> {
    let mut runs = load_files(&[p.to_path_buf()])?;
    if runs.len() != 1 {
        return Err(usage(format!(
            "--candidate {}: expected one run, found {}",
            p.display(),
            runs.len()
        )));
    }
    if runs[0].status == infergate_schema::results::RunStatus::InProgress {
        // Fail closed: the cells of a killed gate are not a night's measurement.
        anyhow::bail!(
            "--candidate {}: run `{}` is `in_progress`: the gate that wrote it was stopped before it finished, so it is not placed on the history",
            p.display(),
            inert(&runs[0].run_id)
        );
    }
    Ok(runs.remove(0))
}

/// Files the change points of `groups` as GitHub issues and says what was done on stderr.
async fn alert(groups: &[GroupChanges]) -> anyhow::Result<GateExit> {
    let mut reporter = GithubReporter::from_env();
    let (done, outcome) = reporter.publish_change_alerts(groups).await;
    for d in &done {
        errln!("{}", inert(&d.line()));
    }
    if done.is_empty() && outcome.errors.is_empty() {
        errln!("alert: no change point to report, no issue to update");
    }
    let in_actions = reporter.context().in_actions;
    PublishOutcome {
        notices: outcome.notices.clone(),
        errors: Vec::new(),
    }
    .print(in_actions);
    for e in &outcome.errors {
        if in_actions {
            infergate_io::stdio::write_workflow_command(
                &infergate_report::report::actions::command(
                    "error",
                    &[("title", "infergate alerts")],
                    e,
                ),
                true,
            );
        } else {
            errln!(
                "{}",
                infergate_report::report::console::error_line(&format!("alert: {e}"))
            );
        }
    }
    // Alerts that could not be filed are a failure of the nightly, not a silent pass.
    Ok(if outcome.errors.is_empty() {
        GateExit::Pass
    } else {
        GateExit::Failure
    })
}

/// Output format of `changes-eval`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ChangesEvalFormat {
    /// A table per scenario.
    Text,
    /// Machine-readable JSON.
    Json,
}

/// Arguments of `infergate changes-eval`.
#[derive(Debug, clap::Args)]
pub struct ChangesEvalArgs {
    /// Simulated nightly histories per scenario.
    #[arg(long, default_value_t = 200)]
    pub trials: usize,
    /// Seed of the histories (same seed, same figures).
    #[arg(long, default_value_t = 20_261_117)]
    pub seed: u64,
    /// Nights of the stable history.
    #[arg(long, default_value_t = 100)]
    pub nights: usize,
    /// The change-point search's settings.
    #[command(flatten)]
    pub settings: ChangeSettingsArgs,
    /// Output format: `text` (tables) or `json`.
    #[arg(long, value_enum, default_value_t = ChangesEvalFormat::Text)]
    pub format: ChangesEvalFormat,
    /// Instead of the tables, write the same histories (matrix and per-cell log series) and
    /// infergate's nightly alerts on them to DIR, one JSON file per scenario, for the peer
    /// comparators (`scripts/eval/changes_peers.py`).
    #[arg(long, value_name = "DIR")]
    pub export_histories: Option<PathBuf>,
}

/// Runs `infergate changes-eval`.
pub(crate) async fn execute_eval(args: ChangesEvalArgs) -> anyhow::Result<GateExit> {
    if args.trials == 0 || args.nights < 20 || args.nights > 1000 {
        return Err(usage(
            "--trials must be at least 1 and --nights between 20 and 1000",
        ));
    }
    let mut cfg = ChangeEvalConfig {
        trials: args.trials,
        seed: args.seed,
        stable_nights: args.nights,
        ..ChangeEvalConfig::default()
    };
    args.settings.apply(&mut cfg.settings);
    cfg.settings.validate().map_err(|e| usage(e.to_string()))?;
    if let Some(dir) = args.export_histories {
        let scenarios = tokio::task::spawn_blocking(move || export_histories(&cfg))
            .await
            .context("changes-eval export worker")??;
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        for s in &scenarios {
            let file = dir.join(format!(
                "{}.json",
                s.scenario.replace('/', "_per_").replace('%', "pct")
            ));
            infergate_io::fsio::write_durable(&file, serde_json::to_string(s)?.as_bytes())
                .with_context(|| format!("writing {}", file.display()))?;
            outln!("{}: {} histories", file.display(), s.histories.len());
        }
        return Ok(GateExit::Pass);
    }
    let report = tokio::task::spawn_blocking(move || run_change_eval(&cfg))
        .await
        .context("changes-eval worker")??;
    match args.format {
        ChangesEvalFormat::Json => outln!("{}", serde_json::to_string_pretty(&report)?),
        ChangesEvalFormat::Text => out!("{}", render_eval(&report)),
    }
    Ok(GateExit::Pass)
}

/// A figure over the trials that found something, or `—` over none: the figures of an empty
/// set (`NaN` medians, `-0.0` means) are not zeros.
fn over_found(found: f64, value: impl FnOnce() -> String) -> String {
    if found > 0.0 { value() } else { "—".into() }
}

/// `median / p90 / mean` over the trials that found something ([`over_found`]).
fn spread(found: f64, median: f64, p90: f64, mean: f64) -> String {
    over_found(found, || format!("{median:.0} / {p90:.0} / {mean:.1}"))
}

/// Scenario names (`creep_-0.3%/night`) and `median / p90 / mean` triples are not broken
/// across lines; headers wrap instead.
fn keep_whole(t: &mut comfy_table::Table, columns: &[usize]) {
    for &i in columns {
        if let Some(c) = t.column_mut(i) {
            c.set_constraint(comfy_table::ColumnConstraint::ContentWidth);
        }
    }
}

/// The text report at 100 columns.
fn render_eval(r: &ChangeEvalReport) -> String {
    let c = &r.config;
    let mut out = wrap(
        &format!(
            "Change points, {} simulated nightly histories per scenario (seed {}), alpha {} per series per analysis, {} permutations, min segment {}, min effect {}% and z {} under the runner's drift ({}%/run), creep test z {}",
            c.trials,
            c.seed,
            c.settings.alpha,
            c.settings.permutations,
            c.settings.min_segment,
            c.settings.min_effect * 100.0,
            c.settings.min_z,
            c.settings.drift_per_run * 100.0,
            c.settings.creep_z,
        ),
        2,
    );
    out.push_str(&format!(
        "\n\nStable series ({} nights, first analysis at night {}):\n",
        c.stable_nights, c.warmup
    ));
    let mut t = fitted_table(vec![
        "series",
        "false alerts / 100 nights",
        "± s.e.",
        "histories with any",
    ]);
    for s in &r.stable {
        t.add_row(vec![
            format!("{:?}", s.series).to_lowercase(),
            format!("{:.2}", s.false_per_100_nights),
            format!("{:.2}", s.std_error),
            format!("{:.1}%", s.histories_with_alert * 100.0),
        ]);
    }
    out.push_str(&t.to_string());
    out.push_str(&wrap(
        &format!(
            "\n\nShifts found (watched {} nights after the onset; found early: within {} nights; delay in nights over the histories that found it):",
            c.follow, c.early
        ),
        0,
    ));
    out.push('\n');
    let mut t = fitted_table(vec![
        "scenario",
        "series",
        "found",
        "found early",
        "delay median / p90 / mean",
        "alerts after onset",
        "false alerts before / 100 nights",
    ]);
    keep_whole(&mut t, &[0, 4]);
    for s in &r.shifts {
        t.add_row(vec![
            s.scenario.clone(),
            format!("{:?}", s.series).to_lowercase(),
            format!("{:.1}%", s.detected * 100.0),
            format!("{:.1}%", s.detected_early * 100.0),
            spread(s.detected, s.delay_median, s.delay_p90, s.delay_mean),
            format!("{:.2}", s.alerts_after_onset),
            format!("{:.2}", s.false_before_per_100),
        ]);
    }
    out.push_str(&t.to_string());
    out.push_str(
        "\n\nWhere the shifts were placed (nights from the true onset, over the histories that found them;\nlatest: the alert as the last analysis of the window left it):\n",
    );
    let mut t = fitted_table(vec![
        "scenario",
        "series",
        "|error| at the alert",
        "within ±2",
        "latest |error|",
        "latest within ±2",
        "latest called a creep",
    ]);
    keep_whole(&mut t, &[0]);
    for s in &r.shifts {
        t.add_row(vec![
            s.scenario.clone(),
            format!("{:?}", s.series).to_lowercase(),
            over_found(s.detected, || format!("{:.2}", s.location_mae)),
            over_found(s.detected, || format!("{:.1}%", s.within_2 * 100.0)),
            over_found(s.detected, || format!("{:.2}", s.latest_location_mae)),
            over_found(s.detected, || format!("{:.0}%", s.latest_within_2 * 100.0)),
            over_found(s.detected, || format!("{:.0}%", s.latest_creep * 100.0)),
        ]);
    }
    format!(
        "{out}{t}{}{}{}",
        alert_intervals(r),
        location(r),
        must_show(r)
    )
}

/// Whether the interval a reader bisects holds the change's first night: the first alert from
/// the onset on, also one placed early (which "found" does not count).
fn alert_intervals(r: &ChangeEvalReport) -> String {
    let mut out = wrap(
        &format!(
            "\n\nThe first alert's {:.0}% location interval (the nights a bisection starts from) against the true onset, over the histories with an alert the change's way within {} nights, also one placed early:",
            r.config.settings.confidence * 100.0,
            r.config.follow
        ),
        0,
    );
    out.push('\n');
    let mut t = fitted_table(vec![
        "scenario",
        "series",
        "alerted",
        "holds the onset at the alert",
        "latest holds it",
        "width median at the alert / latest",
    ]);
    keep_whole(&mut t, &[0]);
    for s in &r.shifts {
        t.add_row(vec![
            s.scenario.clone(),
            format!("{:?}", s.series).to_lowercase(),
            format!("{:.1}%", s.alerted * 100.0),
            over_found(s.alerted, || format!("{:.1}%", s.interval_holds * 100.0)),
            over_found(s.alerted, || {
                format!("{:.1}%", s.latest_interval_holds * 100.0)
            }),
            over_found(s.alerted, || {
                format!(
                    "{} / {}",
                    s.interval_width_median, s.latest_interval_width_median
                )
            }),
        ]);
    }
    out.push_str(&t.to_string());
    out
}

/// How well the step's location intervals cover its night.
fn location(r: &ChangeEvalReport) -> String {
    let c = &r.config;
    let heading = wrap(
        &format!(
            "\n\nLocation intervals of the step ({:+}% at night {} of {}, analysed at the last night; the step's change point is the one nearest it within {} nights):",
            c.step * 100.0,
            c.step_at,
            c.must_show_nights,
            infergate_eval::eval::changes::STEP_NEAR
        ),
        0,
    );
    let mut t = fitted_table(vec![
        "series",
        "confidence",
        "found",
        "covers the night (of found)",
        "covers the night (of all)",
        "width runs median / p90 / mean",
        "one run pair",
    ]);
    for l in &r.location {
        t.add_row(vec![
            format!("{:?}", l.series).to_lowercase(),
            format!("{:.0}%", l.confidence * 100.0),
            format!("{:.1}%", l.found * 100.0),
            over_found(l.found, || format!("{:.1}%", l.covered_when_found * 100.0)),
            format!("{:.1}%", l.covered * 100.0),
            spread(l.found, l.width_median, l.width_p90, l.width_mean),
            over_found(l.found, || format!("{:.1}%", l.one_pair * 100.0)),
        ]);
    }
    format!("{heading}\n{t}\n")
}

/// The must-show figures, beside what an oracle that knows the shape could achieve.
fn must_show(r: &ChangeEvalReport) -> String {
    let (c, m) = (&r.config, &r.must_show);
    let lines = [
        format!(
            "Must-show, {} nights, matrix series: step at {} one alert within ±2 {:.1}%; creep at {} one alert within ±2 {:.1}%; both and nothing else {:.1}%; stable history without any alert {:.1}%",
            m.nights,
            c.step_at,
            m.step_one_alert_within_2 * 100.0,
            c.creep_at,
            m.creep_one_alert_within_2 * 100.0,
            m.both * 100.0,
            m.stable_no_alert * 100.0,
        ),
        format!(
            "Best achievable (least squares that knows it is one step then one creep, last night): step within ±2 {:.1}%, creep onset within ±2 {:.1}%, both {:.1}%",
            m.oracle_step_within_2 * 100.0,
            m.oracle_creep_within_2 * 100.0,
            m.oracle_both_within_2 * 100.0
        ),
    ];
    format!(
        "\n{}\n",
        lines.map(|l| format!("\n{}", wrap(&l, 2))).concat()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use infergate_schema::asserts::assert_contains;

    /// The evaluation is read at the console's width, and a figure over no found change is a
    /// dash, never `NaN` or `-0.00` (a −0.5% step, under `min_effect`, is never found).
    #[test]
    fn the_eval_report_fits_the_console_and_shows_no_empty_figures() {
        let mut cfg = ChangeEvalConfig {
            trials: 1,
            stable_nights: 20,
            step: -0.005,
            ..ChangeEvalConfig::default()
        };
        cfg.settings.permutations = 199;
        let text = render_eval(&run_change_eval(&cfg).unwrap());
        assert!(infergate_report::report::console::fits(&text), "{text}");
        assert!(!text.contains("NaN") && !text.contains("-0.0"), "{text}");
        // ... and the empty figures are there to be dashed: the cell series found no step.
        assert!(
            text.lines()
                .any(|l| l.starts_with("│ step_-0.5%") && l.contains("│ cell   │ 0.0%")),
            "{text}"
        );
        assert_contains(&text, "—");
        assert_contains(&text, "creep_-0.2%/night");
        assert_contains(&text, "Must-show");
    }
}
