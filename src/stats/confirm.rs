//! The confirmation boot: a two-stage (group-sequential) matrix-wide test.
//!
//! Why: a uniform slowdown is confounded with the candidate's own boot factor (clocks,
//! thermals, the boot), and one boot cannot tell them apart — with one candidate run a uniform
//! −5% is found ~87% of the time at a 1% false-alarm rate (`docs/statistics.md`). A second boot
//! halves that variance, but booting twice for every PR doubles the GPU time. So the gate boots
//! a second time only when the first boot's matrix-wide change *looks* like a regression
//! (one-sided p-value below `p_below`, about 5% of clean PRs) and then tests both boots
//! together.
//!
//! Why the false-alarm rate stays at `alpha`: the matrix test's share of alpha is split between
//! the two stages (`first_share` at the first boot, the rest at the confirmation), and the
//! cells' family spends all of its share at the first boot (the confirmation adds no per-cell
//! claims of its own; cells only follow a confirmed matrix-wide change). The stage alphas add up
//! to the rule's `alpha`, so by the union bound the chance of any false alarm over both stages
//! stays at most `alpha`, whatever the correlation between them. Stopping early when the first
//! boot looks clean (the usual case) only lowers it.

use serde::{Deserialize, Serialize};

use crate::results::RunResults;
use crate::verdict::{CellVerdict, ComparisonReport, Confirmation, GateVerdict, signed_percent};

use super::{Against, DecisionRule, StatsError, compare, finish};

/// When to boot a second time, and how the matrix test's alpha is split between the boots.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ConfirmPlan {
    /// Boot again when the first boot's matrix-wide one-sided p-value ("worse") is below this
    /// and the gate has not already regressed. The share of clean PRs that pay a second boot.
    pub p_below: f64,
    /// Share of the matrix test's alpha spent at the first boot; the rest is kept for the
    /// confirmation.
    pub first_share: f64,
}

impl Default for ConfirmPlan {
    fn default() -> Self {
        ConfirmPlan {
            p_below: 0.05,
            first_share: 0.5,
        }
    }
}

/// The smallest share used where a family gets (almost) no alpha: the rule keeps its shape
/// (`matrix_alpha_share` must stay inside (0, 1)) while the family can claim nothing.
const NO_SHARE: f64 = 1e-9;

impl ConfirmPlan {
    /// Checks the parameters; the error names the field and the valid range.
    pub fn validate(&self) -> Result<(), StatsError> {
        if !(self.p_below > 0.0 && self.p_below <= 0.5) {
            return Err(StatsError::InvalidRule(format!(
                "confirm p_below = {} must be in (0, 0.5]",
                self.p_below
            )));
        }
        if !(self.first_share > 0.0 && self.first_share < 1.0) {
            return Err(StatsError::InvalidRule(format!(
                "confirm first_share = {} must be in (0, 1)",
                self.first_share
            )));
        }
        Ok(())
    }

    /// Whether the plan changes anything: without the matrix-wide test there is nothing to
    /// confirm.
    pub fn applies(&self, rule: &DecisionRule) -> bool {
        rule.matrix_test
    }

    /// The rule of the first boot: the cells keep their whole share, the matrix test gets
    /// `first_share` of its own.
    pub fn first_rule(&self, rule: &DecisionRule) -> DecisionRule {
        if !self.applies(rule) {
            return rule.clone();
        }
        let cells = rule.cell_alpha();
        let matrix = rule.matrix_alpha() * self.first_share;
        let mut r = rule.clone();
        r.alpha = cells + matrix;
        r.matrix_alpha_share = (matrix / r.alpha).clamp(NO_SHARE, 1.0 - NO_SHARE);
        r
    }

    /// The rule of the confirmation (both boots as repetitions): the matrix test gets the rest
    /// of its alpha, the cells none (their share was spent at the first boot; `NO_SHARE` of the
    /// stage's alpha, ~1e-12, is the least the rule's shape allows).
    pub fn second_rule(&self, rule: &DecisionRule) -> DecisionRule {
        if !self.applies(rule) {
            return rule.clone();
        }
        let matrix = rule.matrix_alpha() * (1.0 - self.first_share);
        let mut r = rule.clone();
        r.alpha = matrix.min(0.499);
        r.matrix_alpha_share = 1.0 - NO_SHARE;
        r
    }

