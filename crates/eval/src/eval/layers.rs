//! The layers' plants on `stats-eval`'s runners: for each change issue 57 names (decode 10%
//! slower, prefill 1.3x and 4x slower, the burst's TTFT p90 +30%), how often the gate's own
//! two-boot plan finds it, names the layer that changed, and names another layer that did not.
//!
//! The histories and boots are drawn as [`super::gate`]'s (the same runner, the same layer
//! figures: a prefill context and the burst follow the log level of one cell, so they scatter
//! as a cell does); the plant is applied to the candidate's boots only.

use serde::Serialize;

use infergate_model::stats::{DecisionRule, History, Plan, StatsError, replay};
use infergate_schema::results::RunResults;
use infergate_schema::verdict::{ComparisonReport, GateVerdict, Metric};

use super::gate::{Condition, Sampler, unplanted_run, wilson};

/// A change planted in the candidate's boots.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind", content = "factor")]
pub(crate) enum LayerPlant {
    /// Every decode cell's tok/s times this (0.9: 10% slower); the layers unchanged.
    Decode(f64),
    /// Every prefill context's time times this (1.3: a 1.3x slower prefill, tok/s −23%).
    PrefillSlower(f64),
    /// The burst's TTFT percentiles times this (1.3: +30%).
    BurstTtft(f64),
}

impl LayerPlant {
    /// The plants `stats-eval` measures.
    pub(crate) const ALL: [LayerPlant; 4] = [
        LayerPlant::Decode(0.9),
        LayerPlant::PrefillSlower(1.3),
        LayerPlant::PrefillSlower(4.0),
        LayerPlant::BurstTtft(1.3),
    ];

    /// As a reader names it: `decode -10%`, `prefill 1.3x slower`, `burst TTFT p90 +30%`.
    pub(crate) fn name(&self) -> String {
        match *self {
            LayerPlant::Decode(f) => format!("decode {:+.0}%", 100.0 * (f - 1.0)),
            LayerPlant::PrefillSlower(f) => format!("prefill {f}x slower"),
            LayerPlant::BurstTtft(f) => format!("burst TTFT p90 {:+.0}%", 100.0 * (f - 1.0)),
        }
    }

    /// The candidate boot with the plant applied.
    fn apply(&self, run: &mut RunResults) {
        match *self {
            LayerPlant::Decode(f) => {
                for cell in &mut run.cells {
                    cell.aggregate_tps *= f;
                    cell.samples.iter_mut().for_each(|s| *s *= f);
                }
            }
            LayerPlant::PrefillSlower(f) => {
                for p in &mut run.prefill {
                    p.prefill_tps = p.prefill_tps.map(|t| t / f);
                    for s in &mut p.samples {
                        s.prefill_tps /= f;
                        s.ttft_s *= f;
                    }
                }
            }
            LayerPlant::BurstTtft(f) => {
                if let Some(ttft) = run.burst.as_mut().and_then(|b| b.ttft_s.as_mut()) {
                    for q in [&mut ttft.mean, &mut ttft.p50, &mut ttft.p90, &mut ttft.p99] {
                        *q *= f;
                    }
                }
            }
        }
    }

    fn part(&self) -> Part {
        match self {
            LayerPlant::Decode(_) => Part::Decode,
            LayerPlant::PrefillSlower(_) => Part::Prefill,
            LayerPlant::BurstTtft(_) => Part::BurstTtft,
        }
    }
}

/// Which part of the gate's report said regression.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Part {
    Decode,
    Prefill,
    BurstTtft,
    BurstTps,
}

/// The parts of `report` that regressed.
fn regressed_parts(report: &ComparisonReport) -> Vec<Part> {
    let mut parts = Vec::new();
    if report.cells.iter().any(|c| c.verdict.is_regression())
        || report
            .matrix_test
            .as_ref()
            .is_some_and(|m| m.verdict.is_regression())
    {
        parts.push(Part::Decode);
    }
    if report.prefill.iter().any(|c| c.verdict.is_regression()) {
        parts.push(Part::Prefill);
    }
    let burst = |metric: Metric| {
        report
            .burst
            .iter()
            .flat_map(|c| &c.metrics)
            .any(|m| m.metric == metric && m.verdict.is_regression())
    };
    if burst(Metric::BurstTtftP90) {
        parts.push(Part::BurstTtft);
    }
    if burst(Metric::BurstTps) {
        parts.push(Part::BurstTps);
    }
    parts
}

