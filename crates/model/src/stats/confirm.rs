//! The confirmation boot: every test decided over two boots, with a futility screen.
//!
//! Why two boots: a uniform slowdown is confounded with the candidate's own boot factor, and a
//! runner's boots are heavy-tailed (a throttled GPU, a noisy neighbour: one boot in twenty 4%
//! slow); a cell's own noise is drawn anew each boot too, and on real runners it is
//! heavy-tailed (one wild cell in a boot). So no regression is decided on one boot. The plan,
//! declared up front:
//!
//! 1. **first boot**: the rows, columns and cells are tested at their whole alpha
//!    (`rule.local_alpha()`), but a regression there is only provisional; the matrix-wide
//!    change only passes the futility screen: it must lean worse at one-sided
//!    p < `FUTILITY_P`, or the matrix test stops (no alpha spent). A clean pull request goes
//!    on about 5% of the time; one with no provisional alarm and no leaning matrix ends here.
//! 2. **second boot** (only when the screen leaned, an alarm is provisional, or a cell's
//!    bound lies below `-cell_effect`, or a gated latency's beyond its design effect, where a
//!    boot can decide it): both boots' runs are tested
//!    again, the local families at `rule.local_alpha()` and the matrix-wide change at
//!    `rule.matrix_alpha()`, and each regression stands only if the second boot alone leans
//!    worse in the same test past the same futility bound (the matrix-wide change: each boot
//!    alone). Either boot alone wild cannot make a regression: the other must lean worse too.
//!
//! Why the false-alarm rate stays at `alpha`: a regression needs a both-boots test to reject,
//! which has its family's level whatever the screens do (requiring more only lowers it); the
//! first boot decides none. Capacity spends its own (`rule.capacity_alpha()`). The union bound
//! adds them to `alpha`.

use infergate_schema::results::RunResults;
use infergate_schema::verdict::{
    ComparisonReport, Confirmation, ConfirmationReason, FirstBootMatrix, GateVerdict, MatrixThen,
    Metric, MetricComparison,
};

use super::compare::{History, Look, compare_on};
use super::{DecisionRule, StatsError, finish};

/// Whether a boot's matrix-wide change leaned worse past the futility bound.
fn leans(report: &ComparisonReport) -> bool {
    report
        .matrix_test
        .as_ref()
        .and_then(|m| m.check.as_ref())
        .is_some_and(infergate_schema::verdict::Check::beyond)
}

/// The first boot's look: with the plan (`[confirm]` on, the default) the local families at
/// their whole alpha, their regressions provisional, and the matrix-wide test only screened;
/// without it, one look that decides everything ([`Look::single`]). The plan has no knobs of
/// its own (`docs/statistics.md`).
pub fn first_look(rule: &DecisionRule, confirm: bool) -> Look {
    if !confirm {
        return Look::single(rule);
    }
    Look {
        name: "first boot".into(),
        matrix_alpha: None,
        design_boots: 2,
        local_provisional: true,
        ..Look::single(rule)
    }
}

/// Whether the first boot calls for a second: nothing is final yet (measured well enough, no
/// error or other regression that one boot decides), and the matrix-wide change leaned worse,
/// an alarm is provisional, a cell's bound lies below `-cell_effect` where a second boot can
/// decide it ([`uncovered_worth_a_boot`]), or a gated latency's or layer's bound lies beyond
/// what a pass vouches where a second boot could vouch for it ([`unvouched_worth_a_boot`]).
pub fn wants_confirmation(first: &ComparisonReport) -> bool {
    matches!(first.gate, GateVerdict::Pass | GateVerdict::Insufficient)
        && (leans(first)
            || provisional_cells(first) > 0
            || uncovered_worth_a_boot(first) > 0
            || unvouched_worth_a_boot(first).is_some())
}

