//! The one line for people that every comparison ends with (against a store, after adaptive
//! looks, over a confirmation boot's two boots, or paired A/B): the regressions with the
//! worst, the improvements with the best (an A/B run asking "does flag X help?" needs the
//! improvement as much as a gate needs the regression), the matrix-wide test, the undecided.

use crate::results::context_label;
use crate::verdict::{
    Against, CellComparison, CellVerdict, ComparisonReport, GateVerdict, Metric, signed_percent,
};

/// How a cell's reason names the two sides of a comparison.
pub(crate) struct Sides {
    /// The base before a noun: `no successful baseline measurement`, `missing in baseline`.
    pub base: &'static str,
    /// The base as a noun: `capacity-limited in the baseline`.
    pub the_base: &'static str,
    /// The base's runs a cell's capacity is counted over: `history runs`.
    pub history_runs: &'static str,
    /// The base's runs of the level: `newest baseline runs`.
    pub level_runs: &'static str,
    /// The candidate: `missing in candidate run …`.
    pub candidate: &'static str,
    /// The candidate's boots: `capacity-limited on 2 of 2 boots`.
    pub boots: &'static str,
}

impl Against {
    /// The words for its sides: a paired A/B's base is its A boots, its candidate the B boots.
    pub(crate) fn sides(self) -> Sides {
        match self {
            Against::Baseline => Sides {
                base: "baseline",
                the_base: "the baseline",
                history_runs: "history runs",
                level_runs: "newest baseline runs",
                candidate: "candidate",
                boots: "boots",
            },
            Against::PairedAb => Sides {
                base: "A",
                the_base: "A",
                history_runs: "A boots",
                level_runs: "A boots",
                candidate: "B",
                boots: "B boots",
            },
        }
    }
}

/// `C=8 / 32k`.
pub fn cell_label(concurrency: u32, context_tokens: u64) -> String {
    format!("C={concurrency} / {}", context_label(context_tokens))
}

/// A cell's [`cell_label`].
pub(crate) fn label(c: &CellComparison) -> String {
    cell_label(c.concurrency, c.context_tokens)
}

/// One line for people, e.g. "2 regressions, worst −7.4% at C=8 / 32k; 1 improvement, best
/// +4.0% at C=1 / 0; matrix −1.2% [−2.0%, −0.4%] regressed".
pub fn headline(report: &ComparisonReport) -> String {
    let mut line = body(report);
    if report.against == Against::PairedAb {
        line = format!("B vs A: {line}");
    }
    if let Some(c) = report.confirmation.as_ref().filter(|c| !c.used) {
        line.push_str(&format!(
            " · first boot only (the second boot's results were not used: {})",
            c.reason
        ));
    } else if let Some(first) = report
        .confirmation
        .as_ref()
        .and_then(|c| c.first_boot.as_ref())
    {
        // Why the second boot was made, in the words of `confirm::reason`: the first boot's
        // matrix change leaned worse, an alarm of that boot was provisional, or both.
        let leaned = first
            .check
            .as_ref()
            .is_some_and(crate::verdict::Check::beyond)
            .then(|| {
                format!(
                    "the first boot's matrix-wide change {} leaned worse",
                    signed_percent(first.change)
                )
            });
        let alarms = report
            .confirmation
            .as_ref()
            .map_or(0, |c| c.provisional_alarms);
        let provisional = match alarms {
            0 | 1 => "a first-boot alarm was provisional".to_string(),
            n => format!("{n} first-boot alarms were provisional"),
        };
        let why = match leaned {
            Some(leaned) if alarms > 0 => format!("{leaned}, and {provisional}"),
            Some(leaned) => leaned,
            None => provisional,
        };
        line.push_str(&format!(" · decided over 2 boots ({why})"));
    }
    match report.sensitivity.as_ref() {
        Some(s) if report.gate == GateVerdict::Insufficient && !s.sufficient => {
            line.push_str(&format!(
                " · not sensitive enough: {} can find a uniform {} at {:.0}% power, not the rule's {} ({})",
                s.unit.count(s.history_runs),
                signed_percent(s.mde),
                s.design_power * 100.0,
                signed_percent(-s.design_effect),
                s.needs(),
            ));
        }
        Some(s) if report.gate == GateVerdict::Pass => {
            line.push_str(&format!(
                " · this gate could detect a uniform {} or worse ({:.0}% power)",
                signed_percent(s.mde),
                s.design_power * 100.0
            ));
        }
        _ => {}
    }
    line
}

