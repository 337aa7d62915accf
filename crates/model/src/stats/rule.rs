//! The decision rule's user-facing knobs, and every internal constant of the model, each named
//! once with its reason (`docs/statistics.md` is the one-page account of how they combine).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use infergate_schema::verdict::{AlphaShares, Direction, Metric, RuleSummary};

use super::StatsError;

/// Share of `alpha` given to the matrix-wide test; the rows, columns and cells share the rest.
/// Half: a uniform slowdown (the matrix test's case) and a local one (the others') are equally
/// likely in engine changes, and the matrix test's power is bounded by the boot factor anyway.
pub(crate) const MATRIX_SHARE: f64 = 0.5;
/// Share of the local families' alpha given to the rows and columns together (the cells share
/// the rest equally): a change confined to one context or one concurrency is common (a kernel
/// for long prompts, a scheduler path under load) and a line pools 3–5 cells' evidence.
pub(crate) const LINE_SHARE: f64 = 0.3;
/// One-sided p-value a boot's own matrix-wide change must be below for the matrix test to go
/// on (the futility bound): the first boot above it ends the matrix test (about 5% of clean
/// pull requests boot twice), and at the second boot it keeps one slow boot from carrying a
/// regression alone (the other boot must lean the same way too).
pub(crate) const FUTILITY_P: f64 = 0.05;
/// Smallest uniform change the matrix-wide test reports as a regression (its margin on the
/// point estimate): below 1% a slowdown is within what a driver update or a warmer room does.
pub(crate) const MATRIX_MARGIN: f64 = 0.01;
/// Confidence of the printed intervals (two-sided): 90%, the interval whose lower end is the
/// 5% one-sided bound, the futility level.
pub(crate) const CONFIDENCE: f64 = 0.90;
/// Share of `alpha` given to capacity and saturation regressions (the matrix, lines and cells
/// share the rest): a cell's false-alarm bound over every rate at which it could flip in its
/// history (`stats::capacity`). A fifth: at the default `alpha` the 0.2% at which a cell that
/// fit in 16+ history runs and is limited on both boots regresses (one boot alone never does),
/// now counted inside the gate's `alpha` instead of on top of it.
pub(crate) const CAPACITY_SHARE: f64 = 0.2;

/// Share of the speed families' alpha (all but capacity's) given to the secondary metrics
/// (latency percentiles, per-user tok/s, steps/s, energy) as one family: a fourth, so 0.2% of
/// the default 1%. Their matrix-wide tests share half of it, their (metric, cell) tests the
/// other half (Bonferroni). When one of them gates in a comparison, throughput's matrix,
/// lines and cells keep the other three fourths, so the gate's false alarms stay within
/// `alpha` by the union bound; when none gates, throughput keeps its whole share (a
/// reported-only line fails no gate) and the secondary lines are listed at this share.
pub(crate) const SECONDARY_SHARE: f64 = 0.25;

/// History runs a latency percentile needs before it gates by default (it is reported
/// before): ten runs give its boot-to-boot noise 9 successive differences, the fewest on
/// which the tail fit and the plan's empirical boots are made for throughput too
/// (`noise::TAIL_MIN_RUNS`, `sensitivity::EMPIRICAL_MIN_RUNS`). A latency percentile of a
/// young store, whose noise only the prior speaks for, would otherwise fail builds on 3% of
/// scatter it has never seen.
pub(crate) const LATENCY_MIN_RUNS: usize = 10;

/// The smallest prefill tok/s change the prefill layer fails a gate for (its margin, in place
/// of `min_effect`): one cold request alone on the engine is as slow as the host is busy, and
/// on a shared 2-core runner the default job's 8k prefill read 138k–160k tok/s from run to run
/// (median of 3 samples) where a quiet host read 163k–165k; a 1.3× slower prefill reads −20%.
pub(crate) const PREFILL_MIN_EFFECT: f64 = 0.10;

/// The design effect (minimum effect) of each latency percentile where `[thresholds.min_effects]`
/// names none: the smallest rise a gating percentile fails a gate for, in every cell and
/// matrix-wide, and which each boot alone must show (`docs/statistics.md`, "Latency gated by
/// default"). A tail moves with the host far more than a median: on the simulated engine's
/// default job the history's ITL p99 of one cell read 6–21 ms from run to run of one quiet
/// machine (its p50 6.0–6.1 ms), so a p99 gates at +50% (a doubled p99 is +100%), a p90 at
/// +25% (a loaded host moved C=1 ITL p90 +16%) and a median at +10%.
pub(crate) fn latency_min_effect(metric: Metric) -> Option<f64> {
    match metric {
        Metric::TtftP50 | Metric::ItlP50 | Metric::TpotP50 => Some(0.10),
        Metric::TtftP90 | Metric::ItlP90 | Metric::TpotP90 => Some(0.25),
        Metric::TtftP99 | Metric::ItlP99 => Some(0.50),
        _ => None,
    }
}

