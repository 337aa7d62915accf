//! Monte Carlo of the measurement designs of issue 8 over the *same* procedures the gate runs
//! (`stats::compare`, the judge's rounds driven by [`infergate_gate::run::adaptive::measure_rounds`],
//! [`infergate_model::stats::paired_compare`]), on synthetic 20-cell matrices with a per-boot speed
//! factor: false-alarm rate, power at a given change, and cost in cell measurements. Complements the real-boot measurements on the
//! simulated engine (`scripts/eval/`); see `docs/adaptive-and-ab.md`.

use rand::SeedableRng;
use rand::rngs::StdRng;
use rand_distr::{Distribution, Normal};
use serde::Serialize;

use super::gate::{CellDraw, cell_levels, synthetic_cell, template};
use infergate_config::config::AdaptiveConfig;
use infergate_model::stats::{DecisionRule, Evidence, Judge, Next, Plan, StatsError};
use infergate_schema::results::{CellResult, RunResults};
use infergate_schema::verdict::{CellVerdict, GateVerdict};

use infergate_gate::run::adaptive::measure_rounds;
use infergate_model::stats::paired::{PairedError, paired_compare};

/// Settings of the Monte Carlo.
#[derive(Debug, Clone, Serialize)]
pub struct DesignEvalConfig {
    pub trials: usize,
    pub seed: u64,
    /// CV of the per-boot factor shared by every cell (and every round) of one boot.
    pub boot_cv: f64,
    /// CV of one measurement of one cell (redrawn by every measurement, also re-measurements).
    pub cell_cv: f64,
    /// The change of the power scenarios (−0.03 = 3% slower).
    pub change: f64,
    /// Baseline runs in the store (stored-baseline designs).
    pub history: usize,
    /// Pair counts of the A/B designs.
    pub pairs: Vec<u32>,
    /// Extra rounds of the adaptive design.
    pub max_rounds: u32,
    /// The rule's `min_effect` (a change at exactly the margin is found 5% of the time by any
    /// design: its 90% interval lies beyond the margin half of 10% of the time).
    pub min_effect: f64,
}

/// One design under one scenario.
#[derive(Debug, Clone, Serialize)]
pub struct DesignOutcome {
    pub design: String,
    /// `a/a`, `uniform`, `one-cell`.
    pub scenario: String,
    /// Share of trials whose gate said `regression` (A/A: false alarms; else power).
    pub gate_regression: f64,
    /// One-cell scenario: share of trials where the changed cell itself was `regression`.
    pub cell_found: Option<f64>,
    /// Mean cell measurements per check (the candidate's; A/B: both builds).
    pub cell_measurements: f64,
    /// Mean boots per check.
    pub boots: f64,
    pub(crate) trials: usize,
}