/// One plant on one runner, in shares of its gates.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LayerOutcome {
    pub condition: String,
    pub(crate) plant: LayerPlant,
    pub name: String,
    /// Gates that said `regression`.
    pub regression_rate: f64,
    /// Gates whose report named the planted layer as regressed, with its Wilson 95% interval.
    pub named_rate: f64,
    pub named_interval: (f64, f64),
    /// Gates whose report named a layer the plant did not change (decode for a layer's plant,
    /// a layer for decode's).
    pub other_rate: f64,
}

/// `trials` gates per plant on each of `conditions`, decided by the two-boot plan under
/// `rule`; each runner's seed is `seed` plus its index.
pub fn layer_plants(
    conditions: &[Condition],
    trials: usize,
    history: usize,
    rule: &DecisionRule,
    seed: u64,
) -> Result<Vec<LayerOutcome>, StatsError> {
    let mut out = Vec::new();
    for (k, condition) in conditions.iter().enumerate() {
        out.extend(one_runner(
            condition,
            trials.max(1),
            history.max(1),
            rule,
            seed.wrapping_add(k as u64),
        )?);
    }
    Ok(out)
}

fn one_runner(
    condition: &Condition,
    trials: usize,
    h: usize,
    rule: &DecisionRule,
    seed: u64,
) -> Result<Vec<LayerOutcome>, StatsError> {
    let noise = &condition.noise;
    let mut sampler = Sampler::new(seed);
    // [plant] -> (regression, named, other)
    let mut counts = vec![(0usize, 0usize, 0usize); LayerPlant::ALL.len()];
    for trial in 0..trials {
        let mut drift = 0.0;
        let mut draw =
            |r: usize, id: String| unplanted_run(noise, &mut sampler, &mut drift, (r, h), id);
        let history: Vec<RunResults> = (0..h).map(|r| draw(r, format!("t{trial}-b{r}"))).collect();
        let boots: Vec<RunResults> = (0..2).map(|k| draw(h, format!("t{trial}-c{k}"))).collect();
        let history = std::sync::Arc::new(History::new(&history[..]));
        for (plant, count) in LayerPlant::ALL.iter().zip(counts.iter_mut()) {
            let mut planted = boots.clone();
            planted.iter_mut().for_each(|b| plant.apply(b));
            let judged = replay(
                history.clone(),
                rule,
                Plan::default(),
                &planted[..1],
                Some((&planted[1..2], "second boot")),
            )?;
            let report = judged.report;
            let parts = regressed_parts(&report);
            count.0 += usize::from(report.gate == GateVerdict::Regression);
            count.1 += usize::from(parts.contains(&plant.part()));
            // Another layer: decode for a layer's plant, a layer for decode's.
            let decode = plant.part() == Part::Decode;
            count.2 += usize::from(parts.iter().any(|&p| (p == Part::Decode) != decode));
        }
    }
    let n = trials as f64;
    Ok(LayerPlant::ALL
        .iter()
        .zip(counts)
        .map(|(&plant, (regression, named, other))| LayerOutcome {
            condition: condition.name.clone(),
            plant,
            name: plant.name(),
            regression_rate: regression as f64 / n,
            named_rate: named as f64 / n,
            named_interval: wilson(named as f64 / n, n),
            other_rate: other as f64 / n,
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eval::gate::grid;

    /// Each plant is found and named on the Gaussian runner, and decode's plant names no layer
    /// (a small run; the figures are `stats-eval`'s).
    #[test]
    fn each_plant_is_found_naming_its_own_layer() {
        let gaussian: Vec<Condition> = grid().into_iter().take(1).collect();
        let out = layer_plants(&gaussian, 20, 20, &DecisionRule::default(), 3).unwrap();
        assert_eq!(out.len(), LayerPlant::ALL.len());
        for o in &out {
            assert!(o.named_rate >= 0.9, "{o:?}");
            assert!(o.other_rate <= 0.1, "{o:?}");
        }
    }
}