/// Why the first boot called for a confirmation (or did not): the causes that hold, with the
/// numbers its words quote.
pub(crate) fn reason(first: &ComparisonReport) -> ConfirmationReason {
    let matrix = first.matrix_test.as_ref().and_then(|m| {
        m.check.as_ref().map(|c| FirstBootMatrix {
            change: m.change,
            statistic: c.statistic,
            boundary: c.boundary,
        })
    });
    let wants = wants_confirmation(first);
    let alarms = Some(provisional_cells(first)).filter(|&n| n > 0 && wants);
    let leans_worse = leans(first);
    let uncovered = uncovered_worth_a_boot(first);
    if wants && !leans_worse && alarms.is_none() {
        if uncovered > 0 {
            return ConfirmationReason::Uncovered {
                cells: uncovered,
                cell_effect: first.rule.cell_effect.unwrap_or_default(),
            };
        }
        if let Some((metric, cells, vouched_to)) = unvouched_worth_a_boot(first) {
            return ConfirmationReason::Unvouched {
                metric,
                cells,
                vouched_to,
            };
        }
    }
    match (matrix, alarms) {
        // Both causes hold: name both, as the headline does.
        (Some(matrix), Some(alarms)) if leans_worse => {
            ConfirmationReason::LeansWithAlarms { matrix, alarms }
        }
        (_, Some(alarms)) => ConfirmationReason::Alarms(alarms),
        (Some(matrix), None) => ConfirmationReason::Matrix {
            matrix,
            then: match (leans_worse, wants) {
                (true, true) => MatrixThen::SecondBoot,
                (true, false) => MatrixThen::Final,
                (false, _) => MatrixThen::Stops,
            },
        },
        (None, None) => ConfirmationReason::NoMatrixTest(first.gate),
    }
}

/// The verdict over both boots: both boots' runs compared at the both-boots look (the
/// matrix-wide test at its alpha, made only when the second boot alone leaned worse too;
/// capacity over both boots). Carries its [`Confirmation`].
pub fn second_stage(
    rule: &DecisionRule,
    baseline: &History,
    first: &ComparisonReport,
    first_runs: &[RunResults],
    second_runs: &[RunResults],
    second_results: &str,
) -> Result<ComparisonReport, StatsError> {
    let runs: Vec<RunResults> = first_runs.iter().chain(second_runs).cloned().collect();
    let look = Look::both_boots(rule, first_runs.len());
    let mut both = compare_on(baseline, &runs, rule, &look)?;
    both.confirmation = Some(Confirmation {
        reason: reason(first),
        first_boot: first.matrix_test.clone(),
        provisional_alarms: provisional_cells(first),
        second_results: second_results.into(),
        used: true,
        missing: false,
    });
    finish(&mut both);
    Ok(both)
}

/// How many cells one boot could not vouch for (their bound below `-cell_effect`) earn a
/// second boot. Where the baseline is sensitive, any such cell does: the second boot can
/// cover it and let the gate pass. Where it is not, the gate cannot pass whatever a boot
/// shows, so only a cell that reads at least half the stated size worse does: the second boot
/// can still find it a regression (a heavy-tailed cell is judged on each boot alone, which one
/// boot cannot do), and a cell near no change would only cost a boot. On a rough runner this
/// found a single −10% cell in 88% of gates instead of 59% (`docs/statistics.md`).
fn uncovered_worth_a_boot(first: &ComparisonReport) -> usize {
    let sensitive = first.sensitivity.as_ref().is_some_and(|s| s.sufficient);
    let effect = first.rule.cell_effect.unwrap_or_default();
    first
        .uncovered_cells()
        .iter()
        .filter(|(cell, _)| sensitive || cell.primary().is_some_and(|m| m.change < -effect / 2.0))
        .count()
}

