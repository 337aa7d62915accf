//! Verdict tables for people: the comparison as a matrix (context rows x concurrency columns),
//! each cell showing the primary metric's relative change, its confidence interval and a verdict
//! mark, as a terminal table and as GitHub Markdown. Rendering only: nothing is computed here
//! beyond formatting what the decision rule wrote into the [`ComparisonReport`].

use std::collections::BTreeSet;

use comfy_table::{CellAlignment, Table};

use crate::report::markdown::escape;
use crate::results::context_label;
use crate::verdict::{
    CellComparison, CellVerdict, ComparisonReport, DecisionBasis, Metric, MetricComparison,
};

/// The one-character mark of a verdict, used in both tables and the legend.
pub(crate) fn mark(verdict: CellVerdict) -> &'static str {
    match verdict {
        CellVerdict::Regression => "✗",
        CellVerdict::Unchanged => "✓",
        CellVerdict::Improvement => "▲",
        CellVerdict::Inconclusive => "?",
        CellVerdict::NotComparable => "–",
        CellVerdict::CapacityRegression => "⚠",
        CellVerdict::ErrorRegression => "‼",
        CellVerdict::Saturated => "≈",
        CellVerdict::SaturationRegression => "⚠",
    }
}

/// The terminal table look (rounded box, solid lines), as llm-decode-bench's console tables.
pub(crate) const TABLE_STYLE: comfy_table::TableStyle = comfy_table::presets::UTF8_FULL_CONDENSED
    .with_rounded_corners()
    .header_lines(comfy_table::ContentLineStyle::new('│', '│', '│'))
    .content_lines(comfy_table::ContentLineStyle::new('│', '│', '│'))
    .header_separator(comfy_table::LineStyle::new('├', '─', '┼', '┤'));

/// The legend printed under both tables.
const LEGEND: &str = "Beside a regression or an improvement is the change it was decided on: \"vs run\" is the cell against the rest of its own run (the whole matrix's move taken out); \"with the matrix\" is a cell that moved with the matrix-wide change.\n✗ regression · ✓ unchanged · ▲ improvement · ? inconclusive · – not comparable · ⚠ capacity regression (fit in its history, capacity-limited on both boots) · ‼ error regression (measured in the baseline, error now) · ≈ saturated (the engine preempted or retracted requests: not compared) · saturated ⚠ = saturation regression (saturated on both boots, never in its history)";

use crate::verdict::{signed_number as signed, signed_percent as pct};

/// `−7.4% [−9.1, −5.6]`: the total change, or for a regression or an improvement the change
/// it was decided on, followed by what that is when it is not the total (`vs run`, `with the
/// matrix: −60.0%`), so the figure beside a verdict is always the one that verdict stands on.
fn change_with_interval(m: &MetricComparison) -> String {
    let decided = matches!(
        m.verdict,
        CellVerdict::Regression | CellVerdict::Improvement
    );
    let d = if decided {
        m.shown_change()
    } else {
        m.shown_change_total()
    };
    let basis = match d.basis {
        DecisionBasis::Total => String::new(),
        DecisionBasis::VsRun => " vs run".to_string(),
        DecisionBasis::WithMatrix => format!(" ({})", d.label()),
    };
    format!(
        "{} [{}, {}]{basis}",
        pct(d.change),
        signed(d.ci_low * 100.0, 1),
        signed(d.ci_high * 100.0, 1)
    )
}

/// Text of one matrix cell (without Markdown escaping; only our own characters appear).
fn cell_text(c: &CellComparison) -> String {
    match (c.verdict, c.primary()) {
        (CellVerdict::NotComparable, _) => mark(c.verdict).to_string(),
        (CellVerdict::CapacityRegression, None) => format!("capacity {}", mark(c.verdict)),
        (CellVerdict::ErrorRegression, _) => format!("error {}", mark(c.verdict)),
        (CellVerdict::Saturated | CellVerdict::SaturationRegression, _) => {
            format!("saturated {}", mark(c.verdict))
        }
        (CellVerdict::Inconclusive, None) if c.provisional => "provisional ?".to_string(),
        (v, Some(m)) => format!("{} {}", change_with_interval(m), mark(v)),
        (v, None) => mark(v).to_string(),
    }
}