    /// Whether the first boot's comparison (made with [`first_rule`](Self::first_rule)) calls
    /// for a second boot: the gate has not regressed (a regression is final: a second boot
    /// cannot change the exit code) and the matrix-wide change leans towards worse with a
    /// one-sided p-value below `p_below`.
    pub fn wants_confirmation(&self, rule: &DecisionRule, first: &ComparisonReport) -> bool {
        let open = matches!(first.gate, GateVerdict::Pass | GateVerdict::Inconclusive);
        self.applies(rule)
            && open
            && (first
                .matrix_test
                .as_ref()
                .is_some_and(|m| m.verdict != CellVerdict::Regression && m.p_value < self.p_below)
                || provisional_cells(first) > 0)
    }
}

impl ConfirmPlan {
    /// Why the first boot called for a confirmation (or did not), for people.
    pub fn reason(&self, first: &ComparisonReport) -> String {
        let provisional = provisional_cells(first);
        if provisional > 0 && matches!(first.gate, GateVerdict::Pass | GateVerdict::Inconclusive) {
            let (c, l) = first
                .cells
                .iter()
                .find(|c| c.provisional)
                .map(|c| (c.concurrency, c.context_tokens))
                .unwrap_or_default();
            return format!(
                "the first boot has {provisional} provisional alarm(s) (capacity-limited or saturated where the history practically never was; first at C={c} / {}): one boot cannot prove them",
                crate::results::context_label(l)
            );
        }
        match &first.matrix_test {
            Some(m) if m.p_value < self.p_below && m.verdict != CellVerdict::Regression => format!(
                "the first boot's matrix-wide change is {} [{}, {}] with p = {:.3} < {}: not proven, but leaning towards a regression",
                signed_percent(m.change),
                signed_percent(m.ci_low),
                signed_percent(m.ci_high),
                m.p_value,
                self.p_below
            ),
            Some(m) => format!(
                "the first boot's verdict is `{}` and its matrix-wide change {} with p = {:.3} (a second boot only when p < {} and nothing regressed yet)",
                first.gate.as_str(),
                signed_percent(m.change),
                m.p_value,
                self.p_below
            ),
            None => format!(
                "the first boot's verdict is `{}` without a matrix-wide test",
                first.gate.as_str()
            ),
        }
    }

    /// The verdict over both boots: `both` (the comparison of both boots' runs with
    /// [`second_rule`](Self::second_rule)) carrying its [`Confirmation`], headline redone.
    pub fn confirmed(
        &self,
        first: &ComparisonReport,
        mut both: ComparisonReport,
        second_results: &str,
    ) -> ComparisonReport {
        both.confirmation = Some(Confirmation {
            reason: self.reason(first),
            first_boot: first.matrix_test.clone(),
            second_results: second_results.into(),
            used: true,
        });
        finish(&mut both, Against::Baseline);
        both
    }
}

/// Cells of a comparison that are provisional alarms (`stats::capacity`): each calls for a
/// second boot, which decides it on both boots' evidence.
pub(crate) fn provisional_cells(report: &ComparisonReport) -> usize {
    report.cells.iter().filter(|c| c.provisional).count()
}

