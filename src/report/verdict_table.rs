//! Verdict tables for people: a terminal table and a Markdown table of a comparison, context
//! rows x concurrency columns (under construction: the statistics issue fills it in).

use crate::verdict::ComparisonReport;

/// The verdict matrix as a terminal table.
pub fn text(report: &ComparisonReport) -> String {
    format!("{} ({} cells)\n", report.headline, report.cells.len())
}

/// The verdict matrix as a GitHub-flavoured Markdown table.
pub fn markdown(report: &ComparisonReport) -> String {
    format!(
        "**{}**\n",
        crate::report::markdown::escape(&report.headline)
    )
}
