//! `infergate stats-eval`: Monte Carlo of the gate's plan on synthetic matrices over a grid of
//! runners (false-alarm rate, pass rate, power, boots per gate), so the rule's promises are
//! measured, not asserted; beside it, the rules users know on the same trials
//! ([`infergate_eval::eval::peers`]).

use anyhow::Context;

use infergate_eval::eval::gate::{
    Condition, ConditionOutcome, EvalConfig, EvalReport, NoiseSpec, Scenario, ScenarioOutcome,
    grid, run_eval,
};
use infergate_eval::eval::latency::{LatencyEval, LatencyOutcome, latency_eval};
use infergate_eval::eval::layers::{LayerOutcome, layer_plants};
use infergate_model::stats::{DecisionRule, StatsError};
use infergate_report::report::console::{fitted_table, wrap};
use infergate_schema::exit::{GateExit, usage};

/// Output format of `stats-eval`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum EvalFormat {
    Text,
    Json,
}

/// Arguments of `infergate stats-eval`.
#[derive(Debug, clap::Args)]
pub struct StatsEvalArgs {
    /// Simulated gates per runner and scenario.
    #[arg(long, default_value_t = 2000)]
    pub trials: usize,
    /// Seed of the random generator (same seed, same figures).
    #[arg(long, default_value_t = 20_260_401)]
    pub seed: u64,
    /// Baseline history length (runs).
    #[arg(long, default_value_t = 20)]
    pub history: usize,
    /// Evaluate one look only, without the second boot `run` makes when the first boot's
    /// matrix-wide change leans worse.
    #[arg(long)]
    pub no_confirm: bool,
    /// Evaluate one runner of these settings instead of the grid (the flags below; unset ones
    /// are the Gaussian runner's).
    #[arg(long)]
    pub custom: bool,
    /// Per-cell noise as Student t with these degrees of freedom (> 2, same SD); Gaussian
    /// when absent.
    #[arg(long)]
    pub cell_df: Option<f64>,
    /// Share of boots (baseline and candidate) that come up slow everywhere.
    #[arg(long, default_value_t = 0.0)]
    pub slow_boot_rate: f64,
    /// One history run in this many (on average) is an outlier, every cell off by
    /// `--outlier-effect`; 0: none.
    #[arg(long, default_value_t = 0)]
    pub outlier_every: usize,
    /// Relative effect of an outlier history run, e.g. -0.08.
    #[arg(long, default_value_t = -0.08, allow_hyphen_values = true)]
    pub outlier_effect: f64,
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
    /// SD of a per-run factor of each context row, e.g. 0.015.
    #[arg(long, default_value_t = 0.0)]
    pub row_cv: f64,
    /// Lag-1 autocorrelation of the sub-windows within a cell, e.g. 0.6.
    #[arg(long, default_value_t = 0.0)]
    pub window_ar: f64,
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
pub async fn execute(args: StatsEvalArgs) -> anyhow::Result<GateExit> {
    if args.trials == 0 {
        return Err(usage("--trials must be at least 1"));
    }
    if args.history == 0 || args.history > 1000 {
        return Err(usage(
            "--history takes a run count between 1 and 1000, e.g. --history 20",
        ));
    }
    let rule = match &args.rule {
        None => DecisionRule::default(),
        Some(path) => {
            let text = infergate_io::fsio::read_input(path)
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
    // The flags are checked whether or not `--custom` uses them: a bad one is an error.
    let noise = custom_noise(&args)?;
    let conditions = if args.custom {
        vec![Condition {
            name: "custom".into(),
            noise,
        }]
    } else {
        grid()
    };
    let cfg = EvalConfig {
        trials: args.trials,
        seed: args.seed,
        history: args.history,
        confirm: !args.no_confirm,
        conditions,
        rule,
    };
    let custom = args.custom;
    let (report, latency, layers) = tokio::task::spawn_blocking(move || evaluate(&cfg, custom))
        .await
        .context("stats-eval worker")??;
    match args.format {
        EvalFormat::Json => {
            let mut doc = serde_json::to_value(&report)?;
            if let Some(o) = doc.as_object_mut() {
                o.insert("latency".into(), serde_json::to_value(&latency)?);
                o.insert("layers".into(), serde_json::to_value(&layers)?);
            }
            outln!("{}", serde_json::to_string_pretty(&doc)?)
        }
        EvalFormat::Text => {
            out!("{}", render_text(&report));
            out!("{}", render_latency(&latency));
            out!("{}", render_layers(&layers, args.trials));
        }
    }
    let missed = report.targets.iter().any(|t| !t.met) || !latency.target_met;
    Ok(if args.check && missed {
        GateExit::TargetMissed
    } else {
        GateExit::Pass
    })
}

/// The `--custom` runner's noise from its flags, each checked (a usage error names the flag).
fn custom_noise(args: &StatsEvalArgs) -> anyhow::Result<NoiseSpec> {
    if args.cell_df.is_some_and(|d| !(d > 2.0 && d.is_finite())) {
        return Err(usage(
            "--cell-df takes degrees of freedom above 2 (the SD must exist)",
        ));
    }
    for (name, v) in [
        ("--slow-boot-rate", args.slow_boot_rate),
        ("--capacity-flip", args.capacity_flip),
        ("--window-ar", args.window_ar),
        ("--row-cv", args.row_cv),
    ] {
        if !(0.0..=1.0).contains(&v) {
            return Err(usage(format!("{name} takes a share in [0, 1]")));
        }
    }
    for (name, v) in [
        ("--slow-boot-effect", args.slow_boot_effect),
        ("--outlier-effect", args.outlier_effect),
        ("--drift-total", args.drift_total),
        ("--step", args.step),
    ] {
        if !(v > -0.9 && v < 9.0) {
            return Err(usage(format!(
                "{name} takes a relative change above -0.9, e.g. 0.03"
            )));
        }
    }
    Ok(NoiseSpec {
        cell_df: args.cell_df,
        slow_boot_rate: args.slow_boot_rate,
        slow_boot_effect: args.slow_boot_effect,
        outlier_every: args.outlier_every,
        outlier_effect: args.outlier_effect,
        capacity_flip_rate: args.capacity_flip,
        drift_total: args.drift_total,
        step: args.step,
        row_cv: args.row_cv,
        window_ar: args.window_ar,
        ..NoiseSpec::gate_runner()
    })
}

/// The grid's gates, then the secondary metrics on a busy host (issue 56: clean gates list no
/// latency change) and the layers' plants on the Gaussian and the rough runner (or the custom
/// one), each at the grid's trials, history, rule and seed.
fn evaluate(
    cfg: &EvalConfig,
    custom: bool,
) -> Result<(EvalReport, LatencyEval, Vec<LayerOutcome>), StatsError> {
    let report = run_eval(cfg)?;
    let latency = latency_eval(cfg.trials, cfg.history, &cfg.rule, cfg.seed)?;
    let runners: Vec<Condition> = cfg
        .conditions
        .iter()
        .filter(|c| custom || c.name == "gaussian" || c.name.starts_with("rough (all"))
        .cloned()
        .collect();
    let layers = layer_plants(&runners, cfg.trials, cfg.history, &cfg.rule, cfg.seed)?;
    Ok((report, latency, layers))
}

/// The latency line: the busy host's clean gates and a real latency rise, each with how often
/// a latency (or other secondary) change was listed.
fn render_latency(l: &LatencyEval) -> String {
    let row = |o: &LatencyOutcome| {
        format!(
            "{}: a latency change listed in {} of {} gates ({:.1}% [{:.1}, {:.1}] Wilson 95%), gate regression {}, insufficient {}, second boot {}",
            o.scenario,
            (o.listed_rate * o.trials as f64).round(),
            o.trials,
            100.0 * o.listed_rate,
            100.0 * o.listed_interval.0,
            100.0 * o.listed_interval.1,
            pct(o.regression_rate),
            pct(o.insufficient_rate),
            pct(o.second_boot_rate),
        )
    };
    let heading = wrap(
        &format!(
            "Latency on a busy host ({}-run history; the candidate's two boots differ by up to {:.0}% in latency alone, throughput unchanged; TTFT, ITL and per-user tok/s decided by the two-boot plan):",
            l.history,
            100.0 * l.runner.busy_max
        ),
        0,
    );
    let rows: String = [
        &l.aa,
        &l.aa_gated,
        &l.slower,
        &l.itl_p99_doubled,
        &l.busy_store_aa,
        &l.busy_store_tripled,
    ]
    .map(|o| format!("\n{}", wrap(&format!("- {}", row(o)), 2)))
    .concat();
    format!(
        "\n\n{heading}{rows}\n- target: no latency change listed in >= 99% of A/A gates: {}\n",
        if l.target_met { "met" } else { "MISSED" }
    )
}

/// The layers' plants: per runner and plant, how often the gate said regression, named the
/// planted layer, and named a layer the plant did not change.
fn render_layers(layers: &[LayerOutcome], trials: usize) -> String {
    let heading = wrap(
        &format!(
            "Layers (the default rule, {trials} gates each; a prefill context and the burst scatter as a cell does): the planted change found (gate regression) and named (the planted layer regressed) in % of gates [Wilson 95%], and another layer named:"
        ),
        0,
    );
    let mut t = fitted_table(vec![
        "runner",
        "plant",
        "regression",
        "named",
        "other named",
    ]);
    for o in layers {
        t.add_row(vec![
            o.condition.clone(),
            o.name.clone(),
            format!("{:.1}", 100.0 * o.regression_rate),
            format!(
                "{:.1} [{:.1}, {:.1}]",
                100.0 * o.named_rate,
                100.0 * o.named_interval.0,
                100.0 * o.named_interval.1
            ),
            format!("{:.1}", 100.0 * o.other_rate),
        ]);
    }
    format!("\n{heading}\n{t}\n")
}

/// The outcome of scenario `s` on one runner.
fn outcome(c: &ConditionOutcome, s: Scenario) -> Option<&ScenarioOutcome> {
    c.scenarios.iter().find(|x| x.scenario == s)
}

fn pct(x: f64) -> String {
    format!("{:.1}%", 100.0 * x)
}

/// A rate in percent with its Wilson 95% interval: `0.4 [0.2, 0.8]` (the header says `%`).
fn with_interval(rate: f64, trials: usize) -> String {
    let (lo, hi) = infergate_eval::eval::gate::wilson(rate, trials.max(1) as f64);
    format!("{:.1} [{:.1}, {:.1}]", 100.0 * rate, 100.0 * lo, 100.0 * hi)
}

/// The text report at 100 columns: clean gates per runner (how often each alarmed, passed, and
/// which test alarmed), then regressions found per runner, then the targets.
fn render_text(r: &EvalReport) -> String {
    let g = NoiseSpec::gate_runner();
    let mut out = wrap(
        &format!(
            "stats-eval: {} gates per runner and scenario, seed {}, {} cells, {}-run history, {}; base runner: run CV {}, cell CV {}, sub-window CV {} x {}, drift {}/run, no outlier run",
            r.trials,
            r.seed,
            r.cells,
            r.history,
            if r.confirm {
                "the two-boot plan of `run`"
            } else {
                "one look (no second boot)"
            },
            pct(g.run_cv),
            pct(g.cell_cv),
            pct(g.window_cv),
            g.windows,
            pct(g.drift_per_run),
        ),
        2,
    );
    out.push_str(
        "\n\nClean gates (A/A), in % of gates: false alarms [Wilson 95%], passes, boots per gate; which\ntests said regression (cell / line / matrix / capacity; a gate can have several); and what a\npass promised: in the gates whose A/A said pass, the same history and boots with every cell\n5% slower (the default design effect, to be found with the design power, 80% by default):\n",
    );
    out.push_str(&clean_table(r));
    out.push_str("\n\nRegressions found, in % of gates [Wilson 95%], and boots per gate at -5%:\n");
    out.push_str(&found_table(r));
    // What a green check hides: one cell 10% slower (the rule's `cell_effect`) must be found
    // or named as not vouched for, never passed.
    out.push_str("\n\n");
    out.push_str(&wrap(
        "One cell 10% slower, in % of gates [Wilson 95%]: found (regression), named as not \
         vouched for (insufficient), or passed:",
        0,
    ));
    out.push('\n');
    out.push_str(&single_cell_table(r));
    out.push('\n');
    out.push_str(&peer_table(r));
    if !r.targets.is_empty() {
        out.push_str("\nTargets:\n");
        for t in &r.targets {
            let line = format!(
                "  [{}] {} ({}): {}",
                if t.met { "met" } else { "MISSED" },
                t.description,
                t.condition,
                pct(t.measured)
            );
            out.push_str(&wrap(&line, 4));
            out.push('\n');
        }
    }
    out
}

/// The clean gates per runner: false alarms, passes, boots, which tests alarmed, and what a
/// pass promised (a uniform −5% found on the same trials).
fn clean_table(r: &EvalReport) -> String {
    let mut clean = fitted_table(vec![
        "runner",
        "false alarm",
        "pass",
        "boots",
        "alarms by test",
        "-5% found after a pass",
    ]);
    for c in &r.conditions {
        let Some(aa) = outcome(c, Scenario::AA) else {
            continue;
        };
        let a = &aa.alarms;
        clean.add_row(vec![
            c.condition.clone(),
            with_interval(aa.regression_rate, r.trials),
            format!("{:.1}", 100.0 * aa.pass_rate),
            format!("{:.2}", aa.mean_boots),
            format!(
                "{:.1}/{:.1}/{:.1}/{:.1}",
                100.0 * a.cell,
                100.0 * a.line,
                100.0 * a.matrix,
                100.0 * a.capacity
            ),
            outcome(c, Scenario::Uniform(-0.05))
                .and_then(|x| x.found_when_aa_passed)
                .map_or_else(
                    || "no A/A passed".to_string(),
                    |f| {
                        let passes = (aa.pass_rate * r.trials as f64).round() as usize;
                        with_interval(f, passes)
                    },
                ),
        ]);
    }
    clean.to_string()
}

/// The planted regressions found per runner: uniform −5% (with its boots), a row −7%, a cell
/// −10%.
fn found_table(r: &EvalReport) -> String {
    let mut found = fitted_table(vec![
        "runner",
        "uniform -5%",
        "boots",
        "row -7%",
        "cell -10%",
    ]);
    for c in &r.conditions {
        let rate = |s: Scenario| {
            outcome(c, s).map_or_else(String::new, |x| with_interval(x.regression_rate, r.trials))
        };
        found.add_row(vec![
            c.condition.clone(),
            rate(Scenario::Uniform(-0.05)),
            outcome(c, Scenario::Uniform(-0.05))
                .map_or_else(String::new, |x| format!("{:.2}", x.mean_boots)),
            rate(Scenario::Row(-0.07)),
            rate(Scenario::SingleCell(-0.10)),
        ]);
    }
    found.to_string()
}

/// One cell 10% slower per runner: found, named as not vouched for, or passed.
fn single_cell_table(r: &EvalReport) -> String {
    let mut single = fitted_table(vec![
        "runner",
        "regression",
        "insufficient",
        "pass",
        "boots",
    ]);
    for c in &r.conditions {
        if let Some(x) = outcome(c, Scenario::SingleCell(-0.10)) {
            single.add_row(vec![
                c.condition.clone(),
                with_interval(x.regression_rate, r.trials),
                with_interval(x.insufficient_rate, r.trials),
                with_interval(x.pass_rate, r.trials),
                format!("{:.2}", x.mean_boots),
            ]);
        }
    }
    single.to_string()
}

/// The rules users know on the same trials, per runner: the gate's own row, each rule at its
/// documented defaults (one boot), then at the gate's A/A rate with a second boot only when
/// the first alarms; and where a rule at the gate's rate finds more than the gate.
fn peer_table(r: &EvalReport) -> String {
    let heading = wrap(
        "Peers on the same trials, in % of gates: alarms (the gate: regression) on A/A, a \
         uniform -5% and one cell -10%, and how often that cell's gate was green (no alarm; the \
         gate: pass). Each rule at its documented defaults (one boot), then '= gate': with the \
         gate's budget on that runner, set on these A/A trials: its first look alarms (and \
         boots again) as often as the gate booted twice, and it says regression as often as \
         the gate did, when the same cell (or the mean) crosses a second threshold on both \
         boots. Boots per A/A gate. docs/statistics.md \"Peers\" has the sources.",
        0,
    );
    let mut table = fitted_table(vec![
        "runner: rule",
        "threshold",
        "A/A",
        "-5%",
        "-10%",
        "green",
        "boots",
    ]);
    let mut wins = Vec::new();
    for c in &r.conditions {
        let (Some(aa), Some(uniform), Some(single)) = (
            outcome(c, Scenario::AA),
            outcome(c, Scenario::Uniform(-0.05)),
            outcome(c, Scenario::SingleCell(-0.10)),
        ) else {
            continue;
        };
        let num = |x: f64| format!("{:.1}", 100.0 * x);
        table.add_row(vec![
            format!("{}: the gate", c.condition),
            "two-boot plan".into(),
            num(aa.regression_rate),
            num(uniform.regression_rate),
            num(single.regression_rate),
            num(single.pass_rate),
            format!("{:.2}", aa.mean_boots),
        ]);
        for p in &c.peers {
            let rate = |s: &ScenarioOutcome| p.scenarios.iter().find(|x| x.name == s.name);
            let (Some(pa), Some(pu), Some(ps)) = (rate(aa), rate(uniform), rate(single)) else {
                continue;
            };
            let calibrated = p.setting == infergate_eval::eval::peers::GATE_AA_RATE;
            table.add_row(vec![
                format!("  {}", p.rule),
                if calibrated {
                    format!(
                        "= gate: {}",
                        p.family.show(p.threshold, p.confirm_threshold)
                    )
                } else {
                    p.setting.clone()
                },
                num(pa.alarm_rate),
                num(pu.alarm_rate),
                num(ps.alarm_rate),
                num(1.0 - ps.alarm_rate),
                format!("{:.2}", pa.mean_boots),
            ]);
            if calibrated {
                for (gate, peer, what) in [(uniform, pu, "-5%"), (single, ps, "cell -10%")] {
                    let (_, gate_high) =
                        infergate_eval::eval::gate::wilson(gate.regression_rate, r.trials as f64);
                    if peer.wilson_low > gate_high {
                        wins.push(format!(
                            "{} ({}): {} {} vs the gate's {}",
                            p.rule,
                            c.condition,
                            what,
                            pct(peer.alarm_rate),
                            pct(gate.regression_rate)
                        ));
                    }
                }
            }
        }
    }
    let verdict = if wins.is_empty() {
        "no rule at the gate's A/A rate finds more than the gate (Wilson 95% intervals apart)."
            .to_string()
    } else {
        format!(
            "a rule at the gate's A/A rate finds more (Wilson 95% intervals apart): {}.",
            wins.join("; ")
        )
    };
    let verdict = wrap(&format!("Where a peer wins: {verdict}"), 2);
    format!("\n{heading}\n{table}\n{verdict}\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use infergate_schema::asserts::assert_contains;

    /// The report is read at the console's width: every runner of the grid, every line within
    /// 100 columns (the one-table layout was 180 columns wide).
    #[test]
    fn the_text_report_fits_the_console() {
        let report = run_eval(&EvalConfig {
            trials: 2,
            seed: 1,
            history: 8,
            confirm: true,
            conditions: grid(),
            rule: DecisionRule::default(),
        })
        .unwrap();
        let text = render_text(&report);
        assert!(infergate_report::report::console::fits(&text), "{text}");
        for c in grid() {
            let first_word = c.name.split_whitespace().next().unwrap();
            assert!(text.contains(first_word), "{}", c.name);
        }
        assert_contains(&text, "Targets:");
        for rule in ["Bencher, cell", "github-action-benchmark", "Perfherder"] {
            assert!(text.contains(rule), "{rule}");
        }
    }
}
