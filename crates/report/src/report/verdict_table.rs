//! Verdict tables for people: the comparison in the one layout every surface shares
//! ([`crate::report::layout`]), as a terminal table and as GitHub Markdown. Rendering only:
//! nothing is computed here beyond formatting what the decision rule wrote into the
//! [`ComparisonReport`].

use crate::report::layout;
use infergate_schema::verdict::ComparisonReport;

/// The terminal table look (rounded box, solid lines), as llm-decode-bench's console tables.
pub(crate) const TABLE_STYLE: comfy_table::TableStyle = comfy_table::presets::UTF8_FULL_CONDENSED
    .with_rounded_corners()
    .header_lines(comfy_table::ContentLineStyle::new('│', '│', '│'))
    .content_lines(comfy_table::ContentLineStyle::new('│', '│', '│'))
    .header_separator(comfy_table::LineStyle::new('├', '─', '┼', '┤'));

/// The comparison for a terminal: first line, matrix, legend, details (at most
/// [`crate::report::console::CONSOLE_WIDTH`] columns).
pub fn text(report: &ComparisonReport) -> String {
    text_with(report, &infergate_schema::answer::StepContext::default())
}

/// [`text`] with the next steps of a gate whose config and `fail_on` are known.
pub fn text_with(
    report: &ComparisonReport,
    steps: &infergate_schema::answer::StepContext,
) -> String {
    infergate_io::untrusted_text::console(&layout::console(&layout::layout_with(report, steps)))
}

/// The comparison as GitHub-flavoured Markdown: first line, matrix, legend, Details collapsed.
pub fn markdown(report: &ComparisonReport) -> String {
    layout::markdown(&layout::layout(report), true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use infergate_schema::results::{HardwareFingerprint, ProfileKey};
    use infergate_schema::verdict::fixtures::{self, metric};
    use infergate_schema::verdict::{
        BaselineSummary, CellComparison, CellVerdict, DecisionBasis, GateVerdict, MatrixTest,
        Metric, MetricComparison, RuleSummary,
    };

    fn cell(
        conc: u32,
        ctx: u64,
        verdict: CellVerdict,
        reason: Option<&str>,
        metrics: Vec<MetricComparison>,
    ) -> CellComparison {
        CellComparison {
            provisional: false,
            history_too_short: false,
            not_compared: None,
            concurrency: conc,
            context_tokens: ctx,
            verdict,
            reason: reason.map(Into::into),
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
        let matrix = infergate_schema::results::MatrixSpec {
            model: "m".into(),
            concurrency: vec![1, 8],
            contexts: vec![8192, 32768],
            timing: infergate_schema::results::CellTiming {
                duration_s: 30.0,
                warmup_s: 5.0,
                max_tokens: 256,
                unique_context_percent: 25.0,
                sub_windows: 6,
                ..infergate_schema::results::CellTiming::DEFAULT
            },
            repetitions: 1,
        };
        let profile = ProfileKey::derive(hw, "vllm|<b>", "org/`evil`|<script>x</script>", &matrix);
        use CellVerdict::*;
        use Metric::*;
        let matrix_test = MatrixTest {
            change: -0.031,
            ci_low: -0.04,
            ci_high: -0.022,
            margin: 0.02,
            p_value: 0.0002,
            verdict: Regression,
            cells: 3,
            check: None,
        };
        let base = fixtures::report(
            GateVerdict::Regression,
            vec![
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
                            decided_on: Some(infergate_schema::verdict::DecidedChange {
                                basis: DecisionBasis::VsRun,
                                change: -0.045,
                                ci_low: -0.061,
                                ci_high: -0.029,
                                matrix_change: None,
                            }),
                            ..metric(AggregateTps, 480.0, -0.074, 0.017, Regression)
                        },
                        MetricComparison {
                            decided_on: Some(infergate_schema::verdict::DecidedChange {
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
            matrix_test,
        );
        ComparisonReport {
            profile,
            candidate_runs: vec!["cand-1".into()],
            baseline: BaselineSummary {
                runs: Vec::new(),
                level_runs: vec!["b1".into(), "b2".into(), "b3".into()],
                noise_runs: 12,
                metric_since: Vec::new(),
            },
            headline: "✗ aggregate tok/s −3.1% [−4.0, −2.2] over 3 cells, 2 of them regressed"
                .into(),
            rule: RuleSummary {
                shares: None,
                ..base.rule
            },
            sensitivity: None,
            ..base
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
    fn no_console_line_is_wider_than_100_columns() {
        let t = text(&report());
        assert!(crate::report::console::fits(&t), "{t}");
    }
}