/// The matrix's axes: ascending contexts (rows) and concurrencies (columns).
fn axes(report: &ComparisonReport) -> (Vec<u64>, Vec<u32>) {
    let ctx: BTreeSet<u64> = report.cells.iter().map(|c| c.context_tokens).collect();
    let conc: BTreeSet<u32> = report.cells.iter().map(|c| c.concurrency).collect();
    (ctx.into_iter().collect(), conc.into_iter().collect())
}

fn find(report: &ComparisonReport, conc: u32, ctx: u64) -> Option<&CellComparison> {
    report
        .cells
        .iter()
        .find(|c| c.concurrency == conc && c.context_tokens == ctx)
}

/// The matrix-wide test as one line, when it ran.
fn matrix_line(report: &ComparisonReport) -> Option<String> {
    report.matrix_test.as_ref().map(|t| {
        if let Some(c) = &t.check {
            // The test's own arithmetic: statistic, reference, boundary, alpha, look.
            return format!(
                "Matrix-wide: mean change {} [{}, {}] over {} cells; {}",
                pct(t.change),
                signed(t.ci_low * 100.0, 1),
                signed(t.ci_high * 100.0, 1),
                t.cells,
                c.line("test")
            );
        }
        format!(
            "Matrix-wide: mean change {} [{}, {}] over {} cells, margin {:.1}%, p = {} → {} {}",
            pct(t.change),
            signed(t.ci_low * 100.0, 1),
            signed(t.ci_high * 100.0, 1),
            t.cells,
            t.margin * 100.0,
            p_value(t.p_value),
            t.verdict.as_str(),
            mark(t.verdict)
        )
    })
}

/// What the baseline can detect (the minimum detectable effects at the design power).
fn sensitivity_line(report: &ComparisonReport) -> Option<String> {
    let s = report.sensitivity.as_ref()?;
    let mut cells = s.cells.iter().map(|c| c.mde).collect::<Vec<_>>();
    cells.sort_by(f64::total_cmp);
    let mut line = format!(
        "Detectable at {:.0}% power with {} baseline run{}:",
        s.design_power * 100.0,
        s.history_runs,
        if s.history_runs == 1 { "" } else { "s" }
    );
    if let Some(m) = s.matrix_mde {
        line.push_str(&format!(" a uniform {} matrix-wide;", pct(m)));
    }
    if let (Some(median), Some(worst)) = (s.median_cell_mde(), cells.first()) {
        line.push_str(&format!(
            " one cell alone {} (median cell), {} (least sensitive);",
            pct(median),
            pct(*worst)
        ));
    }
    line.pop();
    if !s.sufficient {
        line.push_str(&format!(
            ". {}",
            crate::stats::headline::thin_baseline_words(s)
        ));
    }
    Some(line)
}

fn p_value(p: f64) -> String {
    if p < 0.001 {
        "<0.001".into()
    } else {
        format!("{p:.3}")
    }
}

/// `C=8 / 32k`.
fn coord(c: &CellComparison) -> String {
    format!("C={} / {}", c.concurrency, context_label(c.context_tokens))
}

/// Cells whose verdict carries a reason worth reading (not comparable, capacity, inconclusive).
fn notes(report: &ComparisonReport) -> Vec<(String, CellVerdict, String)> {
    report
        .cells
        .iter()
        .filter_map(|c| {
            c.reason
                .as_ref()
                .filter(|_| c.verdict != CellVerdict::Unchanged)
                .map(|r| (coord(c), c.verdict, r.clone()))
        })
        .collect()
}

