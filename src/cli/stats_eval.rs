//! `infergate stats-eval`: Monte Carlo of the decision rule on synthetic matrices (false-alarm
//! rate, power, inconclusive rates), so the rule's promises are measured, not asserted.

use anyhow::Context;
use comfy_table::{Table, presets::UTF8_FULL_CONDENSED};

use crate::exit::{GateExit, usage};
use crate::stats::eval::{EvalConfig, EvalReport, NoiseSpec, ScenarioOutcome, run_eval};
use crate::stats::{ConfirmPlan, DecisionRule};

/// Output format of `stats-eval`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum EvalFormat {
    Text,
    Json,
}

/// Arguments of `infergate stats-eval`.
#[derive(Debug, clap::Args)]
pub struct StatsEvalArgs {
    /// Simulated comparisons per scenario and history length.
    #[arg(long, default_value_t = 2000)]
    pub trials: usize,
    /// Seed of the random generator (same seed, same figures).
    #[arg(long, default_value_t = 20_260_401)]
    pub seed: u64,
    /// Baseline history lengths (runs) to evaluate, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "2,5,10,20")]
    pub history: Vec<usize>,
    /// Candidate runs (repetitions) per comparison.
    #[arg(long, default_value_t = 1)]
    pub candidate_runs: usize,
    /// Evaluate one comparison only, without the confirmation boot `run` makes when the first
    /// boot's matrix-wide change looks like a regression.
    #[arg(long)]
    pub no_confirm: bool,
    /// Per-cell noise as Student t with these degrees of freedom (> 2, same SD); Gaussian
    /// when absent.
    #[arg(long)]
    pub cell_df: Option<f64>,
    /// Share of boots (baseline and candidate) that come up slow everywhere.
    #[arg(long, default_value_t = 0.0)]
    pub slow_boot_rate: f64,
    /// Relative effect of a slow boot, e.g. -0.04.
    #[arg(long, default_value_t = -0.04, allow_hyphen_values = true)]
    pub slow_boot_effect: f64,
    /// Share of runs (baseline and candidate) in which the C=12 / 128k cell is capacity-limited.
    #[arg(long, default_value_t = 0.0)]
    pub capacity_flip: f64,
    /// Linear drift of every cell over the history window, e.g. 0.03 (the candidate continues it).
    #[arg(long, default_value_t = 0.0, allow_hyphen_values = true)]
    pub drift_total: f64,
    /// A step of every cell from the middle of the history window on, e.g. 0.03.
    #[arg(long, default_value_t = 0.0, allow_hyphen_values = true)]
    pub step: f64,
    /// Output format.
    #[arg(long, value_enum, default_value_t = EvalFormat::Text)]
    pub format: EvalFormat,
    /// Decision rule to evaluate (TOML with `DecisionRule` fields); defaults otherwise.
    #[arg(long)]
    pub rule: Option<std::path::PathBuf>,
    /// Exit 1 when a target of the 20-run history is missed.
    #[arg(long)]
    pub check: bool,
}

/// Runs `infergate stats-eval`.
pub(crate) async fn execute(args: StatsEvalArgs) -> anyhow::Result<GateExit> {
    if args.trials == 0 {
        return Err(usage("--trials must be at least 1"));
    }
    if args.candidate_runs == 0 || args.candidate_runs > 100 {
        return Err(usage("--candidate-runs takes 1 to 100"));
    }
    if args.history.is_empty() || args.history.iter().any(|h| *h == 0 || *h > 1000) {
        return Err(usage(
            "--history takes run counts between 1 and 1000, e.g. --history 2,5,10,20",
        ));
    }
    let rule = match &args.rule {
        None => DecisionRule::default(),
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| usage(format!("cannot read rule file {}: {e}", path.display())))?;
            toml::from_str(&text).map_err(|e| {
                usage(format!(
                    "rule file {}: {e} (fields are those of the decision rule, e.g. alpha = 0.01)",
                    path.display()
                ))
            })?
        }
    };
    rule.validate().map_err(|e| usage(e.to_string()))?;
    let confirm = (!args.no_confirm).then(ConfirmPlan::default);
    if args.cell_df.is_some_and(|d| !(d > 2.0 && d.is_finite())) {
        return Err(usage(
            "--cell-df takes degrees of freedom above 2 (the SD must exist)",
        ));
    }
    for (name, v) in [
        ("--slow-boot-rate", args.slow_boot_rate),
        ("--capacity-flip", args.capacity_flip),
    ] {
        if !(0.0..=1.0).contains(&v) {
            return Err(usage(format!("{name} takes a share in [0, 1]")));
        }
    }
    for (name, v) in [
        ("--slow-boot-effect", args.slow_boot_effect),
        ("--drift-total", args.drift_total),
        ("--step", args.step),
    ] {
        if !(v > -0.9 && v < 9.0) {
            return Err(usage(format!(
                "{name} takes a relative change above -0.9, e.g. 0.03"
            )));
        }
    }
    let noise = NoiseSpec {
        cell_df: args.cell_df,
        slow_boot_rate: args.slow_boot_rate,
        slow_boot_effect: args.slow_boot_effect,
        capacity_flip_rate: args.capacity_flip,
        drift_total: args.drift_total,
        step: args.step,
        ..NoiseSpec::default()
    };
    let cfg = EvalConfig {
        trials: args.trials,
        seed: args.seed,
        histories: args.history.clone(),
        candidate_runs: args.candidate_runs,
        confirm,
        noise,
        rule,
    };
    let report = tokio::task::spawn_blocking(move || run_eval(&cfg))
        .await
        .context("stats-eval worker")??;
    match args.format {
        EvalFormat::Json => outln!("{}", serde_json::to_string_pretty(&report)?),
        EvalFormat::Text => out!("{}", render_text(&report)),
    }
    let missed = report.targets.iter().any(|t| !t.met);
    Ok(if args.check && missed {
        GateExit::Regression
    } else {
        GateExit::Pass
    })
}