/// The first gated metric besides aggregate tok/s whose bound one boot left beyond what a pass
/// vouches ([`ComparisonReport::uncovered_metrics`]: ITL p99's +50%, a prefill context's −20%),
/// with how many entries and that bound, where a second boot could let the gate pass: the
/// baseline is sensitive, and every such entry would be vouched for at no change
/// ([`at_no_change`]). What a second boot changes is the change, not the interval: a busy
/// first boot (up to +20% in every latency on `stats-eval`'s busy host) is averaged with a
/// quiet one, while the interval widens by the boots' scatter as often as it narrows. Where the
/// interval alone reaches the bound (a store whose tails scatter), a boot would not change the
/// verdict; on `stats-eval`'s busy store such boots turned 0.2% of clean gates into false
/// alarms and none into passes.
fn unvouched_worth_a_boot(first: &ComparisonReport) -> Option<(Metric, usize, f64)> {
    let sensitive = first.sensitivity.as_ref().is_some_and(|s| s.sufficient);
    let uncovered = first.uncovered_metrics();
    let in_reach = uncovered.iter().all(|(_, entries)| {
        entries
            .iter()
            .all(|(c, m)| at_no_change(m).within(c.vouched_to(m)))
    });
    let (metric, entries) = uncovered
        .into_iter()
        .next()
        .filter(|_| sensitive && in_reach)?;
    let (c, m) = entries.first()?;
    Some((metric, entries.len(), c.vouched_to(m)))
}

/// `m`'s interval moved to no change (in logs): what a candidate that did not change would be
/// vouched for, had its interval this width.
fn at_no_change(m: &MetricComparison) -> MetricComparison {
    let moved = |x: f64| (x.ln_1p() - m.change.ln_1p()).exp_m1();
    MetricComparison {
        change: 0.0,
        ci_low: moved(m.ci_low),
        ci_high: moved(m.ci_high),
        ..m.clone()
    }
}

