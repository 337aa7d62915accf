//! `infergate ab-eval`: Monte Carlo of the adaptive and paired A/B designs against the stored
//! baseline, over the gate's own procedures (see `infergate_eval::eval::design` and
//! `docs/adaptive-and-ab.md`).

use infergate_eval::eval::design::{DesignEvalConfig, evaluate};
use infergate_schema::exit::{GateExit, usage};

/// Arguments of `infergate ab-eval`.
#[derive(Debug, clap::Args)]
pub struct AbEvalArgs {
    /// Trials per design and scenario.
    #[arg(long, default_value_t = 200)]
    pub trials: usize,
    /// Seed of the simulated runs (same seed, same figures).
    #[arg(long, default_value_t = 20261129)]
    pub seed: u64,
    /// CV of the per-boot speed factor.
    #[arg(long, default_value_t = 0.02)]
    pub boot_noise: f64,
    /// CV of one measurement of one cell.
    #[arg(long, default_value_t = 0.01)]
    pub cell_noise: f64,
    /// The change of the power scenarios (−0.03 = 3% slower).
    #[arg(long, default_value_t = -0.03, allow_hyphen_values = true)]
    pub change: f64,
    /// Baseline runs in the store.
    #[arg(long, default_value_t = 20)]
    pub history: usize,
    /// Pair counts of the A/B designs (comma-separated).
    #[arg(long, default_value = "4,8,16", value_delimiter = ',')]
    pub pairs: Vec<u32>,
    /// Extra rounds of the adaptive design (1 to 20, as `[adaptive] max_rounds` allows).
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=20))]
    pub max_rounds: u32,
    /// The rule's `min_effect` (default 0.03, the gate's).
    #[arg(long, default_value_t = 0.03)]
    pub min_effect: f64,
    /// `text` or `json` (anything else is refused, not printed as text).
    #[arg(long, default_value = "text", value_parser = ["text", "json"])]
    pub format: String,
}

/// Runs `infergate ab-eval`.
pub async fn execute(args: AbEvalArgs) -> anyhow::Result<GateExit> {
    if args.trials == 0 || args.history < 2 || args.pairs.iter().any(|p| *p < 2) {
        return Err(usage(
            "--trials must be >= 1, --history >= 2 and every --pairs value >= 2",
        ));
    }
    let cfg = DesignEvalConfig {
        trials: args.trials,
        seed: args.seed,
        boot_cv: args.boot_noise,
        cell_cv: args.cell_noise,
        change: args.change,
        history: args.history,
        pairs: args.pairs.clone(),
        max_rounds: args.max_rounds,
        min_effect: args.min_effect,
    };
    let out = evaluate(&cfg).await?;
    if args.format == "json" {
        outln!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({"config": cfg, "outcomes": out}))?
        );
        return Ok(GateExit::Pass);
    }
    // The heading at the console's width; the table is Markdown, for the docs.
    let heading = format!(
        "{} trials · boot noise {:.1}% · cell noise {:.1}% · change {:+.1}% · history {} runs · default rule with min_effect {}",
        cfg.trials,
        100.0 * cfg.boot_cv,
        100.0 * cfg.cell_cv,
        100.0 * cfg.change,
        cfg.history,
        cfg.min_effect
    );
    outln!("{}", infergate_report::report::console::wrap(&heading, 2));
    outln!(
        "| design | scenario | gate regression | changed cell found | cell measurements | boots |"
    );
    outln!("|---|---|---|---|---|---|");
    for o in &out {
        outln!(
            "| {} | {} | {:.1}% | {} | {:.1} | {:.0} |",
            o.design,
            o.scenario,
            100.0 * o.gate_regression,
            o.cell_found
                .map_or("-".into(), |f| format!("{:.1}%", 100.0 * f)),
            o.cell_measurements,
            o.boots
        );
    }
    Ok(GateExit::Pass)
}