/// A latency percentile is compared only where its sample bounds it: the chance that every
/// one of its `n` observations falls below the true p-quantile, pⁿ, is at most this. A median
/// then needs 5 observations and a p90 29; a cell's "p90" from the 2–8 first tokens of a short
/// window is its largest one, whose run-to-run scatter no history of a few runs shows.
pub(crate) const PERCENTILE_BOUND: f64 = 0.05;

/// How far the host's own lateness reaches into a millisecond tail latency, as a multiple of
/// the gate's probe's p99 lateness (results' `host_lateness_s`): an engine that decodes on the
/// runner's CPUs waits on the same scheduler. On the default job (2026-12-06, two runs each)
/// two busy loops on 2 cores moved the probe's p99 lateness 0.15–0.55 → 3.3–3.8 ms and each
/// cell's ITL p99, against its mean over the quiet runs, by −0.0 to +4.26 ms: at most 1.22
/// times that run's lateness (C=4 / 0: 9.61 → 13.87 ms at 3.50 ms). Rounded up.
pub(crate) const HOST_LATENESS_REACH: f64 = 1.25;

/// Fewest observations behind a `p`-quantile that [`PERCENTILE_BOUND`] accepts.
pub fn percentile_min_count(p: f64) -> u64 {
    (PERCENTILE_BOUND.ln() / p.ln()).ceil() as u64
}

/// The level is the newest `1/LEVEL_PARTS` of the history window: the newest third. A shorter
/// level follows a drift more closely (it lags a linear drift by `slope·(K+1)/2`) and averages
/// fewer boots (its variance is `σ_run²/K`); the third was chosen by `stats-eval`
/// (`docs/statistics.md`).
pub(crate) const LEVEL_PARTS: usize = 3;

/// How many of a history window's newest runs define the level ([`LEVEL_PARTS`]; at least one).
pub fn level_window(history_runs: usize) -> usize {
    history_runs.div_ceil(LEVEL_PARTS).max(1)
}

/// Parameters of the decision rule: the knobs a user sets in `[thresholds]` (and `[baseline]`
/// for the history window).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DecisionRule {
    /// Family-wise false-alarm rate of one gate over every test and every look.
    pub alpha: f64,
    /// Smallest change of a cell, row or column worth failing a pull request for (its margin
    /// on the point estimate).
    pub min_effect: f64,
    /// The history window: the newest N baseline runs the noise model is fitted on; the newest
    /// third of them ([`LEVEL_PARTS`]) define the matrix-wide level, so a drift is followed.
    pub history_runs: usize,
    /// Metrics that can fail the gate; the others are reported with verdicts but never gate.
    /// By default aggregate tok/s, the prefill layer's tok/s and ITL p99. A latency percentile
    /// gates where each cell has the observations it needs and the history
    /// [`LATENCY_MIN_RUNS`] runs ([`DecisionRule::gates`]), and is reported otherwise; it fails
    /// a gate only for a change beyond its design effect ([`DecisionRule::min_effect_of`]) on
    /// both boots and on each boot alone, since a history recorded on another host (the default
    /// job's bundled baseline) does not show the latency a loaded runner adds to every boot (the
    /// simulated engine's C=1 ITL p90 read +16% on both boots of a clean run on a loaded CI
    /// host). The prefill layer's tok/s gates where the history has [`LATENCY_MIN_RUNS`] runs
    /// with the layer: one figure per context and run, the median of cold samples alone on the
    /// engine, which a loaded host moves far less than a tail.
    pub metrics: Vec<Metric>,
    /// Per-metric design effects (`[thresholds.min_effects]`, e.g. `itl_p99 = 0.5`): the
    /// smallest change of that metric worth failing a gate for, a relative rise for a latency
    /// (0.5: +50%) and a relative fall for a throughput, in place of `min_effect` (cells) and
    /// `MATRIX_MARGIN` (matrix-wide); each boot alone must show it too. A metric not named
    /// here has [`latency_min_effect`]'s default (latency percentiles), the prefill layer
    /// [`PREFILL_MIN_EFFECT`], the others `min_effect`. Aggregate tok/s has `min_effect`.
    pub min_effects: BTreeMap<Metric, f64>,
    /// The uniform slowdown the gate must be able to find at `design_power` to say `pass`;
    /// a gate less sensitive than that says `insufficient`.
    pub design_effect: f64,
    /// The probability the design effect should be found with.
    pub design_power: f64,
    /// The slowdown of any one cell a `pass` vouches for: every cell compared for speed must
    /// have its one-sided 95% bound on the change above `-cell_effect`, else the gate is
    /// `insufficient` and names the cell (a matrix-wide test alone says nothing of one cell).
    pub cell_effect: f64,
    /// The burst layer's margin (`[thresholds] burst_min_effect`): the smallest change of its
    /// total tok/s or TTFT p90 that fails a gate, in place of `min_effect`
    /// ([`BURST_MIN_EFFECT`] by default): one figure per run, as the prefill layer's.
    pub burst_min_effect: f64,
}

