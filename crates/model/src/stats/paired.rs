//! The paired comparison of an A/B run: B (candidate) boots against A (base) boots booted
//! alternately on one runner, pair by pair.
//!
//! Why paired: the largest noise term on a GPU runner is run to run (another boot, other clocks,
//! another day). Booting both builds side by side in an ABBA order cancels linear drift within
//! each pair of pairs, and the spread of the paired differences *measures* the boot-to-boot
//! noise of this runner today instead of assuming it. Per cell the statistic is the mean over
//! pairs of `ln(B) − ln(A)` with a Student t interval over the pairs (df = pairs − 1); each cell
//! is tested at its fixed share of the cells' alpha, as in the gate, plus a matrix-wide paired
//! test on the per-pair mean difference of aggregate tok/s and of each gating latency with a
//! design effect (a uniform tail rise is the build's here: both sides ran on one runner). See
//! `docs/adaptive-and-ab.md`. The boots themselves are `run::ab`.

use std::collections::BTreeMap;

use infergate_schema::results::{CellStatus, RunResults};
use infergate_schema::verdict::{
    Against, BaselineSummary, CellReason, CellVerdict, ComparisonReport, DecisionBasis, Direction,
    HostLateCell, Layer, Metric, MetricComparison,
};

use super::DecisionRule;
use super::rule::{CONFIDENCE, MATRIX_MARGIN};

use super::build::{self, Coord, find, mean, sd};
use super::capacity::LimitDecision;
use super::compare::{self, ALL_METRICS, decided_change, ok_value, with_matrix};
use super::interval::{LogChange, judge, log_margin, note_overruled, points, relative};

/// Why a paired comparison cannot be made at all.
#[derive(Debug, thiserror::Error)]
#[allow(
    missing_docs,
    reason = "each field is named by its variant\'s #[error] message"
)]
pub enum PairedError {
    /// A and B boot counts differ or are below two pairs.
    #[error(
        "a paired comparison needs at least 2 complete pairs of boots (got {a} A and {b} B runs)"
    )]
    TooFewPairs { a: usize, b: usize },
    /// The rule is invalid.
    #[error("{0}")]
    Stats(#[from] super::StatsError),
}

/// The paired change of a series of per-pair log differences: mean, SE over pairs, df = n − 1.
pub(crate) fn paired_change(diffs: &[f64]) -> LogChange {
    let n = diffs.len() as f64;
    LogChange {
        estimate: mean(diffs),
        se: sd(diffs) / n.sqrt(),
        df: (n - 1.0).max(0.5),
        tail_df: f64::INFINITY,
    }
}

/// Decides the cells that cannot be compared pair by pair, by the gate's rule with A's boots
/// as the history (`stats::compare`'s eligibility: errors fail closed, capacity and saturation
/// by `stats::capacity`'s bound at `capacity_alpha`), then a cell measured in fewer than two
/// pairs.
fn eligibility(
    coord: Coord,
    a: &[RunResults],
    b: &[RunResults],
    capacity_alpha: f64,
) -> Option<LimitDecision> {
    // A/B's B boots are all its boots (at least two): none of its alarms is provisional.
    if let Some(decided) = compare::eligibility(coord, a, a, b, capacity_alpha, Against::PairedAb) {
        return Some(decided);
    }
    let ok = |r: &RunResults| find(r, coord).is_some_and(|c| c.status == CellStatus::Ok);
    let pairs = a.iter().zip(b).filter(|(x, y)| ok(x) && ok(y)).count();
    if pairs < 2 {
        let why = b
            .iter()
            .chain(a)
            .filter_map(|r| find(r, coord))
            .find(|c| c.status != CellStatus::Ok)
            .and_then(|c| c.reason.clone());
        return Some(LimitDecision::settled(
            CellVerdict::NotComparable,
            CellReason::TooFewPairs { pairs, why },
        ));
    }
    None
}

struct PairTest {
    metric: Metric,
    cell: usize,
    /// The cell's total change (what people see).
    change: LogChange,
    /// The cell's change beyond the pairs' common factor, `mean_i(d_ic − D_i)`: the boots'
    /// speed factors cancel in it, so it is the per-cell test (as in `stats::compare`).
    specific: Option<LogChange>,
    baseline: f64,
    candidate: f64,
    pairs: usize,
}

