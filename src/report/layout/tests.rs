//! The layout of a pass, a matrix-wide regression confirmed on a second boot, an undecided
//! gate on a thin baseline and a single-cell regression: first lines, widths, legends, units.

use super::*;
use crate::results::{HardwareFingerprint, MatrixSpec, ProfileKey};
use crate::verdict::fixtures::metric;
use crate::verdict::{
    AlphaShares, BaselineSummary, CellSensitivity, Confirmation, Direction, MatrixTest,
    RuleSummary, Sensitivity, VERDICT_SCHEMA_VERSION,
};

/// The default job's 3 × 2 matrix (C = 1, 2, 4 × contexts 0, 8k), every cell `change` ± 1.2%
/// with `verdict`; per-user tok/s and ITL as the simulated engine serves them.
fn cells(change: f64, verdict: CellVerdict) -> Vec<CellComparison> {
    let mut out = Vec::new();
    for ctx in [0u64, 8192] {
        for conc in [1u32, 2, 4] {
            let per_user = 750.0 / f64::from(conc);
            out.push(CellComparison {
                concurrency: conc,
                context_tokens: ctx,
                verdict,
                reason: None,
                provisional: false,
                history_too_short: false,
                metrics: vec![
                    metric(
                        Metric::AggregateTps,
                        750.0 * f64::from(conc),
                        change,
                        0.012,
                        verdict,
                    ),
                    metric(
                        Metric::PerUserTps,
                        per_user,
                        change,
                        0.012,
                        CellVerdict::Unchanged,
                    ),
                    metric(Metric::TtftP90, 0.045, 0.02, 0.03, CellVerdict::Unchanged),
                    metric(
                        Metric::ItlP90,
                        1.1 / per_user,
                        -change,
                        0.01,
                        CellVerdict::Unchanged,
                    ),
                ],
            });
        }
    }
    out
}

fn report(gate: GateVerdict, cells: Vec<CellComparison>, matrix: MatrixTest) -> ComparisonReport {
    let hw = HardwareFingerprint {
        kind: "sim".into(),
        gpu_model: None,
        gpu_count: 0,
        driver_version: None,
        cpu_model: None,
    };
    let spec = MatrixSpec {
        model: "sim-test".into(),
        concurrency: vec![1, 2, 4],
        contexts: vec![0, 8192],
        timing: crate::results::CellTiming::DEFAULT,
        repetitions: 1,
    };
    ComparisonReport {
        schema_version: VERDICT_SCHEMA_VERSION,
        profile: ProfileKey::derive(hw, "infergate-sim", "sim-test", &spec),
        suite: Some("pr".into()),
        candidate_runs: vec!["cand".into()],
        against: Default::default(),
        baseline: BaselineSummary {
            level_runs: (1..=5).map(|i| format!("b{i}")).collect(),
            noise_runs: 5,
        },
        gate,
        headline: "the old headline".into(),
        matrix_test: Some(matrix),
        cells,
        lines: Vec::new(),
        rule: RuleSummary {
            alpha: 0.01,
            min_effect: 0.03,
            matrix_margin: 0.01,
            correction: "bonferroni".into(),
            confidence: 0.95,
            shares: Some(AlphaShares {
                matrix: 0.004,
                local: 0.004,
                capacity: 0.002,
                lines: 0.0012,
            }),
        },
        confirmation: None,
        coverage: None,
        sensitivity: Some(Sensitivity {
            design_effect: 0.05,
            design_power: 0.8,
            history_runs: 5,
            unit: Default::default(),
            matrix_mde: Some(-0.046),
            mde: -0.046,
            runs_needed: Some(0),
            sufficient: true,
            cells: vec![CellSensitivity {
                concurrency: 1,
                context_tokens: 0,
                mde: -0.08,
            }],
            level_lag: 0.0,
        }),
    }
}

fn matrix(change: f64, half: f64, verdict: CellVerdict) -> MatrixTest {
    MatrixTest {
        change,
        ci_low: change - half,
        ci_high: change + half,
        margin: 0.03,
        p_value: match verdict {
            CellVerdict::Regression => 0.0002,
            CellVerdict::Inconclusive => 0.09,
            _ => 0.41,
        },
        verdict,
        cells: 6,
        check: None,
    }
}

pub(crate) fn pass() -> ComparisonReport {
    report(
        GateVerdict::Pass,
        cells(0.002, CellVerdict::Unchanged),
        matrix(0.002, 0.008, CellVerdict::Unchanged),
    )
}