fn rule_line(report: &ComparisonReport) -> String {
    let r = &report.rule;
    if r.noise_k > 0.0 {
        // A verdict of the earlier rule (margins scaled by the noise, Holm), read from a file.
        return format!(
            "Rule: {:.0}% intervals; margin = max({:.1}%, {} × noise); {} correction at α = {}; baseline level from {} run(s), noise from {}",
            r.confidence * 100.0,
            r.min_effect * 100.0,
            r.noise_k,
            r.correction,
            r.alpha,
            report.baseline.level_runs.len(),
            report.baseline.noise_runs
        );
    }
    format!(
        "Rule: α = {} per gate ({} correction; half to the matrix-wide test); margin {:.1}% for cells, rows and columns; {:.0}% intervals; baseline level from {} run(s), noise from {}",
        r.alpha,
        r.correction,
        r.min_effect * 100.0,
        r.confidence * 100.0,
        report.baseline.level_runs.len(),
        report.baseline.noise_runs
    )
}

/// The verdict matrix as a terminal table, with the headline, the matrix-wide test, notes and
/// the legend.
pub(crate) fn text(report: &ComparisonReport) -> String {
    crate::untrusted_text::console(&text_table(report))
}

fn text_table(report: &ComparisonReport) -> String {
    let (contexts, concs) = axes(report);
    let mut out = String::new();
    out.push_str(&format!(
        "Gate: {} — {}\n",
        report.gate.as_str(),
        report.headline
    ));
    out.push_str(&format!(
        "Profile: {} (engine {}, model {}){}\n",
        report.profile.key,
        report.profile.engine,
        report.profile.model,
        report
            .suite
            .as_deref()
            .map(|s| format!(", suite {s}"))
            .unwrap_or_default()
    ));
    if report.cells.is_empty() {
        out.push_str("No cells to compare.\n");
    } else {
        out.push_str("Aggregate tok/s: change vs baseline [confidence interval, %] and verdict\n");
        let mut table = Table::new();
        table
            .load_style(crate::report::verdict_table::TABLE_STYLE)
            .force_no_tty();
        let mut header = vec!["ctx \\ conc".to_string()];
        header.extend(concs.iter().map(u32::to_string));
        table.set_header(header);
        for &ctx in &contexts {
            let mut row = vec![context_label(ctx)];
            for &conc in &concs {
                row.push(find(report, conc, ctx).map(cell_text).unwrap_or_default());
            }
            table.add_row(row);
        }
        for i in 1..=concs.len() {
            if let Some(col) = table.column_mut(i) {
                col.set_cell_alignment(CellAlignment::Right);
            }
        }
        out.push_str(&table.to_string());
        out.push('\n');
    }
    if let Some(line) = matrix_line(report) {
        out.push_str(&line);
        out.push('\n');
    }
    if let Some(line) = sensitivity_line(report) {
        out.push_str(&line);
        out.push('\n');
    }
    for (at, verdict, reason) in notes(report) {
        out.push_str(&format!(
            "{} {at}: {} — {reason}\n",
            mark(verdict),
            verdict.as_str()
        ));
    }
    out.push_str(&rule_line(report));
    out.push('\n');
    out.push_str(LEGEND);
    out.push('\n');
    out
}

/// A metric value in people's units (tok/s, ms, J/token).
fn value(metric: Metric, v: f64) -> String {
    match metric {
        Metric::TtftP50 | Metric::TtftP90 | Metric::ItlP50 | Metric::ItlP90 => {
            format!("{:.1} ms", v * 1000.0)
        }
        Metric::JoulesPerToken => format!("{v:.3} J"),
        _ => format!("{v:.1}"),
    }
}