fn body(report: &ComparisonReport) -> String {
    let count = |v: CellVerdict| report.cells.iter().filter(|c| c.verdict == v).count();
    if report.gate == GateVerdict::NoBaseline {
        // Why there is nothing to compare with, when every cell says the same specific thing
        // (e.g. the baseline files are of another profile).
        let why = report
            .cells
            .first()
            .and_then(|c| c.reason.as_deref())
            .filter(|r| *r != "no baseline")
            .filter(|r| report.cells.iter().all(|c| c.reason.as_deref() == Some(*r)));
        return format!(
            "no baseline for profile {}: {} cells measured, nothing compared{}",
            report.profile.key,
            report.cells.len(),
            why.map(|r| format!(" ({r})")).unwrap_or_default()
        );
    }
    if report.gate == GateVerdict::Unmeasured {
        let mut line = report.unmeasured_reason();
        let errors: Vec<&CellComparison> = report
            .cells
            .iter()
            .filter(|c| c.verdict == CellVerdict::ErrorRegression)
            .collect();
        if let Some(first) = errors.first() {
            line.push_str(&format!(
                "; {} error regression{}, first at {}: {}",
                errors.len(),
                if errors.len() == 1 { "" } else { "s" },
                label(first),
                first.reason.as_deref().unwrap_or("no reason given")
            ));
        }
        return line;
    }
    // The total change of the metric a cell's verdict stands on (as the reports' grid shows
    // it), ordered by how good it is (the metric's direction taken into account) and written
    // in the metric's own sign, named when not the primary.
    let change = |c: &&CellComparison| {
        c.deciding().map(|m| {
            let shown = signed_percent(m.shown_change_total().change);
            let text = if m.metric == Metric::AggregateTps {
                shown
            } else {
                format!("{} {shown}", m.metric.as_str())
            };
            (m.goodness(), text)
        })
    };
    let matrix = report.matrix_test.as_ref().map(|m| {
        (
            m.verdict,
            format!(
                "matrix {} [{}, {}]",
                signed_percent(m.change),
                signed_percent(m.ci_low),
                signed_percent(m.ci_high)
            ),
        )
    });
    let mut parts = Vec::new();
    // Provisional alarms lead: they are what the gate waits on.
    let provisional = super::confirm::provisional_cells(report);
    if provisional > 0 {
        parts.push(format!(
            "{provisional} provisional alarm{} (a second boot decides)",
            if provisional == 1 { "" } else { "s" }
        ));
    }
    // Cells at their limit now that the history is too short to judge: the gate waits for runs.
    let short = report.cells.iter().filter(|c| c.history_too_short).count();
    if short > 0 {
        parts.push(format!(
            "{short} cell{} at {} limit now, too short a history to judge",
            if short == 1 { "" } else { "s" },
            if short == 1 { "its" } else { "their" }
        ));
    }
    let regressions: Vec<&CellComparison> = report.regressions().collect();
    if !regressions.is_empty() {
        let n = regressions.len();
        let mut s = format!("{n} regression{}", if n == 1 { "" } else { "s" });
        let worst = regressions
            .iter()
            .filter(|c| c.verdict == CellVerdict::Regression)
            .filter_map(|c| change(c).map(|x| (x, c)))
            .min_by(|a, b| a.0.0.total_cmp(&b.0.0));
        if let Some(((_, x), c)) = worst {
            s.push_str(&format!(", worst {x} at {}", label(c)));
        }
        // An error regression never reaches here: the gate is then `unmeasured` (above).
        let cap = count(CellVerdict::CapacityRegression);
        let sat = count(CellVerdict::SaturationRegression);
        let kinds: Vec<String> = [(cap, "capacity"), (sat, "saturation")]
            .into_iter()
            .filter(|(n, _)| *n > 0)
            .map(|(n, w)| format!("{n} {w}"))
            .collect();
        if !kinds.is_empty() {
            s.push_str(&format!(" ({})", kinds.join(", ")));
        }
        parts.push(s);
    }
    if let Some((CellVerdict::Regression, text)) = &matrix {
        parts.push(if regressions.is_empty() {
            format!("matrix-wide regression: {text}")
        } else {
            format!("{text} regressed")
        });
    }
    let improvements: Vec<&CellComparison> = report
        .cells
        .iter()
        .filter(|c| c.verdict == CellVerdict::Improvement)
        .collect();
    if !improvements.is_empty() {
        let n = improvements.len();
        let mut s = format!("{n} improvement{}", if n == 1 { "" } else { "s" });
        let best = improvements
            .iter()
            .filter_map(|c| change(c).map(|x| (x, c)))
            .max_by(|a, b| a.0.0.total_cmp(&b.0.0));
        if let Some(((_, x), c)) = best {
            s.push_str(&format!(", best {x} at {}", label(c)));
        }
        parts.push(s);
    }
    match &matrix {
        Some((CellVerdict::Improvement, text)) => parts.push(format!("{text} improved")),
        Some((CellVerdict::Regression, _)) => {}
        _ if !regressions.is_empty() || !improvements.is_empty() => {}
        other => {
            let compared = report.cells.len()
                - count(CellVerdict::NotComparable)
                - count(CellVerdict::Saturated);
            // Insufficient: not found, and not proven absent either (its interval may lie on
            // the worse side), as the reports' first line says.
            let mut s = if provisional > 0 {
                format!("no regression decided across {compared} cells")
            } else if report.gate == GateVerdict::Insufficient {
                format!("no regression proven across {compared} cells")
            } else {
                format!("no regressions across {compared} cells")
            };
            if let Some((_, text)) = other {
                s.push_str(&format!(" ({text})"));
            }
            parts.push(s);
        }
    }
    for (v, word) in [
        (CellVerdict::Inconclusive, "inconclusive"),
        (CellVerdict::Saturated, "saturated"),
        (CellVerdict::NotComparable, "not comparable"),
    ] {
        // A provisional alarm, or a cell waiting for history, is counted as such, not again.
        let n = report
            .cells
            .iter()
            .filter(|c| c.verdict == v && !c.provisional && !c.history_too_short)
            .count();
        if n > 0 {
            parts.push(format!("{n} {word}"));
        }
    }
    parts.join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::DecisionRule;
    use crate::verdict::{BaselineSummary, Direction, MatrixTest, MetricComparison};

    fn cell(c: u32, v: CellVerdict, change: f64) -> CellComparison {
        CellComparison {
            provisional: false,
            history_too_short: false,
            concurrency: c,
            context_tokens: 0,
            verdict: v,
            reason: None,
            metrics: vec![MetricComparison {
                metric: Metric::AggregateTps,
                direction: Direction::HigherIsBetter,
                baseline: 100.0,
                candidate: 100.0 * (1.0 + change),
                change,
                ci_low: change - 0.01,
                ci_high: change + 0.01,
                margin: 0.03,
                p_value: 0.5,
                p_adjusted: 0.5,
                verdict: v,
                check: None,
                decided_on: None,
            }],
        }
    }

    fn report(cells: Vec<CellComparison>, matrix: Option<MatrixTest>) -> ComparisonReport {
        let mut r = ComparisonReport {
            schema_version: 1,
            profile: crate::eval::gate::template().profile,
            suite: None,
            candidate_runs: vec!["b".into()],
            against: Default::default(),
            baseline: BaselineSummary {
                level_runs: vec!["a".into()],
                noise_runs: 1,
            },
            gate: GateVerdict::Pass,
            headline: String::new(),
            matrix_test: matrix,
            cells,
            lines: Vec::new(),
            confirmation: None,
            coverage: None,
            sensitivity: None,
            rule: DecisionRule::default().summary(),
        };
        r.gate = crate::stats::gate_of(&r);
        r
    }

    #[test]
    fn the_headline_names_regressions_and_improvements_alike() {
        let mut r = report(
            vec![
                cell(1, CellVerdict::Regression, -0.07),
                cell(2, CellVerdict::Improvement, 0.12),
                cell(4, CellVerdict::Unchanged, 0.0),
            ],
            None,
        );
        assert_eq!(
            headline(&r),
            "1 regression, worst −7.0% at C=1 / 0; 1 improvement, best +12.0% at C=2 / 0"
        );
        r.against = Against::PairedAb;
        assert!(headline(&r).starts_with("B vs A: 1 regression"));
    }

    #[test]
    fn the_worst_regression_is_the_one_decided_and_latency_reads_in_its_own_sign() {
        let mut ttft = cell(2, CellVerdict::Regression, 0.0);
        ttft.metrics[0].verdict = CellVerdict::Unchanged;
        ttft.metrics.push(MetricComparison {
            metric: Metric::TtftP50,
            direction: Direction::LowerIsBetter,
            change: 0.15,
            verdict: CellVerdict::Regression,
            ..ttft.metrics[0].clone()
        });
        let mut vs_run = cell(1, CellVerdict::Regression, -0.02);
        vs_run.metrics[0].decided_on = Some(crate::verdict::DecidedChange {
            basis: crate::verdict::DecisionBasis::VsRun,
            change: -0.09,
            ci_low: -0.12,
            ci_high: -0.06,
            matrix_change: None,
        });
        let r = report(vec![vs_run, ttft], None);
        // TTFT +15% is worse than tok/s −9% (decided on its run, total −2%).
        assert_eq!(
            headline(&r),
            "2 regressions, worst ttft_p50 +15.0% at C=2 / 0"
        );
    }

    #[test]
    fn the_matrix_test_and_undecided_cells_are_said() {
        let matrix = MatrixTest {
            change: -0.05,
            ci_low: -0.07,
            ci_high: -0.03,
            margin: 0.02,
            p_value: 0.001,
            verdict: CellVerdict::Regression,
            cells: 2,
            check: None,
        };
        let r = report(
            vec![
                cell(1, CellVerdict::Inconclusive, -0.05),
                cell(2, CellVerdict::NotComparable, 0.0),
            ],
            Some(matrix.clone()),
        );
        assert_eq!(
            headline(&r),
            "matrix-wide regression: matrix −5.0% [−7.0%, −3.0%]; 1 inconclusive; 1 not comparable"
        );
        let quiet = report(
            vec![cell(1, CellVerdict::Unchanged, 0.0)],
            Some(MatrixTest {
                verdict: CellVerdict::Unchanged,
                change: 0.001,
                ..matrix
            }),
        );
        assert_eq!(
            headline(&quiet),
            "no regressions across 1 cells (matrix +0.1% [−7.0%, −3.0%])"
        );
        // Not sensitive enough: nothing was found, and nothing was proven absent either.
        let mut thin = quiet;
        thin.gate = GateVerdict::Insufficient;
        assert!(
            headline(&thin).starts_with("no regression proven across 1 cells"),
            "{}",
            headline(&thin)
        );
    }
}