/// The default [`DecisionRule::burst_min_effect`]: a tenth, as the prefill layer's margin. The
/// default job's burst (3k prompts queueing at 100/s) read TTFT p90 314.4–315.5 ms over its 10
/// bundled runs on the shared 2-core host; a burst that mostly finds the engine idle reads the
/// host's wake-up delay instead, which two busy loops moved by up to +68% (docs/statistics.md).
pub(crate) const BURST_MIN_EFFECT: f64 = 0.10;

impl Default for DecisionRule {
    fn default() -> Self {
        DecisionRule {
            alpha: 0.01,
            min_effect: 0.03,
            history_runs: 20,
            metrics: vec![
                Metric::AggregateTps,
                Metric::PrefillTps,
                Metric::BurstTps,
                Metric::BurstTtftP90,
                Metric::ItlP99,
            ],
            min_effects: BTreeMap::new(),
            design_effect: 0.05,
            design_power: 0.8,
            cell_effect: 0.10,
            burst_min_effect: BURST_MIN_EFFECT,
        }
    }
}

impl DecisionRule {
    /// Checks the parameters are in range; the error names the field and the valid range.
    pub fn validate(&self) -> Result<(), StatsError> {
        let alpha = self.alpha;
        in_range(alpha > 0.0 && alpha < 0.5, "alpha", alpha, "(0, 0.5)")?;
        let effect = self.min_effect;
        let ok = effect.is_finite() && (0.0..1.0).contains(&effect);
        in_range(ok, "min_effect", effect, "[0, 1)")?;
        let design = self.design_effect;
        in_range(
            design > 0.0 && design < 1.0,
            "design_effect",
            design,
            "(0, 1)",
        )?;
        let cell = self.cell_effect;
        in_range(cell > 0.0 && cell < 1.0, "cell_effect", cell, "(0, 1)")?;
        let burst = self.burst_min_effect;
        in_range(
            burst.is_finite() && (0.0..1.0).contains(&burst),
            "burst_min_effect",
            burst,
            "[0, 1)",
        )?;
        let power = self.design_power;
        in_range(
            power > 0.5 && power < 1.0,
            "design_power",
            power,
            "(0.5, 1)",
        )?;
        for (&metric, &m) in &self.min_effects {
            let name = format!("min_effects.{}", metric.as_str());
            if metric == Metric::AggregateTps {
                return Err(StatsError::InvalidRule(format!(
                    "{name} is set by min_effect (aggregate tok/s has no entry of its own)"
                )));
            }
            // A throughput cannot fall by 100%; a latency can rise by more.
            match metric.direction() {
                Direction::HigherIsBetter => in_range(m > 0.0 && m < 1.0, &name, m, "(0, 1)")?,
                Direction::LowerIsBetter => in_range(m > 0.0 && m < 10.0, &name, m, "(0, 10)")?,
            }
        }
        if self.history_runs == 0 {
            return Err(StatsError::InvalidRule(
                "history_runs = 0 must be at least 1".into(),
            ));
        }
        Ok(())
    }

    /// Whether `metric` can fail the gate on a history of `history_runs` runs: it is one of
    /// [`DecisionRule::metrics`], and a latency percentile only from [`LATENCY_MIN_RUNS`]
    /// runs on (before, it is reported only). A percentile also needs its observations in each
    /// cell ([`percentile_min_count`]); a cell without them has no line of it. The prefill
    /// layer's tok/s likewise from [`LATENCY_MIN_RUNS`] history runs *with the layer*
    /// (`history_runs` counts those): its noise per context is its own, one figure per run, and
    /// from fewer runs its model leans on the prior. The burst layer's metrics likewise (runs
    /// with the burst layer).
    pub(crate) fn gates(&self, metric: Metric, history_runs: usize) -> bool {
        let needs_runs = metric.is_latency_percentile() || metric.is_layer();
        self.metrics.contains(&metric) && (!needs_runs || history_runs >= LATENCY_MIN_RUNS)
    }