fn pct(x: f64) -> String {
    format!("{:.1}%", 100.0 * x)
}

/// A table of one text per history (rows) and scenario (columns).
fn scenario_table(
    r: &EvalReport,
    names: &[String],
    cell: impl Fn(&ScenarioOutcome) -> String,
) -> String {
    let mut table = Table::new();
    *table.style_mut() = UTF8_FULL_CONDENSED;
    let mut header = vec!["history".to_string()];
    header.extend(names.iter().cloned());
    table.set_header(header);
    for h in &r.histories {
        let mut row = vec![format!("{} runs", h.history)];
        row.extend(h.scenarios.iter().map(&cell));
        table.add_row(row);
    }
    table.to_string()
}

/// The text tables: gate outcome per scenario and history, then inconclusive rates, targets.
pub(crate) fn render_text(r: &EvalReport) -> String {
    let mut out = format!(
        "stats-eval: {} trials, seed {}, {} cells, {} candidate run(s){}; noise: run CV {}, cell CV {}, sub-window CV {} x {}, drift {}/run, outlier {:+}% every {} runs\n",
        r.trials,
        r.seed,
        r.cells,
        r.candidate_runs,
        match &r.confirm {
            Some(_) => " + the two-boot plan of the matrix-wide test".to_string(),
            None => " (no confirmation boot)".into(),
        },
        pct(r.noise.run_cv),
        pct(r.noise.cell_cv),
        pct(r.noise.window_cv),
        r.noise.windows,
        pct(r.noise.drift_per_run),
        (100.0 * r.noise.outlier_effect).round(),
        r.noise.outlier_every
    );
    let n = &r.noise;
    out.push_str(&format!(
        "rougher runner: cell terms {}, slow boots {} at {:+}%, capacity flips {}, drift {:+}% over the window, step {:+}%\n",
        n.cell_df
            .map_or_else(|| "Gaussian".to_string(), |d| format!("Student t (df {d})")),
        pct(n.slow_boot_rate),
        (100.0 * n.slow_boot_effect).round(),
        pct(n.capacity_flip_rate),
        100.0 * n.drift_total,
        100.0 * n.step,
    ));
    let names: Vec<String> = r
        .histories
        .first()
        .map(|h| h.scenarios.iter().map(|s| s.name.clone()).collect())
        .unwrap_or_default();
    let mut gate = Table::new();
    *gate.style_mut() = UTF8_FULL_CONDENSED;
    let mut header = vec!["history".to_string()];
    header.extend(names.iter().map(|n| {
        if n == "aa" {
            "A/A false alarm".to_string()
        } else {
            format!("power {n}")
        }
    }));
    header.push("cell power single".into());
    gate.set_header(header);
    for h in &r.histories {
        let mut row = vec![format!("{} runs", h.history)];
        row.extend(h.scenarios.iter().map(|s| {
            format!(
                "{} [{:.1}, {:.1}]",
                pct(s.regression_rate),
                100.0 * s.wilson_low,
                100.0 * s.wilson_high
            )
        }));
        row.push(
            h.scenarios
                .iter()
                .find_map(|s| s.target_cell_rate)
                .map(pct)
                .unwrap_or_default(),
        );
        gate.add_row(row);
    }
    out.push_str(
        "\nGate says regression (A/A: false-alarm rate per matrix; others: power) [Wilson 95%]\n",
    );
    out.push_str(&gate.to_string());
    out.push_str("\n\nGate inconclusive / cells inconclusive / cells unchanged\n");
    out.push_str(&scenario_table(r, &names, |s| {
        format!(
            "{} / {} / {}",
            pct(s.gate_inconclusive_rate),
            pct(s.cell_inconclusive_rate),
            pct(s.cell_unchanged_rate)
        )
    }));
    out.push('\n');
    if r.confirm.is_some() {
        out.push_str(
            "\nConfirmation boots: share of gates that booted twice / mean boots per gate\n",
        );
        out.push_str(&scenario_table(r, &names, |s| {
            format!("{} / {:.2}", pct(s.confirm_rate), s.mean_boots)
        }));
        out.push('\n');
    }
    if !r.targets.is_empty() {
        out.push_str("\nTargets:\n");
        for t in &r.targets {
            out.push_str(&format!(
                "  [{}] {} ({} runs): {}\n",
                if t.met { "met" } else { "MISSED" },
                t.description,
                t.history,
                pct(t.measured)
            ));
        }
    }
    out
}