/// The paired comparison of B (candidate) with A (base): `a[i]` and `b[i]` are pair `i`.
///
/// Per cell and metric the change shown is `mean(d)`, `d_i = ln(B_i) − ln(A_i)` over the pairs
/// where both measured it; the cell's *test* is on `d_ic − D_i` (beyond the pair's common
/// factor `D_i`, so each boot's speed factor cancels), [`judge`]d as in the gate at a gating
/// cell's share of the local alpha. The matrix-wide test is the paired t on `D_i` over the
/// cells measured in every pair, with the matrix margin (a gating latency's: its design
/// effect); an undecided cell follows its metric's matrix change its total points to, else is
/// unchanged (without aggregate tok/s's matrix-wide test, only within the margin: there is no
/// sensitivity to fail closed on).
pub fn paired_compare(
    a: &[RunResults],
    b: &[RunResults],
    rule: &DecisionRule,
) -> Result<ComparisonReport, PairedError> {
    rule.validate()?;
    let n = a.len().min(b.len());
    if n < 2 || a.len() != b.len() {
        return Err(PairedError::TooFewPairs {
            a: a.len(),
            b: b.len(),
        });
    }
    let coords = build::coords(b.iter().chain(a));
    let decided: Vec<Option<LimitDecision>> = coords
        .iter()
        .map(|&c| eligibility(c, a, b, rule.capacity_alpha()))
        .collect();
    let comparable: Vec<usize> = (0..coords.len())
        .filter(|&i| decided[i].is_none())
        .collect();
    // A tail the host alone could have moved on any boot of either side is no measurement of
    // its build: the cell is compared on it in no pair, as the gate compares a cell on a
    // metric only where every boot has it (every latency; the gated ones are listed).
    let boots: Vec<RunResults> = a.iter().chain(b).cloned().collect();
    let latencies: Vec<Metric> = ALL_METRICS
        .into_iter()
        .filter(|m| m.is_latency_percentile())
        .collect();
    let comparable_coords: Vec<Coord> = comparable.iter().map(|&i| coords[i]).collect();
    let host_late = compare::host_late_cells(rule, &latencies, &comparable_coords, &boots);
    let pairs = Pairs {
        a,
        b,
        n,
        coords: &coords,
        comparable: &comparable,
        host_late: &host_late,
    };
    let (tests, matrices) = pairs.tests();

    // A latency percentile gates from as many pairs as a gate's history needs runs.
    let gating = |m: Metric| rule.gates(m, n);
    // As in `stats::compare`: each test its fixed (Bonferroni) share, so its boundary can be
    // printed. The gating cells share the local families' alpha (a paired run has no line
    // tests); a reported-only metric is tested at a gating cell's alpha and never gates.
    let n_cells = tests.iter().filter(|t| gating(t.metric)).count().max(1);
    let look = format!("{n} pairs of boots");
    let mut report = paired_frame(a, b, n, rule);
    report.cell_metrics_gated = build::cell_metrics_gated(rule, gating);
    report.host_late = host_late
        .iter()
        .filter(|h| report.cell_metrics_gated.contains(&h.metric))
        .copied()
        .collect();
    let matrix_verdicts = judge_matrices(&mut report, matrices, rule, comparable.len(), n, &look);
    let judging = PairJudging {
        rule,
        pairs: n,
        cell_alpha: rule.local_alpha() / n_cells as f64,
        look,
        matrix_verdicts,
    };

    let mut per_cell: BTreeMap<usize, Vec<(MetricComparison, Option<CellReason>)>> =
        BTreeMap::new();
    for t in &tests {
        per_cell.entry(t.cell).or_default().push(judging.entry(t));
    }
    for (i, (&coord, decision)) in coords.iter().zip(decided).enumerate() {
        let entries = per_cell.remove(&i).unwrap_or_default();
        report.cells.push(build::cell(
            coord,
            decision,
            entries,
            gating,
            CellReason::NothingCompared {
                layer: Layer::Decode,
                against: Against::PairedAb,
            },
        ));
    }
    // As in `stats::compare`: B must have measured every cell A measured, or the pairs it did
    // measure cannot speak for the matrix.
    report.coverage = Some(compare::coverage(&coords, a, b));
    build::finish(&mut report);
    Ok(report)
}

/// The report's frame: B's runs the candidate, A's the level.
fn paired_frame(
    a: &[RunResults],
    b: &[RunResults],
    n: usize,
    rule: &DecisionRule,
) -> ComparisonReport {
    let mut report = build::frame(
        b[0].profile.clone(),
        b[0].suite.clone(),
        b.iter().map(|r| r.run_id.clone()).collect(),
        BaselineSummary {
            runs: Vec::new(),
            level_runs: a.iter().map(|r| r.run_id.clone()).collect(),
            noise_runs: n,
            metric_since: Vec::new(),
        },
        rule,
    );
    report.against = Against::PairedAb;
    report
}

/// Each matrix-wide test that can fail the run, with its verdict and change (relative):
/// aggregate tok/s's (into the report with its sensitivity, [`judge_matrix`]) and each gating
/// latency's with a design effect, at that effect (a uniform rise of every cell's tail beyond
/// it is a regression, not noise). They share the matrix family's alpha, as the cells share
/// the local one.
fn judge_matrices(
    report: &mut ComparisonReport,
    mut matrices: BTreeMap<Metric, LogChange>,
    rule: &DecisionRule,
    cells: usize,
    n: usize,
    look: &str,
) -> BTreeMap<Metric, (CellVerdict, f64)> {
    let gating = |m: Metric| rule.gates(m, n) && rule.has_design_effect(m);
    matrices.retain(|&m, _| m == Metric::AggregateTps || gating(m));
    let alpha = rule.matrix_alpha() / matrices.len().max(1) as f64;
    (matrices.iter())
        .map(|(&metric, m)| {
            let verdict = if metric == Metric::AggregateTps {
                judge_matrix(report, m, rule, cells, n, alpha, look)
            } else {
                let margin = rule.log_margin_of(metric);
                let (v, _) = judge(m, metric.direction(), alpha, margin, look);
                (v, relative(m.estimate))
            };
            (metric, verdict)
        })
        .collect()
}