pub(crate) fn regression() -> ComparisonReport {
    let mut cells = cells(-0.096, CellVerdict::Regression);
    for c in &mut cells {
        c.metrics[0].decided_on = Some(crate::verdict::DecidedChange {
            basis: DecisionBasis::WithMatrix,
            change: -0.096,
            ci_low: -0.108,
            ci_high: -0.084,
            matrix_change: Some(-0.096),
        });
    }
    let mut r = report(
        GateVerdict::Regression,
        cells,
        MatrixTest {
            ci_low: -0.109,
            ci_high: -0.084,
            ..matrix(-0.096, 0.0, CellVerdict::Regression)
        },
    );
    r.confirmation = Some(Confirmation {
        reason: "the first boot's matrix-wide change was −9.4% [−11.0, −7.8], p = 0.0300".into(),
        first_boot: Some(matrix(-0.094, 0.016, CellVerdict::Inconclusive)),
        provisional_alarms: 0,
        second_results: "results-confirm.json".into(),
        used: true,
    });
    r
}

pub(crate) fn insufficient() -> ComparisonReport {
    let mut cells = cells(-0.021, CellVerdict::Inconclusive);
    cells[0].verdict = CellVerdict::Unchanged;
    cells[0].metrics[0].verdict = CellVerdict::Unchanged;
    let mut r = report(
        GateVerdict::Insufficient,
        cells,
        matrix(-0.021, 0.019, CellVerdict::Inconclusive),
    );
    if let Some(s) = r.sensitivity.as_mut() {
        s.history_runs = 2;
        s.matrix_mde = Some(-0.079);
        s.mde = -0.079;
        s.runs_needed = Some(5);
        s.sufficient = false;
    }
    r
}

#[test]
fn the_first_line_says_the_answer_with_size_interval_and_cells() {
    assert_eq!(
        first_line(&regression()),
        "✗ aggregate tok/s −9.6% [−10.9, −8.4] in all 6 cells, confirmed on a second boot"
    );
    assert_eq!(
        first_line(&pass()),
        "✓ no regression in 6 cells (aggregate tok/s +0.2% [−0.6, +1.0]); this run could detect −4.6% or worse"
    );
    let thin = first_line(&insufficient());
    assert!(
        thin.starts_with("? insufficient: no regression proven in 6 cells"),
        "{thin}"
    );
    assert!(
        thin.ends_with("this baseline could detect only −7.9% or worse, not the rule's −5.0% (5 more baseline runs needed)"),
        "{thin}"
    );
}

/// A one-run store: asked for more runs, not given a count or told it never can, and a cell
/// test that cannot find even a total loss prints no figure for it.
#[test]
fn a_one_run_store_asks_for_runs_and_prints_no_impossible_mde() {
    let mut r = insufficient();
    if let Some(s) = r.sensitivity.as_mut() {
        s.history_runs = 1;
        s.runs_needed = None;
        for c in &mut s.cells {
            c.mde = -1.0;
        }
    }
    let first = first_line(&r);
    assert!(
        first.ends_with("(more baseline runs needed: one shows no boot-to-boot noise yet)"),
        "{first}"
    );
    let l = layout(&r);
    let line = l
        .details
        .iter()
        .find(|d| d.starts_with("Sensitivity at"))
        .expect("sensitivity line");
    assert_eq!(
        line,
        "Sensitivity at 80% power with 1 baseline run: a uniform −7.9% over the matrix; no slowdown in one cell alone (median cell)."
    );
}

/// A level that lags a slowing runner says so where the sensitivity is, as the reason the
/// matrix-wide test and its MDE are wider than the runs' scatter; without a lag, nothing.
#[test]
fn the_level_lag_behind_a_slowing_runner_is_said_beside_the_sensitivity() {
    let line = |r: &ComparisonReport| {
        layout(r)
            .details
            .into_iter()
            .find(|d| d.starts_with("Sensitivity at"))
            .expect("sensitivity line")
    };
    let mut r = insufficient();
    assert!(!line(&r).contains("lags"), "{}", line(&r));
    if let Some(s) = r.sensitivity.as_mut() {
        s.level_lag = 0.0063;
    }
    assert!(
        line(&r).ends_with(
            "; the level lags the history's slowing by 0.6%, counted in the matrix-wide test's noise."
        ),
        "{}",
        line(&r)
    );
}