    /// The design effect of `metric` (relative, positive): its `[thresholds.min_effects]`
    /// entry, else [`latency_min_effect`], the prefill layer's [`PREFILL_MIN_EFFECT`] (or
    /// `min_effect` when larger), the burst layer's `burst_min_effect`, else `min_effect`.
    pub fn min_effect_of(&self, metric: Metric) -> f64 {
        if let Some(&m) = self.min_effects.get(&metric) {
            return m;
        }
        match metric {
            Metric::PrefillTps => self.min_effect.max(PREFILL_MIN_EFFECT),
            m if m.is_burst() => self.burst_min_effect,
            _ => latency_min_effect(metric).unwrap_or(self.min_effect),
        }
    }

    /// Whether `metric` has a design effect of its own ([`DecisionRule::min_effect_of`] other
    /// than `min_effect`): a gating one is judged matrix-wide on its change beyond it on both
    /// boots and on each boot alone (a uniform rise of every cell is no run effect to it).
    pub(crate) fn has_design_effect(&self, metric: Metric) -> bool {
        metric != Metric::AggregateTps
            && !metric.is_layer()
            && (self.min_effects.contains_key(&metric) || latency_min_effect(metric).is_some())
    }

    /// The probe's p99 lateness, as a share of a tail percentile of `metric`, from which the
    /// tail is not vouched for: where the host alone could move it by half its design effect
    /// ([`HOST_LATENESS_REACH`] × lateness): a fifth for a p99 at +50%, a tenth for a p90 at
    /// +25%. A quiet host's probe read 2–7% of the default job's ITL p99.
    pub fn host_late_share(&self, metric: Metric) -> f64 {
        self.min_effect_of(metric) / (2.0 * HOST_LATENESS_REACH)
    }

    /// [`DecisionRule::min_effect_of`] as a margin on the log change: a fall of `m` for a
    /// throughput (`−ln(1 − m)`, as `min_effect`), a rise of `m` for a latency with a design
    /// effect (`ln(1 + m)`: +50% is `ln 1.5`); a latency without one keeps `min_effect`'s.
    pub(crate) fn log_margin_of(&self, metric: Metric) -> f64 {
        let m = self.min_effect_of(metric);
        if metric.direction() == Direction::LowerIsBetter && self.has_design_effect(metric) {
            (1.0 + m).ln()
        } else {
            -(1.0 - m).ln()
        }
    }

    /// Alpha of the matrix-wide test (spent at its last look).
    pub(crate) fn matrix_alpha(&self) -> f64 {
        self.alpha * (1.0 - CAPACITY_SHARE) * MATRIX_SHARE
    }

    /// Alpha of the rows, columns and cells together (spent at the first boot and its rounds).
    pub(crate) fn local_alpha(&self) -> f64 {
        self.alpha * (1.0 - CAPACITY_SHARE) * (1.0 - MATRIX_SHARE)
    }

    /// A capacity-limited or saturated cell's false-alarm bound ([`CAPACITY_SHARE`]).
    pub(crate) fn capacity_alpha(&self) -> f64 {
        self.alpha * CAPACITY_SHARE
    }

    /// The parameters as recorded in a report.
    pub(crate) fn summary(&self) -> RuleSummary {
        RuleSummary {
            alpha: self.alpha,
            min_effect: self.min_effect,
            matrix_margin: MATRIX_MARGIN,
            correction: "bonferroni".to_string(),
            confidence: CONFIDENCE,
            cell_effect: Some(self.cell_effect),
            shares: Some(AlphaShares {
                matrix: self.matrix_alpha(),
                local: self.local_alpha(),
                capacity: self.capacity_alpha(),
                lines: 0.0,
                secondary: None,
            }),
        }
    }
}

/// `Ok` when `ok`, else the error that `name = value` must be in `range`.
pub(crate) fn in_range(
    ok: bool,
    name: &str,
    value: impl std::fmt::Display,
    range: &str,
) -> Result<(), StatsError> {
    if ok {
        return Ok(());
    }
    let why = format!("{name} = {value} must be in {range}");
    Err(StatsError::InvalidRule(why))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The host may move a tail by half its design effect at most: the share of the tail the
    /// probe may be late by follows the metric's design effect, checkable by hand.
    #[test]
    fn the_host_late_share_is_half_the_design_effect_over_the_reach() {
        let rule = DecisionRule::default();
        assert!((rule.host_late_share(Metric::ItlP99) - 0.2).abs() < 1e-12);
        assert!((rule.host_late_share(Metric::TtftP90) - 0.1).abs() < 1e-12);
        let wider = DecisionRule {
            min_effects: [(Metric::ItlP99, 1.0)].into(),
            ..DecisionRule::default()
        };
        assert!((wider.host_late_share(Metric::ItlP99) - 0.4).abs() < 1e-12);
    }
}