/// The matrix-wide paired test of aggregate tok/s `m` over `n` pairs at `alpha`, into the
/// report with its sensitivity; returns its verdict and change (relative).
fn judge_matrix(
    report: &mut ComparisonReport,
    m: &LogChange,
    rule: &DecisionRule,
    cells: usize,
    n: usize,
    alpha: f64,
    look: &str,
) -> (CellVerdict, f64) {
    let (v, check) = judge(
        m,
        Direction::HigherIsBetter,
        alpha,
        log_margin(MATRIX_MARGIN),
        look,
    );
    // The matrix-wide test exists only when every comparable cell was in every pair.
    report.matrix_test = Some(build::matrix_test(m, v, cells, MATRIX_MARGIN, check));
    // A pass must have been able to see a uniform `design_effect`, as in the gate.
    report.sensitivity = Some(super::sensitivity::assess_pairs(rule, m, n, alpha));
    (v, relative(m.estimate))
}

/// The pairs of boots, `a[i]` and `b[i]` pair `i` of `n`, and the cells they compare
/// (`comparable`: indices into `coords`).
struct Pairs<'a> {
    a: &'a [RunResults],
    b: &'a [RunResults],
    n: usize,
    coords: &'a [Coord],
    comparable: &'a [usize],
    /// The cells and metrics whose tail the host ran late on in some boot: not compared.
    host_late: &'a [HostLateCell],
}

/// One comparable cell's log difference `ln(B) − ln(A)` with `ln(A)` and `ln(B)`, per pair
/// (`None` where a side did not measure it).
type PairDiffs = Vec<Option<(f64, f64, f64)>>;

impl Pairs<'_> {
    /// Every metric's cell tests, and each metric's matrix-wide change where it has one.
    fn tests(&self) -> (Vec<PairTest>, BTreeMap<Metric, LogChange>) {
        let mut tests: Vec<PairTest> = Vec::new();
        let mut matrices = BTreeMap::new();
        for metric in ALL_METRICS {
            let (metric_tests, metric_matrix) = self.metric_tests(metric);
            tests.extend(metric_tests);
            if let Some(m) = metric_matrix {
                matrices.insert(metric, m);
            }
        }
        (tests, matrices)
    }

    /// One metric's cell tests, and its matrix-wide change where every comparable cell was
    /// measured in every pair.
    fn metric_tests(&self, metric: Metric) -> (Vec<PairTest>, Option<LogChange>) {
        let n = self.n;
        // d[k][i]: cell k (index into comparable), pair i.
        let d: Vec<PairDiffs> = self
            .comparable
            .iter()
            .map(|&ci| {
                let coord = self.coords[ci];
                let late = |h: &HostLateCell| {
                    h.metric == metric && (h.concurrency, h.context_tokens) == coord
                };
                if self.host_late.iter().any(late) {
                    return vec![None; n];
                }
                (0..n)
                    .map(|i| {
                        let (_, va) = ok_value(&self.a[i], coord, metric)?;
                        let (_, vb) = ok_value(&self.b[i], coord, metric)?;
                        Some((vb.ln() - va.ln(), va.ln(), vb.ln()))
                    })
                    .collect()
            })
            .collect();
        // Per-pair common factor over the cells measured in every pair.
        let full: Vec<usize> = (0..d.len())
            .filter(|&k| d[k].iter().all(Option::is_some))
            .collect();
        let pair_mean: Vec<f64> = (0..n)
            .map(|i| {
                mean(
                    &full
                        .iter()
                        .filter_map(|&k| d[k][i].map(|x| x.0))
                        .collect::<Vec<_>>(),
                )
            })
            .collect();
        let matrix = (full.len() == d.len() && !full.is_empty()).then(|| paired_change(&pair_mean));
        let pooled_resid = pooled_residual(&d, &full, &pair_mean, n);
        let tests = self
            .comparable
            .iter()
            .enumerate()
            .filter_map(|(k, &ci)| {
                let pooled = pooled_resid.filter(|_| full.contains(&k));
                pair_test(metric, ci, &d[k], &pair_mean, pooled)
            })
            .collect();
        (tests, matrix)
    }
}

