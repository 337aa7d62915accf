//! The pieces every comparison report is built from, shared by the comparison against a store
//! ([`super::compare`]) and the paired A/B comparison ([`super::paired`]): cell coordinates,
//! the report's frame, the matrix-wide test, each cell's verdict from its metrics, and the
//! gate's answer (the headline, its words, is set where the report is written:
//! `ComparisonReport::set_headline`).

use infergate_schema::results::{CellResult, ProfileKey, RunResults};
use infergate_schema::verdict::{
    BaselineSummary, CellComparison, CellReason, CellVerdict, Check, ComparisonReport, Direction,
    GateVerdict, MatrixTest, Metric, MetricComparison, NotCompared,
};

use super::DecisionRule;
use super::capacity::LimitDecision;
use super::interval::{LogChange, relative};

/// A cell's coordinates: (concurrency, context tokens).
pub(crate) type Coord = (u32, u64);

/// The cell of `run` at `coord`.
pub(crate) fn find(run: &RunResults, coord: Coord) -> Option<&CellResult> {
    run.cells.iter().find(|c| c.coord() == coord)
}

/// The coordinates of every cell of `runs`, in order of first appearance.
pub(crate) fn coords<'a>(runs: impl IntoIterator<Item = &'a RunResults>) -> Vec<Coord> {
    first_seen(
        runs.into_iter()
            .flat_map(|r| r.cells.iter().map(|c| c.coord())),
    )
}

/// Each of `coords` once, in order of first appearance.
pub(crate) fn first_seen(coords: impl IntoIterator<Item = Coord>) -> Vec<Coord> {
    let mut out = Vec::new();
    for c in coords {
        if !out.contains(&c) {
            out.push(c);
        }
    }
    out
}

/// Arithmetic mean (NaN for an empty slice).
pub fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len() as f64
}

/// Sample variance (n − 1); 0 with fewer than two values.
pub(crate) fn var(v: &[f64]) -> f64 {
    if v.len() < 2 {
        return 0.0;
    }
    let m = mean(v);
    v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (v.len() as f64 - 1.0)
}

/// The logs of the positive, finite values (a rate of 0 or a missing one has no log).
pub(crate) fn positive_logs(values: impl IntoIterator<Item = f64>) -> Vec<f64> {
    values
        .into_iter()
        .filter(|v| v.is_finite() && *v > 0.0)
        .map(f64::ln)
        .collect()
}

/// Variance of the mean of a cell's log sub-window samples (its within-run noise); 0 with
/// fewer than two positive samples.
pub(crate) fn within_run_var(samples: &[f64]) -> f64 {
    let logs = positive_logs(samples.iter().copied());
    if logs.len() < 2 {
        return 0.0;
    }
    var(&logs) / logs.len() as f64
}

/// The `q` quantile of sorted values, linear between the closest ranks (NaN when empty): the
/// one interpolation the latency percentiles and the evaluations' summaries share.
pub fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let pos = q * (sorted.len() - 1) as f64;
    let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
    sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo as f64)
}

/// Sample standard deviation (n − 1); 0 with fewer than two values.
pub fn sd(v: &[f64]) -> f64 {
    var(v).sqrt()
}

/// A report with its frame and no cells yet.
pub(crate) fn frame(
    profile: ProfileKey,
    suite: Option<String>,
    candidate_runs: Vec<String>,
    baseline: BaselineSummary,
    rule: &DecisionRule,
) -> ComparisonReport {
    ComparisonReport::new(profile, suite, candidate_runs, baseline, rule.summary())
}

/// The rule's metrics besides aggregate tok/s that gate the decode cells (`gating`: those with
/// history enough), for [`ComparisonReport::cell_metrics_gated`].
pub(crate) fn cell_metrics_gated(
    rule: &DecisionRule,
    gating: impl Fn(Metric) -> bool,
) -> Vec<Metric> {
    rule.metrics
        .iter()
        .copied()
        .filter(|&m| {
            m != Metric::AggregateTps && m != Metric::PrefillTps && !m.is_burst() && gating(m)
        })
        .collect()
}

/// The report of a candidate that has nothing to be compared with (no baseline runs, or only
/// runs of another profile): every cell `not_comparable` for `reason`, gate `no_baseline`.
pub fn not_comparable(
    first: &RunResults,
    candidate_runs: Vec<String>,
    suite: Option<String>,
    rule: &DecisionRule,
    reason: CellReason,
) -> ComparisonReport {
    let mut report = frame(
        first.profile.clone(),
        suite,
        candidate_runs,
        BaselineSummary {
            runs: Vec::new(),
            level_runs: Vec::new(),
            noise_runs: 0,
            metric_since: Vec::new(),
        },
        rule,
    );
    report.cells = first
        .cells
        .iter()
        .map(|c| {
            let decided = LimitDecision::settled(CellVerdict::NotComparable, reason.clone());
            cell(
                c.coord(),
                Some(decided),
                Vec::new(),
                |_| true,
                reason.clone(),
            )
        })
        .collect();
    finish(&mut report);
    report
}