/// The gate's verdict over the boots `run` would make, from results in hand: the first boot's
/// runs compared with the plan's first-stage rule; when [`ConfirmPlan::wants_confirmation`]
/// and a second boot's runs are given, both boots with the second-stage rule. The one
/// two-stage combination: `run` (through [`ConfirmPlan::confirmed`]), `compare --confirmation`
/// and `stats-eval` all decide with it. With `second` given but not wanted, the first boot's
/// verdict carries a `confirmation` with `used: false` saying why. Returns the verdict and
/// whether the second boot entered it.
pub fn two_boot_verdict(
    plan: Option<&ConfirmPlan>,
    rule: &DecisionRule,
    baseline: &[RunResults],
    first: &[RunResults],
    second: Option<(&[RunResults], &str)>,
) -> Result<(ComparisonReport, bool), StatsError> {
    let Some(plan) = plan.filter(|p| p.applies(rule)) else {
        return Ok((compare(baseline, first, rule)?, false));
    };
    let first_report = compare(baseline, first, &plan.first_rule(rule))?;
    let Some((second, second_results)) = second else {
        return Ok((first_report, false));
    };
    if !plan.wants_confirmation(rule, &first_report) {
        let mut report = first_report;
        report.confirmation = Some(Confirmation {
            reason: plan.reason(&report),
            first_boot: None,
            second_results: second_results.into(),
            used: false,
        });
        finish(&mut report, Against::Baseline);
        return Ok((report, false));
    }
    let runs: Vec<RunResults> = first.iter().chain(second).cloned().collect();
    let both = compare(baseline, &runs, &plan.second_rule(rule))?;
    Ok((plan.confirmed(&first_report, both, second_results), true))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::eval::synthetic_run;

    #[test]
    fn the_stages_spend_exactly_the_rules_alpha() {
        let rule = DecisionRule::default();
        let plan = ConfirmPlan::default();
        let first = plan.first_rule(&rule);
        let second = plan.second_rule(&rule);
        first.validate().expect("first rule valid");
        second.validate().expect("second rule valid");
        // The cells keep their whole share at the first boot.
        assert!((first.cell_alpha() - rule.cell_alpha()).abs() < 1e-15);
        // The matrix test's alpha is split, and nothing else is spent at the second boot.
        let matrix = first.matrix_alpha() + second.matrix_alpha();
        assert!((matrix - rule.matrix_alpha()).abs() < 1e-8 * rule.alpha);
        assert!(second.cell_alpha() < 1e-10);
        let total = first.alpha + second.alpha;
        assert!(total <= rule.alpha + 1e-12, "{total}");
    }

    #[test]
    fn without_the_matrix_test_nothing_changes() {
        let rule = DecisionRule {
            matrix_test: false,
            ..DecisionRule::default()
        };
        let plan = ConfirmPlan::default();
        assert_eq!(plan.first_rule(&rule), rule);
        assert_eq!(plan.second_rule(&rule), rule);
        assert!(!plan.applies(&rule));
    }

    /// A history of 20 runs with a 1% run factor and 2% cell terms (seeded), and a noiseless
    /// candidate with every cell scaled by `factor` (so its direction is the test's, not the
    /// draw's).
    fn history_and_candidate(
        factor: f64,
    ) -> (Vec<crate::results::RunResults>, crate::results::RunResults) {
        use rand::SeedableRng;
        let mut rng = rand::rngs::StdRng::seed_from_u64(12345);
        let history = (0..20)
            .map(|i| synthetic_run(&format!("b{i}"), &mut rng, 0.01, 0.02, &|_| 1.0))
            .collect();
        let candidate = synthetic_run("cand", &mut rng, 0.0, 0.0, &|_| factor);
        (history, candidate)
    }

    #[test]
    fn only_an_open_gate_leaning_worse_is_confirmed() {
        let rule = DecisionRule::default();
        let plan = ConfirmPlan {
            p_below: 0.5,
            ..ConfirmPlan::default()
        };
        let first = plan.first_rule(&rule);
        let verdict = |factor: f64| {
            let (history, cand) = history_and_candidate(factor);
            super::super::compare(&history, std::slice::from_ref(&cand), &first).expect("compare")
        };
        // Leaning worse, not proven: confirm.
        let slightly_worse = verdict(0.985);
        assert_ne!(slightly_worse.gate, GateVerdict::Regression);
        assert!(
            plan.wants_confirmation(&rule, &slightly_worse),
            "{slightly_worse:?}"
        );
        // Already a regression: a second boot cannot change the exit code.
        let much_worse = verdict(0.80);
        assert_eq!(much_worse.gate, GateVerdict::Regression);
        assert!(!plan.wants_confirmation(&rule, &much_worse));
        // Leaning better: nothing to confirm.
        let better = verdict(1.02);
        assert!(!plan.wants_confirmation(&rule, &better), "{better:?}");
        // The default trigger (p < 0.05) does not fire on an unchanged candidate.
        assert!(!ConfirmPlan::default().wants_confirmation(&rule, &verdict(1.0)));
    }

    #[test]
    fn bad_plans_name_the_field() {
        let e = ConfirmPlan {
            p_below: 0.0,
            ..ConfirmPlan::default()
        }
        .validate()
        .unwrap_err()
        .to_string();
        assert!(e.contains("p_below"), "{e}");
        let e = ConfirmPlan {
            first_share: 1.0,
            ..ConfirmPlan::default()
        }
        .validate()
        .unwrap_err()
        .to_string();
        assert!(e.contains("first_share"), "{e}");
    }
}
