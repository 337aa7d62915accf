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
use crate::verdict::{
    CellVerdict, ComparisonReport, Confirmation, DecisionBasis, GateVerdict, LineAxis,
    signed_percent,
};

use super::{Against, DecisionRule, StatsError, compare, finish};

/// When to boot a second time, and how the matrix test's alpha is split between the boots.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ConfirmPlan {
    /// Boot again when the first boot's matrix-wide one-sided p-value ("worse") is below this
    /// and the gate has not already regressed. The share of clean PRs that pay a second boot.
    pub p_below: f64,
    /// Share of the rule's alpha spent at the first boot, on alarms so overwhelming that they
    /// are final without a second boot; the rest is kept for the confirmation.
    pub first_share: f64,
    /// Family-wise alpha of the first boot's screen: an alarm at this loose level (any cell,
    /// row, column, the matrix test, or a capacity regression) is provisional and calls for
    /// the second boot.
    pub screen_alpha: f64,
    /// An alarm over both boots stands only when the second boot alone leans the same way
    /// with a one-sided p-value below this (a capacity regression: is capacity-limited again).
    pub recur_p: f64,
}

impl Default for ConfirmPlan {
    fn default() -> Self {
        ConfirmPlan {
            p_below: 0.04,
            first_share: 0.02,
            screen_alpha: 0.02,
            recur_p: 0.035,
        }
    }
}

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
        for (name, v) in [
            ("screen_alpha", self.screen_alpha),
            ("recur_p", self.recur_p),
        ] {
            if !(v > 0.0 && v < 0.5) {
                return Err(StatsError::InvalidRule(format!(
                    "confirm {name} = {v} must be in (0, 0.5)"
                )));
            }
        }
        Ok(())
    }

    /// Whether the plan changes anything: without the matrix-wide test there is nothing to
    /// confirm.
    pub fn applies(&self, rule: &DecisionRule) -> bool {
        rule.matrix_test
    }

    /// The rule of the first boot's final alarms: `first_share` of the rule's alpha, every
    /// family in its usual proportions (only overwhelming alarms pass it).
    pub fn first_rule(&self, rule: &DecisionRule) -> DecisionRule {
        if !self.applies(rule) {
            return rule.clone();
        }
        let mut r = rule.clone();
        r.alpha = rule.alpha * self.first_share;
        r
    }

    /// The rule of the first boot's screen: `screen_alpha`, every family in its usual
    /// proportions. Its alarms are provisional: they only call for the second boot.
    pub fn screen_rule(&self, rule: &DecisionRule) -> DecisionRule {
        let mut r = rule.clone();
        r.alpha = self.screen_alpha.max(rule.alpha);
        r
    }

    /// The rule of the confirmation (both boots as repetitions): the rest of the alpha.
    pub fn second_rule(&self, rule: &DecisionRule) -> DecisionRule {
        if !self.applies(rule) {
            return rule.clone();
        }
        let mut r = rule.clone();
        r.alpha = rule.alpha * (1.0 - self.first_share);
        r
    }

    /// Whether the first boot calls for a second boot: its final comparison (made with
    /// [`first_rule`](Self::first_rule)) is open (a regression at the first stage is
    /// overwhelming and final — unless it rests on the matrix-wide test alone and is no worse
    /// than one run of the history strayed; an unmeasured candidate is final too), and either the screen
    /// (the first boot's runs against `baseline` with [`screen_rule`](Self::screen_rule))
    /// raised a provisional alarm, or the matrix-wide change leans towards worse with a
    /// one-sided p-value below `p_below`.
    pub fn wants_confirmation(
        &self,
        rule: &DecisionRule,
        first: &ComparisonReport,
        baseline: &[RunResults],
        first_runs: &[RunResults],
    ) -> Result<bool, StatsError> {
        if !self.applies(rule) {
            return Ok(false);
        }
        if within_history_excursions(first) {
            return Ok(true);
        }
        if !matches!(first.gate, GateVerdict::Pass | GateVerdict::Inconclusive) {
            return Ok(false);
        }
        if first
            .matrix_test
            .as_ref()
            .is_some_and(|m| m.verdict != CellVerdict::Regression && m.p_value < self.p_below)
        {
            return Ok(true);
        }
        // A capacity or saturation change one boot cannot prove (`stats::capacity`).
        if provisional_cells(first) > 0 {
            return Ok(true);
        }
        let screen = compare(baseline, first_runs, &self.screen_rule(rule))?;
        Ok(screen.gate == GateVerdict::Regression)
    }

    /// The verdict over both boots: both boots' runs compared with
    /// [`second_rule`](Self::second_rule), and every alarm of it kept only when the second
    /// boot alone shows it again (its own one-sided p-value below `recur_p`, or the cell
    /// capacity-limited again); an alarm that does not recur becomes `inconclusive`, saying
    /// why. Carries its [`Confirmation`], headline redone.
    pub fn second_stage(
        &self,
        rule: &DecisionRule,
        baseline: &[RunResults],
        first: &ComparisonReport,
        first_runs: &[RunResults],
        second_runs: &[RunResults],
        second_results: &str,
    ) -> Result<ComparisonReport, StatsError> {
        let runs: Vec<RunResults> = first_runs.iter().chain(second_runs).cloned().collect();
        let mut both = compare(baseline, &runs, &self.second_rule(rule))?;
        let alone = compare(baseline, second_runs, &self.second_rule(rule))?;
        self.keep_recurring(&mut both, &alone);
        Ok(self.confirmed(first, both, second_results))
    }

    /// Keeps the alarms of `both` that the second boot `alone` shows again.
    fn keep_recurring(&self, both: &mut ComparisonReport, alone: &ComparisonReport) {
        let p = self.recur_p;
        let matrix_recurs = alone.matrix_test.as_ref().map(|m| m.p_value);
        let drop = |v: &mut CellVerdict, reason: &mut Option<String>, what: String| {
            *v = CellVerdict::Inconclusive;
            let before = reason.take().unwrap_or_default();
            *reason = Some(if before.is_empty() {
                format!("not shown again by the second boot alone ({what})")
            } else {
                format!("{before}; not shown again by the second boot alone ({what})")
            });
        };
        if let Some(m) = both.matrix_test.as_mut()
            && m.verdict == CellVerdict::Regression
            && matrix_recurs.is_none_or(|q| q >= p)
        {
            m.verdict = CellVerdict::Inconclusive;
        }
        let line_p = |axis: LineAxis, at: u64| {
            alone
                .lines
                .iter()
                .find(|l| l.axis == axis && l.at == at)
                .map(|l| l.test.p_value)
        };
        for l in &mut both.lines {
            if l.test.verdict == CellVerdict::Regression
                && line_p(l.axis, l.at).is_none_or(|q| q >= p)
            {
                l.test.verdict = CellVerdict::Inconclusive;
            }
        }
        for cell in &mut both.cells {
            let again = alone.cells.iter().find(|c| {
                (c.concurrency, c.context_tokens) == (cell.concurrency, cell.context_tokens)
            });
            // Capacity and saturation regressions already need the state on every boot
            // (`stats::capacity` decides them over both boots with its own bound); the
            // second boot alone is never enough for one, so only speed regressions are
            // asked to recur.
            if cell.verdict == CellVerdict::Regression {
                let own = again.and_then(|c| c.primary()).map(|m| m.p_value);
                let row = line_p(LineAxis::Context, cell.context_tokens);
                let column = line_p(LineAxis::Concurrency, u64::from(cell.concurrency));
                let with_matrix = cell
                    .primary()
                    .and_then(|m| m.decided_on)
                    .is_some_and(|d| d.basis == crate::verdict::DecisionBasis::WithMatrix);
                let best = if with_matrix {
                    matrix_recurs
                } else {
                    [own, row, column].into_iter().flatten().reduce(f64::min)
                };
                if best.is_none_or(|q| q >= p) {
                    let what = best.map_or_else(
                        || "not measured".to_string(),
                        |q| format!("p = {q:.3} ≥ {p}"),
                    );
                    drop(&mut cell.verdict, &mut cell.reason, what);
                    for m in &mut cell.metrics {
                        if m.verdict == CellVerdict::Regression {
                            m.verdict = CellVerdict::Inconclusive;
                        }
                    }
                }
            }
        }
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
            Some(m) if within_history_excursions(first) => format!(
                "the first boot's matrix-wide change is {} [{}, {}] (p = {:.2e}), but one run of the history strayed as far ({}): one boot cannot tell it from a slow boot",
                signed_percent(m.change),
                signed_percent(m.ci_low),
                signed_percent(m.ci_high),
                m.p_value,
                m.history_worst.map(signed_percent).unwrap_or_default()
            ),
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

/// Whether a first boot's regression rests on the matrix-wide test alone (no cell, row,
/// column, capacity or error regression of its own) with a change no worse than one whole run
/// of the history strayed: one boot cannot tell such a change from one more slow boot (a
/// runner's boots are heavy-tailed: a throttled GPU, a noisy neighbour), so it is not final.
fn within_history_excursions(first: &ComparisonReport) -> bool {
    let Some(m) = first.matrix_test.as_ref() else {
        return false;
    };
    let matrix_only = first
        .cells
        .iter()
        .filter(|c| c.verdict.is_regression())
        .all(|c| {
            c.verdict == CellVerdict::Regression
                && c.deciding()
                    .and_then(|d| d.decided_on)
                    .is_some_and(|d| d.basis == DecisionBasis::WithMatrix)
        })
        && !first
            .lines
            .iter()
            .any(|l| l.test.verdict == CellVerdict::Regression);
    first.gate == GateVerdict::Regression
        && m.verdict == CellVerdict::Regression
        && matrix_only
        && m.history_worst.is_some_and(|w| m.change >= w)
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
    if !plan.wants_confirmation(rule, &first_report, baseline, first)? {
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
    let report = plan.second_stage(rule, baseline, &first_report, first, second, second_results)?;
    Ok((report, true))
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
        // Overwhelming alarms at the first boot plus the confirmation: the rule's alpha.
        let total = first.alpha + second.alpha;
        assert!((total - rule.alpha).abs() < 1e-12, "{total}");
        // The screen spends nothing: its alarms are provisional.
        assert!(plan.screen_rule(&rule).alpha >= rule.alpha);
    }

    /// A provisional alarm of one boot does not stand when the other boot does not show it.
    #[test]
    fn an_alarm_of_one_slow_boot_does_not_stand() {
        let rule = DecisionRule::default();
        let plan = ConfirmPlan::default();
        let (history, slow) = history_and_candidate(0.955);
        let (_, clean) = history_and_candidate(1.0);
        let after_slow = |second: &RunResults| {
            two_boot_verdict(
                Some(&plan),
                &rule,
                &history,
                std::slice::from_ref(&slow),
                Some((std::slice::from_ref(second), "second")),
            )
            .expect("compare")
        };
        let (report, used) = after_slow(&clean);
        assert!(used, "a -4.5% boot calls for a second boot");
        assert_ne!(report.gate, GateVerdict::Regression, "{}", report.headline);
        // Both boots slow: it stands.
        let (report, used) = after_slow(&slow);
        assert!(used);
        assert_eq!(report.gate, GateVerdict::Regression, "{}", report.headline);
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
        let wants = |factor: f64| {
            let (history, cand) = history_and_candidate(factor);
            let report = verdict(factor);
            plan.wants_confirmation(&rule, &report, &history, std::slice::from_ref(&cand))
                .expect("screen")
        };
        // Leaning worse, not proven: confirm.
        let slightly_worse = verdict(0.985);
        assert_ne!(slightly_worse.gate, GateVerdict::Regression);
        assert!(wants(0.985), "{slightly_worse:?}");
        // Overwhelming at the first boot: final, a second boot cannot change the exit code.
        let much_worse = verdict(0.80);
        assert_eq!(much_worse.gate, GateVerdict::Regression);
        assert!(!wants(0.80));
        // Leaning better: nothing to confirm.
        assert!(!wants(1.02));
        // The default trigger does not fire on an unchanged candidate.
        let (history, cand) = history_and_candidate(1.0);
        assert!(
            !ConfirmPlan::default()
                .wants_confirmation(&rule, &verdict(1.0), &history, std::slice::from_ref(&cand))
                .expect("screen")
        );
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