/// The test of the primary metric over `cells` cells (the matrix-wide one, or a line's), from
/// its change, verdict, margin and test line.
pub(crate) fn matrix_test(
    change: &LogChange,
    verdict: CellVerdict,
    cells: usize,
    margin: f64,
    check: Check,
) -> MatrixTest {
    let (lo, hi) = change.interval(super::rule::CONFIDENCE);
    MatrixTest {
        change: relative(change.estimate),
        ci_low: relative(lo),
        ci_high: relative(hi),
        margin,
        p_value: change.p_worse(Direction::HigherIsBetter),
        verdict,
        cells,
        check: Some(check),
    }
}

/// One cell of the report: decided up front (capacity, missing, errors) with its reason and
/// what it waits for, or from its metric comparisons (each with the reason of its verdict):
/// the first gating metric that regressed, else was inconclusive, improved, unchanged; `none`
/// is the reason when no gating metric was compared.
pub(crate) fn cell(
    coord: Coord,
    decided: Option<LimitDecision>,
    entries: Vec<(MetricComparison, Option<CellReason>)>,
    gating: impl Fn(Metric) -> bool,
    none: CellReason,
) -> CellComparison {
    if let Some(d) = decided {
        return CellComparison {
            provisional: d.provisional,
            history_too_short: d.history_too_short,
            not_compared: None,
            concurrency: coord.0,
            context_tokens: coord.1,
            verdict: d.verdict,
            reason: Some(d.reason),
            metrics: Vec::new(),
        };
    }
    let mut entries = entries;
    let chosen = [
        CellVerdict::Regression,
        CellVerdict::Inconclusive,
        CellVerdict::Improvement,
        CellVerdict::Unchanged,
    ]
    .into_iter()
    .find_map(|v| {
        entries.iter().position(|(m, _)| {
            // A cell is called faster only on throughput where that gates: a latency that
            // fell beside an unchanged tok/s would put ▲ beside a 0.0.
            let primary = m.metric == Metric::AggregateTps || !gating(Metric::AggregateTps);
            gating(m.metric) && m.verdict == v && (v != CellVerdict::Improvement || primary)
        })
    });
    // The gating metric that decided comes right after the primary, so that
    // `CellComparison::deciding` (the first with the cell's verdict) names it and not a
    // reported-only metric listed before it (an ITL p50 that moved with a gating ITL p99).
    let chosen = chosen.map(|i| {
        let at = usize::from(entries[0].0.metric == Metric::AggregateTps).min(i);
        let e = entries.remove(i);
        entries.insert(at, e);
        at
    });
    let (verdict, reason) = match chosen.map(|i| &entries[i]) {
        Some((m, why)) => (m.verdict, why.clone()),
        None => (CellVerdict::NotComparable, Some(none)),
    };
    CellComparison {
        provisional: false,
        history_too_short: false,
        not_compared: None,
        concurrency: coord.0,
        context_tokens: coord.1,
        verdict,
        reason,
        metrics: entries.into_iter().map(|(m, _)| m).collect(),
    }
}

/// Sets the gate's answer from the cells and the matrix-wide test: the last step of every
/// comparison (and again after adaptive looks or a confirmation changed it).
pub fn finish(report: &mut ComparisonReport) {
    report.gate = gate_of(report);
}

