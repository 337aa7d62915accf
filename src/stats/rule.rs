//! The decision rule's parameters.

use serde::{Deserialize, Serialize};

use crate::verdict::{GateVerdict, Metric, RuleSummary};

use super::StatsError;
use super::noise::NoiseSettings;

/// Which multiplicity correction controls the false alarms across cells x gating metrics.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Correction {
    /// Holm's step-down: family-wise error rate, valid under any dependence (default).
    #[default]
    Holm,
    /// Benjamini–Hochberg: false discovery rate; more power, weaker guarantee.
    BenjaminiHochberg,
}

impl Correction {
    /// The snake_case name used in files.
    pub fn as_str(self) -> &'static str {
        match self {
            Correction::Holm => "holm",
            Correction::BenjaminiHochberg => "benjamini_hochberg",
        }
    }
}

/// Parameters of the decision rule. The defaults are the measured ones in `docs/statistics.md`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DecisionRule {
    /// Family-wise false-alarm rate per matrix comparison (all cells x gating metrics + the
    /// matrix-wide test).
    pub alpha: f64,
    /// Minimum relative effect worth failing for.
    pub min_effect: f64,
    /// Margin multiplier: margin = max(min_effect, noise_k x cell noise CV).
    pub noise_k: f64,
    /// Confidence level of the reported intervals.
    pub confidence: f64,
    /// Multiplicity correction across cells x gating metrics.
    pub correction: Correction,
    /// Newest K baseline runs that define the baseline level.
    pub level_runs: usize,
    /// Longer history (newest N runs) that defines the noise.
    pub noise_runs: usize,
    /// Metrics that can fail the gate; the others are reported with verdicts but never gate.
    pub metrics: Vec<Metric>,
    /// Whether the matrix-wide test (mean change across cells) runs and gates.
    pub matrix_test: bool,
    /// Whether an `inconclusive` gate counts as a failure.
    pub inconclusive_fails: bool,
    /// Margin of the matrix-wide test: a uniform change smaller than this never fails.
    pub matrix_min_effect: f64,
    /// Least weight (degrees of freedom) of the pooled noise in one cell's noise; the weight is
    /// estimated from the history (more when the cells share one noise level).
    pub shrinkage_df: f64,
    /// Share of `alpha` given to the matrix-wide test; the cells x gating metrics share the rest.
    pub matrix_alpha_share: f64,
    /// Whether each context row and concurrency column is tested as a whole (its cells against
    /// the rest of their run), so a change confined to one line is found where no single cell
    /// shows it.
    pub line_tests: bool,
    /// Share of the cells' family alpha given to the row and column tests (weighted Holm: the
    /// lines share this weight equally, the cells x gating metrics the rest).
    pub line_alpha_share: f64,
    /// Noise CV assumed before any history is seen (a prior, worth `prior_df` degrees of freedom).
    pub prior_cv: f64,
    /// Weight of `prior_cv` in degrees of freedom: small, so two runs of history dominate it.
    pub prior_df: f64,
    /// Robust z-score (median/MAD) beyond which a baseline run or entry is set aside as an outlier.
    pub outlier_z: f64,
    /// Least share of the cells measured in the baseline that the candidate must measure too;
    /// below it the gate is `unmeasured` (exit 3). 1 (default): every such cell, so an engine
    /// that errors where it used to serve can never pass on the cells it still serves.
    pub min_measured_share: f64,
    /// The uniform slowdown the baseline must be able to find at `design_power`; a history too
    /// thin for it is reported as such (and fails with `fail_on` listing
    /// `insufficient_baseline`).
    pub design_effect: f64,
    /// The probability the design effect should be found with.
    pub design_power: f64,
    /// Largest false-alarm rate allowed when a capacity-limited or saturated candidate cell is
    /// called a regression, bounded over every rate at which the cell could flip in its history
    /// (`stats::capacity`): at 0.002 a cell that fit in 16+ history runs and is limited on both
    /// boots regresses; one boot alone never does (a provisional alarm).
    pub capacity_alpha: f64,
}

impl Default for DecisionRule {
    fn default() -> Self {
        DecisionRule {
            alpha: 0.01,
            min_effect: 0.03,
            noise_k: 2.0,
            confidence: 0.90,
            correction: Correction::Holm,
            level_runs: 5,
            noise_runs: 20,
            metrics: vec![Metric::AggregateTps],
            matrix_test: true,
            inconclusive_fails: false,
            matrix_min_effect: 0.01,
            shrinkage_df: 10.0,
            matrix_alpha_share: 0.6,
            line_tests: true,
            line_alpha_share: 0.3,
            prior_cv: 0.03,
            prior_df: 1.0,
            outlier_z: 4.0,
            min_measured_share: 1.0,
            design_effect: 0.05,
            design_power: 0.8,
            capacity_alpha: 0.002,
        }
    }
}