/// Pooled variance of `d_ic − D_i` over the cells measured in every pair (`full`), with its
/// degrees of freedom: each cell gives n − 1 degrees of freedom, minus the n pair means
/// shared by all of them. `None` with fewer than two such cells.
fn pooled_residual(
    d: &[PairDiffs],
    full: &[usize],
    pair_mean: &[f64],
    n: usize,
) -> Option<(f64, f64)> {
    (full.len() >= 2).then(|| {
        let mut ss = 0.0;
        for &k in full {
            let r: Vec<f64> = (0..n)
                .filter_map(|i| d[k][i].map(|x| x.0 - pair_mean[i]))
                .collect();
            let m = mean(&r);
            ss += r.iter().map(|x| (x - m).powi(2)).sum::<f64>();
        }
        // At least 1: two pairs or more (checked above), two cells or more.
        let df = ((n - 1) * (full.len() - 1)) as f64;
        (ss / df, df)
    })
}

/// One metric's test in cell `ci` from its per-pair differences `d`, where two pairs or more
/// measured it; its test beyond the pairs' common factor where the residual noise is pooled.
fn pair_test(
    metric: Metric,
    ci: usize,
    d: &[Option<(f64, f64, f64)>],
    pair_mean: &[f64],
    pooled: Option<(f64, f64)>,
) -> Option<PairTest> {
    let valid: Vec<(usize, (f64, f64, f64))> = d
        .iter()
        .enumerate()
        .filter_map(|(i, x)| x.map(|x| (i, x)))
        .collect();
    if valid.len() < 2 {
        return None;
    }
    let diffs: Vec<f64> = valid.iter().map(|(_, x)| x.0).collect();
    let change = paired_change(&diffs);
    // The residual noise is pooled across cells (one pair has few degrees of freedom
    // per cell), as `stats::compare` pools its per-cell noise.
    let specific = pooled.map(|(var, df)| {
        let resid: Vec<f64> = valid.iter().map(|(i, x)| x.0 - pair_mean[*i]).collect();
        LogChange {
            estimate: mean(&resid),
            se: (var / resid.len() as f64).sqrt(),
            df,
            tail_df: f64::INFINITY,
        }
    });
    Some(PairTest {
        metric,
        cell: ci,
        change,
        specific,
        baseline: mean(&valid.iter().map(|(_, x)| x.1).collect::<Vec<_>>()).exp(),
        candidate: mean(&valid.iter().map(|(_, x)| x.2).collect::<Vec<_>>()).exp(),
        pairs: valid.len(),
    })
}

/// What a paired run judges its cell tests by: the rule over `pairs` pairs (each metric's
/// margin as the gate's, [`DecisionRule::log_margin_of`]: a latency's its design effect), each
/// cell's alpha, the look's name, and each matrix-wide verdict with its change (relative).
struct PairJudging<'a> {
    rule: &'a DecisionRule,
    pairs: usize,
    cell_alpha: f64,
    look: String,
    matrix_verdicts: BTreeMap<Metric, (CellVerdict, f64)>,
}