/// The verdict matrix as GitHub-flavoured Markdown: headline, matrix, matrix-wide test, notes,
/// a collapsible section with the non-primary metrics, and the legend. Engine-supplied text is
/// escaped.
pub(crate) fn markdown(report: &ComparisonReport) -> String {
    let (contexts, concs) = axes(report);
    let mut out = String::new();
    out.push_str(&format!(
        "**Gate: {}** — {}\n\n",
        report.gate.as_str(),
        escape(&report.headline)
    ));
    out.push_str(&format!(
        "Engine {} · model {} · profile {}{}\n\n",
        escape(&report.profile.engine),
        escape(&report.profile.model),
        escape(&report.profile.key),
        report
            .suite
            .as_deref()
            .map(|s| format!(" · suite {}", escape(s)))
            .unwrap_or_default()
    ));
    if report.cells.is_empty() {
        out.push_str("No cells to compare.\n\n");
    } else {
        out.push_str("Aggregate tok/s, change vs baseline [confidence interval, %]:\n\n");
        out.push_str("| ctx \\\\ conc |");
        for c in &concs {
            out.push_str(&format!(" {c} |"));
        }
        out.push_str("\n|---|");
        for _ in &concs {
            out.push_str("---:|");
        }
        out.push('\n');
        for &ctx in &contexts {
            out.push_str(&format!("| {} |", context_label(ctx)));
            for &conc in &concs {
                let t = find(report, conc, ctx).map(cell_text).unwrap_or_default();
                out.push_str(&format!(" {} |", escape(&t)));
            }
            out.push('\n');
        }
        out.push('\n');
    }
    if let Some(line) = matrix_line(report) {
        out.push_str(&escape(&line));
        out.push_str("\n\n");
    }
    if let Some(line) = sensitivity_line(report) {
        out.push_str(&escape(&line));
        out.push_str("\n\n");
    }
    let notes = notes(report);
    if !notes.is_empty() {
        for (at, verdict, reason) in notes {
            out.push_str(&format!(
                "- {} {}: {} — {}\n",
                mark(verdict),
                escape(&at),
                verdict.as_str().replace('_', " "),
                escape(&reason)
            ));
        }
        out.push('\n');
    }
    let others: Vec<(&CellComparison, &MetricComparison)> = report
        .cells
        .iter()
        .flat_map(|c| {
            c.metrics
                .iter()
                .filter(|m| m.metric != Metric::AggregateTps)
                .map(move |m| (c, m))
        })
        .collect();
    if !others.is_empty() {
        out.push_str("<details><summary>Other metrics (per cell)</summary>\n\n");
        out.push_str("| cell | metric | baseline | candidate | change [interval, %] | verdict |\n");
        out.push_str("|---|---|---:|---:|---:|---|\n");
        for (c, m) in others {
            out.push_str(&format!(
                "| {} | {} | {} | {} | {} | {} {} |\n",
                escape(&coord(c)),
                escape(m.metric.as_str()),
                value(m.metric, m.baseline),
                value(m.metric, m.candidate),
                change_with_interval(m),
                mark(m.verdict),
                escape(m.verdict.as_str())
            ));
        }
        out.push_str("\n</details>\n\n");
    }
    out.push_str(&escape(&rule_line(report)));
    out.push_str("\n\n");
    out.push_str(LEGEND);
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::{HardwareFingerprint, ProfileKey};
    use crate::verdict::{
        BaselineSummary, Direction, GateVerdict, MatrixTest, RuleSummary, VERDICT_SCHEMA_VERSION,
    };

    fn metric(
        metric: Metric,
        base: f64,
        change: f64,
        half: f64,
        verdict: CellVerdict,
    ) -> MetricComparison {
        MetricComparison {
            metric,
            direction: metric.direction(),
            baseline: base,
            candidate: base * (1.0 + change),
            change,
            ci_low: change - half,
            ci_high: change + half,
            margin: 0.03,
            p_value: 0.0004,
            p_adjusted: 0.008,
            verdict,
            check: None,
            decided_on: None,
        }
    }

    fn cell(
        conc: u32,
        ctx: u64,
        verdict: CellVerdict,
        reason: Option<&str>,
        metrics: Vec<MetricComparison>,
    ) -> CellComparison {
        CellComparison {
            provisional: false,
            concurrency: conc,
            context_tokens: ctx,
            verdict,
            reason: reason.map(String::from),
            metrics,
        }
    }

    fn report() -> ComparisonReport {
        let hw = HardwareFingerprint {
            kind: "gpu".into(),
            gpu_model: Some("NVIDIA H200".into()),
            gpu_count: 1,
            driver_version: Some("580.1".into()),
            cpu_model: None,
        };
        let matrix = crate::results::MatrixSpec {
            model: "m".into(),
            concurrency: vec![1, 8],
            contexts: vec![8192, 32768],
            timing: crate::results::CellTiming {
                duration_s: 30.0,
                warmup_s: 5.0,
                max_tokens: 256,
                unique_context_percent: 25.0,
                sub_windows: 6,
                ..crate::results::CellTiming::DEFAULT
            },
            repetitions: 1,
        };
        let profile = ProfileKey::derive(hw, "vllm|<b>", "org/`evil`|<script>x</script>", &matrix);
        use CellVerdict::*;
        use Metric::*;
        ComparisonReport {
            schema_version: VERDICT_SCHEMA_VERSION,
            profile,
            suite: Some("pr".into()),
            candidate_runs: vec!["cand-1".into()],
            baseline: BaselineSummary {
                level_runs: vec!["b1".into(), "b2".into(), "b3".into()],
                noise_runs: 12,
            },
            gate: GateVerdict::Regression,
            headline: "2 regressions, worst −7.4% at C=8 / 32k".into(),
            matrix_test: Some(MatrixTest {
                change: -0.031,
                ci_low: -0.04,
                ci_high: -0.022,
                margin: 0.02,
                p_value: 0.0002,
                verdict: Regression,
                cells: 3,
                check: None,
            }),
            lines: Vec::new(),
            cells: vec![
                cell(
                    1,
                    8192,
                    Unchanged,
                    None,
                    vec![
                        metric(AggregateTps, 140.0, 0.004, 0.01, Unchanged),
                        metric(TtftP50, 0.187, 0.02, 0.05, Unchanged),
                    ],
                ),
                cell(
                    8,
                    8192,
                    Improvement,
                    None,
                    vec![metric(AggregateTps, 560.0, 0.061, 0.015, Improvement)],
                ),
                cell(
                    1,
                    32768,
                    Inconclusive,
                    Some("interval straddles the 3.0% margin"),
                    vec![metric(AggregateTps, 143.0, -0.032, 0.02, Inconclusive)],
                ),
                cell(
                    8,
                    32768,
                    Regression,
                    None,
                    vec![
                        MetricComparison {
                            decided_on: Some(crate::verdict::DecidedChange {
                                basis: DecisionBasis::VsRun,
                                change: -0.045,
                                ci_low: -0.061,
                                ci_high: -0.029,
                                matrix_change: None,
                            }),
                            ..metric(AggregateTps, 480.0, -0.074, 0.017, Regression)
                        },
                        MetricComparison {
                            decided_on: Some(crate::verdict::DecidedChange {
                                basis: DecisionBasis::WithMatrix,
                                change: 0.081,
                                ci_low: 0.061,
                                ci_high: 0.101,
                                matrix_change: Some(0.07),
                            }),
                            ..metric(ItlP90, 0.0231, 0.081, 0.02, Regression)
                        },
                    ],
                ),
                cell(
                    1,
                    131072,
                    CapacityRegression,
                    Some("capacity-limited now: running_reqs=5/8 | <queue>"),
                    vec![],
                ),
                cell(
                    8,
                    131072,
                    NotComparable,
                    Some("capacity-limited on both sides"),
                    vec![],
                ),
            ],
            confirmation: None,
            coverage: None,
            sensitivity: None,
            rule: RuleSummary {
                alpha: 0.01,
                min_effect: 0.03,
                noise_k: 1.0,
                correction: "holm".into(),
                confidence: 0.95,
            },
        }
    }

    #[test]
    fn text_table_snapshot() {
        insta::assert_snapshot!(text(&report()));
    }

    #[test]
    fn markdown_table_snapshot() {
        let md = markdown(&report());
        assert!(!md.contains("<script>"), "model name must be escaped");
        assert!(!md.contains("`evil`"), "backticks must be escaped");
        insta::assert_snapshot!(md);
    }

    #[test]
    fn marks_and_numbers_use_typographic_minus() {
        assert_eq!(pct(-0.074), "−7.4%");
        assert_eq!(pct(0.012), "+1.2%");
        assert_eq!(mark(CellVerdict::CapacityRegression), "⚠");
        let _ = Direction::HigherIsBetter;
    }
}