#[test]
fn one_symbol_and_one_number_per_cell_and_a_legend_of_what_appears() {
    let l = layout(&regression());
    let g = l.grid.as_ref().expect("grid");
    assert_eq!(g.concurrency, [1, 2, 4]);
    let first = g.rows[0].1[0].as_ref().expect("cell");
    assert_eq!(first.text(), "−9.6 ✗");
    assert_eq!(l.legend, [("✗", "regression")]);
    // An insufficient gate passed no cell: the cells no test decided are `?` (not decided),
    // not `✓`, though verdict.json keeps their `unchanged`.
    let report = insufficient();
    assert!(
        report
            .cells
            .iter()
            .any(|c| c.verdict == CellVerdict::Unchanged)
    );
    let l = layout(&report);
    assert_eq!(l.legend, [("?", "not decided")]);
    let l = layout(&pass());
    assert_eq!(l.legend, [("✓", "no regression")]);
}

#[test]
fn a_cell_the_second_boot_cleared_is_marked_beside_its_two_boot_mean() {
    // One cell −10.6% over both boots, its own test past its boundary, but the second boot
    // alone did not lean worse: unchanged, and its figure says why it is not a regression.
    let mut r = pass();
    let m = &mut r.cells[5].metrics[0];
    m.change = -0.106;
    m.check = Some(crate::verdict::Check {
        look: "second boot alone, futility screen".into(),
        statistic: -0.01,
        reference: "t(37.0)".into(),
        boundary: -1.69,
        alpha: 0.05,
        screen: true,
        rejected: false,
        outcome: "no regression: the second boot alone does not lean worse".into(),
    });
    let l = layout(&r);
    let g = l.grid.as_ref().expect("grid");
    assert_eq!(g.rows[1].1[2].as_ref().expect("cell").text(), "−10.6‡ ✓");
    assert_eq!(g.rows[0].1[0].as_ref().expect("cell").text(), "+0.2 ✓");
    assert_eq!(
        l.legend,
        [
            ("✓", "no regression"),
            (
                "‡",
                "moved on one boot only: the second boot alone did not (see Details)"
            )
        ]
    );
}

#[test]
fn the_console_is_at_most_100_columns_and_says_the_headline_once() {
    for r in [pass(), regression(), insufficient()] {
        let text = console(&layout(&r));
        assert!(crate::report::console::fits(&text), "{text}");
        assert!(!text.contains("the old headline"), "{text}");
        let unwrapped = text.replace("\n  ", " ");
        let first = first_line(&r);
        assert_eq!(unwrapped.matches(first.as_str()).count(), 1, "{text}");
    }
}

#[test]
fn latencies_carry_units_and_never_a_verdict_word_against_their_sign() {
    let mut r = regression();
    // A significant ITL p90 rise and a TTFT p90 fall on the slower build.
    r.cells[0].metrics[3] = metric(Metric::ItlP90, 0.0033, 0.061, 0.02, CellVerdict::Regression);
    r.cells[1].metrics[2] = metric(
        Metric::TtftP90,
        0.045,
        -0.089,
        0.02,
        CellVerdict::Improvement,
    );
    let l = layout(&r);
    assert_eq!(l.secondary.len(), 2, "{:?}", l.secondary);
    let itl = &l.secondary[0];
    assert_eq!(itl.values, "3.30 ms → 3.50 ms");
    assert!(itl.change.ends_with("higher"), "{}", itl.change);
    let ttft = &l.secondary[1];
    assert!(ttft.change.ends_with("lower"), "{}", ttft.change);
    let md = markdown(&l, true);
    assert!(!md.contains("improvement"), "{md}");
    assert_eq!(metric_value(Metric::AggregateTps, 747.23), "747.2 tok/s");
    assert_eq!(metric_value(Metric::ItlP50, 0.0013), "1.30 ms");
    assert_eq!(metric_value(Metric::TtftP50, 0.0421), "42.1 ms");
    assert_eq!(metric_value(Metric::TtftP90, 0.1234), "123 ms");
    assert_eq!(Metric::ItlP90.direction(), Direction::LowerIsBetter);
}

#[test]
fn a_latency_that_cannot_be_right_is_not_shown() {
    let mut r = pass();
    // ITL p50 of 0.1 ms beside 750 tok/s per user (1.3 ms a token): tokens that came together.
    r.cells[0].metrics[3] = metric(
        Metric::ItlP50,
        0.0022,
        -0.947,
        0.02,
        CellVerdict::Improvement,
    );
    assert!(layout(&r).secondary.is_empty());
}

#[test]
fn a_cell_regression_names_the_worst_cell_and_the_count() {
    let mut r = pass();
    r.gate = GateVerdict::Regression;
    r.cells[5].verdict = CellVerdict::Regression;
    r.cells[5].metrics[0] = metric(
        Metric::AggregateTps,
        3000.0,
        -0.123,
        0.02,
        CellVerdict::Regression,
    );
    assert_eq!(
        first_line(&r),
        "✗ aggregate tok/s −12.3% [−14.3, −10.3] at C=4 / 8k; 1 of 6 cells regressed"
    );
}