impl PairJudging<'_> {
    /// One test's comparison as the report lists it, with its reason.
    fn entry(&self, t: &PairTest) -> (MetricComparison, Option<CellReason>) {
        let dir = t.metric.direction();
        let own = t.specific.unwrap_or(t.change);
        let margin = self.rule.log_margin_of(t.metric);
        let (judged, mut check) = judge(&own, dir, self.cell_alpha, margin, &self.look);
        // A cell whose total change points the other way moved with the matrix: its own test
        // alone never makes a faster cell a regression or a slower one an improvement.
        let total_good = super::interval::signed(t.change.estimate, dir);
        let own_decided = points(judged, total_good);
        // As in the gate (`stats::compare`): a cell follows a matrix-wide change its total
        // points to (a uniform −10% is −10% in every cell, never "unchanged"); else it is
        // unchanged, and the run's word comes from the matrix test's sensitivity.
        let follows = self
            .matrix_verdicts
            .get(&t.metric)
            .copied()
            .filter(|&(m, _)| points(m, total_good) && !own_decided);
        let verdict = self.verdict(&own, margin, judged, own_decided, follows);
        let (lo, hi) = t.change.interval(CONFIDENCE);
        let (why, decided_on) = match follows {
            Some((m, change)) => with_matrix(t.metric, &t.change, m, change),
            None => (
                CellReason::PairedChange {
                    metric: t.metric,
                    change: decided_change(&t.change, DecisionBasis::Total, None),
                    pairs: t.pairs,
                },
                if own_decided {
                    decided_change(&own, DecisionBasis::VsRun, None)
                } else {
                    decided_change(&t.change, DecisionBasis::Total, None)
                },
            ),
        };
        note_overruled(
            &mut check,
            judged,
            verdict,
            &t.change,
            Against::PairedAb,
            &decided_on,
        );
        if !self.rule.gates(t.metric, self.pairs) {
            super::interval::reported_only(&mut check, judged, dir);
        }
        let p = own.p_worse(dir);
        let comparison = MetricComparison {
            metric: t.metric,
            direction: dir,
            baseline: t.baseline,
            candidate: t.candidate,
            change: relative(t.change.estimate),
            ci_low: relative(lo),
            ci_high: relative(hi),
            margin: self.rule.min_effect_of(t.metric),
            p_value: p,
            p_adjusted: (p * self.rule.local_alpha() / self.cell_alpha).min(1.0),
            verdict,
            check: Some(check),
            decided_on: Some(decided_on),
        };
        (comparison, Some(why))
    }

    /// A cell's verdict: its own test's `judged` where its total points the same way, else
    /// the matrix-wide change it `follows`, else unchanged (or, without aggregate tok/s's
    /// matrix-wide test, unchanged only within the margin).
    fn verdict(
        &self,
        own: &LogChange,
        margin: f64,
        judged: CellVerdict,
        own_decided: bool,
        follows: Option<(CellVerdict, f64)>,
    ) -> CellVerdict {
        if own_decided {
            judged
        } else if let Some((m, _)) = follows {
            m
        } else if self.matrix_verdicts.contains_key(&Metric::AggregateTps) {
            CellVerdict::Unchanged
        } else {
            // No matrix-wide test (a cell missing from some pair), so no sensitivity: a cell
            // is unchanged only when its interval lies within the margin, and an inconclusive
            // one makes the run insufficient (fail closed).
            if own.within_margin(CONFIDENCE, margin) {
                CellVerdict::Unchanged
            } else {
                CellVerdict::Inconclusive
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synthetic::synthetic_run;
    use infergate_schema::answer::first_line;
    use infergate_schema::asserts::{assert_first_line, assert_gate, assert_not_gate};
    use infergate_schema::verdict::{GateVerdict, LimitFinding};
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    fn pairs(
        seed: u64,
        n: usize,
        factor: &dyn Fn(usize) -> f64,
    ) -> (Vec<RunResults>, Vec<RunResults>) {
        let mut rng = StdRng::seed_from_u64(seed);
        let a = (0..n)
            .map(|i| synthetic_run(&format!("a{i}"), &mut rng, 0.02, 0.01, &|_| 1.0))
            .collect();
        let b = (0..n)
            .map(|i| synthetic_run(&format!("b{i}"), &mut rng, 0.02, 0.01, factor))
            .collect();
        (a, b)
    }

    #[test]
    fn identical_builds_do_not_regress_and_ten_percent_slower_does() {
        let rule = DecisionRule::default();
        let (a, b) = pairs(1, 6, &|_| 1.0);
        let r = paired_compare(&a, &b, &rule).expect("compare");
        assert_not_gate(&r, GateVerdict::Regression);
        assert!(r.cells.iter().all(|c| c.verdict == CellVerdict::Unchanged));
        let (a, b) = pairs(2, 6, &|_| 0.90);
        let r = paired_compare(&a, &b, &rule).expect("compare");
        assert_gate(&r, GateVerdict::Regression);
        assert_first_line(&r, |l| l.starts_with("✗ B vs A:"));
        // A uniform −10% is −10% in every cell: each follows the matrix-wide regression, and
        // says so as the gate's cells do (reports then say it once, by the matrix test's line).
        assert!(
            r.cells.iter().all(|c| c.verdict == CellVerdict::Regression),
            "{:?}",
            r.cells.iter().map(|c| c.verdict).collect::<Vec<_>>()
        );
        assert!(r.cells.iter().all(|c| {
            c.primary()
                .and_then(|m| m.decided_on.as_ref())
                .is_some_and(|d| d.basis == DecisionBasis::WithMatrix)
        }));
        let (a, b) = pairs(3, 6, &|i| if i == 3 { 1.25 } else { 1.0 });
        let r = paired_compare(&a, &b, &rule).expect("compare");
        assert_eq!(
            r.cells[3].verdict,
            CellVerdict::Improvement,
            "{}",
            first_line(&r)
        );
        assert_first_line(&r, |l| l.contains("; 1 cell faster: +2"));
    }

    /// Sets every cell's ITL percentiles (p99 `p99`, 5000 gaps) and the probe's p99 lateness
    /// at `late` times that tail.
    fn itl_tail(run: &mut RunResults, p99: f64, late: f64) {
        for c in &mut run.cells {
            crate::synthetic::set_itl_tail(c, p99, late);
        }
    }

    /// A uniform rise of every cell's tail is the build's in a paired run (both sides ran on
    /// one runner, pair by pair), so it is judged matrix-wide at the metric's design effect, as
    /// the gate judges it: ITL p99 ×1.8 in every cell of B (its scatter 8% pair to pair) is a
    /// regression in every cell, following the matrix-wide test; ×1.2 is within the +50% and
    /// passes; the same B tails without the matrix-wide test could only be `insufficient`.
    #[test]
    fn a_uniform_tail_rise_is_judged_matrix_wide() {
        let rule = DecisionRule::default();
        let judged = |rise: f64| {
            let (mut a, mut b) = pairs(11, 12, &|_| 1.0);
            for (i, (a, b)) in a.iter_mut().zip(&mut b).enumerate() {
                let wobble = if i % 2 == 0 { 1.08 } else { 1.0 / 1.08 };
                itl_tail(a, 0.025, 0.02);
                itl_tail(b, 0.025 * rise * wobble, 0.02);
            }
            paired_compare(&a, &b, &rule).expect("compare")
        };
        let slower = judged(1.8);
        assert_gate(&slower, GateVerdict::Regression);
        assert_first_line(&slower, |l| l.starts_with("✗ B vs A: ITL p99 +80.0%"));
        assert!(slower.cells.iter().all(|c| {
            c.metric(Metric::ItlP99)
                .is_some_and(|m| m.verdict == CellVerdict::Regression)
        }));
        assert_eq!(
            slower.matrix_test.as_ref().map(|m| m.verdict),
            Some(CellVerdict::Unchanged)
        );
        let within = judged(1.2);
        assert_gate(&within, GateVerdict::Pass);
    }

    /// A tail the host ran late on in one boot of either side is compared in no pair: with one
    /// cell's ITL p99 doubled in B and the probe late by 30% of the tail on one B boot, no cell
    /// is compared on ITL p99, every cell is listed as host-late, and the gate is
    /// `insufficient`, saying why first; with the probe quiet everywhere the doubled tail is
    /// found, judged at ITL p99's design effect (+50%) as the gate judges it.
    #[test]
    fn a_tail_the_host_ran_late_on_in_any_pair_is_not_vouched_for() {
        let rule = DecisionRule::default();
        let (mut a, mut b) = pairs(7, 12, &|_| 1.0);
        for (i, (a, b)) in a.iter_mut().zip(&mut b).enumerate() {
            let p99 = 0.025 * (1.0 + 0.01 * i as f64);
            itl_tail(a, p99, 0.02);
            itl_tail(b, p99, 0.02);
            let doubled = b.cells[5].itl_s.as_mut().expect("set above");
            doubled.p99 *= 2.0;
        }
        let quiet = paired_compare(&a, &b, &rule).expect("compare");
        assert_gate(&quiet, GateVerdict::Regression);
        assert_first_line(&quiet, |l| l.starts_with("✗ B vs A: ITL p99 +100.0%"));
        let m = quiet.cells[5].metric(Metric::ItlP99).expect("compared");
        assert_eq!(m.margin, 0.50);
        assert!(quiet.host_late.is_empty());
        for c in &mut b[3].cells {
            let late = c.host_lateness_s.as_mut().expect("set above");
            late.p99 = 0.3 * c.itl_s.map_or(0.0, |p| p.p99);
        }
        let busy = paired_compare(&a, &b, &rule).expect("compare");
        assert_gate(&busy, GateVerdict::Insufficient);
        assert_eq!(busy.host_late.len(), busy.cells.len());
        assert!(
            busy.cells
                .iter()
                .all(|c| c.metric(Metric::ItlP99).is_none())
        );
        assert_first_line(&busy, |l| {
            l.starts_with("? insufficient: ITL p99 not vouched for in 20 cells: the host ran")
        });
    }

    #[test]
    fn boot_factors_cancel_in_the_per_cell_test() {
        // One cell 8% slower, 2% boot-to-boot noise, 4 pairs: the pairs' common factor is
        // removed before the cell is tested, so the cell is found (its total change alone,
        // carrying two boots' noise, would often be inconclusive) and the others are not.
        let rule = DecisionRule::default();
        let mut found = 0;
        for seed in 0..40 {
            let (a, b) = pairs(500 + seed, 4, &|i| if i == 5 { 0.92 } else { 1.0 });
            let r = paired_compare(&a, &b, &rule).expect("compare");
            if r.cells[5].verdict == CellVerdict::Regression {
                found += 1;
            }
            let others = r
                .cells
                .iter()
                .enumerate()
                .filter(|(i, c)| *i != 5 && c.verdict == CellVerdict::Regression)
                .count();
            assert_eq!(others, 0, "seed {seed}: {}", first_line(&r));
        }
        assert!(found >= 32, "single-cell −8% found in {found} of 40");
    }

    #[test]
    fn every_test_prints_its_statistic_boundary_and_share() {
        // The gate's rule: each gating cell at an equal share of the local alpha, the matrix
        // at the matrix alpha; the line is enough to redo the verdict by hand.
        let rule = DecisionRule::default();
        let (a, b) = pairs(7, 4, &|i| if i == 5 { 0.85 } else { 1.0 });
        let r = paired_compare(&a, &b, &rule).expect("compare");
        let n = r.cells.len() as f64;
        let m = r.matrix_test.as_ref().expect("matrix test");
        let mc = m.check.as_ref().expect("matrix check");
        assert!((mc.alpha - rule.matrix_alpha()).abs() < 1e-15);
        assert!(
            mc.line("matrix").contains("4 pairs of boots"),
            "{}",
            mc.line("matrix")
        );
        for c in &r.cells {
            let t = c
                .primary()
                .and_then(|m| m.check.as_ref())
                .expect("cell check");
            assert!((t.alpha - rule.local_alpha() / n).abs() < 1e-15, "{t:?}");
            // The verdict follows from the printed numbers: beyond the boundary or not.
            assert_eq!(t.rejected, t.statistic <= t.boundary, "{t:?}");
        }
        let hit = r.cells[5].primary().expect("cell 5");
        assert_eq!(hit.verdict, CellVerdict::Regression);
        assert!(hit.check.as_ref().is_some_and(|c| c.rejected));
        assert_eq!(r.rule.correction, "bonferroni");
    }

    #[test]
    fn a_cell_no_test_decided_is_unchanged_as_in_the_gate() {
        // One cell, 4 pairs at 2% boot noise: the cell's change carries the boots' noise, so
        // its 90% interval is not within ±3% (the label was `inconclusive`). No test decided
        // it, so it is `unchanged`; the run's word comes from the sensitivity: insufficient.
        let rule = DecisionRule::default();
        let (mut a, mut b) = pairs(21, 4, &|_| 1.0);
        for run in a.iter_mut().chain(b.iter_mut()) {
            run.cells.truncate(1);
        }
        let r = paired_compare(&a, &b, &rule).expect("compare");
        let tps = r.cells[0].primary().expect("aggregate tok/s");
        assert!(tps.ci_low < -0.03 || tps.ci_high > 0.03, "{tps:?}");
        assert_eq!(
            r.cells[0].verdict,
            CellVerdict::Unchanged,
            "{}",
            first_line(&r)
        );
        assert_gate(&r, GateVerdict::Insufficient);
    }

    #[test]
    fn a_pass_could_have_seen_the_design_effect() {
        // 2% boot noise: 4 pairs cannot see a uniform −5% at 80% power (the paired t has 3
        // df), so identical builds are `insufficient` and the words say how many pairs would
        // do; 16 pairs can, so they pass.
        let rule = DecisionRule::default();
        let (a, b) = pairs(11, 4, &|_| 1.0);
        let r = paired_compare(&a, &b, &rule).expect("compare");
        let s = r.sensitivity.as_ref().expect("sensitivity");
        assert_gate(&r, GateVerdict::Insufficient);
        assert!(
            !s.sufficient && s.mde < -0.05 && s.history_runs == 4,
            "{s:?}"
        );
        assert_first_line(&r, |l| {
            l.contains("but these pairs could detect only −")
                && l.contains("more pairs of boots needed")
        });
        // What narrows an A/B run's cell intervals is its pairs, never a baseline or a second
        // boot: with 2 pairs every cell could be −10% or worse.
        let (a2, b2) = pairs(13, 2, &|_| 1.0);
        let r2 = paired_compare(&a2, &b2, &rule).expect("compare");
        let steps = infergate_schema::answer::next_steps(&r2, &Default::default());
        let words = format!("{} {steps:?}", first_line(&r2));
        assert!(words.contains("could be −10.0% or worse"), "{words}");
        assert!(words.contains("more pairs of boots narrow it"), "{words}");
        assert!(
            words.contains("or more pairs of boots (`--rounds`)"),
            "{words}"
        );
        assert!(
            !words.contains("baseline run") && !words.contains("second boot"),
            "{words}"
        );
        let (a, b) = pairs(12, 16, &|_| 1.0);
        let r = paired_compare(&a, &b, &rule).expect("compare");
        let s = r.sensitivity.as_ref().expect("sensitivity");
        assert_gate(&r, GateVerdict::Pass);
        assert!(s.sufficient && s.mde > -0.05, "{s:?}");
    }

    #[test]
    fn a_cell_b_errors_on_where_a_measured_it_fails_closed() {
        let (a, mut b) = pairs(7, 4, &|_| 1.0);
        let coord = (b[0].cells[2].concurrency, b[0].cells[2].context_tokens);
        // One B boot errors on the cell (an engine that fails under load): the other three
        // pairs would compare, and the cell still regressed.
        b[1].cells[2] = infergate_schema::results::CellResult::unmeasured(
            coord.0,
            coord.1,
            CellStatus::Error,
            "HTTP 500 from the engine",
        );
        let r = paired_compare(&a, &b, &DecisionRule::default()).expect("compare");
        let cell = r
            .cells
            .iter()
            .find(|c| (c.concurrency, c.context_tokens) == coord)
            .unwrap();
        assert_eq!(cell.verdict, CellVerdict::ErrorRegression, "{cell:?}");
        assert!(
            matches!(
                &cell.reason,
                Some(CellReason::ErrorNow { why, measured: 4, runs: 4, against: Against::PairedAb })
                    if why == "HTTP 500 from the engine"
            ),
            "{:?}",
            cell.reason
        );
        // Every cell A measured must be measured by B in every boot: undecidable.
        let cov = r.coverage.expect("coverage");
        assert_eq!(cov.expected, cov.measured + 1, "{cov:?}");
        assert_gate(&r, GateVerdict::Unmeasured);
        // A cell A never measured is not B's to cover.
        let (mut a, b) = pairs(8, 4, &|_| 1.0);
        for run in &mut a {
            run.cells[2] = infergate_schema::results::CellResult::unmeasured(
                coord.0,
                coord.1,
                CellStatus::Error,
                "oom",
            );
        }
        let r = paired_compare(&a, &b, &DecisionRule::default()).expect("compare");
        assert_not_gate(&r, GateVerdict::Unmeasured);
        assert!(r.coverage.unwrap().sufficient());
    }

    /// Capacity is decided as the gate decides it (`stats::capacity`), A's boots the history:
    /// a cell limited on one B boot is no evidence, and limited on every B boot it is a
    /// regression only once the pairs can bound the false alarm at `capacity_alpha`.
    #[test]
    fn capacity_is_decided_by_the_gates_bound_over_the_pairs() {
        let rule = DecisionRule::default();
        let limited = |b: &mut [RunResults], boots: usize| {
            for run in &mut b[..boots] {
                run.cells[4].status = CellStatus::CapacityLimited;
                run.cells[4].reason = Some("10/12 running".into());
            }
        };
        let verdict = |n: usize, boots: usize| {
            let (a, mut b) = pairs(9, n, &|_| 1.0);
            limited(&mut b, boots);
            let r = paired_compare(&a, &b, &rule).expect("compare");
            let cell = r.cells[4].clone();
            let Some(CellReason::Limit(why)) = cell.reason else {
                panic!("not a limit's reason: {:?}", cell.reason)
            };
            assert_eq!(why.against, Against::PairedAb);
            (cell.verdict, why, r)
        };
        let (v, why, r) = verdict(4, 1);
        assert_eq!(v, CellVerdict::Inconclusive, "{why:?}");
        assert_eq!(why.finding, LimitFinding::NotEveryBoot);
        assert_eq!((why.counts.boot_hits, why.counts.boots), (1, 4));
        assert_not_gate(&r, GateVerdict::Regression);
        // Every B boot limited and no A boot: 3 pairs bound the false alarm at 1.6%, 5 at 0.1%.
        let (v, why, _) = verdict(3, 3);
        assert_eq!(v, CellVerdict::Inconclusive, "{why:?}");
        assert_eq!(why.finding, LimitFinding::TooShort { needed: Some(5) });
        assert_eq!((why.counts.hits, why.counts.runs), (0, 3));
        let (v, why, r) = verdict(5, 5);
        assert_eq!(v, CellVerdict::CapacityRegression, "{why:?}");
        assert_gate(&r, GateVerdict::Regression);
        // Capacity spends its share of alpha, as in the gate.
        let shares = r.rule.shares.expect("shares");
        assert!(
            (shares.capacity - rule.capacity_alpha()).abs() < 1e-15,
            "{shares:?}"
        );
    }

    /// A cell at its capacity limit tips over at random: on an unchanged build the A/B calls
    /// a capacity regression within `capacity_alpha` (0.2%) whatever its flip rate. (The rule
    /// before 2026-12-05, one limited B boot, did so in 34% of 4-pair runs at a 10% flip rate.)
    #[test]
    fn a_cell_that_flips_at_random_is_rarely_a_capacity_regression() {
        use rand::RngExt;
        let rule = DecisionRule::default();
        let mut rng = StdRng::seed_from_u64(41);
        for flip in [0.1, 0.3, 0.5] {
            let mut alarms = 0;
            for trial in 0..200 {
                let (mut a, mut b) = pairs(100 + trial, 5, &|_| 1.0);
                for run in a.iter_mut().chain(b.iter_mut()) {
                    if rng.random::<f64>() < flip {
                        run.cells[4].status = CellStatus::CapacityLimited;
                    }
                }
                let r = paired_compare(&a, &b, &rule).expect("compare");
                alarms += usize::from(r.cells[4].verdict == CellVerdict::CapacityRegression);
            }
            // The bound is 0.2%: 0.4 expected in 200 at most.
            assert!(alarms <= 2, "flip rate {flip}: {alarms} of 200");
        }
    }

    #[test]
    fn too_few_pairs_is_an_error() {
        let (a, b) = pairs(4, 1, &|_| 1.0);
        assert!(paired_compare(&a, &b, &DecisionRule::default()).is_err());
    }

    #[test]
    fn a_false_alarm_is_rare_with_boot_noise() {
        let rule = DecisionRule::default();
        let mut alarms = 0;
        for seed in 0..200 {
            let (a, b) = pairs(100 + seed, 4, &|_| 1.0);
            if paired_compare(&a, &b, &rule).expect("compare").gate == GateVerdict::Regression {
                alarms += 1;
            }
        }
        assert!(alarms <= 6, "{alarms} false alarms in 200");
    }
}