/// The gate's answer: `unmeasured` when the candidate measured less of the baseline's cells
/// than the rule's floor (nothing it did measure can speak for the rest); `regression` when a
/// cell (speed, capacity, errors), a line or the matrix-wide test regressed; `no_baseline`
/// when there was no baseline; `insufficient` when a provisional alarm waits for another boot,
/// the plan could not have found `design_effect` (its MDE is larger), or a cell's bound leaves
/// room for a slowdown beyond `cell_effect` ([`ComparisonReport::uncovered_cells`]) or a gated
/// latency's for a rise beyond its design effect ([`ComparisonReport::uncovered_metrics`]);
/// otherwise `pass`, which then vouches for the matrix at `design_effect`, for every cell at
/// `cell_effect` and for every gated latency of every cell at its design effect.
/// (Without a sensitivity figure, e.g. an A/B run with no matrix-wide test, an undecided cell
/// makes it `insufficient`.)
pub(crate) fn gate_of(report: &ComparisonReport) -> GateVerdict {
    if report.coverage.is_some_and(|c| !c.sufficient()) {
        return GateVerdict::Unmeasured;
    }
    let matrix_regressed = report
        .matrix_test
        .as_ref()
        .is_some_and(|m| m.verdict == CellVerdict::Regression);
    let line_regressed = report
        .lines
        .iter()
        .any(|l| l.test.verdict == CellVerdict::Regression);
    if matrix_regressed || line_regressed || report.regressions().next().is_some() {
        return GateVerdict::Regression;
    }
    if report.baseline.level_runs.is_empty() {
        return GateVerdict::NoBaseline;
    }
    let sensitive = match &report.sensitivity {
        Some(s) => s.sufficient,
        None => !report
            .cells
            .iter()
            .any(|c| c.verdict == CellVerdict::Inconclusive),
    };
    // A replay without the second boot its plan asked for decides nothing a second boot would.
    let awaits_second_boot = report.confirmation.as_ref().is_some_and(|c| c.missing);
    // A gated prefill figure the engine's counters disagree with is not compared, and never
    // passes (fail closed).
    let prefill_unchecked = report.prefill_gated
        && report
            .prefill
            .iter()
            .any(|c| c.not_compared == Some(NotCompared::PrefillCountersDisagree));
    // Likewise a gated burst whose requests did not all complete.
    let burst_unchecked = report.burst_gated
        && report
            .burst
            .iter()
            .any(|c| c.not_compared == Some(NotCompared::BurstIncomplete));
    if report
        .cells
        .iter()
        .chain(&report.prefill)
        .chain(&report.burst)
        .any(|c| c.provisional || c.history_too_short)
        || prefill_unchecked
        || burst_unchecked
        || awaits_second_boot
        || !report.host_late.is_empty()
        || !sensitive
        || !report.uncovered_cells().is_empty()
        || !report.uncovered_metrics().is_empty()
    {
        GateVerdict::Insufficient
    } else {
        GateVerdict::Pass
    }
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    use super::*;
    use crate::synthetic::synthetic_run;
    use infergate_schema::answer::first_line;
    use infergate_schema::asserts::assert_first_line;

    #[test]
    fn a_pass_vouches_for_every_cell_at_the_cell_effect_or_names_the_one_it_cannot() {
        let mut r = infergate_schema::verdict::fixtures::pass();
        r.rule.cell_effect = Some(0.10);
        assert_eq!(gate_of(&r), GateVerdict::Pass);
        finish(&mut r);
        assert_first_line(&r, |l| l.ends_with("; each cell above −10.0% (95% bound)"));
        // One cell's 90% interval reaches −12%: it could be that much slower unseen.
        r.cells[4].metrics[0].ci_low = -0.12;
        finish(&mut r);
        assert_eq!(r.gate, GateVerdict::Insufficient);
        assert_first_line(&r, |l| {
            l.contains("1 cell could be −10.0% or worse (C=2 / 8k down to −12.0%;")
        });
        // Verdicts of earlier versions recorded no cell effect and did not check it.
        r.rule.cell_effect = None;
        assert_eq!(gate_of(&r), GateVerdict::Pass);
    }

    #[test]
    fn a_pass_vouches_for_each_gated_latency_at_its_design_effect_or_is_insufficient() {
        use infergate_schema::verdict::Metric;
        use infergate_schema::verdict::fixtures::metric_in;
        let mut r = infergate_schema::verdict::fixtures::pass();
        r.cell_metrics_gated = vec![Metric::ItlP90];
        for cell in 0..r.cells.len() {
            let m = metric_in(&mut r, cell, Metric::ItlP90);
            (m.margin, m.ci_high) = (0.25, 0.2);
        }
        assert_eq!(gate_of(&r), GateVerdict::Pass);
        // One cell's bound reaches +25%: it could have risen that much unseen.
        metric_in(&mut r, 4, Metric::ItlP90).ci_high = 0.31;
        assert_eq!(gate_of(&r), GateVerdict::Insufficient);
        // A bound that is not a number vouches for nothing (fail closed).
        metric_in(&mut r, 4, Metric::ItlP90).ci_high = f64::NAN;
        assert_eq!(gate_of(&r), GateVerdict::Insufficient);
        // A metric that does not gate is reported, not vouched for.
        r.cell_metrics_gated.clear();
        assert_eq!(gate_of(&r), GateVerdict::Pass);
    }

    #[test]
    fn a_candidate_without_baseline_is_not_comparable_with_its_reason_in_the_headline() {
        let mut rng = StdRng::seed_from_u64(1);
        let run = synthetic_run("cand", &mut rng, 0.0, 0.0, &|_| 1.0);
        let why = "different profile: baseline run `b` is `x`";
        let report = not_comparable(
            &run,
            vec!["cand".into()],
            Some("pr".into()),
            &DecisionRule::default(),
            CellReason::Recorded(why.into()),
        );
        assert_eq!(report.gate, GateVerdict::NoBaseline);
        assert_eq!(report.cells.len(), run.cells.len());
        assert!(report.cells.iter().all(|c| {
            c.verdict == CellVerdict::NotComparable
                && c.reason == Some(CellReason::Recorded(why.into()))
        }));
        assert_eq!(
            first_line(&report),
            format!(
                "– no baseline yet for this profile and suite: 20 cells measured, nothing compared ({why})"
            )
        );
        // The store's own "no baseline" says nothing more than the headline already does.
        let plain =
            crate::stats::compare(&[], std::slice::from_ref(&run), &DecisionRule::default())
                .unwrap();
        assert_first_line(&plain, |l| l.ends_with("nothing compared"));
    }
}