/// Cells of a comparison that are provisional alarms (a local test's at the first boot, or
/// `stats::capacity`'s): each calls for a second boot, which decides it on both boots'
/// evidence.
pub(crate) fn provisional_cells(report: &ComparisonReport) -> usize {
    report
        .cells
        .iter()
        .chain(&report.prefill)
        .chain(&report.burst)
        .filter(|c| c.provisional)
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synthetic::{noisy_history, synthetic_run};
    use infergate_schema::answer::first_line;
    use infergate_schema::asserts::{assert_first_line, assert_gate, assert_not_gate};
    use infergate_schema::verdict::{CellVerdict, CheckOutcome, Found, LoneBoot};

    #[test]
    fn a_cell_one_boot_cannot_vouch_for_earns_a_second_boot_where_one_can_decide_it() {
        let mut first = infergate_schema::verdict::fixtures::pass();
        first.rule.cell_effect = Some(0.10);
        first.cells[0].metrics[0].ci_low = -0.12;
        finish(&mut first);
        assert_eq!(first.gate, GateVerdict::Insufficient);
        assert!(wants_confirmation(&first));
        assert!(
            matches!(
                reason(&first),
                ConfirmationReason::Uncovered { cells: 1, cell_effect } if cell_effect == 0.10
            ),
            "{:?}",
            reason(&first)
        );
        // Where the baseline is not sensitive the gate cannot pass: a cell near no change
        // costs no boot, one that reads at least half the stated size worse earns one (the
        // second boot can find it).
        if let Some(s) = first.sensitivity.as_mut() {
            s.sufficient = false;
        }
        first.cells[0].metrics[0].change = -0.04;
        assert!(!wants_confirmation(&first));
        first.cells[0].metrics[0].change = -0.06;
        assert!(wants_confirmation(&first));
        assert!(matches!(
            reason(&first),
            ConfirmationReason::Uncovered { cells: 1, .. }
        ));
    }

    #[test]
    fn a_gated_latency_one_boot_cannot_vouch_for_earns_a_second_boot_where_one_can_decide_it() {
        use infergate_schema::verdict::fixtures::metric_in;
        let mut first = infergate_schema::verdict::fixtures::pass();
        first.cell_metrics_gated = vec![Metric::ItlP90];
        for cell in 0..first.cells.len() {
            let m = metric_in(&mut first, cell, Metric::ItlP90);
            (m.margin, m.change, m.ci_high) = (0.25, 0.02, 0.20);
        }
        finish(&mut first);
        assert_eq!(first.gate, GateVerdict::Pass);
        assert!(!wants_confirmation(&first));
        // Two cells read +20% (a busy boot), their bounds +31%: a second boot may average the
        // busy one out, and their intervals are narrow enough to vouch for them then.
        for cell in [3, 4] {
            let m = metric_in(&mut first, cell, Metric::ItlP90);
            (m.change, m.ci_high) = (0.20, 0.31);
        }
        finish(&mut first);
        assert_eq!(first.gate, GateVerdict::Insufficient);
        assert!(wants_confirmation(&first));
        let why = reason(&first);
        assert!(
            matches!(
                why,
                ConfirmationReason::Unvouched { metric: Metric::ItlP90, cells: 2, vouched_to }
                    if vouched_to == 0.25
            ),
            "{why:?}"
        );
        // An interval that reaches +25% at no change (+31% from +2%: +28%) costs no boot: a
        // second boot moves the change, not the width, so the gate would stay insufficient.
        metric_in(&mut first, 3, Metric::ItlP90).change = 0.02;
        finish(&mut first);
        assert_eq!(first.gate, GateVerdict::Insufficient);
        assert!(!wants_confirmation(&first));
        // Nor where the baseline is not sensitive (the gate cannot pass).
        metric_in(&mut first, 3, Metric::ItlP90).change = 0.20;
        finish(&mut first);
        assert!(wants_confirmation(&first));
        if let Some(s) = first.sensitivity.as_mut() {
            s.sufficient = false;
        }
        assert!(!wants_confirmation(&first));
    }

    /// A history of 20 runs with a 1% run factor and 2% cell terms (seeded), and a noiseless
    /// candidate with every cell scaled by `factor` (so its direction is the test's, not the
    /// draw's).
    fn history_and_candidate(factor: f64) -> (Vec<RunResults>, RunResults) {
        use rand::SeedableRng;
        let mut rng = rand::rngs::StdRng::seed_from_u64(12345);
        let history = noisy_history(&mut rng, 20);
        let candidate = synthetic_run("cand", &mut rng, 0.0, 0.0, &|_| factor);
        (history, candidate)
    }

    fn verdict(first: f64, second: f64) -> (ComparisonReport, bool) {
        let (history, a) = history_and_candidate(first);
        let (_, b) = history_and_candidate(second);
        two_boots(&DecisionRule::default(), &history, &a, &b)
    }

    /// The gate's verdict over the two boots given (and whether it used the second).
    fn two_boots(
        rule: &DecisionRule,
        history: &[RunResults],
        first: &RunResults,
        second: &RunResults,
    ) -> (ComparisonReport, bool) {
        let history = std::sync::Arc::new(History::new(history));
        let r = super::super::judge::replay(
            history,
            rule,
            super::super::judge::Plan::default(),
            std::slice::from_ref(first),
            Some((std::slice::from_ref(second), "second")),
        )
        .expect("compare");
        (r.report, r.used_second)
    }

    /// The plan's first look at one boot.
    fn first_boot(
        rule: &DecisionRule,
        history: &[RunResults],
        run: &RunResults,
    ) -> ComparisonReport {
        super::super::compare::compare_at(
            history,
            std::slice::from_ref(run),
            rule,
            &first_look(rule, true),
        )
        .expect("compare")
    }

    /// A first boot that both leans worse and has provisional alarms: the reason (which the
    /// reports' Details quote) names both causes.
    #[test]
    fn both_causes_of_a_second_boot_are_named_on_both_surfaces() {
        use rand::SeedableRng;
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let history = noisy_history(&mut rng, 20);
        // A row 15% slower in a matrix 4% slower.
        let row = |i: usize| if (5..10).contains(&i) { 0.85 } else { 0.96 };
        let slow = synthetic_run("cand", &mut rng, 0.0, 0.0, &row);
        let rule = DecisionRule::default();
        let first = first_boot(&rule, &history, &slow);
        assert!(leans(&first), "{}", first_line(&first));
        assert_eq!(provisional_cells(&first), 5, "{}", first_line(&first));
        let (report, used) = two_boots(&rule, &history, &slow, &slow);
        assert!(used);
        let c = report.confirmation.as_ref().expect("a confirmation");
        assert_eq!(c.provisional_alarms, 5);
        assert!(
            matches!(
                c.reason,
                ConfirmationReason::LeansWithAlarms { alarms: 5, .. }
            ),
            "{:?}",
            c.reason
        );
        assert_first_line(&report, |l| l.ends_with(", confirmed on a second boot"));
    }

    /// One slow boot (either one) is never a regression; two are.
    #[test]
    fn a_regression_needs_both_boots_to_lean_worse() {
        // Both boots' mean alone short of its boundary: that test's line.
        let (report, used) = verdict(0.955, 1.0);
        assert!(used, "a −4.5% boot calls for a second boot");
        assert_not_gate(&report, GateVerdict::Regression);
        let c = report.matrix_test.as_ref().and_then(|m| m.check.as_ref());
        assert!(
            c.is_some_and(|c| c.look == "both boots" && c.statistic > c.boundary),
            "{c:?}"
        );
        // Both boots' mean past it, carried by the first boot alone: no regression.
        let (report, used) = verdict(0.90, 1.0);
        assert!(used);
        assert_not_gate(&report, GateVerdict::Regression);
        let c = report.matrix_test.as_ref().and_then(|m| m.check.as_ref());
        assert!(does_not_lean(c, LoneBoot::Second), "{c:?}");
        // The line is the second boot's own screen: its statistic short of its boundary.
        assert!(
            c.is_some_and(|c| c.screen
                && c.look.starts_with("second boot alone")
                && c.statistic > c.boundary),
            "{c:?}"
        );
        let (report, used) = verdict(0.955, 0.955);
        assert!(used);
        assert_gate(&report, GateVerdict::Regression);
        let check = report.check_lines();
        assert!(check[0].starts_with("matrix: t = −"), "{check:?}");
        assert!(check[0].contains("both boots"), "{check:?}");
        // The second boot slow alone, after a first boot at no change that one slow cell sent
        // on: the mean of the two is past its boundary, but the first boot does not lean, so
        // the matrix-wide test finds nothing (the cell is found on its own).
        use rand::SeedableRng;
        let (history, _) = history_and_candidate(1.0);
        let mut rng = rand::rngs::StdRng::seed_from_u64(99);
        let cell = |rest: f64| move |i: usize| if i == 3 { rest * 0.8 } else { rest };
        let first = synthetic_run("first", &mut rng, 0.0, 0.0, &cell(1.0));
        let second = synthetic_run("second", &mut rng, 0.0, 0.0, &cell(0.90));
        let (report, used) = two_boots(&DecisionRule::default(), &history, &first, &second);
        assert!(used);
        let c = report.matrix_test.as_ref().and_then(|m| m.check.as_ref());
        assert!(does_not_lean(c, LoneBoot::First), "{c:?}");
    }

    /// Whether a test's line says that `boot` alone does not lean worse.
    fn does_not_lean(check: Option<&infergate_schema::verdict::Check>, boot: LoneBoot) -> bool {
        check.is_some_and(|c| {
            matches!(
                c.outcome,
                CheckOutcome::BootDoesNotLean { found: Found::Regression, boot: b } if b == boot
            )
        })
    }

    /// A heavy-tailed runner's wild cell is drawn anew each boot: one wild boot of one cell is
    /// no regression, the same cell slow on both boots is.
    #[test]
    fn one_wild_cell_on_one_boot_is_no_regression() {
        use rand::SeedableRng;
        let mut rng = rand::rngs::StdRng::seed_from_u64(21);
        let history = noisy_history(&mut rng, 10);
        let wild = synthetic_run("wild", &mut rng, 0.0, 0.0, &|i| {
            if i == 3 { 0.8 } else { 1.0 }
        });
        let clean = synthetic_run("clean", &mut rng, 0.0, 0.0, &|_| 1.0);
        let rule = DecisionRule::default();
        let decide = |first, second| two_boots(&rule, &history, first, second);
        let (report, used) = decide(&wild, &clean);
        assert!(used, "a cell's alarm calls for a second boot");
        assert_not_gate(&report, GateVerdict::Regression);
        // The cleared cell's line is the second boot's own screen, among the deciding tests.
        let lines = report.check_lines();
        assert!(
            lines.iter().any(|l| l.starts_with("cell ")
                && l.contains("second boot alone, futility screen")
                && l.ends_with("does not lean worse")),
            "{lines:?}"
        );
        assert!(
            report
                .confirmation
                .as_ref()
                .is_some_and(|c| c.provisional_alarms == 1),
            "{}",
            first_line(&report)
        );
        // Every cell is unchanged.
        assert!(
            report
                .cells
                .iter()
                .all(|c| c.verdict == CellVerdict::Unchanged),
            "{}",
            first_line(&report)
        );
        // The first boot alone: the alarm is provisional, and its test's line says so.
        let first = first_boot(&rule, &history, &wild);
        assert_first_line(&first, |l| {
            l.starts_with("? insufficient: a second boot decides 1 provisional alarm (C=")
        });
        assert!(
            first
                .check_lines()
                .iter()
                .any(|l| l.ends_with("first boot) → provisional regression: a second boot decides")),
            "{:?}",
            first.check_lines()
        );
        let (report, _) = decide(&wild, &wild);
        assert_gate(&report, GateVerdict::Regression);
        assert_eq!(report.regressions().count(), 1, "{}", first_line(&report));
    }

    #[test]
    fn a_clean_first_boot_stops_and_local_regressions_wait_for_the_second_boot() {
        let (report, used) = verdict(1.0, 0.5);
        assert!(!used, "{}", first_line(&report));
        assert_ne!(report.gate, GateVerdict::Regression);
        assert!(report.confirmation.as_ref().is_some_and(|c| !c.used));
        // A row 15% slower: provisional at the first boot, decided over both.
        use rand::SeedableRng;
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let history = noisy_history(&mut rng, 20);
        let row = |i: usize| if (5..10).contains(&i) { 0.85 } else { 1.0 };
        let slow = synthetic_run("cand", &mut rng, 0.0, 0.0, &row);
        let clean = synthetic_run("clean", &mut rng, 0.0, 0.0, &|_| 1.0);
        let rule = DecisionRule::default();
        let first = first_boot(&rule, &history, &slow);
        assert_gate(&first, GateVerdict::Insufficient);
        assert_eq!(provisional_cells(&first), 5, "{}", first_line(&first));
        assert!(
            first
                .cells
                .iter()
                .all(|c| c.verdict != CellVerdict::Regression)
        );
        assert!(wants_confirmation(&first));
        let both = |second| {
            let (report, used) = two_boots(&rule, &history, &slow, second);
            assert!(used);
            report
        };
        // The row slow on the second boot too: a regression of its five cells.
        let confirmed = both(&slow);
        assert_gate(&confirmed, GateVerdict::Regression);
        let regressed = confirmed.cells.iter().filter(|c| c.verdict.is_regression());
        assert_eq!(regressed.count(), 5, "{}", first_line(&confirmed));
        assert_eq!(provisional_cells(&confirmed), 0);
        // Clean on the second: each of the row's cells is cleared by the second boot's own
        // screen, and the row, whose cells each found their change alone, is no regression
        // either.
        let cleared = both(&clean);
        assert_not_gate(&cleared, GateVerdict::Regression);
        let screened = cleared.cells[5..10].iter().filter(|c| {
            c.verdict == CellVerdict::Unchanged
                && c.primary().and_then(|m| m.check.as_ref()).is_some_and(|k| {
                    k.screen
                        && k.look.starts_with("second boot alone")
                        && matches!(
                            k.outcome,
                            CheckOutcome::BootDoesNotLean {
                                found: Found::Regression,
                                boot: LoneBoot::Second
                            }
                        )
                })
        });
        assert_eq!(screened.count(), 5, "{}", first_line(&cleared));
        assert!(
            cleared
                .lines
                .iter()
                .all(|l| l.test.verdict == CellVerdict::Unchanged),
            "{:?}",
            cleared.lines
        );
        // Leaning better: nothing to confirm.
        let (history, faster) = history_and_candidate(1.03);
        let better = first_boot(&rule, &history, &faster);
        assert!(!wants_confirmation(&better));
        assert_ne!(
            better.matrix_test.as_ref().map(|m| m.verdict),
            Some(CellVerdict::Regression)
        );
    }
}