impl DecisionRule {
    /// Checks the parameters are in range; the error names the field and the valid range.
    pub fn validate(&self) -> Result<(), StatsError> {
        let bad = |msg: String| Err(StatsError::InvalidRule(msg));
        if !(self.alpha > 0.0 && self.alpha < 0.5) {
            return bad(format!("alpha = {} must be in (0, 0.5)", self.alpha));
        }
        if !(self.confidence > 0.5 && self.confidence < 1.0) {
            return bad(format!(
                "confidence = {} must be in (0.5, 1)",
                self.confidence
            ));
        }
        for (name, v) in [
            ("min_effect", self.min_effect),
            ("matrix_min_effect", self.matrix_min_effect),
            ("noise_k", self.noise_k),
            ("shrinkage_df", self.shrinkage_df),
            ("prior_cv", self.prior_cv),
            ("prior_df", self.prior_df),
            ("outlier_z", self.outlier_z),
        ] {
            if !(v.is_finite() && v >= 0.0) {
                return bad(format!("{name} = {v} must be a finite number >= 0"));
            }
        }
        if self.min_effect >= 1.0 {
            return bad(format!("min_effect = {} must be below 1", self.min_effect));
        }
        if !(self.matrix_alpha_share > 0.0 && self.matrix_alpha_share < 1.0) {
            return bad(format!(
                "matrix_alpha_share = {} must be in (0, 1)",
                self.matrix_alpha_share
            ));
        }
        if !(self.line_alpha_share > 0.0 && self.line_alpha_share < 1.0) {
            return bad(format!(
                "line_alpha_share = {} must be in (0, 1)",
                self.line_alpha_share
            ));
        }
        if !(self.min_measured_share > 0.0 && self.min_measured_share <= 1.0) {
            return bad(format!(
                "min_measured_share = {} must be in (0, 1]",
                self.min_measured_share
            ));
        }
        if !(self.design_effect > 0.0 && self.design_effect < 1.0) {
            return bad(format!(
                "design_effect = {} must be in (0, 1)",
                self.design_effect
            ));
        }
        if !(self.design_power > 0.5 && self.design_power < 1.0) {
            return bad(format!(
                "design_power = {} must be in (0.5, 1)",
                self.design_power
            ));
        }
        if !(self.capacity_alpha > 0.0 && self.capacity_alpha < 0.5) {
            return bad(format!(
                "capacity_alpha = {} must be in (0, 0.5)",
                self.capacity_alpha
            ));
        }
        if self.level_runs == 0 || self.noise_runs == 0 {
            return bad("level_runs and noise_runs must be at least 1".into());
        }
        Ok(())
    }

    /// Whether a gate verdict fails the check: regressions and unmeasured candidates always,
    /// an inconclusive gate only with `inconclusive_fails`.
    pub fn fails(&self, gate: GateVerdict) -> bool {
        match gate {
            GateVerdict::Regression | GateVerdict::Unmeasured => true,
            GateVerdict::Inconclusive => self.inconclusive_fails,
            GateVerdict::Pass | GateVerdict::NoBaseline => false,
        }
    }

    /// Alpha of the cells x gating metrics family (Holm or BH).
    pub fn cell_alpha(&self) -> f64 {
        if self.matrix_test {
            self.alpha * (1.0 - self.matrix_alpha_share)
        } else {
            self.alpha
        }
    }

    /// Alpha of the matrix-wide test.
    pub fn matrix_alpha(&self) -> f64 {
        self.alpha * self.matrix_alpha_share
    }

    /// Settings of the noise fit.
    pub fn noise_settings(&self) -> NoiseSettings {
        NoiseSettings {
            shrinkage_df: self.shrinkage_df,
            prior_cv: self.prior_cv,
            prior_df: self.prior_df.max(0.5),
            outlier_z: self.outlier_z,
        }
    }

    /// The parameters as recorded in a report.
    pub fn summary(&self) -> RuleSummary {
        RuleSummary {
            alpha: self.alpha,
            min_effect: self.min_effect,
            noise_k: self.noise_k,
            correction: self.correction.as_str().to_string(),
            confidence: self.confidence,
        }
    }
}