/// Why the evaluation could not run.
#[derive(Debug, thiserror::Error)]
pub enum DesignEvalError {
    #[error("{0}")]
    Stats(#[from] StatsError),
    #[error("{0}")]
    Ab(#[from] PairedError),
    #[error("{0}")]
    Gate(#[from] infergate_gate::run::decide::GateError),
}

const CHANGED_CELL: usize = 7;

#[derive(Clone, Copy, PartialEq)]
enum Scenario {
    AA,
    Uniform,
    OneCell,
}

impl Scenario {
    fn name(self) -> &'static str {
        match self {
            Scenario::AA => "a/a",
            Scenario::Uniform => "uniform",
            Scenario::OneCell => "one-cell",
        }
    }

    fn factor(self, change: f64, cell: usize) -> f64 {
        match self {
            Scenario::AA => 1.0,
            Scenario::Uniform => 1.0 + change,
            Scenario::OneCell if cell == CHANGED_CELL => 1.0 + change,
            Scenario::OneCell => 1.0,
        }
    }
}

struct Sim {
    rng: StdRng,
    z: Normal<f64>,
    levels: Vec<(u32, u64, f64)>,
    cfg: DesignEvalConfig,
}

impl Sim {
    fn boot_factor(&mut self) -> f64 {
        (self.cfg.boot_cv * self.z.sample(&mut self.rng)).exp()
    }

    /// One measurement of cell `i` on a boot with factor `boot`.
    fn cell(&mut self, i: usize, boot: f64, factor: f64) -> CellResult {
        let (c, ctx, level) = self.levels[i];
        let v = level * boot * factor * (self.cfg.cell_cv * self.z.sample(&mut self.rng)).exp();
        let draw = CellDraw {
            windows: 5,
            window_cv: 0.005,
            measured_s: 10.0,
        };
        let (z, rng) = (self.z, &mut self.rng);
        let mut cell = synthetic_cell(c, ctx, v, draw, &mut || z.sample(rng));
        // ab-eval's published figures were drawn with the cell's level as its aggregate (not
        // the mean of its sub-windows); kept so the same seed gives the same figures.
        cell.aggregate_tps = v;
        cell.output_tokens = (v * draw.measured_s) as u64;
        cell
    }

    fn run(&mut self, id: String, reps: u32, factor: &dyn Fn(usize) -> f64) -> RunResults {
        let boot = self.boot_factor();
        let mut r = template();
        r.run_id = id;
        r.cells = (0..self.levels.len())
            .map(|i| {
                let mut cell = self.cell(i, boot, factor(i));
                for rep in 1..reps {
                    let again = self.cell(i, boot, factor(i));
                    cell.fold_round(&again, rep);
                }
                cell
            })
            .collect();
        r
    }
}

fn rate(n: usize, of: usize) -> f64 {
    if of == 0 { 0.0 } else { n as f64 / of as f64 }
}

/// Runs every design under A/A, a uniform change and a one-cell change.
pub async fn evaluate(cfg: &DesignEvalConfig) -> Result<Vec<DesignOutcome>, DesignEvalError> {
    let rule = DecisionRule {
        min_effect: cfg.min_effect,
        ..DecisionRule::default()
    };
    let mut sim = Sim {
        rng: StdRng::seed_from_u64(cfg.seed),
        z: Normal::new(0.0, 1.0).map_err(|e| StatsError::InvalidRule(e.to_string()))?,
        levels: cell_levels(),
        cfg: cfg.clone(),
    };
    let cells = sim.levels.len() as f64;
    let adaptive = AdaptiveConfig {
        enabled: true,
        max_rounds: cfg.max_rounds,
        max_extra_s: None,
    };
    let single = infergate_model::stats::Look::single(&rule);
    let plan = Plan {
        confirm: false,
        max_rounds: cfg.max_rounds,
    };
    let mut out = Vec::new();
    for scenario in [Scenario::AA, Scenario::Uniform, Scenario::OneCell] {
        let change = cfg.change;
        let factor = move |i: usize| scenario.factor(change, i);
        // Stored-baseline designs: fixed 1 or 3 measurements per cell, and adaptive.
        let mut counts = [(0usize, 0usize, 0.0f64); 3];
        for t in 0..cfg.trials {
            let history: Vec<RunResults> = (0..cfg.history)
                .map(|h| sim.run(format!("h{t}-{h}"), 1, &|_| 1.0))
                .collect();
            // Every design is compared with this trial's history: its models are fitted once.
            let fitted = std::sync::Arc::new(infergate_model::stats::History::new(&history[..]));
            for (k, reps) in [(0usize, 1u32), (1, 3)] {
                let cand = sim.run(format!("c{t}"), reps, &factor);
                let rep = infergate_model::stats::compare_on(
                    &fitted,
                    std::slice::from_ref(&cand),
                    &rule,
                    &single,
                )?;
                counts[k].0 += usize::from(rep.gate == GateVerdict::Regression);
                counts[k].1 += usize::from(
                    rep.cells.get(CHANGED_CELL).map(|c| c.verdict) == Some(CellVerdict::Regression),
                );
                counts[k].2 += cells * f64::from(reps);
            }
            // Adaptive: one measurement per cell, then only the inconclusive ones again, on
            // the same boot (same boot factor).
            let boot = sim.boot_factor();
            let mut cand = template();
            cand.run_id = format!("a{t}");
            cand.cells = (0..sim.levels.len())
                .map(|i| sim.cell(i, boot, factor(i)))
                .collect();
            let mut judge = Judge::new(fitted.clone(), &rule, plan);
            let next = judge.look(Evidence::FirstBoot(vec![cand]))?;
            let mut extra = 0usize;
            let levels = sim.levels.clone();
            let (next, _) = measure_rounds(
                &mut judge,
                next,
                &adaptive,
                1.0,
                async |c, ctx| {
                    let i = levels.iter().position(|l| (l.0, l.1) == (c, ctx))?;
                    extra += 1;
                    Some(sim.cell(i, boot, factor(i)))
                },
                &|_| {},
            )
            .await?;
            let Next::Decided(report) = next else {
                let why = format!("the adaptive design ended with {next:?}");
                return Err(StatsError::OutOfTurn(why).into());
            };
            counts[2].0 += usize::from(report.gate == GateVerdict::Regression);
            counts[2].1 += usize::from(
                report.cells.get(CHANGED_CELL).map(|c| c.verdict) == Some(CellVerdict::Regression),
            );
            counts[2].2 += cells + extra as f64;
        }
        let names = [
            "stored baseline, fixed 1 measurement/cell".to_string(),
            "stored baseline, fixed 3 measurements/cell".to_string(),
            format!(
                "stored baseline, adaptive (<= {} extra rounds)",
                cfg.max_rounds
            ),
        ];
        for (k, name) in names.into_iter().enumerate() {
            out.push(DesignOutcome {
                design: name,
                scenario: scenario.name().into(),
                gate_regression: rate(counts[k].0, cfg.trials),
                cell_found: (scenario == Scenario::OneCell).then(|| rate(counts[k].1, cfg.trials)),
                cell_measurements: counts[k].2 / cfg.trials as f64,
                boots: 1.0,
                trials: cfg.trials,
            });
        }
        // Paired A/B designs.
        for &pairs in &cfg.pairs {
            let (mut gate, mut found) = (0usize, 0usize);
            for t in 0..cfg.trials {
                let a: Vec<RunResults> = (0..pairs)
                    .map(|i| sim.run(format!("a{t}-{i}"), 1, &|_| 1.0))
                    .collect();
                let b: Vec<RunResults> = (0..pairs)
                    .map(|i| sim.run(format!("b{t}-{i}"), 1, &factor))
                    .collect();
                let rep = paired_compare(&a, &b, &rule)?;
                gate += usize::from(rep.gate == GateVerdict::Regression);
                found += usize::from(
                    rep.cells.get(CHANGED_CELL).map(|c| c.verdict) == Some(CellVerdict::Regression),
                );
            }
            out.push(DesignOutcome {
                design: format!("paired A/B, {pairs} pairs"),
                scenario: scenario.name().into(),
                gate_regression: rate(gate, cfg.trials),
                cell_found: (scenario == Scenario::OneCell).then(|| rate(found, cfg.trials)),
                cell_measurements: 2.0 * f64::from(pairs) * cells,
                boots: 2.0 * f64::from(pairs),
                trials: cfg.trials,
            });
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_designs_run_and_a_a_false_alarms_stay_low() {
        let cfg = DesignEvalConfig {
            trials: 12,
            seed: 3,
            boot_cv: 0.02,
            cell_cv: 0.01,
            change: -0.10,
            history: 8,
            pairs: vec![4],
            max_rounds: 2,
            min_effect: 0.03,
        };
        let out = evaluate(&cfg).await.expect("evaluate");
        assert_eq!(out.len(), 3 * 4);
        for o in out.iter().filter(|o| o.scenario == "a/a") {
            assert!(o.gate_regression <= 0.25, "{o:?}");
        }
        let adaptive = out
            .iter()
            .find(|o| o.scenario == "a/a" && o.design.contains("adaptive"))
            .expect("adaptive");
        assert!(adaptive.cell_measurements >= 20.0 && adaptive.cell_measurements <= 60.0);
    }
}