/// The 8k row of the default 2-row matrix 10% slower: against the rest of its run (the run
/// effect took half of it) each of its cells moved −5.1%, in total −10.0%. The grid shows the
/// total, as its caption says, marked where the decided figure reads otherwise, and the first
/// line names the worst total.
#[test]
fn a_row_decided_against_its_run_shows_its_total_marked() {
    let mut r = pass();
    r.gate = GateVerdict::Regression;
    r.matrix_test = Some(matrix(-0.051, 0.008, CellVerdict::Regression));
    for (i, c) in r.cells.iter_mut().enumerate().skip(3) {
        c.verdict = CellVerdict::Regression;
        let mut m = metric(
            Metric::AggregateTps,
            3000.0,
            -0.100,
            0.006,
            CellVerdict::Regression,
        );
        // The last cell's own figure happens to round to its total: no mark.
        let own = if i == 5 { -0.1001 } else { -0.051 };
        m.decided_on = Some(crate::verdict::DecidedChange {
            basis: DecisionBasis::VsRun,
            change: own,
            ci_low: own - 0.006,
            ci_high: own + 0.006,
            matrix_change: None,
        });
        c.metrics[0] = m;
    }
    let l = layout(&r);
    let g = l.grid.as_ref().expect("grid");
    let row: Vec<String> = g.rows[1]
        .1
        .iter()
        .map(|c| c.as_ref().expect("cell").text())
        .collect();
    assert_eq!(row, ["−10.0† ✗", "−10.0† ✗", "−10.0 ✗"]);
    assert!(
        l.legend
            .iter()
            .any(|(s, w)| *s == "†" && w.contains("not on this total")),
        "{:?}",
        l.legend
    );
    assert_eq!(
        first_line(&r),
        "✗ aggregate tok/s −5.1% [−5.9, −4.3] over 6 cells, 3 of them regressed (worst −10.0% at C=1 / 8k)"
    );
}

/// What the old tally headline said and the one answer line must say too: the best
/// improvement (an A/B run asking "does flag X help?"), the cells not counted, an unmeasured
/// run's error regressions, a replayed second boot that was not used, and why there is no
/// baseline.
#[test]
fn the_first_line_accounts_for_improvements_uncounted_cells_errors_and_second_boots() {
    let mut r = pass();
    for (i, change) in [(1, 0.08), (4, 0.121)] {
        r.cells[i].verdict = CellVerdict::Improvement;
        r.cells[i].metrics[0].change = change;
    }
    r.cells[5].verdict = CellVerdict::Saturated;
    r.cells[5].metrics.clear();
    assert_eq!(
        first_line(&r),
        "✓ no regression in 5 cells (aggregate tok/s +0.2% [−0.6, +1.0]); this run could detect \
         −4.6% or worse; 1 saturated; 2 cells faster, best +12.1% at C=2 / 8k"
    );
    let mut worse = regression();
    worse.cells[2].verdict = CellVerdict::Improvement;
    worse.cells[2].metrics[0].change = 0.05;
    worse.cells[2].metrics[0].decided_on = None;
    worse.confirmation.as_mut().expect("confirmation").used = false;
    worse.confirmation.as_mut().expect("confirmation").reason = "no alarm to confirm".into();
    assert_eq!(
        first_line(&worse),
        "✗ aggregate tok/s −9.6% [−10.9, −8.4] over 6 cells, 5 of them regressed (worst −9.6% at \
         C=1 / 0); 1 cell faster: +5.0% at C=4 / 0; first boot only (the second boot's results \
         were not used: no alarm to confirm)"
    );
    let mut broken = pass();
    broken.gate = GateVerdict::Unmeasured;
    broken.cells[3].verdict = CellVerdict::ErrorRegression;
    broken.cells[3].reason = Some("error now: stream reset".into());
    assert!(
        first_line(&broken)
            .ends_with("; 1 error regression, first at C=1 / 8k: error now: stream reset"),
        "{}",
        first_line(&broken)
    );
    let mut none = pass();
    none.gate = GateVerdict::NoBaseline;
    for c in &mut none.cells {
        c.reason = Some("different profile".into());
    }
    assert_eq!(
        first_line(&none),
        "– no baseline yet for this profile and suite: 6 cells measured, nothing compared \
         (different profile)"
    );
}

