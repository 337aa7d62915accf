//! The layout of a pass, a matrix-wide regression confirmed on a second boot, an undecided
//! gate on a thin baseline and a single-cell regression: grids, widths, legends, units, Details
//! (the first line itself is tested beside its writer, `src/answer.rs`).

use super::*;
use infergate_schema::asserts::{
    assert_contains, assert_ends_with, assert_lacks, assert_starts_with,
};
use infergate_schema::verdict::CellVerdict::*;
use infergate_schema::verdict::Metric::*;
use infergate_schema::verdict::fixtures::{
    insufficient, matrix, metric, metric_in, pass, regression,
};
use infergate_schema::verdict::{
    AlphaShares, CheckOutcome, Direction, Found, HostLateCell, LoneBoot, NotGated,
};

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
    assert_ends_with(
        &first,
        "(more baseline runs needed: one shows no boot-to-boot noise yet)",
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
    assert_lacks(&line(&r), "lags");
    if let Some(s) = r.sensitivity.as_mut() {
        s.level_lag = 0.0063;
    }
    assert_ends_with(
        &line(&r),
        "; the level lags the history's slowing by 0.6%, counted in the matrix-wide test's noise.",
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
    assert!(report.cells.iter().any(|c| c.verdict == Unchanged));
    let l = layout(&report);
    assert_eq!(l.legend, [("?", "not decided")]);
    let l = layout(&pass());
    assert_eq!(l.legend, [("✓", "no regression")]);
    assert_eq!(
        l.grid_caption,
        "aggregate tok/s, change vs baseline in %, and baseline → now"
    );
}

/// A tail the rule lists that did not gate for want of runs (here restarted alone by
/// `baseline accept --metric`) is still shown, marked reported only and `–`, and the table's
/// title no longer says every row gated.
#[test]
fn a_tail_that_did_not_gate_is_shown_reported_only() {
    let mut r = pass();
    r.cell_metrics_gated.clear();
    r.not_gated = vec![NotGated::RestartedShort {
        metric: ItlP99,
        runs: 3,
        needs: 10,
    }];
    for (i, c) in r.cells.iter_mut().enumerate() {
        let change = if i == 0 { 0.4 } else { 0.01 };
        c.metrics
            .push(metric(ItlP99, 0.008, change, 0.05, Unchanged));
    }
    let l = layout(&r);
    let row = l
        .latency
        .iter()
        .find(|row| row.name == "ITL p99")
        .expect("row");
    assert_eq!(row.change, "– +1.0% to +40.0% in 6 cells (reported only)");
    assert_eq!(row.values, "8.00 ms → 8.08–11.2 ms");
    assert!(l.legend.contains(&("–", "not compared")), "{:?}", l.legend);
    // A layer that does not gate reads the same: `–`, never a `✓` that looks vouched for.
    let mut r = r.clone();
    r.burst = vec![CellComparison {
        verdict: Unchanged,
        ..layer(
            0,
            vec![metric(BurstTps, 87_000.0, -0.001, 0.002, Unchanged)],
        )
    }];
    let burst = layout(&r).burst;
    assert_eq!(burst.len(), 1);
    assert_starts_with(&burst[0].change, "– −0.1% [−0.3, +0.1] (reported only)");
    let text = console(&l);
    assert_contains(&text, "Decode latency (change vs baseline over the cells):");
    assert_lacks(&text, "Decode latency (gated");
    assert_contains(&markdown(&l, true), "Decode latency (over the cells)");
}

/// A grid of cells decided on their ITL p99 shows its ms, marked `*`, and its caption says the
/// grid is not all tok/s.
#[test]
fn a_grid_of_cells_decided_on_another_metric_says_so_in_its_caption() {
    let mut r = regression();
    for m in r.cells.iter_mut().flat_map(|c| c.metrics.iter_mut()) {
        if m.verdict.is_regression() {
            m.metric = ItlP99;
        }
    }
    let l = layout(&r);
    assert_eq!(
        l.grid_caption,
        "aggregate tok/s (* another metric), change vs baseline in %, and baseline → now"
    );
    assert!(
        l.legend
            .contains(&("*", "decided on another metric (see Details)"))
    );
}

#[test]
fn a_cell_the_second_boot_cleared_is_marked_beside_its_two_boot_mean() {
    // One cell −10.6% over both boots, its own test past its boundary, but the second boot
    // alone did not lean worse: unchanged, and its figure says why it is not a regression.
    let mut r = pass();
    let m = &mut r.cells[5].metrics[0];
    m.change = -0.106;
    m.check = Some(infergate_schema::verdict::Check {
        look: "second boot alone, futility screen".into(),
        statistic: -0.01,
        reference: "t(37.0)".into(),
        boundary: -1.69,
        alpha: 0.05,
        screen: true,
        rejected: false,
        outcome: CheckOutcome::BootDoesNotLean {
            found: Found::Regression,
            boot: LoneBoot::Second,
        },
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
        assert_lacks(&text, "the old headline");
        let unwrapped = text.replace("\n  ", " ");
        let first = first_line(&r);
        assert_eq!(unwrapped.matches(first.as_str()).count(), 1, "{text}");
    }
}

#[test]
fn latencies_carry_units_and_never_a_verdict_word_against_their_sign() {
    let mut r = regression();
    // A significant ITL p90 rise and a TTFT p90 fall on the slower build.
    r.cells[0].metrics[3] = metric(ItlP90, 0.0033, 0.061, 0.02, Regression);
    r.cells[1].metrics[2] = metric(TtftP90, 0.045, -0.089, 0.02, Improvement);
    let l = layout(&r);
    assert_eq!(l.secondary.len(), 2, "{:?}", l.secondary);
    let itl = &l.secondary[0];
    assert_eq!(itl.values, "3.30 ms → 3.50 ms");
    assert_ends_with(&itl.change, "higher");
    let ttft = &l.secondary[1];
    assert_ends_with(&ttft.change, "lower");
    let md = markdown(&l, true);
    assert_lacks(&md, "improvement");
    assert_eq!(with_unit(AggregateTps, 747.23), "747.2 tok/s");
    assert_eq!(with_unit(ItlP50, 0.0013), "1.30 ms");
    assert_eq!(with_unit(TtftP50, 0.0421), "42.1 ms");
    assert_eq!(with_unit(TtftP90, 0.1234), "123 ms");
    assert_eq!(ItlP90.direction(), Direction::LowerIsBetter);
}

#[test]
fn a_latency_that_cannot_be_right_is_not_shown() {
    let mut r = pass();
    // ITL p50 of 0.1 ms beside 750 tok/s per user (1.3 ms a token): tokens that came together.
    r.cells[0].metrics[3] = metric(ItlP50, 0.0022, -0.947, 0.02, Improvement);
    assert!(layout(&r).secondary.is_empty());
}

/// A server with regular stalls (3 ms steps, a 50 ms pause every 4: 15.5 ms a token on
/// average) has an ITL p50 far under its mean token gap, and it is its real step: its change
/// is shown, not dropped as tokens that came together.
#[test]
fn a_latency_under_regular_stalls_is_shown() {
    let mut r = pass();
    r.cells[0].metrics[1] = metric(PerUserTps, 1.0 / 0.0155, 0.0, 0.01, Unchanged);
    r.cells[0].metrics[3] = metric(ItlP50, 0.003, 0.12, 0.02, Regression);
    assert!(!layout(&r).secondary.is_empty());
}

/// The 8k row of the default 2-row matrix 10% slower: against the rest of its run (the run
/// effect took half of it) each of its cells moved −5.1%, in total −10.0%. The grid shows the
/// total, as its caption says, marked where the decided figure reads otherwise, and the first
/// line names the worst total.
#[test]
fn a_row_decided_against_its_run_shows_its_total_marked() {
    let mut r = pass();
    r.gate = GateVerdict::Regression;
    r.matrix_test = Some(matrix(-0.051, 0.008, Regression));
    for (i, c) in r.cells.iter_mut().enumerate().skip(3) {
        c.verdict = Regression;
        let mut m = metric(AggregateTps, 3000.0, -0.100, 0.006, Regression);
        // The last cell's own figure happens to round to its total: no mark.
        let own = if i == 5 { -0.1001 } else { -0.051 };
        m.decided_on = Some(infergate_schema::verdict::DecidedChange {
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
        "✗ aggregate tok/s −5.1% [−5.9, −4.3] over 6 cells, 3 of them regressed (the 8k row; worst \
         −10.0% at C=1 / 8k)"
    );
}

/// An A/B run names its sides wherever a gate says "baseline": B is compared with A's boots.
#[test]
fn an_ab_run_says_b_vs_a_never_baseline() {
    let mut ab = insufficient();
    ab.against = infergate_schema::verdict::Against::PairedAb;
    if let Some(s) = ab.sensitivity.as_mut() {
        s.unit = infergate_schema::verdict::SensitivityUnit::Pairs;
    }
    ab.baseline.level_runs.truncate(4);
    ab.baseline.noise_runs = 4;
    let text = console(&layout(&ab));
    assert_starts_with(
        &text,
        "? insufficient: no regression of B vs A proven in 6 cells",
    );
    assert_contains(&text, "aggregate tok/s, change of B vs A in %");
    assert_contains(&text, "A's level from 4 boots, noise from 4 pairs.");
    assert_lacks(&text, "baseline");
    let mut worse = regression();
    worse.against = infergate_schema::verdict::Against::PairedAb;
    assert_starts_with(
        &first_line(&worse),
        "✗ B vs A: aggregate tok/s −9.6% [−10.9, −8.4]",
    );
    let mut pass = pass();
    pass.against = infergate_schema::verdict::Against::PairedAb;
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
    assert_lacks(&rule(&r), "unspent");
    // An A/B comparison: capacity is decided by counts, not at a share.
    r.rule.shares = Some(AlphaShares {
        matrix: 0.004,
        local: 0.004,
        capacity: 0.0,
        lines: 0.0,
        secondary: None,
    });
    let line = rule(&r);
    assert_contains(&line, "4.00e-3 to the cells (Bonferroni), 2.00e-3 unspent;");
    // With line tests the local share is the rows', columns' and cells'.
    r.lines.push(infergate_schema::verdict::LineTest {
        axis: infergate_schema::verdict::LineAxis::Context,
        at: 0,
        test: matrix(0.0, 0.01, Unchanged),
    });
    let line = rule(&r);
    assert_contains(
        &line,
        "4.00e-3 to rows, columns and cells (Bonferroni within each family), 2.00e-3 unspent;",
    );
}

/// An annotation of a cell that moved with the matrix says its figure once: the total, then
/// the reason naming the matrix, not the same figure again as "total".
#[test]
fn an_annotation_says_a_cell_moved_with_the_matrix_once() {
    let mut r = regression();
    r.cells[0].reason =
        Some("with the matrix: −9.6% (regression); aggregate tok/s −9.6% in total".into());
    let message = cell_message(&r.cells[0], 0.90);
    assert_starts_with(&message, "aggregate tok/s ");
    assert_contains(
        &message,
        "(−9.6%; 90% interval [−10.8, −8.4]; margin 3.0%); with the matrix: −9.6% (regression)",
    );
    assert_lacks(&message, "total −9.6%");
}

/// Intervals whose boot-to-boot noise is a prior (one baseline run) say so, and say whether a
/// second boot's scatter joined it.
#[test]
fn intervals_from_a_prior_say_so() {
    let mut r = pass();
    r.baseline.noise_runs = 1;
    r.candidate_runs = vec!["first".into(), "second".into()];
    let details = layout(&r).details;
    assert!(
        details.iter().any(
            |d| d.starts_with("Intervals from a prior: one baseline run")
                && d.contains("pooled with the scatter of this candidate's boots")
        ),
        "{details:#?}"
    );
    r.candidate_runs = vec!["first".into()];
    let details = layout(&r).details;
    assert!(
        details
            .iter()
            .any(|d| d.contains("not a measurement; record more baseline runs")),
        "{details:#?}"
    );
}

/// The history runs a gating tail left out are accounted for in the Details, each metric's on
/// one line; none, no line.
#[test]
fn the_history_runs_a_tail_left_out_are_in_the_details() {
    let mut r = pass();
    let said = |r: &ComparisonReport| -> Vec<String> {
        let details = layout(r).details;
        details
            .into_iter()
            .filter(|d| d.contains("left out of history"))
            .collect()
    };
    assert!(said(&r).is_empty());
    r.history_host_late = vec![infergate_schema::verdict::HistoryHostLate {
        metric: ItlP99,
        runs: vec!["b3".into(), "b11".into()],
        cells: 4,
    }];
    assert_eq!(
        said(&r),
        [
            "ITL p99 left out of history runs b3, b11 in 4 cells: the host ran the gate's probe late \
          on them, so their tails are no measurement of the engine's."
        ]
    );
}

/// A regressed layer's entry (prefill: at `context_tokens`; burst: 0) with `metrics`.
fn layer(context_tokens: u64, metrics: Vec<MetricComparison>) -> CellComparison {
    CellComparison {
        concurrency: 0,
        context_tokens,
        verdict: Regression,
        reason: None,
        metrics,
        provisional: false,
        history_too_short: false,
        not_compared: None,
    }
}

/// A prefill regression alone: the first line names the prefill layer, its context and its
/// change; the console and Markdown show one compact prefill table with the values beside the
/// change, and the decode grid as before.
#[test]
fn a_prefill_regression_is_named_first_and_tabled_per_context() {
    let mut r = pass();
    r.prefill_gated = true;
    r.prefill.push(layer(
        8192,
        vec![metric(PrefillTps, 172_000.0, -0.75, 0.02, Regression)],
    ));
    r.gate = GateVerdict::Regression;
    let first = first_line(&r);
    assert_starts_with(
        &first,
        "✗ prefill tok/s −75.0% [−77.0, −73.0] at 8k; prefill layer: 1 of 1 context regressed",
    );
    let l = layout(&r);
    assert_eq!(l.prefill.len(), 1);
    assert_eq!(l.prefill[0].name, "8k");
    assert_eq!(l.prefill[0].values, "172,000 → 43,000 tok/s");
    let text = console(&l);
    assert_contains(
        &text,
        "Prefill layer (prefill tok/s of cold samples, change vs baseline):\n  8k: ✗ −75.0% [−77.0, −73.0], 172,000 → 43,000 tok/s",
    );
    assert_contains(&text, "ctx \\ C");
    let md = markdown(&l, true);
    assert_contains(
        &md,
        "| 8k | ✗ −75.0% \\[−77.0, −73.0\\] | 172,000 → 43,000 tok/s |",
    );
}

/// A gated prefill context whose interval reaches twice the layer's margin is not vouched for: the
/// first line names the context and how far down it could be before anything that reads like
/// a pass, and its row says so with `?`.
#[test]
fn a_prefill_context_whose_bound_reaches_the_margin_is_not_vouched_for() {
    let mut r = pass();
    r.prefill_gated = true;
    let mut m = metric(PrefillTps, 172_000.0, -0.02, 0.22, Unchanged);
    m.margin = 0.10;
    r.prefill.push(CellComparison {
        verdict: Unchanged,
        ..layer(8192, vec![m])
    });
    r.gate = GateVerdict::Insufficient;
    let l = layout(&r);
    assert_starts_with(
        &l.first_line,
        "? insufficient: prefill tok/s could be −20.0% or worse (8k down to −24.0%; baseline runs on a quieter runner or more of them narrow it); no regression proven in 6 cells",
    );
    assert_eq!(
        l.prefill[0].change,
        "? −2.0% [−24.0, +20.0] (not vouched for: could be −20.0% or worse)"
    );
    assert!(
        l.next_steps.iter().any(|s| s
            .what
            .starts_with("What would decide prefill tok/s in 8k: a narrower interval")
            && s.what
                .ends_with("or more cold samples (the suite's `prefill_samples`)")),
        "{:?}",
        l.next_steps
    );
    // In Markdown the setting is a code span, as the command is, not escaped backticks.
    let md = markdown(&l, true);
    assert_contains(&md, "or more cold samples (the suite's `prefill_samples`)");
    assert_lacks(&md, "\\`");
}

/// A next step's own code spans stay code spans in Markdown and the rest is escaped; an
/// unpaired backtick is escaped with the rest.
#[test]
fn a_next_steps_code_spans_stay_code_and_the_rest_is_escaped() {
    assert_eq!(
        escape_keeping_code("from longer windows (the suite's `duration`) or *more*"),
        "from longer windows (the suite's `duration`) or \\*more\\*"
    );
    assert_eq!(escape_keeping_code("a ` alone"), "a \\` alone");
}

/// A burst TTFT regression alone: the first line names TTFT and the burst layer; the console
/// and Markdown show the burst's compact table, absolute values beside each change.
#[test]
fn a_burst_ttft_regression_is_named_first_and_tabled() {
    let mut r = pass();
    r.burst_gated = true;
    // The burst layer's margin (10%), which the total's interval stays within.
    let total = MetricComparison {
        margin: 0.10,
        ..metric(BurstTps, 54_000.0, -0.01, 0.02, Unchanged)
    };
    r.burst.push(layer(
        0,
        vec![total, metric(BurstTtftP90, 0.057, 0.50, 0.05, Regression)],
    ));
    r.gate = GateVerdict::Regression;
    let first = first_line(&r);
    assert_starts_with(
        &first,
        "✗ TTFT p90 +50.0% [+45.0, +55.0] in the burst layer",
    );
    let l = layout(&r);
    assert_eq!(l.burst.len(), 2);
    let text = console(&l);
    assert_contains(
        &text,
        "Burst layer (change vs baseline):\n  total tok/s: ✓ −1.0% [−3.0, +1.0], 54,000 → 53,460 tok/s\n  TTFT p90: ✗ +50.0% [+45.0, +55.0], 57.0 ms → 85.5 ms",
    );
    let md = markdown(&l, true);
    assert_contains(
        &md,
        "| TTFT p90 | ✗ +50.0% \\[+45.0, +55.0\\] | 57.0 ms → 85.5 ms |",
    );
}

/// A gated latency metric is covered in words and in a row of its own, pass or not: the first
/// line names it with the cells it gated in, the row gives the cells' changes, the change that
/// fails, and their values; a regressed cell is named.
#[test]
fn a_gated_latency_metric_is_named_in_the_first_line_and_tabled_over_the_cells() {
    let mut r = pass();
    r.cell_metrics_gated = vec![ItlP90];
    for i in 0..r.cells.len() {
        let m = metric_in(&mut r, i, ItlP90);
        m.margin = 1.0;
        m.change = 0.01 * i as f64;
        m.candidate = m.baseline * (1.0 + m.change);
    }
    // One cell had too few observations of it: no entry, so not counted.
    r.cells[5].metrics.retain(|m| m.metric != ItlP90);
    let l = layout(&r);
    assert_contains(&l.first_line, "; ITL p90 in 5 of 6)");
    assert_eq!(l.latency.len(), 1, "{:?}", l.latency);
    let row = &l.latency[0];
    assert_eq!(row.name, "ITL p90");
    assert_eq!(
        row.change,
        "✓ 0.0% to +4.0% in 5 cells (fails beyond +100.0%)"
    );
    assert_eq!(row.values, "1.47–5.87 ms → 1.47–5.98 ms");
    let console = console(&l);
    assert_contains(&console, "Decode latency (gated");
    let md = markdown(&l, true);
    assert_contains(&md, "| ITL p90 | ✓ 0.0% to +4.0% in 5 cells");

    // Every cell: "in all 6"; one regressed: named, and the row's symbol is the worst.
    r.cells[5] = pass().cells[5].clone();
    r.cells[2].metrics[3].verdict = Regression;
    let l = layout(&r);
    assert_contains(&l.first_line, "; ITL p90 in all 6)");
    assert_starts_with(&l.latency[0].change, "✗ ");
    assert_contains(&l.latency[0].change, ", 1 regressed (C=4 / 0)");

    // A metric gated in no cell is neither named nor tabled (Details say why).
    for c in &mut r.cells {
        c.metrics.retain(|m| m.metric != ItlP90);
    }
    let l = layout(&r);
    assert_lacks(&l.first_line, "ITL");
    assert!(l.latency.is_empty());

    // Not gated in any cell because the host ran late: the first line says so before anything
    // that reads like a pass, and the row says where and how late.
    r.gate = GateVerdict::Insufficient;
    r.host_late = [(1, 0, 0.0031, 0.0121), (2, 0, 0.0035, 0.0140)]
        .map(|(concurrency, context_tokens, late, value)| HostLateCell {
            concurrency,
            context_tokens,
            metric: ItlP90,
            lateness_p99_s: late,
            value_s: value,
        })
        .to_vec();
    let l = layout(&r);
    assert_starts_with(
        &l.first_line,
        "? insufficient: ITL p90 not vouched for in 2 cells: the host ran the gate's probe 3.10–3.50 ms late at p99 (ITL p90 12.1–14.0 ms); a quieter runner decides it; no regression proven in 6 cells",
    );
    assert_eq!(l.latency.len(), 1, "{:?}", l.latency);
    assert_eq!(
        l.latency[0].change,
        "? not vouched for in 2 cells (the host ran the gate's probe 3.10–3.50 ms late at p99)"
    );
    assert_eq!(l.latency[0].values, "now 12.1–14.0 ms");
}

/// A gated latency whose interval reaches the change that fails is not vouched for where it
/// does: the first line names those cells and how far each bound reaches before anything that
/// reads like a pass, and the row says it beside the changes (a history recorded on a busy
/// host let a tripled ITL p99 read `unchanged` at +47% to +105%, `docs/statistics.md`).
#[test]
fn a_gated_latency_whose_bound_reaches_the_change_that_fails_is_not_vouched_for() {
    let mut r = pass();
    r.cell_metrics_gated = vec![ItlP90];
    for i in 0..r.cells.len() {
        let m = metric_in(&mut r, i, ItlP90);
        m.margin = 0.5;
        (m.change, m.ci_low, m.ci_high) = match i {
            1 => (0.60, 0.31, 0.83),
            2 => (0.70, 0.40, 0.974),
            _ => (0.0, -0.1, 0.1),
        };
        m.candidate = m.baseline * (1.0 + m.change);
    }
    r.gate = GateVerdict::Insufficient;
    let l = layout(&r);
    assert_starts_with(
        &l.first_line,
        "? insufficient: ITL p90 could be +50.0% or worse in 2 cells (C=4 / 0 up to +97.4%, C=2 / 0 up to +83.0%; baseline runs on a quieter runner or longer windows narrow it); no regression proven in 6 cells",
    );
    assert_eq!(
        l.latency[0].change,
        "? 0.0% to +70.0% in 6 cells (fails beyond +50.0%); not vouched for in 2 cells (95% bound to +97.4%)"
    );
    let md = markdown(&l, true);
    assert_contains(&md, "not vouched for in 2 cells (95% bound to +97.4%)");
}