/// A provisional alarm is what an `insufficient` gate waits on: the first line says so before
/// the sensitivity, which alone would read as a sufficient gate.
#[test]
fn a_provisional_alarm_leads_the_insufficient_line() {
    let mut r = pass();
    r.gate = GateVerdict::Insufficient;
    r.cells[4].provisional = true;
    r.cells[4].verdict = CellVerdict::Inconclusive;
    assert_eq!(
        first_line(&r),
        "? insufficient: a second boot decides 1 provisional alarm (C=2 / 8k); no regression \
         proven in 6 cells (aggregate tok/s +0.2% [−0.6, +1.0]); this run could detect −4.6% or \
         worse"
    );
    // A cell at its limit that the history is too short to judge: the gate waits for runs.
    let mut young = pass();
    young.gate = GateVerdict::Insufficient;
    young.cells[5].history_too_short = true;
    young.cells[5].verdict = CellVerdict::Inconclusive;
    assert!(
        first_line(&young).starts_with(
            "? insufficient: too few baseline runs to judge 1 cell now at its limit (C=4 / 8k); \
             no regression proven in"
        ),
        "{}",
        first_line(&young)
    );
    for c in &mut r.cells {
        c.provisional = true;
    }
    assert!(
        first_line(&r).contains("decides 6 provisional alarms (C=1 / 0, C=2 / 0, C=4 / 0, …); "),
        "{}",
        first_line(&r)
    );
}

/// An A/B run names its sides wherever a gate says "baseline": B is compared with A's boots.
#[test]
fn an_ab_run_says_b_vs_a_never_baseline() {
    let mut ab = insufficient();
    ab.against = crate::verdict::Against::PairedAb;
    if let Some(s) = ab.sensitivity.as_mut() {
        s.unit = crate::verdict::SensitivityUnit::Pairs;
    }
    ab.baseline.level_runs.truncate(4);
    ab.baseline.noise_runs = 4;
    let text = console(&layout(&ab));
    assert!(
        text.starts_with("? insufficient: no regression of B vs A proven in 6 cells"),
        "{text}"
    );
    assert!(
        text.contains("aggregate tok/s, change of B vs A in %"),
        "{text}"
    );
    assert!(
        text.contains("A's level from 4 boots, noise from 4 pairs."),
        "{text}"
    );
    assert!(!text.contains("baseline"), "{text}");
    let mut worse = regression();
    worse.against = crate::verdict::Against::PairedAb;
    assert!(
        first_line(&worse).starts_with("✗ B vs A: aggregate tok/s −9.6% [−10.9, −8.4]"),
        "{}",
        first_line(&worse)
    );
    let mut pass = pass();
    pass.against = crate::verdict::Against::PairedAb;
    assert!(first_line(&pass).starts_with("✓ no regression of B vs A in 6 cells"));
}

#[test]
fn markdown_snapshots() {
    insta::assert_snapshot!("pass", markdown(&layout(&pass()), true));
    insta::assert_snapshot!("regression", markdown(&layout(&regression()), true));
    insta::assert_snapshot!("insufficient", markdown(&layout(&insufficient()), true));
}

#[test]
fn console_snapshots() {
    insta::assert_snapshot!("console_regression", console(&layout(&regression())));
}

/// The Rule line's shares add up to the α it prints: what no test was given is named.
#[test]
fn the_rule_line_shares_add_up_to_alpha() {
    let mut r = regression();
    let rule = |r: &ComparisonReport| {
        details(r)
            .into_iter()
            .find(|l| l.starts_with("Rule:"))
            .unwrap_or_default()
    };
    assert!(!rule(&r).contains("unspent"), "{}", rule(&r));
    // An A/B comparison: capacity is decided by counts, not at a share.
    r.rule.shares = Some(AlphaShares {
        matrix: 0.004,
        local: 0.004,
        capacity: 0.0,
        lines: 0.0,
    });
    let line = rule(&r);
    assert!(
        line.contains("4.00e-3 to the cells (Bonferroni), 2.00e-3 unspent;"),
        "{line}"
    );
    // With line tests the local share is the rows', columns' and cells'.
    r.lines.push(crate::verdict::LineTest {
        axis: crate::verdict::LineAxis::Context,
        at: 0,
        test: crate::verdict::MatrixTest {
            change: 0.0,
            ci_low: -0.01,
            ci_high: 0.01,
            margin: 0.03,
            p_value: 0.5,
            verdict: CellVerdict::Unchanged,
            cells: 2,
            check: None,
        },
    });
    let line = rule(&r);
    assert!(
        line.contains(
            "4.00e-3 to rows, columns and cells (Bonferroni within each family), 2.00e-3 unspent;"
        ),
        "{line}"
    );
}
